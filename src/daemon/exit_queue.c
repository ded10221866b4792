/*
 * exit_queue — the claims an exit makes ahead of its slots (exit.h): a
 * batch of operations claimed in one transaction (group commit) on the
 * store thread, onto the ready queue, oldest first, so that a slot costs a
 * wake-up and a send, not a commit. A claim that can no longer go in time
 * (its deadline, its key's retention, a hold, a stop, a lost owner) goes
 * back to the store (store_release) as the claim found it; one the store
 * could not take back waits with the outcomes (exit_settle.c).
 *
 * Sub-quotas (exit.refund_*, exit.query_*): a ready claim whose kind's
 * sub-quota does not allow it yet stays on the queue and the next one that
 * may go takes the account's slot, so a kind held by its own sub-quota never
 * blocks another kind's work behind it. A kind whose sub-quota already has
 * as many claims ready as it can start soon (or its in-flight cap taken up)
 * is barred from the next claims (claim_args no_posts / no_queries): the
 * queue never fills with work that must wait. With nothing to claim, the exit idles until the store's
 * next due retry, the doorbell, or a look-again that backs off.
 *
 * Invariants: nready <= READY_MAX; at most one batch is with the store
 * thread (claim_posted); each ready claim is in flight in the store under
 * this exit's epoch, its attempt counted (record before send).
 */
#include <stdio.h>
#include <string.h>

#include "core/names.h"
#include "core/tg_error.h"
#include "daemon/exit_call.h"
#include "daemon/exit_int.h"
#include "daemon/log.h"

/* ---- sub-quotas ---------------------------------------------------------------- */

enum exit_level exit_level_of(enum tg_call_kind kind)
{
        return kind == TG_KIND_QUERY ? EXIT_LEVEL_QUERY : EXIT_LEVEL_REFUND;
}

struct pacer *exit_sub(const struct exit *e, enum tg_call_kind kind)
{
        return e->sub[exit_level_of(kind)];
}

int exit_sub_build(struct exit *e)
{
        const struct tg_config *cfg = e->cfg;
        unsigned shares = cfg->exit_shares > 0 ? cfg->exit_shares : 1;
        const double rate[EXIT_LEVELS] = {
            [EXIT_LEVEL_REFUND] = cfg->exit_refund_starts_per_second,
            [EXIT_LEVEL_QUERY] = cfg->exit_query_starts_per_second,
        };
        const unsigned cap[EXIT_LEVELS] = {
            [EXIT_LEVEL_REFUND] = cfg->exit_refund_max_in_flight,
            [EXIT_LEVEL_QUERY] = cfg->exit_query_max_in_flight,
        };
        int r = 0;

        /* a share's part of each, as of the account's; a cap alone (no
         * rate) paces at the share's rate, which the account's holds anyway */
        for (unsigned l = 0; r == 0 && l < EXIT_LEVELS; l++) {
                if (rate[l] <= 0 && cap[l] == 0)
                        continue;
                struct pacer_config q = {
                    .starts_per_second =
                        rate[l] > 0 ? rate[l] / shares : e->share_cfg.starts_per_second,
                    .max_in_flight = cap[l] > 0 ? cap[l] / shares : e->share_cfg.max_in_flight,
                    .spacing_margin_ns = e->share_cfg.spacing_margin_ns,
                };
                if (q.max_in_flight < 1)
                        q.max_in_flight = 1;
                e->sub_cap[l] = q.max_in_flight;
                r = pacer_new(&q, &e->sub[l]);
        }
        return r;
}

/* A kind of call of the level. */
static enum tg_call_kind level_kind(unsigned level)
{
        return level == EXIT_LEVEL_QUERY ? TG_KIND_QUERY : TG_KIND_FIRST;
}

/* When a claim of this kind may start by its sub-quota, at `at` or later:
 * `at` (none, or it allows), its next slot, or TG_MONO_NEVER (in flight at
 * its cap, or its last start's wire time not known yet). */
