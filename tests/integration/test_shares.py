"""More than one dispatcher (issue 7): the account quota split into shares.

Two `tollgate dispatch` processes on one store, [exit] shares = 2 of an
account of 10 starts/s, against one stub. Judged from outside:
  - the provider never receives more than the account's limit in any 1 s
    window by arrival time (checked against limit + 1, the room two
    independent pacers needed before the shares started on one grid; the
    door test below checks the grid's spacing itself);
  - each dispatcher's own starts (one epoch = one share holding) are spaced
    at least 1 / limit (a run at the account's rate inside each of its
    windows) and come to no more than its share of the account;
  - no operation is sent by both: every arrival's request id is in the call
    log once, every operation executed once at the provider, and an
    operation's calls span more than one epoch only where its first epoch
    was the killed dispatcher's (a takeover);
  - a third dispatcher waits as a standby while both shares are held, and
    takes the share of the one that is killed;
  - a dispatcher whose [exit] split disagrees with the one in force refuses
    to start while a share of it is held;
  - at the provider's door (issue 14): a gateway limiter at the account's
    rate (the stub's --limit-rate, whole milliseconds) never refuses the two
    shares together, and the account's starts, both shares merged, are
    1 / limit apart: the shares start on one grid, each in its own windows;
  - a 429/503 with Retry-After that one share receives holds every share:
    nobody sends to the provider until it has passed;
  - orphaned shares (issue 26 §4): after a kill -9 of one of two, the
    survivor takes the orphaned share after the takeover wait and the
    account's rate at the door comes back to at least 0.8 of the two
    processes' and above what one share alone can send,
    its spacing never below the account's, nothing sent twice; a new
    dispatcher then gets the share back (the survivor drains it and
    releases its lock first: never two owners of one share) and sends;
    a paused (SIGSTOP) owner keeps its share: nobody takes it over.

This file runs them on SQLite (OFD locks on <db>.owner / <db>.share1);
test_shares_mariadb.py runs the same tests on MariaDB. Two files, so that
ctest shows the MariaDB run as Skipped when there is no server instead of
hiding it inside a pass.
"""

import collections
import contextlib
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from test_accounts import max_open  # noqa: E402
from tgdaemon import Tollgate, log_events, started  # noqa: E402

LIMIT = 10.0  # the account's starts per second
SHARES = 2


def max_in_window(times_ns, window_ns=1_000_000_000):
    """The most arrivals in any window [t, t + 1 s) starting at an arrival."""
    times = sorted(times_ns)
    best, j = 0, 0
    for i, t in enumerate(times):
        while j < len(times) and times[j] < t + window_ns:
            j += 1
        best = max(best, j - i)
    return best


