/*
 * dispatcher — the loop that serves a list of exits (daemon/exit.h; one
 * today, from the config). Each exit becomes the owner of its account or of
 * a share of it (daemon/ownership.h: standby, takeover wait, recovery), then
 * starts calls only when its pacer's slot has come AND its in-flight is
 * under its cap — claiming (and committing) each attempt right before
 * handing it to the transport. Outcomes are classified, decided by the
 * policy and settled in short transactions. No transaction or connection is
 * held while it waits.
 *
 * It touches the world only through a struct exit_env (daemon/exit_env.h):
 * the daemon runs it on the real clocks, transport and store
 * (dispatcher_run); tests drive it turn by turn on a fake clock and
 * transport (dispatcher_new / dispatcher_open / dispatcher_turn).
 */
#ifndef TG_DISPATCHER_H
#define TG_DISPATCHER_H

#include <signal.h>
#include <stdbool.h>

#include "core/pacer.h"
#include "daemon/config.h"
#include "daemon/exit_env.h"
#include "platform/wake.h"

struct dispatcher_options {
        bool no_wait;                   /* another owner: exit instead of standby */
        volatile sig_atomic_t *stop;    /* set by a signal handler: drain and exit */
        volatile sig_atomic_t *standby; /* out: 1 while waiting as standby (may be NULL) */
        struct wake *doorbell;          /* rung by the API for new work (serve); NULL: none */
        /* Called once a second while this dispatcher owns its share (lost:
         * the exit was lost and calls are draining), as part of the
         * second's store work that the loop posts to its store thread
         * (daemon/store_worker.h): on that thread, always the same one,
         * with its store. The service's watchdog ping, readiness and
         * retention (daemon/service.h); it comes only while the loop keeps
         * posting it. It should stay short: the outcomes wait behind it.
         * NULL: none. */
        void (*housekeeping)(void *ctx, struct store *store, unsigned share, tg_wall_ms wall,
                             bool lost);
        void *hook_ctx;
        /* Asked once a second on the loop's thread: true when the provider's
         * credential files are to be read again (a SIGHUP reload); the loop
         * then re-reads them between two calls (exit_env_reload_credentials:
         * calls already open keep the old ones). NULL: never. */
        bool (*credentials_due)(void *ctx);
        /* Several accounts (dispatcher_run): the ones this process serves,
         * bit i for the config's account i (empty: every one), and the most
         * it owns at once (0: no limit; config's dispatch.max_accounts). */
        struct tg_account_set accounts_mask;
        unsigned max_accounts;
};

struct dispatcher;

/* This dispatcher's part of the account: starts_per_second / exit.shares
 * and max_in_flight / exit.shares (at least one call). */
void dispatcher_share_config(const struct tg_config *config, struct pacer_config *ret_share);

/* A dispatcher over `env` (borrowed: it must outlive the dispatcher) with
 * one exit: `config` (borrowed, as long) on env's store. 0 or a TG_E* code;
 * free with dispatcher_free() (accepts NULL). */
int dispatcher_new(const struct tg_config *config, const struct dispatcher_options *options,
                   const struct exit_env *env, struct dispatcher **ret_dispatcher);

/* One exit of a loop: its config (its quota, cap, holds and policy) and its
 * store, both borrowed and outliving the dispatcher. store NULL: env's
 * store (and env's outcome store); else outcome_store is its second
 * connection for outcomes, or NULL. */
struct dispatcher_exit {
        const struct tg_config *config;
        struct store *store;
        struct store *outcome_store;
        /* A spare (docs/design.md, "Orphaned shares"): a further share of
         * the account that exit `primary` (an earlier one of the list, not
         * a spare) serves. It tries for a share only while its primary
         * serves, takes only an orphaned one (no live holder, no standby
         * wanting it), and hands it back when a standby wants one. */
        bool spare;
        unsigned primary;
};

/* A dispatcher over `env` serving n exits (1..EXIT_MAX, exit.h) in one
 * loop, on env's one clock and transport; exit i is the i-th of the list.
 * As dispatcher_new otherwise. */
int dispatcher_new_exits(const struct dispatcher_exit *exits, unsigned n,
                         const struct dispatcher_options *options, const struct exit_env *env,
                         struct dispatcher **ret_dispatcher);
/* Gives ownership up (the store stays open: it is the env's). */
void dispatcher_free(struct dispatcher *dispatcher);

/* Each exit becomes an owner (ownership_acquire) and takes over, in the
 * list's order. 0; 1 (stopped while waiting); 3 (--no-wait and another
 * owner); a negative code (logged): the first exit's that was not 0. */
int dispatcher_open(struct dispatcher *dispatcher);

/* One turn of the loop: reads the clock once, settles every finished call,
 * does the once-a-second housekeeping, starts at most one call, then waits
 * for I/O until the next thing that can happen. Returns 0 to go on, 1 when
 * the loop is over (a stop was asked for and every call has settled, or the
 * exit was lost and could not be taken again). */
int dispatcher_turn(struct dispatcher *dispatcher);

/* True when an exit was lost (fenced, lock gone) and not taken again. */
bool dispatcher_lost(const struct dispatcher *dispatcher);

/* The daemon's dispatcher: the real environment, open, turns until the end.
 * An exit per account served, then a spare per further share of each account
 * split into shares (exit.shares - 1 each, within EXIT_MAX; each on store
 * connections and a transport lane of its own). Returns 0 on a clean stop, 3
 * when --no-wait found another owner, 1 on a fatal error (logged). */
int dispatcher_run(const struct tg_config *config, const struct dispatcher_options *options);

#endif
