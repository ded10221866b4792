/*
 * options — command-line options from one table (see the header), on
 * glibc's getopt_long.
 *
 * How getopt_long is driven, and why:
 *   - optstring starts with "-:": '-' returns positional arguments in order
 *     as option 1 (no permutation of argv, and POSIXLY_CORRECT cannot make
 *     `manual list --config F` stop at "list"); ':' tells a missing value
 *     (':') from an unknown option ('?');
 *   - a long option's val is its short letter when it has one, else
 *     LONG_BASE + its index, so the returned value finds the table row;
 *   - getopt_long accepts unique prefixes of long names; the element it
 *     matched is compared with the name and a prefix is refused as unknown;
 *   - optind = 0 before each parse makes glibc re-initialise, so a process
 *     may parse more than once (tests, `demo resilience` after `demo`);
 *   - opterr = 0: every message is ours, one line, naming the option.
 */
#include "platform/options.h"

#include <getopt.h>
#include <string.h>

#include "core/strnum.h"
#include "core/tg_error.h"

#define LONG_BASE  256
#define HELP_WIDTH 79
#define HELP_COL   30 /* the column option help starts in, at most */
#define VALUE_SHOW 64 /* bytes of a bad value quoted in a message */

static const char help_text[] = "print this help and exit";

static int dest_count(const struct opt *o)
{
        return (o->flag != NULL) + (o->string != NULL) + (o->i64 != NULL) + (o->u64 != NULL) +
               (o->dbl != NULL) + (o->choice != NULL);
}

static bool is_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool takes_value(const struct opt *o)
{
        return o->flag == NULL;
}

int options_spec_check(const struct options_spec *spec)
{
        if (!spec || !spec->prog || (spec->nopts > 0 && !spec->opts) || spec->nopts > OPTIONS_MAX)
                return TG_EINVAL;
        for (size_t i = 0; i < spec->nopts; i++) {
                const struct opt *o = &spec->opts[i];
                if (!o->name || !o->name[0] || strcmp(o->name, "help") == 0 ||
                    strchr(o->name, '=') || !o->help || dest_count(o) != 1)
                        return TG_EINVAL;
                if (o->short_name && (o->short_name == 'h' || !is_alnum(o->short_name)))
                        return TG_EINVAL;
                if (takes_value(o) && !o->choice && !o->arg)
                        return TG_EINVAL;
                if (o->flag && o->required)
                        return TG_EINVAL;
                if ((o->i64 && o->min > o->max) || (o->u64 && o->umin > o->umax) ||
                    (o->dbl && !(o->dmin <= o->dmax)))
                        return TG_EINVAL;
                if ((o->choice != NULL) != (o->choices != NULL) || (o->choices && !o->choices[0]))
                        return TG_EINVAL;
                for (size_t k = 0; k < i; k++) {
                        const struct opt *p = &spec->opts[k];
                        if (strcmp(p->name, o->name) == 0 ||
                            (o->short_name && p->short_name == o->short_name))
                                return TG_EINVAL;
                }
        }
        return 0;
}

int options_exit_status(int result)
{
        if (result == 0 || result == OPTIONS_HELP)
                return 0;
        if (result == TG_EINVAL || result == TG_ECONFIG)
                return 2;
        return result < 0 ? 1 : result;
}

/* ---- help ----------------------------------------------------------------- */

/* Prints the words of text[0..len) from column *col, wrapping at
 * HELP_WIDTH to column indent; *col == indent means "at the start of a
 * line" (no space before the first word). A word longer than a line gets
 * one alone. */
static void put_words(FILE *out, const char *text, size_t len, size_t *col, size_t indent)
{
        size_t i = 0;

        while (i < len) {
                size_t start, n;
                while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t'))
                        i++;
                if (i == len)
                        break;
                start = i;
                while (i < len && text[i] != ' ' && text[i] != '\n' && text[i] != '\t')
                        i++;
                n = i - start;
                if (*col != indent && *col + 1 + n > HELP_WIDTH) {
                        fprintf(out, "\n%*s", (int)indent, "");
                        *col = indent;
                } else if (*col != indent) {
                        fputc(' ', out);
                        (*col)++;
                }
                fwrite(text + start, 1, n, out);
                *col += n;
        }
}

static void put_word(FILE *out, const char *word, size_t *col, size_t indent)
{
        put_words(out, word, strlen(word), col, indent);
}

