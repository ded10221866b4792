/*
 * store_sqlite — the embedded store backend: one SQLite file in WAL mode with
 * synchronous=FULL (a commit that returned survives power loss; an outcome
 * may commit with NORMAL, see STORE_TX_OUTCOME), a busy timeout, foreign
 * keys, and a versioned schema (PRAGMA user_version, one migration per step,
 * each in its own transaction).
 *
 * It implements the primitives of store_backend.h and nothing else: the
 * operations of store.h are written once, over them, in store_exit.c,
 * store_owner.c and store_read.c.
 *
 * Invariants:
 *   - tx() runs its body in BEGIN (IMMEDIATE when it writes) ... COMMIT and
 *     rolls back on failure; nothing is held between calls;
 *   - operations, calls and audit rows are never deleted and audit rows are
 *     never updated (triggers refuse it);
 *   - the state lists of the picks and batches are made from the transition
 *     table at open (store_state_list_sql), and every pick names the index
 *     it must use (INDEXED BY), so a list that no longer matches an index's
 *     WHERE fails at prepare instead of scanning;
 *   - nothing SQLite-specific (codes, messages, SQL) leaves the backend's
 *     files (store_sqlite*.c): every failure is mapped to a TG_E* code.
 *
 * This file holds open, the pragmas, running the migrations (their SQL is in
 * store_sqlite_schema.c), the statements,
 * transactions and the vtable; store_sqlite_rows.c the row, pick, page,
 * stats and sample primitives; store_sqlite_lock.c ownership locks, epochs
 * and the split. What they share is declared in sqlite_int.h.
 */
#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "store/sqlite_int.h"

#define BUSY_TIMEOUT_MS 5000

/* ---- schema ------------------------------------------------------------ */

/* The handle's account (struct store.account) in a statement: a parameter
 * number no statement reaches otherwise, bound by store_sqlite_stmt_get()
 * whenever the statement names it. */
#define ACCT "?60"

/* The columns as the statements read them (SAMPLE_COLS: sqlite_int.h, a
 * migration copies samples by it). */
#define OP_COLS                                                                                    \
        "id, operation_id, payment_id, amount, currency, state, reason, attempts, "                \
        "attempt_limit, queries, query_limit, accepted_at, deadline_at, key_first_used, "          \
        "next_run_at, updated_at, last_wait_ms, operator_resend, epoch, refund_id, "               \
        "last_http_status, last_class, source, share, assignee, traceparent, caller_deadline_at, " \
        "refund_reason, metadata, account, notify_url, submitted_by, pending_since, pending_polls"

#define CALL_COLS                                                                                  \
        "id, op_id, operation_id, kind, attempt, request_id, epoch, start_mono, start_wall, "      \
        "in_flight_at_start, ended, end_mono, end_wall, sent, cls, http_status, latency_us, "      \
        "error, share, trace_id, span_id, handoff_mono, handoff_wall"

#define AUDIT_COLS "id, op_id, at, action, operator_name, reason, detail"

/* The migrations are in store_sqlite_schema.c. */
#define MIGRATION_COUNT store_sqlite_migration_count
#define migrations      store_sqlite_migrations

/* ---- statements (prepared once per connection, on first use) ------------ */

/* One state's rows, counted from the index ops_state_accepted ('@': the
 * state's word, store_union_sql()). */
#define COUNT_OF "SELECT '@', count(*) FROM operations WHERE state = '@'"
/* One index probe per open state, for the oldest open operation. */
#define OLDEST_OF "SELECT min(accepted_at) AS m FROM operations WHERE state = '@'"

/* Statements whose text does not depend on the transition table. The others
 * (picks, batches, the due summary; and those that name states) are made
 * at open: make_table_sql(). */
