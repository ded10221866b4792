/*
 * store_pg_sql — the PostgreSQL backend's way to the server: error mapping
 * (SQLSTATEs to TG_E* codes), the SQL builder, column values, connections
 * and the transaction runner.
 *
 * Values go into SQL text through one builder (sqlf) that quotes every
 * string as a standard literal (quotes doubled; our sessions set
 * standard_conforming_strings on and client_encoding UTF8, in which no
 * character hides a quote byte); integers are printed. There is no other way
 * into a query. A byte that is not part of valid UTF-8 (a text cut in the
 * middle of a character by a bounded copy) is written as '?': the server
 * would refuse the whole statement for it, and an outcome must be recorded. A serialization failure (40001), a deadlock (40P01) or a
 * lock wait timeout (55P03) retries the whole transaction (a few times, with
 * a short pause); a lost connection is reconnected and the transaction
 * retried once, but only where that is safe: a failure before COMMIT was
 * sent, or an op that re-checks what an unknown COMMIT did.
 */
#ifdef TG_HAVE_PG /* the whole file: CMake defines it with libpq */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/tg_error.h"
#include "store/pg_int.h"
#include "store/store_server.h"

#define CONNECT_TIMEOUT "3"     /* s */
#define IO_TIMEOUT_MS   "10000" /* tcp_user_timeout: unacknowledged data, then lost */

/* ---- errors ------------------------------------------------------------ */

void store_pg_conn_drop(PGconn **db)
{
        if (*db)
                PQfinish(*db);
        *db = NULL;
}

/* Class 08 (connection exception), an administrator's shutdown or a server
 * that cannot take connections now: the session is gone. */
static bool lost_state(const char *st)
{
        return st && (strncmp(st, "08", 2) == 0 || strncmp(st, "57P0", 4) == 0);
}

static void note_error(char *dst, size_t size, const char *msg)
{
        size_t n;

        snprintf(dst, size, "%s", msg ? msg : "");
        n = strcspn(dst, "\n");
        dst[n] = '\0';
}

int store_pg_fail(struct pg_store *s, const PGresult *res)
{
        const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

        if (s->db)
                note_error(s->last_error, sizeof(s->last_error),
                           res ? PQresultErrorMessage(res) : PQerrorMessage(s->db));
        if (!s->db || PQstatus(s->db) != CONNECTION_OK || lost_state(st)) {
                store_pg_conn_drop(&s->db);
                return TG_EIO;
        }
        if (!st)
                return TG_ESTORE;
        if (strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0 || strcmp(st, "55P03") == 0 ||
            strcmp(st, "57014") == 0)
                return TG_EBUSY;
        if (strcmp(st, "23505") == 0)
                return TG_ECONFLICT;
        if (strcmp(st, "53200") == 0)
                return TG_ENOMEM;
        /* the server's disk, as the other stores say it */
        if (strcmp(st, "53100") == 0)
                return -ENOSPC;
        /* a hot standby (a replica after a failover) */
        if (strcmp(st, "25006") == 0)
                return -EROFS;
        return TG_ESTORE;
}

/* ---- the SQL builder ----------------------------------------------------- */

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
        unsigned char lo = 0x80, hi = 0xbf;
        size_t need;

        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                need = 1;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                need = 2;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                need = 3;
        else
                return 0;
        if (p[0] == 0xe0)
                lo = 0xa0; /* no overlong forms */
        else if (p[0] == 0xed)
                hi = 0x9f; /* no surrogates */
        else if (p[0] == 0xf0)
                lo = 0x90;
        else if (p[0] == 0xf4)
                hi = 0x8f; /* at most U+10FFFF */
        if (n <= need || p[1] < lo || p[1] > hi)
                return 0;
        for (size_t k = 2; k <= need; k++)
                if ((p[k] & 0xc0) != 0x80)
                        return 0;
        return need + 1;
}

/* Appends str[0..len) quoted into dst (room for 2 * len + 2 bytes). */
static size_t quote_literal(char *dst, const char *str, size_t len)
{
        const unsigned char *p = (const unsigned char *)str;
        size_t n = 0;

        dst[n++] = '\'';
        for (size_t i = 0; i < len;) {
                size_t k = utf8_len(p + i, len - i);

                if (k == 0) {
                        dst[n++] = '?';
                        i++;
                        continue;
                }
                if (p[i] == '\'')
                        dst[n++] = '\'';
                memcpy(dst + n, p + i, k);
                n += k;
                i += k;
        }
        dst[n++] = '\'';
        return n;
}

