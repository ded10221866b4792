/*
 * clock — CLOCK_MONOTONIC and CLOCK_REALTIME in tollgate's two time types.
 */
#include "net/clock.h"

#include <time.h>

tg_mono_ns clock_mono_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (tg_mono_ns)ts.tv_sec * TG_NS_PER_S + ts.tv_nsec;
}

tg_wall_ms clock_wall_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (tg_wall_ms)ts.tv_sec * TG_MS_PER_S + ts.tv_nsec / TG_NS_PER_MS;
}
