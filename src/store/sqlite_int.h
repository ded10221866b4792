/*
 * sqlite_int — private to the SQLite backend (src/store/store_sqlite*.c): the
 * handle, the prepared-statement ids, and the helpers that more than one of
 * its files uses (sqlite_ prefix; file-local helpers stay static). Nothing
 * outside those files includes it. The backend's invariants are stated at the
 * top of store_sqlite.c.
 */
#ifndef TG_STORE_SQLITE_INT_H
#define TG_STORE_SQLITE_INT_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store_backend.h"

enum stmt_id {
        ST_BEGIN,
        ST_BEGIN_IMMEDIATE,
        ST_COMMIT,
        ST_ROLLBACK,
        ST_OP_BY_KEY,
        ST_OP_BY_ID,
        ST_OP_INSERT,
        ST_OP_WRITE,
        ST_OWNER_EPOCH,
        ST_OWNER_BUMP,
        ST_PICK_FIRST,
        ST_PICK_AGAIN,
        ST_CALL_INSERT,
        ST_CALL_BY_ID,
        ST_CALL_SETTLE,
        ST_RECOVER_PICK,
        ST_RECOVER_CALLS,
        ST_SWEEP_AUDIT,
        ST_SWEEP,
        ST_SWEEP_KEY_AUDIT,
        ST_SWEEP_KEY,
        ST_NEXT_DUE,
        ST_ANY_PENDING,
        ST_LIST_CALLS,
        ST_LIST_OP_CALLS,
        ST_COUNT_BY_STATE,
        ST_OLDEST_OPEN,
        ST_CALLS_TOTAL,
        ST_LIST_MANUAL,
        ST_LIST_AUDIT,
        ST_AUDIT_INSERT,
        ST_SAMPLE_PUT,
        ST_SAMPLE_PRUNE,
        ST_SAMPLE_LIST,
        ST_SAMPLE_LAST,
        ST_LIST_STATE,
        ST_SHARE_OF_EPOCH,
        ST_SHARE_SET,
        ST_SPLIT_GET,
        ST_SPLIT_PUT,
        ST_OP_CLAIM,
        ST_COUNT
};

struct sqlite_store {
        struct store base; /* first: store.c sees only this */
        sqlite3 *db;
        sqlite3_stmt *stmts[ST_COUNT];
        char *db_path;   /* as opened */
        char *lock_path; /* of our share: "<db path>.owner" (share 0), ".share<k>" */
        int lock_fd;     /* >= 0 while this handle owns a share of the exit */
        int64_t epoch;   /* the epoch of our acquisition, 0 when not owner */
        unsigned share;  /* the share we hold, when lock_fd >= 0 */
        /* synchronous=NORMAL is in force (only for a settle); any other write
         * transaction puts FULL back first. */
        bool sync_normal, in_settle;
};

static inline struct sqlite_store *S(struct store *store)
{
        return (struct sqlite_store *)store;
}

/* ---- statements, transactions, columns (store_sqlite.c) ------------------- */

/* Binders return true on failure so that they chain with ||; a bound text
 * must outlive the statement's next reset. */
bool sqlite_bind_i64(sqlite3_stmt *st, int idx, int64_t v);
bool sqlite_bind_text(sqlite3_stmt *st, int idx, const char *text, size_t bound);
void sqlite_col_copy(sqlite3_stmt *st, int col, char *dst, size_t dst_size);
const char *sqlite_col_text(sqlite3_stmt *st, int col);
int sqlite_exec_sql(struct sqlite_store *s, const char *sql);
int sqlite_map_rc(int rc);
void sqlite_stmt_done(sqlite3_stmt *st);
int sqlite_stmt_get(struct sqlite_store *s, enum stmt_id id, sqlite3_stmt **ret_stmt);
int sqlite_stmt_run(sqlite3_stmt *st);
int sqlite_tx_begin(struct sqlite_store *s, bool write);
int sqlite_tx_commit(struct sqlite_store *s);
void sqlite_tx_rollback(struct sqlite_store *s);

