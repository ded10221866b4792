/*
 * faultvfs — see faultvfs.h. The wrapper file is the wrapped VFS's file
 * right after our own header in one block (szOsFile is the sum), so every
 * method but the three counted ones is a plain call through.
 */
#include "faultvfs.h"

#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ffile {
        sqlite3_file base;
        sqlite3_file *real; /* the wrapped VFS's file, right after this struct */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static sqlite3_vfs *real_vfs;
static sqlite3_vfs fault_vfs;
static int64_t n_ops, n_faults, n_syncs;
static int64_t fail_from = -1, fail_count = -1;
static enum faultvfs_kind fail_kind;
static long sync_delay_us; /* a slow disk: every sync takes this long more */

/* preload mode: the control file and where the counts go */
static const char *control_path;
static char ops_path[4096];
static char control_line[128];

enum op_kind { OP_WRITE, OP_SYNC, OP_TRUNCATE };

/* Reads the control file at every counted operation (tests only: the cost
 * does not matter) and applies a line that differs from the last one; a
 * writer that means the same order twice adds a serial word at the end. */
static void read_control(void)
{
        char line[128] = "";
        char word[16] = "";
        char after[32] = "";
        long long count = -1;
        FILE *f;

        if (!control_path)
                return;
        f = fopen(control_path, "r");
        if (!f)
                return;
        if (!fgets(line, sizeof(line), f))
                line[0] = '\0';
        fclose(f);
        if (strcmp(line, control_line) == 0)
                return;
        memcpy(control_line, line, sizeof(line));
        if (sscanf(line, "%15s %31s %lld", word, after, &count) < 1)
                return;
        if (strcmp(word, "ioerr") == 0 || strcmp(word, "full") == 0) {
                long long n = strtoll(after[0] == '+' ? after + 1 : after, NULL, 10);

                fail_kind = word[0] == 'f' ? FAULTVFS_FULL : FAULTVFS_IOERR;
                fail_from = after[0] == '+' ? n_ops + n : n;
                fail_count = count;
        } else if (strcmp(word, "slowsync") == 0) {
                sync_delay_us = strtol(after, NULL, 10) * 1000;
        } else {
                fail_from = -1; /* "off", "count" */
                sync_delay_us = 0;
        }
}

static void write_counts(void)
{
        char text[64];
        int fd, n;

        if (!ops_path[0])
                return;
        n = snprintf(text, sizeof(text), "%lld %lld\n", (long long)n_ops, (long long)n_faults);
        /* a rename makes each count whole for a reader */
        char tmp[sizeof(ops_path) + 8];
        snprintf(tmp, sizeof(tmp), "%s.tmp", ops_path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
                return;
        if (write(fd, text, (size_t)n) == n)
                (void)rename(tmp, ops_path);
        close(fd);
}

/* Counts one operation; SQLITE_OK to do it, else the code it fails with. */
static int counted(enum op_kind op)
{
        int rc = SQLITE_OK;

        pthread_mutex_lock(&mu);
        read_control();
        int64_t n = n_ops++;
        n_syncs += op == OP_SYNC;
        if (fail_from >= 0 && n >= fail_from && (fail_count < 0 || n < fail_from + fail_count)) {
                if (fail_kind == FAULTVFS_FULL)
                        rc = op == OP_SYNC ? SQLITE_OK : SQLITE_FULL;
                else
                        rc = op == OP_WRITE  ? SQLITE_IOERR_WRITE
                             : op == OP_SYNC ? SQLITE_IOERR_FSYNC
                                             : SQLITE_IOERR_TRUNCATE;
                if (rc != SQLITE_OK)
                        n_faults++;
        }
        write_counts();
        pthread_mutex_unlock(&mu);
        return rc;
}

/* ---- the file ------------------------------------------------------------ */

#define REAL(f) (((struct ffile *)(f))->real)

static int f_close(sqlite3_file *f)
{
        int rc = REAL(f)->pMethods->xClose(REAL(f));

        f->pMethods = NULL;
        return rc;
}

static int f_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
        return REAL(f)->pMethods->xRead(REAL(f), buf, amt, off);
}

static int f_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off)
{
        int rc = counted(OP_WRITE);

        return rc != SQLITE_OK ? rc : REAL(f)->pMethods->xWrite(REAL(f), buf, amt, off);
}

