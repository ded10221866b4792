/*
 * http_server — libmicrohttpd behind a one-handler interface (see the
 * header). Each request gets a struct req_state, created by MHD's URI-log
 * callback (the only place MHD shows the request target before it
 * percent-decodes it) and freed by the completion callback. The access
 * callback collects the body into a buffer bounded by max_body_bytes (or
 * large_body_bytes for the one path named large_body_path, decided from the
 * target before a byte of the body is read) and, once the body is complete
 * (or refused), calls the handler exactly once.
 *
 * A request the handler holds (a long poll) has its connection suspended
 * and its req_state on the server's `held` list; the watchdog thread
 * resumes it at its recheck time (or at once after http_server_wake()), and
 * MHD then calls the access callback again, which calls the handler again.
 * A connection is suspended under the server's lock and only by MHD's
 * thread, and resumed by exactly the thread that took it off the list, so
 * it is never resumed twice nor left suspended when the daemon stops.
 *
 * Invariants: the body buffer never exceeds its request's bound + 1 bytes; every
 * req_state is freed exactly once (MHD calls the completion callback for
 * every request whose URI-log callback ran); no MHD type leaves this file.
 */
#include "net/http_server.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/encode.h"
#include "core/tg_error.h"
#include "platform/clock.h"

#define MAX_HEADERS    64
#define DEFAULT_MEMORY (32 * 1024)
#define HOLD_MAX_MS    60000 /* one hold at most, before the handler is asked again */
#define HELD_STOPPING                                                                              \
        "{\"error\":{\"code\":\"shutting_down\",\"message\":\"the server is stopping\","           \
        "\"field\":null,\"retryable\":true},\"request_id\":null}"
#define INTERNAL_ERROR                                                                             \
        "{\"error\":{\"code\":\"internal\",\"message\":\"internal error\","                        \
        "\"field\":null,\"retryable\":true},\"request_id\":null}"

/* One open connection, watched for the request read deadline. MHD's own
 * connection timeout is an idle timeout (any byte resets it), so a client
 * dripping a header line a second is never cut by it. The watchdog thread
 * shuts down the connection's socket through a descriptor of its own (a
 * dup: closing or reusing MHD's number can never make it touch another
 * connection); MHD then reads the end of the stream and closes the
 * connection itself, in its own thread. */
struct conn_watch {
        bool used;
        bool reading;     /* a request is on its way: the deadline runs */
        bool cut;         /* shut down already */
        int fd;           /* our dup of the connection's socket */
        tg_mono_ns since; /* when the connection became ready for this request */
};

struct req_state;

struct http_server {
        struct MHD_Daemon *daemon;
        http_handler_fn handler;
        void *userdata;
        size_t max_body_bytes;
        char large_body_path[64]; /* "": none */
        size_t large_body_bytes;
        uint16_t port;
        /* the request read deadline (0: none) and its watchdog */
        tg_mono_ns read_timeout;
        pthread_mutex_t lock; /* watches, stopping, cuts */
        pthread_cond_t wake;
        pthread_t watchdog;
        bool watchdog_running;
        bool stopping;
        struct conn_watch *watches; /* max_connections of them */
        unsigned nwatches;
        uint64_t cuts;
        /* requests held by the handler, their connections suspended */
        struct req_state *held;
        unsigned nheld;
        bool wake_all; /* http_server_wake(): resume every held request now */
};

struct req_state {
        struct http_server *server;
        char *target; /* the raw request target, as sent */
        bool started; /* the access callback has seen this request */
        bool answered;
        int problem_status;
        const char *problem;
        char *body;
        size_t body_len, body_cap;
        size_t max_body; /* this request's bound, set when it starts */
        struct http_header headers[MAX_HEADERS];
        char *copies[MAX_HEADERS]; /* values that hid bytes behind a NUL, whole (else NULL) */
        size_t header_count;
        bool too_many_headers;
        /* a held request (the handler answers later): the request as built
         * for its first call, kept for the next ones */
        struct http_request req;
        struct MHD_Connection *conn;
        bool held;             /* suspended, on the server's list */
        bool resumed;          /* taken off the list and resumed: call the handler again */
        tg_mono_ns held_since; /* its first hold */
        tg_mono_ns recheck_at; /* resume no later than this */
        struct req_state *next_held;
};

/* ---- requests --------------------------------------------------------- */

