/*
 * service — signals, sd_notify, reloads, readiness and retention for the
 * daemon. See service.h.
 */
#include "daemon/service.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef TG_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "core/tg_error.h"
#include "daemon/account_ctl.h"
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "daemon/settlement.h"
#include "platform/clock.h"
#include "platform/secmem.h"
#include "store/store.h"

#define TICK_FRESH_NS   (3000 * TG_NS_PER_MS)       /* the loop is alive */
#define PRUNE_IDLE_NS   (60 * 1000 * TG_NS_PER_MS)  /* nothing to prune: look again */
#define CURSOR_RESET_NS (24LL * 3600 * TG_NS_PER_S) /* revisit rows passed over */
#define WAKE_SIGNAL     SIGUSR2                     /* service_stop() wakes the thread */

/* The keys a reload changes live; every other changed key is refused. */
static const char *const live_keys[] = {
    "log.level",
    "api.token_file",
    "api.credentials_file",
    "api.metrics_need_token",
    "provider.webhook_secret_file",
    "admission.enabled",
    "admission.max_wait_s",
    "admission.max_backlog",
    "admission.window_s",
    "stats.series_minutes",
    "retention.keep_days",
    "retention.prune_batch",
    "manual.approval_above",
    /* The provider's credential files (provider.auth_secret_file,
     * signing_key_file, client_cert, client_key) are read again on every
     * reload whatever else changed (a key rotated in place); their paths
     * are read once, like the rest of [provider]. */
};

/* One account's settlement directory. */
struct watched_dir {
        char account[TG_ACCOUNT_NAME_MAX + 1];
        char dir[TG_PATH_MAX];
        int64_t every_ms;
        tg_mono_ns next;
};

struct service {
        struct service_options opt;
        struct tg_config *running; /* the values in force (live keys updated) */
        /* each account's exit.starts_per_second and exit.max_in_flight as
         * the file held them at the last reload that took them (at start,
         * the running ones: the ceiling); running->account_count of them */
        struct account_file_values *file_values;
        struct api *api;
        pthread_t thread;
        bool thread_started;
        atomic_bool quit;
        pthread_mutex_t lock; /* stop_cond, reloads */
        pthread_cond_t stop_cond;
        bool stopping_said;
        /* the watchdog, when WatchdogSec is set */
        uint64_t watchdog_usec;
        /* the dispatcher's, written by service_housekeeping() (its store
         * thread, posted by its loop once a second) */
        _Atomic tg_mono_ns last_tick; /* 0: never */
        atomic_bool lost;
        /* the credentials to be read again by the loop (a reload) */
        atomic_bool credentials_due;
        /* retention, read by the loop, written by a reload */
        _Atomic int64_t keep_ms;
        atomic_uint prune_batch;
        /* the events' deliveries of this process, leased while its
         * dispatcher owns share 0 (daemon/notify.h); NULL: none */
        _Atomic(struct notifier *) notifier;
        /* the accounts' watched settlement directories (provider.settlement_dir,
         * read at start) and the thread that looks at them */
        struct watched_dir *watched;
        unsigned watched_count;
        pthread_t watch_thread;
        bool watch_started;
        bool watch_quit;           /* under lock */
        pthread_cond_t watch_cond; /* wakes the watcher to quit */
        /* service_housekeeping()'s own (its thread only) */
        struct store_prune_cursor cursor;
        tg_mono_ns next_prune, cursor_since;
};

static void notify(const char *state)
{
#ifdef TG_HAVE_SYSTEMD
        sd_notify(0, state);
#else
        (void)state;
#endif
}

static void notify_status(const char *fmt, const char *arg)
{
        char line[256];

        snprintf(line, sizeof(line), fmt, arg);
        notify(line);
}

/* ---- readiness --------------------------------------------------------------------- */

static bool ready_check(void *ctx, const char **ret_role, const char **ret_reason)
{
        struct service *svc = ctx;
        tg_mono_ns tick = atomic_load(&svc->last_tick);

        *ret_reason = NULL;
        if (*svc->opt.stop) {
                *ret_role = svc->opt.standby ? "stopping" : "none";
                *ret_reason = "stopping";
                return false;
        }
        if (!svc->opt.standby) {
                *ret_role = "none"; /* an API process: its store is what counts */
                return true;
        }
        if (*svc->opt.standby) {
                *ret_role = "standby";
                return true;
        }
        if (tick == 0) {
                *ret_role = "starting";
                *ret_reason = "not_owner_yet";
                return false;
        }
        *ret_role = "owner";
        if (atomic_load(&svc->lost)) {
                *ret_reason = "exit_lost";
                return false;
        }
        if (clock_mono_now() - tick > TICK_FRESH_NS) {
                *ret_reason = "loop_stalled";
                return false;
        }
        return true;
}

