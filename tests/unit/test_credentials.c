/*
 * Unit tests of the named API credentials (daemon/credentials.h) and of who
 * may call which route (api_auth.c): the file's grammar, matching a secret,
 * and the whole route x scope table walked through api_handle() over a
 * real SQLite store: every route refused without its scope (403 with a JSON
 * error code, counted by reason in /metrics), allowed with it; a revoked
 * credential refused; the audit naming the credential, and a body operator
 * that names someone else refused with nothing stored.
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

#include "core/tg_error.h"
#include "daemon/api.h"
#include "daemon/api_int.h"
#include "daemon/config.h"
#include "daemon/credentials.h"
#include "store/store.h"
#include "store/store_events.h"

#define LEGACY "legacy-t0ken"

/* ---- the grammar ------------------------------------------------------------------- */

static void test_scopes_words(void **state)
{
        unsigned s = 0;
        char buf[64];

        (void)state;
        assert_int_equal(credential_scopes_parse("intake", 6, &s), 0);
        assert_int_equal(s, SCOPE_INTAKE);
        assert_int_equal(credential_scopes_parse("read,operator", 13, &s), 0);
        assert_int_equal(s, SCOPE_READ | SCOPE_OPERATOR);
        assert_int_equal(credential_scopes_parse("all", 3, &s), 0);
        assert_int_equal(s, SCOPES_ALL);
        assert_int_equal(credential_scopes_format(SCOPES_ALL, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "intake,read,operator,admin");
        static const char *const bad[] = {"",       ",",    "read,",      ",read",
                                          "reader", "READ", "read,,admin"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(credential_scopes_parse(bad[i], strlen(bad[i]), &s), TG_EINVAL);
}

static void test_new_format_parse_match(void **state)
{
        struct credential a, b, got[4];
        char sa[CREDENTIAL_SECRET_LEN + 1], sb[CREDENTIAL_SECRET_LEN + 1];
        char text[1024], line[CREDENTIAL_LINE_MAX], err[160];
        unsigned n = 0, idx = 99;

        (void)state;
        assert_int_equal(credential_new("orders", SCOPE_INTAKE, &a, sa), 0);
        assert_int_equal(credential_new("alice@ops", SCOPE_READ | SCOPE_OPERATOR, &b, sb), 0);
        assert_int_equal(strlen(sa), CREDENTIAL_SECRET_LEN);
        assert_memory_equal(sa, "tg_", 3);
        assert_string_not_equal(sa, sb);
        assert_memory_not_equal(a.salt, b.salt, CREDENTIAL_SALT_LEN);
        b.revoked = true;
        snprintf(text, sizeof(text), "# name scopes hash\n\n");
        assert_int_equal(credential_format(&a, line, sizeof(line)), 0);
        strncat(text, line, sizeof(text) - strlen(text) - 1);
        assert_int_equal(credential_format(&b, line, sizeof(line)), 0);
        strncat(text, line, sizeof(text) - strlen(text) - 1);
        /* the secret is never in the file */
        assert_null(strstr(text, sa + 3));
        assert_int_equal(credentials_parse(text, strlen(text), got, 4, &n, err, sizeof(err)), 0);
        assert_int_equal(n, 2);
        assert_memory_equal(&got[0], &a, sizeof(a));
        assert_memory_equal(&got[1], &b, sizeof(b));
        assert_int_equal(credentials_match(got, n, sb, strlen(sb), &idx), 0);
        assert_int_equal(idx, 1);
        assert_int_equal(credentials_match(got, n, sa, strlen(sa), &idx), 0);
        assert_int_equal(idx, 0);
        sa[10] ^= 1;
        assert_int_equal(credentials_match(got, n, sa, strlen(sa), &idx), TG_ENOTFOUND);
        assert_int_equal(credentials_match(got, n, sa, strlen(sa) - 1, &idx), TG_ENOTFOUND);
        assert_int_equal(credentials_match(got, n, "", 0, &idx), TG_ENOTFOUND);
        /* a bad name, no scope */
        assert_int_equal(credential_new("a b", SCOPE_READ, &a, sa), TG_EINVAL);
        assert_int_equal(credential_new("x", 0, &a, sa), TG_EINVAL);
}

static void test_parse_refusals(void **state)
{
        static const char h[] = "hmac-sha256:000102030405060708090a0b0c0d0e0f:"
                                "000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f";
        struct {
                const char *fmt, *want;
        } bad[] = {
            {"al ice read %s\n", "line 1: the scopes"},
            {"alice reed %s\n", "line 1: the scopes"},
            {"alice read sha256:00\n", "line 1: the third field"},
            {"alice read %s maybe\n", "line 1: a line is"},
            {"alice read %s\nalice intake %s\n", "line 2: this name is used twice"},
            {"al/ice read %s\n", "line 1: a name is made of"},
        };
        struct credential got[4];
        char text[600], err[160];
        unsigned n = 0;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(text, sizeof(text), bad[i].fmt, h, h);
                err[0] = '\0';
                assert_int_equal(
                    credentials_parse(text, strlen(text), got, 4, &n, err, sizeof(err)), TG_EPARSE);
                if (strncmp(err, bad[i].want, strlen(bad[i].want)) != 0)
                        fail_msg("%s: got \"%s\"", bad[i].fmt, err);
                assert_null(strstr(err, "0a0b")); /* never echoes a digest */
        }
        snprintf(text, sizeof(text), "a read %s\nb read %s\nc read %s\n", h, h, h);
        assert_int_equal(credentials_parse(text, strlen(text), got, 2, &n, err, sizeof(err)),
                         TG_EFULL);
}

/* ---- the route x scope walk ------------------------------------------------------------- */

/* One credential per scope, one with every scope (named "boss"), one
 * revoked: secrets[i] for creds[i]. */
enum { C_INTAKE, C_READ, C_OPERATOR, C_ADMIN, C_BOSS, C_REVOKED, C_COUNT };
static const char *const cred_names[C_COUNT] = {"orders", "dashboard", "alice",
                                                "root",   "boss",      "old"};

struct fixture {
        char dir[64];
        struct api *api;
        char secrets[C_COUNT][CREDENTIAL_SECRET_LEN + 1];
        char auth[C_COUNT][CREDENTIAL_SECRET_LEN + 16];
};

static int setup(void **state)
{
        struct fixture *fx = calloc(1, sizeof(*fx));
        struct tg_config *cfg = calloc(1, sizeof(*cfg));
        static const unsigned scopes[C_COUNT] = {SCOPE_INTAKE, SCOPE_READ, SCOPE_OPERATOR,
                                                 SCOPE_ADMIN,  SCOPES_ALL, SCOPES_ALL};

        if (!fx || !cfg)
                return -1;
        snprintf(fx->dir, sizeof(fx->dir), "/tmp/tg-test-creds-XXXXXX");
        if (!mkdtemp(fx->dir))
                return -1;
        config_defaults(cfg);
        snprintf(cfg->store_url, sizeof(cfg->store_url), "sqlite://%s/t.db", fx->dir);
        snprintf(cfg->api_token, sizeof(cfg->api_token), "%s", LEGACY);
        snprintf(cfg->api_credentials_file, sizeof(cfg->api_credentials_file), "%s/creds", fx->dir);
        cfg->api_metrics_need_token = true;
        cfg->manual_approval_above = 1000;
        for (unsigned i = 0; i < C_COUNT; i++) {
                if (credential_new(cred_names[i], scopes[i], &cfg->api_credentials[i],
                                   fx->secrets[i]) != 0)
                        return -1;
                snprintf(fx->auth[i], sizeof(fx->auth[i]), "Bearer %s", fx->secrets[i]);
        }
        cfg->api_credentials[C_REVOKED].revoked = true;
        cfg->api_credential_count = C_COUNT;
        if (api_new(cfg, &fx->api) != 0)
                return -1;
        free(cfg);
        *state = fx;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *fx = *state;
        char cmd[128];

        api_stop(fx->api);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
        if (system(cmd) != 0)
                return -1;
        free(fx);
        return 0;
}

struct answer {
        int status;
        char code[64];
        char *body;
};

static struct answer ask(struct api *api, const char *method, const char *path, const char *auth,
                         const char *body)
{
        struct http_header headers[2];
        struct http_request req;
        struct http_response res;
        struct answer a;
        size_t n = 0;
        json_t *j, *code;

        memset(&a, 0, sizeof(a));
        if (auth) {
                headers[n].name = "Authorization";
                headers[n++].value = auth;
        }
        headers[n].name = "Content-Type";
        headers[n++].value = "application/json";
        memset(&req, 0, sizeof(req));
        req.method = method;
        req.path = path;
        req.query = "";
        req.headers = headers;
        req.header_count = n;
        req.body = body ? body : "";
        req.body_len = body ? strlen(body) : 0;
        http_response_init(&res);
        assert_int_equal(api_handle(api, &req, &res), 0);
        a.status = res.status;
        a.body = strndup(res.body ? res.body : "", res.body_len);
        j = json_loadb(res.body, res.body_len, 0, NULL);
        code = json_object_get(json_object_get(j, "error"), "code");
        if (json_is_string(code))
                snprintf(a.code, sizeof(a.code), "%s", json_string_value(code));
        json_decref(j);
        http_response_release(&res);
        return a;
}

static unsigned long long counted(struct fixture *fx, const char *reason)
{
        struct answer a = ask(fx->api, "GET", "/metrics", fx->auth[C_BOSS], NULL);
        char want[128];
        const char *at;
        unsigned long long v = 0;

        assert_int_equal(a.status, 200);
        snprintf(want, sizeof(want), "tollgate_api_auth_failures_total{reason=\"%s\"} ", reason);
        at = strstr(a.body, want);
        assert_non_null(at);
        v = strtoull(at + strlen(want), NULL, 10);
        free(a.body);
        return v;
}

static void accept_amount(struct fixture *fx, const char *id, int amount)
{
        char body[200];
        struct answer a;

        snprintf(body, sizeof(body),
                 "{\"operation_id\":\"%s\",\"payment_id\":\"pay\",\"amount\":%d,"
                 "\"currency\":\"EUR\"}",
                 id, amount);
        a = ask(fx->api, "POST", "/v1/refunds", fx->auth[C_INTAKE], body);
        assert_int_equal(a.status, 202);
        free(a.body);
}

static void accept_one(struct fixture *fx, const char *id)
{
        accept_amount(fx, id, 5);
}

/* Accepted, then to manual review (deadline), as the dispatcher's sweep would. */
static void to_manual_amount(struct fixture *fx, const char *id, int amount)
{
        unsigned n = 0;

        accept_amount(fx, id, amount);
        assert_int_equal(
            store_sweep_deadlines(fx->api->store, 0, api_wall_now() + 24 * 3600 * 1000LL, &n), 0);
}

static void to_manual(struct fixture *fx, const char *id)
{
        to_manual_amount(fx, id, 5);
}

/* A body each route accepts (so that "allowed" is not a 4xx of its own). */
static const char *body_for(enum api_route r, unsigned serial, char *buf, size_t size)
{
        switch (r) {
        case API_ROUTE_REFUNDS:
                snprintf(buf, size,
                         "{\"operation_id\":\"walk-%u\",\"payment_id\":\"p\",\"amount\":5,"
                         "\"currency\":\"EUR\"}",
                         serial);
                return buf;
        case API_ROUTE_REFUNDS_BATCH:
                snprintf(buf, size,
                         "{\"refunds\":[{\"operation_id\":\"walkb-%u\",\"payment_id\":\"p\","
                         "\"amount\":5,\"currency\":\"EUR\"}]}",
                         serial);
                return buf;
        case API_ROUTE_MANUAL_RESEND:
                return "{\"reason\":\"walk\"}";
        case API_ROUTE_MANUAL_RESOLVE:
                return "{\"reason\":\"walk\",\"outcome\":\"failed\"}";
        case API_ROUTE_MANUAL_ASSIGN:
                return "{\"assignee\":\"bob\"}";
        case API_ROUTE_ACCOUNT:
                return "{\"paused\":false,\"reason\":\"walk\"}";
        default:
                return NULL;
        }
}

/* The newest event's id (a case to manual writes one). */
static int64_t newest_event(struct fixture *fx)
{
        static struct store_event buf[1000];
        int64_t after = 0, last = 0;
        unsigned n = 0;

        do {
                assert_int_equal(
                    store_events_list(fx->api->store, after, STORE_EVENTS_ALL, 1000, buf, &n), 0);
                if (n > 0)
                        last = after = buf[n - 1].id;
        } while (n == 1000);
        assert_true(last > 0);
        return last;
}

/* The path of route r: its {operation_id} a fresh case in manual review, its
 * {event_id} the event of one, its {account} the one account configured. */
static void path_for(struct fixture *fx, enum api_route r, unsigned serial, char *buf, size_t size)
{
        const char *tpl = api_route_name(r);
        const char *brace = strchr(tpl, '{');
        char id[32];

        if (!brace) {
                snprintf(buf, size, "%s", tpl);
                return;
        }
        if (strncmp(brace, "{account}", 9) == 0) {
                snprintf(id, sizeof(id), "default");
        } else if (strncmp(brace, "{event_id}", 10) == 0) {
                snprintf(id, sizeof(id), "case-%u", serial);
                to_manual(fx, id);
                snprintf(id, sizeof(id), "%lld", (long long)newest_event(fx));
        } else {
                snprintf(id, sizeof(id), "case-%u", serial);
                to_manual(fx, id);
        }
        snprintf(buf, size, "%.*s%s%s", (int)(brace - tpl), tpl, id, strchr(brace, '}') + 1);
}

/* The policy, written out once more: a change to the table in api_auth.c
 * must be made here too, on purpose. */
static void test_scope_table(void **state)
{
        static const struct {
                enum api_route route;
                unsigned scopes;
        } want[] = {
            {API_ROUTE_HEALTHZ, 0},
            {API_ROUTE_READYZ, 0},
            {API_ROUTE_METRICS, SCOPE_READ},
            {API_ROUTE_REFUNDS, SCOPE_INTAKE},
            {API_ROUTE_REFUNDS_BATCH, SCOPE_INTAKE},
            {API_ROUTE_REFUND, SCOPE_INTAKE | SCOPE_READ},
            {API_ROUTE_REFUND_CANCEL, SCOPE_INTAKE},
            {API_ROUTE_CALLS, SCOPE_READ},
            {API_ROUTE_STATS, SCOPE_READ},
            {API_ROUTE_MANUAL, SCOPE_READ | SCOPE_OPERATOR},
            {API_ROUTE_MANUAL_ONE, SCOPE_READ | SCOPE_OPERATOR},
            {API_ROUTE_MANUAL_RESEND, SCOPE_OPERATOR},
            {API_ROUTE_MANUAL_RESOLVE, SCOPE_OPERATOR},
            {API_ROUTE_MANUAL_ASSIGN, SCOPE_OPERATOR},
            {API_ROUTE_MANUAL_APPROVE, SCOPE_OPERATOR},
            {API_ROUTE_PROVIDER_EVENTS, 0},         /* signed by the provider */
            {API_ROUTE_PROVIDER_EVENTS_ACCOUNT, 0}, /* signed by the account's provider */
            {API_ROUTE_EVENTS, SCOPE_INTAKE | SCOPE_READ},
            {API_ROUTE_EVENT_REDELIVER, SCOPE_OPERATOR},
            {API_ROUTE_ACCOUNTS, SCOPE_READ | SCOPE_ADMIN},
            {API_ROUTE_ACCOUNT, SCOPE_ADMIN},
            {API_ROUTE_ACCOUNT_AUDIT, SCOPE_READ | SCOPE_ADMIN},
            {API_ROUTE_OTHER, 0},
        };
        bool seen[API_ROUTE_COUNT] = {false};

        (void)state;
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                if (api_route_scopes(want[i].route) != want[i].scopes)
                        fail_msg("%s needs %#x, the table says %#x", api_route_name(want[i].route),
                                 want[i].scopes, api_route_scopes(want[i].route));
                seen[want[i].route] = true;
        }
        /* every route has its row here: a new route is a decision */
        for (int r = 0; r < API_ROUTE_COUNT; r++)
                if (!seen[r])
                        fail_msg("%s: no scope decided in this test", api_route_name(r));
}