static tg_mono_ns sub_next(const struct exit *e, enum tg_call_kind kind, tg_mono_ns at)
{
        const struct pacer *p = exit_sub(e, kind);

        if (!p || pacer_may_start(p, at))
                return at;
        tg_mono_ns slot = pacer_next_slot(p);
        if (slot == TG_MONO_NEVER || !pacer_may_start(p, slot))
                return TG_MONO_NEVER;
        return slot > at ? slot : at;
}

tg_mono_ns exit_ready_next(const struct exit *e, tg_mono_ns at)
{
        tg_mono_ns best = e->nready ? TG_MONO_NEVER : INT64_MAX;

        for (unsigned i = 0; i < e->nready && best != at; i++) {
                tg_mono_ns t = sub_next(e, e->ready[i].call.kind, at);
                if (t < best)
                        best = t;
        }
        return best;
}

void exit_sub_moved(struct exit *e)
{
        if (e->claim_barred)
                e->idle_until = INT64_MIN;
}

/* Claims of this kind ready now. */
static unsigned ready_of(const struct exit *e, enum exit_level level)
{
        unsigned n = 0;

        for (unsigned i = 0; i < e->nready; i++)
                n += exit_level_of(e->ready[i].call.kind) == level;
        return n;
}

/* How far ahead of its slot a claim is made: its commit and the store
 * thread's other work, and the account's next slot. */
static tg_mono_ns claim_horizon(const struct exit *e)
{
        return pacer_interval(e->pacer) + 2 * e->claim_est + CLAIM_AHEAD_SLACK;
}

/* Whether a claim's `i`-th (counting from 0) may be of this level: its
 * sub-quota's next slot comes within the claim's horizon, it has room in
 * flight for one more besides those open and ready, and fewer are ready
 * than it starts in a batch's span (one at low rates). Counted
 * conservatively: the claims before it may all be of the level. */
static bool level_open(const struct exit *e, enum exit_level level, unsigned ready, unsigned i,
                       tg_mono_ns now)
{
        const struct pacer *p = e->sub[level];

        if (!p)
                return true;
        tg_mono_ns next = sub_next(e, level_kind(level), now);
        if (next == TG_MONO_NEVER || next - now > claim_horizon(e))
                return false;
        tg_mono_ns interval = pacer_interval(p);
        tg_mono_ns span = (CLAIM_BATCH_SPAN + interval - 1) / interval;
        unsigned ahead = span < 1 ? 1 : span > READY_MAX ? READY_MAX : (unsigned)span;
        bool room = pacer_in_flight(p) + ready + i < e->sub_cap[level];

        return room && ready + i < ahead;
}

/* Ready claims whose sub-quota lets them start at `at`. */
static unsigned ready_usable(const struct exit *e, tg_mono_ns at)
{
        unsigned n = 0;

        for (unsigned i = 0; i < e->nready; i++)
                n += sub_next(e, e->ready[i].call.kind, at) == at;
        return n;
}

/* ---- the ready queue ------------------------------------------------------------ */

/* How many claims to keep ready: enough to cover a claim's own commit at
 * the rate (one at 5/s, a few at 1,000/s); with a store thread, also its
 * other work (CLAIM_AHEAD_SLACK). */
static unsigned ready_want(const struct exit *e)
{
        tg_mono_ns interval = pacer_interval(e->pacer);
        tg_mono_ns cover = 2 * e->claim_est;

        if (store_worker_threaded(e->worker))
                cover += CLAIM_AHEAD_SLACK;
        tg_mono_ns want = (cover + interval - 1) / interval;

        return want < 1 ? 1 : want > READY_MAX ? READY_MAX : (unsigned)want;
}

/* How many claims a refill brings the queue to: what it must cover, or
 * CLAIM_BATCH_SPAN of starts at the rate if that is more. */
static unsigned ready_fill(const struct exit *e)
{
        tg_mono_ns interval = pacer_interval(e->pacer);
        tg_mono_ns span = (CLAIM_BATCH_SPAN + interval - 1) / interval;
        unsigned want = ready_want(e);

        if (span > READY_MAX)
                span = READY_MAX;
        return (unsigned)span > want ? (unsigned)span : want;
}

