/*
 * ui — the console's routes, sign-in and actions (see the header); the read
 * routes are in ui_data.c, sessions in ui_session.c, the timeline's data in
 * timeline_data.c, the files in web_assets.c (the generated
 * web_assets_data.c). Runs on the
 * API's HTTP thread, with the API's store.
 *
 * Invariants: nothing under /ui/api but login answers without a live
 * session; no POST changes anything without its CSRF token, a same-origin
 * Origin (when the browser sends one) and a JSON body; only an operator's
 * session may resend or resolve, through the same store functions as the
 * API, with the session's user as the operator, so the change and its audit
 * row naming that user commit together (a re-delivery of an event as well,
 * in its account's audit trail); a token is never logged, echoed or
 * put in a URL; every answer carries the security headers below.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/log.h"
#include "daemon/render.h"
#include "daemon/ui_int.h"
#include "daemon/web_assets.h"

#define CSP                                                                                        \
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "                \
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
#define LOGIN_FAILS_PER_MINUTE 20
#define NOTE_MAX               200
#define TOKEN_MAX              256

/* ---- lifecycle ------------------------------------------------------------------ */

int ui_new(const struct tg_config *cfg, bool have_api_token, struct ui **ret_ui)
{
        struct ui *ui = calloc(1, sizeof(*ui));

        if (!ui)
                return TG_ENOMEM;
        ui_sessions_init(&ui->sessions, (int64_t)cfg->ui_session_idle_s * 1000,
                         (int64_t)cfg->ui_session_max_s * 1000);
        ui->have_api_token = have_api_token;
        ui->live_count = cfg->account_count ? cfg->account_count : 1;
        ui->lives = calloc(ui->live_count, sizeof(*ui->lives));
        if (!ui->lives) {
                free(ui);
                return TG_ENOMEM;
        }
        *ret_ui = ui;
        return 0;
}

void ui_free(struct ui *ui)
{
        if (!ui)
                return;
        for (unsigned i = 0; i < ui->live_count; i++)
                ui_live_release(&ui->lives[i]);
        free(ui->lives);
        ui_sessions_clear(&ui->sessions);
        explicit_bzero(ui, sizeof(*ui));
        free(ui);
}

bool ui_routine_path(const char *path)
{
        return path && (strcmp(path, "/ui/api/live") == 0 || strncmp(path, "/ui/assets/", 11) == 0);
}

bool ui_path(const char *path)
{
        return path && strncmp(path, "/ui", 3) == 0 && (path[3] == '\0' || path[3] == '/');
}

bool ui_door(const struct api *api, const struct http_request *req)
{
        const char *path = req->path;

        if (!path || !api_is_get(req))
                return false;
        /* the HTTP layer's 400 here is the empty segment (or a query not
         * printable ASCII, which the redirect leaves behind as well) */
        if (strcmp(path, "/ui/") == 0)
                return req->problem_status == 0 || req->problem_status == 400;
        return strcmp(path, "/") == 0 && !req->problem_status && api->ui && web_asset_count > 0;
}

/* ---- answers ---------------------------------------------------------------------- */

static void security_headers(struct http_response *res)
{
        http_response_add_header(res, "Content-Security-Policy", CSP);
        http_response_add_header(res, "X-Content-Type-Options", "nosniff");
        http_response_add_header(res, "X-Frame-Options", "DENY");
        http_response_add_header(res, "Referrer-Policy", "no-referrer");
        /* Cache-Control: no-store comes with every API answer (api.c). */
}

static int reply_asset(const struct web_asset *a, struct http_response *res)
{
        return http_response_set(res, 200, web_asset_type(a->name), (const char *)a->data, a->len);
}

/* To the console's one page: a temporary redirect, so that no browser keeps
 * it should "/" ever answer something else. */
static int reply_to_console(struct http_response *res)
{
        static const char body[] = "The console is at /ui\n";
        int r = http_response_set(res, 302, "text/plain; charset=utf-8", body, sizeof(body) - 1);

        return r ? r : http_response_add_header(res, "Location", "/ui");
}

static int not_built(struct http_response *res, const char *rid)
{
        return api_reply_code(res, rid, 404, "console_not_built", NULL,
                              "this tollgate was built without its console (-DTG_CONSOLE=OFF)");
}

