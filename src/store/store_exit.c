/*
 * store_exit — intake, the exit, the sweeps and the outbox, written once
 * for every backend over the primitives of store_backend.h (the operators'
 * actions and the provider's other answers: store_actions.c).
 * Each function is one short transaction (the sweeps: one per bounded
 * batch), committed or rolled back before it returns; what changes in an
 * operation is decided and applied by core/policy.h, here only loaded,
 * locked and written, with the audit rows that go with it.
 *
 * Durability order: accept commits before the caller answers 202 (commit
 * before reply); claim commits the attempt and its call row "sent, outcome
 * unknown" before the caller hands the request to the transport (record
 * attempt before send); settle commits an outcome with the weaker durability
 * a lost outcome allows (the operation is then in_flight again and is
 * reconciled as unknown). Claims check the owner epoch inside their
 * transaction, settles the epoch the operation was claimed under.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "core/traceparent.h"
#include "store/store_backend.h"

#define SWEEP_BATCH  256 /* operations moved to manual per sweep transaction */
#define OUTBOX_BATCH 64  /* outbox rows taken in per transaction */

/* A key age no key reaches: the pick's form of "no key-age check". */
#define KEY_AGE_OFF (INT64_MAX / 4)

int store_audit_add(struct store *s, int64_t op_id, tg_wall_ms at, const char *action,
                    const char *operator_name, const char *reason, const char *detail)
{
        struct audit_record a;

        memset(&a, 0, sizeof(a));
        a.op_id = op_id;
        a.at = at;
        store_copy_text(a.action, sizeof(a.action), action);
        store_copy_text(a.operator_name, sizeof(a.operator_name), operator_name);
        store_copy_text(a.reason, sizeof(a.reason), reason);
        store_copy_text(a.detail, sizeof(a.detail), detail);
        return s->ops->audit_insert(s, &a);
}

/* An audit "event" when the exit itself moves an operation to manual, so
 * that every manual item has a traceable history. */
static int audit_to_manual(struct store *s, const struct op_record *op, tg_wall_ms now,
                           const char *how)
{
        char detail[TG_TEXT_MAX];

        snprintf(detail, sizeof(detail), "%s: to manual after %u POSTs, %u queries", how,
                 op->attempts, op->queries);
        return store_audit_add(s, op->id, now, "event", "tollgate", manual_reason_name(op->reason),
                               detail);
}

/* ---- intake ------------------------------------------------------------------ */

/* The whole payload, the optional reason and metadata included: they may
 * reach the provider's body, so a resubmission that changes them is another
 * request. Metadata is stored with its keys sorted, so equal maps are equal
 * texts. */
static bool same_request(const struct refund_request *a, const struct refund_request *b)
{
        return strcmp(store_req_account(a), store_req_account(b)) == 0 &&
               strcmp(a->payment_id, b->payment_id) == 0 && a->amount == b->amount &&
               strcmp(a->currency, b->currency) == 0 && strcmp(a->reason, b->reason) == 0 &&
               strcmp(a->metadata, b->metadata) == 0;
}

/* One refund inside the caller's write transaction: a new operation, or
 * the existing one with the same operation_id (TG_ECONFLICT when its
 * request differs; nothing is written then, so a batch may go on). */
static int accept_one(struct store *s, const struct refund_request *req, tg_wall_ms now,
                      const struct policy_config *limits, bool *ret_created,
                      struct op_record *ret_op)
{
        struct op_record op;
        int64_t id = 0;
        int r = s->ops->op_get(s, req->operation_id, 0, false, ret_op);

        *ret_created = false;
        if (r == 0) {
                if (!same_request(&ret_op->req, req))
                        return TG_ECONFLICT; /* same key, other body: nothing stored */
                /* our own insert whose COMMIT answer was lost */
                *ret_created = s->ops->tx_commit_unknown(s) && ret_op->accepted_at == now &&
                               strcmp(ret_op->source, "api") == 0;
                return 0;
        }
        if (r != TG_ENOTFOUND)
                return r;
        policy_accept(limits, req, now, &op);
        store_copy_text(op.req.account, sizeof(op.req.account), store_req_account(req));
        r = s->ops->op_insert(s, &op, &id);
        if (r == TG_ECONFLICT)
                return TG_EBUSY; /* a concurrent accept of the same key: look again */
        if (r == 0)
                r = s->ops->op_get(s, NULL, id, false, ret_op);
        *ret_created = r == 0;
        return r;
}

