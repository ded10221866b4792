"""A hostile provider (issue 16, section 3): a real tollgate against
tollgate-stub's hostile modes (src/stub/hostile.h), one refund per mode. For
each, what tollgate makes of the answer (the class in its call log) is the
contract's (docs/reliability.md, "A hostile provider"): whatever may have
executed without a clear answer is unknown and reconciled by a query with the
same key, never re-sent with another key, never succeeded without proof; a
hostile answer to a query is no answer. And whatever the answer, tollgate
does not crash, follows no redirect, executes nothing twice and keeps its
memory bounded.

Plain HTTP in PROVIDER.md's shape (the classification is the transport's and
the table's, not TLS's or a profile's): the switches TG_TEST_TLS and
TG_TEST_PROFILE are not applied here.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

# The whole call may take 2 s: trickle (a byte every 100 ms of an ~80-byte
# body) outlasts it; every other answer comes in a few ms on loopback, with
# room for a loaded machine and a sanitizer build.
TIMEOUT_MS = 2000
CONFIG = {
    "provider": {"timeout_ms": TIMEOUT_MS, "connect_timeout_ms": TIMEOUT_MS},
    # A retry or query that a settled call makes due is only seen at the end
    # of the exit's idle wait (dispatcher.c: a settle does not end it), up to
    # this long after it is due: 50 ms, not the default second, per case.
    # A 503 holds the whole exit (a 429 too): 100 ms, not a second.
    "exit": {"starts_per_second": 20, "idle_poll_max_ms": 50, "default_hold_ms": 100},
    "retry": {"query_interval_ms": 100, "backoff_min_ms": 50, "backoff_base_ms": 100,
              "backoff_cap_ms": 200},
}

# mode of the POST -> (its class, its HTTP status in the call log, the
# outcome that closes the refund: "query" when a query with the same key
# finds it executed, "post" when the POST's answer was clear).
POST_CASES = [
    ("reset-body", "unknown", None, "query"),
    ("truncated", "unknown", 201, "query"),
    ("truncated:200", "unknown", 200, "query"),
    ("invalid", "unknown", 201, "query"),
    ("invalid:200", "unknown", 200, "query"),
    ("huge", "unknown", 201, "query"),
    ("trickle", "unknown", None, "query"),
    ("ctype", "unknown", 201, "query"),
    ("ctype:text/plain", "unknown", 201, "query"),
    ("ctype:none", "succeeded", 201, "post"),
    ("contra", "unknown", 201, "query"),
    ("contra:200-error", "unknown", 200, "query"),
    ("contra:500-succeeded", "unknown", 500, "query"),
    ("contra:422-succeeded", "unknown", 422, "query"),
    ("contra:400-processing", "unknown", 400, "query"),
    ("contra:503-succeeded", "unknown", 503, "query"),
    ("http10", "succeeded", 201, "post"),
    ("http10:cut", "unknown", 201, "query"),
]

# redirects execute nothing: the query finds nothing (not_found), and the
# refund is re-sent with the same key, which the provider then executes.
REDIRECTS = ["redirect:301", "redirect:302", "redirect:303", "redirect", "redirect:308"]

# mode of the queries (the POST was dropped after executing: unknown) ->
# the class of such a query.
QUERY_CASES = [
    ("reset-body", "no_answer"),
    ("truncated", "no_answer"),
    ("invalid", "no_answer"),
    ("huge", "no_answer"),
    ("trickle", "no_answer"),
    ("ctype", "no_answer"),
    ("contra:404-succeeded", "no_answer"),
    ("contra:500-succeeded", "no_answer"),
    ("http10:cut", "no_answer"),
    ("redirect", "no_answer"),
    ("redirect:308", "no_answer"),
    ("http10", "succeeded"),
]


def key_of(mode):
    return "h-" + mode.replace(":", "-").replace("/", "-")


def vm_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for %d" % (field, pid))


class HostileProvider(unittest.TestCase):
    def setUp(self):
        self.stub = tgtest.start_stub("--query-mode", "fast", tls="", profile="provider-md")
        self.tg = Tollgate(self.stub.url, tls="", profile="provider-md", **CONFIG)
        env = None
        if self._testMethodName == "test_memory_stays_bounded_under_huge_bodies":
            # Under ASan, memory freed goes to a quarantine (256 MiB) and
            # stays resident: each call's buffers would show as growth. The
            # bound is about what is held, so hold nothing freed.
            env = {"ASAN_OPTIONS": ":".join(
                o for o in (os.environ.get("ASAN_OPTIONS"), "quarantine_size_mb=1") if o)}
        self.proc = self.tg.start("serve", env=env)
        self.ops = set()

    def tearDown(self):
        alive = self.proc.poll() is None
        try:
            self.assertTrue(alive, "tollgate exited:\n" + self.proc.stderr_text()[-4000:])
            # a clean stop: exit 0, and under ASan+UBSan (the sanitize
            # label) no report, leaks included, from either process
            for p, what in ((self.proc, "tollgate"), (self.stub, "tollgate-stub")):
                code = p.stop()
                err = p.stderr_text()
                for word in ("Sanitizer", "runtime error:"):
                    self.assertNotIn(word, err, "%s:\n%s" % (what, err[-4000:]))
                self.assertEqual(code, 0, "%s:\n%s" % (what, err[-4000:]))
        finally:
            self.tg.close()
            self.stub.close()

    def submit(self, op):
        self.ops.add(op)
        self.assertEqual(self.tg.submit(op)[0], 202)

    def final(self, op, timeout=15):
        def done():
            status, _, body = self.tg.status(op)
            return body if status == 200 and body["state"] in (
                "succeeded", "rejected", "manual") else None
        return tgtest.wait_until(done, timeout=timeout, interval=0.02, what=op + " final")

    def calls_of(self, op):
        return [c for c in self.tg.calls() if c["operation_id"] == op]

    def assert_safe(self):
        """Nothing executed twice, every POST with its operation's one key
        (never another), no redirect followed, tollgate alive."""
        ledger = self.stub.ledger()
        self.assertLessEqual(ledger["max_executions_per_operation"], 1, ledger)
        self.assertEqual(set(ledger["operations"]), self.ops)
        for a in self.stub.arrivals():
            self.assertFalse(a["path"].startswith("/moved"), "a redirect was followed: %r" % a)
            if a["method"] == "POST":
                self.assertIn(a["idempotency_key"], self.ops, a)
        self.assertIsNone(self.proc.poll(), self.proc.stderr_text()[-4000:])

    def test_hostile_answers_to_a_post(self):
        for mode, cls, http_status, closed_by in POST_CASES:
            op = key_of(mode)
            with self.subTest(mode=mode):
                self.stub.set_mode(mode=mode, count=1)
                self.submit(op)
                rec = self.final(op)
                self.assertEqual(rec["state"], "succeeded", rec)
                calls = self.calls_of(op)
                posts = [c for c in calls if c["kind"] != "query"]
                queries = [c for c in calls if c["kind"] == "query"]
                self.assertEqual(len(posts), 1, calls)  # never a re-send
                self.assertEqual((posts[0]["class"], posts[0]["http_status"]),
                                 (cls, http_status), posts[0])
                if closed_by == "post":
                    self.assertEqual(queries, [])
                else:
                    # reconciled by a query with the same key, which found it
                    self.assertEqual([q["class"] for q in queries], ["succeeded"], calls)
                arrivals = [a for a in self.stub.arrivals() if a["path"].startswith("/v1/")
                            and (a["idempotency_key"] == op or a["path"].endswith("/" + op))]
                self.assertEqual(arrivals[0]["mode"], mode)
                self.assertEqual([a["idempotency_key"] for a in arrivals if a["method"] == "POST"],
                                 [op])
                self.assertEqual(self.stub.executions(op), 1)
        huge = [c for c in self.calls_of(key_of("huge")) if c["kind"] != "query"][0]
        self.assertIn("over the bound", huge["error"])
        trickle = [c for c in self.calls_of(key_of("trickle")) if c["kind"] != "query"][0]
        self.assertTrue(trickle["error"].startswith("timeout"), trickle)
        self.assertGreaterEqual(trickle["latency_ms"], TIMEOUT_MS * 0.9)
        self.assert_safe()

    def test_redirects_are_never_followed(self):
        for mode in REDIRECTS:
            op = key_of(mode)
            with self.subTest(mode=mode):
                self.stub.set_mode(mode=mode, count=1)
                self.submit(op)
                rec = self.final(op)
                self.assertEqual(rec["state"], "succeeded", rec)
                calls = self.calls_of(op)
                status = int(mode.split(":")[1]) if ":" in mode else 307
                # 3xx: unknown, asked with the same key (not found: nothing
                # executed), re-sent with the same key, executed once
                self.assertEqual([(c["kind"], c["http_status"], c["class"]) for c in calls],
                                 [("first", status, "unknown"), ("query", 404, "not_found"),
                                  ("retry", 201, "succeeded")], calls)
                keys = [a["idempotency_key"] for a in self.stub.arrivals()
                        if a["method"] == "POST" and a["idempotency_key"] == op]
                self.assertEqual(keys, [op, op])
                self.assertEqual(self.stub.executions(op), 1)
        self.assert_safe()

    def test_hostile_answers_to_a_query(self):
        arrivals_seen = 0
        for mode, cls in QUERY_CASES:
            op = "q" + key_of(mode)
            with self.subTest(mode=mode):
                self.stub.set_mode(mode="drop", count=1, query_mode=mode)
                self.submit(op)
                # the first query meets the hostile mode; then the provider
                # answers queries plainly again
                def hostile_query_answered():
                    for a in self.stub.arrivals(arrivals_seen):
                        if a["method"] == "GET" and a["path"].endswith("/" + op) and \
                                a["answer"] is not None:
                            return True
                    return False
                tgtest.wait_until(hostile_query_answered, timeout=10,
                                  what="a query in mode " + mode)
                self.stub.set_mode(query_mode="fast")
                rec = self.final(op)
                self.assertEqual(rec["state"], "succeeded", rec)
                calls = self.calls_of(op)
                self.assertEqual([c["kind"] for c in calls if c["kind"] != "query"], ["first"])
                arrivals = {a["request_id"]: a for a in self.stub.arrivals(arrivals_seen)}
                hostile = [c for c in calls if c["kind"] == "query" and
                           arrivals[c["request_id"]]["mode"] != "fast"]
                self.assertTrue(hostile, calls)
                self.assertEqual({c["class"] for c in hostile}, {cls}, calls)
                if cls == "no_answer":
                    self.assertEqual(calls[-1]["class"], "succeeded")
                    self.assertEqual(arrivals[calls[-1]["request_id"]]["mode"], "fast")
                self.assertEqual(self.stub.executions(op), 1)
                arrivals_seen = self.stub.arrivals()[-1]["seq"]
        self.assert_safe()

    def test_memory_stays_bounded_under_huge_bodies(self):
        # 64 MiB bodies (the stub's default), 1024 times provider.
        # max_response_bytes (65536): the transport keeps at most the bound
        # and drops the rest, so tollgate's peak memory does not move by
        # anything like one body.
        for i in range(3):  # warm up: every path of a call once
            self.submit("warm-%d" % i)
        for i in range(3):
            self.final("warm-%d" % i)
        before = vm_kib(self.proc.pid, "VmHWM")
        ops = ["big-%d" % i for i in range(8)]
        self.stub.set_mode(mode="huge", count=len(ops), query_mode="huge")
        for op in ops:
            self.submit(op)
        tgtest.wait_until(lambda: sum(1 for a in self.stub.arrivals()
                                      if a["mode"] == "huge" and a["answer"] is not None)
                          >= 2 * len(ops), timeout=20, what="huge POSTs and queries answered")
        self.stub.set_mode(query_mode="fast")
        for op in ops:
            self.assertEqual(self.final(op)["state"], "succeeded")
        after = vm_kib(self.proc.pid, "VmHWM")
        huge_calls = [c for c in self.tg.calls() if "over the bound" in (c["error"] or "")]
        print("tollgate VmHWM %d KiB before, %d KiB after %d answers of 64 MiB"
              % (before, after, len(huge_calls)), file=sys.stderr)
        self.assertLess(after - before, 16 * 1024, (before, after))
        self.assertGreaterEqual(len(huge_calls), 2 * len(ops))
        self.assert_safe()


if __name__ == "__main__":
    tgtest.main_unittest()
