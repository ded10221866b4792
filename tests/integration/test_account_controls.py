"""An account changed at run time (issue 26, §5): rate, cap, pause.

`tollgate serve` with two accounts at one stub (each account's refunds carry
its name in their ids). Judged from outside:
  - POST /v1/accounts/a lowers a's rate: a's POSTs after it are at least the
    new spacing apart at the door; b's rate is untouched;
  - a lowered cap never aborts open calls: four slow calls open, the cap
    goes to 1, all four end with the provider's answer, and afterwards a
    has at most one call open at a time;
  - pause: none of a's refunds reaches the provider until resume; then they
    do, and b went on meanwhile;
  - every change is audited (who, when, from what to what), kept across a
    restart, refused with a clear error when it is not allowed (above the
    configured ceiling, an unknown account, no reason);
  - `tollgate account` does the same from the command line, on the store;
  - SIGHUP: a config file whose account rate or cap went down makes the new
    values that account's controls (audited as "sighup", a's POSTs spaced
    by the new rate at the door, b untouched); a value above the one the
    process started with is refused and named; back at that value, the
    control is cleared.
"""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from test_accounts import max_open  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402
from test_service import events, rewrite_config  # noqa: E402

RATE = 5.0
CAP = 4


def posts_ms(arrivals, prefix):
    return sorted(x["mono_ns"] // 1_000_000 for x in arrivals
                  if x["method"] == "POST" and x["idempotency_key"].startswith(prefix))


