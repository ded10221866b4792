"""Integration tests of tollgate-stub, the provider stand-in (issue 3).

Each test starts the real binary on loopback (--listen 127.0.0.1:0
--port-file) and judges it over real HTTP: every fault mode, every
idempotency rule, the arrival record and the execution ledger, concurrency of
slow requests, timeline switching, refuse, bad input, mix reproducibility,
query modes, the record file on SIGTERM, and the signed webhook.
Timing assertions keep margins a noisy 2-core machine holds.
"""

import email.utils
import hashlib
import hmac
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgtest import start_stub  # noqa: E402

BODY = {"operation_id": "op", "payment_id": "pay_1", "amount": 1500, "currency": "TWD"}


def parallel(n, fn):
    """Runs fn(i) on n threads at once; returns the results (or exceptions) in order."""
    results = [None] * n
    barrier = threading.Barrier(n)

    def run(i):
        barrier.wait()
        try:
            results[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - reported to the caller
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


class Flags(unittest.TestCase):
    def test_help_documents_every_flag_and_the_timeline(self):
        out = subprocess.run([tgtest.binary("tollgate-stub"), "--help"], capture_output=True,
                             text=True, timeout=10)
        self.assertEqual(out.returncode, 0)
        for flag in ["--listen", "--port-file", "--timeline", "--mode", "--delay-ms",
                     "--retry-after", "--retry-after-date", "--processing-ms",
                     "--key-retention-s", "--seed", "--mix", "--query-mode", "--query-delay-ms",
                     "--record", "--max-body", "--webhook-url", "--webhook-secret-file",
                     "--webhook-delay-ms", "--webhook-drop-rate", "--time-scale",
                     "--capacity", "--capacity-burst", "--idle-close-ms",
                     "--advertise-keep-alive"]:
            self.assertIn(flag, out.stdout)
        self.assertIn("slow:3000", out.stdout)  # the timeline example
        for mode in ["reset-body[:N]", "truncated[:S]", "invalid[:S]", "huge[:N]",
                     "trickle[:MS]", "ctype[:TYPE]", "contra[:S-BODY]", "http10[:cut]",
                     "redirect[:S]"]:
            self.assertIn("  " + mode, out.stdout)

    def test_bad_flags_exit_non_zero_naming_the_flag(self):
        for argv, flag in [(["--delay-ms", "abc"], "--delay-ms"),
                           (["--bogus"], "--bogus"),
                           (["--timeline", "nope 5s"], "--timeline"),
                           (["--timeline", "slow; fast"], "--timeline"),
                           (["--mix", "fast=x"], "--mix"),
                           (["--listen", "localhost"], "--listen"),
                           (["--query-mode", "refuse"], "--query-mode"),
                           (["--query-mode", "fail"], "--query-mode"),
                           (["--mode", "fail:bad code"], "--mode"),
                           (["--webhook-url", "http://127.0.0.1:1/x"], "--webhook-url")]:
            out = subprocess.run([tgtest.binary("tollgate-stub")] + argv, capture_output=True,
                                 text=True, timeout=10)
            self.assertNotEqual(out.returncode, 0, argv)
            self.assertIn(flag, out.stderr, argv)


class Idempotency(unittest.TestCase):
    def setUp(self):
        self.stub = start_stub()

    def tearDown(self):
        self.stub.close()

    def test_execute_replay_reuse_and_query(self):
        s = self.stub
        status, hdrs, first = s.refund("op-1", headers={"X-Request-Id": "r1", "X-Attempt": "1"})
        self.assertEqual(status, 201)
        self.assertEqual(first["operation_id"], "op-1")
        self.assertEqual(first["status"], "succeeded")
        self.assertTrue(first["refund_id"].startswith("re_"))
        self.assertEqual(hdrs["content-type"], "application/json")

        status, _, again = s.refund("op-1")
        self.assertEqual((status, again), (200, first))  # the first stored response

        status, _, reused = s.refund("op-1", amount=999)
        self.assertEqual(status, 422)
        self.assertEqual(reused["error"]["code"], "idempotency_key_reused")

        status, _, q = s.query("op-1")
        self.assertEqual(status, 200)
        self.assertEqual(q, {"operation_id": "op-1", "refund_id": first["refund_id"],
                             "status": "succeeded"})
        status, _, q = s.query("never-sent")
        self.assertEqual(status, 404)
        self.assertEqual(q["error"]["code"], "not_found")

        ledger = s.ledger()
        self.assertEqual(ledger["operations"]["op-1"]["executions"], 1)
        self.assertEqual(ledger["total_executions"], 1)
        self.assertEqual(ledger["max_executions_per_operation"], 1)

    def test_in_use_409_while_the_first_is_slow(self):
        s = self.stub
        s.set_mode(mode="slow", delay_ms=900)
        results = {}
        t = threading.Thread(target=lambda: results.update(first=s.refund("op-slow")))
        t.start()
        # The first holds the key once the stub says it is processing.
        tgtest.wait_until(lambda: s.query("op-slow")[2].get("status") == "processing",
                          what="the first request holds the key")
        s.set_mode(mode="fast")  # the second answer comes at once
        status, _, body = s.refund("op-slow")
        self.assertEqual(status, 409)
        self.assertEqual(body["error"]["code"], "idempotency_key_in_use")
        status, _, q = s.query("op-slow")
        self.assertEqual((status, q["status"]), (200, "processing"))
        t.join(10)
        self.assertEqual(results["first"][0], 201)
        status, _, body = s.refund("op-slow")
        self.assertEqual((status, body), (200, results["first"][2]))
        self.assertEqual(s.executions("op-slow"), 1)

    def test_expire_keys_makes_the_same_key_new(self):
        s = self.stub
        self.assertEqual(s.refund("op-x")[0], 201)
        self.assertEqual(s.refund("op-y")[0], 201)
        self.assertEqual(s.admin("POST", "expire-keys", {"key": "op-x"}), {"expired": 1})
        self.assertEqual(s.refund("op-x")[0], 201)  # a second refund: the hazard of old keys
        self.assertEqual(s.refund("op-y")[0], 200)
        self.assertEqual(s.executions("op-x"), 2)
        self.assertEqual(s.ledger()["max_executions_per_operation"], 2)
        self.assertEqual(s.admin("POST", "expire-keys")["expired"], 2)

    def test_reset_forgets_everything(self):
        s = self.stub
        self.assertEqual(s.refund("op-r")[0], 201)
        s.admin("POST", "reset")
        self.assertEqual(s.ledger()["total_executions"], 0)
        self.assertEqual(s.arrivals(), [])
        self.assertEqual(s.query("op-r")[0], 404)


class StripeShape(unittest.TestCase):
    """--shape stripe plays Stripe's refund API as its reference says,
    including what it does not offer: no lookup by idempotency key."""

    def test_list_is_the_only_lookup_without_the_refund_id(self):
        with start_stub("--mode", "fast", tls="", profile="stripe", credentials=False) as s:
            ids = {}
            for i, (op, pi) in enumerate((("a", "pi_1"), ("b", "pi_2"), ("c", "pi_1"),
                                          ("d", "pi_1"))):
                st, _, r = s.refund(op, payment=pi)
                self.assertEqual(st, 200, r)  # Stripe answers a created refund 200
                self.assertEqual((r["object"], r["status"], r["metadata"]["operation_id"]),
                                 ("refund", "succeeded", op))
                ids[op] = r["id"]
            st, _, page = s.request("GET", "/v1/refunds?payment_intent=pi_1&limit=2")
            self.assertEqual(st, 200, page)
            self.assertEqual(page["object"], "list")
            # newest first, this payment only, two a page, more to follow
            self.assertEqual([r["id"] for r in page["data"]], [ids["d"], ids["c"]])
            self.assertTrue(page["has_more"])
            st, _, page = s.request("GET", "/v1/refunds?payment_intent=pi_1&limit=2"
                                    "&starting_after=" + ids["c"])
            self.assertEqual(([r["id"] for r in page["data"]], page["has_more"]),
                             ([ids["a"]], False))
            st, _, page = s.request("GET", "/v1/refunds")  # all, Stripe's default page
            self.assertEqual(len(page["data"]), 4)
            # by id, yes; by key, no such endpoint (Stripe has none)
            st, _, r = s.request("GET", "/v1/refunds/" + ids["b"])
            self.assertEqual((st, r["metadata"]["operation_id"]), (200, "b"))
            st, _, r = s.request("GET", "/v1/refunds/by-key/b")
            self.assertEqual(st, 404, r)
            st, _, r = s.request("GET", "/v1/refunds/re_nonesuch")
            self.assertEqual((st, r["error"]["code"]), (404, "resource_missing"))
            # Stripe's parameter checks
            for q, code in (("limit=0", "parameter_invalid_integer"),
                            ("limit=101", "parameter_invalid_integer"),
                            ("charge=ch_1", "parameter_unknown")):
                st, _, r = s.request("GET", "/v1/refunds?" + q)
                self.assertEqual((st, r["error"]["code"]), (400, code), q)

    def test_a_refund_being_created_is_not_listed_yet(self):
        with start_stub("--mode", "slow:1500", tls="", profile="stripe",
                        credentials=False) as s:
            t = threading.Thread(target=lambda: s.refund("slow", payment="pi_s"))
            t.start()
            tgtest.wait_until(lambda: s.state()["open_requests"] >= 1, timeout=5,
                              what="the POST open")
            st, _, page = s.request("GET", "/v1/refunds?payment_intent=pi_s")
            self.assertEqual((st, page["data"], page["has_more"]), (200, [], False))
            st, _, r = s.refund("slow", payment="pi_s")  # the key still runs
            self.assertEqual((st, r["error"]["code"]), (409, "idempotency_key_in_use"))
            t.join(10)
            st, _, page = s.request("GET", "/v1/refunds?payment_intent=pi_s")
            self.assertEqual([r["metadata"]["operation_id"] for r in page["data"]], ["slow"])


class PayPalShape(unittest.TestCase):
    """--shape paypal plays PayPal's Payments v2 refund as its reference
    says: an OAuth 2.0 token (HTTP Basic client credentials) as the bearer,
    the capture's refund keyed by PayPal-Request-Id with a decimal amount,
    GET of a refund by its id and nothing else (no lookup by key, no
    list), errors {name, message, debug_id, details[{issue}]}."""

    def token(self, s, user="cid:sec"):
        import base64
        h = {"Authorization": "Basic " + base64.b64encode(user.encode()).decode(),
             "Content-Type": "application/x-www-form-urlencoded"}
        return s.request("POST", "/v1/oauth2/token", "grant_type=client_credentials", h)

    def post(self, s, token, body, key=None, capture="CAP1"):
        h = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
        if key:
            h["PayPal-Request-Id"] = key
        return s.request("POST", "/v2/payments/captures/%s/refund" % capture, body, h)

    def get(self, s, token, refund_id):
        return s.request("GET", "/v2/payments/refunds/" + refund_id,
                         headers={"Authorization": "Bearer " + token})

    def test_tokens_refunds_lookups_and_errors(self):
        d = tgtest.scratch_dir("tgpaypal-")
        for name, text in (("id", "cid"), ("secret", "sec")):
            with open(os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(text + "\n")
        with start_stub("--mode", "fast", "--token-ttl-s", "2", "--client-id-file",
                        os.path.join(d, "id"), "--auth-secret-file", os.path.join(d, "secret"),
                        tls="", profile="paypal", credentials=False) as s:
            st, _, t = self.token(s)
            self.assertEqual((st, t["token_type"], t["expires_in"]), (200, "Bearer", 2), t)
            tok = t["access_token"]
            st, _, e = self.token(s, "cid:wrong")
            self.assertEqual((st, e["error"]), (401, "invalid_client"), e)
            amount = {"value": "10.37", "currency_code": "USD"}
            st, _, r = self.post(s, tok, {"amount": amount, "invoice_id": "k1", "custom_id": "k1",
                                          "note_to_payer": "sorry"}, key="k1")
            self.assertEqual((st, r["status"], r["amount"], r["invoice_id"]),
                             (201, "COMPLETED", amount, "k1"), r)
            self.assertEqual(len(r["id"]), 17, r)
            # a repeat of the key: the refund it made, its latest status
            st, _, again = self.post(s, tok, {"amount": amount}, key="k1")
            self.assertEqual((st, again["id"], again["status"]), (200, r["id"], "COMPLETED"))
            self.assertEqual(s.executions("k1"), 1)
            st, _, got = self.get(s, tok, r["id"])
            self.assertEqual((st, got["id"], got["custom_id"]), (200, r["id"], "k1"))
            # no lookup by key, no list: PayPal has neither
            for path in ("/v2/payments/refunds/k1", "/v2/payments/refunds",
                         "/v1/refunds/k1", "/v2/payments/captures/CAP1/refunds"):
                st, _, e = s.request("GET", path, headers={"Authorization": "Bearer " + tok})
                self.assertEqual((st, e["name"]), (404, "RESOURCE_NOT_FOUND"), path)
                self.assertTrue(e["debug_id"], e)
            # without PayPal-Request-Id: a second refund, as PayPal does
            self.assertEqual(self.post(s, tok, {"amount": amount})[0], 201)
            self.assertEqual(self.post(s, tok, {"amount": amount})[0], 201)
            self.assertEqual(s.state()["executions"], 3)
            # the amount in the currency's places at PayPal
            for i, (value, cur, status, issue) in enumerate((
                    ("10.371", "USD", 422, "DECIMAL_PRECISION"),
                    ("10.37", "JPY", 422, "DECIMALS_NOT_SUPPORTED"),
                    ("10", "XXX", 422, "CURRENCY_NOT_SUPPORTED"),
                    ("1O.37", "USD", 400, "INVALID_PARAMETER_SYNTAX"),
                    (1037, "USD", 400, "INVALID_PARAMETER_SYNTAX"))):
                st, _, e = self.post(s, tok, {"amount": {"value": value, "currency_code": cur}},
                                     key="bad-%d" % i)
                self.assertEqual((st, e["details"][0]["issue"]), (status, issue), (value, e))
            st, _, e = self.post(s, tok, {"amount": {"currency_code": "USD"}}, key="bad-miss")
            self.assertEqual((st, e["details"][0]["issue"], e["details"][0]["field"]),
                             (400, "MISSING_REQUIRED_PARAMETER", "/amount/value"), e)
            for value, cur in (("1037", "JPY"), ("1.037", "KWD"), ("15", "TWD")):
                st, _, r2 = self.post(s, tok, {"amount": {"value": value, "currency_code": cur}},
                                      key="ok-" + cur)
                self.assertEqual((st, r2["amount"]["value"]), (201, value), r2)
            # a token it did not give, none, or one that lapsed: 401
            for h in ({"Authorization": "Bearer A21AAnotours"}, {}):
                st, _, e = s.request("GET", "/v2/payments/refunds/" + r["id"], headers=h)
                self.assertEqual((st, e["name"]), (401, "AUTHENTICATION_FAILURE"), e)
            time.sleep(2.2)
            st, _, e = self.get(s, tok, r["id"])
            self.assertEqual((st, e["name"]), (401, "AUTHENTICATION_FAILURE"), e)
            verdicts = [a.get("auth") for a in s.arrivals()[-3:]]
            self.assertEqual(verdicts, ["wrong", "missing", "expired"])
            tok = self.token(s)[2]["access_token"]
            self.assertEqual(self.get(s, tok, r["id"])[0], 200)
            self.assertEqual(s.admin("POST", "revoke-tokens")["revoked"], 2)
            self.assertEqual(self.get(s, tok, r["id"])[0], 401)
            tok = self.token(s)[2]["access_token"]
            # PENDING while processing says so, then COMPLETED; a repeat of
            # its key says which; mode fail: a refund made FAILED
            s.set_mode(mode="processing:1000")
            st, _, p = self.post(s, tok, {"amount": amount}, key="pend")
            self.assertEqual((st, p["status"], p["status_details"]["reason"]),
                             (201, "PENDING", "ECHECK"), p)
            self.assertEqual(self.get(s, tok, p["id"])[2]["status"], "PENDING")
            time.sleep(1.2)
            self.assertEqual(self.get(s, tok, p["id"])[2]["status"], "COMPLETED")
            self.assertEqual(self.post(s, tok, {"amount": amount}, key="pend")[2]["status"],
                             "COMPLETED")
            s.set_mode(mode="fail:ECHECK_DECLINED")
            st, _, f = self.post(s, tok, {"amount": amount}, key="failed")
            self.assertEqual((st, f["status"]), (201, "FAILED"), f)
            self.assertEqual(self.get(s, tok, f["id"])[2]["status"], "FAILED")
            self.assertEqual(s.executions("failed"), 0)
            # the gateway's refusals in PayPal's words
            s.set_mode(mode="limited")
            st, _, e = self.post(s, tok, {"amount": amount}, key="lim")
            self.assertEqual((st, e["name"]), (429, "RATE_LIMIT_REACHED"), e)
            s.set_mode(mode="reject")
            st, _, e = self.post(s, tok, {"amount": amount}, key="rej")
            self.assertEqual((st, e["name"], e["details"][0]["issue"]),
                             (422, "UNPROCESSABLE_ENTITY", "REFUND_AMOUNT_EXCEEDED"), e)
            self.assertEqual(s.state()["key_retention_s"], 45 * 86400)  # PayPal's 45 days
        for bad in (["--shape", "stripe", "--client-id-file", os.path.join(d, "id")],
                    ["--shape", "paypal", "--token-ttl-s", "0"]):
            p = subprocess.run([tgtest.binary("tollgate-stub")] + bad, capture_output=True,
                               text=True, timeout=10)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(bad[2], p.stderr)

    def test_the_gateway_limiter_refuses_token_calls_too(self):
        with start_stub("--limit-rate", "2", tls="", profile="paypal", credentials=False) as s:
            # 2/s at the gateway: the second of two calls sent back to back
            # (far less than 500 ms apart) is refused before PayPal sees it
            first, second = self.token(s), self.token(s)
            self.assertEqual(first[0], 200, first)
            self.assertEqual((second[0], second[2]["name"]), (429, "RATE_LIMIT_REACHED"), second)
            self.assertEqual([a["mode"] for a in s.arrivals()], ["-", "limiter"])


class Retention(unittest.TestCase):
    def test_key_retention_flag(self):
        with start_stub("--key-retention-s", "1") as s:
            self.assertEqual(s.refund("op-ret")[0], 201)
            self.assertEqual(s.refund("op-ret")[0], 200)
            time.sleep(1.2)  # the scenario: the 1 s retention passes
            self.assertEqual(s.refund("op-ret")[0], 201)
            self.assertEqual(s.executions("op-ret"), 2)
            self.assertEqual(s.state()["key_retention_s"], 1)


class Modes(unittest.TestCase):
    def setUp(self):
        self.stub = start_stub()

    def tearDown(self):
        self.stub.close()

    def last(self):
        return self.stub.arrivals()[-1]

    def test_drop_executes_then_closes_without_answer(self):
        s = self.stub
        s.set_mode(mode="drop")
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionResetError)):
            s.refund("op-drop")
        rec = self.last()
        self.assertEqual((rec["mode"], rec["answer"], rec["executed"]), ("drop:0", "dropped", True))
        self.assertEqual(s.executions("op-drop"), 1)
        s.set_mode(mode="fast")
        status, _, body = s.refund("op-drop")
        self.assertEqual((status, body["status"]), (200, "succeeded"))
        self.assertEqual(s.executions("op-drop"), 1)

    def test_e500_executes_then_answers_500(self):
        s = self.stub
        s.set_mode(mode="e500")
        status, _, body = s.refund("op-500")
        self.assertEqual(status, 500)
        self.assertEqual(self.last()["executed"], True)
        self.assertEqual(s.executions("op-500"), 1)
        self.assertEqual(s.query("op-500")[2]["status"], "succeeded")

    def test_calls_closes_each_refund_at_its_kth_call(self):
        # calls:3: the POST executes and answers 500, one query says
        # processing, the next says succeeded; every later one too
        with start_stub("--mode", "calls:3") as s:
            st, _, body = s.refund("op-k")
            self.assertEqual((st, body["error"]["code"]), (500, "internal_error"))
            self.assertEqual(s.executions("op-k"), 1)
            self.assertEqual(s.query("op-k")[2]["status"], "processing")
            st, _, body = s.query("op-k")
            self.assertEqual((st, body["status"]), (200, "succeeded"))
            self.assertEqual(s.query("op-k")[2]["status"], "succeeded")
            s.set_mode(mode="calls:1")
            self.assertEqual(s.refund("op-one")[0], 201)
            s.set_mode(mode="calls")  # default K = 2
            self.assertEqual(s.refund("op-two")[0], 500)
            self.assertEqual(s.query("op-two")[2]["status"], "succeeded")
            self.assertEqual(s.executions("op-two"), 1)
        for bad in ("calls:0", "calls:101", "calls:x"):
            p = subprocess.run([tgtest.binary("tollgate-stub"), "--mode", bad],
                               capture_output=True, text=True, timeout=10)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn("--mode", p.stderr)

    def test_fail_takes_the_request_refuses_the_refund_and_answers_500(self):
        # The provider took it and refused the refund for good: no money
        # moved, the client saw 500 (an unknown outcome), a query says why.
        s = self.stub
        s.set_mode(mode="fail")
        status, _, body = s.refund("op-fail")
        self.assertEqual(status, 500)
        self.assertEqual(body["error"]["code"], "internal_error")
        rec = self.last()
        self.assertEqual((rec["mode"], rec["answer"], rec["executed"]),
                         ("fail:insufficient_funds", 500, False))
        self.assertEqual(s.executions("op-fail"), 0)
        status, _, q = s.query("op-fail")
        self.assertEqual(status, 200)
        self.assertEqual(q, {"operation_id": "op-fail", "status": "failed",
                             "failure_code": "insufficient_funds"})
        # A replay gets the first stored response (the same 500, byte for
        # byte) in any mode, and executes nothing; another payload is 422.
        s.set_mode(mode="fast")
        status, _, again = s.refund("op-fail")
        self.assertEqual((status, again), (500, body))
        self.assertEqual(s.refund("op-fail", amount=999)[2]["error"]["code"],
                         "idempotency_key_reused")
        self.assertEqual(self.last()["executed"], False)
        self.assertEqual(s.executions("op-fail"), 0)
        self.assertEqual(s.query("op-fail")[2]["status"], "failed")
        ledger = s.ledger()
        self.assertEqual(ledger["operations"]["op-fail"]["failure_code"], "insufficient_funds")
        self.assertEqual((ledger["total_executions"], ledger["total_failures"]), (0, 1))
        self.assertEqual(s.state()["failures"], 1)
        # The code is the mode's parameter; fail's failure is per key.
        s.set_mode(mode="fail:card_expired")
        self.assertEqual(s.refund("op-fail2")[0], 500)
        self.assertEqual(self.last()["mode"], "fail:card_expired")
        self.assertEqual(s.query("op-fail2")[2]["failure_code"], "card_expired")
        self.assertEqual(s.refund("op-fail3")[0], 500)
        self.assertEqual(s.state()["mode"], "fail:card_expired")
        # Once the key expires the provider has no record: 404, and the same
        # key is new again (executed by fast this time).
        s.admin("POST", "expire-keys", {"key": "op-fail"})
        self.assertEqual(s.query("op-fail")[0], 404)
        s.set_mode(mode="fast")
        self.assertEqual(s.refund("op-fail")[0], 201)
        self.assertEqual(s.query("op-fail")[2]["status"], "succeeded")
        self.assertEqual(s.executions("op-fail"), 1)
        self.assertNotIn("failure_code", s.ledger()["operations"]["op-fail"])

    def test_fail_modes_bad_parameters_and_queries(self):
        s = self.stub
        for bad in ["fail:", "fail:no spaces", "fail:" + "x" * 64, "fail:a/b"]:
            status, _, body = s.request("POST", "/_stub/mode", {"mode": bad})
            self.assertEqual(status, 400, bad)
        status, _, body = s.request("POST", "/_stub/mode", {"query_mode": "fail"})
        self.assertEqual(status, 400)
        self.assertEqual(s.set_mode(mode="mix", mix="fail=1")["mode"], "mix:fail=1")
        self.assertEqual(s.refund("op-mf")[0], 500)
        self.assertEqual(self.last()["mode"], "mix/fail:insufficient_funds")

    def test_reject_executes_nothing(self):
        s = self.stub
        s.set_mode(mode="reject")
        status, _, body = s.refund("op-rej")
        self.assertEqual(status, 422)
        self.assertEqual(body["error"]["code"], "invalid_request")
        self.assertFalse(body["error"]["retryable"])
        self.assertEqual(s.executions("op-rej"), 0)
        self.assertEqual(s.query("op-rej")[0], 404)
        self.assertEqual(self.last()["executed"], False)

    def test_unavailable_and_limited_with_retry_after(self):
        s = self.stub
        s.set_mode(mode="unavailable")
        status, hdrs, body = s.refund("op-u")
        self.assertEqual(status, 503)
        self.assertEqual(body["error"]["code"], "temporarily_unavailable")
        self.assertTrue(body["error"]["retryable"])
        self.assertEqual(hdrs["retry-after"], "1")  # the default
        s.set_mode(mode="limited:7")
        status, hdrs, body = s.refund("op-u")
        self.assertEqual((status, hdrs["retry-after"]), (429, "7"))
        self.assertEqual(body["error"]["code"], "rate_limited")
        s.set_mode(mode="unavailable", retry_after=30, retry_after_date=True)
        status, hdrs, _ = s.refund("op-u")
        when = email.utils.parsedate_to_datetime(hdrs["retry-after"]).timestamp()
        self.assertAlmostEqual(when, time.time() + 30, delta=5)
        s.set_mode(mode="limited:-")
        status, hdrs, _ = s.refund("op-u")
        self.assertEqual(status, 429)
        self.assertNotIn("retry-after", hdrs)
        self.assertEqual(s.executions("op-u"), 0)
        self.assertEqual(s.query("op-u")[0], 404)
        s.set_mode(mode="fast")
        self.assertEqual(s.refund("op-u")[0], 201)  # nothing was stored before

    def test_capacity_bucket_refuses_past_the_true_capacity(self):
        # 2/s with room for 2: a burst of 2 passes, then 429s without
        # Retry-After and nothing executed; queries draw from the same bucket;
        # changed mid-run it starts full, and 0 turns it off.
        with tgtest.start_stub("--mode", "fast", "--capacity", "2", "--capacity-burst",
                               "2") as s:
            got = [s.refund("cap-%d" % i)[0] for i in range(6)]
            self.assertEqual(got[:2], [201, 201])
            self.assertEqual(got.count(201), 2, got)  # 7 requests in far less than 500 ms
            status, hdrs, body = s.refund("cap-x")
            self.assertEqual((status, body["error"]["code"]), (429, "rate_limited"))
            self.assertNotIn("retry-after", hdrs)
            self.assertEqual(s.executions("cap-x"), 0)
            time.sleep(0.6)
            self.assertEqual(s.query("cap-0")[0], 200)  # a token ripened
            self.assertEqual(s.query("cap-0")[0], 429)
            modes = [a["mode"] for a in s.arrivals() if a["path"].startswith("/v1/")]
            self.assertEqual(modes.count("capacity"), 6, modes)
            self.assertEqual(s.state()["capacity"], 2)
            s.set_mode(capacity=0)
            self.assertEqual([s.refund("cap-y%d" % i)[0] for i in range(5)], [201] * 5)
            for bad in ({"capacity": -1}, {"capacity": "3"}, {"capacity_burst": 0.5}):
                status, _, body = s.request("POST", "/_stub/mode", bad)
                self.assertEqual(status, 400, bad)
                self.assertIn("capacity", body["error"]["message"])

    def test_mode_for_the_next_n_requests(self):
        # {"count": N}: the mode answers the next N refund requests only,
        # then the timeline in force (here slow:300) answers again.
        s = self.stub
        s.set_mode(mode="slow:300")
        s.set_mode(mode="unavailable", retry_after=2, count=2)
        self.assertEqual([s.refund("op-n%d" % i)[0] for i in range(2)], [503, 503])
        t0 = time.monotonic()
        self.assertEqual(s.refund("op-n2")[0], 201)
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)
        self.assertEqual(s.state()["mode"], "slow:300")
        for bad in ({"mode": "fast", "count": 0}, {"mode": "fast", "count": "2"},
                    {"count": 3}):
            status, _, body = s.request("POST", "/_stub/mode", bad)
            self.assertEqual(status, 400, bad)
            self.assertIn("count", body["error"]["message"])

    def test_processing_window_for_queries(self):
        s = self.stub
        s.set_mode(mode="processing:800")
        self.assertEqual(s.refund("op-p")[0], 201)
        self.assertEqual(s.query("op-p")[2]["status"], "processing")
        time.sleep(1.0)  # the scenario: past the 800 ms processing window
        self.assertEqual(s.query("op-p")[2]["status"], "succeeded")

    def test_slow_executes_even_when_the_client_gave_up(self):
        s = self.stub
        s.set_mode(mode="slow:1500")
        t0 = time.monotonic()
        with self.assertRaises(socket.timeout):
            s.refund("op-gone", timeout=0.2)
        if time.monotonic() - t0 < 1.0:  # else the machine was too busy to tell
            self.assertEqual(s.executions("op-gone"), 0)
        tgtest.wait_until(lambda: s.executions("op-gone") == 1, timeout=5, what="execution")
        self.assertGreater(time.monotonic() - t0, 1.4)
        rec = [r for r in s.arrivals() if r["idempotency_key"] == "op-gone"][0]
        self.assertEqual((rec["answer"], rec["executed"]), (201, True))
        tgtest.wait_until(lambda: s.arrivals()[0]["delivered"] is not None, timeout=5,
                          what="the connection to finish")

    def test_slow_takes_its_delay(self):
        s = self.stub
        s.set_mode(mode="slow", delay_ms=600)
        t0 = time.monotonic()
        self.assertEqual(s.refund("op-s")[0], 201)
        self.assertGreaterEqual(time.monotonic() - t0, 0.55)


