/*
 * api — the intake and admin routes (see the header): lifecycle,
 * routing (authentication: api_auth.c), intake, the call log and the request log. The
 * other routes live in api_manual.c, api_metrics.c, api_events.c and
 * api_admission.c (api_int.h). Every answer is built in api_handle(), which
 * the HTTP server calls on its single thread; the store this module opens is
 * touched only there.
 *
 * Invariants:
 *   - authentication comes before routing under /v1, so an unauthenticated
 *     client learns nothing about which routes or operations exist; the one
 *     exception is POST /v1/provider-events (and /v1/provider-events/{account}),
 *     which the provider cannot send a bearer token with and which is
 *     authenticated by its HMAC signature instead (api_events.c);
 *   - authentication and the route's scope (api_auth.c, its one route x
 *     scope table) come before the route's handler: the bearer token is
 *     compared in constant time, and a caller without the scope is refused
 *     before anything is read or stored;
 *   - POST /v1/refunds answers 202 only after store_accept() committed
 *     (commit before reply); every error path returns before store_accept(),
 *     or is store_accept() refusing, so nothing is stored on an error; a
 *     refund refused by admission control is refused before anything is
 *     stored, and an operation already accepted is never refused;
 *   - error bodies carry a code from a fixed set and our own messages, never
 *     a store or library text;
 *   - every request is logged as one JSON line (request id, method, path,
 *     status, duration, the operation when there is one): never a header
 *     value, a query string or a body.
 */
#include "daemon/api.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/encode.h"
#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "core/traceparent.h"
#include "daemon/api_int.h"
#include "daemon/failpoint.h"
#include "daemon/log.h"
#include "daemon/render.h"
#include "daemon/ui.h"
#include "platform/clock.h"
#include "platform/digest.h"
#include "platform/secmem.h"
#include "platform/wake.h"
#include "store/store.h"

#define CALLS_LIMIT_DEF 100
#define CALLS_LIMIT_MAX 1000

/* ---- shared helpers (api_int.h) ---------------------------------------------- */

tg_wall_ms api_wall_now(void)
{
        return clock_wall_now();
}

_Static_assert(API_DIGEST_LEN == DIGEST_SHA256_LEN, "a token digest is a SHA-256");

/* A per-process random prefix, so ids from two api processes never clash;
 * not a secret. The same bytes seed the draws of new trace ids. */
static void make_id_prefix(char out[17], struct tg_rng *ret_rng)
{
        unsigned char b[8];
        ssize_t n = -1;
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

        if (fd >= 0) {
                n = read(fd, b, sizeof(b));
                close(fd);
        }
        if (n != (ssize_t)sizeof(b)) {
                uint64_t x = (uint64_t)api_wall_now() ^ ((uint64_t)getpid() << 32);
                memcpy(b, &x, sizeof(b));
        }
        encode_hex_text(b, sizeof(b), out, 17);
        uint64_t seed = 0;
        memcpy(&seed, b, sizeof(seed));
        tg_rng_seed(ret_rng, seed ^ (uint64_t)clock_mono_now());
}

static void next_request_id(struct api *api, char out[API_REQUEST_ID_LEN])
{
        api->counter++;
        snprintf(out, API_REQUEST_ID_LEN, "%s-%08llx", api->id_prefix,
                 (unsigned long long)api->counter);
}

bool api_is_get(const struct http_request *req)
{
        return strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
}

int api_reply_json(struct http_response *res, int status, json_t *root)
{
        char *text;

        if (!root)
                return TG_ENOMEM;
        text = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        if (!text)
                return TG_ENOMEM;
        return http_response_take(res, status, API_JSON_TYPE, text, strlen(text));
}

int api_reply_error(struct http_response *res, const char *rid, const struct api_error *err)
{
        char *body = NULL;
        size_t len = 0;
        int r;

        r = api_error_json(err, rid, &body, &len);
        if (r < 0)
                return r;
        r = http_response_take(res, err->status, API_JSON_TYPE, body, len);
        if (r < 0)
                return r;
        if (err->status == 503)
                http_response_add_header(res, "Retry-After", "1");
        return 0;
}

