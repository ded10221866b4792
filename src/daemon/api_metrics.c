/*
 * api_metrics — GET /metrics (Prometheus text exposition format 0.0.4) and
 * GET /v1/stats (the same figures as JSON, plus a per-second series).
 *
 * Two sources, both read from the store so that any API process can answer
 * beside a dispatcher in another process:
 *   - the store's own counts (backlog by state, oldest open operation, call
 *     log size, owner epoch): durable, exact at the moment of the request;
 *   - the newest exit sample, written once a second by the owning
 *     dispatcher (app/exit_stats.h): in-flight, holds, and its cumulative
 *     counters (starts by kind, call ends by class, closes by outcome, the
 *     latency, slot lateness and attempts histograms). They are shown only
 *     while the sample is fresh (the owner is alive); a dispatcher restart
 *     resets those counters, as Prometheus counters may. With [exit]
 *     shares = N the figures are the account's: each live share's newest
 *     sample merged (exit_stats_read_now), and the series one point a
 *     second summed over the shares (exit_stats_read_seconds).
 *
 * Invariants: every family has one HELP and one TYPE line before its
 * samples; histogram buckets are cumulative, end with le="+Inf" equal to
 * _count; the whole page has a bound (METRICS_MAX plus METRICS_PER_ACCOUNT
 * for each account of the config: an account's series are a few KiB) and a
 * page that would pass it is an internal error, never a truncated page.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/api_int.h"
#include "daemon/exit_stats.h"
#include "daemon/notify.h"
#include "platform/build_info.h"
#include "store/store_events.h"

#define METRICS_MAX (256 * 1024)
/* what each account may add to the bound: its figures, histograms and
 * waits by reason come to about 8 KiB */
#define METRICS_PER_ACCOUNT (32 * 1024)
#define OWNER_FRESH_MS      3000
#define PROM_TYPE           "text/plain; version=0.0.4; charset=utf-8"

struct mbuf {
        char *p;
        size_t len, cap;
        size_t max; /* the page's bound */
        bool failed;
};

