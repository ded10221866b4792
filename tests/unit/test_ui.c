/*
 * Unit tests of the console's server side: the users file's grammar,
 * sessions (expiry, CSRF, the table's bound), and the /ui routes driven
 * through api_handle() over a real SQLite store: the sign-in page without a
 * session, sign-in and its cookie, the security headers, the CSRF, origin
 * and content-type guards, the viewer refused, an operator's resend audited
 * with the signed-in name, sign-out; the live view answered from one cache
 * however many polls; the timeline read from stored samples and refusals.
 */
#include "check.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "daemon/api.h"
#include "daemon/api_int.h"
#include "daemon/config.h"
#include "daemon/timeline_data.h"
#include "daemon/ui_int.h"
#include "daemon/ui_session.h"
#include "daemon/ui_users.h"
#include "daemon/web_assets.h"
#include "store/store.h"

#define API_TOKEN "api-t0ken-for-tests"
#define OP_TOKEN  "olga-s3cret"
#define VW_TOKEN  "vera-s3cret"

/* ---- the users file --------------------------------------------------------------- */

static void digest_hex(const char *token, char out[65])
{
        unsigned char d[32];
        unsigned n = 0;

        assert_int_equal(EVP_Digest(token, strlen(token), d, &n, EVP_sha256(), NULL), 1);
        for (int i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void test_users_file(void **state)
{
        struct ui_user users[4];
        unsigned count = 0;
        char err[160], a[65], b[65], text[1024];
        static const struct {
                const char *line;
                const char *why;
        } bad[] = {
            {"olga admin sha256:%s\n", "role"},
            {"olga operator %s\n", "sha256:"},
            {"olga operator sha256:abc\n", "sha256:"},
            {"ol ga operator sha256:%s\n", "role"},
            {"olga operator sha256:%s extra\n", "three fields"},
            {"ol/ga operator sha256:%s\n", "name"},
            {"olga operator sha256:%s\nolga viewer sha256:%s\n", "twice"},
            {"olga operator sha256:%s\nvera viewer sha256:%s\n", "two users"},
        };

        (void)state;
        digest_hex(OP_TOKEN, a);
        digest_hex(VW_TOKEN, b);
        snprintf(text, sizeof(text),
                 "# who may sign in\n\n  olga   operator  sha256:%s\r\nvera\tviewer\tsha256:%s\n",
                 a, b);
        assert_int_equal(ui_users_parse(text, strlen(text), users, 4, &count, err, sizeof(err)), 0);
        assert_int_equal(count, 2);
        assert_string_equal(users[0].name, "olga");
        assert_int_equal(users[0].role, UI_ROLE_OPERATOR);
        assert_string_equal(users[1].name, "vera");
        assert_int_equal(users[1].role, UI_ROLE_VIEWER);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                /* the second digest repeats the first only where the case says so */
                bool same = strstr(bad[i].why, "two users") != NULL;
                snprintf(text, sizeof(text), bad[i].line, a, same ? a : b);
                err[0] = '\0';
                CHECK(ui_users_parse(text, strlen(text), users, 4, &count, err, sizeof(err)) ==
                          TG_EPARSE,
                      "case %zu accepted: %s", i, text);
                CHECK(strstr(err, bad[i].why) != NULL && strstr(err, "line ") == err,
                      "case %zu: message '%s' does not say '%s'", i, err, bad[i].why);
                CHECK(strstr(err, a) == NULL, "case %zu: the message quotes a digest", i);
        }
        snprintf(text, sizeof(text), "a operator sha256:%s\nb viewer sha256:%s\n", a, b);
        assert_int_equal(ui_users_parse(text, strlen(text), users, 1, &count, err, sizeof(err)),
                         TG_EFULL);
}

/* ---- sessions ------------------------------------------------------------------------- */

static void test_sessions(void **state)
{
        static struct ui_sessions t; /* large: not on the stack */
        struct ui_user users[1];
        struct ui_session *s = NULL, *found = NULL;
        char cookie[UI_SECRET_HEX], header[256], user[UI_NAME_MAX + 1], hex[65];
        enum ui_role role = UI_ROLE_VIEWER;
        unsigned char api_digest[32];
        unsigned n = 0;

        (void)state;
        memset(users, 0, sizeof(users));
        snprintf(users[0].name, sizeof(users[0].name), "vera");
        users[0].role = UI_ROLE_VIEWER;
        assert_int_equal(
            EVP_Digest(VW_TOKEN, strlen(VW_TOKEN), users[0].token_sha256, &n, EVP_sha256(), NULL),
            1);
        assert_int_equal(
            EVP_Digest(API_TOKEN, strlen(API_TOKEN), api_digest, &n, EVP_sha256(), NULL), 1);
        /* who a token is */
        assert_int_equal(ui_authenticate(users, 1, (const unsigned char(*)[32]) & api_digest, 1,
                                         VW_TOKEN, strlen(VW_TOKEN), user, &role),
                         0);
        assert_string_equal(user, "vera");
        assert_int_equal(role, UI_ROLE_VIEWER);
        assert_int_equal(ui_authenticate(users, 1, (const unsigned char(*)[32]) & api_digest, 1,
                                         API_TOKEN, strlen(API_TOKEN), user, &role),
                         0);
        assert_string_equal(user, UI_API_TOKEN_USER);
        assert_int_equal(role, UI_ROLE_OPERATOR);
        assert_int_equal(
            ui_authenticate(users, 1, NULL, 0, API_TOKEN, strlen(API_TOKEN), user, &role),
            TG_ENOTFOUND); /* no API token configured */
        assert_int_equal(ui_authenticate(users, 1, (const unsigned char(*)[32]) & api_digest, 1,
                                         "vera", 4, user, &role),
                         TG_ENOTFOUND);
        assert_int_equal(ui_authenticate(users, 1, (const unsigned char(*)[32]) & api_digest, 1, "",
                                         0, user, &role),
                         TG_ENOTFOUND);

        ui_sessions_init(&t, 1000, 5000);
        assert_int_equal(ui_session_create(&t, "vera", UI_ROLE_VIEWER, 100000, cookie, &s), 0);
        assert_int_equal(strlen(cookie), 64);
        assert_int_equal(strlen(s->csrf), 64);
        assert_string_not_equal(cookie, s->csrf);
        snprintf(header, sizeof(header), "other=1; %s=%s; x=y", UI_COOKIE_NAME, cookie);
        assert_int_equal(ui_session_find(&t, header, 100500, &found), 0);
        assert_ptr_equal(found, s);
        assert_int_equal(ui_session_expires(&t, s), 101500); /* idle from the last use */
        /* CSRF: the session's token only */
        assert_true(ui_session_csrf_ok(s, s->csrf));
        snprintf(hex, sizeof(hex), "%s", s->csrf);
        hex[0] = hex[0] == 'a' ? 'b' : 'a';
        assert_false(ui_session_csrf_ok(s, hex));
        assert_false(ui_session_csrf_ok(s, NULL));
        assert_false(ui_session_csrf_ok(s, ""));
        /* a forged or cut cookie finds nothing */
        snprintf(header, sizeof(header), "%s=%.63s", UI_COOKIE_NAME, cookie);
        assert_int_equal(ui_session_find(&t, header, 100600, &found), TG_ENOTFOUND);
        assert_int_equal(ui_session_find(&t, NULL, 100600, &found), TG_ENOTFOUND);
        /* used within the idle time, it lives on ... */
        snprintf(header, sizeof(header), "%s=%s", UI_COOKIE_NAME, cookie);
        for (tg_wall_ms now = 101000; now < 104900; now += 900)
                CHECK(ui_session_find(&t, header, now, &found) == 0, "ended at %lld",
                      (long long)now);
        /* ... until its maximum age, whatever its use */
        assert_int_equal(ui_session_find(&t, header, 105000, &found), TG_ENOTFOUND);
        assert_false(s->used); /* ended and wiped */
        /* idle: unused for idle_ms ends it */
        assert_int_equal(ui_session_create(&t, "vera", UI_ROLE_VIEWER, 200000, cookie, &s), 0);
        snprintf(header, sizeof(header), "%s=%s", UI_COOKIE_NAME, cookie);
        assert_int_equal(ui_session_find(&t, header, 201000, &found), TG_ENOTFOUND);
        /* a full table replaces the session used least recently */
        for (unsigned i = 0; i < UI_SESSIONS_MAX; i++)
                assert_int_equal(
                    ui_session_create(&t, "vera", UI_ROLE_VIEWER, 300000 + i, cookie, &s), 0);
        snprintf(header, sizeof(header), "%s=%s", UI_COOKIE_NAME, cookie);
        assert_int_equal(ui_session_create(&t, "olga", UI_ROLE_OPERATOR, 300900, cookie, &s), 0);
        assert_int_equal(s->created, 300900);
        assert_int_equal(ui_session_find(&t, header, 300901, &found), 0); /* the newest kept */
        ui_sessions_clear(&t);
}

/* ---- the routes ---------------------------------------------------------------------- */

struct fixture {
        char dir[64];
        struct api *api;
        char cookie[256]; /* "tg_session=..." of the last sign-in */
        char csrf[80];
};

static int setup(void **state)
{
        struct fixture *fx = calloc(1, sizeof(*fx));
        struct tg_config *cfg = calloc(1, sizeof(*cfg));
        unsigned n = 0;

        if (!fx || !cfg)
                return -1;
        snprintf(fx->dir, sizeof(fx->dir), "/tmp/tg-test-ui-XXXXXX");
        if (!mkdtemp(fx->dir))
                return -1;
        config_defaults(cfg);
        snprintf(cfg->store_url, sizeof(cfg->store_url), "sqlite://%s/t.db", fx->dir);
        snprintf(cfg->api_token, sizeof(cfg->api_token), "%s", API_TOKEN);
        cfg->ui_user_count = 2;
        snprintf(cfg->ui_users[0].name, UI_NAME_MAX, "olga");
        cfg->ui_users[0].role = UI_ROLE_OPERATOR;
        EVP_Digest(OP_TOKEN, strlen(OP_TOKEN), cfg->ui_users[0].token_sha256, &n, EVP_sha256(),
                   NULL);
        snprintf(cfg->ui_users[1].name, UI_NAME_MAX, "vera");
        cfg->ui_users[1].role = UI_ROLE_VIEWER;
        EVP_Digest(VW_TOKEN, strlen(VW_TOKEN), cfg->ui_users[1].token_sha256, &n, EVP_sha256(),
                   NULL);
        if (api_new(cfg, &fx->api) != 0)
                return -1;
        free(cfg);
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

struct answer {
        int status;
        char type[64];
        char *body;
        json_t *json;
        char set_cookie[256];
        char location[64];
        char csp[256];
        bool nosniff, frame_deny;
};

static void answer_free(struct answer *a)
{
        free(a->body);
        json_decref(a->json);
        memset(a, 0, sizeof(*a));
}

/* One request as the HTTP layer hands it over (problem_status 0: none);
 * headers: NULL-terminated {name, value} pairs. */
static struct answer call_as(struct api *api, const char *method, const char *path,
                             const char *query, const char *const *headers, const char *body,
                             int problem_status, const char *problem)
{
        struct http_header h[8];
        struct http_request req;
        struct http_response res;
        struct answer a;
        size_t n = 0;

        memset(&a, 0, sizeof(a));
        for (size_t i = 0; headers && headers[i]; i += 2) {
                assert_true(n < 8);
                h[n].name = headers[i];
                h[n].value = headers[i + 1];
                n++;
        }
        memset(&req, 0, sizeof(req));
        req.method = method;
        req.path = path;
        req.query = query ? query : "";
        req.headers = h;
        req.header_count = n;
        req.body = body ? body : "";
        req.body_len = body ? strlen(body) : 0;
        req.problem_status = problem_status;
        req.problem = problem;
        http_response_init(&res);
        assert_int_equal(api_handle(api, &req, &res), 0);
        a.status = res.status;
        snprintf(a.type, sizeof(a.type), "%s", res.content_type);
        a.body = calloc(1, res.body_len + 1);
        assert_non_null(a.body);
        if (res.body_len)
                memcpy(a.body, res.body, res.body_len);
        a.json = json_loadb(res.body, res.body_len, 0, NULL);
        for (unsigned i = 0; i < res.header_count; i++) {
                const char *name = res.headers[i].name, *v = res.headers[i].value;
                if (strcmp(name, "Set-Cookie") == 0)
                        snprintf(a.set_cookie, sizeof(a.set_cookie), "%s", v);
                if (strcmp(name, "Location") == 0)
                        snprintf(a.location, sizeof(a.location), "%s", v);
                if (strcmp(name, "Content-Security-Policy") == 0)
                        snprintf(a.csp, sizeof(a.csp), "%s", v);
                if (strcmp(name, "X-Content-Type-Options") == 0 && strcmp(v, "nosniff") == 0)
                        a.nosniff = true;
                if (strcmp(name, "X-Frame-Options") == 0 && strcmp(v, "DENY") == 0)
                        a.frame_deny = true;
        }
        http_response_release(&res);
        return a;
}

static struct answer call(struct api *api, const char *method, const char *path, const char *query,
                          const char *const *headers, const char *body)
{
        return call_as(api, method, path, query, headers, body, 0, NULL);
}

static const char *code_of(const struct answer *a)
{
        const char *c =
            json_string_value(json_object_get(json_object_get(a->json, "error"), "code"));
        return c ? c : "";
}

/* Signs in with token; keeps the cookie and CSRF token in fx. */
static void sign_in(struct fixture *fx, const char *token, const char *expect_user)
{
        const char *hdr[] = {"Content-Type", "application/json", NULL};
        char body[128];
        struct answer a;
        char *semi;

        snprintf(body, sizeof(body), "{\"token\":\"%s\"}", token);
        a = call(fx->api, "POST", "/ui/api/login", NULL, hdr, body);
        CHECK(a.status == 200, "sign-in with %s: %d %s", token, a.status, a.body);
        assert_string_equal(json_string_value(json_object_get(a.json, "user")), expect_user);
        /* the cookie: HttpOnly, SameSite=Strict, the console's path only */
        assert_non_null(strstr(a.set_cookie, UI_COOKIE_NAME "="));
        assert_non_null(strstr(a.set_cookie, "; HttpOnly"));
        assert_non_null(strstr(a.set_cookie, "; SameSite=Strict"));
        assert_non_null(strstr(a.set_cookie, "; Path=/ui"));
        assert_non_null(strstr(a.set_cookie, "; Max-Age="));
        assert_null(strstr(a.set_cookie, "Secure")); /* ui.secure_cookie off */
        /* the token itself is never sent back */
        assert_null(strstr(a.body, token));
        snprintf(fx->cookie, sizeof(fx->cookie), "%s", a.set_cookie);
        semi = strchr(fx->cookie, ';');
        if (semi)
                *semi = '\0';
        snprintf(fx->csrf, sizeof(fx->csrf), "%s",
                 json_string_value(json_object_get(a.json, "csrf")));
        answer_free(&a);
}

static void make_manual(struct api *api, const char *id)
{
        struct refund_request rr;
        struct op_record op;
        bool created = false;
        unsigned n = 0;

        memset(&rr, 0, sizeof(rr));
        snprintf(rr.operation_id, sizeof(rr.operation_id), "%s", id);
        snprintf(rr.payment_id, sizeof(rr.payment_id), "pay-%s", id);
        rr.amount = 1500;
        snprintf(rr.currency, sizeof(rr.currency), "TWD");
        assert_int_equal(
            store_accept(api->store, &rr, api_wall_now(), &api->cfg.policy, &created, &op), 0);
        assert_int_equal(
            store_sweep_deadlines(api->store, 0, api_wall_now() + 24 * 3600 * 1000LL, &n), 0);
        assert_int_equal(store_get(api->store, id, &op), 0);
        assert_int_equal(op.state, OP_MANUAL);
}

struct audit_seen {
        unsigned n;
        char last_operator[TG_TEXT_MAX];
        char last_action[32];
        char last_reason[TG_TEXT_MAX];
};

static int on_audit(const struct audit_record *r, void *userdata)
{
        struct audit_seen *s = userdata;

        s->n++;
        snprintf(s->last_operator, sizeof(s->last_operator), "%s", r->operator_name);
        snprintf(s->last_action, sizeof(s->last_action), "%s", r->action);
        snprintf(s->last_reason, sizeof(s->last_reason), "%s", r->reason);
        return 0;
}

static struct audit_seen audit_of(struct api *api, const char *id)
{
        struct audit_seen s;
        struct op_record op;

        memset(&s, 0, sizeof(s));
        assert_int_equal(store_get(api->store, id, &op), 0);
        assert_int_equal(store_list_audit(api->store, op.id, on_audit, &s), 0);
        return s;
}

static void test_pages_and_headers(void **state)
{
        struct fixture *fx = *state;
        struct answer a;
        const char *with_cookie[] = {"Cookie", NULL, NULL};

        if (web_asset_count == 0)
                skip(); /* built with -DTG_CONSOLE=OFF */
        /* no session: the sign-in page, with the security headers */
        a = call(fx->api, "GET", "/ui", NULL, NULL, NULL);
        assert_int_equal(a.status, 200);
        assert_string_equal(a.type, "text/html; charset=utf-8");
        assert_non_null(strstr(a.body, "signin-form"));
        assert_non_null(strstr(a.csp, "script-src 'self'"));
        assert_non_null(strstr(a.csp, "default-src 'none'"));
        assert_non_null(strstr(a.csp, "frame-ancestors 'none'"));
        assert_null(strstr(a.csp, "unsafe-inline"));
        assert_null(strstr(a.csp, "unsafe-eval"));
        assert_true(a.nosniff);
        assert_true(a.frame_deny);
        /* no inline script in any page: every <script> names a src */
        assert_null(strstr(a.body, "<script>"));
        answer_free(&a);
        /* the data routes refuse without a session */
        a = call(fx->api, "GET", "/ui/api/live", NULL, NULL, NULL);
        assert_int_equal(a.status, 401);
        assert_non_null(a.csp[0] ? a.csp : NULL);
        answer_free(&a);
        /* assets are served; pages only at /ui */
        a = call(fx->api, "GET", "/ui/assets/app.js", NULL, NULL, NULL);
        assert_int_equal(a.status, 200);
        assert_string_equal(a.type, "text/javascript; charset=utf-8");
        answer_free(&a);
        a = call(fx->api, "GET", "/ui/assets/uPlot.iife.min.js", NULL, NULL, NULL);
        assert_int_equal(a.status, 200);
        answer_free(&a);
        a = call(fx->api, "GET", "/ui/assets/app.html", NULL, NULL, NULL);
        assert_int_equal(a.status, 404);
        answer_free(&a);
        /* signed in: the app, whose scripts are files too */
        sign_in(fx, OP_TOKEN, "olga");
        with_cookie[1] = fx->cookie;
        a = call(fx->api, "GET", "/ui", NULL, with_cookie, NULL);
        assert_int_equal(a.status, 200);
        assert_non_null(strstr(a.body, "/ui/assets/app.js"));
        assert_null(strstr(a.body, "<script>"));
        answer_free(&a);
}

/* The doors people type: "/" and "/ui/" lead to /ui by a redirect (the
 * HTTP layer hands "/ui/" over as a 400, an empty segment), never to a JSON
 * error; other methods keep their answers, and "/" leads nowhere without a
 * console. */
static void test_front_doors(void **state)
{
        static const char empty_segment[] = "request path has an empty segment";
        struct fixture *fx = *state;
        struct answer a;

        if (web_asset_count == 0)
                skip(); /* built with -DTG_CONSOLE=OFF */
        const struct {
                const char *method, *path;
                int problem_status;
        } doors[] = {
            {"GET", "/", 0},       {"HEAD", "/", 0},   {"GET", "/ui/", 400},
            {"HEAD", "/ui/", 400}, {"GET", "/ui/", 0},
        };
        for (size_t i = 0; i < sizeof(doors) / sizeof(doors[0]); i++) {
                a = call_as(fx->api, doors[i].method, doors[i].path, "x=1", NULL, NULL,
                            doors[i].problem_status,
                            doors[i].problem_status ? empty_segment : NULL);
                CHECK(a.status == 302, "%s %s: %d", doors[i].method, doors[i].path, a.status);
                assert_string_equal(a.location, "/ui");
                assert_string_equal(a.type, "text/plain; charset=utf-8");
                assert_null(a.json);
                assert_non_null(strstr(a.csp, "default-src 'none'"));
                assert_true(a.nosniff);
                answer_free(&a);
        }
        /* where the redirect leads: the sign-in page */
        a = call(fx->api, "GET", "/ui", NULL, NULL, NULL);
        assert_int_equal(a.status, 200);
        assert_non_null(strstr(a.body, "signin-form"));
        answer_free(&a);
        /* other methods, and other problems, answer as before */
        a = call_as(fx->api, "POST", "/ui/", NULL, NULL, NULL, 400, empty_segment);
        assert_int_equal(a.status, 400);
        assert_string_equal(code_of(&a), "invalid_request");
        answer_free(&a);
        a = call(fx->api, "POST", "/", NULL, NULL, NULL);
        assert_int_equal(a.status, 404);
        assert_string_equal(code_of(&a), "not_found");
        answer_free(&a);
        a = call_as(fx->api, "GET", "/", NULL, NULL, NULL, 431, "too many request headers");
        assert_int_equal(a.status, 431);
        answer_free(&a);
        a = call_as(fx->api, "GET", "/ui//", NULL, NULL, NULL, 400, empty_segment);
        assert_int_equal(a.status, 400);
        answer_free(&a);
        a = call(fx->api, "GET", "/uix", NULL, NULL, NULL);
        assert_int_equal(a.status, 404);
        answer_free(&a);
}

/* With the console off, "/" is no door (404 as any unknown route) and
 * "/ui/" answers what /ui does: the console is off. */
static void test_front_doors_console_off(void **state)
{
        struct fixture *fx = calloc(1, sizeof(*fx));
        struct tg_config *cfg = calloc(1, sizeof(*cfg));
        struct answer a;

        (void)state;
        assert_non_null(fx);
        assert_non_null(cfg);
        snprintf(fx->dir, sizeof(fx->dir), "/tmp/tg-test-ui-XXXXXX");
        assert_non_null(mkdtemp(fx->dir));
        config_defaults(cfg);
        snprintf(cfg->store_url, sizeof(cfg->store_url), "sqlite://%s/t.db", fx->dir);
        snprintf(cfg->api_token, sizeof(cfg->api_token), "%s", API_TOKEN);
        cfg->ui_enabled = false;
        assert_int_equal(api_new(cfg, &fx->api), 0);
        free(cfg);
        a = call(fx->api, "GET", "/", NULL, NULL, NULL);
        assert_int_equal(a.status, 404);
        assert_string_equal(code_of(&a), "not_found");
        assert_string_equal(a.location, "");
        answer_free(&a);
        a = call_as(fx->api, "GET", "/ui/", NULL, NULL, NULL, 400,
                    "request path has an empty segment");
        assert_int_equal(a.status, 404);
        assert_non_null(strstr(a.body, "the console is off"));
        answer_free(&a);
        void *st = fx;
        assert_int_equal(teardown(&st), 0);
}

static void test_sign_in_guards(void **state)
{
        struct fixture *fx = *state;
        const char *json[] = {"Content-Type", "application/json", NULL};
        const char *text[] = {"Content-Type", "text/plain", NULL};
        const char *cross[] = {"Content-Type", "application/json", "Origin", "http://evil.test",
                               "Host",         "127.0.0.1:8080",   NULL};
        const char *same[] = {"Content-Type", "application/json", "Origin", "http://127.0.0.1:8080",
                              "Host",         "127.0.0.1:8080",   NULL};
        const char *site[] = {"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site",
                              NULL};
        struct answer a;

        if (web_asset_count == 0)
                skip(); /* built with -DTG_CONSOLE=OFF: no /ui at all */

        a = call(fx->api, "POST", "/ui/api/login", NULL, json, "{\"token\":\"nope\"}");
        assert_int_equal(a.status, 401);
        assert_string_equal(a.set_cookie, "");
        answer_free(&a);
        a = call(fx->api, "POST", "/ui/api/login", NULL, text, "{\"token\":\"" OP_TOKEN "\"}");
        assert_int_equal(a.status, 415);
        answer_free(&a);
        a = call(fx->api, "POST", "/ui/api/login", NULL, cross, "{\"token\":\"" OP_TOKEN "\"}");
        assert_int_equal(a.status, 403);
        assert_string_equal(code_of(&a), "cross_origin");
        assert_string_equal(a.set_cookie, "");
        answer_free(&a);
        a = call(fx->api, "POST", "/ui/api/login", NULL, site, "{\"token\":\"" OP_TOKEN "\"}");
        assert_int_equal(a.status, 403);
        answer_free(&a);
        a = call(fx->api, "POST", "/ui/api/login", NULL, same, "{\"token\":\"" OP_TOKEN "\"}");
        assert_int_equal(a.status, 200);
        answer_free(&a);
        a = call(fx->api, "GET", "/ui/api/login", NULL, json, NULL);
        assert_int_equal(a.status, 405);
        answer_free(&a);
        a = call(fx->api, "POST", "/ui/api/login", NULL, json, "[\"" OP_TOKEN "\"]");
        assert_int_equal(a.status, 422);
        answer_free(&a);
        /* the API token signs in as the operator api-token */
        sign_in(fx, API_TOKEN, UI_API_TOKEN_USER);
        /* guessing is slowed down: after 20 failures in a minute, 429 */
        for (int i = 0; i < 20; i++) {
                a = call(fx->api, "POST", "/ui/api/login", NULL, json, "{\"token\":\"guess\"}");
                answer_free(&a);
        }
        a = call(fx->api, "POST", "/ui/api/login", NULL, json, "{\"token\":\"" OP_TOKEN "\"}");
        assert_int_equal(a.status, 429);
        answer_free(&a);
}

/* Four-eyes from the console (manual.approval_above): a re-send at or above
 * it is a request; its requester cannot approve it (403 self_approval), a
 * viewer may not (403 forbidden), another operator does, and the re-send
 * is audited as the requester's. */
static void test_console_four_eyes(void **state)
{
        struct fixture *fx = *state;
        const char *hdr[] = {"Cookie", NULL, "Content-Type", "application/json", "X-CSRF-Token",
                             NULL,     NULL};
        char cookie_op[256], csrf_op[80];
        struct audit_seen au;
        struct answer a;

        if (web_asset_count == 0)
                skip();
        fx->api->cfg.manual_approval_above = 1000; /* make_manual's refunds are 1500 */
        make_manual(fx->api, "op-4e");
        sign_in(fx, OP_TOKEN, "olga");
        snprintf(cookie_op, sizeof(cookie_op), "%s", fx->cookie);
        snprintf(csrf_op, sizeof(csrf_op), "%s", fx->csrf);
        hdr[1] = cookie_op;
        hdr[5] = csrf_op;
        a = call(fx->api, "POST", "/ui/api/ops/op-4e/resend", NULL, hdr, "{\"note\":\"n\"}");
        CHECK(a.status == 202, "request: %d %s", a.status, a.body);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(a.json, "approval"), "status")),
            "requested");
        assert_string_equal(json_string_value(json_object_get(a.json, "state")), "manual");
        answer_free(&a);
        a = call(fx->api, "POST", "/ui/api/ops/op-4e/approve", NULL, hdr, "{}");
        assert_int_equal(a.status, 403);
        assert_string_equal(code_of(&a), "self_approval");
        answer_free(&a);
        sign_in(fx, VW_TOKEN, "vera");
        hdr[1] = fx->cookie;
        hdr[5] = fx->csrf;
        a = call(fx->api, "POST", "/ui/api/ops/op-4e/approve", NULL, hdr, "{}");
        assert_int_equal(a.status, 403);
        assert_string_equal(code_of(&a), "forbidden");
        answer_free(&a);
        assert_string_equal(audit_of(fx->api, "op-4e").last_action, "request_resend");
        sign_in(fx, API_TOKEN, "api-token");
        hdr[1] = fx->cookie;
        hdr[5] = fx->csrf;
        a = call(fx->api, "POST", "/ui/api/ops/op-4e/approve", NULL, hdr, "{}");
        CHECK(a.status == 202, "approve: %d %s", a.status, a.body);
        assert_string_equal(json_string_value(json_object_get(a.json, "state")), "retry_wait");
        answer_free(&a);
        au = audit_of(fx->api, "op-4e");
        assert_string_equal(au.last_action, "resend");
        assert_string_equal(au.last_operator, "olga");
}

