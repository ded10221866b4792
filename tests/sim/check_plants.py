#!/usr/bin/env python3
"""The simulator catches planted bugs (docs/reliability.md, "Deterministic
simulation").

Each PLANT=BINARY is tollgate-sim built with one TG_PLANT_* flag
(tests/CMakeLists.txt). Within the seed budget it must stop at a seed with
the invariant that bug breaks; the clean build must pass that same seed with
the same steps (the whole range is the sim.seeds test). Prints, for each
plant, the seed that caught it and how far into the budget it was.

Usage: check_plants.py --clean BIN --seeds A..B --steps N PLANT=BIN...
"""
import argparse
import re
import subprocess
import sys

# the invariants each planted bug may break first
EXPECTED = {
    # a re-POST after an unknown outcome instead of a query
    "REPOST_UNKNOWN": {"reconcile", "attempts"},
    # the next start counted from the hand-off, not the wire send
    "HANDOFF_SPACING": {"spacing"},
    # a retry that skips the pacer
    "RETRY_SKIPS_PACER": {"spacing", "in_flight"},
}

FAILED = re.compile(r"^tollgate-sim: seed (\d+) failed at step (\d+) \(virtual [0-9.]+ s\): "
                    r"([a-z_]+): (.*)$", re.M)


def run(binary, seeds, steps):
    return subprocess.run([binary, "--seeds", seeds, "--steps", str(steps)],
                          capture_output=True, text=True, timeout=600)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clean", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("plants", nargs="+")
    a = ap.parse_args()
    lo = int(a.seeds.split("..")[0])
    problems = []
    for arg in a.plants:
        name, binary = arg.split("=", 1)
        p = run(binary, a.seeds, a.steps)
        m = FAILED.search(p.stdout)
        if p.returncode != 1 or not m:
            problems.append("%s: not caught within seeds %s (exit %d)\n%s%s"
                            % (name, a.seeds, p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
            continue
        seed, step, invariant, message = int(m.group(1)), m.group(2), m.group(3), m.group(4)
        if invariant not in EXPECTED[name]:
            problems.append("%s: caught at seed %d as %r, expected one of %s: %s"
                            % (name, seed, invariant, sorted(EXPECTED[name]), message))
            continue
        clean = run(a.clean, str(seed), a.steps)
        if clean.returncode != 0:
            problems.append("%s: the clean build fails seed %d too:\n%s"
                            % (name, seed, clean.stdout[-2000:]))
            continue
        print("%-18s caught at seed %d (%d seed(s) into %s), step %s: %s: %s"
              % (name, seed, seed - lo + 1, a.seeds, step, invariant, message))
    for p in problems:
        print("FAIL " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
