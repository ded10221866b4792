#!/usr/bin/env python3
"""Nested sub-quotas judged on the wire (issue 27, part 1).

A gateway in front of the stub limits the account (--limit-rate) and each
endpoint on its own (--limit-path: the refunds POST, the query GET), all at
once, in whole milliseconds with no burst, and answers 429 to anything
closer. tollgate runs with the same ceilings as its account's quota and its
sub-quotas (exit.refund_starts_per_second, exit.query_starts_per_second),
which add up to more than the account: they nest, they do not partition it.

Every POST is executed and its connection dropped (the outcome is unknown:
a query reconciles it), so queries pile up behind the POSTs. Judged:

- the gateway refuses nothing, at any level;
- in tollgate's own call log, starts are 1/rate apart at every level (the
  account's, the refunds', the queries');
- each level's rate is reached, with margins for a busy 2-core machine:
  the account's while both kinds have work (neither sub-quota alone could
  fill it), the queries' once the POSTs are done;
- every refund ends succeeded, one POST each.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

ACCOUNT = 10.0
REFUND = 8.0
QUERY = 4.0
N = 60


def rate(starts):
    """Starts a second over the span of a sorted list of start times (ns)."""
    if len(starts) < 2:
        return 0.0
    return (len(starts) - 1) / ((starts[-1] - starts[0]) / 1e9)


def min_gap(starts):
    return min(b - a for a, b in zip(starts, starts[1:]))


class SubQuotaTest(unittest.TestCase):
    def test_every_level_on_the_wire(self):
        with tgtest.start_stub("--mode", "drop", "--limit-rate", str(ACCOUNT),
                               "--limit-path", "refund=%g,query=%g" % (REFUND, QUERY)) as stub, \
                Tollgate(stub.url,
                         exit={"starts_per_second": ACCOUNT, "max_in_flight": 10,
                               "refund_starts_per_second": REFUND,
                               "refund_max_in_flight": 6,
                               "query_starts_per_second": QUERY,
                               "spacing_margin_us": tgtest.DOOR_MARGIN_US},
                         retry={"query_interval_ms": 2000},
                         admission={"enabled": "false"}) as tg:
            tg.start("serve")
            ids = ["sq-%03d" % i for i in range(N)]
            status, _, body = tg.submit_batch(ids)  # a backlog in place at once
            self.assertIn(status, (200, 202, 207), body)
            done = tg.wait_final(ids, timeout=90)
            states = {op: rec["state"] for op, rec in done.items()}
            self.assertEqual(set(states.values()), {"succeeded"}, states)

            arrivals = stub.arrivals()
            refused = [a for a in arrivals
                       if a.get("mode") in ("limiter", "limiter_path")]
            self.assertEqual(refused, [], "the gateway refused %d call(s): %s"
                             % (len(refused), refused[:3]))
            posts = [a for a in arrivals if a["method"] == "POST"]
            self.assertEqual(len(posts), N)  # one POST each: none re-sent

            calls = tg.calls()
            everything = sorted(c["start_mono_ns"] for c in calls)
            post_starts = sorted(c["start_mono_ns"] for c in calls if c["kind"] != "query")
            query_starts = sorted(c["start_mono_ns"] for c in calls if c["kind"] == "query")
            self.assertEqual(len(post_starts), N)
            self.assertGreaterEqual(len(query_starts), N)

            print("sub-quotas: %d calls (%d queries); min gaps account %.1f ms, refund %.1f ms, "
                  "query %.1f ms" % (len(everything), len(query_starts), min_gap(everything) / 1e6,
                                     min_gap(post_starts) / 1e6, min_gap(query_starts) / 1e6),
                  file=sys.stderr)
            # floors, in the exit's own log: load can only widen them
            for name, starts, r in (("account", everything, ACCOUNT),
                                    ("refund", post_starts, REFUND),
                                    ("query", query_starts, QUERY)):
                self.assertGreaterEqual(min_gap(starts), int(1e9 / r),
                                        "%s: two starts %.3f ms apart"
                                        % (name, min_gap(starts) / 1e6))

            # the account's rate while both kinds had work: from the first
            # query to the last POST (POSTs alone 8/s, queries alone 4/s)
            both = [t for t in everything if query_starts[0] <= t <= post_starts[-1]]
            alone = [t for t in post_starts if t < query_starts[0]]
            after = [t for t in query_starts if t > post_starts[-1]]
            print("sub-quotas: account %.2f/s with both at work (%d), refund %.2f/s alone (%d), "
                  "query %.2f/s alone (%d)" % (rate(both), len(both), rate(alone), len(alone),
                                               rate(after), len(after)), file=sys.stderr)
            self.assertGreaterEqual(len(both), 20, "too short a window: %d" % len(both))
            self.assertGreaterEqual(rate(both), 0.8 * ACCOUNT,
                                    "account: %.2f/s with both kinds at work" % rate(both))
            # the POSTs' own rate before the first query (each query falls
            # due two seconds after its POST)
            self.assertGreaterEqual(len(alone), 10, "too few POSTs alone: %d" % len(alone))
            self.assertGreaterEqual(rate(alone), 0.8 * REFUND,
                                    "refund: %.2f/s alone" % rate(alone))
            # the queries' rate once the POSTs were done (a backlog of them)
            self.assertGreaterEqual(len(after), 10, "no query backlog: %d" % len(after))
            self.assertGreaterEqual(rate(after), 0.8 * QUERY,
                                    "query: %.2f/s on its own" % rate(after))


class StubPathLimiterTest(unittest.TestCase):
    def test_path_limiter_refuses_and_moves_only_on_a_pass(self):
        # The stub's per-endpoint limiter is real: two POSTs in one window
        # are not both let through, while a query beside them (another
        # endpoint, no account limiter) is.
        import json
        import urllib.request
        with tgtest.start_stub("--mode", "fast", "--limit-path", "refund=1") as stub:
            def post(op):
                body = json.dumps({"operation_id": op, "payment_id": "p", "amount": 100,
                                   "currency": "TWD"}).encode()
                req = urllib.request.Request(stub.url + "/v1/refunds", data=body,
                                             method="POST",
                                             headers={"Content-Type": "application/json",
                                                      "Idempotency-Key": op})
                try:
                    with urllib.request.urlopen(req, timeout=5) as r:
                        return r.status
                except urllib.error.HTTPError as e:
                    return e.code

            def query(op):
                try:
                    with urllib.request.urlopen(stub.url + "/v1/refunds/" + op,
                                                timeout=5) as r:
                        return r.status
                except urllib.error.HTTPError as e:
                    return e.code

            self.assertEqual(post("pl-1"), 201)
            self.assertEqual(post("pl-2"), 429)
            self.assertNotEqual(query("pl-1"), 429)
            modes = [a.get("mode") for a in stub.arrivals()]
            self.assertEqual(modes.count("limiter_path"), 1, modes)


if __name__ == "__main__":
    unittest.main()
