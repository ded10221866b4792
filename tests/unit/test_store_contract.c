/*
 * The store contract: what every backend behind store.h must do, written
 * against store.h alone and run once per backend url available:
 *   - SQLite, always, one fresh database file in a temp dir per test;
 *   - MariaDB when TG_TEST_MYSQL_URL is set. Each test then uses the
 *     database "<db of that url>_<pid>_<n>", which the backend (or the test
 *     user) must be able to create: the contract assumes an empty store per
 *     test. Until that backend is built, store_open answers
 *     TG_EUNSUPPORTED and the group is reported as skipped;
 *   - PostgreSQL when TG_TEST_PG_URL is set, the same way (databases
 *     "<db>_<pid>_<n>", created by the backend).
 *
 * Wall times are fixed numbers (the store never reads a clock); a second
 * handle on the same url stands in for "another connection" whenever a test
 * proves that something was committed before the call returned.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>
#ifdef TG_HAVE_MARIADB
#include <mysql.h>
#include <mysqld_error.h>

#include "tgtest_mysql.h"
#endif
#ifdef TG_HAVE_PG
#include <libpq-fe.h>
#endif

#include "core/tg_error.h"
#include "faultvfs.h"
#include "platform/wake.h"
#include "store/store.h"
#include "store/store_backend.h" /* the primitives, for the predicate test */
#include "store/store_events.h"

#define T0 1700000000000LL                  /* a wall time, ms */
#define M0 ((tg_mono_ns)5000 * TG_NS_PER_S) /* a monotonic time */

static char fx_url[600];   /* the url of the current test's store */
static char fx_dir[256];   /* sqlite: its temp dir */
static char fx_mysql[400]; /* TG_TEST_MYSQL_URL, when set */
static unsigned fx_serial; /* per-test database names (mysql) */
static bool fx_is_sqlite;
static bool fx_is_pg; /* the server store is PostgreSQL (else MariaDB) */

/* ---- fixtures ------------------------------------------------------------ */

static int setup_sqlite(void **state)
{
        (void)state;
        snprintf(fx_dir, sizeof(fx_dir), "/tmp/tg-store-XXXXXX");
        if (!mkdtemp(fx_dir))
                return -1;
        snprintf(fx_url, sizeof(fx_url), "sqlite://%s/t.db", fx_dir);
        return 0;
}

static int teardown_sqlite(void **state)
{
        static const char *const files[] = {"t.db",        "t.db-wal",     "t.db-shm",
                                            "t.db.owner",  "t.db.split",   "t.db.share1",
                                            "t.db.share2", "t.db.eu.owner"};
        char path[400];

        (void)state;
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                snprintf(path, sizeof(path), "%s/%s", fx_dir, files[i]);
                unlink(path);
        }
        rmdir(fx_dir);
        return 0;
}

static int setup_mysql(void **state)
{
        (void)state;
        snprintf(fx_url, sizeof(fx_url), "%s_%ld_%u", fx_mysql, (long)getpid(), ++fx_serial);
        return 0;
}

static int teardown_mysql(void **state)
{
        (void)state;
        return 0;
}

/* ---- helpers --------------------------------------------------------------- */

static struct store *open_store(void)
{
        struct store *s = NULL;

        assert_int_equal(store_open(fx_url, &s), 0);
        assert_non_null(s);
        return s;
}

static struct policy_config limits(void)
{
        struct policy_config c;

        policy_config_default(&c);
        return c;
}

static struct refund_request req(const char *id, const char *payment, int64_t amount)
{
        struct refund_request r;

        memset(&r, 0, sizeof(r));
        snprintf(r.operation_id, sizeof(r.operation_id), "%s", id);
        snprintf(r.payment_id, sizeof(r.payment_id), "%s", payment);
        r.amount = amount;
        snprintf(r.currency, sizeof(r.currency), "TWD");
        return r;
}

static struct op_record accept_new(struct store *s, const char *id, tg_wall_ms at)
{
        struct policy_config c = limits();
        struct refund_request r = req(id, "pay-1", 1000);
        struct op_record op;
        bool created = false;

        assert_int_equal(store_accept(s, &r, at, &c, &created, &op), 0);
        assert_true(created);
        return op;
}

static struct op_record get_op(struct store *s, const char *id)
{
        struct op_record op;

        assert_int_equal(store_get(s, id, &op), 0);
        return op;
}

static int64_t acquire(struct store *s)
{
        int64_t epoch = 0;

        assert_int_equal(store_owner_acquire(s, &epoch), 0);
        assert_true(epoch > 0);
        return epoch;
}

static int claim(struct store *s, enum store_group group, int64_t epoch, tg_wall_ms now,
                 struct op_record *op, struct call_record *call)
{
        struct claim_args a;

        memset(&a, 0, sizeof(a));
        a.group = group;
        a.epoch = epoch;
        a.now = now;
        a.start_mono = 5 * TG_NS_PER_S;
        a.in_flight_at_start = 1;
        snprintf(a.request_id, sizeof(a.request_id), "req-%lld", (long long)now);
        return store_claim(s, &a, op, call);
}

static struct settle_args settle_args_for(const struct op_record *op,
                                          const struct call_record *call, enum tg_class cls,
                                          enum op_state next, tg_wall_ms now,
                                          tg_wall_ms next_run_at)
{
        struct settle_args a;

        memset(&a, 0, sizeof(a));
        a.call_id = call->id;
        a.op_id = op->id;
        a.epoch = call->epoch;
        a.sent = true;
        a.cls = cls;
        a.http_status = cls == TG_CLASS_SUCCEEDED ? 201 : 503;
        a.end_mono = call->start_mono + 20 * TG_NS_PER_MS;
        a.now = now;
        a.latency_us = 20000;
        a.decision.next = next;
        a.decision.next_run_at = next_run_at;
        a.decision.reason = next == OP_MANUAL ? MANUAL_ATTEMPTS_EXHAUSTED : MANUAL_NONE;
        return a;
}

/* Claims the oldest of a group and settles it to `next`. */
static struct op_record drive(struct store *s, enum store_group group, int64_t epoch,
                              tg_wall_ms now, enum tg_class cls, enum op_state next,
                              tg_wall_ms next_run_at)
{
        struct op_record op;
        struct call_record call;
        struct settle_args a;

        assert_int_equal(claim(s, group, epoch, now, &op, &call), 0);
        a = settle_args_for(&op, &call, cls, next, now + 20, next_run_at);
        assert_int_equal(store_settle(s, &a), 0);
        return get_op(s, op.req.operation_id);
}

#define MAX_SEEN 16
struct seen {
        unsigned n;
        int64_t ids[MAX_SEEN];
        struct call_record calls[MAX_SEEN];
        struct audit_record audits[MAX_SEEN];
        char op_ids[MAX_SEEN][TG_OP_ID_MAX + 1];
        unsigned stop_after; /* 0: never */
};

static int on_call(const struct call_record *call, void *userdata)
{
        struct seen *seen = userdata;

        if (seen->n < MAX_SEEN) {
                seen->calls[seen->n] = *call;
                seen->ids[seen->n] = call->id;
        }
        seen->n++;
        return seen->stop_after && seen->n >= seen->stop_after ? 42 : 0;
}

static int on_op(const struct op_record *op, void *userdata)
{
        struct seen *seen = userdata;

        if (seen->n < MAX_SEEN) {
                seen->ids[seen->n] = op->id;
                snprintf(seen->op_ids[seen->n], sizeof(seen->op_ids[0]), "%s",
                         op->req.operation_id);
        }
        seen->n++;
        return 0;
}

static int on_audit(const struct audit_record *audit, void *userdata)
{
        struct seen *seen = userdata;

        if (seen->n < MAX_SEEN)
                seen->audits[seen->n] = *audit;
        seen->n++;
        return 0;
}

/* ---- intake ------------------------------------------------------------------ */

/* The bell rang within ms (and is drained). */
static bool rang_within(struct wake *bell, int ms)
{
        struct pollfd p = {.fd = wake_fd(bell), .events = POLLIN};

        return poll(&p, 1, ms) == 1 && wake_drain(bell);
}

/* The doorbell between processes (store_listen): on PostgreSQL a listener
 * rings when another handle's acceptance commits, and not for a repeat that
 * created nothing; SQLite and MariaDB say they cannot. */
static void test_doorbell(void **state)
{
        struct store *listener = open_store();
        struct store *api = open_store();
        struct policy_config c = limits();
        struct refund_request r = req("bell-1", "pay-1", 1000);
        struct op_record op;
        struct wake *bell = NULL;
        bool created = true;
        int rc;

        (void)state;
        assert_int_equal(wake_new(&bell), 0);
        rc = store_listen(listener, bell);
        if (!fx_is_pg) {
                assert_int_equal(rc, TG_EUNSUPPORTED);
        } else {
                assert_int_equal(rc, 0);
                assert_int_equal(store_listen(listener, bell), TG_EINVAL); /* one a handle */
                assert_true(rang_within(bell, 5000)); /* (connected: look once) */
                accept_new(api, "bell-1", T0);
                assert_true(rang_within(bell, 5000));
                /* a repeat: nothing new */
                assert_int_equal(store_accept(api, &r, T0 + 1, &c, &created, &op), 0);
                assert_false(created);
                assert_false(rang_within(bell, 300));
                accept_new(api, "bell-2", T0 + 2);
                assert_true(rang_within(bell, 5000));
        }
        store_close(api);
        store_close(listener); /* stops the listener before the bell goes */
        wake_free(bell);
}

static void test_accept_new_same_conflict(void **state)
{
        struct store *s = open_store();
        struct policy_config c = limits();
        struct refund_request r = req("op-1", "pay-1", 1000);
        struct refund_request other = req("op-1", "pay-1", 999);
        struct op_record op, again, got;
        struct store_stats st;
        bool created = false;

        (void)state;
        assert_int_equal(store_accept(s, &r, T0, &c, &created, &op), 0);
        assert_true(created);
        assert_true(op.id > 0);
        assert_string_equal(op.req.operation_id, "op-1");
        assert_int_equal(op.state, OP_PENDING);
        assert_int_equal(op.attempts, 0);
        assert_int_equal(op.attempt_limit, c.max_attempts);
        assert_int_equal(op.query_limit, c.max_queries);
        assert_int_equal(op.accepted_at, T0);
        assert_int_equal(op.deadline_at, T0 + c.deadline_ms);
        assert_int_equal(op.key_first_used, 0);

        /* the same request again: found, not created */
        created = true;
        assert_int_equal(store_accept(s, &r, T0 + 5, &c, &created, &again), 0);
        assert_false(created);
        assert_int_equal(again.id, op.id);
        assert_int_equal(again.accepted_at, T0);

        /* same key, other body: refused, nothing stored, outputs untouched */
        created = true;
        memset(&got, 0x5a, sizeof(got));
        assert_int_equal(store_accept(s, &other, T0 + 6, &c, &created, &got), TG_ECONFLICT);
        assert_true(created);
        assert_int_equal(got.id, (int64_t)0x5a5a5a5a5a5a5a5aLL);
        other = req("op-1", "pay-2", 1000);
        assert_int_equal(store_accept(s, &other, T0 + 6, &c, &created, &got), TG_ECONFLICT);

        got = get_op(s, "op-1");
        assert_int_equal(got.req.amount, 1000);
        assert_string_equal(got.req.payment_id, "pay-1");
        assert_string_equal(got.req.currency, "TWD");
        assert_int_equal(store_get(s, "nope", &got), TG_ENOTFOUND);

        assert_int_equal(store_stats(s, &st), 0);
        assert_int_equal(st.by_state[OP_PENDING], 1);
        store_close(s);
}

/* store_accept_batch: in one transaction, each item what store_accept
 * would say for it in order (new, repeat of a stored one, conflict, an id
 * given twice: created then repeated); a conflict writes nothing and ends
 * nothing; an item store_accept would refuse refuses the whole batch,
 * nothing stored. */
static void test_accept_batch(void **state)
{
        struct store *s = open_store();
        struct policy_config c = limits();
        struct refund_request r[5] = {req("ba-1", "pay-1", 100), req("op-1", "pay-1", 1000),
                                      req("op-1", "pay-1", 999), req("ba-2", "pay-2", 200),
                                      req("ba-1", "pay-1", 100)};
        struct refund_request bad = req("ba-9", "pay-9", 0);
        struct store_accept_item items[5], two[2];
        struct store_stats st;
        struct op_record stored = accept_new(s, "op-1", T0);

        (void)state;
        memset(items, 0, sizeof(items));
        for (int i = 0; i < 5; i++)
                items[i].req = &r[i];
        assert_int_equal(store_accept_batch(s, items, 5, T0 + 10, &c), 0);
        assert_int_equal(items[0].result, 0);
        assert_true(items[0].created);
        assert_int_equal(items[0].op.accepted_at, T0 + 10);
        assert_int_equal(items[1].result, 0);
        assert_false(items[1].created);
        assert_int_equal(items[1].op.id, stored.id);
        assert_int_equal(items[2].result, TG_ECONFLICT);
        assert_int_equal(items[3].result, 0);
        assert_true(items[3].created);
        assert_string_equal(items[3].op.req.payment_id, "pay-2");
        assert_int_equal(items[4].result, 0);
        assert_false(items[4].created);
        assert_int_equal(items[4].op.id, items[0].op.id);
        assert_int_equal(get_op(s, "op-1").req.amount, 1000);
        assert_int_equal(store_stats(s, &st), 0);
        assert_int_equal(st.by_state[OP_PENDING], 3);

        /* the same batch again: every item a repeat (or the same conflict) */
        assert_int_equal(store_accept_batch(s, items, 5, T0 + 20, &c), 0);
        for (int i = 0; i < 5; i++) {
                assert_int_equal(items[i].result, i == 2 ? TG_ECONFLICT : 0);
                assert_false(items[i].created);
        }

        memset(two, 0, sizeof(two));
        two[0].req = &r[3];
        two[1].req = &bad;
        assert_int_equal(store_accept_batch(s, two, 2, T0 + 30, &c), TG_EINVAL);
        assert_int_equal(store_accept_batch(s, NULL, 0, T0 + 30, &c), 0);
        assert_int_equal(store_stats(s, &st), 0);
        assert_int_equal(st.by_state[OP_PENDING], 3);
        store_close(s);
}

/* The optional reason and metadata are stored with the request (UTF-8
 * included), read back by every reader of the row, and part of the
 * payload: a resubmission that changes either is a conflict. */
static void test_accept_reason_metadata(void **state)
{
        static const char reason[] = "requested by customer \xe2\x80\x94 \xe9\x80\x80\xe6\xac\xbe";
        static const char metadata[] = "{\"desk\":\"b\\\"2\",\"order\":\"o-1\"}";
        struct store *s = open_store();
        struct policy_config c = limits();
        struct refund_request r = req("op-rm", "pay-1", 1000);
        struct refund_request other;
        struct op_record op, got;
        struct call_record call;
        bool created = false;

        (void)state;
        snprintf(r.reason, sizeof(r.reason), "%s", reason);
        snprintf(r.metadata, sizeof(r.metadata), "%s", metadata);
        assert_int_equal(store_accept(s, &r, T0, &c, &created, &op), 0);
        assert_true(created);
        assert_string_equal(op.req.reason, reason);
        assert_string_equal(op.req.metadata, metadata);
        got = get_op(s, "op-rm");
        assert_string_equal(got.req.reason, reason);
        assert_string_equal(got.req.metadata, metadata);
        /* the same again: found */
        assert_int_equal(store_accept(s, &r, T0 + 1, &c, &created, &got), 0);
        assert_false(created);
        other = r;
        other.reason[0] = '\0';
        assert_int_equal(store_accept(s, &other, T0 + 2, &c, &created, &got), TG_ECONFLICT);
        other = r;
        snprintf(other.metadata, sizeof(other.metadata), "{\"order\":\"o-1\"}");
        assert_int_equal(store_accept(s, &other, T0 + 2, &c, &created, &got), TG_ECONFLICT);
        /* a request without them stores "" for both */
        accept_new(s, "op-plain", T0 + 3);
        got = get_op(s, "op-plain");
        assert_string_equal(got.req.reason, "");
        assert_string_equal(got.req.metadata, "");
        /* the claim hands them to the exit */
        assert_int_equal(claim(s, STORE_GROUP_FIRST, acquire(s), T0 + 10, &got, &call), 0);
        assert_string_equal(got.req.operation_id, "op-rm");
        assert_string_equal(got.req.reason, reason);
        assert_string_equal(got.req.metadata, metadata);
        store_close(s);
}

/* ---- the exit --------------------------------------------------------------- */

static void test_claim_first_oldest_and_committed(void **state)
{
        struct store *s = open_store();
        struct store *other = open_store();
        struct op_record op, seen_op;
        struct call_record call;
        struct seen seen = {0};
        int64_t epoch = acquire(s);

        (void)state;
        accept_new(s, "b", T0 + 2);
        accept_new(s, "a", T0 + 1);
        accept_new(s, "c", T0 + 3);

        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 100, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "a");
        assert_int_equal(op.state, OP_IN_FLIGHT);
        assert_int_equal(op.attempts, 1);
        assert_int_equal(op.epoch, epoch);
        assert_int_equal(op.key_first_used, T0 + 100);
        assert_int_equal(call.kind, TG_KIND_FIRST);
        assert_int_equal(call.attempt, 1);
        assert_int_equal(call.op_id, op.id);
        assert_int_equal(call.epoch, epoch);
        assert_false(call.ended);
        assert_string_equal(call.operation_id, "a");
        assert_string_equal(call.request_id, "req-1700000000100");

        /* record attempt before send: another connection already sees it */
        seen_op = get_op(other, "a");
        assert_int_equal(seen_op.state, OP_IN_FLIGHT);
        assert_int_equal(seen_op.attempts, 1);
        assert_int_equal(store_list_op_calls(other, op.id, on_call, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_int_equal(seen.calls[0].id, call.id);
        assert_false(seen.calls[0].ended);
        assert_int_equal(seen.calls[0].start_mono, 5 * TG_NS_PER_S);
        assert_int_equal(seen.calls[0].start_wall, T0 + 100);
        assert_int_equal(seen.calls[0].in_flight_at_start, 1);

        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 101, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "b");
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 102, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "c");
        memset(&op, 0x11, sizeof(op));
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 103, &op, &call), TG_ENOTFOUND);
        assert_int_equal(op.id, (int64_t)0x1111111111111111LL);
        /* nothing in the again group */
        assert_int_equal(claim(s, STORE_GROUP_AGAIN, epoch, T0 + 103, &op, &call), TG_ENOTFOUND);
        store_close(other);
        store_close(s);
}

static void test_claim_again_only_when_due(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record op, w, u, v;
        struct call_record call;

        (void)state;
        accept_new(s, "w", T0 + 1); /* will wait for a retry until T0+5000 */
        accept_new(s, "u", T0 + 2); /* unknown, due at T0+1000 */
        accept_new(s, "v", T0 + 3); /* unknown, due at T0+1000 */
        w = drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_RETRYABLE, OP_RETRY_WAIT,
                  T0 + 5000);
        assert_int_equal(w.state, OP_RETRY_WAIT);
        assert_int_equal(w.next_run_at, T0 + 5000);
        u = drive(s, STORE_GROUP_FIRST, epoch, T0 + 11, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 1000);
        v = drive(s, STORE_GROUP_FIRST, epoch, T0 + 12, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 1000);
        assert_int_equal(u.state, OP_UNKNOWN);
        assert_int_equal(v.state, OP_UNKNOWN);

        /* none due yet; the first group does not hand them out either */
        assert_int_equal(claim(s, STORE_GROUP_AGAIN, epoch, T0 + 999, &op, &call), TG_ENOTFOUND);
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 999, &op, &call), TG_ENOTFOUND);

        /* due: the oldest accepted of the due ones, as a query */
        assert_int_equal(claim(s, STORE_GROUP_AGAIN, epoch, T0 + 1000, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "u");
        assert_int_equal(call.kind, TG_KIND_QUERY);
        assert_int_equal(op.queries, 1);
        assert_int_equal(op.attempts, 1);
        assert_int_equal(call.attempt, 1);
        assert_int_equal(op.key_first_used, T0 + 11); /* a query does not touch it */
        assert_int_equal(claim(s, STORE_GROUP_AGAIN, epoch, T0 + 1000, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "v");
        assert_int_equal(claim(s, STORE_GROUP_AGAIN, epoch, T0 + 4999, &op, &call), TG_ENOTFOUND);

        /* the retry, once due, is a POST with the same key: attempt 2 */
        assert_int_equal(claim(s, STORE_GROUP_AGAIN, epoch, T0 + 5000, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "w");
        assert_int_equal(call.kind, TG_KIND_RETRY);
        assert_int_equal(op.attempts, 2);
        assert_int_equal(call.attempt, 2);
        assert_int_equal(op.key_first_used, T0 + 10);
        store_close(s);
}

static void test_settle_transitions(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record op, got;
        struct call_record call;
        struct settle_args a;
        struct seen seen = {0};

        (void)state;
        accept_new(s, "x", T0);
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 10, &op, &call), 0);

        /* the wrong epoch: refused, nothing changes */
        a = settle_args_for(&op, &call, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, T0 + 30, 0);
        a.epoch = epoch + 1;
        assert_int_equal(store_settle(s, &a), TG_EFENCED);
        got = get_op(s, "x");
        assert_int_equal(got.state, OP_IN_FLIGHT);

        /* a retryable answer: retry_wait with its wait remembered */
        a = settle_args_for(&op, &call, TG_CLASS_RETRYABLE, OP_RETRY_WAIT, T0 + 30, T0 + 1500);
        a.decision.wait_ms = 1470;
        snprintf(a.error, sizeof(a.error), "provider said later");
        assert_int_equal(store_settle(s, &a), 0);
        got = get_op(s, "x");
        assert_int_equal(got.state, OP_RETRY_WAIT);
        assert_int_equal(got.next_run_at, T0 + 1500);
        assert_int_equal(got.last_wait_ms, 1470);
        assert_int_equal(got.last_http_status, 503);
        assert_int_equal(got.last_class, TG_CLASS_RETRYABLE);
        assert_int_equal(got.updated_at, T0 + 30);
        assert_int_equal(store_list_op_calls(s, op.id, on_call, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_true(seen.calls[0].ended);
        assert_true(seen.calls[0].sent);
        assert_int_equal(seen.calls[0].cls, TG_CLASS_RETRYABLE);
        assert_int_equal(seen.calls[0].http_status, 503);
        assert_int_equal(seen.calls[0].latency_us, 20000);
        assert_int_equal(seen.calls[0].end_wall, T0 + 30);
        assert_int_equal(seen.calls[0].end_mono, call.start_mono + 20 * TG_NS_PER_MS);
        assert_string_equal(seen.calls[0].error, "provider said later");

        /* the same settle again: the op is no longer in flight */
        assert_int_equal(store_settle(s, &a), TG_EFENCED);

        /* retry, succeeded with a refund id */
        assert_int_equal(claim(s, STORE_GROUP_AGAIN, epoch, T0 + 1500, &op, &call), 0);
        a = settle_args_for(&op, &call, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, T0 + 1600, 0);
        snprintf(a.refund_id, sizeof(a.refund_id), "re_123");
        assert_int_equal(store_settle(s, &a), 0);
        got = get_op(s, "x");
        assert_int_equal(got.state, OP_SUCCEEDED);
        assert_string_equal(got.refund_id, "re_123");
        assert_int_equal(got.last_http_status, 201);
        assert_int_equal(got.last_wait_ms, 1470); /* kept: no new wait */
        assert_int_equal(got.attempts, 2);
        store_close(s);
}

/* Outcomes that came together share one transaction (the dispatcher's
 * store thread); one the store refuses costs the others nothing: each is
 * then settled on its own, with its own answer. */
static void test_settle_batch(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record op[3];
        struct call_record call[3];
        struct settle_args a[3];
        const struct settle_args *pa[3] = {&a[0], &a[1], &a[2]};
        int results[3] = {-1, -1, -1};
        const char *ids[3] = {"b1", "b2", "b3"};

        (void)state;
        for (int i = 0; i < 3; i++)
                accept_new(s, ids[i], T0 + i);
        for (int i = 0; i < 3; i++)
                assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 10, &op[i], &call[i]), 0);

        /* all good: one commit, every outcome kept */
        a[0] = settle_args_for(&op[0], &call[0], TG_CLASS_SUCCEEDED, OP_SUCCEEDED, T0 + 30, 0);
        a[1] = settle_args_for(&op[1], &call[1], TG_CLASS_RETRYABLE, OP_RETRY_WAIT, T0 + 30,
                               T0 + 1500);
        store_settle_batch(s, pa, 2, results);
        assert_int_equal(results[0], 0);
        assert_int_equal(results[1], 0);
        assert_int_equal(get_op(s, "b1").state, OP_SUCCEEDED);
        assert_int_equal(get_op(s, "b2").state, OP_RETRY_WAIT);
        assert_int_equal(get_op(s, "b2").next_run_at, T0 + 1500);

        /* one already settled (fenced) and one invalid beside a good one:
         * the good one is kept, the others answer as store_settle would */
        a[2] = settle_args_for(&op[2], &call[2], TG_CLASS_REJECTED, OP_REJECTED, T0 + 40, 0);
        struct settle_args bad = a[1];
        bad.decision.next = OP_PENDING; /* not an outcome */
        const struct settle_args *mixed[3] = {&a[0], &bad, &a[2]};
        store_settle_batch(s, mixed, 3, results);
        assert_int_equal(results[0], TG_EFENCED);
        assert_int_equal(results[1], TG_EINVAL);
        assert_int_equal(results[2], 0);
        assert_int_equal(get_op(s, "b3").state, OP_REJECTED);
        assert_int_equal(get_op(s, "b1").state, OP_SUCCEEDED);
        assert_int_equal(get_op(s, "b2").state, OP_RETRY_WAIT);
        store_close(s);
}

