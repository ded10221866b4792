/*
 * Unit tests for src/core/csv.c: fields split in place, quotes taken off
 * ("" is a quote, commas inside quotes stay), empty fields and lines, and
 * the refusals (a quote left open, text after a closing quote, too many
 * fields, a bare quote when strict) with the count untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/csv.h"
#include "core/tg_error.h"

static void test_plain_fields(void **state)
{
        char line[] = "op-1,succeeded,,re_9";
        char *f[8];
        size_t n = 0;

        (void)state;
        assert_int_equal(csv_split(line, CSV_QUOTES_STRICT, f, 8, &n), 0);
        assert_int_equal(n, 4);
        assert_string_equal(f[0], "op-1");
        assert_string_equal(f[1], "succeeded");
        assert_string_equal(f[2], "");
        assert_string_equal(f[3], "re_9");
        assert_true(f[0] == line); /* in place */
}

static void test_empty_line_and_trailing_comma(void **state)
{
        char empty[] = "", trailing[] = "a,";
        char *f[4];
        size_t n = 0;

        (void)state;
        assert_int_equal(csv_split(empty, CSV_QUOTES_STRICT, f, 4, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(f[0], "");
        assert_int_equal(csv_split(trailing, CSV_QUOTES_STRICT, f, 4, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(f[0], "a");
        assert_string_equal(f[1], "");
}

static void test_quoted_fields(void **state)
{
        char line[] = "\"a,b\",\"say \"\"hi\"\"\",\"\",x";
        char *f[8];
        size_t n = 0;

        (void)state;
        assert_int_equal(csv_split(line, CSV_QUOTES_STRICT, f, 8, &n), 0);
        assert_int_equal(n, 4);
        assert_string_equal(f[0], "a,b");
        assert_string_equal(f[1], "say \"hi\"");
        assert_string_equal(f[2], "");
        assert_string_equal(f[3], "x");
}

static void test_max_fields(void **state)
{
        char three[] = "a,b,c", four[] = "a,b,c,d";
        char *f[3];
        size_t n = 9;

        (void)state;
        assert_int_equal(csv_split(three, CSV_QUOTES_STRICT, f, 3, &n), 0);
        assert_int_equal(n, 3);
        n = 9;
        assert_int_equal(csv_split(four, CSV_QUOTES_STRICT, f, 3, &n), TG_EPARSE);
        assert_int_equal(n, 9);
}

static void test_refusals(void **state)
{
        char open[] = "a,\"open", after[] = "\"x\"y,z", bare[] = "a,b\"c";
        char bare2[] = "a,b\"c";
        char *f[8];
        size_t n = 9;

        (void)state;
        assert_int_equal(csv_split(open, CSV_QUOTES_BARE, f, 8, &n), TG_EPARSE);
        assert_int_equal(csv_split(after, CSV_QUOTES_BARE, f, 8, &n), TG_EPARSE);
        assert_int_equal(csv_split(bare, CSV_QUOTES_STRICT, f, 8, &n), TG_EPARSE);
        assert_int_equal(n, 9);
        /* a bare quote is kept when asked */
        assert_int_equal(csv_split(bare2, CSV_QUOTES_BARE, f, 8, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(f[1], "b\"c");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_plain_fields),
            cmocka_unit_test(test_empty_line_and_trailing_comma),
            cmocka_unit_test(test_quoted_fields),
            cmocka_unit_test(test_max_fields),
            cmocka_unit_test(test_refusals),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
