/*
 * Unit tests for src/core/url_allow.c: the shape a notify_url must have,
 * and the prefix match of `[notify] allow` (scheme, host and port exactly,
 * then the path by segment).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/tg_error.h"
#include "core/url_allow.h"

static void test_shape(void **state)
{
        static const char *const good[] = {
            "http://a.example",       "https://a.example/",  "https://a.example:8443/h?x=1",
            "http://127.0.0.1:9000/", "http://[::1]:9000/x", "HTTPS://A.example/x",
        };
        static const char *const bad[] = {
            "",
            "ftp://a.example/",
            "https://",
            "https:///x",
            "https://user@a.example/",
            "https://a.example/x#frag",
            "https://a.example/x y",
            "https://a.example:0/",
            "https://a.example:65536/",
            "https://a.example:/",
            "https://a.example:80x/",
            "https://a_b.example/",
            "https://[]/",
            "https://[::1]x/",
            "a.example/x",
        };
        char longer[URL_ALLOW_MAX + 2];

        (void)state;
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                assert_int_equal(url_allow_check(good[i]), 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                if (url_allow_check(bad[i]) != TG_EINVAL)
                        fail_msg("accepted: %s", bad[i]);
        }
        assert_int_equal(url_allow_check(NULL), TG_EINVAL);
        memset(longer, 'a', sizeof(longer) - 1);
        longer[sizeof(longer) - 1] = '\0';
        memcpy(longer, "https://", 8);
        assert_int_equal(url_allow_check(longer), TG_EINVAL);
        longer[URL_ALLOW_MAX] = '\0';
        assert_int_equal(url_allow_check(longer), 0);
}

static void test_match(void **state)
{
        static const char *const allow[] = {"https://orders.example/hooks",
                                            "http://127.0.0.1:9000/"};
        static const char *const yes[] = {
            "https://orders.example/hooks",    "https://orders.example/hooks/",
            "https://orders.example/hooks/r1", "https://ORDERS.example:443/hooks?x=1",
            "http://127.0.0.1:9000",           "http://127.0.0.1:9000/anything",
        };
        static const char *const no[] = {
            "https://orders.example/hooksevil",
            "https://orders.example/",
            "http://orders.example/hooks",
            "https://orders.example:8443/hooks",
            "https://orders.example.evil/hooks",
            "https://evil.orders.example/hooks",
            "http://127.0.0.1:9001/",
            "https://127.0.0.1:9000/",
            "http://127.0.0.2:9000/",
        };

        (void)state;
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
                if (url_allow_match(yes[i], allow, 2) != 0)
                        fail_msg("refused: %s", yes[i]);
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
                if (url_allow_match(no[i], allow, 2) != TG_ENOTFOUND)
                        fail_msg("allowed: %s", no[i]);
        assert_int_equal(url_allow_match("https://orders.example/hooks", allow, 0), TG_ENOTFOUND);
        assert_int_equal(url_allow_match("https://u@orders.example/hooks", allow, 2), TG_EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_shape),
            cmocka_unit_test(test_match),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
