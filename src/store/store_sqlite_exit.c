/*
 * store_sqlite_exit — intake and the exit for the SQLite backend: accept,
 * claim, settle, the deadline sweep and next_due, and the operation, call and
 * audit rows they read and write.
 *
 * Every op is one short transaction (BEGIN IMMEDIATE when it writes),
 * committed or rolled back before it returns: commit before reply (accept),
 * record attempt before send (claim). Claims check the owner epoch inside
 * their transaction, settles the epoch the operation was claimed under.
 * ret_* outputs are written only on success.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/sqlite_int.h"

static bool col_unsigned(sqlite3_stmt *st, int col, unsigned *ret)
{
        int64_t v = sqlite3_column_int64(st, col);

        if (v < 0 || v > (int64_t)UINT_MAX)
                return false;
        *ret = (unsigned)v;
        return true;
}

/* Decodes an OP_COLS row. TG_ESTORE for a row that breaks the format (say,
 * an outbox writer's unknown state). */
int sqlite_read_op(sqlite3_stmt *st, struct op_record *ret_op)
{
        struct op_record op;
        bool ok = true;

        memset(&op, 0, sizeof(op));
        op.id = sqlite3_column_int64(st, 0);
        sqlite_col_copy(st, 1, op.req.operation_id, sizeof(op.req.operation_id));
        sqlite_col_copy(st, 2, op.req.payment_id, sizeof(op.req.payment_id));
        op.req.amount = sqlite3_column_int64(st, 3);
        sqlite_col_copy(st, 4, op.req.currency, sizeof(op.req.currency));
        ok = ok && store_state_parse(sqlite_col_text(st, 5), &op.state) == 0;
        ok = ok && store_reason_parse(sqlite_col_text(st, 6), &op.reason) == 0;
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
        sqlite_col_copy(st, 19, op.refund_id, sizeof(op.refund_id));
        op.last_http_status = sqlite3_column_int(st, 20);
        ok = ok && store_class_parse(sqlite_col_text(st, 21), &op.last_class) == 0;
        sqlite_col_copy(st, 22, op.source, sizeof(op.source));
        if (!ok)
                return TG_ESTORE;
        *ret_op = op;
        return 0;
}

int sqlite_read_call(sqlite3_stmt *st, struct call_record *ret_call)
{
        struct call_record c;
        bool ok = true;

        memset(&c, 0, sizeof(c));
        c.id = sqlite3_column_int64(st, 0);
        c.op_id = sqlite3_column_int64(st, 1);
        sqlite_col_copy(st, 2, c.operation_id, sizeof(c.operation_id));
        ok = ok && store_kind_parse(sqlite_col_text(st, 3), &c.kind) == 0;
        ok = ok && col_unsigned(st, 4, &c.attempt);
        sqlite_col_copy(st, 5, c.request_id, sizeof(c.request_id));
        c.epoch = sqlite3_column_int64(st, 6);
        c.start_mono = sqlite3_column_int64(st, 7);
        c.start_wall = sqlite3_column_int64(st, 8);
        ok = ok && col_unsigned(st, 9, &c.in_flight_at_start);
        c.ended = sqlite3_column_int64(st, 10) != 0;
        c.end_mono = sqlite3_column_int64(st, 11);
        c.end_wall = sqlite3_column_int64(st, 12);
        c.sent = sqlite3_column_int64(st, 13) != 0;
        ok = ok && store_class_parse(sqlite_col_text(st, 14), &c.cls) == 0;
        c.http_status = sqlite3_column_int(st, 15);
        c.latency_us = sqlite3_column_int64(st, 16);
        sqlite_col_copy(st, 17, c.error, sizeof(c.error));
        if (!ok)
                return TG_ESTORE;
        *ret_call = c;
        return 0;
}

/* One op by a one-parameter lookup (ST_OP_BY_KEY, ST_OP_BY_ID). */
static int op_lookup(struct sqlite_store *s, enum stmt_id id, const char *key, int64_t row_id,
                     struct op_record *ret_op)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, id, &st);
        int rc;

        if (r < 0)
                return r;
        if (key ? sqlite_bind_text(st, 1, key, TG_OP_ID_MAX) : sqlite_bind_i64(st, 1, row_id)) {
                sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                r = sqlite_read_op(st, ret_op);
        else if (rc == SQLITE_DONE)
                r = TG_ENOTFOUND;
        else
                r = sqlite_map_rc(rc);
        sqlite_stmt_done(st);
        return r;
}

