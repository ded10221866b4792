/*
 * api_auth — who may call which route: the bearer tokens of api.token_file
 * and the named credentials of api.credentials_file (daemon/credentials.h),
 * the one route x scope table the router reads, and the refusals (401 for
 * no or a bad credential, 403 for a revoked one, a missing scope, a body
 * operator that is not the caller), each counted by its reason for
 * /metrics (tollgate_api_auth_failures_total).
 *
 * Invariants:
 *   - every token and every credential is compared on every request,
 *     whichever matches (digest_equal, no early exit), so the time taken
 *     says nothing about which one or where a guess first differs;
 *   - without api.credentials_file nothing changes from before: the tokens
 *     of api.token_file (or none on loopback) have every scope and the
 *     audit takes the operator's name from the body; with it, every route
 *     needs its scope and the audit names the credential (api_actor).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/tg_error.h"
#include "daemon/api_int.h"
#include "daemon/log.h"
#include "platform/digest.h"

/* ---- authentication --------------------------------------------------------- */

/* The digests of every token of cfg (api.token_file may hold several:
 * rotation). 0 or TG_EINVAL. */
int api_set_tokens(struct api *api, const struct tg_config *cfg)
{
        unsigned n = cfg->api_token_count;

        if (n == 0 && cfg->api_token[0])
                n = 1; /* a config built by hand: api_token alone */
        if (n > TG_API_TOKENS_MAX)
                return TG_EINVAL;
        for (unsigned i = 0; i < n; i++) {
                const char *t = cfg->api_token_count ? cfg->api_tokens[i] : cfg->api_token;
                int r = digest_sha256(t, strlen(t), api->token_digests[i]);
                if (r < 0)
                        return r;
        }
        api->token_count = n;
        api->need_token = n > 0 || cfg->api_credentials_file[0] != '\0';
        return 0;
}

/* Why a request was refused for who sent it (the label of
 * tollgate_api_auth_failures_total). */
static const char *const auth_failure_names[API_AUTH_FAILURE_COUNT] = {
    [API_AUTH_MISSING] = "missing",
    [API_AUTH_MALFORMED] = "malformed",
    [API_AUTH_WRONG] = "wrong",
    [API_AUTH_REVOKED] = "revoked",
    [API_AUTH_MISSING_SCOPE] = "missing_scope",
    [API_AUTH_OPERATOR_MISMATCH] = "operator_mismatch",
    [API_AUTH_SELF_APPROVAL] = "self_approval",
};

const char *api_auth_failure_name(enum api_auth_failure why)
{
        return (unsigned)why < API_AUTH_FAILURE_COUNT ? auth_failure_names[why] : "invalid";
}

/* What authentication found. */
enum auth_result {
        AUTH_OK,      /* api->who says who */
        AUTH_NONE,    /* no or a bad credential: 401 */
        AUTH_REVOKED, /* a revoked credential: 403 */
};

/* Who the request comes from: one Authorization header (two are refused:
 * readers would disagree on which counts), no NUL byte in it (a C string
 * would stop there and compare only a prefix of what was sent), the Bearer
 * scheme, and a token of api.token_file or a credential of
 * api.credentials_file. Every refusal is counted by its reason. */
static enum auth_result authenticate(struct api *api, const struct http_request *req)
{
        static const char scheme[] = "Bearer ";
        unsigned char digest[API_DIGEST_LEN];
        const char *h = NULL;
        const char *token;
        unsigned idx = 0;
        int match = 0;
        int r;

