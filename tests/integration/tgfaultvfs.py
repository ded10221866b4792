"""The I/O-error VFS under a real tollgate (stdlib only).

tests/faultvfs/faultvfs.c built as libtg_faultvfs.so is put under a tollgate
process with LD_PRELOAD; TG_FAULTVFS names a control file that the library
reads whenever it changes. FaultDisk(dir) makes one and says how:

    disk = FaultDisk(tg.dir)
    p = tg.start("serve", env=disk.env())
    disk.fail("full")          # from now on writes fail as on a full disk
    disk.fail("ioerr", 5)      # the 6th write/sync/truncate from now on fails
    disk.slow_sync(40)         # every sync takes 40 ms longer
    disk.heal()                # the disk is back
    disk.counts()              # (operations counted, operations failed)

Only the SQLite store goes through it; a process without the environment
runs on SQLite's default VFS, untouched.
"""

import os

import tgtest


def library():
    path = os.path.join(tgtest.build_dir(), "tests", "libtg_faultvfs.so")
    if not os.path.exists(path):
        raise RuntimeError("libtg_faultvfs.so not built (looked in %s)" % path)
    return path


class FaultDisk:
    def __init__(self, directory):
        self.control = os.path.join(directory, "faultvfs.control")
        self._write("count")

    def env(self):
        asan = os.environ.get("ASAN_OPTIONS", "")
        # a sanitizer build: the preloaded object comes before libasan
        asan = (asan + ":" if asan else "") + "verify_asan_link_order=0"
        return {"LD_PRELOAD": library(), "TG_FAULTVFS": self.control, "ASAN_OPTIONS": asan}

    def _write(self, line):
        # the library applies a line that differs from the last one: a
        # serial makes every order new; rename: never half a line
        self.serial = getattr(self, "serial", 0) + 1
        tmp = self.control + ".tmp"
        with open(tmp, "w") as f:
            f.write("%s %d\n" % (line, self.serial))
        os.rename(tmp, self.control)

    def fail(self, kind, after=0, count=-1):
        """kind "ioerr" or "full"; from the after-th counted operation from
        now on (count: only that many, else until heal())."""
        self._write("%s +%d %d" % (kind, after, count))

    def slow_sync(self, ms):
        """A slow disk: every sync takes ms milliseconds longer (heal() ends it)."""
        self._write("slowsync %d" % ms)

    def heal(self):
        self._write("off")

    def counts(self):
        try:
            with open(self.control + ".ops") as f:
                ops, faults = f.read().split()
            return int(ops), int(faults)
        except (OSError, ValueError):
            return 0, 0
