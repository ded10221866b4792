/*
 * provider_reply — reads the provider's response body into the body half of
 * struct provider_reply (core/classify.h): whether it is a JSON object, and
 * its .error.code, .status and .refund_id. The transport fills transport and
 * http_status itself; classify() then decides.
 *
 * The body is hostile input. It is bounded (PROVIDER_REPLY_MAX_BODY), parsed
 * strictly (duplicate keys, trailing bytes, NUL bytes and invalid UTF-8 make
 * it "not JSON"), and a field of the wrong type is left "" as if absent. A
 * body that is not a readable JSON object is exactly what classify() treats
 * as malformed: unknown for a POST, no_answer for a query.
 */
#ifndef TG_PROVIDER_REPLY_H
#define TG_PROVIDER_REPLY_H

#include <stddef.h>

#include "core/classify.h"

/* Bodies longer than this are not parsed (the contract's bodies are a few
 * hundred bytes). */
#define PROVIDER_REPLY_MAX_BODY (64 * 1024)

/* Fills reply->body_is_json, error_code, status and refund_id from the len
 * bytes at body (not NUL-terminated, may contain NUL; NULL only with len 0).
 * Leaves transport and http_status alone. The body is only read during the
 * call; nothing is kept.
 *
 * Returns 0 when the body was read, whether or not it turned out to be a JSON
 * object; TG_ERANGE when len > PROVIDER_REPLY_MAX_BODY, in which case the body
 * fields are still set (to "not JSON") and the reply is usable; TG_EINVAL for
 * a NULL reply, or a NULL body with len > 0 (reply untouched). */
int provider_reply_parse_body(const char *body, size_t len, struct provider_reply *reply);

#endif
