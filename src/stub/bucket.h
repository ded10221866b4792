/*
 * A provider's true capacity, below what its callers were told: a token
 * bucket (rate tokens a second, at most burst saved) in front of the
 * contract's endpoints, whose refusals are 429s. Refunds and queries draw
 * from the same bucket, as a status query costs quota at most providers.
 * Unlike --limit-rate (a gateway that judges the gap to the last request it
 * let through, no burst), a bucket lets a short burst through and then holds
 * the caller to its rate on average: the shape of a provider under strain.
 * Pure: the caller passes the time and holds the lock.
 */
#ifndef STUB_BUCKET_H
#define STUB_BUCKET_H

#include <stdbool.h>

#include "core/tg_time.h"

struct stub_bucket {
        double rate;  /* tokens a second; 0: no bucket, everything passes */
        double burst; /* the most tokens saved (>= 1) */
        double tokens;
        tg_mono_ns last; /* when tokens was counted */
};

/* A new capacity from now on; the bucket starts full. rate 0 turns it off. */
void bucket_set(struct stub_bucket *b, double rate, double burst, tg_mono_ns now);

/* A request arriving at now: true when it passes (a token taken), false
 * when it is refused. An arrival earlier than the last one counts as at the
 * same time. */
bool bucket_take(struct stub_bucket *b, tg_mono_ns now);

#endif
