/*
 * demo — the README's first command: tollgate doing its job through the
 * seed's incident. It starts tollgate-stub with the incident's timeline
 * (fast, then slow past the call timeout, then commit-then-drop, then
 * explicit rejects, then recovery: seed 000's acceptance order) and
 * `tollgate serve` on a fresh embedded SQLite store, feeds
 * refunds at a steady rate through the intake API, and draws a live view of
 * the backlog, starts/s, closes/s, the calls in flight (what the console's
 * in-flight chart shows: calls open at the transport, under the cap), the
 * operations claimed (state in_flight: those calls and the claims made ahead
 * of their slot), the oldest pending age and the provider's phase. It ends
 * with a summary — every refund settled or in manual review, refunds
 * executed twice, the minimum start spacing, the most POSTs any one
 * operation made — and stops everything it started.
 *
 * The demo talks to the provider stand-in only through tollgate's exit; its
 * own HTTP goes to tollgate's API and to the stub's /_stub admin routes, on
 * loopback, to processes it started itself. It reads the call log, the
 * backlog and the exit's samples straight from the store (read-only use of
 * the store API).
 */
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/policy.h"
#include "core/tg_error.h"
#include "daemon/config.h"
#include "daemon/exit_stats.h"
#include "net/http_client.h"
#include "platform/clock.h"
#include "platform/options.h"
#include "store/store.h"
#include "tools/demo_int.h"
#include "tools/tool_util.h"
#include "tools/tools.h"

#define TOKEN DEMO_TOKEN

volatile sig_atomic_t demo_interrupted;
#define interrupted demo_interrupted

static void on_interrupt(int sig)
{
        (void)sig;
        interrupted = 1;
}

struct demo_opts {
        bool quick;
        bool plain;        /* no terminal redraw: one line every few seconds */
        bool stay;         /* after the summary, keep tollgate and the stub up for the console */
        bool accounts;     /* --accounts: two accounts, two providers (demo_accounts.c) */
        const char *store; /* --store URL (borrowed from argv); NULL: a SQLite file of the run */
        double rate;       /* refunds fed per second */
        double scale;      /* stub time scale */
        double feed_s;
};

/* The incident, at full length (the stub compresses it by --time-scale). */
static const char timeline[] = "fast 20s; slow:3500 40s; drop 20s; reject 10s; fast";

static const char demo_about[] =
    "Runs tollgate against its provider stand-in through the seed's incident: fast, then slow "
    "past the 3 s call timeout, then executing and dropping the answer, then refusing refunds "
    "outright (422), then recovered. Refunds "
    "arrive at 4/s (the exit allows 5 calls/s); the view shows the backlog, starts/s, closes/s, "
    "in-flight, the oldest pending age and the provider's phase, then a summary. The console "
    "(the live timeline, operations, the manual-review desk) is at the URL it prints; sign in "
    "with the demo's token. About two minutes; --quick compresses the incident to about 45 s. "
    "Leaves nothing running (--stay keeps it up after the summary).";
static const char demo_epilogue[] =
    "Also: tollgate demo resilience [--help]   seed 002's four scenarios\n";

/* The live view: calls as they are logged (a claim is logged when it is
 * made, a little ahead of its start). */
struct view {
        int64_t last_call_id;
        unsigned long starts;
};

static int on_call(const struct call_record *c, void *userdata)
{
        struct view *v = userdata;
        v->last_call_id = c->id;
        v->starts++;
        return 0;
}

/* The summary, from the whole call log once the run is over: the calls
 * made (claims given back unsent are not calls) and their starts on the
 * wire (a call's start is on record once it ended). */
struct summary {
        unsigned long posts, queries;
        unsigned posts_max; /* the most POSTs one operation made (a POST's attempt number) */
        tg_mono_ns *starts;
        size_t nstarts, cap;
        bool oom;
};

static int on_summary_call(const struct call_record *c, void *userdata)
{
        struct summary *s = userdata;

        if (store_call_released(c))
                return 0;
        if (c->kind == TG_KIND_QUERY) {
                s->queries++;
        } else {
                s->posts++;
                if (c->attempt > s->posts_max)
                        s->posts_max = c->attempt;
        }
        if (c->handoff_mono <= 0)
                return 0;
        if (s->nstarts == s->cap) {
                size_t cap = s->cap ? 2 * s->cap : 256;
                tg_mono_ns *more = realloc(s->starts, cap * sizeof(*more));
                if (!more) {
                        s->oom = true;
                        return TG_ENOMEM;
                }
                s->starts = more;
                s->cap = cap;
        }
        s->starts[s->nstarts++] = c->start_mono;
        return 0;
}