const char *http_request_header(const struct http_request *req, const char *name)
{
        if (!req || !name)
                return NULL;
        for (size_t i = 0; i < req->header_count; i++) {
                if (strcasecmp(req->headers[i].name, name) == 0)
                        return req->headers[i].value;
        }
        return NULL;
}

int http_request_header_once(const struct http_request *req, const char *name,
                             const char **ret_value)
{
        const struct http_header *found = NULL;

        if (!req || !name || !ret_value)
                return TG_EINVAL;
        for (size_t i = 0; i < req->header_count; i++) {
                if (strcasecmp(req->headers[i].name, name) != 0)
                        continue;
                if (found)
                        return TG_ECONFLICT;
                found = &req->headers[i];
        }
        if (!found)
                return TG_ENOTFOUND;
        *ret_value = found->value;
        return 0;
}

int http_request_arg(const struct http_request *req, const char *name, char *buf, size_t size)
{
        char key[128];
        const char *p;

        if (!req || !name || !buf || size == 0)
                return TG_EINVAL;
        p = req->query ? req->query : "";
        while (*p) {
                const char *amp = strchr(p, '&');
                const char *end = amp ? amp : p + strlen(p);
                const char *eq = memchr(p, '=', (size_t)(end - p));
                const char *kend = eq ? eq : end;

                if (encode_percent_decode(ENCODE_FORM, p, (size_t)(kend - p), key, sizeof(key),
                                          NULL) == 0 &&
                    strcmp(key, name) == 0) {
                        char *tmp = malloc(size);
                        int r;
                        if (!tmp)
                                return TG_ENOMEM;
                        r = eq ? encode_percent_decode(ENCODE_FORM, eq + 1, (size_t)(end - eq - 1),
                                                       tmp, size, NULL)
                               : encode_percent_decode(ENCODE_FORM, "", 0, tmp, size, NULL);
                        if (r == 0)
                                memcpy(buf, tmp, strlen(tmp) + 1);
                        free(tmp);
                        return r;
                }
                p = amp ? amp + 1 : end;
        }
        return TG_ENOTFOUND;
}

/* ---- responses -------------------------------------------------------- */

void http_response_init(struct http_response *res)
{
        memset(res, 0, sizeof(*res));
}

void http_response_release(struct http_response *res)
{
        if (!res)
                return;
        free(res->body);
        res->body = NULL;
        res->body_len = 0;
}

static bool header_text_ok(const char *s)
{
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if (c < 0x20 || c == 0x7f)
                        return false;
        }
        return true;
}

int http_response_take(struct http_response *res, int status, const char *content_type, char *body,
                       size_t len)
{
        size_t ct_len = content_type ? strlen(content_type) : 0;

        if (!res || status < 100 || status > 599 || ct_len >= sizeof(res->content_type) ||
            (content_type && !header_text_ok(content_type)) || (!body && len > 0)) {
                free(body);
                return TG_EINVAL;
        }
        free(res->body);
        res->status = status;
        if (content_type)
                memcpy(res->content_type, content_type, ct_len + 1);
        else
                res->content_type[0] = '\0';
        res->body = body;
        res->body_len = len;
        return 0;
}

int http_response_set(struct http_response *res, int status, const char *content_type,
                      const char *body, size_t len)
{
        char *copy = malloc(len + 1);

        if (!copy)
                return TG_ENOMEM;
        if (len)
                memcpy(copy, body, len);
        copy[len] = '\0';
        return http_response_take(res, status, content_type, copy, len);
}

int http_response_add_header(struct http_response *res, const char *name, const char *value)
{
        size_t nlen, vlen;

        if (!res || !name || !value)
                return TG_EINVAL;
        if (res->header_count >= HTTP_RESPONSE_MAX_HEADERS)
                return TG_EFULL;
        nlen = strlen(name);
        vlen = strlen(value);
        if (nlen == 0 || nlen >= sizeof(res->headers[0].name) ||
            vlen >= sizeof(res->headers[0].value) || !header_text_ok(name) ||
            !header_text_ok(value) || strchr(name, ':') || strchr(name, ' '))
                return TG_EINVAL;
        memcpy(res->headers[res->header_count].name, name, nlen + 1);
        memcpy(res->headers[res->header_count].value, value, vlen + 1);
        res->header_count++;
        return 0;
}

/* ---- the MHD side ------------------------------------------------------- */

/* Origin-form printable ASCII, no empty or dot segments. The query part
 * (after '?') is only checked for printable ASCII. */
