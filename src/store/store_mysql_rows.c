/*
 * store_mysql_rows — the MariaDB backend's row primitives (store_backend.h):
 * operations, calls and audit rows, the picks and batches that find due or
 * expired operations, the pages of the reading walks, stats and the exit's
 * samples. Every one runs inside a transaction of store_mysql_tx() on the
 * main connection. Picks lock with FOR UPDATE SKIP LOCKED: several processes
 * never wait on each other's picks.
 */
#ifdef TG_HAVE_MARIADB /* the whole file: CMake defines it with libmariadb */

#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/mysql_int.h"

#define AGAIN_CANDIDATES 16

/* ---- row decoders --------------------------------------------------------------- */

static int read_op(MYSQL_RES *res, MYSQL_ROW row, void *ret_row)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        struct op_record op;
        bool ok = lens != NULL && mysql_num_fields(res) == OP_NCOLS;

        if (!ok)
                return TG_ESTORE;
        memset(&op, 0, sizeof(op));
        op.id = store_mysql_col_i64(row, 0, &ok);
        store_mysql_col_copy(row, lens, 1, op.req.operation_id, sizeof(op.req.operation_id));
        store_mysql_col_copy(row, lens, 2, op.req.payment_id, sizeof(op.req.payment_id));
        op.req.amount = store_mysql_col_i64(row, 3, &ok);
        store_mysql_col_copy(row, lens, 4, op.req.currency, sizeof(op.req.currency));
        ok = ok && op_state_parse(store_mysql_col_text(row, 5), &op.state) == 0;
        ok = ok && manual_reason_parse(store_mysql_col_text(row, 6), &op.reason) == 0;
        op.attempts = store_mysql_col_uns(row, 7, &ok);
        op.attempt_limit = store_mysql_col_uns(row, 8, &ok);
        op.queries = store_mysql_col_uns(row, 9, &ok);
        op.query_limit = store_mysql_col_uns(row, 10, &ok);
        op.accepted_at = store_mysql_col_i64(row, 11, &ok);
        op.deadline_at = store_mysql_col_i64(row, 12, &ok);
        op.key_first_used = store_mysql_col_i64(row, 13, &ok);
        op.next_run_at = store_mysql_col_i64(row, 14, &ok);
        op.updated_at = store_mysql_col_i64(row, 15, &ok);
        op.last_wait_ms = store_mysql_col_i64(row, 16, &ok);
        op.operator_resend = store_mysql_col_i64(row, 17, &ok) != 0;
        op.epoch = store_mysql_col_i64(row, 18, &ok);
        store_mysql_col_copy(row, lens, 19, op.refund_id, sizeof(op.refund_id));
        op.last_http_status = (int)store_mysql_col_i64(row, 20, &ok);
        ok = ok && tg_class_parse(store_mysql_col_text(row, 21), &op.last_class) == 0;
        store_mysql_col_copy(row, lens, 22, op.source, sizeof(op.source));
        op.share = store_mysql_col_uns(row, 23, &ok);
        store_mysql_col_copy(row, lens, 24, op.assignee, sizeof(op.assignee));
        store_mysql_col_copy(row, lens, 25, op.traceparent, sizeof(op.traceparent));
        op.caller_deadline_at = store_mysql_col_i64(row, 26, &ok);
        store_mysql_col_copy(row, lens, 27, op.req.reason, sizeof(op.req.reason));
        store_mysql_col_copy(row, lens, 28, op.req.metadata, sizeof(op.req.metadata));
        store_mysql_col_copy(row, lens, 29, op.req.account, sizeof(op.req.account));
        store_mysql_col_copy(row, lens, 30, op.req.notify_url, sizeof(op.req.notify_url));
        store_mysql_col_copy(row, lens, 31, op.req.submitted_by, sizeof(op.req.submitted_by));
        op.pending_since = store_mysql_col_i64(row, 32, &ok);
        op.pending_polls = store_mysql_col_uns(row, 33, &ok);
        if (!ok)
                return TG_ESTORE;
        memcpy(ret_row, &op, sizeof(op));
        return 0;
}

