/*
 * render — JSON of stored records (see the header). Texts that came from the
 * store were validated on the way in (ids, operator texts) or are ours
 * (errors of the transport); a text jansson refuses (bad UTF-8) becomes
 * null rather than failing the whole answer.
 */
#include "daemon/render.h"

#include <stdio.h>

#include "core/tg_error.h"

static json_t *text_or_null(const char *s)
{
        json_t *v = s[0] ? json_string(s) : NULL;
        return v ? v : json_null();
}

static json_t *text_or_empty(const char *s)
{
        json_t *v = json_string(s);
        return v ? v : json_null();
}

json_t *render_call(const struct call_record *call, bool with_op)
{
        json_t *o = json_pack(
            "{s:I, s:s, s:i, s:o, s:I, s:o, s:o, s:o, s:o, s:o}", "id", (json_int_t)call->id,
            "kind", tg_call_kind_name(call->kind), "attempt", (int)call->attempt, "request_id",
            text_or_empty(call->request_id), "start_wall", (json_int_t)call->start_wall, "end_wall",
            call->ended ? json_integer(call->end_wall) : json_null(), "class",
            call->ended ? json_string(tg_class_name(call->cls)) : json_null(), "http_status",
            call->http_status ? json_integer(call->http_status) : json_null(), "latency_ms",
            call->ended ? json_integer(call->latency_us / 1000) : json_null(), "error",
            text_or_null(call->error));
        if (!o)
                return NULL;
        /* What verify and the timeline need: monotonic start (when the
         * request went on the wire: the spacing the provider sees), the
         * hand-off to the transport and the connect between them, in-flight
         * at start, the owner epoch. */
        json_object_set_new(o, "start_mono_ns", json_integer(call->start_mono));
        if (call->handoff_mono > 0) {
                json_object_set_new(o, "handoff_mono_ns", json_integer(call->handoff_mono));
                json_object_set_new(o, "handoff_wall", json_integer(call->handoff_wall));
                json_object_set_new(
                    o, "connect_us",
                    call->sent && call->start_mono >= call->handoff_mono
                        ? json_integer((call->start_mono - call->handoff_mono) / TG_NS_PER_US)
                        : json_null());
        } else if (call->handoff_mono == 0) {
                /* claimed, not (or not yet known to be) handed over: the
                 * start is the claim's; rows from before say nothing */
                json_object_set_new(o, "handoff_mono_ns", json_null());
                json_object_set_new(o, "handoff_wall", json_null());
                json_object_set_new(o, "connect_us", json_null());
        }
        json_object_set_new(o, "end_mono_ns",
                            call->ended ? json_integer(call->end_mono) : json_null());
        json_object_set_new(o, "in_flight", json_integer(call->in_flight_at_start));
        json_object_set_new(o, "epoch", json_integer(call->epoch));
        json_object_set_new(o, "sent", call->ended ? json_boolean(call->sent) : json_null());
        /* a claim given back before it reached the transport: not a call */
        json_object_set_new(o, "released", json_boolean(store_call_released(call)));
        /* W3C trace context: the operation's trace, this call's span */
        json_object_set_new(o, "trace_id", text_or_null(call->trace_id));
        json_object_set_new(o, "span_id", text_or_null(call->span_id));
        if (with_op)
                json_object_set_new(o, "operation_id", text_or_empty(call->operation_id));
        return o;
}

json_t *render_audit(const struct audit_record *a)
{
        return json_pack("{s:I, s:I, s:s, s:o, s:o, s:o}", "id", (json_int_t)a->id, "at",
                         (json_int_t)a->at, "action", a->action, "operator",
                         text_or_empty(a->operator_name), "reason", text_or_empty(a->reason),
                         "detail", text_or_empty(a->detail));
}

