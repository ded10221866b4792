/*
 * Optional provider -> tollgate events: after a refund executes, POST
 * {"operation_id","status","refund_id"} to a URL with
 * "X-Signature: sha256=<hex HMAC-SHA256 of the raw body>", from a queue
 * served by one thread, with its own faults (a delay, and a seeded drop rate).
 * Thread-safe.
 */
#ifndef STUB_WEBHOOK_H
#define STUB_WEBHOOK_H

#include "core/tg_time.h"
#include "request.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WEBHOOK_QUEUE_MAX 4096

struct webhook;

struct webhook_stats {
        uint64_t queued;
        uint64_t sent;     /* delivered with a 2xx */
        uint64_t dropped;  /* by the drop fault */
        uint64_t failed;   /* transport error or non-2xx */
        uint64_t overflow; /* queue full */
        long last_status;
};

/*
 * Starts the sender. url and the secret bytes are copied. drop_rate is in
 * [0, 1]. Returns 0, TG_EINVAL or TG_ENOMEM.
 */
int webhook_new(const char *url, const void *secret, size_t secret_len, int64_t delay_ms,
                double drop_rate, uint64_t seed, struct webhook **ret_webhook);
/* Stripe's shape (before the first event): each event is a Stripe event
 * {"id":"evt_..","object":"event","type":"refund.updated"|"refund.failed",
 * "data":{"object":{a refund object, our operation id in its metadata}}},
 * signed "Stripe-Signature: t=<unix s>,v1=<hex HMAC-SHA256 of "t.body">"
 * (docs/providers/stripe.md), not PROVIDER.md's X-Signature. */
void webhook_set_stripe(struct webhook *wh, bool on);
/* Adyen's shape (before the first event): each event is a standard
 * notification batch of one REFUND item (success "true"/"false", our
 * reference as merchantReference, the payment as originalReference), the
 * item signed in additionalData.hmacSignature with the secret read as
 * Adyen's hex key; a delivery not answered 2xx is retried 5 times, 1 s
 * apart (Adyen: minutes apart, for longer). */
void webhook_set_adyen(struct webhook *wh, bool on);
/* Stops the thread (events still queued are not sent) and frees. Accepts NULL. */
void webhook_free(struct webhook *wh);
/* Queues one event due at now + delay. Never blocks on the network. */
void webhook_enqueue(struct webhook *wh, const char *operation_id, const char *status,
                     const char *refund_id, tg_mono_ns now);
/* The same, with the refund's fields (the adyen shape's item needs them)
 * and a refusal reason ("" none). */
void webhook_enqueue_refund(struct webhook *wh, const struct stub_refund *req, const char *status,
                            const char *refund_id, const char *reason, tg_mono_ns now);
/* Changes the faults at run time; a negative value keeps the current one. */
void webhook_set_faults(struct webhook *wh, int64_t delay_ms, double drop_rate);
void webhook_stats(struct webhook *wh, struct webhook_stats *ret_stats);

/* Hex HMAC-SHA256 of body with the secret, NUL-terminated. Returns 0 or TG_EINVAL. */
int webhook_sign(const void *secret, size_t secret_len, const char *body, size_t len,
                 char ret_hex[65]);

#endif
