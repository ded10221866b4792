"""Operating tollgate (issue 5), end to end: manual review (API and CLI),
/metrics (checked by a strict Prometheus text parser), /v1/stats, the call
log from the CLI, admission control, the signed provider webhook, the
settlement-file reconcile, submit/status, and hostile input on every new
surface. Real tollgate and tollgate-stub processes on loopback; short
backoff/deadline settings keep it fast.
"""

import csv
import hashlib
import hmac
import io
import json
import os
import re
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

FAST_RETRY = {"max_attempts": 3, "backoff_base_ms": 20, "backoff_min_ms": 0,
              "backoff_cap_ms": 100}
# default_hold_max_ms: no doubling of the hold after a probe refused again
# (a provider answering 503 to everything is how these tests make work fail fast)
FAST_EXIT = {"starts_per_second": 50, "default_hold_ms": 20, "default_hold_max_ms": 20}
SECRET = "whsec-test-0123456789"

# ---- a strict parser of the Prometheus text format (0.0.4) -------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*"'
_SAMPLE = re.compile(r"^(%s)(\{(?:%s)(?:,(?:%s))*\})? (\S+)$" % (_NAME, _LABEL, _LABEL))
_VALUE = re.compile(r"^(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|[+-]Inf|NaN)$")


def parse_prometheus(text):
    """Returns {family: {"type", "help", "samples": [(name, labels, value)]}}; raises
    AssertionError on anything the format does not allow."""
    assert text.endswith("\n"), "must end with a newline"
    fams, current = {}, None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        assert line == line.strip() and line, "line %d: blank or padded" % n
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert re.fullmatch(_NAME, name), line
            assert name not in fams, "line %d: family %s twice" % (n, name)
            fams[name] = {"help": line.split(" ", 3)[3], "type": None, "samples": []}
            current = name
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ")
            assert name == current and fams[name]["type"] is None, line
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            fams[name]["type"] = typ
            continue
        assert not line.startswith("#"), "line %d: unknown comment" % n
        m = _SAMPLE.match(line)
        assert m, "line %d: not a sample: %r" % (n, line)
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        assert _VALUE.match(value), "line %d: bad value %r" % (n, value)
        fam = fams[current]
        base = current
        if fam["type"] == "histogram":
            assert name in (base + "_bucket", base + "_sum", base + "_count"), line
        else:
            assert name == base, "line %d: %s outside its family %s" % (n, name, base)
        lab = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels))
        fam["samples"].append((name, lab, float(value)))
    for name, fam in fams.items():
        assert fam["type"], "%s has no TYPE" % name
        if fam["type"] == "counter":
            assert all(v >= 0 for _, _, v in fam["samples"]), name
        if fam["type"] == "histogram":
            # one histogram per label set (le aside), each complete on its own
            series = {}
            for sname, lab, v in fam["samples"]:
                key = tuple(sorted((k, x) for k, x in lab.items() if k != "le"))
                series.setdefault(key, []).append((sname, lab, v))
            for key, samples in series.items():
                buckets = [(s[1]["le"], s[2]) for s in samples if s[0].endswith("_bucket")]
                assert buckets and buckets[-1][0] == "+Inf", (name, key)
                vals = [v for _, v in buckets]
                assert vals == sorted(vals), "%s %s buckets not cumulative" % (name, key)
                les = [float(le) for le, _ in buckets]
                assert les == sorted(les), (name, key)
                count = [s[2] for s in samples if s[0] == name + "_count"]
                assert count == [vals[-1]], "%s %s: +Inf bucket != _count" % (name, key)
                assert [s[0] for s in samples].count(name + "_sum") == 1, (name, key)
    return fams


def metric(fams, name, **labels):
    """The value of one sample (histogram _bucket/_sum/_count included)."""
    for fam in fams.values():
        for s in fam["samples"]:
            if s[0] == name and all(s[1].get(k) == v for k, v in labels.items()):
                return s[2]
    raise KeyError((name, labels))


