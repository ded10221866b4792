/*
 * Unit tests of the intake API: api_handle() driven directly with requests
 * built here, over a real SQLite store in a temporary directory. Covers
 * every answer code of the routes, hostile bodies and paths, the error body
 * shape, and that nothing is stored on any error. The operating routes
 * (manual actions, provider events, paging and stats arguments, /metrics)
 * get the same treatment, and every refusal reads the operation and its
 * audit rows back from the store to show nothing changed.
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
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/tg_error.h"
#include "daemon/api.h"
#include "daemon/api_int.h"
#include "daemon/config.h"
#include "store/store.h"

#define TOKEN "t0ken-for-tests"
#define GOOD                                                                                       \
        "{\"operation_id\":\"op-1\",\"payment_id\":\"pay-1\",\"amount\":1250,\"currency\":"        \
        "\"EUR\"}"

struct fixture {
        char dir[64];
        char db[128];
        struct api *api;
        /* with two accounts: the list the api's config borrows (it must
         * outlive the api); settings NULL: the top-level values */
        struct tg_account accounts[2];
};

/* The fixture's api over a new SQLite store: one account (default), or
 * with `two` a second one, eu, with the same settings after it. */
static int setup_accounts(void **state, bool two)
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
        if (two) {
                /* a list of our own: config_defaults()' one account is a
                 * shared static entry, never written */
                fx->accounts[0] = cfg.accounts[0];
                fx->accounts[1] = cfg.accounts[0];
                snprintf(fx->accounts[1].name, sizeof(fx->accounts[1].name), "eu");
                cfg.accounts = fx->accounts;
                cfg.account_count = 2;
        }
        if (api_new(&cfg, &fx->api) != 0)
                return -1;
        *state = fx;
        return 0;
}

static int setup(void **state)
{
        return setup_accounts(state, false);
}

static int setup_two(void **state)
{
        return setup_accounts(state, true);
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

/* extra: one more header ({name, value}), or NULL. */
static struct exchange do_request_h(struct api *api, const char *method, const char *path,
                                    const char *query, const char *auth,
                                    const struct http_header *extra, const char *body, size_t len)
{
        struct http_header headers[4];
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
        for (size_t i = 0; extra && extra[i].name; i++) {
                assert_true(n < sizeof(headers) / sizeof(headers[0]));
                headers[n++] = extra[i];
        }
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

static struct exchange do_request(struct api *api, const char *method, const char *path,
                                  const char *query, const char *auth, const char *body, size_t len)
{
        return do_request_h(api, method, path, query, auth, NULL, body, len);
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

static int raw_get_body(struct api *api, const char *path, char *ret_type, size_t type_size,
                        bool *ret_has_ops, char **ret_body);

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

/* The count of auth failures of one reason, read from /metrics. */
static unsigned long long auth_failures(struct api *api, const char *reason)
{
        char type[128], want[96], *body = NULL;
        bool ops;
        unsigned long long n = 0;

        assert_int_equal(raw_get_body(api, "/metrics", type, sizeof(type), &ops, &body), 200);
        snprintf(want, sizeof(want), "tollgate_api_auth_failures_total{reason=\"%s\"} ", reason);
        const char *at = strstr(body, want);
        assert_non_null(at);
        n = strtoull(at + strlen(want), NULL, 10);
        free(body);
        return n;
}

/* A token followed by a NUL byte and more (a C string stops at the NUL:
 * only the token would be compared), and two Authorization headers (which
 * one counts?): both refused, 401, nothing stored; each refusal counted in
 * /metrics by its reason (the time of the compare stays CRYPTO_memcmp over
 * digests: test_auth's wrong tokens take the same path). */
static void test_auth_header_tricks(void **state)
{
        struct fixture *fx = *state;
        /* what http_server hands on for "Bearer <token>\0garbage" (the NUL
         * made a space: test_http_server checks that part) */
        struct http_header nul[] = {{"Authorization", "Bearer " TOKEN " garbage"}, {NULL, NULL}};
        struct http_header second[] = {{"Authorization", "Bearer wrong"}, {NULL, NULL}};
        struct http_header again[] = {{"AUTHORIZATION", "Bearer " TOKEN}, {NULL, NULL}};
        struct exchange ex;

        unsigned long long malformed = auth_failures(fx->api, "malformed");
        unsigned long long missing = auth_failures(fx->api, "missing");
        unsigned long long wrong = auth_failures(fx->api, "wrong");

        /* the token, a NUL, garbage: refused (only this header is sent) as
         * a token that is not ours */
        ex = do_request_h(fx->api, "POST", "/v1/refunds", NULL, NULL, nul, GOOD, strlen(GOOD));
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        /* the right token first and a wrong one second, and the other way */
        ex = do_request_h(fx->api, "POST", "/v1/refunds", NULL, "Bearer " TOKEN, second, GOOD,
                          strlen(GOOD));
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        ex = do_request_h(fx->api, "GET", "/v1/stats", NULL, "Bearer wrong", again, NULL, 0);
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        /* the right token twice is still two headers */
        ex = do_request_h(fx->api, "POST", "/v1/refunds", NULL, "Bearer " TOKEN, again, GOOD,
                          strlen(GOOD));
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 0);
        assert_int_equal(auth_failures(fx->api, "malformed"), malformed + 3);
        assert_int_equal(auth_failures(fx->api, "wrong"), wrong + 1);

        /* none, and a wrong one, each counted as what it is */
        ex = do_request(fx->api, "GET", "/v1/stats", NULL, NULL, NULL, 0);
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        ex = do_request(fx->api, "GET", "/v1/stats", NULL, "Bearer wrong", NULL, 0);
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        ex = do_request(fx->api, "GET", "/v1/stats", NULL, "Basic abc", NULL, 0);
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        assert_int_equal(auth_failures(fx->api, "missing"), missing + 1);
        assert_int_equal(auth_failures(fx->api, "wrong"), wrong + 2);
        assert_int_equal(auth_failures(fx->api, "malformed"), malformed + 4);

        /* one header, the token alone: accepted, and not counted */
        ex = post(fx->api, GOOD, strlen(GOOD));
        assert_int_equal(ex.status, 202);
        exchange_free(&ex);
        assert_int_equal(auth_failures(fx->api, "wrong"), wrong + 2);
}

/* The exit is held by a 429/503 whose Retry-After it knows (its samples
 * say held, and until when): a new refund would wait the rest of the hold
 * before any start, so admission counts it and refuses (503, Retry-After,
 * nothing stored) while the backlog alone would fit; /v1/stats shows it.
 * Found by probing: 202s for ~50 s with a projected wait of 0.4 s while
 * `held: true`. */
static void test_admission_during_known_hold(void **state)
{
        struct fixture *fx = *state;
        struct exit_sample *smp = calloc(1, sizeof(*smp));
        tg_wall_ms now = api_wall_now();
        struct exchange ex;

        assert_non_null(smp);
        smp->at = now;
        smp->epoch = 1;
        smp->held = true;
        snprintf(smp->figures, sizeof(smp->figures), "{\"hold_until\":%lld}",
                 (long long)(now + 600 * 1000));
        assert_int_equal(store_sample_put(fx->api->store, smp, now - 3600 * 1000, 0), 0);
        free(smp);

        ex = post(fx->api, GOOD, strlen(GOOD));
        expect_error(&ex, 503, "over_capacity");
        assert_true(atoi(ex.retry_after) >= 250); /* the hold's rest past max_wait (300 s) */
        assert_true(json_real_value(json_object_get(ex.json, "projected_wait_s")) > 590.0);
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 0);

        ex = get(fx->api, "/v1/stats", NULL);
        assert_int_equal(ex.status, 200);
        json_t *adm = json_object_get(ex.json, "admission");
        assert_true(json_real_value(json_object_get(adm, "hold_remaining_s")) > 590.0);
        assert_false(json_is_true(json_object_get(adm, "would_admit")));
        exchange_free(&ex);
}

/* exit.adaptive lowered the rate in force (the figures' "rate"): the
 * backlog is judged to drain at it, not at the configured ceiling. */
static void test_admission_at_the_rate_in_force(void **state)
{
        struct fixture *fx = *state;
        struct exit_sample *smp = calloc(1, sizeof(*smp));
        tg_wall_ms now = api_wall_now();
        struct exchange ex;

        ex = get(fx->api, "/v1/stats", NULL);
        assert_int_equal(ex.status, 200);
        double ceiling = json_number_value(
            json_object_get(json_object_get(ex.json, "admission"), "starts_per_second"));
        exchange_free(&ex);
        assert_true(ceiling == fx->api->cfg.exit.starts_per_second);

        assert_non_null(smp);
        smp->at = now;
        smp->epoch = 1;
        snprintf(smp->figures, sizeof(smp->figures), "{\"rate\":%g}", ceiling / 4);
        assert_int_equal(store_sample_put(fx->api->store, smp, now - 3600 * 1000, 0), 0);
        free(smp);
        api_admission_forget(fx->api); /* no cached figures */
        ex = get(fx->api, "/v1/stats", NULL);
        assert_int_equal(ex.status, 200);
        json_t *adm = json_object_get(ex.json, "admission");
        assert_true(json_number_value(json_object_get(adm, "starts_per_second")) == ceiling / 4);
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

/* The optional reason and metadata: stored, shown back (metadata with its
 * keys sorted), part of the payload for idempotency (another reason, or
 * the same metadata in another order, is a conflict or the same request). */
static void test_accept_reason_metadata(void **state)
{
        struct fixture *fx = *state;
        static const char with[] =
            "{\"operation_id\":\"op-m\",\"payment_id\":\"pay-1\",\"amount\":1250,"
            "\"currency\":\"EUR\",\"reason\":\"duplicate \\u00e9\","
            "\"metadata\":{\"order\":\"o-7\",\"desk\":\"b\"}}";
        static const char same[] =
            "{\"metadata\":{\"desk\":\"b\",\"order\":\"o-7\"},\"operation_id\":\"op-m\","
            "\"payment_id\":\"pay-1\",\"amount\":1250,\"currency\":\"EUR\","
            "\"reason\":\"duplicate \\u00e9\"}";
        static const char other_reason[] =
            "{\"operation_id\":\"op-m\",\"payment_id\":\"pay-1\",\"amount\":1250,"
            "\"currency\":\"EUR\",\"reason\":\"fraudulent\","
            "\"metadata\":{\"order\":\"o-7\",\"desk\":\"b\"}}";
        static const char no_metadata[] =
            "{\"operation_id\":\"op-m\",\"payment_id\":\"pay-1\",\"amount\":1250,"
            "\"currency\":\"EUR\",\"reason\":\"duplicate \\u00e9\"}";
        struct exchange ex = POST_LIT(fx->api, with);
        json_t *md;

        assert_int_equal(ex.status, 202);
        exchange_free(&ex);
        ex = POST_LIT(fx->api, same);
        assert_int_equal(ex.status, 200);
        exchange_free(&ex);
        ex = POST_LIT(fx->api, other_reason);
        expect_error(&ex, 409, "idempotency_conflict");
        exchange_free(&ex);
        ex = POST_LIT(fx->api, no_metadata);
        expect_error(&ex, 409, "idempotency_conflict");
        exchange_free(&ex);
        ex = get(fx->api, "/v1/refunds/op-m", NULL);
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "refund_reason")),
                            "duplicate \xc3\xa9");
        md = json_object_get(ex.json, "metadata");
        assert_true(json_is_object(md));
        assert_int_equal(json_object_size(md), 2);
        assert_string_equal(json_string_value(json_object_get(md, "order")), "o-7");
        exchange_free(&ex);
        /* each pair valid, but 1024 bytes of JSON at most: refused, nothing stored */
        {
                char body[4096], value[201];
                size_t n;
                memset(value, 'v', 200);
                value[200] = '\0';
                n = (size_t)snprintf(body, sizeof(body),
                                     "{\"operation_id\":\"op-big\",\"payment_id\":\"p\","
                                     "\"amount\":1,\"currency\":\"EUR\",\"metadata\":{");
                for (int i = 0; i < 6; i++)
                        n += (size_t)snprintf(body + n, sizeof(body) - n, "%s\"k%d\":\"%s\"",
                                              i ? "," : "", i, value);
                n += (size_t)snprintf(body + n, sizeof(body) - n, "}}");
                struct refund_request req;
                struct api_error err;
                /* over the fixture's body limit: the parser itself */
                assert_int_equal(api_parse_refund(body, n, 1700000000000LL, &req, &err), TG_EINVAL);
                assert_int_equal(err.status, 422);
                assert_string_equal(err.field, "metadata");
        }
        /* without them: null */
        ex = POST_LIT(fx->api, GOOD);
        exchange_free(&ex);
        ex = get(fx->api, "/v1/refunds/op-1", NULL);
        assert_true(json_is_null(json_object_get(ex.json, "refund_reason")));
        assert_true(json_is_null(json_object_get(ex.json, "metadata")));
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
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\",\"reason\":7}",
              422, "invalid_field", "reason"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\",\"reason\":\"a\\nb\"}",
              422, "invalid_field", "reason"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\",\"metadata\":[]}",
              422, "invalid_field", "metadata"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\",\"metadata\":{\"a\":1}}",
              422, "invalid_field", "metadata"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\",\"metadata\":{\"a b\":\"x\"}}",
              422, "invalid_field", "metadata"),
            B("{\"operation_id\":\"op-2\",\"payment_id\":\"p\",\"amount\":1,"
              "\"currency\":\"EUR\",\"metadata\":{\"a\":\"1\",\"b\":\"1\",\"c\":\"1\","
              "\"d\":\"1\",\"e\":\"1\",\"f\":\"1\",\"g\":\"1\",\"h\":\"1\",\"i\":\"1\","
              "\"j\":\"1\",\"k\":\"1\"}}",
              422, "invalid_field", "metadata"),
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

