#!/usr/bin/env python3
"""bench/crash-sweep/run.py — kill -9 at random instants, many times, and
account for every refund afterwards, in the style of Jepsen's checkers
(issue 16, section 2). Prints a table; never fails on a number. Run by hand,
never in CI (docs/reliability.md has its table and the command).

One run, from its own seed (--seed + run number, so any run replays with
--runs 1 --seed N):

  - a fresh store (a SQLite file, or a new MariaDB database on --mysql-url,
    or a new PostgreSQL database on --pg-url),
    a fresh tollgate-stub whose every refund request draws its fate from a
    seeded mix: fast, slow past the call timeout (executes, answers after
    tollgate gave up), drop (executes, closes the connection unanswered),
    503 (executes nothing);
  - `tollgate serve` at 20 starts/s, 4 in flight, calls of 600 ms, with a
    client sending --refunds refunds through its API as a careful client
    does (the same request again after a 503 or a dropped connection);
  - --kills times: SIGKILL at an instant drawn uniformly in the first
    --window seconds of the process's life (the first one's counted from its
    API answering; the next ones' from their start: while it starts, takes
    over, claims, waits for answers, settles), and at once a new one;
  - with --shares N > 1: `tollgate api` and N `tollgate dispatch` processes
    splitting the account (exit.shares = N), and each kill takes one of the
    dispatchers, drawn at random (a new one takes its share over);
  - with --accounts A > 1: A provider accounts ([account.aK], each at the
    rate and cap above, all at the one stub; the client names each refund's
    account, round robin, and its id starts with the account's name), served
    by one `serve`, or with --dispatchers D > 1 by `tollgate api` and D
    `tollgate dispatch` processes, each taking at most ceil(A / (D - 1))
    accounts (dispatch.max_accounts: the survivors of a kill can take the
    killed one's accounts), each kill taking one of them;
  - then the last one runs until every refund in the store is final or in
    manual review (or --settle-s passes).

The checker reads three histories: the client's (what each intake request
was answered), tollgate's (its store, through the API: each refund's state
and call log) and the provider's (the stub's ledger of executions and its
arrivals, each with its Idempotency-Key and request id):

  lost            answered 202/200 to the client, and not final nor in
                  manual review at the end (or not in the store at all)
  executed twice  the provider executed one refund more than once
  unexpected      the provider executed a refund tollgate has no record of
  recovered       refunds a killed process left in flight (a call row closed
                  "outcome unknown (owner lost)" by the next owner) that
                  still reached a final state
  most POSTs      the most POSTs that carried one Idempotency-Key (the
                  budget is 3, plus one for each the provider refused with
                  429/503: it executed nothing, and the attempt is given back
                  unless retry.count_limited; more than that is an anomaly)
  spacing         consecutive arrivals at the provider closer than 1/rate in
                  whole milliseconds of the stub's clock, as a gateway's
                  limiter judges them (per account, with --accounts)
  also: refunds in the store that the client never saw a 2xx for (a 503 or
  a dropped answer after the commit: the client's retry finds them),
  arrivals at the provider without their call row in tollgate's log (record
  before send: 0 is promised), manual, and the runs' time.

usage: python3 bench/crash-sweep/run.py [--build DIR] [--runs 200]
         [--store sqlite|mysql|pg|all] [--mysql-url URL] [--pg-url URL] [--refunds 12] [--kills 2] [--window 1.5] [--seed 1]
         [--shares 1] [--accounts 1] [--dispatchers 1]
"""

import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

RATE = 20.0
IN_FLIGHT = 4
TIMEOUT_MS = 600
MIX = "fast=5,slow=2,drop=2,unavailable=1"
SLOW_MS = 900  # past the call timeout
FINAL = ("succeeded", "rejected", "manual", "cancelled")
OWNER_LOST = "outcome unknown (owner lost)"


