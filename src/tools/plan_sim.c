/*
 * plan_sim — `tollgate plan --simulate`: seed 000's drain arithmetic
 * checked against the real dispatcher.
 *
 * What runs: tollgate-stub --mode fast, `tollgate api` and, once the backlog
 * is pre-loaded through the API, `tollgate dispatch`, all found next to
 * /proc/self/exe, on 127.0.0.1, with a temporary SQLite store; every process
 * and file is removed before returning. Arrivals are submitted through the
 * API at the arrival rate from the dispatcher's first call on.
 *
 * Time compression: with --time-scale F every rate is divided by F and
 * every count kept, so every time is multiplied by F (240 queued at 2/s with
 * 5 calls/s and F = 0.1 runs as 240 at 20/s with 50 calls/s: 8 s instead of
 * 80 s); the query interval is scaled too.
 *
 * K calls per close are made for real, not imitated: the stub runs in mode
 * calls:K, so every refund's POST executes but answers 500 (an unknown
 * outcome), its next K-2 queries say "processing" and its (K-1)-th query
 * says succeeded: each close takes K calls through the exit, which runs at
 * the plan's whole calls/s. The report compares the measured calls per
 * close and drain with the arithmetic. K must be a whole number (1..100).
 *
 * Measurement: the call log (GET /v1/calls) gives each call's start on the
 * shared monotonic clock and its latency; a close is a call classified
 * succeeded or rejected. "Drained" is the first close after which at most
 * max(1, arrivals in 100 ms + the shortest close) operations are open
 * (accepted, not closed): a new arrival is never picked the instant it
 * lands (the dispatcher looks for new work every 50 ms when idle), and with
 * K calls per close each one stays open at least K - 1 query intervals.
 * Bounds: arrivals and closes are kept in arrays sized at start from the
 * run's own limits.
 */
#include "tools/plan_sim.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "core/tg_error.h"
#include "net/http_client.h"
#include "tools/tool_util.h"

#define CALLS_PER_CLOSE_MAX 100    /* the stub's calls:K bound */
#define QUERY_INTERVAL_MS   2000.0 /* retry.query_interval_ms's default, scaled by F */

#define PAGE       1000
#define MAX_EVENTS 2000000 /* arrivals or closes kept, at most */

struct run {
        char api[64];
        double *arrivals; /* submission times (monotonic s) of pre-load + arrivals */
        size_t n_arr, cap_arr;
        double *closes; /* close times */
        size_t n_close, cap_close;
        size_t calls;
        long long since;
        unsigned refused; /* 503 answers from admission while submitting */
};

static int submit(struct run *r, const char *prefix, size_t i)
{
        char url[128], body[256];
        struct http_client_result res = {0};
        static const char *const hdrs[] = {"Content-Type: application/json", NULL};

        snprintf(url, sizeof(url), "%s/v1/refunds", r->api);
        snprintf(body, sizeof(body),
                 "{\"operation_id\":\"%s-%zu\",\"payment_id\":\"pay-%zu\",\"amount\":1500,"
                 "\"currency\":\"TWD\"}",
                 prefix, i, i);
        for (int tries = 0; tries < 100; tries++) {
                if (http_client_request(&(struct http_client_request){.method = "POST",
                                                                      .url = url,
                                                                      .headers = hdrs,
                                                                      .body = body,
                                                                      .timeout_ms = 5000},
                                        &res) < 0)
                        return TG_ETRANSPORT;
                if (res.status == 202 || res.status == 200)
                        break;
                if (res.status != 503)
                        return TG_EIO;
                r->refused++;
                tool_sleep(0.05);
        }
        if (res.status != 202 && res.status != 200)
                return TG_EIO;
        if (r->n_arr >= r->cap_arr)
                return TG_EFULL;
        r->arrivals[r->n_arr++] = tool_now();
        return 0;
}

/* Reads new entries of the call log; stops at the first call still open so
 * it is read again once it ended. */