class Record(unittest.TestCase):
    def test_arrival_fields_and_since(self):
        with start_stub() as s:
            s.refund("op-a", headers={"X-Request-Id": "req-1", "X-Attempt": "1"})
            s.refund("op-a", headers={"X-Request-Id": "req-2", "X-Attempt": "2"})
            s.query("op-a")
            s.request("GET", "/_stub/state")  # admin calls are not recorded
            recs = s.arrivals()
            self.assertEqual([r["seq"] for r in recs], [1, 2, 3])
            a = recs[0]
            for field in ["seq", "mono_ns", "t_ns", "wall_ms", "method", "path",
                          "idempotency_key", "request_id", "attempt", "traceparent", "conn_id",
                          "open", "mode",
                          "phase", "answer", "executed", "delivered"]:
                self.assertIn(field, a)
            self.assertEqual((a["method"], a["path"], a["idempotency_key"], a["request_id"],
                              a["attempt"], a["mode"], a["answer"], a["executed"]),
                             ("POST", "/v1/refunds", "op-a", "req-1", "1", "fast", 201, True))
            self.assertEqual((recs[1]["answer"], recs[1]["executed"]), (200, False))
            self.assertEqual((recs[2]["method"], recs[2]["path"]), ("GET", "/v1/refunds/op-a"))
            self.assertLess(recs[0]["mono_ns"], recs[1]["mono_ns"])
            self.assertAlmostEqual(a["wall_ms"] / 1000, time.time(), delta=30)
            self.assertGreater(a["conn_id"], 0)
            self.assertNotEqual(recs[0]["conn_id"], recs[1]["conn_id"])  # fresh connections
            self.assertEqual([r["seq"] for r in s.arrivals(since=2)], [3])

    def test_record_file_written_on_sigterm(self):
        d = tgtest.scratch_dir("tgstub-rec-")
        path = os.path.join(d, "arrivals.jsonl")
        s = start_stub("--record", path)
        try:
            s.refund("op-f1")
            s.set_mode(mode="drop")
            try:
                s.refund("op-f2")
            except OSError:
                pass
            # A request still waiting at SIGTERM is abandoned, not executed.
            s.set_mode(mode="slow:5000")
            waiting = threading.Thread(target=lambda: self.assertRaises(
                OSError, s.refund, "op-f3", timeout=8))
            waiting.start()
            tgtest.wait_until(lambda: s.state()["timers_pending"] == 1, timeout=5,
                              what="a waiting request")
            t0 = time.monotonic()
            self.assertEqual(s.stop(signal.SIGTERM), 0, s.stderr_text())
            self.assertLess(time.monotonic() - t0, 4)
            waiting.join(10)
            with open(path) as f:
                recs = tgtest.json_lines(f.read())
            self.assertEqual([r["idempotency_key"] for r in recs], ["op-f1", "op-f2", "op-f3"])
            self.assertEqual([r["answer"] for r in recs], [201, "dropped", "dropped"])
            self.assertEqual([r["executed"] for r in recs], [True, True, False])
        finally:
            s.close()


