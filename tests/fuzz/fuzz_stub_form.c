/*
 * Fuzz target for the stub's stripe shape: stub_parse_refund_form()
 * (a form-encoded POST /v1/refunds body, percent-decoded into bounded
 * buffers) and the bodies it answers with. Includes src/stub/shape.c as
 * fuzz_stub_request.c includes request.c (the stub is an executable, not a
 * library; shape.c needs libc, core/tg_error.h and jansson only).
 *
 * It checks the parser's promises: a success yields a payment id of 1-128
 * printable bytes, an amount in range and a currency of three capitals or
 * none; a failure says why and leaves the output untouched; a refund object
 * and an error made from whatever parsed are valid JSON.
 */
#include "../../src/stub/shape.c"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
        if (!ok)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct stub_refund out, before;
        const char *why = NULL, *param = NULL;
        char *text;
        int rc;

        memset(&out, 0x5a, sizeof(out));
        before = out;
        rc = stub_parse_refund_form((const char *)data, size, "op-1", &why, &param, &out);
        if (rc == 0) {
                size_t n = strnlen(out.payment_id, sizeof(out.payment_id));
                check(n > 0 && n <= STUB_FIELD_MAX);
                for (size_t i = 0; i < n; i++)
                        check(out.payment_id[i] > 0x20 && out.payment_id[i] < 0x7f);
                check(out.amount > 0 && out.amount <= STUB_AMOUNT_MAX);
                check(strlen(out.currency) == 0 || strlen(out.currency) == 3);
                check(strcmp(out.operation_id, "op-1") == 0);
                text = stub_stripe_refund("re_1", &out, "pending", NULL);
                if (text) {
                        json_t *o = json_loads(text, 0, NULL);
                        check(o != NULL);
                        json_decref(o);
                        free(text);
                }
        } else {
                check(rc == TG_EINVAL);
                check(why != NULL);
                check(memcmp(&out, &before, sizeof(out)) == 0);
                text = stub_stripe_error("invalid_request_error", param, why);
                if (text) {
                        json_t *o = json_loads(text, 0, NULL);
                        check(o != NULL);
                        json_decref(o);
                        free(text);
                }
        }
        return 0;
}
