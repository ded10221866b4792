/*
 * policy — the operation state machine of DESIGN.md: what follows a finished
 * call, a takeover, a missed deadline and an operator re-send. Pure: "now"
 * and the random source come from the caller.
 *
 * Invariants of every decision made here:
 *   - next is never pending or in_flight; retry_wait and unknown always carry
 *     a next_run_at >= now, and every other state a next_run_at of 0;
 *   - manual always carries a reason, every other state MANUAL_NONE;
 *   - a POST is scheduled (retry_wait) only while attempts < attempt_limit,
 *     so an operation never makes more than attempt_limit POSTs without an
 *     operator raising the limit; a query is scheduled (unknown) only while
 *     queries < query_limit, or, for a refund the provider reports as
 *     pending (pending_since > 0), only while pending_polls <
 *     pending_max_polls and before pending_since + pending_deadline;
 *   - nothing automatic is scheduled after deadline_at, and no re-send is
 *     scheduled at or after key_first_used + key_retention: such an
 *     operation goes to manual now rather than waking up later to find out;
 *   - the reason for stopping a re-send is the limit it meets first: out of
 *     attempts; else a key already past retention now (no wait could help,
 *     and policy_operator_resend() would refuse it too); else the deadline
 *     for the scheduled time; else the key's retention at the scheduled time;
 *   - an unknown outcome is never guessed: it is reconciled by a query, and
 *     only a query's not_found allows a re-send, with the same key; or,
 *     where the contract's replay returns the stored result
 *     (config->replay), by that replay once the queries are spent, only
 *     while the key is inside its retention (else key_expired).
 * Time arithmetic saturates instead of overflowing, so hostile Retry-After
 * values or limits end in manual, never in a wrapped time.
 */
#include "core/policy.h"

#include <assert.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "core/plants.h"
#include "core/tg_error.h"

#define POLICY_DEFAULT_MAX_ATTEMPTS      3
#define POLICY_DEFAULT_DEADLINE_MS       (15LL * 60 * 1000)
#define POLICY_DEFAULT_MAX_QUERIES       10
#define POLICY_DEFAULT_QUERY_INTERVAL_MS 2000LL
#define POLICY_DEFAULT_KEY_RETENTION_MS  (23LL * 3600 * 1000)
/* How long a notification-only refund waits for its notification. A day:
 * Adyen retries a webhook its endpoint did not accept at 2, 5, 10, 15, 30
 * min, 1, 2 and 4 h (about 8 h in all), so a day covers an outage of the
 * webhook endpoint and that whole schedule with room to spare, and it is
 * the span after which an operator expects a stuck refund in front of a
 * person rather than still "in progress". */
#define POLICY_DEFAULT_NOTIFICATION_MS (24LL * 3600 * 1000)
/* A refund the provider reports as pending: polled from 2 s, doubling to an
 * hour, at most 200 times, for a week. Stripe's and PayPal's pending
 * refunds settle in hours to days (a bank's return); the doubling keeps
 * the first answers quick (most settle within seconds in a test mode) and
 * a long one at about 24 polls a day; 200 polls cover the week with room. */
#define POLICY_DEFAULT_PENDING_INTERVAL_MS 2000LL
#define POLICY_DEFAULT_PENDING_MAX_MS      (3600LL * 1000)
#define POLICY_DEFAULT_PENDING_POLLS       200
#define POLICY_DEFAULT_PENDING_DEADLINE_MS (7LL * 24 * 3600 * 1000)

/* Upper bound of any configured duration: a year. Larger is a typo. */
#define POLICY_MAX_DURATION_MS (366LL * 24 * 3600 * 1000)

void policy_config_default(struct policy_config *ret_config)
{
        struct policy_config c = {
            .max_attempts = POLICY_DEFAULT_MAX_ATTEMPTS,
            .deadline_ms = POLICY_DEFAULT_DEADLINE_MS,
            .max_queries = POLICY_DEFAULT_MAX_QUERIES,
            .query_interval_ms = POLICY_DEFAULT_QUERY_INTERVAL_MS,
            .key_retention_ms = POLICY_DEFAULT_KEY_RETENTION_MS,
            .notification_deadline_ms = POLICY_DEFAULT_NOTIFICATION_MS,
            .pending_poll_interval_ms = POLICY_DEFAULT_PENDING_INTERVAL_MS,
            .pending_poll_max_ms = POLICY_DEFAULT_PENDING_MAX_MS,
            .pending_max_polls = POLICY_DEFAULT_PENDING_POLLS,
            .pending_deadline_ms = POLICY_DEFAULT_PENDING_DEADLINE_MS,
        };
        backoff_config_default(&c.backoff);
        *ret_config = c;
}

static bool duration_ok(int64_t ms)
{
        return ms > 0 && ms <= POLICY_MAX_DURATION_MS;
}

int policy_config_check(const struct policy_config *config)
{
        if (!config)
                return TG_EINVAL;
        if (config->max_attempts < 1)
                return TG_EINVAL;
        /* max_queries may be 0: every unknown goes straight to manual. */
        if (!duration_ok(config->deadline_ms) || !duration_ok(config->query_interval_ms) ||
            !duration_ok(config->key_retention_ms) ||
            !duration_ok(config->notification_deadline_ms) ||
            !duration_ok(config->pending_poll_interval_ms) ||
            !duration_ok(config->pending_poll_max_ms) ||
            config->pending_poll_max_ms < config->pending_poll_interval_ms ||
            !duration_ok(config->pending_deadline_ms))
                return TG_EINVAL;
        return backoff_config_check(&config->backoff);
}