static int claim_run(struct store *store, void *arg)
{
        struct claim_job *c = arg;

        c->got = 0;
        return store_claim_batch(store, c->args, c->n, &c->turn, c->ops, c->calls, &c->got);
}

/* A batch of claims committed (or not): onto the ready queue, oldest
 * first. Claims that came while the exit stopped, was lost or was put on
 * hold go back at once: they can no longer be sent in time. */
static void claim_done(void *arg, int r, tg_mono_ns took)
{
        struct claim_job *c = arg;
        struct exit *e = c->e;
        /* inline, the moment of the turn that claimed, as a plain call */
        bool threaded = store_worker_threaded(e->worker);
        tg_mono_ns now = threaded ? e->env->mono_now(e->env->ctx) : c->now;
        tg_wall_ms wall = threaded ? e->env->wall_now(e->env->ctx) : c->wall;

        e->claim_posted = false;
        e->claim_est = (3 * e->claim_est + took) / 4;
        e->claim_result = r;
        if (r < 0) {
                exit_claim_missed(e, r, now, wall);
                return;
        }
        e->turn = c->turn;
        for (unsigned i = 0; i < c->got && e->nready < READY_MAX; i++) {
                struct open_call *rc = &e->ready[e->nready++];

                memset(rc, 0, sizeof(*rc));
                rc->op = c->ops[i];
                rc->call = c->calls[i];
        }
        e->slot_claim_landed = c->at_slot;
        if (exit_stopping(e) || e->lost)
                exit_release_ready(e, exit_stopping(e) ? "stop" : "owner lost", now, wall);
        else if (pacer_held(e->pacer, now) &&
                 pacer_hold_until(e->pacer) - now > pacer_interval(e->pacer))
                exit_release_ready(e, "hold", now, wall);
}

/* Claims up to `n` operations in one transaction, the groups taking turns
 * (an empty group yields its turn), onto the ready queue: posted to the
 * store thread (claim_done takes the result; without a thread, before this
 * returns). A failure, TG_ENOTFOUND (no work) too, goes to claim_missed. */
void exit_claim_ahead(struct exit *e, unsigned n, bool at_slot, tg_mono_ns now, tg_wall_ms wall)
{
        struct claim_job *c = e->claim;

        unsigned ready_posts = ready_of(e, EXIT_LEVEL_REFUND);
        unsigned ready_queries = ready_of(e, EXIT_LEVEL_QUERY);

        if (n > READY_MAX - e->nready)
                n = READY_MAX - e->nready;
        if (n == 0 || e->claim_posted)
                return;
        e->claim_barred = false;
        memset(c->args, 0, sizeof(c->args[0]) * n);
        for (unsigned i = 0; i < n; i++) {
                struct claim_args *a = &c->args[i];
                a->group = e->turn;
                a->epoch = e->own.epoch;
                a->now = wall;
                a->start_mono = now;
                a->in_flight_at_start = pacer_in_flight(e->pacer) + 1 + e->nready + i;
                a->key_retention_ms = e->cfg->policy.key_retention_ms;
                /* A kind whose sub-quota has enough ready (or no room in
                 * flight) is not claimed: the store yields the other kind. */
                a->no_queries = !level_open(e, EXIT_LEVEL_QUERY, ready_queries, i, now);
                a->no_posts = !level_open(e, EXIT_LEVEL_REFUND, ready_posts, i, now);
                if (a->no_queries && a->no_posts) {
                        n = i; /* neither kind may come: the batch ends here */
                        break;
                }
                e->claim_barred |= a->no_queries || a->no_posts;
                exit_call_request_id(a->request_id, sizeof(a->request_id), e->own.epoch, ++e->seq,
                                     (uint32_t)tg_rng_next(&e->rng));
                exit_call_trace_ids(&e->rng, a->span_id, a->traceparent_new);
        }
        if (n == 0) {
                /* nothing may be claimed now: the claims of both kinds wait
                 * for their sub-quotas (exit_wake_at wakes for them) */
                e->claim_barred = true;
                e->claim_result = TG_ENOTFOUND;
                exit_claim_missed(e, TG_ENOTFOUND, now, wall);
                return;
        }
        c->e = e;
        c->n = n;
        c->turn = e->turn;
        c->at_slot = at_slot;
        c->now = now;
        c->wall = wall;
        e->claim_posted = true;
        store_worker_post(e->worker, claim_run, NULL, claim_done, c);
}