/* Prints unit (which may hold spaces) from column *col without breaking it. */
static void put_unit(FILE *out, const char *unit, size_t *col, size_t indent)
{
        size_t n = strlen(unit);

        if (*col != indent && *col + 1 + n > HELP_WIDTH) {
                fprintf(out, "\n%*s", (int)indent, "");
                *col = indent;
        } else if (*col != indent) {
                fputc(' ', out);
                (*col)++;
        }
        fputs(unit, out);
        *col += n;
}

/* The value's name: arg, or the choices as a|b|c. */
static void value_name(const struct opt *o, char *buf, size_t size)
{
        size_t len = 0;

        buf[0] = '\0';
        if (o->arg || !o->choices) {
                snprintf(buf, size, "%s", o->arg ? o->arg : "");
                return;
        }
        for (size_t k = 0; o->choices[k] && len < size; k++) {
                int w = snprintf(buf + len, size - len, "%s%s", k ? "|" : "", o->choices[k]);
                if (w < 0)
                        break;
                len += (size_t)w;
        }
}

/* "  -c, --config FILE" or "      --since ID" */
static void left_column(const struct opt *o, char *buf, size_t size)
{
        char value[256];

        value_name(o, value, sizeof(value));
        if (o->short_name)
                snprintf(buf, size, "  -%c, --%s%s%s", o->short_name, o->name, value[0] ? " " : "",
                         value);
        else
                snprintf(buf, size, "      --%s%s%s", o->name, value[0] ? " " : "", value);
}

static void option_line(FILE *out, const char *left, const char *help, size_t help_col)
{
        size_t col = strlen(left);

        fputs(left, out);
        if (col + 2 > help_col) {
                fprintf(out, "\n%*s", (int)help_col, "");
        } else {
                fprintf(out, "%*s", (int)(help_col - col), "");
        }
        col = help_col;
        put_word(out, help, &col, help_col);
        fputc('\n', out);
}

void options_help(const struct options_spec *spec, FILE *out)
{
        char left[320];
        size_t col, indent, help_col = 0;
        const char *p;

        /* usage: PROG SYNOPSIS --required ARG ... [options] */
        fprintf(out, "usage: %s", spec->prog);
        col = strlen("usage: ") + strlen(spec->prog);
        indent = col + 1;
        if (indent > 40)
                indent = 8;
        if (spec->synopsis)
                put_word(out, spec->synopsis, &col, indent);
        for (size_t i = 0; i < spec->nopts; i++) {
                char value[256], unit[320];
                if (!spec->opts[i].required)
                        continue;
                value_name(&spec->opts[i], value, sizeof(value));
                snprintf(unit, sizeof(unit), "--%s %s", spec->opts[i].name, value);
                put_unit(out, unit, &col, indent);
        }
        put_word(out, "[options]", &col, indent);
        fputs("\n", out);

        if (spec->description) {
                p = spec->description;
                while (*p) {
                        const char *end = strstr(p, "\n\n");
                        size_t len = end ? (size_t)(end - p) : strlen(p);
                        fputc('\n', out);
                        col = 0;
                        put_words(out, p, len, &col, 0);
                        fputc('\n', out);
                        p += len;
                        while (*p == '\n')
                                p++;
                }
        }

        for (size_t i = 0; i < spec->nopts; i++) {
                left_column(&spec->opts[i], left, sizeof(left));
                if (strlen(left) + 2 > help_col)
                        help_col = strlen(left) + 2;
        }
        if (help_col < strlen("  -h, --help") + 2)
                help_col = strlen("  -h, --help") + 2;
        if (help_col > HELP_COL)
                help_col = HELP_COL;
        fputs("\nOptions:\n", out);
        for (size_t i = 0; i < spec->nopts; i++) {
                left_column(&spec->opts[i], left, sizeof(left));
                option_line(out, left, spec->opts[i].help, help_col);
        }
        option_line(out, "  -h, --help", help_text, help_col);
        if (spec->epilogue) {
                fputc('\n', out);
                fputs(spec->epilogue, out);
        }
}

/* ---- parsing -------------------------------------------------------------- */

