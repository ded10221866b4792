/*
 * store_sqlite — the embedded store backend: one SQLite file in WAL mode with
 * synchronous=FULL (a commit that returned survives power loss), a busy
 * timeout, foreign keys, and a versioned schema (PRAGMA user_version, one
 * migration per step, each in its own transaction).
 *
 * Exit ownership is an open-file-description lock (F_OFD_SETLK, or flock()
 * where OFD locks do not exist) on "<db path>.owner", held by the struct
 * store until release or close. Unlike a POSIX record lock it conflicts with
 * a second handle of the same process, and closing some other descriptor of
 * the file does not drop it. Each acquisition bumps owner.epoch in the
 * database; claims check that epoch inside their transaction, settles check
 * the epoch the operation was claimed under.
 *
 * Invariants:
 *   - every public op is one short transaction (BEGIN IMMEDIATE when it
 *     writes), committed or rolled back before it returns; list callbacks run
 *     between pages, never inside a statement or transaction, so a callback
 *     may call back into the store;
 *   - operations, calls and audit rows are never deleted and audit rows are
 *     never updated (triggers refuse it);
 *   - nothing SQLite-specific (codes, messages, SQL) leaves this file: every
 *     failure is mapped to a TG_E* code;
 *   - ret_* outputs are written only on success.
 */
#define _GNU_SOURCE /* F_OFD_SETLK */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "store/store_backend.h"

#define BUSY_TIMEOUT_MS 5000
#define PAGE_ROWS       64 /* rows fetched per page by the list walks */
#define RECOVER_BATCH   64

/* ---- schema ------------------------------------------------------------ */

/* Ordered migrations: migrations[i] takes user_version i to i+1. Append only;
 * never edit one that has shipped. */
static const char *const migrations[] = {
    /* 1: the initial schema. */
    "CREATE TABLE operations ("
    "  id INTEGER PRIMARY KEY,"
    "  operation_id TEXT NOT NULL UNIQUE,"
    /* the request payload, column by column: same body = all equal */
    "  payment_id TEXT NOT NULL,"
    "  amount INTEGER NOT NULL CHECK (amount > 0),"
    "  currency TEXT NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('pending','in_flight','retry_wait',"
    "    'unknown','succeeded','rejected','manual')),"
    "  reason TEXT NOT NULL DEFAULT 'none',"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  attempt_limit INTEGER NOT NULL,"
    "  queries INTEGER NOT NULL DEFAULT 0,"
    "  query_limit INTEGER NOT NULL,"
    "  accepted_at INTEGER NOT NULL,"
    "  deadline_at INTEGER NOT NULL,"
    "  key_first_used INTEGER NOT NULL DEFAULT 0,"
    "  next_run_at INTEGER NOT NULL DEFAULT 0,"
    "  updated_at INTEGER NOT NULL,"
    "  last_wait_ms INTEGER NOT NULL DEFAULT 0,"
    "  operator_resend INTEGER NOT NULL DEFAULT 0 CHECK (operator_resend IN (0, 1)),"
    "  epoch INTEGER NOT NULL DEFAULT 0,"
    "  refund_id TEXT NOT NULL DEFAULT '',"
    "  last_http_status INTEGER NOT NULL DEFAULT 0,"
    "  last_class TEXT NOT NULL DEFAULT 'unknown',"
    "  source TEXT NOT NULL DEFAULT 'api'"
    ");"
    /* group first (pending by accepted_at), manual list, counts by state,
         * in_flight for recovery, oldest open per state */
    "CREATE INDEX ops_state_accepted ON operations(state, accepted_at);"
    /* group again: walk by (accepted_at, id); the due test and the state are
     * answered from the index itself (covering), never from the table */
    "CREATE INDEX ops_again_accepted ON operations(accepted_at, id, next_run_at, state)"
    "  WHERE state IN ('retry_wait','unknown');"
    /* earliest next_run_at of the again group */
    "CREATE INDEX ops_again_due ON operations(next_run_at)"
    "  WHERE state IN ('retry_wait','unknown');"
    /* the deadline sweep */
    "CREATE INDEX ops_open_deadline ON operations(deadline_at)"
    "  WHERE state IN ('pending','retry_wait','unknown');"
    "CREATE TABLE calls ("
    "  id INTEGER PRIMARY KEY,"
    "  op_id INTEGER NOT NULL REFERENCES operations(id),"
    "  operation_id TEXT NOT NULL,"
    "  kind TEXT NOT NULL CHECK (kind IN ('first','retry','query','manual')),"
    "  attempt INTEGER NOT NULL,"
    "  request_id TEXT NOT NULL,"
    "  epoch INTEGER NOT NULL,"
    "  start_mono INTEGER NOT NULL,"
    "  start_wall INTEGER NOT NULL,"
    "  in_flight_at_start INTEGER NOT NULL,"
    "  ended INTEGER NOT NULL DEFAULT 0 CHECK (ended IN (0, 1)),"
    "  end_mono INTEGER NOT NULL DEFAULT 0,"
    "  end_wall INTEGER NOT NULL DEFAULT 0,"
    "  sent INTEGER NOT NULL DEFAULT 0,"
    "  cls TEXT NOT NULL DEFAULT 'unknown',"
    "  http_status INTEGER NOT NULL DEFAULT 0,"
    "  latency_us INTEGER NOT NULL DEFAULT 0,"
    "  error TEXT NOT NULL DEFAULT ''"
    ");"
    "CREATE INDEX calls_op ON calls(op_id, id);"
    "CREATE TABLE owner ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  epoch INTEGER NOT NULL"
    ");"
    "INSERT INTO owner(id, epoch) VALUES (1, 0);"
    "CREATE TABLE audit ("
    "  id INTEGER PRIMARY KEY,"
    "  op_id INTEGER NOT NULL REFERENCES operations(id),"
    "  at INTEGER NOT NULL,"
    "  action TEXT NOT NULL,"
    "  operator_name TEXT NOT NULL,"
    "  reason TEXT NOT NULL,"
    "  detail TEXT NOT NULL"
    ");"
    "CREATE INDEX audit_op ON audit(op_id, id);"
    /* nothing is ever deleted; the audit log is append-only */
    "CREATE TRIGGER operations_no_delete BEFORE DELETE ON operations"
    "  BEGIN SELECT RAISE(ABORT, 'operations are never deleted'); END;"
    "CREATE TRIGGER calls_no_delete BEFORE DELETE ON calls"
    "  BEGIN SELECT RAISE(ABORT, 'calls are never deleted'); END;"
    "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit"
    "  BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;"
    "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit"
    "  BEGIN SELECT RAISE(ABORT, 'audit is append-only'); END;",
    /* 2: the key-retention sweep walks only re-sends, by key age */
    "CREATE INDEX ops_retry_key ON operations(key_first_used) WHERE state = 'retry_wait';",
    /* 3: the running exit's per-second samples (operational data, pruned) */
    "CREATE TABLE exit_samples ("
    "  at INTEGER PRIMARY KEY,"
    "  epoch INTEGER NOT NULL,"
    "  in_flight INTEGER NOT NULL,"
    "  starts INTEGER NOT NULL,"
    "  call_ends INTEGER NOT NULL,"
    "  op_closes INTEGER NOT NULL,"
    "  held INTEGER NOT NULL CHECK (held IN (0, 1)),"
    "  oldest_open INTEGER,"
    "  figures TEXT NOT NULL DEFAULT ''"
    ");",
    /* 4: shares of the account quota (more than one dispatcher): the split
     * in force, each share's current epoch (the counter stays owner.epoch),
     * and the share every claim was made under */
    "CREATE TABLE exit_split ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  shares INTEGER NOT NULL,"
    "  starts_per_second REAL NOT NULL,"
    "  max_in_flight INTEGER NOT NULL"
    ");"
    "CREATE TABLE exit_shares ("
    "  share INTEGER PRIMARY KEY,"
    "  epoch INTEGER NOT NULL"
    ");"
    "CREATE INDEX shares_epoch ON exit_shares(epoch);"
    "INSERT INTO exit_shares (share, epoch) SELECT 0, epoch FROM owner WHERE id = 1;"
    "ALTER TABLE operations ADD COLUMN share INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE calls ADD COLUMN share INTEGER NOT NULL DEFAULT 0;",
};
#define MIGRATION_COUNT ((int)(sizeof(migrations) / sizeof(migrations[0])))

/* ---- statements (prepared once per connection, on first use) ------------ */

#define OP_COLS                                                                                    \
        "id, operation_id, payment_id, amount, currency, state, reason, attempts, "                \
        "attempt_limit, queries, query_limit, accepted_at, deadline_at, key_first_used, "          \
        "next_run_at, updated_at, last_wait_ms, operator_resend, epoch, refund_id, "               \
        "last_http_status, last_class, source"

#define CALL_COLS                                                                                  \
        "id, op_id, operation_id, kind, attempt, request_id, epoch, start_mono, start_wall, "      \
        "in_flight_at_start, ended, end_mono, end_wall, sent, cls, http_status, latency_us, "      \
        "error"

#define AUDIT_COLS  "id, op_id, at, action, operator_name, reason, detail"
#define SAMPLE_COLS "at, epoch, in_flight, starts, call_ends, op_closes, held, oldest_open, figures"

#define AGAIN_STATES "state IN ('retry_wait','unknown')"
#define WAIT_STATES  "state IN ('pending','retry_wait','unknown')"
/* A re-send whose key is too old to re-use (?1 now, ?2 key retention). */
#define KEY_TOO_OLD                                                                                \
        "(state = 'retry_wait' AND attempts > 0 AND key_first_used > 0 AND "                       \
        "key_first_used <= ?1 - ?2)"