/* ---- ownership --------------------------------------------------------------- */

static void test_owner_lock(void **state)
{
        struct store *a = open_store();
        struct store *b = open_store();
        int64_t ea, eb = -7, e;

        (void)state;
        assert_int_equal(store_owner_epoch(a, &e), 0);
        assert_int_equal(e, 0);
        assert_int_equal(store_owner_check(a), TG_ELOCKED);
        ea = acquire(a);
        assert_int_equal(store_owner_check(a), 0);
        assert_int_equal(store_owner_acquire(b, &eb), TG_ELOCKED);
        assert_int_equal(eb, -7);
        assert_int_equal(store_owner_check(b), TG_ELOCKED);

        /* acquiring again on the owning handle is not a new takeover */
        assert_int_equal(store_owner_acquire(a, &e), 0);
        assert_int_equal(e, ea);

        if (fx_is_sqlite) {
                /* another descriptor of the lock file opened and closed in
                 * this process must not drop the lock */
                char path[400];
                int fd;

                snprintf(path, sizeof(path), "%s/t.db.owner", fx_dir);
                fd = open(path, O_RDWR);
                assert_true(fd >= 0);
                close(fd);
                assert_int_equal(store_owner_acquire(b, &eb), TG_ELOCKED);
                assert_int_equal(store_owner_check(a), 0);
        }

        store_owner_release(a);
        store_owner_release(a); /* safe when not the owner */
        assert_int_equal(store_owner_check(a), TG_ELOCKED);
        eb = acquire(b);
        assert_true(eb > ea);
        assert_int_equal(store_owner_epoch(a, &e), 0);
        assert_int_equal(e, eb);
        assert_int_equal(store_owner_acquire(a, &e), TG_ELOCKED);

        /* closing the owner's handle frees the exit */
        store_close(b);
        e = acquire(a);
        assert_true(e > eb);

        if (fx_is_sqlite) {
                /* someone removes the lock file: the owner can no longer be
                 * sure it is alone, and says so */
                char path[400];

                snprintf(path, sizeof(path), "%s/t.db.owner", fx_dir);
                assert_int_equal(unlink(path), 0);
                assert_int_equal(store_owner_check(a), TG_ELOCKED);
                b = open_store();
                eb = acquire(b);
                assert_true(eb > e);
                assert_int_equal(store_owner_check(b), 0);
                store_close(b);
        }
        store_close(a);
}

static void test_fenced_after_newer_acquire(void **state)
{
        struct store *a = open_store();
        struct store *b = open_store();
        struct op_record op1, op, got;
        struct call_record call1, call;
        struct settle_args sa;
        struct policy_config c = limits();
        unsigned n = 0;
        int64_t ea = acquire(a), eb;

        (void)state;
        accept_new(a, "f1", T0);
        accept_new(a, "f2", T0 + 1);
        assert_int_equal(claim(a, STORE_GROUP_FIRST, ea, T0 + 10, &op1, &call1), 0);
        store_owner_release(a);

        eb = acquire(b);
        assert_true(eb > ea);
        /* the old owner's claims are refused and change nothing */
        assert_int_equal(claim(a, STORE_GROUP_FIRST, ea, T0 + 20, &op, &call), TG_EFENCED);
        got = get_op(b, "f2");
        assert_int_equal(got.state, OP_PENDING);
        assert_int_equal(got.attempts, 0);

        /* the new owner recovers f1; the old owner's settle is then fenced */
        assert_int_equal(store_recover(b, eb, &c, T0 + 30, &n), 0);
        assert_int_equal(n, 1);
        sa = settle_args_for(&op1, &call1, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, T0 + 40, 0);
        assert_int_equal(store_settle(a, &sa), TG_EFENCED);
        got = get_op(b, "f1");
        assert_int_equal(got.state, OP_UNKNOWN);

        /* ... and stays fenced once the new owner has claimed it again */
        assert_int_equal(claim(b, STORE_GROUP_AGAIN, eb, T0 + 40, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "f1");
        assert_int_equal(call.kind, TG_KIND_QUERY);
        assert_int_equal(store_settle(a, &sa), TG_EFENCED);
        got = get_op(b, "f1");
        assert_int_equal(got.state, OP_IN_FLIGHT);
        assert_int_equal(got.epoch, eb);

        /* recovery under an old epoch is fenced as well */
        assert_int_equal(store_recover(a, ea, &c, T0 + 50, &n), TG_EFENCED);
        store_close(a);
        store_close(b);
}

static void test_recover(void **state)
{
        struct store *a = open_store();
        struct store *b;
        struct op_record op, r1, r2;
        struct call_record call;
        struct policy_config c = limits();
        struct seen seen = {0};
        unsigned n = 0;
        int64_t ea = acquire(a), eb;

        (void)state;
        accept_new(a, "r1", T0);
        accept_new(a, "r2", T0 + 1);
        assert_int_equal(claim(a, STORE_GROUP_FIRST, ea, T0 + 10, &op, &call), 0);
        assert_int_equal(claim(a, STORE_GROUP_FIRST, ea, T0 + 11, &op, &call), 0);
        /* the owner dies without settling (its handle goes away) */
        store_close(a);

        b = open_store();
        eb = acquire(b);
        assert_int_equal(store_recover(b, eb, &c, T0 + 3000, &n), 0);
        assert_int_equal(n, 2);
        r1 = get_op(b, "r1");
        r2 = get_op(b, "r2");
        assert_int_equal(r1.state, OP_UNKNOWN);
        assert_int_equal(r2.state, OP_UNKNOWN);
        assert_true(r1.next_run_at <= T0 + 3000);
        assert_int_equal(r1.attempts, 1); /* the attempt stays counted */
        assert_int_equal(store_list_op_calls(b, r1.id, on_call, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_true(seen.calls[0].ended);
        assert_int_equal(seen.calls[0].cls, TG_CLASS_UNKNOWN);
        assert_non_null(strstr(seen.calls[0].error, "owner lost"));

        /* nothing left to recover */
        assert_int_equal(store_recover(b, eb, &c, T0 + 3001, &n), 0);
        assert_int_equal(n, 0);

        /* past the deadline, a takeover goes to manual */
        accept_new(b, "r3", T0 + 2);
        assert_int_equal(claim(b, STORE_GROUP_FIRST, eb, T0 + 3002, &op, &call), 0);
        store_close(b);
        b = open_store();
        eb = acquire(b);
        assert_int_equal(store_recover(b, eb, &c, T0 + c.deadline_ms + 10, &n), 0);
        assert_int_equal(n, 1);
        op = get_op(b, "r3");
        assert_int_equal(op.state, OP_MANUAL);
        assert_int_equal(op.reason, MANUAL_DEADLINE);
        store_close(b);
}

/* A child process accepts and claims, then dies without settling or closing;
 * its lock dies with it, and the next owner recovers the claim. */
static void test_crash_between_claim_and_settle(void **state)
{
        struct store *s;
        struct op_record op;
        struct policy_config c = limits();
        unsigned n = 0;
        int64_t epoch;
        int status = 0;
        pid_t pid;

        (void)state;
        fflush(NULL);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct store *cs = NULL;
                struct op_record cop;
                struct call_record ccall;
                bool created;
                int64_t ce = 0;
                struct refund_request r = req("crash-1", "pay-9", 500);

                if (store_open(fx_url, &cs) != 0 || store_owner_acquire(cs, &ce) != 0 ||
                    store_accept(cs, &r, T0, &c, &created, &cop) != 0 ||
                    claim(cs, STORE_GROUP_FIRST, ce, T0 + 10, &cop, &ccall) != 0)
                        _exit(1);
                _exit(0); /* no settle, no close */
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);

        s = open_store();
        op = get_op(s, "crash-1");
        assert_int_equal(op.state, OP_IN_FLIGHT);
        assert_int_equal(op.attempts, 1);
        epoch = acquire(s);
        assert_true(epoch > op.epoch);
        assert_int_equal(store_recover(s, epoch, &c, T0 + 3000, &n), 0);
        assert_int_equal(n, 1);
        op = get_op(s, "crash-1");
        assert_int_equal(op.state, OP_UNKNOWN);
        store_close(s);
}

/* Intake in one process and the exit in another write at the same time:
 * neither sees a busy error, and every accepted operation is claimed once. */
static void test_concurrent_writers(void **state)
{
        enum { N = 100 };
        struct policy_config c = limits();
        struct store *s;
        struct store_stats st;
        int64_t epoch, last_id = 0;
        unsigned claimed = 0, spins = 0;
        int status = 0;
        pid_t pid;

        (void)state;
        s = open_store(); /* creates the schema before the child opens */
        store_close(s);
        fflush(NULL);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct store *cs = NULL;

                if (store_open(fx_url, &cs) != 0)
                        _exit(1);
                for (int i = 0; i < N; i++) {
                        char id[32];
                        struct refund_request r;
                        struct op_record op;
                        bool created;

                        snprintf(id, sizeof(id), "cc-%03d", i);
                        r = req(id, "pay-c", 100 + i);
                        if (store_accept(cs, &r, T0 + i, &c, &created, &op) != 0 || !created)
                                _exit(2);
                }
                store_close(cs);
                _exit(0);
        }
        s = open_store();
        epoch = acquire(s);
        while (claimed < N && spins < 20000) {
                struct op_record op;
                struct call_record call;
                struct settle_args a;
                int r = claim(s, STORE_GROUP_FIRST, epoch, T0 + 1000, &op, &call);

                if (r == TG_ENOTFOUND) {
                        spins++;
                        usleep(1000);
                        continue;
                }
                assert_int_equal(r, 0);
                assert_true(op.id > last_id); /* oldest first, each once */
                last_id = op.id;
                a = settle_args_for(&op, &call, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, T0 + 1001, 0);
                assert_int_equal(store_settle(s, &a), 0);
                claimed++;
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(claimed, N);
        assert_int_equal(store_stats(s, &st), 0);
        assert_int_equal(st.by_state[OP_SUCCEEDED], N);
        assert_int_equal(st.calls_total, N);
        store_close(s);
}

/* ---- scheduling ------------------------------------------------------------- */

static void test_sweep_deadlines(void **state)
{
        struct store *s = open_store();
        struct policy_config c = limits();
        int64_t epoch = acquire(s);
        struct op_record op;
        struct call_record call;
        struct seen seen = {0};
        unsigned n = 99;
        tg_wall_ms late = T0 + c.deadline_ms + 100;

        (void)state;
        accept_new(s, "d-wait", T0);
        accept_new(s, "d-unknown", T0 + 1);
        accept_new(s, "d-fly", T0 + 2);
        accept_new(s, "d-done", T0 + 3);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_RETRYABLE, OP_RETRY_WAIT, T0 + 2000);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 11, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 2000);
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 12, &op, &call), 0);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 13, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        accept_new(s, "d-pending", T0 + 4);
        accept_new(s, "d-young", late - 10); /* its deadline is still ahead */

        assert_int_equal(store_sweep_deadlines(s, 0, T0 + 60000, &n), 0);
        assert_int_equal(n, 0);
        assert_int_equal(store_sweep_deadlines(s, 0, late, &n), 0);
        assert_int_equal(n, 3);
        assert_int_equal(get_op(s, "d-wait").state, OP_MANUAL);
        assert_int_equal(get_op(s, "d-wait").reason, MANUAL_DEADLINE);
        assert_int_equal(get_op(s, "d-unknown").state, OP_MANUAL);
        assert_int_equal(get_op(s, "d-pending").state, OP_MANUAL);
        assert_int_equal(get_op(s, "d-fly").state, OP_IN_FLIGHT);
        assert_int_equal(get_op(s, "d-done").state, OP_SUCCEEDED);
        assert_int_equal(get_op(s, "d-young").state, OP_PENDING);
        assert_int_equal(store_list_audit(s, get_op(s, "d-wait").id, on_audit, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.audits[0].action, "event");
        assert_int_equal(seen.audits[0].at, late);
        store_close(s);
}

/* Nothing past its deadline, and no re-send with a key past retention, is
 * ever claimed; the sweep moves both to manual with the reason. */
static void test_claim_skips_expired_and_sweep_key_retention(void **state)
{
        struct store *s = open_store();
        struct policy_config c = limits();
        int64_t epoch = acquire(s);
        struct op_record op;
        struct call_record call;
        struct claim_args a;
        unsigned n = 0;
        const int64_t retention = 60000; /* a short key retention for the test */

        (void)state;
        accept_new(s, "k-old", T0);
        /* First POST at T0+10: key first used; retryable, due at T0+1000. */
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_RETRYABLE, OP_RETRY_WAIT, T0 + 1000);
        assert_int_equal(get_op(s, "k-old").key_first_used, T0 + 10);

        memset(&a, 0, sizeof(a));
        a.group = STORE_GROUP_AGAIN;
        a.epoch = epoch;
        a.now = T0 + 10 + retention; /* the key is exactly retention old */
        a.key_retention_ms = retention;
        a.in_flight_at_start = 1;
        snprintf(a.request_id, sizeof(a.request_id), "req-key");
        assert_int_equal(store_claim(s, &a, &op, &call), TG_ENOTFOUND);

        /* A pending operation past its deadline is not claimed either. */
        accept_new(s, "k-late", T0 + 20);
        memset(&a, 0, sizeof(a));
        a.group = STORE_GROUP_FIRST;
        a.epoch = epoch;
        a.now = T0 + 20 + c.deadline_ms + 1;
        a.in_flight_at_start = 1;
        snprintf(a.request_id, sizeof(a.request_id), "req-late");
        assert_int_equal(store_claim(s, &a, &op, &call), TG_ENOTFOUND);

        /* The sweep: key retention first seen at T0+10+retention. */
        assert_int_equal(store_sweep_deadlines(s, retention, T0 + 9 + retention, &n), 0);
        assert_int_equal(n, 0);
        assert_int_equal(store_sweep_deadlines(s, retention, T0 + 10 + retention, &n), 0);
        assert_int_equal(n, 1);
        op = get_op(s, "k-old");
        assert_int_equal(op.state, OP_MANUAL);
        assert_int_equal(op.reason, MANUAL_KEY_RETENTION);
        assert_int_equal(get_op(s, "k-late").state, OP_PENDING);
        assert_int_equal(store_sweep_deadlines(s, retention, T0 + 21 + c.deadline_ms, &n), 0);
        assert_int_equal(get_op(s, "k-late").state, OP_MANUAL);
        assert_int_equal(get_op(s, "k-late").reason, MANUAL_DEADLINE);
        store_close(s);
}

static void test_next_due(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        tg_wall_ms next = 0;
        bool pending = true;

        (void)state;
        assert_int_equal(store_next_due(s, &next, &pending), 0);
        assert_int_equal(next, TG_WALL_NEVER);
        assert_false(pending);

        accept_new(s, "n1", T0);
        accept_new(s, "n2", T0 + 1);
        accept_new(s, "n3", T0 + 2);
        assert_int_equal(store_next_due(s, &next, &pending), 0);
        assert_int_equal(next, TG_WALL_NEVER);
        assert_true(pending);

        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_RETRYABLE, OP_RETRY_WAIT, T0 + 7000);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 11, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 4000);
        assert_int_equal(store_next_due(s, &next, &pending), 0);
        assert_int_equal(next, T0 + 4000);
        assert_true(pending);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 12, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        assert_int_equal(store_next_due(s, &next, &pending), 0);
        assert_false(pending);
        store_close(s);
}

/* ---- manual review ------------------------------------------------------------ */

static void test_manual_resend_resolve(void **state)
{
        struct store *s = open_store();
        struct policy_config c = limits();
        int64_t epoch = acquire(s);
        struct op_record m1, m2, op, got;
        struct call_record call;
        struct settle_args a;
        struct seen seen = {0};

        (void)state;
        accept_new(s, "m1", T0);
        accept_new(s, "m2", T0 + 1);
        accept_new(s, "live", T0 + 2);
        m1 = drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        m2 = drive(s, STORE_GROUP_FIRST, epoch, T0 + 11, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        assert_int_equal(m1.state, OP_MANUAL);
        assert_int_equal(m1.reason, MANUAL_ATTEMPTS_EXHAUSTED);

        assert_int_equal(store_list_manual(s, 0, MANUAL_NONE, 10, on_op, &seen), 0);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.op_ids[0], "m1");
        assert_string_equal(seen.op_ids[1], "m2");
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_manual(s, m1.id, MANUAL_NONE, 10, on_op, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.op_ids[0], "m2");
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_manual(s, 0, MANUAL_NONE, 1, on_op, &seen), 0);
        assert_int_equal(seen.n, 1);

        /* refused unless manual; refused past key retention */
        assert_int_equal(store_operator_resend(s, "live", "ana", "try", &c, T0 + 20, &op),
                         TG_ESTATE);
        assert_int_equal(store_operator_resend(s, "ghost", "ana", "try", &c, T0 + 20, &op),
                         TG_ENOTFOUND);
        assert_int_equal(store_operator_resend(s, "m2", "ana", "try", &c,
                                               m2.key_first_used + c.key_retention_ms + 1, &op),
                         TG_ERANGE);
        assert_int_equal(get_op(s, "m2").state, OP_MANUAL);

        /* a re-send: retry_wait, due now, kind manual, audited */
        assert_int_equal(
            store_operator_resend(s, "m1", "ana", "customer called", &c, T0 + 100, &op), 0);
        assert_int_equal(op.state, OP_RETRY_WAIT);
        assert_true(op.operator_resend);
        assert_true(op.next_run_at <= T0 + 100);
        assert_int_equal(op.attempt_limit, m1.attempts + 1);
        got = get_op(s, "m1");
        assert_int_equal(got.state, OP_RETRY_WAIT);
        assert_true(got.operator_resend);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_audit(s, m1.id, on_audit, &seen), 0);
        assert_true(seen.n >= 1);
        assert_string_equal(seen.audits[seen.n - 1].action, "resend");
        assert_string_equal(seen.audits[seen.n - 1].operator_name, "ana");
        assert_string_equal(seen.audits[seen.n - 1].reason, "customer called");
        assert_int_equal(seen.audits[seen.n - 1].at, T0 + 100);

        /* it leaves through the same exit as kind manual, and the flag clears */
        assert_int_equal(claim(s, STORE_GROUP_AGAIN, epoch, T0 + 100, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "m1");
        assert_int_equal(call.kind, TG_KIND_MANUAL);
        assert_int_equal(op.attempts, m1.attempts + 1);
        a = settle_args_for(&op, &call, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, T0 + 150, 0);
        assert_int_equal(store_settle(s, &a), 0);
        got = get_op(s, "m1");
        assert_int_equal(got.state, OP_SUCCEEDED);
        assert_false(got.operator_resend);

        /* resolve: only manual, audited */
        assert_int_equal(store_operator_resolve(s, "m1", "bo", "dup", OP_REJECTED, T0 + 200, &op),
                         TG_ESTATE);
        assert_int_equal(store_operator_resolve(s, "m2", "bo", "checked with provider", OP_REJECTED,
                                                T0 + 200, &op),
                         0);
        assert_int_equal(op.state, OP_REJECTED);
        assert_int_equal(get_op(s, "m2").state, OP_REJECTED);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_audit(s, m2.id, on_audit, &seen), 0);
        assert_true(seen.n >= 1);
        assert_string_equal(seen.audits[seen.n - 1].action, "resolve");
        assert_string_equal(seen.audits[seen.n - 1].operator_name, "bo");
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_manual(s, 0, MANUAL_NONE, 10, on_op, &seen), 0);
        assert_int_equal(seen.n, 0);
        store_close(s);
}

/* The events' outbox (store_events.h): every announced change of state has
 * its event, written with it, in id order; nothing else has one; delivery
 * columns move, re-delivery makes an event due again. */
