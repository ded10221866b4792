/*
 * exit_stats — the dispatcher's own counters (see the header). Histograms
 * keep one count per bucket (not cumulative); the reader makes them
 * cumulative for Prometheus. Invariants: every counter only grows; the
 * per-second deltas are cleared only after a sample was written; the
 * account readers merge whole seconds only (a second cut by a page is read
 * again from its start), so no sample is counted twice or left out.
 */
#include "daemon/exit_stats.h"

#include <jansson.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"

const double exit_latency_bounds_s[EXIT_LATENCY_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                            0.5,   1.0,  2.5,   5.0,  10.0};
const double exit_lateness_bounds_s[EXIT_LATENESS_BUCKETS] = {0.001, 0.005, 0.01, 0.025, 0.05,
                                                              0.1,   0.25,  0.5,  1.0,   5.0};
const double exit_attempts_bounds[EXIT_ATTEMPTS_BUCKETS] = {1, 2, 3, 4, 5, 10};
const double exit_wait_bounds_s[EXIT_WAIT_BUCKETS] = {0.1, 0.25, 0.5, 1,  2,   4,
                                                      8,   15,   30,  60, 120, 300};

static const char *const wait_names[EXIT_WAIT_COUNT] = {
    [EXIT_WAIT_BACKOFF] = "backoff", [EXIT_WAIT_QUERY] = "query", [EXIT_WAIT_HOLD] = "hold"};

const char *exit_wait_name(enum exit_wait reason)
{
        return (unsigned)reason < EXIT_WAIT_COUNT ? wait_names[reason] : "invalid";
}

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
        double rate;           /* the start rate in force */
        uint64_t rate_cuts;    /* exit.adaptive's cuts */
        tg_wall_ms hold_until; /* end of the latest hold; 0: none yet */
        int64_t keep_ms;
        struct histo latency, lateness, attempts;
        struct histo waits[EXIT_WAIT_COUNT];
        struct histo latency_by_kind[KINDS];
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
        xs->keep_ms = EXIT_SAMPLES_KEEP_MS;
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

void exit_stats_ended(struct exit_stats *xs, enum tg_call_kind kind, enum tg_class cls,
                      int64_t latency_us, enum op_state next, unsigned attempts)
{
        double s = (double)(latency_us > 0 ? latency_us : 0) / 1e6;

        if (!xs)
                return;
        if ((unsigned)cls < TG_CLASS_COUNT)
                xs->ends[cls]++;
        xs->sec_ends++;
        histo_add(&xs->latency, exit_latency_bounds_s, EXIT_LATENCY_BUCKETS, s);
        if ((unsigned)kind < KINDS)
                histo_add(&xs->latency_by_kind[kind], exit_latency_bounds_s, EXIT_LATENCY_BUCKETS,
                          s);
        if (next == OP_SUCCEEDED || next == OP_REJECTED || next == OP_MANUAL) {
                xs->closes[next]++;
                xs->sec_closes++;
                histo_add(&xs->attempts, exit_attempts_bounds, EXIT_ATTEMPTS_BUCKETS,
                          (double)attempts);
        }
}

void exit_stats_held(struct exit_stats *xs, tg_wall_ms until)
{
        if (!xs)
                return;
        xs->holds++;
        if (until > xs->hold_until)
                xs->hold_until = until;
}

void exit_stats_rate(struct exit_stats *xs, double rate, uint64_t cuts)
{
        if (!xs)
                return;
        xs->rate = rate;
        xs->rate_cuts = cuts;
}

void exit_stats_set_keep(struct exit_stats *xs, int64_t keep_ms)
{
        if (xs && keep_ms > 0)
                xs->keep_ms = keep_ms;
}

void exit_stats_waited(struct exit_stats *xs, enum exit_wait reason, int64_t wait_ms)
{
        if (!xs || (unsigned)reason >= EXIT_WAIT_COUNT)
                return;
        histo_add(&xs->waits[reason], exit_wait_bounds_s, EXIT_WAIT_BUCKETS,
                  (double)(wait_ms > 0 ? wait_ms : 0) / 1000.0);
}

