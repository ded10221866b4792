/*
 * The stub's answers: what a request is answered and how it goes on the
 * wire. Errors in the words of the shape (PROVIDER.md's or the
 * stripe one), the work done at a request's finish (at arrival, or at
 * the deadline of a delayed one: execute the refund, read the ledger for a
 * query, then the answer path's own faults), the timer and the hostile
 * modes' hooks, and queueing the answer with libmicrohttpd.
 *
 * Invariants:
 * - A refund executes only here, through ledger_execute() after
 *   contract.c's ledger_begin() said LEDGER_NEW; in mode fail the key ends
 *   through ledger_fail() instead and nothing executes.
 * - The answer path's faults (drop, e500, calls:K) and a hostile mode act
 *   after any execution, so they change what the client sees, never what
 *   the provider did.
 * - A delayed request is suspended, never slept on: the timer thread
 *   finishes it at its deadline and resumes its connection; at shutdown
 *   a waiting request is abandoned unexecuted (answer_abandon()).
 * - Every contract request's answer is recorded once it is known (a status,
 *   or 0: dropped), whether or not the client is still there.
 */
#include "server_int.h"

#include "core/tg_error.h"
#include "ledger.h"
#include "platform/clock.h"
#include "record.h"
#include "relay.h"
#include "timer.h"
#include "webhook.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *error_body(const char *code, const char *message, bool retryable)
{
        json_t *o = json_pack("{s:{s:s, s:s, s:b}}", "error", "code", code, "message", message,
                              "retryable", retryable);
        char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        return text;
}

/* The stripe shape's words for an error of ours: a type from the
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

/* The checkout shape's words: a key still running is the documented 429
 * (its error_type is the stub's word: checkout.md); a validation error a
 * 422 {"request_id","error_type":"request_invalid","error_codes":[..]};
 * 401, 404, 405, 429 (a rate limit) and 5xx carry no body. */
static void checkout_error(struct req *r, int status, const char *code)
{
        free(r->answer);
        r->answer = NULL;
        if (strcmp(code, "idempotency_key_in_use") == 0) {
                status = 429;
                r->answer = stub_checkout_error("request_in_progress", NULL);
        } else if (status == 400 || status == 413 || status == 422) {
                status = 422;
                r->answer = stub_checkout_error(
                    "request_invalid",
                    strcmp(code, "invalid_request") == 0 ? "request_invalid" : code);
        }
        if (!r->answer)
                r->answer = strdup("");
        r->status = status;
}

/* The adyen shape's words: {"status","errorCode","message","errorType"};
 * a key still running is 409 errorCode 704; our 422 validation codes stay
 * (shape_adyen.c gives Adyen's numbers), other words of ours become 000. */
static void adyen_error(struct req *r, int status, const char *code, const char *message)
{
        if (strcmp(code, "idempotency_key_in_use") == 0) {
                status = 409;
                code = "704";
                message = "request already processed or in progress";
        } else if (code[0] < '0' || code[0] > '9') {
                code = status == 429 ? "000" : status >= 500 ? "905" : "000";
        }
        free(r->answer);
        r->status = status;
        r->answer = stub_adyen_error(status, code, message);
}

/* The paypal shape's words: {"name","message","debug_id","details":[{
 * "field","issue","description"}],"links"}, the name from the status; an
 * issue word of shape_paypal.c stays, ours become PayPal's: a key still
 * running is 409 (the second of two requests at once "might fail", the
 * idempotency page says: the stub's reading, paypal.md), an unknown id
 * INVALID_RESOURCE_ID, a refusal of mode reject REFUND_AMOUNT_EXCEEDED;
 * 401, 429 and 5xx carry no detail. */
static void paypal_error(struct req *r, int status, const char *code, const char *message)
{
        const char *issue = code;

        for (const char *p = code; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || *p == '_'))
                        issue = NULL;
        if (strcmp(code, "idempotency_key_in_use") == 0) {
                status = 409;
                issue = "DUPLICATE_REQUEST_ID";
        } else if (issue) {
                /* shape_paypal.c's own word */
        } else if (status == 404) {
                issue = "INVALID_RESOURCE_ID";
        } else if (status == 422) {
                issue = "REFUND_AMOUNT_EXCEEDED";
        } else if (status == 400 || status == 413 || status == 415) {
                issue = "INVALID_PARAMETER_SYNTAX";
        }
        free(r->answer);
        r->status = status;
        r->answer = stub_paypal_error(status, issue, NULL, issue ? message : NULL,
                                      (unsigned long long)r->seq * 0x9E3779B97F4A7C15ULL);
}

