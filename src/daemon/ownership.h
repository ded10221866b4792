/*
 * ownership — how a dispatcher comes to own the exit (or a share of it) and
 * what it does first (DESIGN.md, "Ownership of the exit"): take a free share
 * of the account, or wait as a standby while every share is held (unless
 * --no-wait); refuse to run beside a dispatcher of another split; after a
 * takeover, wait out one full call timeout (the previous owner's calls may
 * still be open at the provider), plus the share's spacing (its last request
 * may reach the wire as late as its timeout) and OWNERSHIP_FRESH_NS (a
 * previous owner that lost its lock alive may hand calls over until its
 * check is stale), and turn the previous owner's in_flight operations into
 * unknown, to be reconciled. A dispatcher that lost its lock
 * (a database restart) rejoins the same way under a new epoch.
 *
 * Every wait goes through the exit's environment and ends early when a stop
 * is asked for.
 */
#ifndef TG_OWNERSHIP_H
#define TG_OWNERSHIP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/policy.h"
#include "core/share_want.h"
#include "daemon/exit_env.h"
#include "store/store.h"

/* An owner hands a call over only within this long of a check that its
 * lock is still held (the dispatcher checks once a second): a lock lost under
 * a live owner (a database session gone) stops its starts within this long,
 * claims made ahead included. A new owner's takeover wait adds it, so that
 * the previous owner's last start comes, and its call ends, before the new
 * owner sends anything. */
#define OWNERSHIP_FRESH_NS (1500 * TG_NS_PER_MS)

struct ownership {
        /* in: set by the caller, kept for the owner's life */
        const struct exit_env *env; /* its clocks and waits */
        struct store *store;        /* the exit's store (borrowed) */
        struct store_split split;   /* the account's, as configured */
        int64_t provider_timeout_ms;
        /* the share's spacing between starts: the previous owner's last
         * start may be this recent, and a new owner starts with an empty
         * pacer */
        tg_mono_ns spacing_ns;
        const struct policy_config *policy;
        bool no_wait;
        /* A further share of an account this process already owns a share
         * of (docs/design.md, "Orphaned shares"): it takes a share that no
         * live process holds, never one a standby wants (the split's
         * want_seq moved lately), quietly (no standby line, no standby
         * flag, no want of its own, never no_wait), and tries once a
         * second, the first time 10 s after it first looked. */
        bool spare;
        volatile sig_atomic_t *stop;    /* set by a signal handler */
        volatile sig_atomic_t *standby; /* out: 1 while waiting as a standby (may be NULL) */
        /* out: the share held and the epoch of its acquisition */
        unsigned share;
        int64_t epoch;
        /* ownership_step()'s own: where it is, and when it may go on */
        enum { OWNERSHIP_ACQUIRE, OWNERSHIP_TAKEOVER, OWNERSHIP_OWNED } phase;
        tg_mono_ns next;
        bool said; /* "standby" logged for this wait */
        /* a standby's wish as this owner sees it (the spare reads it before
         * each try; its exit, once a second while it serves) */
        struct share_want want;
        tg_mono_ns want_next;  /* a standby (not a spare): when to say it again */
        tg_mono_ns spare_from; /* a spare: its first try (0: not looked yet) */
};

/* Becomes an owner, waiting as a standby unless no_wait. 0; 1 (stopped while
 * waiting); 3 (no_wait and another owner); TG_ECONFLICT (another split is in
 * force, logged); or another negative code. */
int ownership_acquire(struct ownership *o);

/* After acquire: the takeover wait (when the exit had an owner before) and
 * recovery of the previous owner's in_flight operations. 0, 1 (stopped while
 * waiting) or a negative code. */
int ownership_take_over(struct ownership *o);

/* The lock was lost and every open call has settled: release, wait as a
 * standby would, acquire and take over again, riding out a store that
 * cannot answer now. 0, 1 (stopped), or the failure of acquire/take_over. */
int ownership_rejoin(struct ownership *o);

/* The same without ever waiting, for a loop that serves other exits
 * meanwhile (several accounts in one process): ownership_begin() starts an
 * acquisition (a first one, or a rejoin once the lock was released), then
 * ownership_step() at every turn does what is due at `now` and returns 0
 * (owned: acquired, the takeover wait over, recovered), 2 (not yet: call
 * again at o->next or later), 1 (stop asked), 3 (no_wait and another owner),
 * or a negative code (TG_ECONFLICT, a store error that is not transient).
 * A standby tries again every 250 ms, a store that cannot answer every
 * second, as the blocking ones do. Each step is at most one short store
 * call. */
void ownership_begin(struct ownership *o, tg_mono_ns now);
int ownership_step(struct ownership *o, tg_mono_ns now);

/* Waits up to ns through the environment; false when a stop was asked for
 * meanwhile. */
bool ownership_wait(const struct ownership *o, tg_mono_ns ns);

#endif
