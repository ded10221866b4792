/*
 * cmd_config — `tollgate config defaults [--format ini|markdown]`: every
 * configuration key with its default and its meaning, written from the one
 * key table in daemon/config.c (config_describe). The INI form is a config
 * file that loads as the defaults; the Markdown form is docs/config.md.
 *
 * The option parsing is local on purpose: two options, no shared parser.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "core/tg_error.h"
#include "daemon/config.h"

static const char config_help[] =
    "usage: tollgate config defaults [--format ini|markdown]\n"
    "Prints every configuration key with its default and what it means.\n"
    "  --format ini        an INI file of every key at its default, the meaning as\n"
    "                      comments (the default format; loads as the defaults)\n"
    "  --format markdown   one table per section (docs/config.md)\n";

/* The format named by text; 0 or TG_EINVAL. */
static int parse_format(const char *text, enum config_doc_format *ret_fmt)
{
        if (strcmp(text, "ini") == 0) {
                *ret_fmt = CONFIG_DOC_INI;
                return 0;
        }
        if (strcmp(text, "markdown") == 0) {
                *ret_fmt = CONFIG_DOC_MARKDOWN;
                return 0;
        }
        return TG_EINVAL;
}

int cmd_config(int argc, char **argv)
{
        enum config_doc_format fmt = CONFIG_DOC_INI;
        const char *format = NULL;
        int r;

        for (int i = 0; i < argc; i++) {
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        fputs(config_help, stdout);
                        return 0;
                }
        }
        if (argc < 1 || strcmp(argv[0], "defaults") != 0) {
                if (argc < 1)
                        fputs("tollgate config: which? (defaults)\n", stderr);
                else
                        fprintf(stderr, "tollgate config: unknown subcommand '%s' (try --help)\n",
                                argv[0]);
                return 2;
        }
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                if (strcmp(a, "--format") == 0) {
                        if (i + 1 >= argc) {
                                fputs("tollgate config: --format needs ini or markdown\n", stderr);
                                return 2;
                        }
                        format = argv[++i];
                } else if (strncmp(a, "--format=", 9) == 0) {
                        format = a + 9;
                } else {
                        fprintf(stderr, "tollgate config: unknown option '%s' (try --help)\n", a);
                        return 2;
                }
        }
        if (format && parse_format(format, &fmt) < 0) {
                fprintf(stderr, "tollgate config: --format must be ini or markdown, got '%s'\n",
                        format);
                return 2;
        }
        r = config_describe(stdout, fmt);
        if (r < 0) {
                fprintf(stderr, "tollgate config: cannot write the defaults: %s\n", tg_strerror(r));
                return 1;
        }
        return 0;
}
