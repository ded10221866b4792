/*
 * api_int — private to the api*.c files: the api struct and the helpers the
 * route files share. Nothing outside src/daemon/api*.c includes it.
 *
 * The route files: api.c (lifecycle, routing, intake, calls, the request
 * log), api_auth.c (tokens, credentials, the route x scope table), api_batch.c (POST /v1/refunds:batch), api_manual.c (manual review), api_metrics.c (/metrics and
 * /v1/stats), api_events.c (signed provider events), api_admission.c
 * (admission control before intake, and the refusals it counts); the
 * console's ui*.c (daemon/ui.h) include it too.
 */
#ifndef TG_API_INT_H
#define TG_API_INT_H

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/admission.h"
#include "core/names.h"
#include "core/rng.h"
#include "daemon/api.h"
#include "daemon/api_parse.h"
#include "daemon/credentials.h"
#include "store/store.h"

#define API_DIGEST_LEN     32
#define API_REQUEST_ID_LEN 40
#define API_JSON_TYPE      "application/json"

/* One account's admission figures of the last window, re-read at most
 * once a second. */
struct api_admission_cache {
        char account[TG_ACCOUNT_NAME_MAX + 1]; /* whose figures */
        tg_wall_ms read_at;                    /* 0: never */
        struct admission_figures fig;
        bool owner_fresh; /* a dispatcher wrote a sample lately */
        bool held;
        uint64_t accepted_since; /* refunds this process accepted since read_at */
};

/* Routes as /metrics names them (a template, never a raw path). */
enum api_route {
        API_ROUTE_HEALTHZ,
        API_ROUTE_READYZ,
        API_ROUTE_METRICS,
        API_ROUTE_REFUNDS,
        API_ROUTE_REFUNDS_BATCH,
        API_ROUTE_REFUND,
        API_ROUTE_REFUND_CANCEL,
        API_ROUTE_CALLS,
        API_ROUTE_STATS,
        API_ROUTE_MANUAL,
        API_ROUTE_MANUAL_ONE,
        API_ROUTE_MANUAL_RESEND,
        API_ROUTE_MANUAL_RESOLVE,
        API_ROUTE_MANUAL_ASSIGN,
        API_ROUTE_MANUAL_APPROVE,
        API_ROUTE_PROVIDER_EVENTS,
        API_ROUTE_PROVIDER_EVENTS_ACCOUNT,
        API_ROUTE_EVENTS,
        API_ROUTE_EVENT_REDELIVER,
        API_ROUTE_ACCOUNTS,
        API_ROUTE_ACCOUNT,
        API_ROUTE_ACCOUNT_AUDIT,
        API_ROUTE_OTHER,
        API_ROUTE_COUNT
};
const char *api_route_name(enum api_route route);
enum api_route api_route_of(const char *path);

#define API_STATUS_MAX 600 /* HTTP status codes counted: 100..599 */

/* Why a request was refused for who sent it: 401 for the first three (no
 * or a bad credential), 403 for the rest. */
enum api_auth_failure {
        API_AUTH_MISSING,           /* no Authorization header */
        API_AUTH_MALFORMED,         /* not one header, a NUL inside, not the Bearer scheme */
        API_AUTH_WRONG,             /* a well-formed token that is none of ours */
        API_AUTH_REVOKED,           /* a credential marked revoked */
        API_AUTH_MISSING_SCOPE,     /* a credential without the route's scope */
        API_AUTH_OPERATOR_MISMATCH, /* a body `operator` that is not the credential */
        API_AUTH_SELF_APPROVAL,     /* four-eyes: the requester approving its own */
};
#define API_AUTH_FAILURE_COUNT 7
/* "missing", "malformed", "wrong", "revoked", "missing_scope",
 * "operator_mismatch", "self_approval" */
const char *api_auth_failure_name(enum api_auth_failure why);

/* The scopes a route needs, any one of them (enum credential_scope bits);
 * 0 for a route that needs no credential (open, or signed by the
 * provider). The one route x scope table, in api.c, which the router reads. */
unsigned api_route_scopes(enum api_route route);
/* The route's method ("GET", "POST"), for the docs and the tests. */
const char *api_route_method(enum api_route route);

/* Who sent the current request (set by authentication, for one request). */
struct api_principal {
        char name[CREDENTIAL_NAME_MAX + 1]; /* "" without api.credentials_file */
        unsigned scopes;                    /* enum credential_scope bits */
        /* api.credentials_file is in force: the audit names this principal,
         * never a name from a body */
        bool named;
        /* authenticated by a credential of api.credentials_file (not a
         * token of api.token_file): what it submits is its own */
        bool credential;
};

