/*
 * digest — SHA-256, HMAC-SHA256 and the request signature built on them,
 * over OpenSSL's libcrypto, for every room that signs or checks: the
 * provider requests (net), the bearer tokens, console sessions and the
 * provider's webhook (daemon), and the stand-in's checks (stub). core
 * stays free of libraries; the encodings themselves are core/encode.h.
 *
 * Invariants: nothing here keeps or logs a key or a MAC; every MAC and text
 * on the stack is wiped before returning; digest_equal() takes a time that
 * depends on len only, never on where the bytes first differ.
 */
#ifndef TG_DIGEST_H
#define TG_DIGEST_H

#include <stdbool.h>
#include <stddef.h>

#include "core/template.h"

#define DIGEST_SHA256_LEN 32
#define DIGEST_SHA256_HEX (2 * DIGEST_SHA256_LEN + 1) /* hex digits and the NUL */

/* How a MAC is written out. */
enum digest_form {
        DIGEST_HEX,    /* lower-case hex */
        DIGEST_BASE64, /* standard base64 with padding */
};

/* The SHA-256 of data[0..len) (NULL with 0: the empty text) into ret. 0, or
 * TG_EINVAL when the library refuses (ret is then unspecified). */
int digest_sha256(const void *data, size_t len, unsigned char ret[DIGEST_SHA256_LEN]);

/* The same as lower-case hex, NUL-terminated. */
int digest_sha256_hex(const void *data, size_t len, char ret_hex[DIGEST_SHA256_HEX]);

/* The HMAC-SHA256 of data[0..len) under key[0..key_len) (an empty key is
 * allowed) into ret. 0, or TG_EINVAL (key_len above INT_MAX, or the
 * library refuses). */
int digest_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                       unsigned char ret[DIGEST_SHA256_LEN]);

/* A request signature: prefix (NULL: none) and then the HMAC-SHA256, under
 * key, of the canonical template expanded raw with values, written in form,
 * into dst[dst_size] (NUL-terminated). 0; TG_ENOTFOUND (a field of the
 * template has no value), TG_EFULL (the expansion or dst too small),
 * TG_EINVAL (as digest_hmac_sha256, or dst_size 0). */
int digest_sign(const struct template *canonical, const struct template_values *values,
                const void *key, size_t key_len, enum digest_form form, const char *prefix,
                char *dst, size_t dst_size);

/* a[0..len) == b[0..len), in constant time. */
bool digest_equal(const void *a, const void *b, size_t len);

/* len bytes from the kernel's random source (getrandom(2), blocking only
 * until it is seeded at boot): salts, session ids, API secrets. 0 or
 * TG_EIO. */
int digest_random(void *buf, size_t len);

#endif
