/*
 * config — tollgate's INI configuration (inih), every key with the seed's
 * value as default. Loading validates every key and fails with a message that
 * names the section.key and the problem, before anything starts. Secrets
 * (token, webhook secret, database password, the provider's API key and
 * signing key, the client key) are read only from this file or from a file
 * it names; they are never logged.
 */
#ifndef TG_CONFIG_H
#define TG_CONFIG_H

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/admission.h"
#include "core/classify.h"
#include "core/pacer.h"
#include "core/policy.h"
#include "core/url_allow.h"
#include "daemon/credentials.h"
#include "daemon/ui_users.h"

#define TG_PATH_MAX           1024
#define TG_CONFIG_MAX_RULES   64
#define TG_API_TOKENS_MAX     4   /* tokens in api.token_file at once (rotation) */
#define TG_CONFIG_MAX_BODY    16  /* provider.body_field lines */
#define TG_CONFIG_MAX_HEADERS 8   /* provider.header lines */
#define TG_CONFIG_LINE        200 /* a value that is a template or a list */
#define TG_ACCOUNTS_MAX       16  /* [account.NAME] sections in one file */
#define TG_NOTIFY_ALLOW_MAX   16  /* notify.allow lines */
/* TG_ACCOUNT_NAME_MAX and TG_ACCOUNT_DEFAULT: core/operation.h (the store
 * keeps the account of every operation) */

/* What an account may set: its [provider], [exit], [retry] and [classify]
 * values (the members of struct tg_config of the same names). */
struct tg_account_settings {
#include "daemon/config_account.def"
};

/* One provider account. Its settings are the top-level sections' values
 * with the account's own keys applied over them (an account's
 * classify.rule or provider.body_field lines replace the inherited list).
 * Read through config_account_find() and config_account_view(). */
struct tg_account {
        char name[TG_ACCOUNT_NAME_MAX + 1];
        bool declared; /* an [account.NAME] section of the file (false: the implicit default) */
        int line;      /* its section's line (0: not declared) */
        struct tg_account_settings settings;
};

struct tg_config {
        /* [store] */
        char store_url[TG_PATH_MAX]; /* sqlite://PATH or mysql://user:pass@host:port/db */
        bool store_check_on_start;   /* default true: a daemon verifies the file first */
        /* default false: a daemon refuses a store without its no-delete triggers */
        bool store_allow_missing_triggers;

        /* [api] */
        char api_listen_host[256];
        int api_listen_port;
        char api_token[256]; /* contents of token_file ("" = none) */
        char api_token_file[TG_PATH_MAX];
        size_t api_max_body_bytes;            /* default 16384 */
        size_t api_max_batch_bytes;           /* POST /v1/refunds:batch (2 MiB) */
        unsigned api_max_connections;         /* default 256 */
        unsigned api_connection_timeout_s;    /* default 10 */
        unsigned api_request_read_timeout_ms; /* a request arrives whole within this (10000) */
        bool api_metrics_need_token;          /* default false */
        /* named credentials with scopes ("" = none: api.token_file alone,
         * as before); their hashes, never their secrets */
        char api_credentials_file[TG_PATH_MAX];
        struct credential api_credentials[CREDENTIALS_MAX];
        unsigned api_credential_count;

        /* [provider], [exit], [retry], [classify]: what an account may set
         * (the top-level values are every account's defaults) */
#include "daemon/config_account.def"

        /* [admission] new refunds refused (503) when the backlog cannot close in time */
        struct admission_config admission;

        /* [dispatch] */
        unsigned dispatch_max_accounts; /* accounts one dispatcher owns at once (0: all) */

        /* [stats] */
        unsigned stats_series_minutes; /* per-second series of GET /v1/stats (15) */
        unsigned stats_keep_hours;     /* samples and refusals kept in the store (24) */

