#!/usr/bin/env python3
"""The spacing promise where the provider sees it (issue 14, DESIGN.md).

A gateway's limiter stands in front of the stub (--limit-rate R: it measures
the gap between arrivals in whole milliseconds, at the account's rate, no
burst, and answers 429 to anything closer). tollgate, at the same rate, must
never be refused by it:

- one dispatcher, a fresh connection per call;
- one dispatcher, connections reused;
- (shares = 2, two dispatchers: see test_shares.py)

and the call log's starts (when each request went on the wire) are at least
1/rate apart, with the hand-off to the transport before each start.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

RATE = 10.0
N = 60


class WireSpacingTest(unittest.TestCase):
    def run_exit(self, reuse):
        with tgtest.start_stub("--mode", "fast", "--limit-rate", str(RATE)) as stub, \
                Tollgate(stub.url,
                         exit={"starts_per_second": RATE, "max_in_flight": 10,
                               "spacing_margin_us": tgtest.DOOR_MARGIN_US},
                         provider={"reuse_connections": "true" if reuse else "false"},
                         admission={"enabled": "false"}) as tg:
            tg.start("serve")
            ids = ["wire-%s-%03d" % ("r" if reuse else "f", i) for i in range(N)]
            for op in ids:
                status, _, body = tg.submit(op)
                self.assertEqual(status, 202, body)
            done = tg.wait_final(ids, timeout=60)
            states = {op: rec["state"] for op, rec in done.items()}
            self.assertEqual(set(states.values()), {"succeeded"}, states)

            arrivals = stub.arrivals()
            refused = [a for a in arrivals if a.get("mode") == "limiter"]
            self.assertEqual(refused, [], "the provider's limiter refused %d call(s)"
                             % len(refused))
            posts = [a for a in arrivals if a["method"] == "POST"]
            self.assertEqual(len(posts), N)

            calls = tg.calls()
            self.assertEqual(len(calls), N)
            interval_ns = int(1e9 / RATE)
            starts = sorted(c["start_mono_ns"] for c in calls)
            gaps = [b - a for a, b in zip(starts, starts[1:])]
            self.assertGreaterEqual(min(gaps), interval_ns,
                                    "two starts %.3f ms apart" % (min(gaps) / 1e6))
            for c in calls:
                # the hand-off comes first; the start is when it went out
                self.assertIn("handoff_mono_ns", c)
                self.assertLessEqual(c["handoff_mono_ns"], c["start_mono_ns"])
                self.assertIsNotNone(c["connect_us"])

    def test_fresh_connections(self):
        self.run_exit(reuse=False)

    def test_reused_connections(self):
        self.run_exit(reuse=True)

    def test_serve_wakes_on_new_refund(self):
        # An idle exit sleeps (about one wake-up a second), yet in `serve`
        # the API rings it for every new refund: each starts within a few
        # milliseconds of its 202, not at the next look for work.
        import random
        import time
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, exit={"idle_poll_max_ms": 5000}) as tg:
            tg.start("serve")
            delays = []
            for i in range(4):
                time.sleep(random.uniform(1.1, 1.9))  # idle between refunds (the scenario)
                t0 = time.time()
                status, _, body = tg.submit("wake-%d" % i)
                self.assertEqual(status, 202, body)
                tg.wait_final(["wake-%d" % i], timeout=10)
                call = [c for c in tg.calls() if c["operation_id"] == "wake-%d" % i][0]
                delays.append(call["start_wall"] / 1000.0 - t0)
            self.assertLess(max(delays), 0.3, delays)

    def test_limiter_refuses_a_burst(self):
        # The limiter is real: two requests in the same millisecond window
        # are not both let through.
        with tgtest.start_stub("--mode", "fast", "--limit-rate", "1") as stub:
            first, _, _ = stub.refund("lim-1")
            second, _, body = stub.refund("lim-2")
            self.assertEqual(first, 201)
            self.assertEqual(second, 429, body)
            self.assertEqual(body["error"]["code"], "rate_limited")
            modes = [a["mode"] for a in stub.arrivals()]
            self.assertEqual(modes.count("limiter"), 1, modes)


if __name__ == "__main__":
    tgtest.main_unittest()
