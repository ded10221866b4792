/*
 * store_mysql — the server store backend: MariaDB (10.6+) or MySQL through
 * MariaDB Connector/C, InnoDB tables, READ COMMITTED, a versioned schema
 * (table schema_version, one migration step at a time under a GET_LOCK so
 * that two processes opening a fresh database do not both run a step).
 *
 * url: mysql://user[:password]@host[:port]/db[?password_file=PATH&socket=PATH]
 * The password may instead come from the environment (TG_MYSQL_PASSWORD) or
 * from the first line of password_file. The database is created when it does
 * not exist and the user may create it.
 *
 * Exit ownership is per share of the account quota (store.h): share 0 is
 * GET_LOCK('tollgate_owner_<db>', 0), share k > 0 GET_LOCK('tollgate_share_
 * <db>_<k>', 0), held on a DEDICATED connection for the owner's whole life:
 * the server drops the lock when that session ends (process killed,
 * connection killed, server restarted), and a paused process keeps its
 * session and so its lock. Acquirers take 'tollgate_split_<db>' on that
 * connection for the few statements that read (and maybe replace) the split
 * and pick a share, so a split is never replaced under a live share. Each
 * acquisition bumps owner.epoch (one counter for every share) and records it
 * in exit_shares; claims look their epoch up there under a shared row lock
 * (a takeover of that share waits for claims in progress and fences every
 * later one), settles check the epoch the operation was claimed under.
 *
 * Invariants:
 *   - every public op is one short transaction on the main connection,
 *     committed or rolled back before it returns; nothing is held between
 *     calls, and list callbacks run between pages, outside any transaction;
 *   - a deadlock or lock wait timeout retries the whole transaction (a few
 *     times, with a short pause); a lost connection is reconnected and the
 *     transaction retried once, but only where that is safe: a failure before
 *     COMMIT was sent (the server rolled it back), or an op that re-checks what
 *     an unknown COMMIT did. A claim whose COMMIT outcome is unknown looks for
 *     its call row by request_id before claiming anything again;
 *   - claims pick with FOR UPDATE SKIP LOCKED: several processes never wait
 *     on each other's picks;
 *   - operations, calls and audit rows are never deleted (triggers refuse
 *     it) and audit rows are never updated;
 *   - nothing MariaDB-specific (codes, messages, SQL) leaves this file; the
 *     password never leaves it either;
 *   - ret_* outputs are written only on success.
 *
 * Values go into SQL text through one builder (sqlf) that escapes every
 * string with mysql_real_escape_string on a connection whose sql_mode this
 * file sets; integers are printed. There is no other way into a query.
 */
#ifdef TG_HAVE_MARIADB /* the whole file: CMake defines it with libmariadb */

#include <ctype.h>
#include <errmsg.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/refund_validate.h"
#include "core/tg_error.h"
#include "store/store_backend.h"

#define SQL_MAX          16384 /* a sample's figures, every byte escaped, fit */
#define PAGE_ROWS        64
#define RECOVER_BATCH    64
#define AGAIN_CANDIDATES 16
#define BUSY_TRIES       8  /* deadlock / lock wait timeout: whole-transaction retries */
#define LOST_TRIES       1  /* lost connection: reconnect and retry once */
#define CONNECT_TIMEOUT  3  /* s */
#define IO_TIMEOUT       10 /* s, main connection reads and writes */
#define LOCK_IO_TIMEOUT  3  /* s, the owner lock connection */
#define LOCK_WAIT_S      3  /* innodb_lock_wait_timeout of our sessions */
#define SPLIT_WAIT_S     2  /* acquirers' own lock; below LOCK_IO_TIMEOUT */
#define MIGRATE_WAIT_S   30
#define DB_NAME_MAX      64
#define LOCK_NAME_MAX    64

/* ---- schema ------------------------------------------------------------ */

#define TEXT_ASCII "CHARACTER SET ascii COLLATE ascii_bin"

/* Each step takes schema_version from .version - 1 to .version. Statements
 * are idempotent (IF NOT EXISTS, INSERT IGNORE) because MariaDB DDL commits
 * on its own: a step cut short is simply run again. Append only. */
struct migration {
        int version;
        const char *sql;
};

