/*
 * transport — libcurl multi interface at the exit's HTTP boundary.
 *
 * Invariants:
 *   - a call starts when transport_start() is called, never later: no
 *     libcurl connection limit can park it (limits are unlimited, the
 *     caller's pacer is the gate) and open calls are bounded by max_open;
 *   - a call is sent at most once: fresh connection per call unless reuse is
 *     configured, and the pre-request hook aborts any second send of a handle
 *     (libcurl's silent re-send on a dead reused connection);
 *   - no redirects, no proxies from the environment, no Expect: 100-continue,
 *     no signals; response bodies are bounded;
 *   - TLS peers are verified (chain and host name), always;
 *   - credentials live in secret memory, shared by reference count between
 *     the transport (the current set) and each call that started with them;
 *     a header line that carried a secret is wiped before it is freed.
 */
#include "net/transport.h"

#include <curl/curl.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/encode.h"
#include "core/retry_after.h"
#include "core/tg_error.h"
#include "net/provider_reply.h"
#include "platform/clock.h"
#include "platform/secmem.h"

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
        unsigned prereq_count;
        bool second_send;
        bool late;       /* ready after not_after: refused in the hook, nothing sent */
        bool reported;   /* its transport_sent report is queued */
        bool report_due; /* the hook decided: reported after the libcurl step */
        tg_mono_ns started, ready_mono, sent_mono, sent_end, not_before, not_after;
        size_t max_response;
        struct creds *creds;
        struct tls_watch *watch;
        struct transport *t; /* its settings, and the pre-request hook's report */
        char errbuf[CURL_ERROR_SIZE];
        struct call *prev, *next; /* the transport's list of open calls */
};

struct transport {
        CURLM *multi;
        char *base_url;
        char *key_header, *request_id_header, *attempt_header;
        char *ca_file; /* NULL: the system store */
        int64_t connect_timeout_ms;
        size_t max_response_bytes;
        unsigned max_open;
        bool reuse;
        struct request_map *request_map;
        struct reply_map *reply_map;
        /* the names of the headers the reply map reads */
        unsigned ncapture;
        const char *capture[PROVIDER_REPLY_HEADERS];
        enum transport_auth auth;
        char *auth_header;
        bool sign;
        struct template signing_string;
        char *signature_header, *timestamp_header, *signature_prefix;
        enum signature_encoding signature_encoding;
        struct creds *creds; /* the current set; NULL until given */
        struct call *calls;  /* in libcurl's hands now */
        unsigned open;       /* started and not yet popped */
        /* finished results waiting to be popped: a ring of max_open entries */
        struct transport_result *done;
        unsigned done_head, done_count;
        /* sent reports waiting to be popped: a ring of 2 * max_open entries
         * (one per call, popped every turn) */
        struct transport_sent *sent;
        unsigned sent_head, sent_count;
};

static const char *const failure_names[TRANSPORT_FAILURE_COUNT] = {
    [TRANSPORT_OK] = "ok",
    [TRANSPORT_DNS] = "dns",
    [TRANSPORT_REFUSED] = "refused",
    [TRANSPORT_CONNECT_TIMEOUT] = "connect_timeout",
    [TRANSPORT_TLS_TIMEOUT] = "tls_timeout",
    [TRANSPORT_TLS_VERIFY] = "tls_verify",
    [TRANSPORT_TLS_CLIENT_CERT] = "tls_client_certificate",
    [TRANSPORT_TLS_HANDSHAKE] = "tls_handshake",
    [TRANSPORT_TIMEOUT] = "timeout",
    [TRANSPORT_RESET] = "reset",
    [TRANSPORT_OTHER] = "other",
    [TRANSPORT_LATE] = "late",
};

const char *transport_failure_name(enum transport_failure f)
{
        if ((unsigned)f >= TRANSPORT_FAILURE_COUNT)
                return "other";
        return failure_names[f];
}

/* ---- process-wide setup ---------------------------------------------------- */

static int watch_index = -1;

static void watch_release(struct tls_watch *w)
{
        if (w && --w->refs == 0)
                free(w);
}

/* OpenSSL frees an SSL_CTX (its connection is gone): drop its reference. */
static void watch_ex_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                          void *argp)
{
        (void)parent;
        (void)ad;
        (void)idx;
        (void)argl;
        (void)argp;
        watch_release(ptr);
}

static int global_init_once(void)
{
        static int inited;
        if (!inited) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return TG_ETRANSPORT;
                watch_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, watch_ex_free);
                inited = 1;
        }
        return 0;
}

/* ---- credentials -------------------------------------------------------------- */

static void creds_release(struct creds *c)
{
        if (c && --c->refs == 0)
                secmem_free(c);
}

/* One secret block: the struct, then the auth line, the key, the PEM
 * texts. */
