/*
 * Tests of core/policy's transition table: every state x every event, driven
 * through the function that owns the event, with the inputs that can change
 * its outcome (each class of a call's end, each outcome of an operator or a
 * provider answer, a valid and an invalid outbox row, budgets open and
 * spent, a deadline and a key age passed or not, an operation sent or never
 * sent for a cancel, an owner or none for an assign). For each (state,
 * event):
 *   - an event the table does not allow changes nothing (TG_ESTATE, or
 *     TG_EAGAIN for a sweep that does not apply);
 *   - an allowed one lands in a state the table lists, with the record's
 *     invariants (manual carries a reason; retry_wait and unknown carry a
 *     next run; the claim counts one call);
 *   - every state the table lists is reached by some input: the table holds
 *     nothing that cannot happen.
 * Also: the group, kind and source sets derived from the table, and
 * policy_is_due() against a plain reading of DESIGN.md over a grid of
 * operations (the stores' SQL is checked against policy_is_due() in
 * test_store_contract.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/policy.h"
#include "core/tg_error.h"

#define T0        1700000000000LL
#define RETENTION (23LL * 3600 * 1000)
#define B(s)      POLICY_STATE_BIT(s)

static struct policy_config config(void)
{
        struct policy_config c;

        policy_config_default(&c);
        return c;
}

/* An operation in `state` with budgets open, sent once where that makes
 * sense, its deadline ahead. */
static struct op_record op_in(enum op_state state)
{
        struct op_record op;

        memset(&op, 0, sizeof(op));
        op.id = 7;
        snprintf(op.req.operation_id, sizeof(op.req.operation_id), "op-table");
        snprintf(op.req.payment_id, sizeof(op.req.payment_id), "pay");
        op.req.amount = 100;
        memcpy(op.req.currency, "TWD", 4);
        op.state = state;
        bool never_sent = state == OP_PENDING || state == OP_CANCELLED;

        op.attempts = never_sent ? 0 : 1;
        op.attempt_limit = 3;
        op.queries = state == OP_IN_FLIGHT ? 1 : 0;
        op.query_limit = 10;
        op.accepted_at = T0;
        op.deadline_at = T0 + 900000;
        op.key_first_used = never_sent ? 0 : T0 + 5;
        op.next_run_at = state == OP_RETRY_WAIT || state == OP_UNKNOWN ? T0 + 10 : 0;
        op.updated_at = T0;
        op.reason = state == OP_MANUAL ? MANUAL_ATTEMPTS_EXHAUSTED : MANUAL_NONE;
        op.last_class = TG_CLASS_UNKNOWN;
        memcpy(op.source, "api", 4);
        return op;
}

/* What one input did. */
struct outcome {
        int r;
        struct op_record before, after;
        int asked; /* the state an operator or the provider asked for; -1: none */
};

static void check_sane(const struct outcome *o, enum op_event event)
{
        const struct op_record *a = &o->after;

        if (a->state == OP_MANUAL)
                assert_int_not_equal(a->reason, MANUAL_NONE);
        if ((a->state == OP_RETRY_WAIT || a->state == OP_UNKNOWN) && event != OP_EV_CLAIM)
                assert_true(a->next_run_at > 0);
        if (event == OP_EV_CLAIM)
                assert_int_equal(
                    (a->attempts - o->before.attempts) + (a->queries - o->before.queries), 1);
        if (event == OP_EV_CANCEL && o->before.state != OP_CANCELLED) /* never sent only */
                assert_true(o->before.attempts == 0 && o->before.queries == 0 &&
                            o->before.key_first_used == 0);
        if (event == OP_EV_LIMITED) {
                /* the call is given back: every call still counted, the
                 * limit it was counted against one higher, and a budget at
                 * its end never the reason it stops */
                assert_int_equal(a->attempts, o->before.attempts);
                assert_int_equal(a->queries, o->before.queries);
                assert_int_equal((a->attempt_limit - o->before.attempt_limit) +
                                     (a->query_limit - o->before.query_limit),
                                 1);
                if (a->state == OP_MANUAL)
                        assert_true(a->reason == MANUAL_DEADLINE ||
                                    a->reason == MANUAL_KEY_RETENTION);
        }
        if (event == OP_EV_ASSIGN) { /* the owner changes, nothing else */
                assert_int_equal(a->state, o->before.state);
                assert_int_equal(a->reason, o->before.reason);
                assert_int_equal(a->attempts, o->before.attempts);
        }
        assert_int_equal(a->id, o->before.id); /* the same operation, always */
        assert_string_equal(a->req.operation_id, o->before.req.operation_id); /* one key */
}

