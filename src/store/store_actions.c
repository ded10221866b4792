/*
 * store_actions — what people and the provider's other channels do to an
 * operation, written once for every backend over the primitives of
 * store_backend.h: an operator's re-send, resolve and assignment of a manual
 * case, a caller's cancel, and an outcome the provider told us outside a
 * call (a signed event, a settlement file).
 *
 * Each is one short transaction, with its audit row in the same transaction
 * as the change it records; what changes is decided by core/policy.h, here
 * only loaded, locked and written. None is re-run after an unknown COMMIT
 * where a second run would be a second audited decision.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/store_backend.h"

/* ---- operators and the provider's other answers ------------------------------ */

struct action_ctx {
        const char *operation_id;
        const char *operator_name;
        const char *reason;
        const struct policy_config *config;
        enum op_state outcome;
        const char *refund_id;
        const char *source;
        const char *assignee;
        tg_wall_ms now;
        bool changed;
        struct op_record op;
};

static int resend_tx(struct store *s, void *ctx)
{
        struct action_ctx *c = ctx;
        struct op_record op, next;
        char detail[TG_TEXT_MAX];
        int r = s->ops->op_get(s, c->operation_id, 0, true, &op);

        /* TG_ESTATE unless manual, TG_ERANGE past key retention */
        if (r == 0)
                r = policy_resend(c->config, &op, c->now, &next);
        if (r == 0)
                r = store_op_put(s, &op, &next);
        if (r < 0)
                return r;
        snprintf(detail, sizeof(detail),
                 "re-send with the same key as POST %u of %u; due %" PRId64 ", deadline %" PRId64,
                 next.attempts + 1, next.attempt_limit, next.next_run_at, next.deadline_at);
        r = store_audit_add(s, next.id, c->now, "resend", c->operator_name, c->reason, detail);
        if (r == 0)
                r = store_bell_ring(s); /* due now: the dispatchers look */
        if (r == 0)
                c->op = next;
        return r;
}

int store_operator_resend(struct store *store, const char *operation_id, const char *operator_name,
                          const char *reason, const struct policy_config *config, tg_wall_ms now,
                          struct op_record *ret_op)
{
        struct action_ctx c = {.operation_id = operation_id,
                               .operator_name = operator_name,
                               .reason = reason,
                               .config = config,
                               .now = now};
        int r;

        if (!store || !config || !ret_op || !store_text_ok(operation_id, TG_OP_ID_MAX) ||
            !store_text_ok(operator_name, TG_TEXT_MAX - 1) || !store_buf_ok(reason, TG_TEXT_MAX))
                return TG_EINVAL;
        /* not re-run after an unknown COMMIT: a second re-send would be a
         * second audited decision */
        r = store->ops->tx(store, STORE_TX_WRITE, 0, resend_tx, &c);
        if (r == 0)
                *ret_op = c.op;
        return r;
}

static int resolve_tx(struct store *s, void *ctx)
{
        struct action_ctx *c = ctx;
        struct op_record op, next;
        char detail[TG_TEXT_MAX];
        int r = s->ops->op_get(s, c->operation_id, 0, true, &op);

        if (r == 0)
                r = policy_resolve(&op, c->outcome, c->now, &next);
        if (r < 0)
                return r;
        snprintf(detail, sizeof(detail), "resolved by hand as %s (was manual: %s)",
                 op_state_name(c->outcome), manual_reason_name(op.reason));
        r = store_op_put(s, &op, &next);
        if (r == 0)
                r = store_audit_add(s, next.id, c->now, "resolve", c->operator_name, c->reason,
                                    detail);
        if (r == 0)
                c->op = next;
        return r;
}

int store_operator_resolve(struct store *store, const char *operation_id, const char *operator_name,
                           const char *reason, enum op_state outcome, tg_wall_ms now,
                           struct op_record *ret_op)
{
        struct action_ctx c = {.operation_id = operation_id,
                               .operator_name = operator_name,
                               .reason = reason,
                               .outcome = outcome,
                               .now = now};
        int r;

        if (!store || !ret_op || !store_text_ok(operation_id, TG_OP_ID_MAX) ||
            !store_text_ok(operator_name, TG_TEXT_MAX - 1) || !store_buf_ok(reason, TG_TEXT_MAX))
                return TG_EINVAL;
        if (outcome != OP_SUCCEEDED && outcome != OP_REJECTED)
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_WRITE, 0, resolve_tx, &c);
        if (r == 0)
                *ret_op = c.op;
        return r;
}