static void test_events_outbox(void **state)
{
        struct store *s = open_store();
        struct policy_config c = limits();
        int64_t epoch = acquire(s);
        struct store_event ev[16], one;
        struct op_record op;
        bool changed = false;
        unsigned n = 0;

        (void)state;
        accept_new(s, "e1", T0);
        accept_new(s, "e2", T0 + 1);
        accept_new(s, "e3", T0 + 2);
        accept_new(s, "e4", T0 + 3);
        /* nothing announced yet: accept and claim are not announced */
        assert_int_equal(store_events_list(s, 0, STORE_EVENTS_ALL, 16, ev, &n), 0);
        assert_int_equal(n, 0);

        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 11, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 12, TG_CLASS_RETRYABLE, OP_RETRY_WAIT, T0 + 99);
        assert_int_equal(store_operator_resend(s, "e2", "ana", "try", &c, T0 + 20, &op), 0);
        assert_int_equal(store_operator_resolve(s, "e2", "bo", "x", OP_REJECTED, T0 + 30, &op),
                         TG_ESTATE);
        assert_int_equal(store_cancel(s, "e4", "caller", "", T0 + 40, &op, &changed), 0);
        assert_true(changed);
        assert_int_equal(store_events_list(s, 0, STORE_EVENTS_ALL, 16, ev, &n), 0);
        /* e1 succeeded; e2 to manual and back out; e4 cancelled; e3's
         * retry_wait is not announced */
        assert_int_equal(n, 4);
        for (unsigned i = 1; i < n; i++)
                assert_true(ev[i].id > ev[i - 1].id);
        assert_string_equal(ev[0].operation_id, "e1");
        assert_int_equal(ev[0].state, OP_SUCCEEDED);
        assert_int_equal(ev[0].from_state, OP_IN_FLIGHT);
        assert_int_equal(ev[0].amount, 1000);
        assert_string_equal(ev[0].currency, "TWD");
        assert_int_equal(ev[0].delivery, STORE_DELIVERY_DUE);
        assert_string_equal(ev[1].operation_id, "e2");
        assert_int_equal(ev[1].state, OP_MANUAL);
        assert_int_equal(ev[1].reason, MANUAL_ATTEMPTS_EXHAUSTED);
        assert_string_equal(ev[2].operation_id, "e2");
        assert_int_equal(ev[2].from_state, OP_MANUAL);
        assert_int_equal(ev[2].state, OP_RETRY_WAIT);
        assert_int_equal(ev[2].at, T0 + 20);
        assert_string_equal(ev[3].operation_id, "e4");
        assert_int_equal(ev[3].state, OP_CANCELLED);

        /* a resolve is announced as the final state it sets */
        drive(s, STORE_GROUP_AGAIN, epoch, T0 + 50, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        assert_int_equal(store_operator_resolve(s, "e2", "bo", "x", OP_REJECTED, T0 + 60, &op), 0);
        assert_int_equal(store_events_list(s, ev[3].id, STORE_EVENTS_ALL, 16, ev + 4, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(ev[4].state, OP_MANUAL);
        assert_int_equal(ev[5].state, OP_REJECTED);
        assert_int_equal(ev[5].from_state, OP_MANUAL);

        /* delivery: delivered leaves the undelivered list, parked stays in it */
        one = ev[0];
        one.delivery = STORE_DELIVERY_DELIVERED;
        one.attempts = 2;
        one.delivered_at = T0 + 70;
        assert_int_equal(store_event_delivery_put(s, &one), 0);
        one = ev[1];
        one.delivery = STORE_DELIVERY_PARKED;
        one.attempts = 9;
        snprintf(one.last_error, sizeof(one.last_error), "HTTP 500");
        assert_int_equal(store_event_delivery_put(s, &one), 0);
        assert_int_equal(store_events_list(s, 0, STORE_EVENTS_UNDELIVERED, 16, ev + 8, &n), 0);
        assert_int_equal(n, 5);
        assert_int_equal(ev[8].id, ev[1].id);
        assert_int_equal(ev[8].delivery, STORE_DELIVERY_PARKED);
        assert_int_equal(ev[8].attempts, 9);
        assert_string_equal(ev[8].last_error, "HTTP 500");
        assert_int_equal(store_event_get(s, ev[0].id, &one), 0);
        assert_int_equal(one.delivery, STORE_DELIVERY_DELIVERED);
        assert_int_equal(one.delivered_at, T0 + 70);
        assert_int_equal(store_event_get(s, ev[5].id + 100, &one), TG_ENOTFOUND);
        assert_int_equal(store_event_redeliver(s, ev[1].id, "ops-ann", T0 + 80), 0);
        assert_int_equal(store_event_get(s, ev[1].id, &one), 0);
        assert_int_equal(one.delivery, STORE_DELIVERY_DUE);
        assert_int_equal(one.attempts, 0);
        assert_int_equal(one.next_at, T0 + 80);
        assert_string_equal(one.last_error, "");
        assert_int_equal(store_event_redeliver(s, ev[5].id + 100, "ops-ann", T0 + 80),
                         TG_ENOTFOUND);

        /* a refund's own notify_url is kept with it and copied into its
         * events with the account; the notifier's scan is by account */
        struct refund_request own = req("e5", "pay-1", 1000);
        snprintf(own.notify_url, sizeof(own.notify_url), "https://orders.example/h/e5");
        assert_int_equal(store_accept(s, &own, T0 + 90, &c, &changed, &op), 0);
        assert_true(changed);
        assert_string_equal(get_op(s, "e5").req.notify_url, "https://orders.example/h/e5");
        assert_int_equal(store_cancel(s, "e5", "caller", "", T0 + 91, &op, &changed), 0);
        assert_int_equal(store_events_due(s, TG_ACCOUNT_DEFAULT, true, 16, ev, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(ev[0].operation_id, "e5");
        assert_string_equal(ev[0].notify_url, "https://orders.example/h/e5");
        assert_string_equal(ev[0].account, TG_ACCOUNT_DEFAULT);
        assert_int_equal(store_events_due(s, TG_ACCOUNT_DEFAULT, false, 16, ev, &n), 0);
        assert_int_equal(n, 6); /* all seven but e1 (delivered; the parked one is due again) */
        assert_int_equal(store_events_due(s, "other", false, 16, ev, &n), 0);
        assert_int_equal(n, 0);
        snprintf(own.notify_url, sizeof(own.notify_url), "ftp://x");
        snprintf(own.operation_id, sizeof(own.operation_id), "e6");
        assert_int_equal(store_accept(s, &own, T0 + 92, &c, &changed, &op), TG_EINVAL);
        store_close(s);
}

/* An operation found by the provider's refund id within its account (a
 * notification naming only Adyen's pspReference): the one that holds it,
 * none for another account or an id nobody holds, a conflict when two do. */
static void test_find_by_refund_id(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record got;

        (void)state;
        accept_new(s, "f1", T0);
        accept_new(s, "f2", T0 + 1);
        accept_new(s, "f3", T0 + 2);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 2000);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 20, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 2000);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 30, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 2000);
        assert_int_equal(store_find_by_refund_id(s, TG_ACCOUNT_DEFAULT, "psp_1", &got),
                         TG_ENOTFOUND);
        assert_int_equal(store_settle_external(s, "f2", OP_SUCCEEDED, "psp_1", "webhook", T0 + 50),
                         0);
        memset(&got, 0, sizeof(got));
        assert_int_equal(store_find_by_refund_id(s, TG_ACCOUNT_DEFAULT, "psp_1", &got), 0);
        assert_string_equal(got.req.operation_id, "f2");
        assert_string_equal(got.refund_id, "psp_1");
        assert_int_equal(got.state, OP_SUCCEEDED);
        assert_int_equal(store_find_by_refund_id(s, "other", "psp_1", &got), TG_ENOTFOUND);
        assert_int_equal(store_find_by_refund_id(s, TG_ACCOUNT_DEFAULT, "psp_", &got),
                         TG_ENOTFOUND);
        assert_int_equal(store_find_by_refund_id(s, TG_ACCOUNT_DEFAULT, "", &got), TG_EINVAL);
        assert_int_equal(store_find_by_refund_id(s, "bad name!", "psp_1", &got), TG_EINVAL);
        /* an id two operations hold names no single one */
        assert_int_equal(store_settle_external(s, "f3", OP_SUCCEEDED, "psp_1", "webhook", T0 + 60),
                         0);
        assert_int_equal(store_find_by_refund_id(s, TG_ACCOUNT_DEFAULT, "psp_1", &got),
                         TG_ECONFLICT);
        store_close(s);
}

static void test_settle_external(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record op, got;
        struct call_record call;
        struct seen seen = {0};

        (void)state;
        accept_new(s, "e1", T0);
        accept_new(s, "e2", T0 + 1);
        accept_new(s, "e3", T0 + 2);
        op = drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 2000);

        assert_int_equal(store_settle_external(s, "e1", OP_SUCCEEDED, "re_9", "webhook", T0 + 50),
                         0);
        got = get_op(s, "e1");
        assert_int_equal(got.state, OP_SUCCEEDED);
        assert_string_equal(got.refund_id, "re_9");
        assert_int_equal(store_list_audit(s, op.id, on_audit, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.audits[0].operator_name, "webhook");
        /* again the same: no change; the other outcome: refused */
        assert_int_equal(store_settle_external(s, "e1", OP_SUCCEEDED, "re_9", "webhook", T0 + 60),
                         0);
        assert_int_equal(get_op(s, "e1").updated_at, T0 + 50);
        assert_int_equal(store_settle_external(s, "e1", OP_REJECTED, NULL, "file", T0 + 60),
                         TG_ESTATE);
        /* in flight: the exit's own call decides */
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 70, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "e2");
        assert_int_equal(store_settle_external(s, "e2", OP_SUCCEEDED, NULL, "file", T0 + 80),
                         TG_ESTATE);
        assert_int_equal(store_settle_external(s, "zz", OP_SUCCEEDED, NULL, "file", T0 + 80),
                         TG_ENOTFOUND);
        assert_int_equal(store_settle_external(s, "e3", OP_MANUAL, NULL, "file", T0 + 80),
                         TG_EINVAL);
        store_close(s);
}

static void test_cancel_before_any_call(void **state)
{
        struct store *s = open_store();
        struct store *other = open_store();
        int64_t epoch = acquire(s);
        struct op_record op, got;
        struct call_record call;
        struct store_stats st;
        struct seen seen = {0};
        bool changed = false;

        (void)state;
        accept_new(s, "c-pending", T0);
        accept_new(s, "c-claimed", T0 + 1);
        accept_new(s, "c-sent", T0 + 2);
        accept_new(s, "c-done", T0 + 3);
        /* the first one is cancelled: final, audited, never picked */
        assert_int_equal(
            store_cancel(s, "c-pending", "shop", "customer withdrew", T0 + 10, &op, &changed), 0);
        assert_true(changed);
        assert_int_equal(op.state, OP_CANCELLED);
        got = get_op(other, "c-pending"); /* committed before it returned */
        assert_int_equal(got.state, OP_CANCELLED);
        assert_int_equal(store_list_audit(s, got.id, on_audit, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.audits[0].action, "cancel");
        assert_string_equal(seen.audits[0].operator_name, "shop");
        assert_string_equal(seen.audits[0].reason, "customer withdrew");
        /* again: no change, no second audit row */
        assert_int_equal(store_cancel(s, "c-pending", "shop", "again", T0 + 11, &op, &changed), 0);
        assert_false(changed);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_audit(s, got.id, on_audit, &seen), 0);
        assert_int_equal(seen.n, 1);
        /* the exit never picks it: the next claim takes the next one */
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 20, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "c-claimed");
        /* claimed (the attempt is recorded as sent): refused, unchanged */
        assert_int_equal(store_cancel(other, "c-claimed", "shop", "late", T0 + 21, &got, &changed),
                         TG_ESTATE);
        assert_int_equal(get_op(s, "c-claimed").state, OP_IN_FLIGHT);
        /* sent once and waiting to retry: refused as sent (TG_ECONFLICT) */
        struct settle_args a =
            settle_args_for(&op, &call, TG_CLASS_RETRYABLE, OP_RETRY_WAIT, T0 + 30, T0 + 5000);
        assert_int_equal(store_settle(s, &a), 0);
        assert_int_equal(store_cancel(s, "c-claimed", "shop", "late", T0 + 31, &got, &changed),
                         TG_ECONFLICT);
        assert_int_equal(get_op(s, "c-claimed").state, OP_RETRY_WAIT);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 40, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 5000);
        assert_int_equal(store_cancel(s, "c-sent", "shop", "late", T0 + 41, &got, &changed),
                         TG_ESTATE);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 50, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        assert_int_equal(store_cancel(s, "c-done", "shop", "late", T0 + 51, &got, &changed),
                         TG_ESTATE);
        assert_int_equal(store_cancel(s, "ghost", "shop", "x", T0 + 52, &got, &changed),
                         TG_ENOTFOUND);
        assert_int_equal(store_cancel(s, "c-done", "", "x", T0 + 52, &got, &changed), TG_EINVAL);
        /* the backlog counts it in its own state */
        assert_int_equal(store_stats(s, &st), 0);
        assert_int_equal(st.by_state[OP_CANCELLED], 1);
        store_close(other);
        store_close(s);
}

/* A manual case whose first call never went (the deadline passed while it
 * was pending) may be cancelled too. */
static void test_cancel_manual_never_sent(void **state)
{
        struct store *s = open_store();
        struct policy_config c = limits();
        struct op_record op;
        unsigned n = 0;
        bool changed = false;

        (void)state;
        accept_new(s, "late", T0);
        assert_int_equal(store_sweep_deadlines(s, 0, T0 + c.deadline_ms + 1, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(get_op(s, "late").state, OP_MANUAL);
        assert_int_equal(store_cancel(s, "late", "shop", "too late anyway", T0 + c.deadline_ms + 2,
                                      &op, &changed),
                         0);
        assert_int_equal(op.state, OP_CANCELLED);
        assert_int_equal(op.reason, MANUAL_DEADLINE); /* why it had stopped, kept */
        store_close(s);
}

static int count_manual(struct store *s, enum manual_reason reason, enum store_assignee who,
                        const char *name, struct seen *seen)
{
        struct store_manual_filter f = {.reason = reason, .who = who, .assignee = name};

        memset(seen, 0, sizeof(*seen));
        return store_list_manual_filtered(s, 0, &f, 10, on_op, seen);
}

static void test_assign_manual_cases(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record op, got;
        struct seen seen = {0};

        (void)state;
        for (int i = 0; i < 4; i++) {
                char id[16];

                snprintf(id, sizeof(id), "a-%d", i);
                accept_new(s, id, T0 + i);
                drive(s, STORE_GROUP_FIRST, epoch, T0 + 10 + i, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        }
        accept_new(s, "a-live", T0 + 9);
        /* assign, re-assign, unassign: each audited with before and after */
        assert_int_equal(
            store_operator_assign(s, "a-0", "lead", "alice", "first look", T0 + 20, &op), 0);
        assert_string_equal(op.assignee, "alice");
        assert_int_equal(op.state, OP_MANUAL);
        assert_int_equal(op.reason, MANUAL_ATTEMPTS_EXHAUSTED);
        assert_string_equal(get_op(s, "a-0").assignee, "alice");
        assert_int_equal(
            store_operator_assign(s, "a-0", "lead", "bob", "alice is out", T0 + 21, &op), 0);
        assert_string_equal(op.assignee, "bob");
        assert_int_equal(store_operator_assign(s, "a-0", "lead", "bob", "again", T0 + 22, &op), 0);
        assert_int_equal(store_operator_assign(s, "a-1", "lead", "bob", NULL, T0 + 23, &op), 0);
        assert_int_equal(store_operator_assign(s, "a-2", "lead", "alice", "", T0 + 24, &op), 0);
        assert_int_equal(
            store_operator_assign(s, "a-2", "lead", NULL, "back to the queue", T0 + 25, &op), 0);
        assert_string_equal(op.assignee, "");
        got = get_op(s, "a-0");
        assert_int_equal(store_list_audit(s, got.id, on_audit, &seen), 0);
        /* the exit's own "to manual" event, then two changes of owner; the
         * same owner again wrote nothing */
        assert_int_equal(seen.n, 3);
        assert_string_equal(seen.audits[1].action, "assign");
        assert_string_equal(seen.audits[1].operator_name, "lead");
        assert_string_equal(seen.audits[1].detail, "assigned to alice (was nobody)");
        assert_string_equal(seen.audits[2].detail, "assigned to bob (was alice)");
        assert_string_equal(seen.audits[2].reason, "alice is out");
        memset(&seen, 0, sizeof(seen));
        got = get_op(s, "a-2");
        assert_int_equal(store_list_audit(s, got.id, on_audit, &seen), 0);
        assert_string_equal(seen.audits[seen.n - 1].detail, "unassigned (was alice)");
        /* only a manual case has an owner */
        assert_int_equal(store_operator_assign(s, "a-live", "lead", "bob", "x", T0 + 26, &op),
                         TG_ESTATE);
        assert_int_equal(store_operator_assign(s, "ghost", "lead", "bob", "x", T0 + 26, &op),
                         TG_ENOTFOUND);

        /* the manual list by owner, and by owner and reason */
        assert_int_equal(count_manual(s, MANUAL_NONE, STORE_ASSIGNEE_IS, "bob", &seen), 0);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.op_ids[0], "a-0");
        assert_string_equal(seen.op_ids[1], "a-1");
        assert_int_equal(count_manual(s, MANUAL_NONE, STORE_ASSIGNEE_NONE, NULL, &seen), 0);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.op_ids[0], "a-2");
        assert_string_equal(seen.op_ids[1], "a-3");
        assert_int_equal(count_manual(s, MANUAL_NONE, STORE_ASSIGNEE_ANY, NULL, &seen), 0);
        assert_int_equal(seen.n, 4);
        assert_int_equal(
            count_manual(s, MANUAL_ATTEMPTS_EXHAUSTED, STORE_ASSIGNEE_IS, "bob", &seen), 0);
        assert_int_equal(seen.n, 2);
        assert_int_equal(count_manual(s, MANUAL_DEADLINE, STORE_ASSIGNEE_IS, "bob", &seen), 0);
        assert_int_equal(seen.n, 0);
        assert_int_equal(count_manual(s, MANUAL_NONE, STORE_ASSIGNEE_IS, "carol", &seen), 0);
        assert_int_equal(seen.n, 0);
        assert_int_equal(count_manual(s, MANUAL_NONE, STORE_ASSIGNEE_IS, "", &seen), TG_EINVAL);
        /* the owner stays with the record after the case is resolved */
        assert_int_equal(
            store_operator_resolve(s, "a-1", "bob", "done", OP_SUCCEEDED, T0 + 30, &op), 0);
        assert_string_equal(get_op(s, "a-1").assignee, "bob");
        assert_int_equal(count_manual(s, MANUAL_NONE, STORE_ASSIGNEE_IS, "bob", &seen), 0);
        assert_int_equal(seen.n, 1);
        store_close(s);
}

struct set_ctx {
        const struct op_record *op;
};

static int set_tx(struct store *s, void *ctx)
{
        return s->ops->op_put(s, ((struct set_ctx *)ctx)->op);
}

/* Four-eyes (store_approval_*): a request is an audit row and changes
 * nothing else; one at a time; its requester cannot approve it; another
 * operator's approval carries it out with both rows, in one transaction. */
static void test_approvals(void **state)
{
        struct policy_config cfg = limits();
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        enum store_approval_refusal why = STORE_APPROVAL_OK;
        struct store_approval q;
        struct op_record op, got;
        struct seen seen = {0};

        (void)state;
        accept_new(s, "f-0", T0);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        accept_new(s, "f-live", T0 + 1);
        assert_int_equal(store_approval_pending(s, "f-0", &q), TG_ENOTFOUND);
        assert_int_equal(store_approval_request(s, "f-live", "alice", "r", false, OP_SUCCEEDED,
                                                &cfg, T0 + 19, &op),
                         TG_ESTATE);
        assert_int_equal(store_approval_request(s, "f-0", "alice", "paid, says the provider", true,
                                                OP_SUCCEEDED, &cfg, T0 + 20, &op),
                         0);
        assert_int_equal(get_op(s, "f-0").state, OP_MANUAL);
        assert_int_equal(store_approval_pending(s, "f-0", &q), 0);
        assert_true(q.resolve);
        assert_int_equal(q.outcome, OP_SUCCEEDED);
        assert_string_equal(q.requested_by, "alice");
        assert_string_equal(q.reason, "paid, says the provider");
        assert_int_equal(
            store_approval_request(s, "f-0", "bob", "r", false, OP_SUCCEEDED, &cfg, T0 + 21, &op),
            TG_ECONFLICT);
        assert_int_equal(store_approval_decide(s, "f-0", "alice", &cfg, T0 + 22, &q, &why, &op), 0);
        assert_int_equal(why, STORE_APPROVAL_SELF);
        assert_int_equal(get_op(s, "f-0").state, OP_MANUAL);
        assert_int_equal(store_approval_decide(s, "f-0", "bob", &cfg, T0 + 23, &q, &why, &op), 0);
        assert_int_equal(why, STORE_APPROVAL_OK);
        assert_int_equal(op.state, OP_SUCCEEDED);
        got = get_op(s, "f-0");
        assert_int_equal(got.state, OP_SUCCEEDED);
        assert_int_equal(store_list_audit(s, got.id, on_audit, &seen), 0);
        assert_true(seen.n >= 4);
        assert_string_equal(seen.audits[seen.n - 3].action, "request_resolve");
        assert_string_equal(seen.audits[seen.n - 2].action, "approve");
        assert_string_equal(seen.audits[seen.n - 2].operator_name, "bob");
        assert_string_equal(seen.audits[seen.n - 1].action, "resolve");
        assert_string_equal(seen.audits[seen.n - 1].operator_name, "alice");
        assert_string_equal(seen.audits[seen.n - 1].reason, "paid, says the provider");
        assert_int_equal(store_approval_pending(s, "f-0", &q), TG_ENOTFOUND);
        assert_int_equal(store_approval_decide(s, "f-0", "bob", &cfg, T0 + 24, &q, &why, &op), 0);
        assert_int_equal(why, STORE_APPROVAL_NONE);
        assert_int_equal(store_approval_decide(s, "ghost", "bob", &cfg, T0 + 24, &q, &why, &op),
                         TG_ENOTFOUND);
        store_close(s);
}

static void test_trace_and_caller_deadline(void **state)
{
        static const char tp[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        static const char minted[] = "00-0123456789abcdef0123456789abcdef-1111111111111111-01";
        struct store *s = open_store();
        struct policy_config c = limits();
        int64_t epoch = acquire(s);
        struct refund_request r = req("t-1", "pay-1", 100);
        struct op_record op;
        struct call_record call;
        struct claim_args a;
        bool created = false;

        (void)state;
        r.deadline_at = T0 + 5000;
        memcpy(r.traceparent, tp, sizeof(tp));
        assert_int_equal(store_accept(s, &r, T0, &c, &created, &op), 0);
        op = get_op(s, "t-1");
        assert_string_equal(op.traceparent, tp);
        assert_int_equal(op.caller_deadline_at, T0 + 5000);
        assert_int_equal(op.deadline_at, T0 + 5000);
        /* no traceparent: one is given at the first claim, and kept */
        accept_new(s, "t-2", T0 + 1);
        assert_string_equal(get_op(s, "t-2").traceparent, "");
        assert_int_equal(get_op(s, "t-2").caller_deadline_at, 0);
        /* a traceparent the store would not write itself is refused */
        r = req("t-3", "pay-3", 100);
        snprintf(r.traceparent, sizeof(r.traceparent), "00-nothex");
        assert_int_equal(store_accept(s, &r, T0, &c, &created, &op), TG_EINVAL);

        for (int i = 0; i < 3; i++) {
                memset(&a, 0, sizeof(a));
                a.group = STORE_GROUP_FIRST;
                a.epoch = epoch;
                a.now = T0 + 10 + i;
                a.in_flight_at_start = 1;
                snprintf(a.request_id, sizeof(a.request_id), "req-t-%d", i);
                snprintf(a.span_id, sizeof(a.span_id), "%016x", 0xabc0 + i);
                memcpy(a.traceparent_new, minted, sizeof(minted));
                assert_int_equal(store_claim(s, &a, &op, &call), 0);
                assert_string_equal(call.span_id, a.span_id);
                if (i == 0) { /* the caller's trace */
                        assert_string_equal(op.traceparent, tp);
                        assert_memory_equal(call.trace_id, tp + 3, 32);
                } else { /* the minted one, kept */
                        assert_string_equal(op.traceparent, minted);
                        assert_string_equal(get_op(s, op.req.operation_id).traceparent, minted);
                        assert_memory_equal(call.trace_id, minted + 3, 32);
                }
                if (i == 1) {
                        /* a row whose traceparent column holds something else (an
                         * application's outbox insert, say) gets one too */
                        struct op_record junk = accept_new(s, "t-4", T0 + 2);
                        struct set_ctx sc = {.op = &junk};

                        snprintf(junk.traceparent, sizeof(junk.traceparent), "00-not-a-trace");
                        assert_int_equal(s->ops->tx(s, STORE_TX_WRITE, 0, set_tx, &sc), 0);
                        assert_string_equal(get_op(s, "t-4").traceparent, "00-not-a-trace");
                }
                struct seen seen = {0};
                assert_int_equal(store_list_op_calls(s, op.id, on_call, &seen), 0);
                assert_int_equal(seen.n, 1);
                assert_string_equal(seen.calls[0].trace_id, call.trace_id);
                assert_string_equal(seen.calls[0].span_id, a.span_id);
        }
        store_close(s);
}

/* ---- nothing is deleted: the triggers, through a raw connection ----------------- */

/* What one raw statement did: refused with the trigger's words, or not. */
struct raw_result {
        bool refused;
        char message[256];
};

/* The texts the schema's triggers refuse with: a refusal for any other
 * reason (a foreign key, say) does not count as the guard holding. */
/* since retention (migration 9 / 8): deleted only by a prune, which these
 * rows never qualify for (a manual case, a pending one, and no permit) */
static const char msg_ops[] = "operations are deleted only by a prune";
static const char msg_calls[] = "calls are deleted only with their operation";
static const char msg_audit[] = "audit is append-only";

static struct raw_result raw_sqlite(const char *sql)
{
        struct raw_result res = {0};
        char path[400];
        sqlite3 *db = NULL;
        char *err = NULL;

        snprintf(path, sizeof(path), "%s/t.db", fx_dir);
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
        /* with foreign keys on, as the store runs: they must not be what refuses */
        assert_int_equal(sqlite3_exec(db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL), SQLITE_OK);
        int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
        res.refused = rc != SQLITE_OK;
        snprintf(res.message, sizeof(res.message), "%s", err ? err : "");
        if (res.refused)
                assert_int_equal(rc, SQLITE_CONSTRAINT); /* RAISE(ABORT, ...) */
        sqlite3_free(err);
        sqlite3_close(db);
        return res;
}

#ifdef TG_HAVE_MARIADB
static struct raw_result raw_mysql(const char *sql)
{
        struct raw_result res = {0};
        MYSQL *m = tgtest_mysql_connect(fx_url); /* as the fixture made it */

        res.refused = mysql_query(m, sql) != 0;
        snprintf(res.message, sizeof(res.message), "%s", mysql_error(m));
        if (res.refused) /* SIGNAL SQLSTATE '45000': not a foreign key (1451) */
                assert_int_equal(mysql_errno(m), ER_SIGNAL_EXCEPTION);
        mysql_close(m);
        return res;
}
#endif

#ifdef TG_HAVE_PG
static struct raw_result raw_pg(const char *sql)
{
        struct raw_result res = {0};
        PGconn *c = PQconnectdb(fx_url); /* libpq reads the test's url as it is */
        PGresult *pr;
        ExecStatusType st;

        assert_int_equal(PQstatus(c), CONNECTION_OK);
        pr = PQexec(c, sql);
        st = PQresultStatus(pr);
        res.refused = st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK;
        snprintf(res.message, sizeof(res.message), "%s", PQresultErrorMessage(pr));
        if (res.refused) /* RAISE EXCEPTION: not a foreign key (23503) */
                assert_string_equal(PQresultErrorField(pr, PG_DIAG_SQLSTATE), "P0001");
        PQclear(pr);
        PQfinish(c);
        return res;
}
#endif

static struct raw_result raw(const char *sql)
{
#ifdef TG_HAVE_PG
        if (fx_is_pg)
                return raw_pg(sql);
#endif
#ifdef TG_HAVE_MARIADB
        if (!fx_is_sqlite)
                return raw_mysql(sql);
#endif
        return raw_sqlite(sql);
}

static void expect_refused(const char *sql, const char *why)
{
        struct raw_result r = raw(sql);

        if (!r.refused)
                fail_msg("not refused: %s", sql);
        if (!strstr(r.message, why))
                fail_msg("%s: refused, but not by its trigger: %s", sql, r.message);
}

static void test_protected_rows_never_deleted(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record m, fresh;
        struct seen seen = {0};
        char sql[256];

        (void)state;
        accept_new(s, "keep-1", T0);
        m = drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        assert_int_equal(m.state, OP_MANUAL);
        /* one with no calls and no audit rows: nothing but the trigger can
         * refuse its delete (no foreign key points at it) */
        fresh = accept_new(s, "keep-2", T0 + 1);
        assert_int_equal(store_list_op_calls(s, m.id, on_call, &seen), 0);
        assert_int_equal(seen.n, 1);
        int64_t call_id = seen.calls[0].id;
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_audit(s, m.id, on_audit, &seen), 0);
        assert_int_equal(seen.n, 1);
        int64_t audit_id = seen.audits[0].id;

        snprintf(sql, sizeof(sql), "DELETE FROM operations WHERE id = %lld", (long long)m.id);
        expect_refused(sql, msg_ops);
        snprintf(sql, sizeof(sql), "DELETE FROM operations WHERE id = %lld", (long long)fresh.id);
        expect_refused(sql, msg_ops);
        expect_refused("DELETE FROM operations", msg_ops);
        snprintf(sql, sizeof(sql), "DELETE FROM calls WHERE id = %lld", (long long)call_id);
        expect_refused(sql, msg_calls);
        snprintf(sql, sizeof(sql), "DELETE FROM audit WHERE id = %lld", (long long)audit_id);
        expect_refused(sql, msg_audit);
        snprintf(sql, sizeof(sql), "UPDATE audit SET reason = 'rewritten' WHERE id = %lld",
                 (long long)audit_id);
        expect_refused(sql, msg_audit);

        /* every row is still there, as it was */
        assert_int_equal(get_op(s, "keep-1").state, OP_MANUAL);
        assert_int_equal(get_op(s, "keep-2").state, OP_PENDING);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_op_calls(s, m.id, on_call, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_int_equal(seen.calls[0].id, call_id);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_audit(s, m.id, on_audit, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_int_equal(seen.audits[0].id, audit_id);
        assert_string_not_equal(seen.audits[0].reason, "rewritten");
        /* and the store still works on them */
        assert_int_equal(
            store_operator_resolve(s, "keep-1", "ana", "checked", OP_SUCCEEDED, T0 + 20, &m), 0);
        store_close(s);
}

/* ---- reading ------------------------------------------------------------------ */

static void test_stats(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record op;
        struct call_record call;
        struct store_stats st;

        (void)state;
        assert_int_equal(store_stats(s, &st), 0);
        assert_int_equal(st.oldest_open_accepted_at, TG_WALL_NEVER);
        assert_int_equal(st.calls_total, 0);
        assert_int_equal(st.epoch, epoch);

        accept_new(s, "s1", T0 + 5);
        accept_new(s, "s2", T0 + 6);
        accept_new(s, "s3", T0 + 7);
        accept_new(s, "s4", T0 + 8);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 11, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 100);
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 12, &op, &call), 0);

        assert_int_equal(store_stats(s, &st), 0);
        assert_int_equal(st.by_state[OP_SUCCEEDED], 1);
        assert_int_equal(st.by_state[OP_UNKNOWN], 1);
        assert_int_equal(st.by_state[OP_IN_FLIGHT], 1);
        assert_int_equal(st.by_state[OP_PENDING], 1);
        assert_int_equal(st.by_state[OP_MANUAL], 0);
        assert_int_equal(st.oldest_open_accepted_at, T0 + 6); /* s1 is final */
        assert_int_equal(st.calls_total, 3);
        store_close(s);
}

