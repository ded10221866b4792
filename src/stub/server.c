/*
 * The stub's HTTP side, its routing: a request's arrival (its kind, the
 * mode in force, the gateway's limiter, its arrival entry), libmicrohttpd's
 * callbacks that carry it to its handler (contract.c, admin.c) and to its
 * answer (answer.c), and the server's life cycle (server_int.h says which
 * file holds what).
 *
 * Invariants:
 * - The mode applied to a request is fixed at its arrival (first handler
 *   call) from the timeline in force at that monotonic instant.
 * - A delayed request is suspended, never slept on: one timer thread fires
 *   at its deadline, executes the refund (whether or not the client is still
 *   there), prepares the answer and resumes the connection.
 * - Every contract request gets exactly one arrival entry and one answer
 *   (a status, or "dropped"); admin requests are never recorded.
 * - A refund executes only through ledger_execute() after ledger_begin()
 *   said LEDGER_NEW, so with proper idempotency no operation executes twice.
 *   In mode fail the key ends through ledger_fail() instead: nothing
 *   executes, the POST answers 500 and queries answer status failed.
 * - A hostile mode (hostile.h) changes only how the answer prepared in
 *   answer.c goes on the wire, after any execution; redirect answers before
 *   any.
 */
#include "server_int.h"

#include "core/tg_error.h"
#include "ledger.h"
#include "listener.h"
#include "platform/clock.h"
#include "record.h"
#include "relay.h"
#include "timer.h"
#include "tls.h"
#include "webhook.h"

#include <stdlib.h>
#include <string.h>

#define TIMERS_MAX 65536

/* Fills every "default" of spec from the flags; draws mix members. Under ctl. */
static void resolve(struct stub_server *srv, struct stub_mode_spec *s, bool query)
{
        if (s->mode == STUB_MIX) {
                const int *w = s->has_weights ? s->weights : srv->cfg.mix_weights;
                enum stub_mode m = stub_mix_draw(w, &srv->mix_rng);
                memset(s, 0, sizeof(*s));
                s->mode = m;
                s->delay_ms = -1;
                s->processing_ms = -1;
                s->ra_seconds = -1;
                s->hostile = -1;
        }
        if (s->delay_ms < 0) {
                if (s->mode == STUB_SLOW)
                        s->delay_ms = query ? srv->cfg.query_delay_ms : srv->cfg.delay_ms;
                else
                        s->delay_ms = 0;
        }
        if (s->processing_ms < 0)
                s->processing_ms = s->mode == STUB_PROCESSING ? srv->cfg.processing_ms : 0;
        if (s->close_calls < 1)
                s->close_calls = STUB_CALLS_DEFAULT;
        if (s->mode == STUB_FAIL && !s->failure_code[0])
                snprintf(s->failure_code, sizeof(s->failure_code), "%s", STUB_FAILURE_CODE_DEFAULT);
        if (s->ra_form == STUB_RA_DEFAULT) {
                s->ra_form = srv->cfg.ra_form;
                s->ra_seconds = srv->cfg.ra_seconds;
        }
}

/* The POST mode in force at now. Under ctl. */
void server_mode_at(struct stub_server *srv, tg_mono_ns now, struct stub_mode_spec *ret_spec,
                    size_t *ret_phase, tg_mono_ns *ret_end)
{
        tg_mono_ns end;
        stub_timeline_at(&srv->timeline, now - srv->timeline_start, ret_spec, ret_phase, &end);
        *ret_end = end == TG_MONO_NEVER ? TG_MONO_NEVER : srv->timeline_start + end;
}

/* ------------------------------------------------------------ MHD glue */

static uint64_t conn_id(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        if (!ci || !ci->socket_context)
                return 0;
        return *(uint64_t *)ci->socket_context;
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
        struct stub_server *srv = cls;
        (void)connection;
        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                uint64_t *id = malloc(sizeof(*id));
                if (id)
                        *id = atomic_fetch_add(&srv->next_conn_id, 1) + 1;
                *socket_context = id;
                atomic_fetch_add(&srv->open_connections, 1);
        } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
                free(*socket_context);
                *socket_context = NULL;
                atomic_fetch_sub(&srv->open_connections, 1);
        }
}

