/*
 * bench_intake: the intake API under a flood, printed, never judged.
 *
 *   bench_intake [--tollgate PATH] [--stub PATH] [--rate N] [--seconds N]
 *                [--exit-rate N] [--connections N] [--max-wait-s N] [--keep]
 *
 * Starts tollgate-stub (fast) and `tollgate serve` on SQLite in a fresh
 * folder (an exit at --exit-rate starts/s, admission on), then offers
 * --rate POST /v1/refunds a second for --seconds, open loop: request i is
 * due at i / rate whether or not earlier ones were answered, on up to
 * --connections keep-alive connections; its latency counts from when it was
 * due (a client that falls behind shows in the figures, not hidden by it).
 * Then the process is killed (SIGKILL, no goodbye) and the API started again
 * on the same store, and the store is asked: is every refund that got a 202
 * there (a 202 is sent only after its commit), and is a refused one there
 * (a sample of them, and the count of all operations)?
 *
 * Figures: answers by status, 503s with and without Retry-After, intake
 * latency percentiles (all, 202, 503), the achieved offer rate, when
 * admission first refused, and the durability counts.
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAME "bench_intake"
#include "bench_util.h"

#define MAX_CONNECTIONS 1024

struct result {
        short status; /* 0: no answer (a transport error) */
        bool retry_after;
        float latency_ms; /* from when it was due to its end */
};

struct xfer {
        CURL *h;
        struct curl_slist *hdrs;
        long idx; /* the request it carries; -1: free */
        bool retry_after;
        char body[256];
};

static size_t on_header(char *p, size_t size, size_t n, void *userdata)
{
        struct xfer *x = userdata;
        if (size * n >= 12 && strncasecmp(p, "retry-after:", 12) == 0)
                x->retry_after = true;
        return size * n;
}

/* One GET on `h` (reused: keep-alive); its status, 0 on a transport error. */
static long get(CURL *h, const char *base, const char *path, struct buf *out)
{
        char url[512];
        long status = 0;

        snprintf(url, sizeof(url), "%s%s", base, path);
        if (out)
                out->len = 0;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, out ? keep : sink);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
        if (curl_easy_perform(h) == CURLE_OK)
                curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        return status;
}

/* Starts `path args...` with stderr to `log`; its pid, or -1. */
static pid_t spawn(const char *log, const char *path, char *const argv[])
{
        pid_t pid = fork();

        if (pid == 0) {
                FILE *f = freopen(log, "a", stderr);
                (void)f;
                execv(path, argv);
                _exit(127);
        }
        return pid;
}

static pid_t spawn_stub(const char *path, const char *dir, char *base, size_t cap)
{
        char port_file[600], log[600];
        pid_t pid;

        snprintf(port_file, sizeof(port_file), "%s/stub.port", dir);
        snprintf(log, sizeof(log), "%s/stub.log", dir);
        char *argv[] = {(char *)path, "--listen", "127.0.0.1:0", "--port-file",
                        port_file,    "--mode",   "fast",        NULL};
        pid = spawn(log, path, argv);
        for (int i = 0; i < 500 && pid > 0; i++) {
                FILE *f = fopen(port_file, "r");
                unsigned port = 0;
                if (f) {
                        int got = fscanf(f, "%u", &port);
                        fclose(f);
                        if (got == 1 && port > 0) {
                                snprintf(base, cap, "http://127.0.0.1:%u", port);
                                return pid;
                        }
                }
                usleep(10000);
        }
        return -1;
}

/* A free loopback port (bound, read, closed: a moment's race, fine here). */
static unsigned free_port(void)
{
        struct sockaddr_in a;
        socklen_t len = sizeof(a);
        unsigned port = 0;
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        if (fd < 0)
                return 0;
        memset(&a, 0, sizeof(a));
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
            getsockname(fd, (struct sockaddr *)&a, &len) == 0)
                port = ntohs(a.sin_port);
        close(fd);
        return port;
}

