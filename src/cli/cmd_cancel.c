/*
 * cmd_cancel — `tollgate cancel ID`: takes back a refund that never reached
 * the transport, on the store of the config, exactly as POST
 * /v1/refunds/{id}/cancel does (store_cancel: one transaction against any
 * claim, audited). Prints the operation as GET /v1/refunds/{id} shows it.
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

static const char cancel_about[] =
    "Cancels a refund that no call has reached the provider for yet (pending, or waiting with "
    "no call made). A refund whose key was sent may have executed: it is reconciled, never "
    "cancelled. Works on the store directly; audited.";
static const char cancel_epilogue[] =
    "Exit status: 0 cancelled (now or before), 1 refused (a call was made, it is\n"
    "final already, or not found) or a store error, 2 usage or config error.\n";

/* A text option: absent, or 1..200 bytes without control characters. */
static int check_text(const char *opt, const char *v)
{
        size_t n = v ? strlen(v) : 1;

        if (n == 0 || n > 200) {
                fprintf(stderr, "tollgate cancel: %s must be 1 to 200 bytes\n", opt);
                return TG_EINVAL;
        }
        for (size_t i = 0; v && i < n; i++)
                if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
                        fprintf(stderr, "tollgate cancel: %s must not contain control characters\n",
                                opt);
                        return TG_EINVAL;
                }
        return 0;
}

static int cancel(struct store *store, const char *id, const char *operator_name,
                  const char *reason)
{
        struct op_record op;
        bool changed = false;
        json_t *o = NULL;
        int r = store_cancel(store, id, operator_name ? operator_name : "cli",
                             reason ? reason : "cancelled by an operator", clock_wall_now(), &op,
                             &changed);

        if (r == TG_ENOTFOUND)
                fprintf(stderr, "tollgate cancel: no operation '%s'\n", id);
        else if (r == TG_ECONFLICT || r == TG_ESTATE)
                fprintf(stderr, "tollgate cancel: '%s' cannot be cancelled: %s\n", id,
                        store_get(store, id, &op) == 0 &&
                                (op.state == OP_SUCCEEDED || op.state == OP_REJECTED)
                            ? "it has its final answer"
                            : "a call with its key reached the provider (it may have executed: "
                              "it is reconciled, never cancelled here)");
        else if (r < 0)
                fprintf(stderr, "tollgate cancel: cannot change '%s': %s\n", id, tg_strerror(r));
        if (r < 0)
                return TG_ESTORE;
        r = render_op_full(store, &op, &o);
        if (r == 0)
                r = cli_print_json(o, JSON_INDENT(2));
        if (!changed && r == 0)
                fprintf(stderr, "tollgate cancel: '%s' was cancelled already\n", id);
        return r;
}

int cmd_cancel(int argc, char **argv)
{
        const char *config = NULL, *operator_name = NULL, *reason = NULL;
        const struct opt opts[] = {
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &config,
             .required = true,
             .help = "the config file (its store is changed)"},
            {.name = "operator",
             .arg = "NAME",
             .string = &operator_name,
             .help = "who cancels (1 to 200 bytes, audited; default cli)"},
            {.name = "reason",
             .arg = "TEXT",
             .string = &reason,
             .help = "why (1 to 200 bytes, audited)"},
        };
        const struct options_spec spec = {.prog = "tollgate cancel",
                                          .synopsis = "ID",
                                          .description = cancel_about,
                                          .opts = opts,
                                          .nopts = sizeof(opts) / sizeof(opts[0]),
                                          .max_args = 1,
                                          .epilogue = cancel_epilogue};
        const char *args[1] = {NULL};
        struct tg_config *cfg;
        struct store *store = NULL;
        size_t nargs = 0;
        int r = options_parse(&spec, argc, argv, args, &nargs);

        if (r)
                return options_exit_status(r);
        if (nargs != 1 || refund_validate_operation_id(args[0], strlen(args[0]), NULL) < 0) {
                fprintf(stderr, "tollgate cancel: one valid operation ID is required\n");
                return 2;
        }
        if (check_text("--operator", operator_name) < 0 || check_text("--reason", reason) < 0)
                return 2;
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("cancel", config, cfg);
        if (r == 0)
                r = cli_open_store("cancel", cfg, &store);
        if (r == 0)
                r = cancel(store, args[0], operator_name, reason);
        store_close(store);
        config_release(cfg);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return options_exit_status(r);
}
