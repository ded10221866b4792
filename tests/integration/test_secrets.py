"""Secrets never leak (issue 12): every secret file of a full run holds a
recognisable marker (tgprovider.SECRET_MARK) — the API token, the webhook
secret, the provider's API key, the signing key — and the client key's own
bytes are looked for too. The run: the stripe profile over mutual TLS,
a bearer key and signed requests, the provider going fast, slow (timeouts,
reconciled by queries), failing, dropping and fast again, with signed
webhooks; then a config whose secret file is malformed. Every output is
searched: tollgate's stderr (debug level), the stub's arrival record (live
and the file it writes), /v1/calls, /v1/refunds/{id}, /v1/manual,
/metrics, /v1/stats, the CLI's `status` and `calls`, `tollgate report`'s
output and HTML, and the store's files.
"""

import glob
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "acceptance"))
import accept  # noqa: E402
import tgprovider  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate  # noqa: E402

TIMELINE = "fast 2s; slow:1500 3s; fail:card_expired 2s; drop 2s; fast"


class Secrets(unittest.TestCase):
    def needles(self, webhook_secret, token):
        s = tgprovider.test_secrets()
        out = {"mark": tgprovider.SECRET_MARK, "api key": s.api_key,
               "signing key": s.signing_key, "webhook secret": webhook_secret,
               "token": token}
        with open(tgprovider.pki().path("client.key")) as f:
            for i, line in enumerate(f):
                line = line.strip()
                if len(line) >= 16 and not line.startswith("-----"):
                    out["client key line %d" % i] = line
        return out

    def assert_clean(self, what, text, needles):
        if isinstance(text, bytes):
            text = text.decode("latin-1")
        for name, needle in needles.items():
            at = text.find(needle)
            if at >= 0:
                self.fail("%s found in %s: ...%s..." % (name, what, text[max(0, at - 80):at + 80]))

    def test_no_secret_in_any_output(self):
        token = "tok-%s-0123456789" % tgprovider.SECRET_MARK
        api_port = tgtest.free_port()
        secret_dir = tgprovider.test_secrets().dir
        webhook_secret = "whsec-%s-42" % tgprovider.SECRET_MARK
        webhook_file = os.path.join(secret_dir, "webhook")
        with open(webhook_file, "w") as f:
            f.write(webhook_secret + "\n")
        os.chmod(webhook_file, 0o600)
        needles = self.needles(webhook_secret, token)
        outputs = {}
        with tgtest.start_stub("--timeline", TIMELINE, "--query-mode", "fast",
                               "--record-bodies", "--webhook-url",
                               "http://127.0.0.1:%d/v1/provider-events" % api_port,
                               "--webhook-secret-file", webhook_file,
                               "--record", os.path.join(secret_dir, "record.jsonl"),
                               tls="mtls", profile="stripe") as stub, \
                Tollgate(stub.url, tls="mtls", profile="stripe", token=token,
                         api_port=api_port,
                         provider={"timeout_ms": 1000, "webhook_secret_file": webhook_file},
                         retry={"query_interval_ms": 300}, log={"level": "debug"}) as tg:
            p = tg.start("serve")
            ops = []
            for i in range(30):
                # a ':' in every key and payment: queries (Stripe's list,
                # by payment) are signed over an encoded path and query
                # (%3A), which the stub must check as sent
                op = "leak:%02d" % i
                st, _, _ = tgtest.http_json("POST", tg.api + "/v1/refunds",
                                            {"operation_id": op, "payment_id": "pi:%d" % i,
                                             "amount": 100 + i, "currency": "TWD",
                                             "reason": "requested", "metadata": {"n": str(i)}},
                                            tg.headers())
                self.assertEqual(st, 202)
                ops.append(op)
            final = tg.wait_final(ops, timeout=90)
            classes = {c["class"] for c in tg.calls()}
            self.assertTrue({"succeeded", "unknown"} <= classes, classes)
            # every call carried the key, a good signature and the certificate
            # (the list queries too, signed over their encoded query)
            arrivals = [a for a in stub.arrivals() if a["path"].startswith("/v1/")]
            self.assertTrue(any(a["method"] == "GET" and a["path"] == "/v1/refunds"
                                for a in arrivals))
            for a in arrivals:
                self.assertEqual((a["auth"], a["signature"], a["client_cert"]),
                                 ("ok", "ok", "verified"), a)
            self.assertGreater(stub.state()["webhook"]["sent"], 0)

            outputs["arrivals (live)"] = tgtest.http_request(
                "GET", stub.url + "/_stub/arrivals?since=0")[2]
            outputs["ledger"] = str(stub.ledger())
            for path in ("/v1/calls?since=0&limit=1000", "/v1/manual", "/v1/stats",
                         "/metrics") + tuple("/v1/refunds/" + op for op in ops):
                outputs[path] = tgtest.http_request("GET", tg.api + path, None,
                                                    tg.headers())[2]
            for argv in (["status", ops[0]], ["calls"]):
                r = subprocess.run([tgtest.binary("tollgate")] + argv + ["--config", tg.config],
                                   capture_output=True, timeout=60)
                outputs["tollgate " + argv[0]] = r.stdout + r.stderr
            d = accept.out_dir("secrets")
            paths, _ = accept.dump_run(tg, stub, d)
            r = accept.report(paths, os.path.join(d, "report.html"))
            self.assertEqual(r.returncode, 0, r.stderr)
            outputs["report stdout"] = r.stdout + r.stderr
            with open(os.path.join(d, "report.html"), "rb") as f:
                outputs["report.html"] = f.read()
            p.stop()
            outputs["tollgate stderr"] = p.stderr_text()
            stub.stop()
            with open(os.path.join(secret_dir, "record.jsonl"), "rb") as f:
                outputs["stub record file"] = f.read()
            outputs["stub stderr"] = stub.stderr_text()
            for path in glob.glob(tg.db + "*"):
                with open(path, "rb") as f:
                    outputs["store " + os.path.basename(path)] = f.read()
            self.assertTrue(any(r["state"] == "succeeded" for r in final.values()))
            self.assertIn("call_end", outputs["tollgate stderr"])

            # A config whose API key file is malformed: refused, by name,
            # without the key.
            bad = os.path.join(secret_dir, "bad-key")
            with open(bad, "w") as f:
                f.write("sk_bad %s tail\n" % tgprovider.SECRET_MARK)
            os.chmod(bad, 0o600)
            with open(tg.config) as f:
                text = f.read().replace(tgprovider.test_secrets().api_key_file, bad)
            bad_config = os.path.join(tg.dir, "bad.ini")
            with open(bad_config, "w") as f:
                f.write(text)
            r = subprocess.run([tgtest.binary("tollgate"), "serve", "--config", bad_config],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("provider.auth_secret_file", r.stderr)
            outputs["config error"] = r.stdout + r.stderr

        self.assertGreater(len(outputs), 40)
        for what, text in outputs.items():
            self.assert_clean(what, text, needles)
        # the test looks where a secret would be: the stub saw the key
        # (as it must), and the check above would have caught a copy
        self.assertIn(tgprovider.SECRET_MARK, needles["api key"])


if __name__ == "__main__":
    tgtest.main_unittest()