static int creds_make(const struct transport *t, const struct transport_credentials *in,
                      struct creds **ret)
{
        char line[HEADER_LINE_MAX];
        size_t line_len = 0, size;
        struct creds *c;
        unsigned char *p;
        int n;

        if ((t->auth != TRANSPORT_AUTH_NONE && (!in->auth_secret || !in->auth_secret[0])) ||
            (t->sign && (!in->signing_key || in->signing_key_len == 0)) ||
            (!in->client_cert_pem != !in->client_key_pem))
                return TG_EINVAL;
        if (t->auth == TRANSPORT_AUTH_BEARER)
                n = snprintf(line, sizeof(line), "Authorization: Bearer %s", in->auth_secret);
        else if (t->auth == TRANSPORT_AUTH_HEADER)
                n = snprintf(line, sizeof(line), "%s: %s", t->auth_header, in->auth_secret);
        else
                n = 0;
        if (n < 0 || (size_t)n >= sizeof(line)) {
                explicit_bzero(line, sizeof(line));
                return TG_EINVAL;
        }
        line_len = (size_t)n;
        size = sizeof(*c) + line_len + 1 + (t->sign ? in->signing_key_len : 0) +
               (in->client_cert_pem ? in->client_cert_len + in->client_key_len + 2 : 0);
        c = secmem_alloc(size);
        if (!c) {
                explicit_bzero(line, sizeof(line));
                return TG_ENOMEM;
        }
        p = (unsigned char *)(c + 1);
        c->refs = 1;
        if (line_len > 0) {
                c->auth_line = (char *)p;
                memcpy(p, line, line_len + 1);
                p += line_len + 1;
        }
        explicit_bzero(line, sizeof(line));
        if (t->sign) {
                c->signing_key = p;
                c->signing_key_len = in->signing_key_len;
                memcpy(p, in->signing_key, in->signing_key_len);
                p += in->signing_key_len;
        }
        if (in->client_cert_pem) {
                c->cert = (char *)p;
                c->cert_len = in->client_cert_len;
                memcpy(p, in->client_cert_pem, in->client_cert_len);
                p += in->client_cert_len + 1;
                c->key = (char *)p;
                c->key_len = in->client_key_len;
                memcpy(p, in->client_key_pem, in->client_key_len);
        }
        *ret = c;
        return 0;
}

int transport_set_credentials(struct transport *t, const struct transport_credentials *in)
{
        struct creds *c = NULL;
        int r;

        if (!t || !in)
                return TG_EINVAL;
        r = creds_make(t, in, &c);
        if (r < 0)
                return r;
        creds_release(t->creds);
        t->creds = c;
        return 0;
}

/* ---- life cycle ------------------------------------------------------------------ */

static char *dup_or_default(const char *s, const char *def)
{
        return strdup(s && *s ? s : def);
}

/* Remembers a header name the reply map reads. */
static void want_headers(struct transport *t, const struct field_source *s)
{
        for (unsigned i = 0; i < s->n; i++) {
                bool have = false;
                if (!s->alt[i].header)
                        continue;
                for (unsigned k = 0; k < t->ncapture; k++)
                        have = have || strcasecmp(t->capture[k], s->alt[i].header_name) == 0;
                if (!have && t->ncapture < PROVIDER_REPLY_HEADERS)
                        t->capture[t->ncapture++] = s->alt[i].header_name;
        }
}