static void test_actions(void **state)
{
        struct fixture *fx = *state;
        const char *hdr[8];
        struct answer a;
        struct audit_seen au;
        char csrf_op[80];
        char cookie_op[256];

        if (web_asset_count == 0)
                skip(); /* built with -DTG_CONSOLE=OFF: no /ui at all */

        make_manual(fx->api, "op-desk-1");
        make_manual(fx->api, "op-desk-2");
        sign_in(fx, OP_TOKEN, "olga");
        snprintf(csrf_op, sizeof(csrf_op), "%s", fx->csrf);
        snprintf(cookie_op, sizeof(cookie_op), "%s", fx->cookie);

        /* the desk lists them */
        hdr[0] = "Cookie";
        hdr[1] = cookie_op;
        hdr[2] = NULL;
        a = call(fx->api, "GET", "/ui/api/manual", NULL, hdr, NULL);
        assert_int_equal(a.status, 200);
        assert_int_equal(json_integer_value(json_object_get(a.json, "count")), 2);
        answer_free(&a);

        /* no CSRF token: refused, nothing changed */
        hdr[2] = "Content-Type";
        hdr[3] = "application/json";
        hdr[4] = NULL;
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-1/resend", NULL, hdr, "{}");
        assert_int_equal(a.status, 403);
        assert_string_equal(code_of(&a), "csrf");
        answer_free(&a);
        /* a wrong one: refused */
        hdr[4] = "X-CSRF-Token";
        hdr[5] = "0000000000000000000000000000000000000000000000000000000000000000";
        hdr[6] = NULL;
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-1/resend", NULL, hdr, "{}");
        assert_int_equal(a.status, 403);
        answer_free(&a);
        assert_int_equal(audit_of(fx->api, "op-desk-1").n, 1); /* the sweep's row only */

        /* a viewer, with its own valid CSRF token: 403 */
        sign_in(fx, VW_TOKEN, "vera");
        hdr[1] = fx->cookie;
        hdr[5] = fx->csrf;
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-1/resend", NULL, hdr, "{}");
        assert_int_equal(a.status, 403);
        assert_string_equal(code_of(&a), "forbidden");
        answer_free(&a);
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-1/resolve", NULL, hdr,
                 "{\"outcome\":\"succeeded\",\"note\":\"x\"}");
        assert_int_equal(a.status, 403);
        answer_free(&a);
        assert_int_equal(audit_of(fx->api, "op-desk-1").n, 1);
        /* the viewer's token does not pass for the operator's session */
        hdr[1] = cookie_op;
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-1/resend", NULL, hdr, "{}");
        assert_int_equal(a.status, 403);
        answer_free(&a);

        /* the operator resends: audited with her name */
        hdr[5] = csrf_op;
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-1/resend", NULL, hdr,
                 "{\"note\":\"provider says retry\"}");
        CHECK(a.status == 200, "resend: %d %s", a.status, a.body);
        assert_string_equal(json_string_value(json_object_get(a.json, "state")), "retry_wait");
        answer_free(&a);
        au = audit_of(fx->api, "op-desk-1");
        assert_int_equal(au.n, 2);
        assert_string_equal(au.last_action, "resend");
        assert_string_equal(au.last_operator, "olga");
        assert_string_equal(au.last_reason, "provider says retry");
        /* once only */
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-1/resend", NULL, hdr, "{}");
        assert_int_equal(a.status, 409);
        answer_free(&a);

        /* resolve needs a note and an outcome */
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-2/resolve", NULL, hdr,
                 "{\"outcome\":\"succeeded\"}");
        assert_int_equal(a.status, 422);
        answer_free(&a);
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-2/resolve", NULL, hdr,
                 "{\"outcome\":\"maybe\",\"note\":\"checked\"}");
        assert_int_equal(a.status, 422);
        answer_free(&a);
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-2/resolve", NULL, hdr,
                 "{\"outcome\":\"failed\",\"note\":\"checked\",\"operator\":\"mallory\"}");
        assert_int_equal(a.status, 422); /* the operator is the session's, never the body's */
        answer_free(&a);
        a = call(fx->api, "POST", "/ui/api/ops/op-desk-2/resolve", NULL, hdr,
                 "{\"outcome\":\"failed\",\"note\":\"the provider's statement says no\"}");
        assert_int_equal(a.status, 200);
        assert_string_equal(json_string_value(json_object_get(a.json, "state")), "rejected");
        answer_free(&a);
        au = audit_of(fx->api, "op-desk-2");
        assert_string_equal(au.last_action, "resolve");
        assert_string_equal(au.last_operator, "olga");

        /* one operation, with its audit trail */
        hdr[2] = NULL;
        a = call(fx->api, "GET", "/ui/api/ops/op-desk-2", NULL, hdr, NULL);
        assert_int_equal(a.status, 200);
        assert_int_equal(json_array_size(json_object_get(a.json, "audit")), 2);
        answer_free(&a);
        a = call(fx->api, "GET", "/ui/api/ops", "state=rejected", hdr, NULL);
        assert_int_equal(a.status, 200);
        assert_int_equal(json_integer_value(json_object_get(a.json, "count")), 1);
        answer_free(&a);
        a = call(fx->api, "GET", "/ui/api/ops", "state=bogus", hdr, NULL);
        assert_int_equal(a.status, 400);
        answer_free(&a);

        /* sign-out ends the session: the cookie no longer opens anything */
        hdr[2] = "Content-Type";
        hdr[3] = "application/json";
        hdr[4] = "X-CSRF-Token";
        hdr[5] = csrf_op;
        hdr[6] = NULL;
        a = call(fx->api, "POST", "/ui/api/logout", NULL, hdr, "{}");
        assert_int_equal(a.status, 200);
        assert_non_null(strstr(a.set_cookie, "Max-Age=0"));
        answer_free(&a);
        hdr[2] = NULL;
        a = call(fx->api, "GET", "/ui/api/session", NULL, hdr, NULL);
        assert_int_equal(a.status, 401);
        answer_free(&a);
}

