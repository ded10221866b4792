/*
 * bench_util.h — the small helpers every bench repeated: now_s(), the
 * monotonic clock in seconds; sink() and keep(), libcurl write callbacks
 * that drop the body or keep the first 64 KiB of it in a struct buf.
 * static inline, so each bench keeps its own copy without a library to link
 * and without a warning where one of them goes unused.
 */
#ifndef TG_BENCH_UTIL_H
#define TG_BENCH_UTIL_H

#include <stddef.h>
#include <string.h>
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

#endif
