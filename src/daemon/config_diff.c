/*
 * config_diff — which keys differ between two loaded configs (a SIGHUP
 * reload: daemon/service.c applies the live ones and refuses the rest).
 * Each row of the key table is compared by its value as the file would
 * hold it (config_show_value), and by its row's differ hook for what that
 * text does not show: a secret file's contents (the same name, rotated
 * contents) and the lines of a repeated key (classification rules, body
 * fields).
 *
 * Invariants: keys are reported in the table's order, each at most once;
 * no secret is handed out, only the section and name of its key.
 */
#include "daemon/config_int.h"

#include <string.h>

bool config_differ_rules(const struct tg_config *a, const struct tg_config *b)
{
        return a->rule_count != b->rule_count ||
               memcmp(a->rules, b->rules, a->rule_count * sizeof(a->rules[0])) != 0;
}

bool config_differ_body_fields(const struct tg_config *a, const struct tg_config *b)
{
        return a->provider_body_field_count != b->provider_body_field_count ||
               memcmp(a->provider_body_fields, b->provider_body_fields,
                      a->provider_body_field_count * sizeof(a->provider_body_fields[0])) != 0;
}

bool config_differ_tokens(const struct tg_config *a, const struct tg_config *b)
{
        return a->api_token_count != b->api_token_count ||
               memcmp(a->api_tokens, b->api_tokens, sizeof(a->api_tokens)) != 0;
}

bool config_differ_webhook_secret(const struct tg_config *a, const struct tg_config *b)
{
        return strcmp(a->provider_webhook_secret, b->provider_webhook_secret) != 0;
}

unsigned config_diff(const struct tg_config *a, const struct tg_config *b, config_key_fn fn,
                     void *ctx)
{
        char va[TG_PATH_MAX + 8], vb[TG_PATH_MAX + 8];
        unsigned n = 0;

        for (size_t i = 0; i < config_key_count; i++) {
                const struct key_def *key = &config_keys[i];
                bool differ;

                config_show_value(key, a, va, sizeof(va));
                config_show_value(key, b, vb, sizeof(vb));
                differ = strcmp(va, vb) != 0 || (key->differ && key->differ(a, b));
                if (differ) {
                        n++;
                        if (fn)
                                fn(ctx, key->section, key->name);
                }
        }
        return n;
}
