/*
 * Webhook sender: a bounded FIFO of events (all share one delay, so FIFO is
 * deadline order) and one thread that signs and POSTs them with libcurl.
 * Invariants: the signature covers exactly the bytes sent; a dropped event
 * is counted, never sent; the queue never passes WEBHOOK_QUEUE_MAX.
 */
#include "webhook.h"

#include "core/encode.h"
#include "core/rng.h"
#include "core/tg_error.h"
#include "ledger.h"
#include "platform/clock.h"
#include "platform/digest.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct event {
        tg_mono_ns due;
        char operation_id[STUB_KEY_MAX + 1];
        char status[16];
        char refund_id[STUB_REFUND_ID_MAX];
        /* adyen: what a REFUND notification item carries */
        char payment_id[STUB_FIELD_MAX + 1];
        char merchant[STUB_FIELD_MAX + 1];
        char reference[STUB_FIELD_MAX + 1];
        char currency[4];
        int64_t amount;
        char reason[64];
        unsigned tries; /* adyen: deliveries not accepted so far */
};

struct webhook {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        pthread_t thread;
        bool started;
        bool stopping;
        char *url;
        unsigned char *secret;
        size_t secret_len;
        int64_t delay_ms;
        double drop_rate;
        struct tg_rng rng;
        bool stripe; /* Stripe's event and signature (webhook_set_stripe) */
        bool adyen;  /* Adyen's signed batch (webhook_set_adyen) */
        uint64_t sent_events;
        struct event *queue;
        size_t head, n;
        struct webhook_stats stats;
};

int webhook_sign(const void *secret, size_t secret_len, const char *body, size_t len,
                 char ret_hex[65])
{
        unsigned char mac[DIGEST_SHA256_LEN];
        int r = digest_hmac_sha256(secret, secret_len, body, len, mac);

        if (r == 0)
                r = encode_hex_text(mac, sizeof(mac), ret_hex, 65);
        explicit_bzero(mac, sizeof(mac));
        return r < 0 ? TG_EINVAL : 0;
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        (void)ptr;
        (void)userdata;
        return size * nmemb;
}

void webhook_set_stripe(struct webhook *wh, bool on)
{
        if (wh)
                wh->stripe = on;
}

void webhook_set_adyen(struct webhook *wh, bool on)
{
        if (wh)
                wh->adyen = on;
}

/* Adyen's standard notification: a batch of one REFUND item, signed in
 * additionalData.hmacSignature (base64 HMAC-SHA256 under the hex-decoded
 * key of the eight fields joined by colons). NULL on a key that is not
 * hex or out of memory. */
static json_t *adyen_batch(struct webhook *wh, const struct event *ev)
{
        bool ok = strcmp(ev->status, "succeeded") == 0;
        char value[24], text[1024], key_hex[257];
        unsigned char key[128], mac[DIGEST_SHA256_LEN];
        char sig[64];
        struct tg_strbuf sb;
        size_t n = wh->secret_len;
        json_t *item;

        while (n > 0 && (wh->secret[n - 1] == '\n' || wh->secret[n - 1] == '\r'))
                n--;
        if (n < 2 || n % 2 || n > 256)
                return NULL;
        memcpy(key_hex, wh->secret, n);
        key_hex[n] = '\0';
        if (encode_hex_decode(key_hex, key, n / 2) < 0)
                return NULL;
        snprintf(value, sizeof(value), "%lld", (long long)ev->amount);
        snprintf(text, sizeof(text), "%s:%s:%s:%s:%s:%s:REFUND:%s", ev->refund_id, ev->payment_id,
                 ev->merchant, ev->reference, value, ev->currency, ok ? "true" : "false");
        if (digest_hmac_sha256(key, n / 2, text, strlen(text), mac) < 0)
                return NULL;
        tg_strbuf_init(&sb, sig, sizeof(sig));
        encode_base64(mac, sizeof(mac), &sb);
        explicit_bzero(key, sizeof(key));
        item = json_pack("{s:{s:s}, s:{s:s, s:I}, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
                         "additionalData", "hmacSignature", sig, "amount", "currency", ev->currency,
                         "value", (json_int_t)ev->amount, "eventCode", "REFUND", "eventDate",
                         "2026-01-01T00:00:00+01:00", "merchantAccountCode", ev->merchant,
                         "merchantReference", ev->reference, "originalReference", ev->payment_id,
                         "pspReference", ev->refund_id, "success", ok ? "true" : "false");
        if (item && !ok)
                json_object_set_new(item, "reason", json_string(ev->reason));
        return item ? json_pack("{s:s, s:[{s:o}]}", "live", "false", "notificationItems",
                                "NotificationRequestItem", item)
                    : NULL;
}

