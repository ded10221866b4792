/*
 * tollgate-sim — the exit under faults, in virtual time, from seeds
 * (sim_world.h; docs/reliability.md, "Deterministic simulation"). Runs each
 * seed of a range and stops at the first that breaks an invariant, saying
 * which, where, and the command that replays it; prints what the runs did.
 * The output is the seeds' alone (no real time in it): the same command
 * prints the same text.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "daemon/log.h"
#include "platform/options.h"
#include "sim/sim_world.h"

#define DEFAULT_STEPS 3000

static const char about[] =
    "Runs the real dispatcher, policy, pacer and SQLite store in virtual time against a "
    "simulated provider, from one seed each: provider phases (fast, slower than the timeout, "
    "executes then drops the answer, 429/503 with and without Retry-After, 500 after "
    "executing, resets before and after the request was read, connections refused), crashes "
    "of the process at any step (restart from the store: takeover wait, recovery), store "
    "errors (busy, I/O, a lost COMMIT), lost owner locks with a standby taking over, intake "
    "bursts, operator re-sends and steps of the wall clock.\n\n"
    "After every step it checks the invariants: nothing accepted lost, nothing executed "
    "twice at the provider, one key per operation, every attempt recorded before it is "
    "sent, at most max_attempts POSTs per key "
    "(operator re-sends aside), an unknown outcome reconciled by a query, no two starts "
    "closer than 1/rate at the provider, in-flight within the cap, every operation final or "
    "in manual within its deadline and its slack, no call started while another dispatcher "
    "owned the exit. A failure prints the seed, the step and the command that replays it "
    "(--seed N, exactly the same run); the exit status is then 1.";

static const char epilogue[] =
    "Exit status: 0 every seed kept every invariant, 1 a seed broke one (or could not\n"
    "run), 2 bad usage.\n";

/* "A..B" or "A" into [*lo, *hi]. 0 or TG_EINVAL. */
static int parse_range(const char *s, uint64_t *lo, uint64_t *hi)
{
        char *end = NULL;

        errno = 0;
        *lo = strtoull(s, &end, 10);
        if (errno || end == s || s[0] == '-')
                return TG_EINVAL;
        *hi = *lo;
        if (*end == '\0')
                return 0;
        if (strncmp(end, "..", 2) != 0)
                return TG_EINVAL;
        s = end + 2;
        errno = 0;
        *hi = strtoull(s, &end, 10);
        if (errno || end == s || s[0] == '-' || *end != '\0' || *hi < *lo)
                return TG_EINVAL;
        return 0;
}

struct totals {
        uint64_t runs, failed, steps;
        uint64_t ops, accepted, calls, posts, queries, refused;
        uint64_t crashes, restarts, store_faults, lock_losses, wall_jumps, resends;
        uint64_t succeeded, rejected, manual;
        uint64_t lost, executed_twice, unexpected, spacing;
        unsigned max_posts;
        tg_mono_ns virtual_ns;
};

static void add(struct totals *t, const struct sim_result *r)
{
        t->runs++;
        t->failed += r->failed;
        t->steps += r->steps;
        t->ops += r->ops;
        t->accepted += r->accepted;
        t->calls += r->calls;
        t->posts += r->posts;
        t->queries += r->queries;
        t->refused += r->refused;
        t->crashes += r->crashes;
        t->restarts += r->restarts;
        t->store_faults += r->store_faults;
        t->lock_losses += r->lock_losses;
        t->wall_jumps += r->wall_jumps;
        t->resends += r->resends;
        t->succeeded += r->succeeded;
        t->rejected += r->rejected;
        t->manual += r->manual;
        t->lost += r->lost;
        t->executed_twice += r->executed_twice;
        t->unexpected += r->unexpected;
        t->spacing += r->spacing_violations;
        if (r->max_posts_per_key > t->max_posts)
                t->max_posts = r->max_posts_per_key;
        t->virtual_ns += r->virtual_ns;
}

static void summary(const char *seeds, uint64_t steps, const struct totals *t)
{
        printf("tollgate-sim: seeds %s, %" PRIu64 " steps each: %" PRIu64 " runs, %" PRIu64
               " failed\n",
               seeds, steps, t->runs, t->failed);
        printf("  virtual time %" PRIu64 " s in %" PRIu64 " steps\n",
               (uint64_t)(t->virtual_ns / TG_NS_PER_S), t->steps);
        printf("  refunds %" PRIu64 " submitted, %" PRIu64 " accepted: %" PRIu64
               " succeeded, %" PRIu64 " rejected, %" PRIu64 " in manual\n",
               t->ops, t->accepted, t->succeeded, t->rejected, t->manual);
        printf("  calls at the provider %" PRIu64 " (POSTs %" PRIu64 ", queries %" PRIu64
               "), connections refused %" PRIu64 "\n",
               t->calls, t->posts, t->queries, t->refused);
        printf("  faults: crashes %" PRIu64 ", processes started after the first %" PRIu64
               ", store faults %" PRIu64 ", lost owner locks %" PRIu64 ", wall-clock steps %" PRIu64
               ", operator re-sends %" PRIu64 "\n",
               t->crashes, t->restarts, t->store_faults, t->lock_losses, t->wall_jumps, t->resends);
        printf("  | fault | runs | lost | executed twice | unexpected | most POSTs for one key | "
               "spacing violations |\n");
        printf("  | everything above (tollgate-sim --seeds %s --steps %" PRIu64 ") | %" PRIu64
               " | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %u | %" PRIu64 " |\n",
               seeds, steps, t->runs, t->lost, t->executed_twice, t->unexpected, t->max_posts,
               t->spacing);
}