/* t + d, saturating at the ends of tg_wall_ms. */
static tg_wall_ms add_ms(tg_wall_ms t, int64_t d)
{
        if (d > 0 && t > INT64_MAX - d)
                return INT64_MAX;
        if (d < 0 && t < INT64_MIN - d)
                return INT64_MIN;
        return t + d;
}

/* a - b, saturating. */
static int64_t sub_ms(tg_wall_ms a, tg_wall_ms b)
{
        if (b < 0 && a > INT64_MAX + b)
                return INT64_MAX;
        if (b > 0 && a < INT64_MIN + b)
                return INT64_MIN;
        return a - b;
}

static void decide(struct policy_decision *ret_decision, enum op_state next, tg_wall_ms next_run_at,
                   enum manual_reason reason, int64_t wait_ms)
{
        ret_decision->given_back = POLICY_BUDGET_NONE;
        ret_decision->deadline_at = 0;
        ret_decision->pending_since = 0;
        ret_decision->next = next;
        ret_decision->next_run_at = next_run_at;
        ret_decision->reason = reason;
        ret_decision->wait_ms = wait_ms;
}

static void decide_manual(struct policy_decision *ret_decision, enum manual_reason reason)
{
        decide(ret_decision, OP_MANUAL, 0, reason, 0);
}

static bool key_expired_at(const struct policy_config *config, const struct policy_op *op,
                           tg_wall_ms t)
{
        return t >= add_ms(op->key_first_used, config->key_retention_ms);
}

/* The next call is a POST with the same key (retryable, not_sent, or a
 * query's not_found): budget, backoff, key age, deadline. */
static int schedule_resend(const struct policy_config *config, const struct policy_op *op,
                           const struct policy_event *event, struct tg_rng *rng,
                           struct policy_decision *ret_decision)
{
        if (op->attempts >= op->attempt_limit) {
                decide_manual(ret_decision, MANUAL_ATTEMPTS_EXHAUSTED);
                return 0;
        }
        if (key_expired_at(config, op, event->now)) {
                decide_manual(ret_decision, MANUAL_KEY_RETENTION);
                return 0;
        }
        /* Give-up (if configured) counts from the key's first use, i.e. the
         * first POST: the closest stored time to the first failure. */
        int64_t elapsed = sub_ms(event->now, op->key_first_used);
        int64_t wait;
        int r = backoff_draw(&config->backoff, op->attempts, op->last_wait_ms,
                             event->retry_after_ms, elapsed, rng, &wait);
        if (r == TG_ERANGE) {
                decide_manual(ret_decision, MANUAL_DEADLINE);
                return 0;
        }
        if (r < 0)
                return r;
        if (wait < 0)
                wait = 0;
        tg_wall_ms next = add_ms(event->now, wait);
        if (next > op->deadline_at) {
                decide_manual(ret_decision, MANUAL_DEADLINE);
                return 0;
        }
        if (key_expired_at(config, op, next)) {
                decide_manual(ret_decision, MANUAL_KEY_RETENTION);
                return 0;
        }
        decide(ret_decision, OP_RETRY_WAIT, next, MANUAL_NONE, wait);
        return 0;
}

/* The queries could not tell (spent) and the contract's replay returns the
 * stored result: the same POST with the same key, after the query
 * interval, as the next attempt (retry_wait). Never with a key past its
 * retention (which is the provider's lifetime less a margin): then
 * MANUAL_KEY_EXPIRED, as a replay could execute a second refund. */
static int schedule_replay(const struct policy_config *config, const struct policy_op *op,
                           const struct policy_event *event, struct policy_decision *ret_decision)
{
        tg_wall_ms next = add_ms(event->now, config->query_interval_ms);

        if (op->attempts >= op->attempt_limit) {
                decide_manual(ret_decision, MANUAL_ATTEMPTS_EXHAUSTED);
                return 0;
        }
        if (key_expired_at(config, op, event->now) || key_expired_at(config, op, next)) {
                decide_manual(ret_decision, MANUAL_KEY_EXPIRED);
                return 0;
        }
        if (next > op->deadline_at) {
                decide_manual(ret_decision, MANUAL_DEADLINE);
                return 0;
        }
        decide(ret_decision, OP_RETRY_WAIT, next, MANUAL_NONE, config->query_interval_ms);
        return 0;
}

/* Notification-only: no call is scheduled; the operation waits (unknown,
 * its next run one millisecond past its new deadline, so never due) for
 * the provider's notification, which settles it as an external answer;
 * the deadline sweep sends it to manual with MANUAL_NOTIFICATION_DEADLINE
 * if none came. */
static void await_notification(const struct policy_config *config, tg_wall_ms now,
                               struct policy_decision *ret_decision)
{
        tg_wall_ms end = add_ms(now, config->notification_deadline_ms);

        decide(ret_decision, OP_UNKNOWN, add_ms(end, 1), MANUAL_NONE, 0);
        ret_decision->deadline_at = end;
}

/* The wait before a pending refund's next poll, after `polls` of them: the
 * interval, doubled per poll, up to the cap. */
static int64_t pending_wait(const struct policy_config *config, unsigned polls)
{
        int64_t wait = config->pending_poll_interval_ms;

        for (unsigned i = 0; i < polls && wait < config->pending_poll_max_ms; i++)
                wait = wait > INT64_MAX / 2 ? INT64_MAX : wait * 2;
        return wait < config->pending_poll_max_ms ? wait : config->pending_poll_max_ms;
}

/* The provider said the refund is accepted, not final (now, or at
 * pending_since): the operation stays unknown and is polled on the slow
 * schedule, its deadline the pending one. Past the poll budget, or when
 * the next poll (the Retry-After its floor) would fall at or past that
 * deadline, manual now. The normal query budget is not consulted: a
 * pending poll does not spend it (policy_claim gives it back). */
