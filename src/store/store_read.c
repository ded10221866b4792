/*
 * store_read — the reading side of the store, written once for every
 * backend: the call log, the calls and audit trail of one operation, the
 * manual queue, one state's operations, the exit's samples and the account
 * audit trail are all walked by ONE paging loop over the backend's page
 * primitive, plus stats and the samples' writes.
 *
 * Each page is its own short read transaction; callbacks run between pages,
 * outside any transaction and statement, so a callback may call back into
 * the store. A non-zero return from a callback stops the walk and is
 * returned.
 */
#include <stdlib.h>
#include <string.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "store/store_backend.h"

#define PAGE_ROWS 64 /* rows fetched per page */

/* The caller's callback, of the type its list function takes. */
union row_fn {
        store_call_fn call;
        store_op_fn op;
        store_audit_fn audit;
        store_sample_fn sample;
        store_refusal_fn refusal;
        store_account_audit_fn account_audit;
};

/* What one walk needs besides its query: the size of a row, how to hand a
 * row to the caller, and how to move the cursor past a row. */
struct walk {
        size_t row_size;
        int (*deliver)(const void *row, const union row_fn *fn, void *userdata);
        void (*advance)(struct store_page *page, const void *row);
        union row_fn fn;
        void *userdata;
};

struct page_ctx {
        const struct store_page *page;
        unsigned want, n;
        void *buf;
};

static int page_tx(struct store *s, void *ctx)
{
        struct page_ctx *c = ctx;

        c->n = 0;
        return s->ops->page(s, c->page, c->want, c->buf, &c->n);
}

static int walk(struct store *s, struct store_page *page, uint64_t limit, const struct walk *w)
{
        char *buf = calloc(PAGE_ROWS, w->row_size);
        struct page_ctx c = {.page = page, .buf = buf};
        int r = 0;

        if (!buf)
                return TG_ENOMEM;
        while (limit > 0) {
                c.want = limit < PAGE_ROWS ? (unsigned)limit : PAGE_ROWS;
                r = s->ops->tx(s, STORE_TX_READ, STORE_TX_RECHECKS, page_tx, &c);
                if (r < 0)
                        break;
                /* the callbacks run with no transaction open */
                for (unsigned i = 0; i < c.n && r == 0; i++)
                        r = w->deliver(buf + i * w->row_size, &w->fn, w->userdata);
                if (r != 0 || c.n < c.want)
                        break;
                w->advance(page, buf + (c.n - 1) * w->row_size);
                limit -= c.n;
        }
        free(buf);
        return r;
}

/* ---- rows of each kind ------------------------------------------------------------ */

static int deliver_call(const void *row, const union row_fn *fn, void *userdata)
{
        return fn->call(row, userdata);
}

static int deliver_op(const void *row, const union row_fn *fn, void *userdata)
{
        return fn->op(row, userdata);
}

static int deliver_audit(const void *row, const union row_fn *fn, void *userdata)
{
        return fn->audit(row, userdata);
}

static int deliver_sample(const void *row, const union row_fn *fn, void *userdata)
{
        return fn->sample(row, userdata);
}

static int deliver_refusal(const void *row, const union row_fn *fn, void *userdata)
{
        return fn->refusal(row, userdata);
}

static int deliver_account_audit(const void *row, const union row_fn *fn, void *userdata)
{
        return fn->account_audit(row, userdata);
}

static void after_call(struct store_page *page, const void *row)
{
        page->cur_id = ((const struct call_record *)row)->id;
}

static void after_audit(struct store_page *page, const void *row)
{
        page->cur_id = ((const struct audit_record *)row)->id;
}

static void after_account_audit(struct store_page *page, const void *row)
{
        page->cur_id = ((const struct account_audit_record *)row)->id;
}

static void after_op(struct store_page *page, const void *row)
{
        const struct op_record *op = row;

        page->cur_id = op->id;
        page->cur_at = op->accepted_at;
}

static void after_sample(struct store_page *page, const void *row)
{
        const struct exit_sample *x = row;

        page->cur_at = x->at;
        page->cur_share = x->share;
}

static void after_refusal(struct store_page *page, const void *row)
{
        page->cur_at = ((const struct refusal_second *)row)->at;
}

