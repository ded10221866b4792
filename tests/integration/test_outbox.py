"""The outbox (issue 7, docs/outbox.md): an application inserts a refund into
tollgate's backlog table inside its OWN transaction, next to its own business
row, with the server's stock client (mariadb, psql). A committed row is taken
in and sent like an API intake; a rolled-back one never existed; an invalid
one goes to manual review with reason "invalid", not skipped.

Runs on the test server of TG_TEST_STORE (mysql: TG_TEST_MYSQL_URL; pg:
TG_TEST_PG_URL), in a fresh database; ctest runs it as it.test_outbox_mariadb
and it.test_outbox_pg. Skipped when the variable is not set.
"""

import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
from tgdaemon import Tollgate, log_events  # noqa: E402
from tgmariadb import client_argv  # noqa: E402


class MariaDB:
    url = os.environ.get("TG_TEST_MYSQL_URL", "")
    program, run_flag, begin = "mariadb", "-e", "START TRANSACTION"
    table_options = " ENGINE=InnoDB"

    @staticmethod
    def argv(url):
        return client_argv(url)


class PostgreSQL:
    url = os.environ.get("TG_TEST_PG_URL", "")
    program, run_flag, begin, table_options = "psql", "-c", "BEGIN", ""

    @staticmethod
    def argv(url):
        """psql on a store url, as an application would use it (libpq reads
        the url itself): unaligned, tab-separated, stop at the first error."""
        return ["psql", "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", url], None


SERVER = {"mysql": MariaDB, "pg": PostgreSQL}.get(os.environ.get("TG_TEST_STORE", ""))


def client(url, sql):
    argv, env = SERVER.argv(url)
    r = subprocess.run(argv + [SERVER.run_flag, sql], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise AssertionError("%s failed: %s" % (SERVER.program, r.stderr))
    return [line.split("\t") for line in r.stdout.splitlines()]


@unittest.skipUnless(SERVER and SERVER.url and shutil.which(SERVER.program),
                     "TG_TEST_STORE is not mysql or pg, or its server's url is not set")
class OutboxTest(unittest.TestCase):
    def test_commit_rollback_and_invalid(self):
        url = "%s_outbox_%d" % (SERVER.url, os.getpid())
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url, store_url=url) as tg:
            tg.start("api")  # creates the database and the schema
            client(url, "CREATE TABLE refund_requests (order_id VARCHAR(32) PRIMARY KEY, "
                        "note VARCHAR(64))" + SERVER.table_options)
            # The application's transaction: its own row and the backlog row
            # commit or roll back together (docs/outbox.md's example).
            client(url, """
                %(begin)s;
                INSERT INTO refund_requests VALUES ('order-1', 'customer asked');
                INSERT INTO operations (operation_id, payment_id, amount, currency, source)
                  VALUES ('order-1-refund', 'pay_1', 1500, 'TWD', 'outbox');
                COMMIT;
                %(begin)s;
                INSERT INTO refund_requests VALUES ('order-2', 'changed our mind');
                INSERT INTO operations (operation_id, payment_id, amount, currency, source)
                  VALUES ('order-2-refund', 'pay_2', 900, 'TWD', 'outbox');
                ROLLBACK;
                %(begin)s;
                INSERT INTO refund_requests VALUES ('order-3', 'bad row');
                INSERT INTO operations (operation_id, payment_id, amount, currency, source)
                  VALUES ('order-3-refund', 'pay 3', 700, 'twd', 'outbox');
                COMMIT;""" % {"begin": SERVER.begin})
            # A transaction left open meanwhile: its row is invisible, and
            # blocks nothing, until it commits.
            argv, env = SERVER.argv(url)
            holder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                      text=True, env=env)
            holder.stdin.write(SERVER.begin + ";\n"
                               "INSERT INTO refund_requests VALUES ('order-4', 'slow app');\n"
                               "INSERT INTO operations (operation_id, payment_id, amount, "
                               "currency, source) VALUES ('order-4-refund', 'pay_4', 300, "
                               "'TWD', 'outbox');\n")
            holder.stdin.flush()

            d = tg.start("dispatch", wait_api=False)
            final = tg.wait_final(["order-1-refund", "order-3-refund"], timeout=20)
            self.assertEqual(final["order-1-refund"]["state"], "succeeded", final)
            self.assertEqual(final["order-3-refund"]["state"], "manual", final)
            self.assertEqual(final["order-3-refund"].get("reason"), "invalid", final)
            status, _, _ = tg.status("order-2-refund")
            self.assertEqual(status, 404)  # rolled back: never existed
            self.assertEqual(tg.status("order-4-refund")[0], 404)  # not committed yet
            holder.stdin.write("COMMIT;\n")
            holder.stdin.close()
            self.assertEqual(holder.wait(10), 0)
            final = tg.wait_final(["order-4-refund"], timeout=20)
            self.assertEqual(final["order-4-refund"]["state"], "succeeded", final)

            keys = [a.get("idempotency_key") for a in stub.arrivals()
                    if a["path"].startswith("/v1/")]
            # each committed valid refund sent once; the others never
            self.assertEqual(keys, ["order-1-refund", "order-4-refund"])
            self.assertEqual(client(url, "SELECT order_id FROM refund_requests ORDER BY 1"),
                             [["order-1"], ["order-3"], ["order-4"]])
            # the invalid row is kept, with an audit row that names the problem
            audit = client(url, "SELECT a.reason, a.detail FROM audit a JOIN operations o "
                                "ON o.id = a.op_id WHERE o.operation_id = 'order-3-refund'")
            self.assertEqual(audit[0][0], "invalid")
            self.assertIn("payment_id", audit[0][1])
            self.assertTrue(log_events(d, "outbox_intake"))

    def test_row_notify_url_cleared(self):
        """A refund's own notify_url is taken only through the API (against
        [notify] allow): one an application writes into an outbox row is
        cleared at intake, and its events carry none."""
        url = "%s_outbox_url_%d" % (SERVER.url, os.getpid())
        with tgtest.start_stub("--mode", "fast") as stub, Tollgate(stub.url, store_url=url) as tg:
            tg.start("api")
            client(url, """
                INSERT INTO operations (operation_id, payment_id, amount, currency, source,
                                        notify_url)
                  VALUES ('order-5-refund', 'pay_5', 500, 'TWD', 'api',
                          'http://evil.example/hook')""")
            tg.start("dispatch", wait_api=False)
            final = tg.wait_final(["order-5-refund"], timeout=20)
            self.assertEqual(final["order-5-refund"]["state"], "succeeded", final)
            self.assertEqual(client(url, "SELECT notify_url FROM operations "
                                         "WHERE operation_id = 'order-5-refund'"), [[""]])
            self.assertEqual(client(url, "SELECT notify_url FROM events "
                                         "WHERE operation_id = 'order-5-refund'"), [[""]])


if __name__ == "__main__":
    tgtest.main_unittest()
