#!/usr/bin/env python3
"""tollgate-sim's command line: its generated help lists every option, bad
usage exits 2 with one line saying why, a seed replays exactly (the same
output, the trace included), and a failure replays with the command it
prints (here from a planted build, which fails for sure).

Usage: check_cli.py SIM PLANTED_SIM
"""
import re
import shlex
import subprocess
import sys

OPTIONS = ["--seed", "--seeds", "--steps", "--verbose", "--keep-going", "--dir", "--log",
           "--help", "-v, --verbose", "-h, --help"]


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def main():
    sim, planted = sys.argv[1], sys.argv[2]
    problems = []

    p = run([sim, "--help"])
    if p.returncode != 0 or not p.stdout.startswith("usage: tollgate-sim"):
        problems.append("--help: exit %d\n%s" % (p.returncode, p.stdout + p.stderr))
    for opt in OPTIONS:
        if opt not in p.stdout:
            problems.append("--help does not list %s" % opt)

    for argv, says in [(["--seeds", "5..3"], "--seeds"), (["--seeds", "x"], "--seeds"),
                       (["--seed", "1", "--seeds", "1..2"], "--seed and --seeds"),
                       (["--steps", "0"], "--steps"), (["--log", "loud"], "--log"),
                       (["--bogus"], "bogus")]:
        p = run([sim] + argv)
        if p.returncode != 2 or says not in p.stderr or p.stdout:
            problems.append("%s: exit %d (want 2 and a line naming %s)\n%s"
                            % (" ".join(argv), p.returncode, says, p.stdout + p.stderr))

    # the same seed, the same run: the whole trace, twice
    a = run([sim, "--seed", "44", "--steps", "300", "--verbose"])
    b = run([sim, "--seed", "44", "--steps", "300", "--verbose"])
    if a.returncode != 0 or a.stdout != b.stdout or a.stdout.count("\n") < 50:
        problems.append("--seed 44 --verbose is not the same run twice (exit %d, %d and %d "
                        "lines)" % (a.returncode, a.stdout.count("\n"), b.stdout.count("\n")))
    a = run([sim, "--seeds", "7..12", "--steps", "200"])
    b = run([sim, "--seeds", "7..12", "--steps", "200"])
    if a.returncode != 0 or a.stdout != b.stdout:
        problems.append("--seeds 7..12 differs between two runs")

    # a failure says how to replay it, and the replay fails the same way
    p = run([planted, "--seeds", "1..50", "--steps", "100"])
    m = re.search(r"^(tollgate-sim: seed \d+ failed at step .*)$", p.stdout, re.M)
    r = re.search(r"^  replay: (tollgate-sim .*)$", p.stdout, re.M)
    if p.returncode != 1 or not m or not r:
        problems.append("the planted build did not fail with a replay line:\n" + p.stdout)
    else:
        argv = shlex.split(r.group(1))
        again = run([planted] + argv[1:])
        if again.returncode != 1 or m.group(1) not in again.stdout:
            problems.append("the replay (%s) did not fail the same way:\n%s"
                            % (r.group(1), again.stdout[-3000:]))
        elif "[" not in again.stdout:
            problems.append("the replay printed no trace")
    for line in problems:
        print("FAIL " + line)
    if not problems:
        print("ok: help, usage errors, replays")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
