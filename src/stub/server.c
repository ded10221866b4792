/*
 * The stub's HTTP side: libmicrohttpd handlers for the contract endpoints
 * (POST /v1/refunds, GET /v1/refunds/{id}) and the admin endpoints under
 * /_stub/, and the fault modes applied to each request.
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
 * - A hostile mode (hostile.h) changes only how the answer prepared here
 *   goes on the wire, after any execution; redirect answers before any.
 */
#include "stub.h"

#include "core/encode.h"
#include "core/strnum.h"
#include "core/tg_error.h"
#include "hostile.h"
#include "ledger.h"
#include "listener.h"
#include "platform/clock.h"
#include "record.h"
#include "relay.h"
#include "request.h"
#include "timer.h"
#include "tls.h"
#include "webhook.h"

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ADMIN_PREFIX   "/_stub/"
#define REFUNDS_PATH   "/v1/refunds"
#define ADMIN_BODY_MAX (64 * 1024)
#define TIMERS_MAX     65536
#define TIMELINE_TEXT  8192

enum kind { K_REFUND, K_QUERY, K_ADMIN, K_OTHER };
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
        struct stub_refund refund;
        char query_op[STUB_KEY_MAX + 1];
        /* The answer. */
        int status;
        char *answer;
        char retry_after[64];
        const char *allow;
        const char *should_retry; /* stripe-like: Stripe-Should-Retry, NULL: none */
        bool drop;
        bool executed;
        /* A hostile mode's answer (hostile.h), made at the finish from the
         * one above; hostile_set: it replaces it on the wire. */
        struct hostile_answer hostile;
        bool hostile_set;
};

/* ---------------------------------------------------------------- helpers */

static char *error_body(const char *code, const char *message, bool retryable)
{
        json_t *o = json_pack("{s:{s:s, s:s, s:b}}", "error", "code", code, "message", message,
                              "retryable", retryable);
        char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        return text;
}

/* The stripe-like shape's words for an error of ours: a type from the
 * status, the code where the real API has one (an idempotency error has
 * none, only its type), 400 for what we answer 422. */
static void stripe_error(struct req *r, int status, const char *code, const char *message,
                         bool retryable)
{
        const char *type = "invalid_request_error";

        if (strcmp(code, "idempotency_key_reused") == 0) {
                type = "idempotency_error";
                code = NULL;
        } else if (strcmp(code, "idempotency_key_in_use") == 0) {
                type = "idempotency_error";
        } else if (strcmp(code, "not_found") == 0) {
                code = "resource_missing";
        } else if (strcmp(code, "rate_limited") == 0) {
                type = "rate_limit_error";
                code = "rate_limit";
        } else if (status >= 500) {
                type = "api_error";
        }
        if (status == 422)
                status = 400;
        free(r->answer);
        r->status = status;
        r->answer = stub_stripe_error(type, code, message);
        r->should_retry = retryable ? "true" : "false";
}

static void answer_error(struct req *r, int status, const char *code, const char *message,
                         bool retryable)
{
        if (r->srv->cfg.shape == STUB_SHAPE_STRIPE_LIKE && r->kind != K_ADMIN) {
                stripe_error(r, status, code, message, retryable);
                return;
        }
        free(r->answer);
        r->status = status;
        r->answer = error_body(code, message, retryable);
}

static void answer_text(struct req *r, int status, const char *body)
{
        free(r->answer);
        r->status = status;
        r->answer = strdup(body);
}

