/*
 * config_accounts — the [account.NAME] sections: several provider accounts
 * in one file. An account's section sets keys of the sections an account
 * may override, written with their section (`exit.starts_per_second = 20`);
 * which ones is the per_account flag of their rows in the key table, never
 * a code path of their own. An account's values are a copy of the
 * top-level ones (the block of daemon/config_account.def) with its keys
 * read over them by the rows' own setters, so a secret file an account
 * names is read, and a relative path resolved, as at the top level; the
 * checks across keys then run on each account's view.
 *
 * Invariants:
 *   - a config has at least one account: without [account.*] it is the
 *     implicit "default", whose settings are the top-level ones, and the
 *     file loads exactly as before accounts existed;
 *   - a NAME is [a-z0-9_-]{1,32}, declared once; a key an account may not
 *     set, an unknown one, or one set twice in an account is an error
 *     naming account.NAME.section.key and its line;
 *   - an account's keys are read only after every top-level key (so that
 *     an account inherits the top-level value wherever it is written);
 *   - a repeatable key set in an account replaces the inherited list (an
 *     account's provider has its own body and its own codes).
 */
#include "daemon/config_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "platform/secmem.h"

#define ACCOUNT_PREFIX     "account."
#define ACCOUNT_PREFIX_LEN (sizeof(ACCOUNT_PREFIX) - 1)

/* ---- the block an account sets ------------------------------------------- */

/* The block's first byte, as an offset into the whole struct (a copy spans
 * many members, never only the first one). */
static void *block_of(struct tg_config *config)
{
        return (char *)config + offsetof(struct tg_config, provider_base_url);
}

static const void *block_of_const(const struct tg_config *config)
{
        return (const char *)config + offsetof(struct tg_config, provider_base_url);
}

static void settings_from(struct tg_account_settings *dst, const struct tg_config *config)
{
        memcpy(dst, block_of_const(config), ACCOUNT_BLOCK_SIZE);
}

static void settings_into(struct tg_config *config, const struct tg_account_settings *src)
{
        memcpy(block_of(config), src, ACCOUNT_BLOCK_SIZE);
}

/* ---- names ----------------------------------------------------------------- */

static int find_index(const struct tg_config *config, const char *name)
{
        for (unsigned i = 0; i < config->account_count; i++)
                if (strcmp(config->accounts[i].name, name) == 0)
                        return (int)i;
        return -1;
}

const struct tg_account *config_account_find(const struct tg_config *config, const char *name)
{
        int i;

        if (!config || !name)
                return NULL;
        i = find_index(config, name);
        return i < 0 ? NULL : &config->accounts[i];
}

const char *config_section_base(const char *section)
{
        const char *dot;

        if (strncmp(section, ACCOUNT_PREFIX, ACCOUNT_PREFIX_LEN) != 0)
                return section;
        dot = strchr(section + ACCOUNT_PREFIX_LEN, '.');
        return dot ? dot + 1 : section;
}

/* ---- views ------------------------------------------------------------------- */

int config_account_view(const struct tg_config *config, const struct tg_account *account,
                        struct tg_config *ret_view)
{
        if (!config || !account || !ret_view || account < config->accounts ||
            account >= config->accounts + config->account_count)
                return TG_EINVAL;
        if (ret_view != config)
                *ret_view = *config;
        settings_into(ret_view, &account->settings);
        memcpy(ret_view->view_of, account->name, sizeof(ret_view->view_of));
        return 0;
}

void config_account_names(const struct tg_config *config, char *dst, size_t size)
{
        size_t at = 0;

        if (!size)
                return;
        dst[0] = '\0';
        for (unsigned i = 0; config && i < config->account_count; i++) {
                const char *sep = i ? ", " : "";
                size_t need = strlen(sep) + strlen(config->accounts[i].name);

                if (at + need + 4 >= size) {
                        snprintf(dst + at, size - at, "%s...", sep);
                        return;
                }
                snprintf(dst + at, size - at, "%s%s", sep, config->accounts[i].name);
                at += need;
        }
}

void config_account_unknown(const struct tg_config *config, char *dst, size_t size)
{
        char names[100];

        config_account_names(config, names, sizeof(names));
        snprintf(dst, size, "is not a configured account; the accounts are: %s", names);
}

