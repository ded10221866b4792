/*
 * store_sqlite_rows — the SQLite backend's row primitives (store_backend.h):
 * operations, calls and audit rows, the picks and batches that find due or
 * expired operations, the pages of the reading walks, stats and the exit's
 * samples. Every one runs inside a transaction opened by store_sqlite_tx(), whose
 * BEGIN IMMEDIATE already holds the database's write lock, so a "locked"
 * read needs nothing more here.
 */
#include <limits.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/sqlite_int.h"

/* ---- row decoders --------------------------------------------------------------- */

static bool col_unsigned(sqlite3_stmt *st, int col, unsigned *ret)
{
        int64_t v = sqlite3_column_int64(st, col);

        if (v < 0 || v > (int64_t)UINT_MAX)
                return false;
        *ret = (unsigned)v;
        return true;
}

/* Decodes an OP_COLS row. TG_ESTORE for a row that breaks the format. */
static int read_op(sqlite3_stmt *st, void *ret_row)
{
        struct op_record op;
        bool ok = true;

        memset(&op, 0, sizeof(op));
        op.id = sqlite3_column_int64(st, 0);
        store_sqlite_col_copy(st, 1, op.req.operation_id, sizeof(op.req.operation_id));
        store_sqlite_col_copy(st, 2, op.req.payment_id, sizeof(op.req.payment_id));
        op.req.amount = sqlite3_column_int64(st, 3);
        store_sqlite_col_copy(st, 4, op.req.currency, sizeof(op.req.currency));
        ok = ok && op_state_parse(store_sqlite_col_text(st, 5), &op.state) == 0;
        ok = ok && manual_reason_parse(store_sqlite_col_text(st, 6), &op.reason) == 0;
        ok = ok && col_unsigned(st, 7, &op.attempts);
        ok = ok && col_unsigned(st, 8, &op.attempt_limit);
        ok = ok && col_unsigned(st, 9, &op.queries);
        ok = ok && col_unsigned(st, 10, &op.query_limit);
        op.accepted_at = sqlite3_column_int64(st, 11);
        op.deadline_at = sqlite3_column_int64(st, 12);
        op.key_first_used = sqlite3_column_int64(st, 13);
        op.next_run_at = sqlite3_column_int64(st, 14);
        op.updated_at = sqlite3_column_int64(st, 15);
        op.last_wait_ms = sqlite3_column_int64(st, 16);
        op.operator_resend = sqlite3_column_int64(st, 17) != 0;
        op.epoch = sqlite3_column_int64(st, 18);
        store_sqlite_col_copy(st, 19, op.refund_id, sizeof(op.refund_id));
        op.last_http_status = sqlite3_column_int(st, 20);
        ok = ok && tg_class_parse(store_sqlite_col_text(st, 21), &op.last_class) == 0;
        store_sqlite_col_copy(st, 22, op.source, sizeof(op.source));
        ok = ok && col_unsigned(st, 23, &op.share);
        store_sqlite_col_copy(st, 24, op.assignee, sizeof(op.assignee));
        store_sqlite_col_copy(st, 25, op.traceparent, sizeof(op.traceparent));
        op.caller_deadline_at = sqlite3_column_int64(st, 26);
        store_sqlite_col_copy(st, 27, op.req.reason, sizeof(op.req.reason));
        store_sqlite_col_copy(st, 28, op.req.metadata, sizeof(op.req.metadata));
        store_sqlite_col_copy(st, 29, op.req.account, sizeof(op.req.account));
        store_sqlite_col_copy(st, 30, op.req.notify_url, sizeof(op.req.notify_url));
        store_sqlite_col_copy(st, 31, op.req.submitted_by, sizeof(op.req.submitted_by));
        op.pending_since = sqlite3_column_int64(st, 32);
        ok = ok && col_unsigned(st, 33, &op.pending_polls);
        if (!ok)
                return TG_ESTORE;
        memcpy(ret_row, &op, sizeof(op));
        return 0;
}

