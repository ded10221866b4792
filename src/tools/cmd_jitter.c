/*
 * tollgate jitter — seed 004 (exponential backoff and jitter) as a command:
 * N clients fail together and retry over R rounds; prints the seed's window
 * table with and without jitter, arrivals per bucket against a stated
 * capacity, the tail wait and the seed's warnings (no cap, no give-up, tail
 * wait), and optionally an SVG histogram of the arrivals drawn here by hand.
 * The simulation itself is core/jitter_sim (pure, seeded); this file only
 * parses flags, runs it (twice when a jitter mode is chosen: once without
 * jitter for the comparison column) and formats. Presets reproduce the
 * seed's two worked examples: --example table (5 clients, windows 0-1 ...
 * 0-16 s) and --example credit-union (37 calls, 10/20/40/80-minute windows,
 * 6 lines, and its old fixed 10-minute schedule simulated beside them with
 * --fixed). --calls FILE measures real records instead (tools/jitter_records:
 * the seed's first self-check, the busiest second of last time's failures).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/backoff.h"
#include "core/tg_error.h"
#include "platform/options.h"
#include "tools/jitter_records.h"
#include "tools/jitter_sim.h"
#include "tools/tools.h"

#define HIST_ROWS 40 /* text histogram rows at most */
#define BAR_WIDTH 50

static const char jitter_about[] =
    "Simulates N clients that failed together retrying over R rounds of exponential windows "
    "(seed 004). Round k's window is [min, min(cap, base * factor^(k-1))]; the jitter mode picks "
    "each client's wait in it. Worst case: no retry succeeds before the last round, so every "
    "client is counted in every round.\n\n"
    "Every T is in the --unit (s by default).\n\n"
    "With --calls FILE it measures real records instead: a call log (tollgate calls, JSON lines "
    "or csv) or a CSV of another system's failures with a time column; it shows the busiest "
    "second and minute, the peak against --capacity (per second), and whether the records are "
    "spread as jitter would spread them (against the same number thrown at random over the same "
    "span, --runs draws from --seed).";

static const char jitter_epilogue[] =
    "Examples (--example NAME; options given with it override it):\n"
    "  table         5 clients, rounds 1-5, windows 0-1 ... 0-16 s\n"
    "  credit-union  37 calls, 4 rounds of 10/20/40/80 min, 6 lines, 1000 runs,\n"
    "                and the old schedule: --fixed 10 --fixed-rounds 3\n"
    "Records (--calls FILE; with --capacity, --seed, --runs only):\n"
    "  JSON lines    {\"start_wall\": ms, \"kind\": \"first\"|\"retry\"|...} a line\n"
    "  CSV           a header naming a time column (start_wall, time, timestamp,\n"
    "                at, ts, failed_at): RFC 3339, or seconds (ms past 1e11)\n"
    "                since the epoch; an optional kind column\n";

static const char *const jitter_modes[] = {"none", "full", "equal", "decorrelated", NULL};
static const char *const units[] = {"s", "min", NULL};
static const double unit_ms[] = {1000.0, 60000.0};
static const char *const examples[] = {"table", "credit-union", NULL};

struct jitter_opts {
        struct jitter_sim_config sim;
        double unit_ms;
        const char *unit;
        const char *svg;
        const char *example;
        unsigned runs; /* seeds to repeat over for the distribution (1 = just this seed) */
        /* The old schedule, simulated beside: every retry fixed_ms after the
         * one before, no jitter, fixed_rounds of them; 0: none. */
        int64_t fixed_ms;
        unsigned fixed_rounds;
        const char *calls; /* measure this file of records instead of simulating */
        bool runs_set;
};

static void defaults(struct jitter_opts *o)
{
        memset(o, 0, sizeof(*o));
        o->sim.clients = 5;
        o->sim.rounds = 5;
        o->sim.base_ms = 1000;
        o->sim.factor = 2.0;
        o->sim.jitter = BACKOFF_JITTER_FULL;
        o->sim.bucket_ms = 1000;
        o->sim.seed = 1;
        o->unit_ms = 1000.0;
        o->unit = "s";
        o->runs = 1;
}

/* name is one of examples[]. */
static void apply_example(struct jitter_opts *o, const char *name)
{
        defaults(o);
        o->example = name;
        if (strcmp(name, "credit-union") == 0) {
                o->unit_ms = 60000.0;
                o->unit = "min";
                o->sim.clients = 37;
                o->sim.rounds = 4;
                o->sim.base_ms = 10 * 60000;
                o->sim.bucket_ms = 60000;
                o->sim.capacity = 6;
                o->runs = 1000;
                /* "calls at minutes 0, 10, 20, 30": the first call and
                 * three retries, every 10 minutes */
                o->fixed_ms = 10 * 60000;
                o->fixed_rounds = 3;
        }
}

