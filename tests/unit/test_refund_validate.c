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

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_operation_id),  cmocka_unit_test(test_payment_id),
            cmocka_unit_test(test_amount),        cmocka_unit_test(test_currency),
            cmocka_unit_test(test_whole_request),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