/* One call, as the dispatcher would record it: store (serving the account
 * to claim from) becomes the exit's owner and claims the oldest pending. */
static void claim_one(struct store *store, const char *request_id, struct op_record *op,
                      struct call_record *call)
{
        struct claim_args args;
        int64_t epoch = 0;

        assert_int_equal(store_owner_acquire(store, &epoch), 0);
        memset(&args, 0, sizeof(args));
        args.group = STORE_GROUP_FIRST;
        args.epoch = epoch;
        args.now = api_wall_now();
        args.start_mono = 1;
        args.in_flight_at_start = 1;
        snprintf(args.request_id, sizeof(args.request_id), "%s", request_id);
        assert_int_equal(store_claim(store, &args, op, call), 0);
}

static void test_status_and_calls(void **state)
{
        struct fixture *fx = *state;
        struct op_record op;
        struct call_record call;
        struct exchange ex;
        json_t *attempts, *a;

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
        claim_one(fx->api->store, "req-1", &op, &call);

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

/* ---- issue 5: manual review, provider events, stats, metrics ----------------------- */

/* What an operator action or a provider event could change, read back from
 * the store. */
struct op_snap {
        uint64_t ops;
        enum op_state state;
        enum manual_reason reason;
        tg_wall_ms updated_at, next_run_at;
        bool operator_resend;
        char refund_id[128];
        unsigned audits;
};

static int count_audit(const struct audit_record *a, void *userdata)
{
        (void)a;
        (*(unsigned *)userdata)++;
        return 0;
}

static struct op_snap snap(struct api *api, const char *id)
{
        struct op_snap sn;
        struct op_record op;

        memset(&sn, 0, sizeof(sn));
        sn.ops = ops_stored(api);
        assert_int_equal(store_get(api->store, id, &op), 0);
        sn.state = op.state;
        sn.reason = op.reason;
        sn.updated_at = op.updated_at;
        sn.next_run_at = op.next_run_at;
        sn.operator_resend = op.operator_resend;
        memcpy(sn.refund_id, op.refund_id, sizeof(sn.refund_id));
        assert_int_equal(store_list_audit(api->store, op.id, count_audit, &sn.audits), 0);
        return sn;
}

static void assert_unchanged(struct api *api, const char *id, const struct op_snap *before,
                             const char *what)
{
        struct op_snap now = snap(api, id);

        if (now.ops != before->ops || now.state != before->state || now.reason != before->reason ||
            now.updated_at != before->updated_at || now.next_run_at != before->next_run_at ||
            now.operator_resend != before->operator_resend ||
            strcmp(now.refund_id, before->refund_id) != 0 || now.audits != before->audits)
                fail_msg("%s: %s changed (state %s -> %s, audit rows %u -> %u)", what, id,
                         op_state_name(before->state), op_state_name(now.state), before->audits,
                         now.audits);
}

/* Accepts operation `id` through the API and moves it to manual (deadline),
 * as the dispatcher's sweep would. */
static void make_manual(struct api *api, const char *id)
{
        char body[256];
        struct exchange ex;
        unsigned n = 0;

        snprintf(body, sizeof(body),
                 "{\"operation_id\":\"%s\",\"payment_id\":\"pay\",\"amount\":5,"
                 "\"currency\":\"EUR\"}",
                 id);
        ex = post(api, body, strlen(body));
        assert_int_equal(ex.status, 202);
        exchange_free(&ex);
        assert_int_equal(
            store_sweep_deadlines(api->store, 0, api_wall_now() + 24 * 3600 * 1000LL, &n), 0);
        assert_int_equal(snap(api, id).state, OP_MANUAL);
}

static void make_pending(struct api *api, const char *id)
{
        char body[256];
        struct exchange ex;

        snprintf(body, sizeof(body),
                 "{\"operation_id\":\"%s\",\"payment_id\":\"pay\",\"amount\":5,"
                 "\"currency\":\"EUR\"}",
                 id);
        ex = post(api, body, strlen(body));
        assert_int_equal(ex.status, 202);
        exchange_free(&ex);
}

static struct exchange act_on(struct api *api, const char *id_and_action, const char *body,
                              size_t len)
{
        char path[640];
        int n = snprintf(path, sizeof(path), "/v1/manual/%s", id_and_action);

        assert_true(n > 0 && (size_t)n < sizeof(path));
        return do_request(api, "POST", path, NULL, "Bearer " TOKEN, body, len);
}

static void expect_case(struct exchange *ex, size_t i, const struct bad_body *c)
{
        const char *field = expect_error(ex, c->status, c->code);

        if (c->field && (!field || strcmp(field, c->field) != 0))
                fail_msg("case %zu: field %s, expected %s", i, field ? field : "null", c->field);
        if (!c->field && field)
                fail_msg("case %zu: field %s, expected null", i, field);
        assert_false(
            json_is_true(json_object_get(json_object_get(ex->json, "error"), "retryable")));
}

/* Hostile bodies to /resend and /resolve: each refused with the right code
 * and field, and the operation is still in manual with no audit row added. */
static void test_manual_action_bodies(void **state)
{
        struct fixture *fx = *state;
        static const struct bad_body both[] = {
            B("", 400, "invalid_json", NULL),
            B("{", 400, "invalid_json", NULL),
            B("[]", 400, "invalid_json", NULL),
            B("\"operator\"", 400, "invalid_json", NULL),
            B("{} {}", 400, "invalid_json", NULL),
            B("{\"operator\":\"a\",\"operator\":\"b\",\"reason\":\"c\"}", 400, "invalid_json",
              NULL),
            B("{\"operator\":\"a\xff\",\"reason\":\"c\"}", 400, "invalid_json", NULL),
            B("{\"operator\":\"a\xc3\",\"reason\":\"c\"}", 400, "invalid_json", NULL),
            B("{\"operator\":\"\xed\xa0\x80\",\"reason\":\"c\"}", 400, "invalid_json", NULL),
            B("{\"operator\":\"a\\u0000b\",\"reason\":\"c\"}", 400, "invalid_json", NULL),
            B("{\"operator\":\"a\0b\",\"reason\":\"c\"}", 400, "invalid_json", NULL),
            B("{\"operator\":\"a\",\"reason\":\"c\"}\0", 400, "invalid_json", NULL),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"n\":1e999}", 400, "invalid_json", NULL),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"n\":99999999999999999999999}", 400,
              "invalid_json", NULL),
            B("{\"reason\":\"c\"}", 422, "invalid_field", "operator"),
            B("{\"operator\":\"a\"}", 422, "invalid_field", "reason"),
            B("{}", 422, "invalid_field", "operator"),
            B("{\"operator\":7,\"reason\":\"c\"}", 422, "invalid_field", "operator"),
            B("{\"operator\":\"a\",\"reason\":null}", 422, "invalid_field", "reason"),
            B("{\"operator\":[\"a\"],\"reason\":\"c\"}", 422, "invalid_field", "operator"),
            B("{\"operator\":\"a\",\"reason\":{\"x\":1}}", 422, "invalid_field", "reason"),
            B("{\"operator\":true,\"reason\":\"c\"}", 422, "invalid_field", "operator"),
            B("{\"operator\":\"\",\"reason\":\"c\"}", 422, "invalid_field", "operator"),
            B("{\"operator\":\"a\",\"reason\":\"\"}", 422, "invalid_field", "reason"),
            B("{\"operator\":\"a\\nb\",\"reason\":\"c\"}", 422, "invalid_field", "operator"),
            B("{\"operator\":\"a\",\"reason\":\"c\\u007f\"}", 422, "invalid_field", "reason"),
            B("{\"operator\":\"a\",\"reason\":\"\\u001b[31m\"}", 422, "invalid_field", "reason"),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"priority\":1}", 422, "unknown_field",
              "priority"),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"\":1}", 422, "unknown_field", NULL),
        };
        static const struct bad_body resend_only[] = {
            B("{\"operator\":\"a\",\"reason\":\"c\",\"outcome\":\"failed\"}", 422, "unknown_field",
              "outcome"),
        };
        static const struct bad_body resolve_only[] = {
            B("{\"operator\":\"a\",\"reason\":\"c\"}", 422, "invalid_field", "outcome"),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"outcome\":\"SUCCEEDED\"}", 422,
              "invalid_field", "outcome"),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"outcome\":\"rejected\"}", 422,
              "invalid_field", "outcome"),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"outcome\":\"succeeded \"}", 422,
              "invalid_field", "outcome"),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"outcome\":\"succeeded\\u0000\"}", 400,
              "invalid_json", NULL),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"outcome\":\"\"}", 422, "invalid_field",
              "outcome"),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"outcome\":1}", 422, "invalid_field",
              "outcome"),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"outcome\":null}", 422, "invalid_field",
              "outcome"),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"outcome\":true}", 422, "invalid_field",
              "outcome"),
            B("{\"operator\":\"a\",\"reason\":\"c\",\"outcome\":\"failed\","
              "\"outcome\":\"succeeded\"}",
              400, "invalid_json", NULL),
        };
        struct op_snap before;
        struct exchange ex;

        make_manual(fx->api, "op-m");
        before = snap(fx->api, "op-m");
        for (size_t i = 0; i < sizeof(both) / sizeof(both[0]); i++) {
                const struct bad_body *c = &both[i];
                /* on resolve, a body that is otherwise valid still lacks outcome;
                 * the first problem found is the one reported */
                ex = act_on(fx->api, "op-m/resend", c->body, c->len);
                expect_case(&ex, i, c);
                exchange_free(&ex);
                ex = act_on(fx->api, "op-m/resolve", c->body, c->len);
                expect_error(&ex, c->status, c->code);
                exchange_free(&ex);
                assert_unchanged(fx->api, "op-m", &before, c->body);
        }
        for (size_t i = 0; i < sizeof(resend_only) / sizeof(resend_only[0]); i++) {
                ex = act_on(fx->api, "op-m/resend", resend_only[i].body, resend_only[i].len);
                expect_case(&ex, i, &resend_only[i]);
                exchange_free(&ex);
        }
        for (size_t i = 0; i < sizeof(resolve_only) / sizeof(resolve_only[0]); i++) {
                ex = act_on(fx->api, "op-m/resolve", resolve_only[i].body, resolve_only[i].len);
                expect_case(&ex, i, &resolve_only[i]);
                exchange_free(&ex);
        }
        assert_unchanged(fx->api, "op-m", &before, "outcome cases");
}