int store_list_account_calls(struct store *store, const char *account, int64_t since_id,
                             unsigned limit, store_call_fn fn, void *userdata)
{
        struct store_page page = {.kind = STORE_PAGE_CALLS, .cur_id = since_id};
        struct walk w = {sizeof(struct call_record), deliver_call, after_call, {0}, userdata};

        if (!store || !fn || (account && !refund_account_name_ok(account)))
                return TG_EINVAL;
        if (account)
                store_copy_text(page.account, sizeof(page.account), account);
        w.fn.call = fn;
        return walk(store, &page, limit, &w);
}

int store_list_calls(struct store *store, int64_t since_id, unsigned limit, store_call_fn fn,
                     void *userdata)
{
        return store_list_account_calls(store, NULL, since_id, limit, fn, userdata);
}

int store_list_op_calls(struct store *store, int64_t op_id, store_call_fn fn, void *userdata)
{
        struct store_page page = {.kind = STORE_PAGE_OP_CALLS, .op_id = op_id};
        struct walk w = {sizeof(struct call_record), deliver_call, after_call, {0}, userdata};

        if (!store || !fn)
                return TG_EINVAL;
        if (op_id <= 0)
                return 0;
        w.fn.call = fn;
        return walk(store, &page, UINT64_MAX, &w);
}

int store_list_audit(struct store *store, int64_t op_id, store_audit_fn fn, void *userdata)
{
        struct store_page page = {.kind = STORE_PAGE_AUDIT, .op_id = op_id};
        struct walk w = {sizeof(struct audit_record), deliver_audit, after_audit, {0}, userdata};

        if (!store || !fn)
                return TG_EINVAL;
        w.fn.audit = fn;
        return walk(store, &page, UINT64_MAX, &w);
}

int store_list_account_audit(struct store *store, const char *account, int64_t after_id,
                             unsigned limit, store_account_audit_fn fn, void *userdata)
{
        struct store_page page = {.kind = STORE_PAGE_ACCOUNT_AUDIT, .cur_id = after_id};
        struct walk w = {sizeof(struct account_audit_record),
                         deliver_account_audit,
                         after_account_audit,
                         {0},
                         userdata};

        if (!store || !fn || (account && !refund_account_name_ok(account)))
                return TG_EINVAL;
        if (account)
                store_copy_text(page.account, sizeof(page.account), account);
        w.fn.account_audit = fn;
        return walk(store, &page, limit, &w);
}

int store_list_manual_filtered(struct store *store, int64_t after_id,
                               const struct store_manual_filter *filter, unsigned limit,
                               store_op_fn fn, void *userdata)
{
        struct store_page page = {.kind = STORE_PAGE_MANUAL,
                                  .after_id = after_id,
                                  .cur_id = INT64_MIN,
                                  .cur_at = INT64_MIN};
        struct walk w = {sizeof(struct op_record), deliver_op, after_op, {0}, userdata};

        if (!store || !fn || !filter || (unsigned)filter->reason >= MANUAL_REASON_COUNT ||
            (filter->account && !refund_account_name_ok(filter->account)))
                return TG_EINVAL;
        if (filter->account)
                store_copy_text(page.account, sizeof(page.account), filter->account);
        switch (filter->who) {
        case STORE_ASSIGNEE_IS:
                if (!store_text_ok(filter->assignee, TG_TEXT_MAX - 1))
                        return TG_EINVAL;
                store_copy_text(page.assignee, sizeof(page.assignee), filter->assignee);
                break;
        case STORE_ASSIGNEE_ANY:
        case STORE_ASSIGNEE_NONE:
                break;
        default:
                return TG_EINVAL;
        }
        page.reason = filter->reason;
        page.who = filter->who;
        w.fn.op = fn;
        return walk(store, &page, limit, &w);
}

int store_list_manual(struct store *store, int64_t after_id, enum manual_reason reason,
                      unsigned limit, store_op_fn fn, void *userdata)
{
        struct store_manual_filter f = {.reason = reason, .who = STORE_ASSIGNEE_ANY};

        return store_list_manual_filtered(store, after_id, &f, limit, fn, userdata);
}

int store_list_state(struct store *store, enum op_state state, int64_t after_id, unsigned limit,
                     store_op_fn fn, void *userdata)
{
        struct store_page page = {.kind = STORE_PAGE_STATE, .state = state, .cur_id = after_id};
        struct walk w = {sizeof(struct op_record), deliver_op, after_op, {0}, userdata};

        if (!store || !fn || (unsigned)state >= OP_STATE_COUNT)
                return TG_EINVAL;
        w.fn.op = fn;
        return walk(store, &page, limit, &w);
}

