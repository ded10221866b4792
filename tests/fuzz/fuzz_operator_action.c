/*
 * Fuzz target: bytes as the body of POST /v1/manual/{id}/resend (first byte
 * even) or /resolve (first byte odd), through api_parse_operator_action,
 * without a store or a server. Checks what must hold for every input: an
 * accepted action has an operator and a reason of 1 to API_TEXT_MAX bytes
 * without control characters, NUL-terminated inside their buffers, and an
 * outcome only for resolve; a refusal is a 400/422 with a code, a valid JSON
 * error body, and leaves the caller's action untouched.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/api_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t size)
{
        size_t len = strnlen(s, size);

        if (len == 0 || len > API_TEXT_MAX || len == size)
                abort();
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c < 0x20 || c == 0x7f)
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct operator_action a, before;
        struct api_error err;
        bool resolve;
        char *body = NULL;
        size_t len = 0;

        if (size == 0)
                return 0;
        resolve = data[0] & 1;
        memset(&a, 0xa5, sizeof(a));
        before = a;
        memset(&err, 0, sizeof(err));
        if (api_parse_operator_action((const char *)data + 1, size - 1, resolve, false, &a, &err) ==
            0) {
                check_text(a.operator_name, sizeof(a.operator_name));
                check_text(a.reason, sizeof(a.reason));
                if (resolve && a.outcome != OP_SUCCEEDED && a.outcome != OP_REJECTED)
                        abort();
                if (!resolve && a.outcome != 0)
                        abort();
                return 0;
        }
        if (memcmp(&a, &before, sizeof(a)) != 0)
                abort();
        if ((err.status != 400 && err.status != 422) || err.code[0] == '\0')
                abort();
        if (api_error_json(&err, "fuzz", &body, &len) != 0)
                abort();
        json_t *back = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
        if (!back)
                abort();
        json_decref(back);
        free(body);
        return 0;
}
