"""Several provider accounts in one tollgate (issue 26, §3): one exit each.

One `tollgate serve` with [account.a] and [account.b], each at its own stub
(two real tollgate-stub processes on loopback), judged from outside:
  - each account's refunds go to its own provider only, once each, spaced
    at its own rate at its own door (B's door has a whole-millisecond
    limiter at B's rate, --limit-rate, which must refuse nothing);
  - isolation: account A's provider turns slower than the call timeout,
    then answers 503 with Retry-After, while B works. B's refunds settle
    as fast as in a run where A is healthy, B's door limiter still refuses
    nothing, and A never has more calls open at its door than its own cap:
    A's slow calls wait in A's slots, its hold holds A only;
  - every line the exit logs for an account names it ("account").
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events  # noqa: E402

RATE_A = 5.0
RATE_B = 10.0
CAP_A = 2
N_B = 30  # B's refunds: 3 s of starts at its rate


def gaps_ms(arrivals):
    """The gaps between consecutive POST arrivals at a door, whole ms as a
    limiter judges them."""
    t = sorted(a["mono_ns"] // 1_000_000 for a in arrivals if a["method"] == "POST")
    return [b - a for a, b in zip(t, t[1:])]


def max_open(calls):
    """The most calls open at once, from their start and end (a call not
    ended yet is open until now)."""
    edges = []
    for c in calls:
        edges.append((c["start_mono_ns"], 1))
        edges.append((c["end_mono_ns"] or 2**63, -1))
    best = n = 0
    for _, d in sorted(edges, key=lambda e: (e[0], e[1])):
        n += d
        best = max(best, n)
    return best


class AccountsTest(unittest.TestCase):
    def daemon(self, stub_a, stub_b):
        return Tollgate(stub_a.url, **{
            "exit": {"starts_per_second": RATE_A},
            "retry": {"deadline_s": 600},
            "account.a": {"exit.max_in_flight": CAP_A, "provider.timeout_ms": 1000},
            "account.b": {"provider.base_url": stub_b.url,
                          "exit.starts_per_second": RATE_B},
        })

    def submit(self, tg, account, op_id):
        status, _, body = tg.submit(op_id, account=account)
        self.assertEqual(status, 202, body)

    def state(self, tg, op_id):
        status, _, body = tgtest.http_json("GET", tg.api + "/v1/refunds/" + op_id, None,
                                           tg.headers())
        self.assertEqual(status, 200, body)
        return body

    def run_b(self, tg, prefix):
        """Submits B's refunds at once; the seconds until every one succeeded."""
        ids = ["%s-%02d" % (prefix, i) for i in range(N_B)]
        t0 = time.monotonic()
        for op in ids:
            self.submit(tg, "b", op)
        tgtest.wait_until(lambda: all(self.state(tg, op)["state"] == "succeeded" for op in ids),
                          timeout=60, what="B's refunds settled")
        return time.monotonic() - t0, ids

    def wait_owner(self, tg, proc):
        tgtest.wait_until(lambda: {e.get("account") for e in log_events(proc, "exit_open")}
                          >= {"a", "b"}, timeout=30, what="both accounts open")

    def test_each_account_its_own_exit_and_a_sick_one_slows_no_other(self):
        with tgtest.start_stub("--mode", "fast") as stub_a, \
                tgtest.start_stub("--mode", "fast", "--limit-rate", str(RATE_B)) as stub_b, \
                self.daemon(stub_a, stub_b) as tg:
            proc = tg.start("serve")
            self.wait_owner(tg, proc)

            # 1. both healthy: each account's refunds at its own door
            for i in range(6):
                self.submit(tg, "a", "a-ok-%d" % i)
            healthy_s, ids_b = self.run_b(tg, "b-ok")
            tgtest.wait_until(lambda: all(self.state(tg, "a-ok-%d" % i)["state"] == "succeeded"
                                          for i in range(6)), timeout=30, what="A's settled")
            at_a, at_b = stub_a.arrivals(), stub_b.arrivals()
            keys_a = {x["idempotency_key"] for x in at_a}
            keys_b = {x["idempotency_key"] for x in at_b}
            self.assertEqual(keys_a, {"a-ok-%d" % i for i in range(6)})
            self.assertEqual(keys_b, set(ids_b))
            for op in ids_b:
                self.assertEqual(stub_b.executions(op), 1, op)
                self.assertEqual(self.state(tg, op)["account"], "b")
            self.assertGreaterEqual(min(gaps_ms(at_a)), 1000 / RATE_A, gaps_ms(at_a))
            self.assertGreaterEqual(min(gaps_ms(at_b)), 1000 / RATE_B, gaps_ms(at_b))
            self.assertFalse([x for x in at_b if x["answer"] == 429], "B's door refused")

            # 2. A sick: slower than its 1 s timeout, then 503 with Retry-After
            stub_a.set_mode(mode="slow", delay_ms=2500, query_mode="slow",
                            query_delay_ms=2500)
            seen_b = len(at_b)
            for i in range(10):
                self.submit(tg, "a", "a-sick-%d" % i)
            time.sleep(1.5)  # A's slots fill with calls that time out
            sick_s, ids_b2 = self.run_b(tg, "b-sick")
            stub_a.set_mode(mode="unavailable", query_mode="unavailable", retry_after=3)
            # ... and once more while A is held by its 503
            time.sleep(1.5)
            held_s, ids_b3 = self.run_b(tg, "b-held")

            at_b = stub_b.arrivals()[seen_b:]
            self.assertEqual({x["idempotency_key"] for x in at_b}, set(ids_b2) | set(ids_b3))
            self.assertFalse([x for x in at_b if x["answer"] == 429], "B's door refused")
            self.assertGreaterEqual(min(gaps_ms(at_b)), 1000 / RATE_B, gaps_ms(at_b))
            # B as fast as when A was healthy (a noisy machine's margin)
            for took in (sick_s, held_s):
                self.assertLess(took, healthy_s * 1.25 + 1.0,
                                "B took %.2f s beside a sick A, %.2f s beside a healthy one"
                                % (took, healthy_s))
            # A's slow calls waited in A's slots: never more of A's open at
            # once than its cap (the stub's own count goes on past our
            # timeout: it finishes each slow answer nobody waits for)
            calls_a = [c for c in tg.calls() if c["operation_id"].startswith("a-")]
            self.assertGreater(len(calls_a), 6)
            self.assertLessEqual(max_open(calls_a), CAP_A, calls_a)
            at_a = stub_a.arrivals()
            self.assertFalse({x["idempotency_key"] for x in at_a} & (set(ids_b2) | set(ids_b3)))
            # A's refunds are not lost: none succeeded without proof, all still open
            for i in range(10):
                self.assertNotIn(self.state(tg, "a-sick-%d" % i)["state"],
                                 ("succeeded", "rejected"))

            # every exit line names its account
            for e in log_events(proc):
                if e.get("event", "").startswith("call_"):
                    self.assertIn(e.get("account"), ("a", "b"), e)
            proc.stop()
            self.assertEqual(proc.returncode, 0, proc.stderr_text()[-2000:])


if __name__ == "__main__":
    tgtest.main_unittest()
