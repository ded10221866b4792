/*
 * api — tollgate's intake and admin HTTP API (shared/INTERFACE.md) on top of
 * http_server and the store. The api opens its OWN struct store, used only
 * from the HTTP server's thread (or, for tests, from the thread that calls
 * api_handle()), so it shares no connection with the dispatcher.
 *
 * Routes: GET /healthz (liveness: the process answers); GET /readyz
 * (readiness: 200 when the store answers and this process is the owner or a
 * healthy standby, else 503 saying why); GET /metrics; POST /v1/refunds (with admission
 * control); POST /v1/refunds:batch (up to 500, api_batch.c); GET /v1/refunds/{operation_id}; GET /v1/calls?since=ID&limit=N;
 * GET /v1/stats?minutes=N; GET /v1/manual, GET /v1/manual/{id}, POST
 * /v1/manual/{id}/resend, /resolve, /assign and /approve (four-eyes); POST
 * /v1/provider-events (signed).
 * Everything under /v1 but the signed provider events needs
 * "Authorization: Bearer <token>" when a token or api.credentials_file is
 * configured (compared in constant time), and with credentials the scope
 * the route needs (api_auth.c's table; 403 otherwise); /metrics needs it when api.metrics_need_token is set. Every error body is
 *   {"error":{"code","message","field","retryable"},"request_id"}
 * and never carries SQL, a stack trace or a provider body. Every answer
 * carries an X-Request-Id header with the same id.
 *
 * Durability: POST /v1/refunds answers 202 only after store_accept()
 * committed, a batch only after store_accept_batch() did; on any error
 * nothing is stored.
 */
#ifndef TG_API_H
#define TG_API_H

#include <signal.h>
#include <stdint.h>

#include "daemon/config.h"
#include "net/http_server.h"

struct api;

/* Opens the store of cfg->store_url and prepares the routes, without a
 * server: for tests that drive api_handle() directly. cfg is copied.
 * 0 or a store_open()/TG_ENOMEM code. Free with api_stop(). */
int api_new(const struct tg_config *cfg, struct api **ret_api);

/* api_new() plus the HTTP server on cfg->api_listen_host:port. 0, or the
 * code of the failing step (TG_EIO: cannot bind). */
int api_start(const struct tg_config *cfg, struct api **ret_api);
/* The same, saying in err (may be NULL) what failed: a store that cannot
 * be opened (the file, or MariaDB's host, port, database and reason), or
 * the address the API cannot listen on ("cannot start the API on H:P: ...").
 * err is "" for anything else (out of memory, the token files). */
int api_start_ex(const struct tg_config *cfg, char *err, size_t err_size, struct api **ret_api);

/* serve: the local dispatcher's standby flag (1 while it waits behind
 * another owner), for the role in /metrics. Must outlive the api. Set before
 * requests arrive; NULL (the default) means no local dispatcher. */
void api_set_standby_flag(struct api *api, const volatile sig_atomic_t *standby);

/* serve/dispatch: whether this process is ready beyond its store (the
 * owner of its share with a live loop, or a standby), for GET /readyz. fn
 * runs on the API's thread; it says the role ("owner", "standby",
 * "starting", "none") and, when not ready, why. NULL (the default): ready
 * whenever the store answers (an API process). Set before requests arrive. */
typedef bool (*api_ready_fn)(void *ctx, const char **ret_role, const char **ret_reason);
void api_set_readiness(struct api *api, api_ready_fn fn, void *ctx);

/* A SIGHUP reload (from another thread): takes from `next` what the API can
 * change live — the tokens of api.token_file, the webhook secret, the
 * admission thresholds, api.metrics_need_token, stats.series_minutes —
 * between two requests (a request in progress finishes under the old
 * values). Everything else of `next` is ignored: the caller refused it. */
void api_reload(struct api *api, const struct tg_config *next);

/* Reload outcomes for /metrics (tollgate_config_reloads_total{result}):
 * "applied", "refused" (some keys kept their running value), "failed" (the
 * file did not load). */
void api_count_reload(struct api *api, const char *result);

/* The bound port (0 without a server). */
struct wake;

/* serve: the local dispatcher's doorbell, rung after every new refund and
 * operator re-send is committed (borrowed; NULL: none). Before requests. */
void api_set_doorbell(struct api *api, struct wake *doorbell);

uint16_t api_port(const struct api *api);

/* Stops the server (joining its thread), closes the store, frees. Accepts
 * NULL. */
void api_stop(struct api *api);

/* Answers one request: the server's handler, callable directly by tests.
 * Always fills *res (an error status is an answer); returns 0, or TG_ENOMEM
 * when not even an error body could be built. */
int api_handle(struct api *api, const struct http_request *req, struct http_response *res);

#endif
