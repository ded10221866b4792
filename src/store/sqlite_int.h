/*
 * sqlite_int — private to the SQLite backend (src/store/store_sqlite*.c): the
 * handle, the prepared-statement ids, and the helpers and primitives its
 * files share (sqlite_ prefix; file-local helpers stay static). Nothing
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
        ST_SYNC_NORMAL,
        ST_SYNC_FULL,
        ST_COMMIT,
        ST_ROLLBACK,
        ST_OP_BY_KEY,
        ST_OP_BY_ID,
        ST_OP_INSERT,
        ST_OP_WRITE,
        ST_OWNER_EPOCH,
        ST_OWNER_BUMP,
        ST_CALL_INSERT,
        ST_CALL_BY_ID,
        ST_CALL_BY_REQUEST,
        ST_CALL_CLOSE,
        ST_PAGE_CALLS,
        ST_PAGE_OP_CALLS,
        ST_PAGE_AUDIT,
        ST_PAGE_STATE,
        ST_PAGE_SAMPLES,
        ST_CALLS_TOTAL,
        ST_AUDIT_INSERT,
        ST_SAMPLE_PRUNE,
        ST_SAMPLE_LAST,
        ST_SAMPLE_BLANK,
        ST_PAGE_REFUSALS,
        ST_REFUSALS_ADD,
        ST_REFUSALS_PRUNE,
        ST_SHARE_OF_EPOCH,
        ST_SHARE_SET,
        ST_SPLIT_GET,
        ST_SPLIT_PUT,
        ST_SPLIT_WANT,
        ST_HOLD_GET,
        ST_HOLD_RAISE,
        ST_CONTROLS_GET,
        ST_CONTROLS_PUT,
        ST_ACCOUNT_AUDIT_INSERT,
        ST_PAGE_ACCOUNT_AUDIT,
        ST_OP_BY_REFUND,
        /* made at open from the transition table (store_sqlite.c) */
        ST_PICK_FIRST,
        ST_DYN_FIRST = ST_PICK_FIRST,
        ST_PICK_AGAIN,
        ST_NEXT_DUE,
        ST_ANY_PENDING,
        ST_BATCH_DEADLINE,
        ST_BATCH_KEY_AGE,
        ST_BATCH_RECOVER,
        /* made at open from the vocabularies (core/names.h) */
        ST_PAGE_MANUAL,
        ST_COUNT_BY_STATE,
        ST_OLDEST_OPEN,
        ST_SAMPLE_PUT,
        ST_COUNT_ACCOUNT,
        ST_PROVIDER_PENDING,
        ST_COUNT
};
#define ST_DYN_COUNT   (ST_COUNT - ST_DYN_FIRST)
#define STATES_SQL_MAX 128 /* "state IN (...)" of every state fits */

/* store_sqlite_life.c's statements */
enum life_stmt {
        LIFE_COUNTER_ADD,
        LIFE_PRUNE_PICK,
        LIFE_PERMIT_PUT,
        LIFE_PERMIT_DROP,
        LIFE_CALLS_DELETE,
        LIFE_OP_DELETE,
        LIFE_COUNT
};

/* ".owner", ".split", ".share63", with ".<account>" before them for an
 * account other than the default */
#define SQLITE_LOCK_SUFFIX_MAX (16 + TG_ACCOUNT_NAME_MAX + 1)

struct sqlite_store {
        struct store base; /* first: the neutral layer sees only this */
        sqlite3 *db;
        sqlite3_stmt *stmts[ST_COUNT];
        char dyn_sql[ST_DYN_COUNT][1024];
        char *db_path;   /* as opened */
        char *lock_path; /* of the share lock taken last: "<db>.owner" (share 0), ".share<k>" */
        int lock_fd;     /* >= 0 while this handle holds a share lock */
        int split_fd;    /* >= 0 while this handle holds the acquirers' lock */
        /* synchronous=NORMAL is in force (only for an outcome); any other
         * write transaction puts FULL back first. */
        bool sync_normal;
        /* the lifecycle's statements (store_sqlite_life.c), prepared on use */
        sqlite3_stmt *life[LIFE_COUNT];
};

static inline struct sqlite_store *S(struct store *store)
{
        return (struct sqlite_store *)store;
}

/* ---- statements and columns (store_sqlite.c) ------------------------------ */

/* Binders return true on failure so that they chain with ||; a bound text
 * must outlive the statement's next reset. */
bool store_sqlite_bind_i64(sqlite3_stmt *st, int idx, int64_t v);
bool store_sqlite_bind_text(sqlite3_stmt *st, int idx, const char *text, size_t bound);
void store_sqlite_col_copy(sqlite3_stmt *st, int col, char *dst, size_t dst_size);
const char *store_sqlite_col_text(sqlite3_stmt *st, int col);
int store_sqlite_exec_sql(struct sqlite_store *s, const char *sql);
int store_sqlite_map_rc(int rc);
void store_sqlite_stmt_done(sqlite3_stmt *st);
int store_sqlite_stmt_get(struct sqlite_store *s, enum stmt_id id, sqlite3_stmt **ret_stmt);
int store_sqlite_stmt_run(sqlite3_stmt *st);

/* ---- primitives (store_backend.h) ----------------------------------------- */

/* store_sqlite.c: tx; store_sqlite_rows.c: ops, calls, audit, pages, stats,
 * samples; store_sqlite_lock.c: locks, epochs, the split. */
