/*
 * store_mysql_lock — ownership for the MariaDB backend: the share locks, the
 * acquirers' lock, epochs and the split (store_backend.h's lock and epoch
 * primitives; the acquisition itself is store_owner.c's).
 *
 * Share 0 is GET_LOCK('tollgate_owner_<db>', 0), share k > 0
 * GET_LOCK('tollgate_share_<db>_<k>', 0), the acquirers' lock
 * 'tollgate_split_<db>', all held on a DEDICATED connection for the owner's
 * whole life: the server drops the locks when that session ends (process
 * killed, connection killed, server restarted), and a paused process keeps
 * its session and so its locks. Claims look their epoch up in exit_shares
 * under a shared row lock, so a takeover's bump waits for claims in progress
 * and fences every later one.
 */
#ifdef TG_HAVE_MARIADB /* the whole file: CMake defines it with libmariadb */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/mysql_int.h"

#define LOCK_IO_TIMEOUT 3 /* s, the lock connection */

/* GET_LOCK names are at most 64 characters: long database names are
 * represented by a hash. */
void store_mysql_lock_name_for(const char *prefix, const char *dbname, char *dst, size_t size)
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
 * name; share k ends in "_<k>" after the (maybe hashed) database name. The
 * unit of ownership is (account, share): an account other than the default
 * locks "<db>/<account>" (hashed when long), the default keeps the names
 * single-account deployments always had. */
static void share_lock_name(const struct mysql_store *s, unsigned share, char *dst, size_t size)
{
        char base[LOCK_NAME_MAX + 1];
        char key[DB_NAME_MAX + TG_ACCOUNT_NAME_MAX + 2];
        size_t n;

        if (strcmp(s->base.account, TG_ACCOUNT_DEFAULT) == 0)
                snprintf(key, sizeof(key), "%s", s->dbname);
        else
                snprintf(key, sizeof(key), "%s/%s", s->dbname, s->base.account);
        if (share == 0) {
                store_mysql_lock_name_for("tollgate_owner_", key, dst, size);
                return;
        }
        store_mysql_lock_name_for("tollgate_share_", key, base, LOCK_NAME_MAX + 1 - 4);
        n = strlen(base);
        snprintf(dst, size, "%.*s_%u", (int)n, base, share % STORE_SHARES_MAX);
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
                return store_mysql_lost_code(mysql_errno(s->lock_db)) ? TG_EIO : TG_ESTORE;
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
int store_mysql_lock_held(struct store *store)
{
        struct mysql_store *s = M(store);
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
                store_mysql_conn_drop(&s->lock_db);
                return TG_ELOCKED;
        }
        row = mysql_fetch_row(res);
        held = row && row[0] && strcmp(row[0], "1") == 0;
        mysql_free_result(res);
        if (!held) {
                store_mysql_conn_drop(&s->lock_db);
                return TG_ELOCKED;
        }
        return 0;
}

static void lock_name(const struct mysql_store *s, enum store_lock lock, unsigned share, char *dst,
                      size_t size)
{
        if (lock == STORE_LOCK_SPLIT)
                store_mysql_lock_name_for("tollgate_split_", s->dbname, dst, size);
        else
                share_lock_name(s, share, dst, size);
}

int store_mysql_lock_take(struct store *store, enum store_lock lock, unsigned share,
                          int64_t wait_ms)
{
        struct mysql_store *s = M(store);
        char name[LOCK_NAME_MAX + 1];
        int got = 0;
        int r;

        if (!s->lock_db) {
                r = store_mysql_connect_one(s, LOCK_IO_TIMEOUT, false, &s->lock_db);
                if (r < 0)
                        return r;
        }
        lock_name(s, lock, share, name, sizeof(name));
        /* GET_LOCK waits in whole seconds */
        r = lock_ask(s, "GET_LOCK", name, (int)((wait_ms + 999) / 1000), &got);
        if (r == 0 && got != 1)
                r = TG_ELOCKED;
        if (r == 0 && lock == STORE_LOCK_SHARE)
                memcpy(s->lock_name, name, sizeof(s->lock_name));
        return r;
}

void store_mysql_lock_drop(struct store *store, enum store_lock lock, unsigned share)
{
        struct mysql_store *s = M(store);
        char name[LOCK_NAME_MAX + 1];
        int dummy = 0;

        if (!s->lock_db)
                return;
        lock_name(s, lock, share, name, sizeof(name));
        if (lock_ask(s, "RELEASE_LOCK", name, -1, &dummy) < 0)
                store_mysql_conn_drop(&s->lock_db); /* drops every lock of the session */
}

void store_mysql_lock_drop_all(struct store *store)
{
        struct mysql_store *s = M(store);

        /* Released before the session closes: the server frees a closed
         * session's locks only once its thread sees the disconnect, which a
         * busy server does late, and the next owner would find them still
         * held. If this fails the close below releases them all the same
         * (the connection's I/O timeout bounds the wait). */
        if (s->lock_db && mysql_query(s->lock_db, "SELECT RELEASE_ALL_LOCKS()") == 0) {
                MYSQL_RES *res = mysql_store_result(s->lock_db);

                mysql_free_result(res);
        }
        store_mysql_conn_drop(&s->lock_db);
}

