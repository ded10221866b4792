/*
 * Fuzz target: bytes as the body of POST /v1/accounts/{account} (an
 * operator's rate, cap or pause of an account), through api_parse_account,
 * without a store or a server. Checks what must hold for every input: an
 * accepted change sets at least one control; a rate set is 0 (cleared) or
 * in (0, 1e9]; a cap set is 0 (cleared) or 1..1e9; a reason of 1 to 200
 * bytes and an operator of at most 200, NUL-terminated inside their
 * buffers; a refusal is a 400/422 with a code, a valid JSON error body, and
 * leaves the caller's request untouched.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/api_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t text_len(const char *s, size_t size)
{
        size_t len = strnlen(s, size);

        if (len == size)
                abort(); /* not terminated inside its buffer */
        return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct account_request a, before;
        struct api_error err;
        char *body = NULL;
        size_t len = 0;

        memset(&a, 0xa5, sizeof(a));
        before = a;
        memset(&err, 0, sizeof(err));
        if (api_parse_account((const char *)data, size, &a, &err) == 0) {
                if (!a.set_rate && !a.set_cap && !a.set_paused)
                        abort();
                if (a.set_rate && a.starts_per_second != 0 &&
                    (!isfinite(a.starts_per_second) || a.starts_per_second <= 0 ||
                     a.starts_per_second > 1e9))
                        abort();
                if (!a.set_rate && a.starts_per_second != 0)
                        abort();
                if (a.set_cap && a.max_in_flight > 1000000000u)
                        abort();
                if (!a.set_cap && a.max_in_flight != 0)
                        abort();
                if (text_len(a.reason, sizeof(a.reason)) == 0)
                        abort();
                text_len(a.operator_name, sizeof(a.operator_name));
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