int api_reply_code(struct http_response *res, const char *rid, int status, const char *code,
                   const char *field, const char *message)
{
        struct api_error err;

        api_error_set(&err, status, code, field, message);
        return api_reply_error(res, rid, &err);
}

int api_reply_not_one_of(struct http_response *res, const char *rid, const char *field,
                         enum tg_vocabulary vocabulary)
{
        char words[sizeof(((struct api_error *)0)->message) - sizeof("must be one of ")];
        char message[sizeof(((struct api_error *)0)->message)];

        (void)names_join(vocabulary, words, sizeof(words)); /* truncated at worst */
        snprintf(message, sizeof(message), "must be one of %s", words);
        return api_reply_code(res, rid, 400, "invalid_parameter", field, message);
}

/* A store that cannot write now (a database restarting, a failing or full
 * disk): 503 with a Retry-After long enough for what usually cures it. The
 * operation may or may not have been stored (a COMMIT whose answer was lost
 * may have happened), so the message asks for the same request again, which
 * the operation_id makes safe; never a 500, which says "our bug". */
static int reply_store_down(struct http_response *res, const char *rid, int code)
{
        struct api_error err;
        const char *retry = "2";
        char *body = NULL;
        size_t len = 0;
        int r;

        if (code == -ENOSPC) {
                api_error_set(&err, 503, "store_full", NULL,
                              "the store's disk is full; send the same request again after "
                              "Retry-After seconds");
                retry = "30";
        } else {
                api_error_set(&err, 503, "store_unavailable", NULL,
                              "the store cannot be written now; send the same request again "
                              "after Retry-After seconds");
        }
        err.retryable = true;
        log_emit(LOG_WARN, "api_store_error",
                 json_pack("{s:s, s:s, s:s}", "request_id", rid, "code", err.code, "error",
                           tg_strerror(code)));
        r = api_error_json(&err, rid, &body, &len);
        if (r == 0)
                r = http_response_take(res, 503, API_JSON_TYPE, body, len);
        if (r == 0)
                http_response_add_header(res, "Retry-After", retry);
        return r;
}

int api_reply_store_error(struct http_response *res, const char *rid, int code)
{
        struct api_error err;

        if (code != TG_EBUSY && store_error_transient(code))
                return reply_store_down(res, rid, code);
        switch (code) {
        case TG_EBUSY:
                api_error_set(&err, 503, "store_busy", NULL,
                              "the store is busy, try again shortly");
                err.retryable = true;
                break;
        case TG_ENOTFOUND:
                api_error_set(&err, 404, "not_found", NULL, "no such operation");
                break;
        case TG_ECONFLICT:
                api_conflict_error(&err);
                break;
        default:
                api_error_set(&err, 500, "internal", NULL, "internal error");
                err.retryable = true;
                break;
        }
        return api_reply_error(res, rid, &err);
}

int api_reply_method_not_allowed(struct http_response *res, const char *rid, const char *allow)
{
        int r = api_reply_code(res, rid, 405, "method_not_allowed", NULL,
                               "this method is not allowed here");
        if (r == 0)
                http_response_add_header(res, "Allow", allow);
        return r;
}

int api_int_arg(const struct http_request *req, const char *name, int64_t def, int64_t lo,
                int64_t hi, int64_t *ret)
{
        char buf[32];
        char *end = NULL;
        long long v;
        int r = http_request_arg(req, name, buf, sizeof(buf));

        if (r == TG_ENOTFOUND) {
                *ret = def;
                return 0;
        }
        if (r < 0 || buf[0] < '0' || buf[0] > '9')
                return TG_EINVAL;
        errno = 0;
        v = strtoll(buf, &end, 10);
        if (errno != 0 || *end != '\0' || v < lo || v > hi)
                return TG_EINVAL;
        *ret = (int64_t)v;
        return 0;
}