struct redeliveries {
        unsigned n;
        char by[TG_TEXT_MAX];
};

static int on_redeliver(const struct account_audit_record *a, void *userdata)
{
        struct redeliveries *rd = userdata;

        if (strcmp(a->action, "event_redeliver") == 0) {
                rd->n++;
                snprintf(rd->by, sizeof(rd->by), "%s", a->principal);
        }
        return 0;
}

static void test_scope_walk(void **state)
{
        struct fixture *fx = *state;
        unsigned serial = 0, walked = 0;
        unsigned long long before = counted(fx, "missing_scope");
        unsigned long long refused = 0, revoked = counted(fx, "revoked");

        for (int r = 0; r < API_ROUTE_COUNT; r++) {
                unsigned need = api_route_scopes((enum api_route)r);
                if (need == 0)
                        continue;
                for (unsigned c = C_INTAKE; c <= C_ADMIN; c++) {
                        unsigned scope = 1u << c;
                        char path[160], body[256];
                        const char *b;
                        struct answer a;

                        serial++;
                        path_for(fx, (enum api_route)r, serial, path, sizeof(path));
                        b = body_for((enum api_route)r, serial, body, sizeof(body));
                        a = ask(fx->api, api_route_method((enum api_route)r), path, fx->auth[c], b);
                        if (need & scope) {
                                /* approve: 409 no_pending_approval, past the scope */
                                if (a.status >= 400 &&
                                    !(r == API_ROUTE_MANUAL_APPROVE && a.status == 409))
                                        fail_msg("%s %s as %s: %d %s", api_route_method(r), path,
                                                 cred_names[c], a.status, a.body);
                        } else {
                                if (a.status != 403 || strcmp(a.code, "missing_scope") != 0)
                                        fail_msg("%s %s as %s: want 403 missing_scope, got %d %s",
                                                 api_route_method(r), path, cred_names[c], a.status,
                                                 a.body);
                                refused++;
                        }
                        free(a.body);
                        /* no credential: 401 as ever; revoked: 403 */
                        a = ask(fx->api, api_route_method((enum api_route)r), path, NULL, b);
                        assert_int_equal(a.status, 401);
                        assert_string_equal(a.code, "unauthorized");
                        free(a.body);
                        a = ask(fx->api, api_route_method((enum api_route)r), path,
                                fx->auth[C_REVOKED], b);
                        assert_int_equal(a.status, 403);
                        assert_string_equal(a.code, "credential_revoked");
                        free(a.body);
                }
                walked++;
        }
        assert_true(walked >= 12); /* every /v1 route with a scope, and /metrics */
        /* the re-delivery the walk made (as the operator) is audited under its
         * name, in the account's trail */
        {
                struct redeliveries rd = {0};
                assert_int_equal(
                    store_list_account_audit(fx->api->store, "default", 0, 100, on_redeliver, &rd),
                    0);
                assert_int_equal(rd.n, 1);
                assert_string_equal(rd.by, cred_names[C_OPERATOR]);
        }
        assert_int_equal(counted(fx, "missing_scope"), before + refused);
        assert_int_equal(counted(fx, "revoked"), revoked + walked * 4); /* once each */
}

