/*
 * config_int.h — what the parts of daemon/config share; included only by
 * src/daemon/config_*.c (config.h is the API everyone else uses).
 *
 * The parts:
 *   config_keys.c   the key table (every section.key, its type, range, help)
 *                   and the defaults;
 *   config_values.c reading one value into the config and writing it back
 *                   (numbers, URLs, listen addresses, templates, words);
 *   config_files.c  the keys that name files: secrets (through
 *                   platform/secret_file), users, TLS files;
 *   config_load.c   the INI loader: the inih handler, unknown names with a
 *                   did-you-mean (core/suggest), the checks across keys;
 *   config_doc.c    the schema written out (INI, Markdown, scdoc);
 *   config_diff.c   which keys differ between two configs (a reload);
 *   config_accounts.c the [account.NAME] sections: an account's keys are
 *                   the rows marked per_account, read by the same setters
 *                   into the account's copy of the top-level values.
 *
 * A key is a row of the table, found by its (section, name): the loader,
 * the doc generator and the diff iterate the rows and never have a code
 * path of their own per section. What makes one key behave unlike the rest
 * is written in its row (a setter and its argument, repeatable, how its
 * value is shown, what besides its shown value makes it differ).
 */
#ifndef TG_CONFIG_INT_H
#define TG_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/config.h"

#define MAX_DURATION_S  (366LL * 24 * 3600)
#define MAX_DURATION_MS (MAX_DURATION_S * 1000)
#define VALUE_QUOTE_MAX 64 /* bytes of a bad value quoted in a message */
#define LOAD_ERRORS_MAX 64 /* problems one load keeps (config_check lists them) */
#define LOAD_KEYS_MAX   128
#define DAY_MS          (24LL * 3600 * 1000)
/* keys set inside [account.*] sections, all accounts (kept on the heap
 * while the file is read) */
#define ACCOUNT_KEYS_MAX (64 * TG_ACCOUNTS_MAX)
/* The bytes of the account block (daemon/config_account.def, rule_count
 * last): what follows it in struct tg_config may sit inside the padding at
 * the end of struct tg_account_settings, so a copy stops here. */
#define ACCOUNT_BLOCK_SIZE                                                                         \
        (offsetof(struct tg_account_settings, rule_count) +                                        \
         sizeof(((struct tg_account_settings *)0)->rule_count))

enum key_type {
        KEY_STRING, /* char[size] */
        KEY_I64,    /* int64_t, value * scale */
        KEY_UINT,   /* unsigned */
        KEY_SIZE,   /* size_t */
        KEY_DOUBLE, /* double */
        KEY_BOOL,   /* bool: true/false, yes/no, on/off, 1/0 */
        KEY_CUSTOM, /* handled by a function */
};

struct load;

/* One row of the table: a key of one section. */
struct key_def {
        const char *section; /* the [section] it is written under */
        const char *name;
        enum key_type type;
        size_t offset;   /* into struct tg_config */
        size_t size;     /* KEY_STRING, and KEY_CUSTOM on a string: the buffer size */
        int64_t lo, hi;  /* integer range, as written in the file */
        int64_t scale;   /* KEY_I64: stored value = written value * scale */
        double dlo, dhi; /* KEY_DOUBLE: range; dlo excluded when dlo_open */
        bool dlo_open;
        bool repeatable;  /* may be set more than once (each adds one) */
        bool per_account; /* an [account.NAME] section may set it (as section.name) */
        /* A repeatable key: empties its list (an account's first line of
         * it replaces the list it inherited). */
        void (*clear)(struct tg_config *config);
        int (*custom)(struct load *load, const struct key_def *key, const char *value);
        int arg;           /* KEY_CUSTOM: what the setter needs of this key (a path kind) */
        const char *words; /* a key of a few words: " w1 w2 ... " (config_set_choice) */
        /* KEY_CUSTOM that is not one string: writes the value as the file
         * would hold it (the default shown by config_describe()). */
        void (*show)(const struct tg_config *config, char *buf, size_t size);
        /* What besides the value shown makes two configs differ in this key
         * (a secret file's contents, the rules added); NULL: nothing. */
        bool (*differ)(const struct tg_config *a, const struct tg_config *b);
        const char *help; /* what the key means, for config_describe() */
};