static const char *const fixed_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN",
    [ST_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
    [ST_SYNC_NORMAL] = "PRAGMA synchronous = NORMAL",
    [ST_SYNC_FULL] = "PRAGMA synchronous = FULL",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_OP_BY_KEY] = "SELECT " OP_COLS " FROM operations WHERE operation_id = ?1",
    [ST_OP_BY_ID] = "SELECT " OP_COLS " FROM operations WHERE id = ?1",
    [ST_OP_BY_REFUND] = "SELECT id FROM operations INDEXED BY ops_account_refund "
                        "WHERE account = ?1 AND refund_id = ?2 ORDER BY id LIMIT 2",
    [ST_OP_INSERT] =
        "INSERT INTO operations (operation_id, payment_id, amount, currency, "
        "state, reason, attempt_limit, query_limit, accepted_at, deadline_at, "
        "updated_at, source, last_class, traceparent, caller_deadline_at, "
        "refund_reason, metadata, account, notify_url, submitted_by) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
        "?17, ?18, ?19, ?20)",
    /* Every mutable column; the payload, accepted_at and source never change
     * (notify_url is not the payload: the outbox intake clears a row's). */
    [ST_OP_WRITE] = "UPDATE operations SET state = ?2, reason = ?3, attempts = ?4, "
                    "attempt_limit = ?5, queries = ?6, query_limit = ?7, deadline_at = ?8, "
                    "key_first_used = ?9, next_run_at = ?10, updated_at = ?11, "
                    "last_wait_ms = ?12, operator_resend = ?13, epoch = ?14, "
                    "refund_id = ?15, last_http_status = ?16, last_class = ?17, share = ?18, "
                    "assignee = ?19, traceparent = ?20, notify_url = ?21, pending_since = ?22, "
                    "pending_polls = ?23 WHERE id = ?1",
    [ST_OWNER_EPOCH] = "SELECT epoch FROM owner WHERE id = 1",
    [ST_OWNER_BUMP] = "UPDATE owner SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch",
    [ST_CALL_INSERT] = "INSERT INTO calls (op_id, operation_id, kind, attempt, request_id, "
                       "epoch, start_mono, start_wall, in_flight_at_start, share, trace_id, "
                       "span_id, handoff_mono, handoff_wall, account) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 0, 0, " ACCT ")",
    [ST_CALL_BY_ID] = "SELECT " CALL_COLS " FROM calls WHERE id = ?1",
    [ST_CALL_BY_REQUEST] = "SELECT " CALL_COLS " FROM calls WHERE request_id = ?1 AND epoch = ?2",
    [ST_CALL_CLOSE] = "UPDATE calls SET ended = 1, end_mono = ?2, end_wall = ?3, sent = ?4, "
                      "cls = ?5, http_status = ?6, latency_us = ?7, error = ?8, "
                      "start_mono = ?9, start_wall = ?10, handoff_mono = ?11, "
                      "handoff_wall = ?12, in_flight_at_start = ?13 WHERE id = ?1 AND ended = 0",
    /* ?3 '': every account */
    [ST_PAGE_CALLS] = "SELECT " CALL_COLS " FROM calls WHERE id > ?1 "
                      "AND (?3 = '' OR account = ?3) ORDER BY id LIMIT ?2",
    [ST_PAGE_OP_CALLS] = "SELECT " CALL_COLS " FROM calls WHERE op_id = ?1 AND id > ?2 "
                         "ORDER BY id LIMIT ?3",
    [ST_PAGE_AUDIT] = "SELECT " AUDIT_COLS " FROM audit WHERE op_id = ?1 AND id > ?2 "
                      "ORDER BY id LIMIT ?3",
    /* id order within one state: sorts the state's rows (small states only) */
    [ST_PAGE_STATE] = "SELECT " OP_COLS " FROM operations WHERE state = ?1 AND id > ?2 "
                      "ORDER BY id LIMIT ?3",
    /* ?1 at, ?3 share of the last row seen: a page starts after it (the
     * first page with ?3 past every share: at > ?1) */
    [ST_PAGE_SAMPLES] = "SELECT " SAMPLE_COLS " FROM exit_samples "
                        "WHERE account = " ACCT " AND (at > ?1 OR (at = ?1 AND share > ?3)) "
                        "ORDER BY at, share LIMIT ?2",
    /* every call ever recorded: counted with its insert (a prune deletes rows) */
    [ST_CALLS_TOTAL] = "SELECT n FROM counters WHERE name = 'calls'",
    [ST_AUDIT_INSERT] = "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_SAMPLE_PRUNE] = "DELETE FROM exit_samples WHERE at < ?1",
    /* the figures of this share's samples of a minute ago: a range of the
     * primary key, so the cost does not grow with the table */
    [ST_SAMPLE_BLANK] = "UPDATE exit_samples SET figures = '' WHERE at >= ?1 AND at < ?2 "
                        "AND share = ?3 AND account = " ACCT " AND figures <> ''",
    [ST_PAGE_REFUSALS] = "SELECT at, refused FROM admission_refusals WHERE at > ?1 "
                         "ORDER BY at LIMIT ?2",
    [ST_REFUSALS_ADD] = "INSERT INTO admission_refusals (at, refused) VALUES (?1, ?2) "
                        "ON CONFLICT(at) DO UPDATE SET refused = refused + excluded.refused",
    [ST_REFUSALS_PRUNE] = "DELETE FROM admission_refusals WHERE at < ?1",
    [ST_SAMPLE_LAST] = "SELECT " SAMPLE_COLS " FROM exit_samples WHERE account = " ACCT " "
                       "ORDER BY at DESC, share DESC LIMIT 1",
    [ST_SHARE_OF_EPOCH] = "SELECT share FROM exit_shares WHERE epoch = ?1 AND account = " ACCT " "
                          "ORDER BY share LIMIT 1",
    [ST_SHARE_SET] = "INSERT INTO exit_shares (account, share, epoch) VALUES (" ACCT ", ?1, ?2) "
                     "ON CONFLICT(account, share) DO UPDATE SET epoch = excluded.epoch",
    [ST_SPLIT_GET] = "SELECT shares, max_in_flight, starts_per_second, want_seq FROM exit_split "
                     "WHERE account = " ACCT,
    [ST_HOLD_GET] = "SELECT until_wall FROM exit_hold WHERE account = " ACCT,
    [ST_HOLD_RAISE] =
        "INSERT INTO exit_hold (account, until_wall) VALUES (" ACCT ", ?1) "
        "ON CONFLICT(account) DO UPDATE SET until_wall = max(until_wall, excluded.until_wall)",
    [ST_SPLIT_PUT] = "INSERT OR REPLACE INTO exit_split (account, shares, starts_per_second, "
                     "max_in_flight) VALUES (" ACCT ", ?1, ?2, ?3)",
    [ST_SPLIT_WANT] = "UPDATE exit_split SET want_seq = want_seq + 1 WHERE account = " ACCT,
    /* run-time account controls (issue 26 §5): of the NAMED account (?1),
     * not the handle's */
    [ST_CONTROLS_GET] = "SELECT starts_per_second, max_in_flight, paused, changed_at, changed_by "
                        "FROM account_controls WHERE account = ?1",
    [ST_CONTROLS_PUT] = "INSERT OR REPLACE INTO account_controls (account, starts_per_second, "
                        "max_in_flight, paused, changed_at, changed_by) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_ACCOUNT_AUDIT_INSERT] = "INSERT INTO account_audit (account, at, action, principal, "
                                "reason, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    /* ?1 '': every account */
    [ST_PAGE_ACCOUNT_AUDIT] = "SELECT id, account, at, action, principal, reason, detail "
                              "FROM account_audit WHERE (?1 = '' OR account = ?1) AND id > ?2 "
                              "ORDER BY id LIMIT ?3",
};

