/*
 * jitter_sim — seed 004 as a simulation: N clients fail together at time 0
 * and retry over R rounds with exponential windows (base, growth factor,
 * per-round cap), a total give-up time and one of backoff's jitter modes.
 * Every draw goes through core/backoff (backoff_draw), so the simulation and
 * the dispatcher share one definition of a window and of jitter.
 *
 * Two views of the same draws are kept:
 *   - per round (the seed's table): round k's N retries measured from the
 *     moment that round's window opens, as if every client's round began
 *     together. Without jitter all N land in one bucket; with it they spread.
 *   - the timeline: each client's rounds chained (retry k comes wait_k after
 *     retry k-1), all rounds overlaid on one time axis from the first failure,
 *     counted in buckets. The tail wait is the latest retry on this axis.
 * Worst case, stated: no retry succeeds before the last round (the cause that
 * failed them together persists), so every client still retrying is counted
 * in every round. A client gives up when its next retry would fall past the
 * give-up time.
 *
 * Bounds: clients <= JITTER_SIM_MAX_CLIENTS, rounds <= JITTER_SIM_MAX_ROUNDS,
 * buckets on either view <= JITTER_SIM_MAX_BUCKETS (a bucket too small for
 * the timeline is TG_ERANGE, never an unbounded array). Pure: no I/O, no
 * clock; the seed fully determines the result.
 */
#ifndef TG_JITTER_SIM_H
#define TG_JITTER_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "core/backoff.h"

#define JITTER_SIM_MAX_CLIENTS 1000000u
#define JITTER_SIM_MAX_ROUNDS  64u
#define JITTER_SIM_MAX_BUCKETS 1000000u

struct jitter_sim_config {
        unsigned clients;   /* N, >= 1 */
        unsigned rounds;    /* R, >= 1 */
        int64_t base_ms;    /* upper edge of round 1's window, > 0 */
        double factor;      /* window growth per round, >= 1 */
        int64_t min_ms;     /* lower edge of every window (seed 004: 0) */
        int64_t cap_ms;     /* per-round cap on the upper edge; 0 = no cap */
        int64_t give_up_ms; /* total give-up time from the first failure; 0 = none */
        enum backoff_jitter jitter;
        int64_t bucket_ms; /* width of a counting bucket, > 0 */
        unsigned capacity; /* arrivals per bucket the far side takes; 0 = not stated */
        uint64_t seed;
};

/* One round of the per-round view. */
struct jitter_sim_round {
        unsigned round; /* 1-based */
        int64_t lo_ms;  /* window as configured (decorrelated may draw past hi) */
        int64_t hi_ms;
        unsigned sent;       /* clients that retried in this round */
        unsigned gave_up;    /* clients that stopped before this round (give-up time) */
        int64_t min_wait_ms; /* smallest and largest wait drawn (0 when sent == 0) */
        int64_t max_wait_ms;
        unsigned peak;      /* most retries in one bucket of this round */
        int64_t peak_at_ms; /* start of that bucket, from the window's opening */
};

/* The whole run. */
struct jitter_sim_summary {
        unsigned clients;
        unsigned rounds;
        uint64_t retries;        /* all retries sent */
        unsigned gave_up;        /* clients that stopped early (give-up time) */
        unsigned peak;           /* most retries in one timeline bucket */
        int64_t peak_at_ms;      /* start of that bucket */
        size_t buckets;          /* timeline buckets */
        size_t over_capacity;    /* timeline buckets above capacity (0 if none stated) */
        unsigned round_peak_max; /* most retries in one bucket of any round */
        int64_t tail_ms;         /* latest retry on the timeline (the last client's wait) */
        int64_t longest_wait_ms; /* longest single wait drawn */
        int64_t mean_last_ms;    /* mean time of each client's last retry */
        int capped;              /* 1 if cap_ms bounded some round's window */
};

struct jitter_sim;

/* Checks a config: 0 or TG_EINVAL. */
int jitter_sim_config_check(const struct jitter_sim_config *config);

/* Runs the simulation. On success *ret_sim is a new result the caller frees
 * with jitter_sim_free(). TG_EINVAL for a bad config, TG_ERANGE when a view
 * would need more than JITTER_SIM_MAX_BUCKETS buckets, TG_ENOMEM. */
int jitter_sim_run(const struct jitter_sim_config *config, struct jitter_sim **ret_sim);

/* Frees a result; NULL is fine. */
void jitter_sim_free(struct jitter_sim *sim);

/* The config the result was made from (owned by sim). */
const struct jitter_sim_config *jitter_sim_config(const struct jitter_sim *sim);

void jitter_sim_summary(const struct jitter_sim *sim, struct jitter_sim_summary *ret_summary);

/* Round k (1-based, <= rounds): 0 or TG_EINVAL. */
int jitter_sim_round(const struct jitter_sim *sim, unsigned round,
                     struct jitter_sim_round *ret_round);

/* Retries in timeline bucket i (i < summary.buckets; 0 past the end). */
unsigned jitter_sim_bucket(const struct jitter_sim *sim, size_t i);

#endif
