/*
 * sim_provider — the simulated refund provider and its ledger. See
 * sim_provider.h.
 *
 * Invariants: a key's executions only grow, and only when a POST finds the
 * key new (never executed, or forgotten past its time to live) and the
 * phase lets it execute; a query never executes anything; every draw comes
 * from the provider's own rng, in the order requests arrive, so one seed
 * gives one history.
 */
#include "sim/sim_provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/tg_error.h"

#define MS         TG_NS_PER_MS
#define HASH_SLOTS 8192 /* > 2 * SIM_KEYS_MAX: open addressing stays short */

struct sim_provider {
        struct sim_provider_config cfg;
        struct tg_rng rng;
        struct sim_key keys[SIM_KEYS_MAX];
        unsigned nkeys;
        int slots[HASH_SLOTS]; /* index + 1 into keys; 0: empty */
        /* answers point here until the env has read them */
        char retry_after[64];
        char refund_id[TG_OP_ID_MAX + 8];
};

int sim_provider_new(const struct sim_provider_config *config, uint64_t seed,
                     struct sim_provider **ret_provider)
{
        struct sim_provider *p = calloc(1, sizeof(*p));

        if (!p)
                return TG_ENOMEM;
        p->cfg = *config;
        tg_rng_seed(&p->rng, seed);
        *ret_provider = p;
        return 0;
}

void sim_provider_free(struct sim_provider *p)
{
        free(p);
}

/* ---- the ledger ------------------------------------------------------------- */

static uint32_t hash(const char *s)
{
        uint32_t h = 2166136261u;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h;
}

/* The key's entry; created when `create` (NULL when the ledger is full). */
static struct sim_key *find(struct sim_provider *p, const char *key, bool create)
{
        uint32_t i = hash(key) % HASH_SLOTS;

        for (;; i = (i + 1) % HASH_SLOTS) {
                int k = p->slots[i];
                if (k == 0)
                        break;
                if (strcmp(p->keys[k - 1].key, key) == 0)
                        return &p->keys[k - 1];
        }
        if (!create || p->nkeys >= SIM_KEYS_MAX)
                return NULL;
        struct sim_key *e = &p->keys[p->nkeys++];
        memset(e, 0, sizeof(*e));
        snprintf(e->key, sizeof(e->key), "%s", key);
        e->exec_at = TG_MONO_NEVER;
        e->first_arrival = TG_MONO_NEVER;
        p->slots[i] = (int)p->nkeys;
        return e;
}

void sim_provider_expect(struct sim_provider *p, const char *key)
{
        struct sim_key *e = find(p, key, true);

        if (e)
                e->expected = true;
}

const struct sim_key *sim_provider_key(const struct sim_provider *p, const char *key)
{
        return find((struct sim_provider *)p, key, false);
}

const struct sim_key *sim_provider_keys(const struct sim_provider *p, unsigned *ret_n)
{
        *ret_n = p->nkeys;
        return p->keys;
}

/* ---- phases ----------------------------------------------------------------- */

const struct sim_phase *sim_provider_phase(const struct sim_provider *p, tg_mono_ns at)
{
        const struct sim_phase *ph = &p->cfg.phases[0];

        for (unsigned i = 1; i < p->cfg.nphases && p->cfg.phases[i].from <= at; i++)
                ph = &p->cfg.phases[i];
        return ph;
}

static void phase_calm(struct sim_phase *ph, tg_mono_ns from)
{
        *ph = (struct sim_phase){.from = from,
                                 .name = "calm",
                                 .post_weight = {[SIM_POST_OK] = 1},
                                 .query_weight = {[SIM_QUERY_OK] = 1},
                                 .latency_lo = 5 * MS,
                                 .latency_hi = 80 * MS,
                                 .exec_lo = 1 * MS,
                                 .exec_hi = 5 * MS,
                                 .connect_lo = 100 * TG_NS_PER_US,
                                 .connect_hi = 2 * MS};
}

