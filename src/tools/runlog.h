/*
 * runlog — reads the records of one run of the exit into the arrays that
 * tools/verify judges and that the report draws: tollgate's call log (JSON
 * lines, or an API page {"calls":[...]} per line, or straight from the
 * store), the provider's arrival log (JSON lines, format in docs/verify.md)
 * and the provider's execution ledger.
 *
 * Bounded: at most max_records calls and arrivals (a clear error past it),
 * lines of at most RUNLOG_LINE_MAX bytes. Ownership: the arrays belong to
 * the struct runlog, which the caller initialises with runlog_init() and
 * releases with runlog_release().
 */
#ifndef TG_RUNLOG_H
#define TG_RUNLOG_H

#include <stddef.h>

#include "tools/verify.h"

#define RUNLOG_LINE_MAX (1024 * 1024)

/* Caller storage; members are read freely, written only through runlog_*. */
struct runlog {
        struct verify_call *calls;
        size_t ncalls, cap_calls;
        struct verify_arrival *arrivals;
        size_t narrivals, cap_arrivals;
        struct verify_execution *ledger;
        size_t nledger, cap_ledger;
        size_t max_records;
        /* the path of the exit's OAuth 2.0 token calls as the provider sees
         * it ("" none): arrivals there are marked token (runlog_token_path) */
        char token_path[512];
        char err[512]; /* the last error, for the user */
};

void runlog_init(struct runlog *log, size_t max_records);
void runlog_release(struct runlog *log);

/* Arrivals read after this call at base_url's path followed by token_path
 * (provider.token_path of an oauth2 provider; base_url may be NULL or have
 * no path) are the exit's token calls' door (verify_arrival.token).
 * Returns 0, or TG_EINVAL with log->err when token_path is not an absolute
 * path or the joined path is too long. */
int runlog_token_path(struct runlog *log, const char *base_url, const char *token_path);

/* Each returns 0, or a negative code with log->err naming the file, the
 * line and the problem (TG_EIO unreadable, TG_EPARSE bad record, TG_EFULL
 * past max_records, TG_ENOMEM). */
int runlog_read_calls(struct runlog *log, const char *path);
int runlog_read_arrivals(struct runlog *log, const char *path);
/* The stub's GET /_stub/ledger answer ({"operations":{KEY:{"executions":N}}})
 * or JSON lines {"key":KEY,"executions":N}. */
int runlog_read_ledger(struct runlog *log, const char *path);
/* Every call of the store at url, or of one account (NULL: every
 * account's; store_list_account_calls). */
int runlog_read_store(struct runlog *log, const char *store_url, const char *account);

#endif