/* ---- epochs and the split -------------------------------------------------- */

int store_mysql_epoch_read(struct store *store, int64_t *ret_epoch)
{
        MYSQL_RES *res;
        bool null = false;
        int64_t v = 0;
        int r = store_mysql_query(M(store), &res, "SELECT epoch FROM owner WHERE id = 1");

        if (r < 0)
                return r;
        r = store_mysql_one_i64(res, &v, &null);
        if (r == TG_ENOTFOUND || null)
                r = TG_ESTORE;
        if (r == 0)
                *ret_epoch = v;
        return r;
}

/* LOCK IN SHARE MODE: a takeover of the share waits for us. */
int store_mysql_epoch_share(struct store *store, int64_t epoch, unsigned *ret_share)
{
        MYSQL_RES *res;
        bool null = false;
        int64_t share = 0;
        int r;

        if (epoch <= 0)
                return TG_EFENCED; /* shares never held have epoch 0 */
        r = store_mysql_query(M(store), &res,
                              "SELECT share FROM exit_shares WHERE epoch = %I AND account = %S "
                              "ORDER BY share LIMIT 1 LOCK IN SHARE MODE",
                              epoch, store->account);
        if (r == 0)
                r = store_mysql_one_i64(res, &share, &null);
        if (r == TG_ENOTFOUND)
                return TG_EFENCED;
        if (r == 0 && (null || share < 0 || share >= STORE_SHARES_MAX))
                r = TG_ESTORE;
        if (r == 0)
                *ret_share = (unsigned)share;
        return r;
}

int store_mysql_epoch_bump(struct store *store, unsigned share, int64_t *ret_epoch)
{
        struct mysql_store *s = M(store);
        int64_t epoch = 0;
        int r = store_mysql_exec(s, "UPDATE owner SET epoch = epoch + 1 WHERE id = 1");

        if (r == 0)
                r = store_mysql_epoch_read(store, &epoch);
        if (r == 0)
                r = store_mysql_exec(s,
                                     "INSERT INTO exit_shares (account, share, epoch) "
                                     "VALUES (%S, %U, %I) "
                                     "ON DUPLICATE KEY UPDATE epoch = VALUES(epoch)",
                                     store->account, share, epoch);
        if (r == 0)
                *ret_epoch = epoch;
        return r;
}

int store_mysql_split_read(struct store *store, struct store_split *ret_split)
{
        struct mysql_store *s = M(store);
        MYSQL_RES *res;
        MYSQL_ROW row;
        struct store_split v = {0};
        int r = store_mysql_query(
            s, &res,
            "SELECT shares, max_in_flight, starts_per_second, want_seq FROM exit_split "
            "WHERE account = %S",
            store->account);
        bool ok = true;

        if (r < 0)
                return r;
        row = mysql_fetch_row(res);
        if (!row) {
                mysql_free_result(res);
                return TG_ENOTFOUND;
        }
        v.shares = store_mysql_col_uns(row, 0, &ok);
        v.max_in_flight = store_mysql_col_uns(row, 1, &ok);
        v.want_seq = store_mysql_col_i64(row, 3, &ok);
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

int store_mysql_hold_get(struct store *store, tg_wall_ms *ret_until)
{
        MYSQL_RES *res;
        bool null = false;
        int64_t v = 0;
        int r = store_mysql_query(
            M(store), &res, "SELECT until_wall FROM exit_hold WHERE account = %S", store->account);

        if (r == 0)
                r = store_mysql_one_i64(res, &v, &null);
        if (r == TG_ENOTFOUND || null) {
                v = 0;
                r = 0;
        }
        if (r == 0)
                *ret_until = v;
        return r;
}

int store_mysql_hold_raise(struct store *store, tg_wall_ms until)
{
        return store_mysql_exec(M(store),
                                "INSERT INTO exit_hold (account, until_wall) VALUES (%S, %I) "
                                "ON DUPLICATE KEY UPDATE until_wall = GREATEST(until_wall, "
                                "VALUES(until_wall))",
                                store->account, until);
}

int store_mysql_split_put(struct store *store, const struct store_split *split)
{
        char rate[40];

        /* a number we print ourselves: trusted text for %s */
        snprintf(rate, sizeof(rate), "%.17g", split->starts_per_second);
        return store_mysql_exec(M(store),
                                "REPLACE INTO exit_split (account, shares, starts_per_second, "
                                "max_in_flight) VALUES (%S, %U, %s, %U)",
                                store->account, split->shares, rate, split->max_in_flight);
}

int store_mysql_split_want(struct store *store)
{
        return store_mysql_exec(M(store),
                                "UPDATE exit_split SET want_seq = want_seq + 1 WHERE account = %S",
                                store->account);
}

#endif /* TG_HAVE_MARIADB */