/* What store_accept takes before it writes: texts that fit, a positive
 * amount, a traceparent only as tollgate writes it. */
static bool accept_args_ok(const struct refund_request *req)
{
        struct trace_context tc;

        if (!req || !store_text_ok(req->operation_id, TG_OP_ID_MAX) ||
            !store_text_ok(req->payment_id, TG_PAYMENT_ID_MAX) || req->amount <= 0 ||
            !store_text_ok(req->currency, sizeof(req->currency) - 1) || req->deadline_at < 0 ||
            !store_buf_ok(req->traceparent, sizeof(req->traceparent)) ||
            !store_buf_ok(req->reason, sizeof(req->reason)) ||
            !store_buf_ok(req->metadata, sizeof(req->metadata)) ||
            !store_buf_ok(req->notify_url, sizeof(req->notify_url)) ||
            !store_buf_ok(req->submitted_by, sizeof(req->submitted_by)) ||
            (req->notify_url[0] && url_allow_check(req->notify_url) < 0) ||
            !(store_buf_ok(req->account, sizeof(req->account)) &&
              (!req->account[0] || refund_account_name_ok(req->account))))
                return false;
        /* only a traceparent as tollgate writes it is stored */
        return !req->traceparent[0] ||
               (strlen(req->traceparent) == TG_TRACEPARENT_MAX &&
                traceparent_parse(req->traceparent, TG_TRACEPARENT_MAX, &tc) == 0);
}

struct accept_ctx {
        const struct refund_request *req;
        tg_wall_ms now;
        const struct policy_config *limits;
        bool created;
        struct op_record op;
};

static int accept_tx(struct store *s, void *ctx)
{
        struct accept_ctx *c = ctx;
        int r = accept_one(s, c->req, c->now, c->limits, &c->created, &c->op);

        /* a dispatcher in another process looks once this commits */
        return r == 0 && c->created ? store_bell_ring(s) : r;
}

int store_accept(struct store *store, const struct refund_request *req, tg_wall_ms now,
                 const struct policy_config *limits, bool *ret_created, struct op_record *ret_op)
{
        struct accept_ctx c = {.req = req, .now = now, .limits = limits};
        int r;

        if (!store || !limits || !ret_created || !ret_op || !accept_args_ok(req))
                return TG_EINVAL;
        /* commit before reply: the caller answers 202 only after this */
        r = store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, accept_tx, &c);
        if (r < 0)
                return r;
        *ret_created = c.created;
        *ret_op = c.op;
        return 0;
}

struct accept_batch_ctx {
        struct store_accept_item *items;
        size_t n;
        tg_wall_ms now;
        const struct policy_config *limits;
};

/* Every item in one transaction, in order. An item's conflict is its own
 * result (it wrote nothing); any other failure ends the transaction, and
 * with it the batch: all of it is stored, or none. */
static int accept_batch_tx(struct store *s, void *ctx)
{
        struct accept_batch_ctx *c = ctx;

        for (size_t i = 0; i < c->n; i++) {
                struct store_accept_item *it = &c->items[i];
                int r = accept_one(s, it->req, c->now, c->limits, &it->created, &it->op);

                if (r < 0 && r != TG_ECONFLICT)
                        return r;
                it->result = r;
                /* the same operation_id earlier in this batch created it: this
                 * one is its repeat (also when a lost COMMIT is rechecked) */
                for (size_t j = 0; it->created && j < i; j++)
                        if (c->items[j].result == 0 && c->items[j].created &&
                            strcmp(c->items[j].req->operation_id, it->req->operation_id) == 0)
                                it->created = false;
        }
        /* one ring for the batch: a dispatcher in another process looks once
         * this commits */
        for (size_t i = 0; i < c->n; i++)
                if (c->items[i].result == 0 && c->items[i].created)
                        return store_bell_ring(s);
        return 0;
}

int store_accept_batch(struct store *store, struct store_accept_item *items, size_t n,
                       tg_wall_ms now, const struct policy_config *limits)
{
        struct accept_batch_ctx c = {.items = items, .n = n, .now = now, .limits = limits};

        if (!store || !limits || (n > 0 && !items))
                return TG_EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!accept_args_ok(items[i].req))
                        return TG_EINVAL;
        if (n == 0)
                return 0;
        /* commit before reply: the caller answers only after this */
        return store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, accept_batch_tx, &c);
}

