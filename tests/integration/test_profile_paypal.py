"""The PayPal profile (docs/providers/paypal.ini) and the two mapping
features it needs, OAuth 2.0 client-credentials tokens (provider.auth =
oauth2) and decimal-string amounts ({amount_decimal}) (issue 25), against
the stub's paypal shape (tollgate-stub --shape paypal): POST
/v2/payments/captures/{id}/refund with the amount a decimal string checked
against the currency's places, a PayPal-Request-Id whose repeat returns the
refund it made, GET /v2/payments/refunds/{id} as the only lookup, PENDING
refunds (mode processing) that become COMPLETED later, a token endpoint
(HTTP Basic, form grant_type=client_credentials) whose tokens live
--token-ttl-s seconds, and a 401 AUTHENTICATION_FAILURE for a token it did
not give or that lapsed. Its arrival record (--record-bodies) has every
call's time, path, key, bearer verdict and body.

Behaviour only, with margins: labelled parallel.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgprovider  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import log_events  # noqa: E402

PROFILE = "paypal"
CLIENT_ID, CLIENT_SECRET = "pp-client", "pp-secret-" + tgprovider.SECRET_MARK


class PayPal:
    """The stub in the paypal shape and what the tests read of it."""

    def __init__(self, *flags, ttl=3600):
        self.stub = tgtest.start_stub("--token-ttl-s", str(ttl), "--record-bodies", *flags,
                                      tls="", profile=PROFILE)
        self.url = self.stub.url

    def close(self):
        self.stub.close()

    def arrivals(self):
        return [dict(a, t=a["t_ns"] / 1e9) for a in self.stub.arrivals()]

    def posts(self):
        return [a for a in self.arrivals()
                if a["method"] == "POST" and a["path"].startswith("/v2/")]

    def token_calls(self):
        return [a for a in self.arrivals() if a["path"] == "/v1/oauth2/token"]

    def executions(self, key):
        return self.stub.executions(key)

    def refund_ids(self, key):
        return self.stub.ledger()["operations"][key]["refund_ids"]

    def revoke(self):
        self.stub.admin("POST", "revoke-tokens")

    def mode(self, **fields):
        self.stub.set_mode(**fields)


class PayPalProfileTest(tgprovider.ProfileCase, unittest.TestCase):
    PROFILE = PROFILE

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
        # the harness gives tollgate the client id and secret the stub
        # demands (tgprovider: PayPal signs no request, so no signing key)
        return super().tollgate(pp.stub, **sections)

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
        pp = PayPal(ttl=6)
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
                # every refund call carried a bearer the token endpoint gave
                # and still alive at its arrival
                self.assertTrue(all(a["auth"] == "ok" for a in pp.posts()), pp.posts())
                self.assertEqual([c for c in tg.calls() if c.get("http_status") == 401], [])
                # the door: token calls and refund calls at least 1/rate apart
                starts = sorted(a["t"] for a in pp.arrivals())
                gaps = [b - a for a, b in zip(starts, starts[1:])]
                self.assertGreater(min(gaps), 0.25 - 0.05, gaps)
                self.verified_with_token_calls(tg, pp)
        finally:
            pp.close()

    def verified_with_token_calls(self, tg, pp):
        """`tollgate verify` on the run's records: the token calls (no call
        log row) are the exit's, told by the token path (--config's, or
        --token-path) and the exit's token request id, and judged at the
        door; without the token path they are arrivals no call log row
        matches, never silently dropped."""
        status, _, raw = tgtest.http_request("GET", pp.url + "/_stub/arrivals?since=0")
        self.assertEqual(status, 200)
        files = {"calls": os.path.join(self.dir, "calls.jsonl"),
                 "arrivals": os.path.join(self.dir, "arrivals.jsonl")}
        with open(files["calls"], "w") as f:
            f.write("".join(json.dumps(c) + "\n" for c in tg.calls(released=True)))
        with open(files["arrivals"], "wb") as f:
            f.write(raw)
        tokens = len(pp.token_calls())

        def verify(*flags):
            p = subprocess.run([tgtest.binary("tollgate"), "verify", "--arrivals",
                                files["arrivals"], "--json"] + list(flags),
                               capture_output=True, text=True, timeout=60)
            self.assertIn(p.returncode, (0, 1), p.stderr)
            return p.returncode, json.loads(p.stdout)

        for flags in (["--config", tg.config],
                      ["--calls", files["calls"], "--rate", "4",
                       "--token-path", "/v1/oauth2/token"]):
            rc, r = verify(*flags)
            self.assertEqual(rc, 0, (flags, [f["problem"] for f in r["findings"]]))
            self.assertEqual(r["summary"]["token_calls"], tokens, flags)
            self.assertEqual(r["summary"]["unmatched"], 0, flags)
        rc, r = verify("--calls", files["calls"], "--rate", "4")
        self.assertEqual(rc, 1)
        self.assertEqual((r["summary"]["token_calls"], r["summary"]["unmatched"]), (0, tokens))
        rc, r = verify("--calls", files["calls"], "--rate", "4", "--token-path", "/v2/oauth2")
        self.assertEqual(r["summary"]["unmatched"], tokens)

    def test_a_token_is_renewed_before_it_lapses_and_its_calls_pass_the_exit(self):
        # Tokens live 3 s (usable for calls started in their first 2 s, the
        # call's timeout being 1 s). Across a pause longer than a token's
        # life tollgate holds a usable one: each new token is fetched
        # before the one in hand lapses, a lapsed one is never sent (no
        # 401, no arrival the stub found expired), and every token call
        # takes its start slot at the exit like the refunds' calls (2/s:
        # every two arrivals at least 0.5 s apart at the door).
        pp = PayPal(ttl=3)
        try:
            with self.tollgate(pp, exit={"starts_per_second": 2},
                               provider={"timeout_ms": 1000}) as tg:
                tg.start("serve")
                self.assertEqual(self.submit(tg, "pp-t1")[0], 202)
                tg.wait_final(["pp-t1"], timeout=15)
                time.sleep(3.5)  # longer than the first token's life
                self.assertEqual(self.submit(tg, "pp-t2")[0], 202)
                final = tg.wait_final(["pp-t2"], timeout=15)["pp-t2"]
                self.assertEqual(final["state"], "succeeded", final)
                tokens = pp.token_calls()
                self.assertGreaterEqual(len(tokens), 2, tokens)
                lives = [b["t"] - a["t"] for a, b in zip(tokens, tokens[1:])]
                self.assertLess(max(lives), 3 - 0.1, lives)  # before the lapse
                t2 = [a for a in pp.posts() if a["idempotency_key"] == "pp-t2"]
                self.assertEqual(len(t2), 1, t2)
                self.assertGreater(t2[0]["t"], tokens[0]["t"] + 3, t2)  # the first had lapsed
                self.assertEqual([a for a in pp.arrivals() if a.get("auth") != "ok"], [])
                self.assertEqual([c for c in tg.calls() if c.get("http_status") == 401], [])
                posts = [c for c in tg.calls() if c["operation_id"] == "pp-t2"]
                self.assertEqual([c["class"] for c in posts], ["succeeded"], posts)
                starts = sorted(a["t"] for a in pp.arrivals())
                gaps = [b - a for a, b in zip(starts, starts[1:])]
                self.assertGreater(min(gaps), 0.5 - 0.05, gaps)
                self.assertEqual(pp.executions("pp-t2"), 1)
        finally:
            pp.close()

    def test_a_revoked_token_is_fetched_again_once_and_the_refund_goes_again(self):
        pp = PayPal(ttl=3600)
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
                self.assertEqual(pp.executions("pp-401"), 1)
                refused = [a for a in pp.posts() if a["idempotency_key"] == "pp-401"][0]
                self.assertEqual((refused["auth"], refused["answer"]), ("wrong", 401), refused)
                self.assertTrue(log_events(p, "provider_token_refused"))
        finally:
            pp.close()

    def test_an_answer_lost_past_the_timeout_is_settled_by_replay(self):
        # The refund executes 1.2 s after it arrives, its answer after the
        # 1 s timeout: no refund id, no lookup by key: the same
        # PayPal-Request-Id again (from 1.5 s on), which returns the refund
        # the first made. One refund in the stub's ledger.
        pp = PayPal("--mode", "slow:1200")
        try:
            with self.tollgate(pp, provider={"timeout_ms": 1000},
                               retry={"query_interval_ms": 500}) as tg:
                tg.start("serve")
                self.assertEqual(self.submit(tg, "pp-lost")[0], 202)
                tgtest.wait_until(lambda: pp.posts(), timeout=10, what="the first POST")
                pp.mode(mode="fast")
                final = tg.wait_final(["pp-lost"], timeout=20)["pp-lost"]
                self.assertEqual(final["state"], "succeeded", final)
                posts = [a for a in pp.posts()]
                self.assertGreaterEqual(len(posts), 2, posts)
                self.assertEqual({a["idempotency_key"] for a in posts}, {"pp-lost"})
                self.assertEqual(pp.executions("pp-lost"), 1)
                # the refund the first POST made, told by the replay (200)
                self.assertEqual(pp.refund_ids("pp-lost"), [final["refund_id"]])
                self.assertEqual(posts[-1]["answer"], 200, posts)
                self.assertEqual(len(final["refund_id"]), 17, final)
                calls = [c["kind"] for c in tg.calls()]
                self.assertNotIn("query", calls)  # nothing to ask by
                self.assertEqual([a for a in pp.arrivals() if a["method"] == "GET"], [])
        finally:
            pp.close()

    def test_a_pending_refund_is_polled_by_its_id_and_a_refusal_is_final(self):
        pp = PayPal("--mode", "processing:2000")
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
                self.assertEqual(queries[0]["class"], "processing", queries)  # still PENDING
                gets = {a["path"] for a in pp.arrivals() if a["method"] == "GET"}
                self.assertEqual(gets, {"/v2/payments/refunds/" + final["refund_id"]})
                self.assertEqual(len(pp.posts()), 1)  # never replayed: it had an id
                self.assertEqual(pp.refund_ids("pp-pend"), [final["refund_id"]])
                self.assertEqual(pp.executions("pp-pend"), 1)
                pp.mode(mode="reject")  # 422 UNPROCESSABLE_ENTITY REFUND_AMOUNT_EXCEEDED
                self.assertEqual(self.submit(tg, "pp-refused")[0], 202)
                final = tg.wait_final(["pp-refused"], timeout=15)["pp-refused"]
                self.assertEqual(final["state"], "rejected", final)
                self.assertEqual(pp.executions("pp-refused"), 0)
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
