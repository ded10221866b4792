/*
 * settlement — see settlement.h. The engine of `tollgate reconcile` and of
 * the watched settlement directories.
 */
#include "daemon/settlement.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/csv.h"
#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "daemon/log.h"
#include "platform/clock.h"

#define SETTLEMENT_COLS_MAX 64
#define SETTLEMENT_PAGE     500 /* store rows per page */

/* ---- our open operations, to find the ones the file does not name ---------- */

struct open_op {
        char id[TG_OP_ID_MAX + 1];
        bool named; /* a row of the file names it */
};

/* A sorted snapshot of our open operations; bounded by SETTLEMENT_OPEN_MAX. */
struct open_set {
        const char *account; /* only its operations (NULL: every account's) */
        struct open_op *ops;
        size_t n, cap;
        bool incomplete;    /* more than SETTLEMENT_OPEN_MAX: the check is partial */
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
        if (!outcome_open(op) || (set->account && strcmp(op->req.account, set->account) != 0))
                return 0;
        if (set->n == SETTLEMENT_OPEN_MAX) {
                set->incomplete = true;
                return 1; /* stop the walk */
        }
        if (set->n == set->cap) {
                size_t cap = set->cap ? set->cap * 2 : 256;
                struct open_op *ops;
                if (cap > SETTLEMENT_OPEN_MAX)
                        cap = SETTLEMENT_OPEN_MAX;
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
                        r = store_list_state(store, states[i], set->last_id, SETTLEMENT_PAGE,
                                             collect_open, set);
                        if (r < 0)
                                return r;
                } while (!set->incomplete && set->page_rows == SETTLEMENT_PAGE);
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

static void report(FILE *out, struct settlement_tally *t, unsigned long line, const char *id,
                   const char *result, const char *ours, const char *theirs)
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
                fprintf(out, "%s\n", text);
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
                    const struct settlement_opts *o, struct open_set *open,
                    struct settlement_tally *t)
{
        FILE *out = o->out;
        struct op_record op;
        enum op_state outcome;
        const char *id, *status, *refund_id;
        int r;

        t->rows++;
        if (nf <= col[0] || nf <= col[1] || (col[2] >= 0 && nf <= col[2])) {
                report(out, t, line, NULL, "invalid_row", NULL, NULL);
                return;
        }
        id = f[col[0]];
        status = f[col[1]];
        open_set_mark(open, id); /* named, whatever else is wrong with the row */
        refund_id = col[2] >= 0 ? f[col[2]] : "";
        if (refund_validate_operation_id(id, strlen(id), NULL) < 0) {
                report(out, t, line, NULL, "invalid_row", NULL, NULL);
                return;
        }
        if (strcmp(status, "succeeded") == 0)
                outcome = OP_SUCCEEDED;
        else if (strcmp(status, "failed") == 0)
                outcome = OP_REJECTED;
        else {
                report(out, t, line, id, "invalid_row", NULL, NULL);
                return;
        }
        if (strlen(refund_id) >= sizeof(op.refund_id)) {
                report(out, t, line, id, "invalid_row", NULL, status);
                return;
        }
        r = store_get(store, id, &op);
        if (r == TG_ENOTFOUND) {
                report(out, t, line, id, "no_such_operation", NULL, status);
                return;
        }
        if (r < 0) {
                report(out, t, line, id, "store_error", NULL, status);
                return;
        }
        if (o->account && strcmp(op.req.account, o->account) != 0) {
                report(out, t, line, id, "other_account", NULL, status);
                return;
        }
        if (op.state == outcome) {
                t->already++;
                return;
        }
        if (op.state == OP_SUCCEEDED || op.state == OP_REJECTED) {
                report(out, t, line, id, "mismatch", op_state_name(op.state), status);
                return;
        }
        if (op.state == OP_IN_FLIGHT || op.state == OP_PENDING) {
                report(out, t, line, id, op_state_name(op.state), op_state_name(op.state), status);
                return;
        }
        if (o->dry_run) {
                t->settled++;
                return;
        }
        r = store_settle_external(store, id, outcome, refund_id[0] ? refund_id : NULL,
                                  "settlement_file", clock_wall_now());
        if (r == 0)
                t->settled++;
        else if (r == TG_ESTATE)
                report(out, t, line, id, op_state_name(OP_IN_FLIGHT), NULL,
                       status); /* moved meanwhile */
        else
                report(out, t, line, id, "store_error", NULL, status);
}

