/*
 * cmd_manual — `tollgate manual list|show|resend|resolve|assign|unassign`: the manual review
 * queue from the command line, on the store of the config (no API needed).
 * Output is the same JSON as GET /v1/manual and GET /v1/manual/{id}
 * (app/render.h), one document on stdout. A re-send, resolve or (un)assign
 * writes its audit row in the same store transaction as the change; nothing
 * is deleted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/render.h"
#include "platform/clock.h"
#include "platform/options.h"

static const char manual_about[] =
    "The manual review queue: operations that ran out of their automatic budget (attempts, "
    "deadline, query budget), whose key was reused with another payload or is past retention. "
    "Works on the store directly; every action is audited.";

static const char manual_epilogue[] =
    "Subcommands:\n"
    "  list [--reason R] [--assignee NAME | --unassigned] [--account NAME]\n"
    "       [--limit N] [--after CURSOR]\n"
    "        oldest first, each with its owner, calls and audit (JSON on stdout);\n"
    "        R: attempts_exhausted, deadline, query_budget, key_reused,\n"
    "        key_retention, invalid, key_expired, notification_deadline,\n"
    "        pending_polls, pending_deadline\n"
    "  show ID\n"
    "        one operation (any state) with its calls and audit\n"
    "  resend ID --operator NAME --reason TEXT\n"
    "        queue a re-send through the exit with the same key (refused when the\n"
    "        key is past retention: a re-send could refund twice)\n"
    "  resolve ID --operator NAME --reason TEXT --outcome succeeded|failed\n"
    "        close it by hand, after checking with the provider\n"
    "  assign ID --operator NAME --assignee NAME [--reason TEXT]\n"
    "        give the case to someone (again: re-assign it)\n"
    "  unassign ID --operator NAME [--reason TEXT]\n"
    "        back to nobody\n"
    "  approve ID --operator NAME\n"
    "        four-eyes (manual.approval_above): carry out the re-send or resolve\n"
    "        another operator requested; a case at or above it is only requested\n"
    "        by resend and resolve\n"
    "\n"
    "Exit status: 0 done, 1 failed (not found, not in manual, store error),\n"
    "2 usage or config error.\n";

static const char *const outcomes[] = {"succeeded", "failed", NULL};

static tg_wall_ms wall_now_ms(void)
{
        return clock_wall_now();
}

struct manual_rows {
        struct op_record *ops;
        unsigned n, max;
        struct store_manual_filter filter; /* the store filters */
        int64_t last_id;
};

static int manual_row(const struct op_record *op, void *userdata)
{
        struct manual_rows *m = userdata;

        m->last_id = op->id;
        m->ops[m->n++] = *op;
        return m->n >= m->max ? 1 : 0;
}

static int do_list(struct store *store, const char *reason, const char *assignee, bool unassigned,
                   const char *account, int64_t limit, int64_t after)
{
        struct manual_rows m = {0};
        json_t *items;
        int r;

        m.filter.account = account;

        m.filter.who = assignee     ? STORE_ASSIGNEE_IS
                       : unassigned ? STORE_ASSIGNEE_NONE
                                    : STORE_ASSIGNEE_ANY;
        m.filter.assignee = assignee;
        if (reason) {
                if (manual_reason_parse(reason, &m.filter.reason) < 0 ||
                    m.filter.reason == MANUAL_NONE) {
                        fprintf(stderr, "tollgate manual: --reason '%s' is not a manual reason\n",
                                reason);
                        return TG_EINVAL;
                }
        }
        m.max = (unsigned)limit;
        m.ops = calloc(m.max, sizeof(*m.ops));
        items = json_array();
        if (!m.ops || !items) {
                free(m.ops);
                json_decref(items);
                return TG_ENOMEM;
        }
        r = store_list_manual_filtered(store, after, &m.filter, m.max, manual_row, &m);
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
                return TG_ESTORE;
        }
        return cli_print_json(json_pack("{s:o, s:i, s:o}", "items", items, "count", (int)m.n,
                                        "next_after",
                                        m.n == m.max ? json_integer(m.last_id) : json_null()),
                              JSON_INDENT(2));
}