static void set_retry_after(struct req *r)
{
        const struct stub_mode_spec *s = &r->spec;
        if (s->ra_form == STUB_RA_NONE) {
                r->retry_after[0] = '\0';
        } else if (s->ra_form == STUB_RA_DATE) {
                time_t t = (time_t)(clock_wall_now() / TG_MS_PER_S + s->ra_seconds);
                struct tm tm;
                gmtime_r(&t, &tm);
                strftime(r->retry_after, sizeof(r->retry_after), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        } else {
                snprintf(r->retry_after, sizeof(r->retry_after), "%lld", (long long)s->ra_seconds);
        }
}

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
static void mode_at(struct stub_server *srv, tg_mono_ns now, struct stub_mode_spec *ret_spec,
                    size_t *ret_phase, tg_mono_ns *ret_end)
{
        tg_mono_ns end;
        stub_timeline_at(&srv->timeline, now - srv->timeline_start, ret_spec, ret_phase, &end);
        *ret_end = end == TG_MONO_NEVER ? TG_MONO_NEVER : srv->timeline_start + end;
}

/* ------------------------------------------------------------ the answers */

/* A hostile mode's answer from the one prepared (hostile.h). Out of
 * memory: the plain answer goes instead. */
static void make_hostile(struct req *r)
{
        struct hostile_answer a;
        if (hostile_answer_make(&r->spec, r->srv->cfg.shape == STUB_SHAPE_STRIPE_LIKE, r->status,
                                r->answer, r->path, &a) < 0)
                return;
        r->hostile = a;
        if (a.content_type == a.ctype)
                r->hostile.content_type = r->hostile.ctype;
        r->hostile_set = true;
        r->status = a.status;
}

/* Runs at arrival (fast) or at the deadline (delayed), on any thread. */
static void finish(struct req *r)
{
        struct stub_server *srv = r->srv;
        tg_mono_ns now = clock_mono_now();

        if (r->kind == K_REFUND && r->execute && r->spec.mode == STUB_FAIL) {
                /* Taken, then refused for good at the provider: no money
                 * moves. The client is told 500 (an unknown outcome); the
                 * failure is what queries (and the event) say. */
                char *body = srv->cfg.shape == STUB_SHAPE_STRIPE_LIKE
                                 ? stub_stripe_error("api_error", NULL, "injected failure (fail)")
                                 : error_body("internal_error", "injected failure (fail)", false);
                int rc = body ? ledger_fail(srv->ledger, &r->refund, now, r->spec.failure_code, 500,
                                            body)
                              : TG_ENOMEM;
                if (rc < 0) {
                        free(body);
                        answer_error(r, 503, "temporarily_unavailable", "stub ledger full", true);
                } else {
                        free(r->answer);
                        r->status = 500;
                        r->answer = body;
                        if (srv->webhook)
                                webhook_enqueue(srv->webhook, r->refund.operation_id, "failed", "",
                                                now);
                }
        } else if (r->kind == K_REFUND && r->execute) {
                char id[STUB_REFUND_ID_MAX], body[STUB_RESPONSE_MAX];
                int rc = ledger_execute(srv->ledger, &r->refund, now, clock_wall_now(),
                                        r->spec.processing_ms * TG_NS_PER_MS, id, body);
                if (rc < 0) {
                        answer_error(r, 503, "temporarily_unavailable", "stub ledger full", true);
                } else {
                        r->executed = true;
                        /* the real API answers a created refund with 200 */
                        answer_text(r, srv->cfg.shape == STUB_SHAPE_STRIPE_LIKE ? 200 : 201, body);
                        /* calls:K: this POST is call 1 of K; queries 2..K-1
                         * say processing, call K says succeeded */
                        if (r->spec.mode == STUB_CALLS && r->spec.close_calls > 2)
                                ledger_processing_queries(srv->ledger, r->refund.operation_id,
                                                          (unsigned)r->spec.close_calls - 2);
                        if (srv->webhook)
                                webhook_enqueue(srv->webhook, r->refund.operation_id, "succeeded",
                                                id, now);
                }
        } else if (r->kind == K_QUERY && r->lookup) {
                enum ledger_status st;
                char id[STUB_REFUND_ID_MAX], failure[STUB_FAILURE_MAX];
                struct stub_refund req;
                json_t *o = NULL;
                memset(&req, 0, sizeof(req));
                ledger_query(srv->ledger, r->query_op, now, &st, id, failure, &req);
                if (st == LEDGER_NOT_FOUND) {
                        answer_error(r, 404, "not_found", "no refund for this operation", false);
                } else if (srv->cfg.shape == STUB_SHAPE_STRIPE_LIKE) {
                        free(r->answer);
                        r->status = 200;
                        r->answer = stub_stripe_refund(id, &req,
                                                       st == LEDGER_PROCESSING ? "pending"
                                                       : st == LEDGER_FAILED   ? "failed"
                                                                               : "succeeded",
                                                       st == LEDGER_FAILED ? failure : NULL);
                } else {
                        if (st == LEDGER_PROCESSING)
                                o = json_pack("{s:s, s:s}", "operation_id", r->query_op, "status",
                                              "processing");
                        else if (st == LEDGER_FAILED)
                                o = json_pack("{s:s, s:s, s:s}", "operation_id", r->query_op,
                                              "status", "failed", "failure_code", failure);
                        else
                                o = json_pack("{s:s, s:s, s:s}", "operation_id", r->query_op,
                                              "refund_id", id, "status", "succeeded");
                        free(r->answer);
                        r->status = 200;
                        r->answer = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
                        json_decref(o);
                }
        }
        /* The answer path's own faults, after any execution. */
        if (r->spec.mode == STUB_DROP || r->spec.mode == STUB_REFUSE)
                r->drop = true;
        else if (r->spec.mode == STUB_E500 ||
                 (r->spec.mode == STUB_CALLS && r->kind == K_REFUND && r->spec.close_calls > 1))
                answer_error(r, 500, "internal_error",
                             r->spec.mode == STUB_E500 ? "injected failure (e500)"
                                                       : "executed; the answer comes by query "
                                                         "(calls)",
                             false);
        if (stub_mode_hostile(r->spec.mode) && !r->drop)
                make_hostile(r);
        /* Recorded now: a client that left meanwhile never sees it, but this
         * was the answer (and "delivered" will say false). */
        if (r->seq)
                record_answer(srv->log, r->seq, r->drop ? 0 : r->status, r->executed);
        r->state = RS_READY;
}

static void on_timer(void *arg)
{
        struct req *r = arg;
        finish(r);
        MHD_resume_connection(r->conn);
}

/* At shutdown: a waiting request is abandoned unexecuted, like a provider crash. */
static void on_timer_cancel(void *arg)
{
        struct req *r = arg;
        r->execute = false;
        r->lookup = false;
        r->drop = true;
        r->state = RS_READY;
        MHD_resume_connection(r->conn);
}

/* trickle: the connection waits between two bytes (hostile.h's hooks) */
static void on_wake(void *arg)
{
        struct req *r = arg;
        MHD_resume_connection(r->conn);
}

static void hostile_wait(void *owner, tg_mono_ns due)
{
        struct req *r = owner;
        r->suspended = true;
        atomic_fetch_add(&r->srv->suspended, 1);
        MHD_suspend_connection(r->conn);
        if (timer_add(r->srv->timer, due, on_wake, r) < 0) {
                r->drop = true; /* stopping (or no timer slot): the answer ends here */
                MHD_resume_connection(r->conn);
        }
}

static bool hostile_woke(void *owner)
{
        struct req *r = owner;
        if (r->suspended) {
                r->suspended = false;
                atomic_fetch_sub(&r->srv->suspended, 1);
        }
        return r->drop;
}

/* A reset of the caller's connection (no FIN), through the relay. */
static void hostile_reset(void *owner)
{
        struct req *r = owner;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

        if (ci)
                relay_reset(r->srv->relay, ci->connect_fd);
}

static enum MHD_Result send_hostile(struct req *r)
{
        const struct hostile_hooks hooks = {
            .wait = hostile_wait, .woke = hostile_woke, .reset = hostile_reset, .owner = r};
        struct MHD_Response *resp = hostile_response(&r->hostile, &hooks);
        enum MHD_Result ret;

        if (r->seq)
                record_answer(r->srv->log, r->seq, r->status, r->executed);
        if (!resp)
                return MHD_NO;
        ret = MHD_queue_response(r->conn, (unsigned int)r->status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result send_answer(struct req *r)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;
        const char *body = r->answer ? r->answer : "";

        if (r->drop) {
                if (r->seq)
                        record_answer(r->srv->log, r->seq, 0, r->executed);
                return MHD_NO; /* MHD closes the connection without a byte of answer */
        }
        if (r->hostile_set)
                return send_hostile(r);
        if (!r->answer && r->status == 0)
                answer_error(r, 500, "internal_error", "stub: no answer prepared", false);
        if (r->seq)
                record_answer(r->srv->log, r->seq, r->status, r->executed);
        resp = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                r->kind == K_ADMIN && strncmp(r->path, "/_stub/arrivals", 15) == 0
                                    ? "application/x-ndjson"
                                    : "application/json");
        if (r->retry_after[0])
                MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, r->retry_after);
        if (r->allow)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
        if (r->should_retry)
                MHD_add_response_header(resp, "Stripe-Should-Retry", r->should_retry);
        ret = MHD_queue_response(r->conn, (unsigned int)r->status, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* Answers now, or suspends until delay_ms after arrival. */
static enum MHD_Result answer_after_delay(struct req *r)
{
        tg_mono_ns due = r->arrival + r->spec.delay_ms * TG_NS_PER_MS;
        if (r->spec.delay_ms <= 0 || due <= clock_mono_now()) {
                finish(r);
                return send_answer(r);
        }
        r->state = RS_WAIT;
        r->suspended = true;
        atomic_fetch_add(&r->srv->suspended, 1);
        MHD_suspend_connection(r->conn);
        if (timer_add(r->srv->timer, due, on_timer, r) < 0) {
                /* No timer slot: answer now rather than hang. */
                finish(r);
                MHD_resume_connection(r->conn);
        }
        return MHD_YES;
}

/* ------------------------------------------------------- contract handlers */

static const char *header_of(void *ctx, const char *name)
{
        return MHD_lookup_connection_value(ctx, MHD_HEADER_KIND, name);
}

/* What a real provider checks before anything else: the client
 * certificate (already, in the handshake), the API key and the request's
 * signature. Records the verdicts (and the body, with --record-bodies);
 * false when the request was answered 401 here. */
static bool caller_ok(struct req *r)
{
        struct stub_server *srv = r->srv;
        char path[3 * sizeof(r->path)];
        struct tg_strbuf sb;
        const char *key = stub_auth_key(&srv->cfg.auth, header_of, r->conn);
        const char *sig;

        /* The path as the client sent it: libmicrohttpd hands it over
         * percent-decoded, and a client encodes every byte of a value but
         * the unreserved ones (core/encode.h), keeping its '/'. */
        tg_strbuf_init(&sb, path, sizeof(path));
        for (const char *p = r->path; *p; p++) {
                if (*p == '/')
                        tg_strbuf_add(&sb, "/", 1);
                else
                        encode_percent(ENCODE_PATH_SEGMENT, p, 1, &sb);
        }
        sig = stub_auth_signature(&srv->cfg.auth, header_of, r->conn, r->method, path, r->body,
                                  r->len, clock_wall_now() / TG_MS_PER_S);

        if (r->seq)
                record_checks(srv->log, r->seq, stub_tls_client(r->conn), key, sig,
                              srv->cfg.record_bodies ? (r->body ? r->body : "") : NULL, r->len);
        if (key && strcmp(key, "ok") != 0) {
                answer_error(r, 401, "unauthorized",
                             strcmp(key, "missing") == 0 ? "no API key" : "invalid API key", false);
                return false;
        }
        if (sig && strcmp(sig, "ok") != 0) {
                answer_error(r, 401, "signature_invalid",
                             strcmp(sig, "stale") == 0 ? "timestamp too far from now"
                                                       : "missing or wrong signature",
                             false);
                return false;
        }
        return true;
}

/* The POST body as the shape has it: 0, or the answer is prepared. */
static int parse_refund(struct req *r, const char *key, const char *ctype)
{
        const char *why = NULL, *param = NULL;
        int rc;

        if (r->srv->cfg.shape == STUB_SHAPE_STRIPE_LIKE) {
                if (!ctype || strncmp(ctype, "application/x-www-form-urlencoded", 33) != 0) {
                        answer_error(r, 400, "invalid_request",
                                     "Content-Type must be application/x-www-form-urlencoded",
                                     false);
                        return TG_EINVAL;
                }
                rc = stub_parse_refund_form(r->body ? r->body : "", r->len, key, &why, &param,
                                            &r->refund);
                if (rc < 0) {
                        answer_error(r, 400, param ? "parameter_invalid" : "parameter_unknown", why,
                                     false);
                        return rc;
                }
                return 0;
        }
        if (ctype && strncmp(ctype, "application/json", 16) != 0) {
                answer_error(r, 400, "invalid_request", "Content-Type must be application/json",
                             false);
                return TG_EINVAL;
        }
        rc = stub_parse_refund_request(r->body ? r->body : "", r->len, &why, &r->refund);
        if (rc < 0) {
                answer_error(r, rc == TG_EPARSE ? 400 : 422, "invalid_request", why, false);
                return rc;
        }
        if (strcmp(key, r->refund.operation_id) != 0) {
                answer_error(r, 422, "invalid_request",
                             "Idempotency-Key must equal the body's operation_id", false);
                return TG_EINVAL;
        }
        return 0;
}

static enum MHD_Result handle_refund(struct req *r)
{
        struct stub_server *srv = r->srv;
        const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Idempotency-Key");
        const char *ctype =
            MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        char stored[STUB_RESPONSE_MAX], msg[160];
        enum ledger_begin kind;
        int rc, replay_status = 200;

        if (r->spec.mode == STUB_REFUSE) {
                r->drop = true;
                return send_answer(r);
        }
        /* a hop in front of the provider: nothing checked, nothing executed */
        if (r->spec.mode == STUB_REDIRECT)
                return answer_after_delay(r);
        if (!caller_ok(r))
                return send_answer(r);
        switch (r->spec.mode) {
        case STUB_UNAVAILABLE:
                answer_error(r, 503, "temporarily_unavailable", "injected (unavailable)", true);
                set_retry_after(r);
                return answer_after_delay(r);
        case STUB_LIMITED:
                answer_error(r, 429, "rate_limited", "injected (limited)", true);
                set_retry_after(r);
                return answer_after_delay(r);
        default:
                break;
        }
        if (r->too_big) {
                snprintf(msg, sizeof(msg), "body larger than %zu bytes", srv->cfg.max_body);
                answer_error(r, 413, "invalid_request", msg, false);
                return send_answer(r);
        }
        if (!key || !stub_key_valid(key, strlen(key))) {
                answer_error(r, 400, "invalid_request",
                             "Idempotency-Key must be 1-128 chars of [A-Za-z0-9._:-]", false);
                return send_answer(r);
        }
        if (parse_refund(r, key, ctype) < 0)
                return send_answer(r);
        if (r->spec.mode == STUB_REJECT) {
                answer_error(r, 422, "invalid_request", "injected (reject)", false);
                return answer_after_delay(r);
        }
        rc = ledger_begin(srv->ledger, &r->refund, clock_mono_now(), &kind, &replay_status, stored);
        if (rc < 0) {
                answer_error(r, 503, "temporarily_unavailable", "stub ledger full", true);
                return send_answer(r);
        }
        switch (kind) {
        case LEDGER_NEW:
                r->execute = true;
                break;
        case LEDGER_REPLAY:
                /* The first stored response: the success body with 200, or
                 * the 500 a failed key was given (docs in --help). */
                answer_text(r, replay_status, stored);
                break;
        case LEDGER_REUSED:
                answer_error(r, 422, "idempotency_key_reused",
                             "this key was used with another payload", false);
                break;
        case LEDGER_IN_USE:
                answer_error(r, 409, "idempotency_key_in_use",
                             "a request with this key is still being processed", false);
                break;
        }
        return answer_after_delay(r);
}

/* The operation a query names: by our key (PROVIDER.md's path, or the
 * stripe-like by-key lookup) or by the provider's refund id. 0, or the
 * answer is prepared. */
static int query_operation(struct req *r)
{
        size_t by_key = strlen(STUB_BY_KEY_PREFIX);

        if (r->srv->cfg.shape == STUB_SHAPE_STRIPE_LIKE) {
                const char *rest = r->path + by_key;
                if (strncmp(r->path, STUB_BY_KEY_PREFIX, by_key) == 0) {
                        if (!stub_key_valid(rest, strlen(rest))) {
                                answer_error(r, 400, "invalid_request", "not a valid key", false);
                                return TG_EINVAL;
                        }
                        memcpy(r->query_op, rest, strlen(rest) + 1);
                        return 0;
                }
                rest = r->path + strlen(STUB_QUERY_PREFIX);
                if (ledger_operation_of(r->srv->ledger, rest, r->query_op) < 0) {
                        answer_error(r, 404, "not_found", "no such refund", false);
                        return TG_ENOTFOUND;
                }
                return 0;
        }
        if (stub_parse_query_path(r->path, r->query_op) < 0) {
                answer_error(r, 400, "invalid_request",
                             "operation id must be 1-128 chars of [A-Za-z0-9._:-]", false);
                return TG_EINVAL;
        }
        return 0;
}

static enum MHD_Result handle_query(struct req *r)
{
        if (r->spec.mode == STUB_REFUSE) {
                r->drop = true;
                return send_answer(r);
        }
        if (r->spec.mode == STUB_REDIRECT)
                return answer_after_delay(r);
        if (!caller_ok(r))
                return send_answer(r);
        switch (r->spec.mode) {
        case STUB_UNAVAILABLE:
                answer_error(r, 503, "temporarily_unavailable", "injected (query unavailable)",
                             true);
                set_retry_after(r);
                return answer_after_delay(r);
        case STUB_LIMITED:
                answer_error(r, 429, "rate_limited", "injected (query limited)", true);
                set_retry_after(r);
                return answer_after_delay(r);
        default:
                break;
        }
        if (query_operation(r) < 0)
                return answer_after_delay(r);
        r->lookup = true;
        return answer_after_delay(r);
}

/* ---------------------------------------------------------- admin handlers */

static json_t *spec_json(const struct stub_mode_spec *s)
{
        char text[256];
        stub_mode_format(s, text, sizeof(text));
        return json_string(text);
}

static char *state_json(struct stub_server *srv)
{
        tg_mono_ns now = clock_mono_now(), end;
        struct stub_mode_spec spec;
        struct ledger_stats ls;
        uint64_t total, overflow;
        size_t phase;
        char *tl = malloc(TIMELINE_TEXT);
        json_t *o;
        char *text;

        ledger_stats(srv->ledger, &ls);
        record_counts(srv->log, &total, &overflow);
        pthread_mutex_lock(&srv->ctl);
        mode_at(srv, now, &spec, &phase, &end);
        if (tl)
                stub_timeline_format(&srv->timeline, tl, TIMELINE_TEXT);
        o = json_pack("{s:o, s:I, s:I, s:s, s:I, s:I, s:o, s:b}", "mode", spec_json(&spec), "phase",
                      (json_int_t)phase, "phases", (json_int_t)srv->timeline.n, "timeline",
                      tl ? tl : "", "timeline_elapsed_ms",
                      (json_int_t)((now - srv->timeline_start) / TG_NS_PER_MS), "phase_ends_in_ms",
                      (json_int_t)(end == TG_MONO_NEVER ? -1 : (end - now) / TG_NS_PER_MS),
                      "query_mode", spec_json(&srv->query_spec), "listening",
                      listener_is_open(srv->listener));
        pthread_mutex_unlock(&srv->ctl);
        free(tl);
        if (!o)
                return NULL;
        json_object_set_new(o, "port", json_integer(listener_port(srv->listener)));
        json_object_set_new(o, "uptime_ms", json_integer((now - srv->started) / TG_NS_PER_MS));
        json_object_set_new(o, "seed", json_integer((json_int_t)srv->cfg.seed));
        json_object_set_new(o, "open_requests",
                            json_integer((json_int_t)atomic_load(&srv->open_requests)));
        json_object_set_new(o, "open_connections",
                            json_integer((json_int_t)atomic_load(&srv->open_connections)));
        json_object_set_new(o, "timers_pending",
                            json_integer((json_int_t)timer_pending(srv->timer)));
        json_object_set_new(o, "requests", json_integer((json_int_t)total));
        json_object_set_new(o, "record_overflow", json_integer((json_int_t)overflow));
        json_object_set_new(o, "operations", json_integer((json_int_t)ls.operations));
        json_object_set_new(o, "executions", json_integer((json_int_t)ls.executions));
        json_object_set_new(o, "max_executions_per_operation",
                            json_integer((json_int_t)ls.max_executions));
        json_object_set_new(o, "failures", json_integer((json_int_t)ls.failures));
        json_object_set_new(o, "keys_retained", json_integer((json_int_t)ls.keys_retained));
        json_object_set_new(o, "key_retention_s", json_integer(srv->cfg.key_retention_s));
        if (srv->webhook) {
                struct webhook_stats ws;
                webhook_stats(srv->webhook, &ws);
                json_object_set_new(
                    o, "webhook",
                    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "queued", (json_int_t)ws.queued,
                              "sent", (json_int_t)ws.sent, "dropped", (json_int_t)ws.dropped,
                              "failed", (json_int_t)ws.failed, "overflow", (json_int_t)ws.overflow,
                              "last_status", (json_int_t)ws.last_status));
        }
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        return text;
}

/* Reads an optional integer member; returns false (with a message) if of the wrong type. */
static bool opt_int(json_t *o, const char *name, int64_t *io)
{
        json_t *v = json_object_get(o, name);
        if (!v)
                return true;
        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return false;
        *io = json_integer_value(v);
        return true;
}

/* POST /_stub/mode: see --help. All or nothing. */
static void admin_mode(struct req *r)
{
        struct stub_server *srv = r->srv;
        json_error_t jerr;
        json_t *o = json_loadb(r->body ? r->body : "", r->len, 0, &jerr);
        json_t *v;
        struct stub_timeline *tl = NULL;
        struct stub_mode_spec query, once = {0};
        int64_t count = -1;
        bool have_query = false;
        int64_t wh_delay = -1;
        double wh_drop = -1.0;
        const char *why = "bad request";
        char msg[256];

        if (!json_is_object(o)) {
                why = "body must be a JSON object";
                goto bad;
        }
        tl = calloc(1, sizeof(*tl));
        if (!tl) {
                why = "out of memory";
                goto bad;
        }
        v = json_object_get(o, "timeline");
        if (v) {
                if (!json_is_string(v) ||
                    stub_timeline_parse(json_string_value(v), srv->cfg.time_scale, &why, tl) < 0)
                        goto bad;
        }
        v = json_object_get(o, "mode");
        if (v) {
                struct stub_mode_spec s;
                int64_t ra = -1;
                json_t *rav;
                if (tl->n > 0) {
                        why = "give mode or timeline, not both";
                        goto bad;
                }
                if (!json_is_string(v) ||
                    stub_mode_parse(json_string_value(v), strlen(json_string_value(v)), &why, &s) <
                        0)
                        goto bad;
                if (!opt_int(o, "delay_ms", &s.delay_ms) ||
                    !opt_int(o, "processing_ms", &s.processing_ms) ||
                    !opt_int(o, "retry_after", &ra)) {
                        why = "delay_ms, processing_ms, retry_after must be integers >= 0";
                        goto bad;
                }
                if (ra >= 0) {
                        s.ra_form = STUB_RA_SECONDS;
                        s.ra_seconds = ra;
                }
                rav = json_object_get(o, "retry_after_date");
                if (rav && json_is_true(rav) && s.ra_form == STUB_RA_SECONDS)
                        s.ra_form = STUB_RA_DATE;
                v = json_object_get(o, "mix");
                if (v) {
                        if (!json_is_string(v) ||
                            stub_mix_parse(json_string_value(v), strlen(json_string_value(v)), &why,
                                           s.weights) < 0)
                                goto bad;
                        s.has_weights = true;
                }
                if (!opt_int(o, "count", &count) || count == 0) {
                        why = "count must be an integer >= 1";
                        goto bad;
                }
                if (count > 0)
                        once = s; /* the timeline in force stays */
                else
                        stub_timeline_single(&s, tl);
        } else if (json_object_get(o, "count")) {
                why = "count needs a mode";
                goto bad;
        }
        v = json_object_get(o, "query_mode");
        if (v) {
                if (!json_is_string(v) ||
                    stub_mode_parse(json_string_value(v), strlen(json_string_value(v)), &why,
                                    &query) < 0)
                        goto bad;
                if (!stub_mode_for_query(query.mode)) {
                        why = "query_mode must be fast, slow, drop, unavailable, limited, e500 "
                              "or a hostile mode";
                        goto bad;
                }
                if (!opt_int(o, "query_delay_ms", &query.delay_ms)) {
                        why = "query_delay_ms must be an integer >= 0";
                        goto bad;
                }
                have_query = true;
        }
        if (!opt_int(o, "webhook_delay_ms", &wh_delay)) {
                why = "webhook_delay_ms must be an integer >= 0";
                goto bad;
        }
        v = json_object_get(o, "webhook_drop_rate");
        if (v) {
                if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1) {
                        why = "webhook_drop_rate must be a number in [0, 1]";
                        goto bad;
                }
                wh_drop = json_number_value(v);
        }

        pthread_mutex_lock(&srv->ctl);
        if (tl->n > 0) {
                srv->timeline = *tl;
                srv->timeline_start = clock_mono_now();
        }
        if (count > 0) {
                srv->once = once;
                srv->once_left = count;
        }
        if (have_query)
                srv->query_spec = query;
        pthread_mutex_unlock(&srv->ctl);
        if (srv->webhook && (wh_delay >= 0 || wh_drop >= 0))
                webhook_set_faults(srv->webhook, wh_delay, wh_drop);
        listener_poke(srv->listener);
        free(tl);
        json_decref(o);
        free(r->answer);
        r->status = 200;
        r->answer = state_json(srv);
        return;
bad:
        snprintf(msg, sizeof(msg), "%s", why);
        free(tl);
        json_decref(o);
        answer_error(r, 400, "invalid_request", msg, false);
}