int store_list_samples(struct store *store, tg_wall_ms since, unsigned limit, store_sample_fn fn,
                       void *userdata)
{
        /* the first page: at > since (a share past every share) */
        struct store_page page = {
            .kind = STORE_PAGE_SAMPLES, .cur_at = since, .cur_share = INT64_MAX};
        struct walk w = {sizeof(struct exit_sample), deliver_sample, after_sample, {0}, userdata};

        if (!store || !fn)
                return TG_EINVAL;
        w.fn.sample = fn;
        return walk(store, &page, limit, &w);
}

int store_list_refusals(struct store *store, tg_wall_ms since, unsigned limit, store_refusal_fn fn,
                        void *userdata)
{
        struct store_page page = {.kind = STORE_PAGE_REFUSALS, .cur_at = since};
        struct walk w = {
            sizeof(struct refusal_second), deliver_refusal, after_refusal, {0}, userdata};

        if (!store || !fn)
                return TG_EINVAL;
        w.fn.refusal = fn;
        return walk(store, &page, limit, &w);
}

/* ---- stats and samples -------------------------------------------------------------- */

static int stats_tx(struct store *s, void *ctx)
{
        return s->ops->stats(s, ctx);
}

int store_stats(struct store *store, struct store_stats *ret_stats)
{
        struct store_stats st;
        int r;

        if (!store || !ret_stats)
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, stats_tx, &st);
        if (r == 0)
                *ret_stats = st;
        return r;
}

struct backlog_ctx {
        const char *account;
        uint64_t by_state[OP_STATE_COUNT];
};

static int backlog_tx(struct store *s, void *ctx)
{
        struct backlog_ctx *c = ctx;

        memset(c->by_state, 0, sizeof(c->by_state));
        return s->ops->backlog(s, c->account, c->by_state);
}

int store_account_backlog(struct store *store, const char *account,
                          uint64_t ret_by_state[OP_STATE_COUNT])
{
        struct backlog_ctx c = {.account = account};
        int r;

        if (!store || !ret_by_state || !account || !refund_account_name_ok(account))
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, backlog_tx, &c);
        if (r == 0)
                memcpy(ret_by_state, c.by_state, sizeof(c.by_state));
        return r;
}

struct provider_pending_ctx {
        const char *account;
        uint64_t n;
};

static int provider_pending_tx(struct store *s, void *ctx)
{
        struct provider_pending_ctx *c = ctx;

        c->n = 0;
        return s->ops->provider_pending(s, c->account, &c->n);
}

int store_provider_pending(struct store *store, const char *account, uint64_t *ret_n)
{
        struct provider_pending_ctx c = {.account = account};
        int r;

        if (!store || !ret_n || !account || !refund_account_name_ok(account))
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, provider_pending_tx, &c);
        if (r == 0)
                *ret_n = c.n;
        return r;
}

struct find_refund_ctx {
        const char *account, *refund_id;
        struct op_record op;
};

static int find_refund_tx(struct store *s, void *ctx)
{
        struct find_refund_ctx *c = ctx;
        int64_t ids[2];
        unsigned n = 0;
        int r = s->ops->op_find_refund(s, c->account, c->refund_id, ids, &n);

        if (r < 0)
                return r;
        if (n == 0)
                return TG_ENOTFOUND;
        if (n > 1)
                return TG_ECONFLICT;
        return s->ops->op_get(s, NULL, ids[0], false, &c->op);
}

int store_find_by_refund_id(struct store *store, const char *account, const char *refund_id,
                            struct op_record *ret_op)
{
        struct find_refund_ctx c = {.account = account, .refund_id = refund_id};
        int r;

        if (!store || !ret_op || !account || !refund_account_name_ok(account) || !refund_id ||
            !refund_id[0] || !store_text_ok(refund_id, sizeof(ret_op->refund_id) - 1))
                return TG_EINVAL;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, find_refund_tx, &c);
        if (r == 0)
                *ret_op = c.op;
        return r;
}

/* The backlog is counted again for every sample while it is small; a
 * count walks an index entry per row, so a larger backlog is counted again
 * only after one second per BACKLOG_ROWS_PER_S rows (BACKLOG_STALE_MAX_NS
 * at most), and the samples in between carry the last counts: a million
 * pending are counted every 50 s, and counting walks about 20,000 entries
 * a second whatever the backlog (about a millisecond of SQLite's time). */
#define BACKLOG_ROWS_PER_S   20000
#define BACKLOG_STALE_MAX_NS (60 * TG_NS_PER_S)

