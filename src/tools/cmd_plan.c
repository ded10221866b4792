/*
 * tollgate plan — seed 000's capacity arithmetic as a command: backlog,
 * arrival rate, calls/s allowed and calls per close (attempts, retries and
 * queries all counted) give the time to drain, the net drain rate, the calls
 * per second a target drain time needs, a 10%-worse sensitivity table naming
 * the dominant assumption, and a plain "never drains" when arrivals keep up
 * with closes. The arithmetic is core/capacity (pure); this file parses,
 * formats, and with --simulate hands the same numbers to plan_sim.c, which
 * runs them through the real dispatcher against a stub on loopback.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "platform/options.h"
#include "tools/capacity.h"
#include "tools/plan_sim.h"
#include "tools/tools.h"

static const char plan_about[] =
    "Seed 000's drain arithmetic: how long a backlog takes to clear while new work keeps "
    "arriving and every close costs calls from one provider quota.";

static const char plan_epilogue[] =
    "Examples (--example NAME; options given with it override it):\n"
    "  seed         240 queued, 2/s, 5 closes/s -> 80 s\n"
    "  seed-2calls  the same at 2 calls per close -> 480 s\n"
    "  exercise     600 queued, 3/s, 10 calls/s, 2 per close, 120 s target\n"
    "\n"
    "--simulate starts tollgate-stub and tollgate (api + dispatch) on loopback\n"
    "with a temporary SQLite store, pre-loads the backlog through the API,\n"
    "keeps submitting at the arrival rate and measures until the backlog\n"
    "drains. K calls per close (a whole number) are made for real: the stub\n"
    "(mode calls:K) answers each POST 500 after executing it, then K-2 queries\n"
    "\"processing\" and the next one succeeded, all through the exit. With\n"
    "--time-scale F rates are divided by F and counts stay: 240 queued at 2/s\n"
    "with 5 calls/s and F = 0.1 runs as 240 at 20/s with 50 calls/s, so every\n"
    "time (drain, target, the query interval) is multiplied by F.\n";

static const char *const examples[] = {"seed", "seed-2calls", "exercise", NULL};

struct plan_opts {
        struct capacity_input in;
        bool simulate;
        double time_scale;
        double max_seconds;
};

/* name is one of examples[]. */
static void set_example(struct capacity_input *in, const char *name)
{
        in->backlog = 240;
        in->arrivals_per_s = 2;
        in->calls_per_s = 5;
        in->calls_per_close = 1;
        if (strcmp(name, "seed-2calls") == 0) {
                in->calls_per_close = 2;
        } else if (strcmp(name, "exercise") == 0) {
                in->backlog = 600;
                in->arrivals_per_s = 3;
                in->calls_per_s = 10;
                in->calls_per_close = 2;
                in->target_s = 120;
        }
}

/* The numbers as given: the example (if any) is applied first, then every
 * number given overrides it. File-level, as the table that names them is
 * (a command parses once; options_parse() is not reentrant anyway). */
enum { BACKLOG, ARRIVALS, CPS, CPC, ATTEMPTS, QUERIES, TARGET, MIF, CALL_TIME, N_NUM };
static struct {
        double v[N_NUM];
        bool set[N_NUM];
        int example;
        bool example_set, simulate;
        double time_scale, max_seconds;
} flags;

