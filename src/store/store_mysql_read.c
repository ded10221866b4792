/*
 * store_mysql_read — the MariaDB backend's reading side and the operator's
 * actions: call lists, stats, the manual list, the audit log, operator
 * re-send and resolve, external settles, and the exit's per-second samples.
 *
 * Each page is its own short transaction; list callbacks run between pages,
 * outside any transaction, so a callback may call back into the store. Audit
 * rows are only ever inserted. ret_* outputs are written only on success.
 */
#ifdef TG_HAVE_MARIADB /* the whole file: CMake defines it with libmariadb */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/mysql_int.h"

#define PAGE_ROWS 64

static int read_audit(MYSQL_RES *res, MYSQL_ROW row, struct audit_record *ret_audit)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        struct audit_record a;
        bool ok = lens != NULL && mysql_num_fields(res) == AUDIT_NCOLS;

        if (!ok)
                return TG_ESTORE;
        memset(&a, 0, sizeof(a));
        a.id = store_mysql_col_i64(row, 0, &ok);
        a.op_id = store_mysql_col_i64(row, 1, &ok);
        a.at = store_mysql_col_i64(row, 2, &ok);
        store_mysql_col_copy(row, lens, 3, a.action, sizeof(a.action));
        store_mysql_col_copy(row, lens, 4, a.operator_name, sizeof(a.operator_name));
        store_mysql_col_copy(row, lens, 5, a.reason, sizeof(a.reason));
        store_mysql_col_copy(row, lens, 6, a.detail, sizeof(a.detail));
        if (!ok)
                return TG_ESTORE;
        *ret_audit = a;
        return 0;
}

/* ---- reading: page by page, callbacks outside any transaction ------------------- */

struct calls_page {
        int64_t op_id; /* 0: all calls */
        int64_t since;
        int want;
        int n;
        struct call_record *buf;
};

static int calls_page_tx(struct mysql_store *s, void *ctx)
{
        struct calls_page *p = ctx;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r;

        p->n = 0;
        if (p->op_id > 0)
                r = store_mysql_query(s, &res,
                                      "SELECT " CALL_COLS
                                      " FROM calls WHERE op_id = %I AND id > %I "
                                      "ORDER BY id LIMIT %I",
                                      p->op_id, p->since, (int64_t)p->want);
        else
                r = store_mysql_query(
                    s, &res, "SELECT " CALL_COLS " FROM calls WHERE id > %I ORDER BY id LIMIT %I",
                    p->since, (int64_t)p->want);
        if (r < 0)
                return r;
        while (r == 0 && p->n < p->want) {
                row = mysql_fetch_row(res);
                if (!row)
                        break;
                r = store_mysql_read_call(res, row, &p->buf[p->n++]);
        }
        mysql_free_result(res);
        return r;
}

static int walk_calls(struct mysql_store *s, int64_t op_id, int64_t since_id, uint64_t limit,
                      store_call_fn fn, void *userdata)
{
        struct calls_page p = {.op_id = op_id, .since = since_id};
        int r = 0;

        p.buf = calloc(PAGE_ROWS, sizeof(*p.buf));
        if (!p.buf)
                return TG_ENOMEM;
        while (limit > 0) {
                p.want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                r = store_mysql_run_tx(s, calls_page_tx, &p, TX_RECHECKS);
                if (r < 0)
                        break;
                for (int i = 0; i < p.n && r == 0; i++)
                        r = fn(&p.buf[i], userdata);
                if (r != 0 || p.n < p.want)
                        break;
                p.since = p.buf[p.n - 1].id;
                limit -= (uint64_t)p.n;
        }
        free(p.buf);
        return r;
}

int store_mysql_list_calls(struct store *store, int64_t since_id, unsigned limit, store_call_fn fn,
                           void *userdata)
{
        return walk_calls(M(store), 0, since_id, limit, fn, userdata);
}

