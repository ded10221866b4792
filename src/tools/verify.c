/*
 * verify — the run of verify.h's checks over arrays the caller parsed, and
 * its result (verify_int.h says which file holds which checks).
 *
 * Every check works on sorted arrays of pointers into the caller's records
 * (by request id to match arrivals to starts, by start time for spacing,
 * in-flight and bursts, by operation and key for the per-operation budgets),
 * so a run costs O(n log n) time and O(n) memory, bounded by max_records.
 * Nothing is guessed: a record that cannot be judged (no request id, never
 * closed) is reported as such, and only a rule of the exit that the records
 * show broken counts as a violation. The default limits are the config's
 * defaults (config_defaults()), never written here.
 */
#include "tools/verify_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/config.h"

/* ---- findings ------------------------------------------------------------- */

void evidence_init(struct evidence *ev, struct verify_finding *f)
{
        ev->buf = f->evidence;
        ev->cap = sizeof(f->evidence);
        ev->len = 0;
        ev->items = 0;
        ev->buf[0] = '\0';
}

static void evidence_vadd(struct evidence *ev, bool item, const char *fmt, va_list ap)
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
void evidence_item(struct evidence *ev, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        evidence_vadd(ev, true, fmt, ap);
        va_end(ap);
}

/* Text always shown (headers, figures). */
void evidence_text(struct evidence *ev, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        evidence_vadd(ev, false, fmt, ap);
        va_end(ap);
}

void evidence_done(struct evidence *ev)
{
        if (ev->items > SHOWN_ITEMS)
                evidence_text(ev, "  ... and %zu more\n", ev->items - SHOWN_ITEMS);
}

struct verify_finding *verify_finding_new(struct verify_result *r, const char *check,
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

bool verify_finding_open(struct verify_result *r, struct verify_finding **f, struct evidence *ev,
                         const char *check, bool violation)
{
        if (!*f) {
                *f = verify_finding_new(r, check, violation);
                if (*f)
                        evidence_init(ev, *f);
        }
        return *f != NULL;
}

double verify_ms(tg_mono_ns ns)
{
        return (double)ns / 1e6;
}

const char *verify_kind_name(enum tg_call_kind k)
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

/* ---- the run ---------------------------------------------------------------- */

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

/* The exit's limits are the config's defaults (the key table's, through
 * config_defaults()): never written down here a second time. */
void verify_limits_default(struct verify_limits *ret_limits)
{
        struct tg_config cfg;

        config_defaults(&cfg);
        memset(ret_limits, 0, sizeof(*ret_limits));
        ret_limits->rate = cfg.exit.starts_per_second;
        ret_limits->max_in_flight = cfg.exit.max_in_flight;
        ret_limits->max_attempts = cfg.policy.max_attempts;
        ret_limits->count_limited = cfg.policy.count_limited;
        ret_limits->max_executions = 1; /* the provider's rule, not a key */
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
        verify_check_matching(&run, by_other, arr_a);
        verify_check_spacing(&run);
        qsort(arr_a, narrivals, sizeof(*arr_a), cmp_arr_mono);
        verify_check_bursts(&run, arr_a);
        verify_check_provider_spacing(&run, arr_a);
        /* in flight: the calls whose start is on record, by epoch */
        memcpy(by_other, by_start, ncalls * sizeof(*by_other));
        qsort(by_other, nstarts, sizeof(*by_other), cmp_call_epoch_start);
        verify_check_in_flight(&run, by_other, ends);
        qsort(by_other, ncalls, sizeof(*by_other), cmp_call_op);
        qsort(arr_b, narrivals, sizeof(*arr_b), cmp_arr_key);
        verify_check_operations(&run, by_other, arr_b, pairs);
        qsort(led, nledger, sizeof(*led), cmp_exec_key);
        verify_check_executions(&run, arr_b, led);
        verify_check_kinds(&run);
        verify_note_open_calls(&run);
        verify_note_unrecorded_starts(&run);
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