struct load_error {
        int line; /* 0: not tied to a line */
        char text[400];
};

/* The state of one load, passed to the inih handler. */
struct load {
        struct tg_config config;
        bool seen[LOAD_KEYS_MAX];     /* by row of the table: a key may be set once */
        int seen_line[LOAD_KEYS_MAX]; /* where it was set */
        bool failed;
        bool checking; /* the checks across keys run: config_load's message has no line */
        int err_line;  /* line of the first error */
        char err[512]; /* the first error */
        unsigned nerr; /* every error, for config_check() */
        struct load_error errs[LOAD_ERRORS_MAX];
        FILE *file;
        int line;              /* lines read so far: the handler runs for the last one */
        char dir[TG_PATH_MAX]; /* the config file's folder, absolute */

        /* [account.NAME] sections: their keys are kept as written and read
         * once the top-level values are known (config_accounts.c) */
        int account;          /* the account being read or checked (-1: the top level) */
        unsigned account_cap; /* room in config.accounts (heap, once one is declared) */
        /* every account's keys in the file's order (so one account's are
         * together: a section is declared once), on the heap */
        unsigned naccount_keys, account_keys_cap;
        struct account_key {
                unsigned account;
                int key; /* its row */
                int line;
                char value[TG_CONFIG_LINE];
        } * account_keys;
};

/* ---- config_keys.c: the table ------------------------------------------ */

extern const struct key_def config_keys[];
extern const size_t config_key_count;
/* What an [account.NAME] section is, for config_describe(). */
extern const char config_account_help[];

/* The row of section.name, or NULL. */
const struct key_def *config_key_find(const char *section, const char *name);
/* Its index in config_keys[], or -1 (a row made up for a message). */
int config_key_index(const struct key_def *key);

/* ---- config_load.c: messages -------------------------------------------- */

/* Records an error "section.key: problem" at the line being read (in the
 * checks across keys: where the key was set, if it was). Always returns 0
 * (the inih "failed" value), so that a setter ends with it. */
