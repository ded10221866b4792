/*
 * Unit tests for src/core/pacer.c: config checks, the interval arithmetic,
 * the two gates, idle-earns-nothing, in-flight room, holds and the probe,
 * and long seeded property runs in which random starts, finishes, holds and
 * probe results are judged from outside against the spacing rule.
 *
 * The property runs keep their own log of actual starts and check it against
 * the rules with exact integer arithmetic (a rate is given as a fraction
 * num/den), so a pacer that rounds the spacing down, credits idle time, lets
 * a second probe out or overfills the in-flight room fails here.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "check.h"
#include "core/pacer.h"
#include "core/rng.h"
#include "core/tg_error.h"

/* CHECK (check.h), not cmocka's range asserts: those are unsigned; CHECK
 * keeps int64 values signed and says which seed and step failed. */

/* A rate as an exact fraction, and the double the pacer is configured with. */
struct rate {
        int64_t num;
        int64_t den;
};

static double rate_value(struct rate r)
{
        return (double)r.num / (double)r.den;
}

/* True when a gap of `gap_ns` is at least 1/rate seconds, exactly. */
static bool gap_ok(struct rate r, int64_t gap_ns)
{
        /* gap * num >= 1e9 * den, with gap split to keep the product small. */
        if (gap_ns < 0)
                return false;
        int64_t need = TG_NS_PER_S * r.den;
        if (gap_ns >= need) /* num >= 1 */
                return true;
        return gap_ns * r.num >= need;
}

static struct pacer *make(double rate, unsigned max_in_flight)
{
        struct pacer_config cfg = {.starts_per_second = rate, .max_in_flight = max_in_flight};
        struct pacer *p = NULL;
        assert_int_equal(pacer_new(&cfg, &p), 0);
        assert_non_null(p);
        return p;
}

/* --- configuration and interval ----------------------------------------- */

static void test_config_rejected(void **state)
{
        (void)state;
        const double bad_rates[] = {0.0,   -1.0, -0.0,     1e9 + 1.0, 1e12,
                                    1e-12, NAN,  INFINITY, -INFINITY};
        for (size_t i = 0; i < sizeof(bad_rates) / sizeof(bad_rates[0]); i++) {
                struct pacer_config cfg = {.starts_per_second = bad_rates[i], .max_in_flight = 1};
                struct pacer *p = (struct pacer *)&cfg; /* sentinel: must stay untouched */
                CHECK(pacer_new(&cfg, &p) == TG_EINVAL, "rate %g accepted", bad_rates[i]);
                CHECK(p == (struct pacer *)&cfg, "ret_pacer written on failure");
        }
        struct pacer_config cfg = {.starts_per_second = 5.0, .max_in_flight = 0};
        struct pacer *p = NULL;
        assert_int_equal(pacer_new(&cfg, &p), TG_EINVAL);
        assert_null(p);
        assert_int_equal(pacer_new(NULL, &p), TG_EINVAL);
        cfg.max_in_flight = 1;
        assert_int_equal(pacer_new(&cfg, NULL), TG_EINVAL);
        pacer_free(NULL);
}

static void test_interval_values(void **state)
{
        (void)state;
        static const struct {
                double rate;
                tg_mono_ns interval;
        } table[] = {
            {1000.0, 1000000},
            {5.0, 200000000},
            {3.0, 333333334},
            {7.0, 142857143},
            {0.5, 2000000000},
            {1.0, 1000000000},
            {1e9, 1},
            {3e8, 4},
            {1e6, 1000},
            {6.0, 166666667},
            {1000000000.0 / 3, 3},
            {2.5, 400000000},
            {0.3, 3333333334},
        };
        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
                struct pacer *p = make(table[i].rate, 1);
                tg_mono_ns got = pacer_interval(p);
                /* 1e9/3 as a double lies a hair below 1e9/3, so it needs 4. */
                if (table[i].rate == 1000000000.0 / 3)
                        CHECK(got == 3 || got == 4, "rate 1e9/3: %lld", (long long)got);
                else
                        CHECK(got == table[i].interval, "rate %g: interval %lld, want %lld",
                              table[i].rate, (long long)got, (long long)table[i].interval);
                /* Never shorter than 1/rate, never more than 1 ns longer. */
                CHECK((double)got * table[i].rate >= 1e9 * (1 - 1e-15), "rate %g too short",
                      table[i].rate);
                pacer_free(p);
        }
        /* One start every 31 years is still a rate; about 1e18 ns. */
        struct pacer *p = make(1e-9, 1);
        CHECK(pacer_interval(p) >= 1000000000000000000LL &&
                  pacer_interval(p) <= 1000000000000001000LL,
              "rate 1e-9: %lld", (long long)pacer_interval(p));
        pacer_free(p);
}

/* --- the two gates ------------------------------------------------------- */

static void test_first_start_at_once(void **state)
{
        (void)state;
        struct pacer *p = make(5.0, 10);
        assert_true(pacer_next_slot(p) == INT64_MIN);
        assert_false(pacer_held(p, 0));
        assert_int_equal(pacer_in_flight(p), 0);
        tg_mono_ns t0 = 123456789;
        assert_true(pacer_may_start(p, t0));
        bool probe = true;
        assert_int_equal(pacer_start(p, t0, &probe), 0);
        assert_false(probe);
        assert_int_equal(pacer_in_flight(p), 1);
        assert_true(pacer_next_slot(p) == t0 + 200000000);
        pacer_free(p);
}

static void test_spacing_exact(void **state)
{
        (void)state;
        struct pacer *p = make(3.0, 100);
        tg_mono_ns iv = pacer_interval(p);
        assert_int_equal(pacer_start(p, 0, NULL), 0);
        /* One ns before the slot: refused, and nothing recorded. */
        bool probe = true;
        assert_false(pacer_may_start(p, iv - 1));
        assert_int_equal(pacer_start(p, iv - 1, &probe), TG_EAGAIN);
        assert_true(probe); /* untouched on failure */
        assert_int_equal(pacer_in_flight(p), 1);
        assert_true(pacer_next_slot(p) == iv);
        /* At the slot: allowed. A late start moves the next slot with it. */
        assert_int_equal(pacer_start(p, iv + 777, NULL), 0);
        assert_true(pacer_next_slot(p) == 2 * iv + 777);
        pacer_free(p);
}

