"""Acceptance 3 (seed 000, 驗收): pause the dispatcher (SIGSTOP) for longer
than many slots and resume it: it does not make up the slots it missed.

Compressed: 10 starts/s, a 3 s pause (30 missed slots) in the middle of a
backlog of 80 refunds, all due. After SIGCONT the first start may come at
once (idle time earns no credit, but the slot is due), then every start is
>= 100 ms after the previous one: at most 10 + 1 starts in the first second
after the resume, not the 30 a catch-up would send. `tollgate verify` judges
the whole run.
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

RATE = 10


class PauseNoCatchUp(unittest.TestCase):
    def test_pause_does_not_make_up_missed_slots(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, exit={"starts_per_second": RATE}) as tg:
            tg.start("api")
            ops = ["pause-%03d" % i for i in range(80)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            d = tg.start("dispatch", wait_api=False)
            tgtest.wait_until(lambda: len(stub.arrivals()) >= 15, timeout=20,
                              what="15 starts before the pause")
            d.send_signal(signal.SIGSTOP)
            paused = time.monotonic()
            time.sleep(3.0)  # the scenario: the pause (30 missed slots)
            before = len(stub.arrivals())
            resumed_ns = time.monotonic_ns()
            d.send_signal(signal.SIGCONT)
            final = tg.wait_final(ops, timeout=60)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()))
            self.assertGreater(time.monotonic() - paused, 3.0)
            paths, calls = accept.dump_run(tg, stub, accept.out_dir("s3_pause"))
            accept.assert_verified(self, paths, "--rate", str(RATE))
            after = sorted(c["start_mono_ns"] for c in calls if c["start_mono_ns"] >= resumed_ns)
            self.assertGreaterEqual(len(after), 30, "too few starts after the resume")
            self.assertLess(len(calls) - len(after), before + 2)
            in_first_second = [t for t in after if t - resumed_ns < 1e9]
            self.assertLessEqual(len(in_first_second), RATE + 1,
                                 "%d starts in the first second after the resume: catch-up"
                                 % len(in_first_second))
            gaps = [b - a for a, b in zip(after, after[1:])]
            self.assertGreaterEqual(min(gaps), 1e9 / RATE - 1)


if __name__ == "__main__":
    tgtest.main_unittest()
