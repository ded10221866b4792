/*
 * The stripe shape's parsing and bodies (see shape.h). Invariants: a
 * form is read whole or refused (no parameter twice, none unknown); values
 * are percent-decoded into bounded buffers; *ret is written on success only.
 */
#include "shape.h"

#include "core/encode.h"
#include "core/tg_error.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_MAX    500
#define METADATA_MAX 50

int stub_shape_parse(const char *name, enum stub_shape *ret)
{
        if (strcmp(name, "provider-md") == 0)
                *ret = STUB_SHAPE_PROVIDER_MD;
        else if (strcmp(name, "stripe") == 0)
                *ret = STUB_SHAPE_STRIPE;
        else if (strcmp(name, "checkout") == 0)
                *ret = STUB_SHAPE_CHECKOUT;
        else if (strcmp(name, "adyen") == 0)
                *ret = STUB_SHAPE_ADYEN;
        else if (strcmp(name, "paypal") == 0)
                *ret = STUB_SHAPE_PAYPAL;
        else
                return TG_EINVAL;
        return 0;
}

const char *stub_shape_name(enum stub_shape shape)
{
        return shape == STUB_SHAPE_STRIPE     ? "stripe"
               : shape == STUB_SHAPE_CHECKOUT ? "checkout"
               : shape == STUB_SHAPE_ADYEN    ? "adyen"
               : shape == STUB_SHAPE_PAYPAL   ? "paypal"
                                              : "provider-md";
}

const char *stub_shape_key_header(enum stub_shape shape)
{
        return shape == STUB_SHAPE_CHECKOUT ? "Cko-Idempotency-Key"
               : shape == STUB_SHAPE_PAYPAL ? "PayPal-Request-Id"
                                            : "Idempotency-Key";
}

bool stub_id_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
}

int stub_copy_id(const char *id, size_t n, char ret[STUB_FIELD_MAX + 1])
{
        if (n == 0 || n > STUB_FIELD_MAX)
                return TG_ENOTFOUND;
        for (size_t i = 0; i < n; i++)
                if (!stub_id_char(id[i]))
                        return TG_ENOTFOUND;
        memcpy(ret, id, n);
        ret[n] = '\0';
        return 0;
}

bool stub_json_text(json_t *v, size_t max)
{
        return json_is_string(v) && json_string_length(v) > 0 && json_string_length(v) <= max &&
               strlen(json_string_value(v)) == json_string_length(v);
}

int stub_checkout_path(const char *path, char ret_payment[STUB_FIELD_MAX + 1], bool *ret_actions)
{
        static const char prefix[] = "/payments/";
        const char *id = path + sizeof(prefix) - 1, *slash;
        bool actions;

        if (strncmp(path, prefix, sizeof(prefix) - 1) != 0 || !(slash = strchr(id, '/')))
                return TG_ENOTFOUND;
        if (strcmp(slash, "/refunds") == 0)
                actions = false;
        else if (strcmp(slash, "/actions") == 0)
                actions = true;
        else
                return TG_ENOTFOUND;
        if (stub_copy_id(id, (size_t)(slash - id), ret_payment) < 0)
                return TG_ENOTFOUND;
        *ret_actions = actions;
        return 0;
}

