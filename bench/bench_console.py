#!/usr/bin/env python3
"""bench_console — what open consoles cost the daemon, and whether they delay
the exit. Prints figures; never fails on a number.

It starts tollgate-stub (fast) and `tollgate serve` (API, console and
dispatcher in ONE process, the least forgiving case) on a fresh SQLite
store, preloads a backlog through the API so that a start is due at every
slot, then measures --rounds pairs of windows of --seconds each, alternating
(the machine is shared: alternating spreads its noise over both kinds):

  quiet       no dashboard open
  dashboards  --dashboards N consoles open, each doing what the page does:
              sign in, load the page and its files, read the last hour of
              the timeline once, then poll GET /ui/api/live?since=... once a
              second on its own keep-alive connection

For each window:
  CPU         the serve process's user+system CPU / wall time, in % of one
              core (the difference between the windows is what N dashboards
              cost)
  lateness    start_i - (start_{i-1} + 1/rate) from the call log, in ms:
              how late each start came against the earliest moment the pacer
              allowed it (p50, p99, max)
  polls       answered, their latency p50/p99 (dashboards window)

The dashboards run in this Python process on the same 2 cores, so they also
take CPU from the daemon's threads; real dashboards run in browsers
elsewhere.

usage: bench/bench_console.py [--build DIR] [--dashboards 50] [--seconds 60]
                              [--rate 5] [--rounds 2]
"""

import argparse
import hashlib
import http.client
import json
import os
import random
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

VIEWER_TOKEN = "bench-viewer-token"
ASSETS = ["uPlot.min.css", "console.css", "uPlot.iife.min.js", "i18n.js", "timeline.js",
          "app.js", "favicon.svg"]


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


class Dashboard(threading.Thread):
    """One open console, as the page behaves (app.js): one connection."""

    def __init__(self, port, stop):
        super().__init__(daemon=True)
        self.port, self.stop = port, stop
        self.polls = []  # (monotonic time, latency ms)
        self.errors = 0

    def req(self, conn, method, path, body=None, headers=None):
        h = {"Cookie": self.cookie} if getattr(self, "cookie", None) else {}
        h.update(headers or {})
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        data = r.read()
        return r.status, r.getheader("Set-Cookie"), data

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        self.cookie = None
        _, _, _ = self.req(conn, "GET", "/ui")
        st, cookie, _ = self.req(conn, "POST", "/ui/api/login",
                                 json.dumps({"token": VIEWER_TOKEN}),
                                 {"Content-Type": "application/json"})
        assert st == 200, st
        self.cookie = cookie.split(";")[0]
        self.req(conn, "GET", "/ui")
        for a in ASSETS:
            self.req(conn, "GET", "/ui/assets/" + a)
        self.req(conn, "GET", "/ui/api/session")
        now = int(time.time() * 1000)
        _, _, data = self.req(conn, "GET", "/ui/api/timeline?from=%d&to=%d"
                              % (now - 3600000, now + 1000))
        t = json.loads(data)["t"]
        since = t[-1] if t else 0
        nxt = time.monotonic() + random.random()
        while not self.stop.is_set():
            time.sleep(max(0, nxt - time.monotonic()))
            nxt += 1.0
            t0 = time.monotonic()
            try:
                st, _, data = self.req(conn, "GET", "/ui/api/live?since=%d" % (since * 1000))
            except (OSError, http.client.HTTPException):
                self.errors += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                continue
            if st != 200:
                self.errors += 1
                continue
            self.polls.append((t0, (time.monotonic() - t0) * 1000))
            s = json.loads(data)["series"]
            if s["t"]:
                since = s["t"][-1]
        conn.close()


def window(tg, proc, seconds):
    """CPU % of a core, the calls started in the window, and its bounds."""
    c0, w0, n0 = cpu_seconds(proc.pid), time.monotonic(), len(tg.calls())
    time.sleep(seconds)
    c1, w1 = cpu_seconds(proc.pid), time.monotonic()
    calls = sorted(tg.calls(), key=lambda c: c["start_mono_ns"])[n0:]
    return (c1 - c0) / (w1 - w0) * 100.0, calls, w0, w1


