/*
 * holds — provider-wide holds, pure. See holds.h.
 *
 * Rules: a complete 429 or 503 holds for its Retry-After (already parsed and
 * capped by the caller), else default_hold_ms; timeouts after send count in
 * a row and timeout_run_hold of them hold for timeout_hold_ms (and start a
 * new run); any complete answer ends a run. A probe is healthy unless it was
 * limited, timed out, or never sent.
 */
#include "core/holds.h"

#include <string.h>

void holds_after_call(const struct holds_config *config, struct holds_state *state,
                      const struct holds_call *call, struct holds_decision *ret_decision)
{
        struct holds_decision d;
        bool complete = call->transport == TG_TR_COMPLETE;
        bool limited = complete && (call->http_status == 429 || call->http_status == 503);
        bool timed_out = call->transport == TG_TR_TIMEOUT_AFTER_SEND;

        memset(&d, 0, sizeof(d));
        if (limited) {
                d.why = HOLDS_LIMITED;
                d.hold_ms =
                    call->retry_after_ms >= 0 ? call->retry_after_ms : config->default_hold_ms;
        }
        if (timed_out) {
                state->timeouts_in_row++;
                if (config->timeout_run_hold > 0 &&
                    state->timeouts_in_row >= config->timeout_run_hold) {
                        d.why = HOLDS_TIMEOUTS;
                        d.hold_ms = config->timeout_hold_ms;
                        d.timeouts_in_row = state->timeouts_in_row;
                        state->timeouts_in_row = 0;
                }
        } else if (complete) {
                state->timeouts_in_row = 0;
        }
        if (call->probe) {
                d.probe_done = true;
                d.probe_healthy = !limited && !timed_out && call->transport != TG_TR_NOT_SENT;
        }
        *ret_decision = d;
}