int store_mysql_list_op_calls(struct store *store, int64_t op_id, store_call_fn fn, void *userdata)
{
        if (op_id <= 0)
                return 0;
        return walk_calls(M(store), op_id, 0, UINT64_MAX, fn, userdata);
}

static int stats_tx(struct mysql_store *s, void *ctx)
{
        struct store_stats *st = ctx;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int64_t v = 0;
        bool null = false;
        int r;

        memset(st, 0, sizeof(*st));
        st->oldest_open_accepted_at = TG_WALL_NEVER;
        r = store_mysql_query(s, &res, "SELECT state, COUNT(*) FROM operations GROUP BY state");
        if (r < 0)
                return r;
        while (r == 0) {
                enum op_state state;
                int64_t n = 0;

                row = mysql_fetch_row(res);
                if (!row)
                        break;
                if (store_state_parse(store_mysql_col_text(row, 0), &state) < 0 ||
                    !store_mysql_parse_i64(row[1], &n))
                        r = TG_ESTORE;
                else
                        st->by_state[state] = (uint64_t)n;
        }
        mysql_free_result(res);
        if (r == 0)
                /* one index probe per open state rather than a scan of them all */
                r = store_mysql_query(
                    s, &res,
                    "SELECT MIN(m) FROM ("
                    "SELECT MIN(accepted_at) AS m FROM operations WHERE state = 'pending' "
                    "UNION ALL SELECT MIN(accepted_at) FROM operations "
                    "WHERE state = 'in_flight' "
                    "UNION ALL SELECT MIN(accepted_at) FROM operations "
                    "WHERE state = 'retry_wait' "
                    "UNION ALL SELECT MIN(accepted_at) FROM operations "
                    "WHERE state = 'unknown' "
                    "UNION ALL SELECT MIN(accepted_at) FROM operations "
                    "WHERE state = 'manual') AS o");
        if (r == 0)
                r = store_mysql_one_i64(res, &v, &null);
        if (r == 0 && !null)
                st->oldest_open_accepted_at = v;
        /* InnoDB does not reuse ids of rolled-back inserts: count the rows */
        if (r == 0)
                r = store_mysql_query(s, &res, "SELECT COUNT(*) FROM calls");
        if (r == 0)
                r = store_mysql_one_i64(res, &v, &null);
        if (r == 0)
                st->calls_total = null ? 0 : (uint64_t)v;
        if (r == 0)
                r = store_mysql_owner_epoch_read(s, false, &st->epoch);
        return r;
}

int store_mysql_stats(struct store *store, struct store_stats *ret_stats)
{
        struct store_stats st;
        int r = store_mysql_run_tx(M(store), stats_tx, &st, TX_RECHECKS);

        if (r == 0)
                *ret_stats = st;
        return r;
}

/* ---- manual review and audit ----------------------------------------------------- */

struct manual_page {
        int64_t after_id;
        tg_wall_ms last_at;
        int64_t last_id;
        int want;
        int n;
        struct op_record *buf;
};

static int manual_page_tx(struct mysql_store *s, void *ctx)
{
        struct manual_page *p = ctx;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r =
            store_mysql_query(s, &res,
                              "SELECT " OP_COLS " FROM operations FORCE INDEX (ops_state_accepted) "
                              "WHERE state = 'manual' AND id > %I AND "
                              "(accepted_at > %I OR (accepted_at = %I AND id > %I)) "
                              "ORDER BY accepted_at, id LIMIT %I",
                              p->after_id, p->last_at, p->last_at, p->last_id, (int64_t)p->want);

        p->n = 0;
        if (r < 0)
                return r;
        while (r == 0 && p->n < p->want) {
                row = mysql_fetch_row(res);
                if (!row)
                        break;
                r = store_mysql_read_op(res, row, &p->buf[p->n++]);
        }
        mysql_free_result(res);
        return r;
}

