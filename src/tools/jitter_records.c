/*
 * jitter_records — how real records clustered (see the header). Records are
 * read into one bounded array of (time, repeat) and sorted; a busiest
 * second or minute is a run of equal floor(t / width) in that order, so the
 * measure is O(n log n) whatever the span. The random comparison throws the
 * same number of records at uniform times over the same span, trials times,
 * counting per second in a table the size of the span (bounded by
 * JITTER_RECORDS_SPAN_MAX_S, and only as large as the records span).
 */
#include "tools/jitter_records.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/csv.h"
#include "core/names.h"
#include "core/rfc3339.h"
#include "core/rng.h"
#include "core/strnum.h"
#include "core/tg_error.h"

struct record {
        tg_wall_ms at;
        bool repeat;
};

struct jitter_records {
        enum jitter_records_format format;
        bool has_kind;
        struct record *v;
        size_t n, cap;
};

static int push(struct jitter_records *r, tg_wall_ms at, bool repeat)
{
        if (r->n == r->cap) {
                size_t cap = r->cap ? r->cap * 2 : 1024;
                struct record *v;

                if (r->n >= JITTER_RECORDS_MAX)
                        return TG_EFULL;
                if (cap > JITTER_RECORDS_MAX)
                        cap = JITTER_RECORDS_MAX;
                v = realloc(r->v, cap * sizeof(*v));
                if (!v)
                        return TG_ENOMEM;
                r->v = v;
                r->cap = cap;
        }
        r->v[r->n].at = at;
        r->v[r->n].repeat = repeat;
        r->n++;
        return 0;
}

/* A first attempt repeats nothing; every other kind repeats something. */
static bool kind_repeats(const char *kind, size_t len)
{
        const char *first = tg_call_kind_name(TG_KIND_FIRST);
        return !(len == strlen(first) && memcmp(kind, first, len) == 0);
}

static int read_json_line(struct jitter_records *r, const char *line, size_t len, const char **why)
{
        json_t *o = json_loadb(line, len, 0, NULL);
        json_t *at = json_object_get(o, "start_wall"), *kind = json_object_get(o, "kind");
        int rc = 0;

        if (!json_is_object(o) || !json_is_integer(at)) {
                *why = "not a call log line (an object with an integer start_wall)";
                rc = TG_EPARSE;
        } else if (kind && !json_is_string(kind)) {
                *why = "kind is not a string";
                rc = TG_EPARSE;
        } else {
                r->has_kind = r->has_kind || kind;
                rc = push(r, json_integer_value(at),
                          !kind || kind_repeats(json_string_value(kind), json_string_length(kind)));
        }
        json_decref(o);
        return rc;
}

/* ---- CSV ------------------------------------------------------------------------- */

#define CSV_FIELDS 64

struct csv_row {
        char *field[CSV_FIELDS]; /* into the line, split in place */
        size_t n;
};

/* A time value: RFC 3339, or seconds (ms above 1e11) since the epoch. */
static int csv_time(const char *v, tg_wall_ms *ret)
{
        double x = 0;

        if (rfc3339_parse(v, strlen(v), ret) == 0)
                return 0;
        if (strnum_double(v, -1e15, 1e15, &x) < 0)
                return TG_EPARSE;
        *ret = (tg_wall_ms)(x > 1e11 ? x + 0.5 : x * 1000.0 + 0.5);
        return 0;
}

struct csv_state {
        bool header_read;
        int time_col, kind_col;
};

static int csv_header(const struct csv_row *row, struct csv_state *st, const char **why)
{
        static const char *const names[] = {"start_wall", "time", "timestamp",
                                            "at",         "ts",   "failed_at"};

        st->time_col = st->kind_col = -1;
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]) && st->time_col < 0; k++)
                for (size_t i = 0; i < row->n; i++)
                        if (strcasecmp(row->field[i], names[k]) == 0) {
                                st->time_col = (int)i;
                                break;
                        }
        for (size_t i = 0; i < row->n; i++)
                if (strcasecmp(row->field[i], "kind") == 0)
                        st->kind_col = (int)i;
        if (st->time_col < 0) {
                *why = "no time column in the header (start_wall, time, timestamp, at, ts, "
                       "failed_at)";
                return TG_EPARSE;
        }
        st->header_read = true;
        return 0;
}

