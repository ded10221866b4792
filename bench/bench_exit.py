#!/usr/bin/env python3
"""bench_exit — how punctual and how cheap the exit is. Prints figures; never
fails on a number.

For each configured rate it starts tollgate-stub (fast) and tollgate on a
fresh store (SQLite with synchronous=FULL, MariaDB with --mysql URL,
PostgreSQL with --pg URL; --stores sqlite,mysql,pg runs each beside the others),
preloads a backlog through the API (so work is always due), starts the
dispatcher(s), lets them drain, and reads the call log:

  slot lateness   wire start_i - (wire start_{i-1} + the spacing the config
                  allows: 1/rate + exit.spacing_margin_us): how late each
                  start was against the earliest moment allowed
  achieved rate   (n - 1) / (last start - first start), against the configured
  CPU per start   the dispatcher's user+system CPU / starts, once its first
                  calls are out (the start-up's CPU is printed beside it)
  RSS             the dispatcher's peak resident set (VmHWM)

--margins lists exit.spacing_margin_us values to run (the default's cost
shows against 0). --shares N runs N dispatchers splitting the account
(exit.shares): achieved is the account's, merged. --idle S measures an
idle `tollgate serve` (no work) for S seconds, then an idle `tollgate
dispatch` owning the exit and one standing by: CPU as a share of a core.
With --big-backlog N it also runs with N extra pending rows inserted
straight into the SQLite file (the one place a bench writes the schema: a
1M-row fill through the API would take minutes of fsyncs).

usage: bench/bench_exit.py [--build DIR] [--rates 5,50,1000] [--seconds 10]
                           [--margins 1000,0] [--shares 1] [--mysql URL] [--pg URL]
                           [--stores sqlite,mysql,pg]
                           [--big-backlog 1000000] [--idle 60] [--tls plain]
"""

import argparse
import math
import os
import sqlite3
import collections
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402


def proc_stat(pid):
    # CPU time in nanoseconds from each thread's schedstat (the run time the
    # scheduler counted), where /proc/PID/stat counts 10 ms ticks: at 5/s a
    # tick is a twentieth of a second's CPU, too coarse to compare runs
    cpu = 0.0
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                cpu += int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
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
         "mtls": ("mtls", "provider-md"), "mtls-stripe": ("mtls", "stripe")}


_serial = iter(range(1, 1 << 30))


def store_for(server):
    """None (a SQLite file in the Tollgate's dir) or a fresh database on the
    MariaDB or PostgreSQL server of the url."""
    if not server:
        return None
    return "%s_bx_%d_%d" % (server, os.getpid(), next(_serial))


def store_name(server):
    if not server:
        return "SQLite FULL"
    return "PostgreSQL" if server.startswith("postgres") else "MariaDB"


def run(rate, seconds, big, mode="plain", margin_us=1000, shares=1, mysql=None, skew_ms=None,
        reuse=False):
    n = max(20, int(rate * seconds))
    tls, profile = MODES[mode]
    in_flight = max(10, 2 * shares)
    with tgtest.start_stub("--mode", "fast", "--max-records", str(4 * n + 100),
                           tls=tls, profile=profile) as stub, \
            Tollgate(stub.url, store_url=store_for(mysql), tls=tls, profile=profile,
                     exit=dict({"starts_per_second": rate, "max_in_flight": in_flight,
                                "spacing_margin_us": margin_us, "shares": shares},
                               **({} if skew_ms is None else {"clock_skew_ms": skew_ms})),
                     retry={"deadline_s": 86400}, admission={"enabled": "false"},
                     **({"provider": {"reuse_connections": "true"}} if reuse else {})) as tg:
        tg.start("api")
        for i in range(n):
            status, _, body = tg.submit("b-%07d" % i)
            assert status == 202, body
        if big:
            bulk_pending(tg.db, big, int(time.time() * 1000))
        ds = [tg.start("dispatch", wait_api=False) for _ in range(shares)]
        t0 = time.monotonic()
        seen = {"n": 0, "seq": 0, "base": None}

        def arrived():
            # the stub's record, read from where the last look stopped: the
            # bench must not load the machine it measures
            new = stub.arrivals(since=seen["seq"])
            if new:
                seen["n"] += len(new)
                seen["seq"] = new[-1]["seq"]
                if seen["base"] is None:
                    # the dispatchers' CPU once the first calls are out:
                    # what starting up cost (libraries, store, takeover)
                    # is not a start's
                    seen["base"] = (sum(proc_stat(d.pid)[0] for d in ds), seen["n"])
            return seen["n"] >= n
        tgtest.wait_until(arrived, timeout=seconds * 4 + 60, interval=0.5,
                          what="backlog drained")
        wall = time.monotonic() - t0
        stats = [proc_stat(d.pid) for d in ds]
        cpu, hwm = sum(c for c, _ in stats), max(h for _, h in stats)
        calls = sorted(tg.calls(), key=lambda c: c["start_mono_ns"])[:n]
        s = [c["start_mono_ns"] for c in calls]
        # the earliest a start may come after the one before: 1/rate
        # (ceil, in ns, as the pacer counts it) plus the margin
        allowed = math.ceil(1e9 / rate) + margin_us * 1000
        late = [(b - a - allowed) / 1e6 for a, b in zip(s, s[1:])]
        achieved = (len(s) - 1) / ((s[-1] - s[0]) / 1e9)
        print("rate %g/s, %s%s, %s, margin %d us%s, %d starts%s"
              % (rate, mode, ", keep-alive" if reuse else "",
                 store_name(mysql), margin_us,
                 ", %d shares%s" % (shares, "" if skew_ms is None else
                                    ", clock_skew_ms %d" % skew_ms) if shares > 1 else "",
                 len(s),
                 ", +%d pending rows" % big if big else ""))
        if shares == 1:
            print("  slot lateness ms  p50 %.3f  p99 %.3f  max %.3f"
                  % (pct(late, 50), pct(late, 99), max(late)))
        print("  min gap %.3f ms (1/rate %.3f ms)"
              % (min(b - a for a, b in zip(s, s[1:])) / 1e6, 1e3 / rate))
        print("  achieved %.3f/s = %.4f of configured" % (achieved, achieved / rate))
        if shares > 1:
            # while every share sends: the shares join one by one (each new
            # owner waits out a takeover first), so the merged rate above
            # includes a start-up in which fewer shares send
            by = collections.defaultdict(list)
            for c in calls:
                by[c["epoch"]].append(c["start_mono_ns"])
            lo = max(v[0] for v in by.values())
            hi = min(v[-1] for v in by.values())
            w = [t for t in s if lo <= t <= hi]
            if len(by) == shares and len(w) > 2:
                both = (len(w) - 1) / ((w[-1] - w[0]) / 1e9)
                print("  achieved while all %d shares send: %.3f/s = %.4f of configured "
                      "(%d starts; the shares' first starts %.2f s apart)"
                      % (shares, both, both / rate, len(w),
                         (lo - min(v[0] for v in by.values())) / 1e9))
        base_cpu, base_n = seen["base"]
        print("  dispatcher CPU %.3f s over %.1f s (%.3f s of it before its first calls "
              "were out); running: %.1f us per start; peak RSS %d KiB"
              % (cpu, wall, base_cpu, (cpu - base_cpu) / max(1, n - base_n) * 1e6, hwm))
        print("  in-flight max %d, mean latency %.2f ms"
              % (max(c["in_flight"] for c in calls),
                 statistics.mean(c["latency_ms"] or 0 for c in calls)))


