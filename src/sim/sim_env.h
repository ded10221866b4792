/*
 * sim_env — the dispatcher's environment (daemon/exit_env.h) in virtual time:
 * a clock that moves only when the simulation moves it, and a transport that
 * plays a simulated provider. tests/unit/test_dispatcher.c runs the real
 * dispatcher on one of these, and so does tollgate-sim (sim_world.h), one per
 * simulated process.
 *
 * A call's life, as the real transport's: handed over at `h` (start), its
 * connection is ready `connect` later, and its request goes on the wire at
 * max(ready, not_before) — the pre-request hook's hold — unless the connect
 * failed (nothing leaves: not sent) or the call's whole timeout came first.
 * The provider decides its connect at the hand-off; its answer either at the
 * hand-off too or, when the provider has an `arrive` function, at the moment
 * the request reaches it (so that what it answers depends on everything that
 * arrived before, in time order). The call ends `latency` after the wire, or
 * at its whole timeout (counted from the hand-off), whichever is first.
 *
 * Two ways to run:
 *   - standalone (no scheduler): poll() moves the clock to its `until` or to
 *     the first event of a call before it (a request on the wire, an end),
 *     sleep() moves the clock. One dispatcher, one clock.
 *   - scheduled (sim_env_set_sched): poll() only records when the process
 *     wants to wake (sim_env_wake) and returns; the world moves the clock,
 *     processes every env's events in time order (sim_env_next_event,
 *     sim_env_process) and runs each process's turn when it is due. sleep()
 *     is the world's: other processes run meanwhile.
 *
 * A killed env (sim_env_kill: its process died) forgets its calls — a request
 * already on the wire stays the provider's business, one not yet on it never
 * leaves — and from then on starts nothing and hears nothing.
 *
 * Bounds: SIM_ENV_MAX_OPEN open calls (start answers TG_EFULL past it); the
 * record of starts keeps at most the caller's array.
 */
#ifndef TG_SIM_ENV_H
#define TG_SIM_ENV_H

#include <stdbool.h>
#include <stdint.h>

#include "core/operation.h"
#include "core/tg_time.h"
#include "daemon/exit_env.h"

#define SIM_ENV_MAX_OPEN 64

/* A machine's clocks, shared by the processes that run on it. The monotonic
 * clock is `mono`; the wall clock is wall0 plus mono plus every step the
 * wall clock took (an NTP step, a VM resumed): monotonic time never jumps,
 * wall time may. Plain data: the owner moves it. */
struct sim_clock {
        tg_mono_ns mono;
        tg_wall_ms wall0;
        int64_t wall_step_ns;
};

tg_wall_ms sim_clock_wall(const struct sim_clock *clock);
int64_t sim_clock_wall_ns(const struct sim_clock *clock);

/* What the provider does with one call. */
struct sim_answer {
        tg_mono_ns connect; /* hand-off to connection ready (default 300 us) */
        /* the connect fails: nothing leaves, the call ends at `connect`
         * (TG_TR_NOT_SENT) */
        bool refused;
        tg_mono_ns latency; /* from the request on the wire to the end of the call */
        /* from the hook letting the request go to the end of the transport's
         * step that writes it (the real one: libcurl builds and writes the
         * request after the hook returns; a preemption there delays it) */
        tg_mono_ns send_delay;
        /* TG_TR_COMPLETE (an answer), TG_TR_RESET (the connection ends
         * without one) or TG_TR_TIMEOUT_AFTER_SEND (nothing ever comes: the
         * call ends at its timeout) */
        enum tg_transport_result transport;
        int http_status;
        /* NULL: none. Each must stay valid until the answer is read: at the
         * end of the callback that gave it (arrive, or handoff without one) */
        const char *status;      /* body .status */
        const char *error_code;  /* body .error.code */
        const char *retry_after; /* the Retry-After header */
        const char *refund_id;   /* body .refund_id */
};