/* The statements made from the transition table (core/policy.h): the state
 * lists are the table's, the rest is the predicate of policy_is_due(),
 * policy_sweep() and the recovery's batch in SQL. INDEXED BY pins the plans
 * that stay fast at 1,000,000 rows. Called once at open. */
static int make_table_sql(struct sqlite_store *s)
{
        char first[STATES_SQL_MAX], again[STATES_SQL_MAX], query[STATES_SQL_MAX];
        char waiting[STATES_SQL_MAX], resend[STATES_SQL_MAX], flight[STATES_SQL_MAX];
        char outbox[STATES_SQL_MAX], key_old[3 * STATES_SQL_MAX], backlog[STATES_SQL_MAX];
        char counts[640], open_oldest[384], all_oldest[512], counters[128];
        int n[ST_DYN_COUNT];

#define DYN(id) s->dyn_sql[(id)-ST_DYN_FIRST], sizeof(s->dyn_sql[0])

        store_state_list_sql(policy_group_states(POLICY_GROUP_FIRST), first, sizeof(first));
        store_state_list_sql(policy_group_states(POLICY_GROUP_AGAIN), again, sizeof(again));
        store_state_list_sql(policy_kind_states(TG_KIND_QUERY), query, sizeof(query));
        store_state_list_sql(policy_sources(OP_EV_DEADLINE), waiting, sizeof(waiting));
        store_state_list_sql(policy_sources(OP_EV_KEY_RETENTION), resend, sizeof(resend));
        store_state_list_sql(policy_sources(OP_EV_TAKEOVER), flight, sizeof(flight));
        store_state_list_sql(policy_sources(OP_EV_OUTBOX), outbox, sizeof(outbox));
        (void)outbox; /* no outbox rows in an embedded store */
        /* policy_key_too_old(): ?1 now, ?2 key retention */
        snprintf(key_old, sizeof(key_old),
                 "(%s AND attempts > 0 AND key_first_used > 0 AND key_first_used <= ?1 - ?2)",
                 resend);
        n[ST_PICK_FIRST - ST_DYN_FIRST] =
            snprintf(DYN(ST_PICK_FIRST),
                     "SELECT id FROM operations INDEXED BY ops_account_state "
                     "WHERE account = " ACCT " AND %s AND attempt_limit > 0 AND deadline_at > ?1 "
                     "ORDER BY accepted_at, id LIMIT 1",
                     first);
        /* ?3: a mask of the kinds allowed, 1 queries, 2 POSTs (store_pick_kinds) */
        n[ST_PICK_AGAIN - ST_DYN_FIRST] =
            snprintf(DYN(ST_PICK_AGAIN),
                     "SELECT id FROM operations INDEXED BY ops_again_accepted "
                     "WHERE account = " ACCT " AND %s AND attempt_limit > 0 "
                     "AND next_run_at <= ?1 AND deadline_at > ?1 "
                     "AND NOT %s AND (?3 & (CASE WHEN %s THEN 1 ELSE 2 END)) <> 0 "
                     "ORDER BY accepted_at, id LIMIT 1",
                     again, key_old, query);
        n[ST_NEXT_DUE - ST_DYN_FIRST] =
            snprintf(DYN(ST_NEXT_DUE),
                     "SELECT min(next_run_at) FROM operations INDEXED BY ops_again_due "
                     "WHERE account = " ACCT " AND %s",
                     again);
        n[ST_ANY_PENDING - ST_DYN_FIRST] =
            snprintf(DYN(ST_ANY_PENDING),
                     "SELECT EXISTS (SELECT 1 FROM operations INDEXED BY ops_account_state "
                     "WHERE account = " ACCT " AND %s)",
                     first);
        n[ST_BATCH_DEADLINE - ST_DYN_FIRST] =
            snprintf(DYN(ST_BATCH_DEADLINE),
                     "SELECT " OP_COLS " FROM operations INDEXED BY ops_open_deadline "
                     "WHERE account = " ACCT " AND %s AND deadline_at > 0 AND deadline_at < ?1 "
                     "LIMIT ?3",
                     waiting);
        n[ST_BATCH_KEY_AGE - ST_DYN_FIRST] =
            snprintf(DYN(ST_BATCH_KEY_AGE),
                     "SELECT " OP_COLS " FROM operations INDEXED BY ops_retry_key "
                     "WHERE account = " ACCT " AND %s LIMIT ?3",
                     key_old);
        /* our share's older holders, or a share the split no longer has:
         * never another live share's rows (?1 epoch, ?2 limit, ?3 share,
         * ?4 shares) */
        n[ST_BATCH_RECOVER - ST_DYN_FIRST] =
            snprintf(DYN(ST_BATCH_RECOVER),
                     "SELECT " OP_COLS " FROM operations INDEXED BY ops_account_state "
                     "WHERE account = " ACCT " AND %s "
                     "AND ((share = ?3 AND epoch < ?1) OR share >= ?4) LIMIT ?2",
                     flight);
        /* ?5 '' for any reason; ?6 who owns it (enum store_assignee), ?7 the
         * name; ?8 '' for every account */
        n[ST_PAGE_MANUAL - ST_DYN_FIRST] =
            snprintf(DYN(ST_PAGE_MANUAL),
                     "SELECT " OP_COLS " FROM operations INDEXED BY ops_state_accepted "
                     "WHERE state = '%s' AND id > ?1 AND (accepted_at, id) > (?2, ?3) "
                     "AND (?5 = '' OR reason = ?5) AND (?6 = 0 OR (?6 = 1 AND assignee = ?7) "
                     "OR (?6 = 2 AND assignee = '')) AND (?8 = '' OR account = ?8) "
                     "ORDER BY accepted_at, id LIMIT ?4",
                     op_state_name(OP_MANUAL));
        /* One account's backlog (?1), from the index that leads with it. */
        store_state_list_sql(store_open_states() | POLICY_STATE_BIT(OP_MANUAL), backlog,
                             sizeof(backlog));
        n[ST_COUNT_ACCOUNT - ST_DYN_FIRST] =
            snprintf(DYN(ST_COUNT_ACCOUNT),
                     "SELECT state, count(*) FROM operations INDEXED BY ops_account_state "
                     "WHERE account = ?1 AND %s GROUP BY state",
                     backlog);
        /* One account's operations the provider holds pending (?1). */
        store_provider_pending_sql("INDEXED BY ops_account_state", "?1", DYN(ST_PROVIDER_PENDING));
        n[ST_PROVIDER_PENDING - ST_DYN_FIRST] =
            (int)strlen(s->dyn_sql[ST_PROVIDER_PENDING - ST_DYN_FIRST]);
        /* The backlog (and the final states without a counter) from their
         * index; the counted final ones and the prune totals from the
         * counters, so that the cost does not grow with history. The oldest
         * open operation: one index probe per open state (and manual, for
         * the stats; not for a sample: manual is not open for the exit). */
        if (store_union_sql(store_indexed_states(), COUNT_OF, counts, sizeof(counts)) < 0 ||
            store_counter_list_sql(counters, sizeof(counters)) < 0 ||
            store_union_sql(store_open_states(), OLDEST_OF, open_oldest, sizeof(open_oldest)) < 0 ||
            store_union_sql(store_open_states() | POLICY_STATE_BIT(OP_MANUAL), OLDEST_OF,
                            all_oldest, sizeof(all_oldest)) < 0)
                return TG_ESTORE;
        n[ST_COUNT_BY_STATE - ST_DYN_FIRST] = snprintf(
            DYN(ST_COUNT_BY_STATE), "%s UNION ALL SELECT name, n FROM counters WHERE name IN (%s)",
            counts, counters);
        n[ST_OLDEST_OPEN - ST_DYN_FIRST] =
            snprintf(DYN(ST_OLDEST_OPEN), "SELECT min(m) FROM (%s)", all_oldest);
        /* The backlog (?10..?14) is counted by store_sample_put(). */
        n[ST_SAMPLE_PUT - ST_DYN_FIRST] = snprintf(
            DYN(ST_SAMPLE_PUT),
            "INSERT OR REPLACE INTO exit_samples (account, " SAMPLE_COLS ") "
            "SELECT " ACCT ", ?1, ?2, ?3, ?4, ?5, ?6, ?7, (SELECT min(m) FROM (%s)), ?8, ?9, "
            "?10, ?11, ?12, ?13, ?14",
            open_oldest);
#undef DYN
        for (int i = 0; i < ST_DYN_COUNT; i++)
                if (n[i] < 0 || (size_t)n[i] >= sizeof(s->dyn_sql[i]))
                        return TG_ESTORE;
        return 0;
}