static int assign_tx(struct store *s, void *ctx)
{
        struct action_ctx *c = ctx;
        struct op_record op, next;
        char detail[TG_TEXT_MAX];
        int r = s->ops->op_get(s, c->operation_id, 0, true, &op);

        if (r == 0)
                r = policy_assign(&op, c->assignee, c->now, &next);
        if (r < 0)
                return r;
        c->op = op;
        if (strcmp(op.assignee, next.assignee) == 0)
                return 0; /* the same owner: nothing changes, nothing to audit */
        if (next.assignee[0])
                snprintf(detail, sizeof(detail), "assigned to %.100s (was %.100s)", next.assignee,
                         op.assignee[0] ? op.assignee : "nobody");
        else
                snprintf(detail, sizeof(detail), "unassigned (was %.100s)", op.assignee);
        r = store_op_put(s, &op, &next);
        if (r == 0)
                r = store_audit_add(s, next.id, c->now, "assign", c->operator_name, c->reason,
                                    detail);
        if (r == 0)
                c->op = next;
        return r;
}

int store_operator_assign(struct store *store, const char *operation_id, const char *operator_name,
                          const char *assignee, const char *reason, tg_wall_ms now,
                          struct op_record *ret_op)
{
        struct action_ctx c = {.operation_id = operation_id,
                               .operator_name = operator_name,
                               .reason = reason ? reason : "",
                               .assignee = assignee ? assignee : "",
                               .now = now};
        int r;

        if (!store || !ret_op || !store_text_ok(operation_id, TG_OP_ID_MAX) ||
            !store_text_ok(operator_name, TG_TEXT_MAX - 1) ||
            !store_buf_ok(c.reason, TG_TEXT_MAX) || !store_buf_ok(c.assignee, TG_TEXT_MAX))
                return TG_EINVAL;
        /* a re-run after an unknown COMMIT finds the owner already there */
        r = store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, assign_tx, &c);
        if (r == 0)
                *ret_op = c.op;
        return r;
}

static int cancel_tx(struct store *s, void *ctx)
{
        struct action_ctx *c = ctx;
        struct op_record op, next;
        char detail[TG_TEXT_MAX];
        int r = s->ops->op_get(s, c->operation_id, 0, true, &op);

        /* the row lock (or SQLite's write lock) orders this against a
         * claim: a claimed operation is in flight here and refused */
        c->changed = false;
        if (r == 0)
                r = policy_cancel(&op, c->now, &next, &c->changed);
        if (r < 0)
                return r;
        c->op = next;
        if (!c->changed)
                return 0;
        snprintf(detail, sizeof(detail), "cancelled before any call was made (was %s)",
                 op_state_name(op.state));
        r = store_op_put(s, &op, &next);
        if (r == 0)
                r = store_audit_add(s, next.id, c->now, "cancel", c->operator_name, c->reason,
                                    detail);
        return r;
}

int store_cancel(struct store *store, const char *operation_id, const char *operator_name,
                 const char *reason, tg_wall_ms now, struct op_record *ret_op, bool *ret_changed)
{
        struct action_ctx c = {.operation_id = operation_id,
                               .operator_name = operator_name,
                               .reason = reason ? reason : "",
                               .now = now};
        int r;

        if (!store || !ret_op || !ret_changed || !store_text_ok(operation_id, TG_OP_ID_MAX) ||
            !store_text_ok(operator_name, TG_TEXT_MAX - 1) || !store_buf_ok(c.reason, TG_TEXT_MAX))
                return TG_EINVAL;
        /* a re-run after an unknown COMMIT finds it cancelled: no change */
        r = store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, cancel_tx, &c);
        if (r == 0) {
                *ret_op = c.op;
                *ret_changed = c.changed;
        }
        return r;
}

static int external_tx(struct store *s, void *ctx)
{
        struct action_ctx *c = ctx;
        struct op_record op, next;
        char detail[TG_TEXT_MAX];
        bool changed = false;
        int r = s->ops->op_get(s, c->operation_id, 0, true, &op);

        /* in_flight: the exit's own call decides; final: never rewritten;
         * pending: nothing was ever sent, so no provider answer can be ours */
        if (r == 0)
                r = policy_external(&op, c->outcome, c->refund_id, c->now, &next, &changed);
        if (r < 0 || !changed)
                return r; /* already so: nothing to change */
        snprintf(detail, sizeof(detail), "%s -> %s%s%s", op_state_name(op.state),
                 op_state_name(c->outcome), c->refund_id && c->refund_id[0] ? ", refund " : "",
                 c->refund_id ? c->refund_id : "");
        r = store_op_put(s, &op, &next);
        if (r == 0)
                r = store_audit_add(s, next.id, c->now, "external", c->source, "provider answer",
                                    detail);
        return r;
}