static void schedule_pending(const struct policy_config *config, const struct policy_op *op,
                             const struct policy_event *event, struct policy_decision *ret_decision)
{
        bool pending = op->pending_since > 0;
        tg_wall_ms since = pending ? op->pending_since : event->now;
        unsigned polls = pending ? op->pending_polls : 0;
        tg_wall_ms end = add_ms(since, config->pending_deadline_ms);
        int64_t wait = pending_wait(config, polls);

        if (event->retry_after_ms > wait)
                wait = event->retry_after_ms;
        tg_wall_ms next = add_ms(event->now, wait);
        if (polls >= config->pending_max_polls)
                decide_manual(ret_decision, MANUAL_PENDING_POLLS);
        else if (next >= end)
                decide_manual(ret_decision, MANUAL_PENDING_DEADLINE);
        else
                decide(ret_decision, OP_UNKNOWN, next, MANUAL_NONE, wait);
        ret_decision->deadline_at = end;
        ret_decision->pending_since = since;
}

/* The next call is a query with the same key. Notification-only, there is
 * no query: a POST whose answer was lost is replayed where the contract's
 * replay returns the stored result (that answer says whether it arrived),
 * else, and after an acknowledgement, the notification is awaited.
 * Otherwise a refund the provider reports as pending (this answer, or an
 * earlier one) is polled on the pending schedule. */
static int schedule_query(const struct policy_config *config, const struct policy_op *op,
                          const struct policy_event *event, struct policy_decision *ret_decision)
{
        if (config->notification) {
                if (config->replay && event->request == CLASSIFY_POST &&
                    event->cls == TG_CLASS_UNKNOWN)
                        return schedule_replay(config, op, event, ret_decision);
                await_notification(config, event->now, ret_decision);
                return 0;
        }
        /* nothing to ask by: replayed, pending or not */
        if (config->replay && config->query_needs_refund_id && !event->refund_id_known)
                return schedule_replay(config, op, event, ret_decision);
        if (op->pending_since > 0 || event->cls == TG_CLASS_PROCESSING) {
                schedule_pending(config, op, event, ret_decision);
                return 0;
        }
        int64_t wait = config->query_interval_ms;
        if (event->retry_after_ms > wait)
                wait = event->retry_after_ms;
        tg_wall_ms next = add_ms(event->now, wait);
        if (config->replay && op->queries >= op->query_limit)
                return schedule_replay(config, op, event, ret_decision);
        if (op->queries >= op->query_limit) {
                decide_manual(ret_decision, MANUAL_QUERY_BUDGET);
                return 0;
        }
        if (next > op->deadline_at) {
                decide_manual(ret_decision, MANUAL_DEADLINE);
                return 0;
        }
        decide(ret_decision, OP_UNKNOWN, next, MANUAL_NONE, wait);
        return 0;
}

/* A call the provider refused for the whole account (429/503): nothing was
 * executed, the exit holds every start and probes, and the call is given
 * back to the budget it was counted against (its limit grows by one), so a
 * long episode of 429s sends no refund to manual for attempts or queries;
 * the next call is scheduled as for any retryable answer, the Retry-After
 * (capped by the caller) its floor, and the deadline and key retention
 * still stop it. */
static int after_limited(const struct policy_config *config, const struct policy_op *op,
                         const struct policy_event *event, struct tg_rng *rng,
                         struct policy_decision *ret_decision)
{
        struct policy_op more = *op;
        bool post = event->request == CLASSIFY_POST;
        int r;

        if (post && more.attempt_limit < UINT_MAX)
                more.attempt_limit++;
        else if (!post && more.pending_since > 0 && more.pending_polls > 0)
                more.pending_polls--; /* a pending poll: its own budget */
        else if (!post && more.query_limit < UINT_MAX)
                more.query_limit++;
        r = post ? schedule_resend(config, &more, event, rng, ret_decision)
                 : schedule_query(config, &more, event, ret_decision);
        if (r == 0)
                ret_decision->given_back = post ? POLICY_BUDGET_ATTEMPT : POLICY_BUDGET_QUERY;
        return r;
}

static int after_post(const struct policy_config *config, const struct policy_op *op,
                      const struct policy_event *event, struct tg_rng *rng,
                      struct policy_decision *ret_decision)
{
        if (event->limited && !config->count_limited && event->cls == TG_CLASS_RETRYABLE)
                return after_limited(config, op, event, rng, ret_decision);
        switch (event->cls) {
        case TG_CLASS_SUCCEEDED:
                decide(ret_decision, OP_SUCCEEDED, 0, MANUAL_NONE, 0);
                return 0;
        case TG_CLASS_REJECTED:
                decide(ret_decision, OP_REJECTED, 0, MANUAL_NONE, 0);
                return 0;
        case TG_CLASS_KEY_REUSED:
                decide_manual(ret_decision, MANUAL_KEY_REUSED);
                return 0;
        case TG_CLASS_RETRYABLE:
        case TG_CLASS_NOT_SENT:
                return schedule_resend(config, op, event, rng, ret_decision);
        case TG_CLASS_UNKNOWN:
        case TG_CLASS_PROCESSING: /* taken, not final (a rule's: a 202): polled as pending */
                return schedule_query(config, op, event, ret_decision);
        case TG_CLASS_NOT_FOUND:
        case TG_CLASS_NO_ANSWER:
        default:
                return TG_EINVAL;
        }
}