static void req_free(struct req *r)
{
        if (!r)
                return;
        free(r->body);
        free(r->answer);
        hostile_answer_release(&r->hostile);
        free(r);
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct stub_server *srv = cls;
        struct req *r = *con_cls;
        (void)connection;
        if (!r)
                return;
        if (r->seq) {
                /* Closed before any answer (client gone, or shutdown): dropped. A
                 * request already answered keeps its answer. */
                record_answer(srv->log, r->seq, 0, r->executed);
                record_delivered(srv->log, r->seq,
                                 toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && !r->drop);
        }
        if (r->counted)
                atomic_fetch_sub(&srv->open_requests, 1);
        req_free(r);
        *con_cls = NULL;
}

/* Sorts a request into its kind, or prepares a 404/405. */
static enum kind classify(struct req *r)
{
        bool get = strcmp(r->method, "GET") == 0, post = strcmp(r->method, "POST") == 0;
        if (strncmp(r->path, ADMIN_PREFIX, strlen(ADMIN_PREFIX)) == 0)
                return K_ADMIN;
        if (r->srv->cfg.shape == STUB_SHAPE_CHECKOUT) {
                /* POST /payments/{id}/refunds, GET /payments/{id}/actions */
                bool actions = false;
                if (stub_checkout_path(r->path, r->list_payment, &actions) < 0) {
                        answer_error(r, 404, "not_found", "no such endpoint", false);
                        return K_OTHER;
                }
                if (actions ? get : post)
                        return actions ? K_QUERY : K_REFUND;
                r->allow = actions ? "GET" : "POST";
                answer_error(r, 405, "method_not_allowed", "method not allowed", false);
                return K_OTHER;
        }
        if (r->srv->cfg.shape == STUB_SHAPE_PAYPAL) {
                /* POST /v1/oauth2/token, POST /v2/payments/captures/{id}/
                 * refund, GET /v2/payments/refunds/{id}: no lookup by
                 * PayPal-Request-Id, no list */
                bool query = false;
                if (strcmp(r->path, STUB_PAYPAL_TOKEN_PATH) == 0) {
                        if (post)
                                return K_TOKEN;
                        r->allow = "POST";
                } else if (stub_paypal_path(r->path, r->list_payment, &query) < 0) {
                        answer_error(r, 404, "not_found", "no such endpoint", false);
                        return K_OTHER;
                } else if (query ? get : post) {
                        return query ? K_QUERY : K_REFUND;
                } else {
                        r->allow = query ? "GET" : "POST";
                }
                answer_error(r, 405, "method_not_allowed", "method not allowed", false);
                return K_OTHER;
        }
        if (r->srv->cfg.shape == STUB_SHAPE_ADYEN) {
                /* POST /v{N}/payments/{id}/refunds; Adyen has no lookup and
                 * no list of refunds: any other request is 404 */
                if (post && stub_adyen_path(r->path, r->list_payment) == 0)
                        return K_REFUND;
                answer_error(r, 404, "not_found", "no such endpoint", false);
                return K_OTHER;
        }
        if (strcmp(r->path, REFUNDS_PATH) == 0) {
                if (post)
                        return K_REFUND;
                /* Stripe's list of refunds (the stripe shape's only lookup
                 * without the refund id) */
                if (get && r->srv->cfg.shape == STUB_SHAPE_STRIPE)
                        return K_QUERY;
                r->allow = r->srv->cfg.shape == STUB_SHAPE_STRIPE ? "GET, POST" : "POST";
                answer_error(r, 405, "method_not_allowed", "use POST", false);
                return K_OTHER;
        }
        if (strncmp(r->path, STUB_QUERY_PREFIX, strlen(STUB_QUERY_PREFIX)) == 0 &&
            !strchr(r->path + strlen(STUB_QUERY_PREFIX), '/')) {
                if (get)
                        return K_QUERY;
                r->allow = "GET";
                answer_error(r, 405, "method_not_allowed", "use GET", false);
                return K_OTHER;
        }
        answer_error(r, 404, "not_found", "no such endpoint", false);
        return K_OTHER;
}

/* One whole-millisecond window: a request `ms` closer than 1000/rate to
 * the last one let through is refused (rate 0: none). */
static bool window_refuses(double rate, bool seen, int64_t last_ms, int64_t ms)
{
        return rate > 0 && seen && (double)(ms - last_ms) * rate < 1000.0;
}

/* The gateway's limiters, with ctl held: the account's (cfg.limit_rate)
 * and the request's endpoint's (cfg.limit_path_rate), each measuring the
 * gap from the last request it let through in whole milliseconds, as
 * reverse proxies do, and refusing what comes closer than its rate allows
 * (no burst). A request must pass both; a refused one moves neither
 * window. Returns NULL (let through) or the record's mode: "limiter" (the
 * account's refused it) or "limiter_path". */
