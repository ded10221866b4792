/*
 * ui_session — the console's sign-in: who a token belongs to, the sessions
 * it is exchanged for, and their CSRF tokens. Kept in the API process's
 * memory (a restart signs everyone out) and used only from the HTTP
 * server's thread.
 *
 * Invariants:
 *   - a token is compared as SHA-256 digests with CRYPTO_memcmp against
 *     every user (no early exit), so the time taken says nothing about
 *     which user or which byte;
 *   - a session id and a CSRF token are 32 bytes from getrandom(), sent as
 *     64 hex digits; the id travels only in an HttpOnly, SameSite=Strict
 *     cookie (never in a URL or a body), the CSRF token only in the
 *     session's JSON and back in the X-CSRF-Token header;
 *   - a session ends session_idle_ms after its last use and session_max_ms
 *     after sign-in, whichever comes first; an ended session is wiped;
 *   - at most UI_SESSIONS_MAX sessions: a new one replaces an ended one, or
 *     else the one used least recently.
 */
#ifndef TG_UI_SESSION_H
#define TG_UI_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tg_time.h"
#include "daemon/ui_users.h"

#define UI_SESSIONS_MAX 256
#define UI_SECRET_LEN   32
#define UI_SECRET_HEX   (2 * UI_SECRET_LEN + 1)
#define UI_COOKIE_NAME  "tg_session"

struct ui_session {
        bool used;
        unsigned char id[UI_SECRET_LEN];
        char csrf[UI_SECRET_HEX];
        char user[UI_NAME_MAX + 1];
        enum ui_role role;
        /* may change an account's controls (an admin credential, or the
         * API token: daemon/account_ctl.h) */
        bool admin;
        tg_wall_ms created, last_seen;
};

struct ui_sessions {
        struct ui_session s[UI_SESSIONS_MAX];
        int64_t idle_ms, max_ms;
};

void ui_sessions_init(struct ui_sessions *t, int64_t idle_ms, int64_t max_ms);
/* Wipes every session. */
void ui_sessions_clear(struct ui_sessions *t);

/* Who the token (len bytes) belongs to: a user of users[count] whose digest
 * matches, or one of the API's tokens (api_digests[napi]: the file may hold
 * several while one rotates), the API token's operator UI_API_TOKEN_USER.
 * 0 and ret_user/ret_role, or TG_ENOTFOUND. */
int ui_authenticate(const struct ui_user *users, unsigned count,
                    const unsigned char (*api_digests)[UI_DIGEST_LEN], unsigned napi,
                    const char *token, size_t len, char ret_user[UI_NAME_MAX + 1],
                    enum ui_role *ret_role);

/* A new session; ret_cookie gets its id as 64 hex digits. 0, or TG_EIO when
 * the system gives no randomness. */
int ui_session_create(struct ui_sessions *t, const char *user, enum ui_role role, tg_wall_ms now,
                      char ret_cookie[UI_SECRET_HEX], struct ui_session **ret_session);

/* The live session named by the Cookie header (NULL: none), touched (its
 * idle time starts again). An expired one is ended. 0 or TG_ENOTFOUND. */
int ui_session_find(struct ui_sessions *t, const char *cookie_header, tg_wall_ms now,
                    struct ui_session **ret_session);

/* When the session ends if unused from now: the earlier of idle and max. */
tg_wall_ms ui_session_expires(const struct ui_sessions *t, const struct ui_session *s);

void ui_session_end(struct ui_session *s);

/* The X-CSRF-Token header (NULL: missing) matches the session's. */
bool ui_session_csrf_ok(const struct ui_session *s, const char *header);

/* The value of cookie `name` in a Cookie header into buf. 0, TG_ENOTFOUND,
 * TG_EFULL. */
int ui_cookie_value(const char *cookie_header, const char *name, char *buf, size_t size);

#endif