static int check_id(const char *id)
{
        if (!id) {
                fprintf(stderr, "tollgate manual: an operation ID is required\n");
                return TG_EINVAL;
        }
        if (refund_validate_operation_id(id, strlen(id), NULL) < 0) {
                fprintf(stderr, "tollgate manual: '%s' is not a valid operation id\n", id);
                return TG_EINVAL;
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
                return TG_ENOTFOUND;
        }
        if (r < 0) {
                fprintf(stderr, "tollgate manual: cannot read '%s': %s\n", id, tg_strerror(r));
                return TG_ESTORE;
        }
        return cli_print_json(o, JSON_INDENT(2));
}

static int check_text(const char *opt, const char *v)
{
        size_t n;

        if (!v) {
                fprintf(stderr, "tollgate manual: %s is required\n", opt);
                return TG_EINVAL;
        }
        n = strlen(v);
        if (n == 0 || n > 200) {
                fprintf(stderr, "tollgate manual: %s must be 1 to 200 bytes\n", opt);
                return TG_EINVAL;
        }
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)v[i];
                if (c < 0x20 || c == 0x7f) {
                        fprintf(stderr, "tollgate manual: %s must not contain control characters\n",
                                opt);
                        return TG_EINVAL;
                }
        }
        return 0;
}

static int act_said(struct store *store, const char *id, int r);

static int do_act(struct store *store, const struct tg_config *cfg, const char *id, bool resolve,
                  const char *operator_name, const char *reason, enum op_state outcome)
{
        struct op_record op;
        bool four_eyes = false;
        int r = 0;

        if (cfg->manual_approval_above > 0) {
                r = store_get(store, id, &op);
                four_eyes = r == 0 && op.req.amount >= cfg->manual_approval_above;
        }
        if (r == 0 && four_eyes) {
                r = store_approval_request(store, id, operator_name, reason, resolve, outcome,
                                           &cfg->policy, wall_now_ms(), &op);
                if (r == 0)
                        fprintf(stderr,
                                "tollgate manual: the amount is at or above "
                                "manual.approval_above: the %s waits for another operator "
                                "(tollgate manual approve %s --operator NAME)\n",
                                resolve ? "resolve" : "re-send", id);
        } else if (r == 0 && resolve) {
                r = store_operator_resolve(store, id, operator_name, reason, outcome, wall_now_ms(),
                                           &op);
        } else if (r == 0) {
                r = store_operator_resend(store, id, operator_name, reason, &cfg->policy,
                                          wall_now_ms(), &op);
        }
        return act_said(store, id, r);
}

/* four-eyes: another operator carries out the pending request */
static int do_approve(struct store *store, const struct tg_config *cfg, const char *id,
                      const char *operator_name)
{
        enum store_approval_refusal why = STORE_APPROVAL_OK;
        struct store_approval q;
        struct op_record op;
        int r = store_approval_decide(store, id, operator_name, &cfg->policy, wall_now_ms(), &q,
                                      &why, &op);

        if (r == 0 && why == STORE_APPROVAL_NONE) {
                fprintf(stderr, "tollgate manual: no request waits for approval on '%s'\n", id);
                return TG_ESTORE;
        }
        if (r == 0 && why == STORE_APPROVAL_SELF) {
                fprintf(stderr,
                        "tollgate manual: '%s': the request is %s's own; another operator "
                        "approves it\n",
                        id, q.requested_by);
                return TG_ESTORE;
        }
        return act_said(store, id, r);
}

/* What an action's code means, said on stderr; then the operation. */
static int act_said(struct store *store, const char *id, int r)
{
        if (r == TG_ENOTFOUND)
                fprintf(stderr, "tollgate manual: no operation '%s'\n", id);
        else if (r == TG_ESTATE)
                fprintf(stderr, "tollgate manual: '%s' is not waiting for manual review\n", id);
        else if (r == TG_ERANGE)
                fprintf(stderr,
                        "tollgate manual: '%s': its idempotency key is past retention; a re-send "
                        "could refund twice. Check with the provider and resolve it.\n",
                        id);
        else if (r == TG_ECONFLICT)
                fprintf(stderr, "tollgate manual: another request waits for approval on '%s'\n",
                        id);
        else if (r < 0)
                fprintf(stderr, "tollgate manual: cannot change '%s': %s\n", id, tg_strerror(r));
        if (r < 0)
                return TG_ESTORE;
        return do_show(store, id);
}

