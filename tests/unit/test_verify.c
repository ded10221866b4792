/*
 * Unit tests for src/tools/verify.c: a clean run passes with no violation,
 * and each rule of the exit, broken on purpose in an otherwise clean run,
 * produces exactly its finding with the evidence an on-call engineer needs
 * (hidden re-send, bypass, spacing pair, burst, in-flight logged and
 * recomputed, attempts, keys, executions, missing kinds), while things that
 * only look wrong (provider receive spacing, a call the provider never saw)
 * are notes; the exit's OAuth 2.0 token calls (no call log row) are told
 * from a side door and judged at the provider's door. Also: the record bound, evidence truncation, kind lists, the
 * default limits (the config's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/tg_error.h"
#include "daemon/config.h"
#include "tools/verify.h"

#define MAXN     64
#define MS       TG_NS_PER_MS
#define T0       (1000 * TG_NS_PER_S)
#define ARR_SKEW (2 * MS) /* provider receives 2 ms after the start */

struct run_data {
        struct verify_call calls[MAXN];
        struct verify_arrival arr[MAXN];
        struct verify_execution led[MAXN];
        size_t nc, na, nl;
        struct verify_limits lim;
};

static struct run_data d;

/* A call and its arrival: op, kind, start offset (ms), duration (ms). */
static struct verify_call *add_call(const char *op, enum tg_call_kind kind, int64_t start_ms,
                                    int64_t dur_ms, bool with_arrival)
{
        struct verify_call *c = &d.calls[d.nc];
        memset(c, 0, sizeof(*c));
        c->id = (int64_t)d.nc + 1;
        snprintf(c->operation_id, sizeof(c->operation_id), "%s", op);
        c->kind = kind;
        c->attempt = 1;
        snprintf(c->request_id, sizeof(c->request_id), "rid-%zu", d.nc + 1);
        c->epoch = 1;
        c->start_mono = T0 + start_ms * MS;
        c->end_mono = c->start_mono + dur_ms * MS;
        c->start_wall = 1700000000000LL + start_ms;
        c->end_wall = c->start_wall + dur_ms;
        c->in_flight = 1;
        c->sent = 1;
        snprintf(c->cls, sizeof(c->cls), "succeeded");
        c->http_status = 201;
        d.nc++;
        if (with_arrival) {
                struct verify_arrival *a = &d.arr[d.na];
                memset(a, 0, sizeof(*a));
                a->seq = d.na + 1;
                a->mono = c->start_mono + ARR_SKEW;
                a->wall = c->start_wall + 2;
                a->post = kind != TG_KIND_QUERY;
                snprintf(a->key, sizeof(a->key), "%s", op);
                /* via a local copy: gcc -O2 cannot tell a and c apart in d */
                char rid[sizeof(a->request_id)];
                snprintf(rid, sizeof(rid), "%s", c->request_id);
                memcpy(a->request_id, rid, sizeof(rid));
                a->answer = kind == TG_KIND_QUERY ? 200 : 201;
                a->executed = kind == TG_KIND_FIRST;
                a->phase = 0;
                d.na++;
        }
        return c;
}

static int setup(void **state)
{
        (void)state;
        memset(&d, 0, sizeof(d));
        verify_limits_default(&d.lim);
        /* A clean run: 20 first attempts 200 ms apart, 100 ms each. */
        for (int i = 0; i < 20; i++) {
                char op[32];
                snprintf(op, sizeof(op), "op-%02d", i);
                add_call(op, TG_KIND_FIRST, i * 200, 100, true);
                snprintf(d.led[d.nl].key, sizeof(d.led[d.nl].key), "%s", op);
                d.led[d.nl++].executions = 1;
        }
        return 0;
}

static struct verify_result *run(void)
{
        struct verify_result *r = NULL;
        assert_int_equal(verify_run(&d.lim, d.calls, d.nc, d.arr, d.na, d.led, d.nl, &r), 0);
        assert_non_null(r);
        return r;
}

