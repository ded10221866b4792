/*
 * Tests of net/provider_reply: the contract's bodies read right; malformed
 * JSON, wrong types, duplicate keys, huge bodies, NUL bytes and non-objects
 * read as "not JSON" or as absent fields, never as a wrong answer; and the
 * parsed reply classifies as shared/PROVIDER.md says.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/classify.h"
#include "core/list_walk.h"
#include "core/tg_error.h"
#include "net/provider_reply.h"

/* A reply with stale body fields, so every test also checks the reset. */
static struct provider_reply stale_reply(void)
{
        struct provider_reply r;
        memset(&r, 0, sizeof(r));
        r.transport = TG_TR_COMPLETE;
        r.http_status = 200;
        r.body_is_json = true;
        classify_copy_field(r.error_code, sizeof(r.error_code), "stale", 5);
        classify_copy_field(r.status, sizeof(r.status), "succeeded", 9);
        classify_copy_field(r.refund_id, sizeof(r.refund_id), "re_stale", 8);
        classify_copy_field(r.failure_code, sizeof(r.failure_code), "stale", 5);
        return r;
}

static struct provider_reply parse(const char *body)
{
        struct provider_reply r = stale_reply();
        assert_int_equal(provider_reply_parse_body(body, strlen(body), &r), 0);
        /* transport and status are the transport's */
        assert_int_equal(r.transport, TG_TR_COMPLETE);
        assert_int_equal(r.http_status, 200);
        return r;
}

static void assert_not_json(const struct provider_reply *r)
{
        assert_false(r->body_is_json);
        assert_string_equal(r->error_code, "");
        assert_string_equal(r->status, "");
        assert_string_equal(r->refund_id, "");
        assert_string_equal(r->failure_code, "");
}

static void test_contract_bodies(void **state)
{
        (void)state;
        struct provider_reply r;

        r = parse("{\"refund_id\":\"re_123\",\"operation_id\":\"op-1\",\"status\":\"succeeded\"}");
        assert_true(r.body_is_json);
        assert_string_equal(r.status, "succeeded");
        assert_string_equal(r.refund_id, "re_123");
        assert_string_equal(r.error_code, "");

        r = parse("{\"operation_id\":\"op-1\",\"status\":\"failed\",\"failure_code\":\"x\"}");
        assert_true(r.body_is_json);
        assert_string_equal(r.status, "failed");
        assert_string_equal(r.refund_id, "");
        assert_string_equal(r.failure_code, "x");

        r = parse("{\"operation_id\":\"op-1\",\"status\":\"processing\"}");
        assert_string_equal(r.status, "processing");

        r = parse("{\"error\":{\"code\":\"not_found\"}}");
        assert_true(r.body_is_json);
        assert_string_equal(r.error_code, "not_found");
        assert_string_equal(r.status, "");

        r = parse("{\"error\":{\"code\":\"invalid_request\",\"message\":\"amount\","
                  "\"retryable\":false}}");
        assert_string_equal(r.error_code, "invalid_request");

        r = parse(" \n\t{ \"error\" : { \"code\" : \"idempotency_key_reused\" } }\r\n ");
        assert_string_equal(r.error_code, "idempotency_key_reused");

        /* escapes and UTF-8 are decoded */
        r = parse("{\"status\":\"succ\\u0065eded\",\"refund_id\":\"re_\\u00e9\"}");
        assert_string_equal(r.status, "succeeded");
        assert_string_equal(r.refund_id, "re_\xc3\xa9");

        /* an empty object is JSON with nothing in it */
        r = parse("{}");
        assert_true(r.body_is_json);
        assert_string_equal(r.status, "");
}

static void test_malformed(void **state)
{
        (void)state;
        const char *bodies[] = {
            "",
            " ",
            "{",
            "}",
            "{\"status\":\"succeeded\"",
            "{\"status\":\"succeeded\",}",
            "{'status':'succeeded'}",
            "{status:\"succeeded\"}",
            "{\"status\":\"succeeded\"} trailing",
            "{\"status\":\"succeeded\"}{\"status\":\"failed\"}",
            "<html><body>404 Not Found</body></html>",
            "Service Unavailable",
            "{\"status\":\"succ\x01"
            "eeded\"}",                               /* control character */
            "{\"status\":\"succ\xff\xfe\"}",          /* invalid UTF-8 */
            "{\"status\":\"\xc0\xaf\"}",              /* overlong UTF-8 */
            "{\"status\":\"\\ud800\"}",               /* lone surrogate */
            "{\"status\":\"succeeded\\u0000x\"}",     /* escaped NUL */
            "{\"status\":\"succeeded\\x\"}",          /* bad escape */
            "\xef\xbb\xbf{\"status\":\"succeeded\"}", /* BOM */
            "{\"a\":1e99999999999}",
            "{\"a\":NaN}",
            "{\"a\":-}",
        };
        for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
                struct provider_reply r = parse(bodies[i]);
                if (r.body_is_json)
                        fail_msg("body %zu read as JSON: %s", i, bodies[i]);
                assert_not_json(&r);
        }
}

