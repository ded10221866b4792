/*
 * The paypal shape's OAuth 2.0 access tokens (shape.h): the tokens the
 * stub's token endpoint gave, each with the monotonic instant it lapses.
 * A bounded ring: past STUB_TOKENS_MAX the oldest is forgotten (a caller
 * holding it gets 401, as for a revoked one). Thread-safe (its own lock).
 */
#ifndef STUB_TOKENS_H
#define STUB_TOKENS_H

#include "core/tg_time.h"
#include "shape.h"

#include <stddef.h>
#include <stdint.h>

#define STUB_TOKENS_MAX 1024

struct stub_tokens;

enum stub_token_check { STUB_TOKEN_OK, STUB_TOKEN_UNKNOWN, STUB_TOKEN_EXPIRED };

/* NULL when out of memory; seed makes the tokens reproducible. */
struct stub_tokens *stub_tokens_new(uint64_t seed);
void stub_tokens_free(struct stub_tokens *t);
/* A new token living ttl from now into ret[STUB_PAYPAL_TOKEN_MAX]. */
void stub_tokens_issue(struct stub_tokens *t, tg_mono_ns now, tg_mono_ns ttl,
                       char ret[STUB_PAYPAL_TOKEN_MAX]);
/* What an Authorization header value ("Bearer <token>", NULL: none) is
 * worth at now. */
enum stub_token_check stub_tokens_check(struct stub_tokens *t, const char *authz, tg_mono_ns now);
/* Forgets every token (POST /_stub/revoke-tokens). Returns how many. */
size_t stub_tokens_revoke(struct stub_tokens *t);
/* Tokens held and still alive at now, for /_stub/state. */
size_t stub_tokens_alive(struct stub_tokens *t, tg_mono_ns now);

#endif
