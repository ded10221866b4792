/*
 * Unit tests for src/core/encode.c's encoders and decoders: hex both ways
 * (either case read, lower case written, a bad digit refused with the
 * output untouched), percent-decoding in its two modes ('+' a space in a
 * form, itself in a URL part), in place, and its refusals (a short or bad
 * escape, a NUL written or escaped, a full buffer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/encode.h"
#include "core/tg_error.h"

static void test_hex_text(void **state)
{
        static const unsigned char b[] = {0x00, 0x0f, 0xa5, 0xff};
        char out[9], small[8];

        (void)state;
        assert_int_equal(encode_hex_text(b, sizeof(b), out, sizeof(out)), 0);
        assert_string_equal(out, "000fa5ff");
        assert_int_equal(encode_hex_text(b, 0, out, sizeof(out)), 0);
        assert_string_equal(out, "");
        /* no room for the NUL: refused, still terminated */
        assert_int_equal(encode_hex_text(b, sizeof(b), small, sizeof(small)), TG_EFULL);
        assert_true(memchr(small, '\0', sizeof(small)) != NULL);
}

static void test_hex_decode(void **state)
{
        unsigned char got[4] = {1, 2, 3, 4};
        static const unsigned char want[] = {0x00, 0x0f, 0xa5, 0xff};

        (void)state;
        assert_int_equal(encode_hex_decode("000fa5ff", got, 4), 0);
        assert_memory_equal(got, want, 4);
        memset(got, 7, sizeof(got));
        assert_int_equal(encode_hex_decode("000FA5Ff", got, 4), 0); /* either case */
        assert_memory_equal(got, want, 4);
        /* exactly 2 * len digits are read: what follows does not matter */
        assert_int_equal(encode_hex_decode("abz", got, 1), 0);
        assert_int_equal(got[0], 0xab);
        memset(got, 7, sizeof(got));
        assert_int_equal(encode_hex_decode("000fa5fg", got, 4), TG_EPARSE);
        assert_int_equal(encode_hex_decode("000f", got, 4), TG_EPARSE); /* the NUL is no digit */
        assert_int_equal(encode_hex_decode(" 0", got, 1), TG_EPARSE);
        assert_int_equal(encode_hex_decode("-1", got, 1), TG_EPARSE);
        for (size_t i = 0; i < sizeof(got); i++)
                assert_int_equal(got[i], 7); /* untouched on failure */
        assert_int_equal(encode_hex_decode("", got, 0), 0);
}

static void test_percent_decode_modes(void **state)
{
        char out[32];
        size_t n = 99;

        (void)state;
        assert_int_equal(
            encode_percent_decode(ENCODE_FORM, "a+b%20c%2B%2f", 13, out, sizeof(out), &n), 0);
        assert_string_equal(out, "a b c+/");
        assert_int_equal(n, 7);
        assert_int_equal(
            encode_percent_decode(ENCODE_PATH_SEGMENT, "a+b%20c", 7, out, sizeof(out), NULL), 0);
        assert_string_equal(out, "a+b c");
        /* bytes above 0x7f come through */
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "%C3%A9", 6, out, sizeof(out), &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal((unsigned char)out[0], 0xc3);
        assert_int_equal((unsigned char)out[1], 0xa9);
        /* only len bytes are read */
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "ab&c", 2, out, sizeof(out), &n), 0);
        assert_string_equal(out, "ab");
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "", 0, out, sizeof(out), &n), 0);
        assert_string_equal(out, "");
        assert_int_equal(n, 0);
}

static void test_percent_decode_in_place(void **state)
{
        char text[] = "us%65r%40host+x";

        (void)state;
        assert_int_equal(encode_percent_decode(ENCODE_PATH_SEGMENT, text, strlen(text), text,
                                               sizeof(text), NULL),
                         0);
        assert_string_equal(text, "user@host+x");
}

static void test_percent_decode_refuses(void **state)
{
        char out[8];
        size_t n = 99;

        (void)state;
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "a%2", 3, out, sizeof(out), &n),
                         TG_EPARSE);
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "a%", 2, out, sizeof(out), &n),
                         TG_EPARSE);
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "%g0", 3, out, sizeof(out), &n),
                         TG_EPARSE);
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "%0g", 3, out, sizeof(out), &n),
                         TG_EPARSE);
        /* "%2" then what lies past len is not read as the second digit */
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "%20", 2, out, sizeof(out), &n),
                         TG_EPARSE);
        /* a NUL, escaped or written, is refused */
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "a%00", 4, out, sizeof(out), &n),
                         TG_EPARSE);
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "a\0b", 3, out, sizeof(out), &n),
                         TG_EPARSE);
        /* out holds 7 bytes and the NUL */
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "1234567", 7, out, sizeof(out), &n), 0);
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "12345678", 8, out, sizeof(out), &n),
                         TG_EFULL);
        assert_true(memchr(out, '\0', sizeof(out)) != NULL);
        assert_int_equal(encode_percent_decode(ENCODE_FORM, "a", 1, out, 0, &n), TG_EFULL);
        assert_int_equal(n, 7); /* from the last success only */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_hex_text),
            cmocka_unit_test(test_hex_decode),
            cmocka_unit_test(test_percent_decode_modes),
            cmocka_unit_test(test_percent_decode_in_place),
            cmocka_unit_test(test_percent_decode_refuses),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
