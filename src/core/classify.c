/*
 * classify — turns what the provider said (struct provider_reply) into one
 * tg_class, from a bounded rule table whose defaults are the tables of
 * shared/PROVIDER.md.
 *
 * Invariants:
 *   - The table never holds more than CLASSIFIER_MAX_RULES rules, defaults
 *     included; adding past the bound is TG_EFULL, never growth.
 *   - Rules are searched newest first, so a rule added later takes precedence
 *     over every rule added before it (configuration over defaults; within
 *     the defaults, the specific rule is added after the general one).
 *   - Every stored rule yields a class that its request kind can produce:
 *     a POST rule never says processing/not_found/no_answer/not_sent, a query
 *     rule never says key_reused/retryable/unknown/not_sent. So classify()
 *     only ever returns a class that policy accepts for that request kind.
 *   - A rule that constrains the body (code=..., status=...) only matches a
 *     body that parsed as a JSON object: fields of a body we could not read
 *     are never trusted. A complete response that no rule matches is unknown
 *     (POST) or no_answer (query): we never guess that something did or did
 *     not happen.
 *   - Rule values are at most field size - 2 bytes long: a value that fills
 *     a provider_reply field exactly could be the truncation of a longer,
 *     different code, and must not match it.
 */
#include "core/classify.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"

struct classifier {
        size_t count;
        struct classify_rule rules[CLASSIFIER_MAX_RULES];
};

/* Longest rule text classify_rule_parse() looks at; longer is TG_EPARSE. */
#define RULE_TEXT_MAX 512

/* The defaults of shared/PROVIDER.md, in the order they are added: a later
 * row takes precedence, so the specific rows follow the general ones. */
static const struct classify_rule default_rules[] = {
    /* POST /v1/refunds */
    {CLASSIFY_POST, 200, 201, "", "succeeded", TG_CLASS_SUCCEEDED, CLASSIFY_FLAG_ANY},
    {CLASSIFY_POST, 400, 400, "", "", TG_CLASS_REJECTED, CLASSIFY_FLAG_ANY},
    {CLASSIFY_POST, 422, 422, "", "", TG_CLASS_REJECTED, CLASSIFY_FLAG_ANY},
    {CLASSIFY_POST, 409, 409, "idempotency_key_in_use", "", TG_CLASS_UNKNOWN, CLASSIFY_FLAG_ANY},
    {CLASSIFY_POST, 429, 429, "", "", TG_CLASS_RETRYABLE, CLASSIFY_FLAG_ANY},
    {CLASSIFY_POST, 503, 503, "", "", TG_CLASS_RETRYABLE, CLASSIFY_FLAG_ANY},
    /* A refusal or an error whose body says the refund executed or is still
     * running contradicts itself: it may have executed, so it is neither
     * rejected (the caller would be told nothing moved) nor retryable, but
     * reconciled by a query with the same key. */
    {CLASSIFY_POST, 400, 599, "", "succeeded", TG_CLASS_UNKNOWN, CLASSIFY_FLAG_ANY},
    {CLASSIFY_POST, 400, 599, "", "processing", TG_CLASS_UNKNOWN, CLASSIFY_FLAG_ANY},
    /* Same key, another payload: the operator decides, whatever the body
     * says (a query would find the other payload's refund). */
    {CLASSIFY_POST, 422, 422, "idempotency_key_reused", "", TG_CLASS_KEY_REUSED, CLASSIFY_FLAG_ANY},
    /* GET /v1/refunds/{operation_id} */
    {CLASSIFY_QUERY, 200, 200, "", "succeeded", TG_CLASS_SUCCEEDED, CLASSIFY_FLAG_ANY},
    {CLASSIFY_QUERY, 200, 200, "", "failed", TG_CLASS_REJECTED, CLASSIFY_FLAG_ANY},
    {CLASSIFY_QUERY, 200, 200, "", "processing", TG_CLASS_PROCESSING, CLASSIFY_FLAG_ANY},
    {CLASSIFY_QUERY, 404, 404, "not_found", "", TG_CLASS_NOT_FOUND, CLASSIFY_FLAG_ANY},
};