static int read_call(sqlite3_stmt *st, void *ret_row)
{
        struct call_record c;
        bool ok = true;

        memset(&c, 0, sizeof(c));
        c.id = sqlite3_column_int64(st, 0);
        c.op_id = sqlite3_column_int64(st, 1);
        store_sqlite_col_copy(st, 2, c.operation_id, sizeof(c.operation_id));
        ok = ok && tg_call_kind_parse(store_sqlite_col_text(st, 3), &c.kind) == 0;
        ok = ok && col_unsigned(st, 4, &c.attempt);
        store_sqlite_col_copy(st, 5, c.request_id, sizeof(c.request_id));
        c.epoch = sqlite3_column_int64(st, 6);
        c.start_mono = sqlite3_column_int64(st, 7);
        c.start_wall = sqlite3_column_int64(st, 8);
        ok = ok && col_unsigned(st, 9, &c.in_flight_at_start);
        c.ended = sqlite3_column_int64(st, 10) != 0;
        c.end_mono = sqlite3_column_int64(st, 11);
        c.end_wall = sqlite3_column_int64(st, 12);
        c.sent = sqlite3_column_int64(st, 13) != 0;
        ok = ok && tg_class_parse(store_sqlite_col_text(st, 14), &c.cls) == 0;
        c.http_status = sqlite3_column_int(st, 15);
        c.latency_us = sqlite3_column_int64(st, 16);
        store_sqlite_col_copy(st, 17, c.error, sizeof(c.error));
        ok = ok && col_unsigned(st, 18, &c.share);
        store_sqlite_col_copy(st, 19, c.trace_id, sizeof(c.trace_id));
        store_sqlite_col_copy(st, 20, c.span_id, sizeof(c.span_id));
        c.handoff_mono = sqlite3_column_int64(st, 21);
        c.handoff_wall = sqlite3_column_int64(st, 22);
        if (!ok)
                return TG_ESTORE;
        memcpy(ret_row, &c, sizeof(c));
        return 0;
}

static int read_audit(sqlite3_stmt *st, void *ret_row)
{
        struct audit_record a;

        memset(&a, 0, sizeof(a));
        a.id = sqlite3_column_int64(st, 0);
        a.op_id = sqlite3_column_int64(st, 1);
        a.at = sqlite3_column_int64(st, 2);
        store_sqlite_col_copy(st, 3, a.action, sizeof(a.action));
        store_sqlite_col_copy(st, 4, a.operator_name, sizeof(a.operator_name));
        store_sqlite_col_copy(st, 5, a.reason, sizeof(a.reason));
        store_sqlite_col_copy(st, 6, a.detail, sizeof(a.detail));
        memcpy(ret_row, &a, sizeof(a));
        return 0;
}

static unsigned col_count(sqlite3_stmt *st, int col)
{
        int64_t v = sqlite3_column_int64(st, col);

        return v < 0 || v > UINT_MAX ? 0 : (unsigned)v;
}

static int read_sample(sqlite3_stmt *st, void *ret_row)
{
        struct exit_sample *x = ret_row;

        memset(x, 0, sizeof(*x));
        x->at = sqlite3_column_int64(st, 0);
        x->epoch = sqlite3_column_int64(st, 1);
        x->in_flight = col_count(st, 2);
        x->starts = col_count(st, 3);
        x->call_ends = col_count(st, 4);
        x->op_closes = col_count(st, 5);
        x->held = sqlite3_column_int64(st, 6) != 0;
        x->oldest_open_accepted_at =
            sqlite3_column_type(st, 7) == SQLITE_NULL ? TG_WALL_NEVER : sqlite3_column_int64(st, 7);
        store_sqlite_col_copy(st, 8, x->figures, sizeof(x->figures));
        x->share = col_count(st, 9);
        x->backlog[OP_PENDING] = col_count(st, 10);
        x->backlog[OP_IN_FLIGHT] = col_count(st, 11);
        x->backlog[OP_RETRY_WAIT] = col_count(st, 12);
        x->backlog[OP_UNKNOWN] = col_count(st, 13);
        x->backlog[OP_MANUAL] = col_count(st, 14);
        return 0;
}

static int read_refusal(sqlite3_stmt *st, void *ret_row)
{
        struct refusal_second *x = ret_row;

        x->at = sqlite3_column_int64(st, 0);
        x->refused = col_count(st, 1);
        return 0;
}

typedef int (*row_reader)(sqlite3_stmt *st, void *ret_row);

