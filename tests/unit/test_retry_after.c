/*
 * Unit tests for src/core/retry_after.c: delta-seconds, surrounding
 * whitespace, the cap, overflow, hostile values (signs, fractions, units,
 * NUL, empty), HTTP-dates in the past, now and future through a fake date
 * parser that knows a few fixed strings, and the argument checks.
 *
 * The fake parser also records what it was handed, so the tests see that the
 * date reaches it trimmed and NUL-terminated, and that hostile values never
 * reach it at all.
 *
 * retry_after_parse_all(): every value of an answer's Retry-After headers,
 * the longest valid one (two headers, a folded "5, 10" list, an absurd one
 * among them is the cap, invalid ones ignored, none valid is absent).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "check.h"
#include "core/retry_after.h"
#include "core/tg_error.h"

#define CAP       RETRY_AFTER_DEFAULT_CAP_MS
#define RFC_DATE  "Sun, 06 Nov 1994 08:49:37 GMT"
#define RFC_EPOCH 784111777LL
#define MDN_DATE  "Wed, 21 Oct 2015 07:28:00 GMT"
#define MDN_EPOCH 1445412480LL

static int date_calls;
static char date_seen[128];

static int fake_date(const char *text, int64_t *ret_epoch_s)
{
        static const struct {
                const char *text;
                int64_t epoch;
        } known[] = {
            {RFC_DATE, RFC_EPOCH},
            {MDN_DATE, MDN_EPOCH},
            {"Thu, 01 Jan 1970 00:00:00 GMT", 0},
            {"Fri, 31 Dec 9999 23:59:59 GMT", 253402300799LL},
            /* What a date parser might return for absurd years. */
            {"Far future", INT64_MAX},
            {"Far past", INT64_MIN},
            {"Before 1970", -86400},
        };
        date_calls++;
        snprintf(date_seen, sizeof(date_seen), "%s", text);
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
                if (strcmp(text, known[i].text) == 0) {
                        *ret_epoch_s = known[i].epoch;
                        return 0;
                }
        }
        return TG_EPARSE;
}

/* Parses a NUL-terminated literal; len from strlen. */
static int parse(const char *s, tg_wall_ms now, int64_t cap, int64_t *ret)
{
        return retry_after_parse(s, strlen(s), now, cap, fake_date, ret);
}

static void expect_ok(const char *s, tg_wall_ms now, int64_t cap, int64_t want)
{
        int64_t got = -999;
        int r = parse(s, now, cap, &got);
        CHECK(r == 0 && got == want, "\"%s\": r %d, delay %lld, want %lld", s, r, (long long)got,
              (long long)want);
}

static void expect_parse_error(const char *s, size_t len)
{
        int64_t got = -999;
        int r = retry_after_parse(s, len, 0, CAP, fake_date, &got);
        CHECK(r == TG_EPARSE, "\"%.*s\" (len %zu): r %d, want TG_EPARSE", (int)len, s, len, r);
        CHECK(got == -999, "\"%.*s\": output written on failure", (int)len, s);
}

/* --- delta-seconds ------------------------------------------------------------ */

static void test_delta_values(void **state)
{
        (void)state;
        expect_ok("0", 0, CAP, 0);
        expect_ok("1", 0, CAP, 1000);
        expect_ok("5", 0, CAP, 5000);
        expect_ok("120", 0, CAP, 120000);
        expect_ok("007", 0, CAP, 7000);
        expect_ok("0000000000000000000000000000000000000000000000000000000000000000001", 0, CAP,
                  1000);
        expect_ok("3599", 0, CAP, 3599000);
        expect_ok("3600", 0, CAP, CAP);
        /* `now` plays no part in a delta. */
        expect_ok("5", 1700000000000LL, CAP, 5000);
        expect_ok("5", INT64_MIN, CAP, 5000);
}

static void test_delta_whitespace(void **state)
{
        (void)state;
        expect_ok(" 5", 0, CAP, 5000);
        expect_ok("5 ", 0, CAP, 5000);
        expect_ok("\t5\t", 0, CAP, 5000);
        expect_ok(" \t \t 42 \t ", 0, CAP, 42000);
        /* Other whitespace is not the header's: refused. */
        expect_parse_error("5\r\n", 3);
        expect_parse_error("\n5", 2);
        expect_parse_error("\v5", 2);
        expect_parse_error("5\f", 2);
        /* Inside the value, a space is garbage. */
        expect_parse_error("5 0", 3);
        expect_parse_error("1 000", 5);
}

