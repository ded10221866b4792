"""Many provider accounts in one tollgate (issue 26, §7): past the old limit of
16, a config of 40 [account.*] sections loads and one `tollgate serve` serves
every account through its own exit, judged from outside:
  - a refund per account succeeds, sent once, at its account's provider (even
    accounts at stub E, odd ones at stub O: each account's own
    provider.base_url), with the account it was submitted to;
  - every account became an owner (its exit_open line names it), and
    /metrics shows each account's series (a page of 40 accounts' histograms
    is past the single account's bound of 256 KiB);
  - `tollgate config check` of a file with one account more than a file may
    hold names the section past the limit, with its line.
Behaviour only (outcomes, records, messages): labelled parallel.
"""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events  # noqa: E402

N = 40
LIMIT = 1024  # TG_ACCOUNTS_MAX (src/daemon/config.h)


def name(i):
    return "acct%02d" % i


class ManyAccountsTest(unittest.TestCase):
    def test_forty_accounts_each_a_refund(self):
        with tgtest.start_stub("--mode", "fast") as even, \
                tgtest.start_stub("--mode", "fast") as odd, \
                Tollgate(even.url, retry={"deadline_s": 600},
                         **{"account." + name(i): {
                             "provider.base_url": (even if i % 2 == 0 else odd).url,
                             "exit.starts_per_second": 5 + i % 3}
                            for i in range(N)}) as tg:
            proc = tg.start("serve")
            ids = {}
            for i in range(N):
                op = "%s-r1" % name(i)
                status, _, body = tg.submit(op, account=name(i))
                self.assertEqual(status, 202, body)
                ids[op] = name(i)

            def settled():
                for op in ids:
                    _, _, body = tg.status(op)
                    if body.get("state") != "succeeded":
                        return False
                return True
            tgtest.wait_until(settled, timeout=90, what="a refund per account settled")
            for op, acct in ids.items():
                _, _, body = tg.status(op)
                self.assertEqual(body["account"], acct, body)
            for stub, parity in ((even, 0), (odd, 1)):
                keys = [a["idempotency_key"] for a in stub.arrivals() if a["method"] == "POST"]
                want = {op for op, acct in ids.items() if int(acct[4:]) % 2 == parity}
                self.assertEqual(sorted(keys), sorted(want))
                for op in want:
                    self.assertEqual(stub.executions(op), 1, op)
            opened = {e.get("account") for e in log_events(proc, "exit_open")}
            self.assertEqual(opened, set(ids.values()))

            def metrics():
                status, _, raw = tgtest.http_request("GET", tg.api + "/metrics", None,
                                                     tg.headers())
                self.assertEqual(status, 200, raw[:300])
                page = raw.decode()
                return all('tollgate_call_latency_seconds_count{account="%s"}' % a in page
                           for a in ids.values())
            # each account's sample reaches the store once a second
            tgtest.wait_until(metrics, timeout=15, what="every account's series in /metrics")

    def test_config_check_names_the_limit(self):
        d = tgtest.scratch_dir("tollgate-it-")
        path = os.path.join(d, "tollgate.ini")
        with open(path, "w") as f:
            f.write("[store]\nurl = sqlite://%s/tg.db\n" % d)
            for i in range(LIMIT + 1):
                f.write("[account.a%d]\nexit.starts_per_second = 5\n" % i)
        p = subprocess.run([tgtest.binary("tollgate"), "config", "check", "--config", path],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        out = p.stdout + p.stderr
        self.assertIn(":%d: account.a%d: more than %d accounts in one file"
                      % (3 + 2 * LIMIT, LIMIT, LIMIT), out)
        # the limit itself loads
        with open(path, "w") as f:
            f.write("[store]\nurl = sqlite://%s/tg.db\n" % d)
            for i in range(LIMIT):
                f.write("[account.a%d]\nexit.starts_per_second = 5\n" % i)
        p = subprocess.run([tgtest.binary("tollgate"), "config", "check", "--config", path],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
