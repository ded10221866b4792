/*
 * exit_call — one call's request id, timeout and settle. See exit_call.h.
 */
#include "daemon/exit_call.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"
#include "core/traceparent.h"

void exit_call_request_id(char *dst, size_t size, int64_t epoch, uint64_t seq, uint32_t random)
{
        snprintf(dst, size, "tg-%lld-%llu-%04x", (long long)epoch, (unsigned long long)seq,
                 (unsigned)(random & 0xffff));
}

void exit_call_trace_ids(struct tg_rng *rng, char ret_span_id[TG_SPAN_ID_MAX + 1],
                         char ret_traceparent[TG_TRACEPARENT_MAX + 1])
{
        struct trace_context tc;

        traceparent_span_id(rng, ret_span_id);
        traceparent_new(rng, &tc);
        traceparent_format(&tc, ret_traceparent);
}

void exit_call_traceparent(const struct op_record *op, const struct call_record *call,
                           char out[TG_TRACEPARENT_MAX + 1])
{
        if (traceparent_child(op->traceparent, call->span_id, out) < 0)
                out[0] = '\0';
}
int64_t exit_call_timeout_ms(int64_t timeout_ms, const struct op_record *op, tg_wall_ms wall)
{
        int64_t t = timeout_ms;
        int64_t left = op->deadline_at - wall;

        if (left < t)
                t = left;
        return t < 1 ? 1 : t;
}

void exit_call_settle_args(const struct exit_call_end *e, struct settle_args *ret_args)
{
        const struct transport_result *res = e->result;
        struct settle_args sa;

        memset(&sa, 0, sizeof(sa));
        sa.call_id = e->call->id;
        sa.op_id = e->op->id;
        sa.epoch = e->epoch;
        sa.sent = res->sent;
        sa.cls = e->cls;
        sa.http_status = res->reply.http_status;
        sa.end_mono = e->end_mono;
        sa.now = e->end_wall;
        sa.latency_us = res->latency_us;
        sa.handoff_mono = e->handoff_mono;
        sa.handoff_wall = e->handoff_wall;
        sa.in_flight_at_start = e->in_flight_at_start;
        if (e->sent_mono > 0) {
                sa.sent_mono = e->sent_mono;
                sa.sent_wall = e->handoff_wall + (e->sent_mono - e->handoff_mono) / TG_NS_PER_MS;
        } else if (e->planned_mono > e->handoff_mono && e->handoff_mono > 0) {
                /* never sent: it started at its slot, as the pacer counts it */
                sa.planned_mono = e->planned_mono;
                sa.planned_wall =
                    e->handoff_wall + (e->planned_mono - e->handoff_mono) / TG_NS_PER_MS;
        }
        sa.decision = *e->decision;
        /* What the provider said, for the operator: its codes only, never
         * its body. */
        if (res->error[0] && res->failure != TRANSPORT_OK)
                /* the cause first, so that a TLS misconfiguration reads at once */
                snprintf(sa.error, sizeof(sa.error), "%s: %.200s",
                         transport_failure_name(res->failure), res->error);
        else if (res->error[0])
                snprintf(sa.error, sizeof(sa.error), "%s", res->error);
        else if (res->reply.failure_code[0])
                snprintf(sa.error, sizeof(sa.error), "provider failure_code %s",
                         res->reply.failure_code);
        else if (res->reply.error_code[0])
                snprintf(sa.error, sizeof(sa.error), "provider error.code %s",
                         res->reply.error_code);
        snprintf(sa.refund_id, sizeof(sa.refund_id), "%s", res->reply.refund_id);
        *ret_args = sa;
}
