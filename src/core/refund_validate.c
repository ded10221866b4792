/*
 * refund_validate — the shape rules of a refund request (see the header for
 * the rules). Pure: no allocation, no locale (character classes are spelled
 * out as ASCII ranges so that setlocale() can never widen them).
 */
#include "core/refund_validate.h"

#include <stdbool.h>
#include <string.h>

#include "core/encode.h"
#include "core/operation.h"

#include "core/tg_error.h"

static int refuse(struct refund_problem *problem, const char *field, const char *message)
{
        if (problem) {
                problem->field = field;
                problem->message = message;
        }
        return TG_EINVAL;
}

static bool is_key_char(unsigned char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == ':' || c == '-';
}

int refund_validate_operation_id(const char *s, size_t len, struct refund_problem *problem)
{
        static const char field[] = "operation_id";

        if (!s || len == 0)
                return refuse(problem, field, "must not be empty");
        if (len > REFUND_OPERATION_ID_MAX)
                return refuse(problem, field, "must be at most 128 characters");
        for (size_t i = 0; i < len; i++) {
                if (!is_key_char((unsigned char)s[i]))
                        return refuse(problem, field, "may contain only A-Z a-z 0-9 and . _ : -");
        }
        if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
                return refuse(problem, field, "must not be \".\" or \"..\"");
        return 0;
}

int refund_validate_payment_id(const char *s, size_t len, struct refund_problem *problem)
{
        static const char field[] = "payment_id";

        if (!s || len == 0)
                return refuse(problem, field, "must not be empty");
        if (len > REFUND_PAYMENT_ID_MAX)
                return refuse(problem, field, "must be at most 128 characters");
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c < 0x21 || c > 0x7e)
                        return refuse(problem, field,
                                      "may contain only printable ASCII without spaces");
        }
        return 0;
}

int refund_validate_amount(int64_t amount, struct refund_problem *problem)
{
        if (amount <= 0)
                return refuse(problem, "amount", "must be a positive integer in minor units");
        return 0;
}

int refund_validate_currency(const char *s, size_t len, struct refund_problem *problem)
{
        if (!s || len != REFUND_CURRENCY_LEN)
                return refuse(problem, "currency", "must be 3 uppercase letters (ISO 4217)");
        for (size_t i = 0; i < len; i++) {
                if (s[i] < 'A' || s[i] > 'Z')
                        return refuse(problem, "currency",
                                      "must be 3 uppercase letters (ISO 4217)");
        }
        return 0;
}

int refund_validate(const struct refund_fields *fields, struct refund_problem *problem)
{
        int r;

        if (!fields)
                return refuse(problem, "", "no request");
        r = refund_validate_operation_id(fields->operation_id, fields->operation_id_len, problem);
        if (r < 0)
                return r;
        r = refund_validate_payment_id(fields->payment_id, fields->payment_id_len, problem);
        if (r < 0)
                return r;
        r = refund_validate_amount(fields->amount, problem);
        if (r < 0)
                return r;
        return refund_validate_currency(fields->currency, fields->currency_len, problem);
}

int refund_validate_reason(const char *s, size_t len, struct refund_problem *problem)
{
        if (len > REFUND_REASON_MAX)
                return refuse(problem, "reason", "must be at most 200 bytes");
        if (len > 0 && (!s || !encode_utf8_text_ok(s, len)))
                return refuse(problem, "reason", "must be UTF-8 text without control characters");
        return 0;
}

int refund_validate_metadata_key(const char *s, size_t len, struct refund_problem *problem)
{
        if (!s || len == 0 || len > REFUND_METADATA_KEY_MAX)
                return refuse(problem, "metadata", "a key must be 1-40 characters");
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '-'))
                        return refuse(problem, "metadata",
                                      "a key may contain only A-Z a-z 0-9 and _ . -");
        }
        return 0;
}

int refund_validate_metadata_value(const char *s, size_t len, struct refund_problem *problem)
{
        if (len > REFUND_METADATA_VAL_MAX)
                return refuse(problem, "metadata", "a value must be at most 200 bytes");
        if (len > 0 && (!s || !encode_utf8_text_ok(s, len)))
                return refuse(problem, "metadata",
                              "a value must be UTF-8 text without control characters");
        return 0;
}

int refund_metadata_add(struct refund_metadata *md, const char *key, size_t key_len,
                        const char *value, size_t value_len, struct refund_problem *problem)
{
        unsigned at;
        int r = refund_validate_metadata_key(key, key_len, problem);

        if (r == 0)
                r = refund_validate_metadata_value(value, value_len, problem);
        if (r < 0)
                return r;
        if (md->n >= REFUND_METADATA_PAIRS)
                return refuse(problem, "metadata", "at most 10 keys");
        for (at = 0; at < md->n; at++) {
                int c = strncmp(md->pairs[at].key, key, key_len);
                if (c == 0 && md->pairs[at].key[key_len] == '\0')
                        return refuse(problem, "metadata", "a key is given twice");
                if (c > 0 || (c == 0 && md->pairs[at].key[key_len] != '\0'))
                        break;
        }
        memmove(&md->pairs[at + 1], &md->pairs[at], (md->n - at) * sizeof(md->pairs[0]));
        memcpy(md->pairs[at].key, key, key_len);
        md->pairs[at].key[key_len] = '\0';
        if (value_len > 0)
                memcpy(md->pairs[at].value, value, value_len);
        md->pairs[at].value[value_len] = '\0';
        md->n++;
        return 0;
}

const char *refund_metadata_get(const struct refund_metadata *md, const char *key)
{
        for (unsigned i = 0; i < md->n; i++)
                if (strcmp(md->pairs[i].key, key) == 0)
                        return md->pairs[i].value;
        return "";
}

bool refund_account_name_ok(const char *name)
{
        size_t n = name ? strnlen(name, TG_ACCOUNT_NAME_MAX + 1) : 0;

        if (n == 0 || n > TG_ACCOUNT_NAME_MAX)
                return false;
        return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}