static int after_query(const struct policy_config *config, const struct policy_op *op,
                       const struct policy_event *event, struct tg_rng *rng,
                       struct policy_decision *ret_decision)
{
        if (event->limited && !config->count_limited && event->cls == TG_CLASS_NO_ANSWER)
                return after_limited(config, op, event, rng, ret_decision);
        switch (event->cls) {
        case TG_CLASS_SUCCEEDED:
                decide(ret_decision, OP_SUCCEEDED, 0, MANUAL_NONE, 0);
                return 0;
        case TG_CLASS_REJECTED:
                decide(ret_decision, OP_REJECTED, 0, MANUAL_NONE, 0);
                return 0;
        case TG_CLASS_PROCESSING:
        case TG_CLASS_NO_ANSWER:
                return schedule_query(config, op, event, ret_decision);
        case TG_CLASS_NOT_FOUND:
                /* Nothing was executed: the next attempt re-sends the same
                 * key, within the attempt budget and the key's retention. */
                return schedule_resend(config, op, event, rng, ret_decision);
        case TG_CLASS_KEY_REUSED:
        case TG_CLASS_RETRYABLE:
        case TG_CLASS_UNKNOWN:
        case TG_CLASS_NOT_SENT:
        default:
                return TG_EINVAL;
        }
}

int policy_after_call(const struct policy_config *config, const struct policy_op *op,
                      const struct policy_event *event, struct tg_rng *rng,
                      struct policy_decision *ret_decision)
{
        if (!config || !op || !event || !rng || !ret_decision)
                return TG_EINVAL;
        /* Only a call that was recorded as sent can end; the POST that just
         * ended (or the one a query reconciles) is counted in attempts. */
        if (op->state != OP_IN_FLIGHT || op->attempts < 1)
                return TG_EINVAL;

        struct policy_decision d;
        int r;
        switch (event->request) {
        case CLASSIFY_POST:
                r = after_post(config, op, event, rng, &d);
                break;
        case CLASSIFY_QUERY:
                if (op->queries < 1)
                        return TG_EINVAL;
                r = after_query(config, op, event, rng, &d);
                break;
        default:
                return TG_EINVAL;
        }
        if (r < 0)
                return r;
        *ret_decision = d;
        return 0;
}

int policy_after_takeover(const struct policy_config *config, const struct policy_op *op,
                          tg_wall_ms now, struct policy_decision *ret_decision)
{
        if (!config || !op || !ret_decision)
                return TG_EINVAL;
        if (op->state != OP_IN_FLIGHT)
                return TG_ESTATE;
        /* Reconciling takes a query: with the query budget spent, or past
         * the deadline, only an operator may go on. Notification-only, the
         * call that was running is settled by its notification, if it
         * arrived: that is awaited. A pending refund's poll is counted
         * against its own budget. */
        bool no_query =
            config->notification || (config->query_needs_refund_id && !op->refund_id_known);

        if (now > op->deadline_at) {
                decide_manual(ret_decision,
                              op->pending_since > 0 ? MANUAL_PENDING_DEADLINE : MANUAL_DEADLINE);
        } else if (config->replay && no_query && op->pending_since == 0) {
                /* the running call was a POST (nothing else could be made):
                 * its answer is lost, as after a timeout */
                const struct policy_event lost = {.request = CLASSIFY_POST,
                                                  .cls = TG_CLASS_UNKNOWN,
                                                  .retry_after_ms = -1,
                                                  .now = now,
                                                  .refund_id_known = op->refund_id_known};
                schedule_replay(config, op, &lost, ret_decision);
                if (ret_decision->next == OP_MANUAL && config->notification)
                        await_notification(config, now, ret_decision);
        } else if (config->notification) {
                await_notification(config, now, ret_decision);
        } else if (op->pending_since > 0 && op->pending_polls >= config->pending_max_polls) {
                decide_manual(ret_decision, MANUAL_PENDING_POLLS);
        } else if (op->pending_since == 0 && op->queries >= op->query_limit) {
                decide_manual(ret_decision, MANUAL_QUERY_BUDGET);
        } else {
                decide(ret_decision, OP_UNKNOWN, now, MANUAL_NONE, 0);
        }
        return 0;
}

static bool waiting_for_exit(enum op_state state)
{
        return state == OP_PENDING || state == OP_RETRY_WAIT || state == OP_UNKNOWN;
}

int policy_check_deadline(const struct policy_op *op, tg_wall_ms now,
                          struct policy_decision *ret_decision)
{
        if (!op || !ret_decision)
                return TG_EINVAL;
        /* Only an operation waiting for the exit can miss its deadline here:
         * a running call ends through policy_after_call(), a final or manual
         * operation has no deadline any more. */
        if (!waiting_for_exit(op->state))
                return TG_ESTATE;
        if (now <= op->deadline_at)
                return TG_EAGAIN;
        decide_manual(ret_decision,
                      op->pending_since > 0 ? MANUAL_PENDING_DEADLINE : MANUAL_DEADLINE);
        return 0;
}

int policy_check_due(const struct policy_config *config, const struct policy_op *op, tg_wall_ms now,
                     struct policy_decision *ret_decision)
{
        if (!config || !op || !ret_decision)
                return TG_EINVAL;
        if (!waiting_for_exit(op->state))
                return TG_ESTATE;
        /* A due re-send that the exit reached late: the key may have aged
         * past retention since the decision that scheduled it. A key past
         * retention now comes before the deadline, as at the top. */
        if (op->state == OP_RETRY_WAIT && op->attempts > 0 && key_expired_at(config, op, now)) {
                decide_manual(ret_decision, MANUAL_KEY_RETENTION);
                return 0;
        }
        return policy_check_deadline(op, now, ret_decision);
}

