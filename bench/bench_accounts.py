#!/usr/bin/env python3
"""bench_accounts — many provider accounts in one process. Prints figures;
never fails on a number.

Busy: N accounts (--accounts 50), each [account.aNNN] at --rate (5/s) on one
tollgate-stub, every account's refunds named aNNN-SEQ (so the stub's arrival
record tells the accounts apart by id prefix). A backlog of --seconds worth of
refunds per account is loaded through `tollgate api` (the batch endpoint),
then ONE `tollgate serve` drains it: all N exits on one event loop, with the
API beside them. From the call log (/v1/calls) and /proc:

  slot lateness   per account, wire start_i - (wire start_{i-1} + the spacing
                  its config allows: 1/rate + exit.spacing_margin_us); its
                  p99 per account, then those p99s across accounts (median,
                  worst), and every account's gaps pooled
  achieved rate   per account, (n - 1) / (last start - first start)
  CPU per start   serve's user+system CPU (each thread's schedstat) from its
                  first call out to the last start / starts in between
  RSS             serve's resident set at the end and its peak (VmRSS, VmHWM)
  stub            every refund arrived exactly once, each at its account's
                  prefix (POSTs by idempotency key)

Idle: M accounts configured (--idle-accounts 500; also 1 and 50 beside it),
no work: `tollgate serve` started, left --idle-seconds, then its CPU as a
share of one core, its RSS, threads and open files.

usage: bench/bench_accounts.py [--build DIR] [--accounts 50] [--rate 5]
                               [--seconds 20] [--idle-accounts 1,50,500]
                               [--idle-seconds 30] [--mysql URL] [--skip-busy]
                               [--skip-idle]
"""

import argparse
import collections
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402
from bench_exit import pct  # noqa: E402

BATCH = 500  # refunds per POST /v1/refunds:batch
MARGIN_US = 1000  # exit.spacing_margin_us: the config's default (the tests' helper sets 5000)


def cpu_s(pid):
    """The process's CPU in seconds from each thread's schedstat (ns), where
    /proc/PID/stat counts 10 ms ticks."""
    cpu = 0.0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                cpu += int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            pass  # a thread that just ended
    return cpu


