/*
 * cmd_reconcile — `tollgate reconcile --file F.csv`: settles operations the
 * exit could not settle (unknown, retry_wait, manual) from the provider's
 * settlement file, through store_settle_external() (audited, source
 * "settlement_file"), and reports every row that did not match.
 *
 * The file: CSV (RFC 4180 quoting, no line breaks inside fields), a header
 * line naming the columns, at least operation_id and status (succeeded or
 * failed), optionally refund_id; other columns are ignored. Rows and fields
 * are bounded (RECON_LINE_MAX bytes a line); a line with a NUL byte, a bad
 * quote, a missing column, an invalid id or status is reported, never
 * guessed at.
 *
 * Results, one JSON line each on stdout for every row that is not simply
 * settled or already so: no_such_operation, mismatch (we hold the other final
 * outcome), in_flight (the exit's own call is open: try again later),
 * pending (never sent: the provider cannot know it), invalid_row.
 *
 * Then the other direction: OUR operations whose outcome is open (unknown,
 * retry_wait, and manual for a reason that leaves the outcome unknown:
 * attempts exhausted, deadline, query budget, key retention), that made at
 * least one POST, and that no row of the file named (a row naming one counts
 * even when it was invalid: it is reported already): missing_from_file, with
 * our state. They are snapshotted before the file is read, paged through the
 * store (store_list_state), at most RECON_OPEN_MAX of them; past that the
 * check says it was incomplete rather than guess. Each is read again before
 * it is listed, so one the exit settled meanwhile is not. At most
 * --max-missing are listed; the summary counts them all.
 *
 * Then a summary line. Exit status: 0 every row matched and nothing is
 * missing, 1 otherwise (listed), 2 usage, config or unreadable file.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/csv.h"
#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "platform/clock.h"
#include "platform/options.h"

#define RECON_LINE_MAX       4096
#define RECON_COLS_MAX       64
#define RECON_OPEN_MAX       200000 /* our open operations checked against the file */
#define RECON_PAGE           500    /* store rows per page */
#define RECON_MISSING_LISTED 1000   /* default of --max-missing */

static const char reconcile_about[] =
    "Settles unknown (and retry_wait/manual) operations from the provider's settlement file and "
    "reports the rows that did not match, and our open operations (unknown, retry_wait, manual "
    "with an unknown outcome; sent at least once) that the file does not name.\n\n"
    "The file: CSV with a header naming operation_id, status (succeeded|failed) and optionally "
    "refund_id; other columns are ignored.";
static const char reconcile_epilogue[] =
    "Output: one JSON line per row that did not match (no_such_operation,\n"
    "mismatch, in_flight, pending, invalid_row), one per missing operation\n"
    "(missing_from_file), then a summary line.\n"
    "Exit status: 0 all rows matched and none missing, 1 otherwise, 2 usage or\n"
    "unreadable file.\n";

struct tally {
        unsigned long rows, settled, already, unmatched, missing;
};

/* ---- our open operations, to find the ones the file does not name ---------- */

struct open_op {
        char id[TG_OP_ID_MAX + 1];
        bool named; /* a row of the file names it */
};

/* A sorted snapshot of our open operations; bounded by RECON_OPEN_MAX. */
struct open_set {
        struct open_op *ops;
        size_t n, cap;
        bool incomplete;    /* more than RECON_OPEN_MAX: the check is partial */
        int64_t last_id;    /* paging: the last row seen */
        unsigned page_rows; /* rows seen in the current page */
};

/* Open: the outcome is not known to us, and the provider may know it (a
 * POST went out). Manual for key_reused or invalid is not: the provider
 * answered, or it was never sent. */
static bool outcome_open(const struct op_record *op)
{
        if (op->attempts == 0)
                return false;
        switch (op->state) {
        case OP_UNKNOWN:
        case OP_RETRY_WAIT:
                return true;
        case OP_MANUAL:
                return op->reason == MANUAL_ATTEMPTS_EXHAUSTED || op->reason == MANUAL_DEADLINE ||
                       op->reason == MANUAL_QUERY_BUDGET || op->reason == MANUAL_KEY_RETENTION;
        default:
                return false;
        }
}

