/*
 * api_admission — admission control in front of POST /v1/refunds (and
 * of POST /v1/refunds:batch, as a whole), per account: a refund is admitted
 * or refused by its own account's backlog and drain rate, so that a flooded
 * account never refuses another's refunds. The figures come from the store:
 * the account's open backlog (store_account_backlog; with one account
 * configured, every operation's, store_stats, as before accounts) and the
 * account's exit samples of the last admission.window_s (starts, operations
 * closed, busy seconds), re-read at most once a second per account; refunds
 * this process accepted since the last read are added to the backlog so that
 * a burst inside one second is counted. The rate ceiling is the account's
 * exit.starts_per_second. The decision itself is core/admission.c.
 *
 * Invariants: nothing is stored for a refused refund (this runs before
 * store_accept); an operation already accepted never reaches this check
 * (post_refund looks it up first); a batch is decided for each account it
 * names, for that account's new refunds (api_batch.c), as if its last one
 * came alone; a store failure while measuring admits rather than refuses
 * (the refund is then kept, never lost). The API's store handle is turned to
 * the account measured and back (store_use_account), on the API's thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/api_int.h"
#include "daemon/exit_stats.h"
#include "daemon/log.h"

#define CACHE_MS       1000
#define OWNER_FRESH_MS 3000

struct window {
        uint64_t provider_pending; /* in: the account's, now */
        uint64_t starts, closes;
        unsigned busy;
        tg_wall_ms last_at;
        bool last_held;
        bool any;
};

static int add_sample(const struct exit_sample *s, void *userdata)
{
        struct window *w = userdata;

        w->starts += s->starts;
        w->closes += s->op_closes;
        /* a second with only provider-pending refunds open is idle: they
         * wait for the provider, and would make the measured rate a poll
         * an hour */
        if (admission_second_busy(s->in_flight, s->oldest_open_accepted_at != TG_WALL_NEVER,
                                  (uint64_t)s->backlog[OP_PENDING] + s->backlog[OP_IN_FLIGHT] +
                                      s->backlog[OP_RETRY_WAIT] + s->backlog[OP_UNKNOWN],
                                  w->provider_pending))
                w->busy++;
        w->last_at = s->at;
        w->last_held = s->held;
        w->any = true;
        return 0;
}

/* From the exit's newest samples: what is left at `now` of the
 * provider-wide hold it wrote ("hold_until" in the figures: the latest of
 * any share's; 0 when none is in force or it cannot be read), and the start
 * rate in force ("rate": exit.adaptive moves it under the ceiling; the
 * ceiling when it cannot be read). */
static void newest_figures(struct api *api, double ceiling, tg_wall_ms now, int64_t *ret_hold_left,
                           double *ret_rate)
{
        struct exit_sample *s = calloc(1, sizeof(*s));
        json_t *fig, *until, *rate;
        bool fresh = false;

        *ret_hold_left = 0;
        *ret_rate = ceiling;
        if (!s)
                return;
        if (exit_stats_read_now(api->store, now, OWNER_FRESH_MS, s, &fresh) == 0 && fresh &&
            s->figures[0]) {
                fig = json_loads(s->figures, 0, NULL);
                until = json_object_get(fig, "hold_until");
                if (s->held && json_is_integer(until) && json_integer_value(until) > now)
                        *ret_hold_left = (int64_t)json_integer_value(until) - now;
                rate = json_object_get(fig, "rate");
                if (json_is_number(rate) && json_number_value(rate) > 0 &&
                    json_number_value(rate) < *ret_rate)
                        *ret_rate = json_number_value(rate);
                json_decref(fig);
        }
        free(s);
}

/* The account's configured start rate: the ceiling of its estimate. */
static double account_ceiling(const struct api *api, const char *account)
{
        const struct tg_account *a = config_account_find(&api->cfg, account);

        return a && a->settings ? a->settings->exit.starts_per_second
                                : api->cfg.exit.starts_per_second;
}

/* The window's figures from the samples of the account the handle serves
 * (every share summed, by second) into c, with `backlog` as the open
 * backlog. */
