/*
 * store_life — the store's lifecycle, written once over the backend
 * primitives: the counters that make the final states cheap to read
 * (store_op_put), retention (store_prune), health (store_ping, and the
 * promises a server does not keep: store_unkept) and backups
 * (store_backup). See store.h, and docs/design.md "Retention" for why a
 * prune may delete what the triggers otherwise refuse.
 *
 * Invariants:
 *   - a counter moves in the same transaction as the change it counts, so
 *     that it never drifts from the rows (a rolled-back transaction takes
 *     both back);
 *   - store_prune() deletes only final operations whose updated_at is before
 *     the cutoff, without an audit row, with all their calls, in short
 *     transactions of a bounded batch; the backend's triggers check the same
 *     (a permit row that exists only inside the prune's transaction), so a
 *     DELETE from anywhere else is still refused;
 *   - the same prune deletes events (store_events.h) delivered before the
 *     same cutoff (delivered_at), in batches of the same size counted
 *     against the same max_batches, after the operations: never a due or
 *     parked event, never the newest (an event's id is never handed out
 *     again);
 *   - nothing here deletes an audit row.
 */
#include <stdlib.h>
#include <string.h>

#include "core/policy.h"
#include "core/tg_error.h"
#include "store/store_backend.h"

#define PRUNE_BATCH_MAX 10000

int store_state_counter(enum op_state state)
{
        switch (state) {
        case OP_SUCCEEDED:
                return STORE_COUNTER_SUCCEEDED;
        case OP_REJECTED:
                return STORE_COUNTER_REJECTED;
        default:
                return -1;
        }
}

int store_op_put(struct store *s, const struct op_record *before, const struct op_record *after)
{
        int r = s->ops->op_put(s, after);
        int from = store_state_counter(before->state), to = store_state_counter(after->state);

        if (r < 0 || before->state == after->state)
                return r;
        if (from >= 0)
                r = s->ops->counter_add(s, (enum store_counter)from, -1);
        if (r == 0 && to >= 0)
                r = s->ops->counter_add(s, (enum store_counter)to, 1);
        /* the outbox: the event in the same transaction as the change it
         * announces (store_events.h), after the counters (one lock order) */
        if (r == 0 && store_event_worthy(before->state, after->state))
                r = store_event_add(s, before, after);
        return r;
}

/* ---- retention ------------------------------------------------------------- */

struct prune_ctx {
        enum op_state state;
        tg_wall_ms before;
        unsigned batch;
        int64_t after_at, after_id; /* in: the cursor; out: moved past the batch */
        int64_t *ids, *ats;
        unsigned n;      /* out: operations deleted */
        uint64_t ncalls; /* out: calls deleted */
};

static int prune_tx(struct store *s, void *arg)
{
        struct prune_ctx *c = arg;
        int counter = store_state_counter(c->state);
        uint64_t calls = 0;
        unsigned n = 0;
        int r;

        c->n = 0;
        c->ncalls = 0;
        r = s->ops->prune_pick(s, c->state, c->before, c->after_at, c->after_id, c->batch, c->ids,
                               c->ats, &n);
        if (r < 0 || n == 0)
                return r;
        r = s->ops->prune_delete(s, c->ids, n, c->before, &calls);
        /* counters in one fixed order, after every row lock (no deadlock
         * with a settle, which locks its operation, then its counter) */
        if (r == 0)
                r = s->ops->counter_add(s, (enum store_counter)counter, -(int64_t)n);
        if (r == 0)
                r = s->ops->counter_add(s, STORE_COUNTER_PRUNED_OPERATIONS, (int64_t)n);
        if (r == 0 && calls > 0)
                r = s->ops->counter_add(s, STORE_COUNTER_PRUNED_CALLS, (int64_t)calls);
        if (r == 0) {
                c->n = n;
                c->ncalls = calls;
        }
        return r;
}

struct event_prune_ctx {
        tg_wall_ms before;
        unsigned batch;
        unsigned n; /* out: events deleted */
};

