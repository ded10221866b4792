/*
 * encode — bounded text building and the byte encodings the provider
 * mapping needs, pure: a string builder over caller storage (struct
 * tg_strbuf), percent-encoding for a URL path segment and for
 * application/x-www-form-urlencoded, lower-case hex and standard base64.
 *
 * A builder never writes past its buffer and always keeps it
 * NUL-terminated; an append that does not fit marks it overflowed, and
 * tg_strbuf_status() then says TG_EFULL. So a caller appends freely and
 * checks once at the end.
 */
#ifndef TG_ENCODE_H
#define TG_ENCODE_H

#include <stdbool.h>
#include <stddef.h>

/* Caller storage; members are touched only through the functions below. */
struct tg_strbuf {
        char *buf;
        size_t size; /* of buf, >= 1 */
        size_t len;
        bool overflow;
};

/* Starts an empty builder over buf[size] (size >= 1). */
void tg_strbuf_init(struct tg_strbuf *sb, char *buf, size_t size);
void tg_strbuf_add(struct tg_strbuf *sb, const char *s, size_t len);
void tg_strbuf_adds(struct tg_strbuf *sb, const char *s);
/* 0, or TG_EFULL when something did not fit (the text is then cut). */
int tg_strbuf_status(const struct tg_strbuf *sb);

enum encode_pct {
        ENCODE_PATH_SEGMENT, /* RFC 3986 unreserved kept, every other byte %XX */
        ENCODE_FORM,         /* the same, but space becomes '+' (x-www-form-urlencoded) */
};

/* Appends src[0..len) percent-encoded (upper-case hex digits). */
void encode_percent(enum encode_pct mode, const char *src, size_t len, struct tg_strbuf *out);

/* Appends src[0..len) as lower-case hex, or as standard base64 with
 * padding (RFC 4648 section 4). */
void encode_hex(const unsigned char *src, size_t len, struct tg_strbuf *out);
void encode_base64(const unsigned char *src, size_t len, struct tg_strbuf *out);

/* True when s[0..len) is valid UTF-8 (no overlong forms, no surrogates, at
 * most U+10FFFF) without control characters (C0, DEL, C1). */
bool encode_utf8_text_ok(const char *s, size_t len);

#endif