static const struct opt plan_options[] = {
    {.name = "backlog",
     .arg = "N",
     .dbl = &flags.v[BACKLOG],
     .seen = &flags.set[BACKLOG],
     .dmin = 0,
     .dmax = 1e12,
     .help = "operations queued now (240)"},
    {.name = "arrivals",
     .arg = "R",
     .dbl = &flags.v[ARRIVALS],
     .seen = &flags.set[ARRIVALS],
     .dmin = 0,
     .dmax = 1e12,
     .help = "new operations per second (2)"},
    {.name = "calls-per-second",
     .arg = "C",
     .dbl = &flags.v[CPS],
     .seen = &flags.set[CPS],
     .dmin = 0,
     .dmax = 1e12,
     .help = "provider calls per second allowed (5)"},
    {.name = "calls-per-close",
     .arg = "K",
     .dbl = &flags.v[CPC],
     .seen = &flags.set[CPC],
     .dmin = 1,
     .dmax = 1e12,
     .help = "calls one close costs on average, retries and queries counted (1)"},
    {.name = "attempts",
     .arg = "A",
     .dbl = &flags.v[ATTEMPTS],
     .seen = &flags.set[ATTEMPTS],
     .dmin = 0,
     .dmax = 1e12,
     .help = "instead of --calls-per-close: POSTs per close (K = A + Q)"},
    {.name = "queries",
     .arg = "Q",
     .dbl = &flags.v[QUERIES],
     .seen = &flags.set[QUERIES],
     .dmin = 0,
     .dmax = 1e12,
     .help = "with --attempts: queries per close"},
    {.name = "target",
     .arg = "T",
     .dbl = &flags.v[TARGET],
     .seen = &flags.set[TARGET],
     .dmin = 0,
     .dmax = 1e12,
     .help = "wanted drain time in seconds (none)"},
    {.name = "max-in-flight",
     .arg = "N",
     .dbl = &flags.v[MIF],
     .seen = &flags.set[MIF],
     .dmin = 0,
     .dmax = 1e12,
     .help = "with --call-time, also model the local in-flight bound: at most N / S "
             "calls per second (seed: 10 / 3 s = 3.33/s)"},
    {.name = "call-time",
     .arg = "S",
     .dbl = &flags.v[CALL_TIME],
     .seen = &flags.set[CALL_TIME],
     .dmin = 0,
     .dmax = 1e12,
     .help = "with --max-in-flight: mean seconds per call"},
    {.name = "example",
     .choice = &flags.example,
     .choices = examples,
     .seen = &flags.example_set,
     .help = "seed figures (below)"},
    {.name = "simulate",
     .flag = &flags.simulate,
     .help = "also run the numbers through the real dispatcher (below)"},
    {.name = "time-scale",
     .arg = "F",
     .dbl = &flags.time_scale,
     .dmin = 1e-6,
     .dmax = 1,
     .help = "with --simulate: compress time by F (1)"},
    {.name = "max-seconds",
     .arg = "S",
     .dbl = &flags.max_seconds,
     .dmin = 0,
     .dmax = 1e12,
     .help = "with --simulate: give up measuring after S real seconds (default: 3 x "
             "the analytic drain time + 10, at most 600)"},
};

static const struct options_spec plan_spec = {.prog = "tollgate plan",
                                              .description = plan_about,
                                              .opts = plan_options,
                                              .nopts =
                                                  sizeof(plan_options) / sizeof(plan_options[0]),
                                              .epilogue = plan_epilogue};

/* 0, OPTIONS_HELP, or TG_EINVAL (a message was printed). */
static int parse(int argc, char **argv, struct plan_opts *o)
{
        double *const field[N_NUM] = {
            [BACKLOG] = &o->in.backlog,
            [ARRIVALS] = &o->in.arrivals_per_s,
            [CPS] = &o->in.calls_per_s,
            [CPC] = &o->in.calls_per_close,
            [TARGET] = &o->in.target_s,
            [MIF] = &o->in.max_in_flight,
            [CALL_TIME] = &o->in.call_s,
            [ATTEMPTS] = NULL,
            [QUERIES] = NULL,
        };
        struct capacity_plan p;
        int r;

        memset(o, 0, sizeof(*o));
        memset(&flags, 0, sizeof(flags));
        flags.time_scale = 1;
        r = options_parse(&plan_spec, argc, argv, NULL, NULL);
        if (r)
                return r;
        o->simulate = flags.simulate;
        o->time_scale = flags.time_scale;
        o->max_seconds = flags.max_seconds;
        set_example(&o->in, flags.example_set ? examples[flags.example] : "seed");
        for (int i = 0; i < N_NUM; i++)
                if (flags.set[i] && field[i])
                        *field[i] = flags.v[i];
        if (flags.set[ATTEMPTS] || flags.set[QUERIES]) {
                o->in.calls_per_close = flags.v[ATTEMPTS] + flags.v[QUERIES];
                if (o->in.calls_per_close < 1) {
                        fprintf(stderr, "tollgate plan: --attempts + --queries must be >= 1\n");
                        return TG_EINVAL;
                }
        }
        if (capacity_plan(&o->in, &p) < 0) {
                fprintf(stderr, "tollgate plan: need --calls-per-second > 0, --calls-per-close"
                                " >= 1, and --max-in-flight with --call-time (both or neither)\n");
                return TG_EINVAL;
        }
        return 0;
}

