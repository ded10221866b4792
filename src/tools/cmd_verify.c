/*
 * tollgate verify — judges one run of the exit from its records (call log,
 * provider arrivals, optional ledger) with core/verify and prints the
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
#include "tools/runlog.h"
#include "tools/tools.h"
#include "tools/verify.h"
#include "tools/verify_out.h"

static const char verify_help[] =
    "usage: tollgate verify [--calls FILE | --config FILE] --arrivals FILE [options]\n"
    "Judges one run of the exit: every provider arrival matched to exactly one logged\n"
    "start (by request id), start spacing and bursts at the transport boundary,\n"
    "in-flight, one key / attempts / executions per operation, call kinds.\n"
    "  --calls FILE          tollgate's call log, JSON lines (tollgate calls --format\n"
    "                        jsonl, or GET /v1/calls pages one per line)\n"
    "  --config FILE         read the call log from this config's store instead; also\n"
    "                        the default rate, in-flight cap and attempts\n"
    "  --arrivals FILE       the provider's arrival log, JSON lines (tollgate-stub\n"
    "                        --record FILE or GET /_stub/arrivals; docs/verify.md)\n"
    "  --ledger FILE         executions per key (GET /_stub/ledger, or JSON lines\n"
    "                        {\"key\":K,\"executions\":N})\n"
    "  --rate R              starts per second (default 5, or the config's)\n"
    "  --max-in-flight N     (10)\n"
    "  --max-attempts N      automatic POSTs per operation (3)\n"
    "  --max-executions N    per key at the provider (1)\n"
    "  --expect-kinds LIST   kinds that must appear, e.g. first,retry,query,manual\n"
    "  --max-records N       refuse more calls or arrivals than N (2000000)\n"
    "  --json                the result as one JSON object\n"
    "Exit status: 0 no violation, 1 violations found, 2 usage or input error.\n";

static int parse_num(const char *s, double lo, double hi, double *ret)
{
        char *end;
        if (!s || !*s)
                return TG_EINVAL;
        double v = strtod(s, &end);
        if (*end || !(v >= lo && v <= hi))
                return TG_EINVAL;
        *ret = v;
        return 0;
}

int verify_parse_args(const char *cmd, int argc, char **argv, const char *help, bool report,
                      struct verify_args *a)
{
        unsigned long kinds = 0;
        bool kinds_set = false;
        memset(a, 0, sizeof(*a));
        verify_limits_default(&a->lim);
        a->time_scale = 1.0;
        a->allow_report = report;
        for (int i = 0; i < argc; i++) {
                const char *o = argv[i];
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;
                double n;
                if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
                        fputs(help, stdout);
                        exit(0);
                } else if (strcmp(o, "--json") == 0) {
                        a->json = true;
                        continue;
                }
                if (!v) {
                        fprintf(stderr, "tollgate %s: %s needs a value (try --help)\n", cmd, o);
                        return 2;
                }
                i++;
                if (strcmp(o, "--calls") == 0) {
                        a->calls = v;
                } else if (strcmp(o, "--config") == 0) {
                        a->config = v;
                } else if (strcmp(o, "--arrivals") == 0) {
                        a->arrivals = v;
                } else if (strcmp(o, "--ledger") == 0) {
                        a->ledger = v;
                } else if (strcmp(o, "--out") == 0 && a->allow_report) {
                        a->out = v;
                } else if (strcmp(o, "--timeline") == 0 && a->allow_report) {
                        a->timeline = v;
                } else if (strcmp(o, "--time-scale") == 0 && a->allow_report) {
                        if (parse_num(v, 1e-6, 1e6, &a->time_scale) < 0)
                                goto bad;
                } else if (strcmp(o, "--title") == 0 && a->allow_report) {
                        a->title = v;
                } else if (strcmp(o, "--rate") == 0) {
                        if (parse_num(v, 1e-6, 1e9, &a->lim.rate) < 0)
                                goto bad;
                        a->rate_set = true;
                } else if (strcmp(o, "--max-in-flight") == 0) {
                        if (parse_num(v, 1, 1e9, &n) < 0 || n != (double)(unsigned)n)
                                goto bad;
                        a->lim.max_in_flight = (unsigned)n;
                        a->in_flight_set = true;
                } else if (strcmp(o, "--max-attempts") == 0) {
                        if (parse_num(v, 1, 1e6, &n) < 0 || n != (double)(unsigned)n)
                                goto bad;
                        a->lim.max_attempts = (unsigned)n;
                        a->attempts_set = true;
                } else if (strcmp(o, "--max-executions") == 0) {
                        if (parse_num(v, 0, 1e6, &n) < 0 || n != (double)(unsigned)n)
                                goto bad;
                        a->lim.max_executions = (unsigned)n;
                } else if (strcmp(o, "--max-records") == 0) {
                        if (parse_num(v, 1, 1e9, &n) < 0 || n != (double)(size_t)n)
                                goto bad;
                        a->lim.max_records = (size_t)n;
                } else if (strcmp(o, "--expect-kinds") == 0) {
                        unsigned m;
                        if (verify_kinds_parse(v, &m) < 0)
                                goto bad;
                        kinds = m;
                        kinds_set = true;
                } else {
                        fprintf(stderr, "tollgate %s: unknown option '%s' (try --help)\n", cmd, o);
                        return 2;
                }
                continue;
        bad:
                fprintf(stderr, "tollgate %s: bad value '%s' for %s\n", cmd, v, o);
                return 2;
        }
        if (kinds_set)
                a->lim.expect_kinds = (unsigned)kinds;
        if (!a->calls && !a->config) {
                fprintf(stderr, "tollgate %s: --calls FILE or --config FILE is required\n", cmd);
                return 2;
        }
        if (!a->arrivals) {
                fprintf(stderr, "tollgate %s: --arrivals FILE is required\n", cmd);
                return 2;
        }
        return 0;
}

int verify_load(const char *cmd, struct verify_args *a, struct runlog *log)
{
        int r = 0;
        runlog_init(log, a->lim.max_records);
        if (a->config) {
                struct tg_config *cfg = malloc(sizeof(*cfg));
                char err[512];
                if (!cfg)
                        return 1;
                r = config_load(a->config, cfg, err, sizeof(err));
                if (r < 0) {
                        fprintf(stderr, "tollgate %s: %s: %s\n", cmd, a->config, err);
                        free(cfg);
                        return 2;
                }
                if (!a->rate_set)
                        a->lim.rate = cfg->exit.starts_per_second;
                if (!a->in_flight_set)
                        a->lim.max_in_flight = cfg->exit.max_in_flight;
                if (!a->attempts_set)
                        a->lim.max_attempts = cfg->policy.max_attempts;
                if (!a->calls)
                        r = runlog_read_store(log, cfg->store_url);
                free(cfg);
        }
        if (r == 0 && a->calls)
                r = runlog_read_calls(log, a->calls);
        if (r == 0)
                r = runlog_read_arrivals(log, a->arrivals);
        if (r == 0 && a->ledger)
                r = runlog_read_ledger(log, a->ledger);
        if (r < 0) {
                fprintf(stderr, "tollgate %s: %s\n", cmd, log->err);
                runlog_release(log);
                return 2;
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
                return 2;
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
        argc--; /* argv from the command's name on: skip it (until the options table) */
        argv++;
        struct verify_args a;
        struct runlog log;
        struct verify_result *res = NULL;
        int r = verify_parse_args("verify", argc, argv, verify_help, false, &a);
        if (r)
                return r;
        r = verify_load("verify", &a, &log);
        if (r)
                return r;
        r = verify_judge("verify", &a, &log, &res);
        if (r) {
                runlog_release(&log);
                return r;
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
