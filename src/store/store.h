/*
 * store — the durable backlog, the call log, the audit log and exit
 * ownership, behind one interface with two backends: SQLite (embedded
 * default, sqlite://PATH) and MariaDB (mysql://user:pass@host:port/db).
 * No SQL and no backend error code leaves this interface.
 *
 * Invariants every backend keeps:
 *   - every function is one short transaction, committed before it returns;
 *     no transaction (and, for servers, no checked-out connection) is held
 *     between calls, so nothing is held while the exit waits for a slot or
 *     a reply;
 *   - store_accept commits before the caller answers 202;
 *   - store_claim records the attempt ("sent, outcome unknown") and commits
 *     BEFORE the caller hands the request to the transport; a crash after it
 *     leaves the operation in_flight, which a new owner turns into unknown;
 *   - claims and settles carry the owner epoch and are refused (TG_EFENCED)
 *     once a newer owner has taken the exit (with shares: the same share);
 *   - one operation keeps one idempotency key (its operation_id) forever;
 *     nothing here deletes an operation, a call or an audit row, but
 *     store_prune(): final operations past retention with their calls, never
 *     an operation with an audit trail, never an audit row (docs/design.md,
 *     "Retention").
 *
 * Thread use: one struct store per thread.
 */
#ifndef TG_STORE_H
#define TG_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/classify.h"
#include "core/operation.h"
#include "core/policy.h"
#include "core/tg_time.h"

struct store;

/* One row of the call log: one call that reached the transport. */
struct call_record {
        int64_t id;
        int64_t op_id; /* op_record.id */
        char operation_id[TG_OP_ID_MAX + 1];
        enum tg_call_kind kind;
        unsigned attempt; /* POST number (1..), or query number for queries */
        char request_id[TG_REQUEST_ID_MAX + 1];
        int64_t epoch;
        unsigned share; /* of the account quota, the claim's */
        /* the start: when the request went on the wire (the pre-request
         * hook), or, for a call never sent, its slot (when it was to go) */
        tg_mono_ns start_mono;
        tg_wall_ms start_wall;
        /* when it was handed to the transport, written when the call ends
         * (the connect took start - handoff): 0 until then, and for good
         * when the claim was given back unsent (store_call_released); -1 in
         * rows logged before tollgate kept it */
        tg_mono_ns handoff_mono;
        tg_wall_ms handoff_wall;
        unsigned in_flight_at_start; /* calls open including this one */
        bool ended;                  /* false: sent, outcome unknown */
        tg_mono_ns end_mono;
        tg_wall_ms end_wall;
        bool sent; /* bytes left (transport said so) */
        enum tg_class cls;
        int http_status;
        int64_t latency_us;
        char error[TG_TEXT_MAX];
        /* W3C trace context of the call: the operation's trace id and the
         * call's own span id (its traceparent's parent id at the provider);
         * "" for calls logged before tollgate kept them. */
        char trace_id[TG_TRACE_ID_MAX + 1];
        char span_id[TG_SPAN_ID_MAX + 1];
};

/* A claim made ahead of its slot and given back before it reached the
 * transport (store_release): a row of the call log that is not a call. */
static inline bool store_call_released(const struct call_record *c)
{
        return c->ended && !c->sent && c->handoff_mono == 0;
}

/* Opens (creating and migrating as needed) the store named by url.
 * Returns 0, TG_EINVAL (bad url), TG_EUNSUPPORTED (backend not built),
 * TG_ESTORE (not a tollgate store, or a corrupted one), TG_EIO, -ENOSPC (the
 * disk is full), -EROFS (SQLite: the file or its folder cannot be written).
 * *ret_store is owned by the caller: store_close(). */
int store_open(const char *url, struct store **ret_store);

/* Every function here may also fail with what the store says about its
 * disk or its server: TG_EBUSY (locked or busy), TG_EIO (an I/O error, a
 * lost connection), -ENOSPC (no space left), -EROFS (SQLite: the file
 * became read-only). Those may pass without anyone touching tollgate (a
 * restart of the database, space freed): true for them, so that a caller
 * waits and asks again instead of giving up. */
bool store_error_transient(int code);
/* Accepts NULL. */
void store_close(struct store *store);

/* store_open() with options: `existing` refuses to create what is not
 * there (a read-only command must not leave an empty store behind a typo;
 * it may also read a store it cannot write, which a writer refuses: -EROFS):
 * TG_ENOTFOUND ("no store at /abs/path"); `err` (may be NULL) receives one
 * line saying what went wrong, for people: the file, or for MariaDB the
 * host, port, database, user and the server's own reason, the password
 * masked. */
struct store_open_opts {
        bool existing;
        /* SQLite: read the whole file (PRAGMA quick_check) and refuse a
         * corrupted one (TG_ESTORE, err says so); a daemon does it once at
         * start. MariaDB: nothing (InnoDB checks its pages itself). */
        bool check;
        char *err;
        size_t err_size;
};
int store_open_ex(const char *url, const struct store_open_opts *opts, struct store **ret_store);

