/*
 * template — the provider mapping's text templates, pure: a refund POST's
 * body fields, the request paths and the canonical string of a signed
 * request are all written as text with named fields in braces,
 *
 *   /v1/payments/{payment_id}/refunds
 *   {method}\n{path}\n{timestamp}\n{idempotency_key}\n{body_sha256}
 *
 * parsed once at start (an unknown field is an error naming it) and expanded
 * per call. Escapes: "{{" is "{", "}}" is "}", "\n" is a new line and "\\"
 * a backslash; anything else after a backslash, or a lone "}", is an error.
 *
 * The fields (template_field_name() spells them):
 *   refund:  operation_id, payment_id, amount (decimal minor units), currency,
 *            amount_decimal (the amount as a decimal string in the
 *            currency's ISO 4217 exponent: 1037 USD "10.37", JPY "1037";
 *            core/currency.h),
 *            reason, metadata.KEY (one value of the refund's metadata, "" when
 *            absent), metadata (the whole object: only as the whole value of
 *            a body field), refund_id (the provider's id, once known)
 *   signing: method, path (with its query), timestamp, idempotency_key,
 *            body_sha256 (hex), request_id
 * Each use says which fields it allows (TPL_* sets below).
 */
#ifndef TG_TEMPLATE_H
#define TG_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/encode.h"
#include "core/refund_validate.h"

enum tpl_field {
        TPL_OPERATION_ID,
        TPL_PAYMENT_ID,
        TPL_AMOUNT,
        TPL_CURRENCY,
        TPL_REASON,
        TPL_METADATA,     /* the whole object */
        TPL_METADATA_KEY, /* {metadata.KEY} */
        TPL_REFUND_ID,
        TPL_METHOD,
        TPL_PATH,
        TPL_TIMESTAMP,
        TPL_IDEMPOTENCY_KEY,
        TPL_BODY_SHA256,
        TPL_REQUEST_ID,
        TPL_AMOUNT_DECIMAL, /* {amount_decimal}: "10.37" for 1037 USD */
};
#define TPL_FIELD_COUNT 15

#define TPL_SET(f) (1u << (f))
/* Fields of the refund as accepted at intake. */
#define TPL_REFUND_FIELDS                                                                          \
        (TPL_SET(TPL_OPERATION_ID) | TPL_SET(TPL_PAYMENT_ID) | TPL_SET(TPL_AMOUNT) |               \
         TPL_SET(TPL_CURRENCY) | TPL_SET(TPL_REASON) | TPL_SET(TPL_METADATA_KEY) |                 \
         TPL_SET(TPL_AMOUNT_DECIMAL))
#define TPL_BODY_FIELDS (TPL_REFUND_FIELDS | TPL_SET(TPL_METADATA))
#define TPL_PATH_FIELDS (TPL_REFUND_FIELDS | TPL_SET(TPL_REFUND_ID))
#define TPL_SIGNING_FIELDS                                                                         \
        (TPL_SET(TPL_METHOD) | TPL_SET(TPL_PATH) | TPL_SET(TPL_TIMESTAMP) |                        \
         TPL_SET(TPL_IDEMPOTENCY_KEY) | TPL_SET(TPL_BODY_SHA256) | TPL_SET(TPL_REQUEST_ID))

#define TEMPLATE_TEXT_MAX  256 /* bytes of a template as written */
#define TEMPLATE_PARTS_MAX 24

/* A parsed template. Plain data (copyable); members are read through the
 * functions below. */
struct template
{
        unsigned nparts;
        struct template_part {
                uint8_t field;     /* enum tpl_field; TPL_FIELD_COUNT for literal text */
                uint16_t off, len; /* literal text, or the metadata key, in text[] */
        } parts[TEMPLATE_PARTS_MAX];
        char text[TEMPLATE_TEXT_MAX + 1];
};

/* Why a template was refused: a one-line message for the config error. */
struct template_error {
        char message[256];
};

/* Parses text allowing only the fields in `allowed` (a TPL_SET mask). 0, or
 * TG_EPARSE with err filled (err may be NULL) and *ret untouched. An empty
 * text is a valid template (no parts). {metadata} must be the whole
 * template. */
int template_parse(const char *text, unsigned allowed, struct template *ret,
                   struct template_error *err);

/* What the fields are worth for one expansion. text[f] NULL: the field has
 * no value here (expanding it is TG_ENOTFOUND); "" is a value. */
struct template_values {
        const char *text[TPL_FIELD_COUNT];
        const struct refund_metadata *metadata; /* for {metadata.KEY}; NULL: none */
};

enum template_escape {
        TEMPLATE_RAW,  /* values as they are */
        TEMPLATE_PATH, /* values percent-encoded as a URL path segment; literals as written */
};

/* Appends the expansion to out. 0; TG_ENOTFOUND (a field without a value);
 * TG_EINVAL ({metadata}, which is not text); TG_EFULL (out overflowed). */
int template_expand(const struct template *t, const struct template_values *values,
                    enum template_escape escape, struct tg_strbuf *out);

/* True when the template is exactly one field; *ret_field (may be NULL) is
 * then that field. */
bool template_single(const struct template *t, enum tpl_field *ret_field);

/* True when the template uses field f. */
bool template_uses(const struct template *t, enum tpl_field f);

/* The value of {metadata.KEY} for a single-field template of that kind
 * ("" when the refund has no such key); NULL for any other template. */
const char *template_metadata_value(const struct template *t, const struct template_values *values);

/* "operation_id", ... as written in braces ("metadata.KEY" for
 * TPL_METADATA_KEY); "?" out of range. */
const char *template_field_name(enum tpl_field f);

#endif
