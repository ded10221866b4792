/*
 * Tests of core/classify: every row of shared/PROVIDER.md for POST and query,
 * the transport results that come before the table, bodies that cannot be
 * trusted (a 404 without code not_found, a 2xx whose body is not the
 * contract's), rule precedence, the config syntax of one rule (good and
 * hostile text) and the bound on the table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/classify.h"
#include "core/tg_error.h"

/* --- helpers -------------------------------------------------------------- */

#define JSON    true
#define NO_JSON false

static struct provider_reply reply_of(enum tg_transport_result tr, int http_status,
                                      bool body_is_json, const char *code, const char *status)
{
        struct provider_reply r;
        memset(&r, 0, sizeof(r));
        r.transport = tr;
        r.http_status = http_status;
        r.body_is_json = body_is_json;
        classify_copy_field(r.error_code, sizeof(r.error_code), code, strlen(code));
        classify_copy_field(r.status, sizeof(r.status), status, strlen(status));
        return r;
}

static int setup_default(void **state)
{
        struct classifier *c = NULL;
        if (classifier_new_default(&c) != 0)
                return -1;
        *state = c;
        return 0;
}

static int teardown(void **state)
{
        classifier_free(*state);
        return 0;
}

struct row {
        const char *what;
        enum classify_request request;
        enum tg_transport_result transport;
        int http_status;
        bool body_is_json;
        const char *code;
        const char *status;
        enum tg_class want;
};

static void run_rows(const struct classifier *c, const struct row *rows, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                const struct row *w = &rows[i];
                struct provider_reply r =
                    reply_of(w->transport, w->http_status, w->body_is_json, w->code, w->status);
                enum tg_class got = classify(c, w->request, &r);
                if (got != w->want)
                        fail_msg("row %zu (%s): got %s, want %s", i, w->what, tg_class_name(got),
                                 tg_class_name(w->want));
        }
}

#define P  CLASSIFY_POST
#define Q  CLASSIFY_QUERY
#define OK TG_TR_COMPLETE

/* --- the default table, row by row -------------------------------------- */

