/*
 * api_parse — the JSON side of the intake (see the header for the rules),
 * and the webhook's signature header (the MAC is checked in api_events.c).
 * Every string a client sends is treated as hostile: lengths come from
 * jansson (never strlen on client data), and a client-supplied name echoed
 * in an error is cut at a UTF-8 boundary so the error body stays valid JSON.
 */
#include "daemon/api_parse.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/currency.h"
#include "core/encode.h"
#include "core/refund_validate.h"
#include "core/rfc3339.h"
#include "core/strnum.h"
#include "core/tg_error.h"
#include "daemon/config.h"
#include "net/provider_request.h"

static void copy_text(char *dst, size_t size, const char *src, size_t len)
{
        if (len >= size) {
                len = size - 1;
                /* Do not cut a UTF-8 sequence in half. */
                while (len > 0 && ((unsigned char)src[len] & 0xc0) == 0x80)
                        len--;
        }
        memcpy(dst, src, len);
        dst[len] = '\0';
}

void api_error_set(struct api_error *err, int status, const char *code, const char *field,
                   const char *message)
{
        memset(err, 0, sizeof(*err));
        err->status = status;
        copy_text(err->code, sizeof(err->code), code, strlen(code));
        if (field)
                copy_text(err->field, sizeof(err->field), field, strlen(field));
        copy_text(err->message, sizeof(err->message), message, strlen(message));
        err->retryable = false;
}

static int invalid(struct api_error *err, int status, const char *code, const char *field,
                   const char *message)
{
        api_error_set(err, status, code, field, message);
        return TG_EINVAL;
}

static const char *const known_fields[] = {"operation_id", "payment_id", "amount",   "currency",
                                           "reason",       "metadata",   "deadline", "budget_s",
                                           "account",      "notify_url"};

/* The optional account: its name as written (api_refund_account() checks it
 * against the config's accounts). */
