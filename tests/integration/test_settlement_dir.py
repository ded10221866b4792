"""The settlement file as an automatic source (issue 25 §2): an account's
provider.settlement_dir.

`tollgate api` and `tollgate dispatch` with two accounts, a (with a watched
directory, looked at every second) and b (none). Their refunds end unknown
or retry_wait (the stub drops every POST and refuses every query); the
dispatcher stops, so only the file can settle them. Judged from outside:
  - a file put in a's directory (written under another name, renamed to
    *.csv) is applied by the daemon itself: a's refund settled (audited as
    settlement_file), and the rows that did not match reported in
    done/NAME.csv.report.jsonl (b's refund: other_account, untouched; an
    unknown id; a bad row), the file moved to done/;
  - a file that is no settlement file goes to failed/ with the reason;
  - other names (not *.csv, hidden) are left alone;
  - a settlement_dir that is not a directory stops the start, naming the key.
"""

import json
import os
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

FAST_RETRY = {"max_attempts": 3, "backoff_base_ms": 20, "backoff_min_ms": 0,
              "backoff_cap_ms": 100, "query_interval_ms": 200, "deadline_s": 600}
FAST_EXIT = {"starts_per_second": 50, "default_hold_ms": 20, "default_hold_max_ms": 20}


def put(directory, name, text):
    """Written under a hidden name, then renamed: never seen half written."""
    tmp = os.path.join(directory, "." + name + ".part")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(directory, name))


def lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


class SettlementDirTest(unittest.TestCase):
    def test_files_applied_by_the_daemon(self):
        with tgtest.start_stub("--mode", "drop", "--query-mode", "unavailable",
                               "--retry-after", "none") as stub:
            watched = tgtest.scratch_dir("tgsettle-")
            with Tollgate(stub.url, retry=FAST_RETRY, exit=FAST_EXIT,
                          **{"account.a": {"provider.settlement_dir": watched,
                                           "provider.settlement_scan_s": 1},
                             "account.b": {"retry.deadline_s": 600}}) as tg:
                tg.start("api")
                disp = tg.start("dispatch", wait_api=False)
                ops = {"a": "st-a-1", "b": "st-b-1"}
                for account, op in ops.items():
                    st, _, body = tg.submit(op, account=account)
                    self.assertEqual(st, 202, body)
                tg.wait_final(list(ops.values()), timeout=30, states=("unknown", "retry_wait"))
                disp.send_signal(signal.SIGTERM)
                self.assertEqual(disp.popen.wait(15), 0)

                with open(os.path.join(watched, "notes.txt"), "w") as f:
                    f.write("operation_id,status\nst-a-1,failed\n")
                put(watched, "day1.csv",
                    "date,operation_id,status,refund_id\n"
                    "2026-12-05,st-a-1,succeeded,re_a1\n"
                    "2026-12-05,st-b-1,failed,\n"      # b's: not this file's to settle
                    "2026-12-05,ghost,succeeded,re_x\n"
                    "2026-12-05,st-a-1,maybe,\n")
                done = os.path.join(watched, "done", "day1.csv")
                tgtest.wait_until(lambda: os.path.exists(done), timeout=15,
                                  what="day1.csv applied")
                self.assertFalse(os.path.exists(os.path.join(watched, "day1.csv")))
                rep = lines(done + ".report.jsonl")
                results = sorted((x.get("result"), x.get("operation_id")) for x in rep
                                 if "result" in x)
                self.assertIn(("other_account", "st-b-1"), results)
                self.assertIn(("no_such_operation", "ghost"), results)
                self.assertIn(("invalid_row", "st-a-1"), results)
                summary = rep[-1]
                self.assertEqual((summary["summary"], summary["settled"], summary["rows"]),
                                 (True, 1, 4), summary)
                rec = tg.status("st-a-1")[2]
                self.assertEqual((rec["state"], rec["refund_id"]), ("succeeded", "re_a1"))
                ext = [x for x in rec["audit"] if x["action"] == "external"]
                self.assertEqual(len(ext), 1, rec["audit"])
                self.assertIn("settlement_file", json.dumps(ext[0]))
                rec = tg.status("st-b-1")[2]
                self.assertIn(rec["state"], ("unknown", "retry_wait"), rec)

                # no settlement file: aside, with the reason
                put(watched, "broken.csv", "not,a,settlement,header\n1,2,3,4\n")
                failed = os.path.join(watched, "failed", "broken.csv")
                tgtest.wait_until(lambda: os.path.exists(failed), timeout=15,
                                  what="broken.csv refused")
                self.assertIn("operation_id and status",
                              lines(failed + ".report.jsonl")[0]["message"])
                # left alone: another name
                self.assertTrue(os.path.exists(os.path.join(watched, "notes.txt")))
                self.assertEqual(tg.status("st-a-1")[2]["state"], "succeeded")

    def test_not_a_directory_stops_the_start(self):
        with tgtest.start_stub("--mode", "fast") as stub:
            missing = os.path.join(tgtest.scratch_dir("tgsettle-"), "nope")
            with Tollgate(stub.url, provider={"settlement_dir": missing}) as tg:
                p = subprocess.run([tgtest.binary("tollgate"), "config", "check", "--config",
                                    tg.config], capture_output=True, text=True, timeout=30)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn("provider.settlement_dir", p.stdout + p.stderr)
                self.assertIn("is not a directory", p.stdout + p.stderr)


if __name__ == "__main__":
    tgtest.main_unittest()
