"""Database faults under a running exit (issue 7), on a private MariaDB that
this test starts and restarts itself (tgmariadb.py; never the CI's shared
server): a clean server restart, every tollgate connection KILLed from
another client, and a server crash (SIGKILL, InnoDB recovery).

What must hold, judged from outside (the stub's arrivals and ledger,
tollgate's call log): the dispatcher pauses while the database is away (no
call starts without a recorded claim), loses nothing (every accepted refund
ends succeeded), sends nothing twice (each arrival matches one logged start,
each operation executes once), keeps its spacing, and resumes by itself —
the same process, which stands by and takes the exit again when its lock
session dropped.
"""

import collections
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgmariadb  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events, min_gap  # noqa: E402

INTERVAL = 0.2  # 5 starts/s


@unittest.skipUnless(os.environ.get("TG_TEST_MYSQL_URL") and tgmariadb.available(),
                     "MariaDB tests not enabled (TG_TEST_MYSQL_URL unset or no mariadbd)")
class DatabaseFaultsTest(unittest.TestCase):
    def kill_tollgate_sessions(self, db):
        rows = db.sql("SELECT id FROM information_schema.processlist "
                      "WHERE user = '%s'" % db.USER)
        for (conn_id,) in rows:
            try:
                db.sql("KILL %d" % int(conn_id))
            except Exception:
                pass  # it ended on its own meanwhile
        return len(rows)

    def test_restart_kill_and_crash_lose_nothing_send_nothing_twice(self):
        with tgmariadb.PrivateMariaDB() as db, \
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
            # 2. every tollgate session KILLed (API, dispatcher, owner lock)
            n = arrivals()
            self.assertGreaterEqual(self.kill_tollgate_sessions(db), 2)
            resumed_after(n, "resumed after KILL of its connections")
            # 3. a crash
            n = arrivals()
            db.restart(sig=signal.SIGKILL)
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


if __name__ == "__main__":
    tgtest.main_unittest()
