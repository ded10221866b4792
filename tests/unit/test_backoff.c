/*
 * Unit tests for src/core/backoff.c: config checks, jitter names, the window
 * table for tollgate's defaults and for seed 004, every jitter mode's draws
 * against its window over 100,000 seeded draws, the Retry-After floor, the
 * cap, give-up, overflow with large retry numbers, and seeded distribution
 * checks (five clients failing together, the mean and spread of full jitter).
 */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "check.h"
#include "core/backoff.h"
#include "core/rng.h"
#include "core/tg_error.h"

#define DRAWS 100000

static struct backoff_config defaults(void)
{
        struct backoff_config c;
        backoff_config_default(&c);
        return c;
}

/* Seed 004's table: base 1 s, factor 2, no floor. */
static struct backoff_config seed004(enum backoff_jitter jitter)
{
        struct backoff_config c = {.base_ms = 1000,
                                   .factor = 2.0,
                                   .min_ms = 0,
                                   .cap_ms = 30 * 60 * 1000,
                                   .give_up_ms = 0,
                                   .jitter = jitter};
        return c;
}

static int64_t draw(const struct backoff_config *c, unsigned retry, int64_t prev, int64_t ra,
                    struct tg_rng *rng)
{
        int64_t wait = -12345;
        int r = backoff_draw(c, retry, prev, ra, 0, rng, &wait);
        CHECK(r == 0, "draw retry %u: %d", retry, r);
        return wait;
}

/* --- config and names ----------------------------------------------------- */

static void test_defaults(void **state)
{
        (void)state;
        struct backoff_config c = defaults();
        assert_int_equal(c.base_ms, 2000);
        assert_true(c.factor == 2.0);
        assert_int_equal(c.min_ms, 1000);
        assert_int_equal(c.cap_ms, 60000);
        assert_int_equal(c.give_up_ms, 0);
        assert_int_equal(c.jitter, BACKOFF_JITTER_FULL);
        assert_int_equal(backoff_config_check(&c), 0);
}

static void test_config_check(void **state)
{
        (void)state;
        assert_int_equal(backoff_config_check(NULL), TG_EINVAL);
        struct backoff_config c;
        c = defaults();
        c.base_ms = 0;
        assert_int_equal(backoff_config_check(&c), TG_EINVAL);
        c = defaults();
        c.base_ms = -5;
        assert_int_equal(backoff_config_check(&c), TG_EINVAL);
        c = defaults();
        c.factor = 0.99;
        assert_int_equal(backoff_config_check(&c), TG_EINVAL);
        c = defaults();
        c.factor = NAN;
        assert_int_equal(backoff_config_check(&c), TG_EINVAL);
        c = defaults();
        c.factor = INFINITY;
        assert_int_equal(backoff_config_check(&c), TG_EINVAL);
        c = defaults();
        c.min_ms = -1;
        assert_int_equal(backoff_config_check(&c), TG_EINVAL);
        c = defaults();
        c.cap_ms = c.base_ms - 1;
        assert_int_equal(backoff_config_check(&c), TG_EINVAL);
        c = defaults();
        c.give_up_ms = -1;
        assert_int_equal(backoff_config_check(&c), TG_EINVAL);
        c = defaults();
        c.jitter = (enum backoff_jitter)17;
        assert_int_equal(backoff_config_check(&c), TG_EINVAL);
        /* Edges that are fine. */
        c = defaults();
        c.factor = 1.0;
        c.cap_ms = c.base_ms;
        c.min_ms = 0;
        assert_int_equal(backoff_config_check(&c), 0);

        /* A bad config is refused by window and draw, outputs untouched. */
        c = defaults();
        c.base_ms = 0;
        int64_t lo = -7, hi = -7, wait = -7;
        struct tg_rng rng;
        tg_rng_seed(&rng, 1);
        assert_int_equal(backoff_window(&c, 1, &lo, &hi), TG_EINVAL);
        assert_int_equal(backoff_draw(&c, 1, 0, -1, 0, &rng, &wait), TG_EINVAL);
        assert_true(lo == -7 && hi == -7 && wait == -7);
        c = defaults();
        assert_int_equal(backoff_window(&c, 0, &lo, &hi), TG_EINVAL);
        assert_int_equal(backoff_draw(&c, 0, 0, -1, 0, &rng, &wait), TG_EINVAL);
        assert_int_equal(backoff_draw(&c, 1, 0, -1, 0, NULL, &wait), TG_EINVAL);
        assert_int_equal(backoff_draw(&c, 1, 0, -1, 0, &rng, NULL), TG_EINVAL);
        assert_int_equal(backoff_window(&c, 1, NULL, &hi), TG_EINVAL);
        assert_true(lo == -7 && hi == -7 && wait == -7);
}

