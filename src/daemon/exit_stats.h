/*
 * exit_stats — what the running exit counts about itself for operators:
 * starts by kind, call ends by class, operations closed, call latency, slot
 * lateness, attempts per closed operation and provider-wide holds. The
 * dispatcher calls the exit_stats_*() hooks from its loop (one line each) and
 * exit_stats_flush() once a second, which writes one exit sample to the store
 * (store_sample_put): the per-second deltas in the sample's columns and the
 * cumulative counters as JSON in its `figures` text. Any API process reads
 * them back from the store, so /metrics works beside a dispatcher in another
 * process.
 *
 * Counters are cumulative since this dispatcher started (a restart resets
 * them, which Prometheus counters allow); the store's own counts (backlog by
 * state, calls total) survive restarts and come from the store.
 *
 * With [exit] shares = N each dispatcher writes the samples of its own share
 * (the store keys them by at and share). The readers below give the
 * ACCOUNT's view: the shares' samples of one wall-clock second merged, so
 * in-flight and counts add up, the oldest open operation is the oldest of
 * any, and the exit is held if any share is held. With one share they give
 * exactly that share's samples.
 *
 * The exit_stats object is used from the dispatcher's thread only; the
 * readers are plain functions of a store. Never logs.
 */
#ifndef TG_EXIT_STATS_H
#define TG_EXIT_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/classify.h"
#include "core/policy.h"
#include "core/tg_time.h"
#include "store/store.h"

/* Histogram upper bounds (the +Inf bucket is implicit). The API renders them
 * as Prometheus `le` labels, so they are part of the metrics interface. */
#define EXIT_LATENCY_BUCKETS 11
extern const double exit_latency_bounds_s[EXIT_LATENCY_BUCKETS];
#define EXIT_LATENESS_BUCKETS 10
extern const double exit_lateness_bounds_s[EXIT_LATENESS_BUCKETS];
#define EXIT_ATTEMPTS_BUCKETS 6
extern const double exit_attempts_bounds[EXIT_ATTEMPTS_BUCKETS];
#define EXIT_WAIT_BUCKETS 12
extern const double exit_wait_bounds_s[EXIT_WAIT_BUCKETS];

/* Why an operation waits between two of its calls (the `reason` label of
 * tollgate_retry_wait_seconds). */
enum exit_wait {
        EXIT_WAIT_BACKOFF, /* a re-send's backoff with jitter (Retry-After its floor) */
        EXIT_WAIT_QUERY,   /* an unknown outcome's interval before its next query */
        EXIT_WAIT_HOLD,    /* a provider-wide hold (429/503, a run of timeouts): every start */
};
#define EXIT_WAIT_COUNT 3
/* "backoff", "query", "hold" */
const char *exit_wait_name(enum exit_wait reason);

/* Keep samples this long by default (GET /v1/stats shows at most the last
 * hour; the console and `tollgate report` read further back, as far as
 * stats.keep_hours says: exit_stats_set_keep()). */
#define EXIT_SAMPLES_KEEP_MS (3600LL * 1000)

struct exit_stats;

/* 0 or TG_ENOMEM. Free with exit_stats_free() (accepts NULL). */
int exit_stats_new(tg_wall_ms now, struct exit_stats **ret_stats);
void exit_stats_free(struct exit_stats *xs);

/* A call was handed to the transport at `start`. `ready` is when the exit
 * could first have started it: the later of its slot and the last time the
 * store had nothing to claim (work arrived after that). Lateness is start -
 * ready; it is not counted when ready is unknown (< 0). */
void exit_stats_started(struct exit_stats *xs, enum tg_call_kind kind, tg_mono_ns ready,
                        tg_mono_ns start);

/* A call of `kind` ended with class cls after latency_us; the operation
 * (which has made `attempts` POSTs) went to `next` (OP_IN_FLIGHT when the
 * settle did not commit). The latency is counted overall and by kind. */
void exit_stats_ended(struct exit_stats *xs, enum tg_call_kind kind, enum tg_class cls,
                      int64_t latency_us, enum op_state next, unsigned attempts);

/* The provider told the whole exit to hold (429/503, a run of timeouts)
 * until `until` (wall time; a probe follows). The latest end goes into the
 * figures as "hold_until", for the console's exit status. */
void exit_stats_held(struct exit_stats *xs, tg_wall_ms until);

/* The start rate in force (exit.adaptive moves it under the ceiling; a
 * fixed exit keeps the configured one) and the cuts so far: "rate" and
 * "rate_cuts" in the figures (shares add up to the account's). */
void exit_stats_rate(struct exit_stats *xs, double rate, uint64_t cuts);

/* Samples older than keep_ms are pruned at each flush (default
 * EXIT_SAMPLES_KEEP_MS). */
void exit_stats_set_keep(struct exit_stats *xs, int64_t keep_ms);

/* A wait was decided: an operation's before its next call (backoff, query),
 * or the whole exit's (hold), of wait_ms. */
void exit_stats_waited(struct exit_stats *xs, enum exit_wait reason, int64_t wait_ms);

/* Takes one sample of `share` for the second ending at `now` (figures as
 * JSON) into *ret_sample, to be written with store_sample_put(store,
 * sample, *ret_keep_after, mono_now) (samples before keep_after pruned),
 * and starts the next second's deltas. */
void exit_stats_take(struct exit_stats *xs, int64_t epoch, unsigned share, unsigned in_flight,
                     bool held, tg_wall_ms now, struct exit_sample *ret_sample,
                     tg_wall_ms *ret_keep_after);

/* A sample taken that the store did not take: its deltas go into the
 * next. */
void exit_stats_give_back(struct exit_stats *xs, const struct exit_sample *sample);

/* Takes a sample and writes it now (mono_now: the monotonic clock, for
 * store_sample_put()). Returns the store's code; the deltas are kept for
 * the next try on failure. */
int exit_stats_flush(struct exit_stats *xs, struct store *store, int64_t epoch, unsigned share,
                     unsigned in_flight, bool held, tg_wall_ms now, tg_mono_ns mono_now);

/* The account's seconds with a sample at > since, oldest first, at most
 * `seconds` of them: for each wall-clock second (at / 1000) the samples of
 * every share in it merged into one: starts, call_ends, op_closes and
 * in_flight summed, held if any, oldest_open_accepted_at the oldest, at,
 * epoch and backlog (the account's, counted by each writer) the newest, share the number of samples merged, figures "". A share
 * with two samples in one second (a wall clock step) counts its counts twice
 * but its in-flight once (the newer). Paged through store_list_samples(), so
 * memory does not grow with N. A non-zero return from fn stops the walk and
 * is returned; a store error is returned as is. */
int exit_stats_read_seconds(struct store *store, tg_wall_ms since, unsigned seconds,
                            store_sample_fn fn, void *userdata);

/* The account now: the newest sample of every share with at >= now -
 * fresh_ms, merged as above, with the cumulative figures summed (counters
 * and histogram buckets add up, "since" is the earliest; one share's figures
 * are copied as they are); *ret_fresh = true. When no share wrote that
 * recently: the newest sample of any share as it is, *ret_fresh = false.
 * TG_ENOTFOUND when no sample was ever written; else 0 or the store's code. */
int exit_stats_read_now(struct store *store, tg_wall_ms now, int64_t fresh_ms,
                        struct exit_sample *ret_sample, bool *ret_fresh);

#endif