/* Steps a bound statement into up to max rows of buf (elements of `size`
 * bytes), then finishes it. *ret_n: rows read. */
static int fetch_rows(sqlite3_stmt *st, void *buf, size_t size, unsigned max, row_reader read,
                      unsigned *ret_n)
{
        unsigned n = 0;
        int r = 0, rc;

        while (n < max) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        break;
                if (rc != SQLITE_ROW) {
                        r = store_sqlite_map_rc(rc);
                        break;
                }
                r = read(st, (char *)buf + (size_t)n * size);
                if (r < 0)
                        break;
                n++;
        }
        store_sqlite_stmt_done(st);
        if (r == 0)
                *ret_n = n;
        return r;
}

/* One row of a bound statement: 0, or TG_ENOTFOUND when there is none. */
static int fetch_one(sqlite3_stmt *st, void *ret_row, size_t size, row_reader read)
{
        unsigned n = 0;
        int r = fetch_rows(st, ret_row, size, 1, read, &n);

        if (r == 0 && n == 0)
                r = TG_ENOTFOUND;
        return r;
}

/* One integer of a bound one-row statement; *ret_null for SQL NULL. */
static int fetch_i64(sqlite3_stmt *st, int64_t *ret, bool *ret_null)
{
        int rc = sqlite3_step(st);
        int r = 0;

        if (rc == SQLITE_ROW) {
                *ret_null = sqlite3_column_type(st, 0) == SQLITE_NULL;
                *ret = sqlite3_column_int64(st, 0);
        } else {
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : store_sqlite_map_rc(rc);
        }
        store_sqlite_stmt_done(st);
        return r;
}

/* ---- operations ------------------------------------------------------------------ */

int store_sqlite_op_get(struct store *store, const char *key, int64_t id, bool lock,
                        struct op_record *ret_op)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, key ? ST_OP_BY_KEY : ST_OP_BY_ID, &st);

        (void)lock; /* BEGIN IMMEDIATE holds the database */
        if (r < 0)
                return r;
        if (key ? store_sqlite_bind_text(st, 1, key, TG_OP_ID_MAX)
                : store_sqlite_bind_i64(st, 1, id)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return fetch_one(st, ret_op, sizeof(*ret_op), read_op);
}

int store_sqlite_op_insert(struct store *store, const struct op_record *op, int64_t *ret_id)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_OP_INSERT, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_text(st, 1, op->req.operation_id, TG_OP_ID_MAX) ||
            store_sqlite_bind_text(st, 2, op->req.payment_id, TG_PAYMENT_ID_MAX) ||
            store_sqlite_bind_i64(st, 3, op->req.amount) ||
            store_sqlite_bind_text(st, 4, op->req.currency, sizeof(op->req.currency) - 1) ||
            store_sqlite_bind_text(st, 5, op_state_name(op->state), TG_TEXT_MAX) ||
            store_sqlite_bind_text(st, 6, manual_reason_name(op->reason), TG_TEXT_MAX) ||
            store_sqlite_bind_i64(st, 7, op->attempt_limit) ||
            store_sqlite_bind_i64(st, 8, op->query_limit) ||
            store_sqlite_bind_i64(st, 9, op->accepted_at) ||
            store_sqlite_bind_i64(st, 10, op->deadline_at) ||
            store_sqlite_bind_i64(st, 11, op->updated_at) ||
            store_sqlite_bind_text(st, 12, op->source, sizeof(op->source) - 1) ||
            store_sqlite_bind_text(st, 13, tg_class_name(op->last_class), TG_TEXT_MAX) ||
            store_sqlite_bind_text(st, 14, op->traceparent, sizeof(op->traceparent) - 1) ||
            store_sqlite_bind_i64(st, 15, op->caller_deadline_at) ||
            store_sqlite_bind_text(st, 16, op->req.reason, sizeof(op->req.reason) - 1) ||
            store_sqlite_bind_text(st, 17, op->req.metadata, sizeof(op->req.metadata) - 1) ||
            store_sqlite_bind_text(st, 18, store_req_account(&op->req), TG_ACCOUNT_NAME_MAX) ||
            store_sqlite_bind_text(st, 19, op->req.notify_url, sizeof(op->req.notify_url) - 1) ||
            store_sqlite_bind_text(st, 20, op->req.submitted_by,
                                   sizeof(op->req.submitted_by) - 1)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = store_sqlite_stmt_run(st);
        if (r == 0)
                *ret_id = sqlite3_last_insert_rowid(s->db);
        return r;
}