int api_account_arg(struct api *api, const struct http_request *req, struct http_response *res,
                    const char *rid, char ret_account[TG_ACCOUNT_NAME_MAX + 1])
{
        char name[TG_ACCOUNT_NAME_MAX + 1];
        struct api_error err;
        int r = http_request_arg(req, "account", name, sizeof(name));

        if (r == TG_ENOTFOUND) {
                ret_account[0] = '\0';
                return 0;
        }
        /* too long, badly escaped or not configured: the one refusal */
        if (r < 0 || !config_account_find(&api->cfg, name)) {
                api_unknown_account(&api->cfg, &err);
                r = api_reply_error(res, rid, &err);
                return r < 0 ? r : 1;
        }
        memcpy(ret_account, name, sizeof(name));
        return 0;
}

void api_note_op(struct api *api, const char *operation_id)
{
        snprintf(api->log_op, sizeof(api->log_op), "%s", operation_id);
}

void api_note_trace(struct api *api, const char *traceparent)
{
        struct trace_context tc;

        if (traceparent_parse(traceparent, strnlen(traceparent, TG_TRACEPARENT_MAX + 1), &tc) == 0)
                memcpy(api->log_trace, tc.trace_id, sizeof(api->log_trace));
}

void api_intake_trace(struct api *api, const struct http_request *req,
                      char out[TG_TRACEPARENT_MAX + 1])
{
        const char *h = http_request_header(req, "traceparent");
        struct trace_context tc;

        /* an invalid header is ignored, as the spec says: a new trace */
        if (!h || traceparent_parse(h, strlen(h), &tc) < 0)
                traceparent_new(&api->trace_rng, &tc);
        traceparent_format(&tc, out);
}

/* ---- routes -------------------------------------------------------------------- */

static int post_refund(struct api *api, const struct http_request *req, struct http_response *res,
                       const char *rid)
{
        struct refund_request rr;
        struct op_record op;
        struct api_error err;
        char status_url[32 + TG_OP_ID_MAX];
        bool created = false;
        int r;

        if (req->body_len > api->cfg.api_max_body_bytes)
                return api_reply_code(res, rid, 413, "body_too_large", NULL,
                                      "the request body is too large");
        tg_wall_ms now = api_wall_now();
        if (api_parse_refund(req->body, req->body_len, now, &rr, &err) < 0 ||
            api_refund_account(&api->cfg, &rr, &err) < 0 ||
            api_refund_currency(&api->cfg, &rr, &err) < 0 ||
            api_refund_notify_url(&api->cfg, &rr, &err) < 0)
                return api_reply_error(res, rid, &err); /* nothing stored */
        api_note_op(api, rr.operation_id);
        api_intake_trace(api, req, rr.traceparent);
        snprintf(rr.submitted_by, sizeof(rr.submitted_by), "%s", api_submitter(api));

        /* Admission control applies to NEW work only: an operation already
         * accepted is answered (200/409) whatever the backlog. */
        r = store_get(api->store, rr.operation_id, &op);
        if (r == TG_ENOTFOUND) {
                bool admit = true;
                r = api_admission_check(api, rr.account, res, rid, &admit);
                if (r < 0 || !admit)
                        return r;
        } else if (r < 0) {
                return api_reply_store_error(res, rid, r);
        }

        /* Commit before reply: store_accept() returns after its commit. */
        r = store_accept(api->store, &rr, now, &api->cfg.policy, &created, &op);
        if (r == 0 && !created && !api_may_see(api, &op))
                r = TG_ECONFLICT; /* another credential's: its key, never its state */
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        if (created) {
                /* committed, not answered: the caller sends it again */
                failpoint_hit(api->failpoint, "crash_after_accept", &op);
                api_admission_accepted(api, op.req.account, 1);
                wake_ring(api->doorbell); /* the local exit has work now */
        }
        api_note_trace(api, op.traceparent); /* the stored one: a repeat keeps the first */

        snprintf(status_url, sizeof(status_url), "/v1/refunds/%s", op.req.operation_id);
        r = api_reply_json(res, created ? 202 : 200, api_accepted_json(&op));
        if (r == 0 && created)
                http_response_add_header(res, "Location", status_url);
        return r;
}

