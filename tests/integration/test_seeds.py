"""What the seeds ask for beyond the exit itself (issue 17), end to end on real
processes: the caller's deadline travels in (a budget cuts the first call's
timeout, and past it nothing is sent again), cancelling before anything was
sent (API and CLI; refused with the reason once a call went), an owner for
each manual case (assign, re-assign, unassign through the API and the CLI,
audited; the list by owner), and W3C trace context (the caller's traceparent
kept, sent to the provider on each call with a span of its own, in the call
log and in every log line of the operation; without one tollgate starts a
trace).
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events  # noqa: E402

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE = CALLER[3:35]
HEX32 = re.compile(r"^[0-9a-f]{32}$")
TP = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")


def cli(*args):
    p = subprocess.run([tgtest.binary("tollgate")] + list(args), capture_output=True,
                       text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


class SeedsTest(unittest.TestCase):
    def api(self, tg, method, path, body=None, headers=None):
        h = dict(tg.headers())
        h.update(headers or {})
        return tgtest.http_json(method, tg.api + path, body, h)

    def refund(self, tg, op, headers=None, **extra):
        body = {"operation_id": op, "payment_id": "pay-" + op, "amount": 700,
                "currency": "TWD"}
        body.update(extra)
        return self.api(tg, "POST", "/v1/refunds", body, headers)

    def test_deadline_cancel_owner_trace(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, retry={"deadline_s": 60, "query_interval_ms": 200},
                         exit={"starts_per_second": 50}) as tg:
            api = tg.start("api")  # no dispatcher yet: everything waits, pending

            # intake: a traceparent and a budget; a deadline past ours is cut
            t0 = int(time.time() * 1000) - 1  # the API reads whole milliseconds
            st, _, body = self.refund(tg, "traced", {"traceparent": CALLER}, budget_s=30)
            self.assertEqual(st, 202, body)
            self.assertEqual(body["trace_id"], TRACE)
            self.assertTrue(t0 + 30000 <= body["deadline_at"] <= time.time() * 1000 + 30000)
            st, _, body = self.refund(tg, "plain", deadline="2999-01-01T00:00:00Z")
            self.assertEqual(st, 202, body)
            self.assertRegex(body["trace_id"], HEX32)  # tollgate started a trace
            self.assertNotEqual(body["trace_id"], TRACE)
            self.assertLessEqual(body["deadline_at"], time.time() * 1000 + 60000)
            st, _, body = self.refund(tg, "bad", deadline="2001-01-01T00:00:00Z")
            self.assertEqual((st, body["error"]["field"]), (422, "deadline"))
            self.assertEqual(self.api(tg, "GET", "/v1/refunds/bad")[0], 404)

            # cancel before anything was sent: API, then the CLI
            for op in ("c-api", "c-cli"):
                self.assertEqual(self.refund(tg, op)[0], 202)
            st, _, body = self.api(tg, "POST", "/v1/refunds/c-api/cancel",
                                   {"operator": "shop", "reason": "order voided"})
            self.assertEqual((st, body["state"]), (200, "cancelled"), body)
            self.assertEqual(body["audit"][-1]["action"], "cancel")
            rc, out, err = cli("cancel", "c-cli", "--config", tg.config, "--operator", "ops",
                               "--reason", "duplicate")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["state"], "cancelled")
            self.assertEqual(self.api(tg, "POST", "/v1/refunds/c-cli/cancel")[0], 200)

            # the exit opens: cancelled refunds never reach the provider
            disp = tg.start("dispatch", wait_api=False)
            final = tg.wait_final(["traced", "plain"], timeout=20)
            self.assertEqual({r["state"] for r in final.values()}, {"succeeded"})
            keys = [a["idempotency_key"] for a in stub.arrivals()]
            self.assertNotIn("c-api", keys)
            self.assertNotIn("c-cli", keys)
            self.assertEqual(self.api(tg, "GET", "/v1/refunds/c-api")[2]["state"], "cancelled")
            # once sent, refused with the reason, and nothing changes
            st, _, body = self.api(tg, "POST", "/v1/refunds/traced/cancel")
            self.assertEqual((st, body["error"]["code"]), (409, "already_final"), body)
            rc, _, err = cli("cancel", "plain", "--config", tg.config)
            self.assertEqual(rc, 1)
            self.assertIn("final answer", err)

            # the caller's deadline travels in: a provider slower than the
            # whole budget; the call's timeout is what was left, and after
            # it nothing is sent again (manual, deadline)
            stub.set_mode(mode="slow", delay_ms=4000)
            st, _, body = self.refund(tg, "short", budget_s=1.5)
            self.assertEqual(st, 202, body)
            deadline_at = body["deadline_at"]
            rec = tg.wait_final(["short"], timeout=15)["short"]
            self.assertEqual((rec["state"], rec["reason"]), ("manual", "deadline"), rec)
            self.assertEqual(rec["caller_deadline_at"], deadline_at)
            self.assertEqual(len(rec["attempts"]), 1)  # not sent again
            call = rec["attempts"][0]
            self.assertEqual(call["class"], "unknown")
            self.assertLess(call["latency_ms"], 2000)  # not the 3 s timeout
            self.assertLessEqual(call["start_wall"] + call["latency_ms"], deadline_at + 200)
            time.sleep(0.5)  # a query would have come 200 ms after; none did
            self.assertEqual(sum(a["idempotency_key"] == "short" for a in stub.arrivals()), 1)
            self.assertEqual(self.api(tg, "POST", "/v1/refunds/short/cancel")[2]["error"]["code"],
                             "already_sent")

            # an owner for the manual case: assign (API), re-assign (CLI),
            # the list by owner (API and CLI), unassign; each audited
            st, _, body = self.api(tg, "POST", "/v1/manual/short/assign",
                                   {"operator": "lead", "assignee": "alice"})
            self.assertEqual((st, body["assignee"]), (200, "alice"), body)
            rc, out, err = cli("manual", "assign", "short", "--config", tg.config,
                               "--operator", "lead", "--assignee", "bob", "--reason", "shift")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["assignee"], "bob")
            st, _, body = self.api(tg, "GET", "/v1/manual?assignee=bob")
            self.assertEqual([i["operation_id"] for i in body["items"]], ["short"])
            self.assertEqual(self.api(tg, "GET", "/v1/manual?assignee=alice")[2]["count"], 0)
            self.assertEqual(self.api(tg, "GET", "/v1/manual?unassigned=true")[2]["count"], 0)
            rc, out, _ = cli("manual", "list", "--config", tg.config, "--assignee", "bob")
            self.assertEqual(json.loads(out)["count"], 1)
            rc, out, err = cli("manual", "unassign", "short", "--config", tg.config,
                               "--operator", "lead")
            self.assertEqual(rc, 0, err)
            self.assertIsNone(json.loads(out)["assignee"])
            rc, out, _ = cli("manual", "list", "--config", tg.config, "--unassigned")
            self.assertEqual([i["operation_id"] for i in json.loads(out)["items"]], ["short"])
            audit = self.api(tg, "GET", "/v1/manual/short")[2]["audit"]
            self.assertEqual([(a["action"], a["operator"], a["detail"]) for a in audit
                              if a["action"] == "assign"],
                             [("assign", "lead", "assigned to alice (was nobody)"),
                              ("assign", "lead", "assigned to bob (was alice)"),
                              ("assign", "lead", "unassigned (was bob)")])

            # trace context: at the provider, in the call log, in the logs
            calls = {c["request_id"]: c for c in tg.calls()}
            trace_of = {}
            for op in ("traced", "plain", "short"):
                trace_of[op] = self.api(tg, "GET", "/v1/refunds/" + op)[2]["trace_id"]
            self.assertEqual(trace_of["traced"], TRACE)
            arrivals = [a for a in stub.arrivals() if a["idempotency_key"] in trace_of]
            self.assertEqual(len(arrivals), 3)
            spans = set()
            for a in arrivals:
                m = TP.match(a["traceparent"] or "")
                self.assertIsNotNone(m, a)
                self.assertEqual(m.group(1), trace_of[a["idempotency_key"]])
                self.assertNotEqual(m.group(2), CALLER[36:52])  # a span of our own
                c = calls[a["request_id"]]  # the call log has the request id
                self.assertEqual((c["trace_id"], c["span_id"]), (m.group(1), m.group(2)))
                spans.add(m.group(2))
            self.assertEqual(len(spans), 3)
            rc, out, _ = cli("calls", "--config", tg.config, "--format", "csv")
            self.assertIn(",trace_id,span_id", out.splitlines()[0])
            self.assertIn(TRACE, out)
            # every log line of an operation carries its trace id
            lines = [e for e in log_events(disp) + log_events(api)
                     if e.get("operation_id") in trace_of]
            self.assertTrue(any(e.get("event") == "call_start" for e in lines))
            self.assertTrue(any(e.get("event") == "http_request" for e in lines))
            for e in lines:
                self.assertEqual(e.get("trace_id"), trace_of[e["operation_id"]], e)


if __name__ == "__main__":
    tgtest.main_unittest()