static int get_account(json_t *root, struct refund_request *req, struct api_error *err)
{
        json_t *v = json_object_get(root, "account");

        if (!v)
                return 0;
        if (!json_is_string(v) || !refund_account_name_ok(json_string_value(v)) ||
            json_string_length(v) != strlen(json_string_value(v)))
                return invalid(err, 422, "invalid_field", "account",
                               "must be an account name: 1 to 32 of a-z, 0-9, _ and -");
        memcpy(req->account, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

int api_refund_account(const struct tg_config *config, struct refund_request *req,
                       struct api_error *err)
{
        char names[100], message[sizeof(((struct api_error *)0)->message)];

        if (!req->account[0] && config->account_count == 1) {
                copy_text(req->account, sizeof(req->account), config->accounts[0].name,
                          strlen(config->accounts[0].name));
                return 0;
        }
        if (req->account[0] && config_account_find(config, req->account))
                return 0;
        if (req->account[0])
                return api_unknown_account(config, err);
        config_account_names(config, names, sizeof(names));
        snprintf(message, sizeof(message), "is required when several accounts are configured: %s",
                 names);
        return invalid(err, 422, "invalid_field", "account", message);
}

int api_refund_currency(const struct tg_config *config, const struct refund_request *req,
                        struct api_error *err)
{
        const struct tg_account *a = config_account_find(config, req->account);
        const struct tg_account_settings *s = a && a->settings ? a->settings : NULL;
        unsigned n = s ? s->provider_body_field_count : config->provider_body_field_count;
        bool decimal = false;
        unsigned exponent;

        for (unsigned i = 0; i < n && !decimal; i++)
                decimal = strstr(s ? s->provider_body_fields[i] : config->provider_body_fields[i],
                                 "{amount_decimal}") != NULL;
        if (!decimal || currency_exponent(req->currency, &exponent) == 0)
                return 0;
        return invalid(err, 422, "invalid_field", "currency",
                       "has no ISO 4217 minor unit known to tollgate, and this provider takes "
                       "the amount as a decimal string");
}

int api_unknown_account(const struct tg_config *config, struct api_error *err)
{
        char message[sizeof(((struct api_error *)0)->message)];

        config_account_unknown(config, message, sizeof(message));
        return invalid(err, 422, "unknown_account", "account", message);
}

/* The optional notify_url: a URL of core/url_allow.h's shape (whether it is
 * allowed is the config's: api_refund_notify_url). */
static int get_notify_url(json_t *root, struct refund_request *req, struct api_error *err)
{
        json_t *v = json_object_get(root, "notify_url");

        if (!v)
                return 0;
        if (!json_is_string(v) || json_string_length(v) != strlen(json_string_value(v)) ||
            url_allow_check(json_string_value(v)) < 0)
                return invalid(err, 422, "invalid_field", "notify_url",
                               "must be an http(s) URL: scheme, host, optional port, path and "
                               "query, printable ASCII, no user info or fragment, at most 512 "
                               "bytes");
        memcpy(req->notify_url, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

int api_refund_notify_url(const struct tg_config *config, const struct refund_request *req,
                          struct api_error *err)
{
        const char *prefixes[TG_NOTIFY_ALLOW_MAX];

        if (!req->notify_url[0])
                return 0;
        if (config->notify_allow_count == 0)
                return invalid(err, 422, "notify_url_not_configured", "notify_url",
                               "this tollgate takes no notify_url (no [notify] allow): leave it "
                               "out, the events go to notify.url");
        for (unsigned i = 0; i < config->notify_allow_count; i++)
                prefixes[i] = config->notify_allow[i];
        if (url_allow_match(req->notify_url, prefixes, config->notify_allow_count) < 0)
                return invalid(err, 422, "notify_url_not_allowed", "notify_url",
                               "is not under any of the [notify] allow prefixes (scheme, host "
                               "and port must be the same, the path must start with one)");
        return 0;
}

/* The optional reason: a string refund_validate accepts. */
static int get_reason(json_t *root, struct refund_request *req, struct api_error *err)
{
        struct refund_problem problem;
        json_t *v = json_object_get(root, "reason");

        if (!v)
                return 0;
        if (!json_is_string(v))
                return invalid(err, 422, "invalid_field", "reason", "must be a string");
        if (refund_validate_reason(json_string_value(v), json_string_length(v), &problem) < 0)
                return invalid(err, 422, "invalid_field", "reason", problem.message);
        memcpy(req->reason, json_string_value(v), json_string_length(v));
        req->reason[json_string_length(v)] = '\0';
        return 0;
}

/* The optional metadata: an object of strings, stored as JSON with its keys
 * sorted (so that the same map is the same text, for idempotency). */
static int get_metadata(json_t *root, struct refund_request *req, struct api_error *err)
{
        struct refund_metadata md;
        struct refund_problem problem;
        const char *key;
        json_t *v = json_object_get(root, "metadata"), *value;

        if (!v)
                return 0;
        if (!json_is_object(v))
                return invalid(err, 422, "invalid_field", "metadata",
                               "must be an object of string values");
        memset(&md, 0, sizeof(md));
        json_object_foreach(v, key, value)
        {
                if (!json_is_string(value))
                        return invalid(err, 422, "invalid_field", "metadata",
                                       "every value must be a string");
                if (refund_metadata_add(&md, key, strlen(key), json_string_value(value),
                                        json_string_length(value), &problem) < 0)
                        return invalid(err, 422, "invalid_field", "metadata", problem.message);
        }
        if (provider_metadata_text(&md, req->metadata, sizeof(req->metadata)) < 0)
                return invalid(err, 422, "invalid_field", "metadata",
                               "must be at most 1024 bytes once written as JSON");
        return 0;
}

#define BUDGET_MAX_S (366.0 * 24 * 3600) /* a longer budget is a typo */

/* The caller's deadline, if any: "deadline" (RFC 3339) or "budget_s"
 * (seconds from now). *ret_at is 0 when neither is given. */
static int get_deadline(json_t *root, tg_wall_ms now, tg_wall_ms *ret_at, struct api_error *err)
{
        json_t *at = json_object_get(root, "deadline"), *budget = json_object_get(root, "budget_s");
        tg_wall_ms t = 0;

        if (at && budget)
                return invalid(err, 422, "invalid_field", "budget_s",
                               "give either deadline or budget_s, not both");
        if (at) {
                if (!json_is_string(at) ||
                    rfc3339_parse(json_string_value(at), json_string_length(at), &t) < 0)
                        return invalid(err, 422, "invalid_field", "deadline",
                                       "must be an RFC 3339 time, e.g. \"2025-03-01T12:00:00Z\"");
                if (t <= now)
                        return invalid(err, 422, "invalid_field", "deadline",
                                       "is not in the future");
        } else if (budget) {
                double v = json_is_number(budget) ? json_number_value(budget) : -1;
                if (!(v > 0 && v <= BUDGET_MAX_S) || llround(v * 1000.0) < 1)
                        return invalid(err, 422, "invalid_field", "budget_s",
                                       "must be a number of seconds > 0, at most a year");
                t = now + llround(v * 1000.0);
        }
        *ret_at = t;
        return 0;
}

/* A string member, with its length. */
static int get_string(json_t *obj, const char *name, const char **ret_s, size_t *ret_len,
                      struct api_error *err)
{
        json_t *v = json_object_get(obj, name);

        if (!v)
                return invalid(err, 422, "invalid_field", name, "is required");
        if (!json_is_string(v))
                return invalid(err, 422, "invalid_field", name, "must be a string");
        *ret_s = json_string_value(v);
        *ret_len = json_string_length(v);
        return 0;
}

/* The JSON of a body: 400 invalid_json for what is not JSON (a duplicate
 * key named as such), 422 for a number outside int64. */
static int load_json(const char *body, size_t len, json_t **ret_root, struct api_error *err)
{
        json_error_t jerr;
        json_t *root;

        if (!body || len == 0)
                return invalid(err, 400, "invalid_json", NULL, "the body must be a JSON object");
        root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                if (json_error_code(&jerr) == json_error_numeric_overflow)
                        return invalid(err, 422, "invalid_field", NULL, "a number is out of range");
                if (json_error_code(&jerr) == json_error_duplicate_key)
                        return invalid(err, 400, "invalid_json", NULL,
                                       "the body has a duplicate key");
                return invalid(err, 400, "invalid_json", NULL, "the body is not valid JSON");
        }
        *ret_root = root;
        return 0;
}

/* One refund request from its JSON (a body, or an item of a batch). */
static int parse_refund_json(json_t *root, tg_wall_ms now, struct refund_request *ret_req,
                             struct api_error *err)
{
        tg_wall_ms deadline_at = 0;
        struct refund_fields f;
        struct refund_problem problem;
        struct refund_request req;
        const char *key;
        json_t *value;

        if (!json_is_object(root))
                return invalid(err, 400, "invalid_json", NULL, "the body must be a JSON object");
        json_object_foreach(root, key, value)
        {
                bool known = false;
                (void)value;
                for (size_t i = 0; i < sizeof(known_fields) / sizeof(known_fields[0]); i++)
                        known = known || strcmp(key, known_fields[i]) == 0;
                if (!known) {
                        /* jansson keys are valid UTF-8 without NUL bytes. */
                        invalid(err, 422, "unknown_field", NULL,
                                "this field is not part of a refund request");
                        copy_text(err->field, sizeof(err->field), key, strlen(key));
                        return TG_EINVAL;
                }
        }

        memset(&f, 0, sizeof(f));
        if (get_string(root, "operation_id", &f.operation_id, &f.operation_id_len, err) < 0 ||
            get_string(root, "payment_id", &f.payment_id, &f.payment_id_len, err) < 0)
                return TG_EINVAL;
        value = json_object_get(root, "amount");
        if (!value)
                return invalid(err, 422, "invalid_field", "amount", "is required");
        /* jansson keeps integers and reals apart: 100.0 and 1e2 are reals. */
        if (!json_is_integer(value))
                return invalid(err, 422, "invalid_field", "amount",
                               "must be an integer in minor units (no fraction, no exponent)");
        f.amount = (int64_t)json_integer_value(value);
        if (get_string(root, "currency", &f.currency, &f.currency_len, err) < 0)
                return TG_EINVAL;
        if (refund_validate(&f, &problem) < 0)
                return invalid(err, 422, "invalid_field", problem.field, problem.message);
        if (get_deadline(root, now, &deadline_at, err) < 0)
                return TG_EINVAL;

        /* Lengths were checked by refund_validate against these buffers. */
        memset(&req, 0, sizeof(req));
        memcpy(req.operation_id, f.operation_id, f.operation_id_len);
        memcpy(req.payment_id, f.payment_id, f.payment_id_len);
        req.amount = f.amount;
        memcpy(req.currency, f.currency, f.currency_len);
        req.deadline_at = deadline_at;
        if (get_reason(root, &req, err) < 0 || get_metadata(root, &req, err) < 0 ||
            get_account(root, &req, err) < 0 || get_notify_url(root, &req, err) < 0)
                return TG_EINVAL;
        *ret_req = req;
        return 0;
}

int api_parse_refund(const char *body, size_t len, tg_wall_ms now, struct refund_request *ret_req,
                     struct api_error *err)
{
        json_t *root = NULL;
        int r = load_json(body, len, &root, err);

        if (r == 0)
                r = parse_refund_json(root, now, ret_req, err);
        json_decref(root);
        return r;
}

int api_parse_batch(const char *body, size_t len, tg_wall_ms now, struct api_batch_item *items,
                    size_t *ret_n, struct api_error *err)
{
        json_t *root = NULL, *list;
        size_t n;
        int r = load_json(body, len, &root, err);

        if (r < 0)
                return r;
        r = TG_EINVAL;
        if (!json_is_object(root) || json_object_size(root) != 1 ||
            !json_is_array(json_object_get(root, "refunds"))) {
                invalid(err, 400, "invalid_request", NULL,
                        "the body must be {\"refunds\": [refund, ...]} and nothing else");
                goto out;
        }
        list = json_object_get(root, "refunds");
        n = json_array_size(list);
        if (n == 0 || n > API_BATCH_MAX) {
                char message[64];
                snprintf(message, sizeof(message), "must hold 1 to %d refunds", API_BATCH_MAX);
                invalid(err, 400, "invalid_request", "refunds", message);
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                struct api_batch_item *it = &items[i];
                json_t *one = json_array_get(list, i);

                if (!json_is_object(one))
                        it->ok = invalid(&it->err, 400, "invalid_json", NULL,
                                         "each refund must be a JSON object") == 0;
                else
                        it->ok = parse_refund_json(one, now, &it->req, &it->err) == 0;
        }
        *ret_n = n;
        r = 0;
out:
        json_decref(root);
        return r;
}

json_t *api_error_object(const struct api_error *err)
{
        return json_pack("{s:s, s:s, s:o, s:b}", "code", err->code, "message", err->message,
                         "field", err->field[0] ? json_string(err->field) : json_null(),
                         "retryable", err->retryable);
}

int api_error_json(const struct api_error *err, const char *request_id, char **ret_body,
                   size_t *ret_len)
{
        json_t *root;
        char *text;

        root = json_pack("{s:o, s:s?}", "error", api_error_object(err), "request_id", request_id);
        if (!root)
                return TG_ENOMEM;
        text = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        if (!text)
                return TG_ENOMEM;
        *ret_body = text;
        *ret_len = strlen(text);
        return 0;
}

/* ---- operator actions and provider events -------------------------------------- */

/* One JSON object with no duplicate key; 400 otherwise. */
static int load_object(const char *body, size_t len, json_t **ret_root, struct api_error *err)
{
        json_error_t jerr;
        json_t *root;

        if (!body || len == 0)
                return invalid(err, 400, "invalid_json", NULL, "the body must be a JSON object");
        root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                if (json_error_code(&jerr) == json_error_duplicate_key)
                        return invalid(err, 400, "invalid_json", NULL,
                                       "the body has a duplicate key");
                return invalid(err, 400, "invalid_json", NULL, "the body is not valid JSON");
        }
        if (!json_is_object(root)) {
                json_decref(root);
                return invalid(err, 400, "invalid_json", NULL, "the body must be a JSON object");
        }
        *ret_root = root;
        return 0;
}

static int only_known(json_t *root, const char *const *known, size_t n, struct api_error *err)
{
        const char *key;
        json_t *value;

        json_object_foreach(root, key, value)
        {
                bool ok = false;
                (void)value;
                for (size_t i = 0; i < n; i++)
                        ok = ok || strcmp(key, known[i]) == 0;
                if (!ok) {
                        invalid(err, 422, "unknown_field", NULL, "this field is not known here");
                        copy_text(err->field, sizeof(err->field), key, strlen(key));
                        return TG_EINVAL;
                }
        }
        return 0;
}

/* A required operator text: 1..API_TEXT_MAX bytes, no control characters. */
static int get_text(json_t *root, const char *name, char *dst, size_t size, struct api_error *err)
{
        const char *s;
        size_t len;

        if (get_string(root, name, &s, &len, err) < 0)
                return TG_EINVAL;
        if (len == 0 || len > API_TEXT_MAX)
                return invalid(err, 422, "invalid_field", name, "must be 1 to 200 bytes");
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c < 0x20 || c == 0x7f)
                        return invalid(err, 422, "invalid_field", name,
                                       "must not contain control characters");
        }
        copy_text(dst, size, s, len);
        return 0;
}

