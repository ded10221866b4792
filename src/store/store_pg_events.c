/*
 * store_pg_events — the PostgreSQL backend's primitives of the events'
 * outbox (store_backend.h, store_events.h). A writer updates the 'events'
 * counter row before its INSERT and holds that row's lock to its COMMIT:
 * identity values are then taken in commit order, so a reader past id N
 * never later finds a new event below N.
 */
#ifdef TG_HAVE_PG

#include <libpq-fe.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/pg_int.h"

#define EVENT_COLS                                                                                 \
        "id, op_id, operation_id, at, state, from_state, reason, refund_id, amount, currency, "    \
        "delivery, attempts, next_at, delivered_at, last_error, account, notify_url, submitted_by"

int store_pg_event_insert(struct store *store, const struct store_event *ev)
{
        struct pg_store *s = P(store);
        /* the lock first (commit order), not the deferred counter_add */
        int r = store_pg_exec(s, "UPDATE counters SET n = n + 1 WHERE name = %S",
                              store_counter_text(STORE_COUNTER_EVENTS));

        if (r == 0 && s->affected != 1)
                r = TG_ESTORE; /* the counter row is missing: the schema is not ours */
        if (r == 0)
                r = store_pg_exec(s,
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

static int read_event(const PGresult *res, int row, struct store_event *ev)
{
        bool ok = true;
        int64_t d;

        memset(ev, 0, sizeof(*ev));
        ev->id = store_pg_col_i64(res, row, 0, &ok);
        ev->op_id = store_pg_col_i64(res, row, 1, &ok);
        store_pg_col_copy(res, row, 2, ev->operation_id, sizeof(ev->operation_id));
        ev->at = store_pg_col_i64(res, row, 3, &ok);
        if (op_state_parse(store_pg_col_text(res, row, 4), &ev->state) < 0 ||
            op_state_parse(store_pg_col_text(res, row, 5), &ev->from_state) < 0 ||
            manual_reason_parse(store_pg_col_text(res, row, 6), &ev->reason) < 0)
                ok = false;
        store_pg_col_copy(res, row, 7, ev->refund_id, sizeof(ev->refund_id));
        ev->amount = store_pg_col_i64(res, row, 8, &ok);
        store_pg_col_copy(res, row, 9, ev->currency, sizeof(ev->currency));
        d = store_pg_col_i64(res, row, 10, &ok);
        ev->attempts = store_pg_col_uns(res, row, 11, &ok);
        ev->next_at = store_pg_col_i64(res, row, 12, &ok);
        ev->delivered_at = store_pg_col_i64(res, row, 13, &ok);
        store_pg_col_copy(res, row, 14, ev->last_error, sizeof(ev->last_error));
        store_pg_col_copy(res, row, 15, ev->account, sizeof(ev->account));
        store_pg_col_copy(res, row, 16, ev->notify_url, sizeof(ev->notify_url));
        store_pg_col_copy(res, row, 17, ev->submitted_by, sizeof(ev->submitted_by));
        if (!ok || d < 0 || d > STORE_DELIVERY_PARKED)
                return TG_ESTORE;
        ev->delivery = (enum store_delivery)d;
        return 0;
}

int store_pg_event_page(struct store *store, int64_t after_id, enum store_event_filter filter,
                        const char *account, int64_t op_id, const char *owner, unsigned want,
                        struct store_event *buf, unsigned *ret_n)
{
        PGresult *res;
        unsigned n = 0;
        int r = store_pg_query(P(store), &res,
                               "SELECT " EVENT_COLS " FROM events WHERE %s AND id > %I AND "
                               "(%S = '' OR account = %S) AND (%I = 0 OR op_id = %I) AND "
                               "(%S = '' OR submitted_by IN ('', %S)) "
                               "ORDER BY id LIMIT %U",
                               store_event_filter_sql(filter), after_id, account ? account : "",
                               account ? account : "", op_id, op_id, owner ? owner : "",
                               owner ? owner : "", want);

        if (r < 0)
                return r;
        int rows = PQntuples(res);
        while (r == 0 && n < want && (int)n < rows) {
                r = read_event(res, (int)n, &buf[n]);
                if (r == 0)
                        n++;
        }
        PQclear(res);
        if (r == 0)
                *ret_n = n;
        return r;
}

int store_pg_event_delivery_put(struct store *store, const struct store_event *ev)
{
        struct pg_store *s = P(store);
        int r = store_pg_exec(s,
                              "UPDATE events SET delivery = %I, attempts = %U, next_at = %I, "
                              "delivered_at = %I, last_error = %S WHERE id = %I",
                              (int64_t)ev->delivery, ev->attempts, ev->next_at, ev->delivered_at,
                              ev->last_error, ev->id);

        if (r == 0 && s->affected != 1)
                r = TG_ENOTFOUND;
        return r;
}

int store_pg_event_prune(struct store *store, tg_wall_ms before, unsigned max, unsigned *ret_n)
{
        struct pg_store *s = P(store);
        /* delivered (1) before the cutoff, oldest id first, never the
         * newest event; the index (delivery, id) finds them */
        int r =
            store_pg_exec(s,
                          "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE "
                          "delivery = 1 AND delivered_at < %I AND "
                          "id < (SELECT COALESCE(MAX(id), 0) FROM events) ORDER BY id LIMIT %U)",
                          before, max);

        if (r == 0)
                *ret_n = (unsigned)s->affected;
        return r;
}

#endif /* TG_HAVE_PG */
