/*
 * Tests of core/policy: every transition of the operation state machine
 * (request x class x budget situation) from one table, an enumeration of
 * every (state, request, class) input that proves each gives a defined
 * decision or TG_EINVAL, the budgets (attempts, deadline, queries, key
 * retention), the Retry-After floor, the backoff windows with real jitter,
 * takeover, the deadline check, operator re-send, the names, and a seeded
 * property test of random walks through the machine.
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

#define T0         1700000000000LL /* acceptance */
#define DEADLINE   (T0 + 900000)
#define RETENTION  (23LL * 3600 * 1000)
#define PENDING_DL (7LL * 24 * 3600 * 1000) /* retry.pending_deadline_s's default */
#define NO_RA      (-1)

/* Deterministic backoff for the table: retry n waits exactly 2000 * 2^(n-1). */
static struct policy_config table_config(void)
{
        struct policy_config c;
        policy_config_default(&c);
        c.backoff.jitter = BACKOFF_JITTER_NONE;
        return c;
}

static struct policy_op base_op(enum classify_request request)
{
        struct policy_op op = {
            .state = OP_IN_FLIGHT,
            .attempts = 1,
            .attempt_limit = 3,
            .queries = request == CLASSIFY_QUERY ? 1 : 0,
            .query_limit = 10,
            .accepted_at = T0,
            .deadline_at = DEADLINE,
            .key_first_used = T0 + 5,
            .last_wait_ms = 0,
        };
        return op;
}

/* --- the transition table ------------------------------------------------ */

enum situation {
        FRESH,            /* first call, all budgets open, time to spare */
        SECOND_ATTEMPT,   /* two POSTs made */
        LAST_ATTEMPT,     /* attempt_limit POSTs made */
        QUERIES_SPENT,    /* query_limit queries made */
        NO_QUERY_BUDGET,  /* query_limit 0 */
        NEAR_DEADLINE,    /* 1 s before the deadline: any wait >= 2 s passes it */
        DEADLINE_EXACT,   /* a 2 s wait lands exactly on the deadline (allowed) */
        PAST_DEADLINE,    /* the call ended after the deadline */
        KEY_OLD,          /* a 2 s wait would pass key retention (deadline far) */
        KEY_EXACT,        /* a 2 s wait lands exactly on key expiry (refused) */
        KEY_JUST_OK,      /* a 2 s wait lands 1 ms before key expiry */
        KEY_AND_DEADLINE, /* the wait passes the deadline, then key expiry */
        KEY_EXPIRED,      /* the key is past retention already (deadline far) */
        KEY_EXPIRED_DL,   /* the key is past retention already, and near the deadline */
        QUERIES_AND_DL,   /* query budget spent and near the deadline */
        ATTEMPTS_AND_KEY, /* attempts spent and the key old */
        PENDING,          /* provider-pending a minute, 3 polls made: the next in 16 s */
        PENDING_CAPPED,   /* provider-pending, 30 polls made: the next at the cap */
        PENDING_SPENT,    /* provider-pending, pending_max_polls polls made */
        PENDING_END,      /* provider-pending, its deadline 10 s away (the next poll: 16 s) */
        PENDING_QUERIES,  /* provider-pending, the normal query budget spent */
        SITUATION_COUNT,
};

static const char *const situation_names[SITUATION_COUNT] = {
    "fresh",
    "second_attempt",
    "last_attempt",
    "queries_spent",
    "no_query_budget",
    "near_deadline",
    "deadline_exact",
    "past_deadline",
    "key_old",
    "key_exact",
    "key_just_ok",
    "key_and_deadline",
    "key_expired",
    "key_expired_deadline",
    "queries_and_deadline",
    "attempts_and_key",
    "pending",
    "pending_capped",
    "pending_spent",
    "pending_end",
    "pending_queries",
};

static void situate(enum situation s, enum classify_request request, struct policy_op *op,
                    tg_wall_ms *now)
{
        *op = base_op(request);
        *now = T0 + 10000;
        switch (s) {
        case FRESH:
                break;
        case SECOND_ATTEMPT:
                op->attempts = 2;
                break;
        case LAST_ATTEMPT:
                op->attempts = 3;
                break;
        case QUERIES_SPENT:
                op->queries = 10;
                break;
        case NO_QUERY_BUDGET:
                op->query_limit = 0;
                break;
        case NEAR_DEADLINE:
                *now = DEADLINE - 1000;
                break;
        case DEADLINE_EXACT:
                *now = DEADLINE - 2000;
                break;
        case PAST_DEADLINE:
                *now = DEADLINE + 1;
                break;
        case KEY_OLD:
                *now = T0 + 10000;
                op->key_first_used = *now + 1000 - RETENTION;
                op->deadline_at = *now + 900000;
                break;
        case KEY_EXACT:
                op->key_first_used = *now + 2000 - RETENTION;
                op->deadline_at = *now + 900000;
                break;
        case KEY_JUST_OK:
                op->key_first_used = *now + 2001 - RETENTION;
                op->deadline_at = *now + 900000;
                break;
        case KEY_AND_DEADLINE:
                *now = DEADLINE - 1000;
                op->key_first_used = *now + 1000 - RETENTION;
                break;
        case KEY_EXPIRED:
                op->key_first_used = *now - RETENTION;
                op->deadline_at = *now + 900000;
                break;
        case KEY_EXPIRED_DL:
                *now = DEADLINE - 1000;
                op->key_first_used = *now - RETENTION - 1;
                break;
        case QUERIES_AND_DL:
                op->queries = 10;
                *now = DEADLINE - 1000;
                break;
        case ATTEMPTS_AND_KEY:
                op->attempts = 3;
                op->key_first_used = *now + 1000 - RETENTION;
                op->deadline_at = *now + 900000;
                break;
        case PENDING:
        case PENDING_CAPPED:
        case PENDING_SPENT:
        case PENDING_END:
        case PENDING_QUERIES:
                op->pending_since = s == PENDING_END ? *now + 10000 - PENDING_DL : *now - 60000;
                op->deadline_at = op->pending_since + PENDING_DL;
                op->pending_polls = s == PENDING_CAPPED ? 30 : s == PENDING_SPENT ? 200 : 3;
                if (s == PENDING_QUERIES)
                        op->queries = op->query_limit;
                break;
        case SITUATION_COUNT:
                break;
        }
}

struct transition {
        enum classify_request request;
        enum tg_class cls;
        enum situation situation;
        int64_t retry_after_ms;
        int rc;
        enum op_state next;
        enum manual_reason reason;
        int64_t wait_ms; /* retry_wait/unknown: next_run_at = now + wait_ms */
};

#define P    CLASSIFY_POST
#define Q    CLASSIFY_QUERY
#define BAD  ((enum tg_class)TG_CLASS_COUNT)
#define NEG  ((enum tg_class) - 1)
#define EINV TG_EINVAL

#define SUCC(req, cls, sit)                                                                        \
        {                                                                                          \
                req, cls, sit, NO_RA, 0, OP_SUCCEEDED, MANUAL_NONE, 0                              \
        }
#define REJ(req, cls, sit)                                                                         \
        {                                                                                          \
                req, cls, sit, NO_RA, 0, OP_REJECTED, MANUAL_NONE, 0                               \
        }
#define MAN(req, cls, sit, ra, why)                                                                \
        {                                                                                          \
                req, cls, sit, ra, 0, OP_MANUAL, why, 0                                            \
        }
#define RW(req, cls, sit, ra, w)                                                                   \
        {                                                                                          \
                req, cls, sit, ra, 0, OP_RETRY_WAIT, MANUAL_NONE, w                                \
        }
#define UNK(req, cls, sit, ra, w)                                                                  \
        {                                                                                          \
                req, cls, sit, ra, 0, OP_UNKNOWN, MANUAL_NONE, w                                   \
        }
#define INVAL(req, cls)                                                                            \
        {                                                                                          \
                req, cls, FRESH, NO_RA, EINV, OP_PENDING, MANUAL_NONE, 0                           \
        }

#define AE MANUAL_ATTEMPTS_EXHAUSTED
#define DL MANUAL_DEADLINE
#define QB MANUAL_QUERY_BUDGET
#define KR MANUAL_KEY_RETENTION
#define PP MANUAL_PENDING_POLLS
#define PD MANUAL_PENDING_DEADLINE

