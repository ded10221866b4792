/*
 * store_mysql_exit — intake, the exit and the outbox for the MariaDB backend:
 * accept, claim, settle, the deadline sweep, next_due, outbox intake, and the
 * operation, call and audit rows they read and write.
 *
 * Every op is one short transaction on the main connection
 * (store_mysql_run_tx), committed or rolled back before it returns: commit
 * before reply (accept), record attempt before send (claim). Claims pick
 * with FOR UPDATE SKIP LOCKED: several processes never wait on each other's
 * picks. A claim whose COMMIT outcome is unknown looks for its call row by
 * request_id before claiming anything again. ret_* outputs are written
 * only on success.
 */
#ifdef TG_HAVE_MARIADB /* the whole file: CMake defines it with libmariadb */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "store/mysql_int.h"

#define AGAIN_CANDIDATES 16

#define AGAIN_STATES "state IN ('retry_wait','unknown')"
#define WAIT_STATES  "state IN ('pending','retry_wait','unknown')"
/* A re-send whose key is too old to re-use (%I now, %I key retention). */
#define KEY_TOO_OLD                                                                                \
        "(state = 'retry_wait' AND attempts > 0 AND key_first_used > 0 AND "                       \
        "key_first_used <= %I - %I)"

/* ---- row helpers ----------------------------------------------------------- */

/* One op by operation_id or id; `lock` adds FOR UPDATE. */
int store_mysql_op_lookup(struct mysql_store *s, const char *key, int64_t id, bool lock,
                          struct op_record *ret_op)
{
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r;

        if (key)
                r = store_mysql_query(
                    s, &res, "SELECT " OP_COLS " FROM operations WHERE operation_id = %S%s", key,
                    lock ? " FOR UPDATE" : "");
        else
                r = store_mysql_query(s, &res, "SELECT " OP_COLS " FROM operations WHERE id = %I%s",
                                      id, lock ? " FOR UPDATE" : "");
        if (r < 0)
                return r;
        row = mysql_fetch_row(res);
        r = row ? store_mysql_read_op(res, row, ret_op) : TG_ENOTFOUND;
        mysql_free_result(res);
        return r;
}

int store_mysql_op_write(struct mysql_store *s, const struct op_record *op)
{
        int r = store_mysql_exec(
            s,
            "UPDATE operations SET state = %S, reason = %S, attempts = %U, "
            "attempt_limit = %U, queries = %U, query_limit = %U, deadline_at = %I, "
            "key_first_used = %I, next_run_at = %I, updated_at = %I, "
            "last_wait_ms = %I, operator_resend = %I, epoch = %I, refund_id = %S, "
            "last_http_status = %I, last_class = %S WHERE id = %I",
            store_state_text(op->state), store_reason_text(op->reason), op->attempts,
            op->attempt_limit, op->queries, op->query_limit, op->deadline_at, op->key_first_used,
            op->next_run_at, op->updated_at, op->last_wait_ms, (int64_t)op->operator_resend,
            op->epoch, op->refund_id, (int64_t)op->last_http_status,
            store_class_text(op->last_class), op->id);

        /* affected rows counts changed rows only: an identical write is 0 */
        return r;
}

int store_mysql_audit_insert(struct mysql_store *s, int64_t op_id, tg_wall_ms at,
                             const char *action, const char *operator_name, const char *reason,
                             const char *detail)
{
        return store_mysql_exec(
            s,
            "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
            "VALUES (%I, %I, %S, %S, %S, %S)",
            op_id, at, action, operator_name, reason, detail);
}

static int audit_to_manual(struct mysql_store *s, const struct op_record *op, tg_wall_ms now,
                           const char *how)
{
        char detail[TG_TEXT_MAX];

        snprintf(detail, sizeof(detail), "%s: to manual after %u POSTs, %u queries", how,
                 op->attempts, op->queries);
        return store_mysql_audit_insert(s, op->id, now, "event", "tollgate",
                                        store_reason_text(op->reason), detail);
}