static void test_delta_cap_and_overflow(void **state)
{
        (void)state;
        expect_ok("3601", 0, CAP, CAP);
        expect_ok("86400", 0, CAP, CAP);
        expect_ok("99999999999999999999999", 0, CAP, CAP);
        expect_ok("9223372036854775807", 0, CAP, CAP);
        expect_ok("18446744073709551616", 0, CAP, CAP);
        /* A thousand digits: still a number, still the cap. */
        char big[1001];
        memset(big, '9', 1000);
        big[1000] = '\0';
        expect_ok(big, 0, CAP, CAP);
        /* Cap 0: every delay is 0. */
        expect_ok("5", 0, 0, 0);
        expect_ok("99999999999999999999999", 0, 0, 0);
        /* Cap at the top of int64: exact up to the last representable ms,
         * then overflow is clamped, never wrapped. */
        expect_ok("9223372036854775", 0, INT64_MAX, 9223372036854775000LL);
        expect_ok("9223372036854776", 0, INT64_MAX, INT64_MAX);
        expect_ok("99999999999999999999999", 0, INT64_MAX, INT64_MAX);
        /* Around the boundary, with a smaller cap, no overflow sneaks under it. */
        expect_ok("9223372036854775808", 0, 5000, 5000);
        expect_ok("92233720368547758070", 0, 5000, 5000);
}

/* Hostile values as (bytes, length), so NUL and 8-bit bytes sit anywhere. */
#define BYTES(lit)                                                                                 \
        {                                                                                          \
                lit, sizeof(lit) - 1                                                               \
        }

