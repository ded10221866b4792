/*
 * Unit tests of refund_validate: every rule of a refund request's shape, at
 * and just past each edge, and embedded NUL bytes that a C-string check would
 * miss.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"

#define S(lit) lit, sizeof(lit) - 1

static void test_operation_id(void **state)
{
        (void)state;
        struct refund_problem p = {0};
        char buf[130];

        assert_int_equal(refund_validate_operation_id(S("op-1"), &p), 0);
        assert_int_equal(refund_validate_operation_id(S("A.b_c:d-9"), &p), 0);
        assert_int_equal(refund_validate_operation_id(S("..."), &p), 0);

        memset(buf, 'a', sizeof(buf));
        assert_int_equal(refund_validate_operation_id(buf, 128, &p), 0);
        assert_int_equal(refund_validate_operation_id(buf, 129, &p), TG_EINVAL);
        assert_string_equal(p.field, "operation_id");

        assert_int_equal(refund_validate_operation_id(S(""), &p), TG_EINVAL);
        assert_int_equal(refund_validate_operation_id(NULL, 3, &p), TG_EINVAL);
        assert_int_equal(refund_validate_operation_id(S("."), &p), TG_EINVAL);
        assert_int_equal(refund_validate_operation_id(S(".."), &p), TG_EINVAL);
        assert_int_equal(refund_validate_operation_id(S("../x"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_operation_id(S("a%2Fb"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_operation_id(S("a b"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_operation_id(S("a\0b"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_operation_id(S("caf\xc3\xa9"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_operation_id(S("a/b"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_operation_id(S("a?b"), &p), TG_EINVAL);
        /* NULL problem is allowed */
        assert_int_equal(refund_validate_operation_id(S("a b"), NULL), TG_EINVAL);
}

