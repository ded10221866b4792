/*
 * mysql_int — private to the MariaDB backend (src/store/store_mysql*.c):
 * the handle, the column lists of its queries, the transaction runner, and the
 * helpers and primitives its files share (store_mysql_ prefix: the mysql_
 * names belong to the client library; file-local helpers stay static).
 * Nothing outside those files includes it. The backend's invariants are
 * stated at the top of store_mysql.c.
 */
#ifndef TG_STORE_MYSQL_INT_H
#define TG_STORE_MYSQL_INT_H

#include <mysql.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store_backend.h"

#define SQL_MAX       16384 /* a sample's figures, every byte escaped, fit */
#define IO_TIMEOUT    10    /* s, main connection reads and writes */
#define DB_NAME_MAX   64
#define LOCK_NAME_MAX 64

#define OP_COLS                                                                                    \
        "id, operation_id, payment_id, amount, currency, state, reason, attempts, "                \
        "attempt_limit, queries, query_limit, accepted_at, deadline_at, key_first_used, "          \
        "next_run_at, updated_at, last_wait_ms, operator_resend, epoch, refund_id, "               \
        "last_http_status, last_class, source, share, assignee, traceparent, caller_deadline_at, " \
        "refund_reason, metadata, account, notify_url, submitted_by, pending_since, pending_polls"
#define OP_NCOLS 34

#define CALL_COLS                                                                                  \
        "id, op_id, operation_id, kind, attempt, request_id, epoch, start_mono, start_wall, "      \
        "in_flight_at_start, ended, end_mono, end_wall, sent, cls, http_status, latency_us, "      \
        "error, share, trace_id, span_id, handoff_mono, handoff_wall"
#define CALL_NCOLS 23

#define AUDIT_COLS  "id, op_id, at, action, operator_name, reason, detail"
#define AUDIT_NCOLS 7

#define SAMPLE_COLS                                                                                \
        "at, epoch, in_flight, starts, call_ends, op_closes, held, oldest_open, figures, share, "  \
        "n_pending, n_in_flight, n_retry_wait, n_unknown, n_manual"
#define SAMPLE_NCOLS 15

/* ---- the handle -------------------------------------------------------- */

/* The queries made from the transition table at open (store_mysql.c): the
 * state lists are the table's, the rest is policy_is_due(), policy_sweep()
 * and the recovery's batch in SQL. They are formats for the SQL builder. */
enum mysql_query {
        MQ_PICK_FIRST,
        MQ_PICK_FIRST_AFTER,
        MQ_EARLIEST_DUE,
        MQ_AGAIN_CANDIDATES,
        MQ_AGAIN_LOCK,
        MQ_ANY_PENDING,
        MQ_BATCH_DEADLINE,
        MQ_BATCH_KEY_AGE,
        MQ_BATCH_RECOVER,
        MQ_BATCH_OUTBOX,
        /* made from the vocabularies (core/names.h) */
        MQ_COUNT_BY_STATE,
        MQ_OLDEST_ALL,
        MQ_SAMPLE_PUT,
        MQ_COUNT_ACCOUNT,
        MQ_COUNT
};

struct mysql_store {
        struct store base;    /* first: the neutral layer sees only this */
        MYSQL *db;            /* main connection; NULL while lost (reconnected lazily) */
        MYSQL *lock_db;       /* the owner's lock session; NULL when none */
        bool commit_unknown;  /* the last COMMIT was lost in flight; ops re-check */
        unsigned lock_wait_s; /* innodb_lock_wait_timeout of our sessions */
        uint64_t affected;    /* rows changed by the last exec() */
        /* counter changes of the open transaction, written once before
         * its COMMIT (a batch of k outcomes: one UPDATE, not k) */
        int64_t counter_delta[STORE_COUNTER_COUNT];
        bool in_tx;
        /* the row the last pick locked, read whole by the pick itself: the
         * op_get of it that follows (the claim's) costs no round trip */
        struct op_record picked;
        bool picked_valid;
        /* the last row a pick of the first group took in this transaction:
         * the next pick seeks past it, not through the index entries that
         * the claims before left behind (delete-marked until purged) */
        int64_t pick_after_at, pick_after_id;
        bool pick_after;
        char host[256];
        char user[128];
        char password[256];
        char socket[256];
        char dbname[DB_NAME_MAX + 1];
        unsigned port;
        char lock_name[LOCK_NAME_MAX + 1]; /* of the share lock taken last */
        char q[MQ_COUNT][1024];
        char sql[SQL_MAX];
        /* the server's or the client library's last message (never holds the
         * password: MariaDB does not echo it), for store_open_ex()'s error */
        char last_error[256];
};

static inline struct mysql_store *M(struct store *store)
{
        return (struct mysql_store *)store;
}

/* ---- errors, the SQL builder, values, connections, transactions ----------- */
/* (store_mysql_sql.c) */

void store_mysql_col_copy(MYSQL_ROW row, const unsigned long *lens, int col, char *dst,
                          size_t size);
int64_t store_mysql_col_i64(MYSQL_ROW row, int col, bool *ok);
const char *store_mysql_col_text(MYSQL_ROW row, int col);
unsigned store_mysql_col_uns(MYSQL_ROW row, int col, bool *ok);
void store_mysql_conn_drop(MYSQL **db);
int store_mysql_connect_one(struct mysql_store *s, unsigned io_timeout, bool with_db,
                            MYSQL **ret_db);
int store_mysql_exec(struct mysql_store *s, const char *fmt, ...);

