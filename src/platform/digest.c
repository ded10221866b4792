/*
 * digest — SHA-256, HMAC-SHA256, request signatures and the constant-time
 * comparison, on libcrypto, and the kernel's random bytes (see digest.h). The signing text is built in a
 * bounded stack buffer (DIGEST_TEXT_MAX) and wiped with the MAC.
 */
#include "platform/digest.h"

#include <errno.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>
#include <sys/random.h>

#include "core/encode.h"
#include "core/tg_error.h"

#define DIGEST_TEXT_MAX 4096 /* the expanded signing string */

int digest_sha256(const void *data, size_t len, unsigned char ret[DIGEST_SHA256_LEN])
{
        unsigned int n = 0;

        if (EVP_Digest(data ? data : "", data ? len : 0, ret, &n, EVP_sha256(), NULL) != 1 ||
            n != DIGEST_SHA256_LEN)
                return TG_EINVAL;
        return 0;
}

int digest_sha256_hex(const void *data, size_t len, char ret_hex[DIGEST_SHA256_HEX])
{
        unsigned char md[DIGEST_SHA256_LEN];
        int r = digest_sha256(data, len, md);

        if (r == 0)
                r = encode_hex_text(md, sizeof(md), ret_hex, DIGEST_SHA256_HEX);
        return r;
}

int digest_hmac_sha256(const void *key, size_t key_len, const void *data, size_t len,
                       unsigned char ret[DIGEST_SHA256_LEN])
{
        unsigned int n = 0;

        if (key_len > INT_MAX)
                return TG_EINVAL;
        if (!HMAC(EVP_sha256(), key ? key : "", (int)key_len,
                  (const unsigned char *)(data ? data : ""), data ? len : 0, ret, &n) ||
            n != DIGEST_SHA256_LEN)
                return TG_EINVAL;
        return 0;
}

int digest_sign(const struct template *canonical, const struct template_values *values,
                const void *key, size_t key_len, enum digest_form form, const char *prefix,
                char *dst, size_t dst_size)
{
        char text[DIGEST_TEXT_MAX];
        unsigned char mac[DIGEST_SHA256_LEN];
        struct tg_strbuf sb;
        int r;

        if (dst_size == 0)
                return TG_EINVAL;
        tg_strbuf_init(&sb, text, sizeof(text));
        r = template_expand(canonical, values, TEMPLATE_RAW, &sb);
        if (r == 0)
                r = digest_hmac_sha256(key, key_len, sb.buf, sb.len, mac);
        if (r == 0) {
                tg_strbuf_init(&sb, dst, dst_size);
                tg_strbuf_adds(&sb, prefix ? prefix : "");
                if (form == DIGEST_BASE64)
                        encode_base64(mac, sizeof(mac), &sb);
                else
                        encode_hex(mac, sizeof(mac), &sb);
                r = tg_strbuf_status(&sb);
        }
        explicit_bzero(text, sizeof(text));
        explicit_bzero(mac, sizeof(mac));
        return r;
}

bool digest_equal(const void *a, const void *b, size_t len)
{
        return CRYPTO_memcmp(a, b, len) == 0;
}

int digest_random(void *buf, size_t len)
{
        unsigned char *p = buf;
        size_t got = 0;

        while (got < len) {
                ssize_t n = getrandom(p + got, len - got, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return TG_EIO;
                }
                got += (size_t)n;
        }
        return 0;
}