#define MAX_INPUTS 48

/* The next free outcome of out[MAX_INPUTS]. */
static struct outcome *slot(struct outcome *out, unsigned *n)
{
        assert_true(*n < MAX_INPUTS);
        out[*n].asked = -1;
        return &out[(*n)++];
}

/* Fires `event` at an operation in `state` with every input that can change
 * its outcome. */
static unsigned fire(enum op_state state, enum op_event event, struct outcome *out)
{
        const struct policy_config c = config();
        struct tg_rng rng;
        unsigned n = 0;

        tg_rng_seed(&rng, 42);
        switch (event) {
        case OP_EV_CLAIM:
                for (int resend = 0; resend < 2; resend++) {
                        struct outcome *o = slot(out, &n);
                        enum tg_call_kind kind;
                        unsigned attempt;

                        o->before = op_in(state);
                        o->before.operator_resend = resend;
                        o->r = policy_claim(&o->before, 3, 0, T0 + 20, &o->after, &kind, &attempt);
                }
                break;
        case OP_EV_CALL_END:
                for (int q = 0; q < 2; q++)
                        for (int cls = 0; cls < TG_CLASS_COUNT; cls++)
                                for (int last = 0; last < 2; last++) {
                                        struct outcome *o = slot(out, &n);
                                        struct policy_event ev = {.request = q ? CLASSIFY_QUERY
                                                                               : CLASSIFY_POST,
                                                                  .cls = (enum tg_class)cls,
                                                                  .retry_after_ms = -1,
                                                                  .now = T0 + 30,
                                                                  .limited = false};
                                        struct policy_decision d;
                                        struct policy_call_end end = {.cls = ev.cls};

                                        o->before = op_in(state);
                                        if (last) /* every budget at its end */
                                                o->before.attempts = o->before.attempt_limit;
                                        if (q && last)
                                                o->before.queries = o->before.query_limit;
                                        policy_call_outcome(&c, &o->before, &ev, &rng, &d);
                                        o->r = policy_end_call(&o->before, &d, &end, ev.now,
                                                               &o->after);
                                }
                break;
        case OP_EV_LIMITED:
                /* a 429/503: a POST's retryable, a query's no_answer, with
                 * its budget at its end, early or just before the deadline */
                for (int q = 0; q < 2; q++)
                        for (int late = 0; late < 2; late++) {
                                struct outcome *o = slot(out, &n);
                                struct policy_decision d;

                                o->before = op_in(state);
                                o->before.attempts = o->before.attempt_limit;
                                if (q)
                                        o->before.queries = o->before.query_limit;
                                struct policy_event ev = {
                                    .request = q ? CLASSIFY_QUERY : CLASSIFY_POST,
                                    .cls = q ? TG_CLASS_NO_ANSWER : TG_CLASS_RETRYABLE,
                                    .retry_after_ms = -1,
                                    .now = late ? o->before.deadline_at - 1 : T0 + 30,
                                    .limited = true};
                                struct policy_call_end end = {.cls = ev.cls, .http_status = 429};

                                policy_call_outcome(&c, &o->before, &ev, &rng, &d);
                                o->r = policy_end_call(&o->before, &d, &end, ev.now, &o->after);
                        }
                break;
        case OP_EV_TAKEOVER:
                for (int late = 0; late < 4; late++) {
                        struct outcome *o = slot(out, &n);
                        /* 3: a provider with no query (notification) and a
                         * replay: the running POST is replayed */
                        struct policy_config nq = c;

                        nq.notification = nq.replay = late == 3;
                        o->before = op_in(state);
                        if (late == 2)
                                o->before.queries = o->before.query_limit;
                        o->r = policy_takeover(&nq, &o->before,
                                               late == 1 ? o->before.deadline_at + 1 : T0 + 40,
                                               &o->after);
                }
                break;
        case OP_EV_DEADLINE:
        case OP_EV_KEY_RETENTION: {
                struct outcome *o = slot(out, &n);
                enum op_event got = OP_EV_CLAIM;

                o->before = op_in(state);
                tg_wall_ms now = event == OP_EV_DEADLINE ? o->before.deadline_at + 1
                                                         : o->before.key_first_used + RETENTION;
                if (event == OP_EV_KEY_RETENTION)
                        o->before.deadline_at = now + 1000; /* only the key is past */
                o->r = policy_sweep(&o->before, now, RETENTION, &got, &o->after);
                if (o->r == 0 && got != event)
                        o->r = TG_EAGAIN; /* the other sweep: not this event */
                break;
        }
        case OP_EV_RESEND: {
                struct outcome *o = slot(out, &n);

                o->before = op_in(state);
                o->r = policy_resend(&c, &o->before, T0 + 50, &o->after);
                break;
        }
        case OP_EV_RESOLVE:
        case OP_EV_EXTERNAL:
                for (int ok = 0; ok < 2; ok++) {
                        struct outcome *o = slot(out, &n);
                        enum op_state outcome = ok ? OP_SUCCEEDED : OP_REJECTED;
                        bool changed = false;

                        o->before = op_in(state);
                        o->asked = (int)outcome;
                        o->r = event == OP_EV_RESOLVE
                                   ? policy_resolve(&o->before, outcome, T0 + 60, &o->after)
                                   : policy_external(&o->before, outcome, "re_1", T0 + 60,
                                                     &o->after, &changed);
                }
                break;
        case OP_EV_RELEASE:
                for (int k = 0; k < TG_KIND_COUNT; k++) {
                        struct outcome *o = slot(out, &n);

                        o->before = op_in(state);
                        /* a claim keeps the schedule it was due by */
                        if (k != TG_KIND_FIRST)
                                o->before.next_run_at = T0 + 10;
                        o->r = policy_release(&o->before, (enum tg_call_kind)k, T0 + 80, &o->after);
                }
                break;
        case OP_EV_CANCEL:
                for (int sent = 0; sent < 2; sent++) {
                        struct outcome *o = slot(out, &n);
                        bool changed = false;

                        o->before = op_in(state);
                        o->before.attempts = sent ? 1 : 0;
                        o->before.queries = 0;
                        o->before.key_first_used = sent ? T0 + 5 : 0;
                        o->r = policy_cancel(&o->before, T0 + 80, &o->after, &changed);
                        if (o->r == 0 && changed != (o->before.state != OP_CANCELLED))
                                fail_msg("cancel in %s: changed %d", op_state_name(state), changed);
                }
                break;
        case OP_EV_ASSIGN:
                for (int who = 0; who < 2; who++) {
                        struct outcome *o = slot(out, &n);

                        o->before = op_in(state);
                        o->r = policy_assign(&o->before, who ? "alice" : "", T0 + 90, &o->after);
                        if (o->r == 0)
                                assert_string_equal(o->after.assignee, who ? "alice" : "");
                }
                break;
        case OP_EV_OUTBOX:
        default:
                for (int valid = 0; valid < 2; valid++) {
                        struct outcome *o = slot(out, &n);

                        o->before = op_in(state);
                        o->before.attempt_limit = 0; /* not taken in yet */
                        o->r = policy_outbox(&c, &o->before, valid, T0 + 70, &o->after);
                }
                break;
        }
        return n;
}

