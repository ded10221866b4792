/*
 * rfc3339 — timestamps to Unix milliseconds (see the header). Days from the
 * civil date by Howard Hinnant's algorithm; every field is range-checked
 * (the day against its month, leap years included) before any arithmetic,
 * so no input overflows.
 */
#include "core/rfc3339.h"

#include <stdbool.h>
#include <stdint.h>

#include "core/tg_error.h"

/* n decimal digits at s; false unless all are digits. */
static bool digits(const char *s, int n, int *ret)
{
        int v = 0;

        for (int i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (s[i] - '0');
        }
        *ret = v;
        return true;
}

static bool leap(int y)
{
        return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days(int y, int m)
{
        static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

        return m == 2 && leap(y) ? 29 : days[m - 1];
}

/* Days since 1970-01-01 of a valid civil date. */
static int64_t days_from_civil(int y, int m, int d)
{
        int64_t yy = y - (m <= 2);
        int64_t era = (yy >= 0 ? yy : yy - 399) / 400;
        int64_t yoe = yy - era * 400;
        int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

        return era * 146097 + doe - 719468;
}

int rfc3339_parse(const char *text, size_t len, tg_wall_ms *ret_ms)
{
        int y, mo, d, h, mi, sec, oh = 0, om = 0, frac_ms = 0, sign = 0;
        size_t i = 19;

        if (!text || len < 20)
                return TG_EPARSE;
        if (!digits(text, 4, &y) || text[4] != '-' || !digits(text + 5, 2, &mo) || text[7] != '-' ||
            !digits(text + 8, 2, &d) || (text[10] != 'T' && text[10] != 't' && text[10] != ' ') ||
            !digits(text + 11, 2, &h) || text[13] != ':' || !digits(text + 14, 2, &mi) ||
            text[16] != ':' || !digits(text + 17, 2, &sec))
                return TG_EPARSE;
        if (mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo) || h > 23 || mi > 59 || sec > 59)
                return TG_EPARSE;
        if (text[i] == '.') {
                int scale = 100, n = 0;

                for (i++; i < len && text[i] >= '0' && text[i] <= '9'; i++, n++) {
                        frac_ms += (text[i] - '0') * scale;
                        scale /= 10;
                }
                if (n == 0)
                        return TG_EPARSE;
        }
        if (i >= len)
                return TG_EPARSE;
        if ((text[i] == 'Z' || text[i] == 'z') && i + 1 == len) {
                sign = 0;
        } else if ((text[i] == '+' || text[i] == '-') && i + 6 == len &&
                   digits(text + i + 1, 2, &oh) && text[i + 3] == ':' &&
                   digits(text + i + 4, 2, &om) && oh <= 23 && om <= 59) {
                sign = text[i] == '+' ? 1 : -1;
        } else {
                return TG_EPARSE;
        }
        int64_t s = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
        s -= (int64_t)sign * (oh * 3600 + om * 60);
        *ret_ms = s * 1000 + frac_ms;
        return 0;
}