/* The backend name ("sqlite" or "mysql"), and the url with any password
 * masked ("mysql://user:***@host/db"), for logs. Both live as long as the
 * store. */
const char *store_backend(const struct store *store);
const char *store_url(const struct store *store);

/* ---- accounts ---------------------------------------------------------- */

/* Every operation belongs to one provider account (refund_request.account)
 * for life. A handle serves one account as an exit: its claims, the sweeps,
 * a new owner's recovery, ownership (shares, epochs, the split), the hold
 * and the samples are that account's, and its indexes lead with the
 * account, so one account's backlog never slows another's claims. A new
 * handle serves TG_ACCOUNT_DEFAULT (single-account deployments keep their
 * lock names). Intake, reads by operation and the operators' actions see
 * every account. 0, TG_EINVAL (not an account name), TG_ESTATE (the handle
 * owns a share now: ownership is per account, release it first). */
int store_use_account(struct store *store, const char *account);
/* The account the handle serves; lives as long as the store. */
const char *store_account(const struct store *store);

/* ---- run-time account controls (issue 26 §5) ------------------------------ */

/* An operator changes an account's rate, in-flight cap, or pauses it,
 * without a restart. The store keeps what is in force per account (so a
 * restart keeps it, and every dispatcher of the account reads the same), and
 * an append-only audit trail of every change, written in the change's own
 * transaction: a change is never in force without its audit row, nor the
 * other way round. Account names are [a-z0-9_-]{1,32}
 * (refund_account_name_ok()); any name may be set, configured or not. */
struct account_controls {
        double starts_per_second; /* 0: the config's */
        unsigned max_in_flight;   /* 0: the config's */
        bool paused;
        tg_wall_ms changed_at; /* 0: never changed */
        char changed_by[TG_TEXT_MAX];
};

/* The account's controls; an account never changed: all zero (0 returned).
 * TG_EINVAL (not an account name). One short read transaction. */
int store_controls_get(struct store *store, const char *account,
                       struct account_controls *ret_controls);

/* Replaces the account's controls with *next (its starts_per_second,
 * max_in_flight and paused; changed_at = now, changed_by = principal), and
 * appends an account audit row (action, principal, reason, at = now, detail
 * = JSON {"from":{"starts_per_second":..,"max_in_flight":..,"paused":..},
 * "to":{...}}) in the SAME write transaction, committed before it returns.
 * Concurrent sets of one account are serialized, so each row's "from" is
 * what the one before it set. *ret_prev (may be NULL): what was in force
 * before (all zero if never changed). TG_EINVAL, with nothing stored, on bad
 * input: account not [a-z0-9_-]{1,32}; a negative, NaN or infinite rate;
 * action empty or over 31 bytes; principal empty or over TG_TEXT_MAX-1
 * bytes; reason (NULL: "") over TG_TEXT_MAX-1 bytes. */
int store_controls_set(struct store *store, const char *account,
                       const struct account_controls *next, const char *action,
                       const char *principal, const char *reason, tg_wall_ms now,
                       struct account_controls *ret_prev);

/* One row of the account audit trail (append-only on every backend: the
 * store's triggers refuse its UPDATE and DELETE; no prune touches it). */
struct account_audit_record {
        int64_t id; /* grows with each row, across every account */
        char account[TG_ACCOUNT_NAME_MAX + 1];
        tg_wall_ms at;
        char action[32]; /* the caller's word: "set", "pause", "resume", ... */
        char principal[TG_TEXT_MAX];
        char reason[TG_TEXT_MAX];
        char detail[TG_TEXT_MAX]; /* the JSON of store_controls_set() */
};
typedef int (*store_account_audit_fn)(const struct account_audit_record *rec, void *userdata);

/* Account audit rows with id > after_id, oldest (lowest id) first, at most
 * limit; account NULL: every account. Walked in pages, each its own read
 * transaction; fn runs between them (it may call the store). A non-zero
 * return from fn stops the walk and is returned. TG_EINVAL (not an account
 * name, fn NULL). */
int store_list_account_audit(struct store *store, const char *account, int64_t after_id,
                             unsigned limit, store_account_audit_fn fn, void *userdata);

/* ---- intake ---------------------------------------------------------- */

/* Stores a new operation in state pending, or finds the existing one with the
 * same operation_id. New: *ret_created = true. Same id and same request:
 * *ret_created = false, *ret_op is the current record. Same id, other
 * request: TG_ECONFLICT (nothing stored). limits gives attempt_limit
 * (max_attempts), query_limit (max_queries) and deadline_at =
 * now + deadline_ms. Commits before returning. */
