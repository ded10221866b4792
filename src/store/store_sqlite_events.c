/*
 * store_sqlite_events — the SQLite backend's primitives of the events'
 * outbox (store_backend.h, store_events.h). One writer at a time holds the
 * database's write lock from its first write to its COMMIT, so the ids
 * AUTOINCREMENT hands out grow with commit order without a lock of ours;
 * the 'events' counter still counts every event written.
 *
 * The statements are prepared per use: an event is written once per
 * announced change, far less often than the exit's own statements.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/sqlite_int.h"

#define EVENT_COLS                                                                                 \
        "id, op_id, operation_id, at, state, from_state, reason, refund_id, amount, currency, "    \
        "delivery, attempts, next_at, delivered_at, last_error, account, notify_url, submitted_by"

static int prepare(struct sqlite_store *s, const char *sql, sqlite3_stmt **ret)
{
        int rc = sqlite3_prepare_v2(s->db, sql, -1, ret, NULL);

        if (rc != SQLITE_OK) {
                sqlite3_finalize(*ret);
                *ret = NULL;
                return store_sqlite_map_rc(rc);
        }
        return 0;
}

static bool bind_word(sqlite3_stmt *st, int idx, const char *w)
{
        return store_sqlite_bind_text(st, idx, w, strlen(w));
}

int store_sqlite_event_insert(struct store *store, const struct store_event *ev)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_counter_add(store, STORE_COUNTER_EVENTS, 1);

        if (r == 0)
                r = prepare(
                    s,
                    "INSERT INTO events (op_id, operation_id, at, state, from_state, "
                    "reason, refund_id, amount, currency, account, notify_url, submitted_by) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                    &st);
        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, ev->op_id) ||
            store_sqlite_bind_text(st, 2, ev->operation_id, sizeof(ev->operation_id) - 1) ||
            store_sqlite_bind_i64(st, 3, ev->at) || bind_word(st, 4, op_state_name(ev->state)) ||
            bind_word(st, 5, op_state_name(ev->from_state)) ||
            bind_word(st, 6, manual_reason_name(ev->reason)) ||
            store_sqlite_bind_text(st, 7, ev->refund_id, sizeof(ev->refund_id) - 1) ||
            store_sqlite_bind_i64(st, 8, ev->amount) ||
            store_sqlite_bind_text(st, 9, ev->currency, sizeof(ev->currency) - 1) ||
            store_sqlite_bind_text(st, 10, ev->account, sizeof(ev->account) - 1) ||
            store_sqlite_bind_text(st, 11, ev->notify_url, sizeof(ev->notify_url) - 1) ||
            store_sqlite_bind_text(st, 12, ev->submitted_by, sizeof(ev->submitted_by) - 1))
                r = TG_ESTORE;
        if (r == 0)
                r = store_sqlite_map_rc(sqlite3_step(st));
        sqlite3_finalize(st);
        return r;
}

static int read_event(sqlite3_stmt *st, struct store_event *ev)
{
        int64_t d = sqlite3_column_int64(st, 10), a = sqlite3_column_int64(st, 11);

        memset(ev, 0, sizeof(*ev));
        ev->id = sqlite3_column_int64(st, 0);
        ev->op_id = sqlite3_column_int64(st, 1);
        store_sqlite_col_copy(st, 2, ev->operation_id, sizeof(ev->operation_id));
        ev->at = sqlite3_column_int64(st, 3);
        if (op_state_parse(store_sqlite_col_text(st, 4), &ev->state) < 0 ||
            op_state_parse(store_sqlite_col_text(st, 5), &ev->from_state) < 0 ||
            manual_reason_parse(store_sqlite_col_text(st, 6), &ev->reason) < 0 || d < 0 ||
            d > STORE_DELIVERY_PARKED || a < 0 || a > 1000000000)
                return TG_ESTORE;
        store_sqlite_col_copy(st, 7, ev->refund_id, sizeof(ev->refund_id));
        ev->amount = sqlite3_column_int64(st, 8);
        store_sqlite_col_copy(st, 9, ev->currency, sizeof(ev->currency));
        ev->delivery = (enum store_delivery)d;
        ev->attempts = (unsigned)a;
        ev->next_at = sqlite3_column_int64(st, 12);
        ev->delivered_at = sqlite3_column_int64(st, 13);
        store_sqlite_col_copy(st, 14, ev->last_error, sizeof(ev->last_error));
        store_sqlite_col_copy(st, 15, ev->account, sizeof(ev->account));
        store_sqlite_col_copy(st, 16, ev->notify_url, sizeof(ev->notify_url));
        store_sqlite_col_copy(st, 17, ev->submitted_by, sizeof(ev->submitted_by));
        return 0;
}

int store_sqlite_event_page(struct store *store, int64_t after_id, enum store_event_filter filter,
                            const char *account, int64_t op_id, const char *owner, unsigned want,
                            struct store_event *buf, unsigned *ret_n)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        char sql[512];
        unsigned n = 0;
        int r;

        /* the whole statement or none: a cut one would prepare as something else */
        if ((size_t)snprintf(sql, sizeof(sql),
                             "SELECT " EVENT_COLS " FROM events WHERE %s AND id > ?1 AND "
                             "(?3 IS NULL OR account = ?3) AND (?4 = 0 OR op_id = ?4) AND "
                             "(?5 IS NULL OR submitted_by IN ('', ?5)) "
                             "ORDER BY id LIMIT ?2",
                             store_event_filter_sql(filter)) >= sizeof(sql))
                return TG_EINVAL;
        r = prepare(s, sql, &st);
        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, after_id) || store_sqlite_bind_i64(st, 2, want) ||
            (account && store_sqlite_bind_text(st, 3, account, TG_ACCOUNT_NAME_MAX)) ||
            store_sqlite_bind_i64(st, 4, op_id) ||
            (owner && store_sqlite_bind_text(st, 5, owner, TG_SUBMITTER_MAX)))
                r = TG_ESTORE;
        while (r == 0 && n < want) {
                int rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        break;
                if (rc != SQLITE_ROW) {
                        r = store_sqlite_map_rc(rc);
                        break;
                }
                r = read_event(st, &buf[n]);
                if (r == 0)
                        n++;
        }
        sqlite3_finalize(st);
        if (r == 0)
                *ret_n = n;
        return r;
}

