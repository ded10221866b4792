/*
 * exit_token — an exit's OAuth 2.0 access token (provider.auth = oauth2):
 * when to fetch one, its call through the exit, and what a 401 does.
 *
 * The token call goes to the provider's host (provider.token_path on
 * base_url), so it is one of the account's calls like any other
 * (invariant 1): it takes a start slot of the exit's pacer, is counted in
 * flight, waits for a slot like a refund's call and is reported sent or
 * not; it is no operation's attempt and spends no operation's budget. The
 * token itself never reaches the exit: the transport keeps it in secret
 * memory (net/transport.h); the exit knows only when it was fetched and for
 * how long it lives.
 *
 * Invariants:
 *   - no operation's call is started unless a token is usable: it was got
 *     at `at` (its call's slot, no later than the provider issued it) with
 *     a life L, and a call started before at + L - timeout ends, at the
 *     latest, as the token lapses;
 *   - a new token is fetched from at + L - min(margin, L/2) on, while calls
 *     go on with the one in hand;
 *   - one token call at a time; a failed one holds the next for a back-off
 *     that doubles (provider.unreachable_hold_ms up to ..._max_ms), so a
 *     provider refusing our credentials sees one token call per hold,
 *     never a busy loop;
 *   - a 401 to a call that carried the current token invalidates it (the
 *     next call waits for a new one): once. A 401 again with the token that
 *     fetch brought holds the next fetch for the back-off.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/exit_int.h"
#include "daemon/log.h"

void exit_token_init(struct exit *e)
{
        memset(&e->tok, 0, sizeof(e->tok));
        e->tok.on = strcmp(e->cfg->provider_auth, "oauth2") == 0;
        e->tok.backoff_ms = e->cfg->provider_unreachable_hold_ms;
}

unsigned exit_token_open(const struct exit *e)
{
        return e->tok.open ? 1u : 0u;
}

static bool usable(const struct exit *e, tg_mono_ns now)
{
        return e->tok.gen > 0 && now < e->tok.usable_until;
}

/* Starts the token call at the pacer's next slot, if it may go now. */
static void fetch(struct exit *e, tg_mono_ns now, tg_wall_ms wall)
{
        struct exit_token *t = &e->tok;
        bool probe = false;

        if (t->open || now < t->hold_until)
                return;
        tg_mono_ns at = pacer_start_at(e->pacer, now);
        if (at == TG_MONO_NEVER || now < exit_handoff_time(e, at) ||
            exit_account_held(e, now, wall) || !pacer_may_start(e->pacer, at))
                return;
        t->cookie = (++e->next_cookie << EXIT_INDEX_BITS) | e->index;
        snprintf(t->request_id, sizeof(t->request_id), "tg-token-%llu-%u",
                 (unsigned long long)e->own.epoch, ++t->calls);
        struct transport_call tc = {
            .request = CLASSIFY_POST,
            .operation_id = "",
            .request_id = t->request_id,
            .timeout_ms = e->cfg->provider_timeout_ms,
            .cookie = t->cookie,
            .not_before = at,
            .not_after = pacer_window_end(e->pacer, at),
            .lane = e->index,
            .token = true,
        };
        struct exit_handoff handoff;
        int r = e->env->start(e->env->ctx, &tc, &handoff);
        json_t *f = json_pack("{s:s, s:i}", "request_id", t->request_id, "token_calls", t->calls);
        if (r < 0) {
                /* nothing left: the next try after the back-off */
                t->hold_until = now + t->backoff_ms * TG_NS_PER_MS;
                json_object_set_new(f, "error", json_string(tg_strerror(r)));
                log_emit(LOG_ERROR, "provider_token_not_started", f);
                return;
        }
        if (pacer_start_pending(e->pacer, at, &probe) < 0) {
                log_emit(LOG_ERROR, "pacer_refused_token_call", f);
                abort(); /* may_start held at `at`: a programmer error */
        }
        t->open = true;
        t->sent_known = false;
        t->probe = probe;
        t->planned = at;
        log_emit(LOG_INFO, "provider_token_call", f);
}

bool exit_token_blocks(struct exit *e, tg_mono_ns now, tg_wall_ms wall)
{
        struct exit_token *t = &e->tok;

        if (!t->on)
                return false;
        if (!usable(e, now) || now >= t->refresh_at)
                fetch(e, now, wall);
        /* a token call that just took this slot, or none in hand */
        return (t->open && t->planned >= now) || !usable(e, now);
}

tg_mono_ns exit_token_wait(const struct exit *e, tg_mono_ns now)
{
        const struct exit_token *t = &e->tok;

        if (!t->on || usable(e, now))
                return 0;
        /* no token: its call's answer wakes the loop, or the hold ends */
        return t->open ? TG_MONO_NEVER : t->hold_until > now ? t->hold_until : 0;
}