int store_accept(struct store *store, const struct refund_request *req, tg_wall_ms now,
                 const struct policy_config *limits, bool *ret_created, struct op_record *ret_op);

/* store_accept for up to a batch of refunds in ONE write transaction, in
 * order: each item's result is what store_accept would have said for it
 * (0 with created and op, or TG_ECONFLICT, nothing stored for it), and an
 * operation_id given twice is created by its first item and repeated (0,
 * not created) by the next. Any other failure is the call's, and then no
 * item is stored (the transaction rolled back; with a lost COMMIT answer,
 * rechecked as store_accept does) and the items' outputs mean nothing.
 * items and their requests are the caller's. Commits before returning. */
struct store_accept_item {
        const struct refund_request *req; /* in */
        int result;                       /* out: 0 or TG_ECONFLICT */
        bool created;                     /* out */
        struct op_record op;              /* out, when result is 0 */
};
int store_accept_batch(struct store *store, struct store_accept_item *items, size_t n,
                       tg_wall_ms now, const struct policy_config *limits);

/* 0, TG_ENOTFOUND. */
int store_get(struct store *store, const char *operation_id, struct op_record *ret_op);

/* ---- ownership --------------------------------------------------------- */

/* The account quota is split into shares (docs/design.md, "More than one
 * dispatcher"): share k of an N-share split may start starts_per_second / N
 * calls a second with max_in_flight / N open, so that N dispatchers together
 * never exceed the account. The store records the split in force; each
 * share is owned like the whole exit used to be: by a lock held for the
 * owner's life (share 0 is the owner lock of a one-share exit; share k > 0
 * is SQLite "<db>.share<k>", MySQL GET_LOCK('tollgate_share_<db>_<k>')),
 * and by an epoch. Epochs come from one counter for every share, so an epoch
 * names one acquisition of one share; claims record the share they were
 * made under. */
#define STORE_SHARES_MAX 64

struct store_split {
        unsigned shares;          /* 1..STORE_SHARES_MAX */
        double starts_per_second; /* the ACCOUNT's limit, > 0 */
        unsigned max_in_flight;   /* the account's, >= shares */
        /* read only (never compared nor written by a put): how many times a
         * standby said it wants a share of the account (store_share_want) */
        int64_t want_seq;
};

/* Tries to take a free share of `split` without waiting, for the life of the
 * struct store (or until store_owner_release()). The first dispatcher
 * records the split. When the recorded split differs from `split`, it is
 * replaced only if no share of it is held (every dispatcher under it is
 * gone); otherwise TG_ECONFLICT and nothing changes (store_split_get() says
 * what is in force). One-share splits never conflict with each other: the
 * owner lock makes a second one-share dispatcher a standby (TG_ELOCKED), as
 * before shares existed, and the holder's rate is recorded. Acquirers are
 * serialized by a short lock of their own,
 * so a split is never replaced under a live share. On success bumps the
 * epoch counter, records it as the share's epoch, and returns share and
 * epoch. TG_ELOCKED when every share is held (a standby waits and tries
 * again); TG_EBUSY/TG_EIO when the store cannot answer now. */
int store_share_acquire(struct store *store, const struct store_split *split, unsigned *ret_share,
                        int64_t *ret_epoch);
/* The split in force; TG_ENOTFOUND when none was ever recorded. */
int store_split_get(struct store *store, struct store_split *ret_split);
/* A standby of this account says it wants a share (docs/design.md, "Orphaned
 * shares"): one more on the split's want_seq, which every owner reads once a
 * second. A process holding two shares of the account hands one back while
 * the count keeps moving, and takes no orphaned share meanwhile. No split
 * recorded: nothing to do (0). */
int store_share_want(struct store *store);

/* Tries to become the exit's only owner: share 0 of a one-share split,
 * without recording a rate (the split's rate, if any, is kept). SQLite takes
 * an exclusive lock on a file beside the database for the life of the
 * struct store (closing other descriptors of that file does not drop it);
 * MySQL takes GET_LOCK on a dedicated connection. On success bumps the epoch
 * in the store and returns it. TG_ELOCKED while another process owns it;
 * TG_ECONFLICT while a split of more than one share is in force. */
int store_owner_acquire(struct store *store, int64_t *ret_epoch);
/* Still the owner of our share? (MySQL: the lock connection is alive.) 0 or
 * TG_ELOCKED. */
int store_owner_check(struct store *store);
/* Gives ownership (our share) up. Safe to call when not the owner. */
void store_owner_release(struct store *store);
/* A provider-wide hold (429/503 with Retry-After) that one share saw holds
 * every share of the account: the share raises the account's hold to
 * `until` (never lowers it), and every share reads it before its next
 * start. *ret_until is 0 when no hold was ever set. */
int store_hold_raise(struct store *store, tg_wall_ms until);
int store_hold_get(struct store *store, tg_wall_ms *ret_until);