static int read_window(struct api *api, tg_wall_ms now, uint64_t backlog,
                       struct api_admission_cache *c)
{
        int64_t window_ms = api->cfg.admission.window_ms;
        struct window *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return TG_ENOMEM;
        /* a failure to count them weighs them (as before pending refunds) */
        if (store_provider_pending(api->store, store_account(api->store), &w->provider_pending) < 0)
                w->provider_pending = 0;
        r = exit_stats_read_seconds(api->store, now - window_ms, (unsigned)(window_ms / 1000) + 10,
                                    add_sample, w);
        if (r < 0) {
                free(w);
                return r;
        }
        memset(&c->fig, 0, sizeof(c->fig));
        c->fig.backlog = backlog;
        c->fig.provider_pending = w->provider_pending;
        c->fig.starts = w->starts;
        c->fig.closes = w->closes;
        c->fig.busy_seconds = w->busy;
        c->owner_fresh = w->any && now - w->last_at <= OWNER_FRESH_MS;
        c->held = c->owner_fresh && w->last_held;
        /* a hold the exit knows about: nothing starts before it ends; and
         * the backlog drains at the rate in force, not the ceiling */
        newest_figures(api, account_ceiling(api, store_account(api->store)), now,
                       &c->fig.hold_remaining_ms, &c->fig.starts_per_second);
        if (!c->held)
                c->fig.hold_remaining_ms = 0;
        c->read_at = now;
        c->accepted_since = 0;
        free(w);
        return 0;
}

/* The cache entry of the account (the config's order); NULL for a name
 * not configured. An entry that was another account's (a reload changed
 * the accounts) is emptied first. */
static struct api_admission_cache *cache_of(struct api *api, const char *account)
{
        const struct tg_account *a = config_account_find(&api->cfg, account);
        struct api_admission_cache *c;

        if (!a)
                return NULL;
        c = &api->adm[a - api->cfg.accounts];
        if (strcmp(c->account, account) != 0) {
                memset(c, 0, sizeof(*c));
                snprintf(c->account, sizeof(c->account), "%s", account);
        }
        return c;
}

/* The open backlog admission weighs for the account: with one account
 * configured every operation's (as before accounts, whatever the rows'
 * accounts), else the account's own. */
static int open_backlog(struct api *api, const char *account, uint64_t *ret_backlog)
{
        uint64_t by_state[OP_STATE_COUNT];
        struct store_stats st;
        const uint64_t *n = by_state;
        int r;

        if (api->cfg.account_count <= 1) {
                r = store_stats(api->store, &st);
                n = st.by_state;
        } else {
                r = store_account_backlog(api->store, account, by_state);
        }
        if (r == 0)
                *ret_backlog = n[OP_PENDING] + n[OP_IN_FLIGHT] + n[OP_RETRY_WAIT] + n[OP_UNKNOWN];
        return r;
}

/* read_window() for account: the handle is turned to it and back. */
static int read_account_window(struct api *api, const char *account, tg_wall_ms now,
                               uint64_t backlog, struct api_admission_cache *c)
{
        char back[TG_ACCOUNT_NAME_MAX + 1];
        int r;

        snprintf(back, sizeof(back), "%s", store_account(api->store));
        if (strcmp(back, account) == 0)
                return read_window(api, now, backlog, c);
        r = store_use_account(api->store, account);
        if (r == 0)
                r = read_window(api, now, backlog, c);
        (void)store_use_account(api->store, back);
        return r;
}

int api_admission_figures(struct api *api, const char *account, tg_wall_ms now,
                          struct api_admission_cache *ret)
{
        struct api_admission_cache *c = cache_of(api, account);
        uint64_t backlog = 0;
        int r;

        if (!c)
                return TG_EINVAL;
        if (c->read_at > 0 && now >= c->read_at && now - c->read_at < CACHE_MS) {
                *ret = *c;
                ret->fig.backlog += c->accepted_since;
                return 0;
        }
        r = open_backlog(api, account, &backlog);
        if (r < 0)
                return r;
        r = read_account_window(api, account, now, backlog, c);
        if (r == 0)
                *ret = *c;
        return r;
}

int api_admission_figures_for(struct api *api, const char *account, tg_wall_ms now,
                              uint64_t backlog, struct api_admission_cache *ret)
{
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->account, sizeof(ret->account), "%s", account);
        return read_account_window(api, account, now, backlog, ret);
}

void api_admission_accepted(struct api *api, const char *account, uint64_t n)
{
        struct api_admission_cache *c = cache_of(api, account);

        if (c)
                c->accepted_since += n;
}

void api_admission_forget(struct api *api)
{
        for (unsigned i = 0; i < TG_ACCOUNTS_MAX; i++)
                api->adm[i].read_at = 0;
}

static tg_wall_ms second_start(tg_wall_ms t)
{
        return t - (t % 1000 + 1000) % 1000;
}

