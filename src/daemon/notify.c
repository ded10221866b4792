/*
 * notify — the notifier's thread (see notify.h): one loop that, while its
 * lease is fresh, reads the oldest due events, starts deliveries within its
 * own in-flight cap and rate, waits for their ends on its own HTTP client,
 * and writes each end back to the store.
 *
 * Order per operation: an event is started only when no earlier event of
 * its operation is still due (one being delivered, or waiting for its next
 * try, is still due), so one operation's events reach the receiver one at a
 * time, in id order. A parked event no longer holds the later ones back.
 *
 * Where an event goes: the refund's own notify_url when it named one (checked
 * against `[notify] allow` at intake, and copied into the event), else its
 * account's notify.url (an [account.NAME] section's, or the top level's);
 * each signed with the secrets of the same settings. An event with nowhere
 * to go stays due, untouched, as without [notify]. With no notify.url
 * (only refunds' own URLs), the scan reads only the events that name one.
 *
 * Durability order: mark delivered only after the 2xx (at least once).
 */
#include "daemon/notify.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backoff.h"
#include "core/rng.h"
#include "core/tg_error.h"
#include "daemon/log.h"
#include "net/notify_http.h"
#include "platform/clock.h"
#include "platform/event_sig.h"
#include "platform/secmem.h"
#include "store/store.h"

#define SCAN_MAX      256                  /* due events read per scan */
#define SCAN_EVERY_NS (100 * TG_NS_PER_MS) /* a scan at least this often while leased */
#define FIGURES_NS    TG_NS_PER_S          /* the oldest undelivered, read this often */
#define IDLE_WAIT_MS  100                  /* poll wait with nothing open */
#define BODY_MAX      2048

struct open_delivery {
        bool used;
        struct store_event ev;
};

/* The process's figures (/metrics): one notifier at most runs in a process,
 * and the API reads them without holding the notifier. */
static _Atomic uint64_t fig_delivered, fig_failed, fig_parked;
static atomic_uint fig_open;

struct notifier {
        const struct tg_config *cfg;
        pthread_t thread;
        bool started;
        atomic_bool quit;
        _Atomic tg_mono_ns lease; /* 0: never */
        atomic_uint open;
        /* the thread's own */
        struct store *store;
        struct notify_http *http;
        struct tg_rng rng;
        struct backoff_config backoff;
        struct open_delivery *opens;
        struct store_event *scan;
        tg_mono_ns next_start, next_scan;
        unsigned scan_turn; /* the account a scan starts with */
};

json_t *notify_event_json(const struct store_event *ev)
{
        char status_url[32 + TG_OP_ID_MAX];

        snprintf(status_url, sizeof(status_url), "/v1/refunds/%s", ev->operation_id);
        return json_pack(
            "{s:I, s:s, s:I, s:s, s:s, s:s, s:o, s:o, s:I, s:s, s:s}", "id", (json_int_t)ev->id,
            "type", NOTIFY_EVENT_TYPE, "at", (json_int_t)ev->at, "operation_id", ev->operation_id,
            "state", op_state_name(ev->state), "previous_state", op_state_name(ev->from_state),
            "reason",
            ev->state == OP_MANUAL ? json_string(manual_reason_name(ev->reason)) : json_null(),
            "refund_id", ev->refund_id[0] ? json_string(ev->refund_id) : json_null(), "amount",
            (json_int_t)ev->amount, "currency", ev->currency, "status_url", status_url);
}

json_t *notify_event_json_delivery(const struct store_event *ev)
{
        json_t *o = notify_event_json(ev);

        if (!o)
                return NULL;
        json_object_set_new(o, "delivery", json_string(store_delivery_name(ev->delivery)));
        json_object_set_new(o, "attempts", json_integer(ev->attempts));
        json_object_set_new(o, "last_error",
                            ev->last_error[0] ? json_string(ev->last_error) : json_null());
        json_object_set_new(o, "delivered_at",
                            ev->delivered_at ? json_integer(ev->delivered_at) : json_null());
        json_object_set_new(o, "next_at",
                            ev->delivery == STORE_DELIVERY_DUE ? json_integer(ev->next_at)
                                                               : json_null());
        return o;
}