static int event_prune_tx(struct store *s, void *arg)
{
        struct event_prune_ctx *c = arg;
        unsigned n = 0;
        int r = s->ops->event_prune(s, c->before, c->batch, &n);

        c->n = r == 0 ? n : 0;
        return r;
}

/* One batch of the cursor's phase: the final operations of one state
 * (phases 0 and 1), then the delivered events (phase 2). *ret_n: rows
 * deleted (fewer than batch: the phase is done). */
static int prune_batch(struct store *store, tg_wall_ms before, unsigned batch, int64_t *buf,
                       struct store_prune_cursor *cursor, struct store_prune_result *res,
                       unsigned *ret_n)
{
        static const enum op_state finals[2] = {OP_SUCCEEDED, OP_REJECTED};
        unsigned k = cursor->phase;
        int r;

        if (k == STORE_PRUNE_EVENTS) {
                struct event_prune_ctx e = {.before = before, .batch = batch};
                r = store->ops->tx(store, STORE_TX_WRITE, 0, event_prune_tx, &e);
                if (r == 0) {
                        res->events += e.n;
                        *ret_n = e.n;
                }
                return r;
        }
        struct prune_ctx c = {.state = finals[k],
                              .before = before,
                              .batch = batch,
                              .ids = buf,
                              .ats = buf + batch,
                              .after_at = cursor->at[k],
                              .after_id = cursor->id[k]};
        r = store->ops->tx(store, STORE_TX_WRITE, 0, prune_tx, &c);
        if (r < 0)
                return r;
        res->operations += c.n;
        res->calls += c.ncalls;
        if (c.n > 0) {
                cursor->at[k] = c.ats[c.n - 1];
                cursor->id[k] = c.ids[c.n - 1];
        }
        *ret_n = c.n;
        return 0;
}

int store_prune(struct store *store, tg_wall_ms before, unsigned batch, unsigned max_batches,
                struct store_prune_cursor *cursor, struct store_prune_result *ret)
{
        struct store_prune_result res = {0};
        unsigned done = 0, n = 0;
        int64_t *buf;
        int r = 0;

        if (!store || !cursor || !ret || batch == 0 || batch > PRUNE_BATCH_MAX ||
            cursor->phase > STORE_PRUNE_EVENTS)
                return TG_EINVAL;
        buf = calloc(2 * (size_t)batch, sizeof(*buf));
        if (!buf)
                return TG_ENOMEM;
        /* a call goes on from the phase where the last one stopped, so that
         * one batch a call (the daemon's housekeeping) reaches every phase */
        while (cursor->phase <= STORE_PRUNE_EVENTS) {
                if (max_batches > 0 && done >= max_batches) {
                        res.more = true;
                        break;
                }
                r = prune_batch(store, before, batch, buf, cursor, &res, &n);
                if (r < 0)
                        break;
                done++;
                if (n < batch)
                        cursor->phase++;
        }
        if (cursor->phase > STORE_PRUNE_EVENTS)
                cursor->phase = 0; /* every phase done: the next call starts over */
        free(buf);
        *ret = res; /* what was done, on failure too */
        return r;
}

/* ---- health and backups ----------------------------------------------------------- */

static int ping_tx(struct store *s, void *ctx)
{
        int64_t epoch = 0;

        (void)ctx;
        return s->ops->epoch_read(s, &epoch);
}

int store_ping(struct store *store)
{
        int r;

        if (!store)
                return TG_EINVAL;
        if (store->ops->moved && store->ops->moved(store))
                return TG_EIO;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, ping_tx, NULL);
        return r;
}

const char *store_unkept(const struct store *store)
{
        return store && store->unkept[0] ? store->unkept : NULL;
}

int store_backup(struct store *store, const char *path)
{
        if (!store || !path || !path[0])
                return TG_EINVAL;
        if (!store->ops->backup)
                return TG_EUNSUPPORTED;
        return store->ops->backup(store, path);
}
