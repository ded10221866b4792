/*
 * Tests of net/adyen_batch: Adyen's standard notification batch read whole
 * or refused, the eight-field signed text, the hex key, and the per-item
 * HMAC against a vector made outside this code (Python's hmac): the first
 * is the example of Adyen's HMAC page (its item, its key and its
 * signature), so the field order and form are the reference's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "net/adyen_batch.h"

#define KEY_HEX "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

static const char example[] =
    "{\"live\":\"false\",\"notificationItems\":[{\"NotificationRequestItem\":{"
    "\"eventCode\":\"AUTHORISATION\",\"success\":\"true\",\"eventDate\":\"2019-06-28T18:03:50+01:"
    "00\","
    "\"merchantAccountCode\":\"TestMerchant\",\"merchantReference\":\"TestPayment-1407325143704\","
    "\"pspReference\":\"7914073381342284\",\"amount\":{\"value\":1130,\"currency\":\"EUR\"},"
    "\"additionalData\":{\"hmacSignature\":\"coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0=\"}}},"
    "{\"NotificationRequestItem\":{\"eventCode\":\"REFUND\",\"success\":false,"
    "\"merchantAccountCode\":\"TestMerchant\",\"merchantReference\":\"op-1\","
    "\"pspReference\":\"8815\",\"originalReference\":\"7914073381342284\","
    "\"reason\":\"Insufficient balance\",\"amount\":{\"value\":1500,\"currency\":\"EUR\"},"
    "\"additionalData\":{\"hmacSignature\":\"ADdf/FaSGfCUp7BzATwMZeleyMeZMIq0SKoPhEE0R4w=\"}}}]}";

static void test_example_verifies(void **state)
{
        struct adyen_batch *b = malloc(sizeof(*b));
        unsigned char key[ADYEN_KEY_MAX];
        size_t key_len = 0;
        char text[512];

        (void)state;
        assert_non_null(b);
        assert_int_equal(adyen_batch_parse(example, strlen(example), b), 0);
        assert_int_equal(b->n, 2);
        assert_string_equal(b->item[0].event_code, "AUTHORISATION");
        assert_string_equal(b->item[0].value, "1130");
        assert_string_equal(b->item[0].original_reference, "");
        assert_string_equal(b->item[1].success, "false"); /* a JSON boolean, as its word */
        assert_string_equal(b->item[1].reason, "Insufficient balance");
        assert_int_equal(adyen_item_signed_text(&b->item[0], text, sizeof(text)), 0);
        assert_string_equal(text, "7914073381342284::TestMerchant:TestPayment-1407325143704:1130:"
                                  "EUR:AUTHORISATION:true");
        assert_int_equal(adyen_key_decode(KEY_HEX, key, &key_len), 0);
        assert_int_equal(key_len, 32);
        assert_true(adyen_item_verify(&b->item[0], key, key_len));
        assert_true(adyen_item_verify(&b->item[1], key, key_len));

        /* each field is covered: altering one breaks only that item */
        struct adyen_item it = b->item[1];
        memcpy(it.success, "true", 5);
        assert_false(adyen_item_verify(&it, key, key_len));
        it = b->item[1];
        memcpy(it.value, "150", 4);
        assert_false(adyen_item_verify(&it, key, key_len));
        it = b->item[1];
        memcpy(it.merchant_reference, "op-2", 5);
        assert_false(adyen_item_verify(&it, key, key_len));
        /* the reason is not signed (Adyen's eight fields only) */
        it = b->item[1];
        memcpy(it.reason, "other", 6);
        assert_true(adyen_item_verify(&it, key, key_len));
        /* no signature, a cut one, another key */
        it = b->item[1];
        it.hmac_signature[0] = '\0';
        assert_false(adyen_item_verify(&it, key, key_len));
        it = b->item[1];
        it.hmac_signature[43] = '\0';
        assert_false(adyen_item_verify(&it, key, key_len));
        key[0] ^= 1;
        assert_false(adyen_item_verify(&b->item[1], key, key_len));
        free(b);
}

static void test_refused_shapes(void **state)
{
        static const char *const bad[] = {
            "",
            "[]",
            "{\"notificationItems\":{}}",
            "{\"notificationItems\":[]}",
            "{\"notificationItems\":[{\"Other\":{}}]}",
            "{\"notificationItems\":[{\"NotificationRequestItem\":[]}]}",
            "{\"notificationItems\":[{\"NotificationRequestItem\":{\"pspReference\":1}}]}",
            "{\"notificationItems\":[{\"NotificationRequestItem\":{\"amount\":{\"value\":\"1\"}}}]"
            "}",
            "{\"notificationItems\":[{\"NotificationRequestItem\":{\"additionalData\":[]}}]}",
            "{\"notificationItems\":[{\"NotificationRequestItem\":{\"eventCode\":\"A\","
            "\"eventCode\":\"B\"}}]}",
        };
        struct adyen_batch *b = malloc(sizeof(*b));
        char big[600], body[1024];

        (void)state;
        assert_non_null(b);
        b->n = 77;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_true(adyen_batch_parse(bad[i], strlen(bad[i]), b) < 0);
        assert_int_equal(b->n, 77); /* untouched */
        /* a field longer than its buffer refuses the batch (never cut) */
        memset(big, 'x', 300);
        big[300] = '\0';
        snprintf(
            body, sizeof(body),
            "{\"notificationItems\":[{\"NotificationRequestItem\":{\"pspReference\":\"%s\"}}]}",
            big);
        assert_int_equal(adyen_batch_parse(body, strlen(body), b), TG_ERANGE);
        /* too many items */
        char *many = malloc(64 * 64 + 64);
        assert_non_null(many);
        strcpy(many, "{\"notificationItems\":[");
        for (int i = 0; i <= ADYEN_BATCH_MAX; i++)
                strcat(many, i ? ",{\"NotificationRequestItem\":{}}"
                               : "{\"NotificationRequestItem\":{}}");
        strcat(many, "]}");
        assert_int_equal(adyen_batch_parse(many, strlen(many), b), TG_ERANGE);
        free(many);
        /* unknown members are ignored; absent ones are "" */
        static const char sparse[] =
            "{\"notificationItems\":[{\"NotificationRequestItem\":{\"x\":[1],\"amount\":null}}]}";
        assert_int_equal(adyen_batch_parse(sparse, strlen(sparse), b), 0);
        assert_int_equal(b->n, 1);
        assert_string_equal(b->item[0].value, "");
        free(b);
}

static void test_key(void **state)
{
        unsigned char key[ADYEN_KEY_MAX];
        size_t n = 0;

        (void)state;
        assert_int_equal(adyen_key_decode("abc", key, &n), TG_EINVAL);
        assert_int_equal(adyen_key_decode("zz", key, &n), TG_EINVAL);
        assert_int_equal(adyen_key_decode("", key, &n), TG_EINVAL);
        assert_int_equal(adyen_key_decode(NULL, key, &n), TG_EINVAL);
        assert_int_equal(adyen_key_decode("0aFF", key, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(key[1], 0xff);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_example_verifies),
            cmocka_unit_test(test_refused_shapes),
            cmocka_unit_test(test_key),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