int stub_parse_checkout_refund(const char *body, size_t len, const char *key, const char *payment,
                               const char **ret_code, struct stub_refund *ret)
{
        struct stub_refund r;
        json_error_t error;
        json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &error), *v;
        const char *name;

        memset(&r, 0, sizeof(r));
        snprintf(r.operation_id, sizeof(r.operation_id), "%s", key);
        snprintf(r.payment_id, sizeof(r.payment_id), "%s", payment);
        *ret_code = "request_invalid";
        if (!json_is_object(o)) {
                json_decref(o);
                return TG_EINVAL;
        }
        json_object_foreach(o, name, v)
        {
                if (strcmp(name, "amount") == 0) {
                        json_int_t a = json_is_integer(v) ? json_integer_value(v) : -1;
                        if (a <= 0 || a > STUB_AMOUNT_MAX) {
                                *ret_code = "amount_invalid";
                                goto bad;
                        }
                        r.amount = (int64_t)a;
                } else if (strcmp(name, "reference") == 0) {
                        if (!json_is_string(v) || json_string_length(v) == 0 ||
                            json_string_length(v) > STUB_FIELD_MAX) {
                                *ret_code = "reference_invalid";
                                goto bad;
                        }
                        memcpy(r.reference, json_string_value(v), json_string_length(v) + 1);
                } else if (strcmp(name, "metadata") == 0) {
                        if (!json_is_object(v)) {
                                *ret_code = "metadata_invalid";
                                goto bad;
                        }
                } else {
                        /* amount_allocations, capture_action_id, items, ...: not played */
                        *ret_code = "request_invalid";
                        goto bad;
                }
        }
        json_decref(o);
        *ret = r;
        return 0;
bad:
        json_decref(o);
        return TG_EINVAL;
}

char *stub_json_dump(json_t *o)
{
        char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        return text;
}

char *stub_checkout_accepted(const char *action_id, const struct stub_refund *req)
{
        char href[STUB_FIELD_MAX + 32];

        snprintf(href, sizeof(href), "/payments/%s", req->payment_id);
        json_t *o = json_pack("{s:s}", "action_id", action_id);
        if (o && req->reference[0])
                json_object_set_new(o, "reference", json_string(req->reference));
        if (o)
                json_object_set_new(o, "_links", json_pack("{s:{s:s}}", "payment", "href", href));
        return stub_json_dump(o);
}

char *stub_checkout_action(const char *action_id, const struct stub_refund *req, bool approved,
                           const char *failure_code)
{
        json_t *o = json_pack("{s:s, s:s, s:I, s:b, s:s, s:s}", "id", action_id, "type", "Refund",
                              "amount", (json_int_t)req->amount, "approved", approved,
                              "response_code", approved ? "10000" : failure_code,
                              "response_summary", approved ? "Approved" : "Declined");
        if (o && req->reference[0])
                json_object_set_new(o, "reference", json_string(req->reference));
        return stub_json_dump(o);
}

char *stub_checkout_error(const char *error_type, const char *code)
{
        json_t *o =
            json_pack("{s:s, s:s}", "request_id", "0HL80RJLS76I7", "error_type", error_type);
        if (o && code)
                json_object_set_new(o, "error_codes", json_pack("[s]", code));
        return stub_json_dump(o);
}

/* Decodes src[0..len) ('+' is a space, %XX a byte) into dst[size]; false
 * when malformed or too long. */
static bool decode(const char *src, size_t len, char *dst, size_t size, size_t *ret_len)
{
        return encode_percent_decode(ENCODE_FORM, src, len, dst, size, ret_len) == 0;
}

static bool printable(const char *s, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
                        return false;
        return len > 0;
}

