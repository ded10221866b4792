/*
 * store_worker: the dispatcher's store work on its own thread. Jobs run in
 * the order posted and their results come back in that order on the
 * poster's thread; jobs of one kind that waited together run in one go; the
 * poster's lock keeps the thread off the store; without a bell the job runs
 * inside the post (the synchronous twin of the virtual-time tests).
 *
 * The jobs here do not touch the store (the worker only hands it over), so
 * the store pointer is a stand-in.
 */
#include "check.h"
#include "core/tg_error.h"
#include "daemon/store_worker.h"
#include "platform/clock.h"
#include "platform/wake.h"
#include <cmocka.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct store *const STORE = (struct store *)(uintptr_t)0x5105;

struct log {
        pthread_mutex_t mu;
        int ran[64]; /* job numbers, in the order they ran */
        unsigned nran;
        int done[64]; /* job numbers, in the order their results came */
        unsigned ndone;
        unsigned batches[64]; /* sizes of the many() calls */
        unsigned nbatches;
        pthread_t runner; /* the thread the last job ran on */
        bool bad_store;
        /* the first job waits here until the test lets it go */
        bool gate_closed;
        pthread_cond_t gate;
};

struct job {
        struct log *log;
        int n;
        int result_seen;
        tg_mono_ns took;
};

static void ran(struct job *j, struct store *store)
{
        pthread_mutex_lock(&j->log->mu);
        j->log->ran[j->log->nran++] = j->n;
        j->log->runner = pthread_self();
        if (store != STORE)
                j->log->bad_store = true;
        while (j->log->gate_closed)
                pthread_cond_wait(&j->log->gate, &j->log->mu);
        pthread_mutex_unlock(&j->log->mu);
}

static int run_one(struct store *store, void *arg)
{
        struct job *j = arg;

        ran(j, store);
        return -j->n; /* a result to carry back */
}

static void run_many(struct store *store, void *const *args, unsigned n, int *results)
{
        struct job *first = args[0];

        pthread_mutex_lock(&first->log->mu);
        first->log->batches[first->log->nbatches++] = n;
        pthread_mutex_unlock(&first->log->mu);
        for (unsigned i = 0; i < n; i++) {
                ran(args[i], store);
                results[i] = -((struct job *)args[i])->n;
        }
}

static void done(void *arg, int result, tg_mono_ns took)
{
        struct job *j = arg;

        j->result_seen = result;
        j->took = took;
        j->log->done[j->log->ndone++] = j->n;
}

static tg_mono_ns now(void *ctx)
{
        (void)ctx;
        return clock_mono_now();
}

static void log_init(struct log *l)
{
        memset(l, 0, sizeof(*l));
        pthread_mutex_init(&l->mu, NULL);
        pthread_cond_init(&l->gate, NULL);
}

static void gate_open(struct log *l)
{
        pthread_mutex_lock(&l->mu);
        l->gate_closed = false;
        pthread_cond_broadcast(&l->gate);
        pthread_mutex_unlock(&l->mu);
}

static unsigned ran_count(struct log *l)
{
        pthread_mutex_lock(&l->mu);
        unsigned n = l->nran;
        pthread_mutex_unlock(&l->mu);
        return n;
}

/* A worker on its own thread, its bell and a fresh log. */
struct fixture {
        struct store_worker *w;
        struct wake *bell;
        struct log l;
};