/* Gives a ready claim back to the store: the operation is as the claim
 * found it (store_release). A claim the store no longer counts as ours (a
 * newer owner) stays for that owner's recovery. */
void exit_release_claim(struct exit *e, const struct open_call *rc, const char *why, tg_mono_ns now,
                        tg_wall_ms wall)
{
        store_worker_lock(e->worker);
        int r = store_release(e->store, e->own.epoch, rc->op.id, rc->call.id, now, wall, why);
        store_worker_unlock(e->worker);
        json_t *f = exit_op_fields(&rc->op, &rc->call);

        json_object_set_new(f, "why", json_string(why));
        if (r < 0)
                json_object_set_new(f, "store_error", json_string(tg_strerror(r)));
        /* A release the store could not take leaves the operation in
         * flight, where no sweep looks: ask again until it does (fenced: a
         * newer owner recovers it). */
        if (r < 0 && r != TG_EFENCED && e->n_unreleased < READY_MAX) {
                struct unreleased *u = &e->unreleased[e->n_unreleased++];
                u->op_id = rc->op.id;
                u->call_id = rc->call.id;
                snprintf(u->why, sizeof(u->why), "%s", why);
                if (e->n_unsettled == 0 && e->n_unreleased == 1)
                        e->next_settle_retry = now + SETTLE_RETRY_NS;
        }
        log_emit(r < 0 ? LOG_WARN : LOG_INFO, "claim_released", f);
}

/* Every ready claim goes back (a hold started, the exit stops or was lost). */
void exit_release_ready(struct exit *e, const char *why, tg_mono_ns now, tg_wall_ms wall)
{
        for (unsigned i = 0; i < e->nready; i++)
                exit_release_claim(e, &e->ready[i], why, now, wall);
        e->nready = 0;
}

/* The oldest ready claim that may still be sent at `at` (wall time `wall`),
 * into *oc; the ones that may not are released. 0, or TG_ENOTFOUND. */
int exit_ready_pop(struct exit *e, struct open_call *oc, tg_mono_ns at, tg_mono_ns now,
                   tg_wall_ms wall)
{
        unsigned i = 0;

        while (i < e->nready) {
                struct open_call rc = e->ready[i];
                const char *why = NULL;

                /* held by its kind's sub-quota: it stays, the next may go */
                if (sub_next(e, rc.call.kind, at) != at) {
                        i++;
                        continue;
                }
                memmove(&e->ready[i], &e->ready[i + 1], sizeof(e->ready[0]) * (e->nready - i - 1));
                e->nready--;
                if (rc.op.deadline_at <= wall)
                        why = manual_reason_name(rc.op.pending_since > 0 ? MANUAL_PENDING_DEADLINE
                                                                         : MANUAL_DEADLINE);
                else if (rc.call.kind != TG_KIND_QUERY && rc.op.attempts > 1 &&
                         e->cfg->policy.key_retention_ms > 0 &&
                         rc.op.key_first_used + e->cfg->policy.key_retention_ms <= wall)
                        why = manual_reason_name(MANUAL_KEY_RETENTION);
                if (why) {
                        exit_release_claim(e, &rc, why, now, wall);
                        continue;
                }
                *oc = rc;
                return 0;
        }
        return e->nready ? TG_EAGAIN : TG_ENOTFOUND;
}

/* Nothing to claim: when to look again. A doorbell (serve: the API rings it
 * for every new refund) lets an idle exit sleep until a retry the store
 * says is due, or the longest idle wait; without one the look-again
 * interval backs off from IDLE_RECHECK_NS to the longest. */
