"""A private PostgreSQL cluster that a test starts, restarts and stops itself
(stdlib only): initdb + pg_ctl in a temp dir, its own socket directory and
loopback port, never the suite's shared server (scripts/pg-test-server.sh).
Used by the database-fault tests, which take the server away under tollgate.
As root, the cluster runs as `nobody` (initdb refuses root).

    with PrivatePostgres() as db:     # initdb + start (skipTest-able)
        url = db.url("tollgate_faults")
        db.restart()                  # fast shutdown + start, same data
        db.restart(crash=True)        # immediate shutdown (crash recovery on start)
        db.sql("SELECT 1")            # as the superuser, over the socket
"""

import glob
import os
import shutil
import subprocess
import tempfile
import time

import tgtest


def bin_dir():
    for d in ["/usr/lib/postgresql/15/bin"] + sorted(glob.glob("/usr/lib/postgresql/*/bin")):
        if os.path.exists(os.path.join(d, "initdb")) and os.path.exists(os.path.join(d, "pg_ctl")):
            return d
    return None


def available():
    return bin_dir() is not None and bool(shutil.which("psql"))


class PrivatePostgres:
    USER, PASSWORD = "tollgate", "tollgate"

    def __init__(self):
        self.bin = bin_dir()
        self.dir = tempfile.mkdtemp(prefix="tollgate-pg-it-")
        self.datadir = os.path.join(self.dir, "data")
        self.port = tgtest.free_port()
        self.as_user = ["runuser", "-u", "nobody", "--"] if os.getuid() == 0 else []
        if self.as_user:
            shutil.chown(self.dir, user="nobody")
        pw = os.path.join(self.dir, "pw")
        with open(pw, "w") as f:
            f.write("postgres\n")
        if self.as_user:
            shutil.chown(pw, user="nobody")
        subprocess.run(self.as_user + [os.path.join(self.bin, "initdb"), "-D", self.datadir,
                                       "-U", "postgres", "--pwfile=" + pw, "--auth-local=trust",
                                       "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        self.start()
        self.sql("CREATE ROLE %s LOGIN CREATEDB PASSWORD '%s'" % (self.USER, self.PASSWORD))

    def url(self, db):
        return "postgresql://%s:%s@127.0.0.1:%d/%s" % (self.USER, self.PASSWORD, self.port, db)

    def _ctl(self, *args, check=True):
        return subprocess.run(self.as_user + [os.path.join(self.bin, "pg_ctl"), "-D",
                                              self.datadir] + list(args),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=check)

    def start(self):
        self._ctl("-l", os.path.join(self.dir, "server.log"), "-w", "-t", "30", "-o",
                  "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off"
                  % (self.port, self.dir), "start")
        tgtest.wait_until(self._up, timeout=30, interval=0.1, what="private postgres up")

    def _up(self):
        r = subprocess.run(["psql", "-X", "-h", self.dir, "-p", str(self.port), "-U", "postgres",
                            "-d", "postgres", "-c", "SELECT 1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0

    def stop(self, crash=False):
        """fast: a clean shutdown; crash: immediate (WAL recovery on start)."""
        self._ctl("-m", "immediate" if crash else "fast", "-w", "stop", check=False)

    def restart(self, crash=False, down_s=0.0):
        self.stop(crash)
        time.sleep(down_s)  # the scenario: the server stays down this long
        self.start()

    def sql(self, text, db="postgres"):
        """Runs SQL as the superuser over the socket; returns the rows (tab-separated)."""
        r = subprocess.run(["psql", "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                            "-h", self.dir, "-p", str(self.port), "-U", "postgres", "-d", db,
                            "-c", text], capture_output=True, text=True, check=True)
        return [line.split("\t") for line in r.stdout.splitlines()]

    def session(self, db):
        """A psql session as the superuser on db, reading SQL from its stdin."""
        return subprocess.Popen(["psql", "-X", "-q", "-h", self.dir, "-p", str(self.port), "-U",
                                 "postgres", "-d", db], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
