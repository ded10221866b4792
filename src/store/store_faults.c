/*
 * store_faults — the fault seam at the backend boundary. See store_faults.h.
 *
 * The wrapped handle's ops point at a struct fault_ops whose first member is
 * the copied table: every primitive but tx, tx_commit_unknown, epoch_bump and
 * close is the backend's own, called with the same handle.
 */
#include "store/store_faults.h"

#include <stdlib.h>

#include "core/tg_error.h"
#include "store/store_backend.h"

struct fault_ops {
        struct store_ops ops; /* first: the handle's ops point here */
        const struct store_ops *orig;
        struct store_fault_hooks hooks;
        bool commit_unknown; /* a re-run after a lost COMMIT is in progress */
};

static struct fault_ops *F(const struct store *s)
{
        return (struct fault_ops *)(void *)(uintptr_t)s->ops;
}

static int f_tx(struct store *s, enum store_tx kind, unsigned flags, store_tx_fn fn, void *ctx)
{
        struct fault_ops *f = F(s);
        bool write = kind != STORE_TX_READ;
        enum store_fault fault =
            f->hooks.before ? f->hooks.before(f->hooks.ctx, write) : STORE_FAULT_NONE;
        bool committed = false;
        int r;

        switch (fault) {
        case STORE_FAULT_BUSY:
                r = TG_EBUSY;
                break;
        case STORE_FAULT_IO:
                r = TG_EIO;
                break;
        case STORE_FAULT_NONE:
        case STORE_FAULT_LOST_COMMIT:
        default:
                r = f->orig->tx(s, kind, flags, fn, ctx);
                committed = r == 0;
                if (r == 0 && fault == STORE_FAULT_LOST_COMMIT) {
                        if (flags & STORE_TX_RECHECKS) {
                                /* as the MariaDB backend: reconnect, run the
                                 * body again, knowing the COMMIT may have
                                 * happened */
                                f->commit_unknown = true;
                                r = f->orig->tx(s, kind, flags, fn, ctx);
                                f->commit_unknown = false;
                        } else {
                                r = TG_EIO; /* outcome unknown: say so */
                        }
                }
                break;
        }
        if (f->hooks.after)
                f->hooks.after(f->hooks.ctx, write, committed, r);
        return r;
}

static bool f_tx_commit_unknown(const struct store *s)
{
        const struct fault_ops *f = F(s);

        return f->commit_unknown || f->orig->tx_commit_unknown(s);
}

static int f_epoch_bump(struct store *s, unsigned share, int64_t *ret_epoch)
{
        struct fault_ops *f = F(s);
        int r = f->orig->epoch_bump(s, share, ret_epoch);

        if (r == 0 && f->hooks.epoch_bumped)
                f->hooks.epoch_bumped(f->hooks.ctx, *ret_epoch);
        return r;
}

static void f_close(struct store *s)
{
        struct fault_ops *f = F(s);

        f->orig->close(s);
        free(f);
}

int store_faults_wrap(struct store *store, const struct store_fault_hooks *hooks)
{
        struct fault_ops *f;

        if (!store || !hooks || store->ops->close == f_close)
                return TG_EINVAL;
        f = calloc(1, sizeof(*f));
        if (!f)
                return TG_ENOMEM;
        f->ops = *store->ops;
        f->orig = store->ops;
        f->hooks = *hooks;
        f->ops.tx = f_tx;
        f->ops.tx_commit_unknown = f_tx_commit_unknown;
        f->ops.epoch_bump = f_epoch_bump;
        f->ops.close = f_close;
        store->ops = &f->ops;
        return 0;
}

void store_faults_drop_locks(struct store *store)
{
        if (store)
                store->ops->lock_drop_all(store);
}