static void test_payment_id(void **state)
{
        (void)state;
        struct refund_problem p = {0};
        char buf[130];

        assert_int_equal(refund_validate_payment_id(S("pay_123/x#y"), &p), 0);
        assert_int_equal(refund_validate_payment_id(S("!~"), &p), 0);
        memset(buf, 'p', sizeof(buf));
        assert_int_equal(refund_validate_payment_id(buf, 128, &p), 0);
        assert_int_equal(refund_validate_payment_id(buf, 129, &p), TG_EINVAL);
        assert_string_equal(p.field, "payment_id");
        assert_int_equal(refund_validate_payment_id(S(""), &p), TG_EINVAL);
        assert_int_equal(refund_validate_payment_id(S("a b"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_payment_id(S("a\tb"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_payment_id(S("a\0b"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_payment_id(S("a\x7f"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_payment_id(S("\xff"), &p), TG_EINVAL);
}

static void test_amount(void **state)
{
        (void)state;
        struct refund_problem p = {0};

        assert_int_equal(refund_validate_amount(1, &p), 0);
        assert_int_equal(refund_validate_amount(INT64_MAX, &p), 0);
        assert_int_equal(refund_validate_amount(0, &p), TG_EINVAL);
        assert_string_equal(p.field, "amount");
        assert_int_equal(refund_validate_amount(-1, &p), TG_EINVAL);
        assert_int_equal(refund_validate_amount(INT64_MIN, &p), TG_EINVAL);
}

static void test_currency(void **state)
{
        (void)state;
        struct refund_problem p = {0};

        assert_int_equal(refund_validate_currency(S("EUR"), &p), 0);
        assert_int_equal(refund_validate_currency(S("XXX"), &p), 0);
        assert_int_equal(refund_validate_currency(S("eur"), &p), TG_EINVAL);
        assert_string_equal(p.field, "currency");
        assert_int_equal(refund_validate_currency(S("EU"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_currency(S("EURO"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_currency(S("E1R"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_currency(S("EU\0"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_currency(S(""), &p), TG_EINVAL);
        assert_int_equal(refund_validate_currency(NULL, 3, &p), TG_EINVAL);
}

static void test_whole_request(void **state)
{
        (void)state;
        struct refund_problem p = {0};
        struct refund_fields f = {
            .operation_id = "op-1",
            .operation_id_len = 4,
            .payment_id = "pay-1",
            .payment_id_len = 5,
            .amount = 1250,
            .currency = "EUR",
            .currency_len = 3,
        };

        assert_int_equal(refund_validate(&f, &p), 0);

        /* the first bad field is reported */
        f.payment_id_len = 0;
        f.amount = 0;
        assert_int_equal(refund_validate(&f, &p), TG_EINVAL);
        assert_string_equal(p.field, "payment_id");
        f.payment_id_len = 5;
        assert_int_equal(refund_validate(&f, &p), TG_EINVAL);
        assert_string_equal(p.field, "amount");
        assert_non_null(p.message);
        f.amount = 5;
        f.currency = "usd";
        assert_int_equal(refund_validate(&f, &p), TG_EINVAL);
        assert_string_equal(p.field, "currency");
        assert_int_equal(refund_validate(NULL, &p), TG_EINVAL);
}

static void test_reason_and_metadata(void **state)
{
        (void)state;
        struct refund_problem p = {0};
        struct refund_metadata md = {0};
        char buf[210];

        assert_int_equal(refund_validate_reason(S(""), &p), 0);
        assert_int_equal(refund_validate_reason(S("requested by customer \xc3\xa9"), &p), 0);
        memset(buf, 'r', sizeof(buf));
        assert_int_equal(refund_validate_reason(buf, 200, &p), 0);
        assert_int_equal(refund_validate_reason(buf, 201, &p), TG_EINVAL);
        assert_string_equal(p.field, "reason");
        assert_int_equal(refund_validate_reason(S("a\nb"), &p), TG_EINVAL);
        assert_int_equal(refund_validate_reason("a\0b", 3, &p), TG_EINVAL);
        assert_int_equal(refund_validate_reason(S("\xff"), &p), TG_EINVAL);

        assert_int_equal(refund_metadata_add(&md, S("order"), S("o-1"), &p), 0);
        assert_int_equal(refund_metadata_add(&md, S("desk"), S(""), &p), 0);
        assert_int_equal(refund_metadata_add(&md, S("ord"), S("x"), &p), 0);
        assert_int_equal(md.n, 3);
        assert_string_equal(md.pairs[0].key, "desk"); /* kept sorted */
        assert_string_equal(md.pairs[1].key, "ord");
        assert_string_equal(md.pairs[2].key, "order");
        assert_string_equal(refund_metadata_get(&md, "order"), "o-1");
        assert_string_equal(refund_metadata_get(&md, "none"), "");
        assert_int_equal(refund_metadata_add(&md, S("order"), S("again"), &p), TG_EINVAL);
        assert_string_equal(p.field, "metadata");
        assert_int_equal(refund_metadata_add(&md, S("a b"), S("x"), &p), TG_EINVAL);
        assert_int_equal(refund_metadata_add(&md, S(""), S("x"), &p), TG_EINVAL);
        memset(buf, 'k', sizeof(buf));
        assert_int_equal(refund_metadata_add(&md, buf, 40, S("x"), &p), 0);
        assert_int_equal(refund_metadata_add(&md, buf, 41, S("x"), &p), TG_EINVAL);
        assert_int_equal(refund_metadata_add(&md, S("v"), buf, 201, &p), TG_EINVAL);
        assert_int_equal(refund_metadata_add(&md, S("v"), S("tab\t"), &p), TG_EINVAL);
        for (int i = 0; md.n < REFUND_METADATA_PAIRS; i++) {
                char k[4] = {'m', (char)('a' + i), '\0', '\0'};
                assert_int_equal(refund_metadata_add(&md, k, 2, S("v"), &p), 0);
        }
        assert_int_equal(refund_metadata_add(&md, S("zz"), S("v"), &p), TG_EINVAL);
        assert_string_equal(p.message, "at most 10 keys");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_operation_id),  cmocka_unit_test(test_payment_id),
            cmocka_unit_test(test_amount),        cmocka_unit_test(test_currency),
            cmocka_unit_test(test_whole_request), cmocka_unit_test(test_reason_and_metadata),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