/* The options as given; the example (if any) is applied first, then every
 * option given overrides it, and times wait for the unit. */
struct jitter_flags {
        uint64_t clients, rounds, capacity, runs, seed, fixed_rounds;
        double factor, base, min, cap, give_up, bucket, fixed;
        int jitter, unit, example;
        const char *svg, *calls;
        bool clients_set, rounds_set, capacity_set, runs_set, seed_set, factor_set, jitter_set,
            unit_set, base_set, min_set, cap_set, give_up_set, bucket_set, example_set, fixed_set,
            fixed_rounds_set;
};

/* What the options write: file-level, as the table that names it is (a
 * command parses once; options_parse() is not reentrant anyway). */
static struct jitter_flags flags;

static const struct opt jitter_options[] = {
    {.name = "clients",
     .arg = "N",
     .u64 = &flags.clients,
     .umin = 1,
     .umax = JITTER_SIM_MAX_CLIENTS,
     .seen = &flags.clients_set,
     .help = "clients that failed together (5)"},
    {.name = "rounds",
     .arg = "R",
     .u64 = &flags.rounds,
     .umin = 1,
     .umax = JITTER_SIM_MAX_ROUNDS,
     .seen = &flags.rounds_set,
     .help = "retry rounds (5)"},
    {.name = "base",
     .arg = "T",
     .dbl = &flags.base,
     .dmin = 0,
     .dmax = 1e15,
     .seen = &flags.base_set,
     .help = "upper edge of round 1's window (1)"},
    {.name = "factor",
     .arg = "F",
     .dbl = &flags.factor,
     .dmin = 1,
     .dmax = 1000,
     .seen = &flags.factor_set,
     .help = "window growth per round (2)"},
    {.name = "min",
     .arg = "T",
     .dbl = &flags.min,
     .dmin = 0,
     .dmax = 1e15,
     .seen = &flags.min_set,
     .help = "lower edge of every window (0)"},
    {.name = "cap",
     .arg = "T",
     .dbl = &flags.cap,
     .dmin = 0,
     .dmax = 1e15,
     .seen = &flags.cap_set,
     .help = "per-round cap on the window (none)"},
    {.name = "give-up",
     .arg = "T",
     .dbl = &flags.give_up,
     .dmin = 0,
     .dmax = 1e15,
     .seen = &flags.give_up_set,
     .help = "total give-up time from the first failure (none)"},
    {.name = "jitter",
     .choice = &flags.jitter,
     .choices = jitter_modes,
     .seen = &flags.jitter_set,
     .help = "how each wait is drawn in its window (full)"},
    {.name = "bucket",
     .arg = "T",
     .dbl = &flags.bucket,
     .dmin = 0,
     .dmax = 1e15,
     .seen = &flags.bucket_set,
     .help = "width of a counting bucket (1)"},
    {.name = "capacity",
     .arg = "C",
     .u64 = &flags.capacity,
     .umin = 0,
     .umax = 1000000000,
     .seen = &flags.capacity_set,
     .help = "arrivals per bucket the far side can take (not stated)"},
    {.name = "seed",
     .arg = "N",
     .u64 = &flags.seed,
     .umin = 0,
     .umax = UINT64_MAX,
     .seen = &flags.seed_set,
     .help = "seed of the draws (1)"},
    {.name = "unit",
     .choice = &flags.unit,
     .choices = units,
     .seen = &flags.unit_set,
     .help = "unit of every T and of the output (s)"},
    {.name = "svg",
     .arg = "FILE",
     .string = &flags.svg,
     .help = "also write an SVG histogram of the arrivals"},
    {.name = "runs",
     .arg = "N",
     .u64 = &flags.runs,
     .umin = 1,
     .umax = 100000,
     .seen = &flags.runs_set,
     .help = "also repeat over seeds seed..seed+N-1 and print how the peaks spread (1: "
             "only this seed; credit-union sets 1000)"},
    {.name = "example",
     .choice = &flags.example,
     .choices = examples,
     .seen = &flags.example_set,
     .help = "a seed preset (below)"},
    {.name = "fixed",
     .arg = "T",
     .dbl = &flags.fixed,
     .dmin = 0,
     .dmin_open = true,
     .dmax = 1e15,
     .seen = &flags.fixed_set,
     .help = "also simulate the old schedule: every retry T after the one before, no "
             "jitter (credit-union: 10 min)"},
    {.name = "fixed-rounds",
     .arg = "R",
     .u64 = &flags.fixed_rounds,
     .umin = 1,
     .umax = JITTER_SIM_MAX_ROUNDS,
     .seen = &flags.fixed_rounds_set,
     .help = "retries of the old schedule (default --rounds; credit-union: 3)"},
    {.name = "calls",
     .arg = "FILE",
     .string = &flags.calls,
     .help = "measure real records instead of simulating: a call log or a CSV of "
             "failures (below)"},
};