static int call_by(struct mysql_store *s, int64_t id, bool lock, struct call_record *ret_call)
{
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r = store_mysql_query(s, &res, "SELECT " CALL_COLS " FROM calls WHERE id = %I%s", id,
                                  lock ? " FOR UPDATE" : "");

        if (r < 0)
                return r;
        row = mysql_fetch_row(res);
        r = row ? store_mysql_read_call(res, row, ret_call) : TG_ENOTFOUND;
        mysql_free_result(res);
        return r;
}

/* ---- intake ---------------------------------------------------------------- */

static bool same_request(const struct refund_request *a, const struct refund_request *b)
{
        return strcmp(a->payment_id, b->payment_id) == 0 && a->amount == b->amount &&
               strcmp(a->currency, b->currency) == 0;
}

struct accept_ctx {
        const struct refund_request *req;
        tg_wall_ms now;
        const struct policy_config *limits;
        bool created;
        struct op_record op;
};

static int accept_tx(struct mysql_store *s, void *ctx)
{
        struct accept_ctx *c = ctx;
        const struct refund_request *req = c->req;
        int r = store_mysql_op_lookup(s, req->operation_id, 0, false, &c->op);

        c->created = false;
        if (r == 0) {
                if (!same_request(&c->op.req, req))
                        return TG_ECONFLICT; /* same key, other body: nothing stored */
                /* our own insert whose COMMIT answer was lost */
                c->created = s->commit_unknown && c->op.accepted_at == c->now &&
                             strcmp(c->op.source, "api") == 0;
                return 0;
        }
        if (r != TG_ENOTFOUND)
                return r;
        r = store_mysql_exec(
            s,
            "INSERT INTO operations (operation_id, payment_id, amount, currency, state, "
            "attempt_limit, query_limit, accepted_at, deadline_at, updated_at, source) "
            "VALUES (%S, %S, %I, %S, 'pending', %U, %U, %I, %I, %I, 'api')",
            req->operation_id, req->payment_id, req->amount, req->currency, c->limits->max_attempts,
            c->limits->max_queries, c->now, c->now + c->limits->deadline_ms, c->now);
        if (r == TG_ECONFLICT)
                return TG_EBUSY; /* a concurrent accept of the same key: look again */
        if (r < 0)
                return r;
        r = store_mysql_op_lookup(s, NULL, (int64_t)mysql_insert_id(s->db), false, &c->op);
        c->created = true;
        return r;
}

int store_mysql_accept(struct store *store, const struct refund_request *req, tg_wall_ms now,
                       const struct policy_config *limits, bool *ret_created,
                       struct op_record *ret_op)
{
        struct accept_ctx c = {.req = req, .now = now, .limits = limits};
        /* commit before reply: run_tx returns after COMMIT */
        int r = store_mysql_run_tx(M(store), accept_tx, &c, TX_RECHECKS);

        if (r < 0)
                return r;
        *ret_created = c.created;
        *ret_op = c.op;
        return 0;
}

struct get_ctx {
        const char *key;
        struct op_record op;
};

static int get_tx(struct mysql_store *s, void *ctx)
{
        struct get_ctx *c = ctx;

        return store_mysql_op_lookup(s, c->key, 0, false, &c->op);
}

int store_mysql_get(struct store *store, const char *operation_id, struct op_record *ret_op)
{
        struct get_ctx c = {.key = operation_id};
        int r = store_mysql_run_tx(M(store), get_tx, &c, TX_RECHECKS);

        if (r == 0)
                *ret_op = c.op;
        return r;
}

/* ---- the exit ------------------------------------------------------------------- */

static int earliest_due(struct mysql_store *s, tg_wall_ms *ret_next)
{
        MYSQL_RES *res;
        int64_t v = 0;
        bool null = false;
        int r =
            store_mysql_query(s, &res,
                              "SELECT MIN(next_run_at) FROM operations FORCE INDEX (ops_state_due) "
                              "WHERE " AGAIN_STATES);

        if (r == 0)
                r = store_mysql_one_i64(res, &v, &null);
        if (r < 0)
                return r;
        *ret_next = null ? TG_WALL_NEVER : v;
        return 0;
}