/* The owner the current request's refunds are stored with (op
 * submitted_by): the credential's name, or "" (a token of api.token_file,
 * no token on loopback: no owner, as before). Valid for the request. */
const char *api_submitter(const struct api *api);

/* Whether the current request may see op: a caller with a scope beyond
 * intake (read, operator, admin) sees every operation; an intake-only
 * credential sees those it submitted and those without an owner. A route
 * answers 404 not_found for one it may not see (its existence is not
 * told either). */
bool api_may_see(const struct api *api, const struct op_record *op);
/* The same rule as a filter of the events' feed: NULL (every event) or
 * the name whose refunds' (and the unowned ones') events the caller may
 * read. Valid for the request. */
const char *api_seen_owner(const struct api *api);

/* The name an action of the current request is audited under: with
 * credentials in force, the principal's, and a body `operator` (given:
 * not "") that names anyone else is refused (403 operator_mismatch,
 * counted); without them, as before, the body's name, else fallback.
 * 0 and *ret_name (valid for the request); 1 when res holds the refusal;
 * TG_ENOMEM. */
int api_actor(struct api *api, const char *body_name, const char *fallback, const char **ret_name,
              struct http_response *res, const char *rid);
/* api_auth.c: the digests of every token of cfg (api.token_file may hold
 * several: rotation) and whether any credential is needed. 0 or TG_EINVAL. */
int api_set_tokens(struct api *api, const struct tg_config *cfg);
/* Authentication, then the scope the route of req needs: 1 to go on, 0
 * when res holds the refusal (401 or 403), or a negative code. */
int api_admit_caller(struct api *api, const struct http_request *req, struct http_response *res,
                     const char *rid);
/* A 403 refusal for who sent the request, counted by its reason. */
int api_reply_forbidden(struct api *api, struct http_response *res, const char *rid,
                        enum api_auth_failure why, const char *code, const char *message);

/* What this API process counts for /metrics (since it started). Touched on
 * the API's thread only, but for reload outcomes (under the api's lock). */
struct api_counters {
        uint64_t requests[API_ROUTE_COUNT][API_STATUS_MAX];
        uint64_t admission_refused[2]; /* [0] max_wait, [1] max_backlog */
        uint64_t reloads[3];           /* applied, refused, failed */
        uint64_t auth_failures[API_AUTH_FAILURE_COUNT];
};

struct api {
        struct tg_config cfg;
        struct store *store;
        struct http_server *server;
        bool need_token;
        /* who sent the request being answered */
        struct api_principal who;
        /* every token of api.token_file (rotation), as SHA-256 digests */
        unsigned char token_digests[TG_API_TOKENS_MAX][API_DIGEST_LEN];
        unsigned token_count;
        char id_prefix[17];
        uint64_t counter;
        /* serve: the local dispatcher's standby flag (NULL: api alone) */
        const volatile sig_atomic_t *standby;
        /* serve: rung when work for the local dispatcher arrives (NULL: none) */
        struct wake *doorbell;
        /* each account's, in the config's order (api_admission.c) */
        struct api_admission_cache adm[TG_ACCOUNTS_MAX];
        /* the operation the current request is about, for its log line */
        char log_op[TG_OP_ID_MAX + 1];
        /* and its trace id (W3C), when known */
        char log_trace[TG_TRACE_ID_MAX + 1];
        /* draws the trace ids of refunds that arrive without a traceparent
         * (seeded from /dev/urandom at start; not a secret) */
        struct tg_rng trace_rng;
        /* held for one request by api_handle() and by api_reload(): a reload
         * lands between two requests */
        pthread_mutex_t lock;
        api_ready_fn ready;
        void *ready_ctx;
        struct api_counters *counters; /* heap: it is large */
        /* the console (NULL: ui.enabled = false) */
        struct ui *ui;
        /* admission refusals not yet in the store: `refused` of the second
         * starting at refused_second; written at most about once a second */
        tg_wall_ms refused_second, refused_flushed_at;
        unsigned refused;
        /* TG_FAILPOINT for tests (daemon/failpoint.h), NULL: none */
        const char *failpoint;
};

tg_wall_ms api_wall_now(void);
bool api_is_get(const struct http_request *req);
/* Takes ownership of root (NULL: TG_ENOMEM); sets a JSON answer. */
int api_reply_json(struct http_response *res, int status, json_t *root);
int api_reply_error(struct http_response *res, const char *rid, const struct api_error *err);
int api_reply_code(struct http_response *res, const char *rid, int status, const char *code,
                   const char *field, const char *message);
