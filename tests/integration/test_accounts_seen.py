"""Seen per account (issue 26, §6): admission and the reads, one account at a time.

One `tollgate serve` with [account.a] and [account.b] at one stub, judged
from outside:
  - admission per account: a is paused (nothing of it drains) and flooded
    with refunds past admission.max_backlog in two batches; a's next refund
    is refused (503 over_capacity, Retry-After, check_back naming a's stats)
    while b keeps accepting, and b's refunds reach the provider and
    succeed. Judged on the store-wide backlog, as before accounts, b's
    refunds would be refused too (a's backlog alone is past the limit). A
    batch naming both is refused whole, nothing of it stored;
  - /metrics has each account's backlog by state (a's past the limit, b's
    empty); /v1/stats, /v1/calls and /v1/manual read one account with ?account=,
    and an account that is not configured is 422 unknown_account naming the
    configured ones, on each;
  - the command line the same: `tollgate calls --account`, `tollgate manual
    list --account`, `tollgate report --account` (the store's timeline of
    one account), and an unknown account is a usage error (2) naming the
    configured ones.
Behaviour only (outcomes, counts, records): labelled parallel.
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

MAX_BACKLOG = 1000
BATCH = 500


def item(op_id, account):
    return {"operation_id": op_id, "payment_id": "pay_" + op_id, "amount": 1500,
            "currency": "TWD", "account": account}


class AccountsSeenTest(unittest.TestCase):
    def get(self, tg, path):
        return tgtest.http_json("GET", tg.api + path, None, tg.headers())

    def batch(self, tg, items):
        return tgtest.http_json("POST", tg.api + "/v1/refunds:batch", {"refunds": items},
                                tg.headers(), timeout=30)

    def cli(self, tg, *args):
        p = subprocess.run([tgtest.binary("tollgate")] + list(args) + ["--config", tg.config],
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    def assert_unknown(self, status, body):
        self.assertEqual((status, body["error"]["code"], body["error"]["field"]),
                         (422, "unknown_account", "account"), body)
        self.assertIn("the accounts are: a, b", body["error"]["message"])

    def test_a_flooded_account_refuses_only_its_own(self):
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url, **{
            "exit": {"starts_per_second": 20},
            "admission": {"max_backlog": MAX_BACKLOG},
            "account.a": {"retry.deadline_s": 3600},
            "account.b": {"retry.deadline_s": 3600},
        }) as tg:
            tg.start("serve")
            st, _, body = tgtest.http_json("POST", tg.api + "/v1/accounts/a",
                                           {"paused": True, "reason": "flood test"},
                                           tg.headers())
            self.assertEqual(st, 200, body)
            time.sleep(2)  # every dispatcher takes a change within a second

            # a: flooded past its limit, nothing of it drains
            for k in range(MAX_BACKLOG // BATCH):
                st, _, body = self.batch(tg, [item("a-%d-%d" % (k, i), "a")
                                              for i in range(BATCH)])
                self.assertEqual(st, 200, body)
                self.assertEqual({r["status"] for r in body["results"]}, {202})
            st, hdrs, body = tg.submit("a-over", account="a")
            self.assertEqual((st, body["error"]["code"]), (503, "over_capacity"), body)
            self.assertGreaterEqual(int(hdrs["retry-after"]), 1)
            self.assertEqual(body["check_back"], "/v1/stats?account=a")
            self.assertGreaterEqual(body["backlog"], MAX_BACKLOG)

            # b: judged by its own backlog, accepted, sent and settled
            ids_b = ["b-%d" % i for i in range(5)]
            for op in ids_b:
                st, _, body = tg.submit(op, account="b")
                self.assertEqual(st, 202, body)
            final = tg.wait_final(ids_b, timeout=60)
            for op in ids_b:
                self.assertEqual(final[op]["state"], "succeeded", final[op])
                self.assertEqual(stub.executions(op), 1, op)
            self.assertFalse([x for x in stub.arrivals()
                              if x["idempotency_key"].startswith("a-")], "a was paused")

            # a batch naming both: refused whole for a, nothing stored
            st, _, body = self.batch(tg, [item("b-mixed", "b"), item("a-mixed", "a")])
            self.assertEqual((st, body["error"]["code"]), (503, "over_capacity"), body)
            self.assertEqual(body["check_back"], "/v1/stats?account=a")
            self.assertEqual(tg.status("b-mixed")[0], 404)

            # the reads, one account at a time
            st, _, sa = self.get(tg, "/v1/stats?account=a")
            self.assertEqual(st, 200, sa)
            self.assertGreaterEqual(sa["admission"]["backlog"], MAX_BACKLOG)
            self.assertFalse(sa["admission"]["would_admit"])
            st, _, sb = self.get(tg, "/v1/stats?account=b")
            self.assertEqual(st, 200, sb)
            self.assertLess(sb["admission"]["backlog"], 10)
            self.assertTrue(sb["admission"]["would_admit"])
            st, _, body = self.get(tg, "/v1/calls?account=b&limit=1000")
            self.assertEqual(st, 200, body)
            self.assertEqual({c["operation_id"] for c in body["calls"]}, set(ids_b))
            st, _, body = self.get(tg, "/v1/calls?account=a")
            self.assertEqual((st, body["calls"]), (200, []), body)
            st, _, body = self.get(tg, "/v1/manual?account=b")
            self.assertEqual((st, body["items"]), (200, []), body)
            for path in ("/v1/stats", "/v1/calls", "/v1/manual"):
                self.assert_unknown(*self.get(tg, path + "?account=zz")[::2])

            # /metrics: each account's backlog by state, from its exit's samples
            def backlog(account, state):
                _, _, raw = tgtest.http_request("GET", tg.api + "/metrics")
                m = re.search(r'^tollgate_account_backlog\{account="%s",state="%s"\} (\d+)$'
                              % (account, state), raw.decode(), re.M)
                return int(m.group(1)) if m else None
            tgtest.wait_until(lambda: (backlog("a", "pending") or 0) >= MAX_BACKLOG,
                              timeout=10, what="a's backlog in /metrics")
            # b's newest sample after its refunds settled (one a second)
            tgtest.wait_until(lambda: backlog("b", "pending") == 0, timeout=10,
                              what="b's backlog in /metrics")
            self.assertEqual(backlog("b", "manual"), 0)
            self.assertGreaterEqual(backlog("a", "pending"), MAX_BACKLOG)

            # the command line
            rc, out, err = self.cli(tg, "calls", "--account", "b")
            self.assertEqual(rc, 0, err)
            self.assertEqual({json.loads(line)["operation_id"] for line in out.splitlines()},
                             set(ids_b))
            rc, out, err = self.cli(tg, "calls", "--account", "a")
            self.assertEqual((rc, out), (0, ""), err)
            rc, out, err = self.cli(tg, "manual", "list", "--account", "a")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["count"], 0)
            page = os.path.join(tg.dir, "b.html")
            rc, out, err = self.cli(tg, "report", "--from", "-10m", "--account", "b",
                                    "--out", page)
            self.assertEqual(rc, 0, err)
            with open(page, encoding="utf-8") as f:
                self.assertIn("Account <b>b</b>", f.read())
            for args in (("calls", "--account", "zz"), ("manual", "list", "--account", "zz"),
                         ("report", "--from", "-10m", "--account", "zz", "--out", page)):
                rc, _, err = self.cli(tg, *args)
                self.assertEqual(rc, 2, (args, err))
                self.assertIn('"zz" is not a configured account; the accounts are: a, b', err,
                              args)


if __name__ == "__main__":
    tgtest.main_unittest()