void config_accounts_serve(struct tg_config *config)
{
        if (config && config->account_count == 1 &&
            strcmp(config->accounts[0].name, TG_ACCOUNT_DEFAULT) == 0) {
                settings_into(config, &config->accounts[0].settings);
                config->accounts[0].declared = false;
                config->accounts[0].line = 0;
        }
}

int config_accounts_mask(const struct tg_config *config, const char *list, unsigned *ret_mask,
                         char *err, size_t err_size)
{
        char names[TG_ACCOUNTS_MAX * (TG_ACCOUNT_NAME_MAX + 2) + 1];
        unsigned mask = 0;

        for (const char *p = list; p && *p;) {
                size_t n = strcspn(p, ",");
                char name[TG_ACCOUNT_NAME_MAX + 1];
                int i = -1;

                if (n > 0 && n < sizeof(name)) {
                        memcpy(name, p, n);
                        name[n] = '\0';
                        i = find_index(config, name);
                }
                if (i < 0) {
                        config_account_names(config, names, sizeof(names));
                        snprintf(err, err_size,
                                 "--accounts: \"%.*s\" is not an account of the "
                                 "config (it has: %s)",
                                 (int)(n < 64 ? n : 64), p, names);
                        return TG_EINVAL;
                }
                mask |= 1u << i;
                p += n + (p[n] == ',');
        }
        if (!mask) {
                snprintf(err, err_size, "--accounts: name at least one account");
                return TG_EINVAL;
        }
        *ret_mask = mask;
        return 0;
}

/* ---- reading the sections ---------------------------------------------------- */

/* An error about an account's section itself: "account.x: problem". */
static void section_error(struct load *load, const char *section, const char *text)
{
        const struct key_def made_up = {.section = section, .name = "", .type = KEY_CUSTOM};

        config_key_error(load, &made_up, "%s", text);
}

void config_account_section(struct load *load, const char *section)
{
        struct tg_config *c = &load->config;
        const char *name;
        struct tg_account *account;
        char text[200];
        int dup;

        if (strncmp(section, ACCOUNT_PREFIX, ACCOUNT_PREFIX_LEN) != 0)
                return;
        name = section + ACCOUNT_PREFIX_LEN;
        if (!refund_account_name_ok(name)) {
                char q[VALUE_QUOTE_MAX + 8];
                snprintf(text, sizeof(text),
                         "bad account name \"%s\": a NAME is 1 to %d of a-z, 0-9, _ and -",
                         config_quote(name, q, sizeof(q)), TG_ACCOUNT_NAME_MAX);
                section_error(load, section, text);
                return;
        }
        dup = find_index(c, name);
        if (dup >= 0 && c->accounts[dup].declared) {
                snprintf(text, sizeof(text), "[account.%s] appears twice (first at line %d)", name,
                         c->accounts[dup].line);
                section_error(load, section, text);
                return;
        }
        if (c->account_count > 0 && !c->accounts[0].declared)
                c->account_count = 0; /* the implicit default gives way */
        if (c->account_count >= TG_ACCOUNTS_MAX) {
                snprintf(text, sizeof(text), "more than %d accounts", TG_ACCOUNTS_MAX);
                section_error(load, section, text);
                return;
        }
        account = &c->accounts[c->account_count++];
        memset(account, 0, sizeof(*account));
        snprintf(account->name, sizeof(account->name), "%s", name);
        account->declared = true;
        account->line = load->line;
}