int stub_parse_refund_form(const char *body, size_t len, const char *key, const char **why,
                           const char **ret_param, struct stub_refund *ret)
{
        struct stub_refund r;
        bool have_pi = false, have_amount = false, have_currency = false, have_reason = false;
        unsigned metadata = 0;
        size_t i = 0;

        *ret_param = NULL;
        memset(&r, 0, sizeof(r));
        snprintf(r.operation_id, sizeof(r.operation_id), "%s", key);
        while (i < len) {
                const char *pair = body + i, *amp = memchr(pair, '&', len - i), *eq;
                size_t plen = amp ? (size_t)(amp - pair) : len - i;
                char name[64], value[VALUE_MAX + 1];
                size_t nlen, vlen;

                i += plen + 1;
                if (plen == 0)
                        continue;
                eq = memchr(pair, '=', plen);
                if (!eq || !decode(pair, (size_t)(eq - pair), name, sizeof(name), &nlen) ||
                    !decode(eq + 1, plen - (size_t)(eq - pair) - 1, value, sizeof(value), &vlen)) {
                        *why = "malformed form body";
                        return TG_EINVAL;
                }
                if (strcmp(name, "payment_intent") == 0 && !have_pi) {
                        if (!printable(value, vlen) || vlen > STUB_FIELD_MAX) {
                                *ret_param = "payment_intent";
                                *why = "payment_intent must be 1-128 printable characters";
                                return TG_EINVAL;
                        }
                        memcpy(r.payment_id, value, vlen + 1);
                        have_pi = true;
                } else if (strcmp(name, "amount") == 0 && !have_amount) {
                        int64_t a = 0;
                        for (size_t k = 0; k < vlen; k++) {
                                if (value[k] < '0' || value[k] > '9' || a > STUB_AMOUNT_MAX) {
                                        a = -1;
                                        break;
                                }
                                a = a * 10 + (value[k] - '0');
                        }
                        if (vlen == 0 || a <= 0 || a > STUB_AMOUNT_MAX) {
                                *ret_param = "amount";
                                *why = "amount must be a positive integer in minor units";
                                return TG_EINVAL;
                        }
                        r.amount = a;
                        have_amount = true;
                } else if (strcmp(name, "currency") == 0 && !have_currency) {
                        if (vlen != 3) {
                                *ret_param = "currency";
                                *why = "currency must be a three-letter ISO code";
                                return TG_EINVAL;
                        }
                        for (size_t k = 0; k < 3; k++) {
                                char c = value[k];
                                if (c >= 'a' && c <= 'z')
                                        c = (char)(c - 'a' + 'A');
                                if (c < 'A' || c > 'Z') {
                                        *ret_param = "currency";
                                        *why = "currency must be a three-letter ISO code";
                                        return TG_EINVAL;
                                }
                                r.currency[k] = c;
                        }
                        have_currency = true;
                } else if (strcmp(name, "reason") == 0 && !have_reason) {
                        have_reason = true; /* free text here, bounded by the decoder */
                } else if (strncmp(name, "metadata[", 9) == 0 && nlen > 10 &&
                           name[nlen - 1] == ']') {
                        if (++metadata > METADATA_MAX) {
                                *ret_param = "metadata";
                                *why = "at most 50 metadata keys";
                                return TG_EINVAL;
                        }
                } else {
                        *why = "a parameter is unknown or given twice";
                        return TG_EINVAL;
                }
        }
        if (!have_pi || !have_amount) {
                *ret_param = !have_pi ? "payment_intent" : "amount";
                *why = !have_pi ? "missing required param: payment_intent"
                                : "missing required param: amount";
                return TG_EINVAL;
        }
        *ret = r;
        return 0;
}

static void lower3(const char *in, char out[4])
{
        for (int k = 0; k < 3 && in[k]; k++)
                out[k] = in[k] >= 'A' && in[k] <= 'Z' ? (char)(in[k] - 'A' + 'a') : in[k];
        out[3] = '\0';
}

char *stub_stripe_refund(const char *refund_id, const struct stub_refund *req, const char *status,
                         const char *failure_reason)
{
        char cur[4] = "";
        json_t *o;
        char *text;

        lower3(req->currency, cur);
        o = json_pack("{s:o, s:s, s:I, s:s, s:s, s:s}", "id",
                      refund_id && refund_id[0] ? json_string(refund_id) : json_null(), "object",
                      "refund", "amount", (json_int_t)req->amount, "currency", cur,
                      "payment_intent", req->payment_id, "status", status);
        if (!o)
                return NULL;
        if (failure_reason)
                json_object_set_new(o, "failure_reason", json_string(failure_reason));
        json_object_set_new(o, "metadata", json_pack("{s:s}", "operation_id", req->operation_id));
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        return text;
}

char *stub_stripe_error(const char *type, const char *code, const char *message)
{
        json_t *e = json_pack("{s:s}", "type", type), *o;
        char *text;

        if (!e)
                return NULL;
        if (code)
                json_object_set_new(e, "code", json_string(code));
        json_object_set_new(e, "message", json_string(message));
        o = json_pack("{s:o}", "error", e);
        text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        return text;
}
