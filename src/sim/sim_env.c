/*
 * sim_env — the dispatcher's environment in virtual time. See sim_env.h.
 *
 * Invariants: a call's events happen in this order — hand-off, on the wire
 * (or never), reported sent, end, popped — and each is processed once; the
 * clock never moves backwards here (only its owner moves it, and only
 * forward); a killed env has no call.
 */
#include "sim/sim_env.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"

#define MS TG_NS_PER_MS

struct sim_call {
        bool open;     /* handed over, not popped yet */
        bool arriving; /* its request reaches the provider at `wire` (not processed yet) */
        bool done;     /* ended (done_at reached and processed) */
        bool reported; /* its sent report was popped */
        tg_mono_ns handoff;
        tg_mono_ns wire;    /* on the wire; 0: never */
        tg_mono_ns done_at; /* its end; TG_MONO_NEVER while its answer is not known */
        tg_mono_ns timeout;
        struct transport_result result;
        /* a copy of what was handed over, for the provider's arrive */
        enum classify_request request;
        char operation_id[TG_OP_ID_MAX + 1];
        char request_id[TG_REQUEST_ID_MAX + 1];
        char traceparent[TG_TRACEPARENT_MAX + 1];
        char refund_id[TG_REFUND_ID_MAX];
        struct refund_request refund;
        unsigned attempt;
        int64_t timeout_ms;
        uint64_t cookie;
        struct sim_answer answer;
};

struct sim_env {
        struct exit_env env;
        struct sim_clock *clock;
        struct sim_env_provider provider;
        struct sim_call calls[SIM_ENV_MAX_OPEN];
        struct sim_start *starts;
        unsigned max_starts, n_starts;
        unsigned answered;
        bool dead;
        /* scheduled mode */
        void (*sched_sleep)(void *ctx, struct sim_env *env, tg_mono_ns ns);
        void *sched_ctx;
        tg_mono_ns wake;
        bool rang;
};

tg_wall_ms sim_clock_wall(const struct sim_clock *c)
{
        int64_t ns = c->mono + c->wall_step_ns;

        /* floor, so that a wall clock stepped before wall0 still counts
         * down one millisecond at a time */
        return c->wall0 + (ns >= 0 ? ns / MS : -((-ns + MS - 1) / MS));
}

int64_t sim_clock_wall_ns(const struct sim_clock *c)
{
        return c->wall0 * MS + c->mono + c->wall_step_ns;
}

/* ---- a call's end ------------------------------------------------------------- */

static const char *or_none(const char *s)
{
        return s ? s : "";
}

/* The answer is known (at the hand-off, or when the request arrived): when
 * the call ends and what the transport reports. */
static void resolve(struct sim_call *c)
{
        const struct sim_answer *a = &c->answer;
        tg_mono_ns end_by_timeout = c->handoff + c->timeout;

        if (a->transport == TG_TR_TIMEOUT_AFTER_SEND ||
            a->latency > end_by_timeout - c->wire) { /* the whole-call timeout */
                c->done_at = end_by_timeout;
                c->result.reply.transport = TG_TR_TIMEOUT_AFTER_SEND;
                c->result.failure = TRANSPORT_TIMEOUT;
                c->result.latency_us = c->timeout / 1000;
                snprintf(c->result.error, sizeof(c->result.error), "timeout");
                return;
        }
        c->done_at = c->wire + a->latency;
        c->result.reply.transport = a->transport;
        c->result.latency_us = (c->done_at - c->handoff) / 1000;
        if (a->transport == TG_TR_RESET) {
                c->result.failure = TRANSPORT_RESET;
                snprintf(c->result.error, sizeof(c->result.error), "connection reset");
                return;
        }
        c->result.reply.http_status = a->http_status;
        c->result.reply.body_is_json = true;
        snprintf(c->result.reply.status, sizeof(c->result.reply.status), "%s", or_none(a->status));
        snprintf(c->result.reply.error_code, sizeof(c->result.reply.error_code), "%s",
                 or_none(a->error_code));
        snprintf(c->result.reply.refund_id, sizeof(c->result.reply.refund_id), "%s",
                 or_none(a->refund_id));
        snprintf(c->result.retry_after, sizeof(c->result.retry_after), "%s",
                 or_none(a->retry_after));
        c->answer.status = c->answer.error_code = c->answer.retry_after = c->answer.refund_id =
            NULL; /* read: they were the provider's for the callback only */
}

