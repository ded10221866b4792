/*
 * cli — shared plumbing of the operator commands (see the header). Nothing
 * here logs: a command prints its result on stdout and its problem on
 * stderr, in one line that names what went wrong.
 */
#include "cli/cli.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/tg_error.h"
#include "daemon/log.h"

#define HTTP_BODY_MAX   (16u * 1024 * 1024)
#define HTTP_TIMEOUT_MS 30000L

int cli_parse(const char *cmd, int argc, char **argv, const struct cli_opt *opts, size_t nopts,
              const char *help, const char **positional, size_t max_positional, size_t *ret_npos)
{
        size_t npos = 0;

        for (int i = 0; i < argc; i++) {
                const char *a = argv[i];
                bool matched = false;

                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        fputs(help, stdout);
                        exit(0);
                }
                if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
                        if (npos >= max_positional) {
                                fprintf(stderr,
                                        "tollgate %s: unexpected argument '%s' (try --help)\n", cmd,
                                        a);
                                return 2;
                        }
                        positional[npos++] = a;
                        continue;
                }
                for (size_t k = 0; k < nopts && !matched; k++) {
                        size_t n = strlen(opts[k].name);
                        if (strncmp(a, opts[k].name, n) != 0)
                                continue;
                        if (a[n] == '\0') {
                                matched = true;
                                if (!opts[k].takes_value) {
                                        *opts[k].value = "1";
                                } else if (i + 1 >= argc) {
                                        fprintf(stderr, "tollgate %s: %s needs a value\n", cmd,
                                                opts[k].name);
                                        return 2;
                                } else {
                                        *opts[k].value = argv[++i];
                                }
                        } else if (a[n] == '=' && opts[k].takes_value) {
                                matched = true;
                                *opts[k].value = a + n + 1;
                        }
                }
                if (!matched) {
                        fprintf(stderr, "tollgate %s: unknown option '%s' (try --help)\n", cmd, a);
                        return 2;
                }
        }
        if (ret_npos)
                *ret_npos = npos;
        return 0;
}

int cli_load_config(const char *cmd, const char *path, struct tg_config *cfg)
{
        char err[512];
        enum log_level lvl;

        if (!path) {
                fprintf(stderr, "tollgate %s: --config FILE is required\n", cmd);
                return 2;
        }
        if (config_load(path, cfg, err, sizeof(err)) < 0) {
                fprintf(stderr, "tollgate %s: %s: %s\n", cmd, path, err);
                return 2;
        }
        if (log_level_parse(cfg->log_level, &lvl) == 0)
                log_set_level(lvl);
        return 0;
}

int cli_open_store(const char *cmd, const struct tg_config *cfg, struct store **ret_store)
{
        int r = store_open(cfg->store_url, ret_store);

        if (r < 0) {
                fprintf(stderr, "tollgate %s: cannot open the store: %s\n", cmd, tg_strerror(r));
                return 1;
        }
        return 0;
}

int cli_parse_i64(const char *s, long long lo, long long hi, long long *ret_value)
{
        char *end = NULL;
        long long v;

        if (!s || s[0] == '\0' || s[0] == ' ' || s[0] == '+')
                return TG_EINVAL;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno != 0 || *end != '\0' || v < lo || v > hi)
                return TG_EINVAL;
        *ret_value = v;
        return 0;
}

struct body_buf {
        char *p;
        size_t len;
        bool too_big;
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct body_buf *b = userdata;
        size_t n = size * nmemb;
        char *q;

        if (b->len + n > HTTP_BODY_MAX) {
                b->too_big = true;
                return 0;
        }
        q = realloc(b->p, b->len + n + 1);
        if (!q)
                return 0;
        b->p = q;
        memcpy(b->p + b->len, ptr, n);
        b->len += n;
        b->p[b->len] = '\0';
        return n;
}

struct header_out {
        char *retry_after;
        size_t size;
};

static size_t on_header(char *ptr, size_t size, size_t nitems, void *userdata)
{
        static const char name[] = "retry-after:";
        struct header_out *h = userdata;
        size_t n = size * nitems;

        if (h->retry_after && n > sizeof(name) - 1 &&
            strncasecmp(ptr, name, sizeof(name) - 1) == 0) {
                size_t i = sizeof(name) - 1, j = 0;
                while (i < n && ptr[i] == ' ')
                        i++;
                while (i < n && ptr[i] != '\r' && ptr[i] != '\n' && j + 1 < h->size)
                        h->retry_after[j++] = ptr[i++];
                h->retry_after[j] = '\0';
        }
        return n;
}

static void api_base(const struct tg_config *cfg, char *out, size_t size)
{
        const char *host = cfg->api_listen_host;

        if (strcmp(host, "0.0.0.0") == 0)
                host = "127.0.0.1";
        else if (strcmp(host, "::") == 0)
                host = "::1";
        if (strchr(host, ':'))
                snprintf(out, size, "http://[%s]:%d", host, cfg->api_listen_port);
        else
                snprintf(out, size, "http://%s:%d", host, cfg->api_listen_port);
}

int cli_http(const char *cmd, const struct tg_config *cfg, const char *api_url, const char *method,
             const char *path, const char *body, long *ret_status, char **ret_body,
             char *retry_after, size_t retry_after_size)
{
        char base[512], url[1024], auth[300];
        struct body_buf b = {0};
        struct header_out ho = {retry_after, retry_after_size};
        struct curl_slist *headers = NULL;
        CURL *curl;
        CURLcode rc;
        int r = 0;

        if (retry_after && retry_after_size)
                retry_after[0] = '\0';
        if (api_url)
                snprintf(base, sizeof(base), "%s", api_url);
        else
                api_base(cfg, base, sizeof(base));
        snprintf(url, sizeof(url), "%s%s", base, path);
        curl = curl_easy_init();
        if (!curl)
                return TG_ENOMEM;
        if (cfg->api_token[0]) {
                snprintf(auth, sizeof(auth), "Authorization: Bearer %s", cfg->api_token);
                headers = curl_slist_append(headers, auth);
                explicit_bzero(auth, sizeof(auth));
        }
        if (body)
                headers = curl_slist_append(headers, "Content-Type: application/json");
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, HTTP_TIMEOUT_MS);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, &ho);
        if (body) {
                curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        }
        rc = curl_easy_perform(curl);
        if (rc != CURLE_OK) {
                fprintf(stderr, "tollgate %s: cannot reach the API at %s: %s\n", cmd, base,
                        b.too_big ? "answer too large" : curl_easy_strerror(rc));
                r = TG_ETRANSPORT;
                free(b.p);
        } else {
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, ret_status);
                if (!b.p)
                        b.p = calloc(1, 1);
                if (!b.p)
                        r = TG_ENOMEM;
                else
                        *ret_body = b.p;
        }
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
        return r;
}
