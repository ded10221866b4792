/*
 * Unit tests for src/core/suggest.c: the edit distance (case ignored,
 * bounded names), what counts as near, and that the search keeps the first
 * of the closest near names and offers nothing when none is near.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "core/suggest.h"

static void test_distance(void **state)
{
        static const struct {
                const char *a, *b;
                size_t d;
        } cases[] = {
            {"", "", 0},
            {"listen", "listen", 0},
            {"LISTEN", "listen", 0},
            {"lisen", "listen", 1},
            {"listne", "listen", 2},
            {"", "abc", 3},
            {"abc", "", 3},
            {"kitten", "sitting", 3},
            {"max_inflight", "max_in_flight", 1},
        };
        char long_name[SUGGEST_NAME_MAX + 2];
        (void)state;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                size_t d = suggest_distance(cases[i].a, cases[i].b);
                CHECK(d == cases[i].d, "%s/%s: %zu, want %zu", cases[i].a, cases[i].b, d,
                      cases[i].d);
                CHECK(suggest_distance(cases[i].b, cases[i].a) == d, "%s/%s: not symmetric",
                      cases[i].a, cases[i].b);
        }
        memset(long_name, 'a', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = '\0';
        assert_true(suggest_distance(long_name, "a") == SIZE_MAX);
        long_name[SUGGEST_NAME_MAX] = '\0'; /* exactly the bound: measured */
        assert_int_equal(suggest_distance(long_name, long_name), 0);
}

static void test_near(void **state)
{
        (void)state;
        /* two edits are always near; a long name allows a third of its length */
        assert_true(suggest_near("apii", "api"));
        assert_true(suggest_near("ap", "api"));
        assert_false(suggest_near("xyz", "api"));
        assert_true(suggest_near("timeout_msxx", "timeout_ms"));
        assert_true(suggest_near("starts_per_sec", "starts_per_second")); /* 3 <= 17 / 3 */
        assert_false(suggest_near("starts", "starts_per_second"));
}

static void test_best(void **state)
{
        static const char *const names[] = {"listen", "token_file", "lister", "listen"};
        struct suggest s;
        (void)state;

        suggest_init(&s, "lisen");
        assert_null(suggest_best(&s));
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                suggest_consider(&s, names[i]);
        /* "listen" and "lister" are one edit away: the first considered stays */
        assert_ptr_equal(suggest_best(&s), names[0]);

        suggest_init(&s, "nothing_like_it");
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                suggest_consider(&s, names[i]);
        assert_null(suggest_best(&s));

        /* a closer name later replaces a near one */
        suggest_init(&s, "token_fil");
        suggest_consider(&s, "token_fx"); /* two edits: near */
        assert_string_equal(suggest_best(&s), "token_fx");
        suggest_consider(&s, "token_file"); /* one edit */
        assert_string_equal(suggest_best(&s), "token_file");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_distance),
            cmocka_unit_test(test_near),
            cmocka_unit_test(test_best),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
