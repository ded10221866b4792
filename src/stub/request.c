/*
 * Validation of the stub's contract input. The POST /v1/refunds body is read
 * by jansson with the strictness of RFC 8259 plus two rules of ours: one
 * top-level object and no member name twice. The four contract fields are
 * then checked here, one rule and one static reason each.
 *
 * Invariants: never reads past body[len); the result is all or nothing
 * (*ret is written only on success); every json_t jansson builds is released
 * before returning; no I/O. jansson allocates while parsing (bounded by its
 * own nesting limit and by the body size the HTTP layer admits).
 */
#include "request.h"

#include "core/tg_error.h"

#include <jansson.h>
#include <string.h>

/*
 * JSON_REJECT_DUPLICATES: a name twice, at any depth, is a 400.
 * JSON_ALLOW_NUL: a \u0000 escape inside a string value is valid JSON, so it
 * parses and the field check below refuses it (422), as for any control
 * character; a NUL in a member name stays a parse error in jansson.
 * Not JSON_DISABLE_EOF_CHECK (trailing data is an error), not
 * JSON_DECODE_ANY (the root must be an object; checked before and after),
 * and JSON_DECODE_INT_AS_REAL only to tell an over-long integer from bad
 * syntax (amount must stay a JSON integer).
 */
#define LOAD_FLAGS (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)

bool stub_key_valid(const char *key, size_t len)
{
        if (len == 0 || len > STUB_KEY_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)key[i];
                bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                          (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' || c == '-';
                if (!ok)
                        return false;
        }
        return true;
}

/* True when the first byte after JSON whitespace opens an object. */
static bool starts_object(const char *body, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                char ch = body[i];
                if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
                        return ch == '{';
        }
        return false;
}

/*
 * Our reason for a body jansson refused. Syntax errors are told apart by the
 * start of jansson's own message; a wording jansson changes falls back to the
 * generic reason, never to a different status.
 */
static int load_error(const json_error_t *err, const char **why)
{
        static const struct {
                const char *jansson;
                const char *ours;
        } syntax[] = {
            {"string or '}' expected", "malformed JSON: member name"},
            {"':' expected", "malformed JSON: expected ':'"},
            {"'}' expected", "malformed JSON: expected ',' or '}'"},
        };

        switch (json_error_code(err)) {
        case json_error_out_of_memory:
                *why = "out of memory";
                return TG_ENOMEM;
        case json_error_numeric_overflow:
                /* Even as a double: no reading of the body gets past it. */
                *why = "malformed JSON: number out of range";
                return TG_EPARSE;
        case json_error_end_of_input_expected:
                *why = "malformed JSON: trailing data";
                return TG_EPARSE;
        case json_error_duplicate_key:
                *why = "duplicate field";
                return TG_EPARSE;
        case json_error_null_byte_in_key:
                *why = "malformed JSON: member name";
                return TG_EPARSE;
        default:
                break;
        }
        *why = "malformed JSON: value";
        for (size_t i = 0; i < sizeof(syntax) / sizeof(syntax[0]); i++) {
                size_t n = strlen(syntax[i].jansson);
                if (strncmp(err->text, syntax[i].jansson, n) == 0)
                        *why = syntax[i].ours;
        }
        return TG_EPARSE;
}

/* The string value of v and its length in bytes, or NULL if v is no string. */
static const char *string_of(const json_t *v, size_t *ret_len)
{
        if (!json_is_string(v))
                return NULL;
        *ret_len = json_string_length(v);
        return json_string_value(v);
}

/* 1..max bytes, none of them a control character (so no NUL either). */
static bool text_ok(const char *s, size_t len, size_t max)
{
        if (!s || len == 0 || len > max)
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)s[i];
                if (ch < 0x20 || ch == 0x7f)
                        return false;
        }
        return true;
}