static void admin_expire(struct req *r)
{
        json_t *o = NULL, *key = NULL;
        size_t n;
        char buf[96];
        if (r->len > 0) {
                o = json_loadb(r->body, r->len, 0, NULL);
                key = o ? json_object_get(o, "key") : NULL;
                if (!json_is_object(o) || (key && !json_is_string(key))) {
                        json_decref(o);
                        answer_error(r, 400, "invalid_request", "body must be {\"key\": \"...\"}",
                                     false);
                        return;
                }
        }
        n = ledger_expire(r->srv->ledger, key ? json_string_value(key) : NULL);
        json_decref(o);
        snprintf(buf, sizeof(buf), "{\"expired\":%zu}", n);
        answer_text(r, 200, buf);
}

static void admin_arrivals(struct req *r)
{
        const char *since = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "since");
        const char *limit = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "limit");
        uint64_t s = 0, l = 1000000;
        if (since && strnum_u64(since, 0, UINT64_MAX, &s) < 0) {
                answer_error(r, 400, "invalid_request", "since must be an integer", false);
                return;
        }
        if (limit && strnum_u64(limit, 0, SIZE_MAX, &l) < 0) {
                answer_error(r, 400, "invalid_request", "limit must be an integer", false);
                return;
        }
        free(r->answer);
        r->status = 200;
        r->answer = record_dump(r->srv->log, s, (size_t)l);
}