/* An optional operator text: absent leaves dst "". */
static int get_text_opt(json_t *root, const char *name, char *dst, size_t size,
                        struct api_error *err)
{
        dst[0] = '\0';
        if (!json_object_get(root, name))
                return 0;
        return get_text(root, name, dst, size, err);
}

int api_parse_operator_action(const char *body, size_t len, bool want_outcome,
                              bool operator_optional, struct operator_action *ret_action,
                              struct api_error *err)
{
        static const char *const resend_fields[] = {"operator", "reason"};
        static const char *const resolve_fields[] = {"operator", "reason", "outcome"};
        struct operator_action a;
        json_t *root = NULL;
        int r = load_object(body, len, &root, err);

        if (r < 0)
                return r;
        memset(&a, 0, sizeof(a));
        r = want_outcome ? only_known(root, resolve_fields, 3, err)
                         : only_known(root, resend_fields, 2, err);
        if (r == 0 && operator_optional)
                r = get_text_opt(root, "operator", a.operator_name, sizeof(a.operator_name), err);
        else if (r == 0)
                r = get_text(root, "operator", a.operator_name, sizeof(a.operator_name), err);
        if (r == 0)
                r = get_text(root, "reason", a.reason, sizeof(a.reason), err);
        if (r == 0 && want_outcome) {
                const char *o;
                size_t olen;
                r = get_string(root, "outcome", &o, &olen, err);
                if (r == 0 && olen == 9 && memcmp(o, "succeeded", 9) == 0)
                        a.outcome = OP_SUCCEEDED;
                else if (r == 0 && olen == 6 && memcmp(o, "failed", 6) == 0)
                        a.outcome = OP_REJECTED;
                else if (r == 0)
                        r = invalid(err, 422, "invalid_field", "outcome",
                                    "must be \"succeeded\" or \"failed\"");
        }
        json_decref(root);
        if (r == 0)
                *ret_action = a;
        return r;
}