/* Fifty dashboards polling: one store read per UI_LIVE_TTL_MS. */
static void test_live_is_one_read(void **state)
{
        struct fixture *fx = *state;
        const char *hdr[] = {"Cookie", NULL, NULL};
        struct answer a;
        uint64_t before;

        if (web_asset_count == 0)
                skip(); /* built with -DTG_CONSOLE=OFF: no /ui at all */

        sign_in(fx, VW_TOKEN, "vera");
        hdr[1] = fx->cookie;
        a = call(fx->api, "GET", "/ui/api/live", NULL, hdr, NULL);
        assert_int_equal(a.status, 200);
        assert_non_null(json_object_get(a.json, "status"));
        assert_non_null(json_object_get(json_object_get(a.json, "series"), "t"));
        answer_free(&a);
        before = fx->api->ui->lives[0].reads;
        for (int i = 0; i < 50; i++) {
                a = call(fx->api, "GET", "/ui/api/live", "since=1", hdr, NULL);
                assert_int_equal(a.status, 200);
                answer_free(&a);
        }
        /* at most one more read: the cache may have expired once meanwhile */
        CHECK(fx->api->ui->lives[0].reads - before <= 1, "%llu reads for 50 polls",
              (unsigned long long)(fx->api->ui->lives[0].reads - before));
        a = call(fx->api, "GET", "/ui/api/live", "since=-4", hdr, NULL);
        assert_int_equal(a.status, 400);
        answer_free(&a);
}