static const struct transition transitions[] = {
    /* POST succeeded / rejected / key_reused: final whatever the budgets */
    SUCC(P, TG_CLASS_SUCCEEDED, FRESH),
    SUCC(P, TG_CLASS_SUCCEEDED, LAST_ATTEMPT),
    SUCC(P, TG_CLASS_SUCCEEDED, PAST_DEADLINE),
    SUCC(P, TG_CLASS_SUCCEEDED, KEY_OLD),
    REJ(P, TG_CLASS_REJECTED, FRESH),
    REJ(P, TG_CLASS_REJECTED, LAST_ATTEMPT),
    REJ(P, TG_CLASS_REJECTED, PAST_DEADLINE),
    MAN(P, TG_CLASS_KEY_REUSED, FRESH, NO_RA, MANUAL_KEY_REUSED),
    MAN(P, TG_CLASS_KEY_REUSED, LAST_ATTEMPT, NO_RA, MANUAL_KEY_REUSED),
    MAN(P, TG_CLASS_KEY_REUSED, PAST_DEADLINE, NO_RA, MANUAL_KEY_REUSED),

    /* POST retryable: backoff, Retry-After floor, every budget */
    RW(P, TG_CLASS_RETRYABLE, FRESH, NO_RA, 2000),
    RW(P, TG_CLASS_RETRYABLE, SECOND_ATTEMPT, NO_RA, 4000),
    MAN(P, TG_CLASS_RETRYABLE, LAST_ATTEMPT, NO_RA, AE),
    RW(P, TG_CLASS_RETRYABLE, QUERIES_SPENT, NO_RA, 2000),
    RW(P, TG_CLASS_RETRYABLE, NO_QUERY_BUDGET, NO_RA, 2000),
    MAN(P, TG_CLASS_RETRYABLE, NEAR_DEADLINE, NO_RA, DL),
    RW(P, TG_CLASS_RETRYABLE, DEADLINE_EXACT, NO_RA, 2000),
    MAN(P, TG_CLASS_RETRYABLE, PAST_DEADLINE, NO_RA, DL),
    MAN(P, TG_CLASS_RETRYABLE, KEY_OLD, NO_RA, KR),
    MAN(P, TG_CLASS_RETRYABLE, KEY_EXACT, NO_RA, KR),
    RW(P, TG_CLASS_RETRYABLE, KEY_JUST_OK, NO_RA, 2000),
    MAN(P, TG_CLASS_RETRYABLE, KEY_AND_DEADLINE, NO_RA, DL),
    MAN(P, TG_CLASS_RETRYABLE, KEY_EXPIRED, NO_RA, KR),
    MAN(P, TG_CLASS_RETRYABLE, KEY_EXPIRED_DL, NO_RA, KR),
    MAN(P, TG_CLASS_RETRYABLE, KEY_JUST_OK, 3000, KR),
    MAN(P, TG_CLASS_RETRYABLE, ATTEMPTS_AND_KEY, NO_RA, AE),
    RW(P, TG_CLASS_RETRYABLE, FRESH, 30000, 30000),
    RW(P, TG_CLASS_RETRYABLE, FRESH, 2001, 2001),
    RW(P, TG_CLASS_RETRYABLE, FRESH, 1999, 2000),
    RW(P, TG_CLASS_RETRYABLE, FRESH, 0, 2000),
    RW(P, TG_CLASS_RETRYABLE, SECOND_ATTEMPT, 3000, 4000),
    RW(P, TG_CLASS_RETRYABLE, FRESH, 120000, 120000),
    MAN(P, TG_CLASS_RETRYABLE, FRESH, INT64_MAX, DL),
    MAN(P, TG_CLASS_RETRYABLE, DEADLINE_EXACT, 2001, DL),
    MAN(P, TG_CLASS_RETRYABLE, LAST_ATTEMPT, 30000, AE),

    /* POST not sent: the same as retryable (it counted as an attempt) */
    RW(P, TG_CLASS_NOT_SENT, FRESH, NO_RA, 2000),
    RW(P, TG_CLASS_NOT_SENT, SECOND_ATTEMPT, NO_RA, 4000),
    MAN(P, TG_CLASS_NOT_SENT, LAST_ATTEMPT, NO_RA, AE),
    MAN(P, TG_CLASS_NOT_SENT, NEAR_DEADLINE, NO_RA, DL),
    RW(P, TG_CLASS_NOT_SENT, DEADLINE_EXACT, NO_RA, 2000),
    MAN(P, TG_CLASS_NOT_SENT, PAST_DEADLINE, NO_RA, DL),
    MAN(P, TG_CLASS_NOT_SENT, KEY_OLD, NO_RA, KR),
    MAN(P, TG_CLASS_NOT_SENT, KEY_EXACT, NO_RA, KR),
    MAN(P, TG_CLASS_NOT_SENT, KEY_EXPIRED, NO_RA, KR),
    RW(P, TG_CLASS_NOT_SENT, KEY_JUST_OK, NO_RA, 2000),
    RW(P, TG_CLASS_NOT_SENT, FRESH, 30000, 30000),

    /* POST unknown: query with the same key, query budget and deadline */
    UNK(P, TG_CLASS_UNKNOWN, FRESH, NO_RA, 2000),
    UNK(P, TG_CLASS_UNKNOWN, FRESH, 5000, 5000),
    UNK(P, TG_CLASS_UNKNOWN, FRESH, 100, 2000),
    UNK(P, TG_CLASS_UNKNOWN, SECOND_ATTEMPT, NO_RA, 2000),
    UNK(P, TG_CLASS_UNKNOWN, LAST_ATTEMPT, NO_RA, 2000),
    MAN(P, TG_CLASS_UNKNOWN, QUERIES_SPENT, NO_RA, QB),
    MAN(P, TG_CLASS_UNKNOWN, NO_QUERY_BUDGET, NO_RA, QB),
    MAN(P, TG_CLASS_UNKNOWN, NEAR_DEADLINE, NO_RA, DL),
    UNK(P, TG_CLASS_UNKNOWN, DEADLINE_EXACT, NO_RA, 2000),
    MAN(P, TG_CLASS_UNKNOWN, DEADLINE_EXACT, 2001, DL),
    MAN(P, TG_CLASS_UNKNOWN, PAST_DEADLINE, NO_RA, DL),
    UNK(P, TG_CLASS_UNKNOWN, KEY_OLD, NO_RA, 2000),
    UNK(P, TG_CLASS_UNKNOWN, KEY_EXPIRED, NO_RA, 2000),
    MAN(P, TG_CLASS_UNKNOWN, QUERIES_AND_DL, NO_RA, QB),
    MAN(P, TG_CLASS_UNKNOWN, FRESH, INT64_MAX, DL),

    /* POST processing (a rule's: Checkout.com's 202, accepted, not final):
     * provider-pending, polled on the pending schedule (first poll after
     * pending_poll_interval_ms), whose deadline and budget are its own */
    UNK(P, TG_CLASS_PROCESSING, FRESH, NO_RA, 2000),
    UNK(P, TG_CLASS_PROCESSING, FRESH, 5000, 5000),
    UNK(P, TG_CLASS_PROCESSING, QUERIES_SPENT, NO_RA, 2000),
    UNK(P, TG_CLASS_PROCESSING, NEAR_DEADLINE, NO_RA, 2000),
    UNK(P, TG_CLASS_PROCESSING, PAST_DEADLINE, NO_RA, 2000),
    UNK(P, TG_CLASS_PROCESSING, KEY_EXPIRED, NO_RA, 2000),
    MAN(P, TG_CLASS_PROCESSING, FRESH, INT64_MAX, PD),
    /* a POST's lost answer once pending (a re-send after a not_found): the
     * pending schedule goes on */
    UNK(P, TG_CLASS_UNKNOWN, PENDING, NO_RA, 16000),

    /* classes a POST cannot produce */
    INVAL(P, TG_CLASS_NOT_FOUND),
    INVAL(P, TG_CLASS_NO_ANSWER),
    INVAL(P, BAD),
    INVAL(P, NEG),

    /* query succeeded / failed: final whatever the budgets */
    SUCC(Q, TG_CLASS_SUCCEEDED, FRESH),
    SUCC(Q, TG_CLASS_SUCCEEDED, QUERIES_SPENT),
    SUCC(Q, TG_CLASS_SUCCEEDED, PAST_DEADLINE),
    REJ(Q, TG_CLASS_REJECTED, FRESH),
    REJ(Q, TG_CLASS_REJECTED, QUERIES_SPENT),
    REJ(Q, TG_CLASS_REJECTED, PAST_DEADLINE),

    /* query processing: provider-pending, on the pending schedule, whatever
     * the normal query budget and deadline */
    UNK(Q, TG_CLASS_PROCESSING, FRESH, NO_RA, 2000),
    UNK(Q, TG_CLASS_PROCESSING, FRESH, 7000, 7000),
    UNK(Q, TG_CLASS_PROCESSING, LAST_ATTEMPT, NO_RA, 2000),
    UNK(Q, TG_CLASS_PROCESSING, QUERIES_SPENT, NO_RA, 2000),
    UNK(Q, TG_CLASS_PROCESSING, NO_QUERY_BUDGET, NO_RA, 2000),
    UNK(Q, TG_CLASS_PROCESSING, NEAR_DEADLINE, NO_RA, 2000),
    UNK(Q, TG_CLASS_PROCESSING, DEADLINE_EXACT, NO_RA, 2000),
    UNK(Q, TG_CLASS_PROCESSING, PAST_DEADLINE, NO_RA, 2000),
    UNK(Q, TG_CLASS_PROCESSING, QUERIES_AND_DL, NO_RA, 2000),
    /* once pending: the interval doubled per poll made (3: 2 s x 8), up to
     * the cap, a Retry-After its floor; the poll budget, then the pending
     * deadline, stop it; the normal query budget is not its */
    UNK(Q, TG_CLASS_PROCESSING, PENDING, NO_RA, 16000),
    UNK(Q, TG_CLASS_PROCESSING, PENDING, 20000, 20000),
    UNK(Q, TG_CLASS_PROCESSING, PENDING, 1000, 16000),
    UNK(Q, TG_CLASS_NO_ANSWER, PENDING, NO_RA, 16000),
    UNK(Q, TG_CLASS_PROCESSING, PENDING_CAPPED, NO_RA, 3600000),
    UNK(Q, TG_CLASS_PROCESSING, PENDING_QUERIES, NO_RA, 16000),
    UNK(Q, TG_CLASS_NO_ANSWER, PENDING_QUERIES, NO_RA, 16000),
    MAN(Q, TG_CLASS_PROCESSING, PENDING_SPENT, NO_RA, PP),
    MAN(Q, TG_CLASS_NO_ANSWER, PENDING_SPENT, NO_RA, PP),
    MAN(Q, TG_CLASS_PROCESSING, PENDING_END, NO_RA, PD),
    MAN(Q, TG_CLASS_PROCESSING, PENDING, INT64_MAX, PD),
    SUCC(Q, TG_CLASS_SUCCEEDED, PENDING_SPENT),
    REJ(Q, TG_CLASS_REJECTED, PENDING_END),
    /* no answer to a query of a refund not pending: ask again later */
    UNK(Q, TG_CLASS_NO_ANSWER, FRESH, NO_RA, 2000),
    UNK(Q, TG_CLASS_NO_ANSWER, FRESH, 7000, 7000),
    UNK(Q, TG_CLASS_NO_ANSWER, FRESH, 0, 2000),
    UNK(Q, TG_CLASS_NO_ANSWER, LAST_ATTEMPT, NO_RA, 2000),
    UNK(Q, TG_CLASS_NO_ANSWER, KEY_OLD, NO_RA, 2000),
    UNK(Q, TG_CLASS_PROCESSING, KEY_EXPIRED, NO_RA, 2000),
    MAN(Q, TG_CLASS_NO_ANSWER, QUERIES_SPENT, NO_RA, QB),
    MAN(Q, TG_CLASS_NO_ANSWER, NEAR_DEADLINE, NO_RA, DL),
    MAN(Q, TG_CLASS_NO_ANSWER, PAST_DEADLINE, NO_RA, DL),
    MAN(Q, TG_CLASS_NO_ANSWER, FRESH, INT64_MAX, DL),

    /* query not found: re-send the same key as the next attempt */
    RW(Q, TG_CLASS_NOT_FOUND, FRESH, NO_RA, 2000),
    RW(Q, TG_CLASS_NOT_FOUND, SECOND_ATTEMPT, NO_RA, 4000),
    MAN(Q, TG_CLASS_NOT_FOUND, LAST_ATTEMPT, NO_RA, AE),
    RW(Q, TG_CLASS_NOT_FOUND, QUERIES_SPENT, NO_RA, 2000),
    MAN(Q, TG_CLASS_NOT_FOUND, NEAR_DEADLINE, NO_RA, DL),
    RW(Q, TG_CLASS_NOT_FOUND, DEADLINE_EXACT, NO_RA, 2000),
    MAN(Q, TG_CLASS_NOT_FOUND, PAST_DEADLINE, NO_RA, DL),
    MAN(Q, TG_CLASS_NOT_FOUND, KEY_OLD, NO_RA, KR),
    MAN(Q, TG_CLASS_NOT_FOUND, KEY_EXACT, NO_RA, KR),
    RW(Q, TG_CLASS_NOT_FOUND, KEY_JUST_OK, NO_RA, 2000),
    MAN(Q, TG_CLASS_NOT_FOUND, KEY_AND_DEADLINE, NO_RA, DL),
    MAN(Q, TG_CLASS_NOT_FOUND, KEY_EXPIRED, NO_RA, KR),
    MAN(Q, TG_CLASS_NOT_FOUND, KEY_EXPIRED_DL, NO_RA, KR),
    MAN(Q, TG_CLASS_NOT_FOUND, KEY_EXPIRED, 0, KR),
    MAN(Q, TG_CLASS_NOT_FOUND, ATTEMPTS_AND_KEY, NO_RA, AE),
    RW(Q, TG_CLASS_NOT_FOUND, FRESH, 30000, 30000),
    MAN(Q, TG_CLASS_NOT_FOUND, FRESH, INT64_MAX, DL),

    /* classes a query cannot produce */
    INVAL(Q, TG_CLASS_KEY_REUSED),
    INVAL(Q, TG_CLASS_RETRYABLE),
    INVAL(Q, TG_CLASS_UNKNOWN),
    INVAL(Q, TG_CLASS_NOT_SENT),
    INVAL(Q, BAD),
    INVAL(Q, NEG),

    /* a request kind that does not exist */
    INVAL((enum classify_request)2, TG_CLASS_SUCCEEDED),
    INVAL((enum classify_request) - 1, TG_CLASS_UNKNOWN),
};
#define N_TRANSITIONS (sizeof(transitions) / sizeof(transitions[0]))

