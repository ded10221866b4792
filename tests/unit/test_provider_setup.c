/*
 * Tests of daemon/provider_setup and the transport it sets up, against an
 * in-process HTTP server (net/http_server) that records what arrived: the
 * API key (bearer or a named header) and the request signature (checked
 * here against our own HMAC of the canonical string), credentials re-read
 * at run time through exit_env_reload_credentials() (the new key is used by
 * the next call; a reload that fails keeps the old one and says why without
 * the secret), a transport that needs credentials refusing to start
 * without them, and the mapping end to end: a form body, a reply whose
 * status word, refund id and retryable header are read where the map says,
 * and the query path by refund id or, without one, by key; every
 * Retry-After header of an answer is kept, one per line.
 */
#include <dirent.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "core/encode.h"
#include "core/retry_after.h"
#include "core/tg_error.h"
#include "daemon/config.h"
#include "daemon/exit_env.h"
#include "daemon/provider_setup.h"
#include "net/http_server.h"
#include "net/transport.h"
#include "platform/clock.h"

struct seen {
        int calls;
        char method[8], path[256], auth[128], api_key[128], sig[160], ts[32], ctype[64];
        char version[64]; /* Stripe-Version */
        char body[1024];
        /* what to answer */
        int status;
        const char *answer;
        const char *retry_header;
        const char *retry_after[4]; /* Retry-After headers to answer with */
};

static int handler(const struct http_request *req, struct http_response *res, void *userdata)
{
        struct seen *s = userdata;
        const char *h;

        s->calls++;
        snprintf(s->method, sizeof(s->method), "%s", req->method);
        snprintf(s->path, sizeof(s->path), "%s%s%s", req->path, req->query[0] ? "?" : "",
                 req->query);
        h = http_request_header(req, "Authorization");
        snprintf(s->auth, sizeof(s->auth), "%s", h ? h : "");
        h = http_request_header(req, "X-Api-Key");
        snprintf(s->api_key, sizeof(s->api_key), "%s", h ? h : "");
        h = http_request_header(req, "X-Signature");
        snprintf(s->sig, sizeof(s->sig), "%s", h ? h : "");
        h = http_request_header(req, "X-Timestamp");
        snprintf(s->ts, sizeof(s->ts), "%s", h ? h : "");
        h = http_request_header(req, "Content-Type");
        snprintf(s->ctype, sizeof(s->ctype), "%s", h ? h : "");
        h = http_request_header(req, "Stripe-Version");
        snprintf(s->version, sizeof(s->version), "%s", h ? h : "");
        snprintf(s->body, sizeof(s->body), "%.*s", (int)req->body_len, req->body);
        if (s->retry_header)
                http_response_add_header(res, "Stripe-Should-Retry", s->retry_header);
        for (int i = 0; i < 4 && s->retry_after[i]; i++)
                http_response_add_header(res, "Retry-After", s->retry_after[i]);
        return http_response_set(res, s->status ? s->status : 201, "application/json",
                                 s->answer ? s->answer : "{\"status\":\"succeeded\"}",
                                 strlen(s->answer ? s->answer : "{\"status\":\"succeeded\"}"));
}

struct fixture {
        char dir[64];
        char key_file[128], sign_file[128], db[128];
        struct http_server *server;
        struct seen seen;
        struct tg_config cfg;
};

static void write_text(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        chmod(path, 0600);
}

