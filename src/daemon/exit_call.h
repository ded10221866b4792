/*
 * exit_call — what one call of the exit is made of, apart from the loop that
 * starts it: its request id, its timeout, and the settle that records what
 * came back (the path and body come from the provider mapping, in the
 * transport). The dispatcher (dispatcher.c) decides when; this
 * module says what.
 */
#ifndef TG_EXIT_CALL_H
#define TG_EXIT_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "core/policy.h"
#include "net/transport.h"
#include "store/store.h"

/* "tg-<epoch>-<seq>-<4 hex>": unique per call of one owner (X-Request-Id;
 * never part of idempotency). */
void exit_call_request_id(char *dst, size_t size, int64_t epoch, uint64_t seq, uint32_t random);

/* A call's trace ids, minted with its request id: its span id (16 hex),
 * and the traceparent an operation without a trace starts with (a new
 * trace, whose parent id is tollgate's own). */
void exit_call_trace_ids(struct tg_rng *rng, char ret_span_id[TG_SPAN_ID_MAX + 1],
                         char ret_traceparent[TG_TRACEPARENT_MAX + 1]);

/* The traceparent header of a claimed call: the operation's trace with the
 * call's span as parent. "" when either is missing (a call logged before
 * trace context). */
void exit_call_traceparent(const struct op_record *op, const struct call_record *call,
                           char out[TG_TRACEPARENT_MAX + 1]);
/* The smaller of timeout_ms and what remains of the operation's deadline at
 * `wall`, never below 1 ms (the sweep handles the past). */
int64_t exit_call_timeout_ms(int64_t timeout_ms, const struct op_record *op, tg_wall_ms wall);

/* What to tell the store when a call ends: the call and operation claimed
 * under `epoch`, what the transport saw, its class and the policy's
 * decision; end times, the hand-off and the moment the request went on the
 * wire (its wall time is the hand-off's plus the connect). What the provider said goes
 * into the call log as its codes only, never its body. */
struct exit_call_end {
        const struct op_record *op;
        const struct call_record *call;
        int64_t epoch;
        const struct transport_result *result;
        enum tg_class cls;
        const struct policy_decision *decision;
        tg_mono_ns end_mono;
        tg_wall_ms end_wall;
        tg_mono_ns handoff_mono;
        tg_wall_ms handoff_wall;
        tg_mono_ns sent_mono;        /* on the wire; 0: never sent */
        tg_mono_ns planned_mono;     /* when it was to go on the wire (not_before) */
        unsigned in_flight_at_start; /* open calls at its hand-off, itself included */
};
void exit_call_settle_args(const struct exit_call_end *end, struct settle_args *ret_args);

#endif
