/*
 * capacity — seed 000's queue arithmetic: how long a backlog takes to drain
 * when new work keeps arriving and every close costs calls from one shared
 * provider quota. Pure arithmetic, no I/O; every figure is the seed's
 * simplification (steady rates, no scheduling, no latency distribution):
 *
 *   effective calls/s = min(calls/s allowed, max_in_flight / call time)
 *   closes/s          = effective calls/s / calls per close
 *   net drain         = closes/s - arrivals/s      (<= 0: never drains)
 *   time to drain     = backlog / net drain
 *   for a target T    : closes/s needed = backlog / T + arrivals/s,
 *                       calls/s needed  = that * calls per close
 *
 * Seed figures: 240 queued, 2/s arriving, 5 closes/s -> 80 s; at 2 calls
 * per close with 5 calls/s -> 480 s; the exercise 600 queued, 3/s, 10
 * calls/s, 2 calls per close -> 300 s, and a 120 s target needs 16 calls/s.
 */
#ifndef TG_CAPACITY_H
#define TG_CAPACITY_H

struct capacity_input {
        double backlog;         /* operations queued now, >= 0 */
        double arrivals_per_s;  /* new operations per second, >= 0 */
        double calls_per_s;     /* provider calls per second allowed, > 0 */
        double calls_per_close; /* calls one close costs on average (attempts, retries,
                                 * queries all counted), >= 1 */
        double target_s;        /* wanted drain time, 0 = none */
        double max_in_flight;   /* local in-flight bound, 0 = not modelled */
        double call_s;          /* mean call time for that bound, 0 = not modelled */
};

/* The assumptions a plan rests on, in the order of the sensitivity table. */
enum capacity_factor {
        CAPACITY_BACKLOG,
        CAPACITY_ARRIVALS,
        CAPACITY_CALLS_PER_CLOSE,
        CAPACITY_CALLS_PER_S,
        CAPACITY_CALL_TIME, /* only when the in-flight bound is modelled */
        CAPACITY_FACTORS
};

struct capacity_plan {
        double effective_calls_per_s;
        int in_flight_binds;          /* 1: max_in_flight / call_s is below the quota */
        double in_flight_calls_per_s; /* max_in_flight / call_s (0 if not modelled) */
        double closes_per_s;
        double net_per_s;           /* closes - arrivals; may be <= 0 */
        int drains;                 /* 1 if net > 0 (or nothing is queued) */
        double drain_s;             /* backlog / net; 0 when backlog is 0; -1 if never */
        double calls_to_hold_per_s; /* calls/s that only keep up with arrivals */
        double closes_needed_per_s; /* for target_s (0 if no target) */
        double calls_needed_per_s;
        int target_met; /* 1 if drain_s <= target_s */
        /* Drain time with each assumption 10% worse (backlog, arrivals, calls
         * per close, call time x1.1; calls/s /1.1); -1 = never drains;
         * unmodelled factors 0. Calls per close, calls/s and call time act
         * only through closes/s, so they tie; calls per close is named
         * first among equals because it is the assumption, while the quota
         * is a contract (seed 000: "check the average of two calls first"). */
        double worse_drain_s[CAPACITY_FACTORS];
        enum capacity_factor dominant; /* the factor whose 10% moves the drain time most */
};

const char *capacity_factor_name(enum capacity_factor factor);

/* Computes the plan. 0, or TG_EINVAL for inputs outside the ranges above
 * (non-finite, negative, calls_per_s <= 0, calls_per_close < 1, only one of
 * max_in_flight / call_s given); *ret_plan is then untouched. */
int capacity_plan(const struct capacity_input *input, struct capacity_plan *ret_plan);

#endif
