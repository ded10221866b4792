/*
 * Unit tests for src/platform/options.c: both value forms and short
 * letters, exact long names (no prefixes), unknown options, missing values,
 * bad and out-of-range numbers, choices, flags given a value, required
 * options, positional arguments (in order, too many, after "--"), the last
 * of a repeated option winning, parsing twice in one process, the table
 * checks, the generated help naming every option within 79 columns, and the
 * mapping of result codes to exit statuses.
 * Output and messages are captured with open_memstream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/tg_error.h"
#include "platform/options.h"

static const char *const formats[] = {"jsonl", "csv", NULL};

struct vals {
        const char *config;
        const char *title;
        uint64_t clients;
        int64_t offset;
        double factor;
        double scale;
        int format;
        bool dry_run;
        bool clients_seen;
        const char *args[2];
        size_t nargs;
};

struct run {
        int r;
        char *out;
        char *err;
};

static void spec_of(struct vals *v, struct opt *opts, size_t *ret_n)
{
        const struct opt table[] = {
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &v->config,
             .help = "the config file",
             .required = true},
            {.name = "clients",
             .arg = "N",
             .u64 = &v->clients,
             .umin = 1,
             .umax = 100000,
             .seen = &v->clients_seen,
             .help = "clients that failed together (5)"},
            {.name = "offset",
             .arg = "N",
             .i64 = &v->offset,
             .min = -10,
             .max = 10,
             .help = "an offset"},
            {.name = "factor",
             .arg = "F",
             .dbl = &v->factor,
             .dmin = 1,
             .dmax = 1000,
             .help = "window growth per round (2)"},
            {.name = "scale",
             .arg = "F",
             .dbl = &v->scale,
             .dmin = 0,
             .dmax = 1,
             .dmin_open = true,
             .help = "time scale"},
            {.name = "format",
             .choice = &v->format,
             .choices = formats,
             .help = "jsonl (default): one JSON object a line; csv: a header line, then one row "
                     "a call, with every text field quoted so that a comma stays in its field"},
            {.name = "dry-run",
             .short_name = 'n',
             .flag = &v->dry_run,
             .help = "report what would change, change nothing"},
            {.name = "title", .arg = "T", .string = &v->title, .help = "a title"},
        };
        memcpy(opts, table, sizeof(table));
        *ret_n = sizeof(table) / sizeof(table[0]);
}

static void defaults(struct vals *v)
{
        memset(v, 0, sizeof(*v));
        v->clients = 5;
        v->factor = 2;
        v->scale = 1;
}

/* Parses the NULL-terminated words after "tollgate jitter". */
static struct run parse(struct vals *v, const char *first, ...)
{
        struct opt opts[16];
        size_t n, len_out = 0, len_err = 0;
        struct options_spec spec = {
            .prog = "tollgate jitter",
            .synopsis = "[ARG...]",
            .description = "Simulates N clients that failed together retrying over R rounds "
                           "of exponential windows.\n\nSecond paragraph, wrapped as well.",
            .max_args = 2,
            .epilogue = "Exit status: 0 ok, 2 usage error.\n",
        };
        char *argv[32];
        int argc = 0;
        struct run res;
        FILE *out, *err;
        va_list ap;

        spec_of(v, opts, &n);
        spec.opts = opts;
        spec.nopts = n;
        argv[argc++] = (char *)"jitter";
        va_start(ap, first);
        for (const char *w = first; w; w = va_arg(ap, const char *))
                argv[argc++] = (char *)w;
        va_end(ap);
        argv[argc] = NULL;
        out = open_memstream(&res.out, &len_out);
        err = open_memstream(&res.err, &len_err);
        assert_non_null(out);
        assert_non_null(err);
        res.r = options_parse_to(&spec, argc, argv, out, err, v->args, &v->nargs);
        fclose(out);
        fclose(err);
        return res;
}

static void done(struct run *r)
{
        free(r->out);
        free(r->err);
}