/* 400 invalid_parameter for `field`: "must be one of a, b or c", the words
 * of the vocabulary (core/names.h). */
int api_reply_not_one_of(struct http_response *res, const char *rid, const char *field,
                         enum tg_vocabulary vocabulary);
/* The answer to a store failure; never the store's own text. */
int api_reply_store_error(struct http_response *res, const char *rid, int code);
int api_reply_method_not_allowed(struct http_response *res, const char *rid, const char *allow);
/* A non-negative integer query argument in [lo, hi]; def when absent. 0 or
 * TG_EINVAL. */
int api_int_arg(const struct http_request *req, const char *name, int64_t def, int64_t lo,
                int64_t hi, int64_t *ret);
/* The ?account= of a read route (/v1/stats, /v1/manual, /v1/calls): 0
 * with ret_account the configured account it names, or "" when none is
 * named; 1 when res holds the refusal (api_unknown_account()'s 422, for a
 * name that is not configured or not a name); a negative code. */
int api_account_arg(struct api *api, const struct http_request *req, struct http_response *res,
                    const char *rid, char ret_account[TG_ACCOUNT_NAME_MAX + 1]);
/* Remembers the operation a request is about (for its log line). */
void api_note_op(struct api *api, const char *operation_id);
/* Remembers its trace (a stored traceparent; "" is nothing), for the same
 * line: every log line of an operation carries its trace id. */
void api_note_trace(struct api *api, const char *traceparent);
/* The traceparent a new refund belongs to: the request's traceparent
 * header when it is a valid W3C one, else a new trace started here. */
void api_intake_trace(struct api *api, const struct http_request *req,
                      char out[TG_TRACEPARENT_MAX + 1]);

/* The answer object of an accepted or repeated refund: operation_id,
 * state, status_url, deadline_at, trace_id (of its stored traceparent). A
 * new reference, NULL when out of memory. */
json_t *api_accepted_json(const struct op_record *op);
/* The error of a refund whose operation_id was accepted with another
 * request (409 idempotency_conflict). */
void api_conflict_error(struct api_error *err);

/* api_batch.c: POST /v1/refunds:batch */
int api_post_refunds_batch(struct api *api, const struct http_request *req,
                           struct http_response *res, const char *rid);

/* api_cancel.c: POST /v1/refunds/{id}/cancel (id validated by the caller) */
int api_post_cancel(struct api *api, const struct http_request *req, struct http_response *res,
                    const char *rid, const char *id);

/* api_manual.c: everything under /v1/manual; rest is the path after it. */
int api_route_manual(struct api *api, const struct http_request *req, struct http_response *res,
                     const char *rid, const char *rest);
/* The answer to a refused re-send, resolve, request or approval (409
 * not_manual, key_past_retention, approval_pending; the store's). */
int api_reply_action_refused(struct http_response *res, const char *rid, int code);
/* Four-eyes (manual.approval_above), for the API and the console: 1 when a
 * re-send or resolve of operation id needs a second operator's approval, 0
 * when not, or a store code. */
int api_needs_approval(struct api *api, const char *id);
/* Records who's request (audited) and answers 202 with the operation and
 * its "approval" {"status": "requested", ...}, or the refusal. */
int api_request_approval(struct api *api, const char *id, const char *who, const char *reason,
                         bool resolve, enum op_state outcome, struct http_response *res,
                         const char *rid);
/* who approves the pending request of id: carried out (202 a re-send, 200
 * a resolve, with "approval" {"status": "approved", ...}), or 409
 * no_pending_approval, 403 self_approval (counted). */
int api_approve_as(struct api *api, const char *id, const char *who, struct http_response *res,
                   const char *rid);
/* api_metrics.c */
int api_get_metrics(struct api *api, const struct http_request *req, struct http_response *res,
                    const char *rid);
int api_get_stats(struct api *api, const struct http_request *req, struct http_response *res,
                  const char *rid);
/* api_events.c: POST /v1/provider-events (authenticated by its signature) */
/* api_accounts.c: everything under /v1/accounts; rest is the path after it. */
int api_route_accounts(struct api *api, const struct http_request *req, struct http_response *res,
                       const char *rid, const char *rest);
/* GET /v1/accounts: {"accounts": [...]}, each account_ctl_json(). */
int api_get_accounts(struct api *api, struct http_response *res, const char *rid);
/* POST /v1/accounts/{name}: the body's change to the account's controls,
 * audited as principal's (NULL: the credential's, or the body's operator
 * without credentials, as api_actor() says). The console calls it with
 * its signed-in user. */
