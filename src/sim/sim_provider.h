/*
 * sim_provider — the refund provider of tollgate-sim: shared/PROVIDER.md's
 * contract played in virtual time, in phases drawn from the run's seed, with
 * its own ledger of executions by idempotency key — the ground truth the
 * simulator judges tollgate by.
 *
 * A phase lasts a while and says how the provider treats what arrives:
 * latencies (a fast answer, an answer after the caller's timeout), and for a
 * POST whose key is new, one of: executes and answers 201; executes and
 * answers after the timeout; executes and the answer is lost (the
 * connection stays silent); 429 or 503, with or without Retry-After
 * (seconds or an HTTP-date), nothing executed; executes then answers 500;
 * the connection reset before the request was read (nothing executed) or
 * after (executed). A phase may also refuse connections (nothing leaves), or
 * take as long to connect as the call's timeout (a provider far away).
 * Queries are answered from the ledger (succeeded, failed, processing,
 * not_found), or slow, unavailable or reset as the phase says.
 *
 * The ledger keeps what a real provider would: a key's first payload (the
 * same key with another payload is 422 idempotency_key_reused), whether it
 * is being processed (a second POST meanwhile is 409 idempotency_key_in_use)
 * or was executed (a POST is then a replay: 200 with the first result), and
 * forgets a key `key_ttl` after its first arrival (24 h at the real one; a
 * POST after that executes again). It also counts what no real provider
 * shows: executions per key, POSTs and queries per key, and keys it never
 * expected.
 *
 * Refunds whose amount is a multiple of SIM_INVALID_AMOUNT are refused for
 * good (422 invalid_request): never executed, failed to a query.
 */
#ifndef TG_SIM_PROVIDER_H
#define TG_SIM_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>

#include "core/rng.h"
#include "sim/sim_env.h"

#define SIM_INVALID_AMOUNT 97
#define SIM_KEYS_MAX       4096 /* keys in the ledger */
#define SIM_PHASES_MAX     64

/* What a POST with a new key meets. */
enum sim_post {
        SIM_POST_OK,           /* executes, 201 */
        SIM_POST_SLOW,         /* executes, answers after the caller's timeout */
        SIM_POST_DROP,         /* executes, no answer ever (the caller times out) */
        SIM_POST_LIMITED,      /* 429, nothing executed */
        SIM_POST_UNAVAILABLE,  /* 503, nothing executed */
        SIM_POST_ERROR,        /* executes, 500 */
        SIM_POST_RESET_BEFORE, /* reset before the request was read: nothing executed */
        SIM_POST_RESET_AFTER,  /* read and executed, then reset */
        SIM_POST_COUNT
};

/* What a query meets. */
enum sim_query {
        SIM_QUERY_OK, /* the ledger's answer */
        SIM_QUERY_SLOW,
        SIM_QUERY_UNAVAILABLE,
        SIM_QUERY_RESET,
        SIM_QUERY_COUNT
};

struct sim_phase {
        tg_mono_ns from;                      /* starts at this monotonic time */
        const char *name;                     /* "calm", "slow", ... */
        unsigned post_weight[SIM_POST_COUNT]; /* relative */
        unsigned query_weight[SIM_QUERY_COUNT];
        unsigned refuse_pct;               /* connections refused, in percent */
        unsigned retry_after_pct;          /* 429/503 that carry Retry-After */
        tg_mono_ns latency_lo, latency_hi; /* a normal answer */
        tg_mono_ns exec_lo, exec_hi;       /* arrival to execution */
        tg_mono_ns connect_lo, connect_hi;
};

struct sim_provider_config {
        tg_mono_ns timeout; /* the caller's call timeout: "slow" is past it */
        tg_mono_ns key_ttl; /* a key is forgotten this long after its first arrival */
        tg_wall_ms wall0;   /* the provider's own wall clock (HTTP-dates): wall0 + mono */
        unsigned nphases;
        struct sim_phase phases[SIM_PHASES_MAX];
};

/* One key of the ledger. */
struct sim_key {
        char key[TG_OP_ID_MAX + 1];
        bool expected;                 /* the simulation submitted it */
        struct refund_request payload; /* the first POST's */
        bool has_payload;
        tg_mono_ns first_arrival; /* for the key's time to live */
        tg_mono_ns exec_at;       /* executed at (TG_MONO_NEVER: not) */
        bool rejected;            /* refused for good */
        unsigned executions;      /* refunds executed under this key, ever */
        unsigned posts, queries;  /* arrivals */
        unsigned forgotten;       /* times its time to live ran out */
};

struct sim_provider;

/* A provider for `config` (copied), drawing from `seed`. 0 or TG_ENOMEM. */
int sim_provider_new(const struct sim_provider_config *config, uint64_t seed,
                     struct sim_provider **ret_provider);
void sim_provider_free(struct sim_provider *provider);

/* The provider's two moments (sim_env.h's struct sim_provider): the connect
 * at the hand-off, and the answer when the request arrives at `wire`.
 * Observers (the checks) are the caller's: sim_world wraps these. */
void sim_provider_handoff(struct sim_provider *p, tg_mono_ns now, const struct transport_call *call,
                          struct sim_answer *ret);
void sim_provider_arrive(struct sim_provider *p, const struct transport_call *call, tg_mono_ns wire,
                         struct sim_answer *ret);

/* The simulation submits a refund: the ledger knows the key is expected. */
void sim_provider_expect(struct sim_provider *p, const char *key);

/* The key's ledger entry, NULL if it never arrived nor was expected. */
const struct sim_key *sim_provider_key(const struct sim_provider *p, const char *key);
/* Every entry, in the order first seen. */
const struct sim_key *sim_provider_keys(const struct sim_provider *p, unsigned *ret_n);
/* The phase in force at `at`. */
const struct sim_phase *sim_provider_phase(const struct sim_provider *p, tg_mono_ns at);
/* From `at` on the provider is calm (the run's end: let everything close). */
void sim_provider_calm(struct sim_provider *p, tg_mono_ns at);

/* Fills config->phases with a schedule of phases drawn from rng, from 0 to
 * `until` (the calm one first and last). */
void sim_provider_draw_phases(struct sim_provider_config *config, struct tg_rng *rng,
                              tg_mono_ns until);

#endif
