/*
 * verify_out — the verify result as text figures and as JSON. The figures
 * name their source (call log = the exit's own clock; provider = what the
 * provider received) so one is never read as the other.
 */
#include "tools/verify_out.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/policy.h"

struct out {
        char *buf;
        size_t size, len;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
        if (o->len + 1 >= o->size)
                return;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
        va_end(ap);
        if (n > 0)
                o->len += (size_t)n < o->size - o->len ? (size_t)n : o->size - o->len - 1;
}

static double ms(tg_mono_ns ns)
{
        return (double)ns / 1e6;
}

void verify_summary_text(const struct verify_limits *lim, const struct verify_summary *s, char *buf,
                         size_t size)
{
        struct out o = {.buf = buf, .size = size, .len = 0};
        if (size)
                buf[0] = '\0';
        put(&o, "  records:    %zu calls (", s->calls);
        for (unsigned k = 0; k < VERIFY_KINDS; k++)
                put(&o, "%s%s %zu", k ? ", " : "", tg_call_kind_name((enum tg_call_kind)k),
                    s->kind_calls[k]);
        put(&o, "), %zu provider arrivals, %s\n", s->arrivals,
            s->ledger_given ? "ledger given" : "no ledger");
        put(&o,
            "  matching:   %zu arrivals matched one logged start; %zu the exit's token calls; "
            "%zu unmatched; %zu repeated; %zu sent calls unseen by the provider\n",
            s->matched, s->token_calls, s->unmatched, s->duplicate_arrivals, s->unseen_calls);
        put(&o, "  by kind:    matched at the provider:");
        for (unsigned k = 0; k < VERIFY_KINDS; k++)
                put(&o, " %s %zu", tg_call_kind_name((enum tg_call_kind)k), s->kind_arrivals[k]);
        put(&o, "\n");
        if (s->min_start_gap_ns == TG_MONO_NEVER)
                put(&o, "  spacing:    fewer than two starts\n");
        else
                put(&o,
                    "  spacing:    minimum start gap %.3f ms (calls %lld, %lld), 1/rate = %.3f ms "
                    "at %.3g/s; %zu violation(s)\n",
                    ms(s->min_start_gap_ns), (long long)s->min_gap_call_a,
                    (long long)s->min_gap_call_b, 1e3 / lim->rate, lim->rate,
                    s->spacing_violations);
        if (s->min_arrival_gap_ns != TG_MONO_NEVER)
                put(&o,
                    "  provider:   minimum receive gap %.3f ms (%zu below 1/rate); largest "
                    "|receive gap - start gap| %.3f ms; %zu reordered; start->arrival "
                    "%.3f..%.3f ms\n",
                    ms(s->min_arrival_gap_ns), s->arrival_gaps_below, ms(s->max_gap_diff_ns),
                    s->reordered, ms(s->delay_min_ns), ms(s->delay_max_ns));
        put(&o, "  in flight:  max %u logged, %u recomputed from start/end (cap %u)\n",
            s->max_in_flight_logged, s->max_in_flight_computed, lim->max_in_flight);
        put(&o, "  bursts:    ");
        for (int b = 0; b < VERIFY_BURSTS; b++)
                put(&o, " %u/%.0fms:%u(prov %u)", s->bursts[b].k, ms(s->bursts[b].window_ns),
                    s->bursts[b].max_starts, s->bursts[b].max_arrivals);
        put(&o, "; busiest minute %.2f/s\n", s->busiest_minute_per_s);
        put(&o,
            "  operations: %zu; keys per operation max %u; automatic POSTs max %u (call log), "
            "%u per key (provider), cap %u; executions max %u (cap %u)\n",
            s->operations, s->max_keys_per_op, s->max_auto_posts_per_op, s->max_posts_per_key,
            lim->max_attempts, s->max_executions, lim->max_executions);
}

static json_t *ns_or_null(tg_mono_ns v)
{
        return v == TG_MONO_NEVER ? json_null() : json_integer(v);
}