int api_parse_cancel(const char *body, size_t len, struct cancel_request *ret_cancel,
                     struct api_error *err)
{
        static const char *const fields[] = {"operator", "reason"};
        struct cancel_request c;
        json_t *root = NULL;
        int r;

        memset(&c, 0, sizeof(c));
        if (!body || len == 0) {
                *ret_cancel = c;
                return 0;
        }
        r = load_object(body, len, &root, err);
        if (r < 0)
                return r;
        r = only_known(root, fields, 2, err);
        if (r == 0)
                r = get_text_opt(root, "operator", c.operator_name, sizeof(c.operator_name), err);
        if (r == 0)
                r = get_text_opt(root, "reason", c.reason, sizeof(c.reason), err);
        json_decref(root);
        if (r == 0)
                *ret_cancel = c;
        return r;
}

int api_parse_assign(const char *body, size_t len, bool operator_optional,
                     struct assign_request *ret_assign, struct api_error *err)
{
        static const char *const fields[] = {"operator", "assignee", "reason"};
        struct assign_request a;
        json_t *root = NULL, *who;
        int r = load_object(body, len, &root, err);

        if (r < 0)
                return r;
        memset(&a, 0, sizeof(a));
        r = only_known(root, fields, 3, err);
        if (r == 0 && operator_optional)
                r = get_text_opt(root, "operator", a.operator_name, sizeof(a.operator_name), err);
        else if (r == 0)
                r = get_text(root, "operator", a.operator_name, sizeof(a.operator_name), err);
        who = r == 0 ? json_object_get(root, "assignee") : NULL;
        if (r == 0 && !who)
                r = invalid(err, 422, "invalid_field", "assignee",
                            "is required (a name, or null for nobody)");
        if (r == 0 && !json_is_null(who))
                r = get_text(root, "assignee", a.assignee, sizeof(a.assignee), err);
        if (r == 0)
                r = get_text_opt(root, "reason", a.reason, sizeof(a.reason), err);
        json_decref(root);
        if (r == 0)
                *ret_assign = a;
        return r;
}