static void test_jitter_names(void **state)
{
        (void)state;
        static const struct {
                const char *name;
                enum backoff_jitter jitter;
        } table[] = {
            {"none", BACKOFF_JITTER_NONE},
            {"full", BACKOFF_JITTER_FULL},
            {"equal", BACKOFF_JITTER_EQUAL},
            {"decorrelated", BACKOFF_JITTER_DECORRELATED},
        };
        for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
                enum backoff_jitter j = (enum backoff_jitter)99;
                assert_int_equal(backoff_jitter_parse(table[i].name, &j), 0);
                assert_int_equal(j, table[i].jitter);
                assert_string_equal(backoff_jitter_name(table[i].jitter), table[i].name);
        }
        const char *bad[] = {"", "Full", "ful", "fullx", " full", "jitter", NULL};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                enum backoff_jitter j = (enum backoff_jitter)99;
                assert_int_equal(backoff_jitter_parse(bad[i], &j), TG_EINVAL);
                assert_int_equal(j, 99);
        }
        assert_int_equal(backoff_jitter_parse("full", NULL), TG_EINVAL);
        assert_non_null(backoff_jitter_name((enum backoff_jitter)99));
}

/* --- windows ----------------------------------------------------------------- */

static void check_windows(const struct backoff_config *c, const int64_t (*want)[2], size_t n)
{
        for (size_t i = 0; i < n; i++) {
                int64_t lo, hi;
                assert_int_equal(backoff_window(c, (unsigned)(i + 1), &lo, &hi), 0);
                CHECK(lo == want[i][0] && hi == want[i][1],
                      "retry %zu: [%lld, %lld], want [%lld, %lld]", i + 1, (long long)lo,
                      (long long)hi, (long long)want[i][0], (long long)want[i][1]);
        }
}

static void test_windows_default(void **state)
{
        (void)state;
        /* Retry 1 is attempt 2: 1-2 s; retry 2 is attempt 3: 1-4 s (seed 000). */
        static const int64_t want[][2] = {
            {1000, 2000},  {1000, 4000},  {1000, 8000},  {1000, 16000},
            {1000, 32000}, {1000, 60000}, {1000, 60000}, {1000, 60000},
        };
        struct backoff_config c = defaults();
        check_windows(&c, want, sizeof(want) / sizeof(want[0]));
}

static void test_windows_seed004(void **state)
{
        (void)state;
        /* Rounds 1-5: 0-1, 0-2, 0-4, 0-8, 0-16 s. */
        static const int64_t want[][2] = {
            {0, 1000}, {0, 2000}, {0, 4000}, {0, 8000}, {0, 16000},
        };
        struct backoff_config c = seed004(BACKOFF_JITTER_FULL);
        check_windows(&c, want, sizeof(want) / sizeof(want[0]));
        /* Round 10 is 512 s, round 15 past four and a half hours: the cap
         * (30 min here) is what stops it. */
        int64_t lo, hi;
        assert_int_equal(backoff_window(&c, 10, &lo, &hi), 0);
        assert_true(hi == 512000);
        assert_int_equal(backoff_window(&c, 15, &lo, &hi), 0);
        assert_true(hi == c.cap_ms);
}

static void test_windows_odd(void **state)
{
        (void)state;
        /* Non-integer factor; a floor above the first windows. */
        struct backoff_config c = {.base_ms = 300,
                                   .factor = 1.5,
                                   .min_ms = 500,
                                   .cap_ms = 1000,
                                   .give_up_ms = 0,
                                   .jitter = BACKOFF_JITTER_FULL};
        static const int64_t want[][2] = {
            {300, 300}, {450, 450}, {500, 675}, {500, 1000}, {500, 1000},
        };
        check_windows(&c, want, sizeof(want) / sizeof(want[0]));
        /* factor 1: flat. */
        c.factor = 1.0;
        int64_t lo, hi;
        assert_int_equal(backoff_window(&c, UINT_MAX, &lo, &hi), 0);
        assert_true(lo == 300 && hi == 300);
}