struct get_ctx {
        const char *key;
        struct op_record op;
};

static int get_tx(struct store *s, void *ctx)
{
        struct get_ctx *c = ctx;

        return s->ops->op_get(s, c->key, 0, false, &c->op);
}

int store_get(struct store *store, const char *operation_id, struct op_record *ret_op)
{
        struct get_ctx c = {.key = operation_id};
        int r;

        if (!store || !ret_op || !store_text_ok(operation_id, TG_OP_ID_MAX))
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, get_tx, &c);
        if (r == 0)
                *ret_op = c.op;
        return r;
}

/* ---- the exit ---------------------------------------------------------------- */

struct claim_ctx {
        const struct claim_args *args; /* one per claim */
        unsigned max;
        enum store_group turn; /* in: the group whose turn it is; out: the next */
        bool alternate;        /* false: that group only (store_claim) */
        struct op_record *ops;
        struct call_record *calls;
        unsigned n;
};

/* Claims one due operation of `group` under a->epoch (already checked to
 * name `share`): policy_claim() and the call row "sent, outcome unknown". */
static int claim_one(struct store *s, const struct claim_args *a, enum store_group group,
                     unsigned share, struct op_record *ret_op, struct call_record *ret_call)
{
        struct store_pick pick = {
            .group = group,
            .now = a->now,
            .key_retention_ms = a->key_retention_ms > 0 ? a->key_retention_ms : KEY_AGE_OFF,
            .queries_allowed = !a->no_queries,
            .posts_barred = a->no_posts,
        };
        struct op_record op, next;
        struct call_record call;
        struct trace_context tc;
        enum tg_call_kind kind;
        unsigned attempt = 0;
        int64_t id = 0;
        int r = s->ops->op_pick(s, &pick, &id);

        if (r == 0)
                r = s->ops->op_get(s, NULL, id, false, &op); /* locked by the pick */
        if (r == 0)
                r = policy_claim(&op, a->epoch, share, a->now, &next, &kind, &attempt);
        /* an operation without a trace (an outbox row, a row older than trace
         * context, a column an application filled with something else) gets
         * the one minted for this claim, and keeps it for every later call */
        if (r == 0 &&
            traceparent_parse(next.traceparent, strnlen(next.traceparent, sizeof(next.traceparent)),
                              &tc) < 0)
                store_copy_text(next.traceparent, sizeof(next.traceparent), a->traceparent_new);
        if (r == 0)
                r = store_op_put(s, &op, &next);
        if (r < 0)
                return r;
        memset(&call, 0, sizeof(call));
        call.op_id = op.id;
        store_copy_text(call.operation_id, sizeof(call.operation_id), op.req.operation_id);
        call.kind = kind;
        call.attempt = attempt;
        store_copy_text(call.request_id, sizeof(call.request_id), a->request_id);
        call.epoch = a->epoch;
        call.share = share;
        call.start_mono = a->start_mono;
        call.start_wall = a->now;
        call.in_flight_at_start = a->in_flight_at_start;
        call.ended = false;
        call.cls = TG_CLASS_UNKNOWN;
        if (next.traceparent[0] && a->span_id[0]) {
                /* 00-<trace id>-...: the trace id at its fixed place */
                memcpy(call.trace_id, next.traceparent + 3, TG_TRACE_ID_MAX);
                call.trace_id[TG_TRACE_ID_MAX] = '\0';
                store_copy_text(call.span_id, sizeof(call.span_id), a->span_id);
        }
        r = s->ops->call_insert(s, &call);
        if (r == 0) /* calls_total, in the same transaction as the row */
                r = s->ops->counter_add(s, STORE_COUNTER_CALLS, 1);
        if (r < 0)
                return r;
        *ret_op = next;
        *ret_call = call;
        return 0;
}

/* After a COMMIT whose answer was lost: did the claims happen? Their call
 * rows carry our request ids (all of them committed, or none). */
static int claim_recheck(struct store *s, struct claim_ctx *c)
{
        int r = 0;

        for (c->n = 0; c->n < c->max; c->n++) {
                r = s->ops->call_find(s, c->args[c->n].request_id, c->args[c->n].epoch,
                                      &c->calls[c->n]);
                if (r == 0)
                        r = s->ops->op_get(s, NULL, c->calls[c->n].op_id, false, &c->ops[c->n]);
                if (r < 0)
                        break;
        }
        if (r == TG_ENOTFOUND && c->n > 0)
                r = 0; /* fewer than asked were due */
        return r;
}

