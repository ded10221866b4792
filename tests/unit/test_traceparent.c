/*
 * Unit tests for src/core/traceparent.c (W3C trace context) and
 * src/core/rfc3339.c (a caller's deadline, another system's failure times):
 * what the spec accepts is read exactly, everything it refuses is refused
 * (wrong lengths, upper case, all-zero ids, version ff, a version 00 with
 * more after it), a later version is read by its first fields, new ids are
 * never zero, and a call's child keeps the trace and flags. Timestamps: the
 * epoch, offsets, fractions, leap days; impossible dates and forms refused.
 */
#include "check.h"

#include <stdio.h>
#include <string.h>

#include "core/rfc3339.h"
#include "core/tg_error.h"
#include "core/traceparent.h"

#define GOOD "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static int parse(const char *s, struct trace_context *c)
{
        return traceparent_parse(s, strlen(s), c);
}

static void test_parse_accepts(void **state)
{
        struct trace_context c;
        char out[TG_TRACEPARENT_MAX + 1];

        (void)state;
        assert_int_equal(parse(GOOD, &c), 0);
        assert_string_equal(c.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_string_equal(c.span_id, "00f067aa0ba902b7");
        assert_int_equal(c.flags, 1);
        traceparent_format(&c, out);
        assert_string_equal(out, GOOD);
        /* a later version: its first four fields, whatever follows a '-' */
        assert_int_equal(parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what", &c),
                         0);
        assert_int_equal(c.flags, 0);
        traceparent_format(&c, out);
        assert_string_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
}

static void test_parse_refuses(void **state)
{
        static const char *const bad[] = {
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        };
        struct trace_context c;

        (void)state;
        memset(&c, 0x5a, sizeof(c));
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                CHECK(parse(bad[i], &c) == TG_EPARSE, "accepted %s", bad[i]);
        assert_int_equal(traceparent_parse(NULL, 0, &c), TG_EPARSE);
        assert_int_equal(c.flags, 0x5a5a5a5au); /* untouched */
}

static void test_new_and_child(void **state)
{
        struct tg_rng rng;
        struct trace_context c, back;
        char text[TG_TRACEPARENT_MAX + 1], span[TG_SPAN_ID_MAX + 1], child[TG_TRACEPARENT_MAX + 1];

        (void)state;
        tg_rng_seed(&rng, 3);
        for (int i = 0; i < 1000; i++) {
                traceparent_new(&rng, &c);
                traceparent_format(&c, text);
                CHECK(strlen(text) == TG_TRACEPARENT_MAX, "%s", text);
                CHECK(parse(text, &back) == 0, "a new trace does not parse: %s", text);
                assert_string_equal(back.trace_id, c.trace_id);
                traceparent_span_id(&rng, span);
                assert_int_equal(traceparent_child(text, span, child), 0);
                assert_int_equal(parse(child, &back), 0);
                assert_string_equal(back.trace_id, c.trace_id); /* the same trace */
                assert_string_equal(back.span_id, span);        /* our span as parent */
                assert_int_equal(back.flags, c.flags);
        }
        assert_int_equal(traceparent_child("", span, child), TG_EPARSE);
        assert_int_equal(traceparent_child(GOOD, "0000000000000000", child), TG_EPARSE);
        assert_int_equal(traceparent_child(GOOD, "abc", child), TG_EPARSE);
}

static void test_rfc3339(void **state)
{
        static const struct {
                const char *text;
                tg_wall_ms ms;
        } good[] = {
            {"1970-01-01T00:00:00Z", 0},
            {"1970-01-01T00:00:01.5Z", 1500},
            {"1970-01-01t00:00:00.123456z", 123},
            {"2024-02-29T12:00:00Z", 1709208000000LL},
            {"2024-02-29T20:00:00+08:00", 1709208000000LL},
            {"2024-02-29 04:30:00-07:30", 1709208000000LL},
            {"1969-12-31T23:59:59Z", -1000},
            {"2000-03-01T00:00:00Z", 951868800000LL},
        };
        static const char *const bad[] = {
            "2023-02-29T00:00:00Z",     "2024-13-01T00:00:00Z",      "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:60Z",     "2024-01-01T00:00:00",       "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+8:00", "2024-01-01X00:00:00Z",      "2024-1-01T00:00:00Z",
            "2024-01-01T00:00:00Zx",    "2024-01-01T00:00:00+24:00", "",
        };
        tg_wall_ms v = 42;

        (void)state;
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                CHECK(rfc3339_parse(good[i].text, strlen(good[i].text), &v) == 0, "%s",
                      good[i].text);
                CHECK(v == good[i].ms, "%s: %lld", good[i].text, (long long)v);
        }
        v = 42;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                CHECK(rfc3339_parse(bad[i], strlen(bad[i]), &v) == TG_EPARSE, "accepted %s",
                      bad[i]);
        assert_int_equal(v, 42);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_accepts),
            cmocka_unit_test(test_parse_refuses),
            cmocka_unit_test(test_new_and_child),
            cmocka_unit_test(test_rfc3339),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