int store_sqlite_op_put(struct store *store, const struct op_record *op)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_OP_WRITE, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, op->id) ||
            store_sqlite_bind_text(st, 2, op_state_name(op->state), TG_TEXT_MAX) ||
            store_sqlite_bind_text(st, 3, manual_reason_name(op->reason), TG_TEXT_MAX) ||
            store_sqlite_bind_i64(st, 4, op->attempts) ||
            store_sqlite_bind_i64(st, 5, op->attempt_limit) ||
            store_sqlite_bind_i64(st, 6, op->queries) ||
            store_sqlite_bind_i64(st, 7, op->query_limit) ||
            store_sqlite_bind_i64(st, 8, op->deadline_at) ||
            store_sqlite_bind_i64(st, 9, op->key_first_used) ||
            store_sqlite_bind_i64(st, 10, op->next_run_at) ||
            store_sqlite_bind_i64(st, 11, op->updated_at) ||
            store_sqlite_bind_i64(st, 12, op->last_wait_ms) ||
            store_sqlite_bind_i64(st, 13, op->operator_resend) ||
            store_sqlite_bind_i64(st, 14, op->epoch) ||
            store_sqlite_bind_text(st, 15, op->refund_id, sizeof(op->refund_id) - 1) ||
            store_sqlite_bind_i64(st, 16, op->last_http_status) ||
            store_sqlite_bind_text(st, 17, tg_class_name(op->last_class), TG_TEXT_MAX) ||
            store_sqlite_bind_i64(st, 18, op->share) ||
            store_sqlite_bind_text(st, 19, op->assignee, sizeof(op->assignee) - 1) ||
            store_sqlite_bind_text(st, 20, op->traceparent, sizeof(op->traceparent) - 1) ||
            store_sqlite_bind_text(st, 21, op->req.notify_url, sizeof(op->req.notify_url) - 1) ||
            store_sqlite_bind_i64(st, 22, op->pending_since) ||
            store_sqlite_bind_i64(st, 23, op->pending_polls)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = store_sqlite_stmt_run(st);
        if (r == 0 && sqlite3_changes(s->db) != 1)
                r = TG_ESTORE;
        return r;
}

static int run_i64(struct sqlite_store *s, enum stmt_id id, int64_t a1, int64_t *ret,
                   bool *ret_null)
{
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, id, &st);

        if (r < 0)
                return r;
        if (a1 != INT64_MIN && store_sqlite_bind_i64(st, 1, a1)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return fetch_i64(st, ret, ret_null);
}

int store_sqlite_op_pick(struct store *store, const struct store_pick *pick, int64_t *ret_id)
{
        struct sqlite_store *s = S(store);
        bool again = pick->group == STORE_GROUP_AGAIN;
        sqlite3_stmt *st = NULL;
        int64_t id = 0;
        bool null = false;
        int r;

        if (!again && pick->posts_barred)
                return TG_ENOTFOUND; /* the first group is all POSTs */
        if (again) {
                /* Nothing due (the common case while retries wait): one probe
                 * of ops_again_due instead of a walk over every waiting op. */
                int64_t next = 0;

                r = run_i64(s, ST_NEXT_DUE, INT64_MIN, &next, &null);
                if (r < 0)
                        return r;
                if (null || next > pick->now)
                        return TG_ENOTFOUND;
        }
        r = store_sqlite_stmt_get(s, again ? ST_PICK_AGAIN : ST_PICK_FIRST, &st);
        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, pick->now) ||
            (again && (store_sqlite_bind_i64(st, 2, pick->key_retention_ms) ||
                       store_sqlite_bind_i64(st, 3, store_pick_kinds(pick))))) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = fetch_i64(st, &id, &null);
        if (r == 0)
                *ret_id = id;
        return r;
}