static void test_list_calls_since_limit(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct seen seen = {0};
        char id[16];

        (void)state;
        for (int i = 0; i < 5; i++) {
                snprintf(id, sizeof(id), "l%d", i);
                accept_new(s, id, T0 + i);
                drive(s, STORE_GROUP_FIRST, epoch, T0 + 10 + i, TG_CLASS_SUCCEEDED, OP_SUCCEEDED,
                      0);
        }
        assert_int_equal(store_list_calls(s, 0, 3, on_call, &seen), 0);
        assert_int_equal(seen.n, 3);
        assert_true(seen.ids[0] < seen.ids[1] && seen.ids[1] < seen.ids[2]);
        assert_string_equal(seen.calls[0].operation_id, "l0");

        int64_t last = seen.ids[2];
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_calls(s, last, 100, on_call, &seen), 0);
        assert_int_equal(seen.n, 2);
        assert_true(seen.ids[0] > last);
        assert_string_equal(seen.calls[1].operation_id, "l4");

        /* a non-zero callback return stops the walk and is returned */
        memset(&seen, 0, sizeof(seen));
        seen.stop_after = 2;
        assert_int_equal(store_list_calls(s, 0, 100, on_call, &seen), 42);
        assert_int_equal(seen.n, 2);
        store_close(s);
}

/* A callback may call back into the store: no statement or transaction is
 * open while it runs. */
static int reenter(const struct call_record *call, void *userdata)
{
        struct store *s = userdata;
        struct op_record op;

        return store_get(s, call->operation_id, &op) == 0 ? 0 : 1;
}

static void test_callbacks_may_reenter(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);

        (void)state;
        accept_new(s, "re1", T0);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        assert_int_equal(store_list_calls(s, 0, 10, reenter, s), 0);
        store_close(s);
}

static void test_bad_urls(void **state)
{
        struct store *s = NULL;

        (void)state;
        assert_int_equal(store_open("postgres://x", &s), TG_EINVAL);
        assert_int_equal(store_open("sqlite://", &s), TG_EINVAL);
        assert_int_equal(store_open("sqlite:///nonexistent-dir/x/y.db", &s), TG_EIO);
        assert_null(s);
        store_close(NULL);

        /* names for logs */
        setup_sqlite(NULL);
        s = open_store();
        assert_string_equal(store_backend(s), "sqlite");
        assert_string_equal(store_url(s), fx_url);
        store_close(s);
        teardown_sqlite(NULL);
}

/* ---- exit samples ------------------------------------------------------------- */

struct sample_seen {
        unsigned n;
        tg_wall_ms at[MAX_SEEN];
        unsigned starts[MAX_SEEN];
        unsigned stop_after; /* 0: never */
};

static int on_sample(const struct exit_sample *x, void *userdata)
{
        struct sample_seen *seen = userdata;

        if (seen->n < MAX_SEEN) {
                seen->at[seen->n] = x->at;
                seen->starts[seen->n] = x->starts;
        }
        seen->n++;
        return seen->stop_after && seen->n >= seen->stop_after ? 42 : 0;
}

struct sample_all {
        unsigned n;
        struct exit_sample x[4];
};

static int on_sample_all(const struct exit_sample *x, void *userdata)
{
        struct sample_all *all = userdata;

        if (all->n < 4)
                all->x[all->n] = *x;
        all->n++;
        return 0;
}

static struct exit_sample *sample_at(tg_wall_ms at, unsigned starts)
{
        static struct exit_sample x;

        memset(&x, 0, sizeof(x));
        x.at = at;
        x.epoch = 3;
        x.in_flight = 2;
        x.starts = starts;
        x.call_ends = 4;
        x.op_closes = 1;
        x.held = true;
        x.oldest_open_accepted_at = 12345; /* ignored: the store reads it itself */
        snprintf(x.figures, sizeof(x.figures), "{\"starts\":%u}", starts);
        return &x;
}

static void test_samples(void **state)
{
        struct store *s = open_store();
        struct store *other = open_store();
        int64_t epoch = acquire(s);
        struct exit_sample *got = calloc(1, sizeof(*got));
        struct sample_seen seen = {0};
        struct op_record op;
        struct call_record call;

        (void)state;
        assert_non_null(got);
        assert_int_equal(store_last_sample(s, got), TG_ENOTFOUND);
        assert_int_equal(store_set_busy_timeout(s, 200), 0);

        /* nothing open: no oldest */
        assert_int_equal(store_sample_put(s, sample_at(T0 + 1000, 1), 0, M0), 0);
        assert_int_equal(store_last_sample(other, got), 0); /* committed */
        assert_int_equal(got->at, T0 + 1000);
        assert_int_equal(got->epoch, 3);
        assert_int_equal(got->in_flight, 2);
        assert_int_equal(got->starts, 1);
        assert_int_equal(got->call_ends, 4);
        assert_int_equal(got->op_closes, 1);
        assert_true(got->held);
        assert_int_equal(got->oldest_open_accepted_at, TG_WALL_NEVER);
        assert_string_equal(got->figures, "{\"starts\":1}");

        /* manual is not open; pending, in_flight, retry_wait, unknown are */
        accept_new(s, "m1", T0 + 1);
        accept_new(s, "o2", T0 + 2);
        accept_new(s, "o3", T0 + 3);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 11, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "o2");
        assert_int_equal(store_sample_put(s, sample_at(T0 + 2000, 2), 0, M0), 0);
        assert_int_equal(store_last_sample(s, got), 0);
        assert_int_equal(got->oldest_open_accepted_at, T0 + 2); /* o2, in_flight */
        /* the backlog by state, counted by the store in the same statement */
        assert_int_equal(got->backlog[OP_MANUAL], 1);
        assert_int_equal(got->backlog[OP_IN_FLIGHT], 1);
        assert_int_equal(got->backlog[OP_PENDING], 1);
        assert_int_equal(got->backlog[OP_RETRY_WAIT], 0);
        assert_int_equal(got->backlog[OP_UNKNOWN], 0);
        assert_int_equal(got->backlog[OP_SUCCEEDED], 0);

        /* the same `at` replaces; a long figures text survives whole */
        {
                struct exit_sample *x = sample_at(T0 + 2000, 7);

                memset(x->figures, 'f', sizeof(x->figures) - 1);
                x->figures[0] = '\'';
                x->figures[1] = '\\';
                x->figures[sizeof(x->figures) - 1] = '\0';
                assert_int_equal(store_sample_put(s, x, 0, M0), 0);
                assert_int_equal(store_last_sample(s, got), 0);
                assert_int_equal(got->starts, 7);
                assert_memory_equal(got->figures, x->figures, sizeof(x->figures));
        }
        assert_int_equal(store_list_samples(s, 0, 100, on_sample, &seen), 0);
        assert_int_equal(seen.n, 2);

        /* more samples, then list since/limit, oldest first */
        for (unsigned i = 3; i <= 6; i++)
                assert_int_equal(store_sample_put(s, sample_at(T0 + i * 1000, i), 0, M0), 0);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_samples(s, T0 + 2000, 3, on_sample, &seen), 0);
        assert_int_equal(seen.n, 3);
        assert_int_equal(seen.at[0], T0 + 3000);
        assert_int_equal(seen.at[2], T0 + 5000);
        memset(&seen, 0, sizeof(seen));
        seen.stop_after = 2;
        assert_int_equal(store_list_samples(s, 0, 100, on_sample, &seen), 42);
        assert_int_equal(seen.n, 2);

        /* pruning: samples before keep_after go, in the same transaction */
        assert_int_equal(store_sample_put(s, sample_at(T0 + 7000, 8), T0 + 5000, M0), 0);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_samples(other, 0, 100, on_sample, &seen), 0);
        assert_int_equal(seen.n, 3);
        assert_int_equal(seen.at[0], T0 + 5000);
        assert_int_equal(seen.at[2], T0 + 7000);
        assert_int_equal(store_last_sample(other, got), 0);
        assert_int_equal(got->at, T0 + 7000);
        assert_int_equal(got->starts, 8);
        free(got);
        store_close(other);
        store_close(s);
}

/* Only the newest minute of a share's samples keeps its figures text; the
 * counts stay. */
static void test_samples_figures_kept_a_minute(void **state)
{
        struct store *s = open_store();
        struct exit_sample *got = calloc(1, sizeof(*got));
        struct exit_sample *x;

        (void)state;
        assert_non_null(got);
        assert_int_equal(store_sample_put(s, sample_at(T0, 5), 0, M0), 0);
        x = sample_at(T0, 6);
        x->share = 1;
        assert_int_equal(store_sample_put(s, x, 0, M0), 0);
        /* share 0 a minute and a half later: its own old figures go */
        assert_int_equal(store_sample_put(s, sample_at(T0 + 90000, 7), 0, M0), 0);
        assert_int_equal(store_last_sample(s, got), 0);
        assert_string_equal(got->figures, "{\"starts\":7}");
        {
                struct sample_all all = {0};
                assert_int_equal(store_list_samples(s, 0, 10, on_sample_all, &all), 0);
                assert_int_equal(all.n, 3);
                assert_int_equal(all.x[0].share, 0);
                assert_string_equal(all.x[0].figures, "");
                assert_int_equal(all.x[0].starts, 5); /* the counts are kept */
                assert_int_equal(all.x[1].share, 1);
                assert_string_equal(all.x[1].figures, "{\"starts\":6}"); /* another share's */
                assert_string_equal(all.x[2].figures, "{\"starts\":7}");
        }
        free(got);
        store_close(s);
}

struct refusals_seen {
        unsigned n;
        tg_wall_ms at[8];
        unsigned refused[8];
};

static int on_refusal(const struct refusal_second *r, void *userdata)
{
        struct refusals_seen *seen = userdata;

        if (seen->n < 8) {
                seen->at[seen->n] = r->at;
                seen->refused[seen->n] = r->refused;
        }
        seen->n++;
        return 0;
}

/* Admission refusals per second: added up, listed oldest first, pruned. */
static void test_refusals(void **state)
{
        struct store *s = open_store();
        struct store *other = open_store();
        struct refusals_seen seen = {0};

        (void)state;
        assert_int_equal(store_refusals_add(s, T0 + 1, 1, 0), TG_EINVAL); /* not a second */
        assert_int_equal(store_refusals_add(s, T0, 0, 0), 0);             /* nothing to add */
        assert_int_equal(store_list_refusals(other, 0, 10, on_refusal, &seen), 0);
        assert_int_equal(seen.n, 0);
        assert_int_equal(store_refusals_add(s, T0, 2, 0), 0);
        assert_int_equal(store_refusals_add(s, T0, 3, 0), 0);
        assert_int_equal(store_refusals_add(s, T0 + 2000, 1, 0), 0);
        assert_int_equal(store_list_refusals(other, 0, 10, on_refusal, &seen), 0);
        assert_int_equal(seen.n, 2);
        assert_int_equal(seen.at[0], T0);
        assert_int_equal(seen.refused[0], 5);
        assert_int_equal(seen.at[1], T0 + 2000);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_refusals(other, T0, 10, on_refusal, &seen), 0);
        assert_int_equal(seen.n, 1); /* at > since */
        /* pruning in the same transaction */
        assert_int_equal(store_refusals_add(s, T0 + 5000, 4, T0 + 1000), 0);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_refusals(other, 0, 10, on_refusal, &seen), 0);
        assert_int_equal(seen.n, 2);
        assert_int_equal(seen.at[0], T0 + 2000);
        assert_int_equal(seen.refused[1], 4);
        store_close(other);
        store_close(s);
}

/* Samples of several shares: the key is (at, share). */
struct share_walk {
        unsigned n;
        tg_wall_ms last_at;
        int64_t last_share;
        bool ordered; /* by at, then share, no row twice */
        unsigned starts_sum;
};

static int on_share_sample(const struct exit_sample *x, void *userdata)
{
        struct share_walk *w = userdata;

        if (w->n > 0 && !(x->at > w->last_at || (x->at == w->last_at && x->share > w->last_share)))
                w->ordered = false;
        w->last_at = x->at;
        w->last_share = x->share;
        w->starts_sum += x->starts;
        w->n++;
        return 0;
}

/* A large backlog is counted less often: the count walks an index entry
 * per row, so 30,000 pending are counted again only after 1.5 s, and the
 * samples in between carry the last counts (a small backlog is counted for
 * every sample: test_samples). */
static void test_samples_large_backlog_counted_less_often(void **state)
{
        struct store *s = open_store();
        struct exit_sample *got = calloc(1, sizeof(*got));
        char sql[1024];

        (void)state;
        assert_non_null(got);
        if (fx_is_sqlite)
                snprintf(sql, sizeof(sql),
                         "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                         "WHERE i < 30000) INSERT INTO operations (operation_id, payment_id, "
                         "amount, currency, state, attempt_limit, query_limit, accepted_at, "
                         "deadline_at, updated_at, source) SELECT 'bulk-' || i, 'pay-' || i, "
                         "1000, 'TWD', 'pending', 3, 20, %lld + i, %lld + i + 900000, %lld + i, "
                         "'api' FROM n",
                         T0, T0, T0);
        else if (fx_is_pg)
                snprintf(sql, sizeof(sql),
                         "INSERT INTO operations (operation_id, payment_id, amount, currency, "
                         "state, attempt_limit, query_limit, accepted_at, deadline_at, "
                         "updated_at, source) SELECT 'bulk-' || i, 'pay-' || i, "
                         "1000, 'TWD', 'pending', 3, 20, %lld + i, %lld + i + 900000, "
                         "%lld + i, 'api' FROM generate_series(1, 30000) AS i",
                         T0, T0, T0);
        else
                snprintf(sql, sizeof(sql),
                         "INSERT INTO operations (operation_id, payment_id, amount, currency, "
                         "state, attempt_limit, query_limit, accepted_at, deadline_at, "
                         "updated_at, source) SELECT CONCAT('bulk-', seq), CONCAT('pay-', seq), "
                         "1000, 'TWD', 'pending', 3, 20, %lld + seq, %lld + seq + 900000, "
                         "%lld + seq, 'api' FROM seq_1_to_30000",
                         T0, T0, T0);
        assert_false(raw(sql).refused);
        assert_int_equal(store_sample_put(s, sample_at(T0 + 1000, 1), 0, M0), 0);
        assert_int_equal(store_last_sample(s, got), 0);
        assert_int_equal(got->backlog[OP_PENDING], 30000);
        /* one more: the next sample, at once, carries the last count */
        accept_new(s, "one-more", T0 + 1500);
        assert_int_equal(store_sample_put(s, sample_at(T0 + 2000, 1), 0, M0), 0);
        assert_int_equal(store_last_sample(s, got), 0);
        assert_int_equal(got->backlog[OP_PENDING], 30000);
        /* 1.4 s later still the last count; 1.5 s later it is counted again */
        assert_int_equal(store_sample_put(s, sample_at(T0 + 2500, 1), 0, M0 + 1400 * TG_NS_PER_MS),
                         0);
        assert_int_equal(store_last_sample(s, got), 0);
        assert_int_equal(got->backlog[OP_PENDING], 30000);
        assert_int_equal(store_sample_put(s, sample_at(T0 + 3000, 1), 0, M0 + 1600 * TG_NS_PER_MS),
                         0);
        assert_int_equal(store_last_sample(s, got), 0);
        assert_int_equal(got->backlog[OP_PENDING], 30001);
        free(got);
        store_close(s);
}