static const struct options_spec jitter_spec = {.prog = "tollgate jitter",
                                                .description = jitter_about,
                                                .opts = jitter_options,
                                                .nopts = sizeof(jitter_options) /
                                                         sizeof(jitter_options[0]),
                                                .epilogue = jitter_epilogue};

static int64_t to_ms(double v, double unit)
{
        return (int64_t)(v * unit + 0.5);
}

/* 0, OPTIONS_HELP, or TG_EINVAL (a message was printed). */
static int parse(int argc, char **argv, struct jitter_opts *o)
{
        struct jitter_flags f;
        int r;

        memset(&flags, 0, sizeof(flags));
        r = options_parse(&jitter_spec, argc, argv, NULL, NULL);
        if (r)
                return r;
        f = flags;
        defaults(o);
        if (f.calls) {
                /* Records, not a simulation: only what the measure reads. */
                if (f.clients_set || f.rounds_set || f.base_set || f.factor_set || f.min_set ||
                    f.cap_set || f.give_up_set || f.jitter_set || f.bucket_set || f.unit_set ||
                    f.example_set || f.fixed_set || f.fixed_rounds_set || f.svg) {
                        fprintf(stderr, "tollgate jitter: --calls measures records: it takes only "
                                        "--capacity, --seed and --runs\n");
                        return TG_EINVAL;
                }
                o->calls = f.calls;
                o->sim.capacity = (unsigned)f.capacity;
                o->sim.seed = f.seed_set ? f.seed : 1;
                o->runs = f.runs_set ? (unsigned)f.runs : 1000;
                return 0;
        }
        if (f.example_set)
                apply_example(o, examples[f.example]);
        if (f.clients_set)
                o->sim.clients = (unsigned)f.clients;
        if (f.rounds_set)
                o->sim.rounds = (unsigned)f.rounds;
        if (f.capacity_set)
                o->sim.capacity = (unsigned)f.capacity;
        if (f.runs_set)
                o->runs = (unsigned)f.runs;
        if (f.seed_set)
                o->sim.seed = f.seed;
        if (f.factor_set)
                o->sim.factor = f.factor;
        if (f.jitter_set)
                backoff_jitter_parse(jitter_modes[f.jitter], &o->sim.jitter);
        if (f.unit_set) {
                o->unit_ms = unit_ms[f.unit];
                o->unit = units[f.unit];
        }
        o->svg = f.svg;
        /* Without an example, the default base and bucket are one unit. */
        if (!o->example) {
                o->sim.base_ms = (int64_t)o->unit_ms;
                o->sim.bucket_ms = (int64_t)o->unit_ms;
        }
        if (f.base_set)
                o->sim.base_ms = to_ms(f.base, o->unit_ms);
        if (f.min_set)
                o->sim.min_ms = to_ms(f.min, o->unit_ms);
        if (f.cap_set)
                o->sim.cap_ms = to_ms(f.cap, o->unit_ms);
        if (f.give_up_set)
                o->sim.give_up_ms = to_ms(f.give_up, o->unit_ms);
        if (f.bucket_set)
                o->sim.bucket_ms = to_ms(f.bucket, o->unit_ms);
        if (f.fixed_set)
                o->fixed_ms = to_ms(f.fixed, o->unit_ms);
        if (f.fixed_rounds_set)
                o->fixed_rounds = (unsigned)f.fixed_rounds;
        if (o->fixed_ms > 0 && o->fixed_rounds == 0)
                o->fixed_rounds = o->sim.rounds;
        if (f.fixed_rounds_set && o->fixed_ms <= 0) {
                fprintf(stderr, "tollgate jitter: --fixed-rounds needs --fixed T\n");
                return TG_EINVAL;
        }
        if (jitter_sim_config_check(&o->sim) < 0) {
                fprintf(stderr, "tollgate jitter: inconsistent options: need base > 0, bucket > 0,"
                                " cap 0 (none) or >= base\n");
                return TG_EINVAL;
        }
        return 0;
}

