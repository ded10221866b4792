/*
 * tollgate report — one self-contained HTML page of a run: starts/s and
 * closes/s on one timeline (the seed's first picture), in flight, the oldest
 * open operation's age, the backlog by state, the provider's phases as
 * bands behind every chart, and the verify findings. The SVG is drawn here;
 * the page has no script and fetches nothing.
 *
 * Everything is derived from the call log and the arrival record (what is
 * approximated is said on the page and in docs/verify.md). The time axis
 * is wall time from the first record, in bins of at least one second and at
 * most MAX_BINS bins, so the page stays small whatever the run's length.
 *
 * With --config F --from T [--to T] and no arrival record, it draws instead
 * the console's own timeline of that window from the store alone (the
 * exit's per-second samples and the API's refusals, daemon/timeline_data.h):
 * one page holding its data and the console's scripts, uPlot included,
 * that opens with no daemon and no network — for a postmortem.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/names.h"
#include "core/strnum.h"
#include "core/tg_error.h"
#include "daemon/config.h"
#include "daemon/timeline_data.h"
#include "daemon/web_assets.h"
#include "platform/clock.h"
#include "platform/options.h"
#include "tools/runlog.h"
#include "tools/tools.h"
#include "tools/verify.h"
#include "tools/verify_out.h"

#define MAX_BINS   600
#define MAX_PHASES 64
#define W          960
#define H          200
#define PAD_L      56
#define PAD_R      12
#define PAD_T      12
#define PAD_B      26

enum bstate { B_IN_FLIGHT, B_RETRY_WAIT, B_UNKNOWN, B_STATES };
static const enum op_state bstate_state[B_STATES] = {OP_IN_FLIGHT, OP_RETRY_WAIT, OP_UNKNOWN};
static const char *const bstate_color[B_STATES] = {"#d95f02", "#7570b3", "#e7298a"};

struct phase {
        double from_s, to_s; /* relative to t0 */
        char label[64];
        long number; /* from the arrivals: the stub's phase number, else -1 */
        char mode[40];
};

struct series {
        size_t nbins;
        double bin_s;
        tg_wall_ms t0, t1;
        double *starts, *closes, *in_flight, *oldest_age;
        double *state[B_STATES];
        struct phase phases[MAX_PHASES];
        size_t nphases;
};

static const char report_about[] =
    "Writes one self-contained HTML page of the run: starts/s and closes/s on one timeline, in "
    "flight, oldest open age, backlog by state, the provider's phases (from --timeline, the "
    "stub's spec, or the arrivals' phase fields) and the verify findings. Inputs and limits as "
    "for 'tollgate verify' (docs/verify.md). With --config F --from T [--to T] instead of an "
    "arrival record: the console's timeline of that window, from the store alone (samples, "
    "holds, owner changes, admission refusals), as a page that opens with no daemon and no "
    "network.";
static const char report_epilogue[] =
    "Exit status: 0 written (whatever the findings), 2 usage or input error.\n";

/* A call record's class is cls (a word of core/names.h). */
static bool class_is(const char *cls, enum tg_class want)
{
        return strcmp(cls, tg_class_name(want)) == 0;
}

static bool is_final(const char *cls)
{
        return class_is(cls, TG_CLASS_SUCCEEDED) || class_is(cls, TG_CLASS_REJECTED) ||
               class_is(cls, TG_CLASS_KEY_REUSED);
}

static int bin_of(const struct series *s, tg_wall_ms t)
{
        double b = (double)(t - s->t0) / 1000.0 / s->bin_s;
        if (b < 0)
                return 0;
        if (b >= (double)s->nbins)
                return (int)s->nbins - 1;
        return (int)b;
}

/* Adds v to [from, to) in the difference array d. */
static void add_range(const struct series *s, double *d, tg_wall_ms from, tg_wall_ms to, double v)
{
        if (to <= from)
                return;
        int a = bin_of(s, from), b = bin_of(s, to);
        d[a] += v;
        if (to < s->t1)
                d[b] -= v;
}

static void prefix(double *d, size_t n)
{
        for (size_t i = 1; i < n; i++)
                d[i] += d[i - 1];
}

static int cmp_call_op_start(const void *a, const void *b)
{
        const struct verify_call *x = *(const struct verify_call *const *)a;
        const struct verify_call *y = *(const struct verify_call *const *)b;
        int c = strcmp(x->operation_id, y->operation_id);
        if (c)
                return c;
        return (x->start_wall > y->start_wall) - (x->start_wall < y->start_wall);
}

