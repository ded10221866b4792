/*
 * The MariaDB store retries what InnoDB gives up on (issue 16, section 4):
 * store_mysql_tx() runs a whole transaction again after a lock wait timeout
 * and after a deadlock, so a settle that meets another session's locks ends
 * committed, not failed. Both are provoked here with a second, raw session
 * on the same database (TG_TEST_MYSQL_URL; exits 77, skipped, without it):
 *
 *   - lock wait timeout: the raw session holds the operation's row lock for
 *     2.5 s while the store's session may wait 1 s per statement
 *     (store_set_busy_timeout): the settle commits after about 2.5 s, which
 *     only a retried transaction can (each try gives up after 1 s);
 *   - deadlock: the raw session holds the counter row a settle moves last,
 *     waits until the settle holds the operation's row and waits for the
 *     counter, then asks for the operation's row: InnoDB rolls back the
 *     lighter transaction (the settle; the raw one has written 200 rows) and
 *     the raw session gets its lock; the settle, retried, commits once the
 *     raw session is gone.
 * Each ends with the operation succeeded, its call closed and the succeeded
 * counter at 1 (nothing counted twice by a retry).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "store/store.h"

#ifdef TG_HAVE_MARIADB
#include <mysql.h>
#include <mysqld_error.h>

#include "tgtest_mysql.h"

#define T0 1700000000000LL

static char url[600];
static unsigned serial;

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void raw_ok(MYSQL *m, const char *sql)
{
        if (mysql_query(m, sql) != 0)
                fail_msg("%s: %s", sql, mysql_error(m));
        MYSQL_RES *res = mysql_store_result(m);
        if (res)
                mysql_free_result(res);
}

static long raw_count(MYSQL *m, const char *sql)
{
        long n = -1;

        if (mysql_query(m, sql) != 0)
                fail_msg("%s: %s", sql, mysql_error(m));
        MYSQL_RES *res = mysql_store_result(m);
        assert_non_null(res);
        MYSQL_ROW row = mysql_fetch_row(res);
        if (row && row[0])
                n = strtol(row[0], NULL, 10);
        mysql_free_result(res);
        return n;
}

/* A fresh database with one operation claimed under a fresh owner, and the
 * settle that closes it succeeded. */
struct fixture {
        struct store *s;
        struct op_record op;
        struct call_record call;
        struct settle_args settle;
};

static void fixture_open(struct fixture *f)
{
        struct policy_config limits;
        struct refund_request r;
        struct claim_args a;
        int64_t epoch = 0;
        bool created = false;

        memset(f, 0, sizeof(*f));
        snprintf(url, sizeof(url), "%s_busy_%ld_%u", getenv("TG_TEST_MYSQL_URL"), (long)getpid(),
                 ++serial);
        assert_int_equal(store_open(url, &f->s), 0);
        policy_config_default(&limits);
        memset(&r, 0, sizeof(r));
        snprintf(r.operation_id, sizeof(r.operation_id), "busy-1");
        snprintf(r.payment_id, sizeof(r.payment_id), "pay-1");
        r.amount = 100;
        memcpy(r.currency, "TWD", 4);
        assert_int_equal(store_accept(f->s, &r, T0, &limits, &created, &f->op), 0);
        assert_int_equal(store_owner_acquire(f->s, &epoch), 0);
        memset(&a, 0, sizeof(a));
        a.group = STORE_GROUP_FIRST;
        a.epoch = epoch;
        a.now = T0 + 10;
        a.start_mono = 5 * TG_NS_PER_S;
        a.in_flight_at_start = 1;
        snprintf(a.request_id, sizeof(a.request_id), "req-busy-1");
        assert_int_equal(store_claim(f->s, &a, &f->op, &f->call), 0);
        f->settle = (struct settle_args){.call_id = f->call.id,
                                         .op_id = f->op.id,
                                         .epoch = epoch,
                                         .sent = true,
                                         .cls = TG_CLASS_SUCCEEDED,
                                         .http_status = 201,
                                         .end_mono = f->call.start_mono + 20 * TG_NS_PER_MS,
                                         .now = T0 + 30,
                                         .latency_us = 20000,
                                         .decision = {.next = OP_SUCCEEDED}};
}

/* Settled once: succeeded, its call closed, counted once. */
static void fixture_check(struct fixture *f)
{
        struct op_record op;
        MYSQL *m = tgtest_mysql_connect(url);

        assert_int_equal(store_get(f->s, "busy-1", &op), 0);
        assert_int_equal(op.state, OP_SUCCEEDED);
        assert_int_equal(raw_count(m, "SELECT count(*) FROM calls WHERE ended = 1"), 1);
        assert_int_equal(raw_count(m, "SELECT n FROM counters WHERE name = 'succeeded'"), 1);
        mysql_close(m);
        store_close(f->s);
}

