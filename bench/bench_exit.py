#!/usr/bin/env python3
"""bench_exit — how punctual and how cheap the exit is. Prints figures; never
fails on a number.

For each configured rate it starts tollgate-stub (fast) and tollgate on a
fresh SQLite store, preloads a backlog through the API (so work is always
due), starts the dispatcher, lets it drain, and reads the call log:

  slot lateness   start_i - (start_{i-1} + 1/rate): how late each start was
                  against the earliest moment the pacer allowed it
  achieved rate   (n - 1) / (last start - first start), against the configured
  CPU per start   the dispatcher's user+system CPU / starts
  RSS             the dispatcher's peak resident set (VmHWM)

With --big-backlog N it also measures the dispatcher's RSS and claim pace
with N extra pending rows inserted straight into the SQLite file (the one
place a bench writes the schema: a 1M-row fill through the API would take
minutes of fsyncs).

With --tls plain,https,mtls-stripe-like it runs each rate over plain HTTP,
over HTTPS (a fresh connection, so a full TLS handshake, per call), and over
mutual TLS against the stub in the stripe-like provider profile demanding a
bearer key and signed requests (tests/integration/tgprovider.py makes the
certificates): what TLS costs the exit's punctuality.

usage: bench/bench_exit.py [--build DIR] [--rates 5,1000] [--seconds 10]
                           [--big-backlog 1000000] [--tls plain,https,mtls-stripe-like]
"""

import argparse
import os
import sqlite3
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402


def proc_stat(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    hwm = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return cpu, hwm


def pct(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    k = min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))
    return values[k]


def bulk_pending(db, n, now_ms):
    con = sqlite3.connect(db)
    con.execute("BEGIN")
    con.executemany(
        "INSERT INTO operations (operation_id, payment_id, amount, currency, state, "
        "attempt_limit, query_limit, accepted_at, deadline_at, updated_at) "
        "VALUES (?, 'pay_bench', 100, 'TWD', 'pending', 3, 10, ?, ?, ?)",
        (("big-%07d" % i, now_ms + 1000 + i, now_ms + 86400000, now_ms) for i in range(n)))
    con.commit()
    con.close()


MODES = {"plain": ("", "provider-md"), "https": ("https", "provider-md"),
         "mtls": ("mtls", "provider-md"), "mtls-stripe-like": ("mtls", "stripe-like")}


def run(rate, seconds, big, mode="plain"):
    n = max(20, int(rate * seconds))
    tls, profile = MODES[mode]
    with tgtest.start_stub("--mode", "fast", "--max-records", str(4 * n + 100),
                           tls=tls, profile=profile) as stub, \
            Tollgate(stub.url, tls=tls, profile=profile,
                     exit={"starts_per_second": rate, "max_in_flight": 10},
                     retry={"deadline_s": 86400}) as tg:
        tg.start("api")
        for i in range(n):
            status, _, body = tg.submit("b-%07d" % i)
            assert status == 202, body
        if big:
            bulk_pending(tg.db, big, int(time.time() * 1000))
        d = tg.start("dispatch", wait_api=False)
        t0 = time.monotonic()
        tgtest.wait_until(lambda: len(tg.calls()) >= n, timeout=seconds * 4 + 60,
                          interval=0.5, what="backlog drained")
        wall = time.monotonic() - t0
        cpu, hwm = proc_stat(d.pid)
        calls = sorted(tg.calls(), key=lambda c: c["start_mono_ns"])[:n]
        s = [c["start_mono_ns"] for c in calls]
        interval = 1e9 / rate
        late = [(b - a - interval) / 1e6 for a, b in zip(s, s[1:])]
        achieved = (len(s) - 1) / ((s[-1] - s[0]) / 1e9)
        print("rate %g/s, %s, %d starts%s" % (rate, mode, len(s),
                                                ", +%d pending rows" % big if big else ""))
        print("  slot lateness ms  p50 %.3f  p99 %.3f  max %.3f  (min gap %.3f ms)"
              % (pct(late, 50), pct(late, 99), max(late), min(b - a for a, b in zip(s, s[1:]))
                 / 1e6))
        print("  achieved %.3f/s = %.4f of configured" % (achieved, achieved / rate))
        print("  dispatcher CPU %.3f s over %.1f s: %.1f us per start; peak RSS %d KiB"
              % (cpu, wall, cpu / len(s) * 1e6, hwm))
        print("  in-flight max %d, mean latency %.2f ms"
              % (max(c["in_flight"] for c in calls),
                 statistics.mean(c["latency_ms"] or 0 for c in calls)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=None)
    ap.add_argument("--rates", default="5,1000")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--big-backlog", type=int, default=0)
    ap.add_argument("--tls", default="plain",
                    help="comma list of " + ", ".join(sorted(MODES)))
    a = ap.parse_args()
    if a.build:
        os.environ["TG_BUILD_DIR"] = os.path.abspath(a.build)
    for mode in a.tls.split(","):
        if mode not in MODES:
            ap.error("--tls: unknown mode %r" % mode)
    for r in a.rates.split(","):
        for mode in a.tls.split(","):
            run(float(r), a.seconds, 0, mode)
        if a.big_backlog:
            run(float(r), a.seconds, a.big_backlog)


if __name__ == "__main__":
    main()
