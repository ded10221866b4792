"""The Checkout.com profile (docs/providers/checkout.ini) against the stub's
checkout shape (issue 25): the outcomes that depend on Checkout.com's
contract.

Checkout.com answers a refund 202 (accepted, not final) with the id of its
action, and the outcome is an action of the payment in GET
/payments/{id}/actions, once processed. It has no lookup by idempotency key
and none of one action: a POST whose answer was lost is settled by that
list, ours found by the reference we sent (our operation id); a refund
answered 202 is polled in the list until its action says approved or not,
and not being listed yet is pending, never "not executed"; a refusal is a
422 at once or an action declined later; a dispatcher killed with a POST in
flight is succeeded by one that settles it by the list, never a second
refund. A 429 that says "a request with this key is still in progress" is
told apart from a rate-limit 429 by the profile's in_progress_codes: the
first holds nothing, the second holds the exit. And `tollgate config
check` on the profile itself says nothing.

Behaviour only (no timing judged): labelled parallel.
"""

import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgprovider  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import log_events  # noqa: E402

PROFILE = "checkout"


posts_and_queries = tgprovider.posts_and_queries


def contract_arrivals(stub):
    return [a for a in stub.arrivals() if a["path"].startswith("/payments/")]


class CheckoutProfileTest(tgprovider.ProfileCase, unittest.TestCase):
    PROFILE = PROFILE

    def test_slow_past_the_timeout_is_settled_by_the_actions_list(self):
        # 2.5 s at the provider > the 1.5 s timeout: the refund is accepted
        # and processed, its 202 is lost (no action id), and the only way
        # back is the payment's actions, ours matched by its reference.
        with self.start("--mode", "slow:2500", "--query-mode", "fast") as stub, \
                self.tollgate(stub, provider={"timeout_ms": 1500},
                              retry={"query_interval_ms": 3000}) as tg:
            tg.start("serve")
            ops = ["cko-slow-%d" % i for i in range(3)]
            for i, op in enumerate(ops):
                # one payment for two of them: its list holds both
                self.assertEqual(tg.submit(op, payment="pay_%d" % min(i, 1))[0], 202)
            final = tg.wait_final(ops, timeout=40)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()), final)
            self.assertTrue(all(r["refund_id"].startswith("act_") for r in final.values()),
                            final)
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual(len(posts), len(ops))  # never re-sent
            self.assertTrue(all(c["class"] == "unknown" for c in posts), posts)
            self.assertEqual([c["class"] for c in queries], ["succeeded"] * len(ops), queries)
            arrivals = contract_arrivals(stub)
            self.assertEqual(sorted(a["idempotency_key"] for a in arrivals
                                    if a["method"] == "POST"), sorted(ops))
            gets = [a for a in arrivals if a["method"] == "GET"]
            self.assertTrue(gets)
            for a in gets:
                # the actions list, never a lookup by key (Checkout.com has none)
                self.assertRegex(a["path"], r"^/payments/pay_[01]/actions$")
                self.assertEqual(a["answer"], 200, a)
            ledger = stub.ledger()["operations"]
            self.assertEqual({op: ledger[op]["executions"] for op in ops}, dict.fromkeys(ops, 1))

    def test_a_202_is_polled_in_the_list_until_its_action_is_final(self):
        # Accepted at once (202 with its action id), processed 2.5 s later:
        # until then the list does not hold it, which says "pending" (the
        # provider named its action), never "not executed": no re-send.
        with self.start("--mode", "processing:2500", "--query-mode", "fast") as stub, \
                self.tollgate(stub, retry={"query_interval_ms": 700}) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("cko-pend", payment="pay_p")[0], 202)
            final = tg.wait_final(["cko-pend"], timeout=30)["cko-pend"]
            self.assertEqual(final["state"], "succeeded", final)
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual([c["class"] for c in posts], ["processing"], posts)
            self.assertGreaterEqual(len(queries), 2, queries)
            self.assertEqual(set(c["class"] for c in queries[:-1]), {"processing"}, queries)
            self.assertEqual(queries[-1]["class"], "succeeded")
            gets = [a["path"] for a in contract_arrivals(stub) if a["method"] == "GET"]
            self.assertEqual(set(gets), {"/payments/pay_p/actions"})
            self.assertEqual(stub.ledger()["operations"]["cko-pend"]["executions"], 1)

    def test_a_refusal_at_once_or_by_a_declined_action(self):
        # A 422 (request_invalid, refund_amount_exceeds_balance) refuses at
        # once; a refund accepted (202) and then declined says so in its
        # action (approved false): rejected either way, nothing executed.
        with self.start("--mode", "reject", "--query-mode", "fast") as stub, \
                self.tollgate(stub, retry={"query_interval_ms": 500}) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("cko-422", payment="pay_r")[0], 202)
            first = tg.wait_final(["cko-422"], timeout=20)["cko-422"]
            stub.admin("POST", "mode", {"mode": "fail"})
            self.assertEqual(tg.submit("cko-declined", payment="pay_r")[0], 202)
            second = tg.wait_final(["cko-declined"], timeout=20)["cko-declined"]
            self.assertEqual((first["state"], second["state"]), ("rejected", "rejected"),
                             (first, second))
            calls = tg.calls()
            by_op = {op: [(c["kind"], c["class"]) for c in calls if c["operation_id"] == op]
                     for op in ("cko-422", "cko-declined")}
            self.assertEqual(by_op["cko-422"], [("first", "rejected")], by_op)
            self.assertEqual(by_op["cko-declined"][0], ("first", "processing"), by_op)
            self.assertEqual(by_op["cko-declined"][-1], ("query", "rejected"), by_op)
            self.assertTrue(second["refund_id"].startswith("act_"), second)
            ledger = stub.ledger()["operations"]
            self.assertEqual(ledger.get("cko-422", {}).get("executions", 0), 0)
            self.assertEqual(ledger["cko-declined"]["executions"], 0)

    def test_a_dispatcher_killed_mid_post_is_recovered_by_the_list(self):
        # The POST is at the provider (1.5 s to answer) when its dispatcher
        # dies; the next one finds the call's outcome unknown and settles it
        # in the actions list: one refund, no second POST.
        with self.start("--mode", "slow:1500", "--query-mode", "fast") as stub, \
                self.tollgate(stub, provider={"timeout_ms": 3000},
                              retry={"query_interval_ms": 500}) as tg:
            tg.start("api")
            d = tg.start("dispatch", wait_api=False)
            self.assertEqual(tg.submit("cko-kill", payment="pay_k")[0], 202)
            tgtest.wait_until(lambda: any(a["method"] == "POST" for a in contract_arrivals(stub)),
                              timeout=15, what="the POST at the provider")
            d.send_signal(signal.SIGKILL)
            d.popen.wait()
            tgtest.wait_until(lambda: stub.ledger()["total_executions"] == 1, timeout=10,
                              what="the refund executed")
            tg.start("dispatch", wait_api=False)
            final = tg.wait_final(["cko-kill"], timeout=40)["cko-kill"]
            self.assertEqual(final["state"], "succeeded", final)
            self.assertTrue(final["refund_id"].startswith("act_"), final)
            posts = [a for a in contract_arrivals(stub) if a["method"] == "POST"]
            self.assertEqual(len(posts), 1, posts)
            self.assertTrue(any(a["method"] == "GET" for a in contract_arrivals(stub)))
            self.assertEqual(stub.ledger()["operations"]["cko-kill"]["executions"], 1)

    def test_the_two_meanings_of_429(self):
        # First: a key still in progress. The POST takes 5 s at the
        # provider; its answer is lost at 1 s, the list does not hold it
        # (not processed yet) and is complete, so the same key goes again
        # and meets the documented 429 "in progress": not a rate limit —
        # no hold, the call unknown — and the list settles it once
        # processed. Then a rate-limit 429 (no body): retryable, and the
        # exit holds.
        with self.start("--mode", "slow:5000", "--query-mode", "fast") as stub, \
                self.tollgate(stub, provider={"timeout_ms": 1000},
                              retry={"query_interval_ms": 800}) as tg:
            p = tg.start("serve")
            self.assertEqual(tg.submit("cko-busy", payment="pay_b")[0], 202)
            final = tg.wait_final(["cko-busy"], timeout=30)["cko-busy"]
            self.assertEqual(final["state"], "succeeded", final)
            answers = [a["answer"] for a in contract_arrivals(stub) if a["method"] == "POST"]
            self.assertIn(429, answers, answers)
            posts = [c for c in tg.calls() if c["kind"] != "query"]
            self.assertNotIn("retryable", [c["class"] for c in posts], posts)
            self.assertEqual(log_events(p, "exit_hold"), [])  # the exit never held
            self.assertEqual(stub.ledger()["operations"]["cko-busy"]["executions"], 1)

            stub.admin("POST", "mode", {"mode": "limited"})
            self.assertEqual(tg.submit("cko-limited", payment="pay_b")[0], 202)
            tgtest.wait_until(lambda: log_events(p, "exit_hold"), timeout=15,
                              what="the exit held by a rate-limit 429")
            stub.admin("POST", "mode", {"mode": "fast"})
            final = tg.wait_final(["cko-limited"], timeout=30)["cko-limited"]
            self.assertEqual(final["state"], "succeeded", final)
            limited = [c["class"] for c in tg.calls()
                       if c["operation_id"] == "cko-limited" and c["kind"] != "query"]
            self.assertEqual(limited[0], "retryable", limited)

    def test_the_stub_keeps_a_key_only_for_a_processed_request(self):
        # The shape as the reference describes it, asked directly: a 2xx
        # answer is kept under its key (a repeat, even with another body,
        # gets it back), a request answered otherwise is not (the same key
        # executes again), a key past its life executes again, and there
        # is no lookup by key or by action.
        def post(stub, key, amount=1500, payment="pay_s"):
            path = "/payments/%s/refunds" % payment
            body = json.dumps({"amount": amount, "reference": key})
            h = {"Content-Type": "application/json"}
            h.update(tgprovider.caller_headers(PROFILE, "POST", path, body, key))
            return stub.request("POST", path, body, h)

        def executions(stub, key):
            return stub.ledger()["operations"][key]["executions"]

        with self.start("--mode", "fast") as stub:
            st, _, first = post(stub, "k-kept")
            self.assertEqual(st, 202, first)
            self.assertTrue(first["action_id"].startswith("act_"), first)
            self.assertEqual(post(stub, "k-kept"), (202, post(stub, "k-kept")[1], first))
            self.assertEqual(post(stub, "k-kept", amount=99)[2], first)  # no payload check
            self.assertEqual(executions(stub, "k-kept"), 1)
            stub.admin("POST", "expire-keys", {"key": "k-kept"})  # its 24 h are over
            self.assertNotEqual(post(stub, "k-kept")[2], first)
            self.assertEqual(executions(stub, "k-kept"), 2)

            stub.admin("POST", "mode", {"mode": "e500"})  # executed, answered 500
            self.assertEqual(post(stub, "k-500")[0], 500)
            stub.admin("POST", "mode", {"mode": "fast"})
            self.assertEqual(post(stub, "k-500")[0], 202)
            self.assertEqual(executions(stub, "k-500"), 2)  # nothing was kept

            for method, path, want in (("GET", "/payments/pay_s/refunds", 405),
                                       ("GET", "/payments/pay_s/actions/" + first["action_id"],
                                        404),
                                       ("GET", "/v1/refunds/k-kept", 404)):
                h = tgprovider.caller_headers(PROFILE, method, path, b"", "k-kept")
                self.assertEqual(stub.request(method, path, headers=h)[0], want, path)
            h = tgprovider.caller_headers(PROFILE, "GET", "/payments/pay_s/actions", b"", "x")
            st, _, actions = stub.request("GET", "/payments/pay_s/actions", headers=h)
            self.assertEqual(st, 200)
            refs = [(a["type"], a.get("reference")) for a in actions]
            self.assertEqual(refs[:4], [("Refund", "k-500")] * 2 + [("Refund", "k-kept")] * 2)
            self.assertEqual([t for t, _ in refs[4:]], ["Capture", "Authorization"])

    def test_webhook_signed_as_checkout_settles_and_refuses_forgeries(self):
        # Two refunds accepted and pending (processed only in 60 s, polled
        # every 5 s); Checkout.com's events settle them: payment_refunded
        # and payment_refund_declined, signed Cko-Signature (the hex
        # HMAC-SHA256 of the body). A forged or X-Signature-only delivery is
        # 401 with nothing changed, a repeat changes nothing, another
        # reference or another event type is ignored.
        d = tempfile.mkdtemp(prefix="tollgate-checkout-wh-")
        key = "whsk-checkout-test"
        key_file = os.path.join(d, "webhook")
        with open(os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(key + "\n")
        try:
            with self.start("--mode", "processing:60000", "--query-mode", "fast") as stub, \
                    self.tollgate(stub, provider={"webhook_secret_file": key_file},
                                  retry={"query_interval_ms": 5000}) as tg:
                tg.start("serve")
                for op in ("cko-wh-a", "cko-wh-b"):
                    self.assertEqual(tg.submit(op, payment="pay_w")[0], 202)
                tgtest.wait_until(lambda: all(tg.status(op)[2]["state"] == "unknown"
                                              for op in ("cko-wh-a", "cko-wh-b")),
                                  timeout=15, what="both accepted, waiting for an outcome")
                ids = {op: tg.status(op)[2]["refund_id"] for op in ("cko-wh-a", "cko-wh-b")}

                def event(op, kind, evt):
                    return json.dumps({"id": evt, "type": kind, "data": {
                        "id": "pay_w", "action_id": ids.get(op) or "act_x", "reference": op,
                        "amount": 1500, "response_code": "10000"}}).encode()

                def sign(body):
                    return hmac.new(key.encode(), body, hashlib.sha256).hexdigest()

                def post(body, headers):
                    h = {"Content-Type": "application/json"}
                    h.update(headers)
                    return tgtest.http_json("POST", tg.api + "/v1/provider-events", body, h)

                refunded = event("cko-wh-a", "payment_refunded", "evt_1")
                for headers in ({"Cko-Signature": sign(refunded)[:-1] + "0"},
                                {"Cko-Signature": sign(b"other")}, {},
                                {"X-Signature": "sha256=" + sign(refunded)}):
                    self.assertEqual(post(refunded, headers)[0], 401, headers)
                self.assertEqual(tg.status("cko-wh-a")[2]["state"], "unknown")
                st, _, body = post(refunded, {"Cko-Signature": sign(refunded)})
                self.assertEqual((st, body["state"]), (200, "succeeded"), body)
                st, _, body = post(refunded, {"Cko-Signature": sign(refunded)})  # a repeat
                self.assertEqual((st, body["state"]), (200, "succeeded"), body)
                # a refund made elsewhere, without a reference; a capture of ours
                elsewhere = json.dumps({"id": "evt_2", "type": "payment_refunded",
                                        "data": {"id": "pay_z", "action_id": "act_z"}}).encode()
                for other in (elsewhere, event("cko-wh-b", "payment_captured", "evt_3")):
                    st, _, body = post(other, {"Cko-Signature": sign(other)})
                    self.assertEqual(st, 200, body)
                    self.assertIn("ignored", body)
                self.assertEqual(tg.status("cko-wh-b")[2]["state"], "unknown")
                declined = event("cko-wh-b", "payment_refund_declined", "evt_4")
                st, _, body = post(declined, {"Cko-Signature": sign(declined)})
                self.assertEqual((st, body["state"]), (200, "rejected"), body)
                posts = [a for a in contract_arrivals(stub) if a["method"] == "POST"]
                self.assertEqual(len(posts), 2, posts)  # nothing re-sent because of a delivery
        finally:
            shutil.rmtree(d)

    def test_config_check_on_the_profile_says_nothing(self):
        d = tempfile.mkdtemp(prefix="tollgate-checkout-")
        try:
            secret = os.path.join(d, "key")
            with open(os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write("sk_sbox_x\n")
            with open(os.path.join(tgprovider.source_dir(), "docs", "providers",
                                   "checkout.ini")) as f:
                text = f.read()
            ini = os.path.join(d, "t.ini")
            with open(ini, "w") as f:
                f.write(text.replace("/etc/tollgate/checkout-secret-key", secret)
                        .replace("/etc/tollgate/checkout-webhook-key", secret))
            p = subprocess.run([tgtest.binary("tollgate"), "config", "check", "--config", ini],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual((p.returncode, p.stderr), (0, ""), p.stdout + p.stderr)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    tgtest.main_unittest()