int sqlite_op_by_key(struct sqlite_store *s, const char *operation_id, struct op_record *ret_op)
{
        return op_lookup(s, ST_OP_BY_KEY, operation_id, 0, ret_op);
}

static int op_by_id(struct sqlite_store *s, int64_t id, struct op_record *ret_op)
{
        return op_lookup(s, ST_OP_BY_ID, NULL, id, ret_op);
}

/* Writes back every mutable column of op. */
int sqlite_op_write(struct sqlite_store *s, const struct op_record *op)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, ST_OP_WRITE, &st);

        if (r < 0)
                return r;
        if (sqlite_bind_i64(st, 1, op->id) ||
            sqlite_bind_text(st, 2, store_state_text(op->state), TG_TEXT_MAX) ||
            sqlite_bind_text(st, 3, store_reason_text(op->reason), TG_TEXT_MAX) ||
            sqlite_bind_i64(st, 4, op->attempts) || sqlite_bind_i64(st, 5, op->attempt_limit) ||
            sqlite_bind_i64(st, 6, op->queries) || sqlite_bind_i64(st, 7, op->query_limit) ||
            sqlite_bind_i64(st, 8, op->deadline_at) || sqlite_bind_i64(st, 9, op->key_first_used) ||
            sqlite_bind_i64(st, 10, op->next_run_at) || sqlite_bind_i64(st, 11, op->updated_at) ||
            sqlite_bind_i64(st, 12, op->last_wait_ms) ||
            sqlite_bind_i64(st, 13, op->operator_resend) || sqlite_bind_i64(st, 14, op->epoch) ||
            sqlite_bind_text(st, 15, op->refund_id, sizeof(op->refund_id) - 1) ||
            sqlite_bind_i64(st, 16, op->last_http_status) ||
            sqlite_bind_text(st, 17, store_class_text(op->last_class), TG_TEXT_MAX)) {
                sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = sqlite_stmt_run(st);
        if (r == 0 && sqlite3_changes(s->db) != 1)
                r = TG_ESTORE;
        return r;
}

int sqlite_audit_insert(struct sqlite_store *s, int64_t op_id, tg_wall_ms at, const char *action,
                        const char *operator_name, const char *reason, const char *detail)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, ST_AUDIT_INSERT, &st);

        if (r < 0)
                return r;
        if (sqlite_bind_i64(st, 1, op_id) || sqlite_bind_i64(st, 2, at) ||
            sqlite_bind_text(st, 3, action, 31) ||
            sqlite_bind_text(st, 4, operator_name, TG_TEXT_MAX - 1) ||
            sqlite_bind_text(st, 5, reason, TG_TEXT_MAX - 1) ||
            sqlite_bind_text(st, 6, detail, TG_TEXT_MAX - 1)) {
                sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return sqlite_stmt_run(st);
}

/* An audit "event" when the exit itself moves an operation to manual, so
 * that every manual item has a traceable history. */
static int audit_to_manual(struct sqlite_store *s, const struct op_record *op, tg_wall_ms now,
                           const char *how)
{
        char detail[TG_TEXT_MAX];

        snprintf(detail, sizeof(detail), "%s: to manual after %u POSTs, %u queries", how,
                 op->attempts, op->queries);
        return sqlite_audit_insert(s, op->id, now, "event", "tollgate",
                                   store_reason_text(op->reason), detail);
}

/* ---- intake ---------------------------------------------------------------- */

static bool same_request(const struct refund_request *a, const struct refund_request *b)
{
        return strcmp(a->payment_id, b->payment_id) == 0 && a->amount == b->amount &&
               strcmp(a->currency, b->currency) == 0;
}

int sqlite_accept(struct store *store, const struct refund_request *req, tg_wall_ms now,
                  const struct policy_config *limits, bool *ret_created, struct op_record *ret_op)
{
        struct sqlite_store *s = S(store);
        struct op_record op;
        sqlite3_stmt *st = NULL;
        bool created = false;
        int r = sqlite_tx_begin(s, true);

        if (r < 0)
                return r;
        r = sqlite_op_by_key(s, req->operation_id, &op);
        if (r == 0) {
                if (!same_request(&op.req, req))
                        r = TG_ECONFLICT; /* same key, other body: nothing stored */
                goto out;
        }
        if (r != TG_ENOTFOUND)
                goto out;
        r = sqlite_stmt_get(s, ST_OP_INSERT, &st);
        if (r < 0)
                goto out;
        if (sqlite_bind_text(st, 1, req->operation_id, TG_OP_ID_MAX) ||
            sqlite_bind_text(st, 2, req->payment_id, TG_PAYMENT_ID_MAX) ||
            sqlite_bind_i64(st, 3, req->amount) ||
            sqlite_bind_text(st, 4, req->currency, sizeof(req->currency) - 1) ||
            sqlite_bind_i64(st, 5, limits->max_attempts) ||
            sqlite_bind_i64(st, 6, limits->max_queries) || sqlite_bind_i64(st, 7, now) ||
            sqlite_bind_i64(st, 8, now + limits->deadline_ms)) {
                sqlite_stmt_done(st);
                r = TG_ESTORE;
                goto out;
        }
        r = sqlite_stmt_run(st);
        if (r < 0)
                goto out;
        r = op_by_id(s, sqlite3_last_insert_rowid(s->db), &op);
        created = true;
out:
        if (r < 0) {
                sqlite_tx_rollback(s);
                return r;
        }
        /* commit before reply: the caller answers 202 only after this. */
        r = sqlite_tx_commit(s);
        if (r < 0)
                return r;
        *ret_created = created;
        *ret_op = op;
        return 0;
}