int store_sqlite_tx(struct store *store, enum store_tx kind, unsigned flags, store_tx_fn fn,
                    void *ctx);
bool store_sqlite_tx_commit_unknown(const struct store *store);
int store_sqlite_op_get(struct store *store, const char *key, int64_t id, bool lock,
                        struct op_record *ret_op);
int store_sqlite_op_insert(struct store *store, const struct op_record *op, int64_t *ret_id);
int store_sqlite_op_put(struct store *store, const struct op_record *op);
int store_sqlite_op_pick(struct store *store, const struct store_pick *pick, int64_t *ret_id);
int store_sqlite_op_batch(struct store *store, const struct store_batch *batch, unsigned max,
                          struct op_record *buf, unsigned *ret_n);
int store_sqlite_due_summary(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending);
int store_sqlite_call_insert(struct store *store, struct call_record *call);
int store_sqlite_call_get(struct store *store, int64_t id, bool lock, struct call_record *ret_call);
int store_sqlite_call_find(struct store *store, const char *request_id, int64_t epoch,
                           struct call_record *ret_call);
int store_sqlite_call_close(struct store *store, const struct call_record *call);
int store_sqlite_audit_insert(struct store *store, const struct audit_record *audit);
int store_sqlite_lock_take(struct store *store, enum store_lock lock, unsigned share,
                           int64_t wait_ms);
void store_sqlite_lock_drop(struct store *store, enum store_lock lock, unsigned share);
void store_sqlite_lock_drop_all(struct store *store);
int store_sqlite_lock_held(struct store *store);
int store_sqlite_epoch_read(struct store *store, int64_t *ret_epoch);
int store_sqlite_epoch_share(struct store *store, int64_t epoch, unsigned *ret_share);
int store_sqlite_epoch_bump(struct store *store, unsigned share, int64_t *ret_epoch);
int store_sqlite_split_read(struct store *store, struct store_split *ret_split);
int store_sqlite_split_put(struct store *store, const struct store_split *split);
int store_sqlite_split_want(struct store *store);
int store_sqlite_hold_get(struct store *store, tg_wall_ms *ret_until);
int store_sqlite_hold_raise(struct store *store, tg_wall_ms until);
int store_sqlite_controls_get(struct store *store, const char *account, bool lock,
                              struct account_controls *ret_controls);
int store_sqlite_controls_put(struct store *store, const char *account,
                              const struct account_controls *c);
int store_sqlite_account_audit_insert(struct store *store, const struct account_audit_record *a);
int store_sqlite_account_audit_read(sqlite3_stmt *st, void *ret_row);
int store_sqlite_page(struct store *store, const struct store_page *page, unsigned want, void *buf,
                      unsigned *ret_n);
int store_sqlite_stats(struct store *store, struct store_stats *ret_stats);
int store_sqlite_backlog(struct store *store, const char *account, uint64_t *by_state);
int store_sqlite_provider_pending(struct store *store, const char *account, uint64_t *ret_n);
int store_sqlite_op_find_refund(struct store *store, const char *account, const char *refund_id,
                                int64_t ret_ids[2], unsigned *ret_n);
int store_sqlite_sample_put(struct store *store, const struct exit_sample *sample,
                            tg_wall_ms keep_after);
int store_sqlite_sample_last(struct store *store, struct exit_sample *ret_sample);
int store_sqlite_refusals_add(struct store *store, tg_wall_ms second, unsigned n,
                              tg_wall_ms keep_after);

/* store_sqlite_life.c: counters, prune, moved, backup (store_backend.h) */
int store_sqlite_counter_add(struct store *store, enum store_counter counter, int64_t delta);
int store_sqlite_prune_pick(struct store *store, enum op_state state, tg_wall_ms before,
                            int64_t after_at, int64_t after_id, unsigned max, int64_t *ret_ids,
                            int64_t *ret_at, unsigned *ret_n);
int store_sqlite_prune_delete(struct store *store, const int64_t *ids, unsigned n,
                              tg_wall_ms before, uint64_t *ret_calls);
bool store_sqlite_moved(struct store *store);
int store_sqlite_backup(struct store *store, const char *path);

/* store_sqlite_events.c: the events' outbox (store_backend.h) */
int store_sqlite_event_insert(struct store *store, const struct store_event *ev);
int store_sqlite_event_page(struct store *store, int64_t after_id, enum store_event_filter filter,
                            const char *account, int64_t op_id, const char *owner, unsigned want,
                            struct store_event *buf, unsigned *ret_n);
int store_sqlite_event_delivery_put(struct store *store, const struct store_event *ev);
int store_sqlite_event_prune(struct store *store, tg_wall_ms before, unsigned max, unsigned *ret_n);

/* store_sqlite_schema.c: the ordered migrations (migrations[i] takes
 * user_version i to i+1) and how many there are. */
extern const char *const store_sqlite_migrations[];
extern const int store_sqlite_migration_count;

/* The samples' columns as the statements read them (a migration copies
 * samples by them too). */
#define SAMPLE_COLS                                                                                \
        "at, epoch, in_flight, starts, call_ends, op_closes, held, oldest_open, figures, share, "  \
        "n_pending, n_in_flight, n_retry_wait, n_unknown, n_manual"

#endif