/* A control's number: absent leaves it unset, null clears it (0), else a
 * number > 0 (an integer when whole). */
static int get_control(json_t *root, const char *name, bool whole, bool *ret_set, double *ret_value,
                       struct api_error *err)
{
        json_t *v = json_object_get(root, name);

        *ret_set = v != NULL;
        *ret_value = 0;
        if (!v || json_is_null(v))
                return 0;
        if (whole ? !json_is_integer(v) : !json_is_number(v))
                return invalid(err, 422, "invalid_field", name,
                               whole ? "must be an integer or null" : "must be a number or null");
        *ret_value = json_number_value(v);
        if (!(*ret_value > 0) || *ret_value > 1e9)
                return invalid(err, 422, "invalid_field", name, "must be > 0, or null");
        return 0;
}

int api_parse_account(const char *body, size_t len, struct account_request *ret,
                      struct api_error *err)
{
        static const char *const fields[] = {"starts_per_second", "max_in_flight", "paused",
                                             "operator", "reason"};
        struct account_request a;
        json_t *root = NULL, *paused;
        double cap = 0;
        int r = load_object(body, len, &root, err);

        if (r < 0)
                return r;
        memset(&a, 0, sizeof(a));
        r = only_known(root, fields, 5, err);
        if (r == 0)
                r = get_control(root, "starts_per_second", false, &a.set_rate, &a.starts_per_second,
                                err);
        if (r == 0)
                r = get_control(root, "max_in_flight", true, &a.set_cap, &cap, err);
        if (r == 0) /* a refused value may be anything (1e300): never converted */
                a.max_in_flight = (unsigned)cap;
        paused = json_object_get(root, "paused");
        if (r == 0 && paused && !json_is_boolean(paused))
                r = invalid(err, 422, "invalid_field", "paused", "must be true or false");
        a.set_paused = paused != NULL;
        a.paused = json_is_true(paused);
        if (r == 0 && !a.set_rate && !a.set_cap && !a.set_paused)
                r = invalid(err, 422, "invalid_request", NULL,
                            "give starts_per_second, max_in_flight or paused");
        if (r == 0)
                r = get_text_opt(root, "operator", a.operator_name, sizeof(a.operator_name), err);
        if (r == 0)
                r = get_text(root, "reason", a.reason, sizeof(a.reason), err);
        json_decref(root);
        if (r == 0)
                *ret = a;
        return r;
}