def status(pid):
    """VmRSS, VmHWM (KiB) and Threads of /proc/PID/status, and open fds."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads"):
                out[k] = int(v.split()[0])
    out["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    return out


def metrics_lateness(tg):
    """The exit's own slot lateness per account (/metrics,
    tollgate_slot_lateness_seconds: how late a start came after its slot once
    work was waiting, the loop's part without the store's): {account: p99 as
    the bucket bound it falls in, seconds}."""
    for _ in range(5):
        st, _, raw = tgtest.http_request("GET", tg.api + "/metrics", None, tg.headers())
        if st == 200:
            break
        print("  (GET /metrics: %s %s)" % (st, raw[:200].decode(errors="replace")))
        time.sleep(1)
    else:
        return {}
    buckets = collections.defaultdict(list)
    for line in raw.decode().splitlines():
        if line.startswith("tollgate_slot_lateness_seconds_bucket{"):
            labels, value = line[len("tollgate_slot_lateness_seconds_bucket{"):].split("} ")
            kv = dict(x.split("=", 1) for x in labels.split(","))
            le = kv["le"].strip('"')
            buckets[kv["account"].strip('"')].append(
                (float("inf") if le == "+Inf" else float(le), float(value)))
    out = {"page_kib": len(raw) / 1024}
    for acct, bs in buckets.items():
        bs.sort()
        total = bs[-1][1]
        out[acct] = next((le for le, n in bs if total and n >= 0.99 * total), float("nan"))
    return out


def name(i):
    return "a%03d" % i


def accounts_sections(n, rate, in_flight):
    return {"account." + name(i): {"exit.starts_per_second": rate,
                                   "exit.max_in_flight": in_flight} for i in range(n)}


def store_for(server):
    if not server:
        return None
    return "%s_ba_%d_%d" % (server, os.getpid(), int(time.time()))


def preload(tg, naccounts, per_account):
    """per_account refunds for every account, through the batch endpoint,
    interleaved (every account's first, then every second, ...)."""
    items = [{"operation_id": "%s-%06d" % (name(i), k), "payment_id": "pay_b",
              "amount": 100, "currency": "TWD", "account": name(i)}
             for k in range(per_account) for i in range(naccounts)]
    for at in range(0, len(items), BATCH):
        st, _, body = tgtest.http_json("POST", tg.api + "/v1/refunds:batch",
                                       {"refunds": items[at:at + BATCH]}, tg.headers())
        assert st == 200, (st, body)
        bad = [r for r in body["results"] if r["status"] != 202]
        assert not bad, bad[:3]
    return len(items)


def busy(n, rate, seconds, mysql):
    per = max(10, int(rate * seconds))
    total = n * per
    in_flight = 4
    with tgtest.start_stub("--mode", "fast", "--max-records", str(2 * total + 1000)) as stub, \
            Tollgate(stub.url, store_url=store_for(mysql), exit={"spacing_margin_us": MARGIN_US},
                     retry={"deadline_s": 86400}, admission={"enabled": "false"},
                     **accounts_sections(n, rate, in_flight)) as tg:
        api = tg.start("api")
        t = time.monotonic()
        assert preload(tg, n, per) == total
        took_load = time.monotonic() - t
        api.stop()
        serve = tg.start("serve")
        t0 = time.monotonic()
        seen = {"n": 0, "seq": 0, "base": None, "arr": []}

        def arrived():
            new = stub.arrivals(since=seen["seq"])
            if new:
                seen["arr"].extend(a for a in new if a["method"] == "POST")
                seen["n"] = len(seen["arr"])
                seen["seq"] = new[-1]["seq"]
                if seen["base"] is None:
                    # serve's CPU once the first calls are out: starting up
                    # (libraries, the store, every account's takeover) is
                    # not a start's
                    seen["base"] = (cpu_s(serve.pid), seen["n"], time.monotonic())
            return seen["n"] >= total
        tgtest.wait_until(arrived, timeout=seconds * 6 + 120, interval=0.5,
                          what="every account's backlog drained")
        cpu_end, t_end = cpu_s(serve.pid), time.monotonic()
        st = status(serve.pid)
        own = metrics_lateness(tg)
        calls = [c for c in tg.calls() if c["kind"] == "first"]
        by = collections.defaultdict(list)
        for c in calls:
            by[c["operation_id"].split("-")[0]].append(c["start_mono_ns"])
        allowed = math.ceil(1e9 / rate) + MARGIN_US * 1000
        p99s, rates, pooled = [], [], []
        for acct in sorted(by):
            s = sorted(by[acct])
            late = [(b - a - allowed) / 1e6 for a, b in zip(s, s[1:])]
            pooled.extend(late)
            p99s.append((pct(late, 99), acct))
            rates.append((len(s) - 1) / ((s[-1] - s[0]) / 1e9))
        keys = collections.Counter(a["idempotency_key"] for a in seen["arr"])
        per_prefix = collections.Counter(k.split("-")[0] for k in keys)
        base_cpu, base_n, base_t = seen["base"]
        print("busy: %d accounts x %g/s in one `tollgate serve` (%s), %d refunds each "
              "(%d in all, loaded in %.1f s), drained in %.1f s"
              % (n, rate, "MariaDB" if mysql else "SQLite FULL", per, total, took_load,
                 t_end - t0))
        print("  stub: %d POSTs, %d distinct keys, %d sent twice, %d account prefixes seen "
              "(each %d..%d refunds)"
              % (len(seen["arr"]), len(keys), sum(1 for v in keys.values() if v > 1),
                 len(per_prefix), min(per_prefix.values()), max(per_prefix.values())))
        p99s.sort()
        print("  slot lateness p99 per account (ms): median %.3f, best %.3f, worst %.3f (%s)"
              % (pct([p for p, _ in p99s], 50), p99s[0][0], p99s[-1][0], p99s[-1][1]))
        print("  slot lateness, every account's gaps pooled (ms): p50 %.3f  p99 %.3f  "
              "max %.3f" % (pct(pooled, 50), pct(pooled, 99), max(pooled)))
        if own:
            page = own.pop("page_kib")
            hist = collections.Counter(own.values())
            print("  the exit's own slot lateness p99 per account (/metrics, bucket bound): %s"
                  % ", ".join("<= %g ms: %d" % (le * 1e3, hist[le]) for le in sorted(hist)))
            print("  (the /metrics page: %.0f KiB)" % page)
        print("  achieved per account: min %.3f/s, median %.3f/s, max %.3f/s "
              "(configured %g/s; %.1f starts/s in all)"
              % (min(rates), pct(rates, 50), max(rates), rate, sum(rates)))
        print("  serve CPU %.2f s from its first call out to the last start (%.1f s, %d starts): "
              "%.1f us per start, %.1f %% of one core"
              % (cpu_end - base_cpu, t_end - base_t, total - base_n,
                 (cpu_end - base_cpu) / max(1, total - base_n) * 1e6,
                 (cpu_end - base_cpu) / (t_end - base_t) * 100))
        print("  serve RSS %d KiB at the end, peak %d KiB; %d threads, %d open files"
              % (st["VmRSS"], st["VmHWM"], st["Threads"], st["fds"]))


def idle(n, seconds, mysql):
    with tgtest.start_stub("--mode", "fast") as stub, \
            Tollgate(stub.url, store_url=store_for(mysql), admission={"enabled": "false"},
                     **(accounts_sections(n, 5, 4) if n > 1 else {})) as tg:
        t = time.monotonic()
        serve = tg.start("serve")
        up = time.monotonic() - t
        time.sleep(5)  # past every account's takeover wait
        c0, t0 = cpu_s(serve.pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_s(serve.pid), time.monotonic()
        st = status(serve.pid)
        print("idle: %d account%s configured, `tollgate serve` (API up in %.1f s), "
              "for %.0f s: CPU %.2f s = %.2f %% of one core; RSS %d KiB (peak %d KiB, "
              "%.0f KiB per account); %d threads, %d open files"
              % (n, "s" if n > 1 else "", up, t1 - t0, c1 - c0, (c1 - c0) / (t1 - t0) * 100,
                 st["VmRSS"], st["VmHWM"], st["VmRSS"] / n, st["Threads"], st["fds"]))
        return st["VmRSS"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=None)
    ap.add_argument("--accounts", type=int, default=50)
    ap.add_argument("--rate", type=float, default=5)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--idle-accounts", default="1,50,500")
    ap.add_argument("--idle-seconds", type=float, default=30)
    ap.add_argument("--mysql", default=None,
                    help="a MariaDB url (a fresh database per run is made under it)")
    ap.add_argument("--skip-busy", action="store_true")
    ap.add_argument("--skip-idle", action="store_true")
    a = ap.parse_args()
    if a.build:
        os.environ["TG_BUILD_DIR"] = os.path.abspath(a.build)
    if not a.skip_busy:
        busy(a.accounts, a.rate, a.seconds, a.mysql)
    if not a.skip_idle:
        rss = {}
        for n in (int(x) for x in a.idle_accounts.split(",")):
            rss[n] = idle(n, a.idle_seconds, a.mysql)
        if len(rss) > 1:
            lo, hi = min(rss), max(rss)
            print("idle: %.0f KiB more RSS per account from %d to %d accounts"
                  % ((rss[hi] - rss[lo]) / (hi - lo), lo, hi))


if __name__ == "__main__":
    main()
