/*
 * admission — the projected-wait estimate of admission.h. Pure arithmetic on
 * figures the caller measured; no clock, no I/O.
 *
 * projected = hold_remaining + (backlog + 1) * calls_per_close / rate
 *   calls_per_close = starts / closes in the window (>= 1; 1 with no closes
 *                     and no starts; starts with no close at all count as
 *                     starts + 1 per close, so a stuck provider raises it);
 *   rate            = starts / busy second when at least ADMISSION_MIN_BUSY_S
 *                     busy seconds were seen, never above the ceiling; else
 *                     the ceiling. A held exit (provider said 503) shows up
 *                     as a low measured rate only slowly (the window is a
 *                     minute), so a hold known to be in force adds what is
 *                     left of it: a refund accepted now waits that long
 *                     before any start.
 */
#include "core/admission.h"

#include <math.h>
#include <stddef.h>

#include "core/tg_error.h"

#define PROJECTED_CAP_MS  1e12
#define RETRY_AFTER_MAX_S 3600
#define RATE_FLOOR        1e-3 /* starts/s: below this the wait is "very long" */

void admission_config_default(struct admission_config *ret_config)
{
        ret_config->enabled = true;
        ret_config->max_wait_ms = 300 * 1000;
        ret_config->max_backlog = 100000;
        ret_config->window_ms = 60 * 1000;
}

static int64_t clamp_retry(double seconds)
{
        if (!(seconds >= 1.0))
                return 1;
        if (seconds > RETRY_AFTER_MAX_S)
                return RETRY_AFTER_MAX_S;
        return (int64_t)ceil(seconds);
}

bool admission_second_busy(unsigned in_flight, bool any_open, uint64_t open_ops,
                           uint64_t provider_pending)
{
        if (in_flight > 0)
                return true;
        if (!any_open)
                return false;
        return open_ops == 0 || open_ops > provider_pending;
}

int admission_decide(const struct admission_config *config, const struct admission_figures *given,
                     struct admission_decision *ret_decision)
{
        struct admission_decision d = {.admit = true, .why = "ok"};
        struct admission_figures weighed;
        const struct admission_figures *fig = &weighed;
        double per_close, rate, projected_ms;

        if (!config || !given || !ret_decision || !(given->starts_per_second > 0))
                return TG_EINVAL;
        /* the provider's pending refunds wait for it, not for the exit */
        weighed = *given;
        weighed.backlog -=
            given->provider_pending < given->backlog ? given->provider_pending : given->backlog;
        if (fig->closes > 0)
                per_close = (double)fig->starts / (double)fig->closes;
        else if (fig->busy_seconds >= ADMISSION_MIN_BUSY_S)
                per_close = (double)fig->starts + 1.0; /* nothing closes: a stuck provider */
        else
                per_close = 1.0; /* too little seen yet */
        if (per_close < 1.0)
                per_close = 1.0;
        rate = fig->starts_per_second;
        if (fig->busy_seconds >= ADMISSION_MIN_BUSY_S) {
                double measured = (double)fig->starts / (double)fig->busy_seconds;
                if (measured < rate)
                        rate = measured;
        }
        if (rate < RATE_FLOOR)
                rate = RATE_FLOOR;
        projected_ms = ((double)fig->backlog + 1.0) * per_close / rate * 1000.0;
        if (fig->hold_remaining_ms > 0)
                projected_ms += (double)fig->hold_remaining_ms;
        if (projected_ms > PROJECTED_CAP_MS)
                projected_ms = PROJECTED_CAP_MS;
        d.calls_per_close = per_close;
        d.rate = rate;
        d.projected_ms = (int64_t)projected_ms;
        if (!config->enabled) {
                d.why = "disabled";
        } else if (fig->backlog >= (uint64_t)config->max_backlog) {
                d.admit = false;
                d.why = "max_backlog";
                d.retry_after_s =
                    clamp_retry(((double)(fig->backlog - (uint64_t)config->max_backlog) + 1.0) *
                                per_close / rate);
        } else if (d.projected_ms > config->max_wait_ms) {
                d.admit = false;
                d.why = "max_wait";
                d.retry_after_s =
                    clamp_retry((projected_ms - (double)config->max_wait_ms) / 1000.0);
        }
        *ret_decision = d;
        return 0;
}
