/*
 * operation — one refund operation as tollgate keeps it: the request a client
 * made and everything the exit has learned and decided about it since. The
 * state machine (core/policy.h) reads and changes these records; the store
 * (store/store.h) only loads, locks and writes them. Plain data, on the
 * stack or in arrays; members are written by policy_* functions and by the
 * store's row readers, read by anyone.
 */
#ifndef TG_OPERATION_H
#define TG_OPERATION_H

#include <stdbool.h>
#include <stdint.h>

#include "core/classify.h"
#include "core/names.h"
#include "core/refund_validate.h"
#include "core/tg_time.h"
#include "core/url_allow.h"

#define TG_OP_ID_MAX      128 /* idempotency key: 1-128 chars of [A-Za-z0-9._:-] */
#define TG_PAYMENT_ID_MAX 128
#define TG_REQUEST_ID_MAX 64
#define TG_TEXT_MAX       256 /* operator, reason, error texts */
#define TG_SUBMITTER_MAX  64  /* a credential's name (daemon/credentials.h) */
#define TG_REFUND_ID_MAX  128 /* the provider's refund id, with its NUL */

/* A provider account's name ([account.NAME], refund_account_name_ok()), and
 * the one account of a config without [account.*] sections. */
#define TG_ACCOUNT_NAME_MAX 32
#define TG_ACCOUNT_DEFAULT  "default"

/* W3C trace context (core/traceparent.h) */
#define TG_TRACEPARENT_MAX 55 /* a version-00 traceparent: 2-32-16-2 hex and dashes */
#define TG_TRACE_ID_MAX    32 /* its trace id, in hex */
#define TG_SPAN_ID_MAX     16 /* a span (parent) id, in hex */

/* enum op_state, enum manual_reason and enum tg_call_kind, with their
 * words: core/names.h. */

/* What a client asked for. Validated (core/refund_validate.h) before it is
 * accepted. */
struct refund_request {
        char operation_id[TG_OP_ID_MAX + 1];
        char payment_id[TG_PAYMENT_ID_MAX + 1];
        int64_t amount; /* minor units, > 0 */
        char currency[4];
        char reason[REFUND_REASON_MAX + 1];      /* "" when none */
        char metadata[REFUND_METADATA_TEXT + 1]; /* a JSON object, keys sorted; "" when none */
        /* The provider account whose exit sends it, part of the payload (the
         * same operation_id with another account is another request: 409).
         * "" is TG_ACCOUNT_DEFAULT; a stored operation always names it. */
        char account[TG_ACCOUNT_NAME_MAX + 1];
        /* Not part of the payload (a repeat with other values is the same
         * request): the caller's own deadline, absolute, 0 for none (the
         * intake bounds it by the policy's deadline); and the W3C
         * traceparent the refund belongs to, "" for none. */
        tg_wall_ms deadline_at;
        char traceparent[TG_TRACEPARENT_MAX + 1];
        /* Not part of the payload either: where this refund's events go
         * instead of notify.url (core/url_allow.h, checked against
         * notify.allow at intake); "" for notify.url. */
        char notify_url[URL_ALLOW_MAX + 1];
        /* Not part of the payload, and never changed once stored: the name
         * of the API credential that submitted it (an intake-only
         * credential reads and cancels only its own), "" for no owner (a
         * token of api.token_file, the outbox, a row from before the
         * column: readable by every reader). */
        char submitted_by[TG_SUBMITTER_MAX + 1];
};

/* An operation as stored. */
struct op_record {
        int64_t id; /* row id */
        struct refund_request req;
        enum op_state state;
        enum manual_reason reason;
        unsigned attempts, attempt_limit;
        unsigned queries, query_limit;
        tg_wall_ms accepted_at, deadline_at, key_first_used, next_run_at, updated_at;
        int64_t last_wait_ms;
        bool operator_resend; /* the next POST is an operator re-send (kind manual) */
        int64_t epoch;        /* owner epoch of the last claim */
        unsigned share;       /* the share of the account quota the last claim was made under */
        char refund_id[TG_REFUND_ID_MAX];
        int last_http_status;     /* of the last call, 0 if none */
        enum tg_class last_class; /* of the last call; meaningful when calls > 0 */
        char source[16];          /* "api" or "outbox" */

        /* Who owns the manual case (an operator's name); "" for nobody. */
        char assignee[TG_TEXT_MAX];
        /* The trace the operation's calls belong to (W3C traceparent: the
         * caller's, or one tollgate started); "" until one is known (an
         * outbox row gets one at its first claim). Never changes once set. */
        char traceparent[TG_TRACEPARENT_MAX + 1];
        tg_wall_ms caller_deadline_at; /* the deadline the caller gave, 0 for none */
        /* The provider said the refund is accepted but not final
         * (processing): the wall time of that first answer, 0 for never.
         * Such an operation is polled on the slow pending schedule
         * (core/policy.h) with its own budget: pending_polls counts its
         * polls against retry.pending_max_polls. */
        tg_wall_ms pending_since;
        unsigned pending_polls;
};

/* True when op's fields are what the state machine keeps (operation.c says
 * which). For assert() only: assert(op_sane(op)). */
bool op_sane(const struct op_record *op);

#endif
