"""Acceptance 2 (seed 000, 驗收): a batch of 200 jobs all due at the same
instant is paced one slot at a time, no burst.

Compressed: 200 refunds are accepted by the API alone (no dispatcher), so all
200 are due the moment a dispatcher starts; the exit runs at 25 starts/s
(x5 the seed's 5/s) so the batch takes ~8 s instead of 40 s. Judged on the
call log's monotonic start times by `tollgate verify` (spacing >= 40 ms,
no k/rate window with more than k starts), plus: the first second after the
dispatcher starts holds at most 25 + 1 starts.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accept  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

RATE = 25


class BatchDue(unittest.TestCase):
    def test_batch_due_together_is_paced(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, exit={"starts_per_second": RATE}) as tg:
            tg.start("api")
            ops = ["batch-%03d" % i for i in range(200)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            tg.start("dispatch", wait_api=False)
            final = tg.wait_final(ops, timeout=60)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()))
            paths, calls = accept.dump_run(tg, stub, accept.out_dir("s2_batch_due"))
            r = accept.assert_verified(self, paths, "--rate", str(RATE), "--max-attempts", "3")
            s = r["summary"]
            self.assertEqual(s["calls"], 200)
            self.assertGreaterEqual(s["min_start_gap_ns"], 1e9 / RATE - 1)
            for b in s["bursts"]:
                self.assertLessEqual(b["max_starts"], b["k"], b)
            starts = sorted(c["start_mono_ns"] for c in calls)
            first_second = [t for t in starts if t - starts[0] < 1e9]
            self.assertLessEqual(len(first_second), RATE + 1)


if __name__ == "__main__":
    tgtest.main_unittest()
