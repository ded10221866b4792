/*
 * share_want — pure: whether a standby of an account wants a share now, as
 * an owner sees it (docs/design.md, "Orphaned shares"). A standby moves a
 * count in the store (store_share_want: the split's want_seq) about once a
 * second while it waits; every owner of a share reads the count once a
 * second and notes, on its own monotonic clock, when it last saw it move.
 * The wish is fresh while it moved within SHARE_WANT_FRESH_NS: then a
 * process that holds two shares of the account hands one back, and takes no
 * orphaned share. No wall clock of two machines is compared: only whether a
 * number changed, on the reader's clock. A count seen for the first time
 * counts as moved then (a reader that just came cannot tell an old one from
 * a new one: it waits the freshness out once).
 */
#ifndef TG_SHARE_WANT_H
#define TG_SHARE_WANT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tg_time.h"

/* A standby says it again this often; three times that without a move and
 * the wish is over (the standby took a share, went away, or is paused). */
#define SHARE_WANT_EVERY_NS (1000 * TG_NS_PER_MS)
#define SHARE_WANT_FRESH_NS (3 * SHARE_WANT_EVERY_NS)

struct share_want {
        bool known;       /* a count was seen */
        int64_t seq;      /* the last one seen */
        tg_mono_ns moved; /* when it was last seen to move (or first seen) */
};

/* The count read at `now`. */
void share_want_seen(struct share_want *w, int64_t seq, tg_mono_ns now);
/* A standby wants a share: the count moved within SHARE_WANT_FRESH_NS of
 * now (nothing seen yet: false). */
bool share_want_fresh(const struct share_want *w, tg_mono_ns now);

#endif