enum stmt_id {
        ST_BEGIN,
        ST_BEGIN_IMMEDIATE,
        ST_COMMIT,
        ST_ROLLBACK,
        ST_OP_BY_KEY,
        ST_OP_BY_ID,
        ST_OP_INSERT,
        ST_OP_WRITE,
        ST_OWNER_EPOCH,
        ST_OWNER_BUMP,
        ST_PICK_FIRST,
        ST_PICK_AGAIN,
        ST_CALL_INSERT,
        ST_CALL_BY_ID,
        ST_CALL_SETTLE,
        ST_RECOVER_PICK,
        ST_RECOVER_CALLS,
        ST_SWEEP_AUDIT,
        ST_SWEEP,
        ST_SWEEP_KEY_AUDIT,
        ST_SWEEP_KEY,
        ST_NEXT_DUE,
        ST_ANY_PENDING,
        ST_LIST_CALLS,
        ST_LIST_OP_CALLS,
        ST_COUNT_BY_STATE,
        ST_OLDEST_OPEN,
        ST_CALLS_TOTAL,
        ST_LIST_MANUAL,
        ST_LIST_AUDIT,
        ST_AUDIT_INSERT,
        ST_SAMPLE_PUT,
        ST_SAMPLE_PRUNE,
        ST_SAMPLE_LIST,
        ST_SAMPLE_LAST,
        ST_SHARE_OF_EPOCH,
        ST_SHARE_SET,
        ST_SPLIT_GET,
        ST_SPLIT_PUT,
        ST_OP_CLAIM,
        ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN",
    [ST_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_OP_BY_KEY] = "SELECT " OP_COLS " FROM operations WHERE operation_id = ?1",
    [ST_OP_BY_ID] = "SELECT " OP_COLS " FROM operations WHERE id = ?1",
    [ST_OP_INSERT] = "INSERT INTO operations (operation_id, payment_id, amount, currency, "
                     "state, attempt_limit, query_limit, accepted_at, deadline_at, "
                     "updated_at, source) "
                     "VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?6, ?7, ?8, ?7, 'api')",
    /* Every mutable column; the payload, accepted_at and source never change. */
    [ST_OP_WRITE] = "UPDATE operations SET state = ?2, reason = ?3, attempts = ?4, "
                    "attempt_limit = ?5, queries = ?6, query_limit = ?7, deadline_at = ?8, "
                    "key_first_used = ?9, next_run_at = ?10, updated_at = ?11, "
                    "last_wait_ms = ?12, operator_resend = ?13, epoch = ?14, "
                    "refund_id = ?15, last_http_status = ?16, last_class = ?17 "
                    "WHERE id = ?1",
    [ST_OWNER_EPOCH] = "SELECT epoch FROM owner WHERE id = 1",
    [ST_OWNER_BUMP] = "UPDATE owner SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch",
    /* INDEXED BY pins the plans that stay fast at 1,000,000 rows. */
    [ST_PICK_FIRST] = "SELECT id FROM operations INDEXED BY ops_state_accepted "
                      "WHERE state = 'pending' AND deadline_at > ?1 "
                      "ORDER BY accepted_at, id LIMIT 1",
    [ST_PICK_AGAIN] = "SELECT id FROM operations INDEXED BY ops_again_accepted "
                      "WHERE " AGAIN_STATES " AND next_run_at <= ?1 AND deadline_at > ?1 "
                      "AND NOT " KEY_TOO_OLD " AND (?3 = 0 OR state = 'retry_wait') "
                      "ORDER BY accepted_at, id LIMIT 1",
    [ST_CALL_INSERT] = "INSERT INTO calls (op_id, operation_id, kind, attempt, request_id, "
                       "epoch, start_mono, start_wall, in_flight_at_start, share) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [ST_CALL_BY_ID] = "SELECT " CALL_COLS " FROM calls WHERE id = ?1",
    [ST_CALL_SETTLE] = "UPDATE calls SET ended = 1, end_mono = ?2, end_wall = ?3, sent = ?4, "
                       "cls = ?5, http_status = ?6, latency_us = ?7, error = ?8, "
                       "start_mono = CASE WHEN ?9 > 0 THEN ?9 ELSE start_mono END, "
                       "start_wall = CASE WHEN ?10 > 0 THEN ?10 ELSE start_wall END "
                       "WHERE id = ?1 AND ended = 0",
    [ST_RECOVER_PICK] = "SELECT " OP_COLS " FROM operations INDEXED BY ops_state_accepted "
                        "WHERE state = 'in_flight' AND "
                        /* our share's older holders, or a share the split no
                         * longer has: never another live share's rows */
                        "((share = ?3 AND epoch < ?1) OR share >= ?4) LIMIT ?2",
    /* sent = 1: the request may have left (it was claimed to be sent); the
     * conservative answer, as for any call whose outcome is unknown */
    [ST_RECOVER_CALLS] = "UPDATE calls SET ended = 1, end_wall = ?2, cls = 'unknown', "
                         "sent = 1, error = 'outcome unknown (owner lost)' "
                         "WHERE op_id = ?1 AND ended = 0",
    [ST_SWEEP_AUDIT] = "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
                       "SELECT id, ?1, 'event', 'tollgate', 'deadline', "
                       "'deadline passed while ' || state || ': to manual' "
                       "FROM operations INDEXED BY ops_open_deadline "
                       "WHERE " WAIT_STATES " AND deadline_at < ?1",
    [ST_SWEEP] = "UPDATE operations INDEXED BY ops_open_deadline "
                 "SET state = 'manual', reason = 'deadline', next_run_at = 0, "
                 "operator_resend = 0, updated_at = ?1 "
                 "WHERE " WAIT_STATES " AND deadline_at < ?1",
    [ST_SWEEP_KEY_AUDIT] = "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
                           "SELECT id, ?1, 'event', 'tollgate', 'key_retention', "
                           "'idempotency key past retention before its re-send: to manual' "
                           "FROM operations INDEXED BY ops_retry_key WHERE " KEY_TOO_OLD,
    [ST_SWEEP_KEY] = "UPDATE operations INDEXED BY ops_retry_key "
                     "SET state = 'manual', reason = 'key_retention', next_run_at = 0, "
                     "operator_resend = 0, updated_at = ?1 WHERE " KEY_TOO_OLD,
    [ST_NEXT_DUE] = "SELECT min(next_run_at) FROM operations INDEXED BY ops_again_due "
                    "WHERE " AGAIN_STATES,
    [ST_ANY_PENDING] = "SELECT EXISTS (SELECT 1 FROM operations WHERE state = 'pending')",
    [ST_LIST_CALLS] = "SELECT " CALL_COLS " FROM calls WHERE id > ?1 ORDER BY id LIMIT ?2",
    [ST_LIST_OP_CALLS] = "SELECT " CALL_COLS " FROM calls WHERE op_id = ?1 AND id > ?2 "
                         "ORDER BY id LIMIT ?3",
    [ST_COUNT_BY_STATE] = "SELECT state, count(*) FROM operations GROUP BY state",
    /* One index probe per open state rather than a scan of them all. */
    [ST_OLDEST_OPEN] =
        "SELECT min(m) FROM ("
        "SELECT min(accepted_at) AS m FROM operations WHERE state = 'pending' UNION ALL "
        "SELECT min(accepted_at) FROM operations WHERE state = 'in_flight' UNION ALL "
        "SELECT min(accepted_at) FROM operations WHERE state = 'retry_wait' UNION ALL "
        "SELECT min(accepted_at) FROM operations WHERE state = 'unknown' UNION ALL "
        "SELECT min(accepted_at) FROM operations WHERE state = 'manual')",
    /* Calls are never deleted (trigger) and a rolled-back insert frees its
         * id again, so the largest id is the count, without a scan. */
    [ST_CALLS_TOTAL] = "SELECT coalesce(max(id), 0) FROM calls",
    [ST_LIST_MANUAL] = "SELECT " OP_COLS " FROM operations INDEXED BY ops_state_accepted "
                       "WHERE state = 'manual' AND id > ?1 AND (accepted_at, id) > (?2, ?3) "
                       "ORDER BY accepted_at, id LIMIT ?4",
    [ST_LIST_AUDIT] = "SELECT " AUDIT_COLS " FROM audit WHERE op_id = ?1 AND id > ?2 "
                      "ORDER BY id LIMIT ?3",
    [ST_AUDIT_INSERT] = "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    /* The oldest open operation is read here, in the same statement: one
     * index probe per open state (manual is not open for the exit). */
    [ST_SAMPLE_PUT] = "INSERT OR REPLACE INTO exit_samples (" SAMPLE_COLS ") "
                      "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, (SELECT min(m) FROM ("
                      "SELECT min(accepted_at) AS m FROM operations WHERE state = 'pending' "
                      "UNION ALL SELECT min(accepted_at) FROM operations WHERE state = 'in_flight' "
                      "UNION ALL SELECT min(accepted_at) FROM operations "
                      "WHERE state = 'retry_wait' UNION ALL SELECT min(accepted_at) "
                      "FROM operations WHERE state = 'unknown')), ?8",
    [ST_SAMPLE_PRUNE] = "DELETE FROM exit_samples WHERE at < ?1",
    [ST_SAMPLE_LIST] = "SELECT " SAMPLE_COLS " FROM exit_samples WHERE at > ?1 ORDER BY at "
                       "LIMIT ?2",
    [ST_SAMPLE_LAST] = "SELECT " SAMPLE_COLS " FROM exit_samples ORDER BY at DESC LIMIT 1",
    [ST_SHARE_OF_EPOCH] = "SELECT share FROM exit_shares WHERE epoch = ?1 ORDER BY share LIMIT 1",
    [ST_SHARE_SET] = "INSERT INTO exit_shares (share, epoch) VALUES (?1, ?2) "
                     "ON CONFLICT(share) DO UPDATE SET epoch = excluded.epoch",
    [ST_SPLIT_GET] = "SELECT shares, max_in_flight, starts_per_second FROM exit_split WHERE id = 1",
    [ST_SPLIT_PUT] = "INSERT OR REPLACE INTO exit_split (id, shares, starts_per_second, "
                     "max_in_flight) VALUES (1, ?1, ?2, ?3)",
    /* what a claim changes, and the share it is made under */
    [ST_OP_CLAIM] = "UPDATE operations SET state = 'in_flight', attempts = ?2, queries = ?3, "
                    "key_first_used = ?4, epoch = ?5, share = ?6, updated_at = ?7 WHERE id = ?1",
};

