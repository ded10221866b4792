/*
 * ui_data — what the console reads: the live view (the newest timeline
 * points and the exit's status), any stored window of the timeline, the
 * operations by state, one operation, and the manual-review queue.
 *
 * Why the live view costs the same with one dashboard or fifty: it is read
 * from the store at most once every UI_LIVE_TTL_MS into one cache (the last
 * minute of points, and the status as JSON text), and every poll in between
 * is answered from that cache; a poll names the last point it has
 * (?since=), so an answer carries one or two new points, not the window.
 * docs/design.md argues polling against Server-Sent Events.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/admission.h"
#include "core/tg_error.h"
#include "daemon/account_ctl.h"
#include "daemon/exit_stats.h"
#include "daemon/notify.h"
#include "daemon/render.h"
#include "daemon/ui_int.h"
#include "platform/secmem.h"
#include "store/store_events.h"

#define OWNER_FRESH_MS   3000
#define SHARES_RECENT_MS 5000
#define TIMELINE_POINTS  4000 /* an hour and a bit at one point a second */
#define JSON_FLAGS       (JSON_COMPACT | JSON_REAL_PRECISION(6))
#define LIST_LIMIT_DEF   50
#define LIST_LIMIT_MAX   200
#define EVENTS_OF_OP_MAX 100

void ui_live_release(struct ui_live *live)
{
        timeline_series_free(&live->series);
        free(live->status);
        live->status = NULL;
        live->read_at = 0;
}

/* ---- the exit's status ------------------------------------------------------ */

struct shares_seen {
        struct exit_sample *newest; /* [STORE_SHARES_MAX] */
        bool used[STORE_SHARES_MAX];
};

static int share_row(const struct exit_sample *x, void *userdata)
{
        struct shares_seen *s = userdata;

        if (x->share < STORE_SHARES_MAX) {
                s->newest[x->share] = *x; /* oldest first: later is newer */
                s->used[x->share] = true;
        }
        return 0;
}

static json_t *shares_json(struct api *api, tg_wall_ms now)
{
        struct shares_seen s;
        json_t *a = json_array();

        memset(&s, 0, sizeof(s));
        s.newest = calloc(STORE_SHARES_MAX, sizeof(*s.newest));
        if (!a || !s.newest) {
                free(s.newest);
                json_decref(a);
                return NULL;
        }
        if (store_list_samples(api->store, now - SHARES_RECENT_MS - 1,
                               STORE_SHARES_MAX * (SHARES_RECENT_MS / 1000 + 2), share_row,
                               &s) == 0) {
                for (unsigned k = 0; k < STORE_SHARES_MAX; k++) {
                        const struct exit_sample *x = &s.newest[k];
                        if (!s.used[k])
                                continue;
                        json_array_append_new(
                            a, json_pack("{s:i, s:I, s:I, s:b, s:i, s:b}", "share", (int)k, "epoch",
                                         (json_int_t)x->epoch, "age_ms", (json_int_t)(now - x->at),
                                         "alive", now - x->at <= OWNER_FRESH_MS, "in_flight",
                                         (int)x->in_flight, "held", x->held));
                }
        }
        free(s.newest);
        return a;
}

static const char *role_name(const struct api *api)
{
        if (!api->standby)
                return "none";
        return *api->standby ? "standby" : "owner";
}

static json_t *limits_json(const struct tg_config *c)
{
        json_t *o = json_pack(
            "{s:f, s:i, s:f, s:i, s:I, s:I, s:i, s:I, s:i}", "starts_per_second",
            c->exit.starts_per_second, "max_in_flight", (int)c->exit.max_in_flight,
            "query_starts_per_second", c->exit_query_starts_per_second, "shares",
            (int)c->exit_shares, "timeout_ms", (json_int_t)c->provider_timeout_ms,
            "connect_timeout_ms", (json_int_t)c->provider_connect_timeout_ms, "max_attempts",
            (int)c->policy.max_attempts, "deadline_s", (json_int_t)(c->policy.deadline_ms / 1000),
            "max_queries", (int)c->policy.max_queries);
        if (o)
                json_object_set_new(o, "keep_hours", json_integer(c->stats_keep_hours));
        return o;
}