static bool class_valid_for(enum classify_request request, enum tg_class cls)
{
        switch (request) {
        case CLASSIFY_POST:
                return cls == TG_CLASS_SUCCEEDED || cls == TG_CLASS_REJECTED ||
                       cls == TG_CLASS_KEY_REUSED || cls == TG_CLASS_RETRYABLE ||
                       cls == TG_CLASS_UNKNOWN || cls == TG_CLASS_PROCESSING;
        case CLASSIFY_QUERY:
                return cls == TG_CLASS_SUCCEEDED || cls == TG_CLASS_REJECTED ||
                       cls == TG_CLASS_PROCESSING || cls == TG_CLASS_NOT_FOUND ||
                       cls == TG_CLASS_NO_ANSWER;
        }
        return false;
}

/* A rule value: "", "-", or 1..max_len bytes of [A-Za-z0-9._:-]. */
static bool value_char_ok(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == ':' || c == '-';
}

static bool value_ok(const char *value, size_t field_size)
{
        const char *end = memchr(value, '\0', field_size);
        if (!end)
                return false;
        size_t len = (size_t)(end - value);
        if (len > field_size - 2)
                return false;
        for (size_t i = 0; i < len; i++) {
                if (!value_char_ok(value[i]))
                        return false;
        }
        return true;
}

static bool rule_ok(const struct classify_rule *rule)
{
        if (rule->request != CLASSIFY_POST && rule->request != CLASSIFY_QUERY)
                return false;
        if (rule->status_lo < 100 || rule->status_hi > 599 || rule->status_lo > rule->status_hi)
                return false;
        if ((unsigned)rule->cls >= TG_CLASS_COUNT || !class_valid_for(rule->request, rule->cls))
                return false;
        if ((unsigned)rule->retryable > CLASSIFY_FLAG_TRUE)
                return false;
        return value_ok(rule->error_code, sizeof(rule->error_code)) &&
               value_ok(rule->body_status, sizeof(rule->body_status));
}

int classifier_new_default(struct classifier **ret_classifier)
{
        if (!ret_classifier)
                return TG_EINVAL;
        struct classifier *c = calloc(1, sizeof(*c));
        if (!c)
                return TG_ENOMEM;
        for (size_t i = 0; i < sizeof(default_rules) / sizeof(default_rules[0]); i++) {
                int r = classifier_add_rule(c, &default_rules[i]);
                /* The defaults are constants: failing here is a bug. */
                assert(r == 0);
                (void)r;
        }
        *ret_classifier = c;
        return 0;
}

void classifier_free(struct classifier *classifier)
{
        free(classifier);
}

int classifier_add_rule(struct classifier *classifier, const struct classify_rule *rule)
{
        if (!classifier || !rule || !rule_ok(rule))
                return TG_EINVAL;
        if (classifier->count >= CLASSIFIER_MAX_RULES)
                return TG_EFULL;
        classifier->rules[classifier->count++] = *rule;
        return 0;
}

/* want: "" any, "-" must be absent, else equal. Only a JSON body has
 * readable fields. */
static bool field_matches(const char *want, const char *have, bool body_is_json)
{
        if (want[0] == '\0')
                return true;
        if (strcmp(want, "-") == 0)
                return !body_is_json || have[0] == '\0';
        return body_is_json && strcmp(want, have) == 0;
}

/* The retryable mark, like the body fields, is read only from a reply whose
 * body parsed (a header mark counts as read too: src/net sets it only from
 * a complete response). */
static bool flag_matches(enum classify_want_flag want, enum tg_flag have)
{
        switch (want) {
        case CLASSIFY_FLAG_ANY:
                return true;
        case CLASSIFY_FLAG_ABSENT:
                return have == TG_FLAG_ABSENT;
        case CLASSIFY_FLAG_FALSE:
                return have == TG_FLAG_FALSE;
        case CLASSIFY_FLAG_TRUE:
                return have == TG_FLAG_TRUE;
        }
        return false;
}

