/*
 * transport_int — private to the transport's files (net/transport.h says
 * what the transport does): the transport and one call as all of them see
 * them, and what they call of each other. Nothing else includes it.
 *   transport.c         the transport: life cycle, credentials, starting a
 *                       call, the multi loop, the pre-request hook and the
 *                       reports of what was sent;
 *   transport_call.c    one call's easy handle: URL, body, every header
 *                       (credentials and signature included), the TLS
 *                       options and the watch on the handshake, and the
 *                       callbacks that keep the response (bounded);
 *   transport_result.c  what an ended call says: sent or not, its cause,
 *                       the reply read through the reply map.
 *
 * Invariants: a struct call is in t->calls from transport_start() until
 * its result is made, and is touched by the loop's thread only; its creds
 * and watch are references it holds (released with it).
 */
#ifndef TG_TRANSPORT_INT_H
#define TG_TRANSPORT_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/provider_reply.h"
#include "net/transport.h"

#define HEADER_LINE_MAX 1024
#define URL_MAX         4096

/* A set of credentials in secret memory, shared by reference. */
struct creds {
        unsigned refs;
        char *auth_line; /* the whole header line, or NULL */
        unsigned char *signing_key;
        size_t signing_key_len;
        char *cert, *key; /* PEM, or NULL */
        size_t cert_len, key_len;
};

/* What OpenSSL told us about one connection's handshake, shared by the
 * call that opened it and the connection's SSL_CTX (which may outlive the
 * call when connections are reused). */
struct tls_watch {
        unsigned refs;
        int alert; /* the first fatal alert received, -1 none */
};

struct call {
        CURL *easy;
        char keep_alive[64]; /* the answer's Keep-Alive header, "": none */
        struct curl_slist *headers;
        char *body;
        size_t body_len;
        char *resp;
        size_t resp_len, resp_cap;
        bool too_big;
        bool got_response; /* a byte of a response (its status line) arrived */
        char retry_after[TRANSPORT_RETRY_AFTER_MAX];
        char content_type[128];                     /* "": none */
        char captured[PROVIDER_REPLY_HEADERS][128]; /* the reply map's header sources */
        uint64_t cookie;
        enum classify_request request;
        char list_match[160]; /* a list query: our operation id, matched in its items */
        char list_known[128]; /* and the refund id an answer told us ("": none) */
        bool token;           /* an OAuth 2.0 token call */
        unsigned prereq_count;
        bool second_send;
        bool late;       /* ready after not_after: refused in the hook, nothing sent */
        bool reported;   /* its transport_sent report is queued */
        bool report_due; /* the hook decided: reported after the libcurl step */
        tg_mono_ns started, ready_mono, sent_mono, sent_end, not_before, not_after;
        size_t max_response;
        struct creds *creds;
        struct tls_watch *watch;
        struct transport *t;               /* the pre-request hook's report, the pool */
        const struct transport_lane *lane; /* its account's settings */
        char errbuf[CURL_ERROR_SIZE];
        struct call *prev, *next; /* the transport's list of open calls */
};

/* One provider account's settings (a lane): where its calls go, what they
 * say, its credentials and its own bound on open calls. A transport has
 * one lane per account it serves; its calls share one multi handle, one
 * poll and one connection pool. */
struct transport_lane {
        char *base_url;
        char *key_header, *request_id_header, *attempt_header;
        char *ca_file;       /* NULL: the system store */
        char *fixed_headers; /* "Name: value" lines joined by '\n'; "" none */
        int64_t connect_timeout_ms;
        size_t max_response_bytes;
        unsigned max_open; /* this lane's bound on open calls */
        unsigned open;     /* this lane's calls started and not yet popped */
        bool reuse;
        struct request_map *request_map;
        struct reply_map *reply_map;
        /* the names of the headers the reply map reads */
        unsigned ncapture;
        const char *capture[PROVIDER_REPLY_HEADERS];
        enum transport_auth auth;
        char *auth_header;
        char *token_path; /* oauth2: the token endpoint's path on base_url */
        /* oauth2: "Authorization: Bearer <access token>" in secret memory
         * (NULL until a token call succeeded); copied into a call's header
         * list when it starts, so replacing it never touches an open call */
        char *token_line;
        bool sign;
        struct template signing_string;
        char *signature_header, *timestamp_header, *signature_prefix;
        enum signature_encoding signature_encoding;
        struct creds *creds; /* the current set; NULL until given */
};

