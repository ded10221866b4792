/*
 * cmd_submit — `tollgate submit` and `tollgate status ID`, through the API of
 * the config (or --api URL) with its bearer token, so a refund submitted
 * here passes the same validation and admission control as any client's.
 * The API's JSON answer is printed on stdout as it came.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/refund_validate.h"
#include "core/tg_error.h"

static const char submit_help[] =
    "usage: tollgate submit --config FILE --operation-id ID --payment-id P\n"
    "                       --amount MINOR_UNITS --currency CUR [--api URL]\n"
    "Submits one refund through the API (POST /v1/refunds) and prints the answer.\n"
    "The same operation id with the same request is answered with its current\n"
    "state, never accepted twice.\n"
    "Exit status: 0 accepted (202) or already known (200); 3 refused for\n"
    "capacity (503: nothing stored; send it again after the Retry-After printed on\n"
    "stderr); 1 refused (4xx/5xx) or the API cannot be reached; 2 usage error.\n";

static const char status_help[] =
    "usage: tollgate status ID --config FILE [--api URL]\n"
    "Prints an operation's state, its calls and its audit (GET /v1/refunds/ID).\n"
    "Exit status: 0 found, 1 not found or the API cannot be reached, 2 usage.\n";

static int finish(const char *cmd, int r, long status, char *body, const char *retry_after)
{
        if (r < 0)
                return 1;
        fputs(body, stdout);
        fputc('\n', stdout);
        free(body);
        if (status == 200 || status == 202)
                return 0;
        if (status == 503) {
                fprintf(stderr,
                        "tollgate %s: refused for capacity, nothing stored; retry after %s s\n",
                        cmd, retry_after[0] ? retry_after : "?");
                return 3;
        }
        fprintf(stderr, "tollgate %s: the API answered %ld\n", cmd, status);
        return 1;
}

int cmd_submit(int argc, char **argv)
{
        const char *config = NULL, *op = NULL, *pay = NULL, *amount_s = NULL, *cur = NULL;
        const char *api_url = NULL;
        const struct cli_opt opts[] = {
            {"--config", true, &config},  {"--operation-id", true, &op},
            {"--payment-id", true, &pay}, {"--amount", true, &amount_s},
            {"--currency", true, &cur},   {"--api", true, &api_url},
        };
        char retry_after[32];
        struct tg_config *cfg;
        long long amount = 0;
        long status = 0;
        char *body = NULL, *req;
        json_t *o;
        int r;

        r = cli_parse("submit", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), submit_help, NULL,
                      0, NULL);
        if (r)
                return r;
        if (!op || !pay || !amount_s || !cur) {
                fprintf(stderr, "tollgate submit: --operation-id, --payment-id, --amount and "
                                "--currency are required\n");
                return 2;
        }
        if (cli_parse_i64(amount_s, 1, INT64_MAX, &amount) < 0) {
                fprintf(stderr,
                        "tollgate submit: --amount must be a positive integer in minor "
                        "units, got '%s'\n",
                        amount_s);
                return 2;
        }
        o = json_pack("{s:s, s:s, s:I, s:s}", "operation_id", op, "payment_id", pay, "amount",
                      (json_int_t)amount, "currency", cur);
        if (!o) {
                fprintf(stderr, "tollgate submit: the values must be valid UTF-8 text\n");
                return 2;
        }
        req = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        cfg = malloc(sizeof(*cfg));
        if (!req || !cfg) {
                free(req);
                free(cfg);
                return 1;
        }
        r = cli_load_config("submit", config, cfg);
        if (r == 0) {
                r = cli_http("submit", cfg, api_url, "POST", "/v1/refunds", req, &status, &body,
                             retry_after, sizeof(retry_after));
                r = finish("submit", r, status, body, retry_after);
        }
        free(req);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}

int cmd_status(int argc, char **argv)
{
        const char *config = NULL, *api_url = NULL;
        const struct cli_opt opts[] = {
            {"--config", true, &config},
            {"--api", true, &api_url},
        };
        const char *pos[1] = {NULL};
        char path[64 + TG_OP_ID_MAX], retry_after[32];
        struct tg_config *cfg;
        size_t npos = 0;
        long status = 0;
        char *body = NULL;
        int r;

        r = cli_parse("status", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), status_help, pos,
                      1, &npos);
        if (r)
                return r;
        if (npos != 1) {
                fprintf(stderr, "tollgate status: an operation ID is required\n");
                return 2;
        }
        /* Only ids that could exist go into the URL: no path tricks. */
        if (refund_validate_operation_id(pos[0], strlen(pos[0]), NULL) < 0) {
                fprintf(stderr, "tollgate status: '%s' is not a valid operation id\n", pos[0]);
                return 2;
        }
        snprintf(path, sizeof(path), "/v1/refunds/%s", pos[0]);
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("status", config, cfg);
        if (r == 0) {
                r = cli_http("status", cfg, api_url, "GET", path, NULL, &status, &body, retry_after,
                             sizeof(retry_after));
                r = finish("status", r, status, body, retry_after);
        }
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}