void api_refusals_flush(struct api *api, tg_wall_ms now, bool force)
{
        int64_t keep_ms = (int64_t)api->cfg.stats_keep_hours * 3600 * 1000;

        if (api->refused == 0)
                return;
        if (!force && second_start(now) == api->refused_second &&
            now - api->refused_flushed_at < 1000 && now >= api->refused_flushed_at)
                return;
        /* Counted even when the write fails: a refusal is not worth a retry
         * loop on the intake path (the log line of each refusal remains). */
        if (store_refusals_add(api->store, api->refused_second, api->refused, now - keep_ms) < 0)
                log_emit(LOG_DEBUG, "refusals_not_recorded",
                         json_pack("{s:i}", "refused", (int)api->refused));
        api->refused = 0;
        api->refused_flushed_at = now;
}

/* One more refusal, for the console's timeline and `tollgate report`. */
static void count_refusal(struct api *api, tg_wall_ms now)
{
        if (api->refused > 0 && second_start(now) != api->refused_second)
                api_refusals_flush(api, now, true);
        api->refused_second = second_start(now);
        api->refused++;
        api_refusals_flush(api, now, false);
}

int api_admission_decide(struct api *api, const char *account, uint64_t count,
                         struct api_admission *ret)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        ret->d.admit = true;
        if (!api->cfg.admission.enabled || count == 0)
                return 0;
        r = api_admission_figures(api, account, api_wall_now(), &ret->fig);
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return 0;
        /* the last of `count` new refunds waits behind the other count - 1 */
        ret->fig.fig.backlog += count - 1;
        if (admission_decide(&api->cfg.admission, &ret->fig.fig, &ret->d) < 0)
                ret->d.admit = true;
        return 0;
}

int api_admission_refuse(struct api *api, const struct api_admission *a, struct http_response *res,
                         const char *rid)
{
        const struct admission_decision *d = &a->d;
        char retry[24], check_back[32 + TG_ACCOUNT_NAME_MAX];
        char *text;
        json_t *body;
        int r;

        api->counters->admission_refused[strcmp(d->why, "max_backlog") == 0 ? 1 : 0]++;
        count_refusal(api, api_wall_now());
        /* with several accounts, the figures that refused are the account's */
        if (api->cfg.account_count > 1)
                snprintf(check_back, sizeof(check_back), "/v1/stats?account=%s", a->fig.account);
        else
                snprintf(check_back, sizeof(check_back), "/v1/stats");
        log_emit(LOG_WARN, "admission_refused",
                 json_pack("{s:s, s:s, s:s, s:I, s:I, s:f, s:f, s:I}", "request_id", rid, "account",
                           a->fig.account, "why", d->why, "backlog", (json_int_t)a->fig.fig.backlog,
                           "projected_wait_ms", (json_int_t)d->projected_ms, "calls_per_close",
                           d->calls_per_close, "starts_per_second", d->rate, "retry_after_s",
                           (json_int_t)d->retry_after_s));
        body = json_pack(
            "{s:{s:s, s:s, s:n, s:b}, s:s, s:I, s:f, s:I, s:s}", "error", "code", "over_capacity",
            "message",
            strcmp(d->why, "max_backlog") == 0
                ? "the backlog is at its limit; nothing was stored: send the same request "
                  "again after Retry-After seconds (GET /v1/stats shows the backlog)"
                : "the backlog cannot reach a final answer within the promised time; nothing was "
                  "stored: send the same request again after Retry-After seconds "
                  "(GET /v1/stats shows the backlog)",
            "field", "retryable", 1, "request_id", rid, "retry_after_s",
            (json_int_t)d->retry_after_s, "projected_wait_s", (double)d->projected_ms / 1000.0,
            "backlog", (json_int_t)a->fig.fig.backlog, "check_back", check_back);
        if (!body)
                return TG_ENOMEM;
        text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (!text)
                return TG_ENOMEM;
        r = http_response_take(res, 503, API_JSON_TYPE, text, strlen(text));
        if (r < 0)
                return r;
        snprintf(retry, sizeof(retry), "%lld", (long long)d->retry_after_s);
        http_response_add_header(res, "Retry-After", retry);
        return 0;
}

int api_admission_check(struct api *api, const char *account, struct http_response *res,
                        const char *rid, bool *ret_admit)
{
        struct api_admission a;
        int r = api_admission_decide(api, account, 1, &a);

        *ret_admit = true;
        if (r < 0 || a.d.admit)
                return r;
        *ret_admit = false;
        return api_admission_refuse(api, &a, res, rid);
}
