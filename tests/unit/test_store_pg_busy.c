/*
 * The PostgreSQL store retries what the server gives up on (issue 29, as
 * test_store_mysql_busy.c for MariaDB): store_pg_tx() runs a whole
 * transaction again after a lock wait timeout (55P03, lock_timeout) and
 * after a deadlock (40P01), so a settle that meets another session's locks
 * ends committed, not failed. Both are provoked with a second, raw session
 * on the same database (TG_TEST_PG_URL; exits 77, skipped, without it):
 *
 *   - lock wait timeout: the raw session holds the operation's row lock for
 *     2.5 s while the store's session may wait 1 s per statement
 *     (store_set_busy_timeout): the settle commits after about 2.5 s, which
 *     only a retried transaction can;
 *   - deadlock: the raw session holds the counter row a settle moves last,
 *     waits until the settle holds the operation's row and waits for the
 *     counter, then asks for the operation's row. The settle has waited
 *     longer, so its deadlock check (deadlock_timeout, 1 s) runs first and
 *     it is the one rolled back; retried, it commits once the raw session is
 *     gone. (With the test server's socket, TG_TEST_PG_SOCKET, the raw
 *     session is the superuser's and sets its own deadlock_timeout to 30 s,
 *     so that a loaded machine cannot make it check first.)
 * Each ends with the operation succeeded, its call closed and the succeeded
 * counter at 1 (nothing counted twice by a retry).
 * The fixture, its check and the lock wait test are store_busy.h's, shared
 * with test_store_mysql_busy.c.
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

#ifdef TG_HAVE_PG
#include <libpq-fe.h>

#define BUSY_URL_ENV "TG_TEST_PG_URL"
#define RAW          PGconn
#define RAW_BEGIN    "BEGIN"
#include "store_busy.h"

static RAW *raw_connect(void)
{
        PGconn *c = PQconnectdb(url); /* libpq reads the test's url as it is */

        if (PQstatus(c) != CONNECTION_OK)
                fail_msg("%s", PQerrorMessage(c));
        return c;
}

/* The raw session of the deadlock: the superuser's over the test server's
 * socket when it is known (it may raise its own deadlock_timeout), else the
 * url's user. */
static PGconn *raw_connect_patient(void)
{
        const char *sock = getenv("TG_TEST_PG_SOCKET");
        const char *at = strrchr(url, '@');
        const char *colon = at ? strchr(at, ':') : NULL;
        const char *slash = at ? strchr(at, '/') : NULL;
        char conninfo[900];
        PGconn *c;
        PGresult *res;

        if (!sock || !sock[0] || !colon || !slash || colon > slash)
                return raw_connect();
        snprintf(conninfo, sizeof(conninfo), "host=%s port=%.*s user=postgres dbname=%s", sock,
                 (int)(slash - colon - 1), colon + 1, slash + 1);
        c = PQconnectdb(conninfo);
        if (PQstatus(c) != CONNECTION_OK) {
                PQfinish(c);
                return raw_connect();
        }
        res = PQexec(c, "SET deadlock_timeout = '30s'");
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
                fail_msg("SET deadlock_timeout: %s", PQerrorMessage(c));
        PQclear(res);
        return c;
}

static void raw_close(RAW *c)
{
        PQfinish(c);
}

static void raw_ok(PGconn *c, const char *sql)
{
        PGresult *res = PQexec(c, sql);
        ExecStatusType st = PQresultStatus(res);

        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
                fail_msg("%s: %s", sql, PQerrorMessage(c));
        PQclear(res);
}

static long raw_count(PGconn *c, const char *sql)
{
        PGresult *res = PQexec(c, sql);
        long n = -1;

        if (PQresultStatus(res) != PGRES_TUPLES_OK)
                fail_msg("%s: %s", sql, PQerrorMessage(c));
        if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
                n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
        PQclear(res);
        return n;
}

static void test_deadlock_is_retried(void **state)
{
        struct fixture f;
        struct settler t = {.f = &f};
        pthread_t th;
        char sql[300];
        PGconn *other, *watch;
        PGresult *res;
        long deadlocks;
        bool got = false;

        (void)state;
        fixture_open(&f);
        other = raw_connect_patient();
        watch = raw_connect();
        deadlocks = raw_count(watch, "SELECT deadlocks FROM pg_stat_database "
                                     "WHERE datname = current_database()");
        raw_ok(other, "BEGIN");
        /* the row a settle of a success moves last */
        raw_ok(other, "UPDATE counters SET n = n WHERE name = 'succeeded'");
        assert_int_equal(pthread_create(&th, NULL, settle_thread, &t), 0);
        /* the settle holds the operation's row and waits for the counter
         * (a role sees its own sessions' queries in pg_stat_activity) */
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                 "AND query LIKE 'UPDATE counters%%' AND pid <> pg_backend_pid() AND pid <> %d",
                 PQbackendPID(other));
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
        /* a cycle: the settle, which waited first, finds it and is rolled
         * back; this one goes on */
        res = PQexec(other, sql);
        if (PQresultStatus(res) != PGRES_TUPLES_OK)
                fail_msg("the raw session was the victim: %s", PQerrorMessage(other));
        PQclear(res);
        raw_ok(other, "ROLLBACK");
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(t.result, 0);
        /* the statistics collector reports the deadlock within a moment */
        for (int i = 0; i < 100; i++) {
                raw_ok(watch, "SELECT pg_stat_clear_snapshot()");
                if (raw_count(watch, "SELECT deadlocks FROM pg_stat_database "
                                     "WHERE datname = current_database()") > deadlocks)
                        break;
                usleep(20000);
        }
        assert_true(raw_count(watch, "SELECT deadlocks FROM pg_stat_database "
                                     "WHERE datname = current_database()") > deadlocks);
        PQfinish(watch);
        PQfinish(other);
        fixture_check(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_lock_wait_timeout_is_retried),
            cmocka_unit_test(test_deadlock_is_retried),
        };
        const char *pg = getenv("TG_TEST_PG_URL");

        if (!pg || !pg[0]) {
                printf("store busy retries: skipped (TG_TEST_PG_URL not set)\n");
                return 77;
        }
        return cmocka_run_group_tests_name("pg busy retries", tests, NULL, NULL);
}
#else
int main(void)
{
        printf("store busy retries: skipped (PostgreSQL backend not built)\n");
        return 77;
}
#endif
