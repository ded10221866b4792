"""POST /v1/refunds:batch on a real `tollgate serve` and the stub (issue 28,
section 3): a batch of 200 answered 202 item by item is durable — every
202 is still there after a kill -9 of the daemon right after the answer,
and every one is then executed once by a new process; the same batch sent
again answers 200 for each item; a daemon killed after its commit and
before its answer (the crash_after_accept failpoint) loses the answer, not
the refunds, and the client's retry of the batch gets 200 for each;
`tollgate submit --batch FILE` sends a file and exits by what it got.
TG_TEST_STORE=mysql runs the file on MariaDB, TG_TEST_STORE=pg on PostgreSQL.
"""

import json
import os
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

N = 200
EXIT = {"starts_per_second": 50, "max_in_flight": 8}


def batch(prefix, n=N):
    return {"refunds": [{"operation_id": "%s-%04d" % (prefix, i), "payment_id": "pay_%d" % i,
                         "amount": 100 + i, "currency": "TWD"} for i in range(n)]}


class BatchTest(unittest.TestCase):
    def post_batch(self, tg, body, timeout=30):
        return tgtest.http_json("POST", tg.api + "/v1/refunds:batch", body, tg.headers(),
                                timeout=timeout)

    def expect_all(self, body, status, ids):
        results = body["results"]
        self.assertEqual([r["index"] for r in results], list(range(len(ids))))
        self.assertEqual({r["status"] for r in results}, {status}, results[:3])
        self.assertEqual([r["operation_id"] for r in results], ids)

    def judge(self, tg, stub, ids):
        """Every refund ended succeeded, executed once at the provider."""
        final = tg.wait_final(ids, timeout=120)
        self.assertEqual({f["state"] for f in final.values()}, {"succeeded"})
        tgtest.wait_until(stub.idle, timeout=10, what="nothing open at the stub")
        for op in ids:
            self.assertEqual(stub.executions(op), 1, op)

    def test_kill_after_answer(self):
        body = batch("kb")
        ids = [r["operation_id"] for r in body["refunds"]]
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url, exit=EXIT) as tg:
            serve = tg.start("serve")
            status, _, got = self.post_batch(tg, body)
            # kill -9 right after the answer: every 202 must be durable
            serve.send_signal(signal.SIGKILL)
            serve.popen.wait(10)
            self.assertEqual(status, 200, got)
            self.expect_all(got, 202, ids)
            self.assertEqual(got["accepted"], N)
            self.assertFalse(got["errors"])

            tg.start("serve")
            for op in ids:
                status, _, one = tg.status(op)
                self.assertEqual(status, 200, (op, one))
            # the client's retry of the whole batch: a repeat for each item
            status, _, again = self.post_batch(tg, body)
            self.assertEqual(status, 200, again)
            self.expect_all(again, 200, ids)
            self.assertEqual(again["accepted"], 0)
            self.judge(tg, stub, ids)

    def test_crash_after_commit_before_answer(self):
        body = batch("ca", 50)
        ids = [r["operation_id"] for r in body["refunds"]]
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url, exit=EXIT) as tg:
            api = tg.start("api", env={"TG_FAILPOINT": "crash_after_accept"})
            with self.assertRaises(OSError):  # no answer: the connection drops
                self.post_batch(tg, body)
            self.assertEqual(api.popen.wait(30), -9, api.stderr_text()[-3000:])
            tg.start("serve")
            status, _, again = self.post_batch(tg, body)  # the caller's retry
            self.assertEqual(status, 200, again)
            self.expect_all(again, 200, ids)  # one transaction: all were stored
            self.judge(tg, stub, ids)

    def test_envelope_and_bounds(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                Tollgate(stub.url, api={"max_batch_bytes": 4096}) as tg:
            tg.start("serve")
            status, _, got = self.post_batch(tg, {"refunds": []})
            self.assertEqual((status, got["error"]["code"]), (400, "invalid_request"))
            status, _, got = self.post_batch(tg, batch("big", 60))  # > 4096 bytes
            self.assertEqual((status, got["error"]["code"]), (413, "body_too_large"))
            status, _, got = self.post_batch(tg, batch("ok", 3))
            self.assertEqual(status, 200, got)
            self.expect_all(got, 202, ["ok-0000", "ok-0001", "ok-0002"])
            status, _, got = tgtest.http_json("POST", tg.api + "/v1/refunds:batch",
                                              batch("na", 1))
            self.assertEqual(status, 401, got)

    def test_cli_submit_batch(self):
        def cli(*args):
            r = subprocess.run([tgtest.binary("tollgate"), "submit", "--config", tg.config] +
                               list(args), capture_output=True, text=True, timeout=30)
            return r.returncode, r.stdout, r.stderr

        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url, exit=EXIT) as tg:
            tg.start("serve")
            path = os.path.join(tg.dir, "batch.json")
            with open(path, "w") as f:
                json.dump(batch("cli", 5), f)
            rc, out, err = cli("--batch", path)
            self.assertEqual(rc, 0, err)
            self.assertEqual([r["status"] for r in json.loads(out)["results"]], [202] * 5)
            rc, out, err = cli("--batch", path)  # the same file again
            self.assertEqual(rc, 0, err)
            self.assertEqual([r["status"] for r in json.loads(out)["results"]], [200] * 5)
            body = batch("cli", 2)
            body["refunds"][1]["amount"] = 1  # cli-0001 with another body: 409
            with open(path, "w") as f:
                json.dump(body, f)
            rc, out, err = cli("--batch", path)
            self.assertEqual(rc, 1, (out, err))
            self.assertEqual([r["status"] for r in json.loads(out)["results"]], [200, 409])
            self.assertIn("refused", err)
            self.assertEqual(cli("--batch", path, "--amount", "5")[0], 2)
            self.assertEqual(cli("--operation-id", "x", "--amount", "5")[0], 2)
            self.assertEqual(cli("--batch", os.path.join(tg.dir, "nope.json"))[0], 2)
            with open(path, "w") as f:
                f.write('{"refunds": []}')
            self.assertEqual(cli("--batch", path)[0], 1)  # the API's 400
            self.judge(tg, stub, ["cli-%04d" % i for i in range(5)])


if __name__ == "__main__":
    tgtest.main_unittest()