static int set_cookie(struct http_response *res, const struct tg_config *cfg, const char *value,
                      int64_t max_age_s)
{
        char c[256];

        snprintf(c, sizeof(c), "%s=%s; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=%lld%s",
                 UI_COOKIE_NAME, value, (long long)max_age_s,
                 cfg->ui_secure_cookie ? "; Secure" : "");
        return http_response_add_header(res, "Set-Cookie", c);
}

/* ---- the guards of a POST ------------------------------------------------------------ */

/* The Origin a browser sends with a POST must be this server's. */
static bool same_origin(const struct http_request *req)
{
        const char *origin = http_request_header(req, "Origin");
        const char *host = http_request_header(req, "Host");
        const char *site = http_request_header(req, "Sec-Fetch-Site");
        const char *rest;

        if (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0)
                return false;
        if (!origin)
                return true; /* not a browser's cross-site request: no cookie rides along */
        if (!host)
                return false;
        if (strncmp(origin, "http://", 7) == 0)
                rest = origin + 7;
        else if (strncmp(origin, "https://", 8) == 0)
                rest = origin + 8;
        else
                return false;
        return strcmp(rest, host) == 0;
}

static bool json_body(const struct http_request *req)
{
        const char *ct = http_request_header(req, "Content-Type");

        return ct && strncasecmp(ct, "application/json", 16) == 0 &&
               (ct[16] == '\0' || ct[16] == ';' || ct[16] == ' ');
}

/* 0: go on; else *res holds the refusal. */
static int post_guard(const struct http_request *req, struct http_response *res, const char *rid,
                      bool *ret_ok)
{
        *ret_ok = false;
        if (!json_body(req))
                return api_reply_code(res, rid, 415, "unsupported_media_type", NULL,
                                      "the body must be application/json");
        if (!same_origin(req))
                return api_reply_code(res, rid, 403, "cross_origin", NULL,
                                      "this request did not come from the console's own page");
        *ret_ok = true;
        return 0;
}

/* ---- sign-in ------------------------------------------------------------------------------ */

/* {"states":[...],"kinds":[...],"classes":[...],"reasons":[...]}: the
 * console builds its lists (the Operations tabs, the reasons' filter) from
 * these, in table order (core/names.h), and keeps only their translations. */
static json_t *vocabularies_json(void)
{
        json_t *o = json_object();

        for (unsigned v = 0; o && v < TG_VOCAB_COUNT; v++) {
                json_t *a = json_array();
                for (unsigned i = 0; a && names_word((enum tg_vocabulary)v, i); i++)
                        if (json_array_append_new(
                                a, json_string(names_word((enum tg_vocabulary)v, i))) < 0) {
                                json_decref(a);
                                a = NULL;
                        }
                if (!a ||
                    json_object_set_new(o, names_vocabulary_key((enum tg_vocabulary)v), a) < 0) {
                        json_decref(o);
                        o = NULL;
                }
        }
        return o;
}

/* The session, and what the console needs once: the vocabularies and
 * the accounts' names (the switcher's choices, the config's order). */
static json_t *session_json(const struct api *api, const struct ui_session *s)
{
        json_t *names = json_array();

        for (unsigned i = 0; names && i < api->cfg.account_count; i++)
                json_array_append_new(names, json_string(api->cfg.accounts[i].name));
        return json_pack("{s:s, s:s, s:b, s:s, s:I, s:o, s:o}", "user", s->user, "role",
                         ui_role_name(s->role), "admin", s->admin, "csrf", s->csrf, "expires_at",
                         (json_int_t)ui_session_expires(&api->ui->sessions, s), "vocabularies",
                         vocabularies_json(), "accounts", names ? names : json_array());
}

/* A credential of api.credentials_file signs in as its name: operator with
 * the operator scope, viewer with read, and may change the accounts'
 * controls (*ret_admin) with the admin scope too; a revoked one, or one
 * with neither operator nor read (intake, admin alone), does not. 0 or
 * TG_ENOTFOUND. */