static const char *target_problem(const char *target)
{
        const char *q = strchr(target, '?');
        size_t path_len = q ? (size_t)(q - target) : strlen(target);

        if (target[0] != '/')
                return "request target must be an absolute path";
        for (const char *p = target; *p; p++) {
                unsigned char c = (unsigned char)*p;
                if (c <= 0x20 || c >= 0x7f)
                        return "request target must be printable ASCII";
        }
        if (memchr(target, '#', path_len))
                return "request target must not carry a fragment";
        if (path_len == 1)
                return NULL; /* "/" */
        /* Walk the segments between slashes. */
        for (size_t i = 1; i <= path_len; i++) {
                size_t start = i;
                size_t seg;

                while (i < path_len && target[i] != '/')
                        i++;
                seg = i - start;
                if (seg == 0)
                        return "request path has an empty segment";
                if ((seg == 1 && target[start] == '.') ||
                    (seg == 2 && target[start] == '.' && target[start + 1] == '.'))
                        return "request path has a dot segment";
        }
        return NULL;
}

/* ---- the request read deadline ------------------------------------------------ */

static struct conn_watch *watch_of(struct MHD_Connection *connection)
{
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return info ? info->socket_context : NULL;
}

/* A request was read whole (reading = false), or the connection is ready
 * for the next one (reading = true: its deadline counts from now). */
static void watch_mark(struct http_server *server, struct MHD_Connection *connection, bool reading)
{
        struct conn_watch *w;

        if (server->read_timeout <= 0)
                return;
        w = watch_of(connection);
        if (!w)
                return;
        pthread_mutex_lock(&server->lock);
        w->reading = reading;
        if (reading)
                w->since = clock_mono_now();
        pthread_mutex_unlock(&server->lock);
}

/* MHD's connection start and end (its own thread). A connection that gets
 * no watch (no descriptor left to dup) is served without the deadline. */
static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
        struct http_server *server = cls;
        struct conn_watch *w = *socket_context;

        if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
                if (!w)
                        return;
                pthread_mutex_lock(&server->lock);
                close(w->fd);
                w->used = false;
                pthread_mutex_unlock(&server->lock);
                *socket_context = NULL;
                return;
        }
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!info)
                return;
        pthread_mutex_lock(&server->lock);
        for (unsigned i = 0; i < server->nwatches; i++) {
                struct conn_watch *free_watch = &server->watches[i];
                if (free_watch->used)
                        continue;
                free_watch->fd = fcntl(info->connect_fd, F_DUPFD_CLOEXEC, 0);
                if (free_watch->fd >= 0) {
                        free_watch->used = true;
                        free_watch->reading = true;
                        free_watch->cut = false;
                        free_watch->since = clock_mono_now();
                        *socket_context = free_watch;
                }
                break;
        }
        pthread_mutex_unlock(&server->lock);
}

/* Takes off the held list every request due at `now` (all of them when
 * `all`); returns them chained on next_held. Under server->lock. */
static struct req_state *take_due(struct http_server *server, tg_mono_ns now, bool all,
                                  tg_mono_ns *ret_next)
{
        struct req_state **pp = &server->held, *due = NULL;

        while (*pp) {
                struct req_state *st = *pp;

                if (all || st->recheck_at <= now) {
                        *pp = st->next_held;
                        st->held = false;
                        st->resumed = true;
                        st->next_held = due;
                        due = st;
                        server->nheld--;
                        continue;
                }
                if (st->recheck_at < *ret_next)
                        *ret_next = st->recheck_at;
                pp = &st->next_held;
        }
        return due;
}

/* Resumes what take_due() took, without the server's lock (MHD takes its
 * own): MHD calls the access callback again for each. */
static void resume_all(struct req_state *due)
{
        while (due) {
                struct req_state *next = due->next_held;

                MHD_resume_connection(due->conn);
                due = next;
        }
}

/* Shuts down every connection whose request is overdue, a few times per
 * deadline, and resumes each held request when its time comes, until the
 * server stops. */