static void test_non_object(void **state)
{
        (void)state;
        const char *bodies[] = {
            "[]", "[{\"status\":\"succeeded\"}]", "\"succeeded\"", "42", "true", "null",
        };
        for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
                struct provider_reply r = parse(bodies[i]);
                assert_not_json(&r);
        }
}

static void test_wrong_types(void **state)
{
        (void)state;
        struct provider_reply r;

        r = parse("{\"status\":1,\"refund_id\":[\"re_1\"],\"error\":{\"code\":404}}");
        assert_true(r.body_is_json);
        assert_string_equal(r.status, "");
        assert_string_equal(r.refund_id, "");
        assert_string_equal(r.error_code, "");

        r = parse("{\"status\":{\"value\":\"succeeded\"}}");
        assert_string_equal(r.status, "");
        r = parse("{\"status\":null}");
        assert_string_equal(r.status, "");
        /* a boolean status reads as a word (Checkout.com's "approved") */
        r = parse("{\"status\":true}");
        assert_string_equal(r.status, "true");

        /* .error must be an object with a string .code */
        r = parse("{\"error\":\"not_found\"}");
        assert_true(r.body_is_json);
        assert_string_equal(r.error_code, "");
        r = parse("{\"error\":[{\"code\":\"not_found\"}]}");
        assert_string_equal(r.error_code, "");
        r = parse("{\"error\":null}");
        assert_string_equal(r.error_code, "");
        r = parse("{\"code\":\"not_found\"}"); /* not under .error */
        assert_string_equal(r.error_code, "");
        r = parse("{\"error\":{\"error\":{\"code\":\"not_found\"}}}");
        assert_string_equal(r.error_code, "");
        /* a nested status does not count */
        r = parse("{\"refund\":{\"status\":\"succeeded\"}}");
        assert_string_equal(r.status, "");
        /* keys are case-sensitive */
        r = parse("{\"Status\":\"succeeded\"}");
        assert_string_equal(r.status, "");
}

static void test_duplicates(void **state)
{
        (void)state;
        /* two answers in one body: we cannot know which the provider meant */
        struct provider_reply r = parse("{\"status\":\"failed\",\"status\":\"succeeded\"}");
        assert_not_json(&r);
        r = parse("{\"error\":{\"code\":\"a\",\"code\":\"not_found\"}}");
        assert_not_json(&r);
        r = parse("{\"x\":{\"y\":1,\"y\":2},\"status\":\"succeeded\"}");
        assert_not_json(&r);
        /* the same key in different objects is fine */
        r = parse("{\"status\":\"succeeded\",\"x\":{\"status\":\"failed\"}}");
        assert_true(r.body_is_json);
        assert_string_equal(r.status, "succeeded");
}

static void test_nul_bytes(void **state)
{
        (void)state;
        struct provider_reply r;
        /* raw NUL inside a string, after the object, and before it */
        const char in_string[] = "{\"status\":\"succ\0eeded\"}";
        const char after[] = "{\"status\":\"succeeded\"}\0garbage";
        const char before[] = "\0{\"status\":\"succeeded\"}";
        const char only[] = "\0\0\0\0";

        r = stale_reply();
        assert_int_equal(provider_reply_parse_body(in_string, sizeof(in_string) - 1, &r), 0);
        assert_not_json(&r);
        r = stale_reply();
        assert_int_equal(provider_reply_parse_body(after, sizeof(after) - 1, &r), 0);
        assert_not_json(&r);
        r = stale_reply();
        assert_int_equal(provider_reply_parse_body(before, sizeof(before) - 1, &r), 0);
        assert_not_json(&r);
        r = stale_reply();
        assert_int_equal(provider_reply_parse_body(only, sizeof(only) - 1, &r), 0);
        assert_not_json(&r);

        /* len is what counts: a body that is a prefix of the buffer */
        const char prefix[] = "{\"status\":\"succeeded\"}XXXX";
        r = stale_reply();
        assert_int_equal(provider_reply_parse_body(prefix, sizeof(prefix) - 5, &r), 0);
        assert_true(r.body_is_json);
        assert_string_equal(r.status, "succeeded");
}