int store_mysql_fail(struct mysql_store *s);
bool store_mysql_lost_code(unsigned code);
int store_mysql_one_i64(MYSQL_RES *res, int64_t *ret_value, bool *ret_null);
bool store_mysql_parse_i64(const char *text, int64_t *ret);
int store_mysql_query(struct mysql_store *s, MYSQL_RES **ret_res, const char *fmt, ...);
/* ---- primitives (store_backend.h) ----------------------------------------- */

/* store_mysql_sql.c: tx; store_mysql_rows.c: ops, calls, audit, pages, stats,
 * samples; store_mysql_lock.c: locks, epochs, the split. */
int store_mysql_tx(struct store *store, enum store_tx kind, unsigned flags, store_tx_fn fn,
                   void *ctx);
bool store_mysql_tx_commit_unknown(const struct store *store);
int store_mysql_op_get(struct store *store, const char *key, int64_t id, bool lock,
                       struct op_record *ret_op);
int store_mysql_op_insert(struct store *store, const struct op_record *op, int64_t *ret_id);
int store_mysql_op_put(struct store *store, const struct op_record *op);
int store_mysql_op_pick(struct store *store, const struct store_pick *pick, int64_t *ret_id);
int store_mysql_op_batch(struct store *store, const struct store_batch *batch, unsigned max,
                         struct op_record *buf, unsigned *ret_n);
int store_mysql_due_summary(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending);
int store_mysql_call_insert(struct store *store, struct call_record *call);
int store_mysql_call_get(struct store *store, int64_t id, bool lock, struct call_record *ret_call);
int store_mysql_call_find(struct store *store, const char *request_id, int64_t epoch,
                          struct call_record *ret_call);
int store_mysql_call_close(struct store *store, const struct call_record *call);
int store_mysql_audit_insert(struct store *store, const struct audit_record *audit);
int store_mysql_lock_take(struct store *store, enum store_lock lock, unsigned share,
                          int64_t wait_ms);
void store_mysql_lock_drop(struct store *store, enum store_lock lock, unsigned share);
void store_mysql_lock_drop_all(struct store *store);
int store_mysql_lock_held(struct store *store);
int store_mysql_epoch_read(struct store *store, int64_t *ret_epoch);
int store_mysql_epoch_share(struct store *store, int64_t epoch, unsigned *ret_share);
int store_mysql_epoch_bump(struct store *store, unsigned share, int64_t *ret_epoch);
int store_mysql_split_read(struct store *store, struct store_split *ret_split);
int store_mysql_split_put(struct store *store, const struct store_split *split);
int store_mysql_split_want(struct store *store);
int store_mysql_hold_get(struct store *store, tg_wall_ms *ret_until);
int store_mysql_hold_raise(struct store *store, tg_wall_ms until);
int store_mysql_controls_get(struct store *store, const char *account, bool lock,
                             struct account_controls *ret_controls);
int store_mysql_controls_put(struct store *store, const char *account,
                             const struct account_controls *c);
int store_mysql_account_audit_insert(struct store *store, const struct account_audit_record *a);
int store_mysql_account_audit_read(MYSQL_RES *res, MYSQL_ROW row, void *ret_row);
int store_mysql_page(struct store *store, const struct store_page *page, unsigned want, void *buf,
                     unsigned *ret_n);
int store_mysql_stats(struct store *store, struct store_stats *ret_stats);
int store_mysql_backlog(struct store *store, const char *account, uint64_t *by_state);
int store_mysql_provider_pending(struct store *store, const char *account, uint64_t *ret_n);
int store_mysql_op_find_refund(struct store *store, const char *account, const char *refund_id,
                               int64_t ret_ids[2], unsigned *ret_n);
int store_mysql_sample_put(struct store *store, const struct exit_sample *sample,
                           tg_wall_ms keep_after);
int store_mysql_sample_last(struct store *store, struct exit_sample *ret_sample);
int store_mysql_refusals_add(struct store *store, tg_wall_ms second, unsigned n,
                             tg_wall_ms keep_after);

/* store_mysql_life.c: counters and the prune (store_backend.h) */
int store_mysql_counter_add(struct store *store, enum store_counter counter, int64_t delta);
/* one counter's change written now; the open transaction's changes
 * written (store_mysql_tx, before COMMIT) */
int store_mysql_counters_write(struct mysql_store *s, enum store_counter counter, int64_t delta);
int store_mysql_counters_flush(struct mysql_store *s);
int store_mysql_prune_pick(struct store *store, enum op_state state, tg_wall_ms before,
                           int64_t after_at, int64_t after_id, unsigned max, int64_t *ret_ids,
                           int64_t *ret_at, unsigned *ret_n);
int store_mysql_prune_delete(struct store *store, const int64_t *ids, unsigned n, tg_wall_ms before,
                             uint64_t *ret_calls);

/* store_mysql_lock.c: GET_LOCK names fit in 64 characters */
void store_mysql_lock_name_for(const char *prefix, const char *dbname, char *dst, size_t size);

/* store_mysql_events.c: the events' outbox (store_backend.h) */
int store_mysql_event_insert(struct store *store, const struct store_event *ev);
int store_mysql_event_page(struct store *store, int64_t after_id, enum store_event_filter filter,
                           const char *account, int64_t op_id, const char *owner, unsigned want,
                           struct store_event *buf, unsigned *ret_n);
int store_mysql_event_delivery_put(struct store *store, const struct store_event *ev);
int store_mysql_event_prune(struct store *store, tg_wall_ms before, unsigned max, unsigned *ret_n);

#endif
