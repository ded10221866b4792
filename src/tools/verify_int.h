/*
 * verify_int — private to verify's files (tools/verify.h says what is
 * judged): the result, the run every check reads, and the helpers that
 * write a finding. Nothing else includes it.
 *   verify.c         the run: the records sorted for each check, the checks
 *                    in order, the findings ordered, the result; the
 *                    findings' helpers; the limits and their defaults;
 *   verify_calls.c   the checks of who was sent how often: every arrival
 *                    matched to one start, automatic POSTs and keys per
 *                    operation, executions per key, the kinds expected,
 *                    and the notes on calls unseen, open or unrecorded;
 *   verify_timing.c  the checks of when: start spacing, bursts, in-flight,
 *                    and the provider's receive spacing.
 *
 * Invariants: a check reads the caller's records through the run's sorted
 * pointer arrays only and writes nothing but the result's summary and its
 * findings; at most MAX_FINDINGS findings, each evidence text bounded, with
 * a count of the items left out.
 */
#ifndef TG_VERIFY_INT_H
#define TG_VERIFY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/verify.h"

#define MAX_FINDINGS 24
#define SHOWN_ITEMS  8
#define MINUTE_NS    (60 * TG_NS_PER_S)
#define NO_MATCH     SIZE_MAX
/* run->match of an arrival that is one of the exit's token calls: its
 * first arrival, or the same request id again */
#define TOKEN_FIRST (SIZE_MAX - 1)
#define TOKEN_AGAIN (SIZE_MAX - 2)
/* run->match names a call of the call log */
#define MATCHED_CALL(ci) ((ci) < TOKEN_AGAIN)

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

/* A finding's evidence text, written into f->evidence. */
void evidence_init(struct evidence *ev, struct verify_finding *f);
/* One listed item (counted, shown only while fewer than SHOWN_ITEMS). */
void evidence_item(struct evidence *ev, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Text always shown (headers, figures). */
void evidence_text(struct evidence *ev, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The count of the items not shown, if any. */
void evidence_done(struct evidence *ev);

/* A new finding of r (counted as a violation or a note), zeroed but for
 * check (static) and violation; NULL once MAX_FINDINGS are taken. */
struct verify_finding *verify_finding_new(struct verify_result *r, const char *check,
                                          bool violation);

/* The finding *f of check, made with its evidence ev the first time an
 * item needs it (*f NULL until then): true while *f exists, false when no
 * finding is left (MAX_FINDINGS taken, *f stays NULL). */
bool verify_finding_open(struct verify_result *r, struct verify_finding **f, struct evidence *ev,
                         const char *check, bool violation);

/* Sets a text field of the finding f in scope. */
#define SET(field, ...) snprintf(f->field, sizeof(f->field), __VA_ARGS__)

/* Nanoseconds as milliseconds, for the evidence. */
double verify_ms(tg_mono_ns ns);
/* A call kind's name, "?" for one verify does not know. */
const char *verify_kind_name(enum tg_call_kind k);

/* A (operation, key) pair seen at the provider for a matched POST. */
struct op_key {
        const char *op;
        const char *key;
};

/* One run of the checks: the limits, the records and their sorted views. */
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
        size_t *match;      /* arrival index -> call index, NO_MATCH or TOKEN_* */
        size_t *arrival_of; /* call index -> first arrival index or NO_MATCH */
};

/* verify_calls.c; by_rid, arr_rid sorted by request id, by_op by
 * operation, arr_key by key, led by key; pairs holds narr entries. */
void verify_check_matching(struct run *run, const struct verify_call **by_rid,
                           const struct verify_arrival **arr_rid);
void verify_check_operations(struct run *run, const struct verify_call **by_op,
                             const struct verify_arrival **arr_key, struct op_key *pairs);
void verify_check_executions(struct run *run, const struct verify_arrival **arr_key,
                             const struct verify_execution **led);
void verify_check_kinds(struct run *run);
void verify_note_open_calls(struct run *run);
void verify_note_unrecorded_starts(struct run *run);

/* verify_timing.c; arr_mono sorted by arrival time, by_epoch by epoch and
 * start, ends holds ncalls entries. */
void verify_check_spacing(struct run *run);
void verify_check_bursts(struct run *run, const struct verify_arrival **arr_mono);
void verify_check_in_flight(struct run *run, const struct verify_call **by_epoch, tg_mono_ns *ends);
void verify_check_provider_spacing(struct run *run, const struct verify_arrival **arr_mono);

#endif
