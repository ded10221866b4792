/*
 * The stub's contract endpoints: POST /v1/refunds and GET
 * /v1/refunds/{id} (PROVIDER.md, or the stripe shape's paths). Each
 * request is checked as a real provider checks it — the client
 * certificate (in the handshake), the API key, the signature, the
 * Idempotency-Key and the body — in that order, and its mode in force
 * decides what it is answered; the answer itself is made in answer.c.
 *
 * Invariants:
 * - Nothing is checked or executed in modes refuse and redirect (a hop in
 *   front of the provider); unavailable and limited answer after the
 *   caller's checks, before the body is looked at.
 * - A POST reaches the ledger only when every check passed; ledger_begin()
 *   decides new, replay, reused or in use, and only new executes (at the
 *   request's finish).
 */
#include "server_int.h"

#include "core/encode.h"
#include "core/tg_error.h"
#include "ledger.h"
#include "platform/clock.h"
#include "record.h"
#include "tls.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *header_of(void *ctx, const char *name)
{
        return MHD_lookup_connection_value(ctx, MHD_HEADER_KIND, name);
}

/* The query (the stripe shape's list) back as a client writes it, in the
 * order sent: core/encode.h's path encoding of each name and value. */
struct query_text {
        struct tg_strbuf *sb;
        bool first;
};

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *name,
                               const char *value)
{
        struct query_text *q = cls;

        (void)kind;
        tg_strbuf_add(q->sb, q->first ? "?" : "&", 1);
        q->first = false;
        encode_percent(ENCODE_PATH_SEGMENT, name, strlen(name), q->sb);
        if (value) {
                tg_strbuf_add(q->sb, "=", 1);
                encode_percent(ENCODE_PATH_SEGMENT, value, strlen(value), q->sb);
        }
        return MHD_YES;
}

/* paypal: the bearer token, one the token endpoint gave and still alive:
 * "ok", "missing", "expired" or "wrong". */
static const char *bearer_verdict(struct req *r)
{
        const char *authz = header_of(r->conn, "Authorization");

        if (!authz || !authz[0])
                return "missing";
        switch (stub_tokens_check(r->srv->tokens, authz, clock_mono_now())) {
        case STUB_TOKEN_OK:
                return "ok";
        case STUB_TOKEN_EXPIRED:
                return "expired";
        case STUB_TOKEN_UNKNOWN:
        default:
                return "wrong";
        }
}

/* What a real provider checks before anything else: the client
 * certificate (already, in the handshake), the API key and the request's
 * signature. Records the verdicts (and the body, with --record-bodies);
 * false when the request was answered 401 here. */
static bool caller_ok(struct req *r)
{
        struct stub_server *srv = r->srv;
        char path[3 * sizeof(r->path)];
        struct tg_strbuf sb;
        const char *key = srv->cfg.shape == STUB_SHAPE_PAYPAL
                              ? bearer_verdict(r)
                              : stub_auth_key(&srv->cfg.auth, header_of, r->conn);
        const char *sig;

        /* The path as the client sent it: libmicrohttpd hands it over
         * percent-decoded, and a client encodes every byte of a value but
         * the unreserved ones (core/encode.h), keeping its '/'. */
        tg_strbuf_init(&sb, path, sizeof(path));
        for (const char *p = r->path; *p; p++) {
                if (*p == '/')
                        tg_strbuf_add(&sb, "/", 1);
                else
                        encode_percent(ENCODE_PATH_SEGMENT, p, 1, &sb);
        }
        struct query_text q = {.sb = &sb, .first = true};
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_arg, &q);
        sig = stub_auth_signature(&srv->cfg.auth, header_of, r->conn, r->method, path, r->body,
                                  r->len, clock_wall_now() / TG_MS_PER_S);

        if (r->seq)
                record_checks(srv->log, r->seq, stub_tls_client(r->conn), key, sig,
                              srv->cfg.record_bodies ? (r->body ? r->body : "") : NULL, r->len);
        if (key && strcmp(key, "ok") != 0) {
                answer_error(r, 401, "unauthorized",
                             strcmp(key, "missing") == 0 ? "no API key" : "invalid API key", false);
                return false;
        }
        if (sig && strcmp(sig, "ok") != 0) {
                answer_error(r, 401, "signature_invalid",
                             strcmp(sig, "stale") == 0 ? "timestamp too far from now"
                                                       : "missing or wrong signature",
                             false);
                return false;
        }
        return true;
}

