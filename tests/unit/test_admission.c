/*
 * Unit tests of core/admission: the projected-wait estimate and its
 * refusals, table-driven, with the edge cases (no history, a stuck provider,
 * a measured rate above the ceiling, the backlog limit, disabled), and a
 * provider-wide hold in force, whose rest is part of the wait.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/admission.h"
#include "core/tg_error.h"

static struct admission_config cfg(void)
{
        struct admission_config c;

        admission_config_default(&c);
        c.max_wait_ms = 10 * 1000;
        c.max_backlog = 1000;
        return c;
}

static void test_defaults(void **state)
{
        struct admission_config c;

        (void)state;
        admission_config_default(&c);
        assert_true(c.enabled);
        assert_int_equal(c.max_wait_ms, 300 * 1000);
        assert_int_equal(c.max_backlog, 100000);
        assert_int_equal(c.window_ms, 60 * 1000);
}

static void test_fresh_system_uses_ceiling(void **state)
{
        struct admission_config c = cfg();
        struct admission_figures f = {.backlog = 40, .starts_per_second = 5};
        struct admission_decision d;

        (void)state;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_true(d.admit);
        assert_true(d.rate == 5.0);
        assert_true(d.calls_per_close == 1.0);
        assert_int_equal(d.projected_ms, 41 * 1000 / 5);
        f.backlog = 50; /* 51 / 5 = 10.2 s > 10 s */
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_false(d.admit);
        assert_string_equal(d.why, "max_wait");
        assert_int_equal(d.retry_after_s, 1);
}

static void test_measured_rate_and_calls_per_close(void **state)
{
        struct admission_config c = cfg();
        /* 60 busy seconds, 60 starts (1/s, below the 5/s ceiling), 20 closes:
         * 3 calls a close -> (9 + 1) * 3 / 1 = 30 s */
        struct admission_figures f = {
            .backlog = 9, .starts_per_second = 5, .starts = 60, .closes = 20, .busy_seconds = 60};
        struct admission_decision d;

        (void)state;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_true(d.calls_per_close == 3.0);
        assert_true(d.rate == 1.0);
        assert_int_equal(d.projected_ms, 30000);
        assert_false(d.admit);
        assert_int_equal(d.retry_after_s, 20);
        /* a measured rate above the ceiling is never used */
        f.starts = 600;
        f.closes = 600;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_true(d.rate == 5.0);
        assert_true(d.admit);
}

static void test_stuck_provider(void **state)
{
        struct admission_config c = cfg();
        /* starts but no close at all: each close costs more than every start */
        struct admission_figures f = {
            .backlog = 5, .starts_per_second = 5, .starts = 10, .closes = 0, .busy_seconds = 30};
        struct admission_decision d;

        (void)state;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_false(d.admit);
        assert_true(d.calls_per_close == 11.0);
        /* nothing started in 30 busy seconds (held): very long, capped */
        f.starts = 0;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_false(d.admit);
        assert_true(d.retry_after_s >= 1 && d.retry_after_s <= 3600);
}

static void test_backlog_limit_and_disabled(void **state)
{
        struct admission_config c = cfg();
        struct admission_figures f = {.backlog = 1000, .starts_per_second = 1e6};
        struct admission_decision d;

        (void)state;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_false(d.admit);
        assert_string_equal(d.why, "max_backlog");
        c.enabled = false;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_true(d.admit);
        assert_string_equal(d.why, "disabled");
        f.starts_per_second = 0;
        assert_int_equal(admission_decide(&c, &f, &d), TG_EINVAL);
        assert_int_equal(admission_decide(NULL, &f, &d), TG_EINVAL);
}

/* Refunds the provider reports pending (accepted, not final) wait for the
 * provider, days at worst, not for the exit: a backlog of them refuses
 * nothing, and a second with only them open is not busy (else a
 * week-long pending refund would make the measured rate a poll an hour). */
static void test_provider_pending_not_weighed(void **state)
{
        struct admission_config c = cfg();
        /* 5000 open, 4990 of them pending at the provider: 10 weighed */
        struct admission_figures f = {
            .backlog = 5000, .provider_pending = 4990, .starts_per_second = 5};
        struct admission_decision d;

        (void)state;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_true(d.admit);
        assert_int_equal(d.projected_ms, 11 * 1000 / 5);
        /* the same backlog, none pending: at the limit */
        f.provider_pending = 0;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_false(d.admit);
        assert_string_equal(d.why, "max_backlog");
        /* a count above the backlog (read a moment apart) weighs nothing */
        f.backlog = 3;
        f.provider_pending = 7;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_true(d.admit);
        assert_int_equal(d.projected_ms, 1000 / 5);

        /* busy seconds: a call open; work waiting for the exit beyond the
         * pending ones; counts unknown but something open */
        assert_true(admission_second_busy(1, true, 1, 1));
        assert_true(admission_second_busy(1, false, 0, 0));
        assert_false(admission_second_busy(0, true, 1, 1));
        assert_false(admission_second_busy(0, true, 3, 5));
        assert_true(admission_second_busy(0, true, 2, 1));
        assert_true(admission_second_busy(0, true, 0, 4));
        assert_false(admission_second_busy(0, false, 0, 0));
        /* one pending refund open all minute, one poll in it: idle seconds,
         * the ceiling's rate (too few busy seconds to measure), admitted */
        unsigned busy = 0;
        for (int sec = 0; sec < 60; sec++)
                busy += admission_second_busy(sec == 30 ? 1 : 0, true, 1, 1);
        f = (struct admission_figures){.backlog = 1,
                                       .provider_pending = 1,
                                       .starts_per_second = 5,
                                       .starts = 1,
                                       .closes = 0,
                                       .busy_seconds = busy};
        assert_int_equal(busy, 1);
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_true(d.admit);
        /* the same minute counted as before pending refunds: every second
         * busy, one start, no close -> refused */
        f.busy_seconds = 60;
        f.provider_pending = 0;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_false(d.admit);
}

/* A hold the exit knows about (429/503 with Retry-After): nothing starts
 * before it ends, so its rest is waited by every new refund, however fast
 * the exit has lately been starting calls (found by probing: 0.4 s
 * projected while the exit was held for minutes). */
static void test_known_hold_counts(void **state)
{
        struct admission_config c = cfg();
        struct admission_figures f = {
            .backlog = 9, .starts_per_second = 5, .starts = 300, .closes = 300, .busy_seconds = 60};
        struct admission_decision d;

        (void)state;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_true(d.admit);
        assert_int_equal(d.projected_ms, 2000); /* 10 at 5/s */
        f.hold_remaining_ms = 7000;
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_true(d.admit);
        assert_int_equal(d.projected_ms, 9000);
        f.hold_remaining_ms = 30000; /* 32 s > 10 s */
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_false(d.admit);
        assert_string_equal(d.why, "max_wait");
        assert_int_equal(d.projected_ms, 32000);
        assert_int_equal(d.retry_after_s, 22); /* when the rest fits again */
        f.hold_remaining_ms = -5;              /* a hold already past: nothing */
        assert_int_equal(admission_decide(&c, &f, &d), 0);
        assert_int_equal(d.projected_ms, 2000);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defaults),
            cmocka_unit_test(test_fresh_system_uses_ceiling),
            cmocka_unit_test(test_measured_rate_and_calls_per_close),
            cmocka_unit_test(test_stuck_provider),
            cmocka_unit_test(test_backlog_limit_and_disabled),
            cmocka_unit_test(test_known_hold_counts),
            cmocka_unit_test(test_provider_pending_not_weighed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