static const struct verify_finding *find(const struct verify_result *r, const char *check)
{
        for (size_t i = 0; i < verify_finding_count(r); i++)
                if (strcmp(verify_finding_at(r, i)->check, check) == 0)
                        return verify_finding_at(r, i);
        return NULL;
}

/* check is violated, and nothing else but also_ok (may be NULL). */
static void assert_violations(const struct verify_result *r, const char *check, const char *also_ok)
{
        const struct verify_finding *f = find(r, check);
        assert_non_null(f);
        assert_true(f->violation);
        for (size_t i = 0; i < verify_finding_count(r); i++) {
                const struct verify_finding *g = verify_finding_at(r, i);
                if (g->violation && strcmp(g->check, check) != 0 &&
                    !(also_ok && strcmp(g->check, also_ok) == 0))
                        fail_msg("unexpected violation %s: %s", g->check, g->problem);
        }
        assert_true(f->problem[0] && f->evidence[0] && f->trigger[0] && f->impact[0] &&
                    f->verify[0] && f->result[0] && f->fix[0]);
}

static void assert_only_violation(const struct verify_result *r, const char *check)
{
        assert_violations(r, check, NULL);
}

static void test_clean_run_passes(void **state)
{
        (void)state;
        struct verify_result *r = run();
        const struct verify_summary *s = verify_summary(r);
        assert_int_equal(s->violations, 0);
        assert_int_equal(s->matched, 20);
        assert_int_equal(s->unmatched, 0);
        assert_int_equal(s->min_start_gap_ns, 200 * MS);
        assert_int_equal(s->interval_ns, 200 * MS);
        assert_int_equal(s->max_in_flight_computed, 1);
        assert_int_equal(s->max_auto_posts_per_op, 1);
        assert_int_equal(s->max_executions, 1);
        assert_int_equal(s->operations, 20);
        assert_int_equal(s->kind_calls[TG_KIND_FIRST], 20);
        assert_int_equal(s->delay_min_ns, ARR_SKEW);
        assert_int_equal(s->bursts[0].k, 2);
        assert_int_equal(s->bursts[0].max_starts, 2);
        assert_int_equal(s->bursts[2].max_starts, 10);
        verify_result_free(r);
}

static void test_duplicate_arrival_is_hidden_resend(void **state)
{
        (void)state;
        d.arr[d.na] = d.arr[3];
        d.arr[d.na].seq = d.na + 1;
        d.arr[d.na].mono += 50 * MS;
        d.arr[d.na].executed = false; /* a replay: answered from the key */
        d.na++;
        struct verify_result *r = run();
        assert_only_violation(r, "arrival_duplicate");
        assert_int_equal(verify_summary(r)->duplicate_arrivals, 1);
        assert_non_null(strstr(find(r, "arrival_duplicate")->evidence, "rid-4"));
        verify_result_free(r);
}

static void test_unmatched_arrival_is_bypass(void **state)
{
        (void)state;
        struct verify_arrival *a = &d.arr[d.na++];
        memset(a, 0, sizeof(*a));
        a->seq = d.na;
        a->mono = T0 + 5 * MS;
        a->post = true;
        snprintf(a->key, sizeof(a->key), "op-side-door");
        struct verify_result *r = run();
        assert_only_violation(r, "arrival_unmatched");
        assert_non_null(strstr(find(r, "arrival_unmatched")->evidence, "op-side-door"));
        assert_int_equal(verify_summary(r)->unmatched, 1);
        verify_result_free(r);
}

static void test_spacing_pair_listed(void **state)
{
        (void)state;
        /* Calls 8.. start 50 ms early: one gap of 150 ms. Five starts
         * then fit in 1 s, which the burst check sees too. */
        for (size_t i = 7; i < d.nc; i++) {
                d.calls[i].start_mono -= 50 * MS;
                d.arr[i].mono -= 50 * MS;
        }
        struct verify_result *r = run();
        assert_violations(r, "spacing", "burst");
        const struct verify_summary *s = verify_summary(r);
        assert_int_equal(s->spacing_violations, 1);
        assert_int_equal(s->min_start_gap_ns, 150 * MS);
        assert_int_equal(s->min_gap_call_a, 7);
        assert_int_equal(s->min_gap_call_b, 8);
        assert_non_null(strstr(find(r, "spacing")->evidence, "calls 7 (first op-06) and 8"));
        verify_result_free(r);
}

