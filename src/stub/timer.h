/*
 * One thread that runs callbacks at monotonic deadlines: how the stub holds
 * 200+ slow requests at once without a thread each (the connection is
 * suspended, a timer resumes it). Callbacks run on the timer thread, in
 * deadline order, outside the timer's lock; they must not block for long.
 */
#ifndef STUB_TIMER_H
#define STUB_TIMER_H

#include "core/tg_time.h"

#include <stddef.h>

struct timer;

typedef void (*timer_fn)(void *arg);

/* A timer holding at most max pending callbacks, its thread started; NULL on failure. */
struct timer *timer_new(size_t max);
/*
 * Stops the thread (waiting for a callback that is running), then calls
 * cancel(arg) on the caller's thread for every callback still pending, in
 * deadline order. Later timer_add() calls fail with TG_ESTATE.
 */
void timer_stop(struct timer *t, timer_fn cancel);
/* Stops (pending callbacks are discarded, never called) and frees. Accepts NULL. */
void timer_free(struct timer *t);
/* Runs fn(arg) at or after due. Returns 0, TG_EFULL at the bound, TG_ESTATE once stopped. */
int timer_add(struct timer *t, tg_mono_ns due, timer_fn fn, void *arg);
/* Pending callbacks now. */
size_t timer_pending(struct timer *t);

#endif