/* A time in the display unit: whole numbers plainly, else one or two
 * decimals. */
static const char *fmt_t(const struct jitter_opts *o, int64_t ms, char *buf, size_t size)
{
        double v = (double)ms / o->unit_ms;
        if (v == (double)(int64_t)v)
                snprintf(buf, size, "%" PRId64, (int64_t)v);
        else
                snprintf(buf, size, v < 10 ? "%.2f" : "%.1f", v);
        return buf;
}

static void print_header(const struct jitter_opts *o)
{
        const struct jitter_sim_config *c = &o->sim;
        char b1[32], b2[32], b3[32], b4[32];

        printf("tollgate jitter: %u clients fail together, then retry over %u rounds\n", c->clients,
               c->rounds);
        printf("  windows: [%s, %s x %g^(k-1)] %s, cap %s, give-up %s; jitter %s; seed %" PRIu64
               "\n",
               fmt_t(o, c->min_ms, b1, sizeof(b1)), fmt_t(o, c->base_ms, b2, sizeof(b2)), c->factor,
               o->unit, c->cap_ms ? fmt_t(o, c->cap_ms, b3, sizeof(b3)) : "none",
               c->give_up_ms ? fmt_t(o, c->give_up_ms, b4, sizeof(b4)) : "none",
               backoff_jitter_name(c->jitter), c->seed);
        if (c->capacity)
                printf("  bucket: %s %s; capacity: %u per bucket\n",
                       fmt_t(o, c->bucket_ms, b1, sizeof(b1)), o->unit, c->capacity);
        else
                printf("  bucket: %s %s; capacity: not stated (--capacity)\n",
                       fmt_t(o, c->bucket_ms, b1, sizeof(b1)), o->unit);
}

static void print_rounds(const struct jitter_opts *o, const struct jitter_sim *sim,
                         const struct jitter_sim *flat)
{
        const struct jitter_sim_config *c = &o->sim;
        char b1[32], b2[32], b3[32], b4[32], win[128], none[128];

        printf("\nPer round (the seed's table: each round's retries from the moment its window"
               " opens)\n");
        printf("round  window          no jitter                   %-29s %-11s mean gap\n",
               c->jitter == BACKOFF_JITTER_NONE ? "" : "waits drawn (jitter)",
               c->jitter == BACKOFF_JITTER_NONE ? "" : "peak/bucket");
        for (unsigned k = 1; k <= c->rounds; k++) {
                struct jitter_sim_round r, f;
                jitter_sim_round(sim, k, &r);
                jitter_sim_round(flat, k, &f);
                snprintf(win, sizeof(win), "%s-%s %s", fmt_t(o, r.lo_ms, b1, sizeof(b1)),
                         fmt_t(o, r.hi_ms, b2, sizeof(b2)), o->unit);
                if (f.sent)
                        snprintf(none, sizeof(none), "all %u at %s %s", f.sent,
                                 fmt_t(o, f.max_wait_ms, b3, sizeof(b3)), o->unit);
                else
                        snprintf(none, sizeof(none), "none left");
                if (c->jitter == BACKOFF_JITTER_NONE) {
                        printf("%5u  %-15s %-27s %s\n", k, win, none,
                               c->capacity && f.sent > c->capacity ? "over capacity" : "");
                        continue;
                }
                char drawn[128];
                if (r.sent)
                        snprintf(drawn, sizeof(drawn), "%u in %s-%s", r.sent,
                                 fmt_t(o, r.min_wait_ms, b1, sizeof(b1)),
                                 fmt_t(o, r.max_wait_ms, b2, sizeof(b2)));
                else
                        snprintf(drawn, sizeof(drawn), "none left");
                char peak[96], gap[96] = "-";
                snprintf(peak, sizeof(peak), "%u at %s", r.peak,
                         fmt_t(o, r.peak_at_ms, b4, sizeof(b4)));
                if (r.sent > 1)
                        snprintf(gap, sizeof(gap), "%s %s",
                                 fmt_t(o, (r.max_wait_ms - r.min_wait_ms) / (r.sent - 1), b3,
                                       sizeof(b3)),
                                 o->unit);
                printf("%5u  %-15s %-27s %-29s %-11s %s%s\n", k, win, none, drawn, peak, gap,
                       c->capacity && r.peak > c->capacity ? "  over capacity" : "");
        }
}