int api_parse_provider_event(const char *body, size_t len, struct provider_event *ret_event,
                             struct api_error *err)
{
        struct provider_event ev;
        const char *s;
        size_t slen;
        json_t *root = NULL, *v;
        int r = load_object(body, len, &root, err);

        if (r < 0)
                return r;
        memset(&ev, 0, sizeof(ev));
        r = get_string(root, "operation_id", &s, &slen, err);
        if (r == 0 && refund_validate_operation_id(s, slen, NULL) < 0)
                r = invalid(err, 422, "invalid_field", "operation_id",
                            "is not a valid operation id");
        if (r == 0)
                copy_text(ev.operation_id, sizeof(ev.operation_id), s, slen);
        if (r == 0)
                r = get_string(root, "status", &s, &slen, err);
        if (r == 0 && slen == 9 && memcmp(s, "succeeded", 9) == 0)
                ev.outcome = OP_SUCCEEDED;
        else if (r == 0 && slen == 6 && memcmp(s, "failed", 6) == 0)
                ev.outcome = OP_REJECTED;
        else if (r == 0)
                r = invalid(err, 422, "invalid_field", "status",
                            "must be \"succeeded\" or \"failed\"");
        v = r == 0 ? json_object_get(root, "refund_id") : NULL;
        if (v && !json_is_null(v)) {
                if (!json_is_string(v) || json_string_length(v) >= sizeof(ev.refund_id))
                        r = invalid(err, 422, "invalid_field", "refund_id",
                                    "must be a string of at most 127 bytes");
                for (size_t i = 0; r == 0 && i < json_string_length(v); i++) {
                        unsigned char c = (unsigned char)json_string_value(v)[i];
                        if (c <= 0x20 || c >= 0x7f)
                                r = invalid(err, 422, "invalid_field", "refund_id",
                                            "must be printable ASCII");
                }
                if (r == 0)
                        copy_text(ev.refund_id, sizeof(ev.refund_id), json_string_value(v),
                                  json_string_length(v));
        }
        json_decref(root);
        if (r == 0)
                *ret_event = ev;
        return r;
}

