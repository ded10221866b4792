/*
 * The arrival log: one entry per request the stub received on a contract
 * path, in arrival order, numbered from 1. An entry is added when the request
 * arrives and completed when its answer is known (status or "dropped") and
 * when its connection finished. Readable live as JSON lines and written to a
 * file on exit. Bounded: past max entries the log counts, never grows.
 *
 * Thread-safe: every function takes the log's own lock.
 */
#ifndef STUB_RECORD_H
#define STUB_RECORD_H

#include "core/tg_time.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct record_log;

/* What is known when a request arrives; strings are copied (NULL allowed). */
struct record_arrival {
        tg_mono_ns mono;    /* CLOCK_MONOTONIC at arrival */
        tg_mono_ns elapsed; /* since the stub started */
        tg_wall_ms wall;
        const char *method;
        const char *path;
        const char *idempotency_key;
        const char *request_id;
        const char *attempt;
        const char *traceparent;    /* the W3C trace context the client sent */
        const char *api_version;    /* its Stripe-Version (the API version it pins) */
        const char *starting_after; /* a list GET's page cursor (the stripe shape's), or NULL */
        uint64_t conn_id;
        uint64_t open_requests; /* contract requests open at arrival, this one included */
        const char *mode;       /* mode applied, "MODE[:PARAM]" */
        long phase;             /* timeline phase index, -1 for queries */
};

struct record_log *record_log_new(size_t max_entries);
void record_log_free(struct record_log *log);

/* Adds an entry; returns its number (>= 1) even when the bound dropped it. */
uint64_t record_add(struct record_log *log, const struct record_arrival *a);
/* The answer given: an HTTP status, or status 0 for "dropped". */
void record_answer(struct record_log *log, uint64_t seq, int status, bool executed);
/* What the stub checked of a request besides its content: its client
 * certificate ("verified"/"none"), API key and signature ("ok", "missing",
 * "wrong", "stale"); NULL: not checked (the field is left out). body
 * (NULL: not kept) is the request body, kept up to 4096 bytes for
 * --record-bodies. Never a secret. */
void record_checks(struct record_log *log, uint64_t seq, const char *client_cert, const char *auth,
                   const char *signature, const char *body, size_t body_len);
/* Marks that the request's bytes were (or were not) all handed to the client. */
void record_delivered(struct record_log *log, uint64_t seq, bool delivered);

/* Entries numbered > since, at most limit, as JSON lines (malloc'd) or NULL. */
char *record_dump(struct record_log *log, uint64_t since, size_t limit);
/* Writes every entry as JSON lines to f. Returns 0 or -errno. */
int record_write(struct record_log *log, FILE *f);

/* Forgets all entries; numbering continues after the last one. */
void record_reset(struct record_log *log);

/* Entries received (stored or not) and entries dropped by the bound. */
void record_counts(struct record_log *log, uint64_t *ret_total, uint64_t *ret_overflow);

#endif