/* Giant texts: 201 bytes is refused, a body over api.max_body_bytes is 413,
 * and neither touches the operation; 200 bytes of UTF-8 is taken verbatim. */
static void test_manual_action_sizes(void **state)
{
        struct fixture *fx = *state;
        char text[256], body[1200], *big;
        struct op_snap before;
        struct exchange ex;
        json_t *audit, *last;

        make_manual(fx->api, "op-m");
        before = snap(fx->api, "op-m");

        memset(text, 'o', sizeof(text));
        text[201] = '\0';
        snprintf(body, sizeof(body), "{\"operator\":\"%s\",\"reason\":\"r\"}", text);
        ex = act_on(fx->api, "op-m/resend", body, strlen(body));
        assert_string_equal(expect_error(&ex, 422, "invalid_field"), "operator");
        exchange_free(&ex);
        snprintf(body, sizeof(body),
                 "{\"operator\":\"o\",\"reason\":\"%s\",\"outcome\":\"failed\"}", text);
        ex = act_on(fx->api, "op-m/resolve", body, strlen(body));
        assert_string_equal(expect_error(&ex, 422, "invalid_field"), "reason");
        exchange_free(&ex);

        big = malloc(8192);
        assert_non_null(big);
        memset(big, ' ', 8192);
        memcpy(big, "{\"operator\":\"a\",\"reason\":\"b\"}", 29);
        ex = act_on(fx->api, "op-m/resend", big, 8192);
        expect_error(&ex, 413, "body_too_large");
        exchange_free(&ex);
        free(big);
        assert_unchanged(fx->api, "op-m", &before, "giant texts");

        /* 100 two-byte characters: 200 bytes, the most allowed */
        for (size_t i = 0; i < 200; i += 2) {
                text[i] = '\xc3';
                text[i + 1] = '\xa9';
        }
        text[200] = '\0';
        snprintf(body, sizeof(body), "{\"operator\":\"%s\",\"reason\":\"r \\u00e9\"}", text);
        ex = act_on(fx->api, "op-m/resend", body, strlen(body));
        assert_int_equal(ex.status, 202);
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "retry_wait");
        audit = json_object_get(ex.json, "audit");
        last = json_array_get(audit, json_array_size(audit) - 1);
        assert_non_null(last);
        exchange_free(&ex);
        assert_int_equal(snap(fx->api, "op-m").audits, before.audits + 1);
}

/* Ids that could never have been accepted, and routes that are not the two
 * actions: 404 (or 405), and nothing anywhere changes. */
static void test_manual_path_tricks(void **state)
{
        struct fixture *fx = *state;
        static const char ok_resend[] = "{\"operator\":\"a\",\"reason\":\"b\"}";
        static const char ok_resolve[] =
            "{\"operator\":\"a\",\"reason\":\"b\",\"outcome\":\"succeeded\"}";
        static const char *const ids[] = {
            "../x",   "..",      ".",    "%2F",        "a%2Fb", "op-m%2F",
            "%00",    "op-m%00", "a b",  "op\xc3\xa9", "",      "op-m/",
            "op-m/x", "a/b",     "a\\b", "op-m?x=1",   "*",     "op-nope",
        };
        char long_id[200];
        struct op_snap before;
        struct exchange ex;
        char path[512];

        make_manual(fx->api, "op-m");
        make_pending(fx->api, "op-p");
        before = snap(fx->api, "op-m");
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
                snprintf(path, sizeof(path), "%s/resend", ids[i]);
                ex = act_on(fx->api, path, ok_resend, sizeof(ok_resend) - 1);
                expect_error(&ex, 404, "not_found");
                exchange_free(&ex);
                snprintf(path, sizeof(path), "%s/resolve", ids[i]);
                ex = act_on(fx->api, path, ok_resolve, sizeof(ok_resolve) - 1);
                expect_error(&ex, 404, "not_found");
                exchange_free(&ex);
                if (ids[i][0] == '\0')
                        continue; /* GET /v1/manual/ is the list... of nothing: see below */
                snprintf(path, sizeof(path), "/v1/manual/%s", ids[i]);
                ex = get(fx->api, path, NULL);
                expect_error(&ex, 404, "not_found");
                exchange_free(&ex);
        }
        /* 128 characters is a valid (unknown) id; 129 can never exist */
        memset(long_id, 'a', sizeof(long_id));
        memcpy(long_id + 128, "/resend", 8);
        ex = act_on(fx->api, long_id, ok_resend, sizeof(ok_resend) - 1);
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);
        memset(long_id, 'a', sizeof(long_id));
        memcpy(long_id + 129, "/resend", 8);
        ex = act_on(fx->api, long_id, ok_resend, sizeof(ok_resend) - 1);
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);
        memset(long_id, 'a', sizeof(long_id));
        long_id[sizeof(long_id) - 1] = '\0';
        ex = act_on(fx->api, long_id, ok_resend, sizeof(ok_resend) - 1);
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);

        /* the action's name is exact */
        static const char *const actions[] = {"op-m/RESEND",  "op-m/resend/", "op-m/resend/x",
                                              "op-m//resend", "op-m/resendx", "op-m/delete"};
        for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
                ex = act_on(fx->api, actions[i], ok_resend, sizeof(ok_resend) - 1);
                expect_error(&ex, 404, "not_found");
                exchange_free(&ex);
        }
        ex = do_request(fx->api, "GET", "/v1/manual/op-m/resend", NULL, "Bearer " TOKEN, NULL, 0);
        expect_error(&ex, 405, "method_not_allowed");
        assert_string_equal(ex.allow, "POST");
        exchange_free(&ex);
        ex = do_request(fx->api, "DELETE", "/v1/manual/op-m", NULL, "Bearer " TOKEN, NULL, 0);
        expect_error(&ex, 405, "method_not_allowed");
        exchange_free(&ex);
        ex = do_request(fx->api, "POST", "/v1/manual", NULL, "Bearer " TOKEN, ok_resend,
                        sizeof(ok_resend) - 1);
        expect_error(&ex, 405, "method_not_allowed");
        exchange_free(&ex);
        /* no token: 401 before the route is even looked at */
        ex = do_request(fx->api, "POST", "/v1/manual/op-m/resend", NULL, NULL, ok_resend,
                        sizeof(ok_resend) - 1);
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        ex = do_request(fx->api, "POST", "/v1/manual/op-m/resolve", NULL, "Bearer nope", ok_resolve,
                        sizeof(ok_resolve) - 1);
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        assert_unchanged(fx->api, "op-m", &before, "path tricks");

        /* an operation not in manual is refused, not changed */
        struct op_snap pending = snap(fx->api, "op-p");
        ex = act_on(fx->api, "op-p/resend", ok_resend, sizeof(ok_resend) - 1);
        expect_error(&ex, 409, "not_manual");
        exchange_free(&ex);
        ex = act_on(fx->api, "op-p/resolve", ok_resolve, sizeof(ok_resolve) - 1);
        expect_error(&ex, 409, "not_manual");
        exchange_free(&ex);
        assert_unchanged(fx->api, "op-p", &pending, "not manual");
        assert_unchanged(fx->api, "op-m", &before, "not manual");
}

/* The valid actions, once each: a resolve closes and is audited; a second
 * action on a closed operation is refused and changes nothing. */
static void test_manual_actions_once(void **state)
{
        struct fixture *fx = *state;
        static const char resolve[] =
            "{\"outcome\":\"failed\",\"reason\":\"provider says no\",\"operator\":\"zo\xc3\xab\"}";
        static const char resend[] = "{\"operator\":\"a\",\"reason\":\"b\"}";
        struct op_snap before, after;
        struct exchange ex;
        json_t *audit, *row;

        make_manual(fx->api, "op-m");
        before = snap(fx->api, "op-m");
        ex = act_on(fx->api, "op-m/resolve", resolve, sizeof(resolve) - 1);
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "rejected");
        audit = json_object_get(ex.json, "audit");
        row = json_array_get(audit, json_array_size(audit) - 1);
        assert_non_null(row);
        /* the operator's UTF-8 name and reason, verbatim */
        assert_string_equal(json_string_value(json_object_get(row, "action")), "resolve");
        assert_string_equal(json_string_value(json_object_get(row, "operator")), "zo\xc3\xab");
        assert_string_equal(json_string_value(json_object_get(row, "reason")), "provider says no");
        exchange_free(&ex);
        after = snap(fx->api, "op-m");
        assert_int_equal(after.state, OP_REJECTED);
        assert_int_equal(after.audits, before.audits + 1);
        assert_int_equal(after.ops, before.ops);

        ex = act_on(fx->api, "op-m/resolve", resolve, sizeof(resolve) - 1);
        expect_error(&ex, 409, "not_manual");
        exchange_free(&ex);
        ex = act_on(fx->api, "op-m/resend", resend, sizeof(resend) - 1);
        expect_error(&ex, 409, "not_manual");
        exchange_free(&ex);
        assert_unchanged(fx->api, "op-m", &after, "closed");
}

/* GET /v1/manual paging arguments: anything but an integer in range is 400
 * with the parameter named; valid pages walk the list. */
static void test_manual_list_params(void **state)
{
        struct fixture *fx = *state;
        static const struct {
                const char *query, *field;
        } bad[] = {
            {"limit=-1", "limit"},
            {"limit=0", "limit"},
            {"limit=201", "limit"},
            {"limit=abc", "limit"},
            {"limit=", "limit"},
            {"limit=1.5", "limit"},
            {"limit=1e2", "limit"},
            {"limit=+5", "limit"},
            {"limit=%2D1", "limit"},
            {"limit=%00", "limit"},
            {"limit=99999999999999999999", "limit"},
            {"limit=9223372036854775807", "limit"},
            {"limit=18446744073709551617", "limit"},
            {"limit=5%00", "limit"},
            {"limit=0x10", "limit"},
            {"after=-1", "after"},
            {"after=abc", "after"},
            {"after=99999999999999999999", "after"},
            {"after=1%20", "after"},
            {"after=%", "after"},
            {"reason=bogus", "reason"},
            {"reason=", "reason"},
            {"reason=none", "reason"},
            {"reason=deadline%00", "reason"},
            {"reason=DEADLINE", "reason"},
        };
        struct exchange ex;
        int64_t next;

        make_manual(fx->api, "op-m1");
        make_manual(fx->api, "op-m2");
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *field;
                ex = get(fx->api, "/v1/manual", bad[i].query);
                field = expect_error(&ex, 400, "invalid_parameter");
                if (!field || strcmp(field, bad[i].field) != 0)
                        fail_msg("%s: field %s", bad[i].query, field ? field : "null");
                exchange_free(&ex);
        }

        ex = get(fx->api, "/v1/manual", "limit=1");
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_array_size(json_object_get(ex.json, "items")), 1);
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(json_object_get(ex.json, "items"), 0),
                                              "operation_id")),
            "op-m1");
        assert_true(json_is_integer(json_object_get(ex.json, "next_after")));
        next = json_integer_value(json_object_get(ex.json, "next_after"));
        exchange_free(&ex);
        char q[64];
        snprintf(q, sizeof(q), "limit=200&after=%lld", (long long)next);
        ex = get(fx->api, "/v1/manual", q);
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_array_size(json_object_get(ex.json, "items")), 1);
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(json_object_get(ex.json, "items"), 0),
                                              "operation_id")),
            "op-m2");
        assert_true(json_is_null(json_object_get(ex.json, "next_after")));
        exchange_free(&ex);
        ex = get(fx->api, "/v1/manual", "after=9223372036854775807&reason=deadline");
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_array_size(json_object_get(ex.json, "items")), 0);
        exchange_free(&ex);
        ex = get(fx->api, "/v1/manual", "reason=attempts_exhausted");
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_array_size(json_object_get(ex.json, "items")), 0);
        exchange_free(&ex);
        ex = get(fx->api, "/v1/manual", "reason=deadline&unknown=1&limit=2");
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_array_size(json_object_get(ex.json, "items")), 2);
        exchange_free(&ex);
}

