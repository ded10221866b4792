/*
 * api — tollgate's intake and admin HTTP API (shared/INTERFACE.md) on top of
 * http_server and the store. The api opens its OWN struct store, used only
 * from the HTTP server's thread (or, for tests, from the thread that calls
 * api_handle()), so it shares no connection with the dispatcher.
 *
 * Routes now: GET /healthz; POST /v1/refunds; GET /v1/refunds/{operation_id};
 * GET /v1/calls?since=ID&limit=N. Everything under /v1 needs
 * "Authorization: Bearer <token>" when a token is configured (compared in
 * constant time). Every error body is
 *   {"error":{"code","message","field","retryable"},"request_id"}
 * and never carries SQL, a stack trace or a provider body. Every answer
 * carries an X-Request-Id header with the same id.
 *
 * Durability: POST /v1/refunds answers 202 only after store_accept()
 * committed; on any error nothing is stored.
 */
#ifndef TG_API_H
#define TG_API_H

#include <stdint.h>

#include "app/config.h"
#include "net/http_server.h"

struct api;

/* Opens the store of cfg->store_url and prepares the routes, without a
 * server: for tests that drive api_handle() directly. cfg is copied.
 * 0 or a store_open()/TG_ENOMEM code. Free with api_stop(). */
int api_new(const struct tg_config *cfg, struct api **ret_api);

/* api_new() plus the HTTP server on cfg->api_listen_host:port. 0, or the
 * code of the failing step (TG_EIO: cannot bind). */
int api_start(const struct tg_config *cfg, struct api **ret_api);

/* The bound port (0 without a server). */
uint16_t api_port(const struct api *api);

/* Stops the server (joining its thread), closes the store, frees. Accepts
 * NULL. */
void api_stop(struct api *api);

/* Answers one request: the server's handler, callable directly by tests.
 * Always fills *res (an error status is an answer); returns 0, or TG_ENOMEM
 * when not even an error body could be built. */
int api_handle(struct api *api, const struct http_request *req, struct http_response *res);

#endif