struct refusals_sum {
        unsigned seconds, refused;
};

static int sum_refusals(const struct refusal_second *r, void *userdata)
{
        struct refusals_sum *s = userdata;

        s->seconds++;
        s->refused += r->refused;
        return 0;
}

/* Refunds refused by admission control are counted per second into the
 * store (for the timeline's band), written at most about once a second. */
static void test_refusals_counted(void **state)
{
        struct fixture *fx = *state;
        struct refusals_sum sum = {0};
        const char *hdr[] = {"Authorization", "Bearer " API_TOKEN, "Content-Type",
                             "application/json", NULL};
        char body[160];
        int refused = 0;

        fx->api->cfg.admission.max_backlog = 1;
        for (int i = 0; i < 6; i++) {
                struct answer a;
                snprintf(body, sizeof(body),
                         "{\"operation_id\":\"adm-%d\",\"payment_id\":\"p\",\"amount\":5,"
                         "\"currency\":\"TWD\"}",
                         i);
                a = call(fx->api, "POST", "/v1/refunds", NULL, hdr, body);
                if (a.status == 503)
                        refused++;
                answer_free(&a);
        }
        assert_int_equal(refused, 5); /* the first fills the backlog */
        api_refusals_flush(fx->api, api_wall_now(), true);
        assert_int_equal(store_list_refusals(fx->api->store, 0, 100, sum_refusals, &sum), 0);
        assert_int_equal(sum.refused, 5);
        assert_true(sum.seconds >= 1 && sum.seconds <= 2);
}