/* The account's configured limits and its run-time controls, into o. */
static void account_json(struct api *api, const char *account, json_t *o)
{
        struct tg_config *view = secmem_alloc(sizeof(*view)); /* it holds secrets */
        struct account_controls c;

        if (!view || !account_ctl_find(&api->cfg, account, view)) {
                secmem_free(view);
                return;
        }
        json_object_set_new(o, "limits", limits_json(view));
        if (store_controls_get(api->store, account, &c) == 0)
                json_object_set_new(o, "controls", account_ctl_json(view, account, &c));
        secmem_free(view);
}

static json_t *status_json(struct api *api, tg_wall_ms now, const struct timeline_series *series)
{
        struct exit_sample *x = calloc(1, sizeof(*x));
        struct api_admission_cache adm;
        struct admission_decision d;
        struct store_split split;
        struct store_stats st;
        bool fresh = false, have_split;
        json_t *o, *backlog, *fig = NULL, *hold_until = NULL;
        unsigned refused_minute = 0;
        double oldest = -1;
        int r;
        /* admission as the account the console shows is judged (the config's
         * first when the handle's is not configured) */
        const char *account = config_account_find(&api->cfg, store_account(api->store))
                                  ? store_account(api->store)
                                  : api->cfg.accounts[0].name;

        if (!x)
                return NULL;
        r = exit_stats_read_now(api->store, now, OWNER_FRESH_MS, x, &fresh);
        if (r < 0)
                fresh = false;
        backlog = json_object();
        if (fresh) {
                for (int s = 0; s < OP_STATE_COUNT; s++)
                        if (s != OP_SUCCEEDED && s != OP_REJECTED)
                                json_object_set_new(backlog, op_state_name((enum op_state)s),
                                                    json_integer(x->backlog[s]));
                if (x->oldest_open_accepted_at != TG_WALL_NEVER)
                        oldest = (double)(now - x->oldest_open_accepted_at) / 1000.0;
                fig = x->figures[0] ? json_loads(x->figures, 0, NULL) : NULL;
                if (x->held && json_is_integer(json_object_get(fig, "hold_until")))
                        hold_until =
                            json_integer(json_integer_value(json_object_get(fig, "hold_until")));
        } else if (store_stats(api->store, &st) == 0) {
                /* No dispatcher writes samples: count the backlog here. */
                for (int s = 0; s < OP_STATE_COUNT; s++)
                        if (s != OP_SUCCEEDED && s != OP_REJECTED)
                                json_object_set_new(backlog, op_state_name((enum op_state)s),
                                                    json_integer((json_int_t)st.by_state[s]));
        }
        json_decref(fig);
        have_split = store_split_get(api->store, &split) == 0;
        /* With a fresh sample its backlog is the account's: no count of every
         * operation (O(rows)) twice a second for the dashboards. */
        r = fresh ? api_admission_figures_for(
                        api, account, now,
                        (uint64_t)x->backlog[OP_PENDING] + x->backlog[OP_IN_FLIGHT] +
                            x->backlog[OP_RETRY_WAIT] + x->backlog[OP_UNKNOWN],
                        &adm)
                  : api_admission_figures(api, account, now, &adm);
        if (r < 0 || admission_decide(&api->cfg.admission, &adm.fig, &d) < 0) {
                memset(&adm, 0, sizeof(adm));
                memset(&d, 0, sizeof(d));
                d.why = "unknown";
                d.admit = true;
        }
        for (size_t i = 0; i < series->n; i++)
                if (series->points[i].at >= now - 60000)
                        refused_minute += series->points[i].refused;
        o = json_pack("{s:I, s:s, s:s, s:b, s:I, s:b, s:o, s:i, s:o, s:o}", "now", (json_int_t)now,
                      "role", role_name(api), "store", store_backend(api->store), "owner_alive",
                      fresh, "owner_epoch", (json_int_t)(fresh ? x->epoch : 0), "held",
                      fresh && x->held, "hold_until", hold_until ? hold_until : json_null(),
                      "in_flight", fresh ? (int)x->in_flight : 0, "backlog",
                      backlog ? backlog : json_object(), "oldest_pending_age_s",
                      oldest < 0 ? json_null() : json_real(round(oldest * 10) / 10));
        free(x);
        if (!o)
                return NULL;
        json_object_set_new(o, "shares", shares_json(api, now));
        json_object_set_new(o, "split",
                            have_split ? json_pack("{s:i, s:f, s:i}", "shares", (int)split.shares,
                                                   "starts_per_second", split.starts_per_second,
                                                   "max_in_flight", (int)split.max_in_flight)
                                       : json_null());
        json_object_set_new(o, "account", json_string(account));
        /* refunds the provider reports pending: waiting for it, not us */
        json_object_set_new(o, "provider_pending",
                            json_integer((json_int_t)adm.fig.provider_pending));
        account_json(api, account, o);
        json_object_set_new(o, "admission",
                            json_pack("{s:b, s:b, s:s, s:f, s:I, s:I, s:I, s:i}", "enabled",
                                      api->cfg.admission.enabled, "would_admit",
                                      d.admit || !api->cfg.admission.enabled, "why",
                                      d.why ? d.why : "ok", "projected_wait_s",
                                      round((double)d.projected_ms / 100.0) / 10.0, "max_wait_s",
                                      (json_int_t)(api->cfg.admission.max_wait_ms / 1000),
                                      "backlog", (json_int_t)adm.fig.backlog, "max_backlog",
                                      (json_int_t)api->cfg.admission.max_backlog,
                                      "refused_last_minute", (int)refused_minute));
        return o;
}

