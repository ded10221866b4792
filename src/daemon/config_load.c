/*
 * config_load — loads tollgate's INI file (inih) over the defaults and
 * validates it: every line is handed to the row of the key table
 * (config_keys.c) that its (section, name) finds, which reads the value
 * (config_values.c, config_files.c); then the checks across keys run. A key
 * that is not in the table, or a section with no keys in it, is an error
 * naming it, with the closest known name when one is near (core/suggest:
 * "did you mean"). An error names the key, the problem and the line
 * ("exit.starts_per_second: must be a number in (0, 1e+09], got \"fast\"
 * (line 12)").
 *
 * Invariants:
 *   - the caller's struct is written only when the whole file is valid
 *     (everything is built in a private copy first, in secret memory: the
 *     secrets are read into it);
 *   - a non-loopback api.listen requires api.token_file;
 *   - every problem of a file is recorded with its line (config_check()
 *     lists them all; config_load() reports the first);
 *   - the checks across keys run only when every key read well: a refused
 *     key keeps its default, which would make a check lie.
 *
 * After a value, " #" or " ;" starts a comment. Limits: inih reads lines
 * into a buffer of ini_max_line (200) bytes; a longer line is refused with
 * its line number rather than cut. A key set twice is an error, except a
 * repeatable one (classify.rule, provider.body_field).
 */
#include "daemon/config_int.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/policy.h"
#include "core/suggest.h"
#include "core/tg_error.h"
#include "daemon/provider_setup.h"
#include "platform/secmem.h"

/* ---- messages ------------------------------------------------------------ */

/* Records an error: the first one is what config_load() reports (inih keeps
 * parsing after a failed line, and the first is the one the operator needs
 * first); every one goes to the list config_check() prints. */
static void add_error(struct load *load, int line, const char *text)
{
        if (!load->failed) {
                load->failed = true;
                load->err_line = load->checking ? 0 : line;
                snprintf(load->err, sizeof(load->err), "%s", text);
        }
        if (load->nerr < LOAD_ERRORS_MAX) {
                load->errs[load->nerr].line = line;
                snprintf(load->errs[load->nerr].text, sizeof(load->errs[0].text), "%s", text);
                load->nerr++;
        }
}

/* "account.NAME." when an account's key is read or checked, else "". */
static void account_prefix(const struct load *load, char *buf, size_t size)
{
        buf[0] = '\0';
        if (load->account >= 0)
                snprintf(buf, size, "account.%s.", load->config.accounts[load->account].name);
}

int config_key_error(struct load *load, const struct key_def *key, const char *fmt, ...)
{
        char text[sizeof(load->errs[0].text)], prefix[TG_ACCOUNT_NAME_MAX + 16];
        int i = config_key_index(config_key_find(key->section, key->name));
        int line = load->line;
        va_list ap;
        int n;

        if (load->checking && load->account >= 0)
                line = i >= 0 ? config_account_key_line(load, (unsigned)load->account, i) : 0;
        else if (load->checking)
                line = i >= 0 && load->seen[i] ? load->seen_line[i] : 0;
        account_prefix(load, prefix, sizeof(prefix));
        /* a made-up row may lack a name (a section's own problem) */
        n = snprintf(text, sizeof(text), "%s%s%s%s: ", prefix, key->section,
                     key->name[0] ? "." : "", key->name);
        if (n < 0 || (size_t)n >= sizeof(text))
                return 0;
        va_start(ap, fmt);
        vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
        va_end(ap);
        add_error(load, line, text);
        return 0;
}

/* ---- names the table does not have -------------------------------------- */

/* A row a name of the section being read may be: in an account, only
 * one an account may set. */
static bool candidate(const struct load *load, const struct key_def *key)
{
        return load->account < 0 || key->per_account;
}

/* The message for a key the table does not have: the closest key of its
 * section, else the same name in another section, when one is near. */
