/*
 * store_backend — what a store backend implements: a narrow set of
 * primitives (transactions, rows, picks, locks, pages), over which the
 * backend-neutral half of the store (store.c, store_exit.c, store_actions.c, store_owner.c,
 * store_read.c) writes every operation of store.h ONCE: accept, claim,
 * settle, recovery, the sweeps, operator actions, share acquisition, the
 * paging walks. Private to src/store: nothing outside this folder includes it
 * (but the store contract test, which drives these primitives directly to
 * check the backends' SQL predicates against core/policy.h).
 *
 * A backend allocates its own handle with `struct store` as its FIRST member
 * and hands it back from its open function. Every primitive except tx(),
 * lock_*(), set_busy_timeout() and close() runs inside a transaction opened
 * by tx(); a backend may assume its arguments were checked by the neutral
 * layer (non-NULL, enums in range, strings terminated within their bounds).
 * Primitives return 0 or a TG_E* code and write ret_* outputs only on
 * success; no backend code, SQL or message leaves them.
 *
 * What a third backend (PostgreSQL, say) implements is exactly this table:
 * see docs/architecture.md, "Adding a backend".
 *
 * On-disk names of states, kinds, classes and manual reasons are fixed in
 * store.c, not borrowed from the core's display names: they are part of the
 * stored format (an outbox writer inserts 'pending'), versioned with the
 * schema, and must not change when a log text does.
 */
#ifndef TG_STORE_BACKEND_H
#define TG_STORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "store/store_events.h"

#define STORE_URL_MAX    512
#define STORE_UNKEPT_MAX 1024

struct store_ops;
struct wake;

struct store {
        const struct store_ops *ops;
        char url_masked[STORE_URL_MAX]; /* filled by store.c after open */
        /* The provider account this handle serves as an exit
         * (store_use_account(); TG_ACCOUNT_DEFAULT from open): the backends'
         * picks, sweeps, recovery, shares, epochs, split, hold and samples
         * are this account's. A valid name, so a backend may print it into
         * a lock's name as it is. */
        char account[TG_ACCOUNT_NAME_MAX + 1];
        /* Exit ownership, kept by store_owner.c: the share this handle holds
         * and the epoch of that acquisition (0: not an owner). The backend
         * keeps the lock itself (a file descriptor, a database session). */
        int64_t epoch;
        unsigned share;
        /* The backlog of the last sample this handle wrote (store_sample_put):
         * counted again while it is small, else when next_count comes (the
         * count walks an index that grows with the backlog). */
        unsigned backlog[OP_STATE_COUNT];
        bool backlog_known;
        int64_t backlog_next_count; /* monotonic ns */
        /* What of the store's promises this server does not keep ("": all
         * kept), one line for people, written by the backend's open
         * (store_unkept()). */
        char unkept[STORE_UNKEPT_MAX];
};

/* ---- transactions ------------------------------------------------------- */

enum store_tx {
        STORE_TX_READ,    /* reads only */
        STORE_TX_WRITE,   /* writes, durable at commit (acceptances, attempts, audit) */
        STORE_TX_OUTCOME, /* writes an outcome: may commit with weaker durability
                           * (SQLite synchronous=NORMAL): if a power loss takes it
                           * back, the operation is in_flight again and the next
                           * owner reconciles it as unknown with the same key.
                           * Also the exit's samples: operational figures a power
                           * loss may take the last second of */
};

enum {
        /* fn may run again after a COMMIT whose outcome is unknown (a lost
         * server connection): it asks tx_commit_unknown() and checks what
         * the lost COMMIT did. Without it such an outcome is returned as
         * TG_EIO. */
        STORE_TX_RECHECKS = 1,
};

/* The body of a transaction. It may run more than once (a deadlock, a lock
 * wait timeout, a reconnect before COMMIT was sent): it must reset its
 * outputs at the start and keep nothing else between runs. */
typedef int (*store_tx_fn)(struct store *store, void *ctx);

/* ---- picks and batches: the SQL forms of core/policy.h's predicates ------ */

