/*
 * Validation of the stub's contract input, with a small strict JSON reader of
 * its own (RFC 8259: one top-level object, nested values skipped up to a depth
 * bound, strings UTF-8 checked, \u escapes decoded). It is hand-written rather
 * than jansson so that the fuzz target can include this file alone and fuzz
 * exactly the code that guards the stub. Invariants: never reads past
 * body[len), never writes past a field buffer (an over-long string marks its
 * field invalid instead), never allocates, and the result is all or nothing.
 */
#include "request.h"

#include "core/tg_error.h"

#include <string.h>

#define MAX_DEPTH 32
#define NAME_MAX  32

struct cursor {
        const unsigned char *p;
        const unsigned char *end;
};

/* A decoded JSON string: at most cap-1 bytes kept, too_long if more came. */
struct jstr {
        char *buf;
        size_t cap;
        size_t len;
        bool too_long;
        bool has_nul;
};

bool stub_key_valid(const char *key, size_t len)
{
        if (len == 0 || len > STUB_KEY_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)key[i];
                bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' || c == '-';
                if (!ok)
                        return false;
        }
        return true;
}

static void skip_ws(struct cursor *c)
{
        while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
                c->p++;
}

static void jstr_put(struct jstr *s, unsigned char ch)
{
        if (ch == 0)
                s->has_nul = true;
        if (!s->buf)
                return;
        if (s->len + 1 < s->cap) {
                s->buf[s->len++] = (char)ch;
                s->buf[s->len] = '\0';
        } else {
                s->too_long = true;
        }
}

static void put_utf8(struct jstr *s, uint32_t cp)
{
        if (cp < 0x80) {
                jstr_put(s, (unsigned char)cp);
        } else if (cp < 0x800) {
                jstr_put(s, (unsigned char)(0xc0 | (cp >> 6)));
                jstr_put(s, (unsigned char)(0x80 | (cp & 0x3f)));
        } else if (cp < 0x10000) {
                jstr_put(s, (unsigned char)(0xe0 | (cp >> 12)));
                jstr_put(s, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)));
                jstr_put(s, (unsigned char)(0x80 | (cp & 0x3f)));
        } else {
                jstr_put(s, (unsigned char)(0xf0 | (cp >> 18)));
                jstr_put(s, (unsigned char)(0x80 | ((cp >> 12) & 0x3f)));
                jstr_put(s, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)));
                jstr_put(s, (unsigned char)(0x80 | (cp & 0x3f)));
        }
}

