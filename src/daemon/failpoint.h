/*
 * failpoint — named places where a test can make the process die as
 * abruptly as kill -9 (TG_FAILPOINT=<name> in the environment). The names,
 * in the order a refund meets them:
 *   crash_after_accept   the API committed a new refund, the caller has no
 *                        answer yet (it sends the same request again);
 *   crash_after_claim    the attempt is committed, nothing sent yet;
 *   crash_after_send     the request is on the wire, no answer yet;
 *   crash_before_settle  the provider answered, the outcome is not recorded.
 * Each is a line in the log, then SIGKILL; nothing else is flushed.
 * tests/integration/test_failpoints.py runs every name on both stores and
 * fails when a name here has no scenario there.
 */
#ifndef TG_FAILPOINT_H
#define TG_FAILPOINT_H

#include "core/operation.h"

/* Reads TG_FAILPOINT: 0 with *ret_armed NULL when none is set, or the
 * name; TG_EINVAL for a name that is not one of the above (a typo must not
 * quietly test nothing). */
int failpoint_armed(const char **ret_armed);

/* Dies at `name` when `armed` names it. */
void failpoint_hit(const char *armed, const char *name, const struct op_record *op);

#endif