static struct open_delivery *open_find(struct notifier *n, int64_t id)
{
        for (unsigned i = 0; i < n->cfg->notify_max_in_flight; i++)
                if (n->opens[i].used && n->opens[i].ev.id == id)
                        return &n->opens[i];
        return NULL;
}

/* Where ev goes and what signs it: its refund's own URL or its account's
 * notify.url, signed with the account's secrets; "" for an event of an
 * account this config does not serve (another process's to deliver). */
static const char *target_of(const struct notifier *n, const struct store_event *ev,
                             const char *ret_secrets[EVENT_SIG_SECRETS], unsigned *ret_count)
{
        const struct tg_account *a = config_account_find(n->cfg, ev->account);
        unsigned count;

        *ret_count = 0;
        if (!a)
                return "";
        /* its own values, or the top level's (the implicit default) */
        const struct tg_account_settings *s = a->settings;
        count = s ? s->notify_secret_count : n->cfg->notify_secret_count;
        if (count > EVENT_SIG_SECRETS)
                count = EVENT_SIG_SECRETS;
        for (unsigned i = 0; i < count; i++)
                ret_secrets[i] = s ? s->notify_secrets[i] : n->cfg->notify_secrets[i];
        *ret_count = count;
        if (ev->notify_url[0])
                return ev->notify_url;
        return s ? s->notify_url : n->cfg->notify_url;
}

/* Signs and starts one delivery. */
static int start_one(struct notifier *n, const struct store_event *ev, tg_wall_ms wall)
{
        const char *secrets[EVENT_SIG_SECRETS];
        unsigned secret_count = 0;
        const char *url = target_of(n, ev, secrets, &secret_count);
        char sig[EVENT_SIG_MAX], sig_line[EVENT_SIG_MAX + 32], id_line[64];
        const char *headers[4];
        struct open_delivery *slot = NULL;
        json_t *o = notify_event_json(ev);
        char *body = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        int r = body ? 0 : TG_ENOMEM;

        json_decref(o);
        for (unsigned i = 0; i < n->cfg->notify_max_in_flight && !slot; i++)
                if (!n->opens[i].used)
                        slot = &n->opens[i];
        if (r == 0 && !slot)
                r = TG_EFULL;
        if (r == 0 && (!url[0] || secret_count == 0))
                r = TG_ECONFIG;
        if (r == 0)
                r = event_sig_make(secrets, secret_count, wall / 1000, body, strlen(body), sig,
                                   sizeof(sig));
        if (r == 0) {
                snprintf(sig_line, sizeof(sig_line), "%s: %s", EVENT_SIG_HEADER, sig);
                snprintf(id_line, sizeof(id_line), "Tollgate-Event-Id: %" PRId64, ev->id);
                headers[0] = "Content-Type: application/json";
                headers[1] = sig_line;
                headers[2] = id_line;
                headers[3] = NULL;
                r = notify_http_start(n->http, url, body, headers, (long)n->cfg->notify_timeout_ms,
                                      ev->id);
        }
        free(body);
        if (r == 0) {
                slot->used = true;
                slot->ev = *ev;
                atomic_fetch_add(&n->open, 1);
                atomic_fetch_add(&fig_open, 1);
        }
        return r;
}

/* The oldest due events of one account; each one whose operation has no
 * earlier due event and whose time has come starts, within the cap and the
 * rate. An account without a notify.url has only its refunds' own URLs to
 * deliver to: the others stay due, as without [notify]. */
