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
#include "core/tg_error.h"
#include "daemon/settlement.h"
#include "platform/options.h"

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
        struct settlement_tally t = {0};
        struct tg_config *cfg;
        struct store *store = NULL;
        char err[300];
        FILE *f;
        int r;

        flags = (struct reconcile_flags){.listed_max = SETTLEMENT_MISSING_MAX};
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
        if (r == 0) {
                const struct settlement_opts o = {.dry_run = flags.dry,
                                                  .max_missing = (unsigned long)flags.listed_max,
                                                  .out = stdout};
                r = settlement_apply(store, f, &o, &t, err, sizeof(err));
                if (r < 0 && err[0])
                        fprintf(stderr, "tollgate reconcile: %s\n", err);
        }
        if (r == 0) {
                json_t *sum = settlement_summary(&t, flags.dry);
                char *text = sum ? json_dumps(sum, JSON_COMPACT) : NULL;
                if (text)
                        puts(text);
                free(text);
                json_decref(sum);
                r = t.unmatched > 0 || t.missing > 0 || t.missing_incomplete ? 1 : 0;
        } else {
                r = options_exit_status(r);
        }
        fclose(f);
        store_close(store);
        config_release(cfg);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}