/* The newest epoch handed out by the store, to any share (0 if never). */
int store_owner_epoch(struct store *store, int64_t *ret_epoch);

/* A new owner's recovery: every operation in_flight under an epoch older
 * than `epoch` AND claimed under the same share as `epoch` (or under a share
 * the split in force no longer has) becomes what policy_after_takeover()
 * says (unknown, due now; or manual past its deadline), and its open call
 * rows are closed as "outcome unknown (owner lost)". Operations in flight
 * under other live shares are not touched. *ret_count: operations changed. */
int store_recover(struct store *store, int64_t epoch, const struct policy_config *config,
                  tg_wall_ms now, unsigned *ret_count);

/* ---- the exit ---------------------------------------------------------- */

/* The exit's two groups (core/policy.h). */
enum store_group {
        STORE_GROUP_FIRST = POLICY_GROUP_FIRST, /* pending */
        STORE_GROUP_AGAIN = POLICY_GROUP_AGAIN, /* due retry_wait, unknown (query), re-send */
};

struct claim_args {
        enum store_group group;
        int64_t epoch;
        tg_wall_ms now;
        tg_mono_ns start_mono; /* when it is handed to the transport */
        unsigned in_flight_at_start;
        char request_id[TG_REQUEST_ID_MAX + 1];
        /* Never claimed: an operation past its deadline, or a re-send whose
         * key is at least this old (0: no key-age check). The sweep moves
         * them to manual. */
        int64_t key_retention_ms;
        /* The query sub-quota is spent: the again group skips unknowns (a
         * query) and may only yield a re-send. */
        bool no_queries;
        /* The refund sub-quota is spent: no POST is claimed (the first
         * group yields nothing, the again group only a query). */
        bool no_posts;
        /* The call's span id (16 hex, never all zeros), and the traceparent
         * an operation without one (an outbox row, a row older than trace
         * context) gets at this claim and keeps: minted by the caller with
         * the request id. "" for neither. */
        char span_id[TG_SPAN_ID_MAX + 1];
        char traceparent_new[TG_TRACEPARENT_MAX + 1];
};

/* One short transaction: picks the oldest-accepted operation of the group
 * that policy_is_due() says is due, applies policy_claim() under `epoch` (and
 * the share it names), and inserts the call row as "sent, outcome unknown".
 * Commits before returning: record attempt before send.
 * Returns 0, TG_ENOTFOUND (nothing due in the group), TG_EFENCED (a newer
 * owner exists). */
int store_claim(struct store *store, const struct claim_args *args, struct op_record *ret_op,
                struct call_record *ret_call);

/* Up to max claims in ONE transaction (group commit), the groups taking
 * turns from *turn as single claims would (an empty group yields its turn):
 * args[i] carries claim i's request id (and the same epoch for all). Commits
 * before returning: record attempt before send, for every one. 0 with
 * *ret_n >= 1 claims in ret_ops/ret_calls and *turn the group whose turn is
 * next; TG_ENOTFOUND (nothing due), TG_EFENCED. */
int store_claim_batch(struct store *store, const struct claim_args *args, unsigned max,
                      enum store_group *turn, struct op_record *ret_ops,
                      struct call_record *ret_calls, unsigned *ret_n);

/* A claim made ahead of its slot, given back before it reached the
 * transport (policy_release()): the operation is as the claim found it, the
 * attempt not counted, and the call row is closed as never sent ("released
 * before send: <why>"). TG_EFENCED if the operation or call is no longer
 * ours (nothing changed). */
int store_release(struct store *store, int64_t epoch, int64_t op_id, int64_t call_id,
                  tg_mono_ns now_mono, tg_wall_ms now, const char *why);

struct settle_args {
        int64_t call_id;
        int64_t op_id;
        int64_t epoch;
        bool sent;
        enum tg_class cls;
        int http_status;
        tg_mono_ns end_mono;
        tg_wall_ms now;
        int64_t latency_us;
        char error[TG_TEXT_MAX];
        char refund_id[128];
        /* When the request was handed to the transport, a moment after the
         * claim committed, and when it went on the wire (0: never sent): the
         * call log's start becomes the wire time (else the hand-off), and
         * keeps the hand-off beside it (0: keep the claim's). */
        tg_mono_ns handoff_mono;
        tg_wall_ms handoff_wall;
        tg_mono_ns sent_mono;
        tg_wall_ms sent_wall;
        /* a call never sent: the moment it was planned to go on the wire
         * (it was handed over a little ahead), its start in the call log
         * (0: the hand-off) */
        tg_mono_ns planned_mono;
        tg_wall_ms planned_wall;
        /* calls open when it was handed over, this one included (0: keep
         * the claim's count: a claim is made ahead of its start) */
        unsigned in_flight_at_start;
        struct policy_decision decision;
};