/* ---- the watchdog ------------------------------------------------------------------ */

/* Whether this module's thread pings: while there is no loop to prove
 * alive. Once the loop has run, only the loop pings (a stalled loop stops
 * them), but as a standby again after losing the exit. */
static bool thread_pings(const struct service *svc)
{
        if (!svc->opt.standby)
                return true;
        if (*svc->opt.standby)
                return true;
        return atomic_load(&svc->last_tick) == 0;
}

/* ---- retention, from the loop ------------------------------------------------------ */

static void prune_step(struct service *svc, struct store *store, tg_wall_ms wall, tg_mono_ns now)
{
        int64_t keep = atomic_load(&svc->keep_ms);
        struct store_prune_result res = {0};
        int r;

        if (keep <= 0 || now < svc->next_prune)
                return;
        if (now - svc->cursor_since > CURSOR_RESET_NS) {
                memset(&svc->cursor, 0, sizeof(svc->cursor));
                svc->cursor_since = now;
        }
        /* one batch a turn: the loop waits for it, and the exit's slots do not */
        r = store_prune(store, wall - keep, atomic_load(&svc->prune_batch), 1, &svc->cursor, &res);
        if (res.operations > 0 || res.events > 0)
                log_emit(LOG_INFO, "pruned",
                         json_pack("{s:I, s:I, s:I, s:b}", "operations", (json_int_t)res.operations,
                                   "calls", (json_int_t)res.calls, "events", (json_int_t)res.events,
                                   "more", res.more));
        if (r < 0)
                log_emit(LOG_WARN, "prune_failed", json_pack("{s:s}", "error", tg_strerror(r)));
        svc->next_prune = r == 0 && res.more ? now : now + PRUNE_IDLE_NS;
}

void service_housekeeping(void *ctx, struct store *store, unsigned share, tg_wall_ms wall,
                          bool lost)
{
        struct service *svc = ctx;
        tg_mono_ns now = clock_mono_now();

        if (!svc)
                return;
        if (atomic_load(&svc->last_tick) == 0) {
                char line[64];
                snprintf(line, sizeof(line), "STATUS=owner of share %u of the exit", share);
                notify(line);
        }
        atomic_store(&svc->last_tick, now);
        atomic_store(&svc->lost, lost);
        if (svc->watchdog_usec)
                notify("WATCHDOG=1"); /* the loop is alive: it got here */
        if (share == 0 && !lost) {
                prune_step(svc, store, wall, now);
                notifier_lease(atomic_load(&svc->notifier), now);
        }
}

void service_set_notifier(struct service *svc, struct notifier *n)
{
        if (svc)
                atomic_store(&svc->notifier, n);
}

/* ---- reloads ------------------------------------------------------------------------ */

/* A top-level key in live_keys. */
static bool is_live(const char *section, const char *name)
{
        char key[96];

        /* an account's keys are read once, at start (its rate and cap
         * become run-time controls: reload_controls) */
        if (strncmp(section, "account.", 8) == 0)
                return false;
        snprintf(key, sizeof(key), "%s.%s", section, name);
        for (size_t i = 0; i < sizeof(live_keys) / sizeof(live_keys[0]); i++)
                if (strcmp(live_keys[i], key) == 0)
                        return true;
        return false;
}

struct reload_note {
        json_t *applied, *refused;
};

static const char *why_not_live(const char *section, const char *name)
{
        if (strcmp(section, "account") == 0 || strncmp(section, "account.", 8) == 0)
                return "an account's keys are read once, at start (its exit.starts_per_second "
                       "and exit.max_in_flight excepted: run-time controls)";
        section = config_section_base(section);
        if (strcmp(section, "store") == 0)
                return "the store cannot change under a running process";
        if (strcmp(section, "api") == 0 && strcmp(name, "listen") == 0)
                return "the listening socket cannot move under a running process";
        if (strcmp(section, "exit") == 0)
                return "the exit's shape cannot change while it owns the account (every "
                       "dispatcher of an account must agree: docs/operating.md); a reload "
                       "changes only its starts_per_second and max_in_flight, as run-time "
                       "controls";
        return "this key is read once, at start";
}

