/*
 * The adyen shape's paths, parsing and bodies (see shape.h). Invariants: a
 * body is read whole or refused (an unknown member is refused, as Adyen
 * refuses a structure with unknown fields); *ret is written on success
 * only; the reason is one of the documented enum's words.
 */
#include "shape.h"

#include "core/tg_error.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int stub_adyen_path(const char *path, char ret_payment[STUB_FIELD_MAX + 1])
{
        static const char mid[] = "/payments/";
        const char *p = path, *id, *slash;

        if (p[0] != '/' || p[1] != 'v' || p[2] < '0' || p[2] > '9')
                return TG_ENOTFOUND;
        p += 2;
        while (*p >= '0' && *p <= '9')
                p++;
        if (strncmp(p, mid, sizeof(mid) - 1) != 0)
                return TG_ENOTFOUND;
        id = p + sizeof(mid) - 1;
        slash = strchr(id, '/');
        if (!slash || strcmp(slash, "/refunds") != 0)
                return TG_ENOTFOUND;
        return stub_copy_id(id, (size_t)(slash - id), ret_payment);
}

static bool reason_word(const char *s)
{
        static const char *const words[] = {"FRAUD", "CUSTOMER REQUEST", "RETURN", "DUPLICATE",
                                            "OTHER"};
        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
                if (strcmp(s, words[i]) == 0)
                        return true;
        return false;
}

static int amount(json_t *a, struct stub_refund *r, const char **code, const char **msg)
{
        json_t *v = json_object_get(a, "value"), *c = json_object_get(a, "currency");
        const char *name;
        json_t *m;

        if (!json_is_object(a)) {
                *msg = "amount must be an object";
                return TG_EINVAL;
        }
        json_object_foreach(a, name, m)
        {
                if (strcmp(name, "value") != 0 && strcmp(name, "currency") != 0) {
                        *code = "702";
                        *msg = "Structure Amount contains an unknown field";
                        return TG_EINVAL;
                }
        }
        if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
            json_integer_value(v) > STUB_AMOUNT_MAX) {
                *code = "137";
                *msg = "Invalid amount specified";
                return TG_EINVAL;
        }
        if (!json_is_string(c) || json_string_length(c) != 3) {
                *code = "138";
                *msg = "No amount specified (currency)";
                return TG_EINVAL;
        }
        r->amount = (int64_t)json_integer_value(v);
        memcpy(r->currency, json_string_value(c), 4);
        return 0;
}

int stub_parse_adyen_refund(const char *body, size_t len, const char *key, const char *payment,
                            int *ret_status, const char **ret_code, const char **ret_message,
                            struct stub_refund *ret)
{
        struct stub_refund r;
        json_error_t error;
        json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &error), *v;
        const char *name;
        bool have_amount = false;

        memset(&r, 0, sizeof(r));
        snprintf(r.operation_id, sizeof(r.operation_id), "%s", key);
        snprintf(r.payment_id, sizeof(r.payment_id), "%s", payment);
        *ret_status = 422;
        *ret_code = "000";
        *ret_message = "invalid request";
        if (!json_is_object(o)) {
                *ret_status = 400;
                *ret_code = "702";
                *ret_message = "Unexpected input: not a JSON object";
                goto bad;
        }
        json_object_foreach(o, name, v)
        {
                if (strcmp(name, "merchantAccount") == 0) {
                        if (!stub_json_text(v, STUB_FIELD_MAX)) {
                                *ret_code = "901";
                                *ret_message = "Invalid Merchant Account";
                                goto bad;
                        }
                        memcpy(r.merchant, json_string_value(v), json_string_length(v) + 1);
                } else if (strcmp(name, "amount") == 0) {
                        if (amount(v, &r, ret_code, ret_message) < 0)
                                goto bad;
                        have_amount = true;
                } else if (strcmp(name, "reference") == 0) {
                        if (!stub_json_text(v, STUB_FIELD_MAX)) {
                                *ret_message = "reference must be a string of 1-128 characters";
                                goto bad;
                        }
                        memcpy(r.reference, json_string_value(v), json_string_length(v) + 1);
                } else if (strcmp(name, "merchantRefundReason") == 0) {
                        if (!json_is_string(v) || !reason_word(json_string_value(v))) {
                                *ret_message = "merchantRefundReason is not one of its values";
                                goto bad;
                        }
                } else {
                        /* lineItems, splits, store, capturePspReference, ...: not
                         * played here, refused as Adyen refuses unknown fields */
                        *ret_status = 400;
                        *ret_code = "702";
                        *ret_message = "Structure PaymentRefundRequest contains an unknown or "
                                       "unplayed field";
                        goto bad;
                }
        }
        if (!r.merchant[0]) {
                *ret_code = "901";
                *ret_message = "Invalid Merchant Account";
                goto bad;
        }
        if (!have_amount) {
                *ret_code = "100";
                *ret_message = "Required field 'amount' is not provided.";
                goto bad;
        }
        json_decref(o);
        *ret = r;
        return 0;
bad:
        json_decref(o);
        return TG_EINVAL;
}

char *stub_adyen_received(const char *psp_reference, const struct stub_refund *req)
{
        json_t *o =
            json_pack("{s:s, s:s, s:s}", "merchantAccount", req->merchant, "paymentPspReference",
                      req->payment_id, "pspReference", psp_reference);
        if (o && req->reference[0])
                json_object_set_new(o, "reference", json_string(req->reference));
        if (o) {
                json_object_set_new(o, "status", json_string("received"));
                json_object_set_new(o, "amount",
                                    json_pack("{s:s, s:I}", "currency", req->currency, "value",
                                              (json_int_t)req->amount));
        }
        return stub_json_dump(o);
}

char *stub_adyen_error(int status, const char *code, const char *message)
{
        return stub_json_dump(json_pack("{s:i, s:s, s:s, s:s}", "status", status, "errorCode", code,
                                        "message", message, "errorType",
                                        status >= 500                    ? "internal"
                                        : status == 401 || status == 403 ? "security"
                                                                         : "validation"));
}