static void *watchdog(void *arg)
{
        struct http_server *server = arg;
        tg_mono_ns tick = server->read_timeout / 4;

        if (tick < 10 * TG_NS_PER_MS)
                tick = 10 * TG_NS_PER_MS;
        if (tick > 250 * TG_NS_PER_MS)
                tick = 250 * TG_NS_PER_MS;
        pthread_mutex_lock(&server->lock);
        while (!server->stopping) {
                tg_mono_ns now = clock_mono_now(), next = now + tick;
                struct req_state *due;

                for (unsigned i = 0; i < server->nwatches; i++) {
                        struct conn_watch *w = &server->watches[i];
                        if (!w->used || !w->reading || w->cut ||
                            now - w->since < server->read_timeout)
                                continue;
                        /* MHD sees the stream end and closes the connection */
                        shutdown(w->fd, SHUT_RDWR);
                        w->cut = true;
                        server->cuts++;
                }
                due = take_due(server, now, server->wake_all, &next);
                server->wake_all = false;
                if (due) {
                        pthread_mutex_unlock(&server->lock);
                        resume_all(due);
                        pthread_mutex_lock(&server->lock);
                        continue;
                }
                struct timespec ts = clock_mono_timespec(next);
                pthread_cond_timedwait(&server->wake, &server->lock, &ts);
        }
        pthread_mutex_unlock(&server->lock);
        return NULL;
}

void http_server_wake(struct http_server *server)
{
        if (!server)
                return;
        pthread_mutex_lock(&server->lock);
        server->wake_all = true;
        pthread_cond_signal(&server->wake);
        pthread_mutex_unlock(&server->lock);
}

unsigned http_server_held(struct http_server *server)
{
        unsigned n;

        if (!server)
                return 0;
        pthread_mutex_lock(&server->lock);
        n = server->nheld;
        pthread_mutex_unlock(&server->lock);
        return n;
}

/* The deadline's state: a watch per connection MHD may hold. 0 or
 * TG_ENOMEM. */
static int watch_init(struct http_server *server, const struct http_server_config *config)
{
        pthread_condattr_t attr;

        server->read_timeout = (tg_mono_ns)config->request_read_timeout_ms * TG_NS_PER_MS;
        if (server->read_timeout > 0) {
                server->watches = calloc(config->max_connections, sizeof(*server->watches));
                if (!server->watches)
                        return TG_ENOMEM;
                server->nwatches = config->max_connections;
        }
        pthread_mutex_init(&server->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&server->wake, &attr);
        pthread_condattr_destroy(&attr);
        return 0;
}

static void watch_free(struct http_server *server)
{
        for (unsigned i = 0; i < server->nwatches; i++)
                if (server->watches[i].used)
                        close(server->watches[i].fd);
        free(server->watches);
        server->watches = NULL;
        server->nwatches = 0;
        pthread_cond_destroy(&server->wake);
        pthread_mutex_destroy(&server->lock);
}

uint64_t http_server_read_timeouts(struct http_server *server)
{
        uint64_t n;

        if (!server || server->read_timeout <= 0)
                return 0;
        pthread_mutex_lock(&server->lock);
        n = server->cuts;
        pthread_mutex_unlock(&server->lock);
        return n;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *connection)
{
        struct http_server *server = cls;
        struct req_state *st;

        (void)connection;
        st = calloc(1, sizeof(*st));
        if (!st)
                return NULL;
        st->server = server;
        st->target = strdup(uri ? uri : "");
        if (!st->target) {
                free(st);
                return NULL;
        }
        return st;
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct req_state *st = *con_cls;

        (void)toe;
        /* the connection is ready for its next request (or closes) */
        watch_mark(cls, connection, true);
        if (!st)
                return;
        for (size_t i = 0; i < MAX_HEADERS; i++)
                free(st->copies[i]);
        free(st->body);
        free(st->target);
        free(st);
        *con_cls = NULL;
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
        struct req_state *st = cls;

        (void)kind;
        if (st->header_count >= MAX_HEADERS) {
                st->too_many_headers = true;
                return MHD_NO;
        }
        st->headers[st->header_count].name = key ? key : "";
        st->headers[st->header_count].value = value ? value : "";
        st->header_count++;
        return MHD_YES;
}

/* A NUL byte inside a header value. libmicrohttpd (0.9.75) keeps the head
 * where it read it and hands each value on as a C string, so a value sent
 * as "Bearer <token>\0junk" reads as "Bearer <token>": a compare would see
 * only what comes before the NUL. The head is in one block (`head`,
 * `head_len` bytes: the request line to the empty line), its line ends and
 * the colons made NULs, each header's name and value in order; so after a
 * value's end and before the next name (or the block's end) there is
 * nothing but NULs, unless the value hid bytes behind a NUL. Such a value
 * is handed on whole, each NUL a space (RFC 9110 5.5), in a copy. A header
 * outside the block or out of order (an obsolete folded line, which the
 * library moves) makes the request a 400. 0, or TG_EPARSE, or TG_ENOMEM. */