        memset(&api->who, 0, sizeof(api->who));
        api->who.named = api->cfg.api_credentials_file[0] != '\0';
        if (!api->need_token) {
                api->who.scopes = SCOPES_ALL;
                return AUTH_OK; /* loopback without a token file (config refused otherwise) */
        }
        r = http_request_header_once(req, "Authorization", &h);
        if (r == TG_ENOTFOUND) {
                api->counters->auth_failures[API_AUTH_MISSING]++;
                return AUTH_NONE;
        }
        if (r < 0 || strncasecmp(h, scheme, sizeof(scheme) - 1) != 0) {
                api->counters->auth_failures[API_AUTH_MALFORMED]++;
                return AUTH_NONE;
        }
        token = h + sizeof(scheme) - 1;
        while (*token == ' ')
                token++;
        if (digest_sha256(token, strlen(token), digest) < 0) {
                api->counters->auth_failures[API_AUTH_MALFORMED]++;
                return AUTH_NONE;
        }
        /* every token and every credential compared, whichever matches:
         * the time says nothing */
        for (unsigned i = 0; i < api->token_count; i++)
                match |= digest_equal(digest, api->token_digests[i], API_DIGEST_LEN);
        r = credentials_match(api->cfg.api_credentials, api->cfg.api_credential_count, token,
                              strlen(token), &idx);
        if (r == 0) {
                const struct credential *c = &api->cfg.api_credentials[idx];
                if (c->revoked)
                        return AUTH_REVOKED; /* counted with its 403 */
                memcpy(api->who.name, c->name, sizeof(api->who.name));
                api->who.scopes = c->scopes;
                api->who.credential = true;
                return AUTH_OK;
        }
        if (!match) {
                api->counters->auth_failures[API_AUTH_WRONG]++;
                return AUTH_NONE;
        }
        /* api.token_file: one credential with every scope (deprecated) */
        snprintf(api->who.name, sizeof(api->who.name), "%s", UI_API_TOKEN_USER);
        api->who.scopes = SCOPES_ALL;
        return AUTH_OK;
}

static int reply_unauthorized(struct http_response *res, const char *rid)
{
        int r = api_reply_code(res, rid, 401, "unauthorized", NULL,
                               "a valid Authorization: Bearer token is required");
        if (r == 0)
                http_response_add_header(res, "WWW-Authenticate", "Bearer");
        return r;
}

int api_reply_forbidden(struct api *api, struct http_response *res, const char *rid,
                        enum api_auth_failure why, const char *code, const char *message)
{
        if ((unsigned)why < API_AUTH_FAILURE_COUNT)
                api->counters->auth_failures[why]++;
        log_emit(LOG_WARN, "api_forbidden",
                 json_pack("{s:s, s:s, s:s}", "request_id", rid, "reason",
                           api_auth_failure_name(why), "principal", api->who.name));
        return api_reply_code(res, rid, 403, code, NULL, message);
}

/* Authentication, then the route's scope (the table below): 1 to go on,
 * 0 when res holds the refusal, or a negative code. */
int api_admit_caller(struct api *api, const struct http_request *req, struct http_response *res,
                     const char *rid)
{
        unsigned need = api_route_scopes(api_route_of(req->path));
        enum auth_result a = authenticate(api, req);
        char words[64], message[128];
        int r;

        if (a == AUTH_NONE)
                r = reply_unauthorized(res, rid);
        else if (a == AUTH_REVOKED)
                r = api_reply_forbidden(api, res, rid, API_AUTH_REVOKED, "credential_revoked",
                                        "this credential was revoked");
        else if (need && !(api->who.scopes & need)) {
                (void)credential_scopes_format(need, words, sizeof(words));
                snprintf(message, sizeof(message),
                         "this credential lacks the scope this route "
                         "needs (one of: %s)",
                         words);
                r = api_reply_forbidden(api, res, rid, API_AUTH_MISSING_SCOPE, "missing_scope",
                                        message);
        } else
                return 1;
        return r < 0 ? r : 0;
}

_Static_assert(CREDENTIAL_NAME_MAX <= TG_SUBMITTER_MAX, "a credential's name is an owner");

const char *api_submitter(const struct api *api)
{
        return api->who.credential ? api->who.name : "";
}

bool api_may_see(const struct api *api, const struct op_record *op)
{
        if (api->who.scopes & ~(unsigned)SCOPE_INTAKE)
                return true; /* read, operator, admin: every operation */
        return op->req.submitted_by[0] == '\0' ||
               (api->who.credential && strcmp(op->req.submitted_by, api->who.name) == 0);
}