/* Stores a value for o; on a bad one prints why and returns TG_EINVAL. */
static int store_value(const struct options_spec *spec, const struct opt *o, const char *v,
                       FILE *err)
{
        int r = 0;

        if (o->string) {
                *o->string = v;
        } else if (o->i64) {
                int64_t x;
                r = strnum_i64(v, o->min, o->max, &x);
                if (r == 0)
                        *o->i64 = x;
                else
                        fprintf(err, "%s: --%s: not an integer in %lld..%lld: '%.*s'\n", spec->prog,
                                o->name, (long long)o->min, (long long)o->max, VALUE_SHOW, v);
        } else if (o->u64) {
                uint64_t x;
                r = strnum_u64(v, o->umin, o->umax, &x);
                if (r == 0)
                        *o->u64 = x;
                else
                        fprintf(err, "%s: --%s: not an integer in %llu..%llu: '%.*s'\n", spec->prog,
                                o->name, (unsigned long long)o->umin, (unsigned long long)o->umax,
                                VALUE_SHOW, v);
        } else if (o->dbl) {
                double x = 0;
                r = strnum_double(v, o->dmin, o->dmax, &x);
                if (r == 0 && o->dmin_open && !(x > o->dmin))
                        r = TG_ERANGE;
                if (r == 0)
                        *o->dbl = x;
                else
                        fprintf(err, "%s: --%s: not a number in %c%g, %g]: '%.*s'\n", spec->prog,
                                o->name, o->dmin_open ? '(' : '[', o->dmin, o->dmax, VALUE_SHOW, v);
        } else if (o->choice) {
                char names[256];
                int k;
                for (k = 0; o->choices[k]; k++)
                        if (strcmp(o->choices[k], v) == 0)
                                break;
                if (o->choices[k]) {
                        *o->choice = k;
                } else {
                        size_t len = 0;
                        names[0] = '\0';
                        for (int j = 0; o->choices[j] && len < sizeof(names); j++) {
                                int w = snprintf(names + len, sizeof(names) - len, "%s%s",
                                                 j ? ", " : "", o->choices[j]);
                                if (w < 0)
                                        break;
                                len += (size_t)w;
                        }
                        fprintf(err, "%s: --%s: not one of %s: '%.*s'\n", spec->prog, o->name,
                                names, VALUE_SHOW, v);
                        r = TG_EINVAL;
                }
        }
        return r < 0 ? TG_EINVAL : 0;
}

/* The table index of a value getopt_long returned, or -1. */
static int row_of(const struct options_spec *spec, int val)
{
        if (val >= LONG_BASE && (size_t)(val - LONG_BASE) < spec->nopts)
                return val - LONG_BASE;
        for (size_t i = 0; val > 0 && i < spec->nopts; i++)
                if (spec->opts[i].short_name == val)
                        return (int)i;
        return -1;
}

/* The name part of "--name" or "--name=value", for messages. */
static int name_len(const char *token)
{
        return (int)strcspn(token, "=");
}

static bool is_long(const char *token)
{
        return strncmp(token, "--", 2) == 0;
}

/* Did the user write the whole long name? token is "--name[=value]". */
static bool exact(const char *token, const char *name)
{
        size_t n = strlen(name);

        return strncmp(token + 2, name, n) == 0 && (token[2 + n] == '\0' || token[2 + n] == '=');
}

static int unknown(const struct options_spec *spec, const char *token, FILE *err)
{
        fprintf(err, "%s: unknown option '%.*s' (try --help)\n", spec->prog, name_len(token),
                token);
        return TG_EINVAL;
}

/* getopt_long returned ':' (a value is missing) or '?' (unknown option, or
 * a value given to a flag). For a long option getopt has stepped past its
 * element, so argv[optind - 1] is what the user wrote. */
static int report(const struct options_spec *spec, int c, char **argv, FILE *err)
{
        const char *token = argv[optind - 1];
        int i = row_of(spec, optopt);
        const char *name = i >= 0 ? spec->opts[i].name : optopt == 'h' ? "help" : NULL;

        if (optopt == 0 || (is_long(token) && name && !exact(token, name)))
                return unknown(spec, token, err);
        if (!name) {
                fprintf(err, "%s: unknown option '-%c' (try --help)\n", spec->prog, optopt);
                return TG_EINVAL;
        }
        if (c == ':') {
                char value[256];
                value_name(&spec->opts[i], value, sizeof(value));
                fprintf(err, "%s: --%s: missing value %s\n", spec->prog, name, value);
        } else {
                fprintf(err, "%s: --%s takes no value\n", spec->prog, name);
        }
        return TG_EINVAL;
}

