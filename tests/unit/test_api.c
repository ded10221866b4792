/*
 * Unit tests of the intake API: api_handle() driven directly with requests
 * built here, over a real SQLite store in a temporary directory. Covers
 * every answer code of the routes, hostile bodies and paths, the error body
 * shape, and that nothing is stored on any error.
 *
 * api.c, api_parse.c and config.c live in src/app, which is linked into the
 * tollgate executable rather than a library, so they are compiled into this
 * test directly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../src/app/api.c"
#include "../../src/app/api_admission.c"
#include "../../src/app/api_events.c"
#include "../../src/app/api_manual.c"
#include "../../src/app/api_metrics.c"
#include "../../src/app/api_parse.c"
#include "../../src/app/config.c"
#include "../../src/app/exit_stats.c"
#include "../../src/app/log.c"
#include "../../src/app/render.c"

#define TOKEN "t0ken-for-tests"
#define GOOD                                                                                       \
        "{\"operation_id\":\"op-1\",\"payment_id\":\"pay-1\",\"amount\":1250,\"currency\":"        \
        "\"EUR\"}"

struct fixture {
        char dir[64];
        char db[128];
        struct api *api;
};

static int setup(void **state)
{
        struct fixture *fx = calloc(1, sizeof(*fx));
        struct tg_config cfg;

        if (!fx)
                return -1;
        snprintf(fx->dir, sizeof(fx->dir), "/tmp/tg-test-api-XXXXXX");
        if (!mkdtemp(fx->dir))
                return -1;
        snprintf(fx->db, sizeof(fx->db), "%s/t.db", fx->dir);
        config_defaults(&cfg);
        snprintf(cfg.store_url, sizeof(cfg.store_url), "sqlite://%s", fx->db);
        snprintf(cfg.api_token, sizeof(cfg.api_token), "%s", TOKEN);
        cfg.api_max_body_bytes = 1024;
        if (api_new(&cfg, &fx->api) != 0)
                return -1;
        *state = fx;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *fx = *state;
        char cmd[256];

        api_stop(fx->api);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
        if (system(cmd) != 0)
                return -1;
        free(fx);
        return 0;
}

/* One exchange. The response is parsed into *ret_json (NULL if not JSON). */
struct exchange {
        int status;
        json_t *json;
        char request_id[256];
        char retry_after[256];
        char allow[256];
};

static void exchange_free(struct exchange *ex)
{
        json_decref(ex->json);
        ex->json = NULL;
}

static struct exchange do_request(struct api *api, const char *method, const char *path,
                                  const char *query, const char *auth, const char *body, size_t len)
{
        struct http_header headers[2];
        struct http_request req;
        struct http_response res;
        struct exchange ex;
        char authz[128];
        size_t n = 0;

        memset(&ex, 0, sizeof(ex));
        if (auth) {
                snprintf(authz, sizeof(authz), "%s", auth);
                headers[n].name = "authorization";
                headers[n].value = authz;
                n++;
        }
        headers[n].name = "Content-Type";
        headers[n].value = "application/json";
        n++;
        memset(&req, 0, sizeof(req));
        req.method = method;
        req.path = path;
        req.query = query ? query : "";
        req.headers = headers;
        req.header_count = n;
        req.body = body ? body : "";
        req.body_len = body ? len : 0;

        http_response_init(&res);
        assert_int_equal(api_handle(api, &req, &res), 0);
        ex.status = res.status;
        assert_string_equal(res.content_type, "application/json");
        ex.json = json_loadb(res.body, res.body_len, 0, NULL);
        for (unsigned i = 0; i < res.header_count; i++) {
                if (strcmp(res.headers[i].name, "X-Request-Id") == 0)
                        snprintf(ex.request_id, sizeof(ex.request_id), "%s", res.headers[i].value);
                if (strcmp(res.headers[i].name, "Retry-After") == 0)
                        snprintf(ex.retry_after, sizeof(ex.retry_after), "%s",
                                 res.headers[i].value);
                if (strcmp(res.headers[i].name, "Allow") == 0)
                        snprintf(ex.allow, sizeof(ex.allow), "%s", res.headers[i].value);
        }
        assert_non_null(ex.json);
        assert_true(ex.request_id[0] != '\0');
        http_response_release(&res);
        return ex;
}

static struct exchange post(struct api *api, const char *body, size_t len)
{
        return do_request(api, "POST", "/v1/refunds", NULL, "Bearer " TOKEN, body, len);
}

