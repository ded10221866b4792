/*
 * The paypal shape's paths, parsing and bodies (see shape.h). Invariants: a
 * body is read whole or refused, one detail naming the field at fault;
 * *ret is written on success only; an amount is taken only as a decimal
 * string with no more places than the currency has at PayPal, and kept in
 * ISO 4217 minor units (core/currency.c, the one table).
 */
#include "shape.h"

#include "core/currency.h"
#include "core/encode.h"
#include "core/tg_error.h"
#include "platform/digest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAYPAL_TEXT_MAX 127 /* invoice_id, custom_id */
#define PAYPAL_NOTE_MAX 255 /* note_to_payer */
#define PAYPAL_API      "https://api.paypal.com"

/* An id 1-128 of [A-Za-z0-9_-] at id, then rest and the path's end. */
static int copy_id(const char *id, const char *rest, char ret[STUB_FIELD_MAX + 1])
{
        size_t n = strlen(id), rn = strlen(rest);

        if (n <= rn || strcmp(id + n - rn, rest) != 0)
                return TG_ENOTFOUND;
        return stub_copy_id(id, n - rn, ret);
}

int stub_paypal_path(const char *path, char ret_id[STUB_FIELD_MAX + 1], bool *ret_query)
{
        static const char captures[] = "/v2/payments/captures/",
                          refunds[] = "/v2/payments/refunds/";

        if (strncmp(path, captures, sizeof(captures) - 1) == 0) {
                *ret_query = false;
                return copy_id(path + sizeof(captures) - 1, "/refund", ret_id);
        }
        if (strncmp(path, refunds, sizeof(refunds) - 1) == 0) {
                *ret_query = true;
                return copy_id(path + sizeof(refunds) - 1, "", ret_id);
        }
        return TG_ENOTFOUND;
}

/* PayPal's places for code: ISO 4217's, but none for HUF, JPY and TWD
 * (PayPal's currency codes). TG_ENOTFOUND for a code not in the table. */
static int paypal_places(const char *code, unsigned *ret_places, unsigned *ret_iso)
{
        if (currency_exponent(code, ret_iso) < 0)
                return TG_ENOTFOUND;
        *ret_places = strcmp(code, "HUF") == 0 || strcmp(code, "TWD") == 0 ? 0 : *ret_iso;
        return 0;
}

/* value: the reference's pattern (digits, or digits and a point and
 * digits), positive, no more places than PayPal takes in the currency
 * (trailing zeros beyond them are no fraction: "15.00" TWD is 15); into
 * ISO minor units. 0, or TG_EINVAL with the issue and the status. */
static int decimal_amount(const char *v, const char *code, int64_t *ret_minor, const char **issue,
                          int *status)
{
        unsigned places, iso, frac = 0;
        const char *point = strchr(v, '.');
        size_t whole = point ? (size_t)(point - v) : strlen(v);
        int64_t minor = 0;

        *status = 400;
        *issue = "INVALID_PARAMETER_SYNTAX";
        if ((whole == 0 && !point) || (point && !point[1]))
                return TG_EINVAL;
        for (size_t i = 0; i < whole; i++)
                if (v[i] < '0' || v[i] > '9')
                        return TG_EINVAL;
        for (const char *p = point ? point + 1 : ""; *p; p++)
                if (*p < '0' || *p > '9')
                        return TG_EINVAL;
        *status = 422;
        if (paypal_places(code, &places, &iso) < 0) {
                *issue = "CURRENCY_NOT_SUPPORTED";
                return TG_EINVAL;
        }
        for (size_t i = 0; i < whole; i++) {
                if (minor > STUB_AMOUNT_MAX / 10) {
                        *issue = "INVALID_PARAMETER_VALUE";
                        return TG_EINVAL;
                }
                minor = minor * 10 + (v[i] - '0');
        }
        if (point) {
                const char *f = point + 1;
                size_t n = strlen(f);
                for (size_t i = places; i < n; i++) {
                        if (f[i] != '0') {
                                *issue =
                                    places == 0 ? "DECIMALS_NOT_SUPPORTED" : "DECIMAL_PRECISION";
                                return TG_EINVAL;
                        }
                }
                for (unsigned i = 0; i < iso; i++, frac++)
                        minor = minor * 10 + (i < n ? f[i] - '0' : 0);
        }
        for (; frac < iso; frac++)
                minor *= 10;
        if (minor <= 0 || minor > STUB_AMOUNT_MAX) {
                *issue = "INVALID_PARAMETER_VALUE";
                return TG_EINVAL;
        }
        *ret_minor = minor;
        return 0;
}