static int read_call(MYSQL_RES *res, MYSQL_ROW row, void *ret_row)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        struct call_record c;
        bool ok = lens != NULL && mysql_num_fields(res) == CALL_NCOLS;

        if (!ok)
                return TG_ESTORE;
        memset(&c, 0, sizeof(c));
        c.id = store_mysql_col_i64(row, 0, &ok);
        c.op_id = store_mysql_col_i64(row, 1, &ok);
        store_mysql_col_copy(row, lens, 2, c.operation_id, sizeof(c.operation_id));
        ok = ok && tg_call_kind_parse(store_mysql_col_text(row, 3), &c.kind) == 0;
        c.attempt = store_mysql_col_uns(row, 4, &ok);
        store_mysql_col_copy(row, lens, 5, c.request_id, sizeof(c.request_id));
        c.epoch = store_mysql_col_i64(row, 6, &ok);
        c.start_mono = store_mysql_col_i64(row, 7, &ok);
        c.start_wall = store_mysql_col_i64(row, 8, &ok);
        c.in_flight_at_start = store_mysql_col_uns(row, 9, &ok);
        c.ended = store_mysql_col_i64(row, 10, &ok) != 0;
        c.end_mono = store_mysql_col_i64(row, 11, &ok);
        c.end_wall = store_mysql_col_i64(row, 12, &ok);
        c.sent = store_mysql_col_i64(row, 13, &ok) != 0;
        ok = ok && tg_class_parse(store_mysql_col_text(row, 14), &c.cls) == 0;
        c.http_status = (int)store_mysql_col_i64(row, 15, &ok);
        c.latency_us = store_mysql_col_i64(row, 16, &ok);
        store_mysql_col_copy(row, lens, 17, c.error, sizeof(c.error));
        c.share = store_mysql_col_uns(row, 18, &ok);
        store_mysql_col_copy(row, lens, 19, c.trace_id, sizeof(c.trace_id));
        store_mysql_col_copy(row, lens, 20, c.span_id, sizeof(c.span_id));
        c.handoff_mono = store_mysql_col_i64(row, 21, &ok);
        c.handoff_wall = store_mysql_col_i64(row, 22, &ok);
        if (!ok)
                return TG_ESTORE;
        memcpy(ret_row, &c, sizeof(c));
        return 0;
}

static int read_audit(MYSQL_RES *res, MYSQL_ROW row, void *ret_row)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        struct audit_record a;
        bool ok = lens != NULL && mysql_num_fields(res) == AUDIT_NCOLS;

        if (!ok)
                return TG_ESTORE;
        memset(&a, 0, sizeof(a));
        a.id = store_mysql_col_i64(row, 0, &ok);
        a.op_id = store_mysql_col_i64(row, 1, &ok);
        a.at = store_mysql_col_i64(row, 2, &ok);
        store_mysql_col_copy(row, lens, 3, a.action, sizeof(a.action));
        store_mysql_col_copy(row, lens, 4, a.operator_name, sizeof(a.operator_name));
        store_mysql_col_copy(row, lens, 5, a.reason, sizeof(a.reason));
        store_mysql_col_copy(row, lens, 6, a.detail, sizeof(a.detail));
        if (!ok)
                return TG_ESTORE;
        memcpy(ret_row, &a, sizeof(a));
        return 0;
}

static int read_sample(MYSQL_RES *res, MYSQL_ROW row, void *ret_row)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        bool ok = lens != NULL && mysql_num_fields(res) == SAMPLE_NCOLS;
        struct exit_sample *x = ret_row;

        if (!ok)
                return TG_ESTORE;
        memset(x, 0, sizeof(*x));
        x->at = store_mysql_col_i64(row, 0, &ok);
        x->epoch = store_mysql_col_i64(row, 1, &ok);
        x->in_flight = store_mysql_col_uns(row, 2, &ok);
        x->starts = store_mysql_col_uns(row, 3, &ok);
        x->call_ends = store_mysql_col_uns(row, 4, &ok);
        x->op_closes = store_mysql_col_uns(row, 5, &ok);
        x->held = store_mysql_col_i64(row, 6, &ok) != 0;
        x->oldest_open_accepted_at = row[7] ? store_mysql_col_i64(row, 7, &ok) : TG_WALL_NEVER;
        store_mysql_col_copy(row, lens, 8, x->figures, sizeof(x->figures));
        x->share = store_mysql_col_uns(row, 9, &ok);
        x->backlog[OP_PENDING] = store_mysql_col_uns(row, 10, &ok);
        x->backlog[OP_IN_FLIGHT] = store_mysql_col_uns(row, 11, &ok);
        x->backlog[OP_RETRY_WAIT] = store_mysql_col_uns(row, 12, &ok);
        x->backlog[OP_UNKNOWN] = store_mysql_col_uns(row, 13, &ok);
        x->backlog[OP_MANUAL] = store_mysql_col_uns(row, 14, &ok);
        return ok ? 0 : TG_ESTORE;
}

