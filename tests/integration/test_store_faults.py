"""A failing disk and a bad store under a real tollgate (issue 16, section 4).

The SQLite store of `tollgate serve` runs on the I/O-error VFS
(tests/faultvfs, preloaded: tgfaultvfs.py), and the test turns the disk
full or failing while refunds come in:

- a full disk: intake answers 503 store_full with Retry-After and a JSON
  error (never 500 internal), nothing of the refused refund is stored,
  reads still answer, the process stays up, and once space is back the same
  request is accepted and the exit finishes it;
- I/O errors in the middle of a load (a client that sends the same request
  again after a 503, as the answer says): the exit pauses and resumes in the
  same process; or the process is killed while the disk fails. Either way,
  judged afterwards by a fresh tollgate without the VFS: every refund
  answered 202 is there and ends succeeded, executed once at the provider,
  every request the provider saw has its call row (record before send), and
  the answers 503 were store_unavailable;
- a read-only store (a read-only tmpfs when the test runs as root, else
  permissions) refuses to start with a message naming the store, not the
  API's address, and the port stays free;
- a corrupted file (garbage, truncated, one damaged page) and one of a newer
  schema refuse to start with a message, exit status 1, no crash.

The full sweep of N (the disk failing from the N-th write on, over a whole
run) is tests/unit/test_disk_faults.c, in virtual time; this file is the
real process, its API and its messages.
"""

import collections
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events, min_gap  # noqa: E402
from tgfaultvfs import FaultDisk  # noqa: E402

EXIT = {"starts_per_second": 20, "max_in_flight": 4}


def submit_until_accepted(tg, op, answers, stop):
    """A careful client: sends the same request again after every 503 (and a
    refused connection) until it is accepted; notes every answer."""
    while not stop.is_set():
        try:
            status, headers, body = tg.submit(op)
        except OSError as e:
            answers.append((op, "conn", str(e)))
            time.sleep(0.05)
            continue
        answers.append((op, status, body, headers))
        if status in (200, 202):
            return True
        time.sleep(0.05)
    return False


