/*
 * backoff — retry windows (exponential, capped), the four jitter modes, the
 * Retry-After floor and the total give-up time, as pure arithmetic over a
 * caller-supplied random source.
 *
 * Invariants kept here:
 *   - for retry n the window is lo = min(min_ms, hi) <= hi =
 *     min(cap_ms, base_ms * factor^(n-1)); the power is taken in floating
 *     point and compared with the cap before any conversion, so a huge n or
 *     factor clamps to the cap instead of overflowing;
 *   - none/full/equal draws lie in [lo, hi]; decorrelated draws lie in
 *     [d, cap_ms] with d = max(lo, 1);
 *   - a Retry-After (>= 0) raises the wait to at least its value, even above
 *     the cap; jitter never shortens it;
 *   - give-up is checked on the final wait, without overflow, and on give-up
 *     the output is untouched.
 */
#include "core/backoff.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/tg_error.h"

static const char *const jitter_names[] = {
    [BACKOFF_JITTER_NONE] = "none",
    [BACKOFF_JITTER_FULL] = "full",
    [BACKOFF_JITTER_EQUAL] = "equal",
    [BACKOFF_JITTER_DECORRELATED] = "decorrelated",
};

#define JITTER_COUNT (sizeof(jitter_names) / sizeof(jitter_names[0]))

void backoff_config_default(struct backoff_config *ret_config)
{
        ret_config->base_ms = 2000;
        ret_config->factor = 2.0;
        ret_config->min_ms = 1000;
        ret_config->cap_ms = 60000;
        /* No give-up of its own: the operation's deadline (15 min from
         * acceptance, seed 000) is policy's budget, counted from acceptance
         * rather than from the first failure. */
        ret_config->give_up_ms = 0;
        ret_config->jitter = BACKOFF_JITTER_FULL;
}

int backoff_config_check(const struct backoff_config *config)
{
        if (!config)
                return TG_EINVAL;
        if (config->base_ms <= 0)
                return TG_EINVAL;
        if (!isfinite(config->factor) || !(config->factor >= 1.0))
                return TG_EINVAL;
        if (config->min_ms < 0)
                return TG_EINVAL;
        if (config->cap_ms < config->base_ms)
                return TG_EINVAL;
        if (config->give_up_ms < 0)
                return TG_EINVAL;
        if ((unsigned)config->jitter >= JITTER_COUNT)
                return TG_EINVAL;
        return 0;
}

const char *backoff_jitter_name(enum backoff_jitter jitter)
{
        if ((unsigned)jitter >= JITTER_COUNT)
                return "unknown";
        return jitter_names[jitter];
}

int backoff_jitter_parse(const char *name, enum backoff_jitter *ret_jitter)
{
        if (!name || !ret_jitter)
                return TG_EINVAL;
        for (size_t i = 0; i < JITTER_COUNT; i++) {
                if (strcmp(name, jitter_names[i]) == 0) {
                        *ret_jitter = (enum backoff_jitter)i;
                        return 0;
                }
        }
        return TG_EINVAL;
}

/* hi of retry n for a checked config: min(cap, base * factor^(n-1)). */
static int64_t window_hi(const struct backoff_config *config, unsigned retry)
{
        double grown = (double)config->base_ms * pow(config->factor, (double)(retry - 1));
        /* (double)cap may round up past INT64_MAX; any grown value below it
         * still converts safely, and the min() below restores the exact cap. */
        if (!(grown < (double)config->cap_ms))
                return config->cap_ms;
        int64_t hi = (int64_t)grown;
        return hi < config->cap_ms ? hi : config->cap_ms;
}

int backoff_window(const struct backoff_config *config, unsigned retry, int64_t *ret_lo_ms,
                   int64_t *ret_hi_ms)
{
        if (backoff_config_check(config) < 0 || retry < 1 || !ret_lo_ms || !ret_hi_ms)
                return TG_EINVAL;
        int64_t hi = window_hi(config, retry);
        int64_t lo = config->min_ms < hi ? config->min_ms : hi;
        *ret_lo_ms = lo;
        *ret_hi_ms = hi;
        return 0;
}

static int64_t draw_decorrelated(const struct backoff_config *config, int64_t lo,
                                 int64_t prev_wait_ms, struct tg_rng *rng)
{
        int64_t d = lo > 1 ? lo : 1;
        int64_t prev = prev_wait_ms > 0 ? prev_wait_ms : d;
        int64_t upper = prev > INT64_MAX / 3 ? INT64_MAX : 3 * prev;
        /* A previous wait shorter than d/3 (say, config changed) must not
         * make an empty range. */
        if (upper < d)
                upper = d;
        int64_t wait = tg_rng_range(rng, d, upper);
        return wait < config->cap_ms ? wait : config->cap_ms;
}

int backoff_draw(const struct backoff_config *config, unsigned retry, int64_t prev_wait_ms,
                 int64_t retry_after_ms, int64_t elapsed_ms, struct tg_rng *rng,
                 int64_t *ret_wait_ms)
{
        if (!rng || !ret_wait_ms)
                return TG_EINVAL;
        int64_t lo, hi;
        int r = backoff_window(config, retry, &lo, &hi);
        if (r < 0)
                return r;

        int64_t wait = hi;
        switch (config->jitter) {
        case BACKOFF_JITTER_NONE:
                wait = hi;
                break;
        case BACKOFF_JITTER_FULL:
                wait = tg_rng_range(rng, lo, hi);
                break;
        case BACKOFF_JITTER_EQUAL: {
                /* hi/2 + uniform in [0, hi - hi/2], so an odd hi is reachable
                 * and the draw stays inside [hi/2, hi]. */
                int64_t half = hi / 2;
                wait = half + tg_rng_range(rng, 0, hi - half);
                if (wait < lo)
                        wait = lo;
                break;
        }
        case BACKOFF_JITTER_DECORRELATED:
                wait = draw_decorrelated(config, lo, prev_wait_ms, rng);
                break;
        }

        /* The provider's Retry-After is a floor, above the cap if need be. */
        if (retry_after_ms >= 0 && wait < retry_after_ms)
                wait = retry_after_ms;

        if (config->give_up_ms > 0) {
                /* A wall clock stepped back must not turn into a longer budget
                 * than was configured, nor into an error: count it as 0. */
                int64_t elapsed = elapsed_ms > 0 ? elapsed_ms : 0;
                /* elapsed + wait > give_up, without the sum overflowing. */
                if (wait > config->give_up_ms - elapsed)
                        return TG_ERANGE;
        }
        *ret_wait_ms = wait;
        return 0;
}
