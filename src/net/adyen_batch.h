/*
 * adyen_batch — Adyen's standard notification (webhook), read and verified:
 * a JSON batch {"live":"true"|"false","notificationItems":[{
 * "NotificationRequestItem":{...}}, ...]} whose items each carry their own
 * HMAC (additionalData.hmacSignature: the base64 HMAC-SHA256, under the
 * hex-decoded key of the webhook, of the item's eight fields
 * pspReference:originalReference:merchantAccountCode:merchantReference:
 * amount.value:amount.currency:eventCode:success joined by colons, an absent
 * field empty). There is no signature over the body and no timestamp.
 *
 * Invariants: the parser is bounded (ADYEN_BATCH_MAX items, every text at
 * most ADYEN_TEXT_MAX - 1 bytes: a longer one refuses the whole batch, as a
 * truncated field could not be verified); it never trusts an item it could
 * not read whole; the verification compares in constant time and wipes the
 * key and the MAC it made. Pure over jansson and platform/digest: no I/O.
 */
#ifndef TG_ADYEN_BATCH_H
#define TG_ADYEN_BATCH_H

#include <stdbool.h>
#include <stddef.h>

#define ADYEN_BATCH_MAX 32  /* items in one delivery */
#define ADYEN_TEXT_MAX  256 /* bytes of one field, NUL included */
#define ADYEN_KEY_MAX   128 /* bytes of the decoded HMAC key */

/* One NotificationRequestItem, as text (absent: ""). value is amount.value
 * written in decimal; success is "true"/"false" as sent (a JSON boolean
 * reads as that word). */
struct adyen_item {
        char psp_reference[ADYEN_TEXT_MAX];
        char original_reference[ADYEN_TEXT_MAX];
        char merchant_account[ADYEN_TEXT_MAX];
        char merchant_reference[ADYEN_TEXT_MAX];
        char value[24];
        char currency[16];
        char event_code[64];
        char success[8];
        char reason[ADYEN_TEXT_MAX];
        char hmac_signature[ADYEN_TEXT_MAX];
};

/* Plain data, large (keep it on the heap). */
struct adyen_batch {
        unsigned n;
        struct adyen_item item[ADYEN_BATCH_MAX];
};

/* Reads a delivery of len bytes. 0 and *ret filled (n >= 1); TG_EPARSE (not
 * the batch's shape: not a JSON object, no notificationItems array, an item
 * that is not {"NotificationRequestItem":{..}}, a field of the wrong type,
 * duplicate keys), TG_ERANGE (no item, more than ADYEN_BATCH_MAX, a field
 * too long), TG_ENOMEM. *ret is written on success only. */
int adyen_batch_parse(const char *body, size_t len, struct adyen_batch *ret);

/* The text an item's HMAC covers, NUL-terminated. 0 or TG_EFULL. */
int adyen_item_signed_text(const struct adyen_item *item, char *dst, size_t size);

/* Decodes the webhook's key as Adyen shows it (hex, an even number of
 * digits, 2 to 2 * ADYEN_KEY_MAX of them). 0 with *ret_len; TG_EINVAL. */
int adyen_key_decode(const char *hex, unsigned char ret_key[ADYEN_KEY_MAX], size_t *ret_len);

/* True when the item's hmacSignature is the base64 HMAC-SHA256 of its
 * signed text under key. */
bool adyen_item_verify(const struct adyen_item *item, const unsigned char *key, size_t key_len);

#endif