void sim_provider_calm(struct sim_provider *p, tg_mono_ns at)
{
        unsigned n = 0;

        while (n < p->cfg.nphases && p->cfg.phases[n].from < at)
                n++;
        if (n >= SIM_PHASES_MAX)
                n = SIM_PHASES_MAX - 1;
        phase_calm(&p->cfg.phases[n], at);
        p->cfg.nphases = n + 1;
}

static tg_mono_ns draw_ns(struct tg_rng *rng, tg_mono_ns lo, tg_mono_ns hi)
{
        return lo >= hi ? lo : tg_rng_range(rng, lo, hi);
}

/* One phase of a kind drawn from rng. */
static void phase_draw(struct sim_phase *ph, struct tg_rng *rng, tg_mono_ns from,
                       tg_mono_ns timeout)
{
        static const char *const names[] = {"calm", "slow",    "lossy", "limited", "resets",
                                            "down", "erratic", "mixed", "far"};
        unsigned kind = (unsigned)tg_rng_range(rng, 0, 8);

        phase_calm(ph, from);
        ph->name = names[kind];
        ph->retry_after_pct = (unsigned)tg_rng_range(rng, 0, 100);
        /* connects that vary: the lead and the wire time are what matter */
        ph->connect_hi = draw_ns(rng, 200 * TG_NS_PER_US, 8 * MS);
        ph->latency_hi = draw_ns(rng, 10 * MS, timeout);
        switch (kind) {
        case 0:
                break;
        case 1: /* slower than the timeout */
                ph->post_weight[SIM_POST_SLOW] = 3;
                ph->query_weight[SIM_QUERY_SLOW] = 1;
                ph->exec_hi = draw_ns(rng, 5 * MS, 2 * timeout);
                break;
        case 2: /* executes and the answer is lost */
                ph->post_weight[SIM_POST_DROP] = 2;
                ph->post_weight[SIM_POST_RESET_AFTER] = 1;
                ph->query_weight[SIM_QUERY_RESET] = 1;
                break;
        case 3: /* 429 / 503 */
                ph->post_weight[SIM_POST_LIMITED] = 2;
                ph->post_weight[SIM_POST_UNAVAILABLE] = 2;
                ph->query_weight[SIM_QUERY_UNAVAILABLE] = 2;
                break;
        case 4: /* resets before and after reading, 500 after executing */
                ph->post_weight[SIM_POST_RESET_BEFORE] = 2;
                ph->post_weight[SIM_POST_RESET_AFTER] = 1;
                ph->post_weight[SIM_POST_ERROR] = 1;
                ph->query_weight[SIM_QUERY_RESET] = 1;
                break;
        case 5: /* nothing can be reached */
                ph->refuse_pct = (unsigned)tg_rng_range(rng, 50, 100);
                break;
        case 8: /* far away: connects as long as the timeout (some never done) */
                ph->connect_lo = 1 * MS;
                ph->connect_hi = timeout + timeout / 4;
                break;
        case 6:
        case 7:
        default: /* everything at once, in proportions of its own */
                for (unsigned i = 0; i < SIM_POST_COUNT; i++)
                        ph->post_weight[i] = (unsigned)tg_rng_range(rng, 0, kind == 6 ? 4 : 1);
                for (unsigned i = 0; i < SIM_QUERY_COUNT; i++)
                        ph->query_weight[i] = (unsigned)tg_rng_range(rng, 0, 2);
                ph->post_weight[SIM_POST_OK] += 1;
                ph->query_weight[SIM_QUERY_OK] += 1;
                ph->refuse_pct = (unsigned)tg_rng_range(rng, 0, 20);
                ph->exec_hi = draw_ns(rng, 2 * MS, 2 * timeout);
                break;
        }
}

void sim_provider_draw_phases(struct sim_provider_config *c, struct tg_rng *rng, tg_mono_ns until)
{
        tg_mono_ns at = 0;

        c->nphases = 0;
        phase_calm(&c->phases[c->nphases++], 0);
        at = tg_rng_range(rng, 0, 3 * TG_NS_PER_S);
        while (at < until && c->nphases < SIM_PHASES_MAX - 1) {
                phase_draw(&c->phases[c->nphases++], rng, at, c->timeout);
                at += tg_rng_range(rng, 300 * MS, 8 * TG_NS_PER_S);
        }
}

