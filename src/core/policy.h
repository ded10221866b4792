/*
 * policy — the operation state machine of DESIGN.md, pure, and the ONE place
 * where a state transition is written. Every change of an operation's state,
 * wherever it is triggered (the exit's claim and settle, a new owner's
 * recovery, the deadline and key-retention sweeps, an operator's re-send or
 * resolve, a provider answer that came by webhook or settlement file, an
 * outbox row taken in), is one event of the table below, decided and applied
 * by a function of this module as a function of (operation, call, now,
 * config). The store only loads, locks and writes rows; the SQL predicates it
 * evaluates to find due or expired operations are checked against
 * policy_is_due() and policy_sweep() by the store contract test, on every
 * backend.
 *
 *   event          from                         to
 *   claim          pending, retry_wait, unknown in_flight (first; retry or manual; query)
 *   call_end       in_flight                    succeeded, rejected, retry_wait, unknown, manual
 *   limited        in_flight                    retry_wait, unknown, manual (the provider
 *                                               said 429/503: nothing executed, and the call
 *                                               is not counted against the budget)
 *   takeover       in_flight                    unknown, manual; retry_wait (a replay
 *                                               where no query can tell)
 *   deadline       pending, retry_wait, unknown manual (notification_deadline for
 *                                               one waiting for the provider's notification,
 *                                               pending_deadline for one it reports pending)
 *   key_retention  retry_wait                   manual
 *   resend         manual                       retry_wait (operator, same key)
 *   resolve        manual                       succeeded, rejected (operator)
 *   external       retry_wait, unknown, manual  succeeded, rejected
 *                  succeeded / rejected         the same (a repeat: no change)
 *   outbox         pending                      pending (taken in), manual (invalid)
 *   release        in_flight                    pending, retry_wait, unknown (as before
 *                                               the claim: it never reached the transport)
 *   cancel         pending, retry_wait, manual  cancelled (never sent: no call made yet)
 *                  cancelled                    the same (a repeat: no change)
 *   assign         manual                       manual (its owner changes)
 *
 * It never guesses: an unknown outcome is reconciled by querying with the
 * same key; only a query's not_found (inside key retention) allows a re-send,
 * with the same key, as the next attempt; and, where the provider's replay
 * returns the stored result (replay), a replay with the same key once the
 * queries are spent, inside key retention (else manual, key_expired).
 *
 * Budgets: attempt_limit POSTs (3), deadline_at (acceptance + 15 min), a query
 * budget with its own spacing, and key retention (23 h from the key's first
 * use). Anything past a budget goes to manual, with the reason; a retry whose
 * earliest time falls past the deadline goes to manual now, not later. A
 * call the provider refused for the whole account (429/503, an explicit
 * "not executed"; the exit holds and probes, core/holds.h) does not spend
 * the budget: its limit grows by one (the `limited` event), so the
 * attempts count every POST made and at most attempt_limit of them were
 * not refused so; the deadline still bounds them all.
 *
 * A refund the provider reports as accepted but not final (processing)
 * stays unknown, marked pending_since, and is polled on a slow schedule of
 * its own (policy_config.pending_*): its own poll budget (pending_polls,
 * not the query budget) and deadline (pending_since + pending_deadline, in
 * place of deadline_at), then manual with pending_polls or
 * pending_deadline. Notification-only, it waits for the notification
 * instead, as any acknowledged refund does.
 *
 * Wall time throughout: these decisions are stored and outlive the process.
 */
#ifndef TG_POLICY_H
#define TG_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/backoff.h"
#include "core/classify.h"
#include "core/operation.h"
#include "core/rng.h"
#include "core/tg_time.h"