static int read_refusal(MYSQL_RES *res, MYSQL_ROW row, void *ret_row)
{
        bool ok = mysql_num_fields(res) == 2;
        struct refusal_second *x = ret_row;

        if (!ok)
                return TG_ESTORE;
        x->at = store_mysql_col_i64(row, 0, &ok);
        x->refused = store_mysql_col_uns(row, 1, &ok);
        return ok ? 0 : TG_ESTORE;
}

typedef int (*row_reader)(MYSQL_RES *res, MYSQL_ROW row, void *ret_row);

/* Reads up to max rows of a result into buf (elements of `size` bytes) and
 * frees it. *ret_n: rows read. */
static int fetch_rows(MYSQL_RES *res, void *buf, size_t size, unsigned max, row_reader read,
                      unsigned *ret_n)
{
        unsigned n = 0;
        int r = 0;

        while (r == 0 && n < max) {
                MYSQL_ROW row = mysql_fetch_row(res);

                if (!row)
                        break;
                r = read(res, row, (char *)buf + (size_t)n * size);
                if (r == 0)
                        n++;
        }
        mysql_free_result(res);
        if (r == 0)
                *ret_n = n;
        return r;
}

/* One row: 0, or TG_ENOTFOUND when there is none. */
static int fetch_one(MYSQL_RES *res, void *ret_row, size_t size, row_reader read)
{
        unsigned n = 0;
        int r = fetch_rows(res, ret_row, size, 1, read, &n);

        if (r == 0 && n == 0)
                r = TG_ENOTFOUND;
        return r;
}

/* ---- operations ------------------------------------------------------------------ */

int store_mysql_op_get(struct store *store, const char *key, int64_t id, bool lock,
                       struct op_record *ret_op)
{
        struct mysql_store *s = M(store);
        const char *tail = lock ? " FOR UPDATE" : "";
        MYSQL_RES *res;

        if (!key && s->picked_valid && s->picked.id == id) {
                /* the row the pick just locked and read (op_pick) */
                s->picked_valid = false;
                *ret_op = s->picked;
                return 0;
        }
        int r =
            key ? store_mysql_query(s, &res,
                                    "SELECT " OP_COLS " FROM operations WHERE operation_id = %S%s",
                                    key, tail)
                : store_mysql_query(s, &res, "SELECT " OP_COLS " FROM operations WHERE id = %I%s",
                                    id, tail);

        if (r < 0)
                return r;
        return fetch_one(res, ret_op, sizeof(*ret_op), read_op);
}

int store_mysql_op_insert(struct store *store, const struct op_record *op, int64_t *ret_id)
{
        struct mysql_store *s = M(store);
        int r = store_mysql_exec(
            s,
            "INSERT INTO operations (operation_id, payment_id, amount, currency, state, reason, "
            "attempt_limit, query_limit, accepted_at, deadline_at, updated_at, source, "
            "last_class, traceparent, caller_deadline_at, refund_reason, metadata, account, "
            "notify_url, submitted_by) "
            "VALUES (%S, %S, %I, %S, %S, %S, %U, %U, %I, %I, %I, %S, %S, %S, %I, %S, %S, %S, %S, "
            "%S)",
            op->req.operation_id, op->req.payment_id, op->req.amount, op->req.currency,
            op_state_name(op->state), manual_reason_name(op->reason), op->attempt_limit,
            op->query_limit, op->accepted_at, op->deadline_at, op->updated_at, op->source,
            tg_class_name(op->last_class), op->traceparent, op->caller_deadline_at, op->req.reason,
            op->req.metadata, store_req_account(&op->req), op->req.notify_url,
            op->req.submitted_by);

        if (r == 0)
                *ret_id = (int64_t)mysql_insert_id(s->db);
        return r;
}