class StoreFaultsTest(unittest.TestCase):
    def setUp(self):
        if os.environ.get("TG_TEST_STORE") == "mysql":
            self.skipTest("the SQLite store's disk (MariaDB: test_db_faults.py)")

    def fresh_judge(self, tg, stub, accepted, offered=()):
        """kill -9 of every tollgate, then a new one without the VFS: what
        the file holds is what counts. accepted: answered 202/200; offered:
        sent but maybe refused (a 503 may come after a COMMIT whose sync
        failed, and such a refund may be there after a restart: the answer
        asks for the same request again, which finds it)."""
        for p in tg.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.popen.wait(10)
        tg.start("serve")
        stored = {op for op in set(offered) | set(accepted) if tg.status(op)[0] == 200}
        self.assertEqual(set(accepted) - stored, set(), "accepted, and gone")
        final = tg.wait_final(sorted(stored), timeout=60)
        self.assertEqual({r["state"] for r in final.values()}, {"succeeded"}, final)
        tgtest.wait_until(stub.idle, timeout=20, what="nothing open at the stub")
        ledger = stub.ledger()["operations"]
        for op in stored:
            self.assertEqual(ledger.get(op, {}).get("executions", 0), 1, op)
        self.assertEqual(set(ledger) - stored, set(), "executed, never stored")
        log = tg.calls()
        self.assertGreaterEqual(min_gap(log), 1 / EXIT["starts_per_second"] - 1e-9)
        calls = collections.Counter(c["request_id"] for c in log)
        posts = collections.Counter()
        for a in stub.arrivals():
            if not a["path"].startswith("/v1/"):
                continue
            self.assertEqual(calls.get(a.get("request_id"), 0), 1,
                             "arrival %r has no call row" % a)
            if a["method"] == "POST":
                posts[a["idempotency_key"]] += 1
        self.assertLessEqual(max(posts.values()), 3)
        print("%s: %d refunds, lost 0, executed twice 0, unexpected 0, most POSTs for one key "
              "%d, spacing violations 0" % (self.id().split(".")[-1], len(stored),
                                             max(posts.values())), file=sys.stderr)

    def test_full_disk_answers_503_and_stores_nothing(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, exit=EXIT) as tg:
            disk = FaultDisk(tg.dir)
            p = tg.start("serve", env=disk.env())
            self.assertEqual(tg.submit("full-0")[0], 202)
            tg.wait_final(["full-0"], timeout=20)

            for kind, code, retry in (("full", "store_full", "30"),
                                      ("ioerr", "store_unavailable", "2")):
                disk.fail(kind)
                status, headers, body = tg.submit("full-" + kind)
                self.assertEqual(status, 503, body)
                self.assertEqual(body["error"]["code"], code, body)
                self.assertTrue(body["error"]["retryable"])
                self.assertEqual(headers.get("retry-after"), retry)
                self.assertIn("same request again", body["error"]["message"])
                # nothing half-stored, and reads still answer
                self.assertEqual(tg.status("full-" + kind)[0], 404)
                self.assertEqual(tg.status("full-0")[2]["state"], "succeeded")
                self.assertGreater(disk.counts()[1], 0)
                self.assertIsNone(p.poll(), p.stderr_text()[-2000:])
                disk.heal()
                self.assertEqual(tg.submit("full-" + kind)[0], 202)
            final = tg.wait_final(["full-full", "full-ioerr"], timeout=30)
            self.assertEqual({r["state"] for r in final.values()}, {"succeeded"})
            self.assertTrue(log_events(p, "api_store_error"))
            self.assertIsNone(p.poll())
            self.fresh_judge(tg, stub, {"full-0", "full-full", "full-ioerr"})

    def run_load_with_failing_disk(self, crash):
        ops = ["io-%02d" % i for i in range(12)]
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, exit=EXIT, provider={"timeout_ms": 1000}) as tg:
            disk = FaultDisk(tg.dir)
            p = tg.start("serve", env=disk.env())
            answers, stop = [], threading.Event()
            accepted = set()
            # the first four go in on a good disk; the rest only once it is
            # failing, so that intake meets the failing disk (a client that
            # had sent all twelve before it failed would never see a 503)
            failing = threading.Event()

            def client():
                for i, op in enumerate(ops):
                    if i == 4:
                        failing.wait(60)
                    if submit_until_accepted(tg, op, answers, stop):
                        accepted.add(op)
            t = threading.Thread(target=client, daemon=True)
            t.start()
            try:
                tgtest.wait_until(lambda: len(accepted) >= 4, timeout=20, what="first refunds")
                # the disk fails under the running exit, for a while
                disk.fail("ioerr")
                tgtest.wait_until(lambda: disk.counts()[1] >= 5, timeout=20,
                                  what="writes failing")
                failing.set()
                tgtest.wait_until(lambda: any(a[1] == 503 for a in answers), timeout=20,
                                  what="an intake refused")
                self.assertIsNone(p.poll(), "the process died on a failing disk:\n"
                                  + p.stderr_text()[-3000:])
                if crash:
                    p.send_signal(signal.SIGKILL)
                    p.popen.wait(10)
                    stop.set()
                    t.join(10)
                else:
                    time.sleep(0.5)  # the scenario: the disk stays bad a while
                    disk.heal()
                    t.join(60)
                    self.assertEqual(accepted, set(ops))
                    final = tg.wait_final(ops, timeout=60)
                    self.assertEqual({r["state"] for r in final.values()}, {"succeeded"})
                    self.assertIsNone(p.poll())
                    self.assertTrue(log_events(p, "exit_paused_store")
                                    or log_events(p, "claim_failed"), "the exit never paused")
            finally:
                stop.set()
                failing.set()
            refused = [a for a in answers if a[1] not in (200, 202, "conn")]
            self.assertTrue(refused)
            for a in refused:
                self.assertEqual(a[1], 503, a)
                self.assertEqual(a[2]["error"]["code"], "store_unavailable", a)
                self.assertEqual(a[3].get("retry-after"), "2", a)
            self.fresh_judge(tg, stub, accepted, ops)

    def test_slow_disk_keeps_the_rate(self):
        """Every sync of the dispatcher's disk takes 40 ms longer, most of a
        slot at 20/s: the claims are committed ahead by the store's own
        thread, so the starts keep the rate (a claim committed at its slot
        would make every start 40 ms late: about 11 a second)."""
        n, rate = 40, 20.0
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url,
                         exit={"starts_per_second": rate, "max_in_flight": 4,
                               "spacing_margin_us": 0},
                         admission={"enabled": "false"}) as tg:
            disk = FaultDisk(tg.dir)
            disk.slow_sync(40)
            tg.start("api")  # its own disk is not slowed: intake is not judged here
            ids = ["slowdisk-%03d" % i for i in range(n)]
            for op in ids:
                status, _, body = tg.submit(op)
                self.assertEqual(status, 202, body)
            tg.start("dispatch", env=disk.env())
            done = tg.wait_final(ids, timeout=60)
            self.assertEqual({rec["state"] for rec in done.values()}, {"succeeded"}, done)
            self.assertGreater(disk.counts()[0], 0)  # the VFS was under the dispatcher
            calls = tg.calls()
            self.assertEqual(len(calls), n)
            starts = sorted(c["start_mono_ns"] for c in calls)
            mean_gap_ms = (starts[-1] - starts[0]) / (n - 1) / 1e6
            self.assertGreaterEqual(mean_gap_ms, 1000 / rate)
            self.assertLess(mean_gap_ms, 1.15 * 1000 / rate,
                            "starts %.1f ms apart on average on a slow disk" % mean_gap_ms)

    def test_io_errors_under_load_pause_and_resume(self):
        self.run_load_with_failing_disk(crash=False)

    def test_io_errors_then_kill_lose_nothing(self):
        self.run_load_with_failing_disk(crash=True)

    def start_refused(self, tg, command="serve"):
        """Starts a daemon command that must refuse: its status and stderr."""
        r = subprocess.run([tgtest.binary("tollgate"), command, "--config", tg.config],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=30)
        return r.returncode, r.stderr

    def assert_names_the_store(self, tg, rc, err, words):
        self.assertEqual(rc, 1, err)  # an exit, not a signal
        self.assertIn(tg.db, err)
        self.assertIn(words, err)
        self.assertNotIn("cannot start the API", err)
        self.assertNotIn("127.0.0.1:%d" % tg.api_port, err)
        with socket.socket() as s:  # the port was never the problem
            s.bind(("127.0.0.1", tg.api_port))

    def read_only_dir(self, where):
        """A folder that cannot be written, as the test can make one: a
        read-only tmpfs (root), else permissions; None when neither."""
        if os.geteuid() == 0:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", where],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                self.addCleanup(subprocess.run, ["umount", "-l", where])
                return lambda ro: subprocess.run(
                    ["mount", "-o", "remount,%s" % ("ro" if ro else "rw"), where], check=True)
            return None
        return lambda ro: [os.chmod(os.path.join(where, n), 0o444 if ro else 0o644)
                           for n in os.listdir(where)] + [os.chmod(where, 0o555 if ro else 0o755)]

    def test_read_only_store_refuses_to_start_naming_it(self):
        with tgtest.start_stub("--mode", "fast") as stub:
            base = tempfile.mkdtemp(prefix="tg-ro-")
            self.addCleanup(shutil.rmtree, base, True)
            where = os.path.join(base, "store")
            os.mkdir(where)
            set_ro = self.read_only_dir(where)
            if set_ro is None:
                self.skipTest("cannot make a read-only folder here (mount refused)")
            tg = Tollgate(stub.url, store_url="sqlite://" + os.path.join(where, "tg.db"))
            tg.db = os.path.join(where, "tg.db")
            with tg:
                # a store left clean (stopped), then one a kill -9 left with
                # its -wal and -shm: SQLite opens both read-only without a word
                for left in ("stopped", "killed"):
                    set_ro(False)
                    p = tg.start("serve")
                    self.assertEqual(tg.submit("ro-" + left)[0], 202)
                    if left == "killed":
                        p.send_signal(signal.SIGKILL)
                        p.popen.wait(10)
                    else:
                        self.assertEqual(p.stop(), 0)
                    set_ro(True)
                    for command in ("serve", "dispatch", "api"):
                        rc, err = self.start_refused(tg, command)
                        self.assert_names_the_store(tg, rc, err, "read-only")
                set_ro(False)
                tg.start("serve")
                final = tg.wait_final(["ro-stopped", "ro-killed"], timeout=30)
                self.assertEqual({r["state"] for r in final.values()}, {"succeeded"})

    def test_corrupted_store_refuses_to_start(self):
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
            p = tg.start("api")  # rows enough for a b-tree of a few pages
            ops = ["cor-%03d" % i for i in range(150)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            self.assertEqual(p.stop(), 0)
            good = tg.db + ".good"
            shutil.copyfile(tg.db, good)
            page = 4096
            size = os.path.getsize(good)
            self.assertGreater(size, 20 * page)

            def damage(how):
                shutil.copyfile(good, tg.db)
                for suffix in ("-wal", "-shm"):
                    if os.path.exists(tg.db + suffix):
                        os.unlink(tg.db + suffix)
                if how == "newer":  # whole, but of a schema this build does not know
                    import sqlite3
                    db = sqlite3.connect(tg.db)
                    db.execute("PRAGMA user_version = 999")
                    db.close()
                    return
                with open(tg.db, "r+b") as f:
                    if how == "garbage":
                        f.write(os.urandom(size))
                    elif how == "truncated":
                        f.truncate(size // 3)
                    else:  # one page of the operations table's b-tree
                        f.seek(page * (leaf_page() - 1))
                        f.write(os.urandom(page))

            def leaf_page():
                import sqlite3
                db = sqlite3.connect(good)
                try:
                    rows = db.execute("SELECT pageno FROM dbstat WHERE name = 'operations' "
                                      "AND pagetype = 'leaf' ORDER BY pageno").fetchall()
                except sqlite3.Error:
                    rows = []
                db.close()
                return rows[len(rows) // 2][0] if rows else size // page // 2

            for how, words in (("garbage", "not an SQLite database"),
                               ("truncated", "corrupted"),
                               ("page", "the file is corrupted (PRAGMA quick_check"),
                               ("newer", "written by a newer tollgate")):
                damage(how)
                for command in ("serve", "dispatch"):
                    rc, err = self.start_refused(tg, command)
                    self.assert_names_the_store(tg, rc, err, words)
                    if how != "newer":
                        self.assertIn("backup", err)
            shutil.copyfile(good, tg.db)
            tg.start("api")
            self.assertEqual(tg.status(ops[-1])[2]["state"], "pending")

    def test_a_busy_port_is_named_as_the_api(self):
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
            with socket.socket() as s:
                s.bind(("127.0.0.1", tg.api_port))
                s.listen(1)
                rc, err = self.start_refused(tg)
            self.assertEqual(rc, 1, err)
            self.assertIn("cannot start the API on 127.0.0.1:%d" % tg.api_port, err)


# The methods that judge behaviour only (tests/CMakeLists.txt, TG_IT_SPLIT):
# answers (503 with its code and Retry-After), what is stored and what the
# provider executed, judged afterwards by a fresh tollgate, messages and exit
# codes of refused starts; the one time they check is the pacer's gap in
# tollgate's own call log (fresh_judge), a floor load can only widen. Their
# waits are deadlines for events (wait_until), not judged figures. They run
# in it.test_store_faults.parallel. test_slow_disk_keeps_the_rate judges the
# start rate (a mean gap under 1.15 x the slot) and runs in
# it.test_store_faults.serial, alone.
BEHAVIOUR_ONLY = (
    "test_full_disk_answers_503_and_stores_nothing",
    "test_io_errors_under_load_pause_and_resume",
    "test_io_errors_then_kill_lose_nothing",
    "test_read_only_store_refuses_to_start_naming_it",
    "test_corrupted_store_refuses_to_start",
    "test_a_busy_port_is_named_as_the_api",
)


if __name__ == "__main__":
    tgtest.main_unittest(parallel=BEHAVIOUR_ONLY)
