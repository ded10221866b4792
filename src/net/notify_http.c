/*
 * notify_http — the event deliveries' own libcurl multi handle (see
 * notify_http.h). One slot per delivery that may be open; a slot holds its
 * easy handle, its header list and its body until the delivery ends.
 */
#include "net/notify_http.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"

#define NOTIFY_HTTP_MAX 256

struct slot {
        CURL *easy;
        struct curl_slist *headers;
        char *body;
        int64_t cookie;
        char err[CURL_ERROR_SIZE];
};

struct notify_http {
        CURLM *multi;
        unsigned max, open;
        struct slot *slots;
};

int notify_http_new(unsigned max, struct notify_http **ret_http)
{
        struct notify_http *h;

        if (!ret_http || max == 0 || max > NOTIFY_HTTP_MAX)
                return TG_EINVAL;
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return TG_ETRANSPORT;
        h = calloc(1, sizeof(*h));
        if (!h)
                return TG_ENOMEM;
        h->max = max;
        h->slots = calloc(max, sizeof(*h->slots));
        h->multi = curl_multi_init();
        if (!h->slots || !h->multi) {
                notify_http_free(h);
                return TG_ENOMEM;
        }
        *ret_http = h;
        return 0;
}

static void slot_clear(struct notify_http *h, struct slot *s)
{
        if (s->easy) {
                curl_multi_remove_handle(h->multi, s->easy);
                curl_easy_cleanup(s->easy);
                h->open--;
        }
        curl_slist_free_all(s->headers);
        free(s->body);
        memset(s, 0, sizeof(*s));
}

void notify_http_free(struct notify_http *h)
{
        if (!h)
                return;
        for (unsigned i = 0; h->slots && i < h->max; i++)
                slot_clear(h, &h->slots[i]);
        if (h->multi)
                curl_multi_cleanup(h->multi);
        free(h->slots);
        free(h);
}

static size_t drop_body(char *ptr, size_t size, size_t n, void *ud)
{
        (void)ptr;
        (void)ud;
        return size * n; /* the answer's body does not matter, only its status */
}

int notify_http_start(struct notify_http *h, const char *url, const char *body,
                      const char *const *headers, long timeout_ms, int64_t cookie)
{
        struct slot *s = NULL;

        if (!h || !url || !body || timeout_ms <= 0)
                return TG_EINVAL;
        for (unsigned i = 0; i < h->max && !s; i++)
                if (!h->slots[i].easy)
                        s = &h->slots[i];
        if (!s)
                return TG_EFULL;
        s->easy = curl_easy_init();
        if (s->easy)
                h->open++; /* slot_clear() counts it back */
        s->body = strdup(body);
        if (!s->body || !s->easy)
                goto nomem;
        for (const char *const *p = headers; p && *p; p++) {
                struct curl_slist *l = curl_slist_append(s->headers, *p);
                if (!l)
                        goto nomem;
                s->headers = l;
        }
        s->cookie = cookie;
        curl_easy_setopt(s->easy, CURLOPT_URL, url);
        curl_easy_setopt(s->easy, CURLOPT_POST, 1L);
        curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body);
        curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(s->body));
        curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
        curl_easy_setopt(s->easy, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(s->easy, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(s->easy, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(s->easy, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, drop_body);
        curl_easy_setopt(s->easy, CURLOPT_ERRORBUFFER, s->err);
        curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
        if (curl_multi_add_handle(h->multi, s->easy) != CURLM_OK)
                goto nomem;
        return 0;
nomem:
        slot_clear(h, s);
        return TG_ENOMEM;
}

int notify_http_poll(struct notify_http *h, int wait_ms)
{
        int running = 0;

        if (!h)
                return TG_EINVAL;
        if (curl_multi_perform(h->multi, &running) != CURLM_OK)
                return TG_ETRANSPORT;
        if (wait_ms > 0 && curl_multi_poll(h->multi, NULL, 0, wait_ms, NULL) != CURLM_OK)
                return TG_ETRANSPORT;
        if (curl_multi_perform(h->multi, &running) != CURLM_OK)
                return TG_ETRANSPORT;
        return 0;
}

int notify_http_next_done(struct notify_http *h, int64_t *ret_cookie, long *ret_status, char *err,
                          size_t err_size)
{
        CURLMsg *m;
        int left = 0;

        if (!h || !ret_cookie || !ret_status)
                return TG_EINVAL;
        while ((m = curl_multi_info_read(h->multi, &left)) != NULL) {
                struct slot *s = NULL;
                long status = 0;

                if (m->msg != CURLMSG_DONE)
                        continue;
                curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
                if (!s)
                        continue;
                if (m->data.result == CURLE_OK)
                        curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
                if (err && err_size)
                        snprintf(err, err_size, "%s",
                                 m->data.result == CURLE_OK ? ""
                                 : s->err[0]                ? s->err
                                                            : curl_easy_strerror(m->data.result));
                *ret_cookie = s->cookie;
                *ret_status = status;
                slot_clear(h, s);
                return 0;
        }
        return TG_ENOTFOUND;
}

unsigned notify_http_open(const struct notify_http *h)
{
        return h ? h->open : 0;
}
