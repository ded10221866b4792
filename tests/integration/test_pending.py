"""A refund the provider reports as pending (issue 25 section 3): accepted,
not final (the stub's "status":"processing", Stripe's pending, PayPal's
PENDING). It is not settled within the automatic budget of retry.deadline_s
by queries on the normal schedule: it stays unknown with pending_since, its
polls follow a slow schedule of their own (retry.pending_poll_interval_ms,
doubling up to retry.pending_poll_max_ms, not spending retry.max_queries)
and its deadline is pending_since + retry.pending_deadline_s.

- a refund that stays processing longer than retry.deadline_s (and than the
  normal query budget could cover) settles succeeded, not manual, once the
  stub says succeeded; its polls are spaced at least by the doubling gaps in
  tollgate's own call log, and there are no more of them than that schedule
  allows; GET /v1/refunds/{id} and the gauge show it pending meanwhile;
- a refund still processing past a short retry.pending_deadline_s goes to
  manual with the reason pending_deadline.

The times judged are floors (a gap is the wait the policy chose plus the
call; load only makes it longer) and a ceiling on the number of polls (load
only makes it smaller): labelled parallel.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

INTERVAL_MS = 400
CAP_MS = 3200
PROCESSING_MS = 7000

RETRY = {
    # the normal budget: 2 s and 3 queries 200 ms apart, both far shorter
    # than the 7 s the provider takes
    "deadline_s": 2,
    "max_queries": 3,
    "query_interval_ms": 200,
    "pending_poll_interval_ms": INTERVAL_MS,
    "pending_poll_max_ms": CAP_MS,
    "pending_max_polls": 50,
    "pending_deadline_s": 60,
}


def queries_of(calls, op):
    return [c for c in calls if c["operation_id"] == op and c["kind"] == "query"]


def gauge(tg, account="default"):
    status, _, raw = tgtest.http_request("GET", tg.api + "/metrics", None, tg.headers())
    assert status == 200, status
    name = 'tollgate_account_provider_pending{account="%s"} ' % account
    for line in raw.decode().splitlines():
        if line.startswith(name):
            return int(line[len(name):])
    raise AssertionError("no %s in /metrics" % name.strip())


class PendingTest(unittest.TestCase):
    def test_pending_longer_than_the_deadline_settles_by_slow_polls(self):
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url, retry=RETRY) as tg:
            # the POST executes and its answer is lost; the queries then say
            # processing for 7 s from the execution, then succeeded
            stub.admin("POST", "mode", {"mode": "drop", "processing_ms": PROCESSING_MS})
            tg.start("serve")
            self.assertEqual(tg.submit("pend-1")[0], 202)

            def pending():
                status, _, body = tg.status("pend-1")
                return body if status == 200 and body["pending_since"] else None
            shown = tgtest.wait_until(pending, timeout=10, interval=0.1,
                                      what="pend-1 pending at the provider")
            self.assertEqual(shown["state"], "unknown", shown)
            self.assertIsNone(shown["reason"])
            # its deadline is the pending one, not acceptance + 2 s
            self.assertEqual(shown["deadline_at"],
                             shown["pending_since"] + RETRY["pending_deadline_s"] * 1000)
            self.assertEqual(gauge(tg), 1)
            status, _, stats = tgtest.http_json("GET", tg.api + "/v1/stats", None, tg.headers())
            self.assertEqual((status, stats["provider_pending"]), (200, 1), stats)

            final = tg.wait_final(["pend-1"], timeout=40)["pend-1"]
            self.assertEqual(final["state"], "succeeded", final)
            self.assertIsNone(final["reason"])
            self.assertGreater(final["updated_at"] - final["accepted_at"],
                               RETRY["deadline_s"] * 1000)
            self.assertEqual(gauge(tg), 0)

            calls = tg.calls()
            queries = queries_of(calls, "pend-1")
            classes = [c["class"] for c in queries]
            self.assertEqual(classes[-1], "succeeded", classes)
            self.assertEqual(set(classes[:-1]), {"processing"}, classes)
            # the first processing answer made it pending; each poll after
            # it waited the interval doubled per poll made, up to the cap
            first = next(i for i, c in enumerate(queries) if c["class"] == "processing")
            polls = queries[first:]
            starts = [c["start_mono_ns"] / 1e9 for c in polls]
            gaps = [b - a for a, b in zip(starts, starts[1:])]
            want = [min(INTERVAL_MS * 2 ** i, CAP_MS) / 1000.0 for i in range(len(gaps))]
            for i, (got, floor) in enumerate(zip(gaps, want)):
                self.assertGreaterEqual(got, floor * 0.95,
                                        "poll %d came %.3f s after the last, under %.3f s: %r"
                                        % (i + 1, got, floor, gaps))
            # 0.4 + 0.8 + 1.6 + 3.2 = 6 s, then 9.2 s: at most 5 polls cover
            # the 7 s (the normal 200 ms spacing would have made 35)
            self.assertGreaterEqual(len(polls) - 1, 4, gaps)
            self.assertLessEqual(len(polls) - 1, 5, gaps)
            # the normal budget (3 queries) was not what stopped or spent it
            self.assertGreater(len(queries), RETRY["max_queries"])
            self.assertEqual(final["pending_polls_made"], len(polls) - 1)
            self.assertLessEqual(final["queries_made"], final["query_limit"])
            # one execution at the provider, one POST
            self.assertEqual([c["kind"] for c in calls if c["operation_id"] == "pend-1"
                              and c["kind"] != "query"], ["first"])
            self.assertEqual(stub.ledger()["operations"]["pend-1"]["executions"], 1)

    def test_pending_past_its_deadline_goes_to_manual(self):
        retry = dict(RETRY, pending_deadline_s=2)
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url, retry=retry) as tg:
            stub.admin("POST", "mode", {"mode": "drop", "processing_ms": 600000})
            tg.start("serve")
            self.assertEqual(tg.submit("pend-2")[0], 202)
            final = tg.wait_final(["pend-2"], timeout=30)["pend-2"]
            self.assertEqual((final["state"], final["reason"]), ("manual", "pending_deadline"),
                             final)
            self.assertIsNotNone(final["pending_since"])
            self.assertEqual(final["deadline_at"], final["pending_since"] + 2000)
            # manual is not pending at the provider any more: the gauge says 0
            self.assertEqual(gauge(tg), 0)
            status, _, body = tgtest.http_json("GET", tg.api + "/v1/manual?reason=pending_deadline",
                                               None, tg.headers())
            self.assertEqual(status, 200, body)
            self.assertIn("pend-2", [o["operation_id"] for o in body["items"]], body)


if __name__ == "__main__":
    unittest.main()
