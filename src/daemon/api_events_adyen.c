/*
 * api_events_adyen — POST /v1/provider-events with provider.webhook_signature
 * = adyen: Adyen's standard notification (docs/providers/adyen.md), a JSON
 * batch of items each signed on its own (net/adyen_batch.h), answered with
 * the body "[accepted]" that Adyen's webhook expects.
 *
 * Invariants:
 *   - every item is verified before any is acted on: one item without a
 *     valid hmacSignature refuses the whole delivery (401, nothing changes).
 *     Why the whole batch: a delivery is one message from Adyen, all its
 *     items signed with one key, so a bad item means a forged or altered
 *     message or a key out of step (a rotation); refusing leaves the batch
 *     in Adyen's retry queue, so a genuine item is delivered again once the
 *     key is right, where accepting the rest would drop it for good, and a
 *     forged item cannot ride along with genuine ones;
 *   - the body is parsed (bounded, fuzzed) before the signatures can be
 *     checked, since they are inside it; the store is touched only after;
 *   - an item settles its operation only through store_settle_external(),
 *     exactly as a query's answer would (never a re-send, never over a final
 *     state; a repeat of the outcome held changes nothing: a re-delivered
 *     item is harmless). Ours is named by merchantReference (the reference
 *     the POST carried: our operation id); when the operation already holds
 *     a refund id (the POST's pspReference), the item's pspReference must be
 *     it, else the item is another refund and is ignored. An item whose
 *     merchantReference is absent or names none of ours is matched by its
 *     pspReference alone: the one operation of an account this webhook
 *     serves whose stored refund id it is (store_find_by_refund_id); an id
 *     held by two is no single operation's and is ignored;
 *   - the outcome is REFUND with success "true" (succeeded) or "false"
 *     (rejected), or REFUND_FAILED (rejected); any other event is accepted
 *     and ignored. An item whose operation is in flight (its call decides
 *     first) or a store failure answers 503, so that Adyen delivers the
 *     batch again (the items already settled are then repeats); a conflict
 *     with a final state is logged for an operator and accepted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/api_int.h"
#include "daemon/log.h"
#include "net/adyen_batch.h"

static int reply_accepted(struct http_response *res)
{
        char *body = strdup("[accepted]");

        if (!body)
                return TG_ENOMEM;
        return http_response_take(res, 200, "text/plain", body, strlen(body));
}

/* The item's outcome: OP_SUCCEEDED, OP_REJECTED, or OP_PENDING (none). */
static enum op_state item_outcome(const struct adyen_item *it)
{
        if (strcmp(it->event_code, "REFUND") == 0 && strcmp(it->success, "true") == 0)
                return OP_SUCCEEDED;
        if (strcmp(it->event_code, "REFUND") == 0 && strcmp(it->success, "false") == 0)
                return OP_REJECTED;
        if (strcmp(it->event_code, "REFUND_FAILED") == 0)
                return OP_REJECTED;
        return OP_PENDING;
}

static void ignored(const char *rid, unsigned i, const char *why, const char *op)
{
        log_emit(LOG_INFO, "provider_event_ignored",
                 json_pack("{s:s, s:i, s:s, s:s?}", "request_id", rid, "item", (int)i, "why", why,
                           "operation_id", op));
}

/* Ours by the item's pspReference alone (the refund's own, which the POST's
 * answer stored as our refund id): the one operation, among the accounts
 * this webhook serves, that holds it. TG_ENOTFOUND none, TG_ECONFLICT more
 * than one (the id names no single operation of ours). */
static int find_by_psp(struct api *api, const struct api_webhook *hook, const char *psp,
                       struct op_record *ret_op)
{
        unsigned n = api->cfg.account_count ? api->cfg.account_count : 1;
        struct op_record *other = malloc(sizeof(*other));
        bool found = false;
        int r = 0;

        if (!other)
                return TG_ENOMEM;
        for (unsigned a = 0; a < n && r == 0; a++) {
                const char *account =
                    api->cfg.account_count ? api->cfg.accounts[a].name : TG_ACCOUNT_DEFAULT;

                if (!api_webhook_serves(api, hook, account))
                        continue;
                r = store_find_by_refund_id(api->store, account, psp, found ? other : ret_op);
                if (r == TG_ENOTFOUND || r == TG_EINVAL)
                        r = 0; /* EINVAL: not an id we could have stored */
                else if (r == 0 && found)
                        r = TG_ECONFLICT;
                else if (r == 0)
                        found = true;
        }
        free(other);
        if (r < 0)
                return r;
        return found ? 0 : TG_ENOTFOUND;
}

/* The item's operation: by merchantReference (our operation id), else, when
 * that is absent or names none of ours, by pspReference (find_by_psp).
 * 0 with *ret_op, TG_ENOTFOUND (not ours), TG_ECONFLICT, a store error. */
