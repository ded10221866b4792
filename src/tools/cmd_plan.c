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

#include "tools/capacity.h"
#include "tools/plan_sim.h"
#include "tools/tool_util.h"
#include "tools/tools.h"

static const char plan_help[] =
    "usage: tollgate plan [options]\n"
    "Seed 000's drain arithmetic: how long a backlog takes to clear while new work\n"
    "keeps arriving and every close costs calls from one provider quota.\n"
    "\n"
    "  --backlog N            operations queued now (240)\n"
    "  --arrivals R           new operations per second (2)\n"
    "  --calls-per-second C   provider calls per second allowed (5)\n"
    "  --calls-per-close K    calls one close costs on average, retries and queries\n"
    "                         counted (1)\n"
    "  --attempts A --queries Q  instead of K: POSTs and queries per close (K = A + Q)\n"
    "  --target T             wanted drain time in seconds (none)\n"
    "  --max-in-flight N --call-time S  also model the local in-flight bound:\n"
    "                         at most N / S calls per second (seed: 10 / 3 s = 3.33/s)\n"
    "  --example NAME         seed figures: seed (240, 2/s, 5 closes/s -> 80 s),\n"
    "                         seed-2calls (same, 2 calls per close -> 480 s),\n"
    "                         exercise (600, 3/s, 10 calls/s, 2 per close, 120 s target)\n"
    "\n"
    "  --simulate             also run the numbers through the real dispatcher: starts\n"
    "                         tollgate-stub (fast) and tollgate (api + dispatch) on\n"
    "                         loopback with a temporary SQLite store, pre-loads the\n"
    "                         backlog through the API, keeps submitting at the arrival\n"
    "                         rate and measures until the backlog drains\n"
    "  --time-scale F         with --simulate: compress time by F (0 < F <= 1). Rates\n"
    "                         are divided by F, counts stay: 240 queued at 2/s with\n"
    "                         5 calls/s and F = 0.1 runs as 240 at 20/s with 50 calls/s,\n"
    "                         so every time (drain, target) is multiplied by F (1)\n"
    "  --max-seconds S        with --simulate: give up measuring after S real seconds\n"
    "                         (default: 3 x the analytic drain time + 10, at most 600)\n";

struct plan_opts {
        struct capacity_input in;
        int simulate;
        double time_scale;
        double max_seconds;
        int have_parts;
        double attempts, queries;
};

static void set_example(struct plan_opts *o, const char *name, int *ok)
{
        *ok = 1;
        if (strcmp(name, "seed") == 0) {
                o->in.backlog = 240;
                o->in.arrivals_per_s = 2;
                o->in.calls_per_s = 5;
                o->in.calls_per_close = 1;
        } else if (strcmp(name, "seed-2calls") == 0) {
                o->in.backlog = 240;
                o->in.arrivals_per_s = 2;
                o->in.calls_per_s = 5;
                o->in.calls_per_close = 2;
        } else if (strcmp(name, "exercise") == 0) {
                o->in.backlog = 600;
                o->in.arrivals_per_s = 3;
                o->in.calls_per_s = 10;
                o->in.calls_per_close = 2;
                o->in.target_s = 120;
        } else {
                *ok = 0;
        }
}

static int parse(int argc, char **argv, struct plan_opts *o)
{
        memset(o, 0, sizeof(*o));
        o->in.backlog = 240;
        o->in.arrivals_per_s = 2;
        o->in.calls_per_s = 5;
        o->in.calls_per_close = 1;
        o->time_scale = 1;
        for (int i = 0; i + 1 < argc; i++) {
                int ok;
                if (strcmp(argv[i], "--example") != 0)
                        continue;
                set_example(o, argv[i + 1], &ok);
                if (!ok) {
                        fprintf(stderr,
                                "tollgate plan: --example: '%s' is not seed, seed-2calls or "
                                "exercise\n",
                                argv[i + 1]);
                        return 2;
                }
        }
        for (int i = 0; i < argc; i++) {
                const char *a = argv[i];
                double *dst = NULL, lo = 0, hi = 1e12;
                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        fputs(plan_help, stdout);
                        exit(0);
                }
                if (strcmp(a, "--simulate") == 0) {
                        o->simulate = 1;
                        continue;
                }
                if (strcmp(a, "--backlog") == 0) {
                        dst = &o->in.backlog;
                } else if (strcmp(a, "--arrivals") == 0) {
                        dst = &o->in.arrivals_per_s;
                } else if (strcmp(a, "--calls-per-second") == 0) {
                        dst = &o->in.calls_per_s;
                } else if (strcmp(a, "--calls-per-close") == 0) {
                        dst = &o->in.calls_per_close;
                        lo = 1;
                } else if (strcmp(a, "--attempts") == 0) {
                        dst = &o->attempts;
                        o->have_parts = 1;
                } else if (strcmp(a, "--queries") == 0) {
                        dst = &o->queries;
                        o->have_parts = 1;
                } else if (strcmp(a, "--target") == 0) {
                        dst = &o->in.target_s;
                } else if (strcmp(a, "--max-in-flight") == 0) {
                        dst = &o->in.max_in_flight;
                } else if (strcmp(a, "--call-time") == 0) {
                        dst = &o->in.call_s;
                } else if (strcmp(a, "--time-scale") == 0) {
                        dst = &o->time_scale;
                        lo = 1e-6;
                        hi = 1;
                } else if (strcmp(a, "--max-seconds") == 0) {
                        dst = &o->max_seconds;
                } else if (strcmp(a, "--example") == 0 && i + 1 < argc) {
                        i++;
                        continue;
                } else {
                        fprintf(stderr, "tollgate plan: unknown option '%s' (try --help)\n", a);
                        return 2;
                }
                if (i + 1 >= argc || tool_parse_double(argv[i + 1], lo, hi, dst) < 0) {
                        fprintf(stderr, "tollgate plan: %s needs a number in [%g, %g]\n", a, lo,
                                hi);
                        return 2;
                }
                i++;
        }
        if (o->have_parts) {
                o->in.calls_per_close = o->attempts + o->queries;
                if (o->in.calls_per_close < 1) {
                        fprintf(stderr, "tollgate plan: --attempts + --queries must be >= 1\n");
                        return 2;
                }
        }
        struct capacity_plan p;
        if (capacity_plan(&o->in, &p) < 0) {
                fprintf(stderr, "tollgate plan: need --calls-per-second > 0, --calls-per-close"
                                " >= 1, and --max-in-flight with --call-time (both or neither)\n");
                return 2;
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
        argc--; /* argv from the command's name on: skip it (until the options table) */
        argv++;
        struct plan_opts o;
        struct capacity_plan p;
        int rc = parse(argc, argv, &o);
        if (rc)
                return rc;
        capacity_plan(&o.in, &p);
        plan_print(&o.in, &p);
        if (!o.simulate)
                return 0;
        struct plan_sim_options so = {.time_scale = o.time_scale, .max_seconds = o.max_seconds};
        return plan_simulate(&o.in, &p, &so);
}
