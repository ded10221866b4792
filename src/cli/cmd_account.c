/*
 * cmd_account — `tollgate account list|set|pause|resume|audit`: an
 * account's run-time controls (daemon/account_ctl.h) on the store of the
 * config, no API needed. Output is the same JSON as GET /v1/accounts and
 * GET /v1/accounts/{account}/audit. A change and its audit row commit
 * together; every dispatcher of the account takes it within a second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/strnum.h"
#include "core/tg_error.h"
#include "daemon/account_ctl.h"
#include "platform/clock.h"
#include "platform/options.h"

static const char account_about[] =
    "An account's run-time controls, without a restart: slow it down (--rate), lower its "
    "in-flight cap (--max-in-flight), pause or resume it. The configured exit.starts_per_second "
    "and exit.max_in_flight stay the ceiling; `default` clears a control. Kept in the store "
    "(a restart keeps them) and audited: who, when, from what to what.";

static const char account_epilogue[] =
    "Subcommands:\n"
    "  list\n"
    "        every account: configured, controls, in force (JSON)\n"
    "  set NAME [--rate R|default] [--max-in-flight N|default] --operator WHO --reason TEXT\n"
    "  pause NAME --operator WHO --reason TEXT\n"
    "        no call of the account starts until it is resumed\n"
    "  resume NAME --operator WHO --reason TEXT\n"
    "  audit NAME [--after ID]\n"
    "        the account's changes, oldest first (JSON lines)\n"
    "\n"
    "Exit status: 0 done, 1 failed (store error), 2 usage or config error (an unknown\n"
    "account, a rate above the configured one, ...).\n";

static int list(const struct tg_config *cfg, struct store *store)
{
        struct tg_config *view = malloc(sizeof(*view));
        json_t *all = json_array();
        int r = view && all ? 0 : TG_ENOMEM;

        for (unsigned i = 0; r == 0 && i < cfg->account_count; i++) {
                struct account_controls c;
                const char *name = cfg->accounts[i].name;

                account_ctl_find(cfg, name, view);
                r = store_controls_get(store, name, &c);
                if (r == 0 && json_array_append_new(all, account_ctl_json(view, name, &c)) < 0)
                        r = TG_ENOMEM;
        }
        free(view);
        if (r < 0) {
                json_decref(all);
                return r;
        }
        return cli_print_json(json_pack("{s:o}", "accounts", all), JSON_COMPACT);
}

static int on_audit(const struct account_audit_record *a, void *userdata)
{
        (void)userdata;
        return cli_print_json(account_ctl_audit_json(a), JSON_COMPACT);
}

/* "default" clears a control (0); else a number in range. */
static int control_arg(const char *name, const char *text, double max, bool whole,
                       double *ret_value)
{
        if (strcmp(text, "default") == 0) {
                *ret_value = 0;
                return 0;
        }
        if (strnum_double(text, 0, max, ret_value) < 0 || !(*ret_value > 0) ||
            (whole && *ret_value != (double)(unsigned)*ret_value)) {
                fprintf(stderr,
                        "tollgate account: --%s: expected %s > 0 or `default`, not \"%s\"\n", name,
                        whole ? "an integer" : "a number", text);
                return TG_EINVAL;
        }
        return 0;
}

