/*
 * adyen_batch — reads and verifies Adyen's standard notification batch (see
 * adyen_batch.h). Invariants: a batch is read whole or refused (one item
 * of the wrong shape, or one field longer than its buffer, refuses it:
 * nothing of it is trusted); unknown members are ignored, as Adyen adds
 * fields over time; the MAC is compared as base64 text of fixed length in
 * constant time, and the key and the MAC made here are wiped.
 */
#include "net/adyen_batch.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/encode.h"
#include "core/tg_error.h"
#include "platform/digest.h"

/* A text member into dst: absent (or null) leaves "", a string is copied,
 * anything else is TG_EPARSE; too long is TG_ERANGE. */
static int text_member(json_t *o, const char *name, char *dst, size_t size)
{
        json_t *v = json_object_get(o, name);

        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return TG_EPARSE;
        if (json_string_length(v) >= size || strlen(json_string_value(v)) != json_string_length(v))
                return TG_ERANGE;
        memcpy(dst, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

/* success: "true"/"false" as Adyen sends it, or a JSON boolean as that word. */
static int success_member(json_t *o, char dst[8])
{
        json_t *v = json_object_get(o, "success");

        if (json_is_boolean(v)) {
                snprintf(dst, 8, "%s", json_is_true(v) ? "true" : "false");
                return 0;
        }
        return text_member(o, "success", dst, 8);
}

static int amount_member(json_t *o, struct adyen_item *it)
{
        json_t *a = json_object_get(o, "amount"), *v;

        if (!a || json_is_null(a))
                return 0;
        if (!json_is_object(a))
                return TG_EPARSE;
        v = json_object_get(a, "value");
        if (v && !json_is_null(v)) {
                if (!json_is_integer(v))
                        return TG_EPARSE;
                snprintf(it->value, sizeof(it->value), "%lld", (long long)json_integer_value(v));
        }
        return text_member(a, "currency", it->currency, sizeof(it->currency));
}

static int read_item(json_t *wrapper, struct adyen_item *it)
{
        json_t *o =
            json_is_object(wrapper) ? json_object_get(wrapper, "NotificationRequestItem") : NULL;
        json_t *extra;
        int r;

        if (!json_is_object(o))
                return TG_EPARSE;
        memset(it, 0, sizeof(*it));
        r = text_member(o, "pspReference", it->psp_reference, sizeof(it->psp_reference));
        if (r == 0)
                r = text_member(o, "originalReference", it->original_reference,
                                sizeof(it->original_reference));
        if (r == 0)
                r = text_member(o, "merchantAccountCode", it->merchant_account,
                                sizeof(it->merchant_account));
        if (r == 0)
                r = text_member(o, "merchantReference", it->merchant_reference,
                                sizeof(it->merchant_reference));
        if (r == 0)
                r = amount_member(o, it);
        if (r == 0)
                r = text_member(o, "eventCode", it->event_code, sizeof(it->event_code));
        if (r == 0)
                r = success_member(o, it->success);
        if (r == 0)
                r = text_member(o, "reason", it->reason, sizeof(it->reason));
        extra = json_object_get(o, "additionalData");
        if (r == 0 && extra && !json_is_null(extra)) {
                if (!json_is_object(extra))
                        return TG_EPARSE;
                r = text_member(extra, "hmacSignature", it->hmac_signature,
                                sizeof(it->hmac_signature));
        }
        return r;
}

int adyen_batch_parse(const char *body, size_t len, struct adyen_batch *ret)
{
        json_error_t jerr;
        json_t *root, *items;
        struct adyen_batch *b;
        size_t n;
        int r = 0;

        if (!body || !ret)
                return TG_EINVAL;
        root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root)
                return json_error_code(&jerr) == json_error_out_of_memory ? TG_ENOMEM : TG_EPARSE;
        items = json_is_object(root) ? json_object_get(root, "notificationItems") : NULL;
        if (!json_is_array(items)) {
                json_decref(root);
                return TG_EPARSE;
        }
        n = json_array_size(items);
        if (n == 0 || n > ADYEN_BATCH_MAX) {
                json_decref(root);
                return TG_ERANGE;
        }
        /* read into a copy: *ret is written on success only */
        b = malloc(sizeof(*b));
        if (!b) {
                json_decref(root);
                return TG_ENOMEM;
        }
        b->n = (unsigned)n;
        for (size_t i = 0; i < n && r == 0; i++)
                r = read_item(json_array_get(items, i), &b->item[i]);
        json_decref(root);
        if (r == 0)
                memcpy(ret, b, sizeof(*b));
        free(b);
        return r;
}

int adyen_item_signed_text(const struct adyen_item *it, char *dst, size_t size)
{
        const char *const parts[] = {
            it->psp_reference, it->original_reference, it->merchant_account, it->merchant_reference,
            it->value,         it->currency,           it->event_code,       it->success};
        struct tg_strbuf sb;

        tg_strbuf_init(&sb, dst, size);
        for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
                if (i > 0)
                        tg_strbuf_add(&sb, ":", 1);
                tg_strbuf_adds(&sb, parts[i]);
        }
        return tg_strbuf_status(&sb) < 0 ? TG_EFULL : 0;
}

int adyen_key_decode(const char *hex, unsigned char ret_key[ADYEN_KEY_MAX], size_t *ret_len)
{
        size_t n = hex ? strnlen(hex, 2 * ADYEN_KEY_MAX + 1) : 0;

        if (n < 2 || n % 2 != 0 || n > 2 * ADYEN_KEY_MAX)
                return TG_EINVAL;
        if (encode_hex_decode(hex, ret_key, n / 2) < 0)
                return TG_EINVAL;
        *ret_len = n / 2;
        return 0;
}

bool adyen_item_verify(const struct adyen_item *it, const unsigned char *key, size_t key_len)
{
        char text[8 * ADYEN_TEXT_MAX + 8], want[64];
        unsigned char mac[DIGEST_SHA256_LEN];
        struct tg_strbuf sb;
        size_t got_len = strlen(it->hmac_signature);
        bool ok = false;

        /* base64 of 32 bytes: 44 characters */
        if (got_len != 44 || adyen_item_signed_text(it, text, sizeof(text)) < 0)
                return false;
        if (digest_hmac_sha256(key, key_len, text, strlen(text), mac) == 0) {
                tg_strbuf_init(&sb, want, sizeof(want));
                encode_base64(mac, sizeof(mac), &sb);
                ok = tg_strbuf_status(&sb) == 0 && sb.len == got_len &&
                     digest_equal(want, it->hmac_signature, got_len);
        }
        explicit_bzero(mac, sizeof(mac));
        explicit_bzero(want, sizeof(want));
        return ok;
}