static void expect_error(const char *want, struct run r)
{
        assert_int_equal(r.r, TG_EINVAL);
        assert_string_equal(r.err, want);
        assert_string_equal(r.out, "");
        done(&r);
}

static void test_both_forms(void **state)
{
        struct vals a, b, c;
        struct run r;
        (void)state;

        defaults(&a);
        r = parse(&a, "--config", "f.ini", "--clients", "7", "--factor", "1.5", "--format", "csv",
                  "--offset", "-3", "--dry-run", NULL);
        assert_int_equal(r.r, 0);
        assert_string_equal(r.err, "");
        done(&r);
        defaults(&b);
        r = parse(&b, "--config=f.ini", "--clients=7", "--factor=1.5", "--format=csv",
                  "--offset=-3", "-n", NULL);
        assert_int_equal(r.r, 0);
        done(&r);
        defaults(&c);
        r = parse(&c, "-cf.ini", "--clients", "7", "--factor=1.5", "--format", "csv", "--offset",
                  "-3", "-n", NULL);
        assert_int_equal(r.r, 0);
        done(&r);
        for (struct vals *v = &a; v; v = v == &a ? &b : v == &b ? &c : NULL) {
                assert_string_equal(v->config, "f.ini");
                assert_int_equal(v->clients, 7);
                assert_true(v->clients_seen);
                assert_true(v->factor == 1.5);
                assert_int_equal(v->format, 1);
                assert_int_equal(v->offset, -3);
                assert_true(v->dry_run);
                assert_int_equal(v->nargs, 0);
        }
        /* untouched when not given; an empty value is a value */
        defaults(&a);
        r = parse(&a, "-c", "x", "--title=", NULL);
        assert_int_equal(r.r, 0);
        assert_int_equal(a.clients, 5);
        assert_false(a.clients_seen);
        assert_true(a.factor == 2);
        assert_false(a.dry_run);
        assert_string_equal(a.title, "");
        done(&r);
        /* the last of a repeated option wins */
        r = parse(&a, "-c", "x", "--clients", "3", "--clients=4", NULL);
        assert_int_equal(r.r, 0);
        assert_int_equal(a.clients, 4);
        done(&r);
}

static void test_positional(void **state)
{
        struct vals v;
        struct run r;
        (void)state;

        defaults(&v);
        r = parse(&v, "show", "--config", "f", "ID-1", NULL);
        assert_int_equal(r.r, 0);
        assert_int_equal(v.nargs, 2);
        assert_string_equal(v.args[0], "show");
        assert_string_equal(v.args[1], "ID-1");
        done(&r);
        /* after "--" everything is positional, even what looks like an option */
        defaults(&v);
        r = parse(&v, "-c", "f", "--", "--clients", "-", NULL);
        assert_int_equal(r.r, 0);
        assert_int_equal(v.nargs, 2);
        assert_string_equal(v.args[0], "--clients");
        assert_string_equal(v.args[1], "-");
        assert_int_equal(v.clients, 5);
        done(&r);
        defaults(&v);
        expect_error("tollgate jitter: unexpected argument 'c' (try --help)\n",
                     parse(&v, "a", "-c", "f", "b", "c", NULL));
        expect_error("tollgate jitter: unexpected argument 'z' (try --help)\n",
                     parse(&v, "-c", "f", "x", "y", "--", "z", NULL));
}

