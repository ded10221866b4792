/*
 * provider_request — what tollgate sends the provider, made from the
 * request map (core/provider_map.h): the refund POST's body (JSON with
 * jansson, or a form through core), a refund's metadata read from and
 * written to its stored JSON text, and the HMAC-SHA256 signature of a
 * signed request over the canonical string (OpenSSL libcrypto).
 *
 * Bodies are bounded (PROVIDER_BODY_MAX); keys and signatures are handled
 * in caller buffers only, and the stack copies made here are wiped.
 */
#ifndef TG_PROVIDER_REQUEST_H
#define TG_PROVIDER_REQUEST_H

#include <stddef.h>

#include "core/provider_map.h"
#include "core/refund_validate.h"
#include "core/template.h"

#define PROVIDER_BODY_MAX (16 * 1024)

/* Reads a stored metadata text: "" (none) or a JSON object whose values are
 * strings, every pair valid for refund_metadata_add(). 0 or TG_EPARSE;
 * *ret untouched on failure. */
int provider_metadata_parse(const char *text, struct refund_metadata *ret);

/* Writes the pairs as the stored text: "" for none, else compact JSON with
 * the keys in order. 0 or TG_EFULL (dst too small; dst then ""). */
int provider_metadata_text(const struct refund_metadata *md, char *dst, size_t size);

/* The body of a refund POST for values, in the map's format. 0, TG_EFULL
 * (over PROVIDER_BODY_MAX), TG_EINVAL (a value the map cannot write),
 * TG_ENOMEM. The caller frees *ret_body (NUL-terminated, *ret_len bytes). */
int provider_request_body(const struct request_map *map, const struct template_values *values,
                          char **ret_body, size_t *ret_len);

/* "application/json" or "application/x-www-form-urlencoded". */
const char *provider_request_content_type(const struct request_map *map);

/* Lower-case hex SHA-256 of len bytes at body (NULL with 0: the empty body). */
void provider_body_sha256(const char *body, size_t len, char ret_hex[65]);

enum signature_encoding {
        SIGNATURE_HEX,
        SIGNATURE_BASE64,
};

/* prefix + the encoded HMAC-SHA256, under key, of the canonical template
 * expanded (raw) with values. 0, TG_ENOTFOUND (a field without a value),
 * TG_EFULL (dst too small), TG_EINVAL. */
int provider_sign(const struct template *canonical, const struct template_values *values,
                  const unsigned char *key, size_t key_len, enum signature_encoding encoding,
                  const char *prefix, char *dst, size_t dst_size);

#endif
