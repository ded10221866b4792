/*
 * api_parse — the intake's JSON side, without I/O: turns a POST /v1/refunds
 * body into a struct refund_request, or into the API error a client gets
 * back. Kept apart from api.c so that the fuzz target (tests/fuzz/
 * fuzz_intake.c) can feed it hostile bytes without a store or a server.
 *
 * Decisions (documented for clients in the README):
 *   - the body must be one JSON object (jansson, JSON_REJECT_DUPLICATES):
 *     malformed JSON, bad UTF-8, "\u0000" in strings, duplicate keys, a
 *     non-object, an empty body -> 400 invalid_json;
 *   - a field the API does not know -> 422 unknown_field (a typo such as
 *     "ammount" must not be silently ignored on a money path);
 *   - a missing field, a wrong type, a float or exponent amount, a number
 *     outside int64, or a value refund_validate refuses -> 422 invalid_field,
 *     with the field named;
 *   - the caller's deadline travels in, optionally, as "deadline" (an RFC
 *     3339 time, e.g. "2025-03-01T12:00:00Z") or "budget_s" (seconds from
 *     now, a number > 0, at most a year); both at once, a deadline not in
 *     the future or a budget out of range -> 422 invalid_field. The intake
 *     bounds it by retry.deadline_s (policy_accept).
 *   - "reason" (a string) and "metadata" (an object of strings) are
 *     optional and checked like the rest (core/refund_validate.h); the
 *     metadata is kept as JSON with its keys sorted.
 */
#ifndef TG_API_PARSE_H
#define TG_API_PARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct tg_config;

/* One API error, as it goes into the error body. code and message are
 * NUL-terminated; field is "" when no field applies. */
struct api_error {
        int status;
        char code[32];
        char message[160];
        char field[72];
        bool retryable;
};

/* Fills *err (all members). */
void api_error_set(struct api_error *err, int status, const char *code, const char *field,
                   const char *message);

/* Parses and validates a refund request body of len bytes (need not be
 * NUL-terminated), received at `now` (a budget counts from it). 0 and
 * *ret_req filled (deadline_at 0 when the caller gave none, traceparent
 * ""); or TG_EINVAL with *err filled and *ret_req untouched. */
int api_parse_refund(const char *body, size_t len, tg_wall_ms now, struct refund_request *ret_req,
                     struct api_error *err);

/* POST /v1/refunds:batch: {"refunds": [refund, ...]} with 1 to
 * API_BATCH_MAX refunds, each parsed exactly as api_parse_refund parses a
 * body (an item that is not an object: 400 invalid_json). The envelope
 * (not JSON, not that one key, not an array, empty or too long) is the
 * call's error: TG_EINVAL and *err. Else 0, *ret_n items filled in order,
 * each ok with its req, or not with its err; items has room for
 * API_BATCH_MAX and is the caller's. */
#define API_BATCH_MAX 500
struct api_batch_item {
        bool ok;
        struct refund_request req;
        struct api_error err;
};
/* The account a parsed refund names, against the configured ones: none
 * named is the one account when only one is configured (its name is written
 * into req), else 422 invalid_field "account" (required); a name not
 * configured is 422 unknown_account naming the known ones. 0 or TG_EINVAL
 * with *err filled. */
int api_refund_account(const struct tg_config *config, struct refund_request *req,
                       struct api_error *err);
/* The one refusal of an account name that is not configured, wherever it
 * is named (a refund's "account", the ?account= of /v1/stats, /v1/manual
 * and /v1/calls): 422 unknown_account, field "account", the message naming
 * the configured ones. Fills *err; returns TG_EINVAL. */
int api_unknown_account(const struct tg_config *config, struct api_error *err);
/* A parsed refund's notify_url against `[notify] allow`: none named is
 * fine; one named with no prefix configured is 422
 * notify_url_not_configured, one under no prefix 422 notify_url_not_allowed.
 * 0 or TG_EINVAL with *err filled. */
int api_refund_notify_url(const struct tg_config *config, const struct refund_request *req,
                          struct api_error *err);

/* A refund for an account whose mapping writes the amount as a decimal
 * string ({amount_decimal} in a provider.body_field) must be in a currency
 * whose ISO 4217 exponent core/currency.h knows: else 422 invalid_field
 * currency, refused before anything is stored (never a guessed exponent).
 * Call after api_refund_account(). 0 or TG_EINVAL with *err filled. */
int api_refund_currency(const struct tg_config *config, const struct refund_request *req,
                        struct api_error *err);

int api_parse_batch(const char *body, size_t len, tg_wall_ms now, struct api_batch_item *items,
                    size_t *ret_n, struct api_error *err);

