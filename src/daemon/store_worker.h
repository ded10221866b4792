/*
 * store_worker — the dispatcher's store work on a thread of its own, so that
 * the loop that sends never waits for a commit at a slot (issue 14: at
 * 1,000 starts a second a claim's fsync or a MariaDB round trip that lands on
 * a slot makes that start late).
 *
 * The dispatcher posts jobs (a batch of claims, an outcome) with a function
 * that runs on the store and one that takes its result; the worker runs them
 * one at a time, in the order posted, on the dispatcher's own store
 * connection, and rings `bell` when one is done; the dispatcher collects the
 * results on its own thread (store_worker_collect), in the same order. So
 * the store sees the dispatcher's work exactly as it was posted, a little
 * later: a claim posted after an outcome finds that outcome committed.
 *
 * Without a bell (the fake environments that run the dispatcher in virtual
 * time: tests/unit/test_dispatcher.c, tollgate-sim) there is no thread: a job
 * runs and its result is taken inside store_worker_post, as a plain call
 * would be — the synchronous twin.
 *
 * The dispatcher may also use the store directly between
 * store_worker_lock() and store_worker_unlock() (a release, the once-a-
 * second housekeeping): the worker is then between jobs. No transaction is
 * open while the worker waits for work (invariant 2).
 */
#ifndef TG_STORE_WORKER_H
#define TG_STORE_WORKER_H

#include <stdbool.h>

#include "core/tg_time.h"

struct store;
struct wake;
struct store_worker;

/* Runs on the store (the worker's thread, or the poster's without one):
 * the job's result, 0 or a TG_E* code. */
typedef int (*store_job_run)(struct store *store, void *arg);
/* Runs n jobs of one kind in one go (one transaction: group commit),
 * results[i] for args[i]. */
typedef void (*store_job_many)(struct store *store, void *const *args, unsigned n, int *results);
/* Takes a job's result on the dispatcher's thread; `took` is how long
 * run() took on the clock given to store_worker_new. */
typedef void (*store_job_done)(void *arg, int result, tg_mono_ns took);

/* A worker for `store` (borrowed: it must outlive the worker). `bell`
 * (borrowed; NULL: no thread) is rung when a job is done; `now` reads the
 * clock a job's time is measured on. 0 or a TG_E* code. */
int store_worker_new(struct store *store, struct wake *bell, tg_mono_ns (*now)(void *ctx),
                     void *now_ctx, struct store_worker **ret_worker);

/* Stops the thread after the jobs posted have run, and collects them.
 * Accepts NULL. */
void store_worker_free(struct store_worker *worker);

/* Whether jobs run on a thread of their own. */
bool store_worker_threaded(const struct store_worker *worker);

/* Posts a job: run(store, arg) in its turn, then done(arg, result, took) on
 * this thread from store_worker_collect (without a thread: both before this
 * returns). With `many` (NULL: none), jobs of the same kind waiting next to
 * each other for the thread run together through it, up to
 * STORE_WORKER_BATCH (outcomes that came while the thread committed the last
 * ones share one commit); `took` is then the batch's. Never fails: when
 * memory for the job runs out, the jobs posted before it are waited for and
 * it runs at once. */
#define STORE_WORKER_BATCH 32
void store_worker_post(struct store_worker *worker, store_job_run run, store_job_many many,
                       store_job_done done, void *arg);

/* Runs a job now, on this thread, after every job posted before it, and
 * takes its result before returning (a job whose memory is the caller's
 * stack: the fallback when there is no memory for one to post). */
void store_worker_run_now(struct store_worker *worker, store_job_run run, store_job_done done,
                          void *arg);

/* Takes the results of the jobs done so far, in the order posted; how many. */
unsigned store_worker_collect(struct store_worker *worker);

/* Jobs posted whose results were not collected yet. */
unsigned store_worker_pending(const struct store_worker *worker);

/* Waits until every job posted has run, and collects them. */
void store_worker_drain(struct store_worker *worker);

/* The store to the caller alone until unlock (the worker finishes its
 * current job first). Not to be held while waiting for anything else. */
void store_worker_lock(struct store_worker *worker);
void store_worker_unlock(struct store_worker *worker);

#endif