int transport_new(const struct transport_config *config, struct transport **ret_transport)
{
        if (!config || !config->base_url || !*config->base_url || config->max_open == 0 ||
            config->max_response_bytes == 0)
                return TG_EINVAL;
        if (config->auth == TRANSPORT_AUTH_HEADER &&
            (!config->auth_header || !*config->auth_header))
                return TG_EINVAL;
        int r = global_init_once();
        if (r < 0)
                return r;
        struct transport *t = calloc(1, sizeof(*t));
        if (!t)
                return TG_ENOMEM;
        t->base_url = strdup(config->base_url);
        t->key_header = dup_or_default(config->key_header, "Idempotency-Key");
        t->request_id_header = dup_or_default(config->request_id_header, "X-Request-Id");
        t->attempt_header = dup_or_default(config->attempt_header, "X-Attempt");
        t->ca_file = config->ca_file && *config->ca_file ? strdup(config->ca_file) : NULL;
        t->connect_timeout_ms = config->connect_timeout_ms > 0 ? config->connect_timeout_ms : 1000;
        t->max_response_bytes = config->max_response_bytes;
        t->max_open = config->max_open;
        t->reuse = config->reuse_connections;
        t->request_map = malloc(sizeof(*t->request_map));
        t->reply_map = malloc(sizeof(*t->reply_map));
        t->auth = config->auth;
        t->auth_header = dup_or_default(config->auth_header, "X-Api-Key");
        t->sign = config->signing_string != NULL;
        t->signature_header = dup_or_default(config->signature_header, "X-Signature");
        t->timestamp_header = dup_or_default(config->timestamp_header, "X-Timestamp");
        t->signature_prefix = strdup(config->signature_prefix ? config->signature_prefix : "");
        t->signature_encoding = config->signature_encoding;
        t->done = calloc(config->max_open, sizeof(*t->done));
        t->sent = calloc(2 * (size_t)config->max_open, sizeof(*t->sent));
        t->multi = curl_multi_init();
        if (!t->sent || !t->base_url || !t->key_header || !t->request_id_header ||
            !t->attempt_header || (config->ca_file && *config->ca_file && !t->ca_file) ||
            !t->request_map || !t->reply_map || !t->auth_header || !t->signature_header ||
            !t->timestamp_header || !t->signature_prefix || !t->done || !t->multi) {
                transport_free(t);
                return TG_ENOMEM;
        }
        if (config->request_map)
                *t->request_map = *config->request_map;
        else
                request_map_default(t->request_map);
        if (config->reply_map)
                *t->reply_map = *config->reply_map;
        else
                reply_map_default(t->reply_map);
        if (t->sign)
                t->signing_string = *config->signing_string;
        want_headers(t, &t->reply_map->status);
        want_headers(t, &t->reply_map->refund_id);
        want_headers(t, &t->reply_map->error_code);
        want_headers(t, &t->reply_map->failure_code);
        want_headers(t, &t->reply_map->retryable);
        /* Nothing secret is needed: an empty set, so that calls can start. */
        if (t->auth == TRANSPORT_AUTH_NONE && !t->sign) {
                static const struct transport_credentials none;
                r = creds_make(t, &none, &t->creds);
                if (r < 0) {
                        transport_free(t);
                        return r;
                }
        }
        /* No hidden queue: libcurl must never park a transfer behind a
         * connection limit. Our own bound (max_open) is the only one. */
        curl_multi_setopt(t->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
        curl_multi_setopt(t->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
        curl_multi_setopt(t->multi, CURLMOPT_MAXCONNECTS, (long)config->max_open);
        curl_multi_setopt(t->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
        *ret_transport = t;
        return 0;
}

/* A header list that may carry a secret: wiped, then freed. */
static void headers_free(struct curl_slist *list)
{
        for (struct curl_slist *l = list; l; l = l->next)
                explicit_bzero(l->data, strlen(l->data));
        curl_slist_free_all(list);
}

static void call_free(struct call *c)
{
        if (!c)
                return;
        /* The handle first: it points at the credentials' PEM blobs. */
        if (c->easy)
                curl_easy_cleanup(c->easy);
        headers_free(c->headers);
        free(c->body);
        free(c->resp);
        creds_release(c->creds);
        watch_release(c->watch);
        free(c);
}

void transport_free(struct transport *t)
{
        if (!t)
                return;
        while (t->calls) {
                struct call *c = t->calls;
                t->calls = c->next;
                curl_multi_remove_handle(t->multi, c->easy);
                call_free(c);
        }
        if (t->multi)
                curl_multi_cleanup(t->multi);
        creds_release(t->creds);
        free(t->done);
        free(t->sent);
        free(t->base_url);
        free(t->key_header);
        free(t->request_id_header);
        free(t->attempt_header);
        free(t->ca_file);
        free(t->request_map);
        free(t->reply_map);
        free(t->auth_header);
        free(t->signature_header);
        free(t->timestamp_header);
        free(t->signature_prefix);
        free(t);
}

/* ---- libcurl's callbacks --------------------------------------------------------- */

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct call *c = userdata;
        size_t n = size * nmemb;
        if (c->resp_len + n > c->max_response) {
                c->too_big = true;
                return 0; /* abort the transfer: bounded body */
        }
        if (c->resp_len + n + 1 > c->resp_cap) {
                size_t cap = c->resp_cap ? c->resp_cap : 1024;
                while (cap < c->resp_len + n + 1)
                        cap *= 2;
                char *p = realloc(c->resp, cap);
                if (!p)
                        return 0;
                c->resp = p;
                c->resp_cap = cap;
        }
        memcpy(c->resp + c->resp_len, ptr, n);
        c->resp_len += n;
        c->resp[c->resp_len] = '\0';
        return n;
}

/* The value of a header line "name: value" when its name is `name`
 * (spaces around it and the line end taken off). */
static bool header_match(const char *buf, size_t n, const char *name, const char **ret_v,
                         size_t *ret_vl)
{
        size_t nl = strlen(name);
        const char *v;
        size_t vl;

        if (n <= nl || buf[nl] != ':' || strncasecmp(buf, name, nl) != 0)
                return false;
        v = buf + nl + 1;
        vl = n - nl - 1;
        while (vl > 0 && (*v == ' ' || *v == '\t')) {
                v++;
                vl--;
        }
        while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
                vl--;
        *ret_v = v;
        *ret_vl = vl;
        return true;
}

/* Copies the value of a header line "name: value" when its name is `name`. */
static bool header_value(const char *buf, size_t n, const char *name, char *dst, size_t size)
{
        const char *v;
        size_t vl;

        if (!header_match(buf, n, name, &v, &vl))
                return false;
        classify_copy_field(dst, size, v, vl);
        return true;
}

/* A Retry-After line: its value is added to dst, the values received so far
 * one per line (core/retry_after.h reads them all and takes the longest).
 * Each value goes in whole or not at all: a cut one could read shorter.
 * A control byte (a NUL included) becomes '?', so such a value is invalid
 * rather than cut at it; a value of digits too long to keep is an absurdly
 * long delay and is kept as one (it reads as the cap). */
static void retry_after_add(const char *buf, size_t n, char *dst, size_t size)
{
        static const char absurd[] = "99999999999999999999";
        size_t used = strlen(dst);
        const char *v;
        size_t vl;
        bool digits = true;

        if (!header_match(buf, n, "retry-after", &v, &vl))
                return;
        for (size_t i = 0; i < vl; i++)
                digits = digits && v[i] >= '0' && v[i] <= '9';
        if (vl > RETRY_AFTER_VALUE_MAX && digits) {
                v = absurd;
                vl = sizeof(absurd) - 1;
        }
        if (vl > RETRY_AFTER_VALUE_MAX || used + (used > 0) + vl + 1 > size)
                return;
        if (used > 0)
                dst[used++] = '\n';
        for (size_t i = 0; i < vl; i++) {
                unsigned char ch = (unsigned char)v[i];
                dst[used++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
        }
        dst[used] = '\0';
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *userdata)
{
        struct call *c = userdata;
        size_t n = size * nitems;

        c->got_response = true;
        /* A new response (e.g. after 100-continue) starts with its status
         * line: forget headers of an earlier one. */
        if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
                c->retry_after[0] = '\0';
                c->content_type[0] = '\0';
                for (unsigned k = 0; k < PROVIDER_REPLY_HEADERS; k++)
                        c->captured[k][0] = '\0';
        }
        retry_after_add(buf, n, c->retry_after, sizeof(c->retry_after));
        /* a type that fills the field may be the cut of another: not JSON's */
        if (header_value(buf, n, "content-type", c->content_type, sizeof(c->content_type)) &&
            strlen(c->content_type) == sizeof(c->content_type) - 1)
                snprintf(c->content_type, sizeof(c->content_type), "(too long)");
        for (unsigned k = 0; k < c->t->ncapture; k++)
                header_value(buf, n, c->t->capture[k], c->captured[k], sizeof(c->captured[k]));
        return n;
}

/* Queues the call's one sent report. */
static void report_sent(struct transport *t, struct call *c)
{
        struct transport_sent *s;

        if (c->reported)
                return;
        c->reported = true;
        if (t->sent_count >= 2 * t->max_open)
                return; /* cannot happen: one report per call, popped every turn */
        s = &t->sent[(t->sent_head + t->sent_count) % (2 * t->max_open)];
        s->cookie = c->cookie;
        s->sent = c->sent_mono != 0;
        s->late = c->late;
        s->ready_mono = c->ready_mono;
        s->sent_mono = c->sent_mono;
        s->sent_end_mono = c->sent_end;
        t->sent_count++;
}

/* After a libcurl step: the calls whose hook ran in it are reported, each
 * with the moment by which its request had left: right after its first
 * write (on_debug), or, had libcurl not written it in this step, the step's
 * end (the request is written after the hook returns, in the same step). */
static void report_step(struct transport *t)
{
        tg_mono_ns now = 0;

        for (struct call *c = t->calls; c; c = c->next) {
                if (!c->report_due)
                        continue;
                if (!now)
                        now = clock_mono_now();
                c->report_due = false;
                if (!c->sent_mono)
                        c->sent_end = 0;
                else if (!c->sent_end)
                        c->sent_end = now;
                report_sent(t, c);
        }
}

/* The longest the pre-request hook holds a request for its slot. The caller
 * hands calls over at most a few milliseconds early; this only bounds a
 * caller's mistake. */
#define MAX_HOLD_NS (1000 * TG_NS_PER_MS)

/* Called by libcurl right before a request is sent on a connection (after
 * the connect and any TLS handshake). The second time for the same handle
 * would be libcurl re-sending on its own: refuse it (the call then ends as
 * sent-without-answer: unknown). The first time, the request is held until
 * its slot: it never goes on the wire earlier than not_before; nor later
 * than not_after (a share's window): a connection ready after that sends
 * nothing (refused here, the call ends not sent, TRANSPORT_LATE). */
static int on_prereq(void *clientp, char *primary_ip, char *local_ip, int primary_port,
                     int local_port)
{
        (void)primary_ip;
        (void)local_ip;
        (void)primary_port;
        (void)local_port;
        struct call *c = clientp;
        c->prereq_count++;
        if (c->prereq_count > 1) {
                c->second_send = true;
                return CURL_PREREQFUNC_ABORT;
        }
        c->ready_mono = clock_mono_now();
        tg_mono_ns wait = c->not_before - c->ready_mono;
        if (c->not_before > 0 && wait > 0)
                clock_wait_until(c->ready_mono + (wait < MAX_HOLD_NS ? wait : MAX_HOLD_NS));
        tg_mono_ns now = clock_mono_now();
        if (c->not_after > 0 && now > c->not_after) {
                /* ready after the window (not_before is inside it, so no
                 * hold came first), or away past it while it held */
                c->late = true;
                c->report_due = true;
                return CURL_PREREQFUNC_ABORT;
        }
        c->sent_mono = now;
        c->report_due = true; /* reported when the step that writes it is over */
        return CURL_PREREQFUNC_OK;
}

/* libcurl's account of what it did (CURLOPT_DEBUGFUNCTION, with
 * CURLOPT_VERBOSE; nothing is written anywhere). One thing is kept: the
 * moment the request's first bytes had been written (CURLINFO_HEADER_OUT
 * comes right after the write), by which the request had surely left. */
static int on_debug(CURL *easy, curl_infotype type, char *data, size_t size, void *userp)
{
        struct call *c = userp;

        (void)easy;
        (void)data;
        (void)size;
        if (type == CURLINFO_HEADER_OUT && c->sent_mono && !c->sent_end)
                c->sent_end = clock_mono_now();
        return 0;
}

/* OpenSSL's news of a handshake: keep the first fatal alert the provider
 * sent. */
static void on_tls_info(const SSL *ssl, int where, int ret)
{
        struct tls_watch *w;

        if (!(where & SSL_CB_READ_ALERT) || (ret >> 8) != 2 /* fatal */)
                return;
        w = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), watch_index);
        if (w && w->alert < 0)
                w->alert = ret & 0xff;
}