/* The oldest-accepted due operation of the group, locked FOR UPDATE; one
 * locked by another transaction is skipped, never waited for. */
static int pick(struct mysql_store *s, const struct claim_args *args, int64_t *ret_id)
{
        /* key age check off: a retention no key can reach */
        int64_t retention = args->key_retention_ms > 0 ? args->key_retention_ms : INT64_MAX / 4;
        int64_t ids[AGAIN_CANDIDATES];
        tg_wall_ms next = TG_WALL_NEVER;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int n = 0, r;

        if (args->group == STORE_GROUP_FIRST) {
                int64_t id = 0;
                bool null = false;

                r = store_mysql_query(
                    s, &res,
                    "SELECT id FROM operations FORCE INDEX (ops_state_accepted) "
                    "WHERE state = 'pending' AND attempt_limit > 0 AND deadline_at > %I "
                    "ORDER BY accepted_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
                    args->now);
                if (r == 0)
                        r = store_mysql_one_i64(res, &id, &null);
                if (r == 0 && null)
                        r = TG_ESTORE;
                if (r == 0)
                        *ret_id = id;
                return r;
        }
        /* Nothing due (the common case while retries wait): one index probe. */
        r = earliest_due(s, &next);
        if (r < 0)
                return r;
        if (next > args->now)
                return TG_ENOTFOUND;
        /* Candidates without locks (the again group spans two states, so the
         * order needs a sort, which FOR UPDATE would turn into a lock on
         * every due row), then lock the first that is still free and due. */
        r = store_mysql_query(s, &res,
                              "SELECT id FROM operations FORCE INDEX (ops_state_due) "
                              "WHERE " AGAIN_STATES " AND next_run_at <= %I AND deadline_at > %I "
                              "AND NOT " KEY_TOO_OLD " AND (%I = 0 OR state = 'retry_wait') "
                              "ORDER BY accepted_at, id LIMIT %I",
                              args->now, args->now, args->now, retention, (int64_t)args->no_queries,
                              (int64_t)AGAIN_CANDIDATES);
        if (r < 0)
                return r;
        while (n < AGAIN_CANDIDATES) {
                row = mysql_fetch_row(res);
                if (!row)
                        break;
                if (store_mysql_parse_i64(row[0], &ids[n]))
                        n++;
        }
        mysql_free_result(res);
        for (int i = 0; i < n; i++) {
                int64_t id = 0;
                bool null = false;

                r = store_mysql_query(
                    s, &res,
                    "SELECT id FROM operations WHERE id = %I AND " AGAIN_STATES
                    " AND next_run_at <= %I AND deadline_at > %I AND NOT " KEY_TOO_OLD
                    " AND (%I = 0 OR state = 'retry_wait') FOR UPDATE SKIP LOCKED",
                    ids[i], args->now, args->now, args->now, retention, (int64_t)args->no_queries);
                if (r == 0)
                        r = store_mysql_one_i64(res, &id, &null);
                if (r == TG_ENOTFOUND)
                        continue;
                if (r == 0 && null)
                        r = TG_ESTORE;
                if (r == 0)
                        *ret_id = id;
                return r;
        }
        return TG_ENOTFOUND;
}

struct claim_ctx {
        const struct claim_args *args;
        struct op_record op;
        struct call_record call;
};

/* After a COMMIT whose answer was lost: did the claim happen? Its call row
 * carries our request_id. */
static int claim_recheck(struct mysql_store *s, struct claim_ctx *c)
{
        MYSQL_RES *res;
        int64_t id = 0;
        bool null = false;
        int r =
            store_mysql_query(s, &res, "SELECT id FROM calls WHERE request_id = %S AND epoch = %I",
                              c->args->request_id, c->args->epoch);

        if (r == 0)
                r = store_mysql_one_i64(res, &id, &null);
        if (r == 0 && null)
                r = TG_ESTORE;
        if (r == 0)
                r = call_by(s, id, false, &c->call);
        if (r == 0)
                r = store_mysql_op_lookup(s, NULL, c->call.op_id, false, &c->op);
        return r;
}

