"""Acceptance 7 (seed 000, 驗收): past 3 attempts, or past the deadline, an
operation is in the manual list with a traceable history.

Compressed: backoff windows shortened (retry.backoff_base_ms 100, cap 300 ms)
and the provider answers 503 without Retry-After, so the three attempts take
about a second, not minutes. A 503 executes nothing and is by default not
counted against the attempts (docs/design.md, "What a probe is"): the first
case counts it (retry.count_limited), the way to run out of attempts here, and
the hold after each refused probe stays 100 ms (exit.default_hold_max_ms: by
default it doubles). The deadline case uses a second tollgate with
retry.deadline_s = 2 (instead of 15 min) and max_attempts 50: it runs out
of time, not attempts. Each run ends with `tollgate verify` on its records.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accept  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

FAST_BACKOFF = {"backoff_base_ms": 100, "backoff_min_ms": 50, "backoff_cap_ms": 300}


def manual_items(tg):
    status, _, body = tgtest.http_json("GET", tg.api + "/v1/manual", None, tg.headers())
    assert status == 200, (status, body)
    return {it["operation_id"]: it for it in body["items"]}


def reason_of(item):
    for k in ("manual_reason", "reason"):
        if isinstance(item.get(k), str):
            return item[k]
    return repr(item)


class ManualBudget(unittest.TestCase):
    def test_out_of_attempts(self):
        ops = ["att-%d" % i for i in range(3)]
        with tgtest.start_stub("--mode", "unavailable:-") as stub, \
                Tollgate(stub.url, exit={"default_hold_ms": 100, "default_hold_max_ms": 100},
                         retry=dict(FAST_BACKOFF, max_attempts=3, count_limited="true")) as tg:
            tg.start("serve")
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            tg.wait_final(ops, timeout=30, states=("manual",))
            items = manual_items(tg)
            for op in ops:
                self.assertIn(op, items)
                self.assertIn("attempt", reason_of(items[op]))
                body = tg.status(op)[2]
                posts = [a for a in body["attempts"] if a["kind"] != "query"]
                self.assertEqual(len(posts), 3, body)
                self.assertEqual([a["attempt"] for a in posts], [1, 2, 3])
                self.assertTrue(all(a["http_status"] == 503 for a in posts), posts)
            paths, calls = accept.dump_run(tg, stub, accept.out_dir("s7_attempts"))
            r = accept.assert_verified(self, paths, "--max-attempts", "3", "--count-limited")
            self.assertEqual(r["summary"]["max_posts_per_key"], 3)
            self.assertEqual(r["summary"]["max_executions"], 0)

    def test_past_the_deadline(self):
        ops = ["dl-%d" % i for i in range(3)]
        with tgtest.start_stub("--mode", "unavailable:-") as stub, \
                Tollgate(stub.url, exit={"default_hold_ms": 100, "default_hold_max_ms": 100},
                         retry=dict(FAST_BACKOFF, max_attempts=50, deadline_s=2)) as tg:
            tg.start("serve")
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            tg.wait_final(ops, timeout=30, states=("manual",))
            items = manual_items(tg)
            for op in ops:
                self.assertIn(op, items)
                self.assertIn("deadline", reason_of(items[op]))
                self.assertGreaterEqual(len(tg.status(op)[2]["attempts"]), 1)
            paths, _ = accept.dump_run(tg, stub, accept.out_dir("s7_deadline"))
            accept.assert_verified(self, paths, "--max-attempts", "50")


if __name__ == "__main__":
    tgtest.main_unittest()