static int collect_open(const struct op_record *op, void *userdata)
{
        struct open_set *set = userdata;

        set->last_id = op->id;
        set->page_rows++;
        if (!outcome_open(op))
                return 0;
        if (set->n == RECON_OPEN_MAX) {
                set->incomplete = true;
                return 1; /* stop the walk */
        }
        if (set->n == set->cap) {
                size_t cap = set->cap ? set->cap * 2 : 256;
                struct open_op *ops;
                if (cap > RECON_OPEN_MAX)
                        cap = RECON_OPEN_MAX;
                ops = realloc(set->ops, cap * sizeof(*ops));
                if (!ops)
                        return TG_ENOMEM;
                set->ops = ops;
                set->cap = cap;
        }
        snprintf(set->ops[set->n].id, sizeof(set->ops[set->n].id), "%s", op->req.operation_id);
        set->ops[set->n].named = false;
        set->n++;
        return 0;
}

static int open_cmp(const void *a, const void *b)
{
        return strcmp(((const struct open_op *)a)->id, ((const struct open_op *)b)->id);
}

/* Pages through every operation in the states that can be open. */
static int open_set_load(struct store *store, struct open_set *set)
{
        static const enum op_state states[] = {OP_UNKNOWN, OP_RETRY_WAIT, OP_MANUAL};

        for (size_t i = 0; i < sizeof(states) / sizeof(states[0]) && !set->incomplete; i++) {
                set->last_id = 0;
                do {
                        int r;
                        set->page_rows = 0;
                        r = store_list_state(store, states[i], set->last_id, RECON_PAGE,
                                             collect_open, set);
                        if (r < 0)
                                return r;
                } while (!set->incomplete && set->page_rows == RECON_PAGE);
        }
        if (set->n > 1)
                qsort(set->ops, set->n, sizeof(*set->ops), open_cmp);
        return 0;
}

static void open_set_mark(struct open_set *set, const char *id)
{
        struct open_op key;
        struct open_op *hit;

        if (set->n == 0 || strlen(id) >= sizeof(key.id))
                return;
        memcpy(key.id, id, strlen(id) + 1);
        key.named = false;
        hit = bsearch(&key, set->ops, set->n, sizeof(*set->ops), open_cmp);
        if (hit)
                hit->named = true;
}

static void report(struct tally *t, unsigned long line, const char *id, const char *result,
                   const char *ours, const char *theirs)
{
        json_t *o = json_pack("{s:I, s:s}", "line", (json_int_t)line, "result", result);
        char *text;

        t->unmatched++;
        if (!o)
                return;
        if (id) {
                json_t *v = json_string(id);
                json_object_set_new(o, "operation_id", v ? v : json_null());
        }
        if (ours)
                json_object_set_new(o, "ours", json_string(ours));
        if (theirs)
                json_object_set_new(o, "provider", json_string(theirs));
        text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (text)
                puts(text);
        free(text);
}

static int column(char **names, int n, const char *want)
{
        for (int i = 0; i < n; i++)
                if (strcmp(names[i], want) == 0)
                        return i;
        return -1;
}

static void one_row(struct store *store, char **f, int nf, const int col[3], unsigned long line,
                    bool dry_run, struct open_set *open, struct tally *t)
{
        struct op_record op;
        enum op_state outcome;
        const char *id, *status, *refund_id;
        int r;

        t->rows++;
        if (nf <= col[0] || nf <= col[1] || (col[2] >= 0 && nf <= col[2])) {
                report(t, line, NULL, "invalid_row", NULL, NULL);
                return;
        }
        id = f[col[0]];
        status = f[col[1]];
        open_set_mark(open, id); /* named, whatever else is wrong with the row */
        refund_id = col[2] >= 0 ? f[col[2]] : "";
        if (refund_validate_operation_id(id, strlen(id), NULL) < 0) {
                report(t, line, NULL, "invalid_row", NULL, NULL);
                return;
        }
        if (strcmp(status, "succeeded") == 0)
                outcome = OP_SUCCEEDED;
        else if (strcmp(status, "failed") == 0)
                outcome = OP_REJECTED;
        else {
                report(t, line, id, "invalid_row", NULL, NULL);
                return;
        }
        if (strlen(refund_id) >= sizeof(op.refund_id)) {
                report(t, line, id, "invalid_row", NULL, status);
                return;
        }
        r = store_get(store, id, &op);
        if (r == TG_ENOTFOUND) {
                report(t, line, id, "no_such_operation", NULL, status);
                return;
        }
        if (r < 0) {
                report(t, line, id, "store_error", NULL, status);
                return;
        }
        if (op.state == outcome) {
                t->already++;
                return;
        }
        if (op.state == OP_SUCCEEDED || op.state == OP_REJECTED) {
                report(t, line, id, "mismatch", op_state_name(op.state), status);
                return;
        }
        if (op.state == OP_IN_FLIGHT || op.state == OP_PENDING) {
                report(t, line, id, op_state_name(op.state), op_state_name(op.state), status);
                return;
        }
        if (dry_run) {
                t->settled++;
                return;
        }
        r = store_settle_external(store, id, outcome, refund_id[0] ? refund_id : NULL,
                                  "settlement_file", clock_wall_now());
        if (r == 0)
                t->settled++;
        else if (r == TG_ESTATE)
                report(t, line, id, op_state_name(OP_IN_FLIGHT), NULL,
                       status); /* moved meanwhile */
        else
                report(t, line, id, "store_error", NULL, status);
}