/* ---- rows: operations, calls, audit (store_sqlite_exit.c) ----------------- */

int sqlite_audit_insert(struct sqlite_store *s, int64_t op_id, tg_wall_ms at, const char *action,
                        const char *operator_name, const char *reason, const char *detail);
int sqlite_op_by_key(struct sqlite_store *s, const char *operation_id, struct op_record *ret_op);
int sqlite_op_write(struct sqlite_store *s, const struct op_record *op);
int sqlite_read_call(sqlite3_stmt *st, struct call_record *ret_call);
int sqlite_read_op(sqlite3_stmt *st, struct op_record *ret_op);

/* ---- epochs (store_sqlite_owner.c) ---------------------------------------- */

int sqlite_check_epoch(struct sqlite_store *s, int64_t epoch, unsigned *ret_share);
int sqlite_owner_epoch_read(struct sqlite_store *s, int64_t *ret_epoch);

/* ---- the vtable's ops, by file (store_sqlite.c puts them together) -------- */

/* store_sqlite_owner.c */
int sqlite_owner_check(struct store *store);
int sqlite_owner_epoch(struct store *store, int64_t *ret_epoch);
void sqlite_owner_release(struct store *store);
int sqlite_recover(struct store *store, int64_t epoch, const struct policy_config *config,
                   tg_wall_ms now, unsigned *ret_count);
int sqlite_share_acquire(struct store *store, const struct store_split *split, unsigned *ret_share,
                         int64_t *ret_epoch);
int sqlite_split_get(struct store *store, struct store_split *ret_split);

/* store_sqlite_exit.c */
int sqlite_accept(struct store *store, const struct refund_request *req, tg_wall_ms now,
                  const struct policy_config *limits, bool *ret_created, struct op_record *ret_op);
int sqlite_claim(struct store *store, const struct claim_args *args, struct op_record *ret_op,
                 struct call_record *ret_call);
int sqlite_get(struct store *store, const char *operation_id, struct op_record *ret_op);
int sqlite_next_due(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending);
int sqlite_settle(struct store *store, const struct settle_args *a);
int sqlite_sweep_deadlines(struct store *store, int64_t key_retention_ms, tg_wall_ms now,
                           unsigned *ret_count);

/* store_sqlite_read.c */
int sqlite_last_sample(struct store *store, struct exit_sample *ret_sample);
int sqlite_list_audit(struct store *store, int64_t op_id, store_audit_fn fn, void *userdata);
int sqlite_list_calls(struct store *store, int64_t since_id, unsigned limit, store_call_fn fn,
                      void *userdata);
int sqlite_list_manual(struct store *store, int64_t after_id, unsigned limit, store_op_fn fn,
                       void *userdata);
int sqlite_list_state(struct store *store, enum op_state state, int64_t after_id, unsigned limit,
                      store_op_fn fn, void *userdata);
int sqlite_list_op_calls(struct store *store, int64_t op_id, store_call_fn fn, void *userdata);
int sqlite_list_samples(struct store *store, tg_wall_ms since, unsigned limit, store_sample_fn fn,
                        void *userdata);
int sqlite_operator_resend(struct store *store, const char *operation_id, const char *operator_name,
                           const char *reason, const struct policy_config *config, tg_wall_ms now,
                           struct op_record *ret_op);
int sqlite_operator_resolve(struct store *store, const char *operation_id,
                            const char *operator_name, const char *reason, enum op_state outcome,
                            tg_wall_ms now, struct op_record *ret_op);
int sqlite_sample_put(struct store *store, const struct exit_sample *sample, tg_wall_ms keep_after);
int sqlite_settle_external(struct store *store, const char *operation_id, enum op_state outcome,
                           const char *refund_id, const char *source, tg_wall_ms now);
int sqlite_stats(struct store *store, struct store_stats *ret_stats);

#endif