static json_t *figures_json(const struct exit_stats *xs)
{
        json_t *starts = json_object(), *ends = json_object(), *closes = json_object();
        json_t *waits = json_object(), *by_kind = json_object();
        json_t *o;

        if (!starts || !ends || !closes || !waits || !by_kind)
                goto fail;
        for (unsigned w = 0; w < EXIT_WAIT_COUNT; w++)
                json_object_set_new(waits, wait_names[w],
                                    histo_json(&xs->waits[w], EXIT_WAIT_BUCKETS));
        for (unsigned k = 0; k < KINDS; k++)
                json_object_set_new(by_kind, tg_call_kind_name((enum tg_call_kind)k),
                                    histo_json(&xs->latency_by_kind[k], EXIT_LATENCY_BUCKETS));
        for (unsigned k = 0; k < KINDS; k++)
                json_object_set_new(starts, tg_call_kind_name((enum tg_call_kind)k),
                                    json_integer((json_int_t)xs->starts[k]));
        for (unsigned c = 0; c < TG_CLASS_COUNT; c++)
                json_object_set_new(ends, tg_class_name((enum tg_class)c),
                                    json_integer((json_int_t)xs->ends[c]));
        static const enum op_state closing[] = {OP_SUCCEEDED, OP_REJECTED, OP_MANUAL};
        for (size_t i = 0; i < sizeof(closing) / sizeof(closing[0]); i++)
                json_object_set_new(closes, op_state_name(closing[i]),
                                    json_integer((json_int_t)xs->closes[closing[i]]));
        o = json_pack("{s:I, s:o, s:o, s:o, s:I, s:I, s:o, s:o, s:o, s:o}", "since",
                      (json_int_t)xs->since, "starts", starts, "ends", ends, "closes", closes,
                      "holds", (json_int_t)xs->holds, "hold_until", (json_int_t)xs->hold_until,
                      "latency_s", histo_json(&xs->latency, EXIT_LATENCY_BUCKETS), "lateness_s",
                      histo_json(&xs->lateness, EXIT_LATENESS_BUCKETS), "attempts",
                      histo_json(&xs->attempts, EXIT_ATTEMPTS_BUCKETS), "latency_by_kind", by_kind);
        if (o) {
                json_object_set_new(o, "rate", json_real(xs->rate));
                json_object_set_new(o, "rate_cuts", json_integer((json_int_t)xs->rate_cuts));
                json_object_set_new(o, "waits_s", waits);
        } else
                json_decref(waits);
        return o;
fail:
        json_decref(by_kind);
        json_decref(starts);
        json_decref(ends);
        json_decref(closes);
        json_decref(waits);
        return NULL;
}

void exit_stats_take(struct exit_stats *xs, int64_t epoch, unsigned share, unsigned in_flight,
                     bool held, tg_wall_ms now, struct exit_sample *s, tg_wall_ms *ret_keep_after)
{
        json_t *fig;

        memset(s, 0, sizeof(*s));
        s->at = now;
        s->epoch = epoch;
        s->share = share;
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
        *ret_keep_after = now - xs->keep_ms;
        xs->sec_starts = 0;
        xs->sec_ends = 0;
        xs->sec_closes = 0;
}

void exit_stats_give_back(struct exit_stats *xs, const struct exit_sample *s)
{
        xs->sec_starts += s->starts;
        xs->sec_ends += s->call_ends;
        xs->sec_closes += s->op_closes;
}

int exit_stats_flush(struct exit_stats *xs, struct store *store, int64_t epoch, unsigned share,
                     unsigned in_flight, bool held, tg_wall_ms now, tg_mono_ns mono_now)
{
        struct exit_sample *s;
        tg_wall_ms keep_after;
        int r;

        if (!xs || !store)
                return TG_EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return TG_ENOMEM;
        exit_stats_take(xs, epoch, share, in_flight, held, now, s, &keep_after);
        r = store_sample_put(store, s, keep_after, mono_now);
        if (r < 0)
                exit_stats_give_back(xs, s);
        free(s);
        return r;
}

/* ---- the account view: the shares' samples merged ---------------------------------- */

#define READ_PAGE 1024 /* samples per store call; > any second's samples */

/* Folds sample x into the merged m (m->share counts the samples in it;
 * 0 starts a new merge). */