static int unhide_values(struct req_state *st, const char *head, size_t head_len)
{
        const char *end = head + head_len;

        for (size_t i = 0; i < st->header_count; i++) {
                const char *k = st->headers[i].name, *v = st->headers[i].value;
                const char *v_end = v + strlen(v);
                const char *next = i + 1 < st->header_count ? st->headers[i + 1].name : end;
                const char *last = NULL;

                if (k < head || v <= k || v_end > next || next > end)
                        return TG_EPARSE;
                for (const char *p = v_end; p < next; p++)
                        if (*p != '\0')
                                last = p;
                if (!last)
                        continue;
                size_t n = (size_t)(last - v) + 1;
                char *copy = malloc(n + 1);
                if (!copy)
                        return TG_ENOMEM;
                for (size_t j = 0; j < n; j++)
                        copy[j] = v[j] ? v[j] : ' ';
                copy[n] = '\0';
                free(st->copies[i]);
                st->copies[i] = copy;
                st->headers[i].value = copy;
        }
        return 0;
}

static enum MHD_Result queue(struct MHD_Connection *connection, unsigned status,
                             const char *content_type, const char *body, size_t len,
                             const struct http_response *extra)
{
        struct MHD_Response *response;
        enum MHD_Result r;

        response = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
        if (!response)
                return MHD_NO;
        if (content_type && content_type[0])
                MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        if (extra) {
                for (unsigned i = 0; i < extra->header_count; i++)
                        MHD_add_response_header(response, extra->headers[i].name,
                                                extra->headers[i].value);
        }
        r = MHD_queue_response(connection, status, response);
        MHD_destroy_response(response);
        return r;
}

/* Builds the request, calls the handler once, queues its answer. */
static enum MHD_Result call_handler(struct req_state *st, struct MHD_Connection *connection);

static enum MHD_Result answer(struct req_state *st, struct MHD_Connection *connection,
                              const char *method)
{
        char *query;

        st->answered = true;
        /* the request is read (or refused before its body): no deadline
         * while it is answered */
        watch_mark(st->server, connection, false);
        st->header_count = 0;
        MHD_get_connection_values(connection, MHD_HEADER_KIND, collect_header, st);
        if (st->too_many_headers && !st->problem_status) {
                st->problem_status = 431;
                st->problem = "too many request headers";
        }
        if (!st->problem_status && method) {
                const union MHD_ConnectionInfo *info =
                    MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
                int u = info ? unhide_values(st, method, info->header_size) : 0;
                if (u == TG_ENOMEM) {
                        st->problem_status = 503;
                        st->problem = "out of memory";
                } else if (u < 0) {
                        st->problem_status = 400;
                        st->problem = "request head is malformed (a folded header line?)";
                }
        }

        memset(&st->req, 0, sizeof(st->req));
        query = strchr(st->target, '?');
        if (query)
                *query++ = '\0'; /* the target is ours: split path and query */
        st->req.method = method ? method : "";
        st->req.path = st->target;
        st->req.query = query ? query : "";
        st->req.headers = st->headers;
        st->req.header_count = st->header_count;
        st->req.problem_status = st->problem_status;
        st->req.problem = st->problem;
        if (!st->problem_status && st->body) {
                st->req.body = st->body;
                st->req.body_len = st->body_len;
        } else {
                st->req.body = "";
                st->req.body_len = 0;
        }
        st->conn = connection;
        return call_handler(st, connection);
}

/* Holds the request (its connection suspended until the watchdog resumes
 * it): true, or false when the server is stopping (then it is answered). */
static bool hold(struct req_state *st, struct MHD_Connection *connection, unsigned hold_ms)
{
        struct http_server *server = st->server;
        tg_mono_ns now = clock_mono_now();
        bool held = false;

        if (hold_ms > HOLD_MAX_MS)
                hold_ms = HOLD_MAX_MS;
        pthread_mutex_lock(&server->lock);
        if (!server->stopping) {
                if (st->held_since == 0)
                        st->held_since = now;
                st->recheck_at = now + (tg_mono_ns)hold_ms * TG_NS_PER_MS;
                st->held = true;
                st->next_held = server->held;
                server->held = st;
                server->nheld++;
                /* under the lock: the watchdog takes it off the list (and
                 * resumes it) only once it is suspended */
                MHD_suspend_connection(connection);
                pthread_cond_signal(&server->wake);
                held = true;
        }
        pthread_mutex_unlock(&server->lock);
        return held;
}