/* ---- small helpers ----------------------------------------------------- */

int store_sqlite_map_rc(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_OK:
        case SQLITE_ROW:
        case SQLITE_DONE:
                return 0;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return TG_EBUSY;
        case SQLITE_CONSTRAINT:
                return TG_ECONFLICT;
        case SQLITE_NOMEM:
                return TG_ENOMEM;
        case SQLITE_FULL:
                return -ENOSPC; /* the API answers 503 store_full, an operator frees space */
        case SQLITE_READONLY:
                return -EROFS;
        case SQLITE_IOERR:
        case SQLITE_CANTOPEN:
                return TG_EIO;
        default:
                return TG_ESTORE;
        }
}

int store_sqlite_stmt_get(struct sqlite_store *s, enum stmt_id id, sqlite3_stmt **ret_stmt)
{
        int acct;

        if (!s->stmts[id]) {
                const char *sql =
                    id >= ST_DYN_FIRST ? s->dyn_sql[id - ST_DYN_FIRST] : fixed_sql[id];
                int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
                                            &s->stmts[id], NULL);

                if (rc != SQLITE_OK) {
                        s->stmts[id] = NULL;
                        return store_sqlite_map_rc(rc);
                }
        }
        /* the handle's account, wherever a statement names it (ACCT) */
        acct = sqlite3_bind_parameter_index(s->stmts[id], ACCT);
        if (acct > 0 && sqlite3_bind_text(s->stmts[id], acct, s->base.account, -1,
                                          SQLITE_TRANSIENT) != SQLITE_OK)
                return TG_ENOMEM;
        *ret_stmt = s->stmts[id];
        return 0;
}

