/*
 * Credential and signature checks (see auth.h). Comparisons of secrets and
 * MACs are constant-time; the expected values live on the stack only and
 * are wiped.
 */
#include "auth.h"

#include "core/strnum.h"
#include "platform/digest.h"

#include <stdio.h>
#include <string.h>

static bool same_secret(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        return la == lb && digest_equal(a, b, la);
}

const char *stub_auth_key(const struct stub_auth *auth, stub_header_fn get, void *ctx)
{
        const char *v;
        char want[600];
        bool ok;

        if (!auth->secret)
                return NULL;
        v = get(ctx, auth->header ? auth->header : "Authorization");
        if (!v || !v[0])
                return "missing";
        snprintf(want, sizeof(want), "%s%s", auth->header ? "" : "Bearer ", auth->secret);
        ok = same_secret(v, want);
        explicit_bzero(want, sizeof(want));
        return ok ? "ok" : "wrong";
}

const char *stub_auth_signature(const struct stub_auth *auth, stub_header_fn get, void *ctx,
                                const char *method, const char *path, const char *body,
                                size_t body_len, int64_t now_s)
{
        struct template_values v;
        char digest_hex[DIGEST_SHA256_HEX], want[256];
        const char *sig, *ts, *verdict = "wrong";
        int64_t t;

        if (!auth->signing_key)
                return NULL;
        sig = get(ctx, auth->signature_header);
        ts = get(ctx, auth->timestamp_header);
        if (!sig || !ts)
                return "missing";
        if (strnum_i64(ts, 0, INT64_MAX / 2, &t) < 0 || t < now_s - auth->max_skew_s ||
            t > now_s + auth->max_skew_s)
                return "stale";
        if (digest_sha256_hex(body, body ? body_len : 0, digest_hex) < 0)
                return "wrong";
        memset(&v, 0, sizeof(v));
        v.text[TPL_METHOD] = method;
        v.text[TPL_PATH] = path;
        v.text[TPL_TIMESTAMP] = ts;
        v.text[TPL_IDEMPOTENCY_KEY] =
            get(ctx, auth->key_header ? auth->key_header : "Idempotency-Key");
        v.text[TPL_BODY_SHA256] = digest_hex;
        v.text[TPL_REQUEST_ID] = get(ctx, "X-Request-Id");
        /* a field it signs missing, or a failure of the library: "wrong" */
        if (digest_sign(&auth->signing, &v, auth->signing_key, auth->signing_key_len,
                        auth->base64 ? DIGEST_BASE64 : DIGEST_HEX, auth->prefix, want,
                        sizeof(want)) == 0 &&
            same_secret(sig, want))
                verdict = "ok";
        explicit_bzero(want, sizeof(want));
        return verdict;
}