/* ---- the timeline from stored samples --------------------------------------------- */

static void put_sample(struct store *s, tg_wall_ms at, unsigned share, int64_t epoch,
                       unsigned starts, bool held)
{
        struct exit_sample *x = calloc(1, sizeof(*x));

        assert_non_null(x);
        x->at = at;
        x->share = share;
        x->epoch = epoch;
        x->starts = starts;
        x->op_closes = starts;
        x->in_flight = starts;
        x->held = held;
        assert_int_equal(store_sample_put(s, x, 0, 0), 0);
        free(x);
}

static void test_timeline(void **state)
{
        struct fixture *fx = *state;
        struct store *s = fx->api->store;
        const tg_wall_ms T0 = 1700000000000LL;
        struct timeline_series se;
        json_t *j;

        /* 10 seconds; a hold in seconds 3-4; the owner changes at 6; a gap at 8 */
        for (int i = 0; i < 10; i++) {
                if (i == 8)
                        continue;
                put_sample(s, T0 + i * 1000 + 900, 0, i < 6 ? 2 : 3, (unsigned)i, i == 3 || i == 4);
        }
        /* a second share in second 2: counts add up in the account's second */
        put_sample(s, T0 + 2000 + 950, 1, 4, 5, false);
        assert_int_equal(store_refusals_add(s, T0 + 7000, 3, 0), 0);
        assert_int_equal(store_refusals_add(s, T0 + 8000, 2, 0), 0); /* no sample: still shown */

        assert_int_equal(timeline_read(s, T0, T0 + 10000, 100, &se), 0);
        assert_int_equal(se.step_s, 1);
        assert_int_equal(se.n, 10); /* 9 sampled seconds and one of refusals only */
        assert_int_equal(se.points[2].at, T0 + 2000);
        assert_true(se.points[2].starts == 2 + 5);
        assert_false(se.points[2].held);
        assert_true(se.points[3].held && se.points[4].held);
        assert_int_equal(se.points[5].epoch, 2);
        assert_int_equal(se.points[6].epoch, 3);
        assert_int_equal(se.points[7].refused, 3);
        assert_int_equal(se.points[8].seconds, 0);
        assert_int_equal(se.points[8].refused, 2);
        j = timeline_series_json(&se, INT64_MIN, &fx->api->cfg);
        assert_non_null(j);
        assert_int_equal(json_array_size(json_object_get(j, "t")), 10);
        assert_true(json_is_null(json_array_get(json_object_get(j, "starts"), 8)));
        assert_int_equal(json_integer_value(json_array_get(json_object_get(j, "held"), 3)), 1);
        json_decref(j);
        /* only the points after a time (the live poll's since) */
        j = timeline_series_json(&se, T0 + 7000, &fx->api->cfg);
        assert_int_equal(json_array_size(json_object_get(j, "t")), 2);
        json_decref(j);
        timeline_series_free(&se);

        /* binned: 5 s bins, means of rates, max of gauges, held if any */
        assert_int_equal(timeline_read(s, T0, T0 + 10000, 2, &se), 0);
        assert_int_equal(se.step_s, 5);
        assert_int_equal(se.n, 2);
        assert_true(se.points[0].held);
        assert_int_equal(se.points[0].in_flight, 2 + 5); /* second 2, two shares summed */
        assert_true(se.points[0].starts == (0 + 1 + 7 + 3 + 4) / 5.0);
        assert_int_equal(se.points[1].refused, 5);
        assert_int_equal(se.points[1].epoch, 3);
        timeline_series_free(&se);
        assert_int_equal(timeline_read(s, T0, T0, 2, &se), TG_EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_users_file),
            cmocka_unit_test(test_sessions),
            cmocka_unit_test_setup_teardown(test_pages_and_headers, setup, teardown),
            cmocka_unit_test_setup_teardown(test_front_doors, setup, teardown),
            cmocka_unit_test(test_front_doors_console_off),
            cmocka_unit_test_setup_teardown(test_sign_in_guards, setup, teardown),
            cmocka_unit_test_setup_teardown(test_actions, setup, teardown),
            cmocka_unit_test_setup_teardown(test_console_four_eyes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_live_is_one_read, setup, teardown),
            cmocka_unit_test_setup_teardown(test_refusals_counted, setup, teardown),
            cmocka_unit_test_setup_teardown(test_timeline, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