static void test_truncation(void **state)
{
        (void)state;
        char body[2048];
        char longval[400];
        memset(longval, 'a', sizeof(longval) - 1);
        longval[sizeof(longval) - 1] = '\0';
        struct provider_reply r;
        size_t n = (size_t)snprintf(body, sizeof(body),
                                    "{\"status\":\"%s\",\"refund_id\":\"%s\",\"error\":{\"code\":"
                                    "\"%s\"}}",
                                    longval, longval, longval);
        assert_true(n < sizeof(body));
        r = stale_reply();
        assert_int_equal(provider_reply_parse_body(body, n, &r), 0);
        assert_true(r.body_is_json);
        assert_int_equal(strlen(r.status), sizeof(r.status) - 1);
        assert_int_equal(strlen(r.refund_id), sizeof(r.refund_id) - 1);
        assert_int_equal(strlen(r.error_code), sizeof(r.error_code) - 1);

        /* a code longer than the field, whose prefix is a rule's code, does
         * not classify as that rule */
        struct classifier *c;
        assert_int_equal(classifier_new_default(&c), 0);
        n = (size_t)snprintf(body, sizeof(body), "{\"error\":{\"code\":\"not_found%s\"}}", longval);
        r = stale_reply();
        r.http_status = 404;
        assert_int_equal(provider_reply_parse_body(body, n, &r), 0);
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_NO_ANSWER);
        classifier_free(c);
}

static void test_huge(void **state)
{
        (void)state;
        size_t big = PROVIDER_REPLY_MAX_BODY + 1;
        char *body = malloc(big);
        assert_non_null(body);
        /* a valid object, just too long: padded with whitespace */
        memset(body, ' ', big);
        const char obj[] = "{\"status\":\"succeeded\"}";
        memcpy(body, obj, sizeof(obj) - 1);

        struct provider_reply r = stale_reply();
        assert_int_equal(provider_reply_parse_body(body, big, &r), TG_ERANGE);
        assert_not_json(&r); /* still usable: classifies as malformed */
        /* one byte less is inside the bound and reads */
        r = stale_reply();
        assert_int_equal(provider_reply_parse_body(body, big - 1, &r), 0);
        assert_true(r.body_is_json);
        assert_string_equal(r.status, "succeeded");
        r = stale_reply();
        assert_int_equal(provider_reply_parse_body(body, SIZE_MAX, &r), TG_ERANGE);
        assert_not_json(&r);
        free(body);

        /* deep nesting inside the bound: refused by the parser, no crash */
        size_t depth = 20000;
        body = malloc(2 * depth);
        assert_non_null(body);
        memset(body, '[', depth);
        memset(body + depth, ']', depth);
        body[0] = '{';
        r = stale_reply();
        assert_int_equal(provider_reply_parse_body(body, 2 * depth, &r), 0);
        assert_not_json(&r);
        free(body);

        /* many members */
        size_t cap = PROVIDER_REPLY_MAX_BODY;
        body = malloc(cap);
        assert_non_null(body);
        size_t len = 0;
        body[len++] = '{';
        for (unsigned i = 0; len + 40 < cap; i++)
                len += (size_t)snprintf(body + len, cap - len, "\"k%u\":%u,", i, i);
        len += (size_t)snprintf(body + len, cap - len, "\"status\":\"processing\"}");
        assert_true(len <= cap);
        r = stale_reply();
        assert_int_equal(provider_reply_parse_body(body, len, &r), 0);
        assert_true(r.body_is_json);
        assert_string_equal(r.status, "processing");
        free(body);
}

static void test_arguments(void **state)
{
        (void)state;
        struct provider_reply r = stale_reply();
        struct provider_reply before = r;
        assert_int_equal(provider_reply_parse_body("{}", 2, NULL), TG_EINVAL);
        assert_int_equal(provider_reply_parse_body(NULL, 5, &r), TG_EINVAL);
        /* untouched */
        assert_true(r.body_is_json == before.body_is_json);
        assert_string_equal(r.error_code, before.error_code);
        assert_string_equal(r.status, before.status);
        assert_string_equal(r.refund_id, before.refund_id);
        /* no body at all: not JSON */
        assert_int_equal(provider_reply_parse_body(NULL, 0, &r), 0);
        assert_not_json(&r);
}