class Client:
    """Sends each refund until it is answered 2xx, as a careful client:
    the same request again after a 503 or a connection that dropped."""

    def __init__(self, tg, ops, account_of=None):
        self.tg, self.ops, self.account_of = tg, ops, account_of
        self.answers = collections.defaultdict(list)  # op -> [status or "conn"]
        self.accepted = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        for op in self.ops:
            body = {"operation_id": op, "payment_id": "pay_" + op, "amount": 1500,
                    "currency": "TWD"}
            if self.account_of:
                body["account"] = self.account_of(op)
            while not self.stop.is_set():
                try:
                    status, _, _ = tgtest.http_json(
                        "POST", self.tg.api + "/v1/refunds", body, self.tg.headers(), timeout=3)
                except OSError:
                    status = "conn"
                self.answers[op].append(status)
                if status in (200, 202):
                    self.accepted.add(op)
                    break
                time.sleep(0.05)
            time.sleep(0.02)


def api_json(tg, path):
    try:
        return tgtest.http_json("GET", tg.api + path, None, tg.headers(), timeout=3)
    except OSError:
        return None, None, None


def states(tg, ops):
    out = {}
    for op in ops:
        status, _, body = api_json(tg, "/v1/refunds/" + op)
        if status == 200:
            out[op] = body
    return out


