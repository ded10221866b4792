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
 *
 * pacer_sane() checks these invariants that a pacer's fields show; every
 * function that changes the pacer ends with assert(pacer_sane()).
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
        tg_mono_ns margin;        /* the spacing margin, part of rate_interval */
        tg_mono_ns grid_period;   /* > 0: starts only inside this share's windows (shares) */
        tg_mono_ns grid_phase;    /* a window's opening, in [0, grid_period) */
        tg_mono_ns grid_open;     /* how long after its opening a window takes starts */
        tg_mono_ns grid_from;     /* no start before (a rate change of shares); INT64_MIN */
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
        p->margin = config->spacing_margin_ns;
        p->max_in_flight = config->max_in_flight;
        p->in_flight = 0;
        p->started = false;
        p->last_start = INT64_MIN;
        p->mode = PACER_NORMAL;
        p->hold_until = INT64_MIN;
        p->rehold = false;
        p->grid_from = INT64_MIN;
        *ret_pacer = p;
        return 0;
}

void pacer_free(struct pacer *pacer)
{
        free(pacer);
}

bool pacer_sane(const struct pacer *pacer)
{
        const struct pacer *p = pacer;

        if (!p || p->interval < 1 || p->rate_interval < 1 || p->max_in_flight < 1 ||
            p->in_flight > p->max_in_flight)
                return false;
        if ((unsigned)p->mode > PACER_PROBE_OUT)
                return false;
        /* out of a hold there is no hold end; a re-hold waits for a probe out */
        if ((p->mode == PACER_NORMAL && p->hold_until != INT64_MIN) ||
            (p->rehold && p->mode != PACER_PROBE_OUT))
                return false;
        /* a planned start is a start; before any, no start time */
        if ((p->pending && !p->started) || (!p->started && p->last_start != INT64_MIN))
                return false;
        /* a probe is out only after a start (it may have finished, its
         * health not yet reported) */
        if (p->mode == PACER_PROBE_OUT && !p->started)
                return false;
        if (p->grid_period < 0)
                return false;
        if (p->grid_period == 0)
                return p->interval == p->rate_interval;
        return p->grid_phase >= 0 && p->grid_phase < p->grid_period && p->grid_open >= 0 &&
               p->grid_open < p->grid_period && p->interval <= p->grid_period;
}

tg_mono_ns pacer_interval(const struct pacer *pacer)
{
        return pacer->interval;
}

/* The opening of this share's window at or before t (grid only). */
static tg_mono_ns window_open_before(const struct pacer *pacer, tg_mono_ns t)
{
        tg_mono_ns off = (t - pacer->grid_phase) % pacer->grid_period;

        if (off < 0)
                off += pacer->grid_period;
        return t - off;
}

tg_mono_ns pacer_align(const struct pacer *pacer, tg_mono_ns t)
{
        tg_mono_ns w;

        if (pacer->grid_period <= 0 || t == TG_MONO_NEVER || t == INT64_MIN)
                return t;
        /* the first phase + k * period >= t, without overflow near 0 */
        w = window_open_before(pacer, t);
        return w == t ? t : add_sat(w, pacer->grid_period);
}

/* The first moment at or after t inside one of this share's windows: t
 * itself, or the next opening. */
static tg_mono_ns fit(const struct pacer *pacer, tg_mono_ns t)
{
        tg_mono_ns w;

        if (pacer->grid_period <= 0 || t == TG_MONO_NEVER || t == INT64_MIN)
                return t;
        w = window_open_before(pacer, t);
        return t - w <= pacer->grid_open ? t : add_sat(w, pacer->grid_period);
}

/* The late budget's ceiling, and the share of a window the gap between
 * two shares' windows may take (1 / GRID_GAP_SHARE). */
#define GRID_LATE_MAX  (2 * 1000 * 1000) /* 2 ms */
#define GRID_GAP_SHARE 100