void store_sqlite_stmt_done(sqlite3_stmt *st)
{
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
}

/* Runs a statement that returns no rows (or whose rows do not matter). */
int store_sqlite_stmt_run(sqlite3_stmt *st)
{
        int rc;

        do {
                rc = sqlite3_step(st);
        } while (rc == SQLITE_ROW);
        store_sqlite_stmt_done(st);
        return rc == SQLITE_DONE ? 0 : store_sqlite_map_rc(rc);
}

static int run_simple(struct sqlite_store *s, enum stmt_id id)
{
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, id, &st);

        if (r < 0)
                return r;
        return store_sqlite_stmt_run(st);
}

/* Binders return true on failure so that they chain with ||. */
bool store_sqlite_bind_i64(sqlite3_stmt *st, int idx, int64_t v)
{
        return sqlite3_bind_int64(st, idx, v) != SQLITE_OK;
}

/* Binds a string that outlives the statement's next reset. */
bool store_sqlite_bind_text(sqlite3_stmt *st, int idx, const char *text, size_t bound)
{
        size_t n = strnlen(text, bound);

        return sqlite3_bind_text(st, idx, text, (int)n, SQLITE_STATIC) != SQLITE_OK;
}

const char *store_sqlite_col_text(sqlite3_stmt *st, int col)
{
        const unsigned char *t = sqlite3_column_text(st, col);

        return t ? (const char *)t : "";
}