def drop_database(url):
    """Best effort: the run's database goes (the mariadb client, or psql)."""
    u = urllib.parse.urlsplit(url)
    if u.scheme.startswith("postgres"):
        if shutil.which("psql"):
            subprocess.run(["psql", "-X", "-q", urllib.parse.urlunsplit(
                u._replace(path="/postgres")), "-c",
                'DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % u.path.lstrip("/")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return
    if not shutil.which("mariadb"):
        return
    subprocess.run(["mariadb", "--no-defaults", "-h", u.hostname, "-P", str(u.port or 3306),
                    "-u", urllib.parse.unquote(u.username or ""),
                    "-p" + urllib.parse.unquote(u.password or ""), "-e",
                    "DROP DATABASE IF EXISTS `%s`" % u.path.lstrip("/")],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def one_run(args, store, n, seed):
    rng = random.Random(seed)
    accounts = ["a%d" % k for k in range(args.accounts)] if args.accounts > 1 else []
    if accounts:
        ops = ["%s-cs%d-%03d" % (accounts[i % len(accounts)], n, i) for i in range(args.refunds)]
    else:
        ops = ["cs%d-%03d" % (n, i) for i in range(args.refunds)]
    sections = {"account." + a: {"exit.starts_per_second": RATE} for a in accounts}
    dispatchers = args.shares if args.shares > 1 else (args.dispatchers if accounts else 1)
    if accounts and dispatchers > 1:
        sections["dispatch"] = {"max_accounts": -(-len(accounts) // (dispatchers - 1))}
    store_url = None
    if store in ("mysql", "pg"):
        store_url = "%s_sweep_%d_%d" % (args.mysql_url if store == "mysql" else args.pg_url,
                                        os.getpid(), n)
    t0 = time.monotonic()
    with tgtest.start_stub("--mode", "mix:" + MIX, "--delay-ms", str(SLOW_MS),
                           "--retry-after", "none", "--seed", str(seed)) as stub, \
            Tollgate(stub.url, store_url=store_url,
                     exit={"starts_per_second": RATE, "max_in_flight": IN_FLIGHT,
                           "default_hold_ms": 200, "timeout_hold_ms": 200,
                           "shares": args.shares},
                     provider={"timeout_ms": TIMEOUT_MS, "connect_timeout_ms": 300},
                     retry={"query_interval_ms": 300, "backoff_base_ms": 200,
                            "backoff_min_ms": 100, "backoff_cap_ms": 1000},
                     **sections) as tg:
        # a config it refuses raises here, with its words
        if dispatchers > 1:
            tg.start("api")
            kind = "dispatch"
            procs = [tg.start(kind, wait_api=False) for _ in range(dispatchers)]
        else:
            kind = "serve"
            procs = [tg.start(kind)]
        client = Client(tg, ops, (lambda op: op.split("-", 1)[0]) if accounts else None)
        kills = 0
        for _ in range(args.kills):
            born = time.monotonic()
            time.sleep(max(0.0, born + rng.uniform(0.0, args.window) - time.monotonic()))
            k = rng.randrange(len(procs))
            procs[k].send_signal(signal.SIGKILL)
            procs[k].popen.wait(10)
            kills += 1
            procs[k] = tg.start(kind, wait_api=False)
        client.thread.join(60)
        client.stop.set()
        # the last one finishes what the store holds
        deadline = time.monotonic() + args.settle_s
        while time.monotonic() < deadline:
            held = states(tg, ops)
            if held and all(r["state"] in FINAL for r in held.values()) and \
                    set(client.accepted) <= set(held):
                break
            time.sleep(0.2)
        try:
            tgtest.wait_until(stub.idle, timeout=10, what="nothing open at the stub")
        except AssertionError:
            pass
        held = states(tg, ops)
        calls = []
        since = 0
        while True:
            status, _, body = api_json(tg, "/v1/calls?since=%d&limit=1000" % since)
            if status != 200 or not body["calls"]:
                break
            calls.extend(body["calls"])
            since = body["next_since"]
        ledger = stub.ledger()["operations"]
        arrivals = [a for a in stub.arrivals() if a["path"].startswith("/v1/")]
        for proc in procs:
            proc.stop()
    shutil.rmtree(tg.dir, ignore_errors=True)
    if store_url:
        drop_database(store_url)

    r = {"kills": kills, "seconds": time.monotonic() - t0, "anomalies": []}
    accepted = client.accepted
    lost = [op for op in accepted if op not in held or held[op]["state"] not in FINAL]
    twice = [op for op, rec in ledger.items() if rec["executions"] > 1]
    unexpected = [op for op, rec in ledger.items() if rec["executions"] >= 1 and op not in held]
    lost_owner = {c["operation_id"] for c in calls if c.get("error") == OWNER_LOST}
    recovered = [op for op in lost_owner if op in held and held[op]["state"] in FINAL]
    posts = collections.Counter(a["idempotency_key"] for a in arrivals if a["method"] == "POST")
    # the budget counts the POSTs the provider did not refuse with 429/503
    # (it executed nothing; retry.count_limited = false gives the attempt back)
    counted = collections.Counter(a["idempotency_key"] for a in arrivals
                                  if a["method"] == "POST" and a.get("answer") not in (429, 503))
    logged = {c["request_id"] for c in calls}
    unrecorded = [a.get("request_id") for a in arrivals if a.get("request_id") not in logged]
    spacing = 0
    for prefix in [a + "-" for a in accounts] or [""]:
        t = sorted(a["mono_ns"] // 1000000 for a in arrivals
                   if (a.get("idempotency_key") or "").startswith(prefix))
        spacing += sum(1 for a, b in zip(t, t[1:]) if (b - a) * RATE < 1000)
    r.update(accepted=len(accepted), stored=len(held), lost=len(lost), twice=len(twice),
             unexpected=len(unexpected), recovered=len(recovered),
             posts=max(posts.values()) if posts else 0, spacing=spacing,
             unanswered=len([op for op in held if op not in accepted]),
             unrecorded=len(unrecorded),
             manual=sum(1 for rec in held.values() if rec["state"] == "manual"))
    for what, found in (("lost", lost), ("executed twice", twice), ("unexpected", unexpected),
                        ("arrived without a call row", unrecorded)):
        for op in found:
            r["anomalies"].append("%s: %s (replay: --store %s --runs 1 --seed %d)"
                                  % (what, op, store, seed))
    if counted and max(counted.values()) > 3:
        r["anomalies"].append("%d POSTs for one key, 429/503 refusals aside (seed %d)"
                              % (max(counted.values()), seed))
    return r


STORE_NAMES = {"sqlite": "SQLite", "mysql": "MariaDB", "pg": "PostgreSQL"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", help="build dir (default: ../../build)")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--store", choices=("sqlite", "mysql", "pg", "both", "all"), default="all",
                    help="both: sqlite and mysql; all: the three")
    ap.add_argument("--mysql-url", default=os.environ.get("TG_TEST_MYSQL_URL", ""))
    ap.add_argument("--pg-url", default=os.environ.get("TG_TEST_PG_URL", ""))
    ap.add_argument("--refunds", type=int, default=12)
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument("--window", type=float, default=1.5)
    ap.add_argument("--settle-s", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shares", type=int, default=1,
                    help="exit.shares: with N > 1, an api process and N dispatchers, "
                    "each kill taking one of them")
    ap.add_argument("--accounts", type=int, default=1,
                    help="provider accounts ([account.aK]) at the one stub, refunds round robin")
    ap.add_argument("--dispatchers", type=int, default=1,
                    help="with --accounts: an api process and D dispatchers sharing the "
                    "accounts (dispatch.max_accounts), each kill taking one of them")
    args = ap.parse_args()
    if args.build:
        os.environ["TG_BUILD_DIR"] = os.path.abspath(args.build)
    elif not os.environ.get("TG_BUILD_DIR"):
        os.environ["TG_BUILD_DIR"] = os.path.join(HERE, "..", "..", "build")
    stores = {"both": ["sqlite", "mysql"], "all": ["sqlite", "mysql", "pg"]}.get(
        args.store, [args.store])
    if "mysql" in stores and not args.mysql_url:
        print("no --mysql-url (or TG_TEST_MYSQL_URL): no MariaDB", file=sys.stderr)
        stores.remove("mysql")
    if "pg" in stores and not args.pg_url:
        print("no --pg-url (or TG_TEST_PG_URL): no PostgreSQL", file=sys.stderr)
        stores.remove("pg")

    rows = []
    for store in stores:
        tot = collections.Counter()
        anomalies = []
        for n in range(args.runs):
            seed = args.seed + n
            r = one_run(args, store, n, seed)
            anomalies += r.pop("anomalies")
            for k in ("kills", "accepted", "stored", "lost", "twice", "unexpected", "recovered",
                      "spacing", "unanswered", "unrecorded", "manual", "seconds"):
                tot[k] += r[k]
            tot["posts"] = max(tot["posts"], r["posts"])
            if (n + 1) % 10 == 0:
                print("%s: %d runs, lost %d, twice %d, unexpected %d" % (
                    store, n + 1, tot["lost"], tot["twice"], tot["unexpected"]),
                    file=sys.stderr, flush=True)
        rows.append((store, tot, anomalies))

    where = ""
    if args.shares > 1:
        where = ", of %d dispatchers sharing the account" % args.shares
    elif args.accounts > 1 and args.dispatchers > 1:
        where = ", of %d dispatchers sharing %d accounts" % (args.dispatchers, args.accounts)
    elif args.accounts > 1:
        where = ", of one process serving %d accounts" % args.accounts
    fault = ("kill -9 x%d at random instants in each run's first %.1f s%s, stub mix "
             "(fast, slow past the timeout, drop, 503)" % (args.kills, args.window, where))
    print("| fault | runs | lost | executed twice | unexpected | most POSTs for one key "
          "| spacing violations |")
    print("|---|---|---|---|---|---|---|")
    for store, tot, _ in rows:
        print("| %s, %s | %d | %d | %d | %d | %d | %d |" % (
            fault, STORE_NAMES[store], args.runs, tot["lost"],
            tot["twice"], tot["unexpected"], tot["posts"], tot["spacing"]))
    print()
    print("| store | runs | kills | refunds accepted | recovered | in the store without a 2xx "
          "| arrivals without a call row | manual | time |")
    print("|---|---|---|---|---|---|---|---|---|")
    for store, tot, _ in rows:
        print("| %s | %d | %d | %d | %d | %d | %d | %d | %.0f s |" % (
            store, args.runs, tot["kills"], tot["accepted"], tot["recovered"],
            tot["unanswered"], tot["unrecorded"], tot["manual"], tot["seconds"]))
    for store, _, anomalies in rows:
        for a in anomalies:
            print("%s: %s" % (store, a))


if __name__ == "__main__":
    main()
