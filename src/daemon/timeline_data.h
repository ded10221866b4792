/*
 * timeline_data — the seed's one picture as data: starts/s, closes/s, in
 * flight against its cap, the oldest pending age and the backlog by state,
 * with the provider holds, owner changes and admission refusals that the
 * console draws as bands. Read from the store alone (the exit's per-second
 * samples of every share, merged, and the API's refusals), so that the
 * console's live view, its past windows and `tollgate report --config
 * --from --to` draw the same thing from the same rows.
 *
 * A window is cut into bins of step_s seconds (1, or more so that a long
 * window has at most max_points bins); a bin holds the mean of starts/s and
 * closes/s over its seconds with a sample, the largest in-flight and oldest
 * age, the last backlog and owner epoch, held if any second was held, and
 * the refusals summed. A bin with neither a sample nor a refusal is not
 * emitted: a gap (no dispatcher wrote) stays a gap.
 */
#ifndef TG_TIMELINE_DATA_H
#define TG_TIMELINE_DATA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "daemon/config.h"
#include "store/store.h"

struct timeline_point {
        tg_wall_ms at;                    /* start of the bin */
        unsigned seconds;                 /* seconds with a sample in the bin (0: refusals only) */
        double starts, closes;            /* per second, mean over those seconds */
        unsigned in_flight;               /* largest */
        double oldest_age_s;              /* largest; < 0: nothing open */
        bool held;                        /* any second */
        int64_t epoch;                    /* the newest sample's (0: none) */
        unsigned backlog[OP_STATE_COUNT]; /* the newest sample's */
        unsigned refused;                 /* summed */
};

struct timeline_series {
        tg_wall_ms from, to;
        unsigned step_s;
        struct timeline_point *points; /* only the bins with data, oldest first */
        size_t n;
};

/* Reads [from, to) (wall ms, from < to) in bins of at least one second, at
 * most max_points bins. 0, TG_EINVAL, TG_ENOMEM or the store's code. Free
 * with timeline_series_free(). */
int timeline_read(struct store *store, tg_wall_ms from, tg_wall_ms to, size_t max_points,
                  struct timeline_series *ret_series);
void timeline_series_free(struct timeline_series *series);

/* The series as columns for the charts: {"from","to","step_s","cap",
 * "rate","t":[seconds],"starts","closes","in_flight","oldest_age_s",
 * "held","epoch","pending","in_flight_ops","retry_wait","unknown",
 * "manual","refused"} (only points with at > after, which is INT64_MIN
 * for all). cap and rate are the account's configured limits. NULL when
 * out of memory. */
json_t *timeline_series_json(const struct timeline_series *series, tg_wall_ms after,
                             const struct tg_config *cfg);

#endif
