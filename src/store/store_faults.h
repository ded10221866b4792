/*
 * store_faults — a seam at the store's backend boundary for fault injection
 * and observation: tollgate-sim (src/sim) wraps each simulated process's
 * store handle to make its transactions fail as a busy database, a failing
 * disk or a lost connection would, to kill the process between two of them,
 * and to see when an owner epoch is handed out.
 *
 * The wrap replaces the handle's table of backend primitives with a copy
 * whose transaction and epoch primitives call the hooks around the
 * backend's own: nothing of the store's neutral half changes, and a handle
 * never wrapped (every handle of the daemon and the commands) runs exactly
 * the code it ran before, at no cost.
 *
 * A lost COMMIT is played as the MariaDB backend meets it: the transaction
 * committed, and a body that re-checks (every transaction of the neutral
 * half does) runs again in a new transaction told that the COMMIT's outcome
 * is unknown; any other gets TG_EIO. On SQLite this runs the stores'
 * re-check paths that otherwise only a MariaDB server restart reaches.
 */
#ifndef TG_STORE_FAULTS_H
#define TG_STORE_FAULTS_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

enum store_fault {
        STORE_FAULT_NONE,        /* the transaction runs */
        STORE_FAULT_BUSY,        /* it never starts: TG_EBUSY (locked past the busy timeout) */
        STORE_FAULT_IO,          /* it never starts: TG_EIO (a disk error, a server gone) */
        STORE_FAULT_LOST_COMMIT, /* it commits, and the answer is lost (see above) */
};

struct store_fault_hooks {
        /* Before every transaction of the handle: what happens to it.
         * write: it may write. NULL: nothing ever fails. */
        enum store_fault (*before)(void *ctx, bool write);
        /* After it: whether it committed (a lost COMMIT did) and what the
         * caller gets. May be NULL. */
        void (*after)(void *ctx, bool write, bool committed, int result);
        /* Inside a transaction: the handle bumped the owner epoch to `epoch`
         * (it holds once that transaction commits). May be NULL. */
        void (*epoch_bumped)(void *ctx, int64_t epoch);
        void *ctx; /* the caller's, handed to every hook */
};

/* Wraps `store` (an open handle) with hooks (copied); the wrap lives until
 * store_close(). A handle is wrapped at most once: TG_EINVAL for a second
 * wrap. 0, TG_EINVAL, TG_ENOMEM. */
int store_faults_wrap(struct store *store, const struct store_fault_hooks *hooks);

/* The handle's ownership locks are gone under it, as when the database
 * session that held them is lost: released now, while the handle still
 * believes it owns its share until it checks (store_owner_check). */
void store_faults_drop_locks(struct store *store);

#endif
