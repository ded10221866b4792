/*
 * transport — the HTTP boundary of the exit (libcurl multi). It starts a call
 * the moment it is asked to, and only then: it has no queue of its own and it
 * never re-sends. libcurl would otherwise hide two things:
 *   - a request sent on a reused keep-alive connection that turns out dead is
 *     silently re-sent on a new one (POST included). We prevent it twice:
 *     every call uses a fresh connection that is closed after it
 *     (FRESH_CONNECT + FORBID_REUSE, unless reuse is configured), and a
 *     pre-request hook refuses a second send of one handle;
 *   - transfers past a connection limit wait in libcurl's own queue (and that
 *     wait eats the timeout). Connection limits are set to "unlimited": the
 *     caller's pacer is the only gate.
 * Whether any byte may have left (the pre-request hook fired) decides
 * "not sent" (retryable) versus "unknown" for failed calls — with one
 * exception, below.
 *
 * What a call says comes from the provider mapping (core/provider_map.h):
 * the POST's path and body (JSON or a form) and the query's path are made
 * from the operation's fields, and the reply is read where the reply map
 * says. Headers are built in one place (build_headers): the idempotency
 * key, the request id, the attempt, the content type, the credentials and,
 * when configured, the signature.
 *
 * TLS: an https:// provider is always verified, its certificate chain
 * against provider.ca_file (or the system store) and its host name; there is
 * no switch that turns it off. A client certificate is presented when
 * configured. A handshake that fails is "not sent" and says why
 * (transport_failure). With TLS 1.3 a provider that refuses OUR certificate
 * says so after our request has been written (the client finishes the
 * handshake first); its TLS layer never completed the handshake, so nothing
 * reached its HTTP server: a fatal certificate alert received before any
 * response byte on a connection opened for this call is "not sent" too.
 *
 * Credentials (the API key, the signing key, the client certificate and
 * key) are given separately (transport_set_credentials) and may be replaced
 * while calls are open: a call keeps the ones it started with. They live in
 * secret memory (platform/secmem.h).
 *
 * Pull model: transport_poll() waits for I/O, transport_next_done() hands
 * back finished calls one at a time. No callbacks into the caller.
 */
#ifndef TG_TRANSPORT_H
#define TG_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/classify.h"
#include "core/operation.h"
#include "core/provider_map.h"
#include "core/template.h"
#include "core/tg_time.h"
#include "net/provider_request.h"

struct transport;

enum transport_auth {
        TRANSPORT_AUTH_NONE,
        TRANSPORT_AUTH_BEARER, /* Authorization: Bearer <secret> */
        TRANSPORT_AUTH_HEADER, /* <auth_header>: <secret> */
        /* OAuth 2.0 client credentials: a token call (transport_call.token)
         * POSTs grant_type=client_credentials to token_path with
         * Authorization: Basic base64(client_id:secret); the access token
         * its answer carries is kept by the lane (secret memory, never
         * handed out) and every other call carries Authorization: Bearer
         * <it>. Until a token call succeeded, other calls are refused. */
        TRANSPORT_AUTH_OAUTH2,
};

struct transport_config {
        const char *base_url;                  /* http://127.0.0.1:9090, https://... */
        const struct request_map *request_map; /* NULL: PROVIDER.md's; copied */
        const struct reply_map *reply_map;     /* NULL: PROVIDER.md's; copied */
        const char *key_header;                /* Idempotency-Key */
        const char *request_id_header;         /* X-Request-Id */
        const char *attempt_header;            /* X-Attempt */
        int64_t connect_timeout_ms;            /* TCP connect and TLS handshake */
        size_t max_response_bytes;
        unsigned max_open;      /* hard bound on open calls (>= the exit's max_in_flight) */
        bool reuse_connections; /* keep-alive allowed (the second-send guard still holds) */
        /* With reuse: the provider's keep-alive timeout, ms; a connection is
         * reused only while idle for less than this minus a margin
         * (transport_pool.c). 0: learned from its Keep-Alive header. */
        int64_t keepalive_idle_ms;
        const char *ca_file; /* NULL or "": the system's CA store */
        /* headers on every call, "Name: value" lines joined by '\n' (NULL or
         * "": none), already checked by the caller; copied */
        const char *fixed_headers;
        enum transport_auth auth;
        const char *auth_header; /* TRANSPORT_AUTH_HEADER's header name */
        const char *token_path;  /* TRANSPORT_AUTH_OAUTH2's token endpoint, on base_url */
        /* Signing: when signing_string is not NULL, every call carries
         * timestamp_header (Unix seconds) and signature_header (prefix + the
         * HMAC-SHA256 of the expanded signing string, hex or base64). */
        const struct template *signing_string; /* copied */
        const char *signature_header;
        const char *timestamp_header;
        const char *signature_prefix;
        enum signature_encoding signature_encoding;
};

