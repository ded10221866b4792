/*
 * store_mysql_events — the MariaDB backend's primitives of the events'
 * outbox (store_backend.h, store_events.h). A writer updates the 'events'
 * counter row before its INSERT and holds that row's lock to its COMMIT:
 * AUTO_INCREMENT ids are then handed out in commit order, so a reader past
 * id N never later finds a new event below N.
 */
#ifdef TG_HAVE_MARIADB

#include <mysql.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/mysql_int.h"

#define EVENT_COLS                                                                                 \
        "id, op_id, operation_id, at, state, from_state, reason, refund_id, amount, currency, "    \
        "delivery, attempts, next_at, delivered_at, last_error, account, notify_url, submitted_by"

int store_mysql_event_insert(struct store *store, const struct store_event *ev)
{
        struct mysql_store *s = M(store);
        /* the lock first (commit order), not the deferred counter_add */
        int r = store_mysql_exec(s, "UPDATE counters SET n = n + 1 WHERE name = %S",
                                 store_counter_text(STORE_COUNTER_EVENTS));

        if (r == 0 && s->affected != 1)
                r = TG_ESTORE; /* the counter row is missing: the schema is not ours */
        if (r == 0)
                r = store_mysql_exec(s,
                                     "INSERT INTO events (op_id, operation_id, at, state, "
                                     "from_state, reason, refund_id, amount, currency, account, "
                                     "notify_url, submitted_by) "
                                     "VALUES (%I, %S, %I, %S, %S, %S, %S, %I, %S, %S, %S, %S)",
                                     ev->op_id, ev->operation_id, ev->at, op_state_name(ev->state),
                                     op_state_name(ev->from_state), manual_reason_name(ev->reason),
                                     ev->refund_id, ev->amount, ev->currency, ev->account,
                                     ev->notify_url, ev->submitted_by);
        return r;
}

static int read_event(MYSQL_RES *res, MYSQL_ROW row, struct store_event *ev)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        bool ok = true;
        int64_t d;

        memset(ev, 0, sizeof(*ev));
        ev->id = store_mysql_col_i64(row, 0, &ok);
        ev->op_id = store_mysql_col_i64(row, 1, &ok);
        store_mysql_col_copy(row, lens, 2, ev->operation_id, sizeof(ev->operation_id));
        ev->at = store_mysql_col_i64(row, 3, &ok);
        if (op_state_parse(store_mysql_col_text(row, 4), &ev->state) < 0 ||
            op_state_parse(store_mysql_col_text(row, 5), &ev->from_state) < 0 ||
            manual_reason_parse(store_mysql_col_text(row, 6), &ev->reason) < 0)
                ok = false;
        store_mysql_col_copy(row, lens, 7, ev->refund_id, sizeof(ev->refund_id));
        ev->amount = store_mysql_col_i64(row, 8, &ok);
        store_mysql_col_copy(row, lens, 9, ev->currency, sizeof(ev->currency));
        d = store_mysql_col_i64(row, 10, &ok);
        ev->attempts = store_mysql_col_uns(row, 11, &ok);
        ev->next_at = store_mysql_col_i64(row, 12, &ok);
        ev->delivered_at = store_mysql_col_i64(row, 13, &ok);
        store_mysql_col_copy(row, lens, 14, ev->last_error, sizeof(ev->last_error));
        store_mysql_col_copy(row, lens, 15, ev->account, sizeof(ev->account));
        store_mysql_col_copy(row, lens, 16, ev->notify_url, sizeof(ev->notify_url));
        store_mysql_col_copy(row, lens, 17, ev->submitted_by, sizeof(ev->submitted_by));
        if (!ok || d < 0 || d > STORE_DELIVERY_PARKED)
                return TG_ESTORE;
        ev->delivery = (enum store_delivery)d;
        return 0;
}

int store_mysql_event_page(struct store *store, int64_t after_id, enum store_event_filter filter,
                           const char *account, int64_t op_id, const char *owner, unsigned want,
                           struct store_event *buf, unsigned *ret_n)
{
        MYSQL_RES *res;
        unsigned n = 0;
        int r = store_mysql_query(M(store), &res,
                                  "SELECT " EVENT_COLS " FROM events WHERE %s AND id > %I AND "
                                  "(%S = '' OR account = %S) AND (%I = 0 OR op_id = %I) AND "
                                  "(%S = '' OR submitted_by IN ('', %S)) "
                                  "ORDER BY id LIMIT %U",
                                  store_event_filter_sql(filter), after_id, account ? account : "",
                                  account ? account : "", op_id, op_id, owner ? owner : "",
                                  owner ? owner : "", want);

        if (r < 0)
                return r;
        while (r == 0 && n < want) {
                MYSQL_ROW row = mysql_fetch_row(res);

                if (!row)
                        break;
                r = read_event(res, row, &buf[n]);
                if (r == 0)
                        n++;
        }
        mysql_free_result(res);
        if (r == 0)
                *ret_n = n;
        return r;
}

int store_mysql_event_delivery_put(struct store *store, const struct store_event *ev)
{
        /* affected rows counts changed rows only: an identical write is 0 */
        return store_mysql_exec(M(store),
                                "UPDATE events SET delivery = %I, attempts = %U, next_at = %I, "
                                "delivered_at = %I, last_error = %S WHERE id = %I",
                                (int64_t)ev->delivery, ev->attempts, ev->next_at, ev->delivered_at,
                                ev->last_error, ev->id);
}

int store_mysql_event_prune(struct store *store, tg_wall_ms before, unsigned max, unsigned *ret_n)
{
        struct mysql_store *s = M(store);
        MYSQL_RES *res;
        MYSQL_ROW row;
        int64_t newest = 0;
        bool ok = true;
        /* MariaDB refuses a subquery on the table a DELETE changes */
        int r = store_mysql_query(s, &res, "SELECT COALESCE(MAX(id), 0) FROM events");

        if (r < 0)
                return r;
        row = mysql_fetch_row(res);
        if (row)
                newest = store_mysql_col_i64(row, 0, &ok);
        if (!row || !ok)
                r = TG_ESTORE;
        mysql_free_result(res);
        /* delivered (1) before the cutoff, oldest id first, never the
         * newest event; the index (delivery, id) finds them */
        if (r == 0)
                r = store_mysql_exec(s,
                                     "DELETE FROM events WHERE delivery = 1 AND delivered_at < %I "
                                     "AND id < %I ORDER BY id LIMIT %U",
                                     before, newest, max);
        if (r == 0)
                *ret_n = (unsigned)s->affected;
        return r;
}

#endif /* TG_HAVE_MARIADB */
