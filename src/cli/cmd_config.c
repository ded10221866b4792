/*
 * cmd_config — `tollgate config defaults [--format ini|markdown]`: every
 * configuration key with its default and its meaning, written from the one
 * key table in daemon/config.c (config_describe). The INI form is a config
 * file that loads as the defaults; the Markdown form is docs/config.md.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "core/tg_error.h"
#include "daemon/config.h"
#include "platform/options.h"

static const char *const formats[] = {"ini", "markdown", NULL};

int cmd_config(int argc, char **argv)
{
        int format = 0;
        const struct opt opts[] = {
            {.name = "format",
             .help = "ini: an INI file of every key at its default, the meaning as comments "
                     "(loads as the defaults; the default format); markdown: one table per "
                     "section (docs/config.md)",
             .choice = &format,
             .choices = formats},
        };
        const struct options_spec spec = {
            .prog = "tollgate config",
            .synopsis = "defaults",
            .description = "Prints every configuration key with its default and what it means.",
            .opts = opts,
            .nopts = sizeof(opts) / sizeof(opts[0]),
            .max_args = 1,
        };
        const char *args[1] = {NULL};
        size_t nargs = 0;
        int r = options_parse(&spec, argc, argv, args, &nargs);

        if (r != 0)
                return options_exit_status(r);
        if (nargs < 1 || strcmp(args[0], "defaults") != 0) {
                if (nargs < 1)
                        fputs("tollgate config: which? (defaults)\n", stderr);
                else
                        fprintf(stderr, "tollgate config: unknown subcommand '%s' (try --help)\n",
                                args[0]);
                return 2;
        }
        r = config_describe(stdout, format == 1 ? CONFIG_DOC_MARKDOWN : CONFIG_DOC_INI);
        if (r < 0) {
                fprintf(stderr, "tollgate config: cannot write the defaults: %s\n", tg_strerror(r));
                return 1;
        }
        return 0;
}