def lateness(calls, rate):
    s = [c["start_mono_ns"] for c in calls]
    interval = 1e9 / rate
    late = [(b - a - interval) / 1e6 for a, b in zip(s, s[1:])]
    return late, (len(s) - 1) / ((s[-1] - s[0]) / 1e9) if len(s) > 1 else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=None)
    ap.add_argument("--dashboards", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    if a.build:
        os.environ["TG_BUILD_DIR"] = os.path.abspath(a.build)
    need = int(a.rate * (2 * a.rounds * (a.seconds + 8) + 20)) + 50
    users = os.path.join(os.environ.get("TMPDIR", "/tmp"), "bench-console-users-%d" % os.getpid())
    with open(users, "w") as f:
        f.write("bench viewer sha256:%s\n" % hashlib.sha256(VIEWER_TOKEN.encode()).hexdigest())
    with tgtest.start_stub("--mode", "fast", "--max-records", str(4 * need + 100)) as stub, \
            Tollgate(stub.url, exit={"starts_per_second": a.rate, "max_in_flight": 10},
                     retry={"deadline_s": 86400}, admission={"enabled": "false"},
                     api={"max_connections": 1024}, ui={"users_file": users}) as tg:
        proc = tg.start("serve")
        for i in range(need):
            st, _, body = tg.submit("c-%07d" % i)
            assert st == 202, body
        time.sleep(5)  # the exit settles into its pace
        rows = {"quiet": [], "dash": []}
        polls, errors = [], 0
        for _ in range(a.rounds):
            rows["quiet"].append(window(tg, proc, a.seconds))
            stop = threading.Event()
            boards = [Dashboard(tg.api_port, stop) for _ in range(a.dashboards)]
            for b in boards:
                b.start()
            time.sleep(5)  # every dashboard has loaded its page and the hour
            w = window(tg, proc, a.seconds)
            rows["dash"].append(w)
            stop.set()
            for b in boards:
                b.join(15)
            polls += [p for b in boards for p in b.polls if w[2] <= p[0] < w[3]]
            errors += sum(b.errors for b in boards)
        print("tollgate serve, rate %g/s, backlog always due, %d x %d s windows of each kind"
              % (a.rate, a.rounds, a.seconds))
        print("  %-16s %8s %10s %10s %10s %9s %7s" % ("window", "CPU %", "late p50", "late p99",
                                                      "late max", "starts/s", "starts"))
        cpu = {}
        for kind, label in (("quiet", "quiet"), ("dash", "%d dashboards" % a.dashboards)):
            late = []
            starts = 0
            for c, calls, w0, w1 in rows[kind]:
                lt, _ = lateness(calls, a.rate)
                late += lt
                starts += len(calls)
            cpu[kind] = sum(r[0] for r in rows[kind]) / len(rows[kind])
            print("  %-16s %8.2f %9.3fms %9.3fms %9.3fms %9.3f %7d"
                  % (label, cpu[kind], pct(late, 50), pct(late, 99), max(late),
                     starts / (a.rounds * a.seconds), starts))
        n = len(polls)
        secs = a.rounds * a.seconds
        print("  %d dashboards cost %.2f %% of one core: %.0f us of CPU per poll"
              % (a.dashboards, cpu["dash"] - cpu["quiet"],
                 (cpu["dash"] - cpu["quiet"]) / 100.0 * secs / max(1, n) * 1e6))
        print("  %d polls answered in the windows (%.1f/s), %d errors; poll latency p50 %.2f ms "
              "p99 %.2f ms" % (n, n / secs, errors, pct([p[1] for p in polls], 50),
                                pct([p[1] for p in polls], 99)))
    os.unlink(users)


if __name__ == "__main__":
    main()
