/*
 * store_events — the outbox of what became of each operation: one event row
 * for every change of state that a caller must hear of (a final state, a
 * move to manual, a re-send out of manual; an operator's resolve is the
 * move to a final state), written by store_op_put() in the SAME transaction
 * as the change it announces, so that nothing is announced that did not
 * happen and nothing that happened goes unannounced (docs/design.md,
 * "Telling the caller").
 *
 * Invariants every backend keeps:
 *   - event ids grow with commit order: a writer takes the events' counter
 *     row lock before it takes its id and keeps it to its commit, so a
 *     reader that saw id N never later sees a new event with an id below N
 *     (the pull feed's `after` cursor and the receiver's dedupe rely on it);
 *   - an event row changes only in its delivery columns, and is deleted
 *     only by store_prune() once it was delivered before the retention's
 *     cutoff: never an undelivered (due) or parked one, never the newest.
 */
#ifndef TG_STORE_EVENTS_H
#define TG_STORE_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* Where an event's delivery to the caller's endpoint stands (stored as its
 * number: 0, 1, 2). */
enum store_delivery {
        STORE_DELIVERY_DUE,       /* not yet acknowledged: sent at next_at or later */
        STORE_DELIVERY_DELIVERED, /* the receiver answered 2xx */
        STORE_DELIVERY_PARKED,    /* the retry budget ran out: an operator re-delivers */
};

struct store_event {
        int64_t id; /* unique, growing with commit order */
        int64_t op_id;
        char operation_id[TG_OP_ID_MAX + 1];
        tg_wall_ms at;            /* of the change */
        enum op_state state;      /* the operation's state after the change */
        enum op_state from_state; /* and before it */
        enum manual_reason reason;
        char refund_id[TG_REFUND_ID_MAX];
        int64_t amount;
        char currency[4];
        char account[TG_ACCOUNT_NAME_MAX + 1];   /* the operation's */
        char notify_url[URL_ALLOW_MAX + 1];      /* the refund's own; "" for the account's */
        char submitted_by[TG_SUBMITTER_MAX + 1]; /* the operation's owner; "" for none */
        /* delivery */
        enum store_delivery delivery;
        unsigned attempts;
        tg_wall_ms next_at;      /* due no earlier than this (0: now) */
        tg_wall_ms delivered_at; /* 0 until delivered */
        char last_error[TG_TEXT_MAX];
};

/* Whether a change of state from `before` to `after` is announced
 * (store_op_put() writes the event when it is). */
bool store_event_worthy(enum op_state before, enum op_state after);

/* The stored word of a delivery state ("due", "delivered", "parked"). */
const char *store_delivery_name(enum store_delivery d);

/* What store_events_list() returns: every event, or those of one delivery
 * state, or those not delivered (due or parked). */
enum store_event_filter {
        STORE_EVENTS_ALL,
        STORE_EVENTS_DUE,
        STORE_EVENTS_PARKED,
        STORE_EVENTS_UNDELIVERED,
        STORE_EVENTS_DUE_OWN_URL, /* due, of a refund that named its own notify_url */
        STORE_EVENTS_FAILED,      /* parked, or due after a failed attempt */
};

/* Up to `want` (1..1000) events with id > after_id that pass `filter`, by
 * id, into buf. One short read transaction. */
int store_events_list(struct store *store, int64_t after_id, enum store_event_filter filter,
                      unsigned want, struct store_event *buf, unsigned *ret_n);

/* store_events_list() of the events a caller who owns `owner`'s refunds may
 * read: those of operations submitted by `owner` and of operations without
 * an owner (submitted_by ""). owner: 1..TG_SUBMITTER_MAX bytes. */
int store_events_list_owned(struct store *store, const char *owner, int64_t after_id,
                            enum store_event_filter filter, unsigned want, struct store_event *buf,
                            unsigned *ret_n);

/* The notifier's scan: up to `want` (1..1000) due events of one account,
 * by id; with own_url_only, only those of refunds that named their own
 * notify_url. One short read transaction. */
int store_events_due(struct store *store, const char *account, bool own_url_only, unsigned want,
                     struct store_event *buf, unsigned *ret_n);

/* Up to `want` (1..1000) events of one operation (its row id, op_record.id),
 * by id. One short read transaction. */
int store_events_of_op(struct store *store, int64_t op_id, unsigned want, struct store_event *buf,
                       unsigned *ret_n);

/* One event by id; TG_ENOTFOUND. */
int store_event_get(struct store *store, int64_t id, struct store_event *ret_event);

/* Writes an event's delivery columns (delivery, attempts, next_at,
 * delivered_at, last_error) from ev, by ev->id. One short write transaction. */
int store_event_delivery_put(struct store *store, const struct store_event *ev);

/* An operator's re-delivery: a delivered or parked event is due again now,
 * with its attempts from zero, and a row of its account's audit trail
 * (action "event_redeliver", by `principal`, detail the event id, its
 * operation and where its delivery stood) in the SAME transaction.
 * TG_ENOTFOUND; TG_EINVAL (principal empty or over TG_TEXT_MAX-1 bytes). */
int store_event_redeliver(struct store *store, int64_t id, const char *principal, tg_wall_ms now);

#endif
