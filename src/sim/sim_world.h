/*
 * sim_world — one run of tollgate-sim: a seed becomes a configuration, a
 * provider with its phases, a timeline of faults and a history, played in
 * virtual time with the real dispatcher (daemon/dispatcher.c), policy,
 * pacer and SQLite store, and judged after every step by the invariants
 * (sim_check.c). docs/reliability.md, "Deterministic simulation", says what
 * is simulated and what is checked.
 *
 * The same seed, steps and options give the same run, step for step: every
 * draw comes from generators seeded by the seed, virtual time moves only
 * when the world moves it, and nothing reads a real clock.
 */
#ifndef TG_SIM_WORLD_H
#define TG_SIM_WORLD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/tg_time.h"

struct sim_options {
        uint64_t seed;
        uint64_t steps;      /* scheduler steps of the faulty part (then the drain) */
        bool verbose;        /* a line per event on `out` */
        FILE *out;           /* the trace and the failure */
        const char *dir;     /* an existing directory for the run's store (a tmpfs is best) */
        const char *seed_db; /* a migrated, empty store to copy; NULL: migrate anew */
};

/* What a run did and found. Counts are of the whole run. */
struct sim_result {
        bool failed;
        char invariant[32]; /* the first one violated ("" when none) */
        char message[640];
        uint64_t step; /* the step it was found at */
        tg_mono_ns at; /* virtual time */
        /* the ground truth, from the provider's ledger and the store */
        unsigned lost;           /* accepted, then gone, or done without proof */
        unsigned executed_twice; /* keys executed more than once */
        unsigned unexpected;     /* executed, never submitted; or executed and reported not */
        unsigned max_posts_per_key;
        unsigned spacing_violations;
        /* what happened */
        uint64_t steps;
        unsigned ops, accepted, calls, posts, queries, refused;
        unsigned crashes, restarts, store_faults, lock_losses, wall_jumps, resends;
        unsigned succeeded, rejected, manual;
        tg_mono_ns virtual_ns;
};

/* Runs one seed. 0 (*ret says whether an invariant failed), or a negative
 * TG_E* code when the run could not be set up (a store that cannot be
 * made), with a message on opt->out. */
int sim_run(const struct sim_options *opt, struct sim_result *ret);

/* Makes the migrated empty store sim_run copies for each seed (path: a
 * file to create). 0 or a TG_E* code. */
int sim_seed_db(const char *path);

#endif