        /* [ui] the console under /ui/ (docs/operating.md, "The console") */
        bool ui_enabled;                       /* default true */
        char ui_users_file[TG_PATH_MAX];       /* "" = only the API token signs in */
        struct ui_user ui_users[UI_USERS_MAX]; /* its users */
        unsigned ui_user_count;
        unsigned ui_session_idle_s; /* 900 */
        unsigned ui_session_max_s;  /* 28800 */
        bool ui_secure_cookie;      /* default false */

        /* [log] */
        char log_level[16]; /* debug, info, warn, error (info) */

        /* [retention] final operations (and their calls) older than this are
         * pruned by the dispatcher's housekeeping and `tollgate prune`;
         * 0: kept forever. Manual cases and the audit trail are never pruned. */
        int64_t retention_keep_ms;      /* keep_days, default 90 days */
        unsigned retention_prune_batch; /* operations per prune transaction (500) */

        /* [notify] allow = PREFIX (repeatable): the URL prefixes a refund's
         * own notify_url may name (core/url_allow.h); none: refunds may not
         * name one */
        char notify_allow[TG_NOTIFY_ALLOW_MAX][URL_ALLOW_MAX + 1];
        unsigned notify_allow_count;

        /* [manual] four-eyes: a re-send or resolve of a case of this amount
         * or more waits for a second operator's approval; 0: off */
        int64_t manual_approval_above;

        /* api.token_file may hold up to TG_API_TOKENS_MAX tokens, one a line,
         * so that a token is rotated without a refused request: every one is
         * accepted; api_token above is the first, the one the CLI sends. */
        char api_tokens[TG_API_TOKENS_MAX][256];
        unsigned api_token_count;

        /* The config file's folder, absolute: relative paths in the file (a
         * sqlite:// file, token_file, webhook_secret_file, a mysql url's
         * password_file) and the default store were resolved against it. */
        char config_dir[TG_PATH_MAX];

        /* The accounts, in the file's order, at least one: a file without
         * [account.*] has one, "default", not declared, whose settings are
         * the top-level ones. A file with [account.*] sections has exactly
         * those (the top-level sections are then only their defaults). */
        struct tg_account accounts[TG_ACCOUNTS_MAX];
        unsigned account_count;
        /* The account this config is the view of (config_account_view()):
         * what an exit built from it serves in the store. "" for the file's
         * top level, which serves the default account (config_accounts_serve()
         * leaves it so: its config is byte for byte the file's). */
        char view_of[TG_ACCOUNT_NAME_MAX + 1];
};

/* Fills every default. */
void config_defaults(struct tg_config *ret_config);

/* The longest a Retry-After counts for, as a provider-wide hold and as an
 * operation's floor: retry.retry_after_cap_s, and never more than a quarter
 * of retry.deadline_s. A hold as long as the deadline would send every
 * queued refund to manual on one absurd header; a quarter leaves the rest
 * of the deadline for the backlog and the refused refund's own retries,
 * and the exit asks again (one probe) when the cap has passed. The hold
 * after a probe answered 429/503 without Retry-After doubles up to it. */
int64_t config_retry_after_cap_ms(const struct tg_config *config);

/* Loads path over the defaults and validates. On failure returns TG_ECONFIG
 * (or -errno when the file cannot be read) and writes a one-line message
 * naming the key into err (e.g. "exit.starts_per_second: must be a number
 * > 0, got \"fast\""); *ret_config is then untouched. */
int config_load(const char *path, struct tg_config *ret_config, char *err, size_t err_size);

/* Every problem of the file at path, in line order, each as one line
 * "section.key: problem" (or "config: ...") with its line number (0: not
 * tied to a line), handed to fn; *ret_problems says how many (0: the file
 * loads). Unlike config_load(), it does not stop at the first problem, and
 * an unknown key or section comes with a did-you-mean when one is close.
 * 0, or -errno when the file cannot be read (a message naming it is handed
 * to fn with line 0 and counted). */
typedef void (*config_problem_fn)(void *ctx, int line, const char *message);
int config_check(const char *path, config_problem_fn fn, void *ctx, unsigned *ret_problems);