const char *api_seen_owner(const struct api *api)
{
        if (api->who.scopes & ~(unsigned)SCOPE_INTAKE)
                return NULL;
        /* an intake-only caller is always a credential (the token file and
         * an open loopback have every scope) */
        return api->who.name;
}

int api_actor(struct api *api, const char *body_name, const char *fallback, const char **ret_name,
              struct http_response *res, const char *rid)
{
        int r;

        if (!api->who.named) {
                *ret_name = body_name && body_name[0] ? body_name : fallback;
                return 0;
        }
        if (body_name && body_name[0] && strcmp(body_name, api->who.name) != 0) {
                r = api_reply_forbidden(api, res, rid, API_AUTH_OPERATOR_MISMATCH,
                                        "operator_mismatch",
                                        "operator must be the credential's own name (or left "
                                        "out): the audit names who authenticated");
                return r < 0 ? r : 1;
        }
        *ret_name = api->who.name;
        return 0;
}

/* ---- routes as /metrics names them ----------------------------------------------- */

/* The one route x scope table: every route's template (as /metrics names
 * it), its method, and the scopes that may call it (any one of them; 0: no
 * credential, the route is open or signed by the provider). The router
 * (api_admit_caller) reads it for every request; a new route adds its row. */
static const struct route_row {
        const char *name;
        const char *method;
        unsigned scopes;
} routes[API_ROUTE_COUNT] = {
    [API_ROUTE_HEALTHZ] = {"/healthz", "GET", 0},
    [API_ROUTE_READYZ] = {"/readyz", "GET", 0},
    /* only when api.metrics_need_token */
    [API_ROUTE_METRICS] = {"/metrics", "GET", SCOPE_READ},
    [API_ROUTE_REFUNDS] = {"/v1/refunds", "POST", SCOPE_INTAKE},
    [API_ROUTE_REFUNDS_BATCH] = {"/v1/refunds:batch", "POST", SCOPE_INTAKE},
    [API_ROUTE_REFUND] = {"/v1/refunds/{operation_id}", "GET", SCOPE_INTAKE | SCOPE_READ},
    [API_ROUTE_REFUND_CANCEL] = {"/v1/refunds/{operation_id}/cancel", "POST", SCOPE_INTAKE},
    [API_ROUTE_CALLS] = {"/v1/calls", "GET", SCOPE_READ},
    [API_ROUTE_STATS] = {"/v1/stats", "GET", SCOPE_READ},
    [API_ROUTE_MANUAL] = {"/v1/manual", "GET", SCOPE_READ | SCOPE_OPERATOR},
    [API_ROUTE_MANUAL_ONE] = {"/v1/manual/{operation_id}", "GET", SCOPE_READ | SCOPE_OPERATOR},
    [API_ROUTE_MANUAL_RESEND] = {"/v1/manual/{operation_id}/resend", "POST", SCOPE_OPERATOR},
    [API_ROUTE_MANUAL_RESOLVE] = {"/v1/manual/{operation_id}/resolve", "POST", SCOPE_OPERATOR},
    [API_ROUTE_MANUAL_ASSIGN] = {"/v1/manual/{operation_id}/assign", "POST", SCOPE_OPERATOR},
    [API_ROUTE_MANUAL_APPROVE] = {"/v1/manual/{operation_id}/approve", "POST", SCOPE_OPERATOR},
    [API_ROUTE_PROVIDER_EVENTS] = {"/v1/provider-events", "POST", 0},
    [API_ROUTE_PROVIDER_EVENTS_ACCOUNT] = {"/v1/provider-events/{account}", "POST", 0},
    /* the order system's pull feed: its own credential (intake) or a reader */
    [API_ROUTE_EVENTS] = {"/v1/events", "GET", SCOPE_INTAKE | SCOPE_READ},
    [API_ROUTE_EVENT_REDELIVER] = {"/v1/events/{event_id}/redeliver", "POST", SCOPE_OPERATOR},
    [API_ROUTE_ACCOUNTS] = {"/v1/accounts", "GET", SCOPE_READ | SCOPE_ADMIN},
    [API_ROUTE_ACCOUNT] = {"/v1/accounts/{account}", "POST", SCOPE_ADMIN},
    [API_ROUTE_ACCOUNT_AUDIT] = {"/v1/accounts/{account}/audit", "GET", SCOPE_READ | SCOPE_ADMIN},
    [API_ROUTE_OTHER] = {"other", "GET", 0},
};