static void test_every_state_every_event(void **state)
{
        (void)state;
        for (int s = 0; s < OP_STATE_COUNT; s++) {
                for (int e = 0; e < OP_EVENT_COUNT; e++) {
                        struct outcome out[MAX_INPUTS];
                        unsigned allowed = policy_targets((enum op_state)s, (enum op_event)e);
                        unsigned reached = 0;
                        unsigned n = fire((enum op_state)s, (enum op_event)e, out);

                        for (unsigned i = 0; i < n; i++) {
                                const struct outcome *o = &out[i];

                                if (!allowed) {
                                        if (o->r != TG_ESTATE && o->r != TG_EAGAIN)
                                                fail_msg("%s in %s: allowed by no table row, "
                                                         "answered %d",
                                                         op_event_name((enum op_event)e),
                                                         op_state_name((enum op_state)s), o->r);
                                        continue;
                                }
                                /* an allowed event refuses only what was asked
                                 * against the table (the other final outcome),
                                 * a sweep that does not apply, a re-send past
                                 * key retention, or a cancel of what was sent */
                                if (o->r == TG_ESTATE && o->asked >= 0 && !(allowed & B(o->asked)))
                                        continue;
                                if (o->r == TG_EAGAIN || o->r == TG_ERANGE)
                                        continue;
                                if (o->r == TG_ECONFLICT && e == OP_EV_CANCEL &&
                                    o->before.attempts > 0)
                                        continue;
                                assert_int_equal(o->r, 0);
                                if (!(allowed & B(o->after.state)))
                                        fail_msg("%s in %s led to %s, not in the table",
                                                 op_event_name((enum op_event)e),
                                                 op_state_name((enum op_state)s),
                                                 op_state_name(o->after.state));
                                check_sane(o, (enum op_event)e);
                                reached |= B(o->after.state);
                        }
                        if (reached != allowed)
                                fail_msg("%s in %s: the table lists %#x, the inputs reached %#x",
                                         op_event_name((enum op_event)e),
                                         op_state_name((enum op_state)s), allowed, reached);
                }
        }
}

