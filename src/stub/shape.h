/*
 * The two shapes the stub can speak (--shape):
 *   provider-md  shared/PROVIDER.md: JSON bodies, {"refund_id","operation_id",
 *                "status"}, errors {"error":{"code","message","retryable"}};
 *   stripe       Stripe's refund API (docs/providers/stripe.md): a
 *                form-encoded POST (payment_intent, amount, [currency],
 *                [reason], [metadata[KEY]]) keyed by the Idempotency-Key
 *                header, refund objects {"id","object":"refund","amount",
 *                "currency","payment_intent","status":"succeeded"|"pending"|
 *                "failed","failure_reason","metadata"}, errors {"error":
 *                {"type","code","message"}} with a Stripe-Should-Retry header,
 *                GET /v1/refunds/{refund id}, and the list GET /v1/refunds
 *                (payment_intent, limit, starting_after); as at Stripe, no
 *                lookup by idempotency key;
 *   checkout     Checkout.com's refund API (docs/providers/checkout.md): a
 *                JSON POST /payments/{payment id}/refunds ({"amount",
 *                "reference","metadata"}) keyed by the Cko-Idempotency-Key
 *                header and answered 202 {"action_id","reference","_links"}
 *                (accepted, not final); the outcome is an action of
 *                GET /payments/{payment id}/actions (a bare JSON array,
 *                newest first: {"id","type":"Refund","approved",
 *                "response_code","response_summary","reference",..}) once
 *                processed; errors 422 {"request_id","error_type",
 *                "error_codes"}, 401/404/429/5xx without a body; the key
 *                is kept only for a request answered 2xx, and a request
 *                whose key is still running is answered 429 (error_type
 *                request_in_progress: the stub's word, see checkout.md).
 *                No lookup by idempotency key, none of a single action.
 *   adyen        Adyen's Checkout API refund (below, shape_adyen.c).
 *   paypal       PayPal's Payments v2 refund (below, shape_paypal.c).
 * Pure code over jansson: no I/O.
 */
#ifndef STUB_SHAPE_H
#define STUB_SHAPE_H

#include "request.h"

#include <jansson.h>

#include <stdbool.h>
#include <stddef.h>

enum stub_shape {
        STUB_SHAPE_PROVIDER_MD,
        STUB_SHAPE_STRIPE,
        STUB_SHAPE_CHECKOUT,
        STUB_SHAPE_ADYEN,
        STUB_SHAPE_PAYPAL,
};

/* "provider-md", "stripe", "checkout", "adyen" or "paypal". 0 or TG_EINVAL. */
int stub_shape_parse(const char *name, enum stub_shape *ret_shape);
const char *stub_shape_name(enum stub_shape shape);

/* A byte of an id in a path: [A-Za-z0-9_-]. */
bool stub_id_char(char c);
/* Copies id[0..n), an id 1-128 of [A-Za-z0-9_-], into ret. 0 or
 * TG_ENOTFOUND (not such an id: a path the shape does not have). */
int stub_copy_id(const char *id, size_t n, char ret[STUB_FIELD_MAX + 1]);
/* v is a JSON string of 1..max bytes without a NUL. */
bool stub_json_text(json_t *v, size_t max);
/* o as compact JSON (malloc'd, or NULL), o released. */
char *stub_json_dump(json_t *o);

/* The header carrying the idempotency key: Cko-Idempotency-Key for
 * checkout, PayPal-Request-Id for paypal, else Idempotency-Key. */
const char *stub_shape_key_header(enum stub_shape shape);

/* The checkout shape's paths: "/payments/{id}/refunds" (*ret_actions
 * false) or "/payments/{id}/actions" (true), the payment id 1-128 of
 * [A-Za-z0-9_-] copied out. 0 or TG_ENOTFOUND. */
int stub_checkout_path(const char *path, char ret_payment[STUB_FIELD_MAX + 1], bool *ret_actions);

/* Parses a checkout refund body (a JSON object of amount: a positive
 * integer in minor units, optional (absent: the whole payment, 0 here);
 * reference: a string of 1-128 bytes, optional; metadata: an object,
 * optional; any other member is not played and refused) for the payment
 * and the key. 0 and *ret filled; TG_EINVAL with *ret_code (static: the
 * error code, "amount_invalid", "request_invalid", ...). */
int stub_parse_checkout_refund(const char *body, size_t len, const char *key, const char *payment,
                               const char **ret_code, struct stub_refund *ret);

/* The checkout 202 body {"action_id","reference","_links":{"payment"}}. */
char *stub_checkout_accepted(const char *action_id, const struct stub_refund *req);

/* A checkout refund action of the actions list (a JSON object, malloc'd,
 * or NULL): approved, and response_code/summary ("10000"/"Approved", or
 * the failure code given and "Declined"). */
char *stub_checkout_action(const char *action_id, const struct stub_refund *req, bool approved,
                           const char *failure_code);

/* A checkout error body {"request_id","error_type"[,"error_codes":[code]]}
 * (malloc'd, or NULL); code may be NULL. */
char *stub_checkout_error(const char *error_type, const char *code);

/*
 * Parses a stripe POST /v1/refunds form body for the operation `key`
 * (the Idempotency-Key, already valid). 0 and *ret filled; TG_EINVAL with
 * *why (static) and *ret_param (the parameter at fault, static, may be
 * NULL) for a missing, unknown, repeated or bad parameter.
 */
