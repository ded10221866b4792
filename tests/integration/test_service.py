"""tollgate as a service (issue 13), judged from outside on real processes:

- sd_notify: READY=1 once the API listens, WATCHDOG=1 while WATCHDOG_USEC is
  set, STOPPING=1 on SIGTERM (a datagram socket stands in for systemd);
- SIGHUP rotates the token without a refused request (two tokens in the
  file, then one), reads the provider's credential files again (an API key
  rotated in place is sent from the next call on, no restart), changes
  log.level live, refuses a key that cannot change
  live with an error line naming it (the running value stays, /metrics shows
  it), and a broken file changes nothing;
- /readyz: 200 for the owner and a standby, 503 once the store file is
  moved away, 200 again when it is back; /healthz stays 200 throughout;
- log lines carry their syslog priority when stderr is the journal stream;
- retention: the dispatcher's housekeeping prunes final operations past
  retention.keep_days, `tollgate prune` too, and neither touches a manual
  case or the audit trail;
- a backup taken while serving restores, and the restored store reconciles
  its unknowns by query with the same key: every refund executed once;
- `tollgate config check` lists every problem with its line (exit 1) and
  passes a good file (exit 0); `tollgate --version`.
"""

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
import unittest

import tgtest
from tgdaemon import TOKEN, Tollgate

FAST_RETRY = {"max_attempts": 3, "backoff_base_ms": 20, "backoff_min_ms": 0,
              "backoff_cap_ms": 100, "query_interval_ms": 200}
# default_hold_max_ms: no doubling of the hold after a probe refused again
# (a provider answering 503 to everything is how these tests make work fail fast)
FAST_EXIT = {"starts_per_second": 50, "default_hold_ms": 20, "default_hold_max_ms": 20}
DAY_MS = 24 * 3600 * 1000


def cli(*args):
    p = subprocess.run([tgtest.binary("tollgate")] + list(args), capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def events(proc, name):
    return [line for line in tgtest.json_lines(proc.stderr_text()) if line.get("event") == name]


def write_secret(path, text):
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)


def rewrite_config(tg, section, key, value):
    """Sets section.key in tg's config file (adding the section if needed)."""
    with open(tg.config) as f:
        lines = f.read().splitlines()
    out, in_section, done = [], False, False
    for line in lines:
        if line.startswith("["):
            if in_section and not done:
                out.append("%s = %s" % (key, value))
                done = True
            in_section = line.strip() == "[%s]" % section
        elif in_section and line.split("=")[0].strip() == key:
            line, done = "%s = %s" % (key, value), True
        out.append(line)
    if not done:
        if not in_section:
            out.append("[%s]" % section)
        out.append("%s = %s" % (key, value))
    with open(tg.config, "w") as f:
        f.write("\n".join(out) + "\n")