static void print_timeline(const struct jitter_opts *o, const struct jitter_sim *sim,
                           const struct jitter_sim *flat)
{
        const struct jitter_sim_config *c = &o->sim;
        struct jitter_sim_summary s, fs;
        char b1[32], b2[32], b3[32];

        jitter_sim_summary(sim, &s);
        jitter_sim_summary(flat, &fs);
        printf("\nTimeline (each client's rounds one after another, from the first failure)\n");
        printf("  retries sent: %" PRIu64 "; gave up early: %u\n", s.retries, s.gave_up);
        printf("  without jitter: peak %u per bucket (all at once, at %s", fs.peak,
               fmt_t(o, fs.peak_at_ms, b1, sizeof(b1)));
        printf(" %s and every later round)\n", o->unit);
        if (c->jitter != BACKOFF_JITTER_NONE)
                printf("  with %s jitter: peak %u per bucket at %s %s\n",
                       backoff_jitter_name(c->jitter), s.peak,
                       fmt_t(o, s.peak_at_ms, b1, sizeof(b1)), o->unit);
        if (c->capacity)
                printf("  capacity %u per bucket: %zu of %zu buckets over it%s\n", c->capacity,
                       s.over_capacity, s.buckets, s.over_capacity ? "" : " (every bucket fits)");
        printf("  tail: last retry at %s %s; mean last retry at %s %s; longest single wait %s"
               " %s\n",
               fmt_t(o, s.tail_ms, b1, sizeof(b1)), o->unit,
               fmt_t(o, s.mean_last_ms, b2, sizeof(b2)), o->unit,
               fmt_t(o, s.longest_wait_ms, b3, sizeof(b3)), o->unit);

        /* A text histogram: rows of consecutive buckets, each showing its
         * busiest bucket. */
        size_t per_row = (s.buckets + HIST_ROWS - 1) / HIST_ROWS;
        unsigned top = s.peak > c->capacity ? s.peak : c->capacity;
        if (top == 0)
                return;
        printf("\n  arrivals per bucket (%s jitter; '|' marks capacity%s)\n",
               backoff_jitter_name(c->jitter),
               per_row > 1 ? "; a row shows its busiest bucket" : "");
        for (size_t start = 0; start < s.buckets; start += per_row) {
                unsigned n = 0;
                for (size_t j = start; j < start + per_row && j < s.buckets; j++) {
                        unsigned v = jitter_sim_bucket(sim, j);
                        n = v > n ? v : n;
                }
                int bar = (int)((double)n * BAR_WIDTH / top + 0.5);
                int capcol = c->capacity ? (int)((double)c->capacity * BAR_WIDTH / top + 0.5) : -1;
                char line[BAR_WIDTH + 2];
                for (int x = 0; x <= BAR_WIDTH; x++)
                        line[x] = x < bar ? '#' : (x == capcol ? '|' : ' ');
                line[BAR_WIDTH + 1] = '\0';
                printf("  %7s %-4s %s %u\n",
                       fmt_t(o, (int64_t)start * c->bucket_ms, b1, sizeof(b1)), o->unit, line, n);
        }
}

static void print_warnings(const struct jitter_opts *o, const struct jitter_sim *sim)
{
        const struct jitter_sim_config *c = &o->sim;
        struct jitter_sim_summary s;
        struct jitter_sim_round last;
        char b1[32];

        jitter_sim_summary(sim, &s);
        jitter_sim_round(sim, c->rounds, &last);
        printf("\nWarnings\n");
        if (!c->cap_ms) {
                char b2[32], b3[32];
                struct backoff_config b = {.base_ms = c->base_ms,
                                           .factor = c->factor,
                                           .min_ms = 0,
                                           .cap_ms = INT64_MAX / 128,
                                           .jitter = BACKOFF_JITTER_NONE};
                int64_t lo, h10 = 0, h15 = 0;
                backoff_window(&b, 10, &lo, &h10);
                backoff_window(&b, 15, &lo, &h15);
                printf("  no cap: round %u waits up to %s %s (round 10 would wait %s %s, round 15 "
                       "%s %s)\n",
                       c->rounds, fmt_t(o, last.hi_ms, b1, sizeof(b1)), o->unit,
                       fmt_t(o, h10, b2, sizeof(b2)), o->unit, fmt_t(o, h15, b3, sizeof(b3)),
                       o->unit);
        }
        if (!c->give_up_ms)
                printf("  no give-up time: clients stop only after round %u; the exponent, not"
                       " you, decides when\n",
                       c->rounds);
        printf("  tail wait %s %s: the slowest client's last retry comes that long after the"
               " first failure\n",
               fmt_t(o, s.tail_ms, b1, sizeof(b1)), o->unit);
        if (c->capacity && s.round_peak_max > c->capacity)
                printf("  over capacity: some round puts %u in one bucket (capacity %u)\n",
                       s.round_peak_max, c->capacity);
        if (c->jitter == BACKOFF_JITTER_NONE && c->clients > 1)
                printf("  no jitter: all %u clients come back in the same instant every round\n",
                       c->clients);
}

