/*
 * Fuzz target for oauth_token_parse(): any bytes as the body of a token
 * endpoint's answer (PayPal's POST /v1/oauth2/token). Invariants checked on
 * every input, abort() on a breach so libFuzzer and the replay runner both
 * stop:
 *   - the result is 0 or TG_EPARSE;
 *   - on success the token is a non-empty token68 of at most
 *     OAUTH_TOKEN_MAX bytes (it goes in a header line as it is: no space,
 *     no control byte, no colon) and the lifetime is in 1..OAUTH_EXPIRES_MAX;
 *     on failure the lifetime is untouched and the token buffer all zero;
 *   - the same input gives the same answer twice.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "net/oauth_token.h"

static void check(int cond)
{
        if (!cond)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static char a[OAUTH_TOKEN_MAX + 1], b[OAUTH_TOKEN_MAX + 1];
        char *body = malloc(size ? size : 1);
        int64_t ea = -1, eb = -1;

        if (!body)
                return 0;
        if (size)
                memcpy(body, data, size);
        memset(a, 'x', sizeof(a));
        int ra = oauth_token_parse(body, size, a, sizeof(a), &ea);
        int rb = oauth_token_parse(body, size, b, sizeof(b), &eb);
        check(ra == 0 || ra == TG_EPARSE);
        check(ra == rb && ea == eb);
        if (ra == 0) {
                size_t n = strlen(a);
                check(n >= 1 && n <= OAUTH_TOKEN_MAX && strcmp(a, b) == 0);
                check(strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                "-._~+/=") == n);
                check(ea >= 1 && ea <= OAUTH_EXPIRES_MAX);
        } else {
                check(ea == -1);
                for (size_t i = 0; i < sizeof(a); i++)
                        check(a[i] == '\0');
        }
        free(body);
        return 0;
}
