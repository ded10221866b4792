/*
 * receiver — `tollgate-stub receive` (see receiver.h).
 *
 *   tollgate-stub receive --port N --secret-file PATH [--host H] [--log PATH]
 *                         [--fault none|slow:MS|status:CODE|drop] [--fault-first N]
 *                         [--tolerance-s S]
 *
 * A delivery whose signature does not hold is answered 400 and logged with
 * "sig":"bad" (or "stale", "missing"); it is never counted as an event.
 * With --fault-first N only the first N deliveries meet the fault.
 * Thread per connection, so a slow answer holds only its own connection.
 */
#include "receiver.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/strnum.h"
#include "core/tg_error.h"
#include "platform/clock.h"
#include "platform/event_sig.h"
#include "platform/secmem.h"
#include "platform/secret_file.h"

#define BODY_MAX     (64 * 1024)
#define SEEN_MAX     (1u << 20)
#define SECRET_BYTES 1024

enum fault { FAULT_NONE, FAULT_SLOW, FAULT_STATUS, FAULT_DROP };

struct receiver {
        char *secret_buf; /* secret memory: the file's lines */
        const char *secrets[EVENT_SIG_SECRETS];
        unsigned nsecrets;
        enum fault fault;
        int64_t fault_arg;
        int64_t fault_first; /* -1: every delivery */
        int64_t tolerance_s;
        FILE *log;
        pthread_mutex_t lock; /* log, seen, count */
        int64_t *seen;
        size_t nseen;
        int64_t count;
};

struct body {
        char *data;
        size_t len;
        bool too_big;
};

static bool seen_add(struct receiver *rc, int64_t id)
{
        for (size_t i = 0; i < rc->nseen; i++)
                if (rc->seen[i] == id)
                        return true;
        if (rc->nseen < SEEN_MAX)
                rc->seen[rc->nseen++] = id;
        return false;
}

static void log_line(struct receiver *rc, json_t *o)
{
        char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;

        if (line) {
                fprintf(rc->log, "%s\n", line);
                fflush(rc->log);
        }
        free(line);
        json_decref(o);
}

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status, const char *text)
{
        struct MHD_Response *res =
            MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
        enum MHD_Result r;

        if (!res)
                return MHD_NO;
        r = MHD_queue_response(conn, status, res);
        MHD_destroy_response(res);
        return r;
}

/* What one verified (or refused) delivery gets. */
static enum MHD_Result handle(struct receiver *rc, struct MHD_Connection *conn,
                              const struct body *b)
{
        const char *sig = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, EVENT_SIG_HEADER);
        int r = event_sig_check(sig, rc->secrets, rc->nsecrets, b->data ? b->data : "", b->len,
                                (int64_t)time(NULL), rc->tolerance_s);
        json_t *ev = NULL, *line;
        int64_t id = 0, n;
        bool dup = false, faulted;

        if (r < 0 || b->too_big) {
                const char *why = b->too_big       ? "too_big"
                                  : !sig           ? "missing"
                                  : r == TG_ERANGE ? "stale"
                                                   : "bad";
                pthread_mutex_lock(&rc->lock);
                log_line(rc, json_pack("{s:s}", "sig", why));
                pthread_mutex_unlock(&rc->lock);
                return answer(conn, 400, "{\"error\":\"bad_signature\"}");
        }
        ev = json_loadb(b->data, b->len, 0, NULL);
        if (!ev || !json_is_integer(json_object_get(ev, "id"))) {
                json_decref(ev);
                return answer(conn, 400, "{\"error\":\"bad_body\"}");
        }
        id = json_integer_value(json_object_get(ev, "id"));
        pthread_mutex_lock(&rc->lock);
        n = ++rc->count;
        faulted = rc->fault != FAULT_NONE && (rc->fault_first < 0 || n <= rc->fault_first);
        pthread_mutex_unlock(&rc->lock);
        if (faulted && rc->fault == FAULT_SLOW) {
                /* logged when answered: what a receiver has acknowledged */
                struct timespec ts = {.tv_sec = rc->fault_arg / 1000,
                                      .tv_nsec = (long)(rc->fault_arg % 1000) * 1000000L};
                nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&rc->lock);
        if (!faulted || rc->fault == FAULT_SLOW)
                dup = seen_add(rc, id); /* counted as received only if answered 2xx */
        /* at_ms: when the answer goes out (wall clock), for a test that
         * must tell the answers a killed sender never read */
        line = json_pack("{s:s, s:I, s:O, s:O, s:O, s:b, s:s, s:I}", "sig", "ok", "id",
                         (json_int_t)id, "operation_id", json_object_get(ev, "operation_id"),
                         "state", json_object_get(ev, "state"), "previous_state",
                         json_object_get(ev, "previous_state"), "dup", dup, "fault",
                         faulted ? (rc->fault == FAULT_SLOW   ? "slow"
                                    : rc->fault == FAULT_DROP ? "drop"
                                                              : "status")
                                 : "none",
                         "at_ms", (json_int_t)clock_wall_now());
        log_line(rc, line);
        pthread_mutex_unlock(&rc->lock);
        json_decref(ev);
        if (faulted && rc->fault == FAULT_DROP)
                return MHD_NO; /* the connection closes with no answer */
        if (faulted && rc->fault == FAULT_STATUS)
                return answer(conn, (unsigned)rc->fault_arg, "{\"error\":\"fault\"}");
        return answer(conn, 200, "{\"ok\":true}");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
        struct receiver *rc = cls;
        struct body *b = *con_cls;

        (void)url;
        (void)version;
        if (!b) {
                b = calloc(1, sizeof(*b));
                if (!b)
                        return MHD_NO;
                *con_cls = b;
                return MHD_YES;
        }
        if (*upload_size > 0) {
                if (b->len + *upload_size > BODY_MAX) {
                        b->too_big = true;
                } else {
                        char *d = realloc(b->data, b->len + *upload_size + 1);
                        if (!d)
                                return MHD_NO;
                        memcpy(d + b->len, upload, *upload_size);
                        b->data = d;
                        b->len += *upload_size;
                        d[b->len] = '\0';
                }
                *upload_size = 0;
                return MHD_YES;
        }
        if (strcmp(method, "POST") != 0)
                return answer(conn, 405, "{\"error\":\"method\"}");
        return handle(rc, conn, b);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct body *b = *con_cls;

        (void)cls;
        (void)conn;
        (void)toe;
        if (b) {
                free(b->data);
                free(b);
                *con_cls = NULL;
        }
}

