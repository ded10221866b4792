/*
 * verify — the checks of verify.h over arrays the caller parsed.
 *
 * Every check works on sorted arrays of pointers into the caller's records
 * (by request id to match arrivals to starts, by start time for spacing,
 * in-flight and bursts, by operation and key for the per-operation budgets),
 * so a run costs O(n log n) time and O(n) memory, bounded by max_records.
 * Nothing is guessed: a record that cannot be judged (no request id, never
 * closed) is reported as such, and only a rule of the exit that the records
 * show broken counts as a violation.
 */
#include "tools/verify.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"

#define MAX_FINDINGS 24
#define SHOWN_ITEMS  8
#define MINUTE_NS    (60 * TG_NS_PER_S)
#define NO_MATCH     SIZE_MAX

static const unsigned burst_k[VERIFY_BURSTS] = {2, 5, 10, 50};

struct verify_result {
        struct verify_summary sum;
        struct verify_finding findings[MAX_FINDINGS];
        size_t nfindings;
};

/* Evidence text: the first SHOWN_ITEMS items, then a count of the rest. */
struct evidence {
        char *buf;
        size_t cap, len;
        size_t items;
};

static void ev_init(struct evidence *ev, struct verify_finding *f)
{
        ev->buf = f->evidence;
        ev->cap = sizeof(f->evidence);
        ev->len = 0;
        ev->items = 0;
        ev->buf[0] = '\0';
}

static void ev_vadd(struct evidence *ev, bool item, const char *fmt, va_list ap)
{
        if (item && ev->items++ >= SHOWN_ITEMS)
                return;
        if (ev->len + 1 >= ev->cap)
                return;
        int n = vsnprintf(ev->buf + ev->len, ev->cap - ev->len, fmt, ap);
        if (n < 0)
                return;
        ev->len += (size_t)n < ev->cap - ev->len ? (size_t)n : ev->cap - ev->len - 1;
}

