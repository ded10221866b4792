/*
 * classify — what the provider actually said, turned into one class that the
 * policy acts on. Never "all 4xx" or "all 5xx" as one decision: every
 * decision comes from a rule table (defaults from shared/PROVIDER.md) that
 * configuration can extend. Rules added later take precedence over the
 * defaults; the first matching rule wins.
 *
 * Before the table, the transport result decides what the table cannot:
 *   POST:  not sent -> not_sent (retryable, nothing executed)
 *          timed out after send / reset -> unknown
 *   query: anything but a complete response -> no_answer
 *   key in progress (any status): POST unknown, query no_answer
 *   list:  a 2xx list without ours -> not_found when the list is
 *          complete, no_answer when more pages follow (never a guess
 *          from a page), processing when the provider had told us the
 *          refund's id (it took the refund: not listed yet is pending)
 * A POST may be classified processing by a rule (Checkout.com's 202:
 * accepted, not final): it is asked about like an unknown one, and the
 * call log says the provider took it.
 * A complete response that no rule matches is unknown (POST) or no_answer
 * (query): we never guess that something did or did not happen.
 *
 * struct provider_reply is filled by src/net from the real response; this
 * module does no parsing of bodies itself.
 */
#ifndef TG_CLASSIFY_H
#define TG_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/names.h"

enum tg_transport_result {
        TG_TR_NOT_SENT,           /* refused, DNS failure, connect timeout: no byte left */
        TG_TR_TIMEOUT_AFTER_SEND, /* request (partly) sent, no full answer in time */
        TG_TR_RESET,              /* connection reset/closed before a full answer */
        TG_TR_COMPLETE,           /* a full HTTP response arrived */
};

/* enum tg_class, the class of an outcome, and its words: core/names.h. */

enum classify_request {
        CLASSIFY_POST,
        CLASSIFY_QUERY,
};

/* A yes/no the provider may or may not have said. Zero is "not said". */
enum tg_flag {
        TG_FLAG_ABSENT = 0,
        TG_FLAG_FALSE,
        TG_FLAG_TRUE,
};

/* What a list answer (provider.list_path) said of our refund. */
enum reply_list {
        REPLY_LIST_NONE = 0, /* not a list answer (or not readable as one) */
        REPLY_LIST_FOUND,    /* ours is in it: the fields below are its item's */
        REPLY_LIST_ABSENT,   /* not in it, and the list is complete */
        REPLY_LIST_PARTIAL,  /* not in this page, and more pages follow */
        REPLY_LIST_NOT_YET,  /* not in it, but the provider told us its refund id */
};

/* What src/net extracted from one call. Strings are NUL-terminated, "" when
 * absent; they are truncated to fit, never overflowed. */
struct provider_reply {
        enum tg_transport_result transport;
        int http_status;        /* 0 when no response */
        bool body_is_json;      /* body parsed as a JSON object */
        char error_code[64];    /* body .error.code */
        char status[32];        /* body .status: succeeded, failed, processing, ... */
        char refund_id[128];    /* body .refund_id */
        char failure_code[64];  /* body .failure_code (a query's "failed") */
        enum tg_flag retryable; /* the provider's own "retryable" mark (error.retryable) */
        enum reply_list list;   /* a list answer's verdict on our refund */
        /* the error code says a request with this key is still being
         * processed (provider.in_progress_codes: Checkout.com's 429 of that
         * kind), whatever the status: not a rate limit */
        bool key_in_progress;
        char list_cursor[128]; /* PARTIAL: the last item's refund id (the next page's start) */
};

/* What a rule wants of the reply's retryable mark. */
enum classify_want_flag {
        CLASSIFY_FLAG_ANY = 0,
        CLASSIFY_FLAG_ABSENT, /* "-" */
        CLASSIFY_FLAG_FALSE,
        CLASSIFY_FLAG_TRUE,
};

/* One rule: matches request kind, a status range, and optionally the error
 * code and/or body status ("" = any; "-" = must be absent) and the
 * provider's retryable mark. */
struct classify_rule {
        enum classify_request request;
        int status_lo, status_hi;
        char error_code[64];
        char body_status[32];
        enum tg_class cls;
        enum classify_want_flag retryable;
};

struct classifier;

#define CLASSIFIER_MAX_RULES 128

/* A classifier holding the default rules of shared/PROVIDER.md. The caller
 * owns it; free with classifier_free(). 0 or TG_ENOMEM. */
int classifier_new_default(struct classifier **ret_classifier);
void classifier_free(struct classifier *classifier);

/* Adds a rule that takes precedence over every rule added before it.
 * 0, TG_EINVAL (bad rule), TG_EFULL (CLASSIFIER_MAX_RULES reached). */
int classifier_add_rule(struct classifier *classifier, const struct classify_rule *rule);

/* Parses the config syntax of one rule:
 *   "<post|query> <status>[-<status>] [code=<error_code>] [status=<body_status>]
 *    [retryable=<true|false|->] => <class>"
 * e.g. "post 409 code=idempotency_key_in_use => unknown". Class names as
 * tg_class_name(). 0 or TG_EPARSE; *ret_rule untouched on failure. */
int classify_rule_parse(const char *text, struct classify_rule *ret_rule);

enum tg_class classify(const struct classifier *classifier, enum classify_request request,
                       const struct provider_reply *reply);

/* tg_class_name() and tg_class_parse(): core/names.h. */

/* Copies at most dst_size-1 bytes of src (stopping at NUL) and terminates.
 * Used to fill struct provider_reply safely. */
void classify_copy_field(char *dst, size_t dst_size, const char *src, size_t src_len);

#endif
