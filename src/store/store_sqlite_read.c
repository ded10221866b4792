/*
 * store_sqlite_read — the SQLite backend's reading side and the operator's
 * actions: call lists, stats, the manual list, the audit log, operator
 * re-send and resolve, external settles, and the exit's per-second samples.
 *
 * List callbacks run between pages, never inside a statement or transaction,
 * so a callback may call back into the store. Audit rows are only ever
 * inserted. ret_* outputs are written only on success.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/sqlite_int.h"

#define PAGE_ROWS 64 /* rows fetched per page by the list walks */

static void read_audit(sqlite3_stmt *st, struct audit_record *ret_audit)
{
        struct audit_record a;

        memset(&a, 0, sizeof(a));
        a.id = sqlite3_column_int64(st, 0);
        a.op_id = sqlite3_column_int64(st, 1);
        a.at = sqlite3_column_int64(st, 2);
        sqlite_col_copy(st, 3, a.action, sizeof(a.action));
        sqlite_col_copy(st, 4, a.operator_name, sizeof(a.operator_name));
        sqlite_col_copy(st, 5, a.reason, sizeof(a.reason));
        sqlite_col_copy(st, 6, a.detail, sizeof(a.detail));
        *ret_audit = a;
}

/* ---- reading: page by page, callbacks outside any statement -------------------- */

/* Row readers in one shape, for fetch_rows(). */
typedef int (*row_reader)(sqlite3_stmt *st, void *ret_row);

static int call_row(sqlite3_stmt *st, void *ret_row)
{
        return sqlite_read_call(st, ret_row);
}

static int op_row(sqlite3_stmt *st, void *ret_row)
{
        return sqlite_read_op(st, ret_row);
}

static void read_sample(sqlite3_stmt *st, struct exit_sample *ret);

static int audit_row(sqlite3_stmt *st, void *ret_row)
{
        read_audit(st, ret_row);
        return 0;
}

static int sample_row(sqlite3_stmt *st, void *ret_row)
{
        read_sample(st, ret_row);
        return 0;
}

/* Steps a bound list statement into up to max rows of buf (elements of
 * `size` bytes), then finishes the statement, so that callbacks run with no
 * statement open. *ret_n: rows read. 0 or a negative code. */
static int fetch_rows(sqlite3_stmt *st, void *buf, size_t size, int max, row_reader read,
                      int *ret_n)
{
        int n = 0, r = 0, rc;

        while (n < max) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        break;
                if (rc != SQLITE_ROW) {
                        r = sqlite_map_rc(rc);
                        break;
                }
                r = read(st, (char *)buf + (size_t)n * size);
                if (r < 0)
                        break;
                n++;
        }
        sqlite_stmt_done(st);
        if (r == 0)
                *ret_n = n;
        return r;
}

