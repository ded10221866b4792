/*
 * store_sqlite_lock — ownership for the SQLite backend: the share locks, the
 * acquirers' lock, epochs and the split (store_backend.h's lock and epoch
 * primitives; the acquisition itself is store_owner.c's).
 *
 * A share is owned by an open-file-description lock (F_OFD_SETLK, or flock()
 * where OFD locks do not exist) on a file beside the database: "<db>.owner"
 * for share 0 (the one-owner lock), "<db>.share<k>" for the others, and
 * "<db>.split" for the acquirers' own lock. Unlike a POSIX record lock it
 * conflicts with a second handle of the same process, and closing some other
 * descriptor of the file does not drop it. A lock file replaced under its
 * holder (removed and created again) no longer counts as held.
 */
#define _GNU_SOURCE /* F_OFD_SETLK */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "platform/clock.h"
#include "store/sqlite_int.h"

#define LOCK_POLL_MS 10 /* the split lock is waited for by polling */

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

/* The descriptor still names the file at path (nobody removed or replaced
 * the lock file under us). */
static bool lock_file_current(const char *path, int fd)
{
        struct stat a, b;

        if (fstat(fd, &a) < 0 || stat(path, &b) < 0)
                return false;
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* "<db>.owner" for share 0 (the one-owner lock), "<db>.share<k>" for the
 * others, "<db>.split" for the acquirers' own lock (share == UINT_MAX, one
 * for every account: it is held only while one picks its share). An
 * account other than the default owns "<db>.<account>.owner" and
 * "<db>.<account>.share<k>" (the unit of ownership is (account, share));
 * the default keeps the names single-account deployments always had. */
static void lock_path(const struct sqlite_store *s, unsigned share, char *dst, size_t size)
{
        const char *acct = s->base.account;
        bool dflt = strcmp(acct, TG_ACCOUNT_DEFAULT) == 0;

        if (share == UINT_MAX)
                snprintf(dst, size, "%s.split", s->db_path);
        else if (share == 0)
                snprintf(dst, size, "%s%s%s.owner", s->db_path, dflt ? "" : ".", dflt ? "" : acct);
        else
                snprintf(dst, size, "%s%s%s.share%u", s->db_path, dflt ? "" : ".", dflt ? "" : acct,
                         share % STORE_SHARES_MAX);
}

/* Opens and locks the file without waiting: the descriptor, TG_ELOCKED, or
 * an error. */
