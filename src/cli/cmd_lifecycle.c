/*
 * cmd_lifecycle — the store's lifecycle from the command line:
 *
 *   tollgate prune --config FILE [--keep-days N] [--batch N] [--dry-run]
 *       deletes final operations older than retention.keep_days with their
 *       calls (store_prune: never an operation with an audit trail, never
 *       an audit row), in short transactions, beside a running daemon;
 *   tollgate backup --config FILE --to FILE
 *       an online, consistent copy of a SQLite store (VACUUM INTO) into a new
 *       file; for MariaDB it says the mariadb-dump recipe (docs/operating.md).
 *
 * Both open an existing store only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/tg_error.h"
#include "platform/clock.h"
#include "platform/options.h"

#define DAY_MS (24LL * 3600 * 1000)

static const char prune_about[] =
    "Deletes operations that reached a final state (succeeded, rejected) more than "
    "retention.keep_days days ago (or --keep-days), with their calls, in short transactions of "
    "--batch operations: safe beside a running daemon, whose housekeeping does the same a batch "
    "at a time. An operation with an audit trail (a manual-review case, a provider event) is "
    "never deleted, nor any audit row. Counters keep the all-time totals "
    "(tollgate_operations_pruned_total).";

/* What the options write: file-level, as the table that names it is. */
static struct prune_flags {
        const char *config;
        int64_t keep_days, batch;
} prune_flags;

static const struct opt prune_options[] = {
    {.name = "config",
     .short_name = 'c',
     .arg = "FILE",
     .string = &prune_flags.config,
     .required = true,
     .help = "the config file (INI): its store and retention"},
    {.name = "keep-days",
     .arg = "N",
     .i64 = &prune_flags.keep_days,
     .min = 1,
     .max = 36500,
     .help = "keep final operations this many days (default: retention.keep_days; "
             "must still be longer than retry.deadline_s + retry.key_retention_s)"},
    {.name = "batch",
     .arg = "N",
     .i64 = &prune_flags.batch,
     .min = 10,
     .max = 10000,
     .help = "operations per transaction (default: retention.prune_batch)"},
};

static const struct options_spec prune_spec = {
    .prog = "tollgate prune",
    .description = prune_about,
    .opts = prune_options,
    .nopts = sizeof(prune_options) / sizeof(prune_options[0]),
    .epilogue = "Exit status: 0 done (the counts on stdout), 1 the store failed, 2 bad "
                "usage or config, or retention.keep_days = 0 without --keep-days.\n",
};

int cmd_prune(int argc, char **argv)
{
        struct store_prune_cursor cursor;
        struct store_prune_result res = {0};
        struct store *store = NULL;
        struct tg_config *cfg;
        int64_t keep_ms;
        int r;

        prune_flags = (struct prune_flags){.keep_days = -1};
        r = options_parse(&prune_spec, argc, argv, NULL, NULL);

        if (r)
                return options_exit_status(r);
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("prune", prune_flags.config, cfg);
        if (r)
                goto out;
        keep_ms =
            prune_flags.keep_days > 0 ? prune_flags.keep_days * DAY_MS : cfg->retention_keep_ms;
        if (keep_ms == 0) {
                fputs("tollgate prune: retention.keep_days is 0 (keep forever): nothing to do; "
                      "give --keep-days N to prune anyway\n",
                      stderr);
                r = TG_ECONFIG;
                goto out;
        }
        if (keep_ms <= cfg->policy.deadline_ms + cfg->policy.key_retention_ms) {
                fprintf(
                    stderr,
                    "tollgate prune: --keep-days must be longer than retry.deadline_s + "
                    "retry.key_retention_s (%lld s): a pruned operation_id is new again\n",
                    (long long)((cfg->policy.deadline_ms + cfg->policy.key_retention_ms) / 1000));
                r = TG_EINVAL;
                goto out;
        }
        r = cli_open_store("prune", cfg, &store);
        if (r)
                goto out;
        memset(&cursor, 0, sizeof(cursor));
        r = store_prune(store, clock_wall_now() - keep_ms,
                        prune_flags.batch > 0 ? (unsigned)prune_flags.batch
                                              : cfg->retention_prune_batch,
                        0, &cursor, &res);
        printf("pruned %llu operations and %llu calls (final before %lld days ago) and %llu "
               "delivered events\n",
               (unsigned long long)res.operations, (unsigned long long)res.calls,
               (long long)(keep_ms / DAY_MS), (unsigned long long)res.events);
        if (r < 0)
                fprintf(stderr, "tollgate prune: the store failed after that: %s\n",
                        tg_strerror(r));
out:
        store_close(store);
        config_release(cfg);
        free(cfg);
        return options_exit_status(r);
}

static const char backup_about[] =
    "Copies the config's SQLite store into a new file, online and consistent: one read "
    "transaction's snapshot (VACUUM INTO), while the daemon goes on writing. Restore by "
    "stopping tollgate and putting the copy in the store's place (docs/operating.md). A "
    "MariaDB store is backed up with mariadb-dump --single-transaction (the recipe is in "
    "docs/operating.md).";

int cmd_backup(int argc, char **argv)
{
        const char *config = NULL, *to = NULL;
        const struct opt opts[] = {
            {.name = "config",
             .short_name = 'c',
             .arg = "FILE",
             .string = &config,
             .required = true,
             .help = "the config file (INI): its store"},
            {.name = "to",
             .arg = "FILE",
             .string = &to,
             .required = true,
             .help = "the new file (refused if it exists)"},
        };
        const struct options_spec spec = {
            .prog = "tollgate backup",
            .description = backup_about,
            .opts = opts,
            .nopts = sizeof(opts) / sizeof(opts[0]),
            .epilogue = "Exit status: 0 done, 1 the copy failed (or the store is MariaDB), 2 "
                        "bad usage or config.\n",
        };
        struct store *store = NULL;
        struct tg_config *cfg;
        int r = options_parse(&spec, argc, argv, NULL, NULL);

        if (r)
                return options_exit_status(r);
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return 1;
        r = cli_load_config("backup", config, cfg);
        if (r == 0)
                r = cli_open_store("backup", cfg, &store);
        if (r == 0) {
                r = store_backup(store, to);
                if (r == TG_EUNSUPPORTED && strcmp(store_backend(store), "postgresql") == 0)
                        fprintf(stderr, "tollgate backup: a PostgreSQL store is backed up with "
                                        "pg_dump (docs/operating.md, \"Backups\")\n");
                else if (r == TG_EUNSUPPORTED)
                        fprintf(stderr, "tollgate backup: a MariaDB store is backed up with "
                                        "mariadb-dump --single-transaction (docs/operating.md, "
                                        "\"Backups\")\n");
                else if (r == TG_ECONFLICT)
                        fprintf(stderr, "tollgate backup: %s exists: give a new file\n", to);
                else if (r < 0)
                        fprintf(stderr, "tollgate backup: cannot copy %s to %s: %s\n",
                                store_url(store), to, tg_strerror(r));
                else
                        printf("backed up %s to %s\n", store_url(store), to);
        }
        store_close(store);
        config_release(cfg);
        free(cfg);
        return options_exit_status(r);
}
