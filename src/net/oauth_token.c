/*
 * oauth_token — the token answer's reader. See oauth_token.h.
 *
 * Invariants: nothing is written to token but a whole valid token (it is
 * wiped first); a body that is not one JSON object, or any member of the
 * three with another type or out of its bounds, is TG_EPARSE.
 */
#include "net/oauth_token.h"

#include <jansson.h>
#include <string.h>
#include <strings.h>

#include "core/tg_error.h"

/* RFC 6750's b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" /
 * "/" ) *"=" */
static int token68(const char *s, size_t n)
{
        size_t i = 0;

        while (i < n &&
               ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                (s[i] >= '0' && s[i] <= '9') || strchr("-._~+/", s[i]) != NULL) &&
               s[i] != '\0')
                i++;
        if (i == 0)
                return TG_EPARSE;
        while (i < n && s[i] == '=')
                i++;
        return i == n ? 0 : TG_EPARSE;
}

int oauth_token_parse(const char *body, size_t len, char *token, size_t token_size,
                      int64_t *ret_expires_s)
{
        json_error_t error;
        json_t *root, *v;
        const char *s;
        size_t n;
        int r = TG_EPARSE;

        if (token_size > 0)
                explicit_bzero(token, token_size);
        if (!body || token_size <= OAUTH_TOKEN_MAX)
                return TG_EPARSE;
        root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &error);
        if (!json_is_object(root))
                goto out;
        v = json_object_get(root, "token_type");
        if (!json_is_string(v) || strcasecmp(json_string_value(v), "bearer") != 0 ||
            json_string_length(v) != 6)
                goto out;
        v = json_object_get(root, "expires_in");
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > OAUTH_EXPIRES_MAX)
                goto out;
        int64_t expires = (int64_t)json_integer_value(v);
        v = json_object_get(root, "access_token");
        if (!json_is_string(v))
                goto out;
        s = json_string_value(v);
        n = json_string_length(v);
        if (n > OAUTH_TOKEN_MAX || token68(s, n) < 0)
                goto out;
        memcpy(token, s, n);
        token[n] = '\0';
        *ret_expires_s = expires;
        r = 0;
out:
        json_decref(root);
        return r;
}
