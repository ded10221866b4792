"""Helpers to run tollgate itself in integration tests (stdlib only).

Tollgate(stub_url, **config) writes a config file and a token into a fresh
temp dir (the SQLite store lives there too) and can start `serve`,
`dispatch` or `api` processes on it. Several processes may share one
Tollgate (same store, same config): that is how ownership is tested.
"""

import itertools
import os
import random
import signal
import sqlite3
import subprocess
import time
import unittest

import tgmariadb
import tgprovider
import tgtest

TOKEN = "test-token-0123456789"
# The stand-in provider shares the two cores with tollgate and the test (and,
# under `ctest -j2`, another test). Its arrival stamps are the kernel's
# (src/stub/relay.c); what moves an arrival against tollgate's own record of
# its start is the kernel's receive path on loopback and tollgate's time
# between the pre-request hook and the send, which a busy or virtual machine
# stretches (docs/design.md, the margin).
TEST_SPACING_MARGIN_US = 5000

# When set, a callable that returns the store url of a Tollgate created
# without store_url= (test_exit_mariadb.py points it at a fresh MariaDB
# database per test). None: a SQLite file in the Tollgate's temp dir.
default_store_url = None

# TG_TEST_STORE=mysql runs a test file against MariaDB (a fresh database per
# Tollgate on the server of TG_TEST_MYSQL_URL); CTest registers the
# acceptance scenarios a second time that way. Without a server such a test
# is skipped, and says why.
_serial = itertools.count(1)


def _fresh_mysql_url():
    url = os.environ.get("TG_TEST_MYSQL_URL", "")
    if not url:
        raise unittest.SkipTest("TG_TEST_STORE=mysql but TG_TEST_MYSQL_URL is not set "
                                "(see scripts/mariadb-test-server.sh)")
    return "%s_acc_%d_%d" % (url, os.getpid(), next(_serial))


def _fresh_pg_url():
    url = os.environ.get("TG_TEST_PG_URL", "")
    if not url:
        raise unittest.SkipTest("TG_TEST_STORE=pg but TG_TEST_PG_URL is not set "
                                "(see scripts/pg-test-server.sh)")
    return "%s_acc_%d_%d" % (url, os.getpid(), next(_serial))


if os.environ.get("TG_TEST_STORE") == "mysql":
    default_store_url = _fresh_mysql_url
elif os.environ.get("TG_TEST_STORE") == "pg":
    default_store_url = _fresh_pg_url


