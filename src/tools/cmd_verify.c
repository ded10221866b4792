/*
 * tollgate verify — judges one run of the exit from its records (call log,
 * provider arrivals, optional ledger) with tools/verify and prints the
 * figures and the findings, as text for a person or as JSON for a script.
 * Exit status: 0 no violation, 1 at least one violation, 2 usage or input
 * error. The record formats are in docs/verify.md.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/config.h"
#include "platform/options.h"
#include "tools/runlog.h"
#include "tools/tools.h"
#include "tools/verify.h"
#include "tools/verify_out.h"

static const char verify_about[] =
    "Judges one run of the exit: every provider arrival matched to exactly one logged start (by "
    "request id), start spacing and bursts at the transport boundary, in-flight, one key / "
    "attempts / executions per operation, call kinds. The record formats are in "
    "docs/verify.md.";
static const char verify_epilogue[] =
    "Exit status: 0 no violation, 1 violations found, 2 usage or input error.\n";

int verify_parse_args(const char *cmd, int argc, char **argv, const char *about,
                      const char *epilogue, bool report, struct verify_args *a)
{
        const char *kinds = NULL;
        uint64_t in_flight = 0, attempts = 0, executions = 0, records = 0;
        bool executions_set = false, records_set = false;
        /* verify's options, then report's own (the last six) */
        const struct opt opts[] = {
            {.name = "calls",
             .arg = "FILE",
             .string = &a->calls,
             .help = "tollgate's call log, JSON lines (tollgate calls --format jsonl, or GET "
                     "/v1/calls pages one per line)"},
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &a->config,
             .help = "read the call log from this config's store instead; also the default "
                     "rate, in-flight cap and attempts"},
            {.name = "account",
             .arg = "NAME",
             .string = &a->account,
             .help = "with --config: judge this account of it alone: its calls in the store, "
                     "its rate, in-flight cap and attempts (report --from: its timeline)"},
            {.name = "arrivals",
             .arg = "FILE",
             .string = &a->arrivals,
             .required = !report,
             .help = report ? "the provider's arrival log, JSON lines (tollgate-stub --record "
                              "FILE or GET /_stub/arrivals; docs/verify.md); required unless "
                              "--from/--to draw a window of the store"
                            : "the provider's arrival log, JSON lines (tollgate-stub --record "
                              "FILE or GET /_stub/arrivals; docs/verify.md)"},
            {.name = "ledger",
             .arg = "FILE",
             .string = &a->ledger,
             .help = "executions per key (GET /_stub/ledger, or JSON lines "
                     "{\"key\":K,\"executions\":N})"},
            {.name = "token-path",
             .arg = "PATH",
             .string = &a->token_path,
             .help = "arrivals at this path with the exit's token request id (tg-token-...) "
                     "are its OAuth 2.0 token calls: no operation's, no call log row, judged "
                     "at the provider's door (--config's provider.token_path on base_url's "
                     "path when its provider.auth is oauth2)"},
            {.name = "rate",
             .arg = "R",
             .dbl = &a->lim.rate,
             .dmin = 1e-6,
             .dmax = 1e9,
             .seen = &a->rate_set,
             .help = "starts per second (--config's exit.starts_per_second, else its default)"},
            {.name = "max-in-flight",
             .arg = "N",
             .u64 = &in_flight,
             .umin = 1,
             .umax = 1000000000,
             .seen = &a->in_flight_set,
             .help = "calls open at once (--config's exit.max_in_flight, else its default)"},
            {.name = "max-attempts",
             .arg = "N",
             .u64 = &attempts,
             .umin = 1,
             .umax = 1000000,
             .seen = &a->attempts_set,
             .help = "automatic POSTs per operation (--config's retry.max_attempts, else its "
                     "default); those answered 429/503 are left out"},
            {.name = "count-limited",
             .flag = &a->lim.count_limited,
             .help = "count POSTs answered 429/503 too (the config's retry.count_limited)"},
            {.name = "max-executions",
             .arg = "N",
             .u64 = &executions,
             .umin = 0,
             .umax = 1000000,
             .seen = &executions_set,
             .help = "per key at the provider (1)"},
            {.name = "expect-kinds",
             .arg = "LIST",
             .string = &kinds,
             .help = "kinds that must appear, e.g. first,retry,query,manual"},
            {.name = "max-records",
             .arg = "N",
             .u64 = &records,
             .umin = 1,
             .umax = 1000000000,
             .seen = &records_set,
             .help = "refuse more calls or arrivals than N (2000000)"},
            {.name = "json", .flag = &a->json, .help = "the result as one JSON object"},
            {.name = "out",
             .arg = "FILE.html",
             .string = &a->out,
             .required = true,
             .help = "the page to write"},
            {.name = "timeline",
             .arg = "SPEC",
             .string = &a->timeline,
             .help = "the stub's --timeline, to draw the provider's phases (default: from the "
                     "arrivals' phase fields)"},
            {.name = "time-scale",
             .arg = "F",
             .dbl = &a->time_scale,
             .dmin = 1e-6,
             .dmax = 1e6,
             .help = "the stub's --time-scale for --timeline (1)"},
            {.name = "title", .arg = "T", .string = &a->title, .help = "the page's title"},
            {.name = "from",
             .arg = "TIME",
             .string = &a->from,
             .help = "with --config and no --arrivals: draw the console's timeline of the "
                     "store's samples from TIME (2026-05-01T14:00[:SS][Z|+08:00], local time "
                     "without a zone; or -90m, -2h, -1d from now)"},
            {.name = "to",
             .arg = "TIME",
             .string = &a->to,
             .help = "the window's end, as --from (default: now)"},
        };
        const size_t n_report = 6;
        char prog[32];
        const struct options_spec spec = {
            .prog = prog,
            .description = about,
            .opts = opts,
            .nopts = sizeof(opts) / sizeof(opts[0]) - (report ? 0 : n_report),
            .epilogue = epilogue,
        };
        unsigned mask;
        int r;

        memset(a, 0, sizeof(*a));
        verify_limits_default(&a->lim);
        a->time_scale = 1.0;
        a->allow_report = report;
        snprintf(prog, sizeof(prog), "tollgate %s", cmd);
        r = options_parse(&spec, argc, argv, NULL, NULL);
        if (r)
                return r;
        if (a->in_flight_set)
                a->lim.max_in_flight = (unsigned)in_flight;
        if (a->attempts_set)
                a->lim.max_attempts = (unsigned)attempts;
        if (executions_set)
                a->lim.max_executions = (unsigned)executions;
        if (records_set)
                a->lim.max_records = (size_t)records;
        if (kinds) {
                if (verify_kinds_parse(kinds, &mask) < 0) {
                        fprintf(stderr,
                                "tollgate %s: --expect-kinds: not a list of call kinds: "
                                "'%s'\n",
                                cmd, kinds);
                        return TG_EINVAL;
                }
                a->lim.expect_kinds = mask;
        }
        if (a->account && !a->config) {
                fprintf(stderr, "tollgate %s: --account names an account of --config FILE\n", cmd);
                return TG_EINVAL;
        }
        if (report && (a->from || a->to)) {
                if (!a->config || a->calls || a->arrivals || a->ledger || a->timeline) {
                        fprintf(stderr,
                                "tollgate %s: --from/--to draw a window of the store: they take "
                                "--config FILE, and no --calls, --arrivals, --ledger or "
                                "--timeline\n",
                                cmd);
                        return TG_EINVAL;
                }
                return 0;
        }
        if (report && !a->arrivals) {
                fprintf(stderr,
                        "tollgate %s: --arrivals FILE is required (or --config FILE --from TIME "
                        "to draw the store's timeline)\n",
                        cmd);
                return TG_EINVAL;
        }
        if (!a->calls && !a->config) {
                fprintf(stderr, "tollgate %s: --calls FILE or --config FILE is required\n", cmd);
                return TG_EINVAL;
        }
        return 0;
}