static int poll_calls(struct run *r, double *ret_first_start)
{
        char url[160];
        size_t cap = 1 << 20;
        char *buf = malloc(cap);
        struct http_client_result res = {0};
        int rc = 0;

        if (!buf)
                return TG_ENOMEM;
        for (;;) {
                snprintf(url, sizeof(url), "%s/v1/calls?since=%lld&limit=%d", r->api, r->since,
                         PAGE);
                if (http_client_request(&(struct http_client_request){.method = "GET",
                                                                      .url = url,
                                                                      .timeout_ms = 5000,
                                                                      .resp = buf,
                                                                      .resp_size = cap},
                                        &res) < 0 ||
                    res.status != 200) {
                        rc = TG_EIO;
                        break;
                }
                json_t *root = json_loads(buf, 0, NULL);
                json_t *calls = root ? json_object_get(root, "calls") : NULL;
                size_t n = json_array_size(calls), used = 0;
                int open_seen = 0;
                for (size_t i = 0; i < n && !open_seen; i++) {
                        json_t *c = json_array_get(calls, i);
                        json_t *cls = json_object_get(c, "class");
                        double start =
                            (double)json_integer_value(json_object_get(c, "start_mono_ns")) / 1e9;
                        if (!json_is_string(cls)) {
                                open_seen = 1;
                                break;
                        }
                        if (ret_first_start && *ret_first_start == 0)
                                *ret_first_start = start;
                        r->calls++;
                        const char *name = json_string_value(cls);
                        enum tg_class k;
                        if (tg_class_parse(name, &k) == 0 &&
                            (k == TG_CLASS_SUCCEEDED || k == TG_CLASS_REJECTED)) {
                                double lat =
                                    (double)json_integer_value(json_object_get(c, "latency_ms")) /
                                    1000.0;
                                if (r->n_close < r->cap_close)
                                        r->closes[r->n_close++] = start + lat;
                        }
                        r->since = (long long)json_integer_value(json_object_get(c, "id"));
                        used++;
                }
                json_decref(root);
                if (open_seen || used < PAGE)
                        break;
        }
        free(buf);
        return rc;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

/* First close time at which at most `threshold` are open, or -1. */
static double drain_time(struct run *r, double threshold)
{
        qsort(r->arrivals, r->n_arr, sizeof(double), cmp_double);
        qsort(r->closes, r->n_close, sizeof(double), cmp_double);
        size_t a = 0;
        for (size_t c = 0; c < r->n_close; c++) {
                double t = r->closes[c];
                while (a < r->n_arr && r->arrivals[a] <= t)
                        a++;
                if ((double)a - (double)(c + 1) <= threshold && a > 0)
                        return t;
        }
        return -1;
}

static int write_config(const char *dir, int api_port, int stub_port, double starts,
                        double in_flight, unsigned k, double scale, char *path, size_t size)
{
        int64_t interval = (int64_t)(QUERY_INTERVAL_MS * scale + 0.5);

        snprintf(path, size, "%s/tollgate.ini", dir);
        FILE *f = fopen(path, "w");
        if (!f)
                return TG_EIO;
        /* every close takes k - 1 queries: the budget must hold them; the
         * stub's "processing" answers after the first make the refund
         * pending at the provider, polled at the same interval (no
         * doubling: the model is k calls a close, each one interval on) */
        if (interval < 1)
                interval = 1;
        fprintf(f,
                "[store]\nurl = sqlite://%s/tg.db\n[api]\nlisten = 127.0.0.1:%d\n"
                "[provider]\nbase_url = http://127.0.0.1:%d\n"
                "[exit]\nstarts_per_second = %.6g\nmax_in_flight = %u\n"
                "[retry]\nquery_interval_ms = %lld\nmax_queries = %u\n"
                "pending_poll_interval_ms = %lld\npending_poll_max_ms = %lld\n"
                "pending_max_polls = %u\n[log]\nlevel = warn\n",
                dir, api_port, stub_port, starts, (unsigned)in_flight, (long long)interval,
                k > 10 ? k : 10, (long long)interval, (long long)interval, k > 10 ? k : 10);
        return fclose(f) == 0 ? 0 : TG_EIO;
}

static int healthy(const char *api)
{
        char url[96];
        struct http_client_result res = {0};
        snprintf(url, sizeof(url), "%s/healthz", api);
        return http_client_request(
                   &(struct http_client_request){.method = "GET", .url = url, .timeout_ms = 1000},
                   &res) == 0 &&
               res.status == 200;
}

static void tail_log(const char *what, const struct tool_proc *p)
{
        char line[512];
        FILE *f = fopen(p->log, "r");
        fprintf(stderr, "tollgate plan --simulate: %s failed; its log:\n", what);
        if (!f)
                return;
        while (fgets(line, sizeof(line), f))
                fprintf(stderr, "  %s", line);
        fclose(f);
}

int plan_simulate(const struct capacity_input *in, const struct capacity_plan *plan,
                  const struct plan_sim_options *opt)
{
        struct tool_proc stub, api, disp;
        struct run r;
        char tollgate[1024], stub_bin[1024], port_file[128], config[256];
        double F = opt->time_scale > 0 ? opt->time_scale : 1;
        double arr_rate = in->arrivals_per_s / F;
        double starts = plan->effective_calls_per_s / F;
        unsigned k = (unsigned)in->calls_per_close;
        char stub_mode[32];
        double in_flight = in->max_in_flight > 0 ? in->max_in_flight : 10;
        double analytic = plan->drains ? plan->drain_s * F : -1;
        double limit = opt->max_seconds > 0 ? opt->max_seconds
                       : analytic >= 0      ? fmin(600, 3 * analytic + 10)
                                            : 30;
        int rc = TG_EIO;

        memset(&r, 0, sizeof(r));
        memset(&stub, 0, sizeof(stub));
        memset(&api, 0, sizeof(api));
        memset(&disp, 0, sizeof(disp));
        if ((double)k != in->calls_per_close || k < 1 || k > CALLS_PER_CLOSE_MAX) {
                fprintf(stderr, "tollgate plan --simulate: --calls-per-close must be a whole number"
                                " 1..100 to be made for real (the stub answers so that every"
                                " close takes exactly that many calls)\n");
                return TG_EINVAL;
        }
        if (k == 1)
                snprintf(stub_mode, sizeof(stub_mode), "fast");
        else
                snprintf(stub_mode, sizeof(stub_mode), "calls:%u", k);
        printf("\nSimulation: the real dispatcher against tollgate-stub (%s) on loopback\n",
               stub_mode);
        if (in->backlog > 100000 || arr_rate * limit > 1000000) {
                fprintf(stderr, "tollgate plan --simulate: too many operations for a simulation"
                                " (backlog <= 100000, arrivals <= 1000000); use --time-scale"
                                " or smaller numbers\n");
                return TG_EINVAL;
        }
        if (tool_sibling("tollgate", tollgate, sizeof(tollgate)) < 0 ||
            tool_sibling("tollgate-stub", stub_bin, sizeof(stub_bin)) < 0) {
                fprintf(stderr, "tollgate plan --simulate: tollgate-stub not found next to this"
                                " binary\n");
                return TG_ENOTFOUND;
        }
        r.cap_arr = (size_t)in->backlog + (size_t)(arr_rate * limit) + 16;
        r.cap_close = r.cap_arr;
        r.arrivals = calloc(r.cap_arr, sizeof(double));
        r.closes = calloc(r.cap_close, sizeof(double));
        if (!r.arrivals || !r.closes || tool_proc_init(&stub, "tg-plan-stub") < 0 ||
            tool_proc_init(&api, "tg-plan") < 0 || tool_proc_init(&disp, "tg-plan-disp") < 0)
                goto out;

        snprintf(port_file, sizeof(port_file), "%s/port", stub.dir);
        char *const stub_argv[] = {stub_bin,  "--listen", "127.0.0.1:0", "--port-file",
                                   port_file, "--mode",   stub_mode,     NULL};
        if (tool_proc_start(&stub, stub_argv, port_file, 10) < 0) {
                tail_log("tollgate-stub", &stub);
                goto out;
        }
        int api_port = tool_free_port();
        if (api_port < 0 || write_config(api.dir, api_port, stub.port, starts, in_flight, k, F,
                                         config, sizeof(config)) < 0)
                goto out;
        snprintf(r.api, sizeof(r.api), "http://127.0.0.1:%d", api_port);
        char *const api_argv[] = {tollgate, "api", "--config", config, NULL};
        if (tool_proc_start(&api, api_argv, NULL, 0) < 0)
                goto out;
        double deadline = tool_now() + 10;
        while (!healthy(r.api)) {
                if (tool_now() > deadline) {
                        tail_log("tollgate api", &api);
                        goto out;
                }
                tool_sleep(0.02);
        }
        printf("  stub on 127.0.0.1:%d, tollgate api on 127.0.0.1:%d, store %s/tg.db\n", stub.port,
               api_port, api.dir);
        printf("  time scale %g: rates / %g, counts unchanged, times x %g\n", F, F, F);
        printf("  running: %g pre-loaded, %.4g/s arriving, exit at %.4g starts/s", in->backlog,
               arr_rate, starts);
        if (k > 1)
                printf(";\n  every close takes %u calls for real: the POST executes but answers"
                       " 500 (unknown),\n  then ",
                       k);
        if (k > 2)
                printf("%u quer%s \"processing\" and ", k - 2, k - 2 == 1 ? "y says" : "ies say");
        if (k > 1)
                printf("query %u says succeeded, each call through the exit", k - 1);
        printf("\n");
        fflush(stdout);

        for (size_t i = 0; i < (size_t)in->backlog; i++) {
                if (submit(&r, "plan-backlog", i) < 0) {
                        fprintf(stderr, "tollgate plan --simulate: pre-load failed at %zu\n", i);
                        goto out;
                }
        }
        /* The backlog is queued before the exit opens: it all counts as
         * present at the first call. */
        char *const disp_argv[] = {tollgate, "dispatch", "--config", config, NULL};
        if (tool_proc_start(&disp, disp_argv, NULL, 0) < 0)
                goto out;
        double t0 = 0;
        deadline = tool_now() + 15;
        while (t0 == 0) {
                if (tool_now() > deadline || poll_calls(&r, &t0) < 0) {
                        tail_log("tollgate dispatch", &disp);
                        goto out;
                }
                if (t0 == 0)
                        tool_sleep(0.005);
        }
        for (size_t i = 0; i < r.n_arr; i++)
                r.arrivals[i] = t0; /* pre-loaded: present at the start */

        double shortest = (double)(k - 1) * QUERY_INTERVAL_MS * F / 1000.0;
        double threshold = fmax(1, ceil(arr_rate * (0.1 + shortest)));
        size_t n_new = 0;
        double next_poll = tool_now(), drained_at = -1;
        while (tool_now() - t0 < limit) {
                double now = tool_now();
                while (arr_rate > 0 && t0 + (double)n_new / arr_rate <= now) {
                        if (submit(&r, "plan-arrival", n_new) < 0)
                                goto out;
                        n_new++;
                }
                if (now >= next_poll) {
                        if (poll_calls(&r, NULL) < 0)
                                goto out;
                        double open = (double)r.n_arr - (double)r.n_close;
                        if (open <= threshold && drained_at < 0)
                                drained_at = now;
                        /* Keep going a little past the drain for a clean log. */
                        if (drained_at >= 0 && now - drained_at > 0.3)
                                break;
                        next_poll = now + 0.05;
                }
                double next_arr = arr_rate > 0 ? t0 + (double)n_new / arr_rate : next_poll;
                double wake = fmin(next_arr, next_poll);
                tool_sleep(wake - tool_now());
        }

        double t_drain = drain_time(&r, threshold);
        if (t_drain < 0) {
                printf("  measured: did NOT drain within %.4g s: %zu accepted, %zu closed, %zu "
                       "open (analytic: %s)\n",
                       limit, r.n_arr, r.n_close, r.n_arr - r.n_close,
                       analytic < 0 ? "never drains" : "should have");
                rc = analytic < 0 ? 0 : TG_EIO;
                goto out;
        }
        double dur = t_drain - t0;
        size_t closes_in = 0;
        for (size_t i = 0; i < r.n_close; i++)
                closes_in += r.closes[i] <= t_drain;
        double m_closes = (double)closes_in / dur;
        double m_calls = (double)r.calls / (tool_now() - t0);
        printf("  drained: at most %g open after the close at +%.3f s\n", threshold, dur);
        printf("\n                      analytic      measured\n");
        if (analytic >= 0)
                printf("  time to drain       %-13.4g %.4g s%s", analytic, dur, F != 1 ? "" : "\n");
        else
                printf("  time to drain       %-13s %.4g s%s", "never", dur, F != 1 ? "" : "\n");
        if (F != 1)
                printf("   (unscaled: %.4g s vs %.4g s)\n", plan->drain_s, dur / F);
        printf("  closes/s            %-13.4g %.4g\n", plan->closes_per_s / F, m_closes);
        printf("  net drain/s         %-13.4g %.4g\n", plan->net_per_s / F, in->backlog / dur);
        printf("  exit starts/s       %-13.4g %.4g (all calls over the whole run)\n", starts,
               m_calls);
        printf("  calls per close     %-13g %.3g (every call in the log / every close)\n",
               in->calls_per_close, r.n_close ? (double)r.calls / (double)r.n_close : 0.0);
        if (analytic > 0)
                printf(
                    "  difference          %+.1f%% (dispatcher pick-up, API round trips, the call"
                    " log's granularity%s)\n",
                    100.0 * (dur - analytic) / analytic,
                    k > 1 ? " and the query interval each close waits" : "");
        if (r.refused)
                printf("  note: the API refused %u submissions for capacity (503); they were"
                       " sent again\n",
                       r.refused);
        rc = 0;
out:
        tool_proc_release(&disp);
        tool_proc_release(&api);
        tool_proc_release(&stub);
        free(r.arrivals);
        free(r.closes);
        return rc;
}