int store_mysql_list_manual(struct store *store, int64_t after_id, unsigned limit, store_op_fn fn,
                            void *userdata)
{
        struct manual_page p = {.after_id = after_id, .last_at = INT64_MIN, .last_id = INT64_MIN};
        int r = 0;

        p.buf = calloc(PAGE_ROWS, sizeof(*p.buf));
        if (!p.buf)
                return TG_ENOMEM;
        while (limit > 0) {
                p.want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                r = store_mysql_run_tx(M(store), manual_page_tx, &p, TX_RECHECKS);
                if (r < 0)
                        break;
                for (int i = 0; i < p.n && r == 0; i++)
                        r = fn(&p.buf[i], userdata);
                if (r != 0 || p.n < p.want)
                        break;
                p.last_at = p.buf[p.n - 1].accepted_at;
                p.last_id = p.buf[p.n - 1].id;
                limit -= (unsigned)p.n;
        }
        free(p.buf);
        return r;
}

struct state_page {
        const char *state;
        int64_t after_id;
        int want;
        int n;
        struct op_record *buf;
};

/* id order within one state: sorts the state's rows (small states only). */
static int state_page_tx(struct mysql_store *s, void *ctx)
{
        struct state_page *p = ctx;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r = store_mysql_query(s, &res,
                                  "SELECT " OP_COLS " FROM operations WHERE state = %S AND id > %I "
                                  "ORDER BY id LIMIT %I",
                                  p->state, p->after_id, (int64_t)p->want);

        p->n = 0;
        if (r < 0)
                return r;
        while (r == 0 && p->n < p->want) {
                row = mysql_fetch_row(res);
                if (!row)
                        break;
                r = store_mysql_read_op(res, row, &p->buf[p->n++]);
        }
        mysql_free_result(res);
        return r;
}

int store_mysql_list_state(struct store *store, enum op_state state, int64_t after_id,
                           unsigned limit, store_op_fn fn, void *userdata)
{
        struct state_page p = {.state = store_state_text(state), .after_id = after_id};
        int r = 0;

        p.buf = calloc(PAGE_ROWS, sizeof(*p.buf));
        if (!p.buf)
                return TG_ENOMEM;
        while (limit > 0) {
                p.want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                r = store_mysql_run_tx(M(store), state_page_tx, &p, TX_RECHECKS);
                if (r < 0)
                        break;
                /* the callback runs outside the transaction: it may call the store */
                for (int i = 0; i < p.n && r == 0; i++)
                        r = fn(&p.buf[i], userdata);
                if (r != 0 || p.n < p.want)
                        break;
                p.after_id = p.buf[p.n - 1].id;
                limit -= (unsigned)p.n;
        }
        free(p.buf);
        return r;
}

struct audit_page {
        int64_t op_id;
        int64_t since;
        int n;
        struct audit_record *buf;
};

static int audit_page_tx(struct mysql_store *s, void *ctx)
{
        struct audit_page *p = ctx;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r = store_mysql_query(s, &res,
                                  "SELECT " AUDIT_COLS " FROM audit WHERE op_id = %I AND id > %I "
                                  "ORDER BY id LIMIT %I",
                                  p->op_id, p->since, (int64_t)PAGE_ROWS);

        p->n = 0;
        if (r < 0)
                return r;
        while (r == 0 && p->n < PAGE_ROWS) {
                row = mysql_fetch_row(res);
                if (!row)
                        break;
                r = read_audit(res, row, &p->buf[p->n++]);
        }
        mysql_free_result(res);
        return r;
}

int store_mysql_list_audit(struct store *store, int64_t op_id, store_audit_fn fn, void *userdata)
{
        struct audit_page p = {.op_id = op_id};
        int r = 0;

        p.buf = calloc(PAGE_ROWS, sizeof(*p.buf));
        if (!p.buf)
                return TG_ENOMEM;
        for (;;) {
                r = store_mysql_run_tx(M(store), audit_page_tx, &p, TX_RECHECKS);
                if (r < 0)
                        break;
                for (int i = 0; i < p.n && r == 0; i++)
                        r = fn(&p.buf[i], userdata);
                if (r != 0 || p.n < PAGE_ROWS)
                        break;
                p.since = p.buf[p.n - 1].id;
        }
        free(p.buf);
        return r;
}