const char *api_route_name(enum api_route route)
{
        return (unsigned)route < API_ROUTE_COUNT ? routes[route].name : "other";
}

unsigned api_route_scopes(enum api_route route)
{
        return (unsigned)route < API_ROUTE_COUNT ? routes[route].scopes : 0;
}

const char *api_route_method(enum api_route route)
{
        return (unsigned)route < API_ROUTE_COUNT ? routes[route].method : "GET";
}

/* The template of a path: its fixed parts, one segment for an id. */
enum api_route api_route_of(const char *path)
{
        static const char refunds[] = "/v1/refunds/", manual[] = "/v1/manual/",
                          accounts[] = "/v1/accounts/", events[] = "/v1/events/",
                          hooks[] = "/v1/provider-events/";
        const char *id, *slash;

        if (!path)
                return API_ROUTE_OTHER;
        for (int i = 0; i < API_ROUTE_COUNT; i++)
                if (!strchr(routes[i].name, '{') && strcmp(path, routes[i].name) == 0)
                        return (enum api_route)i;
        if (strncmp(path, refunds, sizeof(refunds) - 1) == 0) {
                id = path + sizeof(refunds) - 1;
                slash = strchr(id, '/');
                if (!id[0] || slash == id)
                        return API_ROUTE_OTHER;
                if (!slash)
                        return API_ROUTE_REFUND;
                return strcmp(slash, "/cancel") == 0 ? API_ROUTE_REFUND_CANCEL : API_ROUTE_OTHER;
        }
        if (strncmp(path, events, sizeof(events) - 1) == 0) {
                id = path + sizeof(events) - 1;
                slash = strchr(id, '/');
                if (!id[0] || !slash || slash == id)
                        return API_ROUTE_OTHER;
                return strcmp(slash, "/redeliver") == 0 ? API_ROUTE_EVENT_REDELIVER
                                                        : API_ROUTE_OTHER;
        }
        if (strncmp(path, hooks, sizeof(hooks) - 1) == 0) {
                id = path + sizeof(hooks) - 1;
                return id[0] && !strchr(id, '/') ? API_ROUTE_PROVIDER_EVENTS_ACCOUNT
                                                 : API_ROUTE_OTHER;
        }
        if (strncmp(path, accounts, sizeof(accounts) - 1) == 0) {
                id = path + sizeof(accounts) - 1;
                slash = strchr(id, '/');
                if (!id[0] || slash == id)
                        return API_ROUTE_OTHER;
                if (!slash)
                        return API_ROUTE_ACCOUNT;
                return strcmp(slash, "/audit") == 0 ? API_ROUTE_ACCOUNT_AUDIT : API_ROUTE_OTHER;
        }
        if (strncmp(path, manual, sizeof(manual) - 1) != 0)
                return API_ROUTE_OTHER;
        id = path + sizeof(manual) - 1;
        slash = strchr(id, '/');
        if (!id[0] || slash == id)
                return API_ROUTE_OTHER;
        if (!slash)
                return API_ROUTE_MANUAL_ONE;
        if (strcmp(slash, "/resend") == 0)
                return API_ROUTE_MANUAL_RESEND;
        if (strcmp(slash, "/resolve") == 0)
                return API_ROUTE_MANUAL_RESOLVE;
        if (strcmp(slash, "/assign") == 0)
                return API_ROUTE_MANUAL_ASSIGN;
        if (strcmp(slash, "/approve") == 0)
                return API_ROUTE_MANUAL_APPROVE;
        return API_ROUTE_OTHER;
}
