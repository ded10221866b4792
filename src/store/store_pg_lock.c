/*
 * store_pg_lock — ownership for the PostgreSQL backend: the share locks, the
 * acquirers' lock, epochs and the split (store_backend.h's lock and epoch
 * primitives; the acquisition itself is store_owner.c's).
 *
 * Share k is the session-level advisory lock (PG_LOCK_SHARE, k), the
 * acquirers' lock (PG_LOCK_SPLIT, 0), both held on a DEDICATED connection to
 * the store's database for the owner's whole life: the server drops them
 * when that session ends (process killed: at once, the kernel closes the
 * socket; host gone: within the keepalives, about 11 s, tcp_keepalives_* of
 * the session; server restarted), and a paused process keeps its session and
 * so its locks. PostgreSQL's advisory locks stack (taken twice, freed by two
 * unlocks): the handle takes each at most once and remembers which it holds.
 * Claims look their epoch up in exit_shares FOR SHARE, so a takeover's bump
 * waits for claims in progress and fences every later one.
 */
#ifdef TG_HAVE_PG /* the whole file: CMake defines it with libpq */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/pg_int.h"

/* One advisory-lock function on a session: fn(key, share) -> boolean (1, 0),
 * or void (pg_advisory_lock: 1 when it returned). Integers only: nothing to
 * escape. A lock wait past lock_timeout is TG_ELOCKED. */
int store_pg_advisory(PGconn *db, const char *fn, int key, unsigned share, int *ret_value)
{
        char sql[160];
        PGresult *res;
        int r = 0;

        snprintf(sql, sizeof(sql), "SELECT %s(%d, %d)::text", fn, key, (int)share);
        res = PQexec(db, sql);
        if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
                const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

                if (st && strcmp(st, "55P03") == 0)
                        r = TG_ELOCKED;
                else
                        r = PQstatus(db) != CONNECTION_OK ? TG_EIO : TG_ESTORE;
        } else if (PQntuples(res) != 1) {
                r = TG_ESTORE;
        } else {
                const char *v = PQgetvalue(res, 0, 0);

                *ret_value = strcmp(v, "true") == 0 || strcmp(v, "") == 0 ? 1 : 0;
        }
        PQclear(res);
        return r;
}

static int lock_exec(PGconn *db, const char *sql)
{
        PGresult *res = PQexec(db, sql);
        int r = res && PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : TG_EIO;

        PQclear(res);
        return r;
}

/* The second half of a share lock's key: the share for the default
 * account (the key single-account deployments always had); for another
 * account, the share above a hash of the account's name (the unit of
 * ownership is (account, share)). Two accounts whose hashes meet would
 * share their locks (one waits as a standby): one chance in 33 million. */
static unsigned share_key(const struct pg_store *s, unsigned share)
{
        uint32_t h = 2166136261u; /* FNV-1a */

        share %= STORE_SHARES_MAX;
        if (strcmp(s->base.account, TG_ACCOUNT_DEFAULT) == 0)
                return share;
        for (const char *p = s->base.account; *p; p++)
                h = (h ^ (unsigned char)*p) * 16777619u;
        return (1u + h % 0x1fffffeu) * STORE_SHARES_MAX + share;
}

/* Is the lock connection alive and still holding the share lock taken
 * last? A failure drops the connection (and with it any lock it held). */
int store_pg_lock_held(struct store *store)
{
        struct pg_store *s = P(store);
        char sql[256];
        PGresult *res;
        bool held;

        if (!s->lock_db || !s->lock_share_valid)
                return TG_ELOCKED;
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                 "AND pid = pg_backend_pid() AND classid = %d AND objid = %u AND objsubid = 2",
                 PG_LOCK_SHARE, share_key(s, s->lock_share));
        res = PQexec(s->lock_db, sql);
        held = res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
               strcmp(PQgetvalue(res, 0, 0), "1") == 0;
        PQclear(res);
        if (!held) {
                store_pg_lock_drop_all(store);
                return TG_ELOCKED;
        }
        return 0;
}

static bool *held_flag(struct pg_store *s, enum store_lock lock, unsigned share)
{
        return lock == STORE_LOCK_SPLIT ? &s->split_held : &s->share_held[share % STORE_SHARES_MAX];
}

