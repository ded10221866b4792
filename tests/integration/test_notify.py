#!/usr/bin/env python3
"""[notify]: events delivered to the caller's endpoint (issue 28, part 1).

Every refund that ends or goes to (or leaves) manual is announced by a
signed POST to notify.url, at least once, in order per refund, and the same
events with the same ids are served by GET /v1/events. The receiver is
`tollgate-stub receive` (src/stub/receiver.c), which checks the signature
and logs one JSON line per delivery.

- kill -9 of tollgate while deliveries are open loses no event;
- a receiver that is down, then up, gets every event, in order per refund;
- a wrong secret is refused by the receiver; a rotation (two secrets) is not;
- a slow receiver does not change the exit's start spacing;
- without [notify] nothing is delivered (and the feed still serves events).
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate, starts  # noqa: E402

SECRET = "notify-secret-0123456789"
FAST_RETRY = {"max_attempts": 1, "backoff_base_ms": 20, "backoff_min_ms": 0,
              "backoff_cap_ms": 100}
FAST_EXIT = {"starts_per_second": 50, "default_hold_ms": 20, "default_hold_max_ms": 20}


def secret_file(d, *secrets, name="notify-secret"):
    path = os.path.join(d, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write("\n".join(secrets) + "\n")
    return path


class Receiver(tgtest.Proc):
    """tollgate-stub receive on a port, logging to a file."""

    def __init__(self, port, secret_path, *flags):
        self.port = port
        self.log = secret_path + ".%d.log" % port
        argv = [tgtest.binary("tollgate-stub"), "receive", "--port", str(port),
                "--secret-file", secret_path, "--log", self.log] + list(flags)
        super().__init__(argv)
        tgtest.wait_until(self._listening, timeout=10, what="receiver up")

    def _listening(self):
        if self.poll() is not None:
            raise RuntimeError("receiver exited:\n" + self.stderr_text())
        return "listening" in self.stderr_text()

    def lines(self):
        try:
            with open(self.log) as f:
                return [json.loads(x) for x in f if x.strip()]
        except OSError:
            return []

    def acked(self):
        """Events answered 2xx (a slow answer is logged when it is given)."""
        return [x for x in self.lines() if x.get("sig") == "ok" and x.get("fault") in
                ("none", "slow")]

    def ok(self):
        """Events received and answered at once (no fault), in arrival order."""
        return [x for x in self.lines() if x.get("sig") == "ok" and x.get("fault") == "none"]


def notify_keys(url, secret_path, **more):
    keys = {"url": url, "secret_file": secret_path, "backoff_base_ms": 100,
            "backoff_cap_ms": 300, "timeout_ms": 2000}
    keys.update(more)
    return keys


def feed(tg, after=0, delivery=None):
    q = "/v1/events?after=%d&limit=1000" % after
    if delivery:
        q += "&delivery=" + delivery
    st, _, body = tgtest.http_json("GET", tg.api + q, headers=tg.headers())
    assert st == 200, body
    return body


def assert_in_order_per_op(test, received, stored):
    """Every stored event was received; per operation, the first receipts of
    its events come in id order."""
    ids = {e["id"] for e in stored}
    test.assertEqual({r["id"] for r in received} & ids, ids)
    first = {}
    for i, r in enumerate(received):
        first.setdefault(r["id"], (i, r))
    by_op = {}
    for e in stored:
        by_op.setdefault(e["operation_id"], []).append(e["id"])
    for op, eids in by_op.items():
        order = sorted(eids, key=lambda i: first[i][0])
        test.assertEqual(order, sorted(eids), op)


class NotifyTest(unittest.TestCase):
    def test_delivered_signed_and_in_the_feed(self):
        with tgtest.start_stub() as stub:
            port = tgtest.free_port()
            d = tempfile.mkdtemp(prefix="tgnotify-")
            path = secret_file(d, SECRET)
            with Tollgate(stub.url, notify=notify_keys("http://127.0.0.1:%d/hook" % port,
                                                       path)) as tg, \
                    Receiver(port, path) as rx:
                tg.start("serve")
                ops = ["d-%02d" % i for i in range(8)]
                for op in ops:
                    self.assertEqual(tg.submit(op)[0], 202)
                tg.wait_final(ops, timeout=30)
                tgtest.wait_until(lambda: len({x["id"] for x in rx.ok()}) >= 8, timeout=20,
                                  what="8 events received")
                events = feed(tg)["events"]
                self.assertEqual(sorted(e["operation_id"] for e in events), ops)
                self.assertTrue(all(e["state"] == "succeeded" for e in events))
                self.assertTrue(all(e["previous_state"] == "in_flight" for e in events))
                tgtest.wait_until(lambda: all(e["delivery"] == "delivered"
                                              for e in feed(tg)["events"]),
                                  timeout=10, what="all marked delivered")
                got = {x["id"]: x for x in rx.ok()}
                for e in events:
                    self.assertEqual(got[e["id"]]["operation_id"], e["operation_id"])
                    self.assertEqual(got[e["id"]]["state"], "succeeded")
                st, _, raw = tgtest.http_request("GET", tg.api + "/metrics",
                                                 headers=tg.headers())
                text = raw.decode()
                self.assertIn("tollgate_notify_delivered_total 8\n", text)
                self.assertIn("tollgate_notify_oldest_undelivered_age_seconds 0.000\n", text)
                # paging: after the 4th id, the last four
                self.assertEqual([e["id"] for e in feed(tg, events[3]["id"])["events"]],
                                 [e["id"] for e in events[4:]])
                st, _, body = tgtest.http_json("GET", tg.api + "/v1/events?after=x",
                                               headers=tg.headers())
                self.assertEqual((st, body["error"]["code"]), (400, "invalid_parameter"))

    def test_kill9_during_delivery_loses_no_event(self):
        with tgtest.start_stub() as stub:
            port = tgtest.free_port()
            d = tempfile.mkdtemp(prefix="tgnotify-")
            path = secret_file(d, SECRET)
            # the first deliveries (as many as may be open) hang for 2 s: they
            # are open when tollgate dies, and must come again afterwards
            # an operation in flight at the kill is asked about soon after
            with Tollgate(stub.url, retry={"query_interval_ms": 200}, notify=notify_keys(
                    "http://127.0.0.1:%d/" % port, path, max_in_flight=4)) as tg, \
                    Receiver(port, path, "--fault", "slow:2000", "--fault-first", "4") as rx:
                p = tg.start("serve")
                ops = ["k-%02d" % i for i in range(24)]
                for op in ops:
                    self.assertEqual(tg.submit(op)[0], 202)
                tgtest.wait_until(lambda: len(rx.lines()) >= 1, timeout=20,
                                  what="deliveries under way")
                time.sleep(0.2)  # the others of the first four go out too
                p.send_signal(signal.SIGKILL)
                p.popen.wait()
                tg.start("serve")
                tg.wait_final(ops, timeout=30)
                stored = feed(tg)["events"]
                self.assertEqual(len(stored), len(ops))
                tgtest.wait_until(lambda: {x["id"] for x in rx.ok()} >= {e["id"] for e in stored},
                                  timeout=40, what="every event received")
                assert_in_order_per_op(self, rx.ok(), stored)

    def test_receiver_down_then_up_gets_every_event_in_order(self):
        # 503 to everything, one attempt: each refund goes to manual; the
        # operator resolves it: two events per refund
        with tgtest.start_stub("--mode", "unavailable", "--retry-after", "none") as stub:
            port = tgtest.free_port()
            d = tempfile.mkdtemp(prefix="tgnotify-")
            path = secret_file(d, SECRET)
            with Tollgate(stub.url, retry=dict(FAST_RETRY, count_limited="true"),
                          exit=FAST_EXIT,
                          notify=notify_keys("http://127.0.0.1:%d/" % port, path)) as tg:
                tg.start("serve")
                ops = ["u-%02d" % i for i in range(5)]
                for op in ops:
                    self.assertEqual(tg.submit(op)[0], 202)
                tg.wait_final(ops, timeout=30)
                for op in ops:
                    st, _, body = tgtest.http_json(
                        "POST", tg.api + "/v1/manual/%s/resolve" % op,
                        {"operator": "alice", "reason": "checked", "outcome": "succeeded"},
                        headers=tg.headers())
                    self.assertEqual(st, 200, body)
                time.sleep(1.5)  # deliveries fail meanwhile: nobody listens
                stored = feed(tg)["events"]
                self.assertEqual(len(stored), 2 * len(ops))
                self.assertTrue(any(e["attempts"] > 0 and e["last_error"] for e in stored),
                                stored)
                # its first answer is slow: the refund's next event must wait for it
                with Receiver(port, path, "--fault", "slow:1000", "--fault-first", "1") as rx:
                    tgtest.wait_until(
                        lambda: {x["id"] for x in rx.acked()} >= {e["id"] for e in stored},
                        timeout=20, what="every event after the receiver came up")
                    assert_in_order_per_op(self, rx.acked(), stored)
                    for e in stored:
                        self.assertIn(e["state"], ("manual", "succeeded"))

    def test_parked_past_budget_then_redelivered(self):
        with tgtest.start_stub() as stub:
            port = tgtest.free_port()
            d = tempfile.mkdtemp(prefix="tgnotify-")
            path = secret_file(d, SECRET)
            with Tollgate(stub.url, notify=notify_keys("http://127.0.0.1:%d/" % port, path,
                                                       give_up_s=1)) as tg:
                tg.start("serve")
                self.assertEqual(tg.submit("p-1")[0], 202)
                tg.wait_final(["p-1"], timeout=20)
                tgtest.wait_until(lambda: feed(tg, delivery="parked")["events"], timeout=20,
                                  what="the event parked (nobody listens)")
                ev = feed(tg)["events"][0]
                self.assertEqual(ev["delivery"], "parked")
                self.assertGreater(ev["attempts"], 1)
                out = subprocess.run([tgtest.binary("tollgate"), "events", "list", "--config",
                                      tg.config, "--delivery", "parked"],
                                     capture_output=True, text=True, check=True).stdout
                self.assertEqual([json.loads(x)["id"] for x in out.splitlines()], [ev["id"]])
                with Receiver(port, path) as rx:
                    time.sleep(1.0)
                    self.assertEqual(rx.lines(), [])  # parked: not tried again by itself
                    subprocess.run([tgtest.binary("tollgate"), "events", "redeliver",
                                    str(ev["id"]), "--config", tg.config], check=True,
                                   capture_output=True)
                    tgtest.wait_until(lambda: [x["id"] for x in rx.ok()] == [ev["id"]],
                                      timeout=10, what="the re-delivery")
                    tgtest.wait_until(lambda: feed(tg)["events"][0]["delivery"] == "delivered",
                                      timeout=10, what="marked delivered")

    def test_wrong_secret_refused_rotation_accepted(self):
        with tgtest.start_stub() as stub:
            port = tgtest.free_port()
            d = tempfile.mkdtemp(prefix="tgnotify-")
            wrong = secret_file(d, "other-secret-0123456789", name="wrong")
            right = secret_file(d, SECRET, name="right")
            rotating = secret_file(d, "new-secret-0123456789", SECRET, name="rotating")
            with Tollgate(stub.url, notify=notify_keys("http://127.0.0.1:%d/" % port,
                                                       wrong)) as tg, \
                    Receiver(port, right) as rx:
                tg.start("serve")
                self.assertEqual(tg.submit("w-1")[0], 202)
                tgtest.wait_until(lambda: any(x.get("sig") == "bad" for x in rx.lines()),
                                  timeout=20, what="a refused delivery")
                self.assertEqual(rx.ok(), [])
            port = tgtest.free_port()
            with Tollgate(stub.url, notify=notify_keys("http://127.0.0.1:%d/" % port,
                                                       rotating)) as tg, \
                    Receiver(port, right) as rx:
                tg.start("serve")
                self.assertEqual(tg.submit("r-1")[0], 202)
                tgtest.wait_until(lambda: len(rx.ok()) == 1, timeout=20,
                                  what="a delivery signed by both secrets")
            # a forged delivery straight to the receiver
            port = tgtest.free_port()
            with Receiver(port, right) as rx:
                body = json.dumps({"id": 1}).encode()
                st, _, _ = tgtest.http_request(
                    "POST", "http://127.0.0.1:%d/" % port, body,
                    {"Tollgate-Signature": "t=%d,v1=%s" % (int(time.time()), "0" * 64)})
                self.assertEqual(st, 400)
                st, _, _ = tgtest.http_request("POST", "http://127.0.0.1:%d/" % port, body)
                self.assertEqual(st, 400)
                self.assertEqual([x["sig"] for x in rx.lines()], ["bad", "missing"])

    def test_no_notify_section_delivers_nothing(self):
        with tgtest.start_stub() as stub, Tollgate(stub.url) as tg:
            p = tg.start("serve")
            self.assertEqual(tg.submit("n-1")[0], 202)
            tg.wait_final(["n-1"], timeout=20)
            # recorded (the pull feed) but never delivered
            events = feed(tg)["events"]
            self.assertEqual([e["operation_id"] for e in events], ["n-1"])
            time.sleep(0.5)
            self.assertEqual(feed(tg)["events"][0]["delivery"], "due")
            self.assertEqual(feed(tg)["events"][0]["attempts"], 0)
            self.assertNotIn("notify", p.stderr_text())
            st, _, raw = tgtest.http_request("GET", tg.api + "/metrics", headers=tg.headers())
            self.assertNotIn("tollgate_notify", raw.decode())

    def test_slow_receiver_does_not_change_exit_spacing(self):
        rate = 20.0
        gaps = {}
        for slow in (False, True):
            with tgtest.start_stub() as stub:
                port = tgtest.free_port()
                d = tempfile.mkdtemp(prefix="tgnotify-")
                path = secret_file(d, SECRET)
                sections = {"exit": {"starts_per_second": rate}}
                if slow:
                    sections["notify"] = notify_keys("http://127.0.0.1:%d/" % port, path,
                                                     max_in_flight=2, timeout_ms=5000)
                with Tollgate(stub.url, **sections) as tg:
                    rx = Receiver(port, path, "--fault", "slow:3000") if slow else None
                    try:
                        tg.start("serve")
                        ops = ["s-%02d" % i for i in range(40)]
                        for op in ops:
                            self.assertEqual(tg.submit(op)[0], 202)
                        tg.wait_final(ops, timeout=40)
                        st = sorted(starts(tg.calls()))
                        gaps[slow] = [b - a for a, b in zip(st, st[1:])]
                        if slow:  # deliveries were open (slow answers are logged when given)
                            tgtest.wait_until(lambda: rx.lines(), timeout=10,
                                              what="the slow receiver answered")
                            self.assertEqual(rx.lines()[0]["fault"], "slow")
                    finally:
                        if rx:
                            rx.close()
        interval = 1.0 / rate
        for slow in (False, True):
            g = gaps[slow]
            mean = sum(g) / len(g)
            # the exit keeps its spacing: never closer, and on average on time
            self.assertGreaterEqual(min(g), interval * 0.95, (slow, min(g)))
            self.assertLess(mean, interval * 1.3, (slow, mean))
        mean_fast = sum(gaps[False]) / len(gaps[False])
        mean_slow = sum(gaps[True]) / len(gaps[True])
        print("start spacing, mean/min ms: without [notify] %.2f/%.2f, slow receiver %.2f/%.2f"
              % (mean_fast * 1e3, min(gaps[False]) * 1e3, mean_slow * 1e3,
                 min(gaps[True]) * 1e3), file=sys.stderr)
        self.assertLess(abs(mean_slow - mean_fast), interval * 0.2, (mean_fast, mean_slow))

    def test_long_poll(self):
        """GET /v1/events?wait=S answers at once when events exist, when one
        commits while it waits, or with an empty page at the end; a held
        poll holds no thread: other requests are answered meanwhile."""
        with tgtest.start_stub() as stub, \
                Tollgate(stub.url, api={"connection_timeout_s": 1}) as tg:
            p = tg.start("serve")
            url = tg.api + "/v1/events?after=0&wait=%d"

            def get(wait, after=0, timeout=40):
                t0 = time.monotonic()
                st, _, body = tgtest.http_json(
                    "GET", tg.api + "/v1/events?after=%d&wait=%s" % (after, wait),
                    headers=tg.headers(), timeout=timeout)
                return st, body, time.monotonic() - t0, time.monotonic()

            for bad in ("31", "-1", "x", "1.5"):
                st, body, _, _ = get(bad)
                self.assertEqual((st, body["error"]["code"], body["error"]["field"]),
                                 (400, "invalid_parameter", "wait"), bad)
            # nothing comes: an empty page at the end of the wait, which may
            # be longer than the idle timeout of a connection (1 s here)
            st, body, took, _ = get(2)
            self.assertEqual((st, body), (200, {"events": [], "next_after": 0}))
            self.assertGreaterEqual(took, 1.9)
            self.assertLess(took, 6)
            # one commits while the poll waits: answered with it, long before
            # the end of the wait; the API answers others meanwhile
            import threading
            out = {}
            polls = [threading.Thread(target=lambda i=i: out.__setitem__(i, get(25)))
                     for i in range(3)]
            for t in polls:
                t.start()
            time.sleep(1.0)
            st, body, took, _ = get(0)
            self.assertEqual((st, body["events"]), (200, []))
            self.assertLess(took, 1.0)  # not behind the held polls
            self.assertEqual(tg.submit("lp-1")[0], 202)
            tg.wait_final(["lp-1"], timeout=20)
            final_at = time.monotonic()
            for t in polls:
                t.join(30)
            for i in range(3):
                st, body, took, _ = out[i]
                self.assertEqual(st, 200)
                self.assertEqual([e["operation_id"] for e in body["events"]], ["lp-1"])
                self.assertEqual(body["next_after"], body["events"][0]["id"])
                self.assertLess(took, 15, out[i])
            # final_at is when the test's own status poll saw it (20 ms steps)
            print("long poll: answered at most %.0f ms after the final state was seen"
                  % ((max(o[3] for o in out.values()) - final_at) * 1e3), file=sys.stderr)
            # events exist: answered at once
            st, body, took, _ = get(25)
            self.assertEqual(len(body["events"]), 1)
            self.assertLess(took, 2)
            # after the last one: waits again, until the next one
            last = body["next_after"]
            st, body, took, _ = get(1, after=last)
            self.assertEqual((st, body), (200, {"events": [], "next_after": last}))
            # a poll held when tollgate stops does not hold up the stop
            held = threading.Thread(target=lambda: out.__setitem__("stop", _try(get, 25)))
            held.start()
            time.sleep(0.5)
            t0 = time.monotonic()
            p.stop()
            self.assertLess(time.monotonic() - t0, 8)
            held.join(30)
            self.assertFalse(held.is_alive())

    def test_per_refund_notify_url(self):
        """A refund's own notify_url, under a [notify] allow prefix, gets its
        events instead of notify.url; one under no prefix, or malformed, is a
        422 and nothing is stored; refunds without one go to notify.url."""
        with tgtest.start_stub() as stub:
            main_port, own_port = tgtest.free_port(), tgtest.free_port()
            d = tempfile.mkdtemp(prefix="tgnotify-")
            path = secret_file(d, SECRET)
            allow = "http://127.0.0.1:%d/own/" % own_port
            with Tollgate(stub.url, notify=notify_keys(
                    "http://127.0.0.1:%d/" % main_port, path, allow=allow)) as tg, \
                    Receiver(main_port, path) as main_rx, Receiver(own_port, path) as own_rx:
                tg.start("serve")

                def post(op, url, route="/v1/refunds"):
                    body = {"operation_id": op, "payment_id": "pay_1", "amount": 1500,
                            "currency": "TWD"}
                    if url is not None:
                        body["notify_url"] = url
                    if route.endswith(":batch"):
                        body = {"refunds": body}
                    return tgtest.http_json("POST", tg.api + route, body, tg.headers())

                self.assertEqual(post("own-1", allow + "r1")[0], 202)
                self.assertEqual(post("main-1", None)[0], 202)
                refused = {
                    "http://127.0.0.1:%d/other" % own_port: "notify_url_not_allowed",
                    "http://127.0.0.1:%d/own/" % main_port: "notify_url_not_allowed",
                    "https://127.0.0.1:%d/own/" % own_port: "notify_url_not_allowed",
                    "http://127.0.0.1:%d/owned" % own_port: "notify_url_not_allowed",
                    "http://u@127.0.0.1:%d/own/" % own_port: "invalid_field",
                    "ftp://127.0.0.1/own/": "invalid_field",
                    "": "invalid_field",
                }
                for i, (url, code) in enumerate(refused.items()):
                    st, _, body = post("bad-%d" % i, url)
                    self.assertEqual((st, body["error"]["code"], body["error"]["field"]),
                                     (422, code, "notify_url"), url)
                    self.assertEqual(tg.status("bad-%d" % i)[0], 404)
                st, _, body = tgtest.http_json(
                    "POST", tg.api + "/v1/refunds:batch",
                    {"refunds": [
                        {"operation_id": "own-2", "payment_id": "pay_1", "amount": 1500,
                         "currency": "TWD", "notify_url": allow + "r2"},
                        {"operation_id": "bad-b", "payment_id": "pay_1", "amount": 1500,
                         "currency": "TWD", "notify_url": "http://127.0.0.1:1/x"}]},
                    tg.headers())
                self.assertEqual([r["status"] for r in body["results"]], [202, 422], body)
                self.assertEqual(body["results"][1]["error"]["code"], "notify_url_not_allowed")
                tg.wait_final(["own-1", "main-1", "own-2"], timeout=30)
                tgtest.wait_until(lambda: len(own_rx.ok()) >= 2 and len(main_rx.ok()) >= 1,
                                  timeout=20, what="the three events delivered")
                time.sleep(0.5)
                self.assertEqual(sorted(x["operation_id"] for x in own_rx.ok()),
                                 ["own-1", "own-2"])
                self.assertEqual([x["operation_id"] for x in main_rx.ok()], ["main-1"])

    def test_notify_url_without_allow_or_main_url(self):
        """Without [notify] allow a notify_url is refused (422
        notify_url_not_configured); with allow but no notify.url, only the
        refunds that name one are delivered, the others stay due."""
        with tgtest.start_stub() as stub, Tollgate(stub.url) as tg:
            tg.start("serve")
            st, _, body = tgtest.http_json(
                "POST", tg.api + "/v1/refunds",
                {"operation_id": "x-1", "payment_id": "pay_1", "amount": 1500,
                 "currency": "TWD", "notify_url": "http://127.0.0.1:9/"}, tg.headers())
            self.assertEqual((st, body["error"]["code"]), (422, "notify_url_not_configured"))
        with tgtest.start_stub() as stub:
            port = tgtest.free_port()
            d = tempfile.mkdtemp(prefix="tgnotify-")
            path = secret_file(d, SECRET)
            allow = "http://127.0.0.1:%d/" % port
            with Tollgate(stub.url, notify={"allow": allow, "secret_file": path,
                                            "backoff_base_ms": 100,
                                            "backoff_cap_ms": 300}) as tg, \
                    Receiver(port, path) as rx:
                tg.start("serve")
                st, _, _ = tgtest.http_json(
                    "POST", tg.api + "/v1/refunds",
                    {"operation_id": "own-1", "payment_id": "pay_1", "amount": 1500,
                     "currency": "TWD", "notify_url": allow + "hook"}, tg.headers())
                self.assertEqual(st, 202)
                self.assertEqual(tg.submit("plain-1")[0], 202)
                tg.wait_final(["own-1", "plain-1"], timeout=30)
                tgtest.wait_until(lambda: rx.ok(), timeout=20, what="own-1's event")
                time.sleep(1.0)
                self.assertEqual([x["operation_id"] for x in rx.ok()], ["own-1"])
                plain = [e for e in feed(tg)["events"] if e["operation_id"] == "plain-1"]
                self.assertEqual([(e["delivery"], e["attempts"]) for e in plain], [("due", 0)])

    def test_account_notify_url(self):
        """notify.url and notify.secret_file in an [account.NAME] section: the
        account's events go there, signed with its secret."""
        with tgtest.start_stub() as stub:
            port = tgtest.free_port()
            d = tempfile.mkdtemp(prefix="tgnotify-")
            path = secret_file(d, SECRET)
            with Tollgate(stub.url, **{"account.default": {
                    "notify.url": "http://127.0.0.1:%d/acct" % port,
                    "notify.secret_file": path}}) as tg, Receiver(port, path) as rx:
                tg.start("serve")
                self.assertEqual(tg.submit("a-1")[0], 202)
                tg.wait_final(["a-1"], timeout=30)
                tgtest.wait_until(lambda: rx.ok(), timeout=20, what="a-1's event")
                self.assertEqual([x["operation_id"] for x in rx.ok()], ["a-1"])

    def test_two_accounts_each_to_its_own_url(self):
        """Two accounts in one tollgate, each with its own notify.url and
        secret: each account's events reach its receiver only, signed with
        its secret (the other receiver would refuse them)."""
        with tgtest.start_stub() as stub:
            pa, pb = tgtest.free_port(), tgtest.free_port()
            d = tempfile.mkdtemp(prefix="tgnotify-")
            sa = secret_file(d, "secret-of-a-0123456789", name="a")
            sb = secret_file(d, "secret-of-b-0123456789", name="b")
            with Tollgate(stub.url, **{
                    "account.a": {"notify.url": "http://127.0.0.1:%d/" % pa,
                                  "notify.secret_file": sa},
                    "account.b": {"notify.url": "http://127.0.0.1:%d/" % pb,
                                  "notify.secret_file": sb}}) as tg, \
                    Receiver(pa, sa) as rxa, Receiver(pb, sb) as rxb:
                tg.start("serve")
                ops = {"a": ["a-%d" % i for i in range(3)], "b": ["b-%d" % i for i in range(3)]}
                for account, ids in ops.items():
                    for op in ids:
                        st, _, body = tgtest.http_json(
                            "POST", tg.api + "/v1/refunds",
                            {"operation_id": op, "payment_id": "pay_1", "amount": 1500,
                             "currency": "TWD", "account": account}, tg.headers())
                        self.assertEqual(st, 202, body)
                tg.wait_final(ops["a"] + ops["b"], timeout=30)
                tgtest.wait_until(lambda: len(rxa.ok()) >= 3 and len(rxb.ok()) >= 3,
                                  timeout=20, what="every event at its account's receiver")
                time.sleep(0.5)
                self.assertEqual(sorted(x["operation_id"] for x in rxa.ok()), ops["a"])
                self.assertEqual(sorted(x["operation_id"] for x in rxb.ok()), ops["b"])
                self.assertEqual([x for x in rxa.lines() + rxb.lines() if x["sig"] != "ok"], [])

    def test_kill9_repeatedly_loses_no_event(self):
        """tollgate killed -9 three times while deliveries are open, to two
        receivers (notify.url, and a refund's own notify_url), with two events
        per refund (to manual, then resolved): afterwards every event has
        reached its own receiver, in order per refund, and none the other."""
        with tgtest.start_stub("--mode", "unavailable", "--retry-after", "none") as stub:
            p_main, p_own = tgtest.free_port(), tgtest.free_port()
            d = tempfile.mkdtemp(prefix="tgnotify-")
            path = secret_file(d, SECRET)
            own = "http://127.0.0.1:%d/own/" % p_own
            with Tollgate(stub.url, retry=dict(FAST_RETRY, count_limited="true"),
                          exit=FAST_EXIT,
                          notify=notify_keys("http://127.0.0.1:%d/" % p_main, path,
                                             allow=own, max_in_flight=4)) as tg, \
                    Receiver(p_main, path, "--fault", "slow:300") as rx_main, \
                    Receiver(p_own, path, "--fault", "slow:300") as rx_own:
                p = tg.start("serve")
                ops = ["m-%02d" % i for i in range(12)]
                for i, op in enumerate(ops):
                    body = {"operation_id": op, "payment_id": "pay_1", "amount": 1500,
                            "currency": "TWD"}
                    if i % 2:
                        body["notify_url"] = own + op
                    st, _, out = tgtest.http_json("POST", tg.api + "/v1/refunds", body,
                                                  tg.headers())
                    self.assertEqual(st, 202, out)
                tg.wait_final(ops, timeout=30)
                for op in ops:
                    st, _, out = tgtest.http_json(
                        "POST", tg.api + "/v1/manual/%s/resolve" % op,
                        {"operator": "alice", "reason": "checked", "outcome": "succeeded"},
                        headers=tg.headers())
                    self.assertEqual(st, 200, out)
                kills = 0
                dead = []  # answers in these windows went to a killed tollgate
                for _ in range(3):
                    seen = len(rx_main.lines()) + len(rx_own.lines())
                    tgtest.wait_until(
                        lambda: len(rx_main.lines()) + len(rx_own.lines()) > seen,
                        timeout=20, what="deliveries under way")
                    time.sleep(0.15)  # more are open (each answer takes 300 ms)
                    t_kill = time.time()
                    p.send_signal(signal.SIGKILL)
                    p.popen.wait()
                    kills += 1
                    # what the killed one had open is answered within 300 ms
                    # of its kill; the next one's answers come 300 ms after
                    # it started, later than that
                    dead.append((t_kill * 1000 - 5, t_kill * 1000 + 330))
                    p = tg.start("serve")
                stored = feed(tg)["events"]
                self.assertEqual(len(stored), 2 * len(ops))
                want_own = [e for e in stored if int(e["operation_id"][2:]) % 2]
                want_main = [e for e in stored if not int(e["operation_id"][2:]) % 2]

                def read(rx):
                    """Answers a living tollgate read (an event answered only
                    to a killed one counts only once it comes again)."""
                    return [x for x in rx.acked()
                            if not any(a <= x["at_ms"] <= b for a, b in dead)]

                tgtest.wait_until(
                    lambda: ({x["id"] for x in read(rx_main)} >= {e["id"] for e in want_main}
                             and {x["id"] for x in read(rx_own)} >= {e["id"] for e in want_own}),
                    timeout=60, what="every event at its receiver after %d kills" % kills)
                assert_in_order_per_op(self, read(rx_main), want_main)
                assert_in_order_per_op(self, read(rx_own), want_own)
                tgtest.wait_until(lambda: all(e["delivery"] == "delivered"
                                              for e in feed(tg)["events"]),
                                  timeout=20, what="every event marked delivered")
                self.assertFalse({x["operation_id"] for x in rx_main.lines()} &
                                 {e["operation_id"] for e in want_own})
                self.assertFalse({x["operation_id"] for x in rx_own.lines()} &
                                 {e["operation_id"] for e in want_main})
                dups = sum(1 for x in rx_main.lines() + rx_own.lines() if x.get("dup"))
                print("kill -9 x%d: %d events, %d deliveries seen again (at least once)"
                      % (kills, len(stored), dups), file=sys.stderr)


def _try(fn, *args):
    try:
        return fn(*args)
    except OSError as e:
        return e


if __name__ == "__main__":
    tgtest.main_unittest(parallel=("test_delivered_signed_and_in_the_feed",
                                   "test_kill9_during_delivery_loses_no_event",
                                   "test_receiver_down_then_up_gets_every_event_in_order",
                                   "test_wrong_secret_refused_rotation_accepted",
                                   "test_parked_past_budget_then_redelivered",
                                   "test_no_notify_section_delivers_nothing",
                                   "test_long_poll",
                                   "test_per_refund_notify_url",
                                   "test_notify_url_without_allow_or_main_url",
                                   "test_account_notify_url",
                                   "test_two_accounts_each_to_its_own_url",
                                   "test_kill9_repeatedly_loses_no_event"))
