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
 *     no signals; response bodies are bounded.
 */
#include "net/transport.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/tg_error.h"
#include "net/provider_reply.h"
#include "platform/clock.h"

struct call {
        CURL *easy;
        struct curl_slist *headers;
        char *body;
        char *resp;
        size_t resp_len, resp_cap;
        bool too_big;
        char retry_after[64];
        uint64_t cookie;
        enum classify_request request;
        unsigned prereq_count;
        bool second_send;
        bool reported; /* its transport_sent report is queued */
        tg_mono_ns started, ready_mono, sent_mono, not_before;
        size_t max_response;
        struct transport *t;      /* for the pre-request hook's report */
        struct call *prev, *next; /* the transport's list of open calls */
};

struct transport {
        CURLM *multi;
        char *base_url, *refunds_path, *query_path;
        char *key_header, *request_id_header, *attempt_header;
        int64_t connect_timeout_ms;
        size_t max_response_bytes;
        unsigned max_open;
        bool reuse;
        struct call *calls; /* in libcurl's hands now */
        unsigned open;      /* started and not yet popped */
        /* finished results waiting to be popped: a ring of max_open entries */
        struct transport_result *done;
        unsigned done_head, done_count;
        /* sent reports waiting to be popped: a ring of 2 * max_open entries
         * (one per call, popped every turn) */
        struct transport_sent *sent;
        unsigned sent_head, sent_count;
};

static int global_init_once(void)
{
        static int inited;
        if (!inited) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return TG_ETRANSPORT;
                inited = 1;
        }
        return 0;
}

static char *dup_or_default(const char *s, const char *def)
{
        return strdup(s && *s ? s : def);
}

int transport_new(const struct transport_config *config, struct transport **ret_transport)
{
        if (!config || !config->base_url || !*config->base_url || config->max_open == 0 ||
            config->max_response_bytes == 0)
                return TG_EINVAL;
        int r = global_init_once();
        if (r < 0)
                return r;
        struct transport *t = calloc(1, sizeof(*t));
        if (!t)
                return TG_ENOMEM;
        t->base_url = strdup(config->base_url);
        t->refunds_path = dup_or_default(config->refunds_path, "/v1/refunds");
        t->query_path = dup_or_default(config->query_path, "/v1/refunds/{operation_id}");
        t->key_header = dup_or_default(config->key_header, "Idempotency-Key");
        t->request_id_header = dup_or_default(config->request_id_header, "X-Request-Id");
        t->attempt_header = dup_or_default(config->attempt_header, "X-Attempt");
        t->connect_timeout_ms = config->connect_timeout_ms > 0 ? config->connect_timeout_ms : 1000;
        t->max_response_bytes = config->max_response_bytes;
        t->max_open = config->max_open;
        t->reuse = config->reuse_connections;
        t->done = calloc(config->max_open, sizeof(*t->done));
        t->sent = calloc(2 * (size_t)config->max_open, sizeof(*t->sent));
        t->multi = curl_multi_init();
        if (!t->sent || !t->base_url || !t->refunds_path || !t->query_path || !t->key_header ||
            !t->request_id_header || !t->attempt_header || !t->done || !t->multi) {
                transport_free(t);
                return TG_ENOMEM;
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

static void call_free(struct call *c)
{
        if (!c)
                return;
        if (c->easy)
                curl_easy_cleanup(c->easy);
        curl_slist_free_all(c->headers);
        free(c->body);
        free(c->resp);
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
        free(t->done);
        free(t->sent);
        free(t->base_url);
        free(t->refunds_path);
        free(t->query_path);
        free(t->key_header);
        free(t->request_id_header);
        free(t->attempt_header);
        free(t);
}

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

static size_t on_header(char *buf, size_t size, size_t nitems, void *userdata)
{
        struct call *c = userdata;
        size_t n = size * nitems;
        static const char name[] = "retry-after:";
        size_t nl = sizeof(name) - 1;
        /* A new response (e.g. after 100-continue) starts with its status
         * line: forget headers of an earlier one. */
        if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0)
                c->retry_after[0] = '\0';
        if (n > nl && strncasecmp(buf, name, nl) == 0) {
                const char *v = buf + nl;
                size_t vl = n - nl;
                while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
                        vl--;
                classify_copy_field(c->retry_after, sizeof(c->retry_after), v, vl);
        }
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
        s->ready_mono = c->ready_mono;
        s->sent_mono = c->sent_mono;
        t->sent_count++;
}

/* The longest the pre-request hook holds a request for its slot. The caller
 * hands calls over at most a few milliseconds early; this only bounds a
 * caller's mistake. */
#define MAX_HOLD_NS (1000 * TG_NS_PER_MS)

/* Called by libcurl right before a request is sent on a connection (after
 * the connect and any TLS handshake). The second time for the same handle
 * would be libcurl re-sending on its own: refuse it (the call then ends as
 * sent-without-answer: unknown). The first time, the request is held until
 * its slot: it never goes on the wire earlier than not_before. */
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
        c->sent_mono = clock_mono_now();
        report_sent(c->t, c);
        return CURL_PREREQFUNC_OK;
}

static int add_header(struct curl_slist **list, const char *name, const char *value)
{
        char line[512];
        int n = snprintf(line, sizeof(line), "%s: %s", name, value);
        if (n < 0 || (size_t)n >= sizeof(line))
                return TG_EINVAL;
        struct curl_slist *l = curl_slist_append(*list, line);
        if (!l)
                return TG_ENOMEM;
        *list = l;
        return 0;
}