static struct exchange get(struct api *api, const char *path, const char *query)
{
        return do_request(api, "GET", path, query, "Bearer " TOKEN, NULL, 0);
}

/* Checks the error shape and returns error.field (NULL when null). */
static const char *expect_error(struct exchange *ex, int status, const char *code)
{
        json_t *e = json_object_get(ex->json, "error");
        json_t *field;

        if (ex->status != status || !e ||
            strcmp(json_string_value(json_object_get(e, "code")), code) != 0) {
                char *dump = json_dumps(ex->json, 0);
                fail_msg("expected %d %s, got %d %s", status, code, ex->status, dump ? dump : "?");
        }
        assert_true(json_is_string(json_object_get(e, "message")));
        assert_true(json_is_boolean(json_object_get(e, "retryable")));
        field = json_object_get(e, "field");
        assert_non_null(field); /* present, null or a string */
        assert_string_equal(json_string_value(json_object_get(ex->json, "request_id")),
                            ex->request_id);
        return json_is_string(field) ? json_string_value(field) : NULL;
}

static uint64_t ops_stored(struct api *api)
{
        struct store_stats st;
        uint64_t n = 0;

        assert_int_equal(store_stats(api->store, &st), 0);
        for (int i = 0; i < OP_STATE_COUNT; i++)
                n += st.by_state[i];
        return n;
}

#define POST_LIT(api, lit) post(api, lit, sizeof(lit) - 1)

static void test_healthz(void **state)
{
        struct fixture *fx = *state;
        struct exchange ex = do_request(fx->api, "GET", "/healthz", NULL, NULL, NULL, 0);

        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "status")), "ok");
        exchange_free(&ex);
        ex = do_request(fx->api, "POST", "/healthz", NULL, NULL, "x", 1);
        expect_error(&ex, 405, "method_not_allowed");
        assert_string_equal(ex.allow, "GET");
        exchange_free(&ex);
}

static void test_auth(void **state)
{
        struct fixture *fx = *state;
        static const char *const bad[] = {NULL,
                                          "",
                                          "Bearer",
                                          "Bearer ",
                                          "Bearer wrong",
                                          "Bearer " TOKEN "x",
                                          "Bearer t0ken-for-test",
                                          "Basic dDB rZW4=",
                                          TOKEN};
        struct exchange ex;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ex = do_request(fx->api, "POST", "/v1/refunds", NULL, bad[i], GOOD, strlen(GOOD));
                expect_error(&ex, 401, "unauthorized");
                exchange_free(&ex);
                /* routes and ids are not revealed either */
                ex = do_request(fx->api, "GET", "/v1/nothing", NULL, bad[i], NULL, 0);
                expect_error(&ex, 401, "unauthorized");
                exchange_free(&ex);
        }
        assert_int_equal(ops_stored(fx->api), 0);

        ex = do_request(fx->api, "GET", "/v1/refunds/op-x", NULL, "bearer " TOKEN, NULL, 0);
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);
}

static void test_accept_replay_conflict(void **state)
{
        struct fixture *fx = *state;
        struct exchange ex = POST_LIT(fx->api, GOOD);
        static const char other[] =
            "{\"operation_id\":\"op-1\",\"payment_id\":\"pay-1\",\"amount\":1251,"
            "\"currency\":\"EUR\"}";
        static const char reordered[] =
            "{\"currency\":\"EUR\",\"amount\":1250,\"payment_id\":\"pay-1\","
            "\"operation_id\":\"op-1\"}";

        assert_int_equal(ex.status, 202);
        assert_string_equal(json_string_value(json_object_get(ex.json, "operation_id")), "op-1");
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "pending");
        assert_string_equal(json_string_value(json_object_get(ex.json, "status_url")),
                            "/v1/refunds/op-1");
        exchange_free(&ex);

        ex = POST_LIT(fx->api, GOOD);
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "pending");
        exchange_free(&ex);

        /* the same request in another key order is the same request */
        ex = POST_LIT(fx->api, reordered);
        assert_int_equal(ex.status, 200);
        exchange_free(&ex);

        ex = POST_LIT(fx->api, other);
        assert_string_equal(expect_error(&ex, 409, "idempotency_conflict"), "operation_id");
        assert_false(json_is_true(json_object_get(json_object_get(ex.json, "error"), "retryable")));
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 1);

        /* the stored request is the first one */
        ex = get(fx->api, "/v1/refunds/op-1", NULL);
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_integer_value(json_object_get(ex.json, "amount")), 1250);
        exchange_free(&ex);
}