static void mb_printf(struct mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void mb_printf(struct mbuf *b, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (b->failed)
                return;
        for (;;) {
                size_t room = b->cap - b->len;
                va_start(ap, fmt);
                n = vsnprintf(b->p + b->len, room, fmt, ap);
                va_end(ap);
                if (n < 0) {
                        b->failed = true;
                        return;
                }
                if ((size_t)n < room) {
                        b->len += (size_t)n;
                        return;
                }
                size_t want = b->cap * 2;
                while (want - b->len <= (size_t)n)
                        want *= 2;
                if (want > b->max && b->len + (size_t)n < b->max)
                        want = b->max;
                if (want > b->max) {
                        b->failed = true;
                        return;
                }
                char *q = realloc(b->p, want);
                if (!q) {
                        b->failed = true;
                        return;
                }
                b->p = q;
                b->cap = want;
        }
}

static void family(struct mbuf *b, const char *name, const char *type, const char *help)
{
        mb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The figures of a fresh owner sample, or NULL. Caller decrefs. */
static json_t *owner_figures(const struct exit_sample *s, bool fresh)
{
        json_t *f;

        if (!fresh || !s->figures[0])
                return NULL;
        f = json_loads(s->figures, 0, NULL);
        if (f && !json_is_object(f)) {
                json_decref(f);
                return NULL;
        }
        return f;
}

static uint64_t fig_u64(json_t *obj, const char *key)
{
        json_t *v = json_object_get(obj, key);
        json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
        return i > 0 ? (uint64_t)i : 0;
}

/* One series of a histogram family whose HELP and TYPE were written
 * already; labels: `name="value",...` (never empty: every exit series
 * names its account). */
static void histogram_series(struct mbuf *b, const char *name, const char *labels, json_t *h,
                             const double *bounds, unsigned n)
{
        json_t *buckets = json_object_get(h, "buckets");
        uint64_t cum = 0, count = fig_u64(h, "count");
        json_t *sum = json_object_get(h, "sum");

        if (!json_is_array(buckets) || json_array_size(buckets) != n + 1)
                return;
        for (unsigned i = 0; i < n; i++) {
                json_t *v = json_array_get(buckets, i);
                cum += json_is_integer(v) && json_integer_value(v) > 0
                           ? (uint64_t)json_integer_value(v)
                           : 0;
                mb_printf(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, bounds[i],
                          (unsigned long long)cum);
        }
        mb_printf(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, (unsigned long long)count);
        mb_printf(b, "%s_sum{%s} %.9g\n", name, labels,
                  json_is_number(sum) ? json_number_value(sum) : 0.0);
        mb_printf(b, "%s_count{%s} %llu\n", name, labels, (unsigned long long)count);
}

static bool has_buckets(json_t *h, unsigned n)
{
        json_t *buckets = json_object_get(h, "buckets");

        return json_is_array(buckets) && json_array_size(buckets) == n + 1;
}

/* What the process is and what it was told: a production team alerts on
 * these against the exit's figures (a start rate near the configured one,
 * a backlog near max_backlog, ...). */
static void build_and_limits(struct mbuf *b, const struct api *api)
{
        const struct tg_config *c = &api->cfg;
        const struct {
                const char *name, *help;
                double value;
        } limits[] = {
            {"tollgate_config_starts_per_second",
             "exit.starts_per_second: the account's start rate.", c->exit.starts_per_second},
            {"tollgate_config_max_in_flight",
             "exit.max_in_flight: the account's calls open at most.",
             (double)c->exit.max_in_flight},
            {"tollgate_config_shares",
             "exit.shares: dispatchers the account's quota is split into.", (double)c->exit_shares},
            {"tollgate_config_query_starts_per_second",
             "exit.query_starts_per_second: the queries' sub-quota (0: none).",
             c->exit_query_starts_per_second},
            {"tollgate_config_query_max_in_flight",
             "exit.query_max_in_flight: the queries' calls open at most (0: the account's).",
             (double)c->exit_query_max_in_flight},
            {"tollgate_config_refund_starts_per_second",
             "exit.refund_starts_per_second: the refund POSTs' sub-quota (0: none).",
             c->exit_refund_starts_per_second},
            {"tollgate_config_refund_max_in_flight",
             "exit.refund_max_in_flight: the refund POSTs' calls open at most (0: the account's).",
             (double)c->exit_refund_max_in_flight},
            {"tollgate_config_call_timeout_seconds",
             "provider.timeout_ms: the whole call, seconds.",
             (double)c->provider_timeout_ms / 1000.0},
            {"tollgate_config_deadline_seconds",
             "retry.deadline_s: acceptance to a final answer, or manual review.",
             (double)c->policy.deadline_ms / 1000.0},
            {"tollgate_config_max_attempts", "retry.max_attempts: POSTs per operation.",
             (double)c->policy.max_attempts},
            {"tollgate_config_key_retention_seconds",
             "retry.key_retention_s: a key older than this is never re-sent.",
             (double)c->policy.key_retention_ms / 1000.0},
            {"tollgate_config_admission_enabled",
             "admission.enabled: 1 when new refunds may be refused.",
             c->admission.enabled ? 1.0 : 0.0},
            {"tollgate_config_admission_max_wait_seconds",
             "admission.max_wait_s: the projected wait past which new refunds are refused.",
             (double)c->admission.max_wait_ms / 1000.0},
            {"tollgate_config_admission_max_backlog",
             "admission.max_backlog: open operations past which new refunds are refused.",
             (double)c->admission.max_backlog},
            {"tollgate_config_retention_days",
             "retention.keep_days: final operations older than this are pruned (0: never).",
             (double)c->retention_keep_ms / (24.0 * 3600 * 1000)},
        };

        family(b, "tollgate_build_info", "gauge",
               "The version and git revision this process was built from (always 1).");
        mb_printf(b, "tollgate_build_info{version=\"%s\",revision=\"%s\"} 1\n",
                  build_info_version(), build_info_revision());
        for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
                family(b, limits[i].name, "gauge", limits[i].help);
                mb_printf(b, "%s %.9g\n", limits[i].name, limits[i].value);
        }
}

/* This API process's own counters (since it started). */
static void api_counters(struct mbuf *b, const struct api *api)
{
        static const char *const reload_results[3] = {"applied", "refused", "failed"};
        const struct api_counters *k = api->counters;

        family(b, "tollgate_api_requests_total", "counter",
               "Requests this API process answered, by route template and status code.");
        for (int r = 0; r < API_ROUTE_COUNT; r++)
                for (int code = 100; code < API_STATUS_MAX; code++)
                        if (k->requests[r][code])
                                mb_printf(b,
                                          "tollgate_api_requests_total{route=\"%s\",code=\"%d\"} "
                                          "%llu\n",
                                          api_route_name((enum api_route)r), code,
                                          (unsigned long long)k->requests[r][code]);
        family(b, "tollgate_admission_refusals_total", "counter",
               "New refunds this API process refused (503 over_capacity), by the limit passed.");
        mb_printf(b, "tollgate_admission_refusals_total{reason=\"max_wait\"} %llu\n",
                  (unsigned long long)k->admission_refused[0]);
        mb_printf(b, "tollgate_admission_refusals_total{reason=\"max_backlog\"} %llu\n",
                  (unsigned long long)k->admission_refused[1]);
        family(b, "tollgate_api_auth_failures_total", "counter",
               "Requests this API process refused for their bearer token (401): missing, "
               "malformed (two Authorization headers, a NUL byte, not Bearer) or wrong.");
        for (int i = 0; i < API_AUTH_FAILURE_COUNT; i++)
                mb_printf(b, "tollgate_api_auth_failures_total{reason=\"%s\"} %llu\n",
                          api_auth_failure_name((enum api_auth_failure)i),
                          (unsigned long long)k->auth_failures[i]);
        family(b, "tollgate_api_read_timeouts_total", "counter",
               "Connections this API process closed because a request did not arrive whole "
               "within api.request_read_timeout_ms (slow or stalled clients).");
        mb_printf(b, "tollgate_api_read_timeouts_total %llu\n",
                  (unsigned long long)http_server_read_timeouts(api->server));
        family(b, "tollgate_config_reloads_total", "counter",
               "SIGHUP reloads: applied, refused (some keys need a restart and kept their "
               "running value) or failed (the file did not load; nothing changed).");
        for (int i = 0; i < 3; i++)
                mb_printf(b, "tollgate_config_reloads_total{result=\"%s\"} %llu\n",
                          reload_results[i], (unsigned long long)k->reloads[i]);
}
static void counters(struct mbuf *b, const char *name, const char *label, const char *account,
                     json_t *obj)
{
        const char *key;
        json_t *v;

        json_object_foreach(obj, key, v)
        {
                json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
                mb_printf(b, "%s{account=\"%s\",%s=\"%s\"} %lld\n", name, account, label, key,
                          (long long)(i > 0 ? i : 0));
        }
}

static const char *role_name(const struct api *api)
{
        if (!api->standby)
                return "none";
        return *api->standby ? "standby" : "owner";
}

/* Everything both routes read. The exit's figures are one account's
 * (snapshot_read: the handle's account); /metrics reads every account's
 * (accounts_read). */
struct snapshot {
        tg_wall_ms now;
        struct store_stats st;
        struct exit_sample *sample; /* heap; at == 0 when none */
        bool fresh;
        double oldest_open_s;    /* < 0: nothing open */
        double oldest_pending_s; /* < 0: nothing pending; NAN: unknown */
};

static int snapshot_read(struct api *api, struct snapshot *ret)
{
        struct snapshot s;
        int r;

        memset(&s, 0, sizeof(s));
        s.now = api_wall_now();
        r = store_stats(api->store, &s.st);
        if (r < 0)
                return r;
        s.sample = calloc(1, sizeof(*s.sample));
        if (!s.sample)
                return TG_ENOMEM;
        /* The account: every share's newest fresh sample, merged. */
        r = exit_stats_read_now(api->store, s.now, OWNER_FRESH_MS, s.sample, &s.fresh);
        if (r < 0 && r != TG_ENOTFOUND) {
                free(s.sample);
                return r;
        }
        if (r == TG_ENOTFOUND)
                s.fresh = false;
        s.oldest_open_s = s.st.oldest_open_accepted_at == TG_WALL_NEVER
                              ? -1.0
                              : (double)(s.now - s.st.oldest_open_accepted_at) / 1000.0;
        /* With nothing in manual the store's oldest open IS the oldest
         * pending; otherwise the owner's sample says (excluding manual). */
        if (s.st.by_state[OP_MANUAL] == 0)
                s.oldest_pending_s = s.oldest_open_s;
        else if (s.fresh)
                s.oldest_pending_s =
                    s.sample->oldest_open_accepted_at == TG_WALL_NEVER
                        ? -1.0
                        : (double)(s.now - s.sample->oldest_open_accepted_at) / 1000.0;
        else
                s.oldest_pending_s = NAN;
        if (s.oldest_open_s < -1.0)
                s.oldest_open_s = 0;
        *ret = s;
        return 0;
}

/* One account's exit, as its dispatchers' newest samples say. */
struct account_snap {
        const char *name;
        struct exit_sample *sample; /* heap */
        bool fresh;
        json_t *fig;               /* its figures when fresh, else NULL */
        bool paused;               /* its run-time controls (daemon/account_ctl.h) */
        uint64_t provider_pending; /* open refunds the provider reports pending */
};

static void accounts_free(struct account_snap *a, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                free(a[i].sample);
                json_decref(a[i].fig);
        }
}