/* A new connection's TLS context (libcurl's OpenSSL backend): watch it. */
static CURLcode on_ssl_ctx(CURL *easy, void *ssl_ctx, void *userptr)
{
        struct call *c = userptr;
        struct tls_watch *w = calloc(1, sizeof(*w));

        (void)easy;
        if (!w || watch_index < 0)
                goto out;
        w->alert = -1;
        w->refs = 1;
        if (!SSL_CTX_set_ex_data(ssl_ctx, watch_index, w)) {
                free(w);
                goto out;
        }
        w->refs++; /* the call's */
        SSL_CTX_set_info_callback(ssl_ctx, on_tls_info);
        watch_release(c->watch);
        c->watch = w;
out:
        return CURLE_OK; /* watching is a help, never a reason to fail */
}

/* ---- making a call ------------------------------------------------------------------ */

static int add_line(struct curl_slist **list, const char *line)
{
        struct curl_slist *l = curl_slist_append(*list, line);
        if (!l)
                return TG_ENOMEM;
        *list = l;
        return 0;
}

static int add_header(struct curl_slist **list, const char *name, const char *value)
{
        char line[HEADER_LINE_MAX];
        int n = snprintf(line, sizeof(line), "%s: %s", name, value);
        int r;
        if (n < 0 || (size_t)n >= sizeof(line))
                return TG_EINVAL;
        r = add_line(list, line);
        explicit_bzero(line, sizeof(line));
        return r;
}