static void test_windows_overflow(void **state)
{
        (void)state;
        /* factor^n far past int64 (and past double) clamps to the cap. */
        struct backoff_config c = defaults();
        const unsigned retries[] = {60, 63, 64, 65, 100, 1000, 1075, 100000, UINT_MAX};
        for (size_t i = 0; i < sizeof(retries) / sizeof(retries[0]); i++) {
                int64_t lo, hi;
                assert_int_equal(backoff_window(&c, retries[i], &lo, &hi), 0);
                CHECK(lo == 1000 && hi == 60000, "retry %u: [%lld, %lld]", retries[i],
                      (long long)lo, (long long)hi);
        }
        c.factor = 1e300;
        int64_t lo, hi;
        assert_int_equal(backoff_window(&c, 3, &lo, &hi), 0);
        assert_true(hi == 60000);
        /* A cap at the very top of int64: base * 2 lands on 2^63 in double. */
        c = defaults();
        c.base_ms = INT64_MAX / 2 + 1;
        c.cap_ms = INT64_MAX;
        assert_int_equal(backoff_window(&c, 2, &lo, &hi), 0);
        assert_true(hi == INT64_MAX);
        assert_int_equal(backoff_window(&c, UINT_MAX, &lo, &hi), 0);
        assert_true(hi == INT64_MAX);
        struct tg_rng rng;
        tg_rng_seed(&rng, 3);
        for (int j = 0; j < 4; j++) {
                c.jitter = (enum backoff_jitter)j;
                for (unsigned r = 1; r < 200; r += 13) {
                        int64_t w = draw(&c, r, INT64_MAX, -1, &rng);
                        CHECK(w >= 1, "mode %d retry %u: %lld", j, r, (long long)w);
                }
        }
}

/* --- draws inside their windows ------------------------------------------- */

static void check_mode_in_window(struct backoff_config c, uint64_t seed)
{
        struct tg_rng rng;
        tg_rng_seed(&rng, seed);
        int64_t prev = 0;
        for (int i = 0; i < DRAWS; i++) {
                unsigned retry = (unsigned)tg_rng_range(&rng, 1, 40);
                int64_t lo, hi;
                assert_int_equal(backoff_window(&c, retry, &lo, &hi), 0);
                int64_t w = draw(&c, retry, prev, -1, &rng);
                switch (c.jitter) {
                case BACKOFF_JITTER_NONE:
                        CHECK(w == hi, "none: %lld != %lld", (long long)w, (long long)hi);
                        break;
                case BACKOFF_JITTER_FULL:
                        CHECK(w >= lo && w <= hi, "full: %lld outside [%lld, %lld]", (long long)w,
                              (long long)lo, (long long)hi);
                        break;
                case BACKOFF_JITTER_EQUAL: {
                        int64_t floor_ = hi / 2 > lo ? hi / 2 : lo;
                        CHECK(w >= floor_ && w <= hi, "equal: %lld outside [%lld, %lld]",
                              (long long)w, (long long)floor_, (long long)hi);
                        break;
                }
                case BACKOFF_JITTER_DECORRELATED: {
                        int64_t d = lo > 1 ? lo : 1;
                        int64_t p = prev > 0 ? prev : d;
                        int64_t up = 3 * p > d ? 3 * p : d;
                        if (up > c.cap_ms)
                                up = c.cap_ms;
                        CHECK(w >= d && w <= up, "decorrelated: %lld outside [%lld, %lld]",
                              (long long)w, (long long)d, (long long)up);
                        break;
                }
                }
                CHECK(w <= c.cap_ms, "mode %d above cap: %lld", c.jitter, (long long)w);
                /* Sometimes the chain restarts, as after a success. */
                prev = tg_rng_range(&rng, 0, 9) == 0 ? 0 : w;
        }
}

static void test_modes_in_window(void **state)
{
        (void)state;
        struct backoff_config configs[] = {
            defaults(),
            seed004(BACKOFF_JITTER_FULL),
            {.base_ms = 7, .factor = 1.7, .min_ms = 3, .cap_ms = 1001, .jitter = 0},
            {.base_ms = 1, .factor = 3.0, .min_ms = 0, .cap_ms = 1, .jitter = 0},
            {.base_ms = 2000, .factor = 2.0, .min_ms = 50000, .cap_ms = 100000, .jitter = 0},
        };
        for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
                for (int j = 0; j < 4; j++) {
                        struct backoff_config c = configs[i];
                        c.jitter = (enum backoff_jitter)j;
                        check_mode_in_window(c, 1000 * i + (uint64_t)j);
                }
        }
}