struct op_span {
        tg_wall_ms first, close; /* close: TG_WALL_NEVER when still open */
};

static int cmp_span(const void *a, const void *b)
{
        const struct op_span *x = a, *y = b;
        return (x->first > y->first) - (x->first < y->first);
}

/* "20", "20s", "3500ms", "2m", "1h" in seconds; 0 for what is not one (the
 * stub refuses such a timeline, so only a hand-written one gets here). */
static double duration_s(const char *text)
{
        size_t len = strlen(text), unit = len;
        char num[32];
        const char *u;
        double v;

        while (unit > 0 && text[unit - 1] >= 'a' && text[unit - 1] <= 'z')
                unit--;
        u = text + unit;
        if (unit >= sizeof(num))
                return 0;
        memcpy(num, text, unit);
        num[unit] = '\0';
        if (strnum_double(num, 0, 1e12, &v) < 0)
                return 0;
        if (strcmp(u, "ms") == 0)
                return v / 1000;
        if (strcmp(u, "m") == 0)
                return v * 60;
        if (strcmp(u, "h") == 0)
                return v * 3600;
        return strcmp(u, "s") == 0 || u[0] == '\0' ? v : 0;
}

/* "MODE[:P] DUR; ..." (the stub's --timeline) into phases from stub start. */
static void phases_from_spec(struct series *s, const char *spec, double scale, double start_s)
{
        char buf[2048];
        snprintf(buf, sizeof(buf), "%s", spec);
        double at = start_s;
        char *p = buf;
        while (*p && s->nphases < MAX_PHASES) {
                char *end = p + strcspn(p, ";\n");
                char save = *end;
                *end = '\0';
                while (*p == ' ' || *p == '\t')
                        p++;
                char mode[40] = "";
                size_t mlen = strcspn(p, " \t");
                if (mlen && mlen < sizeof(mode) && *p != '#') {
                        memcpy(mode, p, mlen);
                        char *q = p + mlen;
                        while (*q == ' ' || *q == '\t')
                                q++;
                        char dur[32];
                        snprintf(dur, sizeof(dur), "%.*s", (int)strcspn(q, " \t#"), q);
                        double secs = INFINITY;
                        if (dur[0])
                                secs = duration_s(dur) * scale;
                        struct phase *ph = &s->phases[s->nphases++];
                        ph->number = -1;
                        ph->mode[0] = '\0';
                        ph->from_s = at;
                        ph->to_s = at + secs;
                        snprintf(ph->label, sizeof(ph->label), "%s", mode);
                        at += secs;
                }
                if (!save)
                        break;
                p = end + 1;
        }
}

/* Bands from the arrivals' phase numbers: first to last arrival of each. */
static void phases_from_arrivals(struct series *s, const struct runlog *log)
{
        for (size_t i = 0; i < log->narrivals; i++) {
                const struct verify_arrival *a = &log->arrivals[i];
                if (a->phase < 0 || !a->post)
                        continue;
                double t = (double)(a->wall - s->t0) / 1000.0;
                struct phase *ph = NULL;
                for (size_t k = 0; k < s->nphases; k++)
                        if (s->phases[k].number == a->phase &&
                            strcmp(s->phases[k].mode, a->mode) == 0)
                                ph = &s->phases[k];
                if (!ph) {
                        if (s->nphases >= MAX_PHASES)
                                continue;
                        ph = &s->phases[s->nphases++];
                        snprintf(ph->label, sizeof(ph->label), "#%-6ld %s", a->phase, a->mode);
                        snprintf(ph->mode, sizeof(ph->mode), "%s", a->mode);
                        ph->number = a->phase;
                        ph->from_s = ph->to_s = t;
                }
                if (t < ph->from_s)
                        ph->from_s = t;
                if (t > ph->to_s)
                        ph->to_s = t;
        }
}