/* Every header of a call, in one place: the idempotency key, request id and
 * attempt, its trace context, no Expect, the content type of a POST, the credentials, and the
 * timestamp and signature of a signed call (over the method, the path as
 * sent, the key and the body's digest). */
static int build_headers(const struct transport *t, struct call *c,
                         const struct transport_call *call, const char *path,
                         struct template_values *values)
{
        char num[32], ts[32], digest[65], sig[512];
        int r;

        snprintf(num, sizeof(num), "%u", call->attempt);
        r = add_header(&c->headers, t->key_header, call->operation_id);
        if (r == 0)
                r = add_header(&c->headers, t->request_id_header, call->request_id);
        if (r == 0)
                r = add_header(&c->headers, t->attempt_header, num);
        /* W3C trace context: the operation's trace, this call's span */
        if (r == 0 && call->traceparent && call->traceparent[0])
                r = add_header(&c->headers, "traceparent", call->traceparent);
        /* An empty "Expect:" removes libcurl's 100-continue dance. */
        if (r == 0)
                r = add_line(&c->headers, "Expect:");
        if (r == 0 && call->request == CLASSIFY_POST)
                r = add_header(&c->headers, "Content-Type",
                               provider_request_content_type(t->request_map));
        if (r == 0 && c->creds->auth_line)
                r = add_line(&c->headers, c->creds->auth_line);
        if (r == 0 && t->sign) {
                snprintf(ts, sizeof(ts), "%lld", (long long)(clock_wall_now() / 1000));
                provider_body_sha256(c->body, c->body_len, digest);
                values->text[TPL_METHOD] = call->request == CLASSIFY_POST ? "POST" : "GET";
                values->text[TPL_PATH] = path;
                values->text[TPL_TIMESTAMP] = ts;
                values->text[TPL_BODY_SHA256] = digest;
                values->text[TPL_REQUEST_ID] = call->request_id;
                r = provider_sign(&t->signing_string, values, c->creds->signing_key,
                                  c->creds->signing_key_len, t->signature_encoding,
                                  t->signature_prefix, sig, sizeof(sig));
                if (r == 0)
                        r = add_header(&c->headers, t->timestamp_header, ts);
                if (r == 0)
                        r = add_header(&c->headers, t->signature_header, sig);
                explicit_bzero(sig, sizeof(sig));
        }
        return r;
}