static void test_edges_reachable(void **state)
{
        (void)state;
        /* hi = 5: equal jitter covers [2, 5], both edges reached (an odd hi
         * is reachable, not cut to 2 * (hi / 2)). */
        struct backoff_config c = {
            .base_ms = 5, .factor = 2.0, .min_ms = 0, .cap_ms = 5, .jitter = BACKOFF_JITTER_EQUAL};
        struct tg_rng rng;
        tg_rng_seed(&rng, 11);
        int seen[6] = {0};
        for (int i = 0; i < 10000; i++) {
                int64_t w = draw(&c, 1, 0, -1, &rng);
                assert_true(w >= 2 && w <= 5);
                seen[w]++;
        }
        assert_true(seen[2] > 0 && seen[5] > 0);

        /* Full jitter of [0, 3] and [2, 6]: every value, both edges. */
        c.jitter = BACKOFF_JITTER_FULL;
        c.base_ms = 3;
        c.cap_ms = 6;
        for (unsigned retry = 1; retry <= 2; retry++) {
                c.min_ms = retry == 1 ? 0 : 2;
                int64_t lo, hi;
                assert_int_equal(backoff_window(&c, retry, &lo, &hi), 0);
                int hits[7] = {0};
                for (int i = 0; i < 10000; i++) {
                        int64_t w = draw(&c, retry, 0, -1, &rng);
                        assert_true(w >= lo && w <= hi);
                        hits[w]++;
                }
                for (int64_t v = lo; v <= hi; v++)
                        CHECK(hits[v] > 10000 / (hi - lo + 1) / 2, "retry %u: %lld drawn %d times",
                              retry, (long long)v, hits[v]);
        }
}

/* --- Retry-After, cap, give-up -------------------------------------------- */

static void test_retry_after_floor(void **state)
{
        (void)state;
        struct tg_rng rng;
        tg_rng_seed(&rng, 5);
        for (int j = 0; j < 4; j++) {
                struct backoff_config c = defaults();
                c.jitter = (enum backoff_jitter)j;
                int64_t prev = 0;
                for (int i = 0; i < DRAWS; i++) {
                        unsigned retry = (unsigned)tg_rng_range(&rng, 1, 12);
                        /* From none-at-all to well above the cap. */
                        int64_t ra = tg_rng_range(&rng, -1, 3 * c.cap_ms);
                        int64_t w = draw(&c, retry, prev, ra, &rng);
                        CHECK(w >= ra, "mode %d: wait %lld below Retry-After %lld", j, (long long)w,
                              (long long)ra);
                        /* The cap binds unless Retry-After is above it, and
                         * then the wait is exactly the Retry-After. */
                        if (ra > c.cap_ms)
                                CHECK(w == ra, "mode %d: %lld != Retry-After %lld", j, (long long)w,
                                      (long long)ra);
                        else
                                CHECK(w <= c.cap_ms, "mode %d: %lld above cap", j, (long long)w);
                        prev = w;
                }
        }
        /* An explicit case: full jitter of [1000, 2000] with Retry-After 1500. */
        struct backoff_config c = defaults();
        int below = 0;
        for (int i = 0; i < 1000; i++) {
                int64_t w = draw(&c, 1, 0, 1500, &rng);
                assert_true(w >= 1500 && w <= 2000);
                below += w == 1500;
        }
        assert_true(below > 300); /* the draws below 1500 were raised to it */
        /* Retry-After 0 is "now", still a valid floor. */
        assert_true(draw(&c, 1, 0, 0, &rng) >= 1000);
}

