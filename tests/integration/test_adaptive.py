"""The adaptive exit (issue 27 §2): exit.adaptive = on against a provider
whose true capacity is below the configured ceiling (tollgate-stub
--capacity: a token bucket answering 429 without Retry-After past it).

- 45 refunds at 3/s true capacity under a 10/s ceiling: all succeed, in
  less than 1.5x the 15 s the capacity allows (the bench, bench_capacity.py,
  measured 1.2x on 60), meeting at most a fifth of the refusals the fixed exit
  meets (the fixed exit met 58 on 60 refunds: one a refund, nearly);
- one 503 without Retry-After on a healthy provider: the rate is cut once
  and is back at the ceiling within 10 s (K = 6.7 s), not minutes;
- the rate in force and the cuts are in /metrics.

Margins are for a noisy 2-core machine; the test runs alone (serial).
"""

import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402


def metric(tg, name, account="default"):
    """The exit's series of the one account (its `account` label)."""
    status, _, body = tgtest.http_request("GET", tg.api + "/metrics", None, tg.headers())[:3]
    text = body.decode() if isinstance(body, bytes) else body
    m = re.search(r'^%s\{account="%s"\} (\S+)$' % (re.escape(name), re.escape(account)), text,
                  re.M)
    return float(m.group(1)) if m else None


class AdaptiveTest(unittest.TestCase):
    def test_lower_capacity_settles_near_its_pace(self):
        n = 45
        with tgtest.start_stub("--mode", "fast", "--capacity", "3") as stub, \
                Tollgate(stub.url, exit={"starts_per_second": 10, "adaptive": "on"}) as tg:
            tg.start("serve")
            ops = ["ad-%03d" % i for i in range(n)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            final = tg.wait_final(ops, timeout=120)
            calls = tg.calls()
            arrivals = [a for a in stub.arrivals() if a["path"].startswith("/v1/")]
            cuts = metric(tg, "tollgate_exit_rate_cuts_total")
            rate = metric(tg, "tollgate_exit_rate")
        self.assertTrue(all(r["state"] == "succeeded" for r in final.values()), final)
        starts = sorted(c["start_mono_ns"] for c in calls)
        took = (starts[-1] - starts[0]) / 1e9
        refused = sum(1 for a in arrivals if a.get("answer") == 429)
        self.assertLessEqual(took, 1.5 * n / 3.0, "settled in %.1f s" % took)
        self.assertLessEqual(refused, n // 5, "%d refusals" % refused)
        self.assertGreaterEqual(cuts, 1)
        self.assertLess(rate, 10)
        # the ceiling held throughout: no two starts closer than 1/10 s
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        self.assertGreaterEqual(min(gaps), 100e6)

    def test_one_503_costs_seconds(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, exit={"starts_per_second": 10, "adaptive": "on"}) as tg:
            tg.start("serve")
            stub.set_mode(mode="unavailable:-", count=1)
            ops = ["one-%03d" % i for i in range(150)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            tgtest.wait_until(lambda: metric(tg, "tollgate_exit_rate_cuts_total") == 1,
                              timeout=10, what="the cut")
            t0 = time.monotonic()
            tgtest.wait_until(lambda: metric(tg, "tollgate_exit_rate") == 10, timeout=15,
                              what="back at the ceiling")
            back = time.monotonic() - t0
            self.assertLessEqual(back, 10.0)
            self.assertEqual(metric(tg, "tollgate_exit_rate_cuts_total"), 1)
            tg.wait_final(ops, timeout=60)
            held = [a for a in stub.arrivals() if a.get("answer") == 503]
        self.assertEqual(len(held), 1)


if __name__ == "__main__":
    tgtest.main_unittest()
