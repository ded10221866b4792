/*
 * Tests of core/provider_map: the default map is PROVIDER.md's contract;
 * body fields, paths, field sources and status lists parse or are refused
 * with a message; a map is checked as a whole (duplicate and clashing
 * names, a {refund_id} query path without its fallback, a fallback that is
 * never used); paths expand with the fallback while the refund id is
 * unknown; form bodies encode, leave out absent optional fields and spread
 * {metadata}; status words map onto the three classify words.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/provider_map.h"
#include "core/tg_error.h"
#include "net/provider_request.h"

static struct refund_request req;
static struct refund_metadata md;

static void fixture(struct template_values *v, char amount[MAP_AMOUNT_BUF], bool with_optional)
{
        struct refund_problem p;

        memset(&req, 0, sizeof(req));
        memset(&md, 0, sizeof(md));
        snprintf(req.operation_id, sizeof(req.operation_id), "op-1");
        snprintf(req.payment_id, sizeof(req.payment_id), "pi_9");
        req.amount = 1500;
        snprintf(req.currency, sizeof(req.currency), "TWD");
        if (with_optional) {
                snprintf(req.reason, sizeof(req.reason), "duplicate & more");
                refund_metadata_add(&md, "order", 5, "o 7", 3, &p);
                refund_metadata_add(&md, "desk", 4, "b", 1, &p);
        }
        map_values_for(&req, &md, NULL, amount, v);
}

static void test_default_request_map(void **state)
{
        struct request_map m;
        struct template_values v;
        char amount[MAP_AMOUNT_BUF], buf[256];
        struct tg_strbuf sb;

        (void)state;
        request_map_default(&m);
        assert_int_equal(request_map_check(&m, NULL, NULL), 0);
        assert_int_equal(m.format, BODY_FORMAT_JSON);
        assert_int_equal(m.nfields, 4);
        assert_string_equal(m.fields[2].name, "amount");
        fixture(&v, amount, false);
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_POST, &v, &sb), 0);
        assert_string_equal(buf, "/v1/refunds");
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_string_equal(buf, "/v1/refunds/op-1");
}

/* A later page of a list: the list path with the cursor parameter after
 * its query ("?" when it has none), the cursor percent-encoded as a
 * template's values are; no parameter or no cursor: refused. */
static void test_list_cursor_path(void **state)
{
        struct request_map m;
        struct template_values v;
        char amount[MAP_AMOUNT_BUF], buf[256];
        struct tg_strbuf sb;

        (void)state;
        request_map_default(&m);
        assert_int_equal(map_path_parse(MAP_PATH_LIST,
                                        "/v1/refunds?payment_intent={payment_id}"
                                        "&limit=3",
                                        &m.list_path, NULL),
                         0);
        m.has_list = true;
        assert_int_equal(reconcile_parse("list", &m, NULL), 0);
        assert_int_equal(request_map_check(&m, NULL, NULL), 0);
        fixture(&v, amount, false);

        /* no parameter set: there is no next page to ask for */
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_int_equal(request_map_list_cursor(&m, "re_3", &sb), TG_EINVAL);

        snprintf(m.list_cursor_param, sizeof(m.list_cursor_param), "starting_after");
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_int_equal(request_map_list_cursor(&m, "re_3", &sb), 0);
        assert_string_equal(buf, "/v1/refunds?payment_intent=pi_9&limit=3&starting_after=re_3");
        /* an id with bytes a query cannot carry as they are */
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_int_equal(request_map_list_cursor(&m, "re 1&x=/é", &sb), 0);
        assert_string_equal(buf, "/v1/refunds?payment_intent=pi_9&limit=3"
                                 "&starting_after=re%201%26x%3D%2F%C3%A9");
        /* an empty cursor is no page */
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_int_equal(request_map_list_cursor(&m, "", &sb), TG_EINVAL);
        assert_int_equal(request_map_list_cursor(&m, NULL, &sb), TG_EINVAL);

        /* a list path without a query of its own: "?" */
        assert_int_equal(
            map_path_parse(MAP_PATH_LIST, "/payments/{payment_id}/refunds", &m.list_path, NULL), 0);
        snprintf(m.list_cursor_param, sizeof(m.list_cursor_param), "after");
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_int_equal(request_map_list_cursor(&m, "r9", &sb), 0);
        assert_string_equal(buf, "/payments/pi_9/refunds?after=r9");

        /* a path that does not fit is refused, never cut */
        char small[36];
        tg_strbuf_init(&sb, small, sizeof(small));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_int_equal(request_map_list_cursor(&m, "re_0123456789abcdef", &sb), TG_EFULL);

        /* the parameter's name needs no encoding */
        assert_true(list_cursor_param_ok("starting_after"));
        assert_true(list_cursor_param_ok("page.after-1~"));
        assert_false(list_cursor_param_ok(""));
        assert_false(list_cursor_param_ok("a b"));
        assert_false(list_cursor_param_ok("a&b"));
        assert_false(list_cursor_param_ok("a=b"));
        assert_false(list_cursor_param_ok("é"));
        char longest[80];
        memset(longest, 'a', sizeof(longest));
        longest[63] = '\0';
        assert_true(list_cursor_param_ok(longest));
        longest[63] = 'a';
        longest[64] = '\0';
        assert_false(list_cursor_param_ok(longest));
}