static void test_idle_earns_nothing(void **state)
{
        (void)state;
        struct pacer *p = make(1000.0, 1000);
        tg_mono_ns iv = pacer_interval(p);
        assert_int_equal(pacer_start(p, 0, NULL), 0);
        /* An hour of silence, then a crowd at the same instant. */
        tg_mono_ns t = 3600 * TG_NS_PER_S;
        assert_int_equal(pacer_start(p, t, NULL), 0);
        for (int i = 0; i < 50; i++)
                assert_int_equal(pacer_start(p, t, NULL), TG_EAGAIN);
        assert_int_equal(pacer_start(p, t + iv - 1, NULL), TG_EAGAIN);
        assert_int_equal(pacer_start(p, t + iv, NULL), 0);
        assert_int_equal(pacer_in_flight(p), 3);
        pacer_free(p);
}

static void test_in_flight_cap(void **state)
{
        (void)state;
        struct pacer *p = make(1000.0, 2);
        tg_mono_ns iv = pacer_interval(p);
        assert_int_equal(pacer_start(p, 0, NULL), 0);
        assert_int_equal(pacer_start(p, iv, NULL), 0);
        /* Slot due but no room. */
        assert_false(pacer_may_start(p, 10 * iv));
        assert_int_equal(pacer_start(p, 10 * iv, NULL), TG_EAGAIN);
        assert_int_equal(pacer_in_flight(p), 2);
        pacer_finish(p);
        assert_int_equal(pacer_in_flight(p), 1);
        assert_int_equal(pacer_start(p, 10 * iv, NULL), 0);
        /* Room but slot not due. */
        pacer_finish(p);
        assert_int_equal(pacer_start(p, 10 * iv + 1, NULL), TG_EAGAIN);
        pacer_free(p);
}

static void test_overflow_saturates(void **state)
{
        (void)state;
        struct pacer *p = make(0.5, 4);
        tg_mono_ns t = INT64_MAX - 5;
        assert_int_equal(pacer_start(p, t, NULL), 0);
        assert_true(pacer_next_slot(p) == TG_MONO_NEVER);
        assert_false(pacer_may_start(p, INT64_MAX));
        assert_int_equal(pacer_start(p, INT64_MAX, NULL), TG_EAGAIN);
        pacer_free(p);
}

/* --- holds and the probe -------------------------------------------------- */

static void test_hold_probe_healthy(void **state)
{
        (void)state;
        struct pacer *p = make(5.0, 10);
        tg_mono_ns iv = pacer_interval(p);
        assert_int_equal(pacer_start(p, 0, NULL), 0);
        tg_mono_ns until = 30 * TG_NS_PER_S;
        pacer_hold(p, until);
        assert_true(pacer_held(p, iv));
        assert_true(pacer_next_slot(p) == until);
        for (tg_mono_ns t = iv; t < until; t += iv)
                assert_int_equal(pacer_start(p, t, NULL), TG_EAGAIN);
        assert_int_equal(pacer_start(p, until - 1, NULL), TG_EAGAIN);

        bool probe = false;
        assert_int_equal(pacer_start(p, until, &probe), 0);
        assert_true(probe);
        assert_true(pacer_next_slot(p) == TG_MONO_NEVER);
        /* Nothing else while the probe is out, however long it takes. */
        for (tg_mono_ns t = until; t < until + 100 * iv; t += iv / 3)
                assert_false(pacer_may_start(p, t));
        assert_true(pacer_held(p, until + 100 * iv));

        pacer_finish(p);
        pacer_probe_done(p, true);
        assert_false(pacer_held(p, until + 100 * iv));
        /* Resumed, counted from the probe's start. */
        assert_true(pacer_next_slot(p) == until + iv);
        probe = true;
        assert_int_equal(pacer_start(p, until + 100 * iv, &probe), 0);
        assert_false(probe);
        assert_int_equal(pacer_start(p, until + 100 * iv, NULL), TG_EAGAIN);
        pacer_free(p);
}

static void test_hold_probe_unhealthy(void **state)
{
        (void)state;
        struct pacer *p = make(5.0, 10);
        tg_mono_ns iv = pacer_interval(p);
        pacer_hold(p, 1000);
        assert_true(pacer_next_slot(p) == 1000);
        bool probe = false;
        assert_int_equal(pacer_start(p, 1000, &probe), 0);
        assert_true(probe);
        pacer_finish(p);
        pacer_probe_done(p, false);
        assert_true(pacer_held(p, 1000));
        /* Still probing: the next start is again a probe, spaced by the
         * interval from the first probe. */
        assert_true(pacer_next_slot(p) == 1000 + iv);
        assert_int_equal(pacer_start(p, 1000 + iv - 1, NULL), TG_EAGAIN);
        probe = false;
        assert_int_equal(pacer_start(p, 1000 + iv, &probe), 0);
        assert_true(probe);
        assert_false(pacer_may_start(p, 1000 + 50 * iv));
        pacer_finish(p);
        pacer_probe_done(p, true);
        assert_false(pacer_held(p, 0));
        pacer_free(p);
}

static void test_hold_extend_and_ignore(void **state)
{
        (void)state;
        struct pacer *p = make(1000.0, 10);
        pacer_hold(p, 5 * TG_NS_PER_S);
        pacer_hold(p, 2 * TG_NS_PER_S); /* earlier: ignored */
        assert_true(pacer_next_slot(p) == 5 * TG_NS_PER_S);
        pacer_hold(p, 9 * TG_NS_PER_S); /* later: extends */
        assert_true(pacer_next_slot(p) == 9 * TG_NS_PER_S);
        assert_int_equal(pacer_start(p, 5 * TG_NS_PER_S, NULL), TG_EAGAIN);
        bool probe = false;
        assert_int_equal(pacer_start(p, 9 * TG_NS_PER_S, &probe), 0);
        assert_true(probe);
        pacer_free(p);
}

static void test_hold_while_probe_out(void **state)
{
        (void)state;
        struct pacer *p = make(1000.0, 10);
        tg_mono_ns iv = pacer_interval(p);
        pacer_hold(p, 10);
        assert_int_equal(pacer_start(p, 10, NULL), 0);
        /* Another call, started before the hold, reports a longer one. */
        tg_mono_ns later = 20 * TG_NS_PER_S;
        pacer_hold(p, later);
        assert_true(pacer_next_slot(p) == TG_MONO_NEVER);
        pacer_finish(p);
        pacer_probe_done(p, true);
        /* The healthy probe does not lift the newer hold. */
        assert_true(pacer_held(p, later));
        assert_true(pacer_next_slot(p) == later);
        assert_int_equal(pacer_start(p, later - 1, NULL), TG_EAGAIN);
        bool probe = false;
        assert_int_equal(pacer_start(p, later, &probe), 0);
        assert_true(probe);
        pacer_finish(p);
        pacer_probe_done(p, true);
        assert_false(pacer_held(p, later));
        assert_true(pacer_next_slot(p) == later + iv);
        pacer_free(p);
}

