/*
 * retry_after — turns an HTTP Retry-After value into a delay in ms, capped.
 * Delta-seconds are read here digit by digit; an HTTP-date is handed, as a
 * bounded NUL-terminated copy, to the caller's date parser.
 *
 * Invariants kept here:
 *   - only spaces and tabs around the value are ignored; inside it, a delta
 *     is digits only, and a date is printable ASCII starting with a letter
 *     (every HTTP-date form starts with a day name), so signs, fractions,
 *     control bytes, NUL and 8-bit bytes are TG_EPARSE before any parser runs;
 *   - no arithmetic overflows: a long delta saturates while its digits are
 *     still checked, and every sum or product is range-checked first;
 *   - on success the delay is in [0, cap_ms]; on failure *ret_delay_ms is
 *     untouched.
 */
#include "core/retry_after.h"

#include <stdbool.h>

#include "core/tg_error.h"

/* Longest date text handed to date_fn. IMF-fixdate is 29 bytes, the obsolete
 * RFC 850 and asctime forms are shorter than 40; anything near this bound is
 * not a date. */
#define DATE_MAX 64

static bool is_space(char c)
{
        return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static bool is_alpha(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static int64_t clamp_ms(int64_t ms, int64_t cap_ms)
{
        if (ms < 0)
                return 0;
        return ms < cap_ms ? ms : cap_ms;
}

static int parse_delta(const char *s, size_t len, int64_t cap_ms, int64_t *ret_delay_ms)
{
        /* Seconds beyond this overflow once in ms: keep checking the digits,
         * but stop counting and treat the value as "longer than any cap". */
        const int64_t max_secs = INT64_MAX / 1000;
        int64_t secs = 0;
        bool over = false;
        for (size_t i = 0; i < len; i++) {
                if (!is_digit(s[i]))
                        return TG_EPARSE;
                int digit = s[i] - '0';
                if (over || secs > (max_secs - digit) / 10)
                        over = true;
                else
                        secs = secs * 10 + digit;
        }
        int64_t ms = over ? INT64_MAX : secs * 1000;
        *ret_delay_ms = clamp_ms(ms, cap_ms);
        return 0;
}

static int parse_date(const char *s, size_t len, tg_wall_ms now, int64_t cap_ms,
                      retry_after_date_fn date_fn, int64_t *ret_delay_ms)
{
        if (!date_fn || len >= DATE_MAX || !is_alpha(s[0]))
                return TG_EPARSE;
        char text[DATE_MAX];
        for (size_t i = 0; i < len; i++) {
                /* Printable ASCII only: this also rejects embedded NUL. */
                if (s[i] < 0x20 || s[i] > 0x7e)
                        return TG_EPARSE;
                text[i] = s[i];
        }
        text[len] = '\0';

        int64_t epoch_s;
        if (date_fn(text, &epoch_s) != 0)
                return TG_EPARSE;

        if (epoch_s > INT64_MAX / 1000) {
                *ret_delay_ms = cap_ms;
                return 0;
        }
        if (epoch_s < INT64_MIN / 1000) {
                *ret_delay_ms = 0;
                return 0;
        }
        tg_wall_ms at = epoch_s * 1000;
        if (at <= now) {
                /* In the past, or now: no wait. */
                *ret_delay_ms = 0;
                return 0;
        }
        /* at > now; at - now overflows only when now is far negative. */
        int64_t delay = (now < 0 && at > INT64_MAX + now) ? INT64_MAX : at - now;
        *ret_delay_ms = clamp_ms(delay, cap_ms);
        return 0;
}

int retry_after_parse(const char *value, size_t len, tg_wall_ms now, int64_t cap_ms,
                      retry_after_date_fn date_fn, int64_t *ret_delay_ms)
{
        if (cap_ms < 0 || (!value && len > 0) || !ret_delay_ms)
                return TG_EINVAL;
        if (!value)
                return TG_EPARSE;

        size_t start = 0;
        size_t end = len;
        while (start < end && is_space(value[start]))
                start++;
        while (end > start && is_space(value[end - 1]))
                end--;
        if (start == end)
                return TG_EPARSE;

        const char *s = value + start;
        size_t n = end - start;
        if (is_digit(s[0]))
                return parse_delta(s, n, cap_ms, ret_delay_ms);
        return parse_date(s, n, now, cap_ms, date_fn, ret_delay_ms);
}

/* A line of digits, commas, spaces and tabs with at least one comma. */
static bool is_delta_list(const char *s, size_t len)
{
        bool comma = false;

        for (size_t i = 0; i < len; i++) {
                if (s[i] == ',')
                        comma = true;
                else if (!is_digit(s[i]) && !is_space(s[i]))
                        return false;
        }
        return comma;
}

/* Parses one value and folds it into the longest so far. */
static void keep_longest(const char *value, size_t len, tg_wall_ms now, int64_t cap_ms,
                         retry_after_date_fn date_fn, bool *found, int64_t *longest)
{
        int64_t v = 0;

        if (retry_after_parse(value, len, now, cap_ms, date_fn, &v) != 0)
                return;
        if (!*found || v > *longest)
                *longest = v;
        *found = true;
}

int retry_after_parse_all(const char *values, size_t len, tg_wall_ms now, int64_t cap_ms,
                          retry_after_date_fn date_fn, int64_t *ret_delay_ms)
{
        bool found = false;
        int64_t longest = 0;
        size_t start = 0;

        if (cap_ms < 0 || (!values && len > 0) || !ret_delay_ms)
                return TG_EINVAL;
        while (values && start < len) {
                size_t end = start;
                while (end < len && values[end] != '\n')
                        end++;
                const char *line = values + start;
                size_t n = end - start;
                if (is_delta_list(line, n)) {
                        size_t p = 0;
                        while (p <= n) {
                                size_t q = p;
                                while (q < n && line[q] != ',')
                                        q++;
                                keep_longest(line + p, q - p, now, cap_ms, date_fn, &found,
                                             &longest);
                                p = q + 1;
                        }
                } else {
                        keep_longest(line, n, now, cap_ms, date_fn, &found, &longest);
                }
                start = end + 1;
        }
        if (!found)
                return TG_EPARSE;
        *ret_delay_ms = longest;
        return 0;
}