static int credential_sign_in(const struct api *api, const char *token, size_t len,
                              char ret_user[UI_NAME_MAX + 1], enum ui_role *ret_role,
                              bool *ret_admin)
{
        const struct credential *c;
        unsigned i = 0;

        if (credentials_match(api->cfg.api_credentials, api->cfg.api_credential_count, token, len,
                              &i) < 0)
                return TG_ENOTFOUND;
        c = &api->cfg.api_credentials[i];
        if (c->revoked || !(c->scopes & (SCOPE_OPERATOR | SCOPE_READ)))
                return TG_ENOTFOUND;
        snprintf(ret_user, UI_NAME_MAX + 1, "%s", c->name);
        *ret_role = (c->scopes & SCOPE_OPERATOR) ? UI_ROLE_OPERATOR : UI_ROLE_VIEWER;
        *ret_admin = (c->scopes & SCOPE_ADMIN) != 0;
        return 0;
}

static int login(struct api *api, const struct http_request *req, struct http_response *res,
                 const char *rid)
{
        struct ui *ui = api->ui;
        char user[UI_NAME_MAX + 1];
        char cookie[UI_SECRET_HEX];
        enum ui_role role = UI_ROLE_VIEWER;
        struct ui_session *s = NULL;
        tg_wall_ms now = api_wall_now();
        json_t *root, *tok;
        bool ok = false, admin = false;
        int r;

        r = post_guard(req, res, rid, &ok);
        if (!ok)
                return r;
        if (api->cfg.ui_user_count == 0 && !ui->have_api_token &&
            api->cfg.api_credential_count == 0)
                return api_reply_code(res, rid, 403, "no_credentials", NULL,
                                      "no one can sign in: set api.token_file or ui.users_file");
        if (now - ui->fail_window >= 60000 || now < ui->fail_window) {
                ui->fail_window = now;
                ui->fails = 0;
        }
        if (ui->fails >= LOGIN_FAILS_PER_MINUTE) {
                r = api_reply_code(res, rid, 429, "too_many_attempts", NULL,
                                   "too many failed sign-ins; wait a minute");
                if (r == 0)
                        http_response_add_header(res, "Retry-After", "60");
                return r;
        }
        root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, NULL);
        tok = json_is_object(root) ? json_object_get(root, "token") : NULL;
        if (!json_is_string(tok) || json_string_length(tok) == 0 ||
            json_string_length(tok) > TOKEN_MAX) {
                json_decref(root);
                return api_reply_code(res, rid, 422, "invalid_field", "token",
                                      "give the token as {\"token\": \"...\"}");
        }
        r = ui_authenticate(api->cfg.ui_users, api->cfg.ui_user_count,
                            (const unsigned char(*)[UI_DIGEST_LEN])api->token_digests,
                            ui->have_api_token ? api->token_count : 0, json_string_value(tok),
                            json_string_length(tok), user, &role);
        /* the API token has every scope (api_auth.c) */
        admin = r == 0 && strcmp(user, UI_API_TOKEN_USER) == 0;
        if (r < 0)
                r = credential_sign_in(api, json_string_value(tok), json_string_length(tok), user,
                                       &role, &admin);
        json_decref(root);
        if (r < 0) {
                ui->fails++;
                log_emit(LOG_WARN, "ui_login_failed", json_pack("{s:s}", "request_id", rid));
                return api_reply_code(res, rid, 401, "unauthorized", NULL,
                                      "this token does not sign anyone in");
        }
        r = ui_session_create(&ui->sessions, user, role, now, cookie, &s);
        if (r < 0)
                return api_reply_code(res, rid, 500, "internal", NULL, "no session could be made");
        s->admin = admin;
        log_emit(LOG_INFO, "ui_login",
                 json_pack("{s:s, s:s, s:s}", "user", user, "role", ui_role_name(role),
                           "request_id", rid));
        r = api_reply_json(res, 200, session_json(api, s));
        if (r == 0)
                r = set_cookie(res, &api->cfg, cookie, (int64_t)api->cfg.ui_session_max_s);
        explicit_bzero(cookie, sizeof(cookie));
        return r;
}

static int logout(struct api *api, struct ui_session *s, struct http_response *res)
{
        int r;

        log_emit(LOG_INFO, "ui_logout", json_pack("{s:s}", "user", s->user));
        ui_session_end(s);
        r = api_reply_json(res, 200, json_pack("{s:b}", "signed_out", 1));
        if (r == 0)
                r = set_cookie(res, &api->cfg, "", 0);
        return r;
}