def idle(seconds):
    """An idle exit (nothing to do), as a share of one core: `tollgate serve`,
    then a `tollgate dispatch` owning the exit and a second one standing by
    beside it (no API wakes them: they poll, backing off while idle)."""
    def measure(procs):
        time.sleep(2)  # past their start
        c0 = [proc_stat(p.pid)[0] for p in procs]
        t0 = time.monotonic()
        time.sleep(seconds)
        took = time.monotonic() - t0
        return took, [proc_stat(p.pid)[0] - c for p, c in zip(procs, c0)]

    with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
        took, (cpu,) = measure([tg.start("serve")])
        print("idle serve for %.0f s: CPU %.3f s = %.3f %% of one core"
              % (took, cpu, cpu / took * 100))
    with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
        owner = tg.start("dispatch", wait_api=False)
        time.sleep(1)  # the first to start owns the exit
        took, cpus = measure([owner, tg.start("dispatch", wait_api=False)])
        for what, cpu in zip(("owner", "standby"), cpus):
            print("idle dispatch (%s) for %.0f s: CPU %.3f s = %.3f %% of one core"
                  % (what, took, cpu, cpu / took * 100))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=None)
    ap.add_argument("--rates", default="5,1000")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--big-backlog", type=int, default=0)
    ap.add_argument("--tls", default="plain",
                    help="comma list of " + ", ".join(sorted(MODES)))
    ap.add_argument("--margins", default="1000",
                    help="comma list of exit.spacing_margin_us values")
    ap.add_argument("--shares", default="1", help="comma list of exit.shares values")
    ap.add_argument("--clock-skew", type=int, default=None,
                    help="exit.clock_skew_ms for --shares > 1 (default: the config's, 1)")
    ap.add_argument("--mysql", default=None,
                    help="a MariaDB url (a fresh database per run is made under it)")
    ap.add_argument("--pg", default=None,
                    help="a PostgreSQL url (a fresh database per run is made under it)")
    ap.add_argument("--stores", default=None,
                    help="comma list of sqlite, mysql, pg to run one after the other "
                    "(default: the one --mysql or --pg names, else sqlite)")
    ap.add_argument("--reuse", action="store_true",
                    help="provider.reuse_connections = true (keep-alive; default: a fresh "
                    "connection per call)")
    ap.add_argument("--idle", type=float, default=0,
                    help="also measure an idle serve, and an idle dispatch with a standby, "
                    "for this many seconds")
    a = ap.parse_args()
    if a.build:
        os.environ["TG_BUILD_DIR"] = os.path.abspath(a.build)
    for mode in a.tls.split(","):
        if mode not in MODES:
            ap.error("--tls: unknown mode %r" % mode)
    urls = {"sqlite": None, "mysql": a.mysql or os.environ.get("TG_TEST_MYSQL_URL"),
            "pg": a.pg or os.environ.get("TG_TEST_PG_URL")}
    names = a.stores.split(",") if a.stores else ["pg" if a.pg else "mysql" if a.mysql
                                                  else "sqlite"]
    for name in names:
        if name not in urls or (name != "sqlite" and not urls[name]):
            ap.error("--stores: %r needs its url (--mysql, --pg)" % name)
    for r in a.rates.split(","):
        for mode in a.tls.split(","):
            for m in a.margins.split(","):
                for sh in a.shares.split(","):
                    for name in names:
                        run(float(r), a.seconds, 0, mode, int(m), int(sh), urls[name],
                            a.clock_skew, a.reuse)
        if a.big_backlog:
            run(float(r), a.seconds, a.big_backlog, margin_us=int(a.margins.split(",")[0]))
    if a.idle:
        idle(a.idle)


if __name__ == "__main__":
    main()
