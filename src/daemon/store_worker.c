/*
 * store_worker — the dispatcher's store work on its own thread. See
 * store_worker.h.
 *
 * Two locks: `queue` guards the lists of jobs to run and jobs done, and
 * `store` is held while a job runs (and by store_worker_lock), so the store
 * connection is used by one thread at a time. The worker never holds both
 * at once but for the moment it moves a job between the lists.
 */
#include "daemon/store_worker.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/tg_error.h"
#include "platform/wake.h"

struct job {
        store_job_run run;
        store_job_many many;
        store_job_done done;
        void *arg;
        int result;
        tg_mono_ns took;
        struct job *next;
};

struct job_list {
        struct job *head, *tail;
};

struct store_worker {
        struct store *store;
        struct wake *bell;
        tg_mono_ns (*now)(void *ctx);
        void *now_ctx;
        bool threaded;
        pthread_t thread;
        pthread_mutex_t store_lock; /* held while a job runs on the store */
        pthread_mutex_t queue;      /* guards todo, done, running, quit */
        pthread_cond_t work;        /* a job posted, or quit */
        pthread_cond_t idle;        /* a job done */
        struct job_list todo, done;
        bool running; /* the worker has a job out of todo, not yet in done */
        bool quit;
        unsigned posted, collected; /* the poster's thread only */
};

static void list_push(struct job_list *l, struct job *j)
{
        j->next = NULL;
        if (l->tail)
                l->tail->next = j;
        else
                l->head = j;
        l->tail = j;
}

static struct job *list_pop(struct job_list *l)
{
        struct job *j = l->head;

        if (j) {
                l->head = j->next;
                if (!l->head)
                        l->tail = NULL;
        }
        return j;
}

/* Runs one job on the store, timing it. */
static void run_job(struct store_worker *w, struct job *j)
{
        pthread_mutex_lock(&w->store_lock);
        tg_mono_ns t0 = w->now(w->now_ctx);
        j->result = j->run(w->store, j->arg);
        j->took = w->now(w->now_ctx) - t0;
        pthread_mutex_unlock(&w->store_lock);
}

/* Runs jobs[0..n) of one kind through their `many`, timing the lot. */
static void run_batch(struct store_worker *w, struct job **jobs, unsigned n)
{
        void *args[STORE_WORKER_BATCH];
        int results[STORE_WORKER_BATCH];

        for (unsigned i = 0; i < n; i++)
                args[i] = jobs[i]->arg;
        pthread_mutex_lock(&w->store_lock);
        tg_mono_ns t0 = w->now(w->now_ctx);
        jobs[0]->many(w->store, args, n, results);
        tg_mono_ns took = w->now(w->now_ctx) - t0;
        pthread_mutex_unlock(&w->store_lock);
        for (unsigned i = 0; i < n; i++) {
                jobs[i]->result = results[i];
                jobs[i]->took = took;
        }
}

static void *worker_main(void *arg)
{
        struct store_worker *w = arg;
        struct job *batch[STORE_WORKER_BATCH];

        pthread_mutex_lock(&w->queue);
        for (;;) {
                struct job *j = list_pop(&w->todo);
                unsigned n = 1;
                if (!j) {
                        if (w->quit)
                                break;
                        pthread_cond_wait(&w->work, &w->queue);
                        continue;
                }
                batch[0] = j;
                /* the same kind waiting next: one go */
                while (j->many && n < STORE_WORKER_BATCH && w->todo.head &&
                       w->todo.head->many == j->many)
                        batch[n++] = list_pop(&w->todo);
                w->running = true;
                pthread_mutex_unlock(&w->queue);
                if (n > 1)
                        run_batch(w, batch, n);
                else
                        run_job(w, j);
                pthread_mutex_lock(&w->queue);
                w->running = false;
                for (unsigned i = 0; i < n; i++)
                        list_push(&w->done, batch[i]);
                pthread_cond_broadcast(&w->idle);
                /* rung with the queue held: the poster collects after the
                 * ring, and finds the job */
                wake_ring(w->bell);
        }
        pthread_mutex_unlock(&w->queue);
        return NULL;
}

int store_worker_new(struct store *store, struct wake *bell, tg_mono_ns (*now)(void *ctx),
                     void *now_ctx, struct store_worker **ret_worker)
{
        struct store_worker *w = calloc(1, sizeof(*w));

        if (!w)
                return TG_ENOMEM;
        w->store = store;
        w->bell = bell;
        w->now = now;
        w->now_ctx = now_ctx;
        pthread_mutex_init(&w->store_lock, NULL);
        pthread_mutex_init(&w->queue, NULL);
        pthread_cond_init(&w->work, NULL);
        pthread_cond_init(&w->idle, NULL);
        if (bell) {
                if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
                        store_worker_free(w);
                        return TG_ENOMEM;
                }
                w->threaded = true;
        }
        *ret_worker = w;
        return 0;
}

void store_worker_free(struct store_worker *w)
{
        if (!w)
                return;
        if (w->threaded) {
                store_worker_drain(w);
                pthread_mutex_lock(&w->queue);
                w->quit = true;
                pthread_cond_signal(&w->work);
                pthread_mutex_unlock(&w->queue);
                pthread_join(w->thread, NULL);
        }
        pthread_cond_destroy(&w->work);
        pthread_cond_destroy(&w->idle);
        pthread_mutex_destroy(&w->queue);
        pthread_mutex_destroy(&w->store_lock);
        free(w);
}

bool store_worker_threaded(const struct store_worker *w)
{
        return w->threaded;
}

void store_worker_post(struct store_worker *w, store_job_run run, store_job_many many,
                       store_job_done done, void *arg)
{
        struct job *j = w->threaded ? malloc(sizeof(*j)) : NULL;

        if (!j) {
                /* no thread (or no memory): now, after what was posted */
                store_worker_run_now(w, run, done, arg);
                return;
        }
        *j = (struct job){.run = run, .many = many, .done = done, .arg = arg};
        w->posted++;
        pthread_mutex_lock(&w->queue);
        list_push(&w->todo, j);
        pthread_cond_signal(&w->work);
        pthread_mutex_unlock(&w->queue);
}

void store_worker_run_now(struct store_worker *w, store_job_run run, store_job_done done, void *arg)
{
        struct job now = {.run = run, .done = done, .arg = arg};

        store_worker_drain(w);
        run_job(w, &now);
        done(arg, now.result, now.took);
}

unsigned store_worker_collect(struct store_worker *w)
{
        unsigned n = 0;

        for (;;) {
                pthread_mutex_lock(&w->queue);
                struct job *j = list_pop(&w->done);
                pthread_mutex_unlock(&w->queue);
                if (!j)
                        return n;
                /* counted first: a done() that posts again sees it gone */
                w->collected++;
                j->done(j->arg, j->result, j->took);
                free(j);
                n++;
        }
}

unsigned store_worker_pending(const struct store_worker *w)
{
        return w->posted - w->collected;
}

void store_worker_drain(struct store_worker *w)
{
        if (!w->threaded)
                return;
        pthread_mutex_lock(&w->queue);
        while (w->todo.head || w->running)
                pthread_cond_wait(&w->idle, &w->queue);
        pthread_mutex_unlock(&w->queue);
        store_worker_collect(w);
}

void store_worker_lock(struct store_worker *w)
{
        pthread_mutex_lock(&w->store_lock);
}

void store_worker_unlock(struct store_worker *w)
{
        pthread_mutex_unlock(&w->store_lock);
}