static int run(struct store *store, FILE *f, const struct settlement_opts *o, struct open_set *open,
               struct settlement_tally *t, char *err, size_t err_size)
{
        char *line = malloc(SETTLEMENT_LINE_MAX + 2);
        char *head = malloc(SETTLEMENT_LINE_MAX + 2);
        char *names[SETTLEMENT_COLS_MAX], *fields[SETTLEMENT_COLS_MAX];
        unsigned long lineno = 0;
        int col[3] = {-1, -1, -1}, nnames = 0, r = 0;

        if (!line || !head) {
                r = TG_ENOMEM;
                goto out;
        }
        while (fgets(line, SETTLEMENT_LINE_MAX + 2, f)) {
                size_t len = strlen(line);
                bool long_line = len > SETTLEMENT_LINE_MAX ||
                                 (len == SETTLEMENT_LINE_MAX + 1 && line[len - 1] != '\n');
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
                                snprintf(err, err_size,
                                         "line 1 must be a CSV header naming "
                                         "operation_id and status");
                                r = TG_EINVAL;
                                goto out;
                        }
                        memcpy(head, line, len + 1);
                        size_t n = 0;
                        nnames =
                            csv_split(head, CSV_QUOTES_STRICT, names, SETTLEMENT_COLS_MAX, &n) == 0
                                ? (int)n
                                : -1;
                        col[0] = nnames > 0 ? column(names, nnames, "operation_id") : -1;
                        col[1] = nnames > 0 ? column(names, nnames, "status") : -1;
                        col[2] = nnames > 0 ? column(names, nnames, "refund_id") : -1;
                        if (col[0] < 0 || col[1] < 0) {
                                snprintf(err, err_size,
                                         "the header must name the columns "
                                         "operation_id and status");
                                r = TG_EINVAL;
                                goto out;
                        }
                        continue;
                }
                if (len == 0 && !long_line && !has_nul)
                        continue; /* blank line */
                if (long_line || has_nul || memchr(line, '\0', len) != NULL) {
                        t->rows++;
                        report(o->out, t, lineno, NULL, "invalid_row", NULL, NULL);
                        continue;
                }
                size_t nf = 0;
                if (csv_split(line, CSV_QUOTES_STRICT, fields, SETTLEMENT_COLS_MAX, &nf) < 0) {
                        t->rows++;
                        report(o->out, t, lineno, NULL, "invalid_row", NULL, NULL);
                        continue;
                }
                one_row(store, fields, (int)nf, col, lineno, o, open, t);
        }
        if (ferror(f)) {
                snprintf(err, err_size, "cannot read the file");
                r = TG_EINVAL; /* documented: an unreadable file is a usage error (2) */
        } else if (nnames == 0) {
                snprintf(err, err_size, "the file is empty (no header)");
                r = TG_EINVAL;
        }
out:
        free(line);
        free(head);
        return r;
}

/* Lists (up to max_listed) and counts our open operations no row named;
 * each is read again first, so one settled meanwhile is left out. */
static int report_missing(struct store *store, const struct open_set *open, FILE *out,
                          unsigned long max_listed, struct settlement_tally *t)
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
                        fprintf(out, "%s\n", text);
                free(text);
        }
        if (open->incomplete)
                fprintf(out, "{\"result\":\"missing_check_incomplete\",\"checked\":%d}\n",
                        SETTLEMENT_OPEN_MAX);
        return 0;
}

int settlement_apply(struct store *store, FILE *in, const struct settlement_opts *opts,
                     struct settlement_tally *ret_tally, char *err, size_t err_size)
{
        struct open_set open = {.account = opts->account};
        int r;

        memset(ret_tally, 0, sizeof(*ret_tally));
        err[0] = '\0';
        /* The snapshot comes first: an operation the file settles is named
         * by it, so never missing, dry run or not. */
        r = open_set_load(store, &open);
        if (r == TG_ENOMEM) {
                free(open.ops);
                return r;
        }
        if (r < 0) {
                snprintf(err, err_size, "cannot list open operations: %s", tg_strerror(r));
                free(open.ops);
                return TG_ESTORE;
        }
        r = run(store, in, opts, &open, ret_tally, err, err_size);
        if (r == 0 && report_missing(store, &open, opts->out, opts->max_missing, ret_tally) < 0) {
                snprintf(err, err_size, "cannot read open operations");
                r = TG_ESTORE;
        }
        ret_tally->missing_incomplete = open.incomplete;
        free(open.ops);
        return r;
}

json_t *settlement_summary(const struct settlement_tally *t, bool dry_run)
{
        return json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:s, s:b}", "summary", 1, "rows",
                         (json_int_t)t->rows, "settled", (json_int_t)t->settled, "already",
                         (json_int_t)t->already, "unmatched", (json_int_t)t->unmatched, "missing",
                         (json_int_t)t->missing, "missing_check",
                         t->missing_incomplete ? "incomplete" : "complete", "dry_run", dry_run);
}