class SharesTest(unittest.TestCase):
    store = "sqlite"

    def store_url(self):
        return None  # a SQLite file in the Tollgate's dir

    def exit_conf(self, shares=SHARES):
        return {"starts_per_second": LIMIT, "max_in_flight": 4, "shares": shares}

    def test_two_dispatchers_share_the_account(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, store_url=self.store_url(), exit=self.exit_conf(),
                         provider={"timeout_ms": 1000}) as tg:
            tg.start("api")
            d1 = tg.start("dispatch", wait_api=False)
            d2 = tg.start("dispatch", wait_api=False)
            owners = tgtest.wait_until(
                lambda: (log_events(d1, "owner") and log_events(d2, "owner")) and
                [log_events(d1, "owner")[0], log_events(d2, "owner")[0]],
                timeout=15, what="two share owners")
            self.assertEqual(sorted(o["share"] for o in owners), [0, 1])
            self.assertEqual({o["shares"] for o in owners}, {SHARES})
            d1_share, d1_epoch = owners[0]["share"], owners[0]["epoch"]

            ops = ["sh-%03d" % i for i in range(60)]
            for op in ops[:40]:
                self.assertEqual(tg.submit(op)[0], 202)

            # Both shares held: a third dispatcher is a standby.
            d3 = tg.start("dispatch", wait_api=False)
            tgtest.wait_until(lambda: log_events(d3, "standby"), timeout=10, what="d3 standby")

            # Another split while these shares live: refused, clearly.
            with Tollgate(stub.url, store_url=tg.store_url,
                          exit=self.exit_conf(shares=1)) as other:
                bad = other.start("dispatch", wait_api=False)
                self.assertEqual(bad.popen.wait(15), 1)
                self.assertIn("split_conflict", bad.stderr_text())
                self.assertIn("Refusing to start", bad.stderr_text())

            tgtest.wait_until(lambda: len(stub.arrivals()) >= 15, timeout=15,
                              what="both sending")
            self.assertEqual(log_events(d3, "owner"), [], "standby owned a share while both "
                             "were held")
            d1.send_signal(signal.SIGKILL)
            d1.popen.wait()
            for op in ops[40:]:
                self.assertEqual(tg.submit(op)[0], 202)
            tgtest.wait_until(lambda: log_events(d3, "owner"), timeout=15,
                              what="d3 takes the free share")
            self.assertEqual(log_events(d3, "owner")[0]["share"], d1_share)

            final = tg.wait_final(ops, timeout=40)
            self.assertTrue(all(r["state"] == "succeeded" for r in final.values()))
            calls = tg.calls()
            arrivals = [a for a in stub.arrivals() if a["path"].startswith("/v1/")]

            # 1. the account's limit, by arrival time (limit + 1: see the top)
            worst = max_in_window([a["mono_ns"] for a in arrivals])
            print("shares[%s]: %d arrivals, at most %d in any 1 s window (limit %g)"
                  % (self.store, len(arrivals), worst, LIMIT), file=sys.stderr)
            self.assertLessEqual(worst, int(LIMIT) + 1)

            # 2. each share holding starts no closer than the account's
            # spacing and no more than its share of the account: a run of
            # starts at the account's rate in each of its windows (exit_open
            # says how many points a window holds), so over any stretch at
            # most its share of the rate plus one window's run (the calls
            # whose start is on record: a claim the killed one made ahead
            # has none)
            points = {e["share"]: e["window_points"]
                      for d in (d1, d2, d3) for e in log_events(d, "exit_open")}
            self.assertEqual(set(points), {0, 1})
            by_epoch = collections.defaultdict(list)
            for c in started(calls):
                by_epoch[c["epoch"]].append(c["start_mono_ns"])
            self.assertGreaterEqual(len(by_epoch), 3)
            for epoch, starts in by_epoch.items():
                starts.sort()
                gaps = [b - a for a, b in zip(starts, starts[1:])]
                if gaps:
                    self.assertGreaterEqual(min(gaps), 1e9 / LIMIT - 1,
                                            "epoch %d started closer than the account's "
                                            "spacing" % epoch)
                    span = (starts[-1] - starts[0]) / 1e9
                    self.assertLessEqual(len(starts), span * LIMIT / SHARES + max(points.values()),
                                         "epoch %d started more than its share" % epoch)

            # 3. nobody sends an operation the other one sent
            arr = collections.Counter(a["request_id"] for a in arrivals)
            log = collections.Counter(c["request_id"] for c in calls)
            for rid, n in arr.items():
                self.assertEqual(n, 1, "request id %r arrived %d times" % (rid, n))
                self.assertEqual(log[rid], 1, "arrival %r not logged once" % rid)
            ledger = stub.ledger()["operations"]
            for op in ops:
                self.assertEqual(ledger[op]["executions"], 1, op)
            per_op = collections.defaultdict(list)
            for c in sorted(calls, key=lambda c: c["id"]):
                per_op[c["operation_id"]].append(c["epoch"])
            for op, epochs in per_op.items():
                if len(set(epochs)) > 1:
                    self.assertEqual(epochs[0], d1_epoch,
                                     "%s sent under two live shares: %r" % (op, epochs))

    def two_shares(self, tg):
        d1 = tg.start("dispatch", wait_api=False)
        d2 = tg.start("dispatch", wait_api=False)
        tgtest.wait_until(lambda: log_events(d1, "owner") and log_events(d2, "owner"),
                          timeout=15, what="two share owners")
        return d1, d2

    @contextlib.contextmanager
    def at_the_door(self, *stub_args):
        """A stub whose gateway limiter runs at the account's rate (or one
        run with stub_args), and a Tollgate with the door's spacing margin
        and its API started."""
        door = dict(self.exit_conf(), spacing_margin_us=tgtest.DOOR_MARGIN_US)
        stub_args = stub_args or ("--mode", "fast", "--limit-rate", str(LIMIT))
        with tgtest.start_stub(*stub_args) as stub, \
                Tollgate(stub.url, store_url=self.store_url(), exit=door,
                         provider={"timeout_ms": 1000},
                         admission={"enabled": "false"}) as tg:
            tg.start("api")
            yield stub, tg

    def test_shares_hold_the_spacing_at_the_providers_door(self):
        with self.at_the_door() as (stub, tg):
            self.two_shares(tg)
            ops = ["door-%03d" % i for i in range(50)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            final = tg.wait_final(ops, timeout=40)
            self.assertEqual({r["state"] for r in final.values()}, {"succeeded"})
            refused = [a for a in stub.arrivals() if a.get("mode") == "limiter"]
            self.assertEqual(refused, [], "the provider's limiter refused %d call(s) of two "
                             "shares" % len(refused))
            calls = tg.calls()
            self.assertEqual(len(calls), len(ops))
            self.assertEqual(len({c["epoch"] for c in calls}), 2, "both shares sent")
            starts = sorted(c["start_mono_ns"] for c in calls)
            gaps = [b - a for a, b in zip(starts, starts[1:])]
            self.assertGreaterEqual(min(gaps), int(1e9 / LIMIT),
                                    "two shares started %.3f ms apart" % (min(gaps) / 1e6))

    def test_a_rate_change_moves_every_share(self):
        """The account's rate lowered (10/s -> 4/s) and raised back at run
        time with two shares (issue 26 §5): every share moves to the new
        rate's grid from one instant all of them compute from the control
        row (changed_at + lead + the new spacing + skew, docs/design.md "A
        rate change with shares"). At the door, in whole ms: no two POSTs
        closer than the spacing in force, the last before a switch and the
        first after it at least the new spacing apart, none in between the
        lead's end and the switch (the old grid stopped), and the rate after
        each switch follows it (a loose floor); the changes are audited, and
        a new rate before the shares took the last one is refused (409)."""
        lead_ms = 1500 + 1500 + 1  # exit_switch_lead: fresh + commit + skew (1 ms)
        slow = 4.0
        ops = ["rate-%03d" % i for i in range(90)]
        with self.at_the_door() as (stub, tg):
            self.two_shares(tg)
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            posts = lambda: sorted(a["mono_ns"] for a in stub.arrivals()  # noqa: E731
                                   if a["method"] == "POST")
            tgtest.wait_until(lambda: len(posts()) >= 10, timeout=20, what="ten POSTs")
            wall_off = time.time_ns() - time.monotonic_ns()  # the stub's clock is monotonic
            switches = []
            for rate, spacing_ms in ((slow, 1000 / slow), (None, 1000 / LIMIT)):
                st, _, body = tgtest.http_json(
                    "POST", tg.api + "/v1/accounts/default",
                    {"starts_per_second": rate, "reason": "rate %s at run time" % rate},
                    tg.headers())
                self.assertEqual(st, 200, body)
                # another rate before every share took this one: refused, said when
                st, _, again = tgtest.http_json(
                    "POST", tg.api + "/v1/accounts/default",
                    {"starts_per_second": 5, "reason": "too soon"}, tg.headers())
                self.assertEqual((st, again["error"]["code"], again["error"]["field"]),
                                 (409, "rate_change_pending", "starts_per_second"), again)
                self.assertIn("a new rate is accepted from", again["error"]["message"])
                changed = body["controls"]["changed_at"] * 1_000_000 - wall_off
                margin_ms = tgtest.DOOR_MARGIN_US / 1000
                resume = changed + int((lead_ms + spacing_ms + margin_ms + 1) * 1e6)
                switches.append((changed, resume, spacing_ms))
                tgtest.wait_until(lambda: time.monotonic_ns() > resume + 4e9, timeout=30,
                                  what="four seconds after the switch")
            final = tg.wait_final(ops, timeout=60)
            self.assertEqual({r["state"] for r in final.values()}, {"succeeded"})
            ms = [t // 1_000_000 for t in posts()]
            self.assertEqual(len(ms), len(ops))
            (c1, r1, s1), (c2, r2, s2) = switches
            r1_ms, r2_ms = r1 // 1_000_000, r2 // 1_000_000

            def in_force(t_ms):  # the spacing at the door at t (ms), -1 for slack
                return s2 if t_ms >= r2_ms else s1 if t_ms >= r1_ms else 1000 / LIMIT
            for a, b in zip(ms, ms[1:]):
                self.assertGreaterEqual(b - a, int(in_force(b)) - 1,
                                        "POSTs %d ms apart at %d (in force %.0f ms)" %
                                        (b - a, b, in_force(b)))
            for changed, resume, _ in switches:
                # every share learns of the change within 1.5 s of its commit
                # (it starts nothing otherwise): none starts after that (a
                # second for the commit, on a busy machine) until the switch
                stopped = changed // 1_000_000 + 1500 + 1000
                between = [t for t in ms if stopped <= t < resume // 1_000_000 - 2]
                self.assertEqual(between, [], "POSTs after the old grid's end, before the "
                                 "switch at %d" % (resume // 1_000_000))
            # the rate after each switch follows it (a loose floor, and never above)
            slow_ms = [t for t in ms if r1_ms <= t < (c2 // 1_000_000)]
            span = (c2 - r1) / 1e9
            self.assertLessEqual(len(slow_ms), slow * span + 1, slow_ms)
            self.assertGreaterEqual(len(slow_ms), 0.6 * slow * span, slow_ms)
            fast_ms = [t for t in ms if t >= r2_ms]
            self.assertGreater(len(fast_ms), 10, "the raised rate was not in force")
            fast = (len(fast_ms) - 1) / ((fast_ms[-1] - fast_ms[0]) / 1e3)
            self.assertGreaterEqual(fast, 0.5 * LIMIT, fast_ms)
            st, _, body = tgtest.http_json("GET", tg.api + "/v1/accounts/default/audit", None,
                                           tg.headers())
            self.assertEqual(st, 200, body)
            rows = body["audit"]
            self.assertEqual([(r["detail"]["from"]["starts_per_second"],
                               r["detail"]["to"]["starts_per_second"]) for r in rows],
                             [(0, slow), (slow, 0)])
            self.assertTrue(all(r["by"] and r["at"] for r in rows))
            print("rate switch: %d POSTs at 4/s over %.1f s, then %.2f/s (%d) at 10/s" %
                  (len(slow_ms), (c2 - r1) / 1e9, fast, len(fast_ms)))

    def test_a_lowered_cap_is_split_among_the_shares(self):
        """The account's in-flight cap lowered at run time (4 -> 2) with two
        shares: the open calls end with the provider's answer (none aborted),
        and once they ended and every share has read the change each share
        has one open at most, the account two."""
        ops = ["cap-%03d" % i for i in range(16)]
        with self.at_the_door("--mode", "slow", "--delay-ms", "700") as (stub, tg):
            self.two_shares(tg)
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            tgtest.wait_until(lambda: len([a for a in stub.arrivals()
                                           if a["method"] == "POST"]) >= 4,
                              timeout=20, what="four slow calls open")
            st, _, body = tgtest.http_json("POST", tg.api + "/v1/accounts/default",
                                           {"max_in_flight": 2, "reason": "provider strained"},
                                           tg.headers())
            self.assertEqual((st, body.get("in_force", {}).get("max_in_flight")), (200, 2), body)
            # every share has read it 1.5 s after its commit (or starts nothing)
            learnt = time.monotonic_ns() + 1_500_000_000
            final = tg.wait_final(ops, timeout=90)
            self.assertEqual({r["state"] for r in final.values()}, {"succeeded"})
            for op in ops:
                self.assertEqual(stub.executions(op), 1, op)
            calls = sorted(tg.calls(), key=lambda c: c["start_mono_ns"])
            first = calls[:4]
            self.assertEqual({c["class"] for c in first}, {"succeeded"})
            changed = max([c["end_mono_ns"] for c in first] + [learnt])
            later = [c for c in calls if c["start_mono_ns"] > changed]
            self.assertGreaterEqual(len(later), 4, later)
            self.assertLessEqual(max_open(later), 2, later)
            for epoch in {c["epoch"] for c in later}:
                self.assertLessEqual(max_open([c for c in later if c["epoch"] == epoch]), 1)

    def test_a_hold_one_share_sees_holds_every_share(self):
        hold_s = 2
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, store_url=self.store_url(), exit=self.exit_conf(),
                         provider={"timeout_ms": 1000},
                         admission={"enabled": "false"}) as tg:
            tg.start("api")
            self.two_shares(tg)
            ops = ["hold-%03d" % i for i in range(60)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            # both shares send before the 503 (the second begins only after
            # its takeover wait: a few seconds, more under a sanitizer)
            tgtest.wait_until(lambda: len({c["epoch"] for c in tg.calls()}) == 2, timeout=30,
                              what="both shares sending")
            stub.set_mode(mode="unavailable", retry_after=hold_s, count=1)
            seen = tgtest.wait_until(
                lambda: [a for a in stub.arrivals() if a["mode"].startswith("unavailable")],
                timeout=10, what="the one 503")
            t503 = seen[0]["mono_ns"]
            tgtest.wait_until(lambda: stub.arrivals()[-1]["mono_ns"] > t503 + hold_s * 1e9,
                              timeout=15, what="sending again after the hold")
            after = [a["mono_ns"] - t503 for a in stub.arrivals() if a["mono_ns"] > t503]
            # A start already handed over when the 503 came back may still
            # arrive (the first 300 ms); after that nobody sends until the
            # Retry-After has passed (each share alone would send every
            # 200 ms).
            during = [round(t / 1e6) for t in after if 0.3e9 < t < (hold_s - 0.1) * 1e9]
            self.assertEqual(during, [], "sent during the account's hold (ms after the 503)")
            self.assertLessEqual(len([t for t in after if t <= 0.3e9]), 1)
            # and both send again once the hold is over
            def both_after_hold():
                resumed = [c for c in tg.calls()
                           if c["start_mono_ns"] > t503 + hold_s * 1e9]
                return len({c["epoch"] for c in resumed}) == 2
            tgtest.wait_until(both_after_hold, timeout=15, what="both shares after the hold")
            final = tg.wait_final(ops, timeout=60)
            self.assertEqual({r["state"] for r in final.values()}, {"succeeded"})

    @staticmethod
    def door_count(stub, t0, span):
        """The calls that reached the provider in [t0, t0 + span s), waited for."""
        tgtest.wait_until(lambda: stub.arrivals()[-1]["mono_ns"] > t0 + span * 1e9,
                          timeout=30 + span, what="%d s at the provider's door" % span)
        return len([a for a in stub.arrivals() if a["path"].startswith("/v1/") and
                    t0 <= a["mono_ns"] < t0 + span * 1e9])

    def test_survivor_takes_the_orphaned_share_and_hands_it_back(self):
        with self.at_the_door() as (stub, tg):
            d1, d2 = self.two_shares(tg)
            first = {d: log_events(d, "owner")[0] for d in (d1, d2)}
            self.assertEqual({o["spare"] for o in first.values()}, {False})
            orphan = first[d1]["share"]
            # a backlog that lasts the whole run (10/s)
            ops = ["orph-%03d" % i for i in range(400)]
            for k in range(0, len(ops), 100):
                st, _, body = tg.submit_batch(ops[k:k + 100])
                self.assertIn(st, (200, 201, 202), body)
            both = tgtest.wait_until(
                lambda: len({c["epoch"] for c in tg.calls()}) == 2 and tg.calls(),
                timeout=30, what="both shares sending")
            # the account's full rate at the door: both processes, one share
            # each (under the door's spacing margin and this machine's load)
            span = 8
            t_both = max(min(c["start_mono_ns"] for c in both if c["epoch"] == e)
                         for e in {c["epoch"] for c in both}) + int(0.5e9)
            full = self.door_count(stub, t_both, span)
            d1.send_signal(signal.SIGKILL)
            d1.popen.wait()
            killed = time.monotonic_ns()
            # the survivor takes the orphan as a spare of its own, after the
            # takeover wait (timeout 1 s + a share's spacing + 1.5 s)
            spare = tgtest.wait_until(
                lambda: [o for o in log_events(d2, "owner") if o["spare"]],
                timeout=20, what="the survivor takes the orphaned share")[0]
            self.assertEqual(spare["share"], orphan)
            self.assertGreater(spare["epoch"], max(o["epoch"] for o in first.values()))
            waits = [w["wait_ms"] for w in log_events(d2, "takeover_wait")]
            self.assertGreaterEqual(max(waits), 1000 + 1500)

            def spare_calls():
                return sorted(c["start_mono_ns"] for c in started(tg.calls())
                              if c["epoch"] == spare["epoch"])
            spare_first = tgtest.wait_until(spare_calls, timeout=20,
                                            what="the spare sending")[0]
            self.assertGreaterEqual(spare_first - killed, 2.5e9,
                                    "the spare sent before the takeover wait was over")
            # the account's rate at the door, both shares from one process:
            # at least 0.8 of the two processes' (on a server store two
            # shares do not fill every point of the grid today, and the two
            # processes' own count varies by a tenth from run to run: a
            # MariaDB run beside other tests counted 53 against 65), less one
            # window's run (starts come in runs of window_points: a fixed
            # span counts one run more or less by where its ends fall), and
            # more than one share alone can send (its half of the limit and
            # a window's run)
            run = max(e["window_points"] for e in log_events(d2, "exit_open"))
            door_n = self.door_count(stub, spare_first + int(1e9), span)
            print("shares[%s]: %d arrivals in %d s with two processes, %d after the takeover "
                  "(limit %g/s)" % (self.store, full, span, door_n, LIMIT), file=sys.stderr)
            self.assertGreaterEqual(door_n, 0.8 * full - run,
                                    "the survivor's two shares sent %d in %d s, two processes "
                                    "%d" % (door_n, span, full))
            self.assertGreater(door_n, LIMIT / SHARES * span + run)

            # a newcomer: a standby that wants a share; the survivor hands
            # the spare back (drains it, releases its lock), the newcomer
            # takes it after its takeover wait and sends
            d3 = tg.start("dispatch", wait_api=False)
            tgtest.wait_until(lambda: log_events(d3, "standby"), timeout=10, what="d3 standby")
            back = tgtest.wait_until(lambda: log_events(d2, "share_hand_back"), timeout=15,
                                     what="the survivor hands the share back")[0]
            self.assertEqual(back["share"], orphan)
            tgtest.wait_until(lambda: log_events(d2, "share_released"), timeout=15,
                              what="the spare drained and released")
            new = tgtest.wait_until(lambda: log_events(d3, "owner"), timeout=15,
                                    what="the newcomer takes the share")[0]
            self.assertEqual(new["share"], orphan)
            self.assertFalse(new["spare"])
            tgtest.wait_until(lambda: any(c["epoch"] == new["epoch"] for c in tg.calls()),
                              timeout=20, what="the newcomer sending")
            # the survivor does not take it again while the newcomer holds it
            time.sleep(4)
            self.assertEqual(len([o for o in log_events(d2, "owner") if o["spare"]]), 1)
            self.assertEqual(len(log_events(d3, "owner")), 1)
            final = tg.wait_final(ops, timeout=90)
            self.assertEqual({r["state"] for r in final.values()}, {"succeeded"})

            calls = tg.calls()
            arrivals = [a for a in stub.arrivals() if a["path"].startswith("/v1/")]
            # never two owners of the orphaned share: each holder's calls
            # all ended before the next holder's first start
            holders = [first[d1]["epoch"], spare["epoch"], new["epoch"]]
            for old, nxt in zip(holders, holders[1:]):
                old_calls = [c for c in started(calls) if c["epoch"] == old]
                nxt_first = min(c["start_mono_ns"] for c in started(calls) if c["epoch"] == nxt)
                self.assertTrue(old_calls, "epoch %d sent nothing" % old)
                for c in old_calls:
                    end = c["end_mono_ns"] or c["start_mono_ns"] + 1000 * 1000000
                    self.assertLess(end, nxt_first, "epoch %d's call %d open when epoch %d "
                                    "started" % (old, c["id"], nxt))
            # the account's spacing: every start of every holder, and the
            # provider's limiter at its rate never refused one
            starts = sorted(c["start_mono_ns"] for c in started(calls))
            gaps = [b - a for a, b in zip(starts, starts[1:])]
            self.assertGreaterEqual(min(gaps), int(1e9 / LIMIT),
                                    "two starts %.3f ms apart" % (min(gaps) / 1e6))
            refused = [a for a in arrivals if a.get("mode") == "limiter"]
            self.assertEqual(refused, [], "the provider's limiter refused %d" % len(refused))
            # nothing sent twice
            arr = collections.Counter(a["request_id"] for a in arrivals)
            self.assertEqual([r for r, n in arr.items() if n > 1], [])
            ledger = stub.ledger()["operations"]
            for op in ops:
                self.assertEqual(ledger[op]["executions"], 1, op)

    def test_a_paused_owner_keeps_its_share(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, store_url=self.store_url(), exit=self.exit_conf(),
                         provider={"timeout_ms": 1000},
                         admission={"enabled": "false"}) as tg:
            tg.start("api")
            d1, d2 = self.two_shares(tg)
            ops = ["paus-%03d" % i for i in range(120)]
            st, _, body = tg.submit_batch(ops)
            self.assertIn(st, (200, 201, 202), body)
            tgtest.wait_until(lambda: len({c["epoch"] for c in tg.calls()}) == 2,
                              timeout=30, what="both shares sending")
            d1.send_signal(signal.SIGSTOP)
            try:
                # well past the takeover wait (2.7 s) and a spare's tries
                time.sleep(8)
                self.assertEqual([o for o in log_events(d2, "owner") if o["spare"]], [],
                                 "a share of a paused owner was taken over")
                self.assertEqual(len({c["epoch"] for c in tg.calls()}), 2)
            finally:
                d1.send_signal(signal.SIGCONT)
            final = tg.wait_final(ops, timeout=60)
            self.assertEqual({r["state"] for r in final.values()}, {"succeeded"})
            self.assertEqual(len({c["epoch"] for c in tg.calls()}), 2)

    def test_account_view_sums_the_shares(self):
        # Each dispatcher writes the samples of its own share; /metrics and
        # /v1/stats show the account: in-flight and counts add up. A slow
        # provider keeps each share at its cap of 2 open calls, so the
        # account shows 4 (one share's figures would show 2).
        with tgtest.start_stub("--mode", "slow:1500") as stub, \
                Tollgate(stub.url, store_url=self.store_url(), exit=self.exit_conf(),
                         provider={"timeout_ms": 5000}) as tg:
            tg.start("api")
            d1 = tg.start("dispatch", wait_api=False)
            d2 = tg.start("dispatch", wait_api=False)
            tgtest.wait_until(lambda: log_events(d1, "owner") and log_events(d2, "owner"),
                              timeout=15, what="two share owners")
            ops = ["view-%03d" % i for i in range(24)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)

            def stats():
                st, _, body = tgtest.http_json("GET", tg.api + "/v1/stats?minutes=5", None,
                                               tg.headers())
                self.assertEqual(st, 200, body)
                return body

            def metric(text, name):
                for line in text.splitlines():
                    if line.startswith(name + " "):
                        return float(line.split()[1])
                return None

            def four_open():
                body = stats()
                st, _, raw = tgtest.http_request("GET", tg.api + "/metrics", None,
                                                 tg.headers())
                m = metric(raw.decode(), 'tollgate_in_flight{account="default"}')
                return body["in_flight"] == 4 and m == 4 and body
            body = tgtest.wait_until(four_open, timeout=20, interval=0.2,
                                     what="the account's in-flight (2 shares x 2)")
            self.assertTrue(body["exit"]["owner_alive"])
            self.assertFalse(body["exit"]["held"])

            tg.wait_final(ops, timeout=60)
            calls = tg.calls()

            # Each share writes one sample a second, so its last calls reach
            # the account's figures up to a second after they ended: wait
            # until the figures hold every call and close of the call log
            # (they only grow; the exact counts are asserted below).
            def flushed():
                body = stats()
                fig = body["exit"]["figures"]
                if not fig:
                    return False
                return (sum(p["starts"] for p in body["series"]["points"]) >= len(calls) and
                        sum(fig["starts"].values()) >= len(calls) and
                        fig["closes"].get("succeeded", 0) >= len(ops) and
                        fig["latency_s"]["count"] >= len(calls))
            tgtest.wait_until(flushed, timeout=15, interval=0.2,
                              what="every share's last seconds in the account's figures")
            body = stats()
            points = body["series"]["points"]
            seconds = [p["at"] // 1000 for p in points]
            self.assertEqual(len(seconds), len(set(seconds)), "two points for one second")
            self.assertEqual(max(p["in_flight"] for p in points), 4)
            self.assertEqual(sum(p["starts"] for p in points), len(calls))
            fig = body["exit"]["figures"]
            self.assertEqual(sum(fig["starts"].values()), len(calls))
            self.assertEqual(fig["closes"]["succeeded"], len(ops))
            self.assertEqual(fig["latency_s"]["count"], len(calls))
            self.assertEqual(sum(fig["latency_s"]["buckets"]), len(calls))
            st, _, raw = tgtest.http_request("GET", tg.api + "/metrics", None, tg.headers())
            text = raw.decode()
            started = sum(float(line.split()[1]) for line in text.splitlines()
                          if line.startswith("tollgate_calls_started_total{"))
            self.assertEqual(started, len(calls))
            self.assertEqual(metric(text, 'tollgate_call_latency_seconds_count{account="default"}'),
                             len(calls))


# The methods that judge behaviour only (the account's figures add up); they
# run in the CTest entries *.parallel (tests/CMakeLists.txt, TG_IT_SPLIT).
# The others judge spacing or a hold at the provider's door and run serial.
BEHAVIOUR_ONLY = ("test_account_view_sums_the_shares", "test_a_paused_owner_keeps_its_share")


if __name__ == "__main__":
    tgtest.main_unittest(parallel=BEHAVIOUR_ONLY)