int store_sqlite_event_delivery_put(struct store *store, const struct store_event *ev)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = prepare(s,
                        "UPDATE events SET delivery = ?2, attempts = ?3, next_at = ?4, "
                        "delivered_at = ?5, last_error = ?6 WHERE id = ?1",
                        &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, ev->id) || store_sqlite_bind_i64(st, 2, ev->delivery) ||
            store_sqlite_bind_i64(st, 3, ev->attempts) ||
            store_sqlite_bind_i64(st, 4, ev->next_at) ||
            store_sqlite_bind_i64(st, 5, ev->delivered_at) ||
            store_sqlite_bind_text(st, 6, ev->last_error, sizeof(ev->last_error) - 1))
                r = TG_ESTORE;
        if (r == 0)
                r = store_sqlite_map_rc(sqlite3_step(st));
        if (r == 0 && sqlite3_changes(s->db) != 1)
                r = TG_ENOTFOUND;
        sqlite3_finalize(st);
        return r;
}

int store_sqlite_event_prune(struct store *store, tg_wall_ms before, unsigned max, unsigned *ret_n)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        /* delivered (1) before the cutoff, oldest id first, never the
         * newest event; the index (delivery, id) finds them */
        int r = prepare(s,
                        "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE "
                        "delivery = 1 AND delivered_at < ?1 AND "
                        "id < (SELECT MAX(id) FROM events) ORDER BY id LIMIT ?2)",
                        &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, before) || store_sqlite_bind_i64(st, 2, max))
                r = TG_ESTORE;
        if (r == 0)
                r = store_sqlite_map_rc(sqlite3_step(st));
        if (r == 0)
                *ret_n = (unsigned)sqlite3_changes(s->db);
        sqlite3_finalize(st);
        return r;
}
