#!/usr/bin/env python3
"""bench/peers/run.py — tollgate side by side with what a payments team would
use instead (Bottleneck, BullMQ), on one job against tollgate-stub. Prints
figures; never fails on a number. Run by hand, never in CI.

Every system gets the same contract: 5 starts/s, 10 calls in flight, 3 s per
call, at most 3 POSTs per refund with backoff, the operation id as the
Idempotency-Key (shared PROVIDER.md):

  tollgate    `tollgate serve`, [exit] starts_per_second = 5, max_in_flight =
              10, [provider] timeout_ms = 3000, [retry] max_attempts = 3, the
              rest at its defaults; refunds submitted through its API
  bottleneck  bottleneck_job.js: minTime 200, maxConcurrent 10, retries from
              the 'failed' event (1 s, 2 s)
  bullmq      bullmq_job.js: limiter {max 5, duration 1000}, concurrency 10,
              attempts 3, exponential backoff (1 s, 2 s), on a redis-server
              this script starts on loopback

Two phases each, on a fresh stub: `fast` (answers at once), then `slow`
(stub mode slow:4000: every POST executes at the provider but answers 4 s
later, after the client gave up at 3 s). A phase ends for tollgate when every
refund is final or in manual review (it reconciles unknowns by querying), for
the others when their queue is drained; then the stub's own records are read
once nothing is open there. Per system and phase, from the stub alone:

  arrivals        every call that reached the provider, POST + GET (queries
                  count against the same quota)
  gaps < 1/rate   consecutive arrivals closer than 200 ms in whole
                  milliseconds of the stub's clock, as a gateway's limiter
                  judges them (tollgate-stub --limit-rate)
  min gap         the smallest gap between two arrivals (ms)
  max in 1 s      most arrivals in any 1 s window
  max POSTs/key   most POSTs that carried one Idempotency-Key
  executed        refunds the provider executed; "twice": executed more than
                  once (its ledger)
and from the system itself: how long the phase took, and what it says became
of the refunds (tollgate: succeeded / rejected / manual; the others: succeeded
/ failed — they have no "unknown").

usage: python3 run.py [--build DIR] [--refunds 100] [--systems tollgate,bottleneck,bullmq]
"""

import argparse
import collections
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

RATE = 5.0  # starts per second, the account's quota
IN_FLIGHT = 10
TIMEOUT_MS = 3000
ATTEMPTS = 3
PHASES = (("fast", "fast"), ("slow", "slow:4000"))
SYSTEMS = ("tollgate", "bottleneck", "bullmq")
PHASE_TIMEOUT_S = 1800