/* The checks on a parsed object; fills *ret only when all pass. */
static int check_fields(const json_t *root, const char **why, struct stub_refund *ret)
{
        const json_t *op_v = json_object_get(root, "operation_id");
        const json_t *pay_v = json_object_get(root, "payment_id");
        const json_t *amount_v = json_object_get(root, "amount");
        const json_t *cur_v = json_object_get(root, "currency");
        size_t op_len = 0, pay_len = 0, cur_len = 0;
        const char *op = string_of(op_v, &op_len);
        const char *pay = string_of(pay_v, &pay_len);
        const char *cur = string_of(cur_v, &cur_len);
        json_int_t amount;

        if (!op_v || !pay_v || !amount_v || !cur_v) {
                *why = "missing field";
                return TG_EINVAL;
        }
        /* stub_key_valid() admits no NUL, so strlen(op) == op_len below. */
        if (!op || !stub_key_valid(op, op_len)) {
                *why = "operation_id must be 1-128 chars of [A-Za-z0-9._:-]";
                return TG_EINVAL;
        }
        if (!text_ok(pay, pay_len, STUB_FIELD_MAX)) {
                *why = "payment_id must be a string of 1-128 printable bytes";
                return TG_EINVAL;
        }
        /* A JSON integer only: jansson makes 1500.0 and 15e2 a json_real. */
        amount = json_is_integer(amount_v) ? json_integer_value(amount_v) : 0;
        if (amount <= 0 || amount > STUB_AMOUNT_MAX) {
                *why = "amount must be a positive integer in minor units";
                return TG_EINVAL;
        }
        if (!cur || cur_len != 3 ||
            !(cur[0] >= 'A' && cur[0] <= 'Z' && cur[1] >= 'A' && cur[1] <= 'Z' && cur[2] >= 'A' &&
              cur[2] <= 'Z')) {
                *why = "currency must be three upper-case letters";
                return TG_EINVAL;
        }

        memcpy(ret->operation_id, op, op_len);
        ret->operation_id[op_len] = '\0';
        memcpy(ret->payment_id, pay, pay_len);
        ret->payment_id[pay_len] = '\0';
        ret->amount = (int64_t)amount;
        memcpy(ret->currency, cur, 3);
        ret->currency[3] = '\0';
        return 0;
}

int stub_parse_refund_request(const char *body, size_t len, const char **why,
                              struct stub_refund *ret)
{
        const char *dummy;
        json_error_t err;
        json_t *root;
        int rc;

        if (!why)
                why = &dummy;
        if (!body && len > 0) {
                *why = "no body";
                return TG_EINVAL;
        }
        if (!body || !starts_object(body, len)) {
                *why = "body is not a JSON object";
                return TG_EPARSE;
        }
        /*
         * A raw NUL byte is never valid JSON, but jansson 2.14's json_loadb()
         * skips one that follows a number or a literal ({"amount":1\0} loads),
         * so it is refused here before jansson sees the body.
         */
        if (memchr(body, '\0', len)) {
                *why = "malformed JSON: NUL byte";
                return TG_EPARSE;
        }
        root = json_loadb(body, len, LOAD_FLAGS, &err);
        if (!root && json_error_code(&err) == json_error_numeric_overflow) {
                /*
                 * jansson stops at the first integer beyond int64, before it
                 * has read the rest. Read again with integers as doubles: if
                 * that loads, the body is valid JSON with a number out of
                 * range (422, as for any out-of-range amount); if not, it is
                 * malformed (400) for the reason the second read gives.
                 */
                root = json_loadb(body, len, LOAD_FLAGS | JSON_DECODE_INT_AS_REAL, &err);
                if (root) {
                        json_decref(root);
                        *why = "number out of range; amount must be a positive integer in "
                               "minor units";
                        return TG_EINVAL;
                }
        }
        if (!root)
                return load_error(&err, why);
        if (json_is_object(root)) {
                rc = check_fields(root, why, ret);
        } else {
                *why = "body is not a JSON object";
                rc = TG_EPARSE;
        }
        json_decref(root);
        return rc;
}

int stub_parse_query_path(const char *path, char ret_operation_id[STUB_KEY_MAX + 1])
{
        size_t plen = strlen(STUB_QUERY_PREFIX);
        size_t n;
        if (!path || strncmp(path, STUB_QUERY_PREFIX, plen) != 0)
                return TG_ENOTFOUND;
        path += plen;
        n = strlen(path);
        if (n == 0 || memchr(path, '/', n))
                return TG_ENOTFOUND;
        if (!stub_key_valid(path, n))
                return TG_EINVAL;
        memcpy(ret_operation_id, path, n + 1);
        return 0;
}
