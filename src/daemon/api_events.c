/*
 * api_events — POST /v1/provider-events, the provider's signed webhook,
 * with the secret of provider.webhook_secret_file, in one of two schemes
 * (provider.webhook_signature):
 *   - tollgate (shared/PROVIDER.md): body {"operation_id","status",
 *     "refund_id"}, header "X-Signature: sha256=<hex HMAC-SHA256 of the raw
 *     body>";
 *   - stripe (docs/providers/stripe.md): header "Stripe-Signature:
 *     t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">[,v1=...]", t within
 *     provider.webhook_tolerance_s of now; the body an event whose refund
 *     object (provider.webhook_object_field) is read with the reply mapping
 *     and names our operation at provider.webhook_match_field;
 *   - checkout (docs/providers/checkout.md): header "Cko-Signature: <hex
 *     HMAC-SHA256 of the raw body>" (no timestamp); the event read as for
 *     stripe, its outcome at provider.webhook_status_field (its type);
 *   - adyen (docs/providers/adyen.md): a batch whose items are signed one by
 *     one, in api_events_adyen.c.
 *
 * Invariants:
 *   - the signature is checked over the raw bytes, in constant time
 *     (digest_equal of the two MACs), BEFORE the body is parsed or the store
 *     is touched (adyen's signatures are inside the body: it is parsed
 *     first, bounded, and the store touched only once every item verified): a bad, missing or malformed signature, or (stripe) a
 *     timestamp outside the tolerance, is 401 and nothing changes; with no
 *     secret configured the route does not exist (404);
 *   - (stripe) an event that names no operation of ours, or a refund not
 *     final yet (a processing word), is answered 200 and changes nothing:
 *     the provider must not deliver it again and again;
 *   - an event settles through store_settle_external() exactly as a query
 *     answer would, audited with source "webhook": it never rewrites a final
 *     state, never touches an in_flight operation (the exit's own call
 *     decides) and is a no-op when the operation is already in that state.
 *     That makes a replayed event harmless: a captured valid event can only
 *     repeat the provider's own final answer, which is already recorded;
 *   - the answer never echoes the body or the signature.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/classify.h"
#include "core/encode.h"
#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/api_int.h"
#include "daemon/log.h"
#include "daemon/provider_setup.h"
#include "net/provider_reply.h"
#include "platform/digest.h"
#include "platform/secmem.h"

/* The HMAC-SHA256 of the raw body in one header: tollgate's X-Signature
 * (sha256=<hex>) or Checkout.com's Cko-Signature (<hex>). */
static bool signature_ok(const struct tg_config *cfg, const struct http_request *req, bool checkout)
{
        unsigned char want[API_MAC_LEN], got[API_MAC_LEN];
        const char *secret = cfg->provider_webhook_secret;
        const char *cko = checkout ? http_request_header(req, "Cko-Signature") : NULL;
        bool ok;

        if (checkout ? !cko || strnlen(cko, 2 * API_MAC_LEN + 1) != 2 * API_MAC_LEN ||
                           encode_hex_decode(cko, got, API_MAC_LEN) < 0
                     : api_parse_signature(http_request_header(req, "X-Signature"), got) < 0)
                return false;
        if (digest_hmac_sha256(secret, strlen(secret), req->body, req->body_len, want) < 0)
                return false;
        ok = digest_equal(want, got, API_MAC_LEN);
        explicit_bzero(want, sizeof(want));
        return ok;
}

/* Stripe's scheme: 0; TG_EPARSE (no or a malformed header), TG_ERANGE (t
 * outside the tolerance), -EACCES (no v1 matches), TG_ENOMEM. */
static int stripe_signature_check(const struct tg_config *cfg, const struct http_request *req,
                                  tg_wall_ms now)
{
        const char *secret = cfg->provider_webhook_secret;
        struct stripe_signature sig;
        unsigned char want[API_MAC_LEN];
        char t[24];
        int64_t skew;
        size_t tlen;
        bool ok = false;
        char *signed_payload;

        if (api_parse_stripe_signature(http_request_header(req, "Stripe-Signature"), &sig) < 0)
                return TG_EPARSE;
        skew = sig.t * 1000 - now;
        if (skew > cfg->provider_webhook_tolerance_ms || -skew > cfg->provider_webhook_tolerance_ms)
                return TG_ERANGE;
        tlen = (size_t)snprintf(t, sizeof(t), "%lld.", (long long)sig.t);
        signed_payload = malloc(tlen + req->body_len + 1);
        if (!signed_payload)
                return TG_ENOMEM;
        memcpy(signed_payload, t, tlen);
        if (req->body_len)
                memcpy(signed_payload + tlen, req->body, req->body_len);
        if (digest_hmac_sha256(secret, strlen(secret), signed_payload, tlen + req->body_len,
                               want) == 0)
                for (unsigned i = 0; i < sig.n; i++)
                        ok |= digest_equal(want, sig.v1[i], API_MAC_LEN);
        free(signed_payload);
        explicit_bzero(want, sizeof(want));
        return ok ? 0 : -EACCES;
}

