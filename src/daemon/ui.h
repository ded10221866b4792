/*
 * ui — the console, served by `tollgate serve` and `tollgate api` at /ui
 * on the API's listener (docs/operating.md, "The console"):
 *
 *   GET  /ui                     the app for a signed-in person, else the
 *                                sign-in page
 *   GET  /ui/assets/NAME         its scripts, styles and uPlot (compiled in)
 *   POST /ui/api/login           {"token"} -> session cookie + {"user","role","csrf"}
 *   POST /ui/api/logout
 *   GET  /ui/api/session         {"user","role","csrf","expires_at"}
 *   GET  /ui/api/live?since=MS   the newest timeline points and the exit's status
 *   GET  /ui/api/timeline?from=MS&to=MS    any stored window
 *   GET  /ui/api/ops?state=S&after=ID      operations by state
 *   GET  /ui/api/ops/ID          one operation, its calls and audit trail
 *   GET  /ui/api/manual?reason=R&after=C   the manual-review queue
 *   POST /ui/api/ops/ID/resend   {"note"}            operator only
 *   POST /ui/api/ops/ID/resolve  {"outcome","note"}  operator only
 *   POST /ui/api/ops/ID/approve               operator only: carries out
 *                                another operator's request (four-eyes,
 *                                manual.approval_above); a resend or resolve
 *                                at or above it is only a request (202)
 *
 * Security (the invariants): every route under /ui/api but login needs a
 * live session (401); every POST needs Content-Type application/json, a
 * same-origin Origin when one is sent, and every POST but login the
 * session's CSRF token in X-CSRF-Token (403); resend and resolve need the
 * operator role (403) and go through store_operator_resend/resolve with the
 * signed-in user's name, so the audit row names who acted; every /ui answer
 * carries a Content-Security-Policy that allows scripts and styles from the
 * daemon only (no inline script), and no-store.
 */
#ifndef TG_UI_H
#define TG_UI_H

#include <stdbool.h>

#include "daemon/config.h"
#include "net/http_server.h"

struct api;
struct ui;

/* 0 or TG_ENOMEM. Free with ui_free() (accepts NULL). */
int ui_new(const struct tg_config *cfg, bool have_api_token, struct ui **ret_ui);
void ui_free(struct ui *ui);

/* True for "/ui" and everything under "/ui/". */
bool ui_path(const char *path);

/* True for a GET or HEAD of a door a person types for the console: "/ui/"
 * (which the HTTP layer hands over as a 400, an empty segment) and "/",
 * the latter only when the console is on and built. ui_route() answers
 * both with a redirect to /ui, so a browser there never sees a JSON error;
 * any other method keeps the answer it had. */
bool ui_door(const struct api *api, const struct http_request *req);

/* The console's routine reads (the live poll, its files): logged at debug
 * level, since every open dashboard makes one a second. */
bool ui_routine_path(const char *path);

/* Answers one request under /ui (the api's handler calls it). */
int ui_route(struct api *api, const struct http_request *req, struct http_response *res,
             const char *rid);

#endif
