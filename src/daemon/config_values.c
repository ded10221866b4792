/*
 * config_values — reading one value of the file into the config, and
 * writing a value back as the file would hold it (for the docs and the
 * reload diff). Numbers (core/strnum: the whole value, inside the row's
 * range), booleans, bounded strings, the store's URL (sqlite:// and a
 * mysql:// url's parameters), the API's listen address, the provider's
 * URL, path templates, header names, the classification rules, the
 * provider mapping's fields and a few-words choice.
 *
 * Invariants:
 *   - a setter writes the config only with a whole valid value: too long
 *     is an error, never a silent cut;
 *   - a bad value is quoted bounded and printable (config_quote), except
 *     the store's URL, which is never quoted (it may carry a password);
 *   - relative paths are resolved against the config file's folder
 *     (config_resolve_path), so the same file means the same store
 *     whatever the current directory of the process;
 *   - a value shown (config_show_value) reads back as the same value.
 */
#include "daemon/config_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/backoff.h"
#include "core/encode.h"
#include "core/provider_map.h"
#include "core/strnum.h"
#include "core/template.h"
#include "core/tg_error.h"

/* ---- messages and paths ------------------------------------------------- */

const char *config_quote(const char *value, char *buf, size_t size)
{
        size_t n = 0;

        for (; value[n] && n + 4 < size && n < VALUE_QUOTE_MAX; n++) {
                unsigned char c = (unsigned char)value[n];
                buf[n] = (c < 0x20 || c == 0x7f || c == '"') ? '?' : (char)c;
        }
        buf[n] = '\0';
        if (value[n] && n + 4 <= size)
                snprintf(buf + n, size - n, "...");
        return buf;
}

int config_resolve_path(const struct load *load, const char *path, char *dst, size_t size)
{
        int n;

        if (path[0] == '/' || load->dir[0] == '\0')
                n = snprintf(dst, size, "%s", path);
        else
                n = snprintf(dst, size, "%s/%s", load->dir, path);
        return n < 0 || (size_t)n >= size ? TG_ERANGE : 0;
}

/* ---- typed values -------------------------------------------------------- */

/* A whole-string base-10 integer. No leading space (inih strips it), no
 * trailing junk, no overflow. */
static int parse_i64(const char *value, int64_t *ret)
{
        char *end = NULL;
        long long v;

        if (value[0] == '\0' || value[0] == ' ' || value[0] == '\t')
                return TG_EPARSE;
        errno = 0;
        v = strtoll(value, &end, 10);
        if (errno == ERANGE)
                return TG_ERANGE;
        if (errno != 0 || end == value || *end != '\0')
                return TG_EPARSE;
        *ret = (int64_t)v;
        return 0;
}

