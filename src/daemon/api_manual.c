/*
 * api_manual — the manual review routes:
 *   GET  /v1/manual?reason=R&assignee=NAME|unassigned=true&account=A&after=CURSOR&limit=N
 *                                                  oldest accepted first
 *   GET  /v1/manual/{operation_id}                 one operation, any state
 *   POST /v1/manual/{operation_id}/resend   {"operator","reason"}
 *   POST /v1/manual/{operation_id}/resolve  {"operator","reason","outcome"}
 *   POST /v1/manual/{operation_id}/assign   {"operator","assignee","reason"}
 *   POST /v1/manual/{operation_id}/approve  {"operator","reason"}  four-eyes
 * The operator is who authenticated when api.credentials_file is in force
 * (api_actor: a body `operator` naming anyone else is refused), else the
 * body's, as before. Every item carries its reason, its owner ("assignee", null for nobody), its
 * whole call history ("attempts") and its audit rows. A re-send is queued for
 * the same exit with the same key (the store refuses it past key retention);
 * a resolve closes it by hand; an assign gives the case to someone (null:
 * back to nobody). Each is written with its audit row in one store
 * transaction: nothing is deleted and no action goes unaudited.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/api_int.h"
#include "daemon/log.h"
#include "daemon/render.h"
#include "platform/wake.h"

#define MANUAL_LIMIT_DEF 50
#define MANUAL_LIMIT_MAX 200

struct manual_page {
        struct op_record *ops;
        unsigned n, max;
        struct store_manual_filter filter; /* the store filters */
        char assignee[API_TEXT_MAX + 1];
        int64_t last_id;
};

static int collect(const struct op_record *op, void *userdata)
{
        struct manual_page *p = userdata;

        p->last_id = op->id;
        p->ops[p->n++] = *op;
        return p->n >= p->max ? 1 : 0;
}

/* ?assignee=NAME or ?unassigned=true into the page's filter: 0, or 1 / 2
 * for a bad assignee / unassigned. */
static int owner_filter(const struct http_request *req, struct manual_page *page)
{
        char flag[8];
        int a = http_request_arg(req, "assignee", page->assignee, sizeof(page->assignee));
        int u = http_request_arg(req, "unassigned", flag, sizeof(flag));

        page->filter.who = STORE_ASSIGNEE_ANY;
        if (a != 0 && a != TG_ENOTFOUND)
                return 1;
        if (a == 0) {
                size_t n = strlen(page->assignee);
                if (n == 0)
                        return 1;
                for (size_t i = 0; i < n; i++)
                        if ((unsigned char)page->assignee[i] < 0x20 || page->assignee[i] == 0x7f)
                                return 1;
                page->filter.who = STORE_ASSIGNEE_IS;
                page->filter.assignee = page->assignee;
        }
        if (u == TG_ENOTFOUND)
                return 0;
        if (u != 0 || strcmp(flag, "true") != 0 || a == 0)
                return 2;
        page->filter.who = STORE_ASSIGNEE_NONE;
        return 0;
}

