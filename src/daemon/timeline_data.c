/*
 * timeline_data — the timeline's data from the store (see the header). The
 * bins of a window live in one dense array while it is read (at most
 * max_points), and only the bins with data are kept. Samples come merged by
 * second from exit_stats_read_seconds(), refusals from
 * store_list_refusals(); both are walked once, oldest first.
 */
#include "daemon/timeline_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "core/tg_error.h"
#include "daemon/exit_stats.h"

#define REFUSALS_MAX 1000000 /* rows read for one window at most */

struct bins {
        tg_wall_ms from, to;
        int64_t step_ms;
        size_t n;
        struct timeline_point *b;
        double *starts_sum, *closes_sum; /* per bin, over its seconds */
        tg_wall_ms *newest;              /* newest sample `at` in the bin */
};

static struct timeline_point *bin_at(struct bins *w, tg_wall_ms at, size_t *ret_i)
{
        size_t i;

        if (at < w->from || at >= w->to)
                return NULL;
        i = (size_t)((at - w->from) / w->step_ms);
        if (i >= w->n)
                return NULL;
        *ret_i = i;
        return &w->b[i];
}

static int on_second(const struct exit_sample *x, void *userdata)
{
        struct bins *w = userdata;
        struct timeline_point *p;
        size_t i = 0;
        double age;

        if (x->at >= w->to)
                return 1; /* past the window: stop */
        p = bin_at(w, x->at, &i);
        if (!p)
                return 0;
        p->seconds++;
        w->starts_sum[i] += x->starts;
        w->closes_sum[i] += x->op_closes;
        if (x->in_flight > p->in_flight)
                p->in_flight = x->in_flight;
        age = x->oldest_open_accepted_at == TG_WALL_NEVER
                  ? -1.0
                  : (double)(x->at - x->oldest_open_accepted_at) / 1000.0;
        if (age > p->oldest_age_s)
                p->oldest_age_s = age;
        p->held = p->held || x->held;
        if (x->at >= w->newest[i]) {
                w->newest[i] = x->at;
                p->epoch = x->epoch;
                memcpy(p->backlog, x->backlog, sizeof(p->backlog));
        }
        return 0;
}

static int on_refusal(const struct refusal_second *r, void *userdata)
{
        struct bins *w = userdata;
        struct timeline_point *p;
        size_t i = 0;

        if (r->at >= w->to)
                return 1;
        p = bin_at(w, r->at, &i);
        if (p)
                p->refused += r->refused;
        return 0;
}

void timeline_series_free(struct timeline_series *series)
{
        if (!series)
                return;
        free(series->points);
        series->points = NULL;
        series->n = 0;
}

int timeline_read(struct store *store, tg_wall_ms from, tg_wall_ms to, size_t max_points,
                  struct timeline_series *ret_series)
{
        struct bins w;
        int64_t span_s;
        size_t kept = 0;
        unsigned seconds;
        int r;

        if (!store || !ret_series || from >= to || max_points == 0)
                return TG_EINVAL;
        memset(&w, 0, sizeof(w));
        /* Whole seconds: the samples are merged by wall-clock second. */
        w.from = from - (from % 1000 + 1000) % 1000;
        span_s = (to - w.from + 999) / 1000;
        w.step_ms = 1000 * (int64_t)((span_s + (int64_t)max_points - 1) / (int64_t)max_points);
        if (w.step_ms < 1000)
                w.step_ms = 1000;
        w.n = (size_t)((to - w.from + w.step_ms - 1) / w.step_ms);
        w.to = w.from + (tg_wall_ms)w.n * w.step_ms;
        w.b = calloc(w.n, sizeof(*w.b));
        w.starts_sum = calloc(w.n, sizeof(double));
        w.closes_sum = calloc(w.n, sizeof(double));
        w.newest = calloc(w.n, sizeof(tg_wall_ms));
        if (!w.b || !w.starts_sum || !w.closes_sum || !w.newest) {
                r = TG_ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < w.n; i++) {
                w.b[i].at = w.from + (tg_wall_ms)i * w.step_ms;
                w.b[i].oldest_age_s = -1.0;
                w.newest[i] = INT64_MIN;
        }
        seconds = span_s + 2 > (int64_t)UINT32_MAX ? UINT32_MAX : (unsigned)(span_s + 2);
        r = exit_stats_read_seconds(store, w.from - 1, seconds, on_second, &w);
        if (r == 1)
                r = 0;
        if (r == 0)
                r = store_list_refusals(store, w.from - 1, REFUSALS_MAX, on_refusal, &w);
        if (r == 1)
                r = 0;
        if (r < 0)
                goto out;
        for (size_t i = 0; i < w.n; i++) {
                struct timeline_point *p = &w.b[i];
                if (p->seconds == 0 && p->refused == 0)
                        continue;
                if (p->seconds > 0) {
                        p->starts = w.starts_sum[i] / p->seconds;
                        p->closes = w.closes_sum[i] / p->seconds;
                }
                w.b[kept++] = *p;
        }
        memset(ret_series, 0, sizeof(*ret_series));
        ret_series->from = w.from;
        ret_series->to = w.to;
        ret_series->step_s = (unsigned)(w.step_ms / 1000);
        ret_series->points = w.b;
        ret_series->n = kept;
        w.b = NULL;
        r = 0;
out:
        free(w.b);
        free(w.starts_sum);
        free(w.closes_sum);
        free(w.newest);
        return r;
}