static int build_series(const struct runlog *log, const struct verify_args *a, struct series *s)
{
        memset(s, 0, sizeof(*s));
        s->t0 = TG_WALL_NEVER;
        s->t1 = 0;
        for (size_t i = 0; i < log->ncalls; i++) {
                const struct verify_call *c = &log->calls[i];
                if (c->start_wall < s->t0)
                        s->t0 = c->start_wall;
                tg_wall_ms e = c->end_wall != TG_WALL_NEVER ? c->end_wall : c->start_wall;
                if (e > s->t1)
                        s->t1 = e;
        }
        for (size_t i = 0; i < log->narrivals; i++) {
                if (log->arrivals[i].wall < s->t0)
                        s->t0 = log->arrivals[i].wall;
                if (log->arrivals[i].wall > s->t1)
                        s->t1 = log->arrivals[i].wall;
        }
        if (s->t0 == TG_WALL_NEVER)
                return TG_EINVAL;
        s->t1 += 1000;
        double span = (double)(s->t1 - s->t0) / 1000.0;
        s->bin_s = span / MAX_BINS > 1.0 ? ceil(span / MAX_BINS) : 1.0;
        s->nbins = (size_t)ceil(span / s->bin_s);
        if (s->nbins < 2)
                s->nbins = 2;
        double **all[] = {&s->starts,   &s->closes,   &s->in_flight, &s->oldest_age,
                          &s->state[0], &s->state[1], &s->state[2]};
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
                *all[i] = calloc(s->nbins, sizeof(double));
                if (!*all[i])
                        return TG_ENOMEM;
        }

        const struct verify_call **v = malloc((log->ncalls + 1) * sizeof(*v));
        struct op_span *spans = malloc((log->ncalls + 1) * sizeof(*spans));
        if (!v || !spans) {
                free(v);
                free(spans);
                return TG_ENOMEM;
        }
        for (size_t i = 0; i < log->ncalls; i++) {
                v[i] = &log->calls[i];
                const struct verify_call *c = v[i];
                tg_wall_ms e = c->end_wall != TG_WALL_NEVER ? c->end_wall : s->t1;
                s->starts[bin_of(s, c->start_wall)] += 1;
                add_range(s, s->in_flight, c->start_wall, e, 1);
        }
        qsort(v, log->ncalls, sizeof(*v), cmp_call_op_start);
        size_t nspans = 0;
        for (size_t i = 0; i < log->ncalls;) {
                size_t end = i;
                while (end < log->ncalls && strcmp(v[end]->operation_id, v[i]->operation_id) == 0)
                        end++;
                struct op_span *sp = &spans[nspans++];
                sp->first = v[i]->start_wall;
                sp->close = TG_WALL_NEVER;
                for (size_t k = i; k < end; k++) {
                        const struct verify_call *c = v[k];
                        tg_wall_ms e = c->end_wall != TG_WALL_NEVER ? c->end_wall : s->t1;
                        add_range(s, s->state[B_IN_FLIGHT], c->start_wall, e, 1);
                        if (c->cls[0] && is_final(c->cls)) {
                                sp->close = e;
                                s->closes[bin_of(s, e)] += 1;
                                break;
                        }
                        tg_wall_ms next = k + 1 < end ? v[k + 1]->start_wall : s->t1;
                        bool retry = class_is(c->cls, TG_CLASS_RETRYABLE) ||
                                     class_is(c->cls, TG_CLASS_NOT_SENT);
                        add_range(s, s->state[retry ? B_RETRY_WAIT : B_UNKNOWN], e, next, 1);
                }
                i = end;
        }
        free(v);
        prefix(s->in_flight, s->nbins);
        for (int k = 0; k < B_STATES; k++)
                prefix(s->state[k], s->nbins);
        for (size_t b = 0; b < s->nbins; b++) {
                s->starts[b] /= s->bin_s;
                s->closes[b] /= s->bin_s;
        }
        /* Oldest open operation at the end of each bin: the first, by first
         * call, not yet closed; everything before it closed earlier. */
        qsort(spans, nspans, sizeof(*spans), cmp_span);
        size_t p = 0;
        for (size_t b = 0; b < s->nbins; b++) {
                tg_wall_ms t = s->t0 + (tg_wall_ms)((double)(b + 1) * s->bin_s * 1000.0);
                while (p < nspans && spans[p].close <= t)
                        p++;
                size_t q = p;
                while (q < nspans && spans[q].first <= t && spans[q].close <= t)
                        q++;
                s->oldest_age[b] =
                    q < nspans && spans[q].first <= t ? (double)(t - spans[q].first) / 1000.0 : 0;
        }
        free(spans);

        if (a->timeline) {
                double start_s = 0;
                for (size_t i = 0; i < log->narrivals; i++) {
                        const struct verify_arrival *ar = &log->arrivals[i];
                        if (ar->t_ns >= 0) {
                                start_s =
                                    (double)(ar->wall - s->t0) / 1000.0 - (double)ar->t_ns / 1e9;
                                break;
                        }
                }
                phases_from_spec(s, a->timeline, a->time_scale, start_s);
        } else {
                phases_from_arrivals(s, log);
        }
        return 0;
}