int config_key_error(struct load *load, const struct key_def *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* An unknown key (a made-up row naming it) or an unknown section: the
 * error, with the closest known name when one is near. In an account
 * (load->account >= 0) only the rows an account may set are candidates. */
int config_unknown_key(struct load *load, const struct key_def *unknown);
int config_unknown_section(struct load *load, const struct key_def *unknown);

/* ---- config_accounts.c: [account.NAME] ---------------------------------- */

/* A "[section]" line was read (its name, trimmed): an [account.NAME] one
 * declares the account, or records why it cannot. */
void config_account_section(struct load *load, const char *section);
/* A key = value line inside [account.NAME] (section is "account.NAME"):
 * kept for config_accounts_read(). 1, or 0 (an error was recorded). */
int config_account_key(struct load *load, const char *section, const char *name, const char *value);
/* After the top-level keys: the account list made (the implicit default
 * when none is declared), and each account's keys read over its copy of
 * the top-level values. */
void config_accounts_read(struct load *load);
/* config's account list: the implicit default, with config's settings. */
void config_accounts_default(struct tg_config *config);
/* The line where account set the key of row (the first time), or 0. */
int config_account_key_line(const struct load *load, unsigned account, int row);
/* What reading the accounts kept on the heap (the keys as written), given
 * back once the file is read. */
void config_accounts_load_free(struct load *load);
/* Runs check (the checks across keys) once per declared account, with
 * load->config holding the account's view and load->account set. */
void config_accounts_check(struct load *load, void (*check)(struct load *load));

/* ---- config_values.c: values -------------------------------------------- */

/* A bounded, printable copy of a value for a message: control bytes become
 * '?', and long values are cut with "...". Returns buf. */
const char *config_quote(const char *value, char *buf, size_t size);
/* path as written, or joined to the config file's folder when relative.
 * 0, or TG_ERANGE when the result does not fit. */
int config_resolve_path(const struct load *load, const char *path, char *dst, size_t size);
/* Copies value into a char[size] field of the config; too long is an
 * error, never a silent cut. 1, or 0 (an error was recorded). */
int config_set_string_at(struct load *load, const struct key_def *key, char *dst, size_t size,
                         const char *value);
/* Sets key from value by its type (a setter of its row for KEY_CUSTOM).
 * 1, or 0 (an error was recorded). */
int config_set_value(struct load *load, const struct key_def *key, const char *value);
/* The value of key in config, written as the file holds it; "" when the key
 * has none (an unset secret file, no rule added). 0, or TG_EINVAL when the
 * value cannot be written in the key's unit. */
int config_show_value(const struct key_def *key, const struct tg_config *config, char *buf,
                      size_t size);

/* The setters of the table's KEY_CUSTOM rows: 1, or 0 (an error was
 * recorded). */
int config_set_store_url(struct load *load, const struct key_def *key, const char *value);
int config_set_listen(struct load *load, const struct key_def *key, const char *value);
int config_set_base_url(struct load *load, const struct key_def *key, const char *value);
int config_set_path(struct load *load, const struct key_def *key, const char *value);
int config_set_header_name(struct load *load, const struct key_def *key, const char *value);
int config_set_token_path(struct load *load, const struct key_def *key, const char *value);
/* An absolute path to an existing directory this user may read and write, or "". */
int config_set_directory(struct load *load, const struct key_def *key, const char *value);
int config_set_jitter(struct load *load, const struct key_def *key, const char *value);
int config_set_rule(struct load *load, const struct key_def *key, const char *value);
int config_set_keep_days(struct load *load, const struct key_def *key, const char *value);
int config_set_choice(struct load *load, const struct key_def *key, const char *value);
int config_set_signing_string(struct load *load, const struct key_def *key, const char *value);
int config_set_prefix(struct load *load, const struct key_def *key, const char *value);
int config_set_body_field(struct load *load, const struct key_def *key, const char *value);
int config_set_field_source(struct load *load, const struct key_def *key, const char *value);
int config_set_list_cursor_param(struct load *load, const struct key_def *key, const char *value);
int config_set_fixed_header(struct load *load, const struct key_def *key, const char *value);
void config_clear_fixed_headers(struct tg_config *config);
bool config_differ_fixed_headers(const struct tg_config *a, const struct tg_config *b);
int config_set_reconcile(struct load *load, const struct key_def *key, const char *value);
int config_set_status_list(struct load *load, const struct key_def *key, const char *value);
void config_clear_body_fields(struct tg_config *config);
void config_clear_rules(struct tg_config *config);
int config_set_notify_allow(struct load *load, const struct key_def *key, const char *value);
void config_clear_notify_allow(struct tg_config *config);
bool config_differ_notify_allow(const struct tg_config *a, const struct tg_config *b);
void config_show_listen(const struct tg_config *config, char *buf, size_t size);
void config_show_jitter(const struct tg_config *config, char *buf, size_t size);
void config_show_keep_days(const struct tg_config *config, char *buf, size_t size);

/* ---- config_files.c: keys that name files ------------------------------- */

/* path is a secret file (a mysql url's password_file): a regular file
 * nobody but its owner may read or write. 1, or 0 (an error was recorded). */
int config_check_secret_file(struct load *load, const struct key_def *key, const char *path);

int config_set_token_file(struct load *load, const struct key_def *key, const char *value);
int config_set_webhook_file(struct load *load, const struct key_def *key, const char *value);
int config_set_notify_secret_file(struct load *load, const struct key_def *key, const char *value);
int config_set_secret_path(struct load *load, const struct key_def *key, const char *value);
int config_set_credentials_file(struct load *load, const struct key_def *key, const char *value);
int config_set_users_file(struct load *load, const struct key_def *key, const char *value);
int config_set_readable_file(struct load *load, const struct key_def *key, const char *value);
int config_set_client_key(struct load *load, const struct key_def *key, const char *value);

/* ---- config_diff.c: what else makes a key differ ------------------------ */

bool config_differ_rules(const struct tg_config *a, const struct tg_config *b);
bool config_differ_body_fields(const struct tg_config *a, const struct tg_config *b);
bool config_differ_tokens(const struct tg_config *a, const struct tg_config *b);
bool config_differ_credentials(const struct tg_config *a, const struct tg_config *b);
bool config_differ_webhook_secret(const struct tg_config *a, const struct tg_config *b);
bool config_differ_notify_secrets(const struct tg_config *a, const struct tg_config *b);

#endif
