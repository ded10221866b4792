/*
 * service — tollgate run as a service, around the API and the dispatcher:
 *
 *   - signals: SIGTERM and SIGINT set the stop flag (the dispatcher drains
 *     and the process exits 0); SIGHUP reloads the config. They are taken by
 *     one thread of this module (sigtimedwait), never by a handler, so a
 *     reload runs as ordinary code;
 *   - the service manager (systemd Type=notify, through libsystemd's
 *     sd_notify): READY=1 once the store is open, migrated and the API
 *     listens; STOPPING=1 when a stop begins; WATCHDOG=1 while WatchdogSec is
 *     set — from the dispatcher's loop while it owns its share (a stalled
 *     loop stops the pings and systemd restarts it), from this module's
 *     thread while there is no loop to prove alive (standby, starting, API
 *     only). Without NOTIFY_SOCKET every notification is a no-op;
 *   - a reload (SIGHUP): the file is read again and checked whole; a bad file
 *     changes nothing (an error line says why). Of a good file, the keys that
 *     can change live change — log.level, api.token_file (its tokens),
 *     api.metrics_need_token, provider.webhook_secret_file, [admission],
 *     stats.series_minutes, [retention] — and every other changed key is
 *     refused with an error line naming it: its running value stays;
 *   - readiness for GET /readyz: the owner of its share with a loop that
 *     ran in the last 3 s, or a standby; not while starting, stalled, lost
 *     or stopping;
 *   - retention: from the dispatcher's housekeeping (share 0 only), one
 *     prune batch at a time (store_prune), again the next second while there
 *     is more, else once a minute.
 *
 * Thread use: service_start() from the main thread before any other thread
 * exists (it blocks the signals every later thread inherits);
 * service_housekeeping() from the dispatcher's store thread (one thread,
 * always the same: daemon/dispatcher.h); the readiness
 * callback from the API's thread; everything else from the main thread.
 */
#ifndef TG_SERVICE_H
#define TG_SERVICE_H

#include <signal.h>
#include <stdbool.h>

#include "core/tg_time.h"
#include "daemon/config.h"

struct api;
struct notifier;
struct store;
struct service;

struct service_options {
        const char *command;            /* "serve", "dispatch", "api": for logs */
        const char *config_path;        /* read again on SIGHUP */
        const struct tg_config *config; /* running; copied */
        volatile sig_atomic_t *stop;    /* set on SIGTERM/SIGINT */
        /* the dispatcher's standby flag; NULL: this process has no dispatcher */
        const volatile sig_atomic_t *standby;
};

/* Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (and so in every
 * thread it starts later) and starts the thread that takes them. 0 or a
 * TG_E* code. */
int service_start(const struct service_options *options, struct service **ret_service);

/* The API whose readiness, reloads and counters this service drives (may be
 * NULL: dispatch alone; set NULL again before the API is stopped). */
void service_set_api(struct service *svc, struct api *api);

/* READY=1 (and a STATUS line) to the service manager. */
void service_ready(struct service *svc);

/* Waits until a stop is asked for (api alone: nothing else runs on the
 * main thread). */
void service_wait_stop(struct service *svc);

/* The dispatcher's credentials hook (dispatcher_options.credentials_due):
 * true once after each applied reload (SIGHUP). */
bool service_credentials_due(void *ctx);

/* The dispatcher's housekeeping hook (dispatcher_options.housekeeping). */
void service_housekeeping(void *ctx, struct store *store, unsigned share, tg_wall_ms wall,
                          bool lost);

/* What SIGHUP does; callable directly. 0 applied (perhaps with refused
 * keys), or the load's code (nothing changed). */
int service_reload(struct service *svc);

/* The notifier whose lease service_housekeeping() renews while this
 * process owns share 0 (NULL: none; the caller stops it after the loop). */
void service_set_notifier(struct service *svc, struct notifier *n);

/* STOPPING=1 (once), stops the signal thread, frees. Accepts NULL. */
void service_stop(struct service *svc);

#endif