static void series_free(struct series *s)
{
        free(s->starts);
        free(s->closes);
        free(s->in_flight);
        free(s->oldest_age);
        for (int k = 0; k < B_STATES; k++)
                free(s->state[k]);
}

static void html_text(FILE *f, const char *t)
{
        for (; *t; t++) {
                switch (*t) {
                case '<':
                        fputs("&lt;", f);
                        break;
                case '>':
                        fputs("&gt;", f);
                        break;
                case '&':
                        fputs("&amp;", f);
                        break;
                case '"':
                        fputs("&quot;", f);
                        break;
                default:
                        fputc(*t, f);
                }
        }
}

static double nice_max(double v)
{
        if (v <= 0)
                return 1;
        double m = pow(10, floor(log10(v)));
        for (int k = 1; k <= 10; k++)
                if (k * m >= v)
                        return k * m;
        return 10 * m;
}

static double px_x(const struct series *s, double sec)
{
        double span = (double)s->nbins * s->bin_s;
        return PAD_L + (W - PAD_L - PAD_R) * (sec / span);
}

static double px_y(double v, double ymax)
{
        return PAD_T + (H - PAD_T - PAD_B) * (1.0 - v / ymax);
}

static void chart_open(FILE *f, const struct series *s, const char *title, double ymax,
                       const char *unit)
{
        static const char *const band[] = {"#f2f2f2", "#e3ecf7"};
        double span = (double)s->nbins * s->bin_s;
        fprintf(f, "<h3>");
        html_text(f, title);
        fprintf(f,
                "</h3>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"10\">\n",
                W, H, W, H);
        for (size_t i = 0; i < s->nphases; i++) {
                const struct phase *ph = &s->phases[i];
                double a = ph->from_s < 0 ? 0 : ph->from_s;
                double b = ph->to_s > span || isinf(ph->to_s) ? span : ph->to_s;
                if (b <= a && ph->to_s != ph->from_s)
                        continue;
                if (b <= a)
                        b = a + s->bin_s;
                fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>",
                        px_x(s, a), PAD_T, px_x(s, b) - px_x(s, a), H - PAD_T - PAD_B, band[i % 2]);
                fprintf(f, "<text x=\"%.1f\" y=\"%d\" fill=\"#555\">", px_x(s, a) + 2, PAD_T + 10);
                html_text(f, ph->label);
                fprintf(f, "</text>\n");
        }
        for (int g = 0; g <= 4; g++) {
                double v = ymax * g / 4;
                fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\"/>",
                        PAD_L, W - PAD_R, px_y(v, ymax), px_y(v, ymax));
                fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g%s</text>\n", PAD_L - 4,
                        px_y(v, ymax) + 3, v, g == 4 ? unit : "");
        }
        double step = nice_max(span / 10);
        for (double t = 0; t <= span; t += step)
                fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%gs</text>",
                        px_x(s, t), H - 8, t);
        fprintf(f, "\n");
}

static void polyline(FILE *f, const struct series *s, const double *y, double ymax,
                     const char *color, bool dashed)
{
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"", color,
                dashed ? " stroke-dasharray=\"4 2\"" : "");
        for (size_t b = 0; b < s->nbins; b++)
                fprintf(f, "%.1f,%.1f ", px_x(s, ((double)b + 0.5) * s->bin_s), px_y(y[b], ymax));
        fprintf(f, "\"/>\n");
}

static void legend(FILE *f, int i, const char *color, const char *label)
{
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>",
                W - PAD_R - 150, PAD_T + 4 + 14 * i, color);
        fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", W - PAD_R - 136, PAD_T + 13 + 14 * i,
                label);
}

static double max_of(const double *v, size_t n)
{
        double m = 0;
        for (size_t i = 0; i < n; i++)
                if (v[i] > m)
                        m = v[i];
        return m;
}