static const struct row post_rows[] = {
    /* 201 / 200: executed or replayed */
    {"201 succeeded", P, OK, 201, JSON, "", "succeeded", TG_CLASS_SUCCEEDED},
    {"200 replay succeeded", P, OK, 200, JSON, "", "succeeded", TG_CLASS_SUCCEEDED},
    /* 2xx whose body is not the contract's: may or may not have executed */
    {"201 not json", P, OK, 201, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"200 not json", P, OK, 200, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"201 json without status", P, OK, 201, JSON, "", "", TG_CLASS_UNKNOWN},
    {"201 status processing", P, OK, 201, JSON, "", "processing", TG_CLASS_UNKNOWN},
    {"200 status failed", P, OK, 200, JSON, "", "failed", TG_CLASS_UNKNOWN},
    {"201 status Succeeded (case)", P, OK, 201, JSON, "", "Succeeded", TG_CLASS_UNKNOWN},
    {"201 status with code only", P, OK, 201, JSON, "succeeded", "", TG_CLASS_UNKNOWN},
    {"202 succeeded", P, OK, 202, JSON, "", "succeeded", TG_CLASS_UNKNOWN},
    {"204", P, OK, 204, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    /* status fields without a JSON body are not trusted */
    {"201 succeeded but not json", P, OK, 201, NO_JSON, "", "succeeded", TG_CLASS_UNKNOWN},
    /* 400 / 422: definite reject */
    {"400 invalid_request", P, OK, 400, JSON, "invalid_request", "", TG_CLASS_REJECTED},
    {"400 no body", P, OK, 400, NO_JSON, "", "", TG_CLASS_REJECTED},
    {"422 invalid_request", P, OK, 422, JSON, "invalid_request", "", TG_CLASS_REJECTED},
    {"422 no code", P, OK, 422, JSON, "", "", TG_CLASS_REJECTED},
    {"422 not json", P, OK, 422, NO_JSON, "", "", TG_CLASS_REJECTED},
    /* 422 idempotency_key_reused: manual review */
    {"422 key reused", P, OK, 422, JSON, "idempotency_key_reused", "", TG_CLASS_KEY_REUSED},
    {"422 key reused, not json", P, OK, 422, NO_JSON, "idempotency_key_reused", "",
     TG_CLASS_REJECTED},
    {"400 key reused code", P, OK, 400, JSON, "idempotency_key_reused", "", TG_CLASS_REJECTED},
    /* a refusal or an error whose body says the refund executed or is
     * still running contradicts itself: it may have executed, so it is
     * neither rejected nor retryable (issue 16, a hostile provider) */
    {"422 status succeeded", P, OK, 422, JSON, "", "succeeded", TG_CLASS_UNKNOWN},
    {"422 invalid_request, status succeeded", P, OK, 422, JSON, "invalid_request", "succeeded",
     TG_CLASS_UNKNOWN},
    {"400 status processing", P, OK, 400, JSON, "", "processing", TG_CLASS_UNKNOWN},
    {"404 status succeeded", P, OK, 404, JSON, "", "succeeded", TG_CLASS_UNKNOWN},
    {"429 status succeeded", P, OK, 429, JSON, "rate_limited", "succeeded", TG_CLASS_UNKNOWN},
    {"503 status processing", P, OK, 503, JSON, "", "processing", TG_CLASS_UNKNOWN},
    {"599 status succeeded", P, OK, 599, JSON, "", "succeeded", TG_CLASS_UNKNOWN},
    /* ... but a body that agrees, or that is not read, changes nothing */
    {"422 status failed", P, OK, 422, JSON, "", "failed", TG_CLASS_REJECTED},
    {"422 succeeded, not json", P, OK, 422, NO_JSON, "", "succeeded", TG_CLASS_REJECTED},
    {"503 succeeded, not json", P, OK, 503, NO_JSON, "", "succeeded", TG_CLASS_RETRYABLE},
    /* and a reused key stays a case for review whatever its body says */
    {"422 key reused, status succeeded", P, OK, 422, JSON, "idempotency_key_reused", "succeeded",
     TG_CLASS_KEY_REUSED},
    /* 409 in use: reconcile */
    {"409 in use", P, OK, 409, JSON, "idempotency_key_in_use", "", TG_CLASS_UNKNOWN},
    {"409 no code", P, OK, 409, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    /* 429 / 503: not accepted, try later */
    {"429 rate_limited", P, OK, 429, JSON, "rate_limited", "", TG_CLASS_RETRYABLE},
    {"429 no body", P, OK, 429, NO_JSON, "", "", TG_CLASS_RETRYABLE},
    {"503 temporarily_unavailable", P, OK, 503, JSON, "temporarily_unavailable", "",
     TG_CLASS_RETRYABLE},
    {"503 html", P, OK, 503, NO_JSON, "", "", TG_CLASS_RETRYABLE},
    /* everything else: unknown, the fallback */
    {"500", P, OK, 500, JSON, "internal", "", TG_CLASS_UNKNOWN},
    {"502", P, OK, 502, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"504", P, OK, 504, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"500 with status succeeded", P, OK, 500, JSON, "", "succeeded", TG_CLASS_UNKNOWN},
    {"401", P, OK, 401, JSON, "unauthorized", "", TG_CLASS_UNKNOWN},
    {"403", P, OK, 403, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"404", P, OK, 404, JSON, "not_found", "", TG_CLASS_UNKNOWN},
    {"408", P, OK, 408, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"301", P, OK, 301, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"100", P, OK, 100, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"599", P, OK, 599, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"0", P, OK, 0, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"-1", P, OK, -1, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"999", P, OK, 999, JSON, "", "succeeded", TG_CLASS_UNKNOWN},
    /* transport results come before the table */
    {"not sent", P, TG_TR_NOT_SENT, 0, NO_JSON, "", "", TG_CLASS_NOT_SENT},
    {"not sent, stale 201", P, TG_TR_NOT_SENT, 201, JSON, "", "succeeded", TG_CLASS_NOT_SENT},
    {"timeout after send", P, TG_TR_TIMEOUT_AFTER_SEND, 0, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"timeout, partial 201", P, TG_TR_TIMEOUT_AFTER_SEND, 201, JSON, "", "succeeded",
     TG_CLASS_UNKNOWN},
    {"reset", P, TG_TR_RESET, 0, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"reset, partial 400", P, TG_TR_RESET, 400, JSON, "invalid_request", "", TG_CLASS_UNKNOWN},
    {"reset, partial 429", P, TG_TR_RESET, 429, NO_JSON, "", "", TG_CLASS_UNKNOWN},
    {"transport out of range", P, (enum tg_transport_result)42, 201, JSON, "", "succeeded",
     TG_CLASS_UNKNOWN},
};

static const struct row query_rows[] = {
    {"200 succeeded", Q, OK, 200, JSON, "", "succeeded", TG_CLASS_SUCCEEDED},
    {"200 failed", Q, OK, 200, JSON, "", "failed", TG_CLASS_REJECTED},
    {"200 processing", Q, OK, 200, JSON, "", "processing", TG_CLASS_PROCESSING},
    {"200 other status", Q, OK, 200, JSON, "", "queued", TG_CLASS_NO_ANSWER},
    {"200 no status", Q, OK, 200, JSON, "", "", TG_CLASS_NO_ANSWER},
    {"200 not json", Q, OK, 200, NO_JSON, "", "", TG_CLASS_NO_ANSWER},
    {"200 succeeded, not json", Q, OK, 200, NO_JSON, "", "succeeded", TG_CLASS_NO_ANSWER},
    {"201 succeeded", Q, OK, 201, JSON, "", "succeeded", TG_CLASS_NO_ANSWER},
    {"404 not_found", Q, OK, 404, JSON, "not_found", "", TG_CLASS_NOT_FOUND},
    /* a 404 that is not the provider's "no record": never not_found */
    {"404 html from a proxy", Q, OK, 404, NO_JSON, "", "", TG_CLASS_NO_ANSWER},
    {"404 json without code", Q, OK, 404, JSON, "", "", TG_CLASS_NO_ANSWER},
    {"404 other code", Q, OK, 404, JSON, "route_not_found", "", TG_CLASS_NO_ANSWER},
    {"404 code NOT_FOUND", Q, OK, 404, JSON, "NOT_FOUND", "", TG_CLASS_NO_ANSWER},
    {"404 not_found but not json", Q, OK, 404, NO_JSON, "not_found", "", TG_CLASS_NO_ANSWER},
    {"410 not_found", Q, OK, 410, JSON, "not_found", "", TG_CLASS_NO_ANSWER},
    {"429", Q, OK, 429, JSON, "rate_limited", "", TG_CLASS_NO_ANSWER},
    {"503", Q, OK, 503, NO_JSON, "", "", TG_CLASS_NO_ANSWER},
    {"500", Q, OK, 500, NO_JSON, "", "", TG_CLASS_NO_ANSWER},
    {"502 succeeded", Q, OK, 502, JSON, "", "succeeded", TG_CLASS_NO_ANSWER},
    {"400", Q, OK, 400, JSON, "invalid_request", "", TG_CLASS_NO_ANSWER},
    {"0", Q, OK, 0, NO_JSON, "", "", TG_CLASS_NO_ANSWER},
    {"not sent", Q, TG_TR_NOT_SENT, 0, NO_JSON, "", "", TG_CLASS_NO_ANSWER},
    {"timeout", Q, TG_TR_TIMEOUT_AFTER_SEND, 200, JSON, "", "succeeded", TG_CLASS_NO_ANSWER},
    {"reset", Q, TG_TR_RESET, 404, JSON, "not_found", "", TG_CLASS_NO_ANSWER},
    {"transport out of range", Q, (enum tg_transport_result) - 3, 200, JSON, "", "succeeded",
     TG_CLASS_NO_ANSWER},
};

static void test_post_table(void **state)
{
        run_rows(*state, post_rows, sizeof(post_rows) / sizeof(post_rows[0]));
}

static void test_query_table(void **state)
{
        run_rows(*state, query_rows, sizeof(query_rows) / sizeof(query_rows[0]));
}

/* Every status 0..999 with every body shape: a POST only ever gets a POST
 * class and a query only a query class, and only the statuses the contract
 * names give anything but the fallback. */
static void test_every_status_gives_a_class_of_its_request(void **state)
{
        const struct classifier *c = *state;
        const char *codes[] = {"", "not_found", "idempotency_key_reused", "idempotency_key_in_use",
                               "rate_limited"};
        const char *statuses[] = {"", "succeeded", "failed", "processing"};
        for (int s = -1; s < 1000; s++) {
                for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
                        for (size_t j = 0; j < sizeof(statuses) / sizeof(statuses[0]); j++) {
                                for (int js = 0; js < 2; js++) {
                                        struct provider_reply r =
                                            reply_of(OK, s, js, codes[i], statuses[j]);
                                        enum tg_class p = classify(c, P, &r);
                                        enum tg_class q = classify(c, Q, &r);
                                        assert_true(
                                            p == TG_CLASS_SUCCEEDED || p == TG_CLASS_REJECTED ||
                                            p == TG_CLASS_KEY_REUSED || p == TG_CLASS_RETRYABLE ||
                                            p == TG_CLASS_UNKNOWN);
                                        assert_true(
                                            q == TG_CLASS_SUCCEEDED || q == TG_CLASS_REJECTED ||
                                            q == TG_CLASS_PROCESSING || q == TG_CLASS_NOT_FOUND ||
                                            q == TG_CLASS_NO_ANSWER);
                                        bool post_named = s == 200 || s == 201 || s == 400 ||
                                                          s == 409 || s == 422 || s == 429 ||
                                                          s == 503;
                                        if (!post_named)
                                                assert_int_equal(p, TG_CLASS_UNKNOWN);
                                        if (s != 200 && s != 404)
                                                assert_int_equal(q, TG_CLASS_NO_ANSWER);
                                }
                        }
                }
        }
}

/* The reply's strings are read only inside their arrays. */
static void test_unterminated_reply_fields(void **state)
{
        const struct classifier *c = *state;
        struct provider_reply r = reply_of(OK, 200, JSON, "", "succeeded");
        memset(r.error_code, 'x', sizeof(r.error_code));
        /* a body whose fields we cannot read is not trusted */
        assert_int_equal(classify(c, P, &r), TG_CLASS_UNKNOWN);
        assert_int_equal(classify(c, Q, &r), TG_CLASS_NO_ANSWER);

        r = reply_of(OK, 404, JSON, "not_found", "");
        memset(r.status, 'y', sizeof(r.status));
        assert_int_equal(classify(c, Q, &r), TG_CLASS_NO_ANSWER);

        /* refund_id is not used to classify: its termination does not matter */
        r = reply_of(OK, 201, JSON, "", "succeeded");
        memset(r.refund_id, 'z', sizeof(r.refund_id));
        assert_int_equal(classify(c, P, &r), TG_CLASS_SUCCEEDED);
}

static void test_request_out_of_range_is_unknown(void **state)
{
        struct provider_reply r = reply_of(OK, 201, JSON, "", "succeeded");
        assert_int_equal(classify(*state, (enum classify_request)7, &r), TG_CLASS_UNKNOWN);
}

/* --- precedence ----------------------------------------------------------- */

static void add(struct classifier *c, const char *text)
{
        struct classify_rule rule;
        if (classify_rule_parse(text, &rule) != 0)
                fail_msg("cannot parse \"%s\"", text);
        assert_int_equal(classifier_add_rule(c, &rule), 0);
}

static enum tg_class cls_of(const struct classifier *c, enum classify_request req, int status,
                            bool json, const char *code, const char *body_status)
{
        struct provider_reply r = reply_of(OK, status, json, code, body_status);
        return classify(c, req, &r);
}

static void test_later_rules_take_precedence(void **state)
{
        struct classifier *c = *state;

        /* A provider whose 500 is documented as "not accepted". */
        add(c, "post 500 => retryable");
        assert_int_equal(cls_of(c, P, 500, JSON, "", ""), TG_CLASS_RETRYABLE);
        assert_int_equal(cls_of(c, P, 502, JSON, "", ""), TG_CLASS_UNKNOWN);
        /* only POST: the query's 500 is still no answer */
        assert_int_equal(cls_of(c, Q, 500, JSON, "", ""), TG_CLASS_NO_ANSWER);

        /* A broad rule added later overrides the specific defaults... */
        add(c, "post 400-499 => unknown");
        assert_int_equal(cls_of(c, P, 400, JSON, "invalid_request", ""), TG_CLASS_UNKNOWN);
        assert_int_equal(cls_of(c, P, 422, JSON, "idempotency_key_reused", ""), TG_CLASS_UNKNOWN);
        assert_int_equal(cls_of(c, P, 429, NO_JSON, "", ""), TG_CLASS_UNKNOWN);
        /* ...and a specific rule added after it wins again. */
        add(c, "post 422 code=idempotency_key_reused => key_reused");
        assert_int_equal(cls_of(c, P, 422, JSON, "idempotency_key_reused", ""),
                         TG_CLASS_KEY_REUSED);
        assert_int_equal(cls_of(c, P, 422, JSON, "invalid_request", ""), TG_CLASS_UNKNOWN);
        /* untouched: outside every added range */
        assert_int_equal(cls_of(c, P, 201, JSON, "", "succeeded"), TG_CLASS_SUCCEEDED);
        assert_int_equal(cls_of(c, P, 503, JSON, "", ""), TG_CLASS_RETRYABLE);

        /* Query: a provider that says "pending" for processing. */
        add(c, "query 200 status=pending => processing");
        assert_int_equal(cls_of(c, Q, 200, JSON, "", "pending"), TG_CLASS_PROCESSING);
        assert_int_equal(cls_of(c, Q, 200, JSON, "", "failed"), TG_CLASS_REJECTED);

        /* The transport result still comes first. */
        struct provider_reply r = reply_of(TG_TR_RESET, 500, JSON, "", "");
        assert_int_equal(classify(c, P, &r), TG_CLASS_UNKNOWN);
}

static void test_absent_field_rule(void **state)
{
        struct classifier *c = *state;
        /* "-": the field must be absent (or the body unreadable). */
        add(c, "post 409 code=- => rejected");
        assert_int_equal(cls_of(c, P, 409, JSON, "", ""), TG_CLASS_REJECTED);
        assert_int_equal(cls_of(c, P, 409, NO_JSON, "", ""), TG_CLASS_REJECTED);
        assert_int_equal(cls_of(c, P, 409, JSON, "idempotency_key_in_use", ""), TG_CLASS_UNKNOWN);
        assert_int_equal(cls_of(c, P, 409, JSON, "other", ""), TG_CLASS_UNKNOWN);

        /* fields of an unreadable body count as absent, whatever they hold */
        struct provider_reply r = reply_of(OK, 409, NO_JSON, "idempotency_key_in_use", "");
        assert_int_equal(classify(c, P, &r), TG_CLASS_REJECTED);

        add(c, "query 200 status=- => no_answer");
        assert_int_equal(cls_of(c, Q, 200, JSON, "", ""), TG_CLASS_NO_ANSWER);
        assert_int_equal(cls_of(c, Q, 200, JSON, "", "succeeded"), TG_CLASS_SUCCEEDED);
}

static void test_both_fields_must_match(void **state)
{
        struct classifier *c = *state;
        add(c, "query 200 code=replayed status=succeeded => no_answer");
        assert_int_equal(cls_of(c, Q, 200, JSON, "replayed", "succeeded"), TG_CLASS_NO_ANSWER);
        assert_int_equal(cls_of(c, Q, 200, JSON, "", "succeeded"), TG_CLASS_SUCCEEDED);
        assert_int_equal(cls_of(c, Q, 200, JSON, "replayed", "failed"), TG_CLASS_REJECTED);
}

/* --- the bound -------------------------------------------------------------- */

static void test_bound(void **state)
{
        struct classifier *c = *state;
        struct classify_rule rule;
        assert_int_equal(classify_rule_parse("post 500 => retryable", &rule), 0);
        unsigned added = 0;
        int r;
        while ((r = classifier_add_rule(c, &rule)) == 0) {
                added++;
                assert_true(added <= CLASSIFIER_MAX_RULES);
        }
        assert_int_equal(r, TG_EFULL);
        /* the bound counts the defaults too */
        assert_true(added < CLASSIFIER_MAX_RULES);
        assert_true(added > CLASSIFIER_MAX_RULES - 32);
        /* full stays full, and the table still works */
        assert_int_equal(classifier_add_rule(c, &rule), TG_EFULL);
        assert_int_equal(cls_of(c, P, 500, JSON, "", ""), TG_CLASS_RETRYABLE);
        assert_int_equal(cls_of(c, P, 201, JSON, "", "succeeded"), TG_CLASS_SUCCEEDED);
        assert_int_equal(cls_of(c, Q, 404, JSON, "not_found", ""), TG_CLASS_NOT_FOUND);
}

static void test_add_rule_refuses_bad_rules(void **state)
{
        struct classifier *c = *state;
        struct classify_rule good;
        assert_int_equal(classify_rule_parse("post 500 => retryable", &good), 0);
        assert_int_equal(classifier_add_rule(c, &good), 0);
        assert_int_equal(classifier_add_rule(NULL, &good), TG_EINVAL);
        assert_int_equal(classifier_add_rule(c, NULL), TG_EINVAL);

        struct classify_rule bad;
        bad = good;
        bad.status_lo = 99;
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad = good;
        bad.status_hi = 600;
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad = good;
        bad.status_lo = 501;
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad = good;
        bad.request = (enum classify_request)5;
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad = good;
        bad.cls = (enum tg_class)TG_CLASS_COUNT;
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad = good;
        bad.cls = TG_CLASS_NO_ANSWER; /* a query class on a POST rule */
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad = good;
        bad.cls = TG_CLASS_NOT_SENT; /* a complete response was sent */
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad = good;
        bad.request = CLASSIFY_QUERY;
        bad.cls = TG_CLASS_RETRYABLE; /* a POST class on a query rule */
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad = good;
        memset(bad.error_code, 'a', sizeof(bad.error_code)); /* not terminated */
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad = good;
        memset(bad.body_status, 0, sizeof(bad.body_status));
        memcpy(bad.body_status, "a b", 3); /* outside the value alphabet */
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);

        /* a value filling its field could be the truncation of a longer code */
        bad = good;
        memset(bad.error_code, 'a', sizeof(bad.error_code) - 1);
        bad.error_code[sizeof(bad.error_code) - 1] = '\0';
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad = good;
        memset(bad.body_status, 'a', sizeof(bad.body_status) - 1);
        bad.body_status[sizeof(bad.body_status) - 1] = '\0';
        assert_int_equal(classifier_add_rule(c, &bad), TG_EINVAL);
        bad.body_status[sizeof(bad.body_status) - 2] = '\0';
        assert_int_equal(classifier_add_rule(c, &bad), 0);

        /* the refused rules changed nothing */
        assert_int_equal(cls_of(c, P, 550, JSON, "", ""), TG_CLASS_UNKNOWN);
        assert_int_equal(cls_of(c, Q, 500, JSON, "", ""), TG_CLASS_NO_ANSWER);
}