static int setup(void **state)
{
        struct fixture *fx = calloc(1, sizeof(*fx));
        struct http_server_config hc = {.host = "127.0.0.1",
                                        .max_connections = 16,
                                        .connection_timeout_s = 5,
                                        .max_body_bytes = 4096};

        snprintf(fx->dir, sizeof(fx->dir), "/tmp/tg-test-psetup-XXXXXX");
        if (!mkdtemp(fx->dir))
                return -1;
        snprintf(fx->key_file, sizeof(fx->key_file), "%s/api-key", fx->dir);
        snprintf(fx->sign_file, sizeof(fx->sign_file), "%s/signing-key", fx->dir);
        snprintf(fx->db, sizeof(fx->db), "%s/t.db", fx->dir);
        write_text(fx->key_file, "key-one\n");
        write_text(fx->sign_file, "sign-one\n");
        if (http_server_start(&hc, handler, &fx->seen, &fx->server) < 0)
                return -1;
        config_defaults(&fx->cfg);
        snprintf(fx->cfg.provider_base_url, sizeof(fx->cfg.provider_base_url),
                 "http://127.0.0.1:%u", (unsigned)http_server_port(fx->server));
        snprintf(fx->cfg.store_url, sizeof(fx->cfg.store_url), "sqlite://%s", fx->db);
        *state = fx;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *fx = *state;
        struct dirent *e;
        DIR *d;
        char path[400];

        http_server_stop(fx->server);
        /* the files, the store and whatever lock files it keeps beside it */
        d = opendir(fx->dir);
        while (d && (e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                snprintf(path, sizeof(path), "%s/%s", fx->dir, e->d_name);
                unlink(path);
        }
        if (d)
                closedir(d);
        rmdir(fx->dir);
        free(fx);
        return 0;
}

static struct refund_request refund(const char *id)
{
        struct refund_request r;

        memset(&r, 0, sizeof(r));
        snprintf(r.operation_id, sizeof(r.operation_id), "%s", id);
        snprintf(r.payment_id, sizeof(r.payment_id), "pi_7");
        r.amount = 1500;
        snprintf(r.currency, sizeof(r.currency), "TWD");
        return r;
}

/* One call through the environment, to its end, not on the wire after
 * not_after (0: any time). */
/* A list's later page: the cursor the next call carries (then cleared). */
static const char *next_cursor;

static struct transport_result call_env_until(const struct exit_env *env,
                                              enum classify_request kind,
                                              const struct refund_request *req,
                                              const char *refund_id, tg_mono_ns not_after)
{
        struct transport_call tc = {.request = kind,
                                    .operation_id = req->operation_id,
                                    .refund = req,
                                    .refund_id = refund_id,
                                    .list_cursor = next_cursor,
                                    .request_id = "tg-1-1-0000",
                                    .attempt = 1,
                                    .timeout_ms = 3000,
                                    .cookie = 7,
                                    .not_after = not_after};
        struct exit_handoff h;
        struct transport_result res;
        tg_mono_ns until = clock_mono_now() + 5 * TG_NS_PER_S;

        next_cursor = NULL;
        assert_int_equal(env->start(env->ctx, &tc, &h), 0);
        while (env->next_done(env->ctx, &res) != 0) {
                CHECK(clock_mono_now() < until, "the call never ended");
                env->poll(env->ctx, clock_mono_now() + 50 * TG_NS_PER_MS);
        }
        return res;
}

static struct transport_result call_env(const struct exit_env *env, enum classify_request kind,
                                        const struct refund_request *req, const char *refund_id)
{
        return call_env_until(env, kind, req, refund_id, 0);
}

/* Our own HMAC of the default canonical string, for what arrived. */
static void expected_signature(const struct seen *s, const char *key, const char *op, char *out,
                               size_t size)
{
        unsigned char digest[SHA256_DIGEST_LENGTH], mac[EVP_MAX_MD_SIZE];
        unsigned int mac_len = 0;
        char hex[65], text[1024];
        struct tg_strbuf sb;
        int n;

        SHA256((const unsigned char *)s->body, strlen(s->body), digest);
        tg_strbuf_init(&sb, hex, sizeof(hex));
        encode_hex(digest, sizeof(digest), &sb);
        n = snprintf(text, sizeof(text), "%s\n%s\n%s\n%s\n%s", s->method, s->path, s->ts, op, hex);
        HMAC(EVP_sha256(), key, (int)strlen(key), (const unsigned char *)text, (size_t)n, mac,
             &mac_len);
        tg_strbuf_init(&sb, out, size);
        encode_hex(mac, mac_len, &sb);
}

static void test_credentials_and_reload(void **state)
{
        struct fixture *fx = *state;
        struct exit_env *env = NULL;
        struct refund_request r = refund("op-1");
        struct transport_result res;
        char want[160], err[512];
        int64_t now_s = clock_wall_now() / 1000, ts;

        snprintf(fx->cfg.provider_auth, sizeof(fx->cfg.provider_auth), "bearer");
        snprintf(fx->cfg.provider_auth_secret_file, sizeof(fx->cfg.provider_auth_secret_file), "%s",
                 fx->key_file);
        snprintf(fx->cfg.provider_signing_key_file, sizeof(fx->cfg.provider_signing_key_file), "%s",
                 fx->sign_file);
        assert_int_equal(exit_env_real(&fx->cfg, 4, NULL, &env), 0);

        res = call_env(env, CLASSIFY_POST, &r, NULL);
        assert_int_equal(res.reply.http_status, 201);
        assert_string_equal(fx->seen.auth, "Bearer key-one");
        assert_string_equal(fx->seen.path, "/v1/refunds");
        assert_string_equal(fx->seen.ctype, "application/json");
        ts = strtoll(fx->seen.ts, NULL, 10);
        CHECK(ts >= now_s - 5 && ts <= now_s + 5, "timestamp %s, now %lld", fx->seen.ts,
              (long long)now_s);
        expected_signature(&fx->seen, "sign-one", "op-1", want, sizeof(want));
        assert_string_equal(fx->seen.sig, want);

        /* rotated on disk, re-read at run time: the next call carries it */
        write_text(fx->key_file, "key-two\n");
        write_text(fx->sign_file, "sign-two\n");
        assert_int_equal(exit_env_reload_credentials(env, err, sizeof(err)), 0);
        res = call_env(env, CLASSIFY_QUERY, &r, NULL);
        assert_string_equal(fx->seen.method, "GET");
        assert_string_equal(fx->seen.path, "/v1/refunds/op-1");
        assert_string_equal(fx->seen.auth, "Bearer key-two");
        expected_signature(&fx->seen, "sign-two", "op-1", want, sizeof(want));
        assert_string_equal(fx->seen.sig, want);

        /* a reload that fails says why, keeps the old key, never shows one */
        write_text(fx->key_file, "bad key tgSECRET\n");
        err[0] = '\0';
        assert_int_equal(exit_env_reload_credentials(env, err, sizeof(err)), TG_ECONFIG);
        CHECK(strstr(err, "provider.auth_secret_file: ") == err, "message: %s", err);
        assert_null(strstr(err, "tgSECRET"));
        res = call_env(env, CLASSIFY_POST, &r, NULL);
        assert_string_equal(fx->seen.auth, "Bearer key-two");
        exit_env_free(env);

        /* a named header instead of Authorization */
        write_text(fx->key_file, "key-three\n");
        snprintf(fx->cfg.provider_auth, sizeof(fx->cfg.provider_auth), "header");
        fx->cfg.provider_signing_key_file[0] = '\0';
        assert_int_equal(exit_env_real(&fx->cfg, 4, NULL, &env), 0);
        res = call_env(env, CLASSIFY_POST, &r, NULL);
        assert_string_equal(fx->seen.api_key, "key-three");
        assert_string_equal(fx->seen.auth, "");
        assert_string_equal(fx->seen.sig, "");
        exit_env_free(env);
        (void)res;
}

static void test_no_credentials_no_call(void **state)
{
        struct fixture *fx = *state;
        struct provider_maps *maps = malloc(sizeof(*maps));
        struct transport_config tc;
        struct transport *t = NULL;
        struct refund_request r = refund("op-2");
        struct transport_call call = {.request = CLASSIFY_POST,
                                      .operation_id = r.operation_id,
                                      .refund = &r,
                                      .request_id = "tg-1",
                                      .timeout_ms = 1000};
        char err[256];

        snprintf(fx->cfg.provider_auth, sizeof(fx->cfg.provider_auth), "bearer");
        snprintf(fx->cfg.provider_auth_secret_file, sizeof(fx->cfg.provider_auth_secret_file), "%s",
                 fx->key_file);
        assert_int_equal(provider_setup_maps(&fx->cfg, maps, err, sizeof(err)), 0);
        provider_setup_transport_config(&fx->cfg, maps, 2, &tc);
        assert_int_equal(transport_new(&tc, &t), 0);
        assert_int_equal(transport_start(t, &call), TG_EINVAL);
        assert_int_equal(fx->seen.calls, 0);
        assert_int_equal(provider_setup_credentials(&fx->cfg, t, err, sizeof(err)), 0);
        assert_int_equal(transport_start(t, &call), 0);
        transport_free(t);
        free(maps);
}

static void test_mapping_end_to_end(void **state)
{
        struct fixture *fx = *state;
        struct exit_env *env = NULL;
        struct refund_request r = refund("op-3");
        struct transport_result res;
        struct tg_config *c = &fx->cfg;

        snprintf(r.reason, sizeof(r.reason), "dup & more");
        snprintf(r.metadata, sizeof(r.metadata), "{\"order\":\"o 1\"}");
        snprintf(c->provider_body_format, sizeof(c->provider_body_format), "form");
        c->provider_body_field_count = 0;
        snprintf(c->provider_body_fields[c->provider_body_field_count++], TG_CONFIG_LINE,
                 "payment_intent {payment_id}");
        snprintf(c->provider_body_fields[c->provider_body_field_count++], TG_CONFIG_LINE,
                 "amount {amount}");
        snprintf(c->provider_body_fields[c->provider_body_field_count++], TG_CONFIG_LINE,
                 "metadata[reason] {reason}");
        snprintf(c->provider_body_fields[c->provider_body_field_count++], TG_CONFIG_LINE,
                 "metadata {metadata}");
        snprintf(c->provider_query_path, sizeof(c->provider_query_path), "/v1/refunds/{refund_id}");
        snprintf(c->provider_query_fallback_path, sizeof(c->provider_query_fallback_path),
                 "/v1/refunds/by-key/{operation_id}");
        snprintf(c->provider_refund_id_field, sizeof(c->provider_refund_id_field), "id");
        snprintf(c->provider_status_processing, sizeof(c->provider_status_processing),
                 "pending,requires_action");
        snprintf(c->provider_retryable_field, sizeof(c->provider_retryable_field),
                 "header:Stripe-Should-Retry");
        snprintf(c->provider_error_code_field, sizeof(c->provider_error_code_field),
                 "error.code error.type");
        assert_int_equal(exit_env_real(c, 4, NULL, &env), 0);

        fx->seen.status = 200;
        fx->seen.answer = "{\"id\":\"re_9\",\"object\":\"refund\",\"status\":\"pending\"}";
        fx->seen.retry_header = "false";
        res = call_env(env, CLASSIFY_POST, &r, NULL);
        assert_string_equal(fx->seen.ctype, "application/x-www-form-urlencoded");
        assert_string_equal(fx->seen.body, "payment_intent=pi_7&amount=1500&metadata%5Breason%5D="
                                           "dup+%26+more&metadata%5Border%5D=o+1");
        assert_true(res.reply.body_is_json);
        assert_string_equal(res.reply.status, "processing");
        assert_string_equal(res.reply.refund_id, "re_9");
        assert_int_equal(res.reply.retryable, TG_FLAG_FALSE);
        assert_int_equal(res.failure, TRANSPORT_OK);

        /* the query: by the refund id once known, by our key before */
        fx->seen.answer = "{\"error\":{\"type\":\"idempotency_error\"}}";
        fx->seen.status = 400;
        fx->seen.retry_header = "true";
        res = call_env(env, CLASSIFY_QUERY, &r, "re_9");
        assert_string_equal(fx->seen.path, "/v1/refunds/re_9");
        assert_string_equal(res.reply.error_code, "idempotency_error");
        assert_int_equal(res.reply.retryable, TG_FLAG_TRUE);
        res = call_env(env, CLASSIFY_QUERY, &r, "");
        assert_string_equal(fx->seen.path, "/v1/refunds/by-key/op-3");
        exit_env_free(env);
}

/* Stripe's way back after a timeout: the list of the payment's refunds,
 * ours matched by the operation id in its metadata, with the profile's
 * fixed header on every call; a fixed header that names one tollgate sets
 * itself is refused at load. */
static void test_list_and_fixed_headers_end_to_end(void **state)
{
        struct fixture *fx = *state;
        struct exit_env *env = NULL;
        struct refund_request r = refund("op-4");
        struct transport_result res;
        struct tg_config *c = &fx->cfg;
        struct provider_maps *maps = malloc(sizeof(*maps));
        char err[256];

        snprintf(c->provider_query_path, sizeof(c->provider_query_path), "/v1/refunds/{refund_id}");
        snprintf(c->provider_list_path, sizeof(c->provider_list_path),
                 "/v1/refunds?payment_intent={payment_id}&limit=50");
        snprintf(c->provider_reconcile, sizeof(c->provider_reconcile), "refund_id, list");
        snprintf(c->provider_refund_id_field, sizeof(c->provider_refund_id_field), "id");
        snprintf(c->provider_status_processing, sizeof(c->provider_status_processing), "pending");
        snprintf(c->provider_list_items_field, sizeof(c->provider_list_items_field), "data");
        snprintf(c->provider_list_match_field, sizeof(c->provider_list_match_field),
                 "metadata.operation_id");
        snprintf(c->provider_list_more_field, sizeof(c->provider_list_more_field), "has_more");
        snprintf(c->provider_headers[c->provider_header_count++], TG_CONFIG_LINE,
                 "Stripe-Version: 2024-06-20");
        assert_int_equal(exit_env_real(c, 4, NULL, &env), 0);

        fx->seen.status = 200;
        fx->seen.answer = "{\"object\":\"list\",\"data\":[{\"id\":\"re_2\",\"status\":"
                          "\"succeeded\",\"metadata\":{\"operation_id\":\"op-other\"}},"
                          "{\"id\":\"re_1\",\"status\":\"pending\",\"metadata\":"
                          "{\"operation_id\":\"op-4\"}}],\"has_more\":false}";
        res = call_env(env, CLASSIFY_QUERY, &r, "");
        assert_string_equal(fx->seen.method, "GET");
        assert_string_equal(fx->seen.path, "/v1/refunds?payment_intent=pi_7&limit=50");
        assert_string_equal(fx->seen.version, "2024-06-20");
        assert_int_equal(res.reply.list, REPLY_LIST_FOUND);
        assert_string_equal(res.reply.refund_id, "re_1");
        assert_string_equal(res.reply.status, "processing");
        /* once the id is known: by the id, the header still there */
        fx->seen.answer = "{\"id\":\"re_1\",\"status\":\"succeeded\"}";
        res = call_env(env, CLASSIFY_QUERY, &r, "re_1");
        assert_string_equal(fx->seen.path, "/v1/refunds/re_1");
        assert_string_equal(fx->seen.version, "2024-06-20");
        assert_int_equal(res.reply.list, REPLY_LIST_NONE);
        assert_string_equal(res.reply.status, "succeeded");
        /* and on the POST */
        fx->seen.answer = "{\"id\":\"re_1\",\"status\":\"succeeded\"}";
        res = call_env(env, CLASSIFY_POST, &r, NULL);
        assert_string_equal(fx->seen.version, "2024-06-20");
        /* without provider.list_cursor_param a cursor is never sent: the
         * first page only, its last id kept for nobody */
        fx->seen.answer = "{\"object\":\"list\",\"data\":[{\"id\":\"re_2\",\"status\":"
                          "\"succeeded\",\"metadata\":{\"operation_id\":\"op-other\"}}],"
                          "\"has_more\":true}";
        next_cursor = "re_9";
        res = call_env(env, CLASSIFY_QUERY, &r, "");
        assert_string_equal(fx->seen.path, "/v1/refunds?payment_intent=pi_7&limit=50");
        assert_int_equal(res.reply.list, REPLY_LIST_PARTIAL);
        assert_string_equal(res.reply.list_cursor, "re_2");
        exit_env_free(env);

        /* Stripe's paging: the next page starts after the last id */
        snprintf(c->provider_list_cursor_param, sizeof(c->provider_list_cursor_param),
                 "starting_after");
        assert_int_equal(exit_env_real(c, 4, NULL, &env), 0);
        next_cursor = "re_2";
        res = call_env(env, CLASSIFY_QUERY, &r, "");
        assert_string_equal(fx->seen.path,
                            "/v1/refunds?payment_intent=pi_7&limit=50&starting_after=re_2");
        assert_int_equal(res.reply.list, REPLY_LIST_PARTIAL);
        /* a query by the refund id takes no cursor, whatever is given */
        fx->seen.answer = "{\"id\":\"re_1\",\"status\":\"succeeded\"}";
        next_cursor = "re_2";
        res = call_env(env, CLASSIFY_QUERY, &r, "re_1");
        assert_string_equal(fx->seen.path, "/v1/refunds/re_1");
        exit_env_free(env);
        /* the parameter needs the list and where a page says more follow */
        c->provider_list_more_field[0] = '\0';
        assert_int_equal(provider_setup_maps(c, maps, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "provider.list_cursor_param"));
        snprintf(c->provider_list_more_field, sizeof(c->provider_list_more_field), "has_more");
        c->provider_list_path[0] = '\0';
        snprintf(c->provider_query_fallback_path, sizeof(c->provider_query_fallback_path),
                 "/v1/by-key/{operation_id}");
        snprintf(c->provider_reconcile, sizeof(c->provider_reconcile), "key");
        assert_int_equal(provider_setup_maps(c, maps, err, sizeof(err)), TG_ECONFIG);
        CHECK(strstr(err, "provider.list_cursor_param"), "%s", err);
        c->provider_query_fallback_path[0] = '\0';
        snprintf(c->provider_list_path, sizeof(c->provider_list_path),
                 "/v1/refunds?payment_intent={payment_id}&limit=50");
        snprintf(c->provider_reconcile, sizeof(c->provider_reconcile), "refund_id, list");
        assert_int_equal(provider_setup_maps(c, maps, err, sizeof(err)), 0);

        /* a list path without where its items are: refused */
        c->provider_list_items_field[0] = '\0';
        assert_int_equal(provider_setup_maps(c, maps, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "list_items_field"));
        snprintf(c->provider_list_items_field, sizeof(c->provider_list_items_field), "data");
        assert_int_equal(provider_setup_maps(c, maps, err, sizeof(err)), 0);
        /* a fixed header may not be one tollgate sets, nor come twice */
        snprintf(c->provider_headers[c->provider_header_count++], TG_CONFIG_LINE,
                 "idempotency-key: x");
        assert_int_equal(provider_setup_maps(c, maps, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "provider.header"));
        snprintf(c->provider_headers[c->provider_header_count - 1], TG_CONFIG_LINE,
                 "stripe-version: 2020-08-27");
        assert_int_equal(provider_setup_maps(c, maps, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "twice"));
        free(maps);
}

/* A provider that sends Retry-After more than once: the transport keeps
 * every value whole, one per line in the order received (the dispatcher
 * reads them all and takes the longest, core/retry_after.h); a value of
 * digits too long to keep whole is kept as an absurd delay, never cut into
 * a shorter one. */
static void test_every_retry_after_kept(void **state)
{
        struct fixture *fx = *state;
        struct exit_env *env = NULL;
        struct refund_request r = refund("op-ra");
        struct transport_result res;
        int64_t v = 0;

        assert_int_equal(exit_env_real(&fx->cfg, 4, NULL, &env), 0);
        fx->seen.status = 429;
        fx->seen.answer = "{\"error\":{\"code\":\"rate_limited\"}}";
        fx->seen.retry_after[0] = "7";
        fx->seen.retry_after[1] = "2";
        fx->seen.retry_after[2] = "1000000000000000000000000000000000000000000000000000000000000000"
                                  "00000000001";
        res = call_env(env, CLASSIFY_POST, &r, NULL);
        assert_int_equal(res.reply.http_status, 429);
        assert_string_equal(res.retry_after, "7\n2\n99999999999999999999");
        assert_int_equal(retry_after_parse_all(res.retry_after, strlen(res.retry_after), 0, 120000,
                                               transport_http_date, &v),
                         0);
        assert_int_equal(v, 120000);
        /* one header: as before */
        fx->seen.retry_after[1] = NULL;
        res = call_env(env, CLASSIFY_POST, &r, NULL);
        assert_string_equal(res.retry_after, "7");
        exit_env_free(env);
}

/* Shares: a connection ready after the call's window sends nothing; the
 * call ends not sent (late), its sent report says so with the moment the
 * connection was ready, and the provider saw no request. A window still
 * open sends as usual. */
static void test_late_for_window_sends_nothing(void **state)
{
        struct fixture *fx = *state;
        struct exit_env *env = NULL;
        struct refund_request r = refund("op-late");
        struct transport_result res;
        struct transport_sent sent;
        tg_mono_ns before = clock_mono_now();

        assert_int_equal(exit_env_real(&fx->cfg, 4, NULL, &env), 0);
        res = call_env_until(env, CLASSIFY_POST, &r, NULL, before);
        assert_int_equal(res.failure, TRANSPORT_LATE);
        assert_int_equal(res.reply.transport, TG_TR_NOT_SENT);
        assert_false(res.sent);
        assert_int_equal(res.sent_mono, 0);
        assert_true(res.ready_mono > before);
        assert_string_equal(transport_failure_name(res.failure), "late");
        assert_int_equal(env->next_sent(env->ctx, &sent), 0);
        assert_false(sent.sent);
        assert_true(sent.ready_mono > before);
        assert_int_equal(fx->seen.calls, 0);
        /* a window open for a second: sent, and reported with the moment by
         * which the request had surely left (after the hook let it go) */
        res = call_env_until(env, CLASSIFY_POST, &r, NULL, clock_mono_now() + TG_NS_PER_S);
        assert_int_equal(res.failure, TRANSPORT_OK);
        assert_true(res.sent);
        assert_int_equal(fx->seen.calls, 1);
        assert_true(res.sent_mono > 0);
        assert_true(res.sent_end_mono >= res.sent_mono);
        assert_int_equal(env->next_sent(env->ctx, &sent), 0);
        assert_true(sent.sent);
        assert_int_equal(sent.sent_mono, res.sent_mono);
        assert_int_equal(sent.sent_end_mono, res.sent_end_mono);
        exit_env_free(env);
}

static void test_reload_without_env_function(void **state)
{
        struct exit_env fake;
        char err[16];

        (void)state;
        memset(&fake, 0, sizeof(fake));
        assert_int_equal(exit_env_reload_credentials(&fake, err, sizeof(err)), 0);
        assert_int_equal(exit_env_reload_credentials(NULL, err, sizeof(err)), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_credentials_and_reload, setup, teardown),
            cmocka_unit_test_setup_teardown(test_no_credentials_no_call, setup, teardown),
            cmocka_unit_test_setup_teardown(test_list_and_fixed_headers_end_to_end, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_mapping_end_to_end, setup, teardown),
            cmocka_unit_test_setup_teardown(test_every_retry_after_kept, setup, teardown),
            cmocka_unit_test_setup_teardown(test_late_for_window_sends_nothing, setup, teardown),
            cmocka_unit_test(test_reload_without_env_function),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