static int lock_file(const char *path, int *ret_fd)
{
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        int r;

        if (fd < 0)
                return TG_EIO;
        r = lock_fd_exclusive(fd);
        /* the file was replaced between open and lock? */
        if (r == 0 && !lock_file_current(path, fd))
                r = TG_ELOCKED;
        if (r < 0) {
                close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

/* Leaves the holder's pid in a share lock file, for people. A failure here
 * changes nothing. */
static void write_pid(int fd)
{
        char pid[32];
        int len = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());

        if (ftruncate(fd, 0) == 0 && len > 0) {
                ssize_t w = pwrite(fd, pid, (size_t)len, 0);

                (void)w;
        }
}

int store_sqlite_lock_take(struct store *store, enum store_lock lock, unsigned share,
                           int64_t wait_ms)
{
        struct sqlite_store *s = S(store);
        char path[PATH_MAX + SQLITE_LOCK_SUFFIX_MAX];
        int fd = -1;
        int r;

        lock_path(s, lock == STORE_LOCK_SPLIT ? UINT_MAX : share, path, sizeof(path));
        for (int64_t waited = 0;; waited += LOCK_POLL_MS) {
                r = lock_file(path, &fd);
                if (r != TG_ELOCKED || waited >= wait_ms)
                        break;
                clock_sleep_ns(LOCK_POLL_MS * TG_NS_PER_MS);
        }
        if (r < 0)
                return r;
        if (lock == STORE_LOCK_SPLIT) {
                if (s->split_fd >= 0)
                        close(s->split_fd);
                s->split_fd = fd;
                return 0;
        }
        if (s->lock_fd >= 0)
                close(s->lock_fd);
        write_pid(fd);
        s->lock_fd = fd;
        snprintf(s->lock_path, strlen(s->db_path) + SQLITE_LOCK_SUFFIX_MAX, "%s", path);
        return 0;
}

void store_sqlite_lock_drop(struct store *store, enum store_lock lock, unsigned share)
{
        struct sqlite_store *s = S(store);
        int *fd = lock == STORE_LOCK_SPLIT ? &s->split_fd : &s->lock_fd;

        (void)share; /* one share lock at a time: the one taken last */
        if (*fd >= 0)
                close(*fd); /* drops the OFD lock */
        *fd = -1;
}

void store_sqlite_lock_drop_all(struct store *store)
{
        store_sqlite_lock_drop(store, STORE_LOCK_SPLIT, 0);
        store_sqlite_lock_drop(store, STORE_LOCK_SHARE, 0);
}

int store_sqlite_lock_held(struct store *store)
{
        struct sqlite_store *s = S(store);

        if (s->lock_fd < 0 || !lock_file_current(s->lock_path, s->lock_fd))
                return TG_ELOCKED;
        return 0;
}

/* ---- epochs and the split -------------------------------------------------- */

/* One integer of a statement with up to one bound parameter (INT64_MIN:
 * none). TG_ENOTFOUND for no row. */
static int one_i64(struct sqlite_store *s, enum stmt_id id, int64_t a1, int64_t *ret)
{
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, id, &st);
        int rc;

        if (r < 0)
                return r;
        if (a1 != INT64_MIN && store_sqlite_bind_i64(st, 1, a1)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                *ret = sqlite3_column_int64(st, 0);
        else
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : store_sqlite_map_rc(rc);
        /* run to the end: a RETURNING statement finishes its write there */
        if (r == 0)
                r = store_sqlite_stmt_run(st);
        else
                store_sqlite_stmt_done(st);
        return r;
}

int store_sqlite_epoch_read(struct store *store, int64_t *ret_epoch)
{
        int r = one_i64(S(store), ST_OWNER_EPOCH, INT64_MIN, ret_epoch);

        return r == TG_ENOTFOUND ? TG_ESTORE : r;
}

int store_sqlite_epoch_share(struct store *store, int64_t epoch, unsigned *ret_share)
{
        int64_t v = 0;
        int r;

        if (epoch <= 0)
                return TG_EFENCED; /* shares never held have epoch 0 */
        r = one_i64(S(store), ST_SHARE_OF_EPOCH, epoch, &v);
        if (r == TG_ENOTFOUND)
                return TG_EFENCED;
        if (r == 0 && (v < 0 || v >= STORE_SHARES_MAX))
                r = TG_ESTORE;
        if (r == 0)
                *ret_share = (unsigned)v;
        return r;
}

int store_sqlite_epoch_bump(struct store *store, unsigned share, int64_t *ret_epoch)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int64_t epoch = 0;
        int r = one_i64(s, ST_OWNER_BUMP, INT64_MIN, &epoch);

        if (r == TG_ENOTFOUND)
                r = TG_ESTORE;
        if (r == 0)
                r = store_sqlite_stmt_get(s, ST_SHARE_SET, &st);
        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, share) || store_sqlite_bind_i64(st, 2, epoch)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = store_sqlite_stmt_run(st);
        if (r == 0)
                *ret_epoch = epoch;
        return r;
}

int store_sqlite_split_read(struct store *store, struct store_split *ret_split)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_SPLIT_GET, &st);
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
                        ret_split->want_seq = sqlite3_column_int64(st, 3);
                }
        } else {
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : store_sqlite_map_rc(rc);
        }
        store_sqlite_stmt_done(st);
        return r;
}

int store_sqlite_hold_get(struct store *store, tg_wall_ms *ret_until)
{
        int64_t v = 0;
        int r = one_i64(S(store), ST_HOLD_GET, INT64_MIN, &v);

        if (r == TG_ENOTFOUND) {
                v = 0;
                r = 0;
        }
        if (r == 0)
                *ret_until = v;
        return r;
}

int store_sqlite_hold_raise(struct store *store, tg_wall_ms until)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_HOLD_RAISE, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, until)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return store_sqlite_stmt_run(st);
}

int store_sqlite_split_put(struct store *store, const struct store_split *split)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_SPLIT_PUT, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, split->shares) ||
            sqlite3_bind_double(st, 2, split->starts_per_second) != SQLITE_OK ||
            store_sqlite_bind_i64(st, 3, split->max_in_flight)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return store_sqlite_stmt_run(st);
}

int store_sqlite_split_want(struct store *store)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        int r = store_sqlite_stmt_get(s, ST_SPLIT_WANT, &st);

        return r < 0 ? r : store_sqlite_stmt_run(st);
}