/* What both contract requests meet before their own checks: a refused
 * connection, a hop in front of the provider (redirect: nothing checked,
 * nothing executed), the caller's checks, and the account-wide refusals
 * (unavailable, limited: Retry-After as the mode says) with their
 * messages. true: r is answered, *ret_result says how. */
static bool front(struct req *r, const char *unavailable, const char *limited,
                  enum MHD_Result *ret_result)
{
        if (r->spec.mode == STUB_REFUSE) {
                r->drop = true;
                *ret_result = answer_send(r);
                return true;
        }
        if (r->spec.mode == STUB_REDIRECT) {
                *ret_result = answer_after_delay(r);
                return true;
        }
        if (!caller_ok(r)) {
                *ret_result = answer_send(r);
                return true;
        }
        if (r->spec.mode != STUB_UNAVAILABLE && r->spec.mode != STUB_LIMITED)
                return false;
        if (r->spec.mode == STUB_UNAVAILABLE)
                answer_error(r, 503, "temporarily_unavailable", unavailable, true);
        else
                answer_error(r, 429, "rate_limited", limited, true);
        answer_retry_after(r);
        *ret_result = answer_after_delay(r);
        return true;
}

/* The POST body as the shape has it: 0, or the answer is prepared. */
static int parse_refund(struct req *r, const char *key, const char *ctype)
{
        const char *why = NULL, *param = NULL;
        int rc;

        if (r->srv->cfg.shape == STUB_SHAPE_CHECKOUT) {
                const char *code = NULL;
                if (ctype && strncmp(ctype, "application/json", 16) != 0) {
                        answer_error(r, 422, "request_invalid", "not JSON", false);
                        return TG_EINVAL;
                }
                rc = stub_parse_checkout_refund(r->body ? r->body : "", r->len, key,
                                                r->list_payment, &code, &r->refund);
                if (rc < 0)
                        answer_error(r, 422, code, "invalid refund", false);
                return rc;
        }
        if (r->srv->cfg.shape == STUB_SHAPE_PAYPAL) {
                const char *issue = NULL, *field = NULL, *msg = NULL;
                int status = 400;
                if (!ctype || strncmp(ctype, "application/json", 16) != 0) {
                        answer_error(r, 415, "UNSUPPORTED_MEDIA_TYPE",
                                     "Content-Type must be application/json", false);
                        return TG_EINVAL;
                }
                rc = stub_parse_paypal_refund(r->body ? r->body : "", r->len, key, r->list_payment,
                                              &status, &issue, &field, &msg, &r->refund);
                if (rc < 0) {
                        free(r->answer);
                        r->status = status;
                        r->answer =
                            stub_paypal_error(status, issue, field, msg,
                                              (unsigned long long)r->seq * 0x9E3779B97F4A7C15ULL);
                }
                return rc;
        }
        if (r->srv->cfg.shape == STUB_SHAPE_ADYEN) {
                const char *code = NULL, *msg = NULL;
                int status = 422;
                if (strlen(key) > 64) {
                        answer_error(r, 422, "000", "Idempotency-Key is longer than 64", false);
                        return TG_EINVAL;
                }
                if (!ctype || strncmp(ctype, "application/json", 16) != 0) {
                        answer_error(r, 415, "000", "Content-Type must be application/json", false);
                        return TG_EINVAL;
                }
                rc = stub_parse_adyen_refund(r->body ? r->body : "", r->len, key, r->list_payment,
                                             &status, &code, &msg, &r->refund);
                if (rc < 0)
                        answer_error(r, status, code, msg, false);
                return rc;
        }
        if (r->srv->cfg.shape == STUB_SHAPE_STRIPE) {
                if (!ctype || strncmp(ctype, "application/x-www-form-urlencoded", 33) != 0) {
                        answer_error(r, 400, "invalid_request",
                                     "Content-Type must be application/x-www-form-urlencoded",
                                     false);
                        return TG_EINVAL;
                }
                rc = stub_parse_refund_form(r->body ? r->body : "", r->len, key, &why, &param,
                                            &r->refund);
                if (rc < 0) {
                        answer_error(r, 400, param ? "parameter_invalid" : "parameter_unknown", why,
                                     false);
                        return rc;
                }
                return 0;
        }
        if (ctype && strncmp(ctype, "application/json", 16) != 0) {
                answer_error(r, 400, "invalid_request", "Content-Type must be application/json",
                             false);
                return TG_EINVAL;
        }
        rc = stub_parse_refund_request(r->body ? r->body : "", r->len, &why, &r->refund);
        if (rc < 0) {
                answer_error(r, rc == TG_EPARSE ? 400 : 422, "invalid_request", why, false);
                return rc;
        }
        if (strcmp(key, r->refund.operation_id) != 0) {
                answer_error(r, 422, "invalid_request",
                             "Idempotency-Key must equal the body's operation_id", false);
                return TG_EINVAL;
        }
        return 0;
}

