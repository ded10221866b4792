/*
 * Tests of core/holds: what a call that ended says about the whole account.
 * 429 and 503 hold for their Retry-After or the default; other statuses do
 * not; a run of timeouts after send holds once it reaches its length and
 * starts counting again; a complete answer ends a run, a reset or an unsent
 * call does not; a probe is healthy unless limited, timed out or unsent.
 * A run of unsent calls (the provider unreachable: refused, connect or TLS
 * failure) holds too, each failed probe after it holds twice as long up to
 * the cap, and any call that reached the provider ends run and doubling.
 * A probe refused again with 429/503 and no Retry-After doubles the last
 * such hold up to the cap (the probe interval grows); a Retry-After is
 * taken as it is; any other answer ends the doubling.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/holds.h"

static const struct holds_config cfg = {.default_hold_ms = 1000,
                                        .timeout_run_hold = 3,
                                        .timeout_hold_ms = 2500,
                                        .unreachable_run_hold = 3,
                                        .unreachable_hold_ms = 5000,
                                        .unreachable_hold_max_ms = 30000};

static struct holds_decision after(struct holds_state *st, enum tg_transport_result tr, int status,
                                   int64_t retry_after_ms, bool probe)
{
        struct holds_call c = {.transport = tr,
                               .http_status = status,
                               .retry_after_ms = retry_after_ms,
                               .probe = probe};
        struct holds_decision d;

        holds_after_call(&cfg, st, &c, &d);
        return d;
}

static void test_limited(void **state)
{
        struct holds_state st = {0};
        struct holds_decision d;

        (void)state;
        d = after(&st, TG_TR_COMPLETE, 503, 7000, false);
        assert_int_equal(d.why, HOLDS_LIMITED);
        assert_int_equal(d.hold_ms, 7000);
        d = after(&st, TG_TR_COMPLETE, 429, -1, false);
        assert_int_equal(d.why, HOLDS_LIMITED);
        assert_int_equal(d.hold_ms, 1000); /* no Retry-After: the default */
        d = after(&st, TG_TR_COMPLETE, 429, 0, false);
        assert_int_equal(d.hold_ms, 0); /* "Retry-After: 0" is an answer too */
        for (int s = 100; s < 600; s++) {
                if (s == 429 || s == 503)
                        continue;
                d = after(&st, TG_TR_COMPLETE, s, 5000, false);
                assert_int_equal(d.why, HOLDS_NONE);
        }
        /* a 503 that never fully arrived is not the provider speaking */
        d = after(&st, TG_TR_RESET, 503, 5000, false);
        assert_int_equal(d.why, HOLDS_NONE);
        /* a 429 that says "this key is still in progress" speaks of the
         * key, not the account: no hold */
        struct holds_call c = {.transport = TG_TR_COMPLETE,
                               .http_status = 429,
                               .retry_after_ms = 5000,
                               .key_in_progress = true};
        holds_after_call(&cfg, &st, &c, &d);
        assert_int_equal(d.why, HOLDS_NONE);
        c.key_in_progress = false;
        holds_after_call(&cfg, &st, &c, &d);
        assert_int_equal(d.why, HOLDS_LIMITED);
}

/* exit.adaptive (pushback_only): a 429/503 without Retry-After holds
 * nothing, it is a pushback; one with Retry-After still holds for it; a
 * probe refused so is unhealthy; no doubling builds up. */
static void test_pushback_only(void **state)
{
        struct holds_config pc = cfg;
        struct holds_state st = {0};
        struct holds_decision d;
        struct holds_call c = {
            .transport = TG_TR_COMPLETE, .http_status = 429, .retry_after_ms = -1};

        (void)state;
        pc.pushback_only = true;
        holds_after_call(&pc, &st, &c, &d);
        assert_int_equal(d.why, HOLDS_PUSHBACK);
        assert_int_equal(d.hold_ms, 0);
        assert_int_equal(st.limited_hold_ms, 0);
        c.http_status = 503;
        c.retry_after_ms = 4000;
        holds_after_call(&pc, &st, &c, &d);
        assert_int_equal(d.why, HOLDS_LIMITED);
        assert_int_equal(d.hold_ms, 4000);
        c.retry_after_ms = -1;
        c.probe = true;
        holds_after_call(&pc, &st, &c, &d);
        assert_int_equal(d.why, HOLDS_PUSHBACK);
        assert_true(d.probe_done);
        assert_false(d.probe_healthy);
        /* a timeout run still holds */
        c = (struct holds_call){.transport = TG_TR_TIMEOUT_AFTER_SEND, .retry_after_ms = -1};
        for (int i = 0; i < 3; i++)
                holds_after_call(&pc, &st, &c, &d);
        assert_int_equal(d.why, HOLDS_TIMEOUTS);
}

