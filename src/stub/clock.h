/*
 * The stub's two clock reads, CLOCK_MONOTONIC and wall time, in the types of
 * core/tg_time.h. The only place in the stub that reads a clock directly.
 */
#ifndef STUB_CLOCK_H
#define STUB_CLOCK_H

#include "core/tg_time.h"

#include <time.h>

tg_mono_ns stub_mono_now(void);
tg_wall_ms stub_wall_now(void);
/* An absolute CLOCK_MONOTONIC timespec for pthread_cond_timedwait. */
struct timespec stub_mono_timespec(tg_mono_ns t);

#endif
