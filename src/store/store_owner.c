/*
 * store_owner — exit ownership, written once for every backend over the lock
 * and epoch primitives of store_backend.h: shares of the account quota, the
 * split in force, epochs, and a new owner's recovery.
 *
 * A share is owned by a lock the backend holds for the handle's life (SQLite:
 * an OFD lock on a file beside the database; MariaDB: GET_LOCK on a dedicated
 * session, so a paused holder still blocks) and by an epoch: every
 * acquisition bumps one counter for all shares and records it as the share's
 * epoch. Claims look their epoch up inside their transaction (store_exit.c),
 * settles check the epoch the operation was claimed under, so an owner that
 * lost its share can start nothing more.
 *
 * Acquirers hold the split lock while they read the split and pick a share,
 * so a split is never replaced under a live share: a different split is
 * recorded only once no share of the one in force is held.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/store_backend.h"

#define SPLIT_WAIT_MS  2000 /* another acquirer picking its share takes a few statements */
#define RECOVER_BATCH  64
#define CALLS_PER_PAGE 16

struct split_ctx {
        bool found;
        struct store_split split;
};

static int split_tx(struct store *s, void *ctx)
{
        struct split_ctx *c = ctx;
        int r = s->ops->split_read(s, &c->split);

        c->found = r == 0;
        return r == TG_ENOTFOUND ? 0 : r;
}

/* With the split lock held: how many shares may be taken (*ret_n) and which
 * split to record first (*ret_put, NULL: none). TG_ECONFLICT when the split
 * in force differs and a share of it is held. */
static int split_decide(struct store *s, const struct store_split *want, unsigned *ret_n,
                        const struct store_split **ret_put)
{
        struct split_ctx c = {0};
        unsigned old_n;
        int r = s->ops->tx(s, STORE_TX_READ, STORE_TX_RECHECKS, split_tx, &c);

        if (r < 0)
                return r;
        if (!want) { /* the one owner: any one-share split */
                if (c.found && c.split.shares != 1)
                        return TG_ECONFLICT;
                *ret_n = 1;
                *ret_put = NULL;
                return 0;
        }
        if ((!c.found || c.split.shares == 1) && want->shares == 1) {
                /* One share: whoever holds the owner lock is the only exit,
                 * at its own rate, as before shares existed; a second one is
                 * a standby, not a conflict. Ours is recorded once we hold
                 * the lock. */
                *ret_n = 1;
                *ret_put = want;
                return 0;
        }
        if (c.found && store_split_same(&c.split, want)) {
                *ret_n = want->shares;
                *ret_put = NULL;
                return 0;
        }
        /* Another split (or none yet): it may be replaced only when nobody
         * holds a share of it. Every acquirer holds the split lock while it
         * picks, so a share found free here stays free until we are done. */
        old_n = c.found ? c.split.shares : 1;
        for (unsigned k = 0; k < old_n; k++) {
                r = s->ops->lock_take(s, STORE_LOCK_SHARE, k, 0);
                if (r == TG_ELOCKED)
                        return TG_ECONFLICT;
                if (r < 0)
                        return r;
                s->ops->lock_drop(s, STORE_LOCK_SHARE, k);
        }
        *ret_n = want->shares;
        *ret_put = want;
        return 0;
}

struct bump_ctx {
        const struct store_split *put; /* record this split first (NULL: keep) */
        unsigned share;
        int64_t epoch;
};

static int bump_tx(struct store *s, void *ctx)
{
        struct bump_ctx *c = ctx;
        int r = c->put ? s->ops->split_put(s, c->put) : 0;

        if (r == 0)
                r = s->ops->epoch_bump(s, c->share, &c->epoch);
        return r;
}

/* split NULL: the one owner (share 0 of a one-share split, rate not
 * recorded). */