static int claim_tx(struct store *s, void *ctx)
{
        struct claim_ctx *c = ctx;
        enum store_group turn = c->turn;
        unsigned share = 0;
        /* a group found empty stays so for the rest of the batch (our own
         * claims make nothing due; another writer's new work waits for the
         * next batch, a few milliseconds): not asked again */
        bool empty[2] = {false, false};
        int r;

        c->n = 0;
        if (s->ops->tx_commit_unknown(s)) {
                /* Never claim twice for one request: without a request id
                 * the lost claim cannot be found, so say the outcome is
                 * unknown (the next owner's recovery settles it). */
                if (!c->args[0].request_id[0])
                        return TG_EIO;
                r = claim_recheck(s, c);
                if (r != TG_ENOTFOUND)
                        return r; /* found (it committed), or a failure */
                c->n = 0;
        }
        r = s->ops->epoch_share(s, c->args[0].epoch, &share);
        /* the groups take turns; an empty group yields its turn */
        while (r == 0 && c->n < c->max) {
                enum store_group other =
                    turn == STORE_GROUP_FIRST ? STORE_GROUP_AGAIN : STORE_GROUP_FIRST;
                const struct claim_args *a = &c->args[c->n];

                enum store_group g = turn;

                r = empty[g] ? TG_ENOTFOUND
                             : claim_one(s, a, g, share, &c->ops[c->n], &c->calls[c->n]);
                if (r == TG_ENOTFOUND) {
                        empty[g] = true;
                        if (c->alternate) {
                                g = other;
                                r = empty[g]
                                        ? TG_ENOTFOUND
                                        : claim_one(s, a, g, share, &c->ops[c->n], &c->calls[c->n]);
                                if (r == TG_ENOTFOUND)
                                        empty[g] = true;
                        }
                }
                if (r == 0) {
                        c->n++;
                        /* after a claim the other group goes next */
                        turn = g == STORE_GROUP_FIRST ? STORE_GROUP_AGAIN : STORE_GROUP_FIRST;
                }
        }
        if (r == TG_ENOTFOUND && c->n > 0)
                r = 0; /* fewer due than asked for */
        if (r == 0)
                c->turn = turn;
        return r;
}

/* args[i] of a batch (the first's epoch is the batch's). */
static bool claim_args_ok(const struct claim_args *args, unsigned i)
{
        const struct claim_args *a = &args[i];

        return (a->group == STORE_GROUP_FIRST || a->group == STORE_GROUP_AGAIN) &&
               store_buf_ok(a->request_id, sizeof(a->request_id)) &&
               store_buf_ok(a->span_id, sizeof(a->span_id)) &&
               store_buf_ok(a->traceparent_new, sizeof(a->traceparent_new)) &&
               (!a->traceparent_new[0] || strlen(a->traceparent_new) == TG_TRACEPARENT_MAX) &&
               a->epoch == args[0].epoch;
}

int store_claim(struct store *store, const struct claim_args *args, struct op_record *ret_op,
                struct call_record *ret_call)
{
        struct claim_ctx c = {.args = args, .max = 1, .ops = ret_op, .calls = ret_call};
        struct op_record op;
        struct call_record call;
        int r;

        if (!store || !args || !ret_op || !ret_call || !claim_args_ok(args, 0))
                return TG_EINVAL;
        c.turn = args->group;
        c.ops = &op;
        c.calls = &call;
        /* record attempt before send: the call row ("sent, outcome unknown")
         * and the counted attempt are committed before this returns. One
         * group only: the other is the caller's to ask. */
        r = store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, claim_tx, &c);
        if (r == 0 && c.n == 0)
                r = TG_ENOTFOUND;
        if (r < 0)
                return r;
        *ret_op = op;
        *ret_call = call;
        return 0;
}

int store_claim_batch(struct store *store, const struct claim_args *args, unsigned max,
                      enum store_group *turn, struct op_record *ret_ops,
                      struct call_record *ret_calls, unsigned *ret_n)
{
        struct claim_ctx c = {
            .args = args, .max = max, .ops = ret_ops, .calls = ret_calls, .alternate = true};
        int r;

