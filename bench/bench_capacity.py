#!/usr/bin/env python3
"""bench_capacity — a provider whose true capacity is below the configured
ceiling (issue 27 §2). Prints figures; never fails on a number.

tollgate-stub --capacity C plays the provider: a token bucket of C calls a
second (refunds and queries alike) that answers 429 without Retry-After past
it. tollgate sends at exit.starts_per_second (the ceiling). For each variant
of the exit (fixed: the configured rate and a hold after each 429; adaptive:
exit.adaptive = on, where the build has that key) and each case it feeds N
refunds at once and reports:

  settled in      seconds from the first call's start to the last call's (the
                  last refund is final right after its last call)
  ideal           N / min(C, ceiling): what the true capacity allows
  refused         calls the provider answered 429 (the stub's record)
  calls           every call the exit made (POSTs and queries)
  manual          refunds that ended in manual review

Cases: below (C under the ceiling), at (C equal to it), above (C twice it),
and recover: 4 N refunds, C until an eighth of them are through, then the
capacity comes back (no bucket); "back after" is the time from the
capacity's return until the exit's starts reach 90 % of the ceiling over a
2 s window.

usage: bench/bench_capacity.py [--build DIR] [--ceiling 10] [--capacity 3]
                               [--refunds 60] [--variants fixed,adaptive]
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402


def has_key(section, key):
    out = subprocess.run([tgtest.binary("tollgate"), "config", "defaults"],
                         capture_output=True, text=True, timeout=30).stdout
    sect = None
    for line in out.splitlines():
        if line.startswith("["):
            sect = line.strip("[]")
        elif sect == section and line.lstrip("# ").startswith(key + " ="):
            return True
    return False


def run_case(variant, ceiling, capacity, n, recover):
    exit_keys = {"starts_per_second": ceiling}
    if variant == "adaptive":
        exit_keys["adaptive"] = "on"
    flags = ["--mode", "fast"]
    if capacity > 0:
        flags += ["--capacity", str(capacity)]
    with tgtest.start_stub(*flags) as stub, \
            Tollgate(stub.url, exit=exit_keys, retry={"deadline_s": 3600}) as tg:
        tg.start("serve")
        ops = ["cap-%s-%04d" % (variant, i) for i in range(n)]
        for op in ops:
            status, _, body = tg.submit(op)
            if status != 202:
                raise RuntimeError("submit %s: %s %r" % (op, status, body))
        back_at = None
        if recover:
            # the capacity returns once an eighth of the refunds are final
            # (the rest keep the exit busy while it climbs back)
            tgtest.wait_until(lambda: sum(1 for op in ops[:n // 4]
                                          if tg.status(op)[2].get("state") == "succeeded")
                              >= n // 8, timeout=600, interval=0.2, what="an eighth settled")
            stub.set_mode(capacity=0)
            back_at = time.monotonic()
        final = tg.wait_final(ops, timeout=900)
        calls = tg.calls()
        arrivals = [a for a in stub.arrivals() if a["path"].startswith("/v1/")]
    starts = sorted(c["start_mono_ns"] / 1e9 for c in calls if c.get("start_mono_ns"))
    settled = (starts[-1] - starts[0]) if starts else float("nan")
    refused = sum(1 for a in arrivals if a.get("answer") == 429)
    manual = sum(1 for r in final.values() if r["state"] == "manual")
    recover_s = None
    if recover and back_at is not None:
        # wall-clock mapping of the starts: the call log's monotonic clock is
        # the machine's, as time.monotonic() is
        after = [s for s in starts if s >= back_at]
        for i, s in enumerate(after):
            window = [x for x in after[i:] if x < s + 2.0]
            if len(window) >= 0.9 * ceiling * 2:
                recover_s = s - back_at
                break
    return {"settled": settled, "refused": refused, "calls": len(calls), "manual": manual,
            "recover": recover_s}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=None)
    ap.add_argument("--ceiling", type=float, default=10)
    ap.add_argument("--capacity", type=float, default=3)
    ap.add_argument("--refunds", type=int, default=60)
    ap.add_argument("--variants", default="fixed,adaptive")
    a = ap.parse_args()
    if a.build:
        os.environ["TG_BUILD_DIR"] = os.path.abspath(a.build)
    variants = []
    for v in a.variants.split(","):
        if v == "adaptive" and not has_key("exit", "adaptive"):
            print("(no exit.adaptive in this build: the adaptive variant is skipped)")
            continue
        variants.append(v)
    cases = [("below", a.capacity, False), ("at", a.ceiling, False),
             ("above", 2 * a.ceiling, False), ("recover", a.capacity, True)]
    print("ceiling %.1f/s, %d refunds a case (recover: %d)" % (a.ceiling, a.refunds,
                                                               4 * a.refunds))
    print("%-9s %-8s %9s %9s %8s %6s %7s %10s" % ("variant", "case", "capacity", "settled",
                                                  "ideal", "calls", "refused", "back after"))
    for v in variants:
        for name, cap, recover in cases:
            n = 4 * a.refunds if recover else a.refunds
            r = run_case(v, a.ceiling, cap, n, recover)
            ideal = (n / 8 / cap + 7 * n / 8 / a.ceiling) if recover else n / min(cap, a.ceiling)
            print("%-9s %-8s %8.1f/s %8.1fs %7.1fs %6d %7d %10s%s" % (
                v, name, cap, r["settled"], ideal, r["calls"], r["refused"],
                "-" if r["recover"] is None else "%.1fs" % r["recover"],
                "" if not r["manual"] else "  (%d manual)" % r["manual"]), flush=True)


if __name__ == "__main__":
    main()