struct operator_ctx {
        const char *operation_id;
        const char *operator_name;
        const char *reason;
        const struct policy_config *config;
        enum op_state outcome;
        const char *refund_id;
        const char *source;
        tg_wall_ms now;
        struct op_record op;
};

static int resend_tx(struct mysql_store *s, void *ctx)
{
        struct operator_ctx *c = ctx;
        struct op_record op;
        struct policy_op pop, next;
        struct policy_decision d;
        char detail[TG_TEXT_MAX];
        int r = store_mysql_op_lookup(s, c->operation_id, 0, true, &op);

        if (r < 0)
                return r;
        store_policy_op(&op, &pop);
        /* policy decides: TG_ESTATE unless manual, TG_ERANGE past key retention */
        r = policy_operator_resend(c->config, &pop, c->now, &next, &d);
        if (r < 0)
                return r;
        op.state = d.next;
        op.next_run_at = d.next_run_at;
        op.reason = d.reason;
        op.attempts = next.attempts;
        op.attempt_limit = next.attempt_limit;
        op.queries = next.queries;
        op.query_limit = next.query_limit;
        op.deadline_at = next.deadline_at;
        op.key_first_used = next.key_first_used;
        op.last_wait_ms = next.last_wait_ms;
        op.operator_resend = true;
        op.updated_at = c->now;
        r = store_mysql_op_write(s, &op);
        if (r < 0)
                return r;
        snprintf(detail, sizeof(detail),
                 "re-send with the same key as POST %u of %u; due %" PRId64 ", deadline %" PRId64,
                 op.attempts + 1, op.attempt_limit, op.next_run_at, op.deadline_at);
        r = store_mysql_audit_insert(s, op.id, c->now, "resend", c->operator_name, c->reason,
                                     detail);
        if (r == 0)
                c->op = op;
        return r;
}

int store_mysql_operator_resend(struct store *store, const char *operation_id,
                                const char *operator_name, const char *reason,
                                const struct policy_config *config, tg_wall_ms now,
                                struct op_record *ret_op)
{
        struct operator_ctx c = {.operation_id = operation_id,
                                 .operator_name = operator_name,
                                 .reason = reason,
                                 .config = config,
                                 .now = now};
        /* not re-run after an unknown COMMIT: a second re-send would be a
         * second audited decision */
        int r = store_mysql_run_tx(M(store), resend_tx, &c, 0);

        if (r == 0)
                *ret_op = c.op;
        return r;
}

static int resolve_tx(struct mysql_store *s, void *ctx)
{
        struct operator_ctx *c = ctx;
        struct op_record op;
        char detail[TG_TEXT_MAX];
        int r = store_mysql_op_lookup(s, c->operation_id, 0, true, &op);

        if (r == 0 && op.state != OP_MANUAL)
                r = TG_ESTATE;
        if (r < 0)
                return r;
        snprintf(detail, sizeof(detail), "resolved by hand as %s (was manual: %s)",
                 store_state_text(c->outcome), store_reason_text(op.reason));
        op.state = c->outcome;
        op.next_run_at = 0;
        op.operator_resend = false;
        op.updated_at = c->now;
        r = store_mysql_op_write(s, &op);
        if (r == 0)
                r = store_mysql_audit_insert(s, op.id, c->now, "resolve", c->operator_name,
                                             c->reason, detail);
        if (r == 0)
                c->op = op;
        return r;
}

int store_mysql_operator_resolve(struct store *store, const char *operation_id,
                                 const char *operator_name, const char *reason,
                                 enum op_state outcome, tg_wall_ms now, struct op_record *ret_op)
{
        struct operator_ctx c = {.operation_id = operation_id,
                                 .operator_name = operator_name,
                                 .reason = reason,
                                 .outcome = outcome,
                                 .now = now};
        int r = store_mysql_run_tx(M(store), resolve_tx, &c, 0);