static pid_t spawn_tollgate(const char *path, const char *command, const char *config,
                            const char *dir, const char *api)
{
        char log[600];
        CURL *h = curl_easy_init();
        pid_t pid;

        snprintf(log, sizeof(log), "%s/%s.log", dir, command);
        char *argv[] = {(char *)path, (char *)command, "--config", (char *)config, NULL};
        pid = spawn(log, path, argv);
        for (int i = 0; i < 1000 && pid > 0 && h; i++) {
                if (get(h, api, "/healthz", NULL) == 200) {
                        curl_easy_cleanup(h);
                        return pid;
                }
                usleep(10000);
        }
        curl_easy_cleanup(h);
        return -1;
}

static void arm(struct xfer *x, const char *url, const char *run, long i)
{
        snprintf(x->body, sizeof(x->body),
                 "{\"operation_id\":\"%s-%ld\",\"payment_id\":\"pay_%ld\",\"amount\":1500,"
                 "\"currency\":\"TWD\"}",
                 run, i, i);
        x->idx = i;
        x->retry_after = false;
        if (!x->hdrs)
                x->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_setopt(x->h, CURLOPT_URL, url);
        curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
        curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
        curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
        curl_easy_setopt(x->h, CURLOPT_TIMEOUT, 30L);
        curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
}

static int cmp_float(const void *a, const void *b)
{
        float x = *(const float *)a, y = *(const float *)b;
        return x < y ? -1 : x > y ? 1 : 0;
}

/* p50, p90, p99, max of the latencies of answers with status `want` (0:
 * every answer), printed on one line. */
static void print_latency(const char *label, const struct result *r, long n, int want)
{
        float *v = malloc(sizeof(*v) * (size_t)(n > 0 ? n : 1));
        long k = 0;

        if (!v)
                return;
        for (long i = 0; i < n; i++)
                if (r[i].status != 0 && (want == 0 || r[i].status == want))
                        v[k++] = r[i].latency_ms;
        if (k == 0) {
                printf("  latency %-20s (none)\n", label);
                free(v);
                return;
        }
        qsort(v, (size_t)k, sizeof(*v), cmp_float);
        printf("  latency %-20s p50 %.2f  p90 %.2f  p99 %.2f  max %.2f ms  (%ld answers)\n", label,
               v[k / 2], v[k * 9 / 10], v[k * 99 / 100], v[k - 1], k);
        free(v);
}

static int usage_error(const char *flag)
{
        fprintf(stderr, "bench_intake: bad or missing value for %s\n", flag);
        return 2;
}