static void test_give_up(void **state)
{
        (void)state;
        struct backoff_config c = defaults();
        c.jitter = BACKOFF_JITTER_NONE;
        c.give_up_ms = 10000;
        struct tg_rng rng;
        tg_rng_seed(&rng, 9);
        int64_t w = -3;
        /* retry 1 waits 2000: 8000 + 2000 = 10000 is still inside. */
        assert_int_equal(backoff_draw(&c, 1, 0, -1, 8000, &rng, &w), 0);
        assert_int_equal(w, 2000);
        w = -3;
        assert_int_equal(backoff_draw(&c, 1, 0, -1, 8001, &rng, &w), TG_ERANGE);
        assert_int_equal(w, -3);
        /* Retry-After pushes past the give-up point. */
        assert_int_equal(backoff_draw(&c, 1, 0, 9000, 1001, &rng, &w), TG_ERANGE);
        assert_int_equal(backoff_draw(&c, 1, 0, 9000, 1000, &rng, &w), 0);
        assert_int_equal(w, 9000);
        /* Huge elapsed and Retry-After: no overflow, just give up. */
        w = -3;
        assert_int_equal(backoff_draw(&c, 1, 0, INT64_MAX, INT64_MAX, &rng, &w), TG_ERANGE);
        assert_int_equal(backoff_draw(&c, 1, 0, INT64_MAX, 0, &rng, &w), TG_ERANGE);
        assert_int_equal(backoff_draw(&c, 1, 0, -1, INT64_MAX, &rng, &w), TG_ERANGE);
        assert_int_equal(w, -3);
        /* A clock stepped back counts as no time elapsed. */
        assert_int_equal(backoff_draw(&c, 1, 0, -1, INT64_MIN, &rng, &w), 0);
        assert_int_equal(w, 2000);
        /* give_up 0 is "never give up". */
        c.give_up_ms = 0;
        assert_int_equal(backoff_draw(&c, 1, 0, INT64_MAX, INT64_MAX, &rng, &w), 0);
        assert_true(w == INT64_MAX);
        /* Every mode, random elapsed: ERANGE exactly when elapsed + wait would
         * pass it (checked by replaying the same seed without give-up). */
        for (int j = 0; j < 4; j++) {
                struct backoff_config g = defaults();
                g.jitter = (enum backoff_jitter)j;
                g.give_up_ms = 120000;
                struct backoff_config nog = g;
                nog.give_up_ms = 0;
                struct tg_rng a, b;
                tg_rng_seed(&a, 77);
                tg_rng_seed(&b, 77);
                int gave_up = 0;
                for (int i = 0; i < 10000; i++) {
                        int64_t elapsed = (int64_t)(i % 130) * 1000;
                        int64_t w1 = -1, w2 = -1;
                        int r1 = backoff_draw(&g, 5, 20000, -1, elapsed, &a, &w1);
                        int r2 = backoff_draw(&nog, 5, 20000, -1, elapsed, &b, &w2);
                        assert_int_equal(r2, 0);
                        if (elapsed + w2 > g.give_up_ms) {
                                assert_int_equal(r1, TG_ERANGE);
                                assert_true(w1 == -1);
                                gave_up++;
                        } else {
                                assert_int_equal(r1, 0);
                                assert_true(w1 == w2);
                        }
                }
                assert_true(gave_up > 100);
        }
}

/* --- distributions (seeded) ---------------------------------------------- */

/* Seed 004: five clients fail together. Without jitter they come back at one
 * instant every round; with full jitter at five different ones. */
static void test_five_clients(void **state)
{
        (void)state;
        for (int mode = 0; mode < 2; mode++) {
                struct backoff_config c =
                    seed004(mode == 0 ? BACKOFF_JITTER_NONE : BACKOFF_JITTER_FULL);
                struct tg_rng rng[5];
                for (int k = 0; k < 5; k++)
                        tg_rng_seed(&rng[k], 5000 + (uint64_t)k);
                for (unsigned round = 1; round <= 5; round++) {
                        int64_t at[5];
                        for (int k = 0; k < 5; k++)
                                at[k] = draw(&c, round, 0, -1, &rng[k]);
                        int distinct = 0;
                        for (int k = 0; k < 5; k++) {
                                int dup = 0;
                                for (int m = 0; m < k; m++)
                                        dup |= at[m] == at[k];
                                distinct += !dup;
                        }
                        if (mode == 0)
                                CHECK(distinct == 1 && at[0] == 1000LL << (round - 1),
                                      "none, round %u: %d distinct", round, distinct);
                        else
                                CHECK(distinct == 5, "full, round %u: %d distinct", round,
                                      distinct);
                }
        }
        /* Over many independent trials of round 5 (0-16 s), full jitter
         * almost always separates all five, and spreads them. Seed 004's
         * rough figure is 16 s / 5 = 3.2 s apart; the expected gap between
         * sorted neighbours of five uniform draws is 16 s * (4/6) / 4 =
         * 2.67 s, against 0 s without jitter. */
        struct backoff_config c = seed004(BACKOFF_JITTER_FULL);
        struct tg_rng rng;
        tg_rng_seed(&rng, 6);
        int all_distinct = 0;
        double gap_sum = 0;
        const int trials = 10000;
        for (int t = 0; t < trials; t++) {
                int64_t at[5];
                for (int k = 0; k < 5; k++) {
                        at[k] = draw(&c, 5, 0, -1, &rng);
                        for (int m = k; m > 0 && at[m - 1] > at[m]; m--) {
                                int64_t x = at[m];
                                at[m] = at[m - 1];
                                at[m - 1] = x;
                        }
                }
                int ok = 1;
                for (int k = 1; k < 5; k++)
                        ok &= at[k] != at[k - 1];
                all_distinct += ok;
                gap_sum += (double)(at[4] - at[0]) / 4.0;
        }
        CHECK(all_distinct >= trials * 99 / 100, "%d of %d trials all distinct", all_distinct,
              trials);
        double mean_gap = gap_sum / trials;
        CHECK(mean_gap > 2000 && mean_gap < 3000, "mean gap %.0f ms", mean_gap);
}

