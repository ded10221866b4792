/*
 * strnum — strict whole-string numbers (see the header). The C library's
 * strtoll/strtoull/strtod do the arithmetic; this file decides what text is
 * allowed in front of them, because each of them accepts more than a person
 * means by a number: leading blanks, '+', "0x1p3", "inf", and for strtoull a
 * leading '-' that wraps around.
 */
#include "core/strnum.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/tg_error.h"

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* Only digits, and at least one. */
static bool all_digits(const char *s)
{
        if (!is_digit(*s))
                return false;
        while (is_digit(*s))
                s++;
        return *s == '\0';
}

int strnum_i64(const char *s, int64_t min, int64_t max, int64_t *ret_value)
{
        char *end = NULL;
        long long v;

        if (!s || !all_digits(s[0] == '-' ? s + 1 : s))
                return TG_EPARSE;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno == ERANGE)
                return TG_ERANGE;
        if (errno != 0 || *end != '\0')
                return TG_EPARSE;
        if (v < min || v > max)
                return TG_ERANGE;
        *ret_value = (int64_t)v;
        return 0;
}

int strnum_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret_value)
{
        char *end = NULL;
        unsigned long long v;

        if (!s)
                return TG_EPARSE;
        if (s[0] == '-')
                return all_digits(s + 1) ? TG_ERANGE : TG_EPARSE;
        if (!all_digits(s))
                return TG_EPARSE;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return TG_ERANGE;
        if (errno != 0 || *end != '\0')
                return TG_EPARSE;
        if (v < min || v > max)
                return TG_ERANGE;
        *ret_value = (uint64_t)v;
        return 0;
}

/* The shape -?(D+|D+.D*|.D+)([eE][+-]?D+)? with nothing after it. */
static bool decimal_shape(const char *s)
{
        bool mantissa = false;

        if (*s == '-')
                s++;
        while (is_digit(*s)) {
                s++;
                mantissa = true;
        }
        if (*s == '.') {
                s++;
                while (is_digit(*s)) {
                        s++;
                        mantissa = true;
                }
        }
        if (!mantissa)
                return false;
        if (*s == 'e' || *s == 'E') {
                s++;
                if (*s == '+' || *s == '-')
                        s++;
                if (!is_digit(*s))
                        return false;
                while (is_digit(*s))
                        s++;
        }
        return *s == '\0';
}

int strnum_double(const char *s, double min, double max, double *ret_value)
{
        char *end = NULL;
        double v;

        if (!s || !decimal_shape(s))
                return TG_EPARSE;
        errno = 0;
        v = strtod(s, &end);
        if (*end != '\0')
                return TG_EPARSE;
        if (errno == ERANGE || !isfinite(v))
                return TG_ERANGE;
        if (!(v >= min && v <= max))
                return TG_ERANGE;
        *ret_value = v;
        return 0;
}
