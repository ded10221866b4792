/*
 * Fuzz target: bytes as a POST /v1/refunds body, through the intake's JSON
 * parse and validation (api_parse_refund), and the same bytes as a POST
 * /v1/refunds:batch body (api_parse_batch), without a store or a server.
 * Checks what must hold for every input: an accepted request satisfies
 * refund_validate, and a refusal is a 400/422 with a code and a valid JSON
 * error body; a batch holds 1 to API_BATCH_MAX items, each either such a
 * request or such a refusal (the seeds "batch-*" start the batch side).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/api_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_valid(const struct refund_request *req)
{
        struct refund_fields f = {
            .operation_id = req->operation_id,
            .operation_id_len = strlen(req->operation_id),
            .payment_id = req->payment_id,
            .payment_id_len = strlen(req->payment_id),
            .amount = req->amount,
            .currency = req->currency,
            .currency_len = strlen(req->currency),
        };
        if (refund_validate(&f, NULL) != 0)
                abort();
}

static void check_refusal(const struct api_error *err)
{
        char *body = NULL;
        size_t len = 0;

        if ((err->status != 400 && err->status != 422) || err->code[0] == '\0')
                abort();
        if (api_error_json(err, "fuzz", &body, &len) != 0)
                abort();
        json_t *back = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
        if (!back)
                abort();
        json_decref(back);
        free(body);
}

/* static: API_BATCH_MAX items are megabytes, not for the stack */
static struct api_batch_item items[API_BATCH_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct refund_request req;
        struct api_error err;
        size_t n = 0;

        memset(&err, 0, sizeof(err));
        if (api_parse_refund((const char *)data, size, 1700000000000LL, &req, &err) == 0)
                check_valid(&req);
        else
                check_refusal(&err);

        memset(&err, 0, sizeof(err));
        if (api_parse_batch((const char *)data, size, 1700000000000LL, items, &n, &err) != 0) {
                check_refusal(&err);
                return 0;
        }
        if (n == 0 || n > API_BATCH_MAX)
                abort();
        for (size_t i = 0; i < n; i++) {
                if (items[i].ok)
                        check_valid(&items[i].req);
                else
                        check_refusal(&items[i].err);
        }
        return 0;
}