static void call_view(const struct sim_call *c, struct transport_call *ret)
{
        *ret = (struct transport_call){.request = c->request,
                                       .operation_id = c->operation_id,
                                       .refund = &c->refund,
                                       .refund_id = c->refund_id,
                                       .request_id = c->request_id,
                                       .attempt = c->attempt,
                                       .timeout_ms = c->timeout_ms,
                                       .cookie = c->cookie,
                                       .traceparent = c->traceparent};
}

/* ---- the exit_env functions ----------------------------------------------------- */

static tg_mono_ns e_mono(void *ctx)
{
        return ((struct sim_env *)ctx)->clock->mono;
}

static tg_wall_ms e_wall(void *ctx)
{
        return sim_clock_wall(((struct sim_env *)ctx)->clock);
}

static int64_t e_wall_ns(void *ctx)
{
        return sim_clock_wall_ns(((struct sim_env *)ctx)->clock);
}

static void e_sleep(void *ctx, tg_mono_ns ns)
{
        struct sim_env *e = ctx;

        if (e->dead || ns <= 0)
                return;
        if (e->sched_sleep) {
                e->sched_sleep(e->sched_ctx, e, ns);
                return;
        }
        e->clock->mono += ns;
        while (sim_env_process(e, e->clock->mono))
                ;
}

unsigned sim_env_open(const struct sim_env *e)
{
        unsigned n = 0;

        for (unsigned i = 0; i < SIM_ENV_MAX_OPEN; i++)
                n += e->calls[i].open;
        return n;
}

static unsigned e_open(void *ctx)
{
        return sim_env_open(ctx);
}

static int e_start(void *ctx, const struct transport_call *call, struct exit_handoff *ret)
{
        struct sim_env *e = ctx;
        struct sim_call *c = NULL;
        tg_mono_ns now = e->clock->mono;

        ret->mono = now;
        ret->wall = sim_clock_wall(e->clock);
        if (e->dead)
                return TG_ETRANSPORT;
        for (unsigned i = 0; i < SIM_ENV_MAX_OPEN && !c; i++)
                if (!e->calls[i].open)
                        c = &e->calls[i];
        if (!c)
                return TG_EFULL;
        memset(c, 0, sizeof(*c));
        c->open = true;
        c->handoff = now;
        c->timeout = call->timeout_ms * MS;
        c->done_at = TG_MONO_NEVER;
        c->request = call->request;
        c->attempt = call->attempt;
        c->timeout_ms = call->timeout_ms;
        c->cookie = call->cookie;
        snprintf(c->operation_id, sizeof(c->operation_id), "%s", call->operation_id);
        snprintf(c->request_id, sizeof(c->request_id), "%s", call->request_id);
        snprintf(c->traceparent, sizeof(c->traceparent), "%s",
                 call->traceparent ? call->traceparent : "");
        snprintf(c->refund_id, sizeof(c->refund_id), "%s", call->refund_id ? call->refund_id : "");
        if (call->refund)
                c->refund = *call->refund;
        c->answer = (struct sim_answer){.connect = 300 * TG_NS_PER_US,
                                        .latency = 50 * MS,
                                        .transport = TG_TR_COMPLETE,
                                        .http_status = 201};
        e->provider.handoff(e->provider.ctx, e, call, &c->answer);
        e->answered++;
        if (e->dead) /* the process died at the hand-off: nothing left */
                return TG_ETRANSPORT;
        c->result.cookie = call->cookie;
        c->result.handoff_mono = now;
        /* like the real transport: connect now, hold the request until its
         * not_before in the pre-request hook; the whole-call timeout counts
         * from the hand-off and ends a hold that outlasts it */
        tg_mono_ns ready = now + c->answer.connect;
        tg_mono_ns wire = ready > call->not_before ? ready : call->not_before;
        if (call->not_after > 0 && ready > call->not_after && !c->answer.refused &&
            ready < now + c->timeout) {
                /* ready after its window (shares): the hook refuses it */
                c->done_at = ready;
                c->result.reply.transport = TG_TR_NOT_SENT;
                c->result.failure = TRANSPORT_LATE;
                c->result.ready_mono = ready;
                c->result.latency_us = (c->done_at - now) / 1000;
                snprintf(c->result.error, sizeof(c->result.error), "%s",
                         "connected after its window: not sent");
        } else if (c->answer.refused || wire >= now + c->timeout) {
                c->done_at = c->answer.refused ? ready : now + c->timeout;
                c->result.reply.transport = TG_TR_NOT_SENT;
                c->result.failure =
                    c->answer.refused ? TRANSPORT_REFUSED : TRANSPORT_CONNECT_TIMEOUT;
                c->result.latency_us = (c->done_at - now) / 1000;
                snprintf(c->result.error, sizeof(c->result.error), "%s",
                         c->answer.refused ? "connection refused" : "timeout before send");
        } else {
                c->wire = wire;
                c->result.sent = true;
                c->result.ready_mono = ready;
                c->result.sent_mono = wire;
                c->result.sent_end_mono = wire + c->answer.send_delay;
                if (e->provider.arrive)
                        c->arriving = true; /* answered when it gets there */
                else
                        resolve(c);
        }
        if (e->starts && e->n_starts < e->max_starts) {
                struct sim_start *s = &e->starts[e->n_starts];
                s->handoff = now;
                s->sent = c->wire > 0;
                s->sent_end = c->wire > 0 ? c->result.sent_end_mono : 0;
                /* a call never sent starts at its slot, as the call log says */
                s->at = c->wire > 0 ? c->wire : call->not_before > now ? call->not_before : now;
                s->request = call->request;
                snprintf(s->operation_id, sizeof(s->operation_id), "%s", call->operation_id);
                s->attempt = call->attempt;
                s->timeout_ms = call->timeout_ms;
                s->wall = ret->wall;
                snprintf(s->traceparent, sizeof(s->traceparent), "%s", c->traceparent);
                snprintf(s->request_id, sizeof(s->request_id), "%s", call->request_id);
                s->open_after = sim_env_open(e);
        }
        e->n_starts++;
        return 0;
}

