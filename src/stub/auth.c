/*
 * Credential and signature checks (see auth.h). Comparisons of secrets and
 * MACs are constant-time; the expected values live on the stack only and
 * are wiped.
 */
#include "auth.h"

#include "core/encode.h"
#include "core/strnum.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

static bool same_secret(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        return la == lb && CRYPTO_memcmp(a, b, la) == 0;
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
        unsigned char digest[SHA256_DIGEST_LENGTH], mac[EVP_MAX_MD_SIZE];
        unsigned int mac_len = 0;
        char digest_hex[65], text[4096], want[256];
        struct tg_strbuf sb;
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
        SHA256((const unsigned char *)(body ? body : ""), body ? body_len : 0, digest);
        tg_strbuf_init(&sb, digest_hex, sizeof(digest_hex));
        encode_hex(digest, sizeof(digest), &sb);
        memset(&v, 0, sizeof(v));
        v.text[TPL_METHOD] = method;
        v.text[TPL_PATH] = path;
        v.text[TPL_TIMESTAMP] = ts;
        v.text[TPL_IDEMPOTENCY_KEY] = get(ctx, "Idempotency-Key");
        v.text[TPL_BODY_SHA256] = digest_hex;
        v.text[TPL_REQUEST_ID] = get(ctx, "X-Request-Id");
        tg_strbuf_init(&sb, text, sizeof(text));
        if (template_expand(&auth->signing, &v, TEMPLATE_RAW, &sb) < 0)
                return "wrong"; /* a field it signs is missing */
        if (!HMAC(EVP_sha256(), auth->signing_key, (int)auth->signing_key_len,
                  (const unsigned char *)sb.buf, sb.len, mac, &mac_len))
                return "wrong";
        tg_strbuf_init(&sb, want, sizeof(want));
        tg_strbuf_adds(&sb, auth->prefix ? auth->prefix : "");
        if (auth->base64)
                encode_base64(mac, mac_len, &sb);
        else
                encode_hex(mac, mac_len, &sb);
        if (tg_strbuf_status(&sb) == 0 && same_secret(sig, want))
                verdict = "ok";
        explicit_bzero(text, sizeof(text));
        explicit_bzero(want, sizeof(want));
        explicit_bzero(mac, sizeof(mac));
        return verdict;
}