static int cmp_mono(const void *a, const void *b)
{
        tg_mono_ns x = *(const tg_mono_ns *)a, y = *(const tg_mono_ns *)b;
        return (x > y) - (x < y);
}

/* The smallest gap between two starts on the wire; INT64_MAX with fewer
 * than two. */
static int64_t min_start_gap(struct summary *s)
{
        int64_t gap = INT64_MAX;

        qsort(s->starts, s->nstarts, sizeof(*s->starts), cmp_mono);
        for (size_t i = 1; i < s->nstarts; i++)
                if (s->starts[i] - s->starts[i - 1] < gap)
                        gap = s->starts[i] - s->starts[i - 1];
        return gap;
}

int demo_token_file(const char *dir, char *ret_path, size_t size)
{
        snprintf(ret_path, size, "%s/token", dir);
        /* a secret file nobody but its owner may read (config refuses others) */
        int fd = open(ret_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f) {
                if (fd >= 0)
                        close(fd);
                return TG_EIO;
        }
        fputs(TOKEN "\n", f);
        fclose(f);
        return 0;
}

static int write_config(const char *dir, const char *store, int api_port, int stub_port,
                        char *ret_path, size_t size)
{
        char token[256];
        FILE *f;
        int r = demo_token_file(dir, token, sizeof(token));

        if (r < 0)
                return r;
        snprintf(ret_path, size, "%s/tollgate.ini", dir);
        f = fopen(ret_path, "w");
        if (!f)
                return TG_EIO;
        /* the exit's own defaults (the key table's), written out so that the
         * demo's file shows them */
        struct tg_config def;
        config_defaults(&def);
        fprintf(f,
                "[store]\nurl = %s%s%s\n"
                "[api]\nlisten = 127.0.0.1:%d\ntoken_file = %s\n"
                "[provider]\nbase_url = http://127.0.0.1:%d\ntimeout_ms = %lld\n"
                /* the stand-in runs on this machine, sharing its CPUs with
                 * tollgate and this view: its arrivals vary by a few
                 * milliseconds more than a quiet path's */
                "[exit]\nstarts_per_second = %.6g\nmax_in_flight = %u\nspacing_margin_us = 5000\n"
                "[log]\nlevel = warn\n",
                store ? store : "sqlite://", store ? "" : dir, store ? "" : "/tollgate.db",
                api_port, token, stub_port, (long long)def.provider_timeout_ms,
                def.exit.starts_per_second, def.exit.max_in_flight);
        fclose(f);
        return 0;
}

int demo_submit(int api_port, const char *account, const char *operation_id, unsigned amount)
{
        char url[128], body[320], acct[64] = "";
        const char *headers[] = {"Authorization: Bearer " TOKEN, "Content-Type: application/json",
                                 NULL};
        struct http_client_result res = {0};
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/refunds", api_port);
        if (account)
                snprintf(acct, sizeof(acct), ",\"account\":\"%s\"", account);
        snprintf(body, sizeof(body),
                 "{\"operation_id\":\"%s\",\"payment_id\":\"pay-%s\","
                 "\"amount\":%u,\"currency\":\"TWD\"%s}",
                 operation_id, operation_id, amount, acct);
        int r = http_client_request(
            &(struct http_client_request){
                .method = "POST", .url = url, .headers = headers, .body = body, .timeout_ms = 2000},
            &res);
        if (r < 0)
                return r;
        return res.status == 202 || res.status == 200 ? 0 : TG_EIO;
}

static int submit(int api_port, unsigned n)
{
        char id[32];

        snprintf(id, sizeof(id), "demo-%05u", n);
        return demo_submit(api_port, NULL, id, 100 + n % 900);
}

/* The stub's current mode ("fast", "slow:3500", ...), or "?" */
void demo_stub_mode(int stub_port, char *out, size_t size)
{
        char url[128], resp[4096];
        struct http_client_result res = {0};
        snprintf(out, size, "?");
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/_stub/state", stub_port);
        if (http_client_request(&(struct http_client_request){.method = "GET",
                                                              .url = url,
                                                              .timeout_ms = 1000,
                                                              .resp = resp,
                                                              .resp_size = sizeof(resp)},
                                &res) < 0 ||
            res.status != 200)
                return;
        json_t *o = json_loads(resp, 0, NULL);
        const char *m = o ? json_string_value(json_object_get(o, "mode")) : NULL;
        if (m)
                snprintf(out, size, "%s", m);
        json_decref(o);
}