/* paypal: a repeat of a key is answered, at its finish, with the latest
 * status of the refund the stored answer names. */
static void paypal_replay(struct req *r, const char *key, const char *stored)
{
        json_t *o = json_loads(stored, 0, NULL);
        const char *id = json_string_value(json_object_get(o, "id"));

        if (id && strlen(id) < sizeof(r->refund_id)) {
                snprintf(r->refund_id, sizeof(r->refund_id), "%s", id);
                snprintf(r->query_op, sizeof(r->query_op), "%s", key);
                r->lookup = true;
        }
        json_decref(o);
}

enum MHD_Result contract_refund(struct req *r)
{
        struct stub_server *srv = r->srv;
        const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                      stub_shape_key_header(srv->cfg.shape));
        const char *ctype =
            MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        char stored[STUB_RESPONSE_MAX], msg[160], fresh[48];
        enum ledger_begin kind;
        enum MHD_Result ret;
        int rc, replay_status = 200;

        if (front(r, "injected (unavailable)", "injected (limited)", &ret))
                return ret;
        if (r->too_big) {
                snprintf(msg, sizeof(msg), "body larger than %zu bytes", srv->cfg.max_body);
                answer_error(r, 413, "invalid_request", msg, false);
                return answer_send(r);
        }
        if (!key && srv->cfg.shape == STUB_SHAPE_PAYPAL) {
                /* without PayPal-Request-Id PayPal "duplicates the
                 * request": a key of our own, new each time */
                snprintf(fresh, sizeof(fresh), "paypal-no-request-id-%llu",
                         (unsigned long long)r->seq);
                key = fresh;
        }
        if (!key || !stub_key_valid(key, strlen(key))) {
                answer_error(r, 400, "invalid_request",
                             "Idempotency-Key must be 1-128 chars of [A-Za-z0-9._:-]", false);
                return answer_send(r);
        }
        if (parse_refund(r, key, ctype) < 0)
                return answer_send(r);
        if (r->spec.mode == STUB_REJECT) {
                answer_error(r, 422, "invalid_request", "injected (reject)", false);
                return answer_after_delay(r);
        }
        rc = ledger_begin(srv->ledger, &r->refund, clock_mono_now(), &kind, &replay_status, stored);
        if (rc < 0) {
                answer_error(r, 503, "temporarily_unavailable", "stub ledger full", true);
                return answer_send(r);
        }
        switch (kind) {
        case LEDGER_NEW:
                r->execute = true;
                break;
        case LEDGER_REPLAY:
                /* The first stored response: the success body with 200, or
                 * the 500 a failed key was given (docs in --help). PayPal
                 * answers the refund's latest status (at the finish). */
                answer_text(r, replay_status, stored);
                if (srv->cfg.shape == STUB_SHAPE_PAYPAL)
                        paypal_replay(r, key, stored);
                break;
        case LEDGER_REUSED:
                answer_error(r, 422, "idempotency_key_reused",
                             "this key was used with another payload", false);
                break;
        case LEDGER_IN_USE:
                answer_error(r, 409, "idempotency_key_in_use",
                             "a request with this key is still being processed", false);
                /* Checkout.com, Adyen and PayPal turn the second request away at once */
                if (srv->cfg.shape == STUB_SHAPE_CHECKOUT || srv->cfg.shape == STUB_SHAPE_ADYEN ||
                    srv->cfg.shape == STUB_SHAPE_PAYPAL)
                        r->spec.delay_ms = 0;
                break;
        }
        return answer_after_delay(r);
}

