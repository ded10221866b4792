/*
 * exit_stats — the dispatcher's own counters (see the header). Histograms
 * keep one count per bucket (not cumulative); the reader makes them
 * cumulative for Prometheus. Invariants: every counter only grows; the
 * per-second deltas are cleared only after a sample was written.
 */
#include "app/exit_stats.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"

const double exit_latency_bounds_s[EXIT_LATENCY_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                            0.5,   1.0,  2.5,   5.0,  10.0};
const double exit_lateness_bounds_s[EXIT_LATENESS_BUCKETS] = {0.001, 0.005, 0.01, 0.025, 0.05,
                                                              0.1,   0.25,  0.5,  1.0,   5.0};
const double exit_attempts_bounds[EXIT_ATTEMPTS_BUCKETS] = {1, 2, 3, 4, 5, 10};

#define KINDS 4

struct histo {
        uint64_t buckets[16]; /* [n] is +Inf */
        double sum;
        uint64_t count;
};

struct exit_stats {
        tg_wall_ms since;
        uint64_t starts[KINDS];
        uint64_t ends[TG_CLASS_COUNT];
        uint64_t closes[OP_STATE_COUNT];
        uint64_t holds;
        struct histo latency, lateness, attempts;
        /* since the last sample */
        unsigned sec_starts, sec_ends, sec_closes;
};

static void histo_add(struct histo *h, const double *bounds, unsigned n, double v)
{
        unsigned i = 0;

        while (i < n && v > bounds[i])
                i++;
        h->buckets[i]++;
        h->sum += v;
        h->count++;
}

static json_t *histo_json(const struct histo *h, unsigned n)
{
        json_t *b = json_array();

        for (unsigned i = 0; b && i <= n; i++)
                json_array_append_new(b, json_integer((json_int_t)h->buckets[i]));
        return json_pack("{s:o, s:f, s:I}", "buckets", b ? b : json_array(), "sum", h->sum, "count",
                         (json_int_t)h->count);
}

int exit_stats_new(tg_wall_ms now, struct exit_stats **ret_stats)
{
        struct exit_stats *xs = calloc(1, sizeof(*xs));

        if (!xs)
                return TG_ENOMEM;
        xs->since = now;
        *ret_stats = xs;
        return 0;
}

void exit_stats_free(struct exit_stats *xs)
{
        free(xs);
}

void exit_stats_started(struct exit_stats *xs, enum tg_call_kind kind, tg_mono_ns ready,
                        tg_mono_ns start)
{
        if (!xs)
                return;
        if ((unsigned)kind < KINDS)
                xs->starts[kind]++;
        xs->sec_starts++;
        if (ready >= 0) {
                tg_mono_ns late = start > ready ? start - ready : 0;
                histo_add(&xs->lateness, exit_lateness_bounds_s, EXIT_LATENESS_BUCKETS,
                          (double)late / (double)TG_NS_PER_S);
        }
}

void exit_stats_ended(struct exit_stats *xs, enum tg_class cls, int64_t latency_us,
                      enum op_state next, unsigned attempts)
{
        if (!xs)
                return;
        if ((unsigned)cls < TG_CLASS_COUNT)
                xs->ends[cls]++;
        xs->sec_ends++;
        histo_add(&xs->latency, exit_latency_bounds_s, EXIT_LATENCY_BUCKETS,
                  (double)(latency_us > 0 ? latency_us : 0) / 1e6);
        if (next == OP_SUCCEEDED || next == OP_REJECTED || next == OP_MANUAL) {
                xs->closes[next]++;
                xs->sec_closes++;
                histo_add(&xs->attempts, exit_attempts_bounds, EXIT_ATTEMPTS_BUCKETS,
                          (double)attempts);
        }
}

void exit_stats_held(struct exit_stats *xs)
{
        if (xs)
                xs->holds++;
}

static json_t *figures_json(const struct exit_stats *xs)
{
        json_t *starts = json_object(), *ends = json_object(), *closes = json_object();
        json_t *o;

        if (!starts || !ends || !closes)
                goto fail;
        for (unsigned k = 0; k < KINDS; k++)
                json_object_set_new(starts, tg_call_kind_name((enum tg_call_kind)k),
                                    json_integer((json_int_t)xs->starts[k]));
        for (unsigned c = 0; c < TG_CLASS_COUNT; c++)
                json_object_set_new(ends, tg_class_name((enum tg_class)c),
                                    json_integer((json_int_t)xs->ends[c]));
        json_object_set_new(closes, "succeeded",
                            json_integer((json_int_t)xs->closes[OP_SUCCEEDED]));
        json_object_set_new(closes, "rejected", json_integer((json_int_t)xs->closes[OP_REJECTED]));
        json_object_set_new(closes, "manual", json_integer((json_int_t)xs->closes[OP_MANUAL]));
        o = json_pack("{s:I, s:o, s:o, s:o, s:I, s:o, s:o, s:o}", "since", (json_int_t)xs->since,
                      "starts", starts, "ends", ends, "closes", closes, "holds",
                      (json_int_t)xs->holds, "latency_s",
                      histo_json(&xs->latency, EXIT_LATENCY_BUCKETS), "lateness_s",
                      histo_json(&xs->lateness, EXIT_LATENESS_BUCKETS), "attempts",
                      histo_json(&xs->attempts, EXIT_ATTEMPTS_BUCKETS));
        return o;
fail:
        json_decref(starts);
        json_decref(ends);
        json_decref(closes);
        return NULL;
}

int exit_stats_flush(struct exit_stats *xs, struct store *store, int64_t epoch, unsigned in_flight,
                     bool held, tg_wall_ms now)
{
        struct exit_sample *s;
        json_t *fig;
        int r;

        if (!xs || !store)
                return TG_EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return TG_ENOMEM;
        s->at = now;
        s->epoch = epoch;
        s->in_flight = in_flight;
        s->starts = xs->sec_starts;
        s->call_ends = xs->sec_ends;
        s->op_closes = xs->sec_closes;
        s->held = held;
        fig = figures_json(xs);
        if (fig) {
                /* A figures text that does not fit is left out, not cut. */
                if (json_dumpb(fig, s->figures, sizeof(s->figures) - 1, JSON_COMPACT) >
                    sizeof(s->figures) - 1)
                        s->figures[0] = '\0';
                json_decref(fig);
        }
        r = store_sample_put(store, s, now - EXIT_SAMPLES_KEEP_MS);
        if (r == 0) {
                xs->sec_starts = 0;
                xs->sec_ends = 0;
                xs->sec_closes = 0;
        }
        free(s);
        return r;
}
