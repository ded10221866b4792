/*
 * settlement — the provider's settlement file as a source of outcomes (issue
 * 25 §2: "settlement file as the last automatic source"): `tollgate
 * reconcile --file` by hand, and a watched directory per account
 * (provider.settlement_dir) that the daemon applies by itself.
 *
 * The file: CSV (RFC 4180 quoting, no line breaks inside fields), a header
 * line naming the columns, at least operation_id and status (succeeded or
 * failed), optionally refund_id; other columns are ignored. Rows and fields
 * are bounded (SETTLEMENT_LINE_MAX bytes a line); a line with a NUL byte, a
 * bad quote, a missing column, an invalid id or status is reported, never
 * guessed at. Each row settles through store_settle_external() (audited,
 * source "settlement_file"): never a final state rewritten, never an
 * in-flight or never-sent operation touched.
 *
 * Report lines (JSON, one per line, to opts.out) for every row that is not
 * simply settled or already so: no_such_operation, mismatch (we hold the
 * other final outcome), in_flight (the exit's own call is open: try again
 * later), pending (never sent: the provider cannot know it), invalid_row,
 * other_account (opts.account set: the operation is another account's, a
 * file of this account's provider cannot speak for it). Then our operations
 * whose outcome is open (unknown, retry_wait, and manual for a reason that
 * leaves the outcome unknown; sent at least once; of opts.account when set)
 * that no row named: missing_from_file, snapshotted before the file is read,
 * at most SETTLEMENT_OPEN_MAX checked (past that: missing_check_incomplete),
 * at most opts.max_missing listed (all counted).
 */
#ifndef TG_SETTLEMENT_H
#define TG_SETTLEMENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/tg_time.h"
#include "store/store.h"

#define SETTLEMENT_LINE_MAX    4096
#define SETTLEMENT_OPEN_MAX    200000 /* our open operations checked against the file */
#define SETTLEMENT_MISSING_MAX 1000   /* default of max_missing */

struct settlement_opts {
        bool dry_run;              /* report what would change, change nothing */
        unsigned long max_missing; /* missing operations listed (all are counted) */
        const char *account;       /* only this account's operations; NULL: every account's */
        FILE *out;                 /* the report lines */
};

struct settlement_tally {
        unsigned long rows, settled, already, unmatched, missing;
        bool missing_incomplete; /* more open operations than SETTLEMENT_OPEN_MAX */
};

/* Applies the file `in` as above. 0 (see the tally); TG_EINVAL with err
 * when the file is no settlement file (no header naming operation_id and
 * status, empty, unreadable); TG_ENOMEM; TG_ESTORE (the open operations
 * could not be listed or read). */
int settlement_apply(struct store *store, FILE *in, const struct settlement_opts *opts,
                     struct settlement_tally *ret_tally, char *err, size_t err_size);

/* The summary line's JSON (a new reference, NULL when out of memory). */
json_t *settlement_summary(const struct settlement_tally *t, bool dry_run);

/* One look at an account's settlement directory (provider.settlement_dir):
 * each regular file NAME.csv directly in it is claimed by a rename (so that
 * of several processes watching one directory exactly one applies it),
 * applied for `account`, and moved to DIR/done/NAME.csv with its report
 * beside it (DIR/done/NAME.csv.report.jsonl: the report lines, then the
 * summary), or, when it is no settlement file, to DIR/failed/ with the
 * error as its report. Each file applied is logged
 * (settlement_file_applied, or settlement_file_refused). Files that do not
 * end in .csv, and hidden ones, are left alone. Returns the number of files
 * applied, or a negative code when the directory cannot be read. */
int settlement_scan_dir(struct store *store, const char *account, const char *dir);

#endif
