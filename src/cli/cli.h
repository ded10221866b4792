/*
 * cli — what the operator commands share: a small option parser (every
 * option named, values checked, errors that name the option), loading the
 * config, opening the store, and one HTTP call to the API with the
 * configured bearer token.
 *
 * Which commands talk to what (README, "Operating tollgate"):
 *   - manual, calls, reconcile open the store of the config directly, so
 *     they work while no API process runs and write their audit rows in the
 *     same transaction as the change;
 *   - submit and status go through the API (admission control, the same
 *     answers a client gets).
 * Exit codes: 0 ok, 1 failure, 2 usage or config error; a command may add
 * its own (documented in its --help).
 */
#ifndef TG_CLI_H
#define TG_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/config.h"
#include "store/store.h"

struct cli_opt {
        const char *name;   /* "--since" */
        bool takes_value;   /* else a flag: *value set to "1" */
        const char **value; /* out; untouched when absent */
};

/* Parses argv against opts; positional arguments go to positional[] (at
 * most max_positional, *ret_npos their count). --help prints help and
 * exits 0. Returns 0 or 2 (a message naming the problem was printed). */
int cli_parse(const char *cmd, int argc, char **argv, const struct cli_opt *opts, size_t nopts,
              const char *help, const char **positional, size_t max_positional, size_t *ret_npos);

/* Loads the config (2 and a message on failure). cfg is heap-sized: the
 * caller passes a malloc()ed struct. */
int cli_load_config(const char *cmd, const char *path, struct tg_config *cfg);

/* Opens the config's store (1 and a message on failure). */
int cli_open_store(const char *cmd, const struct tg_config *cfg, struct store **ret_store);

/* A strict integer in [lo, hi]. 0 or TG_EINVAL. */
int cli_parse_i64(const char *s, long long lo, long long hi, long long *ret_value);

/* One request to the API of cfg (or to api_url when not NULL), with the
 * bearer token. body may be NULL. *ret_body is malloc()ed (NUL-terminated,
 * at most 16 MiB), the caller frees it. 0, or TG_ETRANSPORT (cannot reach
 * the API: a message was printed), TG_ENOMEM. */
int cli_http(const char *cmd, const struct tg_config *cfg, const char *api_url, const char *method,
             const char *path, const char *body, long *ret_status, char **ret_body,
             char *retry_after, size_t retry_after_size);

#endif
