/*
 * store_mysql_sql — the MariaDB backend's way to the server: error mapping,
 * the SQL builder, column values and row decoders, connections and the
 * transaction runner.
 *
 * Values go into SQL text through one builder (sqlf) that escapes every
 * string with mysql_real_escape_string on a connection whose sql_mode
 * store_mysql_connect_one sets; integers are printed. There is no other way
 * into a query. A deadlock or lock wait timeout retries the whole
 * transaction (a few times, with a short pause); a lost connection is
 * reconnected and the transaction retried once, but only where that is safe:
 * a failure before COMMIT was sent, or an op that re-checks what an unknown
 * COMMIT did.
 */
#ifdef TG_HAVE_MARIADB /* the whole file: CMake defines it with libmariadb */

#include <errmsg.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/tg_error.h"
#include "store/mysql_int.h"
#include "store/store_server.h"

#define CONNECT_TIMEOUT 3 /* s */

/* ---- errors ------------------------------------------------------------ */

bool store_mysql_lost_code(unsigned code)
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

void store_mysql_conn_drop(MYSQL **db)
{
        if (*db)
                mysql_close(*db);
        *db = NULL;
}

/* Maps the last error of the main connection; a lost connection is closed
 * (s->db = NULL) so that the next transaction reconnects. */
int store_mysql_fail(struct mysql_store *s)
{
        unsigned code = s->db ? mysql_errno(s->db) : CR_SERVER_GONE_ERROR;

        if (s->db && code != 0)
                snprintf(s->last_error, sizeof(s->last_error), "%s", mysql_error(s->db));

        if (store_mysql_lost_code(code)) {
                store_mysql_conn_drop(&s->db);
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
        /* the server's disk, as the SQLite store says it: the API answers
         * 503 (store_full, store_unavailable) and the exit waits */
        case ER_RECORD_FILE_FULL:
        case ER_DISK_FULL:
                return -ENOSPC;
        case ER_OPTION_PREVENTS_STATEMENT: /* --read-only (a replica after a failover) */
        case ER_READ_ONLY_MODE:
                return -EROFS;
        default:
                return TG_ESTORE;
        }
}

/* ---- the SQL builder ----------------------------------------------------- */

/* The builder's quote for the main connection (store_server_vsqlf). */
static int quote_literal(void *conn, char *dst, const char *str, size_t len, size_t *ret_n)
{
        struct mysql_store *s = conn;
        size_t n = 0;

        if (!s->db)
                return TG_ESTORE;
        dst[n++] = '\'';
        n += mysql_real_escape_string(s->db, dst + n, str, (unsigned long)len);
        dst[n++] = '\'';
        *ret_n = n;
        return 0;
}

static int vsqlf(struct mysql_store *s, const char *fmt, va_list ap)
{
        return store_server_vsqlf(s->sql, SQL_MAX, quote_literal, s, fmt, ap);
}

static int run_sql(struct mysql_store *s)
{
        if (!s->db)
                return TG_EIO;
        if (mysql_real_query(s->db, s->sql, (unsigned long)strlen(s->sql)) != 0)
                return store_mysql_fail(s);
        return 0;
}

/* Runs a statement whose rows (if any) do not matter; s->affected is set. */
int store_mysql_exec(struct mysql_store *s, const char *fmt, ...)
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
                        return store_mysql_fail(s);
                mysql_free_result(res);
        }
        s->affected = (uint64_t)mysql_affected_rows(s->db);
        return 0;
}

/* Runs a query and buffers its whole result (our pages are small). */
int store_mysql_query(struct mysql_store *s, MYSQL_RES **ret_res, const char *fmt, ...)
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
                return store_mysql_fail(s);
        *ret_res = res;
        return 0;
}

/* ---- values ------------------------------------------------------------ */

bool store_mysql_parse_i64(const char *text, int64_t *ret)
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

int64_t store_mysql_col_i64(MYSQL_ROW row, int col, bool *ok)
{
        int64_t v = 0;

        if (!store_mysql_parse_i64(row[col], &v))
                *ok = false;
        return v;
}

unsigned store_mysql_col_uns(MYSQL_ROW row, int col, bool *ok)
{
        int64_t v = store_mysql_col_i64(row, col, ok);

        if (v < 0 || v > (int64_t)UINT_MAX) {
                *ok = false;
                return 0;
        }
        return (unsigned)v;
}