int store_mysql_op_put(struct store *store, const struct op_record *op)
{
        M(store)->picked_valid = false;
        /* affected rows counts changed rows only: an identical write is 0 */
        return store_mysql_exec(
            M(store),
            "UPDATE operations SET state = %S, reason = %S, attempts = %U, "
            "attempt_limit = %U, queries = %U, query_limit = %U, deadline_at = %I, "
            "key_first_used = %I, next_run_at = %I, updated_at = %I, "
            "last_wait_ms = %I, operator_resend = %I, epoch = %I, refund_id = %S, "
            "last_http_status = %I, last_class = %S, share = %U, assignee = %S, "
            "traceparent = %S, notify_url = %S, pending_since = %I, pending_polls = %U "
            "WHERE id = %I",
            op_state_name(op->state), manual_reason_name(op->reason), op->attempts,
            op->attempt_limit, op->queries, op->query_limit, op->deadline_at, op->key_first_used,
            op->next_run_at, op->updated_at, op->last_wait_ms, (int64_t)op->operator_resend,
            op->epoch, op->refund_id, (int64_t)op->last_http_status, tg_class_name(op->last_class),
            op->share, op->assignee, op->traceparent, op->req.notify_url, op->pending_since,
            op->pending_polls, op->id);
}

/* One integer of a query; TG_ENOTFOUND for no row, *ret_null for NULL. */
static int one_i64(MYSQL_RES *res, int r, int64_t *ret, bool *ret_null)
{
        if (r < 0)
                return r;
        return store_mysql_one_i64(res, ret, ret_null);
}

int store_mysql_op_pick(struct store *store, const struct store_pick *p, int64_t *ret_id)
{
        struct mysql_store *s = M(store);
        int64_t ids[AGAIN_CANDIDATES], next = 0;
        int64_t queries = store_pick_kinds(p);
        bool null = false;
        MYSQL_RES *res;
        unsigned n = 0;
        int r;

        s->picked_valid = false;
        if (p->group == STORE_GROUP_FIRST && p->posts_barred)
                return TG_ENOTFOUND; /* the first group is all POSTs */
        if (p->group == STORE_GROUP_FIRST) {
                /* the whole row, locked: the claim's op_get of it is free;
                 * after a pick of this transaction, past the row it took
                 * (the rows before it were taken, or locked by another
                 * claim: SKIP LOCKED passes them all the same) */
                r = s->pick_after
                        ? store_mysql_query(s, &res, s->q[MQ_PICK_FIRST_AFTER], store->account,
                                            s->pick_after_at, s->pick_after_at, s->pick_after_id,
                                            p->now)
                        : store_mysql_query(s, &res, s->q[MQ_PICK_FIRST], store->account, p->now);
                if (r == 0)
                        r = fetch_one(res, &s->picked, sizeof(s->picked), read_op);
                if (r == 0) {
                        s->picked_valid = true;
                        s->pick_after = true;
                        s->pick_after_at = s->picked.accepted_at;
                        s->pick_after_id = s->picked.id;
                        *ret_id = s->picked.id;
                }
                return r;
        }
        /* Nothing due (the common case while retries wait): one index probe. */
        r = store_mysql_query(s, &res, s->q[MQ_EARLIEST_DUE], store->account);
        r = one_i64(res, r, &next, &null);
        if (r < 0)
                return r;
        if (null || next > p->now)
                return TG_ENOTFOUND;
        /* Candidates without locks (the again group spans two states, so the
         * order needs a sort, which FOR UPDATE would turn into a lock on
         * every due row), then lock the first that is still free and due. */
        r = store_mysql_query(s, &res, s->q[MQ_AGAIN_CANDIDATES], store->account, p->now, p->now,
                              p->now, p->key_retention_ms, queries, (int64_t)AGAIN_CANDIDATES);
        if (r < 0)
                return r;
        while (n < AGAIN_CANDIDATES) {
                MYSQL_ROW row = mysql_fetch_row(res);

                if (!row)
                        break;
                if (store_mysql_parse_i64(row[0], &ids[n]))
                        n++;
        }
        mysql_free_result(res);
        for (unsigned i = 0; i < n; i++) {
                r = store_mysql_query(s, &res, s->q[MQ_AGAIN_LOCK], ids[i], p->now, p->now, p->now,
                                      p->key_retention_ms, queries);
                if (r == 0)
                        r = fetch_one(res, &s->picked, sizeof(s->picked), read_op);
                if (r == TG_ENOTFOUND)
                        continue;
                if (r == 0) {
                        s->picked_valid = true;
                        *ret_id = s->picked.id;
                }
                return r;
        }
        return TG_ENOTFOUND;
}

