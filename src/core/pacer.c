/*
 * pacer — the exit's two gates (start spacing and in-flight room) and the
 * provider-wide hold/probe cycle, as pure logic over a caller-supplied
 * monotonic `now`.
 *
 * Invariants kept here:
 *   - two recorded starts are at least `interval` ns apart, where interval is
 *     ceil(1e9 / rate) computed once at creation and checked so that
 *     interval * rate >= 1e9 (rounding never shortens the spacing);
 *   - the next slot is the last ACTUAL start plus the interval, so idle time
 *     earns nothing and missed slots are never made up;
 *   - in_flight never exceeds max_in_flight;
 *   - while held, nothing starts before hold_until; the first start after it
 *     is the one probe, and while it is out next_slot is TG_MONO_NEVER;
 *   - every sum that could overflow int64 saturates to TG_MONO_NEVER, which
 *     is treated as "never" rather than as a reachable time.
 *
 * The probe is an ordinary call as well: it counts toward in_flight and the
 * caller reports pacer_finish() for it as for any call, and pacer_probe_done()
 * for its health.
 */
#include "core/pacer.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/tg_error.h"

/* The longest spacing we accept (about 73 years): beyond it a rate is too
 * small to mean anything, and sums with `now` would approach overflow. */
#define PACER_MAX_INTERVAL (INT64_MAX / 4)

enum pacer_mode {
        PACER_NORMAL,    /* configured rate, no hold */
        PACER_HELD,      /* the next start (not before hold_until) is a probe */
        PACER_PROBE_OUT, /* the probe is out: nothing starts */
};

struct pacer {
        tg_mono_ns interval;
        unsigned max_in_flight;
        unsigned in_flight;
        bool started;          /* a start has been recorded */
        tg_mono_ns last_start; /* valid when started */
        enum pacer_mode mode;
        tg_mono_ns hold_until;    /* INT64_MIN unless mode != PACER_NORMAL */
        bool rehold;              /* a hold arrived while the probe was out */
        bool pending;             /* last_start is a plan: its wire time is not known yet */
        tg_mono_ns rate_interval; /* from the rate (and margin), the interval without a grid */
        tg_mono_ns grid_period;   /* > 0: starts only on the grid (shares) */
        tg_mono_ns grid_phase;    /* in [0, grid_period) */
        tg_mono_ns grid_late;     /* how long after its point a start may still go */
};

static tg_mono_ns add_sat(tg_mono_ns a, tg_mono_ns b)
{
        assert(b >= 0);
        if (a > TG_MONO_NEVER - b)
                return TG_MONO_NEVER;
        return a + b;
}

/* ceil(1e9 / rate) as an integer. The division rounds once, which could
 * land on an integer just below the true quotient; fma() gives the exact sign
 * of n * rate - 1e9, so the loop lengthens n until n / 1e9 s really is at
 * least 1/rate. (Above 2^53 doubles no longer hold every integer, and a
 * spacing of over 104 days is exact enough as it is.) 0 if out of range. */
static tg_mono_ns interval_from_rate(double rate)
{
        double q = ceil(1e9 / rate);
        if (!(q >= 1.0))
                q = 1.0;
        if (!(q <= (double)PACER_MAX_INTERVAL))
                return 0;
        tg_mono_ns n = (tg_mono_ns)q;
        while (n < (INT64_C(1) << 53) && fma((double)n, rate, -1e9) < 0.0)
                n++;
        return n;
}

int pacer_new(const struct pacer_config *config, struct pacer **ret_pacer)
{
        if (!config || !ret_pacer)
                return TG_EINVAL;
        double rate = config->starts_per_second;
        if (!isfinite(rate) || !(rate > 0.0) || rate > 1e9)
                return TG_EINVAL;
        if (config->max_in_flight < 1)
                return TG_EINVAL;
        tg_mono_ns interval = interval_from_rate(rate);
        if (interval < 1 || config->spacing_margin_ns < 0 ||
            config->spacing_margin_ns > TG_NS_PER_S || interval > PACER_MAX_INTERVAL - TG_NS_PER_S)
                return TG_EINVAL;
        interval += config->spacing_margin_ns;

        struct pacer *p = calloc(1, sizeof(*p));
        if (!p)
                return TG_ENOMEM;
        p->interval = interval;
        p->rate_interval = interval;
        p->max_in_flight = config->max_in_flight;
        p->in_flight = 0;
        p->started = false;
        p->last_start = INT64_MIN;
        p->mode = PACER_NORMAL;
        p->hold_until = INT64_MIN;
        p->rehold = false;
        *ret_pacer = p;
        return 0;
}

void pacer_free(struct pacer *pacer)
{
        free(pacer);
}

tg_mono_ns pacer_interval(const struct pacer *pacer)
{
        return pacer->interval;
}

tg_mono_ns pacer_align(const struct pacer *pacer, tg_mono_ns t)
{
        tg_mono_ns p = pacer->grid_period, off;

        if (p <= 0 || t == TG_MONO_NEVER || t == INT64_MIN)
                return t;
        /* the first phase + k * p >= t, without overflow for times near 0 */
        off = (t - pacer->grid_phase) % p;
        if (off < 0)
                off += p;
        return off == 0 ? t : add_sat(t, p - off);
}

void pacer_set_grid(struct pacer *pacer, tg_mono_ns period, tg_mono_ns phase, tg_mono_ns late)
{
        if (period <= 0) {
                pacer->grid_period = 0;
                pacer->interval = pacer->rate_interval;
                return;
        }
        pacer->grid_period = period;
        pacer->grid_phase = ((phase % period) + period) % period;
        pacer->grid_late = late < 0 ? 0 : late >= period ? period - 1 : late;
        pacer->interval = period;
}