/* One short transaction: closes the call row and applies the decision
 * (policy_end_call()). TG_EFENCED if the operation is no longer in_flight
 * under this epoch (nothing changed). */
int store_settle(struct store *store, const struct settle_args *args);

/* Settles args[0..n) in ONE transaction (group commit of outcomes that came
 * together), results[i] for args[i] as store_settle would give it. When any
 * of them is refused (fenced, invalid) or the transaction fails, nothing of
 * the batch is kept and each is settled on its own. */
void store_settle_batch(struct store *store, const struct settle_args *const *args, unsigned n,
                        int *results);

/* The sweeps (policy_sweep()): every operation waiting for the exit whose
 * deadline has passed, and every re-send whose key is key_retention_ms old
 * or older (0 = no key-age check), goes to manual, audited. Short
 * transactions of a bounded batch each. *ret_count: how many. */
int store_sweep_deadlines(struct store *store, int64_t key_retention_ms, tg_wall_ms now,
                          unsigned *ret_count);

/* Earliest next_run_at among retry_wait/unknown operations (TG_WALL_NEVER if
 * none) and whether any operation is pending. */
int store_next_due(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending);

/* ---- reading ------------------------------------------------------------ */

typedef int (*store_call_fn)(const struct call_record *call, void *userdata);
typedef int (*store_op_fn)(const struct op_record *op, void *userdata);

/* Calls with id > since_id, oldest first, at most limit. A non-zero return
 * from fn stops the walk and is returned. */
int store_list_calls(struct store *store, int64_t since_id, unsigned limit, store_call_fn fn,
                     void *userdata);
/* store_list_calls() of one account's operations (account NULL: every
 * account, as store_list_calls). The calls carry no index by account: the
 * walk reads the call log by id and the store skips the other accounts'
 * rows, so a page of a rare account may read many rows. TG_EINVAL (not an
 * account name). */
int store_list_account_calls(struct store *store, const char *account, int64_t since_id,
                             unsigned limit, store_call_fn fn, void *userdata);
/* The calls of one operation, oldest first. */
int store_list_op_calls(struct store *store, int64_t op_id, store_call_fn fn, void *userdata);

/* What the store holds now. The counts of the final states and calls_total
 * come from counters kept in the same transactions as the changes, so that
 * reading them costs the same at 10 rows and at 10,000,000; the open states
 * are counted from their index (the backlog, however large it is). */
struct store_stats {
        uint64_t by_state[OP_STATE_COUNT];
        tg_wall_ms oldest_open_accepted_at; /* oldest non-final op; TG_WALL_NEVER if none */
        uint64_t calls_total;               /* calls ever recorded (pruned ones included) */
        int64_t epoch;
        uint64_t pruned_operations; /* deleted by store_prune(), ever */
        uint64_t pruned_calls;
};
int store_stats(struct store *store, struct store_stats *ret_stats);

/* One account's backlog now: *ret_by_state[s] is the number of its
 * operations in state s for the open states (pending, in_flight,
 * retry_wait, unknown) and manual; the final states read 0. Counted from
 * the account's index (the same cost per row as store_stats' counts), in
 * one short read transaction, whatever account the handle serves.
 * TG_EINVAL (not an account name). */
int store_account_backlog(struct store *store, const char *account,
                          uint64_t ret_by_state[OP_STATE_COUNT]);

/* One account's operations the provider reports as accepted, not final
 * (pending_since set) that are still open (in flight, retry_wait,
 * unknown): counted in its backlog, but waiting for the provider, not for
 * the exit. One short read transaction. TG_EINVAL (not an account name). */
int store_provider_pending(struct store *store, const char *account, uint64_t *ret_n);
/* The operation of `account` that holds refund_id as its provider refund id
 * (stored when the provider's answer named it): *ret_op. TG_ENOTFOUND when
 * none does, TG_ECONFLICT when more than one does (the provider's id names
 * no single operation of ours), TG_EINVAL for an empty id. From an index on
 * (account, refund_id): a notification that names only the provider's id
 * (Adyen's pspReference) is matched without a scan. */
int store_find_by_refund_id(struct store *store, const char *account, const char *refund_id,
                            struct op_record *ret_op);

/* ---- lifecycle: retention, health, backup (store_life.c) ------------------ */

/* Where a prune got to: the last (updated_at, id) passed of each final
 * state, and the phase it is in (0, 1: the final operations of each state;
 * STORE_PRUNE_EVENTS: the delivered events). Zero it before the first call;
 * keep it between calls so that rows that stay (an audit trail) are not
 * scanned again and a call of one batch goes on where the last stopped. */
#define STORE_PRUNE_EVENTS 2u
struct store_prune_cursor {
        int64_t at[2];
        int64_t id[2];
        unsigned phase;
};