/* --- parsing ------------------------------------------------------------------ */

static void test_parse_good(void **state)
{
        (void)state;
        struct classify_rule r;

        assert_int_equal(classify_rule_parse("post 409 code=idempotency_key_in_use => unknown", &r),
                         0);
        assert_int_equal(r.request, CLASSIFY_POST);
        assert_int_equal(r.status_lo, 409);
        assert_int_equal(r.status_hi, 409);
        assert_string_equal(r.error_code, "idempotency_key_in_use");
        assert_string_equal(r.body_status, "");
        assert_int_equal(r.cls, TG_CLASS_UNKNOWN);

        assert_int_equal(classify_rule_parse("query 404 code=not_found => not_found", &r), 0);
        assert_int_equal(r.request, CLASSIFY_QUERY);
        assert_int_equal(r.cls, TG_CLASS_NOT_FOUND);

        assert_int_equal(classify_rule_parse("post 500-599 => unknown", &r), 0);
        assert_int_equal(r.status_lo, 500);
        assert_int_equal(r.status_hi, 599);

        assert_int_equal(classify_rule_parse(" \tpost\t429   =>  retryable \r\n", &r), 0);
        assert_int_equal(r.status_lo, 429);
        assert_int_equal(r.cls, TG_CLASS_RETRYABLE);

        assert_int_equal(
            classify_rule_parse("query 200 status=processing code=x.y:z-1 => processing", &r), 0);
        assert_string_equal(r.body_status, "processing");
        assert_string_equal(r.error_code, "x.y:z-1");

        assert_int_equal(classify_rule_parse("post 200-201 status=succeeded => succeeded", &r), 0);
        assert_int_equal(r.status_lo, 200);
        assert_int_equal(r.status_hi, 201);
        assert_string_equal(r.body_status, "succeeded");

        assert_int_equal(classify_rule_parse("post 400 code=- => rejected", &r), 0);
        assert_string_equal(r.error_code, "-");

        assert_int_equal(classify_rule_parse("post 100-599 => unknown", &r), 0);

        /* every class that the request kind can produce */
        const char *post_ok[] = {"succeeded", "rejected", "key_reused", "retryable", "unknown"};
        const char *query_ok[] = {"succeeded", "rejected", "processing", "not_found", "no_answer"};
        char text[64];
        for (size_t i = 0; i < 5; i++) {
                snprintf(text, sizeof(text), "post 500 => %s", post_ok[i]);
                assert_int_equal(classify_rule_parse(text, &r), 0);
                snprintf(text, sizeof(text), "query 500 => %s", query_ok[i]);
                assert_int_equal(classify_rule_parse(text, &r), 0);
        }

        /* the longest values that cannot be a truncation of a longer one */
        char code[sizeof(r.error_code) - 1];
        memset(code, 'c', sizeof(code) - 1);
        code[sizeof(code) - 1] = '\0';
        char longest[256];
        snprintf(longest, sizeof(longest), "post 409 code=%s => unknown", code);
        assert_int_equal(classify_rule_parse(longest, &r), 0);
        assert_int_equal(strlen(r.error_code), sizeof(r.error_code) - 2);
}