static void test_burst_seen_in_short_windows(void **state)
{
        (void)state;
        /* Ten starts 1 ms apart after a quiet minute: the minute averages
         * fine, the 2- and 5-slot windows do not. */
        d.nc = d.na = d.nl = 0;
        for (int i = 0; i < 10; i++) {
                char op[16];
                snprintf(op, sizeof(op), "b-%d", i);
                add_call(op, TG_KIND_FIRST, 60000 + i, 1, true);
        }
        struct verify_result *r = run();
        const struct verify_finding *f = find(r, "burst");
        assert_non_null(f);
        assert_true(f->violation);
        assert_non_null(strstr(f->evidence, "10 starts within 400.0 ms"));
        const struct verify_summary *s = verify_summary(r);
        assert_int_equal(s->bursts[0].max_starts, 10);
        assert_true(s->busiest_minute_per_s < 0.2);
        verify_result_free(r);
}

static void test_in_flight_logged_and_recomputed(void **state)
{
        (void)state;
        d.calls[4].in_flight = 11;
        struct verify_result *r = run();
        assert_only_violation(r, "in_flight");
        assert_int_equal(verify_summary(r)->max_in_flight_logged, 11);
        verify_result_free(r);

        /* Logged counts say 1, but 12 calls of one epoch overlap. */
        setup(NULL);
        for (int i = 0; i < 12; i++)
                d.calls[i].end_mono = d.calls[11].start_mono + 1;
        r = run();
        assert_only_violation(r, "in_flight");
        assert_int_equal(verify_summary(r)->max_in_flight_computed, 12);
        verify_result_free(r);

        /* The same overlap split over two owner epochs is fine. */
        setup(NULL);
        for (int i = 0; i < 12; i++) {
                d.calls[i].end_mono = d.calls[11].start_mono + 1;
                d.calls[i].epoch = i < 6 ? 1 : 2;
        }
        d.calls[5].end_mono = TG_MONO_NEVER; /* its owner died */
        r = run();
        assert_int_equal(verify_summary(r)->violations, 0);
        assert_int_equal(verify_summary(r)->max_in_flight_computed, 6);
        assert_non_null(find(r, "calls_open"));
        verify_result_free(r);
}

static void test_attempts_budget(void **state)
{
        (void)state;
        add_call("op-03", TG_KIND_RETRY, 5000, 10, true);
        add_call("op-03", TG_KIND_RETRY, 5200, 10, true);
        struct verify_result *r = run();
        assert_int_equal(verify_summary(r)->violations, 0); /* three POSTs */
        verify_result_free(r);
        add_call("op-03", TG_KIND_RETRY, 5400, 10, true);
        r = run();
        assert_only_violation(r, "attempts");
        assert_non_null(strstr(find(r, "attempts")->evidence, "op-03: 4 automatic POSTs"));
        verify_result_free(r);
}

/* A POST the provider refused with 429/503 executed nothing and is not
 * counted against the budget (the exit's `limited` event): four such
 * refusals and two more POSTs are within three; a 500 still counts. */