static int claim_tx(struct mysql_store *s, void *ctx)
{
        struct claim_ctx *c = ctx;
        const struct claim_args *args = c->args;
        struct op_record op;
        struct call_record call;
        int64_t id = 0;
        unsigned share = 0;
        int r;

        if (s->commit_unknown) {
                /* Never claim twice for one request: without a request id
                 * the lost claim cannot be found, so say the outcome is
                 * unknown (the next owner's recovery settles it). */
                if (!args->request_id[0])
                        return TG_EIO;
                r = claim_recheck(s, c);
                if (r != TG_ENOTFOUND)
                        return r; /* found (it committed), or a failure */
        }
        r = store_mysql_check_epoch(s, args->epoch, &share);
        if (r == 0)
                r = pick(s, args, &id);
        if (r == 0)
                r = store_mysql_op_lookup(s, NULL, id, false, &op); /* locked by pick */
        if (r < 0)
                return r;

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
        r = store_mysql_exec(
            s,
            "UPDATE operations SET state = 'in_flight', attempts = %U, queries = %U, "
            "key_first_used = %I, epoch = %I, share = %U, updated_at = %I WHERE id = %I",
            op.attempts, op.queries, op.key_first_used, op.epoch, share, op.updated_at, op.id);
        if (r < 0)
                return r;

        call.op_id = op.id;
        store_copy_text(call.operation_id, sizeof(call.operation_id), op.req.operation_id);
        store_copy_text(call.request_id, sizeof(call.request_id), args->request_id);
        call.epoch = args->epoch;
        call.start_mono = args->start_mono;
        call.start_wall = args->now;
        call.in_flight_at_start = args->in_flight_at_start;
        call.ended = false;
        call.cls = TG_CLASS_UNKNOWN;
        r = store_mysql_exec(
            s,
            "INSERT INTO calls (op_id, operation_id, kind, attempt, request_id, epoch, "
            "start_mono, start_wall, in_flight_at_start, share) "
            "VALUES (%I, %S, %S, %U, %S, %I, %I, %I, %U, %U)",
            call.op_id, call.operation_id, store_kind_text(call.kind), call.attempt,
            call.request_id, call.epoch, call.start_mono, call.start_wall, call.in_flight_at_start,
            share);
        if (r < 0)
                return r;
        call.id = (int64_t)mysql_insert_id(s->db);
        c->op = op;
        c->call = call;
        return 0;
}

int store_mysql_claim(struct store *store, const struct claim_args *args, struct op_record *ret_op,
                      struct call_record *ret_call)
{
        struct claim_ctx c = {.args = args};
        /* record attempt before send: the call row ("sent, outcome unknown")
         * and the counted attempt are committed before this returns. */
        int r = store_mysql_run_tx(M(store), claim_tx, &c, TX_RECHECKS);

        if (r < 0)
                return r;
        *ret_op = c.op;
        *ret_call = c.call;
        return 0;
}

struct settle_ctx {
        const struct settle_args *a;
};

static int settle_tx(struct mysql_store *s, void *ctx)
{
        const struct settle_args *a = ((struct settle_ctx *)ctx)->a;
        struct op_record op;
        struct call_record call;
        int r = store_mysql_op_lookup(s, NULL, a->op_id, true, &op);

        if (r == 0)
                r = call_by(s, a->call_id, true, &call);
        if (r == 0 && call.op_id != op.id)
                r = TG_EINVAL;
        if (r < 0)
                return r;
        /* our own settle whose COMMIT answer was lost: done already */
        if (s->commit_unknown && call.ended && call.epoch == a->epoch &&
            call.end_mono == a->end_mono && op.epoch == a->epoch && op.state == a->decision.next)
                return 0;
        if (op.state != OP_IN_FLIGHT || op.epoch != a->epoch)
                return TG_EFENCED; /* recovered (and maybe claimed) by a newer owner */
        if (call.ended || call.epoch != a->epoch)
                return TG_EFENCED;
        r = store_mysql_exec(
            s,
            "UPDATE calls SET ended = 1, end_mono = %I, end_wall = %I, sent = %I, cls = %S, "
            "http_status = %I, latency_us = %I, error = %S, "
            "start_mono = IF(%I > 0, %I, start_mono), "
            "start_wall = IF(%I > 0, %I, start_wall) WHERE id = %I AND ended = 0",
            a->end_mono, a->now, (int64_t)a->sent, store_class_text(a->cls),
            (int64_t)a->http_status, a->latency_us, a->error, a->handoff_mono, a->handoff_mono,
            a->handoff_wall, a->handoff_wall, a->call_id);
        if (r == 0 && s->affected != 1)
                r = TG_EFENCED;
        if (r < 0)
                return r;

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
        r = store_mysql_op_write(s, &op);
        if (r == 0 && op.state == OP_MANUAL)
                r = audit_to_manual(s, &op, a->now, store_class_text(a->cls));
        return r;
}