static int parse_bool(const char *value, bool *ret)
{
        static const char *const yes[] = {"true", "yes", "on", "1"};
        static const char *const no[] = {"false", "no", "off", "0"};

        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                if (strcasecmp(value, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(value, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return TG_EPARSE;
}

static int set_integer(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        int64_t v = 0;
        void *dst = (char *)&load->config + key->offset;

        if (strnum_i64(value, key->lo, key->hi, &v) < 0)
                return config_key_error(load, key, "must be an integer in [%lld, %lld], got \"%s\"",
                                        (long long)key->lo, (long long)key->hi,
                                        config_quote(value, q, sizeof(q)));
        switch (key->type) {
        case KEY_I64: {
                /* The range keeps v * scale far inside int64_t. */
                int64_t stored = v * key->scale;
                memcpy(dst, &stored, sizeof(stored));
                break;
        }
        case KEY_UINT: {
                unsigned stored = (unsigned)v;
                memcpy(dst, &stored, sizeof(stored));
                break;
        }
        case KEY_SIZE: {
                size_t stored = (size_t)v;
                memcpy(dst, &stored, sizeof(stored));
                break;
        }
        default:
                return config_key_error(load, key, "internal: not an integer key");
        }
        return 1;
}

static int set_double(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        double v = 0;
        bool low_ok;

        if (strnum_double(value, key->dlo, key->dhi, &v) < 0)
                return config_key_error(load, key, "must be a number in %c%g, %g], got \"%s\"",
                                        key->dlo_open ? '(' : '[', key->dlo, key->dhi,
                                        config_quote(value, q, sizeof(q)));
        low_ok = !key->dlo_open || v > key->dlo;
        if (!low_ok)
                return config_key_error(load, key, "must be a number in %c%g, %g], got \"%s\"",
                                        key->dlo_open ? '(' : '[', key->dlo, key->dhi,
                                        config_quote(value, q, sizeof(q)));
        memcpy((char *)&load->config + key->offset, &v, sizeof(v));
        return 1;
}

int config_set_string_at(struct load *load, const struct key_def *key, char *dst, size_t size,
                         const char *value)
{
        size_t len = strlen(value);

        if (len >= size)
                return config_key_error(load, key, "too long (at most %zu bytes)", size - 1);
        memcpy(dst, value, len + 1);
        return 1;
}

int config_set_value(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        bool b;

        switch (key->type) {
        case KEY_STRING:
                return config_set_string_at(load, key, (char *)&load->config + key->offset,
                                            key->size, value);
        case KEY_I64:
        case KEY_UINT:
        case KEY_SIZE:
                return set_integer(load, key, value);
        case KEY_DOUBLE:
                return set_double(load, key, value);
        case KEY_BOOL:
                if (parse_bool(value, &b) < 0)
                        return config_key_error(load, key, "must be true or false, got \"%s\"",
                                                config_quote(value, q, sizeof(q)));
                memcpy((char *)&load->config + key->offset, &b, sizeof(b));
                return 1;
        case KEY_CUSTOM:
                return key->custom(load, key, value);
        }
        return config_key_error(load, key, "internal: no type");
}

/* ---- the store and the API ------------------------------------------------ */

/* Appends text to dst[size] at *at, %XX-encoding what a url parameter value
 * cannot hold as it is. 0 or TG_ERANGE. */
static int url_value_append(char *dst, size_t size, size_t *at, const char *text)
{
        for (const char *p = text; *p; p++) {
                unsigned char c = (unsigned char)*p;
                bool plain = isalnum(c) || strchr("/._-~+,:@", c);
                int n = plain ? snprintf(dst + *at, size - *at, "%c", c)
                              : snprintf(dst + *at, size - *at, "%%%02X", c);
                if (n < 0 || (size_t)n >= size - *at)
                        return TG_ERANGE;
                *at += (size_t)n;
        }
        return 0;
}

/* mysql://...?password_file=P&socket=S (postgresql://...?password_file=P&
 * host=DIR&sslmode=M, pg true): the parameters a url may have; the paths
 * resolved against the config's folder (written back encoded), and the
 * password file checked like every secret file; sslmode is kept as written
 * (the store checks it). The url is never quoted: it may carry a password.
 * 1, or 0 (an error was recorded). */
static int set_mysql_url(struct load *load, const struct key_def *key, const char *value, bool pg)
{
        char url[sizeof(load->config.store_url)];
        const char *at = strrchr(value, '@');
        const char *q = strchr(at ? at : value, '?');
        size_t len;

        if (!q)
                return config_set_string_at(load, key, load->config.store_url,
                                            sizeof(load->config.store_url), value);
        len = (size_t)(q - value) + 1;
        if (len >= sizeof(url))
                return config_key_error(load, key, "too long (at most %zu bytes)", sizeof(url) - 1);
        memcpy(url, value, len);
        url[len] = '\0';
        for (const char *p = q + 1; *p;) {
                size_t plen = strcspn(p, "&");
                const char *eq = memchr(p, '=', plen);
                char raw[TG_PATH_MAX], path[TG_PATH_MAX];
                size_t nlen;

                if (!eq)
                        return config_key_error(load, key,
                                                "a mysql url parameter needs name=value");
                nlen = (size_t)(eq - p);
                if (len > 0 && url[len - 1] != '?') {
                        if (len + 1 >= sizeof(url))
                                return config_key_error(load, key, "too long");
                        url[len++] = '&';
                }
                if (pg && nlen == 7 && strncmp(p, "sslmode", 7) == 0) {
                        if (len + plen >= sizeof(url))
                                return config_key_error(load, key, "too long");
                        memcpy(url + len, p, plen); /* not a path: as written */
                        len += plen;
                        url[len] = '\0';
                        p += plen;
                        if (*p == '&')
                                p++;
                        continue;
                }
                if (!((nlen == 13 && strncmp(p, "password_file", 13) == 0) ||
                      (!pg && nlen == 6 && strncmp(p, "socket", 6) == 0) ||
                      (pg && nlen == 4 && strncmp(p, "host", 4) == 0)))
                        return config_key_error(
                            load, key, "unknown %s url parameter \"%.*s\" (known: %s)",
                            pg ? "postgresql" : "mysql", (int)(nlen < 32 ? nlen : 32), p,
                            pg ? "password_file, host, sslmode" : "password_file, socket");
                if (encode_percent_decode(ENCODE_PATH_SEGMENT, eq + 1, plen - nlen - 1, raw,
                                          sizeof(raw), NULL) < 0 ||
                    raw[0] == '\0')
                        return config_key_error(load, key, "%.*s: not a path", (int)nlen, p);
                if (config_resolve_path(load, raw, path, sizeof(path)) < 0)
                        return config_key_error(load, key, "%.*s: path too long", (int)nlen, p);
                if (nlen == 13 && config_check_secret_file(load, key, path) == 0)
                        return 0;
                if (len + nlen + 1 >= sizeof(url))
                        return config_key_error(load, key, "too long");
                memcpy(url + len, p, nlen + 1); /* name= */
                len += nlen + 1;
                url[len] = '\0';
                if (url_value_append(url, sizeof(url), &len, path) < 0)
                        return config_key_error(load, key, "too long");
                p += plen;
                if (*p == '&')
                        p++;
        }
        return config_set_string_at(load, key, load->config.store_url,
                                    sizeof(load->config.store_url), url);
}

int config_set_store_url(struct load *load, const struct key_def *key, const char *value)
{
        if (strncmp(value, "sqlite://", 9) == 0) {
                char path[TG_PATH_MAX];
                char url[sizeof(load->config.store_url)];
                int n;

                if (value[9] == '\0')
                        return config_key_error(load, key, "sqlite:// needs a file path");
                if (config_resolve_path(load, value + 9, path, sizeof(path)) < 0)
                        return config_key_error(load, key, "too long (at most %zu bytes)",
                                                sizeof(path) - 1);
                n = snprintf(url, sizeof(url), "sqlite://%s", path);
                if (n < 0 || (size_t)n >= sizeof(url))
                        return config_key_error(load, key, "too long (at most %zu bytes)",
                                                sizeof(url) - 1);
                return config_set_string_at(load, key, load->config.store_url,
                                            sizeof(load->config.store_url), url);
        }
        if (strncmp(value, "mysql://", 8) == 0) {
                if (value[8] == '\0')
                        return config_key_error(load, key, "mysql:// needs user:pass@host:port/db");
                return set_mysql_url(load, key, value, false);
        }
        if (strncmp(value, "postgresql://", 13) == 0 || strncmp(value, "postgres://", 11) == 0) {
                const char *db = strchr(strstr(value, "://") + 3, '/');

                if (!db || db[1] == '\0' || db[1] == '?')
                        return config_key_error(load, key, "postgresql:// needs user@host:port/db");
                return set_mysql_url(load, key, value, true);
        }
        /* Not quoted: a mysql url without the scheme could still carry a
         * password. */
        return config_key_error(load, key, "must start with sqlite://, mysql:// or postgresql://");
}

/* host:port, [v6]:port. The port may be 0 (any free port, for tests). */
int config_set_listen(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        char host[sizeof(load->config.api_listen_host)];
        const char *colon;
        const char *hstart = value;
        size_t hlen;
        int64_t port = 0;

        if (value[0] == '[') {
                const char *close = strchr(value, ']');
                if (!close || close[1] != ':')
                        goto bad;
                hstart = value + 1;
                hlen = (size_t)(close - hstart);
                colon = close + 1;
        } else {
                colon = strrchr(value, ':');
                if (!colon || memchr(value, ':', (size_t)(colon - value)))
                        goto bad; /* no port, or an unbracketed IPv6 address */
                hlen = (size_t)(colon - value);
        }
        if (hlen == 0 || hlen >= sizeof(host))
                goto bad;
        memcpy(host, hstart, hlen);
        host[hlen] = '\0';
        for (size_t i = 0; i < hlen; i++) {
                unsigned char c = (unsigned char)host[i];
                if (c <= 0x20 || c >= 0x7f || c == '/' || c == '[' || c == ']')
                        goto bad;
        }
        if (parse_i64(colon + 1, &port) < 0 || port < 0 || port > 65535)
                return config_key_error(load, key,
                                        "port must be an integer in [0, 65535], got \"%s\"",
                                        config_quote(value, q, sizeof(q)));
        memcpy(load->config.api_listen_host, host, hlen + 1);
        load->config.api_listen_port = (int)port;
        return 1;
bad:
        return config_key_error(load, key, "must be host:port or [ipv6]:port, got \"%s\"",
                                config_quote(value, q, sizeof(q)));
}

void config_show_listen(const struct tg_config *config, char *buf, size_t size)
{
        /* An IPv6 host is written back in brackets, as config_set_listen reads it. */
        bool v6 = strchr(config->api_listen_host, ':') != NULL;

        snprintf(buf, size, "%s%s%s:%d", v6 ? "[" : "", config->api_listen_host, v6 ? "]" : "",
                 config->api_listen_port);
}

/* ---- the provider --------------------------------------------------------- */

int config_set_base_url(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        const char *rest;

        if (strncmp(value, "http://", 7) == 0)
                rest = value + 7;
        else if (strncmp(value, "https://", 8) == 0)
                rest = value + 8;
        else
                return config_key_error(load, key,
                                        "must start with http:// or https://, got \"%s\"",
                                        config_quote(value, q, sizeof(q)));
        if (rest[0] == '\0' || rest[0] == '/')
                return config_key_error(load, key, "needs a host, got \"%s\"",
                                        config_quote(value, q, sizeof(q)));
        for (const char *p = value; *p; p++) {
                unsigned char c = (unsigned char)*p;
                if (c <= 0x20 || c >= 0x7f)
                        return config_key_error(load, key,
                                                "must not contain spaces or control bytes");
        }
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

/* The three provider paths are templates (core/provider_map.h): the row's
 * arg says which fields each may use (its enum map_path). */
int config_set_path(struct load *load, const struct key_def *key, const char *value)
{
        struct template_error terr;
        struct template t;

        if (map_path_parse((enum map_path)key->arg, value, &t, &terr) < 0)
                return config_key_error(load, key, "%s", terr.message);
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

/* Whether the n bytes at s are an HTTP header name: an RFC 9110 token. */
static bool header_token(const char *s, size_t n)
{
        static const char extra[] = "!#$%&'*+-.^_`|~";

        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                          (c >= '0' && c <= '9') || (c != '\0' && strchr(extra, c));
                if (!ok)
                        return false;
        }
        return n > 0;
}

/* An HTTP header name. */
int config_set_header_name(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];

        if (value[0] == '\0')
                return config_key_error(load, key, "must not be empty");
        if (!header_token(value, strlen(value)))
                return config_key_error(load, key, "not a valid HTTP header name: \"%s\"",
                                        config_quote(value, q, sizeof(q)));
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

int config_set_token_path(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];

        if (value[0] != '/' || strcspn(value, " \t\r\n?#{}") != strlen(value))
                return config_key_error(
                    load, key,
                    "must be a path on provider.base_url (\"/v1/oauth2/token\"), "
                    "not \"%s\"",
                    config_quote(value, q, sizeof(q)));
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

int config_set_directory(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        struct stat st;

        if (value[0] == '\0')
                return config_set_string_at(load, key, (char *)&load->config + key->offset,
                                            key->size, value);
        if (value[0] != '/')
                return config_key_error(load, key, "must be an absolute path, not \"%s\"",
                                        config_quote(value, q, sizeof(q)));
        if (stat(value, &st) < 0 || !S_ISDIR(st.st_mode))
                return config_key_error(load, key, "%s is not a directory",
                                        config_quote(value, q, sizeof(q)));
        if (access(value, R_OK | W_OK | X_OK) < 0)
                return config_key_error(load, key,
                                        "%s must be readable and writable by this user (its "
                                        "files are moved to done/ and failed/ in it)",
                                        config_quote(value, q, sizeof(q)));
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

int config_set_signing_string(struct load *load, const struct key_def *key, const char *value)
{
        struct template_error terr;
        struct template t;

        if (value[0] == '\0')
                return config_key_error(load, key, "must not be empty");
        if (template_parse(value, TPL_SIGNING_FIELDS, &t, &terr) < 0)
                return config_key_error(load, key, "%s", terr.message);
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

int config_set_prefix(struct load *load, const struct key_def *key, const char *value)
{
        for (const char *p = value; *p; p++) {
                unsigned char c = (unsigned char)*p;
                if (c < 0x21 || c > 0x7e)
                        return config_key_error(load, key,
                                                "must be printable ASCII without spaces");
        }
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

int config_set_body_field(struct load *load, const struct key_def *key, const char *value)
{
        struct template_error terr;
        struct body_field f;
        struct tg_config *c = &load->config;

        if (c->provider_body_field_count >= TG_CONFIG_MAX_BODY)
                return config_key_error(load, key, "at most %d fields", TG_CONFIG_MAX_BODY);
        if (strlen(value) >= sizeof(c->provider_body_fields[0]))
                return config_key_error(load, key, "too long");
        if (body_field_parse(value, &f, &terr) < 0)
                return config_key_error(load, key, "%s", terr.message);
        snprintf(c->provider_body_fields[c->provider_body_field_count++],
                 sizeof(c->provider_body_fields[0]), "%s", value);
        return 1;
}

int config_set_field_source(struct load *load, const struct key_def *key, const char *value)
{
        struct template_error terr;
        struct field_source fs;

        if (field_source_parse(value, &fs, &terr) < 0)
                return config_key_error(load, key, "%s", terr.message);
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

int config_set_list_cursor_param(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];

        if (value[0] && !list_cursor_param_ok(value))
                return config_key_error(load, key,
                                        "a query parameter name of letters, digits and -._~ "
                                        "(at most 63: \"starting_after\"), not \"%s\"",
                                        config_quote(value, q, sizeof(q)));
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

int config_set_fixed_header(struct load *load, const struct key_def *key, const char *value)
{
        struct tg_config *c = &load->config;
        const char *colon = strchr(value, ':');

        if (c->provider_header_count >= TG_CONFIG_MAX_HEADERS)
                return config_key_error(load, key, "at most %d headers", TG_CONFIG_MAX_HEADERS);
        if (strlen(value) >= sizeof(c->provider_headers[0]))
                return config_key_error(load, key, "too long");
        if (!colon)
                return config_key_error(load, key, "must be \"Name: value\"");
        if (!header_token(value, (size_t)(colon - value)))
                return config_key_error(load, key, "not a valid HTTP header name");
        for (const char *p = colon + 1; *p; p++)
                if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
                        return config_key_error(load, key, "the value must be printable ASCII");
        snprintf(c->provider_headers[c->provider_header_count++], sizeof(c->provider_headers[0]),
                 "%s", value);
        return 1;
}

void config_clear_fixed_headers(struct tg_config *config)
{
        config->provider_header_count = 0;
}

int config_set_reconcile(struct load *load, const struct key_def *key, const char *value)
{
        struct template_error terr;
        struct request_map *m = calloc(1, sizeof(*m));
        int r;

        if (!m)
                return config_key_error(load, key, "out of memory");
        r = reconcile_parse(value, m, &terr);
        /* the policy replays where the contract returns the stored result */
        if (r == 0) {
                bool other = false;
                load->config.policy.replay = m->replay;
                load->config.policy.notification = m->notification;
                for (unsigned i = 0; i < m->nreconcile; i++)
                        other = other || m->reconcile[i] != RECONCILE_REFUND_ID;
                /* refund_id alone: no query without the provider's id */
                load->config.policy.query_needs_refund_id = m->nreconcile > 0 && !other;
        }
        free(m);
        if (r < 0)
                return config_key_error(load, key, "%s", terr.message);
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

int config_set_status_list(struct load *load, const struct key_def *key, const char *value)
{
        struct template_error terr;
        struct status_list l;

        if (status_list_parse(value, &l, &terr) < 0)
                return config_key_error(load, key, "%s", terr.message);
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    value);
}

/* ---- words, rules, durations ---------------------------------------------- */

/* The row's words as a message says them: "a, b or c". */
static void choice_text(const char *words, char *buf, size_t size)
{
        struct tg_strbuf sb;
        const char *p = words;
        unsigned n = 0, i = 0;

        for (const char *w = words; *w; w++)
                n += w[0] != ' ' && (w[1] == ' ' || w[1] == '\0');
        tg_strbuf_init(&sb, buf, size);
        while (*p) {
                size_t len;

                p += strspn(p, " ");
                len = strcspn(p, " ");
                if (len == 0)
                        break;
                if (i > 0)
                        tg_strbuf_adds(&sb, i + 1 == n ? " or " : ", ");
                tg_strbuf_add(&sb, p, len);
                p += len;
                i++;
        }
}

/* A key that takes one of a few words (the row's words). */
int config_set_choice(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8], word[16], text[128];

        if (!key->words)
                return config_key_error(load, key, "internal: no choices");
        snprintf(word, sizeof(word), " %s ", value);
        if (value[0] && strlen(value) < 12 && !strchr(value, ' ') && strstr(key->words, word))
                return config_set_string_at(load, key, (char *)&load->config + key->offset,
                                            key->size, value);
        choice_text(key->words, text, sizeof(text));
        return config_key_error(load, key, "must be %s, got \"%s\"", text,
                                config_quote(value, q, sizeof(q)));
}

int config_set_jitter(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        enum backoff_jitter jitter;

        if (backoff_jitter_parse(value, &jitter) < 0)
                return config_key_error(load, key,
                                        "must be none, full, equal or decorrelated, got \"%s\"",
                                        config_quote(value, q, sizeof(q)));
        load->config.policy.backoff.jitter = jitter;
        return 1;
}

void config_show_jitter(const struct tg_config *config, char *buf, size_t size)
{
        snprintf(buf, size, "%s", backoff_jitter_name(config->policy.backoff.jitter));
}

int config_set_rule(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        struct classify_rule rule;

        if (load->config.rule_count >= TG_CONFIG_MAX_RULES)
                return config_key_error(load, key, "at most %d rules", TG_CONFIG_MAX_RULES);
        if (classify_rule_parse(value, &rule) < 0)
                return config_key_error(load, key,
                                        "must be \"<post|query> <status>[-<status>] [code=...] "
                                        "[status=...] => <class>\", got \"%s\"",
                                        config_quote(value, q, sizeof(q)));
        load->config.rules[load->config.rule_count++] = rule;
        return 1;
}

int config_set_keep_days(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        int64_t days = 0;

        if (strnum_i64(value, 0, 36500, &days) < 0)
                return config_key_error(load, key,
                                        "must be an integer in [0, 36500] (0: keep forever), "
                                        "got \"%s\"",
                                        config_quote(value, q, sizeof(q)));
        load->config.retention_keep_ms = days * DAY_MS;
        return 1;
}

void config_show_keep_days(const struct tg_config *config, char *buf, size_t size)
{
        snprintf(buf, size, "%lld", (long long)(config->retention_keep_ms / DAY_MS));
}

/* ---- values written back ---------------------------------------------------- */

/* The shortest %g that reads back as the same double. */
static void show_double(double v, char *buf, size_t size)
{
        for (int digits = 1; digits <= 17; digits++) {
                snprintf(buf, size, "%.*g", digits, v);
                if (strtod(buf, NULL) == v)
                        return;
        }
}

int config_show_value(const struct key_def *key, const struct tg_config *config, char *buf,
                      size_t size)
{
        const char *at = (const char *)config + key->offset;

        buf[0] = '\0';
        switch (key->type) {
        case KEY_I64: {
                int64_t v;
                memcpy(&v, at, sizeof(v));
                if (v % key->scale != 0)
                        return TG_EINVAL;
                snprintf(buf, size, "%lld", (long long)(v / key->scale));
                return 0;
        }
        case KEY_UINT: {
                unsigned v;
                memcpy(&v, at, sizeof(v));
                snprintf(buf, size, "%u", v);
                return 0;
        }
        case KEY_SIZE: {
                size_t v;
                memcpy(&v, at, sizeof(v));
                snprintf(buf, size, "%zu", v);
                return 0;
        }
        case KEY_DOUBLE: {
                double v;
                memcpy(&v, at, sizeof(v));
                show_double(v, buf, size);
                return 0;
        }
        case KEY_BOOL: {
                bool v;
                memcpy(&v, at, sizeof(v));
                snprintf(buf, size, "%s", v ? "true" : "false");
                return 0;
        }
        case KEY_STRING:
                snprintf(buf, size, "%s", at);
                return 0;
        case KEY_CUSTOM:
                if (key->show)
                        key->show(config, buf, size);
                else if (key->size > 0)
                        snprintf(buf, size, "%s", at); /* a string field */
                return 0;
        }
        return TG_EINVAL;
}

/* ---- lists an account replaces ------------------------------------------- */

void config_clear_body_fields(struct tg_config *config)
{
        memset(config->provider_body_fields, 0, sizeof(config->provider_body_fields));
        config->provider_body_field_count = 0;
}

int config_set_notify_allow(struct load *load, const struct key_def *key, const char *value)
{
        struct tg_config *c = &load->config;

        if (c->notify_allow_count >= TG_NOTIFY_ALLOW_MAX)
                return config_key_error(load, key, "at most %d prefixes", TG_NOTIFY_ALLOW_MAX);
        if (url_allow_check(value) < 0)
                return config_key_error(load, key,
                                        "must be an http(s) URL prefix: scheme, host, optional "
                                        "port and path, no user info or fragment, at most %d "
                                        "bytes",
                                        URL_ALLOW_MAX);
        snprintf(c->notify_allow[c->notify_allow_count++], sizeof(c->notify_allow[0]), "%s", value);
        return 1;
}

void config_clear_notify_allow(struct tg_config *config)
{
        memset(config->notify_allow, 0, sizeof(config->notify_allow));
        config->notify_allow_count = 0;
}

void config_clear_rules(struct tg_config *config)
{
        memset(config->rules, 0, sizeof(config->rules));
        config->rule_count = 0;
}