json_t *api_accepted_json(const struct op_record *op)
{
        char status_url[32 + TG_OP_ID_MAX];
        struct trace_context tc;
        bool traced = traceparent_parse(op->traceparent,
                                        strnlen(op->traceparent, TG_TRACEPARENT_MAX + 1), &tc) == 0;

        snprintf(status_url, sizeof(status_url), "/v1/refunds/%s", op->req.operation_id);
        return json_pack("{s:s, s:s, s:s, s:I, s:o}", "operation_id", op->req.operation_id, "state",
                         op_state_name(op->state), "status_url", status_url, "deadline_at",
                         (json_int_t)op->deadline_at, "trace_id",
                         traced ? json_string(tc.trace_id) : json_null());
}

void api_conflict_error(struct api_error *err)
{
        api_error_set(err, 409, "idempotency_conflict", "operation_id",
                      "this operation_id was accepted with a different request");
}

static int get_refund(struct api *api, const char *id, struct http_response *res, const char *rid)
{
        struct op_record op;
        json_t *o = NULL;
        int r;

        /* An id that could never have been accepted cannot exist. */
        if (refund_validate_operation_id(id, strlen(id), NULL) < 0)
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such operation");
        api_note_op(api, id);
        r = store_get(api->store, id, &op);
        if (r == 0 && !api_may_see(api, &op))
                r = TG_ENOTFOUND; /* another credential's: not told it exists */
        if (r == 0)
                api_note_trace(api, op.traceparent);
        if (r == 0)
                r = render_op_full(api->store, &op, &o);
        if (r == TG_ENOMEM)
                return r;
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        return api_reply_json(res, 200, o);
}

struct call_list {
        json_t *array;
        unsigned max;
        int64_t last_id;
};

static int add_call(const struct call_record *call, void *userdata)
{
        struct call_list *list = userdata;
        json_t *o;

        if (json_array_size(list->array) >= list->max)
                return 1; /* bound reached: stop the walk */
        o = render_call(call, true);
        if (!o || json_array_append_new(list->array, o) < 0)
                return TG_ENOMEM;
        list->last_id = call->id;
        return 0;
}

static int get_calls(struct api *api, const struct http_request *req, struct http_response *res,
                     const char *rid)
{
        struct call_list list = {0};
        char account[TG_ACCOUNT_NAME_MAX + 1];
        int64_t since = 0, limit = 0;
        int r;

        if (api_int_arg(req, "since", 0, 0, INT64_MAX, &since) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "since",
                                      "must be a call id (an integer >= 0)");
        if (api_int_arg(req, "limit", CALLS_LIMIT_DEF, 1, CALLS_LIMIT_MAX, &limit) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "limit",
                                      "must be an integer in [1, 1000]");
        r = api_account_arg(api, req, res, rid, account);
        if (r != 0)
                return r < 0 ? r : 0;
        list.max = (unsigned)limit;
        list.last_id = since;
        list.array = json_array();
        if (!list.array)
                return TG_ENOMEM;
        r = store_list_account_calls(api->store, account[0] ? account : NULL, since,
                                     (unsigned)limit, add_call, &list);
        if (r < 0) {
                json_decref(list.array);
                if (r == TG_ENOMEM)
                        return r;
                return api_reply_store_error(res, rid, r);
        }
        return api_reply_json(
            res, 200,
            json_pack("{s:o, s:I}", "calls", list.array, "next_since", (json_int_t)list.last_id));
}

static int problem_reply(const struct http_request *req, struct http_response *res, const char *rid)
{
        const char *message = req->problem ? req->problem : "bad request";

        switch (req->problem_status) {
        case 413:
                return api_reply_code(res, rid, 413, "body_too_large", NULL, message);
        case 431:
                return api_reply_code(res, rid, 431, "headers_too_large", NULL, message);
        case 503:
                return api_reply_code(res, rid, 503, "overloaded", NULL, message);
        default:
                return api_reply_code(res, rid, 400, "invalid_request", NULL, message);
        }
}

/* GET /readyz: 503 while the store does not answer (or its file moved
 * away) or while this process is neither the owner of its share with a
 * live loop nor a standby; 200 otherwise. `warnings` lists what the store
 * does not promise on its server (store_unkept). A load balancer or HEALTHCHECK
 * asks this; /healthz stays a liveness check. */