static const char *const hostile[] = {
    "",
    "   ",
    "post",
    "post 409",
    "post 409 =>",
    "post 409 => ",
    "post 409 unknown",
    "post 409 => bogus",
    "post 409 => Unknown",
    "get 409 => unknown",
    "POST 409 => unknown",
    "post 4090 => unknown",
    "post 40 => unknown",
    "post 099 => unknown",
    "post 600 => unknown",
    "post 999 => unknown",
    "post 500-400 => unknown",
    "post 4x9 => unknown",
    "post -409 => unknown",
    "post +409 => unknown",
    "post 409- => unknown",
    "post -409- => unknown",
    "post 400-4 => unknown",
    "post 400--499 => unknown",
    "post 400-499-500 => unknown",
    "post 409 code= => unknown",
    "post 409 status= => unknown",
    "post 409 code=a code=b => unknown",
    "post 409 status=a status=b => unknown",
    "post 409 foo=bar => unknown",
    "post 409 code => unknown",
    "post 409 => unknown extra",
    "post 409 => unknown =>",
    "post 409 =>unknown",
    "post 409=> unknown",
    "post 409 -> unknown",
    "=> unknown",
    "post => unknown",
    "409 post => unknown",
    "post 409 code=a status=b c=d => unknown",
    "post 409 code=bad\"char => unknown",
    "post 409 code=a/b => unknown",
    "post 409 code=\xc3\xa9 => unknown",
    "post 409 code=a\x01 => unknown",
    "post 409 => not_found",
    "post 409 => no_answer",
    "post 409 => not_sent",
    "query 409 => retryable",
    "query 409 => key_reused",
    "query 409 => unknown",
    "query 409 => not_sent",
    "post 409 => unknown\x7f",
    "post\v409 => unknown",
};