int store_sqlite_op_batch(struct store *store, const struct store_batch *batch, unsigned max,
                          struct op_record *buf, unsigned *ret_n)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        bool bad;
        int r;

        switch (batch->kind) {
        case STORE_BATCH_DEADLINE:
        case STORE_BATCH_KEY_AGE:
                r = store_sqlite_stmt_get(
                    s, batch->kind == STORE_BATCH_DEADLINE ? ST_BATCH_DEADLINE : ST_BATCH_KEY_AGE,
                    &st);
                if (r < 0)
                        return r;
                /* ?2 is unused by the deadline's statement: binding it is harmless */
                bad = store_sqlite_bind_i64(st, 1, batch->now) ||
                      store_sqlite_bind_i64(st, 2, batch->key_retention_ms) ||
                      store_sqlite_bind_i64(st, 3, max);
                break;
        case STORE_BATCH_RECOVER:
                r = store_sqlite_stmt_get(s, ST_BATCH_RECOVER, &st);
                if (r < 0)
                        return r;
                bad = store_sqlite_bind_i64(st, 1, batch->epoch) ||
                      store_sqlite_bind_i64(st, 2, max) ||
                      store_sqlite_bind_i64(st, 3, batch->share) ||
                      store_sqlite_bind_i64(st, 4, batch->shares);
                break;
        case STORE_BATCH_OUTBOX:
        default:
                *ret_n = 0; /* no outbox in an embedded store */
                return 0;
        }
        if (bad) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return fetch_rows(st, buf, sizeof(*buf), max, read_op, ret_n);
}

int store_sqlite_due_summary(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending)
{
        struct sqlite_store *s = S(store);
        int64_t next = 0, any = 0;
        bool null = false, null2 = false;
        int r = run_i64(s, ST_NEXT_DUE, INT64_MIN, &next, &null);

        if (r == 0)
                r = run_i64(s, ST_ANY_PENDING, INT64_MIN, &any, &null2);
        if (r < 0)
                return r;
        *ret_next_run_at = null ? TG_WALL_NEVER : next;
        *ret_pending = !null2 && any != 0;
        return 0;
}

/* ---- calls and audit ---------------------------------------------------------------- */

int store_sqlite_call_insert(struct store *store, struct call_record *call)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_CALL_INSERT, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, call->op_id) ||
            store_sqlite_bind_text(st, 2, call->operation_id, TG_OP_ID_MAX) ||
            store_sqlite_bind_text(st, 3, tg_call_kind_name(call->kind), TG_TEXT_MAX) ||
            store_sqlite_bind_i64(st, 4, call->attempt) ||
            store_sqlite_bind_text(st, 5, call->request_id, TG_REQUEST_ID_MAX) ||
            store_sqlite_bind_i64(st, 6, call->epoch) ||
            store_sqlite_bind_i64(st, 7, call->start_mono) ||
            store_sqlite_bind_i64(st, 8, call->start_wall) ||
            store_sqlite_bind_i64(st, 9, call->in_flight_at_start) ||
            store_sqlite_bind_i64(st, 10, call->share) ||
            store_sqlite_bind_text(st, 11, call->trace_id, sizeof(call->trace_id) - 1) ||
            store_sqlite_bind_text(st, 12, call->span_id, sizeof(call->span_id) - 1)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = store_sqlite_stmt_run(st);
        if (r == 0)
                call->id = sqlite3_last_insert_rowid(s->db);
        return r;
}

int store_sqlite_call_get(struct store *store, int64_t id, bool lock, struct call_record *ret_call)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_CALL_BY_ID, &st);

        (void)lock;
        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, id)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return fetch_one(st, ret_call, sizeof(*ret_call), read_call);
}

int store_sqlite_call_find(struct store *store, const char *request_id, int64_t epoch,
                           struct call_record *ret_call)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_CALL_BY_REQUEST, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_text(st, 1, request_id, TG_REQUEST_ID_MAX) ||
            store_sqlite_bind_i64(st, 2, epoch)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return fetch_one(st, ret_call, sizeof(*ret_call), read_call);
}