static void test_limited_posts_outside_the_budget(void **state)
{
        (void)state;
        for (int i = 0; i < 4; i++) {
                struct verify_call *c = add_call("op-03", TG_KIND_RETRY, 5000 + i * 200, 10, true);
                c->http_status = i % 2 ? 503 : 429;
                snprintf(c->cls, sizeof(c->cls), "retryable");
                d.arr[d.na - 1].answer = c->http_status;
                d.arr[d.na - 1].executed = false;
        }
        add_call("op-03", TG_KIND_RETRY, 6000, 10, true);
        add_call("op-03", TG_KIND_RETRY, 6200, 10, true);
        struct verify_result *r = run();
        assert_int_equal(verify_summary(r)->violations, 0);
        assert_int_equal(verify_summary(r)->max_auto_posts_per_op, 7); /* every POST, shown */
        assert_int_equal(verify_summary(r)->max_posts_per_key, 7);
        verify_result_free(r);
        /* an exit that counts them (retry.count_limited): over the budget */
        d.lim.count_limited = true;
        r = run();
        assert_only_violation(r, "attempts");
        assert_non_null(strstr(find(r, "attempts")->evidence, "op-03: 7 automatic POSTs"));
        verify_result_free(r);
        d.lim.count_limited = false;
        struct verify_call *c = add_call("op-03", TG_KIND_RETRY, 6400, 10, true);
        c->http_status = 500;
        snprintf(c->cls, sizeof(c->cls), "unknown");
        d.arr[d.na - 1].answer = 500;
        r = run();
        assert_only_violation(r, "attempts");
        verify_result_free(r);
}

/* A claim given back before it was sent (released: a row, not a call) is
 * not an attempt: the exit counts none, and the next claim carries its
 * number. Three POSTs and a released row are within three attempts. */
static void test_released_claim_is_not_an_attempt(void **state)
{
        (void)state;
        d.lim.max_attempts = 3;
        struct verify_call *c = add_call("op-00", TG_KIND_RETRY, 4000, 1, false);
        c->attempt = 2;
        c->released = true;
        c->start_unrecorded = true;
        c->sent = 0;
        snprintf(c->cls, sizeof(c->cls), "not_sent");
        add_call("op-00", TG_KIND_RETRY, 4200, 100, true)->attempt = 2;
        add_call("op-00", TG_KIND_RETRY, 4400, 100, true)->attempt = 3;
        struct verify_result *r = run();
        assert_null(find(r, "attempts"));
        assert_int_equal(verify_summary(r)->max_auto_posts_per_op, 3);
        verify_result_free(r);
        /* the same row as a call that went out: a fourth POST */
        c->released = false;
        r = run();
        assert_non_null(find(r, "attempts"));
        verify_result_free(r);
}

static void test_operator_resend_is_outside_the_budget(void **state)
{
        (void)state;
        add_call("op-03", TG_KIND_RETRY, 5000, 10, true);
        add_call("op-03", TG_KIND_RETRY, 5200, 10, true);
        add_call("op-03", TG_KIND_MANUAL, 5400, 10, true);
        d.lim.expect_kinds = (1u << TG_KIND_FIRST) | (1u << TG_KIND_RETRY) | (1u << TG_KIND_MANUAL);
        struct verify_result *r = run();
        assert_int_equal(verify_summary(r)->violations, 0);
        assert_int_equal(verify_summary(r)->kind_arrivals[TG_KIND_MANUAL], 1);
        verify_result_free(r);
}

static void test_one_key_per_operation(void **state)
{
        (void)state;
        struct verify_call *c = add_call("op-05", TG_KIND_RETRY, 5000, 10, true);
        (void)c;
        snprintf(d.arr[d.na - 1].key, sizeof(d.arr[0].key), "op-05-retry");
        struct verify_result *r = run();
        assert_only_violation(r, "one_key");
        assert_non_null(strstr(find(r, "one_key")->evidence, "op-05 sent 2 keys"));
        verify_result_free(r);
}

static void test_executions(void **state)
{
        (void)state;
        d.led[2].executions = 2;
        struct verify_result *r = run();
        assert_only_violation(r, "executions");
        assert_int_equal(verify_summary(r)->max_executions, 2);
        verify_result_free(r);
        /* The same from the arrivals' executed flags, without a ledger. */
        setup(NULL);
        d.nl = 0;
        add_call("op-02", TG_KIND_RETRY, 5000, 10, true);
        d.arr[d.na - 1].executed = true;
        r = run();
        assert_only_violation(r, "executions");
        verify_result_free(r);
}

