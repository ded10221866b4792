/*
 * adaptive — the exit's start rate under the configured ceiling, when the
 * provider pushes back below it (exit.adaptive; docs/design.md "Adaptive
 * throttling"). Pure: the caller passes the time.
 *
 * The controller is CUBIC's window curve (RFC 9438) applied to a rate, as
 * AWS's SDKs do in their adaptive retry mode: on a pushback (a 429 or 503,
 * or a run of timeouts) the rate is cut to beta times what it was, and
 * W_max remembers the rate that was refused; from then on
 *
 *     rate(t) = C (t - K)^3 + W_max,   K = cbrt(W_max (1 - beta) / C)
 *
 * with t the time since the cut: concave back up to W_max (reached after
 * K seconds), flat around it, then convex above it, probing for capacity
 * that came back. C is ADAPTIVE_C_SHARE of W_max, so the curve's shape is
 * the same at every scale: K is always cbrt((1 - beta) / ADAPTIVE_C_SHARE)
 * seconds, whatever the rates. The rate stays within [floor, ceiling]: it
 * never exceeds the configured ceiling, never catches up missed slots (the
 * pacer counts from the last real start), and a one-off pushback costs a
 * cut to beta and K seconds back.
 *
 * A pushback counts only for a call that started after the last cut (TCP's
 * once-per-round-trip rule): the refusals of calls sent at the old rate say
 * nothing about the new one, and would otherwise cut again and again.
 */
#ifndef TG_ADAPTIVE_H
#define TG_ADAPTIVE_H

#include <stdbool.h>

#include "core/tg_time.h"

#define ADAPTIVE_FLOOR_SHARE 20    /* the floor: the ceiling / this */
#define ADAPTIVE_BETA        0.7   /* the cut */
#define ADAPTIVE_C_SHARE     0.001 /* C = this * W_max, per s^3: K = cbrt(300) = 6.7 s */

struct adaptive {
        double ceiling;      /* the configured rate, > 0 */
        double floor;        /* the lowest rate, in (0, ceiling] */
        double w_max;        /* the rate at the last cut */
        bool cut;            /* a cut happened: the curve applies */
        tg_mono_ns last_cut; /* when */
        unsigned long cuts;  /* how many, for the stats */
};

/* At the ceiling, no cut yet. floor is cut to [ceiling / 1000, ceiling]. */
void adaptive_init(struct adaptive *a, double ceiling, double floor);

/* The rate allowed at now, in [floor, ceiling]. */
double adaptive_rate(const struct adaptive *a, tg_mono_ns now);

/* The provider pushed back on a call that started at `started`; seen at
 * now. Returns true when the rate was cut (the call started after the last
 * cut), false when the pushback was already answered. */
bool adaptive_pushback(struct adaptive *a, tg_mono_ns started, tg_mono_ns now);

#endif
