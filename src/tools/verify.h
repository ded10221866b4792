/*
 * verify — judges one run of the exit from its two records: tollgate's call
 * log (one record per call handed to the transport) and the provider's
 * arrival log (one record per request the provider received), plus,
 * optionally, the provider's execution ledger. Pure logic: the caller parses
 * the files; nothing here reads a clock or does I/O.
 *
 * What is checked (each failed check becomes one finding, written the way an
 * on-call engineer files one: problem, evidence, trigger, impact, how to
 * verify, result, fix):
 *   - every provider arrival matches exactly one logged start by request id
 *     (an unmatched one is a hidden retry or a bypass of the exit), or is
 *     one of the exit's OAuth 2.0 token calls: at the token path, with the
 *     exit's token request id (VERIFY_TOKEN_RID_PREFIX), sent once; those
 *     have no call log row and count in the provider's receive spacing;
 *   - start spacing at the transport boundary is at least 1/rate (every
 *     violating pair listed), and no window of k/rate holds more than k
 *     starts (the bursts a per-minute average hides);
 *   - in-flight never above the cap, as logged and as recomputed from the
 *     calls' own start/end times (per owner epoch);
 *   - per operation: one idempotency key, automatic POSTs <= max attempts
 *     (in the call log and at the provider), executions <= max executions;
 *   - which call kinds (first, retry, query, manual) appear.
 * Notes (not violations) explain what must not be mistaken for a result:
 * provider receive spacing is not local start spacing; a sent call the
 * provider never saw; calls never closed.
 *
 * Memory is bounded: verify_run() refuses more than limits->max_records
 * calls or arrivals with TG_EFULL, and evidence texts are truncated to a
 * fixed size with a count of what was left out.
 */
#ifndef TG_VERIFY_H
#define TG_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/policy.h"
#include "core/tg_time.h"

#define VERIFY_ID_MAX      129 /* an operation id or key: 128 chars + NUL */
#define VERIFY_RID_MAX     65  /* a request id: 64 chars + NUL */
#define VERIFY_TEXT_MAX    2048
#define VERIFY_LINE_MAX    512
#define VERIFY_BURSTS      4
#define VERIFY_KINDS       4 /* enum tg_call_kind */
#define VERIFY_MAX_RECORDS 2000000

/* The request id of the exit's token calls (daemon/exit_token.c):
 * tg-token-EPOCH-N. */
#define VERIFY_TOKEN_RID_PREFIX "tg-token-"

/* An arrival's answer besides an HTTP status. */
#define VERIFY_ANSWER_NONE    0
#define VERIFY_ANSWER_DROPPED (-1)

/* One call of tollgate's call log. Caller storage; read only by verify. */
struct verify_call {
        int64_t id;
        char operation_id[VERIFY_ID_MAX];
        enum tg_call_kind kind;
        unsigned attempt;
        char request_id[VERIFY_RID_MAX];
        int64_t epoch;
        tg_mono_ns start_mono; /* on the wire (older logs: handed to the transport) */
        tg_mono_ns end_mono;   /* TG_MONO_NEVER: never closed */
        tg_wall_ms start_wall;
        tg_wall_ms end_wall; /* TG_WALL_NEVER: never closed */
        unsigned in_flight;  /* as logged, this call included; 0: not logged */
        int sent;            /* 1 bytes left, 0 nothing sent, -1 unknown */
        /* claimed, but no hand-off on record (handoff_mono_ns null): a claim
         * given back, or its owner lost before the call ended; start_mono
         * is the claim's. Older logs have no such field: false. */
        bool start_unrecorded;
        /* a claim given back before it reached the transport ("released"):
         * a row, not a call; its attempt is not counted (store.h) */
        bool released;
        char cls[24];    /* tollgate's class name, "" when open */
        int http_status; /* 0: none */
};

/* One request the provider received on a contract path. */
struct verify_arrival {
        uint64_t seq;
        tg_mono_ns mono; /* provider host's monotonic clock */
        tg_wall_ms wall;
        int64_t t_ns;                    /* since the provider (stub) started; -1 unknown */
        bool post;                       /* POST (a refund); else a query (GET) */
        char key[VERIFY_ID_MAX];         /* Idempotency-Key, "" none */
        char request_id[VERIFY_RID_MAX]; /* X-Request-Id, "" none */
        int answer;                      /* HTTP status or VERIFY_ANSWER_* */
        bool executed;                   /* this request executed a refund */
        /* received at the exit's OAuth 2.0 token path (provider.token_path
         * on base_url's path; the reader sets it): a token call is no
         * operation's and has no row in the call log */
        bool token;
        long phase;    /* stub timeline phase, -1 unknown */
        char mode[32]; /* stub mode applied, "" unknown */
};

/* One key of the provider's execution ledger. */
struct verify_execution {
        char key[VERIFY_ID_MAX];
        unsigned executions;
};