/* exit.starts_per_second and exit.max_in_flight: taken by reload_controls() */
static bool is_control(const char *section, const char *name)
{
        return strcmp(config_section_base(section), "exit") == 0 &&
               (strcmp(name, "starts_per_second") == 0 || strcmp(name, "max_in_flight") == 0);
}

static void note_key(void *ctx, const char *section, const char *name)
{
        struct reload_note *n = ctx;
        char key[96];

        if (is_control(section, name))
                return;
        snprintf(key, sizeof(key), "%s.%s", section, name);
        if (is_live(section, name)) {
                json_array_append_new(n->applied, json_string(key));
                return;
        }
        json_array_append_new(n->refused, json_string(key));
        log_emit(LOG_ERROR, "config_reload_refused",
                 json_pack("{s:s, s:s}", "key", key, "message", why_not_live(section, name)));
}

/* The account's file values in config (its view's), into *ret; false when
 * config has no such account. */
static bool file_values_of(const struct tg_config *config, const char *name,
                           struct account_file_values *ret)
{
        struct tg_config *view = malloc(sizeof(*view));
        bool found = view && account_ctl_find(config, name, view);

        if (found)
                *ret = (struct account_file_values){view->exit.starts_per_second,
                                                    view->exit.max_in_flight};
        free(view);
        return found;
}

/* The key a reload names for an account's exit key (as config_diff does). */
static void control_key(const struct tg_config *config, const struct tg_account *a,
                        const char *field, char *key, size_t size)
{
        if (config->account_count == 1 && !a->declared)
                snprintf(key, size, "exit.%s", field);
        else
                snprintf(key, size, "account.%s.exit.%s", a->name, field);
}

/* Each account whose exit.starts_per_second or exit.max_in_flight the file
 * changed: the new values become its run-time controls (account_ctl_reload:
 * lowered under the ceiling the process started with, audited as
 * "sighup"), written through a store connection opened for this reload
 * only; a value that cannot be in force without a restart is refused and
 * named. */
static void reload_controls(struct service *svc, const struct tg_config *next,
                            struct reload_note *n)
{
        const struct tg_config *run = svc->running;
        struct store *store = NULL;
        int opened = 0;

        for (unsigned i = 0; i < run->account_count; i++) {
                const struct tg_account *a = &run->accounts[i];
                struct account_file_values now, *was = &svc->file_values[i];
                const char *field = NULL;
                char key[160], err[400];
                int r;

                if (!file_values_of(next, a->name, &now) ||
                    (now.starts_per_second == was->starts_per_second &&
                     now.max_in_flight == was->max_in_flight))
                        continue;
                if (!store && opened == 0)
                        opened = store_open(run->store_url, &store) == 0 ? 1 : -1;
                r = store ? account_ctl_reload(store, run, a->name, was, &now, clock_wall_now(),
                                               &field, err, sizeof(err))
                          : TG_EIO;
                if (r == 0) {
                        if (now.starts_per_second != was->starts_per_second) {
                                control_key(run, a, "starts_per_second", key, sizeof(key));
                                json_array_append_new(n->applied, json_string(key));
                        }
                        if (now.max_in_flight != was->max_in_flight) {
                                control_key(run, a, "max_in_flight", key, sizeof(key));
                                json_array_append_new(n->applied, json_string(key));
                        }
                        log_emit(LOG_WARN, "account_changed",
                                 json_pack("{s:s, s:s, s:f, s:i}", "account", a->name, "by",
                                           "sighup", "starts_per_second", now.starts_per_second,
                                           "max_in_flight", (int)now.max_in_flight));
                        *was = now;
                        continue;
                }
                if (!field)
                        field = now.starts_per_second != was->starts_per_second
                                    ? "starts_per_second"
                                    : "max_in_flight";
                if (r != TG_EINVAL && r != TG_EAGAIN)
                        snprintf(err, sizeof(err),
                                 "the account's controls could not be written: %s; send "
                                 "SIGHUP again",
                                 tg_strerror(r));
                control_key(run, a, field, key, sizeof(key));
                json_array_append_new(n->refused, json_string(key));
                log_emit(LOG_ERROR, "config_reload_refused",
                         json_pack("{s:s, s:s}", "key", key, "message", err));
        }
        store_close(store);
}