/* Every account of the config: the API's store handle is turned to each
 * in turn (requests are answered one at a time) and back. */
static int accounts_read(struct api *api, tg_wall_ms now, struct account_snap *ret, unsigned *ret_n)
{
        char back[TG_ACCOUNT_NAME_MAX + 1];
        unsigned n = 0;
        int r = 0;

        snprintf(back, sizeof(back), "%s", store_account(api->store));
        for (unsigned i = 0; r == 0 && i < api->cfg.account_count; i++) {
                struct account_snap *a = &ret[n];
                struct account_controls c;

                memset(a, 0, sizeof(*a));
                a->name = api->cfg.accounts[i].name;
                a->sample = calloc(1, sizeof(*a->sample));
                if (!a->sample) {
                        r = TG_ENOMEM;
                        break;
                }
                n++;
                r = store_use_account(api->store, a->name);
                if (r == 0)
                        r = exit_stats_read_now(api->store, now, OWNER_FRESH_MS, a->sample,
                                                &a->fresh);
                if (r == TG_ENOTFOUND) {
                        a->fresh = false;
                        r = 0;
                }
                a->fig = r == 0 ? owner_figures(a->sample, a->fresh) : NULL;
                if (r == 0 && store_controls_get(api->store, a->name, &c) == 0)
                        a->paused = c.paused;
                if (r == 0)
                        r = store_provider_pending(api->store, a->name, &a->provider_pending);
        }
        (void)store_use_account(api->store, back);
        *ret_n = n;
        if (r < 0)
                accounts_free(ret, n);
        return r;
}