/* A directory for the runs' stores: a tmpfs when there is one. */
static const char *default_dir(void)
{
        struct stat st;

        return stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
}

static const char *const levels[] = {"debug", "info", "warn", "error", NULL};

/* What the options write, with their defaults: file-level, as the table
 * that names them is. */
static struct {
        uint64_t seed, steps;
        const char *seeds, *dir;
        int log_level;
        bool verbose, keep_going, seed_set;
} args = {.seed = 1, .steps = DEFAULT_STEPS, .log_level = -1};

static const struct opt sim_options[] = {
    {.name = "seed",
     .arg = "N",
     .u64 = &args.seed,
     .umax = UINT64_MAX,
     .seen = &args.seed_set,
     .help = "run this one seed (1)"},
    {.name = "seeds",
     .arg = "A..B",
     .string = &args.seeds,
     .help = "run every seed from A to B (instead of --seed)"},
    {.name = "steps",
     .arg = "N",
     .u64 = &args.steps,
     .umin = 1,
     .umax = 100000000,
     .help = "scheduler steps of each run's faulty part, before the drain (3000)"},
    {.name = "verbose",
     .short_name = 'v',
     .flag = &args.verbose,
     .help = "print every event of the run (use it with one seed)"},
    {.name = "keep-going",
     .flag = &args.keep_going,
     .help = "run every seed of the range even after a failure"},
    {.name = "dir",
     .arg = "DIR",
     .string = &args.dir,
     .help = "where the runs' stores live, one file at a time (/dev/shm when it "
             "exists, else /tmp)"},
    {.name = "log",
     .choice = &args.log_level,
     .choices = levels,
     .help = "also the dispatchers' own log lines on stderr, from this level up; "
             "they carry real time, so they differ from run to run (none by default)"},
};

static const struct options_spec sim_spec = {.prog = "tollgate-sim",
                                             .description = about,
                                             .opts = sim_options,
                                             .nopts = sizeof(sim_options) / sizeof(sim_options[0]),
                                             .epilogue = epilogue};

int main(int argc, char **argv)
{
        uint64_t lo, hi;
        char label[64], workdir[512], seed_db[600];
        struct totals t;
        int r = options_parse(&sim_spec, argc, argv, NULL, NULL);

        if (r)
                return options_exit_status(r);
        if (args.seeds && args.seed_set) {
                fprintf(stderr, "tollgate-sim: --seed and --seeds: give one of them\n");
                return 2;
        }
        if (args.seeds) {
                if (parse_range(args.seeds, &lo, &hi) < 0) {
                        fprintf(stderr, "tollgate-sim: --seeds: not a range A..B: '%s'\n",
                                args.seeds);
                        return 2;
                }
        } else {
                lo = hi = args.seed;
        }
        if (lo == hi)
                snprintf(label, sizeof(label), "%" PRIu64, lo);
        else
                snprintf(label, sizeof(label), "%" PRIu64 "..%" PRIu64, lo, hi);
        /* the dispatcher's own log lines carry real time: the trace is ours */
        log_set_level((enum log_level)(LOG_ERROR + 1));
        if (args.log_level >= 0) {
                enum log_level level = LOG_INFO;
                (void)log_level_parse(levels[args.log_level], &level);
                log_set_level(level);
        }
        /* a name of its own: a run killed before its rmdir leaves its
         * directory behind, and a later run must not trip on it (a pid
         * in the name did, once the pid came round again) */
        snprintf(workdir, sizeof(workdir), "%s/tollgate-sim-XXXXXX",
                 args.dir ? args.dir : default_dir());
        if (!mkdtemp(workdir)) {
                fprintf(stderr, "tollgate-sim: cannot make %s: %s\n", workdir, strerror(errno));
                return 1;
        }
        snprintf(seed_db, sizeof(seed_db), "%s/seed.db", workdir);
        r = sim_seed_db(seed_db);
        if (r < 0) {
                fprintf(stderr, "tollgate-sim: cannot make a store in %s: %s\n", workdir,
                        tg_strerror(r));
                rmdir(workdir);
                return 1;
        }
        memset(&t, 0, sizeof(t));
        int status = 0;
        for (uint64_t s = lo;; s++) {
                struct sim_options o = {.seed = s,
                                        .steps = args.steps,
                                        .verbose = args.verbose,
                                        .out = stdout,
                                        .dir = workdir,
                                        .seed_db = seed_db};
                struct sim_result res;

                r = sim_run(&o, &res);
                if (r < 0) {
                        status = 1;
                        break;
                }
                add(&t, &res);
                if (res.failed) {
                        printf("tollgate-sim: seed %" PRIu64 " failed at step %" PRIu64
                               " (virtual %lld.%06lld s): %s: %s\n",
                               s, res.step, (long long)(res.at / TG_NS_PER_S),
                               (long long)((res.at % TG_NS_PER_S) / 1000), res.invariant,
                               res.message);
                        printf("  replay: tollgate-sim --seed %" PRIu64 " --steps %" PRIu64
                               " --verbose\n",
                               s, args.steps);
                        fflush(stdout);
                        status = 1;
                        if (!args.keep_going)
                                break;
                }
                if (s == hi)
                        break;
        }
        summary(label, args.steps, &t);
        remove(seed_db);
        rmdir(workdir);
        return status;
}