        if (!store || !args || !turn || !ret_ops || !ret_calls || !ret_n || max == 0)
                return TG_EINVAL;
        for (unsigned i = 0; i < max; i++)
                if (!claim_args_ok(args, i))
                        return TG_EINVAL;
        c.turn = *turn;
        /* record attempt before send, for every claim of the batch: one
         * commit (group commit) */
        r = store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, claim_tx, &c);
        if (r < 0)
                return r;
        if (c.n == 0)
                return TG_ENOTFOUND;
        *turn = c.turn;
        *ret_n = c.n;
        return 0;
}

static int settle_tx(struct store *s, void *ctx)
{
        const struct settle_args *a = ctx;
        struct policy_call_end end = {
            .cls = a->cls, .http_status = a->http_status, .refund_id = a->refund_id};
        struct op_record op, next;
        struct call_record call;
        int r = s->ops->op_get(s, NULL, a->op_id, true, &op);

        if (r == 0)
                r = s->ops->call_get(s, a->call_id, true, &call);
        if (r == 0 && call.op_id != op.id)
                r = TG_EINVAL;
        if (r < 0)
                return r;
        /* our own settle whose COMMIT answer was lost: done already */
        if (s->ops->tx_commit_unknown(s) && call.ended && call.epoch == a->epoch &&
            call.end_mono == a->end_mono && op.epoch == a->epoch && op.state == a->decision.next)
                return 0;
        if (op.state != OP_IN_FLIGHT || op.epoch != a->epoch)
                return TG_EFENCED; /* recovered (and maybe claimed) by a newer owner */
        if (call.ended || call.epoch != a->epoch)
                return TG_EFENCED;
        call.ended = true;
        call.end_mono = a->end_mono;
        call.end_wall = a->now;
        call.sent = a->sent;
        call.cls = a->cls;
        call.http_status = a->http_status;
        call.latency_us = a->latency_us;
        store_copy_text(call.error, sizeof(call.error), a->error);
        /* the start is when the request went on the wire; a call never
         * sent starts when it was handed to the transport, a moment after
         * the claim committed */
        if (a->handoff_mono > 0) {
                call.handoff_mono = a->handoff_mono;
                call.handoff_wall = a->handoff_wall;
                call.start_mono = a->handoff_mono;
                call.start_wall = a->handoff_wall;
        }
        if (a->sent_mono > 0) {
                call.start_mono = a->sent_mono;
                call.start_wall = a->sent_wall;
        } else if (a->planned_mono > call.start_mono) {
                call.start_mono = a->planned_mono;
                call.start_wall = a->planned_wall;
        }
        if (a->in_flight_at_start > 0)
                call.in_flight_at_start = a->in_flight_at_start;
        r = s->ops->call_close(s, &call);
        if (r == 0)
                r = policy_end_call(&op, &a->decision, &end, a->now, &next);
        if (r == 0)
                r = store_op_put(s, &op, &next);
        if (r == 0 && next.state == OP_MANUAL)
                r = audit_to_manual(s, &next, a->now, tg_class_name(a->cls));
        return r;
}

static bool settle_args_ok(const struct settle_args *args)
{
        enum op_state next = args->decision.next;

        if ((unsigned)next >= OP_STATE_COUNT || next == OP_PENDING || next == OP_IN_FLIGHT)
                return false;
        if ((unsigned)args->cls >= TG_CLASS_COUNT ||
            (unsigned)args->decision.reason >= MANUAL_REASON_COUNT)
                return false;
        return store_buf_ok(args->error, sizeof(args->error)) &&
               store_buf_ok(args->refund_id, sizeof(args->refund_id));
}

int store_settle(struct store *store, const struct settle_args *args)
{
        if (!store || !args || !settle_args_ok(args))
                return TG_EINVAL;
        return store->ops->tx(store, STORE_TX_OUTCOME, STORE_TX_RECHECKS, settle_tx, (void *)args);
}

struct settle_batch_ctx {
        const struct settle_args *const *args;
        unsigned n;
};

static int settle_batch_tx(struct store *s, void *ctx)
{
        const struct settle_batch_ctx *c = ctx;
        int r = 0;

        for (unsigned i = 0; i < c->n && r == 0; i++)
                r = settle_tx(s, (void *)c->args[i]);
        return r;
}