static void field_fails(const char *spec, const char *in_message)
{
        struct body_field f;
        struct template_error err = {{0}};

        CHECK(body_field_parse(spec, &f, &err) == TG_EPARSE, "%s parsed", spec);
        CHECK(strstr(err.message, in_message), "%s: [%s] lacks [%s]", spec, err.message,
              in_message);
}

static void test_body_fields(void **state)
{
        struct body_field f;

        (void)state;
        assert_int_equal(body_field_parse("amount {amount}", &f, NULL), 0);
        assert_string_equal(f.name, "amount");
        assert_int_equal(body_field_parse("  metadata[op]   {operation_id} x", &f, NULL), 0);
        assert_string_equal(f.name, "metadata[op]");
        assert_true(template_uses(&f.value, TPL_OPERATION_ID));
        assert_int_equal(body_field_parse("a.b.c {reason}", &f, NULL), 0);
        field_fails("", "NAME TEMPLATE");
        field_fails("amount", "template is missing");
        field_fails("am$ount {amount}", "field name may contain");
        field_fails(".a {amount}", "start or end");
        field_fails("a..b {amount}", "\"..\"");
        field_fails("x {refund_id}", "unknown field {refund_id}");
        field_fails("x {method}", "unknown field {method}");
        field_fails("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa {amount}",
                    "at most 63");
}

static void test_paths(void **state)
{
        struct template t;
        struct template_error err = {{0}};

        (void)state;
        assert_int_equal(map_path_parse(MAP_PATH_REFUNDS, "/v1/p/{payment_id}/refunds", &t, &err),
                         0);
        assert_int_equal(map_path_parse(MAP_PATH_REFUNDS, "v1/refunds", &t, &err), TG_EPARSE);
        assert_non_null(strstr(err.message, "start with /"));
        assert_int_equal(map_path_parse(MAP_PATH_REFUNDS, "/v1/{refund_id}", &t, &err), TG_EPARSE);
        assert_int_equal(map_path_parse(MAP_PATH_QUERY, "/v1/refunds/{refund_id}", &t, &err), 0);
        assert_int_equal(map_path_parse(MAP_PATH_QUERY, "/v1/refunds/{payment_id}", &t, &err),
                         TG_EPARSE);
        assert_non_null(strstr(err.message, "{operation_id} or {refund_id}"));
        assert_int_equal(map_path_parse(MAP_PATH_QUERY_FALLBACK, "/v1/k/{refund_id}", &t, &err),
                         TG_EPARSE);
        assert_int_equal(map_path_parse(MAP_PATH_QUERY_FALLBACK, "/v1/k/{payment_id}", &t, &err),
                         TG_EPARSE);
        assert_non_null(strstr(err.message, "{operation_id}"));
        assert_int_equal(map_path_parse(MAP_PATH_QUERY, "/v1/a b/{operation_id}", &t, &err),
                         TG_EPARSE);
}

