"""Database faults under a running exit (issue 29: test_db_faults_mariadb.py on
PostgreSQL), on a private PostgreSQL cluster that this test starts and
restarts itself (tgpg.py; never the suite's shared server): a clean server
restart, every tollgate session ended by pg_terminate_backend from another
client, and a server crash (an immediate shutdown: WAL recovery on start).

What must hold, judged from outside (the stub's arrivals and ledger,
tollgate's call log): the dispatcher pauses while the database is away (no
call starts without a recorded claim), loses nothing (every accepted refund
ends succeeded), sends nothing twice (each arrival matches one logged start,
each operation executes once), keeps its spacing, and resumes by itself —
the same process, which stands by and takes the exit again when its lock
session dropped.

The second test does it under load (issue 16, section 4): `tollgate serve`
at 20 starts/s while a client keeps sending new refunds (and the same one
again after any 503, as the answer asks), and the server is crashed, then
restarted cleanly, each time in the middle of a claim: another session holds
the row of exit_shares that a claim reads first, the dispatcher's claim
transaction waits on it, and only then does the server go. Intake answers
503 store_unavailable or store_busy with Retry-After while the server is
away, never 500; everything answered 202 ends succeeded, executed once.
"""

import collections
import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgpg  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events, min_gap  # noqa: E402

INTERVAL = 0.2  # 5 starts/s


@unittest.skipUnless(os.environ.get("TG_TEST_PG_URL") and tgpg.available(),
                     "PostgreSQL tests not enabled (TG_TEST_PG_URL unset or no initdb)")