static int change(const struct tg_config *cfg, struct store *store, const char *verb,
                  const char *name, const char *rate, const char *cap, const char *who,
                  const char *reason)
{
        struct account_change ch = {0};
        struct account_controls now;
        struct tg_config *view;
        const char *field = NULL;
        char why[300];
        double v;
        int r;

        if (!who || !reason || !who[0] || !reason[0]) {
                fprintf(stderr, "tollgate account %s: --operator and --reason are required\n",
                        verb);
                return TG_EINVAL;
        }
        if (strcmp(verb, "set") == 0) {
                if (!rate && !cap) {
                        fprintf(stderr, "tollgate account set: give --rate or --max-in-flight\n");
                        return TG_EINVAL;
                }
                if (rate && control_arg("rate", rate, 1e9, false, &v) < 0)
                        return TG_EINVAL;
                ch.set_rate = rate != NULL;
                ch.starts_per_second = rate ? v : 0;
                if (cap && control_arg("max-in-flight", cap, 1e6, true, &v) < 0)
                        return TG_EINVAL;
                ch.set_cap = cap != NULL;
                ch.max_in_flight = cap ? (unsigned)v : 0;
        } else {
                ch.set_paused = true;
                ch.paused = strcmp(verb, "pause") == 0;
        }
        r = account_ctl_change(store, cfg, name, &ch, who, reason, clock_wall_now(), &now, &field,
                               why, sizeof(why));
        if (r == TG_ENOTFOUND) {
                char names[1024];
                config_account_names(cfg, names, sizeof(names));
                fprintf(stderr, "tollgate account %s: no account \"%s\" (the config has: %s)\n",
                        verb, name, names);
                return TG_EINVAL;
        }
        if (r == TG_EINVAL || r == TG_EAGAIN) {
                fprintf(stderr, "tollgate account %s: %s\n", verb, why);
                return r;
        }
        if (r < 0)
                return r;
        view = malloc(sizeof(*view));
        if (!view)
                return TG_ENOMEM;
        account_ctl_find(cfg, name, view);
        r = cli_print_json(account_ctl_json(view, name, &now), JSON_COMPACT);
        free(view);
        return r;
}

int cmd_account(int argc, char **argv)
{
        const char *config = NULL, *rate = NULL, *cap = NULL, *who = NULL, *reason = NULL;
        const char *args[2] = {NULL, NULL};
        int64_t after = 0;
        size_t nargs = 0;
        const struct opt opts[] = {
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &config,
             .required = true,
             .help = "the config file (its accounts and store)"},
            {.name = "rate",
             .arg = "R",
             .string = &rate,
             .help = "set: starts per second, at most the configured (default: clear)"},
            {.name = "max-in-flight",
             .arg = "N",
             .string = &cap,
             .help = "set: calls open at once, at most the configured (default: clear)"},
            {.name = "operator", .arg = "WHO", .string = &who, .help = "who makes the change"},
            {.name = "reason", .arg = "TEXT", .string = &reason, .help = "why (audited)"},
            {.name = "after",
             .arg = "ID",
             .i64 = &after,
             .min = 0,
             .max = INT64_MAX,
             .help = "audit: only changes with an id above ID"},
        };
        const struct options_spec spec = {.prog = "tollgate account",
                                          .description = account_about,
                                          .epilogue = account_epilogue,
                                          .synopsis = "<list|set|pause|resume|audit> [NAME]",
                                          .max_args = 2,
                                          .opts = opts,
                                          .nopts = sizeof(opts) / sizeof(opts[0])};
        struct tg_config *cfg;
        struct store *store = NULL;
        const char *verb;
        int r;

        r = options_parse(&spec, argc, argv, args, &nargs);
        if (r)
                return options_exit_status(r);
        verb = nargs > 0 ? args[0] : "";
        if (strcmp(verb, "list") == 0 ? nargs != 1
            : (strcmp(verb, "set") == 0 || strcmp(verb, "pause") == 0 ||
               strcmp(verb, "resume") == 0 || strcmp(verb, "audit") == 0)
                ? nargs != 2
                : true) {
                fprintf(stderr, "tollgate account: expected `list`, or `set`, `pause`, `resume` "
                                "or `audit` and an account's NAME\n");
                return 2;
        }
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("account", config, cfg);
        if (r == 0)
                r = cli_open_store("account", cfg, &store);
        if (r == 0 && strcmp(verb, "list") == 0) {
                r = list(cfg, store);
        } else if (r == 0 && strcmp(verb, "audit") == 0) {
                if (!config_account_find(cfg, args[1])) {
                        fprintf(stderr, "tollgate account audit: no account \"%s\"\n", args[1]);
                        r = TG_EINVAL;
                } else {
                        r = store_list_account_audit(store, args[1], after, 100000, on_audit, NULL);
                }
        } else if (r == 0) {
                r = change(cfg, store, verb, args[1], rate, cap, who, reason);
        }
        if (r < 0 && r != TG_EINVAL && r != TG_ECONFIG)
                fprintf(stderr, "tollgate account: %s\n", tg_strerror(r));
        fflush(stdout);
        store_close(store);
        config_release(cfg);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        if (r == TG_EINVAL)
                return 2;
        return options_exit_status(r < 0 && r != TG_ECONFIG ? TG_ESTORE : r);
}