class Concurrency(unittest.TestCase):
    def test_fifty_slow_requests_overlap(self):
        delay = 1.0
        with start_stub("--mode", "slow:1000") as s:
            t0 = time.monotonic()
            res = parallel(50, lambda i: s.refund("op-c%d" % i, timeout=20))
            elapsed = time.monotonic() - t0
            self.assertEqual([r[0] if isinstance(r, tuple) else r for r in res], [201] * 50)
            self.assertGreaterEqual(elapsed, delay * 0.9)
            self.assertLess(elapsed, 3 * delay)  # not 50 x delay
            recs = s.arrivals()
            self.assertEqual(len(recs), 50)
            self.assertGreaterEqual(max(r["open"] for r in recs), 20)
            self.assertEqual(s.ledger()["total_executions"], 50)
            self.assertEqual(s.state()["open_requests"], 0)


class Timeline(unittest.TestCase):
    def test_phases_switch_at_the_right_times(self):
        with start_stub("--timeline", "fast 1s; unavailable:3 700ms; reject 600ms; fast") as s:
            t0 = time.monotonic()
            seen = []
            i = 0
            while time.monotonic() - t0 < 2.8:
                status = s.refund("op-t%d" % i)[0]
                seen.append((time.monotonic() - t0, status))
                i += 1
                time.sleep(0.04)  # the scenario: paced requests through the phases
            # The stub's own view is exact: the mode of each arrival follows its t_ns.
            bounds = [(1.0e9, "fast", 0), (1.7e9, "unavailable:3", 1), (2.3e9, "reject", 2),
                      (float("inf"), "fast", 3)]
            for r in s.arrivals():
                mode, phase = next((m, p) for b, m, p in bounds if r["t_ns"] < b)
                self.assertEqual((r["mode"], r["phase"]), (mode, phase), r)
            # The client's view, with margins for scheduling noise.
            want = {201: [(0.0, 0.85), (2.45, 2.8)], 503: [(1.15, 1.55)], 422: [(1.85, 2.15)]}
            for status, windows in want.items():
                for lo, hi in windows:
                    inside = [st for t, st in seen if lo <= t <= hi]
                    self.assertTrue(inside, (status, lo, hi))
                    self.assertEqual(set(inside), {status}, (status, lo, hi, seen))

    def test_mode_switch_at_run_time_restarts_the_timeline(self):
        with start_stub("--mode", "reject") as s:
            self.assertEqual(s.refund("op-m1")[0], 422)
            st = s.set_mode(timeline="unavailable 400ms; fast")
            self.assertEqual(st["mode"], "unavailable")
            self.assertEqual(s.refund("op-m2")[0], 503)
            time.sleep(0.5)  # the scenario: past the 400 ms phase
            self.assertEqual(s.refund("op-m2")[0], 201)
            self.assertEqual(s.state()["mode"], "fast")

    def test_timeline_file_and_time_scale(self):
        d = tgtest.scratch_dir("tgstub-tl-")
        path = os.path.join(d, "ten-slow-minutes.timeline")
        with open(path, "w") as f:
            f.write("# the seed's bad minutes, scaled down by --time-scale\n"
                    "reject 10s   # ten seconds of 422\n"
                    "\n"
                    "unavailable:2 10s\n"
                    "fast\n")
        with start_stub("--timeline", "@" + path, "--time-scale", "0.05") as s:
            st = s.state()
            self.assertEqual(st["timeline"], "reject 500ms; unavailable:2 500ms; fast")
            self.assertEqual(s.refund("op-s1")[0], 422)
            time.sleep(1.2)  # the scenario: past both scaled phases (1 s)
            self.assertEqual(s.refund("op-s1")[0], 201)

    def test_refuse_then_recover_on_the_same_port(self):
        with start_stub("--timeline", "fast 500ms; refuse 1s; fast") as s:
            self.assertEqual(s.refund("op-f0")[0], 201)
            kept = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
            kept.request("GET", "/v1/refunds/op-f0")
            self.assertEqual(kept.getresponse().read() and 200, 200)
            time.sleep(0.8)  # the scenario: into the refuse phase (0.5 .. 1.5 s)
            with self.assertRaises(ConnectionRefusedError):
                s.refund("op-f1", timeout=2)
            # A connection accepted before the refuse gets no answer either.
            with self.assertRaises((http.client.RemoteDisconnected, ConnectionResetError,
                                    BrokenPipeError)):
                kept.request("GET", "/v1/refunds/op-f0")
                kept.getresponse()
            kept.close()
            time.sleep(0.3)  # the scenario: later in the refuse phase, still refused
            with self.assertRaises(ConnectionRefusedError):
                s.request("GET", "/_stub/state", timeout=2)
            time.sleep(0.75)  # the scenario: now past 1.5 s, fast again
            self.assertEqual(s.refund("op-f1")[0], 201)
            self.assertEqual(s.executions("op-f1"), 1)
            self.assertTrue(s.state()["listening"])