char *demo_stub_get(int stub_port, const char *path, size_t max)
{
        char url[160];
        char *resp = malloc(max);
        struct http_client_result res = {0};

        if (!resp)
                return NULL;
        snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", stub_port, path);
        if (http_client_request(&(struct http_client_request){.method = "GET",
                                                              .url = url,
                                                              .timeout_ms = 10000,
                                                              .resp = resp,
                                                              .resp_size = max},
                                &res) == 0 &&
            res.status == 200)
                return resp;
        free(resp);
        return NULL;
}

long demo_executed_twice(int stub_port)
{
        char *resp = demo_stub_get(stub_port, "/_stub/ledger", 8u << 20);
        json_t *o = resp ? json_loads(resp, 0, NULL) : NULL;
        json_t *ops = o ? json_object_get(o, "operations") : NULL;
        const char *key;
        json_t *op;
        long twice = -1;

        if (json_is_object(ops)) {
                twice = 0;
                json_object_foreach(ops, key, op)
                {
                        if (json_integer_value(json_object_get(op, "executions")) > 1)
                                twice++;
                }
        }
        json_decref(o);
        free(resp);
        return twice;
}

/* The calls open at the transport now, as the exit's newest sample says
 * (the console's in-flight chart): 0 while no dispatcher wrote one lately. */
static unsigned calls_open(struct store *store)
{
        static struct exit_sample sample; /* large: not on the stack */
        bool fresh = false;

        if (exit_stats_read_now(store, clock_wall_now(), 3000, &sample, &fresh) != 0 || !fresh)
                return 0;
        return sample.in_flight;
}

static double oldest_age_s(const struct store_stats *st)
{
        if (st->oldest_open_accepted_at == TG_WALL_NEVER || st->oldest_open_accepted_at <= 0)
                return 0;
        int64_t now_ms = clock_wall_now();
        return (double)(now_ms - st->oldest_open_accepted_at) / 1000.0;
}

/* Writes the stub's arrival record to path. 0 or a negative code. */
static int save_arrivals(int stub_port, const char *path)
{
        char *resp = demo_stub_get(stub_port, "/_stub/arrivals?since=0", 64u << 20);
        int r = resp ? TG_EIO : TG_ENOMEM;
        FILE *f = resp ? fopen(path, "w") : NULL;

        if (f) {
                size_t n = strlen(resp);
                r = fwrite(resp, 1, n, f) == n ? 0 : TG_EIO;
                if (fclose(f) != 0)
                        r = TG_EIO;
        }
        free(resp);
        return r;
}
/* The run as one HTML page (tollgate report), written to the current
 * directory so that it outlives the demo's temp files. 0 or a negative code. */
static int write_report(const struct demo_opts *o, const char *config, int stub_port,
                        const char *tmpdir, char *ret_path, size_t size)
{
        char self[1024], arrivals[512], scale[32], cwd[512];
        int r = tool_sibling("tollgate", self, sizeof(self));
        if (r < 0)
                return r;
        snprintf(arrivals, sizeof(arrivals), "%s/arrivals.jsonl", tmpdir);
        r = save_arrivals(stub_port, arrivals);
        if (r < 0)
                return r;
        if (!getcwd(cwd, sizeof(cwd)))
                return TG_EIO;
        snprintf(ret_path, size, "%s/tollgate-demo-report.html", cwd);
        snprintf(scale, sizeof(scale), "%g", o->scale);
        char *argv[] = {self,           "report",         "--config",
                        (char *)config, "--arrivals",     arrivals,
                        "--timeline",   (char *)timeline, "--time-scale",
                        scale,          "--title",        "tollgate demo: the seed's incident",
                        "--out",        ret_path,         NULL};
        pid_t pid = fork();
        if (pid < 0)
                return TG_EIO;
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY);
                if (null >= 0) {
                        dup2(null, STDOUT_FILENO);
                        dup2(null, STDERR_FILENO);
                }
                execv(self, argv);
                _exit(127);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0)
                ;
        unlink(arrivals);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : TG_EIO;
}

static void bar(char *out, size_t size, uint64_t open, uint64_t total)
{
        const int width = 30;
        int done = total ? (int)((double)(total - open) / (double)total * width) : width;
        size_t k = 0;
        out[k++] = '[';
        for (int i = 0; i < width && k + 2 < size; i++)
                out[k++] = i < done ? '#' : '.';
        out[k++] = ']';
        out[k] = '\0';
}

