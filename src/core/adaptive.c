/*
 * adaptive — CUBIC's curve as the exit's rate (adaptive.h). A few lines of
 * arithmetic; cbrt() from libm is the one library call.
 */
#include "core/adaptive.h"

#include <math.h>

void adaptive_init(struct adaptive *a, double ceiling, double floor)
{
        a->ceiling = ceiling;
        if (floor < ceiling / 1000)
                floor = ceiling / 1000;
        a->floor = floor > ceiling ? ceiling : floor;
        a->w_max = ceiling;
        a->cut = false;
        a->last_cut = 0;
        a->cuts = 0;
}

static double clamp(const struct adaptive *a, double r)
{
        return r < a->floor ? a->floor : r > a->ceiling ? a->ceiling : r;
}

double adaptive_rate(const struct adaptive *a, tg_mono_ns now)
{
        if (!a->cut)
                return a->ceiling;
        double t = now > a->last_cut ? (double)(now - a->last_cut) / TG_NS_PER_S : 0.0;
        double c = ADAPTIVE_C_SHARE * a->w_max;
        double k = cbrt(a->w_max * (1.0 - ADAPTIVE_BETA) / c);
        double d = t - k;
        return clamp(a, c * d * d * d + a->w_max);
}

bool adaptive_pushback(struct adaptive *a, tg_mono_ns started, tg_mono_ns now)
{
        if (a->cut && started < a->last_cut)
                return false;
        a->w_max = adaptive_rate(a, now);
        a->cut = true;
        a->last_cut = now;
        a->cuts++;
        return true;
}