/* Values no decision has, set and compared field by field (the struct has
 * padding, which a copy need not keep). */
static struct policy_decision sentinel_decision(void)
{
        struct policy_decision d = {
            .next = (enum op_state)77,
            .next_run_at = -7777,
            .reason = (enum manual_reason)77,
            .wait_ms = -77,
        };
        return d;
}

static void assert_decision_equal(const struct policy_decision *a, const struct policy_decision *b)
{
        assert_int_equal(a->next, b->next);
        assert_int_equal(a->next_run_at, b->next_run_at);
        assert_int_equal(a->reason, b->reason);
        assert_int_equal(a->wait_ms, b->wait_ms);
}

static struct policy_op sentinel_policy_op(void)
{
        struct policy_op op = {(enum op_state)77, 7, 7, 7, 7, -7, -7, -7, -7, -7, 7, true};
        return op;
}

static void assert_op_equal(const struct policy_op *a, const struct policy_op *b)
{
        assert_int_equal(a->state, b->state);
        assert_int_equal(a->attempts, b->attempts);
        assert_int_equal(a->attempt_limit, b->attempt_limit);
        assert_int_equal(a->queries, b->queries);
        assert_int_equal(a->query_limit, b->query_limit);
        assert_int_equal(a->accepted_at, b->accepted_at);
        assert_int_equal(a->deadline_at, b->deadline_at);
        assert_int_equal(a->key_first_used, b->key_first_used);
        assert_int_equal(a->last_wait_ms, b->last_wait_ms);
        assert_int_equal(a->refund_id_known, b->refund_id_known);
}

static void test_transition_table(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        for (size_t i = 0; i < N_TRANSITIONS; i++) {
                const struct transition *t = &transitions[i];
                struct policy_op op;
                tg_wall_ms now;
                situate(t->situation, t->request, &op, &now);
                struct policy_event ev = {t->request, t->cls, t->retry_after_ms, now, false, false};
                struct tg_rng rng;
                tg_rng_seed(&rng, i);
                struct policy_decision d = sentinel_decision();
                struct policy_decision sentinel = sentinel_decision();
                int rc = policy_after_call(&cfg, &op, &ev, &rng, &d);

                const char *what = situation_names[t->situation];
                if (rc != t->rc)
                        fail_msg("row %zu (%d/%s/%s ra=%lld): rc %d, want %d", i, t->request,
                                 tg_class_name(t->cls), what, (long long)t->retry_after_ms, rc,
                                 t->rc);
                if (rc != 0) {
                        /* untouched on failure */
                        assert_decision_equal(&d, &sentinel);
                        continue;
                }
                tg_wall_ms want_at =
                    (t->next == OP_RETRY_WAIT || t->next == OP_UNKNOWN) ? now + t->wait_ms : 0;
                if (d.next != t->next || d.reason != t->reason || d.next_run_at != want_at ||
                    d.wait_ms != t->wait_ms)
                        fail_msg("row %zu (%d/%s/%s ra=%lld): got %s/%s at %+lld wait %lld, "
                                 "want %s/%s at %+lld wait %lld",
                                 i, t->request, tg_class_name(t->cls), what,
                                 (long long)t->retry_after_ms, op_state_name(d.next),
                                 manual_reason_name(d.reason),
                                 (long long)(d.next_run_at ? d.next_run_at - now : 0),
                                 (long long)d.wait_ms, op_state_name(t->next),
                                 manual_reason_name(t->reason),
                                 (long long)(want_at ? want_at - now : 0), (long long)t->wait_ms);
        }
}

/* --- every input, none missing ------------------------------------------- */

static bool class_from(enum classify_request request, enum tg_class cls)
{
        if (request == P)
                return cls == TG_CLASS_SUCCEEDED || cls == TG_CLASS_REJECTED ||
                       cls == TG_CLASS_KEY_REUSED || cls == TG_CLASS_RETRYABLE ||
                       cls == TG_CLASS_UNKNOWN || cls == TG_CLASS_NOT_SENT ||
                       cls == TG_CLASS_PROCESSING;
        if (request == Q)
                return cls == TG_CLASS_SUCCEEDED || cls == TG_CLASS_REJECTED ||
                       cls == TG_CLASS_PROCESSING || cls == TG_CLASS_NOT_FOUND ||
                       cls == TG_CLASS_NO_ANSWER;
        return false;
}

/* The decision the machine must reach with every budget open. */
static enum op_state expected_fresh(enum classify_request request, enum tg_class cls)
{
        switch (cls) {
        case TG_CLASS_SUCCEEDED:
                return OP_SUCCEEDED;
        case TG_CLASS_REJECTED:
                return OP_REJECTED;
        case TG_CLASS_KEY_REUSED:
                return OP_MANUAL;
        case TG_CLASS_RETRYABLE:
        case TG_CLASS_NOT_SENT:
        case TG_CLASS_NOT_FOUND:
                return OP_RETRY_WAIT;
        case TG_CLASS_UNKNOWN:
        case TG_CLASS_PROCESSING:
        case TG_CLASS_NO_ANSWER:
                return OP_UNKNOWN;
        }
        (void)request;
        return OP_PENDING;
}

static void check_decision_sane(const struct policy_decision *d, tg_wall_ms now)
{
        assert_true(d->next != OP_PENDING && d->next != OP_IN_FLIGHT);
        assert_true((unsigned)d->next < OP_STATE_COUNT);
        if (d->next == OP_RETRY_WAIT || d->next == OP_UNKNOWN) {
                assert_true(d->next_run_at >= now);
                assert_int_equal(d->next_run_at - now, d->wait_ms);
        } else {
                assert_int_equal(d->next_run_at, 0);
                assert_int_equal(d->wait_ms, 0);
        }
        if (d->next == OP_MANUAL)
                assert_true(d->reason != MANUAL_NONE && d->reason < MANUAL_REASON_COUNT);
        else
                assert_int_equal(d->reason, MANUAL_NONE);
}

static void test_every_input_defined_or_einval(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        for (int st = -1; st <= OP_STATE_COUNT; st++) {
                for (int req = -1; req <= 2; req++) {
                        for (int cls = -1; cls <= TG_CLASS_COUNT; cls++) {
                                for (int sit = 0; sit < SITUATION_COUNT; sit++) {
                                        struct policy_op op;
                                        tg_wall_ms now;
                                        situate((enum situation)sit, (enum classify_request)req,
                                                &op, &now);
                                        op.state = (enum op_state)st;
                                        struct policy_event ev = {(enum classify_request)req,
                                                                  (enum tg_class)cls,
                                                                  NO_RA,
                                                                  now,
                                                                  false,
                                                                  false};
                                        struct tg_rng rng;
                                        tg_rng_seed(&rng, 1);
                                        struct policy_decision d = sentinel_decision();
                                        struct policy_decision s = sentinel_decision();
                                        int rc = policy_after_call(&cfg, &op, &ev, &rng, &d);
                                        bool valid = st == OP_IN_FLIGHT &&
                                                     class_from((enum classify_request)req,
                                                                (enum tg_class)cls);
                                        if (!valid) {
                                                assert_int_equal(rc, TG_EINVAL);
                                                assert_decision_equal(&d, &s);
                                                continue;
                                        }
                                        assert_int_equal(rc, 0);
                                        check_decision_sane(&d, now);
                                        if (sit == FRESH)
                                                assert_int_equal(
                                                    d.next,
                                                    expected_fresh((enum classify_request)req,
                                                                   (enum tg_class)cls));
                                }
                        }
                }
        }

        /* The table names every (request, class) pair, valid or not. */
        for (int req = 0; req <= 1; req++) {
                for (int cls = 0; cls < TG_CLASS_COUNT; cls++) {
                        bool covered = false;
                        for (size_t i = 0; i < N_TRANSITIONS; i++) {
                                if ((int)transitions[i].request == req &&
                                    (int)transitions[i].cls == cls)
                                        covered = true;
                        }
                        if (!covered)
                                fail_msg("transition table misses request %d class %s", req,
                                         tg_class_name((enum tg_class)cls));
                }
        }
}

/* A call the provider refused for the whole account (429/503): a POST's
 * retryable or a query's no_answer with its budget at the end is given
 * back (its limit one higher, scheduled as any retry), not sent to manual;
 * other classes are not limited answers; with count_limited it counts. */
static void test_limited_gives_the_call_back(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        struct tg_rng rng;
        struct policy_decision d;
        tg_rng_seed(&rng, 7);

        struct policy_op op = base_op(P);
        op.attempts = op.attempt_limit; /* the third POST, refused with 429 */
        struct policy_event ev = {P, TG_CLASS_RETRYABLE, 5000, T0 + 1000, true, false};
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_RETRY_WAIT);
        assert_int_equal(d.given_back, POLICY_BUDGET_ATTEMPT);
        assert_true(d.next_run_at >= T0 + 1000 + 5000); /* Retry-After its floor */
        /* the same answer counted: out of attempts */
        cfg.count_limited = true;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_MANUAL);
        assert_int_equal(d.reason, MANUAL_ATTEMPTS_EXHAUSTED);
        assert_int_equal(d.given_back, POLICY_BUDGET_NONE);
        cfg.count_limited = false;
        /* not a limited answer: as before */
        ev.limited = false;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.reason, MANUAL_ATTEMPTS_EXHAUSTED);
        ev.limited = true;
        ev.cls = TG_CLASS_UNKNOWN; /* a rule made the 503 unknown: reconcile it */
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.given_back, POLICY_BUDGET_NONE);
        /* past the deadline it still stops, for the deadline */
        ev.cls = TG_CLASS_RETRYABLE;
        ev.now = DEADLINE - 10;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_MANUAL);
        assert_int_equal(d.reason, MANUAL_DEADLINE);

        /* a query refused so, its budget spent: given back, asked again */
        op = base_op(Q);
        op.queries = op.query_limit;
        struct policy_event q = {Q, TG_CLASS_NO_ANSWER, NO_RA, T0 + 1000, true, false};
        assert_int_equal(policy_after_call(&cfg, &op, &q, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.given_back, POLICY_BUDGET_QUERY);
        q.limited = false;
        assert_int_equal(policy_after_call(&cfg, &op, &q, &rng, &d), 0);
        assert_int_equal(d.reason, MANUAL_QUERY_BUDGET);
}

static void assert_same_decision(const struct policy_decision *a, const struct policy_decision *b)
{
        assert_int_equal(a->next, b->next);
        assert_int_equal(a->next_run_at, b->next_run_at);
        assert_int_equal(a->reason, b->reason);
        assert_int_equal(a->wait_ms, b->wait_ms);
}

/* A page of a list without ours, more to follow: the next query (the
 * next page) is due at once, not after the query interval; a Retry-After
 * still floors it; any other decision is left alone. */
