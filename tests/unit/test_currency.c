/*
 * Tests of core/currency: the ISO 4217 table (sorted, well formed, the
 * exponents that matter: 0, 2, 3 and 4 places) and the decimal strings of
 * amounts in minor units (leading zeros of the fraction, a zero amount,
 * negative amounts, INT64 bounds, a buffer too small, an unknown code).
 */
#include <string.h>

#include "check.h"
#include "core/currency.h"
#include "core/tg_error.h"

static void test_table(void **state)
{
        static const struct {
                const char *code;
                unsigned exponent;
        } known[] = {{"USD", 2}, {"EUR", 2}, {"JPY", 0}, {"KRW", 0}, {"KWD", 3},
                     {"BHD", 3}, {"TND", 3}, {"CLF", 4}, {"HUF", 2}, {"TWD", 2}};
        unsigned e = 99;
        (void)state;

        CHECK(currency_table_check() == 0, "the table is not sorted or has a bad entry");
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
                CHECK(currency_exponent(known[i].code, &e) == 0, "%s not found", known[i].code);
                CHECK(e == known[i].exponent, "%s: %u places, want %u", known[i].code, e,
                      known[i].exponent);
        }
        e = 99;
        static const char *const unknown[] = {"XXX", "XAU", "usd", "US", "USDD", "", "ZZZ"};
        for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
                CHECK(currency_exponent(unknown[i], &e) == TG_ENOTFOUND, "%s found", unknown[i]);
        CHECK(currency_exponent(NULL, &e) == TG_ENOTFOUND, "NULL found");
        CHECK(e == 99, "*ret written on failure");
}

static void test_decimal(void **state)
{
        static const struct {
                int64_t minor;
                const char *code, *want;
        } cases[] = {
            {1037, "USD", "10.37"},
            {5, "USD", "0.05"},
            {0, "USD", "0.00"},
            {100, "EUR", "1.00"},
            {1037, "JPY", "1037"},
            {0, "JPY", "0"},
            {1037, "KWD", "1.037"},
            {7, "BHD", "0.007"},
            {12345, "CLF", "1.2345"},
            {-5, "KWD", "-0.005"},
            {-1037, "USD", "-10.37"},
            {INT64_MAX, "USD", "92233720368547758.07"},
            {INT64_MIN, "USD", "-92233720368547758.08"},
            {INT64_MIN, "JPY", "-9223372036854775808"},
        };
        char buf[CURRENCY_DECIMAL_MAX];
        (void)state;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int r = currency_decimal(cases[i].minor, cases[i].code, buf, sizeof(buf));
                CHECK(r == 0, "%lld %s: %d", (long long)cases[i].minor, cases[i].code, r);
                CHECK(strcmp(buf, cases[i].want) == 0, "%lld %s: [%s], want [%s]",
                      (long long)cases[i].minor, cases[i].code, buf, cases[i].want);
        }
        CHECK(currency_decimal(1037, "XXX", buf, sizeof(buf)) == TG_ENOTFOUND, "XXX made");
        CHECK(buf[0] == '\0', "XXX left [%s]", buf);
        CHECK(currency_decimal(1037, "USD", buf, 5) == TG_EFULL, "10.37 fit in 5 bytes");
        CHECK(buf[0] == '\0', "a cut string [%s]", buf);
        CHECK(currency_decimal(1037, "USD", buf, 6) == 0 && strcmp(buf, "10.37") == 0,
              "10.37 in 6 bytes: [%s]", buf);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_table),
            cmocka_unit_test(test_decimal),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
