/*
 * faultvfs — an SQLite VFS for tests only, as SQLite's own I/O-error tests
 * do it: it wraps the default VFS, counts the operations that change a file
 * (xWrite, xSync, xTruncate) and, once armed, makes the ones from the N-th
 * on fail: with an I/O error (SQLITE_IOERR_WRITE / _FSYNC / _TRUNCATE, a
 * failing disk) or as a full disk (SQLITE_FULL from xWrite and xTruncate,
 * syncs pass). Everything else goes to the wrapped VFS unchanged.
 *
 * Two ways in, never the shipped binary's default path:
 *   - linked into a unit test, which calls faultvfs_install() and arms it;
 *   - as libtg_faultvfs.so under LD_PRELOAD, for a real tollgate process:
 *     with TG_FAULTVFS=<control file> in the environment its constructor
 *     installs it and reads the control file whenever it changed (one line:
 *     "count" or "off", "ioerr AFTER [COUNT]", "full AFTER [COUNT]",
 *     "slowsync MS" (a slow disk: every sync takes MS ms longer, until
 *     "off" or "count"); AFTER
 *     "+N" is N operations after the count when the line is read; a line is
 *     applied when it differs from the last one, words after these ignored)
 *     and writes
 *     "<ops> <faults>" to <control file>.ops after every counted operation.
 *     tests/integration/tgfaultvfs.py drives it.
 *
 * Thread-safe (serve's API and dispatcher threads share it).
 */
#ifndef TG_FAULTVFS_H
#define TG_FAULTVFS_H

#include <stdint.h>

enum faultvfs_kind {
        FAULTVFS_IOERR, /* writes, syncs and truncates fail with I/O errors */
        FAULTVFS_FULL,  /* writes and truncates fail with SQLITE_FULL */
};

/* Registers the VFS as the default, wrapping the default one (once; later
 * calls do nothing). 0, or a negative SQLite-independent -1 on failure. */
int faultvfs_install(void);

/* From now on, the counted operation number `after` (counting from the last
 * faultvfs_reset, the first is 0) and the `count` after it fail (count < 0:
 * all of them, until healed). after < 0 heals. */
void faultvfs_arm(int64_t after, int64_t count, enum faultvfs_kind kind);

/* Heals and sets both counters to 0. */
void faultvfs_reset(void);

/* Counted operations since the last reset, and how many of them failed. */
int64_t faultvfs_ops(void);
int64_t faultvfs_faults(void);
/* The xSync calls among them (a commit under synchronous=FULL makes one). */
int64_t faultvfs_syncs(void);

#endif