struct sqlite_store {
        struct store base; /* first: store.c sees only this */
        sqlite3 *db;
        sqlite3_stmt *stmts[ST_COUNT];
        char *db_path;   /* as opened */
        char *lock_path; /* of our share: "<db path>.owner" (share 0), ".share<k>" */
        int lock_fd;     /* >= 0 while this handle owns a share of the exit */
        int64_t epoch;   /* the epoch of our acquisition, 0 when not owner */
        unsigned share;  /* the share we hold, when lock_fd >= 0 */
        /* synchronous=NORMAL is in force (only for a settle); any other write
         * transaction puts FULL back first. */
        bool sync_normal, in_settle;
};

static struct sqlite_store *S(struct store *store)
{
        return (struct sqlite_store *)store;
}

/* ---- small helpers ----------------------------------------------------- */

static int map_rc(int rc)
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
        case SQLITE_IOERR:
        case SQLITE_FULL:
        case SQLITE_CANTOPEN:
        case SQLITE_READONLY:
                return TG_EIO;
        default:
                return TG_ESTORE;
        }
}

static int stmt_get(struct sqlite_store *s, enum stmt_id id, sqlite3_stmt **ret_stmt)
{
        if (!s->stmts[id]) {
                int rc = sqlite3_prepare_v3(s->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                            &s->stmts[id], NULL);

                if (rc != SQLITE_OK) {
                        s->stmts[id] = NULL;
                        return map_rc(rc);
                }
        }
        *ret_stmt = s->stmts[id];
        return 0;
}

static void stmt_done(sqlite3_stmt *st)
{
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
}

/* Runs a statement that returns no rows (or whose rows do not matter). */
static int stmt_run(sqlite3_stmt *st)
{
        int rc;

        do {
                rc = sqlite3_step(st);
        } while (rc == SQLITE_ROW);
        stmt_done(st);
        return rc == SQLITE_DONE ? 0 : map_rc(rc);
}

static int run_simple(struct sqlite_store *s, enum stmt_id id)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, id, &st);

        if (r < 0)
                return r;
        return stmt_run(st);
}

static int exec_sql(struct sqlite_store *s, const char *sql);

static int tx_begin(struct sqlite_store *s, bool write)
{
        if (write && s->sync_normal && !s->in_settle) {
                int r = exec_sql(s, "PRAGMA synchronous = FULL;");
                if (r < 0)
                        return r; /* never write an attempt or an acceptance below FULL */
                s->sync_normal = false;
        }
        return run_simple(s, write ? ST_BEGIN_IMMEDIATE : ST_BEGIN);
}

static int tx_commit(struct sqlite_store *s)
{
        int r = run_simple(s, ST_COMMIT);

        if (r < 0 && !sqlite3_get_autocommit(s->db))
                (void)run_simple(s, ST_ROLLBACK);
        return r;
}

static void tx_rollback(struct sqlite_store *s)
{
        if (!sqlite3_get_autocommit(s->db))
                (void)run_simple(s, ST_ROLLBACK);
}

/* Binders return true on failure so that they chain with ||. */
static bool bind_i64(sqlite3_stmt *st, int idx, int64_t v)
{
        return sqlite3_bind_int64(st, idx, v) != SQLITE_OK;
}

/* Binds a string that outlives the statement's next reset. */
static bool bind_text(sqlite3_stmt *st, int idx, const char *text, size_t bound)
{
        size_t n = strnlen(text, bound);

        return sqlite3_bind_text(st, idx, text, (int)n, SQLITE_STATIC) != SQLITE_OK;
}

static const char *col_text(sqlite3_stmt *st, int col)
{
        const unsigned char *t = sqlite3_column_text(st, col);

        return t ? (const char *)t : "";
}

static void col_copy(sqlite3_stmt *st, int col, char *dst, size_t dst_size)
{
        store_copy_text(dst, dst_size, col_text(st, col));
}

static bool col_unsigned(sqlite3_stmt *st, int col, unsigned *ret)
{
        int64_t v = sqlite3_column_int64(st, col);

        if (v < 0 || v > (int64_t)UINT_MAX)
                return false;
        *ret = (unsigned)v;
        return true;
}

/* Decodes an OP_COLS row. TG_ESTORE for a row that breaks the format (say,
 * an outbox writer's unknown state). */
static int read_op(sqlite3_stmt *st, struct op_record *ret_op)
{
        struct op_record op;
        bool ok = true;

        memset(&op, 0, sizeof(op));
        op.id = sqlite3_column_int64(st, 0);
        col_copy(st, 1, op.req.operation_id, sizeof(op.req.operation_id));
        col_copy(st, 2, op.req.payment_id, sizeof(op.req.payment_id));
        op.req.amount = sqlite3_column_int64(st, 3);
        col_copy(st, 4, op.req.currency, sizeof(op.req.currency));
        ok = ok && store_state_parse(col_text(st, 5), &op.state) == 0;
        ok = ok && store_reason_parse(col_text(st, 6), &op.reason) == 0;
        ok = ok && col_unsigned(st, 7, &op.attempts);
        ok = ok && col_unsigned(st, 8, &op.attempt_limit);
        ok = ok && col_unsigned(st, 9, &op.queries);
        ok = ok && col_unsigned(st, 10, &op.query_limit);
        op.accepted_at = sqlite3_column_int64(st, 11);
        op.deadline_at = sqlite3_column_int64(st, 12);
        op.key_first_used = sqlite3_column_int64(st, 13);
        op.next_run_at = sqlite3_column_int64(st, 14);
        op.updated_at = sqlite3_column_int64(st, 15);
        op.last_wait_ms = sqlite3_column_int64(st, 16);
        op.operator_resend = sqlite3_column_int64(st, 17) != 0;
        op.epoch = sqlite3_column_int64(st, 18);
        col_copy(st, 19, op.refund_id, sizeof(op.refund_id));
        op.last_http_status = sqlite3_column_int(st, 20);
        ok = ok && store_class_parse(col_text(st, 21), &op.last_class) == 0;
        col_copy(st, 22, op.source, sizeof(op.source));
        if (!ok)
                return TG_ESTORE;
        *ret_op = op;
        return 0;
}

static int read_call(sqlite3_stmt *st, struct call_record *ret_call)
{
        struct call_record c;
        bool ok = true;

        memset(&c, 0, sizeof(c));
        c.id = sqlite3_column_int64(st, 0);
        c.op_id = sqlite3_column_int64(st, 1);
        col_copy(st, 2, c.operation_id, sizeof(c.operation_id));
        ok = ok && store_kind_parse(col_text(st, 3), &c.kind) == 0;
        ok = ok && col_unsigned(st, 4, &c.attempt);
        col_copy(st, 5, c.request_id, sizeof(c.request_id));
        c.epoch = sqlite3_column_int64(st, 6);
        c.start_mono = sqlite3_column_int64(st, 7);
        c.start_wall = sqlite3_column_int64(st, 8);
        ok = ok && col_unsigned(st, 9, &c.in_flight_at_start);
        c.ended = sqlite3_column_int64(st, 10) != 0;
        c.end_mono = sqlite3_column_int64(st, 11);
        c.end_wall = sqlite3_column_int64(st, 12);
        c.sent = sqlite3_column_int64(st, 13) != 0;
        ok = ok && store_class_parse(col_text(st, 14), &c.cls) == 0;
        c.http_status = sqlite3_column_int(st, 15);
        c.latency_us = sqlite3_column_int64(st, 16);
        col_copy(st, 17, c.error, sizeof(c.error));
        if (!ok)
                return TG_ESTORE;
        *ret_call = c;
        return 0;
}

static void read_audit(sqlite3_stmt *st, struct audit_record *ret_audit)
{
        struct audit_record a;

        memset(&a, 0, sizeof(a));
        a.id = sqlite3_column_int64(st, 0);
        a.op_id = sqlite3_column_int64(st, 1);
        a.at = sqlite3_column_int64(st, 2);
        col_copy(st, 3, a.action, sizeof(a.action));
        col_copy(st, 4, a.operator_name, sizeof(a.operator_name));
        col_copy(st, 5, a.reason, sizeof(a.reason));
        col_copy(st, 6, a.detail, sizeof(a.detail));
        *ret_audit = a;
}