static void test_check_and_fallback(void **state)
{
        struct request_map m;
        struct template_values v;
        struct template_error err = {{0}};
        const char *key = NULL;
        char amount[MAP_AMOUNT_BUF], buf[256];
        struct tg_strbuf sb;

        (void)state;
        request_map_default(&m);
        assert_int_equal(body_field_parse("amount {amount}", &m.fields[m.nfields++], NULL), 0);
        assert_int_equal(request_map_check(&m, &key, &err), TG_EINVAL);
        assert_string_equal(key, "body_field");
        assert_non_null(strstr(err.message, "\"amount\" is set twice"));

        request_map_default(&m);
        assert_int_equal(body_field_parse("payment_id.x {amount}", &m.fields[m.nfields++], NULL),
                         0);
        assert_int_equal(request_map_check(&m, &key, &err), TG_EINVAL);
        assert_non_null(strstr(err.message, "is a value and also holds"));
        m.format = BODY_FORMAT_FORM; /* a form has no nesting: the names are only text */
        assert_int_equal(request_map_check(&m, &key, &err), 0);

        request_map_default(&m);
        m.nfields = 0;
        assert_int_equal(request_map_check(&m, &key, &err), TG_EINVAL);

        request_map_default(&m);
        assert_int_equal(
            map_path_parse(MAP_PATH_QUERY, "/v1/refunds/{refund_id}", &m.query_path, NULL), 0);
        assert_int_equal(request_map_check(&m, &key, &err), TG_EINVAL);
        assert_string_equal(key, "query_fallback_path");
        assert_non_null(strstr(err.message, "required"));
        assert_int_equal(map_path_parse(MAP_PATH_QUERY_FALLBACK, "/v1/by-key/{operation_id}",
                                        &m.query_fallback_path, NULL),
                         0);
        m.has_fallback = true;
        assert_int_equal(request_map_check(&m, &key, &err), 0);

        fixture(&v, amount, false);
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_string_equal(buf, "/v1/by-key/op-1");
        map_values_for(&req, &md, "", amount, &v); /* "" is no refund id either */
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_string_equal(buf, "/v1/by-key/op-1");
        map_values_for(&req, &md, "re_1/2", amount, &v);
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_string_equal(buf, "/v1/refunds/re_1%2F2");

        /* a fallback with a plain query path is refused */
        request_map_default(&m);
        m.has_fallback = true;
        assert_int_equal(request_map_check(&m, &key, &err), TG_EINVAL);
        assert_non_null(strstr(err.message, "never used"));
}

static void test_form_body(void **state)
{
        struct request_map m;
        struct template_values v;
        char amount[MAP_AMOUNT_BUF], buf[512];
        struct tg_strbuf sb;
        static const char *const fields[] = {"payment_intent {payment_id}",
                                             "amount {amount}",
                                             "reason {reason}",
                                             "metadata[operation_id] {operation_id}",
                                             "metadata {metadata}",
                                             "note ref:{metadata.order}/{reason}",
                                             "desk {metadata.desk}"};

        (void)state;
        request_map_default(&m);
        m.format = BODY_FORMAT_FORM;
        m.nfields = 0;
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
                assert_int_equal(body_field_parse(fields[i], &m.fields[m.nfields++], NULL), 0);
        assert_int_equal(request_map_check(&m, NULL, NULL), 0);

        fixture(&v, amount, true);
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_form_body(&m, &v, &sb), 0);
        assert_string_equal(buf, "payment_intent=pi_9&amount=1500&reason=duplicate+%26+more&"
                                 "metadata%5Boperation_id%5D=op-1&metadata%5Bdesk%5D=b&"
                                 "metadata%5Border%5D=o+7&note=ref%3Ao+7%2Fduplicate+%26+more&"
                                 "desk=b");
        /* optional fields absent: left out, but text around one stays */
        fixture(&v, amount, false);
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_form_body(&m, &v, &sb), 0);
        assert_string_equal(buf, "payment_intent=pi_9&amount=1500&metadata%5Boperation_id%5D=op-1&"
                                 "note=ref%3A%2F");
        assert_true(body_field_omitted(&m.fields[2], &v));
        assert_false(body_field_omitted(&m.fields[0], &v));
        /* a body that does not fit */
        tg_strbuf_init(&sb, buf, 20);
        assert_int_equal(request_map_form_body(&m, &v, &sb), TG_EFULL);
}

