"""Acceptance 4 (seed 000, 驗收): first attempts, retries, reconciliation
queries and an operator re-send all in one run — all in the same call log
and matched one for one in the same provider record: no side door.

Driven step by step through the stub's admin API (seconds, not minutes):
  1. provider answers 503 (Retry-After 1): refund `kinds-manual` gets its
     first attempt and one retry (retry.max_attempts = 2, and the 503s
     counted: retry.count_limited, as by default a 503 is given back), then
     goes to manual (attempts exhausted);
  2. provider answers 500 after executing: `kinds-query` ends unknown;
  3. provider fast again: `kinds-query` is reconciled by a query (same key),
     a few plain refunds succeed, and an operator re-sends `kinds-manual`.
`tollgate verify --expect-kinds first,retry,query,manual` then requires each
kind in the call log, and the figures show each one matched at the provider.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accept  # noqa: E402
import tgprovider  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402


class AllKinds(unittest.TestCase):
    @unittest.skipIf(tgprovider.notification_only(),
                     "a notification-only provider (%s) has no query: there is no "
                     "reconciliation query to send, so the four kinds cannot all appear; "
                     "its lost answer is replayed (a retry) and settled by the notification "
                     "(test_profile_adyen)" % tgprovider.PROFILE)
    def test_four_kinds_one_exit(self):
        with tgtest.start_stub("--mode", "unavailable:1", "--query-mode", "fast") as stub, \
                Tollgate(stub.url, retry={"max_attempts": 2, "query_interval_ms": 500,
                                          "count_limited": "true",
                                          "backoff_base_ms": 200, "backoff_min_ms": 100, "backoff_cap_ms": 400}) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("kinds-manual")[0], 202)
            tg.wait_final(["kinds-manual"], timeout=20, states=("manual",))
            stub.set_mode(mode="e500")
            self.assertEqual(tg.submit("kinds-query")[0], 202)
            tgtest.wait_until(lambda: stub.executions("kinds-query") == 1, timeout=10,
                              what="kinds-query executed")
            stub.set_mode(mode="fast")
            plain = ["kinds-plain-%d" % i for i in range(5)]
            for op in plain:
                self.assertEqual(tg.submit(op)[0], 202)
            status, _, body = tgtest.http_json(
                "POST", tg.api + "/v1/manual/kinds-manual/resend",
                {"operator": "oncall-amy", "reason": "provider back, acceptance 4"},
                tg.headers())
            self.assertEqual(status // 100, 2, body)
            final = tg.wait_final(["kinds-manual", "kinds-query"] + plain, timeout=30,
                                  states=("succeeded",))
            self.assertEqual(len(final), 7)
            paths, calls = accept.dump_run(tg, stub, accept.out_dir("s4_kinds"))
            r = accept.assert_verified(self, paths, "--max-attempts", "2", "--count-limited",
                                       "--expect-kinds", "first,retry,query,manual")
            kinds = r["summary"]["kinds"]
            for k in ("first", "retry", "query", "manual"):
                self.assertGreater(kinds[k]["calls"], 0, k)
                self.assertEqual(kinds[k]["arrivals"], kinds[k]["calls"], (k, kinds))
            mine = [c["kind"] for c in sorted(calls, key=lambda c: c["id"])
                    if c["operation_id"] == "kinds-manual"]
            self.assertEqual(mine, ["first", "retry", "manual"])
            self.assertIn("query", [c["kind"] for c in calls
                                    if c["operation_id"] == "kinds-query"])
            self.assertEqual(stub.executions("kinds-manual"), 1)
            self.assertEqual(stub.executions("kinds-query"), 1)


if __name__ == "__main__":
    tgtest.main_unittest()
