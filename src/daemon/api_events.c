/*
 * api_events — POST /v1/provider-events, the provider's signed webhook
 * (shared/PROVIDER.md): body {"operation_id","status","refund_id"}, header
 * "X-Signature: sha256=<hex HMAC-SHA256 of the raw body>" with the secret of
 * provider.webhook_secret_file.
 *
 * Invariants:
 *   - the signature is checked over the raw bytes, in constant time
 *     (digest_equal of the two MACs), BEFORE the body is parsed or the store
 *     is touched: a bad, missing or malformed signature is 401 and nothing
 *     changes; with no secret configured the route does not exist (404);
 *   - an event settles through store_settle_external() exactly as a query
 *     answer would, audited with source "webhook": it never rewrites a final
 *     state, never touches an in_flight operation (the exit's own call
 *     decides) and is a no-op when the operation is already in that state.
 *     That makes a replayed event harmless: a captured valid event can only
 *     repeat the provider's own final answer, which is already recorded;
 *   - the answer never echoes the body or the signature.
 */
#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/api_int.h"
#include "daemon/log.h"
#include "platform/digest.h"

static bool signature_ok(const struct api *api, const struct http_request *req)
{
        unsigned char want[API_MAC_LEN], got[API_MAC_LEN];
        const char *secret = api->cfg.provider_webhook_secret;
        bool ok;

        if (api_parse_signature(http_request_header(req, "X-Signature"), got) < 0)
                return false;
        if (digest_hmac_sha256(secret, strlen(secret), req->body, req->body_len, want) < 0)
                return false;
        ok = digest_equal(want, got, API_MAC_LEN);
        explicit_bzero(want, sizeof(want));
        return ok;
}

int api_post_provider_event(struct api *api, const struct http_request *req,
                            struct http_response *res, const char *rid)
{
        struct provider_event ev;
        struct api_error err;
        struct op_record op;
        int r;

        if (api->cfg.provider_webhook_secret[0] == '\0')
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such route");
        if (req->body_len > api->cfg.api_max_body_bytes)
                return api_reply_code(res, rid, 413, "body_too_large", NULL,
                                      "the request body is too large");
        if (!signature_ok(api, req)) {
                log_emit(LOG_WARN, "provider_event_bad_signature",
                         json_pack("{s:s}", "request_id", rid));
                return api_reply_code(res, rid, 401, "bad_signature", NULL,
                                      "X-Signature must be sha256=<hex HMAC-SHA256 of the body>");
        }
        if (api_parse_provider_event(req->body, req->body_len, &ev, &err) < 0)
                return api_reply_error(res, rid, &err);
        api_note_op(api, ev.operation_id);
        r = store_settle_external(api->store, ev.operation_id, ev.outcome,
                                  ev.refund_id[0] ? ev.refund_id : NULL, "webhook", api_wall_now());
        if (r == TG_ESTATE)
                return api_reply_code(res, rid, 409, "state_conflict", NULL,
                                      "the operation is in flight or already closed otherwise");
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        r = store_get(api->store, ev.operation_id, &op);
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        log_emit(LOG_INFO, "provider_event",
                 json_pack("{s:s, s:s, s:s}", "operation_id", ev.operation_id, "state",
                           op_state_name(op.state), "request_id", rid));
        return api_reply_json(res, 200,
                              json_pack("{s:s, s:s}", "operation_id", op.req.operation_id, "state",
                                        op_state_name(op.state)));
}