/* Each account's backlog by state (the open states and manual), as its
 * exit's newest sample counted it: no count of the store per scrape. An
 * account whose exit never wrote a sample has no series. */
static void account_backlog_lines(struct mbuf *b, const struct account_snap *a, unsigned n)
{
        static const enum op_state open[] = {OP_PENDING, OP_IN_FLIGHT, OP_RETRY_WAIT, OP_UNKNOWN,
                                             OP_MANUAL};

        family(b, "tollgate_account_backlog", "gauge",
               "The account's operations in each open state and manual, as its exit's newest "
               "sample counted them.");
        for (unsigned i = 0; i < n; i++)
                for (size_t k = 0; a[i].sample->at > 0 && k < sizeof(open) / sizeof(open[0]); k++)
                        mb_printf(b, "tollgate_account_backlog{account=\"%s\",state=\"%s\"} %u\n",
                                  a[i].name, op_state_name(open[k]), a[i].sample->backlog[open[k]]);
}

/* The exit's families, one series per account (label account). */
static void exit_lines(struct mbuf *b, const struct snapshot *s, const struct account_snap *a,
                       unsigned n)
{
        char labels[96];

        family(b, "tollgate_in_flight", "gauge", "Calls open at the provider now, by account.");
        for (unsigned i = 0; i < n; i++)
                mb_printf(b, "tollgate_in_flight{account=\"%s\"} %llu\n", a[i].name,
                          (unsigned long long)(a[i].fresh ? a[i].sample->in_flight
                                               : n == 1   ? s->st.by_state[OP_IN_FLIGHT]
                                                          : 0));
        family(b, "tollgate_exit_owner_alive", "gauge",
               "1 when the account's owning dispatcher wrote a sample in the last 3 s.");
        for (unsigned i = 0; i < n; i++)
                mb_printf(b, "tollgate_exit_owner_alive{account=\"%s\"} %d\n", a[i].name,
                          a[i].fresh ? 1 : 0);
        family(b, "tollgate_account_paused", "gauge",
               "1 while an operator paused the account (tollgate account pause).");
        for (unsigned i = 0; i < n; i++)
                mb_printf(b, "tollgate_account_paused{account=\"%s\"} %d\n", a[i].name,
                          a[i].paused ? 1 : 0);
        account_backlog_lines(b, a, n);
        family(b, "tollgate_account_provider_pending", "gauge",
               "The account's refunds the provider reports as accepted but not final "
               "(pending_since set, not settled): polled on their own slow schedule "
               "(retry.pending_*), not counted by admission control.");
        for (unsigned i = 0; i < n; i++)
                mb_printf(b, "tollgate_account_provider_pending{account=\"%s\"} %llu\n", a[i].name,
                          (unsigned long long)a[i].provider_pending);
        family(
            b, "tollgate_exit_held", "gauge",
            "1 while a provider-wide hold (429/503, timeouts) stops every start of the account.");
        for (unsigned i = 0; i < n; i++)
                if (a[i].fresh)
                        mb_printf(b, "tollgate_exit_held{account=\"%s\"} %d\n", a[i].name,
                                  a[i].sample->held ? 1 : 0);
        static const struct {
                const char *name, *label, *key, *help;
        } by[] = {
            {"tollgate_calls_started_total", "kind", "starts",
             "Calls started by the exit, by account and kind (since the owner started)."},
            {"tollgate_calls_closed_total", "class", "ends",
             "Calls ended, by account and outcome class (since the owner started)."},
            {"tollgate_operations_closed_total", "outcome", "closes",
             "Operations the exit brought to succeeded, rejected or manual, by account."},
        };
        for (size_t k = 0; k < sizeof(by) / sizeof(by[0]); k++) {
                family(b, by[k].name, "counter", by[k].help);
                for (unsigned i = 0; i < n; i++)
                        counters(b, by[k].name, by[k].label, a[i].name,
                                 json_object_get(a[i].fig, by[k].key));
        }
        family(b, "tollgate_exit_holds_total", "counter",
               "Provider-wide holds the exit obeyed, by account (since the owner started).");
        for (unsigned i = 0; i < n; i++)
                if (a[i].fig)
                        mb_printf(b, "tollgate_exit_holds_total{account=\"%s\"} %llu\n", a[i].name,
                                  (unsigned long long)fig_u64(a[i].fig, "holds"));
        family(b, "tollgate_exit_rate", "gauge",
               "The start rate in force, under exit.starts_per_second (exit.adaptive and an "
               "operator's control move it; else the configured rate), by account.");
        for (unsigned i = 0; i < n; i++) {
                json_t *rate = json_object_get(a[i].fig, "rate");
                if (json_is_number(rate))
                        mb_printf(b, "tollgate_exit_rate{account=\"%s\"} %.6g\n", a[i].name,
                                  json_number_value(rate));
        }
        family(b, "tollgate_exit_rate_cuts_total", "counter",
               "exit.adaptive: times the provider's pushback cut the start rate, by account.");
        for (unsigned i = 0; i < n; i++)
                if (a[i].fig)
                        mb_printf(b, "tollgate_exit_rate_cuts_total{account=\"%s\"} %llu\n",
                                  a[i].name, (unsigned long long)fig_u64(a[i].fig, "rate_cuts"));
        static const struct {
                const char *name, *key, *help;
                const double *bounds;
                unsigned n;
        } hist[] = {
            {"tollgate_call_latency_seconds", "latency_s",
             "Time from handing a call to the transport to its outcome.", exit_latency_bounds_s,
             EXIT_LATENCY_BUCKETS},
            {"tollgate_slot_lateness_seconds", "lateness_s",
             "How late a start came after its slot, once work was waiting.", exit_lateness_bounds_s,
             EXIT_LATENESS_BUCKETS},
            {"tollgate_operation_attempts", "attempts",
             "POSTs an operation had made when the exit closed it.", exit_attempts_bounds,
             EXIT_ATTEMPTS_BUCKETS},
        };
        for (size_t k = 0; k < sizeof(hist) / sizeof(hist[0]); k++) {
                bool any = false;
                for (unsigned i = 0; i < n; i++) {
                        json_t *h = json_object_get(a[i].fig, hist[k].key);
                        if (!has_buckets(h, hist[k].n))
                                continue;
                        if (!any)
                                family(b, hist[k].name, "histogram", hist[k].help);
                        any = true;
                        snprintf(labels, sizeof(labels), "account=\"%s\"", a[i].name);
                        histogram_series(b, hist[k].name, labels, h, hist[k].bounds, hist[k].n);
                }
        }
        /* by the call's kind, and the waits by reason: keys of one object */
        static const struct {
                const char *name, *key, *label, *help;
                const double *bounds;
                unsigned n;
        } hist_by[] = {
            {"tollgate_call_latency_by_kind_seconds", "latency_by_kind", "kind",
             "Time from handing a call to the transport to its outcome, by the call's kind "
             "(first, retry, query, manual).",
             exit_latency_bounds_s, EXIT_LATENCY_BUCKETS},
            {"tollgate_retry_wait_seconds", "waits_s", "reason",
             "Waits between an operation's calls, by reason: backoff before a re-send, the "
             "interval before a reconciliation query, a provider-wide hold of every start.",
             exit_wait_bounds_s, EXIT_WAIT_BUCKETS},
        };
        for (size_t k = 0; k < sizeof(hist_by) / sizeof(hist_by[0]); k++) {
                bool any = false;
                for (unsigned i = 0; i < n; i++) {
                        json_t *obj = json_object_get(a[i].fig, hist_by[k].key), *h;
                        const char *key;
                        json_object_foreach(obj, key, h)
                        {
                                if (!has_buckets(h, hist_by[k].n))
                                        continue;
                                if (!any)
                                        family(b, hist_by[k].name, "histogram", hist_by[k].help);
                                any = true;
                                snprintf(labels, sizeof(labels), "account=\"%s\",%s=\"%s\"",
                                         a[i].name, hist_by[k].label, key);
                                histogram_series(b, hist_by[k].name, labels, h, hist_by[k].bounds,
                                                 hist_by[k].n);
                        }
                }
        }
}

