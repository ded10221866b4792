/*
 * cli — shared plumbing of the operator commands (see the header). Nothing
 * here logs: a command prints its result on stdout and its problem on
 * stderr, in one line that names what went wrong.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/tg_error.h"
#include "daemon/log.h"
#include "net/http_client.h"

#define HTTP_BODY_MAX   (16u * 1024 * 1024)
#define HTTP_TIMEOUT_MS 30000L

int cli_load_config(const char *cmd, const char *path, struct tg_config *cfg)
{
        char err[512];
        enum log_level lvl;

        if (!path) {
                fprintf(stderr, "tollgate %s: --config FILE is required\n", cmd);
                return TG_ECONFIG;
        }
        if (config_load(path, cfg, err, sizeof(err)) < 0) {
                fprintf(stderr, "tollgate %s: %s: %s\n", cmd, path, err);
                return TG_ECONFIG;
        }
        if (log_level_parse(cfg->log_level, &lvl) == 0)
                log_set_level(lvl);
        return 0;
}

int cli_check_account(const char *cmd, const struct tg_config *cfg, const char *account)
{
        char why[160];

        if (!account || config_account_find(cfg, account))
                return 0;
        config_account_unknown(cfg, why, sizeof(why));
        fprintf(stderr, "tollgate %s: --account \"%s\" %s\n", cmd, account, why);
        return TG_EINVAL;
}

int cli_open_store(const char *cmd, const struct tg_config *cfg, struct store **ret_store)
{
        char err[600];
        /* an operator command never creates a store: a typo in the config
         * must not leave an empty store behind and answer "nothing there" */
        const struct store_open_opts opts = {.existing = true, .err = err, .err_size = sizeof(err)};
        int r = store_open_ex(cfg->store_url, &opts, ret_store);

        if (r < 0) {
                fprintf(stderr, "tollgate %s: %s\n", cmd, err[0] ? err : tg_strerror(r));
                return r == TG_EINVAL || r == TG_ECONFIG ? TG_ESTORE : r;
        }
        return 0;
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
        const char *headers[3] = {NULL, NULL, NULL};
        struct http_client_result res;
        size_t nh = 0;
        const char *token;
        char *buf;
        int r;

        if (retry_after && retry_after_size)
                retry_after[0] = '\0';
        if (api_url)
                snprintf(base, sizeof(base), "%s", api_url);
        else
                api_base(cfg, base, sizeof(base));
        snprintf(url, sizeof(url), "%s%s", base, path);
        /* The whole answer, up to the bound; malloc only maps what is used. */
        buf = malloc(HTTP_BODY_MAX + 1);
        if (!buf)
                return TG_ENOMEM;
        /* a named credential's secret (api.credentials_file) from the
         * environment, never from the command line (ps would show it);
         * else the first token of api.token_file */
        token = getenv("TOLLGATE_TOKEN");
        if (!token || !token[0])
                token = cfg->api_token;
        if (token[0]) {
                snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
                headers[nh++] = auth;
        }
        if (body)
                headers[nh++] = "Content-Type: application/json";
        r = http_client_request(&(struct http_client_request){.method = method,
                                                              .url = url,
                                                              .headers = headers,
                                                              .body = body,
                                                              .timeout_ms = HTTP_TIMEOUT_MS,
                                                              .resp = buf,
                                                              .resp_size = HTTP_BODY_MAX + 1,
                                                              .capture_header = "Retry-After"},
                                &res);
        explicit_bzero(auth, sizeof(auth));
        if (r == TG_ETRANSPORT || r == TG_EFULL) {
                fprintf(stderr, "tollgate %s: cannot reach the API at %s: %s\n", cmd, base,
                        r == TG_EFULL ? "answer too large" : res.error);
                free(buf);
                return TG_ETRANSPORT;
        }
        if (r < 0) {
                free(buf);
                return r;
        }
        if (retry_after && retry_after_size)
                snprintf(retry_after, retry_after_size, "%s", res.header);
        *ret_status = res.status;
        *ret_body = buf;
        return 0;
}

int cli_print_json(json_t *o, size_t flags)
{
        char *text = o ? json_dumps(o, flags) : NULL;

        json_decref(o);
        if (!text)
                return TG_ENOMEM;
        puts(text);
        free(text);
        return 0;
}
