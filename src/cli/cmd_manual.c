/*
 * cmd_manual — `tollgate manual list|show|resend|resolve`: the manual review
 * queue from the command line, on the store of the config (no API needed).
 * Output is the same JSON as GET /v1/manual and GET /v1/manual/{id}
 * (app/render.h), one document on stdout. A re-send or resolve writes its
 * audit row in the same store transaction as the change; nothing is deleted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/render.h"
#include "platform/clock.h"

static const char manual_help[] =
    "usage: tollgate manual <list|show|resend|resolve> --config FILE [...]\n"
    "The manual review queue: operations that ran out of their automatic budget\n"
    "(attempts, deadline, query budget), whose key was reused with another payload\n"
    "or is past retention. Works on the store directly; every action is audited.\n"
    "\n"
    "  list [--reason R] [--limit N] [--after CURSOR]\n"
    "        oldest first, each with its calls and audit (JSON on stdout);\n"
    "        R: attempts_exhausted, deadline, query_budget, key_reused,\n"
    "        key_retention, invalid\n"
    "  show ID\n"
    "        one operation (any state) with its calls and audit\n"
    "  resend ID --operator NAME --reason TEXT\n"
    "        queue a re-send through the exit with the same key (refused when the\n"
    "        key is past retention: a re-send could refund twice)\n"
    "  resolve ID --operator NAME --reason TEXT --outcome succeeded|failed\n"
    "        close it by hand, after checking with the provider\n"
    "\n"
    "Exit status: 0 done, 1 failed (not found, not in manual, store error),\n"
    "2 usage or config error.\n";

static tg_wall_ms wall_now_ms(void)
{
        return clock_wall_now();
}

static int print_json(json_t *o)
{
        char *text;

        if (!o)
                return 1;
        text = json_dumps(o, JSON_INDENT(2));
        json_decref(o);
        if (!text)
                return 1;
        puts(text);
        free(text);
        return 0;
}

struct manual_rows {
        struct op_record *ops;
        unsigned n, max;
        enum manual_reason reason; /* MANUAL_NONE: any; the store filters */
        int64_t last_id;
};

static int manual_row(const struct op_record *op, void *userdata)
{
        struct manual_rows *m = userdata;

        m->last_id = op->id;
        m->ops[m->n++] = *op;
        return m->n >= m->max ? 1 : 0;
}

static int do_list(struct store *store, const char *reason, const char *limit_s,
                   const char *after_s)
{
        struct manual_rows m = {0};
        long long limit = 1000, after = 0;
        json_t *items;
        int r;

        if (limit_s && cli_parse_i64(limit_s, 1, 100000, &limit) < 0) {
                fprintf(stderr, "tollgate manual: --limit must be an integer in [1, 100000]\n");
                return 2;
        }
        if (after_s && cli_parse_i64(after_s, 0, INT64_MAX, &after) < 0) {
                fprintf(stderr, "tollgate manual: --after must be a cursor (an integer >= 0)\n");
                return 2;
        }
        if (reason) {
                if (manual_reason_parse(reason, &m.reason) < 0 || m.reason == MANUAL_NONE) {
                        fprintf(stderr, "tollgate manual: --reason '%s' is not a manual reason\n",
                                reason);
                        return 2;
                }
        }
        m.max = (unsigned)limit;
        m.ops = calloc(m.max, sizeof(*m.ops));
        items = json_array();
        if (!m.ops || !items) {
                free(m.ops);
                json_decref(items);
                return 1;
        }
        r = store_list_manual(store, after, m.reason, m.max, manual_row, &m);
        for (unsigned i = 0; r >= 0 && i < m.n; i++) {
                json_t *o = NULL;
                r = render_op_full(store, &m.ops[i], &o);
                if (r == 0)
                        json_array_append_new(items, o);
        }
        free(m.ops);
        if (r < 0) {
                json_decref(items);
                fprintf(stderr, "tollgate manual: cannot read the manual list: %s\n",
                        tg_strerror(r));
                return 1;
        }
        return print_json(json_pack("{s:o, s:i, s:o}", "items", items, "count", (int)m.n,
                                    "next_after",
                                    m.n == m.max ? json_integer(m.last_id) : json_null()));
}

static int check_id(const char *id)
{
        if (!id) {
                fprintf(stderr, "tollgate manual: an operation ID is required\n");
                return 2;
        }
        if (refund_validate_operation_id(id, strlen(id), NULL) < 0) {
                fprintf(stderr, "tollgate manual: '%s' is not a valid operation id\n", id);
                return 2;
        }
        return 0;
}

static int do_show(struct store *store, const char *id)
{
        struct op_record op;
        json_t *o = NULL;
        int r = store_get(store, id, &op);

        if (r == 0)
                r = render_op_full(store, &op, &o);
        if (r == TG_ENOTFOUND) {
                fprintf(stderr, "tollgate manual: no operation '%s'\n", id);
                return 1;
        }
        if (r < 0) {
                fprintf(stderr, "tollgate manual: cannot read '%s': %s\n", id, tg_strerror(r));
                return 1;
        }
        return print_json(o);
}

