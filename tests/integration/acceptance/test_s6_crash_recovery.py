"""Acceptance 6 (seed 000, 驗收 — result recovery): the provider records an
accepted refund, tollgate is killed before it records the answer; after a
restart the operation is `unknown`, is reconciled with the same key, and the
provider executed it exactly once.

The kill is the failpoint TG_FAILPOINT=crash_before_settle: the dispatcher
SIGKILLs itself after the provider's 201 arrived and before it is stored.
Only after the killed process is gone does the new dispatcher start; it waits
one call timeout (1 s here, compressed from 3 s), turns the open attempt into
`unknown`, and queries it (same key) instead of sending a second POST.
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accept  # noqa: E402
import tgprovider  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

OP = "crash-0001"


class CrashRecovery(unittest.TestCase):
    @unittest.skipIf(tgprovider.notification_only(),
                     "a notification-only provider (%s) has no query: the successor cannot "
                     "ask instead of sending a second POST; it replays the POST with its key "
                     "(the provider returns the stored answer) and awaits the notification, "
                     "which test_profile_adyen's takeover test judges" % tgprovider.PROFILE)
    def test_killed_before_settle_is_reconciled_once(self):
        with tgtest.start_stub("--mode", "fast", "--query-mode", "fast") as stub, \
                Tollgate(stub.url, provider={"timeout_ms": 1000},
                         retry={"query_interval_ms": 1500}) as tg:
            tg.start("api")
            self.assertEqual(tg.submit(OP)[0], 202)
            d = tg.start("dispatch", env={"TG_FAILPOINT": "crash_before_settle"},
                         wait_api=False)
            self.assertEqual(d.popen.wait(20), -9, d.stderr_text())
            self.assertEqual(stub.executions(OP), 1, "the provider did not execute it")
            status, _, body = tg.status(OP)
            self.assertEqual(body["state"], "in_flight", body)  # nothing was recorded
            # The old process is gone (waited above); now the successor.
            d2 = tg.start("dispatch", wait_api=False)
            seen = set()

            def settled():
                st = tg.status(OP)[2]["state"]
                seen.add(st)
                return st == "succeeded"
            tgtest.wait_until(settled, timeout=20, interval=0.05, what="reconciled")
            # The successor closes the open attempt as unknown before it
            # asks (the query may follow at once, so the state is polled
            # but the call log is the proof).
            self.assertEqual(stub.executions(OP), 1)
            paths, calls = accept.dump_run(tg, stub, accept.out_dir("s6_crash"))
            r = accept.assert_verified(self, paths)
            kinds = [c["kind"] for c in sorted(calls, key=lambda c: c["id"])]
            self.assertEqual(kinds[0], "first")
            self.assertEqual(kinds[1:], ["query"] * (len(kinds) - 1), kinds)
            first = min(calls, key=lambda c: c["id"])
            self.assertEqual(first["class"], "unknown", first)
            self.assertEqual(first["epoch"], min(c["epoch"] for c in calls))
            arrivals = accept.contract_arrivals(stub)
            self.assertEqual({a["idempotency_key"] for a in arrivals if a["method"] == "POST"},
                             {OP})
            self.assertEqual(sum(a["method"] == "POST" for a in arrivals), 1)
            self.assertTrue(any(a["method"] == "GET" and a["path"].endswith("/" + OP)
                                for a in arrivals))
            self.assertEqual(r["summary"]["max_executions"], 1)
            # The successor sent nothing before one call timeout had passed
            # since the killed owner's last start.
            query = [c for c in calls if c["kind"] == "query"][0]
            self.assertGreaterEqual(query["start_wall"] - first["start_wall"], 1000 - 50)
            epochs = sorted({c["epoch"] for c in calls})
            self.assertEqual(len(epochs), 2)
            owner = [e for e in tgtest_log(d2) if e.get("event") == "owner"]
            self.assertTrue(owner)
            d2.stop()


def tgtest_log(proc):
    from tgdaemon import log_events
    return log_events(proc)


if __name__ == "__main__":
    tgtest.main_unittest()
