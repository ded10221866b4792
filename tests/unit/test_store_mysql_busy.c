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
 * The fixture, its check and the lock wait test are store_busy.h's, shared
 * with test_store_pg_busy.c.
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

#define BUSY_URL_ENV "TG_TEST_MYSQL_URL"
#define RAW          MYSQL
#define RAW_BEGIN    "START TRANSACTION"
#include "store_busy.h"

static RAW *raw_connect(void)
{
        return tgtest_mysql_connect(url);
}

static void raw_close(RAW *c)
{
        mysql_close(c);
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
        other = raw_connect();
        watch = raw_connect();
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