int verify_load_config(const char *cmd, const struct verify_args *a, struct tg_config *cfg)
{
        const struct tg_account *account;
        char err[512];
        int r;

        if (config_load(a->config, cfg, err, sizeof(err)) < 0) {
                fprintf(stderr, "tollgate %s: %s: %s\n", cmd, a->config, err);
                return TG_ECONFIG;
        }
        if (!a->account)
                return 0;
        account = config_account_find(cfg, a->account);
        if (!account) {
                config_account_unknown(cfg, err, sizeof(err));
                fprintf(stderr, "tollgate %s: --account \"%s\" %s\n", cmd, a->account, err);
                return TG_EINVAL;
        }
        /* the account's values as the top level's (its view is a copy) */
        {
                struct tg_config *view = malloc(sizeof(*view));

                if (!view)
                        return TG_ENOMEM;
                r = config_account_view(cfg, account, view);
                if (r == 0)
                        memcpy(cfg, view, sizeof(*view));
                free(view);
        }
        return r;
}

int verify_load(const char *cmd, struct verify_args *a, struct runlog *log)
{
        int r = 0;
        runlog_init(log, a->lim.max_records);
        if (a->config) {
                struct tg_config *cfg = malloc(sizeof(*cfg));
                if (!cfg)
                        return TG_ENOMEM;
                r = verify_load_config(cmd, a, cfg);
                if (r < 0) {
                        free(cfg);
                        return r;
                }
                if (!a->rate_set)
                        a->lim.rate = cfg->exit.starts_per_second;
                if (!a->in_flight_set)
                        a->lim.max_in_flight = cfg->exit.max_in_flight;
                if (!a->attempts_set)
                        a->lim.max_attempts = cfg->policy.max_attempts;
                if (cfg->policy.count_limited)
                        a->lim.count_limited = true;
                if (!a->token_path && strcmp(cfg->provider_auth, "oauth2") == 0)
                        r = runlog_token_path(log, cfg->provider_base_url,
                                              cfg->provider_token_path);
                if (r == 0 && !a->calls)
                        r = runlog_read_store(log, cfg->store_url, a->account);
                config_release(cfg);
                free(cfg);
        }
        if (r == 0 && a->token_path)
                r = runlog_token_path(log, NULL, a->token_path);
        if (r == 0 && a->calls)
                r = runlog_read_calls(log, a->calls);
        if (r == 0)
                r = runlog_read_arrivals(log, a->arrivals);
        if (r == 0 && a->ledger)
                r = runlog_read_ledger(log, a->ledger);
        if (r < 0) {
                fprintf(stderr, "tollgate %s: %s\n", cmd, log->err);
                runlog_release(log);
                return TG_EINVAL; /* an unreadable input: 2 */
        }
        return 0;
}

