/*
 * share_want — a standby's wish for a share, as an owner sees it. See
 * share_want.h.
 */
#include "core/share_want.h"

void share_want_seen(struct share_want *w, int64_t seq, tg_mono_ns now)
{
        if (!w->known || seq != w->seq)
                w->moved = now;
        w->known = true;
        w->seq = seq;
}

bool share_want_fresh(const struct share_want *w, tg_mono_ns now)
{
        return w->known && now - w->moved < SHARE_WANT_FRESH_NS;
}