def provider_figures(arrivals, ledger):
    """The stub's own records, judged the same way for every system."""
    calls = [a for a in arrivals if a["path"].startswith("/v1/")]
    t = sorted(a["mono_ns"] for a in calls)
    gaps = [b - a for a, b in zip(t, t[1:])]
    whole_ms = [x // 1000000 for x in t]
    under = sum(1 for a, b in zip(whole_ms, whole_ms[1:]) if (b - a) * RATE < 1000)
    most_in_1s, j = 0, 0
    for i in range(len(t)):
        while t[i] - t[j] >= 1000000000:
            j += 1
        most_in_1s = max(most_in_1s, i - j + 1)
    posts = collections.Counter(a["idempotency_key"] for a in calls if a["method"] == "POST")
    ops = ledger["operations"].values()
    return {
        "arrivals": len(calls),
        "posts": sum(posts.values()),
        "gets": sum(1 for a in calls if a["method"] == "GET"),
        "under": under,
        "min_gap_ms": min(gaps) / 1e6 if gaps else float("nan"),
        "most_in_1s": most_in_1s,
        "most_posts_per_key": max(posts.values()) if posts else 0,
        "executed": sum(1 for op in ops if op["executions"] >= 1),
        "executed_twice": sum(1 for op in ops if op["executions"] > 1),
    }


def default_spacing_margin_us():
    """tollgate's own default (the integration tests' helper sets a wider
    one for CI; a team would keep the default)."""
    out = subprocess.run([tgtest.binary("tollgate"), "config", "defaults"], check=True,
                         capture_output=True, text=True).stdout
    return int(re.search(r"^spacing_margin_us = (\d+)$", out, re.M).group(1))


def run_tollgate(stub, refunds, prefix):
    with Tollgate(stub.url,
                  exit={"starts_per_second": RATE, "max_in_flight": IN_FLIGHT,
                        "spacing_margin_us": default_spacing_margin_us()},
                  provider={"timeout_ms": TIMEOUT_MS},
                  retry={"max_attempts": ATTEMPTS}) as tg:
        tg.start("serve")
        ids = ["%s-%06d" % (prefix, i) for i in range(1, refunds + 1)]
        started = time.monotonic()
        for op in ids:
            while True:
                status, headers, body = tg.submit(op, payment="pay_" + op)
                if status in (200, 202):
                    break
                if status != 503:  # admission: a caller waits Retry-After
                    raise RuntimeError("submit %s -> %s %r" % (op, status, body))
                time.sleep(float(headers.get("retry-after", "1")))
        final = tg.wait_final(ids, timeout=PHASE_TIMEOUT_S)
        seconds = time.monotonic() - started
    shutil.rmtree(tg.dir, ignore_errors=True)
    states = collections.Counter(rec["state"] for rec in final.values())
    view = "%d succeeded / %d rejected / %d manual" % (
        states["succeeded"], states["rejected"], states["manual"])
    return seconds, view


def run_node(script, stub, refunds, prefix, *extra):
    argv = ["node", os.path.join(HERE, script), stub.url, str(refunds), prefix] + list(extra)
    done = subprocess.run(argv, cwd=HERE, capture_output=True, text=True,
                          timeout=PHASE_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s" % (script, done.returncode, done.stderr))
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["seconds"], "%d succeeded / %d failed" % (result["succeeded"], result["failed"])


class Redis(tgtest.Proc):
    """A throwaway redis-server on loopback for BullMQ."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tgpeers-redis-")
        self.port = tgtest.free_port()
        super().__init__(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                          "--dir", self.dir, "--save", "", "--appendonly", "no"])
        tgtest.wait_until(self._pong, timeout=10, what="redis-server up")

    def _pong(self):
        if self.poll() is not None:
            raise RuntimeError("redis-server exited:\n" + self.stderr_text())
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def close(self):
        super().close()
        shutil.rmtree(self.dir, ignore_errors=True)


def keep(directory, prefix, arrivals, ledger):
    os.makedirs(directory, exist_ok=True)
    for what, data in (("arrivals", arrivals), ("ledger", ledger)):
        with open(os.path.join(directory, "%s.%s.json" % (prefix, what)), "w") as f:
            json.dump(data, f, indent=1)


def preflight(systems):
    if "tollgate" in systems:
        tgtest.binary("tollgate")
    if {"bottleneck", "bullmq"} & set(systems):
        if not shutil.which("node"):
            sys.exit("run.py: node is not installed (needed for bottleneck and bullmq)")
        if not os.path.isdir(os.path.join(HERE, "node_modules")):
            sys.exit("run.py: no node_modules: run `npm ci` in %s first" % HERE)
    if "bullmq" in systems and not shutil.which("redis-server"):
        sys.exit("run.py: redis-server is not installed (Debian package redis-server)")


def row(system, phase, f, seconds, view):
    return ("| %s | %s | %d (%d POST, %d GET) | %d | %.1f | %d | %d | %d | %d | %.1f | %s |"
            % (system, phase, f["arrivals"], f["posts"], f["gets"], f["under"], f["min_gap_ms"],
               f["most_in_1s"], f["most_posts_per_key"], f["executed"], f["executed_twice"],
               seconds, view))


HEADER = ("| system | provider | arrivals | gaps < 200 ms | min gap (ms) | most in 1 s "
          "| most POSTs / key | executed | executed twice | took (s) | own view |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"),
                    help="tollgate's build directory (tollgate, tollgate-stub)")
    ap.add_argument("--refunds", type=int, default=100, help="refunds per phase (100)")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="comma-separated, of: " + ", ".join(SYSTEMS))
    ap.add_argument("--keep", metavar="DIR",
                    help="also write each phase's stub records to "
                    "DIR/SYSTEM-PHASE.{arrivals,ledger}.json")
    args = ap.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    for s in systems:
        if s not in SYSTEMS:
            ap.error("unknown system %r (one of %s)" % (s, ", ".join(SYSTEMS)))
    if args.refunds < 1:
        ap.error("--refunds must be at least 1")
    os.environ["TG_BUILD_DIR"] = os.path.abspath(args.build)
    preflight(systems)

    redis = Redis() if "bullmq" in systems else None
    rows = []
    try:
        print("%d refunds per phase; 5 starts/s, 10 in flight, 3 s timeout, 3 attempts"
              % args.refunds, flush=True)
        for system in systems:
            for phase, mode in PHASES:
                prefix = "%s-%s" % (system, phase)
                with tgtest.start_stub("--mode", mode) as stub:
                    if system == "tollgate":
                        seconds, view = run_tollgate(stub, args.refunds, prefix)
                    elif system == "bottleneck":
                        seconds, view = run_node("bottleneck_job.js", stub, args.refunds, prefix)
                    else:
                        seconds, view = run_node("bullmq_job.js", stub, args.refunds, prefix,
                                                 str(redis.port))
                    # what was still open at the provider lands before it is read
                    tgtest.wait_until(stub.idle, timeout=60, interval=0.2, what="stub idle")
                    arrivals, ledger = stub.arrivals(), stub.ledger()
                    if args.keep:
                        keep(args.keep, prefix, arrivals, ledger)
                    rows.append(row(system, phase, provider_figures(arrivals, ledger), seconds,
                                    view))
                print(rows[-1], flush=True)
    finally:
        if redis:
            redis.close()
    print()
    print(HEADER)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