static void test_missing_kinds(void **state)
{
        (void)state;
        assert_int_equal(verify_kinds_parse("first,retry,query,manual", &d.lim.expect_kinds), 0);
        add_call("op-01", TG_KIND_QUERY, 5000, 10, true);
        struct verify_result *r = run();
        assert_only_violation(r, "kinds");
        const char *ev = find(r, "kinds")->evidence;
        assert_non_null(strstr(ev, "retry  0 in the call log"));
        assert_non_null(strstr(ev, "query  1 in the call log, 1 matched"));
        verify_result_free(r);
        unsigned m;
        assert_int_equal(verify_kinds_parse("first,bogus", &m), TG_EINVAL);
        assert_int_equal(verify_kinds_parse("", &m), 0);
        assert_int_equal(m, 0);
}

/* The promise is kept at the provider's door: arrivals closer than 1/rate
 * (in whole milliseconds, as a gateway measures) are a violation even when
 * every start was spaced on the wire. */
static void test_receive_spacing_is_a_violation(void **state)
{
        (void)state;
        /* Network delay bunches two arrivals 20 ms apart; starts are fine. */
        d.arr[8].mono = d.calls[8].start_mono + 185 * MS;
        struct verify_result *r = run();
        const struct verify_summary *s = verify_summary(r);
        assert_only_violation(r, "receive_spacing");
        assert_int_equal(s->spacing_violations, 0);
        const struct verify_finding *f = find(r, "receive_spacing");
        assert_non_null(f);
        assert_true(f->violation);
        assert_int_equal(s->min_arrival_gap_ns, 200 * MS - 185 * MS + ARR_SKEW);
        assert_int_equal(s->max_gap_diff_ns, 183 * MS);
        assert_int_equal(s->min_start_gap_ns, 200 * MS);
        verify_result_free(r);
}

/* Whole milliseconds: a receive gap of 199.6 ms that a gateway reads as 200
 * passes; one it reads as 199 does not. */
static void test_receive_gap_in_whole_milliseconds(void **state)
{
        (void)state;
        /* call 8 arrives 200.4 ms after call 7 would have, minus 0.8 ms: the
         * arrivals are 199.6 ms apart */
        tg_mono_ns a7 = d.arr[7].mono;
        d.arr[8].mono = (a7 / MS) * MS + 200 * MS + 100000 - 0;
        d.arr[7].mono = (a7 / MS) * MS + 500000; /* x.5 ms */
        /* 199.6 ms apart: floors x and x+200: passes */
        struct verify_result *r = run();
        assert_null(find(r, "receive_spacing"));
        verify_result_free(r);
        d.arr[7].mono = (a7 / MS) * MS + 100000;            /* x.1 ms */
        d.arr[8].mono = (a7 / MS) * MS + 199 * MS + 900000; /* 199.8 ms later: floor gap 199 */
        r = run();
        assert_only_violation(r, "receive_spacing");
        verify_result_free(r);
}

/* An arrival at the token path, received at offset ms (provider's clock). */
static struct verify_arrival *add_token_arrival(const char *rid, int64_t at_ms)
{
        struct verify_arrival *a = &d.arr[d.na++];
        memset(a, 0, sizeof(*a));
        a->seq = d.na;
        a->mono = T0 + at_ms * MS;
        a->wall = 1700000000000LL + at_ms;
        a->post = true;
        a->token = true;
        snprintf(a->request_id, sizeof(a->request_id), "%s", rid);
        a->answer = 200;
        return a;
}

/* The exit's OAuth 2.0 token calls have no call log row: an arrival at the
 * token path with the exit's token request id is one of them, counted
 * apart, in no operation's budget. */
