/*
 * ui_session — sessions and credentials of the console (see the header).
 * Nothing here logs or keeps a token: only digests, and session ids that
 * are wiped when they end.
 */
#include "daemon/ui_session.h"

#include <stdio.h>
#include <string.h>

#include "core/encode.h"
#include "core/tg_error.h"
#include "platform/digest.h"

void ui_sessions_init(struct ui_sessions *t, int64_t idle_ms, int64_t max_ms)
{
        memset(t, 0, sizeof(*t));
        t->idle_ms = idle_ms;
        t->max_ms = max_ms;
}

void ui_session_end(struct ui_session *s)
{
        if (s)
                explicit_bzero(s, sizeof(*s));
}

void ui_sessions_clear(struct ui_sessions *t)
{
        for (unsigned i = 0; i < UI_SESSIONS_MAX; i++)
                ui_session_end(&t->s[i]);
}

int ui_authenticate(const struct ui_user *users, unsigned count,
                    const unsigned char (*api_digests)[UI_DIGEST_LEN], unsigned napi,
                    const char *token, size_t len, char ret_user[UI_NAME_MAX + 1],
                    enum ui_role *ret_role)
{
        unsigned char d[UI_DIGEST_LEN];
        int found = -1;
        bool api = false;

        if (!token || len == 0)
                return TG_ENOTFOUND;
        if (digest_sha256(token, len, d) < 0)
                return TG_ENOTFOUND;
        /* Every digest is compared, whatever matched before. */
        for (unsigned i = 0; i < count; i++)
                if (digest_equal(d, users[i].token_sha256, UI_DIGEST_LEN))
                        found = (int)i;
        for (unsigned i = 0; api_digests && i < napi; i++)
                if (digest_equal(d, api_digests[i], UI_DIGEST_LEN))
                        api = true;
        explicit_bzero(d, sizeof(d));
        if (found >= 0) {
                snprintf(ret_user, UI_NAME_MAX + 1, "%s", users[found].name);
                *ret_role = users[found].role;
                return 0;
        }
        if (api) {
                snprintf(ret_user, UI_NAME_MAX + 1, "%s", UI_API_TOKEN_USER);
                *ret_role = UI_ROLE_OPERATOR;
                return 0;
        }
        return TG_ENOTFOUND;
}

static bool expired(const struct ui_sessions *t, const struct ui_session *s, tg_wall_ms now)
{
        return now - s->last_seen >= t->idle_ms || now - s->created >= t->max_ms ||
               now < s->created; /* a wall clock stepped back: start again */
}

tg_wall_ms ui_session_expires(const struct ui_sessions *t, const struct ui_session *s)
{
        tg_wall_ms idle = s->last_seen + t->idle_ms, max = s->created + t->max_ms;

        return idle < max ? idle : max;
}

int ui_session_create(struct ui_sessions *t, const char *user, enum ui_role role, tg_wall_ms now,
                      char ret_cookie[UI_SECRET_HEX], struct ui_session **ret_session)
{
        struct ui_session *slot = NULL;
        unsigned char csrf[UI_SECRET_LEN];

        for (unsigned i = 0; i < UI_SESSIONS_MAX && !slot; i++)
                if (!t->s[i].used || expired(t, &t->s[i], now))
                        slot = &t->s[i];
        if (!slot) { /* every slot is live: the one used least recently goes */
                slot = &t->s[0];
                for (unsigned i = 1; i < UI_SESSIONS_MAX; i++)
                        if (t->s[i].last_seen < slot->last_seen)
                                slot = &t->s[i];
        }
        ui_session_end(slot);
        if (digest_random(slot->id, sizeof(slot->id)) < 0 ||
            digest_random(csrf, sizeof(csrf)) < 0) {
                ui_session_end(slot);
                return TG_EIO;
        }
        encode_hex_text(csrf, sizeof(csrf), slot->csrf, sizeof(slot->csrf));
        explicit_bzero(csrf, sizeof(csrf));
        snprintf(slot->user, sizeof(slot->user), "%s", user);
        slot->role = role;
        slot->created = slot->last_seen = now;
        slot->used = true;
        encode_hex_text(slot->id, sizeof(slot->id), ret_cookie, UI_SECRET_HEX);
        *ret_session = slot;
        return 0;
}

int ui_cookie_value(const char *cookie_header, const char *name, char *buf, size_t size)
{
        size_t nlen = strlen(name);
        const char *p = cookie_header;

        if (!p)
                return TG_ENOTFOUND;
        while (*p) {
                const char *end;
                size_t vlen;

                while (*p == ' ' || *p == ';')
                        p++;
                end = strchr(p, ';');
                if (!end)
                        end = p + strlen(p);
                if ((size_t)(end - p) > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
                        vlen = (size_t)(end - p) - nlen - 1;
                        while (vlen > 0 && p[nlen + vlen] == ' ')
                                vlen--;
                        if (vlen >= size)
                                return TG_EFULL;
                        memcpy(buf, p + nlen + 1, vlen);
                        buf[vlen] = '\0';
                        return 0;
                }
                p = end;
        }
        return TG_ENOTFOUND;
}

int ui_session_find(struct ui_sessions *t, const char *cookie_header, tg_wall_ms now,
                    struct ui_session **ret_session)
{
        char hex[UI_SECRET_HEX];
        unsigned char id[UI_SECRET_LEN];
        struct ui_session *found = NULL;

        if (ui_cookie_value(cookie_header, UI_COOKIE_NAME, hex, sizeof(hex)) < 0 ||
            strlen(hex) != 2 * UI_SECRET_LEN || encode_hex_decode(hex, id, sizeof(id)) < 0)
                return TG_ENOTFOUND;
        for (unsigned i = 0; i < UI_SESSIONS_MAX; i++)
                if (t->s[i].used && digest_equal(t->s[i].id, id, sizeof(id)))
                        found = &t->s[i];
        explicit_bzero(id, sizeof(id));
        explicit_bzero(hex, sizeof(hex));
        if (!found)
                return TG_ENOTFOUND;
        if (expired(t, found, now)) {
                ui_session_end(found);
                return TG_ENOTFOUND;
        }
        found->last_seen = now;
        *ret_session = found;
        return 0;
}

bool ui_session_csrf_ok(const struct ui_session *s, const char *header)
{
        if (!s || !header || strlen(header) != 2 * UI_SECRET_LEN)
                return false;
        return digest_equal(s->csrf, header, 2 * UI_SECRET_LEN);
}
