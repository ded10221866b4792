/*
 * transport — the HTTP boundary of the exit (libcurl multi). It starts a call
 * the moment it is asked to, and only then: it has no queue of its own and it
 * never re-sends. libcurl would otherwise hide two things:
 *   - a request sent on a reused keep-alive connection that turns out dead is
 *     silently re-sent on a new one (POST included). We prevent it twice:
 *     every call uses a fresh connection that is closed after it
 *     (FRESH_CONNECT + FORBID_REUSE, unless reuse is configured), and a
 *     pre-request hook refuses a second send of one handle;
 *   - transfers past a connection limit wait in libcurl's own queue (and that
 *     wait eats the timeout). Connection limits are set to "unlimited": the
 *     caller's pacer is the only gate.
 * Whether any byte may have left (the pre-request hook fired) decides
 * "not sent" (retryable) versus "unknown" for failed calls.
 *
 * Pull model: transport_poll() waits for I/O, transport_next_done() hands
 * back finished calls one at a time. No callbacks into the caller.
 */
#ifndef TG_TRANSPORT_H
#define TG_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/classify.h"
#include "core/tg_time.h"

struct transport;

struct transport_config {
        const char *base_url;          /* http://127.0.0.1:9090 */
        const char *refunds_path;      /* /v1/refunds */
        const char *query_path;        /* /v1/refunds/{operation_id} */
        const char *key_header;        /* Idempotency-Key */
        const char *request_id_header; /* X-Request-Id */
        const char *attempt_header;    /* X-Attempt */
        int64_t connect_timeout_ms;
        size_t max_response_bytes;
        unsigned max_open;      /* hard bound on open calls (>= the exit's max_in_flight) */
        bool reuse_connections; /* keep-alive allowed (the second-send guard still holds) */
};

/* Copies what it needs from config. 0, TG_EINVAL, TG_ENOMEM. Caller owns
 * *ret_transport: transport_free() (which aborts open calls). */
int transport_new(const struct transport_config *config, struct transport **ret_transport);
void transport_free(struct transport *transport);

struct transport_call {
        enum classify_request request; /* CLASSIFY_POST or CLASSIFY_QUERY */
        const char *operation_id;      /* the idempotency key, validated */
        const char *body;              /* POST body (JSON); NULL for queries */
        const char *request_id;
        unsigned attempt;
        int64_t timeout_ms;      /* whole call: DNS, connect, send, wait, read */
        uint64_t cookie;         /* returned with the result */
        const char *traceparent; /* sent as the W3C traceparent header; NULL/"": none */
        /* The request does not go on the wire before this monotonic time:
         * the connection is made at once, and the pre-request hook holds the
         * request until then (0: no hold). The caller hands a call over a
         * little ahead of its slot so that the connect is done by then. */
        tg_mono_ns not_before;
};

/* Hands the request to libcurl now. Strings are copied. 0, TG_EFULL (max_open
 * calls already open), TG_EINVAL, TG_ENOMEM, TG_ETRANSPORT. */
int transport_start(struct transport *transport, const struct transport_call *call);

/* Drives I/O, waiting at most timeout_ms for activity on the calls or for
 * wake_fd (-1: none) to become readable. 0, 1 (wake_fd is readable: the
 * caller drains it), or TG_ETRANSPORT. */
int transport_poll(struct transport *transport, int timeout_ms, int wake_fd);

struct transport_result {
        uint64_t cookie;
        struct provider_reply reply; /* transport, http_status, parsed body fields */
        char retry_after[64];        /* raw Retry-After header value, "" if none */
        bool sent;                   /* the request may have left (pre-request hook fired) */
        tg_mono_ns handoff_mono;     /* when transport_start() took it */
        tg_mono_ns ready_mono;       /* connection ready: the hook fired (0 if never) */
        tg_mono_ns sent_mono;        /* when the request went on the wire (0 if not sent) */
        int64_t latency_us;          /* from transport_start to completion */
        bool second_send_refused;    /* libcurl tried to send this call twice */
        char error[256];             /* libcurl's words, "" on success */
};

/* Pops one finished call. 0 (filled), TG_ENOTFOUND (none finished). */
int transport_next_done(struct transport *transport, struct transport_result *ret_result);

/* A call whose request went on the wire (or never will), reported as soon
 * as it is known, before the call ends. */
struct transport_sent {
        uint64_t cookie;
        bool sent;             /* false: it ended before any byte left */
        tg_mono_ns ready_mono; /* the connection was ready (0 if never) */
        tg_mono_ns sent_mono;  /* the request went out (0 if not sent) */
};

/* Pops one such report, in the order they happened. 0 (filled) or
 * TG_ENOTFOUND. Every started call gives exactly one. */
int transport_next_sent(struct transport *transport, struct transport_sent *ret_sent);

/* Calls started and not yet popped. */
unsigned transport_open(const struct transport *transport);

/* Parses an HTTP-date with curl_getdate (for retry_after_parse). 0 or
 * TG_EPARSE. */
int transport_http_date(const char *text, int64_t *ret_epoch_s);

#endif