static const char *limited(struct stub_server *srv, enum kind kind, tg_mono_ns arrival)
{
        int64_t ms = arrival / TG_NS_PER_MS;
        int p = kind == K_REFUND  ? STUB_LIMIT_REFUND
                : kind == K_QUERY ? STUB_LIMIT_QUERY
                                  : STUB_LIMIT_TOKEN;
        double path_rate = srv->cfg.limit_path_rate[p];

        if (window_refuses(srv->cfg.limit_rate, srv->limit_seen, srv->limit_last_ms, ms))
                return "limiter";
        if (window_refuses(path_rate, srv->path_seen[p], srv->path_last_ms[p], ms))
                return "limiter_path";
        if (srv->cfg.limit_rate > 0) {
                srv->limit_seen = true;
                srv->limit_last_ms = ms;
        }
        if (path_rate > 0) {
                srv->path_seen[p] = true;
                srv->path_last_ms[p] = ms;
        }
        return NULL;
}

/* First handler call: the request's arrival. Fixes its mode and records it. */
static struct req *arrive(struct stub_server *srv, struct MHD_Connection *conn, const char *url,
                          const char *method)
{
        struct req *r = calloc(1, sizeof(*r));
        struct record_arrival a;
        size_t phase = 0;
        tg_mono_ns end;
        char mode[300];
        const char *limiter;

        if (!r)
                return NULL;
        r->srv = srv;
        r->conn = conn;
        /* when the kernel had its first bytes, not when this thread ran */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || relay_arrival(srv->relay, ci->connect_fd, &r->arrival) < 0)
                r->arrival = clock_mono_now();
        snprintf(r->method, sizeof(r->method), "%s", method);
        snprintf(r->path, sizeof(r->path), "%s", url);
        r->kind = classify(r);
        r->max = r->kind == K_REFUND || r->kind == K_TOKEN ? srv->cfg.max_body : ADMIN_BODY_MAX;
        if (r->kind == K_ADMIN)
                return r;

        pthread_mutex_lock(&srv->ctl);
        if (atomic_load(&srv->stopping) || !listener_is_open(srv->listener)) {
                /* Refusing, and this came on a connection accepted before. */
                memset(&r->spec, 0, sizeof(r->spec));
                r->spec.mode = STUB_REFUSE;
                resolve(srv, &r->spec, false);
                snprintf(mode, sizeof(mode), "refuse");
        } else if ((r->kind == K_REFUND || r->kind == K_QUERY || r->kind == K_TOKEN) &&
                   (limiter = limited(srv, r->kind, r->arrival)) != NULL) {
                /* the gateway in front refuses it before the provider sees it */
                memset(&r->spec, 0, sizeof(r->spec));
                r->spec.mode = STUB_LIMITED;
                r->spec.ra_form = STUB_RA_NONE;
                snprintf(mode, sizeof(mode), "%s", limiter);
        } else if ((r->kind == K_REFUND || r->kind == K_QUERY || r->kind == K_TOKEN) &&
                   !bucket_take(&srv->capacity, r->arrival)) {
                /* past the provider's true capacity: refused, nothing done */
                memset(&r->spec, 0, sizeof(r->spec));
                r->spec.mode = STUB_LIMITED;
                r->spec.ra_form = STUB_RA_NONE;
                snprintf(mode, sizeof(mode), "capacity");
        } else if (r->kind == K_REFUND) {
                bool mixed;
                server_mode_at(srv, r->arrival, &r->spec, &phase, &end);
                if (srv->once_left > 0) {
                        r->spec = srv->once;
                        srv->once_left--;
                }
                mixed = r->spec.mode == STUB_MIX;
                resolve(srv, &r->spec, false);
                stub_mode_format(&r->spec, mode + (mixed ? 4 : 0), sizeof(mode) - (mixed ? 4 : 0));
                if (mixed)
                        memcpy(mode, "mix/", 4);
        } else if (r->kind == K_QUERY) {
                r->spec = srv->query_spec;
                resolve(srv, &r->spec, true);
                stub_mode_format(&r->spec, mode, sizeof(mode));
        } else {
                memset(&r->spec, 0, sizeof(r->spec));
                snprintf(mode, sizeof(mode), "-");
        }
        if (r->spec.mode == STUB_REFUSE && r->kind == K_OTHER)
                r->drop = true;
        pthread_mutex_unlock(&srv->ctl);

        r->counted = true;
        a = (struct record_arrival){
            .mono = r->arrival,
            .elapsed = r->arrival - srv->started,
            .wall = clock_wall_now(),
            .method = method,
            .path = url,
            .idempotency_key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                           stub_shape_key_header(srv->cfg.shape)),
            .request_id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id"),
            .attempt = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Attempt"),
            .traceparent = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent"),
            .api_version = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Stripe-Version"),
            .starting_after =
                MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "starting_after"),
            .conn_id = conn_id(conn),
            .open_requests = atomic_fetch_add(&srv->open_requests, 1) + 1,
            .mode = mode,
            .phase = r->kind == K_REFUND ? (long)phase : -1,
        };
        r->seq = record_add(srv->log, &a);
        return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
        struct stub_server *srv = cls;
        struct req *r = *con_cls;
        (void)version;

        if (!r) {
                /* A demanded client certificate that is missing or does not
                 * verify: the TLS layer's alert, no HTTP, nothing recorded. */
                if (stub_tls_refuse(connection))
                        return MHD_NO;
                r = arrive(srv, connection, url, method);
                if (!r)
                        return MHD_NO;
                *con_cls = r;
                return MHD_YES;
        }
        if (r->state == RS_BODY && *upload_data_size > 0) {
                size_t n = *upload_data_size;
                *upload_data_size = 0;
                if (r->too_big || r->len + n > r->max) {
                        r->too_big = true; /* keep reading, keep nothing: answer 413 at the end */
                        return MHD_YES;
                }
                char *nb = realloc(r->body, r->len + n + 1);
                if (!nb)
                        return MHD_NO;
                memcpy(nb + r->len, upload_data, n);
                r->body = nb;
                r->len += n;
                r->body[r->len] = '\0';
                return MHD_YES;
        }
        if (r->state == RS_READY && r->suspended) {
                r->suspended = false;
                atomic_fetch_sub(&srv->suspended, 1);
        }
        if (r->state == RS_READY)
                return answer_send(r);
        if (r->state == RS_WAIT)
                return MHD_YES;

        /* The whole request is in. */
        switch (r->kind) {
        case K_REFUND:
                return contract_refund(r);
        case K_QUERY:
                return contract_query(r);
        case K_TOKEN:
                return contract_token(r);
        case K_ADMIN:
                return admin_handle(r);
        case K_OTHER:
        default:
                return answer_send(r);
        }
}