int store_settle_external(struct store *store, const char *operation_id, enum op_state outcome,
                          const char *refund_id, const char *source, tg_wall_ms now)
{
        struct action_ctx c = {.operation_id = operation_id,
                               .outcome = outcome,
                               .refund_id = refund_id,
                               .source = source,
                               .now = now};

        if (!store || !store_text_ok(operation_id, TG_OP_ID_MAX) ||
            !store_text_ok(source, TG_TEXT_MAX - 1))
                return TG_EINVAL;
        if (refund_id && !store_buf_ok(refund_id, TG_REFUND_ID_MAX))
                return TG_EINVAL;
        if (outcome != OP_SUCCEEDED && outcome != OP_REJECTED)
                return TG_EINVAL;
        /* idempotent: a re-run finds the outcome already there */
        return store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, external_tx, &c);
}

/* ---- four-eyes: a request, then another operator's approval ------------------- */

#define REQ_RESEND  "request_resend"
#define REQ_RESOLVE "request_resolve"
#define REQ_WAITS   "; awaits another operator's approval"

struct approval_ctx {
        struct action_ctx act;
        const char *approver;
        bool resolve;
        struct store_approval found;
        enum store_approval_refusal refusal;
};

/* The request of op_id still pending, read inside the transaction: the last
 * request row with no approve, resend or resolve row after it. */
static int pending_request(struct store *s, int64_t op_id, struct store_approval *ret,
                           bool *ret_found)
{
        struct store_page page = {.kind = STORE_PAGE_AUDIT, .op_id = op_id};
        struct audit_record rows[16];
        unsigned n = 0;
        int r = 0;

        *ret_found = false;
        do {
                r = s->ops->page(s, &page, 16, rows, &n);
                for (unsigned i = 0; r == 0 && i < n; i++) {
                        const struct audit_record *a = &rows[i];
                        bool resend = strcmp(a->action, REQ_RESEND) == 0;
                        if (resend || strcmp(a->action, REQ_RESOLVE) == 0) {
                                memset(ret, 0, sizeof(*ret));
                                ret->audit_id = a->id;
                                ret->resolve = !resend;
                                ret->outcome = strncmp(a->detail + 3, op_state_name(OP_SUCCEEDED),
                                                       strlen(op_state_name(OP_SUCCEEDED))) == 0
                                                   ? OP_SUCCEEDED
                                                   : OP_REJECTED;
                                store_copy_text(ret->requested_by, sizeof(ret->requested_by),
                                                a->operator_name);
                                store_copy_text(ret->reason, sizeof(ret->reason), a->reason);
                                ret->requested_at = a->at;
                                *ret_found = true;
                        } else if (strcmp(a->action, "approve") == 0 ||
                                   strcmp(a->action, "resend") == 0 ||
                                   strcmp(a->action, "resolve") == 0) {
                                *ret_found = false;
                        }
                }
                if (n > 0)
                        page.cur_id = rows[n - 1].id;
        } while (r == 0 && n == 16);
        return r;
}

static int request_tx(struct store *s, void *ctx)
{
        struct approval_ctx *c = ctx;
        struct op_record op, next;
        char detail[TG_TEXT_MAX];
        bool pending = false;
        int r = s->ops->op_get(s, c->act.operation_id, 0, true, &op);

        /* the same checks as the action itself, so a request that could
         * never be carried out is refused now (TG_ESTATE, TG_ERANGE) */
        if (r == 0)
                r = c->resolve ? policy_resolve(&op, c->act.outcome, c->act.now, &next)
                               : policy_resend(c->act.config, &op, c->act.now, &next);
        if (r == 0)
                r = pending_request(s, op.id, &c->found, &pending);
        if (r < 0)
                return r;
        if (pending)
                return TG_ECONFLICT; /* one request at a time */
        if (c->resolve)
                snprintf(detail, sizeof(detail), "as %s%s", op_state_name(c->act.outcome),
                         REQ_WAITS);
        else
                snprintf(detail, sizeof(detail), "with the same key%s", REQ_WAITS);
        r = store_audit_add(s, op.id, c->act.now, c->resolve ? REQ_RESOLVE : REQ_RESEND,
                            c->act.operator_name, c->act.reason, detail);
        if (r == 0)
                c->act.op = op;
        return r;
}

