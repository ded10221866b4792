/*
 * cmd_calls — `tollgate calls --since ID [--account NAME] --format
 * jsonl|csv`: the outbound call log, one record per call that reached the
 * transport, oldest first, read from the store of the config (one
 * account's calls with --account, as GET /v1/calls?account=). jsonl prints the same objects as GET
 * /v1/calls (one a line); csv prints a header and one row a call, with every
 * text field quoted (RFC 4180) so an error text with a comma stays one field.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/tg_error.h"
#include "daemon/render.h"
#include "platform/options.h"

static const char calls_about[] =
    "Prints the outbound call log from the store: calls with id > ID, oldest first. jsonl: one "
    "JSON object a line, as GET /v1/calls; csv: a header line, then one row a call.\n\n"
    "To follow the log, pass the last id printed as the next --since.";

static const char *const formats[] = {"jsonl", "csv", NULL};

struct calls_out {
        bool csv;
        int failed;
};

static void csv_text(const char *s)
{
        putchar('"');
        for (; *s; s++) {
                if (*s == '"')
                        putchar('"');
                putchar(*s == '\n' || *s == '\r' ? ' ' : *s);
        }
        putchar('"');
}

static int print_call(const struct call_record *c, void *userdata)
{
        struct calls_out *out = userdata;

        if (!out->csv) {
                return cli_print_json(render_call(c, true), JSON_COMPACT);
        }
        printf("%lld,", (long long)c->id);
        csv_text(c->operation_id);
        printf(",%s,%u,", tg_call_kind_name(c->kind), c->attempt);
        csv_text(c->request_id);
        printf(",%lld,%lld,%lld,", (long long)c->epoch, (long long)c->start_wall,
               c->ended ? (long long)c->end_wall : 0LL);
        printf("%s,%d,", c->ended ? tg_class_name(c->cls) : "", c->http_status);
        if (c->ended)
                printf("%lld", (long long)(c->latency_us / 1000));
        printf(",%s,%u,", c->ended ? (c->sent ? "true" : "false") : "", c->in_flight_at_start);
        csv_text(c->error);
        printf(",%s,%s\n", c->trace_id, c->span_id); /* lower-case hex or empty */
        return 0;
}

int cmd_calls(int argc, char **argv)
{
        const char *config = NULL, *account = NULL;
        int64_t since = 0, limit = UINT32_MAX;
        int format = 0;
        const struct opt opts[] = {
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &config,
             .required = true,
             .help = "the config file (its store is read)"},
            {.name = "since",
             .arg = "ID",
             .i64 = &since,
             .min = 0,
             .max = INT64_MAX,
             .help = "only calls with an id above ID (0)"},
            {.name = "limit",
             .arg = "N",
             .i64 = &limit,
             .min = 1,
             .max = UINT32_MAX,
             .help = "at most N calls (all)"},
            {.name = "account",
             .arg = "NAME",
             .string = &account,
             .help = "only the calls of this account of the config (every account's)"},
            {.name = "format",
             .choice = &format,
             .choices = formats,
             .help = "jsonl (default) or csv"},
        };
        const struct options_spec spec = {.prog = "tollgate calls",
                                          .description = calls_about,
                                          .opts = opts,
                                          .nopts = sizeof(opts) / sizeof(opts[0])};
        struct calls_out out = {0};
        struct tg_config *cfg;
        struct store *store = NULL;
        int r;

        r = options_parse(&spec, argc, argv, NULL, NULL);
        if (r)
                return options_exit_status(r);
        out.csv = format == 1;
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("calls", config, cfg);
        if (r == 0)
                r = cli_check_account("calls", cfg, account);
        if (r == 0)
                r = cli_open_store("calls", cfg, &store);
        if (r == 0) {
                if (out.csv)
                        puts("id,operation_id,kind,attempt,request_id,epoch,start_wall,end_wall,"
                             "class,http_status,latency_ms,sent,in_flight,error,trace_id,span_id");
                r = store_list_account_calls(store, account, since, (unsigned)limit, print_call,
                                             &out);
                if (r < 0) {
                        fprintf(stderr, "tollgate calls: cannot read the call log: %s\n",
                                tg_strerror(r));
                        r = TG_ESTORE;
                } else {
                        r = 0;
                }
        }
        fflush(stdout);
        store_close(store);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return options_exit_status(r);
}