static void test_limited_probe_doubles(void **state)
{
        struct holds_config c = cfg;
        struct holds_state st = {0};
        struct holds_call call = {
            .transport = TG_TR_COMPLETE, .http_status = 429, .retry_after_ms = -1};
        struct holds_decision d;
        static const int64_t want[] = {1000, 2000, 4000, 8000, 8000, 8000};

        (void)state;
        c.limited_hold_max_ms = 8000;
        /* the first 429 holds for the default; each probe refused again,
         * twice as long, up to the cap */
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                call.probe = i > 0;
                holds_after_call(&c, &st, &call, &d);
                assert_int_equal(d.why, HOLDS_LIMITED);
                assert_int_equal(d.hold_ms, want[i]);
        }
        /* a call that was open when the hold began, refused too: the
         * default, and the doubling keeps its place */
        call.probe = false;
        holds_after_call(&c, &st, &call, &d);
        assert_int_equal(d.hold_ms, 1000);
        call.probe = true;
        call.http_status = 503;
        holds_after_call(&c, &st, &call, &d);
        assert_int_equal(d.hold_ms, 8000);
        /* a Retry-After is the provider's own word: taken as it is, and the
         * next bare refusal doubles from it */
        call.retry_after_ms = 3000;
        holds_after_call(&c, &st, &call, &d);
        assert_int_equal(d.hold_ms, 3000);
        call.retry_after_ms = -1;
        holds_after_call(&c, &st, &call, &d);
        assert_int_equal(d.hold_ms, 6000);
        /* a healthy answer ends the doubling: the next episode starts over */
        call.http_status = 201;
        holds_after_call(&c, &st, &call, &d);
        assert_int_equal(d.why, HOLDS_NONE);
        assert_true(d.probe_healthy);
        call.http_status = 429;
        holds_after_call(&c, &st, &call, &d);
        assert_int_equal(d.hold_ms, 1000);
        /* a cap under the default never shortens the default */
        c.limited_hold_max_ms = 10;
        holds_after_call(&c, &st, &call, &d);
        assert_int_equal(d.hold_ms, 1000);
        assert_true(holds_limited(TG_TR_COMPLETE, 503));
        assert_false(holds_limited(TG_TR_RESET, 429));
        assert_false(holds_limited(TG_TR_COMPLETE, 500));
}

static void test_timeout_runs(void **state)
{
        struct holds_state st = {0};
        struct holds_decision d;

        (void)state;
        d = after(&st, TG_TR_TIMEOUT_AFTER_SEND, 0, -1, false);
        assert_int_equal(d.why, HOLDS_NONE);
        d = after(&st, TG_TR_RESET, 0, -1, false); /* neither ends nor counts */
        d = after(&st, TG_TR_NOT_SENT, 0, -1, false);
        d = after(&st, TG_TR_TIMEOUT_AFTER_SEND, 0, -1, false);
        assert_int_equal(d.why, HOLDS_NONE);
        d = after(&st, TG_TR_TIMEOUT_AFTER_SEND, 0, -1, false);
        assert_int_equal(d.why, HOLDS_TIMEOUTS);
        assert_int_equal(d.hold_ms, 2500);
        assert_int_equal(d.timeouts_in_row, 3);
        assert_int_equal(st.timeouts_in_row, 0); /* a new run starts */
        after(&st, TG_TR_TIMEOUT_AFTER_SEND, 0, -1, false);
        after(&st, TG_TR_TIMEOUT_AFTER_SEND, 0, -1, false);
        after(&st, TG_TR_COMPLETE, 201, -1, false); /* an answer ends the run */
        d = after(&st, TG_TR_TIMEOUT_AFTER_SEND, 0, -1, false);
        assert_int_equal(d.why, HOLDS_NONE);
        assert_int_equal(st.timeouts_in_row, 1);
        /* a run length of 0 never holds */
        struct holds_config never = cfg;
        struct holds_state st2 = {0};
        struct holds_call c = {.transport = TG_TR_TIMEOUT_AFTER_SEND, .retry_after_ms = -1};
        never.timeout_run_hold = 0;
        for (int i = 0; i < 100; i++) {
                holds_after_call(&never, &st2, &c, &d);
                assert_int_equal(d.why, HOLDS_NONE);
        }
}