static int check_text(const char *opt, const char *v)
{
        size_t n;

        if (!v) {
                fprintf(stderr, "tollgate manual: %s is required\n", opt);
                return 2;
        }
        n = strlen(v);
        if (n == 0 || n > 200) {
                fprintf(stderr, "tollgate manual: %s must be 1 to 200 bytes\n", opt);
                return 2;
        }
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)v[i];
                if (c < 0x20 || c == 0x7f) {
                        fprintf(stderr, "tollgate manual: %s must not contain control characters\n",
                                opt);
                        return 2;
                }
        }
        return 0;
}

static int do_act(struct store *store, const struct tg_config *cfg, const char *id, bool resolve,
                  const char *operator_name, const char *reason, const char *outcome_s)
{
        enum op_state outcome = OP_SUCCEEDED;
        struct op_record op;
        int r;

        r = check_text("--operator", operator_name);
        if (r == 0)
                r = check_text("--reason", reason);
        if (r)
                return r;
        if (resolve) {
                if (!outcome_s) {
                        fprintf(stderr,
                                "tollgate manual: --outcome succeeded|failed is required\n");
                        return 2;
                }
                if (strcmp(outcome_s, "succeeded") == 0)
                        outcome = OP_SUCCEEDED;
                else if (strcmp(outcome_s, "failed") == 0)
                        outcome = OP_REJECTED;
                else {
                        fprintf(
                            stderr,
                            "tollgate manual: --outcome must be succeeded or failed, got '%s'\n",
                            outcome_s);
                        return 2;
                }
                r = store_operator_resolve(store, id, operator_name, reason, outcome, wall_now_ms(),
                                           &op);
        } else {
                r = store_operator_resend(store, id, operator_name, reason, &cfg->policy,
                                          wall_now_ms(), &op);
        }
        if (r == TG_ENOTFOUND)
                fprintf(stderr, "tollgate manual: no operation '%s'\n", id);
        else if (r == TG_ESTATE)
                fprintf(stderr, "tollgate manual: '%s' is not waiting for manual review\n", id);
        else if (r == TG_ERANGE)
                fprintf(stderr,
                        "tollgate manual: '%s': its idempotency key is past retention; a re-send "
                        "could refund twice. Check with the provider and resolve it.\n",
                        id);
        else if (r < 0)
                fprintf(stderr, "tollgate manual: cannot change '%s': %s\n", id, tg_strerror(r));
        if (r < 0)
                return 1;
        return do_show(store, id);
}

int cmd_manual(int argc, char **argv)
{
        const char *config = NULL, *reason_filter = NULL, *limit = NULL, *after = NULL;
        const char *operator_name = NULL, *reason = NULL, *outcome = NULL;
        const struct cli_opt opts[] = {
            {"--config", true, &config},
            {"--reason", true, &reason},
            {"--limit", true, &limit},
            {"--after", true, &after},
            {"--operator", true, &operator_name},
            {"--outcome", true, &outcome},
        };
        const char *pos[2] = {NULL, NULL};
        struct tg_config *cfg;
        struct store *store = NULL;
        size_t npos = 0;
        int r;

        r = cli_parse("manual", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), manual_help, pos,
                      2, &npos);
        if (r)
                return r;
        if (npos == 0) {
                fprintf(stderr, "tollgate manual: a subcommand is required: list, show, resend, "
                                "resolve (try --help)\n");
                return 2;
        }
        bool is_list = strcmp(pos[0], "list") == 0, is_show = strcmp(pos[0], "show") == 0;
        bool is_resend = strcmp(pos[0], "resend") == 0, is_resolve = strcmp(pos[0], "resolve") == 0;
        if (!is_list && !is_show && !is_resend && !is_resolve) {
                fprintf(stderr, "tollgate manual: unknown subcommand '%s' (try --help)\n", pos[0]);
                return 2;
        }
        /* In list, --reason filters; elsewhere it is the operator's reason. */
        if (is_list) {
                reason_filter = reason;
                if (npos > 1 || operator_name || outcome) {
                        fprintf(stderr, "tollgate manual list: takes only --reason, --limit, "
                                        "--after\n");
                        return 2;
                }
        } else {
                r = check_id(npos > 1 ? pos[1] : NULL);
                if (r)
                        return r;
        }
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("manual", config, cfg);
        if (r == 0)
                r = cli_open_store("manual", cfg, &store);
        if (r == 0) {
                if (is_list)
                        r = do_list(store, reason_filter, limit, after);
                else if (is_show)
                        r = do_show(store, pos[1]);
                else
                        r = do_act(store, cfg, pos[1], is_resolve, operator_name, reason, outcome);
        }
        store_close(store);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}
