/*
 * exit — one exit as a value: the gate in front of one provider account (or
 * one share of it). It owns its pacer (and the query sub-quota's), its open
 * calls and their count, the account's holds, its owner and share
 * (daemon/ownership.h), the claims made ahead (its ready queue), the
 * settlement of its calls and their retries, its figures (exit_stats.h)
 * and its store workers. The loop (daemon/dispatcher.h) serves a list of
 * them on one environment: one clock, one transport, calls told apart by
 * their cookies, which carry the exit's index.
 *
 * A turn of the loop drives each exit through the steps below, in this
 * order: collect the store thread's results, hand it the transport's
 * reports of its calls (sent, done), retry what the store could not take,
 * its once-a-second work, at most one start, claims ahead, and the time it
 * wants to be woken. Nothing here waits, but a store used inline (no store
 * thread) and ownership's waits (exit_open, exit_rejoin).
 */
#ifndef TG_EXIT_H
#define TG_EXIT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/pacer.h"
#include "core/tg_time.h"
#include "daemon/exit_env.h"

struct tg_config;
struct store;
struct exit;

/* Exits one loop may serve (as many as a config's accounts,
 * TG_ACCOUNTS_MAX): a cookie carries its exit's index in its low
 * EXIT_INDEX_BITS, the call's number in the 54 above. */
#define EXIT_INDEX_BITS 10
#define EXIT_MAX        (1u << EXIT_INDEX_BITS)

struct exit_params {
        /* Its quota, holds, timeouts and policy (borrowed: outlives the exit;
         * today every exit of a loop reads the one config). */
        const struct tg_config *config;
        const struct exit_env *env; /* the loop's clocks and transport (borrowed) */
        /* Its store (borrowed, opened and closed by the caller), and a second
         * connection to it for outcomes (NULL: outcomes through `store`;
         * used only with a store thread, env->store_bell). */
        struct store *store, *outcome_store;
        unsigned index; /* < EXIT_MAX, its place in the loop's list */
        bool no_wait;   /* another owner: give up instead of standing by */
        /* a further share of an account the loop serves in another exit
         * (ownership.h's spare: takes only an orphaned share) */
        bool spare;
        volatile sig_atomic_t *stop;    /* set by a signal handler: drain */
        volatile sig_atomic_t *standby; /* out: 1 while waiting as standby (may be NULL) */
        /* once a second while it owns its share, on its store thread, with
         * its store (dispatcher_options.housekeeping); NULL: none */
        void (*housekeeping)(void *ctx, struct store *store, unsigned share, tg_wall_ms wall,
                             bool lost);
        void *hook_ctx;
};

/* Shares, a change of the account's rate at run time: how long after the
 * change's instant (its changed_at) every share has stopped starting on
 * the old rate's grid. A share learns of the change with its owner check,
 * read at most OWNERSHIP_FRESH_NS before any start it makes; the rest
 * covers the clock skew between the process that made the change and the
 * shares (exit.clock_skew_ms) and the change's own commit, which may come
 * up to EXIT_SWITCH_COMMIT_MS after its instant (docs/design.md, "A rate
 * change with shares"). */
#define EXIT_SWITCH_COMMIT_MS 1500
tg_mono_ns exit_switch_lead(const struct tg_config *config);

/* This exit's part of the account: starts_per_second / exit.shares and
 * max_in_flight / exit.shares (at least one call). */
void exit_share_config(const struct tg_config *config, struct pacer_config *ret_share);

/* A new exit, not yet an owner. 0 or a TG_E* code; free with exit_free()
 * (accepts NULL). */
int exit_new(const struct exit_params *params, struct exit **ret_exit);
/* Commits the outcomes posted, gives ownership up. */
void exit_free(struct exit *e);

/* Becomes an owner (ownership_acquire) and takes over. 0; 1 (stopped while
 * waiting); 3 (no_wait and another owner); a negative code (logged). */
int exit_open(struct exit *e);
/* The exit was lost and has drained: stand by and take it again
 * (ownership_rejoin). 0 (owner again), 1 (stopped, or could not: then it
 * stays lost). */