static void write_html(FILE *f, const struct verify_args *a, const struct runlog *log,
                       const struct series *s, const struct verify_result *res)
{
        const struct verify_summary *sum = verify_summary(res);
        char text[8192];
        const char *title = a->title ? a->title : "tollgate run report";
        fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<title>");
        html_text(f, title);
        fprintf(f,
                "</title><style>body{font-family:sans-serif;max-width:%dpx;margin:1em auto;"
                "color:#222}pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:12px}"
                ".pass{color:#1b7f3b}.fail{color:#b00020}dt{font-weight:bold}dd{margin:0 0 "
                ".4em 1em;white-space:pre-wrap}section{border-top:1px solid #ccc}</style>"
                "</head><body>\n<h1>",
                W + 20);
        html_text(f, title);
        fprintf(f,
                "</h1>\n<p>%zu calls, %zu provider arrivals; time axis: seconds from the first "
                "record, bins of %g s. verify: <b class=\"%s\">%s</b> (%zu violations, %zu "
                "notes).</p>\n",
                log->ncalls, log->narrivals, s->bin_s, sum->violations ? "fail" : "pass",
                sum->violations ? "FAIL" : "PASS", sum->violations, sum->notes);

        double ym = nice_max(fmax(max_of(s->starts, s->nbins), max_of(s->closes, s->nbins)));
        ym = fmax(ym, nice_max(a->lim.rate));
        chart_open(f, s, "Starts/s and closes/s on one timeline", ym, "/s");
        fprintf(f,
                "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
                "stroke-dasharray=\"2 3\"/>",
                PAD_L, W - PAD_R, px_y(a->lim.rate, ym), px_y(a->lim.rate, ym));
        polyline(f, s, s->starts, ym, "#1f77b4", false);
        polyline(f, s, s->closes, ym, "#2ca02c", false);
        legend(f, 0, "#1f77b4", "starts/s (call log)");
        legend(f, 1, "#2ca02c", "closes/s (final answer)");
        legend(f, 2, "#999", "configured rate");
        fprintf(f, "</svg>\n");

        ym = nice_max(fmax(max_of(s->in_flight, s->nbins), a->lim.max_in_flight));
        chart_open(f, s, "In flight (calls open, from start/end times)", ym, "");
        fprintf(f,
                "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#b00020\" "
                "stroke-dasharray=\"2 3\"/>",
                PAD_L, W - PAD_R, px_y(a->lim.max_in_flight, ym), px_y(a->lim.max_in_flight, ym));
        polyline(f, s, s->in_flight, ym, "#d95f02", false);
        legend(f, 0, "#d95f02", "in flight");
        legend(f, 1, "#b00020", "cap");
        fprintf(f, "</svg>\n");

        ym = nice_max(max_of(s->oldest_age, s->nbins));
        chart_open(f, s, "Oldest open operation's age (s, counted from its first call)", ym, "s");
        polyline(f, s, s->oldest_age, ym, "#8c564b", false);
        fprintf(f, "</svg>\n");

        double *stack = calloc(s->nbins, sizeof(double));
        if (stack) {
                for (size_t b = 0; b < s->nbins; b++)
                        for (int k = 0; k < B_STATES; k++)
                                stack[b] += s->state[k][b];
                ym = nice_max(max_of(stack, s->nbins));
                chart_open(f, s, "Open operations by state (stacked, from the call log)", ym, "");
                memset(stack, 0, s->nbins * sizeof(double));
                for (int k = 0; k < B_STATES; k++) {
                        fprintf(f, "<polygon fill=\"%s\" fill-opacity=\"0.75\" points=\"",
                                bstate_color[k]);
                        for (size_t b = 0; b < s->nbins; b++)
                                fprintf(f, "%.1f,%.1f ", px_x(s, ((double)b + 0.5) * s->bin_s),
                                        px_y(stack[b] + s->state[k][b], ym));
                        for (size_t b = s->nbins; b-- > 0;)
                                fprintf(f, "%.1f,%.1f ", px_x(s, ((double)b + 0.5) * s->bin_s),
                                        px_y(stack[b], ym));
                        fprintf(f, "\"/>\n");
                        for (size_t b = 0; b < s->nbins; b++)
                                stack[b] += s->state[k][b];
                        legend(f, k, bstate_color[k], op_state_name(bstate_state[k]));
                }
                fprintf(f, "</svg>\n");
                free(stack);
        }
        fprintf(f,
                "<p><small>Derived from the call log: an operation counts from its first call "
                "(acceptance time is not in the call log, so time spent pending before it is "
                "not shown); it closes at the end of its first call with a final class; "
                "between calls it is <i>retry_wait</i> after retryable/not_sent, else "
                "<i>unknown</i>; after its last non-final call it stays open to the end "
                "(manual or still waiting). Phase bands: %s.</small></p>\n",
                a->timeline ? "the given timeline, placed from the stub's start"
                            : "from the arrivals' phase numbers (first to last arrival)");

        verify_summary_text(&a->lim, sum, text, sizeof(text));
        fprintf(f, "<h2>tollgate verify</h2>\n<pre>");
        html_text(f, text);
        fprintf(f, "</pre>\n");
        for (size_t i = 0; i < verify_finding_count(res); i++) {
                const struct verify_finding *fd = verify_finding_at(res, i);
                fprintf(f, "<section><h3 class=\"%s\">%zu. [%s] ", fd->violation ? "fail" : "pass",
                        i + 1, fd->violation ? "violation" : "note");
                html_text(f, fd->check);
                fprintf(f, "</h3><dl>");
                const char *lab[] = {"Problem (問題)", "Evidence (證據)", "Trigger (觸發條件)",
                                     "Impact (影響)",  "Verify (驗證)",   "Result (結果)",
                                     "Fix (修正)"};
                const char *val[] = {fd->problem, fd->evidence, fd->trigger, fd->impact,
                                     fd->verify,  fd->result,   fd->fix};
                for (int k = 0; k < 7; k++) {
                        fprintf(f, "<dt>%s</dt><dd>", lab[k]);
                        html_text(f, val[k]);
                        fprintf(f, "</dd>");
                }
                fprintf(f, "</dl></section>\n");
        }
        if (verify_finding_count(res) == 0)
                fprintf(f, "<p>No findings.</p>\n");
        fprintf(f, "</body></html>\n");
}

