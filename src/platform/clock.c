/*
 * clock — CLOCK_MONOTONIC and CLOCK_REALTIME in tollgate's two time types,
 * and sleeps that survive signals.
 */
#include "platform/clock.h"

#include <errno.h>
#include <sys/prctl.h>

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

int64_t clock_wall_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * TG_NS_PER_S + ts.tv_nsec;
}

void clock_sleep_ns(tg_mono_ns ns)
{
        if (ns <= 0)
                return;
        struct timespec ts = {.tv_sec = (time_t)(ns / TG_NS_PER_S),
                              .tv_nsec = (long)(ns % TG_NS_PER_S)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
}

struct timespec clock_mono_timespec(tg_mono_ns t)
{
        struct timespec ts;
        if (t < 0)
                t = 0;
        ts.tv_sec = (time_t)(t / TG_NS_PER_S);
        ts.tv_nsec = (long)(t % TG_NS_PER_S);
        return ts;
}

void clock_sleep_until(tg_mono_ns t)
{
        if (t <= clock_mono_now())
                return;
        struct timespec ts = clock_mono_timespec(t);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

void clock_wait_until(tg_mono_ns t)
{
        clock_sleep_until(t - CLOCK_SPIN_NS);
        while (clock_mono_now() < t)
                ; /* the last few microseconds */
}

int clock_precise_timers(void)
{
        /* the smallest slack there is: 1 ns */
        return prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0 ? 0 : -1;
}