/* The audit names the credential; a body operator that names anyone else
 * is refused with nothing changed; the legacy token acts as api-token. */
struct who_list {
        char last[TG_TEXT_MAX];
        char action[32];
};

static int last_audit(const struct audit_record *a, void *userdata)
{
        struct who_list *w = userdata;

        snprintf(w->last, sizeof(w->last), "%s", a->operator_name);
        snprintf(w->action, sizeof(w->action), "%s", a->action);
        return 0;
}

static struct who_list audit_of(struct fixture *fx, const char *id)
{
        struct who_list w;
        struct op_record op;

        memset(&w, 0, sizeof(w));
        assert_int_equal(store_get(fx->api->store, id, &op), 0);
        assert_int_equal(store_list_audit(fx->api->store, op.id, last_audit, &w), 0);
        return w;
}

static void test_audit_principal(void **state)
{
        struct fixture *fx = *state;
        unsigned long long mism = counted(fx, "operator_mismatch");
        struct who_list w;
        struct answer a;

        to_manual(fx, "aud-1");
        w = audit_of(fx, "aud-1");
        a = ask(fx->api, "POST", "/v1/manual/aud-1/resend", fx->auth[C_OPERATOR],
                "{\"operator\":\"bob\",\"reason\":\"r\"}");
        assert_int_equal(a.status, 403);
        assert_string_equal(a.code, "operator_mismatch");
        free(a.body);
        assert_string_equal(audit_of(fx, "aud-1").last, w.last); /* nothing written */
        assert_int_equal(counted(fx, "operator_mismatch"), mism + 1);
        /* its own name, or none: the credential's name is audited */
        a = ask(fx->api, "POST", "/v1/manual/aud-1/assign", fx->auth[C_OPERATOR],
                "{\"operator\":\"alice\",\"assignee\":\"alice\"}");
        assert_int_equal(a.status, 200);
        free(a.body);
        assert_string_equal(audit_of(fx, "aud-1").last, "alice");
        a = ask(fx->api, "POST", "/v1/manual/aud-1/resend", fx->auth[C_OPERATOR],
                "{\"reason\":\"checked\"}");
        assert_int_equal(a.status, 202);
        free(a.body);
        w = audit_of(fx, "aud-1");
        assert_string_equal(w.last, "alice");
        assert_string_equal(w.action, "resend");
        /* the caller's cancel: its credential, not "client" nor the body */
        accept_one(fx, "aud-2");
        a = ask(fx->api, "POST", "/v1/refunds/aud-2/cancel", fx->auth[C_INTAKE],
                "{\"operator\":\"mallory\"}");
        assert_int_equal(a.status, 403);
        assert_string_equal(a.code, "operator_mismatch");
        free(a.body);
        a = ask(fx->api, "POST", "/v1/refunds/aud-2/cancel", fx->auth[C_INTAKE], NULL);
        assert_int_equal(a.status, 200);
        free(a.body);
        assert_string_equal(audit_of(fx, "aud-2").last, "orders");
        /* api.token_file beside a credentials file: every scope, as api-token */
        to_manual(fx, "aud-3");
        a = ask(fx->api, "POST", "/v1/manual/aud-3/resolve", "Bearer " LEGACY,
                "{\"reason\":\"r\",\"outcome\":\"failed\"}");
        assert_int_equal(a.status, 200);
        free(a.body);
        assert_string_equal(audit_of(fx, "aud-3").last, "api-token");
}