struct bad_body {
        const char *body;
        size_t len;
        int status;
        const char *code;
        const char *field; /* NULL: null */
};

#define B(lit, st, code, field)                                                                    \
        {                                                                                          \
                lit, sizeof(lit) - 1, st, code, field                                              \
        }

static void test_hostile_bodies(void **state)
{
        struct fixture *fx = *state;
        static const struct bad_body cases[] = {
            B("", 400, "invalid_json", NULL),
            B("{", 400, "invalid_json", NULL),
            B("[]", 400, "invalid_json", NULL),
            B("null", 400, "invalid_json", NULL),
            B("\"op\"", 400, "invalid_json", NULL),
            B("{} {}", 400, "invalid_json", NULL),
            B("{\"operation_id\":\"a\",\"operation_id\":\"b\"}", 400, "invalid_json", NULL),
            B("{\"operation_id\":\"op\xff\"}", 400, "invalid_json", NULL),
            B("{\"operation_id\":\"op\xc3\"}", 400, "invalid_json", NULL),
            B("{\"operation_id\":\"a\\u0000b\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\"}",
              400, "invalid_json", NULL),
            B("{\"operation_id\":\"a\0b\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\"}",
              400, "invalid_json", NULL),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\"}\0",
              400, "invalid_json", NULL),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\",\"ammount\":5}",
              422, "unknown_field", "ammount"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\",\"\":5}",
              422, "unknown_field", NULL),
            B("{\"payment_id\":\"p\",\"amount\":1,\"currency\":\"EUR\"}", 422, "invalid_field",
              "operation_id"),
            B("{\"operation_id\":\"op-2\",\"amount\":1,\"currency\":\"EUR\"}", 422, "invalid_field",
              "payment_id"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"currency\":\"EUR\"}", 422,
              "invalid_field", "amount"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1}", 422, "invalid_field",
              "currency"),
            B("{\"operation_id\":2,\"payment_id\":\"p\",\"amount\":1,\"currency\":\"EUR\"}", 422,
              "invalid_field", "operation_id"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":null,\"amount\":1,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "payment_id"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":\"1\","
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "amount"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1.0,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "amount"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1e2,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "amount"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":true,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "amount"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":0,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "amount"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":-5,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "amount"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":-0,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "amount"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\","
              "\"amount\":9223372036854775808,\"currency\":\"EUR\"}",
              422, "invalid_field", NULL),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\","
              "\"amount\":99999999999999999999999999,\"currency\":\"EUR\"}",
              422, "invalid_field", NULL),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1e999,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", NULL),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":[1],"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "amount"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"eur\"}",
              422, "invalid_field", "currency"),
            B("{\"operation_id\":\"../x\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "operation_id"),
            B("{\"operation_id\":\"a%2Fb\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "operation_id"),
            B("{\"operation_id\":\"..\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "operation_id"),
            B("{\"operation_id\":\"op 2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "operation_id"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p q\",\"amount\":1,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "payment_id"),
            B("{\"operation_id\":\"op-\\u00e9\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\"}",
              422, "invalid_field", "operation_id"),
        };
        struct exchange ex;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const char *field;
                ex = post(fx->api, cases[i].body, cases[i].len);
                field = expect_error(&ex, cases[i].status, cases[i].code);
                if (cases[i].field) {
                        if (!field || strcmp(field, cases[i].field) != 0)
                                fail_msg("case %zu: field %s, expected %s", i,
                                         field ? field : "null", cases[i].field);
                } else if (field && strcmp(cases[i].code, "unknown_field") != 0) {
                        fail_msg("case %zu: field %s, expected null", i, field);
                }
                assert_false(
                    json_is_true(json_object_get(json_object_get(ex.json, "error"), "retryable")));
                exchange_free(&ex);
        }
        /* nothing stored on any error */
        assert_int_equal(ops_stored(fx->api), 0);
}

static void test_long_fields(void **state)
{
        struct fixture *fx = *state;
        char id[200], body[600];
        struct exchange ex;

        memset(id, 'a', sizeof(id));
        id[128] = '\0';
        snprintf(body, sizeof(body),
                 "{\"operation_id\":\"%s\",\"payment_id\":\"p\",\"amount\":9223372036854775807,"
                 "\"currency\":\"EUR\"}",
                 id);
        ex = post(fx->api, body, strlen(body));
        assert_int_equal(ex.status, 202);
        exchange_free(&ex);

        id[128] = 'a';
        id[129] = '\0';
        snprintf(body, sizeof(body),
                 "{\"operation_id\":\"%s\",\"payment_id\":\"p\",\"amount\":1,"
                 "\"currency\":\"EUR\"}",
                 id);
        ex = post(fx->api, body, strlen(body));
        assert_string_equal(expect_error(&ex, 422, "invalid_field"), "operation_id");
        exchange_free(&ex);

        /* an unknown field with a long UTF-8 name is cut, not broken */
        char name[300];
        size_t n = 0;
        while (n + 2 < 200) {
                name[n++] = '\xc3';
                name[n++] = '\xa9';
        }
        name[n] = '\0';
        snprintf(body, sizeof(body), "{\"%s\":1}", name);
        ex = post(fx->api, body, strlen(body));
        assert_non_null(expect_error(&ex, 422, "unknown_field"));
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 1);
}