def metric_value(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class NotifySocket:
    """A datagram socket standing in for systemd's NOTIFY_SOCKET."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tgnotify-")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.2)
        self.messages = []

    def read(self):
        try:
            while True:
                self.messages.append(self.sock.recv(4096).decode())
        except (socket.timeout, BlockingIOError):
            pass
        return self.messages

    def seen(self, word):
        return any(word in m.split("\n") for m in self.read())

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ServiceTest(unittest.TestCase):
    def test_sd_notify_ready_watchdog_stopping(self):
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
            ns = NotifySocket()
            try:
                env = {"NOTIFY_SOCKET": ns.path, "WATCHDOG_USEC": "1000000"}
                p = tg.start("serve", env=env)
                tgtest.wait_until(lambda: ns.seen("READY=1"), timeout=10, what="READY=1")
                # from the loop (the owner) and at half the interval
                tgtest.wait_until(lambda: sum(m.count("WATCHDOG=1") for m in ns.read()) >= 3,
                                  timeout=10, what="WATCHDOG=1 pings")
                self.assertFalse(ns.seen("STOPPING=1"))
                self.assertEqual(p.stop(signal.SIGTERM), 0)
                self.assertTrue(ns.seen("STOPPING=1"), ns.read())
                ready = [i for i, m in enumerate(ns.read()) if "READY=1" in m.split("\n")]
                stopping = [i for i, m in enumerate(ns.read()) if "STOPPING=1" in m.split("\n")]
                self.assertLess(ready[0], stopping[0])
            finally:
                ns.close()

    def test_sighup_rotates_token_without_a_refused_request(self):
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
            p = tg.start("serve")
            current = {"token": TOKEN}
            answers = []
            halt = threading.Event()

            def client():
                while not halt.is_set():
                    status, _, _ = tgtest.http_json(
                        "GET", tg.api + "/v1/calls?limit=1", None,
                        {"Authorization": "Bearer " + current["token"]})
                    answers.append(status)

            def reloads():
                return len(events(p, "config_reloaded"))

            t = threading.Thread(target=client)
            t.start()
            try:
                tgtest.wait_until(lambda: len(answers) > 20, what="requests flowing")
                # 1. the new token first, the old one still accepted
                write_secret(tg.token_file, "new-token-abcdef\n%s\n" % TOKEN)
                p.send_signal(signal.SIGHUP)
                tgtest.wait_until(lambda: reloads() == 1, what="first reload")
                n = len(answers)
                tgtest.wait_until(lambda: len(answers) > n + 20, what="requests after reload")
                current["token"] = "new-token-abcdef"  # the clients move over
                n = len(answers)
                tgtest.wait_until(lambda: len(answers) > n + 20, what="requests on the new token")
                # 2. the old one dropped
                write_secret(tg.token_file, "new-token-abcdef\n")
                p.send_signal(signal.SIGHUP)
                tgtest.wait_until(lambda: reloads() == 2, what="second reload")
                n = len(answers)
                tgtest.wait_until(lambda: len(answers) > n + 20, what="requests after 2nd")
            finally:
                halt.set()
                t.join()
            self.assertTrue(answers and all(s == 200 for s in answers),
                            "refused during the rotation: %r" % sorted(set(answers)))
            old = tgtest.http_json("GET", tg.api + "/v1/calls", None,
                                   {"Authorization": "Bearer " + TOKEN})[0]
            self.assertEqual(old, 401)
            self.assertEqual([e["applied"] for e in events(p, "config_reloaded")],
                             [["api.token_file"], ["api.token_file"]])
            self.assertIsNone(p.poll())

    def test_sighup_reads_the_provider_key_again(self):
        # The provider demands an API key; tollgate reads it from a file.
        # The provider rotates it (a new stub on the same port demands the
        # new key); the file is rewritten in place and SIGHUP makes the
        # exit send the new key from its next call on, with no restart.
        d = tgtest.scratch_dir("tg-keys-")

        def key_file(name, text):
            path = os.path.join(d, name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                f.write(text + "\n")
            return path
        old, new = key_file("old", "key-old-0123456789"), key_file("new", "key-new-9876543210")
        ours = key_file("ours", "key-old-0123456789")
        with tgtest.start_stub("--mode", "fast", "--auth-secret-file", old) as stub, \
                Tollgate(stub.url, provider={"auth": "bearer", "auth_secret_file": ours},
                         retry=FAST_RETRY) as tg:
            p = tg.start("serve")
            self.assertEqual(tg.submit("key-1")[0], 202)
            self.assertEqual(tg.wait_final(["key-1"])["key-1"]["state"], "succeeded")
            port = stub.port
            stub.stop()
            with tgtest.start_stub("--mode", "fast", "--auth-secret-file", new,
                                   "--listen", "127.0.0.1:%d" % port) as stub2:
                key_file("ours", "key-new-9876543210")
                p.send_signal(signal.SIGHUP)
                tgtest.wait_until(lambda: events(p, "provider_credentials_reloaded"),
                                  what="the credentials read again")
                self.assertEqual(tg.submit("key-2")[0], 202)
                self.assertEqual(tg.wait_final(["key-2"])["key-2"]["state"], "succeeded")
                verdicts = [a.get("auth") for a in stub2.arrivals()]
                self.assertEqual(verdicts, ["ok"], "the new key from the first call on")
                self.assertFalse(events(p, "provider_credentials_reload_failed"))
                # a key file others may read fails the reload, which names
                # it; the key in force stays
                os.chmod(ours, 0o644)
                p.send_signal(signal.SIGHUP)
                failed = tgtest.wait_until(lambda: events(p, "config_reload_failed"),
                                           what="a refused credentials file")
                self.assertIn("provider.auth_secret_file", failed[0]["message"])
                self.assertIn("chmod 600", failed[0]["message"])
                self.assertEqual(len(events(p, "provider_credentials_reloaded")), 1)
                self.assertEqual(tg.submit("key-3")[0], 202)
                self.assertEqual(tg.wait_final(["key-3"])["key-3"]["state"], "succeeded")

    def test_sighup_live_refused_and_broken(self):
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
            p = tg.start("serve")
            rewrite_config(tg, "exit", "starts_per_second", "7")
            rewrite_config(tg, "log", "level", "warn")
            rewrite_config(tg, "admission", "max_backlog", "1234")
            p.send_signal(signal.SIGHUP)
            tgtest.wait_until(lambda: events(p, "config_reloaded"), what="reload")
            refused = events(p, "config_reload_refused")
            self.assertEqual([e["key"] for e in refused], ["exit.starts_per_second"])
            self.assertEqual(refused[0]["level"], "error")
            self.assertIn("owns the account", refused[0]["message"])
            done = events(p, "config_reloaded")[0]
            self.assertEqual(sorted(done["applied"]), ["admission.max_backlog", "log.level"])
            _, _, raw = tgtest.http_request("GET", tg.api + "/metrics")
            text = raw.decode()
            self.assertEqual(metric_value(text, "tollgate_config_starts_per_second"), 5.0)
            self.assertEqual(metric_value(text, "tollgate_config_admission_max_backlog"), 1234.0)
            self.assertIn('tollgate_config_reloads_total{result="refused"} 1', text)
            # log.level is live: the info lines (one a request) stop
            self.assertEqual(done["level"], "warn")
            lines = tgtest.json_lines(p.stderr_text())
            self.assertTrue(any(e.get("event") == "http_request" for e in lines))
            for _ in range(5):
                self.assertEqual(tg.submit("quiet-%d" % _)[0], 202)
            after = tgtest.json_lines(p.stderr_text())[len(lines):]
            self.assertEqual([e for e in after if e.get("level") == "info"], [])
            # a broken file: nothing changes, the process serves on
            rewrite_config(tg, "exit", "max_in_flight", "lots")
            p.send_signal(signal.SIGHUP)
            tgtest.wait_until(lambda: events(p, "config_reload_failed"), what="failed reload")
            failed = events(p, "config_reload_failed")[0]
            self.assertIn("exit.max_in_flight", failed["message"])
            self.assertIn("line", failed["message"])
            self.assertEqual(tgtest.http_json("GET", tg.api + "/healthz")[0], 200)
            self.assertEqual(tg.submit("after-broken")[0], 202)
            self.assertIsNone(p.poll())

    def test_readyz_owner_standby_and_store_gone(self):
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
            owner = tg.start("serve")
            st, _, body = tgtest.http_json("GET", tg.api + "/readyz")
            tgtest.wait_until(lambda: tgtest.http_json("GET", tg.api + "/readyz")[2]
                              .get("role") == "owner", what="owner ready")
            st, _, body = tgtest.http_json("GET", tg.api + "/readyz")
            self.assertEqual((st, body["status"]), (200, "ready"))
            # a second process on the same store: a standby, ready too
            port = tgtest.free_port()
            second = Tollgate.__new__(Tollgate)
            second.__dict__.update(tg.__dict__)
            second.config = os.path.join(tg.dir, "second.ini")
            with open(tg.config) as f, open(second.config, "w") as g:
                g.write(f.read().replace("127.0.0.1:%d" % tg.api_port, "127.0.0.1:%d" % port))
            second.api = "http://127.0.0.1:%d" % port
            second.procs = []
            try:
                second.start("serve")
                tgtest.wait_until(lambda: tgtest.http_json("GET", second.api + "/readyz")[2]
                                  .get("role") == "standby", what="standby ready")
                self.assertEqual(tgtest.http_json("GET", second.api + "/readyz")[0], 200)
            finally:
                second.close()
            # the store file goes away: not ready, but alive
            moved = tg.db + ".moved"
            os.rename(tg.db, moved)
            try:
                st, hdr, body = tgtest.http_json("GET", tg.api + "/readyz")
                self.assertEqual((st, body["reason"]), (503, "store_unreachable"))
                self.assertEqual(tgtest.http_json("GET", tg.api + "/healthz")[0], 200)
            finally:
                os.rename(moved, tg.db)
            self.assertEqual(tgtest.http_json("GET", tg.api + "/readyz")[0], 200)
            self.assertIsNone(owner.poll())

    def test_journal_priority_prefix(self):
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url) as tg:
            err_path = os.path.join(tg.dir, "journal.stderr")
            with open(err_path, "w") as err:
                st = os.fstat(err.fileno())
                env = dict(os.environ, JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
                # a bad token file makes an error line; a good start info lines
                p = subprocess.Popen([tgtest.binary("tollgate"), "serve", "--config",
                                      tg.config], stderr=err, stdout=subprocess.DEVNULL, env=env)
                try:
                    tgtest.wait_until(lambda: tg._healthy_raw(), what="api up")
                finally:
                    p.send_signal(signal.SIGTERM)
                    p.wait(10)
            with open(err_path) as f:
                lines = [l for l in f.read().splitlines() if l]
            self.assertTrue(lines)
            for line in lines:
                self.assertRegex(line, r"^<[3467]>\{")
                prio, obj = int(line[1]), json.loads(line[3:])
                self.assertEqual(prio, {"error": 3, "warn": 4, "info": 6, "debug": 7}[obj["level"]])
            # without the journal: plain JSON lines
            p = tg.start("serve")
            p.stop()
            self.assertTrue(all(l.startswith("{") for l in p.stderr_text().splitlines() if l))

    def test_retention_prunes_final_only(self):
        with tgtest.start_stub("--mode", "fast") as stub, \
                tgtest.start_stub("--mode", "unavailable", "--retry-after", "none") as down:
            # first: some refunds succeed, one goes to manual and is resolved
            # count_limited: the 503 counts against the one attempt (by
            # default it is not), so the refund reaches manual review
            with Tollgate(down.url, retry={"max_attempts": 1, "deadline_s": 600,
                                           "count_limited": "true"},
                          exit=FAST_EXIT) as tg:
                p = tg.start("serve")
                self.assertEqual(tg.submit("kept-manual")[0], 202)
                tg.wait_final(["kept-manual"], states=("manual",))
                p.stop()
                self.assertEqual(cli("manual", "resolve", "kept-manual", "--config", tg.config,
                                     "--operator", "ana", "--reason", "checked",
                                     "--outcome", "succeeded")[0], 0, "resolve")
                rewrite_config(tg, "provider", "base_url", stub.url)
                p = tg.start("serve")
                ops = ["old-%d" % i for i in range(6)] + ["newest"]
                for op in ops:
                    self.assertEqual(tg.submit(op)[0], 202)
                tg.wait_final(ops, states=("succeeded",))
                p.stop()
                # they became final three days ago (time passes on the data)
                db = sqlite3.connect(tg.db)
                db.execute("UPDATE operations SET updated_at = updated_at - ? WHERE state IN "
                           "('succeeded', 'rejected')", (3 * DAY_MS,))
                db.commit()
                db.close()
                # `tollgate prune`, two days: every old final one but the audited
                # one and the newest (its id would be handed out again)
                rc, out, err = cli("prune", "--config", tg.config, "--keep-days", "2",
                                   "--batch", "10")
                self.assertEqual(rc, 0, err)
                self.assertIn("pruned 6 operations and 6 calls", out)
                self.assertEqual([tg_status_code(tg, op) for op in ops],
                                 [None] * 6 + ["succeeded"])
                self.assertEqual(tg_status_code(tg, "kept-manual"), "succeeded")
                # the housekeeping: keep_days = 2 as well; the newest is no
                # longer the newest once another arrives. It arrives first:
                # a housekeeping round that finds nothing left looks again
                # only a minute later
                p = tg.start("serve")
                self.assertEqual(tg.submit("fresh")[0], 202)
                tg.wait_final(["fresh"], states=("succeeded",))
                p.stop()
                rewrite_config(tg, "retention", "keep_days", "2")
                p = tg.start("serve")
                tgtest.wait_until(lambda: tg.status("newest")[0] == 404, timeout=15,
                                  what="housekeeping prune")
                self.assertTrue(events(p, "pruned"))
                st, _, body = tg.status("kept-manual")
                self.assertEqual((st, body["state"]), (200, "succeeded"))
                self.assertTrue(any(a["action"] == "resolve" for a in body["audit"]), body)
                self.assertEqual(tg.status("fresh")[0], 200)
                _, _, raw = tgtest.http_request("GET", tg.api + "/metrics")
                text = raw.decode()
                self.assertEqual(metric_value(text, "tollgate_operations_pruned_total"), 7)
                self.assertEqual(metric_value(text, "tollgate_calls_pruned_total"), 7)
                self.assertEqual(metric_value(text, "tollgate_calls_total"), 9)  # all time
                self.assertEqual(metric_value(text, 'tollgate_operations{state="succeeded"}'), 2)

    def test_backup_restores_and_reconciles(self):
        with tgtest.start_stub("--mode", "drop", "--query-mode", "unavailable",
                               "--retry-after", "none") as stub:
            with Tollgate(stub.url, retry=FAST_RETRY, exit=FAST_EXIT) as tg:
                p = tg.start("serve")
                ops = ["bk-%d" % i for i in range(5)]
                for op in ops:
                    self.assertEqual(tg.submit(op)[0], 202)
                # executed at the provider, the answers dropped: unknown here
                tg.wait_final(ops, timeout=30, states=("unknown", "retry_wait"))
                backup = os.path.join(tg.dir, "backup.db")
                rc, out, err = cli("backup", "--config", tg.config, "--to", backup)
                self.assertEqual(rc, 0, err)
                self.assertEqual(cli("backup", "--config", tg.config, "--to", backup)[0], 1)
                p.stop()
                # restore: the copy in a new place, the provider answering again
                with Tollgate(stub.url, retry=FAST_RETRY, exit=FAST_EXIT) as restored:
                    shutil.copy(backup, restored.db)
                    stub.set_mode(mode="fast", query_mode="fast")
                    restored.start("serve")
                    got = restored.wait_final(ops, timeout=30, states=("succeeded",))
                    self.assertEqual(set(got), set(ops))
                    for op in ops:
                        self.assertEqual(stub.executions(op), 1, op)
                        kinds = [a["kind"] for a in got[op]["attempts"]]
                        self.assertIn("query", kinds, got[op])

    def test_config_check_and_version(self):
        d = tempfile.mkdtemp(prefix="tgcheck-")
        try:
            bad = os.path.join(d, "bad.ini")
            with open(bad, "w") as f:
                f.write("[exit]\nmax_inflight = 4\nstarts_per_second = fast\n[provder]\nx = 1\n")
            rc, out, err = cli("config", "check", "--config", bad)
            self.assertEqual(rc, 1, err)
            self.assertIn("%s:2: exit.max_inflight: unknown key; did you mean "
                          "exit.max_in_flight?" % bad, out)
            self.assertIn("%s:3: exit.starts_per_second: " % bad, out)
            self.assertIn("%s:5: provder.x: unknown section [provder]; did you mean "
                          "[provider]?" % bad, out)
            self.assertIn("3 problems", out)
            good = os.path.join(d, "good.ini")
            with open(good, "w") as f:
                f.write("[exit]\nmax_in_flight = 4 # four\nstarts_per_second = 5 ; five\n")
            rc, out, err = cli("config", "check", "--config", good)
            self.assertEqual((rc, out.strip()), (0, "%s: the configuration is valid" % good))
            rc, out, err = cli("--version")
            self.assertEqual(rc, 0)
            self.assertRegex(out, r"^tollgate \d+\.\d+\.\d+ \(git [0-9a-f]{12}(-dirty)?\)\n$")
            rc, out, err = subprocess.run([tgtest.binary("tollgate-stub"), "--version"],
                                          capture_output=True, text=True).returncode, None, None
            self.assertEqual(rc, 0)
        finally:
            shutil.rmtree(d, ignore_errors=True)


def tg_status_code(tg, op):
    """The operation's state in the store file, or None when it is not there."""
    db = sqlite3.connect(tg.db)
    try:
        row = db.execute("SELECT state FROM operations WHERE operation_id = ?", (op,)).fetchone()
        return row[0] if row else None
    finally:
        db.close()


def _healthy_raw(self):
    try:
        return tgtest.http_json("GET", self.api + "/healthz", timeout=1)[0] == 200
    except OSError:
        return False


Tollgate._healthy_raw = _healthy_raw

if __name__ == "__main__":
    tgtest.main_unittest()
