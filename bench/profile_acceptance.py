#!/usr/bin/env python3
"""The acceptance set per provider profile (issue 25 §4): every scenario of
tests/integration/acceptance/ run with TG_TEST_PROFILE=NAME (the stub in that
shape, tollgate with docs/providers/NAME.ini), one profile after another.

CI runs the set on our own contract (provider-md) and s1 with the stripe
profile over mutual TLS; the other copies do not fit its 25 minutes. This
prints, per profile and scenario, the verdict (passed, failed, error, or
skipped where the scenario cannot apply to the profile, saying why), the
wall time, and for one that did not pass the first line that says why, as a
Markdown table for docs/providers/README.md. It judges nothing itself.

Usage: bench/profile_acceptance.py [--build DIR] [--profiles stripe,checkout]
       [--scenarios s1,s4]   (default: every profile but provider-md, every scenario)
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
PROFILES = ("stripe", "checkout", "adyen", "paypal")


def why(text):
    """The first line that says why a scenario did not pass."""
    for pat in (r"^(AssertionError: .*)$", r"^(RuntimeError: .*)$", r"^(\w+Error: .*)$",
                r"^(tollgate [a-z]+: .*)$"):
        m = re.search(pat, text, re.M)
        if m:
            return m.group(1)[:160].replace("|", "/")
    return ""


def run(build, profile, path):
    env = dict(os.environ, TG_BUILD_DIR=build, TG_SOURCE_DIR=SRC, TG_TEST_PROFILE=profile)
    env.pop("TG_TEST_TLS", None)
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, path], env=env, capture_output=True, text=True,
                           timeout=900)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = -1, "timed out after 900 s " + str(e.stderr or "")
    secs = time.monotonic() - t0
    if rc == 0:
        verdict = "passed"
    elif rc == 77:  # tgtest.SKIP_RETURN_CODE: the scenario cannot apply to the profile
        m = re.search(r"skipped (['\"])(.*)\1$", out, re.M)
        return "skipped", time.monotonic() - t0, (m.group(2) if m else "")[:240].replace("|", "/")
    elif re.search(r"^FAILED \(.*errors=", out, re.M) and "failures=" not in out:
        verdict = "error"
    else:
        verdict = "failed"
    return verdict, secs, "" if rc == 0 else why(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--scenarios", default="")
    a = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(SRC, "tests/integration/acceptance/test_s*.py")))
    if a.scenarios:
        want = a.scenarios.split(",")
        paths = [p for p in paths if os.path.basename(p)[5:].split("_")[0] in want]
    print("| profile | scenario | verdict | wall s | why (when not passed) |")
    print("|---|---|---|---|---|")
    for profile in a.profiles.split(","):
        for path in paths:
            name = os.path.basename(path)[5:-3]
            verdict, secs, reason = run(a.build, profile, path)
            print("| %s | %s | %s | %.0f | %s |" % (profile, name, verdict, secs, reason),
                  flush=True)


if __name__ == "__main__":
    main()
