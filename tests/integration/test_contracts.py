"""What tollgate promises outside its code, checked against a running daemon:

- openapi.yaml: every route of it is called on a real `tollgate serve` (and,
  for a cancel before any call, on `tollgate api` alone first: no exit takes
  the refund meanwhile), and every answer (success and error alike) must be
  a status the file lists for that route, with a body valid against the
  file's schema (JSON Schema 2020-12, python3-jsonschema); the routes the
  daemon counts in /metrics (tollgate_api_requests_total{route}) are exactly
  the file's, and none of the calls made is counted as "other";
- observability/: the alert rules pass `promtool check rules` and their
  unit tests (`promtool test rules`), and every metric the rules and the
  Grafana dashboard use is one a real /metrics exports.
"""

import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import subprocess
import unittest

import tgtest
from tgdaemon import Tollgate

try:
    import jsonschema
    import yaml
except ImportError as e:  # install-deps installs them (python3-yaml, python3-jsonschema)
    raise SystemExit("test_contracts needs python3-yaml and python3-jsonschema: %s" % e)

SECRET = "whsec-contract-0123456789"
CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
# count_limited: the provider's 503 counts against the one attempt, so the
# refunds it refuses reach manual review (by default a 503 is not counted)
FAST_RETRY = {"count_limited": "true", "max_attempts": 1, "backoff_base_ms": 20, "backoff_min_ms": 0,
              "backoff_cap_ms": 100}
# default_hold_max_ms: no doubling of the hold after a probe refused again
# (a provider answering 503 to everything is how these tests make work fail fast)
FAST_EXIT = {"starts_per_second": 50, "default_hold_ms": 20, "default_hold_max_ms": 20}
SRC = tgtest.source_dir()
# api.max_batch_bytes here: 501 small refunds fit (a 400 for their count), and
# a body past it is small enough to be sent whole before the 413 closes
BATCH_BYTES = 48000


def load_openapi():
    with open(os.path.join(SRC, "openapi.yaml")) as f:
        return yaml.safe_load(f)


def sign(body):
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


class Checker:
    """Validates real answers against openapi.yaml and remembers coverage."""

    def __init__(self, doc):
        self.doc = doc
        self.seen = set()  # (template, method)
        self.templates = []
        for path in doc["paths"]:
            rx = "^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"
            self.templates.append((re.compile(rx), path))

    def template(self, path):
        path = path.split("?")[0]
        exact = [t for rx, t in self.templates if "{" not in t and rx.match(path)]
        if exact:
            return exact[0]
        for rx, t in self.templates:
            if rx.match(path):
                return t
        raise AssertionError("%s is not in openapi.yaml" % path)

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node and len(node) == 1:
            ref = node["$ref"]
            assert ref.startswith("#/"), ref
            node = self.doc
            for part in ref[2:].split("/"):
                node = node[part]
        return node

    def check(self, method, path, status, headers, raw):
        t = self.template(path)
        op = self.doc["paths"][t].get(method.lower())
        if op is None:
            # a method the route does not have: 405 with Allow, an Error body
            assert status == 405, "%s %s is not in openapi.yaml but answered %d" % (
                method, t, status)
            allowed = {m.upper() for m in self.doc["paths"][t] if m != "parameters"}
            assert headers.get("allow") in allowed, (method, t, headers.get("allow"))
            schema = {"$ref": "#/components/schemas/Error",
                      "components": self.doc["components"]}
            jsonschema.Draft202012Validator(schema).validate(json.loads(raw))
            return
        responses = op["responses"]
        assert str(status) in responses, "%s %s answered %d, which openapi.yaml does not list " \
            "(%s): %r" % (method, t, status, sorted(responses), raw[:300])
        resp = self.resolve(responses[str(status)])
        content = resp.get("content", {})
        ctype = (headers.get("content-type") or "").split(";")[0]
        assert ctype in content, "%s %s %d: Content-Type %s not in %s" % (
            method, t, status, ctype, sorted(content))
        assert headers.get("x-request-id"), "%s %s: no X-Request-Id" % (method, t)
        for name in resp.get("headers", {}):
            assert headers.get(name.lower()) is not None, "%s %s %d: no %s header" % (
                method, t, status, name)
        if ctype == "application/json":
            body = json.loads(raw)
            schema = dict(content[ctype]["schema"])
            schema["components"] = self.doc["components"]
            try:
                jsonschema.Draft202012Validator(schema).validate(body)
            except jsonschema.ValidationError as e:
                raise AssertionError("%s %s %d: %s\nbody: %s" % (method, path, status, e.message,
                                                                 json.dumps(body)[:600]))
        self.seen.add((t, method.lower()))