int policy_operator_resend(const struct policy_config *config, const struct policy_op *op,
                           tg_wall_ms now, struct policy_op *ret_op,
                           struct policy_decision *ret_decision)
{
        if (!config || !op || !ret_op || !ret_decision)
                return TG_EINVAL;
        if (op->state != OP_MANUAL)
                return TG_ESTATE;
        /* A key never sent (attempts == 0) has no age at the provider. */
        if (op->attempts > 0 && key_expired_at(config, op, now))
                return TG_ERANGE;
        if (op->attempts == UINT_MAX || op->queries > UINT_MAX - config->max_queries)
                return TG_ERANGE;

        struct policy_op next = *op;
        next.state = OP_RETRY_WAIT;
        next.attempt_limit = op->attempts + 1;
        next.query_limit = op->queries + config->max_queries;
        next.deadline_at = add_ms(now, config->deadline_ms);
        /* the re-send's answer says afresh whether the provider holds it
         * as pending */
        next.pending_since = 0;
        next.pending_polls = 0;
        *ret_op = next;
        decide(ret_decision, OP_RETRY_WAIT, now, MANUAL_NONE, 0);
        return 0;
}

enum tg_call_kind policy_next_kind(enum op_state state, int operator_resend)
{
        switch (state) {
        case OP_PENDING:
                return TG_KIND_FIRST;
        case OP_RETRY_WAIT:
                return operator_resend ? TG_KIND_MANUAL : TG_KIND_RETRY;
        case OP_UNKNOWN:
                /* a planted bug (core/plants.h): a re-POST instead of a query */
                return PLANT_REPOST_UNKNOWN ? TG_KIND_RETRY : TG_KIND_QUERY;
        case OP_IN_FLIGHT:
        case OP_SUCCEEDED:
        case OP_REJECTED:
        case OP_MANUAL:
        case OP_CANCELLED:
        default:
                /* No call is due in the other states. Should one be asked
                 * for anyway, the answer is the one call that can never
                 * execute a refund. */
                return TG_KIND_QUERY;
        }
}

/* ---- the transition table ---------------------------------------------------- */

#define B(state) POLICY_STATE_BIT(state)
#define FINAL    (B(OP_SUCCEEDED) | B(OP_REJECTED))

/* transitions[from][event]: the states the event may lead to. The one place a
 * transition is written; every function below checks its result against it
 * (apply()), and the header's table is this one in words. */
static const unsigned transitions[OP_STATE_COUNT][OP_EVENT_COUNT] = {
    [OP_PENDING] =
        {
            [OP_EV_CLAIM] = B(OP_IN_FLIGHT),
            [OP_EV_DEADLINE] = B(OP_MANUAL),
            [OP_EV_OUTBOX] = B(OP_PENDING) | B(OP_MANUAL),
            [OP_EV_CANCEL] = B(OP_CANCELLED),
        },
    [OP_IN_FLIGHT] =
        {
            [OP_EV_CALL_END] = FINAL | B(OP_RETRY_WAIT) | B(OP_UNKNOWN) | B(OP_MANUAL),
            /* refused as limited (429/503): nothing executed, not counted */
            [OP_EV_LIMITED] = B(OP_RETRY_WAIT) | B(OP_UNKNOWN) | B(OP_MANUAL),
            [OP_EV_TAKEOVER] = B(OP_UNKNOWN) | B(OP_RETRY_WAIT) | B(OP_MANUAL),
            [OP_EV_RELEASE] = B(OP_PENDING) | B(OP_RETRY_WAIT) | B(OP_UNKNOWN),
        },
    [OP_RETRY_WAIT] =
        {
            [OP_EV_CLAIM] = B(OP_IN_FLIGHT),
            [OP_EV_DEADLINE] = B(OP_MANUAL),
            [OP_EV_KEY_RETENTION] = B(OP_MANUAL),
            [OP_EV_EXTERNAL] = FINAL,
            /* only one never sent: an operator's re-send of a manual case
             * that had made no call yet */
            [OP_EV_CANCEL] = B(OP_CANCELLED),
        },
    [OP_UNKNOWN] =
        {
            [OP_EV_CLAIM] = B(OP_IN_FLIGHT),
            [OP_EV_DEADLINE] = B(OP_MANUAL),
            [OP_EV_EXTERNAL] = FINAL,
        },
    [OP_SUCCEEDED] = {[OP_EV_EXTERNAL] = B(OP_SUCCEEDED)},
    [OP_REJECTED] = {[OP_EV_EXTERNAL] = B(OP_REJECTED)},
    [OP_MANUAL] =
        {
            [OP_EV_RESEND] = B(OP_RETRY_WAIT),
            [OP_EV_RESOLVE] = FINAL,
            [OP_EV_EXTERNAL] = FINAL,
            [OP_EV_CANCEL] = B(OP_CANCELLED),
            [OP_EV_ASSIGN] = B(OP_MANUAL),
        },
    [OP_CANCELLED] = {[OP_EV_CANCEL] = B(OP_CANCELLED)},
};

static const char *const event_names[OP_EVENT_COUNT] = {
    [OP_EV_CLAIM] = "claim",
    [OP_EV_CALL_END] = "call_end",
    [OP_EV_TAKEOVER] = "takeover",
    [OP_EV_DEADLINE] = "deadline",
    [OP_EV_KEY_RETENTION] = "key_retention",
    [OP_EV_RESEND] = "resend",
    [OP_EV_RESOLVE] = "resolve",
    [OP_EV_EXTERNAL] = "external",
    [OP_EV_OUTBOX] = "outbox",
    [OP_EV_RELEASE] = "release",
    [OP_EV_CANCEL] = "cancel",
    [OP_EV_ASSIGN] = "assign",
    [OP_EV_LIMITED] = "limited",
};

static bool state_ok(enum op_state state)
{
        return (unsigned)state < OP_STATE_COUNT;
}

unsigned policy_targets(enum op_state from, enum op_event event)
{
        if (!state_ok(from) || (unsigned)event >= OP_EVENT_COUNT)
                return 0;
        return transitions[from][event];
}