        if (r == 0)
                *ret_op = c.op;
        return r;
}

static int external_tx(struct mysql_store *s, void *ctx)
{
        struct operator_ctx *c = ctx;
        struct op_record op;
        char detail[TG_TEXT_MAX];
        int r = store_mysql_op_lookup(s, c->operation_id, 0, true, &op);

        if (r < 0)
                return r;
        if (op.state == c->outcome)
                return 0; /* already so: nothing to change */
        /* in_flight: the exit's own call decides; final: never rewritten;
         * pending: nothing was ever sent, so no provider answer can be ours */
        if (op.state == OP_IN_FLIGHT || op.state == OP_PENDING || store_state_is_final(op.state))
                return TG_ESTATE;
        snprintf(detail, sizeof(detail), "%s -> %s%s%s", store_state_text(op.state),
                 store_state_text(c->outcome), c->refund_id && c->refund_id[0] ? ", refund " : "",
                 c->refund_id ? c->refund_id : "");
        op.state = c->outcome;
        op.next_run_at = 0;
        op.operator_resend = false;
        if (c->refund_id && c->refund_id[0] != '\0')
                store_copy_text(op.refund_id, sizeof(op.refund_id), c->refund_id);
        op.updated_at = c->now;
        r = store_mysql_op_write(s, &op);
        if (r == 0)
                r = store_mysql_audit_insert(s, op.id, c->now, "external", c->source,
                                             "provider answer", detail);
        return r;
}

int store_mysql_settle_external(struct store *store, const char *operation_id,
                                enum op_state outcome, const char *refund_id, const char *source,
                                tg_wall_ms now)
{
        struct operator_ctx c = {.operation_id = operation_id,
                                 .outcome = outcome,
                                 .refund_id = refund_id,
                                 .source = source,
                                 .now = now};

        /* idempotent: a re-run finds the outcome already there */
        return store_mysql_run_tx(M(store), external_tx, &c, TX_RECHECKS);
}

/* ---- exit samples ------------------------------------------------------------------ */

static int read_sample(MYSQL_RES *res, MYSQL_ROW row, struct exit_sample *ret_sample)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        bool ok = lens != NULL && mysql_num_fields(res) == SAMPLE_NCOLS;
        struct exit_sample v;

        if (!ok)
                return TG_ESTORE;
        memset(&v, 0, sizeof(v));
        v.at = store_mysql_col_i64(row, 0, &ok);
        v.epoch = store_mysql_col_i64(row, 1, &ok);
        v.in_flight = store_mysql_col_uns(row, 2, &ok);
        v.starts = store_mysql_col_uns(row, 3, &ok);
        v.call_ends = store_mysql_col_uns(row, 4, &ok);
        v.op_closes = store_mysql_col_uns(row, 5, &ok);
        v.held = store_mysql_col_i64(row, 6, &ok) != 0;
        v.oldest_open_accepted_at = row[7] ? store_mysql_col_i64(row, 7, &ok) : TG_WALL_NEVER;
        store_mysql_col_copy(row, lens, 8, v.figures, sizeof(v.figures));
        v.share = store_mysql_col_uns(row, 9, &ok);
        if (!ok)
                return TG_ESTORE;
        *ret_sample = v;
        return 0;
}

struct sample_put_ctx {
        const struct exit_sample *sample;
        tg_wall_ms keep_after;
};