/* ---- actions -------------------------------------------------------------------------------- */

/* {"note": "..."} (required for resolve) and, for resolve, {"outcome":
 * "succeeded"|"failed"}; nothing else. 0 or TG_EINVAL with *err set. */
static int parse_action(const struct http_request *req, bool resolve, char note[NOTE_MAX + 1],
                        enum op_state *ret_outcome, struct api_error *err)
{
        json_t *root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, NULL);
        json_t *v;
        const char *key;
        int r = 0;

        note[0] = '\0';
        if (!json_is_object(root)) {
                json_decref(root);
                api_error_set(err, 400, "invalid_json", NULL, "the body must be a JSON object");
                return TG_EINVAL;
        }
        json_object_foreach(root, key, v)
        {
                if (strcmp(key, "note") != 0 && !(resolve && strcmp(key, "outcome") == 0)) {
                        api_error_set(err, 422, "unknown_field", NULL,
                                      "a field this action "
                                      "does not take");
                        r = TG_EINVAL;
                        break;
                }
        }
        v = json_object_get(root, "note");
        if (r == 0 && v) {
                const char *t = json_is_string(v) ? json_string_value(v) : NULL;
                size_t len = t ? json_string_length(v) : 0;
                bool printable = t != NULL && len <= NOTE_MAX && strlen(t) == len;

                for (size_t i = 0; printable && i < len; i++)
                        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
                                printable = false;
                if (!printable) {
                        api_error_set(err, 422, "invalid_field", "note",
                                      "a note is text of at most 200 bytes without control "
                                      "characters");
                        r = TG_EINVAL;
                } else {
                        memcpy(note, t, len + 1);
                }
        }
        if (r == 0 && resolve && note[0] == '\0') {
                api_error_set(err, 422, "invalid_field", "note",
                              "resolving by hand needs a note saying why");
                r = TG_EINVAL;
        }
        if (r == 0 && resolve) {
                v = json_object_get(root, "outcome");
                if (json_is_string(v) && strcmp(json_string_value(v), "succeeded") == 0) {
                        *ret_outcome = OP_SUCCEEDED;
                } else if (json_is_string(v) && strcmp(json_string_value(v), "failed") == 0) {
                        *ret_outcome = OP_REJECTED;
                } else {
                        api_error_set(err, 422, "invalid_field", "outcome",
                                      "must be \"succeeded\" or \"failed\"");
                        r = TG_EINVAL;
                }
        }
        json_decref(root);
        return r;
}

static int act(struct api *api, const struct ui_session *s, const struct http_request *req,
               const char *id, bool resolve, struct http_response *res, const char *rid)
{
        char note[NOTE_MAX + 1];
        enum op_state outcome = OP_SUCCEEDED;
        struct api_error err;
        struct op_record op;
        json_t *o = NULL;
        int r;

        if (s->role != UI_ROLE_OPERATOR)
                return api_reply_code(res, rid, 403, "forbidden", NULL,
                                      "a viewer may not resend or resolve");
        if (parse_action(req, resolve, note, &outcome, &err) < 0)
                return api_reply_error(res, rid, &err);
        api_note_op(api, id);
        /* four-eyes: at or above manual.approval_above, a request */
        r = api_needs_approval(api, id);
        if (r < 0)
                return api_reply_action_refused(res, rid, r);
        if (r > 0)
                return api_request_approval(api, id, s->user,
                                            note[0] || resolve ? note : "resent from the console",
                                            resolve, outcome, res, rid);
        /* The change and its audit row, naming the signed-in user, commit
         * together before the reply. */
        if (resolve)
                r = store_operator_resolve(api->store, id, s->user, note, outcome, api_wall_now(),
                                           &op);
        else
                r = store_operator_resend(api->store, id, s->user,
                                          note[0] ? note : "resent from the console",
                                          &api->cfg.policy, api_wall_now(), &op);
        if (r < 0)
                return api_reply_action_refused(res, rid, r);
        log_emit(LOG_INFO, resolve ? "operator_resolve" : "operator_resend",
                 json_pack("{s:s, s:s, s:s, s:s, s:s}", "operation_id", id, "operator", s->user,
                           "state", op_state_name(op.state), "via", "console", "request_id", rid));
        r = render_op_full(api->store, &op, &o);
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        return api_reply_json(res, 200, o);
}

