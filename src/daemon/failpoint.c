/*
 * failpoint — see failpoint.h.
 */
#include "daemon/failpoint.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/log.h"

static const char *const names[] = {
    "crash_after_accept",
    "crash_after_claim",
    "crash_after_send",
    "crash_before_settle",
};

int failpoint_armed(const char **ret_armed)
{
        const char *armed = getenv("TG_FAILPOINT");

        *ret_armed = NULL;
        if (!armed || !armed[0])
                return 0;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                if (strcmp(armed, names[i]) == 0) {
                        *ret_armed = names[i];
                        return 0;
                }
        }
        log_emit(LOG_ERROR, "failpoint_unknown", json_pack("{s:s}", "failpoint", armed));
        return TG_EINVAL;
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
