/*
 * transport — libcurl multi interface at the exit's HTTP boundary: the
 * transport's life cycle and credentials, starting a call, the multi loop
 * (transport_poll), the pre-request hook that holds a request for its slot
 * and reports when it went on the wire, and the rings the caller pops. One
 * call's handle is made in transport_call.c, what an ended call says in
 * transport_result.c (transport_int.h).
 *
 * Invariants:
 *   - a call starts when transport_start() is called, never later: no
 *     libcurl connection limit can park it (limits are unlimited, the
 *     caller's pacer is the gate) and open calls are bounded by max_open;
 *   - a call is sent at most once: fresh connection per call unless reuse is
 *     configured, and the pre-request hook aborts any second send of a handle
 *     (libcurl's silent re-send on a dead reused connection);
 *   - each call is reported sent (or not) once, and ends once: its result
 *     waits in a ring of max_open entries, its sent report in one of
 *     2 * max_open, so neither can overflow;
 *   - credentials live in secret memory, shared by reference count between
 *     the transport (the current set) and each call that started with them;
 *     a header line that carried a secret is wiped before it is freed.
 */
#include "net/transport_int.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/encode.h"
#include "core/keep_alive.h"
#include "core/tg_error.h"
#include "net/oauth_token.h"
#include "net/provider_reply.h"
#include "platform/clock.h"
#include "platform/secmem.h"

/* ---- process-wide setup ---------------------------------------------------- */

