/*
 * api_accounts — the provider accounts and their run-time controls
 * (daemon/account_ctl.h):
 *   GET  /v1/accounts                      every account of the config: its
 *                                          configured rate and cap, the
 *                                          controls in the store, what is in
 *                                          force (scope read);
 *   POST /v1/accounts/{account}            change its rate, cap or pause
 *                                          (scope admin): 200 with the
 *                                          account; 404 unknown_account;
 *                                          422 invalid_field naming the field;
 *   GET  /v1/accounts/{account}/audit      its changes, oldest first, paged by
 *                                          ?after=ID&limit=N (scope read).
 * A change and its audit row (who: the credential, or the body's operator
 * without credentials; when; from what to what) commit together before the
 * reply; the account's dispatchers take it within a second, from their next
 * slot.
 */
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/account_ctl.h"
#include "daemon/api_int.h"
#include "daemon/log.h"

#define AUDIT_LIMIT_DEF 100
#define AUDIT_LIMIT_MAX 1000

static int reply_unknown_account(struct api *api, struct http_response *res, const char *rid)
{
        char names[1024], msg[sizeof(names) + 64];

        config_account_names(&api->cfg, names, sizeof(names));
        snprintf(msg, sizeof(msg), "no such account; the configured ones: %s", names);
        return api_reply_code(res, rid, 404, "unknown_account", NULL, msg);
}

int api_get_accounts(struct api *api, struct http_response *res, const char *rid)
{
        struct tg_config *view = malloc(sizeof(*view));
        json_t *list = json_array();
        int r = view && list ? 0 : TG_ENOMEM;

        for (unsigned i = 0; r == 0 && i < api->cfg.account_count; i++) {
                const char *name = api->cfg.accounts[i].name;
                struct account_controls c;

                account_ctl_find(&api->cfg, name, view);
                r = store_controls_get(api->store, name, &c);
                if (r == 0 && json_array_append_new(list, account_ctl_json(view, name, &c)) < 0)
                        r = TG_ENOMEM;
        }
        free(view);
        if (r < 0) {
                json_decref(list);
                return r == TG_ENOMEM ? r : api_reply_store_error(res, rid, r);
        }
        return api_reply_json(res, 200, json_pack("{s:o}", "accounts", list));
}

int api_change_account_as(struct api *api, const struct http_request *req, const char *name,
                          const char *principal, struct http_response *res, const char *rid)
{
        struct account_request a;
        struct account_change change;
        struct account_controls now;
        struct api_error err;
        struct tg_config *view;
        const char *who = NULL, *field = NULL;
        char why[300];
        int r;

        if (!config_account_find(&api->cfg, name))
                return reply_unknown_account(api, res, rid);
        if (req->body_len > api->cfg.api_max_body_bytes)
                return api_reply_code(res, rid, 413, "body_too_large", NULL,
                                      "the request body is too large");
        if (api_parse_account(req->body, req->body_len, &a, &err) < 0)
                return api_reply_error(res, rid, &err);
        if (principal) {
                who = principal;
        } else {
                r = api_actor(api, a.operator_name, "api", &who, res, rid);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
        change = (struct account_change){.set_rate = a.set_rate,
                                         .set_cap = a.set_cap,
                                         .set_paused = a.set_paused,
                                         .starts_per_second = a.starts_per_second,
                                         .max_in_flight = a.max_in_flight,
                                         .paused = a.paused};
        r = account_ctl_change(api->store, &api->cfg, name, &change, who, a.reason, api_wall_now(),
                               &now, &field, why, sizeof(why));
        if (r == TG_EINVAL)
                return api_reply_code(res, rid, 422, "invalid_field", field, why);
        if (r == TG_EAGAIN)
                return api_reply_code(res, rid, 409, "rate_change_pending", field, why);
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        log_emit(LOG_WARN, "account_changed",
                 json_pack("{s:s, s:s, s:s, s:s}", "account", name, "by", who, "reason", a.reason,
                           "request_id", rid));
        view = malloc(sizeof(*view));
        if (!view)
                return TG_ENOMEM;
        account_ctl_find(&api->cfg, name, view);
        r = api_reply_json(res, 200, account_ctl_json(view, name, &now));
        free(view);
        return r;
}

struct audit_page {
        json_t *list;
        int64_t last;
};

static int on_audit(const struct account_audit_record *a, void *userdata)
{
        struct audit_page *p = userdata;

        p->last = a->id;
        return json_array_append_new(p->list, account_ctl_audit_json(a)) < 0 ? TG_ENOMEM : 0;
}

static int get_audit(struct api *api, const struct http_request *req, struct http_response *res,
                     const char *rid, const char *name)
{
        struct audit_page p = {.list = NULL};
        int64_t after = 0, limit = 0;
        int r;

        if (!config_account_find(&api->cfg, name))
                return reply_unknown_account(api, res, rid);
        if (api_int_arg(req, "after", 0, 0, INT64_MAX, &after) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "after",
                                      "after must be an audit id (an integer >= 0)");
        if (api_int_arg(req, "limit", AUDIT_LIMIT_DEF, 1, AUDIT_LIMIT_MAX, &limit) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "limit",
                                      "limit must be an integer from 1 to 1000");
        p.list = json_array();
        p.last = after;
        if (!p.list)
                return TG_ENOMEM;
        r = store_list_account_audit(api->store, name, after, (unsigned)limit, on_audit, &p);
        if (r < 0) {
                json_decref(p.list);
                return r == TG_ENOMEM ? r : api_reply_store_error(res, rid, r);
        }
        return api_reply_json(
            res, 200, json_pack("{s:o, s:I}", "audit", p.list, "next_after", (json_int_t)p.last));
}

int api_route_accounts(struct api *api, const struct http_request *req, struct http_response *res,
                       const char *rid, const char *rest)
{
        char name[TG_ACCOUNT_NAME_MAX + 1];
        const char *slash;
        size_t n;

        if (rest[0] == '\0') {
                if (!api_is_get(req))
                        return api_reply_method_not_allowed(res, rid, "GET");
                return api_get_accounts(api, res, rid);
        }
        rest++; /* the '/' */
        slash = strchr(rest, '/');
        n = slash ? (size_t)(slash - rest) : strlen(rest);
        if (n == 0 || n >= sizeof(name))
                return reply_unknown_account(api, res, rid);
        memcpy(name, rest, n);
        name[n] = '\0';
        if (!slash) {
                if (strcmp(req->method, "POST") != 0)
                        return api_reply_method_not_allowed(res, rid, "POST");
                return api_change_account_as(api, req, name, NULL, res, rid);
        }
        if (strcmp(slash, "/audit") != 0)
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such route");
        if (!api_is_get(req))
                return api_reply_method_not_allowed(res, rid, "GET");
        return get_audit(api, req, res, rid, name);
}