/* A number with at most 3 decimals (JSON stays small: a day of seconds). */
static json_t *num3(double v)
{
        return json_real(round(v * 1000.0) / 1000.0);
}

json_t *timeline_series_json(const struct timeline_series *s, tg_wall_ms after,
                             const struct tg_config *cfg)
{
        /* the backlog's columns are named as their states (core/names.h) */
        const char *const names[] = {
            "t",
            "starts",
            "closes",
            "in_flight",
            "oldest_age_s",
            "held",
            "epoch",
            op_state_name(OP_PENDING),
            "in_flight_ops",
            op_state_name(OP_RETRY_WAIT),
            op_state_name(OP_UNKNOWN),
            op_state_name(OP_MANUAL),
            "refused",
        };
        enum { NCOLS = sizeof(names) / sizeof(names[0]) };
        json_t *cols[NCOLS];
        json_t *root;
        bool ok = true;

        root = json_pack("{s:I, s:I, s:i, s:i, s:f}", "from", (json_int_t)s->from, "to",
                         (json_int_t)s->to, "step_s", (int)s->step_s, "cap",
                         (int)cfg->exit.max_in_flight, "rate", cfg->exit.starts_per_second);
        if (!root)
                return NULL;
        for (int c = 0; c < NCOLS; c++) {
                cols[c] = json_array();
                if (!cols[c] || json_object_set_new(root, names[c], cols[c]) < 0)
                        ok = false;
        }
        for (size_t i = 0; ok && i < s->n; i++) {
                const struct timeline_point *p = &s->points[i];
                bool sampled = p->seconds > 0;
                json_t *v[NCOLS];

                if (p->at <= after)
                        continue;
                v[0] = json_integer(p->at / 1000);
                v[1] = sampled ? num3(p->starts) : json_null();
                v[2] = sampled ? num3(p->closes) : json_null();
                v[3] = sampled ? json_integer(p->in_flight) : json_null();
                v[4] = sampled ? num3(p->oldest_age_s < 0 ? 0 : p->oldest_age_s) : json_null();
                v[5] = sampled ? json_integer(p->held ? 1 : 0) : json_null();
                v[6] = sampled ? json_integer(p->epoch) : json_null();
                v[7] = sampled ? json_integer(p->backlog[OP_PENDING]) : json_null();
                v[8] = sampled ? json_integer(p->backlog[OP_IN_FLIGHT]) : json_null();
                v[9] = sampled ? json_integer(p->backlog[OP_RETRY_WAIT]) : json_null();
                v[10] = sampled ? json_integer(p->backlog[OP_UNKNOWN]) : json_null();
                v[11] = sampled ? json_integer(p->backlog[OP_MANUAL]) : json_null();
                v[12] = json_integer(p->refused);
                for (int c = 0; c < NCOLS; c++)
                        if (!v[c] || json_array_append_new(cols[c], v[c]) < 0)
                                ok = false;
        }
        if (!ok) {
                json_decref(root);
                return NULL;
        }
        return root;
}