struct store_prune_result {
        uint64_t operations; /* deleted */
        uint64_t calls;
        uint64_t events; /* delivered events deleted (store_events.h) */
        bool more;       /* stopped at max_batches with rows left to look at */
};

/* Deletes operations that reached a final state (succeeded, rejected) before
 * `before` (their updated_at), with their calls, in transactions of at most
 * `batch` operations, at most `max_batches` of them (0: until done). Never
 * deletes an operation with an audit row (a manual-review case, a provider
 * event: the audit trail stays whole, and its operation with it), nor the
 * newest operation or the operation of the newest call (SQLite would hand
 * their ids out again). The store's triggers refuse any other delete.
 * Counters (store_stats) move in the same transactions. Then, in batches of
 * the same size counted against the same max_batches, deletes the events
 * delivered before `before` (their delivered_at): never a due or parked
 * event, never the newest event. *ret_result says
 * what was done, on a failure too (the batches before it are committed). */
int store_prune(struct store *store, tg_wall_ms before, unsigned batch, unsigned max_batches,
                struct store_prune_cursor *cursor, struct store_prune_result *ret_result);

/* Can the store answer now? One short read transaction (MariaDB: a round
 * trip to the server); SQLite also says TG_EIO when the database file was
 * removed, renamed or replaced under the open handle. 0 or a TG_E* code. */
int store_ping(struct store *store);

/* What the store does not promise on this server, for people: NULL when
 * every promise holds, else one line naming what is missing and the fix.
 * Today: MariaDB with binary logging and a user without SUPER, where the
 * no-delete triggers of operations, calls and audit cannot be created (the
 * open creates any that is missing, so the fix works at the next start).
 * A daemon refuses to start on it unless store.allow_missing_triggers says
 * so. Lives as long as the store. */
const char *store_unkept(const struct store *store);

/* An online, consistent copy of the whole store into a new file `path`
 * (SQLite: VACUUM INTO, a snapshot of one read transaction; writers go on).
 * TG_ECONFLICT when path exists, TG_EUNSUPPORTED on MariaDB
 * (use mariadb-dump --single-transaction: docs/operating.md). */
int store_backup(struct store *store, const char *path);

/* ---- manual review and audit (append-only) ------------------------------- */

/* Operations in manual, oldest accepted first, with id > after_id, for one
 * reason (MANUAL_NONE: any), at most limit. */
int store_list_manual(struct store *store, int64_t after_id, enum manual_reason reason,
                      unsigned limit, store_op_fn fn, void *userdata);

/* Who owns a manual case, as a filter of the manual list. */
enum store_assignee {
        STORE_ASSIGNEE_ANY,  /* owned by anybody or nobody */
        STORE_ASSIGNEE_IS,   /* owned by the named operator */
        STORE_ASSIGNEE_NONE, /* owned by nobody yet */
};

struct store_manual_filter {
        enum manual_reason reason; /* MANUAL_NONE: any */
        enum store_assignee who;
        const char *assignee; /* STORE_ASSIGNEE_IS: the name (1..TG_TEXT_MAX-1 bytes) */
        const char *account;  /* one account's cases; NULL: every account */
};

/* store_list_manual() with the whole filter (the store filters, by page). */
int store_list_manual_filtered(struct store *store, int64_t after_id,
                               const struct store_manual_filter *filter, unsigned limit,
                               store_op_fn fn, void *userdata);

/* Operations in `state` with id > after_id, in id order, at most limit: page
 * with after_id = the last id seen. Meant for the small states (unknown,
 * retry_wait, manual): a backend may sort the state's rows. A non-zero return
 * from fn stops the walk and is returned. */
int store_list_state(struct store *store, enum op_state state, int64_t after_id, unsigned limit,
                     store_op_fn fn, void *userdata);

struct audit_record {
        int64_t id;
        int64_t op_id;
        tg_wall_ms at;
        char action[32]; /* "resend", "resolve", "event", ... */
        char operator_name[TG_TEXT_MAX];
        char reason[TG_TEXT_MAX];
        char detail[TG_TEXT_MAX];
};
typedef int (*store_audit_fn)(const struct audit_record *audit, void *userdata);
int store_list_audit(struct store *store, int64_t op_id, store_audit_fn fn, void *userdata);

/* An operator re-send (policy_resend()): refused with TG_ESTATE unless
 * manual, TG_ERANGE past key retention; otherwise the operation becomes
 * retry_wait, due now, kind manual, and an audit row is written in the same
 * transaction. */
int store_operator_resend(struct store *store, const char *operation_id, const char *operator_name,
                          const char *reason, const struct policy_config *config, tg_wall_ms now,
                          struct op_record *ret_op);

/* An operator closes a manual operation by hand (policy_resolve()): outcome
 * succeeded or rejected ("failed"). TG_ESTATE unless manual. Audited. */
