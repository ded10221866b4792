/*
 * sim_fiber — a function run on a stack of its own that can stop in the
 * middle (yield) and be continued later (resume), on the one thread of the
 * simulation: tollgate-sim runs each simulated process on a fiber, so that a
 * process waiting inside the real ownership code (a standby's retry, the
 * takeover wait) lets the others run, and only one runs at a time, in the
 * order the world decides (deterministic, no locks).
 *
 * ucontext(3) underneath, with AddressSanitizer told of every switch (its
 * fiber annotations) when the build has it. The stack is a private mapping
 * with a guard page below it.
 */
#ifndef TG_SIM_FIBER_H
#define TG_SIM_FIBER_H

#include <stdbool.h>
#include <stddef.h>

struct sim_fiber;

/* A fiber that will run fn(arg) on a stack of stack_size bytes (rounded up
 * to pages), from its first resume. 0 or TG_ENOMEM. */
int sim_fiber_new(void (*fn)(void *arg), void *arg, size_t stack_size,
                  struct sim_fiber **ret_fiber);
/* Frees a fiber that has finished or never started (a fiber stopped in the
 * middle must be resumed until it finishes first). Accepts NULL. */
void sim_fiber_free(struct sim_fiber *fiber);

/* From outside any fiber: runs it until it yields or its function returns. */
void sim_fiber_resume(struct sim_fiber *fiber);
/* From inside it: back to whoever resumed it. */
void sim_fiber_yield(struct sim_fiber *fiber);
/* Its function has returned. */
bool sim_fiber_done(const struct sim_fiber *fiber);

#endif