static enum MHD_Result handle_admin(struct req *r)
{
        struct stub_server *srv = r->srv;
        const char *p = r->path + strlen(ADMIN_PREFIX);
        bool get = strcmp(r->method, "GET") == 0, post = strcmp(r->method, "POST") == 0;

        if (r->too_big) {
                answer_error(r, 413, "invalid_request", "admin body too large", false);
        } else if (strcmp(p, "arrivals") == 0 && get) {
                admin_arrivals(r);
        } else if (strcmp(p, "ledger") == 0 && get) {
                free(r->answer);
                r->status = 200;
                r->answer = ledger_dump_json(srv->ledger, clock_mono_now());
        } else if (strcmp(p, "state") == 0 && get) {
                free(r->answer);
                r->status = 200;
                r->answer = state_json(srv);
        } else if (strcmp(p, "mode") == 0 && post) {
                admin_mode(r);
        } else if (strcmp(p, "reset") == 0 && post) {
                ledger_reset(srv->ledger);
                record_reset(srv->log);
                pthread_mutex_lock(&srv->ctl);
                tg_rng_seed(&srv->mix_rng, srv->cfg.seed);
                pthread_mutex_unlock(&srv->ctl);
                answer_text(r, 200, "{\"reset\":true}");
        } else if (strcmp(p, "expire-keys") == 0 && post) {
                admin_expire(r);
        } else if (strcmp(p, "arrivals") == 0 || strcmp(p, "ledger") == 0 ||
                   strcmp(p, "state") == 0) {
                r->allow = "GET";
                answer_error(r, 405, "method_not_allowed", "use GET", false);
        } else if (strcmp(p, "mode") == 0 || strcmp(p, "reset") == 0 ||
                   strcmp(p, "expire-keys") == 0) {
                r->allow = "POST";
                answer_error(r, 405, "method_not_allowed", "use POST", false);
        } else {
                answer_error(r, 404, "not_found", "no such admin endpoint", false);
        }
        if (!r->answer)
                answer_error(r, 500, "internal_error", "stub: out of memory", false);
        return send_answer(r);
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
        if (strcmp(r->path, REFUNDS_PATH) == 0) {
                if (post)
                        return K_REFUND;
                r->allow = "POST";
                answer_error(r, 405, "method_not_allowed", "use POST", false);
                return K_OTHER;
        }
        if ((strncmp(r->path, STUB_QUERY_PREFIX, strlen(STUB_QUERY_PREFIX)) == 0 &&
             !strchr(r->path + strlen(STUB_QUERY_PREFIX), '/')) ||
            (r->srv->cfg.shape == STUB_SHAPE_STRIPE_LIKE &&
             strncmp(r->path, STUB_BY_KEY_PREFIX, strlen(STUB_BY_KEY_PREFIX)) == 0 &&
             !strchr(r->path + strlen(STUB_BY_KEY_PREFIX), '/'))) {
                if (get)
                        return K_QUERY;
                r->allow = "GET";
                answer_error(r, 405, "method_not_allowed", "use GET", false);
                return K_OTHER;
        }
        answer_error(r, 404, "not_found", "no such endpoint", false);
        return K_OTHER;
}

