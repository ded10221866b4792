/*
 * lead_estimator — the connect lead, from the last LEAD_SAMPLES connects.
 * See lead_estimator.h.
 *
 * Invariants: n <= LEAD_SAMPLES and next < LEAD_SAMPLES; the lead is never
 * negative, never above the bound for its mode nor above half the interval.
 */
#include "core/lead_estimator.h"

#include <string.h>

void lead_estimator_init(struct lead_estimator *e)
{
        memset(e, 0, sizeof(*e));
}

void lead_estimator_add(struct lead_estimator *e, tg_mono_ns connect)
{
        e->connects[e->next] = connect;
        e->next = (e->next + 1) % LEAD_SAMPLES;
        if (e->n < LEAD_SAMPLES)
                e->n++;
}

tg_mono_ns lead_estimator_lead(const struct lead_estimator *e, tg_mono_ns interval, bool shares)
{
        tg_mono_ns l = e->n == 0 ? LEAD_INITIAL : 0;
        tg_mono_ns max = shares ? LEAD_MAX_SHARES : LEAD_MAX;

        for (unsigned i = 0; i < e->n; i++)
                if (e->connects[i] > l)
                        l = e->connects[i];
        l += LEAD_MARGIN;
        if (l > max)
                l = max;
        if (l > interval / 2)
                l = interval / 2;
        return l;
}