/* From the bytes on the wire to the class: the pieces fit. */
static void test_parse_then_classify(void **state)
{
        (void)state;
        struct classifier *c;
        assert_int_equal(classifier_new_default(&c), 0);
        struct {
                enum classify_request request;
                int http_status;
                const char *body;
                enum tg_class want;
        } rows[] = {
            {CLASSIFY_POST, 201, "{\"refund_id\":\"re_1\",\"status\":\"succeeded\"}",
             TG_CLASS_SUCCEEDED},
            {CLASSIFY_POST, 200, "{\"refund_id\":\"re_1\",\"status\":\"succeeded\"}",
             TG_CLASS_SUCCEEDED},
            {CLASSIFY_POST, 201, "<html>ok</html>", TG_CLASS_UNKNOWN},
            {CLASSIFY_POST, 201, "{\"status\":\"failed\",\"status\":\"succeeded\"}",
             TG_CLASS_UNKNOWN},
            {CLASSIFY_POST, 422, "{\"error\":{\"code\":\"idempotency_key_reused\"}}",
             TG_CLASS_KEY_REUSED},
            {CLASSIFY_POST, 422, "{\"error\":{\"code\":\"invalid_request\"}}", TG_CLASS_REJECTED},
            {CLASSIFY_POST, 409, "{\"error\":{\"code\":\"idempotency_key_in_use\"}}",
             TG_CLASS_UNKNOWN},
            {CLASSIFY_POST, 503, "{\"error\":{\"code\":\"temporarily_unavailable\"}}",
             TG_CLASS_RETRYABLE},
            {CLASSIFY_QUERY, 200, "{\"status\":\"processing\"}", TG_CLASS_PROCESSING},
            {CLASSIFY_QUERY, 200, "{\"status\":\"failed\"}", TG_CLASS_REJECTED},
            {CLASSIFY_QUERY, 404, "{\"error\":{\"code\":\"not_found\"}}", TG_CLASS_NOT_FOUND},
            {CLASSIFY_QUERY, 404, "<html>Not Found</html>", TG_CLASS_NO_ANSWER},
            {CLASSIFY_QUERY, 404, "{\"error\":{\"code\":404}}", TG_CLASS_NO_ANSWER},
            {CLASSIFY_QUERY, 404, "{\"error\":\"not_found\"}", TG_CLASS_NO_ANSWER},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                struct provider_reply r = stale_reply();
                r.http_status = rows[i].http_status;
                assert_int_equal(provider_reply_parse_body(rows[i].body, strlen(rows[i].body), &r),
                                 0);
                enum tg_class got = classify(c, rows[i].request, &r);
                if (got != rows[i].want)
                        fail_msg("row %zu: got %s, want %s", i, tg_class_name(got),
                                 tg_class_name(rows[i].want));
        }
        classifier_free(c);
}

/* The body is read as JSON only when its Content-Type says JSON, or says
 * nothing: a 201 of text/html or text/plain is not a clear answer however
 * JSON it looks (issue 16, a hostile provider). */
static void test_content_type(void **state)
{
        (void)state;
        static const char body[] = "{\"refund_id\":\"re_1\",\"status\":\"succeeded\"}";
        struct classifier *c;
        struct {
                const char *type;
                bool json;
        } rows[] = {
            {NULL, true},
            {"", true},
            {"application/json", true},
            {"application/json; charset=utf-8", true},
            {"Application/JSON", true},
            {"application/json ;charset=UTF-8", true},
            {"application/problem+json", true},
            {"application/vnd.provider.v2+json; q=1", true},
            {"text/html", false},
            {"text/html; charset=utf-8", false},
            {"text/plain", false},
            {"text/json", false},
            {"application/jsonx", false},
            {"application/json-seq", false},
            {"application/x-www-form-urlencoded", false},
            {"application/", false},
            {"+json", false},
            {"application/+json", false},
            {"json", false},
            {" ", false},
        };

        assert_int_equal(classifier_new_default(&c), 0);
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                struct provider_reply r = stale_reply();
                struct provider_reply_headers h = {.content_type = rows[i].type};
                int rc = provider_reply_read(NULL, body, strlen(body), &h, &r);
                if (provider_reply_json_type(rows[i].type) != rows[i].json)
                        fail_msg("row %zu (%s): json_type says %d", i, rows[i].type, !rows[i].json);
                if (rows[i].json) {
                        assert_int_equal(rc, 0);
                        assert_true(r.body_is_json);
                        assert_string_equal(r.status, "succeeded");
                        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_SUCCEEDED);
                } else {
                        assert_int_equal(rc, TG_EPARSE);
                        assert_not_json(&r);
                        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_UNKNOWN);
                        r.http_status = 200;
                        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_NO_ANSWER);
                }
        }
        classifier_free(c);
}