/* {amount_decimal}: the amount in the currency's ISO 4217 exponent, as a
 * JSON string (PayPal's amount.value); no value for a currency the table
 * lacks (intake refuses those: api_refund_currency). */
static void test_amount_decimal(void **state)
{
        static const struct {
                int64_t minor;
                const char *currency, *want;
        } cases[] = {{1037, "USD", "{\"amount\":{\"value\":\"10.37\",\"currency_code\":\"USD\"}}"},
                     {1037, "JPY", "{\"amount\":{\"value\":\"1037\",\"currency_code\":\"JPY\"}}"},
                     {1037, "KWD", "{\"amount\":{\"value\":\"1.037\",\"currency_code\":\"KWD\"}}"}};
        struct request_map m;
        struct template_values v;
        char amount[MAP_AMOUNT_BUF], *body = NULL;
        size_t len = 0;

        (void)state;
        request_map_default(&m);
        m.nfields = 0;
        assert_int_equal(
            body_field_parse("amount.value {amount_decimal}", &m.fields[m.nfields++], NULL), 0);
        assert_int_equal(
            body_field_parse("amount.currency_code {currency}", &m.fields[m.nfields++], NULL), 0);
        assert_int_equal(request_map_check(&m, NULL, NULL), 0);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                fixture(&v, amount, false);
                req.amount = cases[i].minor;
                snprintf(req.currency, sizeof(req.currency), "%s", cases[i].currency);
                map_values_for(&req, &md, NULL, amount, &v);
                assert_int_equal(provider_request_body(&m, &v, &body, &len), 0);
                CHECK(strcmp(body, cases[i].want) == 0, "%s: [%s], want [%s]", cases[i].currency,
                      body, cases[i].want);
                free(body);
                body = NULL;
        }
        /* a currency without an exponent in the table: no value, no body */
        snprintf(req.currency, sizeof(req.currency), "XXX");
        map_values_for(&req, &md, NULL, amount, &v);
        assert_null(v.text[TPL_AMOUNT_DECIMAL]);
        assert_int_not_equal(provider_request_body(&m, &v, &body, &len), 0);
        free(body);
}

static void source_fails(const char *text, const char *in_message)
{
        struct field_source s;
        struct template_error err = {{0}};

        CHECK(field_source_parse(text, &s, &err) == TG_EPARSE, "%s parsed", text);
        CHECK(strstr(err.message, in_message), "%s: [%s] lacks [%s]", text, err.message,
              in_message);
}

static void test_reply_sources(void **state)
{
        struct field_source s;

        (void)state;
        assert_int_equal(field_source_parse("error.code", &s, NULL), 0);
        assert_int_equal(s.n, 1);
        assert_int_equal(s.alt[0].nseg, 2);
        assert_string_equal(s.alt[0].seg[1].name, "code");
        assert_false(s.alt[0].seg[1].is_index);
        assert_int_equal(field_source_parse("data.0.status  header:X-Status error.type", &s, NULL),
                         0);
        assert_int_equal(s.n, 3);
        assert_true(s.alt[0].seg[1].is_index);
        assert_int_equal(s.alt[0].seg[1].index, 0);
        assert_true(s.alt[1].header);
        assert_string_equal(s.alt[1].header_name, "X-Status");
        assert_int_equal(field_source_parse("", &s, NULL), 0);
        assert_int_equal(s.n, 0);
        source_fails("a..b", "empty path step");
        source_fails(".a", "empty path step");
        source_fails("a.", "empty path step");
        source_fails("a.b$", "may contain only");
        source_fails("a.b.c.d.e.f.g.h.i", "at most 8 steps");
        source_fails("a.12345", "at most 9999");
        source_fails("a b c d", "at most 3");
        source_fails("header:a@b", "not a valid HTTP header name");
}