/* ---- the webhook signature header ------------------------------------------------- */

int api_parse_stripe_signature(const char *header, struct stripe_signature *ret)
{
        struct stripe_signature sig = {.t = -1};
        const char *p = header;

        if (!p || !ret)
                return TG_EPARSE;
        for (;;) {
                size_t len = strcspn(p, ","), klen;
                const char *eq = memchr(p, '=', len), *v;
                char num[16];

                if (!eq || eq == p)
                        return TG_EPARSE;
                klen = (size_t)(eq - p);
                v = eq + 1;
                size_t vlen = len - klen - 1;
                if (klen == 1 && p[0] == 't') {
                        if (sig.t >= 0 || vlen == 0 || vlen > 12)
                                return TG_EPARSE;
                        for (size_t i = 0; i < vlen; i++)
                                if (v[i] < '0' || v[i] > '9')
                                        return TG_EPARSE;
                        memcpy(num, v, vlen);
                        num[vlen] = '\0';
                        if (strnum_i64(num, 0, INT64_C(999999999999), &sig.t) < 0)
                                return TG_EPARSE;
                } else if (klen == 2 && p[0] == 'v' && p[1] == '1') {
                        char hex[2 * API_MAC_LEN + 1];
                        if (sig.n == API_STRIPE_SIGS_MAX || vlen != 2 * API_MAC_LEN)
                                return TG_EPARSE;
                        memcpy(hex, v, vlen);
                        hex[vlen] = '\0';
                        if (encode_hex_decode(hex, sig.v1[sig.n], API_MAC_LEN) < 0)
                                return TG_EPARSE;
                        sig.n++;
                }
                if (p[len] == '\0')
                        break;
                p += len + 1;
        }
        if (sig.t < 0 || sig.n == 0)
                return TG_EPARSE;
        *ret = sig;
        return 0;
}

int api_parse_signature(const char *header, unsigned char ret_mac[API_MAC_LEN])
{
        static const char prefix[] = "sha256=";
        const char *h = header;

        if (!h || strncmp(h, prefix, sizeof(prefix) - 1) != 0)
                return TG_EPARSE;
        h += sizeof(prefix) - 1;
        if (strnlen(h, 2 * API_MAC_LEN + 1) != 2 * API_MAC_LEN)
                return TG_EPARSE;
        return encode_hex_decode(h, ret_mac, API_MAC_LEN);
}
