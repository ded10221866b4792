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
 *                lookup by idempotency key.
 * Pure code over jansson: no I/O.
 */
#ifndef STUB_SHAPE_H
#define STUB_SHAPE_H

#include "request.h"

#include <stdbool.h>
#include <stddef.h>

enum stub_shape {
        STUB_SHAPE_PROVIDER_MD,
        STUB_SHAPE_STRIPE,
};

/* "provider-md" or "stripe". 0 or TG_EINVAL. */
int stub_shape_parse(const char *name, enum stub_shape *ret_shape);
const char *stub_shape_name(enum stub_shape shape);

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

#endif
