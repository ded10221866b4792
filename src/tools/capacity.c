/*
 * capacity — seed 000's drain arithmetic (formulas in the header).
 *
 * Invariants: "never drains" is decided on net <= 0 before any division, so
 * no infinity or NaN ever reaches a caller; a zero backlog drains in 0 s
 * whatever the rates; the sensitivity table recomputes the whole plan with
 * one input changed, so it shares the formulas rather than approximating.
 */
#include "tools/capacity.h"

#include <math.h>

#include "core/tg_error.h"

static const char *const names[CAPACITY_FACTORS] = {
    [CAPACITY_BACKLOG] = "backlog",
    [CAPACITY_ARRIVALS] = "arrival rate",
    [CAPACITY_CALLS_PER_CLOSE] = "calls per close",
    [CAPACITY_CALLS_PER_S] = "calls/s allowed",
    [CAPACITY_CALL_TIME] = "call time",
};

const char *capacity_factor_name(enum capacity_factor factor)
{
        if ((unsigned)factor >= CAPACITY_FACTORS)
                return "unknown";
        return names[factor];
}

static int bad(double v)
{
        return !isfinite(v) || v < 0;
}

static int check(const struct capacity_input *in)
{
        if (!in || bad(in->backlog) || bad(in->arrivals_per_s) || bad(in->calls_per_s) ||
            bad(in->calls_per_close) || bad(in->target_s) || bad(in->max_in_flight) ||
            bad(in->call_s))
                return TG_EINVAL;
        if (in->calls_per_s <= 0 || in->calls_per_close < 1)
                return TG_EINVAL;
        if ((in->max_in_flight > 0) != (in->call_s > 0))
                return TG_EINVAL;
        return 0;
}

/* The drain time alone: -1 when it never drains. */
static double drain(const struct capacity_input *in, struct capacity_plan *p)
{
        double eff = in->calls_per_s;
        p->in_flight_calls_per_s = 0;
        p->in_flight_binds = 0;
        if (in->max_in_flight > 0) {
                p->in_flight_calls_per_s = in->max_in_flight / in->call_s;
                if (p->in_flight_calls_per_s < eff) {
                        eff = p->in_flight_calls_per_s;
                        p->in_flight_binds = 1;
                }
        }
        p->effective_calls_per_s = eff;
        p->closes_per_s = eff / in->calls_per_close;
        p->net_per_s = p->closes_per_s - in->arrivals_per_s;
        if (in->backlog == 0) {
                p->drains = 1;
                p->drain_s = 0;
        } else if (p->net_per_s <= 0) {
                p->drains = 0;
                p->drain_s = -1;
        } else {
                p->drains = 1;
                p->drain_s = in->backlog / p->net_per_s;
        }
        return p->drain_s;
}

int capacity_plan(const struct capacity_input *input, struct capacity_plan *ret_plan)
{
        struct capacity_plan p = {0};

        if (check(input) < 0 || !ret_plan)
                return TG_EINVAL;
        drain(input, &p);
        p.calls_to_hold_per_s = input->arrivals_per_s * input->calls_per_close;
        if (input->target_s > 0) {
                p.closes_needed_per_s = input->backlog / input->target_s + input->arrivals_per_s;
                p.calls_needed_per_s = p.closes_needed_per_s * input->calls_per_close;
                p.target_met = p.drains && p.drain_s <= input->target_s;
        }

        double worst = -2;
        for (int f = 0; f < CAPACITY_FACTORS; f++) {
                struct capacity_input w = *input;
                struct capacity_plan scratch;
                switch ((enum capacity_factor)f) {
                case CAPACITY_BACKLOG:
                        w.backlog *= 1.1;
                        break;
                case CAPACITY_ARRIVALS:
                        w.arrivals_per_s *= 1.1;
                        break;
                case CAPACITY_CALLS_PER_S:
                        w.calls_per_s /= 1.1;
                        break;
                case CAPACITY_CALLS_PER_CLOSE:
                        w.calls_per_close *= 1.1;
                        break;
                case CAPACITY_CALL_TIME:
                        if (input->call_s <= 0) {
                                p.worse_drain_s[f] = 0;
                                continue;
                        }
                        w.call_s *= 1.1;
                        break;
                case CAPACITY_FACTORS:
                        break;
                }
                double d = drain(&w, &scratch);
                p.worse_drain_s[f] = d;
                /* Never draining is worse than any finite time. */
                double rank = d < 0 ? INFINITY : d;
                /* Ties (within rounding) keep the earlier factor. */
                if (rank > worst * (1 + 1e-9)) {
                        worst = rank;
                        p.dominant = (enum capacity_factor)f;
                }
        }
        *ret_plan = p;
        return 0;
}