tg_mono_ns sim_env_next_event(const struct sim_env *e)
{
        tg_mono_ns first = TG_MONO_NEVER;

        for (unsigned i = 0; i < SIM_ENV_MAX_OPEN; i++) {
                const struct sim_call *c = &e->calls[i];
                if (!c->open)
                        continue;
                if (c->arriving && c->wire < first)
                        first = c->wire;
                if (!c->done && c->done_at < first)
                        first = c->done_at;
        }
        return first;
}

bool sim_env_process(struct sim_env *e, tg_mono_ns upto)
{
        struct sim_call *best = NULL;
        tg_mono_ns at = TG_MONO_NEVER;
        bool arrival = false;

        /* the earliest event; at equal times an arrival comes first (its
         * answer may end the call at the same moment) */
        for (unsigned i = 0; i < SIM_ENV_MAX_OPEN; i++) {
                struct sim_call *c = &e->calls[i];
                if (!c->open)
                        continue;
                if (c->arriving && (c->wire < at || (c->wire == at && !arrival))) {
                        best = c;
                        at = c->wire;
                        arrival = true;
                }
                if (!c->done && c->done_at < at) {
                        best = c;
                        at = c->done_at;
                        arrival = false;
                }
        }
        if (!best || at > upto)
                return false;
        if (arrival) {
                struct transport_call view;
                call_view(best, &view);
                view.not_before = best->wire;
                best->arriving = false;
                e->provider.arrive(e->provider.ctx, e, &view, best->handoff, best->wire,
                                   &best->answer);
                resolve(best);
        } else {
                best->done = true;
        }
        return true;
}

/* Virtual time moves to `until`, or to the first event before it: a request
 * going on the wire, or an end (standalone); the world's scheduler moves it
 * otherwise. */
static int e_poll(void *ctx, tg_mono_ns until)
{
        struct sim_env *e = ctx;
        int rang = e->rang;

        e->rang = false;
        if (e->sched_sleep || e->dead) {
                e->wake = until;
                return rang;
        }
        tg_mono_ns first = sim_env_next_event(e);
        if (first <= until)
                until = first;
        if (until > e->clock->mono)
                e->clock->mono = until;
        while (sim_env_process(e, e->clock->mono))
                ;
        return rang;
}

static int e_next_sent(void *ctx, struct transport_sent *ret)
{
        struct sim_env *e = ctx;
        tg_mono_ns now = e->clock->mono;

        /* in the order they happened */
        struct sim_call *best = NULL;
        tg_mono_ns best_at = TG_MONO_NEVER;
        for (unsigned i = 0; i < SIM_ENV_MAX_OPEN; i++) {
                struct sim_call *c = &e->calls[i];
                tg_mono_ns at;
                if (!c->open || c->reported)
                        continue;
                if (c->wire > 0 && c->wire <= now && !c->arriving)
                        at = c->wire;
                else if (c->wire == 0 && c->done)
                        at = c->done_at;
                else
                        continue;
                if (at < best_at) {
                        best = c;
                        best_at = at;
                }
        }
        if (!best)
                return TG_ENOTFOUND;
        best->reported = true;
        *ret = (struct transport_sent){.cookie = best->result.cookie,
                                       .sent = best->wire > 0,
                                       .late = best->result.failure == TRANSPORT_LATE,
                                       .ready_mono = best->result.ready_mono,
                                       .sent_mono = best->wire,
                                       .sent_end_mono = best->result.sent_end_mono};
        return 0;
}

