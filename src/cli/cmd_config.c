/*
 * cmd_config — `tollgate config defaults [--format ini|markdown|scdoc]`:
 * every configuration key with its default and its meaning, written from
 * the one key table in daemon/config_keys.c (written out by config_describe); the INI form is a
 * config file that loads as the defaults, the Markdown form is
 * docs/config.md, the scdoc form is tollgate.ini(5).
 *
 * `tollgate config check --config FILE`: every problem of the file, one a
 * line as "FILE:LINE: section.key: problem" (like nginx -t), then a verdict;
 * exit 0 when the file loads, 1 when it does not, 2 on bad usage.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "core/tg_error.h"
#include "daemon/config.h"
#include "platform/options.h"

static const char *const formats[] = {"ini", "markdown", "scdoc", NULL};

struct check_out {
        const char *path;
};

static void print_problem(void *ctx, int line, const char *message)
{
        const struct check_out *o = ctx;

        if (line > 0)
                printf("%s:%d: %s\n", o->path, line, message);
        else
                printf("%s: %s\n", o->path, message);
}

static int check(const char *path)
{
        struct check_out o = {.path = path};
        unsigned problems = 0;
        int r = config_check(path, print_problem, &o, &problems);

        if (r == TG_ENOMEM || r == TG_EINVAL) {
                fprintf(stderr, "tollgate config: %s\n", tg_strerror(r));
                return 1;
        }
        if (problems == 0) {
                printf("%s: the configuration is valid\n", path);
                return 0;
        }
        printf("%s: %u problem%s: the configuration is NOT valid\n", path, problems,
               problems == 1 ? "" : "s");
        return 1;
}

int cmd_config(int argc, char **argv)
{
        int format = 0;
        const char *config = NULL;
        const struct opt opts[] = {
            {.name = "format",
             .help = "defaults: ini: an INI file of every key at its default, the meaning as "
                     "comments (loads as the defaults; the default format); markdown: one table "
                     "per section (docs/config.md); scdoc: the source of tollgate.ini(5)",
             .choice = &format,
             .choices = formats},
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &config,
             .help = "check: the config file to check"},
        };
        const struct options_spec spec = {
            .prog = "tollgate config",
            .synopsis = "defaults|check",
            .description =
                "defaults: prints every configuration key with its default and what it means.\n\n"
                "check: reads the file given with --config as the daemon would and lists every "
                "problem, one a line as FILE:LINE: section.key: problem (an unknown key or "
                "section with the closest known name), then a verdict. Secret files are read "
                "and their permissions checked; nothing else is opened (not the store, not the "
                "network).",
            .opts = opts,
            .nopts = sizeof(opts) / sizeof(opts[0]),
            .max_args = 1,
            .epilogue = "Exit status: 0 ok (check: the file is valid), 1 the file has problems "
                        "or cannot be read, 2 bad usage.\n",
        };
        const char *args[1] = {NULL};
        size_t nargs = 0;
        int r = options_parse(&spec, argc, argv, args, &nargs);

        if (r != 0)
                return options_exit_status(r);
        if (nargs < 1) {
                fputs("tollgate config: which? (defaults, check)\n", stderr);
                return 2;
        }
        if (strcmp(args[0], "check") == 0) {
                if (!config) {
                        fputs("tollgate config check: --config FILE is required\n", stderr);
                        return 2;
                }
                return check(config);
        }
        if (strcmp(args[0], "defaults") != 0) {
                fprintf(stderr, "tollgate config: unknown subcommand '%s' (try --help)\n", args[0]);
                return 2;
        }
        r = config_describe(stdout, format == 1   ? CONFIG_DOC_MARKDOWN
                                    : format == 2 ? CONFIG_DOC_SCDOC
                                                  : CONFIG_DOC_INI);
        if (r < 0) {
                fprintf(stderr, "tollgate config: cannot write the defaults: %s\n", tg_strerror(r));
                return 1;
        }
        return 0;
}