/* The live keys' fields, from next into the running values. */
static void take_live(struct tg_config *run, const struct tg_config *next)
{
        memcpy(run->log_level, next->log_level, sizeof(run->log_level));
        memcpy(run->api_token, next->api_token, sizeof(run->api_token));
        memcpy(run->api_tokens, next->api_tokens, sizeof(run->api_tokens));
        run->api_token_count = next->api_token_count;
        memcpy(run->api_token_file, next->api_token_file, sizeof(run->api_token_file));
        run->api_metrics_need_token = next->api_metrics_need_token;
        memcpy(run->api_credentials_file, next->api_credentials_file,
               sizeof(run->api_credentials_file));
        memcpy(run->api_credentials, next->api_credentials, sizeof(run->api_credentials));
        run->api_credential_count = next->api_credential_count;
        memcpy(run->provider_webhook_secret, next->provider_webhook_secret,
               sizeof(run->provider_webhook_secret));
        memcpy(run->provider_webhook_secret_file, next->provider_webhook_secret_file,
               sizeof(run->provider_webhook_secret_file));
        run->admission = next->admission;
        run->stats_series_minutes = next->stats_series_minutes;
        run->retention_keep_ms = next->retention_keep_ms;
        run->retention_prune_batch = next->retention_prune_batch;
        run->manual_approval_above = next->manual_approval_above;
}

/* One reload function per component, each taking what it can change live
 * from the running values. */
static void reload_components(struct service *svc)
{
        const struct tg_config *run = svc->running;
        enum log_level lvl;

        if (log_level_parse(run->log_level, &lvl) == 0)
                log_set_level(lvl);
        api_reload(svc->api, run);
        atomic_store(&svc->keep_ms, run->retention_keep_ms);
        atomic_store(&svc->prune_batch, run->retention_prune_batch);
        /* the transport is the dispatcher's: its loop reads the files
         * again, between two calls (service_credentials_due) */
        atomic_store(&svc->credentials_due, true);
}

bool service_credentials_due(void *ctx)
{
        struct service *svc = ctx;

        return svc && atomic_exchange(&svc->credentials_due, false);
}

int service_reload(struct service *svc)
{
        struct tg_config *next;
        struct reload_note n;
        bool refused;
        char err[600];
        int r;

        if (!svc)
                return TG_EINVAL;
        next = secmem_alloc(sizeof(*next)); /* it holds the secrets read */
        if (!next)
                return TG_ENOMEM;
        pthread_mutex_lock(&svc->lock);
        notify("RELOADING=1");
        r = config_load(svc->opt.config_path, next, err, sizeof(err));
        if (r == 0)
                config_accounts_serve(next); /* as at start */
        if (r < 0) {
                log_emit(LOG_ERROR, "config_reload_failed",
                         json_pack("{s:s, s:s}", "message", err, "result",
                                   "nothing changed: the running configuration stays"));
                api_count_reload(svc->api, "failed");
                goto out;
        }
        n.applied = json_array();
        n.refused = json_array();
        config_diff(svc->running, next, note_key, &n);
        reload_controls(svc, next, &n);
        take_live(svc->running, next);
        reload_components(svc);
        refused = json_array_size(n.refused) > 0;
        api_count_reload(svc->api, refused ? "refused" : "applied");
        log_emit(refused ? LOG_WARN : LOG_INFO, "config_reloaded",
                 json_pack("{s:o, s:o}", "applied", n.applied, "refused", n.refused));
out:
        notify("READY=1");
        pthread_mutex_unlock(&svc->lock);
        config_release(next);
        explicit_bzero(next, sizeof(*next)); /* it holds secrets */
        secmem_free(next);
        return r;
}

/* ---- signals ----------------------------------------------------------------------- */

static void begin_stop(struct service *svc, int sig)
{
        pthread_mutex_lock(&svc->lock);
        *svc->opt.stop = 1;
        if (!svc->stopping_said) {
                svc->stopping_said = true;
                notify("STOPPING=1");
                log_emit(LOG_INFO, "stopping",
                         json_pack("{s:s}", "signal", sig == SIGINT ? "SIGINT" : "SIGTERM"));
        }
        pthread_cond_broadcast(&svc->stop_cond);
        pthread_mutex_unlock(&svc->lock);
}