static void merge_into(struct exit_sample *m, const struct exit_sample *x)
{
        if (m->share == 0) {
                memset(m, 0, offsetof(struct exit_sample, figures));
                m->at = x->at;
                m->epoch = x->epoch;
                m->oldest_open_accepted_at = TG_WALL_NEVER;
        }
        /* The oldest open age is the largest any share saw; it is kept as
         * at - oldest_open_accepted_at of the merge. */
        int64_t age_m =
            m->oldest_open_accepted_at == TG_WALL_NEVER ? -1 : m->at - m->oldest_open_accepted_at;
        int64_t age_x =
            x->oldest_open_accepted_at == TG_WALL_NEVER ? -1 : x->at - x->oldest_open_accepted_at;
        int64_t age = age_m > age_x ? age_m : age_x;

        m->share++;
        if (x->at >= m->at) {
                m->at = x->at;
                m->epoch = x->epoch;
                memcpy(m->backlog, x->backlog, sizeof(m->backlog));
        }
        m->starts += x->starts;
        m->call_ends += x->call_ends;
        m->op_closes += x->op_closes;
        m->in_flight += x->in_flight;
        m->held = m->held || x->held;
        m->oldest_open_accepted_at = age < 0 ? TG_WALL_NEVER : m->at - age;
}

struct seconds_walk {
        store_sample_fn fn;
        void *userdata;
        unsigned left;         /* seconds still to hand out */
        unsigned rows;         /* rows seen in this page */
        int64_t second;        /* the second being merged; INT64_MIN: none */
        struct exit_sample *m; /* its merge so far (heap: the struct is large) */
        /* shares already in this second, and the in-flight each added: a
         * share seen twice counts its gauge once (the newer) */
        bool seen[STORE_SHARES_MAX];
        unsigned seen_in_flight[STORE_SHARES_MAX];
        int rc; /* fn's non-zero return */
};

static int64_t second_of(tg_wall_ms at)
{
        return at >= 0 ? at / 1000 : (at - 999) / 1000;
}

static void seconds_reset(struct seconds_walk *w)
{
        w->second = INT64_MIN;
        w->m->share = 0;
        memset(w->seen, 0, sizeof(w->seen));
}

/* Hands out the second being merged, if any. */
static void seconds_emit(struct seconds_walk *w)
{
        if (w->second != INT64_MIN && w->m->share > 0 && w->left > 0 && w->rc == 0) {
                w->rc = w->fn(w->m, w->userdata);
                w->left--;
        }
        seconds_reset(w);
}

static bool seconds_done(const struct seconds_walk *w)
{
        return w->rc != 0 || w->left == 0;
}

static int seconds_row(const struct exit_sample *x, void *userdata)
{
        struct seconds_walk *w = userdata;
        int64_t sec = second_of(x->at);

        w->rows++;
        if (sec != w->second) {
                seconds_emit(w);
                if (seconds_done(w))
                        return 1;
                w->second = sec;
        }
        if (x->share < STORE_SHARES_MAX && w->seen[x->share])
                w->m->in_flight -= w->seen_in_flight[x->share];
        merge_into(w->m, x);
        if (x->share < STORE_SHARES_MAX) {
                w->seen[x->share] = true;
                w->seen_in_flight[x->share] = x->in_flight;
        }
        return 0;
}

int exit_stats_read_seconds(struct store *store, tg_wall_ms since, unsigned seconds,
                            store_sample_fn fn, void *userdata)
{
        struct seconds_walk *w;
        int r = 0;

        if (!store || !fn)
                return TG_EINVAL;
        if (seconds == 0)
                return 0;
        w = calloc(1, sizeof(*w));
        if (w)
                w->m = calloc(1, sizeof(*w->m));
        if (!w || !w->m) {
                if (w)
                        free(w->m);
                free(w);
                return TG_ENOMEM;
        }
        w->fn = fn;
        w->userdata = userdata;
        w->left = seconds;
        seconds_reset(w);
        for (;;) {
                tg_wall_ms again;
                w->rows = 0;
                r = store_list_samples(store, since, READ_PAGE, seconds_row, w);
                if (r < 0 || seconds_done(w))
                        break;
                if (w->rows < READ_PAGE) {
                        seconds_emit(w); /* the store had no more: the last second is whole */
                        break;
                }
                /* The page may have cut its last second: read that second
                 * again from its start (a second holds far fewer rows than a
                 * page, so the walk moves on). */
                again = w->second * 1000 - 1;
                if (w->second == INT64_MIN || again <= since) {
                        seconds_emit(w);
                        break;
                }
                since = again;
                seconds_reset(w);
        }
        if (r >= 0)
                r = w->rc;
        free(w->m);
        free(w);
        return r;
}

/* Adds the numbers of src into dst, member by member: integers and reals
 * add ("since" takes the earlier, "hold_until" the later), arrays of the same length add element by
 * element, objects recurse; a member only src has is copied. */
