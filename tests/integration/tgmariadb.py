"""A private MariaDB server that a test starts, restarts and stops itself
(stdlib only): its own datadir, socket and loopback port, no systemd, never
the CI's shared instance (scripts/mariadb-test-server.sh). Used by the
database-fault tests, which need to take the server away under tollgate.

    with PrivateMariaDB() as db:      # install-db + start (skipTest-able)
        url = db.url("tollgate_faults")
        db.restart()                  # stop (clean shutdown) + start, same data
        db.sql("KILL 42")             # as root, over the socket
"""

import getpass
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse

import tgtest


def client_argv(url):
    """The stock `mariadb` client on a store url (mysql://user:pw@host:port/db),
    as an application would use it; the password goes through the
    environment, not argv. Returns (argv, env)."""
    u = urllib.parse.urlsplit(url)
    argv = ["mariadb", "--no-defaults", "-h", u.hostname, "-P", str(u.port or 3306),
            "-u", urllib.parse.unquote(u.username), "-N", "-B", u.path.lstrip("/")]
    env = dict(os.environ, MYSQL_PWD=urllib.parse.unquote(u.password or ""))
    return argv, env


def available():
    return bool(shutil.which("mariadbd") or shutil.which("mysqld")) and \
        bool(shutil.which("mariadb-install-db")) and bool(shutil.which("mariadb"))


class PrivateMariaDB:
    USER, PASSWORD = "tollgate", "tollgate"

    def __init__(self, server_args=()):
        """server_args: more mariadbd options (say "--log-bin"), kept for restarts."""
        self.server_args = list(server_args)
        self.dir = tempfile.mkdtemp(prefix="tollgate-mariadb-it-")
        self.datadir = os.path.join(self.dir, "data")
        self.socket = os.path.join(self.dir, "sock")
        # its own tmpdir: a mariadbd starting up deletes every "#sql*" file
        # in its tmpdir, and in /tmp those are the temporary tables of the
        # other servers the tests run beside it (the CI's shared MariaDB
        # lost one mid-query while test_db_faults restarted its own)
        self.tmpdir = os.path.join(self.dir, "tmp")
        os.mkdir(self.tmpdir)
        self.port = tgtest.free_port()
        self.proc = None
        self.log = open(os.path.join(self.dir, "server.log"), "ab")
        subprocess.run(["mariadb-install-db", "--no-defaults", "--datadir=" + self.datadir,
                        "--user=" + getpass.getuser(),
                        "--auth-root-authentication-method=normal"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        self.start()
        self.sql("CREATE USER IF NOT EXISTS '%s'@'127.0.0.1' IDENTIFIED BY '%s';"
                 "GRANT ALL ON `tollgate%%`.* TO '%s'@'127.0.0.1';"
                 % (self.USER, self.PASSWORD, self.USER))

    def url(self, db):
        return "mysql://%s:%s@127.0.0.1:%d/%s" % (self.USER, self.PASSWORD, self.port, db)

    def start(self):
        binary = shutil.which("mariadbd") or shutil.which("mysqld")
        self.proc = subprocess.Popen(
            [binary, "--no-defaults", "--datadir=" + self.datadir, "--socket=" + self.socket,
             "--port=%d" % self.port, "--bind-address=127.0.0.1",
             "--user=" + getpass.getuser(), "--innodb-buffer-pool-size=64M",
             "--pid-file=" + os.path.join(self.dir, "pid"), "--tmpdir=" + self.tmpdir]
            + self.server_args,
            stdout=self.log, stderr=self.log)
        tgtest.wait_until(self._up, timeout=30, interval=0.1, what="private mariadbd up")

    def _up(self):
        if self.proc.poll() is not None:
            raise RuntimeError("mariadbd exited (%s), see %s/server.log"
                               % (self.proc.returncode, self.dir))
        r = subprocess.run(["mariadb", "--no-defaults", "-S", self.socket, "-uroot", "-e",
                            "SELECT 1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0

    def stop(self, sig=signal.SIGTERM):
        """SIGTERM: a clean shutdown; SIGKILL: a crash (InnoDB recovers on start)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self, sig=signal.SIGTERM, down_s=0.0):
        self.stop(sig)
        time.sleep(down_s)  # the scenario: the server stays down this long
        self.start()

    def sql(self, text):
        """Runs SQL as root over the socket; returns the rows (tab-separated)."""
        r = subprocess.run(["mariadb", "--no-defaults", "-S", self.socket, "-uroot", "-N",
                            "-B", "-e", text], capture_output=True, text=True, check=True)
        return [line.split("\t") for line in r.stdout.splitlines()]

    def close(self):
        self.stop()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