unsigned policy_sources(enum op_event event)
{
        unsigned set = 0;

        for (unsigned s = 0; s < OP_STATE_COUNT; s++)
                if (policy_targets((enum op_state)s, event) != 0)
                        set |= B(s);
        return set;
}

const char *op_event_name(enum op_event event)
{
        if ((unsigned)event >= OP_EVENT_COUNT)
                return "invalid";
        return event_names[event];
}

static bool in_set(unsigned set, enum op_state state)
{
        return state_ok(state) && (set & B(state)) != 0;
}

/* Moves op along `event` to the decision's state, if the table allows it:
 * the state, its next run, its reason, the wait chosen, the time. An
 * operator's re-send marks the next POST as theirs; any other transition
 * clears that mark (the re-send was made, or will never be). */
static int apply(struct op_record *op, enum op_event event, const struct policy_decision *d,
                 tg_wall_ms now)
{
        if (!in_set(policy_targets(op->state, event), d->next))
                return TG_ESTATE;
        op->state = d->next;
        op->next_run_at = d->next_run_at;
        if (d->deadline_at > 0)
                op->deadline_at = d->deadline_at; /* a wait for the notification, a pending one */
        if (d->pending_since > 0)
                op->pending_since = d->pending_since;
        op->reason = d->reason;
        if (d->wait_ms > 0)
                op->last_wait_ms = d->wait_ms;
        op->operator_resend = event == OP_EV_RESEND;
        op->updated_at = now;
        assert(op_sane(op));
        return 0;
}

unsigned policy_group_states(enum policy_group group)
{
        unsigned claimable = policy_sources(OP_EV_CLAIM);

        if (group == POLICY_GROUP_FIRST)
                return claimable & B(OP_PENDING);
        return claimable & ~B(OP_PENDING);
}

unsigned policy_kind_states(enum tg_call_kind kind)
{
        unsigned claimable = policy_sources(OP_EV_CLAIM), set = 0;

        for (unsigned st = 0; st < OP_STATE_COUNT; st++)
                if ((claimable & B(st)) && policy_next_kind((enum op_state)st, 0) == kind)
                        set |= B(st);
        return set;
}

bool policy_key_too_old(const struct op_record *op, tg_wall_ms now, int64_t key_retention_ms)
{
        if (key_retention_ms <= 0 || !in_set(policy_sources(OP_EV_KEY_RETENTION), op->state))
                return false;
        return op->attempts > 0 && op->key_first_used > 0 &&
               op->key_first_used <= sub_ms(now, key_retention_ms);
}

bool policy_is_due(const struct op_record *op, const struct policy_pick *pick)
{
        if (!in_set(policy_group_states(pick->group), op->state) || op->attempt_limit == 0 ||
            op->deadline_at <= pick->now)
                return false;
        /* a spent refund sub-quota: no POST is due, only a query may be */
        if (pick->posts_barred && !in_set(policy_kind_states(TG_KIND_QUERY), op->state))
                return false;
        if (pick->group == POLICY_GROUP_FIRST)
                return true;
        if (op->next_run_at > pick->now ||
            policy_key_too_old(op, pick->now, pick->key_retention_ms))
                return false;
        return pick->queries_allowed || !in_set(policy_kind_states(TG_KIND_QUERY), op->state);
}

int policy_claim(const struct op_record *op, int64_t epoch, unsigned share, tg_wall_ms now,
                 struct op_record *ret_op, enum tg_call_kind *ret_kind, unsigned *ret_attempt)
{
        static const struct policy_decision in_flight = {.next = OP_IN_FLIGHT};
        struct op_record next = *op;
        enum tg_call_kind kind = policy_next_kind(op->state, op->operator_resend);
        unsigned attempt;
        int r;

        if (!in_set(policy_sources(OP_EV_CLAIM), op->state))
                return TG_ESTATE;
        if (kind == TG_KIND_QUERY) {
                if (next.queries == UINT_MAX)
                        return TG_ERANGE;
                attempt = ++next.queries;
                /* a pending refund's poll: counted against its own budget,
                 * and given back to the normal one */
                if (next.pending_since > 0 && next.pending_polls < UINT_MAX &&
                    next.query_limit < UINT_MAX) {
                        next.pending_polls++;
                        next.query_limit++;
                }
        } else {
                if (next.attempts == UINT_MAX)
                        return TG_ERANGE;
                attempt = ++next.attempts;
                if (next.key_first_used == 0)
                        next.key_first_used = now; /* the key's age counts from its first use */
        }
        /* the claim keeps the operation's schedule and reason as they were:
         * they are the record of why it was due */
        struct policy_decision d = in_flight;
        d.next_run_at = op->next_run_at;
        d.reason = op->reason;
        bool resend = op->operator_resend;
        r = apply(&next, OP_EV_CLAIM, &d, now);
        if (r < 0)
                return r;
        next.operator_resend = resend; /* cleared when that call ends */
        next.epoch = epoch;
        next.share = share;
        *ret_op = next;
        *ret_kind = kind;
        *ret_attempt = attempt;
        return 0;
}

int policy_release(const struct op_record *op, enum tg_call_kind kind, tg_wall_ms now,
                   struct op_record *ret_op)
{
        struct op_record next = *op;
        struct policy_decision d;
        int r;