/* The builder's quote (store_server_vsqlf): the session is UTF-8 with
 * standard_conforming_strings, so a literal needs only its quotes doubled
 * (quote_literal: a byte that is not UTF-8 becomes a ?). */
static int quote_pg(void *conn, char *dst, const char *str, size_t len, size_t *ret_n)
{
        (void)conn;
        *ret_n = quote_literal(dst, str, len);
        return 0;
}

static int vsqlf(struct pg_store *s, const char *fmt, va_list ap)
{
        return store_server_vsqlf(s->sql, PG_SQL_MAX, quote_pg, s, fmt, ap);
}

static int run_sql(struct pg_store *s, PGresult **ret_res)
{
        PGresult *res;
        ExecStatusType st;

        if (!s->db)
                return TG_EIO;
        res = PQexec(s->db, s->sql);
        st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
                int r = store_pg_fail(s, res);

                PQclear(res);
                return r;
        }
        *ret_res = res;
        return 0;
}

int store_pg_exec(struct pg_store *s, const char *fmt, ...)
{
        PGresult *res = NULL;
        va_list ap;
        int64_t n = 0;
        int r;

        va_start(ap, fmt);
        r = vsqlf(s, fmt, ap);
        va_end(ap);
        if (r == 0)
                r = run_sql(s, &res);
        if (r < 0)
                return r;
        s->affected = store_pg_parse_i64(PQcmdTuples(res), &n) && n > 0 ? (uint64_t)n : 0;
        PQclear(res);
        return 0;
}

int store_pg_query(struct pg_store *s, PGresult **ret_res, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vsqlf(s, fmt, ap);
        va_end(ap);
        if (r == 0)
                r = run_sql(s, ret_res);
        return r;
}

/* ---- values ------------------------------------------------------------ */

bool store_pg_parse_i64(const char *text, int64_t *ret)
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

int64_t store_pg_col_i64(const PGresult *res, int row, int col, bool *ok)
{
        int64_t v = 0;

        if (PQgetisnull(res, row, col) || !store_pg_parse_i64(PQgetvalue(res, row, col), &v))
                *ok = false;
        return v;
}

unsigned store_pg_col_uns(const PGresult *res, int row, int col, bool *ok)
{
        int64_t v = store_pg_col_i64(res, row, col, ok);

        if (v < 0 || v > (int64_t)UINT_MAX) {
                *ok = false;
                return 0;
        }
        return (unsigned)v;
}

void store_pg_col_copy(const PGresult *res, int row, int col, char *dst, size_t size)
{
        size_t n = PQgetisnull(res, row, col) ? 0 : (size_t)PQgetlength(res, row, col);

        if (n >= size)
                n = size - 1;
        if (n > 0)
                memcpy(dst, PQgetvalue(res, row, col), n);
        dst[n] = '\0';
}

const char *store_pg_col_text(const PGresult *res, int row, int col)
{
        return PQgetisnull(res, row, col) ? "" : PQgetvalue(res, row, col);
}

int store_pg_one_i64(PGresult *res, int64_t *ret_value, bool *ret_null)
{
        int64_t v = 0;
        int r = 0;

        *ret_null = false;
        if (PQntuples(res) < 1 || PQnfields(res) < 1)
                r = TG_ENOTFOUND;
        else if (PQgetisnull(res, 0, 0))
                *ret_null = true;
        else if (store_pg_parse_i64(PQgetvalue(res, 0, 0), &v))
                *ret_value = v;
        else
                r = TG_ESTORE;
        PQclear(res);
        return r;
}

/* ---- connections -------------------------------------------------------- */

static void quiet(void *arg, const char *message)
{
        (void)arg;
        (void)message; /* NOTICEs ("already exists, skipping") are not ours to print */
}