/* POST events/{id}/redeliver: an operator's session makes an event due
 * again, audited as the signed-in user (api_redeliver_as). */
static int redeliver(struct api *api, const struct ui_session *s, const struct http_request *req,
                     struct http_response *res, const char *rid, const char *rest)
{
        const char *slash = strchr(rest, '/');
        int64_t id = 0;

        if (!slash || strcmp(slash, "/redeliver") != 0 ||
            api_event_id(rest, (size_t)(slash - rest), &id) < 0)
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such route");
        if (strcmp(req->method, "POST") != 0)
                return api_reply_method_not_allowed(res, rid, "POST");
        if (s->role != UI_ROLE_OPERATOR)
                return api_reply_code(res, rid, 403, "forbidden", NULL,
                                      "a viewer may not re-deliver");
        return api_redeliver_as(api, id, s->user, res, rid);
}

/* POST accounts/NAME: an admin's change to the account's run-time controls
 * (the body of POST /v1/accounts/{account}), audited as the signed-in
 * user's. */
static int change_account(struct api *api, const struct ui_session *s,
                          const struct http_request *req, struct http_response *res,
                          const char *rid, const char *name)
{
        if (strcmp(req->method, "POST") != 0)
                return api_reply_method_not_allowed(res, rid, "POST");
        if (!s->admin)
                return api_reply_code(res, rid, 403, "forbidden", NULL,
                                      "changing an account's controls takes an admin credential");
        /* a name that is no account (a '/' included) is its 404 unknown_account */
        return api_change_account_as(api, req, name, s->user, res, rid);
}

/* ---- routing -------------------------------------------------------------------------------- */

static int route_api(struct api *api, const struct http_request *req, struct http_response *res,
                     const char *rid, const char *rest)
{
        static const char ops[] = "ops/", events[] = "events/", accounts[] = "accounts/";
        struct ui *ui = api->ui;
        struct ui_session *s = NULL;
        bool get = api_is_get(req), post = strcmp(req->method, "POST") == 0;
        bool ok = false;
        int r;

        if (strcmp(rest, "login") == 0) {
                if (!post)
                        return api_reply_method_not_allowed(res, rid, "POST");
                return login(api, req, res, rid);
        }
        if (ui_session_find(&ui->sessions, http_request_header(req, "Cookie"), api_wall_now(), &s) <
            0)
                return api_reply_code(res, rid, 401, "unauthorized", NULL,
                                      "sign in to the console first");
        if (post) {
                r = post_guard(req, res, rid, &ok);
                if (!ok)
                        return r;
                if (!ui_session_csrf_ok(s, http_request_header(req, "X-CSRF-Token")))
                        return api_reply_code(res, rid, 403, "csrf", NULL,
                                              "the X-CSRF-Token header is missing or wrong");
        } else if (!get) {
                return api_reply_method_not_allowed(res, rid, "GET, POST");
        }

        if (strcmp(rest, "logout") == 0)
                return post ? logout(api, s, res) : api_reply_method_not_allowed(res, rid, "POST");
        if (strcmp(rest, "session") == 0)
                return get ? api_reply_json(res, 200, session_json(api, s))
                           : api_reply_method_not_allowed(res, rid, "GET");
        if (strcmp(rest, "live") == 0)
                return get ? ui_get_live(api, req, res, rid)
                           : api_reply_method_not_allowed(res, rid, "GET");
        if (strcmp(rest, "timeline") == 0)
                return get ? ui_get_timeline(api, req, res, rid)
                           : api_reply_method_not_allowed(res, rid, "GET");
        if (strcmp(rest, "manual") == 0)
                return get ? ui_get_manual(api, req, res, rid)
                           : api_reply_method_not_allowed(res, rid, "GET");
        if (strcmp(rest, "ops") == 0)
                return get ? ui_get_ops(api, req, res, rid)
                           : api_reply_method_not_allowed(res, rid, "GET");
        if (strcmp(rest, "deliveries") == 0)
                return get ? ui_get_deliveries(api, req, res, rid)
                           : api_reply_method_not_allowed(res, rid, "GET");
        if (strncmp(rest, events, sizeof(events) - 1) == 0)
                return redeliver(api, s, req, res, rid, rest + sizeof(events) - 1);
        if (strcmp(rest, "accounts") == 0)
                return get ? api_get_accounts(api, res, rid)
                           : api_reply_method_not_allowed(res, rid, "GET");
        if (strncmp(rest, accounts, sizeof(accounts) - 1) == 0)
                return change_account(api, s, req, res, rid, rest + sizeof(accounts) - 1);
        if (strncmp(rest, ops, sizeof(ops) - 1) == 0) {
                const char *id = rest + sizeof(ops) - 1;
                const char *slash = strchr(id, '/');
                size_t len = slash ? (size_t)(slash - id) : strlen(id);
                char buf[TG_OP_ID_MAX + 1];

                if (len == 0 || len > TG_OP_ID_MAX ||
                    refund_validate_operation_id(id, len, NULL) < 0)
                        return api_reply_code(res, rid, 404, "not_found", NULL,
                                              "no such operation");
                memcpy(buf, id, len);
                buf[len] = '\0';
                if (!slash)
                        return get ? ui_get_op(api, buf, res, rid)
                                   : api_reply_method_not_allowed(res, rid, "GET");
                if (strcmp(slash, "/resend") == 0 || strcmp(slash, "/resolve") == 0)
                        return post
                                   ? act(api, s, req, buf, strcmp(slash, "/resolve") == 0, res, rid)
                                   : api_reply_method_not_allowed(res, rid, "POST");
                if (strcmp(slash, "/approve") == 0 && !post)
                        return api_reply_method_not_allowed(res, rid, "POST");
                if (strcmp(slash, "/approve") == 0 && s->role != UI_ROLE_OPERATOR)
                        return api_reply_code(res, rid, 403, "forbidden", NULL,
                                              "a viewer may not approve");
                if (strcmp(slash, "/approve") == 0) {
                        api_note_op(api, buf);
                        return api_approve_as(api, buf, s->user, res, rid);
                }
        }
        return api_reply_code(res, rid, 404, "not_found", NULL, "no such route");
}