static int item_operation(struct api *api, const struct api_webhook *hook,
                          const struct adyen_item *it, struct op_record *ret_op, bool *ret_by_psp)
{
        const char *ref = it->merchant_reference;
        int r = TG_ENOTFOUND;

        *ret_by_psp = false;
        if (ref[0] && refund_validate_operation_id(ref, strlen(ref), NULL) == 0)
                r = store_get(api->store, ref, ret_op);
        if (r != TG_ENOTFOUND || !it->psp_reference[0])
                return r;
        r = find_by_psp(api, hook, it->psp_reference, ret_op);
        *ret_by_psp = r == 0;
        return r;
}

/* One verified item. 0 (settled, a repeat, or ignored), 1 (in flight:
 * deliver again), < 0 a store error. */
static int settle_item(struct api *api, const struct api_webhook *hook, const struct adyen_item *it,
                       unsigned i, const char *rid)
{
        enum op_state outcome = item_outcome(it);
        char op_id[TG_OP_ID_MAX + 1];
        struct op_record op;
        bool by_psp;
        int r;

        if (outcome == OP_PENDING) {
                ignored(rid, i, "not_a_refund_outcome", NULL);
                return 0;
        }
        r = item_operation(api, hook, it, &op, &by_psp);
        if (r == TG_ENOTFOUND || r == TG_ECONFLICT) {
                ignored(rid, i, r == TG_ENOTFOUND ? "not_ours" : "psp_reference_not_one_operation",
                        it->merchant_reference[0] ? it->merchant_reference : NULL);
                return 0;
        }
        if (r < 0)
                return r;
        snprintf(op_id, sizeof(op_id), "%s", op.req.operation_id);
        if (!api_webhook_serves(api, hook, op.req.account)) {
                api_webhook_ignored_other(rid, hook, op_id, op.req.account);
                return 0;
        }
        if (op.refund_id[0] && it->psp_reference[0] && strcmp(op.refund_id, it->psp_reference)) {
                ignored(rid, i, "another_refund", op_id);
                return 0;
        }
        api_note_op(api, op_id);
        r = store_settle_external(api->store, op_id, outcome,
                                  it->psp_reference[0] ? it->psp_reference : NULL, "webhook",
                                  api_wall_now());
        if (r == TG_ESTATE) {
                if (store_get(api->store, op_id, &op) == 0 && op.state == OP_IN_FLIGHT)
                        return 1;
                log_emit(LOG_WARN, "provider_event_conflict",
                         json_pack("{s:s, s:s, s:s, s:s, s:s}", "request_id", rid, "operation_id",
                                   op_id, "state", op_state_name(op.state), "event", it->event_code,
                                   "success", it->success));
                return 0;
        }
        if (r < 0)
                return r;
        log_emit(LOG_INFO, "provider_event",
                 json_pack("{s:s, s:s, s:s, s:s, s:s}", "operation_id", op_id, "outcome",
                           op_state_name(outcome), "event", it->event_code, "request_id", rid,
                           "matched_by", by_psp ? "pspReference" : "merchantReference"));
        return 0;
}

int api_post_adyen_notification(struct api *api, const struct api_webhook *hook,
                                const struct http_request *req, struct http_response *res,
                                const char *rid)
{
        struct adyen_batch *b = malloc(sizeof(*b));
        unsigned char key[ADYEN_KEY_MAX];
        size_t key_len = 0;
        unsigned bad = 0, busy = 0;
        int r;

        if (!b)
                return api_reply_store_error(res, rid, TG_ENOMEM);
        r = adyen_batch_parse(req->body ? req->body : "", req->body_len, b);
        if (r < 0) {
                free(b);
                if (r == TG_ENOMEM)
                        return api_reply_store_error(res, rid, r);
                return api_reply_code(res, rid, 422, "invalid_notification", NULL,
                                      "the body must be Adyen's notification batch");
        }
        if (adyen_key_decode(hook->cfg->provider_webhook_secret, key, &key_len) < 0) {
                free(b);
                return api_reply_code(res, rid, 500, "bad_key", NULL,
                                      "the webhook's HMAC key is not hex");
        }
        for (unsigned i = 0; i < b->n; i++)
                if (!adyen_item_verify(&b->item[i], key, key_len)) {
                        log_emit(LOG_WARN, "provider_event_bad_signature",
                                 json_pack("{s:s, s:i, s:b}", "request_id", rid, "item", (int)i,
                                           "signed", b->item[i].hmac_signature[0] != '\0'));
                        bad++;
                }
        explicit_bzero(key, sizeof(key));
        if (bad > 0) {
                free(b);
                return api_reply_code(res, rid, 401, "bad_signature", NULL,
                                      "every item's additionalData.hmacSignature must be the "
                                      "base64 HMAC-SHA256 of its fields");
        }
        for (unsigned i = 0; i < b->n; i++) {
                r = settle_item(api, hook, &b->item[i], i, rid);
                if (r < 0) {
                        free(b);
                        return api_reply_store_error(res, rid, r);
                }
                busy += r == 1;
        }
        free(b);
        if (busy > 0)
                return api_reply_code(res, rid, 503, "call_running", NULL,
                                      "an operation of this batch has a call running: deliver "
                                      "it again");
        return reply_accepted(res);
}