static void test_probe_needs_room(void **state)
{
        (void)state;
        struct pacer *p = make(1000.0, 1);
        assert_int_equal(pacer_start(p, 0, NULL), 0);
        pacer_hold(p, TG_NS_PER_S);
        assert_false(pacer_may_start(p, 2 * TG_NS_PER_S));
        pacer_finish(p);
        bool probe = false;
        assert_int_equal(pacer_start(p, 2 * TG_NS_PER_S, &probe), 0);
        assert_true(probe);
        pacer_free(p);
}

static void test_stale_probe_done_ignored(void **state)
{
        (void)state;
        struct pacer *p = make(1000.0, 10);
        pacer_probe_done(p, false); /* no hold, no probe: nothing changes */
        assert_false(pacer_held(p, 0));
        pacer_hold(p, 100);
        pacer_probe_done(p, true); /* no probe out yet: the hold stays */
        assert_true(pacer_held(p, 200));
        assert_int_equal(pacer_start(p, 99, NULL), TG_EAGAIN);
        bool probe = false;
        assert_int_equal(pacer_start(p, 100, &probe), 0);
        assert_true(probe);
        pacer_free(p);
}

/* --- rates: the greedy caller ------------------------------------------- */

/* A caller that starts at every allowed instant, polling at `step` ns (0:
 * jump straight to the next slot). Counts the starts in [0, horizon) and
 * checks each gap exactly. */
static int64_t greedy_run(struct rate r, tg_mono_ns horizon, tg_mono_ns step, uint64_t seed)
{
        struct pacer *p = make(rate_value(r), 1000000);
        struct tg_rng rng;
        tg_rng_seed(&rng, seed);
        int64_t starts = 0;
        tg_mono_ns last = INT64_MIN;
        tg_mono_ns t = 0;
        while (t < horizon) {
                if (pacer_may_start(p, t)) {
                        assert_int_equal(pacer_start(p, t, NULL), 0);
                        if (starts > 0)
                                CHECK(gap_ok(r, t - last), "rate %lld/%lld gap %lld",
                                      (long long)r.num, (long long)r.den, (long long)(t - last));
                        last = t;
                        starts++;
                        pacer_finish(p);
                }
                if (step == 0) {
                        tg_mono_ns next = pacer_next_slot(p);
                        t = next > t ? next : t + 1;
                } else {
                        t += tg_rng_range(&rng, 1, step);
                }
        }
        pacer_free(p);
        return starts;
}

static void test_rates_greedy(void **state)
{
        (void)state;
        static const struct rate rates[] = {{1000, 1}, {5, 1}, {3, 1}, {7, 1}, {1, 2}, {10000, 1}};
        for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
                struct rate r = rates[i];
                tg_mono_ns horizon = 20 * TG_NS_PER_S;
                /* Exactly at the slots: no drift, and never more than the
                 * rate allows in the horizon. ceil(rate * 20 s) starts. */
                int64_t most = (20 * r.num + r.den - 1) / r.den;
                int64_t n = greedy_run(r, horizon, 0, 1);
                CHECK(n == most, "rate %lld/%lld: %lld starts in 20 s, want %lld", (long long)r.num,
                      (long long)r.den, (long long)n, (long long)most);
                /* Polling at random steps up to 1/20 of the interval: still
                 * never above, and at least 95% of the rate. */
                tg_mono_ns iv = (TG_NS_PER_S * r.den + r.num - 1) / r.num;
                n = greedy_run(r, horizon, iv / 20 > 0 ? iv / 20 : 1, 42 + i);
                CHECK(n <= most && n * 100 >= most * 95, "rate %lld/%lld: %lld starts, max %lld",
                      (long long)r.num, (long long)r.den, (long long)n, (long long)most);
        }
}

static void test_thousand_per_second_no_drift(void **state)
{
        (void)state;
        /* 1,000 starts/s for 60 s at exactly the slots: start k is at k ms. */
        struct pacer *p = make(1000.0, 10);
        tg_mono_ns t = 0;
        for (int64_t k = 0; k < 60000; k++) {
                t = pacer_next_slot(p) == INT64_MIN ? 0 : pacer_next_slot(p);
                CHECK(t == k * TG_NS_PER_MS, "start %lld at %lld", (long long)k, (long long)t);
                assert_int_equal(pacer_start(p, t, NULL), 0);
                pacer_finish(p);
        }
        pacer_free(p);
}

/* After a gap of any length, a greedy caller gets one start now and then one
 * per interval: never two in any window shorter than the interval. */
static void test_no_burst_after_idle(void **state)
{
        (void)state;
        static const struct rate rates[] = {{1000, 1}, {5, 1}, {3, 1}, {7, 1}, {1, 2}};
        struct tg_rng rng;
        tg_rng_seed(&rng, 7);
        for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
                struct rate r = rates[i];
                struct pacer *p = make(rate_value(r), 100);
                tg_mono_ns iv = pacer_interval(p);
                tg_mono_ns t = 0;
                for (int round = 0; round < 200; round++) {
                        /* Idle from 0 to a million intervals. */
                        tg_mono_ns gap = tg_rng_range(&rng, 0, 1000000) * iv;
                        if (round % 4 == 0)
                                gap = tg_rng_range(&rng, 0, 3 * iv);
                        t += gap;
                        tg_mono_ns begin = t;
                        int64_t n = 0;
                        tg_mono_ns last = INT64_MIN;
                        /* Hammer it for 10 intervals, ~100 polls per
                         * interval, several attempts per poll. */
                        for (; t<begin + 10 * iv; t += iv / 97> 0 ? iv / 97 : 1) {
                                for (int k = 0; k < 3; k++) {
                                        if (pacer_start(p, t, NULL) == 0) {
                                                if (last != INT64_MIN)
                                                        CHECK(gap_ok(r, t - last), "burst gap %lld",
                                                              (long long)(t - last));
                                                last = t;
                                                n++;
                                                pacer_finish(p);
                                        }
                                }
                        }
                        CHECK(n <= 10 && n >= 9, "rate %lld/%lld: %lld starts in 10 intervals",
                              (long long)r.num, (long long)r.den, (long long)n);
                }
                pacer_free(p);
        }
}

/* --- the property run ---------------------------------------------------- */

struct prop_case {
        struct rate rate;
        unsigned max_in_flight;
        uint64_t seed;
        tg_mono_ns t0;
};

/* What the outside world knows: every actual start, every finish, every hold
 * and probe result. The rules are checked against this log, not against the
 * pacer's own view; `expect_may` is the one statement of "a start must be
 * allowed now", so a pacer that is too strict fails too. */