/* Which keys differ between two loaded configs (a SIGHUP reload): fn is
 * called with the section and name of each, in the schema's order, then,
 * for each account declared in a, each key of its settings that differs
 * from b's account of the same name, with the section "account.NAME.exit"
 * (valid during the call); an account that only one of them declares is
 * reported as ("account", NAME). A
 * secret file's key differs when the file's contents do, even under the
 * same name (the contents are never handed out). Returns how many differ. */
typedef void (*config_key_fn)(void *ctx, const char *section, const char *name);
unsigned config_diff(const struct tg_config *a, const struct tg_config *b, config_key_fn fn,
                     void *ctx);

/* The schema written out for people: every key with its default (read from
 * config_defaults(), never written down twice) and its help text. */
enum config_doc_format {
        CONFIG_DOC_INI,      /* an INI file of every key at its default, help as comments;
                              * config_load() reads it back as the defaults */
        CONFIG_DOC_MARKDOWN, /* docs/config.md: one table per section */
        CONFIG_DOC_SCDOC,    /* tollgate.ini(5), as scdoc(1) source */
};

/* The account called name in config, or NULL. The pointer is into config
 * and lives as long as it does. */
const struct tg_account *config_account_find(const struct tg_config *config, const char *name);

/* The names of config's accounts in the file's order, ", " between them,
 * cut with "..." when they do not fit dst[size] (for messages). */
void config_account_names(const struct tg_config *config, char *dst, size_t size);
/* The words every refusal of an account that is not configured says after
 * the name (the API's 422 unknown_account, the CLI's and the tools'
 * --account): "is not a configured account; the accounts are: a, b". */
void config_account_unknown(const struct tg_config *config, char *dst, size_t size);

/* config as account sees it: a copy of config whose [provider], [exit],
 * [retry] and [classify] members are the account's settings (everything
 * else, the account list too, as in config). account is one of config's.
 * What takes a struct tg_config (an exit, provider_setup) is built for one
 * account from its view. The view holds secrets as config does (keep it
 * in secret memory, platform/secmem). 0, or TG_EINVAL (*ret_view
 * untouched). */
int config_account_view(const struct tg_config *config, const struct tg_account *account,
                        struct tg_config *ret_view);

/* Ready to serve: when config has exactly one account, named default
 * (declared or not), its settings become config's top-level values and the
 * account is no longer marked declared (the config is then the view of the
 * account it serves, byte for byte as before accounts existed). Any other
 * set of accounts is left as it is: the dispatcher serves each through its
 * view (config_account_view), one exit each. `serve`, `dispatch`, `api` and
 * a reload call it after config_load(). */
void config_accounts_serve(struct tg_config *config);

/* `--accounts a,b`: the accounts one process serves, bit i for the config's
 * account i. 0, or TG_EINVAL with err naming the name that is not an
 * account (and the ones that are), or saying the list is empty. */
int config_accounts_mask(const struct tg_config *config, const char *list, unsigned *ret_mask,
                         char *err, size_t err_size);

/* The top-level section an account's key belongs to: "account.eu.exit"
 * gives "exit" (a pointer into section); any other section is itself.
 * config_diff() names an account's key by such a section, and a reload
 * judges it by its top-level counterpart. */
const char *config_section_base(const char *section);

/* Reads a secret (an API key, a token) from path into dst[size] with the
 * config's rules: trailing newlines and spaces trimmed, the rest non-empty
 * printable ASCII without spaces. The error names section.name and never
 * quotes the contents. 0, or TG_ECONFIG with err filled. */
int config_read_secret(const char *section, const char *name, const char *path, char *dst,
                       size_t size, char *err, size_t err_size);

/* Writes the schema to out, sections and keys in the schema's order. 0, or
 * TG_EINVAL (an unknown format, a key without help, or a default the file
 * cannot express), TG_ENOMEM, or TG_EIO (writing failed). */
int config_describe(FILE *out, enum config_doc_format fmt);

/* Key i of the schema (from 0): its section, name and help text, static
 * strings. 0, or TG_ERANGE past the last key (the out params untouched). */
int config_key_at(size_t i, const char **ret_section, const char **ret_name, const char **ret_help);

#endif