/* The oldest-accepted operation that policy_is_due() says is due for the
 * group (op_pick, locked for this transaction; a row another transaction
 * holds is skipped, never waited for). */
struct store_pick {
        enum store_group group;
        tg_wall_ms now;
        int64_t key_retention_ms; /* > 0; the neutral layer maps "off" to a year */
        bool queries_allowed;
        bool posts_barred; /* the refund sub-quota is spent: queries only */
};

/* The again group's pick takes a mask of the kinds of call allowed: 1
 * queries, 2 POSTs (both: 3). */
static inline int64_t store_pick_kinds(const struct store_pick *p)
{
        return (p->queries_allowed ? 1 : 0) | (p->posts_barred ? 0 : 2);
}

enum store_batch_kind {
        /* policy_sweep()'s deadline half: the deadline event's source states,
         * 0 < deadline_at < now */
        STORE_BATCH_DEADLINE,
        /* its key half: policy_key_too_old(now, key_retention_ms) */
        STORE_BATCH_KEY_AGE,
        /* a new owner's recovery: in_flight, claimed under `share` before
         * `epoch`, or under a share >= `shares` (one the split no longer has) */
        STORE_BATCH_RECOVER,
        /* outbox rows not taken in yet: pending, attempt_limit = 0 */
        STORE_BATCH_OUTBOX,
};

struct store_batch {
        enum store_batch_kind kind;
        tg_wall_ms now;
        int64_t key_retention_ms;
        int64_t epoch;
        unsigned share, shares;
};

/* ---- pages: one walk (store_read.c), eight queries ---------------------------- */

enum store_page_kind {
        STORE_PAGE_CALLS,    /* calls of `account` ("": any) with id > cur_id, by id */
        STORE_PAGE_OP_CALLS, /* calls of op_id with id > cur_id, by id */
        STORE_PAGE_AUDIT,    /* audit rows of op_id with id > cur_id, by id */
        STORE_PAGE_STATE,    /* operations in `state` with id > cur_id, by id */
        STORE_PAGE_MANUAL,   /* manual operations with id > after_id, of `reason` (MANUAL_NONE:
                              * any), owned as `who` says (`assignee`), of
                              * `account` ("": any), after
                              * (cur_at, cur_id) by (accepted_at, id) */
        STORE_PAGE_SAMPLES,  /* samples after (cur_at, cur_share) by (at, share) */
        STORE_PAGE_REFUSALS, /* refusal seconds with at > cur_at, by at */
        /* account audit rows of `account` ("": every account) with id >
         * cur_id, by id */
        STORE_PAGE_ACCOUNT_AUDIT,
};

/* A page query and its cursor: the last row seen (the neutral walk moves it
 * after every page). Rows are struct call_record, audit_record, op_record,
 * exit_sample, refusal_second or account_audit_record by kind. */
struct store_page {
        enum store_page_kind kind;
        int64_t op_id;
        enum op_state state;
        enum manual_reason reason;
        enum store_assignee who;
        char assignee[TG_TEXT_MAX];
        char account[TG_ACCOUNT_NAME_MAX + 1];
        int64_t after_id;
        int64_t cur_id;
        int64_t cur_at;
        int64_t cur_share;
};

/* ---- locks ---------------------------------------------------------------- */

enum store_lock {
        STORE_LOCK_SPLIT, /* the acquirers' own lock, held while one picks its share */
        STORE_LOCK_SHARE, /* share k's owner lock (share 0: the one-owner lock) */
};

/* Counters kept by the neutral layer in the same transaction as the change
 * they count (store_op_put, the claim, store_prune). */
enum store_counter {
        STORE_COUNTER_SUCCEEDED, /* operations now in succeeded */
        STORE_COUNTER_REJECTED,  /* operations now in rejected */
        STORE_COUNTER_CALLS,     /* calls ever recorded */
        STORE_COUNTER_PRUNED_OPERATIONS,
        STORE_COUNTER_PRUNED_CALLS,
        STORE_COUNTER_EVENTS, /* events ever written (store_events.h) */
        STORE_COUNTER_COUNT
};