/* A list answer (Stripe's GET /v1/refunds?payment_intent=): ours found by
 * the operation id in its metadata and read from its item; not found in a
 * complete list is not_found, in a page with more is no_answer with the
 * next page's start; an error body is read as one. */
static void test_list(void **state)
{
        static const char page[] =
            "{\"object\":\"list\",\"data\":["
            "{\"id\":\"re_a\",\"status\":\"succeeded\",\"metadata\":{\"operation_id\":\"op-0\"}},"
            "{\"id\":\"re_b\",\"status\":\"pending\",\"metadata\":{\"operation_id\":\"op-1\"}},"
            "{\"id\":\"re_c\",\"status\":\"failed\",\"failure_reason\":\"expired_or_canceled_"
            "card\","
            "\"metadata\":{\"operation_id\":\"op-2\"}},"
            "{\"id\":\"re_d\",\"status\":\"succeeded\",\"metadata\":\"not an object\"}],"
            "\"has_more\":%s}";
        struct reply_map m;
        struct classifier *c;
        struct provider_reply r;
        char body[1024];

        (void)state;
        reply_map_default(&m);
        assert_int_equal(field_source_parse("id", &m.refund_id, NULL), 0);
        assert_int_equal(field_source_parse("failure_reason", &m.failure_code, NULL), 0);
        assert_int_equal(status_list_parse("pending", &m.processing, NULL), 0);
        assert_int_equal(field_source_parse("data", &m.list_items, NULL), 0);
        assert_int_equal(field_source_parse("metadata.operation_id", &m.list_match, NULL), 0);
        assert_int_equal(field_source_parse("has_more", &m.list_more, NULL), 0);
        assert_int_equal(classifier_new_default(&c), 0);

        snprintf(body, sizeof(body), page, "false");
        r = stale_reply();
        assert_int_equal(provider_reply_read_list(&m, "op-1", body, strlen(body), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_FOUND);
        assert_string_equal(r.refund_id, "re_b");
        assert_string_equal(r.status, "processing");
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_PROCESSING);
        r = stale_reply();
        assert_int_equal(provider_reply_read_list(&m, "op-2", body, strlen(body), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_FOUND);
        assert_string_equal(r.failure_code, "expired_or_canceled_card");
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_REJECTED);
        /* not in a complete list: nothing executed */
        r = stale_reply();
        assert_int_equal(provider_reply_read_list(&m, "op-9", body, strlen(body), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_ABSENT);
        assert_string_equal(r.refund_id, "");
        assert_string_equal(r.status, "");
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_NOT_FOUND);
        /* ... only a complete one: a page with more says nothing */
        snprintf(body, sizeof(body), page, "true");
        r = stale_reply();
        assert_int_equal(provider_reply_read_list(&m, "op-9", body, strlen(body), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_PARTIAL);
        assert_string_equal(r.list_cursor, "re_d");
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_NO_ANSWER);
        /* a "more" flag that is not a clear false is not "complete" */
        snprintf(body, sizeof(body), page, "\"maybe\"");
        r = stale_reply();
        assert_int_equal(provider_reply_read_list(&m, "op-9", body, strlen(body), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_PARTIAL);
        /* not found in a list that came with an error status: the table */
        snprintf(body, sizeof(body), page, "false");
        r = stale_reply();
        r.http_status = 500;
        assert_int_equal(provider_reply_read_list(&m, "op-9", body, strlen(body), NULL, &r), 0);
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_NO_ANSWER);
        /* an error body is no list: read as an answer */
        static const char err[] = "{\"error\":{\"type\":\"invalid_request_error\","
                                  "\"code\":\"resource_missing\"}}";
        r = stale_reply();
        r.http_status = 404;
        assert_int_equal(provider_reply_read_list(&m, "op-1", err, strlen(err), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_NONE);
        assert_string_equal(r.error_code, "resource_missing");
        /* an empty match is refused; the plain read never lists */
        assert_int_equal(provider_reply_read_list(&m, "", body, strlen(body), NULL, &r), TG_EINVAL);
        r = stale_reply();
        assert_int_equal(provider_reply_read(&m, body, strlen(body), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_NONE);
        assert_string_equal(r.status, "");
        classifier_free(c);
}

/* A walk of a paged list (Stripe's: has_more, starting_after the last
 * item's id), read and classified page by page and carried from page to
 * page by core/list_walk: a page without ours is no_answer and leaves the
 * next page's cursor; ours on page 2 is found; a complete page 3 without
 * ours, reached from page 1, is not_found; once the provider told the
 * refund's id, that page is processing instead; a walk is bounded. */
static void read_page(const struct reply_map *m, const char *match, const char *known,
                      const char *const *ids, unsigned n, bool more, struct provider_reply *r)
{
        char body[2048];
        size_t len = (size_t)snprintf(body, sizeof(body), "{\"object\":\"list\",\"data\":[");

        for (unsigned i = 0; i < n; i++)
                len += (size_t)snprintf(body + len, sizeof(body) - len,
                                        "%s{\"id\":\"%s\",\"status\":\"succeeded\","
                                        "\"metadata\":{\"operation_id\":\"op-%s\"}}",
                                        i ? "," : "", ids[i], ids[i] + 3);
        len += (size_t)snprintf(body + len, sizeof(body) - len, "],\"has_more\":%s}",
                                more ? "true" : "false");
        *r = stale_reply();
        assert_int_equal(provider_reply_read_list_known(m, match, known, body, len, NULL, r), 0);
}

static void test_list_pages(void **state)
{
        static const char *const p1[] = {"re_9", "re_8", "re_7"};
        static const char *const p2[] = {"re_6", "re_5", "re_4"};
        static const char *const p3[] = {"re_3", "re_2"};
        struct list_walks *w = calloc(1, sizeof(*w));
        struct reply_map m;
        struct classifier *c;
        struct provider_reply r;
        unsigned page;
        const char *cursor;

        (void)state;
        assert_non_null(w);
        reply_map_default(&m);
        assert_int_equal(field_source_parse("id", &m.refund_id, NULL), 0);
        assert_int_equal(field_source_parse("data", &m.list_items, NULL), 0);
        assert_int_equal(field_source_parse("metadata.operation_id", &m.list_match, NULL), 0);
        assert_int_equal(field_source_parse("has_more", &m.list_more, NULL), 0);
        assert_int_equal(classifier_new_default(&c), 0);

        /* op 7 (one POST) is re_5's: query 1 reads page 1, no cursor */
        assert_null(list_walk_cursor(w, 7, 1, 1, &page));
        assert_int_equal(page, 1);
        read_page(&m, "op-5", NULL, p1, 3, true, &r);
        assert_int_equal(r.list, REPLY_LIST_PARTIAL);
        assert_string_equal(r.list_cursor, "re_7");
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_NO_ANSWER);
        assert_int_equal(list_walk_after(w, 7, 1, 1, page, r.list, r.list_cursor, 10),
                         LIST_WALK_NEXT);
        /* query 2 reads page 2, after re_7: ours */
        cursor = list_walk_cursor(w, 7, 1, 2, &page);
        assert_non_null(cursor);
        assert_string_equal(cursor, "re_7");
        assert_int_equal(page, 2);
        read_page(&m, "op-5", NULL, p2, 3, true, &r);
        assert_int_equal(r.list, REPLY_LIST_FOUND);
        assert_string_equal(r.refund_id, "re_5");
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_SUCCEEDED);
        assert_int_equal(list_walk_after(w, 7, 1, 2, page, r.list, r.list_cursor, 10),
                         LIST_WALK_DONE);
        assert_int_equal(list_walk_count(w), 0);

        /* op 8 is in none of the pages: 1, 2 (more), 3 (complete) */
        const char *const *pages[] = {p1, p2, p3};
        const unsigned sizes[] = {3, 3, 2};
        for (unsigned q = 1; q <= 3; q++) {
                cursor = list_walk_cursor(w, 8, 1, q, &page);
                assert_int_equal(page, q);
                assert_true(q == 1 ? cursor == NULL
                                   : strcmp(cursor, q == 2 ? "re_7" : "re_4") == 0);
                read_page(&m, "op-x", NULL, pages[q - 1], sizes[q - 1], q < 3, &r);
                assert_int_equal(r.list, q < 3 ? REPLY_LIST_PARTIAL : REPLY_LIST_ABSENT);
                assert_int_equal(classify(c, CLASSIFY_QUERY, &r),
                                 q < 3 ? TG_CLASS_NO_ANSWER : TG_CLASS_NOT_FOUND);
                assert_int_equal(list_walk_after(w, 8, 1, q, page, r.list, r.list_cursor, 10),
                                 q < 3 ? LIST_WALK_NEXT : LIST_WALK_DONE);
        }
        assert_int_equal(list_walk_count(w), 0);
        /* the same complete page once the provider told the refund's id:
         * taken, not listed yet; never "not executed" */
        read_page(&m, "op-x", "re_new", p3, 2, false, &r);
        assert_int_equal(r.list, REPLY_LIST_NOT_YET);
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_PROCESSING);

        /* bounded: with 2 pages at most, page 2 with more ends the walk
         * unconcluded (no_answer, nothing kept: the next walk is page 1) */
        assert_null(list_walk_cursor(w, 9, 1, 1, &page));
        read_page(&m, "op-x", NULL, p1, 3, true, &r);
        assert_int_equal(list_walk_after(w, 9, 1, 1, page, r.list, r.list_cursor, 2),
                         LIST_WALK_NEXT);
        assert_non_null(list_walk_cursor(w, 9, 1, 2, &page));
        assert_int_equal(page, 2);
        read_page(&m, "op-x", NULL, p2, 3, true, &r);
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_NO_ANSWER);
        assert_int_equal(list_walk_after(w, 9, 1, 2, page, r.list, r.list_cursor, 2),
                         LIST_WALK_BOUNDED);
        assert_null(list_walk_cursor(w, 9, 1, 3, &page));
        assert_int_equal(page, 1);

        /* a last id too long for the cursor field would be cut, and a cut
         * id starts the wrong page: no cursor, the walk ends there */
        char long_id[200], body[512];
        memset(long_id, 'x', sizeof(long_id));
        memcpy(long_id, "re_", 3);
        long_id[sizeof(r.list_cursor) - 1] = '\0'; /* fills the field exactly */
        snprintf(body, sizeof(body), "{\"data\":[{\"id\":\"%s\"}],\"has_more\":true}", long_id);
        r = stale_reply();
        assert_int_equal(provider_reply_read_list(&m, "op-x", body, strlen(body), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_PARTIAL);
        assert_string_equal(r.list_cursor, "");
        assert_int_equal(list_walk_after(w, 10, 1, 1, 1, r.list, r.list_cursor, 10),
                         LIST_WALK_BOUNDED);
        long_id[sizeof(r.list_cursor) - 2] = '\0'; /* one shorter: kept whole */
        snprintf(body, sizeof(body), "{\"data\":[{\"id\":\"%s\"}],\"has_more\":true}", long_id);
        r = stale_reply();
        assert_int_equal(provider_reply_read_list(&m, "op-x", body, strlen(body), NULL, &r), 0);
        assert_string_equal(r.list_cursor, long_id);
        classifier_free(c);
        free(w);
}