struct sample_put_ctx {
        struct exit_sample *sample;
        tg_wall_ms keep_after;
        bool count;
};

static int sample_put_tx(struct store *s, void *ctx)
{
        static const enum op_state backlog[] = {OP_PENDING, OP_IN_FLIGHT, OP_RETRY_WAIT, OP_UNKNOWN,
                                                OP_MANUAL};
        struct sample_put_ctx *c = ctx;

        if (c->count) {
                /* the handle's account's operations: a sample is its exit's */
                uint64_t by_state[OP_STATE_COUNT] = {0};
                int r = s->ops->backlog(s, s->account, by_state);
                if (r < 0)
                        return r;
                memset(c->sample->backlog, 0, sizeof(c->sample->backlog));
                for (size_t i = 0; i < sizeof(backlog) / sizeof(backlog[0]); i++)
                        c->sample->backlog[backlog[i]] = (unsigned)by_state[backlog[i]];
        }
        return s->ops->sample_put(s, c->sample, c->keep_after);
}

/* When the backlog of `rows` operations is counted next, counted at now. */
static tg_mono_ns next_count(uint64_t rows, tg_mono_ns now)
{
        if (rows < BACKLOG_ROWS_PER_S)
                return now;
        if (rows >= (uint64_t)BACKLOG_ROWS_PER_S * (BACKLOG_STALE_MAX_NS / TG_NS_PER_S))
                return now + BACKLOG_STALE_MAX_NS;
        return now + (tg_mono_ns)(rows * (uint64_t)TG_NS_PER_S / BACKLOG_ROWS_PER_S);
}

int store_sample_put(struct store *store, const struct exit_sample *sample, tg_wall_ms keep_after,
                     tg_mono_ns now)
{
        struct sample_put_ctx c = {.keep_after = keep_after};
        int r;

        if (!store || !sample || !store_buf_ok(sample->figures, sizeof(sample->figures)))
                return TG_EINVAL;
        c.sample = malloc(sizeof(*c.sample));
        if (!c.sample)
                return TG_ENOMEM;
        *c.sample = *sample;
        c.count = !store->backlog_known || now >= store->backlog_next_count;
        if (!c.count)
                memcpy(c.sample->backlog, store->backlog, sizeof(store->backlog));
        /* idempotent: a re-run replaces the same row and prunes nothing new;
         * figures, not history: no sync of its own (STORE_TX_OUTCOME) */
        r = store->ops->tx(store, STORE_TX_OUTCOME, STORE_TX_RECHECKS, sample_put_tx, &c);
        if (r == 0 && c.count) {
                uint64_t rows = 0;
                for (int i = 0; i < OP_STATE_COUNT; i++)
                        rows += c.sample->backlog[i];
                memcpy(store->backlog, c.sample->backlog, sizeof(store->backlog));
                store->backlog_known = true;
                store->backlog_next_count = next_count(rows, now);
        }
        free(c.sample);
        return r;
}

static int sample_last_tx(struct store *s, void *ctx)
{
        return s->ops->sample_last(s, ctx);
}

int store_last_sample(struct store *store, struct exit_sample *ret_sample)
{
        struct exit_sample *x;
        int r;

        if (!store || !ret_sample)
                return TG_EINVAL;
        x = malloc(sizeof(*x)); /* a sample carries 4 KiB of figures */
        if (!x)
                return TG_ENOMEM;
        r = store->ops->tx(store, STORE_TX_READ, STORE_TX_RECHECKS, sample_last_tx, x);
        if (r == 0)
                *ret_sample = *x;
        free(x);
        return r;
}

struct refusals_ctx {
        tg_wall_ms second, keep_after;
        unsigned n;
};

static int refusals_add_tx(struct store *s, void *ctx)
{
        struct refusals_ctx *c = ctx;

        return s->ops->refusals_add(s, c->second, c->n, c->keep_after);
}

int store_refusals_add(struct store *store, tg_wall_ms second, unsigned n, tg_wall_ms keep_after)
{
        struct refusals_ctx c = {.second = second, .keep_after = keep_after, .n = n};

        if (!store || second < 0 || second % 1000 != 0)
                return TG_EINVAL;
        if (n == 0)
                return 0;
        /* Not idempotent (it adds): a COMMIT whose outcome is unknown is not
         * run again, so a count may be short by one batch, never doubled. */
        return store->ops->tx(store, STORE_TX_WRITE, 0, refusals_add_tx, &c);
}