struct store_ops {
        const char *name; /* "sqlite", "mysql", "postgresql" */
        void (*close)(struct store *store);

        /* Runs fn in one transaction (begin, fn, commit; rolled back when fn
         * fails) with the backend's retry rules. Returns fn's code or TG_E*. */
        int (*tx)(struct store *store, enum store_tx kind, unsigned flags, store_tx_fn fn,
                  void *ctx);
        /* Inside fn: this run follows a COMMIT whose outcome is unknown. */
        bool (*tx_commit_unknown)(const struct store *store);

        /* operations: by operation_id (key != NULL) or row id; `lock` holds
         * the row for the transaction. TG_ENOTFOUND. */
        int (*op_get)(struct store *store, const char *key, int64_t id, bool lock,
                      struct op_record *ret_op);
        /* a new row from op (id ignored); TG_ECONFLICT when the key exists */
        int (*op_insert)(struct store *store, const struct op_record *op, int64_t *ret_id);
        /* every mutable column of op, by op->id (payload, accepted_at and
         * source never change) */
        int (*op_put)(struct store *store, const struct op_record *op);
        int (*op_pick)(struct store *store, const struct store_pick *pick, int64_t *ret_id);
        /* up to max rows of a batch query, locked; *ret_n rows in buf */
        int (*op_batch)(struct store *store, const struct store_batch *batch, unsigned max,
                        struct op_record *buf, unsigned *ret_n);
        /* earliest next_run_at of the again group's states (TG_WALL_NEVER if
         * none), and whether any operation is pending */
        int (*due_summary)(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending);

        /* the call log: a new row (call->id set), one by id (`lock`), the row
         * a claim wrote for (request_id, epoch), closing an open row
         * (TG_EFENCED unless exactly that open row changed) */
        int (*call_insert)(struct store *store, struct call_record *call);
        int (*call_get)(struct store *store, int64_t id, bool lock, struct call_record *ret_call);
        int (*call_find)(struct store *store, const char *request_id, int64_t epoch,
                         struct call_record *ret_call);
        int (*call_close)(struct store *store, const struct call_record *call);
        int (*audit_insert)(struct store *store, const struct audit_record *audit);

        /* ownership locks, held by the handle outside any transaction: take
         * (waiting at most wait_ms; TG_ELOCKED when another holds it), drop
         * (a lock not held is fine), drop_all, and whether the share lock
         * taken last is still ours (TG_ELOCKED if not). Taking a share lock
         * may leave the holder's pid in it for people to read. */
        int (*lock_take)(struct store *store, enum store_lock lock, unsigned share,
                         int64_t wait_ms);
        void (*lock_drop)(struct store *store, enum store_lock lock, unsigned share);
        void (*lock_drop_all)(struct store *store);
        int (*lock_held)(struct store *store);

        /* epochs and the split, inside a transaction: the newest epoch handed
         * out; the share whose current epoch is `epoch` (TG_EFENCED if none;
         * a backend with row locks holds that row shared, so a takeover of
         * the share waits for the transaction); a bump of the counter
         * recorded as `share`'s epoch; the split in force (TG_ENOTFOUND). */
        int (*epoch_read)(struct store *store, int64_t *ret_epoch);
        int (*epoch_share)(struct store *store, int64_t epoch, unsigned *ret_share);
        int (*epoch_bump)(struct store *store, unsigned share, int64_t *ret_epoch);
        int (*split_read)(struct store *store, struct store_split *ret_split);
        int (*split_put)(struct store *store, const struct store_split *split);
        int (*split_want)(struct store *store); /* want_seq + 1 (no row: nothing) */
        /* the account-wide hold: until when (wall ms; 0: never set), and
         * raising it (never lowering) */
        int (*hold_get)(struct store *store, tg_wall_ms *ret_until);
        int (*hold_raise)(struct store *store, tg_wall_ms until);