struct policy_config {
        unsigned max_attempts;     /* POSTs per operation, first included (3) */
        int64_t deadline_ms;       /* acceptance to final answer (900000) */
        unsigned max_queries;      /* reconciliation queries per operation (10) */
        int64_t query_interval_ms; /* spacing of one operation's queries (2000) */
        int64_t key_retention_ms;  /* never re-send a key older than this (23 h) */
        struct backoff_config backoff;
        /* a call refused as limited (429/503) counts against the budget
         * like any other (false: it is given back, the `limited` event) */
        bool count_limited;
        /* the contract's replay returns the stored result (provider.reconcile
         * names `replay`): an unknown outcome whose queries are spent is
         * sent again with its same key, as a retry, while the key is inside
         * key_retention_ms; past it, manual with MANUAL_KEY_EXPIRED */
        bool replay;
        /* the provider offers no query (provider.reconcile = notification):
         * its notification is the only source of an outcome. A POST that
         * acknowledged (processing), or whose answer was lost without
         * `replay`, waits for it: unknown, with its deadline moved to now +
         * notification_deadline_ms and no call scheduled before it (its
         * next run lies past that deadline: never due); then manual with
         * MANUAL_NOTIFICATION_DEADLINE. A lost answer with `replay` is
         * replayed first (the stored answer says whether it arrived). No
         * query is ever scheduled, so none of the query budget is spent. */
        bool notification;
        int64_t notification_deadline_ms; /* 24 h */
        /* the queries go by the provider's refund id only (provider.reconcile
         * = refund_id, replay: PayPal): an unknown outcome without one is
         * not asked about (there is nothing to ask by) but replayed at once,
         * under the same key rules */
        bool query_needs_refund_id;
        /* A refund the provider reports as accepted, not final (a query's
         * processing, or a POST's where a rule maps it so), except
         * notification-only: the operation stays unknown and becomes
         * pending (pending_since: that first answer). Its polls are spaced
         * pending_poll_interval_ms doubling per poll up to
         * pending_poll_max_ms (a Retry-After is a floor), at most
         * pending_max_polls of them (they do not spend max_queries: the
         * normal budget is given back by one per poll), and its deadline
         * becomes pending_since + pending_deadline_ms. Then manual, with
         * MANUAL_PENDING_POLLS or MANUAL_PENDING_DEADLINE. */
        int64_t pending_poll_interval_ms; /* 2 s */
        int64_t pending_poll_max_ms;      /* 1 h */
        unsigned pending_max_polls;       /* 200 */
        int64_t pending_deadline_ms;      /* 7 days */
};

void policy_config_default(struct policy_config *ret_config);
int policy_config_check(const struct policy_config *config);

/* The operation as stored, at the moment its call ended. */
struct policy_op {
        enum op_state state;    /* the state before the call (in_flight) */
        unsigned attempts;      /* POSTs made, including the one that just ended */
        unsigned attempt_limit; /* POSTs allowed in all */
        unsigned queries;       /* queries made, including the one that just ended */
        unsigned query_limit;   /* queries allowed in all */
        tg_wall_ms accepted_at;
        tg_wall_ms deadline_at;    /* no automatic call after this */
        tg_wall_ms key_first_used; /* first POST with this key (key age counts from here) */
        int64_t last_wait_ms;      /* previous backoff wait, <= 0 if none */
        tg_wall_ms pending_since;  /* the provider's first processing answer; 0: not pending */
        unsigned pending_polls;    /* polls made while pending, the one that just ended too */
        bool refund_id_known;      /* the provider told its refund id (stored) */
};

/* The call that just ended. */
struct policy_event {
        enum classify_request request; /* POST or query */
        enum tg_class cls;
        int64_t retry_after_ms; /* < 0: none */
        tg_wall_ms now;
        /* the provider refused the call for the whole account (a complete
         * 429/503, core/holds.h holds_limited()): with a retryable POST or
         * a query's no_answer, nothing was executed and the call is not
         * counted against the operation's budget */
        bool limited;
        /* the operation has the provider's refund id (stored, or in this
         * answer): see policy_config.query_needs_refund_id */
        bool refund_id_known;
};

/* The budget a call was given back to (a limited answer). */
enum policy_budget {
        POLICY_BUDGET_NONE,
        POLICY_BUDGET_ATTEMPT, /* attempt_limit grows by one */
        POLICY_BUDGET_QUERY,   /* query_limit grows by one */
};

struct policy_decision {
        enum op_state next;        /* never pending or in_flight */
        tg_wall_ms next_run_at;    /* retry_wait / unknown: earliest next call; else 0 */
        enum manual_reason reason; /* manual: why; else MANUAL_NONE */
        int64_t wait_ms;           /* the wait chosen (backoff or interval), 0 if none */
        /* not NONE: the call was refused as limited and is not counted;
         * policy_end_call() applies it as the `limited` event */
        enum policy_budget given_back;
        /* > 0: the operation's deadline becomes this (the end of a wait
         * for the provider's notification, or of a pending refund's);
         * 0: unchanged */
        tg_wall_ms deadline_at;
        /* > 0: the operation is pending since this (the provider's first
         * processing answer; kept once set); 0: unchanged */
        tg_wall_ms pending_since;
};