static bool rule_matches(const struct classify_rule *rule, enum classify_request request,
                         const struct provider_reply *reply)
{
        if (rule->request != request)
                return false;
        if (reply->http_status < rule->status_lo || reply->http_status > rule->status_hi)
                return false;
        if (!flag_matches(rule->retryable, reply->retryable))
                return false;
        return field_matches(rule->error_code, reply->error_code, reply->body_is_json) &&
               field_matches(rule->body_status, reply->status, reply->body_is_json);
}

enum tg_class classify(const struct classifier *classifier, enum classify_request request,
                       const struct provider_reply *reply)
{
        assert(classifier);
        assert(reply);
        if (request != CLASSIFY_POST && request != CLASSIFY_QUERY)
                return TG_CLASS_UNKNOWN; /* never guess */
        enum tg_class fallback = request == CLASSIFY_POST ? TG_CLASS_UNKNOWN : TG_CLASS_NO_ANSWER;

        /* The transport result decides what the table cannot. */
        switch (reply->transport) {
        case TG_TR_COMPLETE:
                break;
        case TG_TR_NOT_SENT:
                return request == CLASSIFY_POST ? TG_CLASS_NOT_SENT : TG_CLASS_NO_ANSWER;
        case TG_TR_TIMEOUT_AFTER_SEND:
        case TG_TR_RESET:
        default:
                return fallback;
        }

        /* The reply's strings are trusted to be terminated only within their
         * arrays: a reply that is not is treated as an unreadable body. */
        struct provider_reply safe = *reply;
        safe.error_code[sizeof(safe.error_code) - 1] = '\0';
        safe.status[sizeof(safe.status) - 1] = '\0';
        if (!memchr(reply->error_code, '\0', sizeof(reply->error_code)) ||
            !memchr(reply->status, '\0', sizeof(reply->status)))
                safe.body_is_json = false;

        /* "This key is still in progress" (a 429 at Checkout.com) is not
         * "too many requests": the first request may execute. */
        if (reply->key_in_progress)
                return fallback;
        /* A list that does not hold ours says "not executed" only when it
         * is complete: a page of it says nothing. */
        if (request == CLASSIFY_QUERY && safe.body_is_json && reply->http_status / 100 == 2) {
                if (reply->list == REPLY_LIST_ABSENT)
                        return TG_CLASS_NOT_FOUND;
                if (reply->list == REPLY_LIST_PARTIAL)
                        return TG_CLASS_NO_ANSWER;
                if (reply->list == REPLY_LIST_NOT_YET)
                        return TG_CLASS_PROCESSING;
        }
        for (size_t i = classifier->count; i > 0; i--) {
                const struct classify_rule *rule = &classifier->rules[i - 1];
                if (rule_matches(rule, request, &safe))
                        return rule->cls;
        }
        return fallback;
}

void classify_copy_field(char *dst, size_t dst_size, const char *src, size_t src_len)
{
        if (!dst || dst_size == 0)
                return;
        size_t n = 0;
        if (src) {
                size_t max = src_len < dst_size - 1 ? src_len : dst_size - 1;
                const char *nul = memchr(src, '\0', max);
                n = nul ? (size_t)(nul - src) : max;
                memcpy(dst, src, n);
        }
        dst[n] = '\0';
}

/* --- rule parsing ----------------------------------------------------- */

struct token {
        const char *p;
        size_t len;
};

