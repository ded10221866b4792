/*
 * Fuzz target: Stripe's webhook delivery as api_events.c reads it, without
 * a server: the input is a Stripe-Signature header value, a newline, then
 * the raw body.
 *   - The header goes through api_parse_stripe_signature. Checks, against a
 *     rule written here independently of the parser: it is accepted exactly
 *     when its comma-separated elements are all key=value with a non-empty
 *     key, with exactly one t of 1-12 digits and 1-8 v1 of 64 hex digits;
 *     an accepted header gives back the t and the MACs it spells, in order;
 *     a refused one leaves the output untouched.
 *   - The body goes through provider_reply_read_event with the stripe
 *     profile's event fields (data.object, metadata.operation_id) and
 *     PROVIDER.md's reply words. Checks: it answers 0, TG_EPARSE or
 *     TG_ERANGE; the match and the fields are terminated within their
 *     sizes; a refused body leaves no match.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/encode.h"
#include "core/provider_map.h"
#include "core/tg_error.h"
#include "daemon/api_parse.h"
#include "net/provider_reply.h"

#define HEADER_MAX 1024

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The rule, written independently of the parser: 0 and *want filled, or -1. */
static int rule(const char *h, struct stripe_signature *want)
{
        struct stripe_signature w = {.t = -1};
        const char *p = h;

        for (;;) {
                const char *end = strchr(p, ',');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                const char *eq = memchr(p, '=', len);
                size_t vlen;

                if (!eq || eq == p)
                        return -1;
                vlen = len - (size_t)(eq - p) - 1;
                if (eq - p == 1 && p[0] == 't') {
                        if (w.t >= 0 || vlen < 1 || vlen > 12)
                                return -1;
                        w.t = 0;
                        for (size_t i = 0; i < vlen; i++) {
                                if (!isdigit((unsigned char)eq[1 + i]))
                                        return -1;
                                w.t = w.t * 10 + (eq[1 + i] - '0');
                        }
                } else if (eq - p == 2 && p[0] == 'v' && p[1] == '1') {
                        if (w.n == API_STRIPE_SIGS_MAX || vlen != 2 * API_MAC_LEN)
                                return -1;
                        for (size_t i = 0; i < API_MAC_LEN; i++) {
                                char two[3] = {eq[1 + 2 * i], eq[2 + 2 * i], '\0'};
                                if (!isxdigit((unsigned char)two[0]) ||
                                    !isxdigit((unsigned char)two[1]))
                                        return -1;
                                w.v1[w.n][i] = (unsigned char)strtoul(two, NULL, 16);
                        }
                        w.n++;
                }
                if (!end)
                        break;
                p = end + 1;
        }
        if (w.t < 0 || w.n == 0)
                return -1;
        *want = w;
        return 0;
}

static void check_header(const char *header)
{
        struct stripe_signature got, before, want;
        int r;

        memset(&got, 0x5a, sizeof(got));
        memcpy(&before, &got, sizeof(got));
        r = api_parse_stripe_signature(header, &got);
        if (rule(header, &want) != 0) {
                if (r != TG_EPARSE || memcmp(&got, &before, sizeof(got)) != 0)
                        abort();
                return;
        }
        if (r != 0 || got.t != want.t || got.n != want.n)
                abort();
        for (unsigned i = 0; i < got.n; i++)
                if (memcmp(got.v1[i], want.v1[i], API_MAC_LEN) != 0)
                        abort();
}

static void check_body(const uint8_t *body, size_t len)
{
        static struct reply_map map;
        static struct field_source object, match;
        static int ready;
        struct template_error err;
        struct provider_reply reply;
        char id[130];
        int r;

        if (!ready) {
                reply_map_default(&map);
                if (field_source_parse("id", &map.refund_id, &err) < 0 ||
                    field_source_parse("data.object", &object, &err) < 0 ||
                    field_source_parse("metadata.operation_id", &match, &err) < 0)
                        abort();
                ready = 1;
        }
        memset(id, 0x5a, sizeof(id));
        r = provider_reply_read_event(&map, &object, &match, (const char *)body, len, &reply, id,
                                      sizeof(id));
        if (r != 0 && r != TG_EPARSE && r != TG_ERANGE)
                abort();
        if (!memchr(id, '\0', sizeof(id)) || (r != 0 && id[0] != '\0'))
                abort();
        if (!memchr(reply.status, '\0', sizeof(reply.status)) ||
            !memchr(reply.refund_id, '\0', sizeof(reply.refund_id)))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char header[HEADER_MAX + 1];
        const uint8_t *nl = memchr(data, '\n', size);
        size_t hlen = nl ? (size_t)(nl - data) : size;
        const uint8_t *body = nl ? nl + 1 : data + size;

        if (hlen > HEADER_MAX)
                hlen = HEADER_MAX;
        memcpy(header, data, hlen);
        header[hlen] = '\0'; /* a NUL inside ends the header, as in HTTP */
        check_header(header);
        if (api_parse_stripe_signature(NULL, NULL) != TG_EPARSE)
                abort();
        check_body(body, (size_t)(data + size - body));
        return 0;
}
