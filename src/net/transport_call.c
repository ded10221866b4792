/*
 * transport_call — one call's easy handle (transport_int.h): the URL and
 * body made from the operation's fields through the request map, every
 * header in one place (build_headers), the TLS options, the watch that
 * keeps the provider's first fatal TLS alert (read by transport_result.c),
 * and the callbacks that keep the response: its body bounded by
 * max_response, its Retry-After values, its Content-Type and the headers
 * the reply map reads.
 *
 * Invariants:
 *   - TLS peers are verified (chain and host name), always: no option here
 *     or in the config turns it off;
 *   - no redirects, no proxies from the environment, no Expect:
 *     100-continue, no signals; a fresh connection closed after the call
 *     unless reuse is configured;
 *   - a header line that carries a secret is built in a stack buffer that
 *     is wiped before return (the list is wiped when freed, transport.c);
 *   - a response body past max_response aborts the transfer (too_big); the
 *     headers of an earlier response (a 100) are forgotten at a new status
 *     line.
 */
#include "net/transport_int.h"

#include <curl/curl.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/encode.h"
#include "core/retry_after.h"
#include "core/tg_error.h"
#include "net/provider_reply.h"
#include "platform/clock.h"

/* ---- the watch on a connection's handshake ---------------------------------------- */

static int watch_index = -1;

void transport_watch_release(struct tls_watch *w)
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
        transport_watch_release(ptr);
}

void transport_watch_init(void)
{
        watch_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, watch_ex_free);
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
        transport_watch_release(c->watch);
        c->watch = w;
out:
        return CURLE_OK; /* watching is a help, never a reason to fail */
}

/* ---- the response ------------------------------------------------------------------ */

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
                c->keep_alive[0] = '\0';
                for (unsigned k = 0; k < PROVIDER_REPLY_HEADERS; k++)
                        c->captured[k][0] = '\0';
        }
        retry_after_add(buf, n, c->retry_after, sizeof(c->retry_after));
        /* a type that fills the field may be the cut of another: not JSON's */
        if (header_value(buf, n, "content-type", c->content_type, sizeof(c->content_type)) &&
            strlen(c->content_type) == sizeof(c->content_type) - 1)
                snprintf(c->content_type, sizeof(c->content_type), "(too long)");
        for (unsigned k = 0; k < c->lane->ncapture; k++)
                header_value(buf, n, c->lane->capture[k], c->captured[k], sizeof(c->captured[k]));
        header_value(buf, n, "keep-alive", c->keep_alive, sizeof(c->keep_alive));
        return n;
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
static int build_headers(const struct transport_lane *t, struct call *c,
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
        /* the profile's own (an API version pin), one line each */
        for (const char *p = t->fixed_headers; r == 0 && *p;) {
                char line[HEADER_LINE_MAX];
                size_t n = strcspn(p, "\n");
                if (n >= sizeof(line))
                        return TG_EINVAL;
                memcpy(line, p, n);
                line[n] = '\0';
                r = add_line(&c->headers, line);
                p += n + (p[n] == '\n');
        }
        /* oauth2: the lane's access token (its Basic line is the token
         * call's alone) */
        if (r == 0 && t->auth == TRANSPORT_AUTH_OAUTH2)
                r = t->token_line ? add_line(&c->headers, t->token_line) : TG_EINVAL;
        else if (r == 0 && c->creds->auth_line)
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

static void set_tls(const struct transport_lane *t, struct call *c)
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

/* The common options of every call's handle: where, the headers, and no
 * redirects, proxies, signals or reuse (unless configured). */
static void set_common(const struct transport_lane *t, struct call *c,
                       const struct transport_call *call, const char *url)
{
        CURL *e = c->easy;

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
}

/* An OAuth 2.0 token call (RFC 6749 4.4): POST token_path, a form of
 * grant_type=client_credentials, the client's id and secret as HTTP Basic
 * credentials; no idempotency key (it is no operation's), the request id
 * for the call log. */
static int token_setup(const struct transport_lane *t, struct call *c,
                       const struct transport_call *call)
{
        static const char form[] = "grant_type=client_credentials";
        char url[URL_MAX + 1024];
        int r;

        if ((size_t)snprintf(url, sizeof(url), "%s%s", t->base_url, t->token_path) >= sizeof(url))
                return TG_EINVAL;
        c->body = strdup(form);
        if (!c->body || !c->creds->auth_line)
                return c->body ? TG_EINVAL : TG_ENOMEM;
        c->body_len = sizeof(form) - 1;
        r = add_header(&c->headers, t->request_id_header, call->request_id);
        if (r == 0)
                r = add_line(&c->headers, "Expect:");
        if (r == 0)
                r = add_header(&c->headers, "Content-Type", "application/x-www-form-urlencoded");
        if (r == 0)
                r = add_header(&c->headers, "Accept", "application/json");
        if (r == 0)
                r = add_line(&c->headers, c->creds->auth_line);
        if (r < 0)
                return r;
        curl_easy_setopt(c->easy, CURLOPT_POST, 1L);
        curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
        curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long)c->body_len);
        set_common(t, c, call, url);
        return 0;
}

int transport_call_setup(const struct transport_lane *t, struct call *c,
                         const struct transport_call *call)
{
        struct refund_request minimal;
        const struct refund_request *req = call->refund;
        struct refund_metadata md;
        struct template_values values;
        char amount[MAP_AMOUNT_BUF], path[URL_MAX], url[URL_MAX + 1024];
        enum reconcile_strategy strategy;
        struct tg_strbuf sb;
        int r;

        if (call->token)
                return token_setup(t, c, call);
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
        if (call->request == CLASSIFY_QUERY &&
            request_map_strategy(t->request_map, &values, &strategy) == 0 &&
            strategy == RECONCILE_LIST &&
            ((size_t)snprintf(c->list_match, sizeof(c->list_match), "%s", call->operation_id) >=
                 sizeof(c->list_match) ||
             (size_t)snprintf(c->list_known, sizeof(c->list_known), "%s",
                              call->refund_id ? call->refund_id : "") >= sizeof(c->list_known)))
                return TG_EINVAL;
        tg_strbuf_init(&sb, path, sizeof(path));
        r = request_map_path(t->request_map, call->request, &values, &sb);
        /* a later page of a list: where it starts (a list read one page
         * at a time has no way to ask for another) */
        if (r == 0 && c->list_match[0] && t->request_map->list_cursor_param[0] &&
            call->list_cursor && call->list_cursor[0])
                r = request_map_list_cursor(t->request_map, call->list_cursor, &sb);
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
        set_common(t, c, call, url);
        return 0;
}