int config_unknown_key(struct load *load, const struct key_def *unknown)
{
        const struct key_def *elsewhere = NULL;
        struct suggest near;
        const char *best;

        suggest_init(&near, unknown->name);
        for (size_t i = 0; i < config_key_count; i++) {
                const struct key_def *key = &config_keys[i];
                if (!candidate(load, key))
                        continue;
                if (strcmp(key->section, unknown->section) == 0)
                        suggest_consider(&near, key->name);
                else if (!elsewhere && suggest_distance(unknown->name, key->name) == 0)
                        elsewhere = key;
        }
        best = suggest_best(&near);
        if (best)
                return config_key_error(load, unknown, "unknown key; did you mean %s.%s?",
                                        unknown->section, best);
        if (elsewhere)
                return config_key_error(load, unknown, "unknown key in [%s]; did you mean %s.%s?",
                                        unknown->section, elsewhere->section, elsewhere->name);
        return config_key_error(load, unknown, "unknown key");
}

int config_unknown_section(struct load *load, const struct key_def *unknown)
{
        struct suggest near;
        const char *best;

        suggest_init(&near, unknown->section);
        for (size_t i = 0; i < config_key_count; i++)
                if (candidate(load, &config_keys[i]))
                        suggest_consider(&near, config_keys[i].section);
        best = suggest_best(&near);
        if (load->account >= 0) /* an account's key: section.key in [account.NAME] */
                return best ? config_key_error(load, unknown,
                                               "unknown section %s; did you mean %s.%s?",
                                               unknown->section, best, unknown->name)
                            : config_key_error(load, unknown,
                                               "unknown section %s (an account sets keys of "
                                               "[provider], [exit], [retry] and [classify])",
                                               unknown->section);
        if (best)
                return config_key_error(load, unknown, "unknown section [%s]; did you mean [%s]?",
                                        unknown->section, best);
        return config_key_error(load, unknown, "unknown section [%s]", unknown->section);
}

/* ---- the inih handler ---------------------------------------------------- */

/* One key = value line: the row of (section, name) reads it. */
static int on_key(void *user, const char *section, const char *name, const char *value)
{
        struct load *load = user;
        struct key_def unknown = {.section = section, .name = name, .type = KEY_CUSTOM};
        bool section_known = false;

        if (strncmp(section, "account.", 8) == 0)
                return config_account_key(load, section, name, value);
        for (size_t i = 0; i < config_key_count; i++) {
                const struct key_def *key = &config_keys[i];
                if (strcmp(key->section, section) != 0)
                        continue;
                section_known = true;
                if (strcmp(key->name, name) != 0)
                        continue;
                if (load->seen[i] && !key->repeatable)
                        return config_key_error(load, key, "set more than once (first at line %d)",
                                                load->seen_line[i]);
                load->seen[i] = true;
                load->seen_line[i] = load->line;
                return config_set_value(load, key, value);
        }
        if (section[0] == '\0')
                return config_key_error(load, &unknown, "key outside any [section]");
        if (!section_known)
                return config_unknown_section(load, &unknown);
        return config_unknown_key(load, &unknown);
}

/* ---- checks across keys --------------------------------------------------- */

/* The row of a key a check names (it is in the table: a check of a key
 * that is not would be a programmer's error). */
static const struct key_def *row(const char *section, const char *name)
{
        const struct key_def *key = config_key_find(section, name);

        assert(key);
        return key;
}