static void test_full_jitter_distribution(void **state)
{
        (void)state;
        struct backoff_config c = defaults();
        struct tg_rng rng;
        tg_rng_seed(&rng, 12345);
        /* Retry 3: [1000, 8000]. */
        const int64_t lo = 1000, hi = 8000, width = hi - lo;
        int buckets[10] = {0};
        double sum = 0;
        int64_t mn = INT64_MAX, mx = INT64_MIN;
        for (int i = 0; i < DRAWS; i++) {
                int64_t w = draw(&c, 3, 0, -1, &rng);
                sum += (double)w;
                mn = w < mn ? w : mn;
                mx = w > mx ? w : mx;
                int b = (int)((w - lo) * 10 / (width + 1));
                buckets[b]++;
        }
        double mean = sum / DRAWS;
        /* The mean's standard error is ~0.1% of the width; allow 1%. */
        CHECK(fabs(mean - (lo + hi) / 2.0) < 0.01 * width, "mean %.1f", mean);
        CHECK(mn - lo < width / 100 && hi - mx < width / 100, "range [%lld, %lld]", (long long)mn,
              (long long)mx);
        for (int b = 0; b < 10; b++)
                CHECK(buckets[b] > DRAWS / 10 * 95 / 100 && buckets[b] < DRAWS / 10 * 105 / 100,
                      "bucket %d: %d", b, buckets[b]);

        /* Equal jitter sits in the upper half: mean ~ 3/4 hi. */
        c.jitter = BACKOFF_JITTER_EQUAL;
        sum = 0;
        for (int i = 0; i < DRAWS; i++)
                sum += (double)draw(&c, 3, 0, -1, &rng);
        mean = sum / DRAWS;
        CHECK(fabs(mean - 0.75 * hi) < 0.01 * hi, "equal mean %.1f", mean);

        /* Decorrelated from prev 1000 with d = 1000: uniform [1000, 3000]. */
        c.jitter = BACKOFF_JITTER_DECORRELATED;
        sum = 0;
        for (int i = 0; i < DRAWS; i++)
                sum += (double)draw(&c, 3, 1000, -1, &rng);
        mean = sum / DRAWS;
        CHECK(fabs(mean - 2000.0) < 20.0, "decorrelated mean %.1f", mean);
        /* No previous wait counts as d: uniform [d, 3d] = [1000, 3000] too. */
        sum = 0;
        for (int i = 0; i < DRAWS; i++)
                sum += (double)draw(&c, 3, i % 2 ? 0 : -5, -1, &rng);
        mean = sum / DRAWS;
        CHECK(fabs(mean - 2000.0) < 20.0, "decorrelated first mean %.1f", mean);

        /* The same seed replays the same draws. */
        struct tg_rng a, b;
        tg_rng_seed(&a, 99);
        tg_rng_seed(&b, 99);
        c.jitter = BACKOFF_JITTER_FULL;
        for (int i = 0; i < 1000; i++)
                assert_true(draw(&c, 4, 0, -1, &a) == draw(&c, 4, 0, -1, &b));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defaults),
            cmocka_unit_test(test_config_check),
            cmocka_unit_test(test_jitter_names),
            cmocka_unit_test(test_windows_default),
            cmocka_unit_test(test_windows_seed004),
            cmocka_unit_test(test_windows_odd),
            cmocka_unit_test(test_windows_overflow),
            cmocka_unit_test(test_modes_in_window),
            cmocka_unit_test(test_edges_reachable),
            cmocka_unit_test(test_retry_after_floor),
            cmocka_unit_test(test_give_up),
            cmocka_unit_test(test_five_clients),
            cmocka_unit_test(test_full_jitter_distribution),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