static void test_next_page_is_due_at_once(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        struct tg_rng rng;
        tg_rng_seed(&rng, 7);
        struct policy_op op = base_op(Q);
        struct policy_event ev = {
            .request = Q, .cls = TG_CLASS_NO_ANSWER, .retry_after_ms = NO_RA, .now = T0 + 1000};
        struct policy_decision d, before;

        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.next_run_at, T0 + 1000 + cfg.query_interval_ms);
        policy_next_page(&ev, &d);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.next_run_at, T0 + 1000);
        assert_int_equal(d.wait_ms, 0);
        /* a Retry-After under the interval still floors it */
        ev.retry_after_ms = 300;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        policy_next_page(&ev, &d);
        assert_int_equal(d.next_run_at, T0 + 1000 + 300);
        ev.retry_after_ms = NO_RA;
        /* the query budget spent: manual stays manual */
        op.queries = op.query_limit;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        before = d;
        policy_next_page(&ev, &d);
        assert_same_decision(&d, &before);
        assert_int_equal(d.next, OP_MANUAL);
        /* not a query's no_answer: left alone */
        op = base_op(Q);
        ev.cls = TG_CLASS_PROCESSING;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        before = d;
        policy_next_page(&ev, &d);
        assert_same_decision(&d, &before);
        op = base_op(P);
        ev.request = P;
        ev.cls = TG_CLASS_UNKNOWN;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        before = d;
        policy_next_page(&ev, &d);
        assert_same_decision(&d, &before);
}

static void test_after_call_refuses_impossible_ops(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        struct tg_rng rng;
        tg_rng_seed(&rng, 7);
        struct policy_decision d = sentinel_decision(), s = sentinel_decision();

        /* a POST that ended was counted */
        struct policy_op op = base_op(P);
        op.attempts = 0;
        struct policy_event ev = {P, TG_CLASS_SUCCEEDED, NO_RA, T0 + 1000, false, false};
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), TG_EINVAL);
        /* a query that ended was counted */
        op = base_op(Q);
        op.queries = 0;
        ev.request = Q;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), TG_EINVAL);
        assert_decision_equal(&d, &s);
        /* NULL arguments */
        op = base_op(P);
        ev.request = P;
        assert_int_equal(policy_after_call(NULL, &op, &ev, &rng, &d), TG_EINVAL);
        assert_int_equal(policy_after_call(&cfg, NULL, &ev, &rng, &d), TG_EINVAL);
        assert_int_equal(policy_after_call(&cfg, &op, NULL, &rng, &d), TG_EINVAL);
        assert_int_equal(policy_after_call(&cfg, &op, &ev, NULL, &d), TG_EINVAL);
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, NULL), TG_EINVAL);
        assert_decision_equal(&d, &s);
        /* a backoff config that cannot draw: the error comes back, nothing decided */
        cfg.backoff.base_ms = 0;
        ev.cls = TG_CLASS_RETRYABLE;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), TG_EINVAL);
        assert_decision_equal(&d, &s);
}

/* --- budgets with the real defaults (full jitter) -------------------------- */

static void test_default_backoff_windows(void **state)
{
        (void)state;
        struct policy_config cfg;
        policy_config_default(&cfg);
        int64_t min2 = INT64_MAX, max2 = 0, min3 = INT64_MAX, max3 = 0;
        for (uint64_t seed = 0; seed < 2000; seed++) {
                struct tg_rng rng;
                tg_rng_seed(&rng, seed);
                struct policy_op op = base_op(P);
                struct policy_event ev = {P, TG_CLASS_RETRYABLE, NO_RA, T0 + 10000, false, false};
                struct policy_decision d;
                /* attempt 1 failed: attempt 2 waits 1-2 s */
                assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
                assert_int_equal(d.next, OP_RETRY_WAIT);
                assert_int_equal(d.next_run_at, ev.now + d.wait_ms);
                min2 = d.wait_ms < min2 ? d.wait_ms : min2;
                max2 = d.wait_ms > max2 ? d.wait_ms : max2;
                /* attempt 2 failed: attempt 3 waits 1-4 s */
                op.attempts = 2;
                op.last_wait_ms = d.wait_ms;
                assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
                assert_int_equal(d.next, OP_RETRY_WAIT);
                min3 = d.wait_ms < min3 ? d.wait_ms : min3;
                max3 = d.wait_ms > max3 ? d.wait_ms : max3;
                /* attempt 3 failed: out of attempts */
                op.attempts = 3;
                assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
                assert_int_equal(d.next, OP_MANUAL);
                assert_int_equal(d.reason, MANUAL_ATTEMPTS_EXHAUSTED);
        }
        assert_true(min2 >= 1000 && max2 <= 2000);
        assert_true(min3 >= 1000 && max3 <= 4000);
        /* the jitter spreads: not everybody at one instant */
        assert_true(max2 - min2 > 500);
        assert_true(max3 - min3 > 2000);
}

/* Retry-After is a floor that jitter never shortens, in every jitter mode. */
static void test_retry_after_floor_all_modes(void **state)
{
        (void)state;
        enum backoff_jitter modes[] = {BACKOFF_JITTER_NONE, BACKOFF_JITTER_FULL,
                                       BACKOFF_JITTER_EQUAL, BACKOFF_JITTER_DECORRELATED};
        for (size_t m = 0; m < 4; m++) {
                struct policy_config cfg;
                policy_config_default(&cfg);
                cfg.backoff.jitter = modes[m];
                for (uint64_t seed = 0; seed < 200; seed++) {
                        struct tg_rng rng;
                        tg_rng_seed(&rng, seed);
                        int64_t ra = (int64_t)(seed * 97 % 20000);
                        struct policy_op op = base_op(P);
                        op.attempts = 1 + (unsigned)(seed % 2);
                        op.last_wait_ms = (int64_t)(seed % 3000);
                        struct policy_event ev = {P,    TG_CLASS_RETRYABLE, ra, T0 + 10000, false,
                                                  false};
                        struct policy_decision d;
                        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
                        assert_int_equal(d.next, OP_RETRY_WAIT);
                        assert_true(d.wait_ms >= ra);
                        assert_true(d.next_run_at >= ev.now + ra);
                        /* and for a query's not_found */
                        op.queries = 1;
                        ev.request = Q;
                        ev.cls = TG_CLASS_NOT_FOUND;
                        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
                        assert_true(d.wait_ms >= ra);
                        /* and for the query spacing */
                        ev.cls = TG_CLASS_NO_ANSWER;
                        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
                        assert_true(d.wait_ms >= ra && d.wait_ms >= cfg.query_interval_ms);
                }
        }
}

/* A configured give-up time (backoff) ends in manual(deadline). */
static void test_backoff_give_up_is_deadline(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        cfg.backoff.give_up_ms = 5000;
        struct tg_rng rng;
        tg_rng_seed(&rng, 3);
        struct policy_op op = base_op(P);
        struct policy_decision d;
        struct policy_event ev = {P,    TG_CLASS_RETRYABLE, NO_RA, op.key_first_used + 1000, false,
                                  false};
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_RETRY_WAIT); /* 1000 + 2000 <= 5000 */
        ev.now = op.key_first_used + 3001;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_MANUAL);
        assert_int_equal(d.reason, MANUAL_DEADLINE);
}

/* The default budget: 10 queries, 2 s apart, then manual. */
static void test_query_budget_walk(void **state)
{
        (void)state;
        struct policy_config cfg;
        policy_config_default(&cfg);
        struct tg_rng rng;
        tg_rng_seed(&rng, 11);
        struct policy_op op = base_op(P);
        op.query_limit = cfg.max_queries;
        struct policy_event ev = {P, TG_CLASS_UNKNOWN, NO_RA, T0 + 1000, false, false};
        struct policy_decision d;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        unsigned asked = 0;
        while (d.next == OP_UNKNOWN) {
                ev.now = d.next_run_at;
                op.queries++;
                asked++;
                ev.request = Q;
                ev.cls = TG_CLASS_NO_ANSWER;
                assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
                assert_true(asked <= cfg.max_queries);
        }
        assert_int_equal(asked, cfg.max_queries);
        assert_int_equal(d.next, OP_MANUAL);
        assert_int_equal(d.reason, MANUAL_QUERY_BUDGET);
}

/* The contract's replay (provider.reconcile names `replay`): once the
 * queries are spent, an unknown outcome goes out again with its same key,
 * as the next attempt; never with a key past its retention (key_expired),
 * nor past the attempts or the deadline. Without `replay`: manual,
 * query_budget, as before. */
static void test_replay_after_the_queries(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        struct tg_rng rng;
        struct policy_decision d;
        struct policy_op op = base_op(Q);
        struct policy_event ev = {Q, TG_CLASS_NO_ANSWER, NO_RA, T0 + 1000, false, false};

        tg_rng_seed(&rng, 3);
        op.queries = op.query_limit;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.reason, MANUAL_QUERY_BUDGET);
        cfg.replay = true;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_RETRY_WAIT);
        assert_int_equal(d.next_run_at, T0 + 1000 + cfg.query_interval_ms);
        /* a query that still has budget is asked again first */
        op.queries = 1;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        /* a POST's unknown with no query left: the replay too */
        op = base_op(P);
        op.query_limit = 0;
        struct policy_event post = {P, TG_CLASS_UNKNOWN, NO_RA, T0 + 1000, false, false};
        assert_int_equal(policy_after_call(&cfg, &op, &post, &rng, &d), 0);
        assert_int_equal(d.next, OP_RETRY_WAIT);
        /* queries only by the provider's refund id (PayPal): a POST's
         * unknown without one is replayed at once; with one (a PENDING
         * answer named it) it is asked about first */
        op = base_op(P);
        cfg.query_needs_refund_id = true;
        assert_int_equal(policy_after_call(&cfg, &op, &post, &rng, &d), 0);
        assert_int_equal(d.next, OP_RETRY_WAIT);
        post.refund_id_known = true;
        assert_int_equal(policy_after_call(&cfg, &op, &post, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        cfg.query_needs_refund_id = false;
        /* the key past its retention, now or by the replay's time: key_expired */
        op = base_op(Q);
        op.queries = op.query_limit;
        cfg.key_retention_ms = 1000;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_MANUAL);
        assert_int_equal(d.reason, MANUAL_KEY_EXPIRED);
        cfg.key_retention_ms = 1000 - 5 + cfg.query_interval_ms; /* expires at the replay */
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.reason, MANUAL_KEY_EXPIRED);
        cfg.key_retention_ms = RETENTION;
        /* out of attempts, or past the deadline: those reasons */
        op.attempts = op.attempt_limit;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.reason, MANUAL_ATTEMPTS_EXHAUSTED);
        op.attempts = 1;
        ev.now = DEADLINE - 10;
        assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
        assert_int_equal(d.reason, MANUAL_DEADLINE);
        assert_string_equal(manual_reason_name(MANUAL_KEY_EXPIRED), "key_expired");
        /* a takeover where the queries go by the refund id only (PayPal):
         * without one, the running call was the POST: replayed; with one,
         * asked about at once as ever; without replay, asked as ever (the
         * exit finds no query to make and the call ends as no_answer) */
        op = base_op(P);
        cfg.query_needs_refund_id = true;
        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal(d.next, OP_RETRY_WAIT);
        assert_int_equal(d.next_run_at, T0 + 5000 + cfg.query_interval_ms);
        op.refund_id_known = true;
        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.next_run_at, T0 + 5000);
        op.refund_id_known = false;
        op.attempts = op.attempt_limit;
        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal((int)d.reason, (int)MANUAL_ATTEMPTS_EXHAUSTED);
        cfg.replay = false;
        op.attempts = 1;
        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
}

