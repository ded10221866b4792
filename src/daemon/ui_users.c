/*
 * ui_users — the users file's grammar (see the header). Pure: no I/O, no
 * allocation. Every refusal names the line, never echoes a digest.
 */
#include "daemon/ui_users.h"

#include <stdio.h>
#include <string.h>

#include "core/encode.h"
#include "core/tg_error.h"

#define LINE_MAX_LEN 512

const char *ui_role_name(enum ui_role role)
{
        return role == UI_ROLE_OPERATOR ? "operator" : "viewer";
}

static bool name_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '@' || c == '-';
}

size_t ui_users_next_field(const char *line, size_t len, size_t *pos, const char **ret_start)
{
        size_t p = *pos, start;

        while (p < len && (line[p] == ' ' || line[p] == '\t'))
                p++;
        start = p;
        while (p < len && line[p] != ' ' && line[p] != '\t')
                p++;
        *pos = p;
        *ret_start = line + start;
        return p - start;
}

int ui_users_line_error(char *err, size_t size, unsigned lineno, const char *what)
{
        if (err && size)
                snprintf(err, size, "line %u: %s", lineno, what);
        return TG_EPARSE;
}

static int parse_line(const char *line, size_t len, unsigned lineno, struct ui_user *ret_user,
                      char *err, size_t err_size)
{
        struct ui_user u;
        const char *f;
        size_t pos = 0, n;

        memset(&u, 0, sizeof(u));
        n = ui_users_next_field(line, len, &pos, &f);
        if (n == 0 || n > UI_NAME_MAX)
                return ui_users_line_error(err, err_size, lineno,
                                           "a name of 1-64 characters comes first");
        for (size_t i = 0; i < n; i++)
                if (!name_char(f[i]))
                        return ui_users_line_error(err, err_size, lineno,
                                                   "a name is made of A-Z a-z 0-9 . _ @ -");
        memcpy(u.name, f, n);
        n = ui_users_next_field(line, len, &pos, &f);
        if (n == 8 && memcmp(f, "operator", 8) == 0)
                u.role = UI_ROLE_OPERATOR;
        else if (n == 6 && memcmp(f, "viewer", 6) == 0)
                u.role = UI_ROLE_VIEWER;
        else
                return ui_users_line_error(err, err_size, lineno,
                                           "the role (second field) must be operator or viewer");
        n = ui_users_next_field(line, len, &pos, &f);
        if (n != 7 + 2 * UI_DIGEST_LEN || memcmp(f, "sha256:", 7) != 0)
                return ui_users_line_error(err, err_size, lineno,
                                           "the third field must be sha256: and 64 hex digits (the "
                                           "token's SHA-256, never the token)");
        if (encode_hex_decode(f + 7, u.token_sha256, UI_DIGEST_LEN) < 0)
                return ui_users_line_error(err, err_size, lineno,
                                           "the digest must be 64 hex digits");
        n = ui_users_next_field(line, len, &pos, &f);
        if (n != 0)
                return ui_users_line_error(err, err_size, lineno,
                                           "three fields only: name, role, sha256:digest");
        *ret_user = u;
        return 0;
}

int ui_users_each_line(const char *text, size_t len, ui_users_line_fn fn, void *ctx, char *err,
                       size_t err_size)
{
        unsigned lineno = 0;
        size_t at = 0;

        if (!text || !fn)
                return TG_EINVAL;
        while (at < len) {
                const char *line = text + at;
                const char *nl = memchr(line, '\n', len - at);
                size_t n = nl ? (size_t)(nl - line) : len - at;
                size_t first = 0;
                int r;

                at += n + (nl ? 1 : 0);
                lineno++;
                if (n > 0 && line[n - 1] == '\r')
                        n--;
                if (n > LINE_MAX_LEN)
                        return ui_users_line_error(err, err_size, lineno, "line too long");
                for (size_t i = 0; i < n; i++) {
                        unsigned char c = (unsigned char)line[i];
                        if ((c < 0x20 && c != '\t') || c == 0x7f)
                                return ui_users_line_error(err, err_size, lineno,
                                                           "control character");
                }
                while (first < n && (line[first] == ' ' || line[first] == '\t'))
                        first++;
                if (first == n || line[first] == '#')
                        continue;
                r = fn(line, n, lineno, ctx, err, err_size);
                if (r < 0)
                        return r;
        }
        return 0;
}

struct users_parse {
        struct ui_user *users;
        unsigned max, count;
};

static int users_line(const char *line, size_t n, unsigned lineno, void *ctx, char *err,
                      size_t err_size)
{
        struct users_parse *p = ctx;
        struct ui_user u;
        int r = parse_line(line, n, lineno, &u, err, err_size);

        if (r < 0)
                return r;
        for (unsigned k = 0; k < p->count; k++) {
                if (strcmp(p->users[k].name, u.name) == 0)
                        return ui_users_line_error(err, err_size, lineno,
                                                   "this name is used twice");
                if (memcmp(p->users[k].token_sha256, u.token_sha256, UI_DIGEST_LEN) == 0)
                        return ui_users_line_error(err, err_size, lineno,
                                                   "this token is given to two users");
        }
        if (p->count >= p->max) {
                ui_users_line_error(err, err_size, lineno, "too many users");
                return TG_EFULL;
        }
        p->users[p->count++] = u;
        return 0;
}

int ui_users_parse(const char *text, size_t len, struct ui_user *users, unsigned max,
                   unsigned *ret_count, char *err, size_t err_size)
{
        struct users_parse p = {.users = users, .max = max};
        int r;

        if (!text || !users || !ret_count)
                return TG_EINVAL;
        r = ui_users_each_line(text, len, users_line, &p, err, err_size);
        if (r < 0)
                return r;
        *ret_count = p.count;
        return 0;
}
