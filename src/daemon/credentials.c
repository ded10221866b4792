/*
 * credentials — the credentials file's grammar, matching a secret and
 * making a new credential (see the header). No I/O but the kernel's random
 * bytes; nothing here logs, and no message echoes a salt or a digest.
 */
#include "daemon/credentials.h"

#include <stdio.h>
#include <string.h>

#include "core/encode.h"
#include "core/tg_error.h"
#include "daemon/ui_users.h"
#include "platform/digest.h"

#define HASH_PREFIX "hmac-sha256:"
#define REVOKED     "revoked"

_Static_assert(CREDENTIAL_HASH_LEN == DIGEST_SHA256_LEN, "the hash is an HMAC-SHA256");
_Static_assert(CREDENTIAL_NAME_MAX == UI_NAME_MAX, "a credential signs in to the console");

static const char *const scope_names[SCOPE_COUNT] = {"intake", "read", "operator", "admin"};

const char *credential_scope_name(unsigned scope)
{
        for (unsigned i = 0; i < SCOPE_COUNT; i++)
                if (scope == 1u << i)
                        return scope_names[i];
        return NULL;
}

int credential_scopes_parse(const char *text, size_t len, unsigned *ret_scopes)
{
        unsigned scopes = 0;
        size_t at = 0;

        while (at < len) {
                const char *w = text + at;
                const char *comma = memchr(w, ',', len - at);
                size_t n = comma ? (size_t)(comma - w) : len - at;
                unsigned bit = 0;

                if (n == 3 && memcmp(w, "all", 3) == 0)
                        bit = SCOPES_ALL;
                for (unsigned i = 0; i < SCOPE_COUNT; i++)
                        if (n == strlen(scope_names[i]) && memcmp(w, scope_names[i], n) == 0)
                                bit = 1u << i;
                if (bit == 0)
                        return TG_EINVAL;
                scopes |= bit;
                at += n + (comma ? 1 : 0);
                if (comma && at == len)
                        return TG_EINVAL; /* a trailing comma */
        }
        if (scopes == 0)
                return TG_EINVAL;
        *ret_scopes = scopes;
        return 0;
}

int credential_scopes_format(unsigned scopes, char *buf, size_t size)
{
        size_t at = 0;

        if (size == 0)
                return TG_EFULL;
        buf[0] = '\0';
        for (unsigned i = 0; i < SCOPE_COUNT; i++) {
                int n;
                if (!(scopes & (1u << i)))
                        continue;
                n = snprintf(buf + at, size - at, "%s%s", at ? "," : "", scope_names[i]);
                if (n < 0 || (size_t)n >= size - at)
                        return TG_EFULL;
                at += (size_t)n;
        }
        return 0;
}

bool credential_name_ok(const char *name)
{
        size_t n = name ? strnlen(name, CREDENTIAL_NAME_MAX + 1) : 0;

        if (n == 0 || n > CREDENTIAL_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '@' || c == '-'))
                        return false;
        }
        return true;
}

static int hash_secret(const unsigned char salt[CREDENTIAL_SALT_LEN], const char *secret,
                       size_t len, unsigned char ret[CREDENTIAL_HASH_LEN])
{
        return digest_hmac_sha256(salt, CREDENTIAL_SALT_LEN, secret, len, ret);
}

static int parse_line(const char *line, size_t len, unsigned lineno, struct credential *ret_cred,
                      char *err, size_t err_size)
{
        enum { HEX_SALT = 2 * CREDENTIAL_SALT_LEN, HEX_HASH = 2 * CREDENTIAL_HASH_LEN };
        struct credential c;
        char name[CREDENTIAL_NAME_MAX + 1];
        const char *f;
        size_t pos = 0, n, plen = sizeof(HASH_PREFIX) - 1;

        memset(&c, 0, sizeof(c));
        n = ui_users_next_field(line, len, &pos, &f);
        if (n == 0 || n > CREDENTIAL_NAME_MAX)
                return ui_users_line_error(err, err_size, lineno,
                                           "a name of 1-64 characters comes first");
        memcpy(name, f, n);
        name[n] = '\0';
        if (!credential_name_ok(name))
                return ui_users_line_error(err, err_size, lineno,
                                           "a name is made of A-Z a-z 0-9 . _ @ -");
        memcpy(c.name, name, n + 1);
        n = ui_users_next_field(line, len, &pos, &f);
        if (credential_scopes_parse(f, n, &c.scopes) < 0)
                return ui_users_line_error(err, err_size, lineno,
                                           "the scopes (second field) are a comma-separated set "
                                           "of intake, read, operator, admin, or all");
        n = ui_users_next_field(line, len, &pos, &f);
        if (n != plen + HEX_SALT + 1 + HEX_HASH || memcmp(f, HASH_PREFIX, plen) != 0 ||
            f[plen + HEX_SALT] != ':' ||
            encode_hex_decode(f + plen, c.salt, CREDENTIAL_SALT_LEN) < 0 ||
            encode_hex_decode(f + plen + HEX_SALT + 1, c.hash, CREDENTIAL_HASH_LEN) < 0)
                return ui_users_line_error(err, err_size, lineno,
                                           "the third field must be hmac-sha256:SALT:DIGEST (32 "
                                           "and 64 hex digits; `tollgate token add` writes it)");
        n = ui_users_next_field(line, len, &pos, &f);
        if (n == sizeof(REVOKED) - 1 && memcmp(f, REVOKED, n) == 0) {
                c.revoked = true;
                n = ui_users_next_field(line, len, &pos, &f);
        }
        if (n != 0)
                return ui_users_line_error(err, err_size, lineno,
                                           "a line is: name, scopes, hmac-sha256:salt:digest and "
                                           "`revoked` or nothing");
        *ret_cred = c;
        return 0;
}

