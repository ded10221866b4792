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
 *   reason        optional: 0-200 bytes of UTF-8 text without control
 *                 characters (it may reach the provider's body);
 *   metadata      optional: at most 10 pairs; a key is 1-40 bytes of
 *                 [A-Za-z0-9_.-], a value 0-200 bytes of UTF-8 text without
 *                 control characters; keys are unique. Stored as one JSON
 *                 object with its keys sorted, at most 1024 bytes.
 */
#ifndef TG_REFUND_VALIDATE_H
#define TG_REFUND_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REFUND_OPERATION_ID_MAX 128
#define REFUND_PAYMENT_ID_MAX   128
#define REFUND_CURRENCY_LEN     3
#define REFUND_REASON_MAX       200
#define REFUND_METADATA_PAIRS   10
#define REFUND_METADATA_KEY_MAX 40
#define REFUND_METADATA_VAL_MAX 200
#define REFUND_METADATA_TEXT    1024 /* the stored JSON object, bytes */

/* A refund's metadata as pairs, sorted by key, keys unique. Plain data. */
struct refund_metadata {
        unsigned n;
        struct refund_metadata_pair {
                char key[REFUND_METADATA_KEY_MAX + 1];
                char value[REFUND_METADATA_VAL_MAX + 1];
        } pairs[REFUND_METADATA_PAIRS];
};

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

int refund_validate_reason(const char *s, size_t len, struct refund_problem *problem);
int refund_validate_metadata_key(const char *s, size_t len, struct refund_problem *problem);
int refund_validate_metadata_value(const char *s, size_t len, struct refund_problem *problem);

/* Adds one pair, keeping the pairs sorted. 0, or TG_EINVAL (a bad key or
 * value, a key already there, more than REFUND_METADATA_PAIRS) with
 * *problem filled. */
int refund_metadata_add(struct refund_metadata *md, const char *key, size_t key_len,
                        const char *value, size_t value_len, struct refund_problem *problem);

/* The value of key, "" when there is no such key. */
const char *refund_metadata_get(const struct refund_metadata *md, const char *key);

/* Checks every field in the order operation_id, payment_id, amount,
 * currency and reports the first problem. 0 or TG_EINVAL. */
/* A provider account's name: [a-z0-9_-]{1,TG_ACCOUNT_NAME_MAX} (32), so
 * that it may name a lock file, a database lock and a metric label as it
 * is. */
bool refund_account_name_ok(const char *name);

int refund_validate(const struct refund_fields *fields, struct refund_problem *problem);

#endif
