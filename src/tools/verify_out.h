/*
 * verify_out — what `tollgate verify` and `tollgate report` share: their
 * flags, loading the records (runlog) and judging them (tools/verify), and
 * the result as text figures or as JSON.
 */
#ifndef TG_VERIFY_OUT_H
#define TG_VERIFY_OUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "tools/runlog.h"
#include "tools/verify.h"

/* Parsed flags. Strings point into argv. */
struct verify_args {
        const char *calls, *config, *arrivals, *ledger;
        const char *account; /* with --config: one account of it (NULL: every account) */
        /* the exit's OAuth 2.0 token path (NULL: --config's, when its
         * provider.auth is oauth2, else none) */
        const char *token_path;
        struct verify_limits lim;
        bool rate_set, in_flight_set, attempts_set;
        bool json;
        bool allow_report; /* report's flags accepted: --out --timeline --time-scale --title
                            * --from --to */
        const char *out, *timeline, *title;
        const char *from, *to; /* report: a window of the store's samples (no arrivals) */
        double time_scale;
};

/* Reads verify's options (with report's when report is true) through
 * platform/options; about and epilogue go into the generated --help.
 * Returns 0, OPTIONS_HELP (the help was printed) or TG_EINVAL (a message
 * was printed). */
int verify_parse_args(const char *cmd, int argc, char **argv, const char *about,
                      const char *epilogue, bool report, struct verify_args *ret_args);
/* Each returns 0, or a negative code having printed the problem on stderr:
 * TG_EINVAL (an input that cannot be read), TG_ECONFIG (a bad config),
 * TG_ENOMEM; options_exit_status() maps them to 2, 2 and 1. */
/* --config's file into *cfg (heap-sized, the caller's); with --account,
 * the account's view of it (config_account_view: its rate, cap, attempts
 * as the top level's); a name not configured is TG_EINVAL with the
 * configured ones named. */
struct tg_config;
int verify_load_config(const char *cmd, const struct verify_args *args, struct tg_config *cfg);
/* On success *ret_log is filled; release it with runlog_release(). */
int verify_load(const char *cmd, struct verify_args *args, struct runlog *ret_log);
int verify_judge(const char *cmd, const struct verify_args *args, const struct runlog *log,
                 struct verify_result **ret_result);

/* The figures as indented text lines, NUL-terminated, truncated to size. */
void verify_summary_text(const struct verify_limits *lim, const struct verify_summary *s, char *buf,
                         size_t size);
/* The whole result as a new JSON object (NULL when out of memory). */
json_t *verify_result_json(const struct verify_limits *lim, const struct verify_result *res);

#endif
