"""The Adyen profile (docs/providers/adyen.ini) against the stub's adyen
shape (issue 25): the outcomes that depend on Adyen's contract.

Adyen answers a refund only `received` (201, with the refund's own
pspReference) and offers no lookup and no list of refunds: the outcome
comes only in the REFUND notification, a batch whose items are signed one
by one (base64 HMAC-SHA256 under a hex key). tollgate's notification-only
strategy waits for it, never queries; an answer lost past the timeout is
replayed with the same key (Adyen returns the stored answer), one refund
executed; a refusal is a notification with success false; no notification
by the deadline is manual review as notification_deadline; a forged or
altered item refuses its delivery, a re-delivered one changes nothing.
And `tollgate config check` on the profile itself says nothing.

Behaviour only (no timing judged): labelled parallel.
"""

import base64
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

PROFILE = "adyen"
KEY_HEX = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"

posts_and_queries = tgprovider.posts_and_queries


def contract_arrivals(stub):
    return [a for a in stub.arrivals() if not a["path"].startswith("/_stub")]


def sign_item(item, key_hex=KEY_HEX):
    text = ":".join([item.get("pspReference", ""), item.get("originalReference", ""),
                     item.get("merchantAccountCode", ""), item.get("merchantReference", ""),
                     str(item["amount"]["value"]), item["amount"]["currency"],
                     item["eventCode"], item["success"]])
    mac = hmac.new(bytes.fromhex(key_hex), text.encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def refund_item(op, psp, success="true", value=1500, key_hex=KEY_HEX):
    item = {"pspReference": psp, "originalReference": "pay_w",
            "merchantAccountCode": "YourMerchantAccount", "merchantReference": op,
            "amount": {"value": value, "currency": "TWD"}, "eventCode": "REFUND",
            "success": success, "eventDate": "2026-01-01T00:00:00+01:00"}
    item["additionalData"] = {"hmacSignature": sign_item(item, key_hex)}
    return item


def batch(*items):
    return json.dumps({"live": "false", "notificationItems": [
        {"NotificationRequestItem": it} for it in items]}).encode()


class AdyenProfileTest(tgprovider.ProfileCase, unittest.TestCase):
    PROFILE = PROFILE

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tollgate-adyen-")
        self.key_file = os.path.join(self.dir, "hmac")
        with open(os.open(self.key_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(KEY_HEX + "\n")
        self.port = tgtest.free_port()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def stub(self, *flags, webhook=True, delay_ms=200):
        extra = ["--webhook-url", "http://127.0.0.1:%d/v1/provider-events" % self.port,
                 "--webhook-secret-file", self.key_file,
                 "--webhook-delay-ms", str(delay_ms)] if webhook else []
        return self.start(*(list(flags) + extra))

    def tg(self, stub, provider=None, **sections):
        p = {"webhook_secret_file": self.key_file}
        p.update(provider or {})
        return self.tollgate(stub, api_port=self.port, provider=p, **sections)

    def received(self, tg, ops, payment):
        """Submits ops and waits until Adyen received each (unknown, awaiting
        its notification): {op: the pspReference its POST was answered}."""
        for op in ops:
            self.assertEqual(tg.submit(op, payment=payment)[0], 202)
        tgtest.wait_until(lambda: all(tg.status(op)[2]["state"] == "unknown" for op in ops),
                          timeout=15, what="all received, awaiting their notification")
        return {op: tg.status(op)[2]["refund_id"] for op in ops}

    def test_a_refund_is_settled_by_its_notification(self):
        with self.stub("--mode", "fast") as stub, self.tg(stub) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("ady-ok", payment="pay_a")[0], 202)
            final = tg.wait_final(["ady-ok"], timeout=20)["ady-ok"]
            self.assertEqual(final["state"], "succeeded", final)
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual([c["class"] for c in posts], ["processing"], posts)
            self.assertEqual(queries, [])  # Adyen has nothing to ask
            arrivals = contract_arrivals(stub)
            self.assertEqual([(a["method"], a["path"]) for a in arrivals],
                             [("POST", "/v71/payments/pay_a/refunds")])
            self.assertEqual(len(final["refund_id"]), 16, final)  # the pspReference
            self.assertEqual(stub.ledger()["operations"]["ady-ok"]["executions"], 1)

    def test_an_answer_lost_past_the_timeout_is_replayed_then_notified(self):
        # 2.5 s at the provider > the 1.5 s timeout: the refund is received,
        # its answer lost. No query exists; the replay with the same key
        # gets the stored answer (the stub is fast by then), and the
        # notification settles it: one refund executed.
        with self.stub("--mode", "slow:2500", delay_ms=4000) as stub, \
                self.tg(stub, provider={"timeout_ms": 1500},
                        retry={"query_interval_ms": 2000}) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("ady-lost", payment="pay_l")[0], 202)
            tgtest.wait_until(lambda: contract_arrivals(stub), timeout=10, what="the POST")
            stub.admin("POST", "mode", {"mode": "fast"})
            final = tg.wait_final(["ady-lost"], timeout=25)["ady-lost"]
            self.assertEqual(final["state"], "succeeded", final)
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual([c["class"] for c in posts], ["unknown", "processing"], posts)
            self.assertEqual(queries, [])
            arrivals = contract_arrivals(stub)
            self.assertEqual([a["method"] for a in arrivals], ["POST", "POST"])
            self.assertEqual({a["idempotency_key"] for a in arrivals}, {"ady-lost"})
            self.assertEqual(stub.ledger()["operations"]["ady-lost"]["executions"], 1)

    def test_a_takeover_replays_the_running_post(self):
        # The owner is killed (-9) while its POST is at the provider. No query
        # exists; the new owner, after its takeover wait, replays the POST
        # with the same key (the stored "received": no second refund) and
        # awaits the notification, which settles it.
        with self.stub("--mode", "slow:2500", delay_ms=12000) as stub, \
                self.tg(stub, provider={"timeout_ms": 3000},
                        retry={"query_interval_ms": 500}) as tg:
            first = tg.start("serve")
            self.assertEqual(tg.submit("ady-take", payment="pay_t")[0], 202)
            tgtest.wait_until(lambda: contract_arrivals(stub), timeout=10, what="the POST")
            first.send_signal(signal.SIGKILL)
            first.popen.wait(10)
            stub.admin("POST", "mode", {"mode": "fast"})
            tg.start("serve")
            tgtest.wait_until(lambda: len(contract_arrivals(stub)) >= 2, timeout=20,
                              what="the replay")
            rec = tg.status("ady-take")[2]
            self.assertTrue(any("owner lost" in a["detail"] and a["detail"].endswith("retry_wait")
                                for a in rec["audit"]), rec["audit"])
            final = tg.wait_final(["ady-take"], timeout=30)["ady-take"]
            self.assertEqual(final["state"], "succeeded", final)
            arrivals = contract_arrivals(stub)
            self.assertEqual([a["method"] for a in arrivals], ["POST", "POST"])
            self.assertEqual({a["idempotency_key"] for a in arrivals}, {"ady-take"})
            self.assertEqual(stub.ledger()["operations"]["ady-take"]["executions"], 1)
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual(queries, [])
            self.assertEqual(posts[-1]["class"], "processing", posts)

    def test_a_refusal_is_a_notification_with_success_false(self):
        with self.stub("--mode", "fail") as stub, self.tg(stub) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("ady-no", payment="pay_r")[0], 202)
            final = tg.wait_final(["ady-no"], timeout=20)["ady-no"]
            self.assertEqual(final["state"], "rejected", final)
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual([c["class"] for c in posts], ["processing"], posts)
            self.assertEqual(queries, [])
            self.assertEqual(stub.ledger()["operations"]["ady-no"]["executions"], 0)

    def test_no_notification_by_the_deadline_is_manual_review(self):
        with self.stub("--mode", "fast", webhook=False) as stub, \
                self.tg(stub, provider={"notification_deadline_s": 2}) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("ady-silent", payment="pay_s")[0], 202)
            final = tg.wait_final(["ady-silent"], timeout=20)["ady-silent"]
            self.assertEqual(final["state"], "manual", final)
            self.assertEqual(final.get("manual_reason", final.get("reason")),
                             "notification_deadline", final)
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual(len(posts), 1, posts)  # never re-sent on its own word
            self.assertEqual(queries, [])  # no query budget spent on queries that cannot exist
            self.assertEqual([a["method"] for a in contract_arrivals(stub)], ["POST"])

    def test_forged_altered_and_repeated_items(self):
        # The stub sends no notification: the test delivers them, signed
        # as Adyen does (an implementation of its own: Python's hmac).
        with self.stub("--mode", "fast", webhook=False) as stub, self.tg(stub) as tg:
            tg.start("serve")
            psp = self.received(tg, ("ady-w1", "ady-w2"), "pay_w")

            def post(body):
                return tgtest.http_json("POST", tg.api + "/v1/provider-events", body,
                                        {"Content-Type": "application/json"})

            good = refund_item("ady-w1", psp["ady-w1"])
            altered = dict(good, amount={"value": 1, "currency": "TWD"})
            other_key = refund_item("ady-w1", psp["ady-w1"], key_hex="00" * 32)
            unsigned = dict(good, additionalData={})
            flipped = dict(refund_item("ady-w2", psp["ady-w2"]), success="false")
            for body in (batch(altered), batch(other_key), batch(unsigned),
                         batch(good, flipped)):  # one bad item refuses the delivery
                self.assertEqual(post(body)[0], 401, body)
            self.assertEqual(tg.status("ady-w1")[2]["state"], "unknown")
            self.assertEqual(tg.status("ady-w2")[2]["state"], "unknown")
            self.assertEqual(post(b'{"not":"a batch"}')[0], 422)

            st, _, raw = tgtest.http_request("POST", tg.api + "/v1/provider-events",
                                         batch(good), {"Content-Type": "application/json"})
            self.assertEqual((st, raw), (200, b"[accepted]"))
            self.assertEqual(tg.status("ady-w1")[2]["state"], "succeeded")
            # re-delivered, and a refusal of the same refund afterwards:
            # nothing changes, the delivery is still accepted
            for body in (batch(good), batch(refund_item("ady-w1", psp["ady-w1"], "false"))):
                st, _, raw = tgtest.http_request("POST", tg.api + "/v1/provider-events", body,
                                             {"Content-Type": "application/json"})
                self.assertEqual((st, raw), (200, b"[accepted]"))
            self.assertEqual(tg.status("ady-w1")[2]["state"], "succeeded")
            # another refund under our reference (another pspReference):
            # not ours; then ours, refused
            st, _, raw = tgtest.http_request("POST", tg.api + "/v1/provider-events",
                                         batch(refund_item("ady-w2", "9999999999999999")),
                                         {"Content-Type": "application/json"})
            self.assertEqual((st, raw), (200, b"[accepted]"))
            self.assertEqual(tg.status("ady-w2")[2]["state"], "unknown")
            st, _, raw = tgtest.http_request("POST", tg.api + "/v1/provider-events",
                                         batch(refund_item("ady-w2", psp["ady-w2"], "false")),
                                         {"Content-Type": "application/json"})
            self.assertEqual((st, raw), (200, b"[accepted]"))
            self.assertEqual(tg.status("ady-w2")[2]["state"], "rejected")
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual((len(posts), queries), (2, []))

    def test_an_item_is_matched_by_its_psp_reference_alone(self):
        # An item without our merchantReference, or with one that names
        # none of ours, is matched by its pspReference: the refund id the
        # POST's answer stored. One that names no stored refund id is not
        # ours and changes nothing.
        with self.stub("--mode", "fast", webhook=False) as stub, self.tg(stub) as tg:
            tg.start("serve")
            psp = self.received(tg, ("ady-p1", "ady-p2"), "pay_p")

            def deliver(*items):
                st, _, raw = tgtest.http_request("POST", tg.api + "/v1/provider-events",
                                                 batch(*items),
                                                 {"Content-Type": "application/json"})
                self.assertEqual((st, raw), (200, b"[accepted]"))

            deliver(refund_item("", "9999999999999999"), refund_item("not-ours", "8888"))
            self.assertEqual([tg.status(op)[2]["state"] for op in psp], ["unknown"] * 2)
            deliver(refund_item("", psp["ady-p1"]))
            self.assertEqual(tg.status("ady-p1")[2]["state"], "succeeded")
            deliver(refund_item("someone-elses-ref", psp["ady-p2"], "false"))
            self.assertEqual(tg.status("ady-p2")[2]["state"], "rejected")
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual((len(posts), queries), (2, []))

    def test_the_stub_plays_adyen(self):
        # As the reference describes it: the POST's path and body (unknown
        # fields refused, the reason an enum), a received answer, a replay
        # of a key returning the stored answer, and no lookup or list.
        def post(stub, key, body, path="/v71/payments/pay_s/refunds"):
            data = json.dumps(body)
            h = {"Content-Type": "application/json"}
            h.update(tgprovider.caller_headers(PROFILE, "POST", path, data, key))
            return stub.request("POST", path, data, h)

        ok = {"merchantAccount": "M", "amount": {"value": 1500, "currency": "EUR"},
              "reference": "k-1", "merchantRefundReason": "RETURN"}
        with self.stub("--mode", "fast", webhook=False) as stub:
            st, _, first = post(stub, "k-1", ok)
            self.assertEqual((st, first["status"]), (201, "received"), first)
            self.assertEqual((first["paymentPspReference"], first["reference"]),
                             ("pay_s", "k-1"))
            self.assertEqual(post(stub, "k-1", ok), (201, post(stub, "k-1", ok)[1], first))
            self.assertEqual(stub.ledger()["operations"]["k-1"]["executions"], 1)
            for body, code in ((dict(ok, extra=1), "702"),
                               (dict(ok, merchantRefundReason="because"), None),
                               ({k: v for k, v in ok.items() if k != "merchantAccount"}, "901"),
                               (dict(ok, amount={"value": 0, "currency": "EUR"}), "137")):
                st, _, err = post(stub, "k-bad", body)
                self.assertIn(st, (400, 422), err)
                self.assertEqual(set(err), {"status", "errorCode", "message", "errorType"})
                if code:
                    self.assertEqual(err["errorCode"], code, err)
            for path in ("/v71/payments/pay_s/refunds", "/v71/payments/pay_s",
                         "/v1/refunds/k-1"):
                h = tgprovider.caller_headers(PROFILE, "GET", path, b"", "k-1")
                self.assertEqual(stub.request("GET", path, headers=h)[0], 404, path)

    def test_config_check_on_the_profile_says_nothing(self):
        secret = os.path.join(self.dir, "key")
        with open(os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("AQE_test_key\n")
        with open(os.path.join(tgprovider.source_dir(), "docs", "providers", "adyen.ini")) as f:
            text = f.read()
        ini = os.path.join(self.dir, "t.ini")
        with open(ini, "w") as f:
            f.write(text.replace("/etc/tollgate/adyen-api-key", secret)
                    .replace("/etc/tollgate/adyen-hmac-key", self.key_file))
        p = subprocess.run([tgtest.binary("tollgate"), "config", "check", "--config", ini],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual((p.returncode, p.stderr), (0, ""), p.stdout + p.stderr)


if __name__ == "__main__":
    tgtest.main_unittest()
