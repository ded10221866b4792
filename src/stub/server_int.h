/*
 * server_int — private to the stub's HTTP side: the server and one request
 * as every part of it sees them, and what the parts call of each other.
 * Nothing but these files includes it:
 *   server.c    routing: a request's arrival (its kind, the mode in force,
 *               the gateway's limiter, its arrival entry), libmicrohttpd's
 *               callbacks and the server's life cycle;
 *   answer.c    the answers: error bodies in the shape's words, the work
 *               done at a request's deadline (execute, query the ledger,
 *               the answer path's faults), delays and the hostile hooks,
 *               and putting an answer on the wire;
 *   contract.c  the contract endpoints (POST /v1/refunds, GET
 *               /v1/refunds/{id}): what a provider checks, then the ledger;
 *   admin.c     the admin endpoints under /_stub/.
 *
 * Invariants: the control state of struct stub_server is read and changed
 * under ctl only; a struct req is touched by one thread at a time (the
 * libmicrohttpd thread, or the timer thread while its connection is
 * suspended), and every request is answered through answer_send() once.
 */
#ifndef STUB_SERVER_INT_H
#define STUB_SERVER_INT_H

#include "stub.h"

#include "bucket.h"
#include "core/rng.h"
#include "core/tg_time.h"
#include "hostile.h"
#include "ledger.h"
#include "request.h"
#include "tokens.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ADMIN_PREFIX   "/_stub/"
#define REFUNDS_PATH   "/v1/refunds"
#define ADMIN_BODY_MAX (64 * 1024)

enum kind { K_REFUND, K_QUERY, K_TOKEN, K_ADMIN, K_OTHER };
enum rstate { RS_BODY, RS_WAIT, RS_READY };

struct stub_server {
        struct stub_config cfg;
        tg_mono_ns started;
        struct MHD_Daemon *mhd;
        struct listener *listener;
        struct relay *relay; /* every connection through it: the kernel's arrival stamps */
        struct timer *timer;
        struct ledger *ledger;
        struct record_log *log;
        struct webhook *webhook;
        struct stub_tokens *tokens; /* paypal: the access tokens given */
        atomic_uint_fast64_t open_requests;
        atomic_uint_fast64_t open_connections;
        atomic_uint_fast64_t next_conn_id;
        atomic_uint_fast64_t suspended; /* requests suspended and not yet answered */
        atomic_bool stopping;
        /* Control state, under ctl: what the admin endpoints change. */
        pthread_mutex_t ctl;
        struct stub_timeline timeline;
        tg_mono_ns timeline_start;
        struct stub_mode_spec query_spec;
        struct tg_rng mix_rng;
        /* {"mode":..., "count":N}: the next N refund requests get `once`,
         * then the timeline in force answers again */
        struct stub_mode_spec once;
        int64_t once_left;
        bool limit_seen;       /* the limiter let a request through */
        int64_t limit_last_ms; /* its arrival, in whole ms of the monotonic clock */
        /* the same, per endpoint (cfg.limit_path_rate) */
        bool path_seen[STUB_LIMIT_PATHS];
        int64_t path_last_ms[STUB_LIMIT_PATHS];
        struct stub_bucket capacity; /* the provider's true capacity (bucket.h) */
};

/* One request, from its first handler call to MHD's completion callback. */
struct req {
        struct stub_server *srv;
        struct MHD_Connection *conn;
        enum kind kind;
        enum rstate state;
        uint64_t seq;   /* arrival entry; 0 for admin requests */
        bool counted;   /* in open_requests */
        bool suspended; /* in srv->suspended */
        tg_mono_ns arrival;
        struct stub_mode_spec spec; /* resolved: no "default" left, never mix */
        char method[16];
        char path[256];
        char *body;
        size_t len;
        size_t max;
        bool too_big;
        /* Work done at the deadline of a delayed request. */
        bool execute; /* a refund begun with LEDGER_NEW */
        bool lookup;  /* a query to answer from the ledger */
        bool list;    /* stripe: GET /v1/refunds, the list (list_* below) */
        char list_payment[STUB_FIELD_MAX + 1];
        char list_after[STUB_REFUND_ID_MAX];
        unsigned list_limit;
        struct stub_refund refund;
        char query_op[STUB_KEY_MAX + 1];
        char refund_id[STUB_REFUND_ID_MAX]; /* paypal: the refund a lookup names */
        /* The answer. */
        int status;
        char *answer;
        char retry_after[64];
        const char *allow;
        const char *should_retry; /* stripe: Stripe-Should-Retry, NULL: none */
        bool drop;
        bool executed;
        /* A hostile mode's answer (hostile.h), made at the finish from the
         * one above; hostile_set: it replaces it on the wire. */
        struct hostile_answer hostile;
        bool hostile_set;
};

/* server.c: the POST mode in force at now, and when its phase ends
 * (TG_MONO_NEVER: never). Under ctl. */
void server_mode_at(struct stub_server *srv, tg_mono_ns now, struct stub_mode_spec *ret_spec,
                    size_t *ret_phase, tg_mono_ns *ret_end);

/* answer.c: prepare r's answer (replacing one prepared before): an error
 * in the words of the server's shape (the admin endpoints always speak
 * PROVIDER.md's), or a body as given (copied). */
void answer_error(struct req *r, int status, const char *code, const char *message, bool retryable);
void answer_text(struct req *r, int status, const char *body);
/* The Retry-After of r's resolved mode (none, seconds or a date). */
void answer_retry_after(struct req *r);
/* Queues r's prepared answer (or closes the connection unanswered when it
 * is dropped) and records it. MHD_YES, or MHD_NO to close. */
enum MHD_Result answer_send(struct req *r);
/* Finishes r now (answer_send) or suspends it until delay_ms after its
 * arrival, when the timer thread finishes it and resumes it. */
enum MHD_Result answer_after_delay(struct req *r);
/* The timer's cancel callback at shutdown: a waiting request is abandoned
 * unexecuted (dropped), like a provider crash. */
void answer_abandon(void *arg);

/* contract.c: a whole contract request, from its checks to its answer;
 * contract_token: the paypal shape's POST /v1/oauth2/token. */
enum MHD_Result contract_refund(struct req *r);
enum MHD_Result contract_query(struct req *r);
enum MHD_Result contract_token(struct req *r);

/* admin.c: a whole admin request (POST /_stub/mode and the rest). */
enum MHD_Result admin_handle(struct req *r);

#endif
