/*
 * mysql_int — private to the MariaDB/MySQL backend (src/store/store_mysql*.c):
 * the handle, the column lists of its queries, the transaction runner, and the
 * helpers that more than one of its files uses (store_mysql_ prefix: the
 * mysql_ names belong to the client library; file-local helpers stay static).
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
        "last_http_status, last_class, source"
#define OP_NCOLS 23

#define CALL_COLS                                                                                  \
        "id, op_id, operation_id, kind, attempt, request_id, epoch, start_mono, start_wall, "      \
        "in_flight_at_start, ended, end_mono, end_wall, sent, cls, http_status, latency_us, "      \
        "error"
#define CALL_NCOLS 18

#define AUDIT_COLS  "id, op_id, at, action, operator_name, reason, detail"
#define AUDIT_NCOLS 7

#define SAMPLE_COLS                                                                                \
        "at, epoch, in_flight, starts, call_ends, op_closes, held, oldest_open, figures, share"
#define SAMPLE_NCOLS 10

/* ---- the handle -------------------------------------------------------- */

struct mysql_store {
        struct store base;    /* first: store.c sees only this */
        MYSQL *db;            /* main connection; NULL while lost (reconnected lazily) */
        MYSQL *lock_db;       /* the owner's lock session; NULL when not the owner */
        int64_t epoch;        /* the epoch of our acquisition, 0 when not owner */
        bool commit_unknown;  /* the last COMMIT was lost in flight; ops re-check */
        unsigned lock_wait_s; /* innodb_lock_wait_timeout of our sessions */
        uint64_t affected;    /* rows changed by the last exec() */
        char host[256];
        char user[128];
        char password[256];
        char socket[256];
        char dbname[DB_NAME_MAX + 1];
        unsigned port;
        char lock_name[LOCK_NAME_MAX + 1]; /* of the share we hold (or last tried) */
        unsigned share;                    /* the share we hold, when epoch > 0 */
        char sql[SQL_MAX];
};

static inline struct mysql_store *M(struct store *store)
{
        return (struct mysql_store *)store;
}

typedef int (*tx_fn)(struct mysql_store *s, void *ctx);

enum {
        /* fn may run again after a COMMIT whose outcome is unknown: it reads
         * s->commit_unknown and checks what the lost COMMIT did. */
        TX_RECHECKS = 1,
};

/* ---- errors, the SQL builder, values, connections, transactions ----------- */
/* (store_mysql_sql.c) */

void store_mysql_col_copy(MYSQL_ROW row, const unsigned long *lens, int col, char *dst,
                          size_t size);
int64_t store_mysql_col_i64(MYSQL_ROW row, int col, bool *ok);
const char *store_mysql_col_text(MYSQL_ROW row, int col);
unsigned store_mysql_col_uns(MYSQL_ROW row, int col, bool *ok);
void store_mysql_conn_drop(MYSQL **db);
int store_mysql_connect_one(const struct mysql_store *s, unsigned io_timeout, bool with_db,
                            MYSQL **ret_db);
int store_mysql_exec(struct mysql_store *s, const char *fmt, ...);
int store_mysql_fail(struct mysql_store *s);
bool store_mysql_lost_code(unsigned code);
int store_mysql_one_i64(MYSQL_RES *res, int64_t *ret_value, bool *ret_null);
bool store_mysql_parse_i64(const char *text, int64_t *ret);
int store_mysql_query(struct mysql_store *s, MYSQL_RES **ret_res, const char *fmt, ...);
int store_mysql_read_call(MYSQL_RES *res, MYSQL_ROW row, struct call_record *ret_call);
int store_mysql_read_op(MYSQL_RES *res, MYSQL_ROW row, struct op_record *ret_op);
int store_mysql_run_tx(struct mysql_store *s, tx_fn fn, void *ctx, unsigned flags);

/* ---- rows: operations, calls, audit (store_mysql_exit.c) ------------------ */