/* One start as the transport saw it (the record kept for tests). */
struct sim_start {
        tg_mono_ns at;       /* on the wire (a call never sent: its slot, or the hand-off) */
        tg_mono_ns sent_end; /* by when it had surely left (at + send_delay; 0 if never sent) */
        tg_mono_ns handoff;  /* handed to the transport */
        bool sent;           /* false: its connect failed */
        enum classify_request request;
        char operation_id[TG_OP_ID_MAX + 1];
        unsigned attempt;
        unsigned open_after; /* calls open at the transport, this one included */
        int64_t timeout_ms;  /* the whole-call timeout it was given */
        tg_wall_ms wall;     /* the hand-off on the wall clock */
        char traceparent[TG_TRACEPARENT_MAX + 1];
        char request_id[TG_REQUEST_ID_MAX + 1];
};

struct sim_env;

/* The provider: `handoff` (required) decides the connect and — unless
 * `arrive` is set — the whole answer when the call is handed over (*ret
 * comes filled with the defaults: 300 us connect, 50 ms, 201); `arrive`
 * (optional) decides the answer when the request reaches the provider, at
 * `wire` (*ret as the hand-off left it; the call was handed over at
 * `handoff`). `call` and its strings are valid
 * during the callback only. A handoff that kills the env (its process dies
 * at the hand-off) leaves nothing started. */
struct sim_env_provider {
        void (*handoff)(void *ctx, struct sim_env *env, const struct transport_call *call,
                        struct sim_answer *ret);
        void (*arrive)(void *ctx, struct sim_env *env, const struct transport_call *call,
                       tg_mono_ns handoff, tg_mono_ns wire, struct sim_answer *ret);
        /* optional: the call's result reached the process (next_done
         * popped it) */
        void (*delivered)(void *ctx, struct sim_env *env, const struct transport_call *call,
                          const struct transport_result *result);
        void *ctx;
};

/* A new env on `clock` (borrowed, outlives the env) for `provider` (copied),
 * standalone, with `store` (borrowed: whoever opened it closes it, after the
 * env's dispatcher is freed), the dispatcher's random seed and whether a
 * doorbell rings for new work (sim_env_ring). 0 or TG_ENOMEM; free with
 * sim_env_free() (accepts NULL). */
int sim_env_new(struct sim_clock *clock, const struct sim_env_provider *provider,
                struct store *store, uint64_t seed, bool has_doorbell, struct sim_env **ret_env);
void sim_env_free(struct sim_env *env);

/* What the dispatcher is given; valid for the env's life. */
const struct exit_env *sim_env_exit(const struct sim_env *env);
struct sim_clock *sim_env_clock(const struct sim_env *env);

/* Keeps a record of every start in `starts` (the caller's, at most max;
 * starts past it are not recorded). */
void sim_env_record(struct sim_env *env, struct sim_start *starts, unsigned max);
/* Starts recorded so far (also those past the array's end). */
unsigned sim_env_starts(const struct sim_env *env);
/* Calls the provider was asked about (handoff callbacks made). */
unsigned sim_env_answered(const struct sim_env *env);
/* Calls open at the transport (started, not yet popped by next_done). */
unsigned sim_env_open(const struct sim_env *env);

/* Scheduled mode: `sleep` waits for the process (the world runs the others
 * meanwhile and moves the clock to its end); ctx is the world's. */
void sim_env_set_sched(struct sim_env *env,
                       void (*sleep)(void *ctx, struct sim_env *env, tg_mono_ns ns), void *ctx);
/* Scheduled mode: when the process asked to be woken by its last poll
 * (at once before its first), and now when an event of one of its calls
 * (on the wire, ended) or the doorbell came since. */
tg_mono_ns sim_env_wake(const struct sim_env *env);
/* Rings the doorbell: the next poll returns 1 and the process is due now. */
void sim_env_ring(struct sim_env *env);

/* The earliest event of a call not processed yet (a request reaching the
 * wire, an end); TG_MONO_NEVER when none. */
tg_mono_ns sim_env_next_event(const struct sim_env *env);
/* Processes that earliest event if it is at or before `upto` (the provider's
 * arrive runs here). True when one was processed. */
bool sim_env_process(struct sim_env *env, tg_mono_ns upto);

/* The process is gone: calls forgotten (see the top), nothing starts or is
 * heard from now on, sleeps return at once. */
void sim_env_kill(struct sim_env *env);
bool sim_env_dead(const struct sim_env *env);

/* A start's request id ("tg-<epoch>-<seq>-<hex>") names its owner's epoch;
 * 0 when it does not parse. */
int64_t sim_request_epoch(const char *request_id);

#endif