/* A verified Stripe or Checkout.com event, read through the reply mapping and classified
 * as a query's 200 answer would be, into *ev. 0 (*ev to settle); 1 with
 * *why set: nothing to settle (not ours, not final, a class that is no
 * outcome); TG_EPARSE (not a JSON object);
 * TG_ECONFIG (the mapping does not compile: cannot happen past config
 * check); TG_ENOMEM. */
static int mapped_event(const struct tg_config *cfg, const struct http_request *req,
                        struct provider_event *ev, const char **why)
{
        struct provider_maps *maps = malloc(sizeof(*maps));
        struct field_source object, match;
        struct template_error terr;
        struct provider_reply reply;
        struct classifier *classifier = NULL;
        enum tg_class cls;
        char err[256], id[TG_OP_ID_MAX + 2];
        int r;

        if (!maps)
                return TG_ENOMEM;
        r = provider_setup_maps(cfg, maps, err, sizeof(err));
        if (r == 0 && (field_source_parse(cfg->provider_webhook_object_field, &object, &terr) < 0 ||
                       field_source_parse(cfg->provider_webhook_match_field, &match, &terr) < 0))
                r = TG_ECONFIG;
        if (r == 0)
                r = provider_reply_read_event(&maps->reply, &object, &match, req->body,
                                              req->body_len, &reply, id, sizeof(id));
        free(maps);
        if (r < 0)
                return r;
        memset(ev, 0, sizeof(*ev));
        if (!id[0] || refund_validate_operation_id(id, strlen(id), NULL) < 0) {
                *why = "not_ours";
                return 1;
        }
        snprintf(ev->operation_id, sizeof(ev->operation_id), "%s", id);
        snprintf(ev->refund_id, sizeof(ev->refund_id), "%s", reply.refund_id);
        /* the refund object as a query's 200 answer, classified by the
         * same rules (the defaults and the config's [classify]) */
        reply.transport = TG_TR_COMPLETE;
        reply.http_status = 200;
        r = classifier_new_default(&classifier);
        for (unsigned i = 0; r == 0 && i < cfg->rule_count; i++)
                r = classifier_add_rule(classifier, &cfg->rules[i]);
        cls = r == 0 ? classify(classifier, CLASSIFY_QUERY, &reply) : TG_CLASS_UNKNOWN;
        classifier_free(classifier);
        if (r < 0)
                return r;
        if (cls == TG_CLASS_SUCCEEDED)
                ev->outcome = OP_SUCCEEDED;
        else if (cls == TG_CLASS_REJECTED)
                ev->outcome = OP_REJECTED;
        else
                *why = cls == TG_CLASS_PROCESSING ? "not_final" : "unknown_status";
        return *why ? 1 : 0;
}

/* Checks the delivery's signature in the configured scheme and reads its
 * event. 0 (*ev to settle), 1 (answered: nothing to settle), or < 0
 * (answered with the error). */
static int verified_event(const struct tg_config *cfg, const struct http_request *req,
                          struct http_response *res, const char *rid, struct provider_event *ev,
                          int *ret_status)
{
        struct api_error err;
        const char *why = NULL;
        int r;

        bool checkout = strcmp(cfg->provider_webhook_signature, "checkout") == 0;

        if (checkout && !signature_ok(cfg, req, true)) {
                log_emit(LOG_WARN, "provider_event_bad_signature",
                         json_pack("{s:s}", "request_id", rid));
                *ret_status =
                    api_reply_code(res, rid, 401, "bad_signature", NULL,
                                   "Cko-Signature must be the hex HMAC-SHA256 of the body");
                return -1;
        }
        if (!checkout && strcmp(cfg->provider_webhook_signature, "stripe") != 0) {
                if (!signature_ok(cfg, req, false)) {
                        log_emit(LOG_WARN, "provider_event_bad_signature",
                                 json_pack("{s:s}", "request_id", rid));
                        *ret_status = api_reply_code(
                            res, rid, 401, "bad_signature", NULL,
                            "X-Signature must be sha256=<hex HMAC-SHA256 of the body>");
                        return -1;
                }
                if (api_parse_provider_event(req->body, req->body_len, ev, &err) < 0) {
                        *ret_status = api_reply_error(res, rid, &err);
                        return -1;
                }
                return 0;
        }
        r = checkout ? 0 : stripe_signature_check(cfg, req, api_wall_now());
        if (r == TG_ENOMEM) {
                *ret_status = api_reply_store_error(res, rid, r);
                return -1;
        }
        if (r < 0) {
                const char *msg = r == TG_ERANGE
                                      ? "the Stripe-Signature timestamp is outside the tolerance"
                                      : "Stripe-Signature must be t=<unix seconds>,v1=<hex "
                                        "HMAC-SHA256 of \"t.body\">";
                log_emit(LOG_WARN, "provider_event_bad_signature",
                         json_pack("{s:s, s:s}", "request_id", rid, "why",
                                   r == TG_ERANGE ? "timestamp_outside_tolerance"
                                   : r == -EACCES ? "no_signature_matches"
                                                  : "malformed_header"));
                *ret_status = api_reply_code(res, rid, 401, "bad_signature", NULL, msg);
                return -1;
        }
        r = mapped_event(cfg, req, ev, &why);
        if (r == TG_EPARSE) {
                *ret_status = api_reply_code(res, rid, 422, "invalid_json", NULL,
                                             "the event must be a JSON object");
                return -1;
        }
        if (r < 0) {
                *ret_status = api_reply_store_error(res, rid, r);
                return -1;
        }
        if (r == 1) {
                log_emit(LOG_INFO, "provider_event_ignored",
                         json_pack("{s:s, s:s, s:s?}", "request_id", rid, "why", why,
                                   "operation_id", ev->operation_id[0] ? ev->operation_id : NULL));
                *ret_status = api_reply_json(res, 200, json_pack("{s:s}", "ignored", why));
                return 1;
        }
        return 0;
}