static const struct migration migrations[] = {
    {1, "CREATE TABLE IF NOT EXISTS operations ("
        "  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
        "  operation_id VARCHAR(128) " TEXT_ASCII " NOT NULL,"
        "  payment_id VARCHAR(128) " TEXT_ASCII " NOT NULL,"
        "  amount BIGINT NOT NULL,"
        "  currency VARCHAR(3) " TEXT_ASCII " NOT NULL,"
        "  state VARCHAR(16) " TEXT_ASCII " NOT NULL DEFAULT 'pending',"
        "  reason VARCHAR(32) " TEXT_ASCII " NOT NULL DEFAULT 'none',"
        /* 0 in attempt_limit marks a row an outbox writer inserted and
         * tollgate has not validated and filled in yet (docs/outbox.md) */
        "  attempts INT UNSIGNED NOT NULL DEFAULT 0,"
        "  attempt_limit INT UNSIGNED NOT NULL DEFAULT 0,"
        "  queries INT UNSIGNED NOT NULL DEFAULT 0,"
        "  query_limit INT UNSIGNED NOT NULL DEFAULT 0,"
        "  accepted_at BIGINT NOT NULL"
        "    DEFAULT (CAST(UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) * 1000 AS SIGNED)),"
        "  deadline_at BIGINT NOT NULL DEFAULT 0,"
        "  key_first_used BIGINT NOT NULL DEFAULT 0,"
        "  next_run_at BIGINT NOT NULL DEFAULT 0,"
        "  updated_at BIGINT NOT NULL DEFAULT 0,"
        "  last_wait_ms BIGINT NOT NULL DEFAULT 0,"
        "  operator_resend TINYINT NOT NULL DEFAULT 0,"
        "  epoch BIGINT NOT NULL DEFAULT 0,"
        "  refund_id VARBINARY(127) NOT NULL DEFAULT '',"
        "  last_http_status INT NOT NULL DEFAULT 0,"
        "  last_class VARCHAR(16) " TEXT_ASCII " NOT NULL DEFAULT 'unknown',"
        "  source VARCHAR(15) " TEXT_ASCII " NOT NULL DEFAULT 'api',"
        "  UNIQUE KEY ops_key (operation_id),"
        /* group first, manual list, counts by state, recovery */
        "  KEY ops_state_accepted (state, accepted_at, id),"
        /* earliest due of the again group, and its candidates */
        "  KEY ops_state_due (state, next_run_at),"
        /* the deadline sweep */
        "  KEY ops_state_deadline (state, deadline_at),"
        /* the key-retention sweep */
        "  KEY ops_state_key (state, key_first_used),"
        "  CONSTRAINT ops_amount CHECK (amount > 0),"
        "  CONSTRAINT ops_state CHECK (state IN ('pending','in_flight','retry_wait',"
        "    'unknown','succeeded','rejected','manual')),"
        "  CONSTRAINT ops_resend CHECK (operator_resend IN (0, 1))"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"},
    {1, "CREATE TABLE IF NOT EXISTS calls ("
        "  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
        "  op_id BIGINT NOT NULL,"
        "  operation_id VARCHAR(128) " TEXT_ASCII " NOT NULL,"
        "  kind VARCHAR(8) " TEXT_ASCII " NOT NULL,"
        "  attempt INT UNSIGNED NOT NULL,"
        "  request_id VARBINARY(64) NOT NULL,"
        "  epoch BIGINT NOT NULL,"
        "  start_mono BIGINT NOT NULL,"
        "  start_wall BIGINT NOT NULL,"
        "  in_flight_at_start INT UNSIGNED NOT NULL,"
        "  ended TINYINT NOT NULL DEFAULT 0,"
        "  end_mono BIGINT NOT NULL DEFAULT 0,"
        "  end_wall BIGINT NOT NULL DEFAULT 0,"
        "  sent TINYINT NOT NULL DEFAULT 0,"
        "  cls VARCHAR(16) " TEXT_ASCII " NOT NULL DEFAULT 'unknown',"
        "  http_status INT NOT NULL DEFAULT 0,"
        "  latency_us BIGINT NOT NULL DEFAULT 0,"
        "  error VARBINARY(255) NOT NULL DEFAULT '',"
        "  KEY calls_op (op_id, id),"
        /* a claim whose commit outcome is unknown looks for its row */
        "  KEY calls_request (request_id),"
        "  CONSTRAINT calls_op_fk FOREIGN KEY (op_id) REFERENCES operations (id),"
        "  CONSTRAINT calls_kind CHECK (kind IN ('first','retry','query','manual'))"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"},
    {1, "CREATE TABLE IF NOT EXISTS owner ("
        "  id TINYINT NOT NULL PRIMARY KEY,"
        "  epoch BIGINT NOT NULL,"
        "  CONSTRAINT owner_one CHECK (id = 1)"
        ") ENGINE=InnoDB"},
    {1, "INSERT IGNORE INTO owner (id, epoch) VALUES (1, 0)"},
    {1, "CREATE TABLE IF NOT EXISTS audit ("
        "  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
        "  op_id BIGINT NOT NULL,"
        "  at BIGINT NOT NULL,"
        "  action VARCHAR(32) " TEXT_ASCII " NOT NULL,"
        "  operator_name VARBINARY(255) NOT NULL,"
        "  reason VARBINARY(255) NOT NULL,"
        "  detail VARBINARY(255) NOT NULL,"
        "  KEY audit_op (op_id, id),"
        "  CONSTRAINT audit_op_fk FOREIGN KEY (op_id) REFERENCES operations (id)"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"},
    /* nothing is ever deleted; the audit log is append-only */
    {1, "CREATE TRIGGER IF NOT EXISTS operations_no_delete BEFORE DELETE ON operations "
        "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'operations are never deleted'"},
    {1, "CREATE TRIGGER IF NOT EXISTS calls_no_delete BEFORE DELETE ON calls "
        "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'calls are never deleted'"},
    {1, "CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit "
        "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit is append-only'"},
    {1, "CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit "
        "FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit is append-only'"},
    /* 2: the running exit's per-second samples (operational data, pruned) */
    {2, "CREATE TABLE IF NOT EXISTS exit_samples ("
        "  at BIGINT NOT NULL PRIMARY KEY,"
        "  epoch BIGINT NOT NULL,"
        "  in_flight INT UNSIGNED NOT NULL,"
        "  starts INT UNSIGNED NOT NULL,"
        "  call_ends INT UNSIGNED NOT NULL,"
        "  op_closes INT UNSIGNED NOT NULL,"
        "  held TINYINT NOT NULL,"
        "  oldest_open BIGINT NULL,"
        "  figures VARBINARY(4095) NOT NULL DEFAULT '',"
        "  CONSTRAINT samples_held CHECK (held IN (0, 1))"
        ") ENGINE=InnoDB"},
    /* 3: shares of the account quota (more than one dispatcher). The split
     * in force, each share's current epoch (the counter stays owner.epoch),
     * and the share every claim was made under. */
    {3, "CREATE TABLE IF NOT EXISTS exit_split ("
        "  id TINYINT NOT NULL PRIMARY KEY,"
        "  shares INT UNSIGNED NOT NULL,"
        "  starts_per_second DOUBLE NOT NULL,"
        "  max_in_flight INT UNSIGNED NOT NULL,"
        "  CONSTRAINT split_one CHECK (id = 1)"
        ") ENGINE=InnoDB"},
    {3, "CREATE TABLE IF NOT EXISTS exit_shares ("
        "  share INT UNSIGNED NOT NULL PRIMARY KEY,"
        "  epoch BIGINT NOT NULL,"
        "  KEY shares_epoch (epoch)"
        ") ENGINE=InnoDB"},
    {3, "INSERT IGNORE INTO exit_shares (share, epoch) SELECT 0, epoch FROM owner WHERE id = 1"},
    {3, "ALTER TABLE operations ADD COLUMN IF NOT EXISTS share INT UNSIGNED NOT NULL DEFAULT 0"},
    {3, "ALTER TABLE calls ADD COLUMN IF NOT EXISTS share INT UNSIGNED NOT NULL DEFAULT 0"},
};
#define MIGRATION_STEPS ((int)(sizeof(migrations) / sizeof(migrations[0])))
#define SCHEMA_VERSION  3

#define OP_COLS                                                                                    \
        "id, operation_id, payment_id, amount, currency, state, reason, attempts, "                \
        "attempt_limit, queries, query_limit, accepted_at, deadline_at, key_first_used, "          \
        "next_run_at, updated_at, last_wait_ms, operator_resend, epoch, refund_id, "               \
        "last_http_status, last_class, source"
#define OP_NCOLS 23

#define CALL_COLS                                                                                  \
        "id, op_id, operation_id, kind, attempt, request_id, epoch, start_mono, start_wall, "      \
        "in_flight_at_start, ended, end_mono, end_wall, sent, cls, http_status, latency_us, "      \
        "error"
#define CALL_NCOLS 18

#define AUDIT_COLS  "id, op_id, at, action, operator_name, reason, detail"
#define AUDIT_NCOLS 7

#define SAMPLE_COLS  "at, epoch, in_flight, starts, call_ends, op_closes, held, oldest_open, figures"
#define SAMPLE_NCOLS 9

#define AGAIN_STATES "state IN ('retry_wait','unknown')"
#define WAIT_STATES  "state IN ('pending','retry_wait','unknown')"
/* A re-send whose key is too old to re-use (%I now, %I key retention). */
#define KEY_TOO_OLD                                                                                \
        "(state = 'retry_wait' AND attempts > 0 AND key_first_used > 0 AND "                       \
        "key_first_used <= %I - %I)"

/* ---- the handle -------------------------------------------------------- */

struct mysql_store {
        struct store base;    /* first: store.c sees only this */
        MYSQL *db;            /* main connection; NULL while lost (reconnected lazily) */
        MYSQL *lock_db;       /* the owner's lock session; NULL when not the owner */
        int64_t epoch;        /* the epoch of our acquisition, 0 when not owner */
        bool commit_unknown;  /* the last COMMIT was lost in flight; ops re-check */
        unsigned lock_wait_s; /* innodb_lock_wait_timeout of our sessions */
        uint64_t affected;    /* rows changed by the last exec() */
        char host[256];
        char user[128];
        char password[256];
        char socket[256];
        char dbname[DB_NAME_MAX + 1];
        unsigned port;
        char lock_name[LOCK_NAME_MAX + 1]; /* of the share we hold (or last tried) */
        unsigned share;                    /* the share we hold, when epoch > 0 */
        char sql[SQL_MAX];
};

static struct mysql_store *M(struct store *store)
{
        return (struct mysql_store *)store;
}

/* ---- errors ------------------------------------------------------------ */

static bool lost_code(unsigned code)
{
        switch (code) {
        case CR_CONNECTION_ERROR:
        case CR_CONN_HOST_ERROR:
        case CR_SERVER_GONE_ERROR:
        case CR_SERVER_LOST:
        case CR_SERVER_LOST_EXTENDED:
        case CR_COMMANDS_OUT_OF_SYNC:
        case ER_CONNECTION_KILLED:
        case ER_SERVER_SHUTDOWN:
        case 4031: /* MySQL 8: ER_CLIENT_INTERACTION_TIMEOUT */
                return true;
        default:
                return false;
        }
}

static void conn_drop(MYSQL **db)
{
        if (*db)
                mysql_close(*db);
        *db = NULL;
}

/* Maps the last error of the main connection; a lost connection is closed
 * (s->db = NULL) so that the next transaction reconnects. */
static int fail(struct mysql_store *s)
{
        unsigned code = s->db ? mysql_errno(s->db) : CR_SERVER_GONE_ERROR;

        if (lost_code(code)) {
                conn_drop(&s->db);
                return TG_EIO;
        }
        switch (code) {
        case 0:
                return TG_ESTORE;
        case ER_LOCK_DEADLOCK:
        case ER_LOCK_WAIT_TIMEOUT:
        case ER_QUERY_INTERRUPTED:
                return TG_EBUSY;
        case ER_DUP_ENTRY:
                return TG_ECONFLICT;
        case CR_OUT_OF_MEMORY:
                return TG_ENOMEM;
        default:
                return TG_ESTORE;
        }
}

/* ---- the SQL builder ----------------------------------------------------- */

/* Formats into s->sql. %I int64_t, %U unsigned, %S a string (at most
 * 2 * TG_TEXT_MAX bytes are used), %L a long string (at most
 * STORE_FIGURES_MAX), both quoted and escaped for the main connection, %s
 * trusted SQL text (constants of this file only), %% a percent sign.
 * TG_ESTORE when it does not fit. */
static int vsqlf(struct mysql_store *s, const char *fmt, va_list ap)
{
        size_t n = 0;

        for (const char *p = fmt; *p; p++) {
                char num[32];
                const char *add = NULL;
                size_t len;

                if (*p != '%') {
                        if (n + 1 >= SQL_MAX)
                                return TG_ESTORE;
                        s->sql[n++] = *p;
                        continue;
                }
                p++;
                switch (*p) {
                case 'I':
                        snprintf(num, sizeof(num), "%" PRId64, va_arg(ap, int64_t));
                        add = num;
                        break;
                case 'U':
                        snprintf(num, sizeof(num), "%u", va_arg(ap, unsigned));
                        add = num;
                        break;
                case 's':
                        add = va_arg(ap, const char *);
                        break;
                case '%':
                        add = "%";
                        break;
                case 'S':
                case 'L': {
                        const char *str = va_arg(ap, const char *);

                        len = strnlen(str, *p == 'L' ? STORE_FIGURES_MAX : TG_TEXT_MAX * 2);
                        /* worst case: every byte escaped, two quotes, NUL */
                        if (!s->db || n + 2 * len + 3 >= SQL_MAX)
                                return TG_ESTORE;
                        s->sql[n++] = '\'';
                        n += mysql_real_escape_string(s->db, s->sql + n, str, (unsigned long)len);
                        s->sql[n++] = '\'';
                        continue;
                }
                default:
                        return TG_ESTORE; /* a bug in a format of this file */
                }
                len = strlen(add);
                if (n + len >= SQL_MAX)
                        return TG_ESTORE;
                memcpy(s->sql + n, add, len);
                n += len;
        }
        s->sql[n] = '\0';
        return 0;
}

static int run_sql(struct mysql_store *s)
{
        if (!s->db)
                return TG_EIO;
        if (mysql_real_query(s->db, s->sql, (unsigned long)strlen(s->sql)) != 0)
                return fail(s);
        return 0;
}

/* Runs a statement whose rows (if any) do not matter; s->affected is set. */
static int exec(struct mysql_store *s, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vsqlf(s, fmt, ap);
        va_end(ap);
        if (r == 0)
                r = run_sql(s);
        if (r < 0)
                return r;
        if (mysql_field_count(s->db) > 0) {
                MYSQL_RES *res = mysql_store_result(s->db);

                if (!res)
                        return fail(s);
                mysql_free_result(res);
        }
        s->affected = (uint64_t)mysql_affected_rows(s->db);
        return 0;
}

/* Runs a query and buffers its whole result (our pages are small). */
static int query(struct mysql_store *s, MYSQL_RES **ret_res, const char *fmt, ...)
{
        MYSQL_RES *res;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vsqlf(s, fmt, ap);
        va_end(ap);
        if (r == 0)
                r = run_sql(s);
        if (r < 0)
                return r;
        res = mysql_store_result(s->db);
        if (!res)
                return fail(s);
        *ret_res = res;
        return 0;
}

/* ---- values ------------------------------------------------------------ */

static bool parse_i64(const char *text, int64_t *ret)
{
        char *end;
        long long v;

        if (!text)
                return false;
        errno = 0;
        v = strtoll(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0')
                return false;
        *ret = (int64_t)v;
        return true;
}

static int64_t col_i64(MYSQL_ROW row, int col, bool *ok)
{
        int64_t v = 0;

        if (!parse_i64(row[col], &v))
                *ok = false;
        return v;
}

static unsigned col_uns(MYSQL_ROW row, int col, bool *ok)
{
        int64_t v = col_i64(row, col, ok);

        if (v < 0 || v > (int64_t)UINT_MAX) {
                *ok = false;
                return 0;
        }
        return (unsigned)v;
}

static void col_copy(MYSQL_ROW row, const unsigned long *lens, int col, char *dst, size_t size)
{
        size_t n = row[col] ? lens[col] : 0;

        if (n >= size)
                n = size - 1;
        if (n > 0)
                memcpy(dst, row[col], n);
        dst[n] = '\0';
        /* a NUL inside a value would end it early here; that is all it can do */
}

static const char *col_text(MYSQL_ROW row, int col)
{
        return row[col] ? row[col] : "";
}

static int read_op(MYSQL_RES *res, MYSQL_ROW row, struct op_record *ret_op)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        struct op_record op;
        bool ok = lens != NULL && mysql_num_fields(res) == OP_NCOLS;

        if (!ok)
                return TG_ESTORE;
        memset(&op, 0, sizeof(op));
        op.id = col_i64(row, 0, &ok);
        col_copy(row, lens, 1, op.req.operation_id, sizeof(op.req.operation_id));
        col_copy(row, lens, 2, op.req.payment_id, sizeof(op.req.payment_id));
        op.req.amount = col_i64(row, 3, &ok);
        col_copy(row, lens, 4, op.req.currency, sizeof(op.req.currency));
        ok = ok && store_state_parse(col_text(row, 5), &op.state) == 0;
        ok = ok && store_reason_parse(col_text(row, 6), &op.reason) == 0;
        op.attempts = col_uns(row, 7, &ok);
        op.attempt_limit = col_uns(row, 8, &ok);
        op.queries = col_uns(row, 9, &ok);
        op.query_limit = col_uns(row, 10, &ok);
        op.accepted_at = col_i64(row, 11, &ok);
        op.deadline_at = col_i64(row, 12, &ok);
        op.key_first_used = col_i64(row, 13, &ok);
        op.next_run_at = col_i64(row, 14, &ok);
        op.updated_at = col_i64(row, 15, &ok);
        op.last_wait_ms = col_i64(row, 16, &ok);
        op.operator_resend = col_i64(row, 17, &ok) != 0;
        op.epoch = col_i64(row, 18, &ok);
        col_copy(row, lens, 19, op.refund_id, sizeof(op.refund_id));
        op.last_http_status = (int)col_i64(row, 20, &ok);
        ok = ok && store_class_parse(col_text(row, 21), &op.last_class) == 0;
        col_copy(row, lens, 22, op.source, sizeof(op.source));
        if (!ok)
                return TG_ESTORE;
        *ret_op = op;
        return 0;
}

static int read_call(MYSQL_RES *res, MYSQL_ROW row, struct call_record *ret_call)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        struct call_record c;
        bool ok = lens != NULL && mysql_num_fields(res) == CALL_NCOLS;

        if (!ok)
                return TG_ESTORE;
        memset(&c, 0, sizeof(c));
        c.id = col_i64(row, 0, &ok);
        c.op_id = col_i64(row, 1, &ok);
        col_copy(row, lens, 2, c.operation_id, sizeof(c.operation_id));
        ok = ok && store_kind_parse(col_text(row, 3), &c.kind) == 0;
        c.attempt = col_uns(row, 4, &ok);
        col_copy(row, lens, 5, c.request_id, sizeof(c.request_id));
        c.epoch = col_i64(row, 6, &ok);
        c.start_mono = col_i64(row, 7, &ok);
        c.start_wall = col_i64(row, 8, &ok);
        c.in_flight_at_start = col_uns(row, 9, &ok);
        c.ended = col_i64(row, 10, &ok) != 0;
        c.end_mono = col_i64(row, 11, &ok);
        c.end_wall = col_i64(row, 12, &ok);
        c.sent = col_i64(row, 13, &ok) != 0;
        ok = ok && store_class_parse(col_text(row, 14), &c.cls) == 0;
        c.http_status = (int)col_i64(row, 15, &ok);
        c.latency_us = col_i64(row, 16, &ok);
        col_copy(row, lens, 17, c.error, sizeof(c.error));
        if (!ok)
                return TG_ESTORE;
        *ret_call = c;
        return 0;
}

static int read_audit(MYSQL_RES *res, MYSQL_ROW row, struct audit_record *ret_audit)
{
        const unsigned long *lens = mysql_fetch_lengths(res);
        struct audit_record a;
        bool ok = lens != NULL && mysql_num_fields(res) == AUDIT_NCOLS;

        if (!ok)
                return TG_ESTORE;
        memset(&a, 0, sizeof(a));
        a.id = col_i64(row, 0, &ok);
        a.op_id = col_i64(row, 1, &ok);
        a.at = col_i64(row, 2, &ok);
        col_copy(row, lens, 3, a.action, sizeof(a.action));
        col_copy(row, lens, 4, a.operator_name, sizeof(a.operator_name));
        col_copy(row, lens, 5, a.reason, sizeof(a.reason));
        col_copy(row, lens, 6, a.detail, sizeof(a.detail));
        if (!ok)
                return TG_ESTORE;
        *ret_audit = a;
        return 0;
}

/* One integer from a one-row, one-column result; TG_ENOTFOUND for no row,
 * *ret_null for SQL NULL. */
static int one_i64(MYSQL_RES *res, int64_t *ret_value, bool *ret_null)
{
        MYSQL_ROW row = mysql_fetch_row(res);
        int64_t v = 0;
        int r = 0;

        *ret_null = false;
        if (!row)
                r = TG_ENOTFOUND;
        else if (!row[0])
                *ret_null = true;
        else if (parse_i64(row[0], &v))
                *ret_value = v;
        else
                r = TG_ESTORE;
        mysql_free_result(res);
        return r;
}

/* ---- connections -------------------------------------------------------- */

static pthread_once_t library_once = PTHREAD_ONCE_INIT;
static int library_status;

static void library_init(void)
{
        library_status = mysql_library_init(0, NULL, NULL) == 0 ? 0 : TG_ESTORE;
}

/* A fresh session with our options: no auto-reconnect (a silent reconnect
 * would lose a transaction and a lock without telling us), bounded waits. */
static int connect_one(const struct mysql_store *s, unsigned io_timeout, bool with_db,
                       MYSQL **ret_db)
{
        unsigned connect_timeout = CONNECT_TIMEOUT;
        my_bool reconnect = 0;
        MYSQL *db = mysql_init(NULL);
        char session[256];

        if (!db)
                return TG_ENOMEM;
        mysql_options(db, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
        mysql_options(db, MYSQL_OPT_READ_TIMEOUT, &io_timeout);
        mysql_options(db, MYSQL_OPT_WRITE_TIMEOUT, &io_timeout);
        mysql_options(db, MYSQL_OPT_RECONNECT, &reconnect);
        mysql_options(db, MYSQL_SET_CHARSET_NAME, "utf8mb4");
        if (!mysql_real_connect(db, s->host[0] ? s->host : NULL, s->user,
                                s->password[0] ? s->password : NULL, NULL, s->port,
                                s->socket[0] ? s->socket : NULL, 0)) {
                unsigned code = mysql_errno(db);

                mysql_close(db);
                /* refused or unreachable: the server is away, try later */
                return lost_code(code) ? TG_EIO : TG_ESTORE;
        }
        /* Our own session settings: strict (nothing truncated silently), no
         * backslash games (the escaping below assumes the default), UTC,
         * short lock waits (a waiting claim holds up the exit). */
        snprintf(session, sizeof(session),
                 "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ENGINE_SUBSTITUTION',"
                 " time_zone = '+00:00', innodb_lock_wait_timeout = %u, autocommit = 1",
                 s->lock_wait_s);
        if (mysql_query(db, session) != 0 ||
            mysql_query(db, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED") != 0) {
                unsigned code = mysql_errno(db);

                mysql_close(db);
                return lost_code(code) ? TG_EIO : TG_ESTORE;
        }
        if (with_db && mysql_select_db(db, s->dbname) != 0) {
                unsigned code = mysql_errno(db);

                mysql_close(db);
                if (code == ER_BAD_DB_ERROR)
                        return TG_ENOTFOUND;
                return lost_code(code) ? TG_EIO : TG_ESTORE;
        }
        *ret_db = db;
        return 0;
}

static int conn_ensure(struct mysql_store *s)
{
        if (s->db)
                return 0;
        return connect_one(s, IO_TIMEOUT, true, &s->db);
}

/* ---- transactions --------------------------------------------------------- */

typedef int (*tx_fn)(struct mysql_store *s, void *ctx);

enum {
        /* fn may run again after a COMMIT whose outcome is unknown: it reads
         * s->commit_unknown and checks what the lost COMMIT did. */
        TX_RECHECKS = 1,
};

static void pause_ms(long ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
}

/* Runs fn inside one transaction: START TRANSACTION, fn, COMMIT; a failing
 * fn is rolled back. Retries a deadlock or lock wait timeout (the whole
 * transaction, a few times) and a lost connection (once, after
 * reconnecting) when the transaction surely did not commit, or when fn
 * re-checks (TX_RECHECKS). Returns fn's code or a TG_E* code. */
static int run_tx(struct mysql_store *s, tx_fn fn, void *ctx, unsigned flags)
{
        unsigned busy = 0, lost = 0;
        int r;

        s->commit_unknown = false;
        for (;;) {
                bool committing = false;

                r = conn_ensure(s);
                if (r == 0)
                        r = exec(s, "START TRANSACTION");
                if (r == 0)
                        r = fn(s, ctx);
                if (r == 0) {
                        committing = true;
                        r = exec(s, "COMMIT");
                }
                if (r == 0)
                        break;
                if (s->db && !committing)
                        (void)exec(s, "ROLLBACK");
                if (r == TG_EBUSY && busy < BUSY_TRIES) {
                        /* InnoDB rolled back (deadlock) or we did (lock wait
                         * timeout): the transaction never happened */
                        busy++;
                        pause_ms(5L << (busy < 6 ? busy : 6));
                        continue;
                }
                if (r == TG_EIO && !s->db && lost < LOST_TRIES) {
                        if (committing) {
                                if (!(flags & TX_RECHECKS))
                                        break; /* outcome unknown: say so */
                                s->commit_unknown = true;
                        }
                        lost++;
                        continue;
                }
                break;
        }
        s->commit_unknown = false;
        return r;
}

/* ---- row helpers ----------------------------------------------------------- */

/* One op by operation_id or id; `lock` adds FOR UPDATE. */
static int op_lookup(struct mysql_store *s, const char *key, int64_t id, bool lock,
                     struct op_record *ret_op)
{
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r;

        if (key)
                r = query(s, &res, "SELECT " OP_COLS " FROM operations WHERE operation_id = %S%s",
                          key, lock ? " FOR UPDATE" : "");
        else
                r = query(s, &res, "SELECT " OP_COLS " FROM operations WHERE id = %I%s", id,
                          lock ? " FOR UPDATE" : "");
        if (r < 0)
                return r;
        row = mysql_fetch_row(res);
        r = row ? read_op(res, row, ret_op) : TG_ENOTFOUND;
        mysql_free_result(res);
        return r;
}

static int op_write(struct mysql_store *s, const struct op_record *op)
{
        int r = exec(s,
                     "UPDATE operations SET state = %S, reason = %S, attempts = %U, "
                     "attempt_limit = %U, queries = %U, query_limit = %U, deadline_at = %I, "
                     "key_first_used = %I, next_run_at = %I, updated_at = %I, "
                     "last_wait_ms = %I, operator_resend = %I, epoch = %I, refund_id = %S, "
                     "last_http_status = %I, last_class = %S WHERE id = %I",
                     store_state_text(op->state), store_reason_text(op->reason), op->attempts,
                     op->attempt_limit, op->queries, op->query_limit, op->deadline_at,
                     op->key_first_used, op->next_run_at, op->updated_at, op->last_wait_ms,
                     (int64_t)op->operator_resend, op->epoch, op->refund_id,
                     (int64_t)op->last_http_status, store_class_text(op->last_class), op->id);

        /* affected rows counts changed rows only: an identical write is 0 */
        return r;
}

static int audit_insert(struct mysql_store *s, int64_t op_id, tg_wall_ms at, const char *action,
                        const char *operator_name, const char *reason, const char *detail)
{
        return exec(s,
                    "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
                    "VALUES (%I, %I, %S, %S, %S, %S)",
                    op_id, at, action, operator_name, reason, detail);
}

static int audit_to_manual(struct mysql_store *s, const struct op_record *op, tg_wall_ms now,
                           const char *how)
{
        char detail[TG_TEXT_MAX];

        snprintf(detail, sizeof(detail), "%s: to manual after %u POSTs, %u queries", how,
                 op->attempts, op->queries);
        return audit_insert(s, op->id, now, "event", "tollgate", store_reason_text(op->reason),
                            detail);
}

/* `share`: LOCK IN SHARE MODE, so that a takeover's bump waits for us. */
static int owner_epoch_read(struct mysql_store *s, bool share, int64_t *ret_epoch)
{
        MYSQL_RES *res;
        bool null = false;
        int64_t v = 0;
        int r = query(s, &res, "SELECT epoch FROM owner WHERE id = 1%s",
                      share ? " LOCK IN SHARE MODE" : "");

        if (r < 0)
                return r;
        r = one_i64(res, &v, &null);
        if (r == TG_ENOTFOUND || null)
                r = TG_ESTORE;
        if (r == 0)
                *ret_epoch = v;
        return r;
}

/* TG_EFENCED unless `epoch` is the current epoch of a share; that share in
 * *ret_share. LOCK IN SHARE MODE: a takeover of the share waits for us. */
static int check_epoch(struct mysql_store *s, int64_t epoch, unsigned *ret_share)
{
        MYSQL_RES *res;
        bool null = false;
        int64_t share = 0;
        int r;

        if (epoch <= 0)
                return TG_EFENCED; /* shares never held have epoch 0 */
        r = query(s, &res,
                  "SELECT share FROM exit_shares WHERE epoch = %I ORDER BY share LIMIT 1 "
                  "LOCK IN SHARE MODE",
                  epoch);
        if (r == 0)
                r = one_i64(res, &share, &null);
        if (r == TG_ENOTFOUND)
                return TG_EFENCED;
        if (r == 0 && (null || share < 0 || share >= STORE_SHARES_MAX))
                r = TG_ESTORE;
        if (r == 0 && ret_share)
                *ret_share = (unsigned)share;
        return r;
}

/* The split in force; TG_ENOTFOUND when none was recorded. */
static int split_read(struct mysql_store *s, struct store_split *ret_split)
{
        MYSQL_RES *res;
        MYSQL_ROW row;
        struct store_split v = {0};
        int r = query(s, &res,
                      "SELECT shares, max_in_flight, starts_per_second FROM exit_split "
                      "WHERE id = 1");
        bool ok = true;

        if (r < 0)
                return r;
        row = mysql_fetch_row(res);
        if (!row) {
                mysql_free_result(res);
                return TG_ENOTFOUND;
        }
        v.shares = col_uns(row, 0, &ok);
        v.max_in_flight = col_uns(row, 1, &ok);
        if (ok && row[2]) {
                char *end;

                errno = 0;
                v.starts_per_second = strtod(row[2], &end);
                ok = errno == 0 && end != row[2] && *end == '\0';
        }
        mysql_free_result(res);
        if (!ok || v.shares < 1 || v.shares > STORE_SHARES_MAX)
                return TG_ESTORE;
        *ret_split = v;
        return 0;
}

static int call_by(struct mysql_store *s, int64_t id, bool lock, struct call_record *ret_call)
{
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r = query(s, &res, "SELECT " CALL_COLS " FROM calls WHERE id = %I%s", id,
                      lock ? " FOR UPDATE" : "");

        if (r < 0)
                return r;
        row = mysql_fetch_row(res);
        r = row ? read_call(res, row, ret_call) : TG_ENOTFOUND;
        mysql_free_result(res);
        return r;
}

/* ---- url, open, migrate, close ---------------------------------------------- */

/* Decodes %XX in place (user names and passwords may need them). */
static bool url_decode(char *text)
{
        char *out = text;

        for (const char *p = text; *p; p++) {
                if (*p == '%') {
                        char hex[3] = {0};
                        char *end;
                        long v;

                        if (!isxdigit((unsigned char)p[1]) || !isxdigit((unsigned char)p[2]))
                                return false;
                        hex[0] = p[1];
                        hex[1] = p[2];
                        v = strtol(hex, &end, 16);
                        if (v == 0)
                                return false;
                        *out++ = (char)v;
                        p += 2;
                } else {
                        *out++ = *p;
                }
        }
        *out = '\0';
        return true;
}

static bool copy_part(char *dst, size_t size, const char *from, size_t len)
{
        if (len >= size)
                return false;
        memcpy(dst, from, len);
        dst[len] = '\0';
        return true;
}

/* First line of a file, without the newline; the file stays private. */
static int read_password_file(const char *path, char *dst, size_t size)
{
        FILE *f = fopen(path, "re");
        size_t n;

        if (!f)
                return TG_EIO;
        if (!fgets(dst, (int)size, f)) {
                fclose(f);
                dst[0] = '\0';
                return TG_EINVAL;
        }
        fclose(f);
        n = strcspn(dst, "\r\n");
        dst[n] = '\0';
        return 0;
}

static bool db_name_ok(const char *name)
{
        size_t n = strlen(name);

        if (n == 0 || n > DB_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)name[i]) && name[i] != '_')
                        return false;
        return true;
}

/* user[:password]@host[:port]/db[?key=value&...] */
static int parse_where(struct mysql_store *s, const char *where)
{
        const char *at = strrchr(where, '@');
        const char *hostpart, *slash, *qmark, *colon;
        char params[STORE_URL_MAX] = "";
        char port[16];
        const char *env;

        if (!at)
                return TG_EINVAL;
        colon = memchr(where, ':', (size_t)(at - where));
        if (colon) {
                if (!copy_part(s->user, sizeof(s->user), where, (size_t)(colon - where)) ||
                    !copy_part(s->password, sizeof(s->password), colon + 1,
                               (size_t)(at - colon - 1)))
                        return TG_EINVAL;
        } else if (!copy_part(s->user, sizeof(s->user), where, (size_t)(at - where))) {
                return TG_EINVAL;
        }
        if (!s->user[0] || !url_decode(s->user) || !url_decode(s->password))
                return TG_EINVAL;
        hostpart = at + 1;
        slash = strchr(hostpart, '/');
        if (!slash)
                return TG_EINVAL;
        colon = memchr(hostpart, ':', (size_t)(slash - hostpart));
        s->port = 3306;
        if (colon) {
                int64_t p = 0;

                if (!copy_part(s->host, sizeof(s->host), hostpart, (size_t)(colon - hostpart)) ||
                    !copy_part(port, sizeof(port), colon + 1, (size_t)(slash - colon - 1)) ||
                    !parse_i64(port, &p) || p < 1 || p > 65535)
                        return TG_EINVAL;
                s->port = (unsigned)p;
        } else if (!copy_part(s->host, sizeof(s->host), hostpart, (size_t)(slash - hostpart))) {
                return TG_EINVAL;
        }
        qmark = strchr(slash + 1, '?');
        if (qmark) {
                if (!copy_part(s->dbname, sizeof(s->dbname), slash + 1,
                               (size_t)(qmark - slash - 1)) ||
                    !copy_part(params, sizeof(params), qmark + 1, strlen(qmark + 1)))
                        return TG_EINVAL;
        } else if (!copy_part(s->dbname, sizeof(s->dbname), slash + 1, strlen(slash + 1))) {
                return TG_EINVAL;
        }
        if (!db_name_ok(s->dbname) || (!s->host[0] && !qmark))
                return TG_EINVAL;

        /* key=value&key=value, parsed without strtok */
        for (char *p = params; *p;) {
                char *amp = strchr(p, '&');
                char *eq;

                if (amp)
                        *amp = '\0';
                eq = strchr(p, '=');
                if (!eq)
                        return TG_EINVAL;
                *eq = '\0';
                if (!url_decode(eq + 1))
                        return TG_EINVAL;
                if (strcmp(p, "password_file") == 0) {
                        int r = read_password_file(eq + 1, s->password, sizeof(s->password));

                        if (r < 0)
                                return r;
                } else if (strcmp(p, "socket") == 0) {
                        if (!copy_part(s->socket, sizeof(s->socket), eq + 1, strlen(eq + 1)))
                                return TG_EINVAL;
                } else {
                        return TG_EINVAL;
                }
                if (!amp)
                        break;
                p = amp + 1;
        }
        env = getenv("TG_MYSQL_PASSWORD");
        if (!s->password[0] && env &&
            !copy_part(s->password, sizeof(s->password), env, strlen(env)))
                return TG_EINVAL;
        return 0;
}

/* GET_LOCK names are at most 64 characters: long database names are
 * represented by a hash. */
static void lock_name_for(const char *prefix, const char *dbname, char *dst, size_t size)
{
        size_t need = strlen(prefix) + strlen(dbname);

        if (need < size) {
                /* fits: checked above (the copy keeps gcc from guessing) */
                memcpy(dst, prefix, strlen(prefix));
                memcpy(dst + strlen(prefix), dbname, strlen(dbname) + 1);
        } else {
                uint64_t h = 1469598103934665603ULL; /* FNV-1a */

                for (const char *p = dbname; *p; p++)
                        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
                snprintf(dst, size, "%s%016" PRIx64, prefix, h);
        }
}

/* GET_LOCK names are at most 64 characters: share 0 keeps the one-owner
 * name; share k ends in "_<k>" after the (maybe hashed) database name. */
static void share_lock_name(const struct mysql_store *s, unsigned share, char *dst, size_t size)
{
        char base[LOCK_NAME_MAX + 1];
        size_t n;

        if (share == 0) {
                lock_name_for("tollgate_owner_", s->dbname, dst, size);
                return;
        }
        lock_name_for("tollgate_share_", s->dbname, base, LOCK_NAME_MAX + 1 - 4);
        n = strlen(base);
        snprintf(dst, size, "%.*s_%u", (int)n, base, share % STORE_SHARES_MAX);
}

static int migrate_steps(struct mysql_store *s)
{
        MYSQL_RES *res;
        int64_t version = 0;
        bool null = false;
        int r;

        r = exec(s, "CREATE TABLE IF NOT EXISTS schema_version ("
                    "id TINYINT NOT NULL PRIMARY KEY, version INT NOT NULL,"
                    "CONSTRAINT schema_one CHECK (id = 1)) ENGINE=InnoDB");
        if (r == 0)
                r = exec(s, "INSERT IGNORE INTO schema_version (id, version) VALUES (1, 0)");
        if (r == 0)
                r = query(s, &res, "SELECT version FROM schema_version WHERE id = 1");
        if (r == 0)
                r = one_i64(res, &version, &null);
        if (r < 0)
                return r;
        if (null || version > SCHEMA_VERSION)
                return TG_ESTORE; /* written by a newer tollgate */
        for (int v = (int)version + 1; v <= SCHEMA_VERSION; v++) {
                for (int i = 0; i < MIGRATION_STEPS && r == 0; i++) {
                        if (migrations[i].version != v)
                                continue;
                        r = exec(s, "%s", migrations[i].sql);
                        /* a trigger needs SUPER when the server writes a
                         * binlog without log_bin_trust_function_creators:
                         * the guards are then the grants (docs/outbox.md) */
                        if (r < 0 && s->db &&
                            mysql_errno(s->db) == ER_BINLOG_CREATE_ROUTINE_NEED_SUPER)
                                r = 0;
                }
                if (r == 0)
                        r = exec(s, "UPDATE schema_version SET version = %I WHERE id = 1",
                                 (int64_t)v);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int migrate(struct mysql_store *s)
{
        char name[LOCK_NAME_MAX + 1];
        MYSQL_RES *res;
        int64_t got = 0;
        bool null = false;
        int r;

        lock_name_for("tollgate_migrate_", s->dbname, name, sizeof(name));
        r = query(s, &res, "SELECT GET_LOCK(%S, %I)", name, (int64_t)MIGRATE_WAIT_S);
        if (r == 0)
                r = one_i64(res, &got, &null);
        if (r < 0)
                return r;
        if (null || got != 1)
                return TG_EBUSY;
        r = migrate_steps(s);
        if (s->db)
                (void)exec(s, "SELECT RELEASE_LOCK(%S)", name);
        return r;
}

static void mysql_store_close(struct store *store)
{
        struct mysql_store *s = M(store);

        if (!s)
                return;
        conn_drop(&s->lock_db);
        conn_drop(&s->db);
        /* the password was ours only */
        memset(s->password, 0, sizeof(s->password));
        free(s);
}

static const struct store_ops mysql_ops;

int store_mysql_open(const char *where, struct store **ret_store)
{
        struct mysql_store *s;
        int r;

        pthread_once(&library_once, library_init);
        if (library_status < 0)
                return library_status;
        s = calloc(1, sizeof(*s));
        if (!s)
                return TG_ENOMEM;
        s->base.ops = &mysql_ops;
        s->lock_wait_s = LOCK_WAIT_S;
        r = parse_where(s, where);
        if (r < 0)
                goto fail;
        share_lock_name(s, 0, s->lock_name, sizeof(s->lock_name));

        r = connect_one(s, IO_TIMEOUT, true, &s->db);
        if (r == TG_ENOTFOUND) {
                /* no such database: create it (if the user may) */
                r = connect_one(s, IO_TIMEOUT, false, &s->db);
                if (r == 0)
                        r = exec(s,
                                 "CREATE DATABASE IF NOT EXISTS `%s` "
                                 "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
                                 s->dbname);
                if (r == 0 && mysql_select_db(s->db, s->dbname) != 0)
                        r = fail(s);
        }
        if (r == 0)
                r = migrate(s);
        if (r < 0)
                goto fail;
        *ret_store = &s->base;
        return 0;
fail:
        mysql_store_close(&s->base);
        return r;
}

/* ---- intake ---------------------------------------------------------------- */

static bool same_request(const struct refund_request *a, const struct refund_request *b)
{
        return strcmp(a->payment_id, b->payment_id) == 0 && a->amount == b->amount &&
               strcmp(a->currency, b->currency) == 0;
}

struct accept_ctx {
        const struct refund_request *req;
        tg_wall_ms now;
        const struct policy_config *limits;
        bool created;
        struct op_record op;
};

static int accept_tx(struct mysql_store *s, void *ctx)
{
        struct accept_ctx *c = ctx;
        const struct refund_request *req = c->req;
        int r = op_lookup(s, req->operation_id, 0, false, &c->op);

        c->created = false;
        if (r == 0) {
                if (!same_request(&c->op.req, req))
                        return TG_ECONFLICT; /* same key, other body: nothing stored */
                /* our own insert whose COMMIT answer was lost */
                c->created = s->commit_unknown && c->op.accepted_at == c->now &&
                             strcmp(c->op.source, "api") == 0;
                return 0;
        }
        if (r != TG_ENOTFOUND)
                return r;
        r = exec(s,
                 "INSERT INTO operations (operation_id, payment_id, amount, currency, state, "
                 "attempt_limit, query_limit, accepted_at, deadline_at, updated_at, source) "
                 "VALUES (%S, %S, %I, %S, 'pending', %U, %U, %I, %I, %I, 'api')",
                 req->operation_id, req->payment_id, req->amount, req->currency,
                 c->limits->max_attempts, c->limits->max_queries, c->now,
                 c->now + c->limits->deadline_ms, c->now);
        if (r == TG_ECONFLICT)
                return TG_EBUSY; /* a concurrent accept of the same key: look again */
        if (r < 0)
                return r;
        r = op_lookup(s, NULL, (int64_t)mysql_insert_id(s->db), false, &c->op);
        c->created = true;
        return r;
}

static int mysql_accept(struct store *store, const struct refund_request *req, tg_wall_ms now,
                        const struct policy_config *limits, bool *ret_created,
                        struct op_record *ret_op)
{
        struct accept_ctx c = {.req = req, .now = now, .limits = limits};
        /* commit before reply: run_tx returns after COMMIT */
        int r = run_tx(M(store), accept_tx, &c, TX_RECHECKS);

        if (r < 0)
                return r;
        *ret_created = c.created;
        *ret_op = c.op;
        return 0;
}

struct get_ctx {
        const char *key;
        struct op_record op;
};

static int get_tx(struct mysql_store *s, void *ctx)
{
        struct get_ctx *c = ctx;

        return op_lookup(s, c->key, 0, false, &c->op);
}

static int mysql_get(struct store *store, const char *operation_id, struct op_record *ret_op)
{
        struct get_ctx c = {.key = operation_id};
        int r = run_tx(M(store), get_tx, &c, TX_RECHECKS);

        if (r == 0)
                *ret_op = c.op;
        return r;
}

/* ---- ownership --------------------------------------------------------------- */

struct epoch_ctx {
        bool bump;
        unsigned share;                /* bump: the share taken */
        const struct store_split *put; /* bump: record this split first (NULL: keep) */
        int64_t epoch;
};

static int epoch_tx(struct mysql_store *s, void *ctx)
{
        struct epoch_ctx *c = ctx;
        int r = 0;

        if (c->put) {
                char rate[40];

                /* a number we print ourselves: trusted text for %s */
                snprintf(rate, sizeof(rate), "%.17g", c->put->starts_per_second);
                r = exec(s,
                         "REPLACE INTO exit_split (id, shares, starts_per_second, max_in_flight) "
                         "VALUES (1, %U, %s, %U)",
                         c->put->shares, rate, c->put->max_in_flight);
        }
        if (r == 0 && c->bump)
                r = exec(s, "UPDATE owner SET epoch = epoch + 1 WHERE id = 1");
        if (r == 0)
                r = owner_epoch_read(s, c->bump, &c->epoch);
        if (r == 0 && c->bump)
                r = exec(s,
                         "INSERT INTO exit_shares (share, epoch) VALUES (%U, %I) "
                         "ON DUPLICATE KEY UPDATE epoch = VALUES(epoch)",
                         c->share, c->epoch);
        return r;
}

/* One integer from the lock connection ("SELECT GET_LOCK(...)" and the
 * like): 1, 0, or -1 for NULL. The names are ours ([A-Za-z0-9_]): no
 * escaping is needed. */
static int lock_ask(struct mysql_store *s, const char *fn, const char *name, int wait_s,
                    int *ret_value)
{
        MYSQL_RES *res;
        MYSQL_ROW row;
        char sql[200];
        int r = 0;

        if (wait_s >= 0)
                snprintf(sql, sizeof(sql), "SELECT %s('%s', %d)", fn, name, wait_s);
        else
                snprintf(sql, sizeof(sql), "SELECT %s('%s')", fn, name);
        res = mysql_query(s->lock_db, sql) == 0 ? mysql_store_result(s->lock_db) : NULL;
        if (!res)
                return lost_code(mysql_errno(s->lock_db)) ? TG_EIO : TG_ESTORE;
        row = mysql_fetch_row(res);
        if (!row)
                r = TG_ESTORE;
        else
                *ret_value = !row[0] ? -1 : strcmp(row[0], "1") == 0 ? 1 : 0;
        mysql_free_result(res);
        return r;
}

/* Is the lock connection alive and still holding the lock? A failure drops
 * the connection (and with it any lock it might still hold). */
static int lock_held(struct mysql_store *s)
{
        MYSQL_RES *res;
        MYSQL_ROW row;
        char sql[160];
        bool held;

        if (!s->lock_db)
                return TG_ELOCKED;
        /* the lock name is ours: [A-Za-z0-9_] only, no escaping needed */
        snprintf(sql, sizeof(sql), "SELECT IS_USED_LOCK('%s') = CONNECTION_ID()", s->lock_name);
        res = mysql_query(s->lock_db, sql) == 0 ? mysql_store_result(s->lock_db) : NULL;
        if (!res) {
                conn_drop(&s->lock_db);
                return TG_ELOCKED;
        }
        row = mysql_fetch_row(res);
        held = row && row[0] && strcmp(row[0], "1") == 0;
        mysql_free_result(res);
        if (!held) {
                conn_drop(&s->lock_db);
                return TG_ELOCKED;
        }
        return 0;
}

struct split_ctx {
        bool found;
        struct store_split split;
};

static int split_tx(struct mysql_store *s, void *ctx)
{
        struct split_ctx *c = ctx;
        int r = split_read(s, &c->split);

        c->found = r == 0;
        return r == TG_ENOTFOUND ? 0 : r;
}

/* With the acquirers' lock held: which shares may be taken (*ret_n) and
 * which split to record first (*ret_put, NULL: none). TG_ECONFLICT when the
 * split in force differs and a share of it is held. */
static int split_decide(struct mysql_store *s, const struct store_split *want, unsigned *ret_n,
                        const struct store_split **ret_put)
{
        struct split_ctx c = {0};
        unsigned old_n;
        int r = run_tx(s, split_tx, &c, TX_RECHECKS);

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
         * holds a share of it. Every acquirer holds our lock while it picks,
         * so a share found free here stays free until we are done. */
        old_n = c.found ? c.split.shares : 1;
        for (unsigned k = 0; k < old_n; k++) {
                char name[LOCK_NAME_MAX + 1];
                int got = 0, dummy = 0;

                share_lock_name(s, k, name, sizeof(name));
                r = lock_ask(s, "GET_LOCK", name, 0, &got);
                if (r == 0 && got == 1)
                        r = lock_ask(s, "RELEASE_LOCK", name, -1, &dummy);
                if (r < 0)
                        return r;
                if (got != 1)
                        return TG_ECONFLICT;
        }
        *ret_n = want->shares;
        *ret_put = want;
        return 0;
}

static int mysql_share_acquire(struct store *store, const struct store_split *split,
                               unsigned *ret_share, int64_t *ret_epoch)
{
        struct mysql_store *s = M(store);
        struct epoch_ctx c = {.bump = true};
        char split_name[LOCK_NAME_MAX + 1];
        unsigned n = 0;
        int got = 0;
        int r;

        if (s->lock_db && s->epoch > 0 && lock_held(s) == 0) {
                /* Already ours: no second bump, which would fence our own claims. */
                *ret_share = s->share;
                *ret_epoch = s->epoch;
                return 0;
        }
        s->epoch = 0;
        conn_drop(&s->lock_db);
        r = connect_one(s, LOCK_IO_TIMEOUT, false, &s->lock_db);
        if (r < 0)
                return r;
        lock_name_for("tollgate_split_", s->dbname, split_name, sizeof(split_name));
        r = lock_ask(s, "GET_LOCK", split_name, SPLIT_WAIT_S, &got);
        if (r == 0 && got != 1)
                r = TG_EBUSY; /* another acquirer is slow: try again */
        if (r == 0)
                r = split_decide(s, split, &n, &c.put);
        for (unsigned k = 0; r == 0 && k < n; k++) {
                share_lock_name(s, k, s->lock_name, sizeof(s->lock_name));
                r = lock_ask(s, "GET_LOCK", s->lock_name, 0, &got);
                if (r == 0 && got == 1) {
                        c.share = k;
                        break;
                }
                if (r == 0 && k + 1 == n)
                        r = TG_ELOCKED; /* every share is held */
        }
        if (r < 0)
                goto fail;
        /* A bump is harmless to repeat (epochs only have to grow), so an
         * unknown COMMIT may be retried. */
        r = run_tx(s, epoch_tx, &c, TX_RECHECKS);
        if (r == 0)
                r = lock_ask(s, "RELEASE_LOCK", split_name, -1, &got);
        if (r == 0)
                r = lock_held(s); /* still ours after the bump? */
        if (r < 0)
                goto fail;
        s->share = c.share;
        s->epoch = c.epoch;
        *ret_share = c.share;
        *ret_epoch = c.epoch;
        return 0;
fail:
        conn_drop(&s->lock_db); /* drops the locks with the session */
        return r;
}

static int mysql_split_get(struct store *store, struct store_split *ret_split)
{
        struct split_ctx c = {0};
        int r = run_tx(M(store), split_tx, &c, TX_RECHECKS);

        if (r == 0 && !c.found)
                r = TG_ENOTFOUND;
        if (r == 0)
                *ret_split = c.split;
        return r;
}

static int mysql_owner_check(struct store *store)
{
        /* The lock session decides. A busy database is not a lost lock;
         * claims stay fenced by the epoch inside their own transaction. */
        return lock_held(M(store));
}

static void mysql_owner_release(struct store *store)
{
        struct mysql_store *s = M(store);

        conn_drop(&s->lock_db); /* the server releases the lock with the session */
        s->epoch = 0;
        s->share = 0;
}

static int mysql_owner_epoch(struct store *store, int64_t *ret_epoch)
{
        struct epoch_ctx c = {.bump = false};
        int r = run_tx(M(store), epoch_tx, &c, TX_RECHECKS);

        if (r == 0)
                *ret_epoch = c.epoch;
        return r;
}

struct recover_ctx {
        int64_t epoch;
        unsigned share;  /* of `epoch` */
        unsigned shares; /* in the split in force (1 when none) */
        const struct policy_config *config;
        tg_wall_ms now;
        unsigned count;
        struct op_record batch[RECOVER_BATCH];
};

static int recover_tx(struct mysql_store *s, void *ctx)
{
        struct recover_ctx *c = ctx;
        struct store_split split;
        int r = check_epoch(s, c->epoch, &c->share);

        c->count = 0;
        if (r == 0) {
                r = split_read(s, &split);
                c->shares = r == 0 ? split.shares : 1;
                if (r == TG_ENOTFOUND)
                        r = 0;
        }
        /* Each pass moves its rows out of in_flight, so the loop ends. */
        while (r == 0) {
                MYSQL_RES *res;
                MYSQL_ROW row;
                int n = 0;

                r = query(s, &res,
                          "SELECT " OP_COLS " FROM operations FORCE INDEX (ops_state_accepted) "
                          "WHERE state = 'in_flight' AND "
                          /* our share's older holders, or a share the split
                           * no longer has: never another live share's rows */
                          "((share = %U AND epoch < %I) OR share >= %U) LIMIT %I FOR UPDATE",
                          c->share, c->epoch, c->shares, (int64_t)RECOVER_BATCH);
                if (r < 0)
                        break;
                while (r == 0 && n < RECOVER_BATCH) {
                        row = mysql_fetch_row(res);
                        if (!row)
                                break;
                        r = read_op(res, row, &c->batch[n++]);
                }
                mysql_free_result(res);
                if (r < 0 || n == 0)
                        break;
                for (int i = 0; i < n && r == 0; i++) {
                        struct op_record *op = &c->batch[i];
                        struct policy_op pop;
                        struct policy_decision d;
                        char detail[TG_TEXT_MAX];

                        store_policy_op(op, &pop);
                        r = policy_after_takeover(c->config, &pop, c->now, &d);
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
                        op->operator_resend = false;
                        op->updated_at = c->now;
                        r = op_write(s, op);
                        if (r == 0)
                                r = exec(s,
                                         "UPDATE calls SET ended = 1, end_wall = %I, "
                                         "cls = 'unknown', sent = 1, "
                                         "error = 'outcome unknown (owner lost)' "
                                         "WHERE op_id = %I AND ended = 0",
                                         c->now, op->id);
                        if (r == 0)
                                r = audit_insert(s, op->id, c->now, "event", "tollgate",
                                                 store_reason_text(op->reason), detail);
                        if (r == 0)
                                c->count++;
                }
        }
        return r;
}

static int mysql_recover(struct store *store, int64_t epoch, const struct policy_config *config,
                         tg_wall_ms now, unsigned *ret_count)
{
        struct recover_ctx *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return TG_ENOMEM;
        c->epoch = epoch;
        c->config = config;
        c->now = now;
        /* idempotent: a second run after an unknown COMMIT finds less to do */
        r = run_tx(M(store), recover_tx, c, TX_RECHECKS);
        if (r == 0)
                *ret_count = c->count;
        free(c);
        return r;
}

/* ---- the exit ------------------------------------------------------------------- */

static int earliest_due(struct mysql_store *s, tg_wall_ms *ret_next)
{
        MYSQL_RES *res;
        int64_t v = 0;
        bool null = false;
        int r = query(s, &res,
                      "SELECT MIN(next_run_at) FROM operations FORCE INDEX (ops_state_due) "
                      "WHERE " AGAIN_STATES);

        if (r == 0)
                r = one_i64(res, &v, &null);
        if (r < 0)
                return r;
        *ret_next = null ? TG_WALL_NEVER : v;
        return 0;
}

/* The oldest-accepted due operation of the group, locked FOR UPDATE; one
 * locked by another transaction is skipped, never waited for. */
static int pick(struct mysql_store *s, const struct claim_args *args, int64_t *ret_id)
{
        /* key age check off: a retention no key can reach */
        int64_t retention = args->key_retention_ms > 0 ? args->key_retention_ms : INT64_MAX / 4;
        int64_t ids[AGAIN_CANDIDATES];
        tg_wall_ms next = TG_WALL_NEVER;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int n = 0, r;

        if (args->group == STORE_GROUP_FIRST) {
                int64_t id = 0;
                bool null = false;

                r = query(s, &res,
                          "SELECT id FROM operations FORCE INDEX (ops_state_accepted) "
                          "WHERE state = 'pending' AND attempt_limit > 0 AND deadline_at > %I "
                          "ORDER BY accepted_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
                          args->now);
                if (r == 0)
                        r = one_i64(res, &id, &null);
                if (r == 0 && null)
                        r = TG_ESTORE;
                if (r == 0)
                        *ret_id = id;
                return r;
        }
        /* Nothing due (the common case while retries wait): one index probe. */
        r = earliest_due(s, &next);
        if (r < 0)
                return r;
        if (next > args->now)
                return TG_ENOTFOUND;
        /* Candidates without locks (the again group spans two states, so the
         * order needs a sort, which FOR UPDATE would turn into a lock on
         * every due row), then lock the first that is still free and due. */
        r = query(s, &res,
                  "SELECT id FROM operations FORCE INDEX (ops_state_due) "
                  "WHERE " AGAIN_STATES " AND next_run_at <= %I AND deadline_at > %I "
                  "AND NOT " KEY_TOO_OLD " AND (%I = 0 OR state = 'retry_wait') "
                  "ORDER BY accepted_at, id LIMIT %I",
                  args->now, args->now, args->now, retention, (int64_t)args->no_queries,
                  (int64_t)AGAIN_CANDIDATES);
        if (r < 0)
                return r;
        while (n < AGAIN_CANDIDATES) {
                row = mysql_fetch_row(res);
                if (!row)
                        break;
                if (parse_i64(row[0], &ids[n]))
                        n++;
        }
        mysql_free_result(res);
        for (int i = 0; i < n; i++) {
                int64_t id = 0;
                bool null = false;

                r = query(s, &res,
                          "SELECT id FROM operations WHERE id = %I AND " AGAIN_STATES
                          " AND next_run_at <= %I AND deadline_at > %I AND NOT " KEY_TOO_OLD
                          " AND (%I = 0 OR state = 'retry_wait') FOR UPDATE SKIP LOCKED",
                          ids[i], args->now, args->now, args->now, retention,
                          (int64_t)args->no_queries);
                if (r == 0)
                        r = one_i64(res, &id, &null);
                if (r == TG_ENOTFOUND)
                        continue;
                if (r == 0 && null)
                        r = TG_ESTORE;
                if (r == 0)
                        *ret_id = id;
                return r;
        }
        return TG_ENOTFOUND;
}

struct claim_ctx {
        const struct claim_args *args;
        struct op_record op;
        struct call_record call;
};

/* After a COMMIT whose answer was lost: did the claim happen? Its call row
 * carries our request_id. */
static int claim_recheck(struct mysql_store *s, struct claim_ctx *c)
{
        MYSQL_RES *res;
        int64_t id = 0;
        bool null = false;
        int r = query(s, &res, "SELECT id FROM calls WHERE request_id = %S AND epoch = %I",
                      c->args->request_id, c->args->epoch);

        if (r == 0)
                r = one_i64(res, &id, &null);
        if (r == 0 && null)
                r = TG_ESTORE;
        if (r == 0)
                r = call_by(s, id, false, &c->call);
        if (r == 0)
                r = op_lookup(s, NULL, c->call.op_id, false, &c->op);
        return r;
}

static int claim_tx(struct mysql_store *s, void *ctx)
{
        struct claim_ctx *c = ctx;
        const struct claim_args *args = c->args;
        struct op_record op;
        struct call_record call;
        int64_t id = 0;
        unsigned share = 0;
        int r;

        if (s->commit_unknown) {
                /* Never claim twice for one request: without a request id
                 * the lost claim cannot be found, so say the outcome is
                 * unknown (the next owner's recovery settles it). */
                if (!args->request_id[0])
                        return TG_EIO;
                r = claim_recheck(s, c);
                if (r != TG_ENOTFOUND)
                        return r; /* found (it committed), or a failure */
        }
        r = check_epoch(s, args->epoch, &share);
        if (r == 0)
                r = pick(s, args, &id);
        if (r == 0)
                r = op_lookup(s, NULL, id, false, &op); /* locked by pick */
        if (r < 0)
                return r;

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
        r = exec(s,
                 "UPDATE operations SET state = 'in_flight', attempts = %U, queries = %U, "
                 "key_first_used = %I, epoch = %I, share = %U, updated_at = %I WHERE id = %I",
                 op.attempts, op.queries, op.key_first_used, op.epoch, share, op.updated_at, op.id);
        if (r < 0)
                return r;

        call.op_id = op.id;
        store_copy_text(call.operation_id, sizeof(call.operation_id), op.req.operation_id);
        store_copy_text(call.request_id, sizeof(call.request_id), args->request_id);
        call.epoch = args->epoch;
        call.start_mono = args->start_mono;
        call.start_wall = args->now;
        call.in_flight_at_start = args->in_flight_at_start;
        call.ended = false;
        call.cls = TG_CLASS_UNKNOWN;
        r = exec(s,
                 "INSERT INTO calls (op_id, operation_id, kind, attempt, request_id, epoch, "
                 "start_mono, start_wall, in_flight_at_start, share) "
                 "VALUES (%I, %S, %S, %U, %S, %I, %I, %I, %U, %U)",
                 call.op_id, call.operation_id, store_kind_text(call.kind), call.attempt,
                 call.request_id, call.epoch, call.start_mono, call.start_wall,
                 call.in_flight_at_start, share);
        if (r < 0)
                return r;
        call.id = (int64_t)mysql_insert_id(s->db);
        c->op = op;
        c->call = call;
        return 0;
}

static int mysql_claim(struct store *store, const struct claim_args *args, struct op_record *ret_op,
                       struct call_record *ret_call)
{
        struct claim_ctx c = {.args = args};
        /* record attempt before send: the call row ("sent, outcome unknown")
         * and the counted attempt are committed before this returns. */
        int r = run_tx(M(store), claim_tx, &c, TX_RECHECKS);

        if (r < 0)
                return r;
        *ret_op = c.op;
        *ret_call = c.call;
        return 0;
}

struct settle_ctx {
        const struct settle_args *a;
};

static int settle_tx(struct mysql_store *s, void *ctx)
{
        const struct settle_args *a = ((struct settle_ctx *)ctx)->a;
        struct op_record op;
        struct call_record call;
        int r = op_lookup(s, NULL, a->op_id, true, &op);

        if (r == 0)
                r = call_by(s, a->call_id, true, &call);
        if (r == 0 && call.op_id != op.id)
                r = TG_EINVAL;
        if (r < 0)
                return r;
        /* our own settle whose COMMIT answer was lost: done already */
        if (s->commit_unknown && call.ended && call.epoch == a->epoch &&
            call.end_mono == a->end_mono && op.epoch == a->epoch && op.state == a->decision.next)
                return 0;
        if (op.state != OP_IN_FLIGHT || op.epoch != a->epoch)
                return TG_EFENCED; /* recovered (and maybe claimed) by a newer owner */
        if (call.ended || call.epoch != a->epoch)
                return TG_EFENCED;
        r = exec(s,
                 "UPDATE calls SET ended = 1, end_mono = %I, end_wall = %I, sent = %I, cls = %S, "
                 "http_status = %I, latency_us = %I, error = %S, "
                 "start_mono = IF(%I > 0, %I, start_mono), "
                 "start_wall = IF(%I > 0, %I, start_wall) WHERE id = %I AND ended = 0",
                 a->end_mono, a->now, (int64_t)a->sent, store_class_text(a->cls),
                 (int64_t)a->http_status, a->latency_us, a->error, a->handoff_mono, a->handoff_mono,
                 a->handoff_wall, a->handoff_wall, a->call_id);
        if (r == 0 && s->affected != 1)
                r = TG_EFENCED;
        if (r < 0)
                return r;

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
        return r;
}

static int mysql_settle(struct store *store, const struct settle_args *a)
{
        struct settle_ctx c = {.a = a};

        return run_tx(M(store), settle_tx, &c, TX_RECHECKS);
}

struct sweep_ctx {
        int64_t retention;
        tg_wall_ms now;
        unsigned count;
};

static int sweep_tx(struct mysql_store *s, void *ctx)
{
        struct sweep_ctx *c = ctx;
        uint64_t changed;
        int r;

        c->count = 0;
        /* The audit rows first: they name the state each operation left.
         * deadline_at = 0 is an outbox row not yet taken in. */
        r = exec(s,
                 "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
                 "SELECT id, %I, 'event', 'tollgate', 'deadline', "
                 "CONCAT('deadline passed while ', state, ': to manual') "
                 "FROM operations WHERE " WAIT_STATES " AND deadline_at > 0 AND deadline_at < %I "
                 "FOR UPDATE",
                 c->now, c->now);
        if (r == 0)
                r = exec(s,
                         "UPDATE operations SET state = 'manual', reason = 'deadline', "
                         "next_run_at = 0, operator_resend = 0, updated_at = %I "
                         "WHERE " WAIT_STATES " AND deadline_at > 0 AND deadline_at < %I",
                         c->now, c->now);
        changed = s->affected;
        if (r == 0 && c->retention > 0) {
                r = exec(s,
                         "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
                         "SELECT id, %I, 'event', 'tollgate', 'key_retention', "
                         "'idempotency key past retention before its re-send: to manual' "
                         "FROM operations FORCE INDEX (ops_state_key) WHERE " KEY_TOO_OLD
                         " FOR UPDATE",
                         c->now, c->now, c->retention);
                if (r == 0)
                        r = exec(s,
                                 "UPDATE operations FORCE INDEX (ops_state_key) "
                                 "SET state = 'manual', reason = 'key_retention', "
                                 "next_run_at = 0, operator_resend = 0, updated_at = %I "
                                 "WHERE " KEY_TOO_OLD,
                                 c->now, c->now, c->retention);
                changed += s->affected;
        }
        if (r == 0)
                c->count = (unsigned)changed;
        return r;
}

static int mysql_sweep_deadlines(struct store *store, int64_t key_retention_ms, tg_wall_ms now,
                                 unsigned *ret_count)
{
        struct sweep_ctx c = {.retention = key_retention_ms, .now = now};
        int r = run_tx(M(store), sweep_tx, &c, TX_RECHECKS);

        if (r == 0)
                *ret_count = c.count;
        return r;
}

struct next_due_ctx {
        tg_wall_ms next;
        bool pending;
};

static int next_due_tx(struct mysql_store *s, void *ctx)
{
        struct next_due_ctx *c = ctx;
        MYSQL_RES *res;
        int64_t v = 0;
        bool null = false;
        int r = earliest_due(s, &c->next);

        if (r == 0)
                r = query(s, &res,
                          "SELECT EXISTS (SELECT 1 FROM operations WHERE state = 'pending')");
        if (r == 0)
                r = one_i64(res, &v, &null);
        if (r == 0)
                c->pending = !null && v != 0;
        return r;
}

static int mysql_next_due(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending)
{
        struct next_due_ctx c = {0};
        int r = run_tx(M(store), next_due_tx, &c, TX_RECHECKS);

        if (r < 0)
                return r;
        *ret_next_run_at = c.next;
        *ret_pending = c.pending;
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
                r = query(s, &res,
                          "SELECT " CALL_COLS " FROM calls WHERE op_id = %I AND id > %I "
                          "ORDER BY id LIMIT %I",
                          p->op_id, p->since, (int64_t)p->want);
        else
                r = query(s, &res,
                          "SELECT " CALL_COLS " FROM calls WHERE id > %I ORDER BY id LIMIT %I",
                          p->since, (int64_t)p->want);
        if (r < 0)
                return r;
        while (r == 0 && p->n < p->want) {
                row = mysql_fetch_row(res);
                if (!row)
                        break;
                r = read_call(res, row, &p->buf[p->n++]);
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
                r = run_tx(s, calls_page_tx, &p, TX_RECHECKS);
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

static int mysql_list_calls(struct store *store, int64_t since_id, unsigned limit, store_call_fn fn,
                            void *userdata)
{
        return walk_calls(M(store), 0, since_id, limit, fn, userdata);
}

static int mysql_list_op_calls(struct store *store, int64_t op_id, store_call_fn fn, void *userdata)
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
        r = query(s, &res, "SELECT state, COUNT(*) FROM operations GROUP BY state");
        if (r < 0)
                return r;
        while (r == 0) {
                enum op_state state;
                int64_t n = 0;

                row = mysql_fetch_row(res);
                if (!row)
                        break;
                if (store_state_parse(col_text(row, 0), &state) < 0 || !parse_i64(row[1], &n))
                        r = TG_ESTORE;
                else
                        st->by_state[state] = (uint64_t)n;
        }
        mysql_free_result(res);
        if (r == 0)
                /* one index probe per open state rather than a scan of them all */
                r = query(s, &res,
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
                r = one_i64(res, &v, &null);
        if (r == 0 && !null)
                st->oldest_open_accepted_at = v;
        /* InnoDB does not reuse ids of rolled-back inserts: count the rows */
        if (r == 0)
                r = query(s, &res, "SELECT COUNT(*) FROM calls");
        if (r == 0)
                r = one_i64(res, &v, &null);
        if (r == 0)
                st->calls_total = null ? 0 : (uint64_t)v;
        if (r == 0)
                r = owner_epoch_read(s, false, &st->epoch);
        return r;
}

static int mysql_stats(struct store *store, struct store_stats *ret_stats)
{
        struct store_stats st;
        int r = run_tx(M(store), stats_tx, &st, TX_RECHECKS);

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
        int r = query(s, &res,
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
                r = read_op(res, row, &p->buf[p->n++]);
        }
        mysql_free_result(res);
        return r;
}

static int mysql_list_manual(struct store *store, int64_t after_id, unsigned limit, store_op_fn fn,
                             void *userdata)
{
        struct manual_page p = {.after_id = after_id, .last_at = INT64_MIN, .last_id = INT64_MIN};
        int r = 0;

        p.buf = calloc(PAGE_ROWS, sizeof(*p.buf));
        if (!p.buf)
                return TG_ENOMEM;
        while (limit > 0) {
                p.want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                r = run_tx(M(store), manual_page_tx, &p, TX_RECHECKS);
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
        int r = query(s, &res,
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

static int mysql_list_audit(struct store *store, int64_t op_id, store_audit_fn fn, void *userdata)
{
        struct audit_page p = {.op_id = op_id};
        int r = 0;

        p.buf = calloc(PAGE_ROWS, sizeof(*p.buf));
        if (!p.buf)
                return TG_ENOMEM;
        for (;;) {
                r = run_tx(M(store), audit_page_tx, &p, TX_RECHECKS);
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
        int r = op_lookup(s, c->operation_id, 0, true, &op);

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
        r = op_write(s, &op);
        if (r < 0)
                return r;
        snprintf(detail, sizeof(detail),
                 "re-send with the same key as POST %u of %u; due %" PRId64 ", deadline %" PRId64,
                 op.attempts + 1, op.attempt_limit, op.next_run_at, op.deadline_at);
        r = audit_insert(s, op.id, c->now, "resend", c->operator_name, c->reason, detail);
        if (r == 0)
                c->op = op;
        return r;
}

static int mysql_operator_resend(struct store *store, const char *operation_id,
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
        int r = run_tx(M(store), resend_tx, &c, 0);

        if (r == 0)
                *ret_op = c.op;
        return r;
}

static int resolve_tx(struct mysql_store *s, void *ctx)
{
        struct operator_ctx *c = ctx;
        struct op_record op;
        char detail[TG_TEXT_MAX];
        int r = op_lookup(s, c->operation_id, 0, true, &op);

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
        r = op_write(s, &op);
        if (r == 0)
                r = audit_insert(s, op.id, c->now, "resolve", c->operator_name, c->reason, detail);
        if (r == 0)
                c->op = op;
        return r;
}

static int mysql_operator_resolve(struct store *store, const char *operation_id,
                                  const char *operator_name, const char *reason,
                                  enum op_state outcome, tg_wall_ms now, struct op_record *ret_op)
{
        struct operator_ctx c = {.operation_id = operation_id,
                                 .operator_name = operator_name,
                                 .reason = reason,
                                 .outcome = outcome,
                                 .now = now};
        int r = run_tx(M(store), resolve_tx, &c, 0);

        if (r == 0)
                *ret_op = c.op;
        return r;
}

static int external_tx(struct mysql_store *s, void *ctx)
{
        struct operator_ctx *c = ctx;
        struct op_record op;
        char detail[TG_TEXT_MAX];
        int r = op_lookup(s, c->operation_id, 0, true, &op);

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
        r = op_write(s, &op);
        if (r == 0)
                r = audit_insert(s, op.id, c->now, "external", c->source, "provider answer",
                                 detail);
        return r;
}

static int mysql_settle_external(struct store *store, const char *operation_id,
                                 enum op_state outcome, const char *refund_id, const char *source,
                                 tg_wall_ms now)
{
        struct operator_ctx c = {.operation_id = operation_id,
                                 .outcome = outcome,
                                 .refund_id = refund_id,
                                 .source = source,
                                 .now = now};

        /* idempotent: a re-run finds the outcome already there */
        return run_tx(M(store), external_tx, &c, TX_RECHECKS);
}

/* ---- outbox ------------------------------------------------------------------------ */

#define OUTBOX_BATCH 64

struct outbox_ctx {
        const struct policy_config *limits;
        tg_wall_ms now;
        unsigned taken, invalid;
        struct op_record batch[OUTBOX_BATCH];
};

static int outbox_tx(struct mysql_store *s, void *ctx)
{
        struct outbox_ctx *c = ctx;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int n = 0;
        int r;

        c->taken = c->invalid = 0;
        /* attempt_limit = 0: inserted by an application, not taken in yet.
         * SKIP LOCKED: two dispatchers never take in the same row, and a
         * row still inside its writer's open transaction is not visible. */
        r = query(s, &res,
                  "SELECT " OP_COLS " FROM operations FORCE INDEX (ops_state_accepted) "
                  "WHERE state = 'pending' AND attempt_limit = 0 "
                  "ORDER BY accepted_at, id LIMIT %I FOR UPDATE SKIP LOCKED",
                  (int64_t)OUTBOX_BATCH);
        if (r < 0)
                return r;
        while (r == 0 && n < OUTBOX_BATCH) {
                row = mysql_fetch_row(res);
                if (!row)
                        break;
                r = read_op(res, row, &c->batch[n++]);
        }
        mysql_free_result(res);
        for (int i = 0; i < n && r == 0; i++) {
                struct op_record *op = &c->batch[i];
                struct refund_fields f = {
                    .operation_id = op->req.operation_id,
                    .operation_id_len = strlen(op->req.operation_id),
                    .payment_id = op->req.payment_id,
                    .payment_id_len = strlen(op->req.payment_id),
                    .amount = op->req.amount,
                    .currency = op->req.currency,
                    .currency_len = strlen(op->req.currency),
                };
                struct refund_problem problem = {0};
                char detail[TG_TEXT_MAX];

                op->attempt_limit = c->limits->max_attempts;
                op->query_limit = c->limits->max_queries;
                op->deadline_at = op->accepted_at + c->limits->deadline_ms;
                op->updated_at = c->now;
                if (refund_validate(&f, &problem) == 0) {
                        r = op_write(s, op);
                        if (r == 0)
                                c->taken++;
                        continue;
                }
                /* invalid: to manual with the reason, never skipped */
                op->state = OP_MANUAL;
                op->reason = MANUAL_INVALID;
                op->next_run_at = 0;
                snprintf(detail, sizeof(detail), "outbox row refused: %s: %s",
                         problem.field ? problem.field : "?",
                         problem.message ? problem.message : "invalid");
                r = op_write(s, op);
                if (r == 0)
                        r = audit_insert(s, op->id, c->now, "event", "tollgate", "invalid", detail);
                if (r == 0)
                        c->invalid++;
        }
        return r;
}

static int mysql_outbox_intake(struct store *store, const struct policy_config *limits,
                               tg_wall_ms now, unsigned *ret_taken, unsigned *ret_invalid)
{
        struct outbox_ctx *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return TG_ENOMEM;
        c->limits = limits;
        c->now = now;
        /* a re-run after an unknown COMMIT finds the rows it took in gone */
        r = run_tx(M(store), outbox_tx, c, TX_RECHECKS);
        if (r == 0) {
                *ret_taken = c->taken;
                *ret_invalid = c->invalid;
        }
        free(c);
        return r;
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
        v.at = col_i64(row, 0, &ok);
        v.epoch = col_i64(row, 1, &ok);
        v.in_flight = col_uns(row, 2, &ok);
        v.starts = col_uns(row, 3, &ok);
        v.call_ends = col_uns(row, 4, &ok);
        v.op_closes = col_uns(row, 5, &ok);
        v.held = col_i64(row, 6, &ok) != 0;
        v.oldest_open_accepted_at = row[7] ? col_i64(row, 7, &ok) : TG_WALL_NEVER;
        col_copy(row, lens, 8, v.figures, sizeof(v.figures));
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
         * sample with the same `at` is replaced. */
        int r = exec(s,
                     "REPLACE INTO exit_samples (" SAMPLE_COLS ") "
                     "SELECT %I, %I, %U, %U, %U, %U, %I, (SELECT MIN(m) FROM ("
                     "SELECT MIN(accepted_at) AS m FROM operations WHERE state = 'pending' "
                     "UNION ALL SELECT MIN(accepted_at) FROM operations WHERE state = 'in_flight' "
                     "UNION ALL SELECT MIN(accepted_at) FROM operations "
                     "WHERE state = 'retry_wait' "
                     "UNION ALL SELECT MIN(accepted_at) FROM operations WHERE state = 'unknown'"
                     ") AS o), %L",
                     x->at, x->epoch, x->in_flight, x->starts, x->call_ends, x->op_closes,
                     (int64_t)(x->held ? 1 : 0), x->figures);

        if (r == 0)
                r = exec(s, "DELETE FROM exit_samples WHERE at < %I", c->keep_after);
        return r;
}

static int mysql_sample_put(struct store *store, const struct exit_sample *sample,
                            tg_wall_ms keep_after)
{
        struct sample_put_ctx c = {.sample = sample, .keep_after = keep_after};

        /* idempotent: a re-run replaces the same row and prunes nothing new */
        return run_tx(M(store), sample_put_tx, &c, TX_RECHECKS);
}

struct samples_page {
        tg_wall_ms since;
        int want;
        int n;
        struct exit_sample *buf;
};

static int samples_page_tx(struct mysql_store *s, void *ctx)
{
        struct samples_page *p = ctx;
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r = query(s, &res,
                      "SELECT " SAMPLE_COLS " FROM exit_samples WHERE at > %I ORDER BY at "
                      "LIMIT %I",
                      p->since, (int64_t)p->want);

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

static int mysql_list_samples(struct store *store, tg_wall_ms since, unsigned limit,
                              store_sample_fn fn, void *userdata)
{
        struct samples_page p = {.since = since};
        int r = 0;

        p.buf = calloc(PAGE_ROWS, sizeof(*p.buf));
        if (!p.buf)
                return TG_ENOMEM;
        while (limit > 0) {
                p.want = limit < PAGE_ROWS ? (int)limit : PAGE_ROWS;
                r = run_tx(M(store), samples_page_tx, &p, TX_RECHECKS);
                if (r < 0)
                        break;
                for (int i = 0; i < p.n && r == 0; i++)
                        r = fn(&p.buf[i], userdata);
                if (r != 0 || p.n < p.want)
                        break;
                p.since = p.buf[p.n - 1].at;
                limit -= (unsigned)p.n;
        }
        free(p.buf);
        return r;
}

static int last_sample_tx(struct mysql_store *s, void *ctx)
{
        MYSQL_RES *res;
        MYSQL_ROW row;
        int r = query(s, &res, "SELECT " SAMPLE_COLS " FROM exit_samples ORDER BY at DESC LIMIT 1");

        if (r < 0)
                return r;
        row = mysql_fetch_row(res);
        r = row ? read_sample(res, row, ctx) : TG_ENOTFOUND;
        mysql_free_result(res);
        return r;
}

static int mysql_last_sample(struct store *store, struct exit_sample *ret_sample)
{
        struct exit_sample *x = malloc(sizeof(*x));
        int r;

        if (!x)
                return TG_ENOMEM;
        r = run_tx(M(store), last_sample_tx, x, TX_RECHECKS);
        if (r == 0)
                *ret_sample = *x;
        free(x);
        return r;
}

/* MariaDB's lock waits are whole seconds (innodb_lock_wait_timeout): the
 * wait is rounded up, at least 1 s. Kept for the sessions of later
 * reconnects too. */
static int mysql_set_busy_timeout(struct store *store, int64_t ms)
{
        struct mysql_store *s = M(store);
        int64_t secs = (ms + 999) / 1000;

        s->lock_wait_s = secs < 1 ? 1 : (unsigned)secs;
        if (!s->db)
                return 0; /* the next connection gets it */
        return exec(s, "SET SESSION innodb_lock_wait_timeout = %U", s->lock_wait_s);
}

static const struct store_ops mysql_ops = {
    .name = "mysql",
    .close = mysql_store_close,
    .accept = mysql_accept,
    .get = mysql_get,
    .share_acquire = mysql_share_acquire,
    .split_get = mysql_split_get,
    .owner_check = mysql_owner_check,
    .owner_release = mysql_owner_release,
    .owner_epoch = mysql_owner_epoch,
    .recover = mysql_recover,
    .claim = mysql_claim,
    .settle = mysql_settle,
    .sweep_deadlines = mysql_sweep_deadlines,
    .next_due = mysql_next_due,
    .list_calls = mysql_list_calls,
    .list_op_calls = mysql_list_op_calls,
    .stats = mysql_stats,
    .list_manual = mysql_list_manual,
    .list_audit = mysql_list_audit,
    .operator_resend = mysql_operator_resend,
    .operator_resolve = mysql_operator_resolve,
    .settle_external = mysql_settle_external,
    .outbox_intake = mysql_outbox_intake,
    .sample_put = mysql_sample_put,
    .list_samples = mysql_list_samples,
    .last_sample = mysql_last_sample,
    .set_busy_timeout = mysql_set_busy_timeout,
};

#endif /* TG_HAVE_MARIADB */
