/*
 * refund_validate — the shape rules of a refund request, pure. The intake
 * (src/daemon/api) parses JSON into plain fields and asks this module whether
 * they make a refund request; the store never sees a request that failed
 * here. Strings are passed with their length so that an embedded NUL byte is
 * caught instead of silently truncating the value.
 *
 * Rules (each a promise to clients, documented in the README):
 *   operation_id  1-128 bytes of [A-Za-z0-9._:-], and not "." or ".." (it is
 *                 the idempotency key and appears in status URLs, where dot
 *                 segments would be rewritten by clients and proxies);
 *   payment_id    1-128 bytes of printable ASCII without spaces (0x21-0x7E);
 *   amount        an integer in minor units, 1..INT64_MAX (the JSON layer
 *                 rejects floats, exponent forms and strings before this);
 *   currency      ISO 4217 shape: exactly 3 uppercase ASCII letters. Whether
 *                 the provider supports the currency is the provider's call.
 */
#ifndef TG_REFUND_VALIDATE_H
#define TG_REFUND_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#define REFUND_OPERATION_ID_MAX 128
#define REFUND_PAYMENT_ID_MAX   128
#define REFUND_CURRENCY_LEN     3

/* The fields of one request; the strings need not be NUL-terminated and are
 * borrowed only for the duration of the call. */
struct refund_fields {
        const char *operation_id;
        size_t operation_id_len;
        const char *payment_id;
        size_t payment_id_len;
        int64_t amount;
        const char *currency;
        size_t currency_len;
};

/* Why a request was refused: the JSON name of the field and a one-line
 * message. Both point to static strings. */
struct refund_problem {
        const char *field;
        const char *message;
};

/* Checks one field. 0 when valid; TG_EINVAL otherwise, with *problem filled
 * (problem may be NULL). Unlike ret_* parameters, problem is written only on
 * failure. */
int refund_validate_operation_id(const char *s, size_t len, struct refund_problem *problem);
int refund_validate_payment_id(const char *s, size_t len, struct refund_problem *problem);
int refund_validate_amount(int64_t amount, struct refund_problem *problem);
int refund_validate_currency(const char *s, size_t len, struct refund_problem *problem);

/* Checks every field in the order operation_id, payment_id, amount,
 * currency and reports the first problem. 0 or TG_EINVAL. */
int refund_validate(const struct refund_fields *fields, struct refund_problem *problem);

#endif