bool api_webhook_serves(const struct api *api, const struct api_webhook *hook, const char *account)
{
        const struct tg_account *a;
        struct tg_config *view;
        bool same;

        if (hook->account)
                return strcmp(hook->account, account) == 0;
        if (api->cfg.account_count <= 1)
                return true; /* one account: the top level is its webhook */
        a = config_account_find(&api->cfg, account);
        view = a ? secmem_alloc(sizeof(*view)) : NULL;
        same = view && config_account_view(&api->cfg, a, view) == 0 &&
               strcmp(view->provider_webhook_secret_file, api->cfg.provider_webhook_secret_file) ==
                   0 &&
               strcmp(view->provider_webhook_signature, api->cfg.provider_webhook_signature) == 0;
        if (view) {
                explicit_bzero(view, sizeof(*view));
                secmem_free(view);
        }
        return same;
}

void api_webhook_ignored_other(const char *rid, const struct api_webhook *hook, const char *op_id,
                               const char *account)
{
        log_emit(LOG_WARN, "provider_event_ignored",
                 json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s}", "request_id", rid, "why",
                           "other_account", "operation_id", op_id, "account", account, "route",
                           hook->account, "message",
                           "the operation's account has a webhook of its own: the provider "
                           "delivers to /v1/provider-events/ACCOUNT"));
}

static int post_event(struct api *api, const struct api_webhook *hook,
                      const struct http_request *req, struct http_response *res, const char *rid)
{
        const struct tg_config *cfg = hook->cfg;
        struct provider_event ev;
        struct op_record op;
        int r, answered;

        if (cfg->provider_webhook_secret[0] == '\0')
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such route");
        if (req->body_len > cfg->api_max_body_bytes)
                return api_reply_code(res, rid, 413, "body_too_large", NULL,
                                      "the request body is too large");
        if (strcmp(cfg->provider_webhook_signature, "adyen") == 0)
                return api_post_adyen_notification(api, hook, req, res, rid);
        if (verified_event(cfg, req, res, rid, &ev, &answered) != 0)
                return answered;
        r = store_get(api->store, ev.operation_id, &op);
        if (r == 0 && !api_webhook_serves(api, hook, op.req.account)) {
                api_webhook_ignored_other(rid, hook, ev.operation_id, op.req.account);
                return api_reply_json(res, 200, json_pack("{s:s}", "ignored", "other_account"));
        }
        if (r < 0 && r != TG_ENOTFOUND)
                return api_reply_store_error(res, rid, r);
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

int api_post_provider_event(struct api *api, const struct http_request *req,
                            struct http_response *res, const char *rid)
{
        const struct api_webhook hook = {.cfg = &api->cfg, .account = NULL};

        return post_event(api, &hook, req, res, rid);
}

int api_post_account_provider_event(struct api *api, const char *name,
                                    const struct http_request *req, struct http_response *res,
                                    const char *rid)
{
        const struct tg_account *a = config_account_find(&api->cfg, name);
        struct tg_config *view;
        int r;

        /* an account that is not configured: the same 404 as a route that
         * does not exist (the provider learns nothing about our accounts) */
        if (!a)
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such route");
        view = secmem_alloc(sizeof(*view)); /* it holds the account's secrets */
        if (!view)
                return TG_ENOMEM;
        if (api->cfg.account_count == 1 && !a->declared)
                *view = api->cfg; /* the top level is the default account */
        else
                config_account_view(&api->cfg, a, view);
        const struct api_webhook hook = {.cfg = view, .account = a->name};
        r = post_event(api, &hook, req, res, rid);
        explicit_bzero(view, sizeof(*view));
        secmem_free(view);
        return r;
}
