/*
 * Clock reads for the stub. Monotonic time orders arrivals and phases; wall
 * time is only reported, never compared.
 */
#include "clock.h"

tg_mono_ns stub_mono_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (tg_mono_ns)ts.tv_sec * TG_NS_PER_S + ts.tv_nsec;
}

tg_wall_ms stub_wall_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (tg_wall_ms)ts.tv_sec * TG_MS_PER_S + ts.tv_nsec / TG_NS_PER_MS;
}

struct timespec stub_mono_timespec(tg_mono_ns t)
{
        struct timespec ts;
        if (t < 0)
                t = 0;
        ts.tv_sec = (time_t)(t / TG_NS_PER_S);
        ts.tv_nsec = (long)(t % TG_NS_PER_S);
        return ts;
}