/* The owner of a manual case: assign, re-assign, unassign through the API,
 * each audited; refused bodies and states change nothing; the list filters
 * by owner and shows it. */
static void test_manual_assign(void **state)
{
        struct fixture *fx = *state;
        static const struct bad_body bad[] = {
            {"{\"operator\":\"lead\"}", 0, 422, "invalid_field", "assignee"},
            {"{\"assignee\":\"bob\"}", 0, 422, "invalid_field", "operator"},
            {"{\"operator\":\"lead\",\"assignee\":\"\"}", 0, 422, "invalid_field", "assignee"},
            {"{\"operator\":\"lead\",\"assignee\":7}", 0, 422, "invalid_field", "assignee"},
            {"{\"operator\":\"lead\",\"assignee\":\"b\\u0001\"}", 0, 422, "invalid_field",
             "assignee"},
            {"{\"operator\":\"lead\",\"assignee\":\"bob\",\"x\":1}", 0, 422, "unknown_field", "x"},
            {"[]", 0, 400, "invalid_json", NULL},
        };
        static const char to_bob[] = "{\"operator\":\"lead\",\"assignee\":\"bob\"}";
        static const char to_ann[] =
            "{\"operator\":\"lead\",\"assignee\":\"ann\",\"reason\":\"bob is out\"}";
        static const char to_none[] = "{\"operator\":\"lead\",\"assignee\":null}";
        struct op_snap before;
        struct exchange ex;

        make_manual(fx->api, "op-a1");
        make_manual(fx->api, "op-a2");
        make_pending(fx->api, "op-live");
        before = snap(fx->api, "op-a1");
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ex = act_on(fx->api, "op-a1/assign", bad[i].body, strlen(bad[i].body));
                (void)bad[i].len; /* NUL-terminated here */
                expect_case(&ex, i, &bad[i]);
                exchange_free(&ex);
        }
        assert_unchanged(fx->api, "op-a1", &before, "bad assign bodies");
        ex = act_on(fx->api, "op-live/assign", to_bob, sizeof(to_bob) - 1);
        expect_error(&ex, 409, "not_manual");
        exchange_free(&ex);
        ex = do_request(fx->api, "GET", "/v1/manual/op-a1/assign", NULL, "Bearer " TOKEN, NULL, 0);
        expect_error(&ex, 405, "method_not_allowed");
        exchange_free(&ex);

        ex = act_on(fx->api, "op-a1/assign", to_bob, sizeof(to_bob) - 1);
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "assignee")), "bob");
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "manual");
        exchange_free(&ex);
        ex = act_on(fx->api, "op-a1/assign", to_ann, sizeof(to_ann) - 1);
        assert_int_equal(ex.status, 200);
        json_t *audit = json_object_get(ex.json, "audit");
        json_t *row = json_array_get(audit, json_array_size(audit) - 1);
        assert_string_equal(json_string_value(json_object_get(row, "action")), "assign");
        assert_string_equal(json_string_value(json_object_get(row, "reason")), "bob is out");
        assert_string_equal(json_string_value(json_object_get(row, "detail")),
                            "assigned to ann (was bob)");
        exchange_free(&ex);
        assert_int_equal(snap(fx->api, "op-a1").audits, before.audits + 2);

        /* the list: by owner, nobody's, and the owner in every item */
        ex = get(fx->api, "/v1/manual", "assignee=ann");
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_array_size(json_object_get(ex.json, "items")), 1);
        assert_string_equal(json_string_value(json_object_get(
                                json_array_get(json_object_get(ex.json, "items"), 0), "assignee")),
                            "ann");
        exchange_free(&ex);
        ex = get(fx->api, "/v1/manual", "unassigned=true");
        assert_int_equal(json_array_size(json_object_get(ex.json, "items")), 1);
        json_t *item = json_array_get(json_object_get(ex.json, "items"), 0);
        assert_string_equal(json_string_value(json_object_get(item, "operation_id")), "op-a2");
        assert_true(json_is_null(json_object_get(item, "assignee")));
        exchange_free(&ex);
        ex = get(fx->api, "/v1/manual", "assignee=bob");
        assert_int_equal(json_array_size(json_object_get(ex.json, "items")), 0);
        exchange_free(&ex);
        static const char *const bad_q[] = {"assignee=", "unassigned=1",
                                            "unassigned=", "assignee=ann&unassigned=true",
                                            "assignee=a%01"};
        for (size_t i = 0; i < sizeof(bad_q) / sizeof(bad_q[0]); i++) {
                ex = get(fx->api, "/v1/manual", bad_q[i]);
                expect_error(&ex, 400, "invalid_parameter");
                exchange_free(&ex);
        }
        ex = act_on(fx->api, "op-a1/assign", to_none, sizeof(to_none) - 1);
        assert_int_equal(ex.status, 200);
        assert_true(json_is_null(json_object_get(ex.json, "assignee")));
        exchange_free(&ex);
        ex = get(fx->api, "/v1/manual", "unassigned=true");
        assert_int_equal(json_array_size(json_object_get(ex.json, "items")), 2);
        exchange_free(&ex);
}

static struct exchange cancel(struct api *api, const char *id, const char *body)
{
        char path[256];

        snprintf(path, sizeof(path), "/v1/refunds/%s/cancel", id);
        return do_request(api, "POST", path, NULL, "Bearer " TOKEN, body, body ? strlen(body) : 0);
}

/* POST /v1/refunds/{id}/cancel: before any call, cancelled and audited;
 * again, the same answer; after a call, 409 with the reason; never-accepted,
 * 404; bad bodies change nothing. */
static void test_cancel(void **state)
{
        struct fixture *fx = *state;
        struct op_snap before;
        struct exchange ex;
        struct op_record op;
        struct call_record call;
        struct claim_args a;
        int64_t epoch = 0;

        make_pending(fx->api, "op-c1");
        make_pending(fx->api, "op-c2");
        before = snap(fx->api, "op-c1");
        ex = cancel(fx->api, "op-c1", "{\"operator\":\"shop\",\"x\":1}");
        expect_error(&ex, 422, "unknown_field");
        exchange_free(&ex);
        ex = cancel(fx->api, "op-c1", "{\"reason\":\"\"}");
        expect_error(&ex, 422, "invalid_field");
        exchange_free(&ex);
        assert_unchanged(fx->api, "op-c1", &before, "bad cancel bodies");

        ex = cancel(fx->api, "op-c1", "{\"operator\":\"shop\",\"reason\":\"order voided\"}");
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "cancelled");
        json_t *audit = json_object_get(ex.json, "audit");
        json_t *row = json_array_get(audit, json_array_size(audit) - 1);
        assert_string_equal(json_string_value(json_object_get(row, "action")), "cancel");
        assert_string_equal(json_string_value(json_object_get(row, "operator")), "shop");
        assert_string_equal(json_string_value(json_object_get(row, "reason")), "order voided");
        exchange_free(&ex);
        struct op_snap after = snap(fx->api, "op-c1");
        assert_int_equal(after.state, OP_CANCELLED);
        assert_int_equal(after.audits, before.audits + 1);
        /* again, with no body: the same answer, nothing new */
        ex = cancel(fx->api, "op-c1", NULL);
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "cancelled");
        exchange_free(&ex);
        assert_unchanged(fx->api, "op-c1", &after, "cancelled again");

        /* claimed by the exit (its attempt recorded as sent): 409 */
        assert_int_equal(store_owner_acquire(fx->api->store, &epoch), 0);
        memset(&a, 0, sizeof(a));
        a.group = STORE_GROUP_FIRST;
        a.epoch = epoch;
        a.now = api_wall_now();
        snprintf(a.request_id, sizeof(a.request_id), "req-c2");
        assert_int_equal(store_claim(fx->api->store, &a, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "op-c2");
        before = snap(fx->api, "op-c2");
        ex = cancel(fx->api, "op-c2", NULL);
        expect_error(&ex, 409, "already_sent");
        exchange_free(&ex);
        assert_unchanged(fx->api, "op-c2", &before, "cancel after the claim");
        struct settle_args sa;
        memset(&sa, 0, sizeof(sa));
        sa.call_id = call.id;
        sa.op_id = op.id;
        sa.epoch = epoch;
        sa.sent = true;
        sa.cls = TG_CLASS_SUCCEEDED;
        sa.http_status = 201;
        sa.now = api_wall_now();
        sa.decision.next = OP_SUCCEEDED;
        assert_int_equal(store_settle(fx->api->store, &sa), 0);
        ex = cancel(fx->api, "op-c2", NULL);
        expect_error(&ex, 409, "already_final");
        exchange_free(&ex);

        ex = cancel(fx->api, "op-never", NULL);
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);
        ex = cancel(fx->api, "..", NULL);
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);
        ex = do_request(fx->api, "GET", "/v1/refunds/op-c1/cancel", NULL, "Bearer " TOKEN, NULL, 0);
        expect_error(&ex, 405, "method_not_allowed");
        exchange_free(&ex);
        ex = do_request(fx->api, "POST", "/v1/refunds/op-c1/cancel", NULL, NULL, NULL, 0);
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        ex = do_request(fx->api, "POST", "/v1/refunds/op-c1/other", NULL, "Bearer " TOKEN, NULL, 0);
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);
}

/* The caller's deadline at intake: an RFC 3339 time or a budget, bounded by
 * retry.deadline_s; bad ones are 422 and store nothing. A traceparent
 * header is kept, else a trace is started. */