void answer_error(struct req *r, int status, const char *code, const char *message, bool retryable)
{
        if (r->srv->cfg.shape == STUB_SHAPE_PAYPAL && r->kind != K_ADMIN) {
                paypal_error(r, status, code, message);
                return;
        }
        if (r->srv->cfg.shape == STUB_SHAPE_ADYEN && r->kind != K_ADMIN) {
                adyen_error(r, status, code, message);
                return;
        }
        if (r->srv->cfg.shape == STUB_SHAPE_STRIPE && r->kind != K_ADMIN) {
                stripe_error(r, status, code, message, retryable);
                return;
        }
        if (r->srv->cfg.shape == STUB_SHAPE_CHECKOUT && r->kind != K_ADMIN) {
                checkout_error(r, status, code);
                return;
        }
        free(r->answer);
        r->status = status;
        r->answer = error_body(code, message, retryable);
}

void answer_text(struct req *r, int status, const char *body)
{
        free(r->answer);
        r->status = status;
        r->answer = strdup(body);
}

void answer_retry_after(struct req *r)
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

/* A hostile mode's answer from the one prepared (hostile.h). Out of
 * memory: the plain answer goes instead. */
static void make_hostile(struct req *r)
{
        struct hostile_answer a;
        if (hostile_answer_make(&r->spec, r->srv->cfg.shape == STUB_SHAPE_STRIPE, r->status,
                                r->answer, r->path, &a) < 0)
                return;
        r->hostile = a;
        if (a.content_type == a.ctype)
                r->hostile.content_type = r->hostile.ctype;
        r->hostile_set = true;
        r->status = a.status;
}

/* The paypal refund r->refund_id of operation r->query_op as it is at now:
 * COMPLETED, PENDING (status_details.reason ECHECK) or FAILED (the
 * failure code as the reason); 200. */
static void paypal_view(struct req *r, tg_mono_ns now)
{
        enum ledger_status st;
        char id[STUB_REFUND_ID_MAX], failure[STUB_FAILURE_MAX];
        struct stub_refund req;

        memset(&req, 0, sizeof(req));
        ledger_query(r->srv->ledger, r->query_op, now, &st, id, failure, &req);
        if (st == LEDGER_NOT_FOUND || !r->refund_id[0]) {
                answer_error(r, 404, "not_found", "no such refund", false);
                return;
        }
        free(r->answer);
        r->status = 200;
        r->answer = stub_paypal_refund(r->refund_id, &req,
                                       st == LEDGER_PROCESSING ? "PENDING"
                                       : st == LEDGER_FAILED   ? "FAILED"
                                                               : "COMPLETED",
                                       st == LEDGER_PROCESSING ? "ECHECK"
                                       : st == LEDGER_FAILED   ? failure
                                                               : NULL);
        if (!r->answer)
                answer_error(r, 503, "temporarily_unavailable", "stub out of memory", true);
}

