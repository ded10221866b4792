/*
 * api_parse — the JSON side of the intake (see the header for the rules).
 * Every string a client sends is treated as hostile: lengths come from
 * jansson (never strlen on client data), and a client-supplied name echoed
 * in an error is cut at a UTF-8 boundary so the error body stays valid JSON.
 */
#include "app/api_parse.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"

static void copy_text(char *dst, size_t size, const char *src, size_t len)
{
        if (len >= size) {
                len = size - 1;
                /* Do not cut a UTF-8 sequence in half. */
                while (len > 0 && ((unsigned char)src[len] & 0xc0) == 0x80)
                        len--;
        }
        memcpy(dst, src, len);
        dst[len] = '\0';
}

void api_error_set(struct api_error *err, int status, const char *code, const char *field,
                   const char *message)
{
        memset(err, 0, sizeof(*err));
        err->status = status;
        copy_text(err->code, sizeof(err->code), code, strlen(code));
        if (field)
                copy_text(err->field, sizeof(err->field), field, strlen(field));
        copy_text(err->message, sizeof(err->message), message, strlen(message));
        err->retryable = false;
}

static int invalid(struct api_error *err, int status, const char *code, const char *field,
                   const char *message)
{
        api_error_set(err, status, code, field, message);
        return TG_EINVAL;
}

static const char *const known_fields[] = {"operation_id", "payment_id", "amount", "currency"};

/* A string member, with its length. */
static int get_string(json_t *obj, const char *name, const char **ret_s, size_t *ret_len,
                      struct api_error *err)
{
        json_t *v = json_object_get(obj, name);

        if (!v)
                return invalid(err, 422, "invalid_field", name, "is required");
        if (!json_is_string(v))
                return invalid(err, 422, "invalid_field", name, "must be a string");
        *ret_s = json_string_value(v);
        *ret_len = json_string_length(v);
        return 0;
}

int api_parse_refund(const char *body, size_t len, struct refund_request *ret_req,
                     struct api_error *err)
{
        struct refund_fields f;
        struct refund_problem problem;
        struct refund_request req;
        json_error_t jerr;
        const char *key;
        json_t *root, *value;
        int r = TG_EINVAL;

        if (!body || len == 0)
                return invalid(err, 400, "invalid_json", NULL, "the body must be a JSON object");
        root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                if (json_error_code(&jerr) == json_error_numeric_overflow)
                        return invalid(err, 422, "invalid_field", NULL, "a number is out of range");
                if (json_error_code(&jerr) == json_error_duplicate_key)
                        return invalid(err, 400, "invalid_json", NULL,
                                       "the body has a duplicate key");
                return invalid(err, 400, "invalid_json", NULL, "the body is not valid JSON");
        }
        if (!json_is_object(root)) {
                invalid(err, 400, "invalid_json", NULL, "the body must be a JSON object");
                goto out;
        }
        json_object_foreach(root, key, value)
        {
                bool known = false;
                (void)value;
                for (size_t i = 0; i < sizeof(known_fields) / sizeof(known_fields[0]); i++)
                        known = known || strcmp(key, known_fields[i]) == 0;
                if (!known) {
                        /* jansson keys are valid UTF-8 without NUL bytes. */
                        invalid(err, 422, "unknown_field", NULL,
                                "this field is not part of a refund request");
                        copy_text(err->field, sizeof(err->field), key, strlen(key));
                        goto out;
                }
        }

        memset(&f, 0, sizeof(f));
        if (get_string(root, "operation_id", &f.operation_id, &f.operation_id_len, err) < 0 ||
            get_string(root, "payment_id", &f.payment_id, &f.payment_id_len, err) < 0)
                goto out;
        value = json_object_get(root, "amount");
        if (!value) {
                invalid(err, 422, "invalid_field", "amount", "is required");
                goto out;
        }
        /* jansson keeps integers and reals apart: 100.0 and 1e2 are reals. */
        if (!json_is_integer(value)) {
                invalid(err, 422, "invalid_field", "amount",
                        "must be an integer in minor units (no fraction, no exponent)");
                goto out;
        }
        f.amount = (int64_t)json_integer_value(value);
        if (get_string(root, "currency", &f.currency, &f.currency_len, err) < 0)
                goto out;
        if (refund_validate(&f, &problem) < 0) {
                invalid(err, 422, "invalid_field", problem.field, problem.message);
                goto out;
        }

        /* Lengths were checked by refund_validate against these buffers. */
        memset(&req, 0, sizeof(req));
        memcpy(req.operation_id, f.operation_id, f.operation_id_len);
        memcpy(req.payment_id, f.payment_id, f.payment_id_len);
        req.amount = f.amount;
        memcpy(req.currency, f.currency, f.currency_len);
        *ret_req = req;
        r = 0;
out:
        json_decref(root);
        return r;
}

int api_error_json(const struct api_error *err, const char *request_id, char **ret_body,
                   size_t *ret_len)
{
        json_t *root;
        char *text;

        root =
            json_pack("{s:{s:s, s:s, s:o, s:b}, s:s?}", "error", "code", err->code, "message",
                      err->message, "field", err->field[0] ? json_string(err->field) : json_null(),
                      "retryable", err->retryable, "request_id", request_id);
        if (!root)
                return TG_ENOMEM;
        text = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        if (!text)
                return TG_ENOMEM;
        *ret_body = text;
        *ret_len = strlen(text);
        return 0;
}