/* ---- the live view ------------------------------------------------------------- */

static int live_refresh(struct api *api, struct ui_live *live, tg_wall_ms now)
{
        struct timeline_series series;
        json_t *st;
        char *text;
        int r;

        if (live->read_at > 0 && now >= live->read_at && now - live->read_at < UI_LIVE_TTL_MS)
                return 0;
        r = timeline_read(api->store, now - UI_LIVE_WINDOW_MS, now + 1000,
                          UI_LIVE_WINDOW_MS / 1000 + 2, &series);
        if (r < 0)
                return r;
        st = status_json(api, now, &series);
        text = st ? json_dumps(st, JSON_COMPACT) : NULL;
        json_decref(st);
        if (!text) {
                timeline_series_free(&series);
                return TG_ENOMEM;
        }
        ui_live_release(live);
        live->series = series;
        live->status = text;
        live->read_at = now;
        live->reads++;
        return 0;
}

static int live_of(struct api *api, const struct http_request *req, struct http_response *res,
                   const char *rid, unsigned account, bool named)
{
        struct ui_live *live = &api->ui->lives[account < api->ui->live_count ? account : 0];
        int64_t since = 0;
        json_t *pts;
        char *ptext, *body;
        size_t len;
        int r;

        if (api_int_arg(req, "since", 0, 0, INT64_MAX, &since) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "since",
                                      "must be a time in ms since the epoch");
        (void)named;
        r = live_refresh(api, live, api_wall_now());
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        /* Only the points after the caller's last one. */
        pts = timeline_series_json(&live->series, since > 0 ? since : INT64_MIN, &api->cfg);
        ptext = pts ? json_dumps(pts, JSON_FLAGS) : NULL;
        json_decref(pts);
        if (!ptext)
                return TG_ENOMEM;
        len = strlen(ptext) + strlen(live->status) + 64;
        body = malloc(len);
        if (!body) {
                free(ptext);
                return TG_ENOMEM;
        }
        snprintf(body, len, "{\"status\":%s,\"series\":%s}", live->status, ptext);
        free(ptext);
        return http_response_take(res, 200, API_JSON_TYPE, body, strlen(body));
}

/* ---- any stored window ------------------------------------------------------------ */

static int timeline_of(struct api *api, const struct http_request *req, struct http_response *res,
                       const char *rid, unsigned account, bool named)
{
        tg_wall_ms now = api_wall_now();
        int64_t keep_ms = (int64_t)api->cfg.stats_keep_hours * 3600 * 1000;
        int64_t from = 0, to = 0;
        struct timeline_series s;
        json_t *o;
        char *text;
        int r;

        (void)account;
        (void)named;
        if (api_int_arg(req, "to", now, 1, INT64_MAX / 2, &to) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "to",
                                      "must be a time in ms since the epoch");
        if (api_int_arg(req, "from", to - 3600 * 1000, 0, INT64_MAX / 2, &from) < 0 || from >= to)
                return api_reply_code(res, rid, 400, "invalid_parameter", "from",
                                      "must be a time in ms since the epoch, before `to`");
        if (to - from > keep_ms + 3600 * 1000)
                return api_reply_code(res, rid, 400, "invalid_parameter", "from",
                                      "the window is longer than the store keeps samples "
                                      "(stats.keep_hours)");
        r = timeline_read(api->store, from, to, TIMELINE_POINTS, &s);
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        o = timeline_series_json(&s, INT64_MIN, &api->cfg);
        timeline_series_free(&s);
        text = o ? json_dumps(o, JSON_FLAGS) : NULL;
        json_decref(o);
        if (!text)
                return TG_ENOMEM;
        return http_response_take(res, 200, API_JSON_TYPE, text, strlen(text));
}

