/*
 * store_pg_controls — the run-time account controls (issue 26 §5) for the
 * PostgreSQL backend: the account's row of account_controls and the rows of
 * the account audit trail (store_backend.h's controls primitives; the change
 * itself, with its audit row in the same transaction, is store_controls.c's).
 *
 * A change reads the row it replaces FOR UPDATE, inserting an empty one
 * first when the account has none (ON CONFLICT DO NOTHING waits for another
 * transaction's insert of the same key), so two changes of one account are
 * serialized under READ COMMITTED.
 */
#ifdef TG_HAVE_PG /* the whole file: CMake defines it with libpq */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/pg_int.h"

#define CONTROLS_NCOLS 5
#define AA_NCOLS       7

int store_pg_controls_get(struct store *store, const char *account, bool lock,
                          struct account_controls *ret_controls)
{
        struct pg_store *s = P(store);
        struct account_controls c;
        PGresult *res;
        bool ok = true;
        int64_t paused, max_in_flight;
        int r = 0;

        if (lock)
                r = store_pg_exec(s,
                                  "INSERT INTO account_controls (account, starts_per_second, "
                                  "max_in_flight, paused, changed_at, changed_by) "
                                  "VALUES (%S, 0, 0, 0, 0, '') ON CONFLICT (account) DO NOTHING",
                                  account);
        if (r == 0)
                r = store_pg_query(s, &res,
                                   "SELECT starts_per_second, max_in_flight, paused, changed_at, "
                                   "changed_by FROM account_controls WHERE account = %S%s",
                                   account, lock ? " FOR UPDATE" : "");
        if (r < 0)
                return r;
        if (PQntuples(res) < 1) {
                PQclear(res);
                return TG_ENOTFOUND;
        }
        memset(&c, 0, sizeof(c));
        ok = PQnfields(res) == CONTROLS_NCOLS && !PQgetisnull(res, 0, 0);
        if (ok) {
                const char *text = PQgetvalue(res, 0, 0);
                char *end;

                errno = 0;
                c.starts_per_second = strtod(text, &end);
                ok = errno == 0 && end != text && *end == '\0';
        }
        max_in_flight = store_pg_col_i64(res, 0, 1, &ok);
        paused = store_pg_col_i64(res, 0, 2, &ok);
        c.changed_at = store_pg_col_i64(res, 0, 3, &ok);
        if (ok)
                store_pg_col_copy(res, 0, 4, c.changed_by, sizeof(c.changed_by));
        PQclear(res);
        if (!ok || (paused != 0 && paused != 1) || max_in_flight < 0 || max_in_flight > UINT32_MAX)
                return TG_ESTORE;
        c.max_in_flight = (unsigned)max_in_flight;
        c.paused = paused == 1;
        *ret_controls = c;
        return 0;
}

int store_pg_controls_put(struct store *store, const char *account,
                          const struct account_controls *c)
{
        char rate[40];

        /* a number we print ourselves: trusted text for %s */
        snprintf(rate, sizeof(rate), "%.17g", c->starts_per_second);
        return store_pg_exec(
            P(store),
            "INSERT INTO account_controls (account, starts_per_second, max_in_flight, paused, "
            "changed_at, changed_by) VALUES (%S, %s, %U, %I, %I, %S) ON CONFLICT (account) DO "
            "UPDATE SET starts_per_second = EXCLUDED.starts_per_second, max_in_flight = "
            "EXCLUDED.max_in_flight, paused = EXCLUDED.paused, changed_at = EXCLUDED.changed_at, "
            "changed_by = EXCLUDED.changed_by",
            account, rate, c->max_in_flight, (int64_t)(c->paused ? 1 : 0), c->changed_at,
            c->changed_by);
}

int store_pg_account_audit_insert(struct store *store, const struct account_audit_record *a)
{
        return store_pg_exec(P(store),
                             "INSERT INTO account_audit (account, at, action, principal, reason, "
                             "detail) VALUES (%S, %I, %S, %S, %S, %S)",
                             a->account, a->at, a->action, a->principal, a->reason, a->detail);
}

/* A row of the account audit page (store_pg_page()). */
int store_pg_account_audit_read(const PGresult *res, int row, void *ret_row)
{
        struct account_audit_record a;
        bool ok = PQnfields(res) == AA_NCOLS;

        if (!ok)
                return TG_ESTORE;
        memset(&a, 0, sizeof(a));
        a.id = store_pg_col_i64(res, row, 0, &ok);
        store_pg_col_copy(res, row, 1, a.account, sizeof(a.account));
        a.at = store_pg_col_i64(res, row, 2, &ok);
        store_pg_col_copy(res, row, 3, a.action, sizeof(a.action));
        store_pg_col_copy(res, row, 4, a.principal, sizeof(a.principal));
        store_pg_col_copy(res, row, 5, a.reason, sizeof(a.reason));
        store_pg_col_copy(res, row, 6, a.detail, sizeof(a.detail));
        if (!ok)
                return TG_ESTORE;
        memcpy(ret_row, &a, sizeof(a));
        return 0;
}

#endif /* TG_HAVE_PG */
