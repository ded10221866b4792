"""The Stripe profile (docs/providers/stripe.ini) against the stub's stripe
shape (issue 25): the outcomes that depend on Stripe's contract.

Stripe has no lookup of a refund by idempotency key, so a POST whose answer
was lost is settled by listing its PaymentIntent's refunds and finding ours
by the operation id in its metadata, page after page (starting_after the
last id of the page before, asked at once, provider.list_max_pages pages a
walk at most); a refund not in a complete list, walked from its first page,
was never executed and is sent again with its same key; a page that does
not hold ours proves nothing (no re-send), nor does a walk cut at
list_max_pages; a refund answered pending is asked about by its id until it
is final; with `replay`, an outcome the queries could not tell is replayed
with its key within the key's life, and past it goes to manual review as
key_expired. Stripe's signed webhook (Stripe-Signature: t=..,v1=.., a 300 s
tolerance) settles a refund whose queries were refused, and forged, stale
and malformed deliveries change nothing. And `tollgate config check` on the
profile itself says nothing.

Behaviour only (the one time bound, a list's next page asked well inside
the query interval, has a margin of seconds): labelled parallel.
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
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgprovider  # noqa: E402
import tgtest  # noqa: E402

PROFILE = "stripe"
X_SIGNATURE_ONLY = object()  # a delivery signed the tollgate way, not Stripe's


posts_and_queries = tgprovider.posts_and_queries


def contract_arrivals(stub):
    return [a for a in stub.arrivals() if a["path"].startswith("/v1/")]


def forgotten_post(stub, tg, op, payment):
    """op's POST (the stub slow past tollgate's timeout) executes with its
    answer lost, then the stub forgets everything, as if it never executed,
    and answers at once from then on."""
    tg.start("serve")
    assert tg.submit(op, payment=payment)[0] == 202
    tgtest.wait_until(lambda: stub.ledger()["total_executions"] == 1, timeout=15,
                      what="the slow POST executed")
    stub.admin("POST", "reset")
    stub.admin("POST", "mode", {"mode": "fast"})


class StripeProfileTest(tgprovider.ProfileCase, unittest.TestCase):
    PROFILE = PROFILE

    def test_slow_past_the_timeout_is_settled_by_list_and_match(self):
        # 2.5 s at the provider > the 1.5 s timeout: the POST executes, its
        # answer is lost (no refund id), and the only way back is the list
        # of the payment's refunds, ours matched by metadata[operation_id].
        with self.start("--mode", "slow:2500", "--query-mode", "fast") as stub, \
                self.tollgate(stub, provider={"timeout_ms": 1500},
                              retry={"query_interval_ms": 3000}) as tg:
            tg.start("serve")
            ops = ["st-slow-%d" % i for i in range(3)]
            for i, op in enumerate(ops):
                # one payment for two of them: the list holds both
                self.assertEqual(tg.submit(op, payment="pi_%d" % min(i, 1))[0], 202)
            final = tg.wait_final(ops, timeout=40)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()), final)
            self.assertTrue(all(r["refund_id"].startswith("re_") for r in final.values()))
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual(len(posts), len(ops))  # never re-sent
            self.assertTrue(all(c["class"] == "unknown" for c in posts), posts)
            self.assertTrue(queries and all(c["class"] in ("succeeded", "no_answer")
                                            for c in queries), queries)
            arrivals = contract_arrivals(stub)
            # every call pins the API version (provider.header)
            self.assertEqual({a["api_version"] for a in arrivals}, {"2024-06-20"})
            gets = [a for a in arrivals if a["method"] == "GET"]
            self.assertTrue(gets)
            for a in gets:
                # the list, never a lookup by key (Stripe has none)
                self.assertTrue(a["path"].startswith("/v1/refunds"), a)
                self.assertNotIn("by-key", a["path"])
                self.assertNotEqual(a["answer"], 404, a)
            ledger = stub.ledger()["operations"]
            self.assertEqual({op: ledger[op]["executions"] for op in ops}, dict.fromkeys(ops, 1))

    def test_not_in_a_complete_list_is_sent_again_with_its_key(self):
        # The POST's answer is lost and the provider then has no record of
        # it (the stub forgets everything: as if it never executed). The
        # list is complete (has_more false) and ours is not in it: nothing
        # was executed, so the same key goes out again and executes once.
        with self.start("--mode", "slow:2500", "--query-mode", "fast") as stub, \
                self.tollgate(stub, provider={"timeout_ms": 1500},
                              retry={"query_interval_ms": 4000}) as tg:
            forgotten_post(stub, tg, "st-gone", "pi_gone")
            final = tg.wait_final(["st-gone"], timeout=40)["st-gone"]
            self.assertEqual(final["state"], "succeeded", final)
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual([c["class"] for c in posts], ["unknown", "succeeded"], posts)
            self.assertEqual([c["class"] for c in queries], ["not_found"], queries)
            keys = [a["idempotency_key"] for a in contract_arrivals(stub)
                    if a["method"] == "POST"]
            self.assertEqual(keys, ["st-gone"])  # after the reset: the one re-send
            self.assertEqual(stub.ledger()["operations"]["st-gone"]["executions"], 1)

    def test_a_page_without_ours_is_no_answer_never_a_resend(self):
        # 51 refunds of one payment, ours the oldest: the first page (50,
        # newest first) says has_more and does not hold ours. That proves
        # nothing: no re-send, the operation waits for a complete answer
        # (here, none comes: manual by the query budget, never guessed). The
        # 4 s between its queries let the 50 newer ones execute first.
        # The first page only (no list_cursor_param): the page after it is
        # never asked for (test_ours_on_a_later_page_... walks them).
        with self.start("--mode", "fast", "--query-mode", "fast") as stub, \
                self.tollgate(stub, exit={"starts_per_second": 50},
                              # the list alone (no replay after the queries)
                              provider={"reconcile": "refund_id, list",
                                        "list_cursor_param": ""},
                              retry={"max_queries": 2, "query_interval_ms": 4000}) as tg:
            tg.start("serve")
            # ours first, its answer lost (e500: executed, then a 500)
            stub.admin("POST", "mode", {"mode": "e500"})
            self.assertEqual(tg.submit("st-old", payment="pi_many")[0], 202)
            tgtest.wait_until(lambda: any(c["kind"] != "query" for c in tg.calls()),
                              timeout=10, what="the first POST")
            stub.admin("POST", "mode", {"mode": "fast"})
            others = ["st-new-%02d" % i for i in range(50)]
            for op in others:
                self.assertEqual(tg.submit(op, payment="pi_many")[0], 202)
            final = tg.wait_final(["st-old"] + others, timeout=60)
            self.assertTrue(all(final[op]["state"] == "succeeded" for op in others))
            self.assertEqual(final["st-old"]["state"], "manual", final["st-old"])
            self.assertEqual(final["st-old"].get("manual_reason", final["st-old"].get("reason")),
                             "query_budget", final["st-old"])
            old = [c for c in tg.calls() if c["operation_id"] == "st-old"]
            posts, queries = posts_and_queries(old)
            self.assertEqual(len(posts), 1)  # never re-sent on a page's word
            self.assertTrue(queries)
            self.assertTrue(all(c["class"] == "no_answer" for c in queries[1:]), queries)
            self.assertEqual(stub.ledger()["operations"]["st-old"]["executions"], 1)

    # Pages of 3 (Stripe allows 1-100) so that a few refunds make a long
    # list; the list alone, no replay after the queries.
    PAGED = {"list_path": "/v1/refunds?payment_intent={payment_id}&limit=3",
             "reconcile": "refund_id, list"}

    def list_gets(self, stub, op):
        """The list GETs asked for op, oldest first (the key header names it)."""
        return [a for a in contract_arrivals(stub)
                if a["method"] == "GET" and a["idempotency_key"] == op]

    def cursors(self, gets):
        """Each list GET's starting_after (None: the first page)."""
        self.assertTrue(all(a["path"] == "/v1/refunds" for a in gets), gets)
        return [a.get("starting_after") for a in gets]

    def submit_newer(self, tg, payment, n, prefix):
        """n refunds of payment after ours, executed at once; their ids,
        newest first (the list's order)."""
        others = ["%s-%d" % (prefix, i) for i in range(n)]
        for op in others:
            self.assertEqual(tg.submit(op, payment=payment)[0], 202)
        final = tg.wait_final(others, timeout=30)
        self.assertTrue(all(final[op]["state"] == "succeeded" for op in others), final)
        return [final[op]["refund_id"] for op in reversed(others)]

    def lost_under_newer(self, stub, tg, op, payment):
        """op's POST executed with its answer lost (e500: executed, then a
        500), then 7 newer refunds of its payment: with pages of 3, newest
        first, op is on page 3. The newer ids (newest first), and op's
        final record."""
        tg.start("serve")
        stub.admin("POST", "mode", {"mode": "e500"})
        self.assertEqual(tg.submit(op, payment=payment)[0], 202)
        tgtest.wait_until(lambda: any(c["kind"] != "query" for c in tg.calls()),
                          timeout=10, what="the first POST")
        stub.admin("POST", "mode", {"mode": "fast"})
        newer = self.submit_newer(tg, payment, 7, op + "-new")
        return newer, tg.wait_final([op], timeout=40)[op]

    def test_ours_on_a_later_page_is_found_without_a_resend(self):
        # Ours first, its answer lost (e500: executed, then a 500), then 7
        # newer refunds of the same PaymentIntent: pages of 3, newest first,
        # put ours on page 3. The first query reads page 1 (has_more), the
        # next ones page 2 and 3 with starting_after the last id of the page
        # before, at once rather than after the 6 s query interval; ours is
        # found there and settled, never sent again.
        with self.start("--mode", "fast", "--query-mode", "fast") as stub, \
                self.tollgate(stub, exit={"starts_per_second": 50}, provider=self.PAGED,
                              retry={"query_interval_ms": 6000}) as tg:
            newer, final = self.lost_under_newer(stub, tg, "st-page", "pi_pages")
            self.assertEqual(final["state"], "succeeded", final)
            self.assertTrue(final["refund_id"].startswith("re_"), final)
            posts, queries = posts_and_queries(
                [c for c in tg.calls() if c["operation_id"] == "st-page"])
            self.assertEqual([c["class"] for c in posts], ["unknown"], posts)  # never re-sent
            self.assertEqual([c["class"] for c in queries],
                             ["no_answer", "no_answer", "succeeded"], queries)
            gets = self.list_gets(stub, "st-page")
            self.assertEqual(self.cursors(gets), [None, newer[2], newer[5]], gets)
            # the next page at once: well inside the 6 s interval
            for before, after in zip(gets, gets[1:]):
                self.assertLess(after["wall_ms"] - before["wall_ms"], 3000, gets)
            self.assertEqual(stub.ledger()["operations"]["st-page"]["executions"], 1)

    def test_not_in_any_page_is_sent_again_with_its_key_once(self):
        # Ours times out and the provider then has no record of it (the
        # stub forgets everything, as if it never executed); 7 newer
        # refunds of the PaymentIntent make 3 pages. Not on page 1 or 2
        # (has_more) proves nothing; not on page 3 either, which says the
        # list is complete, and the walk came from page 1: nothing was
        # executed, and the same key goes out again, once.
        with self.start("--mode", "slow:2500", "--query-mode", "fast") as stub, \
                self.tollgate(stub, exit={"starts_per_second": 50},
                              provider=dict(self.PAGED, timeout_ms=1500),
                              retry={"query_interval_ms": 6000}) as tg:
            forgotten_post(stub, tg, "st-none", "pi_none")
            newer = self.submit_newer(tg, "pi_none", 7, "st-nnew")
            final = tg.wait_final(["st-none"], timeout=40)["st-none"]
            self.assertEqual(final["state"], "succeeded", final)
            posts, queries = posts_and_queries(
                [c for c in tg.calls() if c["operation_id"] == "st-none"])
            self.assertEqual([c["class"] for c in posts], ["unknown", "succeeded"], posts)
            self.assertEqual([c["class"] for c in queries],
                             ["no_answer", "no_answer", "not_found"], queries)
            self.assertEqual(self.cursors(self.list_gets(stub, "st-none")),
                             [None, newer[2], newer[5]])
            keys = [a["idempotency_key"] for a in contract_arrivals(stub)
                    if a["method"] == "POST" and a["idempotency_key"] == "st-none"]
            self.assertEqual(keys, ["st-none"])  # after the reset: the one re-send
            self.assertEqual(stub.ledger()["operations"]["st-none"]["executions"], 1)

    def test_a_walk_past_list_max_pages_concludes_nothing(self):
        # Ours is on page 3 but a walk reads 2 pages at most: each walk ends
        # unconcluded (no_answer, never not_found), the next one starts at
        # page 1 again after the query interval, and once the queries are
        # spent the operation goes to manual review. Never sent again.
        with self.start("--mode", "fast", "--query-mode", "fast") as stub, \
                self.tollgate(stub, exit={"starts_per_second": 50},
                              provider=dict(self.PAGED, list_max_pages=2),
                              retry={"max_queries": 4, "query_interval_ms": 3000}) as tg:
            newer, final = self.lost_under_newer(stub, tg, "st-far", "pi_far")
            self.assertEqual(final["state"], "manual", final)
            self.assertEqual(final.get("manual_reason", final.get("reason")), "query_budget",
                             final)
            posts, queries = posts_and_queries(
                [c for c in tg.calls() if c["operation_id"] == "st-far"])
            self.assertEqual(len(posts), 1, posts)
            self.assertEqual([c["class"] for c in queries], ["no_answer"] * 4, queries)
            self.assertEqual(self.cursors(self.list_gets(stub, "st-far")),
                             [None, newer[2], None, newer[2]])
            self.assertEqual(stub.ledger()["operations"]["st-far"]["executions"], 1)

    def test_a_pending_refund_is_polled_by_its_id_until_final(self):
        # The POST answers 200 status pending with the refund's id: executed,
        # not final. It is asked about by that id (GET /v1/refunds/re_..)
        # until it says succeeded.
        with self.start("--mode", "processing:2500", "--query-mode", "fast") as stub, \
                self.tollgate(stub, retry={"query_interval_ms": 1000}) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("st-pend", payment="pi_pend")[0], 202)
            final = tg.wait_final(["st-pend"], timeout=30)["st-pend"]
            self.assertEqual(final["state"], "succeeded", final)
            posts, queries = posts_and_queries(tg.calls())
            self.assertEqual(len(posts), 1)
            self.assertGreaterEqual(len(queries), 1)
            self.assertEqual(queries[-1]["class"], "succeeded")
            gets = [a["path"] for a in contract_arrivals(stub) if a["method"] == "GET"]
            self.assertTrue(gets and all(p == "/v1/refunds/" + final["refund_id"] for p in gets),
                            gets)

    def replay_run(self, key_retention_s):
        """The POST executes but its answer is lost past the timeout, and the
        one query allowed gets no answer (a 500): the queries are spent.
        With `replay` in provider.reconcile the same POST goes again with
        its key, if the key is young enough."""
        with self.start("--mode", "slow:2500", "--query-mode", "e500") as stub, \
                self.tollgate(stub, provider={"timeout_ms": 1500,
                                              "reconcile": "refund_id, list, replay"},
                              retry={"max_queries": 1, "query_interval_ms": 3000,
                                     "key_retention_s": key_retention_s}) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("st-replay", payment="pi_r")[0], 202)
            tgtest.wait_until(lambda: stub.ledger()["total_executions"] == 1, timeout=15,
                              what="the slow POST executed")
            stub.admin("POST", "mode", {"mode": "fast"})  # the replay is answered
            final = tg.wait_final(["st-replay"], timeout=40)["st-replay"]
            posts, queries = posts_and_queries(tg.calls())
            keys = [a["idempotency_key"] for a in contract_arrivals(stub)
                    if a["method"] == "POST"]
            return final, posts, queries, keys, stub.ledger()["operations"]["st-replay"]

    def test_replay_within_the_key_life_returns_the_stored_refund(self):
        final, posts, queries, keys, ledger = self.replay_run(3600)
        self.assertEqual(final["state"], "succeeded", final)
        self.assertEqual([c["class"] for c in queries], ["no_answer"], queries)
        self.assertEqual([c["class"] for c in posts], ["unknown", "succeeded"], posts)
        self.assertEqual(keys, ["st-replay", "st-replay"])  # the same key
        self.assertEqual(ledger["executions"], 1)  # Stripe's replay: the stored answer

    def test_replay_refused_past_the_key_life_is_key_expired(self):
        # 2 s of key life, and the queries are spent ~4.5 s after the first
        # POST: a replay could execute a second refund. Manual, key_expired.
        final, posts, queries, keys, ledger = self.replay_run(2)
        self.assertEqual(final["state"], "manual", final)
        self.assertEqual(final.get("manual_reason", final.get("reason")), "key_expired", final)
        self.assertEqual(len(posts), 1)
        self.assertEqual(keys, ["st-replay"])
        self.assertEqual(ledger["executions"], 1)

    def test_webhook_signed_as_stripe_settles_and_refuses_forgeries(self):
        secret = "whsec_test_0123456789abcdef"

        def event(op, status, evt="evt_1", refund="re_wh1"):
            obj = {"id": refund, "object": "refund", "status": status,
                   "metadata": {"operation_id": op} if op else {}}
            return json.dumps({"id": evt, "object": "event", "type": "refund.updated",
                               "data": {"object": obj}}).encode()

        def sig(body, t=None, key=secret):
            t = int(time.time()) if t is None else t
            mac = hmac.new(key.encode(), b"%d." % t + body, hashlib.sha256).hexdigest()
            return "t=%d,v1=%s" % (t, mac)

        with self.start("--mode", "drop", "--query-mode", "unavailable",
                        "--retry-after", "none") as stub:
            secret_file = os.path.join(stub.dir, "whsec")
            with open(os.open(secret_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(secret + "\n")
            with self.tollgate(stub, provider={"webhook_secret_file": secret_file},
                               exit={"starts_per_second": 50},
                               retry={"query_interval_ms": 200}) as tg:
                tg.start("api")
                exit_ = tg.start("dispatch", wait_api=False)
                ops = ["swh-a", "swh-b"]
                for op in ops:
                    self.assertEqual(tg.submit(op)[0], 202)
                tg.wait_final(ops, timeout=30, states=("unknown", "retry_wait"))
                # queries refused: only the webhook can tell; the exit stops so
                # that none is in flight while it speaks
                tgtest.wait_until(lambda: sum(1 for a in stub.arrivals()
                                              if a["method"] == "GET") >= 2,
                                  timeout=15, what="the queries refused")
                exit_.send_signal(signal.SIGTERM)
                self.assertEqual(exit_.popen.wait(15), 0)

                def post(body, header):
                    h = {"Content-Type": "application/json"}
                    if header is not None:
                        h["Stripe-Signature"] = header
                    return tgtest.http_json("POST", tg.api + "/v1/provider-events", body, h)

                good = event("swh-a", "succeeded")
                now = int(time.time())
                forged = [None, "", sig(good, key="whsec_other"), sig(good + b" "),
                          sig(good, t=now - 400), sig(good, t=now + 400),
                          "t=%d,v0=%s" % (now, "0" * 64), "v1=" + "0" * 64,
                          "t=abc,v1=" + "0" * 64, sig(good)[:-2], sig(good) + ",v1",
                          X_SIGNATURE_ONLY]
                for header in forged:
                    if header is X_SIGNATURE_ONLY:
                        mac = hmac.new(secret.encode(), good, hashlib.sha256).hexdigest()
                        st, _, body = tgtest.http_json(
                            "POST", tg.api + "/v1/provider-events", good,
                            {"X-Signature": "sha256=" + mac})
                    else:
                        st, _, body = post(good, header)
                    self.assertEqual((st, body["error"]["code"]), (401, "bad_signature"),
                                     (header, body))
                self.assertIn(tg.status("swh-a")[2]["state"], ("unknown", "retry_wait"))
                # a secret being rolled: two v1, one of them right
                wrong = sig(good, key="whsec_old").split(",v1=")[1]
                header = sig(good) + ",v1=" + wrong
                for _ in range(2):  # the same event id again changes nothing
                    st, _, body = post(good, header)
                    self.assertEqual((st, body["state"]), (200, "succeeded"), body)
                rec = tg.status("swh-a")[2]
                self.assertEqual(rec["refund_id"], "re_wh1")
                self.assertEqual(sum(a["action"] == "external" for a in rec["audit"]), 1)
                # not final, not ours: 200, nothing changes
                for body, why in ((event("swh-b", "pending", "evt_2"), "not_final"),
                                  (event(None, "succeeded", "evt_3"), "not_ours"),
                                  (event("../x", "succeeded", "evt_4"), "not_ours")):
                    st, _, answer = post(body, sig(body))
                    self.assertEqual((st, answer), (200, {"ignored": why}), body)
                self.assertIn(tg.status("swh-b")[2]["state"], ("unknown", "retry_wait"))
                failed = event("swh-b", "failed", "evt_5", "re_wh2")
                st, _, body = post(failed, sig(failed))
                self.assertEqual((st, body["state"]), (200, "rejected"), body)
                # a later "succeeded" cannot rewrite a final answer
                flip = event("swh-b", "succeeded", "evt_6", "re_wh2")
                self.assertEqual(post(flip, sig(flip))[0], 409)
                st, _, _ = post(b"[1]", sig(b"[1]"))
                self.assertEqual(st, 422)
                # nothing was sent to the provider because of a delivery
                posts = [a for a in stub.arrivals() if a["method"] == "POST"]
                self.assertEqual(len(posts), 2, posts)

    def test_config_check_on_the_profile_says_nothing(self):
        d = tempfile.mkdtemp(prefix="tollgate-stripe-")
        try:
            secret = os.path.join(d, "key")
            with open(os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write("sk_test_x\n")
            with open(os.path.join(tgprovider.source_dir(), "docs", "providers",
                                   "stripe.ini")) as f:
                text = f.read()
            ini = os.path.join(d, "t.ini")
            with open(ini, "w") as f:
                f.write(text.replace("/etc/tollgate/stripe-secret-key", secret)
                        .replace("/etc/tollgate/stripe-webhook-secret", secret))
            p = subprocess.run([tgtest.binary("tollgate"), "config", "check", "--config", ini],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual((p.returncode, p.stderr), (0, ""), p.stdout + p.stderr)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    tgtest.main_unittest()