static int global_init_once(void)
{
        static int inited;
        if (!inited) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return TG_ETRANSPORT;
                transport_watch_init();
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

/* "Authorization: Basic base64(id:secret)" (RFC 7617), the token call's
 * credentials: its length, or -1 when it does not fit. The pair is made
 * on the stack and wiped. */
static int basic_line(const char *id, const char *secret, char *line, size_t size)
{
        char pair[HEADER_LINE_MAX];
        struct tg_strbuf sb;
        int n = snprintf(pair, sizeof(pair), "%s:%s", id, secret);

        if (n < 0 || (size_t)n >= sizeof(pair) / 2) {
                explicit_bzero(pair, sizeof(pair));
                return -1;
        }
        tg_strbuf_init(&sb, line, size);
        tg_strbuf_adds(&sb, "Authorization: Basic ");
        encode_base64((const unsigned char *)pair, (size_t)n, &sb);
        explicit_bzero(pair, sizeof(pair));
        return tg_strbuf_status(&sb) < 0 ? -1 : (int)sb.len;
}

/* One secret block: the struct, then the auth line (oauth2: the token
 * call's Basic line), the key, the PEM texts. */
static int creds_make(const struct transport_lane *t, const struct transport_credentials *in,
                      struct creds **ret)
{
        char line[HEADER_LINE_MAX];
        size_t line_len = 0, size;
        struct creds *c;
        unsigned char *p;
        int n;

        if ((t->auth != TRANSPORT_AUTH_NONE && (!in->auth_secret || !in->auth_secret[0])) ||
            (t->auth == TRANSPORT_AUTH_OAUTH2 && (!in->client_id || !in->client_id[0])) ||
            (t->sign && (!in->signing_key || in->signing_key_len == 0)) ||
            (!in->client_cert_pem != !in->client_key_pem))
                return TG_EINVAL;
        if (t->auth == TRANSPORT_AUTH_OAUTH2)
                n = basic_line(in->client_id, in->auth_secret, line, sizeof(line));
        else if (t->auth == TRANSPORT_AUTH_BEARER)
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

int transport_set_lane_credentials(struct transport *t, unsigned lane,
                                   const struct transport_credentials *in)
{
        struct creds *c = NULL;
        int r;

        if (!t || !in || lane >= t->nlanes)
                return TG_EINVAL;
        r = creds_make(&t->lanes[lane], in, &c);
        if (r < 0)
                return r;
        creds_release(t->lanes[lane].creds);
        t->lanes[lane].creds = c;
        return 0;
}

int transport_set_credentials(struct transport *t, const struct transport_credentials *in)
{
        return transport_set_lane_credentials(t, 0, in);
}

/* ---- life cycle ------------------------------------------------------------------ */

static char *dup_or_default(const char *s, const char *def)
{
        return strdup(s && *s ? s : def);
}

/* Remembers a header name the reply map reads. */
static void want_headers(struct transport_lane *t, const struct field_source *s)
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

static bool config_ok(const struct transport_config *config)
{
        if (!config->base_url || !*config->base_url || config->max_open == 0 ||
            config->max_response_bytes == 0)
                return false;
        if (config->auth == TRANSPORT_AUTH_OAUTH2 &&
            (!config->token_path || config->token_path[0] != '/'))
                return false;
        return config->auth != TRANSPORT_AUTH_HEADER ||
               (config->auth_header && *config->auth_header);
}

static void lane_free(struct transport_lane *t)
{
        creds_release(t->creds);
        secmem_free(t->token_line);
        free(t->token_path);
        free(t->base_url);
        free(t->key_header);
        free(t->request_id_header);
        free(t->attempt_header);
        free(t->ca_file);
        free(t->fixed_headers);
        free(t->request_map);
        free(t->reply_map);
        free(t->auth_header);
        free(t->signature_header);
        free(t->timestamp_header);
        free(t->signature_prefix);
}

/* One lane from its config: 0 or TG_ENOMEM (the caller frees a half-made one). */
static int lane_init(struct transport_lane *t, const struct transport_config *config)
{
        t->base_url = strdup(config->base_url);
        t->key_header = dup_or_default(config->key_header, "Idempotency-Key");
        t->request_id_header = dup_or_default(config->request_id_header, "X-Request-Id");
        t->attempt_header = dup_or_default(config->attempt_header, "X-Attempt");
        t->ca_file = config->ca_file && *config->ca_file ? strdup(config->ca_file) : NULL;
        t->fixed_headers = strdup(config->fixed_headers ? config->fixed_headers : "");
        t->connect_timeout_ms = config->connect_timeout_ms > 0 ? config->connect_timeout_ms : 1000;
        t->max_response_bytes = config->max_response_bytes;
        t->max_open = config->max_open;
        t->reuse = config->reuse_connections;
        t->request_map = malloc(sizeof(*t->request_map));
        t->reply_map = malloc(sizeof(*t->reply_map));
        t->auth = config->auth;
        t->auth_header = dup_or_default(config->auth_header, "X-Api-Key");
        t->token_path = dup_or_default(config->token_path, "/v1/oauth2/token");
        t->sign = config->signing_string != NULL;
        t->signature_header = dup_or_default(config->signature_header, "X-Signature");
        t->timestamp_header = dup_or_default(config->timestamp_header, "X-Timestamp");
        t->signature_prefix = strdup(config->signature_prefix ? config->signature_prefix : "");
        t->signature_encoding = config->signature_encoding;
        if (!t->base_url || !t->key_header || !t->request_id_header || !t->attempt_header ||
            (config->ca_file && *config->ca_file && !t->ca_file) || !t->request_map ||
            !t->reply_map || !t->auth_header || !t->token_path || !t->signature_header ||
            !t->timestamp_header || !t->signature_prefix || !t->fixed_headers)
                return TG_ENOMEM;
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
                return creds_make(t, &none, &t->creds);
        }
        return 0;
}

int transport_new_lanes(const struct transport_config *configs, unsigned n,
                        struct transport **ret_transport)
{
        int64_t life = 0;
        int r;

        if (!configs || n == 0 || n > TRANSPORT_LANES_MAX)
                return TG_EINVAL;
        for (unsigned i = 0; i < n; i++)
                if (!config_ok(&configs[i]))
                        return TG_EINVAL;
        r = global_init_once();
        if (r < 0)
                return r;
        struct transport *t = calloc(1, sizeof(*t));
        if (!t)
                return TG_ENOMEM;
        t->lanes = calloc(n, sizeof(*t->lanes));
        if (!t->lanes) {
                free(t);
                return TG_ENOMEM;
        }
        t->nlanes = n;
        for (unsigned i = 0; i < n; i++) {
                r = lane_init(&t->lanes[i], &configs[i]);
                if (r < 0) {
                        transport_free(t);
                        return r;
                }
                t->max_open += configs[i].max_open;
                t->reuse = t->reuse || configs[i].reuse_connections;
                /* one pool for every lane: the shortest configured idle life */
                if (configs[i].reuse_connections && configs[i].keepalive_idle_ms > 0 &&
                    (life == 0 || configs[i].keepalive_idle_ms < life))
                        life = configs[i].keepalive_idle_ms;
        }
        t->done = calloc(t->max_open, sizeof(*t->done));
        t->done_lane = calloc(t->max_open, sizeof(*t->done_lane));
        t->sent = calloc(2 * (size_t)t->max_open, sizeof(*t->sent));
        t->multi = curl_multi_init();
        if (!t->sent || !t->done || !t->done_lane || !t->multi) {
                transport_free(t);
                return TG_ENOMEM;
        }
        r = transport_pool_init(t, life);
        if (r < 0) {
                transport_free(t);
                return r;
        }
        /* No hidden queue: libcurl must never park a transfer behind a
         * connection limit. Our own bounds (each lane's max_open) are the
         * only ones. */
        curl_multi_setopt(t->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
        curl_multi_setopt(t->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
        curl_multi_setopt(t->multi, CURLMOPT_MAXCONNECTS, (long)t->max_open);
        curl_multi_setopt(t->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
        *ret_transport = t;
        return 0;
}

int transport_new(const struct transport_config *config, struct transport **ret_transport)
{
        return transport_new_lanes(config, 1, ret_transport);
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
        transport_watch_release(c->watch);
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
        transport_pool_release(t); /* after the cache's connections closed through it */
        for (unsigned i = 0; t->lanes && i < t->nlanes; i++)
                lane_free(&t->lanes[i]);
        free(t->lanes);
        free(t->done);
        free(t->done_lane);
        free(t->sent);
        free(t);
}

/* ---- the send hook --------------------------------------------------------------- */

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
        if (c->lane->reuse)
                transport_pool_busy(c->t, local_port);
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

/* ---- making a call ------------------------------------------------------------------ */

int transport_start(struct transport *t, const struct transport_call *call)
{
        if (!t || !call || !call->operation_id || !call->request_id || call->timeout_ms <= 0 ||
            call->lane >= t->nlanes)
                return TG_EINVAL;
        struct transport_lane *lane = &t->lanes[call->lane];
        if (lane->open >= lane->max_open)
                return TG_EFULL;
        /* Until the credentials the config asks for are given, nothing goes
         * out without them. */
        if (!lane->creds)
                return TG_EINVAL;
        /* oauth2: a token call first; no other call goes out without one */
        if (call->token ? lane->auth != TRANSPORT_AUTH_OAUTH2
                        : lane->auth == TRANSPORT_AUTH_OAUTH2 && !lane->token_line)
                return TG_EINVAL;
        struct call *c = calloc(1, sizeof(*c));
        if (!c)
                return TG_ENOMEM;
        c->t = t;
        c->lane = lane;
        c->cookie = call->cookie;
        c->request = call->request;
        c->token = call->token;
        c->not_before = call->not_before;
        c->not_after = call->not_after;
        c->max_response = lane->max_response_bytes;
        c->creds = lane->creds;
        c->creds->refs++;
        c->easy = curl_easy_init();
        if (!c->easy) {
                call_free(c);
                return TG_ENOMEM;
        }
        int r = transport_call_setup(lane, c, call);
        if (r < 0) {
                call_free(c);
                return r;
        }
        /* the send hook (above): when the request went on the wire */
        curl_easy_setopt(c->easy, CURLOPT_DEBUGFUNCTION, on_debug);
        curl_easy_setopt(c->easy, CURLOPT_DEBUGDATA, c);
        curl_easy_setopt(c->easy, CURLOPT_VERBOSE, 1L);
        curl_easy_setopt(c->easy, CURLOPT_PREREQFUNCTION, on_prereq);
        curl_easy_setopt(c->easy, CURLOPT_PREREQDATA, c);
        if (lane->reuse)
                transport_pool_setup(t, c->easy);
        c->started = clock_mono_now();
        /* no request of this call may go out on a connection about to be
         * closed by the provider: those idle too long go first */
        transport_pool_sweep(t, c->started);
        if (curl_multi_add_handle(t->multi, c->easy) != CURLM_OK) {
                call_free(c);
                return TG_ETRANSPORT;
        }
        c->next = t->calls;
        if (t->calls)
                t->calls->prev = c;
        t->calls = c;
        t->open++;
        lane->open++;
        /* Kick the transfer now so the connect starts at the handoff, not at
         * the next poll. */
        int running = 0;
        curl_multi_perform(t->multi, &running);
        report_step(t);
        return 0;
}

/* ---- the loop ---------------------------------------------------------------------- */

/* A token call ended: a 200 whose body is a token answer
 * (net/oauth_token.h) makes its token the lane's, in secret memory; the
 * answer's body is wiped either way (it may hold the token). */
static void token_answer(struct transport_lane *lane, struct call *c, struct transport_result *res)
{
        char *token = secmem_alloc(OAUTH_TOKEN_MAX + 1), *line = NULL;
        int64_t expires = 0;

        res->token = true;
        if (token && res->reply.transport == TG_TR_COMPLETE && res->reply.http_status == 200 &&
            !c->too_big && c->resp &&
            oauth_token_parse(c->resp, c->resp_len, token, OAUTH_TOKEN_MAX + 1, &expires) == 0) {
                size_t size = sizeof("Authorization: Bearer ") + strlen(token);
                line = secmem_alloc(size);
                if (line) {
                        snprintf(line, size, "Authorization: Bearer %s", token);
                        secmem_free(lane->token_line);
                        lane->token_line = line;
                        res->token_ok = true;
                        res->token_expires_s = expires;
                }
        }
        if (c->resp)
                explicit_bzero(c->resp, c->resp_cap);
        secmem_free(token);
}

static void finish_call(struct transport *t, struct call *c, CURLcode code)
{
        int64_t keep_alive_ms = -1;
        unsigned at = (t->done_head + t->done_count) % t->max_open;
        if (c->keep_alive[0] &&
            keep_alive_timeout_ms(c->keep_alive, strlen(c->keep_alive), &keep_alive_ms) < 0)
                keep_alive_ms = -1;
        if (c->lane->reuse)
                transport_pool_idle(t, c->easy, keep_alive_ms, clock_mono_now());
        transport_call_result(c->lane, c, code, &t->done[at]);
        if (c->token)
                token_answer(&t->lanes[c->lane - t->lanes], c, &t->done[at]);
        t->done_lane[at] = (unsigned)(c->lane - t->lanes);
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
        t->lanes[t->done_lane[t->done_head]].open--;
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

unsigned transport_lane_open(const struct transport *t, unsigned lane)
{
        return lane < t->nlanes ? t->lanes[lane].open : 0;
}