struct world {
        struct rate rate;
        tg_mono_ns interval;
        unsigned max_in_flight;
        unsigned open; /* started, not finished (probe included) */
        bool any_start;
        tg_mono_ns last_start;
        bool hold_phase;       /* a hold (or its probing) is in force */
        tg_mono_ns hold_until; /* latest hold end asked for in this phase */
        bool probe_out;        /* the probe is open */
        bool probe_rehold;     /* a later hold came while the probe was out */
        unsigned long probes;  /* probes started */
        unsigned long starts;
        unsigned long refusals;
        unsigned long full; /* attempts refused only for want of room */
};

static bool expect_may(const struct world *w, tg_mono_ns now)
{
        if (w->open >= w->max_in_flight || w->probe_out)
                return false;
        if (w->any_start && now - w->last_start < w->interval)
                return false;
        if (w->hold_phase && now < w->hold_until)
                return false;
        return true;
}

static void property_run(const struct prop_case *pc, long events)
{
        struct pacer *p = make(rate_value(pc->rate), pc->max_in_flight);
        struct world w = {.rate = pc->rate,
                          .interval = pacer_interval(p),
                          .max_in_flight = pc->max_in_flight,
                          .hold_until = INT64_MIN};
        struct tg_rng rng;
        tg_rng_seed(&rng, pc->seed);
        tg_mono_ns now = pc->t0;
        tg_mono_ns iv = w.interval;

        int64_t finish_pct = 26;
        for (long ev = 0; ev < events; ev++) {
                /* Calls return slowly in some stretches (room runs out), fast
                 * in others. */
                if (ev % 5000 == 0)
                        finish_pct = tg_rng_range(&rng, 2, 40);
                /* Time moves: mostly short steps, sometimes long idles. */
                int64_t pick = tg_rng_range(&rng, 0, 99);
                tg_mono_ns dt;
                tg_mono_ns slot = pacer_next_slot(p);
                if (pick < 20 && slot > now && slot != TG_MONO_NEVER)
                        dt = slot - now; /* a caller that wakes exactly at the slot */
                else if (pick < 40)
                        dt = tg_rng_range(&rng, 0, iv / 4);
                else if (pick < 80)
                        dt = tg_rng_range(&rng, 0, 2 * iv);
                else if (pick < 97)
                        dt = tg_rng_range(&rng, 0, 30 * iv);
                else
                        dt = tg_rng_range(&rng, 0, 20000 * iv);
                now += dt;

                CHECK(pacer_in_flight(p) == w.open, "seed %llu ev %ld: in_flight %u, open %u",
                      (unsigned long long)pc->seed, ev, pacer_in_flight(p), w.open);
                CHECK(pacer_held(p, now) == w.hold_phase, "seed %llu ev %ld: held",
                      (unsigned long long)pc->seed, ev);

                int64_t act = tg_rng_range(&rng, 0, 99);
                if (act < 55) {
                        /* A burst of attempts at this instant. */
                        int64_t tries = tg_rng_range(&rng, 1, 4);
                        for (int64_t k = 0; k < tries; k++) {
                                bool want = expect_may(&w, now);
                                if (w.open >= w.max_in_flight && !w.probe_out &&
                                    (!w.any_start || now - w.last_start >= w.interval) &&
                                    (!w.hold_phase || now >= w.hold_until))
                                        w.full++;
                                bool may = pacer_may_start(p, now);
                                CHECK(may == want,
                                      "seed %llu ev %ld: may_start %d, expected %d (now %lld, "
                                      "last %lld, open %u, hold %d until %lld, probe_out %d)",
                                      (unsigned long long)pc->seed, ev, may, want, (long long)now,
                                      (long long)w.last_start, w.open, w.hold_phase,
                                      (long long)w.hold_until, w.probe_out);
                                bool probe = false;
                                int r = pacer_start(p, now, &probe);
                                if (r != 0) {
                                        CHECK(r == TG_EAGAIN && !want, "seed %llu ev %ld: r %d",
                                              (unsigned long long)pc->seed, ev, r);
                                        w.refusals++;
                                        continue;
                                }
                                /* The rules, judged on the actual start. */
                                CHECK(!w.any_start || gap_ok(w.rate, now - w.last_start),
                                      "seed %llu ev %ld: gap %lld < 1/rate",
                                      (unsigned long long)pc->seed, ev,
                                      (long long)(now - w.last_start));
                                CHECK(w.open < w.max_in_flight, "seed %llu ev %ld: over cap",
                                      (unsigned long long)pc->seed, ev);
                                CHECK(!w.probe_out, "seed %llu ev %ld: start while probe out",
                                      (unsigned long long)pc->seed, ev);
                                CHECK(!w.hold_phase || now >= w.hold_until,
                                      "seed %llu ev %ld: start during hold",
                                      (unsigned long long)pc->seed, ev);
                                CHECK(probe == w.hold_phase, "seed %llu ev %ld: probe flag %d",
                                      (unsigned long long)pc->seed, ev, probe);
                                w.any_start = true;
                                w.last_start = now;
                                w.open++;
                                w.starts++;
                                if (probe) {
                                        w.probe_out = true;
                                        w.probe_rehold = false;
                                        w.probes++;
                                }
                                CHECK(w.open <= w.max_in_flight, "over cap after start");
                        }
                } else if (act < 55 + finish_pct) {
                        if (w.open == 0)
                                continue;
                        /* Finish the probe with some chance, else another. */
                        bool others = w.open > (w.probe_out ? 1u : 0u);
                        bool finish_probe =
                            w.probe_out && (!others || tg_rng_range(&rng, 0, 2) == 0);
                        pacer_finish(p);
                        w.open--;
                        if (finish_probe) {
                                bool healthy = tg_rng_range(&rng, 0, 99) < 60;
                                pacer_probe_done(p, healthy);
                                w.probe_out = false;
                                if (healthy && !w.probe_rehold) {
                                        w.hold_phase = false;
                                        w.hold_until = INT64_MIN;
                                }
                                w.probe_rehold = false;
                        }
                } else if (act < 57 + finish_pct) {
                        /* A 429 with Retry-After: from the past to 50 intervals on. */
                        tg_mono_ns until = now + tg_rng_range(&rng, -5 * iv, 50 * iv);
                        pacer_hold(p, until);
                        if (!w.hold_phase) {
                                w.hold_phase = true;
                                w.hold_until = until;
                        } else if (until > w.hold_until) {
                                w.hold_until = until;
                                if (w.probe_out)
                                        w.probe_rehold = true;
                        }
                } else if (act < 59 + finish_pct) {
                        /* A stray probe result with no probe out: ignored. */
                        if (!w.probe_out)
                                pacer_probe_done(p, tg_rng_range(&rng, 0, 1) == 1);
                } else {
                        /* Just look. */
                        slot = pacer_next_slot(p);
                        if (w.probe_out)
                                CHECK(slot == TG_MONO_NEVER, "slot while probe out");
                        else if (w.any_start)
                                CHECK(slot >= w.last_start + iv, "slot %lld before spacing",
                                      (long long)slot);
                }
        }
        /* The run exercised every path. */
        CHECK(w.starts > (unsigned long)events / 20, "only %lu starts", w.starts);
        CHECK(w.refusals > 1000, "only %lu refusals", w.refusals);
        CHECK(w.probes > 100, "only %lu probes", w.probes);
        CHECK(w.full > 100, "room ran out only %lu times", w.full);
        pacer_free(p);
}

