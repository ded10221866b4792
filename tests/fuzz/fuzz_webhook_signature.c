/*
 * Fuzz target: the webhook's X-Signature check (api_events.c) without a
 * server: the input is a header value, a newline, then the raw body. The
 * header goes through api_parse_signature and the MAC is compared with
 * HMAC-SHA256(secret, body) as api_events.c does. Checks: the header is
 * accepted exactly when it is "sha256=" and 64 hex digits; an accepted
 * header gives back the MAC its digits spell; a refused one leaves the
 * output untouched; and the check passes exactly when the digits equal the
 * body's HMAC (in either case). When the input starts with '!', the header
 * is built from the body's real HMAC, with the case of each digit chosen by
 * the input, so the accepting path is fuzzed too.
 */
#include <ctype.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/api_parse.h"

#define SECRET     "fuzz-webhook-secret"
#define HEADER_MAX 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void to_hex(const unsigned char *mac, char out[2 * API_MAC_LEN + 1])
{
        static const char digits[] = "0123456789abcdef";

        for (size_t i = 0; i < API_MAC_LEN; i++) {
                out[2 * i] = digits[mac[i] >> 4];
                out[2 * i + 1] = digits[mac[i] & 0xf];
        }
        out[2 * API_MAC_LEN] = '\0';
}

/* The rule, written independently of the parser. */
static bool well_formed(const char *h)
{
        if (strncmp(h, "sha256=", 7) != 0 || strlen(h) != 7 + 2 * API_MAC_LEN)
                return false;
        for (size_t i = 7; h[i]; i++)
                if (!isxdigit((unsigned char)h[i]))
                        return false;
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        unsigned char want[API_MAC_LEN], got[API_MAC_LEN], before[API_MAC_LEN];
        char header[HEADER_MAX + 1], hex[2 * API_MAC_LEN + 1];
        const uint8_t *nl = memchr(data, '\n', size);
        const uint8_t *body;
        size_t hlen, blen;
        unsigned int n = 0;
        bool forge = size > 0 && data[0] == '!';

        hlen = nl ? (size_t)(nl - data) : size;
        body = nl ? nl + 1 : data + size;
        blen = (size_t)(data + size - body);
        if (!HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), body, blen, want, &n) ||
            n != API_MAC_LEN)
                abort();
        if (forge) {
                /* "sha256=" + the real MAC, each digit's case from the input */
                to_hex(want, hex);
                for (size_t i = 0; i < 2 * API_MAC_LEN && i + 1 < hlen; i++)
                        if (data[i + 1] & 1)
                                hex[i] = (char)toupper((unsigned char)hex[i]);
                memcpy(header, "sha256=", 7);
                memcpy(header + 7, hex, sizeof(hex));
        } else {
                if (hlen > HEADER_MAX)
                        hlen = HEADER_MAX;
                memcpy(header, data, hlen);
                header[hlen] = '\0'; /* a NUL inside ends the header, as in HTTP */
        }

        memset(got, 0x5a, sizeof(got));
        memcpy(before, got, sizeof(got));
        if (api_parse_signature(header, got) != 0) {
                if (well_formed(header) || forge)
                        abort();
                if (memcmp(got, before, sizeof(got)) != 0)
                        abort();
                return 0;
        }
        if (!well_formed(header))
                abort();
        to_hex(got, hex);
        if (strcasecmp(hex, header + 7) != 0)
                abort();
        to_hex(want, hex);
        if ((CRYPTO_memcmp(want, got, API_MAC_LEN) == 0) != (strcasecmp(hex, header + 7) == 0))
                abort();
        if (forge && CRYPTO_memcmp(want, got, API_MAC_LEN) != 0)
                abort();
        if (api_parse_signature(NULL, got) != TG_EPARSE)
                abort();
        return 0;
}
