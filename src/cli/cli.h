/*
 * cli — what the operator commands share: loading the config, opening the
 * store, and one HTTP call to the API with the configured bearer token.
 * Their options are read by platform/options.
 *
 * Which commands talk to what (README, "Operating tollgate"):
 *   - manual, calls, reconcile open the store of the config directly, so
 *     they work while no API process runs and write their audit rows in the
 *     same transaction as the change;
 *   - submit and status go through the API (admission control, the same
 *     answers a client gets).
 * Exit codes: 0 ok, 1 failure, 2 usage or config error; a command may add
 * its own (documented in its --help). The helpers here return TG_E* codes;
 * a command's entry point maps them (options_exit_status()).
 */
#ifndef TG_CLI_H
#define TG_CLI_H

#include <stddef.h>

#include <jansson.h>

#include "daemon/config.h"
#include "store/store.h"

/* Loads the config. 0, or TG_ECONFIG (no path, or a bad file: a message
 * naming the problem was printed). cfg is heap-sized: the caller passes a
 * malloc()ed struct. */
int cli_load_config(const char *cmd, const char *path, struct tg_config *cfg);

/* An --account NAME of cmd against cfg's accounts: 0 for NULL (every
 * account) or a configured one; TG_EINVAL when not (a message naming the
 * configured ones was printed: a usage error, 2). */
int cli_check_account(const char *cmd, const struct tg_config *cfg, const char *account);

/* Opens the config's store, which must exist (an operator command never
 * creates one: "no store at /abs/path"). 0, or a negative code other than
 * TG_EINVAL and TG_ECONFIG (a message was printed: for MariaDB the host,
 * port, database and the server's reason), so that options_exit_status()
 * makes it a failure (1), not a usage error. */
int cli_open_store(const char *cmd, const struct tg_config *cfg, struct store **ret_store);

/* One request to the API of cfg (or to api_url when not NULL), with the
 * bearer token: $TOLLGATE_TOKEN (a named credential's secret) when set,
 * else the first token of api.token_file. body may be NULL. *ret_body is malloc()ed (NUL-terminated,
 * at most 16 MiB), the caller frees it. 0, or TG_ETRANSPORT (cannot reach
 * the API: a message was printed), TG_ENOMEM. */
int cli_http(const char *cmd, const struct tg_config *cfg, const char *api_url, const char *method,
             const char *path, const char *body, long *ret_status, char **ret_body,
             char *retry_after, size_t retry_after_size);

/* Prints o as one line of JSON (flags: jansson's, JSON_COMPACT or
 * JSON_INDENT(n)) on stdout, and releases it. NULL o (a failed build) is
 * TG_ENOMEM, as is a failed dump; else 0. */
int cli_print_json(json_t *o, size_t flags);

#endif
