"""Acceptance 5 (seed 000, 驗收 — quota ownership): pause the owner without
ending it and start a new version: the new version must not send. Release
the old one: still one exit. Only after the old one is gone does the new
version send, and only after waiting out one call timeout.

"A new version" is a copy of the tollgate binary at another path, started
on the same store. Compressed: call timeout 1 s (seed: 3 s), 2 s pauses.
The deployment stops the old owner with SIGTERM (it drains and exits); the
new one must then take over. `tollgate verify` judges the whole run (one
exit: spacing and in-flight across both processes).
"""

import os
import shutil
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accept  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events  # noqa: E402

TIMEOUT_MS = 1000


class Ownership(unittest.TestCase):
    def test_new_version_waits_for_the_old_owner(self):
        with tgtest.start_stub("--mode", "slow:300") as stub, \
                Tollgate(stub.url, provider={"timeout_ms": TIMEOUT_MS}) as tg:
            v2 = os.path.join(tg.dir, "tollgate-v2")
            shutil.copy(tgtest.binary("tollgate"), v2)
            tg.start("api")
            old = tg.start("dispatch", wait_api=False)
            ops = ["own-%02d" % i for i in range(40)]
            for op in ops[:20]:
                self.assertEqual(tg.submit(op)[0], 202)
            tgtest.wait_until(lambda: len(stub.arrivals()) >= 3, what="old owner sending")
            tg.stop_between_transactions(old)
            tgtest.wait_until(stub.idle, what="calls already on the wire landed")
            new = tgtest.Proc([v2, "dispatch", "--config", tg.config])
            tg.procs.append(new)
            tgtest.wait_until(lambda: log_events(new, "standby"), what="new version standby")
            for op in ops[20:]:
                self.assertEqual(tg.submit(op)[0], 202)
            before = len(stub.arrivals())
            time.sleep(2.0)  # the scenario: the pause lasts; nobody may send
            self.assertEqual(len(stub.arrivals()), before,
                             "a start while the owner was paused: two exits")
            # Released: the old one continues, the new one still waits.
            old.send_signal(signal.SIGCONT)
            tgtest.wait_until(lambda: len(stub.arrivals()) > before + 3, what="old resumed")
            self.assertEqual(log_events(new, "owner"), [], "new version took the exit while "
                             "the old owner lived")
            # The deployment stops the old one; the new one takes over.
            old.send_signal(signal.SIGTERM)
            self.assertEqual(old.popen.wait(15), 0, old.stderr_text())
            gone_wall_ms = time.time() * 1000
            final = tg.wait_final(ops, timeout=60)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()))
            self.assertTrue(log_events(new, "owner"))
            paths, calls = accept.dump_run(tg, stub, accept.out_dir("s5_ownership"))
            accept.assert_verified(self, paths)
            epochs = sorted({c["epoch"] for c in calls})
            self.assertEqual(len(epochs), 2, epochs)
            old_calls = [c for c in calls if c["epoch"] == epochs[0]]
            new_calls = [c for c in calls if c["epoch"] == epochs[1]]
            self.assertTrue(new_calls, "the new version never sent")
            self.assertGreaterEqual(min(c["start_wall"] for c in new_calls),
                                    gone_wall_ms + TIMEOUT_MS - 50)
            self.assertLess(max(c["start_mono_ns"] for c in old_calls),
                            min(c["start_mono_ns"] for c in new_calls))


if __name__ == "__main__":
    tgtest.main_unittest()