void store_settle_batch(struct store *store, const struct settle_args *const *args, unsigned n,
                        int *results)
{
        struct settle_batch_ctx c = {.args = args, .n = n};
        int r = n > 1 && store ? 0 : TG_EINVAL;

        for (unsigned i = 0; i < n && r == 0; i++)
                if (!args[i] || !settle_args_ok(args[i]))
                        r = TG_EINVAL;
        if (r == 0)
                r = store->ops->tx(store, STORE_TX_OUTCOME, STORE_TX_RECHECKS, settle_batch_tx, &c);
        for (unsigned i = 0; i < n; i++)
                results[i] = r == 0 ? 0 : store_settle(store, args[i]);
}

struct release_ctx {
        int64_t epoch, op_id, call_id;
        tg_mono_ns now_mono;
        tg_wall_ms now;
        const char *why;
};

static int release_tx(struct store *s, void *ctx)
{
        struct release_ctx *c = ctx;
        struct op_record op, back;
        struct call_record call;
        int r = s->ops->op_get(s, NULL, c->op_id, true, &op);

        if (r == 0)
                r = s->ops->call_get(s, c->call_id, true, &call);
        if (r == 0 && call.op_id != op.id)
                r = TG_EINVAL;
        if (r < 0)
                return r;
        /* our own release whose COMMIT answer was lost: done already */
        if (s->ops->tx_commit_unknown(s) && call.ended && !call.sent && op.state != OP_IN_FLIGHT)
                return 0;
        if (op.state != OP_IN_FLIGHT || op.epoch != c->epoch || call.ended ||
            call.epoch != c->epoch)
                return TG_EFENCED;
        r = policy_release(&op, call.kind, c->now, &back);
        if (r == 0)
                r = store_op_put(s, &op, &back);
        /* a claim given back is not a call: calls_total counts calls */
        if (r == 0)
                r = s->ops->counter_add(s, STORE_COUNTER_CALLS, -1);
        if (r < 0)
                return r;
        call.ended = true;
        call.sent = false;
        call.cls = TG_CLASS_NOT_SENT;
        call.end_mono = c->now_mono;
        call.end_wall = c->now;
        snprintf(call.error, sizeof(call.error), "released before send: %s", c->why);
        return s->ops->call_close(s, &call);
}

int store_release(struct store *store, int64_t epoch, int64_t op_id, int64_t call_id,
                  tg_mono_ns now_mono, tg_wall_ms now, const char *why)
{
        struct release_ctx c = {.epoch = epoch,
                                .op_id = op_id,
                                .call_id = call_id,
                                .now_mono = now_mono,
                                .now = now,
                                .why = why};

        if (!store || !why)
                return TG_EINVAL;
        return store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, release_tx, &c);
}

/* ---- the sweeps -------------------------------------------------------------- */

struct sweep_ctx {
        struct store_batch batch;
        unsigned count; /* moved in this transaction */
        struct op_record buf[SWEEP_BATCH];
};

static int sweep_tx(struct store *s, void *ctx)
{
        struct sweep_ctx *c = ctx;
        unsigned n = 0;
        int r = s->ops->op_batch(s, &c->batch, SWEEP_BATCH, c->buf, &n);

        c->count = 0;
        for (unsigned i = 0; i < n && r == 0; i++) {
                const struct op_record *op = &c->buf[i];
                struct op_record next;
                enum op_event event;
                char detail[TG_TEXT_MAX];

                r = policy_sweep(op, c->batch.now, c->batch.key_retention_ms, &event, &next);
                if (r == TG_EAGAIN)
                        r = TG_ESTORE; /* the backend's predicate and the table disagree */
                if (r < 0)
                        break;
                if (event == OP_EV_DEADLINE && next.reason == MANUAL_NOTIFICATION_DEADLINE)
                        snprintf(detail, sizeof(detail), "%s",
                                 "no notification from the provider by its deadline: to manual");
                else if (event == OP_EV_DEADLINE)
                        snprintf(detail, sizeof(detail), "deadline passed while %s: to manual",
                                 op_state_name(op->state));
                else
                        snprintf(detail, sizeof(detail), "%s",
                                 "idempotency key past retention before its re-send: to manual");
                r = store_op_put(s, op, &next);
                if (r == 0)
                        r = store_audit_add(s, next.id, c->batch.now, "event", "tollgate",
                                            manual_reason_name(next.reason), detail);
                if (r == 0)
                        c->count++;
        }
        return r;
}