/* [notify] (daemon/notify.h), when notify.url is set: this process's
 * deliveries (a process whose dispatcher does not own share 0 delivers
 * nothing), and the age of the oldest event not delivered yet, from the
 * store (the same in every process). */
static void notify_lines(struct api *api, struct mbuf *b)
{
        struct notify_figures f;
        struct store_event ev;
        unsigned n = 0;

        if (!api->cfg.notify_url[0] && api->cfg.notify_allow_count == 0)
                return;
        notify_figures(&f);
        family(b, "tollgate_notify_delivered_total", "counter",
               "Events this process delivered to notify.url (answered 2xx).");
        mb_printf(b, "tollgate_notify_delivered_total %llu\n", (unsigned long long)f.delivered);
        family(b, "tollgate_notify_failed_total", "counter",
               "Deliveries this process made that failed (each retry counts).");
        mb_printf(b, "tollgate_notify_failed_total %llu\n", (unsigned long long)f.failed);
        family(b, "tollgate_notify_parked_total", "counter",
               "Events this process parked past notify.give_up_s.");
        mb_printf(b, "tollgate_notify_parked_total %llu\n", (unsigned long long)f.parked);
        family(b, "tollgate_notify_in_flight", "gauge", "Deliveries open now.");
        mb_printf(b, "tollgate_notify_in_flight %u\n", f.open);
        if (store_events_list(api->store, 0, STORE_EVENTS_UNDELIVERED, 1, &ev, &n) == 0) {
                family(b, "tollgate_notify_oldest_undelivered_age_seconds", "gauge",
                       "Age of the oldest event not delivered yet (due or parked); 0: none.");
                mb_printf(b, "tollgate_notify_oldest_undelivered_age_seconds %.3f\n",
                          n && api_wall_now() > ev.at ? (double)(api_wall_now() - ev.at) / 1000.0
                                                      : 0.0);
        }
}