static void test_derived_sets(void **state)
{
        (void)state;
        assert_int_equal(policy_group_states(POLICY_GROUP_FIRST), B(OP_PENDING));
        assert_int_equal(policy_group_states(POLICY_GROUP_AGAIN), B(OP_RETRY_WAIT) | B(OP_UNKNOWN));
        assert_int_equal(policy_kind_states(TG_KIND_QUERY), B(OP_UNKNOWN));
        assert_int_equal(policy_kind_states(TG_KIND_FIRST), B(OP_PENDING));
        assert_int_equal(policy_sources(OP_EV_DEADLINE),
                         B(OP_PENDING) | B(OP_RETRY_WAIT) | B(OP_UNKNOWN));
        assert_int_equal(policy_sources(OP_EV_KEY_RETENTION), B(OP_RETRY_WAIT));
        assert_int_equal(policy_sources(OP_EV_TAKEOVER), B(OP_IN_FLIGHT));
        assert_int_equal(policy_sources(OP_EV_RESEND), B(OP_MANUAL));
        assert_int_equal(policy_sources(OP_EV_CANCEL),
                         B(OP_PENDING) | B(OP_RETRY_WAIT) | B(OP_MANUAL) | B(OP_CANCELLED));
        assert_int_equal(policy_sources(OP_EV_ASSIGN), B(OP_MANUAL));
        assert_int_equal(policy_sources(OP_EV_LIMITED), B(OP_IN_FLIGHT));
        assert_string_equal(op_event_name(OP_EV_LIMITED), "limited");
        /* a cancelled operation is never picked, swept or recovered */
        assert_false(policy_sources(OP_EV_CLAIM) & B(OP_CANCELLED));
        assert_false(policy_sources(OP_EV_DEADLINE) & B(OP_CANCELLED));
        /* a final state only ever "changes" to itself */
        for (int e = 0; e < OP_EVENT_COUNT; e++) {
                assert_true((policy_targets(OP_SUCCEEDED, (enum op_event)e) & ~B(OP_SUCCEEDED)) ==
                            0);
                assert_true((policy_targets(OP_REJECTED, (enum op_event)e) & ~B(OP_REJECTED)) == 0);
                assert_true((policy_targets(OP_CANCELLED, (enum op_event)e) & ~B(OP_CANCELLED)) ==
                            0);
                /* nothing ever goes back to pending but an outbox row taken in,
                 * or a first POST's claim given back before it was sent */
                if (e != OP_EV_OUTBOX && e != OP_EV_RELEASE)
                        for (int s = 0; s < OP_STATE_COUNT; s++)
                                assert_false(policy_targets((enum op_state)s, (enum op_event)e) &
                                             B(OP_PENDING));
        }
        assert_int_equal(policy_targets(OP_STATE_COUNT, OP_EV_CLAIM), 0);
        assert_int_equal(policy_targets(OP_PENDING, OP_EVENT_COUNT), 0);
        assert_string_equal(op_event_name(OP_EV_KEY_RETENTION), "key_retention");
        assert_string_equal(op_event_name(OP_EVENT_COUNT), "invalid");
}

/* DESIGN.md's "which operation may pass the exit now", written out plainly
 * and compared with policy_is_due() over a grid. */