static int do_assign(struct store *store, const char *id, const char *operator_name,
                     const char *assignee, const char *reason)
{
        struct op_record op;
        int r = store_operator_assign(store, id, operator_name, assignee, reason ? reason : "",
                                      wall_now_ms(), &op);

        if (r == TG_ENOTFOUND)
                fprintf(stderr, "tollgate manual: no operation '%s'\n", id);
        else if (r == TG_ESTATE)
                fprintf(stderr, "tollgate manual: '%s' is not waiting for manual review\n", id);
        else if (r < 0)
                fprintf(stderr, "tollgate manual: cannot change '%s': %s\n", id, tg_strerror(r));
        if (r < 0)
                return TG_ESTORE;
        return do_show(store, id);
}

/* What a subcommand was given, for check_usage(). */
struct manual_usage {
        const char *operator_name, *reason, *assignee, *account;
        bool outcome_seen, unassigned;
};

static int usage_approve(void)
{
        fprintf(stderr, "tollgate manual approve: takes only --operator (the request holds its "
                        "reason and outcome)\n");
        return TG_EINVAL;
}

/* What the subcommand's options must be, before anything is opened. */
static int check_usage(size_t nargs, const char **args, const struct manual_usage *u)
{
        bool is_resolve = strcmp(args[0], "resolve") == 0;
        bool is_assign = strcmp(args[0], "assign") == 0;
        bool is_unassign = strcmp(args[0], "unassign") == 0;
        int r;

        if (strcmp(args[0], "list") == 0) {
                if (nargs > 1 || u->operator_name || u->outcome_seen ||
                    (u->assignee && u->unassigned)) {
                        fprintf(stderr, "tollgate manual list: takes only --reason, --assignee or "
                                        "--unassigned, --account, --limit, --after\n");
                        return TG_EINVAL;
                }
                return u->assignee ? check_text("--assignee", u->assignee) : 0;
        }
        if (u->unassigned || u->account || (u->assignee && !is_assign)) {
                fprintf(stderr,
                        "tollgate manual %s: --assignee is for assign and list, "
                        "--unassigned and --account for list\n",
                        args[0]);
                return TG_EINVAL;
        }
        r = check_id(nargs > 1 ? args[1] : NULL);
        if (r < 0 || strcmp(args[0], "show") == 0)
                return r;
        r = check_text("--operator", u->operator_name);
        if (r == 0 && strcmp(args[0], "approve") == 0)
                return u->reason || u->outcome_seen ? usage_approve() : 0;
        if (r == 0 && is_assign)
                r = check_text("--assignee", u->assignee);
        if (r == 0 && (is_assign || is_unassign))
                return u->reason ? check_text("--reason", u->reason) : 0;
        if (r == 0)
                r = check_text("--reason", u->reason);
        if (r == 0 && is_resolve && !u->outcome_seen) {
                fprintf(stderr, "tollgate manual: --outcome succeeded|failed is required\n");
                r = TG_EINVAL;
        }
        return r;
}

/* What the options write: file-level, as the table that names it is (a
 * command parses once; options_parse() is not reentrant anyway). */
static struct manual_flags {
        const char *config, *reason, *operator_name, *assignee, *account;
        int64_t limit, after;
        int outcome;
        bool outcome_seen, unassigned;
} flags;

