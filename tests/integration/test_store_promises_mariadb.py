"""The MariaDB store's promises, on a private server that writes a binary log
(issue 29, section 2), started by this test itself (tgmariadb.py, never the
CI's shared server), with tollgate's user holding every privilege on its
databases and no SUPER: the common managed-database setup.

- Without log_bin_trust_function_creators such a user may not create the
  no-delete triggers. `serve`, `dispatch` and `api` refuse to start, exit 1,
  with a message naming the fix (the server variable, SUPER) and the key that
  accepts it; with store.allow_missing_triggers = true they start, log
  store_triggers_missing at every start and /readyz says so in its
  `warnings` (ready all the same, the body still openapi.yaml's). Once the
  operator sets the variable, the next start creates the triggers and says
  nothing. A user without the TRIGGER privilege is refused the same way, with
  the GRANT as the fix.
- Backup and restore the documented way (docs/operating.md, "Backups"):
  `mariadb-dump --single-transaction --routines --triggers` of the store's
  database while `tollgate serve` writes to it, loaded into a fresh database
  with the stock client (tgbackup.py, the scenario PostgreSQL's test runs too).
"""

import os
import subprocess
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgbackup  # noqa: E402
import tgmariadb  # noqa: E402
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events  # noqa: E402

GUARDS = ("account_audit_no_delete", "account_audit_no_update", "audit_no_delete",
          "audit_no_update", "calls_no_delete", "operations_no_delete")
PROVIDER = tgbackup.PROVIDER


def ready_schema_check(body):
    """/readyz's body against openapi.yaml's Ready (when yaml and jsonschema
    are installed, as for test_contracts)."""
    try:
        import jsonschema
        import yaml
    except ImportError:
        return
    with open(os.path.join(tgtest.source_dir(), "openapi.yaml")) as f:
        doc = yaml.safe_load(f)
    schema = {"$ref": "#/components/schemas/Ready", "components": doc["components"]}
    jsonschema.Draft202012Validator(schema).validate(body)


@unittest.skipUnless(os.environ.get("TG_TEST_MYSQL_URL") and tgmariadb.available(),
                     "MariaDB tests not enabled (TG_TEST_MYSQL_URL unset or no mariadbd)")
class StorePromisesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.db = tgmariadb.PrivateMariaDB(server_args=["--log-bin=binlog", "--server-id=1"])
        cls.stub = tgtest.start_stub("--mode", "fast", "--retry-after", "none")

    @classmethod
    def tearDownClass(cls):
        cls.stub.close()
        cls.db.close()

    def setUp(self):
        self.stub.set_mode(mode="fast", query_mode="fast")

    def triggers(self, database):
        return sorted(r[0] for r in self.db.sql(
            "SELECT trigger_name FROM information_schema.triggers "
            "WHERE trigger_schema = '%s'" % database))

    def ready(self, tg, owner=True):
        """/readyz's body: once this process owns the exit (owner), or now
        (a restarted owner waits out its predecessor's calls first)."""
        def answer():
            st, _, body = tgtest.http_json("GET", tg.api + "/readyz")
            return body if not owner or (st == 200 and body["role"] == "owner") else None
        body = tgtest.wait_until(answer, timeout=10, what="/readyz owner")
        ready_schema_check(body)
        return body

    def test_binlog_without_super_refuses_unless_accepted(self):
        self.assertEqual(self.db.sql("SELECT @@log_bin")[0][0], "1")
        self.assertEqual(self.db.sql("SELECT Super_priv FROM mysql.user WHERE user = '%s'"
                                     % self.db.USER), [["N"]])
        self.db.sql("SET GLOBAL log_bin_trust_function_creators = 0")
        url = self.db.url("tollgate_binlog")
        with Tollgate(self.stub.url, store_url=url, provider=PROVIDER) as plain, \
                Tollgate(self.stub.url, store_url=url, provider=PROVIDER,
                         store={"allow_missing_triggers": "true"}) as accepting:
            # (a) refused, with the fix, by every daemon command
            for command in ("serve", "dispatch", "api"):
                p = plain.start(command, wait_api=False)
                self.assertEqual(p.popen.wait(10), 1, command)
                err = p.stderr_text()
                self.assertIn("tollgate %s: the MariaDB store tollgate_binlog lacks its "
                              "no-delete triggers (operations_no_delete, calls_no_delete, "
                              "audit_no_delete, audit_no_update, account_audit_no_delete, "
                              "account_audit_no_update)" % command, err)
                self.assertIn("user tollgate has no SUPER", err)
                self.assertIn("SET GLOBAL log_bin_trust_function_creators = 1", err)
                self.assertIn("or set store.allow_missing_triggers = true", err)
            self.assertEqual(self.triggers("tollgate_binlog"), [])  # the schema is there
            self.assertEqual(self.db.sql("SELECT version > 0 FROM tollgate_binlog."
                                         "schema_version")[0][0], "1")
            # (b) accepted: it runs, and says so at every start, and on /readyz
            for start in range(2):
                p = accepting.start("serve")
                warned = log_events(p, "store_triggers_missing")
                self.assertEqual(len(warned), 1, p.stderr_text())
                self.assertEqual(warned[0]["level"], "warn")
                self.assertIn("log_bin_trust_function_creators = 1", warned[0]["detail"])
                body = self.ready(accepting, owner=start == 0)
                if start == 0:
                    self.assertEqual(body["status"], "ready")
                self.assertEqual([w["code"] for w in body["warnings"]],
                                 ["store_triggers_missing"])
                self.assertIn("SET GLOBAL log_bin_trust_function_creators = 1",
                              body["warnings"][0]["detail"])
                self.assertEqual(accepting.submit("promised-%d" % p.pid)[0], 202)
                self.assertEqual(p.stop(), 0)
            # the fix the message names: the next start creates them, says nothing
            self.db.sql("SET GLOBAL log_bin_trust_function_creators = 1")
            p = plain.start("serve")
            self.assertEqual(log_events(p, "store_triggers_missing"), [])
            self.assertNotIn("warnings", self.ready(plain, owner=False))
            self.assertEqual(self.triggers("tollgate_binlog"), sorted(GUARDS))
            argv, env = tgmariadb.client_argv(url)
            r = subprocess.run(argv + ["-e", "DELETE FROM operations"], capture_output=True,
                               text=True, env=env)
            self.assertIn("operations are deleted only by a prune", r.stderr)
            self.assertEqual(p.stop(), 0)

    def test_no_trigger_privilege_refuses_with_the_grant(self):
        self.db.sql("SET GLOBAL log_bin_trust_function_creators = 1")
        self.db.sql("CREATE DATABASE IF NOT EXISTS tollgate_notrig;"
                    "CREATE USER IF NOT EXISTS 'notrig'@'127.0.0.1' IDENTIFIED BY 'nt';"
                    "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER "
                    "ON tollgate_notrig.* TO 'notrig'@'127.0.0.1'")
        url = "mysql://notrig:nt@127.0.0.1:%d/tollgate_notrig" % self.db.port
        with Tollgate(self.stub.url, store_url=url, provider=PROVIDER) as tg:
            p = tg.start("serve", wait_api=False)
            self.assertEqual(p.popen.wait(10), 1)
            self.assertIn("tollgate serve: the MariaDB store tollgate_notrig lacks its "
                          "no-delete triggers (operations_no_delete, calls_no_delete, "
                          "audit_no_delete, audit_no_update, account_audit_no_delete, "
                          "account_audit_no_update): user notrig may not create "
                          "them; fix: GRANT TRIGGER ON `tollgate_notrig`.* TO notrig",
                          p.stderr_text())
            self.db.sql("GRANT TRIGGER ON tollgate_notrig.* TO 'notrig'@'127.0.0.1'")
            p = tg.start("serve")
            self.assertEqual(log_events(p, "store_triggers_missing"), [])
            self.assertEqual(self.triggers("tollgate_notrig"), sorted(GUARDS))
            self.assertEqual(p.stop(), 0)

    def test_dump_while_serving_restores_into_a_fresh_database(self):
        self.db.sql("SET GLOBAL log_bin_trust_function_creators = 1")

        def dump(url, path):
            u = urllib.parse.urlsplit(url)
            env = dict(os.environ, MYSQL_PWD=u.password)
            with open(path, "w") as f:
                r = subprocess.run(["mariadb-dump", "--no-defaults", "-h", u.hostname, "-P",
                                    str(u.port), "-u", u.username, "--single-transaction",
                                    "--routines", "--triggers", u.path.lstrip("/")],
                                   stdout=f, stderr=subprocess.PIPE, text=True, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)

        def restore(url, path):
            # with the stock client as the application's user
            name = urllib.parse.urlsplit(url).path.lstrip("/")
            argv, env = tgmariadb.client_argv(url)
            create = [a for a in argv if a != name]
            r = subprocess.run(create + ["-e", "CREATE DATABASE %s" % name],
                               capture_output=True, text=True, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path) as f:
                r = subprocess.run(argv, stdin=f, capture_output=True, text=True, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)

        tgbackup.dump_while_serving_restores(
            self, self.stub, self.db.url("tollgate_dumped"), self.db.url("tollgate_restored"),
            dump, restore, lambda url: self.triggers(urllib.parse.urlsplit(url).path[1:]),
            GUARDS, ready=lambda tg: self.assertNotIn("warnings", self.ready(tg)))

if __name__ == "__main__":
    tgtest.main_unittest()
