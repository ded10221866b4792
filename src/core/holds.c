/*
 * holds — provider-wide holds, pure. See holds.h.
 *
 * Rules: a complete 429 or 503 holds for its Retry-After (already parsed and
 * capped by the caller), else default_hold_ms, and a probe refused so again
 * without Retry-After holds for twice the last such hold (at most
 * limited_hold_max_ms): a provider that answers 429 for minutes without
 * saying how long costs one probe per doubling hold, not one a second; any
 * other complete answer ends the doubling. Timeouts after send count in
 * a row and timeout_run_hold of them hold for timeout_hold_ms (and start a
 * new run); any complete answer ends a run. Calls that sent nothing count
 * in a run of their own: unreachable_run_hold of them hold for
 * unreachable_hold_ms, and from then on a probe that sends nothing holds
 * again at once for twice the last hold (at most unreachable_hold_max_ms);
 * any call that reached the provider (an answer, a timeout or a reset after
 * send) ends the run and the doubling. A probe is healthy unless it was
 * limited, timed out, or never sent. With pushback_only (exit.adaptive) a
 * 429/503 without Retry-After holds nothing: it is a pushback, which the
 * exit answers by lowering its rate (core/adaptive.h).
 */
#include "core/holds.h"

#include <string.h>

bool holds_limited(enum tg_transport_result transport, int http_status)
{
        return transport == TG_TR_COMPLETE && (http_status == 429 || http_status == 503);
}

/* The hold of a 429/503 without Retry-After: the default, or, for a probe
 * refused again, twice the last one (saturating), at most the cap and
 * never below the default. */
static int64_t limited_hold(const struct holds_config *config, const struct holds_state *state,
                            bool probe)
{
        int64_t next = config->default_hold_ms;

        if (probe && state->limited_hold_ms > 0) {
                next =
                    state->limited_hold_ms > INT64_MAX / 2 ? INT64_MAX : state->limited_hold_ms * 2;
                if (next > config->limited_hold_max_ms)
                        next = config->limited_hold_max_ms;
                if (next < config->default_hold_ms)
                        next = config->default_hold_ms;
        }
        return next;
}

void holds_after_call(const struct holds_config *config, struct holds_state *state,
                      const struct holds_call *call, struct holds_decision *ret_decision)
{
        struct holds_decision d;
        bool complete = call->transport == TG_TR_COMPLETE;
        bool limited = !call->key_in_progress && holds_limited(call->transport, call->http_status);
        bool timed_out = call->transport == TG_TR_TIMEOUT_AFTER_SEND;

        memset(&d, 0, sizeof(d));
        if (limited && call->retry_after_ms < 0 && config->pushback_only) {
                /* the adaptive exit answers it with a lower rate, not a
                 * hold; the doubling of repeated holds does not apply */
                d.why = HOLDS_PUSHBACK;
                state->limited_hold_ms = 0;
        } else if (limited) {
                d.why = HOLDS_LIMITED;
                d.hold_ms = call->retry_after_ms >= 0 ? call->retry_after_ms
                                                      : limited_hold(config, state, call->probe);
                /* the probe sets the doubling's base; calls that were open
                 * when the hold began only raise it */
                if (call->probe || d.hold_ms > state->limited_hold_ms)
                        state->limited_hold_ms = d.hold_ms;
        } else if (complete) {
                state->limited_hold_ms = 0;
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
        if (call->transport == TG_TR_NOT_SENT) {
                state->unreachable_in_row++;
                if (state->unreachable_hold_ms > 0 && call->probe) {
                        /* Still unreachable after a hold: hold longer. */
                        int64_t next = state->unreachable_hold_ms * 2;
                        if (next > config->unreachable_hold_max_ms)
                                next = config->unreachable_hold_max_ms;
                        if (next < state->unreachable_hold_ms)
                                next = state->unreachable_hold_ms;
                        d.why = HOLDS_UNREACHABLE;
                        d.hold_ms = next;
                } else if (config->unreachable_run_hold > 0 &&
                           state->unreachable_in_row >= config->unreachable_run_hold) {
                        d.why = HOLDS_UNREACHABLE;
                        d.hold_ms = state->unreachable_hold_ms > config->unreachable_hold_ms
                                        ? state->unreachable_hold_ms
                                        : config->unreachable_hold_ms;
                }
                if (d.why == HOLDS_UNREACHABLE) {
                        d.unreachable_in_row = state->unreachable_in_row;
                        state->unreachable_hold_ms = d.hold_ms;
                        state->unreachable_in_row = 0;
                }
        } else {
                state->unreachable_in_row = 0;
                state->unreachable_hold_ms = 0;
        }
        if (call->probe) {
                d.probe_done = true;
                d.probe_healthy = !limited && !timed_out && call->transport != TG_TR_NOT_SENT;
        }
        *ret_decision = d;
}