/* In list, --reason filters; elsewhere it is the operator's reason. */
static const struct opt manual_options[] = {
    {.name = "config",
     .short_name = 'c',
     .arg = "FILE",
     .string = &flags.config,
     .required = true,
     .help = "the config file (its store is read and changed)"},
    {.name = "reason",
     .arg = "R",
     .string = &flags.reason,
     .help = "list: only this manual reason; resend, resolve: why (1 to 200 bytes, "
             "audited)"},
    {.name = "limit",
     .arg = "N",
     .i64 = &flags.limit,
     .min = 1,
     .max = 100000,
     .help = "list: at most N operations (1000)"},
    {.name = "after",
     .arg = "CURSOR",
     .i64 = &flags.after,
     .min = 0,
     .max = INT64_MAX,
     .help = "list: start after this cursor (the next_after of the previous page)"},
    {.name = "operator",
     .arg = "NAME",
     .string = &flags.operator_name,
     .help = "resend, resolve: who acts (1 to 200 bytes, audited)"},
    {.name = "outcome",
     .choice = &flags.outcome,
     .choices = outcomes,
     .seen = &flags.outcome_seen,
     .help = "resolve: what the provider says happened"},
    {.name = "assignee",
     .arg = "NAME",
     .string = &flags.assignee,
     .help = "assign: who owns the case from now on; list: only that owner's cases"},
    {.name = "unassigned", .flag = &flags.unassigned, .help = "list: only the cases nobody owns"},
    {.name = "account",
     .arg = "NAME",
     .string = &flags.account,
     .help = "list: only the cases of this account of the config (every account's)"},
};

static const struct options_spec manual_spec = {
    .prog = "tollgate manual",
    .synopsis = "<list|show|resend|resolve|assign|unassign|approve> [ID]",
    .description = manual_about,
    .opts = manual_options,
    .nopts = sizeof(manual_options) / sizeof(manual_options[0]),
    .max_args = 2,
    .epilogue = manual_epilogue};

int cmd_manual(int argc, char **argv)
{
        static const char cmd[] = "manual"; /* the command's name, for its messages */
        const char *args[2] = {NULL, NULL};
        struct tg_config *cfg;
        struct store *store = NULL;
        size_t nargs = 0;
        int r;

        flags = (struct manual_flags){.limit = 1000};
        r = options_parse(&manual_spec, argc, argv, args, &nargs);
        if (r)
                return options_exit_status(r);
        if (nargs == 0) {
                fprintf(stderr, "tollgate manual: a subcommand is required: list, show, resend, "
                                "resolve, assign, unassign, approve (try --help)\n");
                return 2;
        }
        bool is_list = strcmp(args[0], "list") == 0, is_show = strcmp(args[0], "show") == 0;
        bool is_resend = strcmp(args[0], "resend") == 0,
             is_resolve = strcmp(args[0], "resolve") == 0;
        bool is_assign = strcmp(args[0], "assign") == 0,
             is_unassign = strcmp(args[0], "unassign") == 0;
        bool is_approve = strcmp(args[0], "approve") == 0;
        if (!is_list && !is_show && !is_resend && !is_resolve && !is_assign && !is_unassign &&
            !is_approve) {
                fprintf(stderr, "tollgate manual: unknown subcommand '%s' (try --help)\n", args[0]);
                return 2;
        }
        const struct manual_usage u = {.operator_name = flags.operator_name,
                                       .reason = flags.reason,
                                       .assignee = flags.assignee,
                                       .account = flags.account,
                                       .outcome_seen = flags.outcome_seen,
                                       .unassigned = flags.unassigned};
        r = check_usage(nargs, args, &u);
        if (r < 0)
                return options_exit_status(r);
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config(cmd, flags.config, cfg);
        if (r == 0)
                r = cli_check_account(cmd, cfg, flags.account);
        if (r == 0)
                r = cli_open_store(cmd, cfg, &store);
        if (r == 0) {
                if (is_list)
                        r = do_list(store, flags.reason, flags.assignee, flags.unassigned,
                                    flags.account, flags.limit, flags.after);
                else if (is_show)
                        r = do_show(store, args[1]);
                else if (is_approve)
                        r = do_approve(store, cfg, args[1], flags.operator_name);
                else if (is_assign || is_unassign)
                        r = do_assign(store, args[1], flags.operator_name,
                                      is_assign ? flags.assignee : NULL, flags.reason);
                else
                        r = do_act(store, cfg, args[1], is_resolve, flags.operator_name,
                                   flags.reason, flags.outcome == 0 ? OP_SUCCEEDED : OP_REJECTED);
        }
        store_close(store);
        config_release(cfg);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return options_exit_status(r);
}
