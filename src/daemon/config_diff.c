/*
 * config_diff — which keys differ between two loaded configs (a SIGHUP
 * reload: daemon/service.c applies the live ones and refuses the rest).
 * Each row of the key table is compared by its value as the file would
 * hold it (config_show_value), and by its row's differ hook for what that
 * text does not show: a secret file's contents (the same name, rotated
 * contents) and the lines of a repeated key (classification rules, body
 * fields).
 *
 * An account declared in the first config is compared with the account of
 * its name in the second, key by key of the rows an account may set, on
 * the two accounts' views; its keys are named "account.NAME.section".
 *
 * Invariants: keys are reported in the table's order (the top level's,
 * then each account's), each at most once per account; no secret is
 * handed out, only the section and name of its key.
 */
#include "daemon/config_int.h"

#include <stdlib.h>
#include <string.h>

bool config_differ_rules(const struct tg_config *a, const struct tg_config *b)
{
        return a->rule_count != b->rule_count ||
               memcmp(a->rules, b->rules, a->rule_count * sizeof(a->rules[0])) != 0;
}

bool config_differ_notify_allow(const struct tg_config *a, const struct tg_config *b)
{
        return a->notify_allow_count != b->notify_allow_count ||
               memcmp(a->notify_allow, b->notify_allow,
                      a->notify_allow_count * sizeof(a->notify_allow[0])) != 0;
}

bool config_differ_body_fields(const struct tg_config *a, const struct tg_config *b)
{
        return a->provider_body_field_count != b->provider_body_field_count ||
               memcmp(a->provider_body_fields, b->provider_body_fields,
                      a->provider_body_field_count * sizeof(a->provider_body_fields[0])) != 0;
}

bool config_differ_fixed_headers(const struct tg_config *a, const struct tg_config *b)
{
        return a->provider_header_count != b->provider_header_count ||
               memcmp(a->provider_headers, b->provider_headers,
                      a->provider_header_count * sizeof(a->provider_headers[0])) != 0;
}

bool config_differ_tokens(const struct tg_config *a, const struct tg_config *b)
{
        return a->api_token_count != b->api_token_count ||
               memcmp(a->api_tokens, b->api_tokens, sizeof(a->api_tokens)) != 0;
}

/* Field by field: a struct's padding says nothing. */
bool config_differ_credentials(const struct tg_config *a, const struct tg_config *b)
{
        if (a->api_credential_count != b->api_credential_count)
                return true;
        for (unsigned i = 0; i < a->api_credential_count; i++) {
                const struct credential *x = &a->api_credentials[i], *y = &b->api_credentials[i];
                if (strcmp(x->name, y->name) != 0 || x->scopes != y->scopes ||
                    x->revoked != y->revoked || memcmp(x->salt, y->salt, sizeof(x->salt)) != 0 ||
                    memcmp(x->hash, y->hash, sizeof(x->hash)) != 0)
                        return true;
        }
        return false;
}

bool config_differ_webhook_secret(const struct tg_config *a, const struct tg_config *b)
{
        return strcmp(a->provider_webhook_secret, b->provider_webhook_secret) != 0;
}

bool config_differ_notify_secrets(const struct tg_config *a, const struct tg_config *b)
{
        return a->notify_secret_count != b->notify_secret_count ||
               memcmp(a->notify_secrets, b->notify_secrets, sizeof(a->notify_secrets)) != 0;
}

/* Does key differ between a and b? */
static bool key_differs(const struct key_def *key, const struct tg_config *a,
                        const struct tg_config *b)
{
        char va[TG_PATH_MAX + 8], vb[TG_PATH_MAX + 8];

        config_show_value(key, a, va, sizeof(va));
        config_show_value(key, b, vb, sizeof(vb));
        return strcmp(va, vb) != 0 || (key->differ && key->differ(a, b));
}

/* The keys of account (declared in a) that differ from b's account of its
 * name, on the two views (heap: a config is large). */
static unsigned diff_account(const struct tg_config *a, const struct tg_account *account,
                             const struct tg_config *b, config_key_fn fn, void *ctx)
{
        const struct tg_account *theirs = config_account_find(b, account->name);
        struct tg_config *va = NULL, *vb = NULL;
        char section[TG_ACCOUNT_NAME_MAX + 32];
        unsigned n = 0;

        if (theirs)
                va = malloc(sizeof(*va));
        if (va)
                vb = malloc(sizeof(*vb));
        if (!vb || config_account_view(a, account, va) < 0 ||
            config_account_view(b, theirs, vb) < 0) {
                /* gone from b (or no memory to tell): the account differs */
                if (fn)
                        fn(ctx, "account", account->name);
                free(va);
                free(vb);
                return 1;
        }
        for (size_t i = 0; i < config_key_count; i++) {
                const struct key_def *key = &config_keys[i];

                if (!key->per_account || !key_differs(key, va, vb))
                        continue;
                n++;
                snprintf(section, sizeof(section), "account.%s.%s", account->name, key->section);
                if (fn)
                        fn(ctx, section, key->name);
        }
        free(va);
        free(vb);
        return n;
}

unsigned config_diff(const struct tg_config *a, const struct tg_config *b, config_key_fn fn,
                     void *ctx)
{
        unsigned n = 0;

        for (size_t i = 0; i < config_key_count; i++) {
                const struct key_def *key = &config_keys[i];

                if (key_differs(key, a, b)) {
                        n++;
                        if (fn)
                                fn(ctx, key->section, key->name);
                }
        }
        for (unsigned i = 0; i < a->account_count; i++)
                if (a->accounts[i].declared)
                        n += diff_account(a, &a->accounts[i], b, fn, ctx);
        /* an account only b declares is new */
        for (unsigned i = 0; i < b->account_count; i++) {
                const struct tg_account *ours = config_account_find(a, b->accounts[i].name);

                if (b->accounts[i].declared && !(ours && ours->declared)) {
                        n++;
                        if (fn)
                                fn(ctx, "account", b->accounts[i].name);
                }
        }
        return n;
}
