/*
 * operation — the sanity checker of an operation's fields (operation.h).
 *
 * op_sane() is called only inside assert() (SQLite's habit): after every
 * change of state (core/policy.c, apply()) and on every operation the exit
 * holds at each turn of the loop (daemon/exit.c). It checks what the state
 * machine itself keeps, never what a client sent: an outbox row that failed
 * validation is a sane operation in manual (MANUAL_INVALID), whatever its
 * payload holds.
 */
#include "core/operation.h"

#include <string.h>

/* A fixed-size text field ends inside its array. */
#define TERMINATED(field) (memchr((field), '\0', sizeof(field)) != NULL)

bool op_sane(const struct op_record *op)
{
        if (!op)
                return false;
        if ((unsigned)op->state >= OP_STATE_COUNT || (unsigned)op->reason >= MANUAL_REASON_COUNT ||
            (unsigned)op->last_class >= TG_CLASS_COUNT)
                return false;
        /* the key names the operation everywhere: never empty */
        if (!TERMINATED(op->req.operation_id) || op->req.operation_id[0] == '\0')
                return false;
        if (!TERMINATED(op->req.payment_id) || !TERMINATED(op->req.currency) ||
            !TERMINATED(op->req.reason) || !TERMINATED(op->req.metadata) ||
            !TERMINATED(op->req.traceparent) || !TERMINATED(op->refund_id) ||
            !TERMINATED(op->source) || !TERMINATED(op->assignee) || !TERMINATED(op->traceparent))
                return false;
        /* a case in manual says why a person must decide */
        if (op->state == OP_MANUAL && op->reason == MANUAL_NONE)
                return false;
        /* in flight: the claim counted its call */
        if (op->state == OP_IN_FLIGHT && op->attempts == 0 && op->queries == 0)
                return false;
        return true;
}