/* ---- the store's timeline (--config --from --to) ------------------------------------ */

#define STORE_POINTS 3600 /* bins at most: a day is drawn in 24 s steps */

/* "-90m", "-2h", "-1d", "-30s", "now"; or YYYY-MM-DDTHH:MM[:SS] (a space for
 * the T too) with Z, +HH:MM or -HH:MM, else local time. 0 or TG_EINVAL. */
static int report_parse_time(const char *text, tg_wall_ms now, tg_wall_ms *ret)
{
        int y, mo, d, h, mi, sec = 0, n = 0, zh = 0, zm = 0;
        char sep, zone[8] = "";
        struct tm tm;
        time_t t;

        if (strcmp(text, "now") == 0) {
                *ret = now;
                return 0;
        }
        if (text[0] == '-') {
                size_t len = strlen(text);
                char num[24];
                int64_t v, unit;

                if (len < 3 || len - 2 >= sizeof(num))
                        return TG_EINVAL;
                memcpy(num, text + 1, len - 2);
                num[len - 2] = '\0';
                switch (text[len - 1]) {
                case 's':
                        unit = 1000;
                        break;
                case 'm':
                        unit = 60 * 1000;
                        break;
                case 'h':
                        unit = 3600 * 1000;
                        break;
                case 'd':
                        unit = 86400 * 1000;
                        break;
                default:
                        return TG_EINVAL;
                }
                if (strnum_i64(num, 1, 366LL * 86400, &v) < 0)
                        return TG_EINVAL;
                *ret = now - v * unit;
                return 0;
        }
        if (sscanf(text, "%4d-%2d-%2d%c%2d:%2d%n", &y, &mo, &d, &sep, &h, &mi, &n) != 6 ||
            (sep != 'T' && sep != ' '))
                return TG_EINVAL;
        if (text[n] == ':') {
                int m = 0;
                if (sscanf(text + n, ":%2d%n", &sec, &m) != 1)
                        return TG_EINVAL;
                n += m;
        }
        snprintf(zone, sizeof(zone), "%s", text + n);
        if (strlen(text + n) >= sizeof(zone) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
            mi > 59 || sec > 60 || h < 0 || mi < 0 || sec < 0)
                return TG_EINVAL;
        memset(&tm, 0, sizeof(tm));
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        tm.tm_hour = h;
        tm.tm_min = mi;
        tm.tm_sec = sec;
        if (zone[0] == '\0') {
                tm.tm_isdst = -1;
                t = mktime(&tm);
        } else if (strcmp(zone, "Z") == 0) {
                t = timegm(&tm);
        } else if ((zone[0] == '+' || zone[0] == '-') && strlen(zone) == 6 && zone[3] == ':' &&
                   sscanf(zone + 1, "%2d:%2d", &zh, &zm) == 2 && zh <= 14 && zm <= 59) {
                t = timegm(&tm) - (zone[0] == '+' ? 1 : -1) * (zh * 3600 + zm * 60);
        } else {
                return TG_EINVAL;
        }
        if (t == (time_t)-1)
                return TG_EINVAL;
        *ret = (tg_wall_ms)t * 1000;
        return 0;
}

