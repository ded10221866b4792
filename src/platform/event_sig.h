/*
 * event_sig — the signature of tollgate's event deliveries (the
 * `Tollgate-Signature` header), made by the daemon and checked by a
 * receiver (`tollgate-stub receive`, and any receiver that follows
 * docs/operating.md, "Verifying the signature"):
 *
 *   Tollgate-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]
 *
 * where each v1 is the lower-case hex HMAC-SHA256, under one secret, of the
 * bytes "<t>.<body>". The timestamp is inside what is signed, so a captured
 * delivery cannot be replayed as new past the receiver's tolerance; while a
 * secret is rotated the header carries one v1 per secret, and a receiver
 * that knows either accepts it.
 *
 * Invariants: MACs are compared in constant time (digest_equal); a header
 * is parsed within its bounds and a malformed one is refused, never guessed.
 */
#ifndef TG_EVENT_SIG_H
#define TG_EVENT_SIG_H

#include <stddef.h>
#include <stdint.h>

#define EVENT_SIG_HEADER  "Tollgate-Signature"
#define EVENT_SIG_MAX     256 /* the header's value, two v1 included, with its NUL */
#define EVENT_SIG_SECRETS 2

/* The header value for body[0..len) at time t (unix seconds) under the n
 * (1..EVENT_SIG_SECRETS) NUL-terminated secrets, into dst[size]. 0,
 * TG_EINVAL, TG_ENOMEM or TG_EFULL. */
int event_sig_make(const char *const *secrets, unsigned n, int64_t t, const char *body, size_t len,
                   char *dst, size_t size);

/* Checks a header value against body[0..len): 0 when one of its v1 values
 * is the MAC under one of the n secrets and |now_s - t| <= tolerance_s;
 * TG_EPARSE (missing or malformed), TG_ERANGE (t outside the tolerance),
 * TG_ECONFLICT (no v1 matches: wrong secret or altered body), TG_ENOMEM. */
int event_sig_check(const char *header, const char *const *secrets, unsigned n, const char *body,
                    size_t len, int64_t now_s, int64_t tolerance_s);

#endif