static int e_next_done(void *ctx, struct transport_result *ret)
{
        struct sim_env *e = ctx;
        struct sim_call *best = NULL;

        for (unsigned i = 0; i < SIM_ENV_MAX_OPEN; i++) {
                struct sim_call *c = &e->calls[i];
                if (c->open && c->done && (!best || c->done_at < best->done_at))
                        best = c;
        }
        if (!best)
                return TG_ENOTFOUND;
        *ret = best->result;
        best->open = false;
        if (e->provider.delivered) {
                struct transport_call view;
                call_view(best, &view);
                e->provider.delivered(e->provider.ctx, e, &view, ret);
        }
        return 0;
}

/* ---- lifecycle ---------------------------------------------------------------- */

int sim_env_new(struct sim_clock *clock, const struct sim_env_provider *provider,
                struct store *store, uint64_t seed, bool has_doorbell, struct sim_env **ret_env)
{
        struct sim_env *e = calloc(1, sizeof(*e));

        if (!e)
                return TG_ENOMEM;
        e->clock = clock;
        e->provider = *provider;
        e->wake = INT64_MIN; /* due at once: it has not polled yet */
        e->env = (struct exit_env){.ctx = e,
                                   .mono_now = e_mono,
                                   .wall_now = e_wall,
                                   .wall_ns = e_wall_ns,
                                   .sleep = e_sleep,
                                   .start = e_start,
                                   .poll = e_poll,
                                   .next_done = e_next_done,
                                   .next_sent = e_next_sent,
                                   .open_calls = e_open,
                                   .store = store,
                                   .seed = seed,
                                   .has_doorbell = has_doorbell};
        *ret_env = e;
        return 0;
}

void sim_env_free(struct sim_env *e)
{
        free(e);
}

const struct exit_env *sim_env_exit(const struct sim_env *e)
{
        return &e->env;
}

struct sim_clock *sim_env_clock(const struct sim_env *e)
{
        return e->clock;
}

void sim_env_record(struct sim_env *e, struct sim_start *starts, unsigned max)
{
        e->starts = starts;
        e->max_starts = max;
}

unsigned sim_env_starts(const struct sim_env *e)
{
        return e->n_starts;
}

unsigned sim_env_answered(const struct sim_env *e)
{
        return e->answered;
}

void sim_env_set_sched(struct sim_env *e,
                       void (*sleep)(void *ctx, struct sim_env *env, tg_mono_ns ns), void *ctx)
{
        e->sched_sleep = sleep;
        e->sched_ctx = ctx;
}

tg_mono_ns sim_env_wake(const struct sim_env *e)
{
        tg_mono_ns wake = e->rang ? e->clock->mono : e->wake;

        if (e->dead)
                return TG_MONO_NEVER;
        /* a call's event wakes the poll early: a request on the wire (its
         * sent report), an end */
        for (unsigned i = 0; i < SIM_ENV_MAX_OPEN; i++) {
                const struct sim_call *c = &e->calls[i];
                if (!c->open)
                        continue;
                if (!c->reported && c->wire > 0 && !c->arriving && c->wire < wake)
                        wake = c->wire;
                if (c->done && c->done_at < wake)
                        wake = c->done_at;
        }
        return wake;
}

void sim_env_ring(struct sim_env *e)
{
        if (e->env.has_doorbell)
                e->rang = true;
}

void sim_env_kill(struct sim_env *e)
{
        memset(e->calls, 0, sizeof(e->calls));
        e->dead = true;
        e->rang = false;
}

bool sim_env_dead(const struct sim_env *e)
{
        return e->dead;
}

int64_t sim_request_epoch(const char *request_id)
{
        int64_t epoch = 0;

        if (strncmp(request_id, "tg-", 3) != 0)
                return 0;
        for (const char *p = request_id + 3; *p >= '0' && *p <= '9'; p++) {
                if (epoch > (INT64_MAX - 9) / 10)
                        return 0;
                epoch = epoch * 10 + (*p - '0');
        }
        return epoch;
}
