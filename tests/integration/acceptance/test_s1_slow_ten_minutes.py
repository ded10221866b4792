"""Acceptance 1 (seed 000, 驗收要看供應商變慢的那十分鐘): the slow ten minutes.
The provider goes fast -> 3 s delays -> commit-then-drop -> explicit reject
-> recovery, in order, while refunds keep arriving; `tollgate verify`
passes on the run, and each phase's POSTs are classified as they must be:
fast -> succeeded, 3 s delays -> unknown (timed out; reconciled by a query
with the same key), drop -> unknown (executed, answer lost; reconciled),
reject -> rejected (final, not retried), recovery -> succeeded.

Compressed: the stub's timeline is the seed's 'fast 1m; slow:3000 5m; drop
2m; reject 1m; fast' at --time-scale 0.05 (ten minutes in ~30 s; the 3 s
delay itself is kept). The call timeout is 2.5 s so that a 3 s answer is
a timeout every time (at exactly 3 s the class would be a coin toss).
Refunds arrive at 3/s. The run's report (report.html, with the timeline's
phase bands) is written to <build>/acceptance/s1_slow/ (s1_slow-mysql, s1_slow-pg,
s1_slow-mtls-stripe for the other entries: accept.out_dir) or $TG_REPORT_OUT;
scripts/replay-incident.sh runs this scenario with one command.
"""

import collections
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accept  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

TIMELINE = "fast 1m; slow:3000 5m; drop 2m; reject 1m; fast"
SCALE = float(os.environ.get("TG_TIME_SCALE", "0.05"))
ARRIVE = 3.0
EXPECT = {0: {"succeeded"}, 1: {"unknown"}, 2: {"unknown"}, 3: {"rejected"}, 4: {"succeeded"}}


class SlowTenMinutes(unittest.TestCase):
    def test_slow_ten_minutes(self):
        timed_s = (60 + 300 + 120 + 60) * SCALE
        with tgtest.start_stub("--timeline", TIMELINE, "--time-scale", str(SCALE),
                               "--query-mode", "fast") as stub, \
                Tollgate(stub.url, provider={"timeout_ms": 2500},
                         retry={"query_interval_ms": 1000},
                         admission={"enabled": "false"}) as tg:
            tg.start("serve")
            t0 = time.monotonic()
            ops, i = [], 0
            while time.monotonic() - t0 < timed_s + 3:
                tgtest_sleep_until(t0 + i / ARRIVE)
                op = "slow10-%04d" % i
                self.assertEqual(tg.submit(op)[0], 202)
                ops.append(op)
                i += 1
            final = tg.wait_final(ops, timeout=120)
            out = os.environ.get("TG_REPORT_OUT") or accept.out_dir("s1_slow")
            os.makedirs(out, exist_ok=True)
            paths, calls = accept.dump_run(tg, stub, out)
            accept.assert_verified(self, paths)

            arrivals = {a["request_id"]: a for a in accept.contract_arrivals(stub)}
            seen = collections.defaultdict(collections.Counter)
            for c in calls:
                if c["kind"] == "query":
                    continue
                a = arrivals[c["request_id"]]
                seen[a["phase"]][c["class"]] += 1
                self.assertIn(c["class"], EXPECT[a["phase"]],
                              "phase %d (%s): call %r" % (a["phase"], a["mode"], c))
            for phase in EXPECT:
                self.assertTrue(seen[phase], "no POST arrived in phase %d: %r" % (phase, seen))
            rejected = {c["operation_id"] for c in calls if c["class"] == "rejected"}
            for op, rec in final.items():
                self.assertEqual(rec["state"], "rejected" if op in rejected else "succeeded",
                                 (op, rec["state"]))
            self.assertTrue(any(c["kind"] == "query" for c in calls))
            ledger = stub.ledger()["operations"]
            self.assertLessEqual(max(v["executions"] for v in ledger.values()), 1)
            p = accept.report(paths, os.path.join(out, "report.html"),
                              "--timeline", TIMELINE, "--time-scale", str(SCALE),
                              "--title", "The slow ten minutes (x%g)" % SCALE)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(out, "report.html")) as f:
                html = f.read()
            self.assertIn("Starts/s and closes/s", html)
            self.assertIn("slow:3000", html)  # phase bands
            self.assertNotIn("<script", html)
            self.assertNotIn("https://", html)
            print("\nscenario 1: %d refunds, %d calls, POST classes by phase %s; report %s"
                  % (len(ops), len(calls), {k: dict(v) for k, v in sorted(seen.items())},
                     os.path.join(out, "report.html")), file=sys.stderr)


def tgtest_sleep_until(t):
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)


if __name__ == "__main__":
    tgtest.main_unittest()
