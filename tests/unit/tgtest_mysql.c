/*
 * tgtest_mysql.c — tgtest_mysql_connect(): the one parse of a test's
 * mysql:// url into mysql_real_connect()'s arguments, for the unit tests
 * that open a second, raw session beside the store's. It fails the running
 * cmocka test rather than returning an error, so a caller never holds a
 * session that is not connected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tgtest_mysql.h"

MYSQL *tgtest_mysql_connect(const char *url)
{
        char user[64], pass[64], host[64], db[128];
        unsigned port = 3306;
        const char *p = url + strlen("mysql://");
        const char *colon = strchr(p, ':'), *at = strrchr(p, '@'), *slash;
        MYSQL *m = mysql_init(NULL);

        assert_non_null(m);
        assert_true(colon && at && colon < at);
        snprintf(user, sizeof(user), "%.*s", (int)(colon - p), p);
        snprintf(pass, sizeof(pass), "%.*s", (int)(at - colon - 1), colon + 1);
        slash = strchr(at, '/');
        assert_non_null(slash);
        colon = memchr(at, ':', (size_t)(slash - at));
        snprintf(host, sizeof(host), "%.*s", (int)((colon ? colon : slash) - at - 1), at + 1);
        if (colon)
                port = (unsigned)strtoul(colon + 1, NULL, 10);
        snprintf(db, sizeof(db), "%s", slash + 1);
        assert_non_null(mysql_real_connect(m, host, user, pass, db, port, NULL, 0));
        return m;
}