json_t *verify_result_json(const struct verify_limits *lim, const struct verify_result *res)
{
        const struct verify_summary *s = verify_summary(res);
        json_t *o = json_object();
        json_t *sum = json_object();
        json_t *kinds = json_object();
        json_t *bursts = json_array();
        json_t *findings = json_array();
        json_t *limits = json_object();
        if (!o || !sum || !kinds || !bursts || !findings || !limits) {
                json_decref(o);
                json_decref(sum);
                json_decref(kinds);
                json_decref(bursts);
                json_decref(findings);
                json_decref(limits);
                return NULL;
        }
        json_object_set_new(o, "pass", json_boolean(s->violations == 0));
        json_object_set_new(o, "violations", json_integer((json_int_t)s->violations));
        json_object_set_new(o, "notes", json_integer((json_int_t)s->notes));
        json_object_set_new(limits, "rate", json_real(lim->rate));
        json_object_set_new(limits, "max_in_flight", json_integer(lim->max_in_flight));
        json_object_set_new(limits, "max_attempts", json_integer(lim->max_attempts));
        json_object_set_new(limits, "max_executions", json_integer(lim->max_executions));
        json_object_set_new(o, "limits", limits);
        json_object_set_new(sum, "calls", json_integer((json_int_t)s->calls));
        json_object_set_new(sum, "arrivals", json_integer((json_int_t)s->arrivals));
        json_object_set_new(sum, "ledger_keys", json_integer((json_int_t)s->ledger_keys));
        json_object_set_new(sum, "matched", json_integer((json_int_t)s->matched));
        json_object_set_new(sum, "token_calls", json_integer((json_int_t)s->token_calls));
        json_object_set_new(sum, "unmatched", json_integer((json_int_t)s->unmatched));
        json_object_set_new(sum, "duplicate_arrivals",
                            json_integer((json_int_t)s->duplicate_arrivals));
        json_object_set_new(sum, "unseen_calls", json_integer((json_int_t)s->unseen_calls));
        json_object_set_new(sum, "open_calls", json_integer((json_int_t)s->open_calls));
        json_object_set_new(sum, "unrecorded_starts",
                            json_integer((json_int_t)s->unrecorded_starts));
        for (unsigned k = 0; k < VERIFY_KINDS; k++) {
                json_t *kk = json_pack("{s:I, s:I}", "calls", (json_int_t)s->kind_calls[k],
                                       "arrivals", (json_int_t)s->kind_arrivals[k]);
                json_object_set_new(kinds, tg_call_kind_name((enum tg_call_kind)k), kk);
        }
        json_object_set_new(sum, "kinds", kinds);
        json_object_set_new(sum, "interval_ns", json_integer(s->interval_ns));
        json_object_set_new(sum, "min_start_gap_ns", ns_or_null(s->min_start_gap_ns));
        json_object_set_new(
            sum, "min_gap_calls",
            json_pack("[I, I]", (json_int_t)s->min_gap_call_a, (json_int_t)s->min_gap_call_b));
        json_object_set_new(sum, "spacing_violations",
                            json_integer((json_int_t)s->spacing_violations));
        json_object_set_new(sum, "min_arrival_gap_ns", ns_or_null(s->min_arrival_gap_ns));
        json_object_set_new(sum, "arrival_gaps_below_interval",
                            json_integer((json_int_t)s->arrival_gaps_below));
        json_object_set_new(sum, "max_gap_diff_ns", json_integer(s->max_gap_diff_ns));
        json_object_set_new(sum, "reordered", json_integer((json_int_t)s->reordered));
        json_object_set_new(sum, "delay_min_ns", json_integer(s->delay_min_ns));
        json_object_set_new(sum, "delay_max_ns", json_integer(s->delay_max_ns));
        json_object_set_new(sum, "max_in_flight_logged", json_integer(s->max_in_flight_logged));
        json_object_set_new(sum, "max_in_flight_computed", json_integer(s->max_in_flight_computed));
        json_object_set_new(sum, "operations", json_integer((json_int_t)s->operations));
        json_object_set_new(sum, "max_keys_per_op", json_integer(s->max_keys_per_op));
        json_object_set_new(sum, "max_auto_posts_per_op", json_integer(s->max_auto_posts_per_op));
        json_object_set_new(sum, "max_posts_per_key", json_integer(s->max_posts_per_key));
        json_object_set_new(sum, "max_executions", json_integer(s->max_executions));
        for (int b = 0; b < VERIFY_BURSTS; b++)
                json_array_append_new(bursts,
                                      json_pack("{s:i, s:I, s:i, s:i}", "k", (int)s->bursts[b].k,
                                                "window_ns", (json_int_t)s->bursts[b].window_ns,
                                                "max_starts", (int)s->bursts[b].max_starts,
                                                "max_arrivals", (int)s->bursts[b].max_arrivals));
        json_object_set_new(sum, "bursts", bursts);
        json_object_set_new(sum, "busiest_minute_per_s", json_real(s->busiest_minute_per_s));
        json_object_set_new(o, "summary", sum);
        for (size_t i = 0; i < verify_finding_count(res); i++) {
                const struct verify_finding *f = verify_finding_at(res, i);
                json_array_append_new(
                    findings,
                    json_pack("{s:s, s:b, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "check", f->check,
                              "violation", f->violation, "problem", f->problem, "evidence",
                              f->evidence, "trigger", f->trigger, "impact", f->impact, "verify",
                              f->verify, "result", f->result, "fix", f->fix));
        }
        json_object_set_new(o, "findings", findings);
        return o;
}