int store_operator_resolve(struct store *store, const char *operation_id, const char *operator_name,
                           const char *reason, enum op_state outcome, tg_wall_ms now,
                           struct op_record *ret_op);

/* An operator gives a manual case to `assignee` (NULL or "": to nobody;
 * the same owner again changes nothing and writes no audit row), audited in
 * the same transaction with the owner before and after (policy_assign()).
 * TG_ESTATE unless manual, TG_ENOTFOUND. */
int store_operator_assign(struct store *store, const char *operation_id, const char *operator_name,
                          const char *assignee, const char *reason, tg_wall_ms now,
                          struct op_record *ret_op);

/* Four-eyes (manual.approval_above): a re-send or resolve that needs a
 * second operator is first a request, then another operator's approval.
 * Both live in the audit trail, append-only on every backend: the request
 * is an audit row (request_resend or request_resolve, by the requester,
 * with its reason and outcome), pending until an approve, resend or resolve
 * row follows it; the approval writes an approve row (by the approver) and
 * the action's own row (by the requester, with the request's reason) in
 * the same transaction as the change. So no table of its own: nothing to
 * keep in step with the audit, and nothing a prune could take away. */
struct store_approval {
        int64_t audit_id;      /* the request's audit row */
        bool resolve;          /* else a re-send */
        enum op_state outcome; /* resolve: OP_SUCCEEDED or OP_REJECTED */
        char requested_by[TG_TEXT_MAX];
        char reason[TG_TEXT_MAX];
        tg_wall_ms requested_at;
};
enum store_approval_refusal {
        STORE_APPROVAL_OK,
        STORE_APPROVAL_NONE, /* no request is pending */
        STORE_APPROVAL_SELF, /* the approver is the requester */
};
/* Records a request (audited) after the checks the action itself makes:
 * TG_ESTATE unless manual, TG_ERANGE past key retention (a re-send),
 * TG_ECONFLICT while another request is pending, TG_ENOTFOUND. */
int store_approval_request(struct store *store, const char *operation_id, const char *requester,
                           const char *reason, bool resolve, enum op_state outcome,
                           const struct policy_config *config, tg_wall_ms now,
                           struct op_record *ret_op);
/* Approves the pending request and carries it out, in one transaction:
 * 0 with *ret_refusal NONE or SELF (nothing written), or OK with the
 * request in *ret_request and the operation after it in *ret_op; the
 * action's codes (TG_ESTATE, TG_ERANGE), TG_ENOTFOUND. */
int store_approval_decide(struct store *store, const char *operation_id, const char *approver,
                          const struct policy_config *config, tg_wall_ms now,
                          struct store_approval *ret_request,
                          enum store_approval_refusal *ret_refusal, struct op_record *ret_op);
/* The pending request of an operation: 0, or TG_ENOTFOUND (none, or no
 * such operation). */
int store_approval_pending(struct store *store, const char *operation_id,
                           struct store_approval *ret_request);

/* The caller cancels an operation that never reached the transport
 * (policy_cancel()): it becomes cancelled, final, audited in the same
 * transaction, so a claim either took it first (then this refuses) or never
 * sees it. One already cancelled: 0 and *ret_changed = false. TG_ESTATE (in
 * flight, unknown, succeeded, rejected), TG_ECONFLICT (a call was made: a
 * sent refund is reconciled, never cancelled), TG_ENOTFOUND. */
int store_cancel(struct store *store, const char *operation_id, const char *operator_name,
                 const char *reason, tg_wall_ms now, struct op_record *ret_op, bool *ret_changed);

/* A provider answer that did not come from a call (signed webhook,
 * settlement file; policy_external()): settles an unknown (or
 * retry_wait/manual) operation to succeeded or rejected, audited with
 * `source`. TG_ESTATE if the operation is pending, in_flight or already final
 * with another outcome; 0 and no change if already in that final state. */
int store_settle_external(struct store *store, const char *operation_id, enum op_state outcome,
                          const char *refund_id, const char *source, tg_wall_ms now);

/* ---- outbox (docs/outbox.md) ---------------------------------------------- */

/* Takes in refunds that an application inserted into the backlog table in
 * its own transaction (state pending, attempt_limit 0): each is validated
 * like an API intake (refund_validate.h); a valid one gets its budgets from
 * limits (attempt_limit, query_limit, deadline_at = accepted_at +
 * deadline_ms) and becomes claimable, an invalid one goes to manual with
 * reason invalid and an audit row naming the problem, never skipped. One
 * short transaction of at most a batch; rows another process is taking in are
 * skipped. *ret_taken / *ret_invalid: how many. TG_EUNSUPPORTED on a backend
 * without an outbox (SQLite). */
int store_outbox_intake(struct store *store, const struct policy_config *limits, tg_wall_ms now,
                        unsigned *ret_taken, unsigned *ret_invalid);

/* ---- exit samples: the running exit's per-second figures ------------------ */