void store_mysql_col_copy(MYSQL_ROW row, const unsigned long *lens, int col, char *dst, size_t size)
{
        size_t n = row[col] ? lens[col] : 0;

        if (n >= size)
                n = size - 1;
        if (n > 0)
                memcpy(dst, row[col], n);
        dst[n] = '\0';
        /* a NUL inside a value would end it early here; that is all it can do */
}

const char *store_mysql_col_text(MYSQL_ROW row, int col)
{
        return row[col] ? row[col] : "";
}

/* One integer from a one-row, one-column result; TG_ENOTFOUND for no row,
 * *ret_null for SQL NULL. */
int store_mysql_one_i64(MYSQL_RES *res, int64_t *ret_value, bool *ret_null)
{
        MYSQL_ROW row = mysql_fetch_row(res);
        int64_t v = 0;
        int r = 0;

        *ret_null = false;
        if (!row)
                r = TG_ENOTFOUND;
        else if (!row[0])
                *ret_null = true;
        else if (store_mysql_parse_i64(row[0], &v))
                *ret_value = v;
        else
                r = TG_ESTORE;
        mysql_free_result(res);
        return r;
}

/* ---- connections -------------------------------------------------------- */

/* A fresh session with our options: no auto-reconnect (a silent reconnect
 * would lose a transaction and a lock without telling us), bounded waits. */
int store_mysql_connect_one(struct mysql_store *s, unsigned io_timeout, bool with_db,
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

                snprintf(s->last_error, sizeof(s->last_error), "%s", mysql_error(db));
                mysql_close(db);
                /* refused or unreachable: the server is away, try later */
                return store_mysql_lost_code(code) ? TG_EIO : TG_ESTORE;
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

                snprintf(s->last_error, sizeof(s->last_error), "%s", mysql_error(db));
                mysql_close(db);
                return store_mysql_lost_code(code) ? TG_EIO : TG_ESTORE;
        }
        if (with_db && mysql_select_db(db, s->dbname) != 0) {
                unsigned code = mysql_errno(db);

                snprintf(s->last_error, sizeof(s->last_error), "%s", mysql_error(db));
                mysql_close(db);
                if (code == ER_BAD_DB_ERROR)
                        return TG_ENOTFOUND;
                return store_mysql_lost_code(code) ? TG_EIO : TG_ESTORE;
        }
        *ret_db = db;
        return 0;
}

static int conn_ensure(void *conn)
{
        struct mysql_store *s = conn;

        if (s->db)
                return 0;
        return store_mysql_connect_one(s, IO_TIMEOUT, true, &s->db);
}

/* ---- transactions --------------------------------------------------------- */

/* The backend's side of store_server_tx(). */
static int tx_exec(void *conn, const char *sql)
{
        return store_mysql_exec(conn, "%s", sql);
}

static void tx_enter(void *conn)
{
        struct mysql_store *s = conn;

        memset(s->counter_delta, 0, sizeof(s->counter_delta));
        s->picked_valid = false;
        s->pick_after = false;
        s->in_tx = true;
}

static int tx_leave(void *conn, int r)
{
        struct mysql_store *s = conn;

        s->in_tx = false;
        s->picked_valid = false;
        return r == 0 ? store_mysql_counters_flush(s) : r;
}

static bool tx_connected(void *conn)
{
        return ((struct mysql_store *)conn)->db != NULL;
}

static const struct store_server_tx tx_ops = {
    .begin_sql = "START TRANSACTION",
    .connect = conn_ensure,
    .exec = tx_exec,
    .enter = tx_enter,
    .leave = tx_leave,
    .connected = tx_connected,
};

/* Runs fn inside one transaction: START TRANSACTION, fn, COMMIT; a failing
 * fn is rolled back. Retries a deadlock or lock wait timeout (the whole
 * transaction, a few times) and a lost connection (once, after
 * reconnecting) when the transaction surely did not commit, or when fn
 * re-checks (STORE_TX_RECHECKS). Every kind commits durably (InnoDB's own
 * flush settings decide). Returns fn's code or a TG_E* code. */
int store_mysql_tx(struct store *store, enum store_tx kind, unsigned flags, store_tx_fn fn,
                   void *ctx)
{
        struct mysql_store *s = M(store);

        (void)kind;
        return store_server_tx(store, s, &tx_ops, flags, fn, ctx, &s->commit_unknown);
}

bool store_mysql_tx_commit_unknown(const struct store *store)
{
        return ((const struct mysql_store *)store)->commit_unknown;
}

#endif /* TG_HAVE_MARIADB */
