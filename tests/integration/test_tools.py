"""Integration tests of the teaching tools (issue 8): `tollgate jitter`
(seed 004), `tollgate plan` and `plan --simulate` (seed 000), and
`tollgate demo resilience` (seed 002). The tools are run as a user would;
their output is checked against the seeds' numbers (arithmetic exactly,
simulations within stated margins), and nothing they start may outlive them.
"""

import glob
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402


def run(*args, timeout=60):
    p = subprocess.run([tgtest.binary("tollgate")] + list(args), capture_output=True,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def leftovers(prefix):
    return glob.glob("/tmp/%s-*" % prefix)


class JitterTest(unittest.TestCase):
    def test_credit_union(self):
        rc, out, err = run("jitter", "--example", "credit-union")
        self.assertEqual(rc, 0, err)
        rounds = {int(m.group(1)): m.group(0) for m in
                  re.finditer(r"^\s+(\d)\s+0-\d+ min.*$", out, re.M)}
        self.assertEqual(sorted(rounds), [1, 2, 3, 4], out)
        for k, hi in zip((1, 2, 3, 4), (10, 20, 40, 80)):
            self.assertIn("0-%d min" % hi, rounds[k])
            self.assertIn("all 37 at %d min" % hi, rounds[k])  # no jitter: 37 at once
        # Round 4 with full jitter, seed 1: 37 over 80 min, at most 3 in a minute.
        peak4 = int(re.search(r"37 in [\d.]+-[\d.]+\s+(\d+) at", rounds[4]).group(1))
        self.assertLessEqual(peak4, 3, rounds[4])
        self.assertIn("capacity: 6 per bucket", out)
        self.assertIn("no cap: round 4 waits up to 80 min", out)
        self.assertIn("tail wait", out)
        m = re.search(r"round 4\s+(\d+) / (\d+) / (\d+)\s+\(at most 2 in \d+% of seeds; "
                      r"within capacity 6 in (\d+)%", out)
        self.assertIsNotNone(m, out)
        self.assertLessEqual(int(m.group(1)), 3)  # median busiest minute of round 4
        self.assertEqual(int(m.group(4)), 100)    # always within the 6 lines

    def test_credit_union_old_schedule_simulated(self):
        # The old schedule is simulated like the others: the same clients at
        # a fixed 10-minute interval, no jitter (not a fixed sentence).
        rc, out, err = run("jitter", "--example", "credit-union", "--runs", "1")
        self.assertEqual(rc, 0, err)
        self.assertIn("old schedule (fixed 10-min interval, no jitter, simulated): calls at "
                      "0, 10, 20, 30 min; peak 37 per bucket (all 37 at once each time), "
                      "4 of 4 busy buckets over capacity 6", out)
        rc, out, err = run("jitter", "--example", "credit-union", "--runs", "1", "--clients", "5",
                           "--fixed", "15", "--fixed-rounds", "2")
        self.assertEqual(rc, 0, err)
        self.assertIn("calls at 0, 15, 30 min; peak 5 per bucket (all 5 at once each time), "
                      "0 of 3 busy buckets over capacity 6", out)
        rc, _, err = run("jitter", "--fixed-rounds", "2")
        self.assertEqual(rc, 2)
        self.assertIn("--fixed-rounds needs --fixed", err)

    def test_table_and_svg(self):
        svg = os.path.join(tgtest.scratch_dir("tgtools-"), "a.svg")
        rc, out, err = run("jitter", "--example", "table", "--jitter", "none", "--svg", svg)
        self.assertEqual(rc, 0, err)
        for k, hi in zip(range(1, 6), (1, 2, 4, 8, 16)):
            self.assertRegex(out, r"\n\s+%d\s+0-%d s\s+all 5 at %d s" % (k, hi, hi))
        with open(svg) as f:
            self.assertTrue(f.read().startswith("<svg"))
        os.unlink(svg)
        os.rmdir(os.path.dirname(svg))

    def test_bad_flags(self):
        rc, _, err = run("jitter", "--jitter", "sometimes")
        self.assertEqual(rc, 2)
        self.assertIn("--jitter", err)
        rc, _, err = run("jitter", "--bucket", "0.000001", "--rounds", "30")
        self.assertNotEqual(rc, 0)


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def peaks(out):
    """{group: {"second": (n, at), "minute": (n, at), "spread": text, ...}} of --calls output."""
    groups, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^(All records|Repeats) .*?: (\d+)$|^(All records): (\d+)$", line)
        if m:
            cur = groups.setdefault(m.group(1) or m.group(3), {})
            cur["count"] = int(m.group(2) or m.group(4))
            continue
        m = re.match(r"^  busiest (second|minute)\s+(\d+) at (\S+)$", line)
        if m and cur is not None:
            cur[m.group(1)] = (int(m.group(2)), m.group(3))
        m = re.match(r"^  capacity \d+/s\s+(\d+) of (\d+) busy seconds over it", line)
        if m and cur is not None:
            cur["over"] = (int(m.group(1)), int(m.group(2)))
        m = re.match(r"^  spread\s+(\w+)", line)
        if m and cur is not None:
            cur["spread"] = m.group(1)
    return groups


class JitterCallsTest(unittest.TestCase):
    """Seed 004's first self-check on real records: `tollgate jitter --calls`."""

    def test_call_log_fixture(self):
        # 40 first attempts one a second, 25 retries in one second
        # (12:00:45), 10 queries, 5 firsts the next minute
        f = os.path.join(FIXTURES, "jitter-calls.jsonl")
        rc, out, err = run("jitter", "--calls", f, "--capacity", "5")
        self.assertEqual(rc, 0, err)
        self.assertIn("80 records (a call log), 2025-03-01T12:00:00Z .. 2025-03-01T12:01:34Z",
                      out)
        g = peaks(out)
        self.assertEqual(g["All records"]["count"], 80)
        self.assertEqual(g["All records"]["second"], (25, "2025-03-01T12:00:45Z"))
        self.assertEqual(g["All records"]["minute"], (75, "2025-03-01T12:00:00Z"))
        self.assertEqual(g["All records"]["over"], (1, 56))
        self.assertEqual(g["Repeats"]["count"], 35)
        self.assertEqual(g["Repeats"]["second"], (25, "2025-03-01T12:00:45Z"))
        self.assertEqual(g["Repeats"]["minute"], (35, "2025-03-01T12:00:00Z"))
        self.assertEqual(g["Repeats"]["spread"], "CLUSTERED")
        # the same log as `tollgate calls --format csv` would print it
        d = tgtest.scratch_dir("tgtools-")
        csv_path = os.path.join(d, "calls.csv")
        with open(f) as src, open(csv_path, "w") as dst:
            dst.write("id,operation_id,kind,attempt,start_wall,class\n")
            for line in src:
                c = json.loads(line)
                dst.write("%d,%s,%s,%d,%d,%s\n" % (c["id"], c["operation_id"], c["kind"],
                                                    c["attempt"], c["start_wall"], c["class"]))
        rc, out2, err = run("jitter", "--calls", csv_path, "--capacity", "5")
        self.assertEqual(rc, 0, err)
        self.assertEqual(peaks(out2), g)
        os.unlink(csv_path)
        os.rmdir(d)

    def test_failure_csvs(self):
        # another system's failures: the credit union's old schedule (37
        # phones in one second, four times) against the same with jitter
        rc, out, err = run("jitter", "--calls", os.path.join(FIXTURES, "jitter-failures-fixed.csv"),
                           "--capacity", "6")
        self.assertEqual(rc, 0, err)
        g = peaks(out)["All records"]
        self.assertEqual(g["count"], 148)
        self.assertEqual(g["second"], (37, "2025-03-03T08:00:00Z"))  # 16:00 at +08:00
        self.assertEqual(g["over"], (4, 4))
        self.assertEqual(g["spread"], "CLUSTERED")
        self.assertNotIn("Repeats", out)  # no kind column: every row is a failure
        rc, out, err = run("jitter", "--calls",
                           os.path.join(FIXTURES, "jitter-failures-jittered.csv"),
                           "--capacity", "6")
        self.assertEqual(rc, 0, err)
        g = peaks(out)["All records"]
        self.assertEqual(g["count"], 148)
        self.assertLessEqual(g["second"][0], 2)
        self.assertEqual(g["over"][0], 0)
        self.assertEqual(g["spread"], "spread")

    def test_bad_records(self):
        d = tgtest.scratch_dir("tgtools-")
        cases = [("a.csv", "phone,when\np1,2025-03-03T16:00:00Z\n", "line 1: no time column"),
                 ("b.csv", "time\n1740988800\nyesterday\n", "line 3: the time is not"),
                 ("c.jsonl", '{"start_wall": 1}\n{"kind": "retry"}\n', "line 2: not a call log"),
                 ("d.csv", 'time,x\n1740988800,"open\n', "line 2: not a CSV line"),
                 ("e.csv", "time\n", "no records")]
        try:
            for name, text, want in cases:
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(text)
                rc, out, err = run("jitter", "--calls", path)
                self.assertEqual(rc, 2, (name, out, err))
                self.assertIn(want, err, name)
                os.unlink(path)
            rc, _, err = run("jitter", "--calls", "/nonexistent.csv")
            self.assertEqual(rc, 2)
            rc, _, err = run("jitter", "--calls", os.path.join(FIXTURES, "jitter-calls.jsonl"),
                             "--clients", "5")
            self.assertEqual(rc, 2)
            self.assertIn("--calls measures records", err)
        finally:
            os.rmdir(d)


class PlanTest(unittest.TestCase):
    def test_seed_figures(self):
        rc, out, err = run("plan", "--backlog", "240", "--arrivals", "2",
                           "--calls-per-second", "5", "--calls-per-close", "1")
        self.assertEqual(rc, 0, err)
        self.assertIn("240 / 3 = 80 s", out)
        rc, out, _ = run("plan", "--example", "seed-2calls")
        self.assertIn("240 / 0.5 = 480 s", out)
        rc, out, _ = run("plan", "--example", "exercise")
        self.assertIn("600 / 2 = 300 s", out)
        self.assertIn("= 8 closes/s = 16 calls/s", out)
        self.assertIn("dominant: calls per close", out)

    def test_never_drains(self):
        rc, out, _ = run("plan", "--backlog", "240", "--arrivals", "3",
                         "--calls-per-second", "5", "--calls-per-close", "2")
        self.assertEqual(rc, 0)
        self.assertIn("NEVER DRAINS", out)

    def test_simulate_compressed(self):
        # 60 queued, 2/s arriving, 5 calls/s: 20 s analytic; x0.2 -> 4 s.
        before = set(leftovers("tg-plan"))
        rc, out, err = run("plan", "--backlog", "60", "--arrivals", "2",
                           "--calls-per-second", "5", "--simulate", "--time-scale", "0.2",
                           timeout=60)
        self.assertEqual(rc, 0, out + err)
        m = re.search(r"time to drain\s+([\d.]+)\s+([\d.]+) s", out.split("Simulation")[1])
        self.assertIsNotNone(m, out)
        analytic, measured = float(m.group(1)), float(m.group(2))
        self.assertAlmostEqual(analytic, 4.0, places=6)
        # The exit never exceeds its rate and pick-up adds a little: allow
        # -10% .. +50% + 1 s on a noisy machine.
        self.assertGreater(measured, analytic * 0.9, out)
        self.assertLess(measured, analytic * 1.5 + 1, out)
        self.assertEqual(set(leftovers("tg-plan")), before, "temp dirs left behind")


    def test_simulate_calls_per_close_for_real(self):
        # 3 calls per close made by the stub (calls:3: a POST answered 500,
        # a query "processing", a query succeeded), not by dividing the
        # rate: 40 queued, 1/s arriving, 10 calls/s -> 3.33 closes/s,
        # 17.1 s analytic; x0.2 -> 3.43 s.
        before = set(leftovers("tg-plan"))
        rc, out, err = run("plan", "--backlog", "40", "--arrivals", "1", "--calls-per-second",
                           "10", "--calls-per-close", "3", "--simulate", "--time-scale", "0.2",
                           timeout=60)
        self.assertEqual(rc, 0, out + err)
        sim = out.split("Simulation")[1]
        self.assertIn("tollgate-stub (calls:3)", sim)
        self.assertIn("exit at 50 starts/s", sim)  # the whole quota, not 50 / 3
        m = re.search(r"time to drain\s+([\d.]+)\s+([\d.]+) s", sim)
        analytic, measured = float(m.group(1)), float(m.group(2))
        self.assertAlmostEqual(analytic, 40 / (50 / 3 - 5), places=3)
        self.assertGreater(measured, analytic * 0.9, out)
        self.assertLess(measured, analytic * 1.5 + 1, out)
        m = re.search(r"calls per close\s+3\s+([\d.]+)", sim)
        self.assertIsNotNone(m, sim)
        self.assertGreaterEqual(float(m.group(1)), 2.9)  # measured from the call log
        self.assertLess(float(m.group(1)), 3.3)
        self.assertEqual(set(leftovers("tg-plan")), before, "temp dirs left behind")
        rc, _, err = run("plan", "--calls-per-close", "1.5", "--simulate")
        self.assertEqual(rc, 2)
        self.assertIn("whole number", err)


class OptionsTest(unittest.TestCase):
    """Every command reads its options through one layer (platform/options):
    --name value and --name=value alike, help generated from the option
    table, one-line errors naming the option, exit status 2."""

    JITTER = ["--clients", "--rounds", "--base", "--factor", "--min", "--cap", "--give-up",
              "--jitter", "--bucket", "--capacity", "--seed", "--unit", "--svg", "--runs",
              "--example", "--fixed", "--fixed-rounds", "--calls", "--help"]
    STUB = ["--listen", "--port-file", "--timeline", "--time-scale", "--mode", "--delay-ms",
            "--retry-after", "--retry-after-date", "--processing-ms", "--key-retention-s",
            "--seed", "--mix", "--query-mode", "--query-delay-ms", "--record", "--max-body",
            "--max-records", "--max-keys", "--max-connections", "--webhook-url",
            "--webhook-secret-file", "--webhook-delay-ms", "--webhook-drop-rate", "--shape",
            "--tls-cert", "--tls-key", "--tls-client-ca", "--tls-priorities",
            "--auth-secret-file", "--auth-header", "--signing-key-file", "--signature-header",
            "--timestamp-header", "--signing-string", "--signature-encoding",
            "--signature-prefix", "--max-skew-s", "--record-bodies", "--help"]

    def test_equals_and_space_forms_agree(self):
        rc, spaced, err = run("jitter", "--clients", "5", "--seed", "3", "--jitter", "equal")
        self.assertEqual(rc, 0, err)
        rc, joined, err = run("jitter", "--clients=5", "--seed=3", "--jitter=equal")
        self.assertEqual(rc, 0, err)
        self.assertEqual(joined, spaced)
        self.assertIn("5 clients fail together", joined)
        rc, other, _ = run("jitter", "--clients=6", "--seed=3", "--jitter=equal")
        self.assertEqual(rc, 0)
        self.assertNotEqual(other, joined)  # the value after '=' is really read

    def test_config_equals_for_manual_list(self):
        d = tgtest.scratch_dir("tgtools-")
        db = os.path.join(d, "opts.db")
        ini = os.path.join(d, "opts.ini")
        with open(ini, "w") as f:
            f.write("[store]\nurl = sqlite://%s\n" % db)
        try:
            # the store of F is read (and, an operator command, never created)
            rc, joined, err = run("manual", "list", "--config=" + ini)
            self.assertEqual(rc, 1, err)
            self.assertIn("no store at " + db, err)
            self.assertFalse(os.path.exists(db), "an operator command created a store")
            rc, spaced, err2 = run("manual", "list", "--config", ini)
            self.assertEqual((rc, spaced, err2), (1, joined, err))
            rc, _, err = run("manual", "list", "--config=/nonexistent/opts.ini")
            self.assertEqual(rc, 2)
            self.assertIn("/nonexistent/opts.ini", err)
        finally:
            for name in os.listdir(d):
                os.unlink(os.path.join(d, name))
            os.rmdir(d)

    def check_help(self, argv, usage, flags):
        p = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("usage: " + usage), p.stdout[:200])
        for flag in flags:
            self.assertRegex(p.stdout, r"\n  (-\w, |    )%s\b" % re.escape(flag),
                             "%s not listed in %s --help" % (flag, usage))
        for line in p.stdout.splitlines():  # wrapped at 79, but a word is never cut
            self.assertTrue(len(line) <= 79 or " " not in line.strip(), line)
        return p.stdout

    def test_help_lists_every_option(self):
        self.check_help([tgtest.binary("tollgate-stub")], "tollgate-stub", self.STUB)
        self.check_help([tgtest.binary("tollgate"), "jitter"], "tollgate jitter", self.JITTER)
        out = self.check_help([tgtest.binary("tollgate"), "serve"], "tollgate serve",
                              ["--config", "--help"])
        self.assertIn("  -c, --config FILE", out)
        self.assertIn("usage: tollgate serve --config FILE", out)
        # -h is --help everywhere
        for cmd in (["jitter"], ["plan"], ["verify"], ["report"], ["demo"],
                    ["demo", "resilience"], ["calls"], ["reconcile"], ["dispatch"], ["api"]):
            rc, out, err = run(*(cmd + ["-h"]))
            self.assertEqual(rc, 0, err)
            self.assertTrue(out.startswith("usage: tollgate " + " ".join(cmd)), out[:100])
            self.assertIn("  -h, --help", out)

    def test_errors_name_the_option(self):
        for argv, want in [(["jitter", "--clients", "x"],
                            "tollgate jitter: --clients: not an integer in 1..1000000: 'x'"),
                           (["jitter", "--clients=0"], "--clients: not an integer"),
                           (["jitter", "--clients"], "--clients: missing value N"),
                           (["jitter", "--clien", "5"], "unknown option '--clien'"),
                           (["jitter", "--unit", "h"], "--unit: not one of s, min: 'h'"),
                           (["plan", "--time-scale=2"], "--time-scale: not a number in"),
                           (["plan", "--bogus"], "unknown option '--bogus'"),
                           (["verify", "--max-in-flight", "1.5", "--calls", "c",
                             "--arrivals", "a"], "--max-in-flight: not an integer"),
                           (["verify", "--token-path", "v1/oauth2/token", "--calls", "c",
                             "--arrivals", "a"], "(--token-path, provider.token_path) must "
                            "start with '/', not 'v1/oauth2/token'"),
                           (["report", "--calls", "c", "--arrivals", "a"],
                            "--out FILE.html is required"),
                           (["demo", "--quick=yes"], "--quick takes no value"),
                           (["demo", "resilience", "--seed", "-1"], "--seed: not an integer"),
                           (["serve"], "--config FILE is required"),
                           (["calls", "--config=x", "--format=xml"],
                            "--format: not one of jsonl, csv: 'xml'")]:
            rc, out, err = run(*argv)
            self.assertEqual(rc, 2, (argv, err))
            self.assertIn(want, err, argv)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertEqual(out, "", argv)
        p = subprocess.run([tgtest.binary("tollgate-stub"), "--max-keys=0"],
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--max-keys: not an integer in 1..100000000: '0'", p.stderr)


class DemoResilienceTest(unittest.TestCase):
    def test_four_scenarios(self):
        # The command is part of the product: a tollgate without it (not
        # routed, or its help gone) fails here, it is not skipped.
        rc, out, err = run("demo", "resilience", "--help", timeout=10)
        self.assertEqual(rc, 0, "`tollgate demo resilience --help` failed:\n" + out + err)
        self.assertIn("four scenarios", out)
        before = set(leftovers("tg-resil-stub"))
        rc, out, err = run("demo", "resilience", timeout=60)
        self.assertEqual(rc, 0, out + err)
        m = re.search(r"^summary: (.*)$", out, re.M)
        self.assertIsNotNone(m, out)
        s = dict(kv.split("=") for kv in m.group(1).split())
        self.assertGreaterEqual(float(s["no_timeout_ms"]), 115)       # waited the 120 ms
        self.assertGreaterEqual(float(s["timeout_ms"]), 25)           # ~30 ms timeout
        self.assertLess(float(s["timeout_ms"]), 110)                  # well before 120 ms
        self.assertEqual(int(s["timeout_open_connections"]), 0)       # connection released
        self.assertEqual(int(s["executions_without_key"]), 2)
        self.assertEqual(int(s["executions_with_key"]), 1)
        self.assertGreaterEqual(int(s["backoff_attempts"]), 3)
        for word in ("問題", "證據", "觸發條件", "影響", "驗證", "結果", "修正"):
            self.assertEqual(out.count(word), 4, word)
        self.assertEqual(set(leftovers("tg-resil-stub")), before, "stub dir left behind")


# The methods that judge behaviour only (tests/CMakeLists.txt, TG_IT_SPLIT):
# the tools' arithmetic and virtual-time simulations (jitter, plan without
# --simulate), fixtures read back, option parsing, help and error messages;
# no figure of them comes from a clock. They run in it.test_tools.parallel.
# `plan --simulate` (a measured drain time under an upper bound) and `demo
# resilience` (a timeout measured well before 120 ms) judge real time and
# run in it.test_tools.serial, alone.
BEHAVIOUR_ONLY = (
    "test_credit_union",
    "test_credit_union_old_schedule_simulated",
    "test_table_and_svg",
    "test_bad_flags",
    "test_call_log_fixture",
    "test_failure_csvs",
    "test_bad_records",
    "test_seed_figures",
    "test_never_drains",
    "test_equals_and_space_forms_agree",
    "test_config_equals_for_manual_list",
    "test_help_lists_every_option",
    "test_errors_name_the_option",
)


if __name__ == "__main__":
    tgtest.main_unittest(parallel=BEHAVIOUR_ONLY)
