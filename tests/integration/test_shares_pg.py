"""The shares' end-to-end tests (test_shares.py) on the PostgreSQL store (issue 29).

Every test of SharesTest runs again with store.url pointing at a fresh
PostgreSQL database of its own ("<db of TG_TEST_PG_URL>_sh_<pid>_<n>"):
shares held by session advisory locks instead of file locks. Skipped, and
said so (exit 77: ctest shows Skipped), when TG_TEST_PG_URL is not set
(scripts/test.sh sets it from scripts/pg-test-server.sh).
"""

import itertools
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
import test_shares  # noqa: E402  (imported as a module: SharesTest itself is not re-run here)

PG_URL = os.environ.get("TG_TEST_PG_URL", "")
_serial = itertools.count(1)


@unittest.skipUnless(PG_URL, "TG_TEST_PG_URL not set (see scripts/pg-test-server.sh)")
class SharesOnPostgreSQLTest(test_shares.SharesTest):
    store = "postgresql"

    def store_url(self):
        return "%s_sh_%d_%d" % (PG_URL, os.getpid(), next(_serial))


if __name__ == "__main__":
    tgtest.main_unittest(parallel=test_shares.BEHAVIOUR_ONLY)