/* The event as Stripe sends one: a refund object (its id, status and our
 * operation id in metadata) inside an event of its own id. */
static json_t *stripe_event(struct webhook *wh, const struct event *ev)
{
        char evt[40], re[STUB_REFUND_ID_MAX + 8];
        bool failed = strcmp(ev->status, "failed") == 0;

        snprintf(evt, sizeof(evt), "evt_stub_%llu", (unsigned long long)++wh->sent_events);
        snprintf(re, sizeof(re), "%s", ev->refund_id[0] ? ev->refund_id : "re_stub_failed");
        return json_pack("{s:s, s:s, s:s, s:{s:{s:s, s:s, s:s, s:{s:s}}}}", "id", evt, "object",
                         "event", "type", failed ? "refund.failed" : "refund.updated", "data",
                         "object", "id", re, "object", "refund", "status", ev->status, "metadata",
                         "operation_id", ev->operation_id);
}

/* The header line of the signature of body, in the shape's scheme. */
static int sign_header(struct webhook *wh, const char *body, char *line, size_t size)
{
        char hex[65];
        int r;

        if (wh->adyen) { /* signed item by item inside the body */
                snprintf(line, size, "X-Stub-Webhook: adyen");
                return 0;
        }
        if (!wh->stripe) {
                r = webhook_sign(wh->secret, wh->secret_len, body, strlen(body), hex);
                if (r == 0)
                        snprintf(line, size, "X-Signature: sha256=%s", hex);
                return r;
        }
        long long t = (long long)(clock_wall_now() / 1000);
        size_t n = strlen(body) + 32;
        char *payload = malloc(n);
        if (!payload)
                return TG_ENOMEM;
        snprintf(payload, n, "%lld.%s", t, body);
        r = webhook_sign(wh->secret, wh->secret_len, payload, strlen(payload), hex);
        free(payload);
        if (r == 0)
                snprintf(line, size, "Stripe-Signature: t=%lld,v1=%s", t, hex);
        return r;
}

/* Sends one event; returns the HTTP status, or -1 on a transport error. */
static long send_event(struct webhook *wh, CURL *curl, const struct event *ev)
{
        /* A failed refund has no refund id: the member is left out. */
        json_t *o =
            wh->adyen    ? adyen_batch(wh, ev)
            : wh->stripe ? stripe_event(wh, ev)
            : ev->refund_id[0]
                ? json_pack("{s:s, s:s, s:s}", "operation_id", ev->operation_id, "status",
                            ev->status, "refund_id", ev->refund_id)
                : json_pack("{s:s, s:s}", "operation_id", ev->operation_id, "status", ev->status);
        char *body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        char sig[128];
        struct curl_slist *headers = NULL;
        long status = -1;
        json_decref(o);
        if (!body || sign_header(wh, body, sig, sizeof(sig)) < 0)
                goto out;
        headers = curl_slist_append(headers, "Content-Type: application/json");
        headers = curl_slist_append(headers, sig);
        curl_easy_reset(curl);
        curl_easy_setopt(curl, CURLOPT_URL, wh->url);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
        if (curl_easy_perform(curl) == CURLE_OK)
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
out:
        curl_slist_free_all(headers);
        free(body);
        return status;
}

static void *run(void *arg)
{
        struct webhook *wh = arg;
        CURL *curl = curl_easy_init();
        pthread_mutex_lock(&wh->lock);
        while (!wh->stopping) {
                if (wh->n == 0) {
                        pthread_cond_wait(&wh->cond, &wh->lock);
                        continue;
                }
                struct event ev = wh->queue[wh->head];
                if (ev.due > clock_mono_now()) {
                        struct timespec ts = clock_mono_timespec(ev.due);
                        pthread_cond_timedwait(&wh->cond, &wh->lock, &ts);
                        continue;
                }
                wh->head = (wh->head + 1) % WEBHOOK_QUEUE_MAX;
                wh->n--;
                if (wh->drop_rate > 0 && tg_rng_unit(&wh->rng) < wh->drop_rate) {
                        wh->stats.dropped++;
                        continue;
                }
                pthread_mutex_unlock(&wh->lock);
                long status = curl ? send_event(wh, curl, &ev) : -1;
                pthread_mutex_lock(&wh->lock);
                wh->stats.last_status = status;
                if (status >= 200 && status < 300) {
                        wh->stats.sent++;
                } else {
                        wh->stats.failed++;
                        /* Adyen retries a notification its endpoint did not
                         * accept (2 min and more apart; 1 s here), 5 times */
                        if (wh->adyen && ++ev.tries < 5 && wh->n < WEBHOOK_QUEUE_MAX) {
                                ev.due = clock_mono_now() + TG_NS_PER_S;
                                wh->queue[(wh->head + wh->n) % WEBHOOK_QUEUE_MAX] = ev;
                                wh->n++;
                        }
                }
        }
        pthread_mutex_unlock(&wh->lock);
        curl_easy_cleanup(curl);
        return NULL;
}