static void set_tls(const struct transport *t, struct call *c)
{
        CURL *e = c->easy;

        /* Verification is not configurable: chain and host name, always. */
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
        if (t->ca_file)
                curl_easy_setopt(e, CURLOPT_CAINFO, t->ca_file);
        if (c->creds->cert) {
                struct curl_blob cert = {c->creds->cert, c->creds->cert_len, CURL_BLOB_NOCOPY};
                struct curl_blob key = {c->creds->key, c->creds->key_len, CURL_BLOB_NOCOPY};
                curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
                curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
                curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
                curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
        }
        /* Only libcurl's OpenSSL backend has this; without it, failures
         * are read from libcurl's codes alone. */
        if (curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx) == CURLE_OK)
                curl_easy_setopt(e, CURLOPT_SSL_CTX_DATA, c);
}

static int setup_call(struct transport *t, struct call *c, const struct transport_call *call)
{
        struct refund_request minimal;
        const struct refund_request *req = call->refund;
        struct refund_metadata md;
        struct template_values values;
        char amount[24], path[URL_MAX], url[URL_MAX + 1024];
        struct tg_strbuf sb;
        int r;

        if (!req) {
                if (call->request == CLASSIFY_POST)
                        return TG_EINVAL;
                memset(&minimal, 0, sizeof(minimal));
                snprintf(minimal.operation_id, sizeof(minimal.operation_id), "%s",
                         call->operation_id);
                req = &minimal;
        }
        if (provider_metadata_parse(req->metadata, &md) < 0)
                return TG_EINVAL;
        map_values_for(req, &md, call->refund_id, amount, &values);
        values.text[TPL_IDEMPOTENCY_KEY] = call->operation_id;
        tg_strbuf_init(&sb, path, sizeof(path));
        r = request_map_path(t->request_map, call->request, &values, &sb);
        if (r < 0)
                return r == TG_EFULL ? TG_EINVAL : r;
        if ((size_t)snprintf(url, sizeof(url), "%s%s", t->base_url, path) >= sizeof(url))
                return TG_EINVAL;
        if (call->request == CLASSIFY_POST) {
                r = provider_request_body(t->request_map, &values, &c->body, &c->body_len);
                if (r < 0)
                        return r == TG_EFULL ? TG_EINVAL : r;
        }
        r = build_headers(t, c, call, path, &values);
        if (r < 0)
                return r;

        CURL *e = c->easy;
        if (call->request == CLASSIFY_POST) {
                curl_easy_setopt(e, CURLOPT_POST, 1L);
                curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
                curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)c->body_len);
        } else {
                curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        }
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
        curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)c);
        curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(e, CURLOPT_PROXY, "");
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)t->connect_timeout_ms);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)call->timeout_ms);
        if (!t->reuse) {
                curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
                curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
        }
        set_tls(t, c);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
        curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, on_debug);
        curl_easy_setopt(e, CURLOPT_DEBUGDATA, c);
        curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
        curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
        curl_easy_setopt(e, CURLOPT_PREREQDATA, c);
        return 0;
}

int transport_start(struct transport *t, const struct transport_call *call)
{
        if (!t || !call || !call->operation_id || !call->request_id || call->timeout_ms <= 0)
                return TG_EINVAL;
        if (t->open >= t->max_open)
                return TG_EFULL;
        /* Until the credentials the config asks for are given, nothing goes
         * out without them. */
        if (!t->creds)
                return TG_EINVAL;
        struct call *c = calloc(1, sizeof(*c));
        if (!c)
                return TG_ENOMEM;
        c->t = t;
        c->cookie = call->cookie;
        c->request = call->request;
        c->not_before = call->not_before;
        c->not_after = call->not_after;
        c->max_response = t->max_response_bytes;
        c->creds = t->creds;
        c->creds->refs++;
        c->easy = curl_easy_init();
        if (!c->easy) {
                call_free(c);
                return TG_ENOMEM;
        }
        int r = setup_call(t, c, call);
        if (r < 0) {
                call_free(c);
                return r;
        }
        c->started = clock_mono_now();
        if (curl_multi_add_handle(t->multi, c->easy) != CURLM_OK) {
                call_free(c);
                return TG_ETRANSPORT;
        }
        c->next = t->calls;
        if (t->calls)
                t->calls->prev = c;
        t->calls = c;
        t->open++;
        /* Kick the transfer now so the connect starts at the handoff, not at
         * the next poll. */
        int running = 0;
        curl_multi_perform(t->multi, &running);
        report_step(t);
        return 0;
}

