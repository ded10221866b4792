/*
 * jitter_sim — the seed 004 simulation (see the header for the model).
 *
 * The run is played twice with the same seed: the first pass only learns the
 * longest wait of each round and the latest retry, so the bucket arrays can
 * be sized (and refused past JITTER_SIM_MAX_BUCKETS) before anything is
 * counted; the second pass replays the identical draws and counts them. This
 * keeps memory at O(clients + buckets) instead of O(clients * rounds).
 *
 * Invariants: every wait comes from backoff_draw() with the client's own
 * elapsed time, so give-up is decided exactly as the dispatcher would; a
 * time on the timeline never overflows (no cap means a cap of NO_CAP_MS,
 * and R * NO_CAP_MS < INT64_MAX); both passes draw in the same order.
 */
#include "tools/jitter_sim.h"

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/tg_error.h"

/* "No cap": large enough never to bind in practice, small enough that
 * JITTER_SIM_MAX_ROUNDS of them still fit in an int64_t. */
#define NO_CAP_MS (INT64_MAX / 128)

struct jitter_sim {
        struct jitter_sim_config config;
        struct jitter_sim_summary summary;
        struct jitter_sim_round rounds[JITTER_SIM_MAX_ROUNDS];
        unsigned *timeline; /* summary.buckets counts */
};

/* State of one pass. */
struct pass {
        int64_t *t;    /* per client: time of its latest retry (0 = first failure) */
        int64_t *prev; /* per client: previous wait, 0 if none */
        unsigned char *alive;
        unsigned *scratch; /* per-round bucket counts (second pass) */
        size_t scratch_len;
};

int jitter_sim_config_check(const struct jitter_sim_config *c)
{
        if (!c)
                return TG_EINVAL;
        if (c->clients < 1 || c->clients > JITTER_SIM_MAX_CLIENTS)
                return TG_EINVAL;
        if (c->rounds < 1 || c->rounds > JITTER_SIM_MAX_ROUNDS)
                return TG_EINVAL;
        if (c->base_ms <= 0 || c->base_ms > NO_CAP_MS || c->min_ms < 0 || c->bucket_ms <= 0)
                return TG_EINVAL;
        if (c->cap_ms < 0 || (c->cap_ms > 0 && c->cap_ms < c->base_ms) || c->cap_ms > NO_CAP_MS)
                return TG_EINVAL;
        if (c->give_up_ms < 0)
                return TG_EINVAL;
        struct backoff_config b = {.base_ms = c->base_ms,
                                   .factor = c->factor,
                                   .min_ms = c->min_ms,
                                   .cap_ms = c->cap_ms ? c->cap_ms : NO_CAP_MS,
                                   .give_up_ms = c->give_up_ms,
                                   .jitter = c->jitter};
        return backoff_config_check(&b) < 0 ? TG_EINVAL : 0;
}

static void to_backoff(const struct jitter_sim_config *c, struct backoff_config *ret)
{
        ret->base_ms = c->base_ms;
        ret->factor = c->factor;
        ret->min_ms = c->min_ms;
        ret->cap_ms = c->cap_ms ? c->cap_ms : NO_CAP_MS;
        ret->give_up_ms = c->give_up_ms;
        ret->jitter = c->jitter;
}

/* One pass over every round. With count == 0 it records per-round extremes
 * and the summary's maxima; with count == 1 it fills the buckets. */
static int play(struct jitter_sim *sim, struct pass *p, int count)
{
        const struct jitter_sim_config *c = &sim->config;
        struct jitter_sim_summary *s = &sim->summary;
        struct backoff_config b;
        struct tg_rng rng;

        to_backoff(c, &b);
        tg_rng_seed(&rng, c->seed);
        for (unsigned i = 0; i < c->clients; i++) {
                p->t[i] = 0;
                p->prev[i] = 0;
                p->alive[i] = 1;
        }
        for (unsigned k = 1; k <= c->rounds; k++) {
                struct jitter_sim_round *rd = &sim->rounds[k - 1];
                if (count && p->scratch)
                        memset(p->scratch, 0, p->scratch_len * sizeof(*p->scratch));
                for (unsigned i = 0; i < c->clients; i++) {
                        int64_t w;
                        if (!p->alive[i])
                                continue;
                        int r = backoff_draw(&b, k, p->prev[i], -1, p->t[i], &rng, &w);
                        if (r == TG_ERANGE) {
                                p->alive[i] = 0;
                                if (!count)
                                        s->gave_up++;
                                continue;
                        }
                        if (r < 0)
                                return r;
                        p->prev[i] = w;
                        p->t[i] += w;
                        if (!count) {
                                if (rd->sent == 0 || w < rd->min_wait_ms)
                                        rd->min_wait_ms = w;
                                if (w > rd->max_wait_ms)
                                        rd->max_wait_ms = w;
                                rd->sent++;
                                s->retries++;
                                if (w > s->longest_wait_ms)
                                        s->longest_wait_ms = w;
                                if (p->t[i] > s->tail_ms)
                                        s->tail_ms = p->t[i];
                        } else {
                                p->scratch[(size_t)(w / c->bucket_ms)]++;
                                sim->timeline[(size_t)(p->t[i] / c->bucket_ms)]++;
                        }
                }
                if (count) {
                        size_t n = (size_t)(rd->max_wait_ms / c->bucket_ms) + 1;
                        for (size_t j = 0; j < n; j++) {
                                if (p->scratch[j] > rd->peak) {
                                        rd->peak = p->scratch[j];
                                        rd->peak_at_ms = (int64_t)j * c->bucket_ms;
                                }
                        }
                        if (rd->peak > s->round_peak_max)
                                s->round_peak_max = rd->peak;
                }
        }
        return 0;
}