static int get_ready(struct api *api, struct http_response *res, const char *rid)
{
        const char *role = "none", *reason = NULL;
        bool ready = true;
        int r = store_ping(api->store);

        if (api->ready)
                ready = api->ready(api->ready_ctx, &role, &reason);
        if (r < 0) {
                ready = false;
                reason = "store_unreachable";
        }
        (void)rid;
        json_t *o = json_pack("{s:s, s:s}", "status", ready ? "ready" : "not_ready", "role", role);
        if (o && !ready)
                json_object_set_new(o, "reason", json_string(reason ? reason : "unknown"));
        /* a promise the store does not keep (store.allow_missing_triggers
         * accepted it): ready all the same, and said */
        if (o && store_unkept(api->store))
                json_object_set_new(o, "warnings",
                                    json_pack("[{s:s, s:s}]", "code", "store_triggers_missing",
                                              "detail", store_unkept(api->store)));
        r = api_reply_json(res, ready ? 200 : 503, o);
        if (r == 0 && !ready)
                http_response_add_header(res, "Retry-After", "1");
        return r;
}

static int route(struct api *api, const struct http_request *req, struct http_response *res,
                 const char *rid)
{
        static const char refunds[] = "/v1/refunds";
        static const char manual[] = "/v1/manual";
        const char *path = req->path ? req->path : "";
        int r;

        /* "/" and "/ui/" lead to the console (before the problem: the HTTP
         * layer calls "/ui/" an empty segment) */
        if (ui_door(api, req))
                return ui_route(api, req, res, rid);
        if (req->problem_status)
                return problem_reply(req, res, rid);

        if (strcmp(path, "/healthz") == 0) {
                if (!api_is_get(req))
                        return api_reply_method_not_allowed(res, rid, "GET");
                return api_reply_json(res, 200, json_pack("{s:s}", "status", "ok"));
        }
        if (strcmp(path, "/readyz") == 0) {
                if (!api_is_get(req))
                        return api_reply_method_not_allowed(res, rid, "GET");
                return get_ready(api, res, rid);
        }
        if (strcmp(path, "/metrics") == 0) {
                if (api->cfg.api_metrics_need_token) {
                        int a = api_admit_caller(api, req, res, rid);
                        if (a <= 0)
                                return a;
                }
                if (!api_is_get(req))
                        return api_reply_method_not_allowed(res, rid, "GET");
                return api_get_metrics(api, req, res, rid);
        }
        /* The console: its own sign-in (a session cookie), daemon/ui.h. */
        if (ui_path(path))
                return ui_route(api, req, res, rid);
        if (strcmp(path, "/v1") != 0 && strncmp(path, "/v1/", 4) != 0)
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such route");

        /* Signed by the provider, who has no bearer token: the signature is
         * its authentication (checked before anything is read). */
        if (strcmp(path, "/v1/provider-events") == 0) {
                if (strcmp(req->method, "POST") != 0)
                        return api_reply_method_not_allowed(res, rid, "POST");
                return api_post_provider_event(api, req, res, rid);
        }
        if (api_route_of(path) == API_ROUTE_PROVIDER_EVENTS_ACCOUNT) {
                if (strcmp(req->method, "POST") != 0)
                        return api_reply_method_not_allowed(res, rid, "POST");
                return api_post_account_provider_event(
                    api, path + sizeof("/v1/provider-events/") - 1, req, res, rid);
        }

        r = api_admit_caller(api, req, res, rid);
        if (r <= 0)
                return r;
        /* a custom method in Google's AIP-136 style: ':' in the segment */
        if (strcmp(path, "/v1/refunds:batch") == 0) {
                if (strcmp(req->method, "POST") != 0)
                        return api_reply_method_not_allowed(res, rid, "POST");
                return api_post_refunds_batch(api, req, res, rid);
        }
        if (strcmp(path, refunds) == 0) {
                if (strcmp(req->method, "POST") != 0)
                        return api_reply_method_not_allowed(res, rid, "POST");
                return post_refund(api, req, res, rid);
        }
        if (strncmp(path, refunds, sizeof(refunds) - 1) == 0 && path[sizeof(refunds) - 1] == '/') {
                const char *id = path + sizeof(refunds);
                const char *slash = strchr(id, '/');
                if (slash && strcmp(slash, "/cancel") == 0) {
                        char key[TG_OP_ID_MAX + 1];
                        size_t n = (size_t)(slash - id);
                        if (strcmp(req->method, "POST") != 0)
                                return api_reply_method_not_allowed(res, rid, "POST");
                        if (n == 0 || n > TG_OP_ID_MAX ||
                            refund_validate_operation_id(id, n, NULL) < 0)
                                return api_reply_code(res, rid, 404, "not_found", NULL,
                                                      "no such operation");
                        memcpy(key, id, n);
                        key[n] = '\0';
                        return api_post_cancel(api, req, res, rid, key);
                }
                if (slash)
                        return api_reply_code(res, rid, 404, "not_found", NULL, "no such route");
                if (!api_is_get(req))
                        return api_reply_method_not_allowed(res, rid, "GET");
                return get_refund(api, id, res, rid);
        }
        if (strncmp(path, manual, sizeof(manual) - 1) == 0 &&
            (path[sizeof(manual) - 1] == '\0' || path[sizeof(manual) - 1] == '/'))
                return api_route_manual(api, req, res, rid, path + sizeof(manual) - 1);
        if (strcmp(path, "/v1/calls") == 0) {
                if (!api_is_get(req))
                        return api_reply_method_not_allowed(res, rid, "GET");
                return get_calls(api, req, res, rid);
        }
        if (strcmp(path, "/v1/stats") == 0) {
                if (!api_is_get(req))
                        return api_reply_method_not_allowed(res, rid, "GET");
                return api_get_stats(api, req, res, rid);
        }
        if (strcmp(path, "/v1/events") == 0) {
                if (!api_is_get(req))
                        return api_reply_method_not_allowed(res, rid, "GET");
                return api_get_events(api, req, res, rid);
        }
        if (api_route_of(path) == API_ROUTE_EVENT_REDELIVER) {
                if (strcmp(req->method, "POST") != 0)
                        return api_reply_method_not_allowed(res, rid, "POST");
                return api_post_event_redeliver(api, res, rid, path + sizeof("/v1/events/") - 1);
        }
        if (strncmp(path, "/v1/accounts", 12) == 0 && (path[12] == '\0' || path[12] == '/'))
                return api_route_accounts(api, req, res, rid, path + 12);
        return api_reply_code(res, rid, 404, "not_found", NULL, "no such route");
}