int sqlite_get(struct store *store, const char *operation_id, struct op_record *ret_op)
{
        return sqlite_op_by_key(S(store), operation_id, ret_op);
}

/* ---- the exit ------------------------------------------------------------------- */

/* min(next_run_at) of the again group, TG_WALL_NEVER if it is empty. */
static int earliest_due(struct sqlite_store *s, tg_wall_ms *ret_next)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, ST_NEXT_DUE, &st);
        int rc;

        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                *ret_next = sqlite3_column_type(st, 0) == SQLITE_NULL ? TG_WALL_NEVER
                                                                      : sqlite3_column_int64(st, 0);
        else
                r = sqlite_map_rc(rc);
        sqlite_stmt_done(st);
        return r;
}

static int pick(struct sqlite_store *s, const struct claim_args *args, int64_t *ret_id)
{
        sqlite3_stmt *st = NULL;
        bool again = args->group == STORE_GROUP_AGAIN;
        int r = sqlite_stmt_get(s, again ? ST_PICK_AGAIN : ST_PICK_FIRST, &st);
        int rc;

        if (r < 0)
                return r;
        if (again) {
                /* Nothing due (the common case while retries wait): one probe
                 * of ops_again_due instead of a walk over every waiting op. */
                tg_wall_ms next = TG_WALL_NEVER;

                r = earliest_due(s, &next);
                if (r < 0)
                        return r;
                if (next > args->now)
                        return TG_ENOTFOUND;
        }
        /* Key age check off: a retention no key can reach. */
        int64_t retention = args->key_retention_ms > 0 ? args->key_retention_ms : INT64_MAX / 4;
        if (sqlite_bind_i64(st, 1, args->now) ||
            (again &&
             (sqlite_bind_i64(st, 2, retention) || sqlite_bind_i64(st, 3, args->no_queries)))) {
                sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                *ret_id = sqlite3_column_int64(st, 0);
        else
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : sqlite_map_rc(rc);
        sqlite_stmt_done(st);
        return r;
}

static int call_insert(struct sqlite_store *s, struct call_record *call, unsigned share)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, ST_CALL_INSERT, &st);

        if (r < 0)
                return r;
        if (sqlite_bind_i64(st, 1, call->op_id) ||
            sqlite_bind_text(st, 2, call->operation_id, TG_OP_ID_MAX) ||
            sqlite_bind_text(st, 3, store_kind_text(call->kind), TG_TEXT_MAX) ||
            sqlite_bind_i64(st, 4, call->attempt) ||
            sqlite_bind_text(st, 5, call->request_id, TG_REQUEST_ID_MAX) ||
            sqlite_bind_i64(st, 6, call->epoch) || sqlite_bind_i64(st, 7, call->start_mono) ||
            sqlite_bind_i64(st, 8, call->start_wall) ||
            sqlite_bind_i64(st, 9, call->in_flight_at_start) || sqlite_bind_i64(st, 10, share)) {
                sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = sqlite_stmt_run(st);
        if (r == 0)
                call->id = sqlite3_last_insert_rowid(s->db);
        return r;
}

int sqlite_claim(struct store *store, const struct claim_args *args, struct op_record *ret_op,
                 struct call_record *ret_call)
{
        struct sqlite_store *s = S(store);
        struct op_record op;
        struct call_record call;
        sqlite3_stmt *st = NULL;
        int64_t id = 0;
        unsigned share = 0;
        int r = sqlite_tx_begin(s, true);