/* in_flight: calls open at the transport (never over the cap); claimed:
 * operations in the in_flight state, the claims made ahead included. */
static void draw(const struct demo_opts *o, double t, const struct store_stats *st,
                 unsigned long fed, unsigned starts_s, unsigned closes_s, unsigned in_flight,
                 double oldest_s, const char *mode)
{
        uint64_t open = st->by_state[OP_PENDING] + st->by_state[OP_IN_FLIGHT] +
                        st->by_state[OP_RETRY_WAIT] + st->by_state[OP_UNKNOWN];
        char b[40];
        bar(b, sizeof(b), open, fed);
        if (o->plain) {
                printf("t=%5.1fs fed=%lu open=%llu starts/s=%u closes/s=%u in_flight=%u "
                       "claimed=%llu oldest=%.1fs provider=%s\n",
                       t, fed, (unsigned long long)open, starts_s, closes_s, in_flight,
                       (unsigned long long)st->by_state[OP_IN_FLIGHT], oldest_s, mode);
        } else {
                printf("\033[H\033[J"
                       "tollgate demo — one exit through the seed's incident\n\n"
                       "  provider phase   %-16s  t = %5.1f s\n"
                       "  backlog          %s %llu open of %lu fed\n"
                       "  starts/s         %-3u (exit allows 5)\n"
                       "  closes/s         %-3u\n"
                       "  in flight        %-3u (calls open, cap 10)\n"
                       "  claimed          %-3llu (state in_flight: those and the claims made "
                       "ahead of their slot)\n"
                       "  oldest pending   %.1f s\n"
                       "  succeeded %llu  unknown %llu  retry_wait %llu  manual %llu\n",
                       mode, t, b, (unsigned long long)open, fed, starts_s, closes_s, in_flight,
                       (unsigned long long)st->by_state[OP_IN_FLIGHT], oldest_s,
                       (unsigned long long)st->by_state[OP_SUCCEEDED],
                       (unsigned long long)st->by_state[OP_UNKNOWN],
                       (unsigned long long)st->by_state[OP_RETRY_WAIT],
                       (unsigned long long)st->by_state[OP_MANUAL]);
        }
        fflush(stdout);
}

/* 0, OPTIONS_HELP, or TG_EINVAL (a message was printed). */
static int parse_opts(int argc, char **argv, struct demo_opts *o)
{
        const struct opt opts[] = {
            {.name = "quick", .flag = &o->quick, .help = "the short version"},
            {.name = "plain",
             .flag = &o->plain,
             .help = "no live redraw (a line every 2 s), for logs and CI; the default when "
                     "stdout is not a terminal"},
            {.name = "stay",
             .flag = &o->stay,
             .help = "after the summary, keep tollgate and the stub running (the console stays "
                     "up) until Ctrl-C"},
            {.name = "accounts",
             .flag = &o->accounts,
             .help = "two provider accounts in one tollgate, each at its own stand-in: one goes "
                     "through an incident, the other is not slowed by it (the console shows "
                     "both)"},
            {.name = "store",
             .arg = "URL",
             .string = &o->store,
             .help = "the store.url to run on (an empty database of a server store: "
                     "mysql://... or postgresql://...); default a SQLite file in the run's "
                     "temp dir"},
        };
        const struct options_spec spec = {.prog = "tollgate demo",
                                          .description = demo_about,
                                          .opts = opts,
                                          .nopts = sizeof(opts) / sizeof(opts[0]),
                                          .epilogue = demo_epilogue};
        int r;

        memset(o, 0, sizeof(*o));
        o->plain = !isatty(STDOUT_FILENO);
        r = options_parse(&spec, argc, argv, NULL, NULL);
        if (r)
                return r;
        o->rate = 4.0;
        o->scale = o->quick ? 0.35 : 1.0;
        /* Feed through the incident and a little of the recovery. */
        o->feed_s = (20 + 40 + 20 + 10 + 10) * o->scale;
        return 0;
}

struct demo_run {
        struct tool_proc stub, tg;
        struct store *store;
        char config[512];
};

int demo_wait_healthy(int api_port)
{
        char url[128];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", api_port);
        for (int i = 0; i < 100; i++) {
                struct http_client_result res = {0};
                if (http_client_request(&(struct http_client_request){.method = "GET",
                                                                      .url = url,
                                                                      .timeout_ms = 500},
                                        &res) == 0 &&
                    res.status == 200)
                        return 0;
                tool_sleep(0.1);
        }
        return TG_EIO;
}

