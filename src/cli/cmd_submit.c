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
#include "platform/options.h"

static const char submit_about[] =
    "Submits one refund through the API (POST /v1/refunds) and prints the answer. The same "
    "operation id with the same request is answered with its current state, never accepted "
    "twice.";
static const char submit_epilogue[] =
    "Exit status: 0 accepted (202) or already known (200); 3 refused for\n"
    "capacity (503: nothing stored; send it again after the Retry-After printed on\n"
    "stderr); 1 refused (4xx/5xx) or the API cannot be reached; 2 usage error.\n";

static const char status_about[] =
    "Prints an operation's state, its calls and its audit (GET /v1/refunds/ID).";
static const char status_epilogue[] =
    "Exit status: 0 found, 1 not found or the API cannot be reached, 2 usage.\n";

static const char api_help[] = "the API's base URL (default: the config's api.listen)";

/* The exit status of the API's answer (the entry points return it). */
static int finish(const char *cmd, long status, char *body, const char *retry_after)
{
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
        const char *config = NULL, *op = NULL, *pay = NULL, *cur = NULL, *api_url = NULL;
        int64_t amount = 0;
        const struct opt opts[] = {
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &config,
             .required = true,
             .help = "the config file (the API's address and token)"},
            {.name = "operation-id",
             .arg = "ID",
             .string = &op,
             .required = true,
             .help = "the operation id, also the idempotency key"},
            {.name = "payment-id",
             .arg = "P",
             .string = &pay,
             .required = true,
             .help = "the payment to refund"},
            {.name = "amount",
             .arg = "MINOR_UNITS",
             .i64 = &amount,
             .min = 1,
             .max = INT64_MAX,
             .required = true,
             .help = "the amount in minor units (cents)"},
            {.name = "currency",
             .arg = "CUR",
             .string = &cur,
             .required = true,
             .help = "the currency code (TWD)"},
            {.name = "api", .arg = "URL", .string = &api_url, .help = api_help},
        };
        const struct options_spec spec = {.prog = "tollgate submit",
                                          .description = submit_about,
                                          .opts = opts,
                                          .nopts = sizeof(opts) / sizeof(opts[0]),
                                          .epilogue = submit_epilogue};
        char retry_after[32];
        struct tg_config *cfg;
        long status = 0;
        char *body = NULL, *req;
        json_t *o;
        int r;

        r = options_parse(&spec, argc, argv, NULL, NULL);
        if (r)
                return options_exit_status(r);
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
        if (r == 0)
                r = cli_http("submit", cfg, api_url, "POST", "/v1/refunds", req, &status, &body,
                             retry_after, sizeof(retry_after));
        r = r < 0 ? options_exit_status(r) : finish("submit", status, body, retry_after);
        free(req);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}

int cmd_status(int argc, char **argv)
{
        const char *config = NULL, *api_url = NULL;
        const struct opt opts[] = {
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &config,
             .required = true,
             .help = "the config file (the API's address and token)"},
            {.name = "api", .arg = "URL", .string = &api_url, .help = api_help},
        };
        const struct options_spec spec = {.prog = "tollgate status",
                                          .synopsis = "ID",
                                          .description = status_about,
                                          .opts = opts,
                                          .nopts = sizeof(opts) / sizeof(opts[0]),
                                          .max_args = 1,
                                          .epilogue = status_epilogue};
        const char *args[1] = {NULL};
        char path[64 + TG_OP_ID_MAX], retry_after[32];
        struct tg_config *cfg;
        size_t nargs = 0;
        long status = 0;
        char *body = NULL;
        int r;

        r = options_parse(&spec, argc, argv, args, &nargs);
        if (r)
                return options_exit_status(r);
        if (nargs != 1) {
                fprintf(stderr, "tollgate status: an operation ID is required\n");
                return 2;
        }
        /* Only ids that could exist go into the URL: no path tricks. */
        if (refund_validate_operation_id(args[0], strlen(args[0]), NULL) < 0) {
                fprintf(stderr, "tollgate status: '%s' is not a valid operation id\n", args[0]);
                return 2;
        }
        snprintf(path, sizeof(path), "/v1/refunds/%s", args[0]);
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("status", config, cfg);
        if (r == 0)
                r = cli_http("status", cfg, api_url, "GET", path, NULL, &status, &body, retry_after,
                             sizeof(retry_after));
        r = r < 0 ? options_exit_status(r) : finish("status", status, body, retry_after);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}