void store_sqlite_col_copy(sqlite3_stmt *st, int col, char *dst, size_t dst_size)
{
        store_copy_text(dst, dst_size, store_sqlite_col_text(st, col));
}

int store_sqlite_exec_sql(struct sqlite_store *s, const char *sql)
{
        int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);

        return store_sqlite_map_rc(rc);
}

/* ---- transactions -------------------------------------------------------- */

static void rollback(struct sqlite_store *s)
{
        if (!sqlite3_get_autocommit(s->db))
                (void)run_simple(s, ST_ROLLBACK);
}

/* An outcome is committed with synchronous=NORMAL: WAL keeps it across a
 * crash of the process, and if a power loss takes it back, the operation is
 * in_flight again and the next owner reconciles it as unknown with the same
 * key (invariant 3 needs the ATTEMPT on disk before the send, and that
 * commit, in a claim, stays FULL). Halves the fsyncs of a call. Any other
 * write transaction puts FULL back first (every write after open comes
 * through here, so the switch is made only when the kind changes; the two
 * pragmas are prepared once). No retries: a busy database answers TG_EBUSY
 * after the busy timeout, and the caller asks again. */
int store_sqlite_tx(struct store *store, enum store_tx kind, unsigned flags, store_tx_fn fn,
                    void *ctx)
{
        struct sqlite_store *s = S(store);
        bool write = kind != STORE_TX_READ;
        int r;

        (void)flags; /* a COMMIT's outcome is never unknown here */
        if (kind == STORE_TX_OUTCOME && !s->sync_normal) {
                r = run_simple(s, ST_SYNC_NORMAL);
                if (r < 0)
                        return r;
                s->sync_normal = true;
        } else if (kind == STORE_TX_WRITE && s->sync_normal) {
                r = run_simple(s, ST_SYNC_FULL);
                if (r < 0)
                        return r; /* never write an attempt or an acceptance below FULL */
                s->sync_normal = false;
        }
        r = run_simple(s, write ? ST_BEGIN_IMMEDIATE : ST_BEGIN);
        if (r == 0) {
                r = fn(store, ctx);
                if (r < 0)
                        rollback(s);
                else if ((r = run_simple(s, ST_COMMIT)) < 0)
                        rollback(s);
        }
        return r;
}

bool store_sqlite_tx_commit_unknown(const struct store *store)
{
        (void)store;
        return false;
}

/* ---- open / migrate / close ---------------------------------------------- */

static int user_version(struct sqlite_store *s, int *ret_version)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
        int r = 0;

        if (rc != SQLITE_OK)
                return store_sqlite_map_rc(rc);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                *ret_version = sqlite3_column_int(st, 0);
        else
                r = rc == SQLITE_DONE ? TG_ESTORE : store_sqlite_map_rc(rc);
        sqlite3_finalize(st);
        return r;
}

/* TG_ESTORE when PRAGMA foreign_key_check finds a row whose parent is gone. */
static int foreign_keys_hold(struct sqlite_store *s)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, "PRAGMA foreign_key_check", -1, &st, NULL);

        if (rc != SQLITE_OK)
                return store_sqlite_map_rc(rc);
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc == SQLITE_ROW)
                return TG_ESTORE;
        return rc == SQLITE_DONE ? 0 : store_sqlite_map_rc(rc);
}

/* Brings the schema to MIGRATION_COUNT, one transaction per step. The version
 * is re-read inside each write transaction, so two processes opening a new
 * file at once do not both run a step. A current schema is found by a read
 * first: opening takes no write lock then, so a process opening the store (a
 * standby dispatcher, a command) does not wait on a writer that holds it (an
 * owner paused inside a transaction). */
