/*
 * currency — the ISO 4217 exponent table and decimal amounts. See
 * currency.h.
 *
 * Invariants:
 *   - one table, sorted by code (a unit test checks the order), searched
 *     with bsearch;
 *   - a decimal string is made with integer arithmetic only (no floating
 *     point: 0.1 + 0.2 is not a refund amount) and never cut: a buffer too
 *     small is an error.
 */
#include "core/currency.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"

struct currency {
        char code[4];
        unsigned char exponent;
};

/* ISO 4217's active codes with a minor unit (list one, 2024), sorted. */
static const struct currency table[] = {
    {"AED", 2}, {"AFN", 2}, {"ALL", 2}, {"AMD", 2}, {"ANG", 2}, {"AOA", 2}, {"ARS", 2}, {"AUD", 2},
    {"AWG", 2}, {"AZN", 2}, {"BAM", 2}, {"BBD", 2}, {"BDT", 2}, {"BGN", 2}, {"BHD", 3}, {"BIF", 0},
    {"BMD", 2}, {"BND", 2}, {"BOB", 2}, {"BOV", 2}, {"BRL", 2}, {"BSD", 2}, {"BTN", 2}, {"BWP", 2},
    {"BYN", 2}, {"BZD", 2}, {"CAD", 2}, {"CDF", 2}, {"CHE", 2}, {"CHF", 2}, {"CHW", 2}, {"CLF", 4},
    {"CLP", 0}, {"CNY", 2}, {"COP", 2}, {"COU", 2}, {"CRC", 2}, {"CUP", 2}, {"CVE", 2}, {"CZK", 2},
    {"DJF", 0}, {"DKK", 2}, {"DOP", 2}, {"DZD", 2}, {"EGP", 2}, {"ERN", 2}, {"ETB", 2}, {"EUR", 2},
    {"FJD", 2}, {"FKP", 2}, {"GBP", 2}, {"GEL", 2}, {"GHS", 2}, {"GIP", 2}, {"GMD", 2}, {"GNF", 0},
    {"GTQ", 2}, {"GYD", 2}, {"HKD", 2}, {"HNL", 2}, {"HTG", 2}, {"HUF", 2}, {"IDR", 2}, {"ILS", 2},
    {"INR", 2}, {"IQD", 3}, {"IRR", 2}, {"ISK", 0}, {"JMD", 2}, {"JOD", 3}, {"JPY", 0}, {"KES", 2},
    {"KGS", 2}, {"KHR", 2}, {"KMF", 0}, {"KPW", 2}, {"KRW", 0}, {"KWD", 3}, {"KYD", 2}, {"KZT", 2},
    {"LAK", 2}, {"LBP", 2}, {"LKR", 2}, {"LRD", 2}, {"LSL", 2}, {"LYD", 3}, {"MAD", 2}, {"MDL", 2},
    {"MGA", 2}, {"MKD", 2}, {"MMK", 2}, {"MNT", 2}, {"MOP", 2}, {"MRU", 2}, {"MUR", 2}, {"MVR", 2},
    {"MWK", 2}, {"MXN", 2}, {"MXV", 2}, {"MYR", 2}, {"MZN", 2}, {"NAD", 2}, {"NGN", 2}, {"NIO", 2},
    {"NOK", 2}, {"NPR", 2}, {"NZD", 2}, {"OMR", 3}, {"PAB", 2}, {"PEN", 2}, {"PGK", 2}, {"PHP", 2},
    {"PKR", 2}, {"PLN", 2}, {"PYG", 0}, {"QAR", 2}, {"RON", 2}, {"RSD", 2}, {"RUB", 2}, {"RWF", 0},
    {"SAR", 2}, {"SBD", 2}, {"SCR", 2}, {"SDG", 2}, {"SEK", 2}, {"SGD", 2}, {"SHP", 2}, {"SLE", 2},
    {"SOS", 2}, {"SRD", 2}, {"SSP", 2}, {"STN", 2}, {"SVC", 2}, {"SYP", 2}, {"SZL", 2}, {"THB", 2},
    {"TJS", 2}, {"TMT", 2}, {"TND", 3}, {"TOP", 2}, {"TRY", 2}, {"TTD", 2}, {"TWD", 2}, {"TZS", 2},
    {"UAH", 2}, {"UGX", 0}, {"USD", 2}, {"USN", 2}, {"UYI", 0}, {"UYU", 2}, {"UYW", 4}, {"UZS", 2},
    {"VED", 2}, {"VES", 2}, {"VND", 0}, {"VUV", 0}, {"WST", 2}, {"XAF", 0}, {"XCD", 2}, {"XCG", 2},
    {"XOF", 0}, {"XPF", 0}, {"YER", 2}, {"ZAR", 2}, {"ZMW", 2}, {"ZWG", 2},
};

static int by_code(const void *a, const void *b)
{
        return strcmp(((const struct currency *)a)->code, ((const struct currency *)b)->code);
}

int currency_exponent(const char *code, unsigned *ret_exponent)
{
        struct currency key = {{0}, 0};
        const struct currency *c;

        if (!code || strlen(code) != 3)
                return TG_ENOTFOUND;
        memcpy(key.code, code, 4);
        c = bsearch(&key, table, sizeof(table) / sizeof(table[0]), sizeof(table[0]), by_code);
        if (!c)
                return TG_ENOTFOUND;
        *ret_exponent = c->exponent;
        return 0;
}

int currency_decimal(int64_t minor, const char *code, char *buf, size_t size)
{
        static const uint64_t scale[] = {1, 10, 100, 1000, 10000};
        unsigned e;
        uint64_t abs;
        int n;

        if (size > 0)
                buf[0] = '\0';
        if (currency_exponent(code, &e) < 0)
                return TG_ENOTFOUND;
        /* the magnitude as unsigned: INT64_MIN has no positive int64 */
        abs = minor < 0 ? (uint64_t)0 - (uint64_t)minor : (uint64_t)minor;
        if (e == 0)
                n = snprintf(buf, size, "%s%llu", minor < 0 ? "-" : "", (unsigned long long)abs);
        else
                n = snprintf(buf, size, "%s%llu.%0*llu", minor < 0 ? "-" : "",
                             (unsigned long long)(abs / scale[e]), (int)e,
                             (unsigned long long)(abs % scale[e]));
        if (n < 0 || (size_t)n >= size) {
                if (size > 0)
                        buf[0] = '\0';
                return TG_EFULL;
        }
        return 0;
}

int currency_table_check(void)
{
        size_t n = sizeof(table) / sizeof(table[0]);

        for (size_t i = 0; i < n; i++) {
                if (strlen(table[i].code) != 3 || table[i].exponent > 4)
                        return TG_EINVAL;
                if (i > 0 && strcmp(table[i - 1].code, table[i].code) >= 0)
                        return TG_EINVAL;
        }
        return 0;
}