static void test_token_call_is_the_exits(void **state)
{
        (void)state;
        /* a slot after the last call's arrival (3802 ms) */
        add_token_arrival("tg-token-1-1", 4002);
        struct verify_result *r = run();
        const struct verify_summary *s = verify_summary(r);
        assert_int_equal(s->violations, 0);
        assert_int_equal(s->token_calls, 1);
        assert_int_equal(s->matched, 20);
        assert_int_equal(s->unmatched, 0);
        assert_int_equal(s->max_posts_per_key, 1);
        verify_result_free(r);
}

/* A token call counts at the provider's door: one received closer than
 * 1/rate to a refund call is a receive-spacing violation (the exit paced
 * it in the same slots), and said to have no logged start. */
static void test_token_call_in_receive_spacing(void **state)
{
        (void)state;
        add_token_arrival("tg-token-1-1", 3852); /* 50 ms after the last call's arrival */
        struct verify_result *r = run();
        assert_only_violation(r, "receive_spacing");
        assert_int_equal(verify_summary(r)->arrival_gaps_below, 1);
        assert_int_equal(verify_summary(r)->min_arrival_gap_ns, 50 * MS);
        assert_non_null(strstr(find(r, "receive_spacing")->problem, "token calls"));
        verify_result_free(r);
}

/* Not the exit's: at the token path without the exit's token request id
 * (a token fetched by another sender), or the exit's request id elsewhere;
 * the exit's token call received twice is a re-send below the exit. */
static void test_token_call_not_the_exits(void **state)
{
        (void)state;
        add_token_arrival("script-7", 102);
        add_token_arrival("", 502);
        add_token_arrival("tg-token-1-2", 902)->token = false;
        struct verify_result *r = run();
        assert_only_violation(r, "arrival_unmatched");
        assert_int_equal(verify_summary(r)->unmatched, 3);
        assert_int_equal(verify_summary(r)->token_calls, 0);
        assert_non_null(strstr(find(r, "arrival_unmatched")->evidence, "script-7"));
        verify_result_free(r);

        setup(NULL);
        add_token_arrival("tg-token-1-1", 4002);
        add_token_arrival("tg-token-1-1", 4402);
        r = run();
        assert_only_violation(r, "arrival_duplicate");
        assert_int_equal(verify_summary(r)->token_calls, 1);
        assert_int_equal(verify_summary(r)->duplicate_arrivals, 1);
        assert_non_null(strstr(find(r, "arrival_duplicate")->evidence, "tg-token-1-1"));
        verify_result_free(r);
}

static void test_unseen_call_is_a_note(void **state)
{
        (void)state;
        add_call("op-late", TG_KIND_FIRST, 5000, 3000, false)->http_status = 0;
        struct verify_result *r = run();
        assert_int_equal(verify_summary(r)->violations, 0);
        assert_int_equal(verify_summary(r)->unseen_calls, 1);
        assert_non_null(find(r, "call_unseen"));
        verify_result_free(r);
}

/* A call claimed ahead whose owner was lost before it ended (or whose claim
 * was given back) has no hand-off: its start is not on record, so it is left
 * out of the start checks (its logged start, the claim's, sits 1 ms after
 * another start), and said so. The same call with its start on record is
 * judged. */
static void test_unrecorded_start_left_out(void **state)
{
        (void)state;
        struct verify_call *c = add_call("op-lost", TG_KIND_FIRST, 19 * 200 + 1, 0, false);
        c->end_mono = TG_MONO_NEVER;
        c->end_wall = TG_WALL_NEVER;
        c->sent = -1;
        c->http_status = 0;
        c->cls[0] = '\0';
        c->start_unrecorded = true;
        struct verify_result *r = run();
        assert_int_equal(verify_summary(r)->violations, 0);
        assert_int_equal(verify_summary(r)->unrecorded_starts, 1);
        assert_int_equal(verify_summary(r)->open_calls, 1);
        assert_non_null(strstr(find(r, "start_unrecorded")->evidence, "op-lost"));
        verify_result_free(r);

        d.calls[d.nc - 1].start_unrecorded = false;
        r = run();
        assert_violations(r, "spacing", "burst");
        assert_int_equal(verify_summary(r)->unrecorded_starts, 0);
        verify_result_free(r);
}

