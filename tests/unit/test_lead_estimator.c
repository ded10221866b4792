/*
 * Unit tests for src/core/lead_estimator.c: the connect lead before any
 * connect, the longest of the recent ones plus the margin, the window of
 * LEAD_SAMPLES (an old slow connect is forgotten), and the bounds: LEAD_MAX,
 * LEAD_MAX_SHARES with shares, half the interval.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/lead_estimator.h"

#define MS TG_NS_PER_MS
#define US TG_NS_PER_US
/* a spacing long enough never to bound the lead */
#define SLOW (1000 * MS)

static void test_initial(void **state)
{
        struct lead_estimator e;

        (void)state;
        lead_estimator_init(&e);
        assert_int_equal(lead_estimator_lead(&e, SLOW, false), LEAD_INITIAL + LEAD_MARGIN);
        assert_int_equal(lead_estimator_lead(&e, SLOW, true), LEAD_INITIAL + LEAD_MARGIN);
}

static void test_longest_recent(void **state)
{
        struct lead_estimator e;

        (void)state;
        lead_estimator_init(&e);
        /* one fast connect replaces the initial guess (it is no floor) */
        lead_estimator_add(&e, 200 * US);
        assert_int_equal(lead_estimator_lead(&e, SLOW, false), 200 * US + LEAD_MARGIN);
        lead_estimator_add(&e, 900 * US);
        lead_estimator_add(&e, 300 * US);
        assert_int_equal(lead_estimator_lead(&e, SLOW, false), 900 * US + LEAD_MARGIN);
}

static void test_window_forgets(void **state)
{
        struct lead_estimator e;

        (void)state;
        lead_estimator_init(&e);
        lead_estimator_add(&e, 3 * MS);
        for (int i = 0; i < LEAD_SAMPLES - 1; i++)
                lead_estimator_add(&e, 100 * US);
        assert_int_equal(lead_estimator_lead(&e, SLOW, false), 3 * MS + LEAD_MARGIN);
        /* the slow one is the oldest of LEAD_SAMPLES: the next one pushes it out */
        lead_estimator_add(&e, 100 * US);
        assert_int_equal(lead_estimator_lead(&e, SLOW, false), 100 * US + LEAD_MARGIN);
}

static void test_bounds(void **state)
{
        struct lead_estimator e;

        (void)state;
        lead_estimator_init(&e);
        lead_estimator_add(&e, 30 * MS);
        assert_int_equal(lead_estimator_lead(&e, SLOW, false), LEAD_MAX);
        assert_int_equal(lead_estimator_lead(&e, SLOW, true), 30 * MS + LEAD_MARGIN);
        lead_estimator_add(&e, 80 * MS);
        assert_int_equal(lead_estimator_lead(&e, SLOW, true), LEAD_MAX_SHARES);
        /* never more than half the spacing: at 1,000/s, 500 us */
        assert_int_equal(lead_estimator_lead(&e, 1 * MS, false), 500 * US);
        assert_int_equal(lead_estimator_lead(&e, 1 * MS, true), 500 * US);
        /* a spacing of 1 ns: no lead at all */
        assert_int_equal(lead_estimator_lead(&e, 1, false), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_initial),
            cmocka_unit_test(test_longest_recent),
            cmocka_unit_test(test_window_forgets),
            cmocka_unit_test(test_bounds),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
