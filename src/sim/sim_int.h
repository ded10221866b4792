/*
 * sim_int — what sim_world.c (the world: processes, scheduler, the store's
 * fault hooks), sim_timeline.c (what a seed draws: the configuration and the
 * timeline of faults) and sim_check.c (the invariants) share. Private to
 * src/sim.
 */
#ifndef TG_SIM_INT_H
#define TG_SIM_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/rng.h"
#include "daemon/config.h"
#include "daemon/dispatcher.h"
#include "sim/sim_env.h"
#include "sim/sim_provider.h"
#include "sim/sim_world.h"
#include "store/store.h"
#include "store/store_faults.h"

#define SIM_PROCS_MAX  8    /* processes alive at once (crashed ones are gone) */
#define SIM_OPS_MAX    400  /* refunds submitted in one run */
#define SIM_EPOCHS_MAX 1024 /* owner epochs handed out in one run */

enum proc_state {
        PROC_OPENING, /* dispatcher_open() to run (acquire, takeover wait, recovery) */
        PROC_RUNNING, /* turns */
        PROC_DEAD,    /* crashed or exited: to be reaped */
};

/* One tollgate process: its dispatcher, its env and its store connection
 * (the process's intake and operator actions share it here). */
struct sim_fiber;

struct sim_proc {
        unsigned id; /* 1, 2, ... in the order started */
        struct sim_world *w;
        struct store *store; /* wrapped: faults and crash points */
        struct sim_env *env;
        struct dispatcher *d;
        struct dispatcher_options opt;
        volatile sig_atomic_t stop;
        enum proc_state state;
        unsigned crash_in; /* store and hand-off boundaries until it dies; 0: none */
        int64_t bumping;   /* the epoch its current transaction bumped (0: none) */
        bool took_epoch;   /* it holds an epoch (while opening: it is taking over) */
        tg_mono_ns wake_at_open;
        /* Its own fiber (sim_fiber.h): the world resumes it for a turn and
         * it yields at the end of the turn, or in a sleep. One runs at a
         * time. */
        struct sim_fiber *fiber;
        bool quit;              /* leave the loop when resumed next */
        bool in_turn;           /* parked inside a turn (in a sleep) */
        tg_mono_ns sleep_until; /* parked in a sleep until then */
};

/* A refund the simulation submitted, and what it knows of it. */
struct sim_op {
        struct refund_request req;
        bool accepted;         /* store_accept answered 0 */
        bool submitted;        /* tried at least once */
        tg_mono_ns retry_at;   /* an unconfirmed intake is tried again (NEVER: not) */
        unsigned resends;      /* operator re-sends that took */
        unsigned limited;      /* POSTs tollgate heard refused unexecuted (429/503) */
        bool resend_pending;   /* the next POST is the operator's */
        bool must_query;       /* a POST arrived whose outcome tollgate may not know */
        tg_mono_ns overdue_at; /* seen open past its deadline since (NEVER: not) */
        uint64_t seen_gen;     /* the state check that last saw it open */
};

/* The seed's configuration of the run, beyond tollgate's own. */
struct sim_config {
        tg_mono_ns fault_end;            /* the faulty part ends by then at the latest */
        tg_mono_ns intake_lo, intake_hi; /* between bursts */
        unsigned burst_max;
        tg_mono_ns crash_every;  /* mean; 0: none */
        tg_mono_ns fault_every;  /* store fault episodes; 0: none */
        tg_mono_ns lock_every;   /* lost owner locks; 0: none */
        tg_mono_ns jump_every;   /* wall clock steps; 0: none */
        tg_mono_ns resend_every; /* operator re-sends; 0: none */
        tg_mono_ns jump_back_max;
        tg_mono_ns key_ttl;
        bool doorbell;
};

struct sim_world {
        struct sim_options opt;
        struct sim_result *res;
        struct sim_config sc;
        struct tg_config cfg; /* every process's */
        struct tg_rng rng;    /* the timeline's draws */
        struct sim_clock clock;
        struct sim_provider *provider;
        char db_path[512];
        char url[600];
        struct store *view;   /* the simulation's own connection: never faulted */
        tg_mono_ns last_view; /* when the store's view was checked last */
        unsigned open_seen;   /* operations it found open then */

        struct sim_proc *procs[SIM_PROCS_MAX];
        unsigned nprocs;       /* slots in use */
        unsigned started;      /* processes ever started */
        tg_mono_ns restart_at; /* NEVER: none due */

