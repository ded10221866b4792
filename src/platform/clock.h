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

/* An absolute CLOCK_MONOTONIC timespec for pthread_cond_timedwait (t < 0
 * counts as 0). */
struct timespec clock_mono_timespec(tg_mono_ns t);

#endif