static void test_unknown(void **state)
{
        struct vals v;
        (void)state;

        defaults(&v);
        expect_error("tollgate jitter: unknown option '--bogus' (try --help)\n",
                     parse(&v, "-c", "f", "--bogus", NULL));
        expect_error("tollgate jitter: unknown option '--bogus' (try --help)\n",
                     parse(&v, "-c", "f", "--bogus=1", NULL));
        expect_error("tollgate jitter: unknown option '-x' (try --help)\n",
                     parse(&v, "-c", "f", "-x", NULL));
        /* getopt_long would take a unique prefix; a name is written whole */
        expect_error("tollgate jitter: unknown option '--dry' (try --help)\n",
                     parse(&v, "-c", "f", "--dry", NULL));
        expect_error("tollgate jitter: unknown option '--client' (try --help)\n",
                     parse(&v, "-c", "f", "--client", "5", NULL));
        expect_error("tollgate jitter: unknown option '--client' (try --help)\n",
                     parse(&v, "-c", "f", "--client=5", NULL));
        expect_error("tollgate jitter: unknown option '--conf' (try --help)\n",
                     parse(&v, "--conf", NULL));
        expect_error("tollgate jitter: unknown option '--he' (try --help)\n",
                     parse(&v, "--he", NULL));
        /* ambiguous prefixes too */
        expect_error("tollgate jitter: unknown option '--c' (try --help)\n",
                     parse(&v, "--c", "x", NULL));
        expect_error("tollgate jitter: --dry-run takes no value\n",
                     parse(&v, "-c", "f", "--dry-run=yes", NULL));
        expect_error("tollgate jitter: --help takes no value\n", parse(&v, "--help=1", NULL));
}

static void test_missing_value(void **state)
{
        struct vals v;
        (void)state;

        defaults(&v);
        expect_error("tollgate jitter: --clients: missing value N\n",
                     parse(&v, "-c", "f", "--clients", NULL));
        expect_error("tollgate jitter: --config: missing value FILE\n", parse(&v, "-c", NULL));
        expect_error("tollgate jitter: --config: missing value FILE\n",
                     parse(&v, "--config", NULL));
        expect_error("tollgate jitter: --format: missing value jsonl|csv\n",
                     parse(&v, "-c", "f", "--format", NULL));
        /* a separate value is taken as it is, even when it starts with '-' */
        defaults(&v);
        struct run r = parse(&v, "-c", "f", "--title", "--clients", NULL);
        assert_int_equal(r.r, 0);
        assert_string_equal(v.title, "--clients");
        done(&r);
}

static void test_bad_numbers(void **state)
{
        struct vals v;
        (void)state;

        defaults(&v);
        expect_error("tollgate jitter: --clients: not an integer in 1..100000: 'x'\n",
                     parse(&v, "-c", "f", "--clients", "x", NULL));
        expect_error("tollgate jitter: --clients: not an integer in 1..100000: '0'\n",
                     parse(&v, "-c", "f", "--clients=0", NULL));
        expect_error("tollgate jitter: --clients: not an integer in 1..100000: '100001'\n",
                     parse(&v, "-c", "f", "--clients", "100001", NULL));
        expect_error("tollgate jitter: --clients: not an integer in 1..100000: '-1'\n",
                     parse(&v, "-c", "f", "--clients", "-1", NULL));
        expect_error("tollgate jitter: --clients: not an integer in 1..100000: '5 '\n",
                     parse(&v, "-c", "f", "--clients", "5 ", NULL));
        expect_error("tollgate jitter: --clients: not an integer in 1..100000: "
                     "'99999999999999999999999'\n",
                     parse(&v, "-c", "f", "--clients", "99999999999999999999999", NULL));
        expect_error("tollgate jitter: --clients: not an integer in 1..100000: ''\n",
                     parse(&v, "-c", "f", "--clients=", NULL));
        expect_error("tollgate jitter: --offset: not an integer in -10..10: '-11'\n",
                     parse(&v, "-c", "f", "--offset", "-11", NULL));
        expect_error("tollgate jitter: --offset: not an integer in -10..10: '1.5'\n",
                     parse(&v, "-c", "f", "--offset", "1.5", NULL));
        expect_error("tollgate jitter: --factor: not a number in [1, 1000]: '0.5'\n",
                     parse(&v, "-c", "f", "--factor", "0.5", NULL));
        expect_error("tollgate jitter: --factor: not a number in [1, 1000]: 'nan'\n",
                     parse(&v, "-c", "f", "--factor", "nan", NULL));
        expect_error("tollgate jitter: --factor: not a number in [1, 1000]: 'two'\n",
                     parse(&v, "-c", "f", "--factor=two", NULL));
        expect_error("tollgate jitter: --scale: not a number in (0, 1]: '0'\n",
                     parse(&v, "-c", "f", "--scale", "0", NULL));
        /* nothing was stored by the failed parses */
        assert_int_equal(v.clients, 5);
        assert_int_equal(v.offset, 0);
        assert_true(v.factor == 2);
        assert_true(v.scale == 1);
}