/* ---- answering ----------------------------------------------------------------- */

static unsigned pick(struct tg_rng *rng, const unsigned *weights, unsigned n)
{
        unsigned total = 0;

        for (unsigned i = 0; i < n; i++)
                total += weights[i];
        if (total == 0)
                return 0;
        int64_t r = tg_rng_range(rng, 0, (int64_t)total - 1);
        for (unsigned i = 0; i < n; i++) {
                if (r < (int64_t)weights[i])
                        return i;
                r -= weights[i];
        }
        return 0;
}

void sim_provider_handoff(struct sim_provider *p, tg_mono_ns now, const struct transport_call *call,
                          struct sim_answer *ret)
{
        const struct sim_phase *ph = sim_provider_phase(p, now);

        (void)call;
        ret->connect = draw_ns(&p->rng, ph->connect_lo, ph->connect_hi);
        ret->refused = ph->refuse_pct > 0 && tg_rng_range(&p->rng, 1, 100) <= ph->refuse_pct;
}

/* 429/503 with or without Retry-After: seconds, or an HTTP-date on the
 * provider's own clock. */
static void limited(struct sim_provider *p, const struct sim_phase *ph, tg_mono_ns wire, int status,
                    struct sim_answer *a)
{
        a->http_status = status;
        a->error_code = status == 429 ? "rate_limited" : "temporarily_unavailable";
        a->latency = draw_ns(&p->rng, 1 * MS, 20 * MS);
        if (tg_rng_range(&p->rng, 1, 100) > ph->retry_after_pct)
                return;
        int64_t secs = tg_rng_range(&p->rng, 0, 4);
        if (tg_rng_range(&p->rng, 0, 3) == 0) {
                time_t t = (time_t)((p->cfg.wall0 + wire / MS) / 1000 + secs + 1);
                struct tm tm;
                if (gmtime_r(&t, &tm) && strftime(p->retry_after, sizeof(p->retry_after),
                                                  "%a, %d %b %Y %H:%M:%S GMT", &tm) > 0) {
                        a->retry_after = p->retry_after;
                        return;
                }
        }
        snprintf(p->retry_after, sizeof(p->retry_after), "%lld", (long long)secs);
        a->retry_after = p->retry_after;
}

static void slow(struct sim_provider *p, struct sim_answer *a)
{
        a->latency = p->cfg.timeout + draw_ns(&p->rng, 1 * MS, 2 * p->cfg.timeout);
}

static bool same_payload(const struct refund_request *a, const struct refund_request *b)
{
        return strcmp(a->payment_id, b->payment_id) == 0 && a->amount == b->amount &&
               strcmp(a->currency, b->currency) == 0;
}