static int parse_fault(struct receiver *rc, const char *v)
{
        if (strcmp(v, "none") == 0)
                rc->fault = FAULT_NONE;
        else if (strcmp(v, "drop") == 0)
                rc->fault = FAULT_DROP;
        else if (strncmp(v, "slow:", 5) == 0 && strnum_i64(v + 5, 0, 3600000, &rc->fault_arg) == 0)
                rc->fault = FAULT_SLOW;
        else if (strncmp(v, "status:", 7) == 0 && strnum_i64(v + 7, 100, 599, &rc->fault_arg) == 0)
                rc->fault = FAULT_STATUS;
        else
                return TG_EINVAL;
        return 0;
}

static int read_secrets(struct receiver *rc, const char *path)
{
        char err[300];
        size_t n = 0;
        char *p;
        int r = secret_file_read(path, SECRET_FILE_REGULAR | SECRET_FILE_PRIVATE, SECRET_BYTES,
                                 &rc->secret_buf, &n, err, sizeof(err));

        if (r < 0) {
                fprintf(stderr, "tollgate-stub receive: --secret-file: %s\n", err);
                return r;
        }
        /* one secret a line, at most two; trailing blanks trimmed */
        p = rc->secret_buf;
        while (*p && rc->nsecrets < EVENT_SIG_SECRETS) {
                char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                size_t end = secret_file_trim(p, len);

                if (nl)
                        *nl = '\0';
                p[end] = '\0';
                if (end > 0)
                        rc->secrets[rc->nsecrets++] = p;
                if (!nl)
                        break;
                p = nl + 1;
        }
        if (rc->nsecrets == 0) {
                fprintf(stderr, "tollgate-stub receive: --secret-file: %s is empty\n", path);
                return TG_EINVAL;
        }
        return 0;
}

static int usage(void)
{
        fputs("usage: tollgate-stub receive --port N --secret-file PATH [--host H] [--log PATH]\n"
              "       [--fault none|slow:MS|status:CODE|drop] [--fault-first N] "
              "[--tolerance-s S]\n",
              stderr);
        return 2;
}

int receiver_main(int argc, char **argv)
{
        struct receiver rc = {.fault_first = -1, .tolerance_s = 300, .log = stdout};
        const char *secret_file = NULL, *log_path = NULL, *host = "127.0.0.1";
        int64_t port = -1;
        struct MHD_Daemon *mhd;
        struct sockaddr_in sa;
        sigset_t set;
        int sig = 0, status = 1;

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                int bad = 0;

                if (!v)
                        return usage();
                if (strcmp(a, "--port") == 0)
                        bad = strnum_i64(v, 0, 65535, &port);
                else if (strcmp(a, "--secret-file") == 0)
                        secret_file = v;
                else if (strcmp(a, "--host") == 0)
                        host = v;
                else if (strcmp(a, "--log") == 0)
                        log_path = v;
                else if (strcmp(a, "--fault") == 0)
                        bad = parse_fault(&rc, v);
                else if (strcmp(a, "--fault-first") == 0)
                        bad = strnum_i64(v, 0, INT64_MAX, &rc.fault_first);
                else if (strcmp(a, "--tolerance-s") == 0)
                        bad = strnum_i64(v, 1, 86400 * 365, &rc.tolerance_s);
                else
                        bad = TG_EINVAL;
                if (bad < 0) {
                        fprintf(stderr, "tollgate-stub receive: bad %s '%s'\n", a, v);
                        return 2;
                }
                i++;
        }
        if (port < 0 || !secret_file)
                return usage();
        if (read_secrets(&rc, secret_file) < 0)
                return 2;
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
                fprintf(stderr, "tollgate-stub receive: --host must be an IPv4 address\n");
                status = 2;
                goto out;
        }
        if (log_path)
                rc.log = fopen(log_path, "a");
        rc.seen = calloc(SEEN_MAX, sizeof(*rc.seen));
        if (!rc.log || !rc.seen) {
                fprintf(stderr, "tollgate-stub receive: cannot open %s\n",
                        rc.log ? "its seen-id table" : log_path);
                goto out;
        }
        pthread_mutex_init(&rc.lock, NULL);
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);
        mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
                               NULL, NULL, on_request, &rc, MHD_OPTION_SOCK_ADDR, &sa,
                               MHD_OPTION_NOTIFY_COMPLETED, on_completed, &rc,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60, MHD_OPTION_END);
        if (!mhd) {
                fprintf(stderr, "tollgate-stub receive: cannot listen on %s:%" PRId64 "\n", host,
                        port);
        } else {
                fprintf(stderr, "tollgate-stub receive: listening on %s:%" PRId64 "\n", host, port);
                sigwait(&set, &sig);
                MHD_stop_daemon(mhd);
                status = 0;
        }
        pthread_mutex_destroy(&rc.lock);
out:
        if (rc.log && rc.log != stdout)
                fclose(rc.log);
        secmem_free(rc.secret_buf);
        free(rc.seen);
        return status;
}