/* Writes text with "</" broken, so that nothing ends the <script> early. */
static void script_text(FILE *f, const char *t, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                if (t[i] == '<' && i + 1 < len && t[i + 1] == '/')
                        fputs("<\\", f);
                else
                        fputc(t[i], f);
        }
}

static int inline_asset(FILE *f, const char *name, bool script)
{
        const struct web_asset *a = web_asset_find(name);

        if (!a)
                return TG_ENOTFOUND;
        fputs(script ? "<script>\n" : "<style>\n", f);
        script_text(f, (const char *)a->data, a->len);
        fputs(script ? "\n</script>\n" : "\n</style>\n", f);
        return 0;
}

struct store_totals {
        double starts, closes;
        unsigned max_in_flight, refused, held_bins, owner_changes;
        double max_age;
};

static void totals_of(const struct timeline_series *s, struct store_totals *t)
{
        int64_t epoch = 0;

        memset(t, 0, sizeof(*t));
        for (size_t i = 0; i < s->n; i++) {
                const struct timeline_point *p = &s->points[i];
                t->starts += p->starts * p->seconds;
                t->closes += p->closes * p->seconds;
                t->refused += p->refused;
                if (p->in_flight > t->max_in_flight)
                        t->max_in_flight = p->in_flight;
                if (p->oldest_age_s > t->max_age)
                        t->max_age = p->oldest_age_s;
                if (p->held)
                        t->held_bins++;
                if (p->seconds > 0 && p->epoch > 0) {
                        if (epoch > 0 && p->epoch != epoch)
                                t->owner_changes++;
                        epoch = p->epoch;
                }
        }
}