static int cmp_unsigned(const void *a, const void *b)
{
        unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
        return (x > y) - (x < y);
}

/* Peaks are random: repeat over o->runs seeds and print their spread, so a
 * reader sees whether this seed's peak is typical. */
static int print_runs(const struct jitter_opts *o)
{
        const struct jitter_sim_config *c = &o->sim;
        unsigned n = o->runs, rounds = c->rounds;
        unsigned *peaks = calloc((size_t)n * (rounds + 1), sizeof(*peaks));

        if (!peaks)
                return TG_ENOMEM;
        for (unsigned i = 0; i < n; i++) {
                struct jitter_sim_config one = *c;
                struct jitter_sim *sim = NULL;
                struct jitter_sim_summary s;
                one.seed = c->seed + i;
                int rc = jitter_sim_run(&one, &sim);
                if (rc < 0) {
                        free(peaks);
                        return rc == TG_EINVAL ? TG_ENOMEM : rc;
                }
                for (unsigned k = 1; k <= rounds; k++) {
                        struct jitter_sim_round r;
                        jitter_sim_round(sim, k, &r);
                        peaks[(size_t)(k - 1) * n + i] = r.peak;
                }
                jitter_sim_summary(sim, &s);
                peaks[(size_t)rounds * n + i] = s.peak;
                jitter_sim_free(sim);
        }
        printf("\nOver %u seeds (%" PRIu64 "..%" PRIu64 "): peak per bucket, median / 90th "
               "percentile / max\n",
               n, c->seed, c->seed + n - 1);
        for (unsigned k = 1; k <= rounds + 1; k++) {
                unsigned *v = peaks + (size_t)(k - 1) * n;
                qsort(v, n, sizeof(*v), cmp_unsigned);
                unsigned at2 = 0;
                for (unsigned i = 0; i < n; i++)
                        at2 += v[i] <= 2;
                if (k <= rounds)
                        printf("  round %-3u  ", k);
                else
                        printf("  timeline   ");
                printf("%u / %u / %u   (at most 2 in %.0f%% of seeds", v[n / 2],
                       v[(size_t)((n - 1) * 0.9)], v[n - 1], 100.0 * at2 / n);
                if (c->capacity) {
                        unsigned fit = 0;
                        for (unsigned i = 0; i < n; i++)
                                fit += v[i] <= c->capacity;
                        printf("; within capacity %u in %.0f%%", c->capacity, 100.0 * fit / n);
                }
                printf(")\n");
        }
        free(peaks);
        return 0;
}