/* One JSON line per request. Only our own texts and the validated path:
 * never a header, a query string or a body. */
static void log_request(const struct api *api, const struct http_request *req,
                        const struct http_response *res, const char *rid, tg_mono_ns took)
{
        json_t *f = json_object();
        json_t *v;

        if (!f)
                return;
        json_object_set_new(f, "request_id", json_string(rid));
        /* The wrapper passes only a printable-ASCII path; a refused target
         * (problem_status) is not echoed. */
        v = req->problem_status ? NULL : json_string(req->path ? req->path : "");
        json_object_set_new(f, "path", v ? v : json_null());
        v = json_stringn(req->method, strnlen(req->method, 16));
        json_object_set_new(f, "method", v ? v : json_null());
        json_object_set_new(f, "status", json_integer(res->status));
        json_object_set_new(f, "duration_ms", json_real((double)took / (double)TG_NS_PER_MS));
        if (api->log_op[0])
                json_object_set_new(f, "operation_id", json_string(api->log_op));
        if (api->log_trace[0])
                json_object_set_new(f, "trace_id", json_string(api->log_trace));
        log_emit(res->status >= 500 ? LOG_WARN
                 : res->status < 400 && !req->problem_status && ui_routine_path(req->path)
                     ? LOG_DEBUG
                     : LOG_INFO,
                 "http_request", f);
}