/* ---- ending a call ------------------------------------------------------------------ */

/* Fatal alerts by which a provider's TLS layer refuses the handshake over
 * OUR certificate (RFC 8446 section 6.2): the HTTP server behind it never
 * saw a byte of the request. */
static bool client_cert_alert(int alert)
{
        switch (alert) {
        case 42:  /* bad_certificate */
        case 43:  /* unsupported_certificate */
        case 44:  /* certificate_revoked */
        case 45:  /* certificate_expired */
        case 46:  /* certificate_unknown */
        case 48:  /* unknown_ca */
        case 49:  /* access_denied */
        case 116: /* certificate_required */
                return true;
        default:
                return false;
        }
}

static enum transport_failure not_sent_failure(const struct call *c, CURLcode code)
{
        int alert = c->watch ? c->watch->alert : -1;

        switch (code) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return TRANSPORT_DNS;
        case CURLE_COULDNT_CONNECT:
                return TRANSPORT_REFUSED;
        case CURLE_OPERATION_TIMEDOUT:
                /* A TLS context exists only once TCP connected: with one, the
                 * handshake is what hung. (Without libcurl's OpenSSL hook a
                 * hung handshake reads as a connect timeout.) */
                return c->watch ? TRANSPORT_TLS_TIMEOUT : TRANSPORT_CONNECT_TIMEOUT;
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
                return TRANSPORT_TLS_VERIFY;
        case CURLE_SSL_CERTPROBLEM:
                return TRANSPORT_TLS_CLIENT_CERT;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_ENGINE_INITFAILED:
        case CURLE_SSL_CIPHER:
                return client_cert_alert(alert) ? TRANSPORT_TLS_CLIENT_CERT
                                                : TRANSPORT_TLS_HANDSHAKE;
        default:
                return TRANSPORT_OTHER;
        }
}

/* What became of a call that did not end with a complete response. */
static void failed_call(const struct call *c, CURLcode code, enum tg_transport_result *ret_tr,
                        enum transport_failure *ret_failure)
{
        int alert = c->watch ? c->watch->alert : -1;

        if (!c->sent_mono) {
                *ret_tr = TG_TR_NOT_SENT; /* never got as far as sending */
                *ret_failure = c->late ? TRANSPORT_LATE : not_sent_failure(c, code);
                return;
        }
        /* TLS 1.3: the provider refused our certificate after we wrote the
         * request, on the connection opened for it, before answering a
         * byte. Its TLS layer never finished the handshake: nothing was
         * executed. Any other alert after send stays unknown. */
        if (!c->got_response && c->watch && client_cert_alert(alert)) {
                *ret_tr = TG_TR_NOT_SENT;
                *ret_failure = TRANSPORT_TLS_CLIENT_CERT;
                return;
        }
        if (code == CURLE_OPERATION_TIMEDOUT) {
                *ret_tr = TG_TR_TIMEOUT_AFTER_SEND;
                *ret_failure = TRANSPORT_TIMEOUT;
                return;
        }
        *ret_tr = TG_TR_RESET;
        *ret_failure = TRANSPORT_RESET;
}