/* Decides what follows a finished call. Returns 0 (and fills *ret_decision),
 * or TG_EINVAL for an impossible input (e.g. a query class for a POST).
 * The rng is used for backoff jitter only. */
int policy_after_call(const struct policy_config *config, const struct policy_op *op,
                      const struct policy_event *event, struct tg_rng *rng,
                      struct policy_decision *ret_decision);

/* After policy_call_outcome(): a query's no_answer that was a page of a
 * list without ours, with more to follow, in a walk that goes on
 * (core/list_walk.h). The next query, the next page, is the same question
 * not yet asked, not a new ask about a refund that may still be running:
 * it is due at once instead of after the query interval (a Retry-After
 * still floors it; the pacer and the query sub-quota still space it).
 * Any other decision is left as it is. */
void policy_next_page(const struct policy_event *event, struct policy_decision *decision);

/* An in_flight operation found by a new owner (its call may or may not have
 * gone out, its outcome was never recorded): unknown, to be reconciled now,
 * or manual if the deadline has passed (MANUAL_DEADLINE; a pending refund's:
 * MANUAL_PENDING_DEADLINE) or no query is left to reconcile with
 * (MANUAL_QUERY_BUDGET; a pending refund's polls: MANUAL_PENDING_POLLS).
 * Where no query can tell (the provider has none: notification-only; or it
 * asks by the refund id only and none was told) and the contract's replay
 * returns the stored result, the running call was a POST: it is replayed
 * with its key, as after a POST whose answer was lost (retry_wait after the
 * query interval, inside the attempts, the key's retention and the
 * deadline); without a replay left, a notification-only one awaits the
 * notification, the other goes to manual as the replay would. TG_ESTATE
 * unless in_flight. */
int policy_after_takeover(const struct policy_config *config, const struct policy_op *op,
                          tg_wall_ms now, struct policy_decision *ret_decision);

/* Past a deadline with no call running (a due retry_wait/unknown that the
 * exit could not reach in time): manual with MANUAL_DEADLINE (a pending
 * refund's: MANUAL_PENDING_DEADLINE) if now >
 * deadline_at, else returns TG_EAGAIN and leaves *ret_decision untouched. */
int policy_check_deadline(const struct policy_op *op, tg_wall_ms now,
                          struct policy_decision *ret_decision);

/* The check a due operation passes just before the exit starts its call
 * (the exit may let it through later than next_run_at): a re-send
 * (retry_wait with attempts > 0) whose key is at or past key_first_used +
 * key_retention goes to manual with MANUAL_KEY_RETENTION, so that no POST
 * leaves with an expired key; then policy_check_deadline(). TG_EAGAIN
 * (*ret_decision untouched) when the call may go; TG_ESTATE for a state that
 * is not waiting for the exit. */
int policy_check_due(const struct policy_config *config, const struct policy_op *op, tg_wall_ms now,
                     struct policy_decision *ret_decision);

/* An operator asks to re-send a manual operation with its same key. Refused
 * with TG_ESTATE unless the state is manual, and with TG_ERANGE when the key
 * is past retention (a re-send could execute a second refund). On success
 * the operation gets one more POST (attempt_limit = attempts + 1), a fresh
 * query budget and deadline, and is due now. */
int policy_operator_resend(const struct policy_config *config, const struct policy_op *op,
                           tg_wall_ms now, struct policy_op *ret_op,
                           struct policy_decision *ret_decision);

/* The kind of the next call for a due operation: retry_wait -> retry (or
 * manual after an operator re-send), unknown -> query, pending -> first. */
enum tg_call_kind policy_next_kind(enum op_state state, int operator_resend);

/* The words of states, reasons and kinds: core/names.h. */

/* ---- the transition table ------------------------------------------------- */

enum op_event {
        OP_EV_CLAIM,         /* the exit starts the operation's next call */
        OP_EV_CALL_END,      /* that call ended; its class decides */
        OP_EV_TAKEOVER,      /* a new owner found it in flight (outcome never recorded) */
        OP_EV_DEADLINE,      /* its deadline passed while it waited for the exit */
        OP_EV_KEY_RETENTION, /* its key aged past retention before a re-send */
        OP_EV_RESEND,        /* an operator re-sends it, with the same key */
        OP_EV_RESOLVE,       /* an operator closes it by hand */
        OP_EV_EXTERNAL,      /* the provider's answer came another way */
        OP_EV_OUTBOX,        /* an application's outbox row is taken in, or refused */
        OP_EV_RELEASE,       /* a claim made ahead of its slot is given back unsent */
        OP_EV_CANCEL,        /* its caller cancels it before any call was made */
        OP_EV_ASSIGN,        /* an operator gives the manual case to someone (or nobody) */
        OP_EV_LIMITED,       /* its call was refused for the whole account (429/503) */
};
#define OP_EVENT_COUNT 13