static void figures_add(json_t *dst, json_t *src)
{
        const char *key;
        json_t *sv;

        json_object_foreach(src, key, sv)
        {
                json_t *dv = json_object_get(dst, key);
                if (!dv) {
                        json_object_set(dst, key, sv);
                } else if (json_is_integer(dv) && json_is_integer(sv)) {
                        json_int_t a = json_integer_value(dv), b = json_integer_value(sv);
                        if (strcmp(key, "since") == 0)
                                json_integer_set(dv, a < b ? a : b);
                        else if (strcmp(key, "hold_until") == 0)
                                json_integer_set(dv, a > b ? a : b);
                        else
                                json_integer_set(dv, a + b);
                } else if (json_is_number(dv) && json_is_number(sv)) {
                        json_object_set_new(
                            dst, key, json_real(json_number_value(dv) + json_number_value(sv)));
                } else if (json_is_array(dv) && json_is_array(sv) &&
                           json_array_size(dv) == json_array_size(sv)) {
                        for (size_t i = 0; i < json_array_size(dv); i++) {
                                json_t *a = json_array_get(dv, i), *b = json_array_get(sv, i);
                                if (json_is_integer(a) && json_is_integer(b))
                                        json_integer_set(a, json_integer_value(a) +
                                                                json_integer_value(b));
                        }
                } else if (json_is_object(dv) && json_is_object(sv)) {
                        figures_add(dv, sv);
                }
        }
}

struct newest {
        struct exit_sample *per_share; /* [STORE_SHARES_MAX]; share 0 when unused */
        bool *used;
};

static int newest_row(const struct exit_sample *x, void *userdata)
{
        struct newest *n = userdata;

        if (x->share >= STORE_SHARES_MAX)
                return 0;
        /* Oldest first: a later row of the same share is newer. */
        n->per_share[x->share] = *x;
        n->used[x->share] = true;
        return 0;
}

int exit_stats_read_now(struct store *store, tg_wall_ms now, int64_t fresh_ms,
                        struct exit_sample *ret_sample, bool *ret_fresh)
{
        struct newest n = {0};
        struct exit_sample *m = NULL;
        json_t *sum = NULL;
        unsigned used = 0;
        int r;

        if (!store || !ret_sample || !ret_fresh)
                return TG_EINVAL;
        n.per_share = calloc(STORE_SHARES_MAX, sizeof(*n.per_share));
        n.used = calloc(STORE_SHARES_MAX, sizeof(*n.used));
        m = calloc(1, sizeof(*m));
        if (!n.per_share || !n.used || !m) {
                r = TG_ENOMEM;
                goto out;
        }
        /* Fresh: at >= now - fresh_ms. A few seconds of every share. */
        r = store_list_samples(store, now - fresh_ms - 1,
                               (unsigned)((fresh_ms / 1000 + 3) * STORE_SHARES_MAX), newest_row,
                               &n);
        if (r < 0)
                goto out;
        for (unsigned k = 0; k < STORE_SHARES_MAX; k++) {
                json_t *f;
                if (!n.used[k])
                        continue;
                merge_into(m, &n.per_share[k]);
                used++;
                f = n.per_share[k].figures[0] ? json_loads(n.per_share[k].figures, 0, NULL) : NULL;
                if (json_is_object(f)) {
                        if (!sum)
                                sum = json_deep_copy(f);
                        else
                                figures_add(sum, f);
                }
                json_decref(f);
        }
        if (used == 0) {
                /* Nobody is writing: the newest sample of any share, stale. */
                r = store_last_sample(store, ret_sample);
                if (r == 0)
                        *ret_fresh = false;
                goto out;
        }
        if (used > 1) {
                /* Several shares: their figures summed (a text that does not
                 * fit is left out, not cut). */
                size_t len =
                    sum ? json_dumpb(sum, m->figures, sizeof(m->figures) - 1, JSON_COMPACT) : 0;
                m->figures[len < sizeof(m->figures) ? len : 0] = '\0';
        } else {
                /* One share: exactly its sample. */
                for (unsigned k = 0; k < STORE_SHARES_MAX; k++)
                        if (n.used[k])
                                *m = n.per_share[k];
        }
        *ret_sample = *m;
        *ret_fresh = true;
        r = 0;
out:
        json_decref(sum);
        free(n.per_share);
        free(n.used);
        free(m);
        return r;
}
