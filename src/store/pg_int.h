/*
 * pg_int — private to the PostgreSQL backend (src/store/store_pg*.c): the
 * handle, the column lists of its queries, the SQL builder, the transaction
 * runner, and the helpers and primitives its files share (store_pg_ prefix:
 * the PQ names belong to libpq; file-local helpers stay static). Nothing
 * outside those files includes it. The backend's invariants are stated at
 * the top of store_pg.c.
 */
#ifndef TG_STORE_PG_INT_H
#define TG_STORE_PG_INT_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store_backend.h"

#define PG_SQL_MAX     16384 /* a sample's figures, every byte escaped, fit */
#define PG_DB_NAME_MAX 63    /* NAMEDATALEN - 1 */

/* Advisory lock keys (pg_advisory_lock(int, int)): the first half names the
 * lock, the second the share. Advisory locks are scoped to the database the
 * session is connected to, so the database's name is not in the key. */
#define PG_LOCK_SHARE   0x74670001 /* share k's owner lock (0: the one-owner lock) */
#define PG_LOCK_SPLIT   0x74670002 /* the acquirers' lock */
#define PG_LOCK_MIGRATE 0x74670003 /* one migration step at a time */

#define PG_OP_COLS                                                                                 \
        "id, operation_id, payment_id, amount, currency, state, reason, attempts, "                \
        "attempt_limit, queries, query_limit, accepted_at, deadline_at, key_first_used, "          \
        "next_run_at, updated_at, last_wait_ms, operator_resend, epoch, refund_id, "               \
        "last_http_status, last_class, source, share, assignee, traceparent, caller_deadline_at, " \
        "refund_reason, metadata, account, notify_url, submitted_by, pending_since, pending_polls"
#define PG_OP_NCOLS 34

#define PG_CALL_COLS                                                                               \
        "id, op_id, operation_id, kind, attempt, request_id, epoch, start_mono, start_wall, "      \
        "in_flight_at_start, ended, end_mono, end_wall, sent, cls, http_status, latency_us, "      \
        "error, share, trace_id, span_id, handoff_mono, handoff_wall"
#define PG_CALL_NCOLS 23

#define PG_AUDIT_COLS  "id, op_id, at, action, operator_name, reason, detail"
#define PG_AUDIT_NCOLS 7

#define PG_SAMPLE_COLS                                                                             \
        "at, epoch, in_flight, starts, call_ends, op_closes, held, oldest_open, figures, share, "  \
        "n_pending, n_in_flight, n_retry_wait, n_unknown, n_manual"
#define PG_SAMPLE_NCOLS 15

/* ---- the handle -------------------------------------------------------- */

/* The queries made from the transition table at open (store_pg.c), as
 * formats for the SQL builder. */
enum pg_query {
        PQY_PICK_FIRST,
        PQY_PICK_FIRST_AFTER,
        PQY_EARLIEST_DUE,
        PQY_AGAIN_CANDIDATES,
        PQY_AGAIN_LOCK,
        PQY_ANY_PENDING,
        PQY_BATCH_DEADLINE,
        PQY_BATCH_KEY_AGE,
        PQY_BATCH_RECOVER,
        PQY_BATCH_OUTBOX,
        /* made from the vocabularies (core/names.h) */
        PQY_COUNT_BY_STATE,
        PQY_OLDEST_ALL,
        PQY_SAMPLE_PUT,
        PQY_COUNT_ACCOUNT,
        PQY_COUNT
};