#define POLICY_STATE_BIT(state) (1u << (unsigned)(state))

/* The states `event` may lead to from `from`, as a set of POLICY_STATE_BIT()s;
 * 0 when the event is not allowed in that state. */
unsigned policy_targets(enum op_state from, enum op_event event);
/* The states in which `event` is allowed, as a set of POLICY_STATE_BIT()s. */
unsigned policy_sources(enum op_event event);
const char *op_event_name(enum op_event event);

/* ---- what the exit picks ---------------------------------------------------- */

/* The exit's two groups (DESIGN.md): first attempts, and everything that was
 * sent before (retries, queries, operator re-sends). Both are the claim
 * event's source states, split by whether the key was ever used. */
enum policy_group {
        POLICY_GROUP_FIRST,
        POLICY_GROUP_AGAIN,
};
/* The states of a group, as a set of POLICY_STATE_BIT()s. */
unsigned policy_group_states(enum policy_group group);
/* The claimable states whose next call is of `kind` (an operator's re-send
 * aside), as a set of POLICY_STATE_BIT()s: the query states are those a
 * spent query sub-quota holds back. */
unsigned policy_kind_states(enum tg_call_kind kind);

struct policy_pick {
        enum policy_group group;
        tg_wall_ms now;
        int64_t key_retention_ms; /* a re-send whose key is this old is not due; 0: no check */
        bool queries_allowed;     /* false: the query sub-quota is spent */
        bool posts_barred;        /* true: the refund sub-quota is spent (no POST is due) */
};

/* May the exit start this operation's next call now? In its group's states,
 * taken in (attempt_limit > 0), before its deadline, due (next_run_at <= now)
 * for the again group, not a re-send with a key past retention, not a
 * query while queries are not allowed, and not a POST (any call but a
 * query) while POSTs are barred. The stores' pick queries are this
 * predicate in SQL (checked by the store contract test). */
bool policy_is_due(const struct op_record *op, const struct policy_pick *pick);

/* A re-send (retry_wait after a first POST) whose key is at least
 * key_retention_ms old at `now`; false when key_retention_ms <= 0. */
bool policy_key_too_old(const struct op_record *op, tg_wall_ms now, int64_t key_retention_ms);

/* The claim: the exit starts the operation's next call under (epoch, share).
 * The kind follows the state (pending: first; retry_wait: retry, or manual
 * for an operator's re-send; unknown: query); a POST counts an attempt and
 * starts the key's age on the first one, a query counts a query (a pending
 * refund's poll counts in pending_polls too, and query_limit grows by one:
 * it spends its own budget, not the normal one); the operation is
 * in_flight. 0, or TG_ESTATE when the state has no claim. */
int policy_claim(const struct op_record *op, int64_t epoch, unsigned share, tg_wall_ms now,
                 struct op_record *ret_op, enum tg_call_kind *ret_kind, unsigned *ret_attempt);

/* A claim made ahead of its slot and never handed to the transport (its
 * deadline came first, a hold started, the exit stops): the operation goes
 * back to what it was before the claim of a call of `kind` — pending for a
 * first POST, retry_wait for a retry (and an operator's re-send, still
 * theirs), unknown for a query — and the attempt or query is not counted.
 * 0, or TG_ESTATE unless in_flight. */
int policy_release(const struct op_record *op, enum tg_call_kind kind, tg_wall_ms now,
                   struct op_record *ret_op);

/* ---- what follows ------------------------------------------------------------- */

/* policy_after_call() for an operation as stored, which never fails: an
 * impossible input (a class classify() never gives for that request) keeps
 * the operation reconcilable instead of guessing: unknown, asked again after
 * the query interval. */
void policy_call_outcome(const struct policy_config *config, const struct op_record *op,
                         const struct policy_event *event, struct tg_rng *rng,
                         struct policy_decision *ret_decision);

/* What the call that just ended said, beyond its class. */
struct policy_call_end {
        enum tg_class cls;
        int http_status;
        const char *refund_id; /* the provider's refund id, "" or NULL if none */
};