int verify_judge(const char *cmd, const struct verify_args *a, const struct runlog *log,
                 struct verify_result **ret_result)
{
        int r = verify_run(&a->lim, log->calls, log->ncalls, log->arrivals, log->narrivals,
                           log->ledger, log->nledger, ret_result);
        if (r < 0) {
                fprintf(stderr, "tollgate %s: %s\n", cmd,
                        r == TG_EFULL ? "more records than --max-records" : tg_strerror(r));
                return TG_EINVAL; /* documented as an input error: 2 */
        }
        return 0;
}

static void print_text(FILE *out, const struct verify_args *a, const struct verify_result *res)
{
        const struct verify_summary *s = verify_summary(res);
        char buf[8192];
        verify_summary_text(&a->lim, s, buf, sizeof(buf));
        fprintf(out, "tollgate verify: %s (%zu violation%s, %zu note%s)\n",
                s->violations ? "FAIL" : "PASS", s->violations, s->violations == 1 ? "" : "s",
                s->notes, s->notes == 1 ? "" : "s");
        fputs(buf, out);
        for (size_t i = 0; i < verify_finding_count(res); i++) {
                const struct verify_finding *f = verify_finding_at(res, i);
                fprintf(out, "\nFINDING %zu [%s] %s\n", i + 1, f->violation ? "violation" : "note",
                        f->check);
                fprintf(out, "  Problem (問題): %s\n", f->problem);
                fprintf(out, "  Evidence (證據):\n");
                for (const char *l = f->evidence; *l;) {
                        const char *nl = strchr(l, '\n');
                        int n = nl ? (int)(nl - l) : (int)strlen(l);
                        fprintf(out, "  %.*s\n", n, l);
                        l += n + (nl ? 1 : 0);
                }
                fprintf(out, "  Trigger (觸發條件): %s\n", f->trigger);
                fprintf(out, "  Impact (影響): %s\n", f->impact);
                fprintf(out, "  Verify (驗證): %s\n", f->verify);
                fprintf(out, "  Result (結果): %s\n", f->result);
                fprintf(out, "  Fix (修正): %s\n", f->fix);
        }
}

int cmd_verify(int argc, char **argv)
{
        struct verify_args a;
        struct runlog log;
        struct verify_result *res = NULL;
        int r = verify_parse_args("verify", argc, argv, verify_about, verify_epilogue, false, &a);
        if (r)
                return options_exit_status(r);
        r = verify_load("verify", &a, &log);
        if (r)
                return options_exit_status(r);
        r = verify_judge("verify", &a, &log, &res);
        if (r) {
                runlog_release(&log);
                return options_exit_status(r);
        }
        const struct verify_summary *s = verify_summary(res);
        if (a.json) {
                json_t *o = verify_result_json(&a.lim, res);
                if (!o || json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
                        r = 2;
                fputc('\n', stdout);
                json_decref(o);
        } else {
                print_text(stdout, &a, res);
        }
        if (r == 0)
                r = s->violations ? 1 : 0;
        verify_result_free(res);
        runlog_release(&log);
        return r;
}
