/*
 * clock — the only reads of the system clocks (CLOCK_MONOTONIC and
 * CLOCK_REALTIME, in the two time types of core/tg_time.h) and the only
 * sleeps. Pure code never calls these: the dispatcher loop reads the clock
 * once per turn and passes "now" down; the stub orders arrivals and phases
 * by monotonic time and only reports wall time.
 */
#ifndef TG_CLOCK_H
#define TG_CLOCK_H

#include <time.h>

#include "core/tg_time.h"

tg_mono_ns clock_mono_now(void); /* CLOCK_MONOTONIC */
tg_wall_ms clock_wall_now(void); /* CLOCK_REALTIME */
int64_t clock_wall_ns(void);     /* CLOCK_REALTIME in ns: the time base shares agree on */

/* Sleeps ns (<= 0: returns at once), resuming after a signal. */
void clock_sleep_ns(tg_mono_ns ns);

/* Sleeps until CLOCK_MONOTONIC t (absolute: no drift over a loop's turns). */
void clock_sleep_until(tg_mono_ns t);

/* Returns at CLOCK_MONOTONIC t, not before and as little after as the
 * system allows: an absolute sleep to shortly before t, then a spin for the
 * last CLOCK_SPIN_NS (the wake-up of a sleep is tens of microseconds late). */
#define CLOCK_SPIN_NS (50 * TG_NS_PER_US)
void clock_wait_until(tg_mono_ns t);

/* This thread's timers expire when asked, not up to 50 us later (the
 * kernel's default slack): the exit's starts are timed in microseconds.
 * Best effort (Linux prctl); 0 or -1. */
int clock_precise_timers(void);

/* An absolute CLOCK_MONOTONIC timespec for pthread_cond_timedwait (t < 0
 * counts as 0). */
struct timespec clock_mono_timespec(tg_mono_ns t);

#endif
