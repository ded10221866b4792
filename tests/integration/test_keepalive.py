"""Keep-alive connections and a provider that closes idle ones (issue 27, §3).

With provider.reuse_connections, a request sent on a cached connection just as
the provider closes it for idleness meets a reset; the exit refuses libcurl's
second send of it, so the attempt ends unknown with nothing executed, and a
refund could spend its whole budget that way. The stub's --idle-close-ms plays
a provider's keep-alive timeout (its relay closes a connection idle between
requests for that long). The exit must stop reusing a connection before its
idle life is over — from provider.keepalive_idle_ms, or from the provider's
own `Keep-Alive: timeout=N` header — while still reusing connections where
that is safe.

Shown to fail without the fix (no key, no header): at 5/s against a 200 ms
idle close, 4 of 40 first attempts were refused on their second send; at 1/s
against 1 s, 1 of 12.
"""

import collections
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402


class KeepAliveTest(unittest.TestCase):
    def run_batch(self, stub_flags, provider, rate, n, prefix):
        with tgtest.start_stub("--mode", "fast", *stub_flags) as stub, \
                Tollgate(stub.url, provider=dict(provider, reuse_connections="true"),
                         exit={"starts_per_second": rate}) as tg:
            tg.start("serve")
            ops = ["%s-%03d" % (prefix, i) for i in range(n)]
            for op in ops:
                self.assertEqual(tg.submit(op)[0], 202)
            final = tg.wait_final(ops, timeout=n / rate + 60)
            calls = tg.calls()
            arrivals = [a for a in stub.arrivals() if a["path"].startswith("/v1/")]
        self.assertEqual(collections.Counter(r["state"] for r in final.values()),
                         {"succeeded": n}, final)
        refused = [c for c in calls if "second send" in (c.get("error") or "")]
        self.assertEqual(refused, [], "a request raced the provider's idle close")
        # one POST each: no attempt was lost to a dead connection
        self.assertEqual(len(calls), n, collections.Counter(c["kind"] for c in calls))
        return arrivals

    def test_configured_idle_life(self):
        # 200 ms apart against a 200 ms idle close: every connection would be
        # at the edge of its life; each call gets a fresh one instead.
        arrivals = self.run_batch(["--idle-close-ms", "200"], {"keepalive_idle_ms": 200},
                                  5, 30, "kacfg")
        self.assertEqual(len({a["conn_id"] for a in arrivals}), len(arrivals))

    def test_learned_from_keep_alive_header(self):
        # no key: the stub's "Keep-Alive: timeout=1" is the idle life
        self.run_batch(["--idle-close-ms", "1000", "--advertise-keep-alive"], {}, 1, 10,
                       "kahdr")

    def test_reuse_kept_where_safe(self):
        # 50 ms apart, well inside the idle life: connections are reused
        arrivals = self.run_batch(["--idle-close-ms", "1000"], {"keepalive_idle_ms": 1000},
                                  20, 40, "kareuse")
        conns = len({a["conn_id"] for a in arrivals})
        self.assertLessEqual(conns, len(arrivals) // 4,
                             "%d connections for %d calls: reuse lost" % (conns, len(arrivals)))


if __name__ == "__main__":
    tgtest.main_unittest()