int stub_parse_refund_form(const char *body, size_t len, const char *key, const char **why,
                           const char **ret_param, struct stub_refund *ret);

/* A stripe refund object (malloc'd JSON, or NULL): refund_id NULL or
 * "" gives "id": null; failure_reason NULL leaves it out. */
char *stub_stripe_refund(const char *refund_id, const struct stub_refund *req, const char *status,
                         const char *failure_reason);

/* A stripe error body (malloc'd JSON, or NULL); code may be NULL. */
char *stub_stripe_error(const char *type, const char *code, const char *message);

/*
 * The adyen shape (docs/providers/adyen.md), in shape_adyen.c: Adyen's
 * Checkout API refund, POST /v{N}/payments/{paymentPspReference}/refunds,
 * JSON {"merchantAccount" (required), "amount":{"value","currency"}
 * (required), "reference", "merchantRefundReason" (FRAUD, CUSTOMER
 * REQUEST, RETURN, DUPLICATE, OTHER)}, any other member refused (400
 * errorCode 702), keyed by Idempotency-Key (at most 64 characters),
 * answered 201 {"merchantAccount","paymentPspReference","pspReference",
 * "reference","status":"received","amount"}; errors {"status","errorCode",
 * "message","errorType"}; a key still running is 409 errorCode 704. No
 * lookup, no list: every GET is 404. The outcome goes out as a REFUND
 * notification (webhook.c).
 */
/* "/v<digits>/payments/{id}/refunds", the id 1-128 of [A-Za-z0-9_-] copied
 * out. 0 or TG_ENOTFOUND. */
int stub_adyen_path(const char *path, char ret_payment[STUB_FIELD_MAX + 1]);
/* Parses an adyen refund body for the payment and the key. 0 and *ret;
 * TG_EINVAL with *ret_status (400 or 422), *ret_code (errorCode) and
 * *ret_message (static). */
int stub_parse_adyen_refund(const char *body, size_t len, const char *key, const char *payment,
                            int *ret_status, const char **ret_code, const char **ret_message,
                            struct stub_refund *ret);
/* The 201 answer (malloc'd JSON, or NULL). */
char *stub_adyen_received(const char *psp_reference, const struct stub_refund *req);
/* An error body {"status","errorCode","message","errorType"} (malloc'd). */
char *stub_adyen_error(int status, const char *code, const char *message);

/*
 * The paypal shape (docs/providers/paypal.md), in shape_paypal.c: PayPal's
 * Payments v2 refund of a captured payment. POST /v1/oauth2/token (HTTP
 * Basic client id:secret, form grant_type=client_credentials) answers
 * {"scope","access_token","token_type":"Bearer","app_id","expires_in",
 * "nonce"}; POST /v2/payments/captures/{capture_id}/refund with a bearer
 * token, keyed by PayPal-Request-Id (optional: without it every request is
 * a new refund), JSON {"amount":{"value": a decimal string in the
 * currency's places,"currency_code"} (optional: absent, the whole capture,
 * amount 0 here),"invoice_id","custom_id","note_to_payer"} answers 201 with
 * the refund {"id","amount","invoice_id","custom_id","status":"COMPLETED"|
 * "PENDING"|"FAILED","status_details","links"}, a repeat of a key the
 * refund's latest status (200); GET /v2/payments/refunds/{refund_id} is the
 * only lookup. Errors {"name","message","debug_id","details":[{"field",
 * "issue","description"}],"links"}.
 */
#define STUB_PAYPAL_TOKEN_PATH "/v1/oauth2/token"
#define STUB_PAYPAL_TOKEN_MAX  64 /* an access token's bytes, with its NUL */
/* "/v2/payments/captures/{id}/refund" (*ret_query false) or
 * "/v2/payments/refunds/{id}" (true), the id 1-128 of [A-Za-z0-9_-] copied
 * out. 0 or TG_ENOTFOUND. */
int stub_paypal_path(const char *path, char ret_id[STUB_FIELD_MAX + 1], bool *ret_query);
/* Parses a paypal refund body for the capture and the key. 0 and *ret;
 * TG_EINVAL with *ret_status (400 or 422), *ret_issue (PayPal's issue
 * word), *ret_field (a JSON pointer, may be NULL) and *ret_message (all
 * static). The amount is kept in ISO 4217 minor units (core/currency.h);
 * PayPal's HUF, JPY and TWD take no decimals. */
int stub_parse_paypal_refund(const char *body, size_t len, const char *key, const char *capture,
                             int *ret_status, const char **ret_issue, const char **ret_field,
                             const char **ret_message, struct stub_refund *ret);
/* A refund object (malloc'd JSON, or NULL): status COMPLETED, PENDING
 * (status_details.reason ECHECK) or FAILED (reason NULL: none). */
char *stub_paypal_refund(const char *refund_id, const struct stub_refund *req, const char *status,
                         const char *reason);
/* An error body (malloc'd JSON, or NULL): the name and message of status,
 * one detail {field, issue, description} when issue is not NULL. */
char *stub_paypal_error(int status, const char *issue, const char *field, const char *description,
                        unsigned long long debug_id);
/* The token answer (malloc'd JSON, or NULL). */
char *stub_paypal_token(const char *token, long long expires_in);
/* True when authz is "Basic base64(id:secret)"; with id NULL any
 * well-formed Basic value. Constant-time in the secret. */
bool stub_paypal_basic_ok(const char *authz, const char *id, const char *secret);

#endif