def cli(tg, *args, stdin=None):
    p = subprocess.run([tgtest.binary("tollgate")] + list(args), input=stdin,
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def sign(body):
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


class OperateTest(unittest.TestCase):
    def api(self, tg, method, path, body=None, token=True, headers=None):
        h = dict(tg.headers() if token else {})
        h.update(headers or {})
        return tgtest.http_json(method, tg.api + path, body, h)

    def test_503_to_manual_resend_resolve_and_metrics(self):
        # a 503 executes nothing and is by default not counted against the
        # attempts: counted here (retry.count_limited), to run them out
        with tgtest.start_stub("--mode", "unavailable", "--retry-after", "none") as stub, \
                Tollgate(stub.url, retry=dict(FAST_RETRY, count_limited="true"),
                         exit=FAST_EXIT) as tg:
            tg.start("serve")
            ops = ["m-%02d" % i for i in range(10)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            final = tg.wait_final(ops, timeout=40)
            for op in ops:
                self.assertEqual(final[op]["state"], "manual", final[op])
                self.assertEqual(final[op]["reason"], "attempts_exhausted")
                self.assertEqual(len(final[op]["attempts"]), 3)
                self.assertTrue(all(c["http_status"] == 503 for c in final[op]["attempts"]))
            st, _, body = self.api(tg, "GET", "/v1/manual")
            self.assertEqual(st, 200)
            self.assertEqual([i["operation_id"] for i in body["items"]], ops)  # oldest first
            self.assertTrue(all(i["audit"] for i in body["items"]))
            st, _, body = self.api(tg, "GET", "/v1/manual?reason=deadline")
            self.assertEqual((st, body["count"]), (200, 0))
            st, _, body = self.api(tg, "GET", "/v1/manual?limit=4")
            self.assertEqual(body["count"], 4)
            st, _, body2 = self.api(tg, "GET", "/v1/manual?limit=4&after=%d" % body["next_after"])
            self.assertEqual(body2["items"][0]["operation_id"], "m-04")
            rc, out, err = cli(tg, "manual", "list", "--config", tg.config)
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["count"], 10)
            # one option layer: --config=F, -c F, and options before the
            # subcommand all read the same store
            for argv in (("manual", "list", "--config=" + tg.config),
                         ("manual", "--config", tg.config, "list"),
                         ("manual", "list", "-c", tg.config)):
                rc2, out2, err2 = cli(tg, *argv)
                self.assertEqual((rc2, out2), (0, out), (argv, err2))

            # /metrics while in trouble: parses, and says what happened
            st, hdr, raw = tgtest.http_request("GET", tg.api + "/metrics")
            self.assertEqual(st, 200)
            self.assertTrue(hdr["content-type"].startswith("text/plain; version=0.0.4"))
            fams = parse_prometheus(raw.decode())
            self.assertEqual(metric(fams, "tollgate_operations", state="manual"), 10)
            self.assertEqual(metric(fams, "tollgate_calls_total"), 30)
            self.assertEqual(metric(fams, "tollgate_role", role="owner"), 1)
            tgtest.wait_until(lambda: metric(parse_prometheus(tgtest.http_request(
                "GET", tg.api + "/metrics")[2].decode()),
                "tollgate_calls_started_total", kind="retry") == 20, timeout=5,
                what="retries counted")
            fams = parse_prometheus(tgtest.http_request("GET", tg.api + "/metrics")[2].decode())
            self.assertEqual(metric(fams, "tollgate_operations_closed_total", outcome="manual"), 10)
            self.assertEqual(metric(fams, "tollgate_operation_attempts_count"), 10)
            self.assertEqual(metric(fams, "tollgate_operation_attempts_bucket", le="3"), 10)
            self.assertGreaterEqual(metric(fams, "tollgate_exit_holds_total"), 1)
            self.assertEqual(metric(fams, "tollgate_call_latency_seconds_count"), 30)
            # the waits between attempts, by reason (seed 002: retry counts,
            # wait times, outcomes): 10 x 2 re-sends after a backoff, and the
            # 503s held every start (a hold of default_hold_ms each)
            self.assertEqual(metric(fams, "tollgate_retry_wait_seconds_count", reason="backoff"),
                             20)
            self.assertEqual(  # backoff_cap_ms = 100: every wait in the first buckets
                metric(fams, "tollgate_retry_wait_seconds_bucket", reason="backoff", le="0.1"), 20)
            self.assertEqual(fams["tollgate_retry_wait_seconds"]["type"], "histogram")
            self.assertGreaterEqual(
                metric(fams, "tollgate_retry_wait_seconds_count", reason="hold"), 1)
            self.assertAlmostEqual(
                metric(fams, "tollgate_retry_wait_seconds_sum", reason="hold"),
                0.02 * metric(fams, "tollgate_retry_wait_seconds_count", reason="hold"), places=6)
            self.assertEqual(metric(fams, "tollgate_retry_wait_seconds_count", reason="query"), 0)
            for fam in ("tollgate_in_flight", "tollgate_oldest_open_age_seconds",
                        "tollgate_owner_epoch", "tollgate_slot_lateness_seconds",
                        "tollgate_exit_held"):
                self.assertIn(fam, fams)

            # the provider recovers: an operator re-send goes through the exit
            stub.set_mode(mode="fast")
            st, _, body = self.api(tg, "POST", "/v1/manual/m-00/resend",
                                   {"operator": "alice", "reason": "provider back"})
            self.assertEqual(st, 202, body)
            rc, out, err = cli(tg, "manual", "resend", "m-01", "--config", tg.config,
                               "--operator", "bob", "--reason", "provider back")
            self.assertEqual(rc, 0, err)
            done = tg.wait_final(["m-00", "m-01"], timeout=20)
            for op, who in (("m-00", "alice"), ("m-01", "bob")):
                rec = done[op]
                self.assertEqual(rec["state"], "succeeded", rec)
                last = rec["attempts"][-1]
                self.assertEqual((last["kind"], last["attempt"]), ("manual", 4))
                self.assertTrue(any(a["action"] == "resend" and a["operator"] == who
                                    for a in rec["audit"]), rec["audit"])
                keys = {a["idempotency_key"] for a in stub.arrivals()
                        if a.get("idempotency_key") and a["idempotency_key"] == op}
                self.assertEqual(keys, {op})  # same key every time
                self.assertEqual(stub.executions(op), 1)
            # resolve by hand, via API and CLI; a second action is refused
            st, _, body = self.api(tg, "POST", "/v1/manual/m-02/resolve",
                                   {"operator": "alice", "reason": "refunded by phone",
                                    "outcome": "failed"})
            self.assertEqual((st, body["state"]), (200, "rejected"), body)
            rc, out, err = cli(tg, "manual", "resolve", "m-03", "--config", tg.config,
                               "--operator", "bob", "--reason", "seen in portal",
                               "--outcome", "succeeded")
            self.assertEqual((rc, json.loads(out)["state"]), (0, "succeeded"), err)
            st, _, body = self.api(tg, "POST", "/v1/manual/m-02/resend",
                                   {"operator": "alice", "reason": "again"})
            self.assertEqual((st, body["error"]["code"]), (409, "not_manual"))
            rc, _, err = cli(tg, "manual", "resolve", "m-02", "--config", tg.config,
                             "--operator", "x", "--reason", "y", "--outcome", "succeeded")
            self.assertEqual(rc, 1)
            rc, out, _ = cli(tg, "manual", "show", "m-02", "--config", tg.config)
            self.assertEqual([a["action"] for a in json.loads(out)["audit"]][-1], "resolve")
            st, _, body = self.api(tg, "GET", "/v1/manual")
            self.assertEqual(body["count"], 6)

            # the call log from the CLI, both formats
            rc, out, err = cli(tg, "calls", "--config", tg.config, "--since", "0")
            self.assertEqual(rc, 0, err)
            lines = [json.loads(line) for line in out.splitlines()]
            self.assertEqual(len(lines), 32)
            rc, out, err = cli(tg, "calls", "--config", tg.config, "--since", "30",
                               "--format", "csv")
            rows = list(csv.DictReader(io.StringIO(out)))
            self.assertEqual([r["kind"] for r in rows], ["manual", "manual"])
            self.assertEqual(cli(tg, "calls", "--config", tg.config, "--format", "xml")[0], 2)
            self.assertEqual(cli(tg, "calls", "--config", tg.config, "--since", "-1")[0], 2)

            # stats: same figures plus the per-second series
            def stats_caught_up():
                st, _, s = self.api(tg, "GET", "/v1/stats?minutes=1")
                self.assertEqual(st, 200)
                done = sum(p["starts"] for p in s["series"]["points"]) == 32
                return s if done and len(s["series"]["points"]) >= 2 else None
            s = tgtest.wait_until(stats_caught_up, timeout=5, what="series caught up")
            self.assertEqual(s["backlog"]["manual"], 6)
            self.assertEqual(s["calls_total"], 32)
            self.assertEqual(s["role"], "owner")
            self.assertTrue(s["exit"]["owner_alive"])
            for p in s["series"]["points"]:
                self.assertEqual(set(p), {"at", "starts", "call_ends", "op_closes",
                                          "in_flight", "oldest_age_s", "held"})

    def test_admission_refuses_then_accepts(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, exit={"starts_per_second": 2},
                         admission={"max_wait_s": 3, "window_s": 10}) as tg:
            tg.start("serve")
            accepted, refused = [], None
            for i in range(40):
                op = "adm-%02d" % i
                st, hdr, body = tg.submit(op)
                if st == 202:
                    accepted.append(op)
                    continue
                self.assertEqual(st, 503, body)
                refused = (op, hdr, body)
                break
            self.assertIsNotNone(refused, "never refused")
            op, hdr, body = refused
            self.assertGreaterEqual(len(accepted), 3)
            self.assertLessEqual(len(accepted), 8)
            self.assertEqual(body["error"]["code"], "over_capacity")
            self.assertTrue(body["error"]["retryable"])
            self.assertIn("/v1/stats", body["error"]["message"])
            self.assertGreaterEqual(int(hdr["retry-after"]), 1)
            self.assertEqual(tg.status(op)[0], 404)  # nothing stored
            # an already accepted refund is never refused
            self.assertEqual(tg.submit(accepted[0])[0], 200)
            rc, out, err = cli(tg, "submit", "--config", tg.config, "--operation-id", op,
                               "--payment-id", "pay_1", "--amount", "1500", "--currency", "TWD")
            self.assertEqual(rc, 3, (out, err))
            tg.wait_final(accepted, timeout=30)
            # The API re-reads its admission figures at most once a second;
            # /v1/stats shows those same figures: wait until they have seen
            # the drained backlog and would admit.
            def figures_drained():
                st, _, s = self.api(tg, "GET", "/v1/stats")
                self.assertEqual(st, 200, s)
                return s["admission"]["backlog"] == 0 and s["admission"]["would_admit"]
            tgtest.wait_until(figures_drained, timeout=10,
                              what="admission figures show the drained backlog")
            rc, out, err = cli(tg, "submit", "--config", tg.config, "--operation-id", op,
                               "--payment-id", "pay_1", "--amount", "1500", "--currency", "TWD")
            self.assertEqual(rc, 0, (out, err))
            self.assertEqual(json.loads(out)["state"], "pending")
            rc, out, err = cli(tg, "status", op, "--config", tg.config)
            self.assertEqual((rc, json.loads(out)["operation_id"]), (0, op), err)
            self.assertEqual(cli(tg, "status", "../etc", "--config", tg.config)[0], 2)
            self.assertEqual(cli(tg, "status", "nope", "--config", tg.config)[0], 1)
            self.assertEqual(cli(tg, "submit", "--config", tg.config, "--operation-id", "x",
                                 "--payment-id", "p", "--amount", "1e3",
                                 "--currency", "TWD")[0], 2)

    def test_webhook_and_settlement_file(self):
        with tgtest.start_stub("--mode", "drop", "--query-mode", "unavailable",
                               "--retry-after", "none") as stub:
            secret_file = os.path.join(stub.dir, "secret")
            with open(secret_file, "w") as f:
                f.write(SECRET + "\n")
            os.chmod(secret_file, 0o600)
            with Tollgate(stub.url, retry=dict(FAST_RETRY, query_interval_ms=200),
                          exit=FAST_EXIT, provider={"webhook_secret_file": secret_file}) as tg:
                tg.start("api")
                exit_ = tg.start("dispatch", wait_api=False)
                ops = ["wh-a", "wh-b", "wh-c", "wh-d", "wh-e"]  # the file misses wh-e
                for op in ops:
                    self.assertEqual(tg.submit(op)[0], 202)
                tg.wait_final(ops, timeout=20, states=("unknown", "retry_wait"))
                # The exit has asked the provider about every one and been
                # refused (query mode unavailable): from here only the
                # webhook or the settlement file can tell it the outcome.
                def asked_about_all():
                    asked = {a["path"].rsplit("/", 1)[-1] for a in stub.arrivals()
                             if a["method"] == "GET" and a["answer"] == 503}
                    return set(ops) <= asked
                tgtest.wait_until(asked_about_all, timeout=10, what="a query for each")
                # The exit stops (it gives back what it claimed ahead): none
                # of them is in flight while the webhook and the file speak.
                exit_.send_signal(signal.SIGTERM)
                self.assertEqual(exit_.popen.wait(15), 0)
                for op in ops:
                    self.assertIn(tg.status(op)[2]["state"], ("unknown", "retry_wait"), op)
                ev = json.dumps({"operation_id": "wh-a", "status": "failed",
                                 "refund_id": "re_forged"}).encode()
                forged = [None, "sha256=" + "0" * 64, "sha256=zz", "md5=abc",
                          sign(ev + b" "), sign(ev)[:-2], "sha256=" + hmac.new(
                              b"wrong", ev, hashlib.sha256).hexdigest()]
                for sig in forged:
                    h = {"Content-Type": "application/json"}
                    if sig:
                        h["X-Signature"] = sig
                    st, _, body = tgtest.http_json("POST", tg.api + "/v1/provider-events",
                                                   ev, h)
                    self.assertEqual(st, 401, (sig, body))
                before = tg.status("wh-a")[2]
                self.assertIn(before["state"], ("unknown", "retry_wait"))
                self.assertFalse(any(a["action"] == "external" for a in before["audit"]))
                # the real event
                good = json.dumps({"operation_id": "wh-a", "status": "succeeded",
                                   "refund_id": "re_1"}).encode()
                for _ in range(2):  # a replay changes nothing
                    st, _, body = tgtest.http_json("POST", tg.api + "/v1/provider-events",
                                                   good, {"X-Signature": sign(good)})
                    self.assertEqual((st, body["state"]), (200, "succeeded"), body)
                rec = tg.status("wh-a")[2]
                self.assertEqual(rec["refund_id"], "re_1")
                self.assertEqual(sum(a["action"] == "external" for a in rec["audit"]), 1)
                flip = json.dumps({"operation_id": "wh-a", "status": "failed"}).encode()
                st, _, _ = tgtest.http_json("POST", tg.api + "/v1/provider-events", flip,
                                            {"X-Signature": sign(flip)})
                self.assertEqual(st, 409)
                for raw, want in ((b"{", 400), (b'{"operation_id":"wh-b"}', 422),
                                  (b'{"operation_id":"../x","status":"succeeded"}', 422),
                                  (b'{"operation_id":"nope","status":"succeeded"}', 404),
                                  (b'{"operation_id":"wh-b","status":"succeeded",'
                                   b'"operation_id":"wh-c"}', 400),
                                  (b'{"operation_id":"wh-b","status":"paid"}', 422),
                                  (b"\xff\xfe", 400), (b"x" * 20000, 413)):
                    st, _, _ = tgtest.http_json("POST", tg.api + "/v1/provider-events", raw,
                                                {"X-Signature": sign(raw)})
                    self.assertEqual(st, want, raw[:60])
                self.assertEqual(tg.status("wh-b")[2]["state"] in ("unknown", "retry_wait"),
                                 True)

                # the settlement file: settles b and c, reports the rest
                path = os.path.join(tg.dir, "settle.csv")
                with open(path, "w") as f:
                    f.write("date,operation_id,status,refund_id\n"
                            "2024-01-01,wh-b,succeeded,re_b\n"
                            "2024-01-01,wh-c,failed,\n"
                            "2024-01-01,wh-a,failed,\n"          # mismatch
                            "2024-01-01,ghost,succeeded,re_x\n"  # no such operation
                            '2024-01-01,"bad"quote,succeeded,\n'
                            "2024-01-01,wh-d,maybe,\n")
                rc, out, err = cli(tg, "reconcile", "--config", tg.config, "--file", path,
                                   "--dry-run")
                self.assertEqual(rc, 1, err)
                self.assertEqual(tg.status("wh-b")[2]["state"] in ("unknown", "retry_wait"),
                                 True)
                # Ours the file does not name: only wh-e (wh-b and wh-c would be
                # settled, wh-d's row is invalid but names it, wh-a is final).
                lines = [json.loads(line) for line in out.splitlines()]
                missing = [r for r in lines if r.get("result") == "missing_from_file"]
                self.assertEqual([m["operation_id"] for m in missing], ["wh-e"], out)
                self.assertIn(missing[0]["ours"], ("unknown", "retry_wait", "manual"))
                self.assertGreaterEqual(missing[0]["attempts"], 1)
                self.assertEqual((lines[-1]["missing"], lines[-1]["missing_check"],
                                  lines[-1]["dry_run"]), (1, "complete", True), out)
                rc, out, err = cli(tg, "reconcile", "--config", tg.config, "--file", path,
                                   "--dry-run", "--max-missing", "0")
                self.assertEqual(rc, 1, err)
                lines = [json.loads(line) for line in out.splitlines()]
                self.assertEqual(lines[-1]["missing"], 1)
                self.assertFalse(any(r.get("result") == "missing_from_file" for r in lines))
                self.assertEqual(cli(tg, "reconcile", "--config", tg.config, "--file", path,
                                     "--max-missing", "-1")[0], 2)
                rc, out, err = cli(tg, "reconcile", "--config", tg.config, "--file", path)
                self.assertEqual(rc, 1, err)
                lines = [json.loads(line) for line in out.splitlines()]
                summary = lines[-1]
                self.assertEqual((summary["rows"], summary["settled"], summary["unmatched"],
                                  summary["missing"]), (6, 2, 4, 1), out)
                results = sorted(r["result"] for r in lines[:-1])
                self.assertEqual(results, ["invalid_row", "invalid_row", "mismatch",
                                           "missing_from_file", "no_such_operation"])
                # Once the file names it, nothing is missing.
                with open(path, "a") as f:
                    f.write("2024-01-01,wh-e,succeeded,re_e\n")
                rc, out, err = cli(tg, "reconcile", "--config", tg.config, "--file", path)
                lines = [json.loads(line) for line in out.splitlines()]
                self.assertEqual(lines[-1]["missing"], 0, out)
                self.assertEqual(tg.status("wh-e")[2]["state"], "succeeded")
                self.assertEqual(tg.status("wh-b")[2]["state"], "succeeded")
                self.assertEqual(tg.status("wh-c")[2]["state"], "rejected")
                self.assertEqual(cli(tg, "reconcile", "--config", tg.config, "--file",
                                     "/nonexistent.csv")[0], 2)

    def test_hostile_input_and_auth(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, api={"max_body_bytes": 4096,
                                        "metrics_need_token": "true"}) as tg:
            tg.start("serve")
            # token on every /v1 route, and on /metrics when configured
            for method, path in (("GET", "/v1/manual"), ("GET", "/v1/manual/x"),
                                 ("POST", "/v1/manual/x/resend"), ("GET", "/v1/stats"),
                                 ("GET", "/v1/calls"), ("GET", "/metrics")):
                st, _, body = self.api(tg, method, path, token=False)
                self.assertEqual(st, 401, path)
                self.assertEqual(set(body), {"error", "request_id"})
            self.assertEqual(self.api(tg, "GET", "/metrics")[0], 200)
            # provider events need a configured secret: the route is absent here
            self.assertEqual(self.api(tg, "POST", "/v1/provider-events", {})[0], 404)
            self.assertEqual(tg.submit("h-1")[0], 202)
            tg.wait_final(["h-1"], timeout=10)
            bodies = [
                (b"", 400), (b"{", 400), (b"[]", 400), (b'"x"', 400), (b"\xff\xfe{}", 400),
                (b'{"operator":"a","reason":"b","operator":"c"}', 400),
                (b'{"operator":"a","reason":"b","extra":1}', 422),
                (b'{"operator":1,"reason":"b"}', 422),
                (b'{"operator":"a","reason":99999999999999999999999}', 400),
                (b'{"operator":"a\\u0000b","reason":"b"}', 400),
                (b'{"operator":"a\\nb","reason":"b"}', 422),
                (b'{"operator":"","reason":"b"}', 422),
                (('{"operator":"%s","reason":"b"}' % ("a" * 300)).encode(), 422),
                (b"x" * 5000, 413),
                (b'{"operator":"a","reason":"b"}', 409),  # well-formed: h-1 is not manual
            ]
            for raw, want in bodies:
                st, _, body = tgtest.http_json("POST", tg.api + "/v1/manual/h-1/resend", raw,
                                               tg.headers())
                self.assertEqual(st, want, (raw[:50], body))
                self.assertIn("request_id", body)
                self.assertNotIn("sqlite", json.dumps(body).lower())
            st, _, body = tgtest.http_json("POST", tg.api + "/v1/manual/h-1/resolve",
                                           {"operator": "a", "reason": "b", "outcome": "maybe"},
                                           tg.headers())
            self.assertEqual((st, body["error"]["field"]), (422, "outcome"))
            for path, want in (("/v1/manual/..%2Fetc", 404), ("/v1/manual/a%00b", 404),
                               ("/v1/manual/" + "a" * 200, 404), ("/v1/manual/h-1/x", 404),
                               ("/v1/manual/h-1/resend/x", 404), ("/v1/manual/../v1/calls", 400),
                               ("/v1/manual//h-1", 400), ("/v1/manual?limit=0", 400),
                               ("/v1/manual?limit=99999999999999999999", 400),
                               ("/v1/manual?reason=%00", 400), ("/v1/manual?reason=none", 400),
                               ("/v1/stats?minutes=61", 400), ("/v1/stats?minutes=-1", 400),
                               ("/v1/calls?since=abc", 400), ("/v1/manual/h-1", 200)):
                st, _, _ = self.api(tg, "GET", path)
                self.assertEqual(st, want, path)
            self.assertEqual(self.api(tg, "DELETE", "/v1/manual/h-1")[0], 405)
            self.assertEqual(self.api(tg, "GET", "/v1/manual/h-1/resend")[0], 405)
            self.assertEqual(self.api(tg, "POST", "/metrics")[0], 405)
            try:
                st, _, _ = self.api(tg, "GET", "/v1/stats", headers={"X-Big": "a" * 70000})
                self.assertIn(st, (400, 413, 431))
            except OSError:
                pass  # the server may close the connection instead
            self.assertEqual(self.api(tg, "GET", "/healthz")[0], 200)  # still up
            # CLI: --help everywhere, bad flags name the problem
            for cmd in ("manual", "calls", "reconcile", "submit", "status"):
                rc, out, _ = cli(tg, cmd, "--help")
                self.assertEqual(rc, 0)
                self.assertIn("usage: tollgate " + cmd, out)
                rc, _, err = cli(tg, cmd, "--bogus", "--config", tg.config)
                self.assertEqual(rc, 2)
                self.assertIn("--bogus", err)
            self.assertEqual(cli(tg, "manual", "frob", "--config", tg.config)[0], 2)
            self.assertEqual(cli(tg, "manual", "show", "../x", "--config", tg.config)[0], 2)
            self.assertEqual(cli(tg, "manual", "list", "--config", "/nonexistent")[0], 2)
            # the request log: one JSON line per request, no token in it
            serve = tg.procs[0]
            lines = [json.loads(line) for line in serve.stderr_text().splitlines()
                     if line.startswith("{")]
            reqs = [line for line in lines if line.get("event") == "http_request"]
            self.assertGreater(len(reqs), 20)
            self.assertTrue(all({"request_id", "method", "status"} <= set(r) for r in reqs))
            self.assertNotIn("test-token", serve.stderr_text())


if __name__ == "__main__":
    tgtest.main_unittest()