static int acquire(struct store *s, const struct store_split *split, unsigned *ret_share,
                   int64_t *ret_epoch)
{
        struct bump_ctx c = {0};
        unsigned n = 0;
        int r;

        if (s->epoch > 0 && s->ops->lock_held(s) == 0) {
                /* Already ours: no second bump, which would fence our own claims. */
                *ret_share = s->share;
                *ret_epoch = s->epoch;
                return 0;
        }
        s->epoch = 0;
        s->ops->lock_drop_all(s);
        r = s->ops->lock_take(s, STORE_LOCK_SPLIT, 0, SPLIT_WAIT_MS);
        if (r == TG_ELOCKED)
                r = TG_EBUSY; /* another acquirer is slow: try again */
        if (r == 0)
                r = split_decide(s, split, &n, &c.put);
        for (unsigned k = 0; r == 0 && k < n; k++) {
                r = s->ops->lock_take(s, STORE_LOCK_SHARE, k, 0);
                if (r == 0) {
                        c.share = k;
                        break;
                }
                if (r == TG_ELOCKED && k + 1 < n)
                        r = 0; /* held: the next one */
        }
        /* A bump is harmless to repeat (epochs only have to grow), so an
         * unknown COMMIT may be retried. */
        if (r == 0)
                r = s->ops->tx(s, STORE_TX_WRITE, STORE_TX_RECHECKS, bump_tx, &c);
        s->ops->lock_drop(s, STORE_LOCK_SPLIT, 0); /* the next acquirer may pick now */
        if (r == 0)
                r = s->ops->lock_held(s); /* still ours after the bump? */
        if (r < 0) {
                s->ops->lock_drop_all(s);
                return r;
        }
        s->share = c.share;
        s->epoch = c.epoch;
        *ret_share = c.share;
        *ret_epoch = c.epoch;
        return 0;
}

int store_share_acquire(struct store *store, const struct store_split *split, unsigned *ret_share,
                        int64_t *ret_epoch)
{
        if (!store || !split || !ret_share || !ret_epoch)
                return TG_EINVAL;
        if (split->shares < 1 || split->shares > STORE_SHARES_MAX ||
            !(split->starts_per_second > 0 && split->starts_per_second <= 1e9) ||
            split->max_in_flight < split->shares)
                return TG_EINVAL;
        return acquire(store, split, ret_share, ret_epoch);
}

int store_owner_acquire(struct store *store, int64_t *ret_epoch)
{
        unsigned share = 0;

        if (!store || !ret_epoch)
                return TG_EINVAL;
        return acquire(store, NULL, &share, ret_epoch);
}

int store_split_get(struct store *store, struct store_split *ret_split)
{
        struct split_ctx c = {0};
        int r;

        if (!store || !ret_split)
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, split_tx, &c);
        if (r == 0 && !c.found)
                r = TG_ENOTFOUND;
        if (r == 0)
                *ret_split = c.split;
        return r;
}

static int want_tx(struct store *s, void *ctx)
{
        (void)ctx;
        return s->ops->split_want(s);
}

int store_share_want(struct store *store)
{
        if (!store)
                return TG_EINVAL;
        /* one more is harmless to repeat: readers only look whether it moved */
        return store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, want_tx, NULL);
}

struct epoch_ctx {
        int64_t epoch;
        unsigned share;
};

static int share_of_tx(struct store *s, void *ctx)
{
        struct epoch_ctx *c = ctx;

        return s->ops->epoch_share(s, c->epoch, &c->share);
}

int store_owner_check(struct store *store)
{
        struct epoch_ctx c;
        int r;

        if (!store)
                return TG_EINVAL;
        if (store->epoch <= 0 || store->ops->lock_held(store) < 0)
                return TG_ELOCKED;
        /* The lock is what decides; the epoch only catches an owner that
         * took over our share behind a replaced lock file. A database that
         * cannot answer right now (busy) is not a lost lock: claims stay
         * fenced by the epoch check inside their own transaction either way. */
        c.epoch = store->epoch;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, share_of_tx, &c);
        if (r == TG_EFENCED)
                return TG_ELOCKED;
        if (r < 0)
                return 0;
        return c.share == store->share ? 0 : TG_ELOCKED;
}

void store_owner_release(struct store *store)
{
        if (!store)
                return;
        store->ops->lock_drop_all(store);
        store->epoch = 0;
        store->share = 0;
}

static int epoch_tx(struct store *s, void *ctx)
{
        return s->ops->epoch_read(s, ctx);
}

int store_owner_epoch(struct store *store, int64_t *ret_epoch)
{
        int64_t epoch = 0;
        int r;

        if (!store || !ret_epoch)
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, epoch_tx, &epoch);
        if (r == 0)
                *ret_epoch = epoch;
        return r;
}

/* ---- the account-wide hold ---------------------------------------------------- */