static void test_property_runs(void **state)
{
        (void)state;
        static const struct prop_case cases[] = {
            {{1000, 1}, 10, 1, 0},
            {{5, 1}, 10, 2, 1000},
            {{3, 1}, 2, 3, 0},
            {{7, 1}, 1, 4, 5 * TG_NS_PER_S},
            {{1, 2}, 3, 5, 0},
            {{10000, 1}, 50, 6, 123},
            {{1000, 1}, 1, 7, -(INT64_C(1) << 60)},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                property_run(&cases[i], 150000);
}

static void test_property_random_configs(void **state)
{
        (void)state;
        struct tg_rng rng;
        tg_rng_seed(&rng, 2024);
        for (int i = 0; i < 8; i++) {
                struct prop_case pc = {
                    .rate = {tg_rng_range(&rng, 1, 5000), tg_rng_range(&rng, 1, 4)},
                    .max_in_flight = (unsigned)tg_rng_range(&rng, 1, 20),
                    .seed = 100 + (uint64_t)i,
                    .t0 = tg_rng_range(&rng, -TG_NS_PER_S, TG_NS_PER_S),
                };
                property_run(&pc, 100000);
        }
}

/* A planned start: counted in flight at once, nothing else starts until its
 * wire time is known, and the next slot counts from the real send (never
 * earlier than the plan); a call never sent counts from its plan; a report
 * with nothing planned is ignored. */
static void test_pending_wire_time(void **state)
{
        struct pacer *p = make(5.0, 10);
        tg_mono_ns iv = pacer_interval(p);
        bool probe = true;

        (void)state;
        assert_int_equal(pacer_start_pending(p, 1000, &probe), 0);
        assert_false(probe);
        assert_true(pacer_pending(p));
        assert_int_equal(pacer_in_flight(p), 1);
        assert_int_equal(pacer_next_slot(p), TG_MONO_NEVER);
        assert_false(pacer_may_start(p, 1000 + 10 * iv));
        assert_int_equal(pacer_start(p, 1000 + 10 * iv, NULL), TG_EAGAIN);
        pacer_sent(p, 1000 + 300); /* connect took 300 ns past the plan */
        assert_false(pacer_pending(p));
        assert_int_equal(pacer_next_slot(p), 1000 + 300 + iv);
        pacer_sent(p, 1000 + 999999); /* stale: ignored */
        assert_int_equal(pacer_next_slot(p), 1000 + 300 + iv);

        assert_int_equal(pacer_start_pending(p, 1000 + 300 + iv, NULL), 0);
        pacer_sent(p, 5); /* a send reported before its plan counts as the plan */
        assert_int_equal(pacer_next_slot(p), 1000 + 300 + 2 * iv);

        assert_int_equal(pacer_start_pending(p, 1000 + 300 + 2 * iv, NULL), 0);
        pacer_unsent(p); /* never sent: from the plan */
        assert_int_equal(pacer_next_slot(p), 1000 + 300 + 3 * iv);
        assert_int_equal(pacer_in_flight(p), 3);
        pacer_free(p);
}

/* The margin lengthens every spacing; absurd margins are refused. */
static void test_spacing_margin(void **state)
{
        struct pacer_config c = {.starts_per_second = 50.0, .max_in_flight = 2};
        struct pacer *p = NULL;

        (void)state;
        c.spacing_margin_ns = 250 * TG_NS_PER_US;
        assert_int_equal(pacer_new(&c, &p), 0);
        assert_int_equal(pacer_interval(p), 20 * TG_NS_PER_MS + 250 * TG_NS_PER_US);
        assert_int_equal(pacer_start(p, 0, NULL), 0);
        assert_false(pacer_may_start(p, 20 * TG_NS_PER_MS + 249999));
        assert_true(pacer_may_start(p, 20 * TG_NS_PER_MS + 250000));
        pacer_free(p);
        c.spacing_margin_ns = -1;
        assert_int_equal(pacer_new(&c, &p), TG_EINVAL);
        c.spacing_margin_ns = TG_NS_PER_S + 1;
        assert_int_equal(pacer_new(&c, &p), TG_EINVAL);
}

/* A rate changed at run time (exit.adaptive, operators): from the next
 * slot, counted from the last real start, the margin kept; a raised rate
 * never makes up the slots the lower one skipped; a bad rate, or a grid,
 * is refused and changes nothing. */
static void test_set_rate(void **state)
{
        struct pacer_config c = {.starts_per_second = 10.0, .max_in_flight = 4};
        struct pacer *p = NULL;

        (void)state;
        c.spacing_margin_ns = 1 * TG_NS_PER_MS;
        assert_int_equal(pacer_new(&c, &p), 0);
        assert_int_equal(pacer_start(p, 0, NULL), 0);
        assert_int_equal(pacer_set_rate(p, 2.0), 0);
        assert_int_equal(pacer_interval(p), 501 * TG_NS_PER_MS);
        assert_false(pacer_may_start(p, 501 * TG_NS_PER_MS - 1));
        assert_true(pacer_may_start(p, 501 * TG_NS_PER_MS));
        assert_int_equal(pacer_start(p, 3 * TG_NS_PER_S, NULL), 0);
        /* raised after a long idle: the next slot is one new interval after
         * the last start, not at once again and again */
        assert_int_equal(pacer_set_rate(p, 10.0), 0);
        assert_false(pacer_may_start(p, 3 * TG_NS_PER_S + 101 * TG_NS_PER_MS - 1));
        assert_int_equal(pacer_start(p, 3 * TG_NS_PER_S + 101 * TG_NS_PER_MS, NULL), 0);
        assert_false(pacer_may_start(p, 3 * TG_NS_PER_S + 202 * TG_NS_PER_MS - 1));
        assert_int_equal(pacer_set_rate(p, 0.0), TG_EINVAL);
        assert_int_equal(pacer_set_rate(p, 2e9), TG_EINVAL);
        assert_int_equal(pacer_interval(p), 101 * TG_NS_PER_MS);
        pacer_set_grid(p, 200 * TG_NS_PER_MS, 0, 50 * TG_NS_PER_MS, 101 * TG_NS_PER_MS);
        assert_int_equal(pacer_set_rate(p, 5.0), TG_EINVAL);
        assert_true(pacer_sane(p));
        pacer_free(p);
}

/* Two shares on one grid: each starts only on its own points, so that the
 * account's starts are never closer than the account's spacing, whatever
 * each share does; a late start moves to the share's next point, a hold
 * ends on a point. */
static void test_grid_shares(void **state)
{
        const tg_mono_ns g = 100 * TG_NS_PER_MS; /* the account's spacing (+ skew) */
        struct pacer *a = make(5.0, 4), *b = make(5.0, 4);
        tg_mono_ns all[64];
        unsigned n = 0;

        (void)state;
        pacer_set_grid(a, 2 * g, 0, 0, g);
        pacer_set_grid(b, 2 * g, g, 0, g);
        assert_int_equal(pacer_interval(a), g);
        assert_int_equal(pacer_align(a, 1), 2 * g);
        assert_int_equal(pacer_align(b, 1), g);
        assert_int_equal(pacer_align(b, g), g);
        assert_int_equal(pacer_align(a, TG_MONO_NEVER), TG_MONO_NEVER);
        /* each starts as early as it may, some of them late by a little */
        tg_mono_ns now = 5;
        for (int i = 0; i < 20; i++) {
                struct pacer *p = i % 2 ? b : a;
                tg_mono_ns slot = pacer_next_slot(p);
                tg_mono_ns at = pacer_align(p, slot > now ? slot : now);
                tg_mono_ns late = i % 5 == 0 ? 3 * TG_NS_PER_MS : 0;

                assert_int_equal(pacer_start_pending(p, at, NULL), 0);
                pacer_sent(p, at + late);
                pacer_finish(p);
                all[n++] = at + late;
                now = at;
        }
        for (unsigned i = 0; i < n; i++)
                for (unsigned j = 0; j < n; j++)
                        if (i != j && all[j] > all[i])
                                /* within the late margin of a point */
                                assert_true(all[j] - all[i] >= g - 3 * TG_NS_PER_MS);
        /* a late start does not cost the share its next point */
        assert_true(pacer_next_slot(a) - all[n - 2] <= 2 * g);
        /* a hold ends on the share's own point */
        pacer_hold(a, 7 * g + 1);
        assert_int_equal(pacer_next_slot(a) % (2 * g), 0);
        assert_true(pacer_next_slot(a) >= 7 * g + 1);
        pacer_free(a);
        pacer_free(b);
}

/* A wake-up comes a little after the point: the start goes at once when
 * within the late budget, at the next point when later than that; a start
 * late within the budget does not move the next point. */
static void test_grid_late_budget(void **state)
{
        const tg_mono_ns g = 100 * TG_NS_PER_MS, late = TG_NS_PER_MS;
        struct pacer *a = make(5.0, 4);

        (void)state;
        pacer_set_grid(a, 2 * g, 0, late, g);
        /* nothing started yet: any moment is a slot, yet only on a point */
        assert_int_equal(pacer_start_at(a, 2 * g + late), 2 * g + late);
        assert_int_equal(pacer_start_at(a, 2 * g + late + 1), 4 * g);
        assert_int_equal(pacer_start_at(a, 4 * g - 5), 4 * g);
        assert_int_equal(pacer_start_at(a, 4 * g), 4 * g);
        assert_int_equal(pacer_start_pending(a, 4 * g + 300 * 1000, NULL), 0);
        pacer_sent(a, 4 * g + 700 * 1000); /* on the wire 0.7 ms late */
        pacer_finish(a);
        assert_int_equal(pacer_next_slot(a), 6 * g);
        assert_int_equal(pacer_start_at(a, 5 * g), 6 * g);
        assert_int_equal(pacer_start_at(a, 6 * g + 999 * 1000), 6 * g + 999 * 1000);
        assert_int_equal(pacer_start_at(a, 6 * g + late + 1), 8 * g);
        assert_int_equal(pacer_start_at(a, 9 * g), 10 * g);
        /* the window of a start: its point plus the late budget */
        assert_int_equal(pacer_window_end(a, 6 * g), 6 * g + late);
        assert_int_equal(pacer_window_end(a, 6 * g + 999 * 1000), 6 * g + late);
        assert_int_equal(pacer_window_end(a, 10 * g), 10 * g + late);
        /* without a grid: the slot, or now when it has passed */
        pacer_set_grid(a, 0, 0, 0, 0);
        assert_int_equal(pacer_window_end(a, 9 * g), 0);
        assert_int_equal(pacer_start_at(a, 5 * g), 4 * g + 700 * 1000 + pacer_interval(a));
        assert_int_equal(pacer_start_at(a, 9 * g), 9 * g);
        pacer_free(a);
}

/* Shares through the plan: N pacers, each on its own clock (up to the skew
 * apart), each starting as early as its windows allow, a start on the wire
 * late by a random amount (refused past its window's end, as the transport
 * does); judged in true time: no two starts of the account closer than its
 * spacing. With starts on time every window holds its points. */
static void share_run(tg_mono_ns spacing, tg_mono_ns skew, unsigned shares, unsigned cap,
                      tg_mono_ns max_late, uint64_t seed)
{
        struct pacer_grid_plan plan;
        struct pacer *p[3];
        tg_mono_ns err[3], last = INT64_MIN, t = 7 * TG_NS_PER_S;
        unsigned sent = 0, refused = 0;
        struct tg_rng rng;

        tg_rng_seed(&rng, seed);
        assert_int_equal(pacer_grid_plan(spacing, skew, cap, &plan), 0);
        assert_true(plan.points >= 1 && plan.points <= cap);
        for (unsigned k = 0; k < shares; k++) {
                p[k] = make(1e9 / (double)spacing / shares, 4);
                pacer_set_grid(p[k], shares * plan.window, k * plan.window, plan.open, spacing);
                /* share k's clock reads true time + err[k]: the clocks differ
                 * by up to the skew */
                err[k] = k == 0 ? 0 : k == 1 ? skew : tg_rng_range(&rng, 0, skew);
        }
        tg_mono_ns end = t + 40 * (tg_mono_ns)shares * plan.window;
        while (t < end) {
                /* the share whose next start comes first, in true time */
                unsigned k = 0;
                tg_mono_ns best = TG_MONO_NEVER;
                for (unsigned i = 0; i < shares; i++) {
                        tg_mono_ns at = pacer_start_at(p[i], t + err[i]);
                        if (at != TG_MONO_NEVER && at - err[i] < best) {
                                best = at - err[i];
                                k = i;
                        }
                }
                assert_true(best != TG_MONO_NEVER);
                tg_mono_ns at = best + err[k];
                t = best;
                assert_int_equal(pacer_start_pending(p[k], at, NULL), 0);
                tg_mono_ns wire = at;
                /* late at random, or as late as the window allows (the
                 * worst case the plan must cover) */
                if (max_late > 0)
                        wire = tg_rng_range(&rng, 0, 2) == 0 ? pacer_window_end(p[k], at)
                                                             : at + tg_rng_range(&rng, 0, max_late);
                pacer_finish(p[k]);
                if (wire > pacer_window_end(p[k], at)) {
                        pacer_unsent(p[k]); /* refused in the pre-request hook */
                        refused++;
                        continue;
                }
                pacer_sent(p[k], wire);
                tg_mono_ns true_wire = wire - err[k];
                /* starts come in true-time order but for their lateness:
                 * compare with every start of the last windows */
                if (last != INT64_MIN && true_wire - last < spacing && last - true_wire < spacing)
                        fail_msg(
                            "spacing %lld skew %lld shares %u cap %u seed %llu: two starts "
                            "%lld ns apart",
                            (long long)spacing, (long long)skew, shares, cap,
                            (unsigned long long)seed,
                            (long long)(true_wire > last ? true_wire - last : last - true_wire));
                if (true_wire > last)
                        last = true_wire;
                sent++;
        }
        if (max_late == 0) {
                /* on time: every window of every share full */
                assert_int_equal(refused, 0);
                assert_true(sent >= 39 * shares * plan.points);
        }
        for (unsigned k = 0; k < shares; k++)
                pacer_free(p[k]);
}

static void test_share_windows_keep_the_account_spacing(void **state)
{
        static const tg_mono_ns spacings[] = {1000 * 1000,      1100 * 1000,      2000 * 1000,
                                              20 * 1000 * 1000, 21 * 1000 * 1000, 101 * 1000 * 1000,
                                              201 * 1000 * 1000};
        static const tg_mono_ns skews[] = {0, 1000 * 1000, 7 * 1000 * 1000};
        static const unsigned caps[] = {1, 3, 5, 50};
        uint64_t seed = 1;

        (void)state;
        for (size_t a = 0; a < sizeof(spacings) / sizeof(spacings[0]); a++)
                for (size_t b = 0; b < sizeof(skews) / sizeof(skews[0]); b++)
                        for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++)
                                for (unsigned n = 2; n <= 3; n++) {
                                        share_run(spacings[a], skews[b], n, caps[c], 0, seed++);
                                        share_run(spacings[a], skews[b], n, caps[c],
                                                  spacings[a] / 5, seed++);
                                }
}

