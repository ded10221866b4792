/*
 * sim_fiber — fibers on ucontext(3). See sim_fiber.h.
 *
 * Invariants: only the main context resumes a fiber and only the fiber
 * itself yields; a fiber's `caller` is the context that resumed it last, and
 * its function's return switches there (uc_link).
 */
#include "sim/sim_fiber.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/tg_error.h"

#if defined(__SANITIZE_ADDRESS__)
#define SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_ASAN 1
#endif
#endif
#ifdef SIM_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

struct sim_fiber {
        ucontext_t ctx, caller;
        void *map; /* the guard page and the stack */
        size_t map_size;
        void *stack;
        size_t stack_size;
        void (*fn)(void *arg);
        void *arg;
        bool started, done;
#ifdef SIM_ASAN
        void *fake_stack;          /* the fiber's, kept while it is away */
        const void *caller_bottom; /* the resuming context's stack */
        size_t caller_size;
#endif
};

/* The fiber being started: makecontext passes int arguments only, so the
 * trampoline finds it here (one thread). */
static struct sim_fiber *starting;

static void trampoline(void)
{
        struct sim_fiber *f = starting;

#ifdef SIM_ASAN
        __sanitizer_finish_switch_fiber(NULL, &f->caller_bottom, &f->caller_size);
#endif
        f->fn(f->arg);
        f->done = true;
#ifdef SIM_ASAN
        /* leaving for good: no fake stack to keep */
        __sanitizer_start_switch_fiber(NULL, f->caller_bottom, f->caller_size);
#endif
        /* returns to f->caller (uc_link) */
}

int sim_fiber_new(void (*fn)(void *arg), void *arg, size_t stack_size, struct sim_fiber **ret_fiber)
{
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        struct sim_fiber *f = calloc(1, sizeof(*f));

        if (!f)
                return TG_ENOMEM;
        f->stack_size = (stack_size + page - 1) / page * page;
        f->map_size = f->stack_size + page;
        f->map = mmap(NULL, f->map_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (f->map == MAP_FAILED) {
                free(f);
                return TG_ENOMEM;
        }
        /* an overflow faults instead of writing over something else */
        (void)mprotect(f->map, page, PROT_NONE);
        f->stack = (char *)f->map + page;
        f->fn = fn;
        f->arg = arg;
        if (getcontext(&f->ctx) != 0) {
                munmap(f->map, f->map_size);
                free(f);
                return TG_ENOMEM;
        }
        f->ctx.uc_stack.ss_sp = f->stack;
        f->ctx.uc_stack.ss_size = f->stack_size;
        f->ctx.uc_link = &f->caller;
        makecontext(&f->ctx, trampoline, 0);
        *ret_fiber = f;
        return 0;
}

void sim_fiber_free(struct sim_fiber *f)
{
        if (!f)
                return;
        munmap(f->map, f->map_size);
        free(f);
}

void sim_fiber_resume(struct sim_fiber *f)
{
#ifdef SIM_ASAN
        void *fake = NULL;
        __sanitizer_start_switch_fiber(&fake, f->stack, f->stack_size);
#endif
        if (!f->started) {
                f->started = true;
                starting = f;
        }
        swapcontext(&f->caller, &f->ctx);
#ifdef SIM_ASAN
        __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

void sim_fiber_yield(struct sim_fiber *f)
{
#ifdef SIM_ASAN
        __sanitizer_start_switch_fiber(&f->fake_stack, f->caller_bottom, f->caller_size);
#endif
        swapcontext(&f->ctx, &f->caller);
#ifdef SIM_ASAN
        __sanitizer_finish_switch_fiber(f->fake_stack, &f->caller_bottom, &f->caller_size);
#endif
}

bool sim_fiber_done(const struct sim_fiber *f)
{
        return f->done;
}
