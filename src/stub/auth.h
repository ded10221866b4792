/*
 * What the stub demands of a caller besides TLS, as a real provider would:
 * an API key (Authorization: Bearer <secret>, or a named header carrying
 * the secret) and a signed request (an HMAC-SHA256 over a canonical string
 * of the method, path, timestamp, idempotency key and body digest: the same
 * template syntax tollgate is configured with, core/template.h), with a
 * timestamp no further than max_skew_s from now. Failures are answered 401
 * before anything executes. The verdicts ("ok", "missing", "wrong",
 * "stale") go into the arrival record; the secrets never do.
 */
#ifndef STUB_AUTH_H
#define STUB_AUTH_H

#include "core/template.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stub_auth {
        const char *secret;               /* NULL: no API key demanded */
        const char *header;               /* NULL: Authorization: Bearer <secret> */
        const unsigned char *signing_key; /* NULL: no signature demanded */
        size_t signing_key_len;
        const char *signature_header; /* X-Signature */
        const char *timestamp_header; /* X-Timestamp */
        const char *prefix;           /* before the encoded MAC */
        bool base64;                  /* else lower-case hex */
        struct template signing;      /* the canonical string */
        int64_t max_skew_s;
        const char *key_header; /* the idempotency key's (NULL: Idempotency-Key) */
};

/* Reads a request header by name (NULL when absent). */
typedef const char *(*stub_header_fn)(void *ctx, const char *name);

/* The API key: NULL when none is demanded, else "ok", "missing" or "wrong". */
const char *stub_auth_key(const struct stub_auth *auth, stub_header_fn get, void *ctx);

/* The signature of one request: NULL when none is demanded, else "ok",
 * "missing", "stale" (timestamp too far from now_s) or "wrong". */
const char *stub_auth_signature(const struct stub_auth *auth, stub_header_fn get, void *ctx,
                                const char *method, const char *path, const char *body,
                                size_t body_len, int64_t now_s);

#endif
