"""The backup scenario of the server stores (issue 29; docs/operating.md,
"Backups"), written once for MariaDB (test_store_promises_mariadb.py) and
PostgreSQL (test_store_promises_pg.py), which bring their own dump, restore
and trigger listing:

`tollgate serve` makes a manual case, a case resolved by hand and three
refunds left unknown (executed at the provider, answers dropped); the
store's database is dumped while it serves; the dump is restored into a
fresh database with the stock client; a tollgate on that database serves
it: the manual case, its calls and its audit trail are there as they were,
the no-delete triggers too, and the refunds that were unknown at the dump
are reconciled by query with the same key — executed once at the provider.
"""

import json
import os

import tgtest
from tgdaemon import Tollgate

FAST_RETRY = {"max_attempts": 3, "backoff_base_ms": 20, "backoff_min_ms": 0,
              "backoff_cap_ms": 100, "query_interval_ms": 200}
FAST_EXIT = {"starts_per_second": 50, "default_hold_ms": 20, "default_hold_max_ms": 20}
# a new owner waits provider.timeout_ms before it sends (the calls of the
# owner before it): short, for the restarts here
PROVIDER = {"connect_timeout_ms": 250, "timeout_ms": 500}


def dump_while_serving_restores(test, stub, url, fresh, dump, restore, triggers, guards,
                                ready=None):
    """dump(url, path) while serving; restore(fresh, path) into a database
    that does not exist yet; triggers(fresh) lists its trigger names, which
    must be `guards`; ready(tg), if given, checks the restored one's /readyz."""
    # 503s counted against the attempts (retry.count_limited): to manual
    stub.set_mode(mode="unavailable", query_mode="fast")
    with Tollgate(stub.url, store_url=url, exit=FAST_EXIT, provider=PROVIDER,
                  retry=dict(FAST_RETRY, count_limited="true")) as tg:
        p = tg.start("serve")
        test.assertEqual(tg.submit("bk-manual")[0], 202)
        test.assertEqual(tg.submit("bk-resolved")[0], 202)
        tg.wait_final(["bk-manual", "bk-resolved"], timeout=30, states=("manual",))
        st, _, body = tgtest.http_json(
            "POST", tg.api + "/v1/manual/bk-resolved/resolve",
            {"operator": "alice", "reason": "refunded by phone", "outcome": "failed"},
            tg.headers())
        test.assertEqual((st, body["state"]), (200, "rejected"), body)
        # executed at the provider, the answers dropped: unknown here
        stub.set_mode(mode="drop", query_mode="unavailable")
        unknown = ["bk-unknown-%d" % i for i in range(3)]
        for op in unknown:
            test.assertEqual(tg.submit(op)[0], 202)
        tg.wait_final(unknown, timeout=30, states=("unknown", "retry_wait"))
        before = {op: tg.status(op)[2] for op in ("bk-manual", "bk-resolved")}
        # the dump, while tollgate serves and queries
        path = os.path.join(tg.dir, "tollgate.sql")
        dump(url, path)
        test.assertEqual(p.stop(), 0)
    restore(fresh, path)
    test.assertEqual(triggers(fresh), sorted(guards))
    stub.set_mode(mode="fast", query_mode="fast")
    with Tollgate(stub.url, store_url=fresh, exit=FAST_EXIT, provider=PROVIDER,
                  retry=FAST_RETRY) as restored:
        p = restored.start("serve")
        if ready:
            ready(restored)
        for op, was in before.items():
            st, _, now = restored.status(op)
            test.assertEqual(st, 200, op)
            test.assertEqual(json.dumps(now, sort_keys=True), json.dumps(was, sort_keys=True),
                             op)
        test.assertEqual(before["bk-manual"]["state"], "manual")
        test.assertEqual(len(before["bk-manual"]["attempts"]), 3)
        test.assertEqual([a["action"] for a in before["bk-resolved"]["audit"]][-1:],
                         ["resolve"])
        got = restored.wait_final(unknown, timeout=30, states=("succeeded",))
        for op in unknown:
            test.assertEqual(stub.executions(op), 1, op)
            kinds = [a["kind"] for a in got[op]["attempts"]]
            test.assertEqual(kinds[0], "first", got[op])
            test.assertIn("query", kinds, got[op])
        test.assertEqual(p.stop(), 0)
