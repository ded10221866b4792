/*
 * verify_timing — verify's checks of when (verify_int.h): start spacing at
 * the transport boundary (every pair closer than 1/rate), bursts (no window
 * of k/rate holding more than k starts, for a few k, and the busiest
 * minute), in-flight (as logged, and recomputed from the calls' own start
 * and end times per owner epoch), and the provider's receive spacing set
 * beside the local one (a note: receive spacing is not start spacing).
 *
 * Invariants: only calls whose start is on record take part in the start
 * checks (the first nstarts of by_start); a call never closed counts as in
 * flight to the end of its epoch; times are compared on one clock each
 * (tollgate's monotonic clock, or the provider host's), never across.
 */
#include "tools/verify_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MINUTE_NS (60 * TG_NS_PER_S)

static const unsigned burst_k[VERIFY_BURSTS] = {2, 5, 10, 50};

void verify_check_spacing(struct run *run)
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
                if (!verify_finding_open(run->r, &f, &ev, "spacing", true))
                        continue;
                evidence_item(&ev,
                              "  calls %lld (%s %s) and %lld (%s %s) started %.3f ms apart "
                              "(epochs %lld, %lld)\n",
                              (long long)v[i - 1]->id, verify_kind_name(v[i - 1]->kind),
                              v[i - 1]->operation_id, (long long)v[i]->id,
                              verify_kind_name(v[i]->kind), v[i]->operation_id, verify_ms(gap),
                              (long long)v[i - 1]->epoch, (long long)v[i]->epoch);
        }
        if (f) {
                evidence_done(&ev);
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
                    verify_ms(s->min_start_gap_ns), (long long)s->min_gap_call_a,
                    (long long)s->min_gap_call_b);
                SET(fix, "check spacing and in-flight at the moment of handoff and count the next "
                         "slot from the actual start; one dispatcher per account");
        }
}

void verify_check_bursts(struct run *run, const struct verify_arrival **arr_mono)
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
                if (!verify_finding_open(run->r, &f, &ev, "burst", true))
                        continue;
                evidence_item(&ev, "  %u starts within %.1f ms (k=%u allows %u), from call %lld\n",
                              vb->max_starts, verify_ms(vb->window_ns), vb->k, vb->k,
                              (long long)vb->at_call);
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
                evidence_done(&ev);
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
void verify_check_in_flight(struct run *run, const struct verify_call **by_epoch, tg_mono_ns *ends)
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
                        if (!verify_finding_open(run->r, &f, &ev, "in_flight", true))
                                continue;
                        evidence_item(
                            &ev,
                            "  call %lld (%s %s) started with %u in flight logged, %u open "
                            "by the calls' own times (epoch %lld)\n",
                            (long long)c->id, verify_kind_name(c->kind), c->operation_id,
                            c->in_flight, open, (long long)c->epoch);
                }
                seg = seg_end;
        }
        if (f) {
                evidence_done(&ev);
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
void verify_check_provider_spacing(struct run *run, const struct verify_arrival **arr_mono)
{
        struct verify_summary *s = &run->r->sum;
        const struct verify_call *prev = NULL;
        const struct verify_arrival *prev_a = NULL;
        bool any_delay = false;

        /* The exit's own calls as the provider received them: each call's
         * first arrival (an arrival with no logged start, or a second one of a
         * start, is a violation of its own), its token calls included: they
         * take a slot of the pacer like any call, and the provider counts
         * them at its door. Judged as a gateway's limiter measures: in whole
         * milliseconds. */
        const struct verify_arrival *last = NULL;
        s->min_arrival_gap_ns = TG_MONO_NEVER;
        for (size_t i = 0; i < run->narr; i++) {
                const struct verify_arrival *a = arr_mono[i];
                size_t ai = (size_t)(a - run->arr);
                size_t ci = run->match[ai];
                if (ci != TOKEN_FIRST && (!MATCHED_CALL(ci) || run->arrival_of[ci] != ai))
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
        struct verify_finding *f = verify_finding_new(run->r, "receive_spacing", true);
        if (!f)
                return;
        SET(problem,
            "the provider received %zu pair(s) closer than 1/rate, measured in whole "
            "milliseconds as a gateway's limiter does%s",
            s->arrival_gaps_below,
            s->token_calls ? ", although every logged start was spaced on the wire (the exit's "
                             "token calls have no logged start: they are judged here only)"
                           : ", although every start was spaced on the wire");
        SET(evidence,
            "  local minimum start gap %.3f ms; provider minimum receive gap %.3f ms; largest "
            "difference between a start gap and its receive gap %.3f ms; %zu pair(s) received "
            "in the other order; start-to-arrival delay %.3f..%.3f ms\n",
            verify_ms(s->min_start_gap_ns == TG_MONO_NEVER ? 0 : s->min_start_gap_ns),
            verify_ms(s->min_arrival_gap_ns), verify_ms(s->max_gap_diff_ns), s->reordered,
            verify_ms(s->delay_min_ns), verify_ms(s->delay_max_ns));
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