static int sample_put_tx(struct mysql_store *s, void *ctx)
{
        struct sample_put_ctx *c = ctx;
        const struct exit_sample *x = c->sample;
        /* The oldest open operation is read here, in the same statement: one
         * index probe per open state (manual is not open for the exit). A
         * sample with the same `at` and share is replaced. */
        int r = store_mysql_exec(
            s,
            "REPLACE INTO exit_samples (" SAMPLE_COLS ") "
            "SELECT %I, %I, %U, %U, %U, %U, %I, (SELECT MIN(m) FROM ("
            "SELECT MIN(accepted_at) AS m FROM operations WHERE state = 'pending' "
            "UNION ALL SELECT MIN(accepted_at) FROM operations WHERE state = 'in_flight' "
            "UNION ALL SELECT MIN(accepted_at) FROM operations "
            "WHERE state = 'retry_wait' "
            "UNION ALL SELECT MIN(accepted_at) FROM operations WHERE state = 'unknown'"
            ") AS o), %L, %U",
            x->at, x->epoch, x->in_flight, x->starts, x->call_ends, x->op_closes,
            (int64_t)(x->held ? 1 : 0), x->figures, x->share);

        if (r == 0)
                r = store_mysql_exec(s, "DELETE FROM exit_samples WHERE at < %I", c->keep_after);
        return r;
}

int store_mysql_sample_put(struct store *store, const struct exit_sample *sample,
                           tg_wall_ms keep_after)
{
        struct sample_put_ctx c = {.sample = sample, .keep_after = keep_after};

        /* idempotent: a re-run replaces the same row and prunes nothing new */
        return store_mysql_run_tx(M(store), sample_put_tx, &c, TX_RECHECKS);
}

struct samples_page {
        tg_wall_ms since;
        int64_t last_share; /* of the last row seen; past every share at first */
        int want;
        int n;
        struct exit_sample *buf;
};

static int samples_page_tx(struct mysql_store *s, void *ctx)
{
        struct samples_page *p = ctx;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r = store_mysql_query(s, &res,
                                  "SELECT " SAMPLE_COLS " FROM exit_samples "
                                  "WHERE at > %I OR (at = %I AND share > %I) ORDER BY at, share "
                                  "LIMIT %I",
                                  p->since, p->since, p->last_share, (int64_t)p->want);

        p->n = 0;
        if (r < 0)
                return r;
        while (r == 0 && p->n < p->want) {
                row = mysql_fetch_row(res);
                if (!row)
                        break;
                r = read_sample(res, row, &p->buf[p->n++]);
        }
        mysql_free_result(res);
        return r;
}

int store_mysql_list_samples(struct store *store, tg_wall_ms since, unsigned limit,
                             store_sample_fn fn, void *userdata)
{
        struct samples_page p = {.since = since, .last_share = INT64_MAX};
        int r = 0;

        p.buf = calloc(PAGE_ROWS, sizeof(*p.buf));
        if (!p.buf)
                return TG_ENOMEM;
        while (limit > 0) {
                p.want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                r = store_mysql_run_tx(M(store), samples_page_tx, &p, TX_RECHECKS);
                if (r < 0)
                        break;
                for (int i = 0; i < p.n && r == 0; i++)
                        r = fn(&p.buf[i], userdata);
                if (r != 0 || p.n < p.want)
                        break;
                p.since = p.buf[p.n - 1].at;
                p.last_share = p.buf[p.n - 1].share;
                limit -= (unsigned)p.n;
        }
        free(p.buf);
        return r;
}

static int last_sample_tx(struct mysql_store *s, void *ctx)
{
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r = store_mysql_query(s, &res,
                                  "SELECT " SAMPLE_COLS
                                  " FROM exit_samples ORDER BY at DESC, share DESC LIMIT 1");

        if (r < 0)
                return r;
        row = mysql_fetch_row(res);
        r = row ? read_sample(res, row, ctx) : TG_ENOTFOUND;
        mysql_free_result(res);
        return r;
}

int store_mysql_last_sample(struct store *store, struct exit_sample *ret_sample)
{
        struct exit_sample *x = malloc(sizeof(*x));
        int r;

        if (!x)
                return TG_ENOMEM;
        r = store_mysql_run_tx(M(store), last_sample_tx, x, TX_RECHECKS);
        if (r == 0)
                *ret_sample = *x;
        free(x);
        return r;
}

#endif /* TG_HAVE_MARIADB */