int store_approval_request(struct store *store, const char *operation_id, const char *requester,
                           const char *reason, bool resolve, enum op_state outcome,
                           const struct policy_config *config, tg_wall_ms now,
                           struct op_record *ret_op)
{
        struct approval_ctx c = {.act = {.operation_id = operation_id,
                                         .operator_name = requester,
                                         .reason = reason,
                                         .config = config,
                                         .outcome = outcome,
                                         .now = now},
                                 .resolve = resolve};
        int r;

        if (!store || !ret_op || !config || !store_text_ok(operation_id, TG_OP_ID_MAX) ||
            !store_text_ok(requester, TG_TEXT_MAX - 1) || !store_buf_ok(reason, TG_TEXT_MAX))
                return TG_EINVAL;
        if (resolve && outcome != OP_SUCCEEDED && outcome != OP_REJECTED)
                return TG_EINVAL;
        /* not re-run after an unknown COMMIT: it would find its own request */
        r = store->ops->tx(store, STORE_TX_WRITE, 0, request_tx, &c);
        if (r == 0)
                *ret_op = c.act.op;
        return r;
}

static int approve_tx(struct store *s, void *ctx)
{
        struct approval_ctx *c = ctx;
        struct op_record op;
        char detail[TG_TEXT_MAX];
        bool pending = false;
        int r = s->ops->op_get(s, c->act.operation_id, 0, true, &op);

        if (r == 0)
                r = pending_request(s, op.id, &c->found, &pending);
        if (r < 0)
                return r;
        c->act.op = op;
        c->refusal = !pending                                          ? STORE_APPROVAL_NONE
                     : strcmp(c->found.requested_by, c->approver) == 0 ? STORE_APPROVAL_SELF
                                                                       : STORE_APPROVAL_OK;
        if (c->refusal != STORE_APPROVAL_OK)
                return 0; /* nothing written */
        snprintf(
            detail, sizeof(detail), "approves the %s requested by %.100s (audit row %" PRId64 ")",
            c->found.resolve ? "resolve" : "re-send", c->found.requested_by, c->found.audit_id);
        r = store_audit_add(s, op.id, c->act.now, "approve", c->approver, "", detail);
        if (r < 0)
                return r;
        /* the requester's decision, with the requester's reason */
        c->act.operator_name = c->found.requested_by;
        c->act.reason = c->found.reason;
        c->act.outcome = c->found.outcome;
        return c->found.resolve ? resolve_tx(s, &c->act) : resend_tx(s, &c->act);
}

int store_approval_decide(struct store *store, const char *operation_id, const char *approver,
                          const struct policy_config *config, tg_wall_ms now,
                          struct store_approval *ret_request,
                          enum store_approval_refusal *ret_refusal, struct op_record *ret_op)
{
        struct approval_ctx c = {
            .act = {.operation_id = operation_id, .config = config, .now = now},
            .approver = approver};
        int r;

        if (!store || !ret_op || !ret_refusal || !ret_request || !config ||
            !store_text_ok(operation_id, TG_OP_ID_MAX) || !store_text_ok(approver, TG_TEXT_MAX - 1))
                return TG_EINVAL;
        /* not re-run after an unknown COMMIT: a second run would find the
         * request approved and say so */
        r = store->ops->tx(store, STORE_TX_WRITE, 0, approve_tx, &c);
        if (r == 0) {
                *ret_refusal = c.refusal;
                *ret_request = c.found;
                *ret_op = c.act.op;
        }
        return r;
}

struct pending_ctx {
        const char *operation_id;
        struct store_approval a;
        bool found;
};

static int pending_tx(struct store *s, void *ctx)
{
        struct pending_ctx *c = ctx;
        struct op_record op;
        int r = s->ops->op_get(s, c->operation_id, 0, false, &op);

        if (r == 0)
                r = pending_request(s, op.id, &c->a, &c->found);
        return r;
}

int store_approval_pending(struct store *store, const char *operation_id,
                           struct store_approval *ret_request)
{
        struct pending_ctx c = {.operation_id = operation_id};
        int r;

        if (!store || !ret_request || !store_text_ok(operation_id, TG_OP_ID_MAX))
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, pending_tx, &c);
        if (r < 0)
                return r;
        if (!c.found)
                return TG_ENOTFOUND;
        *ret_request = c.a;
        return 0;
}
