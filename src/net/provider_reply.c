/*
 * provider_reply — the provider's JSON response body, read with jansson into
 * the fixed-size fields of struct provider_reply.
 *
 * Invariants:
 *   - the body fields are reset before anything is read, so a reply never
 *     carries fields of an earlier body; on any decoding doubt the reply says
 *     "not JSON" and no field is trusted;
 *   - at most PROVIDER_REPLY_MAX_BODY bytes are ever given to the parser;
 *     jansson bounds nesting depth itself;
 *   - duplicate keys are refused (JSON_REJECT_DUPLICATES): with two "status"
 *     members we cannot know which one the provider meant;
 *   - strings are copied with classify_copy_field(): truncated to fit, never
 *     overflowed, cut at an embedded NUL (which jansson refuses anyway
 *     without JSON_ALLOW_NUL);
 *   - jansson types never leave this file.
 */
#include "net/provider_reply.h"

#include <jansson.h>

#include "core/tg_error.h"

static void reset_body(struct provider_reply *reply)
{
        reply->body_is_json = false;
        reply->error_code[0] = '\0';
        reply->status[0] = '\0';
        reply->refund_id[0] = '\0';
        reply->failure_code[0] = '\0';
}

/* Copies a string member; any other type leaves dst "". */
static void copy_string(char *dst, size_t dst_size, json_t *value)
{
        if (!json_is_string(value))
                return;
        classify_copy_field(dst, dst_size, json_string_value(value), json_string_length(value));
}

int provider_reply_parse_body(const char *body, size_t len, struct provider_reply *reply)
{
        if (!reply || (!body && len > 0))
                return TG_EINVAL;
        reset_body(reply);
        if (len > PROVIDER_REPLY_MAX_BODY)
                return TG_ERANGE;
        if (len == 0)
                return 0;

        json_error_t error;
        json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &error);
        if (!root)
                return 0;
        if (json_is_object(root)) {
                reply->body_is_json = true;
                copy_string(reply->status, sizeof(reply->status), json_object_get(root, "status"));
                copy_string(reply->refund_id, sizeof(reply->refund_id),
                            json_object_get(root, "refund_id"));
                copy_string(reply->failure_code, sizeof(reply->failure_code),
                            json_object_get(root, "failure_code"));
                json_t *err = json_object_get(root, "error");
                if (json_is_object(err))
                        copy_string(reply->error_code, sizeof(reply->error_code),
                                    json_object_get(err, "code"));
        }
        json_decref(root);
        return 0;
}