static void *signal_thread(void *arg)
{
        struct service *svc = arg;
        sigset_t set;
        /* pings at half the watchdog's interval, and never less than once a
         * second (a reload or a stop is noticed at once anyway) */
        uint64_t step_us = svc->watchdog_usec ? svc->watchdog_usec / 2 : 1000000;

        if (step_us > 1000000)
                step_us = 1000000;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, WAKE_SIGNAL);
        while (!atomic_load(&svc->quit)) {
                struct timespec ts = {.tv_sec = (time_t)(step_us / 1000000),
                                      .tv_nsec = (long)(step_us % 1000000) * 1000};
                int sig = sigtimedwait(&set, NULL, &ts);

                if (sig == SIGTERM || sig == SIGINT)
                        begin_stop(svc, sig);
                else if (sig == SIGHUP)
                        service_reload(svc);
                if (svc->watchdog_usec && thread_pings(svc))
                        notify("WATCHDOG=1");
        }
        return NULL;
}

/* ---- settlement directories ----------------------------------------------------------- */

/* The accounts of config with a provider.settlement_dir, into svc. */
static int watch_collect(struct service *svc, const struct tg_config *config)
{
        struct tg_config *view = malloc(sizeof(*view));

        if (!view)
                return TG_ENOMEM;
        svc->watched =
            calloc(config->account_count ? config->account_count : 1, sizeof(*svc->watched));
        if (!svc->watched) {
                free(view);
                return TG_ENOMEM;
        }
        for (unsigned i = 0; i < config->account_count; i++) {
                struct watched_dir *w = &svc->watched[svc->watched_count];
                if (!account_ctl_find(config, config->accounts[i].name, view) ||
                    !view->provider_settlement_dir[0])
                        continue;
                snprintf(w->account, sizeof(w->account), "%s", config->accounts[i].name);
                snprintf(w->dir, sizeof(w->dir), "%s", view->provider_settlement_dir);
                w->every_ms = view->provider_settlement_scan_ms;
                svc->watched_count++;
        }
        explicit_bzero(view, sizeof(*view));
        free(view);
        return 0;
}

/* One look at every directory that is due; a store connection for the look
 * only (none is held between looks). The next due time, or 0 to quit. */
static tg_mono_ns watch_round(struct service *svc)
{
        struct store *store = NULL;
        tg_mono_ns now = clock_mono_now(), next = 0;

        for (unsigned i = 0; i < svc->watched_count; i++) {
                struct watched_dir *w = &svc->watched[i];
                if (now >= w->next) {
                        int r = store ? 0 : store_open(svc->running->store_url, &store);
                        if (r == 0)
                                r = settlement_scan_dir(store, w->account, w->dir);
                        if (r < 0)
                                log_emit(LOG_WARN, "settlement_dir_failed",
                                         json_pack("{s:s, s:s, s:s}", "account", w->account, "dir",
                                                   w->dir, "error", tg_strerror(r)));
                        w->next = now + w->every_ms * TG_NS_PER_MS;
                }
                if (next == 0 || w->next < next)
                        next = w->next;
        }
        store_close(store);
        return next;
}

static void *watch_thread(void *arg)
{
        struct service *svc = arg;

        pthread_mutex_lock(&svc->lock);
        while (!svc->watch_quit) {
                pthread_mutex_unlock(&svc->lock);
                tg_mono_ns next = watch_round(svc);
                pthread_mutex_lock(&svc->lock);
                if (svc->watch_quit)
                        break;
                /* CLOCK_MONOTONIC waits (the condition's clock, set at init) */
                struct timespec at = {.tv_sec = (time_t)(next / TG_NS_PER_S),
                                      .tv_nsec = (long)(next % TG_NS_PER_S)};
                (void)pthread_cond_timedwait(&svc->watch_cond, &svc->lock, &at);
        }
        pthread_mutex_unlock(&svc->lock);
        return NULL;
}

static int watch_start(struct service *svc)
{
        pthread_condattr_t attr;
        int r;

        r = watch_collect(svc, svc->running);
        if (r < 0 || svc->watched_count == 0)
                return r;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&svc->watch_cond, &attr);
        pthread_condattr_destroy(&attr);
        r = pthread_create(&svc->watch_thread, NULL, watch_thread, svc);
        if (r != 0) {
                pthread_cond_destroy(&svc->watch_cond);
                return -r;
        }
        svc->watch_started = true;
        return 0;
}