static void test_samples_per_share(void **state)
{
        struct store *s = open_store();
        struct store *other = open_store();
        struct exit_sample *got = calloc(1, sizeof(*got));
        struct exit_sample *x;
        struct share_walk w = {.ordered = true};

        (void)state;
        assert_non_null(got);
        /* two shares in the same second, even at the same ms: both kept */
        x = sample_at(T0 + 1000, 3);
        x->share = 0;
        assert_int_equal(store_sample_put(s, x, 0, M0), 0);
        x = sample_at(T0 + 1000, 4);
        x->share = 1;
        assert_int_equal(store_sample_put(s, x, 0, M0), 0);
        assert_int_equal(store_list_samples(other, 0, 100, on_share_sample, &w), 0);
        assert_int_equal(w.n, 2);
        assert_true(w.ordered);
        assert_int_equal(w.starts_sum, 7);
        /* the same (at, share) replaces only that share's sample */
        x = sample_at(T0 + 1000, 9);
        x->share = 1;
        assert_int_equal(store_sample_put(s, x, 0, M0), 0);
        memset(&w, 0, sizeof(w));
        w.ordered = true;
        assert_int_equal(store_list_samples(other, 0, 100, on_share_sample, &w), 0);
        assert_int_equal(w.n, 2);
        assert_int_equal(w.starts_sum, 12);
        /* the newest: the highest share among equal at */
        assert_int_equal(store_last_sample(other, got), 0);
        assert_int_equal(got->at, T0 + 1000);
        assert_int_equal(got->share, 1);
        assert_int_equal(got->starts, 9);
        /* more shares at one `at` than a backend's page: none lost or
         * repeated where a page ends, and limit still counts rows */
        for (unsigned k = 0; k < 70; k++) {
                x = sample_at(T0 + 2000, 1);
                x->share = k;
                assert_int_equal(store_sample_put(s, x, 0, M0), 0);
        }
        memset(&w, 0, sizeof(w));
        w.ordered = true;
        assert_int_equal(store_list_samples(other, T0 + 1000, 1000, on_share_sample, &w), 0);
        assert_int_equal(w.n, 70);
        assert_true(w.ordered);
        memset(&w, 0, sizeof(w));
        w.ordered = true;
        assert_int_equal(store_list_samples(other, 0, 66, on_share_sample, &w), 0);
        assert_int_equal(w.n, 66);
        assert_true(w.ordered);
        assert_int_equal(store_last_sample(other, got), 0);
        assert_int_equal(got->share, 69);
        /* pruning goes by at, every share */
        x = sample_at(T0 + 3000, 1);
        assert_int_equal(store_sample_put(s, x, T0 + 2000, M0), 0);
        memset(&w, 0, sizeof(w));
        w.ordered = true;
        assert_int_equal(store_list_samples(other, 0, 1000, on_share_sample, &w), 0);
        assert_int_equal(w.n, 71);
        free(got);
        store_close(other);
        store_close(s);
}

/* ---- operations by state ------------------------------------------------------------ */

struct state_walk {
        enum op_state want;
        unsigned n;
        int64_t last_id;
        int64_t tenth_id;
        bool ordered, in_state;
        unsigned stop_after;
};

static int on_state_op(const struct op_record *op, void *userdata)
{
        struct state_walk *w = userdata;

        if (w->n > 0 && op->id <= w->last_id)
                w->ordered = false;
        if (op->state != w->want)
                w->in_state = false;
        w->last_id = op->id;
        w->n++;
        if (w->n == 10)
                w->tenth_id = op->id;
        return w->stop_after && w->n >= w->stop_after ? 42 : 0;
}

static struct state_walk walk_state(struct store *s, enum op_state state, int64_t after,
                                    unsigned limit, int want_rc)
{
        struct state_walk w = {.want = state, .ordered = true, .in_state = true};

        assert_int_equal(store_list_state(s, state, after, limit, on_state_op, &w), want_rc);
        assert_true(w.ordered);
        assert_true(w.in_state);
        return w;
}

static void test_list_state(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct state_walk w;
        char id[32];

        (void)state;
        /* 140 sent: every other one unknown, the rest waiting to retry (more
         * than a backend's page of each), then two pending */
        for (int i = 0; i < 140; i++) {
                snprintf(id, sizeof(id), "st-%03d", i);
                accept_new(s, id, T0 + i);
        }
        for (int i = 0; i < 140; i++)
                drive(s, STORE_GROUP_FIRST, epoch, T0 + 1000 + i,
                      i % 2 ? TG_CLASS_RETRYABLE : TG_CLASS_UNKNOWN,
                      i % 2 ? OP_RETRY_WAIT : OP_UNKNOWN, T0 + 100000000);
        accept_new(s, "st-p1", T0 + 2000);
        accept_new(s, "st-p2", T0 + 2001);

        w = walk_state(s, OP_UNKNOWN, 0, 1000, 0);
        assert_int_equal(w.n, 70);
        w = walk_state(s, OP_RETRY_WAIT, 0, 1000, 0);
        assert_int_equal(w.n, 70);
        w = walk_state(s, OP_PENDING, 0, 1000, 0);
        assert_int_equal(w.n, 2);
        w = walk_state(s, OP_SUCCEEDED, 0, 1000, 0);
        assert_int_equal(w.n, 0);
        /* paging: at most limit, then on from the last id seen */
        w = walk_state(s, OP_UNKNOWN, 0, 10, 0);
        assert_int_equal(w.n, 10);
        w = walk_state(s, OP_UNKNOWN, w.last_id, 1000, 0);
        assert_int_equal(w.n, 60);
        /* fn stops the walk with its code */
        {
                struct state_walk stop = {
                    .want = OP_UNKNOWN, .ordered = true, .in_state = true, .stop_after = 3};
                assert_int_equal(store_list_state(s, OP_UNKNOWN, 0, 1000, on_state_op, &stop), 42);
                assert_int_equal(stop.n, 3);
        }
        assert_int_equal(store_list_state(s, (enum op_state)OP_STATE_COUNT, 0, 10, on_state_op, &w),
                         TG_EINVAL);
        assert_int_equal(store_list_state(s, OP_UNKNOWN, 0, 10, NULL, NULL), TG_EINVAL);
        store_close(s);
}

/* ---- shares of the account quota ----------------------------------------------- */

/* ---- provider accounts (issue 26) ---------------------------------------- */

static struct op_record accept_in(struct store *s, const char *id, const char *account,
                                  tg_wall_ms at)
{
        struct policy_config c = limits();
        struct refund_request r = req(id, "pay-1", 1000);
        struct op_record op;
        bool created = false;

        snprintf(r.account, sizeof(r.account), "%s", account);
        assert_int_equal(store_accept(s, &r, at, &c, &created, &op), 0);
        assert_true(created);
        return op;
}

/* Two accounts in one store: each operation keeps its account, the same
 * operation_id in another account is refused (docs/design.md, "Accounts"),
 * and a handle serving one account claims, owns, holds and samples only
 * that account's: another account's backlog, owner, hold and samples are
 * not its. */
static void test_accounts(void **state)
{
        struct store *a = open_store(); /* serves default */
        struct store *b = open_store();
        struct policy_config c = limits();
        struct refund_request r = req("eu-1", "pay-1", 1000);
        struct op_record op, got;
        struct call_record call;
        struct exit_sample *x = calloc(1, sizeof(*x));
        tg_wall_ms next = 0, until = 0;
        bool created = true, pending = false;
        int64_t ea, eb;

        (void)state;
        assert_non_null(x);
        assert_string_equal(store_account(a), "default");
        assert_int_equal(store_use_account(b, "EU"), TG_EINVAL);
        assert_int_equal(store_use_account(b, ""), TG_EINVAL);
        assert_int_equal(store_use_account(b, "eu"), 0);
        assert_string_equal(store_account(b), "eu");

        /* intake: the account is part of the request */
        op = accept_in(a, "eu-1", "eu", 1000);
        assert_string_equal(op.req.account, "eu");
        op = accept_in(a, "def-1", "", 2000);
        assert_string_equal(op.req.account, "default");
        snprintf(r.account, sizeof(r.account), "us");
        assert_int_equal(store_accept(a, &r, 3000, &c, &created, &op), TG_ECONFLICT);
        snprintf(r.account, sizeof(r.account), "eu");
        assert_int_equal(store_accept(a, &r, 3000, &c, &created, &op), 0);
        assert_false(created);
        snprintf(r.account, sizeof(r.account), "Bad!");
        assert_int_equal(store_accept(a, &r, 3000, &c, &created, &op), TG_EINVAL);
        assert_string_equal(get_op(b, "eu-1").req.account, "eu");

        /* ownership per account: both are share 0's owner, each of its own */
        ea = acquire(a);
        eb = acquire(b);
        assert_true(eb > ea);
        assert_int_equal(store_use_account(b, "us"), TG_ESTATE);

        /* picks per account: the older eu operation is not default's */
        assert_int_equal(store_next_due(a, &next, &pending), 0);
        assert_true(pending);
        assert_int_equal(claim(a, STORE_GROUP_FIRST, ea, 5000, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "def-1");
        assert_int_equal(claim(a, STORE_GROUP_FIRST, ea, 5001, &op, &call), TG_ENOTFOUND);
        assert_int_equal(store_next_due(a, &next, &pending), 0);
        assert_false(pending);
        /* a claim under another account's epoch is fenced */
        assert_int_equal(claim(a, STORE_GROUP_FIRST, eb, 5002, &op, &call), TG_EFENCED);
        assert_int_equal(claim(b, STORE_GROUP_FIRST, eb, 5003, &op, &call), 0);
        assert_string_equal(op.req.operation_id, "eu-1");
        got = get_op(a, "eu-1");
        assert_int_equal(got.state, OP_IN_FLIGHT);
        assert_string_equal(got.req.account, "eu");

        /* a hold is its account's */
        assert_int_equal(store_hold_raise(b, 90000), 0);
        assert_int_equal(store_hold_get(b, &until), 0);
        assert_int_equal(until, 90000);
        assert_int_equal(store_hold_get(a, &until), 0);
        assert_int_equal(until, 0);

        /* samples are their account's */
        *x = *sample_at(10000, 7);
        x->epoch = eb;
        assert_int_equal(store_sample_put(b, x, 0, 0), 0);
        assert_int_equal(store_last_sample(a, x), TG_ENOTFOUND);
        assert_int_equal(store_last_sample(b, x), 0);
        assert_int_equal(x->starts, 7);

        /* a new owner of default recovers default's in-flight rows only */
        store_close(a);
        a = open_store();
        ea = acquire(a);
        {
                unsigned n = 99;

                assert_int_equal(store_recover(a, ea, &c, 6000, &n), 0);
                assert_int_equal(n, 1);
        }
        assert_int_equal(get_op(a, "eu-1").state, OP_IN_FLIGHT);
        assert_int_equal(get_op(a, "def-1").state, OP_UNKNOWN);
        free(x);
        store_close(b);
        store_close(a);
}

/* The backlog by state of a sample the owner of `epoch` writes through s. */
static void sampled_backlog(struct store *s, int64_t epoch, uint64_t by[OP_STATE_COUNT])
{
        struct exit_sample *x = calloc(1, sizeof(*x));

        assert_non_null(x);
        *x = *sample_at(T0 + 30, 1);
        x->epoch = epoch;
        assert_int_equal(store_sample_put(s, x, 0, 0), 0);
        assert_int_equal(store_last_sample(s, x), 0);
        for (int i = 0; i < OP_STATE_COUNT; i++)
                by[i] = x->backlog[i];
        free(x);
}

/* Seen per account (issue 26 §6): the call log and the manual queue filter
 * by account (NULL: every account), and one account's backlog is counted
 * whatever the handle serves; another account's rows never count. */
static void test_accounts_seen(void **state)
{
        struct store *a = open_store(); /* serves default */
        struct store *b = open_store();
        struct store_manual_filter f = {.reason = MANUAL_NONE, .who = STORE_ASSIGNEE_ANY};
        struct seen seen = {0};
        uint64_t by[OP_STATE_COUNT];
        int64_t ea, eb;

        (void)state;
        assert_int_equal(store_use_account(b, "eu"), 0);
        ea = acquire(a);
        eb = acquire(b);
        /* default: two cases in manual and one pending; eu: one case in
         * manual and three pending; us: one pending */
        accept_in(a, "d-1", "default", T0);
        accept_in(a, "d-2", "default", T0 + 1);
        accept_in(a, "e-1", "eu", T0 + 2);
        accept_in(a, "d-3", "default", T0 + 3);
        for (int i = 2; i <= 4; i++) {
                char id[16];

                snprintf(id, sizeof(id), "e-%d", i);
                accept_in(a, id, "eu", T0 + 3 + i);
        }
        accept_in(a, "u-1", "us", T0 + 9);
        drive(a, STORE_GROUP_FIRST, ea, T0 + 10, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        drive(b, STORE_GROUP_FIRST, eb, T0 + 11, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        drive(a, STORE_GROUP_FIRST, ea, T0 + 12, TG_CLASS_UNKNOWN, OP_MANUAL, 0);

        /* the call log: one account's calls, in id order */
        assert_int_equal(store_list_account_calls(a, "eu", 0, 10, on_call, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.calls[0].operation_id, "e-1");
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_account_calls(b, "default", 0, 10, on_call, &seen), 0);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.calls[0].operation_id, "d-1");
        assert_string_equal(seen.calls[1].operation_id, "d-2");
        /* after the first: the filter holds past the cursor */
        {
                int64_t after = seen.calls[0].id;

                memset(&seen, 0, sizeof(seen));
                assert_int_equal(store_list_account_calls(a, "default", after, 10, on_call, &seen),
                                 0);
                assert_int_equal(seen.n, 1);
                assert_string_equal(seen.calls[0].operation_id, "d-2");
        }
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_account_calls(a, NULL, 0, 10, on_call, &seen), 0);
        assert_int_equal(seen.n, 3);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_account_calls(a, "us", 0, 10, on_call, &seen), 0);
        assert_int_equal(seen.n, 0);
        assert_int_equal(store_list_account_calls(a, "Bad!", 0, 10, on_call, &seen), TG_EINVAL);

        /* the manual queue: one account's cases */
        f.account = "eu";
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_manual_filtered(a, 0, &f, 10, on_op, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.op_ids[0], "e-1");
        f.account = "default";
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_manual_filtered(b, 0, &f, 10, on_op, &seen), 0);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.op_ids[0], "d-1");
        assert_string_equal(seen.op_ids[1], "d-2");
        /* with the other filters */
        f.who = STORE_ASSIGNEE_NONE;
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_manual_filtered(b, 0, &f, 1, on_op, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.op_ids[0], "d-1");
        f.who = STORE_ASSIGNEE_ANY;
        f.account = NULL;
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_manual_filtered(a, 0, &f, 10, on_op, &seen), 0);
        assert_int_equal(seen.n, 3);
        f.account = "us";
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_list_manual_filtered(a, 0, &f, 10, on_op, &seen), 0);
        assert_int_equal(seen.n, 0);
        f.account = "Bad!";
        assert_int_equal(store_list_manual_filtered(a, 0, &f, 10, on_op, &seen), TG_EINVAL);

        /* one account's backlog, read through either handle */
        assert_int_equal(store_account_backlog(a, "eu", by), 0);
        assert_int_equal(by[OP_PENDING], 3);
        assert_int_equal(by[OP_MANUAL], 1);
        assert_int_equal(by[OP_IN_FLIGHT] + by[OP_RETRY_WAIT] + by[OP_UNKNOWN], 0);
        assert_int_equal(store_account_backlog(b, "default", by), 0);
        assert_int_equal(by[OP_PENDING], 1);
        assert_int_equal(by[OP_MANUAL], 2);
        assert_int_equal(store_account_backlog(b, "us", by), 0);
        assert_int_equal(by[OP_PENDING], 1);
        assert_int_equal(by[OP_MANUAL], 0);
        /* an in-flight claim is open: counted under its account */
        {
                struct op_record op;
                struct call_record call;

                assert_int_equal(claim(b, STORE_GROUP_FIRST, eb, T0 + 20, &op, &call), 0);
        }
        assert_int_equal(store_account_backlog(a, "eu", by), 0);
        assert_int_equal(by[OP_PENDING], 2);
        assert_int_equal(by[OP_IN_FLIGHT], 1);
        assert_int_equal(store_account_backlog(a, "nobody", by), 0);
        for (int i = 0; i < OP_STATE_COUNT; i++)
                assert_int_equal(by[i], 0);
        assert_int_equal(store_account_backlog(a, "Bad!", by), TG_EINVAL);
        assert_int_equal(store_account_backlog(a, NULL, by), TG_EINVAL);
        /* a sample's backlog is its exit's account's */
        sampled_backlog(b, eb, by);
        assert_int_equal(by[OP_PENDING], 2);
        assert_int_equal(by[OP_IN_FLIGHT], 1);
        assert_int_equal(by[OP_MANUAL], 1);
        sampled_backlog(a, ea, by);
        assert_int_equal(by[OP_PENDING], 1);
        assert_int_equal(by[OP_IN_FLIGHT], 0);
        assert_int_equal(by[OP_MANUAL], 2);
        store_close(b);
        store_close(a);
}

static void test_shares(void **state)
{
        struct store *a = open_store();
        struct store *b = open_store();
        struct store *c = open_store();
        struct store *d = open_store();
        struct store_split two = {.shares = 2, .starts_per_second = 10.0, .max_in_flight = 4};
        struct store_split one = {.shares = 1, .starts_per_second = 10.0, .max_in_flight = 4};
        struct store_split got;
        struct policy_config cfg = limits();
        struct op_record op1, op2, op;
        struct call_record call1, call2, call;
        struct settle_args sa;
        unsigned ka = 9, kb = 9, kc = 9, kd = 9, n = 0;
        int64_t ea = 0, eb = 0, ec = 0, ed = 0;

        (void)state;
        assert_int_equal(store_split_get(a, &got), TG_ENOTFOUND);
        assert_int_equal(store_share_acquire(a, &two, &ka, &ea), 0);
        assert_int_equal(store_share_acquire(b, &two, &kb, &eb), 0);
        assert_true(ka < 2 && kb < 2 && ka != kb);
        assert_true(eb > ea);
        assert_int_equal(store_owner_check(a), 0);
        assert_int_equal(store_owner_check(b), 0);
        /* every share held: a standby */
        assert_int_equal(store_share_acquire(c, &two, &kc, &ec), TG_ELOCKED);
        assert_int_equal(kc, 9);
        assert_int_equal(store_split_get(c, &got), 0);
        assert_int_equal(got.shares, 2);
        assert_int_equal(got.max_in_flight, 4);
        assert_true(got.starts_per_second > 9.999 && got.starts_per_second < 10.001);
        /* the standby says it wants a share: every owner sees the count move,
         * and a put of the same split (never made while shares live) or a
         * split compare ignores it */
        int64_t want0 = got.want_seq;
        assert_int_equal(store_share_want(c), 0);
        assert_int_equal(store_share_want(c), 0);
        assert_int_equal(store_split_get(a, &got), 0);
        assert_true(got.want_seq == want0 + 2);
        assert_true(store_split_same(&got, &two));
        /* another split while shares of this one are held: refused */
        assert_int_equal(store_share_acquire(d, &one, &kd, &ed), TG_ECONFLICT);
        assert_int_equal(store_owner_acquire(d, &ed), TG_ECONFLICT);
        assert_int_equal(ed, 0);

        /* each share claims under its own epoch */
        accept_new(a, "s1", T0);
        accept_new(a, "s2", T0 + 1);
        assert_int_equal(claim(a, STORE_GROUP_FIRST, ea, T0 + 10, &op1, &call1), 0);
        assert_int_equal(claim(b, STORE_GROUP_FIRST, eb, T0 + 11, &op2, &call2), 0);
        assert_string_equal(op1.req.operation_id, "s1");
        assert_string_equal(op2.req.operation_id, "s2");

        /* a's holder dies: c takes that share under a newer epoch and
         * recovers only that share's in-flight operation */
        store_close(a);
        assert_int_equal(store_share_acquire(c, &two, &kc, &ec), 0);
        assert_int_equal(kc, ka);
        assert_true(ec > eb);
        assert_int_equal(store_owner_check(b), 0); /* another share's takeover */
        assert_int_equal(store_recover(c, ec, &cfg, T0 + 3000, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(get_op(c, "s1").state, OP_UNKNOWN);
        assert_int_equal(get_op(c, "s2").state, OP_IN_FLIGHT);
        /* the dead holder's epoch is fenced; the live share's is not */
        accept_new(c, "s3", T0 + 2);
        assert_int_equal(claim(c, STORE_GROUP_FIRST, ea, T0 + 3001, &op, &call), TG_EFENCED);
        sa = settle_args_for(&op2, &call2, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, T0 + 3002, 0);
        assert_int_equal(store_settle(b, &sa), 0);
        assert_int_equal(get_op(c, "s2").state, OP_SUCCEEDED);

        /* once nobody holds a share, a new split replaces the old one */
        store_owner_release(b);
        store_owner_release(c);
        assert_int_equal(store_share_acquire(d, &one, &kd, &ed), 0);
        assert_int_equal(kd, 0);
        assert_true(ed > ec);
        assert_int_equal(store_split_get(b, &got), 0);
        assert_int_equal(got.shares, 1);
        assert_int_equal(store_share_acquire(b, &two, &kb, &eb), TG_ECONFLICT);
        store_close(b);
        store_close(c);
        store_close(d);
}

/* ---- main --------------------------------------------------------------------- */

/* ---- claims ahead: batches and releases -------------------------------------------- */

/* n claims of a batch under epoch at now, starting with the first group,
 * request ids "<prefix>-<i>". */
static void batch_args(struct claim_args *a, unsigned n, int64_t epoch, tg_wall_ms now,
                       const char *prefix)
{
        memset(a, 0, sizeof(*a) * n);
        for (unsigned i = 0; i < n; i++) {
                a[i].group = STORE_GROUP_FIRST;
                a[i].epoch = epoch;
                a[i].now = now;
                a[i].in_flight_at_start = i + 1;
                snprintf(a[i].request_id, sizeof(a[i].request_id), "%s-%u", prefix, i);
        }
}

/* Several claims in one transaction take the groups in turn exactly as
 * single claims would, each with its own request id and call row. */
static void test_claim_batch(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct claim_args a[4];
        struct op_record ops[4];
        struct call_record calls[4];
        enum store_group turn = STORE_GROUP_FIRST;
        unsigned n = 0;

        (void)state;
        accept_new(s, "b-first-1", T0);
        accept_new(s, "b-first-2", T0 + 1);
        accept_new(s, "b-again", T0 + 2);
        /* b-again: one POST, retryable, due now */
        {
                struct op_record op;
                struct call_record call;
                struct settle_args sa;

                assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 3, &op, &call), 0);
                assert_string_equal(op.req.operation_id, "b-first-1");
                sa = settle_args_for(&op, &call, TG_CLASS_RETRYABLE, OP_RETRY_WAIT, T0 + 4, T0 + 5);
                assert_int_equal(store_settle(s, &sa), 0);
        }
        batch_args(a, 4, epoch, T0 + 10, "batch");
        assert_int_equal(store_claim_batch(s, a, 4, &turn, ops, calls, &n), 0);
        /* first group: b-first-2; then again: b-first-1 (its retry); then
         * first: b-again; nothing left */
        assert_int_equal(n, 3);
        assert_string_equal(ops[0].req.operation_id, "b-first-2");
        assert_string_equal(ops[1].req.operation_id, "b-first-1");
        assert_int_equal(calls[1].kind, TG_KIND_RETRY);
        assert_string_equal(ops[2].req.operation_id, "b-again");
        for (unsigned i = 0; i < n; i++) {
                assert_int_equal(ops[i].state, OP_IN_FLIGHT);
                assert_string_equal(calls[i].request_id, a[i].request_id);
                assert_int_equal(get_op(s, ops[i].req.operation_id).state, OP_IN_FLIGHT);
        }
        assert_int_equal(turn, STORE_GROUP_AGAIN);
        assert_int_equal(store_claim_batch(s, a, 4, &turn, ops, calls, &n), TG_ENOTFOUND);
        store_close(s);
}