static void test_probe(void **state)
{
        struct holds_state st = {0};
        struct holds_decision d;

        (void)state;
        d = after(&st, TG_TR_COMPLETE, 201, -1, true);
        assert_true(d.probe_done && d.probe_healthy);
        d = after(&st, TG_TR_COMPLETE, 422, -1, true); /* a refusal is still an answer */
        assert_true(d.probe_done && d.probe_healthy);
        d = after(&st, TG_TR_COMPLETE, 503, -1, true);
        assert_true(d.probe_done && !d.probe_healthy);
        d = after(&st, TG_TR_TIMEOUT_AFTER_SEND, 0, -1, true);
        assert_true(d.probe_done && !d.probe_healthy);
        d = after(&st, TG_TR_NOT_SENT, 0, -1, true);
        assert_true(d.probe_done && !d.probe_healthy);
        d = after(&st, TG_TR_COMPLETE, 201, -1, false);
        assert_false(d.probe_done);
}

static void test_unreachable_runs(void **state)
{
        struct holds_state st = {0};
        struct holds_decision d;

        (void)state;
        d = after(&st, TG_TR_NOT_SENT, 0, -1, false);
        assert_int_equal(d.why, HOLDS_NONE);
        d = after(&st, TG_TR_NOT_SENT, 0, -1, false);
        assert_int_equal(d.why, HOLDS_NONE);
        d = after(&st, TG_TR_NOT_SENT, 0, -1, false);
        assert_int_equal(d.why, HOLDS_UNREACHABLE);
        assert_int_equal(d.hold_ms, 5000);
        assert_int_equal(d.unreachable_in_row, 3);
        /* a call already out when the hold came ends unsent: no doubling */
        d = after(&st, TG_TR_NOT_SENT, 0, -1, false);
        assert_int_equal(d.why, HOLDS_NONE);
        /* the probe sends nothing either: hold again at once, twice as long */
        d = after(&st, TG_TR_NOT_SENT, 0, -1, true);
        assert_int_equal(d.why, HOLDS_UNREACHABLE);
        assert_int_equal(d.hold_ms, 10000);
        assert_true(d.probe_done && !d.probe_healthy);
        d = after(&st, TG_TR_NOT_SENT, 0, -1, true);
        assert_int_equal(d.hold_ms, 20000);
        d = after(&st, TG_TR_NOT_SENT, 0, -1, true);
        assert_int_equal(d.hold_ms, 30000); /* the cap */
        d = after(&st, TG_TR_NOT_SENT, 0, -1, true);
        assert_int_equal(d.hold_ms, 30000);
        /* the provider answers: the run and the doubling are over */
        d = after(&st, TG_TR_COMPLETE, 201, -1, true);
        assert_int_equal(d.why, HOLDS_NONE);
        assert_true(d.probe_healthy);
        assert_int_equal(st.unreachable_hold_ms, 0);
        d = after(&st, TG_TR_NOT_SENT, 0, -1, false);
        d = after(&st, TG_TR_NOT_SENT, 0, -1, false);
        assert_int_equal(d.why, HOLDS_NONE);
        /* a timeout after send reached the provider: it ends the run too */
        d = after(&st, TG_TR_TIMEOUT_AFTER_SEND, 0, -1, false);
        d = after(&st, TG_TR_NOT_SENT, 0, -1, false);
        d = after(&st, TG_TR_NOT_SENT, 0, -1, false);
        assert_int_equal(d.why, HOLDS_NONE);
        d = after(&st, TG_TR_RESET, 0, -1, false);
        assert_int_equal(st.unreachable_in_row, 0);
        /* the first hold of a new episode starts at the base again */
        for (int i = 0; i < 3; i++)
                d = after(&st, TG_TR_NOT_SENT, 0, -1, false);
        assert_int_equal(d.why, HOLDS_UNREACHABLE);
        assert_int_equal(d.hold_ms, 5000);
        /* a run length of 0 never holds */
        struct holds_config never = cfg;
        struct holds_state st2 = {0};
        struct holds_call c = {.transport = TG_TR_NOT_SENT, .retry_after_ms = -1};
        never.unreachable_run_hold = 0;
        for (int i = 0; i < 100; i++) {
                c.probe = i % 2;
                holds_after_call(&never, &st2, &c, &d);
                assert_int_equal(d.why, HOLDS_NONE);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_limited),       cmocka_unit_test(test_limited_probe_doubles),
            cmocka_unit_test(test_pushback_only), cmocka_unit_test(test_timeout_runs),
            cmocka_unit_test(test_probe),         cmocka_unit_test(test_unreachable_runs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