static void test_parse_hostile(void **state)
{
        (void)state;
        struct classify_rule sentinel, r;
        memset(&sentinel, 0xA5, sizeof(sentinel));
        for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
                r = sentinel;
                int ret = classify_rule_parse(hostile[i], &r);
                if (ret != TG_EPARSE)
                        fail_msg("\"%s\": got %d, want TG_EPARSE", hostile[i], ret);
                /* untouched on failure */
                assert_memory_equal(&r, &sentinel, sizeof(r));
        }
        r = sentinel;
        assert_int_equal(classify_rule_parse(NULL, &r), TG_EPARSE);
        assert_memory_equal(&r, &sentinel, sizeof(r));
        assert_int_equal(classify_rule_parse("post 409 => unknown", NULL), TG_EPARSE);
}

static void test_parse_length_bounds(void **state)
{
        (void)state;
        struct classify_rule r;
        char text[2048];

        /* a value filling the whole field could be a truncated longer one */
        char code[sizeof(r.error_code)];
        memset(code, 'c', sizeof(code) - 1);
        code[sizeof(code) - 1] = '\0';
        snprintf(text, sizeof(text), "post 409 code=%s => unknown", code);
        assert_int_equal(classify_rule_parse(text, &r), TG_EPARSE);

        char status[sizeof(r.body_status)];
        memset(status, 's', sizeof(status) - 1);
        status[sizeof(status) - 1] = '\0';
        snprintf(text, sizeof(text), "query 200 status=%s => succeeded", status);
        assert_int_equal(classify_rule_parse(text, &r), TG_EPARSE);
        status[sizeof(status) - 2] = '\0';
        snprintf(text, sizeof(text), "query 200 status=%s => succeeded", status);
        assert_int_equal(classify_rule_parse(text, &r), 0);

        /* a very long class name */
        memset(text, 0, sizeof(text));
        memcpy(text, "post 409 => ", 12);
        memset(text + 12, 'u', 500);
        assert_int_equal(classify_rule_parse(text, &r), TG_EPARSE);

        /* text over the bound, even if it is only padding */
        memset(text, ' ', sizeof(text));
        memcpy(text, "post 409 => unknown", 19);
        text[sizeof(text) - 1] = '\0';
        assert_int_equal(classify_rule_parse(text, &r), TG_EPARSE);
        /* the same rule with modest padding is fine */
        text[100] = '\0';
        assert_int_equal(classify_rule_parse(text, &r), 0);
}