/* Calls the handler for st->req (again, for a held request) and queues its
 * answer, or holds the request when the handler says so. */
static enum MHD_Result call_handler(struct req_state *st, struct MHD_Connection *connection)
{
        struct http_response res;
        enum MHD_Result r;
        int rc;

        if (st->held_since)
                st->req.held_ms = (clock_mono_now() - st->held_since) / TG_NS_PER_MS;
        http_response_init(&res);
        rc = st->server->handler(&st->req, &res, st->server->userdata);
        if (rc == 0 && res.status == 0 && res.hold_ms > 0) {
                http_response_release(&res);
                if (hold(st, connection, res.hold_ms))
                        return MHD_YES;
                return queue(connection, 503, "application/json", HELD_STOPPING,
                             strlen(HELD_STOPPING), NULL);
        }
        if (rc < 0 || res.status < 100 || res.status > 599)
                r = queue(connection, 500, "application/json", INTERNAL_ERROR,
                          strlen(INTERNAL_ERROR), NULL);
        else
                r = queue(connection, (unsigned)res.status, res.content_type,
                          res.body ? res.body : "", res.body_len, &res);
        http_response_release(&res);
        return r;
}

/* The body bound of a request: large_body_bytes for exactly
 * large_body_path (the query ignored), max_body_bytes for every other. */
static size_t body_bound(const struct http_server *server, const char *target)
{
        size_t n = strcspn(target, "?");

        if (server->large_body_path[0] && strlen(server->large_body_path) == n &&
            memcmp(target, server->large_body_path, n) == 0)
                return server->large_body_bytes;
        return server->max_body_bytes;
}

/* Appends data to the body, or marks the request too large and drops the
 * buffer: nothing past the request's bound is ever kept. */
static void append_body(struct req_state *st, const char *data, size_t len)
{
        size_t max = st->max_body;

        if (st->problem_status)
                return; /* discarding */
        if (len > max - st->body_len) {
                free(st->body);
                st->body = NULL;
                st->body_len = st->body_cap = 0;
                st->problem_status = 413;
                st->problem = "request body too large";
                return;
        }
        if (st->body_len + len + 1 > st->body_cap) {
                size_t cap = st->body_cap ? st->body_cap : 1024;
                char *grown;
                while (cap < st->body_len + len + 1)
                        cap *= 2;
                if (cap > max + 1)
                        cap = max + 1;
                grown = realloc(st->body, cap);
                if (!grown) {
                        free(st->body);
                        st->body = NULL;
                        st->body_len = st->body_cap = 0;
                        st->problem_status = 503;
                        st->problem = "out of memory";
                        return;
                }
                st->body = grown;
                st->body_cap = cap;
        }
        memcpy(st->body + st->body_len, data, len);
        st->body_len += len;
        st->body[st->body_len] = '\0';
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *connection, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
        struct req_state *st = *con_cls;

        (void)cls;
        (void)url;
        (void)version;
        if (!st)
                return MHD_NO; /* the URI-log callback ran out of memory */
        if (st->resumed) {
                bool stopping;

                st->resumed = false;
                pthread_mutex_lock(&st->server->lock);
                stopping = st->server->stopping;
                pthread_mutex_unlock(&st->server->lock);
                if (stopping) /* the handler is never called during or after a stop */
                        return queue(connection, 503, "application/json", HELD_STOPPING,
                                     strlen(HELD_STOPPING), NULL);
                return call_handler(st, connection);
        }
        if (st->answered) {
                /* Only reached if MHD keeps feeding an answered request. */
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (!st->started) {
                const char *cl;
                const char *bad = target_problem(st->target);

                st->started = true;
                st->max_body = body_bound(st->server, st->target);
                if (bad) {
                        st->problem_status = 400;
                        st->problem = bad;
                        return answer(st, connection, method);
                }
                cl = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
                if (cl) {
                        char *end = NULL;
                        unsigned long long n;
                        errno = 0;
                        n = strtoull(cl, &end, 10);
                        if (errno == 0 && end != cl && *end == '\0' && n > st->max_body) {
                                /* Refused before a byte of the body is read;
                                 * MHD closes the connection after this. */
                                st->problem_status = 413;
                                st->problem = "request body too large";
                                return answer(st, connection, method);
                        }
                }
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                append_body(st, upload_data, *upload_data_size);
                *upload_data_size = 0;
                return MHD_YES;
        }
        return answer(st, connection, method);
}

static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ret_addr,
                   socklen_t *ret_len)
{
        struct addrinfo hints, *res = NULL;
        char port_text[8];
        int r;

        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
        snprintf(port_text, sizeof(port_text), "%u", (unsigned)port);
        r = getaddrinfo(host, port_text, &hints, &res);
        if (r != 0 || !res)
                return TG_EINVAL;
        if (res->ai_addrlen > sizeof(*ret_addr)) {
                freeaddrinfo(res);
                return TG_EINVAL;
        }
        memcpy(ret_addr, res->ai_addr, res->ai_addrlen);
        *ret_len = (socklen_t)res->ai_addrlen;
        freeaddrinfo(res);
        return 0;
}

