"""The README's first command, `tollgate demo --quick`, runs end to end:
stub through the incident (fast, slow, drop, reject, recovered), tollgate on
SQLite, refunds fed at 4/s, and a summary with no double refund, nothing
left open, spacing kept, and the most POSTs of any operation within 3."""

import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402


class DemoTest(unittest.TestCase):
    def test_quick_demo_summary(self):
        cwd = tgtest.scratch_dir("tgdemo-test-")
        p = subprocess.Popen([tgtest.binary("tollgate"), "demo", "--quick", "--plain"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                             preexec_fn=tgtest.raise_priority)
        # the console's URL comes first, and answers while the demo runs
        head = ""
        while "console http" not in head:
            line = p.stdout.readline()
            if not line:
                break
            head += line
        m = re.search(r"console (http://127\.0\.0\.1:\d+/ui) ", head)
        self.assertIsNotNone(m, head)
        status, _, body = tgtest.http_request("GET", m.group(1))
        console_built = not (status == 404 and b"console_not_built" in body)
        if console_built:
            self.assertEqual(status, 200)
            self.assertIn(b"signin-form", body)
        rest, err = p.communicate(timeout=240)
        out = head + rest
        self.assertEqual(p.returncode, 0, out + err)
        # the summary names the console too
        self.assertIn("console                     " + m.group(1), out)

        def figure(label):
            m = re.search(r"^\s*%s\s+([0-9.]+)" % re.escape(label), out, re.M)
            self.assertIsNotNone(m, "no %r line in:\n%s" % (label, out))
            return float(m.group(1))

        fed = figure("refunds fed")
        self.assertGreater(fed, 50)
        self.assertEqual(figure("refunds executed twice"), 0)
        self.assertEqual(figure("still open"), 0)
        self.assertEqual(figure("succeeded") + figure("rejected") +
                         figure("in manual review"), fed)
        self.assertGreaterEqual(figure("minimum start spacing"), 200.0)
        # the most POSTs any one operation made (not the average)
        self.assertRegex(out, r"POSTs per operation\s+\d+ at most \(the exit allows 3; "
                              r"[0-9.]+ on average\)")
        most = figure("POSTs per operation")
        self.assertGreaterEqual(most, 1)
        self.assertLessEqual(most, 3)
        # the incident really happened: the slow phase left unknowns to query,
        # and the explicit-reject phase refused refunds for good
        self.assertIn("provider=slow", out)
        self.assertGreater(int(re.search(r"queries (\d+)", out).group(1)), 0)
        self.assertGreater(figure("rejected"), 0)
        # the run as one HTML page, kept in the working directory
        report = os.path.join(cwd, "tollgate-demo-report.html")
        self.assertIn("report                      " + report, out)
        with open(report) as f:
            html = f.read()
        self.assertIn("<svg", html)
        self.assertIn("PASS", html)
        # nothing left running
        left = subprocess.run(["pgrep", "-f", "tg-demo"], capture_output=True, text=True)
        self.assertEqual(left.stdout.strip(), "", "demo left processes running")

    def test_two_accounts_demo(self):
        # `demo --accounts`: eu's provider goes through an incident, us's
        # stays healthy behind a limiter at us's rate; both settle, none
        # twice, each account's spacing kept, us's door refused nothing
        cwd = tgtest.scratch_dir("tgdemo-test-")
        p = subprocess.run([tgtest.binary("tollgate"), "demo", "--accounts", "--quick", "--plain"],
                           capture_output=True, text=True, cwd=cwd, timeout=240,
                           preexec_fn=tgtest.raise_priority)
        out = p.stdout
        self.assertEqual(p.returncode, 0, out + p.stderr)
        self.assertIn("eu's provider: slow", out)
        self.assertIn("eu's provider: unavailable", out)
        for name, spacing in (("eu", 250), ("us", 125)):
            m = re.search(r"account %s: fed (\d+) \(0 refused by intake\), succeeded (\d+), "
                          r"rejected 0, manual 0, still open 0; executed twice 0; minimum start "
                          r"spacing ([0-9.]+) ms" % name, out)
            self.assertIsNotNone(m, out)
            self.assertGreater(int(m.group(1)), 20)
            self.assertEqual(m.group(1), m.group(2))
            self.assertGreaterEqual(float(m.group(3)), spacing)
        self.assertIn("us's door refused 0 calls", out)
        left = subprocess.run(["pgrep", "-f", "tg-demo"], capture_output=True, text=True)
        self.assertEqual(left.stdout.strip(), "", "demo left processes running")


if __name__ == "__main__":
    tgtest.main_unittest()
