/*
 * Unit tests for src/core/capacity.c against seed 000's figures, exactly:
 * 240 queued at 2/s with 5 closes/s drain in 80 s; at 2 calls per close the
 * same 5 calls/s take 480 s; the exercise (600 queued, 3/s, 10 calls/s, 2
 * calls per close) takes 300 s and a 120 s target needs 16 calls/s. Also the
 * in-flight bound (10 in flight / 3 s = 3.33 calls/s), "never drains", the
 * sensitivity table and its dominant factor, and rejected inputs.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "check.h"
#include "core/tg_error.h"
#include "tools/capacity.h"

/* Equal within 1e-9; a failure names the field and both values. */
#define NEAR(a, b)                                                                                 \
        CHECK(fabs((a) - (b)) < 1e-9, "%s = %.17g, want %.17g", #a, (double)(a), (double)(b))

static struct capacity_plan plan_of(double backlog, double arrivals, double calls, double per,
                                    double target)
{
        struct capacity_input in = {.backlog = backlog,
                                    .arrivals_per_s = arrivals,
                                    .calls_per_s = calls,
                                    .calls_per_close = per,
                                    .target_s = target};
        struct capacity_plan p;
        assert_int_equal(capacity_plan(&in, &p), 0);
        return p;
}

static void test_seed_80s(void **state)
{
        (void)state;
        struct capacity_plan p = plan_of(240, 2, 5, 1, 0);
        NEAR(p.closes_per_s, 5);
        NEAR(p.net_per_s, 3);
        assert_true(p.drains);
        NEAR(p.drain_s, 80);
        NEAR(p.calls_to_hold_per_s, 2);
}

static void test_seed_two_calls_480s(void **state)
{
        (void)state;
        struct capacity_plan p = plan_of(240, 2, 5, 2, 0);
        NEAR(p.closes_per_s, 2.5);
        NEAR(p.net_per_s, 0.5);
        NEAR(p.drain_s, 480);
}

static void test_exercise(void **state)
{
        (void)state;
        struct capacity_plan p = plan_of(600, 3, 10, 2, 120);
        NEAR(p.closes_per_s, 5);
        NEAR(p.net_per_s, 2);
        NEAR(p.drain_s, 300);
        NEAR(p.closes_needed_per_s, 8); /* 600 / 120 + 3 */
        NEAR(p.calls_needed_per_s, 16);
        assert_false(p.target_met);
        /* Sensitivity: calls per close x1.1 -> 10/2.2 - 3 = 1.5454.. net. */
        NEAR(p.worse_drain_s[CAPACITY_BACKLOG], 330);
        NEAR(p.worse_drain_s[CAPACITY_ARRIVALS], 600 / (5 - 3.3));
        NEAR(p.worse_drain_s[CAPACITY_CALLS_PER_CLOSE], 600 / (10 / 2.2 - 3));
        assert_true(fabs(p.worse_drain_s[CAPACITY_CALLS_PER_S] -
                         p.worse_drain_s[CAPACITY_CALLS_PER_CLOSE]) < 1e-6);
        assert_int_equal(p.dominant, CAPACITY_CALLS_PER_CLOSE);
        NEAR(p.worse_drain_s[CAPACITY_CALL_TIME], 0); /* not modelled */
}

static void test_never_drains(void **state)
{
        (void)state;
        struct capacity_plan p = plan_of(240, 3, 5, 2, 60); /* 2.5 closes/s < 3 arriving */
        assert_false(p.drains);
        NEAR(p.drain_s, -1);
        NEAR(p.net_per_s, -0.5);
        assert_false(p.target_met);
        NEAR(p.calls_needed_per_s, 2 * (240.0 / 60 + 3));
        p = plan_of(240, 5, 5, 1, 0); /* equal: still never */
        assert_false(p.drains);
        /* Nothing queued drains at once even when arrivals outrun closes. */
        p = plan_of(0, 9, 5, 1, 0);
        assert_true(p.drains);
        NEAR(p.drain_s, 0);
        /* Draining now, but 10% more arrivals and it never does: dominant. */
        p = plan_of(100, 4.8, 5, 1, 0);
        assert_true(p.drains);
        NEAR(p.worse_drain_s[CAPACITY_ARRIVALS], -1);
        assert_int_equal(p.dominant, CAPACITY_ARRIVALS); /* others never too; first wins */
}

static void test_in_flight_bound(void **state)
{
        (void)state;
        /* Seed 000: 10 in flight at 3 s per call support 3.33 calls/s, below
         * the quota of 5/s. */
        struct capacity_input in = {.backlog = 240,
                                    .arrivals_per_s = 2,
                                    .calls_per_s = 5,
                                    .calls_per_close = 1,
                                    .max_in_flight = 10,
                                    .call_s = 3};
        struct capacity_plan p;
        assert_int_equal(capacity_plan(&in, &p), 0);
        assert_true(p.in_flight_binds);
        NEAR(p.effective_calls_per_s, 10.0 / 3);
        NEAR(p.drain_s, 240 / (10.0 / 3 - 2)); /* 180 s */
        assert_true(p.worse_drain_s[CAPACITY_CALL_TIME] > p.drain_s);
        /* Calls/s lower by 10% changes nothing while the in-flight bound binds. */
        NEAR(p.worse_drain_s[CAPACITY_CALLS_PER_S], p.drain_s);
        in.call_s = 0.5; /* 20 calls/s possible: the quota binds */
        assert_int_equal(capacity_plan(&in, &p), 0);
        assert_false(p.in_flight_binds);
        NEAR(p.drain_s, 80);
}

static void test_bad_input(void **state)
{
        (void)state;
        struct capacity_plan p;
        struct capacity_input good = {.backlog = 1, .calls_per_s = 1, .calls_per_close = 1};
        struct capacity_input bad[6];
        for (int i = 0; i < 6; i++)
                bad[i] = good;
        bad[0].calls_per_s = 0;
        bad[1].calls_per_close = 0.5;
        bad[2].backlog = -1;
        bad[3].arrivals_per_s = NAN;
        bad[4].max_in_flight = 10; /* without call_s */
        bad[5].target_s = INFINITY;
        for (int i = 0; i < 6; i++)
                assert_int_equal(capacity_plan(&bad[i], &p), TG_EINVAL);
        assert_int_equal(capacity_plan(NULL, &p), TG_EINVAL);
        assert_int_equal(capacity_plan(&good, NULL), TG_EINVAL);
        assert_string_equal(capacity_factor_name(CAPACITY_CALLS_PER_CLOSE), "calls per close");
        assert_string_equal(capacity_factor_name(CAPACITY_FACTORS), "unknown");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_seed_80s),        cmocka_unit_test(test_seed_two_calls_480s),
            cmocka_unit_test(test_exercise),        cmocka_unit_test(test_never_drains),
            cmocka_unit_test(test_in_flight_bound), cmocka_unit_test(test_bad_input),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