int store_mysql_settle(struct store *store, const struct settle_args *a)
{
        struct settle_ctx c = {.a = a};

        return store_mysql_run_tx(M(store), settle_tx, &c, TX_RECHECKS);
}

struct sweep_ctx {
        int64_t retention;
        tg_wall_ms now;
        unsigned count;
};

static int sweep_tx(struct mysql_store *s, void *ctx)
{
        struct sweep_ctx *c = ctx;
        uint64_t changed;
        int r;

        c->count = 0;
        /* The audit rows first: they name the state each operation left.
         * deadline_at = 0 is an outbox row not yet taken in. */
        r = store_mysql_exec(s,
                             "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
                             "SELECT id, %I, 'event', 'tollgate', 'deadline', "
                             "CONCAT('deadline passed while ', state, ': to manual') "
                             "FROM operations WHERE " WAIT_STATES
                             " AND deadline_at > 0 AND deadline_at < %I "
                             "FOR UPDATE",
                             c->now, c->now);
        if (r == 0)
                r = store_mysql_exec(s,
                                     "UPDATE operations SET state = 'manual', reason = 'deadline', "
                                     "next_run_at = 0, operator_resend = 0, updated_at = %I "
                                     "WHERE " WAIT_STATES
                                     " AND deadline_at > 0 AND deadline_at < %I",
                                     c->now, c->now);
        changed = s->affected;
        if (r == 0 && c->retention > 0) {
                r = store_mysql_exec(
                    s,
                    "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
                    "SELECT id, %I, 'event', 'tollgate', 'key_retention', "
                    "'idempotency key past retention before its re-send: to manual' "
                    "FROM operations FORCE INDEX (ops_state_key) WHERE " KEY_TOO_OLD " FOR UPDATE",
                    c->now, c->now, c->retention);
                if (r == 0)
                        r = store_mysql_exec(
                            s,
                            "UPDATE operations FORCE INDEX (ops_state_key) "
                            "SET state = 'manual', reason = 'key_retention', "
                            "next_run_at = 0, operator_resend = 0, updated_at = %I "
                            "WHERE " KEY_TOO_OLD,
                            c->now, c->now, c->retention);
                changed += s->affected;
        }
        if (r == 0)
                c->count = (unsigned)changed;
        return r;
}

int store_mysql_sweep_deadlines(struct store *store, int64_t key_retention_ms, tg_wall_ms now,
                                unsigned *ret_count)
{
        struct sweep_ctx c = {.retention = key_retention_ms, .now = now};
        int r = store_mysql_run_tx(M(store), sweep_tx, &c, TX_RECHECKS);

        if (r == 0)
                *ret_count = c.count;
        return r;
}

struct next_due_ctx {
        tg_wall_ms next;
        bool pending;
};

static int next_due_tx(struct mysql_store *s, void *ctx)
{
        struct next_due_ctx *c = ctx;
        MYSQL_RES *res;
        int64_t v = 0;
        bool null = false;
        int r = earliest_due(s, &c->next);

        if (r == 0)
                r = store_mysql_query(
                    s, &res, "SELECT EXISTS (SELECT 1 FROM operations WHERE state = 'pending')");
        if (r == 0)
                r = store_mysql_one_i64(res, &v, &null);
        if (r == 0)
                c->pending = !null && v != 0;
        return r;
}