/* One listed item (counted, shown only while fewer than SHOWN_ITEMS). */
static void ev_item(struct evidence *ev, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ev_item(struct evidence *ev, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        ev_vadd(ev, true, fmt, ap);
        va_end(ap);
}

/* Text always shown (headers, figures). */
static void ev_text(struct evidence *ev, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ev_text(struct evidence *ev, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        ev_vadd(ev, false, fmt, ap);
        va_end(ap);
}

static void ev_done(struct evidence *ev)
{
        if (ev->items > SHOWN_ITEMS)
                ev_text(ev, "  ... and %zu more\n", ev->items - SHOWN_ITEMS);
}

static struct verify_finding *finding_new(struct verify_result *r, const char *check,
                                          bool violation)
{
        if (r->nfindings >= MAX_FINDINGS)
                return NULL;
        struct verify_finding *f = &r->findings[r->nfindings++];
        memset(f, 0, sizeof(*f));
        f->check = check;
        f->violation = violation;
        if (violation)
                r->sum.violations++;
        else
                r->sum.notes++;
        return f;
}

#define SET(field, ...) snprintf(f->field, sizeof(f->field), __VA_ARGS__)

static double ms(tg_mono_ns ns)
{
        return (double)ns / 1e6;
}

static const char *kind_name(enum tg_call_kind k)
{
        return (unsigned)k < VERIFY_KINDS ? tg_call_kind_name(k) : "?";
}

/* ---- sorting -------------------------------------------------------------- */

static int cmp_call_rid(const void *a, const void *b)
{
        const struct verify_call *x = *(const struct verify_call *const *)a;
        const struct verify_call *y = *(const struct verify_call *const *)b;
        return strcmp(x->request_id, y->request_id);
}

static int cmp_arr_rid(const void *a, const void *b)
{
        const struct verify_arrival *x = *(const struct verify_arrival *const *)a;
        const struct verify_arrival *y = *(const struct verify_arrival *const *)b;
        int c = strcmp(x->request_id, y->request_id);
        if (c)
                return c;
        return (x->seq > y->seq) - (x->seq < y->seq);
}

/* A call whose start is on record. The start is when the request went on
 * the wire, written with the hand-off when the call ends; a call without
 * one was claimed ahead and never handed over (released), or its owner was
 * lost before it ended: when it went out, if it did, is not known, and its
 * start_mono_ns is the claim's. Older logs: every call. */
static bool call_started(const struct verify_call *c)
{
        return !c->start_unrecorded;
}

static int cmp_call_start(const void *a, const void *b)
{
        const struct verify_call *x = *(const struct verify_call *const *)a;
        const struct verify_call *y = *(const struct verify_call *const *)b;
        if (x->start_mono != y->start_mono)
                return (x->start_mono > y->start_mono) - (x->start_mono < y->start_mono);
        return (x->id > y->id) - (x->id < y->id);
}

static int cmp_call_epoch_start(const void *a, const void *b)
{
        const struct verify_call *x = *(const struct verify_call *const *)a;
        const struct verify_call *y = *(const struct verify_call *const *)b;
        if (x->epoch != y->epoch)
                return (x->epoch > y->epoch) - (x->epoch < y->epoch);
        return cmp_call_start(a, b);
}

static int cmp_call_op(const void *a, const void *b)
{
        const struct verify_call *x = *(const struct verify_call *const *)a;
        const struct verify_call *y = *(const struct verify_call *const *)b;
        int c = strcmp(x->operation_id, y->operation_id);
        return c ? c : cmp_call_start(a, b);
}

static int cmp_arr_mono(const void *a, const void *b)
{
        const struct verify_arrival *x = *(const struct verify_arrival *const *)a;
        const struct verify_arrival *y = *(const struct verify_arrival *const *)b;
        if (x->mono != y->mono)
                return (x->mono > y->mono) - (x->mono < y->mono);
        return (x->seq > y->seq) - (x->seq < y->seq);
}

static int cmp_arr_key(const void *a, const void *b)
{
        const struct verify_arrival *x = *(const struct verify_arrival *const *)a;
        const struct verify_arrival *y = *(const struct verify_arrival *const *)b;
        int c = strcmp(x->key, y->key);
        return c ? c : cmp_arr_mono(a, b);
}

static int cmp_exec_key(const void *a, const void *b)
{
        const struct verify_execution *x = *(const struct verify_execution *const *)a;
        const struct verify_execution *y = *(const struct verify_execution *const *)b;
        return strcmp(x->key, y->key);
}

/* A (operation, key) pair seen at the provider for a matched POST. */
struct op_key {
        const char *op;
        const char *key;
};

static int cmp_op_key(const void *a, const void *b)
{
        const struct op_key *x = a, *y = b;
        int c = strcmp(x->op, y->op);
        return c ? c : strcmp(x->key, y->key);
}

/* ---- the run ---------------------------------------------------------------- */

struct run {
        const struct verify_limits *lim;
        const struct verify_call *calls;
        size_t ncalls;
        const struct verify_arrival *arr;
        size_t narr;
        size_t nledger;
        struct verify_result *r;
        const struct verify_call **by_start; /* calls by start time */
        size_t nstarts;     /* the first nstarts of by_start: their start is on record */
        size_t *match;      /* arrival index -> call index or NO_MATCH */
        size_t *arrival_of; /* call index -> first arrival index or NO_MATCH */
};

static void check_matching(struct run *run, const struct verify_call **by_rid,
                           const struct verify_arrival **arr_rid)
{
        struct verify_summary *s = &run->r->sum;
        struct verify_finding *f_un = NULL, *f_dup = NULL, *f_kind = NULL, *f_cdup = NULL;
        struct evidence ev_un, ev_dup, ev_kind, ev_cdup;
        size_t i = 0, j = 0;

        /* Request ids logged twice make the matching ambiguous. */
        for (size_t c = 1; c < run->ncalls; c++) {
                if (by_rid[c]->request_id[0] == '\0' ||
                    strcmp(by_rid[c]->request_id, by_rid[c - 1]->request_id) != 0)
                        continue;
                if (!f_cdup) {
                        f_cdup = finding_new(run->r, "request_id_reused", true);
                        if (!f_cdup)
                                break;
                        ev_init(&ev_cdup, f_cdup);
                }
                ev_item(&ev_cdup, "  calls %lld and %lld both carry request id %s\n",
                        (long long)by_rid[c - 1]->id, (long long)by_rid[c]->id,
                        by_rid[c]->request_id);
        }
        if (f_cdup) {
                struct verify_finding *f = f_cdup;
                ev_done(&ev_cdup);
                SET(problem, "%zu call log records share a request id with another call",
                    ev_cdup.items);
                SET(trigger, "a sender that reuses X-Request-Id, or two logs merged");
                SET(impact, "an arrival cannot be tied to one start; hidden re-sends could hide "
                            "behind the shared id");
                SET(verify, "list the call log sorted by request_id");
                SET(result, "the same request id on more than one call");
                SET(fix, "one fresh request id per call, generated where the call is started");
        }

        while (i < run->narr) {
                const struct verify_arrival *a = arr_rid[i];
                size_t end = i + 1;
                while (end < run->narr && a->request_id[0] &&
                       strcmp(arr_rid[end]->request_id, a->request_id) == 0)
                        end++;
                int c = 1;
                if (a->request_id[0]) {
                        while (j < run->ncalls &&
                               (c = strcmp(by_rid[j]->request_id, a->request_id)) < 0)
                                j++;
                        if (j >= run->ncalls)
                                c = 1;
                }
                if (c != 0) {
                        for (size_t k = i; k < end; k++) {
                                const struct verify_arrival *u = arr_rid[k];
                                s->unmatched++;
                                if (!f_un) {
                                        f_un = finding_new(run->r, "arrival_unmatched", true);
                                        if (f_un)
                                                ev_init(&ev_un, f_un);
                                }
                                if (f_un)
                                        ev_item(&ev_un,
                                                "  provider arrival #%llu %s key=%s request_id=%s "
                                                "wall_ms=%lld: no logged start\n",
                                                (unsigned long long)u->seq,
                                                u->post ? "POST" : "GET", u->key[0] ? u->key : "-",
                                                u->request_id[0] ? u->request_id : "(none)",
                                                (long long)u->wall);
                        }
                        i = end;
                        continue;
                }
                size_t ci = (size_t)(by_rid[j] - run->calls);
                const struct verify_call *call = by_rid[j];
                s->matched++;
                run->arrival_of[ci] = (size_t)(a - run->arr);
                run->match[a - run->arr] = ci;
                if ((unsigned)call->kind < VERIFY_KINDS)
                        s->kind_arrivals[call->kind]++;
                if (a->post != (call->kind != TG_KIND_QUERY)) {
                        if (!f_kind) {
                                f_kind = finding_new(run->r, "arrival_kind_mismatch", true);
                                if (f_kind)
                                        ev_init(&ev_kind, f_kind);
                        }
                        if (f_kind)
                                ev_item(&ev_kind,
                                        "  call %lld (%s, %s) arrived as a %s (arrival #%llu)\n",
                                        (long long)call->id, kind_name(call->kind),
                                        call->request_id, a->post ? "POST" : "GET",
                                        (unsigned long long)a->seq);
                }
                for (size_t k = i + 1; k < end; k++) {
                        const struct verify_arrival *d = arr_rid[k];
                        s->duplicate_arrivals++;
                        run->match[d - run->arr] = ci;
                        if (!f_dup) {
                                f_dup = finding_new(run->r, "arrival_duplicate", true);
                                if (f_dup)
                                        ev_init(&ev_dup, f_dup);
                        }
                        if (f_dup)
                                ev_item(
                                    &ev_dup,
                                    "  call %lld (%s %s attempt %u, request_id %s) logged once, "
                                    "arrived again as #%llu (first #%llu), %.1f ms later\n",
                                    (long long)call->id, kind_name(call->kind), call->operation_id,
                                    call->attempt, call->request_id, (unsigned long long)d->seq,
                                    (unsigned long long)a->seq, ms(d->mono - a->mono));
                }
                i = end;
        }
        if (f_un) {
                struct verify_finding *f = f_un;
                ev_done(&ev_un);
                SET(problem, "%zu provider arrival(s) match no start in tollgate's call log",
                    s->unmatched);
                SET(trigger, "a retry below the exit (HTTP library, proxy, SDK) or a sender that "
                             "does not go through the exit");
                SET(impact, "calls the exit never counted: the provider sees more than the "
                            "configured rate, and an operation may be executed by a path "
                            "with no idempotency discipline");
                SET(verify, "tollgate verify --calls CALLS --arrivals ARRIVALS");
                SET(result, "%zu of %zu arrivals unmatched", s->unmatched, run->narr);
                SET(fix, "turn off retries below the exit and route every sender (workers, "
                         "scripts, operators) through tollgate");
        }
        if (f_dup) {
                struct verify_finding *f = f_dup;
                ev_done(&ev_dup);
                SET(problem,
                    "%zu provider arrival(s) repeat a request id that tollgate started "
                    "once",
                    s->duplicate_arrivals);
                SET(trigger, "a silent re-send below the exit, e.g. an HTTP library retrying a "
                             "request on a reused keep-alive connection that died");
                SET(impact, "a hidden retry: the POST reached the provider twice, outside the "
                            "attempt budget and the pacing");
                SET(verify, "group the provider's arrivals by request id; any id twice");
                SET(result, "%zu extra arrival(s)", s->duplicate_arrivals);
                SET(fix, "fresh connection per call, or a guard that refuses a second send of "
                         "one handle (tollgate's CURLOPT_PREREQFUNCTION)");
        }
        if (f_kind) {
                struct verify_finding *f = f_kind;
                ev_done(&ev_kind);
                SET(problem, "%zu call(s) arrived with another method than their kind",
                    ev_kind.items);
                SET(trigger, "a request id reused across calls, or logs of different runs");
                SET(impact, "the match is not trustworthy; counts by kind are wrong");
                SET(verify, "compare the call's kind with the arrival's method");
                SET(result, "queries must arrive as GET, POSTs as POST");
                SET(fix, "check that both logs come from the same run");
        }

        /* Calls the provider never saw. */
        struct verify_finding *f_seen = NULL;
        struct evidence ev;
        for (size_t c = 0; c < run->ncalls; c++) {
                const struct verify_call *call = run->by_start[c];
                size_t ci = (size_t)(call - run->calls);
                if (run->arrival_of[ci] != NO_MATCH || call->sent == 0)
                        continue;
                s->unseen_calls++;
                if (!f_seen) {
                        f_seen = finding_new(run->r, "call_unseen", false);
                        if (!f_seen)
                                break;
                        ev_init(&ev, f_seen);
                }
                ev_item(&ev, "  call %lld %s %s attempt %u request_id %s class %s status %d\n",
                        (long long)call->id, kind_name(call->kind), call->operation_id,
                        call->attempt, call->request_id, call->cls[0] ? call->cls : "open",
                        call->http_status);
        }
        if (f_seen) {
                struct verify_finding *f = f_seen;
                ev_done(&ev);
                SET(problem, "%zu call(s) that may have been sent have no provider arrival",
                    s->unseen_calls);
                SET(trigger, "the request died on the way (timeout before the provider read it, "
                             "connection reset), the provider record is partial, or the logs "
                             "come from different runs");
                SET(impact, "none for the exit's rules; a call with an HTTP answer but no "
                            "arrival would mean another provider answered");
                SET(verify, "compare the run's time range in both logs");
                SET(result, "%zu unseen", s->unseen_calls);
                SET(fix, "nothing if the calls timed out or failed to connect; else check the "
                         "provider record's bounds");
        }
}

static void check_spacing(struct run *run)
{
        struct verify_summary *s = &run->r->sum;
        const struct verify_call **v = run->by_start;
        double interval = 1e9 / run->lim->rate;
        struct verify_finding *f = NULL;
        struct evidence ev;

        s->min_start_gap_ns = TG_MONO_NEVER;
        for (size_t i = 1; i < run->nstarts; i++) {
                tg_mono_ns gap = v[i]->start_mono - v[i - 1]->start_mono;
                if (gap < s->min_start_gap_ns) {
                        s->min_start_gap_ns = gap;
                        s->min_gap_call_a = v[i - 1]->id;
                        s->min_gap_call_b = v[i]->id;
                }
                /* One ns of slack: the pacer's interval is ceil(1e9 / rate). */
                if ((double)gap + 1.0 >= interval)
                        continue;
                s->spacing_violations++;
                if (!f) {
                        f = finding_new(run->r, "spacing", true);
                        if (!f)
                                continue;
                        ev_init(&ev, f);
                }
                ev_item(&ev,
                        "  calls %lld (%s %s) and %lld (%s %s) started %.3f ms apart "
                        "(epochs %lld, %lld)\n",
                        (long long)v[i - 1]->id, kind_name(v[i - 1]->kind), v[i - 1]->operation_id,
                        (long long)v[i]->id, kind_name(v[i]->kind), v[i]->operation_id, ms(gap),
                        (long long)v[i - 1]->epoch, (long long)v[i]->epoch);
        }
        if (f) {
                ev_done(&ev);
                SET(problem,
                    "%zu pair(s) of starts closer than 1/rate = %.3f ms at the transport "
                    "boundary",
                    s->spacing_violations, interval / 1e6);
                SET(trigger, "a permit handed out ahead of the start, a second exit, or catch-up "
                             "of missed slots after a pause");
                SET(impact, "the provider sees bursts above the agreed rate exactly when it is "
                            "already slow");
                SET(verify, "sort the call log by start_mono_ns; every gap >= 1/rate");
                SET(result, "minimum gap %.3f ms between calls %lld and %lld",
                    ms(s->min_start_gap_ns), (long long)s->min_gap_call_a,
                    (long long)s->min_gap_call_b);
                SET(fix, "check spacing and in-flight at the moment of handoff and count the next "
                         "slot from the actual start; one dispatcher per account");
        }
}

static void check_bursts(struct run *run, const struct verify_arrival **arr_mono)
{
        struct verify_summary *s = &run->r->sum;
        const struct verify_call **v = run->by_start;
        struct verify_finding *f = NULL;
        struct evidence ev;

        for (int b = 0; b < VERIFY_BURSTS; b++) {
                struct verify_burst *vb = &s->bursts[b];
                vb->k = burst_k[b];
                vb->window_ns = (tg_mono_ns)floor((double)vb->k * 1e9 / run->lim->rate);
                size_t lo = 0;
                for (size_t hi = 0; hi < run->nstarts; hi++) {
                        while (v[hi]->start_mono - v[lo]->start_mono >= vb->window_ns)
                                lo++;
                        if (hi - lo + 1 > vb->max_starts) {
                                vb->max_starts = (unsigned)(hi - lo + 1);
                                vb->at_call = v[lo]->id;
                        }
                }
                lo = 0;
                for (size_t hi = 0; hi < run->narr; hi++) {
                        while (arr_mono[hi]->mono - arr_mono[lo]->mono >= vb->window_ns)
                                lo++;
                        if (hi - lo + 1 > vb->max_arrivals)
                                vb->max_arrivals = (unsigned)(hi - lo + 1);
                }
                if (vb->max_starts <= vb->k)
                        continue;
                if (!f) {
                        f = finding_new(run->r, "burst", true);
                        if (!f)
                                continue;
                        ev_init(&ev, f);
                }
                ev_item(&ev, "  %u starts within %.1f ms (k=%u allows %u), from call %lld\n",
                        vb->max_starts, ms(vb->window_ns), vb->k, vb->k, (long long)vb->at_call);
        }
        size_t lo = 0, best = 0;
        for (size_t hi = 0; hi < run->nstarts; hi++) {
                while (v[hi]->start_mono - v[lo]->start_mono >= MINUTE_NS)
                        lo++;
                if (hi - lo + 1 > best)
                        best = hi - lo + 1;
        }
        s->busiest_minute_per_s = (double)best / 60.0;
        if (f) {
                ev_done(&ev);
                SET(problem, "short bursts above the rate at the transport boundary");
                SET(trigger, "a batch falling due at one instant, or a pause followed by catch-up");
                SET(impact,
                    "the busiest minute averages %.2f/s and looks fine; the provider saw "
                    "the bursts",
                    s->busiest_minute_per_s);
                SET(verify, "count starts in every window of k/rate for a few k");
                SET(result, "see evidence");
                SET(fix, "a smooth pacer: no saved-up credit, no make-up of missed slots");
        }
}

static int cmp_mono(const void *a, const void *b)
{
        tg_mono_ns x = *(const tg_mono_ns *)a, y = *(const tg_mono_ns *)b;
        return (x > y) - (x < y);
}

/* Calls ordered by epoch, then start: how many of its epoch are open at each
 * start. Within an epoch, open at start s = starts so far - ends <= s (a call
 * ends no earlier than it starts; one never closed, because its owner died,
 * stays open). ends is scratch space for ncalls times. */
static void check_in_flight(struct run *run, const struct verify_call **by_epoch, tg_mono_ns *ends)
{
        struct verify_summary *s = &run->r->sum;
        unsigned cap = run->lim->max_in_flight;
        struct verify_finding *f = NULL;
        struct evidence ev;

        for (size_t seg = 0; seg < run->nstarts;) {
                size_t seg_end = seg;
                while (seg_end < run->nstarts && by_epoch[seg_end]->epoch == by_epoch[seg]->epoch) {
                        const struct verify_call *c = by_epoch[seg_end];
                        tg_mono_ns e = c->end_mono < c->start_mono ? c->start_mono : c->end_mono;
                        ends[seg_end - seg] = e;
                        seg_end++;
                }
                qsort(ends, seg_end - seg, sizeof(*ends), cmp_mono);
                size_t closed = 0;
                for (size_t i = seg; i < seg_end; i++) {
                        const struct verify_call *c = by_epoch[i];
                        if (c->in_flight > s->max_in_flight_logged)
                                s->max_in_flight_logged = c->in_flight;
                        while (closed < seg_end - seg && ends[closed] <= c->start_mono)
                                closed++;
                        unsigned open = (unsigned)(i - seg + 1 - closed);
                        if (open > s->max_in_flight_computed)
                                s->max_in_flight_computed = open;
                        if (c->in_flight <= cap && open <= cap)
                                continue;
                        s->in_flight_violations++;
                        if (!f) {
                                f = finding_new(run->r, "in_flight", true);
                                if (!f)
                                        continue;
                                ev_init(&ev, f);
                        }
                        ev_item(&ev,
                                "  call %lld (%s %s) started with %u in flight logged, %u open "
                                "by the calls' own times (epoch %lld)\n",
                                (long long)c->id, kind_name(c->kind), c->operation_id, c->in_flight,
                                open, (long long)c->epoch);
                }
                seg = seg_end;
        }
        if (f) {
                ev_done(&ev);
                SET(problem, "%zu start(s) with more than %u calls in flight",
                    s->in_flight_violations, cap);
                SET(trigger, "slow provider answers while starts continue");
                SET(impact, "local resources (sockets, memory) and the provider's concurrency "
                            "grow without bound when it slows down");
                SET(verify, "count calls open at each start, per owner epoch");
                SET(result, "max %u logged, %u recomputed", s->max_in_flight_logged,
                    s->max_in_flight_computed);
                SET(fix, "check in-flight room at the handoff, together with the slot");
        }
}

/* Receive spacing vs start spacing over consecutive matched starts. */
static void check_provider_spacing(struct run *run, const struct verify_arrival **arr_mono)
{
        struct verify_summary *s = &run->r->sum;
        const struct verify_call *prev = NULL;
        const struct verify_arrival *prev_a = NULL;
        bool any_delay = false;

        /* The exit's own calls as the provider received them: each call's
         * first arrival (an arrival with no logged start, or a second one of a
         * start, is a violation of its own). Judged as a gateway's limiter
         * measures: in whole milliseconds. */
        const struct verify_arrival *last = NULL;
        s->min_arrival_gap_ns = TG_MONO_NEVER;
        for (size_t i = 0; i < run->narr; i++) {
                const struct verify_arrival *a = arr_mono[i];
                size_t ai = (size_t)(a - run->arr);
                size_t ci = run->match[ai];
                if (ci == NO_MATCH || run->arrival_of[ci] != ai)
                        continue;
                if (last) {
                        tg_mono_ns gap = a->mono - last->mono;
                        int64_t ms_gap = a->mono / TG_NS_PER_MS - last->mono / TG_NS_PER_MS;
                        if (gap < s->min_arrival_gap_ns)
                                s->min_arrival_gap_ns = gap;
                        if ((double)ms_gap * run->lim->rate < 1000.0)
                                s->arrival_gaps_below++;
                }
                last = a;
        }
        for (size_t i = 0; i < run->nstarts; i++) {
                const struct verify_call *c = run->by_start[i];
                size_t ai = run->arrival_of[c - run->calls];
                if (ai == NO_MATCH) {
                        prev = NULL;
                        continue;
                }
                const struct verify_arrival *a = &run->arr[ai];
                tg_mono_ns delay = a->mono - c->start_mono;
                if (!any_delay || delay < s->delay_min_ns)
                        s->delay_min_ns = delay;
                if (!any_delay || delay > s->delay_max_ns)
                        s->delay_max_ns = delay;
                any_delay = true;
                if (prev) {
                        tg_mono_ns lg = c->start_mono - prev->start_mono;
                        tg_mono_ns pg = a->mono - prev_a->mono;
                        tg_mono_ns d = pg > lg ? pg - lg : lg - pg;
                        if (d > s->max_gap_diff_ns)
                                s->max_gap_diff_ns = d;
                        if (pg < 0)
                                s->reordered++;
                }
                prev = c;
                prev_a = a;
        }
        /* starts closer than 1/rate are the violation: their arrivals follow */
        if (s->arrival_gaps_below == 0 || s->spacing_violations > 0)
                return;
        struct verify_finding *f = finding_new(run->r, "receive_spacing", true);
        if (!f)
                return;
        SET(problem,
            "the provider received %zu pair(s) closer than 1/rate, measured in whole "
            "milliseconds as a gateway's limiter does%s",
            s->arrival_gaps_below, ", although every start was spaced on the wire");
        SET(evidence,
            "  local minimum start gap %.3f ms; provider minimum receive gap %.3f ms; largest "
            "difference between a start gap and its receive gap %.3f ms; %zu pair(s) received "
            "in the other order; start-to-arrival delay %.3f..%.3f ms\n",
            ms(s->min_start_gap_ns == TG_MONO_NEVER ? 0 : s->min_start_gap_ns),
            ms(s->min_arrival_gap_ns), ms(s->max_gap_diff_ns), s->reordered, ms(s->delay_min_ns),
            ms(s->delay_max_ns));
        SET(trigger, "network and server scheduling delays differ from call to call and took "
                     "more off a gap than the exit's spacing margin");
        SET(impact, "a provider limiting at the account's rate with no burst would have "
                    "refused those calls (429), spending attempts and holding the exit");
        SET(verify, "match arrivals to starts by request id; judge each receive gap in whole "
                    "milliseconds against 1/rate");
        SET(result, "the spacing promise did not hold at the provider's door");
        SET(fix, "raise exit.spacing_margin_us above the path's variation (the largest "
                 "difference between a start gap and its receive gap, above), or find what "
                 "delays some requests on their way");
}

/* A POST the provider refused for the whole account (429/503): nothing was
 * executed and the exit does not count it against the operation's budget
 * (the `limited` event, core/policy.h), so neither does this check. */
static bool limited_call(const struct verify_call *c)
{
        return (c->http_status == 429 || c->http_status == 503) && strcmp(c->cls, "retryable") == 0;
}

static bool limited_arrival(const struct verify_arrival *a)
{
        return (a->answer == 429 || a->answer == 503) && !a->executed;
}

static void check_operations(struct run *run, const struct verify_call **by_op,
                             const struct verify_arrival **arr_key, struct op_key *pairs)
{
        struct verify_summary *s = &run->r->sum;
        unsigned max_att = run->lim->max_attempts;
        struct verify_finding *f_att = NULL, *f_key = NULL;
        struct evidence ev_att, ev_key;

        /* Automatic POSTs per operation, in the call log: the summary has
         * them all, the check leaves out those answered 429/503 unless the
         * exit counts them (retry.count_limited). */
        for (size_t i = 0; i < run->ncalls;) {
                size_t end = i;
                unsigned posts = 0;
                unsigned counted = 0;
                while (end < run->ncalls &&
                       strcmp(by_op[end]->operation_id, by_op[i]->operation_id) == 0) {
                        if (by_op[end]->kind == TG_KIND_FIRST ||
                            by_op[end]->kind == TG_KIND_RETRY) {
                                posts++;
                                counted += run->lim->count_limited || !limited_call(by_op[end]);
                        }
                        end++;
                }
                s->operations++;
                if (posts > s->max_auto_posts_per_op)
                        s->max_auto_posts_per_op = posts;
                if (counted > max_att) {
                        s->ops_over_attempts++;
                        if (!f_att) {
                                f_att = finding_new(run->r, "attempts", true);
                                if (f_att)
                                        ev_init(&ev_att, f_att);
                        }
                        if (f_att)
                                ev_item(&ev_att,
                                        "  operation %s: %u automatic POSTs in the call "
                                        "log\n",
                                        by_op[i]->operation_id, counted);
                }
                i = end;
        }

        /* POSTs per key at the provider (operator re-sends and 429/503
         * answers excluded). */
        for (size_t i = 0; i < run->narr;) {
                size_t end = i;
                unsigned posts = 0, counted = 0;
                while (end < run->narr && strcmp(arr_key[end]->key, arr_key[i]->key) == 0) {
                        const struct verify_arrival *a = arr_key[end];
                        size_t ci = run->match[a - run->arr];
                        if (a->post && (ci == NO_MATCH || run->calls[ci].kind != TG_KIND_MANUAL)) {
                                posts++;
                                counted += run->lim->count_limited || !limited_arrival(a);
                        }
                        end++;
                }
                if (posts > s->max_posts_per_key)
                        s->max_posts_per_key = posts;
                if (counted > max_att && arr_key[i]->key[0]) {
                        s->ops_over_attempts++;
                        if (!f_att) {
                                f_att = finding_new(run->r, "attempts", true);
                                if (f_att)
                                        ev_init(&ev_att, f_att);
                        }
                        if (f_att)
                                ev_item(&ev_att,
                                        "  key %s: %u automatic POSTs arrived at the "
                                        "provider\n",
                                        arr_key[i]->key, counted);
                }
                i = end;
        }
        if (f_att) {
                struct verify_finding *f = f_att;
                ev_done(&ev_att);
                SET(problem, "operations sent more than %u automatic POSTs", max_att);
                SET(trigger, "retries counted in more than one layer, or a re-send after an "
                             "unknown outcome that did not count as an attempt");
                SET(impact, "the attempt budget no longer bounds the load an operation puts on "
                            "the provider");
                SET(verify, "count POSTs per operation in the call log and per key at the "
                            "provider, leaving out those answered 429/503 (refused for the "
                            "whole account, nothing executed: not counted against the budget)");
                SET(result, "max %u in the call log, %u at the provider", s->max_auto_posts_per_op,
                    s->max_posts_per_key);
                SET(fix, "one place decides retries (the dispatcher) and counts every POST");
        }

        /* Keys per operation: matched POSTs only. */
        size_t np = 0;
        for (size_t i = 0; i < run->narr; i++) {
                const struct verify_arrival *a = &run->arr[i];
                size_t ci = run->match[i];
                if (!a->post || ci == NO_MATCH)
                        continue;
                pairs[np].op = run->calls[ci].operation_id;
                pairs[np].key = a->key;
                np++;
        }
        qsort(pairs, np, sizeof(*pairs), cmp_op_key);
        for (size_t i = 0; i < np;) {
                size_t end = i;
                unsigned keys = 0;
                while (end < np && strcmp(pairs[end].op, pairs[i].op) == 0) {
                        if (end == i || strcmp(pairs[end].key, pairs[end - 1].key) != 0)
                                keys++;
                        end++;
                }
                if (keys > s->max_keys_per_op)
                        s->max_keys_per_op = keys;
                if (keys > 1) {
                        s->ops_multi_key++;
                        if (!f_key) {
                                f_key = finding_new(run->r, "one_key", true);
                                if (f_key)
                                        ev_init(&ev_key, f_key);
                        }
                        if (f_key) {
                                ev_item(&ev_key, "  operation %s sent %u keys:", pairs[i].op, keys);
                                for (size_t k = i; k < end && k < i + 4; k++)
                                        ev_text(&ev_key, " %s", pairs[k].key);
                                ev_text(&ev_key, "\n");
                        }
                }
                i = end;
        }
        if (f_key) {
                struct verify_finding *f = f_key;
                ev_done(&ev_key);
                SET(problem,
                    "%zu operation(s) reached the provider under more than one "
                    "idempotency key",
                    s->ops_multi_key);
                SET(trigger, "a retry that derives a new key, e.g. after a timeout");
                SET(impact, "a new key is a new refund: the customer may be refunded twice");
                SET(verify, "group the matched POST arrivals by operation; count distinct keys");
                SET(result, "max %u keys for one operation", s->max_keys_per_op);
                SET(fix, "the key is the operation id, forever; unknown outcomes are queried "
                         "with the same key");
        }
}

static void check_executions(struct run *run, const struct verify_arrival **arr_key,
                             const struct verify_execution **led)
{
        struct verify_summary *s = &run->r->sum;
        unsigned max = run->lim->max_executions;
        struct verify_finding *f = NULL;
        struct evidence ev;

        for (size_t i = 0; i < run->narr;) {
                size_t end = i;
                unsigned n = 0;
                while (end < run->narr && strcmp(arr_key[end]->key, arr_key[i]->key) == 0) {
                        if (arr_key[end]->executed)
                                n++;
                        end++;
                }
                if (n > s->max_executions)
                        s->max_executions = n;
                if (n > max) {
                        s->keys_over_executions++;
                        if (!f) {
                                f = finding_new(run->r, "executions", true);
                                if (f)
                                        ev_init(&ev, f);
                        }
                        if (f)
                                ev_item(&ev, "  key %s: %u arrivals executed a refund\n",
                                        arr_key[i]->key, n);
                }
                i = end;
        }
        for (size_t i = 0; i < run->nledger; i++) {
                const struct verify_execution *e = led[i];
                if (e->executions > s->max_executions)
                        s->max_executions = e->executions;
                if (e->executions <= max)
                        continue;
                s->keys_over_executions++;
                if (!f) {
                        f = finding_new(run->r, "executions", true);
                        if (!f)
                                continue;
                        ev_init(&ev, f);
                }
                ev_item(&ev, "  key %s: %u executions in the provider's ledger\n", e->key,
                        e->executions);
        }
        if (f) {
                ev_done(&ev);
                SET(problem, "keys executed more than %u time(s) at the provider", max);
                SET(trigger, "a re-send the provider did not deduplicate (new key, key past "
                             "retention)");
                SET(impact, "duplicate refunds");
                SET(verify, "the provider's ledger (executions per key) and the arrivals' "
                            "executed flags");
                SET(result, "max %u executions for one key", s->max_executions);
                SET(fix, "same key on every attempt, never re-send past the key's retention");
        }
}

static void check_kinds(struct run *run)
{
        struct verify_summary *s = &run->r->sum;
        unsigned missing = 0;

        for (unsigned k = 0; k < VERIFY_KINDS; k++)
                if ((run->lim->expect_kinds & (1u << k)) && s->kind_calls[k] == 0)
                        missing |= 1u << k;
        if (!missing)
                return;
        struct verify_finding *f = finding_new(run->r, "kinds", true);
        if (!f)
                return;
        struct evidence ev;
        ev_init(&ev, f);
        for (unsigned k = 0; k < VERIFY_KINDS; k++)
                ev_text(&ev, "  %-6s %zu in the call log, %zu matched at the provider%s\n",
                        kind_name((enum tg_call_kind)k), s->kind_calls[k], s->kind_arrivals[k],
                        (missing & (1u << k)) ? "  <- expected" : "");
        SET(problem, "expected call kinds are missing from the call log");
        SET(trigger, "a kind of call that goes out by another path (a side door)");
        SET(impact, "calls the exit does not count; the quota is shared with an invisible "
                    "sender");
        SET(verify, "run a mix of first attempts, retries, queries and an operator re-send");
        SET(result, "see evidence");
        SET(fix, "route every kind through the one exit");
}

static void note_open_calls(struct run *run)
{
        struct verify_summary *s = &run->r->sum;
        for (size_t i = 0; i < run->ncalls; i++)
                s->open_calls += run->calls[i].end_mono == TG_MONO_NEVER;
        if (s->open_calls == 0)
                return;
        struct verify_finding *f = finding_new(run->r, "calls_open", false);
        if (!f)
                return;
        struct evidence ev;
        ev_init(&ev, f);
        for (size_t i = 0; i < run->ncalls; i++) {
                const struct verify_call *c = run->by_start[i];
                if (c->end_mono == TG_MONO_NEVER)
                        ev_item(&ev, "  call %lld %s %s attempt %u epoch %lld\n", (long long)c->id,
                                kind_name(c->kind), c->operation_id, c->attempt,
                                (long long)c->epoch);
        }
        ev_done(&ev);
        SET(problem, "%zu call(s) were never closed in the call log", s->open_calls);
        SET(trigger, "the dispatcher died between send and settle, or is still running");
        SET(impact, "their outcome is unknown; the next owner must reconcile them with the "
                    "same key");
        SET(verify, "the operations' states: unknown, then reconciled by a query");
        SET(result, "open calls count as in flight for their whole epoch here");
        SET(fix, "nothing if a later owner reconciled them");
}

static void note_unrecorded_starts(struct run *run)
{
        struct verify_summary *s = &run->r->sum;
        if (s->unrecorded_starts == 0)
                return;
        struct verify_finding *f = finding_new(run->r, "start_unrecorded", false);
        if (!f)
                return;
        struct evidence ev;
        ev_init(&ev, f);
        for (size_t i = run->nstarts; i < run->ncalls; i++) {
                const struct verify_call *c = run->by_start[i];
                ev_item(&ev, "  call %lld %s %s attempt %u epoch %lld%s\n", (long long)c->id,
                        kind_name(c->kind), c->operation_id, c->attempt, (long long)c->epoch,
                        c->sent == 0 ? " (not sent)" : "");
        }
        ev_done(&ev);
        SET(problem, "%zu call(s) claimed ahead without a recorded start", s->unrecorded_starts);
        SET(trigger, "a claim given back before it was sent, or an owner lost between a claim "
                     "and the end of its call (killed, or still running)");
        SET(impact, "when such a call went out, if it did, is not in the call log; the ones that "
                    "did go out are in the provider's record");
        SET(verify, "the provider's receive spacing (judged above) covers every call that "
                    "arrived");
        SET(result, "left out of the start spacing, burst and in-flight checks");
        SET(fix, "nothing: a lost owner's calls are reconciled as unknown by the next one");
}

/* Violations first, then notes, each in the order found. */
static void order_findings(struct verify_result *r)
{
        struct verify_finding tmp;
        for (size_t i = 1; i < r->nfindings; i++) {
                for (size_t j = i;
                     j > 0 && r->findings[j].violation && !r->findings[j - 1].violation; j--) {
                        tmp = r->findings[j];
                        r->findings[j] = r->findings[j - 1];
                        r->findings[j - 1] = tmp;
                }
        }
}

void verify_limits_default(struct verify_limits *ret_limits)
{
        memset(ret_limits, 0, sizeof(*ret_limits));
        ret_limits->rate = 5.0;
        ret_limits->max_in_flight = 10;
        ret_limits->max_attempts = 3;
        ret_limits->max_executions = 1;
        ret_limits->max_records = VERIFY_MAX_RECORDS;
}

int verify_run(const struct verify_limits *limits, const struct verify_call *calls, size_t ncalls,
               const struct verify_arrival *arrivals, size_t narrivals,
               const struct verify_execution *ledger, size_t nledger,
               struct verify_result **ret_result)
{
        if (!limits || !ret_result || !(limits->rate > 0) || limits->rate > 1e9 ||
            limits->max_in_flight == 0 || limits->max_attempts == 0 || (ncalls && !calls) ||
            (narrivals && !arrivals) || (nledger && !ledger))
                return TG_EINVAL;
        if (ncalls > limits->max_records || narrivals > limits->max_records ||
            nledger > limits->max_records)
                return TG_EFULL;

        int rc = TG_ENOMEM;
        struct verify_result *r = calloc(1, sizeof(*r));
        const struct verify_call **by_start = malloc((ncalls + 1) * sizeof(*by_start));
        const struct verify_call **by_other = malloc((ncalls + 1) * sizeof(*by_other));
        const struct verify_arrival **arr_a = malloc((narrivals + 1) * sizeof(*arr_a));
        const struct verify_arrival **arr_b = malloc((narrivals + 1) * sizeof(*arr_b));
        const struct verify_execution **led = malloc((nledger + 1) * sizeof(*led));
        size_t *match = malloc((narrivals + 1) * sizeof(*match));
        size_t *arrival_of = malloc((ncalls + 1) * sizeof(*arrival_of));
        struct op_key *pairs = malloc((narrivals + 1) * sizeof(*pairs));
        tg_mono_ns *ends = malloc((ncalls + 1) * sizeof(*ends));
        if (!r || !by_start || !by_other || !arr_a || !arr_b || !led || !match || !arrival_of ||
            !pairs || !ends)
                goto out;

        struct verify_summary *s = &r->sum;
        s->calls = ncalls;
        s->arrivals = narrivals;
        s->ledger_keys = nledger;
        s->ledger_given = ledger != NULL;
        s->interval_ns = (tg_mono_ns)ceil(1e9 / limits->rate);
        /* the calls whose start is on record first, then the others */
        size_t nstarts = 0, nother = ncalls;
        for (size_t i = 0; i < ncalls; i++) {
                if (call_started(&calls[i]))
                        by_start[nstarts++] = &calls[i];
                else
                        by_start[--nother] = &calls[i];
                by_other[i] = &calls[i];
                arrival_of[i] = NO_MATCH;
                if ((unsigned)calls[i].kind < VERIFY_KINDS)
                        s->kind_calls[calls[i].kind]++;
        }
        for (size_t i = 0; i < narrivals; i++) {
                arr_a[i] = &arrivals[i];
                arr_b[i] = &arrivals[i];
                match[i] = NO_MATCH;
        }
        for (size_t i = 0; i < nledger; i++)
                led[i] = &ledger[i];
        qsort(by_start, nstarts, sizeof(*by_start), cmp_call_start);
        qsort(by_start + nstarts, ncalls - nstarts, sizeof(*by_start), cmp_call_start);
        s->unrecorded_starts = ncalls - nstarts;

        struct run run = {.lim = limits,
                          .calls = calls,
                          .ncalls = ncalls,
                          .arr = arrivals,
                          .narr = narrivals,
                          .nledger = nledger,
                          .r = r,
                          .by_start = by_start,
                          .nstarts = nstarts,
                          .match = match,
                          .arrival_of = arrival_of};

        qsort(by_other, ncalls, sizeof(*by_other), cmp_call_rid);
        qsort(arr_a, narrivals, sizeof(*arr_a), cmp_arr_rid);
        check_matching(&run, by_other, arr_a);
        check_spacing(&run);
        qsort(arr_a, narrivals, sizeof(*arr_a), cmp_arr_mono);
        check_bursts(&run, arr_a);
        check_provider_spacing(&run, arr_a);
        /* in flight: the calls whose start is on record, by epoch */
        memcpy(by_other, by_start, ncalls * sizeof(*by_other));
        qsort(by_other, nstarts, sizeof(*by_other), cmp_call_epoch_start);
        check_in_flight(&run, by_other, ends);
        qsort(by_other, ncalls, sizeof(*by_other), cmp_call_op);
        qsort(arr_b, narrivals, sizeof(*arr_b), cmp_arr_key);
        check_operations(&run, by_other, arr_b, pairs);
        qsort(led, nledger, sizeof(*led), cmp_exec_key);
        check_executions(&run, arr_b, led);
        check_kinds(&run);
        note_open_calls(&run);
        note_unrecorded_starts(&run);
        order_findings(r);

        *ret_result = r;
        r = NULL;
        rc = 0;
out:
        free(r);
        free(by_start);
        free(by_other);
        free(arr_a);
        free(arr_b);
        free(led);
        free(match);
        free(arrival_of);
        free(pairs);
        free(ends);
        return rc;
}

void verify_result_free(struct verify_result *result)
{
        free(result);
}

const struct verify_summary *verify_summary(const struct verify_result *result)
{
        return &result->sum;
}

size_t verify_finding_count(const struct verify_result *result)
{
        return result->nfindings;
}

const struct verify_finding *verify_finding_at(const struct verify_result *result, size_t i)
{
        return i < result->nfindings ? &result->findings[i] : NULL;
}

int verify_kinds_parse(const char *list, unsigned *ret_mask)
{
        unsigned mask = 0;
        const char *p = list;
        if (!list || !ret_mask)
                return TG_EINVAL;
        while (*p) {
                const char *end = strchr(p, ',');
                size_t n = end ? (size_t)(end - p) : strlen(p);
                char name[16];
                enum tg_call_kind k;
                if (n == 0 || n >= sizeof(name))
                        return TG_EINVAL;
                memcpy(name, p, n);
                name[n] = '\0';
                if (tg_call_kind_parse(name, &k) < 0 || (unsigned)k >= VERIFY_KINDS)
                        return TG_EINVAL;
                mask |= 1u << k;
                p += n;
                if (*p == ',')
                        p++;
        }
        *ret_mask = mask;
        return 0;
}