static bool is_space(char c)
{
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Splits at most max tokens; returns the count, or max + 1 if there are
 * more. */
static size_t split(const char *text, struct token *tokens, size_t max)
{
        size_t n = 0;
        const char *p = text;
        for (;;) {
                while (*p && is_space(*p))
                        p++;
                if (!*p)
                        return n;
                if (n == max)
                        return max + 1;
                tokens[n].p = p;
                while (*p && !is_space(*p))
                        p++;
                tokens[n].len = (size_t)(p - tokens[n].p);
                n++;
        }
}

static bool token_is(const struct token *t, const char *word)
{
        size_t len = strlen(word);
        return t->len == len && memcmp(t->p, word, len) == 0;
}

/* Exactly three digits, 100..599. */
static bool parse_status(const char *p, size_t len, int *ret_status)
{
        if (len != 3)
                return false;
        int v = 0;
        for (size_t i = 0; i < 3; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return false;
                v = v * 10 + (p[i] - '0');
        }
        if (v < 100 || v > 599)
                return false;
        *ret_status = v;
        return true;
}

static bool parse_status_range(const struct token *t, int *ret_lo, int *ret_hi)
{
        const char *dash = memchr(t->p, '-', t->len);
        int lo, hi;
        if (!dash) {
                if (!parse_status(t->p, t->len, &lo))
                        return false;
                hi = lo;
        } else {
                size_t left = (size_t)(dash - t->p);
                if (!parse_status(t->p, left, &lo) ||
                    !parse_status(dash + 1, t->len - left - 1, &hi) || lo > hi)
                        return false;
        }
        *ret_lo = lo;
        *ret_hi = hi;
        return true;
}

/* "key=value" with a non-empty value that fits dst (see value_ok). */
static bool parse_value(const struct token *t, const char *key, char *dst, size_t dst_size)
{
        size_t klen = strlen(key);
        size_t vlen = t->len - klen;
        /* Must fit with its terminator; value_ok() applies the tighter
         * bound. */
        if (vlen == 0 || vlen >= dst_size)
                return false;
        memcpy(dst, t->p + klen, vlen);
        dst[vlen] = '\0';
        return value_ok(dst, dst_size);
}

static bool has_prefix(const struct token *t, const char *prefix)
{
        size_t len = strlen(prefix);
        return t->len >= len && memcmp(t->p, prefix, len) == 0;
}

int classify_rule_parse(const char *text, struct classify_rule *ret_rule)
{
        /* request, range, code=, status=, retryable=, =>, class */
        struct token tokens[7];
        struct classify_rule rule = {0};

        if (!text || !ret_rule)
                return TG_EPARSE;
        if (strnlen(text, RULE_TEXT_MAX + 1) > RULE_TEXT_MAX)
                return TG_EPARSE;

        size_t n = split(text, tokens, 7);
        if (n < 4 || n > 7)
                return TG_EPARSE;

        if (token_is(&tokens[0], "post"))
                rule.request = CLASSIFY_POST;
        else if (token_is(&tokens[0], "query"))
                rule.request = CLASSIFY_QUERY;
        else
                return TG_EPARSE;
        if (!parse_status_range(&tokens[1], &rule.status_lo, &rule.status_hi))
                return TG_EPARSE;

        bool have_code = false, have_status = false, have_flag = false;
        size_t i = 2;
        for (; i < n - 2; i++) {
                if (has_prefix(&tokens[i], "code=") && !have_code) {
                        if (!parse_value(&tokens[i], "code=", rule.error_code,
                                         sizeof(rule.error_code)))
                                return TG_EPARSE;
                        have_code = true;
                } else if (has_prefix(&tokens[i], "status=") && !have_status) {
                        if (!parse_value(&tokens[i], "status=", rule.body_status,
                                         sizeof(rule.body_status)))
                                return TG_EPARSE;
                        have_status = true;
                } else if (has_prefix(&tokens[i], "retryable=") && !have_flag) {
                        if (token_is(&tokens[i], "retryable=true"))
                                rule.retryable = CLASSIFY_FLAG_TRUE;
                        else if (token_is(&tokens[i], "retryable=false"))
                                rule.retryable = CLASSIFY_FLAG_FALSE;
                        else if (token_is(&tokens[i], "retryable=-"))
                                rule.retryable = CLASSIFY_FLAG_ABSENT;
                        else
                                return TG_EPARSE;
                        have_flag = true;
                } else {
                        return TG_EPARSE;
                }
        }
        if (!token_is(&tokens[i], "=>"))
                return TG_EPARSE;

        const struct token *cls = &tokens[i + 1];
        char name[16];
        if (cls->len >= sizeof(name))
                return TG_EPARSE;
        memcpy(name, cls->p, cls->len);
        name[cls->len] = '\0';
        if (tg_class_parse(name, &rule.cls) != 0)
                return TG_EPARSE;

        if (!rule_ok(&rule))
                return TG_EPARSE;
        *ret_rule = rule;
        return 0;
}