/* ---- operations ----------------------------------------------------------------------- */

struct op_page {
        json_t *items;
        unsigned n, max;
        int64_t last_id;
        tg_wall_ms now;
};

static int add_op(const struct op_record *op, void *userdata)
{
        struct op_page *p = userdata;
        json_t *o = render_op(op);

        if (!o)
                return TG_ENOMEM;
        json_object_set_new(o, "age_s", json_integer((p->now - op->accepted_at) / 1000));
        json_object_set_new(o, "last_http_status",
                            op->last_http_status ? json_integer(op->last_http_status)
                                                 : json_null());
        if (json_array_append_new(p->items, o) < 0)
                return TG_ENOMEM;
        p->last_id = op->id;
        return ++p->n >= p->max ? 1 : 0;
}

static int reply_page(struct http_response *res, const char *rid, struct op_page *p, int r)
{
        if (r < 0) {
                json_decref(p->items);
                if (r == TG_ENOMEM)
                        return r;
                return api_reply_store_error(res, rid, r);
        }
        return api_reply_json(res, 200,
                              json_pack("{s:o, s:i, s:o}", "items", p->items, "count", (int)p->n,
                                        "next_after",
                                        p->n == p->max ? json_integer(p->last_id) : json_null()));
}

/* Reads a page's after and limit arguments and opens *p for them: 0; 1 when
 * a 400 naming the argument was answered instead; TG_ENOMEM. */
static int page_open(const struct http_request *req, struct http_response *res, const char *rid,
                     struct op_page *p, int64_t *ret_after)
{
        int64_t limit = 0;
        int r;

        if (api_int_arg(req, "after", 0, 0, INT64_MAX, ret_after) < 0) {
                r = api_reply_code(res, rid, 400, "invalid_parameter", "after",
                                   "must be the next_after of the previous page");
                return r < 0 ? r : 1;
        }
        if (api_int_arg(req, "limit", LIST_LIMIT_DEF, 1, LIST_LIMIT_MAX, &limit) < 0) {
                r = api_reply_code(res, rid, 400, "invalid_parameter", "limit",
                                   "must be an integer in [1, 200]");
                return r < 0 ? r : 1;
        }
        p->items = json_array();
        if (!p->items)
                return TG_ENOMEM;
        p->max = (unsigned)limit;
        p->now = api_wall_now();
        return 0;
}

int ui_get_ops(struct api *api, const struct http_request *req, struct http_response *res,
               const char *rid)
{
        struct op_page p = {0};
        enum op_state state = OP_PENDING;
        char name[32];
        int64_t after = 0;
        int r;

        r = http_request_arg(req, "state", name, sizeof(name));
        if (r < 0 || op_state_parse(name, &state) < 0)
                return api_reply_not_one_of(res, rid, "state", TG_VOCAB_STATES);
        r = page_open(req, res, rid, &p, &after);
        if (r != 0)
                return r < 0 ? r : 0;
        r = store_list_state(api->store, state, after, p.max, add_op, &p);
        return reply_page(res, rid, &p, r == 1 ? 0 : r);
}

/* The events of one operation with their deliveries, into o's "events"
 * (its first EVENTS_OF_OP_MAX by id: an operation has a handful). */
static int add_events(struct api *api, const struct op_record *op, json_t *o)
{
        struct store_event *buf = calloc(EVENTS_OF_OP_MAX, sizeof(*buf));
        json_t *arr = json_array();
        unsigned n = 0;
        int r = buf && arr ? 0 : TG_ENOMEM;

        if (r == 0)
                r = store_events_of_op(api->store, op->id, EVENTS_OF_OP_MAX, buf, &n);
        for (unsigned i = 0; r == 0 && i < n; i++) {
                json_t *e = notify_event_json_delivery(&buf[i]);
                if (!e || json_array_append_new(arr, e) < 0)
                        r = TG_ENOMEM;
        }
        free(buf);
        if (r == 0 && json_object_set_new(o, "events", arr) == 0)
                return 0;
        if (r == 0)
                return TG_ENOMEM; /* set_new took arr */
        json_decref(arr);
        return r;
}

