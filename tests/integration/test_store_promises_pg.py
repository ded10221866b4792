"""The PostgreSQL store's promises across processes (issue 29), on the test
server's PostgreSQL (TG_TEST_PG_URL, a fresh database per test; skipped when
the variable is not set).

- The doorbell between processes: `tollgate api` and `tollgate dispatch` run
  as separate processes (as on two machines) sharing one PostgreSQL store.
  An idle dispatcher looks for work by itself only at its housekeeping
  second (exit.idle_poll_max_ms, capped by that second): without a ring, a
  refund waits for that look, 0-1 s, half a second on average. With the
  acceptance's NOTIFY (delivered at its commit) ringing the dispatcher's
  listener, each of six refunds accepted at random moments is on the wire
  within PROMPT_S of its 202. (Without the ring all six would have to land
  in the first half of the second: 1 in 64.)
- Backup and restore the documented way (docs/operating.md, "Backups"):
  `pg_dump` of the store's database while `tollgate serve` writes to it,
  restored with the stock client (psql) into a fresh database; tgbackup.py's
  scenario, which MariaDB's test runs too: the manual case, its calls and its
  audit trail are there as they were, the no-delete triggers refuse a
  DELETE, and the refunds unknown at the dump are reconciled by query with
  the same key, executed once at the provider.
"""

import os
import random
import shutil
import subprocess
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgbackup  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events  # noqa: E402

PG_URL = os.environ.get("TG_TEST_PG_URL", "")
GUARDS = ("account_audit_no_delete", "account_audit_no_truncate", "audit_no_delete",
          "audit_no_truncate", "calls_no_delete",
          "calls_no_truncate", "operations_no_delete", "operations_no_truncate")
# the dispatcher's own look for work: as rarely as it may
SLOW_LOOK = dict(tgbackup.FAST_EXIT, idle_poll_max_ms=60000)
# an acceptance rung across processes is on the wire within this (a NOTIFY
# is delivered in milliseconds; the margin is for a loaded 2-core CI)
PROMPT_S = 0.5
RINGS = 6


def psql(url, sql, stdin=None):
    """psql on a url as an application would use it; returns the rows."""
    argv = ["psql", "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", url]
    r = subprocess.run(argv + ([] if stdin else ["-c", sql]), capture_output=True, text=True,
                       stdin=stdin)
    if r.returncode != 0:
        raise AssertionError("psql failed: %s" % r.stderr)
    return [line.split("\t") for line in r.stdout.splitlines()]


def triggers(url):
    return sorted({r[0] for r in psql(url, "SELECT tgname FROM pg_trigger "
                                           "WHERE NOT tgisinternal")})


@unittest.skipUnless(PG_URL and shutil.which("psql") and shutil.which("pg_dump"),
                     "TG_TEST_PG_URL not set, or no psql/pg_dump")
class StorePromisesPgTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stub = tgtest.start_stub("--mode", "fast", "--retry-after", "none")

    @classmethod
    def tearDownClass(cls):
        cls.stub.close()

    def setUp(self):
        self.stub.set_mode(mode="fast", query_mode="fast")

    def url(self, what):
        return "%s_%s_%d" % (PG_URL, what, os.getpid())

    def on_the_wire_after(self, tg, op):
        """Seconds from the API's 202 for op to its first POST at the stub."""
        st, _, _ = tg.submit(op)
        accepted = time.monotonic()
        self.assertEqual(st, 202)
        tgtest.wait_until(lambda: self.stub.executions(op) >= 1, timeout=90, interval=0.01,
                          what="%s sent" % op)
        return time.monotonic() - accepted

    def test_api_elsewhere_rings_the_dispatcher(self):
        with Tollgate(self.stub.url, store_url=self.url("bell"), exit=SLOW_LOOK,
                      provider=tgbackup.PROVIDER, retry=tgbackup.FAST_RETRY) as tg:
            api = tg.start("api")  # creates the schema; rings, never dispatches
            d = tg.start("dispatch", wait_api=False)
            tgtest.wait_until(lambda: log_events(d, "owner"), timeout=20, what="owner")
            # the new owner's wait for its predecessor's calls
            time.sleep(1.5)
            rng = random.Random()
            late = []
            for i in range(RINGS):
                time.sleep(rng.uniform(0.3, 1.3))  # any moment of the dispatcher's second
                late.append(self.on_the_wire_after(tg, "bell-%d" % i))
            self.assertLess(max(late), PROMPT_S,
                            "the dispatcher was not rung: %s" % ["%.3f" % t for t in late])
            ops = ["bell-%d" % i for i in range(RINGS)]
            final = tg.wait_final(ops, timeout=20)
            self.assertEqual({op: final[op]["state"] for op in final},
                             {op: "succeeded" for op in ops})
            self.assertEqual(api.stop(), 0)
            self.assertEqual(d.stop(), 0)

    def test_dump_while_serving_restores_into_a_fresh_database(self):
        def dump(url, path):
            # one snapshot: pg_dump reads in one repeatable-read transaction
            r = subprocess.run(["pg_dump", "--no-owner", "--no-privileges", "-f", path, url],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)

        def restore(url, path):
            # with the stock client as the application's user
            u = urllib.parse.urlsplit(url)
            psql(urllib.parse.urlunsplit(u._replace(path="/postgres")),
                 "CREATE DATABASE %s" % u.path.lstrip("/"))
            with open(path) as f:
                psql(url, None, stdin=f)

        fresh = self.url("restored")
        tgbackup.dump_while_serving_restores(self, self.stub, self.url("dumped"), fresh, dump,
                                             restore, triggers, GUARDS)
        # the restored no-delete guarantee holds
        with self.assertRaises(AssertionError) as refused:
            psql(fresh, "DELETE FROM operations")
        self.assertIn("prune", str(refused.exception))

if __name__ == "__main__":
    tgtest.main_unittest()
