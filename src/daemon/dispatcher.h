/*
 * dispatcher — the exit. One loop, one owner: it takes the store's owner lock
 * (waiting as a standby while another process holds it), waits out one call
 * timeout after a takeover, turns the old owner's in_flight rows into
 * unknown, and then starts calls only when the pacer's slot has come AND
 * in-flight is under the cap — claiming (and committing) each attempt right
 * before handing it to the transport. Outcomes are classified, decided by the
 * policy and settled in short transactions. No transaction or connection is
 * held while it waits.
 */
#ifndef TG_DISPATCHER_H
#define TG_DISPATCHER_H

#include <signal.h>
#include <stdbool.h>

#include "daemon/config.h"

struct dispatcher_options {
        bool no_wait;                   /* another owner: exit instead of standby */
        volatile sig_atomic_t *stop;    /* set by a signal handler: drain and exit */
        volatile sig_atomic_t *standby; /* out: 1 while waiting as standby (may be NULL) */
};

/* Runs until *stop is set (then stops starting, waits for open calls up to
 * their timeout, settles them and releases ownership). Returns 0 on a clean
 * stop, 3 when --no-wait found another owner, 1 on a fatal error (logged). */
int dispatcher_run(const struct tg_config *config, const struct dispatcher_options *options);

#endif
