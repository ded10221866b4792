/*
 * render — the JSON shapes of stored records, shared by the HTTP API and the
 * CLI so that `tollgate manual show` prints what GET /v1/manual/{id} answers.
 * Every function returns a new jansson reference owned by the caller, or
 * NULL when out of memory (or, for render_op_full, a negative code).
 */
#ifndef TG_RENDER_H
#define TG_RENDER_H

#include <jansson.h>
#include <stdbool.h>

#include "store/store.h"

/* At most this many calls are listed with one operation. */
#define RENDER_MAX_OP_CALLS 1000
#define RENDER_MAX_AUDIT    1000

/* One call log row (its trace_id and span_id included); with_op adds
 * operation_id. */
json_t *render_call(const struct call_record *call, bool with_op);
/* One audit row. */
json_t *render_audit(const struct audit_record *audit);
/* An operation: operation_id, state, status_url, payment_id, amount,
 * currency, accepted_at, deadline_at, next_run_at, reason, refund_id,
 * attempts_made, attempt_limit, queries_made, query_limit, updated_at,
 * operator_resend, assignee (null: nobody), caller_deadline_at (null: none
 * given), pending_since (null: the provider never said pending) and
 * pending_polls_made, traceparent and trace_id (null: none yet). */
json_t *render_op(const struct op_record *op);
/* render_op() plus "attempts" (its calls, oldest first) and "audit" (its
 * audit rows, oldest first), read from the store. 0, TG_ENOMEM or the
 * store's code. */
int render_op_full(struct store *store, const struct op_record *op, json_t **ret_json);

#endif