/* A parsed rule, added, does what it says. */
/* The provider's own retryable mark (error.retryable, or a header the
 * reply map names) can be asked for by a rule: true, false, or absent. */
static void test_retryable_mark(void **state)
{
        struct classifier *c = *state;
        struct provider_reply r = {
            .transport = TG_TR_COMPLETE, .http_status = 500, .body_is_json = true};
        struct classify_rule rule;

        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_UNKNOWN);
        assert_int_equal(classify_rule_parse("post 500-599 retryable=true code=lock_timeout => "
                                             "retryable",
                                             &rule),
                         0);
        assert_int_equal(rule.retryable, CLASSIFY_FLAG_TRUE);
        assert_int_equal(classifier_add_rule(c, &rule), 0);
        r.retryable = TG_FLAG_TRUE;
        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_UNKNOWN); /* no code */
        snprintf(r.error_code, sizeof(r.error_code), "lock_timeout");
        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_RETRYABLE);
        r.retryable = TG_FLAG_FALSE;
        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_UNKNOWN);
        r.retryable = TG_FLAG_ABSENT;
        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_UNKNOWN);
        add(c, "post 500 retryable=- => unknown");
        add(c, "post 502 retryable=false => unknown");
        assert_int_equal(classify_rule_parse("post 500 retryable=maybe => unknown", &rule),
                         TG_EPARSE);
        assert_int_equal(
            classify_rule_parse("post 500 retryable=true retryable=true => unknown", &rule),
            TG_EPARSE);
        assert_int_equal(
            classify_rule_parse("post 500 code=a status=b retryable=true => unknown", &rule), 0);
}