static void test_intake_deadline_and_trace(void **state)
{
        struct fixture *fx = *state;
        static const char *const bad[] = {
            "\"deadline\":\"tomorrow\"",
            "\"deadline\":\"2001-01-01T00:00:00Z\"",
            "\"deadline\":1700000000",
            "\"budget_s\":0",
            "\"budget_s\":-5",
            "\"budget_s\":\"30\"",
            "\"budget_s\":1e12",
            "\"budget_s\":0.0001",
            "\"budget_s\":30,\"deadline\":\"2999-01-01T00:00:00Z\"",
        };
        static const struct http_header tp[] = {
            {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
            {NULL, NULL}};
        static const struct http_header junk[] = {{"traceparent", "00-nonsense"}, {NULL, NULL}};
        char body[512];
        struct exchange ex;
        struct op_record op;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(body, sizeof(body),
                         "{\"operation_id\":\"op-d\",\"payment_id\":\"p\",\"amount\":5,"
                         "\"currency\":\"EUR\",%s}",
                         bad[i]);
                ex = post(fx->api, body, strlen(body));
                const char *field = expect_error(&ex, 422, "invalid_field");
                if (!field || (strcmp(field, "deadline") != 0 && strcmp(field, "budget_s") != 0))
                        fail_msg("%s: field %s", bad[i], field ? field : "null");
                exchange_free(&ex);
        }
        assert_int_equal(ops_stored(fx->api), 0);

        /* a budget: deadline now + 30 s, the caller's */
        tg_wall_ms t0 = api_wall_now();
        static const char budget[] = "{\"operation_id\":\"op-b\",\"payment_id\":\"p\",\"amount\":5,"
                                     "\"currency\":\"EUR\",\"budget_s\":30.5}";
        ex = do_request_h(fx->api, "POST", "/v1/refunds", NULL, "Bearer " TOKEN, tp, budget,
                          sizeof(budget) - 1);
        assert_int_equal(ex.status, 202);
        tg_wall_ms at = json_integer_value(json_object_get(ex.json, "deadline_at"));
        assert_true(at >= t0 + 30500 && at <= api_wall_now() + 30500);
        assert_string_equal(json_string_value(json_object_get(ex.json, "trace_id")),
                            "4bf92f3577b34da6a3ce929d0e0e4736");
        exchange_free(&ex);
        assert_int_equal(store_get(fx->api->store, "op-b", &op), 0);
        assert_int_equal(op.deadline_at, at);
        assert_int_equal(op.caller_deadline_at, at);
        assert_string_equal(op.traceparent, tp[0].value);

        /* a deadline later than ours: ours (retry.deadline_s) wins */
        static const char far[] = "{\"operation_id\":\"op-f\",\"payment_id\":\"p\",\"amount\":5,"
                                  "\"currency\":\"EUR\",\"deadline\":\"2999-01-01T00:00:00Z\"}";
        ex = do_request_h(fx->api, "POST", "/v1/refunds", NULL, "Bearer " TOKEN, junk, far,
                          sizeof(far) - 1);
        assert_int_equal(ex.status, 202);
        exchange_free(&ex);
        assert_int_equal(store_get(fx->api->store, "op-f", &op), 0);
        assert_true(op.deadline_at <= api_wall_now() + fx->api->cfg.policy.deadline_ms);
        assert_int_equal(op.caller_deadline_at, 0);
        /* a junk traceparent is ignored: a new trace, valid */
        assert_int_equal(strlen(op.traceparent), TG_TRACEPARENT_MAX);
        assert_true(strcmp(op.traceparent + 3, tp[0].value + 3) != 0);
        ex = get(fx->api, "/v1/refunds/op-f", NULL);
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "traceparent")),
                            op.traceparent);
        assert_true(json_is_null(json_object_get(ex.json, "caller_deadline_at")));
        exchange_free(&ex);
}

/* GET /v1/stats?minutes=N: N in [1, 60], else 400 naming minutes. */
static void test_stats_params(void **state)
{
        struct fixture *fx = *state;
        static const char *const bad[] = {
            "minutes=0",   "minutes=-1", "minutes=61",
            "minutes=abc", "minutes=",   "minutes=1.5",
            "minutes=%00", "minutes=+1", "minutes=99999999999999999999",
            "minutes=1e1", "minutes=5x",
        };
        struct exchange ex;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *field;
                ex = get(fx->api, "/v1/stats", bad[i]);
                field = expect_error(&ex, 400, "invalid_parameter");
                if (!field || strcmp(field, "minutes") != 0)
                        fail_msg("%s: field %s", bad[i], field ? field : "null");
                exchange_free(&ex);
        }
        static const char *const good[] = {NULL, "minutes=1", "minutes=60", "minutes=060"};
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                ex = get(fx->api, "/v1/stats", good[i]);
                assert_int_equal(ex.status, 200);
                exchange_free(&ex);
        }
        ex = do_request(fx->api, "GET", "/v1/stats", NULL, NULL, NULL, 0);
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        ex = do_request(fx->api, "POST", "/v1/stats", NULL, "Bearer " TOKEN, "{}", 2);
        expect_error(&ex, 405, "method_not_allowed");
        exchange_free(&ex);
}

/* GET /metrics: open by default, the bearer token when
 * api.metrics_need_token is set. */
static int raw_get_full(struct api *api, const char *method, const char *path, const char *auth,
                        char *ret_type, size_t type_size, bool *ret_has_ops, char **ret_body)
{
        struct http_header h = {"Authorization", auth};
        struct http_request req;
        struct http_response res;
        int status;

        memset(&req, 0, sizeof(req));
        req.method = method;
        req.path = path;
        req.query = "";
        req.headers = &h;
        req.header_count = auth ? 1 : 0;
        req.body = "";
        http_response_init(&res);
        assert_int_equal(api_handle(api, &req, &res), 0);
        status = res.status;
        snprintf(ret_type, type_size, "%s", res.content_type);
        *ret_has_ops = false;
        for (size_t i = 0; res.body && i + 20 <= res.body_len && !*ret_has_ops; i++)
                *ret_has_ops = memcmp(res.body + i, "tollgate_operations{", 20) == 0;
        if (ret_body) {
                *ret_body = strndup(res.body ? res.body : "", res.body_len);
                assert_non_null(*ret_body);
        }
        http_response_release(&res);
        return status;
}

static int raw_get(struct api *api, const char *method, const char *path, const char *auth,
                   char *ret_type, size_t type_size, bool *ret_has_ops)
{
        return raw_get_full(api, method, path, auth, ret_type, type_size, ret_has_ops, NULL);
}

/* GET path without a token; *ret_body: the whole body (free it). */
static int raw_get_body(struct api *api, const char *path, char *ret_type, size_t type_size,
                        bool *ret_has_ops, char **ret_body)
{
        return raw_get_full(api, "GET", path, NULL, ret_type, type_size, ret_has_ops, ret_body);
}

/* /metrics counts requests by route template: every route the API answers
 * has its own (the test of openapi.yaml reads them back), and a path no
 * route has is "other", never a raw path. */
static void test_route_templates(void **state)
{
        static const struct {
                const char *path, *route;
        } cases[] = {
            {"/healthz", "/healthz"},
            {"/v1/refunds", "/v1/refunds"},
            {"/v1/refunds:batch", "/v1/refunds:batch"},
            {"/v1/refunds/op-1", "/v1/refunds/{operation_id}"},
            {"/v1/refunds/op-1/cancel", "/v1/refunds/{operation_id}/cancel"},
            {"/v1/refunds/op-1/cancel/x", "other"},
            {"/v1/refunds/op-1/nope", "other"},
            {"/v1/refunds//cancel", "other"},
            {"/v1/refunds/", "other"},
            {"/v1/manual", "/v1/manual"},
            {"/v1/manual/op-1", "/v1/manual/{operation_id}"},
            {"/v1/manual/op-1/resend", "/v1/manual/{operation_id}/resend"},
            {"/v1/manual/op-1/resolve", "/v1/manual/{operation_id}/resolve"},
            {"/v1/manual/op-1/assign", "/v1/manual/{operation_id}/assign"},
            {"/v1/manual/op-1/unassign", "other"},
            {"/v1/manual//assign", "other"},
            {"/v1/provider-events", "/v1/provider-events"},
            {"/v1/provider-events/eu", "/v1/provider-events/{account}"},
            {"/v1/provider-events/", "other"},
            {"/v1/provider-events/eu/x", "other"},
            {"/ui", "other"},
            {NULL, "other"},
        };
        static const char unassign[] = "{\"operator\":\"ann\",\"assignee\":null}";
        struct fixture *fx = *state;
        struct exchange ex;
        char type[128], *body = NULL;
        bool ops;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                assert_string_equal(api_route_name(api_route_of(cases[i].path)), cases[i].route);
        /* every template names itself, with an id in its place */
        for (int r = 0; r < API_ROUTE_OTHER; r++) {
                char path[128];
                const char *t = api_route_name((enum api_route)r), *brace = strchr(t, '{');
                if (brace)
                        snprintf(path, sizeof(path), "%.*sop-1%s", (int)(brace - t), t,
                                 strchr(brace, '}') + 1);
                else
                        snprintf(path, sizeof(path), "%s", t);
                assert_int_equal(api_route_of(path), r);
        }
        /* and /metrics shows the new routes under their own names */
        ex =
            do_request(fx->api, "POST", "/v1/refunds/ghost/cancel", NULL, "Bearer " TOKEN, NULL, 0);
        assert_int_equal(ex.status, 404);
        exchange_free(&ex);
        ex = act_on(fx->api, "ghost/assign", unassign, sizeof(unassign) - 1);
        assert_int_equal(ex.status, 404);
        exchange_free(&ex);
        assert_int_equal(raw_get_body(fx->api, "/metrics", type, sizeof(type), &ops, &body), 200);
        assert_non_null(strstr(body, "tollgate_api_requests_total{route=\"/v1/refunds/"
                                     "{operation_id}/cancel\",code=\"404\"} 1\n"));
        assert_non_null(strstr(body, "tollgate_api_requests_total{route=\"/v1/manual/"
                                     "{operation_id}/assign\",code=\"404\"} 1\n"));
        free(body);
}

static void test_metrics_token(void **state)
{
        struct fixture *fx = *state;
        char type[128];
        bool ops;

        /* default: no token needed (a token, right or wrong, is ignored) */
        assert_int_equal(raw_get(fx->api, "GET", "/metrics", NULL, type, sizeof(type), &ops), 200);
        assert_non_null(strstr(type, "text/plain"));
        assert_true(ops);
        assert_int_equal(
            raw_get(fx->api, "GET", "/metrics", "Bearer wrong", type, sizeof(type), &ops), 200);
        assert_int_equal(raw_get(fx->api, "POST", "/metrics", NULL, type, sizeof(type), &ops), 405);
        assert_int_equal(raw_get(fx->api, "GET", "/metrics/", NULL, type, sizeof(type), &ops), 404);
        assert_int_equal(
            raw_get(fx->api, "GET", "/v1/metrics", "Bearer " TOKEN, type, sizeof(type), &ops), 404);

        fx->api->cfg.api_metrics_need_token = true;
        static const char *const bad[] = {NULL, "", "Bearer", "Bearer wrong", "Bearer " TOKEN "x",
                                          TOKEN};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(
                    raw_get(fx->api, "GET", "/metrics", bad[i], type, sizeof(type), &ops), 401);
                assert_false(ops);
        }
        /* method is checked after the token: nothing is revealed */
        assert_int_equal(raw_get(fx->api, "POST", "/metrics", NULL, type, sizeof(type), &ops), 401);
        assert_int_equal(
            raw_get(fx->api, "GET", "/metrics", "Bearer " TOKEN, type, sizeof(type), &ops), 200);
        assert_true(ops);
        /* /healthz never needs it */
        assert_int_equal(raw_get(fx->api, "GET", "/healthz", NULL, type, sizeof(type), &ops), 200);
}

/* ---- POST /v1/provider-events -------------------------------------------------------- */

#define WEBHOOK_SECRET "whsec-for-tests"

static void sign(const char *secret, const char *body, size_t len, char *out, size_t size)
{
        static const char digits[] = "0123456789abcdef";
        unsigned char mac[API_MAC_LEN];
        unsigned int n = 0;
        char hex[2 * API_MAC_LEN + 1];

        assert_non_null(HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)body,
                             len, mac, &n));
        assert_int_equal(n, API_MAC_LEN);
        for (size_t i = 0; i < API_MAC_LEN; i++) {
                hex[2 * i] = digits[mac[i] >> 4];
                hex[2 * i + 1] = digits[mac[i] & 0xf];
        }
        hex[2 * API_MAC_LEN] = '\0';
        snprintf(out, size, "sha256=%s", hex);
}

/* sig NULL: no X-Signature header. */
static struct exchange event(struct api *api, const char *sig, const char *body, size_t len)
{
        struct http_header extra[] = {{"X-Signature", sig}, {NULL, NULL}};

        return do_request_h(api, "POST", "/v1/provider-events", NULL, NULL, sig ? extra : NULL,
                            body, len);
}

static struct exchange signed_event(struct api *api, const char *body)
{
        char sig[128];