static void test_bound_and_truncation(void **state)
{
        (void)state;
        struct verify_result *r = NULL;
        d.lim.max_records = 19;
        assert_int_equal(verify_run(&d.lim, d.calls, d.nc, d.arr, d.na, d.led, d.nl, &r), TG_EFULL);
        assert_null(r);
        d.lim.max_records = VERIFY_MAX_RECORDS;
        d.lim.rate = 0;
        assert_int_equal(verify_run(&d.lim, d.calls, d.nc, d.arr, d.na, d.led, d.nl, &r),
                         TG_EINVAL);
        d.lim.rate = 10; /* 100 ms: the clean run at 5/s is fine */
        r = run();
        assert_int_equal(verify_summary(r)->violations, 0);
        verify_result_free(r);
        d.lim.rate = 6; /* 166.7 ms: every one of 19 gaps is fine too */
        r = run();
        assert_int_equal(verify_summary(r)->violations, 0);
        verify_result_free(r);
        d.lim.rate = 4.5; /* 222 ms: all 19 gaps violate; 8 shown */
        r = run();
        const struct verify_finding *f = find(r, "spacing");
        assert_non_null(f);
        assert_non_null(strstr(f->evidence, "... and 11 more"));
        assert_int_equal(verify_summary(r)->spacing_violations, 19);
        verify_result_free(r);
        assert_int_equal(verify_run(NULL, d.calls, d.nc, NULL, 0, NULL, 0, &r), TG_EINVAL);
}

/* The default limits are the key table's defaults (issue 24: the default
 * rate is written once), not numbers of verify's own. */
static void test_limits_default_are_the_configs(void **state)
{
        static struct tg_config cfg;
        struct verify_limits lim;

        (void)state;
        config_defaults(&cfg);
        verify_limits_default(&lim);
        assert_true(lim.rate == cfg.exit.starts_per_second);
        assert_int_equal(lim.max_in_flight, cfg.exit.max_in_flight);
        assert_int_equal(lim.max_attempts, cfg.policy.max_attempts);
        assert_int_equal(lim.count_limited, cfg.policy.count_limited);
        assert_int_equal(lim.max_executions, 1);
        assert_int_equal(lim.max_records, VERIFY_MAX_RECORDS);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(test_clean_run_passes, setup),
            cmocka_unit_test_setup(test_duplicate_arrival_is_hidden_resend, setup),
            cmocka_unit_test_setup(test_unmatched_arrival_is_bypass, setup),
            cmocka_unit_test_setup(test_spacing_pair_listed, setup),
            cmocka_unit_test_setup(test_burst_seen_in_short_windows, setup),
            cmocka_unit_test_setup(test_in_flight_logged_and_recomputed, setup),
            cmocka_unit_test_setup(test_attempts_budget, setup),
            cmocka_unit_test_setup(test_limited_posts_outside_the_budget, setup),
            cmocka_unit_test_setup(test_operator_resend_is_outside_the_budget, setup),
            cmocka_unit_test_setup(test_released_claim_is_not_an_attempt, setup),
            cmocka_unit_test_setup(test_one_key_per_operation, setup),
            cmocka_unit_test_setup(test_executions, setup),
            cmocka_unit_test_setup(test_missing_kinds, setup),
            cmocka_unit_test_setup(test_receive_spacing_is_a_violation, setup),
            cmocka_unit_test_setup(test_unrecorded_start_left_out, setup),
            cmocka_unit_test_setup(test_receive_gap_in_whole_milliseconds, setup),
            cmocka_unit_test_setup(test_token_call_is_the_exits, setup),
            cmocka_unit_test_setup(test_token_call_in_receive_spacing, setup),
            cmocka_unit_test_setup(test_token_call_not_the_exits, setup),
            cmocka_unit_test_setup(test_unseen_call_is_a_note, setup),
            cmocka_unit_test_setup(test_bound_and_truncation, setup),
            cmocka_unit_test(test_limits_default_are_the_configs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
