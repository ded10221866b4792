/*
 * tgtest_mysql.h — a raw MariaDB session for the unit tests that act as
 * another application on the store's database (test_store_contract's
 * MariaDB half, test_store_mysql_busy). Built only with MariaDB support
 * (TG_HAVE_MARIADB; tests/CMakeLists.txt).
 *
 *   MYSQL *m = tgtest_mysql_connect(url);
 *   ...
 *   mysql_close(m);
 */
#ifndef TG_TESTS_TGTEST_MYSQL_H
#define TG_TESTS_TGTEST_MYSQL_H

#include <mysql.h>

/* Connects to the database of url, mysql://user:pass@host[:port]/db (port
 * 3306 when it has none). Never returns NULL: a url without "user:pass@" or
 * "/db", or a failed connect, fails the running cmocka test. The caller owns
 * the session and closes it with mysql_close(); url is only read during the
 * call. */
MYSQL *tgtest_mysql_connect(const char *url);

#endif
