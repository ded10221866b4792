/*
 * bench_util.h — the small helpers every bench repeated: now_s(), the
 * monotonic clock in seconds; sink() and keep(), libcurl write callbacks
 * that drop the body or keep the first 64 KiB of it in a struct buf; die(),
 * which ends a bench on a tollgate error code; cmp_double() and pct(), for
 * sorting timings and reading a percentile off them. static inline, so each
 * bench keeps its own copy without a library to link and without a warning
 * where one of them goes unused.
 *
 * A bench defines BENCH_NAME, its program name as a string, before it
 * includes this file: die() starts its message with it.
 */
#ifndef TG_BENCH_UTIL_H
#define TG_BENCH_UTIL_H

#ifndef BENCH_NAME
#error "define BENCH_NAME (the bench's name, for messages) before including bench_util.h"
#endif

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/tg_error.h"

/* The monotonic clock, in seconds: for intervals, never for wall time. */
static inline double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CURLOPT_WRITEFUNCTION for an answer whose body is not read: takes it all. */
static inline size_t sink(char *p, size_t size, size_t n, void *userdata)
{
        (void)p;
        (void)userdata;
        return size * n;
}

/* A fixed buffer for the few answers a bench reads; zero len before reuse. */
struct buf {
        char data[65536];
        size_t len;
};

/* CURLOPT_WRITEFUNCTION with a struct buf as CURLOPT_WRITEDATA: appends what
 * fits, drops the rest, and keeps data NUL-terminated. */
static inline size_t keep(char *p, size_t size, size_t n, void *userdata)
{
        struct buf *b = userdata;
        size_t len = size * n;
        size_t room = sizeof(b->data) - 1 - b->len;
        memcpy(b->data + b->len, p, len < room ? len : room);
        b->len += len < room ? len : room;
        b->data[b->len] = '\0';
        return len;
}

/* Ends the bench: "BENCH_NAME: what: <tg_strerror(r)>" on stderr, exit 1. */
static inline void die(const char *what, int r)
{
        fprintf(stderr, BENCH_NAME ": %s: %s\n", what, tg_strerror(r));
        exit(1);
}

/* qsort comparator for doubles, ascending. */
static inline int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

/* The p-quantile (0..1) of v[0..n), sorted ascending: the nearest rank. */
static inline double pct(double *v, int n, double p)
{
        int i = (int)(p * (n - 1) + 0.5);

        return v[i < 0 ? 0 : (i >= n ? n - 1 : i)];
}

#endif