static void test_hostile(void **state)
{
        (void)state;
        static const struct {
                const char *bytes;
                size_t len;
        } bad[] = {
            BYTES("-1"),
            BYTES("+1"),
            BYTES("-0"),
            BYTES("1.5"),
            BYTES(".5"),
            BYTES("5."),
            BYTES("1e3"),
            BYTES("0x10"),
            BYTES("5s"),
            BYTES("5 s"),
            BYTES("abc"),
            BYTES(""),
            BYTES(" "),
            BYTES("\t"),
            BYTES(" \t "),
            BYTES("five"),
            BYTES("5,0"),
            BYTES("1_000"),
            BYTES("=5"),
            BYTES("\"5\""),
            BYTES("5;"),
            BYTES("(5)"),
            BYTES("+"),
            BYTES("-"),
            BYTES("\x7f"),
            BYTES("5\x80"),
            BYTES("\xff\x35"),
            BYTES("\xd9\xa1\xd9\xa2"), /* Arabic-Indic digits 1 2 */
            BYTES("\xef\xbc\x95"),     /* fullwidth 5 */
            /* Embedded NUL, anywhere. */
            BYTES("5\0"),
            BYTES("\0\x35"),
            BYTES("1\0\x32"),
            BYTES("\0"),
            BYTES(RFC_DATE "\0"),
            BYTES("Sun, 06 Nov\0 1994 08:49:37 GMT"),
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                expect_parse_error(bad[i].bytes, bad[i].len);
        /* A NULL value with length 0 is an absent header. */
        expect_parse_error(NULL, 0);
}

static void test_hostile_never_reach_date_fn(void **state)
{
        (void)state;
        /* Signs, fractions and digits-first garbage are refused before the
         * date parser sees them: a lenient parser must not turn them into
         * dates. */
        const char *bad[] = {"-1", "+1", "1.5", "5s", "5 0", "1e3", "", "  ", "\xc3\xa9t\xc3\xa9"};
        int before = date_calls;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                expect_parse_error(bad[i], strlen(bad[i]));
        expect_parse_error("Sun\0", 4);
        assert_int_equal(date_calls, before);
        /* A date longer than any HTTP-date is refused before the parser too. */
        char longdate[200];
        memset(longdate, 'a', sizeof(longdate) - 1);
        longdate[sizeof(longdate) - 1] = '\0';
        expect_parse_error(longdate, strlen(longdate));
        assert_int_equal(date_calls, before);
}

static void test_not_nul_terminated(void **state)
{
        (void)state;
        /* The value is len bytes of a larger buffer. */
        const char buf[] = "12345";
        int64_t got = -1;
        assert_int_equal(retry_after_parse(buf, 2, 0, CAP, NULL, &got), 0);
        assert_true(got == 12000);
        char date[64];
        memcpy(date, RFC_DATE "XYZ", sizeof(RFC_DATE "XYZ"));
        got = -1;
        assert_int_equal(retry_after_parse(date, strlen(RFC_DATE), RFC_EPOCH * 1000 - 5000, CAP,
                                           fake_date, &got),
                         0);
        assert_true(got == 5000);
        assert_string_equal(date_seen, RFC_DATE);
}

/* --- HTTP-date ---------------------------------------------------------------- */

static void test_dates(void **state)
{
        (void)state;
        tg_wall_ms at = RFC_EPOCH * 1000;
        /* Future: the difference, in ms. */
        expect_ok(RFC_DATE, at - 10000, CAP, 10000);
        expect_ok(RFC_DATE, at - 1, CAP, 1);
        expect_ok(RFC_DATE, at - 3599999, CAP, 3599999);
        /* Now and past: 0. */
        expect_ok(RFC_DATE, at, CAP, 0);
        expect_ok(RFC_DATE, at + 1, CAP, 0);
        expect_ok(RFC_DATE, 1700000000000LL, CAP, 0);
        expect_ok(RFC_DATE, INT64_MAX, CAP, 0);
        /* Far future: the cap. */
        expect_ok(RFC_DATE, at - 3600001, CAP, CAP);
        expect_ok(RFC_DATE, 0, CAP, CAP);
        expect_ok(MDN_DATE, MDN_EPOCH * 1000 - 250, CAP, 250);
        expect_ok("Thu, 01 Jan 1970 00:00:00 GMT", 1, CAP, 0);
        expect_ok("Fri, 31 Dec 9999 23:59:59 GMT", 1700000000000LL, CAP, CAP);
        /* What the parser returns at the edges of int64: no overflow. */
        expect_ok("Far future", 0, CAP, CAP);
        expect_ok("Far future", INT64_MIN, INT64_MAX, INT64_MAX);
        expect_ok("Far past", 0, CAP, 0);
        expect_ok("Far past", INT64_MIN, CAP, 0);
        expect_ok("Before 1970", 0, CAP, 0);
        expect_ok("Before 1970", -86400000 - 7, CAP, 7);
        /* `now` far in the negative: the difference would overflow. */
        expect_ok(RFC_DATE, INT64_MIN, CAP, CAP);
        expect_ok(RFC_DATE, INT64_MIN, INT64_MAX, INT64_MAX);
        /* Cap 0. */
        expect_ok(RFC_DATE, at - 10000, 0, 0);
}

static void test_date_trimmed(void **state)
{
        (void)state;
        tg_wall_ms at = RFC_EPOCH * 1000;
        date_seen[0] = '\0';
        expect_ok("  \t" RFC_DATE " \t", at - 2000, CAP, 2000);
        assert_string_equal(date_seen, RFC_DATE);
}

static void test_date_unparsable(void **state)
{
        (void)state;
        int before = date_calls;
        expect_parse_error("Sun, 06 Nov 1994", 16);
        expect_parse_error("tomorrow", 8);
        expect_parse_error("Sun, 06 Nov 1994 08:49:37 GMT\r", sizeof(RFC_DATE));
        expect_parse_error("Sun, 06 Nov 1994 08:49:37 GMT\x80", sizeof(RFC_DATE));
        /* The first two reached the parser, which said no. */
        assert_int_equal(date_calls, before + 2);
}

static void test_date_without_date_fn(void **state)
{
        (void)state;
        int64_t got = -999;
        assert_int_equal(retry_after_parse(RFC_DATE, strlen(RFC_DATE), 0, CAP, NULL, &got),
                         TG_EPARSE);
        assert_true(got == -999);
        /* Deltas still work without it. */
        assert_int_equal(retry_after_parse("30", 2, 0, CAP, NULL, &got), 0);
        assert_true(got == 30000);
}

/* A parser that claims success only through its return value. */
static int positive_date(const char *text, int64_t *ret_epoch_s)
{
        (void)text;
        (void)ret_epoch_s;
        return 1;
}

static void test_date_fn_odd_return(void **state)
{
        (void)state;
        int64_t got = -999;
        assert_int_equal(retry_after_parse(RFC_DATE, strlen(RFC_DATE), 0, CAP, positive_date, &got),
                         TG_EPARSE);
        assert_true(got == -999);
}

/* --- arguments ------------------------------------------------------------------ */

static int parse_all(const char *s, int64_t cap, int64_t *ret)
{
        return retry_after_parse_all(s, strlen(s), MDN_EPOCH * 1000 - 60000, cap, fake_date, ret);
}

static void test_all_values(void **state)
{
        int64_t v = -7;

        (void)state;
        assert_int_equal(parse_all("5", CAP, &v), 0);
        assert_int_equal(v, 5000);
        /* two headers: the longer, whichever came first */
        assert_int_equal(parse_all("5\n30", CAP, &v), 0);
        assert_int_equal(v, 30000);
        assert_int_equal(parse_all("30\n5", CAP, &v), 0);
        assert_int_equal(v, 30000);
        /* an absurd one is the cap, not ignored and not wrapped */
        assert_int_equal(parse_all("5\n99999999999", 120000, &v), 0);
        assert_int_equal(v, 120000);
        assert_int_equal(parse_all("99999999999999999999999999", 120000, &v), 0);
        assert_int_equal(v, 120000);
        /* a date and a delta: the later moment (the date is 60 s ahead) */
        assert_int_equal(parse_all(MDN_DATE "\n5", CAP, &v), 0);
        assert_int_equal(v, 60000);
        assert_int_equal(parse_all("90\n" MDN_DATE, CAP, &v), 0);
        assert_int_equal(v, 90000);
        /* one header folded into a list by a proxy */
        assert_int_equal(parse_all("5, 10", CAP, &v), 0);
        assert_int_equal(v, 10000);
        assert_int_equal(parse_all(" 10 ,5,", CAP, &v), 0);
        assert_int_equal(v, 10000);
        /* invalid values are ignored; the valid one counts */
        assert_int_equal(parse_all("soon\n7\n-3\n1.5", CAP, &v), 0);
        assert_int_equal(v, 7000);
        assert_int_equal(parse_all("\n\n4\n", CAP, &v), 0);
        assert_int_equal(v, 4000);
        /* none valid: absent (the caller's default hold), v untouched */
        v = -7;
        assert_int_equal(parse_all("soon\n-3\n,", CAP, &v), TG_EPARSE);
        assert_int_equal(parse_all("", CAP, &v), TG_EPARSE);
        assert_int_equal(retry_after_parse_all(NULL, 0, 0, CAP, NULL, &v), TG_EPARSE);
        assert_int_equal(v, -7);
        assert_int_equal(retry_after_parse_all(NULL, 3, 0, CAP, NULL, &v), TG_EINVAL);
        assert_int_equal(retry_after_parse_all("5", 1, 0, -1, NULL, &v), TG_EINVAL);
        /* a NUL inside a value makes that value invalid, never shorter */
        assert_int_equal(retry_after_parse_all("9\0"
                                               "99\n2",
                                               6, 0, CAP, NULL, &v),
                         0);
        assert_int_equal(v, 2000);
}

static void test_invalid_arguments(void **state)
{
        (void)state;
        int64_t got = -999;
        assert_int_equal(retry_after_parse("5", 1, 0, -1, fake_date, &got), TG_EINVAL);
        assert_int_equal(retry_after_parse("5", 1, 0, INT64_MIN, fake_date, &got), TG_EINVAL);
        assert_int_equal(retry_after_parse(NULL, 3, 0, CAP, fake_date, &got), TG_EINVAL);
        assert_int_equal(retry_after_parse("5", 1, 0, CAP, fake_date, NULL), TG_EINVAL);
        assert_true(got == -999);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_delta_values),
            cmocka_unit_test(test_delta_whitespace),
            cmocka_unit_test(test_delta_cap_and_overflow),
            cmocka_unit_test(test_hostile),
            cmocka_unit_test(test_hostile_never_reach_date_fn),
            cmocka_unit_test(test_not_nul_terminated),
            cmocka_unit_test(test_dates),
            cmocka_unit_test(test_date_trimmed),
            cmocka_unit_test(test_date_unparsable),
            cmocka_unit_test(test_date_without_date_fn),
            cmocka_unit_test(test_date_fn_odd_return),
            cmocka_unit_test(test_invalid_arguments),
            cmocka_unit_test(test_all_values),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