/* Notification-only (provider.reconcile = notification, Adyen): the POST
 * only acknowledges (processing) and no query exists. The operation waits
 * for the notification: unknown, its deadline moved to the wait's end and
 * its next run past that deadline (never due, so no query is made and none
 * of the budget spent); the sweep then sends it to manual as
 * notification_deadline. A lost answer (unknown) is replayed with `replay`
 * (within the key's life), else awaited too; a takeover awaits. */
static void test_notification_only(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        struct tg_rng rng;
        struct policy_decision d;
        struct policy_op op = base_op(P);
        struct policy_event ack = {P, TG_CLASS_PROCESSING, NO_RA, T0 + 1000, false, false};
        struct policy_event lost = {P, TG_CLASS_UNKNOWN, NO_RA, T0 + 1000, false, false};
        int64_t wait = 3600 * 1000;

        tg_rng_seed(&rng, 5);
        cfg.notification = true;
        cfg.notification_deadline_ms = wait;
        assert_int_equal(policy_config_check(&cfg), 0);
        assert_int_equal(policy_after_call(&cfg, &op, &ack, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.deadline_at, T0 + 1000 + wait);
        assert_true(d.next_run_at > d.deadline_at);
        assert_int_equal(d.reason, MANUAL_NONE);
        /* even with the query budget spent: a wait, not query_budget */
        op.query_limit = 0;
        assert_int_equal(policy_after_call(&cfg, &op, &ack, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.deadline_at, T0 + 1000 + wait);
        /* an answer lost: without replay, awaited as well */
        assert_int_equal(policy_after_call(&cfg, &op, &lost, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.deadline_at, T0 + 1000 + wait);
        /* with replay: the same POST again with its key, after the interval */
        cfg.replay = true;
        assert_int_equal(policy_after_call(&cfg, &op, &lost, &rng, &d), 0);
        assert_int_equal(d.next, OP_RETRY_WAIT);
        assert_int_equal(d.next_run_at, T0 + 1000 + cfg.query_interval_ms);
        assert_int_equal(d.deadline_at, 0);
        /* the replay's acknowledgement: the wait */
        op.attempts = 2;
        assert_int_equal(policy_after_call(&cfg, &op, &ack, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_true(d.next_run_at > d.deadline_at);
        /* a replay past the key's life: key_expired, never sent */
        cfg.key_retention_ms = 1000;
        assert_int_equal(policy_after_call(&cfg, &op, &lost, &rng, &d), 0);
        assert_int_equal(d.next, OP_MANUAL);
        assert_int_equal(d.reason, MANUAL_KEY_EXPIRED);
        cfg.key_retention_ms = RETENTION;
        /* a refusal and a retryable answer are what they are */
        struct policy_event refused = {P, TG_CLASS_REJECTED, NO_RA, T0 + 1000, false, false};
        assert_int_equal(policy_after_call(&cfg, &op, &refused, &rng, &d), 0);
        assert_int_equal(d.next, OP_REJECTED);
        /* a takeover without replay: the running call's notification is
         * awaited */
        op = base_op(P);
        cfg.replay = false;
        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.deadline_at, T0 + 5000 + wait);
        assert_true(d.next_run_at > d.deadline_at);
        /* with replay: the running call was a POST whose answer is lost,
         * replayed with its key after the interval (its answer says whether
         * it arrived) */
        cfg.replay = true;
        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal(d.next, OP_RETRY_WAIT);
        assert_int_equal(d.next_run_at, T0 + 5000 + cfg.query_interval_ms);
        assert_int_equal(d.deadline_at, 0);
        /* no replay left (attempts spent, or the key too old): awaited */
        op.attempts = op.attempt_limit;
        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.deadline_at, T0 + 5000 + wait);
        op.attempts = 1;
        cfg.key_retention_ms = 1000;
        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_true(d.next_run_at > d.deadline_at);
        cfg.key_retention_ms = RETENTION;
        op = base_op(P);

        /* applied to a record: never due, swept as notification_deadline */
        struct op_record rec, next;
        struct policy_call_end end = {TG_CLASS_PROCESSING, 201, "8815"};
        enum op_event ev;
        memset(&rec, 0, sizeof(rec));
        snprintf(rec.req.operation_id, sizeof(rec.req.operation_id), "op-n");
        rec.state = OP_IN_FLIGHT;
        rec.attempts = 1;
        rec.attempt_limit = 3;
        rec.query_limit = 10;
        rec.accepted_at = T0;
        rec.deadline_at = DEADLINE;
        rec.key_first_used = T0;
        policy_call_outcome(&cfg, &rec, &ack, &rng, &d);
        assert_int_equal(policy_end_call(&rec, &d, &end, T0 + 1000, &next), 0);
        assert_int_equal(next.state, OP_UNKNOWN);
        assert_int_equal(next.deadline_at, T0 + 1000 + wait);
        assert_string_equal(next.refund_id, "8815");
        assert_true(policy_awaits_notification(&next));
        struct policy_pick pick = {POLICY_GROUP_AGAIN, T0 + 1000 + wait, RETENTION, true, false};
        assert_false(policy_is_due(&next, &pick));
        pick.now = T0 + 2000;
        assert_false(policy_is_due(&next, &pick));
        assert_int_equal(policy_sweep(&next, T0 + 1000 + wait, RETENTION, &ev, &rec), TG_EAGAIN);
        assert_int_equal(policy_sweep(&next, T0 + 1001 + wait, RETENTION, &ev, &rec), 0);
        assert_int_equal(ev, OP_EV_DEADLINE);
        assert_int_equal(rec.state, OP_MANUAL);
        assert_int_equal(rec.reason, MANUAL_NOTIFICATION_DEADLINE);
        assert_string_equal(manual_reason_name(MANUAL_NOTIFICATION_DEADLINE),
                            "notification_deadline");
        /* the notification settles it while it waits */
        bool changed = false;
        assert_int_equal(policy_external(&next, OP_SUCCEEDED, "8815", T0 + 9000, &rec, &changed),
                         0);
        assert_true(changed);
        assert_int_equal(rec.state, OP_SUCCEEDED);
}

/* --- a refund the provider reports as pending ---------------------------------- */

/* One poll of a pending record, as the exit makes it: the claim, then the
 * answer `cls` at `end`, applied. */
static void poll_once(const struct policy_config *cfg, struct op_record *rec, tg_wall_ms end,
                      enum tg_class cls, int64_t retry_after, bool limited)
{
        struct op_record claimed, next;
        enum tg_call_kind kind;
        unsigned attempt = 0;
        struct policy_decision d;
        struct tg_rng rng;
        struct policy_event ev = {Q, cls, retry_after, end, limited, false};
        struct policy_call_end e = {cls, limited ? 429 : 200, ""};

        tg_rng_seed(&rng, 1);
        assert_int_equal(policy_claim(rec, 1, 0, rec->next_run_at, &claimed, &kind, &attempt), 0);
        assert_int_equal(kind, TG_KIND_QUERY);
        assert_int_equal(attempt, claimed.queries); /* every query counted, as ever */
        policy_call_outcome(cfg, &claimed, &ev, &rng, &d);
        assert_int_equal(policy_end_call(&claimed, &d, &e, end, &next), 0);
        *rec = next;
}

static struct op_record pending_record(const struct policy_config *cfg, tg_wall_ms at)
{
        struct op_record rec, next;
        struct policy_decision d;
        struct tg_rng rng;
        struct policy_event ack = {P, TG_CLASS_PROCESSING, NO_RA, at, false, false};
        struct policy_call_end e = {TG_CLASS_PROCESSING, 202, "re_1"};

        memset(&rec, 0, sizeof(rec));
        snprintf(rec.req.operation_id, sizeof(rec.req.operation_id), "op-p");
        rec.state = OP_IN_FLIGHT;
        rec.attempts = 1;
        rec.attempt_limit = cfg->max_attempts;
        rec.query_limit = cfg->max_queries;
        rec.accepted_at = T0;
        rec.deadline_at = T0 + cfg->deadline_ms;
        rec.key_first_used = T0;
        tg_rng_seed(&rng, 1);
        policy_call_outcome(cfg, &rec, &ack, &rng, &d);
        assert_int_equal(policy_end_call(&rec, &d, &e, at, &next), 0);
        return next;
}

/* Processing: unknown with pending_since, the polls doubling from
 * pending_poll_interval_ms to pending_poll_max_ms, never counted against
 * max_queries, the Retry-After a floor, a limited poll given back; then the
 * poll budget (pending_polls) or the pending deadline (pending_deadline),
 * also after a takeover and in the sweep; the notification (external) and
 * a final poll settle it; an operator's re-send starts afresh. */
static void test_pending_refund(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        struct op_record rec, out;
        struct policy_decision d;
        enum op_event ev;
        tg_wall_ms now = T0 + 1000;

        cfg.max_queries = 2;
        cfg.pending_poll_interval_ms = 1000;
        cfg.pending_poll_max_ms = 5000;
        cfg.pending_max_polls = 7;
        cfg.pending_deadline_ms = 60000;
        assert_int_equal(policy_config_check(&cfg), 0);

        /* the POST's processing answer (a rule's): pending since now */
        rec = pending_record(&cfg, now);
        assert_int_equal(rec.state, OP_UNKNOWN);
        assert_int_equal(rec.pending_since, now);
        assert_int_equal(rec.pending_polls, 0);
        assert_int_equal(rec.deadline_at, now + 60000);
        assert_int_equal(rec.next_run_at, now + 1000);
        assert_int_equal(rec.reason, MANUAL_NONE);

        /* the polls: gaps 2, 4, then the 5 s cap; past max_queries (2) */
        const int64_t gaps[] = {2000, 4000, 5000, 5000, 5000};
        for (size_t i = 0; i < 5; i++) {
                now = rec.next_run_at + 10;
                poll_once(&cfg, &rec, now, TG_CLASS_PROCESSING, NO_RA, false);
                assert_int_equal(rec.state, OP_UNKNOWN);
                assert_int_equal(rec.pending_polls, i + 1);
                assert_int_equal(rec.queries, i + 1);
                assert_true(rec.queries <= rec.query_limit); /* the normal budget: given back */
                assert_int_equal(rec.next_run_at, now + gaps[i]);
                assert_int_equal(rec.pending_since, T0 + 1000); /* kept */
                assert_int_equal(rec.deadline_at, T0 + 1000 + 60000);
        }
        /* a limited poll (429) is given back to the pending budget */
        struct op_record before = rec;
        now = rec.next_run_at;
        poll_once(&cfg, &rec, now, TG_CLASS_NO_ANSWER, 7000, true);
        assert_int_equal(rec.state, OP_UNKNOWN);
        assert_int_equal(rec.pending_polls, before.pending_polls);
        assert_int_equal(rec.next_run_at, now + 7000); /* its Retry-After, over the 5 s */
        /* a Retry-After floors a poll's wait */
        before = rec;
        now = rec.next_run_at;
        poll_once(&cfg, &rec, now, TG_CLASS_PROCESSING, 9000, false);
        assert_int_equal(rec.next_run_at, now + 9000);
        assert_int_equal(rec.pending_polls, 6);
        /* a claim given back unsent is not a poll */
        {
                struct op_record claimed, back;
                enum tg_call_kind kind;
                unsigned attempt;

                rec.pending_polls = 5;
                assert_int_equal(
                    policy_claim(&rec, 1, 0, rec.next_run_at, &claimed, &kind, &attempt), 0);
                assert_int_equal(claimed.pending_polls, 6);
                assert_int_equal(policy_release(&claimed, kind, rec.next_run_at, &back), 0);
                assert_int_equal(back.pending_polls, 5);
                assert_int_equal(back.queries, rec.queries);
                assert_int_equal(back.query_limit, rec.query_limit);
                rec.pending_polls = 6;
        }
        /* the seventh poll's answer: the poll budget (7) spent */
        out = rec;
        poll_once(&cfg, &out, out.next_run_at, TG_CLASS_PROCESSING, NO_RA, false);
        assert_int_equal(out.state, OP_MANUAL);
        assert_int_equal(out.reason, MANUAL_PENDING_POLLS);
        assert_int_equal(out.pending_since, T0 + 1000); /* shown for the record */

        /* the pending deadline: a poll whose next would fall on it */
        rec = pending_record(&cfg, T0 + 1000);
        now = T0 + 1000 + 60000 - 1500;
        rec.next_run_at = now;
        poll_once(&cfg, &rec, now, TG_CLASS_PROCESSING, NO_RA, false);
        assert_int_equal(rec.state, OP_MANUAL);
        assert_int_equal(rec.reason, MANUAL_PENDING_DEADLINE);
        /* the sweep names it too, past the pending deadline only */
        rec = pending_record(&cfg, T0 + 1000);
        assert_int_equal(policy_sweep(&rec, T0 + 1000 + 60000, RETENTION, &ev, &out), TG_EAGAIN);
        assert_int_equal(policy_sweep(&rec, T0 + 1000 + 60001, RETENTION, &ev, &out), 0);
        assert_int_equal(ev, OP_EV_DEADLINE);
        assert_int_equal(out.reason, MANUAL_PENDING_DEADLINE);
        /* and past the 15-minute deadline of an ordinary refund it is still
         * due, with a longer pending deadline */
        cfg.pending_deadline_ms = 7LL * 24 * 3600 * 1000;
        rec = pending_record(&cfg, T0 + 1000);
        struct policy_pick pick = {POLICY_GROUP_AGAIN, T0 + cfg.deadline_ms + 60000, RETENTION,
                                   true, false};
        rec.next_run_at = pick.now;
        assert_true(policy_is_due(&rec, &pick));
        assert_int_equal(policy_sweep(&rec, pick.now, RETENTION, &ev, &out), TG_EAGAIN);
        struct policy_op view;
        policy_view(&rec, &view);
        assert_int_equal(policy_check_deadline(&view, pick.now, &d), TG_EAGAIN);
        assert_int_equal(policy_check_deadline(&view, rec.deadline_at + 1, &d), 0);
        assert_int_equal(d.reason, MANUAL_PENDING_DEADLINE);

        /* a takeover of a pending poll: reconciled now inside its budgets, not
         * by the normal query budget; past them, the pending reasons */
        {
                struct op_record claimed, taken;
                enum tg_call_kind kind;
                unsigned attempt;

                rec.queries = rec.query_limit = 2; /* the normal budget: spent */
                assert_int_equal(
                    policy_claim(&rec, 1, 0, rec.next_run_at, &claimed, &kind, &attempt), 0);
                assert_int_equal(policy_takeover(&cfg, &claimed, pick.now + 5, &taken), 0);
                assert_int_equal(taken.state, OP_UNKNOWN);
                assert_int_equal(taken.next_run_at, pick.now + 5);
                claimed.pending_polls = cfg.pending_max_polls;
                assert_int_equal(policy_takeover(&cfg, &claimed, pick.now + 5, &taken), 0);
                assert_int_equal(taken.reason, MANUAL_PENDING_POLLS);
                assert_int_equal(policy_takeover(&cfg, &claimed, rec.deadline_at + 1, &taken), 0);
                assert_int_equal(taken.reason, MANUAL_PENDING_DEADLINE);
        }

        /* the final answer settles it: a poll's, or the notification's */
        rec = pending_record(&cfg, T0 + 1000);
        out = rec;
        poll_once(&cfg, &out, rec.next_run_at, TG_CLASS_SUCCEEDED, NO_RA, false);
        assert_int_equal(out.state, OP_SUCCEEDED);
        bool changed = false;
        assert_int_equal(policy_external(&rec, OP_REJECTED, "", T0 + 5000, &out, &changed), 0);
        assert_true(changed);
        assert_int_equal(out.state, OP_REJECTED);

        /* an operator's re-send of a manual pending case starts afresh */
        rec = pending_record(&cfg, T0 + 1000);
        rec.state = OP_MANUAL;
        rec.reason = MANUAL_PENDING_POLLS;
        rec.next_run_at = 0;
        assert_int_equal(policy_resend(&cfg, &rec, T0 + 9000, &out), 0);
        assert_int_equal(out.pending_since, 0);
        assert_int_equal(out.pending_polls, 0);
        assert_int_equal(out.deadline_at, T0 + 9000 + cfg.deadline_ms);

        /* notification-only: a processing answer awaits the notification as
         * before, never pending */
        cfg.notification = true;
        rec = pending_record(&cfg, T0 + 1000);
        assert_int_equal(rec.pending_since, 0);
        assert_true(policy_awaits_notification(&rec));
        assert_int_equal(rec.deadline_at, T0 + 1000 + cfg.notification_deadline_ms);

        /* a poll budget of 0: straight to manual */
        cfg.notification = false;
        cfg.pending_max_polls = 0;
        rec = pending_record(&cfg, T0 + 1000);
        assert_int_equal(rec.state, OP_MANUAL);
        assert_int_equal(rec.reason, MANUAL_PENDING_POLLS);
        /* the settings refused out of order */
        cfg.pending_max_polls = 3;
        cfg.pending_poll_max_ms = cfg.pending_poll_interval_ms - 1;
        assert_int_equal(policy_config_check(&cfg), TG_EINVAL);
        cfg.pending_poll_max_ms = 5000;
        cfg.pending_deadline_ms = 0;
        assert_int_equal(policy_config_check(&cfg), TG_EINVAL);
}

/* --- takeover ---------------------------------------------------------------- */

static void test_takeover(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        struct policy_op op = base_op(P);
        struct policy_decision d = sentinel_decision(), s = sentinel_decision();

        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.next_run_at, T0 + 5000);
        assert_int_equal(d.reason, MANUAL_NONE);
        assert_int_equal(d.wait_ms, 0);

        /* exactly at the deadline: still reconciled */
        assert_int_equal(policy_after_takeover(&cfg, &op, DEADLINE, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.next_run_at, DEADLINE);

        /* past the deadline: manual */
        assert_int_equal(policy_after_takeover(&cfg, &op, DEADLINE + 1, &d), 0);
        assert_int_equal(d.next, OP_MANUAL);
        assert_int_equal(d.reason, MANUAL_DEADLINE);
        assert_int_equal(d.next_run_at, 0);

        /* no query left to reconcile with: manual */
        op.queries = op.query_limit;
        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal(d.next, OP_MANUAL);
        assert_int_equal(d.reason, MANUAL_QUERY_BUDGET);

        /* even with attempts spent, an in-flight call is reconciled, not re-sent */
        op = base_op(P);
        op.attempts = op.attempt_limit;
        assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);

        /* only in_flight operations */
        d = sentinel_decision();
        for (int st = 0; st < OP_STATE_COUNT; st++) {
                if (st == OP_IN_FLIGHT)
                        continue;
                op.state = (enum op_state)st;
                assert_int_equal(policy_after_takeover(&cfg, &op, T0 + 5000, &d), TG_ESTATE);
                assert_decision_equal(&d, &s);
        }
        op.state = OP_IN_FLIGHT;
        assert_int_equal(policy_after_takeover(NULL, &op, T0, &d), TG_EINVAL);
        assert_int_equal(policy_after_takeover(&cfg, NULL, T0, &d), TG_EINVAL);
        assert_int_equal(policy_after_takeover(&cfg, &op, T0, NULL), TG_EINVAL);
        assert_decision_equal(&d, &s);
}

/* --- deadline check ---------------------------------------------------------- */

static void test_check_deadline(void **state)
{
        (void)state;
        enum op_state waiting[] = {OP_PENDING, OP_RETRY_WAIT, OP_UNKNOWN};
        struct policy_decision s = sentinel_decision();
        for (size_t i = 0; i < 3; i++) {
                struct policy_op op = base_op(P);
                op.state = waiting[i];
                struct policy_decision d = sentinel_decision();
                assert_int_equal(policy_check_deadline(&op, T0, &d), TG_EAGAIN);
                assert_int_equal(policy_check_deadline(&op, DEADLINE, &d), TG_EAGAIN);
                assert_decision_equal(&d, &s);
                assert_int_equal(policy_check_deadline(&op, DEADLINE + 1, &d), 0);
                assert_int_equal(d.next, OP_MANUAL);
                assert_int_equal(d.reason, MANUAL_DEADLINE);
                assert_int_equal(d.next_run_at, 0);
                assert_int_equal(d.wait_ms, 0);
        }
        /* a running call, a final or a manual operation is not for this check */
        enum op_state others[] = {OP_IN_FLIGHT, OP_SUCCEEDED, OP_REJECTED, OP_MANUAL,
                                  (enum op_state)OP_STATE_COUNT};
        for (size_t i = 0; i < 5; i++) {
                struct policy_op op = base_op(P);
                op.state = others[i];
                struct policy_decision d = sentinel_decision();
                assert_int_equal(policy_check_deadline(&op, DEADLINE + 1, &d), TG_ESTATE);
                assert_decision_equal(&d, &s);
        }
        struct policy_op op = base_op(P);
        op.state = OP_UNKNOWN;
        struct policy_decision d;
        assert_int_equal(policy_check_deadline(NULL, DEADLINE + 1, &d), TG_EINVAL);
        assert_int_equal(policy_check_deadline(&op, DEADLINE + 1, NULL), TG_EINVAL);
}

/* The exit may reach a due operation late: the check just before the call. */
static void test_check_due(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        struct policy_decision s = sentinel_decision();
        struct policy_op op = base_op(P);
        tg_wall_ms expiry = op.key_first_used + RETENTION;
        op.deadline_at = expiry + 600000; /* say, after an operator re-send */
        struct policy_decision d = sentinel_decision();

        /* a re-send whose key aged past retention while it waited for the exit */
        op.state = OP_RETRY_WAIT;
        assert_int_equal(policy_check_due(&cfg, &op, expiry - 1, &d), TG_EAGAIN);
        assert_decision_equal(&d, &s);
        assert_int_equal(policy_check_due(&cfg, &op, expiry, &d), 0);
        assert_int_equal(d.next, OP_MANUAL);
        assert_int_equal(d.reason, MANUAL_KEY_RETENTION);
        /* both: key_retention, which tells the operator not to re-send */
        assert_int_equal(policy_check_due(&cfg, &op, op.deadline_at + 1, &d), 0);
        assert_int_equal(d.reason, MANUAL_KEY_RETENTION);

        /* a query may go with an old key: it can never execute a refund */
        op.state = OP_UNKNOWN;
        d = sentinel_decision();
        assert_int_equal(policy_check_due(&cfg, &op, expiry, &d), TG_EAGAIN);
        assert_decision_equal(&d, &s);
        /* and the deadline still applies */
        assert_int_equal(policy_check_due(&cfg, &op, op.deadline_at + 1, &d), 0);
        assert_int_equal(d.reason, MANUAL_DEADLINE);

        /* a first attempt has no key age yet */
        op = base_op(P);
        op.state = OP_PENDING;
        op.attempts = 0;
        op.key_first_used = 0;
        d = sentinel_decision();
        assert_int_equal(policy_check_due(&cfg, &op, T0 + 1000, &d), TG_EAGAIN);
        assert_int_equal(policy_check_due(&cfg, &op, DEADLINE + 1, &d), 0);
        assert_int_equal(d.reason, MANUAL_DEADLINE);

        /* only for operations waiting for the exit */
        enum op_state others[] = {OP_IN_FLIGHT, OP_SUCCEEDED, OP_REJECTED, OP_MANUAL};
        for (size_t i = 0; i < 4; i++) {
                op.state = others[i];
                d = sentinel_decision();
                assert_int_equal(policy_check_due(&cfg, &op, DEADLINE + 1, &d), TG_ESTATE);
                assert_decision_equal(&d, &s);
        }
        op.state = OP_UNKNOWN;
        assert_int_equal(policy_check_due(NULL, &op, T0, &d), TG_EINVAL);
        assert_int_equal(policy_check_due(&cfg, NULL, T0, &d), TG_EINVAL);
        assert_int_equal(policy_check_due(&cfg, &op, T0, NULL), TG_EINVAL);
}

/* --- operator re-send -------------------------------------------------------- */

static void test_operator_resend(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        struct policy_op op = base_op(P);
        op.state = OP_MANUAL;
        op.attempts = 3;
        op.queries = 10;
        tg_wall_ms now = DEADLINE + 60000;

        struct policy_op next;
        struct policy_decision d;
        assert_int_equal(policy_operator_resend(&cfg, &op, now, &next, &d), 0);
        assert_int_equal(d.next, OP_RETRY_WAIT);
        assert_int_equal(d.next_run_at, now);
        assert_int_equal(d.reason, MANUAL_NONE);
        assert_int_equal(next.state, OP_RETRY_WAIT);
        assert_int_equal(next.attempts, 3);
        assert_int_equal(next.attempt_limit, 4);
        assert_int_equal(next.queries, 10);
        assert_int_equal(next.query_limit, 10 + cfg.max_queries);
        assert_int_equal(next.deadline_at, now + cfg.deadline_ms);
        assert_int_equal(next.accepted_at, op.accepted_at);
        assert_int_equal(next.key_first_used, op.key_first_used);
        assert_int_equal(policy_next_kind(next.state, 1), TG_KIND_MANUAL);

        /* The re-send is one POST: if it is answered "try later", it is not
         * retried automatically... */
        struct tg_rng rng;
        tg_rng_seed(&rng, 5);
        next.state = OP_IN_FLIGHT;
        next.attempts++;
        struct policy_event ev = {P, TG_CLASS_RETRYABLE, NO_RA, now + 100, false, false};
        assert_int_equal(policy_after_call(&cfg, &next, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_MANUAL);
        assert_int_equal(d.reason, MANUAL_ATTEMPTS_EXHAUSTED);
        /* ...but an unknown outcome is reconciled with the fresh query budget */
        ev.cls = TG_CLASS_UNKNOWN;
        assert_int_equal(policy_after_call(&cfg, &next, &ev, &rng, &d), 0);
        assert_int_equal(d.next, OP_UNKNOWN);
        assert_int_equal(d.next_run_at, now + 100 + cfg.query_interval_ms);
}

static void test_operator_resend_refusals(void **state)
{
        (void)state;
        struct policy_config cfg = table_config();
        struct policy_op sentinel_op = sentinel_policy_op();
        struct policy_decision s = sentinel_decision();

        /* only manual operations */
        for (int st = 0; st < OP_STATE_COUNT; st++) {
                if (st == OP_MANUAL)
                        continue;
                struct policy_op op = base_op(P);
                op.state = (enum op_state)st;
                struct policy_op next = sentinel_op;
                struct policy_decision d = sentinel_decision();
                assert_int_equal(policy_operator_resend(&cfg, &op, T0 + 1000, &next, &d),
                                 TG_ESTATE);
                assert_op_equal(&next, &sentinel_op);
                assert_decision_equal(&d, &s);
        }

        /* never with a key past retention: it could execute a second refund */
        struct policy_op op = base_op(P);
        op.state = OP_MANUAL;
        tg_wall_ms expiry = op.key_first_used + RETENTION;
        struct policy_op next = sentinel_op;
        struct policy_decision d = sentinel_decision();
        assert_int_equal(policy_operator_resend(&cfg, &op, expiry, &next, &d), TG_ERANGE);
        assert_int_equal(policy_operator_resend(&cfg, &op, expiry + 3600000, &next, &d), TG_ERANGE);
        assert_op_equal(&next, &sentinel_op);
        assert_decision_equal(&d, &s);
        assert_int_equal(policy_operator_resend(&cfg, &op, expiry - 1, &next, &d), 0);

        /* a key never sent (an invalid outbox row) has no age */
        op.attempts = 0;
        op.key_first_used = 0;
        assert_int_equal(policy_operator_resend(&cfg, &op, expiry + 1, &next, &d), 0);
        assert_int_equal(next.attempt_limit, 1);

        op = base_op(P);
        op.state = OP_MANUAL;
        assert_int_equal(policy_operator_resend(NULL, &op, T0, &next, &d), TG_EINVAL);
        assert_int_equal(policy_operator_resend(&cfg, NULL, T0, &next, &d), TG_EINVAL);
        assert_int_equal(policy_operator_resend(&cfg, &op, T0, NULL, &d), TG_EINVAL);
        assert_int_equal(policy_operator_resend(&cfg, &op, T0, &next, NULL), TG_EINVAL);
}

/* --- kinds, names, config ---------------------------------------------------- */

static void test_next_kind(void **state)
{
        (void)state;
        assert_int_equal(policy_next_kind(OP_PENDING, 0), TG_KIND_FIRST);
        assert_int_equal(policy_next_kind(OP_RETRY_WAIT, 0), TG_KIND_RETRY);
        assert_int_equal(policy_next_kind(OP_RETRY_WAIT, 1), TG_KIND_MANUAL);
        assert_int_equal(policy_next_kind(OP_UNKNOWN, 0), TG_KIND_QUERY);
        assert_int_equal(policy_next_kind(OP_UNKNOWN, 1), TG_KIND_QUERY);
        /* no call is due in the other states; if asked, never a POST */
        enum op_state others[] = {OP_IN_FLIGHT, OP_SUCCEEDED, OP_REJECTED, OP_MANUAL,
                                  (enum op_state)99};
        for (size_t i = 0; i < 5; i++) {
                assert_int_equal(policy_next_kind(others[i], 0), TG_KIND_QUERY);
                assert_int_equal(policy_next_kind(others[i], 1), TG_KIND_QUERY);
        }
}

static void test_names(void **state)
{
        (void)state;
        const char *states[] = {"pending",   "in_flight", "retry_wait", "unknown",
                                "succeeded", "rejected",  "manual",     "cancelled"};
        for (int i = 0; i < OP_STATE_COUNT; i++) {
                assert_string_equal(op_state_name((enum op_state)i), states[i]);
                enum op_state st = (enum op_state)99;
                assert_int_equal(op_state_parse(states[i], &st), 0);
                assert_int_equal(st, i);
        }
        const char *reasons[] = {"none",          "attempts_exhausted", "deadline",
                                 "query_budget",  "key_reused",         "key_retention",
                                 "invalid",       "key_expired",        "notification_deadline",
                                 "pending_polls", "pending_deadline"};
        for (int i = 0; i < MANUAL_REASON_COUNT; i++) {
                assert_string_equal(manual_reason_name((enum manual_reason)i), reasons[i]);
                enum manual_reason r = (enum manual_reason)99;
                assert_int_equal(manual_reason_parse(reasons[i], &r), 0);
                assert_int_equal(r, i);
        }
        const char *kinds[] = {"first", "retry", "query", "manual"};
        for (int i = 0; i < 4; i++) {
                assert_string_equal(tg_call_kind_name((enum tg_call_kind)i), kinds[i]);
                enum tg_call_kind k = (enum tg_call_kind)99;
                assert_int_equal(tg_call_kind_parse(kinds[i], &k), 0);
                assert_int_equal(k, i);
        }
        assert_string_equal(op_state_name((enum op_state)OP_STATE_COUNT), "invalid");
        assert_string_equal(op_state_name((enum op_state) - 1), "invalid");
        assert_string_equal(manual_reason_name((enum manual_reason)MANUAL_REASON_COUNT), "invalid");
        assert_string_equal(tg_call_kind_name((enum tg_call_kind)4), "invalid");

        enum op_state st = OP_PENDING;
        enum manual_reason r = MANUAL_NONE;
        enum tg_call_kind k = TG_KIND_FIRST;
        assert_int_equal(op_state_parse("Pending", &st), TG_EINVAL);
        assert_int_equal(op_state_parse("", &st), TG_EINVAL);
        assert_int_equal(op_state_parse(NULL, &st), TG_EINVAL);
        assert_int_equal(op_state_parse("manual", NULL), TG_EINVAL);
        assert_int_equal(manual_reason_parse("deadline ", &r), TG_EINVAL);
        assert_int_equal(manual_reason_parse(NULL, &r), TG_EINVAL);
        assert_int_equal(tg_call_kind_parse("resend", &k), TG_EINVAL);
        assert_int_equal(tg_call_kind_parse(NULL, &k), TG_EINVAL);
        assert_int_equal(st, OP_PENDING);
        assert_int_equal(r, MANUAL_NONE);
        assert_int_equal(k, TG_KIND_FIRST);
}

static void test_config(void **state)
{
        (void)state;
        struct policy_config c;
        policy_config_default(&c);
        assert_int_equal(c.max_attempts, 3);
        assert_int_equal(c.deadline_ms, 900000);
        assert_int_equal(c.max_queries, 10);
        assert_int_equal(c.query_interval_ms, 2000);
        assert_int_equal(c.key_retention_ms, 23LL * 3600 * 1000);
        struct backoff_config b;
        backoff_config_default(&b);
        /* field by field: the struct has padding */
        assert_int_equal(c.backoff.base_ms, b.base_ms);
        assert_true(c.backoff.factor == b.factor);
        assert_int_equal(c.backoff.min_ms, b.min_ms);
        assert_int_equal(c.backoff.cap_ms, b.cap_ms);
        assert_int_equal(c.backoff.give_up_ms, b.give_up_ms);
        assert_int_equal(c.backoff.jitter, b.jitter);
        assert_int_equal(policy_config_check(&c), 0);

        struct policy_config bad;
        bad = c;
        bad.max_attempts = 0;
        assert_int_equal(policy_config_check(&bad), TG_EINVAL);
        bad = c;
        bad.deadline_ms = 0;
        assert_int_equal(policy_config_check(&bad), TG_EINVAL);
        bad = c;
        bad.deadline_ms = -5;
        assert_int_equal(policy_config_check(&bad), TG_EINVAL);
        bad = c;
        bad.deadline_ms = INT64_MAX;
        assert_int_equal(policy_config_check(&bad), TG_EINVAL);
        bad = c;
        bad.query_interval_ms = 0;
        assert_int_equal(policy_config_check(&bad), TG_EINVAL);
        bad = c;
        bad.key_retention_ms = 0;
        assert_int_equal(policy_config_check(&bad), TG_EINVAL);
        bad = c;
        bad.backoff.factor = 0.5;
        assert_int_equal(policy_config_check(&bad), TG_EINVAL);
        assert_int_equal(policy_config_check(NULL), TG_EINVAL);
        /* no queries at all is a valid (strict) choice */
        bad = c;
        bad.max_queries = 0;
        assert_int_equal(policy_config_check(&bad), 0);
}

/* --- property: random walks -------------------------------------------------- */

static int64_t pick(struct tg_rng *rng, int64_t lo, int64_t hi)
{
        return tg_rng_range(rng, lo, hi);
}

static struct policy_config random_config(struct tg_rng *rng)
{
        struct policy_config c;
        policy_config_default(&c);
        if (pick(rng, 0, 3) == 0)
                return c; /* the defaults, often */
        c.max_attempts = (unsigned)pick(rng, 1, 6);
        c.deadline_ms = pick(rng, 1000, 2 * 3600 * 1000);
        c.max_queries = (unsigned)pick(rng, 0, 12);
        c.query_interval_ms = pick(rng, 1, 10000);
        c.key_retention_ms = pick(rng, 1000, 3 * 3600 * 1000);
        c.backoff.jitter = (enum backoff_jitter)pick(rng, 0, 3);
        c.backoff.base_ms = pick(rng, 1, 5000);
        c.backoff.cap_ms = c.backoff.base_ms + pick(rng, 0, 120000);
        c.backoff.min_ms = pick(rng, 0, 3000);
        c.backoff.factor = 1.0 + (double)pick(rng, 0, 30) / 10.0;
        c.pending_poll_interval_ms = pick(rng, 1, 5000);
        c.pending_poll_max_ms = c.pending_poll_interval_ms + pick(rng, 0, 60000);
        c.pending_max_polls = (unsigned)pick(rng, 0, 20);
        c.pending_deadline_ms = pick(rng, 1000, 2 * 3600 * 1000);
        return c;
}

static int64_t random_retry_after(struct tg_rng *rng)
{
        switch (pick(rng, 0, 9)) {
        case 0:
                return pick(rng, 0, 10000);
        case 1:
                return pick(rng, 0, 3600000);
        case 2:
                return INT64_MAX;
        default:
                return NO_RA;
        }
}

static void test_property_random_walks(void **state)
{
        (void)state;
        const enum tg_class post_classes[] = {TG_CLASS_SUCCEEDED,  TG_CLASS_REJECTED,
                                              TG_CLASS_KEY_REUSED, TG_CLASS_RETRYABLE,
                                              TG_CLASS_UNKNOWN,    TG_CLASS_NOT_SENT};
        const enum tg_class query_classes[] = {TG_CLASS_SUCCEEDED, TG_CLASS_REJECTED,
                                               TG_CLASS_PROCESSING, TG_CLASS_NOT_FOUND,
                                               TG_CLASS_NO_ANSWER};
        unsigned finals[OP_STATE_COUNT] = {0};
        unsigned reasons[MANUAL_REASON_COUNT] = {0};

        for (uint64_t seed = 1; seed <= 5000; seed++) {
                struct tg_rng rng;
                tg_rng_seed(&rng, seed);
                struct policy_config cfg = random_config(&rng);
                assert_int_equal(policy_config_check(&cfg), 0);

                tg_wall_ms now = T0 + pick(&rng, 0, 100000);
                struct policy_op op = {
                    .state = OP_PENDING,
                    .attempt_limit = cfg.max_attempts,
                    .query_limit = cfg.max_queries,
                    .accepted_at = now,
                    .deadline_at = now + cfg.deadline_ms,
                };
                tg_wall_ms next_run_at = now;
                unsigned posts = 0, queries = 0, resends = 0;
                int operator_resend = 0;

                for (int step = 0; step < 400; step++) {
                        if (op.state == OP_SUCCEEDED || op.state == OP_REJECTED)
                                break;
                        if (op.state == OP_MANUAL) {
                                if (resends >= 2 || pick(&rng, 0, 2) != 0)
                                        break;
                                now += pick(&rng, 0, 600000);
                                struct policy_op o;
                                struct policy_decision d;
                                int r = policy_operator_resend(&cfg, &op, now, &o, &d);
                                if (r == TG_ERANGE) {
                                        /* refused only for an old key */
                                        assert_true(op.attempts > 0);
                                        assert_true(now >=
                                                    op.key_first_used + cfg.key_retention_ms);
                                        break;
                                }
                                assert_int_equal(r, 0);
                                check_decision_sane(&d, now);
                                op = o;
                                next_run_at = d.next_run_at;
                                operator_resend = 1;
                                resends++;
                                continue;
                        }

                        /* due, then the exit lets it through some time later */
                        assert_true(op.state == OP_PENDING || op.state == OP_RETRY_WAIT ||
                                    op.state == OP_UNKNOWN);
                        assert_true(next_run_at > 0);
                        if (now < next_run_at)
                                now = next_run_at;
                        now += pick(&rng, 0, 3) == 0 ? pick(&rng, 0, 120000) : pick(&rng, 0, 500);

                        struct policy_decision d;
                        if (policy_check_due(&cfg, &op, now, &d) == 0) {
                                assert_int_equal(d.next, OP_MANUAL);
                                assert_true(now > op.deadline_at ||
                                            d.reason == MANUAL_KEY_RETENTION);
                                reasons[d.reason]++;
                                op.state = d.next;
                                continue;
                        }

                        enum tg_call_kind kind = policy_next_kind(op.state, operator_resend);
                        enum classify_request request = kind == TG_KIND_QUERY ? Q : P;
                        if (request == P) {
                                op.attempts++;
                                posts++;
                                if (op.attempts == 1)
                                        op.key_first_used = now;
                                /* never more POSTs than allowed */
                                assert_true(op.attempts <= op.attempt_limit);
                                assert_true(posts <= cfg.max_attempts + resends);
                                assert_true(now < op.key_first_used + cfg.key_retention_ms ||
                                            op.attempts == 1);
                                operator_resend = 0;
                        } else {
                                /* policy_claim(): a pending refund's poll is its own
                                 * budget's, given back to the normal one */
                                op.queries++;
                                queries++;
                                if (op.pending_since > 0) {
                                        op.pending_polls++;
                                        op.query_limit++;
                                        assert_true(op.pending_polls <= cfg.pending_max_polls);
                                }
                                assert_true(op.queries <= op.query_limit);
                        }
                        op.state = OP_IN_FLIGHT;
                        assert_true(now <= op.deadline_at);

                        tg_wall_ms end = now + pick(&rng, 0, 3000);
                        if (pick(&rng, 0, 19) == 0) {
                                /* the owner died; a new one takes over */
                                end += 3000;
                                assert_int_equal(policy_after_takeover(&cfg, &op, end, &d), 0);
                        } else {
                                const enum tg_class *classes =
                                    request == P ? post_classes : query_classes;
                                size_t n = request == P ? 6 : 5;
                                struct policy_event ev = {request,
                                                          classes[pick(&rng, 0, (int64_t)n - 1)],
                                                          random_retry_after(&rng),
                                                          end,
                                                          false,
                                                          false};
                                assert_int_equal(policy_after_call(&cfg, &op, &ev, &rng, &d), 0);
                        }
                        now = end;
                        check_decision_sane(&d, now);
                        if (d.deadline_at > 0)
                                op.deadline_at = d.deadline_at;
                        if (d.pending_since > 0) {
                                /* set once, never moved */
                                assert_true(op.pending_since == 0 ||
                                            op.pending_since == d.pending_since);
                                op.pending_since = d.pending_since;
                                assert_true(op.deadline_at ==
                                            op.pending_since + cfg.pending_deadline_ms);
                        }
                        if (d.next == OP_RETRY_WAIT) {
                                /* the next POST is inside every budget */
                                assert_true(op.attempts < op.attempt_limit);
                                assert_true(d.next_run_at <= op.deadline_at);
                                assert_true(d.next_run_at <
                                            op.key_first_used + cfg.key_retention_ms);
                                op.last_wait_ms = d.wait_ms;
                        }
                        if (d.next == OP_UNKNOWN) {
                                if (op.pending_since > 0)
                                        assert_true(op.pending_polls < cfg.pending_max_polls);
                                else
                                        assert_true(op.queries < op.query_limit);
                                assert_true(d.next_run_at <= op.deadline_at);
                        }
                        op.state = d.next;
                        next_run_at = d.next_run_at;
                        if (d.next == OP_MANUAL)
                                reasons[d.reason]++;
                }
                finals[op.state]++;
                (void)queries;
        }
        /* the walks reached every outcome and every automatic manual reason */
        assert_true(finals[OP_SUCCEEDED] > 0);
        assert_true(finals[OP_REJECTED] > 0);
        assert_true(finals[OP_MANUAL] > 0);
        assert_true(reasons[MANUAL_ATTEMPTS_EXHAUSTED] > 0);
        assert_true(reasons[MANUAL_DEADLINE] > 0);
        assert_true(reasons[MANUAL_QUERY_BUDGET] > 0);
        assert_true(reasons[MANUAL_KEY_REUSED] > 0);
        assert_true(reasons[MANUAL_KEY_RETENTION] > 0);
        assert_true(reasons[MANUAL_PENDING_POLLS] > 0);
        assert_true(reasons[MANUAL_PENDING_DEADLINE] > 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_transition_table),
            cmocka_unit_test(test_every_input_defined_or_einval),
            cmocka_unit_test(test_after_call_refuses_impossible_ops),
            cmocka_unit_test(test_next_page_is_due_at_once),
            cmocka_unit_test(test_limited_gives_the_call_back),
            cmocka_unit_test(test_default_backoff_windows),
            cmocka_unit_test(test_retry_after_floor_all_modes),
            cmocka_unit_test(test_backoff_give_up_is_deadline),
            cmocka_unit_test(test_query_budget_walk),
            cmocka_unit_test(test_replay_after_the_queries),
            cmocka_unit_test(test_notification_only),
            cmocka_unit_test(test_pending_refund),
            cmocka_unit_test(test_takeover),
            cmocka_unit_test(test_check_deadline),
            cmocka_unit_test(test_check_due),
            cmocka_unit_test(test_operator_resend),
            cmocka_unit_test(test_operator_resend_refusals),
            cmocka_unit_test(test_next_kind),
            cmocka_unit_test(test_names),
            cmocka_unit_test(test_config),
            cmocka_unit_test(test_property_random_walks),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