        /* reading, inside a transaction */
        int (*page)(struct store *store, const struct store_page *page, unsigned want, void *buf,
                    unsigned *ret_n);
        int (*stats)(struct store *store, struct store_stats *ret_stats);
        /* the open states' and manual's counts of one account (the named
         * one, not the handle's) into by_state, zeroed first by the caller */
        int (*backlog)(struct store *store, const char *account, uint64_t *by_state);
        /* one account's operations the provider reports pending and not
         * settled (store_provider_pending_sql()) */
        int (*provider_pending)(struct store *store, const char *account, uint64_t *ret_n);
        /* the ids of the account's operations whose refund_id is refund_id
         * (non-empty), lowest first, at most 2 (*ret_n of them): from the
         * index on (account, refund_id) */
        int (*op_find_refund)(struct store *store, const char *account, const char *refund_id,
                              int64_t ret_ids[2], unsigned *ret_n);
        int (*sample_put)(struct store *store, const struct exit_sample *sample,
                          tg_wall_ms keep_after);
        int (*sample_last)(struct store *store, struct exit_sample *ret_sample);
        /* adds n to the refusals of `second`, prunes before keep_after */
        int (*refusals_add)(struct store *store, tg_wall_ms second, unsigned n,
                            tg_wall_ms keep_after);

        /* lifecycle (store_life.c), inside a transaction: add delta to a
         * counter; the final operations of `state` before `before`, after the
         * cursor (at, id), that store_prune() may delete (no audit row, not
         * the newest operation, not the newest call's), in (updated_at, id)
         * order, at most max (ids and updated_at into buf); delete those
         * operations and their calls (the permit that lets the triggers pass
         * inserted and removed inside), *ret_calls: calls deleted */
        int (*counter_add)(struct store *store, enum store_counter counter, int64_t delta);
        int (*prune_pick)(struct store *store, enum op_state state, tg_wall_ms before,
                          int64_t after_at, int64_t after_id, unsigned max, int64_t *ret_ids,
                          int64_t *ret_at, unsigned *ret_n);
        int (*prune_delete)(struct store *store, const int64_t *ids, unsigned n, tg_wall_ms before,
                            uint64_t *ret_calls);
        /* outside a transaction, optional: the database file is no longer
         * the one opened (SQLite); a copy into a new file */
        bool (*moved)(struct store *store);
        int (*backup)(struct store *store, const char *path);

        /* optional (NULL: TG_EUNSUPPORTED) */
        int (*set_busy_timeout)(struct store *store, int64_t ms);
        /* The doorbell between processes, optional (NULL: the backend rings
         * no one, and store_listen() is TG_EUNSUPPORTED). bell_ring, inside a
         * write transaction: every listener of this database rings once that
         * transaction commits (new work; nothing rings for a rollback).
         * bell_listen, outside any transaction: from now until close, `bell`
         * (borrowed; it outlives the handle) rings whenever any process's
         * bell_ring commits, and once after the listener (re)connects (rings
         * it missed while away). It holds no transaction and never blocks the
         * caller: a backend listens on a connection and thread of its own. */
        int (*bell_ring)(struct store *store);
        int (*bell_listen)(struct store *store, struct wake *bell);
        /* outbox rows exist on this backend (an application shares its
         * database); without it store_outbox_intake() is TG_EUNSUPPORTED */
        bool has_outbox;

        /* the events' outbox (store_events.h), inside a transaction: a new
         * event row, its id taken while holding the events' counter row
         * (so ids grow with commit order); up to `want` events with id >
         * after_id by id that pass the filter (store_event_filter_sql()) and
         * are of `account` (NULL: of any), of operation row `op_id` (0: of
         * any) and, with `owner` (NULL: any), of operations it submitted or
         * without an owner; an event's delivery columns by id (TG_ENOTFOUND); up to
         * `max` events delivered before `before` (delivered_at), by id,
         * never the newest event (an id is never handed out again),
         * deleted, *ret_n of them */
        int (*event_insert)(struct store *store, const struct store_event *ev);
        int (*event_page)(struct store *store, int64_t after_id, enum store_event_filter filter,
                          const char *account, int64_t op_id, const char *owner, unsigned want,
                          struct store_event *buf, unsigned *ret_n);
        int (*event_delivery_put)(struct store *store, const struct store_event *ev);
        int (*event_prune)(struct store *store, tg_wall_ms before, unsigned max, unsigned *ret_n);

