/*
 * test_event_sig — the Tollgate-Signature header (platform/event_sig.h):
 * the worked example of docs/operating.md ("Verifying the signature"),
 * computed independently there, rotation with two secrets, and refusals of
 * a wrong secret, an altered body, a stale timestamp and malformed headers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/tg_error.h"
#include "platform/event_sig.h"

static const char body[] =
    "{\"amount\":1500,\"at\":1764842400123,\"currency\":\"TWD\",\"id\":42,\"operation_id\":"
    "\"ord-1001-r1\",\"previous_state\":\"in_flight\",\"reason\":null,\"refund_id\":\"re_8f2c\","
    "\"state\":\"succeeded\",\"status_url\":\"/v1/refunds/ord-1001-r1\",\"type\":"
    "\"refund.state_changed\"}";
static const char example[] =
    "t=1764842400,v1=aca68a999e0287e338720ac8c9807ad7a25e5c0c51073c463a16fa048e71ee21";
#define T 1764842400

static void test_worked_example(void **state)
{
        const char *one[] = {"whsec-example-0123456789"};
        char sig[EVENT_SIG_MAX];

        (void)state;
        assert_int_equal(event_sig_make(one, 1, T, body, strlen(body), sig, sizeof(sig)), 0);
        assert_string_equal(sig, example);
        assert_int_equal(event_sig_check(example, one, 1, body, strlen(body), T + 10, 300), 0);
}

static void test_rotation(void **state)
{
        const char *both[] = {"new-secret-0123456789", "whsec-example-0123456789"};
        const char *old_only[] = {"whsec-example-0123456789"};
        const char *new_only[] = {"new-secret-0123456789"};
        char sig[EVENT_SIG_MAX];

        (void)state;
        assert_int_equal(event_sig_make(both, 2, T, body, strlen(body), sig, sizeof(sig)), 0);
        /* one v1 per secret: a receiver knowing either accepts */
        assert_non_null(strstr(sig, example + strlen("t=1764842400")));
        assert_int_equal(event_sig_check(sig, old_only, 1, body, strlen(body), T, 300), 0);
        assert_int_equal(event_sig_check(sig, new_only, 1, body, strlen(body), T, 300), 0);
        assert_int_equal(event_sig_check(example, both, 2, body, strlen(body), T, 300), 0);
}

static void test_refusals(void **state)
{
        const char *one[] = {"whsec-example-0123456789"};
        const char *wrong[] = {"other-secret-0123456789"};
        char altered[sizeof(body)];

        (void)state;
        memcpy(altered, body, sizeof(body));
        altered[strlen("{\"amount\":1")] = '9'; /* 1900 */
        assert_int_equal(event_sig_check(example, wrong, 1, body, strlen(body), T, 300),
                         TG_ECONFLICT);
        assert_int_equal(event_sig_check(example, one, 1, altered, strlen(altered), T, 300),
                         TG_ECONFLICT);
        assert_int_equal(event_sig_check(example, one, 1, body, strlen(body), T + 301, 300),
                         TG_ERANGE);
        assert_int_equal(event_sig_check(NULL, one, 1, body, strlen(body), T, 300), TG_EPARSE);
        assert_int_equal(event_sig_check("", one, 1, body, strlen(body), T, 300), TG_EPARSE);
        assert_int_equal(event_sig_check("t=1764842400", one, 1, body, strlen(body), T, 300),
                         TG_EPARSE);
        assert_int_equal(event_sig_check("v1=aca68a999e0287e338720ac8c9807ad7a25e5c0c51073c463a16f"
                                         "a048e71ee21",
                                         one, 1, body, strlen(body), T, 300),
                         TG_EPARSE);
        assert_int_equal(event_sig_check("t=x,v1=aca68a999e0287e338720ac8c9807ad7a25e5c0c51073c46"
                                         "3a16fa048e71ee21",
                                         one, 1, body, strlen(body), T, 300),
                         TG_EPARSE);
        assert_int_equal(event_sig_check("t=1764842400,v1=zz68a999e0287e338720ac8c9807ad7a25e5c0c"
                                         "51073c463a16fa048e71ee21",
                                         one, 1, body, strlen(body), T, 300),
                         TG_EPARSE);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_worked_example),
            cmocka_unit_test(test_rotation),
            cmocka_unit_test(test_refusals),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
