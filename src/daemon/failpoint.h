/*
 * failpoint — named places in the exit where a test can make the process die
 * as abruptly as kill -9 (TG_FAILPOINT=<name> in the environment):
 * crash_after_claim (the attempt is committed, nothing sent yet) and
 * crash_before_settle (the provider answered, the outcome is not recorded).
 * Each is a line in the log, then SIGKILL; nothing else is flushed.
 */
#ifndef TG_FAILPOINT_H
#define TG_FAILPOINT_H

#include "core/operation.h"

/* Reads TG_FAILPOINT once; NULL when none is set. */
const char *failpoint_armed(void);

/* Dies at `name` when `armed` names it. */
void failpoint_hit(const char *armed, const char *name, const struct op_record *op);

#endif
