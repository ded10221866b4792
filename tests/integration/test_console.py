"""The console in a real browser (issue 15): Debian's chromium, driven by
puppeteer-core (tests/browser/console_driver.js), against a real run —
tollgate serve and tollgate-stub in the seed's incident phases, time-scaled:
fast, slower than the call timeout, 503 (unavailable), executing and
dropping the answer, then recovered.

- the sign-in page answers /ui without a session, and "/" and "/ui/" lead
  there by a redirect (302 to /ui); the timeline renders with
  non-empty series, gains live points, shows the hold band during the 503
  phase, and logs no console error;
- a refund pushed to manual review is resent from the desk: the stub gets a
  POST with the same Idempotency-Key, the operation settles, the audit row
  names the operator;
- a viewer has no resend button and its POST is refused with 403; a POST
  without the CSRF token is refused;
- events and their deliveries ([notify] at a port nobody listens on, so
  every event parks): an operation's page lists its events with where each
  delivery stands; the failed deliveries list shows a parked one, and its
  re-deliver button, clicked, makes it due again: a receiver started since
  gets it (parked events are never tried again by themselves), and the
  account's audit trail names the signed-in operator; a viewer has no such
  button;
- screenshots of every page go to <build>/console-screenshots.

Skipped (77) with a message only when chromium or node is absent, or when
TG_SKIP_BROWSER_TESTS is set (scripts/test.sh sets it for the sanitizer
pass: the browser adds nothing to what ASan checks in the daemon).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgdaemon  # noqa: E402
import tgtest  # noqa: E402
from test_notify import Receiver, secret_file  # noqa: E402

CHROMIUM = os.environ.get("TG_CHROMIUM", "/usr/bin/chromium")
OPERATOR_TOKEN = "olga-console-token-1"
VIEWER_TOKEN = "vera-console-token-2"
# The seed's incident (fast, slow past the 3 s timeout, 503, drop, recovered),
# at 0.3 of its length: about 33 s.
TIMELINE = "fast 20s; slow:3500 30s; unavailable 30s; drop 20s; fast"
SCALE = "0.3"


def skip_reason():
    if os.environ.get("TG_SKIP_BROWSER_TESTS"):
        return ("TG_SKIP_BROWSER_TESTS is set (scripts/test.sh sets it for the sanitizer "
                "pass; the Release pass runs the browser tests)")
    if not os.access(CHROMIUM, os.X_OK):
        return "chromium is not installed (%s): run scripts/install-deps.sh" % CHROMIUM
    if not shutil.which("node"):
        return "node is not installed: run scripts/install-deps.sh"
    return None


class ConsoleBrowserTest(unittest.TestCase):
    def setUp(self):
        reason = skip_reason()
        if reason:
            print("SKIP: " + reason, file=sys.stderr)
            self.skipTest(reason)
        self.web = os.path.join(tgtest.source_dir(), "web")
        if not os.path.isdir(os.path.join(self.web, "node_modules", "puppeteer-core")):
            self.fail("web/node_modules/puppeteer-core is missing: run scripts/install-deps.sh "
                      "(npm ci in web/)")
        self.shots = os.path.join(tgtest.build_dir(), "console-screenshots")
        os.makedirs(self.shots, exist_ok=True)

    def driver(self, step, cfg, timeout=150):
        path = os.path.join(self.tmp, "driver-%s.json" % step)
        with open(path, "w") as f:
            json.dump(cfg, f)
        p = subprocess.run(["node", os.path.join(tgtest.source_dir(), "tests", "browser",
                                                 "console_driver.js"), step, path],
                           capture_output=True, text=True, timeout=timeout)
        self.assertEqual(p.returncode, 0, "browser step %s failed:\n%s\n%s"
                         % (step, p.stdout, p.stderr))
        return json.loads(p.stdout.strip().splitlines()[-1])

    def test_console_in_a_real_browser(self):
        self.tmp = tgtest.scratch_dir("tgconsole-")
        users = os.path.join(self.tmp, "users")
        with open(users, "w") as f:
            f.write("# console users of the browser test\n")
            f.write("olga operator sha256:%s\n" % hashlib.sha256(OPERATOR_TOKEN.encode()).hexdigest())
            f.write("vera viewer sha256:%s\n" % hashlib.sha256(VIEWER_TOKEN.encode()).hexdigest())
        stub = tgtest.start_stub("--timeline", TIMELINE, "--time-scale", SCALE,
                                 "--query-mode", "fast")
        self.addCleanup(stub.close)
        # the caller's endpoint: nobody listens there until the re-delivery
        # below, so every event parks after a second of failures
        hook_port = tgtest.free_port()
        hook_secret = secret_file(self.tmp, "console-notify-secret-0123456789")
        tg = tgdaemon.Tollgate(stub.url, ui={"users_file": users},
                               # four-eyes above 5,000.00 (minor units): the
                               # desk's refunds stay below it, desk-big above
                               manual={"approval_above": 500000},
                               notify={"url": "http://127.0.0.1:%d/" % hook_port,
                                       "secret_file": hook_secret, "give_up_s": 1,
                                       "backoff_base_ms": 100, "backoff_cap_ms": 300,
                                       "timeout_ms": 1000},
                               # count_limited: the timeline's 503s run the
                               # desk's refunds out of attempts (by default a
                               # 503 is not counted)
                               retry={"backoff_base_ms": 300, "backoff_min_ms": 100,
                                      "backoff_cap_ms": 600, "query_interval_ms": 500,
                                      "count_limited": "true"},
                               # and the hold after a refused probe does not
                               # double (by default it does)
                               exit={"default_hold_max_ms": 1000},
                               log={"level": "warn"})
        self.addCleanup(tg.close)
        tg.start("serve")

        # /ui answers the console (not a build without it)
        status, _, body = tgtest.http_request("GET", tg.api + "/ui")
        if status == 404 and b"console_not_built" in body:
            self.skipTest("this tollgate was built with -DTG_CONSOLE=OFF")
        self.assertEqual(status, 200)
        self.assertIn(b"signin-form", body)  # no session: the sign-in page

        # the doors people type lead there, through the real HTTP layer (which
        # calls "/ui/" an empty segment): a redirect, never a JSON error
        for door in ("/", "/ui/", "/ui/?from=bookmark"):
            status, headers, body = tgtest.http_request("GET", tg.api + door)
            self.assertEqual((status, headers.get("location")), (302, "/ui"), (door, body))
            self.assertTrue(headers.get("content-type", "").startswith("text/plain"), door)
            status, _, body = tgtest.http_request("GET", tg.api + headers["location"])
            self.assertEqual(status, 200, door)
            self.assertIn(b"signin-form", body, door)
        # what is not a door keeps its answer
        status, _, body = tgtest.http_request("GET", tg.api + "/ui//")
        self.assertEqual(status, 400)
        self.assertIn(b"empty segment", body)
        status, _, body = tgtest.http_request("POST", tg.api + "/ui/", body="")
        self.assertEqual(status, 400)

        # refunds at 4/s through the whole incident
        stop = threading.Event()
        fed = []

        def feed():
            n = 0
            while not stop.is_set() and n < 400:
                st, _, _ = tg.submit("inc-%04d" % n)
                if st in (200, 202):
                    fed.append("inc-%04d" % n)
                n += 1
                stop.wait(0.25)
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        self.addCleanup(stop.set)

        cfg = {"url": tg.api, "stub": stub.url, "web": self.web, "chromium": CHROMIUM,
               "shots": self.shots, "operator_token": OPERATOR_TOKEN,
               "viewer_token": VIEWER_TOKEN, "hold_wait_ms": 60000}
        t0 = time.monotonic()
        out = self.driver("timeline", cfg)
        self.assertTrue(out["signin_shown"])
        self.assertEqual(out["timeline_errors"], [], "console errors on the timeline")
        self.assertEqual(out["timeline_failed"], [], "failed requests on the timeline")
        self.assertEqual(out["errors"], [], "console errors on the other pages")
        self.assertEqual(out["canvases"], 4)
        series = out["series"]
        self.assertGreater(series["points"], 10)
        self.assertGreater(series["starts_nonzero"], 0)
        self.assertGreater(series["closes_nonzero"], 0)
        self.assertGreater(series["in_flight_nonzero"], 0)
        self.assertGreater(series["held"], 0)
        self.assertGreaterEqual(out["band_hold"], 1)
        # the band showed while the provider still answered 503
        self.assertEqual(out["mode_when_band"], "unavailable")
        self.assertLess(out["live_lag_s"], 3.0)
        self.assertEqual(out["status_owner_alive"], "1")
        # the words come from the server (src/core/names.h): the Operations
        # tabs are its states, cancelled included (issue 24), every word has
        # a translation in both languages, and "Backlog now" shows a label
        # for each state it counts, never a raw key such as state.cancelled
        vocab = out["vocabularies"]
        self.assertEqual(vocab["states"], ["pending", "in_flight", "retry_wait", "unknown",
                                           "succeeded", "rejected", "manual", "cancelled"])
        self.assertEqual(out["state_tabs"], vocab["states"])
        self.assertEqual(out["missing_translations"], [])
        backlog = dict(out["backlog_labels"])
        self.assertIn("cancelled", backlog)
        self.assertEqual(backlog["cancelled"], "cancelled")
        for state, label in out["backlog_labels"]:
            self.assertNotIn("state.", label, (state, label))
        self.assertGreater(out["succeeded_rows"], 0)
        self.assertGreaterEqual(out["op_calls"], 1)
        self.assertEqual(out["zh_nav"], "人工審核")
        stop.set()
        feeder.join(5)

        # The incident's refunds drain (the stub recovers after the drop
        # phase); those it pushed to manual review are resolved through the
        # API, so that the desk holds only the two below.
        done = tg.wait_final(fed, timeout=120)
        for op, rec in sorted(done.items()):
            if rec["state"] == "manual":
                st, _, body = tgtest.http_json(
                    "POST", "%s/v1/manual/%s/resolve" % (tg.api, op),
                    {"operator": "test-setup", "reason": "incident cleanup", "outcome": "failed"},
                    tg.headers())
                self.assertEqual(st, 200, body)

        # two refunds pushed to manual review: the provider answers 503 to
        # every POST until their attempts run out
        stub.set_mode(mode="unavailable")
        for op in ("desk-resend", "desk-viewer"):
            st, _, body = tg.submit(op, amount=123456, currency="TWD")
            self.assertIn(st, (200, 202), body)
        got = tg.wait_final(["desk-resend", "desk-viewer"], timeout=60, states=("manual",))
        self.assertEqual(got["desk-resend"]["reason"], "attempts_exhausted")
        stub.set_mode(mode="fast")
        posts_before = [a for a in stub.arrivals() if a.get("idempotency_key") == "desk-resend"
                        and a.get("method") == "POST"]
        self.assertEqual(len(posts_before), 3)

        cfg.update({"resend_op": "desk-resend", "viewer_op": "desk-viewer"})
        out = self.driver("desk", cfg)
        self.assertFalse(out["viewer_note"])
        self.assertIn("TWD", out["amount_text"])
        self.assertIn("1,234.56", out["amount_text"])  # minor units: 123456 -> 1,234.56
        self.assertEqual(out["errors"], [])
        self.assertEqual(out["no_csrf_status"], 403)

        # the resend went through the exit with the same key, and settled
        final = tg.wait_final(["desk-resend"], timeout=30, states=("succeeded",))
        posts = [a for a in stub.arrivals() if a.get("idempotency_key") == "desk-resend"
                 and a.get("method") == "POST"]
        self.assertEqual(len(posts), 4, posts)
        self.assertEqual({a["idempotency_key"] for a in posts}, {"desk-resend"})
        self.assertEqual(stub.executions("desk-resend"), 1)
        resend_rows = [a for a in final["desk-resend"]["audit"] if a["action"] == "resend"]
        self.assertEqual(len(resend_rows), 1)
        self.assertEqual(resend_rows[0]["operator"], "olga")
        self.assertEqual(resend_rows[0]["reason"], "provider confirmed nothing was refunded")
        self.assertEqual(final["desk-resend"]["attempts"][-1]["kind"], "manual")

        # events and their deliveries: desk-viewer's move to manual parked
        def parked_event():
            st, _, body = tgtest.http_json(
                "GET", tg.api + "/v1/events?delivery=parked&limit=1000&after=%d" % last_seen[0],
                headers=tg.headers())
            self.assertEqual(st, 200, body)
            for e in body["events"]:
                last_seen[0] = max(last_seen[0], e["id"])
                if e["operation_id"] == "desk-viewer":
                    found.append(e)
            return found
        last_seen, found = [0], []
        tgtest.wait_until(parked_event, timeout=30, what="desk-viewer's event parked")
        ev = found[0]
        self.assertEqual(ev["state"], "manual")
        self.assertGreater(ev["attempts"], 0)
        with Receiver(hook_port, hook_secret) as rx:
            time.sleep(0.5)
            self.assertNotIn(ev["id"], [x["id"] for x in rx.lines()])  # parked stays parked
            cfg.update({"event_op": "desk-viewer", "event_id": ev["id"]})
            out = self.driver("deliveries", cfg)
            self.assertEqual(out["errors"], [])
            by_id = {e["id"]: e for e in out["op_events"]}
            self.assertIn(ev["id"], by_id)
            self.assertEqual(by_id[ev["id"]]["delivery"], "parked")
            self.assertEqual(by_id[ev["id"]]["delivery_text"], "parked")
            self.assertEqual(by_id[ev["id"]]["attempts"], ev["attempts"])
            self.assertNotEqual(by_id[ev["id"]]["last_error"], "—")
            self.assertEqual(out["listed_delivery"], "parked")
            self.assertEqual(out["after_delivery"], "due")
            self.assertEqual(out["after_attempts"], 0)
            self.assertIn(str(ev["id"]), out["toast"])
            self.assertEqual(out["zh_nav"], "通知送達")
            # the click reached the store: the receiver gets that event
            tgtest.wait_until(lambda: ev["id"] in [x["id"] for x in rx.ok()], timeout=15,
                              what="the re-delivered event at the receiver")
        st, _, body = tgtest.http_json("GET", tg.api + "/v1/accounts/default/audit",
                                       headers=tg.headers())
        self.assertEqual(st, 200, body)
        rows = [a for a in body["audit"] if a["action"] == "event_redeliver"]
        self.assertEqual(len(rows), 1, body)
        self.assertEqual(rows[0]["by"], "olga")
        self.assertEqual(rows[0]["detail"]["event_id"], ev["id"])
        self.assertEqual(rows[0]["detail"]["operation_id"], "desk-viewer")
        self.assertEqual(rows[0]["detail"]["delivery"], "parked")

        # four-eyes: a refund above manual.approval_above in manual review;
        # alice (through the API) asks to re-send it, nothing is sent, and
        # olga's approve button in the console carries it out
        stub.set_mode(mode="unavailable")
        st, _, body = tg.submit("desk-big", amount=900000, currency="TWD")
        self.assertIn(st, (200, 202), body)
        tg.wait_final(["desk-big"], timeout=60, states=("manual",))
        stub.set_mode(mode="fast")
        st, _, body = tgtest.http_json(
            "POST", tg.api + "/v1/manual/desk-big/resend",
            {"operator": "alice", "reason": "provider confirmed nothing was refunded"},
            tg.headers())
        self.assertEqual((st, body["approval"]["status"]), (202, "requested"), body)
        time.sleep(0.5)
        self.assertEqual(tg.status("desk-big")[2]["state"], "manual")
        big_posts = lambda: [a for a in stub.arrivals()  # noqa: E731
                             if a.get("idempotency_key") == "desk-big" and a["method"] == "POST"]
        self.assertEqual(len(big_posts()), 3)
        cfg.update({"approve_op": "desk-big"})
        out = self.driver("approve", cfg)
        self.assertEqual(out["errors"], [])
        self.assertIn("desk-big", out["toast"])
        final = tg.wait_final(["desk-big"], timeout=30, states=("succeeded",))
        self.assertEqual(len(big_posts()), 4)
        self.assertEqual(stub.executions("desk-big"), 1)
        self.assertEqual([(a["action"], a["operator"]) for a in final["desk-big"]["audit"]
                          if a["action"] in ("request_resend", "approve", "resend")],
                         [("request_resend", "alice"), ("approve", "olga"), ("resend", "alice")])

        # a viewer: no button, and the POST refused
        out = self.driver("viewer", cfg)
        self.assertTrue(out["signin_shown"])
        self.assertEqual(out["role"], "viewer")
        self.assertEqual(out["resend_buttons"], 0)
        self.assertEqual(out["resolve_buttons"], 0)
        self.assertEqual(out["redeliver_buttons"], 0)
        self.assertTrue(out["viewer_note"])
        self.assertEqual(out["post_status"], 403)
        self.assertFalse(out["cookie_visible"], "the session cookie must be HttpOnly")
        self.assertNotIn("token", out["local_storage"].lower())
        st, _, body = tg.status("desk-viewer")
        self.assertEqual(body["state"], "manual")  # neither the viewer nor the CSRF-less POST
        self.assertEqual([a for a in body["audit"] if a["action"] != "event"], [], body["audit"])

        # the same timeline from the store alone, as one file (tollgate report)
        page = os.path.join(self.tmp, "timeline.html")
        for bad in (["--from", "yesterday"], ["--from", "-10m", "--to", "-20m"],
                    ["--from", "-10m", "--arrivals", page]):
            p = subprocess.run([tgtest.binary("tollgate"), "report", "--config", tg.config,
                                "--out", page] + bad, capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, (bad, p.stdout, p.stderr))
            self.assertIn("tollgate report: ", p.stderr)
        p = subprocess.run([tgtest.binary("tollgate"), "report", "--config", tg.config,
                            "--from", "-10m", "--out", page], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("from the store", p.stdout)
        with open(page) as f:
            html = f.read()
        self.assertNotIn("src=", html)  # everything inside: nothing fetched
        self.assertNotIn("href=", html)
        cfg["report"] = page
        out = self.driver("report", cfg)
        self.assertEqual(out["errors"], [])
        self.assertEqual([u for u in out["requests"] if not u.startswith("file://")], [])
        self.assertEqual(out["canvases"], 4)
        self.assertGreater(out["points"], 10)
        self.assertGreaterEqual(out["band_hold"], 1)

        for name in ("report", "signin-operator", "timeline", "timeline-zh-TW", "status", "operations",
                     "operation", "manual-desk", "manual-desk-resent", "manual-desk-viewer",
                     "operation-events", "deliveries", "deliveries-redelivered", "manual-desk-approved",
                     "timeline-whole-run"):
            self.assertTrue(os.path.getsize(os.path.join(self.shots, name + ".png")) > 5000, name)
        print("browser steps took %.1f s; screenshots in %s" % (time.monotonic() - t0, self.shots),
              file=sys.stderr)

    def test_accounts_in_a_real_browser(self):
        """Two accounts (issue 26 §5, §6): the switcher, each account's status
        and controls, an admin's pause clicked for real and in force at the
        provider's door, an operator without admin refused."""
        self.tmp = tgtest.scratch_dir("tgconsole-acct-")
        users = os.path.join(self.tmp, "users")
        with open(users, "w") as f:
            f.write("olga operator sha256:%s\n" % hashlib.sha256(OPERATOR_TOKEN.encode()).hexdigest())
        stub = tgtest.start_stub("--mode", "fast")
        self.addCleanup(stub.close)
        tg = tgdaemon.Tollgate(stub.url, ui={"users_file": users}, log={"level": "warn"},
                               **{"account.a": {"exit.starts_per_second": 5},
                                  "account.b": {"exit.starts_per_second": 2}})
        self.addCleanup(tg.close)
        tg.start("serve")
        status, _, body = tgtest.http_request("GET", tg.api + "/ui")
        if status == 404 and b"console_not_built" in body:
            self.skipTest("this tollgate was built with -DTG_CONSOLE=OFF")

        out = self.driver("accounts", {"url": tg.api, "web": self.web, "chromium": CHROMIUM,
                                       "shots": self.shots, "admin_token": tg.token,
                                       "operator_token": OPERATOR_TOKEN})
        self.assertEqual(out["choices"], ["a", "b"])
        self.assertIn("b", out["title"])
        self.assertEqual((out["limits_a"], out["limits_b"]), (5, 2))
        self.assertIn("b", out["toast"])
        self.assertEqual(out["a_paused"], "0")
        self.assertEqual(out["errors"], [])
        self.assertEqual((out["operator_form"], out["operator_note"], out["operator_post"]),
                         (False, True, 403))
        # the pause is the store's, audited as the signed-in user, and in
        # force: b's refund waits while a's is sent
        st, _, body = tgtest.http_json("GET", tg.api + "/v1/accounts/b/audit", None, tg.headers())
        self.assertEqual(st, 200, body)
        self.assertEqual([(x["action"], x["by"], x["reason"]) for x in body["audit"]],
                         [("account_pause", "api-token", "provider asked us to stop")])
        time.sleep(1.5)  # the dispatchers take a change within a second
        self.assertEqual(tg.submit("acct-a-1", account="a")[0], 202)
        self.assertEqual(tg.submit("acct-b-1", account="b")[0], 202)
        self.assertEqual(tg.wait_final(["acct-a-1"], timeout=30)["acct-a-1"]["state"], "succeeded")
        time.sleep(1.0)
        self.assertEqual(stub.executions("acct-b-1"), 0)
        self.assertEqual(tg.status("acct-b-1")[2]["state"], "pending")


if __name__ == "__main__":
    tgtest.main_unittest()
