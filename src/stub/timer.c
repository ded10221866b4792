/*
 * A binary min-heap of deadlines served by one thread sleeping on a
 * CLOCK_MONOTONIC condition variable. Invariants: heap[0] is the earliest
 * deadline (ties in insertion order); the heap never holds more than max
 * items; a callback is called at most once, and never after timer_stop or
 * timer_free began (timer_stop hands the rest to its cancel function).
 */
#include "timer.h"

#include "core/tg_error.h"
#include "platform/clock.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct item {
        tg_mono_ns due;
        uint64_t order;
        timer_fn fn;
        void *arg;
};

struct timer {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        pthread_t thread;
        bool started;
        bool stopping;
        struct item *heap;
        size_t n;
        size_t max;
        uint64_t order;
};

static bool before(const struct item *a, const struct item *b)
{
        return a->due < b->due || (a->due == b->due && a->order < b->order);
}

static void swap(struct item *a, struct item *b)
{
        struct item tmp = *a;
        *a = *b;
        *b = tmp;
}

static void sift_up(struct timer *t, size_t i)
{
        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (!before(&t->heap[i], &t->heap[parent]))
                        break;
                swap(&t->heap[i], &t->heap[parent]);
                i = parent;
        }
}

static void sift_down(struct timer *t, size_t i)
{
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i;
                if (l < t->n && before(&t->heap[l], &t->heap[m]))
                        m = l;
                if (r < t->n && before(&t->heap[r], &t->heap[m]))
                        m = r;
                if (m == i)
                        return;
                swap(&t->heap[i], &t->heap[m]);
                i = m;
        }
}

static void *run(void *arg)
{
        struct timer *t = arg;
        pthread_mutex_lock(&t->lock);
        while (!t->stopping) {
                tg_mono_ns now;
                if (t->n == 0) {
                        pthread_cond_wait(&t->cond, &t->lock);
                        continue;
                }
                now = clock_mono_now();
                if (t->heap[0].due > now) {
                        struct timespec ts = clock_mono_timespec(t->heap[0].due);
                        pthread_cond_timedwait(&t->cond, &t->lock, &ts);
                        continue;
                }
                struct item it = t->heap[0];
                t->heap[0] = t->heap[--t->n];
                sift_down(t, 0);
                pthread_mutex_unlock(&t->lock);
                it.fn(it.arg);
                pthread_mutex_lock(&t->lock);
        }
        pthread_mutex_unlock(&t->lock);
        return NULL;
}

struct timer *timer_new(size_t max)
{
        struct timer *t = calloc(1, sizeof(*t));
        pthread_condattr_t attr;
        if (!t)
                return NULL;
        t->heap = calloc(max ? max : 1, sizeof(*t->heap));
        t->max = max;
        if (!t->heap) {
                free(t);
                return NULL;
        }
        pthread_mutex_init(&t->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&t->cond, &attr);
        pthread_condattr_destroy(&attr);
        if (pthread_create(&t->thread, NULL, run, t) != 0) {
                timer_free(t);
                return NULL;
        }
        t->started = true;
        return t;
}

static void join(struct timer *t)
{
        pthread_mutex_lock(&t->lock);
        t->stopping = true;
        pthread_cond_signal(&t->cond);
        pthread_mutex_unlock(&t->lock);
        if (t->started)
                pthread_join(t->thread, NULL);
        t->started = false;
}

void timer_stop(struct timer *t, timer_fn cancel)
{
        join(t);
        /* The thread is gone: only this caller touches the heap now. */
        while (t->n > 0) {
                struct item it = t->heap[0];
                t->heap[0] = t->heap[--t->n];
                sift_down(t, 0);
                cancel(it.arg);
        }
}

void timer_free(struct timer *t)
{
        if (!t)
                return;
        join(t);
        pthread_cond_destroy(&t->cond);
        pthread_mutex_destroy(&t->lock);
        free(t->heap);
        free(t);
}

int timer_add(struct timer *t, tg_mono_ns due, timer_fn fn, void *arg)
{
        int rc = 0;
        pthread_mutex_lock(&t->lock);
        if (t->stopping) {
                rc = TG_ESTATE;
        } else if (t->n >= t->max) {
                rc = TG_EFULL;
        } else {
                t->heap[t->n] = (struct item){due, t->order++, fn, arg};
                sift_up(t, t->n);
                t->n++;
                if (t->heap[0].order == t->order - 1)
                        pthread_cond_signal(&t->cond);
        }
        pthread_mutex_unlock(&t->lock);
        return rc;
}

size_t timer_pending(struct timer *t)
{
        size_t n;
        pthread_mutex_lock(&t->lock);
        n = t->n;
        pthread_mutex_unlock(&t->lock);
        return n;
}