tg_mono_ns pacer_start_at(const struct pacer *pacer, tg_mono_ns now)
{
        tg_mono_ns slot = pacer_next_slot(pacer), point;

        if (slot == TG_MONO_NEVER || slot >= now)
                return slot;
        if (pacer->grid_period <= 0)
                return now;
        /* slot is a point of this share and now is past it: the point just
         * passed (slot or a later one) if within the late budget */
        point = pacer_align(pacer, now);
        if (point == now)
                return now;
        point -= pacer->grid_period;
        return now - point <= pacer->grid_late ? now : point + pacer->grid_period;
}

tg_mono_ns pacer_window_end(const struct pacer *pacer, tg_mono_ns at)
{
        tg_mono_ns point;

        if (pacer->grid_period <= 0 || at == TG_MONO_NEVER || at == INT64_MIN)
                return 0;
        point = pacer_align(pacer, at);
        if (point != at)
                point -= pacer->grid_period;
        return add_sat(point, pacer->grid_late);
}

tg_mono_ns pacer_next_slot(const struct pacer *pacer)
{
        if (pacer->mode == PACER_PROBE_OUT || pacer->pending)
                return TG_MONO_NEVER;
        tg_mono_ns slot = INT64_MIN;
        if (pacer->started)
                /* with a grid: this share's next point after its last start
                 * (a point is a period after the one before, and the grid
                 * keeps the other shares' points apart from it) */
                slot = pacer->grid_period > 0 ? pacer_align(pacer, add_sat(pacer->last_start, 1))
                                              : add_sat(pacer->last_start, pacer->interval);
        if (pacer->mode == PACER_HELD && pacer->hold_until > slot)
                slot = pacer_align(pacer, pacer->hold_until);
        return slot;
}

unsigned pacer_in_flight(const struct pacer *pacer)
{
        return pacer->in_flight;
}

bool pacer_may_start(const struct pacer *pacer, tg_mono_ns now)
{
        if (pacer->in_flight >= pacer->max_in_flight)
                return false;
        tg_mono_ns slot = pacer_next_slot(pacer);
        /* TG_MONO_NEVER is a time that never comes, even at now == INT64_MAX. */
        if (slot == TG_MONO_NEVER)
                return false;
        return now >= slot;
}

int pacer_start(struct pacer *pacer, tg_mono_ns now, bool *ret_probe)
{
        assert(!pacer->started || now >= pacer->last_start);
        if (!pacer_may_start(pacer, now))
                return TG_EAGAIN;

        bool probe = pacer->mode == PACER_HELD;
        pacer->started = true;
        pacer->last_start = now;
        pacer->in_flight++;
        if (probe) {
                pacer->mode = PACER_PROBE_OUT;
                pacer->rehold = false;
        }
        if (ret_probe)
                *ret_probe = probe;
        return 0;
}

int pacer_start_pending(struct pacer *pacer, tg_mono_ns at, bool *ret_probe)
{
        int r = pacer_start(pacer, at, ret_probe);

        if (r == 0)
                pacer->pending = true;
        return r;
}

void pacer_sent(struct pacer *pacer, tg_mono_ns sent)
{
        if (!pacer->pending)
                return; /* a report with nothing planned is stale: ignore it */
        pacer->pending = false;
        if (sent > pacer->last_start)
                pacer->last_start = sent; /* a start is never earlier than its plan */
}

void pacer_unsent(struct pacer *pacer)
{
        pacer->pending = false;
}

bool pacer_pending(const struct pacer *pacer)
{
        return pacer->pending;
}

void pacer_finish(struct pacer *pacer)
{
        /* More finishes than starts is a caller bug; never wrap around. */
        assert(pacer->in_flight > 0);
        if (pacer->in_flight > 0)
                pacer->in_flight--;
}

void pacer_hold(struct pacer *pacer, tg_mono_ns until)
{
        if (pacer->mode == PACER_NORMAL) {
                pacer->mode = PACER_HELD;
                pacer->hold_until = until;
                return;
        }
        if (until <= pacer->hold_until)
                return;
        pacer->hold_until = until;
        /* A later hold that arrives while the probe is out outranks the
         * probe's answer: when the probe reports, wait for this hold and
         * probe again rather than resume. */
        if (pacer->mode == PACER_PROBE_OUT)
                pacer->rehold = true;
}

void pacer_probe_done(struct pacer *pacer, bool healthy)
{
        /* A result with no probe out is stale (or a caller bug): ignore it
         * rather than lift a hold nobody probed. */
        if (pacer->mode != PACER_PROBE_OUT)
                return;
        if (healthy && !pacer->rehold) {
                pacer->mode = PACER_NORMAL;
                pacer->hold_until = INT64_MIN;
        } else {
                /* Still probing: one probe at a time, spaced by the interval
                 * from the last probe's start, and not before any hold. */
                pacer->mode = PACER_HELD;
        }
        pacer->rehold = false;
}

tg_mono_ns pacer_hold_until(const struct pacer *pacer)
{
        return pacer->mode == PACER_NORMAL ? INT64_MIN : pacer->hold_until;
}

bool pacer_held(const struct pacer *pacer, tg_mono_ns now)
{
        (void)now; /* the probe phase outlasts hold_until, so `now` alone
                    * never lifts a hold */
        return pacer->mode != PACER_NORMAL;
}
