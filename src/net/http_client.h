/*
 * http_client — one blocking HTTP request with libcurl's easy interface, for
 * the operator commands (to tollgate's API) and the tools (to processes they
 * started on loopback). It is NOT the exit's transport (net/transport.h):
 * nothing here paces, classifies or records calls to the provider.
 *
 * Every request uses a fresh easy handle and a fresh connection that is
 * closed after it (FRESH_CONNECT, FORBID_REUSE), so libcurl never re-sends
 * a request on a dead keep-alive connection: what a tool counts as sent is
 * what was sent. Redirects are not followed; only http and https are spoken.
 * The response body goes to a caller's buffer of a fixed size (a bigger
 * answer is an error, never a silent cut). Nothing here logs.
 */
#ifndef TG_HTTP_CLIENT_H
#define TG_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

struct http_client_request {
        const char *method;         /* "GET", "POST", ... */
        const char *url;            /* http:// or https:// */
        const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
        const char *body;           /* sent as is (strlen bytes), or NULL for none */
        long timeout_ms;            /* the whole request; <= 0: no limit at all */
        char *resp;                 /* receives the body, NUL-terminated; NULL: discarded */
        size_t resp_size;           /* room in resp, the NUL included */
        const char *capture_header; /* a response header to keep ("Retry-After"), or NULL */
};

struct http_client_result {
        long status;       /* the HTTP status, 0 when no answer came */
        double elapsed_ms; /* on the monotonic clock */
        bool timed_out;    /* timeout_ms passed before the answer */
        bool no_answer;    /* the connection closed without (a whole) answer */
        char header[64];   /* capture_header's value (cut to fit), "" if absent */
        char error[128];   /* libcurl's words on failure, "" on success */
};

/*
 * Makes the request and waits for it. Strings are copied or used only
 * during the call. Returns 0 on an answer (whatever its status),
 * TG_ETRANSPORT (no answer: refused, reset, timed out; see the result),
 * TG_EFULL (the body did not fit in resp_size - 1 bytes; the transfer was
 * cut), TG_EINVAL (no method or url) or TG_ENOMEM. *ret_result is filled
 * for 0, TG_ETRANSPORT and TG_EFULL, untouched otherwise.
 */
int http_client_request(const struct http_client_request *req,
                        struct http_client_result *ret_result);

#endif