int webhook_new(const char *url, const void *secret, size_t secret_len, int64_t delay_ms,
                double drop_rate, uint64_t seed, struct webhook **ret_webhook)
{
        struct webhook *wh;
        pthread_condattr_t attr;
        if (!url || !*url || delay_ms < 0 || !(drop_rate >= 0.0 && drop_rate <= 1.0))
                return TG_EINVAL;
        wh = calloc(1, sizeof(*wh));
        if (!wh)
                return TG_ENOMEM;
        wh->url = strdup(url);
        wh->secret = malloc(secret_len ? secret_len : 1);
        wh->queue = calloc(WEBHOOK_QUEUE_MAX, sizeof(*wh->queue));
        if (!wh->url || !wh->secret || !wh->queue) {
                free(wh->url);
                free(wh->secret);
                free(wh->queue);
                free(wh);
                return TG_ENOMEM;
        }
        if (secret_len)
                memcpy(wh->secret, secret, secret_len);
        wh->secret_len = secret_len;
        wh->delay_ms = delay_ms;
        wh->drop_rate = drop_rate;
        tg_rng_seed(&wh->rng, seed ^ 0x776562686f6f6bULL);
        pthread_mutex_init(&wh->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&wh->cond, &attr);
        pthread_condattr_destroy(&attr);
        if (pthread_create(&wh->thread, NULL, run, wh) != 0) {
                webhook_free(wh);
                return TG_ENOMEM;
        }
        wh->started = true;
        *ret_webhook = wh;
        return 0;
}

void webhook_free(struct webhook *wh)
{
        if (!wh)
                return;
        pthread_mutex_lock(&wh->lock);
        wh->stopping = true;
        pthread_cond_signal(&wh->cond);
        pthread_mutex_unlock(&wh->lock);
        if (wh->started)
                pthread_join(wh->thread, NULL);
        pthread_cond_destroy(&wh->cond);
        pthread_mutex_destroy(&wh->lock);
        free(wh->url);
        free(wh->secret);
        free(wh->queue);
        free(wh);
}

void webhook_enqueue(struct webhook *wh, const char *operation_id, const char *status,
                     const char *refund_id, tg_mono_ns now)
{
        struct stub_refund req;

        memset(&req, 0, sizeof(req));
        snprintf(req.operation_id, sizeof(req.operation_id), "%s", operation_id);
        webhook_enqueue_refund(wh, &req, status, refund_id, "", now);
}

void webhook_enqueue_refund(struct webhook *wh, const struct stub_refund *req, const char *status,
                            const char *refund_id, const char *reason, tg_mono_ns now)
{
        const char *operation_id = req->operation_id;
        struct event *ev;
        pthread_mutex_lock(&wh->lock);
        if (wh->n >= WEBHOOK_QUEUE_MAX) {
                wh->stats.overflow++;
                goto out;
        }
        ev = &wh->queue[(wh->head + wh->n) % WEBHOOK_QUEUE_MAX];
        ev->due = now + wh->delay_ms * TG_NS_PER_MS;
        snprintf(ev->operation_id, sizeof(ev->operation_id), "%s", operation_id);
        snprintf(ev->status, sizeof(ev->status), "%s", status);
        snprintf(ev->refund_id, sizeof(ev->refund_id), "%s", refund_id);
        snprintf(ev->payment_id, sizeof(ev->payment_id), "%s", req->payment_id);
        snprintf(ev->merchant, sizeof(ev->merchant), "%s", req->merchant);
        snprintf(ev->reference, sizeof(ev->reference), "%s", req->reference);
        snprintf(ev->currency, sizeof(ev->currency), "%s", req->currency);
        snprintf(ev->reason, sizeof(ev->reason), "%s", reason ? reason : "");
        ev->amount = req->amount;
        ev->tries = 0;
        wh->n++;
        wh->stats.queued++;
        pthread_cond_signal(&wh->cond);
out:
        pthread_mutex_unlock(&wh->lock);
}

void webhook_set_faults(struct webhook *wh, int64_t delay_ms, double drop_rate)
{
        pthread_mutex_lock(&wh->lock);
        if (delay_ms >= 0)
                wh->delay_ms = delay_ms;
        if (drop_rate >= 0.0 && drop_rate <= 1.0)
                wh->drop_rate = drop_rate;
        pthread_mutex_unlock(&wh->lock);
}

void webhook_stats(struct webhook *wh, struct webhook_stats *ret_stats)
{
        pthread_mutex_lock(&wh->lock);
        *ret_stats = wh->stats;
        pthread_mutex_unlock(&wh->lock);
}
