#!/usr/bin/env python3
"""bench_sim — tollgate-sim over many seeds: how many runs a second, and what
they found. Prints figures; never fails on a number (it exits 1 only when a
seed broke an invariant, printing the command that replays it).

It splits the seed range into chunks of --chunk seeds, runs one tollgate-sim
per chunk, --jobs of them at a time, and sums their summaries: runs, runs/s
(wall clock, all jobs together), virtual time simulated, calls, faults, and
the reliability table's row (docs/reliability.md). --time-limit stops
launching chunks after that many seconds (the chunks running finish), so a
million seeds can be asked for and as many run as fit.

usage: bench/bench_sim.py [--build DIR] [--seeds 1..1000000] [--steps 100]
                          [--jobs N] [--chunk 1000] [--time-limit 0]
"""

import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

SUMMARY = {
    "runs": re.compile(r": (\d+) runs, (\d+) failed"),
    "virtual": re.compile(r"virtual time (\d+) s in (\d+) steps"),
    "refunds": re.compile(r"refunds (\d+) submitted, (\d+) accepted: (\d+) succeeded, (\d+) "
                          r"rejected, (\d+) in manual"),
    "calls": re.compile(r"calls at the provider (\d+) \(POSTs (\d+), queries (\d+)\), "
                        r"connections refused (\d+)"),
    "faults": re.compile(r"faults: crashes (\d+), processes started after the first (\d+), "
                         r"store faults (\d+), lost owner locks (\d+), wall-clock steps (\d+), "
                         r"operator re-sends (\d+)"),
    "table": re.compile(r"\| everything above .*\| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) "
                        r"\| (\d+) \|"),
}
FAILED = re.compile(r"^tollgate-sim: seed \d+ failed .*$", re.M)
REPLAY = re.compile(r"^  replay: .*$", re.M)


def parse(out):
    got = {}
    for key, rx in SUMMARY.items():
        m = rx.search(out)
        got[key] = [int(x) for x in m.groups()] if m else None
    return got


def add(total, got):
    for key, vals in got.items():
        if vals is None:
            continue
        if key not in total:
            total[key] = [0] * len(vals)
        for i, v in enumerate(vals):
            # the table's "most POSTs for one key" is a maximum, not a sum
            total[key][i] = max(total[key][i], v) if (key, i) == ("table", 4) else total[key][i] + v


def main():
    ap = argparse.ArgumentParser(description="tollgate-sim over many seeds (prints figures)")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--seeds", default="1..1000000")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--chunk", type=int, default=1000)
    ap.add_argument("--time-limit", type=float, default=0, help="seconds; 0: none")
    a = ap.parse_args()
    sim = os.path.join(a.build, "tollgate-sim")
    lo, hi = (int(x) for x in a.seeds.split(".."))
    chunks = [(s, min(s + a.chunk - 1, hi)) for s in range(lo, hi + 1, a.chunk)]
    running, total, failures, done_seeds = [], {}, [], 0
    t0 = time.monotonic()
    next_chunk = 0
    while next_chunk < len(chunks) or running:
        late = a.time_limit > 0 and time.monotonic() - t0 > a.time_limit
        while not late and next_chunk < len(chunks) and len(running) < a.jobs:
            s, e = chunks[next_chunk]
            next_chunk += 1
            p = subprocess.Popen([sim, "--seeds", "%d..%d" % (s, e), "--steps", str(a.steps),
                                  "--keep-going"], stdout=subprocess.PIPE, text=True)
            running.append((p, s, e))
        if late:
            next_chunk = len(chunks)
        for item in list(running):
            p, s, e = item
            if p.poll() is None:
                continue
            out = p.stdout.read()
            running.remove(item)
            add(total, parse(out))
            done_seeds += e - s + 1
            failures += FAILED.findall(out) + REPLAY.findall(out)
        time.sleep(0.05)
    wall = time.monotonic() - t0
    runs = total.get("runs", [0, 0])
    print("bench_sim: %d runs of %d steps in %.1f s with %d jobs: %.1f runs/s"
          % (runs[0], a.steps, wall, a.jobs, runs[0] / wall if wall > 0 else 0))
    if "virtual" in total:
        v = total["virtual"]
        print("  virtual time simulated %d s (%.0f virtual s per real s), %d steps"
              % (v[0], v[0] / wall if wall > 0 else 0, v[1]))
    if "refunds" in total:
        r = total["refunds"]
        print("  refunds %d submitted, %d accepted: %d succeeded, %d rejected, %d in manual"
              % tuple(r))
    if "calls" in total:
        print("  calls at the provider %d (POSTs %d, queries %d), connections refused %d"
              % tuple(total["calls"]))
    if "faults" in total:
        print("  faults: crashes %d, processes started after the first %d, store faults %d, "
              "lost owner locks %d, wall-clock steps %d, operator re-sends %d"
              % tuple(total["faults"]))
    if "table" in total:
        t = total["table"]
        print("  | fault | runs | lost | executed twice | unexpected | most POSTs for one key | "
              "spacing violations |")
        print("  | everything (bench/bench_sim.py --seeds %d..%d --steps %d) | %d | %d | %d | %d "
              "| %d | %d |" % (lo, lo + done_seeds - 1, a.steps, t[0], t[1], t[2], t[3], t[4],
                               t[5]))
    print("  failed runs: %d" % runs[1])
    for line in failures:
        print("  " + line.strip())
    return 1 if runs[1] else 0


if __name__ == "__main__":
    sys.exit(main())