struct pg_store {
        struct store base;    /* first: the neutral layer sees only this */
        PGconn *db;           /* main connection; NULL while lost (reconnected lazily) */
        PGconn *lock_db;      /* the owner's lock session; NULL when none */
        bool commit_unknown;  /* the last COMMIT was lost in flight; ops re-check */
        int64_t lock_wait_ms; /* lock_timeout of our sessions */
        uint64_t affected;    /* rows changed by the last exec() */
        /* counter changes of the open transaction, written once before
         * its COMMIT */
        int64_t counter_delta[STORE_COUNTER_COUNT];
        bool in_tx;
        /* the row the last pick locked, read whole by the pick itself */
        struct op_record picked;
        bool picked_valid;
        /* the last row a pick of the first group took in this transaction */
        int64_t pick_after_at, pick_after_id;
        bool pick_after;
        /* the share lock taken last (lock_held asks for it), and the share
         * locks this session holds (taken once each: pg advisory locks
         * stack, and one drop must free one) */
        unsigned lock_share;
        bool lock_share_valid;
        bool share_held[STORE_SHARES_MAX];
        bool split_held;
        /* connection parameters (libpq keywords) */
        char host[256]; /* a name, an address or a socket directory; "" libpq's default */
        char port[8];
        char user[128];
        char password[256];
        char dbname[PG_DB_NAME_MAX + 1];
        char sslmode[16];
        char q[PQY_COUNT][1280];
        char sql[PG_SQL_MAX];
        /* the server's or libpq's last message, for store_open_ex()'s error */
        char last_error[256];
        /* the listener of store_listen() (store_pg_bell.c); NULL: none */
        struct pg_bell *bell;
};

static inline struct pg_store *P(struct store *store)
{
        return (struct pg_store *)store;
}

/* ---- errors, the SQL builder, values, connections, transactions ----------- */
/* (store_pg_sql.c) */

/* A fresh session (to s->dbname, or to the maintenance database "postgres"
 * when !with_db) with our settings. TG_ENOTFOUND: no such database. */
int store_pg_connect_one(struct pg_store *s, bool with_db, PGconn **ret_db);
void store_pg_conn_drop(PGconn **db);
/* Runs a statement whose rows do not matter; s->affected is set. */
int store_pg_exec(struct pg_store *s, const char *fmt, ...);
/* Runs a query; *ret_res is the caller's (PQclear). */
int store_pg_query(struct pg_store *s, PGresult **ret_res, const char *fmt, ...);
/* The error of a failed result on the main connection as a TG_E* code (the
 * result is not freed); a lost connection is dropped. */
int store_pg_fail(struct pg_store *s, const PGresult *res);
bool store_pg_parse_i64(const char *text, int64_t *ret);
int64_t store_pg_col_i64(const PGresult *res, int row, int col, bool *ok);
unsigned store_pg_col_uns(const PGresult *res, int row, int col, bool *ok);
void store_pg_col_copy(const PGresult *res, int row, int col, char *dst, size_t size);
const char *store_pg_col_text(const PGresult *res, int row, int col);
/* One integer from a one-row, one-column result (freed); TG_ENOTFOUND for no
 * row, *ret_null for NULL. */
int store_pg_one_i64(PGresult *res, int64_t *ret_value, bool *ret_null);

/* ---- primitives (store_backend.h) ----------------------------------------- */

int store_pg_tx(struct store *store, enum store_tx kind, unsigned flags, store_tx_fn fn, void *ctx);
bool store_pg_tx_commit_unknown(const struct store *store);
int store_pg_op_get(struct store *store, const char *key, int64_t id, bool lock,
                    struct op_record *ret_op);
int store_pg_op_insert(struct store *store, const struct op_record *op, int64_t *ret_id);
int store_pg_op_put(struct store *store, const struct op_record *op);
int store_pg_op_pick(struct store *store, const struct store_pick *pick, int64_t *ret_id);
int store_pg_op_batch(struct store *store, const struct store_batch *batch, unsigned max,
                      struct op_record *buf, unsigned *ret_n);
int store_pg_due_summary(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending);
int store_pg_call_insert(struct store *store, struct call_record *call);
int store_pg_call_get(struct store *store, int64_t id, bool lock, struct call_record *ret_call);
int store_pg_call_find(struct store *store, const char *request_id, int64_t epoch,
                       struct call_record *ret_call);