#define STORE_FIGURES_MAX 4096

/* One second of the exit, written by each dispatcher once a second for its
 * share and read by any API process (GET /metrics, GET /v1/stats, admission
 * control), which merges the shares (app/exit_stats.h). Samples are
 * operational data, not history: they may be pruned. */
struct exit_sample {
        tg_wall_ms at; /* end of the second it covers */
        int64_t epoch;
        unsigned share; /* the writer's share of the account (0 with one share) */
        unsigned in_flight;
        unsigned starts;    /* calls started during the second */
        unsigned call_ends; /* calls that ended during it */
        unsigned op_closes; /* operations that reached a final state or manual in it */
        bool held;          /* a provider-wide hold was in force */
        /* Oldest accepted_at among open operations (pending, in_flight,
         * retry_wait, unknown) at `at`; TG_WALL_NEVER if none. Ignored by
         * store_sample_put(): the store reads it from the backlog itself. */
        tg_wall_ms oldest_open_accepted_at;
        /* Operations in each state: the account's backlog (pending,
         * in_flight, retry_wait, unknown, manual; the final states are not
         * counted and read 0). Ignored by store_sample_put(): the store
         * counts them itself, in the same transaction, for every sample
         * while the backlog is under 20,000; a larger one is counted again
         * after a second per 20,000 rows (60 s at most: a million pending,
         * every 50 s), and the samples in between carry the last counts. */
        unsigned backlog[OP_STATE_COUNT];
        /* Opaque text the writer keeps with the sample (the dispatcher's
         * cumulative counters as JSON); "" when none. NUL-terminated. Only
         * the newest samples keep it: a sample more than STORE_FIGURES_KEEP_MS
         * older than a newer one of its share reads "" (nothing reads old
         * figures, and a day of samples stays small). */
        char figures[STORE_FIGURES_MAX];
};
#define STORE_FIGURES_KEEP_MS 60000

/* Stores one sample (a sample with the same `at` AND share is replaced;
 * other shares' samples are kept) and prunes samples with at < keep_after.
 * One short transaction. now is the caller's monotonic clock: it decides
 * when a large backlog is counted again (the store reads no clock, so the
 * simulator's virtual time drives it too). */
int store_sample_put(struct store *store, const struct exit_sample *sample, tg_wall_ms keep_after,
                     tg_mono_ns now);

typedef int (*store_sample_fn)(const struct exit_sample *sample, void *userdata);
/* Samples of every share with at > since, oldest first (by at, then share),
 * at most limit. A non-zero return from fn stops the walk and is returned. */
int store_list_samples(struct store *store, tg_wall_ms since, unsigned limit, store_sample_fn fn,
                       void *userdata);
/* The newest sample of any share (the highest share among equal `at`);
 * TG_ENOTFOUND when none was ever written. */
int store_last_sample(struct store *store, struct exit_sample *ret_sample);

/* ---- admission refusals: new refunds the API refused, per second ---------- */

/* Refusals are not operations (nothing of a refused refund is stored); the
 * API counts them per wall-clock second so that the console and `tollgate
 * report` can show when intake was refused. Operational data, pruned like
 * the samples. */
struct refusal_second {
        tg_wall_ms at; /* start of the second: a multiple of 1000 */
        unsigned refused;
};

/* Adds n refusals to the second starting at `second` (a multiple of 1000;
 * TG_EINVAL otherwise), and prunes seconds with at < keep_after. One short
 * transaction. */
int store_refusals_add(struct store *store, tg_wall_ms second, unsigned n, tg_wall_ms keep_after);

typedef int (*store_refusal_fn)(const struct refusal_second *sec, void *userdata);
/* Seconds with refusals and at > since, oldest first, at most limit. A
 * non-zero return from fn stops the walk and is returned. */
int store_list_refusals(struct store *store, tg_wall_ms since, unsigned limit, store_refusal_fn fn,
                        void *userdata);

/* How long one call waits for a lock held by another connection before it
 * answers TG_EBUSY (default 5000 ms). The dispatcher keeps it short so that
 * a locked store never stalls its event loop: it keeps reading replies and
 * retries the store instead. 0 or TG_EUNSUPPORTED. */
int store_set_busy_timeout(struct store *store, int64_t ms);

/* Across processes: from now until store_close, `bell` (platform/wake.h,
 * borrowed) rings whenever any process sharing this store commits new work
 * (an acceptance, a batch, an operator's re-send, an outbox intake), so that
 * a dispatcher whose API runs elsewhere looks at once. It also rings once
 * after the store's listener reconnects. Holds no transaction. 0;
 * TG_EUNSUPPORTED when the backend cannot (SQLite: one machine, the
 * in-process doorbell; MariaDB: no notifications), TG_ENOMEM. */
struct wake;
int store_listen(struct store *store, struct wake *bell);

#endif