        sign(WEBHOOK_SECRET, body, strlen(body), sig, sizeof(sig));
        return event(api, sig, body, strlen(body));
}

static void test_provider_event_signature(void **state)
{
        struct fixture *fx = *state;
        static const char body[] =
            "{\"operation_id\":\"op-m\",\"status\":\"succeeded\",\"refund_id\":\"re_1\"}";
        static const char other[] =
            "{\"operation_id\":\"op-m\",\"status\":\"failed\",\"refund_id\":\"re_1\"}";
        char good[128], bad[256], other_sig[128], upper[128];
        struct op_snap before;
        struct exchange ex;

        make_manual(fx->api, "op-m");
        before = snap(fx->api, "op-m");
        sign(WEBHOOK_SECRET, body, sizeof(body) - 1, good, sizeof(good));

        /* no secret configured: the route does not exist, whatever is sent */
        ex = event(fx->api, good, body, sizeof(body) - 1);
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);
        assert_unchanged(fx->api, "op-m", &before, "no secret");

        snprintf(fx->api->cfg.provider_webhook_secret, sizeof(fx->api->cfg.provider_webhook_secret),
                 "%s", WEBHOOK_SECRET);
        sign(WEBHOOK_SECRET, other, sizeof(other) - 1, other_sig, sizeof(other_sig));
        sign("whsec-for-test", body, sizeof(body) - 1, bad, sizeof(bad)); /* another secret */
        snprintf(upper, sizeof(upper), "SHA256=%s", good + 7);

        const char *const forged[] = {
            NULL,                                     /* no header */
            "",        "sha256=", "sha256", good + 7, /* the hex without its prefix */
            upper,                                    /* the prefix is lower case */
            other_sig,                                /* a valid signature over another body */
            bad,                                      /* another secret */
        };
        for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
                ex = event(fx->api, forged[i], body, sizeof(body) - 1);
                expect_error(&ex, 401, "bad_signature");
                exchange_free(&ex);
        }
        /* variations of the right signature that are not it */
        static const char *const shapes[] = {"sha1=%s",       "sha256=%.63s", "sha256=%s0",
                                             "sha256= %s",    "sha256=%s ",   " sha256=%s",
                                             "sha256=%s,v1=", "sha256:%s",    "sha256==%s"};
        for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
                snprintf(bad, sizeof(bad), shapes[i], good + 7);
                ex = event(fx->api, bad, body, sizeof(body) - 1);
                expect_error(&ex, 401, "bad_signature");
                exchange_free(&ex);
        }
        /* one digit off; a non-hex digit */
        snprintf(bad, sizeof(bad), "%s", good);
        bad[20] = bad[20] == '0' ? '1' : '0';
        ex = event(fx->api, bad, body, sizeof(body) - 1);
        expect_error(&ex, 401, "bad_signature");
        exchange_free(&ex);
        snprintf(bad, sizeof(bad), "%s", good);
        bad[strlen(bad) - 1] = 'g';
        ex = event(fx->api, bad, body, sizeof(body) - 1);
        expect_error(&ex, 401, "bad_signature");
        exchange_free(&ex);
        /* the right signature over the body with one more byte (a trailing
         * NUL, a newline) */
        ex = event(fx->api, good, body, sizeof(body));
        expect_error(&ex, 401, "bad_signature");
        exchange_free(&ex);
        /* the first X-Signature counts */
        {
                struct http_header two[] = {
                    {"X-Signature", other_sig}, {"X-Signature", good}, {NULL, NULL}};
                ex = do_request_h(fx->api, "POST", "/v1/provider-events", NULL, NULL, two, body,
                                  sizeof(body) - 1);
                expect_error(&ex, 401, "bad_signature");
                exchange_free(&ex);
        }
        /* the bearer token is no substitute for a signature */
        ex = do_request(fx->api, "POST", "/v1/provider-events", NULL, "Bearer " TOKEN, body,
                        sizeof(body) - 1);
        expect_error(&ex, 401, "bad_signature");
        exchange_free(&ex);
        ex = do_request(fx->api, "GET", "/v1/provider-events", NULL, "Bearer " TOKEN, NULL, 0);
        expect_error(&ex, 405, "method_not_allowed");
        exchange_free(&ex);
        assert_unchanged(fx->api, "op-m", &before, "forged events");

        /* the error never echoes the signature or the body */
        ex = event(fx->api, other_sig, body, sizeof(body) - 1);
        char *dump = json_dumps(ex.json, JSON_COMPACT);
        assert_non_null(dump);
        assert_null(strstr(dump, other_sig + 7));
        assert_null(strstr(dump, "re_1"));
        free(dump);
        exchange_free(&ex);

        /* the real one: settles, audited once */
        ex = event(fx->api, good, body, sizeof(body) - 1);
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "succeeded");
        exchange_free(&ex);
        struct op_snap settled = snap(fx->api, "op-m");
        assert_int_equal(settled.state, OP_SUCCEEDED);
        assert_string_equal(settled.refund_id, "re_1");
        assert_int_equal(settled.audits, before.audits + 1);

        /* replayed: 200, no second change, no second audit row */
        for (int i = 0; i < 3; i++) {
                ex = event(fx->api, good, body, sizeof(body) - 1);
                assert_int_equal(ex.status, 200);
                assert_string_equal(json_string_value(json_object_get(ex.json, "state")),
                                    "succeeded");
                exchange_free(&ex);
        }
        assert_unchanged(fx->api, "op-m", &settled, "replay");
        /* a validly signed contrary event does not rewrite a final state */
        ex = event(fx->api, other_sig, other, sizeof(other) - 1);
        expect_error(&ex, 409, "state_conflict");
        exchange_free(&ex);
        assert_unchanged(fx->api, "op-m", &settled, "contrary event");
}

/* Signed, but not acceptable: bad bodies, unknown or unsettleable
 * operations. Nothing is created or changed. */
static void test_provider_event_bodies(void **state)
{
        struct fixture *fx = *state;
        static const struct bad_body cases[] = {
            B("", 400, "invalid_json", NULL),
            B("{", 400, "invalid_json", NULL),
            B("[]", 400, "invalid_json", NULL),
            B("{\"operation_id\":\"op-m\",\"status\":\"failed\",\"status\":\"succeeded\"}", 400,
              "invalid_json", NULL),
            B("{\"operation_id\":\"op-m\xff\",\"status\":\"succeeded\"}", 400, "invalid_json",
              NULL),
            B("{\"operation_id\":\"op-m\\u0000\",\"status\":\"succeeded\"}", 400, "invalid_json",
              NULL),
            B("{\"operation_id\":\"op-m\",\"status\":\"succeeded\"}\0", 400, "invalid_json", NULL),
            B("{\"operation_id\":\"op-m\",\"status\":\"succeeded\",\"amount\":1e999}", 400,
              "invalid_json", NULL),
            B("{\"status\":\"succeeded\"}", 422, "invalid_field", "operation_id"),
            B("{\"operation_id\":7,\"status\":\"succeeded\"}", 422, "invalid_field",
              "operation_id"),
            B("{\"operation_id\":\"../x\",\"status\":\"succeeded\"}", 422, "invalid_field",
              "operation_id"),
            B("{\"operation_id\":\"a%2Fb\",\"status\":\"succeeded\"}", 422, "invalid_field",
              "operation_id"),
            B("{\"operation_id\":\"\",\"status\":\"succeeded\"}", 422, "invalid_field",
              "operation_id"),
            B("{\"operation_id\":\"op-m\"}", 422, "invalid_field", "status"),
            B("{\"operation_id\":\"op-m\",\"status\":\"unknown\"}", 422, "invalid_field", "status"),
            B("{\"operation_id\":\"op-m\",\"status\":\"SUCCEEDED\"}", 422, "invalid_field",
              "status"),
            B("{\"operation_id\":\"op-m\",\"status\":1}", 422, "invalid_field", "status"),
            B("{\"operation_id\":\"op-m\",\"status\":\"succeeded\",\"refund_id\":5}", 422,
              "invalid_field", "refund_id"),
            B("{\"operation_id\":\"op-m\",\"status\":\"succeeded\",\"refund_id\":\"a b\"}", 422,
              "invalid_field", "refund_id"),
            B("{\"operation_id\":\"op-m\",\"status\":\"succeeded\",\"refund_id\":\"\\u00e9\"}", 422,
              "invalid_field", "refund_id"),
        };
        char id[200], body[600];
        struct op_snap before, pending;
        struct exchange ex;

        snprintf(fx->api->cfg.provider_webhook_secret, sizeof(fx->api->cfg.provider_webhook_secret),
                 "%s", WEBHOOK_SECRET);
        make_manual(fx->api, "op-m");
        make_pending(fx->api, "op-p");
        before = snap(fx->api, "op-m");
        pending = snap(fx->api, "op-p");
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char sig[128];
                sign(WEBHOOK_SECRET, cases[i].body, cases[i].len, sig, sizeof(sig));
                ex = event(fx->api, sig, cases[i].body, cases[i].len);
                expect_case(&ex, i, &cases[i]);
                exchange_free(&ex);
        }
        /* a refund id of 128 bytes does not fit */
        memset(id, 'r', sizeof(id));
        id[128] = '\0';
        snprintf(body, sizeof(body),
                 "{\"operation_id\":\"op-m\",\"status\":\"succeeded\",\"refund_id\":\"%s\"}", id);
        ex = signed_event(fx->api, body);
        assert_string_equal(expect_error(&ex, 422, "invalid_field"), "refund_id");
        exchange_free(&ex);
        /* an operation id of 129 bytes can never exist */
        memset(id, 'a', sizeof(id));
        id[129] = '\0';
        snprintf(body, sizeof(body), "{\"operation_id\":\"%s\",\"status\":\"succeeded\"}", id);
        ex = signed_event(fx->api, body);
        assert_string_equal(expect_error(&ex, 422, "invalid_field"), "operation_id");
        exchange_free(&ex);
        /* a signed body over api.max_body_bytes */
        char *big = malloc(4096);
        assert_non_null(big);
        memset(big, ' ', 4096);
        memcpy(big, "{\"operation_id\":\"op-m\",\"status\":\"succeeded\"}", 44);
        big[4095] = '\0';
        ex = signed_event(fx->api, big);
        expect_error(&ex, 413, "body_too_large");
        exchange_free(&ex);
        free(big);

        /* unknown operation ids: 404, nothing created */
        ex = signed_event(fx->api, "{\"operation_id\":\"op-nope\",\"status\":\"succeeded\"}");
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);
        memset(id, 'a', sizeof(id));
        id[128] = '\0';
        snprintf(body, sizeof(body), "{\"operation_id\":\"%s\",\"status\":\"failed\"}", id);
        ex = signed_event(fx->api, body);
        expect_error(&ex, 404, "not_found");
        exchange_free(&ex);
        assert_int_equal(store_get(fx->api->store, "op-nope", &(struct op_record){0}),
                         TG_ENOTFOUND);
        /* pending: nothing was ever sent, so no provider answer can be ours */
        ex = signed_event(fx->api, "{\"operation_id\":\"op-p\",\"status\":\"succeeded\"}");
        expect_error(&ex, 409, "state_conflict");
        exchange_free(&ex);
        assert_unchanged(fx->api, "op-m", &before, "bad events");
        assert_unchanged(fx->api, "op-p", &pending, "bad events");

        /* unknown fields are ignored; refund_id null is no refund id */
        ex = signed_event(fx->api, "{\"operation_id\":\"op-m\",\"status\":\"failed\","
                                   "\"refund_id\":null,\"at\":\"2024-01-01\",\"x\":{\"y\":[1]}}");
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "state")), "rejected");
        exchange_free(&ex);
        assert_string_equal(snap(fx->api, "op-m").refund_id, "");
}

/* ---- POST /v1/refunds:batch -------------------------------------------------- */