/* Walks calls with id > since_id (of one op when op_id > 0), at most limit. */
static int walk_calls(struct sqlite_store *s, int64_t op_id, int64_t since_id, uint64_t limit,
                      store_call_fn fn, void *userdata)
{
        struct call_record *buf = calloc(PAGE_ROWS, sizeof(*buf));
        int r = 0;

        if (!buf)
                return TG_ENOMEM;
        while (limit > 0) {
                int want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                sqlite3_stmt *st = NULL;
                bool bad;
                int n = 0;

                r = sqlite_stmt_get(s, op_id > 0 ? ST_LIST_OP_CALLS : ST_LIST_CALLS, &st);
                if (r < 0)
                        break;
                if (op_id > 0)
                        bad = sqlite_bind_i64(st, 1, op_id) || sqlite_bind_i64(st, 2, since_id) ||
                              sqlite_bind_i64(st, 3, want);
                else
                        bad = sqlite_bind_i64(st, 1, since_id) || sqlite_bind_i64(st, 2, want);
                if (bad) {
                        sqlite_stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                r = fetch_rows(st, buf, sizeof(*buf), want, call_row, &n);
                if (r < 0)
                        break;
                for (int i = 0; i < n && r == 0; i++)
                        r = fn(&buf[i], userdata);
                if (r != 0 || n < want)
                        break;
                since_id = buf[n - 1].id;
                limit -= (uint64_t)n;
        }
        free(buf);
        return r;
}

int sqlite_list_calls(struct store *store, int64_t since_id, unsigned limit, store_call_fn fn,
                      void *userdata)
{
        return walk_calls(S(store), 0, since_id, limit, fn, userdata);
}

int sqlite_list_op_calls(struct store *store, int64_t op_id, store_call_fn fn, void *userdata)
{
        if (op_id <= 0)
                return 0;
        return walk_calls(S(store), op_id, 0, UINT64_MAX, fn, userdata);
}

int sqlite_stats(struct store *store, struct store_stats *ret_stats)
{
        struct sqlite_store *s = S(store);
        struct store_stats stats;
        sqlite3_stmt *st = NULL;
        int r = sqlite_tx_begin(s, false);
        int rc;

        if (r < 0)
                return r;
        memset(&stats, 0, sizeof(stats));
        stats.oldest_open_accepted_at = TG_WALL_NEVER;
        r = sqlite_stmt_get(s, ST_COUNT_BY_STATE, &st);
        while (r == 0) {
                enum op_state state;

                rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        break;
                if (rc != SQLITE_ROW)
                        r = sqlite_map_rc(rc);
                else if (store_state_parse(sqlite_col_text(st, 0), &state) < 0)
                        r = TG_ESTORE;
                else
                        stats.by_state[state] = (uint64_t)sqlite3_column_int64(st, 1);
        }
        if (st)
                sqlite_stmt_done(st);
        if (r == 0)
                r = sqlite_stmt_get(s, ST_OLDEST_OPEN, &st);
        if (r == 0) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
                        stats.oldest_open_accepted_at = sqlite3_column_int64(st, 0);
                else if (rc != SQLITE_ROW)
                        r = sqlite_map_rc(rc);
                sqlite_stmt_done(st);
        }
        if (r == 0)
                r = sqlite_stmt_get(s, ST_CALLS_TOTAL, &st);
        if (r == 0) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW)
                        stats.calls_total = (uint64_t)sqlite3_column_int64(st, 0);
                else
                        r = sqlite_map_rc(rc);
                sqlite_stmt_done(st);
        }
        if (r == 0)
                r = sqlite_owner_epoch_read(s, &stats.epoch);
        if (r < 0) {
                sqlite_tx_rollback(s);
                return r;
        }
        r = sqlite_tx_commit(s);
        if (r == 0)
                *ret_stats = stats;
        return r;
}

/* ---- manual review and audit ----------------------------------------------------- */