struct transport {
        CURLM *multi;
        struct transport_lane *lanes;
        unsigned nlanes;
        unsigned max_open;  /* the lanes' bounds added up */
        bool reuse;         /* some lane reuses connections (the pool is kept) */
        struct call *calls; /* in libcurl's hands now */
        unsigned open;      /* started and not yet popped, every lane */
        /* finished results waiting to be popped: a ring of max_open entries,
         * each with its lane (whose open count the pop lowers) */
        struct transport_result *done;
        unsigned *done_lane;
        unsigned done_head, done_count;
        /* sent reports waiting to be popped: a ring of 2 * max_open entries
         * (one per call, popped every turn) */
        struct transport_sent *sent;
        unsigned sent_head, sent_count;
        /* keep-alive hygiene (transport_pool.c), with reuse only: one pool
         * for every lane (two accounts at one host may share a connection) */
        struct pool_sock *pool;
        unsigned pool_len, pool_cap;
        int64_t pool_life_ms;    /* configured idle timeout, the shortest of the lanes', 0: none */
        int64_t pool_learned_ms; /* the shortest Keep-Alive timeout seen, -1: none */
        uint64_t pool_evicted;   /* idle connections shut before their safe life ran out */
};

/* One socket libcurl opened for the transport. */
struct pool_sock {
        curl_socket_t fd;
        int port;  /* its local port, 0 until known */
        bool idle; /* in libcurl's cache, since idle_since */
        bool shut; /* shut down here: libcurl will drop it */
        tg_mono_ns idle_since;
};

/* transport_call.c: fills c's handle and header list for call (c->easy
 * made, c->creds set): 0, TG_EINVAL (a path, URL or body that cannot be
 * made, a header line too long), TG_ENOMEM. The pre-request hook and the
 * debug callback are the caller's to set. */
int transport_call_setup(const struct transport_lane *lane, struct call *c,
                         const struct transport_call *call);
/* transport_call.c: the process-wide index under which a TLS context
 * keeps its watch (once, before any call), and a watch's reference
 * dropped (accepts NULL). */
void transport_watch_init(void);
void transport_watch_release(struct tls_watch *w);

/* transport_pool.c: keep-alive hygiene (see there). init: 0 or TG_ENOMEM;
 * release after the multi handle is gone (its connections close through
 * the pool). setup: a call's handle opens and closes its sockets through
 * the pool. busy: the pre-request hook's connection (its local port) is in
 * use. idle: a call ended; its connection, if libcurl kept it, is idle from
 * now; keep_alive_ms is the answer's Keep-Alive timeout (-1: none). sweep:
 * before a call starts, every connection idle past its safe life is shut. */
int transport_pool_init(struct transport *t, int64_t idle_life_ms);
void transport_pool_release(struct transport *t);
void transport_pool_setup(struct transport *t, CURL *easy);
void transport_pool_busy(struct transport *t, int local_port);
void transport_pool_idle(struct transport *t, CURL *easy, int64_t keep_alive_ms, tg_mono_ns now);
void transport_pool_sweep(struct transport *t, tg_mono_ns now);
/* The idle time past which a connection is not reused, ms; -1: no limit of ours. */
int64_t transport_pool_safe_life_ms(const struct transport *t);

/* transport_result.c */
void transport_call_result(const struct transport_lane *lane, const struct call *c, CURLcode code,
                           struct transport_result *ret_result);

#endif