int api_get_metrics(struct api *api, const struct http_request *req, struct http_response *res,
                    const char *rid)
{
        struct snapshot s;
        struct account_snap *acct;
        unsigned nacct = 0;
        struct mbuf b = {0};
        int r;

        (void)req;
        /* one per account of the config (heap: a config may have many) */
        acct = calloc(api->cfg.account_count, sizeof(*acct));
        if (!acct)
                return TG_ENOMEM;
        r = snapshot_read(api, &s);
        if (r == 0) {
                r = accounts_read(api, s.now, acct, &nacct);
                if (r < 0)
                        free(s.sample);
        }
        if (r < 0) {
                free(acct);
                return r == TG_ENOMEM ? r : api_reply_store_error(res, rid, r);
        }
        b.cap = 16 * 1024;
        b.max = METRICS_MAX + (size_t)api->cfg.account_count * METRICS_PER_ACCOUNT;
        b.p = malloc(b.cap);
        if (!b.p) {
                free(s.sample);
                accounts_free(acct, nacct);
                free(acct);
                return TG_ENOMEM;
        }
        b.p[0] = '\0';

        family(&b, "tollgate_operations", "gauge", "Operations now in each state (the backlog).");
        for (int i = 0; i < OP_STATE_COUNT; i++)
                mb_printf(&b, "tollgate_operations{state=\"%s\"} %llu\n",
                          op_state_name((enum op_state)i), (unsigned long long)s.st.by_state[i]);
        family(&b, "tollgate_oldest_open_age_seconds", "gauge",
               "Age of the oldest operation without a final answer, manual included.");
        mb_printf(&b, "tollgate_oldest_open_age_seconds %.3f\n",
                  s.oldest_open_s < 0 ? 0.0 : s.oldest_open_s);
        if (!isnan(s.oldest_pending_s)) {
                family(&b, "tollgate_oldest_pending_age_seconds", "gauge",
                       "Age of the oldest operation the exit still works on (not manual).");
                mb_printf(&b, "tollgate_oldest_pending_age_seconds %.3f\n",
                          s.oldest_pending_s < 0 ? 0.0 : s.oldest_pending_s);
        }
        notify_lines(api, &b);
        family(&b, "tollgate_calls_total", "counter",
               "Calls the exit recorded (all time, pruned ones included).");
        mb_printf(&b, "tollgate_calls_total %llu\n", (unsigned long long)s.st.calls_total);
        family(&b, "tollgate_operations_pruned_total", "counter",
               "Final operations deleted by retention (all time).");
        mb_printf(&b, "tollgate_operations_pruned_total %llu\n",
                  (unsigned long long)s.st.pruned_operations);
        family(&b, "tollgate_calls_pruned_total", "counter",
               "Calls deleted with their operations by retention (all time).");
        mb_printf(&b, "tollgate_calls_pruned_total %llu\n", (unsigned long long)s.st.pruned_calls);
        build_and_limits(&b, api);
        api_counters(&b, api);
        family(&b, "tollgate_owner_epoch", "gauge",
               "The store's newest owner epoch (one counter for every account).");
        mb_printf(&b, "tollgate_owner_epoch %lld\n", (long long)s.st.epoch);
        family(&b, "tollgate_role", "gauge",
               "This process's dispatcher role: owner, standby or none (API only).");
        mb_printf(&b, "tollgate_role{role=\"%s\"} 1\n", role_name(api));
        exit_lines(&b, &s, acct, nacct);
        free(s.sample);
        accounts_free(acct, nacct);
        free(acct);
        if (b.failed) {
                free(b.p);
                return TG_ENOMEM;
        }
        return http_response_take(res, 200, PROM_TYPE, b.p, b.len);
}

