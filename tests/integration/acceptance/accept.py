"""What the acceptance scenarios share (issue 6; stdlib only).

Each scenario runs real processes on loopback (tollgate-stub, tollgate) and
ends by handing its own records to `tollgate verify`:

- dump_run(tg, stub, dir) writes the call log (GET /v1/calls pages, one call
  per line), the stub's arrival record and its ledger as files, the formats
  `tollgate verify` reads (docs/verify.md);
- verify(...) runs `tollgate verify --json` on them and returns the parsed
  result; assert_verified(...) also fails the test, with the text report,
  unless verify passed.
"""

import json
import os
import subprocess
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))
import tgprovider  # noqa: E402
import tgtest  # noqa: E402


def out_dir(name):
    """A directory for a scenario's records, kept under the build dir: one
    per variant of the scenario (<build>/acceptance/NAME on SQLite over
    plain HTTP; NAME-mysql, NAME-pg, NAME-mtls-stripe, ... otherwise), since
    ctest -j runs a scenario's store and TLS variants at the same time and
    one must not verify the other's records."""
    variant = [os.environ.get(k) for k in ("TG_TEST_STORE", "TG_TEST_TLS", "TG_TEST_PROFILE")]
    d = os.path.join(tgtest.build_dir(), "acceptance",
                     "-".join([name] + [v for v in variant if v]))
    os.makedirs(d, exist_ok=True)
    return d


def dump_run(tg, stub, d):
    """Arrivals first, then the call log: a call row is committed before its
    request leaves, so every arrival read has its call in the later read
    even while the dispatcher still runs (a call started in between only
    shows as a note, "unseen")."""
    status, _, raw = tgtest.http_request("GET", stub.url + "/_stub/arrivals?since=0")
    assert status == 200, status
    ledger = stub.ledger()
    log = tg.calls(released=True)  # verify reads the whole log
    calls = [c for c in log if not c.get("released")]
    paths = {"calls": os.path.join(d, "calls.jsonl"),
             "arrivals": os.path.join(d, "arrivals.jsonl"),
             "ledger": os.path.join(d, "ledger.json")}
    with open(paths["calls"], "w") as f:
        for c in log:
            f.write(json.dumps(c) + "\n")
    with open(paths["arrivals"], "wb") as f:
        f.write(raw)
    with open(paths["ledger"], "w") as f:
        f.write(json.dumps(ledger) + "\n")
    return paths, calls


def contract_arrivals(stub):
    """The stub's arrivals on the provider's contract (tgprovider)."""
    return tgprovider.contract_arrivals(stub.arrivals(), stub.profile)


def verify(paths, *flags):
    """Under an OAuth 2.0 profile (paypal) the exit's token calls have no
    call log row: --token-path names their door (docs/verify.md)."""
    token = tgprovider.token_path()
    argv = [tgtest.binary("tollgate"), "verify", "--calls", paths["calls"],
            "--arrivals", paths["arrivals"], "--ledger", paths["ledger"]] + list(flags)
    if token:
        argv += ["--token-path", token]
    p = subprocess.run(argv + ["--json"], capture_output=True, text=True, timeout=60)
    if p.returncode not in (0, 1):
        raise AssertionError("tollgate verify failed (%d): %s" % (p.returncode, p.stderr))
    result = json.loads(p.stdout)
    text = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    result["text"] = text
    result["exit"] = p.returncode
    return result


def assert_verified(test, paths, *flags):
    r = verify(paths, *flags)
    test.assertEqual(r["exit"], 0, "tollgate verify found violations:\n" + r["text"])
    test.assertTrue(r["pass"])
    test.assertEqual(r["summary"]["unmatched"], 0)
    test.assertEqual(r["summary"]["duplicate_arrivals"], 0)
    return r


def report(paths, out, *flags):
    argv = [tgtest.binary("tollgate"), "report", "--calls", paths["calls"],
            "--arrivals", paths["arrivals"], "--ledger", paths["ledger"],
            "--out", out] + list(flags)
    if tgprovider.token_path():
        argv += ["--token-path", tgprovider.token_path()]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return p