int store_mysql_op_batch(struct store *store, const struct store_batch *b, unsigned max,
                         struct op_record *buf, unsigned *ret_n)
{
        struct mysql_store *s = M(store);
        MYSQL_RES *res;
        int r;

        switch (b->kind) {
        case STORE_BATCH_DEADLINE:
                r = store_mysql_query(s, &res, s->q[MQ_BATCH_DEADLINE], store->account, b->now,
                                      (int64_t)max);
                break;
        case STORE_BATCH_KEY_AGE:
                r = store_mysql_query(s, &res, s->q[MQ_BATCH_KEY_AGE], store->account, b->now,
                                      b->key_retention_ms, (int64_t)max);
                break;
        case STORE_BATCH_RECOVER:
                r = store_mysql_query(s, &res, s->q[MQ_BATCH_RECOVER], store->account, b->share,
                                      b->epoch, b->shares, (int64_t)max);
                break;
        case STORE_BATCH_OUTBOX:
        default:
                r = store_mysql_query(s, &res, s->q[MQ_BATCH_OUTBOX], (int64_t)max);
                break;
        }
        if (r < 0)
                return r;
        return fetch_rows(res, buf, sizeof(*buf), max, read_op, ret_n);
}

int store_mysql_due_summary(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending)
{
        struct mysql_store *s = M(store);
        int64_t next = 0, any = 0;
        bool null = false, null2 = false;
        MYSQL_RES *res;
        int r = store_mysql_query(s, &res, s->q[MQ_EARLIEST_DUE], store->account);

        r = one_i64(res, r, &next, &null);
        if (r == 0) {
                r = store_mysql_query(s, &res, s->q[MQ_ANY_PENDING], store->account);
                r = one_i64(res, r, &any, &null2);
        }
        if (r < 0)
                return r;
        *ret_next_run_at = null ? TG_WALL_NEVER : next;
        *ret_pending = !null2 && any != 0;
        return 0;
}

/* ---- calls and audit ---------------------------------------------------------------- */

int store_mysql_call_insert(struct store *store, struct call_record *c)
{
        struct mysql_store *s = M(store);
        int r = store_mysql_exec(
            s,
            "INSERT INTO calls (op_id, operation_id, kind, attempt, request_id, epoch, "
            "start_mono, start_wall, in_flight_at_start, share, trace_id, span_id, handoff_mono, "
            "handoff_wall, account) "
            "VALUES (%I, %S, %S, %U, %S, %I, %I, %I, %U, %U, %S, %S, 0, 0, %S)",
            c->op_id, c->operation_id, tg_call_kind_name(c->kind), c->attempt, c->request_id,
            c->epoch, c->start_mono, c->start_wall, c->in_flight_at_start, c->share, c->trace_id,
            c->span_id, store->account);

        if (r == 0)
                c->id = (int64_t)mysql_insert_id(s->db);
        return r;
}

int store_mysql_call_get(struct store *store, int64_t id, bool lock, struct call_record *ret_call)
{
        MYSQL_RES *res;
        int r = store_mysql_query(M(store), &res, "SELECT " CALL_COLS " FROM calls WHERE id = %I%s",
                                  id, lock ? " FOR UPDATE" : "");

        if (r < 0)
                return r;
        return fetch_one(res, ret_call, sizeof(*ret_call), read_call);
}

int store_mysql_call_find(struct store *store, const char *request_id, int64_t epoch,
                          struct call_record *ret_call)
{
        MYSQL_RES *res;
        int r = store_mysql_query(
            M(store), &res, "SELECT " CALL_COLS " FROM calls WHERE request_id = %S AND epoch = %I",
            request_id, epoch);