static int read_csv_line(struct jitter_records *r, struct csv_state *st, struct csv_row *row,
                         char *line, const char **why)
{
        tg_wall_ms at = 0;

        if (csv_split(line, CSV_QUOTES_BARE, row->field, CSV_FIELDS, &row->n) < 0) {
                *why = "not a CSV line (a quote left open, or too many fields)";
                return TG_EPARSE;
        }
        if (!st->header_read)
                return csv_header(row, st, why);
        if ((size_t)st->time_col >= row->n || csv_time(row->field[st->time_col], &at) < 0) {
                *why = "the time is not an RFC 3339 time or a number of seconds or ms";
                return TG_EPARSE;
        }
        if (st->kind_col >= 0 && (size_t)st->kind_col < row->n && row->field[st->kind_col][0]) {
                r->has_kind = true;
                return push(
                    r, at,
                    kind_repeats(row->field[st->kind_col], strlen(row->field[st->kind_col])));
        }
        return push(r, at, true);
}

static int cmp_record(const void *a, const void *b)
{
        tg_wall_ms x = ((const struct record *)a)->at, y = ((const struct record *)b)->at;

        return (x > y) - (x < y);
}

int jitter_records_read(FILE *f, struct jitter_records **ret_records, size_t *ret_line,
                        const char **ret_why)
{
        struct jitter_records *r = calloc(1, sizeof(*r));
        struct csv_row *row = calloc(1, sizeof(*row));
        char *line = malloc(JITTER_RECORDS_LINE + 2);
        struct csv_state st = {0};
        const char *why = "";
        size_t lineno = 0;
        bool decided = false;
        int rc = 0;

        if (!r || !row || !line) {
                rc = TG_ENOMEM;
                goto out;
        }
        while (fgets(line, JITTER_RECORDS_LINE + 2, f)) {
                size_t len = strlen(line);

                lineno++;
                if (len > JITTER_RECORDS_LINE ||
                    (len == JITTER_RECORDS_LINE + 1 && line[len - 1] != '\n')) {
                        why = "line too long";
                        rc = TG_EPARSE;
                        break;
                }
                while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
                        line[--len] = '\0';
                size_t lead = 0;
                while (lead < len && isspace((unsigned char)line[lead]))
                        lead++;
                if (lead == len)
                        continue; /* blank */
                if (!decided) {
                        r->format =
                            line[lead] == '{' ? JITTER_RECORDS_CALL_LOG : JITTER_RECORDS_CSV;
                        decided = true;
                }
                rc = r->format == JITTER_RECORDS_CALL_LOG ? read_json_line(r, line, len, &why)
                                                          : read_csv_line(r, &st, row, line, &why);
                if (rc < 0)
                        break;
        }
        if (rc == 0 && ferror(f))
                rc = TG_EIO;
        if (rc == 0 && r->n == 0)
                rc = TG_ENOTFOUND;
        if (rc == 0) {
                qsort(r->v, r->n, sizeof(*r->v), cmp_record);
                if (r->v[r->n - 1].at - r->v[0].at > JITTER_RECORDS_SPAN_MAX_S * 1000)
                        rc = TG_ERANGE;
        }
out:
        free(row);
        free(line);
        if (rc < 0) {
                jitter_records_free(r);
                if (ret_line)
                        *ret_line = lineno;
                if (ret_why)
                        *ret_why = why;
                return rc;
        }
        *ret_records = r;
        return 0;
}

void jitter_records_free(struct jitter_records *records)
{
        if (!records)
                return;
        free(records->v);
        free(records);
}

/* ---- measuring ---------------------------------------------------------------------- */