static struct exchange post_batch(struct api *api, const char *body)
{
        return do_request(api, "POST", "/v1/refunds:batch", NULL, "Bearer " TOKEN, body,
                          strlen(body));
}

/* results[i]: its index, its status, and its operation_id or error code. */
static void expect_item(struct exchange *ex, size_t i, int status, const char *id_or_code)
{
        json_t *it = json_array_get(json_object_get(ex->json, "results"), i);
        json_t *e = json_object_get(it, "error");

        if (!it || json_integer_value(json_object_get(it, "index")) != (json_int_t)i ||
            json_integer_value(json_object_get(it, "status")) != status) {
                char *dump = json_dumps(ex->json, 0);
                fail_msg("item %zu: expected %d, got %s", i, status, dump ? dump : "?");
        }
        if (status >= 400) {
                assert_non_null(e);
                assert_string_equal(json_string_value(json_object_get(e, "code")), id_or_code);
                assert_true(json_is_string(json_object_get(e, "message")));
                assert_true(json_is_boolean(json_object_get(e, "retryable")));
                assert_null(json_object_get(it, "operation_id"));
        } else {
                char url[64];
                assert_null(e);
                assert_string_equal(json_string_value(json_object_get(it, "operation_id")),
                                    id_or_code);
                snprintf(url, sizeof(url), "/v1/refunds/%s", id_or_code);
                assert_string_equal(json_string_value(json_object_get(it, "status_url")), url);
                assert_true(json_is_string(json_object_get(it, "state")));
                assert_true(json_is_string(json_object_get(it, "trace_id")));
        }
}

#define ITEM(id, amount)                                                                           \
        "{\"operation_id\":\"" id "\",\"payment_id\":\"pay-" id "\",\"amount\":" #amount           \
        ",\"currency\":\"EUR\"}"

/* A refund names its account (issue 26): optional with one account (the
 * one), an unknown one is 422 unknown_account naming the configured ones
 * with nothing stored, in a batch too (that item only); with several
 * accounts it is required. */
static void test_accounts_intake(void **state)
{
        struct fixture *fx = *state;
        struct exchange ex =
            POST_LIT(fx->api, "{\"operation_id\":\"a-1\",\"payment_id\":\"pay-1\",\"amount\":5,"
                              "\"currency\":\"EUR\",\"account\":\"default\"}");
        struct tg_config *cfg = calloc(1, sizeof(*cfg));
        struct refund_request rr;
        struct api_error err;
        struct op_record op;
        const char *msg;

        assert_int_equal(ex.status, 202);
        exchange_free(&ex);
        /* the same request without the account: the one account, the same request */
        ex = POST_LIT(fx->api, "{\"operation_id\":\"a-1\",\"payment_id\":\"pay-1\",\"amount\":5,"
                               "\"currency\":\"EUR\"}");
        assert_int_equal(ex.status, 200);
        exchange_free(&ex);
        ex = get(fx->api, "/v1/refunds/a-1", NULL);
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "account")), "default");
        exchange_free(&ex);

        ex = POST_LIT(fx->api, "{\"operation_id\":\"a-2\",\"payment_id\":\"pay-1\",\"amount\":5,"
                               "\"currency\":\"EUR\",\"account\":\"eu\"}");
        assert_string_equal(expect_error(&ex, 422, "unknown_account"), "account");
        msg = json_string_value(json_object_get(json_object_get(ex.json, "error"), "message"));
        assert_non_null(msg);
        assert_non_null(strstr(msg, "default"));
        exchange_free(&ex);
        ex = POST_LIT(fx->api, "{\"operation_id\":\"a-3\",\"payment_id\":\"pay-1\",\"amount\":5,"
                               "\"currency\":\"EUR\",\"account\":\"EU!\"}");
        assert_string_equal(expect_error(&ex, 422, "invalid_field"), "account");
        exchange_free(&ex);
        ex = post_batch(
            fx->api, "{\"refunds\":[{\"operation_id\":\"a-4\",\"payment_id\":\"p\","
                     "\"amount\":5,\"currency\":\"EUR\",\"account\":\"eu\"}," ITEM("a-5", 7) "]}");
        assert_int_equal(ex.status, 200);
        expect_item(&ex, 0, 422, "unknown_account");
        expect_item(&ex, 1, 202, "a-5");
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 2); /* a-1, a-5 */
        assert_int_equal(store_get(fx->api->store, "a-2", &op), TG_ENOTFOUND);
        assert_int_equal(store_get(fx->api->store, "a-4", &op), TG_ENOTFOUND);

        /* several accounts: the account is required, a configured one passes */
        assert_non_null(cfg);
        struct tg_account two[2] = {{.name = "eu", .declared = true},
                                    {.name = "us", .declared = true}};
        cfg->accounts = two; /* the test's own list: nothing to release */
        cfg->account_count = 2;
        memset(&rr, 0, sizeof(rr));
        assert_int_equal(api_refund_account(cfg, &rr, &err), TG_EINVAL);
        assert_int_equal(err.status, 422);
        assert_string_equal(err.code, "invalid_field");
        assert_string_equal(err.field, "account");
        assert_non_null(strstr(err.message, "eu, us"));
        snprintf(rr.account, sizeof(rr.account), "us");
        assert_int_equal(api_refund_account(cfg, &rr, &err), 0);
        snprintf(rr.account, sizeof(rr.account), "default");
        assert_int_equal(api_refund_account(cfg, &rr, &err), TG_EINVAL);
        assert_string_equal(err.code, "unknown_account");
        free(cfg);
}

/* Mixed results, in order: new (202), a repeat of an operation accepted
 * alone (200), the same id with another body (409), invalid items (422
 * unknown/invalid field, 400 not an object) that stop nothing, an id given
 * twice in the batch (202 then 200). Exactly the valid new ones are
 * stored; each is what a single POST would have stored. */
static void test_batch_mixed(void **state)
{
        struct fixture *fx = *state;
        struct exchange ex = POST_LIT(fx->api, GOOD); /* op-1, amount 1250 */
        struct op_record op;

        assert_int_equal(ex.status, 202);
        exchange_free(&ex);
        ex = post_batch(
            fx->api,
            "{\"refunds\":[" ITEM("b-1", 100) "," GOOD "," ITEM(
                "op-1", 999) ","
                             "{\"operation_id\":\"b-2\",\"payment_id\":\"p\",\"amount\":5,"
                             "\"currency\":\"EUR\",\"ammount\":5},"
                             "{\"operation_id\":\"b-3\",\"payment_id\":\"p\",\"amount\":1.5,"
                             "\"currency\":\"EUR\"},"
                             "[1]," ITEM("b-4", 400) "," ITEM("b-4", 400) "]}");
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_array_size(json_object_get(ex.json, "results")), 8);
        assert_true(json_is_true(json_object_get(ex.json, "errors")));
        assert_int_equal(json_integer_value(json_object_get(ex.json, "accepted")), 2);
        expect_item(&ex, 0, 202, "b-1");
        expect_item(&ex, 1, 200, "op-1");
        expect_item(&ex, 2, 409, "idempotency_conflict");
        expect_item(&ex, 3, 422, "unknown_field");
        expect_item(&ex, 4, 422, "invalid_field");
        expect_item(&ex, 5, 400, "invalid_json");
        expect_item(&ex, 6, 202, "b-4");
        expect_item(&ex, 7, 200, "b-4");
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 3); /* op-1, b-1, b-4 */
        assert_int_equal(store_get(fx->api->store, "b-1", &op), 0);
        assert_int_equal(op.req.amount, 100);
        assert_int_equal(store_get(fx->api->store, "op-1", &op), 0);
        assert_int_equal(op.req.amount, 1250); /* the conflict changed nothing */
        assert_int_equal(store_get(fx->api->store, "b-2", &op), TG_ENOTFOUND);
        assert_int_equal(store_get(fx->api->store, "b-3", &op), TG_ENOTFOUND);

        /* a single POST of a batch's item is its repeat */
        ex = POST_LIT(fx->api, ITEM("b-1", 100));
        assert_int_equal(ex.status, 200);
        exchange_free(&ex);
}

/* A client whose answer was lost sends the same batch again: every item
 * answers as if sent alone a second time (200), nothing more is stored. */
static void test_batch_repeat(void **state)
{
        struct fixture *fx = *state;
        char body[32 * 1024];
        size_t len = 0;
        struct exchange ex;

        len += (size_t)snprintf(body + len, sizeof(body) - len, "{\"refunds\":[");
        for (int i = 0; i < 100; i++)
                len += (size_t)snprintf(body + len, sizeof(body) - len,
                                        "%s{\"operation_id\":\"r-%d\",\"payment_id\":\"p-%d\","
                                        "\"amount\":%d,\"currency\":\"EUR\"}",
                                        i ? "," : "", i, i, 100 + i);
        snprintf(body + len, sizeof(body) - len, "]}");
        for (int round = 0; round < 2; round++) {
                ex = post_batch(fx->api, body);
                assert_int_equal(ex.status, 200);
                assert_false(json_is_true(json_object_get(ex.json, "errors")));
                assert_int_equal(json_integer_value(json_object_get(ex.json, "accepted")),
                                 round ? 0 : 100);
                for (size_t i = 0; i < 100; i++) {
                        char id[16];
                        snprintf(id, sizeof(id), "r-%zu", i);
                        expect_item(&ex, i, round ? 200 : 202, id);
                }
                exchange_free(&ex);
                assert_int_equal(ops_stored(fx->api), 100);
        }
}

/* The envelope: not JSON, not {"refunds": [...]}, empty, past 500 items,
 * past api.max_batch_bytes, the wrong method: the call's error, nothing
 * stored. Exactly 500 items is a batch. */
static void test_batch_envelope(void **state)
{
        static const struct {
                const char *body, *code;
        } bad[] = {
            {"", "invalid_json"},
            {"nope", "invalid_json"},
            {"{\"refunds\":[" ITEM("e-1", 1) "],\"refunds\":[]}", "invalid_json"},
            {"[]", "invalid_request"},
            {"{}", "invalid_request"},
            {"{\"refunds\":{}}", "invalid_request"},
            {"{\"refunds\":[]}", "invalid_request"},
            {"{\"refunds\":[" ITEM("e-1", 1) "],\"x\":1}", "invalid_request"},
        };
        struct fixture *fx = *state;
        size_t cap = 501 * 100 + 64, len = 0;
        char *body = malloc(cap);
        struct exchange ex;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ex = post_batch(fx->api, bad[i].body);
                expect_error(&ex, 400, bad[i].code);
                exchange_free(&ex);
        }
        assert_non_null(body);
        len += (size_t)snprintf(body + len, cap - len, "{\"refunds\":[");
        for (int i = 0; i < 501; i++)
                len += (size_t)snprintf(body + len, cap - len,
                                        "%s{\"operation_id\":\"m-%d\",\"payment_id\":\"p\","
                                        "\"amount\":1,\"currency\":\"EUR\"}",
                                        i ? "," : "", i);
        snprintf(body + len, cap - len, "]}");
        ex = post_batch(fx->api, body);
        assert_string_equal(expect_error(&ex, 400, "invalid_request"), "refunds");
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 0);

        /* 500: cut the last item off */
        char *last = strrchr(body, '{');
        last[-1] = ']';
        last[0] = '}';
        last[1] = '\0';
        ex = post_batch(fx->api, body);
        assert_int_equal(ex.status, 200);
        assert_int_equal(json_array_size(json_object_get(ex.json, "results")), 500);
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 500);

        fx->api->cfg.api_max_batch_bytes = 64;
        ex = post_batch(fx->api, "{\"refunds\":[" ITEM("e-2", 1) "," ITEM("e-3", 1) "]}");
        expect_error(&ex, 413, "body_too_large");
        exchange_free(&ex);
        ex = do_request(fx->api, "GET", "/v1/refunds:batch", NULL, "Bearer " TOKEN, NULL, 0);
        expect_error(&ex, 405, "method_not_allowed");
        assert_string_equal(ex.allow, "POST");
        exchange_free(&ex);
        ex = do_request(fx->api, "POST", "/v1/refunds:batch", NULL, NULL, "{}", 2);
        expect_error(&ex, 401, "unauthorized");
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 500);
        free(body);
}

