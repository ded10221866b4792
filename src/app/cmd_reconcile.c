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
 * pending (never sent: the provider cannot know it), invalid_row. Then a
 * summary line. Exit status: 0 every row matched, 1 some did not (listed),
 * 2 usage, config or unreadable file.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/cli.h"
#include "app/commands.h"
#include "core/refund_validate.h"
#include "core/tg_error.h"

#define RECON_LINE_MAX 4096
#define RECON_COLS_MAX 64

static const char reconcile_help[] =
    "usage: tollgate reconcile --config FILE --file F.csv [--dry-run]\n"
    "Settles unknown (and retry_wait/manual) operations from the provider's\n"
    "settlement file and reports the rows that did not match.\n"
    "The file: CSV with a header naming operation_id, status (succeeded|failed)\n"
    "and optionally refund_id; other columns are ignored.\n"
    "  --dry-run   report what would change, change nothing\n"
    "Output: one JSON line per row that did not match (no_such_operation,\n"
    "mismatch, in_flight, pending, invalid_row), then a summary line.\n"
    "Exit status: 0 all rows matched, 1 some did not, 2 usage or unreadable file.\n";

/* Splits one CSV line in place. Returns the field count, or -1 for a bad
 * quote. */
static int split_csv(char *line, char **fields, int max)
{
        int n = 0;
        char *p = line;

        for (;;) {
                char *out;
                if (n >= max)
                        return -1;
                if (*p == '"') {
                        p++;
                        out = p;
                        fields[n++] = out;
                        for (;;) {
                                if (*p == '\0')
                                        return -1;
                                if (*p == '"' && p[1] == '"') {
                                        *out++ = '"';
                                        p += 2;
                                } else if (*p == '"') {
                                        p++;
                                        break;
                                } else {
                                        *out++ = *p++;
                                }
                        }
                        if (*p != ',' && *p != '\0')
                                return -1;
                        *out = '\0';
                } else {
                        fields[n++] = p;
                        while (*p && *p != ',') {
                                if (*p == '"')
                                        return -1;
                                p++;
                        }
                }
                if (*p == '\0')
                        return n;
                *p++ = '\0';
        }
}

struct tally {
        unsigned long rows, settled, already, unmatched;
};

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
                    bool dry_run, struct tally *t)
{
        struct timespec ts;
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
                report(t, line, id, op.state == OP_IN_FLIGHT ? "in_flight" : "pending",
                       op_state_name(op.state), status);
                return;
        }
        if (dry_run) {
                t->settled++;
                return;
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        r = store_settle_external(store, id, outcome, refund_id[0] ? refund_id : NULL,
                                  "settlement_file",
                                  (tg_wall_ms)ts.tv_sec * TG_MS_PER_S + ts.tv_nsec / TG_NS_PER_MS);
        if (r == 0)
                t->settled++;
        else if (r == TG_ESTATE)
                report(t, line, id, "in_flight", NULL, status); /* it moved meanwhile */
        else
                report(t, line, id, "store_error", NULL, status);
}

static int run(struct store *store, FILE *f, bool dry_run, struct tally *t)
{
        char *line = malloc(RECON_LINE_MAX + 2);
        char *head = malloc(RECON_LINE_MAX + 2);
        char *names[RECON_COLS_MAX], *fields[RECON_COLS_MAX];
        unsigned long lineno = 0;
        int col[3] = {-1, -1, -1}, nnames = 0, r = 0;

        if (!line || !head) {
                r = 1;
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
                                r = 2;
                                goto out;
                        }
                        memcpy(head, line, len + 1);
                        nnames = split_csv(head, names, RECON_COLS_MAX);
                        col[0] = nnames > 0 ? column(names, nnames, "operation_id") : -1;
                        col[1] = nnames > 0 ? column(names, nnames, "status") : -1;
                        col[2] = nnames > 0 ? column(names, nnames, "refund_id") : -1;
                        if (col[0] < 0 || col[1] < 0) {
                                fprintf(stderr, "tollgate reconcile: the header must name the "
                                                "columns operation_id and status\n");
                                r = 2;
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
                int nf = split_csv(line, fields, RECON_COLS_MAX);
                if (nf < 0) {
                        t->rows++;
                        report(t, lineno, NULL, "invalid_row", NULL, NULL);
                        continue;
                }
                one_row(store, fields, nf, col, lineno, dry_run, t);
        }
        if (ferror(f)) {
                fprintf(stderr, "tollgate reconcile: cannot read the file\n");
                r = 2;
        } else if (nnames == 0) {
                fprintf(stderr, "tollgate reconcile: the file is empty (no header)\n");
                r = 2;
        }
out:
        free(line);
        free(head);
        return r;
}

int cmd_reconcile(int argc, char **argv)
{
        const char *config = NULL, *file = NULL, *dry = NULL;
        const struct cli_opt opts[] = {
            {"--config", true, &config},
            {"--file", true, &file},
            {"--dry-run", false, &dry},
        };
        struct tally t = {0};
        struct tg_config *cfg;
        struct store *store = NULL;
        FILE *f;
        int r;

        r = cli_parse("reconcile", argc, argv, opts, sizeof(opts) / sizeof(opts[0]), reconcile_help,
                      NULL, 0, NULL);
        if (r)
                return r;
        if (!file) {
                fprintf(stderr, "tollgate reconcile: --file F.csv is required\n");
                return 2;
        }
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("reconcile", config, cfg);
        if (r) {
                free(cfg);
                return r;
        }
        f = fopen(file, "r");
        if (!f) {
                fprintf(stderr, "tollgate reconcile: cannot open %s\n", file);
                free(cfg);
                return 2;
        }
        r = cli_open_store("reconcile", cfg, &store);
        if (r == 0)
                r = run(store, f, dry != NULL, &t);
        if (r == 0) {
                printf("{\"summary\":true,\"rows\":%lu,\"settled\":%lu,\"already\":%lu,"
                       "\"unmatched\":%lu,\"dry_run\":%s}\n",
                       t.rows, t.settled, t.already, t.unmatched, dry ? "true" : "false");
                r = t.unmatched > 0 ? 1 : 0;
        }
        fclose(f);
        store_close(store);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}