class DatabaseFaultsTest(unittest.TestCase):
    def kill_tollgate_sessions(self, db):
        rows = db.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE usename = '%s'" % db.USER)
        return len(rows)

    def test_restart_kill_and_crash_lose_nothing_send_nothing_twice(self):
        with tgpg.PrivatePostgres() as db, \
                tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, store_url=db.url("tollgate_faults"),
                         provider={"timeout_ms": 1000}) as tg:
            tg.start("api")
            d = tg.start("dispatch", wait_api=False)
            ops = ["dbf-%02d" % i for i in range(45)]
            for op in ops:
                status, _, body = tg.submit(op)
                self.assertEqual(status, 202, body)

            def arrivals():
                return len([a for a in stub.arrivals() if a["path"].startswith("/v1/")])

            def resumed_after(n, what):
                tgtest.wait_until(lambda: arrivals() >= n + 4, timeout=30, interval=0.1,
                                  what=what)

            tgtest.wait_until(lambda: arrivals() >= 6, timeout=15, what="first sends")
            # 1. a clean restart, down for a second
            n = arrivals()
            db.restart(down_s=1.0)
            resumed_after(n, "resumed after a server restart")
            # 2. every tollgate session ended (API, dispatcher, owner lock)
            n = arrivals()
            self.assertGreaterEqual(self.kill_tollgate_sessions(db), 2)
            resumed_after(n, "resumed after its sessions were ended")
            # 3. a crash
            n = arrivals()
            db.restart(crash=True)
            resumed_after(n, "resumed after a server crash")

            final = tg.wait_final(ops, timeout=90)
            self.assertIsNone(d.poll(), "the dispatcher exited instead of standing by:\n"
                              + d.stderr_text()[-3000:])
            self.assertEqual({r["state"] for r in final.values()}, {"succeeded"}, final)
            self.assertGreaterEqual(len(log_events(d, "rejoin")), 2,
                                    "the lock session was lost at least twice")

            calls = tg.calls()
            log = collections.Counter(c["request_id"] for c in calls)
            posts = collections.Counter()
            for a in stub.arrivals():
                if not a["path"].startswith("/v1/"):
                    continue
                self.assertEqual(log.get(a.get("request_id"), 0), 1,
                                 "arrival %r has no single logged start" % a)
                if a["method"] == "POST":
                    posts[a["idempotency_key"]] += 1
            self.assertEqual(set(posts), set(ops))  # one key per operation
            ledger = stub.ledger()["operations"]
            for op in ops:
                self.assertEqual(ledger.get(op, {}).get("executions", 0), 1, op)
            self.assertGreaterEqual(min_gap(calls), INTERVAL - 1e-9)

    def hold_exit_shares(self, db, name):
        """A superuser session that holds every row of exit_shares (FOR
        UPDATE) until the server goes: a claim's first read (FOR SHARE)
        waits on it."""
        p = db.session(name)
        p.stdin.write("BEGIN; SELECT share FROM exit_shares FOR UPDATE;\n")
        p.stdin.flush()
        return p

    def test_server_restart_mid_claim_under_load_loses_nothing(self):
        name = "tollgate_faults_load"
        with tgpg.PrivatePostgres() as db, \
                tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, store_url=db.url(name),
                         exit={"starts_per_second": 20, "max_in_flight": 4},
                         provider={"timeout_ms": 1000}) as tg:
            serve = tg.start("serve")
            ops = ["load-%03d" % i for i in range(90)]
            answers, accepted, stop = [], set(), threading.Event()

            def client():
                for op in ops:
                    while not stop.is_set():
                        try:
                            status, headers, body = tg.submit(op)
                        except OSError as e:
                            answers.append((op, "conn", str(e), {}))
                            time.sleep(0.05)
                            continue
                        answers.append((op, status, body, headers))
                        if status in (200, 202):
                            accepted.add(op)
                            break
                        time.sleep(0.05)
                    time.sleep(0.03)  # about 30 new refunds a second
            t = threading.Thread(target=client, daemon=True)
            t.start()

            def arrivals():
                return len([a for a in stub.arrivals() if a["path"].startswith("/v1/")])
            try:
                for crash in (True, False):
                    n = arrivals()
                    tgtest.wait_until(lambda: arrivals() >= n + 5, timeout=30,
                                      what="the exit working")
                    holder = self.hold_exit_shares(db, name)
                    try:
                        def claim_waits():
                            # the claim's first statement is running: blocked
                            # (it takes microseconds otherwise)
                            return db.sql(
                                "SELECT count(*) FROM pg_stat_activity WHERE usename = '%s' "
                                "AND state = 'active' AND query LIKE "
                                "'SELECT share FROM exit_shares%%'" % db.USER)[0][0] != "0"
                        # The dispatcher's lock waits are 200 ms here
                        # (DISPATCH_BUSY_TIMEOUT_MS, honoured to the ms by
                        # lock_timeout; MariaDB rounds them up to 1 s), then
                        # its transaction is retried after a pause: the
                        # server goes the moment a wait is seen, inside it.
                        tgtest.wait_until(claim_waits, timeout=20, interval=0.01,
                                          what="a claim waiting")
                        db.restart(crash=crash)  # the claim is mid-transaction
                    finally:
                        holder.kill()
                        holder.wait()
                        holder.stdin.close()
                    n = arrivals()
                    tgtest.wait_until(lambda: arrivals() >= n + 5, timeout=40, interval=0.1,
                                      what="resumed after the server came back")
                t.join(120)
                self.assertEqual(accepted, set(ops))
            finally:
                stop.set()
            final = tg.wait_final(ops, timeout=90)
            self.assertIsNone(serve.poll(), serve.stderr_text()[-3000:])
            self.assertEqual({r["state"] for r in final.values()}, {"succeeded"}, final)
            self.assertGreaterEqual(len(log_events(serve, "rejoin")), 2)
            refused = [a for a in answers if a[1] not in (200, 202)]
            print("intake answers: %d, refused: %d" % (len(answers), len(refused)),
                  file=sys.stderr)
            self.assertTrue(refused, "no intake met the database away")
            for a in refused:
                self.assertNotEqual(a[1], "conn", a)  # the API process stayed up
                self.assertEqual(a[1], 503, a)
                self.assertIn(a[2]["error"]["code"], ("store_unavailable", "store_busy"), a)
                self.assertIn("retry-after", a[3], a)

            tgtest.wait_until(stub.idle, timeout=20, what="nothing open at the stub")
            calls = tg.calls()
            log = collections.Counter(c["request_id"] for c in calls)
            posts = collections.Counter()
            for a in stub.arrivals():
                if not a["path"].startswith("/v1/"):
                    continue
                self.assertEqual(log.get(a.get("request_id"), 0), 1,
                                 "arrival %r has no single logged start" % a)
                if a["method"] == "POST":
                    posts[a["idempotency_key"]] += 1
            self.assertEqual(set(posts), set(ops))
            self.assertLessEqual(max(posts.values()), 3)
            print("restart mid-claim under load: %d refunds, lost 0, executed twice 0, "
                  "unexpected 0, most POSTs for one key %d" % (len(ops), max(posts.values())),
                  file=sys.stderr)
            ledger = stub.ledger()["operations"]
            for op in ops:
                self.assertEqual(ledger.get(op, {}).get("executions", 0), 1, op)
            self.assertGreaterEqual(min_gap(calls), 1 / 20 - 1e-9)


if __name__ == "__main__":
    tgtest.main_unittest()