/* Stripe's GET /v1/refunds: its parameters as Stripe documents them
 * (payment_intent, limit 1-100, starting_after; charge, created and
 * ending_before are not played and refused as unknown). 0, or the answer
 * is prepared. */
static int list_args(struct req *r)
{
        static const char *const known[] = {"payment_intent", "limit", "starting_after"};
        const char *pi = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, known[0]);
        const char *limit = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, known[1]);
        const char *after = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, known[2]);
        int n = MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, NULL, NULL);
        long v = 10; /* Stripe's default page */

        if (n != (pi != NULL) + (limit != NULL) + (after != NULL)) {
                answer_error(r, 400, "parameter_unknown", "a list parameter is unknown", false);
                return TG_EINVAL;
        }
        if (limit) {
                char *end = NULL;
                v = strtol(limit, &end, 10);
                if (!limit[0] || *end || v < 1 || v > STUB_LIST_MAX) {
                        answer_error(r, 400, "parameter_invalid_integer",
                                     "limit must be an integer from 1 to 100", false);
                        return TG_EINVAL;
                }
        }
        if ((pi && strlen(pi) > STUB_FIELD_MAX) || (after && strlen(after) >= STUB_REFUND_ID_MAX)) {
                answer_error(r, 400, "parameter_invalid_string", "a list parameter is too long",
                             false);
                return TG_EINVAL;
        }
        snprintf(r->list_payment, sizeof(r->list_payment), "%s", pi ? pi : "");
        snprintf(r->list_after, sizeof(r->list_after), "%s", after ? after : "");
        r->list_limit = (unsigned)v;
        r->list = true;
        /* Stripe ignores a GET's Idempotency-Key; the stub's calls:K mode
         * counts the list as a query of that key's refund */
        const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Idempotency-Key");
        if (key && stub_key_valid(key, strlen(key)))
                snprintf(r->query_op, sizeof(r->query_op), "%s", key);
        return 0;
}

/* The operation a query names: by our key (PROVIDER.md's path) or by the
 * provider's refund id (the stripe shape, which has no lookup by key: its
 * list is the way to find a refund whose id is unknown). 0, or the answer
 * is prepared. */
