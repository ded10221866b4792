/*
 * store_events — the events' outbox, written once for every backend over
 * the primitives of store_backend.h (see store_events.h). The one writer is
 * store_event_add(), called by store_op_put(), which every change of an
 * operation's state goes through: no caller of the store writes an event
 * itself, so a new transition is announced without touching this file.
 */
#include <stdio.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "store/store_backend.h"
#include "store/store_events.h"

#define EVENTS_PAGE_MAX 1000

bool store_event_worthy(enum op_state before, enum op_state after)
{
        if (before == after)
                return false;
        /* a final state, a case for people, and a case leaving people's
         * hands (a re-send); policy_resolve() is manual -> final */
        return policy_state_is_final(after) || after == OP_MANUAL || before == OP_MANUAL;
}

const char *store_delivery_name(enum store_delivery d)
{
        switch (d) {
        case STORE_DELIVERY_DUE:
                return "due";
        case STORE_DELIVERY_DELIVERED:
                return "delivered";
        case STORE_DELIVERY_PARKED:
                return "parked";
        default:
                return "?";
        }
}

const char *store_event_filter_sql(enum store_event_filter filter)
{
        /* the numbers are enum store_delivery's, as stored */
        switch (filter) {
        case STORE_EVENTS_DUE:
                return "delivery = 0";
        case STORE_EVENTS_PARKED:
                return "delivery = 2";
        case STORE_EVENTS_UNDELIVERED:
                return "delivery IN (0, 2)";
        case STORE_EVENTS_DUE_OWN_URL:
                return "delivery = 0 AND notify_url <> ''";
        case STORE_EVENTS_FAILED:
                return "(delivery = 2 OR (delivery = 0 AND attempts > 0))";
        case STORE_EVENTS_ALL:
        default:
                return "1 = 1";
        }
}

int store_event_add(struct store *s, const struct op_record *before, const struct op_record *after)
{
        struct store_event ev;

        memset(&ev, 0, sizeof(ev));
        ev.op_id = after->id;
        store_copy_text(ev.operation_id, sizeof(ev.operation_id), after->req.operation_id);
        ev.at = after->updated_at;
        ev.state = after->state;
        ev.from_state = before->state;
        ev.reason = after->reason;
        store_copy_text(ev.refund_id, sizeof(ev.refund_id), after->refund_id);
        ev.amount = after->req.amount;
        store_copy_text(ev.currency, sizeof(ev.currency), after->req.currency);
        store_copy_text(ev.account, sizeof(ev.account), store_req_account(&after->req));
        store_copy_text(ev.notify_url, sizeof(ev.notify_url), after->req.notify_url);
        store_copy_text(ev.submitted_by, sizeof(ev.submitted_by), after->req.submitted_by);
        ev.delivery = STORE_DELIVERY_DUE;
        return s->ops->event_insert(s, &ev);
}

struct events_ctx {
        int64_t after_id;
        enum store_event_filter filter;
        unsigned want, n;
        struct store_event *buf;
        const struct store_event *put;
        int64_t id;
        tg_wall_ms now;
        const char *account; /* NULL: every account's */
        int64_t op_id;       /* 0: every operation's */
        const char *owner;   /* NULL: whoever submitted it */
        const char *principal;
};

static int list_tx(struct store *s, void *arg)
{
        struct events_ctx *c = arg;

        c->n = 0;
        return s->ops->event_page(s, c->after_id, c->filter, c->account, c->op_id, c->owner,
                                  c->want, c->buf, &c->n);
}

int store_events_list(struct store *store, int64_t after_id, enum store_event_filter filter,
                      unsigned want, struct store_event *buf, unsigned *ret_n)
{
        struct events_ctx c = {
            .after_id = after_id < 0 ? 0 : after_id, .filter = filter, .buf = buf};
        int r;

        if (!store || !buf || !ret_n || want == 0 || want > EVENTS_PAGE_MAX ||
            (unsigned)filter > STORE_EVENTS_FAILED)
                return TG_EINVAL;
        c.want = want;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, list_tx, &c);
        if (r == 0)
                *ret_n = c.n;
        return r;
}

int store_events_list_owned(struct store *store, const char *owner, int64_t after_id,
                            enum store_event_filter filter, unsigned want, struct store_event *buf,
                            unsigned *ret_n)
{
        struct events_ctx c = {
            .after_id = after_id < 0 ? 0 : after_id, .filter = filter, .buf = buf, .owner = owner};
        int r;

        if (!store || !owner || !owner[0] || strlen(owner) > TG_SUBMITTER_MAX || !buf || !ret_n ||
            want == 0 || want > EVENTS_PAGE_MAX || (unsigned)filter > STORE_EVENTS_FAILED)
                return TG_EINVAL;
        c.want = want;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, list_tx, &c);
        if (r == 0)
                *ret_n = c.n;
        return r;
}