int demo_binaries(char *stub_bin, char *self, size_t size)
{
        int r = tool_sibling("tollgate-stub", stub_bin, size);
        if (r == 0)
                r = tool_sibling("tollgate", self, size);
        if (r < 0)
                fprintf(stderr, "tollgate demo: cannot find tollgate-stub next to tollgate\n");
        return r;
}

static int start_all(struct demo_run *d, const struct demo_opts *o)
{
        char stub_bin[1024], self[1024], port_file[256], scale[32], record[256];
        int r = demo_binaries(stub_bin, self, sizeof(self));
        if (r < 0)
                return r;
        if (tool_proc_init(&d->stub, "tg-demo-stub") < 0 || tool_proc_init(&d->tg, "tg-demo") < 0)
                return TG_EIO;
        snprintf(port_file, sizeof(port_file), "%s/port", d->stub.dir);
        snprintf(scale, sizeof(scale), "%g", o->scale);
        snprintf(record, sizeof(record), "%s/arrivals.jsonl", d->stub.dir);
        char *stub_argv[] = {stub_bin,  "--listen",     "127.0.0.1:0",    "--port-file",
                             port_file, "--timeline",   (char *)timeline, "--time-scale",
                             scale,     "--query-mode", "fast",           NULL};
        r = tool_proc_start(&d->stub, stub_argv, port_file, 10);
        if (r < 0) {
                fprintf(stderr, "tollgate demo: the stub did not start (log: %s)\n", d->stub.log);
                return r;
        }
        int api_port = tool_free_port();
        if (api_port < 0)
                return api_port;
        d->tg.port = api_port;
        r = write_config(d->tg.dir, o->store, api_port, d->stub.port, d->config, sizeof(d->config));
        if (r < 0)
                return r;
        char *tg_argv[] = {self, "serve", "--config", d->config, NULL};
        r = tool_proc_start(&d->tg, tg_argv, NULL, 0);
        if (r < 0)
                return r;
        demo_wait_healthy(api_port);
        char store_url[600];
        if (o->store)
                snprintf(store_url, sizeof(store_url), "%s", o->store);
        else
                snprintf(store_url, sizeof(store_url), "sqlite://%s/tollgate.db", d->tg.dir);
        return store_open(store_url, &d->store);
}

static void stop_all(struct demo_run *d)
{
        store_close(d->store);
        d->store = NULL;
        tool_proc_release(&d->tg);
        tool_proc_release(&d->stub);
}