int config_account_key(struct load *load, const char *section, const char *name, const char *value)
{
        int i = find_index(&load->config, section + ACCOUNT_PREFIX_LEN);
        struct key_def unknown = {.section = "", .name = name, .type = KEY_CUSTOM};
        char sub[64];
        const char *dot = strchr(name, '.');
        const struct key_def *key;
        struct account_key *kept;
        int r, row;

        if (i < 0 || !load->config.accounts[i].declared)
                return 1; /* its section was refused, and said so */
        load->account = i;
        if (!dot || dot == name || (size_t)(dot - name) >= sizeof(sub)) {
                unknown.section = name;
                unknown.name = "";
                r = config_key_error(load, &unknown,
                                     "an account's key is written with its section, e.g. "
                                     "exit.starts_per_second");
                goto out;
        }
        memcpy(sub, name, (size_t)(dot - name));
        sub[dot - name] = '\0';
        unknown.section = sub;
        unknown.name = dot + 1;
        key = config_key_find(sub, dot + 1);
        if (!key) {
                bool section_known = false;
                for (size_t k = 0; k < config_key_count && !section_known; k++)
                        section_known =
                            config_keys[k].per_account && strcmp(config_keys[k].section, sub) == 0;
                r = section_known ? config_unknown_key(load, &unknown)
                                  : config_unknown_section(load, &unknown);
                goto out;
        }
        if (!key->per_account) {
                r = config_key_error(load, key,
                                     "an account may not set this key (only the keys of "
                                     "[provider], [exit], [retry] and [classify])");
                goto out;
        }
        row = config_key_index(key);
        if (load->account_seen[i][row] && !key->repeatable) {
                r = config_key_error(load, key, "set more than once (first at line %d)",
                                     load->account_seen_line[i][row]);
                goto out;
        }
        if (load->naccount_keys >= ACCOUNT_KEYS_MAX) {
                r = config_key_error(load, key, "more than %d keys in [account.*] sections",
                                     ACCOUNT_KEYS_MAX);
                goto out;
        }
        kept = &load->account_keys[load->naccount_keys];
        if ((size_t)snprintf(kept->value, sizeof(kept->value), "%s", value) >=
            sizeof(kept->value)) {
                r = config_key_error(load, key, "value longer than %d bytes",
                                     (int)sizeof(kept->value) - 1);
                goto out;
        }
        load->naccount_keys++;
        kept->account = (unsigned)i;
        kept->key = row;
        kept->line = load->line;
        load->account_seen[i][row] = true;
        load->account_seen_line[i][row] = load->line;
        r = 1;
out:
        load->account = -1;
        return r;
}

void config_accounts_default(struct tg_config *config)
{
        struct tg_account *account = &config->accounts[0];

        memset(account, 0, sizeof(*account));
        snprintf(account->name, sizeof(account->name), "%s", TG_ACCOUNT_DEFAULT);
        settings_from(&account->settings, config);
        config->account_count = 1;
}

/* load->config becomes account i's view: the top-level block is kept
 * aside in top meanwhile. */
static void enter_account(struct load *load, unsigned i, struct tg_account_settings *top)
{
        settings_from(top, &load->config);
        settings_into(&load->config, &load->config.accounts[i].settings);
        load->account = (int)i;
}

/* The account's block taken back, and the top level's put back. */
static void leave_account(struct load *load, unsigned i, const struct tg_account_settings *top)
{
        load->account = -1;
        settings_from(&load->config.accounts[i].settings, &load->config);
        settings_into(&load->config, top);
}

static void read_keys(struct load *load, unsigned i)
{
        bool cleared[LOAD_KEYS_MAX] = {false};
        int line = load->line;

        for (unsigned k = 0; k < load->naccount_keys; k++) {
                const struct account_key *kept = &load->account_keys[k];
                const struct key_def *key = &config_keys[kept->key];

                if (kept->account != i)
                        continue;
                if (key->clear && !cleared[kept->key]) {
                        key->clear(&load->config);
                        cleared[kept->key] = true;
                }
                load->line = kept->line; /* a setter's error names the key's line */
                config_set_value(load, key, kept->value);
        }
        load->line = line;
}

void config_accounts_read(struct load *load)
{
        struct tg_config *c = &load->config;
        struct tg_account_settings *top;

        if (c->account_count == 0 || !c->accounts[0].declared) {
                config_accounts_default(c);
                return;
        }
        top = secmem_alloc(sizeof(*top)); /* it holds the top-level secrets a while */
        if (!top) {
                const struct key_def made_up = {.section = "config", .name = ""};
                config_key_error(load, &made_up, "out of memory");
                return;
        }
        for (unsigned i = 0; i < c->account_count; i++) {
                settings_from(&c->accounts[i].settings, c);
                enter_account(load, i, top);
                read_keys(load, i);
                leave_account(load, i, top);
        }
        secmem_free(top);
}

void config_accounts_check(struct load *load, void (*check)(struct load *load))
{
        struct tg_config *c = &load->config;
        struct tg_account_settings *top;

        if (!c->accounts[0].declared)
                return; /* the implicit default is the top level, checked */
        top = secmem_alloc(sizeof(*top));
        if (!top) {
                const struct key_def made_up = {.section = "config", .name = ""};
                config_key_error(load, &made_up, "out of memory");
                return;
        }
        for (unsigned i = 0; i < c->account_count; i++) {
                enter_account(load, i, top);
                check(load);
                leave_account(load, i, top);
        }
        secmem_free(top);
}