class Tollgate:
    def __init__(self, stub_url, store_url=None, tls=None, profile=None, credentials=True,
                 token=TOKEN, api_port=None, **sections):
        """sections: {"exit": {"starts_per_second": 5}, "retry": {...}, ...}. The
        [provider] and [classify] for the stub come from tgprovider (the test
        switches, or tls/profile as the stub was started with); a test's own
        keys override them and its classify rules come after."""
        self.dir = tgtest.scratch_dir("tollgate-it-")
        self.token_file = os.path.join(self.dir, "token")
        self.token = token
        # a secret file nobody but its owner may read (the config refuses others)
        with open(os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                  "w") as f:
            f.write(token + "\n")
        self.db = os.path.join(self.dir, "tg.db")
        if store_url is None and default_store_url is not None:
            store_url = default_store_url()
        self.store_url = store_url or "sqlite://" + self.db
        # a notification-only stub sends to the port its flags named
        self.api_port = api_port or tgprovider.webhook_port(stub_url) or tgtest.free_port()
        self.api = "http://127.0.0.1:%d" % self.api_port
        conf = {
            "store": {"url": self.store_url},
            "api": {"listen": "127.0.0.1:%d" % self.api_port, "token_file": self.token_file},
            # tollgate shares CI's two cores with the stub and the test: the
            # scheduling between a request's hook and its arrival moves the
            # arrival (TEST_SPACING_MARGIN_US above), which the spacing margin
            # must cover for the provider side of `tollgate verify` to hold. A test may
            # set its own.
            "exit": {"spacing_margin_us": TEST_SPACING_MARGIN_US},
        }
        conf.update(tgprovider.provider_sections(stub_url, tls, profile, credentials))
        for name, keys in sections.items():
            for k, v in keys.items():
                have = conf.setdefault(name, {}).get(k)
                if name == "classify" and k == "rule" and have:
                    conf[name][k] = list(have) + (list(v) if isinstance(v, (list, tuple))
                                                  else [v])
                else:
                    conf[name][k] = v
        self.config = os.path.join(self.dir, "tollgate.ini")
        with open(self.config, "w") as f:
            for name, keys in conf.items():
                f.write("[%s]\n" % name)
                for k, v in keys.items():
                    if isinstance(v, (list, tuple)):
                        for item in v:
                            f.write("%s = %s\n" % (k, item))
                    else:
                        f.write("%s = %s\n" % (k, v))
        self.procs = []

    def start(self, command="serve", *flags, env=None, wait_api=True):
        p = tgtest.Proc([tgtest.binary("tollgate"), command, "--config", self.config] +
                        list(flags), env=env)
        self.procs.append(p)
        if command in ("serve", "api") and wait_api:
            tgtest.wait_until(lambda: self._healthy(p), timeout=10, what="tollgate api up")
        return p

    def _healthy(self, p):
        if p.poll() is not None:
            raise RuntimeError("tollgate exited (%s):\n%s" % (p.returncode, p.stderr_text()))
        try:
            status, _, _ = tgtest.http_json("GET", self.api + "/healthz", timeout=1)
            return status == 200
        except OSError:
            return False

    def headers(self):
        return {"Authorization": "Bearer " + self.token}

    def submit(self, op_id, payment="pay_1", amount=1500, currency="TWD", account=None):
        body = {"operation_id": op_id, "payment_id": payment, "amount": amount,
                "currency": currency}
        if account:
            body["account"] = account
        return tgtest.http_json("POST", self.api + "/v1/refunds", body, self.headers())

    def submit_batch(self, op_ids, payment="pay_1", amount=1500, currency="TWD"):
        """Every op_id in one POST /v1/refunds:batch (one commit): a backlog
        in place at once, whatever the intake's pace on a busy machine."""
        items = [{"operation_id": op, "payment_id": payment, "amount": amount,
                  "currency": currency} for op in op_ids]
        return tgtest.http_json("POST", self.api + "/v1/refunds:batch", {"refunds": items},
                                self.headers())

    def status(self, op_id):
        return tgtest.http_json("GET", self.api + "/v1/refunds/" + op_id, None, self.headers())

    def calls(self, released=False):
        """The calls made, oldest first. A claim made ahead of its slot and
        given back before it was sent is a row of the call log ("released":
        true), not a call: released=True gives the whole log."""
        out, since = [], 0
        while True:
            status, _, body = tgtest.http_json(
                "GET", "%s/v1/calls?since=%d&limit=1000" % (self.api, since), None,
                self.headers())
            assert status == 200, (status, body)
            out.extend(c for c in body["calls"] if released or not c.get("released"))
            if not body["calls"]:
                return out
            since = body["next_since"]

    def wait_final(self, op_ids, timeout=60, states=("succeeded", "rejected", "manual")):
        """Waits until every operation is in one of states; returns {id: record}."""
        def done():
            got = {}
            for op in op_ids:
                status, _, body = self.status(op)
                if status != 200 or body["state"] not in states:
                    return None
                got[op] = body
            return got
        return tgtest.wait_until(done, timeout=timeout, interval=0.25,
                                 what="operations final")

    def store_write_locked(self):
        """True while some process holds a write transaction on the store:
        SQLite's one write lock, or MariaDB row locks on the operations or
        the counters (what an intake writes)."""
        if self.store_url.startswith("sqlite://"):
            db = sqlite3.connect(self.db, timeout=0, isolation_level=None)
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("ROLLBACK")
                return False
            except sqlite3.OperationalError as e:
                if "locked" not in str(e):
                    raise
                return True
            finally:
                db.close()
        if self.store_url.startswith(("postgresql://", "postgres://")):
            # NOWAIT meets a row lock with 55P03 (lock_not_available)
            r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", self.store_url,
                                "-c", "BEGIN; SELECT COUNT(*) FROM (SELECT 1 FROM operations "
                                "FOR UPDATE NOWAIT) o; SELECT COUNT(*) FROM (SELECT 1 FROM "
                                "counters FOR UPDATE NOWAIT) c; ROLLBACK"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                return False
            if "could not obtain lock" not in r.stderr:
                raise AssertionError("psql failed: %s" % r.stderr)
            return True
        argv, env = tgmariadb.client_argv(self.store_url)
        r = subprocess.run(argv + ["-e", "START TRANSACTION;"
                                   "SELECT COUNT(*) FROM operations FOR UPDATE NOWAIT;"
                                   "SELECT COUNT(*) FROM counters FOR UPDATE NOWAIT;"
                                   "ROLLBACK"], capture_output=True, text=True, env=env)
        if r.returncode == 0:
            return False
        if "ERROR 1205" not in r.stderr:  # lock wait timeout: NOWAIT met a lock
            raise AssertionError("mariadb client failed: %s" % r.stderr)
        return True

    def stop_between_transactions(self, proc, timeout=20.0):
        """SIGSTOPs proc (a dispatcher) at a moment it holds no write
        transaction on the store, as a scenario of a paused owner that then
        accepts refunds needs: a process frozen inside one keeps SQLite's
        write lock, and the intake answers 503 store_busy until it resumes
        (docs/design.md, invariant 6)."""
        self._stop_when(proc, False, timeout)

    def stop_inside_a_transaction(self, proc, timeout=20.0):
        """SIGSTOPs proc at a moment some process holds a write transaction
        on the store (while proc is the only writer: inside one of its own)."""
        self._stop_when(proc, True, timeout)

    def _stop_when(self, proc, locked, timeout):
        # Stopped at the wrong moment, proc is resumed and stopped again a
        # few milliseconds later.
        deadline = time.monotonic() + timeout
        while True:
            proc.send_signal(signal.SIGSTOP)
            tgtest.wait_stopped(proc)
            if self.store_write_locked() == locked:
                return
            proc.send_signal(signal.SIGCONT)
            if time.monotonic() > deadline:
                raise AssertionError("pid %d never stopped %s a store transaction"
                                     % (proc.pid, "inside" if locked else "outside"))
            time.sleep(random.uniform(0.001, 0.005))

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
            p.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def log_events(proc, event=None):
    """The JSON log lines of a tollgate process (stderr), optionally one event."""
    import json
    out = []
    for line in proc.stderr_text().splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if event is None or o.get("event") == event:
            out.append(o)
    return out


def started(calls):
    """The calls whose start is on record: handed to the transport, with the
    moment they went on the wire. A claim made ahead and given back, or one
    whose owner was lost (killed) before it ended, has no hand-off: when it
    went out, if it did, is unknown, and its start_mono_ns is the claim's."""
    return [c for c in calls if "handoff_mono_ns" not in c or c["handoff_mono_ns"] is not None]


def starts(calls):
    """Start times (s, monotonic) of the calls whose start is on record, in
    start order."""
    return sorted(c["start_mono_ns"] / 1e9 for c in started(calls))


def min_gap(calls):
    s = starts(calls)
    return min((b - a for a, b in zip(s, s[1:])), default=float("inf"))


def sleep_until(t):
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
