/*
 * Unit tests for src/core/keep_alive.c: the timeout parameter of a
 * Keep-Alive header as servers write it, case and blanks, quoted values,
 * other parameters, the cut, two timeouts (the shorter), hostile values
 * (signs, fractions, units, NUL, empty, no '='), and the argument checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/keep_alive.h"
#include "core/tg_error.h"

static int parse(const char *s, int64_t *ret_ms)
{
        return keep_alive_timeout_ms(s, strlen(s), ret_ms);
}

static void expect_ms(const char *s, int64_t want)
{
        int64_t ms = -7;
        assert_int_equal(parse(s, &ms), 0);
        assert_int_equal(ms, want);
}

static void expect_absent(const char *s)
{
        int64_t ms = -7;
        assert_int_equal(parse(s, &ms), TG_EPARSE);
        assert_int_equal(ms, -7); /* untouched */
}

static void test_as_servers_write_it(void **state)
{
        (void)state;
        expect_ms("timeout=5, max=100", 5000);
        expect_ms("timeout=5", 5000);
        expect_ms("max=100, timeout=15", 15000);
        expect_ms("timeout=0", 0);
}

static void test_case_blanks_quotes(void **state)
{
        (void)state;
        expect_ms("Timeout=2", 2000);
        expect_ms("  TIMEOUT =\t3 ,max=9", 3000);
        expect_ms("timeout=\"4\"", 4000);
        expect_ms("max=1; timeout=6", 6000);
}

static void test_cut_and_shorter(void **state)
{
        (void)state;
        expect_ms("timeout=99999999999999999999999", KEEP_ALIVE_MAX_S * 1000LL);
        expect_ms("timeout=3601", KEEP_ALIVE_MAX_S * 1000LL);
        expect_ms("timeout=10, timeout=2", 2000);
        expect_ms("timeout=x, timeout=7", 7000); /* the invalid one ignored */
}

static void test_hostile(void **state)
{
        (void)state;
        expect_absent("");
        expect_absent("max=100");
        expect_absent("timeout");
        expect_absent("timeout=");
        expect_absent("timeout=-5");
        expect_absent("timeout=+5");
        expect_absent("timeout=1.5");
        expect_absent("timeout=5s");
        expect_absent("timeouts=5");
        expect_absent("time out=5");
        expect_absent("timeout=\"\"");
        expect_absent("timeout=\"5");
        int64_t ms = -7;
        /* a NUL inside the value is not a digit */
        assert_int_equal(keep_alive_timeout_ms("timeout=5\0"
                                               "0",
                                               11, &ms),
                         TG_EPARSE);
        /* not NUL-terminated: only len bytes are read */
        assert_int_equal(keep_alive_timeout_ms("timeout=12345", 9, &ms), 0);
        assert_int_equal(ms, 1000);
}

static void test_arguments(void **state)
{
        (void)state;
        int64_t ms = -7;
        assert_int_equal(keep_alive_timeout_ms(NULL, 3, &ms), TG_EINVAL);
        assert_int_equal(keep_alive_timeout_ms(NULL, 0, &ms), TG_EPARSE);
        assert_int_equal(ms, -7);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_as_servers_write_it), cmocka_unit_test(test_case_blanks_quotes),
            cmocka_unit_test(test_cut_and_shorter),     cmocka_unit_test(test_hostile),
            cmocka_unit_test(test_arguments),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