static int list_manual(struct api *api, const struct http_request *req, struct http_response *res,
                       const char *rid)
{
        struct manual_page page = {0};
        char reason[32], account[TG_ACCOUNT_NAME_MAX + 1];
        int64_t after = 0, limit = 0;
        json_t *items = NULL;
        int r;

        if (api_int_arg(req, "after", 0, 0, INT64_MAX, &after) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "after",
                                      "must be a cursor (next_after of the previous page)");
        if (api_int_arg(req, "limit", MANUAL_LIMIT_DEF, 1, MANUAL_LIMIT_MAX, &limit) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "limit",
                                      "must be an integer in [1, 200]");
        r = http_request_arg(req, "reason", reason, sizeof(reason));
        if (r == 0) {
                if (manual_reason_parse(reason, &page.filter.reason) < 0 ||
                    page.filter.reason == MANUAL_NONE)
                        return api_reply_not_one_of(res, rid, "reason", TG_VOCAB_REASONS);
        } else if (r != TG_ENOTFOUND) {
                return api_reply_not_one_of(res, rid, "reason", TG_VOCAB_REASONS);
        }
        r = owner_filter(req, &page);
        if (r == 1)
                return api_reply_code(res, rid, 400, "invalid_parameter", "assignee",
                                      "must be an operator's name (1 to 200 bytes)");
        if (r == 2)
                return api_reply_code(res, rid, 400, "invalid_parameter", "unassigned",
                                      "must be true, and not given with assignee");
        r = api_account_arg(api, req, res, rid, account);
        if (r != 0)
                return r < 0 ? r : 0;
        page.filter.account = account[0] ? account : NULL;
        page.max = (unsigned)limit;
        page.ops = calloc(page.max, sizeof(*page.ops));
        if (!page.ops)
                return TG_ENOMEM;
        page.last_id = after;
        r = store_list_manual_filtered(api->store, after, &page.filter, page.max, collect, &page);
        if (r < 0)
                goto out;
        items = json_array();
        if (!items) {
                r = TG_ENOMEM;
                goto out;
        }
        for (unsigned i = 0; i < page.n; i++) {
                json_t *o = NULL;
                r = render_op_full(api->store, &page.ops[i], &o);
                if (r < 0)
                        goto out;
                json_array_append_new(items, o);
        }
        r = api_reply_json(
            res, 200,
            json_pack("{s:o, s:i, s:o}", "items", items, "count", (int)page.n, "next_after",
                      page.n == page.max ? json_integer(page.last_id) : json_null()));
        items = NULL;
out:
        json_decref(items);
        free(page.ops);
        if (r < 0 && r != TG_ENOMEM)
                return api_reply_store_error(res, rid, r);
        return r;
}

static int show(struct api *api, const char *id, struct http_response *res, const char *rid)
{
        struct op_record op;
        json_t *o = NULL;
        int r = store_get(api->store, id, &op);

        if (r == 0)
                api_note_trace(api, op.traceparent);
        if (r == 0)
                r = render_op_full(api->store, &op, &o);
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        return api_reply_json(res, 200, o);
}

int api_reply_action_refused(struct http_response *res, const char *rid, int r)
{
        if (r == TG_ESTATE)
                return api_reply_code(res, rid, 409, "not_manual", NULL,
                                      "the operation is not waiting for manual review");
        if (r == TG_ERANGE)
                return api_reply_code(res, rid, 409, "key_past_retention", NULL,
                                      "the idempotency key is past its retention: a re-send "
                                      "could refund twice; check with the provider and resolve");
        if (r == TG_ECONFLICT)
                return api_reply_code(res, rid, 409, "approval_pending", NULL,
                                      "another request waits for approval on this case: approve "
                                      "it first (POST .../approve)");
        return api_reply_store_error(res, rid, r);
}

/* The answer of an action with four-eyes: the operation and its approval. */
static int reply_with_approval(struct api *api, const struct op_record *op, int status,
                               json_t *approval, struct http_response *res, const char *rid)
{
        json_t *o = NULL;
        int r = render_op_full(api->store, op, &o);

        if (r < 0) {
                json_decref(approval);
                return r == TG_ENOMEM ? r : api_reply_store_error(res, rid, r);
        }
        if (!approval || json_object_set_new(o, "approval", approval) < 0) {
                json_decref(o);
                return TG_ENOMEM;
        }
        return api_reply_json(res, status, o);
}

/* manual.approval_above: the action becomes a request another operator
 * approves (202, nothing changes but the audit). */
int api_needs_approval(struct api *api, const char *id)
{
        struct op_record op;
        int r;

        if (api->cfg.manual_approval_above <= 0)
                return 0;
        r = store_get(api->store, id, &op);
        if (r < 0)
                return r;
        return op.req.amount >= api->cfg.manual_approval_above ? 1 : 0;
}