static enum op_state state_of(struct fixture *fx, const char *id)
{
        struct op_record op;

        assert_int_equal(store_get(fx->api->store, id, &op), 0);
        return op.state;
}

/* manual.approval_above = 1000: at or above it a re-send or resolve waits
 * for a second, different principal; below it one operator is enough. */
static void test_four_eyes(void **state)
{
        struct fixture *fx = *state;
        unsigned long long self = counted(fx, "self_approval");
        struct answer a;
        struct who_list w;

        /* below: at once */
        to_manual_amount(fx, "small", 999);
        a = ask(fx->api, "POST", "/v1/manual/small/resend", fx->auth[C_OPERATOR],
                "{\"reason\":\"r\"}");
        assert_int_equal(a.status, 202);
        assert_null(strstr(a.body, "\"approval\""));
        free(a.body);
        assert_int_equal(state_of(fx, "small"), OP_RETRY_WAIT);

        /* at the threshold: a request, nothing changes but the audit */
        to_manual_amount(fx, "big", 1000);
        a = ask(fx->api, "POST", "/v1/manual/big/resolve", fx->auth[C_OPERATOR],
                "{\"reason\":\"provider says paid\",\"outcome\":\"succeeded\"}");
        assert_int_equal(a.status, 202);
        assert_non_null(strstr(a.body, "\"status\":\"requested\""));
        free(a.body);
        assert_int_equal(state_of(fx, "big"), OP_MANUAL);
        w = audit_of(fx, "big");
        assert_string_equal(w.action, "request_resolve");
        assert_string_equal(w.last, "alice");
        /* one request at a time */
        a = ask(fx->api, "POST", "/v1/manual/big/resend", fx->auth[C_BOSS], "{\"reason\":\"r\"}");
        assert_int_equal(a.status, 409);
        assert_string_equal(a.code, "approval_pending");
        free(a.body);
        /* the requester cannot approve it */
        a = ask(fx->api, "POST", "/v1/manual/big/approve", fx->auth[C_OPERATOR], NULL);
        assert_int_equal(a.status, 403);
        assert_string_equal(a.code, "self_approval");
        free(a.body);
        assert_int_equal(counted(fx, "self_approval"), self + 1);
        assert_int_equal(state_of(fx, "big"), OP_MANUAL);
        /* another principal can: carried out, both audited */
        a = ask(fx->api, "POST", "/v1/manual/big/approve", fx->auth[C_BOSS], NULL);
        assert_int_equal(a.status, 200);
        assert_non_null(strstr(a.body, "\"approved_by\":\"boss\""));
        free(a.body);
        assert_int_equal(state_of(fx, "big"), OP_SUCCEEDED);
        w = audit_of(fx, "big");
        assert_string_equal(w.action, "resolve");
        assert_string_equal(w.last, "alice"); /* the requester's decision */
        /* nothing waits any more */
        a = ask(fx->api, "POST", "/v1/manual/big/approve", fx->auth[C_BOSS], NULL);
        assert_int_equal(a.status, 409);
        free(a.body);
        /* a re-send request, approved: due again through the exit */
        to_manual_amount(fx, "big2", 5000);
        a = ask(fx->api, "POST", "/v1/manual/big2/resend", fx->auth[C_BOSS], "{\"reason\":\"r\"}");
        assert_int_equal(a.status, 202);
        free(a.body);
        assert_int_equal(state_of(fx, "big2"), OP_MANUAL);
        a = ask(fx->api, "POST", "/v1/manual/big2/approve", fx->auth[C_OPERATOR], NULL);
        assert_int_equal(a.status, 202);
        free(a.body);
        assert_int_equal(state_of(fx, "big2"), OP_RETRY_WAIT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_scopes_words),
            cmocka_unit_test(test_new_format_parse_match),
            cmocka_unit_test(test_parse_refusals),
            cmocka_unit_test(test_scope_table),
            cmocka_unit_test_setup_teardown(test_scope_walk, setup, teardown),
            cmocka_unit_test_setup_teardown(test_audit_principal, setup, teardown),
            cmocka_unit_test_setup_teardown(test_four_eyes, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