/* Admission decides for the batch as a whole: over the backlog limit it is
 * refused whole (503, Retry-After, nothing stored, counted once), while a
 * batch of operations already accepted is still answered, and a batch that
 * fits is admitted whole. */
static void test_batch_admission(void **state)
{
        struct fixture *fx = *state;
        static const char three[] =
            "{\"refunds\":[" ITEM("a-1", 1) "," ITEM("a-2", 2) "," ITEM("a-3", 3) "]}";
        struct exchange ex;

        fx->api->cfg.admission.max_backlog = 3;
        ex = POST_LIT(fx->api, GOOD); /* backlog 1 */
        assert_int_equal(ex.status, 202);
        exchange_free(&ex);
        ex = post_batch(fx->api, three); /* would make 4 */
        expect_error(&ex, 503, "over_capacity");
        assert_true(atoi(ex.retry_after) >= 1);
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 1);
        assert_int_equal(fx->api->counters->admission_refused[1], 1);

        /* repeats are never refused, and do not count as new work */
        ex = post_batch(fx->api, "{\"refunds\":[" GOOD "," GOOD "," GOOD "]}");
        assert_int_equal(ex.status, 200);
        expect_item(&ex, 0, 200, "op-1");
        expect_item(&ex, 1, 200, "op-1");
        expect_item(&ex, 2, 200, "op-1");
        exchange_free(&ex);
        ex = post_batch(fx->api, "{\"refunds\":[" GOOD "," ITEM("a-1", 1) "," ITEM("a-2", 2) "]}");
        assert_int_equal(ex.status, 200); /* two new: backlog 3 */
        expect_item(&ex, 0, 200, "op-1");
        expect_item(&ex, 1, 202, "a-1");
        expect_item(&ex, 2, 202, "a-2");
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 3);
        ex = post_batch(fx->api, "{\"refunds\":[" ITEM("a-1", 1) "," ITEM("a-4", 4) "]}");
        expect_error(&ex, 503, "over_capacity");
        exchange_free(&ex);
        assert_int_equal(ops_stored(fx->api), 3);
}

/* A refund of `account` through the API: its status. */
static int post_in(struct api *api, const char *id, const char *account)
{
        char body[256];
        struct exchange ex;
        int status;

        snprintf(body, sizeof(body),
                 "{\"operation_id\":\"%s\",\"payment_id\":\"pay\",\"amount\":5,"
                 "\"currency\":\"EUR\",\"account\":\"%s\"}",
                 id, account);
        ex = post(api, body, strlen(body));
        status = ex.status;
        exchange_free(&ex);
        return status;
}

/* GET path?query answered 200: the size of its array `key`. */
static size_t listed(struct api *api, const char *path, const char *query, const char *key)
{
        struct exchange ex = get(api, path, query);
        size_t n;

        assert_int_equal(ex.status, 200);
        n = json_array_size(json_object_get(ex.json, key));
        exchange_free(&ex);
        return n;
}

/* Seen per account (issue 26 §6): /v1/manual and /v1/calls filter by
 * ?account=, every account without it; a name not configured is the one
 * 422 unknown_account naming the configured ones, on /v1/stats too. */
static void test_reads_per_account(void **state)
{
        struct fixture *fx = *state;
        static const char *const routes[] = {"/v1/manual", "/v1/calls", "/v1/stats"};
        struct op_record op;
        struct call_record call;
        struct exchange ex;
        unsigned n = 0;
        json_t *items;

        assert_int_equal(post_in(fx->api, "d-1", "default"), 202);
        assert_int_equal(post_in(fx->api, "e-1", "eu"), 202);
        assert_int_equal(post_in(fx->api, "e-2", "eu"), 202);
        /* eu's exit: one call (e-1), then its sweep moves e-2 to manual */
        assert_int_equal(store_use_account(fx->api->store, "eu"), 0);
        claim_one(fx->api->store, "req-e-1", &op, &call);
        assert_string_equal(op.req.operation_id, "e-1");
        assert_int_equal(
            store_sweep_deadlines(fx->api->store, 0, api_wall_now() + 24 * 3600 * 1000LL, &n), 0);
        store_owner_release(fx->api->store);
        assert_int_equal(store_use_account(fx->api->store, "default"), 0);
        /* default's sweep: d-1 to manual */
        assert_int_equal(
            store_sweep_deadlines(fx->api->store, 0, api_wall_now() + 24 * 3600 * 1000LL, &n), 0);

        ex = get(fx->api, "/v1/manual", "account=eu");
        assert_int_equal(ex.status, 200);
        items = json_object_get(ex.json, "items");
        assert_int_equal(json_array_size(items), 1);
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(items, 0), "operation_id")), "e-2");
        exchange_free(&ex);
        ex = get(fx->api, "/v1/manual", "account=default");
        items = json_object_get(ex.json, "items");
        assert_int_equal(json_array_size(items), 1);
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(items, 0), "operation_id")), "d-1");
        exchange_free(&ex);
        assert_int_equal(listed(fx->api, "/v1/manual", NULL, "items"), 2);
        assert_int_equal(listed(fx->api, "/v1/calls", "account=eu", "calls"), 1);
        assert_int_equal(listed(fx->api, "/v1/calls", "account=default", "calls"), 0);
        assert_int_equal(listed(fx->api, "/v1/calls", NULL, "calls"), 1);

        for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
                static const char *const bad[] = {"account=us", "account=EU!",
                                                  "account=", "account=%zz"};

                for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
                        const char *msg;

                        ex = get(fx->api, routes[i], bad[k]);
                        assert_string_equal(expect_error(&ex, 422, "unknown_account"), "account");
                        msg = json_string_value(
                            json_object_get(json_object_get(ex.json, "error"), "message"));
                        assert_non_null(strstr(msg, "the accounts are: default, eu"));
                        exchange_free(&ex);
                }
        }
        ex = get(fx->api, "/v1/stats", "account=eu");
        assert_int_equal(ex.status, 200);
        assert_string_equal(json_string_value(json_object_get(ex.json, "account")), "eu");
        exchange_free(&ex);
}

/* Admission per account (issue 26 §6): eu at its backlog limit refuses its
 * own refunds (503, Retry-After, check_back naming eu's stats) while
 * default keeps accepting; the store-wide backlog would refuse both. */
static void test_admission_per_account(void **state)
{
        struct fixture *fx = *state;
        struct exchange ex;

        fx->api->cfg.admission.max_backlog = 3;
        for (int i = 0; i < 3; i++) {
                char id[16];

                snprintf(id, sizeof(id), "e-%d", i);
                assert_int_equal(post_in(fx->api, id, "eu"), 202);
        }
        assert_int_equal(post_in(fx->api, "e-9", "eu"), 503);
        ex = get(fx->api, "/v1/stats", "account=eu");
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(ex.json, "admission"), "backlog")),
            3);
        exchange_free(&ex);
        for (int i = 0; i < 2; i++) {
                char id[16];

                snprintf(id, sizeof(id), "d-%d", i);
                assert_int_equal(post_in(fx->api, id, "default"), 202);
        }
        {
                char body[256];

                snprintf(body, sizeof(body),
                         "{\"operation_id\":\"e-8\",\"payment_id\":\"pay\",\"amount\":5,"
                         "\"currency\":\"EUR\",\"account\":\"eu\"}");
                ex = post(fx->api, body, strlen(body));
                expect_error(&ex, 503, "over_capacity");
                assert_true(atoi(ex.retry_after) >= 1);
                assert_string_equal(json_string_value(json_object_get(ex.json, "check_back")),
                                    "/v1/stats?account=eu");
                exchange_free(&ex);
        }
        /* a batch: judged per account, any account refused refuses it whole */
        ex = post_batch(fx->api, "{\"refunds\":[{\"operation_id\":\"d-5\",\"payment_id\":\"p\","
                                 "\"amount\":5,\"currency\":\"EUR\",\"account\":\"default\"}]}");
        assert_int_equal(ex.status, 200);
        expect_item(&ex, 0, 202, "d-5");
        exchange_free(&ex);
        ex = post_batch(fx->api, "{\"refunds\":[{\"operation_id\":\"d-6\",\"payment_id\":\"p\","
                                 "\"amount\":5,\"currency\":\"EUR\",\"account\":\"default\"},"
                                 "{\"operation_id\":\"e-7\",\"payment_id\":\"p\","
                                 "\"amount\":5,\"currency\":\"EUR\",\"account\":\"eu\"}]}");
        expect_error(&ex, 503, "over_capacity");
        exchange_free(&ex);
        /* default reaches its own limit: 3 of its own */
        assert_int_equal(post_in(fx->api, "d-7", "default"), 503);
        assert_int_equal(ops_stored(fx->api), 6);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_healthz, setup, teardown),
            cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
            cmocka_unit_test_setup_teardown(test_auth_header_tricks, setup, teardown),
            cmocka_unit_test_setup_teardown(test_admission_during_known_hold, setup, teardown),
            cmocka_unit_test_setup_teardown(test_admission_at_the_rate_in_force, setup, teardown),
            cmocka_unit_test_setup_teardown(test_accept_replay_conflict, setup, teardown),
            cmocka_unit_test_setup_teardown(test_accounts_intake, setup, teardown),
            cmocka_unit_test_setup_teardown(test_accept_reason_metadata, setup, teardown),
            cmocka_unit_test_setup_teardown(test_hostile_bodies, setup, teardown),
            cmocka_unit_test_setup_teardown(test_long_fields, setup, teardown),
            cmocka_unit_test_setup_teardown(test_body_too_large, setup, teardown),
            cmocka_unit_test_setup_teardown(test_routes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_status_and_calls, setup, teardown),
            cmocka_unit_test_setup_teardown(test_no_token_configured, setup, teardown),
            cmocka_unit_test_setup_teardown(test_request_ids_differ, setup, teardown),
            cmocka_unit_test_setup_teardown(test_manual_action_bodies, setup, teardown),
            cmocka_unit_test_setup_teardown(test_manual_action_sizes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_manual_path_tricks, setup, teardown),
            cmocka_unit_test_setup_teardown(test_manual_actions_once, setup, teardown),
            cmocka_unit_test_setup_teardown(test_manual_list_params, setup, teardown),
            cmocka_unit_test_setup_teardown(test_manual_assign, setup, teardown),
            cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
            cmocka_unit_test_setup_teardown(test_intake_deadline_and_trace, setup, teardown),
            cmocka_unit_test_setup_teardown(test_stats_params, setup, teardown),
            cmocka_unit_test_setup_teardown(test_metrics_token, setup, teardown),
            cmocka_unit_test_setup_teardown(test_route_templates, setup, teardown),
            cmocka_unit_test_setup_teardown(test_batch_mixed, setup, teardown),
            cmocka_unit_test_setup_teardown(test_batch_repeat, setup, teardown),
            cmocka_unit_test_setup_teardown(test_batch_envelope, setup, teardown),
            cmocka_unit_test_setup_teardown(test_batch_admission, setup, teardown),
            cmocka_unit_test_setup_teardown(test_reads_per_account, setup_two, teardown),
            cmocka_unit_test_setup_teardown(test_admission_per_account, setup_two, teardown),
            cmocka_unit_test_setup_teardown(test_provider_event_signature, setup, teardown),
            cmocka_unit_test_setup_teardown(test_provider_event_bodies, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