int api_handle(struct api *api, const struct http_request *req, struct http_response *res)
{
        char rid[API_REQUEST_ID_LEN];
        tg_mono_ns t0 = clock_mono_now();
        int r;

        pthread_mutex_lock(&api->lock);
        next_request_id(api, rid);
        api->log_op[0] = '\0';
        api->log_trace[0] = '\0';
        api_refusals_flush(api, api_wall_now(), false);
        r = route(api, req, res, rid);
        if (r == 0 && res->status == 0 && res->hold_ms > 0) {
                /* a long poll waits (api_feed.c): logged and counted when it
                 * is answered */
                pthread_mutex_unlock(&api->lock);
                return 0;
        }
        /* A route refused before it read the operation: its trace is still
         * in the store, and every line of an operation carries it. */
        if (api->log_op[0] && !api->log_trace[0]) {
                struct op_record op;
                if (store_get(api->store, api->log_op, &op) == 0)
                        api_note_trace(api, op.traceparent);
        }
        if (r < 0) {
                /* Out of memory half-way: answer with a fixed body. */
                static const char body[] = "{\"error\":{\"code\":\"internal\",\"message\":"
                                           "\"internal error\",\"field\":null,"
                                           "\"retryable\":true},\"request_id\":null}";
                http_response_release(res);
                http_response_init(res);
                r = http_response_set(res, 500, API_JSON_TYPE, body, sizeof(body) - 1);
                if (r < 0) {
                        pthread_mutex_unlock(&api->lock);
                        return r;
                }
        }
        http_response_add_header(res, "X-Request-Id", rid);
        http_response_add_header(res, "Cache-Control", "no-store");
        log_request(api, req, res, rid, clock_mono_now() - t0);
        if (res->status >= 100 && res->status < API_STATUS_MAX)
                api->counters
                    ->requests[req->problem_status ? API_ROUTE_OTHER : api_route_of(req->path)]
                              [res->status]++;
        pthread_mutex_unlock(&api->lock);
        return 0;
}

/* ---- lifecycle --------------------------------------------------------------------- */

static int on_request(const struct http_request *req, struct http_response *res, void *userdata)
{
        return api_handle(userdata, req, res);
}

static int api_new_ex(const struct tg_config *cfg, const struct store_open_opts *opts,
                      struct api **ret_api)
{
        struct api *api;
        int r;

        if (!cfg || !ret_api)
                return TG_EINVAL;
        /* Secret memory: the copy of the config holds the webhook secret. */
        api = secmem_alloc(sizeof(*api));
        if (!api)
                return TG_ENOMEM;
        api->cfg = *cfg;
        pthread_mutex_init(&api->lock, NULL);
        api->counters = calloc(1, sizeof(*api->counters));
        if (!api->counters) {
                r = TG_ENOMEM;
                goto fail;
        }
        r = api_set_tokens(api, cfg);
        if (r == 0)
                r = failpoint_armed(&api->failpoint);
        if (r < 0)
                goto fail;
        make_id_prefix(api->id_prefix, &api->trace_rng);
        if (cfg->ui_enabled) {
                r = ui_new(cfg, api->need_token, &api->ui);
                if (r < 0)
                        goto fail;
        }
        r = store_open_ex(cfg->store_url, opts, &api->store);
        if (r < 0)
                goto fail;
        *ret_api = api;
        return 0;
fail:
        free(api->counters);
        pthread_mutex_destroy(&api->lock);
        ui_free(api->ui);
        secmem_free(api); /* wipes */
        return r;
}

int api_new(const struct tg_config *cfg, struct api **ret_api)
{
        return api_new_ex(cfg, NULL, ret_api);
}

int api_start(const struct tg_config *cfg, struct api **ret_api)
{
        return api_start_ex(cfg, NULL, 0, ret_api);
}