int exit_rejoin(struct exit *e);

/* The same without waiting, for a loop that serves other exits meanwhile
 * (several accounts): exit_begin() starts becoming an owner (the first
 * time), exit_rejoin_begin() again after the exit was lost and has drained;
 * then exit_own_step() at each turn (ownership_step: 0 owner now, 2 not
 * yet, 1 stopped, 3 no_wait and another owner, or a negative code, logged;
 * on anything but 0 and 2 the exit counts as lost). While exit_pending(),
 * none of the functions below may be called for it but exit_wake_at()'s
 * replacement, exit_own_next() (when to step again), and exit_drained() /
 * exit_lost(). */
void exit_begin(struct exit *e, tg_mono_ns now);
void exit_rejoin_begin(struct exit *e, tg_mono_ns now);
int exit_own_step(struct exit *e, tg_mono_ns now);
bool exit_pending(const struct exit *e);
/* It holds its account's (share's) lock: serving, or still in its takeover
 * wait. */
bool exit_owns(const struct exit *e);
tg_mono_ns exit_own_next(const struct exit *e);
/* The account it serves ("" for a config that is not an account's view). */
const char *exit_account(const struct exit *e);

/* The index a cookie carries (EXIT_MAX or more: none of ours). */
unsigned exit_of_cookie(uint64_t cookie);

/* The store threads' results taken: claims onto the ready queue, outcomes
 * committed (logged and counted). */
void exit_collect(struct exit *e);
/* The transport says one of its calls went on the wire (or never will). */
void exit_sent(struct exit *e, const struct transport_sent *sent);
/* One of its calls ended at the transport: settled (or, late for its
 * window, its claim given back). */
void exit_done(struct exit *e, const struct transport_result *result, tg_mono_ns now,
               tg_wall_ms wall);
/* Outcomes and releases the store could not take, asked again when due. */
void exit_retry_unsettled(struct exit *e, tg_mono_ns now, tg_wall_ms wall);
/* Its claims made ahead go back (a stop, a lost exit). */
void exit_release_all(struct exit *e, const char *why, tg_mono_ns now, tg_wall_ms wall);
/* Once a second: the owner check, the sample, sweeps, the service's work,
 * posted to its store threads. True when its second came now. */
bool exit_second(struct exit *e, tg_mono_ns now, tg_wall_ms wall);
/* Starts at most one call, when its slot has come and there is room. */
void exit_try_start(struct exit *e, tg_mono_ns now, tg_wall_ms wall);
/* Claims ahead of the next slots when the ready queue runs low. */
void exit_refill(struct exit *e, tg_mono_ns now, tg_wall_ms wall);
/* The next moment something can happen for it (a slot, a recheck). */
tg_mono_ns exit_wake_at(const struct exit *e, tg_mono_ns now);
/* Work arrived (the doorbell): look for it now. */
void exit_woken(struct exit *e);

/* Fenced or its lock lost, and not taken again. */
bool exit_lost(const struct exit *e);
/* A standby of its account wants a share: its split's want count moved
 * lately, as the last seconds read it (core/share_want.h). */
bool exit_want_fresh(const struct exit *e, tg_mono_ns now);
/* Hands its share back (a spare, for a standby that wants it): it starts
 * nothing more, its claims made ahead go back, its open calls end, and once
 * drained it releases its lock and waits as a spare again, as a lost exit
 * rejoins (the loop's drain). Logged. */
void exit_hand_back(struct exit *e);
/* Lost because it handed its share back (not a failure). */
bool exit_handing_back(const struct exit *e);
/* No call open and no store work pending: nothing left to settle. */
bool exit_drained(const struct exit *e);
/* Its calls open at the transport. */
unsigned exit_open_calls(const struct exit *e);
/* Outcomes the store never took (for the closing log line). */
unsigned exit_unsettled(const struct exit *e);

/* True when the exit's invariants hold (exit_int.h lists them), its open
 * calls no more than the transport's `transport_open` (the loop checks
 * that every exit's together are exactly the transport's). For assert()
 * only. */
bool exit_sane(const struct exit *e, unsigned transport_open);

#endif