/* Copies what it needs from config: a transport of one lane (lane 0).
 * 0, TG_EINVAL, TG_ENOMEM. Caller owns
 * *ret_transport: transport_free() (which aborts open calls). A transport
 * configured for credentials refuses to start calls until
 * transport_set_credentials() gave them. */
int transport_new(const struct transport_config *config, struct transport **ret_transport);
void transport_free(struct transport *transport);

/* Several provider accounts through one transport: lane i (a call's
 * `lane`) has configs[i]'s provider, mapping, credentials and its own bound
 * on open calls (configs[i].max_open), so that no account's calls can take
 * another's room; the lanes share one libcurl multi handle, one poll, the
 * rings of reports and one keep-alive pool (a connection two accounts at one
 * host may share is tracked once: the pool's idle life is the shortest any
 * reusing lane configured). 1..TRANSPORT_LANES_MAX lanes; otherwise as
 * transport_new(). */
#define TRANSPORT_LANES_MAX 1024 /* daemon/exit.h EXIT_MAX */
int transport_new_lanes(const struct transport_config *configs, unsigned n,
                        struct transport **ret_transport);

/* The secrets, borrowed for the call only (copied into secret memory). */
struct transport_credentials {
        const char *auth_secret; /* for auth != none (oauth2: the client secret) */
        const char *client_id;   /* for oauth2 */
        const unsigned char *signing_key;
        size_t signing_key_len;      /* for a signing transport */
        const char *client_cert_pem; /* NULL: no client certificate */
        size_t client_cert_len;
        const char *client_key_pem;
        size_t client_key_len;
};

/* Calls started from now on use these; open calls keep theirs. 0,
 * TG_EINVAL (something the config needs is missing, or a cert without its
 * key), TG_ENOMEM. */
int transport_set_credentials(struct transport *transport,
                              const struct transport_credentials *credentials);
/* The same for one lane (TG_EINVAL: no such lane); transport_set_credentials
 * is lane 0's. */
int transport_set_lane_credentials(struct transport *transport, unsigned lane,
                                   const struct transport_credentials *credentials);

struct transport_call {
        enum classify_request request;       /* CLASSIFY_POST or CLASSIFY_QUERY */
        const char *operation_id;            /* the idempotency key, validated */
        const struct refund_request *refund; /* its fields (POST: required) */
        const char *refund_id;               /* the provider's, "" or NULL if unknown */
        /* A list query (strategy `list`): the cursor of the page it asks
         * for (request_map_list_cursor); "" or NULL: the first page */
        const char *list_cursor;
        const char *request_id;
        unsigned attempt;
        int64_t timeout_ms;      /* whole call: DNS, connect, TLS handshake, send, wait, read */
        uint64_t cookie;         /* returned with the result */
        const char *traceparent; /* sent as the W3C traceparent header; NULL/"": none */
        /* The request does not go on the wire before this monotonic time:
         * the connection is made at once, and the pre-request hook holds the
         * request until then (0: no hold). The caller hands a call over a
         * little ahead of its slot so that the connect is done by then. */
        tg_mono_ns not_before;
        /* Shares: the request may not go on the wire after this monotonic
         * time either (its window on the account's grid closes); a
         * connection ready later sends nothing and the call ends not sent,
         * TRANSPORT_LATE (0: no limit). */
        tg_mono_ns not_after;
        unsigned lane; /* the account's lane (transport_new_lanes); 0 with one */
        /* An OAuth 2.0 token call (TRANSPORT_AUTH_OAUTH2 lanes): the POST to
         * token_path; request_id and timeout_ms and the timing fields count,
         * the operation's fields are not read (operation_id may be ""). */
        bool token;
};

/* Hands the request to libcurl now. Strings are copied. 0, TG_EFULL (its
 * lane's max_open calls already open), TG_EINVAL (a call the mapping cannot make, or no
 * credentials yet), TG_ENOMEM, TG_ETRANSPORT. */
int transport_start(struct transport *transport, const struct transport_call *call);

/* Drives I/O, waiting at most timeout_ms for activity on the calls or for
 * one of the n descriptors wake_fds (-1: none) to become readable. A mask
 * with bit i set for each wake_fds[i] readable (the caller drains it; 0:
 * none), or TG_ETRANSPORT. */