static void test_parse_then_classify(void **state)
{
        struct classifier *c = *state;
        add(c, "query 200-299 status=done => succeeded");
        assert_int_equal(cls_of(c, Q, 204, JSON, "", "done"), TG_CLASS_SUCCEEDED);
        assert_int_equal(cls_of(c, Q, 204, NO_JSON, "", "done"), TG_CLASS_NO_ANSWER);
        assert_int_equal(cls_of(c, Q, 300, JSON, "", "done"), TG_CLASS_NO_ANSWER);
}

/* --- names and helpers -------------------------------------------------------- */

static void test_class_names(void **state)
{
        (void)state;
        const char *names[TG_CLASS_COUNT] = {"succeeded",  "rejected",  "key_reused",
                                             "retryable",  "unknown",   "not_sent",
                                             "processing", "not_found", "no_answer"};
        for (int i = 0; i < TG_CLASS_COUNT; i++) {
                assert_string_equal(tg_class_name((enum tg_class)i), names[i]);
                enum tg_class cls = (enum tg_class)99;
                assert_int_equal(tg_class_parse(names[i], &cls), 0);
                assert_int_equal(cls, i);
        }
        assert_string_equal(tg_class_name((enum tg_class)TG_CLASS_COUNT), "invalid");
        assert_string_equal(tg_class_name((enum tg_class) - 1), "invalid");
        enum tg_class cls = TG_CLASS_UNKNOWN;
        assert_int_equal(tg_class_parse("Succeeded", &cls), TG_EINVAL);
        assert_int_equal(tg_class_parse("", &cls), TG_EINVAL);
        assert_int_equal(tg_class_parse("succeeded ", &cls), TG_EINVAL);
        assert_int_equal(tg_class_parse(NULL, &cls), TG_EINVAL);
        assert_int_equal(tg_class_parse("succeeded", NULL), TG_EINVAL);
        assert_int_equal(cls, TG_CLASS_UNKNOWN);
}

