/*
 * store_mysql_controls — the run-time account controls (issue 26 §5) for
 * the MariaDB backend: the account's row of account_controls and the rows of
 * the account audit trail (store_backend.h's controls primitives; the change
 * itself, with its audit row in the same transaction, is store_controls.c's).
 *
 * A change reads the row it replaces FOR UPDATE, inserting an empty one
 * first when the account has none (INSERT IGNORE waits for another
 * transaction's insert of the same key), so two changes of one account are
 * serialized under READ COMMITTED, where no gap is locked.
 */
#ifdef TG_HAVE_MARIADB /* the whole file: CMake defines it with libmariadb */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/mysql_int.h"

#define CONTROLS_NCOLS 5
#define AA_NCOLS       7

int store_mysql_controls_get(struct store *store, const char *account, bool lock,
                             struct account_controls *ret_controls)
{
        struct mysql_store *s = M(store);
        struct account_controls c;
        const unsigned long *lens;
        MYSQL_RES *res;
        MYSQL_ROW row;
        bool ok = true;
        int64_t paused;
        int r = 0;

        if (lock)
                r = store_mysql_exec(s,
                                     "INSERT IGNORE INTO account_controls (account, "
                                     "starts_per_second, max_in_flight, paused, changed_at, "
                                     "changed_by) VALUES (%S, 0, 0, 0, 0, '')",
                                     account);
        if (r == 0)
                r = store_mysql_query(s, &res,
                                      "SELECT starts_per_second, max_in_flight, paused, "
                                      "changed_at, changed_by FROM account_controls "
                                      "WHERE account = %S%s",
                                      account, lock ? " FOR UPDATE" : "");
        if (r < 0)
                return r;
        row = mysql_fetch_row(res);
        if (!row) {
                mysql_free_result(res);
                return TG_ENOTFOUND;
        }
        lens = mysql_fetch_lengths(res);
        memset(&c, 0, sizeof(c));
        ok = lens && mysql_num_fields(res) == CONTROLS_NCOLS && row[0];
        if (ok) {
                char *end;

                errno = 0;
                c.starts_per_second = strtod(row[0], &end);
                ok = errno == 0 && end != row[0] && *end == '\0';
        }
        c.max_in_flight = store_mysql_col_uns(row, 1, &ok);
        paused = store_mysql_col_i64(row, 2, &ok);
        c.changed_at = store_mysql_col_i64(row, 3, &ok);
        if (ok)
                store_mysql_col_copy(row, lens, 4, c.changed_by, sizeof(c.changed_by));
        mysql_free_result(res);
        if (!ok || (paused != 0 && paused != 1))
                return TG_ESTORE;
        c.paused = paused == 1;
        *ret_controls = c;
        return 0;
}

int store_mysql_controls_put(struct store *store, const char *account,
                             const struct account_controls *c)
{
        char rate[40];

        /* a number we print ourselves: trusted text for %s */
        snprintf(rate, sizeof(rate), "%.17g", c->starts_per_second);
        return store_mysql_exec(M(store),
                                "REPLACE INTO account_controls (account, starts_per_second, "
                                "max_in_flight, paused, changed_at, changed_by) "
                                "VALUES (%S, %s, %U, %I, %I, %S)",
                                account, rate, c->max_in_flight, (int64_t)(c->paused ? 1 : 0),
                                c->changed_at, c->changed_by);
}

int store_mysql_account_audit_insert(struct store *store, const struct account_audit_record *a)
{
        return store_mysql_exec(M(store),
                                "INSERT INTO account_audit (account, at, action, principal, "
                                "reason, detail) VALUES (%S, %I, %S, %S, %S, %S)",
                                a->account, a->at, a->action, a->principal, a->reason, a->detail);
}

/* A row of the account audit page (store_mysql_page()). */
int store_mysql_account_audit_read(MYSQL_RES *res, MYSQL_ROW row, void *ret_row)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        struct account_audit_record a;
        bool ok = lens != NULL && mysql_num_fields(res) == AA_NCOLS;

        if (!ok)
                return TG_ESTORE;
        memset(&a, 0, sizeof(a));
        a.id = store_mysql_col_i64(row, 0, &ok);
        store_mysql_col_copy(row, lens, 1, a.account, sizeof(a.account));
        a.at = store_mysql_col_i64(row, 2, &ok);
        store_mysql_col_copy(row, lens, 3, a.action, sizeof(a.action));
        store_mysql_col_copy(row, lens, 4, a.principal, sizeof(a.principal));
        store_mysql_col_copy(row, lens, 5, a.reason, sizeof(a.reason));
        store_mysql_col_copy(row, lens, 6, a.detail, sizeof(a.detail));
        if (!ok)
                return TG_ESTORE;
        memcpy(ret_row, &a, sizeof(a));
        return 0;
}

#endif /* TG_HAVE_MARIADB */
