/*
 * keep_alive — the timeout parameter of a Keep-Alive header (keep_alive.h).
 * A small scanner over "name=value" parameters separated by commas (or
 * semicolons, which some servers write); no allocation, bounded by len.
 */
#include "core/keep_alive.h"

#include <stdbool.h>

#include "core/tg_error.h"

static bool blank(char ch)
{
        return ch == ' ' || ch == '\t';
}

static bool separator(char ch)
{
        return ch == ',' || ch == ';';
}

static char lower(char ch)
{
        return ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
}

/* The bytes [a, b) are "timeout", whatever the case. */
static bool is_timeout(const char *s, size_t a, size_t b)
{
        static const char want[] = "timeout";
        if (b - a != sizeof(want) - 1)
                return false;
        for (size_t i = 0; i < b - a; i++)
                if (lower(s[a + i]) != want[i])
                        return false;
        return true;
}

/* The value [a, b), quotes taken off, as whole seconds: -1 when it is not
 * digits; cut at KEEP_ALIVE_MAX_S. */
static int64_t seconds(const char *s, size_t a, size_t b)
{
        if (b - a >= 2 && s[a] == '"' && s[b - 1] == '"') {
                a++;
                b--;
        }
        if (a == b)
                return -1;
        int64_t v = 0;
        for (size_t i = a; i < b; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                if (v <= KEEP_ALIVE_MAX_S)
                        v = v * 10 + (s[i] - '0');
        }
        return v > KEEP_ALIVE_MAX_S ? KEEP_ALIVE_MAX_S : v;
}

int keep_alive_timeout_ms(const char *value, size_t len, int64_t *ret_ms)
{
        if (!value && len > 0)
                return TG_EINVAL;
        int64_t best = -1;
        size_t i = 0;
        while (i < len) {
                /* one parameter: [i, end) */
                size_t end = i;
                while (end < len && !separator(value[end]))
                        end++;
                size_t eq = i;
                while (eq < end && value[eq] != '=')
                        eq++;
                size_t na = i, nb = eq;
                while (na < nb && blank(value[na]))
                        na++;
                while (nb > na && blank(value[nb - 1]))
                        nb--;
                if (eq < end && is_timeout(value, na, nb)) {
                        size_t va = eq + 1, vb = end;
                        while (va < vb && blank(value[va]))
                                va++;
                        while (vb > va && blank(value[vb - 1]))
                                vb--;
                        int64_t s = seconds(value, va, vb);
                        if (s >= 0 && (best < 0 || s < best))
                                best = s;
                }
                i = end + 1;
        }
        if (best < 0)
                return TG_EPARSE;
        *ret_ms = best * 1000;
        return 0;
}