int api_start_ex(const struct tg_config *cfg, char *err, size_t err_size, struct api **ret_api)
{
        struct store_open_opts opts = {.err = err, .err_size = err_size};
        struct http_server_config hc;
        struct api *api = NULL;
        int r;

        if (err && err_size)
                err[0] = '\0';
        if (!cfg || !ret_api)
                return TG_EINVAL;
        if (cfg->api_listen_port < 0 || cfg->api_listen_port > 65535)
                return TG_EINVAL;
        r = api_new_ex(cfg, &opts, &api);
        if (r < 0)
                return r;
        memset(&hc, 0, sizeof(hc));
        hc.host = api->cfg.api_listen_host;
        hc.port = (uint16_t)cfg->api_listen_port;
        hc.max_connections = cfg->api_max_connections;
        hc.connection_timeout_s = cfg->api_connection_timeout_s;
        hc.request_read_timeout_ms = cfg->api_request_read_timeout_ms;
        hc.max_body_bytes = cfg->api_max_body_bytes;
        /* the batch route alone reads up to its own, larger bound */
        hc.large_body_path = "/v1/refunds:batch";
        hc.large_body_bytes = cfg->api_max_batch_bytes;
        hc.max_header_bytes = 0; /* MHD's 32 KiB per connection */
        r = http_server_start(&hc, on_request, api, &api->server);
        if (r < 0) {
                /* the store opened: this one is the listening socket's */
                if (err && err_size)
                        snprintf(err, err_size, "cannot start the API on %s:%d: %s",
                                 cfg->api_listen_host, cfg->api_listen_port, tg_strerror(r));
                api_stop(api);
                return r;
        }
        *ret_api = api;
        return 0;
}

void api_set_doorbell(struct api *api, struct wake *doorbell)
{
        if (api)
                api->doorbell = doorbell;
}

void api_set_standby_flag(struct api *api, const volatile sig_atomic_t *standby)
{
        if (api)
                api->standby = standby;
}

void api_set_readiness(struct api *api, api_ready_fn fn, void *ctx)
{
        if (!api)
                return;
        api->ready = fn;
        api->ready_ctx = ctx;
}

void api_reload(struct api *api, const struct tg_config *next)
{
        struct tg_config *c;

        if (!api || !next)
                return;
        pthread_mutex_lock(&api->lock);
        c = &api->cfg;
        if (api_set_tokens(api, next) == 0) {
                memcpy(c->api_token, next->api_token, sizeof(c->api_token));
                memcpy(c->api_tokens, next->api_tokens, sizeof(c->api_tokens));
                c->api_token_count = next->api_token_count;
                memcpy(c->api_token_file, next->api_token_file, sizeof(c->api_token_file));
        }
        /* credentials issued, rotated or revoked: in force from the next request */
        memcpy(c->api_credentials_file, next->api_credentials_file,
               sizeof(c->api_credentials_file));
        memcpy(c->api_credentials, next->api_credentials, sizeof(c->api_credentials));
        c->api_credential_count = next->api_credential_count;
        api->need_token = api->token_count > 0 || c->api_credentials_file[0] != '\0';
        memcpy(c->provider_webhook_secret, next->provider_webhook_secret,
               sizeof(c->provider_webhook_secret));
        memcpy(c->provider_webhook_secret_file, next->provider_webhook_secret_file,
               sizeof(c->provider_webhook_secret_file));
        c->admission = next->admission;
        c->api_metrics_need_token = next->api_metrics_need_token;
        c->stats_series_minutes = next->stats_series_minutes;
        c->retention_keep_ms = next->retention_keep_ms;
        c->retention_prune_batch = next->retention_prune_batch;
        c->manual_approval_above = next->manual_approval_above;
        memcpy(c->log_level, next->log_level, sizeof(c->log_level));
        api_admission_forget(api); /* new thresholds: measure again */
        pthread_mutex_unlock(&api->lock);
}

void api_count_reload(struct api *api, const char *result)
{
        int i = strcmp(result, "applied") == 0 ? 0 : strcmp(result, "refused") == 0 ? 1 : 2;

        if (!api)
                return;
        pthread_mutex_lock(&api->lock);
        api->counters->reloads[i]++;
        pthread_mutex_unlock(&api->lock);
}

uint16_t api_port(const struct api *api)
{
        return api ? http_server_port(api->server) : 0;
}

void api_stop(struct api *api)
{
        if (!api)
                return;
        /* The server thread is joined before the store it uses is closed. */
        http_server_stop(api->server);
        api_refusals_flush(api, api_wall_now(), true);
        ui_free(api->ui);
        store_close(api->store);
        free(api->counters);
        pthread_mutex_destroy(&api->lock);
        secmem_free(api); /* wipes */
}