/* ---- /v1/stats ---------------------------------------------------------------------- */

struct series {
        json_t *points;
};

static int add_point(const struct exit_sample *s, void *userdata)
{
        struct series *se = userdata;
        json_t *p =
            json_pack("{s:I, s:i, s:i, s:i, s:i, s:o, s:b}", "at", (json_int_t)s->at, "starts",
                      (int)s->starts, "call_ends", (int)s->call_ends, "op_closes",
                      (int)s->op_closes, "in_flight", (int)s->in_flight, "oldest_age_s",
                      s->oldest_open_accepted_at == TG_WALL_NEVER
                          ? json_real(0.0)
                          : json_real((double)(s->at - s->oldest_open_accepted_at) / 1000.0),
                      "held", s->held);
        if (!p || json_array_append_new(se->points, p) < 0)
                return TG_ENOMEM;
        return 0;
}

static int stats_of_account(struct api *api, int64_t minutes, const char *account,
                            struct http_response *res, const char *rid);

int api_get_stats(struct api *api, const struct http_request *req, struct http_response *res,
                  const char *rid)
{
        char account[TG_ACCOUNT_NAME_MAX + 1], back[TG_ACCOUNT_NAME_MAX + 1];
        int64_t minutes = 0;
        int r;

        if (api_int_arg(req, "minutes", api->cfg.stats_series_minutes, 1, 60, &minutes) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "minutes",
                                      "must be an integer in [1, 60]");
        /* the account's exit (?account=; default: the config's first) */
        r = api_account_arg(api, req, res, rid, account);
        if (r != 0)
                return r < 0 ? r : 0;
        if (!account[0])
                snprintf(account, sizeof(account), "%s", api->cfg.accounts[0].name);
        snprintf(back, sizeof(back), "%s", store_account(api->store));
        r = store_use_account(api->store, account);
        if (r == 0)
                r = stats_of_account(api, minutes, account, res, rid);
        (void)store_use_account(api->store, back);
        return r;
}