int store_events_due(struct store *store, const char *account, bool own_url_only, unsigned want,
                     struct store_event *buf, unsigned *ret_n)
{
        struct events_ctx c = {.filter = own_url_only ? STORE_EVENTS_DUE_OWN_URL : STORE_EVENTS_DUE,
                               .buf = buf,
                               .account = account};
        int r;

        if (!store || !account || !refund_account_name_ok(account) || !buf || !ret_n || want == 0 ||
            want > EVENTS_PAGE_MAX)
                return TG_EINVAL;
        c.want = want;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, list_tx, &c);
        if (r == 0)
                *ret_n = c.n;
        return r;
}

int store_events_of_op(struct store *store, int64_t op_id, unsigned want, struct store_event *buf,
                       unsigned *ret_n)
{
        struct events_ctx c = {.filter = STORE_EVENTS_ALL, .buf = buf, .op_id = op_id};
        int r;

        if (!store || op_id <= 0 || !buf || !ret_n || want == 0 || want > EVENTS_PAGE_MAX)
                return TG_EINVAL;
        c.want = want;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, list_tx, &c);
        if (r == 0)
                *ret_n = c.n;
        return r;
}

int store_event_get(struct store *store, int64_t id, struct store_event *ret_event)
{
        struct store_event ev;
        unsigned n = 0;
        int r;

        if (!store || !ret_event || id <= 0)
                return TG_EINVAL;
        r = store_events_list(store, id - 1, STORE_EVENTS_ALL, 1, &ev, &n);
        if (r == 0 && (n == 0 || ev.id != id))
                r = TG_ENOTFOUND;
        if (r == 0)
                *ret_event = ev;
        return r;
}

static int put_tx(struct store *s, void *arg)
{
        struct events_ctx *c = arg;

        return s->ops->event_delivery_put(s, c->put);
}

int store_event_delivery_put(struct store *store, const struct store_event *ev)
{
        struct events_ctx c = {.put = ev};

        if (!store || !ev || ev->id <= 0 || !store_buf_ok(ev->last_error, TG_TEXT_MAX) ||
            (unsigned)ev->delivery > STORE_DELIVERY_PARKED)
                return TG_EINVAL;
        /* the same columns written again after an unknown COMMIT: harmless */
        return store->ops->tx(store, STORE_TX_OUTCOME, STORE_TX_RECHECKS, put_tx, &c);
}

static int redeliver_tx(struct store *s, void *arg)
{
        struct events_ctx *c = arg;
        struct store_event ev;
        unsigned n = 0;
        struct account_audit_record a;
        int r = s->ops->event_page(s, c->id - 1, STORE_EVENTS_ALL, NULL, 0, NULL, 1, &ev, &n);

        if (r == 0 && (n == 0 || ev.id != c->id))
                r = TG_ENOTFOUND;
        if (r < 0)
                return r;
        /* the account's audit trail, not the operation's: it has no foreign
         * key (a pruned operation's event may still be re-delivered) and
         * keeps no operation from a prune */
        memset(&a, 0, sizeof(a));
        store_copy_text(a.account, sizeof(a.account), ev.account);
        a.at = c->now;
        store_copy_text(a.action, sizeof(a.action), "event_redeliver");
        store_copy_text(a.principal, sizeof(a.principal), c->principal);
        snprintf(a.detail, sizeof(a.detail),
                 "{\"event_id\":%lld,\"operation_id\":\"%s\",\"delivery\":\"%s\","
                 "\"attempts\":%u}",
                 (long long)ev.id, ev.operation_id, store_delivery_name(ev.delivery), ev.attempts);
        ev.delivery = STORE_DELIVERY_DUE;
        ev.attempts = 0;
        ev.next_at = c->now;
        ev.last_error[0] = '\0';
        /* the change and its audit row in this one transaction */
        r = s->ops->event_delivery_put(s, &ev);
        if (r == 0)
                r = s->ops->account_audit_insert(s, &a);
        return r;
}

int store_event_redeliver(struct store *store, int64_t id, const char *principal, tg_wall_ms now)
{
        struct events_ctx c = {.id = id, .now = now, .principal = principal};

        if (!store || id <= 0 || !principal || !principal[0] || strlen(principal) >= TG_TEXT_MAX)
                return TG_EINVAL;
        return store->ops->tx(store, STORE_TX_WRITE, STORE_TX_RECHECKS, redeliver_tx, &c);
}