static int f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
        int rc = counted(OP_TRUNCATE);

        return rc != SQLITE_OK ? rc : REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int f_sync(sqlite3_file *f, int flags)
{
        int rc = counted(OP_SYNC);

        pthread_mutex_lock(&mu);
        long delay = sync_delay_us;
        pthread_mutex_unlock(&mu);
        if (rc == SQLITE_OK && delay > 0)
                usleep((useconds_t)delay);
        return rc != SQLITE_OK ? rc : REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int f_size(sqlite3_file *f, sqlite3_int64 *ret_size)
{
        return REAL(f)->pMethods->xFileSize(REAL(f), ret_size);
}

static int f_lock(sqlite3_file *f, int lock)
{
        return REAL(f)->pMethods->xLock(REAL(f), lock);
}

static int f_unlock(sqlite3_file *f, int lock)
{
        return REAL(f)->pMethods->xUnlock(REAL(f), lock);
}

static int f_check_lock(sqlite3_file *f, int *ret_out)
{
        return REAL(f)->pMethods->xCheckReservedLock(REAL(f), ret_out);
}

static int f_control(sqlite3_file *f, int op, void *arg)
{
        return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int f_sector(sqlite3_file *f)
{
        return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int f_caps(sqlite3_file *f)
{
        return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int f_shm_map(sqlite3_file *f, int page, int size, int extend, void volatile **ret_p)
{
        return REAL(f)->pMethods->xShmMap(REAL(f), page, size, extend, ret_p);
}

static int f_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
        return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}

static void f_shm_barrier(sqlite3_file *f)
{
        REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int f_shm_unmap(sqlite3_file *f, int del)
{
        return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **ret_p)
{
        return REAL(f)->pMethods->xFetch(REAL(f), off, amt, ret_p);
}

static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
        return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

/* One table per version of the wrapped file's methods (the unix VFS's files
 * are version 3; a journal in memory may be 1). */
static const sqlite3_io_methods methods[4] = {
#define METHODS(v)                                                                                 \
        {                                                                                          \
                v, f_close, f_read, f_write, f_truncate, f_sync, f_size, f_lock, f_unlock,         \
                    f_check_lock, f_control, f_sector, f_caps, (v) >= 2 ? f_shm_map : NULL,        \
                    (v) >= 2 ? f_shm_lock : NULL, (v) >= 2 ? f_shm_barrier : NULL,                 \
                    (v) >= 2 ? f_shm_unmap : NULL, (v) >= 3 ? f_fetch : NULL,                      \
                    (v) >= 3 ? f_unfetch : NULL                                                    \
        }
    METHODS(1),
    METHODS(1),
    METHODS(2),
    METHODS(3),
#undef METHODS
};

/* ---- the VFS --------------------------------------------------------------- */

static int v_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *ret_flags)
{
        struct ffile *p = (struct ffile *)f;
        int rc;

        (void)vfs;
        p->real = (sqlite3_file *)&p[1];
        rc = real_vfs->xOpen(real_vfs, name, p->real, flags, ret_flags);
        if (p->real->pMethods) {
                int v = p->real->pMethods->iVersion;

                f->pMethods = &methods[v < 1 ? 1 : v > 3 ? 3 : v];
        } else {
                f->pMethods = NULL;
        }
        return rc;
}

static int v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
        (void)vfs;
        return real_vfs->xDelete(real_vfs, name, sync_dir);
}

static int v_access(sqlite3_vfs *vfs, const char *name, int flags, int *ret_out)
{
        (void)vfs;
        return real_vfs->xAccess(real_vfs, name, flags, ret_out);
}

static int v_full(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
        (void)vfs;
        return real_vfs->xFullPathname(real_vfs, name, n, out);
}

static void *v_dlopen(sqlite3_vfs *vfs, const char *name)
{
        (void)vfs;
        return real_vfs->xDlOpen(real_vfs, name);
}

static void v_dlerror(sqlite3_vfs *vfs, int n, char *out)
{
        (void)vfs;
        real_vfs->xDlError(real_vfs, n, out);
}

static void (*v_dlsym(sqlite3_vfs *vfs, void *h, const char *sym))(void)
{
        (void)vfs;
        return real_vfs->xDlSym(real_vfs, h, sym);
}

static void v_dlclose(sqlite3_vfs *vfs, void *h)
{
        (void)vfs;
        real_vfs->xDlClose(real_vfs, h);
}

static int v_random(sqlite3_vfs *vfs, int n, char *out)
{
        (void)vfs;
        return real_vfs->xRandomness(real_vfs, n, out);
}

static int v_sleep(sqlite3_vfs *vfs, int us)
{
        (void)vfs;
        return real_vfs->xSleep(real_vfs, us);
}

static int v_time(sqlite3_vfs *vfs, double *ret_t)
{
        (void)vfs;
        return real_vfs->xCurrentTime(real_vfs, ret_t);
}

static int v_last_error(sqlite3_vfs *vfs, int n, char *out)
{
        (void)vfs;
        return real_vfs->xGetLastError(real_vfs, n, out);
}

static int v_time64(sqlite3_vfs *vfs, sqlite3_int64 *ret_t)
{
        (void)vfs;
        return real_vfs->xCurrentTimeInt64(real_vfs, ret_t);
}

int faultvfs_install(void)
{
        int rc = 0;

        pthread_mutex_lock(&mu);
        if (!real_vfs) {
                sqlite3_vfs *def = sqlite3_vfs_find(NULL);

                if (!def || def->iVersion < 2) {
                        rc = -1;
                } else {
                        real_vfs = def;
                        fault_vfs = (sqlite3_vfs){
                            .iVersion = 2,
                            .szOsFile = (int)sizeof(struct ffile) + def->szOsFile,
                            .mxPathname = def->mxPathname,
                            .zName = "tg-faultvfs",
                            .xOpen = v_open,
                            .xDelete = v_delete,
                            .xAccess = v_access,
                            .xFullPathname = v_full,
                            .xDlOpen = v_dlopen,
                            .xDlError = v_dlerror,
                            .xDlSym = v_dlsym,
                            .xDlClose = v_dlclose,
                            .xRandomness = v_random,
                            .xSleep = v_sleep,
                            .xCurrentTime = v_time,
                            .xGetLastError = v_last_error,
                            .xCurrentTimeInt64 = v_time64,
                        };
                        if (sqlite3_vfs_register(&fault_vfs, 1) != SQLITE_OK) {
                                real_vfs = NULL;
                                rc = -1;
                        }
                }
        }
        pthread_mutex_unlock(&mu);
        return rc;
}

void faultvfs_arm(int64_t after, int64_t count, enum faultvfs_kind kind)
{
        pthread_mutex_lock(&mu);
        fail_from = after;
        fail_count = count;
        fail_kind = kind;
        pthread_mutex_unlock(&mu);
}

void faultvfs_reset(void)
{
        pthread_mutex_lock(&mu);
        fail_from = -1;
        n_ops = 0;
        n_faults = 0;
        n_syncs = 0;
        pthread_mutex_unlock(&mu);
}

int64_t faultvfs_ops(void)
{
        pthread_mutex_lock(&mu);
        int64_t n = n_ops;
        pthread_mutex_unlock(&mu);
        return n;
}

int64_t faultvfs_faults(void)
{
        pthread_mutex_lock(&mu);
        int64_t n = n_faults;
        pthread_mutex_unlock(&mu);
        return n;
}

#ifdef FAULTVFS_PRELOAD
/* Under LD_PRELOAD: installed before main() when TG_FAULTVFS names the
 * control file; a process without it runs on the default VFS untouched. */
__attribute__((constructor)) static void faultvfs_preload(void)
{
        const char *path = getenv("TG_FAULTVFS");

        if (!path || !path[0])
                return;
        control_path = path;
        snprintf(ops_path, sizeof(ops_path), "%s.ops", path);
        if (faultvfs_install() < 0) {
                fprintf(stderr, "faultvfs: cannot install the VFS\n");
                abort();
        }
        pthread_mutex_lock(&mu);
        read_control();
        write_counts();
        pthread_mutex_unlock(&mu);
}
#endif

int64_t faultvfs_syncs(void)
{
        pthread_mutex_lock(&mu);
        int64_t n = n_syncs;
        pthread_mutex_unlock(&mu);
        return n;
}
