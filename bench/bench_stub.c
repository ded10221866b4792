/*
 * bench_stub: how fast tollgate-stub answers, printed, never judged.
 *
 *   bench_stub [--stub PATH | --url http://127.0.0.1:PORT] [--seconds N]
 *              [--clients N] [--slow N] [--slow-ms D]
 *
 * With --stub (default: ../tollgate-stub next to this binary's directory) it
 * starts its own stub on a free loopback port and stops it at the end; with
 * --url it drives a stub already running (and changes its mode!).
 * Figures: fast POSTs per second over keep-alive connections and over a
 * fresh connection per request (libcurl multi, --clients at once), then
 * --slow simultaneous POSTs in mode slow:D (how long they all took, against
 * D, and the most requests the stub saw open at once).
 */
#include <curl/curl.h>
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAME "bench_stub"
#include "bench_util.h"

#define MAX_CLIENTS 4096

struct xfer {
        CURL *h;
        struct curl_slist *hdrs;
        char body[256];
        char key_hdr[96];
};

static long simple(const char *base, const char *method, const char *path, const char *body,
                   struct buf *out)
{
        char url[512];
        long status = 0;
        CURL *h = curl_easy_init();
        if (!h)
                return -1;
        snprintf(url, sizeof(url), "%s%s", base, path);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        if (body)
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, out ? keep : sink);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
        if (curl_easy_perform(h) == CURLE_OK)
                curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(h);
        return status;
}