/* The plan's arithmetic, worked: at 50/s with the default 1 ms margin and
 * skew, 2 shares of 10 in flight: 5 points of 21 ms (the cap), the last up
 * to 2 ms late, then 1 ms of skew; at 5/s two points a window. */
static void test_share_plan_values(void **state)
{
        struct pacer_grid_plan g;
        const tg_mono_ns ms = TG_NS_PER_MS;

        (void)state;
        assert_int_equal(pacer_grid_plan(21 * ms, 1 * ms, 5, &g), 0);
        assert_int_equal(g.points, 5);
        assert_int_equal(g.late, 2 * ms);
        assert_int_equal(g.open, 4 * 21 * ms + 2 * ms);
        assert_int_equal(g.window, 5 * 21 * ms + 3 * ms);
        assert_int_equal(pacer_grid_plan(201 * ms, 1 * ms, 5, &g), 0);
        assert_int_equal(g.points, 2);
        assert_int_equal(g.open, 201 * ms + 2 * ms);
        assert_int_equal(g.window, 2 * 201 * ms + 3 * ms);
        /* 10/s: three points keep the 3 ms gap within a hundredth */
        assert_int_equal(pacer_grid_plan(101 * ms, 1 * ms, 5, &g), 0);
        assert_int_equal(g.points, 3);
        /* a long spacing: one point, the gap a hundredth of it or less */
        assert_int_equal(pacer_grid_plan(2000 * ms, 1 * ms, 5, &g), 0);
        assert_int_equal(g.points, 1);
        assert_int_equal(g.window, 2003 * ms);
        /* 1,000/s, no margin or skew: a tenth of the spacing late, 10 points */
        assert_int_equal(pacer_grid_plan(1 * ms, 0, 50, &g), 0);
        assert_int_equal(g.late, 100 * 1000);
        assert_int_equal(g.points, 10);
        assert_int_equal(g.window, 10 * ms + 100 * 1000);
        assert_int_equal(pacer_grid_plan(0, 0, 5, &g), TG_EINVAL);
        assert_int_equal(pacer_grid_plan(ms, -1, 5, &g), TG_EINVAL);
        assert_int_equal(pacer_grid_plan(ms, 0, 0, &g), TG_EINVAL);
}