int store_sqlite_call_close(struct store *store, const struct call_record *c)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_CALL_CLOSE, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, c->id) || store_sqlite_bind_i64(st, 2, c->end_mono) ||
            store_sqlite_bind_i64(st, 3, c->end_wall) || store_sqlite_bind_i64(st, 4, c->sent) ||
            store_sqlite_bind_text(st, 5, tg_class_name(c->cls), TG_TEXT_MAX) ||
            store_sqlite_bind_i64(st, 6, c->http_status) ||
            store_sqlite_bind_i64(st, 7, c->latency_us) ||
            store_sqlite_bind_text(st, 8, c->error, sizeof(c->error) - 1) ||
            store_sqlite_bind_i64(st, 9, c->start_mono) ||
            store_sqlite_bind_i64(st, 10, c->start_wall) ||
            store_sqlite_bind_i64(st, 11, c->handoff_mono) ||
            store_sqlite_bind_i64(st, 12, c->handoff_wall) ||
            store_sqlite_bind_i64(st, 13, c->in_flight_at_start)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = store_sqlite_stmt_run(st);
        if (r == 0 && sqlite3_changes(s->db) != 1)
                r = TG_EFENCED;
        return r;
}

int store_sqlite_audit_insert(struct store *store, const struct audit_record *a)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_AUDIT_INSERT, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, a->op_id) || store_sqlite_bind_i64(st, 2, a->at) ||
            store_sqlite_bind_text(st, 3, a->action, sizeof(a->action) - 1) ||
            store_sqlite_bind_text(st, 4, a->operator_name, sizeof(a->operator_name) - 1) ||
            store_sqlite_bind_text(st, 5, a->reason, sizeof(a->reason) - 1) ||
            store_sqlite_bind_text(st, 6, a->detail, sizeof(a->detail) - 1)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return store_sqlite_stmt_run(st);
}

/* ---- pages ---------------------------------------------------------------------------- */

int store_sqlite_page(struct store *store, const struct store_page *p, unsigned want, void *buf,
                      unsigned *ret_n)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        const char *text = NULL;
        row_reader read = read_op;
        size_t size = sizeof(struct op_record);
        bool bad = false;
        int r;

        switch (p->kind) {
        case STORE_PAGE_CALLS:
                r = store_sqlite_stmt_get(s, ST_PAGE_CALLS, &st);
                bad = r == 0 && (store_sqlite_bind_i64(st, 1, p->cur_id) ||
                                 store_sqlite_bind_i64(st, 2, want) ||
                                 store_sqlite_bind_text(st, 3, p->account, strlen(p->account)));
                read = read_call;
                size = sizeof(struct call_record);
                break;
        case STORE_PAGE_OP_CALLS:
        case STORE_PAGE_AUDIT:
                r = store_sqlite_stmt_get(
                    s, p->kind == STORE_PAGE_AUDIT ? ST_PAGE_AUDIT : ST_PAGE_OP_CALLS, &st);
                bad = r == 0 && (store_sqlite_bind_i64(st, 1, p->op_id) ||
                                 store_sqlite_bind_i64(st, 2, p->cur_id) ||
                                 store_sqlite_bind_i64(st, 3, want));
                read = p->kind == STORE_PAGE_AUDIT ? read_audit : read_call;
                size = p->kind == STORE_PAGE_AUDIT ? sizeof(struct audit_record)
                                                   : sizeof(struct call_record);
                break;
        case STORE_PAGE_STATE:
                text = op_state_name(p->state);
                r = store_sqlite_stmt_get(s, ST_PAGE_STATE, &st);
                bad = r == 0 && (store_sqlite_bind_text(st, 1, text, strlen(text)) ||
                                 store_sqlite_bind_i64(st, 2, p->cur_id) ||
                                 store_sqlite_bind_i64(st, 3, want));
                break;
        case STORE_PAGE_MANUAL:
                text = p->reason == MANUAL_NONE ? "" : manual_reason_name(p->reason);
                r = store_sqlite_stmt_get(s, ST_PAGE_MANUAL, &st);
                bad = r == 0 &&
                      (store_sqlite_bind_i64(st, 1, p->after_id) ||
                       store_sqlite_bind_i64(st, 2, p->cur_at) ||
                       store_sqlite_bind_i64(st, 3, p->cur_id) ||
                       store_sqlite_bind_i64(st, 4, want) ||
                       store_sqlite_bind_text(st, 5, text, strlen(text)) ||
                       store_sqlite_bind_i64(st, 6, p->who) ||
                       store_sqlite_bind_text(st, 7, p->assignee, sizeof(p->assignee) - 1) ||
                       store_sqlite_bind_text(st, 8, p->account, strlen(p->account)));
                break;
        case STORE_PAGE_REFUSALS:
                r = store_sqlite_stmt_get(s, ST_PAGE_REFUSALS, &st);
                bad = r == 0 && (store_sqlite_bind_i64(st, 1, p->cur_at) ||
                                 store_sqlite_bind_i64(st, 2, want));
                read = read_refusal;
                size = sizeof(struct refusal_second);
                break;
        case STORE_PAGE_ACCOUNT_AUDIT:
                r = store_sqlite_stmt_get(s, ST_PAGE_ACCOUNT_AUDIT, &st);
                bad =
                    r == 0 &&
                    (store_sqlite_bind_text(st, 1, p->account, sizeof(p->account) - 1) ||
                     store_sqlite_bind_i64(st, 2, p->cur_id) || store_sqlite_bind_i64(st, 3, want));
                read = store_sqlite_account_audit_read;
                size = sizeof(struct account_audit_record);
                break;
        case STORE_PAGE_SAMPLES:
        default:
                r = store_sqlite_stmt_get(s, ST_PAGE_SAMPLES, &st);
                bad = r == 0 && (store_sqlite_bind_i64(st, 1, p->cur_at) ||
                                 store_sqlite_bind_i64(st, 2, want) ||
                                 store_sqlite_bind_i64(st, 3, p->cur_share));
                read = read_sample;
                size = sizeof(struct exit_sample);
                break;
        }
        if (r < 0)
                return r;
        if (bad) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return fetch_rows(st, buf, size, want, read, ret_n);
}