static int write_svg(const struct jitter_opts *o, const struct jitter_sim *sim,
                     const struct jitter_sim *flat)
{
        const struct jitter_sim_config *c = &o->sim;
        struct jitter_sim_summary s, fs;
        const double w = 800, h = 300, left = 50, bottom = 40, top = 30;
        char b1[32];

        jitter_sim_summary(sim, &s);
        jitter_sim_summary(flat, &fs);
        size_t n = s.buckets > fs.buckets ? s.buckets : fs.buckets;
        unsigned ymax = s.peak;
        if (fs.peak > ymax)
                ymax = fs.peak;
        if (c->capacity > ymax)
                ymax = c->capacity;
        if (ymax == 0)
                ymax = 1;
        FILE *f = fopen(o->svg, "w");
        if (!f) {
                perror(o->svg);
                return TG_EIO;
        }
        double bw = (w - left - 10) / (double)n;
        double ph = h - bottom - top;
        fprintf(f,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n"
                "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                "<text x=\"%.0f\" y=\"18\">%u clients, %u rounds: arrivals per %s %s "
                "(grey: no jitter, blue: %s jitter)</text>\n",
                w, h, left, c->clients, c->rounds, fmt_t(o, c->bucket_ms, b1, sizeof(b1)), o->unit,
                backoff_jitter_name(c->jitter));
        for (size_t j = 0; j < n; j++) {
                unsigned a = jitter_sim_bucket(flat, j), b = jitter_sim_bucket(sim, j);
                double x = left + (double)j * bw;
                if (a)
                        fprintf(f,
                                "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                                "fill=\"none\" stroke=\"#999\"/>\n",
                                x, top + ph - ph * a / ymax, bw, ph * a / ymax);
                if (b && c->jitter != BACKOFF_JITTER_NONE)
                        fprintf(f,
                                "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" "
                                "fill=\"#3672b0\"/>\n",
                                x, top + ph - ph * b / ymax, bw, ph * b / ymax);
        }
        if (c->capacity) {
                double y = top + ph - ph * c->capacity / ymax;
                fprintf(f,
                        "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.2f\" y2=\"%.2f\" stroke=\"#c00\" "
                        "stroke-dasharray=\"6 4\"/>\n<text x=\"%.0f\" y=\"%.2f\" "
                        "fill=\"#c00\">capacity %u</text>\n",
                        left, w - 10, y, y, w - 110, y - 4, c->capacity);
        }
        fprintf(f,
                "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
                "<text x=\"%.0f\" y=\"%.0f\">0</text><text x=\"%.0f\" y=\"%.0f\" "
                "text-anchor=\"end\">%s %s</text>\n"
                "<text x=\"5\" y=\"%.0f\">%u</text><text x=\"5\" y=\"%.0f\">0</text>\n</svg>\n",
                left, w - 10, top + ph, top + ph, left, top + ph + 16, w - 10, top + ph + 16,
                fmt_t(o, (int64_t)n * c->bucket_ms, b1, sizeof(b1)), o->unit, top + 10, ymax,
                top + ph);
        if (fclose(f) != 0) {
                perror(o->svg);
                return TG_EIO;
        }
        printf("\nSVG histogram written to %s\n", o->svg);
        return 0;
}

/* The old fixed schedule, simulated like the others: the same clients,
 * every retry fixed_ms after the one before, no jitter. The first call (the
 * failure at 0) is every client at once too. */
static int print_fixed(const struct jitter_opts *o)
{
        struct jitter_sim_config c = o->sim;
        struct jitter_sim *sim = NULL;
        struct jitter_sim_summary s;
        char b1[32], times[256];
        size_t used = 0, busy = 1;
        int r;

        c.rounds = o->fixed_rounds;
        c.base_ms = o->fixed_ms;
        c.factor = 1.0;
        c.min_ms = 0;
        c.cap_ms = 0;
        c.give_up_ms = 0;
        c.jitter = BACKOFF_JITTER_NONE;
        r = jitter_sim_config_check(&c);
        if (r == 0)
                r = jitter_sim_run(&c, &sim);
        if (r < 0)
                return r;
        jitter_sim_summary(sim, &s);
        used = (size_t)snprintf(times, sizeof(times), "0");
        for (size_t j = 0; j < s.buckets && used < sizeof(times) - 40; j++) {
                if (jitter_sim_bucket(sim, j) == 0)
                        continue;
                busy++;
                used += (size_t)snprintf(times + used, sizeof(times) - used, ", %s",
                                         fmt_t(o, (int64_t)j * c.bucket_ms, b1, sizeof(b1)));
        }
        unsigned over = c.capacity && c.clients > c.capacity; /* the first call */
        over += c.capacity ? (unsigned)s.over_capacity : 0;
        printf("  old schedule (fixed %s-%s interval, no jitter, simulated): calls at %s %s; "
               "peak %u per bucket",
               fmt_t(o, o->fixed_ms, b1, sizeof(b1)), o->unit, times, o->unit,
               s.peak > c.clients ? s.peak : c.clients);
        if (s.peak == c.clients)
                printf(" (all %u at once each time)", c.clients);
        if (c.capacity)
                printf(", %u of %zu busy buckets over capacity %u", over, busy, c.capacity);
        printf("\n");
        jitter_sim_free(sim);
        return 0;
}

/* A wall time as UTC RFC 3339, to the second. */
static const char *fmt_wall(tg_wall_ms ms, char *buf, size_t size)
{
        time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
        struct tm tm;

        if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(buf, size, "%lld ms", (long long)ms);
        return buf;
}

