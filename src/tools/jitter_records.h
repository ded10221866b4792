/*
 * jitter_records — seed 004's first self-check on real records: "lay last
 * time's failure records out by the second: how many did the busiest second
 * hold?" Reads a call log (tollgate's own, JSON lines as `tollgate calls`
 * prints them, or its csv) or a CSV of another system's failures, and
 * measures how the records actually clustered: the busiest second and
 * minute, the peak against a stated capacity, and whether they are spread
 * as jitter would spread them, judged against the same number of records
 * thrown uniformly at random over the same span (seeded draws).
 *
 * Input, one of:
 *   - JSON lines (the first non-blank byte is '{'): each object has
 *     "start_wall" (ms since the epoch) and optionally "kind" (first, retry,
 *     query, manual): a call of tollgate's call log;
 *   - CSV with a header line: the time column is the first named one of
 *     start_wall, time, timestamp, at, ts, failed_at (any case); a value is
 *     an RFC 3339 time, or a number of seconds since the epoch (decimals
 *     allowed), or of milliseconds when it is above 1e11; an optional "kind"
 *     column as above. Quoted fields ("a, b" and "") are read.
 * A record whose kind is not "first" is a repeat (a retry, a query, an
 * operator's re-send); without a kind every record is one (a failure log).
 *
 * Bounds: JITTER_RECORDS_MAX records and JITTER_RECORDS_LINE bytes a line;
 * past either, TG_EFULL / TG_EPARSE with the line number, never a silent
 * cut. A span longer than JITTER_RECORDS_SPAN_MAX_S is TG_ERANGE.
 */
#ifndef TG_JITTER_RECORDS_H
#define TG_JITTER_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/tg_time.h"

#define JITTER_RECORDS_MAX        5000000u
#define JITTER_RECORDS_LINE       8192
#define JITTER_RECORDS_SPAN_MAX_S (400LL * 24 * 3600)

struct jitter_records;

enum jitter_records_format {
        JITTER_RECORDS_CALL_LOG, /* JSON lines of tollgate's call log */
        JITTER_RECORDS_CSV,
};

/* Reads every record of f. 0 and *ret_records (free with
 * jitter_records_free), or TG_EPARSE (a bad line: *ret_line says which,
 * and ret_why, when not NULL, a static word on what), TG_EFULL, TG_ENOMEM,
 * TG_ERANGE (span too long), TG_ENOTFOUND (no record). */
int jitter_records_read(FILE *f, struct jitter_records **ret_records, size_t *ret_line,
                        const char **ret_why);
void jitter_records_free(struct jitter_records *records);

/* One group's clustering. */
struct jitter_records_peak {
        size_t count;             /* records in the group */
        unsigned second_peak;     /* most records in one calendar second */
        tg_wall_ms second_at;     /* the start of that second (the first such) */
        unsigned minute_peak;     /* most records in one calendar minute */
        tg_wall_ms minute_at;     /* the start of that minute */
        size_t seconds_busy;      /* seconds with at least one record */
        size_t seconds_over;      /* seconds with more than the capacity (0 if none stated) */
        unsigned random_p95_peak; /* 95th percentile of the busiest second of `count` records
                                   * thrown uniformly over the same span (seeded draws) */
        unsigned random_trials;   /* how many such draws (the asked number, cut so that
                                   * a huge file still takes seconds) */
        bool clustered;           /* second_peak > random_p95_peak: bunched together */
};

struct jitter_records_summary {
        enum jitter_records_format format;
        bool has_kind;                /* records say which are repeats */
        tg_wall_ms first_ms, last_ms; /* the span of all records */
        struct jitter_records_peak all;
        struct jitter_records_peak repeats; /* records whose kind is not "first" */
};

/* Measures the records against `capacity` records a second (0: not stated),
 * comparing with `trials` random spreads drawn from `seed`. 0, TG_EINVAL
 * (trials 0), TG_ENOMEM. */
int jitter_records_measure(const struct jitter_records *records, unsigned capacity, unsigned trials,
                           uint64_t seed, struct jitter_records_summary *ret_summary);

#endif