int store_mysql_next_due(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending)
{
        struct next_due_ctx c = {0};
        int r = store_mysql_run_tx(M(store), next_due_tx, &c, TX_RECHECKS);

        if (r < 0)
                return r;
        *ret_next_run_at = c.next;
        *ret_pending = c.pending;
        return 0;
}

/* ---- outbox ------------------------------------------------------------------------ */

#define OUTBOX_BATCH 64

struct outbox_ctx {
        const struct policy_config *limits;
        tg_wall_ms now;
        unsigned taken, invalid;
        struct op_record batch[OUTBOX_BATCH];
};

static int outbox_tx(struct mysql_store *s, void *ctx)
{
        struct outbox_ctx *c = ctx;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int n = 0;
        int r;

        c->taken = c->invalid = 0;
        /* attempt_limit = 0: inserted by an application, not taken in yet.
         * SKIP LOCKED: two dispatchers never take in the same row, and a
         * row still inside its writer's open transaction is not visible. */
        r = store_mysql_query(s, &res,
                              "SELECT " OP_COLS " FROM operations FORCE INDEX (ops_state_accepted) "
                              "WHERE state = 'pending' AND attempt_limit = 0 "
                              "ORDER BY accepted_at, id LIMIT %I FOR UPDATE SKIP LOCKED",
                              (int64_t)OUTBOX_BATCH);
        if (r < 0)
                return r;
        while (r == 0 && n < OUTBOX_BATCH) {
                row = mysql_fetch_row(res);
                if (!row)
                        break;
                r = store_mysql_read_op(res, row, &c->batch[n++]);
        }
        mysql_free_result(res);
        for (int i = 0; i < n && r == 0; i++) {
                struct op_record *op = &c->batch[i];
                struct refund_fields f = {
                    .operation_id = op->req.operation_id,
                    .operation_id_len = strlen(op->req.operation_id),
                    .payment_id = op->req.payment_id,
                    .payment_id_len = strlen(op->req.payment_id),
                    .amount = op->req.amount,
                    .currency = op->req.currency,
                    .currency_len = strlen(op->req.currency),
                };
                struct refund_problem problem = {0};
                char detail[TG_TEXT_MAX];

                op->attempt_limit = c->limits->max_attempts;
                op->query_limit = c->limits->max_queries;
                op->deadline_at = op->accepted_at + c->limits->deadline_ms;
                op->updated_at = c->now;
                if (refund_validate(&f, &problem) == 0) {
                        r = store_mysql_op_write(s, op);
                        if (r == 0)
                                c->taken++;
                        continue;
                }
                /* invalid: to manual with the reason, never skipped */
                op->state = OP_MANUAL;
                op->reason = MANUAL_INVALID;
                op->next_run_at = 0;
                snprintf(detail, sizeof(detail), "outbox row refused: %s: %s",
                         problem.field ? problem.field : "?",
                         problem.message ? problem.message : "invalid");
                r = store_mysql_op_write(s, op);
                if (r == 0)
                        r = store_mysql_audit_insert(s, op->id, c->now, "event", "tollgate",
                                                     "invalid", detail);
                if (r == 0)
                        c->invalid++;
        }
        return r;
}

int store_mysql_outbox_intake(struct store *store, const struct policy_config *limits,
                              tg_wall_ms now, unsigned *ret_taken, unsigned *ret_invalid)
{
        struct outbox_ctx *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return TG_ENOMEM;
        c->limits = limits;
        c->now = now;
        /* a re-run after an unknown COMMIT finds the rows it took in gone */
        r = store_mysql_run_tx(M(store), outbox_tx, c, TX_RECHECKS);
        if (r == 0) {
                *ret_taken = c->taken;
                *ret_invalid = c->invalid;
        }
        free(c);
        return r;
}

#endif /* TG_HAVE_MARIADB */
