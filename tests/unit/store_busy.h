/*
 * store_busy.h — what the server stores' busy tests share
 * (test_store_mysql_busy.c, test_store_pg_busy.c): the fixture (a fresh
 * database with one operation claimed under a fresh owner, and the settle
 * that closes it), its check (settled once), the settle on a thread of its
 * own, and the lock wait test, which is the same on both servers. Included
 * once by each of those files, after it defines:
 *
 *   BUSY_URL_ENV   the environment variable of the server's url;
 *   RAW            the client library's session type (MYSQL, PGconn);
 *   RAW_BEGIN      the statement that opens a transaction on a raw session;
 *
 * and before it defines the raw session (a second application on the
 * store's database) that the shared code uses: raw_connect(),
 * raw_close(), raw_ok() (a statement that must succeed) and raw_count() (the
 * first column of the first row, 0 without one).
 */
#ifndef TG_TESTS_STORE_BUSY_H
#define TG_TESTS_STORE_BUSY_H

#define T0 1700000000000LL

static char url[600];
static unsigned serial;

static RAW *raw_connect(void);
static void raw_close(RAW *c);
static void raw_ok(RAW *c, const char *sql);
static long raw_count(RAW *c, const char *sql);

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
        snprintf(url, sizeof(url), "%s_busy_%ld_%u", getenv(BUSY_URL_ENV), (long)getpid(),
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
        RAW *m = raw_connect();

        assert_int_equal(store_get(f->s, "busy-1", &op), 0);
        assert_int_equal(op.state, OP_SUCCEEDED);
        assert_int_equal(raw_count(m, "SELECT count(*) FROM calls WHERE ended = 1"), 1);
        assert_int_equal(raw_count(m, "SELECT n FROM counters WHERE name = 'succeeded'"), 1);
        raw_close(m);
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
        RAW *other;

        (void)state;
        fixture_open(&f);
        /* the store's session waits 1 s per statement (MariaDB's
         * innodb_lock_wait_timeout, PostgreSQL's lock_timeout), then the
         * server gives up (ER_LOCK_WAIT_TIMEOUT, 55P03) */
        assert_int_equal(store_set_busy_timeout(f.s, 1000), 0);
        other = raw_connect();
        raw_ok(other, RAW_BEGIN);
        snprintf(sql, sizeof(sql), "SELECT id FROM operations WHERE id = %lld FOR UPDATE",
                 (long long)f.op.id);
        raw_ok(other, sql);
        double t0 = now_s();
        assert_int_equal(pthread_create(&th, NULL, settle_thread, &t), 0);
        while (now_s() - t0 < 2.5)
                usleep(10000);
        raw_ok(other, "COMMIT");
        assert_int_equal(pthread_join(th, NULL), 0);
        raw_close(other);
        assert_int_equal(t.result, 0);
        /* no single try can wait more than 1 s: it was tried again */
        assert_true(t.took >= 2.0);
        fixture_check(&f);
}

#endif