        struct sim_op ops[SIM_OPS_MAX];
        unsigned nops;

        /* the timeline */
        bool draining;
        tg_mono_ns next_intake, next_crash, next_fault, next_lock, next_jump, next_resend;
        tg_mono_ns next_view;
        tg_mono_ns fault_until;
        unsigned fault_pct;
        tg_mono_ns slow_max; /* the episode stalls each transaction up to this (0: fails them) */
        unsigned fault_proc; /* 0: every process's connection */
        tg_mono_ns disrupted_until; /* deadlines are judged after this */
        uint64_t step;
        uint64_t still_steps; /* steps in a row without time passing */
        uint64_t view_gen;

        /* the door */
        tg_mono_ns interval; /* ceil(1e9 / rate) */
        tg_mono_ns last_wire;
        char last_wire_op[TG_OP_ID_MAX + 1];
        int64_t last_wire_epoch;
        /* each epoch's calls at the provider: the first reached it then,
         * the last ends then (its answer, or its timeout) */
        tg_mono_ns epoch_first_wire[SIM_EPOCHS_MAX];
        tg_mono_ns epoch_last_end[SIM_EPOCHS_MAX];
        int64_t newest_sending; /* the newest epoch whose call reached the provider */
        bool failed;
};

/* The run fails: the first violation is kept (invariant, message), with
 * the step and time; every process is asked to stop. */
void sim_fail(struct sim_world *w, const char *invariant, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A trace line (--verbose) stamped with virtual time. */
void sim_trace(const struct sim_world *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The op of a key ("op-<n>"), NULL if none. */
struct sim_op *sim_op_of(struct sim_world *w, const char *key);

/* ---- draws (the world's rng) and processes (sim_world.c) ---- */

tg_mono_ns sim_draw(struct sim_world *w, tg_mono_ns lo, tg_mono_ns hi); /* in [lo, hi] */
bool sim_chance(struct sim_world *w, unsigned pct);
/* now + an exponential wait of that mean (NEVER for a mean <= 0) */
tg_mono_ns sim_every(struct sim_world *w, tg_mono_ns mean);
/* one element of a static array */
#define SIM_PICK(w, arr)                                                                           \
        (arr)[tg_rng_range(&(w)->rng, 0, (int64_t)(sizeof(arr) / sizeof((arr)[0])) - 1)]

/* A new process, opening (it acquires the exit at its first turn). 0 or a
 * TG_E* code. */
int sim_proc_start(struct sim_world *w);
/* The process dies now (why: for the trace); freed once off its fiber. */
void sim_proc_kill(struct sim_proc *p, const char *why);
unsigned sim_live_procs(const struct sim_world *w);

/* ---- what a seed draws, and the timeline (sim_timeline.c) ---- */

void sim_draw_config(struct sim_world *w);
void sim_trace_config(const struct sim_world *w);
/* the next moment something of the timeline is due (NEVER: none) */
tg_mono_ns sim_timeline_next(const struct sim_world *w);
/* plays what is due now */
void sim_timeline(struct sim_world *w);
/* no more faults: a calm provider */
void sim_drain(struct sim_world *w);

/* ---- the checks (sim_check.c) ---- */

/* At a hand-off: calls open at every live process, this one included. */
void sim_check_handoff(struct sim_world *w, struct sim_proc *p, const struct transport_call *call);
/* A request reaches the provider (before its answer is decided). */
void sim_check_arrival(struct sim_world *w, struct sim_proc *p, const struct transport_call *call,
                       tg_mono_ns wire);
/* ... and was answered: the call ends at the provider at `end`. */
void sim_check_answered(struct sim_world *w, const struct transport_call *call, tg_mono_ns wire,
                        tg_mono_ns end);
/* After the provider saw a request: no key executed twice. */
void sim_check_executed(struct sim_world *w, const char *key);
/* A call's answer reached tollgate (next_done popped it). */
void sim_check_delivered(struct sim_world *w, const struct transport_result *res,
                         const char *operation_id, enum classify_request request);
/* The store's view: nothing accepted is gone, nothing overdue past the
 * slack. Returns how many accepted operations are still open. */
unsigned sim_check_view(struct sim_world *w);
/* The end: every accepted operation final or in manual, and the ledger
 * agrees with what the store says. */
void sim_check_final(struct sim_world *w);

#endif
