"""The PayPal profile (docs/providers/paypal.ini) and the two mapping
features it needs, OAuth 2.0 client-credentials tokens (provider.auth =
oauth2) and decimal-string amounts ({amount_decimal}) (issue 25).

tollgate-stub has no paypal shape yet: these tests run against a small
PayPal stand-in in this file (PayPalStandIn), which plays what
docs/providers/paypal.md reads from the reference — POST
/v2/payments/captures/{id}/refund with the amount a decimal string checked
against the currency's places, a PayPal-Request-Id whose repeat returns the
refund it made, GET /v2/payments/refunds/{id} as the only lookup, PENDING
refunds that become COMPLETED later, a token endpoint (HTTP Basic, form
grant_type=client_credentials) whose tokens live TTL seconds, and a 401
AUTHENTICATION_FAILURE for a token it does not hold. It records every
arrival (time, method, path, headers, body).

Behaviour only, with margins: labelled parallel.
"""

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgprovider  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events  # noqa: E402

PROFILE = "paypal"
PLACES = {"USD": 2, "EUR": 2, "JPY": 0, "KWD": 3}
CLIENT_ID, CLIENT_SECRET = "pp-client", "pp-secret-" + tgprovider.SECRET_MARK


class PayPalStandIn:
    def __init__(self, ttl=3600):
        self.ttl = ttl
        self.lock = threading.Lock()
        self.tokens = {}      # token -> expiry (epoch s)
        self.by_key = {}      # PayPal-Request-Id -> refund
        self.refunds = {}     # id -> refund
        self.arrivals = []
        self.executions = {}  # key -> refunds made
        self.post_delay = 0.0  # seconds before a POST answers (after it executed)
        self.pending_s = None  # a refund is PENDING this long, then COMPLETED
        self.refuse = None     # an issue to refuse with (422)
        owner = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def send(self, code, obj):
                b = json.dumps(obj).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(b)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(b)
                except OSError:
                    pass  # the caller gave up (its timeout)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                owner.record(self, body)
                if self.path == "/v1/oauth2/token":
                    return self.send(*owner.token(self.headers.get("Authorization"), body))
                if not owner.authorized(self.headers.get("Authorization")):
                    return self.send(401, {"name": "AUTHENTICATION_FAILURE",
                                           "message": "Authentication failed", "debug_id": "d"})
                code, obj = owner.refund(self.path, self.headers.get("PayPal-Request-Id"), body)
                if owner.post_delay:
                    time.sleep(owner.post_delay)
                return self.send(code, obj)

            def do_GET(self):
                owner.record(self, "")
                if not owner.authorized(self.headers.get("Authorization")):
                    return self.send(401, {"name": "AUTHENTICATION_FAILURE", "debug_id": "d"})
                prefix = "/v2/payments/refunds/"
                r = owner.refunds.get(self.path[len(prefix):]) \
                    if self.path.startswith(prefix) else None
                if not r:
                    return self.send(404, {"name": "RESOURCE_NOT_FOUND", "debug_id": "d"})
                return self.send(200, owner.view(r))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def record(self, h, body):
        with self.lock:
            self.arrivals.append({"t": time.monotonic(), "method": h.command, "path": h.path,
                                  "auth": (h.headers.get("Authorization") or "").split(" ")[0],
                                  "key": h.headers.get("PayPal-Request-Id"), "body": body})

    def token(self, auth, body):
        basic = base64.b64encode(("%s:%s" % (CLIENT_ID, CLIENT_SECRET)).encode()).decode()
        if auth != "Basic " + basic or body != "grant_type=client_credentials":
            return 401, {"error": "invalid_client", "error_description": "Client Authentication failed"}
        t = "A21AA" + secrets.token_urlsafe(24)
        with self.lock:
            self.tokens[t] = time.time() + self.ttl
        return 200, {"scope": "https://uri.paypal.com/services/payments/refund", "access_token": t,
                     "token_type": "Bearer", "app_id": "APP-1", "expires_in": self.ttl}

    def authorized(self, auth):
        with self.lock:
            return bool(auth) and auth.startswith("Bearer ") and \
                self.tokens.get(auth[7:], 0) > time.time()

    def revoke(self):
        with self.lock:
            self.tokens.clear()

    def refund(self, path, key, body):
        parts = path.split("/")
        if len(parts) != 6 or parts[1:4] != ["v2", "payments", "captures"] or parts[5] != "refund":
            return 404, {"name": "RESOURCE_NOT_FOUND", "debug_id": "d"}
        with self.lock:
            if key in self.by_key:  # the repeat: the refund it made
                return 200, self.view(self.by_key[key])
            try:
                req = json.loads(body)
                value, cur = req["amount"]["value"], req["amount"]["currency_code"]
            except (ValueError, KeyError, TypeError):
                return 400, {"name": "INVALID_REQUEST", "debug_id": "d",
                             "details": [{"issue": "MISSING_REQUIRED_PARAMETER"}]}
            whole, _, frac = value.partition(".")
            if cur not in PLACES or not whole.isdigit() or len(frac) != PLACES[cur] or \
                    (frac and not frac.isdigit()):
                return 422, {"name": "UNPROCESSABLE_ENTITY", "debug_id": "d",
                             "details": [{"issue": "DECIMAL_PRECISION"}]}
            if self.refuse:
                return 422, {"name": "UNPROCESSABLE_ENTITY", "debug_id": "d",
                             "details": [{"issue": self.refuse}]}
            r = {"id": "R%s" % secrets.token_hex(6).upper(), "made": time.time(),
                 "amount": {"value": value, "currency_code": cur}, "custom_id": req.get("custom_id"),
                 "pending_s": self.pending_s}
            self.refunds[r["id"]] = self.by_key[key] = r
            self.executions[key] = self.executions.get(key, 0) + 1
            return 201, self.view(r)

    @staticmethod
    def view(r):
        pending = r["pending_s"] is not None and time.time() < r["made"] + r["pending_s"]
        out = {k: r[k] for k in ("id", "amount", "custom_id")}
        out["status"] = "PENDING" if pending else "COMPLETED"
        if pending:
            out["status_details"] = {"reason": "ECHECK"}
        return out

    def posts(self):
        return [a for a in self.arrivals if a["method"] == "POST" and a["path"].startswith("/v2/")]

    def token_calls(self):
        return [a for a in self.arrivals if a["path"] == "/v1/oauth2/token"]


class PayPalProfileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tollgate-paypal-")
        self.files = {}
        for name, text in (("id", CLIENT_ID), ("secret", CLIENT_SECRET)):
            path = os.path.join(self.dir, name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(text + "\n")
            self.files[name] = path

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def tollgate(self, pp, **sections):
        provider = {"client_id_file": self.files["id"], "auth_secret_file": self.files["secret"]}
        provider.update(sections.pop("provider", {}))
        tg = Tollgate(pp.url, tls="", profile=PROFILE, provider=provider, **sections)
        # PayPal signs no request: the harness's signing key is left out
        with open(tg.config) as f:
            text = "".join(l for l in f if not l.startswith("signing_key_file"))
        with open(tg.config, "w") as f:
            f.write(text)
        return tg

    def submit(self, tg, op, capture="CAP1", amount=1037, currency="USD"):
        return tgtest.http_json("POST", tg.api + "/v1/refunds",
                                {"operation_id": op, "payment_id": capture, "amount": amount,
                                 "currency": currency}, tg.headers())

    def test_refunds_settled_with_decimal_amounts_and_tokens_refreshed_and_paced(self):
        # Tokens live 6 s and a call 1 s at most: one is used for calls
        # started in its first 5 s, and a new one is fetched from 3 s into
        # its life (half of it: the margin is at most that) while refunds
        # go on (never a 401), every token call passes the exit's pacer like
        # the refunds' calls (spaced at the door), and the amounts reach
        # PayPal as decimal strings in their currency's places.
        pp = PayPalStandIn(ttl=6)
        try:
            with self.tollgate(pp, exit={"starts_per_second": 4},
                               provider={"timeout_ms": 1000}) as tg:
                tg.start("serve")
                cases = [("pp-usd", 1037, "USD", "10.37"), ("pp-jpy", 1037, "JPY", "1037"),
                         ("pp-kwd", 1037, "KWD", "1.037")]
                for op, amount, cur, _ in cases:
                    self.assertEqual(self.submit(tg, op, amount=amount, currency=cur)[0], 202)
                status, _, body = self.submit(tg, "pp-xxx", currency="XXX")
                self.assertEqual((status, body["error"]["field"]), (422, "currency"), body)
                ops = [c[0] for c in cases]
                for i in range(16):  # calls go on across two token lives
                    time.sleep(0.5)
                    ops.append("pp-more-%d" % i)
                    self.assertEqual(self.submit(tg, ops[-1], amount=100 + i)[0], 202)
                final = tg.wait_final(ops, timeout=20)
                self.assertEqual({r["state"] for r in final.values()}, {"succeeded"}, final)
                got = {json.loads(a["body"])["custom_id"]: json.loads(a["body"])["amount"]
                       for a in pp.posts()}
                for op, _, cur, value in cases:
                    self.assertEqual(got[op], {"value": value, "currency_code": cur})
                self.assertEqual(got["pp-more-3"], {"value": "1.03", "currency_code": "USD"})
                self.assertNotIn("pp-xxx", got)
                self.assertGreaterEqual(len(pp.token_calls()), 3, pp.token_calls())
                # each new token while the one in hand was still usable (5 s):
                # fetched from 3 s into its life, at the next call after that
                got_at = [a["t"] for a in pp.token_calls()]
                lives = [b - a for a, b in zip(got_at, got_at[1:])]
                self.assertLess(max(lives), 4.5, lives)
                self.assertTrue(all(a["auth"] == "Bearer" for a in pp.posts()))
                self.assertEqual([c for c in tg.calls() if c.get("http_status") == 401], [])
                # the door: token calls and refund calls at least 1/rate apart
                starts = sorted(a["t"] for a in pp.arrivals)
                gaps = [b - a for a, b in zip(starts, starts[1:])]
                self.assertGreater(min(gaps), 0.25 - 0.05, gaps)
        finally:
            pp.close()

    def test_a_revoked_token_is_fetched_again_once_and_the_refund_goes_again(self):
        pp = PayPalStandIn(ttl=3600)
        try:
            with self.tollgate(pp, retry={"backoff_base_ms": 200}) as tg:
                p = tg.start("serve")
                self.assertEqual(self.submit(tg, "pp-first")[0], 202)
                tg.wait_final(["pp-first"], timeout=15)
                self.assertEqual(len(pp.token_calls()), 1)
                pp.revoke()  # PayPal no longer takes the token tollgate holds
                self.assertEqual(self.submit(tg, "pp-401")[0], 202)
                final = tg.wait_final(["pp-401"], timeout=15)["pp-401"]
                self.assertEqual(final["state"], "succeeded", final)
                self.assertEqual(len(pp.token_calls()), 2, pp.token_calls())  # once
                posts = [c for c in tg.calls() if c["operation_id"] == "pp-401"]
                self.assertEqual([c["class"] for c in posts], ["retryable", "succeeded"], posts)
                self.assertEqual(pp.executions["pp-401"], 1)
                self.assertTrue(log_events(p, "provider_token_refused"))
        finally:
            pp.close()

    def test_an_answer_lost_past_the_timeout_is_settled_by_replay(self):
        # The refund executes, its answer comes after the 1 s timeout: no
        # refund id, no lookup by key: the same PayPal-Request-Id again,
        # which returns the refund the first made. One refund.
        pp = PayPalStandIn()
        pp.post_delay = 1.6
        try:
            with self.tollgate(pp, provider={"timeout_ms": 1000},
                               retry={"query_interval_ms": 500}) as tg:
                tg.start("serve")
                self.assertEqual(self.submit(tg, "pp-lost")[0], 202)
                tgtest.wait_until(lambda: pp.posts(), timeout=10, what="the first POST")
                time.sleep(0.3)
                pp.post_delay = 0
                final = tg.wait_final(["pp-lost"], timeout=20)["pp-lost"]
                self.assertEqual(final["state"], "succeeded", final)
                self.assertTrue(final["refund_id"].startswith("R"), final)
                posts = [a for a in pp.posts()]
                self.assertGreaterEqual(len(posts), 2, posts)
                self.assertEqual({a["key"] for a in posts}, {"pp-lost"})
                self.assertEqual(pp.executions["pp-lost"], 1)
                calls = [c["kind"] for c in tg.calls()]
                self.assertNotIn("query", calls)  # nothing to ask by
        finally:
            pp.close()

    def test_a_pending_refund_is_polled_by_its_id_and_a_refusal_is_final(self):
        pp = PayPalStandIn()
        pp.pending_s = 2.0
        try:
            with self.tollgate(pp, retry={"query_interval_ms": 500}) as tg:
                tg.start("serve")
                self.assertEqual(self.submit(tg, "pp-pend")[0], 202)
                final = tg.wait_final(["pp-pend"], timeout=20)["pp-pend"]
                self.assertEqual(final["state"], "succeeded", final)
                calls = [c for c in tg.calls() if c["operation_id"] == "pp-pend"]
                self.assertEqual(calls[0]["class"], "unknown", calls)  # PENDING: not final
                queries = [c for c in calls if c["kind"] == "query"]
                self.assertGreaterEqual(len(queries), 2, calls)
                self.assertEqual(queries[-1]["class"], "succeeded")
                gets = {a["path"] for a in pp.arrivals if a["method"] == "GET"}
                self.assertEqual(gets, {"/v2/payments/refunds/" + final["refund_id"]})
                self.assertEqual(len(pp.posts()), 1)  # never replayed: it had an id
                pp.refuse = "REFUND_AMOUNT_EXCEEDED"
                self.assertEqual(self.submit(tg, "pp-refused")[0], 202)
                final = tg.wait_final(["pp-refused"], timeout=15)["pp-refused"]
                self.assertEqual(final["state"], "rejected", final)
        finally:
            pp.close()

    def test_config_check_on_the_profile_says_nothing(self):
        with open(os.path.join(tgprovider.source_dir(), "docs", "providers", "paypal.ini")) as f:
            text = f.read()
        ini = os.path.join(self.dir, "t.ini")
        with open(ini, "w") as f:
            f.write(text.replace("/etc/tollgate/paypal-client-id", self.files["id"])
                    .replace("/etc/tollgate/paypal-client-secret", self.files["secret"]))
        p = subprocess.run([tgtest.binary("tollgate"), "config", "check", "--config", ini],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual((p.returncode, p.stderr), (0, ""), p.stdout + p.stderr)


if __name__ == "__main__":
    tgtest.main_unittest()
