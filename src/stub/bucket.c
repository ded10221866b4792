/*
 * The provider's true capacity as a token bucket (bucket.h). Tokens are
 * counted in doubles: a fraction of a token accrues between requests, so
 * the long-run pass rate is exactly `rate` whatever the arrival times.
 */
#include "bucket.h"

void bucket_set(struct stub_bucket *b, double rate, double burst, tg_mono_ns now)
{
        b->rate = rate > 0 ? rate : 0;
        b->burst = burst >= 1 ? burst : 1;
        b->tokens = b->burst;
        b->last = now;
}

bool bucket_take(struct stub_bucket *b, tg_mono_ns now)
{
        if (b->rate <= 0)
                return true;
        if (now > b->last) {
                b->tokens += (double)(now - b->last) / (double)TG_NS_PER_S * b->rate;
                if (b->tokens > b->burst)
                        b->tokens = b->burst;
                b->last = now;
        }
        if (b->tokens < 1.0)
                return false;
        b->tokens -= 1.0;
        return true;
}
