"""Who may do what (issue 28, section 2), judged from outside on a real
`tollgate serve` with an api.credentials_file that `tollgate token` wrote:

- each credential reaches the routes of its scopes and gets 403
  missing_scope (a JSON error code) elsewhere; no credential is 401 as ever;
- api.token_file beside it keeps every scope (one full-power credential);
- `tollgate token revoke` and SIGHUP: the next request with that secret is
  403 credential_revoked; `tollgate token add` and SIGHUP: the new one works,
  with no restart; every refusal is counted by reason in /metrics;
- the file holds no secret, only salted hashes, and is its owner's alone;
- the console signs a credential in under its own name (operator scope:
  operator role), and an intake-only credential not at all;
- intake reads and cancels its own: with two intake credentials, each reads
  and cancels the refunds it submitted and gets 404 not_found for the
  other's (its existence is not told), a repeat of the other's key is 409
  without its state (single and batch); a refund without an owner (the
  token file's) is read by both; read and the token file read everything;
  the pull feed serves each intake credential its own refunds' events.
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import unittest

import tgtest
from tgdaemon import Tollgate


def token(*args):
    p = subprocess.run([tgtest.binary("tollgate"), "token"] + list(args),
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout.strip(), p.stderr


def events(proc, name):
    return [e for e in tgtest.json_lines(proc.stderr_text()) if e.get("event") == name]


def refusals(tg, auth, reason):
    status, _, text = tgtest.http_json("GET", tg.api + "/metrics", None, auth)
    want = 'tollgate_api_auth_failures_total{reason="%s"} ' % reason
    for line in str(text).splitlines():
        if line.startswith(want):
            return int(line.split()[1])
    raise AssertionError("no %s in /metrics (%s)" % (want, status))


def bearer(secret):
    return {"Authorization": "Bearer " + secret}


def refund(op_id):
    return {"operation_id": op_id, "payment_id": "pay_1", "amount": 100, "currency": "TWD"}


class CredentialsTest(unittest.TestCase):
    def test_scopes_revoke_and_reload(self):
        with tgtest.start_stub("--mode", "fast") as stub:
            d = tempfile.mkdtemp(prefix="tg-creds-")
            self.addCleanup(shutil.rmtree, d, True)
            path = os.path.join(d, "credentials")
            secrets = {}
            for name, scopes in (("orders", "intake"), ("dash", "read"),
                                 ("alice", "read,operator")):
                rc, out, err = token("add", name, "--scopes", scopes, "--file", path)
                self.assertEqual(rc, 0, err)
                self.assertRegex(out, r"^tg_[0-9a-f]{64}$")
                secrets[name] = out
            with open(path) as f:
                text = f.read()
            for s in secrets.values():
                self.assertNotIn(s[3:], text)  # only hashes
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
            rc, out, _ = token("list", "--file", path)
            self.assertEqual(rc, 0)
            self.assertIn("alice", out)
            self.assertNotIn("hmac", out)

            with Tollgate(stub.url, api={"credentials_file": path}) as tg:
                p = tg.start("serve")
                post = lambda who, op: tgtest.http_json(  # noqa: E731
                    "POST", tg.api + "/v1/refunds", refund(op), bearer(secrets[who]))
                get = lambda who, route: tgtest.http_json(  # noqa: E731
                    "GET", tg.api + route, None, bearer(secrets[who]))

                self.assertEqual(post("orders", "c-1")[0], 202)
                self.assertEqual(get("orders", "/v1/refunds/c-1")[0], 200)
                status, _, body = get("orders", "/v1/calls")
                self.assertEqual((status, body["error"]["code"]), (403, "missing_scope"))
                status, _, body = post("dash", "c-2")
                self.assertEqual((status, body["error"]["code"]), (403, "missing_scope"))
                self.assertEqual(get("dash", "/v1/calls")[0], 200)
                self.assertEqual(get("alice", "/v1/manual")[0], 200)
                status, _, body = tgtest.http_json("GET", tg.api + "/v1/calls")
                self.assertEqual((status, body["error"]["code"]), (401, "unauthorized"))
                # the CLI: a named credential from the environment
                env = dict(os.environ, TOLLGATE_TOKEN=secrets["dash"])
                p2 = subprocess.run([tgtest.binary("tollgate"), "status", "c-1", "--config",
                                     tg.config], capture_output=True, text=True, env=env,
                                    timeout=60)
                self.assertEqual(p2.returncode, 0, p2.stderr)
                env["TOLLGATE_TOKEN"] = "tg_" + "0" * 64  # none of ours: 401
                p2 = subprocess.run([tgtest.binary("tollgate"), "status", "c-1", "--config",
                                     tg.config], capture_output=True, text=True, env=env,
                                    timeout=60)
                self.assertNotEqual(p2.returncode, 0)
                # the token file: every scope
                self.assertEqual(tg.submit("c-3")[0], 202)
                self.assertEqual(refusals(tg, tg.headers(), "missing_scope"), 2)

                # revoke, reload: refused as revoked; add, reload: in
                rc, _, err = token("revoke", "orders", "--file", path)
                self.assertEqual(rc, 0, err)
                rc, fresh, err = token("add", "orders-2", "--scopes", "intake", "--file", path)
                self.assertEqual(rc, 0, err)
                secrets["orders-2"] = fresh
                p.send_signal(signal.SIGHUP)
                tgtest.wait_until(lambda: len(events(p, "config_reloaded")) == 1,
                                  what="the reload")
                self.assertEqual(events(p, "config_reloaded")[0]["applied"],
                                 ["api.credentials_file"])
                # the same file again: nothing changed, nothing applied
                p.send_signal(signal.SIGHUP)
                tgtest.wait_until(lambda: len(events(p, "config_reloaded")) == 2,
                                  what="the second reload")
                self.assertEqual(events(p, "config_reloaded")[1]["applied"], [])
                status, _, body = post("orders", "c-4")
                self.assertEqual((status, body["error"]["code"]), (403, "credential_revoked"))
                self.assertEqual(post("orders-2", "c-5")[0], 202)
                self.assertEqual(refusals(tg, tg.headers(), "revoked"), 1)

                # the console: a credential signs in as its name
                status, _, body = tgtest.http_json("POST", tg.api + "/ui/api/login",
                                                   {"token": secrets["alice"]})
                self.assertEqual(status, 200, body)
                self.assertEqual((body["user"], body["role"]), ("alice", "operator"))
                status, _, body = tgtest.http_json("POST", tg.api + "/ui/api/login",
                                                   {"token": secrets["dash"]})
                self.assertEqual((status, body["role"]), (200, "viewer"))
                status, _, _ = tgtest.http_json("POST", tg.api + "/ui/api/login",
                                                {"token": secrets["orders-2"]})
                self.assertEqual(status, 401)
                self.assertIsNone(p.poll())

    def test_intake_reads_and_cancels_its_own(self):
        with tgtest.start_stub("--mode", "fast") as stub:
            d = tempfile.mkdtemp(prefix="tg-creds-")
            self.addCleanup(shutil.rmtree, d, True)
            path = os.path.join(d, "credentials")
            secrets = {}
            for name, scopes in (("shop-a", "intake"), ("shop-b", "intake"), ("dash", "read")):
                rc, out, err = token("add", name, "--scopes", scopes, "--file", path)
                self.assertEqual(rc, 0, err)
                secrets[name] = out

            def ask(method, route, who, body=None):
                auth = bearer(secrets[who]) if who else None
                return tgtest.http_json(method, tg.api + route, body, auth)

            with Tollgate(stub.url, api={"credentials_file": path}) as tg:
                tg.start("api")  # no exit: the refunds stay pending, cancellable
                self.assertEqual(ask("POST", "/v1/refunds", "shop-a", refund("a-1"))[0], 202)
                self.assertEqual(ask("POST", "/v1/refunds", "shop-b", refund("b-1"))[0], 202)
                self.assertEqual(tg.submit("nobody-1")[0], 202)  # the token file: no owner

                # each its own; the other's is not there
                self.assertEqual(ask("GET", "/v1/refunds/a-1", "shop-a")[0], 200)
                self.assertEqual(ask("GET", "/v1/refunds/b-1", "shop-b")[0], 200)
                for who, op in (("shop-b", "a-1"), ("shop-a", "b-1")):
                    status, _, body = ask("GET", "/v1/refunds/" + op, who)
                    self.assertEqual((status, body["error"]["code"]), (404, "not_found"))
                    missing = ask("GET", "/v1/refunds/never-%s" % op, who)[2]
                    self.assertEqual(body["error"]["message"], missing["error"]["message"])
                    status, _, body = ask("POST", "/v1/refunds/%s/cancel" % op, who)
                    self.assertEqual((status, body["error"]["code"]), (404, "not_found"))
                # a repeat of the other's key: a conflict, never its state
                status, _, body = ask("POST", "/v1/refunds", "shop-b", refund("a-1"))
                self.assertEqual((status, body["error"]["code"]), (409, "idempotency_conflict"))
                self.assertNotIn("state", body)
                status, _, body = ask("POST", "/v1/refunds:batch", "shop-b",
                                      {"refunds": [refund("a-1"), refund("b-2")]})
                self.assertEqual(status, 200, body)
                self.assertEqual([r["status"] for r in body["results"]], [409, 202])
                self.assertNotIn("state", body["results"][0])
                # its own repeat is the same request as ever
                self.assertEqual(ask("POST", "/v1/refunds", "shop-a", refund("a-1"))[0], 200)

                # no owner: both read it; read and the token file read every one
                for who in ("shop-a", "shop-b", "dash"):
                    self.assertEqual(ask("GET", "/v1/refunds/nobody-1", who)[0], 200, who)
                for op in ("a-1", "b-1", "b-2"):
                    self.assertEqual(ask("GET", "/v1/refunds/" + op, "dash")[0], 200, op)
                    self.assertEqual(tg.status(op)[0], 200, op)

                # the other's cancel changed nothing; its own goes through
                self.assertEqual(ask("GET", "/v1/refunds/a-1", "dash")[2]["state"], "pending")
                status, _, body = ask("POST", "/v1/refunds/a-1/cancel", "shop-a")
                self.assertEqual((status, body["state"]), (200, "cancelled"))
                self.assertEqual([a["operator"] for a in body["audit"]
                                  if a["action"] == "cancel"], ["shop-a"])

                # the pull feed likewise: its own refunds' events and the unowned ones'
                self.assertEqual(ask("POST", "/v1/refunds/b-1/cancel", "shop-b")[0], 200)
                self.assertEqual(tgtest.http_json("POST", tg.api + "/v1/refunds/nobody-1/cancel",
                                                  None, tg.headers())[0], 200)
                seen = {}
                for who in ("shop-a", "shop-b", "dash"):
                    status, _, body = ask("GET", "/v1/events?limit=1000", who)
                    self.assertEqual(status, 200, body)
                    seen[who] = [e["operation_id"] for e in body["events"]]
                self.assertEqual(seen["shop-a"], ["a-1", "nobody-1"])
                self.assertEqual(seen["shop-b"], ["b-1", "nobody-1"])
                self.assertEqual(seen["dash"], ["a-1", "b-1", "nobody-1"])

    def test_cli_four_eyes(self):
        # manual.approval_above = 1000: `tollgate manual resend` of a case of
        # 5000 only records a request; its requester cannot approve it,
        # another operator can; a case of 10 is re-sent at once.
        retry = {"count_limited": "true", "max_attempts": 1, "backoff_base_ms": 20,
                 "backoff_min_ms": 0, "backoff_cap_ms": 100}
        with tgtest.start_stub("--mode", "unavailable", "--retry-after", "none") as stub, \
                Tollgate(stub.url, retry=retry, manual={"approval_above": 1000}) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("big", amount=5000)[0], 202)
            self.assertEqual(tg.submit("small", amount=10)[0], 202)
            tg.wait_final(["big", "small"], states=("manual",))
            stub.set_mode(mode="fast")

            def manual(*args):
                p = subprocess.run([tgtest.binary("tollgate"), "manual"] + list(args) +
                                   ["--config", tg.config], capture_output=True, text=True,
                                   timeout=60)
                return p.returncode, p.stdout, p.stderr

            rc, out, err = manual("resend", "big", "--operator", "alice", "--reason", "checked")
            self.assertEqual(rc, 0, err)
            self.assertIn("waits for another operator", err)
            self.assertEqual(json.loads(out)["state"], "manual")
            self.assertEqual(json.loads(out)["audit"][-1]["action"], "request_resend")
            rc, _, err = manual("resend", "big", "--operator", "bob", "--reason", "again")
            self.assertEqual(rc, 1)
            self.assertIn("waits for approval", err)
            rc, _, err = manual("approve", "big", "--operator", "alice")
            self.assertEqual(rc, 1)
            self.assertIn("alice's own", err)
            rc, out, err = manual("approve", "big", "--operator", "bob")
            self.assertEqual(rc, 0, err)
            audit = json.loads(out)["audit"]
            self.assertEqual([(a["action"], a["operator"]) for a in audit[-2:]],
                             [("approve", "bob"), ("resend", "alice")])
            tg.wait_final(["big"], states=("succeeded",))
            rc, out, err = manual("resend", "small", "--operator", "alice", "--reason", "r")
            self.assertEqual(rc, 0, err)
            self.assertNotIn("waits", err)
            tg.wait_final(["small"], states=("succeeded",))


if __name__ == "__main__":
    tgtest.main_unittest()