int api_change_account_as(struct api *api, const struct http_request *req, const char *name,
                          const char *principal, struct http_response *res, const char *rid);
/* GET /v1/events (api_feed.c). */
int api_get_events(struct api *api, const struct http_request *req, struct http_response *res,
                   const char *rid);
/* POST /v1/events/{id}/redeliver (api_feed.c); id_text is the path's
 * segment, unchecked. */
int api_post_event_redeliver(struct api *api, struct http_response *res, const char *rid,
                             const char *id_text);
/* An event made due again, audited as `principal` (the API's credential, the
 * console's user): 200 with the event as it is now, or 404. */
int api_redeliver_as(struct api *api, int64_t id, const char *principal, struct http_response *res,
                     const char *rid);
/* The id of an event from a path segment (digits only, 1..INT64_MAX): 0 or
 * TG_EINVAL. */
int api_event_id(const char *text, size_t len, int64_t *ret_id);
/* A provider's webhook: the config it is read with (its secret, signature
 * scheme, mapping and [classify]) and the account whose route it is
 * (POST /v1/provider-events/{account}); account NULL: the top level's route
 * (POST /v1/provider-events). */
struct api_webhook {
        const struct tg_config *cfg;
        const char *account;
};
/* Does hook settle an operation of `account`? An account's route only its
 * own; the top level's route every operation when there is one account,
 * else those whose account takes its webhook (the secret's file and the
 * scheme) from the top level: an account with a webhook of its own is
 * settled only through its route, by its own secret. */
bool api_webhook_serves(const struct api *api, const struct api_webhook *hook, const char *account);
/* The log line of an event ignored as another account's. */
void api_webhook_ignored_other(const char *rid, const struct api_webhook *hook, const char *op_id,
                               const char *account);
/* POST /v1/provider-events in Adyen's scheme (api_events_adyen.c). */
int api_post_adyen_notification(struct api *api, const struct api_webhook *hook,
                                const struct http_request *req, struct http_response *res,
                                const char *rid);
int api_post_provider_event(struct api *api, const struct http_request *req,
                            struct http_response *res, const char *rid);
/* POST /v1/provider-events/{account}: the account's own webhook (its view's
 * provider.webhook_* keys); 404 for an account that is not configured or
 * has no webhook secret. */
int api_post_account_provider_event(struct api *api, const char *name,
                                    const struct http_request *req, struct http_response *res,
                                    const char *rid);
/* api_admission.c: the decision for `count` new refunds of `account` (a
 * configured one) at once (a batch: the last of them waits behind the
 * others), measured now on that account's own backlog and drain rate; count
 * 0 or admission disabled admits. A store failure while measuring admits
 * (see below). 0 or TG_ENOMEM. */
struct api_admission {
        struct api_admission_cache fig;
        struct admission_decision d;
};
int api_admission_decide(struct api *api, const char *account, uint64_t count,
                         struct api_admission *ret);
/* The refusal of a decision that did not admit: counted, logged, and the
 * 503 over_capacity answer with its Retry-After in res (check_back names
 * the account's /v1/stats when several are configured). */
int api_admission_refuse(struct api *api, const struct api_admission *a, struct http_response *res,
                         const char *rid);
/* One refund of account: 0 and *ret_admit = true to go on; false: res
 * holds the 503 answer. A store failure while measuring admits (the
 * store's own error will then show at accept, or the refund is accepted:
 * never lost). */
int api_admission_check(struct api *api, const char *account, struct http_response *res,
                        const char *rid, bool *ret_admit);
/* n refunds of account were accepted since its figures were read: counted
 * into its backlog until the next read. */
void api_admission_accepted(struct api *api, const char *account, uint64_t n);
/* Every account's figures are read again at their next use (a reload). */
void api_admission_forget(struct api *api);
/* Writes the refusals counted so far to the store when their second is over
 * or a second has passed since the last write (always with force). */
void api_refusals_flush(struct api *api, tg_wall_ms now, bool force);
/* The figures admission and /v1/stats share for a configured account
 * (cached for a second); TG_EINVAL for one not configured. */
int api_admission_figures(struct api *api, const char *account, tg_wall_ms now,
                          struct api_admission_cache *ret);
/* The same figures for an open backlog the caller already has (the console:
 * from the newest sample), without counting the store's operations and
 * without touching the cache above. */
int api_admission_figures_for(struct api *api, const char *account, tg_wall_ms now,
                              uint64_t backlog, struct api_admission_cache *ret);

#endif
