/*
 * notify_http — the event deliveries' own HTTP client: POSTs of a JSON body
 * to the caller's endpoint over a libcurl multi handle of its own. It is NOT
 * the exit's transport (net/transport.h) and shares nothing with it — no
 * handle, no connection, no pacer — so that a slow or dead receiver never
 * delays a provider call. Nothing here logs.
 *
 * Each delivery is one easy handle on a fresh connection closed after it,
 * redirects not followed, http and https only, bounded by its timeout; the
 * answer's body is read and dropped (only its status counts).
 */
#ifndef TG_NOTIFY_HTTP_H
#define TG_NOTIFY_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct notify_http;

/* At most `max` deliveries open at once. 0, TG_EINVAL, TG_ENOMEM,
 * TG_ETRANSPORT. */
int notify_http_new(unsigned max, struct notify_http **ret_http);
/* Aborts what is open. Accepts NULL. */
void notify_http_free(struct notify_http *h);

/* Starts a POST of body (copied) with the NULL-terminated header lines
 * ("Name: value", copied) to url, whole timeout timeout_ms; `cookie` comes
 * back with its end. 0, TG_EFULL (max open), TG_EINVAL, TG_ENOMEM. */
int notify_http_start(struct notify_http *h, const char *url, const char *body,
                      const char *const *headers, long timeout_ms, int64_t cookie);

/* Runs the transfers, waiting for I/O at most wait_ms. 0 or TG_ETRANSPORT. */
int notify_http_poll(struct notify_http *h, int wait_ms);

/* One ended delivery, if any: 0 with its cookie, its HTTP status (0: no
 * answer) and, without an answer, libcurl's words in err[err_size];
 * TG_ENOTFOUND when none ended. */
int notify_http_next_done(struct notify_http *h, int64_t *ret_cookie, long *ret_status, char *err,
                          size_t err_size);

/* Deliveries open now. */
unsigned notify_http_open(const struct notify_http *h);

#endif
