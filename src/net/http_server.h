/*
 * http_server — a small libmicrohttpd wrapper with no tollgate logic in it.
 * One internal polling thread accepts connections and runs the handler;
 * the handler sees one complete request (method, raw path, raw query, the
 * headers, the whole body) and fills one response.
 *
 * Invariants:
 *   - a request body is never buffered past max_body_bytes (or
 *     large_body_bytes for large_body_path): a larger
 *     Content-Length is refused before the body is read, and a chunked body
 *     that grows past the bound is discarded as it arrives; either way the
 *     handler is then called with req->problem_status = 413 and no body;
 *   - the path is given raw (not percent-decoded), so "%2F" can never turn
 *     into a separator (':' is an ordinary character, as RFC 3986 allows
 *     in a segment: "/v1/refunds:batch"); a request target that is not origin-form printable
 *     ASCII, or has empty or dot segments ("//", "/./", "/../"), reaches the
 *     handler with problem_status = 400 instead;
 *   - header size is bounded by max_header_bytes (MHD's per-connection
 *     memory), the number of connections by max_connections, idle time by
 *     connection_timeout_s, and the time a request takes to arrive (its
 *     head and its body) by request_read_timeout_ms: counted from the
 *     moment the connection was ready for it (accepted, or its previous
 *     answer sent), a request not read whole by then has its connection
 *     shut down. The idle timeout alone is reset by every byte, so a client
 *     that drips a header line a second would hold a connection for ever,
 *     and enough of them every connection;
 *   - a NUL byte inside a header value (which a C string would hide, and a
 *     compare would stop at) reaches the handler as a space, as RFC 9110
 *     5.5 allows: the value keeps its whole length; an obsolete folded
 *     header line is a 400;
 *   - the handler runs only on the server's thread, one request at a time;
 *     a request it holds (a long poll, http_response.hold_ms) waits in a
 *     suspended connection, never in a thread, and is bounded like any
 *     connection by max_connections.
 * MHD types and codes never leave this module.
 */
#ifndef TG_HTTP_SERVER_H
#define TG_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_server;

struct http_header {
        const char *name;
        const char *value;
};

/* One request, borrowed by the handler for the duration of the call. */
struct http_request {
        const char *method; /* "GET", "POST", ... as sent */
        const char *path;   /* raw, starts with '/' unless problem_status is set */
        const char *query;  /* raw, without '?'; "" when absent */
        const struct http_header *headers;
        size_t header_count;
        const char *body; /* body_len bytes (may contain NUL), NUL-terminated after them */
        size_t body_len;
        /* 0, or the status the wrapper would answer with (400 bad request
         * target, 413 body too large, 431 too many headers) together with a
         * static one-line reason. The handler answers it; body is empty. */
        int problem_status;
        const char *problem;
        /* 0 on a request's first call; after the handler held it
         * (http_response.hold_ms), how long ago it first did, in ms */
        int64_t held_ms;
};

/* The value of the first header with this name (case-insensitive), or NULL. */
const char *http_request_header(const struct http_request *req, const char *name);

/* The value of the header with this name when it was sent exactly once: a
 * credential must be read one way only (with two, one reader could take
 * the first and another the last). 0; TG_ENOTFOUND (absent); TG_ECONFLICT
 * (sent more than once). *ret_value is set on 0. */
int http_request_header_once(const struct http_request *req, const char *name,
                             const char **ret_value);

/* Finds query argument `name` in req->query and percent-decodes it ('+' is a
 * space) into buf[size]. 0; TG_ENOTFOUND; TG_EFULL (does not fit);
 * TG_EPARSE (bad escape, or it decodes to a NUL byte). buf is untouched on
 * failure. */
int http_request_arg(const struct http_request *req, const char *name, char *buf, size_t size);

#define HTTP_RESPONSE_MAX_HEADERS 10

/* What the handler answers. Lives on the wrapper's stack; members may be set
 * directly or with the helpers below. body is malloc()ed and owned by the
 * response. */
struct http_response {
        int status;
        char content_type[64];
        char *body;
        size_t body_len;
        unsigned header_count;
        struct {
                char name[64];
                char value[256];
        } headers[HTTP_RESPONSE_MAX_HEADERS];
        /* A long poll: the handler leaves status 0 and sets hold_ms (> 0) to
         * answer later. The wrapper then suspends the connection (no thread
         * waits on it) and calls the handler again for the same request
         * after hold_ms, or sooner after http_server_wake(), with held_ms
         * set; the handler answers then or holds again. Headers and body of
         * a held call are dropped. A request held when the server stops is
         * answered 503 by the wrapper. */
        unsigned hold_ms;
};

void http_response_init(struct http_response *res);
/* Frees the body; the response may be reused after http_response_init(). */
void http_response_release(struct http_response *res);
/* Sets status, content type and a copy of body[len]. 0, TG_ENOMEM, TG_EINVAL. */
int http_response_set(struct http_response *res, int status, const char *content_type,
                      const char *body, size_t len);
/* Like http_response_set() but takes ownership of a malloc()ed body (also
 * on failure, when it is freed). */
int http_response_take(struct http_response *res, int status, const char *content_type, char *body,
                       size_t len);
/* Adds a header. TG_EFULL past HTTP_RESPONSE_MAX_HEADERS, TG_EINVAL for a
 * name or value that does not fit or holds CR, LF or other control bytes. */
int http_response_add_header(struct http_response *res, const char *name, const char *value);

/* Fills *res for the request. Returns 0, or a negative code: the wrapper then
 * answers 500 with a fixed JSON body. Never called after http_server_stop()
 * returns. */
typedef int (*http_handler_fn)(const struct http_request *req, struct http_response *res,
                               void *userdata);

struct http_server_config {
        const char *host; /* numeric IPv4/IPv6 address or a resolvable name */
        uint16_t port;    /* 0: any free port, see http_server_port() */
        unsigned max_connections;
        unsigned connection_timeout_s;
        size_t max_body_bytes;
        /* one path (exact, the query ignored; under 64 bytes) whose body
         * bound is large_body_bytes instead, e.g. a batch route; NULL: none.
         * Copied: need not outlive the call. */
        const char *large_body_path;
        size_t large_body_bytes;
        size_t max_header_bytes; /* per-connection memory for the request head; 0 = 32 KiB */
        /* a whole request (head and body) must arrive within this long of
         * the connection being ready for it; 0: no such deadline */
        unsigned request_read_timeout_ms;
};

/* Binds and starts the server thread. Returns 0, TG_EINVAL (bad config or
 * host), TG_EIO (cannot bind/start), TG_ENOMEM. *ret_server is owned by the
 * caller: http_server_stop(). handler and userdata must outlive the server. */
int http_server_start(const struct http_server_config *config, http_handler_fn handler,
                      void *userdata, struct http_server **ret_server);

/* The port actually bound. */
uint16_t http_server_port(const struct http_server *server);

/* Connections shut down so far because a request did not arrive whole
 * within request_read_timeout_ms (slow or stalled clients). */
uint64_t http_server_read_timeouts(struct http_server *server);

/* Calls the handler again, soon, for every request it holds (something it
 * waits for may have happened). Safe from any thread. Accepts NULL. */
void http_server_wake(struct http_server *server);

/* Requests held now. */
unsigned http_server_held(struct http_server *server);

/* Stops accepting, closes every connection, joins the thread, frees. Accepts
 * NULL. */
void http_server_stop(struct http_server *server);

#endif
