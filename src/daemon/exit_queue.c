/*
 * exit_queue — the claims an exit makes ahead of its slots (exit.h): a
 * batch of operations claimed in one transaction (group commit) on the
 * store thread, onto the ready queue, oldest first, so that a slot costs a
 * wake-up and a send, not a commit. A claim that can no longer go in time
 * (its deadline, its key's retention, the query sub-quota, a hold, a stop,
 * a lost owner) goes back to the store (store_release) as the claim found
 * it; one the store could not take back waits with the outcomes
 * (exit_settle.c). With nothing to claim, the exit idles until the store's
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

        if (n > READY_MAX - e->nready)
                n = READY_MAX - e->nready;
        if (n == 0 || e->claim_posted)
                return;
        memset(c->args, 0, sizeof(c->args[0]) * n);
        for (unsigned i = 0; i < n; i++) {
                struct claim_args *a = &c->args[i];
                a->group = e->turn;
                a->epoch = e->own.epoch;
                a->now = wall;
                a->start_mono = now;
                a->in_flight_at_start = pacer_in_flight(e->pacer) + 1 + e->nready + i;
                a->key_retention_ms = e->cfg->policy.key_retention_ms;
                /* Queries have a sub-quota that narrows the account's, never
                 * adds to it: when it is spent the again group may only yield
                 * a re-send, and one batch holds one query at most. */
                a->no_queries = e->query_pacer && (i > 0 || !pacer_may_start(e->query_pacer, now));
                exit_call_request_id(a->request_id, sizeof(a->request_id), e->own.epoch, ++e->seq,
                                     (uint32_t)tg_rng_next(&e->rng));
                exit_call_trace_ids(&e->rng, a->span_id, a->traceparent_new);
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
        while (e->nready > 0) {
                struct open_call rc = e->ready[0];
                const char *why = NULL;

                memmove(&e->ready[0], &e->ready[1], sizeof(e->ready[0]) * (e->nready - 1));
                e->nready--;
                if (rc.op.deadline_at <= wall)
                        why = manual_reason_name(rc.op.pending_since > 0 ? MANUAL_PENDING_DEADLINE
                                                                         : MANUAL_DEADLINE);
                else if (rc.call.kind != TG_KIND_QUERY && rc.op.attempts > 1 &&
                         e->cfg->policy.key_retention_ms > 0 &&
                         rc.op.key_first_used + e->cfg->policy.key_retention_ms <= wall)
                        why = manual_reason_name(MANUAL_KEY_RETENTION);
                else if (rc.call.kind == TG_KIND_QUERY && e->query_pacer &&
                         !pacer_may_start(e->query_pacer, at))
                        why = "query sub-quota";
                if (why) {
                        exit_release_claim(e, &rc, why, now, wall);
                        continue;
                }
                *oc = rc;
                return 0;
        }
        return TG_ENOTFOUND;
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
        store_worker_lock(e->worker);
        int r = store_next_due(e->store, &next, &pending);
        store_worker_unlock(e->worker);
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
            e->nready >= want || e->claim_posted || pacer_held(e->pacer, now) ||
            at == TG_MONO_NEVER || e->paused)
                return;
        /* Inline, a claim stops the loop: a call on its way to the wire (its
         * connect in progress) comes first, and the claim is made only when
         * it fits before the next hand-off. A store thread claims whenever
         * the queue runs low. */
        if (!store_worker_threaded(e->worker) &&
            (pacer_pending(e->pacer) || exit_handoff_time(e, at) - now < 2 * e->claim_est))
                return;
        exit_claim_ahead(e, ready_fill(e) - e->nready, false, now, wall);
}