int store_pg_lock_take(struct store *store, enum store_lock lock, unsigned share, int64_t wait_ms)
{
        struct pg_store *s = P(store);
        int key = lock == STORE_LOCK_SPLIT ? PG_LOCK_SPLIT : PG_LOCK_SHARE;
        bool *held = held_flag(s, lock, share);
        int got = 0;
        int r = 0;

        if (lock == STORE_LOCK_SPLIT)
                share = 0;
        if (!s->lock_db) {
                memset(s->share_held, 0, sizeof(s->share_held));
                s->split_held = false;
                s->lock_share_valid = false;
                r = store_pg_connect_one(s, true, &s->lock_db);
                if (r < 0)
                        return r;
        }
        if (!*held) {
                if (wait_ms <= 0) {
                        r = store_pg_advisory(s->lock_db, "pg_try_advisory_lock", key,
                                              lock == STORE_LOCK_SPLIT ? 0 : share_key(s, share),
                                              &got);
                } else {
                        char set[64];

                        /* waits at most wait_ms, then 55P03 (TG_ELOCKED) */
                        snprintf(set, sizeof(set), "SET lock_timeout = %lld", (long long)wait_ms);
                        r = lock_exec(s->lock_db, set);
                        if (r == 0)
                                r = store_pg_advisory(
                                    s->lock_db, "pg_advisory_lock", key,
                                    lock == STORE_LOCK_SPLIT ? 0 : share_key(s, share), &got);
                        if (r != TG_EIO) {
                                snprintf(set, sizeof(set), "SET lock_timeout = %lld",
                                         (long long)s->lock_wait_ms);
                                if (lock_exec(s->lock_db, set) < 0 && r == 0)
                                        r = TG_EIO;
                        }
                }
                if (r == TG_EIO) {
                        store_pg_lock_drop_all(store);
                        return r;
                }
                if (r == 0 && got != 1)
                        r = TG_ELOCKED;
                if (r < 0)
                        return r;
                *held = true;
        }
        if (lock == STORE_LOCK_SHARE) {
                s->lock_share = share % STORE_SHARES_MAX;
                s->lock_share_valid = true;
        }
        return 0;
}

void store_pg_lock_drop(struct store *store, enum store_lock lock, unsigned share)
{
        struct pg_store *s = P(store);
        int key = lock == STORE_LOCK_SPLIT ? PG_LOCK_SPLIT : PG_LOCK_SHARE;
        bool *held;
        int dummy = 0;

        if (lock == STORE_LOCK_SPLIT)
                share = 0;
        held = held_flag(s, lock, share);
        if (!s->lock_db || !*held)
                return;
        if (store_pg_advisory(s->lock_db, "pg_advisory_unlock", key,
                              lock == STORE_LOCK_SPLIT ? 0 : share_key(s, share), &dummy) < 0) {
                store_pg_lock_drop_all(store); /* drops every lock of the session */
                return;
        }
        *held = false;
        if (lock == STORE_LOCK_SHARE && s->lock_share_valid && s->lock_share == share)
                s->lock_share_valid = false;
}

void store_pg_lock_drop_all(struct store *store)
{
        struct pg_store *s = P(store);

        /* the server releases the locks with the session */
        store_pg_conn_drop(&s->lock_db);
        memset(s->share_held, 0, sizeof(s->share_held));
        s->split_held = false;
        s->lock_share_valid = false;
}

/* ---- epochs and the split -------------------------------------------------- */

int store_pg_epoch_read(struct store *store, int64_t *ret_epoch)
{
        PGresult *res;
        bool null = false;
        int64_t v = 0;
        int r = store_pg_query(P(store), &res, "SELECT epoch FROM owner WHERE id = 1");

        if (r < 0)
                return r;
        r = store_pg_one_i64(res, &v, &null);
        if (r == TG_ENOTFOUND || null)
                r = TG_ESTORE;
        if (r == 0)
                *ret_epoch = v;
        return r;
}

/* FOR SHARE: a takeover of the share waits for us. */
int store_pg_epoch_share(struct store *store, int64_t epoch, unsigned *ret_share)
{
        PGresult *res;
        bool null = false;
        int64_t share = 0;
        int r;

        if (epoch <= 0)
                return TG_EFENCED; /* shares never held have epoch 0 */
        r = store_pg_query(P(store), &res,
                           "SELECT share FROM exit_shares WHERE epoch = %I AND account = %S "
                           "ORDER BY share LIMIT 1 FOR SHARE",
                           epoch, store->account);
        if (r == 0)
                r = store_pg_one_i64(res, &share, &null);
        if (r == TG_ENOTFOUND)
                return TG_EFENCED;
        if (r == 0 && (null || share < 0 || share >= STORE_SHARES_MAX))
                r = TG_ESTORE;
        if (r == 0)
                *ret_share = (unsigned)share;
        return r;
}

