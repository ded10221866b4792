/*
 * url_allow — the URL shape and the prefix match of url_allow.h. A URL is
 * split once into scheme, host, port and the rest (path and query); two
 * URLs are compared part by part, never as strings, so that
 * "https://a.example:443/" and "https://A.example/" are the same place and
 * "https://a.example.evil/" is not under "https://a.example".
 */
#include "core/url_allow.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "core/tg_error.h"

/* The first n bytes of a and b equal, ASCII letters in either case (a
 * scheme or a host name; core is libc only, so not strncasecmp). */
static bool ascii_case_eq(const char *a, const char *b, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i]))
                        return false;
        return true;
}

struct url_parts {
        bool https;
        const char *host;
        size_t host_len;
        unsigned port;
        const char *rest; /* path and query; "" when none */
};

static int split(const char *url, struct url_parts *ret)
{
        const char *p, *auth_end, *port_at = NULL;
        size_t len;

        if (!url)
                return TG_EINVAL;
        len = strnlen(url, URL_ALLOW_MAX + 1);
        if (len > URL_ALLOW_MAX)
                return TG_EINVAL;
        for (size_t i = 0; i < len; i++)
                if (url[i] <= 0x20 || url[i] >= 0x7f || url[i] == '#')
                        return TG_EINVAL;
        if (ascii_case_eq(url, "https://", 8)) {
                ret->https = true;
                p = url + 8;
        } else if (ascii_case_eq(url, "http://", 7)) {
                ret->https = false;
                p = url + 7;
        } else {
                return TG_EINVAL;
        }
        auth_end = p + strcspn(p, "/?");
        if (memchr(p, '@', (size_t)(auth_end - p)))
                return TG_EINVAL; /* user info */
        if (*p == '[') {
                const char *close = memchr(p, ']', (size_t)(auth_end - p));
                if (!close || close == p + 1)
                        return TG_EINVAL;
                for (const char *c = p + 1; c < close; c++)
                        if (!strchr("0123456789abcdefABCDEF:.", *c))
                                return TG_EINVAL;
                ret->host = p;
                ret->host_len = (size_t)(close - p) + 1;
                if (close + 1 < auth_end) {
                        if (close[1] != ':')
                                return TG_EINVAL;
                        port_at = close + 2;
                }
        } else {
                const char *colon = memchr(p, ':', (size_t)(auth_end - p));
                const char *host_end = colon ? colon : auth_end;
                if (host_end == p)
                        return TG_EINVAL;
                for (const char *c = p; c < host_end; c++)
                        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                              (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'))
                                return TG_EINVAL;
                ret->host = p;
                ret->host_len = (size_t)(host_end - p);
                if (colon)
                        port_at = colon + 1;
        }
        ret->port = ret->https ? 443 : 80;
        if (port_at) {
                unsigned port = 0;
                if (port_at == auth_end || auth_end - port_at > 5)
                        return TG_EINVAL;
                for (const char *c = port_at; c < auth_end; c++) {
                        if (*c < '0' || *c > '9')
                                return TG_EINVAL;
                        port = port * 10 + (unsigned)(*c - '0');
                }
                if (port == 0 || port > 65535)
                        return TG_EINVAL;
                ret->port = port;
        }
        ret->rest = auth_end;
        return 0;
}

int url_allow_check(const char *url)
{
        struct url_parts u;

        return split(url, &u);
}

static bool under(const struct url_parts *u, const struct url_parts *pre)
{
        const char *path = u->rest[0] ? u->rest : "/";
        const char *want = pre->rest[0] ? pre->rest : "/";
        size_t n = strlen(want);

        if (u->https != pre->https || u->port != pre->port || u->host_len != pre->host_len ||
            !ascii_case_eq(u->host, pre->host, u->host_len))
                return false;
        if (strncmp(path, want, n) != 0)
                return false;
        /* "/hooks" is not a prefix of "/hooksevil" */
        return want[n - 1] == '/' || path[n] == '\0' || path[n] == '/' || path[n] == '?';
}

int url_allow_match(const char *url, const char *const *prefixes, size_t n)
{
        struct url_parts u, pre;
        int r = split(url, &u);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (split(prefixes[i], &pre) == 0 && under(&u, &pre))
                        return 0;
        return TG_ENOTFOUND;
}