        /* the state the claim found it in, and its schedule and reason */
        decide(&d,
               kind == TG_KIND_FIRST   ? OP_PENDING
               : kind == TG_KIND_QUERY ? OP_UNKNOWN
                                       : OP_RETRY_WAIT,
               op->next_run_at, op->reason, 0);
        r = apply(&next, OP_EV_RELEASE, &d, now);
        if (r < 0)
                return r;
        if (kind == TG_KIND_QUERY) {
                if (next.queries > 0)
                        next.queries--;
                if (next.pending_since > 0 && next.pending_polls > 0) {
                        next.pending_polls--;
                        next.query_limit--;
                }
        } else if (next.attempts > 0) {
                next.attempts--;
                if (next.attempts == 0)
                        next.key_first_used = 0; /* the key was never used after all */
        }
        next.operator_resend = kind == TG_KIND_MANUAL; /* still the operator's re-send */
        *ret_op = next;
        return 0;
}

void policy_call_outcome(const struct policy_config *config, const struct op_record *op,
                         const struct policy_event *event, struct tg_rng *rng,
                         struct policy_decision *ret_decision)
{
        struct policy_op view;
        struct policy_decision d;

        policy_view(op, &view);
        if (policy_after_call(config, &view, event, rng, &d) < 0) {
                /* Cannot happen for classes classify() returns; keep the
                 * operation reconcilable rather than guess. */
                decide(&d, OP_UNKNOWN, add_ms(event->now, config->query_interval_ms), MANUAL_NONE,
                       0);
        }
        *ret_decision = d;
}

void policy_next_page(const struct policy_event *event, struct policy_decision *d)
{
        int64_t wait = event->retry_after_ms > 0 ? event->retry_after_ms : 0;

        if (event->request != CLASSIFY_QUERY || event->cls != TG_CLASS_NO_ANSWER ||
            d->next != OP_UNKNOWN || wait >= d->wait_ms)
                return;
        d->next_run_at = add_ms(event->now, wait);
        d->wait_ms = wait;
}

int policy_end_call(const struct op_record *op, const struct policy_decision *decision,
                    const struct policy_call_end *end, tg_wall_ms now, struct op_record *ret_op)
{
        struct op_record next = *op;
        bool limited = decision->given_back != POLICY_BUDGET_NONE;
        int r = apply(&next, limited ? OP_EV_LIMITED : OP_EV_CALL_END, decision, now);

        if (r < 0)
                return r;
        /* the call stays in the count (attempts: every POST made), and the
         * limit it was counted against grows by one */
        if (decision->given_back == POLICY_BUDGET_ATTEMPT && next.attempt_limit < UINT_MAX)
                next.attempt_limit++;
        else if (decision->given_back == POLICY_BUDGET_QUERY && op->pending_since > 0 &&
                 next.pending_polls > 0)
                next.pending_polls--; /* a pending poll: its own budget */
        else if (decision->given_back == POLICY_BUDGET_QUERY && next.query_limit < UINT_MAX)
                next.query_limit++;
        if (end->refund_id && end->refund_id[0] != '\0') {
                size_t n = strnlen(end->refund_id, sizeof(next.refund_id) - 1);

                memcpy(next.refund_id, end->refund_id, n);
                next.refund_id[n] = '\0';
        }
        next.last_http_status = end->http_status;
        next.last_class = end->cls;
        *ret_op = next;
        return 0;
}

int policy_takeover(const struct policy_config *config, const struct op_record *op, tg_wall_ms now,
                    struct op_record *ret_op)
{
        struct op_record next = *op;
        struct policy_op view;
        struct policy_decision d;
        int r;

        policy_view(op, &view);
        r = policy_after_takeover(config, &view, now, &d);
        if (r == 0)
                r = apply(&next, OP_EV_TAKEOVER, &d, now);
        if (r < 0)
                return r;
        *ret_op = next;
        return 0;
}

bool policy_awaits_notification(const struct op_record *op)
{
        return op->state == OP_UNKNOWN && op->deadline_at > 0 && op->next_run_at > op->deadline_at;
}

int policy_sweep(const struct op_record *op, tg_wall_ms now, int64_t key_retention_ms,
                 enum op_event *ret_event, struct op_record *ret_op)
{
        struct op_record next = *op;
        struct policy_decision d;
        enum op_event event;
        int r;

        if (in_set(policy_sources(OP_EV_DEADLINE), op->state) && op->deadline_at > 0 &&
            op->deadline_at < now) {
                event = OP_EV_DEADLINE;
                decide_manual(&d, policy_awaits_notification(op) ? MANUAL_NOTIFICATION_DEADLINE
                                  : op->pending_since > 0        ? MANUAL_PENDING_DEADLINE
                                                                 : MANUAL_DEADLINE);
        } else if (policy_key_too_old(op, now, key_retention_ms)) {
                event = OP_EV_KEY_RETENTION;
                decide_manual(&d, MANUAL_KEY_RETENTION);
        } else {
                return TG_EAGAIN;
        }
        r = apply(&next, event, &d, now);
        if (r < 0)
                return r;
        *ret_event = event;
        *ret_op = next;
        return 0;
}

int policy_resend(const struct policy_config *config, const struct op_record *op, tg_wall_ms now,
                  struct op_record *ret_op)
{
        struct op_record next = *op;
        struct policy_op view, granted;
        struct policy_decision d;
        int r;

        policy_view(op, &view);
        r = policy_operator_resend(config, &view, now, &granted, &d);
        if (r == 0)
                r = apply(&next, OP_EV_RESEND, &d, now);
        if (r < 0)
                return r;
        next.attempt_limit = granted.attempt_limit;
        next.query_limit = granted.query_limit;
        next.deadline_at = granted.deadline_at;
        next.pending_since = granted.pending_since;
        next.pending_polls = granted.pending_polls;
        *ret_op = next;
        return 0;
}

int policy_resolve(const struct op_record *op, enum op_state outcome, tg_wall_ms now,
                   struct op_record *ret_op)
{
        struct op_record next = *op;
        struct policy_decision d;
        int r;

