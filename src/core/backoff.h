/*
 * backoff — how long a retry waits. Windows grow exponentially so that load
 * falls as failures go on; jitter spreads clients that failed together over
 * the window so they do not come back in the same instant (seed 004); a
 * per-round cap stops the exponent from waiting absurdly long; a total give-up
 * time ends retrying altogether. A Retry-After from the provider is a floor
 * that jitter never shortens.
 *
 * Retry n (n >= 1 is the n-th retry, i.e. attempt n+1) has the window
 *   hi = min(cap_ms, base_ms * factor^(n-1)),   lo = min(min_ms, hi)
 * and the jitter mode picks the wait:
 *   none          hi (every client at the same instant: the seed's warning)
 *   full          uniform in [lo, hi]
 *   equal         hi/2 + uniform in [0, hi/2], never below lo
 *   decorrelated  min(cap_ms, uniform in [d, 3 * prev_wait]) with
 *                 d = max(lo, 1); prev_wait <= 0 means d (AWS "decorrelated")
 * Defaults (tollgate, seed 000): base 2000, factor 2, min 1000, cap 60000,
 * full jitter: attempt 2 waits 1-2 s, attempt 3 waits 1-4 s.
 *
 * Pure: randomness comes from the caller's struct tg_rng.
 */
#ifndef TG_BACKOFF_H
#define TG_BACKOFF_H

#include <stdint.h>

#include "core/rng.h"

enum backoff_jitter {
        BACKOFF_JITTER_NONE,
        BACKOFF_JITTER_FULL,
        BACKOFF_JITTER_EQUAL,
        BACKOFF_JITTER_DECORRELATED,
};

struct backoff_config {
        int64_t base_ms;    /* upper edge of the first retry's window, > 0 */
        double factor;      /* growth per retry, >= 1 */
        int64_t min_ms;     /* lower edge of every window, >= 0 */
        int64_t cap_ms;     /* per-round cap on the upper edge, >= base_ms */
        int64_t give_up_ms; /* total give-up time since the first failure; 0 = none */
        enum backoff_jitter jitter;
};

/* tollgate's defaults (see above). */
void backoff_config_default(struct backoff_config *ret_config);

/* Checks a config; 0 or TG_EINVAL. */
int backoff_config_check(const struct backoff_config *config);

/* Name <-> mode: "none", "full", "equal", "decorrelated". Parse returns 0 or
 * TG_EINVAL. */
const char *backoff_jitter_name(enum backoff_jitter jitter);
int backoff_jitter_parse(const char *name, enum backoff_jitter *ret_jitter);

/* The window [lo, hi] of retry n (n >= 1). 0 or TG_EINVAL. */
int backoff_window(const struct backoff_config *config, unsigned retry, int64_t *ret_lo_ms,
                   int64_t *ret_hi_ms);

/* Draws the wait before retry n. prev_wait_ms is the previous wait (for
 * decorrelated jitter; <= 0 if none). retry_after_ms < 0 means no
 * Retry-After; otherwise the wait is at least retry_after_ms, whatever the
 * cap. elapsed_ms is the time since the first failure: when
 * give_up_ms > 0 and elapsed_ms + wait > give_up_ms, returns TG_ERANGE (give
 * up) and leaves *ret_wait_ms untouched. Returns 0 or TG_EINVAL. */
int backoff_draw(const struct backoff_config *config, unsigned retry, int64_t prev_wait_ms,
                 int64_t retry_after_ms, int64_t elapsed_ms, struct tg_rng *rng,
                 int64_t *ret_wait_ms);

#endif