int store_mysql_audit_insert(struct mysql_store *s, int64_t op_id, tg_wall_ms at,
                             const char *action, const char *operator_name, const char *reason,
                             const char *detail);
int store_mysql_op_lookup(struct mysql_store *s, const char *key, int64_t id, bool lock,
                          struct op_record *ret_op);
int store_mysql_op_write(struct mysql_store *s, const struct op_record *op);

/* ---- lock names, epochs (store_mysql_owner.c) ------------------------------ */

int store_mysql_check_epoch(struct mysql_store *s, int64_t epoch, unsigned *ret_share);
void store_mysql_lock_name_for(const char *prefix, const char *dbname, char *dst, size_t size);
int store_mysql_owner_epoch_read(struct mysql_store *s, bool share, int64_t *ret_epoch);
void store_mysql_share_lock_name(const struct mysql_store *s, unsigned share, char *dst,
                                 size_t size);

/* ---- the vtable's ops, by file (store_mysql.c puts them together) --------- */

/* store_mysql_owner.c */
int store_mysql_owner_check(struct store *store);
int store_mysql_owner_epoch(struct store *store, int64_t *ret_epoch);
void store_mysql_owner_release(struct store *store);
int store_mysql_recover(struct store *store, int64_t epoch, const struct policy_config *config,
                        tg_wall_ms now, unsigned *ret_count);
int store_mysql_share_acquire(struct store *store, const struct store_split *split,
                              unsigned *ret_share, int64_t *ret_epoch);
int store_mysql_split_get(struct store *store, struct store_split *ret_split);

/* store_mysql_exit.c */
int store_mysql_accept(struct store *store, const struct refund_request *req, tg_wall_ms now,
                       const struct policy_config *limits, bool *ret_created,
                       struct op_record *ret_op);
int store_mysql_claim(struct store *store, const struct claim_args *args, struct op_record *ret_op,
                      struct call_record *ret_call);
int store_mysql_get(struct store *store, const char *operation_id, struct op_record *ret_op);
int store_mysql_next_due(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending);
int store_mysql_outbox_intake(struct store *store, const struct policy_config *limits,
                              tg_wall_ms now, unsigned *ret_taken, unsigned *ret_invalid);
int store_mysql_settle(struct store *store, const struct settle_args *a);
int store_mysql_sweep_deadlines(struct store *store, int64_t key_retention_ms, tg_wall_ms now,
                                unsigned *ret_count);

/* store_mysql_read.c */
int store_mysql_last_sample(struct store *store, struct exit_sample *ret_sample);
int store_mysql_list_audit(struct store *store, int64_t op_id, store_audit_fn fn, void *userdata);
int store_mysql_list_calls(struct store *store, int64_t since_id, unsigned limit, store_call_fn fn,
                           void *userdata);
int store_mysql_list_state(struct store *store, enum op_state state, int64_t after_id,
                           unsigned limit, store_op_fn fn, void *userdata);
int store_mysql_list_manual(struct store *store, int64_t after_id, unsigned limit, store_op_fn fn,
                            void *userdata);
int store_mysql_list_op_calls(struct store *store, int64_t op_id, store_call_fn fn, void *userdata);
int store_mysql_list_samples(struct store *store, tg_wall_ms since, unsigned limit,
                             store_sample_fn fn, void *userdata);
int store_mysql_operator_resend(struct store *store, const char *operation_id,
                                const char *operator_name, const char *reason,
                                const struct policy_config *config, tg_wall_ms now,
                                struct op_record *ret_op);
int store_mysql_operator_resolve(struct store *store, const char *operation_id,
                                 const char *operator_name, const char *reason,
                                 enum op_state outcome, tg_wall_ms now, struct op_record *ret_op);
int store_mysql_sample_put(struct store *store, const struct exit_sample *sample,
                           tg_wall_ms keep_after);
int store_mysql_settle_external(struct store *store, const char *operation_id,
                                enum op_state outcome, const char *refund_id, const char *source,
                                tg_wall_ms now);
int store_mysql_stats(struct store *store, struct store_stats *ret_stats);

#endif