int store_pg_call_close(struct store *store, const struct call_record *call);
int store_pg_audit_insert(struct store *store, const struct audit_record *audit);
int store_pg_lock_take(struct store *store, enum store_lock lock, unsigned share, int64_t wait_ms);
void store_pg_lock_drop(struct store *store, enum store_lock lock, unsigned share);
void store_pg_lock_drop_all(struct store *store);
int store_pg_lock_held(struct store *store);
int store_pg_epoch_read(struct store *store, int64_t *ret_epoch);
int store_pg_epoch_share(struct store *store, int64_t epoch, unsigned *ret_share);
int store_pg_epoch_bump(struct store *store, unsigned share, int64_t *ret_epoch);
int store_pg_split_read(struct store *store, struct store_split *ret_split);
int store_pg_split_put(struct store *store, const struct store_split *split);
int store_pg_split_want(struct store *store);
int store_pg_hold_get(struct store *store, tg_wall_ms *ret_until);
int store_pg_hold_raise(struct store *store, tg_wall_ms until);
int store_pg_controls_get(struct store *store, const char *account, bool lock,
                          struct account_controls *ret_controls);
int store_pg_controls_put(struct store *store, const char *account,
                          const struct account_controls *c);
int store_pg_account_audit_insert(struct store *store, const struct account_audit_record *a);
int store_pg_account_audit_read(const PGresult *res, int row, void *ret_row);
int store_pg_page(struct store *store, const struct store_page *page, unsigned want, void *buf,
                  unsigned *ret_n);
int store_pg_stats(struct store *store, struct store_stats *ret_stats);
int store_pg_backlog(struct store *store, const char *account, uint64_t *by_state);
int store_pg_provider_pending(struct store *store, const char *account, uint64_t *ret_n);
int store_pg_op_find_refund(struct store *store, const char *account, const char *refund_id,
                            int64_t ret_ids[2], unsigned *ret_n);
int store_pg_sample_put(struct store *store, const struct exit_sample *sample,
                        tg_wall_ms keep_after);
int store_pg_sample_last(struct store *store, struct exit_sample *ret_sample);
int store_pg_refusals_add(struct store *store, tg_wall_ms second, unsigned n,
                          tg_wall_ms keep_after);

/* lifecycle (store_pg_rows.c) */
int store_pg_counter_add(struct store *store, enum store_counter counter, int64_t delta);
int store_pg_counters_flush(struct pg_store *s);
int store_pg_prune_pick(struct store *store, enum op_state state, tg_wall_ms before,
                        int64_t after_at, int64_t after_id, unsigned max, int64_t *ret_ids,
                        int64_t *ret_at, unsigned *ret_n);
int store_pg_prune_delete(struct store *store, const int64_t *ids, unsigned n, tg_wall_ms before,
                          uint64_t *ret_calls);

/* the doorbell between processes (store_pg_bell.c): NOTIFY inside a write
 * transaction; a listening session on a thread of its own, stopped by close */
int store_pg_bell_ring(struct store *store);
int store_pg_bell_listen(struct store *store, struct wake *bell);
void store_pg_bell_close(struct pg_store *s);

/* store_pg_lock.c: one advisory lock call on a session ("pg_try_advisory_lock",
 * "pg_advisory_unlock", ...): 1 true, 0 false. */
int store_pg_advisory(PGconn *db, const char *fn, int key, unsigned share, int *ret_value);

/* store_pg_events.c: the events' outbox (store_backend.h) */
int store_pg_event_insert(struct store *store, const struct store_event *ev);
int store_pg_event_page(struct store *store, int64_t after_id, enum store_event_filter filter,
                        const char *account, int64_t op_id, const char *owner, unsigned want,
                        struct store_event *buf, unsigned *ret_n);
int store_pg_event_delivery_put(struct store *store, const struct store_event *ev);
int store_pg_event_prune(struct store *store, tg_wall_ms before, unsigned max, unsigned *ret_n);

#endif