int http_server_start(const struct http_server_config *config, http_handler_fn handler,
                      void *userdata, struct http_server **ret_server)
{
        struct sockaddr_storage addr;
        socklen_t addr_len = 0;
        struct http_server *server;
        const union MHD_DaemonInfo *info;
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME;
        size_t memory;
        int r;

        if (!config || !handler || !ret_server || !config->host || config->max_connections == 0 ||
            config->max_body_bytes == 0 || config->max_body_bytes > SIZE_MAX / 2 ||
            (config->large_body_path &&
             (config->large_body_path[0] != '/' ||
              strlen(config->large_body_path) >= sizeof(server->large_body_path) ||
              config->large_body_bytes == 0 || config->large_body_bytes > SIZE_MAX / 2)))
                return TG_EINVAL;
        r = resolve(config->host, config->port, &addr, &addr_len);
        if (r < 0)
                return r;
        if (addr.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        server = calloc(1, sizeof(*server));
        if (!server)
                return TG_ENOMEM;
        server->handler = handler;
        server->userdata = userdata;
        server->max_body_bytes = config->max_body_bytes;
        if (config->large_body_path) {
                snprintf(server->large_body_path, sizeof(server->large_body_path), "%s",
                         config->large_body_path);
                server->large_body_bytes = config->large_body_bytes;
        }
        memory = config->max_header_bytes ? config->max_header_bytes : DEFAULT_MEMORY;
        r = watch_init(server, config);
        if (r < 0) {
                free(server);
                return r;
        }

        server->daemon = MHD_start_daemon(
            flags, config->port, NULL, NULL, on_access, server, MHD_OPTION_SOCK_ADDR,
            (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
            (unsigned int)config->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned int)config->connection_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory,
            MHD_OPTION_URI_LOG_CALLBACK, on_uri, server, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
            server, MHD_OPTION_NOTIFY_CONNECTION, on_connection, server,
            MHD_OPTION_STRICT_FOR_CLIENT, (int)1, MHD_OPTION_END);
        if (!server->daemon) {
                watch_free(server);
                free(server);
                return TG_EIO;
        }
        /* the read deadline and the held requests' rechecks */
        if (pthread_create(&server->watchdog, NULL, watchdog, server) != 0) {
                MHD_stop_daemon(server->daemon);
                watch_free(server);
                free(server);
                return TG_ENOMEM;
        }
        server->watchdog_running = true;
        info = MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
        server->port = info ? info->port : config->port;
        *ret_server = server;
        return 0;
}

uint16_t http_server_port(const struct http_server *server)
{
        return server ? server->port : 0;
}

void http_server_stop(struct http_server *server)
{
        if (!server)
                return;
        if (server->watchdog_running) {
                pthread_mutex_lock(&server->lock);
                server->stopping = true;
                pthread_cond_signal(&server->wake);
                pthread_mutex_unlock(&server->lock);
                pthread_join(server->watchdog, NULL);
        }
        /* no request is held past here: each one held is resumed and
         * answered 503 (MHD must not be stopped with a connection suspended) */
        pthread_mutex_lock(&server->lock);
        server->stopping = true;
        struct req_state *due = take_due(server, 0, true, &(tg_mono_ns){0});
        pthread_mutex_unlock(&server->lock);
        resume_all(due);
        /* MHD closes every connection (each one's CLOSED notice gives its
         * watch back) */
        if (server->daemon)
                MHD_stop_daemon(server->daemon);
        watch_free(server);
        free(server);
}