static void test_copy_field(void **state)
{
        (void)state;
        char dst[8];

        classify_copy_field(dst, sizeof(dst), "abc", 3);
        assert_string_equal(dst, "abc");
        /* truncated to fit */
        classify_copy_field(dst, sizeof(dst), "abcdefghijkl", 12);
        assert_string_equal(dst, "abcdefg");
        /* stops at src_len */
        classify_copy_field(dst, sizeof(dst), "abcdef", 2);
        assert_string_equal(dst, "ab");
        /* stops at an embedded NUL */
        classify_copy_field(dst, sizeof(dst), "ab\0cd", 5);
        assert_string_equal(dst, "ab");
        /* NULL source: "" */
        classify_copy_field(dst, sizeof(dst), NULL, 5);
        assert_string_equal(dst, "");
        /* size 1: only the terminator */
        memset(dst, 'x', sizeof(dst));
        classify_copy_field(dst, 1, "abc", 3);
        assert_int_equal(dst[0], '\0');
        assert_int_equal(dst[1], 'x');
        /* size 0: nothing written */
        memset(dst, 'x', sizeof(dst));
        classify_copy_field(dst, 0, "abc", 3);
        assert_int_equal(dst[0], 'x');
        /* a source that is not terminated is read only up to src_len */
        char src[4] = {'w', 'x', 'y', 'z'};
        classify_copy_field(dst, sizeof(dst), src, sizeof(src));
        assert_string_equal(dst, "wxyz");
}

static void test_new_default_args(void **state)
{
        (void)state;
        assert_int_equal(classifier_new_default(NULL), TG_EINVAL);
        classifier_free(NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_post_table, setup_default, teardown),
            cmocka_unit_test_setup_teardown(test_query_table, setup_default, teardown),
            cmocka_unit_test_setup_teardown(test_every_status_gives_a_class_of_its_request,
                                            setup_default, teardown),
            cmocka_unit_test_setup_teardown(test_unterminated_reply_fields, setup_default,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_request_out_of_range_is_unknown, setup_default,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_later_rules_take_precedence, setup_default,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_absent_field_rule, setup_default, teardown),
            cmocka_unit_test_setup_teardown(test_both_fields_must_match, setup_default, teardown),
            cmocka_unit_test_setup_teardown(test_bound, setup_default, teardown),
            cmocka_unit_test_setup_teardown(test_add_rule_refuses_bad_rules, setup_default,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_retryable_mark, setup_default, teardown),
            cmocka_unit_test(test_parse_good),
            cmocka_unit_test(test_parse_hostile),
            cmocka_unit_test(test_parse_length_bounds),
            cmocka_unit_test_setup_teardown(test_parse_then_classify, setup_default, teardown),
            cmocka_unit_test(test_class_names),
            cmocka_unit_test(test_copy_field),
            cmocka_unit_test(test_new_default_args),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
