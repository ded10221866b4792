"""The exit's end-to-end tests (test_exit.py) on the PostgreSQL store (issue 29).

Every test of ExitTest runs again with store.url pointing at a fresh PostgreSQL
database of its own ("<db of TG_TEST_PG_URL>_it_<pid>_<n>", created by
tollgate on first open). Skipped, and said so, when TG_TEST_PG_URL is not
set (scripts/test.sh sets it from scripts/pg-test-server.sh).

Same processes, same stub, same judgments: only the store differs, which is
the point — ownership by a session advisory lock (pg_try_advisory_lock) instead of a file lock,
SKIP LOCKED claims, the epoch fence on the server.
"""

import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgdaemon  # noqa: E402
import tgtest  # noqa: E402
import test_exit  # noqa: E402  (imported as a module: ExitTest itself is not re-run here)

PG_URL = os.environ.get("TG_TEST_PG_URL", "")
_serial = itertools.count(1)


def fresh_database_url():
    """A database nobody used yet on the test server."""
    return "%s_it_%d_%d" % (PG_URL, os.getpid(), next(_serial))


class ExitOnPostgreSQLTest(test_exit.ExitTest):
    def setUp(self):
        if not PG_URL:
            self.skipTest("TG_TEST_PG_URL not set (see scripts/pg-test-server.sh)")
        tgdaemon.default_store_url = fresh_database_url

    def tearDown(self):
        tgdaemon.default_store_url = None

    def test_store_outage_pauses_the_exit_and_loses_nothing(self):
        # That test holds SQLite's file lock; PostgreSQL's outages (a
        # restart, killed sessions) have no test of their own yet (issue 29).
        self.skipTest("SQLite's write lock; PostgreSQL outages: not tested yet (issue 29)")


if __name__ == "__main__":
    tgtest.main_unittest(parallel=test_exit.BEHAVIOUR_ONLY)