int store_pg_epoch_bump(struct store *store, unsigned share, int64_t *ret_epoch)
{
        struct pg_store *s = P(store);
        PGresult *res;
        bool null = false;
        int64_t epoch = 0;
        int r = store_pg_query(s, &res,
                               "UPDATE owner SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch");

        if (r == 0)
                r = store_pg_one_i64(res, &epoch, &null);
        if (r == TG_ENOTFOUND || (r == 0 && null))
                r = TG_ESTORE;
        if (r == 0)
                r = store_pg_exec(
                    s,
                    "INSERT INTO exit_shares (account, share, epoch) "
                    "VALUES (%S, %U, %I) "
                    "ON CONFLICT (account, share) DO UPDATE SET epoch = EXCLUDED.epoch",
                    store->account, share, epoch);
        if (r == 0)
                *ret_epoch = epoch;
        return r;
}

int store_pg_split_read(struct store *store, struct store_split *ret_split)
{
        struct pg_store *s = P(store);
        PGresult *res;
        struct store_split v = {0};
        int r = store_pg_query(
            s, &res,
            "SELECT shares, max_in_flight, starts_per_second, want_seq FROM exit_split "
            "WHERE account = %S",
            store->account);
        bool ok = true;

        if (r < 0)
                return r;
        if (PQntuples(res) < 1) {
                PQclear(res);
                return TG_ENOTFOUND;
        }
        v.shares = store_pg_col_uns(res, 0, 0, &ok);
        v.max_in_flight = store_pg_col_uns(res, 0, 1, &ok);
        v.want_seq = store_pg_col_i64(res, 0, 3, &ok);
        if (ok && !PQgetisnull(res, 0, 2)) {
                const char *text = PQgetvalue(res, 0, 2);
                char *end;

                errno = 0;
                v.starts_per_second = strtod(text, &end);
                ok = errno == 0 && end != text && *end == '\0';
        }
        PQclear(res);
        if (!ok || v.shares < 1 || v.shares > STORE_SHARES_MAX)
                return TG_ESTORE;
        *ret_split = v;
        return 0;
}

int store_pg_hold_get(struct store *store, tg_wall_ms *ret_until)
{
        PGresult *res;
        bool null = false;
        int64_t v = 0;
        int r = store_pg_query(
            P(store), &res, "SELECT until_wall FROM exit_hold WHERE account = %S", store->account);

        if (r == 0)
                r = store_pg_one_i64(res, &v, &null);
        if (r == TG_ENOTFOUND || null) {
                v = 0;
                r = 0;
        }
        if (r == 0)
                *ret_until = v;
        return r;
}

int store_pg_hold_raise(struct store *store, tg_wall_ms until)
{
        return store_pg_exec(P(store),
                             "INSERT INTO exit_hold (account, until_wall) VALUES (%S, %I) "
                             "ON CONFLICT (account) DO UPDATE SET until_wall = "
                             "GREATEST(exit_hold.until_wall, EXCLUDED.until_wall)",
                             store->account, until);
}

int store_pg_split_put(struct store *store, const struct store_split *split)
{
        char rate[40];

        /* a number we print ourselves: trusted text for %s */
        snprintf(rate, sizeof(rate), "%.17g", split->starts_per_second);
        return store_pg_exec(
            P(store),
            "INSERT INTO exit_split (account, shares, starts_per_second, "
            "max_in_flight) VALUES (%S, %U, %s, %U) ON CONFLICT (account) DO UPDATE "
            "SET shares = EXCLUDED.shares, starts_per_second = "
            "EXCLUDED.starts_per_second, max_in_flight = EXCLUDED.max_in_flight",
            store->account, split->shares, rate, split->max_in_flight);
}

int store_pg_split_want(struct store *store)
{
        return store_pg_exec(P(store),
                             "UPDATE exit_split SET want_seq = want_seq + 1 WHERE account = %S",
                             store->account);
}

#endif /* TG_HAVE_PG */