static int build_url(const struct transport *t, const struct transport_call *call, char *url,
                     size_t url_size)
{
        int n;
        if (call->request == CLASSIFY_POST) {
                n = snprintf(url, url_size, "%s%s", t->base_url, t->refunds_path);
        } else {
                const char *mark = strstr(t->query_path, "{operation_id}");
                char *esc = curl_easy_escape(NULL, call->operation_id, 0);
                if (!esc)
                        return TG_ENOMEM;
                if (mark)
                        n = snprintf(url, url_size, "%s%.*s%s%s", t->base_url,
                                     (int)(mark - t->query_path), t->query_path, esc,
                                     mark + strlen("{operation_id}"));
                else
                        n = snprintf(url, url_size, "%s%s/%s", t->base_url, t->query_path, esc);
                curl_free(esc);
        }
        if (n < 0 || (size_t)n >= url_size)
                return TG_EINVAL;
        return 0;
}

static int setup_call(struct transport *t, struct call *c, const struct transport_call *call)
{
        char url[2048];
        char num[32];
        int r = build_url(t, call, url, sizeof(url));
        if (r < 0)
                return r;
        CURL *e = c->easy;
        snprintf(num, sizeof(num), "%u", call->attempt);
        if (add_header(&c->headers, t->key_header, call->operation_id) < 0 ||
            add_header(&c->headers, t->request_id_header, call->request_id) < 0 ||
            add_header(&c->headers, t->attempt_header, num) < 0)
                return TG_ENOMEM;
        /* W3C trace context: the operation's trace, this call's span */
        if (call->traceparent && call->traceparent[0] &&
            add_header(&c->headers, "traceparent", call->traceparent) < 0)
                return TG_ENOMEM;
        /* An empty "Expect:" removes libcurl's 100-continue dance. */
        struct curl_slist *l = curl_slist_append(c->headers, "Expect:");
        if (!l)
                return TG_ENOMEM;
        c->headers = l;
        if (call->request == CLASSIFY_POST) {
                l = curl_slist_append(c->headers, "Content-Type: application/json");
                if (!l)
                        return TG_ENOMEM;
                c->headers = l;
                c->body = strdup(call->body ? call->body : "");
                if (!c->body)
                        return TG_ENOMEM;
                curl_easy_setopt(e, CURLOPT_POST, 1L);
                curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
                curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(c->body));
        } else {
                curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        }
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
        curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)c);
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
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
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
        struct call *c = calloc(1, sizeof(*c));
        if (!c)
                return TG_ENOMEM;
        c->cookie = call->cookie;
        c->request = call->request;
        c->not_before = call->not_before;
        c->t = t;
        c->max_response = t->max_response_bytes;
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
        return 0;
}

static enum tg_transport_result transport_class(const struct call *c, CURLcode code)
{
        if (code == CURLE_OK)
                return TG_TR_COMPLETE;
        if (c->too_big)
                return TG_TR_COMPLETE; /* a full status line came; the body is unusable */
        if (!c->sent_mono)
                return TG_TR_NOT_SENT; /* never got as far as sending */
        if (code == CURLE_OPERATION_TIMEDOUT)
                return TG_TR_TIMEOUT_AFTER_SEND;
        return TG_TR_RESET;
}

static void finish_call(struct transport *t, struct call *c, CURLcode code)
{
        struct transport_result *res = &t->done[(t->done_head + t->done_count) % t->max_open];
        memset(res, 0, sizeof(*res));
        res->cookie = c->cookie;
        res->sent = c->sent_mono != 0;
        res->handoff_mono = c->started;
        res->ready_mono = c->ready_mono;
        res->sent_mono = c->sent_mono;
        res->second_send_refused = c->second_send;
        res->latency_us = (clock_mono_now() - c->started) / TG_NS_PER_US;
        memcpy(res->retry_after, c->retry_after, sizeof(res->retry_after));
        res->reply.transport = transport_class(c, code);
        long status = 0;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        if (res->reply.transport == TG_TR_COMPLETE) {
                res->reply.http_status = (int)status;
                if (!c->too_big && c->resp)
                        provider_reply_parse_body(c->resp, c->resp_len, &res->reply);
        }
        if (code != CURLE_OK) {
                snprintf(res->error, sizeof(res->error), "%s%s", curl_easy_strerror(code),
                         c->too_big       ? " (response body over the bound)"
                         : c->second_send ? " (second send refused)"
                                          : "");
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

int transport_poll(struct transport *t, int timeout_ms, int wake_fd)
{
        struct curl_waitfd wake = {.fd = wake_fd, .events = CURL_WAIT_POLLIN};
        int running = 0;
        if (curl_multi_perform(t->multi, &running) != CURLM_OK)
                return TG_ETRANSPORT;
        collect(t);
        if (t->done_count > 0 || t->sent_count > 0)
                timeout_ms = 0;
        if (timeout_ms > 0 || wake_fd >= 0) {
                if (curl_multi_poll(t->multi, wake_fd >= 0 ? &wake : NULL, wake_fd >= 0 ? 1 : 0,
                                    timeout_ms, NULL) != CURLM_OK)
                        return TG_ETRANSPORT;
                if (curl_multi_perform(t->multi, &running) != CURLM_OK)
                        return TG_ETRANSPORT;
                collect(t);
        }
        return wake_fd >= 0 && (wake.revents & CURL_WAIT_POLLIN) ? 1 : 0;
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