        if (r < 0)
                return r;
        return fetch_one(res, ret_call, sizeof(*ret_call), read_call);
}

int store_mysql_call_close(struct store *store, const struct call_record *c)
{
        struct mysql_store *s = M(store);
        int r = store_mysql_exec(
            s,
            "UPDATE calls SET ended = 1, end_mono = %I, end_wall = %I, sent = %I, cls = %S, "
            "http_status = %I, latency_us = %I, error = %S, start_mono = %I, start_wall = %I, "
            "handoff_mono = %I, handoff_wall = %I, in_flight_at_start = %U WHERE id = %I AND "
            "ended = 0",
            c->end_mono, c->end_wall, (int64_t)c->sent, tg_class_name(c->cls),
            (int64_t)c->http_status, c->latency_us, c->error, c->start_mono, c->start_wall,
            c->handoff_mono, c->handoff_wall, c->in_flight_at_start, c->id);

        if (r == 0 && s->affected != 1)
                r = TG_EFENCED;
        return r;
}

int store_mysql_audit_insert(struct store *store, const struct audit_record *a)
{
        return store_mysql_exec(
            M(store),
            "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
            "VALUES (%I, %I, %S, %S, %S, %S)",
            a->op_id, a->at, a->action, a->operator_name, a->reason, a->detail);
}

/* ---- pages ---------------------------------------------------------------------------- */

int store_mysql_page(struct store *store, const struct store_page *p, unsigned want, void *buf,
                     unsigned *ret_n)
{
        struct mysql_store *s = M(store);
        int64_t n = (int64_t)want;
        row_reader read = read_op;
        size_t size = sizeof(struct op_record);
        MYSQL_RES *res;
        int r;

        switch (p->kind) {
        case STORE_PAGE_CALLS:
                r = store_mysql_query(s, &res,
                                      "SELECT " CALL_COLS
                                      " FROM calls WHERE id > %I AND (%S = '' OR account = %S) "
                                      "ORDER BY id LIMIT %I",
                                      p->cur_id, p->account, p->account, n);
                read = read_call;
                size = sizeof(struct call_record);
                break;
        case STORE_PAGE_OP_CALLS:
                r = store_mysql_query(s, &res,
                                      "SELECT " CALL_COLS
                                      " FROM calls WHERE op_id = %I AND id > %I "
                                      "ORDER BY id LIMIT %I",
                                      p->op_id, p->cur_id, n);
                read = read_call;
                size = sizeof(struct call_record);
                break;
        case STORE_PAGE_AUDIT:
                r = store_mysql_query(s, &res,
                                      "SELECT " AUDIT_COLS
                                      " FROM audit WHERE op_id = %I AND id > %I "
                                      "ORDER BY id LIMIT %I",
                                      p->op_id, p->cur_id, n);
                read = read_audit;
                size = sizeof(struct audit_record);
                break;
        case STORE_PAGE_STATE:
                /* id order within one state: sorts the state's rows (small states only) */
                r = store_mysql_query(s, &res,
                                      "SELECT " OP_COLS " FROM operations WHERE state = %S AND "
                                      "id > %I ORDER BY id LIMIT %I",
                                      op_state_name(p->state), p->cur_id, n);
                break;
        case STORE_PAGE_MANUAL:
                r = store_mysql_query(
                    s, &res,
                    "SELECT " OP_COLS " FROM operations FORCE INDEX (ops_state_accepted) "
                    "WHERE state = %S AND id > %I AND "
                    "(accepted_at > %I OR (accepted_at = %I AND id > %I)) "
                    "AND (%S = '' OR reason = %S) AND (%I = 0 OR (%I = 1 AND assignee = %S) "
                    "OR (%I = 2 AND assignee = '')) AND (%S = '' OR account = %S) "
                    "ORDER BY accepted_at, id LIMIT %I",
                    op_state_name(OP_MANUAL), p->after_id, p->cur_at, p->cur_at, p->cur_id,
                    p->reason == MANUAL_NONE ? "" : manual_reason_name(p->reason),
                    p->reason == MANUAL_NONE ? "" : manual_reason_name(p->reason), (int64_t)p->who,
                    (int64_t)p->who, p->assignee, (int64_t)p->who, p->account, p->account, n);
                break;
        case STORE_PAGE_REFUSALS:
                r = store_mysql_query(s, &res,
                                      "SELECT at, refused FROM admission_refusals WHERE at > %I "
                                      "ORDER BY at LIMIT %I",
                                      p->cur_at, n);
                read = read_refusal;
                size = sizeof(struct refusal_second);
                break;
        case STORE_PAGE_ACCOUNT_AUDIT:
                r = store_mysql_query(s, &res,
                                      "SELECT id, account, at, action, principal, reason, detail "
                                      "FROM account_audit WHERE (%S = '' OR account = %S) AND "
                                      "id > %I ORDER BY id LIMIT %I",
                                      p->account, p->account, p->cur_id, n);
                read = store_mysql_account_audit_read;
                size = sizeof(struct account_audit_record);
                break;
        case STORE_PAGE_SAMPLES:
        default:
                r = store_mysql_query(s, &res,
                                      "SELECT " SAMPLE_COLS " FROM exit_samples "
                                      "WHERE account = %S AND (at > %I OR (at = %I AND "
                                      "share > %I)) ORDER BY at, share LIMIT %I",
                                      store->account, p->cur_at, p->cur_at, p->cur_share, n);
                read = read_sample;
                size = sizeof(struct exit_sample);
                break;
        }
        if (r < 0)
                return r;
        return fetch_rows(res, buf, size, want, read, ret_n);
}

