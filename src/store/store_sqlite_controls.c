/*
 * store_sqlite_controls — the run-time account controls (issue 26 §5) for
 * the SQLite backend: the account's row of account_controls and the rows of
 * the account audit trail (store_backend.h's controls primitives; the change
 * itself, with its audit row in the same transaction, is store_controls.c's).
 *
 * Every write transaction here is BEGIN IMMEDIATE: it holds the database's
 * write lock to its end, so two changes of one account never interleave and
 * the `lock` of controls_get needs nothing more.
 */
#include <string.h>

#include "core/tg_error.h"
#include "store/sqlite_int.h"

int store_sqlite_controls_get(struct store *store, const char *account, bool lock,
                              struct account_controls *ret_controls)
{
        struct sqlite_store *s = S(store);
        struct account_controls c;
        sqlite3_stmt *st = NULL;
        int64_t max_in_flight, paused;
        int r = store_sqlite_stmt_get(s, ST_CONTROLS_GET, &st), rc;

        (void)lock; /* the write transaction's own lock (above) */
        if (r < 0)
                return r;
        if (store_sqlite_bind_text(st, 1, account, TG_ACCOUNT_NAME_MAX)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : store_sqlite_map_rc(rc);
                store_sqlite_stmt_done(st);
                return r;
        }
        memset(&c, 0, sizeof(c));
        c.starts_per_second = sqlite3_column_double(st, 0);
        max_in_flight = sqlite3_column_int64(st, 1);
        paused = sqlite3_column_int64(st, 2);
        c.changed_at = sqlite3_column_int64(st, 3);
        store_sqlite_col_copy(st, 4, c.changed_by, sizeof(c.changed_by));
        store_sqlite_stmt_done(st);
        if (max_in_flight < 0 || max_in_flight > UINT32_MAX || (paused != 0 && paused != 1))
                return TG_ESTORE;
        c.max_in_flight = (unsigned)max_in_flight;
        c.paused = paused == 1;
        *ret_controls = c;
        return 0;
}

int store_sqlite_controls_put(struct store *store, const char *account,
                              const struct account_controls *c)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_CONTROLS_PUT, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_text(st, 1, account, TG_ACCOUNT_NAME_MAX) ||
            sqlite3_bind_double(st, 2, c->starts_per_second) != SQLITE_OK ||
            store_sqlite_bind_i64(st, 3, c->max_in_flight) ||
            store_sqlite_bind_i64(st, 4, c->paused ? 1 : 0) ||
            store_sqlite_bind_i64(st, 5, c->changed_at) ||
            store_sqlite_bind_text(st, 6, c->changed_by, sizeof(c->changed_by) - 1)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return store_sqlite_stmt_run(st);
}

int store_sqlite_account_audit_insert(struct store *store, const struct account_audit_record *a)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_ACCOUNT_AUDIT_INSERT, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_text(st, 1, a->account, sizeof(a->account) - 1) ||
            store_sqlite_bind_i64(st, 2, a->at) ||
            store_sqlite_bind_text(st, 3, a->action, sizeof(a->action) - 1) ||
            store_sqlite_bind_text(st, 4, a->principal, sizeof(a->principal) - 1) ||
            store_sqlite_bind_text(st, 5, a->reason, sizeof(a->reason) - 1) ||
            store_sqlite_bind_text(st, 6, a->detail, sizeof(a->detail) - 1)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return store_sqlite_stmt_run(st);
}

/* A row of ST_PAGE_ACCOUNT_AUDIT (store_sqlite_page()). */
int store_sqlite_account_audit_read(sqlite3_stmt *st, void *ret_row)
{
        struct account_audit_record a;

        memset(&a, 0, sizeof(a));
        a.id = sqlite3_column_int64(st, 0);
        store_sqlite_col_copy(st, 1, a.account, sizeof(a.account));
        a.at = sqlite3_column_int64(st, 2);
        store_sqlite_col_copy(st, 3, a.action, sizeof(a.action));
        store_sqlite_col_copy(st, 4, a.principal, sizeof(a.principal));
        store_sqlite_col_copy(st, 5, a.reason, sizeof(a.reason));
        store_sqlite_col_copy(st, 6, a.detail, sizeof(a.detail));
        memcpy(ret_row, &a, sizeof(a));
        return 0;
}