static int setup_threaded(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));

        if (!f)
                return -1;
        log_init(&f->l);
        if (wake_new(&f->bell) != 0 || store_worker_new(STORE, f->bell, now, NULL, &f->w) != 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown_threaded(void **state)
{
        struct fixture *f = *state;

        store_worker_free(f->w);
        wake_free(f->bell);
        free(f);
        return 0;
}

/* Without a bell: no thread; run and result inside the post. */
static void test_inline_runs_in_the_post(void **state)
{
        struct store_worker *w = NULL;
        struct log l;
        struct job j = {.log = &l, .n = 7};

        (void)state;
        log_init(&l);
        assert_int_equal(store_worker_new(STORE, NULL, now, NULL, &w), 0);
        assert_false(store_worker_threaded(w));
        store_worker_post(w, run_one, run_many, done, &j);
        assert_int_equal(l.nran, 1);
        assert_int_equal(l.ndone, 1);
        assert_int_equal(j.result_seen, -7);
        assert_true(pthread_equal(l.runner, pthread_self()));
        assert_int_equal(l.nbatches, 0); /* one at a time */
        assert_int_equal(store_worker_pending(w), 0);
        assert_false(l.bad_store);
        store_worker_free(w);
}

/* On the thread: in order, results back in order on this thread, only when
 * collected; the bell rings for them. */
static void test_thread_keeps_order(void **state)
{
        struct fixture *f = *state;
        struct store_worker *w = f->w;
        struct wake *bell = f->bell;
        struct log *l = &f->l;
        struct job j[20];

        assert_true(store_worker_threaded(w));
        for (int i = 0; i < 20; i++) {
                j[i] = (struct job){.log = l, .n = i + 1};
                store_worker_post(w, run_one, NULL, done, &j[i]);
        }
        assert_int_equal(store_worker_pending(w), 20);
        for (int tries = 0; ran_count(l) < 20 && tries < 5000; tries++)
                clock_sleep_ns(TG_NS_PER_MS);
        assert_int_equal(ran_count(l), 20);
        assert_int_equal(l->ndone, 0); /* nothing taken before collect */
        assert_true(wake_drain(bell));
        assert_false(pthread_equal(l->runner, pthread_self()));
        unsigned got = 0;
        for (int tries = 0; got < 20 && tries < 5000; tries++) {
                got += store_worker_collect(w);
                if (got < 20)
                        clock_sleep_ns(TG_NS_PER_MS);
        }
        assert_int_equal(got, 20);
        assert_int_equal(store_worker_pending(w), 0);
        for (int i = 0; i < 20; i++) {
                assert_int_equal(l->ran[i], i + 1);
                assert_int_equal(l->done[i], i + 1);
                assert_int_equal(j[i].result_seen, -(i + 1));
                assert_true(j[i].took >= 0);
        }
        assert_false(l->bad_store);
}

/* Jobs of one kind that waited together run in one many(); another kind
 * between them splits the batch, and the order holds. */
static void test_waiting_jobs_of_a_kind_run_together(void **state)
{
        struct fixture *f = *state;
        struct store_worker *w = f->w;
        struct log *l = &f->l;
        struct job j[8];

        l->gate_closed = true;
        j[0] = (struct job){.log = l, .n = 1};
        store_worker_post(w, run_one, NULL, done, &j[0]); /* holds the thread */
        for (int tries = 0; ran_count(l) < 1 && tries < 5000; tries++)
                clock_sleep_ns(TG_NS_PER_MS);
        assert_int_equal(ran_count(l), 1);
        /* meanwhile: three of a kind, one other, two of the kind */
        for (int i = 1; i < 7; i++) {
                j[i] = (struct job){.log = l, .n = i + 1};
                store_worker_post(w, run_one, i == 4 ? NULL : run_many, done, &j[i]);
        }
        gate_open(l);
        store_worker_drain(w);
        assert_int_equal(store_worker_pending(w), 0);
        assert_int_equal(l->nran, 7);
        assert_int_equal(l->ndone, 7);
        for (int i = 0; i < 7; i++) {
                assert_int_equal(l->ran[i], i + 1);
                assert_int_equal(l->done[i], i + 1);
                assert_int_equal(j[i].result_seen, -(i + 1));
        }
        assert_int_equal(l->nbatches, 2);
        assert_int_equal(l->batches[0], 3);
        assert_int_equal(l->batches[1], 2);
}

/* While the poster holds the store, the thread runs nothing. */
static void test_lock_keeps_the_thread_off_the_store(void **state)
{
        struct fixture *f = *state;
        struct store_worker *w = f->w;
        struct log *l = &f->l;
        struct job j = {.log = l, .n = 1};

        store_worker_lock(w);
        store_worker_post(w, run_one, NULL, done, &j);
        clock_sleep_ns(50 * TG_NS_PER_MS);
        assert_int_equal(ran_count(l), 0);
        store_worker_unlock(w);
        store_worker_drain(w);
        assert_int_equal(l->nran, 1);
        assert_int_equal(l->ndone, 1);
}

/* Freeing the worker runs and collects what was posted. */
static void test_free_finishes_the_jobs_posted(void **state)
{
        struct fixture *f = *state;
        struct store_worker *w = f->w;
        struct log *l = &f->l;
        struct job j[5];

        for (int i = 0; i < 5; i++) {
                j[i] = (struct job){.log = l, .n = i + 1};
                store_worker_post(w, run_one, run_many, done, &j[i]);
        }
        store_worker_free(w);
        f->w = NULL; /* freed here: the test */
        assert_int_equal(l->nran, 5);
        assert_int_equal(l->ndone, 5);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_inline_runs_in_the_post),
            cmocka_unit_test_setup_teardown(test_thread_keeps_order, setup_threaded,
                                            teardown_threaded),
            cmocka_unit_test_setup_teardown(test_waiting_jobs_of_a_kind_run_together,
                                            setup_threaded, teardown_threaded),
            cmocka_unit_test_setup_teardown(test_lock_keeps_the_thread_off_the_store,
                                            setup_threaded, teardown_threaded),
            cmocka_unit_test_setup_teardown(test_free_finishes_the_jobs_posted, setup_threaded,
                                            teardown_threaded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