/* ---- the watched directory ---------------------------------------------------------- */

static bool is_csv(const char *name)
{
        size_t n = strlen(name);

        return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".csv") == 0;
}

static int make_dir(const char *path)
{
        return mkdir(path, 0750) == 0 || errno == EEXIST ? 0 : -errno;
}

/* Applies the claimed file `claimed` (once dir/NAME) and files it under
 * dir/done or dir/failed with its report. */
static int apply_claimed(struct store *store, const char *account, const char *dir,
                         const char *name, const char *claimed)
{
        struct settlement_opts o = {.max_missing = SETTLEMENT_MISSING_MAX, .account = account};
        struct settlement_tally t;
        char dest[4096], report_path[4200], err[300];
        FILE *in = fopen(claimed, "r"), *out;
        json_t *sum;
        int r;

        snprintf(dest, sizeof(dest), "%s/done/%s", dir, name);
        snprintf(report_path, sizeof(report_path), "%s.report.jsonl", dest);
        out = fopen(report_path, "w");
        if (!in || !out) {
                r = -errno;
                if (in)
                        fclose(in);
                if (out)
                        fclose(out);
                return r ? r : TG_EIO;
        }
        o.out = out;
        r = settlement_apply(store, in, &o, &t, err, sizeof(err));
        fclose(in);
        if (r == TG_EINVAL) {
                /* no settlement file: kept aside with the reason */
                char failed[4096], failed_report[4200];
                fprintf(out, "{\"result\":\"refused\",\"message\":\"%s\"}\n", err);
                fclose(out);
                snprintf(failed, sizeof(failed), "%s/failed/%s", dir, name);
                snprintf(failed_report, sizeof(failed_report), "%s.report.jsonl", failed);
                (void)rename(claimed, failed);
                (void)rename(report_path, failed_report);
                log_emit(LOG_ERROR, "settlement_file_refused",
                         json_pack("{s:s, s:s, s:s, s:s}", "account", account, "file", name,
                                   "message", err, "moved_to", failed));
                return 0;
        }
        if (r < 0) {
                /* the store failed: the file goes back to be applied again */
                fclose(out);
                (void)unlink(report_path);
                snprintf(dest, sizeof(dest), "%s/%s", dir, name);
                (void)rename(claimed, dest);
                log_emit(LOG_WARN, "settlement_file_failed",
                         json_pack("{s:s, s:s, s:s}", "account", account, "file", name, "error",
                                   err[0] ? err : tg_strerror(r)));
                return r;
        }
        sum = settlement_summary(&t, false);
        if (sum) {
                char *text = json_dumps(sum, JSON_COMPACT);
                if (text)
                        fprintf(out, "%s\n", text);
                free(text);
                json_decref(sum);
        }
        fclose(out);
        (void)rename(claimed, dest);
        log_emit(t.unmatched || t.missing ? LOG_WARN : LOG_INFO, "settlement_file_applied",
                 json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:s}", "account", account, "file",
                           name, "rows", (json_int_t)t.rows, "settled", (json_int_t)t.settled,
                           "already", (json_int_t)t.already, "unmatched", (json_int_t)t.unmatched,
                           "missing", (json_int_t)t.missing, "report", report_path));
        return 1;
}

int settlement_scan_dir(struct store *store, const char *account, const char *dir)
{
        char sub[4096];
        DIR *d;
        struct dirent *de;
        int applied = 0, r;

        snprintf(sub, sizeof(sub), "%s/done", dir);
        r = make_dir(sub);
        if (r == 0) {
                snprintf(sub, sizeof(sub), "%s/failed", dir);
                r = make_dir(sub);
        }
        if (r < 0)
                return r;
        d = opendir(dir);
        if (!d)
                return -errno;
        while ((de = readdir(d)) != NULL) {
                char path[4096], claimed[4200];
                struct stat st;

                if (!is_csv(de->d_name))
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                /* claimed by the rename: a hidden name, so no other process
                 * (nor this one's next look) takes it */
                snprintf(claimed, sizeof(claimed), "%s/.claimed-%ld-%s", dir, (long)getpid(),
                         de->d_name);
                if (rename(path, claimed) < 0)
                        continue; /* another process took it */
                r = apply_claimed(store, account, dir, de->d_name, claimed);
                if (r > 0)
                        applied++;
                if (r < 0)
                        break; /* the store: again at the next look */
        }
        closedir(d);
        return applied;
}
