/*
 * encode — bounded text building, percent/hex/base64 encodings, the hex
 * and percent decoders and a UTF-8 text check. See encode.h. Character classes are spelled out as ASCII
 * ranges: no locale can widen them.
 */
#include "core/encode.h"

#include <string.h>

#include "core/tg_error.h"

void tg_strbuf_init(struct tg_strbuf *sb, char *buf, size_t size)
{
        sb->buf = buf;
        sb->size = size;
        sb->len = 0;
        sb->overflow = size == 0;
        if (size > 0)
                buf[0] = '\0';
}

void tg_strbuf_add(struct tg_strbuf *sb, const char *s, size_t len)
{
        if (sb->overflow)
                return;
        if (len >= sb->size - sb->len) {
                sb->overflow = true;
                return;
        }
        memcpy(sb->buf + sb->len, s, len);
        sb->len += len;
        sb->buf[sb->len] = '\0';
}

void tg_strbuf_adds(struct tg_strbuf *sb, const char *s)
{
        tg_strbuf_add(sb, s, strlen(s));
}

int tg_strbuf_status(const struct tg_strbuf *sb)
{
        return sb->overflow ? TG_EFULL : 0;
}

static bool unreserved(unsigned char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '.' || c == '_' || c == '~';
}

void encode_percent(enum encode_pct mode, const char *src, size_t len, struct tg_strbuf *out)
{
        static const char hex[] = "0123456789ABCDEF";

        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)src[i];
                char esc[3];

                if (unreserved(c)) {
                        tg_strbuf_add(out, (const char *)&src[i], 1);
                } else if (c == ' ' && mode == ENCODE_FORM) {
                        tg_strbuf_add(out, "+", 1);
                } else {
                        esc[0] = '%';
                        esc[1] = hex[c >> 4];
                        esc[2] = hex[c & 15];
                        tg_strbuf_add(out, esc, 3);
                }
        }
}

void encode_hex(const unsigned char *src, size_t len, struct tg_strbuf *out)
{
        static const char hex[] = "0123456789abcdef";

        for (size_t i = 0; i < len; i++) {
                char two[2] = {hex[src[i] >> 4], hex[src[i] & 15]};
                tg_strbuf_add(out, two, 2);
        }
}

/* The value of a hex digit of either case, or -1. */
static int hex_value(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int encode_hex_decode(const char *src, unsigned char *ret, size_t len)
{
        for (size_t i = 0; i < 2 * len; i++)
                if (hex_value(src[i]) < 0)
                        return TG_EPARSE;
        for (size_t i = 0; i < len; i++)
                ret[i] = (unsigned char)(hex_value(src[2 * i]) << 4 | hex_value(src[2 * i + 1]));
        return 0;
}

int encode_percent_decode(enum encode_pct mode, const char *src, size_t len, char *out, size_t size,
                          size_t *ret_len)
{
        size_t n = 0;
        int r = 0;

        if (size == 0)
                return TG_EFULL;
        /* n <= i throughout: writing out[n] never overwrites what is still
         * to be read when out is src. */
        for (size_t i = 0; i < len; i++) {
                char c = src[i];

                if (c == '%') {
                        int hi = len - i >= 3 ? hex_value(src[i + 1]) : -1;
                        int lo = hi >= 0 ? hex_value(src[i + 2]) : -1;

                        if (lo < 0) {
                                r = TG_EPARSE;
                                break;
                        }
                        c = (char)(hi << 4 | lo);
                        i += 2;
                } else if (c == '+' && mode == ENCODE_FORM) {
                        c = ' ';
                }
                if (c == '\0') {
                        r = TG_EPARSE;
                        break;
                }
                if (n + 1 >= size) {
                        r = TG_EFULL;
                        break;
                }
                out[n++] = c;
        }
        out[n] = '\0';
        if (r == 0 && ret_len)
                *ret_len = n;
        return r;
}

int encode_hex_text(const unsigned char *src, size_t len, char *out, size_t size)
{
        struct tg_strbuf sb;

        tg_strbuf_init(&sb, out, size);
        encode_hex(src, len, &sb);
        return tg_strbuf_status(&sb);
}

void encode_base64(const unsigned char *src, size_t len, struct tg_strbuf *out)
{
        static const char b64[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t i = 0;

        for (; i + 3 <= len; i += 3) {
                unsigned v = (unsigned)src[i] << 16 | (unsigned)src[i + 1] << 8 | src[i + 2];
                char four[4] = {b64[v >> 18], b64[(v >> 12) & 63], b64[(v >> 6) & 63], b64[v & 63]};
                tg_strbuf_add(out, four, 4);
        }
        if (len - i == 1) {
                unsigned v = (unsigned)src[i] << 16;
                char four[4] = {b64[v >> 18], b64[(v >> 12) & 63], '=', '='};
                tg_strbuf_add(out, four, 4);
        } else if (len - i == 2) {
                unsigned v = (unsigned)src[i] << 16 | (unsigned)src[i + 1] << 8;
                char four[4] = {b64[v >> 18], b64[(v >> 12) & 63], b64[(v >> 6) & 63], '='};
                tg_strbuf_add(out, four, 4);
        }
}

bool encode_utf8_text_ok(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;

        while (i < len) {
                unsigned c = p[i];
                unsigned cp, need;

                if (c < 0x80) {
                        if (c < 0x20 || c == 0x7f)
                                return false;
                        i++;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf) {
                        need = 1;
                        cp = c & 0x1f;
                } else if (c >= 0xe0 && c <= 0xef) {
                        need = 2;
                        cp = c & 0x0f;
                } else if (c >= 0xf0 && c <= 0xf4) {
                        need = 3;
                        cp = c & 0x07;
                } else {
                        return false;
                }
                if (len - i <= need)
                        return false;
                for (unsigned k = 1; k <= need; k++) {
                        if ((p[i + k] & 0xc0) != 0x80)
                                return false;
                        cp = cp << 6 | (p[i + k] & 0x3f);
                }
                if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
                    (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
                        return false;
                i += need + 1;
        }
        return true;
}
