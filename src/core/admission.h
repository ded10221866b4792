/*
 * admission — should a NEW refund be accepted now? Pure: the caller measures
 * and passes the figures in. The estimate is the one the seed asks for: the
 * backlog ahead of the new refund, times the calls an operation has needed
 * per close lately, divided by the rate the exit has really been starting
 * calls at (never more than its configured ceiling). When that projected wait
 * plus what is left of a provider-wide hold the exit already knows about
 * (a 429/503's Retry-After: nothing starts before it ends, whatever the
 * measured rate says), is past max_wait_ms, or the backlog is at max_backlog, the refund is
 * refused with a Retry-After; nothing else changes. Already accepted
 * operations are never part of this decision: they are never refused.
 * Operations the provider reports pending (accepted, not final) are not in
 * the backlog weighed, nor make a second busy (admission_second_busy):
 * a week-long pending refund must not refuse new ones.
 *
 * Invariants: the projected wait never uses a rate above the configured
 * starts_per_second (the exit cannot go faster), calls per close is at least
 * 1, and a measurement from too few busy seconds falls back to the ceiling
 * (a freshly started system is not refused for lack of history).
 */
#ifndef TG_ADMISSION_H
#define TG_ADMISSION_H

#include <stdbool.h>
#include <stdint.h>

struct admission_config {
        bool enabled;        /* default true */
        int64_t max_wait_ms; /* projected wait limit (300 s) */
        int64_t max_backlog; /* open operations limit (100000), >= 1 */
        int64_t window_ms;   /* measurement window (60 s) */
};

void admission_config_default(struct admission_config *ret_config);

/* What was measured over the window (per-second samples of the exit). */
struct admission_figures {
        uint64_t backlog; /* open operations now: pending, in_flight, retry_wait, unknown */
        /* of those, the ones the provider reports as accepted, not final
         * (pending_since): they wait for the provider, days at worst, not
         * for the exit (a poll now and then), so they are not weighed */
        uint64_t provider_pending;
        double starts_per_second; /* the rate in force: the ceiling, or exit.adaptive's (> 0) */
        uint64_t starts;          /* calls started in the window */
        uint64_t closes;          /* operations that reached a final answer or manual in it */
        unsigned busy_seconds;    /* seconds in the window with work open */
        /* a provider-wide hold in force: how much of it is left (0: none) */
        int64_t hold_remaining_ms;
};

/* Busy seconds needed before the measured start rate is trusted. */
#define ADMISSION_MIN_BUSY_S 5

struct admission_decision {
        bool admit;
        double calls_per_close;
        double rate;           /* starts per second used for the estimate */
        int64_t projected_ms;  /* wait of a new refund, capped at 1e12 */
        int64_t retry_after_s; /* when refused: in [1, 3600] */
        const char *why;       /* "ok", "max_backlog", "max_wait", "disabled" */
};

/* Whether a second of the exit's counts as busy for the measured rate: a
 * call was open, or an operation waited for the exit (open operations
 * beyond the provider-pending ones; open_ops 0 with `any_open`: the counts
 * are unknown, any open operation counts). */
bool admission_second_busy(unsigned in_flight, bool any_open, uint64_t open_ops,
                           uint64_t provider_pending);

/* Fills *ret_decision. Returns 0, or TG_EINVAL (NULL, non-positive ceiling). */
int admission_decide(const struct admission_config *config, const struct admission_figures *fig,
                     struct admission_decision *ret_decision);

#endif