static int64_t floor_div(int64_t a, int64_t b)
{
        return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* The busiest window of `width_ms` over the sorted records of the group,
 * and (width 1 s) how many seconds are busy and over capacity. */
static void busiest(const struct jitter_records *r, bool repeats_only, int64_t width_ms,
                    unsigned capacity, unsigned *ret_peak, tg_wall_ms *ret_at, size_t *ret_busy,
                    size_t *ret_over)
{
        unsigned peak = 0, run = 0;
        int64_t cur = INT64_MIN;
        tg_wall_ms at = 0;
        size_t busy = 0, over = 0;

        for (size_t i = 0; i <= r->n; i++) {
                bool in = i < r->n && (!repeats_only || r->v[i].repeat);
                int64_t w = i < r->n ? floor_div(r->v[i].at, width_ms) : INT64_MAX;

                if (i < r->n && !in)
                        continue;
                if (w != cur) {
                        if (run > 0) {
                                busy++;
                                over += capacity > 0 && run > capacity;
                                if (run > peak) {
                                        peak = run;
                                        at = cur * width_ms;
                                }
                        }
                        cur = w;
                        run = 0;
                }
                run++;
        }
        *ret_peak = peak;
        *ret_at = at;
        if (ret_busy)
                *ret_busy = busy;
        if (ret_over)
                *ret_over = over;
}

static int cmp_unsigned(const void *a, const void *b)
{
        unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

        return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

        return (x > y) - (x < y);
}

/* Draws per trial at most: trials are cut so that trials x count stays
 * below it (20 trials at least), which keeps a run over millions of
 * records to seconds. */
#define DRAW_BUDGET 20000000.0
/* A span up to this many seconds is counted in a table; a longer one by
 * sorting the draws. */
#define TABLE_MAX_S 1000000

/* The 95th percentile of the busiest second when `count` records fall at
 * uniform times over `seconds` seconds, over *trials draws (cut to the
 * budget; *trials says how many ran). */
static int random_p95(size_t count, int64_t seconds, unsigned *trials, struct tg_rng *rng,
                      unsigned *ret)
{
        unsigned n = *trials;
        bool table_ok = seconds <= TABLE_MAX_S;
        unsigned *table = NULL, *peaks;
        int64_t *draws = NULL;

        if ((double)n * (double)count > DRAW_BUDGET)
                n = (unsigned)(DRAW_BUDGET / (double)count) > 20
                        ? (unsigned)(DRAW_BUDGET / (double)count)
                        : 20;
        peaks = calloc(n, sizeof(*peaks));
        if (table_ok)
                table = calloc((size_t)seconds, sizeof(*table));
        else
                draws = calloc(count, sizeof(*draws));
        if (!peaks || (table_ok ? !table : !draws)) {
                free(peaks);
                free(table);
                free(draws);
                return TG_ENOMEM;
        }
        for (unsigned t = 0; t < n; t++) {
                unsigned peak = 0, run = 0;

                if (table_ok) {
                        memset(table, 0, (size_t)seconds * sizeof(*table));
                        for (size_t i = 0; i < count; i++) {
                                unsigned *c = &table[tg_rng_range(rng, 0, seconds - 1)];
                                if (++*c > peak)
                                        peak = *c;
                        }
                } else {
                        for (size_t i = 0; i < count; i++)
                                draws[i] = tg_rng_range(rng, 0, seconds - 1);
                        qsort(draws, count, sizeof(*draws), cmp_i64);
                        for (size_t i = 0; i < count; i++) {
                                run = i > 0 && draws[i] == draws[i - 1] ? run + 1 : 1;
                                if (run > peak)
                                        peak = run;
                        }
                }
                peaks[t] = peak;
        }
        qsort(peaks, n, sizeof(*peaks), cmp_unsigned);
        *ret = peaks[(size_t)((n - 1) * 0.95)];
        *trials = n;
        free(table);
        free(draws);
        free(peaks);
        return 0;
}

static int measure_group(const struct jitter_records *r, bool repeats_only, unsigned capacity,
                         unsigned trials, struct tg_rng *rng, struct jitter_records_peak *ret)
{
        struct jitter_records_peak p;
        int64_t first = floor_div(r->v[0].at, 1000), last = floor_div(r->v[r->n - 1].at, 1000);
        int rc = 0;

        memset(&p, 0, sizeof(p));
        for (size_t i = 0; i < r->n; i++)
                p.count += !repeats_only || r->v[i].repeat;
        busiest(r, repeats_only, 1000, capacity, &p.second_peak, &p.second_at, &p.seconds_busy,
                &p.seconds_over);
        busiest(r, repeats_only, 60000, 0, &p.minute_peak, &p.minute_at, NULL, NULL);
        p.random_trials = trials;
        if (p.count > 0)
                rc = random_p95(p.count, last - first + 1, &p.random_trials, rng,
                                &p.random_p95_peak);
        p.clustered = p.count > 1 && p.second_peak > p.random_p95_peak;
        if (rc == 0)
                *ret = p;
        return rc;
}

int jitter_records_measure(const struct jitter_records *records, unsigned capacity, unsigned trials,
                           uint64_t seed, struct jitter_records_summary *ret_summary)
{
        struct jitter_records_summary s;
        struct tg_rng rng;
        int rc;

        if (!records || records->n == 0 || trials == 0 || !ret_summary)
                return TG_EINVAL;
        memset(&s, 0, sizeof(s));
        tg_rng_seed(&rng, seed);
        s.format = records->format;
        s.has_kind = records->has_kind;
        s.first_ms = records->v[0].at;
        s.last_ms = records->v[records->n - 1].at;
        rc = measure_group(records, false, capacity, trials, &rng, &s.all);
        if (rc == 0)
                rc = measure_group(records, true, capacity, trials, &rng, &s.repeats);
        if (rc == 0)
                *ret_summary = s;
        return rc;
}