static bool is_loopback(const char *host)
{
        struct in_addr v4;
        struct in6_addr v6;

        if (strcasecmp(host, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, host, &v4) == 1)
                return (ntohl(v4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, host, &v6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&v6);
        return false;
}

/* Was section.name set in the file? */
static bool was_set(const struct load *load, const char *section, const char *name)
{
        int i = config_key_index(config_key_find(section, name));

        return i >= 0 && load->seen[i];
}

/* A number key's value in config: *ret_i for an integer, *ret_d for a
 * double, and its text as a message writes it (the stored value). */
static void number_of(const struct key_def *key, const struct tg_config *config, int64_t *ret_i,
                      double *ret_d, char *text, size_t size)
{
        const char *at = (const char *)config + key->offset;
        unsigned u;
        size_t z;

        *ret_i = 0;
        *ret_d = 0;
        switch (key->type) {
        case KEY_I64:
                memcpy(ret_i, at, sizeof(*ret_i));
                break;
        case KEY_UINT:
                memcpy(&u, at, sizeof(u));
                *ret_i = u;
                break;
        case KEY_SIZE:
                memcpy(&z, at, sizeof(z));
                *ret_i = (int64_t)z;
                break;
        case KEY_DOUBLE:
                memcpy(ret_d, at, sizeof(*ret_d));
                snprintf(text, size, "%g", *ret_d);
                return;
        default:
                assert(!"a number key");
                break;
        }
        *ret_d = (double)*ret_i;
        snprintf(text, size, "%lld", (long long)*ret_i);
}

/* section.low <= section.high, two number keys of one type, or an error
 * that blames the key the operator wrote (the high one when only it was
 * set, else the low one), quoting the other's value. */
static void check_order(struct load *load, const char *section, const char *low, const char *high)
{
        const struct key_def *lo = row(section, low), *hi = row(section, high);
        const struct tg_config *c = &load->config;
        char lo_text[64], hi_text[64];
        int64_t lo_i, hi_i;
        double lo_d, hi_d;
        bool broken;

        number_of(lo, c, &lo_i, &lo_d, lo_text, sizeof(lo_text));
        number_of(hi, c, &hi_i, &hi_d, hi_text, sizeof(hi_text));
        assert((lo->type == KEY_DOUBLE) == (hi->type == KEY_DOUBLE));
        broken = lo->type == KEY_DOUBLE ? lo_d > hi_d : lo_i > hi_i;
        if (!broken)
                return;
        if (was_set(load, section, high) && !was_set(load, section, low))
                config_key_error(load, hi, "must be >= %s.%s (%s)", section, low, lo_text);
        else
                config_key_error(load, lo, "must be <= %s.%s (%s)", section, high, hi_text);
}

/* The provider's TLS, credentials and mapping, across keys. */
static void check_provider(struct load *load)
{
        const struct key_def *secret = row("provider", "auth_secret_file");
        const struct key_def *cert = row("provider", "client_cert");
        const struct key_def *key = row("provider", "client_key");
        const struct key_def *ca = row("provider", "ca_file");
        struct tg_config *c = &load->config;
        struct provider_maps *maps;
        char err[400];
        bool auth = strcmp(c->provider_auth, "none") != 0;
        int r;

        if (auth && !c->provider_auth_secret_file[0])
                config_key_error(load, secret, "required when provider.auth is %s",
                                 c->provider_auth);
        if (!auth && c->provider_auth_secret_file[0])
                config_key_error(load, secret, "set, but provider.auth is none");
        bool oauth2 = strcmp(c->provider_auth, "oauth2") == 0;
        if (oauth2 && !c->provider_client_id_file[0])
                config_key_error(load, row("provider", "client_id_file"),
                                 "required when provider.auth is oauth2");
        if (!oauth2 && c->provider_client_id_file[0])
                config_key_error(load, row("provider", "client_id_file"),
                                 "set, but provider.auth is %s", c->provider_auth);
        if (c->provider_client_cert[0] && !c->provider_client_key[0])
                config_key_error(load, key, "required with provider.client_cert");
        if (c->provider_client_key[0] && !c->provider_client_cert[0])
                config_key_error(load, cert, "required with provider.client_key");
        if (strncmp(c->provider_base_url, "http://", 7) == 0) {
                if (c->provider_ca_file[0])
                        config_key_error(load, ca, "set, but provider.base_url is http://");
                if (c->provider_client_cert[0])
                        config_key_error(load, cert, "set, but provider.base_url is http://");
        }
        check_order(load, "provider", "unreachable_hold_ms", "unreachable_hold_max_ms");
        /* The mapping as a whole, evaluated once: a message names its key. */
        maps = malloc(sizeof(*maps));
        if (!maps) {
                add_error(load, 0, "config: out of memory");
                return;
        }
        r = provider_setup_maps(c, maps, err, sizeof(err));
        free(maps);
        if (r < 0) {
                char text[sizeof(load->errs[0].text)], prefix[TG_ACCOUNT_NAME_MAX + 16];

                account_prefix(load, prefix, sizeof(prefix));
                /* a long message is cut at its end: its start names the key */
                if (snprintf(text, sizeof(text), "%s%s", prefix, err) < 0)
                        text[0] = '\0';
                add_error(load, 0, text);
        }
}

/* Every check runs, so that config_check() lists every problem; each
 * records its own error. Runs only on a file whose keys all read well:
 * a refused key keeps its default, which would make a check here lie. */
static void check_all(struct load *load)
{
        struct tg_config *c = &load->config;
        bool top = load->account < 0; /* else an account's view: only its keys */

        if (top && c->api_token[0] == '\0' && c->api_credentials_file[0] == '\0' &&
            !is_loopback(c->api_listen_host))
                config_key_error(load, row("api", "token_file"),
                                 "required when api.listen is not loopback");
        check_order(load, "provider", "connect_timeout_ms", "timeout_ms");
        check_order(load, "retry", "backoff_base_ms", "backoff_cap_ms");
        check_order(load, "retry", "backoff_min_ms", "backoff_cap_ms");
        check_order(load, "retry", "pending_poll_interval_ms", "pending_poll_max_ms");
        /* A sub-quota narrows the account total, never adds to it. */
        check_order(load, "exit", "query_starts_per_second", "starts_per_second");
        check_order(load, "exit", "refund_starts_per_second", "starts_per_second");
        check_order(load, "exit", "query_max_in_flight", "max_in_flight");
        check_order(load, "exit", "refund_max_in_flight", "max_in_flight");
        /* Each share of the account gets max_in_flight / shares calls open
         * (at least one, and together no more than the account's). */
        if (c->exit_shares > c->exit.max_in_flight) {
                config_key_error(load, row("exit", "shares"),
                                 "must be <= exit.max_in_flight (%u): each share needs at least "
                                 "one call in flight of the account's",
                                 c->exit.max_in_flight);
        }
        /* ... and so does each sub-quota's in-flight cap */
        if (c->exit_refund_max_in_flight > 0 && c->exit_shares > c->exit_refund_max_in_flight)
                config_key_error(load, row("exit", "refund_max_in_flight"),
                                 "must be >= exit.shares (%u) or 0: each share needs at least "
                                 "one refund POST in flight of it",
                                 c->exit_shares);
        if (c->exit_query_max_in_flight > 0 && c->exit_shares > c->exit_query_max_in_flight)
                config_key_error(load, row("exit", "query_max_in_flight"),
                                 "must be >= exit.shares (%u) or 0: each share needs at least "
                                 "one query in flight of it",
                                 c->exit_shares);
        /* Shares pace to fixed windows of one grid; a rate that moves
         * would need every share to move with it. */
        if (c->exit_adaptive && c->exit_shares > 1)
                config_key_error(load, row("exit", "adaptive"),
                                 "not with exit.shares > 1 (%u): the shares' windows are cut from "
                                 "a fixed account rate",
                                 c->exit_shares);
        /* A key re-sent after the provider forgot it is a new refund. */
        if (c->policy.key_retention_ms >= c->provider_key_lifetime_ms)
                config_key_error(load, row("retry", "key_retention_s"),
                                 "must be shorter than provider.key_lifetime_s (%lld s), the "
                                 "provider's life of a key: a key sent again after it is a new "
                                 "refund",
                                 (long long)(c->provider_key_lifetime_ms / 1000));
        if (policy_config_check(&c->policy) < 0)
                config_key_error(load, row("retry", "max_attempts"),
                                 "the [retry] settings are inconsistent");
        /* A pruned operation's id is new again: while the provider may still
         * hear of the operation (its deadline, then its key's retention), it
         * must stay. */
        if (!top && c->retention_keep_ms > 0 &&
            c->retention_keep_ms <= c->policy.deadline_ms + c->policy.key_retention_ms)
                config_key_error(
                    load, row("retry", "deadline_s"),
                    "with retry.key_retention_s (%lld s in all), must be shorter "
                    "than retention.keep_days: a pruned operation's id is new again",
                    (long long)((c->policy.deadline_ms + c->policy.key_retention_ms) / 1000));
        else if (c->retention_keep_ms > 0 &&
                 c->retention_keep_ms <= c->policy.deadline_ms + c->policy.key_retention_ms)
                config_key_error(
                    load, row("retention", "keep_days"),
                    "must be 0 (keep forever) or longer than retry.deadline_s + "
                    "retry.key_retention_s (%lld s)",
                    (long long)((c->policy.deadline_ms + c->policy.key_retention_ms) / 1000));
        if (top)
                check_order(load, "ui", "session_idle_s", "session_max_s");
        /* an unsigned delivery would teach receivers to skip the check */
        if (c->notify_url[0] && !c->notify_secret_file[0])
                config_key_error(load, row("notify", "secret_file"), "required with notify.url");
        if (top && c->notify_allow_count > 0 && !c->notify_secret_file[0])
                config_key_error(load, row("notify", "secret_file"), "required with notify.allow");
        check_order(load, "notify", "backoff_base_ms", "backoff_cap_ms");
        check_provider(load);
}

/* ---- reading the file ------------------------------------------------------- */

/* inih reads lines through this: fgets that counts lines (so that an error
 * can name its line), refuses a line longer than inih's buffer instead of
 * letting inih read its tail as a line of its own, and cuts an inline
 * comment: after a value, whitespace then '#' or ';' starts one (inih
 * itself knows only " ;"). A line that starts with either is inih's. */
static char *read_line(char *str, int num, void *stream)
{
        struct load *load = stream;
        char *got = fgets(str, num, load->file);
        size_t len;

        if (!got)
                return NULL;
        load->line++;
        len = strlen(got);
        if (len > 0 && got[len - 1] != '\n' && !feof(load->file)) {
                char text[64];
                int c;
                while ((c = fgetc(load->file)) != EOF && c != '\n')
                        ;
                snprintf(text, sizeof(text), "config: line longer than %d bytes", num - 2);
                add_error(load, load->line, text);
                /* inih sees an empty line: the error above is what counts. */
                str[0] = '\n';
                str[1] = '\0';
                return got;
        }
        size_t lead = strspn(str, " \t");
        if (str[lead] == '#' || str[lead] == ';')
                return got;
        for (size_t i = lead + 1; str[i]; i++) {
                if ((str[i] == '#' || str[i] == ';') && (str[i - 1] == ' ' || str[i - 1] == '\t')) {
                        str[i] = '\n';
                        str[i + 1] = '\0';
                        break;
                }
        }
        /* A line that is neither a [section] nor key = value: said here, so
         * that every such line is listed (inih answers only its first), and
         * inih is handed an empty line. */
        size_t end = strcspn(str + lead, "\r\n");
        while (end > 0 && (str[lead + end - 1] == ' ' || str[lead + end - 1] == '\t'))
                end--;
        bool section = str[lead] == '[' && memchr(str + lead, ']', end) != NULL;
        bool pair =
            str[lead] != '[' && (memchr(str + lead, '=', end) || memchr(str + lead, ':', end));
        if (section) {
                /* its name as inih reads it: inside the brackets, trimmed */
                char name[TG_CONFIG_LINE];
                const char *open = str + lead + 1;
                const char *close = memchr(open, ']', end - 1);
                size_t n;

                open += strspn(open, " \t");
                n = close && close > open ? (size_t)(close - open) : 0;
                while (n > 0 && (open[n - 1] == ' ' || open[n - 1] == '\t'))
                        n--;
                if (n < sizeof(name)) {
                        memcpy(name, open, n);
                        name[n] = '\0';
                        config_account_section(load, name);
                }
        }
        if (end > 0 && !section && !pair) {
                add_error(load, load->line, "config: not a [section] or key = value line");
                str[0] = '\n';
                str[1] = '\0';
        }
        return got;
}

/* The folder of path, absolute (the path itself was opened). */
static void config_folder(const char *path, char *dst, size_t size)
{
        char abs[PATH_MAX];
        char *slash;

        dst[0] = '\0';
        if (!realpath(path, abs))
                return; /* then relative paths stay as written */
        slash = strrchr(abs, '/');
        if (slash == abs)
                slash[1] = '\0'; /* a file in / */
        else if (slash)
                *slash = '\0';
        if (strlen(abs) < size) /* else relative paths stay as written */
                memcpy(dst, abs, strlen(abs) + 1);
}

/* Reads path into load: every key, then (when they all read well) the
 * checks across keys. 0, or -errno (the file cannot be opened: recorded). */
static int load_run(const char *path, struct load *load)
{
        int line;

        load->file = fopen(path, "re");
        if (!load->file) {
                char text[sizeof(load->errs[0].text)];
                int e = errno;

                snprintf(text, sizeof(text), "config: cannot open %s: %s", path, strerror(e));
                add_error(load, 0, text);
                return -e;
        }
        load->account = -1;
        config_folder(path, load->dir, sizeof(load->dir));
        config_defaults(&load->config);
        snprintf(load->config.config_dir, sizeof(load->config.config_dir), "%s", load->dir);
        line = ini_parse_stream(read_line, load, on_key, load);
        if (ferror(load->file)) {
                char text[sizeof(load->errs[0].text)];
                snprintf(text, sizeof(text), "config: cannot read %s", path);
                add_error(load, 0, text);
        }
        fclose(load->file);
        load->file = NULL;
        if (line > 0) {
                /* inih answers the first line it or our handler refused: when
                 * no error of ours is on it, it is inih's own refusal (no
                 * '=', an unclosed '[') */
                bool ours = false;
                for (unsigned i = 0; i < load->nerr && !ours; i++)
                        ours = load->errs[i].line == line;
                if (!ours)
                        add_error(load, line, "config: not a [section] or key = value line");
        } else if (line < 0 && !load->failed) {
                char text[sizeof(load->errs[0].text)];
                snprintf(text, sizeof(text), "config: cannot parse %s", path);
                add_error(load, 0, text);
        }
        /* The default store is a relative path too. */
        if (!was_set(load, "store", "url")) {
                char dflt[TG_PATH_MAX];

                snprintf(dflt, sizeof(dflt), "%s", load->config.store_url);
                config_set_store_url(load, row("store", "url"), dflt);
        }
        /* The accounts' keys, over the top-level values now known. */
        config_accounts_read(load);
        if (!load->failed) {
                load->checking = true;
                check_all(load);
                /* each account's view, once the top level holds: else an
                 * account inheriting a broken value would repeat its error */
                if (!load->failed)
                        config_accounts_check(load, check_all);
                load->checking = false;
        }
        return 0;
}

/* The errors in line order (stable: equal lines keep their order; those
 * without a line last). */
static void sort_errors(struct load *load)
{
        for (unsigned i = 1; i < load->nerr; i++) {
                struct load_error e = load->errs[i];
                unsigned key = e.line > 0 ? (unsigned)e.line : UINT_MAX;
                unsigned j = i;
                while (j > 0) {
                        const struct load_error *p = &load->errs[j - 1];
                        unsigned pk = p->line > 0 ? (unsigned)p->line : UINT_MAX;
                        if (pk <= key)
                                break;
                        load->errs[j] = load->errs[j - 1];
                        j--;
                }
                load->errs[j] = e;
        }
}

int config_load(const char *path, struct tg_config *ret_config, char *err, size_t err_size)
{
        struct load *load;
        int r;

        if (!path || !ret_config)
                return TG_EINVAL;
        /* Secret memory, not the stack: the struct carries 64 rules and
         * several paths, and the secrets read while it is filled. */
        load = secmem_alloc(sizeof(*load));
        if (!load)
                return TG_ENOMEM;
        r = load_run(path, load);
        if (r == 0 && load->failed) {
                r = TG_ECONFIG;
                /* The first problem in the file (a check across keys has
                 * no line of its own here, as it never had). */
                if (!load->checking && load->nerr > 0 && load->err_line > 0) {
                        sort_errors(load);
                        load->err_line = load->errs[0].line;
                        snprintf(load->err, sizeof(load->err), "%s", load->errs[0].text);
                }
        }
        if (r < 0) {
                if (err && err_size) {
                        if (load->err_line > 0)
                                snprintf(err, err_size, "%s (line %d)", load->err, load->err_line);
                        else
                                snprintf(err, err_size, "%s", load->err);
                }
                goto out;
        }
        *ret_config = load->config; /* the accounts are the caller's now */
        config_accounts_default(&load->config);
out:
        config_release(&load->config);
        config_accounts_load_free(load);
        /* The copy holds secrets: wiped as it is given back. */
        secmem_free(load);
        return r;
}

int config_check(const char *path, config_problem_fn fn, void *ctx, unsigned *ret_problems)
{
        struct load *load;
        int r;

        if (!path || !fn || !ret_problems)
                return TG_EINVAL;
        load = secmem_alloc(sizeof(*load)); /* the secrets read while checking */
        if (!load)
                return TG_ENOMEM;
        r = load_run(path, load);
        sort_errors(load);
        for (unsigned i = 0; i < load->nerr; i++)
                fn(ctx, load->errs[i].line, load->errs[i].text);
        *ret_problems = load->nerr;
        config_release(&load->config);
        config_accounts_load_free(load);
        secmem_free(load); /* wipes */
        return r;
}