/* A batch takes the first group in order, operations accepted in the same
 * millisecond by their order of arrival, none passed over: the picks after
 * the first seek past the row the one before took (MariaDB). */
static void test_claim_batch_keeps_order_within_a_millisecond(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct claim_args a[6];
        struct op_record ops[6];
        struct call_record calls[6];
        enum store_group turn = STORE_GROUP_FIRST;
        const char *ids[5] = {"m-1", "m-2", "m-3", "m-4", "m-5"};
        unsigned n = 0;

        (void)state;
        for (int i = 0; i < 5; i++) /* m-4 and m-5 a millisecond later */
                accept_new(s, ids[i], i < 3 ? T0 : T0 + 1);
        batch_args(a, 6, epoch, T0 + 10, "ms");
        assert_int_equal(store_claim_batch(s, a, 2, &turn, ops, calls, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(ops[0].req.operation_id, "m-1");
        assert_string_equal(ops[1].req.operation_id, "m-2");
        /* a new batch (a new transaction) starts from the head again */
        assert_int_equal(store_claim_batch(s, a + 2, 4, &turn, ops, calls, &n), 0);
        assert_int_equal(n, 3);
        assert_string_equal(ops[0].req.operation_id, "m-3");
        assert_string_equal(ops[1].req.operation_id, "m-4");
        assert_string_equal(ops[2].req.operation_id, "m-5");
        store_close(s);
}

/* A claim given back: the operation as the claim found it, the call row
 * closed as never sent; a release by a fenced owner changes nothing. */
static void test_release(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record op, again;
        struct call_record call, got;

        (void)state;
        accept_new(s, "rel", T0);
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 5, &op, &call), 0);
        assert_int_equal(store_release(s, epoch + 7, op.id, call.id, 1, T0 + 6, "test"),
                         TG_EFENCED);
        assert_int_equal(get_op(s, "rel").state, OP_IN_FLIGHT);
        assert_int_equal(store_release(s, epoch, op.id, call.id, 1, T0 + 6, "deadline"), 0);
        again = get_op(s, "rel");
        assert_int_equal(again.state, OP_PENDING);
        assert_int_equal(again.attempts, 0);
        assert_int_equal(again.key_first_used, 0);
        {
                struct seen seen = {0};

                assert_int_equal(store_list_op_calls(s, op.id, on_call, &seen), 0);
                assert_int_equal(seen.n, 1);
                got = seen.calls[0];
        }
        assert_true(got.ended);
        assert_false(got.sent);
        assert_int_equal(got.cls, TG_CLASS_NOT_SENT);
        assert_string_equal(got.error, "released before send: deadline");
        /* released twice: the call is closed, not ours any more */
        assert_int_equal(store_release(s, epoch, op.id, call.id, 1, T0 + 7, "again"), TG_EFENCED);
        /* and it is claimed again as the same first attempt */
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 8, &op, &call), 0);
        assert_int_equal(call.kind, TG_KIND_FIRST);
        assert_int_equal(call.attempt, 1);
        store_close(s);
}

/* The account-wide hold: raised, never lowered, seen by every handle. */
static void test_account_hold(void **state)
{
        struct store *s = open_store(), *other = open_store();
        tg_wall_ms until = -1;

        (void)state;
        assert_int_equal(store_hold_get(s, &until), 0);
        assert_int_equal(until, 0);
        assert_int_equal(store_hold_raise(s, T0 + 3000), 0);
        assert_int_equal(store_hold_get(other, &until), 0);
        assert_int_equal(until, T0 + 3000);
        assert_int_equal(store_hold_raise(other, T0 + 1000), 0); /* never lowered */
        assert_int_equal(store_hold_get(s, &until), 0);
        assert_int_equal(until, T0 + 3000);
        assert_int_equal(store_hold_raise(other, T0 + 9000), 0);
        assert_int_equal(store_hold_get(s, &until), 0);
        assert_int_equal(until, T0 + 9000);
        store_close(other);
        store_close(s);
}

/* ---- run-time account controls (issue 26 §5) ------------------------------------ */

#define AUDIT_SEEN 8

struct account_audit_seen {
        unsigned n;
        struct account_audit_record rows[AUDIT_SEEN];
};

static int on_account_audit(const struct account_audit_record *rec, void *userdata)
{
        struct account_audit_seen *seen = userdata;

        if (seen->n < AUDIT_SEEN)
                seen->rows[seen->n] = *rec;
        seen->n++;
        return 0;
}

static struct account_audit_seen account_audit(struct store *s, const char *account,
                                               int64_t after_id, unsigned limit)
{
        struct account_audit_seen seen;

        memset(&seen, 0, sizeof(seen));
        assert_int_equal(
            store_list_account_audit(s, account, after_id, limit, on_account_audit, &seen), 0);
        return seen;
}

static struct account_controls controls(double rate, unsigned in_flight, bool paused)
{
        struct account_controls c;

        memset(&c, 0, sizeof(c));
        c.starts_per_second = rate;
        c.max_in_flight = in_flight;
        c.paused = paused;
        return c;
}

static void assert_controls_zero(struct store *s, const char *account)
{
        struct account_controls c;

        memset(&c, 0x5a, sizeof(c));
        assert_int_equal(store_controls_get(s, account, &c), 0);
        assert_true(c.starts_per_second == 0);
        assert_int_equal(c.max_in_flight, 0);
        assert_false(c.paused);
        assert_int_equal(c.changed_at, 0);
        assert_string_equal(c.changed_by, "");
}

/* Set, get (from another handle: committed, and shared by every handle of
 * the store), what was in force before, the audit rows in order with their
 * JSON; accounts kept apart; a restart keeps them. */
static void test_account_controls(void **state)
{
        struct store *s = open_store(), *other = open_store();
        struct account_controls next = controls(12.5, 40, false), got, prev;
        struct account_audit_seen seen;

        (void)state;
        assert_controls_zero(s, "eu");
        assert_controls_zero(s, TG_ACCOUNT_DEFAULT);
        seen = account_audit(s, NULL, 0, 100);
        assert_int_equal(seen.n, 0);

        /* changed_at and changed_by of *next are not the caller's to set */
        next.changed_at = 7;
        snprintf(next.changed_by, sizeof(next.changed_by), "mallory");
        memset(&prev, 0x5a, sizeof(prev));
        assert_int_equal(
            store_controls_set(s, "eu", &next, "set", "ana", "provider asked", T0, &prev), 0);
        assert_true(prev.starts_per_second == 0);
        assert_int_equal(prev.max_in_flight, 0);
        assert_false(prev.paused);
        assert_int_equal(prev.changed_at, 0);
        assert_string_equal(prev.changed_by, "");
        assert_int_equal(store_controls_get(other, "eu", &got), 0);
        assert_true(got.starts_per_second == 12.5);
        assert_int_equal(got.max_in_flight, 40);
        assert_false(got.paused);
        assert_int_equal(got.changed_at, T0);
        assert_string_equal(got.changed_by, "ana");
        assert_controls_zero(other, TG_ACCOUNT_DEFAULT); /* accounts are separate */

        /* the second change, from the other handle: its prev is the first */
        next = controls(0.1, 0, true);
        assert_int_equal(
            store_controls_set(other, "eu", &next, "pause", "bo", NULL, T0 + 1000, &prev), 0);
        assert_true(prev.starts_per_second == 12.5);
        assert_int_equal(prev.max_in_flight, 40);
        assert_false(prev.paused);
        assert_int_equal(prev.changed_at, T0);
        assert_string_equal(prev.changed_by, "ana");
        assert_int_equal(store_controls_get(s, "eu", &got), 0);
        assert_true(got.starts_per_second == 0.1);
        assert_int_equal(got.max_in_flight, 0);
        assert_true(got.paused);
        assert_int_equal(got.changed_at, T0 + 1000);
        assert_string_equal(got.changed_by, "bo");

        /* another account; ret_prev may be NULL */
        next = controls(3, 7, false);
        assert_int_equal(store_controls_set(s, "us-1", &next, "set", "cy", "", T0 + 2000, NULL), 0);
        assert_int_equal(store_controls_get(s, "us-1", &got), 0);
        assert_true(got.starts_per_second == 3);
        assert_int_equal(got.max_in_flight, 7);
        assert_int_equal(store_controls_get(s, "eu", &got), 0);
        assert_true(got.paused);

        /* the trail: every account, oldest first */
        seen = account_audit(other, NULL, 0, 100);
        assert_int_equal(seen.n, 3);
        assert_true(seen.rows[0].id < seen.rows[1].id && seen.rows[1].id < seen.rows[2].id);
        assert_string_equal(seen.rows[0].account, "eu");
        assert_int_equal(seen.rows[0].at, T0);
        assert_string_equal(seen.rows[0].action, "set");
        assert_string_equal(seen.rows[0].principal, "ana");
        assert_string_equal(seen.rows[0].reason, "provider asked");
        assert_string_equal(seen.rows[0].detail,
                            "{\"from\":{\"starts_per_second\":0,\"max_in_flight\":0,"
                            "\"paused\":false},\"to\":{\"starts_per_second\":12.5,"
                            "\"max_in_flight\":40,\"paused\":false}}");
        assert_string_equal(seen.rows[1].account, "eu");
        assert_int_equal(seen.rows[1].at, T0 + 1000);
        assert_string_equal(seen.rows[1].action, "pause");
        assert_string_equal(seen.rows[1].principal, "bo");
        assert_string_equal(seen.rows[1].reason, "");
        assert_string_equal(seen.rows[1].detail,
                            "{\"from\":{\"starts_per_second\":12.5,\"max_in_flight\":40,"
                            "\"paused\":false},\"to\":{\"starts_per_second\":0.1,"
                            "\"max_in_flight\":0,\"paused\":true}}");
        assert_string_equal(seen.rows[2].account, "us-1");
        assert_string_equal(seen.rows[2].detail,
                            "{\"from\":{\"starts_per_second\":0,\"max_in_flight\":0,"
                            "\"paused\":false},\"to\":{\"starts_per_second\":3,"
                            "\"max_in_flight\":7,\"paused\":false}}");
        /* one account's; after an id; at most limit */
        seen = account_audit(s, "eu", 0, 100);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.rows[1].action, "pause");
        seen = account_audit(s, "us-1", 0, 100);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.rows[0].principal, "cy");
        seen = account_audit(s, "nobody", 0, 100);
        assert_int_equal(seen.n, 0);
        int64_t first = account_audit(s, NULL, 0, 1).rows[0].id;
        seen = account_audit(s, NULL, 0, 1);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.rows[0].principal, "ana");
        seen = account_audit(s, NULL, first, 100);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.rows[0].principal, "bo");
        seen = account_audit(s, "us-1", first, 1);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.rows[0].principal, "cy");

        /* a restart keeps them */
        store_close(other);
        store_close(s);
        s = open_store();
        assert_int_equal(store_controls_get(s, "eu", &got), 0);
        assert_true(got.starts_per_second == 0.1);
        assert_true(got.paused);
        assert_string_equal(got.changed_by, "bo");
        assert_int_equal(account_audit(s, NULL, 0, 100).n, 3);
        store_close(s);
}

/* A rate that is not a plain decimal reads back exactly, and says so in the
 * audit row's JSON with digits enough to read back exactly too. */
static void test_account_controls_rate_exact(void **state)
{
        struct store *s = open_store();
        struct account_controls next = controls(1.0 / 3.0, UINT32_MAX, false), got;
        struct account_audit_seen seen;

        (void)state;
        assert_int_equal(store_controls_set(s, "eu", &next, "set", "ana", "", T0, NULL), 0);
        assert_int_equal(store_controls_get(s, "eu", &got), 0);
        assert_true(got.starts_per_second == 1.0 / 3.0);
        assert_int_equal(got.max_in_flight, UINT32_MAX);
        seen = account_audit(s, "eu", 0, 10);
        assert_int_equal(seen.n, 1);
        assert_non_null(strstr(seen.rows[0].detail, "\"to\":{\"starts_per_second\":"
                                                    "0.3333333333333333,\"max_in_flight\":"
                                                    "4294967295,\"paused\":false}"));
        store_close(s);
}

/* Bad input is refused with nothing stored: neither controls nor audit. */
static void test_account_controls_refused(void **state)
{
        struct store *s = open_store();
        struct account_controls ok = controls(5, 5, false), bad, got;
        char long_text[TG_TEXT_MAX + 1], long_action[33], long_account[34];

        (void)state;
        memset(long_text, 'x', sizeof(long_text) - 1);
        long_text[sizeof(long_text) - 1] = '\0'; /* TG_TEXT_MAX bytes: one too many */
        memset(long_action, 'a', sizeof(long_action) - 1);
        long_action[sizeof(long_action) - 1] = '\0'; /* 32 bytes */
        memset(long_account, 'a', sizeof(long_account) - 1);
        long_account[sizeof(long_account) - 1] = '\0'; /* 33 bytes */

        static const char *const accounts[] = {"", "EU", "eu!", "e u", "eu/1"};
        for (size_t i = 0; i < sizeof(accounts) / sizeof(accounts[0]); i++) {
                assert_int_equal(
                    store_controls_set(s, accounts[i], &ok, "set", "ana", "", T0, NULL), TG_EINVAL);
                assert_int_equal(store_controls_get(s, accounts[i], &got), TG_EINVAL);
        }
        assert_int_equal(store_controls_set(s, long_account, &ok, "set", "ana", "", T0, NULL),
                         TG_EINVAL);
        assert_int_equal(store_controls_set(s, NULL, &ok, "set", "ana", "", T0, NULL), TG_EINVAL);
        assert_int_equal(store_controls_set(s, "eu", NULL, "set", "ana", "", T0, NULL), TG_EINVAL);
        static const double rates[] = {-1.0, -1e-300, NAN, INFINITY};
        for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
                bad = controls(rates[i], 5, false);
                assert_int_equal(store_controls_set(s, "eu", &bad, "set", "ana", "", T0, NULL),
                                 TG_EINVAL);
        }
        assert_int_equal(store_controls_set(s, "eu", &ok, "", "ana", "", T0, NULL), TG_EINVAL);
        assert_int_equal(store_controls_set(s, "eu", &ok, NULL, "ana", "", T0, NULL), TG_EINVAL);
        assert_int_equal(store_controls_set(s, "eu", &ok, long_action, "ana", "", T0, NULL),
                         TG_EINVAL);
        assert_int_equal(store_controls_set(s, "eu", &ok, "set", "", "", T0, NULL), TG_EINVAL);
        assert_int_equal(store_controls_set(s, "eu", &ok, "set", NULL, "", T0, NULL), TG_EINVAL);
        assert_int_equal(store_controls_set(s, "eu", &ok, "set", long_text, "", T0, NULL),
                         TG_EINVAL);
        assert_int_equal(store_controls_set(s, "eu", &ok, "set", "ana", long_text, T0, NULL),
                         TG_EINVAL);
        assert_int_equal(store_list_account_audit(s, "EU", 0, 10, on_account_audit, NULL),
                         TG_EINVAL);
        assert_int_equal(store_list_account_audit(s, "eu", 0, 10, NULL, NULL), TG_EINVAL);
        assert_controls_zero(s, "eu");
        assert_int_equal(account_audit(s, NULL, 0, 100).n, 0);

        /* the longest of each is fine: 32-byte account, 31-byte action,
         * 255-byte principal and reason */
        long_account[32] = '\0';
        long_action[31] = '\0';
        long_text[TG_TEXT_MAX - 1] = '\0';
        assert_int_equal(
            store_controls_set(s, long_account, &ok, long_action, long_text, long_text, T0, NULL),
            0);
        struct account_audit_seen seen = account_audit(s, long_account, 0, 10);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.rows[0].account, long_account);
        assert_string_equal(seen.rows[0].action, long_action);
        assert_string_equal(seen.rows[0].principal, long_text);
        assert_string_equal(seen.rows[0].reason, long_text);
        assert_int_equal(store_controls_get(s, long_account, &got), 0);
        assert_string_equal(got.changed_by, long_text);
        store_close(s);
}

/* The change and its audit row commit together: when the audit row cannot
 * be written (its table renamed away under the store), the controls are not
 * changed either; and the account audit trail is append-only. */
static void test_account_controls_atomic_and_append_only(void **state)
{
        struct store *s = open_store();
        struct account_controls first = controls(5, 5, false), next = controls(9, 9, true), got;
        struct account_audit_seen seen;
        char sql[256];

        (void)state;
        assert_int_equal(store_controls_set(s, "eu", &first, "set", "ana", "", T0, NULL), 0);
        assert_false(raw("ALTER TABLE account_audit RENAME TO account_audit_away").refused);
        assert_true(store_controls_set(s, "eu", &next, "set", "bo", "", T0 + 1, NULL) < 0);
        assert_true(store_controls_set(s, "us", &next, "set", "bo", "", T0 + 1, NULL) < 0);
        assert_false(raw("ALTER TABLE account_audit_away RENAME TO account_audit").refused);
        assert_int_equal(store_controls_get(s, "eu", &got), 0);
        assert_true(got.starts_per_second == 5);
        assert_false(got.paused);
        assert_string_equal(got.changed_by, "ana");
        assert_controls_zero(s, "us");
        seen = account_audit(s, NULL, 0, 100);
        assert_int_equal(seen.n, 1);
        /* and the store goes on once the table is back */
        assert_int_equal(store_controls_set(s, "eu", &next, "set", "bo", "", T0 + 2, &got), 0);
        assert_true(got.starts_per_second == 5);
        seen = account_audit(s, NULL, 0, 100);
        assert_int_equal(seen.n, 2);

        snprintf(sql, sizeof(sql), "DELETE FROM account_audit WHERE id = %lld",
                 (long long)seen.rows[0].id);
        expect_refused(sql, "account audit is append-only");
        expect_refused("DELETE FROM account_audit", "account audit is append-only");
        snprintf(sql, sizeof(sql), "UPDATE account_audit SET reason = 'rewritten' WHERE id = %lld",
                 (long long)seen.rows[0].id);
        expect_refused(sql, "account audit is append-only");
        if (fx_is_pg)
                expect_refused("TRUNCATE account_audit", "account audit is append-only");
        seen = account_audit(s, NULL, 0, 100);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.rows[0].reason, "");
        store_close(s);
}

/* ---- the backends' SQL against the transition table ------------------------------- */

/* The stores find due and expired operations with SQL; core/policy.h says
 * which ones they are. Over a grid of operations in every state, with every
 * combination that matters (deadline passed / not / none, due / not yet, key
 * old / young / never used, sent / not, taken in / not, reported pending by
 * the provider / not), each backend's pick
 * order, batches and due summary must give exactly what policy_is_due(),
 * policy_sweep() and the recovery rule give. */

#define GRID_BITS 144
#define GRID_MAX  1152 /* OP_STATE_COUNT x GRID_BITS */
#define GRID_NOW  (T0 + 10LL * 24 * 3600 * 1000)

struct grid {
        struct op_record ops[GRID_MAX];
        unsigned n;
};

struct put_ctx {
        struct op_record *op;
};

static int put_tx(struct store *s, void *ctx)
{
        struct op_record *op = ((struct put_ctx *)ctx)->op;
        int r = s->ops->op_insert(s, op, &op->id);

        return r == 0 ? s->ops->op_put(s, op) : r;
}

static void grid_add(struct store *s, struct grid *g, const struct op_record *op)
{
        struct put_ctx c;

        assert_true(g->n < GRID_MAX);
        g->ops[g->n] = *op;
        c.op = &g->ops[g->n];
        assert_int_equal(s->ops->tx(s, STORE_TX_WRITE, 0, put_tx, &c), 0);
        g->n++;
}

static void grid_fill(struct store *s, struct grid *g, int64_t retention)
{
        const struct policy_config c = limits();
        unsigned k = 0;

        memset(g, 0, sizeof(*g));
        for (int st = 0; st < OP_STATE_COUNT; st++)
                for (int bits = 0; bits < GRID_BITS; bits++) {
                        struct refund_request r;
                        struct op_record op;
                        char id[32];
                        int dl = bits % 3, due = (bits / 3) % 2, key = (bits / 6) % 3;
                        int sent = (bits / 18) % 2, taken = (bits / 36) % 2;
                        int pend = (bits / 72) % 2;

                        snprintf(id, sizeof(id), "g-%d-%d", st, bits);
                        r = req(id, "pay-g", 100);
                        policy_accept(&c, &r, T0 + (int64_t)(k++) * 7, &op);
                        op.state = (enum op_state)st;
                        op.reason = st == OP_MANUAL ? MANUAL_DEADLINE : MANUAL_NONE;
                        op.deadline_at = dl == 0 ? GRID_NOW - 1 : dl == 1 ? GRID_NOW + 1 : 0;
                        op.next_run_at = due ? GRID_NOW : GRID_NOW + 1;
                        op.key_first_used = key == 0   ? GRID_NOW - retention
                                            : key == 1 ? GRID_NOW - retention + 1
                                                       : 0;
                        op.attempts = sent ? 1 : 0;
                        op.attempt_limit = taken ? 3 : 0;
                        op.pending_since = pend ? GRID_NOW - 5000 : 0;
                        op.pending_polls = pend ? 7 : 0;
                        grid_add(s, g, &op);
                }
}

struct pick_all_ctx {
        struct store_pick pick;
        int64_t ids[GRID_MAX];
        unsigned n;
};

/* Picks until nothing is due, taking each picked one out of the way, then
 * rolls everything back: the whole pick order of the backend. */