struct settler {
        struct fixture *f;
        int result;
        double took;
};

static void *settle_thread(void *arg)
{
        struct settler *t = arg;
        double t0 = now_s();

        t->result = store_settle(t->f->s, &t->f->settle);
        t->took = now_s() - t0;
        return NULL;
}

static void test_lock_wait_timeout_is_retried(void **state)
{
        struct fixture f;
        struct settler t = {.f = &f};
        pthread_t th;
        char sql[200];
        MYSQL *other;

        (void)state;
        fixture_open(&f);
        /* the store's session waits 1 s per statement, then InnoDB says
         * ER_LOCK_WAIT_TIMEOUT */
        assert_int_equal(store_set_busy_timeout(f.s, 1000), 0);
        other = tgtest_mysql_connect(url);
        raw_ok(other, "START TRANSACTION");
        snprintf(sql, sizeof(sql), "SELECT id FROM operations WHERE id = %lld FOR UPDATE",
                 (long long)f.op.id);
        raw_ok(other, sql);
        double t0 = now_s();
        assert_int_equal(pthread_create(&th, NULL, settle_thread, &t), 0);
        while (now_s() - t0 < 2.5)
                usleep(10000);
        raw_ok(other, "COMMIT");
        assert_int_equal(pthread_join(th, NULL), 0);
        mysql_close(other);
        assert_int_equal(t.result, 0);
        /* no single try can wait more than 1 s: it was tried again */
        assert_true(t.took >= 2.0);
        fixture_check(&f);
}

static void test_deadlock_is_retried(void **state)
{
        struct fixture f;
        struct settler t = {.f = &f};
        pthread_t th;
        char sql[200];
        MYSQL *other, *watch;
        bool got = false;

        (void)state;
        fixture_open(&f);
        other = tgtest_mysql_connect(url);
        watch = tgtest_mysql_connect(url);
        raw_ok(other, "START TRANSACTION");
        /* heavy: InnoDB rolls back the transaction that changed fewer rows */
        for (int i = 0; i < 200; i++) {
                snprintf(sql, sizeof(sql),
                         "INSERT INTO admission_refusals (at, refused) VALUES (%d, 1)", i + 1);
                raw_ok(other, sql);
        }
        /* the row a settle of a success moves last */
        raw_ok(other, "UPDATE counters SET n = n WHERE name = 'succeeded'");
        assert_int_equal(pthread_create(&th, NULL, settle_thread, &t), 0);
        /* the settle holds the operation's row and waits for the counter:
         * its UPDATE of counters is running (a user sees its own sessions
         * in the processlist without the PROCESS privilege) */
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM information_schema.processlist WHERE command = 'Query' "
                 "AND info LIKE 'UPDATE counters%%' AND id <> CONNECTION_ID() AND id <> %lu",
                 mysql_thread_id(other));
        for (int i = 0; i < 500; i++) {
                if (raw_count(watch, sql) >= 1) {
                        got = true;
                        break;
                }
                usleep(10000);
        }
        assert_true(got);
        snprintf(sql, sizeof(sql), "SELECT id FROM operations WHERE id = %lld FOR UPDATE",
                 (long long)f.op.id);
        /* a cycle: InnoDB picks the settle as its victim, this one goes on */
        if (mysql_query(other, sql) != 0)
                fail_msg("the raw session was the victim: %s", mysql_error(other));
        MYSQL_RES *res = mysql_store_result(other);
        if (res)
                mysql_free_result(res);
        raw_ok(other, "ROLLBACK");
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(t.result, 0);
        assert_true(raw_count(watch, "SELECT variable_value FROM information_schema.global_status "
                                     "WHERE variable_name = 'INNODB_DEADLOCKS'") >= 1);
        mysql_close(watch);
        mysql_close(other);
        fixture_check(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_lock_wait_timeout_is_retried),
            cmocka_unit_test(test_deadlock_is_retried),
        };
        const char *mysql = getenv("TG_TEST_MYSQL_URL");

        if (!mysql || !mysql[0]) {
                printf("store busy retries: skipped (TG_TEST_MYSQL_URL not set)\n");
                return 77;
        }
        return cmocka_run_group_tests_name("mysql busy retries", tests, NULL, NULL);
}
#else
int main(void)
{
        printf("store busy retries: skipped (MariaDB backend not built)\n");
        return 77;
}
#endif