/* Checkout.com's GET /payments/{id}/actions: the answer is a bare array
 * (list_items "."), the outcome a boolean (approved), ours by the reference
 * we sent or by the action id a 202 named; once that id is known, a
 * complete list without ours is pending (NOT_YET), never "not executed". */
static void test_list_bare_array_of_actions(void **state)
{
        static const char body[] = "[{\"id\":\"act_r2\",\"type\":\"Refund\",\"approved\":false,"
                                   "\"response_code\":\"20051\",\"reference\":\"op-2\"},"
                                   "{\"id\":\"act_r1\",\"type\":\"Refund\",\"approved\":true,"
                                   "\"response_code\":\"10000\",\"reference\":\"op-1\"},"
                                   "{\"id\":\"act_cap\",\"type\":\"Capture\",\"approved\":true,"
                                   "\"reference\":\"ORD-1\"}]";
        struct reply_map m;
        struct classifier *c;
        struct provider_reply r;

        (void)state;
        reply_map_default(&m);
        assert_int_equal(field_source_parse("approved", &m.status, NULL), 0);
        assert_int_equal(status_list_parse("true", &m.succeeded, NULL), 0);
        assert_int_equal(status_list_parse("false", &m.failed, NULL), 0);
        assert_int_equal(field_source_parse("action_id id", &m.refund_id, NULL), 0);
        assert_int_equal(field_source_parse("response_code", &m.failure_code, NULL), 0);
        assert_int_equal(field_source_parse(".", &m.list_items, NULL), 0);
        assert_int_equal(m.list_items.alt[0].nseg, 0u);
        assert_int_equal(field_source_parse("reference", &m.list_match, NULL), 0);
        assert_int_equal(classifier_new_default(&c), 0);

        r = stale_reply();
        assert_int_equal(provider_reply_read_list(&m, "op-1", body, strlen(body), NULL, &r), 0);
        assert_true(r.body_is_json);
        assert_int_equal(r.list, REPLY_LIST_FOUND);
        assert_string_equal(r.refund_id, "act_r1");
        assert_string_equal(r.status, "succeeded");
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_SUCCEEDED);
        r = stale_reply();
        assert_int_equal(provider_reply_read_list(&m, "op-2", body, strlen(body), NULL, &r), 0);
        assert_string_equal(r.status, "failed");
        assert_string_equal(r.failure_code, "20051");
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_REJECTED);
        /* by the action id a 202 named, whatever the reference */
        r = stale_reply();
        assert_int_equal(
            provider_reply_read_list_known(&m, "op-x", "act_r1", body, strlen(body), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_FOUND);
        assert_string_equal(r.status, "succeeded");
        /* not there: nothing executed, unless the provider named it */
        r = stale_reply();
        assert_int_equal(provider_reply_read_list(&m, "op-9", body, strlen(body), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_ABSENT);
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_NOT_FOUND);
        r = stale_reply();
        assert_int_equal(
            provider_reply_read_list_known(&m, "op-9", "act_new", body, strlen(body), NULL, &r), 0);
        assert_int_equal(r.list, REPLY_LIST_NOT_YET);
        assert_string_equal(r.status, "");
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_PROCESSING);
        /* a bare array is read only as a list ("." items): not as an answer */
        r = stale_reply();
        assert_int_equal(provider_reply_read(&m, body, strlen(body), NULL, &r), 0);
        assert_false(r.body_is_json);
        assert_string_equal(r.status, "");
        /* a 202 naming its action: the POST's processing, by a rule */
        static const char accepted[] = "{\"action_id\":\"act_r3\",\"reference\":\"op-3\"}";
        struct classify_rule rule;
        assert_int_equal(classify_rule_parse("post 202 => processing", &rule), 0);
        assert_int_equal(classifier_add_rule(c, &rule), 0);
        r = stale_reply();
        r.http_status = 202;
        assert_int_equal(provider_reply_read(&m, accepted, strlen(accepted), NULL, &r), 0);
        assert_string_equal(r.refund_id, "act_r3");
        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_PROCESSING);
        classifier_free(c);
}