static void finish_call(struct transport *t, struct call *c, CURLcode code)
{
        struct transport_result *res = &t->done[(t->done_head + t->done_count) % t->max_open];
        struct provider_reply_headers hdrs = {0};
        enum tg_transport_result tr = TG_TR_COMPLETE;
        enum transport_failure failure = TRANSPORT_OK;
        long status = 0;

        memset(res, 0, sizeof(*res));
        /* too_big: a full status line came; the body is unusable. */
        if (code != CURLE_OK && !c->too_big)
                failed_call(c, code, &tr, &failure);
        res->cookie = c->cookie;
        res->sent = c->sent_mono != 0 && tr != TG_TR_NOT_SENT;
        res->handoff_mono = c->started;
        res->ready_mono = c->ready_mono;
        res->sent_mono = res->sent ? c->sent_mono : 0;
        res->sent_end_mono = res->sent ? (c->sent_end ? c->sent_end : clock_mono_now()) : 0;
        res->second_send_refused = c->second_send;
        res->latency_us = (clock_mono_now() - c->started) / TG_NS_PER_US;
        res->failure = failure;
        memcpy(res->retry_after, c->retry_after, sizeof(res->retry_after));
        res->reply.transport = tr;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        if (tr == TG_TR_COMPLETE) {
                res->reply.http_status = (int)status;
                for (unsigned k = 0; k < t->ncapture; k++) {
                        hdrs.name[k] = t->capture[k];
                        hdrs.value[k] = c->captured[k];
                }
                hdrs.n = t->ncapture;
                hdrs.content_type = c->content_type;
                if (provider_reply_read(t->reply_map, c->too_big ? NULL : c->resp,
                                        c->too_big || !c->resp ? 0 : c->resp_len, &hdrs,
                                        &res->reply) == TG_EPARSE &&
                    code == CURLE_OK) {
                        char text[sizeof(c->content_type) + 64];
                        int n = snprintf(text, sizeof(text), "body not read: Content-Type %s",
                                         c->content_type);
                        classify_copy_field(res->error, sizeof(res->error), text,
                                            n < 0 ? 0 : (size_t)n);
                }
        }
        if (code != CURLE_OK) {
                const char *words = c->errbuf[0] ? c->errbuf : curl_easy_strerror(code);
                char text[CURL_ERROR_SIZE + 128];
                int n = snprintf(text, sizeof(text), "%s%s%s", words,
                                 c->too_big       ? " (response body over the bound)"
                                 : c->second_send ? " (second send refused)"
                                 : c->late        ? " (connected after its window: not sent)"
                                                  : "",
                                 res->failure == TRANSPORT_TLS_CLIENT_CERT && c->sent_mono
                                     ? " (the provider refused our client certificate)"
                                     : "");
                /* cut to fit: the call log keeps a bounded text */
                classify_copy_field(res->error, sizeof(res->error), text, n < 0 ? 0 : (size_t)n);
        }
        t->done_count++;
        report_sent(t, c); /* ended before its hook fired: never sent */
        if (c->prev)
                c->prev->next = c->next;
        else
                t->calls = c->next;
        if (c->next)
                c->next->prev = c->prev;
        curl_multi_remove_handle(t->multi, c->easy);
        call_free(c);
}

static void collect(struct transport *t)
{
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(t->multi, &left)) != NULL) {
                if (msg->msg != CURLMSG_DONE)
                        continue;
                struct call *c = NULL;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
                finish_call(t, c, msg->data.result);
        }
}

int transport_poll(struct transport *t, int timeout_ms, const int *wake_fds, unsigned n)
{
        struct curl_waitfd wake[TRANSPORT_WAKE_MAX];
        unsigned nwake = 0;
        int running = 0, mask = 0;

        for (unsigned i = 0; i < n && nwake < TRANSPORT_WAKE_MAX; i++)
                if (wake_fds[i] >= 0)
                        wake[nwake++] =
                            (struct curl_waitfd){.fd = wake_fds[i], .events = CURL_WAIT_POLLIN};
        if (curl_multi_perform(t->multi, &running) != CURLM_OK)
                return TG_ETRANSPORT;
        report_step(t);
        collect(t);
        if (t->done_count > 0 || t->sent_count > 0)
                timeout_ms = 0;
        if (timeout_ms > 0 || nwake > 0) {
                if (curl_multi_poll(t->multi, nwake > 0 ? wake : NULL, nwake, timeout_ms, NULL) !=
                    CURLM_OK)
                        return TG_ETRANSPORT;
                if (curl_multi_perform(t->multi, &running) != CURLM_OK)
                        return TG_ETRANSPORT;
                report_step(t);
                collect(t);
        }
        nwake = 0;
        for (unsigned i = 0; i < n && i < TRANSPORT_WAKE_MAX; i++)
                if (wake_fds[i] >= 0 && (wake[nwake++].revents & CURL_WAIT_POLLIN))
                        mask |= 1 << i;
        return mask;
}

int transport_next_done(struct transport *t, struct transport_result *ret_result)
{
        if (t->done_count == 0)
                return TG_ENOTFOUND;
        *ret_result = t->done[t->done_head];
        t->done_head = (t->done_head + 1) % t->max_open;
        t->done_count--;
        t->open--;
        return 0;
}

int transport_next_sent(struct transport *t, struct transport_sent *ret_sent)
{
        if (t->sent_count == 0)
                return TG_ENOTFOUND;
        *ret_sent = t->sent[t->sent_head];
        t->sent_head = (t->sent_head + 1) % (2 * t->max_open);
        t->sent_count--;
        return 0;
}

unsigned transport_open(const struct transport *t)
{
        return t->open;
}

int transport_http_date(const char *text, int64_t *ret_epoch_s)
{
        time_t t = curl_getdate(text, NULL);
        if (t == (time_t)-1)
                return TG_EPARSE;
        *ret_epoch_s = (int64_t)t;
        return 0;
}
