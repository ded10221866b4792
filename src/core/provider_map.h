/*
 * provider_map — how a provider's contract differs from shared/PROVIDER.md,
 * as data, pure: what the refund POST carries and where it goes (the
 * request map), and where a response says what happened (the reply map).
 * The defaults are PROVIDER.md's contract; the config ([provider] keys)
 * changes them, and every piece is parsed and checked at start so that a
 * mapping that cannot be evaluated stops the program with a message.
 *
 * Request: the body is JSON or application/x-www-form-urlencoded, made of
 * named fields whose values are templates (core/template.h) over the
 * refund's fields. A field whose template is exactly one optional field
 * ({reason}, {metadata.KEY}, {metadata}) that the refund lacks is left out.
 * {amount} alone is a JSON number; {metadata} alone is a JSON object (form:
 * one NAME[KEY]=VALUE per pair); anything else is a string. In JSON a dot
 * in a field name nests ("metadata.order" is {"metadata":{"order":..}}); in
 * a form the name is written as is. The POST path and the query path are
 * templates too; a query path that needs {refund_id} falls back, while the
 * provider has not told us its refund id, to a path by our key.
 *
 * Reply: each thing tollgate reads (status, refund id, error code, failure
 * code, the provider's "retryable" flag) comes from a field source: one or
 * more JSON paths ("error.code", "data.0.status": a number is an array
 * index) or a response header ("header:Stripe-Should-Retry"); the first
 * present wins. The provider's status words are mapped onto succeeded,
 * failed and processing, which the classification table
 * (core/classify.h) reads; a word in no list passes through unchanged, so a
 * classify.rule may still name it.
 *
 * JSON itself is read and written in src/net (provider_reply.c,
 * provider_request.c); this module holds the rules and everything else.
 */
#ifndef TG_PROVIDER_MAP_H
#define TG_PROVIDER_MAP_H

#include <stdbool.h>
#include <stddef.h>

#include "core/classify.h"
#include "core/encode.h"
#include "core/operation.h"
#include "core/template.h"

/* ---- request ---------------------------------------------------------------- */

enum body_format {
        BODY_FORMAT_JSON,
        BODY_FORMAT_FORM,
};

#define REQUEST_MAP_FIELDS_MAX 16
#define BODY_FIELD_NAME_MAX    63

struct body_field {
        char name[BODY_FIELD_NAME_MAX + 1];
        struct template value;
};

/* Plain data (large: keep it on the heap). */
/* The ways a query learns what became of a refund (provider.reconcile),
 * tried in the map's order: the first that applies makes the path. */
enum reconcile_strategy {
        RECONCILE_REFUND_ID, /* query_path by the provider's refund id, once known */
        RECONCILE_KEY,       /* by our key: query_path, or query_fallback_path */
        RECONCILE_LIST,      /* list_path: the payment's refunds, ours matched by id */
};
#define RECONCILE_STRATEGIES 3

struct request_map {
        enum body_format format;
        unsigned nfields;
        struct body_field fields[REQUEST_MAP_FIELDS_MAX];
        struct template refunds_path;
        struct template query_path;
        struct template query_fallback_path; /* when query_path needs {refund_id} */
        bool has_fallback;
        struct template list_path; /* GET the payment's refunds (list and match) */
        bool has_list;
        /* the query parameter that names the next page's start (Stripe's
         * starting_after); "": the list is read one page at a time */
        char list_cursor_param[64];
        /* the query strategies in order; nreconcile == 0: the order of the
         * enum over the paths that are set */
        unsigned nreconcile;
        enum reconcile_strategy reconcile[RECONCILE_STRATEGIES];
        /* `replay` named: once the queries are spent, an unknown outcome is
         * sent again with its key (core/policy.h, policy_config.replay) */
        bool replay;
        /* `notification` named: no query exists; the outcome comes only by
         * the provider's notification (webhook), awaited up to a deadline
         * (core/policy.h, policy_config.notification); no other strategy */
        bool notification;
};

/* PROVIDER.md's contract: JSON {operation_id, payment_id, amount, currency},
 * POST /v1/refunds, GET /v1/refunds/{operation_id}. */
void request_map_default(struct request_map *ret_map);

/* Parses "NAME TEMPLATE" (one [provider] body_field line). 0 or TG_EPARSE
 * with err filled. */
int body_field_parse(const char *spec, struct body_field *ret_field, struct template_error *err);

enum map_path {
        MAP_PATH_REFUNDS, /* refund fields, no {refund_id} */
        MAP_PATH_QUERY,   /* refund fields and {refund_id}; needs {operation_id} or {refund_id} */
        MAP_PATH_QUERY_FALLBACK, /* refund fields; needs {operation_id} */
        MAP_PATH_LIST,           /* refund fields; no {refund_id} */
};

/* Parses one path template: it starts with '/', has no spaces or control
 * bytes, and uses the fields its kind allows. 0 or TG_EPARSE. */
int map_path_parse(enum map_path kind, const char *text, struct template *ret,
                   struct template_error *err);

/* Checks the map as a whole: field names unique, JSON names that nest
 * consistently (no "a" beside "a.b"), a query path with {refund_id} has a
 * fallback or a list path (the query while the refund id is unknown), a
 * fallback is not set without it, and every strategy of provider.reconcile
 * has its path. 0 or TG_EINVAL with err
 * filled; *ret_key (may be NULL) names the key at fault, without its
 * section ("body_field", "query_fallback_path"). */
int request_map_check(const struct request_map *map, const char **ret_key,
                      struct template_error *err);

/* Parses provider.reconcile: 1-3 of the words refund_id, key, list (the
 * query strategies, in order) and optionally replay, separated by commas
 * or spaces, none twice; or `notification` (optionally with replay) alone:
 * the provider offers no query, its notification is the only source. 0 or
 * TG_EPARSE (map untouched). */