static int migrate_steps(struct sqlite_store *s)
{
        int current = -1;

        if (user_version(s, &current) == 0 && current == MIGRATION_COUNT)
                return 0;
        for (;;) {
                char bump[64];
                int version = 0;
                int r = store_sqlite_exec_sql(s, "BEGIN IMMEDIATE");

                if (r < 0)
                        return r;
                r = user_version(s, &version);
                if (r == 0 && version > MIGRATION_COUNT)
                        r = TG_ESTORE; /* written by a newer tollgate */
                if (r < 0 || version == MIGRATION_COUNT) {
                        store_sqlite_exec_sql(s, r < 0 ? "ROLLBACK" : "COMMIT");
                        return r;
                }
                snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", version + 1);
                r = store_sqlite_exec_sql(s, migrations[version]);
                if (r == 0)
                        r = foreign_keys_hold(s);
                if (r == 0)
                        r = store_sqlite_exec_sql(s, bump);
                if (r == 0)
                        r = store_sqlite_exec_sql(s, "COMMIT");
                if (r < 0) {
                        rollback(s);
                        return r;
                }
        }
}

/* A step may rebuild a table others reference (a CHECK changes only so):
 * foreign keys are off while the steps run (the pragma is a no-op inside a
 * transaction, so it is set around them) and every step is checked by
 * foreign_keys_hold() before its commit. They are on again afterwards,
 * whatever happened. */
static int migrate(struct sqlite_store *s)
{
        int r = store_sqlite_exec_sql(s, "PRAGMA foreign_keys = OFF;");
        int on;

        if (r == 0)
                r = migrate_steps(s);
        on = store_sqlite_exec_sql(s, "PRAGMA foreign_keys = ON;");
        return r < 0 ? r : on;
}

static void store_sqlite_close(struct store *store)
{
        struct sqlite_store *s = S(store);

        if (!s)
                return;
        for (int i = 0; i < ST_COUNT; i++)
                sqlite3_finalize(s->stmts[i]);
        for (int i = 0; i < LIFE_COUNT; i++)
                sqlite3_finalize(s->life[i]);
        sqlite3_close(s->db);
        store_sqlite_lock_drop_all(store);
        free(s->lock_path);
        free(s->db_path);
        free(s);
}

static int store_sqlite_set_busy_timeout(struct store *store, int64_t ms)
{
        return sqlite3_busy_timeout(S(store)->db, (int)ms) == SQLITE_OK ? 0 : TG_ESTORE;
}

static const struct store_ops store_sqlite_ops;

#define RESTORE_HINT "restore it from a backup, see \"Backups\" in docs/operating.md"

/* What an operator can do about a store that does not open, said after
 * SQLite's own words (which name neither the folder nor the cure). */
static const char *open_hint(struct sqlite_store *s, const char *where, int r)
{
        char dir[PATH_MAX];
        const char *slash = strrchr(where, '/');
        size_t n = slash ? (size_t)(slash - where) : 0;
        int code = s->db ? sqlite3_errcode(s->db) & 0xff : SQLITE_OK;

        if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
                return " (the file is corrupted, or not an SQLite database: " RESTORE_HINT ")";
        if (r == -ENOSPC)
                return " (no space left on its disk)";
        if (r == TG_ESTORE)
                return " (not a tollgate store, or one written by a newer tollgate)";
        if (r != TG_EIO && r != -EROFS)
                return "";
        /* WAL needs the folder too: <db>-wal and <db>-shm are made beside it */
        if (n == 0)
                snprintf(dir, sizeof(dir), ".");
        else
                snprintf(dir, sizeof(dir), "%.*s", (int)n, where);
        if (access(dir, W_OK | X_OK) != 0)
                return errno == EROFS ? " (its folder is on a read-only mount)"
                                      : " (its folder cannot be written: tollgate makes its "
                                        "-wal, -shm and lock files beside it)";
        if (access(where, F_OK) == 0 && access(where, W_OK) != 0)
                return " (the file cannot be written)";
        return "";
}

/* Reads the whole file (PRAGMA quick_check: every page of every b-tree,
 * without the slower index-against-table comparison of integrity_check), so
 * that a daemon refuses a damaged store at start instead of failing later on
 * whichever rows the damage hit. TG_ESTORE with err filled when it is not
 * whole. */
static int quick_check(struct sqlite_store *s, const char *where,
                       const struct store_open_opts *opts)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL);
        char what[200];
        int r = 0;

        if (rc != SQLITE_OK)
                return store_sqlite_map_rc(rc);
        rc = sqlite3_step(st);
        store_copy_text(what, sizeof(what),
                        rc == SQLITE_ROW ? store_sqlite_col_text(st, 0) : sqlite3_errmsg(s->db));
        /* its report has lines: the message is one */
        for (char *c = what; *c; c++)
                if (*c == '\n')
                        *c = ' ';
        if (rc != SQLITE_ROW || strcmp(what, "ok") != 0) {
                r = rc == SQLITE_ROW || (rc & 0xff) == SQLITE_CORRUPT ||
                            (rc & 0xff) == SQLITE_NOTADB
                        ? TG_ESTORE
                        : store_sqlite_map_rc(rc);
                if (opts->err && opts->err_size)
                        snprintf(opts->err, opts->err_size,
                                 "cannot open the SQLite store %s: %s (PRAGMA quick_check: %s); "
                                 "%s",
                                 where, r == TG_ESTORE ? "the file is corrupted" : "cannot read it",
                                 what, r == TG_ESTORE ? RESTORE_HINT : tg_strerror(r));
        }
        sqlite3_finalize(st);
        return r;
}

