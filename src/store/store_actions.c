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
