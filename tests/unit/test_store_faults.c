/*
 * Tests of store/store_faults.h, the fault seam tollgate-sim wraps around
 * each simulated process's store, on a real SQLite store:
 *   - a busy or failing transaction never ran: the error comes back and
 *     nothing is stored;
 *   - a lost COMMIT: the transaction committed and the store's re-check
 *     finds its own work (an accept says created, a claim is not made twice,
 *     a settle is not applied twice), as on MariaDB after a lost connection;
 *   - the hooks see every transaction (committed or not) and every epoch
 *     handed out;
 *   - dropped locks: the handle finds out at its next owner check, and
 *     another handle can take the exit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "store/store.h"
#include "store/store_faults.h"

#define NOW 1700000000000LL

struct seen {
        enum store_fault next; /* the fault the next transaction gets */
        unsigned txs, writes, committed, failed;
        int64_t bumped;
};

static enum store_fault before(void *ctx, bool write)
{
        struct seen *s = ctx;
        enum store_fault f = s->next;

        s->next = STORE_FAULT_NONE;
        s->txs++;
        s->writes += write;
        return f;
}

static void after(void *ctx, bool write, bool committed, int result)
{
        struct seen *s = ctx;

        (void)write;
        s->committed += committed;
        s->failed += result < 0;
}

static void bumped(void *ctx, int64_t epoch)
{
        ((struct seen *)ctx)->bumped = epoch;
}

struct fx {
        char dir[64];
        char url[128];
        struct store *store; /* wrapped */
        struct store *plain; /* another handle on the same file */
        struct seen seen;
        struct policy_config policy;
};

static int setup(void **state)
{
        struct fx *x = calloc(1, sizeof(*x));
        struct store_fault_hooks h;

        if (!x)
                return -1;
        snprintf(x->dir, sizeof(x->dir), "/tmp/tg-test-faults-XXXXXX");
        if (!mkdtemp(x->dir))
                return -1;
        snprintf(x->url, sizeof(x->url), "sqlite://%s/t.db", x->dir);
        if (store_open(x->url, &x->store) < 0 || store_open(x->url, &x->plain) < 0)
                return -1;
        h = (struct store_fault_hooks){
            .before = before, .after = after, .epoch_bumped = bumped, .ctx = &x->seen};
        if (store_faults_wrap(x->store, &h) < 0)
                return -1;
        policy_config_default(&x->policy);
        *state = x;
        return 0;
}

static int teardown(void **state)
{
        struct fx *x = *state;
        char cmd[128];

        store_close(x->store);
        store_close(x->plain);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", x->dir);
        if (system(cmd) != 0)
                return -1;
        free(x);
        return 0;
}

static struct refund_request refund(const char *id)
{
        struct refund_request r;

        memset(&r, 0, sizeof(r));
        snprintf(r.operation_id, sizeof(r.operation_id), "%s", id);
        snprintf(r.payment_id, sizeof(r.payment_id), "pay-%s", id);
        r.amount = 100;
        memcpy(r.currency, "TWD", 4);
        return r;
}

static void test_busy_and_io_never_ran(void **state)
{
        struct fx *x = *state;
        struct refund_request r = refund("f-1");
        struct op_record op;
        bool created = true;

        x->seen.next = STORE_FAULT_BUSY;
        assert_int_equal(store_accept(x->store, &r, NOW, &x->policy, &created, &op), TG_EBUSY);
        x->seen.next = STORE_FAULT_IO;
        assert_int_equal(store_accept(x->store, &r, NOW, &x->policy, &created, &op), TG_EIO);
        assert_int_equal(store_get(x->plain, "f-1", &op), TG_ENOTFOUND);
        assert_int_equal(x->seen.txs, 2);
        assert_int_equal(x->seen.writes, 2);
        assert_int_equal(x->seen.committed, 0);
        assert_int_equal(x->seen.failed, 2);
        /* the next one runs */
        assert_int_equal(store_accept(x->store, &r, NOW, &x->policy, &created, &op), 0);
        assert_true(created);
        assert_int_equal(store_get(x->plain, "f-1", &op), 0);
        assert_int_equal(x->seen.committed, 1);
}

/* A batch whose COMMIT answer was lost: every item stored once and said
 * created as it was, the repeat of an id inside the batch still a repeat;
 * a batch that never ran (busy) stored nothing. */
