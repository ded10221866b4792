/*
 * notify — delivering the events' outbox (store/store_events.h) to the
 * caller's endpoint (`[notify] url`): signed POSTs (platform/event_sig.h),
 * at least once, in order per operation, retried with exponential backoff
 * and full jitter up to `notify.give_up_s`, then parked for an operator.
 *
 * A notifier is a thread of its own with its own store handle and its own
 * HTTP client (net/notify_http.h): its in-flight cap and rate are its own,
 * it never touches the exit's transport, pacer or store handle, and it holds
 * no transaction while a delivery is open (each store call is one short
 * transaction between deliveries). So a slow receiver never delays a
 * provider call.
 *
 * Who delivers: the process whose dispatcher owns share 0 of the exit (the
 * one-owner lock without shares) of its config's first account. Its loop
 * renews the notifier's lease once a second (service_housekeeping); a
 * notifier whose lease is older than NOTIFY_LEASE_NS starts nothing new.
 * Two processes may overlap for the few seconds a takeover lasts: a
 * receiver dedupes on the event id. A notifier delivers the events of the
 * accounts its config serves, each to its refund's own notify_url or its
 * account's notify.url; another account's events are left to the process
 * that serves it.
 *
 * At least once: an event is marked delivered only after a 2xx answer; a
 * crash in between delivers it again.
 */
#ifndef TG_NOTIFY_H
#define TG_NOTIFY_H

#include <jansson.h>
#include <stdint.h>

#include "core/tg_time.h"
#include "daemon/config.h"
#include "store/store_events.h"

#define NOTIFY_LEASE_NS   (3 * TG_NS_PER_S)
#define NOTIFY_EVENT_TYPE "refund.state_changed"

struct notifier;

/* Figures for /metrics: this process's deliveries since it started. */
struct notify_figures {
        uint64_t delivered; /* events acknowledged with a 2xx */
        uint64_t failed;    /* deliveries that failed (each retry counts) */
        uint64_t parked;    /* events parked past their budget */
        unsigned open;      /* deliveries open now */
};

/* Starts the notifier of cfg (which must outlive it) when a notify.url
 * (the top level's or an account's) or a notify.allow prefix is set;
 * *ret_notifier is NULL when none is (nothing to deliver). 0 or a TG_E*
 * code (the store cannot be opened, no thread). */
int notifier_start(const struct tg_config *cfg, struct notifier **ret_notifier);

/* The owner of share 0 says so, at `now` (monotonic). Accepts NULL. */
void notifier_lease(struct notifier *n, tg_mono_ns now);

/* Stops the thread (open deliveries are abandoned: delivered again by the
 * next owner) and frees. Accepts NULL. */
void notifier_stop(struct notifier *n);

/* This process's figures (all zero when it never delivered). */
void notify_figures(struct notify_figures *ret_figures);

/* An event as the receiver and GET /v1/events see it (a new reference, or
 * NULL without memory). */
json_t *notify_event_json(const struct store_event *ev);
/* The same with where its delivery stands (delivery, attempts, last_error):
 * GET /v1/events and `tollgate events list`. */
json_t *notify_event_json_delivery(const struct store_event *ev);

#endif
