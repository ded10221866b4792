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
        struct verify_limits lim;
        bool rate_set, in_flight_set, attempts_set;
        bool json;
        bool allow_report; /* report's flags accepted: --out --timeline --time-scale --title */
        const char *out, *timeline, *title;
        double time_scale;
};

/* Each returns 0, or the exit status to return (2: usage or input error),
 * having printed the problem on stderr. --help prints help and exits 0. */
int verify_parse_args(const char *cmd, int argc, char **argv, const char *help, bool report,
                      struct verify_args *ret_args);
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