static void watch_stop(struct service *svc)
{
        if (svc->watch_started) {
                pthread_mutex_lock(&svc->lock);
                svc->watch_quit = true;
                pthread_cond_broadcast(&svc->watch_cond);
                pthread_mutex_unlock(&svc->lock);
                pthread_join(svc->watch_thread, NULL);
                pthread_cond_destroy(&svc->watch_cond);
                svc->watch_started = false;
        }
        free(svc->watched);
        svc->watched = NULL;
}

int service_start(const struct service_options *o, struct service **ret)
{
        struct service *svc;
        sigset_t set;
        int r;

        if (!o || !o->config || !o->config_path || !o->stop || !ret)
                return TG_EINVAL;
        svc = calloc(1, sizeof(*svc));
        if (!svc)
                return TG_ENOMEM;
        svc->running = malloc(sizeof(*svc->running));
        if (!svc->running) {
                free(svc);
                return TG_ENOMEM;
        }
        svc->opt = *o;
        *svc->running = *o->config;
        svc->file_values = calloc(o->config->account_count ? o->config->account_count : 1,
                                  sizeof(*svc->file_values));
        if (!svc->file_values) {
                free(svc->running);
                free(svc);
                return TG_ENOMEM;
        }
        for (unsigned i = 0; i < o->config->account_count; i++)
                file_values_of(o->config, o->config->accounts[i].name, &svc->file_values[i]);
        pthread_mutex_init(&svc->lock, NULL);
        pthread_cond_init(&svc->stop_cond, NULL);
        atomic_store(&svc->keep_ms, o->config->retention_keep_ms);
        atomic_store(&svc->prune_batch, o->config->retention_prune_batch);
        svc->cursor_since = clock_mono_now();
#ifdef TG_HAVE_SYSTEMD
        {
                uint64_t usec = 0;
                if (sd_watchdog_enabled(0, &usec) > 0)
                        svc->watchdog_usec = usec;
        }
#endif
        /* Every thread started from here on (the API's, libcurl's) inherits
         * the mask: only signal_thread takes these. */
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, WAKE_SIGNAL);
        r = pthread_sigmask(SIG_BLOCK, &set, NULL);
        if (r == 0)
                r = pthread_create(&svc->thread, NULL, signal_thread, svc);
        if (r != 0) {
                service_stop(svc);
                return -r;
        }
        svc->thread_started = true;
        *ret = svc;
        return 0;
}

void service_set_api(struct service *svc, struct api *api)
{
        if (!svc)
                return;
        pthread_mutex_lock(&svc->lock); /* a reload in progress uses it */
        svc->api = api;
        pthread_mutex_unlock(&svc->lock);
        if (api)
                api_set_readiness(api, ready_check, svc);
}

void service_ready(struct service *svc)
{
        int r;

        if (!svc)
                return;
        /* the settlement directories: looked at once the store is open and
         * checked (their own connections, never the process's) */
        r = svc->watch_started ? 0 : watch_start(svc);
        if (r < 0)
                log_emit(LOG_ERROR, "settlement_dir_failed",
                         json_pack("{s:s, s:s}", "error", tg_strerror(r), "message",
                                   "the settlement directories are not looked at"));
        notify_status("READY=1\nSTATUS=%s: the store is open and the API listens (if any)",
                      svc->opt.command);
        log_emit(LOG_INFO, "ready",
                 json_pack("{s:s, s:b}", "command", svc->opt.command, "watchdog",
                           svc->watchdog_usec > 0));
}

void service_wait_stop(struct service *svc)
{
        pthread_mutex_lock(&svc->lock);
        while (!*svc->opt.stop)
                pthread_cond_wait(&svc->stop_cond, &svc->lock);
        pthread_mutex_unlock(&svc->lock);
}

void service_stop(struct service *svc)
{
        if (!svc)
                return;
        pthread_mutex_lock(&svc->lock);
        if (!svc->stopping_said) {
                svc->stopping_said = true;
                notify("STOPPING=1");
        }
        pthread_mutex_unlock(&svc->lock);
        watch_stop(svc);
        if (svc->thread_started) {
                atomic_store(&svc->quit, true);
                pthread_kill(svc->thread, WAKE_SIGNAL);
                pthread_join(svc->thread, NULL);
        }
        pthread_cond_destroy(&svc->stop_cond);
        pthread_mutex_destroy(&svc->lock);
        explicit_bzero(svc->running, sizeof(*svc->running));
        free(svc->running);
        free(svc->file_values);
        free(svc);
}
