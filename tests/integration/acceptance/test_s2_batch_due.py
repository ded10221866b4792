"""Acceptance 2 (seed 000, 驗收): "讓一批工作同時到期，先暫停派送程序，恢復後觀察它
是否逐筆重新排二百毫秒" -- a batch of RETRIES comes due at the same instant
while the dispatcher is paused; resumed, it paces them one slot at a time, no
burst, and does not make up the slots it missed.

Compressed: the provider answers every first attempt of 200 refunds 503
(no Retry-After; exit.default_hold_ms = 0 so the account is not held), so
each goes to retry_wait with a backoff of exactly B (window [B, B]), longer
than it takes to send all 200. Once every one waits, the dispatcher is
paused (SIGSTOP) until the last of them is due: 200 retries due together.
Resumed (SIGCONT) against a recovered provider at 40 starts/s (x8 the seed's
5/s). Judged on the call log by `tollgate verify` (spacing >= 25 ms, no
k/rate window with more than k starts) and: every call after the resume is
a retry (attempt 2) of an operation that was due before it, and the first
second after the resume holds at most 40 + 1 starts.
"""

import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accept  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

RATE = 40
N = 200
BACKOFF_MS = 15000  # > 3x the 5 s the 200 first attempts take at 40/s


class BatchDue(unittest.TestCase):
    def test_retries_due_together_are_paced(self):
        with tgtest.start_stub("--mode", "unavailable:-") as stub, \
                Tollgate(stub.url, exit={"starts_per_second": RATE, "default_hold_ms": 0},
                         retry={"backoff_min_ms": BACKOFF_MS, "backoff_base_ms": BACKOFF_MS,
                                "backoff_cap_ms": BACKOFF_MS}) as tg:
            tg.start("api")
            ops = ["batch-%03d" % i for i in range(N)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            d = tg.start("dispatch", wait_api=False)

            def all_waiting():
                st, _, s = tgtest.http_json("GET", tg.api + "/v1/stats?minutes=1", None,
                                            tg.headers())
                return st == 200 and s["backlog"]["retry_wait"] == N
            tgtest.wait_until(all_waiting, timeout=60, what="every first attempt refused")
            d.send_signal(signal.SIGSTOP)
            first = tg.calls()
            self.assertEqual(len(first), N)
            self.assertEqual({(c["kind"], c["http_status"]) for c in first}, {("first", 503)},
                             "a retry went before the pause: the first attempts took longer "
                             "than the backoff")
            due = []
            for op in ops:
                st, _, rec = tg.status(op)
                self.assertEqual((st, rec["state"]), (200, "retry_wait"), rec)
                due.append(rec["next_run_at"])
            stub.set_mode(mode="fast")
            # the scenario: paused until the whole batch is due
            tgtest.wait_until(lambda: time.time() * 1000 > max(due) + 20, timeout=BACKOFF_MS / 500,
                              interval=0.05, what="the batch due")
            resumed_ns = time.monotonic_ns()
            d.send_signal(signal.SIGCONT)
            final = tg.wait_final(ops, timeout=60)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()))

            paths, calls = accept.dump_run(tg, stub, accept.out_dir("s2_batch_due"))
            r = accept.assert_verified(self, paths, "--rate", str(RATE), "--max-attempts", "3",
                                       "--expect-kinds", "first,retry")
            s = r["summary"]
            self.assertEqual(s["calls"], 2 * N)
            self.assertGreaterEqual(s["min_start_gap_ns"], 1e9 / RATE - 1)
            for b in s["bursts"]:
                self.assertLessEqual(b["max_starts"], b["k"], b)
            after = sorted((c for c in calls if c["start_mono_ns"] >= resumed_ns),
                           key=lambda c: c["start_mono_ns"])
            self.assertEqual(len(after), N)
            self.assertEqual({(c["kind"], c["attempt"]) for c in after}, {("retry", 2)})
            # every one was due at the resume: a batch of retries, due at once
            self.assertTrue(all(c["start_wall"] >= max(due) for c in after))
            first_second = [c for c in after if c["start_mono_ns"] - after[0]["start_mono_ns"] < 1e9]
            self.assertLessEqual(len(first_second), RATE + 1)
            # paced from the first retry on: the batch takes (N - 1) / rate
            took = (after[-1]["start_mono_ns"] - after[0]["start_mono_ns"]) / 1e9
            self.assertGreaterEqual(took, (N - 1) / RATE - 0.001)


if __name__ == "__main__":
    tgtest.main_unittest()