static void test_body_too_large(void **state)
{
        struct fixture *fx = *state;
        char *big = malloc(4096);
        struct http_request req;
        struct http_response res;
        struct exchange ex;

        assert_non_null(big);
        memset(big, ' ', 4096);
        memcpy(big, GOOD, strlen(GOOD)); /* valid JSON, padded past the 1024 bound */
        ex = post(fx->api, big, 4096);
        expect_error(&ex, 413, "body_too_large");
        exchange_free(&ex);
        free(big);

        /* the server's own refusal, passed to the handler */
        memset(&req, 0, sizeof(req));
        req.method = "POST";
        req.path = "/v1/refunds";
        req.query = "";
        req.body = "";
        req.problem_status = 413;
        req.problem = "request body too large";
        http_response_init(&res);
        assert_int_equal(api_handle(fx->api, &req, &res), 0);
        assert_int_equal(res.status, 413);
        assert_non_null(strstr(res.body, "body_too_large"));
        http_response_release(&res);

        req.problem_status = 400;
        req.problem = "request path has a dot segment";
        http_response_init(&res);
        assert_int_equal(api_handle(fx->api, &req, &res), 0);
        assert_int_equal(res.status, 400);
        assert_non_null(strstr(res.body, "invalid_request"));
        http_response_release(&res);
        assert_int_equal(ops_stored(fx->api), 0);
}

static void test_routes(void **state)
{
        struct fixture *fx = *state;
        static const char *const not_found[] = {
            "/v1/refunds/nope",
            "/v1/refunds/../x",
            "/v1/refunds/a%2Fb",
            "/v1/refunds/a/b",
            "/v1/refunds/",
            "/v1/refunds/..",
            "/v1/refund",
            "/v1",
            "/v1/",
            "/v1/calls/1",
            "/v1/refunds/%00",
        };
        struct exchange ex;

        for (size_t i = 0; i < sizeof(not_found) / sizeof(not_found[0]); i++) {
                ex = get(fx->api, not_found[i], NULL);
                expect_error(&ex, 404, "not_found");
                exchange_free(&ex);
        }
        /* outside /v1 no token is needed to learn that nothing is there */
        ex = do_request(fx->api, "GET", "/metrics-nope", NULL, NULL, NULL, 0);
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);

        ex = get(fx->api, "/v1/refunds", NULL);
        expect_error(&ex, 405, "method_not_allowed");
        assert_string_equal(ex.allow, "POST");
        exchange_free(&ex);
        ex = do_request(fx->api, "DELETE", "/v1/refunds/op-1", NULL, "Bearer " TOKEN, NULL, 0);
        expect_error(&ex, 405, "method_not_allowed");
        assert_string_equal(ex.allow, "GET");
        exchange_free(&ex);
        ex = do_request(fx->api, "POST", "/v1/calls", NULL, "Bearer " TOKEN, "{}", 2);
        expect_error(&ex, 405, "method_not_allowed");
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 0);
}