/* ------------------------------------------------------------ lifecycle */

static bool want_listen(void *cls, tg_mono_ns now, tg_mono_ns *ret_next_check)
{
        struct stub_server *srv = cls;
        struct stub_mode_spec spec;
        size_t phase;
        tg_mono_ns end;
        pthread_mutex_lock(&srv->ctl);
        server_mode_at(srv, now, &spec, &phase, &end);
        pthread_mutex_unlock(&srv->ctl);
        *ret_next_check = end;
        return spec.mode != STUB_REFUSE;
}

static void on_accept(void *cls, int fd, const struct sockaddr *addr, socklen_t addrlen)
{
        struct stub_server *srv = cls;
        int server_fd;

        /* through the relay (relay.h), which closes fd when it cannot take
         * it; MHD owns its end from here, and closes it even on failure */
        if (relay_add(srv->relay, fd, &server_fd) == 0)
                MHD_add_connection(srv->mhd, server_fd, addr, addrlen);
}

int server_start(const struct stub_config *cfg, struct stub_server **ret_server)
{
        struct stub_server *srv = calloc(1, sizeof(*srv));
        int rc = TG_ENOMEM;
        if (!srv)
                return TG_ENOMEM;
        srv->cfg = *cfg;
        srv->started = clock_mono_now();
        pthread_mutex_init(&srv->ctl, NULL);
        srv->timeline = cfg->timeline;
        srv->timeline_start = srv->started;
        bucket_set(&srv->capacity, cfg->capacity_rate, cfg->capacity_burst, srv->started);
        srv->query_spec = cfg->query_spec;
        tg_rng_seed(&srv->mix_rng, cfg->seed);

        srv->ledger =
            ledger_new(cfg->max_keys, cfg->key_retention_s * TG_NS_PER_S, cfg->seed, cfg->shape);
        srv->log = record_log_new(cfg->max_records);
        srv->timer = timer_new(TIMERS_MAX);
        if (cfg->shape == STUB_SHAPE_PAYPAL)
                srv->tokens = stub_tokens_new(cfg->seed);
        if (!srv->ledger || !srv->log || !srv->timer ||
            (cfg->shape == STUB_SHAPE_PAYPAL && !srv->tokens))
                goto fail;
        if (cfg->webhook_url) {
                rc = webhook_new(cfg->webhook_url, cfg->webhook_secret, cfg->webhook_secret_len,
                                 cfg->webhook_delay_ms, cfg->webhook_drop_rate, cfg->seed,
                                 &srv->webhook);
                if (rc < 0)
                        goto fail;
                webhook_set_stripe(srv->webhook, cfg->shape == STUB_SHAPE_STRIPE);
                webhook_set_adyen(srv->webhook, cfg->shape == STUB_SHAPE_ADYEN);
        }
        if (cfg->tls_cert_pem) {
                /* HTTPS: GnuTLS through MHD, our certificate from the callback
                 * (which also makes a client certificate a requirement). */
                const char *prio = cfg->tls_priorities ? cfg->tls_priorities : "NORMAL";
                rc = stub_tls_init(cfg->tls_cert_pem, cfg->tls_key_pem,
                                   cfg->tls_client_ca_pem != NULL);
                if (rc < 0)
                        goto fail;
                if (cfg->tls_client_ca_pem)
                        srv->mhd = MHD_start_daemon(
                            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                                MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC |
                                MHD_USE_TLS,
                            0, NULL, NULL, on_request, srv, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                            MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)300,
                            MHD_OPTION_HTTPS_CERT_CALLBACK, stub_tls_cert_callback(),
                            MHD_OPTION_HTTPS_PRIORITIES, prio, MHD_OPTION_HTTPS_MEM_TRUST,
                            cfg->tls_client_ca_pem, MHD_OPTION_END);
                else
                        srv->mhd = MHD_start_daemon(
                            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                                MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC |
                                MHD_USE_TLS,
                            0, NULL, NULL, on_request, srv, MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                            MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)300,
                            MHD_OPTION_HTTPS_CERT_CALLBACK, stub_tls_cert_callback(),
                            MHD_OPTION_HTTPS_PRIORITIES, prio, MHD_OPTION_END);
        } else {
                srv->mhd = MHD_start_daemon(
                    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                        MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
                    0, NULL, NULL, on_request, srv, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                    MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv, MHD_OPTION_CONNECTION_LIMIT,
                    cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)300,
                    MHD_OPTION_END);
        }
        if (!srv->mhd) {
                rc = TG_EIO;
                goto fail;
        }
        rc = relay_new(cfg->idle_close_ms, &srv->relay);
        if (rc < 0)
                goto fail;
        rc = listener_start(cfg->host, cfg->port, want_listen, on_accept, srv, &srv->listener);
        if (rc < 0)
                goto fail;
        *ret_server = srv;
        return 0;