        if (r < 0)
                return r;
        r = sqlite_check_epoch(s, args->epoch, &share);
        if (r == 0)
                r = pick(s, args, &id);
        if (r == 0)
                r = op_by_id(s, id, &op);
        if (r < 0)
                goto fail;

        memset(&call, 0, sizeof(call));
        call.kind = policy_next_kind(op.state, op.operator_resend);
        if (call.kind == TG_KIND_QUERY) {
                op.queries++;
                call.attempt = op.queries;
        } else {
                op.attempts++;
                if (op.key_first_used == 0)
                        op.key_first_used = args->now;
                call.attempt = op.attempts;
        }
        op.state = OP_IN_FLIGHT;
        op.epoch = args->epoch;
        op.updated_at = args->now;
        /* what a claim changes, and the share it is made under (recovery
         * touches only its own share's rows) */
        r = sqlite_stmt_get(s, ST_OP_CLAIM, &st);
        if (r < 0)
                goto fail;
        if (sqlite_bind_i64(st, 1, op.id) || sqlite_bind_i64(st, 2, op.attempts) ||
            sqlite_bind_i64(st, 3, op.queries) || sqlite_bind_i64(st, 4, op.key_first_used) ||
            sqlite_bind_i64(st, 5, op.epoch) || sqlite_bind_i64(st, 6, share) ||
            sqlite_bind_i64(st, 7, op.updated_at)) {
                sqlite_stmt_done(st);
                r = TG_ESTORE;
                goto fail;
        }
        r = sqlite_stmt_run(st);
        if (r < 0)
                goto fail;

        call.op_id = op.id;
        store_copy_text(call.operation_id, sizeof(call.operation_id), op.req.operation_id);
        store_copy_text(call.request_id, sizeof(call.request_id), args->request_id);
        call.epoch = args->epoch;
        call.start_mono = args->start_mono;
        call.start_wall = args->now;
        call.in_flight_at_start = args->in_flight_at_start;
        call.ended = false;
        call.cls = TG_CLASS_UNKNOWN;
        r = call_insert(s, &call, share);
        if (r < 0)
                goto fail;
        /* record attempt before send: the call row ("sent, outcome unknown")
         * and the counted attempt are durable before the caller may send. */
        r = sqlite_tx_commit(s);
        if (r < 0)
                return r;
        *ret_op = op;
        *ret_call = call;
        return 0;
fail:
        sqlite_tx_rollback(s);
        return r;
}

static int call_by_id(struct sqlite_store *s, int64_t id, struct call_record *ret_call)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, ST_CALL_BY_ID, &st);
        int rc;

        if (r < 0)
                return r;
        if (sqlite_bind_i64(st, 1, id)) {
                sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                r = sqlite_read_call(st, ret_call);
        else
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : sqlite_map_rc(rc);
        sqlite_stmt_done(st);
        return r;
}

static int call_settle(struct sqlite_store *s, const struct settle_args *a)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, ST_CALL_SETTLE, &st);

        if (r < 0)
                return r;
        if (sqlite_bind_i64(st, 1, a->call_id) || sqlite_bind_i64(st, 2, a->end_mono) ||
            sqlite_bind_i64(st, 3, a->now) || sqlite_bind_i64(st, 4, a->sent) ||
            sqlite_bind_text(st, 5, store_class_text(a->cls), TG_TEXT_MAX) ||
            sqlite_bind_i64(st, 6, a->http_status) || sqlite_bind_i64(st, 7, a->latency_us) ||
            sqlite_bind_text(st, 8, a->error, sizeof(a->error) - 1) ||
            sqlite_bind_i64(st, 9, a->handoff_mono) || sqlite_bind_i64(st, 10, a->handoff_wall)) {
                sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = sqlite_stmt_run(st);
        if (r == 0 && sqlite3_changes(s->db) != 1)
                r = TG_EFENCED;
        return r;
}

static int settle_tx(struct sqlite_store *s, const struct settle_args *a);

/* An outcome is committed with synchronous=NORMAL: WAL keeps it across a
 * crash of the process, and if a power loss takes it back, the operation is
 * in_flight again and the next owner reconciles it as unknown with the same
 * key (invariant 3 needs the ATTEMPT on disk before the send, and that
 * commit, in store_claim, stays FULL). Halves the fsyncs of a call. */
int sqlite_settle(struct store *store, const struct settle_args *a)
{
        struct sqlite_store *s = S(store);
        int r = sqlite_exec_sql(s, "PRAGMA synchronous = NORMAL;");

        if (r < 0)
                return r;
        s->sync_normal = true;
        s->in_settle = true;
        r = settle_tx(s, a);
        s->in_settle = false;
        if (sqlite_exec_sql(s, "PRAGMA synchronous = FULL;") == 0)
                s->sync_normal = false; /* else the next write transaction retries */
        return r;
}

