/*
 * store_sqlite_owner — exit ownership for the SQLite backend: share locks,
 * the split, epochs and recovery.
 *
 * Exit ownership is an open-file-description lock (F_OFD_SETLK, or flock()
 * where OFD locks do not exist) on "<db path>.owner", held by the struct
 * store until release or close. Unlike a POSIX record lock it conflicts with
 * a second handle of the same process, and closing some other descriptor of
 * the file does not drop it. Each acquisition bumps owner.epoch in the
 * database; claims check that epoch inside their transaction, settles check
 * the epoch the operation was claimed under. Shares k > 0 lock
 * "<db path>.share<k>", and acquirers hold "<db path>.split" while they pick.
 */
#define _GNU_SOURCE /* F_OFD_SETLK */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "store/sqlite_int.h"

#define RECOVER_BATCH 64

int sqlite_owner_epoch_read(struct sqlite_store *s, int64_t *ret_epoch)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, ST_OWNER_EPOCH, &st);
        int rc;

        if (r < 0)
                return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
                *ret_epoch = sqlite3_column_int64(st, 0);
        else
                r = rc == SQLITE_DONE ? TG_ESTORE : sqlite_map_rc(rc);
        sqlite_stmt_done(st);
        return r;
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
        int r = sqlite_stmt_get(s, ST_SPLIT_GET, &st);
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
                r = rc == SQLITE_DONE ? TG_ENOTFOUND : sqlite_map_rc(rc);
        }
        sqlite_stmt_done(st);
        return r;
}

int sqlite_split_get(struct store *store, struct store_split *ret_split)
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
        int r = sqlite_tx_begin(s, true);
        int rc;

        if (r < 0)
                return r;
        if (put) {
                r = sqlite_stmt_get(s, ST_SPLIT_PUT, &st);
                if (r == 0 && (sqlite_bind_i64(st, 1, put->shares) ||
                               sqlite3_bind_double(st, 2, put->starts_per_second) != SQLITE_OK ||
                               sqlite_bind_i64(st, 3, put->max_in_flight))) {
                        sqlite_stmt_done(st);
                        r = TG_ESTORE;
                }
                if (r == 0)
                        r = sqlite_stmt_run(st);
        }
        if (r == 0)
                r = sqlite_stmt_get(s, ST_OWNER_BUMP, &st);
        if (r == 0) {
                rc = sqlite3_step(st);
                if (rc == SQLITE_ROW)
                        epoch = sqlite3_column_int64(st, 0);
                else
                        r = rc == SQLITE_DONE ? TG_ESTORE : sqlite_map_rc(rc);
                if (r == 0)
                        r = sqlite_stmt_run(st); /* finish the statement */
                else
                        sqlite_stmt_done(st);
        }
        if (r == 0)
                r = sqlite_stmt_get(s, ST_SHARE_SET, &st);
        if (r == 0) {
                if (sqlite_bind_i64(st, 1, share) || sqlite_bind_i64(st, 2, epoch)) {
                        sqlite_stmt_done(st);
                        r = TG_ESTORE;
                } else {
                        r = sqlite_stmt_run(st);
                }
        }
        if (r < 0) {
                sqlite_tx_rollback(s);
                return r;
        }
        r = sqlite_tx_commit(s);
        if (r == 0)
                *ret_epoch = epoch;
        return r;
}

int sqlite_share_acquire(struct store *store, const struct store_split *split, unsigned *ret_share,
                         int64_t *ret_epoch)
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
int sqlite_check_epoch(struct sqlite_store *s, int64_t epoch, unsigned *ret_share)
{
        sqlite3_stmt *st = NULL;
        int r, rc;

        if (epoch <= 0)
                return TG_EFENCED; /* shares never held have epoch 0 */
        r = sqlite_stmt_get(s, ST_SHARE_OF_EPOCH, &st);
        if (r < 0)
                return r;
        if (sqlite_bind_i64(st, 1, epoch)) {
                sqlite_stmt_done(st);
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
                r = rc == SQLITE_DONE ? TG_EFENCED : sqlite_map_rc(rc);
        }
        sqlite_stmt_done(st);
        return r;
}

int sqlite_owner_check(struct store *store)
{
        struct sqlite_store *s = S(store);
        unsigned share = 0;
        int r;

        if (s->lock_fd < 0 || !lock_file_current(s->lock_path, s->lock_fd))
                return TG_ELOCKED;
        /* The lock is what decides; the epoch only catches an owner that
         * took over our share behind a replaced lock file. A database that
         * cannot answer right now (busy) is not a lost lock: claims stay
         * fenced by the epoch check inside their own transaction either way. */
        r = sqlite_check_epoch(s, s->epoch, &share);
        if (r == TG_EFENCED)
                return TG_ELOCKED;
        if (r < 0)
                return 0;
        return share == s->share ? 0 : TG_ELOCKED;
}

void sqlite_owner_release(struct store *store)
{
        struct sqlite_store *s = S(store);

        if (s->lock_fd >= 0)
                close(s->lock_fd); /* drops the OFD lock */
        s->lock_fd = -1;
        s->epoch = 0;
        s->share = 0;
}

int sqlite_owner_epoch(struct store *store, int64_t *ret_epoch)
{
        return sqlite_owner_epoch_read(S(store), ret_epoch);
}

static int close_open_calls(struct sqlite_store *s, int64_t op_id, tg_wall_ms now)
{
        sqlite3_stmt *st = NULL;
        int r = sqlite_stmt_get(s, ST_RECOVER_CALLS, &st);

        if (r < 0)
                return r;
        if (sqlite_bind_i64(st, 1, op_id) || sqlite_bind_i64(st, 2, now)) {
                sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return sqlite_stmt_run(st);
}

int sqlite_recover(struct store *store, int64_t epoch, const struct policy_config *config,
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
        r = sqlite_tx_begin(s, true);
        if (r < 0)
                goto out;
        r = sqlite_check_epoch(s, epoch, &share);
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

                r = sqlite_stmt_get(s, ST_RECOVER_PICK, &st);
                if (r < 0)
                        break;
                if (sqlite_bind_i64(st, 1, epoch) || sqlite_bind_i64(st, 2, RECOVER_BATCH) ||
                    sqlite_bind_i64(st, 3, share) || sqlite_bind_i64(st, 4, split.shares)) {
                        sqlite_stmt_done(st);
                        r = TG_ESTORE;
                        break;
                }
                while (r == 0 && n < RECOVER_BATCH) {
                        rc = sqlite3_step(st);
                        if (rc == SQLITE_ROW)
                                r = sqlite_read_op(st, &batch[n++]);
                        else if (rc == SQLITE_DONE)
                                break;
                        else
                                r = sqlite_map_rc(rc);
                }
                sqlite_stmt_done(st);
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
                        r = sqlite_op_write(s, op);
                        if (r == 0)
                                r = close_open_calls(s, op->id, now);
                        if (r == 0)
                                r = sqlite_audit_insert(s, op->id, now, "event", "tollgate",
                                                        store_reason_text(op->reason), detail);
                        if (r == 0)
                                count++;
                }
        }
        if (r < 0) {
                sqlite_tx_rollback(s);
                goto out;
        }
        r = sqlite_tx_commit(s);
        if (r == 0)
                *ret_count = count;
out:
        free(batch);
        return r;
}
