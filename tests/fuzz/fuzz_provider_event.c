/*
 * Fuzz target: bytes as the body of POST /v1/provider-events (after its
 * signature was accepted), through api_parse_provider_event, without a store
 * or a server. Checks what must hold for every input: an accepted event has
 * an operation id refund_validate accepts, an outcome of succeeded or
 * rejected, and a refund id of printable ASCII inside its buffer; a refusal
 * is a 400/422 with a code, a valid JSON error body, and leaves the caller's
 * event untouched.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/api_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct provider_event ev, before;
        struct api_error err;
        char *body = NULL;
        size_t len = 0, n;

        memset(&ev, 0xa5, sizeof(ev));
        before = ev;
        memset(&err, 0, sizeof(err));
        if (api_parse_provider_event((const char *)data, size, &ev, &err) == 0) {
                n = strnlen(ev.operation_id, sizeof(ev.operation_id));
                if (n == sizeof(ev.operation_id) ||
                    refund_validate_operation_id(ev.operation_id, n, NULL) != 0)
                        abort();
                if (ev.outcome != OP_SUCCEEDED && ev.outcome != OP_REJECTED)
                        abort();
                n = strnlen(ev.refund_id, sizeof(ev.refund_id));
                if (n == sizeof(ev.refund_id))
                        abort();
                for (size_t i = 0; i < n; i++)
                        if ((unsigned char)ev.refund_id[i] <= 0x20 ||
                            (unsigned char)ev.refund_id[i] >= 0x7f)
                                abort();
                return 0;
        }
        if (memcmp(&ev, &before, sizeof(ev)) != 0)
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
