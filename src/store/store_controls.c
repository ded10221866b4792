/*
 * store_controls — the run-time account controls of store.h (issue 26 §5),
 * written once for every backend over its controls primitives: what is in
 * force per account, and the change with its audit row.
 *
 * Invariants:
 *   - a change and its account audit row are one write transaction: the
 *     controls are written first, the audit row second, and a failure of
 *     either rolls both back, so neither is ever in the store alone;
 *   - the change reads what it replaces with the account's row held
 *     (controls_get with lock), so concurrent changes of one account are
 *     serialized and each audit row's "from" is what the one before it set;
 *   - bad input is refused before any transaction opens: nothing stored;
 *   - the account audit trail is append-only (the backends' triggers).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "store/store_backend.h"

#define ACTION_MAX ((size_t)sizeof(((struct account_audit_record *)0)->action) - 1)

/* ---- reading ------------------------------------------------------------------- */

struct get_ctx {
        const char *account;
        struct account_controls c;
};

static int get_tx(struct store *s, void *ctx)
{
        struct get_ctx *g = ctx;
        int r;

        memset(&g->c, 0, sizeof(g->c));
        r = s->ops->controls_get(s, g->account, false, &g->c);
        if (r == TG_ENOTFOUND) {
                memset(&g->c, 0, sizeof(g->c));
                r = 0;
        }
        return r;
}

int store_controls_get(struct store *store, const char *account,
                       struct account_controls *ret_controls)
{
        struct get_ctx g = {.account = account};
        int r;

        if (!store || !ret_controls || !refund_account_name_ok(account))
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, get_tx, &g);
        if (r == 0)
                *ret_controls = g.c;
        return r;
}

/* ---- changing ------------------------------------------------------------------ */

/* The shortest text that reads back as v (JSON has no NaN or infinity, and
 * they were refused before). */
static void rate_text(double v, char *dst, size_t size)
{
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(dst, size, "%.*g", prec, v);
                if (strtod(dst, NULL) == v)
                        return;
        }
}

static int controls_json(const struct account_controls *c, char *dst, size_t size)
{
        char rate[32];
        int n;

        rate_text(c->starts_per_second, rate, sizeof(rate));
        n = snprintf(dst, size, "{\"starts_per_second\":%s,\"max_in_flight\":%u,\"paused\":%s}",
                     rate, c->max_in_flight, c->paused ? "true" : "false");
        return n < 0 || (size_t)n >= size ? TG_EFULL : 0;
}

/* {"from":{...},"to":{...}}: at most 2 x 85 bytes of objects, which
 * TG_TEXT_MAX holds. */
static int change_detail(const struct account_controls *from, const struct account_controls *to,
                         char *dst, size_t size)
{
        char a[TG_TEXT_MAX / 2], b[TG_TEXT_MAX / 2];
        int n;

        if (controls_json(from, a, sizeof(a)) < 0 || controls_json(to, b, sizeof(b)) < 0)
                return TG_EFULL;
        n = snprintf(dst, size, "{\"from\":%s,\"to\":%s}", a, b);
        return n < 0 || (size_t)n >= size ? TG_EFULL : 0;
}

struct set_ctx {
        const char *account;
        const struct account_controls *next;
        const char *action, *principal, *reason;
        tg_wall_ms now;
        struct account_controls prev; /* out */
};

static int set_tx(struct store *s, void *ctx)
{
        struct set_ctx *c = ctx;
        struct account_controls cur;
        struct account_audit_record a;
        int r;

        memset(&c->prev, 0, sizeof(c->prev));
        /* the account's row held to the end: concurrent changes queue here */
        r = s->ops->controls_get(s, c->account, true, &c->prev);
        if (r == TG_ENOTFOUND) {
                memset(&c->prev, 0, sizeof(c->prev));
                r = 0;
        }
        if (r < 0)
                return r;
        memset(&cur, 0, sizeof(cur));
        cur.starts_per_second = c->next->starts_per_second;
        cur.max_in_flight = c->next->max_in_flight;
        cur.paused = c->next->paused;
        cur.changed_at = c->now;
        store_copy_text(cur.changed_by, sizeof(cur.changed_by), c->principal);

        memset(&a, 0, sizeof(a));
        store_copy_text(a.account, sizeof(a.account), c->account);
        a.at = c->now;
        store_copy_text(a.action, sizeof(a.action), c->action);
        store_copy_text(a.principal, sizeof(a.principal), c->principal);
        store_copy_text(a.reason, sizeof(a.reason), c->reason);
        r = change_detail(&c->prev, &cur, a.detail, sizeof(a.detail));
        /* the change, then its audit row, in this one transaction: a failure
         * of the second rolls the first back */
        if (r == 0)
                r = s->ops->controls_put(s, c->account, &cur);
        if (r == 0)
                r = s->ops->account_audit_insert(s, &a);
        return r;
}

static bool controls_ok(const struct account_controls *c)
{
        return c && isfinite(c->starts_per_second) && c->starts_per_second >= 0;
}

int store_controls_set(struct store *store, const char *account,
                       const struct account_controls *next, const char *action,
                       const char *principal, const char *reason, tg_wall_ms now,
                       struct account_controls *ret_prev)
{
        struct set_ctx c = {.account = account,
                            .next = next,
                            .action = action,
                            .principal = principal,
                            .reason = reason ? reason : "",
                            .now = now};
        int r;

        if (!store || !refund_account_name_ok(account) || !controls_ok(next) ||
            !store_text_ok(action, ACTION_MAX) || !store_text_ok(principal, TG_TEXT_MAX - 1) ||
            !store_buf_ok(c.reason, TG_TEXT_MAX))
                return TG_EINVAL;
        /* Not re-run after a COMMIT whose answer was lost (it would append
         * a second audit row): that is TG_EIO, and store_controls_get() says
         * whether the change is in force. Commit before reply. */
        r = store->ops->tx(store, STORE_TX_WRITE, 0, set_tx, &c);
        if (r == 0 && ret_prev)
                *ret_prev = c.prev;
        return r;
}