int stub_parse_paypal_refund(const char *body, size_t len, const char *key, const char *capture,
                             int *ret_status, const char **ret_issue, const char **ret_field,
                             const char **ret_message, struct stub_refund *ret)
{
        struct stub_refund r;
        json_error_t error;
        json_t *o = len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &error) : json_object();
        json_t *amount, *value, *code, *v;

        memset(&r, 0, sizeof(r));
        snprintf(r.operation_id, sizeof(r.operation_id), "%s", key);
        snprintf(r.payment_id, sizeof(r.payment_id), "%s", capture);
        *ret_status = 400;
        *ret_field = NULL;
        *ret_issue = "MALFORMED_REQUEST_JSON";
        *ret_message = "the request body is not a JSON object";
        if (!json_is_object(o))
                goto bad;
        *ret_issue = "INVALID_PARAMETER_SYNTAX";
        amount = json_object_get(o, "amount");
        if (amount) {
                value = json_object_get(amount, "value");
                code = json_object_get(amount, "currency_code");
                *ret_field = "/amount";
                *ret_message = "amount must be an object";
                if (!json_is_object(amount))
                        goto bad;
                *ret_issue = "MISSING_REQUIRED_PARAMETER";
                *ret_field = !code ? "/amount/currency_code" : "/amount/value";
                *ret_message = "a required field is missing";
                if (!value || !code)
                        goto bad;
                *ret_issue = "INVALID_PARAMETER_SYNTAX";
                *ret_field = "/amount/currency_code";
                *ret_message = "currency_code must be three letters";
                if (!json_is_string(code) || json_string_length(code) != 3)
                        goto bad;
                memcpy(r.currency, json_string_value(code), 4);
                for (int i = 0; i < 3; i++)
                        if (r.currency[i] < 'A' || r.currency[i] > 'Z')
                                goto bad;
                *ret_field = "/amount/value";
                *ret_message = "value must be a positive decimal string in the currency's places";
                if (!json_is_string(value) || json_string_length(value) > 32 ||
                    decimal_amount(json_string_value(value), r.currency, &r.amount, ret_issue,
                                   ret_status) < 0)
                        goto bad;
                if (strcmp(*ret_issue, "CURRENCY_NOT_SUPPORTED") == 0)
                        *ret_field = "/amount/currency_code";
        }
        *ret_status = 400;
        *ret_issue = "INVALID_STRING_LENGTH";
        if ((v = json_object_get(o, "invoice_id"))) {
                *ret_field = "/invoice_id";
                *ret_message = "invoice_id must be a string of 1-127 characters";
                if (!stub_json_text(v, PAYPAL_TEXT_MAX))
                        goto bad;
                memcpy(r.reference, json_string_value(v), json_string_length(v) + 1);
        }
        if ((v = json_object_get(o, "custom_id"))) {
                *ret_field = "/custom_id";
                *ret_message = "custom_id must be a string of 1-127 characters";
                if (!stub_json_text(v, PAYPAL_TEXT_MAX))
                        goto bad;
                memcpy(r.custom_id, json_string_value(v), json_string_length(v) + 1);
        }
        if ((v = json_object_get(o, "note_to_payer"))) {
                *ret_field = "/note_to_payer";
                *ret_message = "note_to_payer must be a string of 1-255 characters";
                if (!stub_json_text(v, PAYPAL_NOTE_MAX))
                        goto bad;
        }
        json_decref(o);
        *ret = r;
        return 0;
bad:
        json_decref(o);
        return TG_EINVAL;
}

char *stub_paypal_refund(const char *refund_id, const struct stub_refund *req, const char *status,
                         const char *reason)
{
        char value[CURRENCY_DECIMAL_MAX], self[STUB_FIELD_MAX + 64], up[STUB_FIELD_MAX + 64];
        json_t *o = json_pack("{s:s}", "id", refund_id);
        unsigned places, iso;
        char *point;

        if (!o)
                return NULL;
        if (req->currency[0] && paypal_places(req->currency, &places, &iso) == 0 &&
            currency_decimal(req->amount, req->currency, value, sizeof(value)) == 0) {
                /* in PayPal's places: "15" TWD (its fraction is zero) */
                if (places == 0 && (point = strchr(value, '.')))
                        *point = '\0';
                json_object_set_new(
                    o, "amount",
                    json_pack("{s:s, s:s}", "currency_code", req->currency, "value", value));
        }
        if (req->reference[0])
                json_object_set_new(o, "invoice_id", json_string(req->reference));
        if (req->custom_id[0])
                json_object_set_new(o, "custom_id", json_string(req->custom_id));
        json_object_set_new(o, "status", json_string(status));
        if (reason)
                json_object_set_new(o, "status_details", json_pack("{s:s}", "reason", reason));
        snprintf(self, sizeof(self), PAYPAL_API "/v2/payments/refunds/%s", refund_id);
        snprintf(up, sizeof(up), PAYPAL_API "/v2/payments/captures/%s", req->payment_id);
        json_object_set_new(o, "links",
                            json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}]", "href", self, "rel",
                                      "self", "method", "GET", "href", up, "rel", "up", "method",
                                      "GET"));
        return stub_json_dump(o);
}