static void scan_account(struct notifier *n, const struct tg_account *a, tg_mono_ns now,
                         tg_wall_ms wall)
{
        unsigned got = 0, cap = n->cfg->notify_max_in_flight;
        int64_t interval = (int64_t)(1e9 / n->cfg->notify_per_second);
        /* its own values, or the top level's (the implicit default) */
        const char *url = a->settings ? a->settings->notify_url : n->cfg->notify_url;
        int r;

        if (!url[0] && n->cfg->notify_allow_count == 0)
                return;
        r = store_events_due(n->store, a->name, !url[0], SCAN_MAX, n->scan, &got);
        if (r < 0) {
                log_emit(LOG_WARN, "notify_store_failed",
                         json_pack("{s:s}", "error", tg_strerror(r)));
                return;
        }
        for (unsigned i = 0; i < got && atomic_load(&n->open) < cap; i++) {
                const struct store_event *ev = &n->scan[i];
                bool earlier = false;

                for (unsigned k = 0; k < i && !earlier; k++)
                        earlier = n->scan[k].op_id == ev->op_id;
                if (earlier || open_find(n, ev->id) || ev->next_at > wall)
                        continue;
                if (now < n->next_start)
                        break; /* the rate: the next scan starts it */
                r = start_one(n, ev, wall);
                if (r < 0) {
                        log_emit(LOG_WARN, "notify_start_failed",
                                 json_pack("{s:I, s:s}", "event_id", (json_int_t)ev->id, "error",
                                           tg_strerror(r)));
                        break;
                }
                n->next_start = (n->next_start > now ? n->next_start : now) + interval;
        }
}

/* Every account this config serves, in turn from a different one each scan
 * so that a busy first account does not take the whole cap every time. */
static void scan_and_start(struct notifier *n, tg_mono_ns now, tg_wall_ms wall)
{
        unsigned count = n->cfg->account_count;

        for (unsigned k = 0; k < count && atomic_load(&n->open) < n->cfg->notify_max_in_flight; k++)
                scan_account(n, &n->cfg->accounts[(n->scan_turn + k) % count], now, wall);
        n->scan_turn = count ? (n->scan_turn + 1) % count : 0;
}

/* One delivery ended: delivered, or its next try (or parked). */
static void settle_one(struct notifier *n, int64_t id, long status, const char *err,
                       tg_wall_ms wall)
{
        struct open_delivery *slot = open_find(n, id);
        struct store_event ev;
        int64_t wait = 0;
        int r;

        if (!slot)
                return;
        ev = slot->ev;
        slot->used = false;
        atomic_fetch_sub(&n->open, 1);
        atomic_fetch_sub(&fig_open, 1);
        ev.attempts++;
        if (status >= 200 && status < 300) {
                ev.delivery = STORE_DELIVERY_DELIVERED;
                ev.delivered_at = wall;
                ev.last_error[0] = '\0';
                atomic_fetch_add(&fig_delivered, 1);
        } else {
                if (status > 0)
                        snprintf(ev.last_error, sizeof(ev.last_error), "HTTP %ld", status);
                else
                        snprintf(ev.last_error, sizeof(ev.last_error), "no answer: %.200s", err);
                atomic_fetch_add(&fig_failed, 1);
                /* the budget runs from the event's own time */
                r = backoff_draw(&n->backoff, ev.attempts, 0, -1, wall - ev.at, &n->rng, &wait);
                if (r == TG_ERANGE) {
                        ev.delivery = STORE_DELIVERY_PARKED;
                        atomic_fetch_add(&fig_parked, 1);
                        log_emit(LOG_ERROR, "event_parked",
                                 json_pack("{s:I, s:s, s:i, s:s}", "event_id", (json_int_t)ev.id,
                                           "operation_id", ev.operation_id, "attempts",
                                           (int)ev.attempts, "error", ev.last_error));
                } else {
                        ev.next_at = wall + (r == 0 ? wait : n->backoff.cap_ms);
                        log_emit(LOG_WARN, "event_delivery_failed",
                                 json_pack("{s:I, s:i, s:s, s:I}", "event_id", (json_int_t)ev.id,
                                           "attempts", (int)ev.attempts, "error", ev.last_error,
                                           "retry_in_ms", (json_int_t)(ev.next_at - wall)));
                }
        }
        r = store_event_delivery_put(n->store, &ev);
        if (r < 0) /* it stays due as it was: delivered again (at least once) */
                log_emit(LOG_WARN, "notify_store_failed",
                         json_pack("{s:I, s:s}", "event_id", (json_int_t)ev.id, "error",
                                   tg_strerror(r)));
}