/* Applies a call_end decision (policy_call_outcome) to the in_flight
 * operation: the `call_end` event, or `limited` when the decision gives the
 * call back to its budget (the limit it was counted against grows by one).
 * 0, or TG_ESTATE when the table does not allow it. */
int policy_end_call(const struct op_record *op, const struct policy_decision *decision,
                    const struct policy_call_end *end, tg_wall_ms now, struct op_record *ret_op);

/* A new owner's recovery of an in_flight operation: policy_after_takeover()
 * decided and applied. 0 or TG_ESTATE. */
int policy_takeover(const struct policy_config *config, const struct op_record *op, tg_wall_ms now,
                    struct op_record *ret_op);

/* True for an operation waiting for the provider's notification (unknown,
 * its next run past its deadline: no call will be made for it). */
bool policy_awaits_notification(const struct op_record *op);

/* The sweeps: an operation waiting for the exit whose deadline has passed
 * (deadline_at < now; an outbox row not yet taken in has none; the reason
 * is notification_deadline for one that awaited the notification,
 * pending_deadline for one the provider reported pending), or else a
 * re-send whose key is too old (policy_key_too_old), goes to manual. 0 with
 * *ret_event (OP_EV_DEADLINE or OP_EV_KEY_RETENTION) and *ret_op
 * filled; TG_EAGAIN when neither applies. */
int policy_sweep(const struct op_record *op, tg_wall_ms now, int64_t key_retention_ms,
                 enum op_event *ret_event, struct op_record *ret_op);

/* policy_operator_resend() applied: TG_ESTATE unless manual, TG_ERANGE past
 * key retention. */
int policy_resend(const struct policy_config *config, const struct op_record *op, tg_wall_ms now,
                  struct op_record *ret_op);

/* An operator closes a manual operation by hand as succeeded or rejected;
 * its manual reason is kept for the record. TG_EINVAL for another outcome,
 * TG_ESTATE unless manual. */
int policy_resolve(const struct op_record *op, enum op_state outcome, tg_wall_ms now,
                   struct op_record *ret_op);

/* A provider answer that did not come from a call (signed webhook,
 * settlement file): succeeded or rejected, with the refund id if any. An
 * operation already in that final state is left as it is (*ret_changed =
 * false). TG_ESTATE for one in flight (its call decides), pending (never
 * sent: no answer can be ours) or final with the other outcome. */
int policy_external(const struct op_record *op, enum op_state outcome, const char *refund_id,
                    tg_wall_ms now, struct op_record *ret_op, bool *ret_changed);

/* A new operation from the intake: pending, with its budgets. Its deadline
 * is the earlier of now + deadline_ms and the caller's (req->deadline_at,
 * when > 0; then kept as caller_deadline_at too), and its traceparent the
 * request's. */
void policy_accept(const struct policy_config *config, const struct refund_request *req,
                   tg_wall_ms now, struct op_record *ret_op);

/* An outbox row (pending, attempt_limit 0) taken in: its budgets from
 * config, counted from its accepted_at; an invalid one goes to manual
 * (MANUAL_INVALID). TG_ESTATE unless pending. */
int policy_outbox(const struct policy_config *config, const struct op_record *op, bool valid,
                  tg_wall_ms now, struct op_record *ret_op);

/* The caller cancels an operation that never reached the transport (no
 * POST, no query: attempts, queries and key_first_used all 0): it becomes
 * cancelled, final, and the exit never picks it. One already cancelled is
 * left as it is (*ret_changed = false). TG_ESTATE where the table has no
 * cancel (in flight, unknown, succeeded, rejected); TG_ECONFLICT where it
 * has one but a call was made (a sent refund is reconciled, never cancelled
 * on our side). */
int policy_cancel(const struct op_record *op, tg_wall_ms now, struct op_record *ret_op,
                  bool *ret_changed);

/* An operator gives a manual case to `assignee` ("" or NULL: to nobody);
 * its state and reason stay. TG_ESTATE unless manual, TG_EINVAL for a name
 * that does not fit (TG_TEXT_MAX - 1 bytes). */
int policy_assign(const struct op_record *op, const char *assignee, tg_wall_ms now,
                  struct op_record *ret_op);

/* The policy's view of an operation (the inputs of the decisions above). */
void policy_view(const struct op_record *op, struct policy_op *ret_view);

/* True when the state is final (succeeded, rejected, cancelled). */
bool policy_state_is_final(enum op_state state);

#endif