static int route(struct api *api, const struct http_request *req, struct http_response *res,
                 const char *rid)
{
        static const char assets[] = "/ui/assets/";
        static const char apis[] = "/ui/api/";
        const char *path = req->path;
        struct ui_session *s = NULL;

        if (!api->ui)
                return api_reply_code(res, rid, 404, "not_found", NULL,
                                      "the console is off (ui.enabled = false)");
        if (web_asset_count == 0)
                return not_built(res, rid);
        if (strncmp(path, apis, sizeof(apis) - 1) == 0)
                return route_api(api, req, res, rid, path + sizeof(apis) - 1);
        if (!api_is_get(req))
                return api_reply_method_not_allowed(res, rid, "GET");
        if (strcmp(path, "/") == 0 || strcmp(path, "/ui/") == 0)
                return reply_to_console(res);
        if (strcmp(path, "/ui") == 0) {
                /* The app for a signed-in person; anyone else gets the
                 * sign-in page (the app's data routes refuse them anyway). */
                bool in = ui_session_find(&api->ui->sessions, http_request_header(req, "Cookie"),
                                          api_wall_now(), &s) == 0;
                const struct web_asset *a = web_asset_find(in ? "app.html" : "login.html");
                return a ? reply_asset(a, res) : not_built(res, rid);
        }
        if (strncmp(path, assets, sizeof(assets) - 1) == 0) {
                const char *name = path + sizeof(assets) - 1;
                const struct web_asset *a = strchr(name, '/') ? NULL : web_asset_find(name);
                /* the pages are answered at /ui only, by session */
                if (a && strcmp(web_asset_type(name), "text/html; charset=utf-8") != 0)
                        return reply_asset(a, res);
        }
        return api_reply_code(res, rid, 404, "not_found", NULL, "no such page");
}

int ui_route(struct api *api, const struct http_request *req, struct http_response *res,
             const char *rid)
{
        int r = route(api, req, res, rid);

        if (r == 0)
                security_headers(res);
        return r;
}