static int hold_get_tx(struct store *s, void *ctx)
{
        return s->ops->hold_get(s, ctx);
}

int store_hold_get(struct store *store, tg_wall_ms *ret_until)
{
        tg_wall_ms until = 0;
        int r;

        if (!store || !ret_until)
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, hold_get_tx, &until);
        if (r == 0)
                *ret_until = until;
        return r;
}

static int hold_raise_tx(struct store *s, void *ctx)
{
        return s->ops->hold_raise(s, *(const tg_wall_ms *)ctx);
}

int store_hold_raise(struct store *store, tg_wall_ms until)
{
        if (!store)
                return TG_EINVAL;
        /* a raise is harmless to repeat */
        return store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, hold_raise_tx, &until);
}

/* ---- recovery ------------------------------------------------------------------ */

/* Closes every open call row of one operation as "outcome unknown (owner
 * lost)": sent, because it was claimed to be sent, the conservative answer
 * for any call whose outcome is unknown. */
static int close_open_calls(struct store *s, int64_t op_id, tg_wall_ms now)
{
        struct store_page q = {.kind = STORE_PAGE_OP_CALLS, .op_id = op_id};
        struct call_record calls[CALLS_PER_PAGE];
        unsigned n = 0;
        int r = 0;

        do {
                r = s->ops->page(s, &q, CALLS_PER_PAGE, calls, &n);
                for (unsigned i = 0; i < n && r == 0; i++) {
                        struct call_record *c = &calls[i];

                        if (c->ended)
                                continue;
                        c->ended = true;
                        c->end_wall = now;
                        c->cls = TG_CLASS_UNKNOWN;
                        c->sent = true;
                        store_copy_text(c->error, sizeof(c->error), "outcome unknown (owner lost)");
                        r = s->ops->call_close(s, c);
                }
                if (n > 0)
                        q.cur_id = calls[n - 1].id;
        } while (r == 0 && n == CALLS_PER_PAGE);
        return r;
}

struct recover_ctx {
        int64_t epoch;
        const struct policy_config *config;
        tg_wall_ms now;
        unsigned count;
        struct op_record batch[RECOVER_BATCH];
};

static int recover_tx(struct store *s, void *ctx)
{
        struct recover_ctx *c = ctx;
        struct store_batch q = {.kind = STORE_BATCH_RECOVER, .epoch = c->epoch, .now = c->now};
        struct store_split split;
        int r = s->ops->epoch_share(s, c->epoch, &q.share);

        c->count = 0;
        if (r == 0) {
                r = s->ops->split_read(s, &split);
                q.shares = r == 0 ? split.shares : 1; /* never recorded: one share */
                if (r == TG_ENOTFOUND)
                        r = 0;
        }
        /* Each pass moves its rows out of in_flight, so the loop ends. */
        while (r == 0) {
                unsigned n = 0;

                r = s->ops->op_batch(s, &q, RECOVER_BATCH, c->batch, &n);
                if (r < 0 || n == 0)
                        break;
                for (unsigned i = 0; i < n && r == 0; i++) {
                        const struct op_record *op = &c->batch[i];
                        struct op_record next;
                        char detail[TG_TEXT_MAX];

                        r = policy_takeover(c->config, op, c->now, &next);
                        if (r == 0)
                                r = store_op_put(s, op, &next);
                        if (r == 0)
                                r = close_open_calls(s, op->id, c->now);
                        if (r < 0)
                                break;
                        snprintf(detail, sizeof(detail),
                                 "owner lost: in_flight under epoch %" PRId64 " -> %s", op->epoch,
                                 op_state_name(next.state));
                        r = store_audit_add(s, op->id, c->now, "event", "tollgate",
                                            manual_reason_name(next.reason), detail);
                        if (r == 0)
                                c->count++;
                }
        }
        return r;
}

int store_recover(struct store *store, int64_t epoch, const struct policy_config *config,
                  tg_wall_ms now, unsigned *ret_count)
{
        struct recover_ctx *c;
        int r;

        if (!store || !config || !ret_count || epoch <= 0)
                return TG_EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return TG_ENOMEM;
        c->epoch = epoch;
        c->config = config;
        c->now = now;
        r = store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, recover_tx, c);
        if (r == 0)
                *ret_count = c->count;
        free(c);
        return r;
}