static void test_batch_lost_commit_rechecks(void **state)
{
        struct fx *x = *state;
        struct refund_request r[3] = {refund("fb-1"), refund("fb-2"), refund("fb-1")};
        struct store_accept_item items[3];
        struct store_stats st;

        memset(items, 0, sizeof(items));
        for (int i = 0; i < 3; i++)
                items[i].req = &r[i];
        x->seen.next = STORE_FAULT_BUSY;
        assert_int_equal(store_accept_batch(x->store, items, 3, NOW, &x->policy), TG_EBUSY);
        assert_int_equal(store_stats(x->plain, &st), 0);
        assert_int_equal(st.by_state[OP_PENDING], 0);

        x->seen.next = STORE_FAULT_LOST_COMMIT;
        assert_int_equal(store_accept_batch(x->store, items, 3, NOW, &x->policy), 0);
        assert_int_equal(x->seen.committed, 1);
        for (int i = 0; i < 3; i++)
                assert_int_equal(items[i].result, 0);
        assert_true(items[0].created);
        assert_true(items[1].created);
        assert_false(items[2].created);
        assert_int_equal(items[2].op.id, items[0].op.id);
        assert_int_equal(store_stats(x->plain, &st), 0);
        assert_int_equal(st.by_state[OP_PENDING], 2);
}

/* one call, ended as settled */
static int count_call(const struct call_record *c, void *userdata)
{
        assert_true(c->ended);
        assert_int_equal(c->cls, TG_CLASS_SUCCEEDED);
        (*(unsigned *)userdata)++;
        return 0;
}

static void test_lost_commit_rechecks(void **state)
{
        struct fx *x = *state;
        struct refund_request r = refund("f-2");
        struct op_record op, op2;
        struct call_record call;
        struct store_stats st;
        bool created = false;
        int64_t epoch = 0;

        /* an accept whose COMMIT answer was lost: stored once, and said
         * created (it was our insert) */
        x->seen.next = STORE_FAULT_LOST_COMMIT;
        assert_int_equal(store_accept(x->store, &r, NOW, &x->policy, &created, &op), 0);
        assert_true(created);
        assert_int_equal(x->seen.committed, 1);
        assert_int_equal(x->seen.failed, 0);

        assert_int_equal(store_owner_acquire(x->store, &epoch), 0);
        assert_int_equal(x->seen.bumped, epoch);

        /* a claim whose COMMIT answer was lost: the re-check finds it, and
         * the attempt is counted once */
        struct claim_args a = {.group = STORE_GROUP_FIRST, .epoch = epoch, .now = NOW + 1};
        snprintf(a.request_id, sizeof(a.request_id), "tg-%lld-1-abcd", (long long)epoch);
        x->seen.next = STORE_FAULT_LOST_COMMIT;
        assert_int_equal(store_claim(x->store, &a, &op, &call), 0);
        assert_int_equal(store_get(x->plain, "f-2", &op2), 0);
        assert_int_equal(op2.state, OP_IN_FLIGHT);
        assert_int_equal(op2.attempts, 1);
        assert_int_equal(store_stats(x->plain, &st), 0);
        assert_int_equal(st.calls_total, 1);

        /* a settle whose COMMIT answer was lost: applied once, no error */
        struct settle_args s = {.call_id = call.id,
                                .op_id = op.id,
                                .epoch = epoch,
                                .sent = true,
                                .cls = TG_CLASS_SUCCEEDED,
                                .http_status = 201,
                                .end_mono = 5000,
                                .now = NOW + 2,
                                .decision = {.next = OP_SUCCEEDED}};
        x->seen.next = STORE_FAULT_LOST_COMMIT;
        assert_int_equal(store_settle(x->store, &s), 0);
        assert_int_equal(store_get(x->plain, "f-2", &op2), 0);
        assert_int_equal(op2.state, OP_SUCCEEDED);
        unsigned n = 0;
        assert_int_equal(store_list_op_calls(x->plain, op.id, count_call, &n), 0);
        assert_int_equal(n, 1);
}

static void test_dropped_locks(void **state)
{
        struct fx *x = *state;
        int64_t epoch = 0, other = 0;

        assert_int_equal(store_owner_acquire(x->store, &epoch), 0);
        assert_int_equal(store_owner_check(x->store), 0);
        assert_int_equal(store_owner_acquire(x->plain, &other), TG_ELOCKED);
        store_faults_drop_locks(x->store);
        assert_int_equal(store_owner_check(x->store), TG_ELOCKED);
        assert_int_equal(store_owner_acquire(x->plain, &other), 0);
        assert_true(other > epoch);
        /* a second wrap is refused */
        struct store_fault_hooks h = {.ctx = NULL};
        assert_int_equal(store_faults_wrap(x->store, &h), TG_EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_busy_and_io_never_ran, setup, teardown),
            cmocka_unit_test_setup_teardown(test_lost_commit_rechecks, setup, teardown),
            cmocka_unit_test_setup_teardown(test_batch_lost_commit_rechecks, setup, teardown),
            cmocka_unit_test_setup_teardown(test_dropped_locks, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
