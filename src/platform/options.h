/*
 * options — the one command-line option layer of tollgate's commands, its
 * tools and tollgate-stub, on getopt_long. A command declares a table of
 * struct opt (name, short letter, value kind and range, destination, help);
 * options_parse() reads argv against it and options_help() prints the help
 * generated from the same table, so an option's name, range and help text
 * are written once.
 *
 * What every command gets alike:
 *   - `--name value` and `--name=value`; `-x value` and `-xvalue` for an
 *     option with a short letter; `--` ends the options;
 *   - long names are matched exactly (getopt_long's unique-prefix matching
 *     is refused: `--dry` is not `--dry-run`);
 *   - the last of a repeated option wins;
 *   - `-h`/`--help` prints the help on stdout and parsing stops (OPTIONS_HELP);
 *   - an unknown option, a missing value, a bad or out-of-range number, a
 *     value that is not one of the choices, a missing required option or an
 *     unexpected positional argument prints one line on stderr naming it
 *     ("tollgate jitter: --clients: not an integer in 1..100000: 'x'") and
 *     returns TG_EINVAL; the command's entry point maps that to exit status
 *     2 (options_exit_status());
 *   - positional arguments, wherever they stand among the options, are
 *     handed back in order for the command to read.
 *
 * Ownership: the tables, the spec and argv belong to the caller; string
 * destinations and positional arguments point into argv.
 */
#ifndef TG_OPTIONS_H
#define TG_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define OPTIONS_MAX  64 /* options in one table */
#define OPTIONS_HELP 1  /* options_parse(): --help was printed */

/*
 * One option. Exactly one destination is set and its type is the option's
 * kind; a destination is written only when the option is given (so the
 * caller sets defaults first) and only with a valid value.
 */
struct opt {
        const char *name; /* long name without "--": "config" */
        char short_name;  /* 'c' for -c (a letter or digit), 0 for none ('h' is --help's) */
        const char *arg;  /* the value's name in help ("FILE"); NULL for a flag
                             and for choices (then "a|b|c") */
        const char *help; /* what it does and its default; wrapped when printed */
        bool required;    /* options_parse() fails when it is not given */
        bool *seen;       /* optional: set to true when given */

        /* The destination, exactly one: */
        bool *flag;          /* a flag, no value: set to true */
        const char **string; /* any text (may be empty), borrowed from argv */
        int64_t *i64;        /* a decimal integer in [min, max] */
        uint64_t *u64;       /* a decimal integer without sign in [umin, umax] */
        double *dbl;         /* a finite number in [dmin, dmax], (dmin, dmax] if dmin_open */
        int *choice;         /* the index of the value in choices */

        int64_t min, max;
        uint64_t umin, umax;
        double dmin, dmax;
        bool dmin_open;
        const char *const *choices; /* NULL-terminated, at least one */
};

struct options_spec {
        const char *prog;     /* "tollgate jitter": starts the usage line and every message */
        const char *synopsis; /* positional part of the usage line ("<list|show> [ID]") or NULL */
        const char *description; /* paragraphs separated by a blank line; each is re-wrapped */
        const struct opt *opts;
        size_t nopts;         /* at most OPTIONS_MAX */
        size_t max_args;      /* positional arguments allowed (0: none) */
        const char *epilogue; /* printed as written after the options (tables, exit
                                    statuses), or NULL */
};

/*
 * Parses argv[1..argc-1] (argv[0] is the command's own name and is skipped,
 * as getopt does). Positional arguments go to ret_args (room for
 * spec->max_args; may be NULL when that is 0), their count to *ret_nargs
 * (may be NULL). Returns 0 (run the command), OPTIONS_HELP (the help was
 * printed on stdout) or TG_EINVAL (a one-line message was printed on
 * stderr; also for a malformed table). Not reentrant: getopt's state is
 * global.
 */
int options_parse(const struct options_spec *spec, int argc, char **argv, const char **ret_args,
                  size_t *ret_nargs);

/* The same, writing the help to out and messages to err. */
int options_parse_to(const struct options_spec *spec, int argc, char **argv, FILE *out, FILE *err,
                     const char **ret_args, size_t *ret_nargs);

/* The help generated from the spec: usage line, description, every option
 * with its value's name and help (wrapped at 79 columns), epilogue. */
void options_help(const struct options_spec *spec, FILE *out);

/* 0 when the table is well formed, else TG_EINVAL: every option has a name
 * (not "help"), a help text and exactly one destination; a short letter is
 * a letter or digit other than 'h'; value options
 * have an argument name; ranges are ordered; choices are given for a choice
 * and only for it; no name or short letter is used twice; a flag is not
 * required. */
int options_spec_check(const struct options_spec *spec);

/*
 * The documented exit status of a command's result code, for its entry
 * point: 0 and OPTIONS_HELP give 0; TG_EINVAL and TG_ECONFIG (bad usage,
 * bad input or a bad config: a message was printed) give 2; any other
 * negative code gives 1 (the command failed). A positive status of the
 * command's own (submit's 3) is returned as it is.
 */
int options_exit_status(int result);

#endif