int api_request_approval(struct api *api, const char *id, const char *who, const char *reason,
                         bool resolve, enum op_state outcome, struct http_response *res,
                         const char *rid)
{
        struct op_record op;
        int r = store_approval_request(api->store, id, who, reason, resolve, outcome,
                                       &api->cfg.policy, api_wall_now(), &op);

        if (r < 0)
                return api_reply_action_refused(res, rid, r);
        log_emit(LOG_INFO, "approval_requested",
                 json_pack("{s:s, s:s, s:s, s:s}", "operation_id", id, "operator", who, "action",
                           resolve ? "resolve" : "resend", "request_id", rid));
        return reply_with_approval(
            api, &op, 202,
            json_pack("{s:s, s:s, s:s, s:o}", "status", "requested", "action",
                      resolve ? "resolve" : "resend", "requested_by", who, "outcome",
                      resolve ? json_string(op_state_name(outcome)) : json_null()),
            res, rid);
}

/* POST /v1/manual/{id}/approve {"operator","reason"} (both optional with
 * credentials): another operator carries the pending request out. */
static int approve(struct api *api, const struct http_request *req, const char *id,
                   struct http_response *res, const char *rid)
{
        struct cancel_request b; /* the same shape: operator and reason, optional */
        struct api_error err;
        const char *who = NULL;
        int r;

        if (req->body_len > api->cfg.api_max_body_bytes)
                return api_reply_code(res, rid, 413, "body_too_large", NULL,
                                      "the request body is too large");
        if (api_parse_cancel(req->body, req->body_len, &b, &err) < 0)
                return api_reply_error(res, rid, &err);
        r = api_actor(api, b.operator_name, NULL, &who, res, rid);
        if (r != 0)
                return r < 0 ? r : 0;
        if (!who)
                return api_reply_code(res, rid, 422, "invalid_field", "operator",
                                      "who approves is required (1 to 200 bytes)");
        return api_approve_as(api, id, who, res, rid);
}

int api_approve_as(struct api *api, const char *id, const char *who, struct http_response *res,
                   const char *rid)
{
        enum store_approval_refusal why = STORE_APPROVAL_NONE;
        struct store_approval q;
        struct op_record op;
        int r;

        r = store_approval_decide(api->store, id, who, &api->cfg.policy, api_wall_now(), &q, &why,
                                  &op);
        if (r < 0)
                return api_reply_action_refused(res, rid, r);
        if (why == STORE_APPROVAL_NONE)
                return api_reply_code(res, rid, 409, "no_pending_approval", NULL,
                                      "no request waits for approval on this case");
        if (why == STORE_APPROVAL_SELF)
                return api_reply_forbidden(api, res, rid, API_AUTH_SELF_APPROVAL, "self_approval",
                                           "a request is approved by another operator than the "
                                           "one who made it");
        if (!q.resolve)
                wake_ring(api->doorbell); /* due now, through the local exit */
        api_note_trace(api, op.traceparent);
        log_emit(LOG_INFO, "approval_granted",
                 json_pack("{s:s, s:s, s:s, s:s, s:s}", "operation_id", id, "operator", who,
                           "requested_by", q.requested_by, "state", op_state_name(op.state),
                           "request_id", rid));
        return reply_with_approval(api, &op, q.resolve ? 200 : 202,
                                   json_pack("{s:s, s:s, s:s, s:s}", "status", "approved", "action",
                                             q.resolve ? "resolve" : "resend", "requested_by",
                                             q.requested_by, "approved_by", who),
                                   res, rid);
}

static int act(struct api *api, const struct http_request *req, const char *id, bool resolve,
               struct http_response *res, const char *rid)
{
        struct operator_action a;
        struct api_error err;
        struct op_record op;
        const char *who = NULL;
        json_t *o = NULL;
        int r;