static int pick_all_tx(struct store *s, void *ctx)
{
        struct pick_all_ctx *c = ctx;
        int r;

        c->n = 0;
        for (;;) {
                struct op_record op;
                int64_t id = 0;

                r = s->ops->op_pick(s, &c->pick, &id);
                if (r == TG_ENOTFOUND)
                        break;
                if (r == 0)
                        r = s->ops->op_get(s, NULL, id, true, &op);
                if (r < 0)
                        return r;
                if (c->n >= GRID_MAX)
                        return TG_ERANGE;
                c->ids[c->n++] = id;
                op.state = OP_SUCCEEDED; /* out of the way, for this transaction */
                r = s->ops->op_put(s, &op);
                if (r < 0)
                        return r;
        }
        return TG_EAGAIN; /* roll back */
}

struct batch_all_ctx {
        struct store_batch batch;
        struct op_record rows[GRID_MAX];
        unsigned n;
};

static int batch_tx(struct store *s, void *ctx)
{
        struct batch_all_ctx *c = ctx;

        c->n = 0;
        return s->ops->op_batch(s, &c->batch, GRID_MAX, c->rows, &c->n);
}

struct due_all_ctx {
        tg_wall_ms next;
        bool pending;
};

static int due_all_tx(struct store *s, void *ctx)
{
        struct due_all_ctx *c = ctx;

        return s->ops->due_summary(s, &c->next, &c->pending);
}

static bool in_ids(const int64_t *ids, unsigned n, int64_t id)
{
        for (unsigned i = 0; i < n; i++)
                if (ids[i] == id)
                        return true;
        return false;
}

static void test_sql_agrees_with_table(void **state)
{
        const int64_t retention = 3600 * 1000;
        struct store *s = open_store();
        struct grid *g = calloc(1, sizeof(*g));
        struct pick_all_ctx *pc = calloc(1, sizeof(*pc));
        struct batch_all_ctx *bc = calloc(1, sizeof(*bc));
        struct due_all_ctx dc;
        tg_wall_ms next = TG_WALL_NEVER;
        bool pending = false;

        (void)state;
        assert_non_null(g);
        assert_non_null(pc);
        assert_non_null(bc);
        grid_fill(s, g, retention);
        /* a pending refund's fields come back as written */
        for (unsigned i = 0; i < g->n; i += 17) {
                struct op_record back = get_op(s, g->ops[i].req.operation_id);

                assert_int_equal(back.pending_since, g->ops[i].pending_since);
                assert_int_equal(back.pending_polls, g->ops[i].pending_polls);
        }

        /* the provider-pending count (the gauge, admission): pending_since set,
         * open for the exit */
        {
                uint64_t want = 0, got = 0;

                for (unsigned i = 0; i < g->n; i++)
                        want += g->ops[i].pending_since > 0 &&
                                !policy_state_is_final(g->ops[i].state) &&
                                g->ops[i].state != OP_MANUAL;
                assert_int_equal(store_provider_pending(s, TG_ACCOUNT_DEFAULT, &got), 0);
                assert_int_equal(got, want);
                assert_true(want > 0);
                assert_int_equal(store_provider_pending(s, "other", &got), 0);
                assert_int_equal(got, 0);
        }

        /* picks: every group, with queries allowed or not (q & 1), POSTs barred
         * or not (q & 2), key check on or off */
        for (int group = 0; group < 2; group++)
                for (int q = 0; q < 4; q++)
                        for (int key = 0; key < 2; key++) {
                                unsigned want = 0, j = 0;

                                memset(pc, 0, sizeof(*pc));
                                pc->pick.group = group ? STORE_GROUP_AGAIN : STORE_GROUP_FIRST;
                                pc->pick.now = GRID_NOW;
                                pc->pick.key_retention_ms = key ? retention : INT64_MAX / 4;
                                pc->pick.queries_allowed = (q & 1) != 0;
                                pc->pick.posts_barred = (q & 2) != 0;
                                assert_int_equal(s->ops->tx(s, STORE_TX_WRITE, 0, pick_all_tx, pc),
                                                 TG_EAGAIN);
                                /* the grid is in acceptance order: the due ones, in
                                 * that order, are the pick order */
                                for (unsigned i = 0; i < g->n; i++) {
                                        struct policy_pick p = {
                                            .group = (enum policy_group)pc->pick.group,
                                            .now = GRID_NOW,
                                            .key_retention_ms = pc->pick.key_retention_ms,
                                            .queries_allowed = (q & 1) != 0,
                                            .posts_barred = (q & 2) != 0};

                                        if (!policy_is_due(&g->ops[i], &p))
                                                continue;
                                        want++;
                                        if (j >= pc->n || pc->ids[j] != g->ops[i].id)
                                                fail_msg("pick group %d q %d key %d: op %s due by "
                                                         "the table is not picked %u-th",
                                                         group, q, key, g->ops[i].req.operation_id,
                                                         j + 1);
                                        j++;
                                }
                                if (pc->n != want)
                                        fail_msg("pick group %d q %d key %d: %u picked, %u due",
                                                 group, q, key, pc->n, want);
                        }

        /* the sweeps' batches */
        for (int kind = 0; kind < 2; kind++) {
                int64_t got[GRID_MAX];
                unsigned want = 0;

                memset(bc, 0, sizeof(*bc));
                bc->batch.kind = kind ? STORE_BATCH_KEY_AGE : STORE_BATCH_DEADLINE;
                bc->batch.now = GRID_NOW;
                bc->batch.key_retention_ms = retention;
                assert_int_equal(s->ops->tx(s, STORE_TX_READ, 0, batch_tx, bc), 0);
                for (unsigned i = 0; i < bc->n; i++)
                        got[i] = bc->rows[i].id;
                for (unsigned i = 0; i < g->n; i++) {
                        const struct op_record *op = &g->ops[i];
                        bool expired =
                            (policy_sources(OP_EV_DEADLINE) & POLICY_STATE_BIT(op->state)) &&
                            op->deadline_at > 0 && op->deadline_at < GRID_NOW;
                        bool hit = kind ? policy_key_too_old(op, GRID_NOW, retention) : expired;
                        struct op_record swept;
                        enum op_event ev;

                        if (in_ids(got, bc->n, op->id) != hit)
                                fail_msg("%s batch and the table disagree on %s (%s)",
                                         kind ? "key-age" : "deadline", op->req.operation_id,
                                         op_state_name(op->state));
                        want += hit;
                        /* and what the sweep does with it is the table's, naming
                         * why: a provider-pending refund's own deadline */
                        if (hit)
                                assert_int_equal(policy_sweep(op, GRID_NOW, retention, &ev, &swept),
                                                 0);
                        if (hit && !kind && !policy_awaits_notification(op))
                                assert_int_equal(swept.reason, op->pending_since > 0
                                                                   ? MANUAL_PENDING_DEADLINE
                                                                   : MANUAL_DEADLINE);
                }
                assert_int_equal(bc->n, want);
        }

        /* the due summary */
        for (unsigned i = 0; i < g->n; i++) {
                const struct op_record *op = &g->ops[i];

                if ((policy_group_states(POLICY_GROUP_AGAIN) & POLICY_STATE_BIT(op->state)) &&
                    op->next_run_at < next)
                        next = op->next_run_at;
                if (policy_group_states(POLICY_GROUP_FIRST) & POLICY_STATE_BIT(op->state))
                        pending = true;
        }
        memset(&dc, 0, sizeof(dc));
        assert_int_equal(s->ops->tx(s, STORE_TX_READ, 0, due_all_tx, &dc), 0);
        assert_int_equal(dc.next, next);
        assert_int_equal(dc.pending, pending);

        free(bc);
        free(pc);
        free(g);
        store_close(s);
}

/* The recovery's batch: in flight, claimed under our share before our epoch,
 * or under a share the split no longer has; never another live share's. */
static void test_recover_batch_agrees(void **state)
{
        const struct policy_config c = limits();
        struct store *s = open_store();
        struct grid *g = calloc(1, sizeof(*g));
        struct batch_all_ctx *bc = calloc(1, sizeof(*bc));
        unsigned k = 0;

        (void)state;
        assert_non_null(g);
        assert_non_null(bc);
        for (int st = 0; st < OP_STATE_COUNT; st++)
                for (int64_t epoch = 1; epoch <= 3; epoch++)
                        for (unsigned share = 0; share < 3; share++) {
                                struct refund_request r;
                                struct op_record op;
                                char id[32];

                                snprintf(id, sizeof(id), "r-%d-%lld-%u", st, (long long)epoch,
                                         share);
                                r = req(id, "pay-r", 100);
                                policy_accept(&c, &r, T0 + (int64_t)(k++), &op);
                                op.state = (enum op_state)st;
                                op.reason = st == OP_MANUAL ? MANUAL_DEADLINE : MANUAL_NONE;
                                op.attempts = 1;
                                op.epoch = epoch;
                                op.share = share;
                                grid_add(s, g, &op);
                        }
        for (unsigned shares = 1; shares <= 3; shares++)
                for (unsigned share = 0; share < shares; share++) {
                        int64_t got[GRID_MAX];

                        memset(bc, 0, sizeof(*bc));
                        bc->batch.kind = STORE_BATCH_RECOVER;
                        bc->batch.epoch = 3;
                        bc->batch.share = share;
                        bc->batch.shares = shares;
                        assert_int_equal(s->ops->tx(s, STORE_TX_READ, 0, batch_tx, bc), 0);
                        for (unsigned i = 0; i < bc->n; i++)
                                got[i] = bc->rows[i].id;
                        for (unsigned i = 0; i < g->n; i++) {
                                const struct op_record *op = &g->ops[i];
                                bool hit =
                                    (policy_sources(OP_EV_TAKEOVER) &
                                     POLICY_STATE_BIT(op->state)) &&
                                    ((op->share == share && op->epoch < 3) || op->share >= shares);

                                if (in_ids(got, bc->n, op->id) != hit)
                                        fail_msg("recover batch (share %u of %u) and the rule "
                                                 "disagree on %s",
                                                 share, shares, op->req.operation_id);
                        }
                }
        free(bc);
        free(g);
        store_close(s);
}

/* The console's reads of the outbox and an operator's re-delivery: the
 * events of one operation; the failed ones (parked, or due after a failed
 * attempt); a re-delivery audited in its account's trail, by the principal,
 * in the same transaction (store_events.h). */