static bool due_by_hand(const struct op_record *op, const struct policy_pick *p)
{
        bool again = p->group == POLICY_GROUP_AGAIN;
        bool key_old = op->state == OP_RETRY_WAIT && op->attempts > 0 && op->key_first_used > 0 &&
                       p->key_retention_ms > 0 &&
                       op->key_first_used + p->key_retention_ms <= p->now;

        if (op->attempt_limit == 0 || op->deadline_at <= p->now)
                return false;
        if (p->posts_barred && op->state != OP_UNKNOWN)
                return false; /* every call but a query is a POST */
        if (!again)
                return op->state == OP_PENDING;
        if (op->state != OP_RETRY_WAIT && op->state != OP_UNKNOWN)
                return false;
        if (op->next_run_at > p->now || key_old)
                return false;
        return p->queries_allowed || op->state != OP_UNKNOWN;
}

static void test_is_due_grid(void **state)
{
        const tg_wall_ms now = T0 + 100000;
        unsigned cases = 0;

        (void)state;
        for (int s = 0; s < OP_STATE_COUNT; s++)
                for (int g = 0; g < 2; g++)
                        for (int bits = 0; bits < 128; bits++) {
                                struct op_record op = op_in((enum op_state)s);
                                struct policy_pick p = {
                                    .group = g ? POLICY_GROUP_AGAIN : POLICY_GROUP_FIRST,
                                    .now = now,
                                    .key_retention_ms = (bits & 1) ? RETENTION : 0,
                                    .queries_allowed = (bits & 2) != 0,
                                    .posts_barred = (bits & 64) != 0};

                                op.deadline_at = (bits & 4) ? now : now + 1;
                                op.next_run_at = (bits & 8) ? now + 1 : now;
                                op.key_first_used = (bits & 16) ? now - RETENTION : now - 1;
                                op.attempt_limit = (bits & 32) ? 0 : 3;
                                if (policy_is_due(&op, &p) != due_by_hand(&op, &p))
                                        fail_msg("%s, group %d, bits %#x: policy says %d",
                                                 op_state_name(op.state), g, bits,
                                                 policy_is_due(&op, &p));
                                cases++;
                        }
        assert_int_equal(cases, OP_STATE_COUNT * 2 * 128);
}

/* A claim given back before its slot leaves the operation as the claim
 * found it: state, counts, key age, schedule, reason and an operator's
 * re-send (only the time of the last change and the claim's epoch move). */
static void test_release_undoes_the_claim(void **state)
{
        static const enum op_state claimable[] = {OP_PENDING, OP_RETRY_WAIT, OP_UNKNOWN};

        (void)state;
        for (size_t i = 0; i < sizeof(claimable) / sizeof(claimable[0]); i++)
                for (int resend = 0; resend < 2; resend++) {
                        struct op_record before = op_in(claimable[i]), claimed, back;
                        enum tg_call_kind kind;
                        unsigned attempt;

                        if (resend && claimable[i] != OP_RETRY_WAIT)
                                continue;
                        before.operator_resend = resend;
                        assert_int_equal(
                            policy_claim(&before, 4, 1, T0 + 90, &claimed, &kind, &attempt), 0);
                        assert_int_equal(claimed.state, OP_IN_FLIGHT);
                        assert_int_equal(policy_release(&claimed, kind, T0 + 95, &back), 0);
                        assert_int_equal(back.state, before.state);
                        assert_int_equal(back.attempts, before.attempts);
                        assert_int_equal(back.queries, before.queries);
                        assert_int_equal(back.key_first_used, before.key_first_used);
                        assert_int_equal(back.next_run_at, before.next_run_at);
                        assert_int_equal(back.reason, before.reason);
                        assert_int_equal(back.operator_resend, before.operator_resend);
                        assert_int_equal(back.attempt_limit, before.attempt_limit);
                        assert_int_equal(back.deadline_at, before.deadline_at);
                        /* the next claim of it is the same kind of call */
                        assert_int_equal(policy_next_kind(back.state, back.operator_resend), kind);
                }
        /* not in flight: nothing to give back */
        struct op_record p = op_in(OP_PENDING), out;
        assert_int_equal(policy_release(&p, TG_KIND_FIRST, T0, &out), TG_ESTATE);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_state_every_event),
            cmocka_unit_test(test_derived_sets),
            cmocka_unit_test(test_is_due_grid),
            cmocka_unit_test(test_release_undoes_the_claim),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
