"""Accounts spread over dispatcher processes (issue 26, §4).

Six accounts, one `tollgate api` and three `tollgate dispatch` processes on one
store ([dispatch] max_accounts = 3), all accounts at one stub (each account's
refunds carry its name in their ids, so the stub's arrivals tell them apart).
Judged from outside:
  - the first two dispatchers own three accounts each, in the config's order
    as far as they are free; the third owns none and stands by;
  - kill -9 of one owner: the standby takes its three accounts over after
    the takeover wait, the survivor keeps its own;
  - every refund succeeds, each executed once at the provider, and each
    account's POSTs at the door are never closer than its spacing (whole
    milliseconds), across the takeover too: never two exits for one account;
  - --accounts names the accounts a process serves (an unknown one is a usage
    error naming the configured ones).

On SQLite by default; TG_TEST_STORE=mysql or pg runs it on that server.
"""

import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events  # noqa: E402

ACCOUNTS = ["a1", "a2", "a3", "a4", "a5", "a6"]
RATE = 5.0
PER_ACCOUNT = 8


def owned(proc):
    """The accounts a dispatcher opened (its exit_open lines), in order."""
    return [e["account"] for e in log_events(proc, "exit_open")]


class AccountsSpreadTest(unittest.TestCase):
    def daemon(self, stub):
        sections = {"exit": {"starts_per_second": RATE},
                    "provider": {"timeout_ms": 1000},
                    "dispatch": {"max_accounts": 3}}
        for a in ACCOUNTS:
            sections["account." + a] = {"retry.deadline_s": 600}
        return Tollgate(stub.url, **sections)

    def submit(self, tg, account, op_id):
        status, _, body = tg.submit(op_id, account=account)
        self.assertEqual(status, 202, body)

    def test_three_dispatchers_six_accounts_one_killed(self):
        with tgtest.start_stub("--mode", "fast") as stub, self.daemon(stub) as tg:
            tg.start("api")
            d1 = tg.start("dispatch")
            tgtest.wait_until(lambda: len(owned(d1)) == 3, timeout=30, what="d1 owns three")
            d2 = tg.start("dispatch")
            tgtest.wait_until(lambda: len(owned(d2)) == 3, timeout=30, what="d2 owns three")
            d3 = tg.start("dispatch")
            tgtest.wait_until(lambda: log_events(d3, "standby"), timeout=30,
                              what="d3 stands by")
            self.assertEqual(set(owned(d1)) | set(owned(d2)), set(ACCOUNTS))
            self.assertFalse(set(owned(d1)) & set(owned(d2)))
            self.assertEqual(owned(d3), [])

            ids = {a: ["%s-op-%02d" % (a, i) for i in range(PER_ACCOUNT)] for a in ACCOUNTS}
            for i in range(PER_ACCOUNT):
                for a in ACCOUNTS:
                    self.submit(tg, a, ids[a][i])
            time.sleep(0.5)  # d1's accounts are sending
            d1_accounts = set(owned(d1))
            d1.send_signal(signal.SIGKILL)
            tgtest.wait_until(lambda: d1.poll() is not None, what="d1 gone")
            tgtest.wait_until(lambda: set(owned(d3)) == d1_accounts, timeout=30,
                              what="d3 took d1's accounts")
            final = tg.wait_final([op for a in ACCOUNTS for op in ids[a]], timeout=120)
            for op, rec in final.items():
                self.assertEqual(rec["state"], "succeeded", rec)
            self.assertEqual(set(owned(d2)), set(ACCOUNTS) - d1_accounts)  # kept its own

            arrivals = stub.arrivals()
            for a in ACCOUNTS:
                for op in ids[a]:
                    self.assertEqual(stub.executions(op), 1, op)
                posts = sorted(x["mono_ns"] // 1_000_000 for x in arrivals
                               if x["method"] == "POST" and x["idempotency_key"].startswith(a + "-"))
                gaps = [b - c for c, b in zip(posts, posts[1:])]
                self.assertGreaterEqual(min(gaps), 1000 / RATE, (a, gaps))
            # the takeover waited for d1's calls: d3's log says so
            self.assertTrue(log_events(d3, "takeover_wait"))
            for p in (d2, d3):
                p.stop()
                self.assertEqual(p.returncode, 0, p.stderr_text()[-2000:])

    def test_accounts_option(self):
        with tgtest.start_stub("--mode", "fast") as stub, self.daemon(stub) as tg:
            p = tg.start("dispatch", "--accounts", "a2,nope")
            tgtest.wait_until(lambda: p.poll() is not None, what="refused")
            self.assertEqual(p.returncode, 2)
            self.assertIn('"nope" is not an account of the config (it has: a1, a2, a3, a4, a5, '
                          'a6)', p.stderr_text())
            p = tg.start("dispatch", "--accounts", "a5,a2")
            tgtest.wait_until(lambda: len(owned(p)) == 2, timeout=30, what="two accounts")
            self.assertEqual(sorted(owned(p)), ["a2", "a5"])
            p.stop()
            self.assertEqual(p.returncode, 0)


# The methods that judge behaviour only (tests/CMakeLists.txt, TG_IT_SPLIT):
# `dispatch --accounts` refuses an account the config lacks (exit 2, the
# message naming the config's accounts) and owns exactly the accounts named;
# its wait is a deadline for the ownership, not a judged figure. It runs in
# the *.parallel entries, beside other tests. The three dispatchers' run
# judges each account's spacing at the stub's door and runs in *.serial,
# alone.
BEHAVIOUR_ONLY = ("test_accounts_option",)


if __name__ == "__main__":
    tgtest.main_unittest(parallel=BEHAVIOUR_ONLY)