static int write_store_page(FILE *f, const struct verify_args *a, const struct tg_config *cfg,
                            struct store *store, const struct timeline_series *s, tg_wall_ms from,
                            tg_wall_ms to)
{
        static const char *const scripts[] = {"uPlot.iife.min.js", "i18n.js", "timeline.js",
                                              "report.js"};
        const char *title = a->title ? a->title : "tollgate timeline";
        struct store_totals t;
        json_t *data;
        char *text;
        int r = 0;

        data = json_pack("{s:I, s:I, s:o}", "from", (json_int_t)from, "to", (json_int_t)to,
                         "series", timeline_series_json(s, INT64_MIN, cfg));
        text = data ? json_dumps(data, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
        json_decref(data);
        if (!text)
                return TG_ENOMEM;
        totals_of(s, &t);
        fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                   "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                   "<title>");
        html_text(f, title);
        fprintf(f, "</title>\n");
        r = inline_asset(f, "uPlot.min.css", false);
        if (r == 0)
                r = inline_asset(f, "console.css", false);
        fprintf(f, "</head><body class=\"report\"><main>\n<h1>");
        html_text(f, title);
        fprintf(f, "</h1>\n<p><span id=\"window\"></span> &middot; <span "
                   "class=\"lang-switch\" id=\"lang-switch\"></span></p>\n");
        fprintf(f, "<p class=\"muted\">Account <b>");
        html_text(f, store_account(store));
        fprintf(f, "</b>; admission refusals are counted for every account together.</p>\n");
        fprintf(f,
                "<p class=\"muted\">From the store alone (%s): the exit's per-second samples "
                "of every share and the API's admission refusals, in bins of %u s (samples are "
                "kept stats.keep_hours = %u h). %zu bins with data; %.0f starts, %.0f "
                "operations closed, at most %u calls in flight, oldest pending at most %.1f "
                "s; %u bins under a provider hold, %u owner changes, %u refunds refused by "
                "admission.</p>\n",
                store_backend(store), s->step_s, cfg->stats_keep_hours, s->n, t.starts, t.closes,
                t.max_in_flight, t.max_age, t.held_bins, t.owner_changes, t.refused);
        fprintf(f, "<div id=\"charts\" class=\"charts\"></div>\n");
        fprintf(f, "<script type=\"application/json\" id=\"tg-data\">");
        script_text(f, text, strlen(text));
        fprintf(f, "</script>\n");
        for (size_t i = 0; r == 0 && i < sizeof(scripts) / sizeof(scripts[0]); i++)
                r = inline_asset(f, scripts[i], true);
        fprintf(f, "</main></body></html>\n");
        free(text);
        return r;
}

static int report_from_store(const struct verify_args *a)
{
        struct tg_config *cfg = malloc(sizeof(*cfg));
        struct store *store = NULL;
        struct timeline_series s = {0};
        tg_wall_ms now = clock_wall_now(), from = 0, to = now;
        FILE *f = NULL;
        int r;

        if (!cfg)
                return 1;
        if (web_asset_count == 0) {
                fprintf(stderr, "tollgate report: --from/--to draw the console's timeline, and "
                                "this tollgate was built without its console (-DTG_CONSOLE=OFF)\n");
                r = 2;
                goto out;
        }
        if ((a->from ? report_parse_time(a->from, now, &from) : TG_EINVAL) < 0 ||
            (a->to && report_parse_time(a->to, now, &to) < 0)) {
                fprintf(stderr,
                        "tollgate report: --%s: not a time (2026-05-01T14:00[:SS][Z|+08:00] "
                        "or -90m, -2h, -1d)\n",
                        !a->from || report_parse_time(a->from, now, &from) < 0 ? "from" : "to");
                r = 2;
                goto out;
        }
        if (from >= to) {
                fprintf(stderr, "tollgate report: --from must come before --to\n");
                r = 2;
                goto out;
        }
        if (verify_load_config("report", a, cfg) < 0) {
                r = 2;
                goto out;
        }
        r = store_open(cfg->store_url, &store);
        /* the samples read are the handle's account's: --account's, else
         * the default one's */
        if (r == 0 && a->account)
                r = store_use_account(store, a->account);
        if (r == 0)
                r = timeline_read(store, from, to, STORE_POINTS, &s);
        if (r < 0) {
                fprintf(stderr, "tollgate report: cannot read the store: %s\n", tg_strerror(r));
                r = 2;
                goto out;
        }
        if (s.n == 0) {
                fprintf(stderr,
                        "tollgate report: no samples between --from and --to: no dispatcher "
                        "wrote then, or they are older than stats.keep_hours (%u h)\n",
                        cfg->stats_keep_hours);
                r = 2;
                goto out;
        }
        f = fopen(a->out, "w");
        if (!f) {
                perror(a->out);
                r = 2;
                goto out;
        }
        r = write_store_page(f, a, cfg, store, &s, from, to);
        if (fclose(f) != 0 || r < 0) {
                fprintf(stderr, "tollgate report: cannot write %s\n", a->out);
                r = 2;
                goto out;
        }
        printf("tollgate report: wrote %s (%zu points of %u s from the store)\n", a->out, s.n,
               s.step_s);
        r = 0;
out:
        timeline_series_free(&s);
        store_close(store);
        free(cfg);
        return r;
}

int cmd_report(int argc, char **argv)
{
        struct verify_args a;
        struct runlog log;
        struct verify_result *res = NULL;
        struct series s;
        int r = verify_parse_args("report", argc, argv, report_about, report_epilogue, true, &a);
        if (r)
                return options_exit_status(r);
        if (a.from || a.to)
                return report_from_store(&a);
        r = verify_load("report", &a, &log);
        if (r)
                return options_exit_status(r);
        r = verify_judge("report", &a, &log, &res);
        if (r) {
                runlog_release(&log);
                return options_exit_status(r);
        }
        int br = build_series(&log, &a, &s);
        if (br < 0) {
                fprintf(stderr, "tollgate report: %s\n",
                        br == TG_EINVAL ? "no records to draw" : tg_strerror(br));
                r = 2;
                goto out;
        }
        FILE *f = fopen(a.out, "w");
        if (!f) {
                perror(a.out);
                r = 2;
                goto out;
        }
        write_html(f, &a, &log, &s, res);
        if (fclose(f) != 0) {
                perror(a.out);
                r = 2;
        } else {
                printf("tollgate report: wrote %s (verify: %s)\n", a.out,
                       verify_summary(res)->violations ? "FAIL" : "PASS");
        }
out:
        series_free(&s);
        verify_result_free(res);
        runlog_release(&log);
        return r;
}