/* The gateway's limiter (cfg.limit_rate), with ctl held: measures the gap
 * from the last request it let through in whole milliseconds, as reverse
 * proxies do, and refuses what comes closer than the rate allows (no burst).
 * A refused request does not move the window. */
static bool limited(struct stub_server *srv, tg_mono_ns arrival)
{
        int64_t ms = arrival / TG_NS_PER_MS;

        if (srv->cfg.limit_rate <= 0)
                return false;
        if (srv->limit_seen && (double)(ms - srv->limit_last_ms) * srv->cfg.limit_rate < 1000.0)
                return true;
        srv->limit_seen = true;
        srv->limit_last_ms = ms;
        return false;
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
        r->max = r->kind == K_REFUND ? srv->cfg.max_body : ADMIN_BODY_MAX;
        if (r->kind == K_ADMIN)
                return r;

        pthread_mutex_lock(&srv->ctl);
        if (atomic_load(&srv->stopping) || !listener_is_open(srv->listener)) {
                /* Refusing, and this came on a connection accepted before. */
                memset(&r->spec, 0, sizeof(r->spec));
                r->spec.mode = STUB_REFUSE;
                resolve(srv, &r->spec, false);
                snprintf(mode, sizeof(mode), "refuse");
        } else if ((r->kind == K_REFUND || r->kind == K_QUERY) && limited(srv, r->arrival)) {
                /* the gateway in front refuses it before the provider sees it */
                memset(&r->spec, 0, sizeof(r->spec));
                r->spec.mode = STUB_LIMITED;
                r->spec.ra_form = STUB_RA_NONE;
                snprintf(mode, sizeof(mode), "limiter");
        } else if (r->kind == K_REFUND) {
                bool mixed;
                mode_at(srv, r->arrival, &r->spec, &phase, &end);
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
            .idempotency_key =
                MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key"),
            .request_id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id"),
            .attempt = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Attempt"),
            .traceparent = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent"),
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
                return send_answer(r);
        if (r->state == RS_WAIT)
                return MHD_YES;

        /* The whole request is in. */
        switch (r->kind) {
        case K_REFUND:
                return handle_refund(r);
        case K_QUERY:
                return handle_query(r);
        case K_ADMIN:
                return handle_admin(r);
        case K_OTHER:
        default:
                return send_answer(r);
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
        mode_at(srv, now, &spec, &phase, &end);
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
        srv->query_spec = cfg->query_spec;
        tg_rng_seed(&srv->mix_rng, cfg->seed);

        srv->ledger =
            ledger_new(cfg->max_keys, cfg->key_retention_s * TG_NS_PER_S, cfg->seed, cfg->shape);
        srv->log = record_log_new(cfg->max_records);
        srv->timer = timer_new(TIMERS_MAX);
        if (!srv->ledger || !srv->log || !srv->timer)
                goto fail;
        if (cfg->webhook_url) {
                rc = webhook_new(cfg->webhook_url, cfg->webhook_secret, cfg->webhook_secret_len,
                                 cfg->webhook_delay_ms, cfg->webhook_drop_rate, cfg->seed,
                                 &srv->webhook);
                if (rc < 0)
                        goto fail;
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
        rc = relay_new(&srv->relay);
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
                timer_stop(srv->timer, on_timer_cancel);
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
        if (srv->cfg.tls_cert_pem)
                stub_tls_release();
        pthread_mutex_destroy(&srv->ctl);
        free(srv);
}
