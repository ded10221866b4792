/*
 * bench_util.h — the small helpers every bench repeated: now_s(), the
 * monotonic clock in seconds, and sink(), a libcurl write callback that
 * drops the body. static inline, so each bench keeps its own copy without a
 * library to link and without a warning where one of them goes unused.
 */
#ifndef TG_BENCH_UTIL_H
#define TG_BENCH_UTIL_H

#include <stddef.h>
#include <time.h>

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

#endif