fail:
        server_stop(srv);
        server_free(srv);
        return rc;
}

uint16_t server_port(const struct stub_server *srv)
{
        return listener_port(srv->listener);
}

void server_stop(struct stub_server *srv)
{
        if (!srv)
                return;
        /* Order matters: no new requests, then every waiting request resumed
         * (MHD aborts when stopped with a suspended connection), then MHD
         * closes every connection and frees each request through
         * on_completed, and only then the timer goes (a late timer_add
         * must fail, not touch freed memory). */
        atomic_store(&srv->stopping, true);
        if (srv->listener)
                listener_stop(srv->listener);
        if (srv->timer)
                timer_stop(srv->timer, answer_abandon);
        for (int i = 0; i < 600 && srv->mhd && atomic_load(&srv->suspended) > 0; i++)
                clock_sleep_ns(5 * TG_NS_PER_MS);
        if (srv->mhd)
                MHD_stop_daemon(srv->mhd);
        srv->mhd = NULL;
        /* after MHD closed its ends: the callers' sockets close with them */
        relay_free(srv->relay);
        srv->relay = NULL;
        timer_free(srv->timer);
        srv->timer = NULL;
        webhook_free(srv->webhook);
        srv->webhook = NULL;
}

int server_write_record(struct stub_server *srv, FILE *f)
{
        return record_write(srv->log, f);
}

void server_free(struct stub_server *srv)
{
        if (!srv)
                return;
        server_stop(srv);
        listener_free(srv->listener);
        ledger_free(srv->ledger);
        record_log_free(srv->log);
        stub_tokens_free(srv->tokens);
        if (srv->cfg.tls_cert_pem)
                stub_tls_release();
        pthread_mutex_destroy(&srv->ctl);
        free(srv);
}