static int hex4(struct cursor *c, uint32_t *ret)
{
        uint32_t v = 0;
        if (c->end - c->p < 4)
                return TG_EPARSE;
        for (int i = 0; i < 4; i++) {
                unsigned char h = c->p[i];
                v <<= 4;
                if (h >= '0' && h <= '9')
                        v |= (uint32_t)(h - '0');
                else if (h >= 'a' && h <= 'f')
                        v |= (uint32_t)(h - 'a' + 10);
                else if (h >= 'A' && h <= 'F')
                        v |= (uint32_t)(h - 'A' + 10);
                else
                        return TG_EPARSE;
        }
        c->p += 4;
        *ret = v;
        return 0;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
        unsigned char b = p[0];
        size_t n;
        uint32_t cp, min;
        if (b < 0x80)
                return 1;
        if ((b & 0xe0) == 0xc0) {
                n = 2;
                cp = b & 0x1f;
                min = 0x80;
        } else if ((b & 0xf0) == 0xe0) {
                n = 3;
                cp = b & 0x0f;
                min = 0x800;
        } else if ((b & 0xf8) == 0xf0) {
                n = 4;
                cp = b & 0x07;
                min = 0x10000;
        } else {
                return 0;
        }
        if ((size_t)(end - p) < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (p[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n;
}

/* Reads a string starting at the opening quote; s may have a NULL buf. */
static int parse_string(struct cursor *c, struct jstr *s)
{
        if (c->p >= c->end || *c->p != '"')
                return TG_EPARSE;
        c->p++;
        while (c->p < c->end) {
                unsigned char ch = *c->p;
                if (ch == '"') {
                        c->p++;
                        return 0;
                }
                if (ch < 0x20)
                        return TG_EPARSE;
                if (ch != '\\') {
                        size_t n = utf8_len(c->p, c->end);
                        if (n == 0)
                                return TG_EPARSE;
                        for (size_t i = 0; i < n; i++)
                                jstr_put(s, c->p[i]);
                        c->p += n;
                        continue;
                }
                c->p++;
                if (c->p >= c->end)
                        return TG_EPARSE;
                ch = *c->p++;
                switch (ch) {
                case '"':
                case '\\':
                case '/':
                        jstr_put(s, ch);
                        break;
                case 'b':
                        jstr_put(s, '\b');
                        break;
                case 'f':
                        jstr_put(s, '\f');
                        break;
                case 'n':
                        jstr_put(s, '\n');
                        break;
                case 'r':
                        jstr_put(s, '\r');
                        break;
                case 't':
                        jstr_put(s, '\t');
                        break;
                case 'u': {
                        uint32_t cp, lo;
                        if (hex4(c, &cp) < 0)
                                return TG_EPARSE;
                        if (cp >= 0xdc00 && cp <= 0xdfff)
                                return TG_EPARSE;
                        if (cp >= 0xd800 && cp <= 0xdbff) {
                                if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u')
                                        return TG_EPARSE;
                                c->p += 2;
                                if (hex4(c, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
                                        return TG_EPARSE;
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                        }
                        put_utf8(s, cp);
                        break;
                }
                default:
                        return TG_EPARSE;
                }
        }
        return TG_EPARSE;
}

/*
 * Reads a number with the strict JSON grammar. *ret_is_int tells whether it
 * had neither fraction nor exponent and fits in int64 (then *ret_int holds it).
 */
static int parse_number(struct cursor *c, bool *ret_is_int, int64_t *ret_int)
{
        bool neg = false, is_int = true, overflow = false;
        int64_t v = 0;
        if (c->p < c->end && *c->p == '-') {
                neg = true;
                c->p++;
        }
        if (c->p >= c->end)
                return TG_EPARSE;
        if (*c->p == '0') {
                c->p++;
        } else if (*c->p >= '1' && *c->p <= '9') {
                while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
                        int d = *c->p - '0';
                        if (v > (INT64_MAX - d) / 10)
                                overflow = true;
                        else
                                v = v * 10 + d;
                        c->p++;
                }
        } else {
                return TG_EPARSE;
        }
        if (c->p < c->end && *c->p == '.') {
                is_int = false;
                c->p++;
                if (c->p >= c->end || *c->p < '0' || *c->p > '9')
                        return TG_EPARSE;
                while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
                        c->p++;
        }
        if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
                is_int = false;
                c->p++;
                if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
                        c->p++;
                if (c->p >= c->end || *c->p < '0' || *c->p > '9')
                        return TG_EPARSE;
                while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
                        c->p++;
        }
        *ret_is_int = is_int && !overflow;
        *ret_int = neg ? -v : v;
        return 0;
}

static int literal(struct cursor *c, const char *word)
{
        size_t n = strlen(word);
        if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
                return TG_EPARSE;
        c->p += n;
        return 0;
}

/* Skips any JSON value; depth bounds the recursion. */
static int skip_value(struct cursor *c, int depth)
{
        bool is_int;
        int64_t iv;
        if (depth > MAX_DEPTH)
                return TG_EPARSE;
        skip_ws(c);
        if (c->p >= c->end)
                return TG_EPARSE;
        switch (*c->p) {
        case '"':
                return parse_string(c, &(struct jstr){0});
        case 't':
                return literal(c, "true");
        case 'f':
                return literal(c, "false");
        case 'n':
                return literal(c, "null");
        case '[':
        case '{': {
                unsigned char close = *c->p == '[' ? ']' : '}';
                bool object = close == '}';
                c->p++;
                skip_ws(c);
                if (c->p < c->end && *c->p == close) {
                        c->p++;
                        return 0;
                }
                for (;;) {
                        if (object) {
                                skip_ws(c);
                                if (parse_string(c, &(struct jstr){0}) < 0)
                                        return TG_EPARSE;
                                skip_ws(c);
                                if (c->p >= c->end || *c->p != ':')
                                        return TG_EPARSE;
                                c->p++;
                        }
                        if (skip_value(c, depth + 1) < 0)
                                return TG_EPARSE;
                        skip_ws(c);
                        if (c->p >= c->end)
                                return TG_EPARSE;
                        if (*c->p == ',') {
                                c->p++;
                                continue;
                        }
                        if (*c->p == close) {
                                c->p++;
                                return 0;
                        }
                        return TG_EPARSE;
                }
        }
        default:
                return parse_number(c, &is_int, &iv);
        }
}

enum field { F_OPERATION, F_PAYMENT, F_AMOUNT, F_CURRENCY, F_COUNT };

static const char *const field_names[F_COUNT] = {"operation_id", "payment_id", "amount",
                                                 "currency"};

/* What one field held: its JSON type and, for strings, the decoded text. */
struct seen {
        bool present;
        bool is_string;
        bool is_int;
        int64_t ival;
        struct jstr str;
};

static int parse_member_value(struct cursor *c, struct seen *f)
{
        skip_ws(c);
        if (c->p >= c->end)
                return TG_EPARSE;
        f->present = true;
        if (*c->p == '"') {
                f->is_string = true;
                return parse_string(c, &f->str);
        }
        if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))
                return parse_number(c, &f->is_int, &f->ival);
        return skip_value(c, 1);
}

static bool text_ok(const struct jstr *s, size_t max)
{
        if (s->too_long || s->has_nul || s->len == 0 || s->len > max)
                return false;
        for (size_t i = 0; i < s->len; i++) {
                unsigned char ch = (unsigned char)s->buf[i];
                if (ch < 0x20 || ch == 0x7f)
                        return false;
        }
        return true;
}

int stub_parse_refund_request(const char *body, size_t len, const char **why,
                              struct stub_refund *ret)
{
        char op[STUB_KEY_MAX + 2], pay[STUB_FIELD_MAX + 2], cur[8];
        struct seen f[F_COUNT];
        struct cursor c = {(const unsigned char *)body, (const unsigned char *)body + len};
        const char *dummy;

        if (!why)
                why = &dummy;
        if (!body && len > 0)
                return TG_EINVAL;
        memset(f, 0, sizeof(f));
        f[F_OPERATION].str = (struct jstr){op, sizeof(op), 0, false, false};
        f[F_PAYMENT].str = (struct jstr){pay, sizeof(pay), 0, false, false};
        f[F_CURRENCY].str = (struct jstr){cur, sizeof(cur), 0, false, false};
        op[0] = pay[0] = cur[0] = '\0';

        skip_ws(&c);
        if (c.p >= c.end || *c.p != '{') {
                *why = "body is not a JSON object";
                return TG_EPARSE;
        }
        c.p++;
        skip_ws(&c);
        if (c.p < c.end && *c.p == '}') {
                c.p++;
        } else {
                for (;;) {
                        char name[NAME_MAX];
                        struct jstr n = {name, sizeof(name), 0, false, false};
                        int which = -1;
                        name[0] = '\0';
                        skip_ws(&c);
                        if (parse_string(&c, &n) < 0) {
                                *why = "malformed JSON: member name";
                                return TG_EPARSE;
                        }
                        skip_ws(&c);
                        if (c.p >= c.end || *c.p != ':') {
                                *why = "malformed JSON: expected ':'";
                                return TG_EPARSE;
                        }
                        c.p++;
                        for (int i = 0; i < F_COUNT && !n.too_long && !n.has_nul; i++) {
                                if (strcmp(name, field_names[i]) == 0)
                                        which = i;
                        }
                        if (which >= 0 && f[which].present) {
                                *why = "duplicate field";
                                return TG_EPARSE;
                        }
                        if (which >= 0 ? parse_member_value(&c, &f[which]) < 0
                                       : skip_value(&c, 1) < 0) {
                                *why = "malformed JSON: value";
                                return TG_EPARSE;
                        }
                        skip_ws(&c);
                        if (c.p < c.end && *c.p == ',') {
                                c.p++;
                                continue;
                        }
                        if (c.p < c.end && *c.p == '}') {
                                c.p++;
                                break;
                        }
                        *why = "malformed JSON: expected ',' or '}'";
                        return TG_EPARSE;
                }
        }
        skip_ws(&c);
        if (c.p != c.end) {
                *why = "malformed JSON: trailing data";
                return TG_EPARSE;
        }

        for (int i = 0; i < F_COUNT; i++) {
                if (!f[i].present) {
                        *why = "missing field";
                        return TG_EINVAL;
                }
        }
        if (!f[F_OPERATION].is_string || !text_ok(&f[F_OPERATION].str, STUB_KEY_MAX) ||
            !stub_key_valid(op, f[F_OPERATION].str.len)) {
                *why = "operation_id must be 1-128 chars of [A-Za-z0-9._:-]";
                return TG_EINVAL;
        }
        if (!f[F_PAYMENT].is_string || !text_ok(&f[F_PAYMENT].str, STUB_FIELD_MAX)) {
                *why = "payment_id must be a string of 1-128 printable bytes";
                return TG_EINVAL;
        }
        if (f[F_AMOUNT].is_string || !f[F_AMOUNT].is_int || f[F_AMOUNT].ival <= 0 ||
            f[F_AMOUNT].ival > STUB_AMOUNT_MAX) {
                *why = "amount must be a positive integer in minor units";
                return TG_EINVAL;
        }
        if (!f[F_CURRENCY].is_string || f[F_CURRENCY].str.len != 3 || f[F_CURRENCY].str.too_long ||
            !(cur[0] >= 'A' && cur[0] <= 'Z' && cur[1] >= 'A' && cur[1] <= 'Z' && cur[2] >= 'A' &&
              cur[2] <= 'Z')) {
                *why = "currency must be three upper-case letters";
                return TG_EINVAL;
        }

        memcpy(ret->operation_id, op, f[F_OPERATION].str.len + 1);
        memcpy(ret->payment_id, pay, f[F_PAYMENT].str.len + 1);
        ret->amount = f[F_AMOUNT].ival;
        memcpy(ret->currency, cur, 4);
        return 0;
}

int stub_parse_query_path(const char *path, char ret_operation_id[STUB_KEY_MAX + 1])
{
        size_t plen = strlen(STUB_QUERY_PREFIX);
        size_t n;
        if (!path || strncmp(path, STUB_QUERY_PREFIX, plen) != 0)
                return TG_ENOTFOUND;
        path += plen;
        n = strlen(path);
        if (n == 0 || memchr(path, '/', n))
                return TG_ENOTFOUND;
        if (!stub_key_valid(path, n))
                return TG_EINVAL;
        memcpy(ret_operation_id, path, n + 1);
        return 0;
}