#define TRANSPORT_WAKE_MAX 2
int transport_poll(struct transport *transport, int timeout_ms, const int *wake_fds, unsigned n);

/* Why a call did not get a complete answer. */
enum transport_failure {
        TRANSPORT_OK,              /* a complete response */
        TRANSPORT_DNS,             /* the host name did not resolve */
        TRANSPORT_REFUSED,         /* the connection was refused (or unreachable) */
        TRANSPORT_CONNECT_TIMEOUT, /* no TCP connection in time */
        TRANSPORT_TLS_TIMEOUT,     /* connected, no TLS handshake in time */
        TRANSPORT_TLS_VERIFY,      /* the provider's certificate: unknown CA, expired, wrong host */
        TRANSPORT_TLS_CLIENT_CERT, /* our client certificate: missing, refused or unusable */
        TRANSPORT_TLS_HANDSHAKE,   /* any other TLS failure */
        TRANSPORT_TIMEOUT,         /* sent, no full answer in time */
        TRANSPORT_RESET,           /* sent, the connection ended before a full answer */
        TRANSPORT_OTHER,
        TRANSPORT_LATE, /* connected after not_after: nothing sent, the call may go again */
};
#define TRANSPORT_FAILURE_COUNT 12

/* "ok", "dns", "refused", "connect_timeout", "tls_timeout", "tls_verify",
 * "tls_client_certificate", "tls_handshake", "timeout", "reset", "other", "late". */
const char *transport_failure_name(enum transport_failure failure);

/* Room for the Retry-After values of one answer: a provider may send more
 * than one header; each is kept whole, one per line (RETRY_AFTER_VALUE_MAX
 * bytes at most each, a few of them). */
#define TRANSPORT_RETRY_AFTER_MAX 256

struct transport_result {
        uint64_t cookie;
        struct provider_reply reply; /* transport, http_status, parsed body fields */
        /* the raw Retry-After values, one per line in the order received
         * ("" if none): retry_after_parse_all() reads them */
        char retry_after[TRANSPORT_RETRY_AFTER_MAX];
        bool sent;               /* the request may have reached the provider */
        tg_mono_ns handoff_mono; /* when transport_start() took it */
        tg_mono_ns ready_mono;   /* connection ready: the hook fired (0 if never) */
        tg_mono_ns sent_mono;    /* when the request went on the wire (0 if not sent) */
        /* by when it had surely left: the end of the libcurl step in which
         * the hook let it go (libcurl builds and writes the request after
         * the hook returns; a preemption there delays it); 0 if not sent */
        tg_mono_ns sent_end_mono;
        int64_t latency_us;       /* from transport_start to completion */
        bool second_send_refused; /* libcurl tried to send this call twice */
        enum transport_failure failure;
        char error[256]; /* libcurl's (and OpenSSL's) words, "" on success */
        /* A token call: whether its answer gave a token (now the lane's:
         * calls started from now on carry it), and its lifetime in seconds
         * as the answer said (expires_in). */
        bool token;
        bool token_ok;
        int64_t token_expires_s;
};

/* Pops one finished call. 0 (filled), TG_ENOTFOUND (none finished). */
int transport_next_done(struct transport *transport, struct transport_result *ret_result);

/* A call whose request went on the wire (or never will), reported as soon
 * as it is known, before the call ends. */
struct transport_sent {
        uint64_t cookie;
        bool sent;                /* false: it ended before any byte left */
        bool late;                /* not sent: ready after its not_after (TRANSPORT_LATE) */
        tg_mono_ns ready_mono;    /* the connection was ready (0 if never) */
        tg_mono_ns sent_mono;     /* the request went out (0 if not sent) */
        tg_mono_ns sent_end_mono; /* by when it had surely left (transport_result) */
};

/* Pops one such report, in the order they happened. 0 (filled) or
 * TG_ENOTFOUND. Every started call gives exactly one. */
int transport_next_sent(struct transport *transport, struct transport_sent *ret_sent);

/* Calls started and not yet popped: every lane's, and one lane's (0: no
 * such lane). */
unsigned transport_open(const struct transport *transport);
unsigned transport_lane_open(const struct transport *transport, unsigned lane);

/* Parses an HTTP-date with curl_getdate (for retry_after_parse). 0 or
 * TG_EPARSE. */
int transport_http_date(const char *text, int64_t *ret_epoch_s);

#endif
