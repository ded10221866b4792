/*
 * encode — bounded text building and the byte encodings the provider
 * mapping needs, pure: a string builder over caller storage (struct
 * tg_strbuf), percent-encoding for a URL path segment and for
 * application/x-www-form-urlencoded, lower-case hex and standard base64,
 * and the two decoders (hex, percent) every reader of such text uses.
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

/* src[0..len) as 2 * len lower-case hex digits and a NUL in out[size]: 0,
 * or TG_EFULL when size < 2 * len + 1 (out then holds a cut text). */
int encode_hex_text(const unsigned char *src, size_t len, char *out, size_t size);

/* Decodes exactly 2 * len hex digits at src (either case) into ret[len].
 * 0, or TG_EPARSE when one of them is not a hex digit (a NUL included:
 * src is read no further than the first bad digit); ret is then untouched. */
int encode_hex_decode(const char *src, unsigned char *ret, size_t len);

/* Decodes src[0..len) into out[size], NUL-terminated: %XX (hex digits of
 * either case) is that byte, and with ENCODE_FORM '+' is a space (with
 * ENCODE_PATH_SEGMENT it stays '+'). out may be src itself (the text only
 * shrinks). *ret_len (may be NULL) gets the length written. 0; TG_EPARSE for
 * a '%' without two hex digits after it or a NUL byte, written or %00;
 * TG_EFULL when out is too small. On an error out holds an unspecified,
 * NUL-terminated prefix (when size >= 1). */
int encode_percent_decode(enum encode_pct mode, const char *src, size_t len, char *out, size_t size,
                          size_t *ret_len);

/* True when s[0..len) is valid UTF-8 (no overlong forms, no surrogates, at
 * most U+10FFFF) without control characters (C0, DEL, C1). */
bool encode_utf8_text_ok(const char *s, size_t len);

#endif