int store_sqlite_open(const char *where, const struct store_open_opts *opts,
                      struct store **ret_store)
{
        struct sqlite_store *s;
        size_t n = strnlen(where, PATH_MAX);
        struct stat st;
        int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
        int rc, r;

        if (n == 0 || n >= PATH_MAX)
                return TG_EINVAL;
        if (opts->existing) {
                /* a read-only command never leaves an empty store behind */
                if (stat(where, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
                        if (opts->err && opts->err_size)
                                snprintf(opts->err, opts->err_size, "no store at %s%s", where,
                                         stat(where, &st) == 0 ? " (an empty file)" : "");
                        return TG_ENOTFOUND;
                }
        } else {
                flags |= SQLITE_OPEN_CREATE;
        }
        s = calloc(1, sizeof(*s));
        if (!s)
                return TG_ENOMEM;
        s->base.ops = &store_sqlite_ops;
        s->lock_fd = -1;
        s->split_fd = -1;
        s->lock_path = malloc(n + SQLITE_LOCK_SUFFIX_MAX);
        s->db_path = strndup(where, n);
        if (!s->lock_path || !s->db_path) {
                r = TG_ENOMEM;
                goto fail;
        }
        s->lock_path[0] = '\0';
        r = make_table_sql(s);
        if (r < 0)
                goto fail;
        rc = sqlite3_open_v2(where, &s->db, flags, NULL);
        if (rc != SQLITE_OK) {
                r = store_sqlite_map_rc(rc);
                if (opts->err && opts->err_size)
                        snprintf(opts->err, opts->err_size, "cannot open the SQLite store %s: %s",
                                 where, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
                goto fail;
        }
        sqlite3_extended_result_codes(s->db, 1);
        sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
        /* SQLite opens a file it may not write read-only without a word, and
         * a daemon on it would fail at its first write instead (an API that
         * says it is up, an exit that never starts). A command that only
         * reads (opts->existing) may read it. */
        if (!opts->existing && sqlite3_db_readonly(s->db, "main") == 1) {
                r = -EROFS;
                if (opts->err && opts->err_size)
                        snprintf(opts->err, opts->err_size,
                                 "cannot open the SQLite store %s: it is read-only (the file "
                                 "or its folder cannot be written: permissions, or a read-only "
                                 "mount); tollgate writes its store",
                                 where);
                goto fail;
        }
        /* WAL: readers never block the writer; synchronous=FULL: a commit
         * that returned is on disk (commit before reply). */
        r = store_sqlite_exec_sql(s, "PRAGMA journal_mode = WAL;"
                                     "PRAGMA synchronous = FULL;"
                                     "PRAGMA foreign_keys = ON;"
                                     "PRAGMA trusted_schema = OFF;");
        if (r < 0)
                goto fail;
        r = migrate(s);
        if (r < 0)
                goto fail;
        if (opts->check) {
                r = quick_check(s, where, opts);
                if (r < 0)
                        goto fail;
        }
        *ret_store = &s->base;
        return 0;
fail:
        if (r < 0 && opts->err && opts->err_size && !opts->err[0])
                snprintf(opts->err, opts->err_size, "cannot open the SQLite store %s: %s%s", where,
                         s->db && sqlite3_errcode(s->db) != SQLITE_OK ? sqlite3_errmsg(s->db)
                                                                      : tg_strerror(r),
                         open_hint(s, where, r));
        store_sqlite_close(&s->base);
        return r;
}

static const struct store_ops store_sqlite_ops = {
    .name = "sqlite",
    .close = store_sqlite_close,
    STORE_BACKEND_OPS(store_sqlite),
    .counter_add = store_sqlite_counter_add,
    .prune_pick = store_sqlite_prune_pick,
    .prune_delete = store_sqlite_prune_delete,
    .moved = store_sqlite_moved,
    .backup = store_sqlite_backup,
    .set_busy_timeout = store_sqlite_set_busy_timeout,
    .has_outbox = false,
};
