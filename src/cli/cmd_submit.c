/*
 * cmd_submit — `tollgate submit` and `tollgate status ID`, through the API of
 * the config (or --api URL) with its bearer token, so a refund submitted
 * here passes the same validation and admission control as any client's.
 * `submit --batch FILE` sends a file of up to 500 refunds to POST
 * /v1/refunds:batch as it is (the API parses it; the file is read whole,
 * bounded by api.max_batch_bytes). The API's JSON answer is printed on
 * stdout as it came.
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
    "Submits one refund through the API (POST /v1/refunds), or a file of up to 500 "
    "(POST /v1/refunds:batch), and prints the answer. The same "
    "operation id with the same request is answered with its current state, never accepted "
    "twice.";
static const char submit_epilogue[] =
    "One refund: --operation-id, --payment-id, --amount and --currency. Or --batch\n"
    "FILE: a JSON file {\"refunds\": [refund, ...]} of up to 500 refunds, each as the\n"
    "body of POST /v1/refunds; the answer has one result per refund, in order, and\n"
    "the same file sent again is answered 200 for each refund it stored.\n"
    "Exit status: 0 accepted (202) or already known (200), for a batch every\n"
    "refund; 3 refused for capacity (503: nothing stored; send it again after the\n"
    "Retry-After printed on stderr); 1 refused (4xx/5xx; a batch with any refund\n"
    "refused) or the API cannot be reached; 2 usage error.\n";

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

/* The file of --batch, whole, at most max bytes (the API would refuse a
 * larger one with 413). 0 and *ret_text (malloc()ed, NUL-terminated), or
 * TG_EINVAL with a message printed. */
static int read_batch(const char *path, size_t max, char **ret_text)
{
        FILE *f = fopen(path, "rb");
        char *text = NULL;
        size_t len = 0;

        if (!f) {
                fprintf(stderr, "tollgate submit: cannot open %s\n", path);
                return TG_EINVAL;
        }
        text = malloc(max + 2);
        if (text)
                len = fread(text, 1, max + 1, f);
        if (!text || ferror(f) || len > max) {
                fprintf(stderr, "tollgate submit: %s: %s\n", path,
                        !text       ? "out of memory"
                        : len > max ? "larger than api.max_batch_bytes"
                                    : "cannot be read");
                fclose(f);
                free(text);
                return TG_EINVAL;
        }
        fclose(f);
        text[len] = '\0';
        *ret_text = text;
        return 0;
}

/* A batch's answer: 0 when every refund was accepted (202) or known (200). */
static int finish_batch(long status, char *body, const char *retry_after)
{
        json_t *root = status == 200 ? json_loads(body, 0, NULL) : NULL;
        json_t *errors = json_object_get(root, "errors");
        size_t n = json_array_size(json_object_get(root, "results"));
        int r;

        if (status != 200) {
                r = finish("submit", status, body, retry_after);
        } else {
                r = json_is_false(errors) ? 0 : 1;
                fputs(body, stdout);
                fputc('\n', stdout);
                free(body);
                if (r)
                        fprintf(stderr,
                                "tollgate submit: some of the %zu refunds were refused (see "
                                "their status and error)\n",
                                n);
        }
        json_decref(root);
        return r;
}

int cmd_submit(int argc, char **argv)
{
        const char *config = NULL, *op = NULL, *pay = NULL, *cur = NULL, *api_url = NULL;
        const char *batch = NULL;
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
             .help = "the operation id, also the idempotency key"},
            {.name = "payment-id", .arg = "P", .string = &pay, .help = "the payment to refund"},
            {.name = "amount",
             .arg = "MINOR_UNITS",
             .i64 = &amount,
             .min = 1,
             .max = INT64_MAX,
             .help = "the amount in minor units (cents)"},
            {.name = "currency", .arg = "CUR", .string = &cur, .help = "the currency code (TWD)"},
            {.name = "batch",
             .arg = "FILE",
             .string = &batch,
             .help = "a JSON file of up to 500 refunds, sent to POST /v1/refunds:batch "
                     "(instead of the four above)"},
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
        char *body = NULL, *req = NULL;
        json_t *o;
        int r;

        r = options_parse(&spec, argc, argv, NULL, NULL);
        if (r)
                return options_exit_status(r);
        if (batch && (op || pay || cur || amount)) {
                fprintf(stderr, "tollgate submit: --batch takes no --operation-id, --payment-id, "
                                "--amount or --currency\n");
                return 2;
        }
        if (!batch && (!op || !pay || !cur || !amount)) {
                fprintf(stderr, "tollgate submit: --operation-id, --payment-id, --amount and "
                                "--currency are required (or --batch FILE)\n");
                return 2;
        }
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("submit", config, cfg);
        if (r == 0 && batch) {
                r = read_batch(batch, cfg->api_max_batch_bytes, &req);
        } else if (r == 0) {
                o = json_pack("{s:s, s:s, s:I, s:s}", "operation_id", op, "payment_id", pay,
                              "amount", (json_int_t)amount, "currency", cur);
                if (!o) {
                        fprintf(stderr, "tollgate submit: the values must be valid UTF-8 text\n");
                        r = TG_EINVAL;
                } else {
                        req = json_dumps(o, JSON_COMPACT);
                        json_decref(o);
                        r = req ? 0 : TG_ENOMEM;
                }
        }
        if (r == 0)
                r = cli_http("submit", cfg, api_url, "POST",
                             batch ? "/v1/refunds:batch" : "/v1/refunds", req, &status, &body,
                             retry_after, sizeof(retry_after));
        if (r < 0)
                r = options_exit_status(r);
        else
                r = batch ? finish_batch(status, body, retry_after)
                          : finish("submit", status, body, retry_after);
        free(req);
        config_release(cfg);
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
        config_release(cfg);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}
