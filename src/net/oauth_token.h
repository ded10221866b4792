/*
 * oauth_token — reads an OAuth 2.0 access token answer (RFC 6749 section
 * 5.1), the body a provider's token endpoint gives to a client-credentials
 * grant (PayPal's POST /v1/oauth2/token):
 *
 *   {"scope":"...","access_token":"A21AA...","token_type":"Bearer",
 *    "app_id":"APP-...","expires_in":32400,"nonce":"..."}
 *
 * Strict where a wrong reading would cost: access_token must be a bearer
 * token68 (RFC 6750: letters, digits, - . _ ~ + / then = padding) of
 * 1..OAUTH_TOKEN_MAX bytes, so that it can go in a header line as it is;
 * token_type must say Bearer (any case); expires_in must be a whole number
 * of seconds in 1..OAUTH_EXPIRES_MAX (without it tollgate could not know
 * when to fetch the next one, so an answer without it is refused). Other
 * members are ignored.
 *
 * The token is a secret: the caller gives secret memory for it, and this
 * module never logs; the parser's own transient copies (jansson's) are
 * freed at return.
 */
#ifndef TG_OAUTH_TOKEN_H
#define TG_OAUTH_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#define OAUTH_TOKEN_MAX   2048              /* bytes of an access token */
#define OAUTH_EXPIRES_MAX (366 * 24 * 3600) /* a year, in seconds */

/* Reads body[len]. 0 with token (NUL-terminated, token_size >
 * OAUTH_TOKEN_MAX) and *ret_expires_s set; TG_EPARSE (not such an answer:
 * token and *ret untouched but for token being wiped). */
int oauth_token_parse(const char *body, size_t len, char *token, size_t token_size,
                      int64_t *ret_expires_s);

#endif