        /* run-time account controls (issue 26 §5), inside a transaction, of
         * the named account (not the handle's): what is in force
         * (TG_ENOTFOUND: never set); with `lock` (a write transaction) the
         * account's row is held until it ends, made first if missing, so
         * that two changes of one account are serialized; replacing it
         * (every column of *c); one row of the account audit trail (its id
         * ignored) */
        int (*controls_get)(struct store *store, const char *account, bool lock,
                            struct account_controls *ret_controls);
        int (*controls_put)(struct store *store, const char *account,
                            const struct account_controls *c);
        int (*account_audit_insert)(struct store *store, const struct account_audit_record *a);
};

/* The count of one account's operations the provider reports as accepted,
 * not final (core/policy.h, pending_since) that are still open
 * (store_open_states(): a manual one is counted as manual), as a statement
 * into dst: `index` the backend's index hint ("" for none), `account` the
 * account's placeholder. */
void store_provider_pending_sql(const char *index, const char *account, char *dst, size_t size);
/* The ids of an account's operations holding a refund id, lowest first, at
 * most 2 (op_find_refund): with index (a hint, or ""), the account's and
 * the refund id's placeholders. */
void store_find_refund_sql(const char *index, const char *account, const char *refund_id, char *dst,
                           size_t size);

/* A backend names its primitives <prefix>_<primitive> (store_sqlite_op_get,
 * store_mysql_op_get, ...), declared in its private header;
 * STORE_BACKEND_OPS(prefix) fills them into its struct store_ops. (The
 * declarations are written out in each header rather than made by a macro:
 * cppcheck's whole-program analysis cannot follow token-pasted names.) */
#define STORE_BACKEND_OPS(p)                                                                       \
        .tx = p##_tx, .tx_commit_unknown = p##_tx_commit_unknown, .op_get = p##_op_get,            \
        .op_insert = p##_op_insert, .op_put = p##_op_put, .op_pick = p##_op_pick,                  \
        .op_batch = p##_op_batch, .due_summary = p##_due_summary, .call_insert = p##_call_insert,  \
        .call_get = p##_call_get, .call_find = p##_call_find, .call_close = p##_call_close,        \
        .audit_insert = p##_audit_insert, .lock_take = p##_lock_take, .lock_drop = p##_lock_drop,  \
        .lock_drop_all = p##_lock_drop_all, .lock_held = p##_lock_held,                            \
        .epoch_read = p##_epoch_read, .epoch_share = p##_epoch_share,                              \
        .epoch_bump = p##_epoch_bump, .split_read = p##_split_read, .split_put = p##_split_put,    \
        .split_want = p##_split_want, .hold_get = p##_hold_get, .hold_raise = p##_hold_raise,      \
        .page = p##_page, .stats = p##_stats, .backlog = p##_backlog,                              \
        .provider_pending = p##_provider_pending, .op_find_refund = p##_op_find_refund,            \
        .sample_put = p##_sample_put, .sample_last = p##_sample_last,                              \
        .refusals_add = p##_refusals_add, .event_insert = p##_event_insert,                        \
        .event_page = p##_event_page, .event_delivery_put = p##_event_delivery_put,                \
        .event_prune = p##_event_prune, .controls_get = p##_controls_get,                          \
        .controls_put = p##_controls_put, .account_audit_insert = p##_account_audit_insert

/* Backend constructors. `where` is the url without its scheme ("PATH" for
 * sqlite://PATH; "user:pass@host:port/db" for mysql://); opts as for
 * store_open_ex() (never NULL here). 0 or a TG_E* code; *ret_store is freed
 * with its ops->close. */