/* One op by a one-parameter lookup (ST_OP_BY_KEY, ST_OP_BY_ID). */
static int op_lookup(struct sqlite_store *s, enum stmt_id id, const char *key, int64_t row_id,
                     struct op_record *ret_op)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, id, &st);
        int rc;

        if (r < 0)
                return r;
        if (key ? bind_text(st, 1, key, TG_OP_ID_MAX) : bind_i64(st, 1, row_id)) {
                stmt_done(st);
                return TG_ESTORE;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                r = read_op(st, ret_op);
        else if (rc == SQLITE_DONE)
                r = TG_ENOTFOUND;
        else
                r = map_rc(rc);
        stmt_done(st);
        return r;
}

static int op_by_key(struct sqlite_store *s, const char *operation_id, struct op_record *ret_op)
{
        return op_lookup(s, ST_OP_BY_KEY, operation_id, 0, ret_op);
}

static int op_by_id(struct sqlite_store *s, int64_t id, struct op_record *ret_op)
{
        return op_lookup(s, ST_OP_BY_ID, NULL, id, ret_op);
}

/* Writes back every mutable column of op. */
static int op_write(struct sqlite_store *s, const struct op_record *op)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, ST_OP_WRITE, &st);

        if (r < 0)
                return r;
        if (bind_i64(st, 1, op->id) || bind_text(st, 2, store_state_text(op->state), TG_TEXT_MAX) ||
            bind_text(st, 3, store_reason_text(op->reason), TG_TEXT_MAX) ||
            bind_i64(st, 4, op->attempts) || bind_i64(st, 5, op->attempt_limit) ||
            bind_i64(st, 6, op->queries) || bind_i64(st, 7, op->query_limit) ||
            bind_i64(st, 8, op->deadline_at) || bind_i64(st, 9, op->key_first_used) ||
            bind_i64(st, 10, op->next_run_at) || bind_i64(st, 11, op->updated_at) ||
            bind_i64(st, 12, op->last_wait_ms) || bind_i64(st, 13, op->operator_resend) ||
            bind_i64(st, 14, op->epoch) ||
            bind_text(st, 15, op->refund_id, sizeof(op->refund_id) - 1) ||
            bind_i64(st, 16, op->last_http_status) ||
            bind_text(st, 17, store_class_text(op->last_class), TG_TEXT_MAX)) {
                stmt_done(st);
                return TG_ESTORE;
        }
        r = stmt_run(st);
        if (r == 0 && sqlite3_changes(s->db) != 1)
                r = TG_ESTORE;
        return r;
}

static int audit_insert(struct sqlite_store *s, int64_t op_id, tg_wall_ms at, const char *action,
                        const char *operator_name, const char *reason, const char *detail)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, ST_AUDIT_INSERT, &st);

        if (r < 0)
                return r;
        if (bind_i64(st, 1, op_id) || bind_i64(st, 2, at) || bind_text(st, 3, action, 31) ||
            bind_text(st, 4, operator_name, TG_TEXT_MAX - 1) ||
            bind_text(st, 5, reason, TG_TEXT_MAX - 1) ||
            bind_text(st, 6, detail, TG_TEXT_MAX - 1)) {
                stmt_done(st);
                return TG_ESTORE;
        }
        return stmt_run(st);
}

/* An audit "event" when the exit itself moves an operation to manual, so
 * that every manual item has a traceable history. */
static int audit_to_manual(struct sqlite_store *s, const struct op_record *op, tg_wall_ms now,
                           const char *how)
{
        char detail[TG_TEXT_MAX];

        snprintf(detail, sizeof(detail), "%s: to manual after %u POSTs, %u queries", how,
                 op->attempts, op->queries);
        return audit_insert(s, op->id, now, "event", "tollgate", store_reason_text(op->reason),
                            detail);
}

static int owner_epoch_read(struct sqlite_store *s, int64_t *ret_epoch)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, ST_OWNER_EPOCH, &st);
        int rc;

        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                *ret_epoch = sqlite3_column_int64(st, 0);
        else
                r = rc == SQLITE_DONE ? TG_ESTORE : map_rc(rc);
        stmt_done(st);
        return r;
}

/* ---- open / migrate / close ---------------------------------------------- */

static int exec_sql(struct sqlite_store *s, const char *sql)
{
        int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);

        return map_rc(rc);
}

static int user_version(struct sqlite_store *s, int *ret_version)
{
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL);
        int r = 0;

        if (rc != SQLITE_OK)
                return map_rc(rc);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                *ret_version = sqlite3_column_int(st, 0);
        else
                r = rc == SQLITE_DONE ? TG_ESTORE : map_rc(rc);
        sqlite3_finalize(st);
        return r;
}

/* Brings the schema to MIGRATION_COUNT, one transaction per step. The version
 * is re-read inside each write transaction, so two processes opening a new
 * file at once do not both run a step. */
static int migrate(struct sqlite_store *s)
{
        for (;;) {
                char bump[64];
                int version = 0;
                int r = exec_sql(s, "BEGIN IMMEDIATE");

                if (r < 0)
                        return r;
                r = user_version(s, &version);
                if (r == 0 && version > MIGRATION_COUNT)
                        r = TG_ESTORE; /* written by a newer tollgate */
                if (r < 0 || version == MIGRATION_COUNT) {
                        exec_sql(s, r < 0 ? "ROLLBACK" : "COMMIT");
                        return r;
                }
                snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", version + 1);
                r = exec_sql(s, migrations[version]);
                if (r == 0)
                        r = exec_sql(s, bump);
                if (r == 0)
                        r = exec_sql(s, "COMMIT");
                if (r < 0) {
                        tx_rollback(s);
                        return r;
                }
        }
}

static void sqlite_close(struct store *store)
{
        struct sqlite_store *s = S(store);

        if (!s)
                return;
        for (int i = 0; i < ST_COUNT; i++)
                sqlite3_finalize(s->stmts[i]);
        sqlite3_close(s->db);
        if (s->lock_fd >= 0)
                close(s->lock_fd);
        free(s->lock_path);
        free(s->db_path);
        free(s);
}

static int sqlite_set_busy_timeout(struct store *store, int64_t ms)
{
        return sqlite3_busy_timeout(S(store)->db, (int)ms) == SQLITE_OK ? 0 : TG_ESTORE;
}

static const struct store_ops sqlite_ops;

int store_sqlite_open(const char *where, struct store **ret_store)
{
        static const char suffix[] = ".owner";
        static const size_t lock_room = 16; /* ".owner", ".split", ".share63" */
        struct sqlite_store *s;
        size_t n = strnlen(where, PATH_MAX);
        int rc, r;

        if (n == 0 || n >= PATH_MAX)
                return TG_EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return TG_ENOMEM;
        s->base.ops = &sqlite_ops;
        s->lock_fd = -1;
        s->lock_path = malloc(n + lock_room);
        s->db_path = strndup(where, n);
        if (!s->lock_path || !s->db_path) {
                r = TG_ENOMEM;
                goto fail;
        }
        memcpy(s->lock_path, where, n);
        memcpy(s->lock_path + n, suffix, sizeof(suffix));

        rc = sqlite3_open_v2(
            where, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
        if (rc != SQLITE_OK) {
                r = map_rc(rc);
                goto fail;
        }
        sqlite3_extended_result_codes(s->db, 1);
        sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
        /* WAL: readers never block the writer; synchronous=FULL: a commit
         * that returned is on disk (commit before reply). */
        r = exec_sql(s, "PRAGMA journal_mode = WAL;"
                        "PRAGMA synchronous = FULL;"
                        "PRAGMA foreign_keys = ON;"
                        "PRAGMA trusted_schema = OFF;");
        if (r < 0)
                goto fail;
        r = migrate(s);
        if (r < 0)
                goto fail;
        *ret_store = &s->base;
        return 0;
fail:
        sqlite_close(&s->base);
        return r;
}

/* ---- intake ---------------------------------------------------------------- */

static bool same_request(const struct refund_request *a, const struct refund_request *b)
{
        return strcmp(a->payment_id, b->payment_id) == 0 && a->amount == b->amount &&
               strcmp(a->currency, b->currency) == 0;
}

static int sqlite_accept(struct store *store, const struct refund_request *req, tg_wall_ms now,
                         const struct policy_config *limits, bool *ret_created,
                         struct op_record *ret_op)
{
        struct sqlite_store *s = S(store);
        struct op_record op;
        sqlite3_stmt *st = NULL;
        bool created = false;
        int r = tx_begin(s, true);

        if (r < 0)
                return r;
        r = op_by_key(s, req->operation_id, &op);
        if (r == 0) {
                if (!same_request(&op.req, req))
                        r = TG_ECONFLICT; /* same key, other body: nothing stored */
                goto out;
        }
        if (r != TG_ENOTFOUND)
                goto out;
        r = stmt_get(s, ST_OP_INSERT, &st);
        if (r < 0)
                goto out;
        if (bind_text(st, 1, req->operation_id, TG_OP_ID_MAX) ||
            bind_text(st, 2, req->payment_id, TG_PAYMENT_ID_MAX) || bind_i64(st, 3, req->amount) ||
            bind_text(st, 4, req->currency, sizeof(req->currency) - 1) ||
            bind_i64(st, 5, limits->max_attempts) || bind_i64(st, 6, limits->max_queries) ||
            bind_i64(st, 7, now) || bind_i64(st, 8, now + limits->deadline_ms)) {
                stmt_done(st);
                r = TG_ESTORE;
                goto out;
        }
        r = stmt_run(st);
        if (r < 0)
                goto out;
        r = op_by_id(s, sqlite3_last_insert_rowid(s->db), &op);
        created = true;
out:
        if (r < 0) {
                tx_rollback(s);
                return r;
        }
        /* commit before reply: the caller answers 202 only after this. */
        r = tx_commit(s);
        if (r < 0)
                return r;
        *ret_created = created;
        *ret_op = op;
        return 0;
}

static int sqlite_get(struct store *store, const char *operation_id, struct op_record *ret_op)
{
        return op_by_key(S(store), operation_id, ret_op);
}

/* ---- ownership ------------------------------------------------------------- */

static int lock_fd_exclusive(int fd)
{
#ifdef F_OFD_SETLK
        struct flock fl;

        memset(&fl, 0, sizeof(fl));
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        fl.l_start = 0;
        fl.l_len = 0; /* the whole file */
        if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
                return 0;
#else
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
                return 0;
#endif
        if (errno == EAGAIN || errno == EACCES || errno == EWOULDBLOCK)
                return TG_ELOCKED;
        return -errno;
}

/* The descriptor still names the file at lock_path (nobody removed or
 * replaced the lock file under us). */
static bool lock_file_current(const struct sqlite_store *s, int fd)
{
        struct stat a, b;

        if (fstat(fd, &a) < 0 || stat(s->lock_path, &b) < 0)
                return false;
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* "<db>.owner" for share 0 (the one-owner lock), "<db>.share<k>" for the
 * others, "<db>.split" for the acquirers' own lock (share == UINT_MAX). */
static void share_path(const struct sqlite_store *s, unsigned share, char *dst, size_t size)
{
        if (share == UINT_MAX)
                snprintf(dst, size, "%s.split", s->db_path);
        else if (share == 0)
                snprintf(dst, size, "%s.owner", s->db_path);
        else
                snprintf(dst, size, "%s.share%u", s->db_path, share % STORE_SHARES_MAX);
}

/* Opens and locks the file without waiting: the descriptor, TG_ELOCKED, or
 * an error. */
static int lock_file(const char *path, int *ret_fd)
{
        struct stat a, b;
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        int r;

        if (fd < 0)
                return TG_EIO;
        r = lock_fd_exclusive(fd);
        /* the file was replaced between open and lock? */
        if (r == 0 && (fstat(fd, &a) < 0 || stat(path, &b) < 0 || a.st_dev != b.st_dev ||
                       a.st_ino != b.st_ino))
                r = TG_ELOCKED;
        if (r < 0) {
                close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

#define SPLIT_WAIT_MS 2000

/* The acquirers' own lock, waited for a little: the holder is another
 * acquirer picking its share, which takes a few statements. */
static int split_lock(const struct sqlite_store *s, int *ret_fd)
{
        char path[PATH_MAX + 32];
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000L};

        share_path(s, UINT_MAX, path, sizeof(path));
        for (int waited = 0;; waited += 10) {
                int r = lock_file(path, ret_fd);

                if (r != TG_ELOCKED)
                        return r;
                if (waited >= SPLIT_WAIT_MS)
                        return TG_EBUSY;
                nanosleep(&ts, NULL);
        }
}

static int split_read(struct sqlite_store *s, struct store_split *ret_split)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, ST_SPLIT_GET, &st);
        int rc;

        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                int64_t n = sqlite3_column_int64(st, 0);
                int64_t m = sqlite3_column_int64(st, 1);

                if (n < 1 || n > STORE_SHARES_MAX || m < 1 || m > UINT_MAX) {
                        r = TG_ESTORE;
                } else {
                        ret_split->shares = (unsigned)n;
                        ret_split->max_in_flight = (unsigned)m;
                        ret_split->starts_per_second = sqlite3_column_double(st, 2);
                }
        } else {
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : map_rc(rc);
        }
        stmt_done(st);
        return r;
}