/* ---- stats and samples ------------------------------------------------------------------ */

int store_sqlite_stats(struct store *store, struct store_stats *ret_stats)
{
        struct sqlite_store *s = S(store);
        struct store_stats stats;
        sqlite3_stmt *st = NULL;
        int64_t v = 0;
        bool null = false;
        int r, rc;

        memset(&stats, 0, sizeof(stats));
        stats.oldest_open_accepted_at = TG_WALL_NEVER;
        r = store_sqlite_stmt_get(s, ST_COUNT_BY_STATE, &st);
        while (r == 0) {
                enum op_state state;

                rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        break;
                const char *name = store_sqlite_col_text(st, 0);
                uint64_t count = (uint64_t)sqlite3_column_int64(st, 1);

                if (rc != SQLITE_ROW)
                        r = store_sqlite_map_rc(rc);
                else if (op_state_parse(name, &state) == 0)
                        stats.by_state[state] = count;
                else if (strcmp(name, store_counter_text(STORE_COUNTER_PRUNED_OPERATIONS)) == 0)
                        stats.pruned_operations = count;
                else if (strcmp(name, store_counter_text(STORE_COUNTER_PRUNED_CALLS)) == 0)
                        stats.pruned_calls = count;
                else
                        r = TG_ESTORE;
        }
        if (st)
                store_sqlite_stmt_done(st);
        if (r == 0)
                r = run_i64(s, ST_OLDEST_OPEN, INT64_MIN, &v, &null);
        if (r == 0 && !null)
                stats.oldest_open_accepted_at = v;
        if (r == 0)
                r = run_i64(s, ST_CALLS_TOTAL, INT64_MIN, &v, &null);
        if (r == 0)
                stats.calls_total = null ? 0 : (uint64_t)v;
        if (r == 0)
                r = store_sqlite_epoch_read(store, &stats.epoch);
        if (r == 0)
                *ret_stats = stats;
        return r;
}

int store_sqlite_backlog(struct store *store, const char *account, uint64_t *by_state)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r, rc;

        r = store_sqlite_stmt_get(s, ST_COUNT_ACCOUNT, &st);
        if (r == 0 && store_sqlite_bind_text(st, 1, account, strlen(account)))
                r = TG_ESTORE;
        while (r == 0) {
                enum op_state state;

                rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        break;
                if (rc != SQLITE_ROW)
                        r = store_sqlite_map_rc(rc);
                else if (op_state_parse(store_sqlite_col_text(st, 0), &state) == 0)
                        by_state[state] = (uint64_t)sqlite3_column_int64(st, 1);
                else
                        r = TG_ESTORE;
        }
        if (st)
                store_sqlite_stmt_done(st);
        return r;
}