        if (outcome != OP_SUCCEEDED && outcome != OP_REJECTED)
                return TG_EINVAL;
        /* the manual reason stays: it is why a person had to decide */
        decide(&d, outcome, 0, op->reason, 0);
        r = apply(&next, OP_EV_RESOLVE, &d, now);
        if (r < 0)
                return r;
        *ret_op = next;
        return 0;
}

int policy_external(const struct op_record *op, enum op_state outcome, const char *refund_id,
                    tg_wall_ms now, struct op_record *ret_op, bool *ret_changed)
{
        struct op_record next = *op;
        struct policy_decision d;
        int r;

        if (outcome != OP_SUCCEEDED && outcome != OP_REJECTED)
                return TG_EINVAL;
        decide(&d, outcome, 0, op->reason, 0);
        r = apply(&next, OP_EV_EXTERNAL, &d, now);
        if (r < 0)
                return r;
        if (op->state == outcome) {
                *ret_op = *op; /* a repeat of the final answer we hold */
                *ret_changed = false;
                return 0;
        }
        if (refund_id && refund_id[0] != '\0') {
                size_t n = strnlen(refund_id, sizeof(next.refund_id) - 1);

                memcpy(next.refund_id, refund_id, n);
                next.refund_id[n] = '\0';
        }
        *ret_op = next;
        *ret_changed = true;
        return 0;
}

void policy_accept(const struct policy_config *config, const struct refund_request *req,
                   tg_wall_ms now, struct op_record *ret_op)
{
        struct op_record op;

        memset(&op, 0, sizeof(op));
        op.req = *req;
        op.state = OP_PENDING;
        op.reason = MANUAL_NONE;
        op.attempt_limit = config->max_attempts;
        op.query_limit = config->max_queries;
        op.accepted_at = now;
        op.deadline_at = add_ms(now, config->deadline_ms);
        /* The caller's deadline travels in, bounded by ours: no automatic
         * call goes out after the earlier of the two. */
        if (req->deadline_at > 0 && req->deadline_at < op.deadline_at) {
                op.deadline_at = req->deadline_at;
                op.caller_deadline_at = req->deadline_at;
        }
        op.updated_at = now;
        op.last_class = TG_CLASS_UNKNOWN;
        memcpy(op.source, "api", 4);
        memcpy(op.traceparent, req->traceparent, sizeof(op.traceparent));
        op.traceparent[TG_TRACEPARENT_MAX] = '\0';
        *ret_op = op;
}

int policy_cancel(const struct op_record *op, tg_wall_ms now, struct op_record *ret_op,
                  bool *ret_changed)
{
        struct op_record next = *op;
        struct policy_decision d;
        int r;

        if (!in_set(policy_sources(OP_EV_CANCEL), op->state))
                return TG_ESTATE;
        if (op->state == OP_CANCELLED) {
                *ret_op = *op; /* a repeat: cancelled already */
                *ret_changed = false;
                return 0;
        }
        /* A call that reached the transport may have executed a refund:
         * only reconciliation can say, so it is never cancelled here. */
        if (op->attempts > 0 || op->queries > 0 || op->key_first_used > 0)
                return TG_ECONFLICT;
        /* a manual case keeps its reason, as a resolve does: why it stopped */
        decide(&d, OP_CANCELLED, 0, op->reason, 0);
        r = apply(&next, OP_EV_CANCEL, &d, now);
        if (r < 0)
                return r;
        *ret_op = next;
        *ret_changed = true;
        return 0;
}

int policy_assign(const struct op_record *op, const char *assignee, tg_wall_ms now,
                  struct op_record *ret_op)
{
        struct op_record next = *op;
        struct policy_decision d;
        size_t n = assignee ? strnlen(assignee, sizeof(next.assignee)) : 0;
        int r;

        if (n >= sizeof(next.assignee))
                return TG_EINVAL;
        /* the case stays where it is, with its reason: only its owner changes */
        decide(&d, op->state, op->next_run_at, op->reason, 0);
        r = apply(&next, OP_EV_ASSIGN, &d, now);
        if (r < 0)
                return r;
        if (n > 0)
                memcpy(next.assignee, assignee, n);
        next.assignee[n] = '\0';
        *ret_op = next;
        return 0;
}

int policy_outbox(const struct policy_config *config, const struct op_record *op, bool valid,
                  tg_wall_ms now, struct op_record *ret_op)
{
        struct op_record next = *op;
        struct policy_decision d;
        int r;

        if (valid)
                decide(&d, OP_PENDING, op->next_run_at, op->reason, 0);
        else
                decide_manual(&d, MANUAL_INVALID);
        r = apply(&next, OP_EV_OUTBOX, &d, now);
        if (r < 0)
                return r;
        next.attempt_limit = config->max_attempts;
        next.query_limit = config->max_queries;
        next.deadline_at = add_ms(op->accepted_at, config->deadline_ms);
        *ret_op = next;
        return 0;
}

void policy_view(const struct op_record *op, struct policy_op *ret_view)
{
        struct policy_op v = {
            .state = op->state,
            .attempts = op->attempts,
            .attempt_limit = op->attempt_limit,
            .queries = op->queries,
            .query_limit = op->query_limit,
            .accepted_at = op->accepted_at,
            .deadline_at = op->deadline_at,
            .key_first_used = op->key_first_used,
            .last_wait_ms = op->last_wait_ms,
            .pending_since = op->pending_since,
            .pending_polls = op->pending_polls,
            .refund_id_known = op->refund_id[0] != '\0',
        };
        *ret_view = v;
}

bool policy_state_is_final(enum op_state state)
{
        return state == OP_SUCCEEDED || state == OP_REJECTED || state == OP_CANCELLED;
}