static int add_arg(const struct options_spec *spec, const char *arg, const char **args,
                   size_t *nargs, FILE *err)
{
        if (*nargs >= spec->max_args) {
                fprintf(err, "%s: unexpected argument '%.*s' (try --help)\n", spec->prog,
                        VALUE_SHOW, arg);
                return TG_EINVAL;
        }
        args[(*nargs)++] = arg;
        return 0;
}

int options_parse_to(const struct options_spec *spec, int argc, char **argv, FILE *out, FILE *err,
                     const char **ret_args, size_t *ret_nargs)
{
        struct option longopts[OPTIONS_MAX + 2];
        char shorts[3 + 2 * OPTIONS_MAX + 1];
        bool given[OPTIONS_MAX] = {false};
        size_t ns = 0, nargs = 0;

        if (options_spec_check(spec) < 0 || (spec->max_args > 0 && !ret_args) || argc < 1) {
                fprintf(err, "%s: internal error: malformed option table\n",
                        spec && spec->prog ? spec->prog : "?");
                return TG_EINVAL;
        }
        shorts[ns++] = '-';
        shorts[ns++] = ':';
        shorts[ns++] = 'h';
        for (size_t i = 0; i < spec->nopts; i++) {
                const struct opt *o = &spec->opts[i];
                longopts[i] = (struct option){
                    .name = o->name,
                    .has_arg = takes_value(o) ? required_argument : no_argument,
                    .flag = NULL,
                    .val = o->short_name ? o->short_name : LONG_BASE + (int)i,
                };
                if (o->short_name) {
                        shorts[ns++] = o->short_name;
                        if (takes_value(o))
                                shorts[ns++] = ':';
                }
        }
        shorts[ns] = '\0';
        longopts[spec->nopts] = (struct option){"help", no_argument, NULL, 'h'};
        longopts[spec->nopts + 1] = (struct option){NULL, 0, NULL, 0};

        opterr = 0;
        optind = 0; /* glibc: start afresh, whatever was parsed before */
        for (;;) {
                const struct opt *o;
                int longindex = -1;
                int c = getopt_long(argc, argv, shorts, longopts, &longindex);
                int i;

                if (c == -1)
                        break;
                if (c == ':' || c == '?')
                        return report(spec, c, argv, err);
                if (longindex >= 0) {
                        /* Its element is the last one, or the one before a
                         * separate value. */
                        const char *token = optarg && optind >= 2 && optarg == argv[optind - 1]
                                                ? argv[optind - 2]
                                                : argv[optind - 1];
                        if (!exact(token, longopts[longindex].name))
                                return unknown(spec, token, err);
                }
                if (c == 1) {
                        if (add_arg(spec, optarg, ret_args, &nargs, err) < 0)
                                return TG_EINVAL;
                        continue;
                }
                if (c == 'h') {
                        options_help(spec, out);
                        return OPTIONS_HELP;
                }
                i = row_of(spec, c);
                if (i < 0) { /* cannot happen: every val comes from the table */
                        fprintf(err, "%s: internal error: option %d\n", spec->prog, c);
                        return TG_EINVAL;
                }
                o = &spec->opts[i];
                if (o->flag)
                        *o->flag = true;
                else if (store_value(spec, o, optarg, err) < 0)
                        return TG_EINVAL;
                if (o->seen)
                        *o->seen = true;
                given[i] = true;
        }
        /* after "--": the rest is positional */
        for (int k = optind; k < argc; k++)
                if (add_arg(spec, argv[k], ret_args, &nargs, err) < 0)
                        return TG_EINVAL;
        for (size_t i = 0; i < spec->nopts; i++) {
                const struct opt *o = &spec->opts[i];
                char value[256];
                if (!o->required || given[i])
                        continue;
                value_name(o, value, sizeof(value));
                fprintf(err, "%s: --%s %s is required\n", spec->prog, o->name, value);
                return TG_EINVAL;
        }
        if (ret_nargs)
                *ret_nargs = nargs;
        return 0;
}

int options_parse(const struct options_spec *spec, int argc, char **argv, const char **ret_args,
                  size_t *ret_nargs)
{
        return options_parse_to(spec, argc, argv, stdout, stderr, ret_args, ret_nargs);
}