static void *run(void *arg)
{
        struct notifier *n = arg;

        while (!atomic_load(&n->quit)) {
                tg_mono_ns now = clock_mono_now(), lease = atomic_load(&n->lease);
                tg_wall_ms wall = clock_wall_now();
                bool leased = lease != 0 && now - lease < NOTIFY_LEASE_NS;
                int64_t id;
                long status;
                char err[128];

                if (leased && now >= n->next_scan &&
                    atomic_load(&n->open) < n->cfg->notify_max_in_flight) {
                        scan_and_start(n, now, wall);
                        n->next_scan = now + SCAN_EVERY_NS;
                }
                /* no transaction is open while this waits */
                if (notify_http_poll(n->http, IDLE_WAIT_MS) < 0)
                        clock_sleep_ns(IDLE_WAIT_MS * TG_NS_PER_MS);
                while (notify_http_next_done(n->http, &id, &status, err, sizeof(err)) == 0) {
                        settle_one(n, id, status, err, clock_wall_now());
                        n->next_scan = 0; /* the operation's next event may go now */
                }
        }
        return NULL;
}

static void notifier_free(struct notifier *n)
{
        notify_http_free(n->http);
        store_close(n->store);
        free(n->opens);
        free(n->scan);
        free(n);
}

int notifier_start(const struct tg_config *cfg, struct notifier **ret_notifier)
{
        struct notifier *n;
        int r;

        if (!cfg || !ret_notifier)
                return TG_EINVAL;
        *ret_notifier = NULL;
        bool any_url = cfg->notify_url[0] != '\0';
        for (unsigned i = 0; i < cfg->account_count; i++)
                any_url = any_url ||
                          (cfg->accounts[i].settings && cfg->accounts[i].settings->notify_url[0]);
        if (!any_url && cfg->notify_allow_count == 0)
                return 0; /* nothing to deliver: events stay due, the feed serves them */
        if (cfg->notify_max_in_flight == 0 || cfg->notify_per_second <= 0)
                return TG_ECONFIG;
        n = calloc(1, sizeof(*n));
        if (!n)
                return TG_ENOMEM;
        n->cfg = cfg;
        n->opens = calloc(cfg->notify_max_in_flight, sizeof(*n->opens));
        n->scan = calloc(SCAN_MAX, sizeof(*n->scan));
        if (!n->opens || !n->scan) {
                notifier_free(n);
                return TG_ENOMEM;
        }
        backoff_config_default(&n->backoff);
        n->backoff.base_ms = cfg->notify_backoff_base_ms;
        n->backoff.cap_ms = cfg->notify_backoff_cap_ms;
        n->backoff.min_ms = 0;
        n->backoff.factor = 2;
        n->backoff.give_up_ms = cfg->notify_give_up_ms;
        n->backoff.jitter = BACKOFF_JITTER_FULL;
        tg_rng_seed(&n->rng, (uint64_t)clock_wall_ns() ^ ((uint64_t)getpid() << 32));
        r = store_open(cfg->store_url, &n->store);
        if (r == 0)
                r = notify_http_new(cfg->notify_max_in_flight, &n->http);
        if (r == 0)
                r = pthread_create(&n->thread, NULL, run, n) == 0 ? 0 : TG_ENOMEM;
        if (r < 0) {
                notifier_free(n);
                return r;
        }
        n->started = true;
        *ret_notifier = n;
        return 0;
}

void notifier_lease(struct notifier *n, tg_mono_ns now)
{
        if (n)
                atomic_store(&n->lease, now);
}

void notifier_stop(struct notifier *n)
{
        if (!n)
                return;
        atomic_store(&n->quit, true);
        if (n->started)
                pthread_join(n->thread, NULL);
        notifier_free(n);
}

void notify_figures(struct notify_figures *ret_figures)
{
        struct notify_figures f = {
            .delivered = atomic_load(&fig_delivered),
            .failed = atomic_load(&fig_failed),
            .parked = atomic_load(&fig_parked),
            .open = atomic_load(&fig_open),
        };

        *ret_figures = f;
}