static int run(struct store *store, FILE *f, bool dry_run, struct open_set *open, struct tally *t)
{
        char *line = malloc(RECON_LINE_MAX + 2);
        char *head = malloc(RECON_LINE_MAX + 2);
        char *names[RECON_COLS_MAX], *fields[RECON_COLS_MAX];
        unsigned long lineno = 0;
        int col[3] = {-1, -1, -1}, nnames = 0, r = 0;

        if (!line || !head) {
                r = TG_ENOMEM;
                goto out;
        }
        while (fgets(line, RECON_LINE_MAX + 2, f)) {
                size_t len = strlen(line);
                bool long_line =
                    len > RECON_LINE_MAX || (len == RECON_LINE_MAX + 1 && line[len - 1] != '\n');
                lineno++;
                if (long_line) {
                        int c;
                        while ((c = fgetc(f)) != EOF && c != '\n')
                                ;
                }
                /* a NUL byte inside the line: fgets stopped short of '\n' */
                bool has_nul = !long_line && len > 0 && line[len - 1] != '\n' && !feof(f);
                while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
                        line[--len] = '\0';
                if (nnames == 0) {
                        if (long_line || has_nul || strlen(line) == 0) {
                                fprintf(stderr, "tollgate reconcile: line 1 must be a CSV header "
                                                "naming operation_id and status\n");
                                r = TG_EINVAL;
                                goto out;
                        }
                        memcpy(head, line, len + 1);
                        size_t n = 0;
                        nnames = csv_split(head, CSV_QUOTES_STRICT, names, RECON_COLS_MAX, &n) == 0
                                     ? (int)n
                                     : -1;
                        col[0] = nnames > 0 ? column(names, nnames, "operation_id") : -1;
                        col[1] = nnames > 0 ? column(names, nnames, "status") : -1;
                        col[2] = nnames > 0 ? column(names, nnames, "refund_id") : -1;
                        if (col[0] < 0 || col[1] < 0) {
                                fprintf(stderr, "tollgate reconcile: the header must name the "
                                                "columns operation_id and status\n");
                                r = TG_EINVAL;
                                goto out;
                        }
                        continue;
                }
                if (len == 0 && !long_line && !has_nul)
                        continue; /* blank line */
                if (long_line || has_nul || memchr(line, '\0', len) != NULL) {
                        t->rows++;
                        report(t, lineno, NULL, "invalid_row", NULL, NULL);
                        continue;
                }
                size_t nf = 0;
                if (csv_split(line, CSV_QUOTES_STRICT, fields, RECON_COLS_MAX, &nf) < 0) {
                        t->rows++;
                        report(t, lineno, NULL, "invalid_row", NULL, NULL);
                        continue;
                }
                one_row(store, fields, (int)nf, col, lineno, dry_run, open, t);
        }
        if (ferror(f)) {
                fprintf(stderr, "tollgate reconcile: cannot read the file\n");
                r = TG_EINVAL; /* documented: an unreadable file is a usage error (2) */
        } else if (nnames == 0) {
                fprintf(stderr, "tollgate reconcile: the file is empty (no header)\n");
                r = TG_EINVAL;
        }
out:
        free(line);
        free(head);
        return r;
}

/* Lists (up to max_listed) and counts our open operations no row named;
 * each is read again first, so one settled meanwhile is left out. */
