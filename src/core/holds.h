/*
 * holds — the provider-wide signals of DESIGN.md, pure: what a call that
 * just ended says about the whole account. A 429 or 503 (with its
 * Retry-After, else a default) holds every start of the exit; a run of
 * timeouts after send holds it for a while too; so does a run of calls that
 * could not reach the provider at all (refused, DNS, connect timeout, a TLS
 * handshake that failed: "not sent"), and while the provider stays
 * unreachable each failed probe holds again for twice as long, up to a cap:
 * a misconfigured certificate or a provider that is down costs a few quota
 * slots, then one probe per hold, never a loop at the full rate. The same
 * for a provider that keeps answering 429/503 without Retry-After: each
 * probe it refuses again holds for twice as long, up to a cap. The first
 * start after a hold is a probe, and its result (healthy, or not) is
 * reported to the pacer. The pacer (core/pacer.h) keeps the hold and the
 * probe; this module decides when there is one.
 */
#ifndef TG_HOLDS_H
#define TG_HOLDS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/classify.h"

struct holds_config {
        int64_t default_hold_ms; /* a 429/503 without Retry-After (1000) */
        /* a probe refused again without Retry-After doubles the last such
         * hold, up to this (the Retry-After cap); never below the default */
        int64_t limited_hold_max_ms;
        unsigned timeout_run_hold; /* this many timeouts in a row hold the exit; 0: never (5) */
        int64_t timeout_hold_ms;   /* for how long (1000) */
        /* calls in a row that reached nothing hold the exit; 0: never (3) */
        unsigned unreachable_run_hold;
        int64_t unreachable_hold_ms;     /* the first such hold (5000) */
        int64_t unreachable_hold_max_ms; /* a failed probe doubles it, up to this (60000) */
        /* exit.adaptive: a 429/503 without Retry-After holds nothing; it is
         * HOLDS_PUSHBACK, and the exit lowers its rate instead */
        bool pushback_only;
};

/* What the holds remember between calls. Plain data; start zeroed. */
struct holds_state {
        unsigned timeouts_in_row;
        unsigned unreachable_in_row;
        int64_t unreachable_hold_ms; /* the last unreachable hold; 0: none in force */
        int64_t limited_hold_ms;     /* the last 429/503 hold; 0: the provider answered since */
};

/* The call that just ended. */
struct holds_call {
        enum tg_transport_result transport;
        int http_status;
        int64_t retry_after_ms; /* < 0: none */
        bool probe;             /* the probe that follows a hold */
        /* the answer says a request with this key is still being processed
         * (provider.in_progress_codes): about that key, not the account,
         * so a 429 of that kind holds nothing */
        bool key_in_progress;
};

enum holds_why {
        HOLDS_NONE,
        HOLDS_LIMITED,     /* the provider said 429/503 */
        HOLDS_TIMEOUTS,    /* a run of timeouts after send */
        HOLDS_UNREACHABLE, /* a run of calls that sent nothing, or a failed probe after one */
        HOLDS_PUSHBACK,    /* pushback_only: a 429/503 without Retry-After, no hold (0 ms) */
};

struct holds_decision {
        enum holds_why why;          /* HOLDS_NONE: no new hold */
        int64_t hold_ms;             /* how long every start waits, from now */
        unsigned timeouts_in_row;    /* the run that made a HOLDS_TIMEOUTS hold */
        unsigned unreachable_in_row; /* the run that made a HOLDS_UNREACHABLE hold */
        bool probe_done;             /* the call was the probe: report probe_healthy */
        bool probe_healthy;
};

/* The answer is the provider limiting the whole account: a complete 429 or
 * 503 (nothing executed; the policy does not count the call against the
 * operation's budget, core/policy.h). */
bool holds_limited(enum tg_transport_result transport, int http_status);

/* Decides what the call says about the account and updates *state. */
void holds_after_call(const struct holds_config *config, struct holds_state *state,
                      const struct holds_call *call, struct holds_decision *ret_decision);

#endif