/* Runs at arrival (fast) or at the deadline (delayed), on any thread. */
static void finish(struct req *r)
{
        struct stub_server *srv = r->srv;
        tg_mono_ns now = clock_mono_now();

        if (r->kind == K_REFUND && r->execute && r->spec.mode == STUB_FAIL &&
            srv->cfg.shape == STUB_SHAPE_ADYEN) {
                /* Received (201, a pspReference), then refused: the REFUND
                 * notification says success false. Nothing executes. */
                char body[STUB_RESPONSE_MAX], id[STUB_REFUND_ID_MAX], failure[STUB_FAILURE_MAX];
                enum ledger_status st;
                struct stub_refund req;
                int status = 0;
                if (ledger_fail(srv->ledger, &r->refund, now, r->spec.failure_code, 201, NULL) <
                        0 ||
                    ledger_response(srv->ledger, r->refund.operation_id, &status, body) < 0) {
                        answer_error(r, 503, "temporarily_unavailable", "stub ledger full", true);
                } else {
                        answer_text(r, status, body);
                        ledger_query(srv->ledger, r->refund.operation_id, now, &st, id, failure,
                                     &req);
                        if (srv->webhook)
                                webhook_enqueue_refund(srv->webhook, &r->refund, "failed", id,
                                                       r->spec.failure_code, now);
                }
        } else if (r->kind == K_REFUND && r->execute && r->spec.mode == STUB_FAIL &&
                   (srv->cfg.shape == STUB_SHAPE_CHECKOUT || srv->cfg.shape == STUB_SHAPE_PAYPAL)) {
                /* Accepted (202, an action id), then declined: the action
                 * in the list says so (approved false, its response code).
                 * paypal: a refund made FAILED (201), its reason the code. */
                char body[STUB_RESPONSE_MAX];
                int status = 0;
                if (ledger_fail(srv->ledger, &r->refund, now, r->spec.failure_code,
                                srv->cfg.shape == STUB_SHAPE_PAYPAL ? 201 : 202, NULL) < 0 ||
                    ledger_response(srv->ledger, r->refund.operation_id, &status, body) < 0)
                        answer_error(r, 503, "temporarily_unavailable", "stub ledger full", true);
                else
                        answer_text(r, status, body);
        } else if (r->kind == K_REFUND && r->execute && r->spec.mode == STUB_FAIL) {
                /* Taken, then refused for good at the provider: no money
                 * moves. The client is told 500 (an unknown outcome); the
                 * failure is what queries (and the event) say. */
                char *body = srv->cfg.shape == STUB_SHAPE_STRIPE
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
                        answer_text(r,
                                    srv->cfg.shape == STUB_SHAPE_STRIPE     ? 200
                                    : srv->cfg.shape == STUB_SHAPE_CHECKOUT ? 202
                                                                            : 201, /* adyen too */
                                    body);
                        /* calls:K: this POST is call 1 of K; queries 2..K-1
                         * say processing, call K says succeeded */
                        if (r->spec.mode == STUB_CALLS && r->spec.close_calls > 2)
                                ledger_processing_queries(srv->ledger, r->refund.operation_id,
                                                          (unsigned)r->spec.close_calls - 2);
                        if (srv->webhook)
                                webhook_enqueue_refund(srv->webhook, &r->refund, "succeeded", id,
                                                       "", now);
                }
        } else if (r->lookup && srv->cfg.shape == STUB_SHAPE_PAYPAL) {
                /* the refund by its id, or a repeat of its key: the latest
                 * status of the refund (PayPal's idempotency page) */
                paypal_view(r, now);
        } else if (r->kind == K_QUERY && r->lookup && r->list) {
                free(r->answer);
                r->status = 200;
                r->answer =
                    srv->cfg.shape == STUB_SHAPE_CHECKOUT
                        ? ledger_actions_json(srv->ledger, r->list_payment,
                                              r->query_op[0] ? r->query_op : NULL, now)
                        : ledger_list_json(srv->ledger, r->list_payment, r->list_after,
                                           r->list_limit, r->query_op[0] ? r->query_op : NULL, now);
                if (!r->answer)
                        answer_error(r, 503, "temporarily_unavailable", "stub out of memory", true);
        } else if (r->kind == K_QUERY && r->lookup) {
                enum ledger_status st;
                char id[STUB_REFUND_ID_MAX], failure[STUB_FAILURE_MAX];
                struct stub_refund req;
                json_t *o = NULL;
                memset(&req, 0, sizeof(req));
                ledger_query(srv->ledger, r->query_op, now, &st, id, failure, &req);
                if (st == LEDGER_NOT_FOUND) {
                        answer_error(r, 404, "not_found", "no refund for this operation", false);
                } else if (srv->cfg.shape == STUB_SHAPE_STRIPE) {
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
        /* Checkout.com keeps a key only for a request answered 2xx: one
         * that executed and was answered otherwise is forgotten (a replay
         * of it would execute again, as the reference says). */
        if (srv->cfg.shape == STUB_SHAPE_CHECKOUT && r->kind == K_REFUND && r->execute &&
            !r->drop && r->status / 100 != 2)
                ledger_expire(srv->ledger, r->refund.operation_id);
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
void answer_abandon(void *arg)
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

enum MHD_Result answer_send(struct req *r)
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
        const struct stub_config *cfg = &r->srv->cfg;
        if (cfg->advertise_keep_alive && cfg->idle_close_ms >= 1000) {
                char ka[40];
                snprintf(ka, sizeof(ka), "timeout=%lld", (long long)(cfg->idle_close_ms / 1000));
                MHD_add_response_header(resp, "Keep-Alive", ka);
        }
        ret = MHD_queue_response(r->conn, (unsigned int)r->status, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* Answers now, or suspends until delay_ms after arrival. */
enum MHD_Result answer_after_delay(struct req *r)
{
        tg_mono_ns due = r->arrival + r->spec.delay_ms * TG_NS_PER_MS;
        if (r->spec.delay_ms <= 0 || due <= clock_mono_now()) {
                finish(r);
                return answer_send(r);
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