int store_sqlite_open(const char *where, const struct store_open_opts *opts,
                      struct store **ret_store);
#ifdef TG_HAVE_MARIADB
int store_mysql_open(const char *where, const struct store_open_opts *opts,
                     struct store **ret_store);
#endif
#ifdef TG_HAVE_PG
/* where: "[user[:pass]@]host[:port]/db[?...]" of postgresql:// (store_pg.c) */
int store_pg_open(const char *where, const struct store_open_opts *opts, struct store **ret_store);
#endif

/* ---- shared helpers (store.c) ---------------------------------------- */

/* Stored names: op_state_name(), tg_call_kind_name(), tg_class_name(),
 * manual_reason_name() and their _parse() inverses (core/names.h). */

/* `state IN ('a','b')` for a set of POLICY_STATE_BIT()s, in state order, into
 * dst: the state lists of the backends' picks and batches are made from the
 * transition table (core/policy.h), never written by hand. */
void store_state_list_sql(unsigned states, char *dst, size_t size);

/* The counter of a state (enum store_counter), or -1 when the state is not
 * counted: its rows are counted from the index (store_life.c). */
int store_state_counter(enum op_state state);

/* The states whose rows are counted from the index (those without a
 * counter), and the states open for the exit (neither final nor manual),
 * as sets of POLICY_STATE_BIT()s. */
unsigned store_indexed_states(void);
unsigned store_open_states(void);

/* `each` once per state of `states` (in state order), every '@' in it
 * replaced by the state's word, joined by " UNION ALL ", into dst: the
 * backends' per-state index probes are made from core/names.h, never
 * written by hand. 0, or TG_EFULL when dst is too small. */
int store_union_sql(unsigned states, const char *each, char *dst, size_t size);

/* `'a', 'b', ...`: the names of the counters of the counted states and of
 * the prune totals, for the stats' `name IN (...)`. 0 or TG_EFULL. */
int store_counter_list_sql(char *dst, size_t size);

/* Argument checks of the neutral layer: a string of 1..max bytes terminated
 * within max+1 (text), a string of 0..size-1 bytes in a buffer of `size`
 * (buf). */
bool store_text_ok(const char *s, size_t max);
bool store_buf_ok(const char *s, size_t size);

/* The stored name of a counter ("succeeded", "calls", ...). */
const char *store_counter_text(enum store_counter counter);

/* Inside a transaction: writes op `after` (op_put), whose row was `before`,
 * and moves the state counters when it enters or leaves a counted state
 * (store_life.c). Every change of an operation's state goes through it. */
int store_op_put(struct store *store, const struct op_record *before,
                 const struct op_record *after);

/* Inside a write transaction that made work due: every process listening
 * on this store rings when it commits (ops->bell_ring; 0 when the backend
 * has none). */
int store_bell_ring(struct store *store);

/* Inside a transaction: the event announcing the change of op `before` into
 * `after` (store_events.c; store_op_put() calls it). */
int store_event_add(struct store *store, const struct op_record *before,
                    const struct op_record *after);

/* The SQL condition of an event filter ("delivery IN (0, 2)", or "1 = 1"),
 * the same on every backend (store_events.c). */
const char *store_event_filter_sql(enum store_event_filter filter);

/* Inside a transaction: one audit row (store_exit.c, store_actions.c). */
int store_audit_add(struct store *store, int64_t op_id, tg_wall_ms at, const char *action,
                    const char *operator_name, const char *reason, const char *detail);

/* The account a request names: its own, or TG_ACCOUNT_DEFAULT for "" (a
 * row a backend writes always names one). */
const char *store_req_account(const struct refund_request *req);

/* Bounded copy: at most dst_size-1 bytes of src, always terminated. */
void store_copy_text(char *dst, size_t dst_size, const char *src);

/* Two splits are the same split (shares, in-flight, and the rate to a part
 * in 1e9). */
bool store_split_same(const struct store_split *a, const struct store_split *b);

#endif