static void test_choices(void **state)
{
        struct vals v;
        struct run r;
        (void)state;

        defaults(&v);
        r = parse(&v, "-c", "f", "--format", "jsonl", NULL);
        assert_int_equal(r.r, 0);
        assert_int_equal(v.format, 0);
        done(&r);
        expect_error("tollgate jitter: --format: not one of jsonl, csv: 'xml'\n",
                     parse(&v, "-c", "f", "--format", "xml", NULL));
        expect_error("tollgate jitter: --format: not one of jsonl, csv: 'CSV'\n",
                     parse(&v, "-c", "f", "--format=CSV", NULL));
}

static void test_required(void **state)
{
        struct vals v;
        (void)state;

        defaults(&v);
        expect_error("tollgate jitter: --config FILE is required\n",
                     parse(&v, "--clients", "3", NULL));
        /* --help wins over a missing required option */
        struct run r = parse(&v, "--help", NULL);
        assert_int_equal(r.r, OPTIONS_HELP);
        assert_string_equal(r.err, "");
        done(&r);
}

static void test_help(void **state)
{
        struct vals v;
        struct opt opts[16];
        size_t n;
        struct run r;
        (void)state;

        defaults(&v);
        spec_of(&v, opts, &n);
        for (int k = 0; k < 2; k++) {
                r = parse(&v, k == 0 ? "--help" : "-h", NULL);
                assert_int_equal(r.r, OPTIONS_HELP);
                assert_int_equal(options_exit_status(r.r), 0);
                assert_string_equal(r.err, "");
                assert_true(strncmp(r.out,
                                    "usage: tollgate jitter [ARG...] --config FILE [options]\n",
                                    56) == 0);
                for (size_t i = 0; i < n; i++) {
                        char name[64];
                        snprintf(name, sizeof(name), "--%s", opts[i].name);
                        assert_non_null(strstr(r.out, name));
                }
                assert_non_null(strstr(r.out, "  -c, --config FILE"));
                assert_non_null(strstr(r.out, "      --clients N"));
                assert_non_null(strstr(r.out, "      --format jsonl|csv"));
                assert_non_null(strstr(r.out, "  -n, --dry-run"));
                assert_non_null(strstr(r.out, "  -h, --help"));
                assert_non_null(strstr(r.out, "Simulates N clients"));
                assert_non_null(strstr(r.out, "\n\nSecond paragraph"));
                assert_non_null(strstr(r.out, "Exit status: 0 ok, 2 usage error.\n"));
                /* wrapped: no line past 79 columns, the long help continues
                 * under its own column */
                for (const char *l = r.out; *l;) {
                        const char *nl = strchr(l, '\n');
                        size_t len = nl ? (size_t)(nl - l) : strlen(l);
                        assert_true(len <= 79);
                        l += len + (nl ? 1 : 0);
                }
                assert_non_null(strstr(r.out, "one row a call"));
                done(&r);
        }
}

static void test_parse_twice(void **state)
{
        struct vals v;
        struct run r;
        (void)state;

        /* getopt's state is global: a second parse starts afresh */
        for (int k = 0; k < 3; k++) {
                defaults(&v);
                r = parse(&v, "--clients", "9", "-c", "f", "pos", NULL);
                assert_int_equal(r.r, 0);
                assert_int_equal(v.clients, 9);
                assert_int_equal(v.nargs, 1);
                done(&r);
                r = parse(&v, "-x", NULL);
                assert_int_equal(r.r, TG_EINVAL);
                assert_int_equal(options_exit_status(r.r), 2);
                done(&r);
        }
}

