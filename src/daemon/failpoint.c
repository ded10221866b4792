/*
 * failpoint — see failpoint.h.
 */
#include "daemon/failpoint.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"

const char *failpoint_armed(void)
{
        return getenv("TG_FAILPOINT");
}

void failpoint_hit(const char *armed, const char *name, const struct op_record *op)
{
        if (!armed || strcmp(armed, name) != 0)
                return;
        log_emit(LOG_WARN, "failpoint_kill",
                 json_pack("{s:s, s:s}", "operation_id", op->req.operation_id, "failpoint", name));
        /* As abrupt as kill -9: no cleanup, no flush of anything but the log. */
        raise(SIGKILL);
}
