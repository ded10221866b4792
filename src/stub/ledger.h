/*
 * The stub's memory of refunds: the idempotency store (key -> payload, state
 * and first stored response, kept for a retention time) and the execution
 * ledger (operation -> how many refunds were really executed). The two share
 * one record per operation because the contract makes the key the operation
 * id; expiring a key forgets the key, never the executions.
 *
 * A key may also end failed (mode fail): the provider took the request and
 * refused the refund for good. Nothing executed (no execution is counted),
 * the failure code is kept for queries, and the stored response (the 500
 * the client was given) is what a replay of the key returns.
 *
 * Thread-safe: every function takes the ledger's own lock.
 */
#ifndef STUB_LEDGER_H
#define STUB_LEDGER_H

#include "core/tg_time.h"
#include "request.h"
#include "shape.h"

#include <stddef.h>
#include <stdint.h>

#define STUB_REFUND_ID_MAX 32
#define STUB_RESPONSE_MAX  1024

struct ledger;

enum ledger_begin {
        LEDGER_NEW,    /* key stored as running: the caller must execute it */
        LEDGER_REPLAY, /* executed before: the first stored response is copied out */
        LEDGER_REUSED, /* same key, another payload */
        LEDGER_IN_USE, /* same key still running */
};

enum ledger_status { LEDGER_NOT_FOUND, LEDGER_PROCESSING, LEDGER_SUCCEEDED, LEDGER_FAILED };

#define STUB_FAILURE_MAX 64 /* a failure code with its NUL */

/* Totals for /_stub/state. */
struct ledger_stats {
        uint64_t operations;
        uint64_t executions;
        uint64_t max_executions; /* over all operations; 1 with proper idempotency */
        uint64_t failures;       /* keys that ended failed (no execution) */
        uint64_t keys_retained;
};

/*
 * A ledger holding at most max_records operations; keys are forgotten
 * retention ns after they were first stored. seed makes refund ids
 * reproducible; shape is how a stored success response is written
 * (shape.h). Returns NULL when out of memory.
 */
struct ledger *ledger_new(size_t max_records, tg_mono_ns retention, uint64_t seed,
                          enum stub_shape shape);
void ledger_free(struct ledger *lg);

/*
 * Idempotency check for one POST at now. On LEDGER_REPLAY the stored body
 * (NUL-terminated, at most STUB_RESPONSE_MAX) is copied to ret_body and the
 * status a replay answers with to *ret_status (200 after an execution, the
 * stored status after a failure). Returns 0, or TG_EFULL when a new key
 * would pass the bound.
 */
int ledger_begin(struct ledger *lg, const struct stub_refund *req, tg_mono_ns now,
                 enum ledger_begin *ret_kind, int *ret_status, char ret_body[STUB_RESPONSE_MAX]);

/*
 * Executes the refund of a key begun with LEDGER_NEW (or re-creates it after a
 * reset): counts one execution, stores the first response, and makes queries
 * answer "processing" until now + processing. Copies the response body.
 */
int ledger_execute(struct ledger *lg, const struct stub_refund *req, tg_mono_ns now,
                   tg_wall_ms wall, tg_mono_ns processing, char ret_refund_id[STUB_REFUND_ID_MAX],
                   char ret_body[STUB_RESPONSE_MAX]);

/*
 * The next n queries of an executed key answer "processing" whatever the
 * time (mode calls: a refund that takes several calls to close). A key that
 * does not exist is ignored.
 */
void ledger_processing_queries(struct ledger *lg, const char *operation_id, unsigned n);

/*
 * Ends a key begun with LEDGER_NEW (or re-creates it after a reset) as failed
 * with failure_code: counts no execution, and stores status and body (copied,
 * at most STUB_RESPONSE_MAX - 1 bytes) as the key's first response. The
 * checkout shape passes body NULL: the refund was accepted (an action id and
 * its 202 body are made, ledger_response() gives them back) and declined.
 * Returns 0, TG_EFULL, TG_ENOMEM, or TG_EINVAL for a body or code too long.
 */
int ledger_fail(struct ledger *lg, const struct stub_refund *req, tg_mono_ns now,
                const char *failure_code, int status, const char *body);

/*
 * What a query for operation_id at now sees; ret_refund_id is set (else "")
 * once the operation executed (processing included), ret_failure_code
 * (NUL-terminated) when failed; ret_req (may be NULL) gets the payload of
 * a known operation.
 */
void ledger_query(struct ledger *lg, const char *operation_id, tg_mono_ns now,
                  enum ledger_status *ret_status, char ret_refund_id[STUB_REFUND_ID_MAX],
                  char ret_failure_code[STUB_FAILURE_MAX], struct stub_refund *ret_req);

/*
 * The stripe shape's GET /v1/refunds: the refunds of payment ("" : all),
 * newest first, after the refund starting_after ("": from the newest), at
 * most limit (1-100, else 100), as Stripe's list object {"object":"list","data":[refund
 * objects],"has_more":..}. key (may be NULL): the caller's Idempotency-Key,
 * whose record alone counts this as one of its queries (ledger_query). A
 * refund still being created is not listed. malloc'd, or NULL.
 */
#define STUB_LIST_MAX 100 /* Stripe's bound on a list's limit */
char *ledger_list_json(struct ledger *lg, const char *payment, const char *starting_after,
                       unsigned limit, const char *key, tg_mono_ns now);

/*
 * The checkout shape's GET /payments/{id}/actions: a bare JSON array,
 * newest first, of the payment's refund actions that were processed
 * (approved, or declined with their response code; one accepted and not
 * processed yet is not there), then the payment's own Capture and
 * Authorization. key as for ledger_list_json(). malloc'd, or NULL.
 */
char *ledger_actions_json(struct ledger *lg, const char *payment, const char *key, tg_mono_ns now);

/* The status and body a DONE key replays. 0 or TG_ENOTFOUND. */
int ledger_response(struct ledger *lg, const char *operation_id, int *ret_status,
                    char ret_body[STUB_RESPONSE_MAX]);

/* The operation a refund id belongs to. 0 or TG_ENOTFOUND. */
int ledger_operation_of(struct ledger *lg, const char *refund_id,
                        char ret_operation_id[STUB_KEY_MAX + 1]);

/*
 * Forgets retained keys as if their retention had passed: one key, or all
 * when key is NULL. Running keys are kept. Returns how many were forgotten.
 */
size_t ledger_expire(struct ledger *lg, const char *key);

/* Forgets everything, executions included. */
void ledger_reset(struct ledger *lg);

void ledger_stats(struct ledger *lg, struct ledger_stats *ret_stats);

/* The ledger as one JSON document (malloc'd, caller frees), or NULL. */
char *ledger_dump_json(struct ledger *lg, tg_mono_ns now);

#endif
