/*
 * Fuzz target for the console's parsers of outside text: the users file
 * (ui_users_parse) and the Cookie header (ui_cookie_value, and
 * ui_session_find on a table with one live session). Invariants checked on
 * every input, abort() on a breach:
 *   - the users file parses to 0 with at most max users, each name 1-64 of
 *     the name alphabet and each role operator or viewer, or to TG_EPARSE /
 *     TG_EFULL with a message starting "line ";
 *   - a cookie value read is NUL-terminated inside the buffer;
 *   - no cookie text but the session's own id finds the session, and the
 *     session is still there afterwards (a miss never ends it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/ui_session.h"
#include "daemon/ui_users.h"

static struct ui_sessions table;
static char live_cookie[UI_SECRET_HEX];

static void check_users(const uint8_t *data, size_t size)
{
        struct ui_user users[4];
        char err[160] = "";
        unsigned count = 99;
        int r = ui_users_parse((const char *)data, size, users, 4, &count, err, sizeof(err));

        if (r == 0) {
                if (count > 4)
                        abort();
                for (unsigned i = 0; i < count; i++) {
                        size_t n = strnlen(users[i].name, sizeof(users[i].name));
                        if (n == 0 || n > UI_NAME_MAX)
                                abort();
                        for (size_t k = 0; k < n; k++)
                                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789._@-",
                                            users[i].name[k]))
                                        abort();
                        if (users[i].role != UI_ROLE_OPERATOR && users[i].role != UI_ROLE_VIEWER)
                                abort();
                }
        } else if (r != TG_EPARSE && r != TG_EFULL) {
                abort();
        } else if (strncmp(err, "line ", 5) != 0) {
                abort();
        }
}

static void check_cookie(const uint8_t *data, size_t size)
{
        char *text = malloc(size + 1);
        char buf[UI_SECRET_HEX];
        struct ui_session *s = NULL;
        int r;

        if (!text)
                return;
        memcpy(text, data, size);
        text[size] = '\0';
        memset(buf, 'x', sizeof(buf));
        r = ui_cookie_value(text, UI_COOKIE_NAME, buf, sizeof(buf));
        if (r == 0 && !memchr(buf, '\0', sizeof(buf)))
                abort();
        if (r != 0 && r != TG_ENOTFOUND && r != TG_EFULL)
                abort();
        r = ui_session_find(&table, text, 1000, &s);
        if (r == 0 && (r = ui_cookie_value(text, UI_COOKIE_NAME, buf, sizeof(buf))) == 0 &&
            strcmp(buf, live_cookie) != 0)
                abort(); /* found by something else than its id */
        {
                char own[64 + UI_SECRET_HEX];
                snprintf(own, sizeof(own), "%s=%s", UI_COOKIE_NAME, live_cookie);
                if (ui_session_find(&table, own, 1000, &s) != 0)
                        abort(); /* a miss ended the session */
        }
        free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static int ready;
        struct ui_session *s = NULL;

        if (!ready) {
                ui_sessions_init(&table, 1000000, 1000000);
                if (ui_session_create(&table, "fuzz", UI_ROLE_OPERATOR, 0, live_cookie, &s) != 0)
                        abort();
                ready = 1;
        }
        check_users(data, size);
        check_cookie(data, size);
        return 0;
}