static void idle(struct exit *e, tg_mono_ns now, tg_wall_ms wall)
{
        tg_mono_ns wait = e->env->has_doorbell ? e->idle_max : e->idle_step;
        tg_wall_ms next = TG_WALL_NEVER;
        bool pending = false;

        if (!e->env->has_doorbell)
                e->idle_step = e->idle_step >= e->idle_max / 2 ? e->idle_max : 2 * e->idle_step;
        if (e->claim_barred) {
                /* a kind was barred by its sub-quota: look again when the
                 * first barred kind's next slot comes within a claim's
                 * horizon, so that its claim is ready by then (a start or a
                 * reply that makes room looks at once: exit_sub_moved) */
                for (unsigned l = 0; l < EXIT_LEVELS; l++) {
                        tg_mono_ns t = e->sub[l] ? sub_next(e, level_kind(l), now) : now;
                        if (t != TG_MONO_NEVER)
                                t -= claim_horizon(e);
                        if (t != TG_MONO_NEVER && t > now && t - now < wait)
                                wait = t - now;
                }
        }
        store_worker_lock(e->worker);
        int r = store_next_due(e->store, &next, &pending);
        store_worker_unlock(e->worker);
        /* (with a kind barred, work due now is that kind's: the claim
         * found nothing else; only work due later is looked for then) */
        if (r == 0 && next != TG_WALL_NEVER && e->claim_barred && next <= wall)
                next = TG_WALL_NEVER;
        if (r == 0 && next != TG_WALL_NEVER) {
                tg_mono_ns due = (next - wall) * TG_NS_PER_MS;
                if (due < wait)
                        wait = due < TG_NS_PER_MS ? TG_NS_PER_MS : due;
        }
        /* the housekeeping second wakes the loop anyway: look then */
        if (e->next_sweep > now && now + wait > e->next_sweep)
                wait = e->next_sweep - now;
        e->idle_until = now + wait;
}

/* A claim that found nothing, or failed: say so (once in a while when the
 * store is down) and look again a little later. */
void exit_claim_missed(struct exit *e, int r, tg_mono_ns now, tg_wall_ms wall)
{
        if (r == TG_ENOTFOUND) {
                e->last_empty = now;
                idle(e, now, wall);
                return;
        }
        e->idle_until = now + IDLE_RECHECK_NS;
        if (r == TG_EFENCED) {
                e->lost = true;
                log_emit(LOG_ERROR, "claim_fenced",
                         json_pack("{s:I}", "epoch", (json_int_t)e->own.epoch));
                return;
        }
        /* Said once, then every few seconds while the store stays down: the
         * loop asks again every IDLE_RECHECK_NS. */
        if (e->claim_failures++ % 100 == 0)
                log_emit(LOG_WARN, "claim_failed",
                         json_pack("{s:s, s:I}", "error", tg_strerror(r), "failures",
                                   (json_int_t)e->claim_failures));
}

/* Claims ahead of the next slots while there is time before the next
 * hand-off: the slot moment then costs a wake-up and a send. The queue is
 * refilled when it runs under what it must cover, to ready_fill(). */
void exit_refill(struct exit *e, tg_mono_ns now, tg_wall_ms wall)
{
        /* the next start's moment (now, when its slot has passed; never
         * INT64_MIN, the pacer's "nothing started yet") */
        tg_mono_ns at = pacer_start_at(e->pacer, now);
        unsigned want = ready_want(e);

        if (e->lost || exit_stopping(e) || exit_store_owes(e) || now < e->idle_until ||
            ready_usable(e, at) >= want || e->claim_posted || pacer_held(e->pacer, now) ||
            at == TG_MONO_NEVER || e->paused)
                return;
        /* Inline, a claim stops the loop: a call on its way to the wire (its
         * connect in progress) comes first, and the claim is made only when
         * it fits before the next hand-off. A store thread claims whenever
         * the queue runs low. */
        if (!store_worker_threaded(e->worker) &&
            (pacer_pending(e->pacer) || exit_handoff_time(e, at) - now < 2 * e->claim_est))
                return;
        /* (claims their sub-quotas hold do not count: other kinds' work
         * is claimed past them) */
        exit_claim_ahead(e, ready_fill(e) - ready_usable(e, at), false, now, wall);
}
