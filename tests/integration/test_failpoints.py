"""Every failpoint (src/daemon/failpoint.c) on a real process, on both
stores (issue 16, section 2): the process dies by SIGKILL at that point, a
new one takes over, and the refund ends succeeded, executed once at the
provider, with one idempotency key and one POST.

- crash_after_accept: the API committed the refund and died before its
  answer; the caller's connection drops, it sends the same request again to
  a new process and gets 200 (the refund is there), not a second refund;
- crash_after_claim: the attempt is committed and nothing was sent; the new
  owner waits one call timeout, finds it unknown, asks the provider (a
  query with the same key: not found) and only then POSTs it;
- crash_after_send: the request is on the wire and the provider executes it
  after the sender died; the new owner asks (same key) and learns it
  succeeded, no second POST;
- crash_before_settle: the provider answered and the answer was lost with
  the process; the same.

test_every_failpoint_has_a_scenario reads the names from failpoint.c: a new
failpoint without a scenario here fails. TG_TEST_STORE=mysql runs the file
on MariaDB (it.test_failpoints_mariadb; skipped without a server).
"""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events, min_gap  # noqa: E402

OP = "fp-0001"
TIMEOUT_MS = 1000


def failpoint_names():
    path = os.path.join(tgtest.source_dir(), "src", "daemon", "failpoint.c")
    with open(path) as f:
        text = f.read()
    table = re.search(r"names\[\] = \{(.*?)\};", text, re.S).group(1)
    return re.findall(r'"([a-z_]+)"', table)


class FailpointsTest(unittest.TestCase):
    def tollgate(self, stub):
        return Tollgate(stub.url, provider={"timeout_ms": TIMEOUT_MS},
                        retry={"query_interval_ms": 300})

    def killed(self, proc, point):
        self.assertEqual(proc.popen.wait(30), -9, proc.stderr_text()[-3000:])
        kills = log_events(proc, "failpoint_kill")
        self.assertEqual([(k["failpoint"], k["operation_id"]) for k in kills], [(point, OP)])

    def judge(self, tg, stub, methods):
        """The refund ended succeeded, executed once, one key, one POST; the
        provider saw `methods` in that order."""
        final = tg.wait_final([OP], timeout=30)
        self.assertEqual(final[OP]["state"], "succeeded", final)
        tgtest.wait_until(stub.idle, timeout=10, what="nothing open at the stub")
        self.assertEqual(stub.executions(OP), 1)
        arrivals = [a for a in stub.arrivals() if a["path"].startswith("/v1/")]
        self.assertEqual([a["method"] for a in arrivals], methods, arrivals)
        self.assertEqual({a["idempotency_key"] for a in arrivals if a["method"] == "POST"},
                         {OP})
        calls = tg.calls()
        logged = {c["request_id"] for c in calls}
        for a in arrivals:  # every request that arrived was on record first
            self.assertIn(a["request_id"], logged)
        # starts at least 1/rate apart (5/s by default), across the crash too
        self.assertGreaterEqual(min_gap(calls), 0.2 - 1e-9)
        return calls

    def test_every_failpoint_has_a_scenario(self):
        names = failpoint_names()
        self.assertTrue(names)
        for name in names:
            self.assertTrue(hasattr(self, "test_" + name), "no scenario for failpoint " + name)

    def test_unknown_failpoint_refused(self):
        with tgtest.start_stub("--mode", "fast") as stub, self.tollgate(stub) as tg:
            d = tg.start("dispatch", env={"TG_FAILPOINT": "crash_after_clam"}, wait_api=False)
            self.assertEqual(d.popen.wait(20), 1)
            self.assertTrue(log_events(d, "failpoint_unknown"))

    def test_crash_after_accept(self):
        with tgtest.start_stub("--mode", "fast") as stub, self.tollgate(stub) as tg:
            api = tg.start("api", env={"TG_FAILPOINT": "crash_after_accept"})
            with self.assertRaises(OSError):  # no answer: the connection drops
                tg.submit(OP)
            self.killed(api, "crash_after_accept")
            tg.start("serve")
            status, _, body = tg.status(OP)
            self.assertEqual(status, 200, body)  # committed before it died
            status, _, body = tg.submit(OP)  # the caller's retry
            self.assertEqual(status, 200, body)
            calls = self.judge(tg, stub, ["POST"])
            self.assertEqual(len(calls), 1)

    def test_crash_after_claim(self):
        with tgtest.start_stub("--mode", "fast") as stub, self.tollgate(stub) as tg:
            tg.start("api")
            self.assertEqual(tg.submit(OP)[0], 202)
            d = tg.start("dispatch", env={"TG_FAILPOINT": "crash_after_claim"}, wait_api=False)
            self.killed(d, "crash_after_claim")
            self.assertEqual(tg.status(OP)[2]["state"], "in_flight")
            self.assertEqual(stub.arrivals(), [])  # nothing left
            tg.start("dispatch", wait_api=False)
            calls = self.judge(tg, stub, ["GET", "POST"])
            first = min(calls, key=lambda c: c["id"])
            self.assertEqual(first["class"], "unknown", first)

    def test_crash_after_send(self):
        with tgtest.start_stub("--mode", "slow", "--delay-ms", "300") as stub, \
                self.tollgate(stub) as tg:
            tg.start("api")
            self.assertEqual(tg.submit(OP)[0], 202)
            d = tg.start("dispatch", env={"TG_FAILPOINT": "crash_after_send"}, wait_api=False)
            self.killed(d, "crash_after_send")
            # the provider executes it after the sender is gone
            tgtest.wait_until(lambda: stub.executions(OP) == 1, timeout=10,
                              what="the provider executed it")
            self.assertEqual(tg.status(OP)[2]["state"], "in_flight")
            tg.start("dispatch", wait_api=False)
            calls = self.judge(tg, stub, ["POST", "GET"])
            # the successor sent nothing before one call timeout had passed
            # since the dead owner's start
            query = [c for c in calls if c["kind"] == "query"][0]
            first = min(calls, key=lambda c: c["id"])
            self.assertGreaterEqual(query["start_wall"] - first["start_wall"], TIMEOUT_MS - 50)

    def test_crash_before_settle(self):
        with tgtest.start_stub("--mode", "fast") as stub, self.tollgate(stub) as tg:
            tg.start("api")
            self.assertEqual(tg.submit(OP)[0], 202)
            d = tg.start("dispatch", env={"TG_FAILPOINT": "crash_before_settle"},
                         wait_api=False)
            self.killed(d, "crash_before_settle")
            self.assertEqual(stub.executions(OP), 1)
            self.assertEqual(tg.status(OP)[2]["state"], "in_flight")
            tg.start("dispatch", wait_api=False)
            self.judge(tg, stub, ["POST", "GET"])


if __name__ == "__main__":
    tgtest.main_unittest()