static int query_operation(struct req *r)
{
        if (r->srv->cfg.shape == STUB_SHAPE_CHECKOUT) {
                /* GET /payments/{id}/actions (the payment id is read at
                 * arrival): Checkout.com ignores a GET's key; the stub's
                 * calls:K mode counts the list as a query of that key's */
                const char *key =
                    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Cko-Idempotency-Key");
                if (key && stub_key_valid(key, strlen(key)))
                        snprintf(r->query_op, sizeof(r->query_op), "%s", key);
                r->list = true;
                return 0;
        }
        if (r->srv->cfg.shape == STUB_SHAPE_PAYPAL) {
                /* GET /v2/payments/refunds/{id} (the id read at arrival):
                 * the only lookup, by the refund id a POST answered */
                size_t n = strlen(r->list_payment);
                if (n >= sizeof(r->refund_id) ||
                    ledger_operation_of(r->srv->ledger, r->list_payment, r->query_op) < 0) {
                        answer_error(r, 404, "not_found", "no such refund", false);
                        return TG_ENOTFOUND;
                }
                memcpy(r->refund_id, r->list_payment, n + 1);
                return 0;
        }
        if (r->srv->cfg.shape == STUB_SHAPE_STRIPE) {
                const char *rest = r->path + strlen(STUB_QUERY_PREFIX);
                if (strcmp(r->path, REFUNDS_PATH) == 0)
                        return list_args(r);
                if (ledger_operation_of(r->srv->ledger, rest, r->query_op) < 0) {
                        answer_error(r, 404, "resource_missing", "no such refund", false);
                        return TG_ENOTFOUND;
                }
                return 0;
        }
        if (stub_parse_query_path(r->path, r->query_op) < 0) {
                answer_error(r, 400, "invalid_request",
                             "operation id must be 1-128 chars of [A-Za-z0-9._:-]", false);
                return TG_EINVAL;
        }
        return 0;
}

enum MHD_Result contract_query(struct req *r)
{
        enum MHD_Result ret;

        if (front(r, "injected (query unavailable)", "injected (query limited)", &ret))
                return ret;
        if (query_operation(r) < 0)
                return answer_after_delay(r);
        r->lookup = true;
        return answer_after_delay(r);
}

/* The paypal shape's POST /v1/oauth2/token: HTTP Basic client id:secret
 * (the --client-id-file and --auth-secret-file ones; without them any),
 * a form grant_type=client_credentials; a token living --token-ttl-s.
 * Errors in OAuth 2.0's words (RFC 6749 5.2), as PayPal's token endpoint
 * answers them; the gateway's limiter and the capacity bucket refuse it
 * like any call (429 RATE_LIMIT_REACHED). */
enum MHD_Result contract_token(struct req *r)
{
        struct stub_server *srv = r->srv;
        const char *authz = header_of(r->conn, "Authorization");
        const char *ctype = header_of(r->conn, MHD_HTTP_HEADER_CONTENT_TYPE);
        bool basic = stub_paypal_basic_ok(authz, srv->cfg.client_id,
                                          srv->cfg.client_id ? srv->cfg.auth.secret : NULL);
        char token[STUB_PAYPAL_TOKEN_MAX];
        char *body;

        if (r->spec.mode == STUB_REFUSE) {
                r->drop = true;
                return answer_send(r);
        }
        if (r->seq)
                record_checks(srv->log, r->seq, stub_tls_client(r->conn),
                              !authz  ? "missing"
                              : basic ? "ok"
                                      : "wrong",
                              NULL, srv->cfg.record_bodies ? (r->body ? r->body : "") : NULL,
                              r->len);
        if (r->spec.mode == STUB_LIMITED) {
                answer_error(r, 429, "rate_limited", "rate limited", true);
                return answer_send(r);
        }
        if (!basic) {
                answer_text(r, 401,
                            "{\"error\":\"invalid_client\",\"error_description\":\"Client "
                            "Authentication failed\"}");
                return answer_send(r);
        }
        if (!ctype || strncmp(ctype, "application/x-www-form-urlencoded", 33) != 0 || !r->body ||
            strcmp(r->body, "grant_type=client_credentials") != 0) {
                answer_text(r, 400,
                            "{\"error\":\"unsupported_grant_type\",\"error_description\":"
                            "\"grant_type must be client_credentials, form-encoded\"}");
                return answer_send(r);
        }
        stub_tokens_issue(srv->tokens, clock_mono_now(), srv->cfg.token_ttl_s * TG_NS_PER_S, token);
        body = stub_paypal_token(token, (long long)srv->cfg.token_ttl_s);
        explicit_bzero(token, sizeof(token));
        if (!body) {
                answer_error(r, 503, "temporarily_unavailable", "stub out of memory", true);
        } else {
                free(r->answer);
                r->status = 200;
                r->answer = body;
        }
        return answer_send(r);
}