json_t *render_op(const struct op_record *op)
{
        bool waiting = op->state == OP_RETRY_WAIT || op->state == OP_UNKNOWN;
        char status_url[32 + TG_OP_ID_MAX];
        json_t *o;

        snprintf(status_url, sizeof(status_url), "/v1/refunds/%s", op->req.operation_id);
        o = json_pack(
            "{s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:I, s:o, s:o, s:o}", "operation_id",
            op->req.operation_id, "state", op_state_name(op->state), "status_url", status_url,
            "payment_id", op->req.payment_id, "amount", (json_int_t)op->req.amount, "currency",
            op->req.currency, "accepted_at", (json_int_t)op->accepted_at, "deadline_at",
            (json_int_t)op->deadline_at, "next_run_at",
            waiting ? json_integer(op->next_run_at) : json_null(), "reason",
            op->state == OP_MANUAL ? json_string(manual_reason_name(op->reason)) : json_null(),
            "refund_id", text_or_null(op->refund_id));
        if (!o)
                return NULL;
        json_object_set_new(o, "attempts_made", json_integer(op->attempts));
        json_object_set_new(o, "attempt_limit", json_integer(op->attempt_limit));
        json_object_set_new(o, "queries_made", json_integer(op->queries));
        json_object_set_new(o, "query_limit", json_integer(op->query_limit));
        json_object_set_new(o, "updated_at", json_integer(op->updated_at));
        json_object_set_new(o, "operator_resend", json_boolean(op->operator_resend));
        /* who owns the manual case (kept after it is closed); null: nobody */
        json_object_set_new(o, "assignee", text_or_null(op->assignee));
        json_object_set_new(o, "caller_deadline_at",
                            op->caller_deadline_at > 0 ? json_integer(op->caller_deadline_at)
                                                       : json_null());
        /* the provider reported it accepted, not final: since when, and
         * the polls made since (null, 0: never) */
        json_object_set_new(o, "pending_since",
                            op->pending_since > 0 ? json_integer(op->pending_since) : json_null());
        json_object_set_new(o, "pending_polls_made", json_integer(op->pending_polls));
        json_object_set_new(o, "traceparent", text_or_null(op->traceparent));
        json_object_set_new(o, "trace_id",
                            op->traceparent[0] ? json_stringn(op->traceparent + 3, TG_TRACE_ID_MAX)
                                               : json_null());
        /* "reason" above is why a person must look; the refund's own reason
         * as the client gave it is refund_reason. */
        json_object_set_new(o, "refund_reason", text_or_null(op->req.reason));
        json_object_set_new(o, "metadata",
                            op->req.metadata[0] ? json_loads(op->req.metadata, 0, NULL)
                                                : json_null());
        json_object_set_new(o, "account", json_string(op->req.account));
        return o;
}

struct render_list {
        json_t *array;
        unsigned max;
        unsigned released; /* calls: claims given back, not listed */
};

static int render_add_call(const struct call_record *call, void *userdata)
{
        struct render_list *l = userdata;
        json_t *o;

        if (store_call_released(call)) {
                l->released++;
                return 0;
        }
        if (json_array_size(l->array) >= l->max)
                return 1;
        o = render_call(call, false);
        if (!o || json_array_append_new(l->array, o) < 0)
                return TG_ENOMEM;
        return 0;
}

static int render_add_audit(const struct audit_record *audit, void *userdata)
{
        struct render_list *l = userdata;
        json_t *o;

        if (json_array_size(l->array) >= l->max)
                return 1;
        o = render_audit(audit);
        if (!o || json_array_append_new(l->array, o) < 0)
                return TG_ENOMEM;
        return 0;
}

int render_op_full(struct store *store, const struct op_record *op, json_t **ret_json)
{
        struct render_list calls = {.array = json_array(), .max = RENDER_MAX_OP_CALLS};
        struct render_list audit = {.array = json_array(), .max = RENDER_MAX_AUDIT};
        json_t *o = render_op(op);
        int r = TG_ENOMEM;

        if (!o || !calls.array || !audit.array)
                goto fail;
        r = store_list_op_calls(store, op->id, render_add_call, &calls);
        if (r >= 0)
                r = store_list_audit(store, op->id, render_add_audit, &audit);
        if (r < 0)
                goto fail;
        /* the calls made; claims given back unsent are in the call log */
        json_object_set_new(o, "attempts", calls.array);
        json_object_set_new(o, "released_claims", json_integer(calls.released));
        json_object_set_new(o, "audit", audit.array);
        *ret_json = o;
        return 0;
fail:
        json_decref(o);
        json_decref(calls.array);
        json_decref(audit.array);
        return r;
}