static void print_peak(const char *what, const struct jitter_records_peak *p, unsigned capacity)
{
        char b1[40], b2[40];

        printf("\n%s: %zu\n", what, p->count);
        if (p->count == 0)
                return;
        printf("  busiest second   %u at %s\n", p->second_peak,
               fmt_wall(p->second_at, b1, sizeof(b1)));
        printf("  busiest minute   %u at %s\n", p->minute_peak,
               fmt_wall(p->minute_at, b2, sizeof(b2)));
        if (capacity)
                printf("  capacity %u/s     %zu of %zu busy seconds over it; peak %.2gx "
                       "capacity\n",
                       capacity, p->seconds_over, p->seconds_busy,
                       (double)p->second_peak / (double)capacity);
        printf("  spread           %s: the busiest second holds %u; the same %zu thrown at random "
               "over the span put at most %u in one second (95th percentile of %u draws)\n",
               p->count < 2   ? "too few to tell"
               : p->clustered ? "CLUSTERED, they came back together (jitter did not spread "
                                "them)"
                              : "spread, no more bunched than random (as jitter spreads them)",
               p->second_peak, p->count, p->random_p95_peak, p->random_trials);
}

static int measure_calls(const struct jitter_opts *o)
{
        FILE *f = fopen(o->calls, "r");
        struct jitter_records *rec = NULL;
        struct jitter_records_summary s;
        const char *why = "";
        size_t line = 0;
        char b1[40], b2[40];
        int r;

        if (!f) {
                fprintf(stderr, "tollgate jitter: --calls %s: cannot open it\n", o->calls);
                return TG_EINVAL;
        }
        r = jitter_records_read(f, &rec, &line, &why);
        fclose(f);
        if (r == TG_EPARSE) {
                fprintf(stderr, "tollgate jitter: %s line %zu: %s\n", o->calls, line, why);
                return TG_EINVAL;
        }
        if (r < 0) {
                fprintf(stderr, "tollgate jitter: %s: %s\n", o->calls,
                        r == TG_ENOTFOUND ? "no records"
                        : r == TG_ERANGE  ? "the records span more than 400 days"
                        : r == TG_EFULL   ? "more records than the tool reads (5,000,000)"
                                          : tg_strerror(r));
                return r == TG_ENOMEM ? r : TG_EINVAL;
        }
        r = jitter_records_measure(rec, o->sim.capacity, o->runs, o->sim.seed, &s);
        jitter_records_free(rec);
        if (r < 0) {
                fprintf(stderr, "tollgate jitter: %s\n", tg_strerror(r));
                return r;
        }
        printf("tollgate jitter --calls %s: %zu records (%s), %s .. %s (%lld s)\n", o->calls,
               s.all.count,
               s.format == JITTER_RECORDS_CALL_LOG ? "a call log"
               : s.has_kind                        ? "CSV with a kind column"
                                                   : "CSV of failures",
               fmt_wall(s.first_ms, b1, sizeof(b1)), fmt_wall(s.last_ms, b2, sizeof(b2)),
               (long long)((s.last_ms - s.first_ms) / 1000));
        if (o->sim.capacity)
                printf("  capacity: %u per second (--capacity)\n", o->sim.capacity);
        else
                printf("  capacity: not stated (--capacity N: what the far side takes a "
                       "second)\n");
        print_peak("All records", &s.all, o->sim.capacity);
        if (s.has_kind)
                print_peak("Repeats (retries, queries, re-sends: every kind but first)", &s.repeats,
                           o->sim.capacity);
        return 0;
}

int cmd_jitter(int argc, char **argv)
{
        struct jitter_opts o;
        struct jitter_sim *sim = NULL, *flat = NULL;
        int rc = parse(argc, argv, &o);
        if (rc)
                return options_exit_status(rc);
        if (o.calls)
                return options_exit_status(measure_calls(&o));

        struct jitter_sim_config none = o.sim;
        none.jitter = BACKOFF_JITTER_NONE;
        int r = jitter_sim_run(&o.sim, &sim);
        if (r == 0)
                r = jitter_sim_run(&none, &flat);
        if (r < 0) {
                fprintf(stderr, "tollgate jitter: %s%s\n", tg_strerror(r),
                        r == TG_ERANGE ? ": too many buckets; use a wider --bucket" : "");
                jitter_sim_free(sim);
                return r == TG_ERANGE ? 2 : 1;
        }
        print_header(&o);
        if (o.fixed_ms > 0)
                rc = print_fixed(&o);
        print_rounds(&o, sim, flat);
        print_timeline(&o, sim, flat);
        if (o.runs > 1 && o.sim.jitter != BACKOFF_JITTER_NONE)
                rc = print_runs(&o);
        print_warnings(&o, sim);
        if (o.svg && rc == 0)
                rc = write_svg(&o, sim, flat);
        jitter_sim_free(sim);
        jitter_sim_free(flat);
        return options_exit_status(rc);
}