int reconcile_parse(const char *text, struct request_map *map, struct template_error *err);

/* The word of a strategy ("refund_id", "key", "list"). */
const char *reconcile_name(enum reconcile_strategy strategy);

/* The strategy a query for these values takes: the first in the map's
 * order whose path is set and can be made (refund_id needs the provider's
 * id). 0, or TG_ENOTFOUND when none applies (a checked map with a key or
 * list strategy always has one). */
int request_map_strategy(const struct request_map *map, const struct template_values *values,
                         enum reconcile_strategy *ret_strategy);

/* The values of one operation for the templates: its request fields, its
 * metadata (already parsed: src/net reads the stored JSON) and the
 * provider's refund id (NULL or "" when unknown). amount_buf holds the
 * amount in minor units and as a decimal string, and must outlive *ret;
 * {amount_decimal} has no value (NULL) for a currency without an ISO 4217
 * exponent in core/currency.h (intake refuses such a refund where the
 * mapping uses it). */
#define MAP_AMOUNT_BUF 48
void map_values_for(const struct refund_request *req, const struct refund_metadata *metadata,
                    const char *refund_id, char amount_buf[MAP_AMOUNT_BUF],
                    struct template_values *ret);

/* Appends the path of a POST or a query (the query's path by
 * request_map_strategy()). 0, TG_EFULL, TG_ENOTFOUND (cannot happen for a
 * checked map). */
int request_map_path(const struct request_map *map, enum classify_request request,
                     const struct template_values *values, struct tg_strbuf *out);

/* Appends a list page's cursor to a list path request_map_path() made in
 * out: "&PARAM=CURSOR" ("?PARAM=CURSOR" when the path has no query yet),
 * PARAM the map's list_cursor_param, the cursor percent-encoded as a
 * template's values are. 0, TG_EINVAL (no parameter set, or an empty
 * cursor), TG_EFULL. */
int request_map_list_cursor(const struct request_map *map, const char *cursor,
                            struct tg_strbuf *out);

/* True when text may be a list's cursor parameter (list_cursor_param): 1
 * to 63 bytes of RFC 3986 unreserved characters (letters, digits, "-",
 * ".", "_", "~"), so it needs no encoding. */
bool list_cursor_param_ok(const char *text);

/* True when the field is left out for these values (see above). */
bool body_field_omitted(const struct body_field *field, const struct template_values *values);

/* Appends the form-encoded body (the map's format must be form). 0 or
 * TG_EFULL. */
int request_map_form_body(const struct request_map *map, const struct template_values *values,
                          struct tg_strbuf *out);

/* ---- reply ------------------------------------------------------------------ */

#define FIELD_PATH_SEGS_MAX 8
#define FIELD_PATH_NAME_MAX 47
#define FIELD_SOURCE_ALTS   3

struct field_path {
        bool header; /* header:NAME */
        char header_name[64];
        unsigned nseg;
        struct field_seg {
                bool is_index;
                unsigned index;
                char name[FIELD_PATH_NAME_MAX + 1];
        } seg[FIELD_PATH_SEGS_MAX];
};

/* n == 0: this thing is not read. */
struct field_source {
        unsigned n;
        struct field_path alt[FIELD_SOURCE_ALTS];
};

#define STATUS_VALUES_MAX 8

struct status_list {
        unsigned n;
        char value[STATUS_VALUES_MAX][32];
};

struct reply_map {
        struct field_source status, refund_id, error_code, failure_code, retryable;
        struct status_list succeeded, failed, processing;
        /* a list answer (list_path): the array of refunds, the field of an
         * item that holds our operation id, and the flag that says more
         * pages follow (n == 0: the list is complete) */
        struct field_source list_items, list_match, list_more;
        /* error codes meaning "a request with this key is still being
         * processed" (provider.in_progress_codes; n == 0: none) */
        struct status_list in_progress;
        /* a webhook event's outcome, from the event's root
         * (provider.webhook_status_field; n == 0: the object's status) */
        struct field_source event_status;
};

/* PROVIDER.md: status, refund_id, error.code, failure_code, error.retryable;
 * the words succeeded, failed, processing. */
void reply_map_default(struct reply_map *ret_map);

/* Parses up to three alternatives separated by spaces, each "a.b.0.c"
 * (names of [A-Za-z0-9_-], at most 8 steps; a number is an array index),
 * "." (the answer itself, no step: a list answer that is a bare JSON
 * array) or "header:NAME". "" reads nothing. 0 or TG_EPARSE. */
int field_source_parse(const char *text, struct field_source *ret, struct template_error *err);

/* Parses "word,word" (spaces allowed around commas): 1-8 words of
 * [A-Za-z0-9._:-], each at most 30 bytes. 0 or TG_EPARSE. */
int status_list_parse(const char *text, struct status_list *ret, struct template_error *err);

/* The three lists share no word. 0, or TG_EINVAL with err filled and
 * ret_lists (may be NULL) naming the two lists that share one (0
 * succeeded, 1 failed, 2 processing). */
int reply_map_check(const struct reply_map *map, unsigned ret_lists[2], struct template_error *err);

/* The provider's status word as classify reads it: "succeeded", "failed"
 * or "processing" when a list holds it, else raw itself. dst always
 * terminated. */
void reply_map_status(const struct reply_map *map, const char *raw, char *dst, size_t dst_size);

/* A retryable flag's text ("true", "false", a header's value) as a flag:
 * true/yes/1 and false/no/0 (any case), anything else absent. */
enum tg_flag reply_flag_parse(const char *text);

#endif
