/*
 * Unit tests for src/platform/digest.c against published vectors: SHA-256
 * (FIPS 180-2 "abc" and the empty text, NULL with 0 included), HMAC-SHA256
 * (RFC 4231 test case 2, and an empty key), the request signature in hex
 * and base64 with its prefix and its refusals, and the comparison.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/encode.h"
#include "core/tg_error.h"
#include "platform/digest.h"

static void test_sha256(void **state)
{
        char hex[DIGEST_SHA256_HEX];

        (void)state;
        assert_int_equal(digest_sha256_hex("abc", 3, hex), 0);
        assert_string_equal(hex,
                            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_int_equal(digest_sha256_hex(NULL, 0, hex), 0);
        assert_string_equal(hex,
                            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_int_equal(digest_sha256_hex("", 0, hex), 0);
        assert_string_equal(hex,
                            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_hmac_sha256(void **state)
{
        static const char data[] = "what do ya want for nothing?";
        unsigned char mac[DIGEST_SHA256_LEN];
        char hex[DIGEST_SHA256_HEX];

        (void)state;
        assert_int_equal(digest_hmac_sha256("Jefe", 4, data, strlen(data), mac), 0);
        assert_int_equal(encode_hex_text(mac, sizeof(mac), hex, sizeof(hex)), 0);
        assert_string_equal(hex,
                            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        /* an empty key and an empty text are allowed */
        assert_int_equal(digest_hmac_sha256("", 0, NULL, 0, mac), 0);
        assert_int_equal(encode_hex_text(mac, sizeof(mac), hex, sizeof(hex)), 0);
        assert_string_equal(hex,
                            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

static void test_sign(void **state)
{
        struct template t;
        struct template_values v;
        char sig[128], small[20];

        (void)state;
        assert_int_equal(template_parse("{method} {path}", TPL_SIGNING_FIELDS, &t, NULL), 0);
        memset(&v, 0, sizeof(v));
        v.text[TPL_METHOD] = "POST";
        v.text[TPL_PATH] = "/refunds";
        assert_int_equal(digest_sign(&t, &v, "k", 1, DIGEST_HEX, NULL, sig, sizeof(sig)), 0);
        assert_string_equal(sig,
                            "63a37e35bf3831e952fcf7b1ecf90a37f738b5a841c3596b6c6dfb7c5c52fb84");
        assert_int_equal(digest_sign(&t, &v, "k", 1, DIGEST_BASE64, "v1=", sig, sizeof(sig)), 0);
        assert_string_equal(sig, "v1=Y6N+Nb84MelS/Pex7PkKN/c4tahBw1lrbG37fFxS+4Q=");
        assert_int_equal(digest_sign(&t, &v, "k", 1, DIGEST_HEX, NULL, small, sizeof(small)),
                         TG_EFULL);
        assert_int_equal(digest_sign(&t, &v, "k", 1, DIGEST_HEX, NULL, sig, 0), TG_EINVAL);
        v.text[TPL_PATH] = NULL; /* a field it signs has no value */
        assert_int_equal(digest_sign(&t, &v, "k", 1, DIGEST_HEX, NULL, sig, sizeof(sig)),
                         TG_ENOTFOUND);
}

static void test_equal(void **state)
{
        (void)state;
        assert_true(digest_equal("abcd", "abcd", 4));
        assert_false(digest_equal("abcd", "abce", 4));
        assert_true(digest_equal("abcd", "abce", 3));
        assert_true(digest_equal("", "", 0));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_sha256),
            cmocka_unit_test(test_hmac_sha256),
            cmocka_unit_test(test_sign),
            cmocka_unit_test(test_equal),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