static int sqlite_split_get(struct store *store, struct store_split *ret_split)
{
        struct store_split v = {0};
        int r = split_read(S(store), &v);

        if (r == 0)
                *ret_split = v;
        return r;
}

/* With the acquirers' lock held: how many shares may be taken (*ret_n) and
 * which split to record first (*ret_put, NULL: none). TG_ECONFLICT when the
 * split in force differs and a share of it is held. */
static int split_decide(struct sqlite_store *s, const struct store_split *want, unsigned *ret_n,
                        const struct store_split **ret_put)
{
        struct store_split cur = {0};
        unsigned old_n;
        int r = split_read(s, &cur);
        bool found = r == 0;

        if (r < 0 && r != TG_ENOTFOUND)
                return r;
        if (!want) { /* the one owner: any one-share split */
                if (found && cur.shares != 1)
                        return TG_ECONFLICT;
                *ret_n = 1;
                *ret_put = NULL;
                return 0;
        }
        if ((!found || cur.shares == 1) && want->shares == 1) {
                /* One share: whoever holds the owner lock is the only exit,
                 * at its own rate, as before shares existed; a second one is
                 * a standby, not a conflict. Ours is recorded once we hold
                 * the lock. */
                *ret_n = 1;
                *ret_put = want;
                return 0;
        }
        if (found && store_split_same(&cur, want)) {
                *ret_n = want->shares;
                *ret_put = NULL;
                return 0;
        }
        /* Another split (or none yet): it may be replaced only when nobody
         * holds a share of it. Every acquirer holds the split lock while it
         * picks, so a share found free here stays free until we are done. */
        old_n = found ? cur.shares : 1;
        for (unsigned k = 0; k < old_n; k++) {
                char path[PATH_MAX + 32];
                int fd = -1;

                share_path(s, k, path, sizeof(path));
                r = lock_file(path, &fd);
                if (r == TG_ELOCKED)
                        return TG_ECONFLICT;
                if (r < 0)
                        return r;
                close(fd);
        }
        *ret_n = want->shares;
        *ret_put = want;
        return 0;
}

/* One transaction: record the split (when put), bump the epoch counter and
 * make it the share's epoch. */
static int share_bump(struct sqlite_store *s, const struct store_split *put, unsigned share,
                      int64_t *ret_epoch)
{
        sqlite3_stmt *st = NULL;
        int64_t epoch = 0;
        int r = tx_begin(s, true);
        int rc;

        if (r < 0)
                return r;
        if (put) {
                r = stmt_get(s, ST_SPLIT_PUT, &st);
                if (r == 0 && (bind_i64(st, 1, put->shares) ||
                               sqlite3_bind_double(st, 2, put->starts_per_second) != SQLITE_OK ||
                               bind_i64(st, 3, put->max_in_flight))) {
                        stmt_done(st);
                        r = TG_ESTORE;
                }
                if (r == 0)
                        r = stmt_run(st);
        }
        if (r == 0)
                r = stmt_get(s, ST_OWNER_BUMP, &st);
        if (r == 0) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW)
                        epoch = sqlite3_column_int64(st, 0);
                else
                        r = rc == SQLITE_DONE ? TG_ESTORE : map_rc(rc);
                if (r == 0)
                        r = stmt_run(st); /* finish the statement */
                else
                        stmt_done(st);
        }
        if (r == 0)
                r = stmt_get(s, ST_SHARE_SET, &st);
        if (r == 0) {
                if (bind_i64(st, 1, share) || bind_i64(st, 2, epoch)) {
                        stmt_done(st);
                        r = TG_ESTORE;
                } else {
                        r = stmt_run(st);
                }
        }
        if (r < 0) {
                tx_rollback(s);
                return r;
        }
        r = tx_commit(s);
        if (r == 0)
                *ret_epoch = epoch;
        return r;
}

static int sqlite_share_acquire(struct store *store, const struct store_split *split,
                                unsigned *ret_share, int64_t *ret_epoch)
{
        struct sqlite_store *s = S(store);
        const struct store_split *put = NULL;
        char path[PATH_MAX + 32];
        int64_t epoch = 0;
        unsigned n = 0, share = 0;
        int split_fd = -1, fd = -1;
        char pid[32];
        int r, len;

        if (s->lock_fd >= 0) {
                /* Already ours: no second bump, which would fence our own claims. */
                *ret_share = s->share;
                *ret_epoch = s->epoch;
                return 0;
        }
        r = split_lock(s, &split_fd);
        if (r == 0)
                r = split_decide(s, split, &n, &put);
        for (unsigned k = 0; r == 0 && k < n; k++) {
                share_path(s, k, path, sizeof(path));
                r = lock_file(path, &fd);
                if (r == 0) {
                        share = k;
                        break;
                }
                if (r == TG_ELOCKED && k + 1 < n)
                        r = 0; /* held: the next one */
        }
        if (r == 0)
                r = share_bump(s, put, share, &epoch);
        if (split_fd >= 0)
                close(split_fd); /* the next acquirer may pick now */
        if (r < 0) {
                if (fd >= 0)
                        close(fd);
                return r;
        }

        /* For people: who holds it. A failure here changes nothing. */
        len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) == 0 && len > 0) {
                ssize_t w = pwrite(fd, pid, (size_t)len, 0);

                (void)w;
        }
        snprintf(s->lock_path, strlen(s->db_path) + 16, "%s", path);
        s->lock_fd = fd;
        s->share = share;
        s->epoch = epoch;
        *ret_share = share;
        *ret_epoch = epoch;
        return 0;
}

/* Inside a transaction: TG_EFENCED unless `epoch` is the current epoch of a
 * share; that share in *ret_share (may be NULL). */
static int check_epoch(struct sqlite_store *s, int64_t epoch, unsigned *ret_share)
{
        sqlite3_stmt *st = NULL;
        int r, rc;

        if (epoch <= 0)
                return TG_EFENCED; /* shares never held have epoch 0 */
        r = stmt_get(s, ST_SHARE_OF_EPOCH, &st);
        if (r < 0)
                return r;
        if (bind_i64(st, 1, epoch)) {
                stmt_done(st);
                return TG_ESTORE;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                int64_t v = sqlite3_column_int64(st, 0);

                if (v < 0 || v >= STORE_SHARES_MAX)
                        r = TG_ESTORE;
                else if (ret_share)
                        *ret_share = (unsigned)v;
        } else {
                r = rc == SQLITE_DONE ? TG_EFENCED : map_rc(rc);
        }
        stmt_done(st);
        return r;
}