/* Seconds, and minutes when that reads better. */
static const char *fmt_s(double s, char *buf, size_t size)
{
        if (s < 0)
                snprintf(buf, size, "never");
        else if (s >= 120)
                snprintf(buf, size, "%.4g s (%.1f min)", s, s / 60);
        else
                snprintf(buf, size, "%.4g s", s);
        return buf;
}

static void plan_print(const struct capacity_input *in, const struct capacity_plan *p)
{
        char b1[64];

        printf("tollgate plan: %g queued, %g/s arriving, %g calls/s allowed, %g calls per close\n",
               in->backlog, in->arrivals_per_s, in->calls_per_s, in->calls_per_close);
        if (in->max_in_flight > 0)
                printf("  in-flight bound     %g in flight / %g s per call = %.3g calls/s%s\n",
                       in->max_in_flight, in->call_s, p->in_flight_calls_per_s,
                       p->in_flight_binds ? "  <- binds: below the quota" : " (quota binds)");
        printf("  closes/s            %.4g calls/s / %g calls per close = %.4g/s\n",
               p->effective_calls_per_s, in->calls_per_close, p->closes_per_s);
        printf("  net drain           %.4g closes/s - %g arriving/s = %.4g/s\n", p->closes_per_s,
               in->arrivals_per_s, p->net_per_s);
        if (p->drains)
                printf("  time to drain       %g / %.4g = %s\n", in->backlog, p->net_per_s,
                       fmt_s(p->drain_s, b1, sizeof(b1)));
        else
                printf("  time to drain       NEVER DRAINS: arrivals (%g/s) >= closes (%.4g/s); the"
                       " backlog grows by %.4g/s\n",
                       in->arrivals_per_s, p->closes_per_s, -p->net_per_s);
        printf("  to keep up          %.4g calls/s just to hold the backlog level (%g/s x %g)\n",
               p->calls_to_hold_per_s, in->arrivals_per_s, in->calls_per_close);
        if (in->target_s > 0) {
                char b2[64];
                snprintf(b2, sizeof(b2), "%g s", in->target_s);
                printf("  target %-12s %g / %g + %g = %.4g closes/s = %.4g calls/s at %g per "
                       "close",
                       b2, in->backlog, in->target_s, in->arrivals_per_s, p->closes_needed_per_s,
                       p->calls_needed_per_s, in->calls_per_close);
                if (p->target_met)
                        printf(" (met)\n");
                else
                        printf(" (have %.4g: %.4g short)\n", p->effective_calls_per_s,
                               p->calls_needed_per_s - p->effective_calls_per_s);
        }
        printf("\n  each assumption 10%% worse:\n");
        for (int f = 0; f < CAPACITY_FACTORS; f++) {
                static const char *const how[CAPACITY_FACTORS] = {"x1.1", "x1.1", "x1.1", "/1.1",
                                                                  "x1.1"};
                if (f == CAPACITY_CALL_TIME && in->call_s <= 0)
                        continue;
                double d = p->worse_drain_s[f];
                printf("    %-16s %s -> %s", capacity_factor_name((enum capacity_factor)f), how[f],
                       fmt_s(d, b1, sizeof(b1)));
                if (d >= 0 && p->drains && p->drain_s > 0)
                        printf(" (%+.0f%%)", 100.0 * (d - p->drain_s) / p->drain_s);
                printf("\n");
        }
        printf("  dominant: %s", capacity_factor_name(p->dominant));
        if (p->dominant == CAPACITY_CALLS_PER_CLOSE || p->dominant == CAPACITY_CALLS_PER_S)
                printf(" (calls/s and calls per close act only through closes/s; check calls per"
                       "\n  close first: retries, reconciliation queries and the long tail are"
                       " easy to leave out,\n  and the quota will not grow by adding workers)");
        printf("\n");
}

int cmd_plan(int argc, char **argv)
{
        struct plan_opts o;
        struct capacity_plan p;
        int r = parse(argc, argv, &o);

        if (r)
                return options_exit_status(r);
        capacity_plan(&o.in, &p);
        plan_print(&o.in, &p);
        if (!o.simulate)
                return 0;
        struct plan_sim_options so = {.time_scale = o.time_scale, .max_seconds = o.max_seconds};
        return options_exit_status(plan_simulate(&o.in, &p, &so));
}
