/*
 * cmd_calls — `tollgate calls --since ID --format jsonl|csv`: the outbound
 * call log, one record per call that reached the transport, oldest first,
 * read from the store of the config. jsonl prints the same objects as GET
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

static const char calls_help[] =
    "usage: tollgate calls --config FILE [--since ID] [--limit N] [--format jsonl|csv]\n"
    "Prints the outbound call log from the store: calls with id > ID (default 0),\n"
    "oldest first, at most N (default: all). jsonl (default): one JSON object a\n"
    "line, as GET /v1/calls; csv: a header line, then one row a call.\n"
    "To follow the log, pass the last id printed as the next --since.\n";

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
                json_t *o = render_call(c, true);
                char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
                json_decref(o);
                if (!text)
                        return TG_ENOMEM;
                puts(text);
                free(text);
                return 0;
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
        putchar('\n');
        return 0;
}

int cmd_calls(int argc, char **argv)
{
        const char *config = NULL, *since_s = NULL, *limit_s = NULL, *format = NULL;
        const struct cli_opt opts[] = {
            {"--config", true, &config},
            {"--since", true, &since_s},
            {"--limit", true, &limit_s},
            {"--format", true, &format},
        };
        struct calls_out out = {0};
        long long since = 0, limit = UINT32_MAX;
        struct tg_config *cfg;
        struct store *store = NULL;
        int r;

        r = cli_parse("calls", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), calls_help, NULL,
                      0, NULL);
        if (r)
                return r;
        if (since_s && cli_parse_i64(since_s, 0, INT64_MAX, &since) < 0) {
                fprintf(stderr, "tollgate calls: --since must be a call id (an integer >= 0)\n");
                return 2;
        }
        if (limit_s && cli_parse_i64(limit_s, 1, UINT32_MAX, &limit) < 0) {
                fprintf(stderr, "tollgate calls: --limit must be an integer >= 1\n");
                return 2;
        }
        if (format && strcmp(format, "csv") == 0)
                out.csv = true;
        else if (format && strcmp(format, "jsonl") != 0) {
                fprintf(stderr, "tollgate calls: --format must be jsonl or csv, got '%s'\n",
                        format);
                return 2;
        }
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("calls", config, cfg);
        if (r == 0)
                r = cli_open_store("calls", cfg, &store);
        if (r == 0) {
                if (out.csv)
                        puts("id,operation_id,kind,attempt,request_id,epoch,start_wall,end_wall,"
                             "class,http_status,latency_ms,sent,in_flight,error");
                r = store_list_calls(store, since, (unsigned)limit, print_call, &out);
                if (r < 0) {
                        fprintf(stderr, "tollgate calls: cannot read the call log: %s\n",
                                tg_strerror(r));
                        r = 1;
                }
        }
        fflush(stdout);
        store_close(store);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}
