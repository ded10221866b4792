/*
 * api_cancel — POST /v1/refunds/{operation_id}/cancel, body optional
 * {"operator","reason"}: the caller takes back a refund that never reached
 * the transport. The store decides it in one transaction against any claim
 * (store_cancel): a claimed operation counts as sent, since its attempt is
 * recorded before its bytes leave. Answers:
 *   200  cancelled now, or cancelled already (the same answer again);
 *   409  already_sent: a call with its key went to the provider, so it may
 *        have executed; only reconciliation can say (it goes on as before);
 *   409  already_final: it has a final answer (succeeded, rejected);
 *   404  never accepted, or another credential's and this one has the
 *        intake scope only (op submitted_by; api_may_see).
 * The cancel and its audit row ("cancel", by the operator given, else
 * "client"; with api.credentials_file, by the credential) commit together
 * before the reply.
 */
#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/api_int.h"
#include "daemon/log.h"
#include "daemon/render.h"

int api_post_cancel(struct api *api, const struct http_request *req, struct http_response *res,
                    const char *rid, const char *id)
{
        struct cancel_request c;
        struct api_error err;
        struct op_record op;
        bool changed = false;
        const char *who = NULL;
        json_t *o = NULL;
        int r;

        api_note_op(api, id);
        if (req->body_len > api->cfg.api_max_body_bytes)
                return api_reply_code(res, rid, 413, "body_too_large", NULL,
                                      "the request body is too large");
        if (api_parse_cancel(req->body, req->body_len, &c, &err) < 0)
                return api_reply_error(res, rid, &err);
        r = api_actor(api, c.operator_name, "client", &who, res, rid);
        if (r != 0)
                return r < 0 ? r : 0;
        /* another credential's refund is not this caller's to cancel, nor to
         * know of (its owner never changes once stored) */
        r = store_get(api->store, id, &op);
        if (r == 0 && !api_may_see(api, &op))
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such operation");
        r = store_cancel(api->store, id, who, c.reason[0] ? c.reason : "cancelled by the caller",
                         api_wall_now(), &op, &changed);
        if (r == TG_ECONFLICT || r == TG_ESTATE) {
                /* why: what the operation is now (read after the refusal) */
                struct op_record now;
                bool final = store_get(api->store, id, &now) == 0 &&
                             (now.state == OP_SUCCEEDED || now.state == OP_REJECTED);

                if (final)
                        return api_reply_code(res, rid, 409, "already_final", NULL,
                                              "the refund has its final answer; nothing to cancel");
                return api_reply_code(res, rid, 409, "already_sent", NULL,
                                      "a call with this refund's key reached the provider: it may "
                                      "have executed, so it is reconciled, never cancelled here");
        }
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        api_note_trace(api, op.traceparent);
        if (changed) {
                json_t *f = json_pack("{s:s, s:s, s:s}", "operation_id", id, "operator", who,
                                      "request_id", rid);
                if (f && api->log_trace[0])
                        json_object_set_new(f, "trace_id", json_string(api->log_trace));
                log_emit(LOG_INFO, "refund_cancelled", f);
        }
        r = render_op_full(api->store, &op, &o);
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        return api_reply_json(res, 200, o);
}