int cmd_demo(int argc, char **argv)
{
        /* The subcommand comes first: `demo resilience` has options of its own. */
        if (argc > 1 && strcmp(argv[1], "resilience") == 0)
                return cmd_demo_resilience(argc - 1, argv + 1);
        struct demo_opts o;
        int r = parse_opts(argc, argv, &o);
        if (r)
                return options_exit_status(r);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_interrupt;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);

        if (o.accounts)
                return demo_accounts_run(o.scale, o.plain);
        struct demo_run d;
        memset(&d, 0, sizeof(d));
        r = start_all(&d, &o);
        if (r < 0) {
                fprintf(stderr, "tollgate demo: could not start: %s\n", tg_strerror(r));
                stop_all(&d);
                return 1;
        }
        printf("tollgate demo: provider stand-in on 127.0.0.1:%d (timeline \"%s\" x %g), "
               "tollgate API on 127.0.0.1:%d\n"
               "tollgate demo: console http://127.0.0.1:%d/ui (sign in with the token %s)\n",
               d.stub.port, timeline, o.scale, d.tg.port, d.tg.port, TOKEN);

        struct view v;
        memset(&v, 0, sizeof(v));
        double t0 = tool_now(), next_feed = t0, next_draw = t0, next_second = t0 + 1;
        unsigned long fed = 0, failed_feeds = 0, starts_prev = 0;
        unsigned starts_s = 0, closes_s = 0, in_flight = 0;
        uint64_t final_prev = 0;
        double settle_limit = o.feed_s + 60; /* the deadline would go further; we stop here */
        struct store_stats st;
        memset(&st, 0, sizeof(st));
        char mode[64] = "?";
        for (;;) {
                double now = tool_now(), t = now - t0;
                if (interrupted)
                        break;
                if (t < o.feed_s && now >= next_feed) {
                        if (submit(d.tg.port, (unsigned)fed) == 0)
                                fed++;
                        else
                                failed_feeds++;
                        next_feed += 1.0 / o.rate;
                }
                if (now >= next_second) {
                        store_list_calls(d.store, v.last_call_id, 100000, on_call, &v);
                        if (store_stats(d.store, &st) == 0) {
                                uint64_t fin = st.by_state[OP_SUCCEEDED] +
                                               st.by_state[OP_REJECTED] + st.by_state[OP_MANUAL];
                                closes_s = (unsigned)(fin - final_prev);
                                final_prev = fin;
                        }
                        in_flight = calls_open(d.store);
                        starts_s = (unsigned)(v.starts - starts_prev);
                        starts_prev = v.starts;
                        demo_stub_mode(d.stub.port, mode, sizeof(mode));
                        next_second += 1;
                }
                if (now >= next_draw) {
                        draw(&o, t, &st, fed, starts_s, closes_s, in_flight, oldest_age_s(&st),
                             mode);
                        next_draw += o.plain ? 2.0 : 0.25;
                }
                uint64_t open = st.by_state[OP_PENDING] + st.by_state[OP_IN_FLIGHT] +
                                st.by_state[OP_RETRY_WAIT] + st.by_state[OP_UNKNOWN];
                if (t >= o.feed_s && open == 0 && st.by_state[OP_SUCCEEDED] > 0)
                        break;
                if (t >= settle_limit)
                        break;
                tool_sleep(0.02);
        }
        struct summary sum;
        memset(&sum, 0, sizeof(sum));
        /* the demo's run is a few thousand calls at most */
        if (store_list_calls(d.store, 0, 1000000, on_summary_call, &sum) < 0 || sum.oom)
                fprintf(stderr, "tollgate demo: could not read the whole call log\n");
        int64_t min_gap_ns = min_start_gap(&sum);
        store_stats(d.store, &st);
        long twice = demo_executed_twice(d.stub.port);
        uint64_t open = st.by_state[OP_PENDING] + st.by_state[OP_IN_FLIGHT] +
                        st.by_state[OP_RETRY_WAIT] + st.by_state[OP_UNKNOWN];
        char twice_text[32];
        if (twice < 0)
                snprintf(twice_text, sizeof(twice_text), "unknown (ledger unreadable)");
        else
                snprintf(twice_text, sizeof(twice_text), "%ld", twice);
        struct tg_config def; /* what write_config() gave the exit */
        config_defaults(&def);
        printf("\nsummary\n"
               "  refunds fed                 %lu (%lu refused by intake)\n"
               "  succeeded                   %llu\n"
               "  rejected                    %llu\n"
               "  in manual review            %llu\n"
               "  still open                  %llu\n"
               "  refunds executed twice      %s\n"
               "  minimum start spacing       %.1f ms (exit allows one start per %.0f ms)\n"
               "  POSTs per operation         %u at most (the exit allows %u; %.2f on average), "
               "queries %lu\n",
               fed, failed_feeds, (unsigned long long)st.by_state[OP_SUCCEEDED],
               (unsigned long long)st.by_state[OP_REJECTED],
               (unsigned long long)st.by_state[OP_MANUAL], (unsigned long long)open, twice_text,
               min_gap_ns == INT64_MAX ? 0.0 : (double)min_gap_ns / 1e6,
               1000.0 / def.exit.starts_per_second, sum.posts_max, def.policy.max_attempts,
               fed ? (double)sum.posts / (double)fed : 0.0, sum.queries);
        free(sum.starts);
        char report[600];
        if (!interrupted &&
            write_report(&o, d.config, d.stub.port, d.tg.dir, report, sizeof(report)) == 0)
                printf("  report                      %s\n", report);
        printf("  console                     http://127.0.0.1:%d/ui (token %s)%s\n", d.tg.port,
               TOKEN, o.stay ? "" : "; up while the demo runs, --stay keeps it after");
        fflush(stdout);
        if (o.stay && !interrupted) {
                printf("tollgate demo: tollgate and the stub stay up for the console; Ctrl-C "
                       "stops them\n");
                fflush(stdout);
                while (!interrupted)
                        tool_sleep(0.2);
                interrupted = 0; /* the run itself finished: its status stands */
        }
        stop_all(&d);
        if (interrupted)
                return 130;
        return (twice == 0 && open == 0 && fed > 0) ? 0 : 1;
}