static int sqlite_owner_check(struct store *store)
{
        struct sqlite_store *s = S(store);
        unsigned share = 0;
        int r;

        if (s->lock_fd < 0 || !lock_file_current(s, s->lock_fd))
                return TG_ELOCKED;
        /* The lock is what decides; the epoch only catches an owner that
         * took over our share behind a replaced lock file. A database that
         * cannot answer right now (busy) is not a lost lock: claims stay
         * fenced by the epoch check inside their own transaction either way. */
        r = check_epoch(s, s->epoch, &share);
        if (r == TG_EFENCED)
                return TG_ELOCKED;
        if (r < 0)
                return 0;
        return share == s->share ? 0 : TG_ELOCKED;
}

static void sqlite_owner_release(struct store *store)
{
        struct sqlite_store *s = S(store);

        if (s->lock_fd >= 0)
                close(s->lock_fd); /* drops the OFD lock */
        s->lock_fd = -1;
        s->epoch = 0;
        s->share = 0;
}

static int sqlite_owner_epoch(struct store *store, int64_t *ret_epoch)
{
        return owner_epoch_read(S(store), ret_epoch);
}

static int close_open_calls(struct sqlite_store *s, int64_t op_id, tg_wall_ms now)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, ST_RECOVER_CALLS, &st);

        if (r < 0)
                return r;
        if (bind_i64(st, 1, op_id) || bind_i64(st, 2, now)) {
                stmt_done(st);
                return TG_ESTORE;
        }
        return stmt_run(st);
}

static int sqlite_recover(struct store *store, int64_t epoch, const struct policy_config *config,
                          tg_wall_ms now, unsigned *ret_count)
{
        struct sqlite_store *s = S(store);
        struct op_record *batch;
        struct store_split split = {.shares = 1};
        unsigned count = 0, share = 0;
        int r;

        batch = calloc(RECOVER_BATCH, sizeof(*batch));
        if (!batch)
                return TG_ENOMEM;
        r = tx_begin(s, true);
        if (r < 0)
                goto out;
        r = check_epoch(s, epoch, &share);
        if (r == 0) {
                r = split_read(s, &split);
                if (r == TG_ENOTFOUND) { /* never recorded: one share */
                        split.shares = 1;
                        r = 0;
                }
        }
        /* Each pass moves its rows out of in_flight, so the loop ends. */
        while (r == 0) {
                sqlite3_stmt *st = NULL;
                int n = 0, rc;

                r = stmt_get(s, ST_RECOVER_PICK, &st);
                if (r < 0)
                        break;
                if (bind_i64(st, 1, epoch) || bind_i64(st, 2, RECOVER_BATCH) ||
                    bind_i64(st, 3, share) || bind_i64(st, 4, split.shares)) {
                        stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                while (r == 0 && n < RECOVER_BATCH) {
                        rc = sqlite3_step(st);
                        if (rc == SQLITE_ROW)
                                r = read_op(st, &batch[n++]);
                        else if (rc == SQLITE_DONE)
                                break;
                        else
                                r = map_rc(rc);
                }
                stmt_done(st);
                if (r < 0 || n == 0)
                        break;
                for (int i = 0; i < n && r == 0; i++) {
                        struct op_record *op = &batch[i];
                        struct policy_op pop;
                        struct policy_decision d;
                        char detail[TG_TEXT_MAX];

                        store_policy_op(op, &pop);
                        r = policy_after_takeover(config, &pop, now, &d);
                        if (r < 0)
                                break;
                        if (d.next == OP_PENDING || d.next == OP_IN_FLIGHT) {
                                r = TG_ESTORE; /* the policy broke its contract */
                                break;
                        }
                        snprintf(detail, sizeof(detail),
                                 "owner lost: in_flight under epoch %" PRId64 " -> %s", op->epoch,
                                 store_state_text(d.next));
                        op->state = d.next;
                        op->next_run_at = d.next_run_at;
                        op->reason = d.reason;
                        if (d.wait_ms > 0)
                                op->last_wait_ms = d.wait_ms;
                        /* in_flight with operator_resend means that call was
                         * the manual one, and it is over now */
                        op->operator_resend = false;
                        op->updated_at = now;
                        r = op_write(s, op);
                        if (r == 0)
                                r = close_open_calls(s, op->id, now);
                        if (r == 0)
                                r = audit_insert(s, op->id, now, "event", "tollgate",
                                                 store_reason_text(op->reason), detail);
                        if (r == 0)
                                count++;
                }
        }
        if (r < 0) {
                tx_rollback(s);
                goto out;
        }
        r = tx_commit(s);
        if (r == 0)
                *ret_count = count;
out:
        free(batch);
        return r;
}

/* ---- the exit ------------------------------------------------------------------- */

/* min(next_run_at) of the again group, TG_WALL_NEVER if it is empty. */
static int earliest_due(struct sqlite_store *s, tg_wall_ms *ret_next)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, ST_NEXT_DUE, &st);
        int rc;

        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                *ret_next = sqlite3_column_type(st, 0) == SQLITE_NULL ? TG_WALL_NEVER
                                                                      : sqlite3_column_int64(st, 0);
        else
                r = map_rc(rc);
        stmt_done(st);
        return r;
}

static int pick(struct sqlite_store *s, const struct claim_args *args, int64_t *ret_id)
{
        sqlite3_stmt *st = NULL;
        bool again = args->group == STORE_GROUP_AGAIN;
        int r = stmt_get(s, again ? ST_PICK_AGAIN : ST_PICK_FIRST, &st);
        int rc;

        if (r < 0)
                return r;
        if (again) {
                /* Nothing due (the common case while retries wait): one probe
                 * of ops_again_due instead of a walk over every waiting op. */
                tg_wall_ms next = TG_WALL_NEVER;

                r = earliest_due(s, &next);
                if (r < 0)
                        return r;
                if (next > args->now)
                        return TG_ENOTFOUND;
        }
        /* Key age check off: a retention no key can reach. */
        int64_t retention = args->key_retention_ms > 0 ? args->key_retention_ms : INT64_MAX / 4;
        if (bind_i64(st, 1, args->now) ||
            (again && (bind_i64(st, 2, retention) || bind_i64(st, 3, args->no_queries)))) {
                stmt_done(st);
                return TG_ESTORE;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                *ret_id = sqlite3_column_int64(st, 0);
        else
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : map_rc(rc);
        stmt_done(st);
        return r;
}

static int call_insert(struct sqlite_store *s, struct call_record *call, unsigned share)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, ST_CALL_INSERT, &st);

        if (r < 0)
                return r;
        if (bind_i64(st, 1, call->op_id) || bind_text(st, 2, call->operation_id, TG_OP_ID_MAX) ||
            bind_text(st, 3, store_kind_text(call->kind), TG_TEXT_MAX) ||
            bind_i64(st, 4, call->attempt) ||
            bind_text(st, 5, call->request_id, TG_REQUEST_ID_MAX) || bind_i64(st, 6, call->epoch) ||
            bind_i64(st, 7, call->start_mono) || bind_i64(st, 8, call->start_wall) ||
            bind_i64(st, 9, call->in_flight_at_start) || bind_i64(st, 10, share)) {
                stmt_done(st);
                return TG_ESTORE;
        }
        r = stmt_run(st);
        if (r == 0)
                call->id = sqlite3_last_insert_rowid(s->db);
        return r;
}

static int sqlite_claim(struct store *store, const struct claim_args *args,
                        struct op_record *ret_op, struct call_record *ret_call)
{
        struct sqlite_store *s = S(store);
        struct op_record op;
        struct call_record call;
        sqlite3_stmt *st = NULL;
        int64_t id = 0;
        unsigned share = 0;
        int r = tx_begin(s, true);

        if (r < 0)
                return r;
        r = check_epoch(s, args->epoch, &share);
        if (r == 0)
                r = pick(s, args, &id);
        if (r == 0)
                r = op_by_id(s, id, &op);
        if (r < 0)
                goto fail;

        memset(&call, 0, sizeof(call));
        call.kind = policy_next_kind(op.state, op.operator_resend);
        if (call.kind == TG_KIND_QUERY) {
                op.queries++;
                call.attempt = op.queries;
        } else {
                op.attempts++;
                if (op.key_first_used == 0)
                        op.key_first_used = args->now;
                call.attempt = op.attempts;
        }
        op.state = OP_IN_FLIGHT;
        op.epoch = args->epoch;
        op.updated_at = args->now;
        /* what a claim changes, and the share it is made under (recovery
         * touches only its own share's rows) */
        r = stmt_get(s, ST_OP_CLAIM, &st);
        if (r < 0)
                goto fail;
        if (bind_i64(st, 1, op.id) || bind_i64(st, 2, op.attempts) || bind_i64(st, 3, op.queries) ||
            bind_i64(st, 4, op.key_first_used) || bind_i64(st, 5, op.epoch) ||
            bind_i64(st, 6, share) || bind_i64(st, 7, op.updated_at)) {
                stmt_done(st);
                r = TG_ESTORE;
                goto fail;
        }
        r = stmt_run(st);
        if (r < 0)
                goto fail;

