/*
 * Unit tests for src/core/strnum.c: each reader accepts exactly the whole
 * decimal number and refuses, with TG_EPARSE, everything the C library would
 * have let through around it (blanks, '+', hex, inf/nan, trailing units, an
 * empty string, NULL); out of range and overflow are TG_ERANGE; the output
 * is untouched on failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "core/strnum.h"
#include "core/tg_error.h"

static void test_i64_accepts(void **state)
{
        int64_t v = 0;
        (void)state;

        assert_int_equal(strnum_i64("0", INT64_MIN, INT64_MAX, &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(strnum_i64("-17", -100, 100, &v), 0);
        assert_int_equal(v, -17);
        assert_int_equal(strnum_i64("007", 0, 10, &v), 0);
        assert_int_equal(v, 7);
        assert_int_equal(strnum_i64("9223372036854775807", 0, INT64_MAX, &v), 0);
        assert_true(v == INT64_MAX);
        assert_int_equal(strnum_i64("-9223372036854775808", INT64_MIN, 0, &v), 0);
        assert_true(v == INT64_MIN);
        /* the bounds are inclusive */
        assert_int_equal(strnum_i64("1", 1, 5, &v), 0);
        assert_int_equal(strnum_i64("5", 1, 5, &v), 0);
        assert_int_equal(v, 5);
}

static void test_i64_refuses(void **state)
{
        static const char *const junk[] = {"",    " 1", "1 ",  "+1", "1x",  "0x10", "1.0", "1e3",
                                           "--1", "-",  "- 1", "x",  "\t1", "1\n",  "١"};
        int64_t v = 42;
        (void)state;

        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
                assert_int_equal(strnum_i64(junk[i], INT64_MIN, INT64_MAX, &v), TG_EPARSE);
                assert_int_equal(v, 42);
        }
        assert_int_equal(strnum_i64(NULL, 0, 1, &v), TG_EPARSE);
        assert_int_equal(strnum_i64("9223372036854775808", INT64_MIN, INT64_MAX, &v), TG_ERANGE);
        assert_int_equal(strnum_i64("-9223372036854775809", INT64_MIN, INT64_MAX, &v), TG_ERANGE);
        assert_int_equal(strnum_i64("99999999999999999999999", INT64_MIN, INT64_MAX, &v),
                         TG_ERANGE);
        assert_int_equal(strnum_i64("0", 1, 5, &v), TG_ERANGE);
        assert_int_equal(strnum_i64("6", 1, 5, &v), TG_ERANGE);
        assert_int_equal(strnum_i64("-1", 0, 5, &v), TG_ERANGE);
        assert_int_equal(v, 42);
}

static void test_u64(void **state)
{
        uint64_t v = 42;
        (void)state;

        assert_int_equal(strnum_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
        assert_true(v == UINT64_MAX);
        assert_int_equal(strnum_u64("3", 1, 3, &v), 0);
        assert_int_equal(v, 3);
        v = 42;
        assert_int_equal(strnum_u64("18446744073709551616", 0, UINT64_MAX, &v), TG_ERANGE);
        /* strtoull would wrap "-1" to UINT64_MAX: here it is below the range */
        assert_int_equal(strnum_u64("-1", 0, UINT64_MAX, &v), TG_ERANGE);
        assert_int_equal(strnum_u64("-0", 0, UINT64_MAX, &v), TG_ERANGE);
        assert_int_equal(strnum_u64("4", 1, 3, &v), TG_ERANGE);
        assert_int_equal(strnum_u64("0", 1, 3, &v), TG_ERANGE);
        assert_int_equal(strnum_u64("", 0, 3, &v), TG_EPARSE);
        assert_int_equal(strnum_u64("+1", 0, 3, &v), TG_EPARSE);
        assert_int_equal(strnum_u64(" 1", 0, 3, &v), TG_EPARSE);
        assert_int_equal(strnum_u64("1 ", 0, 3, &v), TG_EPARSE);
        assert_int_equal(strnum_u64("-x", 0, 3, &v), TG_EPARSE);
        assert_int_equal(strnum_u64("-", 0, 3, &v), TG_EPARSE);
        assert_int_equal(strnum_u64("1.5", 0, 3, &v), TG_EPARSE);
        assert_int_equal(strnum_u64(NULL, 0, 3, &v), TG_EPARSE);
        assert_int_equal(v, 42);
}

static void test_double_accepts(void **state)
{
        double v = 0;
        (void)state;

        assert_int_equal(strnum_double("1.5", 0, 10, &v), 0);
        assert_true(v == 1.5);
        assert_int_equal(strnum_double("-0.25", -1, 1, &v), 0);
        assert_true(v == -0.25);
        assert_int_equal(strnum_double(".5", 0, 1, &v), 0);
        assert_true(v == 0.5);
        assert_int_equal(strnum_double("5.", 0, 10, &v), 0);
        assert_true(v == 5.0);
        assert_int_equal(strnum_double("1e3", 0, 1e4, &v), 0);
        assert_true(v == 1000.0);
        assert_int_equal(strnum_double("2.5E-1", 0, 1, &v), 0);
        assert_true(v == 0.25);
        assert_int_equal(strnum_double("1e+2", 0, 1e3, &v), 0);
        assert_true(v == 100.0);
        assert_int_equal(strnum_double("0", 0, 0, &v), 0);
        assert_true(v == 0.0);
}

static void test_double_refuses(void **state)
{
        static const char *const junk[] = {"",    " 1",  "1 ",   "+1",   "1x",  "0x10", "0x1p3",
                                           "inf", "nan", "-inf", "INF",  "1e",  "1e+",  ".",
                                           "-",   "-.",  "e5",   "1..2", "1,5", "1.5s", "--1"};
        double v = 42;
        (void)state;

        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
                assert_int_equal(strnum_double(junk[i], -1e300, 1e300, &v), TG_EPARSE);
                assert_true(v == 42);
        }
        assert_int_equal(strnum_double(NULL, 0, 1, &v), TG_EPARSE);
        assert_int_equal(strnum_double("1e999", -1e300, 1e308, &v), TG_ERANGE);
        assert_int_equal(strnum_double("-1e999", -1e308, 1e308, &v), TG_ERANGE);
        assert_int_equal(strnum_double("1e-999", -1, 1, &v), TG_ERANGE);
        assert_int_equal(strnum_double("1.0001", 0, 1, &v), TG_ERANGE);
        assert_int_equal(strnum_double("-0.1", 0, 1, &v), TG_ERANGE);
        assert_true(v == 42);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_i64_accepts),
            cmocka_unit_test(test_i64_refuses),
            cmocka_unit_test(test_u64),
            cmocka_unit_test(test_double_accepts),
            cmocka_unit_test(test_double_refuses),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