int store_sweep_deadlines(struct store *store, int64_t key_retention_ms, tg_wall_ms now,
                          unsigned *ret_count)
{
        static const enum store_batch_kind kinds[] = {STORE_BATCH_DEADLINE, STORE_BATCH_KEY_AGE};
        struct sweep_ctx *c;
        unsigned total = 0;
        int r = 0;

        if (!store || !ret_count)
                return TG_EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return TG_ENOMEM;
        /* the deadline first: an operation past both goes to manual for it */
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]) && r == 0; k++) {
                if (kinds[k] == STORE_BATCH_KEY_AGE && key_retention_ms <= 0)
                        break;
                memset(&c->batch, 0, sizeof(c->batch));
                c->batch.kind = kinds[k];
                c->batch.now = now;
                c->batch.key_retention_ms = key_retention_ms;
                do {
                        /* a re-run after an unknown COMMIT finds what it moved gone */
                        r = store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, sweep_tx, c);
                        if (r == 0)
                                total += c->count;
                } while (r == 0 && c->count == SWEEP_BATCH);
        }
        free(c);
        if (r == 0)
                *ret_count = total;
        return r;
}

struct due_ctx {
        tg_wall_ms next;
        bool pending;
};

static int due_tx(struct store *s, void *ctx)
{
        struct due_ctx *c = ctx;

        return s->ops->due_summary(s, &c->next, &c->pending);
}

int store_next_due(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending)
{
        struct due_ctx c = {.next = TG_WALL_NEVER};
        int r;

        if (!store || !ret_next_run_at || !ret_pending)
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, due_tx, &c);
        if (r < 0)
                return r;
        *ret_next_run_at = c.next;
        *ret_pending = c.pending;
        return 0;
}

/* ---- outbox (docs/outbox.md) ------------------------------------------------- */

struct outbox_ctx {
        const struct policy_config *limits;
        tg_wall_ms now;
        unsigned taken, invalid;
        struct op_record batch[OUTBOX_BATCH];
};

static int outbox_tx(struct store *s, void *ctx)
{
        struct outbox_ctx *c = ctx;
        struct store_batch q = {.kind = STORE_BATCH_OUTBOX, .now = c->now};
        unsigned n = 0;
        int r = s->ops->op_batch(s, &q, OUTBOX_BATCH, c->batch, &n);

        c->taken = c->invalid = 0;
        for (unsigned i = 0; i < n && r == 0; i++) {
                const struct op_record *op = &c->batch[i];
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
                bool valid = refund_validate(&f, &problem) == 0;
                struct op_record next;
                char detail[TG_TEXT_MAX];

                r = policy_outbox(c->limits, op, valid, c->now, &next);
                /* a refund's own event URL is taken only through the API,
                 * against notify.allow: an outbox row's is cleared, and its
                 * events go to its account's notify.url */
                next.req.notify_url[0] = '\0';
                if (r == 0)
                        r = store_op_put(s, op, &next);
                if (r < 0)
                        break;
                if (valid) {
                        c->taken++;
                        continue;
                }
                /* invalid: to manual with the reason, never skipped */
                snprintf(detail, sizeof(detail), "outbox row refused: %s: %s",
                         problem.field ? problem.field : "?",
                         problem.message ? problem.message : "invalid");
                r = store_audit_add(s, next.id, c->now, "event", "tollgate",
                                    manual_reason_name(MANUAL_INVALID), detail);
                if (r == 0)
                        c->invalid++;
        }
        /* the dispatchers of every share look at once (this one included) */
        if (r == 0 && c->taken > 0)
                r = store_bell_ring(s);
        return r;
}

int store_outbox_intake(struct store *store, const struct policy_config *limits, tg_wall_ms now,
                        unsigned *ret_taken, unsigned *ret_invalid)
{
        struct outbox_ctx *c;
        int r;

        if (!store || !limits || !ret_taken || !ret_invalid)
                return TG_EINVAL;
        if (!store->ops->has_outbox)
                return TG_EUNSUPPORTED;
        c = calloc(1, sizeof(*c));
        if (!c)
                return TG_ENOMEM;
        c->limits = limits;
        c->now = now;
        /* a re-run after an unknown COMMIT finds the rows it took in gone */
        r = store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, outbox_tx, c);
        if (r == 0) {
                *ret_taken = c->taken;
                *ret_invalid = c->invalid;
        }
        free(c);
        return r;
}