static void test_spec_check(void **state)
{
        bool f, g;
        const char *s;
        int64_t i;
        int c;
        const struct opt good[] = {
            {.name = "a", .short_name = 'a', .flag = &f, .help = "x"},
            {.name = "b", .arg = "N", .i64 = &i, .min = 1, .max = 1, .help = "x"},
        };
        const struct opt two_dests[] = {{.name = "a", .flag = &f, .string = &s, .help = "x"}};
        const struct opt no_dest[] = {{.name = "a", .help = "x"}};
        const struct opt dup_name[] = {{.name = "a", .flag = &f, .help = "x"},
                                       {.name = "a", .flag = &g, .help = "x"}};
        const struct opt dup_short[] = {{.name = "a", .short_name = 'q', .flag = &f, .help = "x"},
                                        {.name = "b", .short_name = 'q', .flag = &g, .help = "x"}};
        const struct opt short_h[] = {{.name = "a", .short_name = 'h', .flag = &f, .help = "x"}};
        const struct opt named_help[] = {{.name = "help", .flag = &f, .help = "x"}};
        const struct opt short_colon[] = {
            {.name = "a", .short_name = ':', .flag = &f, .help = "x"}};
        const struct opt required_flag[] = {
            {.name = "a", .flag = &f, .required = true, .help = "x"}};
        const struct opt bad_range[] = {
            {.name = "a", .arg = "N", .i64 = &i, .min = 2, .max = 1, .help = "x"}};
        const struct opt no_choices[] = {{.name = "a", .choice = &c, .help = "x"}};
        const struct opt no_arg[] = {{.name = "a", .string = &s, .help = "x"}};
        const struct opt no_help[] = {{.name = "a", .flag = &f}};
        struct options_spec spec = {.prog = "t", .opts = good, .nopts = 2};
        (void)state;

        assert_int_equal(options_spec_check(&spec), 0);
#define BAD(table)                                                                                 \
        do {                                                                                       \
                spec.opts = table;                                                                 \
                spec.nopts = sizeof(table) / sizeof(table[0]);                                     \
                assert_int_equal(options_spec_check(&spec), TG_EINVAL);                            \
        } while (0)
        BAD(two_dests);
        BAD(no_dest);
        BAD(dup_name);
        BAD(dup_short);
        BAD(short_h);
        BAD(named_help);
        BAD(short_colon);
        BAD(required_flag);
        BAD(bad_range);
        BAD(no_choices);
        BAD(no_arg);
        BAD(no_help);
#undef BAD
}

static void test_exit_status(void **state)
{
        (void)state;

        assert_int_equal(options_exit_status(0), 0);
        assert_int_equal(options_exit_status(OPTIONS_HELP), 0);
        assert_int_equal(options_exit_status(TG_EINVAL), 2);  /* usage, bad input */
        assert_int_equal(options_exit_status(TG_ECONFIG), 2); /* bad config */
        assert_int_equal(options_exit_status(TG_ESTORE), 1);  /* the command failed */
        assert_int_equal(options_exit_status(TG_ENOMEM), 1);
        assert_int_equal(options_exit_status(-2), 1); /* -ENOENT */
        assert_int_equal(options_exit_status(3), 3);  /* a status of the command's own */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_both_forms),  cmocka_unit_test(test_positional),
            cmocka_unit_test(test_unknown),     cmocka_unit_test(test_missing_value),
            cmocka_unit_test(test_bad_numbers), cmocka_unit_test(test_choices),
            cmocka_unit_test(test_required),    cmocka_unit_test(test_help),
            cmocka_unit_test(test_parse_twice), cmocka_unit_test(test_spec_check),
            cmocka_unit_test(test_exit_status),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
