/*
 * store_mysql_owner — exit ownership for the MariaDB backend: lock names,
 * share locks, the split, epochs and recovery.
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
 */
#ifdef TG_HAVE_MARIADB /* the whole file: CMake defines it with libmariadb */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/mysql_int.h"

#define RECOVER_BATCH   64
#define LOCK_IO_TIMEOUT 3 /* s, the owner lock connection */
#define SPLIT_WAIT_S    2 /* acquirers' own lock; below LOCK_IO_TIMEOUT */

/* `share`: LOCK IN SHARE MODE, so that a takeover's bump waits for us. */
int store_mysql_owner_epoch_read(struct mysql_store *s, bool share, int64_t *ret_epoch)
{
        MYSQL_RES *res;
        bool null = false;
        int64_t v = 0;
        int r = store_mysql_query(s, &res, "SELECT epoch FROM owner WHERE id = 1%s",
                                  share ? " LOCK IN SHARE MODE" : "");

        if (r < 0)
                return r;
        r = store_mysql_one_i64(res, &v, &null);
        if (r == TG_ENOTFOUND || null)
                r = TG_ESTORE;
        if (r == 0)
                *ret_epoch = v;
        return r;
}

/* TG_EFENCED unless `epoch` is the current epoch of a share; that share in
 * *ret_share. LOCK IN SHARE MODE: a takeover of the share waits for us. */
int store_mysql_check_epoch(struct mysql_store *s, int64_t epoch, unsigned *ret_share)
{
        MYSQL_RES *res;
        bool null = false;
        int64_t share = 0;
        int r;

        if (epoch <= 0)
                return TG_EFENCED; /* shares never held have epoch 0 */
        r = store_mysql_query(
            s, &res,
            "SELECT share FROM exit_shares WHERE epoch = %I ORDER BY share LIMIT 1 "
            "LOCK IN SHARE MODE",
            epoch);
        if (r == 0)
                r = store_mysql_one_i64(res, &share, &null);
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
        int r = store_mysql_query(s, &res,
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
        v.shares = store_mysql_col_uns(row, 0, &ok);
        v.max_in_flight = store_mysql_col_uns(row, 1, &ok);
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
 * name; share k ends in "_<k>" after the (maybe hashed) database name. */
void store_mysql_share_lock_name(const struct mysql_store *s, unsigned share, char *dst,
                                 size_t size)
{
        char base[LOCK_NAME_MAX + 1];
        size_t n;

        if (share == 0) {
                store_mysql_lock_name_for("tollgate_owner_", s->dbname, dst, size);
                return;
        }
        store_mysql_lock_name_for("tollgate_share_", s->dbname, base, LOCK_NAME_MAX + 1 - 4);
        n = strlen(base);
        snprintf(dst, size, "%.*s_%u", (int)n, base, share % STORE_SHARES_MAX);
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
                r = store_mysql_exec(
                    s,
                    "REPLACE INTO exit_split (id, shares, starts_per_second, max_in_flight) "
                    "VALUES (1, %U, %s, %U)",
                    c->put->shares, rate, c->put->max_in_flight);
        }
        if (r == 0 && c->bump)
                r = store_mysql_exec(s, "UPDATE owner SET epoch = epoch + 1 WHERE id = 1");
        if (r == 0)
                r = store_mysql_owner_epoch_read(s, c->bump, &c->epoch);
        if (r == 0 && c->bump)
                r = store_mysql_exec(s,
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
        int r = store_mysql_run_tx(s, split_tx, &c, TX_RECHECKS);

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

                store_mysql_share_lock_name(s, k, name, sizeof(name));
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

int store_mysql_share_acquire(struct store *store, const struct store_split *split,
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
        store_mysql_conn_drop(&s->lock_db);
        r = store_mysql_connect_one(s, LOCK_IO_TIMEOUT, false, &s->lock_db);
        if (r < 0)
                return r;
        store_mysql_lock_name_for("tollgate_split_", s->dbname, split_name, sizeof(split_name));
        r = lock_ask(s, "GET_LOCK", split_name, SPLIT_WAIT_S, &got);
        if (r == 0 && got != 1)
                r = TG_EBUSY; /* another acquirer is slow: try again */
        if (r == 0)
                r = split_decide(s, split, &n, &c.put);
        for (unsigned k = 0; r == 0 && k < n; k++) {
                store_mysql_share_lock_name(s, k, s->lock_name, sizeof(s->lock_name));
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
        r = store_mysql_run_tx(s, epoch_tx, &c, TX_RECHECKS);
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
        store_mysql_conn_drop(&s->lock_db); /* drops the locks with the session */
        return r;
}

int store_mysql_split_get(struct store *store, struct store_split *ret_split)
{
        struct split_ctx c = {0};
        int r = store_mysql_run_tx(M(store), split_tx, &c, TX_RECHECKS);

        if (r == 0 && !c.found)
                r = TG_ENOTFOUND;
        if (r == 0)
                *ret_split = c.split;
        return r;
}

int store_mysql_owner_check(struct store *store)
{
        /* The lock session decides. A busy database is not a lost lock;
         * claims stay fenced by the epoch inside their own transaction. */
        return lock_held(M(store));
}

void store_mysql_owner_release(struct store *store)
{
        struct mysql_store *s = M(store);

        store_mysql_conn_drop(&s->lock_db); /* the server releases the lock with the session */
        s->epoch = 0;
        s->share = 0;
}

int store_mysql_owner_epoch(struct store *store, int64_t *ret_epoch)
{
        struct epoch_ctx c = {.bump = false};
        int r = store_mysql_run_tx(M(store), epoch_tx, &c, TX_RECHECKS);

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
        int r = store_mysql_check_epoch(s, c->epoch, &c->share);

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

                r = store_mysql_query(
                    s, &res,
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
                        r = store_mysql_read_op(res, row, &c->batch[n++]);
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
                        r = store_mysql_op_write(s, op);
                        if (r == 0)
                                r = store_mysql_exec(s,
                                                     "UPDATE calls SET ended = 1, end_wall = %I, "
                                                     "cls = 'unknown', sent = 1, "
                                                     "error = 'outcome unknown (owner lost)' "
                                                     "WHERE op_id = %I AND ended = 0",
                                                     c->now, op->id);
                        if (r == 0)
                                r = store_mysql_audit_insert(s, op->id, c->now, "event", "tollgate",
                                                             store_reason_text(op->reason), detail);
                        if (r == 0)
                                c->count++;
                }
        }
        return r;
}

int store_mysql_recover(struct store *store, int64_t epoch, const struct policy_config *config,
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
        r = store_mysql_run_tx(M(store), recover_tx, c, TX_RECHECKS);
        if (r == 0)
                *ret_count = c->count;
        free(c);
        return r;
}

#endif /* TG_HAVE_MARIADB */