/* The two meanings of a 429 (Checkout.com documents both): a rate limit,
 * retryable; and "a request with this key is still in progress", told
 * apart by its error code (provider.in_progress_codes): unknown, and a
 * query's no_answer, never "not executed". */
static void test_two_meanings_of_429(void **state)
{
        static const char limited[] = "{\"error_type\":\"too_many_requests\"}";
        static const char in_progress[] = "{\"error_type\":\"request_in_progress\"}";
        struct reply_map m;
        struct classifier *c;
        struct provider_reply r;

        (void)state;
        reply_map_default(&m);
        assert_int_equal(field_source_parse("error_type", &m.error_code, NULL), 0);
        assert_int_equal(status_list_parse("request_in_progress", &m.in_progress, NULL), 0);
        assert_int_equal(classifier_new_default(&c), 0);
        r = stale_reply();
        r.http_status = 429;
        assert_int_equal(provider_reply_read(&m, limited, strlen(limited), NULL, &r), 0);
        assert_false(r.key_in_progress);
        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_RETRYABLE);
        r = stale_reply();
        r.http_status = 429;
        assert_int_equal(provider_reply_read(&m, in_progress, strlen(in_progress), NULL, &r), 0);
        assert_true(r.key_in_progress);
        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_UNKNOWN);
        assert_int_equal(classify(c, CLASSIFY_QUERY, &r), TG_CLASS_NO_ANSWER);
        /* without the profile's word, the same body is a rate limit */
        m.in_progress.n = 0;
        r = stale_reply();
        r.http_status = 429;
        assert_int_equal(provider_reply_read(&m, in_progress, strlen(in_progress), NULL, &r), 0);
        assert_false(r.key_in_progress);
        assert_int_equal(classify(c, CLASSIFY_POST, &r), TG_CLASS_RETRYABLE);
        classifier_free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_contract_bodies),
            cmocka_unit_test(test_malformed),
            cmocka_unit_test(test_non_object),
            cmocka_unit_test(test_wrong_types),
            cmocka_unit_test(test_duplicates),
            cmocka_unit_test(test_nul_bytes),
            cmocka_unit_test(test_truncation),
            cmocka_unit_test(test_huge),
            cmocka_unit_test(test_arguments),
            cmocka_unit_test(test_parse_then_classify),
            cmocka_unit_test(test_content_type),
            cmocka_unit_test(test_list),
            cmocka_unit_test(test_list_pages),
            cmocka_unit_test(test_list_bare_array_of_actions),
            cmocka_unit_test(test_two_meanings_of_429),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