class BadInput(unittest.TestCase):
    def test_contract_errors_never_a_crash(self):
        with start_stub("--max-body", "65536") as s:
            def post(body, headers):
                h = {"Content-Type": "application/json"}
                h.update(headers)
                st, _, b = s.request("POST", "/v1/refunds", body, h)
                return st, (b or {}).get("error", {}).get("code") if isinstance(b, dict) else b

            good = json.dumps(dict(BODY, operation_id="k1"))
            cases = [
                ("{bad", {"Idempotency-Key": "k1"}, 400),
                ("", {"Idempotency-Key": "k1"}, 400),
                ("[]", {"Idempotency-Key": "k1"}, 400),
                (good, {}, 400),
                (good, {"Idempotency-Key": "k 1"}, 400),
                (good, {"Idempotency-Key": "k" * 129}, 400),
                (good, {"Idempotency-Key": "k1", "Content-Type": "text/plain"}, 400),
                (json.dumps({"operation_id": "k1"}), {"Idempotency-Key": "k1"}, 422),
                (json.dumps(dict(BODY, operation_id="k1", amount=-5)), {"Idempotency-Key": "k1"},
                 422),
                (json.dumps(dict(BODY, operation_id="k1", amount=1.5)),
                 {"Idempotency-Key": "k1"}, 422),
                (json.dumps(dict(BODY, operation_id="k1", amount="15")),
                 {"Idempotency-Key": "k1"}, 422),
                (json.dumps(dict(BODY, operation_id="k1", currency="twd")),
                 {"Idempotency-Key": "k1"}, 422),
                (json.dumps(dict(BODY, operation_id="k2")), {"Idempotency-Key": "k1"}, 422),
                ('{"operation_id":"k1","operation_id":"k1"}', {"Idempotency-Key": "k1"}, 400),
                ("x" * 70000, {"Idempotency-Key": "k1"}, 413),
            ]
            for body, headers, want in cases:
                status, code = post(body, headers)
                self.assertEqual(status, want, (body[:60], headers))
                self.assertEqual(code, "invalid_request", (body[:60], headers))
            self.assertEqual(s.request("PUT", "/v1/refunds", good)[0], 405)
            st, hdrs, _ = s.request("DELETE", "/v1/refunds/k1")
            self.assertEqual((st, hdrs.get("allow")), (405, "GET"))
            self.assertEqual(s.request("GET", "/v1/refunds")[0], 405)
            self.assertEqual(s.request("GET", "/nope")[0], 404)
            self.assertEqual(s.request("GET", "/v1/refunds/bad%20id")[0], 400)
            self.assertEqual(s.request("POST", "/_stub/mode", "{nope")[0], 400)
            self.assertEqual(s.request("POST", "/_stub/mode", {"mode": "warp"})[0], 400)
            self.assertEqual(s.request("GET", "/_stub/mode")[0], 405)
            self.assertEqual(s.ledger()["total_executions"], 0)
            # Still alive and correct after all of it.
            self.assertEqual(s.refund("k1")[0], 201)
            self.assertIsNone(s.poll())