static void test_events_of_op_failed_and_audit(void **state)
{
        struct store *s = open_store();
        struct policy_config c = limits();
        int64_t epoch = acquire(s);
        struct store_event ev[16], one;
        struct account_audit_seen seen;
        struct op_record op, e2;
        unsigned n = 0;

        (void)state;
        accept_new(s, "e1", T0);
        e2 = accept_new(s, "e2", T0 + 1);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 11, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        assert_int_equal(store_operator_resend(s, "e2", "ana", "try", &c, T0 + 20, &op), 0);
        assert_int_equal(store_events_list(s, 0, STORE_EVENTS_ALL, 16, ev, &n), 0);
        assert_int_equal(n, 3);

        /* one operation's: e2 to manual and back out, in id order */
        assert_int_equal(store_events_of_op(s, e2.id, 16, ev + 4, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(ev[4].operation_id, "e2");
        assert_string_equal(ev[5].operation_id, "e2");
        assert_true(ev[5].id > ev[4].id);
        assert_int_equal(store_events_of_op(s, e2.id + 1000, 16, ev + 4, &n), 0);
        assert_int_equal(n, 0);
        assert_int_equal(store_events_of_op(s, 0, 16, ev + 4, &n), TG_EINVAL);

        /* failed: a parked one and a due one after a failed attempt; not a
         * due one never tried, not a delivered one */
        assert_int_equal(store_events_list(s, 0, STORE_EVENTS_FAILED, 16, ev + 8, &n), 0);
        assert_int_equal(n, 0);
        one = ev[0];
        one.delivery = STORE_DELIVERY_PARKED;
        one.attempts = 30;
        snprintf(one.last_error, sizeof(one.last_error), "HTTP 503");
        assert_int_equal(store_event_delivery_put(s, &one), 0);
        one = ev[1];
        one.attempts = 1;
        one.next_at = T0 + 500;
        snprintf(one.last_error, sizeof(one.last_error), "timeout");
        assert_int_equal(store_event_delivery_put(s, &one), 0);
        one = ev[2];
        one.delivery = STORE_DELIVERY_DELIVERED;
        one.attempts = 1;
        one.delivered_at = T0 + 30;
        assert_int_equal(store_event_delivery_put(s, &one), 0);
        assert_int_equal(store_events_list(s, 0, STORE_EVENTS_FAILED, 16, ev + 8, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(ev[8].id, ev[0].id);
        assert_int_equal(ev[9].id, ev[1].id);

        /* a re-delivery: due now, and its audit row names the principal */
        seen = account_audit(s, TG_ACCOUNT_DEFAULT, 0, 10);
        assert_int_equal(seen.n, 0);
        assert_int_equal(store_event_redeliver(s, ev[0].id, "", T0 + 80), TG_EINVAL);
        assert_int_equal(store_event_redeliver(s, ev[0].id, NULL, T0 + 80), TG_EINVAL);
        assert_int_equal(store_event_redeliver(s, ev[0].id, "ops-ann", T0 + 80), 0);
        assert_int_equal(store_event_get(s, ev[0].id, &one), 0);
        assert_int_equal(one.delivery, STORE_DELIVERY_DUE);
        assert_int_equal(one.attempts, 0);
        seen = account_audit(s, TG_ACCOUNT_DEFAULT, 0, 10);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.rows[0].action, "event_redeliver");
        assert_string_equal(seen.rows[0].principal, "ops-ann");
        assert_int_equal(seen.rows[0].at, T0 + 80);
        assert_non_null(strstr(seen.rows[0].detail, "\"operation_id\":\"e1\""));
        assert_non_null(strstr(seen.rows[0].detail, "\"delivery\":\"parked\""));
        /* not found: nothing audited */
        assert_int_equal(store_event_redeliver(s, ev[2].id + 100, "ops-ann", T0 + 81),
                         TG_ENOTFOUND);
        assert_int_equal(account_audit(s, TG_ACCOUNT_DEFAULT, 0, 10).n, 1);
        store_close(s);
}

/* Who submitted an operation is kept with it ('' for nobody) and never
 * changes: a repeat by another submitter finds the first one's. Its events
 * carry it, and the owned list serves an owner its own and the unowned. */
static void test_submitted_by(void **state)
{
        struct store *s = open_store();
        struct policy_config c = limits();
        struct refund_request r = req("own-1", "pay-1", 1000);
        struct store_event ev[8];
        struct op_record op;
        bool created = false;
        unsigned n = 0;

        (void)state;
        accept_new(s, "nobody", T0);
        assert_string_equal(get_op(s, "nobody").req.submitted_by, "");
        snprintf(r.submitted_by, sizeof(r.submitted_by), "shop-a");
        assert_int_equal(store_accept(s, &r, T0 + 1, &c, &created, &op), 0);
        assert_true(created);
        assert_string_equal(op.req.submitted_by, "shop-a");
        snprintf(r.submitted_by, sizeof(r.submitted_by), "shop-b");
        assert_int_equal(store_accept(s, &r, T0 + 2, &c, &created, &op), 0);
        assert_false(created);
        assert_string_equal(op.req.submitted_by, "shop-a");
        assert_string_equal(get_op(s, "own-1").req.submitted_by, "shop-a");
        /* kept through a change of state */
        assert_int_equal(store_cancel(s, "own-1", "shop-a", "", T0 + 3, &op, &created), 0);
        assert_string_equal(get_op(s, "own-1").req.submitted_by, "shop-a");

        /* the events: one each for nobody's, shop-a's and shop-b's */
        r = req("own-2", "pay-1", 1000);
        snprintf(r.submitted_by, sizeof(r.submitted_by), "shop-b");
        assert_int_equal(store_accept(s, &r, T0 + 4, &c, &created, &op), 0);
        assert_int_equal(store_cancel(s, "own-2", "shop-b", "", T0 + 5, &op, &created), 0);
        assert_int_equal(store_cancel(s, "nobody", "x", "", T0 + 6, &op, &created), 0);
        assert_int_equal(store_events_list(s, 0, STORE_EVENTS_ALL, 8, ev, &n), 0);
        assert_int_equal(n, 3);
        assert_string_equal(ev[0].submitted_by, "shop-a");
        assert_string_equal(ev[1].submitted_by, "shop-b");
        assert_string_equal(ev[2].submitted_by, "");
        assert_int_equal(store_events_list_owned(s, "shop-a", 0, STORE_EVENTS_ALL, 8, ev, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(ev[0].operation_id, "own-1");
        assert_string_equal(ev[1].operation_id, "nobody");
        assert_int_equal(store_events_list_owned(s, "shop-b", 0, STORE_EVENTS_ALL, 8, ev, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(ev[0].operation_id, "own-2");
        assert_string_equal(ev[1].operation_id, "nobody");
        assert_int_equal(store_events_list_owned(s, "shop-c", 0, STORE_EVENTS_ALL, 8, ev, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(store_events_list_owned(s, "", 0, STORE_EVENTS_ALL, 8, ev, &n), TG_EINVAL);
        store_close(s);
}

/* A prune deletes the events delivered before its cutoff, in batches, and
 * never a due or parked one, one delivered after the cutoff, nor the newest
 * event; a prune of one batch a call (the daemon's) gets there too. */
static void test_prune_events(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct store_prune_cursor cur;
        struct store_prune_result res;
        struct policy_config c = limits();
        struct store_event ev[16], one;
        struct op_record op;
        unsigned n = 0, calls = 0;
        uint64_t events = 0;
        char id[16];

        (void)state;
        for (int i = 0; i < 8; i++) {
                snprintf(id, sizeof(id), "pe%d", i);
                accept_new(s, id, T0 + i);
        }
        for (int i = 0; i < 8; i++) /* each to manual: audited, so no op is pruned */
                drive(s, STORE_GROUP_FIRST, epoch, T0 + 10 + i, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        assert_int_equal(store_events_list(s, 0, STORE_EVENTS_ALL, 16, ev, &n), 0);
        assert_int_equal(n, 8);
        /* 0..3 delivered long ago, 4 delivered after the cutoff, 5 parked,
         * 6 due after a failed attempt, 7 (the newest) delivered long ago */
        for (int i = 0; i < 8; i++) {
                one = ev[i];
                one.attempts = 1;
                one.delivery = STORE_DELIVERY_DELIVERED;
                one.delivered_at = i == 4 ? T0 + 9000 : T0 + 100 + i;
                if (i == 5 || i == 6) {
                        one.delivery = i == 5 ? STORE_DELIVERY_PARKED : STORE_DELIVERY_DUE;
                        one.delivered_at = 0;
                }
                assert_int_equal(store_event_delivery_put(s, &one), 0);
        }

        /* one batch of one a call, as the daemon's housekeeping prunes */
        memset(&cur, 0, sizeof(cur));
        do {
                assert_int_equal(store_prune(s, T0 + 5000, 1, 1, &cur, &res), 0);
                assert_int_equal(res.operations, 0);
                events += res.events;
                assert_true(++calls < 20);
        } while (res.more);
        assert_int_equal(events, 4);
        assert_int_equal(cur.phase, 0); /* done: the next call starts over */
        assert_int_equal(store_events_list(s, 0, STORE_EVENTS_ALL, 16, ev + 8, &n), 0);
        assert_int_equal(n, 4);
        assert_int_equal(ev[8].id, ev[4].id);  /* delivered after the cutoff */
        assert_int_equal(ev[9].id, ev[5].id);  /* parked */
        assert_int_equal(ev[10].id, ev[6].id); /* due */
        assert_int_equal(ev[11].id, ev[7].id); /* the newest */
        assert_int_equal(store_event_get(s, ev[0].id, &one), TG_ENOTFOUND);

        /* later: the one delivered after the old cutoff goes too (batches
         * until done), the rest stay */
        memset(&cur, 0, sizeof(cur));
        assert_int_equal(store_prune(s, T0 + 10000, 100, 0, &cur, &res), 0);
        assert_int_equal(res.events, 1);
        assert_false(res.more);
        assert_int_equal(store_events_list(s, 0, STORE_EVENTS_ALL, 16, ev + 8, &n), 0);
        assert_int_equal(n, 3);
        /* a new event's id is above every id handed out */
        assert_int_equal(store_operator_resend(s, "pe0", "ana", "again", &c, T0 + 20000, &op), 0);
        assert_int_equal(store_events_list(s, ev[7].id, STORE_EVENTS_ALL, 16, ev + 8, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(ev[8].operation_id, "pe0");
        store_close(s);
}

/* ---- lifecycle: counters, prune, ping, backup, open existing ------------------ */

static int count_state(struct store *s, enum op_state state)
{
        struct seen seen = {0};
        int64_t after = 0;
        unsigned total = 0;

        /* the rows themselves, paged: what the counters must agree with */
        for (;;) {
                memset(&seen, 0, sizeof(seen));
                assert_int_equal(store_list_state(s, state, after, MAX_SEEN, on_op, &seen), 0);
                total += seen.n;
                if (seen.n < MAX_SEEN)
                        return (int)total;
                after = seen.ids[MAX_SEEN - 1];
        }
}

static void assert_counts_match_rows(struct store *s)
{
        struct store_stats st;

        assert_int_equal(store_stats(s, &st), 0);
        for (int i = 0; i < OP_STATE_COUNT; i++)
                if ((int)st.by_state[i] != count_state(s, (enum op_state)i))
                        fail_msg("state %d: stats say %llu, the rows %d", i,
                                 (unsigned long long)st.by_state[i],
                                 count_state(s, (enum op_state)i));
}

/* The final states and calls_total come from counters kept in the same
 * transactions as the changes; a prune deletes final operations past the
 * cutoff with their calls, and never one with an audit trail, the newest
 * operation or the newest call's; ids are never handed out again. */
static void test_counters_and_prune(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct store_prune_cursor cur;
        struct store_prune_result res;
        struct store_stats st, before;
        struct op_record op, p1, p2, p3, kept_audit, last, fresh;
        struct seen seen = {0};
        int64_t max_id;

        (void)state;
        accept_new(s, "p1", T0);
        accept_new(s, "p2", T0 + 1);
        accept_new(s, "p3", T0 + 2);
        accept_new(s, "m1", T0 + 3);
        accept_new(s, "open", T0 + 4);
        accept_new(s, "young", T0 + 5);
        last = accept_new(s, "last", T0 + 6);
        p1 = drive(s, STORE_GROUP_FIRST, epoch, T0 + 100, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        p2 = drive(s, STORE_GROUP_FIRST, epoch, T0 + 200, TG_CLASS_REJECTED, OP_REJECTED, 0);
        p3 = drive(s, STORE_GROUP_FIRST, epoch, T0 + 300, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        kept_audit = drive(s, STORE_GROUP_FIRST, epoch, T0 + 400, TG_CLASS_UNKNOWN, OP_MANUAL, 0);
        assert_int_equal(
            store_operator_resolve(s, "m1", "ana", "checked", OP_SUCCEEDED, T0 + 500, &op), 0);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 600, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0 + 10000);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 9000, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        /* "last" is the newest operation; it became final early (below the
         * cutoff) but stays: SQLite would hand its id out again */
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 700, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        assert_int_equal(p1.state, OP_SUCCEEDED);
        assert_int_equal(p2.state, OP_REJECTED);
        assert_counts_match_rows(s);
        assert_int_equal(store_stats(s, &before), 0);
        assert_int_equal(before.by_state[OP_SUCCEEDED], 5);
        assert_int_equal(before.by_state[OP_REJECTED], 1);
        assert_int_equal(before.calls_total, 7);
        assert_int_equal(before.pruned_operations, 0);
        max_id = last.id;

        /* one batch of one: something is left */
        memset(&cur, 0, sizeof(cur));
        assert_int_equal(store_prune(s, T0 + 5000, 1, 1, &cur, &res), 0);
        assert_int_equal(res.operations, 1);
        assert_true(res.more);
        /* the rest */
        assert_int_equal(store_prune(s, T0 + 5000, 100, 0, &cur, &res), 0);
        assert_int_equal(res.operations, 2);
        assert_int_equal(res.calls, 2);
        assert_false(res.more);
        assert_int_equal(store_get(s, "p1", &op), TG_ENOTFOUND);
        assert_int_equal(store_get(s, "p2", &op), TG_ENOTFOUND);
        assert_int_equal(store_get(s, "p3", &op), TG_ENOTFOUND);
        assert_int_equal(get_op(s, "m1").state, OP_SUCCEEDED); /* its audit trail keeps it */
        assert_int_equal(get_op(s, "open").state, OP_UNKNOWN);
        assert_int_equal(get_op(s, "young").state, OP_SUCCEEDED); /* after the cutoff */
        assert_int_equal(get_op(s, "last").state, OP_SUCCEEDED);  /* the newest */
        assert_int_equal(store_list_op_calls(s, p1.id, on_call, &seen), 0);
        assert_int_equal(seen.n, 0);
        assert_int_equal(store_list_op_calls(s, p3.id, on_call, &seen), 0);
        assert_int_equal(seen.n, 0);
        assert_int_equal(store_list_audit(s, kept_audit.id, on_audit, &seen), 0);
        assert_true(seen.n >= 2); /* to manual, resolved */
        assert_int_equal(store_stats(s, &st), 0);
        assert_int_equal(st.by_state[OP_SUCCEEDED], 3);
        assert_int_equal(st.by_state[OP_REJECTED], 0);
        assert_int_equal(st.calls_total, 7); /* all time */
        assert_int_equal(st.pruned_operations, 3);
        assert_int_equal(st.pruned_calls, 3);
        assert_counts_match_rows(s);

        /* again: nothing more, from a fresh cursor too */
        assert_int_equal(store_prune(s, T0 + 5000, 100, 0, &cur, &res), 0);
        assert_int_equal(res.operations, 0);
        memset(&cur, 0, sizeof(cur));
        assert_int_equal(store_prune(s, T0 + 5000, 100, 0, &cur, &res), 0);
        assert_int_equal(res.operations, 0);

        /* ids are never handed out again */
        fresh = accept_new(s, "fresh", T0 + 20000);
        assert_true(fresh.id > max_id);
        assert_int_equal(store_prune(s, 0, 0, 0, &cur, &res), TG_EINVAL);
        (void)p3;
        store_close(s);
}

struct delete_ctx {
        int64_t id;
        tg_wall_ms before;
};

static int delete_tx(struct store *s, void *arg)
{
        struct delete_ctx *c = arg;
        uint64_t calls = 0;

        return s->ops->prune_delete(s, &c->id, 1, c->before, &calls);
}

/* The triggers: even with a prune's permit, an operation that is not final,
 * or final after the permit's cutoff, is not deleted (nor its calls). */
static void test_prune_triggers_refuse(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record open_op, young;
        struct delete_ctx c;

        (void)state;
        accept_new(s, "o1", T0);
        accept_new(s, "o2", T0 + 1);
        accept_new(s, "o3", T0 + 2);
        open_op = drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_UNKNOWN, OP_UNKNOWN, T0);
        young = drive(s, STORE_GROUP_FIRST, epoch, T0 + 5000, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        c.id = open_op.id;
        c.before = T0 + 10000;
        assert_true(s->ops->tx(s, STORE_TX_WRITE, 0, delete_tx, &c) < 0);
        c.id = young.id;
        c.before = T0 + 1000;
        assert_true(s->ops->tx(s, STORE_TX_WRITE, 0, delete_tx, &c) < 0);
        assert_int_equal(get_op(s, "o1").state, OP_UNKNOWN);
        assert_int_equal(get_op(s, "o2").state, OP_SUCCEEDED);
        assert_counts_match_rows(s);
        store_close(s);
}

static void test_ping(void **state)
{
        struct store *s = open_store();
        char from[400], to[400];

        (void)state;
        assert_int_equal(store_ping(s), 0);
        if (fx_is_sqlite) {
                /* the file moved away under the open handle: not the store
                 * the config names any more */
                snprintf(from, sizeof(from), "%s/t.db", fx_dir);
                snprintf(to, sizeof(to), "%s/t.db.moved", fx_dir);
                assert_int_equal(rename(from, to), 0);
                assert_int_equal(store_ping(s), TG_EIO);
                assert_int_equal(rename(to, from), 0);
                assert_int_equal(store_ping(s), 0);
        }
        store_close(s);
}

/* A read-only command opens an existing store only: nothing is created. */
static void test_open_existing(void **state)
{
        const struct store_open_opts existing = {.existing = true};
        struct store_open_opts o = existing;
        struct store *s = NULL;
        char err[600];

        (void)state;
        o.err = err;
        o.err_size = sizeof(err);
        assert_int_equal(store_open_ex(fx_url, &o, &s), TG_ENOTFOUND);
        assert_null(s);
        assert_non_null(strstr(err, "no store at "));
        /* still nothing there */
        assert_int_equal(store_open_ex(fx_url, &o, &s), TG_ENOTFOUND);
        s = open_store(); /* creates it */
        store_close(s);
        s = NULL;
        assert_int_equal(store_open_ex(fx_url, &o, &s), 0);
        assert_int_equal(store_ping(s), 0);
        store_close(s);
}

/* An online backup is a store with everything in it (SQLite); MariaDB says
 * it is unsupported (mariadb-dump). */
static void test_backup(void **state)
{
        struct store *s = open_store();
        struct store *b = NULL;
        int64_t epoch = acquire(s);
        struct store_stats st, bst;
        char path[400], url[420];

        (void)state;
        accept_new(s, "b1", T0);
        accept_new(s, "b2", T0 + 1);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        if (!fx_is_sqlite) {
                assert_int_equal(store_backup(s, "/tmp/never"), TG_EUNSUPPORTED);
                store_close(s);
                return;
        }
        snprintf(path, sizeof(path), "%s/backup.db", fx_dir);
        assert_int_equal(store_backup(s, path), 0);
        assert_int_equal(store_backup(s, path), TG_ECONFLICT); /* never over a file */
        snprintf(url, sizeof(url), "sqlite://%s", path);
        assert_int_equal(store_open(url, &b), 0);
        assert_int_equal(store_stats(s, &st), 0);
        assert_int_equal(store_stats(b, &bst), 0);
        assert_memory_equal(bst.by_state, st.by_state, sizeof(st.by_state));
        assert_int_equal(bst.calls_total, st.calls_total);
        assert_int_equal(get_op(b, "b1").state, OP_SUCCEEDED);
        assert_int_equal(get_op(b, "b2").state, OP_PENDING);
        store_close(b);
        store_close(s);
        unlink(path);
}

/* MariaDB errors say where and why, never the password. */
static void test_mysql_open_errors(void **state)
{
        char url[700], err[600];
        struct store_open_opts o = {.err = err, .err_size = sizeof(err)};
        struct store *s = NULL;
        const char *at = strrchr(fx_mysql, '@');
        const char *colon = strchr(fx_mysql + 8, ':');

        (void)state;
        assert_false(fx_is_sqlite);
        assert_true(at && colon && colon < at);
        /* a wrong password */
        snprintf(url, sizeof(url), "mysql://%.*s:WrongSecret%s", (int)(colon - fx_mysql - 8),
                 fx_mysql + 8, at);
        assert_true(store_open_ex(url, &o, &s) < 0);
        assert_non_null(strstr(err, "Access denied"));
        assert_non_null(strstr(err, "database "));
        assert_null(strstr(err, "WrongSecret"));
        /* nobody listening */
        snprintf(url, sizeof(url), "mysql://u:Secret2@127.0.0.1:1/tg");
        assert_true(store_open_ex(url, &o, &s) < 0);
        assert_non_null(strstr(err, "127.0.0.1:1, database tg, user u"));
        assert_null(strstr(err, "Secret2"));
}

/* PostgreSQL errors say where and why, never the password. */
static void test_pg_open_errors(void **state)
{
        char url[700], err[600];
        struct store_open_opts o = {.err = err, .err_size = sizeof(err)};
        struct store *s = NULL;
        const char *auth = strstr(fx_mysql, "://");
        const char *at = strrchr(fx_mysql, '@');
        const char *colon = auth ? strchr(auth + 3, ':') : NULL;

        (void)state;
        assert_true(fx_is_pg);
        assert_true(at && colon && colon < at);
        /* a wrong password */
        snprintf(url, sizeof(url), "%.*s:WrongSecret%s", (int)(colon - fx_mysql), fx_mysql, at);
        assert_true(store_open_ex(url, &o, &s) < 0);
        assert_non_null(strstr(err, "password authentication failed"));
        assert_non_null(strstr(err, "database "));
        assert_null(strstr(err, "WrongSecret"));
        /* nobody listening */
        snprintf(url, sizeof(url), "postgresql://u:Secret2@127.0.0.1:1/tg");
        assert_true(store_open_ex(url, &o, &s) < 0);
        assert_non_null(strstr(err, "127.0.0.1:1, database tg, user u"));
        assert_null(strstr(err, "Secret2"));
        /* the short scheme, and a parameter libpq's url has but we do not */
        snprintf(url, sizeof(url), "postgres://u@127.0.0.1:1/tg?application_name=x");
        assert_int_equal(store_open_ex(url, &o, &s), TG_EINVAL);
        assert_null(s);
}

#ifdef TG_HAVE_PG
/* The server ends every session of the store's database (an administrator's
 * pg_terminate_backend, a failover): the next transaction reconnects and
 * runs (it failed before COMMIT was sent), and the owner learns that its
 * lock went with its session. */
static void test_pg_sessions_killed(void **state)
{
        struct store *s = open_store();
        struct store *t = open_store();
        struct raw_result r;
        int64_t e = 0, e2 = 0;

        (void)state;
        assert_true(fx_is_pg);
        assert_int_equal(store_owner_acquire(s, &e), 0);
        accept_new(s, "k1", T0);
        r = raw("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                "current_database() AND pid <> pg_backend_pid()");
        assert_false(r.refused);
        accept_new(s, "k2", T0 + 1); /* reconnected, the acceptance retried */
        assert_int_equal(get_op(s, "k1").state, OP_PENDING);
        assert_int_equal(store_owner_check(s), TG_ELOCKED);
        /* the lock is free: another handle takes the exit, with a newer epoch */
        assert_int_equal(store_owner_acquire(t, &e2), 0);
        assert_true(e2 > e);
        assert_int_equal(store_owner_acquire(s, &e), TG_ELOCKED);
        store_close(t);
        store_close(s);
}
#endif

#ifdef TG_HAVE_PG
/* A text cut in the middle of a UTF-8 character (a bounded copy of a
 * provider's words) is still recorded: the outcome must not fail on it. The
 * cut byte is written as '?' (the server refuses invalid UTF-8). */
static void test_pg_cut_utf8_recorded(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record op;
        struct call_record call;
        struct settle_args a;
        struct seen seen = {0};

        (void)state;
        accept_new(s, "u1", T0);
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 10, &op, &call), 0);
        a = settle_args_for(&op, &call, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, T0 + 20, 0);
        snprintf(a.error, sizeof(a.error), "cost 5 \xe2\x82"); /* a euro sign, cut */
        assert_int_equal(store_settle(s, &a), 0);
        assert_int_equal(store_list_op_calls(s, op.id, on_call, &seen), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.calls[0].error, "cost 5 ??");
        store_close(s);
}
#endif

#define CONTRACT_TESTS(setup, teardown)                                                            \
        cmocka_unit_test_setup_teardown(test_accept_new_same_conflict, setup, teardown),           \
            cmocka_unit_test_setup_teardown(test_doorbell, setup, teardown),                       \
            cmocka_unit_test_setup_teardown(test_accept_batch, setup, teardown),                   \
            cmocka_unit_test_setup_teardown(test_accept_reason_metadata, setup, teardown),         \
            cmocka_unit_test_setup_teardown(test_claim_first_oldest_and_committed, setup,          \
                                            teardown),                                             \
            cmocka_unit_test_setup_teardown(test_claim_again_only_when_due, setup, teardown),      \
            cmocka_unit_test_setup_teardown(test_settle_transitions, setup, teardown),             \
            cmocka_unit_test_setup_teardown(test_settle_batch, setup, teardown),                   \
            cmocka_unit_test_setup_teardown(test_claim_batch_keeps_order_within_a_millisecond,     \
                                            setup, teardown),                                      \
            cmocka_unit_test_setup_teardown(test_owner_lock, setup, teardown),                     \
            cmocka_unit_test_setup_teardown(test_fenced_after_newer_acquire, setup, teardown),     \
            cmocka_unit_test_setup_teardown(test_recover, setup, teardown),                        \
            cmocka_unit_test_setup_teardown(test_crash_between_claim_and_settle, setup, teardown), \
            cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),             \
            cmocka_unit_test_setup_teardown(test_sweep_deadlines, setup, teardown),                \
            cmocka_unit_test_setup_teardown(test_claim_skips_expired_and_sweep_key_retention,      \
                                            setup, teardown),                                      \
            cmocka_unit_test_setup_teardown(test_next_due, setup, teardown),                       \
            cmocka_unit_test_setup_teardown(test_manual_resend_resolve, setup, teardown),          \
            cmocka_unit_test_setup_teardown(test_events_outbox, setup, teardown),                  \
            cmocka_unit_test_setup_teardown(test_settle_external, setup, teardown),                \
            cmocka_unit_test_setup_teardown(test_find_by_refund_id, setup, teardown),              \
            cmocka_unit_test_setup_teardown(test_cancel_before_any_call, setup, teardown),         \
            cmocka_unit_test_setup_teardown(test_cancel_manual_never_sent, setup, teardown),       \
            cmocka_unit_test_setup_teardown(test_assign_manual_cases, setup, teardown),            \
            cmocka_unit_test_setup_teardown(test_approvals, setup, teardown),                      \
            cmocka_unit_test_setup_teardown(test_trace_and_caller_deadline, setup, teardown),      \
            cmocka_unit_test_setup_teardown(test_protected_rows_never_deleted, setup, teardown),   \
            cmocka_unit_test_setup_teardown(test_stats, setup, teardown),                          \
            cmocka_unit_test_setup_teardown(test_list_calls_since_limit, setup, teardown),         \
            cmocka_unit_test_setup_teardown(test_callbacks_may_reenter, setup, teardown),          \
            cmocka_unit_test_setup_teardown(test_samples, setup, teardown),                        \
            cmocka_unit_test_setup_teardown(test_samples_large_backlog_counted_less_often, setup,  \
                                            teardown),                                             \
            cmocka_unit_test_setup_teardown(test_samples_per_share, setup, teardown),              \
            cmocka_unit_test_setup_teardown(test_samples_figures_kept_a_minute, setup, teardown),  \
            cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),                       \
            cmocka_unit_test_setup_teardown(test_list_state, setup, teardown),                     \
            cmocka_unit_test_setup_teardown(test_shares, setup, teardown),                         \
            cmocka_unit_test_setup_teardown(test_accounts, setup, teardown),                       \
            cmocka_unit_test_setup_teardown(test_accounts_seen, setup, teardown),                  \
            cmocka_unit_test_setup_teardown(test_sql_agrees_with_table, setup, teardown),          \
            cmocka_unit_test_setup_teardown(test_recover_batch_agrees, setup, teardown),           \
            cmocka_unit_test_setup_teardown(test_claim_batch, setup, teardown),                    \
            cmocka_unit_test_setup_teardown(test_release, setup, teardown),                        \
            cmocka_unit_test_setup_teardown(test_account_hold, setup, teardown),                   \
            cmocka_unit_test_setup_teardown(test_account_controls, setup, teardown),               \
            cmocka_unit_test_setup_teardown(test_account_controls_rate_exact, setup, teardown),    \
            cmocka_unit_test_setup_teardown(test_account_controls_refused, setup, teardown),       \
            cmocka_unit_test_setup_teardown(test_account_controls_atomic_and_append_only, setup,   \
                                            teardown),                                             \
            cmocka_unit_test_setup_teardown(test_counters_and_prune, setup, teardown),             \
            cmocka_unit_test_setup_teardown(test_events_of_op_failed_and_audit, setup, teardown),  \
            cmocka_unit_test_setup_teardown(test_submitted_by, setup, teardown),                   \
            cmocka_unit_test_setup_teardown(test_prune_events, setup, teardown),                   \
            cmocka_unit_test_setup_teardown(test_prune_triggers_refuse, setup, teardown),          \
            cmocka_unit_test_setup_teardown(test_ping, setup, teardown),                           \
            cmocka_unit_test_setup_teardown(test_open_existing, setup, teardown),                  \
            cmocka_unit_test_setup_teardown(test_backup, setup, teardown)

/* Without arguments: the SQLite half. With "mysql": the MariaDB half, which
 * exits 77 (ctest: skipped) without TG_TEST_MYSQL_URL or without the
 * backend built, and says why. */
/* Invariant 3 on SQLite: an outcome commits with synchronous=NORMAL (no
 * sync of the WAL), and any write after it — a claim, an acceptance — is
 * FULL again: its commit syncs the WAL before the call may be sent. (The
 * switch is made only when the kind of transaction changes.) */
static void test_sqlite_writes_after_outcomes_are_synced(void **state)
{
        struct store *s = open_store();
        int64_t epoch = acquire(s);
        struct op_record op2, op3;
        struct call_record call2, call3;
        struct settle_args a;
        int64_t n;

        (void)state;
        accept_new(s, "d1", T0 + 1);
        accept_new(s, "d2", T0 + 2);
        accept_new(s, "d3", T0 + 3);
        drive(s, STORE_GROUP_FIRST, epoch, T0 + 10, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, 0);
        /* after an outcome: a claim syncs */
        n = faultvfs_syncs();
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 20, &op2, &call2), 0);
        assert_true(faultvfs_syncs() > n);
        n = faultvfs_syncs();
        assert_int_equal(claim(s, STORE_GROUP_FIRST, epoch, T0 + 21, &op3, &call3), 0);
        assert_true(faultvfs_syncs() > n);
        /* two outcomes in a row: neither syncs */
        n = faultvfs_syncs();
        a = settle_args_for(&op2, &call2, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, T0 + 30, 0);
        assert_int_equal(store_settle(s, &a), 0);
        a = settle_args_for(&op3, &call3, TG_CLASS_SUCCEEDED, OP_SUCCEEDED, T0 + 31, 0);
        assert_int_equal(store_settle(s, &a), 0);
        assert_int_equal(faultvfs_syncs(), n);
        /* then an acceptance syncs */
        accept_new(s, "d4", T0 + 40);
        assert_true(faultvfs_syncs() > n);
        store_close(s);
}

/* Opening a store whose schema is current takes no write lock: a process
 * opening it (a standby dispatcher, a command) does not wait on, or fail
 * behind, a writer that holds the lock (an owner paused inside a
 * transaction). Its first write still waits for that writer, as it must. */
static void test_sqlite_open_beside_a_writer(void **state)
{
        struct store *s = open_store(); /* creates it, schema current */
        struct store *t = NULL;
        struct policy_config c = limits();
        struct refund_request r = req("w1", "pay-1", 1000);
        struct op_record op;
        bool created = false;
        char path[400];
        sqlite3 *writer = NULL;

        (void)state;
        store_close(s);
        snprintf(path, sizeof(path), "%s/t.db", fx_dir);
        assert_int_equal(sqlite3_open_v2(path, &writer, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_exec(writer, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
        /* the open's own busy wait is 5 s: an open that wanted the lock
         * fails with TG_EBUSY after it */
        assert_int_equal(store_open(fx_url, &t), 0);
        assert_int_equal(store_ping(t), 0);
        assert_int_equal(store_set_busy_timeout(t, 0), 0);
        assert_int_equal(store_accept(t, &r, T0, &c, &created, &op), TG_EBUSY);
        assert_int_equal(sqlite3_exec(writer, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(writer);
        accept_new(t, "w1", T0);
        store_close(t);
}

int main(int argc, char **argv)
{
        const struct CMUnitTest sqlite_tests[] = {
            CONTRACT_TESTS(setup_sqlite, teardown_sqlite),
            cmocka_unit_test(test_bad_urls),
            cmocka_unit_test_setup_teardown(test_sqlite_writes_after_outcomes_are_synced,
                                            setup_sqlite, teardown_sqlite),
            cmocka_unit_test_setup_teardown(test_sqlite_open_beside_a_writer, setup_sqlite,
                                            teardown_sqlite),
        };
        const struct CMUnitTest mysql_tests[] = {
            CONTRACT_TESTS(setup_mysql, teardown_mysql),
            cmocka_unit_test_setup_teardown(test_mysql_open_errors, setup_mysql, teardown_mysql),
        };
        const struct CMUnitTest pg_tests[] = {
            CONTRACT_TESTS(setup_mysql, teardown_mysql),
            cmocka_unit_test_setup_teardown(test_pg_open_errors, setup_mysql, teardown_mysql),
#ifdef TG_HAVE_PG
            cmocka_unit_test_setup_teardown(test_pg_sessions_killed, setup_mysql, teardown_mysql),
            cmocka_unit_test_setup_teardown(test_pg_cut_utf8_recorded, setup_mysql, teardown_mysql),
#endif
        };
        bool pg = argc >= 2 && strcmp(argv[1], "pg") == 0;
        const char *mysql = getenv(pg ? "TG_TEST_PG_URL" : "TG_TEST_MYSQL_URL");
        const char *name = pg ? "pg" : "mysql";
        struct store *probe = NULL;
        int r;

        if (argc < 2 || (strcmp(argv[1], "mysql") != 0 && !pg)) {
                fx_is_sqlite = true;
                /* a pass-through VFS that counts syncs (never armed here) */
                if (faultvfs_install() != 0)
                        return 1;
                return cmocka_run_group_tests_name("store contract: sqlite", sqlite_tests, NULL,
                                                   NULL);
        }
        if (!mysql || !mysql[0]) {
                printf("store contract: %s skipped (%s not set)\n", name,
                       pg ? "TG_TEST_PG_URL" : "TG_TEST_MYSQL_URL");
                return 77;
        }
        snprintf(fx_mysql, sizeof(fx_mysql), "%s", mysql);
        setup_mysql(NULL);
        r = store_open(fx_url, &probe);
        store_close(probe);
        if (r == TG_EUNSUPPORTED) {
                printf("store contract: %s skipped (backend not built: %s)\n", name,
                       tg_strerror(r));
                return 77;
        }
        fx_is_sqlite = false;
        fx_is_pg = pg;
        if (pg)
                return cmocka_run_group_tests_name("store contract: pg", pg_tests, NULL, NULL);
        return cmocka_run_group_tests_name("store contract: mysql", mysql_tests, NULL, NULL);
}