/* ---- stats and samples ------------------------------------------------------------------ */

int store_mysql_backlog(struct store *store, const char *account, uint64_t *by_state)
{
        struct mysql_store *s = M(store);
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r;

        r = store_mysql_query(s, &res, s->q[MQ_COUNT_ACCOUNT], account);
        if (r < 0)
                return r;
        while (r == 0) {
                enum op_state state;
                int64_t n = 0;

                row = mysql_fetch_row(res);
                if (!row)
                        break;
                if (!store_mysql_parse_i64(row[1], &n) ||
                    op_state_parse(store_mysql_col_text(row, 0), &state) < 0)
                        r = TG_ESTORE;
                else
                        by_state[state] = (uint64_t)n;
        }
        mysql_free_result(res);
        return r;
}

int store_mysql_provider_pending(struct store *store, const char *account, uint64_t *ret_n)
{
        char sql[320];
        MYSQL_RES *res;
        int64_t n = 0;
        bool null = false;
        int r;

        store_provider_pending_sql("FORCE INDEX (ops_acct_due)", "%S", sql, sizeof(sql));
        r = store_mysql_query(M(store), &res, sql, account);
        r = one_i64(res, r, &n, &null);
        if (r == 0)
                *ret_n = null || n < 0 ? 0 : (uint64_t)n;
        return r;
}

int store_mysql_op_find_refund(struct store *store, const char *account, const char *refund_id,
                               int64_t ret_ids[2], unsigned *ret_n)
{
        char sql[192];
        MYSQL_RES *res;
        unsigned n = 0;
        int r;

        store_find_refund_sql("FORCE INDEX (ops_acct_refund)", "%S", "%S", sql, sizeof(sql));
        r = store_mysql_query(M(store), &res, sql, account, refund_id);
        if (r < 0)
                return r;
        while (n < 2) {
                MYSQL_ROW row = mysql_fetch_row(res);

                if (!row)
                        break;
                if (!store_mysql_parse_i64(row[0], &ret_ids[n])) {
                        r = TG_ESTORE;
                        break;
                }
                n++;
        }
        mysql_free_result(res);
        if (r == 0)
                *ret_n = n;
        return r;
}