class Mix(unittest.TestCase):
    def run_mix(self, seed):
        flags = ["--mode", "mix", "--seed", str(seed), "--retry-after", "4",
                 "--mix", "fast=50,reject=25,unavailable=25"]
        with start_stub(*flags) as s:
            statuses = []
            for i in range(30):
                status, hdrs, _ = s.refund("op-mix%d" % i)
                if status == 503:
                    self.assertEqual(hdrs["retry-after"], "4")
                statuses.append(status)
            modes = [r["mode"] for r in s.arrivals()]
            self.assertTrue(all(m.startswith("mix/") for m in modes), modes)
            return statuses, modes

    def test_mix_is_reproducible_with_a_seed(self):
        a = self.run_mix(7)
        b = self.run_mix(7)
        c = self.run_mix(8)
        self.assertEqual(a, b)
        self.assertGreaterEqual(len(set(a[0])), 2)
        self.assertNotEqual(a[0], c[0])


class QueryModes(unittest.TestCase):
    def test_query_modes_are_independent_of_post_modes(self):
        with start_stub("--query-mode", "unavailable:2") as s:
            self.assertEqual(s.refund("op-q")[0], 201)
            status, hdrs, _ = s.query("op-q")
            self.assertEqual((status, hdrs["retry-after"]), (503, "2"))
            s.set_mode(query_mode="slow", query_delay_ms=600)
            t0 = time.monotonic()
            self.assertEqual(s.query("op-q")[0], 200)
            self.assertGreaterEqual(time.monotonic() - t0, 0.55)
            t0 = time.monotonic()
            self.assertEqual(s.refund("op-q2")[0], 201)
            self.assertLess(time.monotonic() - t0, 0.4)
            s.set_mode(mode="unavailable", query_mode="fast")
            self.assertEqual(s.refund("op-q3")[0], 503)
            self.assertEqual(s.query("op-q")[0], 200)
            s.set_mode(query_mode="limited")
            self.assertEqual(s.query("op-q")[0], 429)
            recs = s.arrivals()
            self.assertEqual(recs[-1]["mode"], "limited:1")