static long state_number(const char *base, const char *field)
{
        struct buf b = {.len = 0};
        char pat[64];
        const char *p;
        if (simple(base, "GET", "/_stub/state", NULL, &b) != 200)
                return -1;
        snprintf(pat, sizeof(pat), "\"%s\":", field);
        p = strstr(b.data, pat);
        return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

static void arm(struct xfer *x, const char *url, const char *prefix, uint64_t n, bool fresh)
{
        snprintf(x->key_hdr, sizeof(x->key_hdr), "Idempotency-Key: %s-%llu", prefix,
                 (unsigned long long)n);
        snprintf(x->body, sizeof(x->body),
                 "{\"operation_id\":\"%s-%llu\",\"payment_id\":\"p\",\"amount\":1500,"
                 "\"currency\":\"TWD\"}",
                 prefix, (unsigned long long)n);
        curl_slist_free_all(x->hdrs);
        x->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
        x->hdrs = curl_slist_append(x->hdrs, x->key_hdr);
        curl_easy_setopt(x->h, CURLOPT_URL, url);
        curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
        curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
        curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(x->h, CURLOPT_TIMEOUT, 60L);
        curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(x->h, CURLOPT_FORBID_REUSE, fresh ? 1L : 0L);
        curl_easy_setopt(x->h, CURLOPT_FRESH_CONNECT, fresh ? 1L : 0L);
        curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
}

/*
 * Runs `clients` transfers at once; each finished one is re-armed until
 * `seconds` passed (or, with seconds <= 0, not at all). Returns the count of
 * answers with status want; *ret_other counts the rest; *ret_max_open is the
 * stub's open_requests sampled every 100 ms (when sample is true).
 */
static uint64_t drive(const char *base, const char *prefix, int clients, double seconds, bool fresh,
                      long want, bool sample, uint64_t *ret_other, long *ret_max_open,
                      double *ret_elapsed)
{
        char url[512];
        struct xfer *xs = calloc((size_t)clients, sizeof(*xs));
        CURLM *m = curl_multi_init();
        uint64_t n = 0, ok = 0, other = 0;
        double t0 = now_s(), next_sample = t0 + 0.1;
        int running = 0, active = 0;
        long max_open = 0;

        snprintf(url, sizeof(url), "%s/v1/refunds", base);
        for (int i = 0; i < clients; i++) {
                xs[i].h = curl_easy_init();
                arm(&xs[i], url, prefix, n++, fresh);
                curl_multi_add_handle(m, xs[i].h);
                active++;
        }
        while (active > 0) {
                CURLMsg *msg;
                int left;
                bool rearmed = false;
                curl_multi_perform(m, &running);
                while ((msg = curl_multi_info_read(m, &left))) {
                        struct xfer *x;
                        long status = 0;
                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
                        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
                        if (msg->data.result == CURLE_OK && status == want)
                                ok++;
                        else
                                other++;
                        curl_multi_remove_handle(m, x->h);
                        if (seconds > 0 && now_s() - t0 < seconds) {
                                arm(x, url, prefix, n++, fresh);
                                curl_multi_add_handle(m, x->h);
                                rearmed = true;
                        } else {
                                active--;
                        }
                }
                if (sample && now_s() >= next_sample) {
                        long open = state_number(base, "open_requests");
                        if (open > max_open)
                                max_open = open;
                        next_sample = now_s() + 0.1;
                }
                /* A handle added since the last perform starts only in the next one. */
                if (!rearmed)
                        curl_multi_poll(m, NULL, 0, 50, NULL);
        }
        *ret_elapsed = now_s() - t0;
        for (int i = 0; i < clients; i++) {
                curl_easy_cleanup(xs[i].h);
                curl_slist_free_all(xs[i].hdrs);
        }
        curl_multi_cleanup(m);
        free(xs);
        *ret_other = other;
        *ret_max_open = max_open;
        return ok;
}

static pid_t spawn_stub(const char *path, char *base, size_t cap)
{
        char port_file[] = "/tmp/bench_stub_port_XXXXXX";
        int fd = mkstemp(port_file);
        pid_t pid;
        if (fd < 0)
                return -1;
        close(fd);
        unlink(port_file);
        pid = fork();
        if (pid == 0) {
                execl(path, path, "--listen", "127.0.0.1:0", "--port-file", port_file,
                      (char *)NULL);
                _exit(127);
        }
        for (int i = 0; i < 500 && pid > 0; i++) {
                FILE *f = fopen(port_file, "r");
                unsigned port = 0;
                if (f) {
                        int got = fscanf(f, "%u", &port);
                        fclose(f);
                        if (got == 1 && port > 0) {
                                unlink(port_file);
                                snprintf(base, cap, "http://127.0.0.1:%u", port);
                                return pid;
                        }
                }
                usleep(10000);
        }
        if (pid > 0) {
                kill(pid, SIGTERM);
                waitpid(pid, NULL, 0);
        }
        return -1;
}

static int usage_error(const char *flag)
{
        fprintf(stderr, "bench_stub: bad or missing value for %s\n", flag);
        return 2;
}

int main(int argc, char **argv)
{
        char stub_path[4096], base[256] = "", exe[4096];
        const char *url = NULL;
        double seconds = 5;
        int clients = 16, slow = 200;
        long slow_ms = 1000;
        pid_t pid = -1;
        uint64_t ok, other;
        long max_open;
        double elapsed;

        snprintf(exe, sizeof(exe), "%s", argv[0]);
        snprintf(stub_path, sizeof(stub_path), "%s/../tollgate-stub", dirname(exe));
        for (int i = 1; i < argc; i++) {
                const char *f = argv[i];
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;
                char *end = NULL;
                if (strcmp(f, "--help") == 0) {
                        puts("usage: bench_stub [--stub PATH | --url URL] [--seconds N] "
                             "[--clients N] [--slow N] [--slow-ms D]");
                        return 0;
                }
                if (!v)
                        return usage_error(f);
                i++;
                if (strcmp(f, "--stub") == 0) {
                        snprintf(stub_path, sizeof(stub_path), "%s", v);
                } else if (strcmp(f, "--url") == 0) {
                        url = v;
                } else if (strcmp(f, "--seconds") == 0) {
                        seconds = strtod(v, &end);
                        if (*end || seconds <= 0)
                                return usage_error(f);
                } else if (strcmp(f, "--clients") == 0) {
                        clients = (int)strtol(v, &end, 10);
                        if (*end || clients < 1 || clients > MAX_CLIENTS)
                                return usage_error(f);
                } else if (strcmp(f, "--slow") == 0) {
                        slow = (int)strtol(v, &end, 10);
                        if (*end || slow < 1 || slow > MAX_CLIENTS)
                                return usage_error(f);
                } else if (strcmp(f, "--slow-ms") == 0) {
                        slow_ms = strtol(v, &end, 10);
                        if (*end || slow_ms < 1)
                                return usage_error(f);
                } else {
                        return usage_error(f);
                }
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        if (url) {
                snprintf(base, sizeof(base), "%s", url);
        } else {
                pid = spawn_stub(stub_path, base, sizeof(base));
                if (pid < 0) {
                        fprintf(stderr, "bench_stub: cannot start %s (use --stub or --url)\n",
                                stub_path);
                        return 1;
                }
        }
        printf("stub %s, %d clients, %.1f s per run\n", base, clients, seconds);

        simple(base, "POST", "/_stub/mode", "{\"mode\":\"fast\"}", NULL);
        ok = drive(base, "bench-ka", clients, seconds, false, 201, false, &other, &max_open,
                   &elapsed);
        printf("fast, keep-alive:       %8.0f requests/s  (%llu ok, %llu other)\n",
               (double)ok / elapsed, (unsigned long long)ok, (unsigned long long)other);
        ok = drive(base, "bench-fresh", clients, seconds, true, 201, false, &other, &max_open,
                   &elapsed);
        printf("fast, fresh connection: %8.0f requests/s  (%llu ok, %llu other)\n",
               (double)ok / elapsed, (unsigned long long)ok, (unsigned long long)other);

        {
                char body[128];
                snprintf(body, sizeof(body), "{\"mode\":\"slow\",\"delay_ms\":%ld}", slow_ms);
                simple(base, "POST", "/_stub/mode", body, NULL);
        }
        ok = drive(base, "bench-slow", slow, 0, true, 201, true, &other, &max_open, &elapsed);
        printf("slow:%ld x %d at once:  all answered in %.2f s (%.2f x the delay), "
               "%llu ok, %llu other, stub saw up to %ld open\n",
               slow_ms, slow, elapsed, elapsed * 1000.0 / (double)slow_ms, (unsigned long long)ok,
               (unsigned long long)other, max_open);
        simple(base, "POST", "/_stub/mode", "{\"mode\":\"fast\"}", NULL);

        if (pid > 0) {
                kill(pid, SIGTERM);
                waitpid(pid, NULL, 0);
        }
        curl_global_cleanup();
        return 0;
}