/* GET /v1/stats for the account the store handle serves now. */
static int stats_of_account(struct api *api, int64_t minutes, const char *account,
                            struct http_response *res, const char *rid)
{
        struct snapshot s;
        struct series se = {0};
        struct api_admission_cache adm;
        struct admission_decision d;
        uint64_t provider_pending = 0;
        json_t *backlog, *root, *fig;
        int r;

        memset(&s, 0, sizeof(s));
        backlog = NULL;
        r = snapshot_read(api, &s);
        if (r < 0) {
                if (r == TG_ENOMEM)
                        return r;
                return api_reply_store_error(res, rid, r);
        }
        r = api_admission_figures(api, account, s.now, &adm);
        if (r == 0) /* counted now: the admission figures may be a second old */
                r = store_provider_pending(api->store, account, &provider_pending);
        if (r < 0)
                goto fail;
        se.points = json_array();
        backlog = json_object();
        if (!se.points || !backlog) {
                r = TG_ENOMEM;
                goto fail;
        }
        /* One point a second for the account: the shares' samples summed. */
        r = exit_stats_read_seconds(api->store, s.now - minutes * 60 * 1000,
                                    (unsigned)minutes * 60 + 10, add_point, &se);
        if (r < 0)
                goto fail;
        for (int i = 0; i < OP_STATE_COUNT; i++)
                json_object_set_new(backlog, op_state_name((enum op_state)i),
                                    json_integer((json_int_t)s.st.by_state[i]));
        if (admission_decide(&api->cfg.admission, &adm.fig, &d) < 0)
                memset(&d, 0, sizeof(d));
        fig = owner_figures(s.sample, s.fresh);
        root = json_pack(
            "{s:s, s:I, s:o, s:I, s:f, s:o, s:I, s:I, s:s, "
            "s:{s:b, s:b, s:o, s:o}, "
            "s:{s:b, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:b}, "
            "s:{s:I, s:i, s:o}}",
            "account", account, "now", (json_int_t)s.now, "backlog", backlog, "in_flight",
            (json_int_t)(s.fresh ? s.sample->in_flight : s.st.by_state[OP_IN_FLIGHT]),
            "oldest_open_age_s", s.oldest_open_s < 0 ? 0.0 : s.oldest_open_s,
            "oldest_pending_age_s",
            isnan(s.oldest_pending_s) ? json_null()
                                      : json_real(s.oldest_pending_s < 0 ? 0 : s.oldest_pending_s),
            "calls_total", (json_int_t)s.st.calls_total, "owner_epoch", (json_int_t)s.st.epoch,
            "role", role_name(api), "exit", "owner_alive", s.fresh, "held",
            s.fresh && s.sample->held, "figures", fig ? fig : json_null(), "sample_at",
            s.sample->at ? json_integer(s.sample->at) : json_null(), "admission", "enabled",
            api->cfg.admission.enabled, "max_wait_s",
            (json_int_t)(api->cfg.admission.max_wait_ms / 1000), "max_backlog",
            (json_int_t)api->cfg.admission.max_backlog, "window_s",
            (json_int_t)(api->cfg.admission.window_ms / 1000), "backlog",
            (json_int_t)adm.fig.backlog, "calls_per_close", d.calls_per_close, "starts_per_second",
            d.rate, "hold_remaining_s", (double)adm.fig.hold_remaining_ms / 1000.0,
            "projected_wait_s", (double)d.projected_ms / 1000.0, "would_admit",
            d.admit || !api->cfg.admission.enabled, "series", "minutes", (json_int_t)minutes,
            "step_s", 1, "points", se.points);
        free(s.sample);
        /* of the backlog, the refunds the provider reports pending (not
         * weighed by admission) */
        if (root)
                json_object_set_new(root, "provider_pending",
                                    json_integer((json_int_t)provider_pending));
        return api_reply_json(res, 200, root);
fail:
        json_decref(se.points);
        json_decref(backlog);
        free(s.sample);
        if (r == TG_ENOMEM)
                return r;
        return api_reply_store_error(res, rid, r);
}