struct verify_limits {
        double rate;            /* starts per second, > 0 */
        unsigned max_in_flight; /* >= 1 */
        unsigned max_attempts;  /* automatic POSTs per operation, >= 1 */
        /* POSTs answered 429/503 count against max_attempts too (the
         * exit's retry.count_limited); false: they are left out */
        bool count_limited;
        unsigned max_executions; /* per key at the provider (1) */
        unsigned expect_kinds;   /* bit (1 << kind) per kind that must appear */
        size_t max_records;      /* of calls, and of arrivals (VERIFY_MAX_RECORDS) */
};

/* Sets the exit's limits to the config's defaults (config_defaults():
 * exit.starts_per_second, exit.max_in_flight, retry.max_attempts,
 * retry.count_limited), one execution per key, VERIFY_MAX_RECORDS. */
void verify_limits_default(struct verify_limits *ret_limits);

struct verify_finding {
        const char *check; /* stable name, e.g. "spacing" (static) */
        bool violation;    /* false: a note */
        char problem[VERIFY_LINE_MAX];
        char evidence[VERIFY_TEXT_MAX];
        char trigger[VERIFY_LINE_MAX];
        char impact[VERIFY_LINE_MAX];
        char verify[VERIFY_LINE_MAX];
        char result[VERIFY_LINE_MAX];
        char fix[VERIFY_LINE_MAX];
};

struct verify_burst {
        unsigned k; /* window = k / rate */
        tg_mono_ns window_ns;
        unsigned max_starts;   /* most local starts in any such window */
        int64_t at_call;       /* call id opening that window */
        unsigned max_arrivals; /* most provider arrivals in any such window */
};

/* The figures behind the findings. Read-only; owned by the result. */
struct verify_summary {
        size_t calls, arrivals, ledger_keys;
        size_t matched;            /* arrivals matched to exactly one call */
        size_t token_calls;        /* arrivals that are the exit's token calls */
        size_t unmatched;          /* arrivals with no logged start */
        size_t duplicate_arrivals; /* extra arrivals of one request id */
        size_t unseen_calls;       /* sent (or maybe sent) calls never seen */
        size_t open_calls;         /* never closed in the call log */
        size_t unrecorded_starts;  /* claimed, start never recorded (not in start checks) */
        size_t kind_calls[VERIFY_KINDS];
        size_t kind_arrivals[VERIFY_KINDS]; /* matched arrivals by the call's kind */
        tg_mono_ns interval_ns;             /* 1e9 / rate, rounded up */
        tg_mono_ns min_start_gap_ns;        /* TG_MONO_NEVER with < 2 calls */
        int64_t min_gap_call_a, min_gap_call_b;
        size_t spacing_violations;
        tg_mono_ns min_arrival_gap_ns;         /* provider receive spacing */
        size_t arrival_gaps_below;             /* receive gaps < interval */
        tg_mono_ns max_gap_diff_ns;            /* max |receive gap - start gap|, matched pairs */
        size_t reordered;                      /* consecutive starts received in the other order */
        tg_mono_ns delay_min_ns, delay_max_ns; /* arrival - start (one host's clock) */
        unsigned max_in_flight_logged, max_in_flight_computed;
        size_t in_flight_violations;
        size_t operations;
        unsigned max_keys_per_op, max_auto_posts_per_op, max_posts_per_key, max_executions;
        size_t ops_over_attempts, ops_multi_key, keys_over_executions;
        struct verify_burst bursts[VERIFY_BURSTS];
        double busiest_minute_per_s; /* starts in the busiest 60 s, divided by 60 */
        size_t violations, notes;
        bool ledger_given;
};

struct verify_result;

/* Judges the run. calls, arrivals and ledger are read during the call only
 * (ledger may be NULL with nledger 0). Returns 0 and a result the caller
 * frees with verify_result_free(), TG_EINVAL for bad limits, TG_EFULL when
 * ncalls or narrivals exceeds limits->max_records, TG_ENOMEM. A run with
 * violations still returns 0: see summary->violations. */
int verify_run(const struct verify_limits *limits, const struct verify_call *calls, size_t ncalls,
               const struct verify_arrival *arrivals, size_t narrivals,
               const struct verify_execution *ledger, size_t nledger,
               struct verify_result **ret_result);
/* Accepts NULL. */
void verify_result_free(struct verify_result *result);

const struct verify_summary *verify_summary(const struct verify_result *result);
size_t verify_finding_count(const struct verify_result *result);
/* The i-th finding, violations first; NULL past the end. */
const struct verify_finding *verify_finding_at(const struct verify_result *result, size_t i);

/* Parses a kind list "first,retry,query,manual" into a verify_limits
 * expect_kinds mask. Returns 0 or TG_EINVAL. */
int verify_kinds_parse(const char *list, unsigned *ret_mask);

#endif