int main(int argc, char **argv)
{
        char exe[4096], tollgate[4096], stub[4096], dir[] = "/tmp/bench_intake_XXXXXX";
        char config[600], stub_base[256], api[128], url[256], run[32];
        double rate = 1000, seconds = 60, exit_rate = 5;
        long connections = 64, max_wait_s = 300;
        bool keep_dir = false;

        snprintf(exe, sizeof(exe), "%s", argv[0]);
        snprintf(tollgate, sizeof(tollgate), "%s/../tollgate", dirname(exe));
        snprintf(exe, sizeof(exe), "%s", argv[0]);
        snprintf(stub, sizeof(stub), "%s/../tollgate-stub", dirname(exe));
        for (int i = 1; i < argc; i++) {
                const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                char *end = NULL;
                double d = v ? strtod(v, &end) : 0;
                bool num = v && end && end != v && *end == '\0' && d > 0;
                if (strcmp(f, "--help") == 0) {
                        puts("usage: bench_intake [--tollgate PATH] [--stub PATH] [--rate N] "
                             "[--seconds N] [--exit-rate N] [--connections N] "
                             "[--max-wait-s N] [--keep]");
                        return 0;
                }
                if (strcmp(f, "--keep") == 0) {
                        keep_dir = true;
                        continue;
                }
                if (!v)
                        return usage_error(f);
                i++;
                if (strcmp(f, "--tollgate") == 0)
                        snprintf(tollgate, sizeof(tollgate), "%s", v);
                else if (strcmp(f, "--stub") == 0)
                        snprintf(stub, sizeof(stub), "%s", v);
                else if (strcmp(f, "--rate") == 0 && num)
                        rate = d;
                else if (strcmp(f, "--seconds") == 0 && num)
                        seconds = d;
                else if (strcmp(f, "--exit-rate") == 0 && num)
                        exit_rate = d;
                else if (strcmp(f, "--connections") == 0 && num && d <= MAX_CONNECTIONS)
                        connections = (long)d;
                else if (strcmp(f, "--max-wait-s") == 0 && num)
                        max_wait_s = (long)d;
                else
                        return usage_error(f);
        }
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        signal(SIGPIPE, SIG_IGN);

        pid_t stub_pid = spawn_stub(stub, dir, stub_base, sizeof(stub_base));
        unsigned port = free_port();
        if (stub_pid < 0 || port == 0) {
                fprintf(stderr, "bench_intake: cannot start %s\n", stub);
                return 1;
        }
        snprintf(api, sizeof(api), "http://127.0.0.1:%u", port);
        snprintf(config, sizeof(config), "%s/tollgate.ini", dir);
        FILE *cf = fopen(config, "w");
        if (!cf)
                return 1;
        fprintf(cf,
                "[store]\nurl = sqlite://%s/tg.db\n[api]\nlisten = 127.0.0.1:%u\n"
                "max_connections = %ld\n[provider]\nbase_url = %s\n[exit]\n"
                "starts_per_second = %g\n[admission]\nmax_wait_s = %ld\n[log]\nlevel = warn\n",
                dir, port, connections + 64, stub_base, exit_rate, max_wait_s);
        fclose(cf);
        pid_t tg = spawn_tollgate(tollgate, "serve", config, dir, api);
        if (tg < 0) {
                fprintf(stderr, "bench_intake: cannot start %s (logs in %s)\n", tollgate, dir);
                kill(stub_pid, SIGTERM);
                return 1;
        }

        long total = (long)(rate * seconds);
        struct result *res = calloc((size_t)total, sizeof(*res));
        struct xfer *xs = calloc((size_t)connections, sizeof(*xs));
        CURLM *m = curl_multi_init();
        if (!res || !xs || !m)
                return 1;
        snprintf(url, sizeof(url), "%s/v1/refunds", api);
        snprintf(run, sizeof(run), "b%ld", (long)time(NULL) % 100000);
        curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, connections);
        for (long i = 0; i < connections; i++) {
                xs[i].h = curl_easy_init();
                xs[i].idx = -1;
        }

        printf("bench_intake: %.0f POST /v1/refunds a second for %.0f s, open loop on up to %ld "
               "connections, against an exit at %g/s (SQLite, admission.max_wait_s %ld)\n",
               rate, seconds, connections, exit_rate, max_wait_s);
        fflush(stdout);
        double t0 = now_s(), behind_max = 0, first_refusal = -1;
        long next = 0, done = 0, busy = 0;
        while (done < total) {
                double now = now_s();
                /* every request due by now, on a free connection */
                for (long k = 0; next < total && t0 + (double)next / rate <= now && k < connections;
                     k++) {
                        if (xs[k].idx >= 0)
                                continue;
                        double behind = now - (t0 + (double)next / rate);
                        if (behind > behind_max)
                                behind_max = behind;
                        arm(&xs[k], url, run, next++);
                        curl_multi_add_handle(m, xs[k].h);
                        busy++;
                }
                int running = 0, left = 0;
                CURLMsg *msg;
                curl_multi_perform(m, &running);
                while ((msg = curl_multi_info_read(m, &left))) {
                        struct xfer *x = NULL;
                        long status = 0;
                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
                        if (msg->data.result == CURLE_OK)
                                curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
                        struct result *r = &res[x->idx];
                        r->status = (short)status;
                        r->retry_after = x->retry_after;
                        r->latency_ms = (float)((now_s() - (t0 + (double)x->idx / rate)) * 1000.0);
                        if (status == 503 && first_refusal < 0)
                                first_refusal = now_s() - t0;
                        curl_multi_remove_handle(m, x->h);
                        x->idx = -1;
                        busy--;
                        done++;
                }
                double due = next < total ? t0 + (double)next / rate - now_s() : 0.05;
                int wait_ms = due > 0 ? (int)(due * 1000.0) : 0;
                if (wait_ms > 50)
                        wait_ms = 50;
                if (busy > 0 || wait_ms > 0)
                        curl_multi_poll(m, NULL, 0, wait_ms, NULL);
        }
        double took = now_s() - t0;

        /* no goodbye: whatever was answered 202 must already be on disk */
        kill(tg, SIGKILL);
        waitpid(tg, NULL, 0);

        long n202 = 0, n503 = 0, n503_ra = 0, other = 0, errors = 0;
        for (long i = 0; i < total; i++) {
                if (res[i].status == 202)
                        n202++;
                else if (res[i].status == 503) {
                        n503++;
                        n503_ra += res[i].retry_after;
                } else if (res[i].status == 0)
                        errors++;
                else
                        other++;
        }
        printf("  offered                 %ld in %.1f s (%.0f/s); the client was behind its "
               "schedule by %.1f ms at most\n",
               total, took, (double)total / took, behind_max * 1000.0);
        printf("  202 accepted            %ld\n", n202);
        printf("  503 refused             %ld (with Retry-After: %ld); first refusal after %.1f "
               "s\n",
               n503, n503_ra, first_refusal);
        printf("  other answers           %ld; no answer (transport errors) %ld\n", other, errors);
        print_latency("all", res, total, 0);
        print_latency("202", res, total, 202);
        print_latency("503", res, total, 503);

        /* the API alone, on the same store, after the kill */
        tg = spawn_tollgate(tollgate, "api", config, dir, api);
        if (tg < 0) {
                fprintf(stderr, "bench_intake: the API did not start again (logs in %s)\n", dir);
                kill(stub_pid, SIGTERM);
                return 1;
        }
        CURL *h = curl_easy_init();
        struct buf *b = calloc(1, sizeof(*b));
        long found = 0, missing = 0, refused_checked = 0, refused_stored = 0, stored = -1;
        for (long i = 0; h && b && i < total; i++) {
                char path[128];
                bool accepted = res[i].status == 202;
                /* every 202, and one in 20 of the rest */
                if (!accepted && i % 20 != 0)
                        continue;
                snprintf(path, sizeof(path), "/v1/refunds/%s-%ld", run, i);
                long st = get(h, api, path, NULL);
                if (accepted) {
                        found += st == 200;
                        missing += st != 200;
                } else {
                        refused_checked++;
                        refused_stored += st == 200;
                }
        }
        if (h && b && get(h, api, "/v1/stats", b) == 200) {
                json_t *root = json_loads(b->data, 0, NULL);
                json_t *bl = json_object_get(root, "backlog");
                const char *k;
                json_t *v;
                stored = 0;
                json_object_foreach(bl, k, v) stored += (long)json_integer_value(v);
                json_decref(root);
        }
        printf("  after kill -9 and a restart: %ld of %ld accepted refunds found (%ld missing); "
               "%ld of %ld refused ones sampled found; operations in the store %ld\n",
               found, n202, missing, refused_stored, refused_checked, stored);
        curl_easy_cleanup(h);
        free(b);

        kill(tg, SIGTERM);
        waitpid(tg, NULL, 0);
        kill(stub_pid, SIGTERM);
        waitpid(stub_pid, NULL, 0);
        for (long i = 0; i < connections; i++) {
                curl_easy_cleanup(xs[i].h);
                curl_slist_free_all(xs[i].hdrs);
        }
        curl_multi_cleanup(m);
        free(xs);
        free(res);
        curl_global_cleanup();
        if (keep_dir) {
                printf("  logs and store kept in %s\n", dir);
        } else {
                char cmd[700];
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
                if (system(cmd) != 0)
                        fprintf(stderr, "bench_intake: could not remove %s\n", dir);
        }
        return 0;
}
