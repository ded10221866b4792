/*
 * event_sig — making and checking the `Tollgate-Signature` header (see
 * event_sig.h). The MAC input "<t>.<body>" is built in one bounded heap
 * buffer; every MAC is wiped after use.
 */
#include "platform/event_sig.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/encode.h"
#include "core/strnum.h"
#include "core/tg_error.h"
#include "platform/digest.h"

#define EVENT_SIG_BODY_MAX (16u * 1024 * 1024)

/* HMAC-SHA256 of "<t>.<body>" under secret. */
static int mac_of(const char *secret, int64_t t, const char *body, size_t len,
                  unsigned char ret[DIGEST_SHA256_LEN])
{
        char head[32];
        int k = snprintf(head, sizeof(head), "%" PRId64 ".", t);
        char *buf;
        int r;

        if (k < 0 || len > EVENT_SIG_BODY_MAX)
                return TG_EINVAL;
        buf = malloc((size_t)k + len + 1);
        if (!buf)
                return TG_ENOMEM;
        memcpy(buf, head, (size_t)k);
        if (len)
                memcpy(buf + k, body, len);
        r = digest_hmac_sha256(secret, strlen(secret), buf, (size_t)k + len, ret);
        free(buf);
        return r;
}

int event_sig_make(const char *const *secrets, unsigned n, int64_t t, const char *body, size_t len,
                   char *dst, size_t size)
{
        struct tg_strbuf sb;
        char num[32];
        int r = 0;

        if (!secrets || n == 0 || n > EVENT_SIG_SECRETS || (!body && len) || !dst || size == 0)
                return TG_EINVAL;
        tg_strbuf_init(&sb, dst, size);
        snprintf(num, sizeof(num), "t=%" PRId64, t);
        tg_strbuf_adds(&sb, num);
        for (unsigned i = 0; i < n && r == 0; i++) {
                unsigned char mac[DIGEST_SHA256_LEN];

                r = mac_of(secrets[i], t, body, len, mac);
                if (r == 0) {
                        tg_strbuf_adds(&sb, ",v1=");
                        encode_hex(mac, sizeof(mac), &sb);
                }
                explicit_bzero(mac, sizeof(mac));
        }
        if (r == 0)
                r = tg_strbuf_status(&sb);
        return r;
}

int event_sig_check(const char *header, const char *const *secrets, unsigned n, const char *body,
                    size_t len, int64_t now_s, int64_t tolerance_s)
{
        unsigned char got[4][DIGEST_SHA256_LEN], want[DIGEST_SHA256_LEN];
        unsigned nv = 0;
        int64_t t = 0;
        bool have_t = false, match = false;
        const char *p = header;
        int r = 0;

        if (!secrets || n == 0 || n > EVENT_SIG_SECRETS || (!body && len))
                return TG_EINVAL;
        if (!header || strnlen(header, EVENT_SIG_MAX) >= EVENT_SIG_MAX)
                return TG_EPARSE;
        /* "t=<digits>" and "v1=<64 hex>" items, comma-separated; others
         * (a future v2) are skipped */
        while (*p) {
                const char *end = strchr(p, ',');
                size_t item = end ? (size_t)(end - p) : strlen(p);

                if (item > 2 && strncmp(p, "t=", 2) == 0) {
                        char digits[24];

                        if (item - 2 >= sizeof(digits))
                                return TG_EPARSE;
                        memcpy(digits, p + 2, item - 2);
                        digits[item - 2] = '\0';
                        if (strnum_i64(digits, 0, INT64_MAX / 2, &t) < 0)
                                return TG_EPARSE;
                        have_t = true;
                } else if (item == 3 + 2 * DIGEST_SHA256_LEN && strncmp(p, "v1=", 3) == 0) {
                        if (nv < 4 && encode_hex_decode(p + 3, got[nv], DIGEST_SHA256_LEN) == 0)
                                nv++;
                        else if (nv < 4)
                                return TG_EPARSE;
                }
                p += item;
                if (*p == ',')
                        p++;
        }
        if (!have_t || nv == 0)
                return TG_EPARSE;
        if (t < now_s - tolerance_s || t > now_s + tolerance_s)
                return TG_ERANGE;
        for (unsigned i = 0; i < n && r == 0; i++) {
                r = mac_of(secrets[i], t, body, len, want);
                for (unsigned k = 0; k < nv && r == 0; k++)
                        match |= digest_equal(want, got[k], DIGEST_SHA256_LEN);
        }
        explicit_bzero(want, sizeof(want));
        explicit_bzero(got, sizeof(got));
        if (r < 0)
                return r;
        return match ? 0 : TG_ECONFLICT;
}
