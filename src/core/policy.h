/*
 * policy — the operation state machine of DESIGN.md, pure. Given an
 * operation as stored, what the call that just ended said (as a tg_class),
 * and now, it decides the next state and when the operation may next pass the
 * exit. It never guesses: an unknown outcome is reconciled by querying with
 * the same key; only a query's not_found (inside key retention) allows a
 * re-send, with the same key, as the next attempt.
 *
 *   pending -> in_flight -> succeeded | rejected | retry_wait | unknown | manual
 *   retry_wait --(due)--> in_flight (POST, same key)
 *   unknown    --(due)--> in_flight (query, same key)
 *   manual     --(operator re-send)--> retry_wait, kind manual
 *
 * Budgets: attempt_limit POSTs (3), deadline_at (acceptance + 15 min), a query
 * budget with its own spacing, and key retention (23 h from the key's first
 * use). Anything past a budget goes to manual, with the reason; a retry whose
 * earliest time falls past the deadline goes to manual now, not later.
 *
 * Wall time throughout: these decisions are stored and outlive the process.
 */
#ifndef TG_POLICY_H
#define TG_POLICY_H

#include <stdint.h>

#include "core/backoff.h"
#include "core/classify.h"
#include "core/rng.h"
#include "core/tg_time.h"

enum op_state {
        OP_PENDING,
        OP_IN_FLIGHT,
        OP_RETRY_WAIT,
        OP_UNKNOWN,
        OP_SUCCEEDED,
        OP_REJECTED,
        OP_MANUAL,
};
#define OP_STATE_COUNT 7

enum manual_reason {
        MANUAL_NONE,
        MANUAL_ATTEMPTS_EXHAUSTED, /* attempt_limit POSTs made, still no answer */
        MANUAL_DEADLINE,           /* no final answer by deadline_at */
        MANUAL_QUERY_BUDGET,       /* query_limit queries made, still no answer */
        MANUAL_KEY_REUSED,         /* provider: same key, other payload */
        MANUAL_KEY_RETENTION,      /* a re-send would fall past key retention */
        MANUAL_INVALID,            /* an outbox row that failed validation */
};
#define MANUAL_REASON_COUNT 7

/* Kinds of call, as the call log records them. */
enum tg_call_kind {
        TG_KIND_FIRST,
        TG_KIND_RETRY,
        TG_KIND_QUERY,
        TG_KIND_MANUAL,
};

struct policy_config {
        unsigned max_attempts;     /* POSTs per operation, first included (3) */
        int64_t deadline_ms;       /* acceptance to final answer (900000) */
        unsigned max_queries;      /* reconciliation queries per operation (10) */
        int64_t query_interval_ms; /* spacing of one operation's queries (2000) */
        int64_t key_retention_ms;  /* never re-send a key older than this (23 h) */
        struct backoff_config backoff;
};

void policy_config_default(struct policy_config *ret_config);
int policy_config_check(const struct policy_config *config);

/* The operation as stored, at the moment its call ended. */
struct policy_op {
        enum op_state state;    /* the state before the call (in_flight) */
        unsigned attempts;      /* POSTs made, including the one that just ended */
        unsigned attempt_limit; /* POSTs allowed in all */
        unsigned queries;       /* queries made, including the one that just ended */
        unsigned query_limit;   /* queries allowed in all */
        tg_wall_ms accepted_at;
        tg_wall_ms deadline_at;    /* no automatic call after this */
        tg_wall_ms key_first_used; /* first POST with this key (key age counts from here) */
        int64_t last_wait_ms;      /* previous backoff wait, <= 0 if none */
};

/* The call that just ended. */
struct policy_event {
        enum classify_request request; /* POST or query */
        enum tg_class cls;
        int64_t retry_after_ms; /* < 0: none */
        tg_wall_ms now;
};

struct policy_decision {
        enum op_state next;        /* never pending or in_flight */
        tg_wall_ms next_run_at;    /* retry_wait / unknown: earliest next call; else 0 */
        enum manual_reason reason; /* manual: why; else MANUAL_NONE */
        int64_t wait_ms;           /* the wait chosen (backoff or interval), 0 if none */
};

/* Decides what follows a finished call. Returns 0 (and fills *ret_decision),
 * or TG_EINVAL for an impossible input (e.g. a query class for a POST).
 * The rng is used for backoff jitter only. */
int policy_after_call(const struct policy_config *config, const struct policy_op *op,
                      const struct policy_event *event, struct tg_rng *rng,
                      struct policy_decision *ret_decision);

/* An in_flight operation found by a new owner (its call may or may not have
 * gone out, its outcome was never recorded): unknown, to be reconciled now,
 * or manual if the deadline has passed (MANUAL_DEADLINE) or no query is left
 * to reconcile with (MANUAL_QUERY_BUDGET). TG_ESTATE unless in_flight. */
int policy_after_takeover(const struct policy_config *config, const struct policy_op *op,
                          tg_wall_ms now, struct policy_decision *ret_decision);

/* Past a deadline with no call running (a due retry_wait/unknown that the
 * exit could not reach in time): manual with MANUAL_DEADLINE if now >
 * deadline_at, else returns TG_EAGAIN and leaves *ret_decision untouched. */
int policy_check_deadline(const struct policy_op *op, tg_wall_ms now,
                          struct policy_decision *ret_decision);

/* The check a due operation passes just before the exit starts its call
 * (the exit may let it through later than next_run_at): a re-send
 * (retry_wait with attempts > 0) whose key is at or past key_first_used +
 * key_retention goes to manual with MANUAL_KEY_RETENTION, so that no POST
 * leaves with an expired key; then policy_check_deadline(). TG_EAGAIN
 * (*ret_decision untouched) when the call may go; TG_ESTATE for a state that
 * is not waiting for the exit. */
int policy_check_due(const struct policy_config *config, const struct policy_op *op, tg_wall_ms now,
                     struct policy_decision *ret_decision);

/* An operator asks to re-send a manual operation with its same key. Refused
 * with TG_ESTATE unless the state is manual, and with TG_ERANGE when the key
 * is past retention (a re-send could execute a second refund). On success
 * the operation gets one more POST (attempt_limit = attempts + 1), a fresh
 * query budget and deadline, and is due now. */
int policy_operator_resend(const struct policy_config *config, const struct policy_op *op,
                           tg_wall_ms now, struct policy_op *ret_op,
                           struct policy_decision *ret_decision);

/* The kind of the next call for a due operation: retry_wait -> retry (or
 * manual after an operator re-send), unknown -> query, pending -> first. */
enum tg_call_kind policy_next_kind(enum op_state state, int operator_resend);

const char *op_state_name(enum op_state state);
int op_state_parse(const char *name, enum op_state *ret_state);
const char *manual_reason_name(enum manual_reason reason);
/* The inverse of manual_reason_name(), for reading a stored reason back.
 * 0 or TG_EINVAL. */
int manual_reason_parse(const char *name, enum manual_reason *ret_reason);
const char *tg_call_kind_name(enum tg_call_kind kind);
int tg_call_kind_parse(const char *name, enum tg_call_kind *ret_kind);

#endif
