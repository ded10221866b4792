/*
 * tollgate-stub: the refund provider stand-in (shared/PROVIDER.md) with fault
 * injection. This header is the seam between main.c (flags, signals,
 * lifecycle) and server.c (HTTP, modes, idempotency, records).
 */
#ifndef STUB_STUB_H
#define STUB_STUB_H

#include "auth.h"
#include "shape.h"
#include "timeline.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Everything the flags set. A plain value filled by main.c; strings are
 * borrowed and must outlive the server.
 */
/* The endpoints a per-path limiter may guard: the refunds POST, the query
 * GETs (a lookup or a list page) and the token POST (stub_limit_path_name). */
enum stub_limit_path { STUB_LIMIT_REFUND, STUB_LIMIT_QUERY, STUB_LIMIT_TOKEN, STUB_LIMIT_PATHS };

struct stub_config {
        const char *host;
        uint16_t port;
        struct stub_timeline timeline;
        double time_scale;
        int64_t delay_ms;      /* default delay of slow */
        int64_t ra_seconds;    /* default Retry-After */
        enum stub_ra ra_form;  /* STUB_RA_SECONDS, STUB_RA_DATE or STUB_RA_NONE */
        int64_t processing_ms; /* default of processing */
        int64_t key_retention_s;
        uint64_t seed;
        int mix_weights[STUB_MODE_COUNT];
        struct stub_mode_spec query_spec;
        int64_t query_delay_ms;
        size_t max_body;
        size_t max_records;
        size_t max_keys;
        unsigned max_connections;
        /* A keep-alive timeout: a connection idle between requests for this
         * long is closed (relay.h). 0: never. With advertise_keep_alive
         * (and at least 1000 ms) answers say so: "Keep-Alive: timeout=S". */
        int64_t idle_close_ms;
        bool advertise_keep_alive;
        const char *webhook_url;
        const void *webhook_secret;
        size_t webhook_secret_len;
        int64_t webhook_delay_ms;
        double webhook_drop_rate;
        /* A gateway's limiter in front of the provider: a contract request
         * arriving fewer than 1000 / limit_rate whole milliseconds after the
         * last one it let through is answered 429 (no Retry-After), no burst.
         * 0: none. */
        double limit_rate;
        /* The same limiter per endpoint, each on its own (--limit-path
         * refund=R,query=R,token=R): a request must pass its endpoint's and
         * the one above; one refused by either moves neither. 0: none. */
        double limit_path_rate[STUB_LIMIT_PATHS];
        /* The provider's true capacity (bucket.h): contract requests past
         * capacity_rate a second (capacity_burst saved) are answered 429,
         * no Retry-After. 0: none. POST /_stub/mode {"capacity": R} changes
         * it mid-run. */
        double capacity_rate, capacity_burst;
        enum stub_shape shape; /* provider-md, stripe, ... (shape.h) */
        /* paypal: the life of the access tokens the token endpoint gives
         * (expires_in), and the client id its HTTP Basic must name (with
         * auth.secret, the client secret; NULL: any client is given one). */
        int64_t token_ttl_s;
        const char *client_id;
        /* HTTPS when tls_cert_pem is set (tls.h); PEM texts, borrowed */
        const char *tls_cert_pem;
        const char *tls_key_pem;
        const char *tls_client_ca_pem; /* set: a verified client certificate is demanded */
        const char *tls_priorities;    /* GnuTLS priority string, NULL: its default */
        struct stub_auth auth;         /* API key and signature demanded (auth.h) */
        bool record_bodies;            /* keep request bodies in the arrival record */
};

struct stub_server;

/* Binds, starts every thread. Returns 0, or a negative code (tg_strerror()). */
int server_start(const struct stub_config *cfg, struct stub_server **ret_server);
uint16_t server_port(const struct stub_server *srv);
/*
 * Stops listening and answering: pending slow requests are abandoned (their
 * connections closed unanswered). The arrival log stays readable.
 */
void server_stop(struct stub_server *srv);
/* Writes the arrival log as JSON lines. Returns 0 or a negative code. */
int server_write_record(struct stub_server *srv, FILE *f);
/* Frees a stopped (or never started) server. Accepts NULL. */
void server_free(struct stub_server *srv);

#endif
