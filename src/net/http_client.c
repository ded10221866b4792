/*
 * http_client — one blocking request on a fresh libcurl easy handle (see
 * the header). Invariants: the response buffer is never written past
 * resp_size (the write callback refuses the transfer instead); the easy
 * handle and the header list are freed on every path.
 */
#include "net/http_client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/tg_error.h"
#include "platform/clock.h"

struct sink {
        char *buf;
        size_t size;
        size_t len;
        bool too_big;
};

static size_t on_body(char *data, size_t one, size_t n, void *userdata)
{
        struct sink *s = userdata;
        size_t bytes = one * n;

        if (!s->buf)
                return bytes; /* discarded */
        if (bytes > s->size - 1 - s->len) {
                s->too_big = true;
                return 0; /* libcurl stops the transfer */
        }
        memcpy(s->buf + s->len, data, bytes);
        s->len += bytes;
        s->buf[s->len] = '\0';
        return bytes;
}

struct capture {
        const char *name;
        size_t name_len;
        char *value;
        size_t size;
};

static size_t on_header(char *line, size_t one, size_t n, void *userdata)
{
        struct capture *c = userdata;
        size_t bytes = one * n, i, j = 0;

        if (!c->name || bytes <= c->name_len || line[c->name_len] != ':' ||
            strncasecmp(line, c->name, c->name_len) != 0)
                return bytes;
        i = c->name_len + 1;
        while (i < bytes && (line[i] == ' ' || line[i] == '\t'))
                i++;
        while (i < bytes && line[i] != '\r' && line[i] != '\n' && j + 1 < c->size)
                c->value[j++] = line[i++];
        c->value[j] = '\0';
        return bytes;
}

int http_client_request(const struct http_client_request *req,
                        struct http_client_result *ret_result)
{
        struct http_client_result res;
        struct sink sink = {.buf = req->resp, .size = req->resp_size, .len = 0};
        struct capture cap = {.name = req->capture_header,
                              .name_len = req->capture_header ? strlen(req->capture_header) : 0,
                              .value = res.header,
                              .size = sizeof(res.header)};
        struct curl_slist *list = NULL;
        tg_mono_ns t0;
        CURLcode cc;
        CURL *h;
        int r = 0;

        if (!req->method || !req->url || (req->resp && req->resp_size == 0))
                return TG_EINVAL;
        memset(&res, 0, sizeof(res));
        h = curl_easy_init();
        if (!h)
                return TG_ENOMEM;
        for (size_t i = 0; req->headers && req->headers[i]; i++) {
                struct curl_slist *next = curl_slist_append(list, req->headers[i]);
                if (!next) {
                        curl_slist_free_all(list);
                        curl_easy_cleanup(h);
                        return TG_ENOMEM;
                }
                list = next;
        }
        if (req->resp)
                req->resp[0] = '\0';
        curl_easy_setopt(h, CURLOPT_URL, req->url);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
        if (req->body) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(req->body));
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
        curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        if (req->timeout_ms > 0)
                curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req->timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &cap);

        t0 = clock_mono_now();
        cc = curl_easy_perform(h);
        res.elapsed_ms = (double)(clock_mono_now() - t0) / 1e6;
        if (cc == CURLE_OK) {
                curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res.status);
        } else if (sink.too_big) {
                curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res.status);
                snprintf(res.error, sizeof(res.error), "answer larger than %zu bytes",
                         req->resp_size - 1);
                r = TG_EFULL;
        } else {
                res.timed_out = cc == CURLE_OPERATION_TIMEDOUT;
                res.no_answer =
                    cc == CURLE_GOT_NOTHING || cc == CURLE_RECV_ERROR || cc == CURLE_PARTIAL_FILE;
                snprintf(res.error, sizeof(res.error), "%s", curl_easy_strerror(cc));
                r = TG_ETRANSPORT;
        }
        curl_slist_free_all(list);
        curl_easy_cleanup(h);
        *ret_result = res;
        return r;
}