unsigned exit_token_gen(const struct exit *e)
{
        return e->tok.gen;
}

/* The token call went on the wire at `at` (surely by `end`), or never. */
static void sent_known(struct exit *e, bool sent, tg_mono_ns at, tg_mono_ns end)
{
        struct exit_token *t = &e->tok;
        tg_mono_ns covered = end - e->cfg->exit.spacing_margin_ns;

        if (t->sent_known)
                return;
        t->sent_known = true;
        if (sent)
                pacer_sent(e->pacer, end > 0 && covered > at ? covered : at);
        else
                pacer_unsent(e->pacer);
}

bool exit_token_sent(struct exit *e, const struct transport_sent *s)
{
        if (!e->tok.open || s->cookie != e->tok.cookie)
                return false;
        sent_known(e, s->sent, s->sent_mono, s->sent_end_mono);
        return true;
}

bool exit_token_done(struct exit *e, const struct transport_result *res, tg_mono_ns now)
{
        struct exit_token *t = &e->tok;
        int64_t life, margin;
        json_t *f;

        if (!t->open || res->cookie != t->cookie)
                return false;
        sent_known(e, res->sent && res->sent_mono > 0, res->sent_mono, res->sent_end_mono);
        pacer_finish(e->pacer);
        t->open = false;
        bool healthy = res->reply.transport == TG_TR_COMPLETE && res->reply.http_status != 429 &&
                       res->reply.http_status < 500;
        if (t->probe)
                pacer_probe_done(e->pacer, healthy);
        f = json_pack("{s:s, s:i, s:I}", "request_id", t->request_id, "http_status",
                      res->reply.http_status, "latency_us", (json_int_t)res->latency_us);
        if (res->token_ok) {
                /* from its slot: the provider issued it no earlier */
                life = res->token_expires_s * TG_NS_PER_S;
                margin = e->cfg->provider_token_refresh_margin_ms * TG_NS_PER_MS;
                if (margin > life / 2)
                        margin = life / 2;
                t->gen++;
                t->refresh_at = t->planned + life - margin;
                t->usable_until = t->planned + life - e->cfg->provider_timeout_ms * TG_NS_PER_MS;
                t->backoff_ms = e->cfg->provider_unreachable_hold_ms;
                t->hold_until = 0;
                json_object_set_new(f, "expires_in_s", json_integer(res->token_expires_s));
                json_object_set_new(f, "token", json_integer(t->gen));
                log_emit(LOG_INFO, "provider_token", f);
                return true;
        }
        /* no token: the next call after a back-off, doubled each time */
        t->hold_until = now + t->backoff_ms * TG_NS_PER_MS;
        json_object_set_new(f, "hold_ms", json_integer(t->backoff_ms));
        json_object_set_new(f, "cause", json_string(transport_failure_name(res->failure)));
        json_object_set_new(f, "error", json_string(res->error));
        log_emit(LOG_WARN, "provider_token_failed", f);
        t->backoff_ms *= 2;
        if (t->backoff_ms > e->cfg->provider_unreachable_hold_max_ms)
                t->backoff_ms = e->cfg->provider_unreachable_hold_max_ms;
        return true;
}

void exit_token_answered(struct exit *e, unsigned gen, const struct transport_result *res,
                         tg_mono_ns now)
{
        struct exit_token *t = &e->tok;

        if (!t->on || res->reply.transport != TG_TR_COMPLETE)
                return;
        if (res->reply.http_status != 401) {
                if (gen == t->gen)
                        t->refetched_for_401 = false; /* the token works */
                return;
        }
        if (gen != t->gen || t->gen == 0 || t->usable_until == 0)
                return; /* an older token's, or this one is already given up */
        json_t *f = json_pack("{s:i, s:b}", "token", t->gen, "again", t->refetched_for_401);
        /* the provider no longer takes it: a new one before the next call,
         * at once the first time, after the back-off when the token that
         * 401 brought was refused too */
        t->usable_until = 0;
        t->refresh_at = 0;
        if (t->refetched_for_401) {
                t->hold_until = now + t->backoff_ms * TG_NS_PER_MS;
                json_object_set_new(f, "hold_ms", json_integer(t->backoff_ms));
                t->backoff_ms *= 2;
                if (t->backoff_ms > e->cfg->provider_unreachable_hold_max_ms)
                        t->backoff_ms = e->cfg->provider_unreachable_hold_max_ms;
        }
        t->refetched_for_401 = true;
        log_emit(LOG_WARN, "provider_token_refused", f);
}