int store_mysql_stats(struct store *store, struct store_stats *ret_stats)
{
        struct mysql_store *s = M(store);
        struct store_stats st;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int64_t v = 0;
        bool null = false;
        int r;

        memset(&st, 0, sizeof(st));
        st.oldest_open_accepted_at = TG_WALL_NEVER;
        /* The open states (and manual) from their index: the backlog; the
         * final ones and the prune totals from the counters, so that a
         * scrape does not grow with history. */
        r = store_mysql_query(s, &res, "%s", s->q[MQ_COUNT_BY_STATE]);
        if (r < 0)
                return r;
        while (r == 0) {
                enum op_state state;
                const char *name;
                int64_t n = 0;

                row = mysql_fetch_row(res);
                if (!row)
                        break;
                name = store_mysql_col_text(row, 0);
                if (!store_mysql_parse_i64(row[1], &n))
                        r = TG_ESTORE;
                else if (op_state_parse(name, &state) == 0)
                        st.by_state[state] = (uint64_t)n;
                else if (strcmp(name, store_counter_text(STORE_COUNTER_PRUNED_OPERATIONS)) == 0)
                        st.pruned_operations = (uint64_t)n;
                else if (strcmp(name, store_counter_text(STORE_COUNTER_PRUNED_CALLS)) == 0)
                        st.pruned_calls = (uint64_t)n;
                else
                        r = TG_ESTORE;
        }
        mysql_free_result(res);
        if (r == 0) {
                r = store_mysql_query(s, &res, "%s", s->q[MQ_OLDEST_ALL]);
                r = one_i64(res, r, &v, &null);
        }
        if (r == 0 && !null)
                st.oldest_open_accepted_at = v;
        /* every call ever recorded: counted with its insert */
        if (r == 0) {
                r = store_mysql_query(s, &res, "SELECT n FROM counters WHERE name = 'calls'");
                r = one_i64(res, r, &v, &null);
        }
        if (r == 0)
                st.calls_total = null ? 0 : (uint64_t)v;
        if (r == 0)
                r = store_mysql_epoch_read(store, &st.epoch);
        if (r == 0)
                *ret_stats = st;
        return r;
}

int store_mysql_sample_put(struct store *store, const struct exit_sample *x, tg_wall_ms keep_after)
{
        struct mysql_store *s = M(store);
        /* The oldest open operation is read here, in the same statement: one
         * index probe per open state (manual is not open for the exit). A
         * sample with the same `at` and share is replaced. The backlog is
         * counted by store_sample_put(). */
        int r = store_mysql_exec(
            s, s->q[MQ_SAMPLE_PUT], store->account, x->at, x->epoch, x->in_flight, x->starts,
            x->call_ends, x->op_closes, (int64_t)(x->held ? 1 : 0), x->figures, x->share,
            x->backlog[OP_PENDING], x->backlog[OP_IN_FLIGHT], x->backlog[OP_RETRY_WAIT],
            x->backlog[OP_UNKNOWN], x->backlog[OP_MANUAL]);

        /* the figures of this share's samples of a minute ago: a range of the
         * primary key, so the cost does not grow with the table */
        if (r == 0)
                r = store_mysql_exec(s,
                                     "UPDATE exit_samples SET figures = '' WHERE at >= %I AND "
                                     "at < %I AND share = %U AND account = %S AND figures <> ''",
                                     x->at - 2 * STORE_FIGURES_KEEP_MS,
                                     x->at - STORE_FIGURES_KEEP_MS, x->share, store->account);
        if (r == 0)
                r = store_mysql_exec(s, "DELETE FROM exit_samples WHERE at < %I", keep_after);
        return r;
}

int store_mysql_refusals_add(struct store *store, tg_wall_ms second, unsigned n,
                             tg_wall_ms keep_after)
{
        struct mysql_store *s = M(store);
        int r = store_mysql_exec(s,
                                 "INSERT INTO admission_refusals (at, refused) VALUES (%I, %U) "
                                 "ON DUPLICATE KEY UPDATE refused = refused + VALUES(refused)",
                                 second, n);

        if (r == 0)
                r = store_mysql_exec(s, "DELETE FROM admission_refusals WHERE at < %I", keep_after);
        return r;
}

int store_mysql_sample_last(struct store *store, struct exit_sample *ret_sample)
{
        MYSQL_RES *res;
        int r = store_mysql_query(M(store), &res,
                                  "SELECT " SAMPLE_COLS " FROM exit_samples WHERE account = %S "
                                  "ORDER BY at DESC, share DESC LIMIT 1",
                                  store->account);

        if (r < 0)
                return r;
        return fetch_one(res, ret_sample, sizeof(*ret_sample), read_sample);
}

#endif /* TG_HAVE_MARIADB */