static void post(struct sim_provider *p, const struct sim_phase *ph, struct sim_key *k,
                 const struct transport_call *call, tg_mono_ns wire, struct sim_answer *a)
{
        enum sim_post b = (enum sim_post)pick(&p->rng, ph->post_weight, SIM_POST_COUNT);
        tg_mono_ns exec = draw_ns(&p->rng, ph->exec_lo, ph->exec_hi);

        k->posts++;
        a->latency = draw_ns(&p->rng, ph->latency_lo, ph->latency_hi);
        a->transport = TG_TR_COMPLETE;
        if (b == SIM_POST_RESET_BEFORE) { /* never read */
                a->transport = TG_TR_RESET;
                a->latency = draw_ns(&p->rng, 0, 5 * MS);
                return;
        }
        if (b == SIM_POST_LIMITED || b == SIM_POST_UNAVAILABLE) {
                limited(p, ph, wire, b == SIM_POST_LIMITED ? 429 : 503, a);
                return;
        }
        if (k->has_payload && !same_payload(&k->payload, call->refund)) {
                a->http_status = 422;
                a->error_code = "idempotency_key_reused";
                return;
        }
        if (!k->has_payload) {
                k->payload = *call->refund;
                k->has_payload = true;
        }
        if (k->exec_at != TG_MONO_NEVER && k->exec_at > wire) {
                a->http_status = 409; /* the first is still being processed */
                a->error_code = "idempotency_key_in_use";
                return;
        }
        if (k->rejected || call->refund->amount % SIM_INVALID_AMOUNT == 0) {
                k->rejected = true;
                a->http_status = 422;
                a->error_code = "invalid_request";
                return;
        }
        if (k->exec_at == TG_MONO_NEVER) {
                /* a new key: the refund executes (whatever the answer) */
                k->exec_at = wire + exec;
                k->executions++;
                a->http_status = 201;
                if (a->latency < exec)
                        a->latency = exec;
        } else {
                a->http_status = 200; /* a replay: the first result */
        }
        a->status = "succeeded";
        snprintf(p->refund_id, sizeof(p->refund_id), "re_%s", k->key);
        a->refund_id = p->refund_id;
        switch (b) {
        case SIM_POST_SLOW:
                slow(p, a);
                break;
        case SIM_POST_DROP:
                a->transport = TG_TR_TIMEOUT_AFTER_SEND;
                break;
        case SIM_POST_ERROR:
                a->http_status = 500;
                a->status = NULL;
                a->refund_id = NULL;
                a->error_code = "internal";
                break;
        case SIM_POST_RESET_AFTER:
                a->transport = TG_TR_RESET;
                break;
        default:
                break;
        }
}

static void query(struct sim_provider *p, const struct sim_phase *ph, struct sim_key *k,
                  tg_mono_ns wire, struct sim_answer *a)
{
        enum sim_query b = (enum sim_query)pick(&p->rng, ph->query_weight, SIM_QUERY_COUNT);

        k->queries++;
        a->latency = draw_ns(&p->rng, ph->latency_lo, ph->latency_hi);
        a->transport = TG_TR_COMPLETE;
        switch (b) {
        case SIM_QUERY_SLOW:
                slow(p, a);
                return;
        case SIM_QUERY_UNAVAILABLE:
                limited(p, ph, wire, 503, a);
                return;
        case SIM_QUERY_RESET:
                a->transport = TG_TR_RESET;
                return;
        default:
                break;
        }
        a->http_status = 200;
        if (k->exec_at != TG_MONO_NEVER && k->exec_at <= wire) {
                a->status = "succeeded";
                snprintf(p->refund_id, sizeof(p->refund_id), "re_%s", k->key);
                a->refund_id = p->refund_id;
        } else if (k->exec_at != TG_MONO_NEVER) {
                a->status = "processing";
        } else if (k->rejected) {
                a->status = "failed";
        } else {
                a->http_status = 404;
                a->error_code = "not_found";
        }
}

void sim_provider_arrive(struct sim_provider *p, const struct transport_call *call, tg_mono_ns wire,
                         struct sim_answer *ret)
{
        const struct sim_phase *ph = sim_provider_phase(p, wire);
        struct sim_key *k = find(p, call->operation_id, true);

        if (!k) { /* the ledger is full: answer as a provider that is down */
                ret->transport = TG_TR_RESET;
                ret->latency = 1 * MS;
                return;
        }
        if (k->first_arrival == TG_MONO_NEVER) {
                k->first_arrival = wire;
        } else if (wire - k->first_arrival >= p->cfg.key_ttl) {
                /* past its time to live the key is new again (its count of
                 * executions stays: that is the ground truth) */
                k->first_arrival = wire;
                k->has_payload = false;
                k->rejected = false;
                if (k->exec_at != TG_MONO_NEVER && k->exec_at <= wire) {
                        k->exec_at = TG_MONO_NEVER;
                        k->forgotten++;
                }
        }
        ret->status = NULL;
        ret->error_code = NULL;
        ret->retry_after = NULL;
        ret->refund_id = NULL;
        if (call->request == CLASSIFY_QUERY)
                query(p, ph, k, wire, ret);
        else
                post(p, ph, k, call, wire, ret);
}