static void test_status_words(void **state)
{
        struct reply_map m;
        struct template_error err = {{0}};
        char out[32];

        (void)state;
        reply_map_default(&m);
        assert_int_equal(reply_map_check(&m, NULL, NULL), 0);
        reply_map_status(&m, "succeeded", out, sizeof(out));
        assert_string_equal(out, "succeeded");
        reply_map_status(&m, "pending", out, sizeof(out));
        assert_string_equal(out, "pending"); /* passes through */
        assert_int_equal(
            status_list_parse("pending, requires_action,in_transit", &m.processing, NULL), 0);
        assert_int_equal(m.processing.n, 3);
        reply_map_status(&m, "requires_action", out, sizeof(out));
        assert_string_equal(out, "processing");
        assert_int_equal(status_list_parse("canceled,failed", &m.failed, NULL), 0);
        reply_map_status(&m, "canceled", out, sizeof(out));
        assert_string_equal(out, "failed");
        reply_map_status(&m, "", out, sizeof(out));
        assert_string_equal(out, "");
        assert_int_equal(status_list_parse("pending", &m.failed, NULL), 0);
        unsigned lists[2] = {9, 9};
        assert_int_equal(reply_map_check(&m, lists, &err), TG_EINVAL);
        assert_int_equal(lists[0], 1); /* failed */
        assert_int_equal(lists[1], 2); /* processing */
        assert_non_null(strstr(err.message, "\"pending\" is in two lists"));
        assert_int_equal(status_list_parse("", &m.failed, &err), TG_EPARSE);
        assert_int_equal(status_list_parse("a,,b", &m.failed, &err), TG_EPARSE);
        assert_int_equal(status_list_parse("a b", &m.failed, &err), TG_EPARSE);
        assert_int_equal(status_list_parse("a,b,c,d,e,f,g,h,i", &m.failed, &err), TG_EPARSE);
        assert_int_equal(status_list_parse("a/b", &m.failed, &err), TG_EPARSE);

        assert_int_equal(reply_flag_parse("true"), TG_FLAG_TRUE);
        assert_int_equal(reply_flag_parse("TRUE"), TG_FLAG_TRUE);
        assert_int_equal(reply_flag_parse("1"), TG_FLAG_TRUE);
        assert_int_equal(reply_flag_parse("no"), TG_FLAG_FALSE);
        assert_int_equal(reply_flag_parse("0"), TG_FLAG_FALSE);
        assert_int_equal(reply_flag_parse(""), TG_FLAG_ABSENT);
        assert_int_equal(reply_flag_parse("maybe"), TG_FLAG_ABSENT);
}