struct creds_parse {
        struct credential *creds;
        unsigned max, count;
};

static int creds_line(const char *line, size_t n, unsigned lineno, void *ctx, char *err,
                      size_t err_size)
{
        struct creds_parse *p = ctx;
        struct credential c;
        int r = parse_line(line, n, lineno, &c, err, err_size);

        if (r < 0)
                return r;
        for (unsigned k = 0; k < p->count; k++)
                if (strcmp(p->creds[k].name, c.name) == 0)
                        return ui_users_line_error(err, err_size, lineno,
                                                   "this name is used twice");
        if (p->count >= p->max) {
                ui_users_line_error(err, err_size, lineno, "too many credentials");
                return TG_EFULL;
        }
        p->creds[p->count++] = c;
        return 0;
}

int credentials_parse(const char *text, size_t len, struct credential *creds, unsigned max,
                      unsigned *ret_count, char *err, size_t err_size)
{
        struct creds_parse p = {.creds = creds, .max = max};
        int r;

        if (!text || !creds || !ret_count)
                return TG_EINVAL;
        r = ui_users_each_line(text, len, creds_line, &p, err, err_size);
        if (r < 0)
                return r;
        *ret_count = p.count;
        return 0;
}

int credentials_match(const struct credential *creds, unsigned count, const char *secret,
                      size_t len, unsigned *ret_index)
{
        unsigned char h[CREDENTIAL_HASH_LEN];
        unsigned found = 0;
        bool any = false;

        if (!secret || len == 0)
                return TG_ENOTFOUND;
        /* Every credential, whatever matched before: the time is the same. */
        for (unsigned i = 0; i < count; i++) {
                if (hash_secret(creds[i].salt, secret, len, h) < 0)
                        continue;
                if (digest_equal(h, creds[i].hash, CREDENTIAL_HASH_LEN)) {
                        found = i;
                        any = true;
                }
        }
        explicit_bzero(h, sizeof(h));
        if (!any)
                return TG_ENOTFOUND;
        *ret_index = found;
        return 0;
}

int credential_new(const char *name, unsigned scopes, struct credential *ret_cred,
                   char ret_secret[CREDENTIAL_SECRET_LEN + 1])
{
        unsigned char raw[(CREDENTIAL_SECRET_LEN - 3) / 2];
        struct credential c;
        int r;

        if (!credential_name_ok(name) || scopes == 0 || (scopes & ~SCOPES_ALL))
                return TG_EINVAL;
        memset(&c, 0, sizeof(c));
        snprintf(c.name, sizeof(c.name), "%s", name);
        c.scopes = scopes;
        r = digest_random(c.salt, sizeof(c.salt));
        if (r == 0)
                r = digest_random(raw, sizeof(raw));
        if (r < 0)
                return r;
        memcpy(ret_secret, "tg_", 3);
        encode_hex_text(raw, sizeof(raw), ret_secret + 3, CREDENTIAL_SECRET_LEN - 2);
        explicit_bzero(raw, sizeof(raw));
        r = hash_secret(c.salt, ret_secret, CREDENTIAL_SECRET_LEN, c.hash);
        if (r < 0) {
                explicit_bzero(ret_secret, CREDENTIAL_SECRET_LEN + 1);
                return r;
        }
        *ret_cred = c;
        return 0;
}

int credential_format(const struct credential *cred, char *buf, size_t size)
{
        char scopes[64], salt[2 * CREDENTIAL_SALT_LEN + 1], hash[2 * CREDENTIAL_HASH_LEN + 1];
        int n;

        if (credential_scopes_format(cred->scopes, scopes, sizeof(scopes)) < 0)
                return TG_EFULL;
        encode_hex_text(cred->salt, sizeof(cred->salt), salt, sizeof(salt));
        encode_hex_text(cred->hash, sizeof(cred->hash), hash, sizeof(hash));
        n = snprintf(buf, size, "%-16s %-24s %s%s:%s%s\n", cred->name, scopes, HASH_PREFIX, salt,
                     hash, cred->revoked ? " " REVOKED : "");
        return n < 0 || (size_t)n >= size ? TG_EFULL : 0;
}