        call.op_id = op.id;
        store_copy_text(call.operation_id, sizeof(call.operation_id), op.req.operation_id);
        store_copy_text(call.request_id, sizeof(call.request_id), args->request_id);
        call.epoch = args->epoch;
        call.start_mono = args->start_mono;
        call.start_wall = args->now;
        call.in_flight_at_start = args->in_flight_at_start;
        call.ended = false;
        call.cls = TG_CLASS_UNKNOWN;
        r = call_insert(s, &call, share);
        if (r < 0)
                goto fail;
        /* record attempt before send: the call row ("sent, outcome unknown")
         * and the counted attempt are durable before the caller may send. */
        r = tx_commit(s);
        if (r < 0)
                return r;
        *ret_op = op;
        *ret_call = call;
        return 0;
fail:
        tx_rollback(s);
        return r;
}

static int call_by_id(struct sqlite_store *s, int64_t id, struct call_record *ret_call)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, ST_CALL_BY_ID, &st);
        int rc;

        if (r < 0)
                return r;
        if (bind_i64(st, 1, id)) {
                stmt_done(st);
                return TG_ESTORE;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                r = read_call(st, ret_call);
        else
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : map_rc(rc);
        stmt_done(st);
        return r;
}

static int call_settle(struct sqlite_store *s, const struct settle_args *a)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, ST_CALL_SETTLE, &st);

        if (r < 0)
                return r;
        if (bind_i64(st, 1, a->call_id) || bind_i64(st, 2, a->end_mono) ||
            bind_i64(st, 3, a->now) || bind_i64(st, 4, a->sent) ||
            bind_text(st, 5, store_class_text(a->cls), TG_TEXT_MAX) ||
            bind_i64(st, 6, a->http_status) || bind_i64(st, 7, a->latency_us) ||
            bind_text(st, 8, a->error, sizeof(a->error) - 1) || bind_i64(st, 9, a->handoff_mono) ||
            bind_i64(st, 10, a->handoff_wall)) {
                stmt_done(st);
                return TG_ESTORE;
        }
        r = stmt_run(st);
        if (r == 0 && sqlite3_changes(s->db) != 1)
                r = TG_EFENCED;
        return r;
}

static int settle_tx(struct sqlite_store *s, const struct settle_args *a);

/* An outcome is committed with synchronous=NORMAL: WAL keeps it across a
 * crash of the process, and if a power loss takes it back, the operation is
 * in_flight again and the next owner reconciles it as unknown with the same
 * key (invariant 3 needs the ATTEMPT on disk before the send, and that
 * commit, in store_claim, stays FULL). Halves the fsyncs of a call. */
static int sqlite_settle(struct store *store, const struct settle_args *a)
{
        struct sqlite_store *s = S(store);
        int r = exec_sql(s, "PRAGMA synchronous = NORMAL;");

        if (r < 0)
                return r;
        s->sync_normal = true;
        s->in_settle = true;
        r = settle_tx(s, a);
        s->in_settle = false;
        if (exec_sql(s, "PRAGMA synchronous = FULL;") == 0)
                s->sync_normal = false; /* else the next write transaction retries */
        return r;
}

static int settle_tx(struct sqlite_store *s, const struct settle_args *a)
{
        struct op_record op;
        struct call_record call;
        int r = tx_begin(s, true);

        if (r < 0)
                return r;
        r = op_by_id(s, a->op_id, &op);
        if (r == 0 && (op.state != OP_IN_FLIGHT || op.epoch != a->epoch))
                r = TG_EFENCED; /* recovered (and maybe claimed) by a newer owner */
        if (r == 0)
                r = call_by_id(s, a->call_id, &call);
        if (r == 0 && call.op_id != op.id)
                r = TG_EINVAL;
        if (r == 0 && (call.ended || call.epoch != a->epoch))
                r = TG_EFENCED;
        if (r == 0)
                r = call_settle(s, a);
        if (r < 0)
                goto fail;

        op.state = a->decision.next;
        op.next_run_at = a->decision.next_run_at;
        op.reason = a->decision.reason;
        if (a->decision.wait_ms > 0)
                op.last_wait_ms = a->decision.wait_ms;
        if (a->refund_id[0] != '\0')
                store_copy_text(op.refund_id, sizeof(op.refund_id), a->refund_id);
        op.last_http_status = a->http_status;
        op.last_class = a->cls;
        if (call.kind == TG_KIND_MANUAL)
                op.operator_resend = false; /* the operator's re-send has been made */
        op.updated_at = a->now;
        r = op_write(s, &op);
        if (r == 0 && op.state == OP_MANUAL)
                r = audit_to_manual(s, &op, a->now, store_class_text(a->cls));
        if (r < 0)
                goto fail;
        return tx_commit(s);
fail:
        tx_rollback(s);
        return r;
}

/* Runs a statement whose only parameter is ?1 = now. */
static int run_with_now(struct sqlite_store *s, enum stmt_id id, tg_wall_ms now)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, id, &st);

        if (r < 0)
                return r;
        if (bind_i64(st, 1, now)) {
                stmt_done(st);
                return TG_ESTORE;
        }
        return stmt_run(st);
}

static int run_with_now_retention(struct sqlite_store *s, enum stmt_id id, tg_wall_ms now,
                                  int64_t retention)
{
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, id, &st);

        if (r < 0)
                return r;
        if (bind_i64(st, 1, now) || bind_i64(st, 2, retention)) {
                stmt_done(st);
                return TG_ESTORE;
        }
        return stmt_run(st);
}

static int sqlite_sweep_deadlines(struct store *store, int64_t key_retention_ms, tg_wall_ms now,
                                  unsigned *ret_count)
{
        struct sqlite_store *s = S(store);
        int changes = 0;
        int r = tx_begin(s, true);

        if (r < 0)
                return r;
        /* The audit rows first: they name the state each operation left. */
        r = run_with_now(s, ST_SWEEP_AUDIT, now);
        if (r == 0) {
                r = run_with_now(s, ST_SWEEP, now);
                changes = sqlite3_changes(s->db);
        }
        if (r == 0 && key_retention_ms > 0) {
                r = run_with_now_retention(s, ST_SWEEP_KEY_AUDIT, now, key_retention_ms);
                if (r == 0) {
                        r = run_with_now_retention(s, ST_SWEEP_KEY, now, key_retention_ms);
                        changes += sqlite3_changes(s->db);
                }
        }
        if (r < 0) {
                tx_rollback(s);
                return r;
        }
        r = tx_commit(s);
        if (r == 0)
                *ret_count = (unsigned)changes;
        return r;
}

static int sqlite_next_due(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending)
{
        struct sqlite_store *s = S(store);
        tg_wall_ms next = TG_WALL_NEVER;
        bool pending = false;
        sqlite3_stmt *st = NULL;
        int r = tx_begin(s, false);
        int rc;

        if (r < 0)
                return r;
        r = earliest_due(s, &next);
        if (r == 0)
                r = stmt_get(s, ST_ANY_PENDING, &st);
        if (r == 0) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW)
                        pending = sqlite3_column_int(st, 0) != 0;
                else
                        r = map_rc(rc);
                stmt_done(st);
        }
        if (r < 0) {
                tx_rollback(s);
                return r;
        }
        r = tx_commit(s);
        if (r < 0)
                return r;
        *ret_next_run_at = next;
        *ret_pending = pending;
        return 0;
}

/* ---- reading: page by page, callbacks outside any statement -------------------- */

/* Fills up to `max` calls from a bound ST_LIST_CALLS / ST_LIST_OP_CALLS. */
static int fetch_calls(sqlite3_stmt *st, struct call_record *buf, int max, int *ret_n)
{
        int n = 0, r = 0, rc;

        while (n < max) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        break;
                if (rc != SQLITE_ROW) {
                        r = map_rc(rc);
                        break;
                }
                r = read_call(st, &buf[n]);
                if (r < 0)
                        break;
                n++;
        }
        stmt_done(st);
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

                r = stmt_get(s, op_id > 0 ? ST_LIST_OP_CALLS : ST_LIST_CALLS, &st);
                if (r < 0)
                        break;
                if (op_id > 0)
                        bad = bind_i64(st, 1, op_id) || bind_i64(st, 2, since_id) ||
                              bind_i64(st, 3, want);
                else
                        bad = bind_i64(st, 1, since_id) || bind_i64(st, 2, want);
                if (bad) {
                        stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                r = fetch_calls(st, buf, want, &n);
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

static int sqlite_list_calls(struct store *store, int64_t since_id, unsigned limit,
                             store_call_fn fn, void *userdata)
{
        return walk_calls(S(store), 0, since_id, limit, fn, userdata);
}

static int sqlite_list_op_calls(struct store *store, int64_t op_id, store_call_fn fn,
                                void *userdata)
{
        if (op_id <= 0)
                return 0;
        return walk_calls(S(store), op_id, 0, UINT64_MAX, fn, userdata);
}

static int sqlite_stats(struct store *store, struct store_stats *ret_stats)
{
        struct sqlite_store *s = S(store);
        struct store_stats stats;
        sqlite3_stmt *st = NULL;
        int r = tx_begin(s, false);
        int rc;

        if (r < 0)
                return r;
        memset(&stats, 0, sizeof(stats));
        stats.oldest_open_accepted_at = TG_WALL_NEVER;
        r = stmt_get(s, ST_COUNT_BY_STATE, &st);
        while (r == 0) {
                enum op_state state;

                rc = sqlite3_step(st);
                if (rc == SQLITE_DONE)
                        break;
                if (rc != SQLITE_ROW)
                        r = map_rc(rc);
                else if (store_state_parse(col_text(st, 0), &state) < 0)
                        r = TG_ESTORE;
                else
                        stats.by_state[state] = (uint64_t)sqlite3_column_int64(st, 1);
        }
        if (st)
                stmt_done(st);
        if (r == 0)
                r = stmt_get(s, ST_OLDEST_OPEN, &st);
        if (r == 0) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
                        stats.oldest_open_accepted_at = sqlite3_column_int64(st, 0);
                else if (rc != SQLITE_ROW)
                        r = map_rc(rc);
                stmt_done(st);
        }
        if (r == 0)
                r = stmt_get(s, ST_CALLS_TOTAL, &st);
        if (r == 0) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW)
                        stats.calls_total = (uint64_t)sqlite3_column_int64(st, 0);
                else
                        r = map_rc(rc);
                stmt_done(st);
        }
        if (r == 0)
                r = owner_epoch_read(s, &stats.epoch);
        if (r < 0) {
                tx_rollback(s);
                return r;
        }
        r = tx_commit(s);
        if (r == 0)
                *ret_stats = stats;
        return r;
}