int sqlite_list_manual(struct store *store, int64_t after_id, unsigned limit, store_op_fn fn,
                       void *userdata)
{
        struct sqlite_store *s = S(store);
        struct op_record *buf = calloc(PAGE_ROWS, sizeof(*buf));
        tg_wall_ms last_at = INT64_MIN;
        int64_t last_id = INT64_MIN;
        int r = 0;

        if (!buf)
                return TG_ENOMEM;
        while (limit > 0) {
                int want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                sqlite3_stmt *st = NULL;
                int n = 0;

                r = sqlite_stmt_get(s, ST_LIST_MANUAL, &st);
                if (r < 0)
                        break;
                if (sqlite_bind_i64(st, 1, after_id) || sqlite_bind_i64(st, 2, last_at) ||
                    sqlite_bind_i64(st, 3, last_id) || sqlite_bind_i64(st, 4, want)) {
                        sqlite_stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                r = fetch_rows(st, buf, sizeof(*buf), want, op_row, &n);
                if (r < 0)
                        break;
                for (int i = 0; i < n && r == 0; i++)
                        r = fn(&buf[i], userdata);
                if (r != 0 || n < want)
                        break;
                last_at = buf[n - 1].accepted_at;
                last_id = buf[n - 1].id;
                limit -= (unsigned)n;
        }
        free(buf);
        return r;
}

int sqlite_list_state(struct store *store, enum op_state state, int64_t after_id, unsigned limit,
                      store_op_fn fn, void *userdata)
{
        struct sqlite_store *s = S(store);
        struct op_record *buf = calloc(PAGE_ROWS, sizeof(*buf));
        const char *name = store_state_text(state);
        int r = 0;

        if (!buf)
                return TG_ENOMEM;
        while (limit > 0) {
                int want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                sqlite3_stmt *st = NULL;
                int n = 0;

                r = sqlite_stmt_get(s, ST_LIST_STATE, &st);
                if (r < 0)
                        break;
                if (sqlite_bind_text(st, 1, name, strlen(name)) ||
                    sqlite_bind_i64(st, 2, after_id) || sqlite_bind_i64(st, 3, want)) {
                        sqlite_stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                r = fetch_rows(st, buf, sizeof(*buf), want, op_row, &n);
                if (r < 0)
                        break;
                /* the callback runs with no statement open: it may call the store */
                for (int i = 0; i < n && r == 0; i++)
                        r = fn(&buf[i], userdata);
                if (r != 0 || n < want)
                        break;
                after_id = buf[n - 1].id;
                limit -= (unsigned)n;
        }
        free(buf);
        return r;
}

int sqlite_list_audit(struct store *store, int64_t op_id, store_audit_fn fn, void *userdata)
{
        struct sqlite_store *s = S(store);
        struct audit_record *buf = calloc(PAGE_ROWS, sizeof(*buf));
        int64_t since = 0;
        int r = 0;

        if (!buf)
                return TG_ENOMEM;
        for (;;) {
                sqlite3_stmt *st = NULL;
                int n = 0;

                r = sqlite_stmt_get(s, ST_LIST_AUDIT, &st);
                if (r < 0)
                        break;
                if (sqlite_bind_i64(st, 1, op_id) || sqlite_bind_i64(st, 2, since) ||
                    sqlite_bind_i64(st, 3, PAGE_ROWS)) {
                        sqlite_stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                r = fetch_rows(st, buf, sizeof(*buf), PAGE_ROWS, audit_row, &n);
                if (r < 0)
                        break;
                for (int i = 0; i < n && r == 0; i++)
                        r = fn(&buf[i], userdata);
                if (r != 0 || n < PAGE_ROWS)
                        break;
                since = buf[n - 1].id;
        }
        free(buf);
        return r;
}

int sqlite_operator_resend(struct store *store, const char *operation_id, const char *operator_name,
                           const char *reason, const struct policy_config *config, tg_wall_ms now,
                           struct op_record *ret_op)
{
        struct sqlite_store *s = S(store);
        struct op_record op;
        struct policy_op pop, next;
        struct policy_decision d;
        char detail[TG_TEXT_MAX];
        int r = sqlite_tx_begin(s, true);

        if (r < 0)
                return r;
        r = sqlite_op_by_key(s, operation_id, &op);
        if (r < 0)
                goto fail;
        store_policy_op(&op, &pop);
        /* policy decides: TG_ESTATE unless manual, TG_ERANGE past key retention */
        r = policy_operator_resend(config, &pop, now, &next, &d);
        if (r < 0)
                goto fail;
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
        op.updated_at = now;
        r = sqlite_op_write(s, &op);
        if (r < 0)
                goto fail;
        snprintf(detail, sizeof(detail),
                 "re-send with the same key as POST %u of %u; due %" PRId64 ", deadline %" PRId64,
                 op.attempts + 1, op.attempt_limit, op.next_run_at, op.deadline_at);
        r = sqlite_audit_insert(s, op.id, now, "resend", operator_name, reason, detail);
        if (r < 0)
                goto fail;
        r = sqlite_tx_commit(s);
        if (r == 0)
                *ret_op = op;
        return r;
fail:
        sqlite_tx_rollback(s);
        return r;
}

int sqlite_operator_resolve(struct store *store, const char *operation_id,
                            const char *operator_name, const char *reason, enum op_state outcome,
                            tg_wall_ms now, struct op_record *ret_op)
{
        struct sqlite_store *s = S(store);
        struct op_record op;
        char detail[TG_TEXT_MAX];
        int r = sqlite_tx_begin(s, true);

        if (r < 0)
                return r;
        r = sqlite_op_by_key(s, operation_id, &op);
        if (r == 0 && op.state != OP_MANUAL)
                r = TG_ESTATE;
        if (r < 0)
                goto fail;
        snprintf(detail, sizeof(detail), "resolved by hand as %s (was manual: %s)",
                 store_state_text(outcome), store_reason_text(op.reason));
        op.state = outcome;
        op.next_run_at = 0;
        op.operator_resend = false;
        op.updated_at = now;
        r = sqlite_op_write(s, &op);
        if (r == 0)
                r = sqlite_audit_insert(s, op.id, now, "resolve", operator_name, reason, detail);
        if (r < 0)
                goto fail;
        r = sqlite_tx_commit(s);
        if (r == 0)
                *ret_op = op;
        return r;
fail:
        sqlite_tx_rollback(s);
        return r;
}

int sqlite_settle_external(struct store *store, const char *operation_id, enum op_state outcome,
                           const char *refund_id, const char *source, tg_wall_ms now)
{
        struct sqlite_store *s = S(store);
        struct op_record op;
        char detail[TG_TEXT_MAX];
        int r = sqlite_tx_begin(s, true);

        if (r < 0)
                return r;
        r = sqlite_op_by_key(s, operation_id, &op);
        if (r < 0)
                goto fail;
        if (op.state == outcome) {
                sqlite_tx_rollback(s); /* already so: nothing to change */
                return 0;
        }
        /* in_flight: the exit's own call decides; final: never rewritten;
         * pending: nothing was ever sent, so no provider answer can be ours */
        if (op.state == OP_IN_FLIGHT || op.state == OP_PENDING || store_state_is_final(op.state)) {
                r = TG_ESTATE;
                goto fail;
        }
        snprintf(detail, sizeof(detail), "%s -> %s%s%s", store_state_text(op.state),
                 store_state_text(outcome), refund_id && refund_id[0] ? ", refund " : "",
                 refund_id ? refund_id : "");
        op.state = outcome;
        op.next_run_at = 0;
        op.operator_resend = false;
        if (refund_id && refund_id[0] != '\0')
                store_copy_text(op.refund_id, sizeof(op.refund_id), refund_id);
        op.updated_at = now;
        r = sqlite_op_write(s, &op);
        if (r == 0)
                r = sqlite_audit_insert(s, op.id, now, "external", source, "provider answer",
                                        detail);
        if (r < 0)
                goto fail;
        return sqlite_tx_commit(s);
fail:
        sqlite_tx_rollback(s);
        return r;
}

/* ---- exit samples ------------------------------------------------------------------ */

static void read_sample(sqlite3_stmt *st, struct exit_sample *ret)
{
        int64_t v;

        memset(ret, 0, sizeof(*ret));
        ret->at = sqlite3_column_int64(st, 0);
        ret->epoch = sqlite3_column_int64(st, 1);
        v = sqlite3_column_int64(st, 2);
        ret->in_flight = v < 0 || v > UINT_MAX ? 0 : (unsigned)v;
        v = sqlite3_column_int64(st, 3);
        ret->starts = v < 0 || v > UINT_MAX ? 0 : (unsigned)v;
        v = sqlite3_column_int64(st, 4);
        ret->call_ends = v < 0 || v > UINT_MAX ? 0 : (unsigned)v;
        v = sqlite3_column_int64(st, 5);
        ret->op_closes = v < 0 || v > UINT_MAX ? 0 : (unsigned)v;
        ret->held = sqlite3_column_int64(st, 6) != 0;
        ret->oldest_open_accepted_at =
            sqlite3_column_type(st, 7) == SQLITE_NULL ? TG_WALL_NEVER : sqlite3_column_int64(st, 7);
        sqlite_col_copy(st, 8, ret->figures, sizeof(ret->figures));
        v = sqlite3_column_int64(st, 9);
        ret->share = v < 0 || v > UINT_MAX ? 0 : (unsigned)v;
}

int sqlite_sample_put(struct store *store, const struct exit_sample *sample, tg_wall_ms keep_after)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = sqlite_tx_begin(s, true);

        if (r < 0)
                return r;
        r = sqlite_stmt_get(s, ST_SAMPLE_PUT, &st);
        if (r < 0)
                goto fail;
        if (sqlite_bind_i64(st, 1, sample->at) || sqlite_bind_i64(st, 2, sample->epoch) ||
            sqlite_bind_i64(st, 3, sample->in_flight) || sqlite_bind_i64(st, 4, sample->starts) ||
            sqlite_bind_i64(st, 5, sample->call_ends) ||
            sqlite_bind_i64(st, 6, sample->op_closes) ||
            sqlite_bind_i64(st, 7, sample->held ? 1 : 0) ||
            sqlite_bind_text(st, 8, sample->figures, sizeof(sample->figures) - 1) ||
            sqlite_bind_i64(st, 9, sample->share)) {
                sqlite_stmt_done(st);
                r = TG_ESTORE;
                goto fail;
        }
        r = sqlite_stmt_run(st);
        if (r < 0)
                goto fail;
        r = sqlite_stmt_get(s, ST_SAMPLE_PRUNE, &st);
        if (r < 0)
                goto fail;
        if (sqlite_bind_i64(st, 1, keep_after)) {
                sqlite_stmt_done(st);
                r = TG_ESTORE;
                goto fail;
        }
        r = sqlite_stmt_run(st);
        if (r < 0)
                goto fail;
        return sqlite_tx_commit(s);
fail:
        sqlite_tx_rollback(s);
        return r;
}

int sqlite_list_samples(struct store *store, tg_wall_ms since, unsigned limit, store_sample_fn fn,
                        void *userdata)
{
        struct sqlite_store *s = S(store);
        struct exit_sample *buf = calloc(PAGE_ROWS, sizeof(*buf));
        int64_t last_share = INT64_MAX; /* first page: at > since only */
        int r = 0;

        if (!buf)
                return TG_ENOMEM;
        while (limit > 0) {
                int want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                sqlite3_stmt *st = NULL;
                int n = 0;

                r = sqlite_stmt_get(s, ST_SAMPLE_LIST, &st);
                if (r < 0)
                        break;
                if (sqlite_bind_i64(st, 1, since) || sqlite_bind_i64(st, 2, want) ||
                    sqlite_bind_i64(st, 3, last_share)) {
                        sqlite_stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                r = fetch_rows(st, buf, sizeof(*buf), want, sample_row, &n);
                if (r < 0)
                        break;
                for (int i = 0; i < n && r == 0; i++)
                        r = fn(&buf[i], userdata);
                if (r != 0 || n < want)
                        break;
                since = buf[n - 1].at;
                last_share = buf[n - 1].share;
                limit -= (unsigned)n;
        }
        free(buf);
        return r;
}

int sqlite_last_sample(struct store *store, struct exit_sample *ret_sample)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, ST_SAMPLE_LAST, &st);
        int rc;

        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                read_sample(st, ret_sample);
        else
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : sqlite_map_rc(rc);
        sqlite_stmt_done(st);
        return r;
}