static void test_status_and_calls(void **state)
{
        struct fixture *fx = *state;
        struct claim_args args;
        struct op_record op;
        struct call_record call;
        struct exchange ex;
        json_t *attempts, *a;
        int64_t epoch = 0;

        ex = POST_LIT(fx->api, GOOD);
        assert_int_equal(ex.status, 202);
        exchange_free(&ex);

        ex = get(fx->api, "/v1/refunds/op-1", NULL);
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "pending");
        assert_string_equal(json_string_value(json_object_get(ex.json, "payment_id")), "pay-1");
        assert_string_equal(json_string_value(json_object_get(ex.json, "currency")), "EUR");
        assert_true(json_is_integer(json_object_get(ex.json, "accepted_at")));
        assert_true(json_object_get(ex.json, "deadline_at") != NULL);
        assert_true(json_is_null(json_object_get(ex.json, "next_run_at")));
        assert_true(json_is_null(json_object_get(ex.json, "reason")));
        assert_true(json_is_null(json_object_get(ex.json, "refund_id")));
        assert_int_equal(json_array_size(json_object_get(ex.json, "attempts")), 0);
        exchange_free(&ex);

        /* one call, as the dispatcher would record it */
        assert_int_equal(store_owner_acquire(fx->api->store, &epoch), 0);
        memset(&args, 0, sizeof(args));
        args.group = STORE_GROUP_FIRST;
        args.epoch = epoch;
        args.now = api_wall_now();
        args.start_mono = 1;
        args.in_flight_at_start = 1;
        snprintf(args.request_id, sizeof(args.request_id), "req-1");
        assert_int_equal(store_claim(fx->api->store, &args, &op, &call), 0);

        ex = get(fx->api, "/v1/refunds/op-1", NULL);
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "in_flight");
        attempts = json_object_get(ex.json, "attempts");
        assert_int_equal(json_array_size(attempts), 1);
        a = json_array_get(attempts, 0);
        assert_string_equal(json_string_value(json_object_get(a, "kind")), "first");
        assert_int_equal(json_integer_value(json_object_get(a, "attempt")), 1);
        assert_string_equal(json_string_value(json_object_get(a, "request_id")), "req-1");
        assert_true(json_is_null(json_object_get(a, "end_wall")));
        assert_true(json_is_null(json_object_get(a, "class")));
        exchange_free(&ex);

        ex = get(fx->api, "/v1/calls", NULL);
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_array_size(json_object_get(ex.json, "calls")), 1);
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(json_object_get(ex.json, "calls"), 0),
                                              "operation_id")),
            "op-1");
        assert_int_equal(json_integer_value(json_object_get(ex.json, "next_since")), call.id);
        exchange_free(&ex);

        ex = get(fx->api, "/v1/calls", "since=999&limit=5");
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_array_size(json_object_get(ex.json, "calls")), 0);
        assert_int_equal(json_integer_value(json_object_get(ex.json, "next_since")), 999);
        exchange_free(&ex);

        static const char *const bad_query[] = {
            "since=-1",   "since=abc", "since=1x", "limit=0",
            "limit=1001", "since=%00", "limit=+5", "since=99999999999999999999"};
        for (size_t i = 0; i < sizeof(bad_query) / sizeof(bad_query[0]); i++) {
                ex = get(fx->api, "/v1/calls", bad_query[i]);
                expect_error(&ex, 400, "invalid_parameter");
                exchange_free(&ex);
        }
}

static void test_no_token_configured(void **state)
{
        struct fixture *fx = *state;
        struct exchange ex;

        /* loopback without a token file: /v1 is open (config refuses this
         * anywhere but loopback) */
        fx->api->need_token = false;
        ex = do_request(fx->api, "POST", "/v1/refunds", NULL, NULL, GOOD, strlen(GOOD));
        assert_int_equal(ex.status, 202);
        exchange_free(&ex);
        fx->api->need_token = true;
}

static void test_request_ids_differ(void **state)
{
        struct fixture *fx = *state;
        struct exchange a = do_request(fx->api, "GET", "/healthz", NULL, NULL, NULL, 0);
        struct exchange b = do_request(fx->api, "GET", "/healthz", NULL, NULL, NULL, 0);

        assert_string_not_equal(a.request_id, b.request_id);
        exchange_free(&a);
        exchange_free(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_healthz, setup, teardown),
            cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
            cmocka_unit_test_setup_teardown(test_accept_replay_conflict, setup, teardown),
            cmocka_unit_test_setup_teardown(test_hostile_bodies, setup, teardown),
            cmocka_unit_test_setup_teardown(test_long_fields, setup, teardown),
            cmocka_unit_test_setup_teardown(test_body_too_large, setup, teardown),
            cmocka_unit_test_setup_teardown(test_routes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_status_and_calls, setup, teardown),
            cmocka_unit_test_setup_teardown(test_no_token_configured, setup, teardown),
            cmocka_unit_test_setup_teardown(test_request_ids_differ, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
