/*
 * Fuzz target for the stub's input validation: stub_parse_refund_request()
 * (the POST /v1/refunds body, read by jansson), stub_key_valid()
 * and stub_parse_query_path(). The input is the body; the same bytes, NUL-
 * terminated, are also tried as an Idempotency-Key and as a request path.
 *
 * Why the #include of a .c file: tests/fuzz/CMakeLists.txt links fuzz
 * targets with tg_store tg_net tg_core only, and the stub is an executable,
 * not a library. src/stub/request.c depends on libc, core/tg_error.h and
 * jansson, which tg_store links PUBLIC, so including it here compiles
 * exactly the code the stub runs without any CMake change. jansson itself
 * is the system build, not instrumented: coverage guides the fuzzer through
 * our checks and the glue around json_loadb(), while jansson's parser is
 * only exercised (sanitizers still see how we use what it returns).
 *
 * Beyond "no crash, no sanitizer report", it checks the parser's promises:
 * a success yields fields that pass the same validation again and came
 * from a body without a raw NUL byte, and a failure leaves the output
 * untouched.
 */
#include "../../src/stub/request.c"

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
        const char *why = NULL;
        char op[STUB_KEY_MAX + 1];
        char *text;
        int rc;

        memset(&out, 0x5a, sizeof(out));
        before = out;
        rc = stub_parse_refund_request((const char *)data, size, &why, &out);
        if (rc == 0) {
                size_t n = strnlen(out.operation_id, sizeof(out.operation_id));
                check(n < sizeof(out.operation_id) && stub_key_valid(out.operation_id, n));
                check(strnlen(out.payment_id, sizeof(out.payment_id)) > 0);
                check(strnlen(out.payment_id, sizeof(out.payment_id)) <= STUB_FIELD_MAX);
                check(out.amount > 0 && out.amount <= STUB_AMOUNT_MAX);
                check(strlen(out.currency) == 3);
                /* Valid JSON never holds a raw NUL (jansson skips some). */
                check(memchr(data, '\0', size) == NULL);
        } else {
                check(rc == TG_EPARSE || rc == TG_EINVAL || rc == TG_ENOMEM);
                check(why != NULL);
                check(memcmp(&out, &before, sizeof(out)) == 0);
        }

        text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        (void)stub_key_valid(text, size);
        rc = stub_parse_query_path(text, op);
        if (rc == 0)
                check(stub_key_valid(op, strlen(op)));
        else
                check(rc == TG_ENOTFOUND || rc == TG_EINVAL);
        free(text);
        return 0;
}
