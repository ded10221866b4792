/*
 * Validation of what a client sends to the stub's contract endpoints
 * (shared/PROVIDER.md): the Idempotency-Key, the POST /v1/refunds body and the
 * GET /v1/refunds/{operation_id} path. Pure code: no I/O. The body is read
 * with jansson, which allocates while parsing and is freed before return;
 * the rest is libc only. The fuzz target includes request.c on its own and
 * gets jansson from the libraries it links.
 */
#ifndef STUB_REQUEST_H
#define STUB_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STUB_KEY_MAX      128 /* Idempotency-Key and operation_id, bytes */
#define STUB_FIELD_MAX    128 /* payment_id, bytes */
#define STUB_AMOUNT_MAX   1000000000000LL
#define STUB_QUERY_PREFIX "/v1/refunds/"

/*
 * One parsed refund request. A plain value: every string is NUL-terminated
 * and already validated when stub_parse_refund_request() returns 0.
 */
struct stub_refund {
        char operation_id[STUB_KEY_MAX + 1];
        char payment_id[STUB_FIELD_MAX + 1];
        int64_t amount;
        char currency[4];
        char reference[STUB_FIELD_MAX + 1]; /* checkout: the refund's reference ("": none) */
        char merchant[STUB_FIELD_MAX + 1];  /* adyen: the merchantAccount sent */
        char custom_id[STUB_FIELD_MAX + 1]; /* paypal: the custom_id sent ("": none) */
};

/* True when key[0..len) is 1..128 chars of [A-Za-z0-9._:-]. */
bool stub_key_valid(const char *key, size_t len);

/*
 * Parses a POST /v1/refunds body of len bytes (need not be NUL-terminated;
 * the caller keeps it, nothing is retained). Returns 0 and fills *ret;
 * TG_EPARSE when the body is not one JSON object (answer 400): bad syntax or
 * UTF-8, a raw NUL byte, trailing data, a member name twice at any depth;
 * TG_EINVAL when it is JSON but a field is missing, of the wrong type or out
 * of range, amount being a JSON integer only (answer 422). TG_ENOMEM when
 * jansson reports running out of memory (it may also report that as a syntax
 * error, so TG_EPARSE). On failure *why (if why is not NULL) is set to a
 * static text naming the problem and *ret is untouched.
 */
int stub_parse_refund_request(const char *body, size_t len, const char **why,
                              struct stub_refund *ret);

/*
 * Splits a request path (query string already removed by the HTTP layer).
 * Returns 0 and copies the operation id for "/v1/refunds/{operation_id}";
 * TG_ENOTFOUND for any other path; TG_EINVAL when the id is not a valid key.
 */
int stub_parse_query_path(const char *path, char ret_operation_id[STUB_KEY_MAX + 1]);

#endif