def raw_exchange(port, method, path, body=b"", headers=None, timeout=5.0, give_up_after=None):
    """One request on a raw socket, read until the server closes, resets or
    the timeout: (head, body, end, body_recv_times), end "close", "reset" or
    "timeout"; give_up_after=N closes our side after N body bytes ("gave_up").
    Nothing of the answer is interpreted: the hostile modes' wire is checked
    byte for byte."""
    hdrs = {"Host": "127.0.0.1", "Connection": "close", "Content-Length": str(len(body))}
    hdrs.update(headers or {})
    req = ("%s %s HTTP/1.1\r\n" % (method, path)
           + "".join("%s: %s\r\n" % kv for kv in hdrs.items()) + "\r\n").encode() + body
    data, times, end = b"", [], "close"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(req)
        deadline = time.monotonic() + timeout
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                end = "reset"
                break
            except socket.timeout:
                end = "timeout"
                break
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data:
                times.append((time.monotonic(), len(data) - data.index(b"\r\n\r\n") - 4))
                if give_up_after is not None and times[-1][1] >= give_up_after:
                    end = "gave_up"
                    break
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest, end, times


def head_fields(head):
    """(status line, {lower-case name: value}) of a raw answer head."""
    lines = head.split("\r\n")
    return lines[0], {k.strip().lower(): v.strip() for k, v in
                      (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}


class Hostile(unittest.TestCase):
    """The hostile provider's modes on the wire (issue 16, --help): each
    answer byte for byte, what executed, and the arrival record. Plain HTTP
    in PROVIDER.md's shape: the raw socket reads what the stub wrote."""

    @classmethod
    def setUpClass(cls):
        cls.stub = start_stub(tls="", profile="provider-md")

    @classmethod
    def tearDownClass(cls):
        # a clean stop after every hostile answer: exit 0, and under
        # ASan+UBSan no report (leaks included)
        code = cls.stub.stop()
        err = cls.stub.stderr_text()
        cls.stub.close()
        if code != 0 or "Sanitizer" in err or "runtime error:" in err:
            raise AssertionError("tollgate-stub stopped with %s:\n%s" % (code, err[-4000:]))

    def post(self, mode, key, **kw):
        """POST key under mode (this request only); the raw answer."""
        self.stub.set_mode(mode=mode, count=1)
        body = json.dumps(dict(BODY, operation_id=key)).encode()
        return raw_exchange(self.stub.port, "POST", "/v1/refunds", body,
                            {"Content-Type": "application/json", "Idempotency-Key": key}, **kw)

    def success(self, key):
        """The success body the stub stored for key (its replay, 200)."""
        self.stub.set_mode(mode="fast", count=1)
        status, _, raw = tgtest.http_request("POST", self.stub.url + "/v1/refunds",
                                             dict(BODY, operation_id=key),
                                             {"Idempotency-Key": key})
        self.assertEqual(status, 200)
        return raw

    def last(self):
        return self.stub.arrivals()[-1]

    def test_reset_body_sends_part_of_the_body_then_a_reset(self):
        head, body, end, _ = self.post("reset-body:20", "h-reset")
        line, h = head_fields(head)
        self.assertEqual(line, "HTTP/1.1 201 Created")
        full = self.success("h-reset")
        self.assertEqual(int(h["content-length"]), len(full))
        self.assertEqual((body, end), (full[:20], "reset"))
        self.assertEqual(self.stub.executions("h-reset"), 1)
        # default: half the body, always short of the whole
        head, body, end, _ = self.post("reset-body", "h-reset2")
        full = self.success("h-reset2")
        self.assertEqual((body, end), (full[:len(full) // 2], "reset"))
        rec = self.stub.arrivals()[-2]
        self.assertEqual((rec["mode"], rec["answer"], rec["executed"], rec["delivered"]),
                         ("reset-body", 201, True, False))

    def test_truncated_and_invalid_json_are_complete_http(self):
        for mode, status in (("truncated", 201), ("truncated:200", 200)):
            key = "h-" + mode.replace(":", "-")
            head, body, end, _ = self.post(mode, key)
            line, h = head_fields(head)
            self.assertTrue(line.startswith("HTTP/1.1 %d " % status), line)
            full = self.success(key)
            self.assertEqual(body, full[:len(full) // 2])
            self.assertEqual((int(h["content-length"]), end), (len(body), "close"))
            self.assertEqual(h["content-type"], "application/json")
            self.assertRaises(ValueError, json.loads, body)
        head, body, end, _ = self.post("invalid", "h-invalid")
        self.assertTrue(head.startswith("HTTP/1.1 201 "), head)
        full = self.success("h-invalid")
        self.assertEqual(body, full[:-1] + b",}")
        self.assertRaises(ValueError, json.loads, body)
        self.assertEqual(self.stub.executions("h-invalid"), 1)
        head, _, _, _ = self.post("invalid:200", "h-invalid2")
        self.assertTrue(head.startswith("HTTP/1.1 200 "), head)

    def test_huge_streams_a_valid_body_without_holding_it(self):
        head, body, end, _ = self.post("huge:2000000", "h-huge")
        _, h = head_fields(head)
        self.assertEqual((int(h["content-length"]), len(body), end), (2000000, 2000000, "close"))
        doc = json.loads(body)
        self.assertEqual((doc["status"], doc["operation_id"]), ("succeeded", "h-huge"))
        self.assertEqual(doc["pad"], "x" * len(doc["pad"]))
        # the default, 64 MiB, read and counted: the stub's peak memory grows
        # far less than that (it generates the bytes as they go). Judged as
        # the growth of the peak across the answer, not the peak itself: the
        # peak before it is the stub's own size, which the sanitizer build
        # (its shadow memory) puts near 32 MiB already
        hwm_before = vm_hwm_kib(self.stub.pid)
        self.stub.set_mode(mode="huge", count=1)
        with socket.create_connection(("127.0.0.1", self.stub.port), timeout=10) as sock:
            payload = json.dumps(dict(BODY, operation_id="h-huge2")).encode()
            sock.sendall(b"POST /v1/refunds HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                         b"Content-Type: application/json\r\nIdempotency-Key: h-huge2\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
            got = 0
            while True:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                got += len(chunk)
        self.assertGreater(got, 64 * 1024 * 1024)
        self.assertLess(vm_hwm_kib(self.stub.pid) - hwm_before, 16 * 1024)

    def test_trickle_sends_the_body_a_byte_at_a_time(self):
        t0 = time.monotonic()
        head, body, end, times = self.post("trickle:10", "h-trickle")
        elapsed = time.monotonic() - t0
        self.assertTrue(head.startswith("HTTP/1.1 201 "), head)
        self.assertEqual(body, self.success("h-trickle"))
        self.assertEqual(end, "close")
        # one byte per read, ~10 ms apart
        self.assertGreaterEqual(len(times), len(body) - 2)
        self.assertGreaterEqual(elapsed, (len(body) - 1) * 0.010 * 0.9)
        # a client that leaves half way costs the stub nothing
        head, body, end, _ = self.post("trickle:10", "h-trickle2", give_up_after=5)
        self.assertEqual(end, "gave_up")
        tgtest.wait_until(lambda: self.stub.state()["open_requests"] == 0,
                          what="the trickle noticed the client left")
        rec = self.stub.arrivals()[-1]
        self.assertEqual((rec["mode"], rec["answer"], rec["delivered"]), ("trickle:10", 201, False))
        self.assertEqual(self.stub.executions("h-trickle2"), 1)

    def test_ctype_puts_the_json_under_another_content_type(self):
        for mode, want in (("ctype", "text/html"), ("ctype:text/plain", "text/plain"),
                           ("ctype:none", None)):
            key = "h-" + mode.replace(":", "-").replace("/", "-")
            head, body, _, _ = self.post(mode, key)
            _, h = head_fields(head)
            self.assertEqual(h.get("content-type"), want, mode)
            self.assertEqual(json.loads(body)["status"], "succeeded")
            self.assertEqual(self.stub.executions(key), 1)

    def test_contra_says_one_thing_in_the_status_and_another_in_the_body(self):
        for mode, status, check in (
                ("contra", 201, lambda d: d["status"] == "failed" and
                 d["failure_code"] == "contra"),
                ("contra:200-error", 200, lambda d: d["error"]["code"] == "invalid_request"),
                ("contra:500-succeeded", 500, lambda d: d["status"] == "succeeded"),
                ("contra:422-succeeded", 422, lambda d: d["status"] == "succeeded"),
                ("contra:503-processing", 503, lambda d: d["status"] == "processing")):
            key = "h-" + mode.replace(":", "-")
            head, body, _, _ = self.post(mode, key)
            self.assertTrue(head.startswith("HTTP/1.1 %d " % status), (mode, head))
            self.assertTrue(check(json.loads(body)), (mode, body))
            self.assertEqual(self.stub.executions(key), 1, mode)
        self.assertEqual(self.last()["mode"], "contra:503-processing")

    def test_http10_closes_to_end_the_body(self):
        head, body, end, _ = self.post("http10", "h-10")
        line, h = head_fields(head)
        self.assertEqual(line, "HTTP/1.0 201 Created")
        self.assertEqual(h.get("connection"), "close")
        self.assertNotIn("content-length", h)
        self.assertNotIn("transfer-encoding", h)
        self.assertEqual((body, end), (self.success("h-10"), "close"))
        head, body, end, _ = self.post("http10:cut", "h-10cut")
        full = self.success("h-10cut")
        self.assertEqual((body, end), (full[:len(full) // 2], "close"))

    def test_redirect_executes_nothing(self):
        for mode, line in (("redirect", "HTTP/1.1 307 Temporary Redirect"),
                           ("redirect:301", "HTTP/1.1 301 Moved Permanently"),
                           ("redirect:308", "HTTP/1.1 308 Permanent Redirect")):
            key = "h-" + mode.replace(":", "-")
            head, body, _, _ = self.post(mode, key)
            got, h = head_fields(head)
            self.assertEqual(got, line)
            self.assertEqual(h["location"], "/moved/v1/refunds")
            self.assertEqual(h["content-type"], "text/html")
            self.assertIn(b"/moved/v1/refunds", body)
            self.assertEqual(self.stub.executions(key), 0)
            rec = self.last()
            self.assertEqual((rec["answer"], rec["executed"]), (int(line.split()[1]), False))

    def test_hostile_query_modes(self):
        s = self.stub
        s.set_mode(mode="fast", count=1)
        self.assertEqual(s.refund("h-q")[0], 201)
        try:
            s.set_mode(query_mode="redirect")
            status, hdrs, _ = s.query("h-q")
            self.assertEqual((status, hdrs["location"]), (307, "/moved/v1/refunds/h-q"))
            s.set_mode(query_mode="contra:404-succeeded")
            status, _, body = s.query("h-q")
            self.assertEqual((status, body["status"]), (404, "succeeded"))
            s.set_mode(query_mode="truncated")
            status, _, body = s.query("h-q")
            self.assertEqual(status, 200)
            self.assertIsInstance(body, str)  # not JSON
            s.set_mode(query_mode="ctype:text/plain")
            status, hdrs, body = s.query("h-q")
            self.assertEqual((status, hdrs["content-type"], body["status"]),
                             (200, "text/plain", "succeeded"))
            s.set_mode(query_mode="reset-body:3")
            head, body, end, _ = raw_exchange(s.port, "GET", "/v1/refunds/h-q")
            self.assertEqual((head.split("\r\n")[0], body, end),
                             ("HTTP/1.1 200 OK", b'{"o', "reset"))
            self.assertEqual(s.state()["query_mode"], "reset-body:3")
        finally:
            s.set_mode(query_mode="fast")

    def test_bad_parameters_are_refused_naming_the_mode(self):
        for mode in ("reset-body:x", "truncated:99", "invalid:600", "huge:0", "trickle:0",
                     "trickle:60001", "ctype:text/plain;charset=utf-8", "ctype:", "contra:201",
                     "contra:201-maybe", "contra:x-failed", "http10:half", "redirect:200",
                     "redirect:304"):
            status, _, body = self.stub.request("POST", "/_stub/mode", {"mode": mode})
            self.assertEqual(status, 400, mode)
        status, _, body = self.stub.request("POST", "/_stub/mode", {"query_mode": "reject"})
        self.assertEqual(status, 400)
        self.assertIn("hostile", body["error"]["message"])
        # a hostile member of mix, and in a timeline
        self.stub.set_mode(mode="mix", mix="fast=1,truncated=1", count=1)
        self.stub.set_mode(timeline="contra:500-succeeded 1s; fast")
        self.assertEqual(self.stub.state()["timeline"], "contra:500-succeeded 1000ms; fast")
        self.stub.set_mode(mode="fast")
        out = subprocess.run([tgtest.binary("tollgate-stub"), "--mode", "trickle:0"],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 2)
        self.assertIn("--mode", out.stderr)
        self.assertIn("trickle", out.stderr)


def vm_hwm_kib(pid):
    """A process's peak resident set (VmHWM), KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for %d" % pid)


class Webhook(unittest.TestCase):
    def test_signed_event_after_execution_with_delay_and_drop(self):
        secret = b"s3cret-for-tests"
        d = tgtest.scratch_dir("tgstub-wh-")
        secret_file = os.path.join(d, "secret")
        with open(secret_file, "wb") as f:
            f.write(secret + b"\n")
        with tgtest.EventReceiver() as rx, start_stub(
                "--webhook-url", rx.url + "/v1/provider-events",
                "--webhook-secret-file", secret_file, "--webhook-delay-ms", "300") as s:
            t0 = time.monotonic()
            status, _, body = s.refund("op-wh")
            self.assertEqual(status, 201)
            ev = tgtest.wait_until(lambda: rx.snapshot(), timeout=5, what="webhook")[0]
            self.assertGreaterEqual(ev["mono"] - t0, 0.25)
            self.assertEqual(ev["path"], "/v1/provider-events")
            want = "sha256=" + hmac.new(secret, ev["body"], hashlib.sha256).hexdigest()
            self.assertTrue(hmac.compare_digest(ev["headers"]["x-signature"], want))
            self.assertEqual(json.loads(ev["body"]), {"operation_id": "op-wh",
                                                      "status": "succeeded",
                                                      "refund_id": body["refund_id"]})
            # A replay executes nothing, so it sends nothing.
            self.assertEqual(s.refund("op-wh")[0], 200)
            s.set_mode(webhook_drop_rate=1.0, webhook_delay_ms=0)
            self.assertEqual(s.refund("op-wh2")[0], 201)
            tgtest.wait_until(lambda: s.state()["webhook"]["dropped"] == 1, timeout=5,
                              what="dropped event")
            time.sleep(0.3)  # the scenario: time passes and no late event comes
            self.assertEqual(len(rx.snapshot()), 1)
            self.assertEqual(s.state()["webhook"]["sent"], 1)
            # A refund the provider refused for good is told as failed,
            # without a refund id.
            s.set_mode(mode="fail:card_expired", webhook_drop_rate=0.0)
            self.assertEqual(s.refund("op-wh3")[0], 500)
            ev = tgtest.wait_until(lambda: rx.snapshot()[1:], timeout=5, what="failed event")[0]
            want = "sha256=" + hmac.new(secret, ev["body"], hashlib.sha256).hexdigest()
            self.assertTrue(hmac.compare_digest(ev["headers"]["x-signature"], want))
            self.assertEqual(json.loads(ev["body"]), {"operation_id": "op-wh3",
                                                      "status": "failed"})


# The methods that judge behaviour only (tests/CMakeLists.txt, TG_IT_SPLIT):
# answers, records, ledgers, messages and exit codes of requests sent one
# after another, with no delay mode whose window a late request could miss
# (the slow modes' 409s and "not listed yet" need the first request still
# open: serial). Their only clocks are generous safety timeouts and, in
# test_arrival_fields_and_since, the order of two arrivals' stamps and a
# wall clock within 30 s. huge's bound is memory (VmHWM), not time. They run
# in it.test_stub.parallel, beside other tests. Every other method judges a
# time load could break (a delay's upper bound, a phase or a retention window
# hit from the test's clock, overlap of slow requests, the trickle's separate
# reads, the webhook's delay) and runs in it.test_stub.serial, alone.
BEHAVIOUR_ONLY = (
    "test_help_documents_every_flag_and_the_timeline",
    "test_bad_flags_exit_non_zero_naming_the_flag",
    "test_execute_replay_reuse_and_query",
    "test_expire_keys_makes_the_same_key_new",
    "test_reset_forgets_everything",
    "test_list_is_the_only_lookup_without_the_refund_id",
    "test_tokens_refunds_lookups_and_errors",
    "test_the_gateway_limiter_refuses_token_calls_too",
    "test_drop_executes_then_closes_without_answer",
    "test_e500_executes_then_answers_500",
    "test_calls_closes_each_refund_at_its_kth_call",
    "test_fail_takes_the_request_refuses_the_refund_and_answers_500",
    "test_fail_modes_bad_parameters_and_queries",
    "test_reject_executes_nothing",
    "test_arrival_fields_and_since",
    "test_contract_errors_never_a_crash",
    "test_mix_is_reproducible_with_a_seed",
    "test_reset_body_sends_part_of_the_body_then_a_reset",
    "test_truncated_and_invalid_json_are_complete_http",
    "test_huge_streams_a_valid_body_without_holding_it",
    "test_ctype_puts_the_json_under_another_content_type",
    "test_contra_says_one_thing_in_the_status_and_another_in_the_body",
    "test_http10_closes_to_end_the_body",
    "test_redirect_executes_nothing",
    "test_hostile_query_modes",
    "test_bad_parameters_are_refused_naming_the_mode",
)


if __name__ == "__main__":
    tgtest.main_unittest(parallel=BEHAVIOUR_ONLY)
