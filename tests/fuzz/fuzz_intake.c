/*
 * Fuzz target: bytes as a POST /v1/refunds body, through the intake's JSON
 * parse and validation (api_parse_refund), without a store or a server.
 * Checks what must hold for every input: an accepted request satisfies
 * refund_validate, and a refusal is a 400/422 with a code and a valid JSON
 * error body.
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
        struct refund_request req;
        struct api_error err;
        char *body = NULL;
        size_t len = 0;

        memset(&err, 0, sizeof(err));
        if (api_parse_refund((const char *)data, size, 1700000000000LL, &req, &err) == 0) {
                struct refund_fields f = {
                    .operation_id = req.operation_id,
                    .operation_id_len = strlen(req.operation_id),
                    .payment_id = req.payment_id,
                    .payment_id_len = strlen(req.payment_id),
                    .amount = req.amount,
                    .currency = req.currency,
                    .currency_len = strlen(req.currency),
                };
                if (refund_validate(&f, NULL) != 0)
                        abort();
                return 0;
        }
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