class ContractTest(unittest.TestCase):
    def call(self, method, path, body=None, token=True, headers=None, expect=None):
        h = dict(self.tg.headers() if token else {})
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        status, hdrs, raw = tgtest.http_request(method, self.tg.api + path, body, h)
        self.checker.check(method, path, status, hdrs, raw)
        if expect is not None:
            self.assertEqual(status, expect, (method, path, raw[:300]))
        return status, json.loads(raw) if raw[:1] in (b"{", b"[") else raw

    def test_openapi_against_real_answers(self):
        doc = load_openapi()
        self.checker = Checker(doc)
        with tgtest.start_stub("--mode", "unavailable", "--retry-after", "none") as stub:
            secret_file = os.path.join(stub.dir, "secret")
            with open(os.open(secret_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(SECRET + "\n")
            with Tollgate(stub.url, retry=FAST_RETRY, exit=FAST_EXIT,
                          provider={"webhook_secret_file": secret_file},
                          api={"max_batch_bytes": BATCH_BYTES}) as tg:
                self.tg = tg
                # the API alone: refunds stay pending, so a cancel comes before any call
                api = tg.start("api")
                self._intake_and_cancel_before_a_call()
                self.assertEqual(api.stop(), 0)
                p = tg.start("serve")
                self._health_and_metrics()
                # two refunds to manual (the provider refuses, one attempt allowed)
                for op in ("m1", "m2"):
                    self.call("POST", "/v1/refunds", self._refund(op), expect=202)
                tg.wait_final(["m1", "m2"], states=("manual",))
                stub.set_mode(mode="fast")
                self._refunds()
                self._batch()
                self._manual()
                self._calls_and_stats()
                self._accounts()
                self._provider_events()
                self._admission(tg, p, stub)
                self.call("GET", "/readyz", expect=200)
                self._routes_counted(doc)
        # every route of the file was called
        every = {(path, m) for path, ops in doc["paths"].items() for m in ops
                 if m in ("get", "post", "put", "delete")}
        self.assertEqual(every - self.checker.seen, set(), "routes never called")

    @staticmethod
    def _refund(op, payment="pay-1", amount=1500):
        return {"operation_id": op, "payment_id": payment, "amount": amount, "currency": "TWD"}

    def _intake_and_cancel_before_a_call(self):
        # the optional fields of an intake, and a caller's traceparent
        full = dict(self._refund("x1"), reason="order voided", budget_s=60,
                    metadata={"order": "A-17", "channel": "web"})
        st, body = self.call("POST", "/v1/refunds", full, headers={"traceparent": CALLER},
                             expect=202)
        self.assertEqual(body["trace_id"], CALLER[3:35])
        st, body = self.call("POST", "/v1/refunds", full, expect=200)  # a repeat keeps it
        self.assertEqual(body["trace_id"], CALLER[3:35])
        later = dict(self._refund("x2"), deadline="2999-01-01T00:00:00Z")
        st, body = self.call("POST", "/v1/refunds", later, headers={"traceparent": "junk"},
                             expect=202)
        self.assertNotEqual(body["trace_id"], CALLER[3:35])  # ignored: a trace of its own
        both = dict(self._refund("x3"), deadline="2999-01-01T00:00:00Z", budget_s=5)
        self.call("POST", "/v1/refunds", both, expect=422)
        self.call("POST", "/v1/refunds", dict(self._refund("x3"), budget_s=0), expect=422)
        st, op = self.call("GET", "/v1/refunds/x1", expect=200)
        self.assertEqual((op["traceparent"], op["refund_reason"], op["metadata"]),
                         (CALLER, "order voided", {"channel": "web", "order": "A-17"}))
        self.assertIsNotNone(op["caller_deadline_at"])
        st, op = self.call("GET", "/v1/refunds/x2", expect=200)
        self.assertEqual((op["caller_deadline_at"], op["metadata"], op["refund_reason"]),
                         (None, None, None))
        # cancel before any call: 200, and the same answer again
        st, op = self.call("POST", "/v1/refunds/x1/cancel", expect=200)
        self.assertEqual((op["state"], op["audit"][-1]["action"], op["audit"][-1]["operator"]),
                         ("cancelled", "cancel", "client"))
        self.call("POST", "/v1/refunds/x1/cancel", {"operator": "shop", "reason": "again"},
                  expect=200)
        st, op = self.call("POST", "/v1/refunds/x2/cancel",
                           {"operator": "shop", "reason": "duplicate"}, expect=200)
        self.assertEqual((op["state"], op["audit"][-1]["operator"]), ("cancelled", "shop"))
        self.call("POST", "/v1/refunds/ghost/cancel", expect=404)
        self.call("POST", "/v1/refunds/x1/cancel", {"operator": "shop", "x": 1}, expect=422)
        self.call("POST", "/v1/refunds/x1/cancel", {"operator": ""}, expect=422)
        self.call("POST", "/v1/refunds/x1/cancel", b"{oops", expect=400)
        self.call("POST", "/v1/refunds/x1/cancel", token=False, expect=401)
        self.call("POST", "/v1/refunds/x1/cancel", b"c" * 20000, expect=413)
        self.call("GET", "/v1/refunds/x1/cancel", expect=405)

    def _health_and_metrics(self):
        self.call("GET", "/healthz", expect=200)
        self.call("POST", "/healthz", expect=405)
        tgtest.wait_until(lambda: self.call("GET", "/readyz")[0] == 200, what="ready")
        self.call("DELETE", "/readyz", expect=405)
        self.call("GET", "/metrics", expect=200)
        self.call("POST", "/metrics", expect=405)

    def _refunds(self):
        self.call("POST", "/v1/refunds", self._refund("c1"), token=False, expect=401)
        self.call("POST", "/v1/refunds", {"operation_id": "c1"}, expect=422)
        self.call("POST", "/v1/refunds", b"{not json", expect=400)
        self.call("POST", "/v1/refunds", self._refund("c1"), expect=202)
        self.call("POST", "/v1/refunds", self._refund("c1"), expect=200)
        self.call("POST", "/v1/refunds", self._refund("c1", amount=9), expect=409)
        self.call("POST", "/v1/refunds", b"x" * 20000, expect=413)
        self.call("GET", "/v1/refunds", expect=405)
        self.tg.wait_final(["c1"], states=("succeeded",))
        self.call("GET", "/v1/refunds/c1", expect=200)
        self.call("GET", "/v1/refunds/nope", expect=404)
        self.call("GET", "/v1/refunds/c1", token=False, expect=401)
        self.call("POST", "/v1/refunds/c1", expect=405)
        # cancel after a call: refused with the reason, nothing changes
        st, body = self.call("POST", "/v1/refunds/c1/cancel", expect=409)
        self.assertEqual(body["error"]["code"], "already_final")
        st, body = self.call("POST", "/v1/refunds/m1/cancel", expect=409)
        self.assertEqual(body["error"]["code"], "already_sent")
        self.assertEqual(self.call("GET", "/v1/refunds/m1", expect=200)[1]["state"], "manual")

    def _manual(self):
        st, body = self.call("GET", "/v1/manual", expect=200)
        self.assertEqual(body["count"], 2)
        self.call("GET", "/v1/manual?reason=bogus", expect=400)
        self.call("GET", "/v1/manual?limit=1", expect=200)
        self.call("GET", "/v1/manual", token=False, expect=401)
        self.call("GET", "/v1/manual/m1", expect=200)
        self.call("GET", "/v1/manual/ghost", expect=404)
        self.call("GET", "/v1/manual/m1", token=False, expect=401)
        self._assign()
        act = {"operator": "ana", "reason": "checked with the provider"}
        self.call("POST", "/v1/manual/m1/resend", {"operator": ""}, expect=422)
        self.call("POST", "/v1/manual/m1/resend", b"{oops", expect=400)
        self.call("POST", "/v1/manual/ghost/resend", act, expect=404)
        self.call("POST", "/v1/manual/c1/resend", act, expect=409)
        self.call("POST", "/v1/manual/m1/resend", act, token=False, expect=401)
        self.call("POST", "/v1/manual/m1/resend", b"y" * 20000, expect=413)
        self.call("POST", "/v1/manual/m1/resend", act, expect=202)
        res = dict(act, outcome="failed")
        self.call("POST", "/v1/manual/m2/resolve", {"operator": "ana"}, expect=422)
        self.call("POST", "/v1/manual/m2/resolve", b"{oops", expect=400)
        self.call("POST", "/v1/manual/ghost/resolve", res, expect=404)
        self.call("POST", "/v1/manual/m1/resolve", res, expect=409)
        self.call("POST", "/v1/manual/m2/resolve", res, token=False, expect=401)
        self.call("POST", "/v1/manual/m2/resolve", res, expect=200)

    def _assign(self):
        def owners(query):
            st, body = self.call("GET", "/v1/manual?" + query, expect=200)
            return [(i["operation_id"], i["assignee"]) for i in body["items"]]
        lead = {"operator": "lead", "assignee": "ana", "reason": "her shift"}
        st, op = self.call("POST", "/v1/manual/m1/assign", lead, expect=200)
        self.assertEqual((op["assignee"], op["audit"][-1]["action"]), ("ana", "assign"))
        self.call("POST", "/v1/manual/m2/assign", {"operator": "lead", "assignee": "bob"},
                  expect=200)
        st, op = self.call("POST", "/v1/manual/m2/assign", {"operator": "lead", "assignee": None},
                           expect=200)
        self.assertIsNone(op["assignee"])
        self.assertEqual(owners("assignee=ana"), [("m1", "ana")])
        self.assertEqual(owners("assignee=bob"), [])
        self.assertEqual(owners("unassigned=true"), [("m2", None)])
        self.assertEqual(owners("unassigned=true&reason=attempts_exhausted&limit=5"),
                         [("m2", None)])
        self.call("GET", "/v1/manual?unassigned=yes", expect=400)
        self.call("GET", "/v1/manual?assignee=ana&unassigned=true", expect=400)
        self.call("GET", "/v1/manual?assignee=", expect=400)
        self.call("POST", "/v1/manual/c1/assign", lead, expect=409)
        self.call("POST", "/v1/manual/ghost/assign", lead, expect=404)
        self.call("POST", "/v1/manual/m1/assign", {"operator": "lead"}, expect=422)
        self.call("POST", "/v1/manual/m1/assign", dict(lead, x=1), expect=422)
        self.call("POST", "/v1/manual/m1/assign", b"{oops", expect=400)
        self.call("POST", "/v1/manual/m1/assign", lead, token=False, expect=401)
        self.call("POST", "/v1/manual/m1/assign", b"a" * 20000, expect=413)
        self.call("GET", "/v1/manual/m1/assign", expect=405)
        # four-eyes (off here): nothing waits for approval
        self.call("POST", "/v1/manual/m1/approve", {"operator": "bob"}, expect=409)
        self.call("POST", "/v1/manual/ghost/approve", {"operator": "bob"}, expect=404)
        self.call("POST", "/v1/manual/m1/approve", {"operator": "bob"}, token=False, expect=401)
        self.call("POST", "/v1/manual/m1/approve", {"x": 1}, expect=422)
        self.call("POST", "/v1/manual/m1/approve", b"{oops", expect=400)
        self.call("GET", "/v1/manual/m1/approve", expect=405)

    def _batch(self):
        r = self._refund
        items = [r("bt-1"), r("c1"), r("c1", amount=9), {"operation_id": "bt-2"}, [1]]
        st, body = self.call("POST", "/v1/refunds:batch", {"refunds": items}, expect=200)
        self.assertEqual([x["status"] for x in body["results"]], [202, 200, 409, 422, 400])
        st, body = self.call("POST", "/v1/refunds:batch", {"refunds": items[:2]}, expect=200)
        self.assertEqual([x["status"] for x in body["results"]], [200, 200])
        self.call("POST", "/v1/refunds:batch", {"refunds": []}, expect=400)
        self.call("POST", "/v1/refunds:batch", {"refunds": [r("bt-x")] * 501}, expect=400)
        self.call("POST", "/v1/refunds:batch", b"{not json", expect=400)
        self.call("POST", "/v1/refunds:batch", {"refunds": [r("bt-3")]}, token=False,
                  expect=401)
        self.call("POST", "/v1/refunds:batch", b"x" * (BATCH_BYTES + 2000), expect=413)
        self.call("GET", "/v1/refunds:batch", expect=405)
        self.tg.wait_final(["bt-1"], states=("succeeded",))

    def _routes_counted(self, doc):
        """The routes /metrics counts are the file's, and no call of this test
        was counted as "other" (a route of the file the daemon does not name)
        but the bodies too large, which the HTTP layer refuses before routing."""
        st, text = self.call("GET", "/metrics", expect=200)
        counted = re.findall(r'^tollgate_api_requests_total\{route="([^"]+)",code="(\d+)"\}',
                             text.decode(), re.M)
        self.assertEqual({code for route, code in counted if route == "other"}, {"413"},
                         text.decode())
        self.assertEqual({route for route, code in counted} - {"other"}, set(doc["paths"]))

    def _calls_and_stats(self):
        self.call("GET", "/v1/calls", expect=200)
        self.call("GET", "/v1/calls?since=0&limit=1", expect=200)
        self.call("GET", "/v1/calls?limit=0", expect=400)
        self.call("GET", "/v1/calls", token=False, expect=401)
        self.call("GET", "/v1/events", expect=200)
        self.call("GET", "/v1/events?after=0&limit=2&delivery=due", expect=200)
        self.call("GET", "/v1/events?delivery=lost", expect=400)
        self.call("GET", "/v1/events", token=False, expect=401)
        st, body = self.call("GET", "/v1/events?limit=1", expect=200)
        eid = body["events"][0]["id"]  # the cancel before a call, m1 and m2 to manual
        st, ev = self.call("POST", "/v1/events/%d/redeliver" % eid, expect=200)
        self.assertEqual((ev["id"], ev["delivery"], ev["attempts"]), (eid, "due", 0))
        st, audit = self.call("GET", "/v1/accounts/default/audit", expect=200)
        self.assertEqual(audit["audit"][-1]["action"], "event_redeliver")
        self.assertEqual(audit["audit"][-1]["detail"]["event_id"], eid)
        self.assertEqual(audit["audit"][-1]["by"], "api-token")  # the principal: the token file
        self.call("POST", "/v1/events/999999999/redeliver", expect=404)
        self.call("POST", "/v1/events/0/redeliver", expect=404)
        self.call("POST", "/v1/events/1/redeliver", token=False, expect=401)
        self.call("GET", "/v1/events/1/redeliver", expect=405)
        self.call("GET", "/v1/stats", expect=200)
        self.call("GET", "/v1/stats?minutes=1", expect=200)
        self.call("GET", "/v1/stats?minutes=99", expect=400)
        self.call("GET", "/v1/stats?account=default", expect=200)
        self.call("GET", "/v1/calls?account=default", expect=200)
        self.call("GET", "/v1/manual?account=default", expect=200)
        for path in ("/v1/stats", "/v1/calls", "/v1/manual"):
            st, body = self.call("GET", path + "?account=ghost", expect=422)
            self.assertEqual((body["error"]["code"], body["error"]["field"]),
                             ("unknown_account", "account"), body)
            self.assertIn("the accounts are: default", body["error"]["message"])
        self.call("GET", "/v1/stats", token=False, expect=401)

    def _accounts(self):
        st, body = self.call("GET", "/v1/accounts", expect=200)
        self.assertEqual([a["account"] for a in body["accounts"]], ["default"])
        self.call("GET", "/v1/accounts", token=False, expect=401)
        ok = {"paused": False, "reason": "contract"}
        st, body = self.call("POST", "/v1/accounts/default", ok, expect=200)
        self.assertFalse(body["in_force"]["paused"])
        self.call("POST", "/v1/accounts/ghost", ok, expect=404)
        self.call("POST", "/v1/accounts/default", b"{oops", expect=400)
        self.call("POST", "/v1/accounts/default", {"starts_per_second": 1e6, "reason": "x"},
                  expect=422)
        self.call("POST", "/v1/accounts/default", {"paused": True}, expect=422)
        self.call("POST", "/v1/accounts/default", ok, token=False, expect=401)
        self.call("POST", "/v1/accounts/default", b"y" * 20000, expect=413)
        self.call("GET", "/v1/accounts/default", expect=405)
        st, body = self.call("GET", "/v1/accounts/default/audit", expect=200)
        self.assertEqual(body["audit"][-1]["action"], "account_resume")
        self.call("GET", "/v1/accounts/default/audit?after=-1", expect=400)
        self.call("GET", "/v1/accounts/ghost/audit", expect=404)
        self.call("GET", "/v1/accounts/default/audit", token=False, expect=401)

    def _provider_events(self):
        def event(obj, signature=None):
            raw = json.dumps(obj).encode()
            return self.call("POST", "/v1/provider-events", raw, token=False,
                             headers={"Content-Type": "application/json",
                                      "X-Signature": signature or sign(raw)})
        self.assertEqual(event({"operation_id": "c1", "status": "succeeded"}, "sha256=00")[0], 401)
        self.assertEqual(event({"operation_id": "ghost", "status": "succeeded"})[0], 404)
        self.assertEqual(event({"operation_id": "c1", "status": "failed"})[0], 409)
        self.assertEqual(event({"operation_id": "c1", "status": "succeeded"})[0], 200)
        self.assertEqual(event({"operation_id": "c1"})[0], 422)
        # the account's own route (one account: the top level's webhook)
        raw = json.dumps({"operation_id": "c1", "status": "succeeded"}).encode()
        for route, sig, want in (("/v1/provider-events/default", sign(raw), 200),
                                 ("/v1/provider-events/default", "sha256=00", 401),
                                 ("/v1/provider-events/ghost", sign(raw), 404)):
            self.call("POST", route, raw, token=False, expect=want,
                      headers={"Content-Type": "application/json", "X-Signature": sig})
        self.call("GET", "/v1/provider-events/default", token=False, expect=405)
        raw = b"{oops"
        self.call("POST", "/v1/provider-events", raw, token=False,
                  headers={"X-Signature": sign(raw)}, expect=400)
        raw = b"z" * 20000
        self.call("POST", "/v1/provider-events", raw, token=False,
                  headers={"X-Signature": sign(raw)}, expect=413)

    def _admission(self, tg, p, stub):
        # admission.max_backlog = 1, live (SIGHUP), a slow provider: new refunds are refused
        with open(tg.config, "a") as f:
            f.write("[admission]\nmax_backlog = 1\n")
        p.send_signal(signal.SIGHUP)
        tgtest.wait_until(lambda: '"config_reloaded"' in p.stderr_text(), what="reload")
        stub.set_mode(mode="slow", delay_ms=2000)
        statuses = [self.call("POST", "/v1/refunds", self._refund("adm-%d" % i))[0]
                    for i in range(4)]
        self.assertIn(503, statuses)
        # a batch is admitted or refused whole; already accepted ones still answer
        self.call("POST", "/v1/refunds:batch",
                  {"refunds": [self._refund("adm-b1"), self._refund("adm-b2")]}, expect=503)
        st, body = self.call("POST", "/v1/refunds:batch", {"refunds": [self._refund("c1")]},
                             expect=200)
        self.assertEqual(body["results"][0]["status"], 200)
        stub.set_mode(mode="fast")

    def test_alert_rules_and_dashboard(self):
        obs = os.path.join(SRC, "observability")
        promtool = shutil.which("promtool") or os.path.join(SRC, ".tools", "bin", "promtool")
        if not os.access(promtool, os.X_OK):
            if os.environ.get("CI"):
                self.fail("promtool missing (scripts/install-deps.sh extracts it)")
            self.skipTest("promtool not installed (scripts/install-deps.sh)")
        for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts.test.yml"]):
            r = subprocess.run([promtool] + args, cwd=obs, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, "promtool %s:\n%s%s" % (args, r.stdout, r.stderr))
        # every metric they use is exported by a real daemon
        with open(os.path.join(obs, "alerts.yml")) as f:
            used = set(re.findall(r"tollgate_[a-z_]+", f.read()))
        with open(os.path.join(obs, "grafana-dashboard.json")) as f:
            dash = json.load(f)
        exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
        self.assertGreaterEqual(len(exprs), 10)
        for e in exprs:
            used |= set(re.findall(r"tollgate_[a-z_]+", e))
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
            tg.start("serve")
            self.assertEqual(tg.submit("obs-1")[0], 202)
            tg.wait_final(["obs-1"], states=("succeeded",))
            tgtest.wait_until(lambda: b"tollgate_call_latency_by_kind_seconds_bucket" in
                              tgtest.http_request("GET", tg.api + "/metrics")[2], what="figures")
            text = tgtest.http_request("GET", tg.api + "/metrics")[2].decode()
        exported = set(re.findall(r"^# TYPE (tollgate_[a-z_]+) (\w+)", text, re.M))
        names = set()
        for name, kind in exported:
            names.add(name)
            if kind == "histogram":
                names |= {name + "_bucket", name + "_sum", name + "_count"}
        self.assertEqual(used - names, set(), "used by the rules or dashboard, not exported")


if __name__ == "__main__":
    tgtest.main_unittest()
