/*
 * Unit tests for src/core/share_want.c: a count first seen is fresh for
 * SHARE_WANT_FRESH_NS, a count that keeps moving stays fresh, one that stops
 * goes stale SHARE_WANT_FRESH_NS after its last move, and one that moves
 * again is fresh again; nothing seen is not a wish.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/share_want.h"

#define MS TG_NS_PER_MS

static void test_nothing_seen(void **state)
{
        struct share_want w = {0};

        (void)state;
        assert_false(share_want_fresh(&w, 0));
        assert_false(share_want_fresh(&w, 10000 * MS));
}

static void test_first_sight_waits_once(void **state)
{
        struct share_want w = {0};

        (void)state;
        /* an old count, first seen: fresh until the freshness is waited out */
        share_want_seen(&w, 41, 5000 * MS);
        assert_true(share_want_fresh(&w, 5000 * MS));
        share_want_seen(&w, 41, 5000 * MS + SHARE_WANT_FRESH_NS - 1);
        assert_true(share_want_fresh(&w, 5000 * MS + SHARE_WANT_FRESH_NS - 1));
        share_want_seen(&w, 41, 5000 * MS + SHARE_WANT_FRESH_NS);
        assert_false(share_want_fresh(&w, 5000 * MS + SHARE_WANT_FRESH_NS));
}

static void test_moving_stays_fresh_then_stops(void **state)
{
        struct share_want w = {0};
        tg_mono_ns t = 0;
        int64_t seq = 7;

        (void)state;
        share_want_seen(&w, seq, t);
        t += SHARE_WANT_FRESH_NS; /* the first sight waited out */
        share_want_seen(&w, seq, t);
        assert_false(share_want_fresh(&w, t));
        /* a standby says it every second: fresh the whole time */
        for (int i = 0; i < 10; i++) {
                seq++;
                share_want_seen(&w, seq, t);
                assert_true(share_want_fresh(&w, t));
                t += SHARE_WANT_EVERY_NS;
                assert_true(share_want_fresh(&w, t));
        }
        /* it stops (took its share): stale FRESH after its last move */
        tg_mono_ns last = t - SHARE_WANT_EVERY_NS;
        share_want_seen(&w, seq, last + SHARE_WANT_FRESH_NS - 1);
        assert_true(share_want_fresh(&w, last + SHARE_WANT_FRESH_NS - 1));
        assert_false(share_want_fresh(&w, last + SHARE_WANT_FRESH_NS));
        /* a new standby: fresh again at its first move */
        share_want_seen(&w, seq + 1, last + 10 * SHARE_WANT_FRESH_NS);
        assert_true(share_want_fresh(&w, last + 10 * SHARE_WANT_FRESH_NS));
}

static void test_a_reset_count_is_a_move(void **state)
{
        struct share_want w = {0};

        (void)state;
        share_want_seen(&w, 9, 0);
        share_want_seen(&w, 9, SHARE_WANT_FRESH_NS);
        assert_false(share_want_fresh(&w, SHARE_WANT_FRESH_NS));
        /* a split recorded anew starts the count at 0: any change is a move */
        share_want_seen(&w, 0, 2 * SHARE_WANT_FRESH_NS);
        assert_true(share_want_fresh(&w, 2 * SHARE_WANT_FRESH_NS));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_nothing_seen),
            cmocka_unit_test(test_first_sight_waits_once),
            cmocka_unit_test(test_moving_stays_fresh_then_stops),
            cmocka_unit_test(test_a_reset_count_is_a_move),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
