"""The shares' end-to-end tests (test_shares.py) on the MariaDB store (issue 7).

Every test of SharesTest runs again with store.url pointing at a fresh
MariaDB database of its own ("<db of TG_TEST_MYSQL_URL>_sh_<pid>_<n>"):
shares held by GET_LOCK on live sessions instead of file locks. Skipped,
and said so (exit 77: ctest shows Skipped), when TG_TEST_MYSQL_URL is not
set (scripts/test.sh sets it from scripts/mariadb-test-server.sh).
"""

import itertools
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tgtest  # noqa: E402
import test_shares  # noqa: E402  (imported as a module: SharesTest itself is not re-run here)

MYSQL_URL = os.environ.get("TG_TEST_MYSQL_URL", "")
_serial = itertools.count(1)


@unittest.skipUnless(MYSQL_URL, "TG_TEST_MYSQL_URL not set (see scripts/mariadb-test-server.sh)")
class SharesOnMariaDBTest(test_shares.SharesTest):
    store = "mariadb"

    def store_url(self):
        return "%s_sh_%d_%d" % (MYSQL_URL, os.getpid(), next(_serial))


if __name__ == "__main__":
    tgtest.main_unittest(parallel=test_shares.BEHAVIOUR_ONLY)