/* The optional body of POST /v1/refunds/{id}/cancel: {"operator","reason"},
 * each optional (1-200 bytes, no control characters). An empty body is no
 * fields. Unknown fields -> 422 unknown_field. Absent texts are "". */
struct cancel_request {
        char operator_name[201];
        char reason[201];
};
int api_parse_cancel(const char *body, size_t len, struct cancel_request *ret_cancel,
                     struct api_error *err);

/* POST /v1/accounts/{account}: {"starts_per_second": number|null,
 * "max_in_flight": integer|null, "paused": bool, "reason", "operator"}:
 * at least one of the three controls (null clears one: the configured
 * value is in force again); reason required, operator optional (the
 * credential names who acts). Unknown fields -> 422 unknown_field. */
struct account_request {
        bool set_rate, set_cap, set_paused;
        double starts_per_second; /* 0: cleared */
        unsigned max_in_flight;   /* 0: cleared */
        bool paused;
        char operator_name[201];
        char reason[201];
};
int api_parse_account(const char *body, size_t len, struct account_request *ret_account,
                      struct api_error *err);

/* POST /v1/manual/{id}/assign: {"operator","assignee","reason"}: operator
 * required unless operator_optional (credentials name who acts: then it is
 * "" when left out); assignee a name (1-200 bytes, no control characters) or null
 * (to nobody), required; reason optional. */
struct assign_request {
        char operator_name[201];
        char assignee[201]; /* "": to nobody */
        char reason[201];
};
int api_parse_assign(const char *body, size_t len, bool operator_optional,
                     struct assign_request *ret_assign, struct api_error *err);

/* An operator's action on a manual operation (POST /v1/manual/{id}/resend
 * and /resolve): {"operator","reason"} and, for resolve, "outcome":
 * "succeeded" or "failed". operator and reason: 1-200 bytes of UTF-8 without
 * control characters; operator may be left out ("") when operator_optional.
 * Unknown fields -> 422 unknown_field. */
#define API_TEXT_MAX 200
struct operator_action {
        char operator_name[API_TEXT_MAX + 1];
        char reason[API_TEXT_MAX + 1];
        enum op_state outcome; /* resolve: OP_SUCCEEDED or OP_REJECTED */
};
int api_parse_operator_action(const char *body, size_t len, bool want_outcome,
                              bool operator_optional, struct operator_action *ret_action,
                              struct api_error *err);

/* A provider event (shared/PROVIDER.md, webhook): {"operation_id","status":
 * "succeeded"|"failed","refund_id"}. The signature was checked before this
 * is called; fields the contract may add later are ignored (they cannot
 * change the meaning of the three read here). */
struct provider_event {
        char operation_id[TG_OP_ID_MAX + 1];
        enum op_state outcome; /* OP_SUCCEEDED or OP_REJECTED */
        char refund_id[128];
};
int api_parse_provider_event(const char *body, size_t len, struct provider_event *ret_event,
                             struct api_error *err);

/* The X-Signature header of a provider event: "sha256=" and exactly 64 hex
 * digits (either case), nothing else. header may be NULL (missing). 0 and
 * ret_mac filled with the 32 bytes; or TG_EPARSE and ret_mac untouched. The
 * MAC itself is checked by the caller, in constant time. */
#define API_MAC_LEN 32
int api_parse_signature(const char *header, unsigned char ret_mac[API_MAC_LEN]);

/* Stripe's Stripe-Signature header: comma-separated key=value elements,
 * exactly one t=<unix seconds> (1-12 digits) and 1 to API_STRIPE_SIGS_MAX
 * v1=<64 hex digits> (a secret being rolled signs with both); elements of
 * other schemes (v0=...) are skipped, an element without '=' or an empty
 * one is refused. header may be NULL (missing). 0 and *ret filled; or
 * TG_EPARSE and *ret untouched. The MACs are checked by the caller. */
#define API_STRIPE_SIGS_MAX 8
struct stripe_signature {
        int64_t t; /* seconds since the epoch, as signed */
        unsigned n;
        unsigned char v1[API_STRIPE_SIGS_MAX][API_MAC_LEN];
};
int api_parse_stripe_signature(const char *header, struct stripe_signature *ret);

/* {"code","message","field","retryable"}: the error object of a body or
 * of one item of a batch. A new reference, NULL when out of memory. */
json_t *api_error_object(const struct api_error *err);

/* The error body {"error":{"code","message","field","retryable"},
 * "request_id"} as a malloc()ed string; *ret_len its length. 0 or
 * TG_ENOMEM. */
int api_error_json(const struct api_error *err, const char *request_id, char **ret_body,
                   size_t *ret_len);

#endif