/* A share on the grid of `g` for share k of n, its wall clock `off` ahead
 * of the true time its monotonic clock keeps (exit.c's set_grid). */
static void share_grid(struct pacer *p, const struct pacer_grid_plan *g, unsigned k, unsigned n,
                       tg_mono_ns off)
{
        tg_mono_ns period = (tg_mono_ns)n * g->window;

        pacer_set_grid(p, period, (((tg_mono_ns)k * g->window - off) % period + period) % period,
                       g->open, g->spacing);
}

/* Two shares change the account's spacing from `s0` to `s1` at run time:
 * the change is made at `at` after 10 s; share b (its clock `skew` ahead of
 * a's, the worst case: the new grid's first start on the clock ahead)
 * learns of it at once, share a only `lead` later, on the old grid until
 * then; each stops the old grid when it learns and starts nothing before
 * pacer_switch_resume(). At the door no
 * two starts closer than the spacing in force, the last on the old grid
 * and the first on the new at least the new spacing apart, and after the
 * switch the account's rate is the new one (every point of every share's
 * windows taken: the grid's own gap of late + skew a window is all it
 * loses). */
static void switch_run(tg_mono_ns s0, tg_mono_ns s1, tg_mono_ns at_)
{
        const tg_mono_ns skew = 5 * TG_NS_PER_MS, lead = 3 * TG_NS_PER_S;
        const tg_mono_ns changed = 10 * TG_NS_PER_S + at_, end = 30 * TG_NS_PER_S;
        struct pacer_grid_plan g0, g1;
        struct pacer *sh[2] = {make(1000.0, 8), make(1000.0, 8)};
        const tg_mono_ns off[2] = {0, skew}, learn[2] = {changed + lead, changed};
        bool switched[2] = {false, false};
        tg_mono_ns last = INT64_MIN, last_old = INT64_MIN, first_new = INT64_MAX, resume;
        unsigned after = 0;

        assert_int_equal(pacer_grid_plan(s0, skew, 4, &g0), 0);
        assert_int_equal(pacer_grid_plan(s1, skew, 4, &g1), 0);
        for (unsigned k = 0; k < 2; k++)
                share_grid(sh[k], &g0, k, 2, off[k]);
        resume = pacer_switch_resume(changed, lead, s1, skew);
        assert_int_equal(resume, changed + lead + s1 + skew);
        for (tg_mono_ns now = 0;;) {
                tg_mono_ns at[2];
                unsigned k;

                for (k = 0; k < 2; k++) {
                        if (!switched[k] && now >= learn[k]) {
                                switched[k] = true;
                                share_grid(sh[k], &g1, k, 2, off[k]);
                                /* its own clock's reading of the common instant */
                                pacer_grid_from(sh[k], resume - off[k]);
                        }
                        at[k] = pacer_start_at(sh[k], now);
                }
                k = at[1] < at[0];
                /* a share learns before a start it would make after learning */
                if (!switched[!k] && learn[!k] <= at[k]) {
                        now = learn[!k];
                        continue;
                }
                if (!switched[k] && learn[k] <= at[k]) {
                        now = learn[k];
                        continue;
                }
                if (at[k] > end)
                        break;
                assert_int_equal(pacer_start_pending(sh[k], at[k], NULL), 0);
                pacer_sent(sh[k], at[k]);
                pacer_finish(sh[k]);
                if (switched[k]) {
                        /* on its own clock, at or after the common instant */
                        assert_true(at[k] + off[k] >= resume);
                        if (first_new == INT64_MAX)
                                assert_true(at[k] - last_old >= s1);
                        first_new = first_new < at[k] ? first_new : at[k];
                        after++;
                } else {
                        assert_int_equal(first_new, INT64_MAX);
                        last_old = at[k];
                }
                if (last != INT64_MIN)
                        assert_true(at[k] - last >= (switched[k] ? s1 : s0));
                last = at[k];
                now = at[k];
        }
        /* the old grid ran until the change was learnt, the new one from
         * its instant on at the new rate: within the windows' share of
         * the time (a gap of late + skew each window) and its last spacing */
        assert_true(last_old > changed - s0 - g0.window);
        assert_true(first_new - resume < 2 * g1.window);
        double want = (double)(end - first_new) / (double)s1;
        double full = (double)(end - first_new) / (double)g1.window * g1.points;
        assert_true(after + 2 >= (unsigned)full);
        assert_true(after <= (unsigned)want + 1);
        pacer_free(sh[0]);
        pacer_free(sh[1]);
}