static int settle_tx(struct sqlite_store *s, const struct settle_args *a)
{
        struct op_record op;
        struct call_record call;
        int r = sqlite_tx_begin(s, true);

        if (r < 0)
                return r;
        r = op_by_id(s, a->op_id, &op);
        if (r == 0 && (op.state != OP_IN_FLIGHT || op.epoch != a->epoch))
                r = TG_EFENCED; /* recovered (and maybe claimed) by a newer owner */
        if (r == 0)
                r = call_by_id(s, a->call_id, &call);
        if (r == 0 && call.op_id != op.id)
                r = TG_EINVAL;
        if (r == 0 && (call.ended || call.epoch != a->epoch))
                r = TG_EFENCED;
        if (r == 0)
                r = call_settle(s, a);
        if (r < 0)
                goto fail;

        op.state = a->decision.next;
        op.next_run_at = a->decision.next_run_at;
        op.reason = a->decision.reason;
        if (a->decision.wait_ms > 0)
                op.last_wait_ms = a->decision.wait_ms;
        if (a->refund_id[0] != '\0')
                store_copy_text(op.refund_id, sizeof(op.refund_id), a->refund_id);
        op.last_http_status = a->http_status;
        op.last_class = a->cls;
        if (call.kind == TG_KIND_MANUAL)
                op.operator_resend = false; /* the operator's re-send has been made */
        op.updated_at = a->now;
        r = sqlite_op_write(s, &op);
        if (r == 0 && op.state == OP_MANUAL)
                r = audit_to_manual(s, &op, a->now, store_class_text(a->cls));
        if (r < 0)
                goto fail;
        return sqlite_tx_commit(s);
fail:
        sqlite_tx_rollback(s);
        return r;
}

/* Runs a statement whose only parameter is ?1 = now. */
static int run_with_now(struct sqlite_store *s, enum stmt_id id, tg_wall_ms now)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, id, &st);

        if (r < 0)
                return r;
        if (sqlite_bind_i64(st, 1, now)) {
                sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return sqlite_stmt_run(st);
}

static int run_with_now_retention(struct sqlite_store *s, enum stmt_id id, tg_wall_ms now,
                                  int64_t retention)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, id, &st);

        if (r < 0)
                return r;
        if (sqlite_bind_i64(st, 1, now) || sqlite_bind_i64(st, 2, retention)) {
                sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return sqlite_stmt_run(st);
}

int sqlite_sweep_deadlines(struct store *store, int64_t key_retention_ms, tg_wall_ms now,
                           unsigned *ret_count)
{
        struct sqlite_store *s = S(store);
        int changes = 0;
        int r = sqlite_tx_begin(s, true);

        if (r < 0)
                return r;
        /* The audit rows first: they name the state each operation left. */
        r = run_with_now(s, ST_SWEEP_AUDIT, now);
        if (r == 0) {
                r = run_with_now(s, ST_SWEEP, now);
                changes = sqlite3_changes(s->db);
        }
        if (r == 0 && key_retention_ms > 0) {
                r = run_with_now_retention(s, ST_SWEEP_KEY_AUDIT, now, key_retention_ms);
                if (r == 0) {
                        r = run_with_now_retention(s, ST_SWEEP_KEY, now, key_retention_ms);
                        changes += sqlite3_changes(s->db);
                }
        }
        if (r < 0) {
                sqlite_tx_rollback(s);
                return r;
        }
        r = sqlite_tx_commit(s);
        if (r == 0)
                *ret_count = (unsigned)changes;
        return r;
}

int sqlite_next_due(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending)
{
        struct sqlite_store *s = S(store);
        tg_wall_ms next = TG_WALL_NEVER;
        bool pending = false;
        sqlite3_stmt *st = NULL;
        int r = sqlite_tx_begin(s, false);
        int rc;

        if (r < 0)
                return r;
        r = earliest_due(s, &next);
        if (r == 0)
                r = sqlite_stmt_get(s, ST_ANY_PENDING, &st);
        if (r == 0) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW)
                        pending = sqlite3_column_int(st, 0) != 0;
                else
                        r = sqlite_map_rc(rc);
                sqlite_stmt_done(st);
        }
        if (r < 0) {
                sqlite_tx_rollback(s);
                return r;
        }
        r = sqlite_tx_commit(s);
        if (r < 0)
                return r;
        *ret_next_run_at = next;
        *ret_pending = pending;
        return 0;
}