        if (req->body_len > api->cfg.api_max_body_bytes)
                return api_reply_code(res, rid, 413, "body_too_large", NULL,
                                      "the request body is too large");
        if (api_parse_operator_action(req->body, req->body_len, resolve, api->who.named, &a, &err) <
            0)
                return api_reply_error(res, rid, &err);
        r = api_actor(api, a.operator_name, NULL, &who, res, rid);
        if (r != 0)
                return r < 0 ? r : 0;
        r = api_needs_approval(api, id);
        if (r < 0)
                return api_reply_action_refused(res, rid, r);
        if (r > 0)
                return api_request_approval(api, id, who, a.reason, resolve, a.outcome, res, rid);
        /* The change and its audit row commit together, before the reply. */
        if (resolve)
                r = store_operator_resolve(api->store, id, who, a.reason, a.outcome, api_wall_now(),
                                           &op);
        else
                r = store_operator_resend(api->store, id, who, a.reason, &api->cfg.policy,
                                          api_wall_now(), &op);
        if (r < 0)
                return api_reply_action_refused(res, rid, r);
        if (!resolve)
                wake_ring(api->doorbell); /* due now, through the local exit */
        api_note_trace(api, op.traceparent);
        log_emit(LOG_INFO, resolve ? "operator_resolve" : "operator_resend",
                 json_pack("{s:s, s:s, s:s, s:s, s:s}", "operation_id", id, "operator", who,
                           "state", op_state_name(op.state), "request_id", rid, "trace_id",
                           api->log_trace));
        r = render_op_full(api->store, &op, &o);
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        return api_reply_json(res, resolve ? 200 : 202, o);
}

static int assign(struct api *api, const struct http_request *req, const char *id,
                  struct http_response *res, const char *rid)
{
        struct assign_request a;
        struct api_error err;
        struct op_record op;
        const char *who = NULL;
        json_t *o = NULL;
        int r;

        if (req->body_len > api->cfg.api_max_body_bytes)
                return api_reply_code(res, rid, 413, "body_too_large", NULL,
                                      "the request body is too large");
        if (api_parse_assign(req->body, req->body_len, api->who.named, &a, &err) < 0)
                return api_reply_error(res, rid, &err);
        r = api_actor(api, a.operator_name, NULL, &who, res, rid);
        if (r != 0)
                return r < 0 ? r : 0;
        /* The owner and its audit row commit together, before the reply. */
        r = store_operator_assign(api->store, id, who, a.assignee, a.reason, api_wall_now(), &op);
        if (r == TG_ESTATE)
                return api_reply_code(res, rid, 409, "not_manual", NULL,
                                      "the operation is not waiting for manual review");
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        api_note_trace(api, op.traceparent);
        log_emit(LOG_INFO, "operator_assign",
                 json_pack("{s:s, s:s, s:s, s:s, s:s}", "operation_id", id, "operator", who,
                           "assignee", a.assignee, "request_id", rid, "trace_id", api->log_trace));
        r = render_op_full(api->store, &op, &o);
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        return api_reply_json(res, 200, o);
}

int api_route_manual(struct api *api, const struct http_request *req, struct http_response *res,
                     const char *rid, const char *rest)
{
        char id[TG_OP_ID_MAX + 1];
        const char *slash;
        size_t len;

        if (rest[0] == '\0') {
                if (!api_is_get(req))
                        return api_reply_method_not_allowed(res, rid, "GET");
                return list_manual(api, req, res, rid);
        }
        rest++; /* the '/' */
        slash = strchr(rest, '/');
        len = slash ? (size_t)(slash - rest) : strlen(rest);
        /* An id that could never have been accepted cannot exist. */
        if (len == 0 || len > TG_OP_ID_MAX || refund_validate_operation_id(rest, len, NULL) < 0)
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such operation");
        memcpy(id, rest, len);
        id[len] = '\0';
        api_note_op(api, id);
        if (!slash) {
                if (!api_is_get(req))
                        return api_reply_method_not_allowed(res, rid, "GET");
                return show(api, id, res, rid);
        }
        if (strcmp(slash, "/resend") == 0 || strcmp(slash, "/resolve") == 0) {
                if (strcmp(req->method, "POST") != 0)
                        return api_reply_method_not_allowed(res, rid, "POST");
                return act(api, req, id, strcmp(slash, "/resolve") == 0, res, rid);
        }
        if (strcmp(slash, "/assign") == 0) {
                if (strcmp(req->method, "POST") != 0)
                        return api_reply_method_not_allowed(res, rid, "POST");
                return assign(api, req, id, res, rid);
        }
        if (strcmp(slash, "/approve") == 0) {
                if (strcmp(req->method, "POST") != 0)
                        return api_reply_method_not_allowed(res, rid, "POST");
                return approve(api, req, id, res, rid);
        }
        return api_reply_code(res, rid, 404, "not_found", NULL, "no such route");
}