/* ---- manual review and audit ----------------------------------------------------- */

static int sqlite_list_manual(struct store *store, int64_t after_id, unsigned limit, store_op_fn fn,
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
                int n = 0, rc;

                r = stmt_get(s, ST_LIST_MANUAL, &st);
                if (r < 0)
                        break;
                if (bind_i64(st, 1, after_id) || bind_i64(st, 2, last_at) ||
                    bind_i64(st, 3, last_id) || bind_i64(st, 4, want)) {
                        stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                while (r == 0 && n < want) {
                        rc = sqlite3_step(st);
                        if (rc == SQLITE_DONE)
                                break;
                        if (rc == SQLITE_ROW)
                                r = read_op(st, &buf[n++]);
                        else
                                r = map_rc(rc);
                }
                stmt_done(st);
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

static int sqlite_list_audit(struct store *store, int64_t op_id, store_audit_fn fn, void *userdata)
{
        struct sqlite_store *s = S(store);
        struct audit_record *buf = calloc(PAGE_ROWS, sizeof(*buf));
        int64_t since = 0;
        int r = 0;

        if (!buf)
                return TG_ENOMEM;
        for (;;) {
                sqlite3_stmt *st = NULL;
                int n = 0, rc;

                r = stmt_get(s, ST_LIST_AUDIT, &st);
                if (r < 0)
                        break;
                if (bind_i64(st, 1, op_id) || bind_i64(st, 2, since) ||
                    bind_i64(st, 3, PAGE_ROWS)) {
                        stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                while (r == 0 && n < PAGE_ROWS) {
                        rc = sqlite3_step(st);
                        if (rc == SQLITE_DONE)
                                break;
                        if (rc == SQLITE_ROW)
                                read_audit(st, &buf[n++]);
                        else
                                r = map_rc(rc);
                }
                stmt_done(st);
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

static int sqlite_operator_resend(struct store *store, const char *operation_id,
                                  const char *operator_name, const char *reason,
                                  const struct policy_config *config, tg_wall_ms now,
                                  struct op_record *ret_op)
{
        struct sqlite_store *s = S(store);
        struct op_record op;
        struct policy_op pop, next;
        struct policy_decision d;
        char detail[TG_TEXT_MAX];
        int r = tx_begin(s, true);

        if (r < 0)
                return r;
        r = op_by_key(s, operation_id, &op);
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
        r = op_write(s, &op);
        if (r < 0)
                goto fail;
        snprintf(detail, sizeof(detail),
                 "re-send with the same key as POST %u of %u; due %" PRId64 ", deadline %" PRId64,
                 op.attempts + 1, op.attempt_limit, op.next_run_at, op.deadline_at);
        r = audit_insert(s, op.id, now, "resend", operator_name, reason, detail);
        if (r < 0)
                goto fail;
        r = tx_commit(s);
        if (r == 0)
                *ret_op = op;
        return r;
fail:
        tx_rollback(s);
        return r;
}

static int sqlite_operator_resolve(struct store *store, const char *operation_id,
                                   const char *operator_name, const char *reason,
                                   enum op_state outcome, tg_wall_ms now, struct op_record *ret_op)
{
        struct sqlite_store *s = S(store);
        struct op_record op;
        char detail[TG_TEXT_MAX];
        int r = tx_begin(s, true);

        if (r < 0)
                return r;
        r = op_by_key(s, operation_id, &op);
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
        r = op_write(s, &op);
        if (r == 0)
                r = audit_insert(s, op.id, now, "resolve", operator_name, reason, detail);
        if (r < 0)
                goto fail;
        r = tx_commit(s);
        if (r == 0)
                *ret_op = op;
        return r;
fail:
        tx_rollback(s);
        return r;
}

static int sqlite_settle_external(struct store *store, const char *operation_id,
                                  enum op_state outcome, const char *refund_id, const char *source,
                                  tg_wall_ms now)
{
        struct sqlite_store *s = S(store);
        struct op_record op;
        char detail[TG_TEXT_MAX];
        int r = tx_begin(s, true);

        if (r < 0)
                return r;
        r = op_by_key(s, operation_id, &op);
        if (r < 0)
                goto fail;
        if (op.state == outcome) {
                tx_rollback(s); /* already so: nothing to change */
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
        r = op_write(s, &op);
        if (r == 0)
                r = audit_insert(s, op.id, now, "external", source, "provider answer", detail);
        if (r < 0)
                goto fail;
        return tx_commit(s);
fail:
        tx_rollback(s);
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
        col_copy(st, 8, ret->figures, sizeof(ret->figures));
}

static int sqlite_sample_put(struct store *store, const struct exit_sample *sample,
                             tg_wall_ms keep_after)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = tx_begin(s, true);

        if (r < 0)
                return r;
        r = stmt_get(s, ST_SAMPLE_PUT, &st);
        if (r < 0)
                goto fail;
        if (bind_i64(st, 1, sample->at) || bind_i64(st, 2, sample->epoch) ||
            bind_i64(st, 3, sample->in_flight) || bind_i64(st, 4, sample->starts) ||
            bind_i64(st, 5, sample->call_ends) || bind_i64(st, 6, sample->op_closes) ||
            bind_i64(st, 7, sample->held ? 1 : 0) ||
            bind_text(st, 8, sample->figures, sizeof(sample->figures) - 1)) {
                stmt_done(st);
                r = TG_ESTORE;
                goto fail;
        }
        r = stmt_run(st);
        if (r < 0)
                goto fail;
        r = stmt_get(s, ST_SAMPLE_PRUNE, &st);
        if (r < 0)
                goto fail;
        if (bind_i64(st, 1, keep_after)) {
                stmt_done(st);
                r = TG_ESTORE;
                goto fail;
        }
        r = stmt_run(st);
        if (r < 0)
                goto fail;
        return tx_commit(s);
fail:
        tx_rollback(s);
        return r;
}

static int sqlite_list_samples(struct store *store, tg_wall_ms since, unsigned limit,
                               store_sample_fn fn, void *userdata)
{
        struct sqlite_store *s = S(store);
        struct exit_sample *buf = calloc(PAGE_ROWS, sizeof(*buf));
        int r = 0;

        if (!buf)
                return TG_ENOMEM;
        while (limit > 0) {
                int want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                sqlite3_stmt *st = NULL;
                int n = 0, rc;

                r = stmt_get(s, ST_SAMPLE_LIST, &st);
                if (r < 0)
                        break;
                if (bind_i64(st, 1, since) || bind_i64(st, 2, want)) {
                        stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                while (r == 0 && n < want) {
                        rc = sqlite3_step(st);
                        if (rc == SQLITE_DONE)
                                break;
                        if (rc == SQLITE_ROW)
                                read_sample(st, &buf[n++]);
                        else
                                r = map_rc(rc);
                }
                stmt_done(st);
                if (r < 0)
                        break;
                for (int i = 0; i < n && r == 0; i++)
                        r = fn(&buf[i], userdata);
                if (r != 0 || n < want)
                        break;
                since = buf[n - 1].at;
                limit -= (unsigned)n;
        }
        free(buf);
        return r;
}

static int sqlite_last_sample(struct store *store, struct exit_sample *ret_sample)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = stmt_get(s, ST_SAMPLE_LAST, &st);
        int rc;

        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                read_sample(st, ret_sample);
        else
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : map_rc(rc);
        stmt_done(st);
        return r;
}

static const struct store_ops sqlite_ops = {
    .name = "sqlite",
    .close = sqlite_close,
    .accept = sqlite_accept,
    .get = sqlite_get,
    .share_acquire = sqlite_share_acquire,
    .split_get = sqlite_split_get,
    .owner_check = sqlite_owner_check,
    .owner_release = sqlite_owner_release,
    .owner_epoch = sqlite_owner_epoch,
    .recover = sqlite_recover,
    .claim = sqlite_claim,
    .settle = sqlite_settle,
    .sweep_deadlines = sqlite_sweep_deadlines,
    .next_due = sqlite_next_due,
    .list_calls = sqlite_list_calls,
    .list_op_calls = sqlite_list_op_calls,
    .stats = sqlite_stats,
    .list_manual = sqlite_list_manual,
    .list_audit = sqlite_list_audit,
    .operator_resend = sqlite_operator_resend,
    .operator_resolve = sqlite_operator_resolve,
    .settle_external = sqlite_settle_external,
    .sample_put = sqlite_sample_put,
    .list_samples = sqlite_list_samples,
    .last_sample = sqlite_last_sample,
    .set_busy_timeout = sqlite_set_busy_timeout,
};
