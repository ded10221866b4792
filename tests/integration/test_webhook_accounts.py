"""Each account's own webhook (issue 25 §1, issue 26 §2): POST
/v1/provider-events/{account}.

`tollgate api` with two accounts, a and b, each with its own
provider.webhook_secret_file and no top-level secret. Their refunds end
unknown or retry_wait (the stub drops every POST and refuses every query),
and then the dispatcher stops, so only the webhooks can settle them. Judged
from outside:
  - a's route, signed with a's secret, settles a's refund (once, audited
    as a webhook); signed with b's secret it is 401;
  - a's route never settles b's refund, even signed with a's secret: 200
    "ignored": "other_account" and b's refund unchanged; b's route settles it;
  - the top-level route does not exist without a top-level secret (404),
    nor does the route of an account that is not configured;
  - an account whose webhook is the top level's (c, inheriting) is settled
    through the top-level route, and a's is not.
"""

import hashlib
import hmac
import json
import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

SECRETS = {"a": "whsec-account-a-0123456789", "b": "whsec-account-b-9876543210",
           "top": "whsec-top-level-5555555555"}
FAST_RETRY = {"max_attempts": 3, "backoff_base_ms": 20, "backoff_min_ms": 0,
              "backoff_cap_ms": 100, "query_interval_ms": 200, "deadline_s": 600}
FAST_EXIT = {"starts_per_second": 50, "default_hold_ms": 20, "default_hold_max_ms": 20}


def sign(secret, body):
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def write_secret(path, text):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text + "\n")
    return path


class WebhookAccountsTest(unittest.TestCase):
    def post(self, tg, route, secret, body):
        h = {"Content-Type": "application/json"}
        if secret:
            h["X-Signature"] = sign(secret, body)
        return tgtest.http_json("POST", tg.api + route, body, h)

    def unsettled(self, tg, op):
        rec = tg.status(op)[2]
        self.assertIn(rec["state"], ("unknown", "retry_wait"), rec)
        self.assertFalse(any(a["action"] == "external" for a in rec["audit"]), rec)

    def test_each_account_its_own_webhook(self):
        with tgtest.start_stub("--mode", "drop", "--query-mode", "unavailable",
                               "--retry-after", "none") as stub:
            files = {k: write_secret(os.path.join(stub.dir, k), v) for k, v in SECRETS.items()}
            with Tollgate(stub.url, retry=FAST_RETRY, exit=FAST_EXIT,
                          provider={"webhook_secret_file": files["top"]},
                          **{"account.a": {"provider.webhook_secret_file": files["a"]},
                             "account.b": {"provider.webhook_secret_file": files["b"]},
                             "account.c": {"retry.deadline_s": 600}}) as tg:
                tg.start("api")
                disp = tg.start("dispatch", wait_api=False)
                ops = {"a": "wh-a-1", "b": "wh-b-1", "c": "wh-c-1"}
                for account, op in ops.items():
                    st, _, body = tg.submit(op, account=account)
                    self.assertEqual(st, 202, body)
                tg.wait_final(list(ops.values()), timeout=30, states=("unknown", "retry_wait"))
                disp.send_signal(signal.SIGTERM)
                self.assertEqual(disp.popen.wait(15), 0)
                for op in ops.values():
                    self.unsettled(tg, op)

                def event(op, status="succeeded"):
                    return json.dumps({"operation_id": op, "status": status,
                                       "refund_id": "re_" + op}).encode()

                # a's route: b's secret (or the top level's) is no signature of a's
                for secret in (SECRETS["b"], SECRETS["top"], None):
                    st, _, body = self.post(tg, "/v1/provider-events/a", secret,
                                            event(ops["a"]))
                    self.assertEqual((st, body["error"]["code"]), (401, "bad_signature"), body)
                self.unsettled(tg, ops["a"])
                # a's route, a's secret, b's refund: not a's to settle
                st, _, body = self.post(tg, "/v1/provider-events/a", SECRETS["a"],
                                        event(ops["b"]))
                self.assertEqual((st, body), (200, {"ignored": "other_account"}), body)
                self.unsettled(tg, ops["b"])
                # the top-level route: only the accounts whose webhook it is (c)
                st, _, body = self.post(tg, "/v1/provider-events", SECRETS["top"],
                                        event(ops["a"]))
                self.assertEqual((st, body), (200, {"ignored": "other_account"}), body)
                self.unsettled(tg, ops["a"])
                st, _, body = self.post(tg, "/v1/provider-events", SECRETS["top"],
                                        event(ops["c"]))
                self.assertEqual((st, body["state"]), (200, "succeeded"), body)
                # each account's route settles its own, once
                for _ in range(2):
                    st, _, body = self.post(tg, "/v1/provider-events/a", SECRETS["a"],
                                            event(ops["a"]))
                    self.assertEqual((st, body["state"]), (200, "succeeded"), body)
                st, _, body = self.post(tg, "/v1/provider-events/b", SECRETS["b"],
                                        event(ops["b"], "failed"))
                self.assertEqual((st, body["state"]), (200, "rejected"), body)
                for op in ops.values():
                    rec = tg.status(op)[2]
                    self.assertEqual(rec["refund_id"], "re_" + op)
                    self.assertEqual(sum(a["action"] == "external" for a in rec["audit"]), 1)
                # no such account; a GET
                st, _, body = self.post(tg, "/v1/provider-events/zz", SECRETS["a"],
                                        event(ops["a"]))
                self.assertEqual((st, body["error"]["code"]), (404, "not_found"), body)
                st, _, body = tgtest.http_json("GET", tg.api + "/v1/provider-events/a")
                self.assertEqual(st, 405, body)
                # the metrics name the route by its pattern
                _, _, raw = tgtest.http_request("GET", tg.api + "/metrics")
                self.assertIn('route="/v1/provider-events/{account}"', raw.decode())

    def test_account_without_secret_has_no_route(self):
        with tgtest.start_stub("--mode", "fast") as stub:
            secret = write_secret(os.path.join(stub.dir, "a"), SECRETS["a"])
            with Tollgate(stub.url, **{"account.a": {"provider.webhook_secret_file": secret},
                                       "account.b": {"retry.deadline_s": 600}}) as tg:
                tg.start("api")
                body = json.dumps({"operation_id": "x", "status": "succeeded"}).encode()
                for route in ("/v1/provider-events", "/v1/provider-events/b"):
                    st, _, got = self.post(tg, route, SECRETS["a"], body)
                    self.assertEqual((st, got["error"]["code"]), (404, "not_found"), route)
                st, _, got = self.post(tg, "/v1/provider-events/a", SECRETS["a"], body)
                self.assertEqual((st, got["error"]["code"]), (404, "not_found"), got)


if __name__ == "__main__":
    tgtest.main_unittest()