int pacer_grid_plan(tg_mono_ns spacing, tg_mono_ns skew, unsigned cap,
                    struct pacer_grid_plan *ret_plan)
{
        if (spacing < 1 || spacing > PACER_MAX_INTERVAL || skew < 0 || skew > 1000 * 1000 * 1000 ||
            cap < 1 || !ret_plan)
                return TG_EINVAL;
        tg_mono_ns late = spacing / 10 < GRID_LATE_MAX ? spacing / 10 : GRID_LATE_MAX;
        tg_mono_ns gap = late + skew;
        /* ceil(GRID_GAP_SHARE * gap / spacing), in [1, cap]; when points
         * > 1, spacing < GRID_GAP_SHARE * gap (about 100 s at most): no
         * product below overflows */
        tg_mono_ns points =
            spacing >= GRID_GAP_SHARE * gap ? 1 : (GRID_GAP_SHARE * gap + spacing - 1) / spacing;
        if (points > (tg_mono_ns)cap)
                points = cap;
        *ret_plan = (struct pacer_grid_plan){.spacing = spacing,
                                             .late = late,
                                             .window = add_sat(points * spacing, gap),
                                             .open = (points - 1) * spacing + late,
                                             .points = (unsigned)points};
        return 0;
}

int pacer_set_rate(struct pacer *pacer, double starts_per_second)
{
        double rate = starts_per_second;
        if (!isfinite(rate) || !(rate > 0.0) || rate > 1e9 || pacer->grid_period > 0)
                return TG_EINVAL;
        tg_mono_ns interval = interval_from_rate(rate);
        if (interval < 1 || interval > PACER_MAX_INTERVAL - TG_NS_PER_S)
                return TG_EINVAL;
        /* from the next slot on: it counts from the last real start, so a
         * higher rate earns nothing for the time it was lower */
        pacer->rate_interval = interval + pacer->margin;
        pacer->interval = pacer->rate_interval;
        assert(pacer_sane(pacer));
        return 0;
}

void pacer_set_grid(struct pacer *pacer, tg_mono_ns period, tg_mono_ns phase, tg_mono_ns open,
                    tg_mono_ns spacing)
{
        if (period <= 0) {
                pacer->grid_period = 0;
                pacer->interval = pacer->rate_interval;
                return;
        }
        pacer->grid_period = period;
        pacer->grid_phase = ((phase % period) + period) % period;
        pacer->grid_open = open < 0 ? 0 : open >= period ? period - 1 : open;
        pacer->interval = spacing < 1 ? 1 : spacing > period ? period : spacing;
        assert(pacer_sane(pacer));
}

void pacer_grid_from(struct pacer *pacer, tg_mono_ns from)
{
        pacer->grid_from = from;
}

int64_t pacer_switch_resume(int64_t changed, tg_mono_ns lead, tg_mono_ns spacing, tg_mono_ns skew)
{
        if (lead < 0 || spacing < 1 || skew < 0)
                return INT64_MAX;
        return add_sat(add_sat(add_sat(changed, lead), spacing), skew);
}

tg_mono_ns pacer_start_at(const struct pacer *pacer, tg_mono_ns now)
{
        tg_mono_ns slot = pacer_next_slot(pacer);

        if (slot == TG_MONO_NEVER || slot >= now)
                return slot;
        /* the slot has passed: now, if inside a window of this share */
        return fit(pacer, now);
}

tg_mono_ns pacer_window_end(const struct pacer *pacer, tg_mono_ns at)
{
        if (pacer->grid_period <= 0 || at == TG_MONO_NEVER || at == INT64_MIN)
                return 0;
        return add_sat(window_open_before(pacer, at), pacer->grid_open);
}

tg_mono_ns pacer_next_slot(const struct pacer *pacer)
{
        if (pacer->mode == PACER_PROBE_OUT || pacer->pending)
                return TG_MONO_NEVER;
        tg_mono_ns slot = INT64_MIN;
        if (pacer->started)
                slot = add_sat(pacer->last_start, pacer->interval);
        if (pacer->mode == PACER_HELD && pacer->hold_until > slot)
                slot = pacer->hold_until;
        if (pacer->grid_from > slot)
                slot = pacer->grid_from;
        /* with a grid: inside one of this share's windows (the grid keeps
         * the other shares' windows apart from it) */
        return fit(pacer, slot);
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
        assert(pacer_sane(pacer));
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
        assert(pacer_sane(pacer));
}

void pacer_unsent(struct pacer *pacer)
{
        pacer->pending = false;
        assert(pacer_sane(pacer));
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
        assert(pacer_sane(pacer));
}

void pacer_hold(struct pacer *pacer, tg_mono_ns until)
{
        if (pacer->mode == PACER_NORMAL) {
                pacer->mode = PACER_HELD;
                pacer->hold_until = until;
                assert(pacer_sane(pacer));
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
        assert(pacer_sane(pacer));
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
        assert(pacer_sane(pacer));
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
