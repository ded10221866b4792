"""The exit, end to end (issue 4): real tollgate processes against a real
tollgate-stub on loopback, judged from outside — the provider's arrival
record, its execution ledger, and tollgate's own call log.

Margins are for a noisy 2-core machine: spacing is judged on the call log's
monotonic start times (what the exit controls), never below the configured
interval; rates and waits get a few percent or a few hundred ms of slack.
"""

import collections
import os
import random
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgprovider  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events, min_gap, sleep_until  # noqa: E402

INTERVAL = 0.2  # 5 starts/s


def contract_arrivals(stub):
    """The stub's arrivals on the provider's contract: not its admin API nor
    an OAuth 2.0 token call (tgprovider.contract_arrivals)."""
    return tgprovider.contract_arrivals(stub.arrivals(), stub.profile)


def by_request_id(items):
    out = collections.defaultdict(list)
    for it in items:
        out[it.get("request_id")].append(it)
    return out


# A notification-only provider (Adyen) has no query: the tests whose
# subject is a reconciliation query cannot apply to it (its outcomes come by
# notification: test_profile_adyen judges those).
no_query = unittest.skipIf(
    tgprovider.notification_only(),
    "a notification-only provider (%s) has no query to reconcile by" % tgprovider.PROFILE)


class ExitTest(unittest.TestCase):
    def assert_one_to_one(self, stub, calls):
        """Every provider arrival matches exactly one logged start."""
        arrivals = contract_arrivals(stub)
        self.assertTrue(arrivals, "no arrival on the provider's contract")
        arr = by_request_id(arrivals)
        log = by_request_id(calls)
        for rid, items in arr.items():
            self.assertEqual(len(items), 1, "request id %r arrived %d times (hidden re-send)"
                             % (rid, len(items)))
            self.assertIn(rid, log, "arrival %r has no logged start (bypass)" % rid)
            self.assertEqual(len(log[rid]), 1)
        return arrivals

    def assert_executed_once(self, stub, op_ids):
        ledger = stub.ledger()["operations"]
        for op in op_ids:
            self.assertEqual(ledger.get(op, {}).get("executions", 0), 1, op)
        self.assertLessEqual(max(v["executions"] for v in ledger.values()), 1)

    def test_fast_provider_paced(self):
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
            tg.start("serve")
            ops = ["fast-%02d" % i for i in range(60)]
            # one batch: the backlog is there at once, so the rate below is
            # the exit's pace, not the intake's (60 single POSTs on a busy
            # machine's MariaDB could fall behind 5/s and leave slots empty)
            status, _, body = tg.submit_batch(ops)
            self.assertEqual(status, 200, body)
            self.assertEqual([r["status"] for r in body["results"]], [202] * len(ops), body)
            final = tg.wait_final(ops, timeout=40)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()))
            calls = tg.calls()
            self.assertEqual(len(calls), 60)
            self.assertGreaterEqual(min_gap(calls), INTERVAL - 1e-9)
            self.assertLessEqual(max(c["in_flight"] for c in calls), 10)
            s = sorted(c["start_mono_ns"] for c in calls)
            rate = (len(s) - 1) / ((s[-1] - s[0]) / 1e9)
            self.assertGreater(rate, 5.0 * 0.95, "achieved %.3f/s" % rate)
            self.assertLessEqual(rate, 5.0 + 1e-6, "achieved %.3f/s" % rate)
            self.assert_one_to_one(stub, calls)
            self.assert_executed_once(stub, ops)

    @no_query
    def test_slow_provider_reconciles_with_same_key(self):
        # 3.5 s at the provider > 3 s timeout: every POST ends unknown, is
        # queried with the same key, and is found executed.
        with tgtest.start_stub("--mode", "slow:3500", "--query-mode", "fast") as stub, \
                Tollgate(stub.url, provider={"timeout_ms": 3000}) as tg:
            tg.start("serve")
            ops = ["slow-%02d" % i for i in range(14)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            final = tg.wait_final(ops, timeout=60)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()), final)
            calls = tg.calls()
            posts = [c for c in calls if c["kind"] != "query"]
            queries = [c for c in calls if c["kind"] == "query"]
            self.assertEqual(len(posts), len(ops))  # no re-send was needed
            self.assertTrue(all(c["class"] == "unknown" for c in posts))
            self.assertGreaterEqual(len(queries), len(ops))
            # The cap binds: 5/s x 3 s would want 15 open; never more than 10.
            self.assertEqual(max(c["in_flight"] for c in calls), 10)
            self.assertGreaterEqual(min_gap(calls), INTERVAL - 1e-9)
            arrivals = self.assert_one_to_one(stub, calls)
            keys = collections.Counter(a["idempotency_key"] for a in arrivals
                                       if a["method"] == "POST")
            self.assertEqual(set(keys), set(ops))
            self.assertEqual(set(keys.values()), {1})
            self.assert_executed_once(stub, ops)

    @no_query
    def test_refund_failed_at_the_provider_is_rejected_after_one_query(self):
        # The provider takes the POST, refuses the refund for good and answers
        # 500: the outcome is unknown, so the exit asks with the same key
        # (never re-sends) and the query's "failed" makes the operation
        # rejected. No money moved: zero executions at the provider.
        with tgtest.start_stub("--mode", "fail:card_expired", "--query-mode", "fast") as stub, \
                Tollgate(stub.url) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("fail-1")[0], 202)
            final = tg.wait_final(["fail-1"], timeout=30)["fail-1"]
            self.assertEqual(final["state"], "rejected", final)
            self.assertEqual((final["attempts_made"], final["queries_made"]), (1, 1), final)
            self.assertIsNone(final["refund_id"])
            calls = tg.calls()
            self.assertEqual([(c["kind"] == "query", c["http_status"], c["class"])
                              for c in calls],
                             [(False, 500, "unknown"), (True, 200, "rejected")], calls)
            self.assertEqual(calls[0]["attempt"], 1)
            # the provider's reason reaches the operator (its code, not its body)
            self.assertEqual(calls[1]["error"], "provider failure_code card_expired")
            arrivals = self.assert_one_to_one(stub, calls)
            self.assertEqual([(a["method"], a["idempotency_key"], a["answer"], a["executed"])
                              for a in arrivals],
                             [("POST", "fail-1", 500, False), ("GET", "fail-1", 200, False)])
            ledger = stub.ledger()
            self.assertEqual(ledger["total_executions"], 0)
            self.assertEqual(ledger["operations"]["fail-1"]["failure_code"], "card_expired")
            self.assertEqual(stub.query("fail-1")[2]["status"], "failed")

    def test_drop_on_keepalive_has_no_hidden_resend(self):
        # Keep-alive on: some POSTs land on a reused connection that the
        # provider then drops after executing. libcurl would silently re-send
        # those; the exit must not.
        with tgtest.start_stub("--mode", "mix", "--mix", "fast=50,drop=50", "--seed", "7",
                               "--query-mode", "fast") as stub, \
                Tollgate(stub.url, provider={"reuse_connections": "true"},
                         exit={"starts_per_second": 20}) as tg:
            tg.start("serve")
            ops = ["drop-%02d" % i for i in range(30)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            final = tg.wait_final(ops, timeout=60)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()), final)
            calls = tg.calls()
            arrivals = self.assert_one_to_one(stub, calls)
            self.assertTrue(any(a.get("answer") == "dropped" for a in arrivals),
                            "the stub dropped nothing; the test proves nothing")
            self.assert_executed_once(stub, ops)

    def test_retry_after_holds_every_start(self):
        with tgtest.start_stub("--mode", "unavailable:2") as stub, \
                Tollgate(stub.url) as tg:
            tg.start("serve")
            ops = ["ra-%d" % i for i in range(4)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            tgtest.wait_until(lambda: len(contract_arrivals(stub)) >= 3, timeout=15,
                              what="three arrivals")
            stub.set_mode(mode="fast")
            tg.wait_final(ops, timeout=30)
            arrivals = contract_arrivals(stub)
            self.assertTrue(arrivals)
            t = [a["mono_ns"] / 1e9 for a in arrivals]
            for i, a in enumerate(arrivals[:-1]):
                if a.get("answer") == 503:
                    self.assertGreaterEqual(t[i + 1] - t[i], 2.0,
                                            "a start came %.3fs after a 503 with "
                                            "Retry-After: 2" % (t[i + 1] - t[i]))

    def test_kill9_five_times_loses_nothing(self):
        rng = random.Random(42)
        with tgtest.start_stub("--mode", "mix", "--mix", "fast=60,slow=20,drop=20", "--delay-ms", "1500",
                               "--seed", "3", "--query-mode", "fast") as stub, \
                Tollgate(stub.url, provider={"timeout_ms": 1000}) as tg:
            tg.start("api")
            ops = ["k9-%02d" % i for i in range(30)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            for _ in range(5):
                # The scenario: a kill -9 at a random moment 0.2 .. 1.5 s
                # after the dispatcher began to send. It must be sending by
                # then, else its kill proves nothing: after a takeover it
                # first waits a call timeout, 1/rate and 1.5 s (design.md,
                # invariant 6), longer on a loaded machine; so wait for its
                # first call, then for the moment.
                kill_after = rng.uniform(0.2, 1.5)
                d = tg.start("dispatch", wait_api=False)
                tgtest.wait_until(lambda: log_events(d, "call_start"), timeout=20,
                                  what="dispatcher sending")
                sleep_until(time.monotonic() + kill_after)
                d.send_signal(signal.SIGKILL)
                d.popen.wait()
            tg.start("dispatch", wait_api=False)
            final = tg.wait_final(ops, timeout=90)
            calls = tg.calls()
            arrivals = self.assert_one_to_one(stub, calls)
            posts = collections.Counter(a["idempotency_key"] for a in arrivals
                                        if a["method"] == "POST")
            self.assertLessEqual(max(posts.values()), 3, posts)
            self.assertEqual(set(posts), set(ops))  # one key per operation
            ledger = stub.ledger()["operations"]
            for op, rec in final.items():
                n = ledger.get(op, {}).get("executions", 0)
                self.assertLessEqual(n, 1)
                if rec["state"] == "succeeded":
                    self.assertEqual(n, 1, op)
            self.assertGreaterEqual(sum(r["state"] == "succeeded" for r in final.values()),
                                    len(ops) - 2)
            self.assertGreaterEqual(min_gap(calls), INTERVAL - 1e-9)
            self.assertGreaterEqual(len({c["epoch"] for c in calls}), 5)

    def test_paused_owner_keeps_the_exit(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, provider={"timeout_ms": 1000}) as tg:
            tg.start("api")
            a = tg.start("dispatch", wait_api=False)
            ops = ["own-%02d" % i for i in range(20)]
            for op in ops[:10]:
                self.assertEqual(tg.submit(op)[0], 202)
            tgtest.wait_until(lambda: len(stub.arrivals()) >= 2, what="first sends")
            tg.stop_between_transactions(a)
            tgtest.wait_until(stub.idle, what="a's calls on the wire landed")
            b = tg.start("dispatch", wait_api=False)
            tgtest.wait_until(lambda: log_events(b, "standby"), what="b in standby")
            for op in ops[10:]:
                self.assertEqual(tg.submit(op)[0], 202)
            before = len(stub.arrivals())
            time.sleep(2.5)  # the scenario: time passes and nobody may send
            self.assertEqual(len(stub.arrivals()), before, "someone sent while the owner "
                             "was paused")
            # --no-wait reports the owner and exits non-zero.
            nw = tg.start("dispatch", "--no-wait", wait_api=False)
            self.assertEqual(nw.popen.wait(10), 3)
            self.assertIn("another dispatcher owns the exit", nw.stderr_text())
            # Resumed: still one exit.
            a.send_signal(signal.SIGCONT)
            tgtest.wait_until(lambda: len(stub.arrivals()) > before + 2, what="a resumed")
            # The scenario: time passes (two of the standby's 250 ms tries)
            # and the standby must not take the exit from a live owner.
            time.sleep(0.5)
            self.assertEqual(log_events(b, "owner"), [], "the standby took the exit while "
                             "the owner lived")
            # The owner dies: the standby takes over, after one call timeout.
            a.send_signal(signal.SIGKILL)
            a.popen.wait()
            killed_wall_ms = time.time() * 1000
            final = tg.wait_final(ops, timeout=40)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()))
            self.assertTrue(log_events(b, "owner"))
            calls = tg.calls()
            epochs = sorted({c["epoch"] for c in calls})
            b_calls = [c for c in calls if c["epoch"] == epochs[-1]]
            if b_calls:
                self.assertGreaterEqual(min(c["start_wall"] for c in b_calls),
                                        killed_wall_ms + 1000 - 50)
            self.assert_one_to_one(stub, calls)
            self.assert_executed_once(stub, ops)

    def test_standby_starts_beside_an_owner_frozen_in_a_write(self):
        """A SQLite store has one write lock. An owner frozen inside a
        transaction keeps it, and a second dispatcher started then must still
        open the store and wait as a standby (it once failed to open: the
        schema check took the write lock), while the intake answers 503
        store_busy, retryable. Resumed, the owner goes on and the standby
        stays one."""
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, provider={"timeout_ms": 1000},
                         exit={"starts_per_second": 20}) as tg:
            if not tg.store_url.startswith("sqlite://"):
                self.skipTest("SQLite's single write lock")
            if os.environ.get("TG_TEST_TLS"):
                self.skipTest("the store's lock, not the provider's transport: plain HTTP only")
            tg.start("api")
            ops = ["frz-%03d" % i for i in range(102)]
            for op in ops[:100]:
                self.assertEqual(tg.submit(op)[0], 202)
            a = tg.start("dispatch", wait_api=False)
            tgtest.wait_until(lambda: len(stub.arrivals()) >= 1, what="first sends")
            # a caught inside a transaction: a few stops in a hundred at
            # 20/s, while the 100 refunds last (5 s)
            tg.stop_inside_a_transaction(a, timeout=4)
            b = tg.start("dispatch", wait_api=False)
            tgtest.wait_until(lambda: log_events(b, "standby"), what="b in standby")
            self.assertIsNone(b.poll(), b.stderr_text())
            status, headers, body = tg.submit(ops[100])
            self.assertEqual(status, 503, body)
            self.assertEqual(body["error"]["code"], "store_busy", body)
            self.assertIn("retry-after", headers)
            a.send_signal(signal.SIGCONT)
            self.assertEqual(tg.submit(ops[100])[0], 202)
            self.assertEqual(tg.submit(ops[101])[0], 202)
            final = tg.wait_final(ops, timeout=40)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()))
            self.assertEqual(log_events(b, "owner"), [], "the standby took the exit while "
                             "the owner lived")
            self.assertIsNone(b.poll(), b.stderr_text())
            self.assert_executed_once(stub, ops)

    def test_sigterm_drains_open_calls(self):
        with tgtest.start_stub("--mode", "slow:800") as stub, Tollgate(stub.url) as tg:
            p = tg.start("serve")
            for op in ("term-1", "term-2"):
                self.assertEqual(tg.submit(op)[0], 202)
            tgtest.wait_until(lambda: contract_arrivals(stub), what="a call open")
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.popen.wait(10), 0, p.stderr_text())
            # Restart only the API to read what was recorded.
            tg.start("api")
            calls = tg.calls()
            self.assertTrue(calls)
            self.assertTrue(all(c["end_wall"] is not None for c in calls),
                            "a call left open at exit: %r" % calls)

    @no_query  # its second group is made of due queries
    def test_groups_take_turns(self):
        # Scaled down from "1,000 due retries vs new refunds": 300 new refunds
        # keep the first group full while their 500s (unknown) fill the again
        # group with due queries. With both groups non-empty the exit must
        # alternate: neither starves the other.
        with tgtest.start_stub("--mode", "e500", "--query-mode", "fast") as stub, \
                Tollgate(stub.url, exit={"starts_per_second": 100},
                         retry={"query_interval_ms": 500}) as tg:
            # The backlog is in place before the exit opens, so the first
            # group never runs dry while the test judges the turns.
            tg.start("api")
            ops = ["turn-%03d" % i for i in range(300)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            tg.start("dispatch", wait_api=False)
            tg.wait_final(ops, timeout=60)
            calls = sorted(tg.calls(), key=lambda c: c["start_mono_ns"])
            kinds = ["q" if c["kind"] == "query" else "f" for c in calls]
            first_q = kinds.index("q")
            last_f = len(kinds) - 1 - kinds[::-1].index("f")
            window = kinds[first_q:last_f + 1]
            self.assertGreater(len(window), 100, "the groups never overlapped")
            # Where both groups have work they alternate; a group that runs
            # empty for a moment (the first queries fall due one by one)
            # yields its turn, which shows up as a short run only.
            runs, run = [], 1
            for a, b in zip(window, window[1:]):
                run = run + 1 if a == b else 1
                runs.append(run)
            self.assertLessEqual(max(runs), 6, "one group starved the other: %s"
                                 % "".join(window))
            nq = window.count("q")
            self.assertLess(abs(nq - (len(window) - nq)), 0.1 * len(window),
                            "turns not shared: %s" % "".join(window))
            self.assert_executed_once(stub, ops)

    @no_query
    def test_query_sub_quota_narrows_the_account(self):
        # Every POST times out (1.5 s > 1 s) and is reconciled by a query;
        # queries may start at most 2/s inside the account's 10/s.
        with tgtest.start_stub("--mode", "slow:1500", "--query-mode", "fast") as stub, \
                Tollgate(stub.url, provider={"timeout_ms": 1000, "connect_timeout_ms": 500},
                         exit={"starts_per_second": 10, "query_starts_per_second": 2},
                         retry={"query_interval_ms": 200}) as tg:
            tg.start("serve")
            ops = ["sq-%02d" % i for i in range(12)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            tg.wait_final(ops, timeout=60)
            calls = tg.calls()
            queries = [c for c in calls if c["kind"] == "query"]
            self.assertGreaterEqual(len(queries), len(ops))
            self.assertGreaterEqual(min_gap(queries), 0.5 - 1e-9)
            self.assertGreaterEqual(min_gap(calls), 0.1 - 1e-9)

    def test_store_outage_pauses_the_exit_and_loses_nothing(self):
        # Another process holds SQLite's write lock for longer than the
        # store's busy timeout (5 s) while calls are open: their outcomes
        # cannot be committed. The exit keeps them, starts nothing new, and
        # settles them once the store answers again, without a restart.
        import sqlite3
        with tgtest.start_stub("--mode", "slow:1000") as stub, Tollgate(stub.url) as tg:
            p = tg.start("serve")
            ops = ["out-%02d" % i for i in range(6)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            tgtest.wait_until(lambda: len(stub.arrivals()) >= 2, what="calls open")
            con = sqlite3.connect(tg.db, timeout=10, isolation_level=None)
            con.execute("BEGIN IMMEDIATE")
            locked_at = time.monotonic()
            arrivals_locked = len(stub.arrivals())
            time.sleep(7.5)  # the scenario: the store stays locked this long
            # ... and the exit saw it fail while it was down (not only after).
            tgtest.wait_until(lambda: log_events(p, "exit_paused_store"), timeout=10,
                              what="the exit paused on the store")
            self.assertLessEqual(len(stub.arrivals()), arrivals_locked + 1,
                                 "calls kept starting while the store was down")
            con.execute("ROLLBACK")
            con.close()
            self.assertGreater(time.monotonic() - locked_at, 7)
            final = tg.wait_final(ops, timeout=40)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()), final)
            self.assertTrue(log_events(p, "exit_paused_store"), "the store never failed")
            self.assertTrue(log_events(p, "exit_resumed_store"))
            self.assert_one_to_one(stub, tg.calls())
            self.assert_executed_once(stub, ops)


# The methods that judge behaviour only: outcomes, counts, one arrival per
# logged start, executions at the provider, and gaps in tollgate's own call
# log (a floor the exit keeps itself, which load can only widen). They run in
# the CTest entries *.parallel, beside other tests (tests/CMakeLists.txt,
# TG_IT_SPLIT). Every other method judges a timing load could break (a rate,
# the cap reached, spacing at the stub, a floor measured from the test's own
# clock, the turns' run lengths) and runs in *.serial, alone.
BEHAVIOUR_ONLY = (
    "test_refund_failed_at_the_provider_is_rejected_after_one_query",
    "test_drop_on_keepalive_has_no_hidden_resend",
    "test_kill9_five_times_loses_nothing",
    "test_standby_starts_beside_an_owner_frozen_in_a_write",
    "test_sigterm_drains_open_calls",
    "test_query_sub_quota_narrows_the_account",
    "test_store_outage_pauses_the_exit_and_loses_nothing",
)


if __name__ == "__main__":
    tgtest.main_unittest(parallel=BEHAVIOUR_ONLY)