/* provider.reconcile: the words, their order, and the path each makes. */
static void test_reconcile(void **state)
{
        struct request_map m;
        struct template_values v;
        struct template_error err = {{0}};
        enum reconcile_strategy s;
        const char *key = NULL;
        char amount[MAP_AMOUNT_BUF], buf[256];
        struct tg_strbuf sb;

        (void)state;
        request_map_default(&m);
        assert_int_equal(reconcile_parse("list, key", &m, &err), 0);
        assert_int_equal(m.nreconcile, 2);
        assert_int_equal(m.reconcile[0], RECONCILE_LIST);
        assert_int_equal(m.reconcile[1], RECONCILE_KEY);
        assert_int_equal(reconcile_parse("key key", &m, &err), TG_EPARSE);
        assert_non_null(strstr(err.message, "twice"));
        assert_int_equal(reconcile_parse("lookup", &m, &err), TG_EPARSE);
        assert_int_equal(reconcile_parse(" , ", &m, &err), TG_EPARSE);
        assert_int_equal(reconcile_parse("replay", &m, &err), TG_EPARSE); /* no query way */
        assert_int_equal(reconcile_parse("list replay replay", &m, &err), TG_EPARSE);
        assert_false(m.replay);
        assert_int_equal(reconcile_parse("list, replay, key", &m, &err), 0);
        assert_true(m.replay);
        assert_int_equal(m.nreconcile, 2);
        assert_int_equal(reconcile_parse("list, key", &m, &err), 0);
        assert_false(m.replay);
        assert_int_equal(m.nreconcile, 2); /* untouched on failure */
        assert_string_equal(reconcile_name(RECONCILE_REFUND_ID), "refund_id");
        /* notification-only (Adyen): alone, or with replay; never beside a
         * query strategy (a provider with a query polls it) */
        assert_int_equal(reconcile_parse("notification, list", &m, &err), TG_EPARSE);
        assert_non_null(strstr(err.message, "alone"));
        assert_int_equal(reconcile_parse("notification notification", &m, &err), TG_EPARSE);
        assert_int_equal(reconcile_parse("notification, replay", &m, &err), 0);
        assert_true(m.notification);
        assert_true(m.replay);
        assert_int_equal(m.nreconcile, 0);
        assert_int_equal(reconcile_parse("notification", &m, &err), 0);
        assert_true(m.notification);
        assert_false(m.replay);
        assert_int_equal(reconcile_parse("list, key", &m, &err), 0);
        assert_false(m.notification);

        /* "list" without a list path is refused, naming the key */
        assert_int_equal(request_map_check(&m, &key, &err), TG_EINVAL);
        assert_string_equal(key, "reconcile");
        assert_non_null(strstr(err.message, "list_path"));
        assert_int_equal(map_path_parse(MAP_PATH_LIST,
                                        "/v1/refunds?payment_intent={payment_id}"
                                        "&limit=50",
                                        &m.list_path, &err),
                         0);
        m.has_list = true;
        assert_int_equal(request_map_check(&m, &key, &err), 0);
        fixture(&v, amount, false);
        assert_int_equal(request_map_strategy(&m, &v, &s), 0);
        assert_int_equal(s, RECONCILE_LIST);
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_string_equal(buf, "/v1/refunds?payment_intent=pi_9&limit=50");
        /* the POST's path is the POST's whatever the strategies */
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_POST, &v, &sb), 0);
        assert_string_equal(buf, "/v1/refunds");
        /* a list path cannot use the refund id (it is unknown then) */
        assert_int_equal(map_path_parse(MAP_PATH_LIST, "/v1/r?id={refund_id}", &m.list_path, &err),
                         TG_EPARSE);

        /* Stripe's: by the refund id once known, else the list; no lookup by
         * key, and no fallback needed with a list */
        request_map_default(&m);
        assert_int_equal(
            map_path_parse(MAP_PATH_QUERY, "/v1/refunds/{refund_id}", &m.query_path, NULL), 0);
        assert_int_equal(map_path_parse(MAP_PATH_LIST, "/v1/refunds?payment_intent={payment_id}",
                                        &m.list_path, NULL),
                         0);
        m.has_list = true;
        assert_int_equal(request_map_check(&m, &key, &err), 0);
        assert_int_equal(reconcile_parse("refund_id list", &m, NULL), 0);
        assert_int_equal(request_map_check(&m, &key, &err), 0);
        assert_int_equal(request_map_strategy(&m, &v, &s), 0);
        assert_int_equal(s, RECONCILE_LIST);
        map_values_for(&req, &md, "re_1", amount, &v);
        assert_int_equal(request_map_strategy(&m, &v, &s), 0);
        assert_int_equal(s, RECONCILE_REFUND_ID);
        tg_strbuf_init(&sb, buf, sizeof(buf));
        assert_int_equal(request_map_path(&m, CLASSIFY_QUERY, &v, &sb), 0);
        assert_string_equal(buf, "/v1/refunds/re_1");
        /* "key" needs a path by our key, which this map lacks */
        assert_int_equal(reconcile_parse("key", &m, NULL), 0);
        assert_int_equal(request_map_check(&m, &key, &err), TG_EINVAL);
        assert_non_null(strstr(err.message, "{operation_id}"));
        /* only by refund id: a POST that timed out could never be asked */
        assert_int_equal(reconcile_parse("refund_id", &m, NULL), 0);
        assert_int_equal(request_map_check(&m, &key, &err), TG_EINVAL);
        assert_non_null(strstr(err.message, "key or list"));
        /* the list first, even with the id known */
        assert_int_equal(reconcile_parse("list refund_id", &m, NULL), 0);
        assert_int_equal(request_map_strategy(&m, &v, &s), 0);
        assert_int_equal(s, RECONCILE_LIST);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_default_request_map),
            cmocka_unit_test(test_body_fields),
            cmocka_unit_test(test_paths),
            cmocka_unit_test(test_reconcile),
            cmocka_unit_test(test_check_and_fallback),
            cmocka_unit_test(test_form_body),
            cmocka_unit_test(test_list_cursor_path),
            cmocka_unit_test(test_amount_decimal),
            cmocka_unit_test(test_reply_sources),
            cmocka_unit_test(test_status_words),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
