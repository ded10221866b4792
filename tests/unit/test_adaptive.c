/*
 * Unit tests for src/core/adaptive.c: the ceiling until a pushback; a cut
 * to beta; back at W_max after K seconds, above it after that, never over
 * the ceiling nor under the floor; a pushback from a call sent before the
 * last cut is ignored; a one-off pushback costs seconds, not minutes. And
 * the controller against a provider of lower true capacity (a token bucket,
 * as tollgate-stub --capacity plays it), simulated: it settles a batch
 * within 1.3x the time the capacity allows with a fifth of the refusals a
 * fixed rate would meet, and comes back to the ceiling when the capacity
 * returns.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/adaptive.h"

#define S   TG_NS_PER_S
#define K_S (cbrt((1.0 - ADAPTIVE_BETA) / ADAPTIVE_C_SHARE))

static void test_ceiling_until_pushback(void **state)
{
        (void)state;
        struct adaptive a;
        adaptive_init(&a, 10, 0.5);
        assert_true(adaptive_rate(&a, 0) == 10);
        assert_true(adaptive_rate(&a, 1000 * S) == 10);
}

static void test_cut_and_curve(void **state)
{
        (void)state;
        struct adaptive a;
        adaptive_init(&a, 10, 0.5);
        assert_true(adaptive_pushback(&a, 1 * S, 2 * S));
        assert_float_equal(adaptive_rate(&a, 2 * S), 7.0, 1e-9);
        /* concave: most of the way back in the first half of K */
        double half = adaptive_rate(&a, 2 * S + (tg_mono_ns)(K_S / 2 * S));
        assert_true(half > 9.0 && half < 10.0);
        /* back at W_max (the ceiling here) after K */
        assert_float_equal(adaptive_rate(&a, 2 * S + (tg_mono_ns)(K_S * S)), 10.0, 1e-6);
        /* and never over the ceiling */
        assert_true(adaptive_rate(&a, 100 * S) == 10);
        assert_int_equal(a.cuts, 1);
}

static void test_once_per_round(void **state)
{
        (void)state;
        struct adaptive a;
        adaptive_init(&a, 10, 0.5);
        assert_true(adaptive_pushback(&a, 1 * S, 2 * S));
        /* calls sent before the cut, refused after it: no second cut */
        assert_false(adaptive_pushback(&a, 2 * S - 1, 2 * S + S / 10));
        assert_false(adaptive_pushback(&a, 1 * S, 3 * S));
        assert_float_equal(adaptive_rate(&a, 2 * S), 7.0, 1e-9);
        /* a call sent after it: a second cut, from where the curve was */
        double before = adaptive_rate(&a, 2 * S + S / 2);
        assert_true(adaptive_pushback(&a, 2 * S + 1, 2 * S + S / 2));
        assert_float_equal(adaptive_rate(&a, 2 * S + S / 2), before * ADAPTIVE_BETA, 1e-9);
        assert_int_equal(a.cuts, 2);
}

static void test_floor(void **state)
{
        (void)state;
        struct adaptive a;
        adaptive_init(&a, 10, 2);
        tg_mono_ns t = 0;
        for (int i = 0; i < 20; i++) {
                t += S / 100;
                adaptive_pushback(&a, t, t);
        }
        assert_true(adaptive_rate(&a, t) == 2);
        /* a floor under a thousandth of the ceiling is raised to it; over
         * the ceiling, lowered to it */
        adaptive_init(&a, 10, 0);
        assert_float_equal(a.floor, 0.01, 1e-12);
        adaptive_init(&a, 10, 50);
        assert_true(a.floor == 10);
}

/* A run of n successes at the controller's rate against a token bucket of
 * `capacity` a second (room for one), the capacity changing to `after` once
 * half are through (0: no change). Returns the seconds from the first start
 * to the last, and the refusals; *ret_back: seconds from the change until
 * the rate is within 5 % of the ceiling (-1: never). */
static double run(double ceiling, double capacity, double after, int n, int *ret_refused,
                  double *ret_back)
{
        struct adaptive a;
        adaptive_init(&a, ceiling, ceiling / 20);
        double tokens = 1, cap = capacity;
        tg_mono_ns t = 0, last = 0, changed = -1;
        int ok = 0, refused = 0;
        *ret_back = -1;
        while (ok < n && t < 3600 * S) {
                double r = adaptive_rate(&a, t);
                if (changed >= 0 && *ret_back < 0 && r >= 0.95 * ceiling)
                        *ret_back = (double)(t - changed) / S;
                t += (tg_mono_ns)ceil(S / r);
                tokens += (double)(t - last) / S * cap;
                if (tokens > 1)
                        tokens = 1;
                last = t;
                if (tokens >= 1) {
                        tokens -= 1;
                        ok++;
                        if (after > 0 && changed < 0 && ok >= n / 2) {
                                cap = after;
                                changed = t;
                        }
                } else {
                        refused++;
                        /* the 429 comes back a round trip later */
                        adaptive_pushback(&a, t, t + 10 * TG_NS_PER_MS);
                }
        }
        *ret_refused = refused;
        return (double)t / S;
}

static void test_against_a_lower_capacity(void **state)
{
        (void)state;
        int refused;
        double back;
        /* the case: 60 refunds, 3/s true capacity, 10/s ceiling; the
         * fixed exit took 67-76 s and met 58 refusals */
        double took = run(10, 3, 0, 60, &refused, &back);
        print_message("60 at 3/s under 10/s: %.1f s, %d refused\n", took, refused);
        assert_true(took <= 1.3 * 60 / 3.0);
        assert_true(refused <= 58 / 5);
        /* capacity at the ceiling: as fast as the fixed rate */
        took = run(10, 100, 0, 60, &refused, &back);
        assert_true(took <= 60 / 10.0 + 0.2);
        assert_int_equal(refused, 0);
        /* capacity back: at the ceiling within 30 s */
        took = run(10, 3, 1000, 200, &refused, &back);
        print_message("capacity back: ceiling after %.1f s\n", back);
        assert_true(back >= 0 && back <= 30);
        /* and the same shape at 1000/s */
        took = run(1000, 300, 0, 3000, &refused, &back);
        assert_true(took <= 1.3 * 3000 / 300.0);
}

static void test_one_off_pushback(void **state)
{
        (void)state;
        struct adaptive a;
        adaptive_init(&a, 50, 2.5);
        adaptive_pushback(&a, 10 * S, 10 * S);
        /* back at the ceiling within K and a second, not minutes */
        assert_true(adaptive_rate(&a, 10 * S + (tg_mono_ns)((K_S + 1) * S)) == 50);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_ceiling_until_pushback),
            cmocka_unit_test(test_cut_and_curve),
            cmocka_unit_test(test_once_per_round),
            cmocka_unit_test(test_floor),
            cmocka_unit_test(test_against_a_lower_capacity),
            cmocka_unit_test(test_one_off_pushback),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