int store_sqlite_provider_pending(struct store *store, const char *account, uint64_t *ret_n)
{
        sqlite3_stmt *st = NULL;
        int64_t n = 0;
        bool null = false;
        int r = store_sqlite_stmt_get(S(store), ST_PROVIDER_PENDING, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_text(st, 1, account, strlen(account))) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = fetch_i64(st, &n, &null);
        if (r == 0)
                *ret_n = null || n < 0 ? 0 : (uint64_t)n;
        return r;
}

int store_sqlite_op_find_refund(struct store *store, const char *account, const char *refund_id,
                                int64_t ret_ids[2], unsigned *ret_n)
{
        sqlite3_stmt *st = NULL;
        unsigned n = 0;
        int rc, r = store_sqlite_stmt_get(S(store), ST_OP_BY_REFUND, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_text(st, 1, account, strlen(account)) ||
            store_sqlite_bind_text(st, 2, refund_id, strlen(refund_id)))
                r = TG_ESTORE;
        while (r == 0 && n < 2) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        break;
                if (rc != SQLITE_ROW)
                        r = store_sqlite_map_rc(rc);
                else
                        ret_ids[n++] = sqlite3_column_int64(st, 0);
        }
        store_sqlite_stmt_done(st);
        if (r == 0)
                *ret_n = n;
        return r;
}

/* DELETE ... WHERE at < ?1 */
static int prune(struct sqlite_store *s, enum stmt_id which, tg_wall_ms keep_after)
{
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, which, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, keep_after)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return store_sqlite_stmt_run(st);
}

int store_sqlite_sample_put(struct store *store, const struct exit_sample *x, tg_wall_ms keep_after)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_SAMPLE_PUT, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, x->at) || store_sqlite_bind_i64(st, 2, x->epoch) ||
            store_sqlite_bind_i64(st, 3, x->in_flight) || store_sqlite_bind_i64(st, 4, x->starts) ||
            store_sqlite_bind_i64(st, 5, x->call_ends) ||
            store_sqlite_bind_i64(st, 6, x->op_closes) ||
            store_sqlite_bind_i64(st, 7, x->held ? 1 : 0) ||
            store_sqlite_bind_text(st, 8, x->figures, sizeof(x->figures) - 1) ||
            store_sqlite_bind_i64(st, 9, x->share) ||
            store_sqlite_bind_i64(st, 10, x->backlog[OP_PENDING]) ||
            store_sqlite_bind_i64(st, 11, x->backlog[OP_IN_FLIGHT]) ||
            store_sqlite_bind_i64(st, 12, x->backlog[OP_RETRY_WAIT]) ||
            store_sqlite_bind_i64(st, 13, x->backlog[OP_UNKNOWN]) ||
            store_sqlite_bind_i64(st, 14, x->backlog[OP_MANUAL])) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = store_sqlite_stmt_run(st);
        if (r < 0)
                return r;
        r = store_sqlite_stmt_get(s, ST_SAMPLE_BLANK, &st);
        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, x->at - 2 * STORE_FIGURES_KEEP_MS) ||
            store_sqlite_bind_i64(st, 2, x->at - STORE_FIGURES_KEEP_MS) ||
            store_sqlite_bind_i64(st, 3, x->share)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = store_sqlite_stmt_run(st);
        if (r < 0)
                return r;
        return prune(s, ST_SAMPLE_PRUNE, keep_after);
}

int store_sqlite_refusals_add(struct store *store, tg_wall_ms second, unsigned n,
                              tg_wall_ms keep_after)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_REFUSALS_ADD, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, second) || store_sqlite_bind_i64(st, 2, n)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = store_sqlite_stmt_run(st);
        if (r < 0)
                return r;
        return prune(s, ST_REFUSALS_PRUNE, keep_after);
}

int store_sqlite_sample_last(struct store *store, struct exit_sample *ret_sample)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_SAMPLE_LAST, &st);

        if (r < 0)
                return r;
        return fetch_one(st, ret_sample, sizeof(*ret_sample), read_sample);
}