int store_pg_connect_one(struct pg_store *s, bool with_db, PGconn **ret_db)
{
        const char *keys[18], *vals[18];
        char session[512];
        PGresult *res;
        PGconn *db;
        int k = 0;

        keys[k] = "dbname", vals[k++] = with_db ? s->dbname : "postgres";
        if (s->host[0])
                keys[k] = "host", vals[k++] = s->host;
        if (s->port[0])
                keys[k] = "port", vals[k++] = s->port;
        if (s->user[0])
                keys[k] = "user", vals[k++] = s->user;
        if (s->password[0])
                keys[k] = "password", vals[k++] = s->password;
        if (s->sslmode[0])
                keys[k] = "sslmode", vals[k++] = s->sslmode;
        keys[k] = "connect_timeout", vals[k++] = CONNECT_TIMEOUT;
        keys[k] = "tcp_user_timeout", vals[k++] = IO_TIMEOUT_MS;
        keys[k] = "keepalives_idle", vals[k++] = "5";
        keys[k] = "keepalives_interval", vals[k++] = "2";
        keys[k] = "keepalives_count", vals[k++] = "3";
        keys[k] = "application_name", vals[k++] = "tollgate";
        keys[k] = "client_encoding", vals[k++] = "UTF8";
        keys[k] = NULL, vals[k] = NULL;
        db = PQconnectdbParams(keys, vals, 0);
        if (!db)
                return TG_ENOMEM;
        if (PQstatus(db) != CONNECTION_OK) {
                const char *msg = PQerrorMessage(db);
                bool missing = with_db && strstr(msg, "does not exist") && strstr(msg, s->dbname);
                /* libpq gives no SQLSTATE for a failed connection: what
                 * waiting cannot fix (credentials, a role or database that
                 * does not exist, the server's access rules) is told by its
                 * words; anything else (refused, unreachable, starting up,
                 * shutting down, in recovery, out of connections) means the
                 * server is away: try later */
                bool refused = strstr(msg, "authentication") || strstr(msg, "pg_hba.conf") ||
                               strstr(msg, "does not exist") || strstr(msg, "permission denied") ||
                               strstr(msg, "invalid ");

                note_error(s->last_error, sizeof(s->last_error), msg);
                PQfinish(db);
                if (missing)
                        return TG_ENOTFOUND;
                return refused ? TG_ESTORE : TG_EIO;
        }
        PQsetNoticeProcessor(db, quiet, NULL);
        /* Our own session settings: UTC, strings as the builder escapes
         * them, READ COMMITTED, short lock waits (a waiting claim holds up
         * the exit), a dead peer seen within seconds. */
        snprintf(session, sizeof(session),
                 "SET TIME ZONE 'UTC'; SET standard_conforming_strings = on; "
                 "SET default_transaction_isolation = 'read committed'; "
                 "SET lock_timeout = %lld; SET client_min_messages = warning; "
                 "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; "
                 "SET tcp_keepalives_count = 3",
                 (long long)s->lock_wait_ms);
        res = PQexec(db, session);
        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
                note_error(s->last_error, sizeof(s->last_error), PQerrorMessage(db));
                PQclear(res);
                PQfinish(db);
                return TG_ESTORE;
        }
        PQclear(res);
        *ret_db = db;
        return 0;
}

static int conn_ensure(void *conn)
{
        struct pg_store *s = conn;

        if (s->db)
                return 0;
        return store_pg_connect_one(s, true, &s->db);
}

/* ---- transactions --------------------------------------------------------- */

/* The backend's side of store_server_tx(). */
static int tx_exec(void *conn, const char *sql)
{
        return store_pg_exec(conn, "%s", sql);
}

static void tx_enter(void *conn)
{
        struct pg_store *s = conn;

        memset(s->counter_delta, 0, sizeof(s->counter_delta));
        s->picked_valid = false;
        s->pick_after = false;
        s->in_tx = true;
}

static int tx_leave(void *conn, int r)
{
        struct pg_store *s = conn;

        s->in_tx = false;
        s->picked_valid = false;
        return r == 0 ? store_pg_counters_flush(s) : r;
}

static bool tx_connected(void *conn)
{
        return ((struct pg_store *)conn)->db != NULL;
}

static const struct store_server_tx tx_ops = {
    .begin_sql = "BEGIN ISOLATION LEVEL READ COMMITTED",
    .connect = conn_ensure,
    .exec = tx_exec,
    .enter = tx_enter,
    .leave = tx_leave,
    .connected = tx_connected,
};

/* Runs fn inside one transaction: BEGIN (READ COMMITTED), fn, COMMIT; a
 * failing fn is rolled back. Retries a serialization failure, a deadlock or
 * a lock wait timeout (the whole transaction, a few times) and a lost
 * connection (once, after reconnecting) when the transaction surely did not
 * commit, or when fn re-checks (STORE_TX_RECHECKS). Every kind commits
 * durably (the server's synchronous_commit decides). Returns fn's code or a
 * TG_E* code. */
int store_pg_tx(struct store *store, enum store_tx kind, unsigned flags, store_tx_fn fn, void *ctx)
{
        struct pg_store *s = P(store);

        (void)kind;
        return store_server_tx(store, s, &tx_ops, flags, fn, ctx, &s->commit_unknown);
}

bool store_pg_tx_commit_unknown(const struct store *store)
{
        return ((const struct pg_store *)store)->commit_unknown;
}

#endif /* TG_HAVE_PG */