/* The account's rate lowered (spacing 21 -> 101 ms) and raised again
 * (101 -> 21 ms) at run time with two shares. */
static void test_share_rate_switch(void **state)
{
        (void)state;
        /* the change at every phase of the old grid (an eighth of a ms
         * apart): share a's last old start and share b's first new one
         * come as close as the grids let them */
        for (tg_mono_ns at = 0; at < 1100 * TG_NS_PER_MS; at += TG_NS_PER_MS / 8) {
                switch_run(21 * TG_NS_PER_MS, 101 * TG_NS_PER_MS, at);
                switch_run(101 * TG_NS_PER_MS, 21 * TG_NS_PER_MS, at);
                switch_run(501 * TG_NS_PER_MS, 201 * TG_NS_PER_MS, at);
        }
}

/* The switch's instant: the change's, then the lead, the new spacing and
 * the skew; bad input is never; no overflow near the end of time. */
static void test_switch_resume_values(void **state)
{
        (void)state;
        assert_int_equal(pacer_switch_resume(1000, 3000, 200, 5), 4205);
        assert_int_equal(pacer_switch_resume(0, 0, 1, 0), 1);
        assert_int_equal(pacer_switch_resume(0, -1, 1, 0), INT64_MAX);
        assert_int_equal(pacer_switch_resume(0, 1, 0, 0), INT64_MAX);
        assert_int_equal(pacer_switch_resume(0, 1, 1, -1), INT64_MAX);
        assert_int_equal(pacer_switch_resume(INT64_MAX - 2, 3, 3, 3), TG_MONO_NEVER);
}

/* No start before the floor, and no probe after it (not a hold); a floor
 * lifted leaves the spacing as it was. */
static void test_grid_from(void **state)
{
        struct pacer *p = make(10.0, 4);

        (void)state;
        assert_int_equal(pacer_start(p, 0, NULL), 0);
        pacer_grid_from(p, 5 * TG_NS_PER_S);
        assert_int_equal(pacer_next_slot(p), 5 * TG_NS_PER_S);
        assert_false(pacer_may_start(p, 5 * TG_NS_PER_S - 1));
        bool probe = true;
        assert_int_equal(pacer_start(p, 5 * TG_NS_PER_S, &probe), 0);
        assert_false(probe);
        assert_false(pacer_held(p, 5 * TG_NS_PER_S));
        pacer_grid_from(p, INT64_MIN);
        assert_int_equal(pacer_next_slot(p), 5 * TG_NS_PER_S + pacer_interval(p));
        assert_true(pacer_sane(p));
        pacer_free(p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_config_rejected),
            cmocka_unit_test(test_interval_values),
            cmocka_unit_test(test_first_start_at_once),
            cmocka_unit_test(test_spacing_exact),
            cmocka_unit_test(test_idle_earns_nothing),
            cmocka_unit_test(test_in_flight_cap),
            cmocka_unit_test(test_overflow_saturates),
            cmocka_unit_test(test_hold_probe_healthy),
            cmocka_unit_test(test_hold_probe_unhealthy),
            cmocka_unit_test(test_hold_extend_and_ignore),
            cmocka_unit_test(test_hold_while_probe_out),
            cmocka_unit_test(test_probe_needs_room),
            cmocka_unit_test(test_stale_probe_done_ignored),
            cmocka_unit_test(test_rates_greedy),
            cmocka_unit_test(test_thousand_per_second_no_drift),
            cmocka_unit_test(test_no_burst_after_idle),
            cmocka_unit_test(test_property_runs),
            cmocka_unit_test(test_property_random_configs),
            cmocka_unit_test(test_pending_wire_time),
            cmocka_unit_test(test_spacing_margin),
            cmocka_unit_test(test_set_rate),
            cmocka_unit_test(test_grid_shares),
            cmocka_unit_test(test_grid_late_budget),
            cmocka_unit_test(test_share_windows_keep_the_account_spacing),
            cmocka_unit_test(test_share_plan_values),
            cmocka_unit_test(test_share_rate_switch),
            cmocka_unit_test(test_switch_resume_values),
            cmocka_unit_test(test_grid_from),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