char *stub_paypal_error(int status, const char *issue, const char *field, const char *description,
                        unsigned long long debug_id)
{
        static const struct {
                int status;
                const char *name, *message;
        } names[] = {
            {400, "INVALID_REQUEST",
             "Request is not well-formed, syntactically incorrect, or violates schema."},
            {401, "AUTHENTICATION_FAILURE",
             "Authentication failed due to missing authorization header, or invalid "
             "authentication credentials."},
            {403, "NOT_AUTHORIZED", "Authorization failed due to insufficient permissions."},
            {404, "RESOURCE_NOT_FOUND", "The specified resource does not exist."},
            {405, "METHOD_NOT_SUPPORTED",
             "The server does not implement the requested HTTP method."},
            {409, "RESOURCE_CONFLICT",
             "The server has detected a conflict while processing this "
             "request."},
            {413, "INVALID_REQUEST", "The request body is too large."},
            {415, "UNSUPPORTED_MEDIA_TYPE",
             "The server does not support the request payload's "
             "media type."},
            {422, "UNPROCESSABLE_ENTITY",
             "The requested action could not be performed, "
             "semantically incorrect, or failed business validation."},
            {429, "RATE_LIMIT_REACHED", "Too many requests. Blocked due to rate limiting."},
            {503, "SERVICE_UNAVAILABLE", "Service Unavailable."},
        };
        const char *name = "INTERNAL_SERVER_ERROR", *message = "An internal server error occurred.";
        char debug[20];
        json_t *o;

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                if (names[i].status == status) {
                        name = names[i].name;
                        message = names[i].message;
                }
        }
        snprintf(debug, sizeof(debug), "%013llx", debug_id & 0xfffffffffffffULL);
        o = json_pack("{s:s, s:s, s:s}", "name", name, "message", message, "debug_id", debug);
        if (o && issue) {
                json_t *d = json_pack("{s:s}", "issue", issue);
                if (d && field)
                        json_object_set_new(d, "field", json_string(field));
                if (d && description)
                        json_object_set_new(d, "description", json_string(description));
                json_object_set_new(o, "details", json_pack("[o]", d));
        }
        if (o)
                json_object_set_new(o, "links",
                                    json_pack("[{s:s, s:s}]", "href",
                                              "https://developer.paypal.com/api/rest/responses/",
                                              "rel", "information_link"));
        return stub_json_dump(o);
}

char *stub_paypal_token(const char *token, long long expires_in)
{
        return stub_json_dump(
            json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "scope",
                      "https://uri.paypal.com/services/payments/refund", "access_token", token,
                      "token_type", "Bearer", "app_id", "APP-80W284485P519543T", "expires_in",
                      (json_int_t)expires_in, "nonce", "2026-12-05T00:00:00Zstub"));
}

bool stub_paypal_basic_ok(const char *authz, const char *id, const char *secret)
{
        char pair[1200], want[1700];
        struct tg_strbuf sb;
        bool ok;
        int n;

        if (!authz || strncmp(authz, "Basic ", 6) != 0 || !authz[6])
                return false;
        if (!id)
                return true;
        n = snprintf(pair, sizeof(pair), "%s:%s", id, secret ? secret : "");
        if (n < 0 || (size_t)n >= sizeof(pair))
                return false;
        tg_strbuf_init(&sb, want, sizeof(want));
        tg_strbuf_adds(&sb, "Basic ");
        encode_base64((const unsigned char *)pair, (size_t)n, &sb);
        ok = tg_strbuf_status(&sb) == 0 && strlen(authz) == strlen(want) &&
             digest_equal(authz, want, strlen(want));
        explicit_bzero(pair, sizeof(pair));
        explicit_bzero(want, sizeof(want));
        return ok;
}