class AccountControlsTest(unittest.TestCase):
    def daemon(self, stub):
        return Tollgate(stub.url, **{
            "exit": {"starts_per_second": RATE, "max_in_flight": CAP},
            "provider": {"timeout_ms": 3000},
            "account.a": {"retry.deadline_s": 600},
            "account.b": {"retry.deadline_s": 600},
        })

    def control(self, tg, account, **body):
        return tgtest.http_json("POST", "%s/v1/accounts/%s" % (tg.api, account), body,
                                tg.headers())

    def accounts(self, tg):
        status, _, body = tgtest.http_json("GET", tg.api + "/v1/accounts", None, tg.headers())
        self.assertEqual(status, 200, body)
        return {a["account"]: a for a in body["accounts"]}

    def submit_all(self, tg, account, ids):
        for op in ids:
            status, _, body = tg.submit(op, account=account)
            self.assertEqual(status, 202, body)

    def cli(self, tg, *args):
        p = subprocess.run([tgtest.binary("tollgate"), "account"] + list(args) +
                           ["--config", tg.config], capture_output=True, text=True, timeout=30)
        return p.returncode, p.stdout, p.stderr

    def test_rate_cap_pause_audited_and_kept(self):
        with tgtest.start_stub("--mode", "fast") as stub, self.daemon(stub) as tg:
            proc = tg.start("serve")
            # refused: above the ceiling, unknown account, no reason
            st, _, body = self.control(tg, "a", starts_per_second=50, reason="x")
            self.assertEqual((st, body["error"]["code"], body["error"]["field"]),
                             (422, "invalid_field", "starts_per_second"), body)
            st, _, body = self.control(tg, "zz", paused=True, reason="x")
            self.assertEqual((st, body["error"]["code"]), (404, "unknown_account"), body)
            self.assertIn("a, b", body["error"]["message"])
            st, _, body = self.control(tg, "a", paused=True)
            self.assertEqual((st, body["error"]["field"]), (422, "reason"), body)
            self.assertIsNone(self.accounts(tg)["a"]["controls"]["changed_at"])

            # 1. a slowed to 2/s from the next slot; b stays at 5/s
            st, _, body = self.control(tg, "a", starts_per_second=2,
                                       reason="the provider asked us to slow down")
            self.assertEqual(st, 200, body)
            self.assertEqual(body["in_force"]["starts_per_second"], 2.0)
            time.sleep(1.5)  # every dispatcher reads it within a second
            ids_a = ["a-slow-%d" % i for i in range(6)]
            ids_b = ["b-fast-%d" % i for i in range(10)]
            self.submit_all(tg, "a", ids_a)
            self.submit_all(tg, "b", ids_b)
            tg.wait_final(ids_a + ids_b, timeout=60)
            arr = stub.arrivals()
            ga = [y - x for x, y in zip(posts_ms(arr, "a-slow"), posts_ms(arr, "a-slow")[1:])]
            gb = [y - x for x, y in zip(posts_ms(arr, "b-fast"), posts_ms(arr, "b-fast")[1:])]
            self.assertGreaterEqual(min(ga), 500, ga)
            self.assertGreaterEqual(min(gb), 200, gb)
            self.assertLess(sorted(gb)[len(gb) // 2], 400, gb)  # b not slowed with a

            # 2. a lowered cap never aborts open calls
            st, _, body = self.control(tg, "a", starts_per_second=None, reason="back to normal")
            self.assertEqual(st, 200, body)
            stub.set_mode(mode="slow", delay_ms=2000)
            time.sleep(1.5)
            ids = ["a-cap-%d" % i for i in range(8)]
            self.submit_all(tg, "a", ids)
            tgtest.wait_until(lambda: len(posts_ms(stub.arrivals(), "a-cap")) >= CAP,
                              timeout=20, what="four slow calls open")
            st, _, body = self.control(tg, "a", max_in_flight=1, reason="provider strained")
            self.assertEqual(st, 200, body)
            final = tg.wait_final(ids, timeout=90)
            for op, rec in final.items():
                self.assertEqual(rec["state"], "succeeded", rec)
                self.assertEqual(stub.executions(op), 1, op)
            calls = [c for c in tg.calls() if c["operation_id"].startswith("a-cap")]
            first4 = sorted(calls, key=lambda c: c["start_mono_ns"])[:CAP]
            for c in first4:  # the open ones ended with the provider's answer
                self.assertEqual(c["class"], "succeeded", c)
            changed = max(c["end_mono_ns"] for c in first4)
            later = [c for c in calls if c["start_mono_ns"] > changed]
            self.assertTrue(later)
            self.assertLessEqual(max_open(later), 1, later)
            stub.set_mode(mode="fast")

            # 3. pause: nothing of a reaches the provider until resume
            st, _, body = self.control(tg, "a", paused=True, reason="provider down")
            self.assertEqual((st, body["in_force"]["paused"]), (200, True), body)
            time.sleep(1.5)
            ids_p = ["a-paused-%d" % i for i in range(3)]
            ids_b2 = ["b-during-%d" % i for i in range(3)]
            self.submit_all(tg, "a", ids_p)
            self.submit_all(tg, "b", ids_b2)
            tg.wait_final(ids_b2, timeout=30)
            time.sleep(1.0)
            self.assertEqual(posts_ms(stub.arrivals(), "a-paused"), [])
            for op in ids_p:
                self.assertEqual(tg.status(op)[2]["state"], "pending")
            st, _, body = self.control(tg, "a", paused=False, max_in_flight=None,
                                       reason="provider back")
            self.assertEqual((st, body["in_force"]["paused"]), (200, False), body)
            tg.wait_final(ids_p, timeout=30)

            # 4. the audit: who, when, from what to what, in order
            st, _, body = tgtest.http_json("GET", tg.api + "/v1/accounts/a/audit", None,
                                           tg.headers())
            self.assertEqual(st, 200, body)
            rows = body["audit"]
            self.assertEqual([r["action"] for r in rows],
                             ["account_set", "account_set", "account_set", "account_pause",
                              "account_set"])
            self.assertEqual(rows[0]["detail"]["from"]["starts_per_second"], 0)
            self.assertEqual(rows[0]["detail"]["to"]["starts_per_second"], 2)
            self.assertEqual(rows[0]["reason"], "the provider asked us to slow down")
            self.assertTrue(all(r["by"] for r in rows))
            self.assertEqual(rows[3]["detail"]["to"]["paused"], True)
            st, _, body = tgtest.http_json("GET", tg.api + "/v1/accounts/b/audit", None,
                                           tg.headers())
            self.assertEqual(body["audit"], [])

            # 5. kept across a restart; the CLI on the same store
            st, _, body = self.control(tg, "a", starts_per_second=1, reason="keep me")
            self.assertEqual(st, 200, body)
            proc.stop()
            self.assertEqual(proc.returncode, 0, proc.stderr_text()[-2000:])
            rc, out, err = self.cli(tg, "list")
            self.assertEqual(rc, 0, err)
            listed = {a["account"]: a for a in json.loads(out)["accounts"]}
            self.assertEqual(listed["a"]["in_force"]["starts_per_second"], 1.0)
            self.assertEqual(listed["b"]["controls"]["starts_per_second"], None)
            rc, out, err = self.cli(tg, "set", "a", "--rate", "default", "--operator", "ops",
                                    "--reason", "cli")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out)["in_force"]["starts_per_second"], RATE)
            rc, out, err = self.cli(tg, "pause", "nope", "--operator", "ops", "--reason", "x")
            self.assertEqual(rc, 2)
            self.assertIn('no account "nope"', err)
            rc, out, err = self.cli(tg, "set", "a", "--max-in-flight", "9", "--operator", "ops",
                                    "--reason", "x")
            self.assertEqual(rc, 2)
            self.assertIn("max_in_flight", err)
            tg.start("serve")
            self.assertEqual(self.accounts(tg)["a"]["controls"]["changed_by"], "ops")
            rc, out, err = self.cli(tg, "audit", "a")
            self.assertEqual(rc, 0, err)
            self.assertEqual(json.loads(out.splitlines()[-1])["reason"], "cli")

    def test_sighup_lowers_rate_and_cap(self):
        with tgtest.start_stub("--mode", "fast") as stub, self.daemon(stub) as tg:
            proc = tg.start("serve")
            rewrite_config(tg, "account.a", "exit.starts_per_second", "2")
            rewrite_config(tg, "account.a", "exit.max_in_flight", "2")
            proc.send_signal(signal.SIGHUP)
            done = tgtest.wait_until(lambda: events(proc, "config_reloaded"), what="reload")[0]
            self.assertEqual(sorted(done["applied"]), ["account.a.exit.max_in_flight",
                                                       "account.a.exit.starts_per_second"])
            self.assertEqual(done["refused"], [])
            acc = self.accounts(tg)
            self.assertEqual(acc["a"]["in_force"]["starts_per_second"], 2.0)
            self.assertEqual(acc["a"]["in_force"]["max_in_flight"], 2)
            self.assertEqual(acc["a"]["controls"]["changed_by"], "sighup")
            self.assertEqual(acc["a"]["configured"]["starts_per_second"], RATE)
            self.assertIsNone(acc["b"]["controls"]["changed_at"])
            time.sleep(1.5)  # every dispatcher reads it within a second
            ids_a = ["a-hup-%d" % i for i in range(6)]
            ids_b = ["b-hup-%d" % i for i in range(10)]
            self.submit_all(tg, "a", ids_a)
            self.submit_all(tg, "b", ids_b)
            tg.wait_final(ids_a + ids_b, timeout=60)
            arr = stub.arrivals()
            ga = [y - x for x, y in zip(posts_ms(arr, "a-hup"), posts_ms(arr, "a-hup")[1:])]
            gb = [y - x for x, y in zip(posts_ms(arr, "b-hup"), posts_ms(arr, "b-hup")[1:])]
            self.assertGreaterEqual(min(ga), 500, ga)
            self.assertLess(sorted(gb)[len(gb) // 2], 400, gb)  # b not slowed with a

            # above the rate it started with: refused, named; nothing changes
            rewrite_config(tg, "account.a", "exit.starts_per_second", "50")
            proc.send_signal(signal.SIGHUP)
            tgtest.wait_until(lambda: len(events(proc, "config_reloaded")) >= 2, what="reload")
            refused = events(proc, "config_reload_refused")
            self.assertEqual([e["key"] for e in refused], ["account.a.exit.starts_per_second"])
            self.assertIn("restart", refused[0]["message"])
            self.assertEqual(self.accounts(tg)["a"]["in_force"]["starts_per_second"], 2.0)

            # back to the configured values: the controls are cleared
            rewrite_config(tg, "account.a", "exit.starts_per_second", str(RATE))
            rewrite_config(tg, "account.a", "exit.max_in_flight", str(CAP))
            proc.send_signal(signal.SIGHUP)
            tgtest.wait_until(lambda: len(events(proc, "config_reloaded")) >= 3, what="reload")
            acc = self.accounts(tg)["a"]
            self.assertIsNone(acc["controls"]["starts_per_second"])
            self.assertIsNone(acc["controls"]["max_in_flight"])
            self.assertEqual(acc["in_force"]["starts_per_second"], RATE)
            st, _, body = tgtest.http_json("GET", tg.api + "/v1/accounts/a/audit", None,
                                           tg.headers())
            rows = body["audit"]
            self.assertEqual([r["by"] for r in rows], ["sighup", "sighup"])
            self.assertEqual(rows[0]["detail"]["to"]["starts_per_second"], 2)
            self.assertEqual(rows[0]["detail"]["to"]["max_in_flight"], 2)
            self.assertEqual(rows[1]["detail"]["to"]["starts_per_second"], 0)
            # a second SIGHUP with the same file writes nothing
            proc.send_signal(signal.SIGHUP)
            tgtest.wait_until(lambda: len(events(proc, "config_reloaded")) >= 4, what="reload")
            st, _, body = tgtest.http_json("GET", tg.api + "/v1/accounts/a/audit", None,
                                           tg.headers())
            self.assertEqual(len(body["audit"]), 2)


if __name__ == "__main__":
    tgtest.main_unittest()