static int report_missing(struct store *store, const struct open_set *open,
                          unsigned long max_listed, struct tally *t)
{
        unsigned long listed = 0;

        for (size_t i = 0; i < open->n; i++) {
                struct op_record op;
                json_t *o;
                char *text;
                int r;

                if (open->ops[i].named)
                        continue;
                r = store_get(store, open->ops[i].id, &op);
                if (r == TG_ENOTFOUND)
                        continue;
                if (r < 0)
                        return r;
                if (!outcome_open(&op))
                        continue;
                t->missing++;
                if (listed == max_listed)
                        continue;
                listed++;
                o = json_pack("{s:s, s:s, s:s, s:i}", "result", "missing_from_file", "operation_id",
                              op.req.operation_id, "ours", op_state_name(op.state), "attempts",
                              (int)op.attempts);
                if (o && op.state == OP_MANUAL)
                        json_object_set_new(o, "reason",
                                            json_string(manual_reason_name(op.reason)));
                text = o ? json_dumps(o, JSON_COMPACT) : NULL;
                json_decref(o);
                if (text)
                        puts(text);
                free(text);
        }
        if (open->incomplete)
                printf("{\"result\":\"missing_check_incomplete\",\"checked\":%d}\n",
                       RECON_OPEN_MAX);
        return 0;
}

/* What the options write: file-level, as the table that names it is. */
static struct reconcile_flags {
        const char *config, *file;
        bool dry;
        uint64_t listed_max;
} flags;

static const struct opt reconcile_options[] = {
    {.name = "config",
     .short_name = 'c',
     .arg = "FILE",
     .string = &flags.config,
     .required = true,
     .help = "the config file (its store is read and changed)"},
    {.name = "file",
     .arg = "F.csv",
     .string = &flags.file,
     .required = true,
     .help = "the provider's settlement file"},
    {.name = "dry-run", .flag = &flags.dry, .help = "report what would change, change nothing"},
    {.name = "max-missing",
     .arg = "N",
     .u64 = &flags.listed_max,
     .umin = 0,
     .umax = 1000000,
     .help = "list at most N missing operations (1000; all are counted)"},
};

static const struct options_spec reconcile_spec = {.prog = "tollgate reconcile",
                                                   .description = reconcile_about,
                                                   .opts = reconcile_options,
                                                   .nopts = sizeof(reconcile_options) /
                                                            sizeof(reconcile_options[0]),
                                                   .epilogue = reconcile_epilogue};

int cmd_reconcile(int argc, char **argv)
{
        struct open_set open = {0};
        struct tally t = {0};
        struct tg_config *cfg;
        struct store *store = NULL;
        FILE *f;
        int r;

        flags = (struct reconcile_flags){.listed_max = RECON_MISSING_LISTED};
        r = options_parse(&reconcile_spec, argc, argv, NULL, NULL);
        if (r)
                return options_exit_status(r);
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("reconcile", flags.config, cfg);
        if (r) {
                free(cfg);
                return options_exit_status(r);
        }
        f = fopen(flags.file, "r");
        if (!f) {
                fprintf(stderr, "tollgate reconcile: cannot open %s\n", flags.file);
                config_release(cfg);
                free(cfg);
                return 2;
        }
        r = cli_open_store("reconcile", cfg, &store);
        /* The snapshot comes first: an operation the file settles is named
         * by it, so never missing, dry run or not. */
        if (r == 0 && open_set_load(store, &open) < 0) {
                fprintf(stderr, "tollgate reconcile: cannot list open operations\n");
                r = TG_ESTORE;
        }
        if (r == 0)
                r = run(store, f, flags.dry, &open, &t);
        if (r == 0 && report_missing(store, &open, (unsigned long)flags.listed_max, &t) < 0) {
                fprintf(stderr, "tollgate reconcile: cannot read open operations\n");
                r = TG_ESTORE;
        }
        if (r == 0) {
                printf("{\"summary\":true,\"rows\":%lu,\"settled\":%lu,\"already\":%lu,"
                       "\"unmatched\":%lu,\"missing\":%lu,\"missing_check\":\"%s\","
                       "\"dry_run\":%s}\n",
                       t.rows, t.settled, t.already, t.unmatched, t.missing,
                       open.incomplete ? "incomplete" : "complete", flags.dry ? "true" : "false");
                r = t.unmatched > 0 || t.missing > 0 || open.incomplete ? 1 : 0;
        } else {
                r = options_exit_status(r);
        }
        free(open.ops);
        fclose(f);
        store_close(store);
        config_release(cfg);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}