int ui_get_op(struct api *api, const char *id, struct http_response *res, const char *rid)
{
        struct op_record op;
        json_t *o = NULL;
        int r;

        api_note_op(api, id);
        r = store_get(api->store, id, &op);
        if (r == 0)
                r = render_op_full(api->store, &op, &o);
        if (r == 0)
                r = add_events(api, &op, o);
        if (r < 0)
                json_decref(o);
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        json_object_set_new(o, "age_s", json_integer((api_wall_now() - op.accepted_at) / 1000));
        return api_reply_json(res, 200, o);
}

int ui_get_deliveries(struct api *api, const struct http_request *req, struct http_response *res,
                      const char *rid)
{
        struct op_page p = {0};
        struct store_event *buf;
        int64_t after = 0;
        unsigned n = 0;
        int r = page_open(req, res, rid, &p, &after);

        if (r != 0)
                return r < 0 ? r : 0;
        buf = calloc(p.max, sizeof(*buf));
        r = buf ? store_events_list(api->store, after, STORE_EVENTS_FAILED, p.max, buf, &n)
                : TG_ENOMEM;
        for (unsigned i = 0; r == 0 && i < n; i++) {
                json_t *e = notify_event_json_delivery(&buf[i]);
                if (!e || json_array_append_new(p.items, e) < 0)
                        r = TG_ENOMEM;
                p.last_id = buf[i].id;
                p.n++;
        }
        free(buf);
        return reply_page(res, rid, &p, r);
}

static int manual_of(struct api *api, const struct http_request *req, struct http_response *res,
                     const char *rid, unsigned account, bool named)
{
        struct store_manual_filter filter = {.who = STORE_ASSIGNEE_ANY};
        struct op_page p = {0};
        enum manual_reason reason = MANUAL_NONE;
        char name[40];
        int64_t after = 0;
        int r;

        r = http_request_arg(req, "reason", name, sizeof(name));
        if (r == 0 && name[0] != '\0' &&
            (manual_reason_parse(name, &reason) < 0 || reason == MANUAL_NONE))
                return api_reply_not_one_of(res, rid, "reason", TG_VOCAB_REASONS);
        if (r < 0 && r != TG_ENOTFOUND)
                return api_reply_not_one_of(res, rid, "reason", TG_VOCAB_REASONS);
        r = page_open(req, res, rid, &p, &after);
        if (r != 0)
                return r < 0 ? r : 0;
        filter.reason = reason;
        filter.account = named ? api->cfg.accounts[account].name : NULL;
        r = store_list_manual_filtered(api->store, after, &filter, p.max, add_op, &p);
        return reply_page(res, rid, &p, r == 1 ? 0 : r);
}

/* ---- one account at a time ------------------------------------------------------------ */

typedef int (*account_read_fn)(struct api *api, const struct http_request *req,
                               struct http_response *res, const char *rid, unsigned account,
                               bool named);

/* fn with the API's store handle turned to req's ?account= (named), else
 * to the account the handle serves (the config's first when that one is
 * not configured), and turned back after; account is its index in the
 * config. */
static int on_account(struct api *api, const struct http_request *req, struct http_response *res,
                      const char *rid, account_read_fn fn)
{
        char name[TG_ACCOUNT_NAME_MAX + 1], back[TG_ACCOUNT_NAME_MAX + 1];
        const struct tg_account *a;
        bool turn;
        int r = api_account_arg(api, req, res, rid, name);

        if (r != 0)
                return r < 0 ? r : 0;
        snprintf(back, sizeof(back), "%s", store_account(api->store));
        a = config_account_find(&api->cfg, name[0] ? name : back);
        if (!a)
                a = &api->cfg.accounts[0];
        turn = strcmp(a->name, back) != 0;
        if (turn && (r = store_use_account(api->store, a->name)) < 0)
                return api_reply_store_error(res, rid, r);
        r = fn(api, req, res, rid, (unsigned)(a - api->cfg.accounts), name[0] != '\0');
        if (turn)
                (void)store_use_account(api->store, back);
        return r;
}

int ui_get_live(struct api *api, const struct http_request *req, struct http_response *res,
                const char *rid)
{
        return on_account(api, req, res, rid, live_of);
}

int ui_get_timeline(struct api *api, const struct http_request *req, struct http_response *res,
                    const char *rid)
{
        return on_account(api, req, res, rid, timeline_of);
}

int ui_get_manual(struct api *api, const struct http_request *req, struct http_response *res,
                  const char *rid)
{
        return on_account(api, req, res, rid, manual_of);
}