static void init_rounds(struct jitter_sim *sim)
{
        const struct jitter_sim_config *c = &sim->config;
        struct backoff_config b;

        to_backoff(c, &b);
        for (unsigned k = 1; k <= c->rounds; k++) {
                struct jitter_sim_round *rd = &sim->rounds[k - 1];
                int64_t lo = 0, hi = 0;
                memset(rd, 0, sizeof(*rd));
                rd->round = k;
                /* Cannot fail: the config was checked. */
                (void)backoff_window(&b, k, &lo, &hi);
                rd->lo_ms = lo;
                rd->hi_ms = hi;
                if (c->cap_ms > 0 && hi == c->cap_ms) {
                        struct backoff_config uncapped = b;
                        int64_t ulo, uhi;
                        uncapped.cap_ms = NO_CAP_MS;
                        if (backoff_window(&uncapped, k, &ulo, &uhi) == 0 && uhi > hi)
                                sim->summary.capped = 1;
                }
        }
}

int jitter_sim_run(const struct jitter_sim_config *config, struct jitter_sim **ret_sim)
{
        struct jitter_sim *sim = NULL;
        struct pass p = {0};
        int r;

        if (!ret_sim || jitter_sim_config_check(config) < 0)
                return TG_EINVAL;
        sim = calloc(1, sizeof(*sim));
        p.t = calloc(config->clients, sizeof(*p.t));
        p.prev = calloc(config->clients, sizeof(*p.prev));
        p.alive = calloc(config->clients, sizeof(*p.alive));
        if (!sim || !p.t || !p.prev || !p.alive) {
                r = TG_ENOMEM;
                goto fail;
        }
        sim->config = *config;
        sim->summary.clients = config->clients;
        sim->summary.rounds = config->rounds;
        init_rounds(sim);

        r = play(sim, &p, 0);
        if (r < 0)
                goto fail;

        /* Size both views, refusing a bucket too small for them. */
        int64_t longest = sim->summary.longest_wait_ms;
        if (longest / config->bucket_ms >= (int64_t)JITTER_SIM_MAX_BUCKETS ||
            sim->summary.tail_ms / config->bucket_ms >= (int64_t)JITTER_SIM_MAX_BUCKETS) {
                r = TG_ERANGE;
                goto fail;
        }
        p.scratch_len = (size_t)(longest / config->bucket_ms) + 1;
        sim->summary.buckets = (size_t)(sim->summary.tail_ms / config->bucket_ms) + 1;
        p.scratch = calloc(p.scratch_len, sizeof(*p.scratch));
        sim->timeline = calloc(sim->summary.buckets, sizeof(*sim->timeline));
        if (!p.scratch || !sim->timeline) {
                r = TG_ENOMEM;
                goto fail;
        }
        r = play(sim, &p, 1);
        if (r < 0)
                goto fail;

        double sum_last = 0;
        for (unsigned i = 0; i < config->clients; i++)
                sum_last += (double)p.t[i];
        sim->summary.mean_last_ms = (int64_t)(sum_last / config->clients);
        for (size_t j = 0; j < sim->summary.buckets; j++) {
                unsigned n = sim->timeline[j];
                if (n > sim->summary.peak) {
                        sim->summary.peak = n;
                        sim->summary.peak_at_ms = (int64_t)j * config->bucket_ms;
                }
                if (config->capacity > 0 && n > config->capacity)
                        sim->summary.over_capacity++;
        }
        free(p.t);
        free(p.prev);
        free(p.alive);
        free(p.scratch);
        *ret_sim = sim;
        return 0;
fail:
        free(p.t);
        free(p.prev);
        free(p.alive);
        free(p.scratch);
        jitter_sim_free(sim);
        return r;
}

void jitter_sim_free(struct jitter_sim *sim)
{
        if (!sim)
                return;
        free(sim->timeline);
        free(sim);
}

const struct jitter_sim_config *jitter_sim_config(const struct jitter_sim *sim)
{
        return &sim->config;
}

void jitter_sim_summary(const struct jitter_sim *sim, struct jitter_sim_summary *ret_summary)
{
        *ret_summary = sim->summary;
}

int jitter_sim_round(const struct jitter_sim *sim, unsigned round,
                     struct jitter_sim_round *ret_round)
{
        if (!sim || !ret_round || round < 1 || round > sim->config.rounds)
                return TG_EINVAL;
        *ret_round = sim->rounds[round - 1];
        return 0;
}

unsigned jitter_sim_bucket(const struct jitter_sim *sim, size_t i)
{
        if (!sim || i >= sim->summary.buckets)
                return 0;
        return sim->timeline[i];
}
