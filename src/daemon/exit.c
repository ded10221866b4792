/*
 * exit — one exit as a value (exit.h): its life (new, open, rejoin, free),
 * its starts, its once-a-second store work, when it wants to be woken, and
 * its sanity checker. The ready queue is exit_queue.c's, a call's end
 * exit_settle.c's; the struct is exit_int.h's.
 *
 * Order of a start (invariants 1-3):
 *   slot = pacer_next_slot()        -- the earliest moment the next request may
 *                                      go on the wire (never while the last
 *                                      one's wire time is unknown)
 *   now >= slot - lead, in-flight < cap
 *   store_claim()                   -- short txn: in_flight, attempt counted,
 *                                      call row "sent, outcome unknown";
 *                                      COMMIT (record before send)
 *   env->start(not_before = at)     -- handed to the transport at once: it
 *                                      connects now and its pre-request hook
 *                                      holds the request until at = max(slot,
 *                                      now)
 *   pacer_start_pending(at)         -- counted in flight; nothing else starts
 *   ... the transport reports when the request went on the wire:
 *   pacer_sent(sent)                -- the next slot counts from that real start
 * The call is handed over `lead` ahead of its slot, the time its connection
 * takes (core/lead_estimator.h, from recent calls), so that the request goes
 * out at the slot rather than a connect later; the provider sees starts at
 * least 1/rate apart because the hook never lets one out before its slot.
 * No transaction is open while the loop waits for a slot or a reply.
 */
#include "daemon/exit.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/exit_call.h"
#include "daemon/exit_int.h"
#include "daemon/failpoint.h"
#include "daemon/log.h"

static tg_mono_ns lead(const struct exit *e)
{
        return lead_estimator_lead(&e->lead, pacer_interval(e->pacer), e->own.split.shares > 1);
}

bool exit_stopping(const struct exit *e)
{
        return *e->stop != 0;
}

json_t *exit_op_fields(const struct op_record *op, const struct call_record *call)
{
        json_t *f = json_object();
        json_object_set_new(f, "operation_id", json_string(op->req.operation_id));
        if (call) {
                json_object_set_new(f, "request_id", json_string(call->request_id));
                json_object_set_new(f, "kind", json_string(tg_call_kind_name(call->kind)));
                json_object_set_new(f, "attempt", json_integer(call->attempt));
                json_object_set_new(f, "call_id", json_integer(call->id));
        }
        /* every line of an operation carries its trace (W3C trace id) */
        if (op->traceparent[0])
                json_object_set_new(f, "trace_id", json_stringn(op->traceparent + 3, 32));
        return f;
}

static struct open_call *free_slot(struct exit *e)
{
        for (unsigned i = 0; i < e->ncalls; i++)
                if (!e->calls[i].used)
                        return &e->calls[i];
        return NULL;
}

/* Our lock was seen held recently enough to hand a call over; with shares
 * the account's controls read that recently too (a rate change is learnt
 * before the old grid could take a start past its lead: docs/design.md). */
static bool owner_fresh(const struct exit *e, tg_mono_ns now)
{
        if (!e->owner_checked || now - e->owner_seen > OWNERSHIP_FRESH_NS)
                return false;
        return e->own.split.shares <= 1 ||
               (e->controls_known && now - e->controls_seen <= OWNERSHIP_FRESH_NS);
}

unsigned exit_of_cookie(uint64_t cookie)
{
        return (unsigned)(cookie & (EXIT_MAX - 1));
}

/* ---- starting ------------------------------------------------------------------- */

/* Shares: this share's windows of the grid on the wall clock that every
 * share of the account keeps (share k owns the windows k, k + N, k + 2N, ...
 * of a grid grid.window apart), as monotonic times. Set after every
 * acquisition and each second (the wall clock may be slewed). */
static void set_grid(struct exit *e)
{
        unsigned n = e->own.split.shares;
        int64_t offset;

        if (n <= 1 || e->grid.window <= 0)
                return;
        /* the two clocks read close together: a read cut by preemption
         * would move this share's points by as much (up to three tries,
         * the closest pair kept) */
        int64_t best = INT64_MAX;
        offset = 0;
        for (int i = 0; i < 3 && best > GRID_READ_CLOSE; i++) {
                tg_mono_ns m0 = e->env->mono_now(e->env->ctx);
                int64_t w = e->env->wall_ns(e->env->ctx);
                tg_mono_ns m1 = e->env->mono_now(e->env->ctx);
                if (m1 - m0 < best) {
                        best = m1 - m0;
                        offset = w - (m0 + (m1 - m0) / 2);
                }
        }
        tg_mono_ns period = (tg_mono_ns)n * e->grid.window;
        tg_mono_ns phase_wall = (tg_mono_ns)e->own.share * e->grid.window;
        pacer_set_grid(e->pacer, period, (phase_wall - offset % period) % period, e->grid.open,
                       e->grid.spacing);
        /* a rate change: nothing before its common instant, on our clock */
        pacer_grid_from(e->pacer, e->grid_from > 0 ? e->grid_from - offset : INT64_MIN);
}

/* Shares: a hold another share saw (429/503) holds this one too, learned
 * from the store before each start. True when the account is held now. */
static bool account_held(struct exit *e, tg_mono_ns now, tg_wall_ms wall)
{
        tg_wall_ms until = 0;

        if (e->own.split.shares <= 1)
                return false;
        store_worker_lock(e->worker);
        int r = store_hold_get(e->store, &until);
        store_worker_unlock(e->worker);
        if (r < 0 || until <= wall)
                return false;
        pacer_hold(e->pacer, now + (until - wall) * TG_NS_PER_MS);
        exit_release_ready(e, "hold", now, wall);
        return true;
}

/* When a call for `slot` is handed over: `lead` ahead of it (a slot of
 * INT64_MIN, nothing yet, is now). */
tg_mono_ns exit_handoff_time(const struct exit *e, tg_mono_ns slot)
{
        /* after a hold the probe is handed over `lead` ahead of its slot
         * too, but never before the hold's end: not even its connect (a TLS
         * handshake the provider sees) comes before the hold has passed */
        tg_mono_ns l = lead(e);
        tg_mono_ns h = slot < INT64_MIN + l ? INT64_MIN : slot - l;

        /* (with shares the probe's point may come a little after the
         * hold's end: the connect fits in between) */
        if (pacer_held(e->pacer, slot) && h < pacer_hold_until(e->pacer))
                h = pacer_hold_until(e->pacer);
        return h;
}

bool exit_account_held(struct exit *e, tg_mono_ns now, tg_wall_ms wall)
{
        return account_held(e, now, wall);
}

const char *exit_account_name(const struct exit *e)
{
        return e->cfg->view_of[0] ? e->cfg->view_of : TG_ACCOUNT_DEFAULT;
}

/* The account's rate in force: the configured one, or a lower one an
 * operator set (the configured rate is the ceiling). */
static double account_rate(const struct tg_config *cfg, const struct account_controls *c)
{
        double rate = cfg->exit.starts_per_second;

        if (c->starts_per_second > 0 && c->starts_per_second < rate)
                rate = c->starts_per_second;
        return rate;
}

/* This share's part of it. */
static double controlled_rate(const struct exit *e)
{
        unsigned shares = e->own.split.shares > 0 ? e->own.split.shares : 1;

        return account_rate(e->cfg, &e->controls) / shares;
}

static json_t *controls_json(const struct account_controls *c)
{
        return json_pack("{s:f, s:i, s:b}", "starts_per_second", c->starts_per_second,
                         "max_in_flight", (int)c->max_in_flight, "paused", c->paused);
}

tg_mono_ns exit_switch_lead(const struct tg_config *cfg)
{
        return OWNERSHIP_FRESH_NS +
               (EXIT_SWITCH_COMMIT_MS + cfg->exit_clock_skew_ms) * TG_NS_PER_MS;
}

static int grid_plan(struct exit *e, const struct tg_config *cfg, double rate,
                     struct pacer_grid_plan *ret_plan);

/* Shares: the account's rate changed (or this share learns the one in
 * force when it starts). The old grid takes no start from now on: this
 * share moves to the new rate's grid at once and starts nothing before the
 * change's common instant (pacer_switch_resume), which every share
 * computes alike from the control row; a share that learns of the change
 * after that instant (it was not starting meanwhile) starts at once. */
static void switch_grid(struct exit *e, double rate)
{
        struct pacer_grid_plan plan;
        tg_mono_ns skew = e->cfg->exit_clock_skew_ms * TG_NS_PER_MS;

        if (grid_plan(e, e->cfg, rate, &plan) < 0)
                return; /* cannot happen: the rate is within the configured one */
        e->grid = plan;
        e->grid_rate = rate;
        e->grid_from = pacer_switch_resume(e->controls.changed_at * TG_NS_PER_MS,
                                           exit_switch_lead(e->cfg), plan.spacing, skew);
        log_emit(LOG_WARN, "grid_switch",
                 json_pack("{s:f, s:I, s:I, s:i}", "to_rate", rate, "spacing_us",
                           (json_int_t)(plan.spacing / TG_NS_PER_US), "from_ms",
                           (json_int_t)(e->grid_from / TG_NS_PER_MS), "window_points",
                           (int)plan.points));
        set_grid(e);
}

void exit_apply_controls(struct exit *e, const struct account_controls *next, tg_mono_ns now,
                         tg_wall_ms wall)
{
        unsigned shares = e->own.split.shares > 0 ? e->own.split.shares : 1;
        unsigned cap = e->share_cfg.max_in_flight;
        bool was_paused = e->paused;
        double rate;

        if (e->controls.starts_per_second == next->starts_per_second &&
            e->controls.max_in_flight == next->max_in_flight && e->controls.paused == next->paused)
                return;
        log_emit(LOG_WARN, "account_controls",
                 json_pack("{s:o, s:o, s:s}", "from", controls_json(&e->controls), "to",
                           controls_json(next), "by", next->changed_by));
        e->controls = *next;
        /* a lowered cap never aborts open calls: none starts until fewer
         * are open than the new cap (each share its part of it) */
        if (next->max_in_flight > 0 && next->max_in_flight / shares < cap)
                cap = next->max_in_flight / shares > 0 ? next->max_in_flight / shares : 1;
        e->cap_now = cap;
        e->paused = next->paused;
        /* from the next slot; a raised rate never catches up missed ones
         * (pacer_set_rate; with shares the switch's instant) */
        rate = controlled_rate(e);
        if (shares > 1 && e->grid.window > 0 && account_rate(e->cfg, next) != e->grid_rate) {
                switch_grid(e, account_rate(e->cfg, next));
                e->rate_now = rate;
                exit_stats_rate(e->xstats, e->rate_now, 0);
        } else if (e->adaptive_on) {
                adaptive_init(&e->adaptive, rate, rate / ADAPTIVE_FLOOR_SHARE);
        } else if (shares <= 1 && rate != e->rate_now && pacer_set_rate(e->pacer, rate) == 0) {
                e->rate_now = rate;
                exit_stats_rate(e->xstats, e->rate_now, 0);
        }
        /* paused: the claims made ahead go back to the backlog */
        if (e->paused && !was_paused)
                exit_release_ready(e, "paused", now, wall);
}

void exit_follow_rate(struct exit *e, tg_mono_ns now)
{
        if (!e->adaptive_on)
                return;
        /* the rate the provider's pushback leaves us, from the next slot */
        double rate = adaptive_rate(&e->adaptive, now);
        if (rate != e->rate_now && pacer_set_rate(e->pacer, rate) == 0)
                e->rate_now = rate;
        exit_stats_rate(e->xstats, e->rate_now, e->adaptive.cuts);
}

void exit_try_start(struct exit *e, tg_mono_ns now, tg_wall_ms wall)
{
        struct open_call *oc;
        bool probe = false;
        int r;

        /* idle_until: the store had nothing to claim a moment ago; a claim
         * made ahead is work all the same */
        if (e->lost || exit_stopping(e) || exit_store_owes(e) || exit_store_behind(e) ||
            (now < e->idle_until && !e->nready) || e->paused ||
            pacer_in_flight(e->pacer) >= e->cap_now)
                return;
        /* the next housekeeping checks the lock (or finds it lost) */
        if (!owner_fresh(e, e->env->mono_now(e->env->ctx)))
                return;
        exit_follow_rate(e, now);
        /* oauth2: no call without a usable token; its own call first */
        if (exit_token_blocks(e, now, wall))
                return;
        tg_mono_ns slot = pacer_next_slot(e->pacer);
        /* the request goes on the wire at its slot, or now if that is past
         * (with shares: on this share's point of the grid, or a little
         * after it, else at its next point) */
        tg_mono_ns at = pacer_start_at(e->pacer, now);
        /* sub-quotas hold every ready claim and no other work may be
         * claimed now: the start is planned for the first one they let go
         * (handed over its lead ahead of that, as exit_wake_at says) */
        if (at != TG_MONO_NEVER && e->nready && now < e->idle_until) {
                tg_mono_ns next = exit_ready_next(e, at);
                if (next == TG_MONO_NEVER)
                        return; /* they wait for room in flight: a reply */
                if (next != at)
                        at = pacer_start_at(e->pacer, next);
        }
        bool unpaced = PLANT_RETRY_SKIPS_PACER && e->nready > 0 &&
                       e->ready[0].call.kind == TG_KIND_RETRY && !pacer_pending(e->pacer);
        if (unpaced)
                at = now;
        else if (at == TG_MONO_NEVER || now < exit_handoff_time(e, at) ||
                 account_held(e, now, wall))
                return;
        if (!unpaced && !pacer_may_start(e->pacer, at))
                return; /* in flight at the cap */
        oc = free_slot(e);
        if (!oc)
                return; /* cannot happen: slots == max_in_flight */
        r = exit_ready_pop(e, oc, at, now, wall);
        /* every ready claim held by its kind's sub-quota: other work is
         * claimed for this slot, unless a claim just found none */
        if (r == TG_EAGAIN && now < e->idle_until)
                return;
        if (r == TG_EAGAIN)
                r = TG_ENOTFOUND;
        if (r == TG_ENOTFOUND && e->claim_posted)
                return; /* a batch is on its way: its result wakes the loop */
        if (r == TG_ENOTFOUND && e->slot_claim_landed) {
                /* the batch made for this slot came and none of it may go */
                e->slot_claim_landed = false;
                exit_claim_missed(e, r, now, wall);
                return;
        }
        if (r == TG_ENOTFOUND) {
                /* nothing claimed ahead (idle until now): claim at the slot
                 * (with a store thread: the next turn after it came sends) */
                exit_claim_ahead(e, 1, true, now, wall);
                if (e->claim_posted || e->claim_result < 0)
                        return; /* on its way, or failed (claim_missed said so) */
                e->slot_claim_landed = false;
                r = exit_ready_pop(e, oc, at, now, wall);
                if (r < 0) {
                        exit_claim_missed(e, TG_ENOTFOUND, now, wall);
                        return;
                }
        }
        if (r < 0)
                return;
        e->slot_claim_landed = false;
        e->claim_failures = 0;
        e->idle_step = IDLE_RECHECK_NS;
        tg_mono_ns after = e->env->mono_now(e->env->ctx);
        tg_mono_ns window_end = unpaced ? 0 : pacer_window_end(e->pacer, at);
        if (!owner_fresh(e, after) || (window_end > 0 && after > window_end)) {
                /* the claim took long enough for the owner check to go
                 * stale, or (shares) for this point's window to close: it
                 * waits at the head of the queue for the next */
                memmove(&e->ready[1], &e->ready[0], sizeof(e->ready[0]) * e->nready);
                e->ready[0] = *oc;
                e->nready++;
                return;
        }

        /* The attempt is committed: record before send. */
        failpoint_hit(e->failpoint, "crash_after_claim", &oc->op);

        oc->used = true;
        oc->unpaced = unpaced;
        oc->cookie = (++e->next_cookie << EXIT_INDEX_BITS) | e->index;
        oc->request = oc->call.kind == TG_KIND_QUERY ? CLASSIFY_QUERY : CLASSIFY_POST;
        oc->sent_known = false;
        oc->sent = 0;
        /* stats: ready = the later of the slot and the last empty claim */
        tg_mono_ns empty = e->last_empty;
        oc->ready_at = slot > empty ? slot : empty;
        char traceparent[TG_TRACEPARENT_MAX + 1];
        exit_call_traceparent(&oc->op, &oc->call, traceparent);
        /* a query whose last one was a page with more to follow: the next */
        const char *cursor = NULL;
        oc->list_page = 1;
        if (oc->request == CLASSIFY_QUERY)
                cursor = list_walk_cursor(e->walks, oc->op.id, oc->op.attempts, oc->op.queries,
                                          &oc->list_page);
        struct transport_call tc = {
            .request = oc->request,
            .operation_id = oc->op.req.operation_id,
            .refund = &oc->op.req,
            .refund_id = oc->op.refund_id,
            .list_cursor = cursor,
            .request_id = oc->call.request_id,
            .attempt = oc->call.attempt,
            .timeout_ms = exit_call_timeout_ms(e->cfg->provider_timeout_ms, &oc->op, wall),
            .cookie = oc->cookie,
            .not_before = at,
            .not_after = window_end,
            .traceparent = traceparent,
            .lane = e->index, /* several accounts: the loop's transport has a lane each */
        };
        oc->planned = at;
        oc->token_gen = exit_token_gen(e);
        r = e->env->start(e->env->ctx, &tc, &oc->handoff);
        /* its kind's sub-quota counts it too (exit_ready_pop found it open
         * at `at`); a kind barred from the last claim may come again */
        struct pacer *sub = unpaced ? NULL : exit_sub(e, oc->call.kind);
        if (sub && pacer_start_pending(sub, at, NULL) < 0) {
                log_emit(LOG_ERROR, "pacer_refused_after_claim",
                         exit_op_fields(&oc->op, &oc->call));
                abort();
        }
        exit_sub_moved(e);
        /* may_start held at `at` and nothing in between can close the slot:
         * the slot only moves at a start, and starts happen only here. */
        if (!unpaced && pacer_start_pending(e->pacer, at, &probe) < 0) {
                /* A programmer error, not a condition to work around: stop.
                 * The claim is committed, so the next owner reconciles the
                 * operation as unknown. */
                log_emit(LOG_ERROR, "pacer_refused_after_claim",
                         exit_op_fields(&oc->op, &oc->call));
                abort();
        }
        oc->probe = probe;
        oc->in_flight_at_start = pacer_in_flight(e->pacer);
        json_t *f = exit_op_fields(&oc->op, &oc->call);
        json_object_set_new(f, "in_flight", json_integer(pacer_in_flight(e->pacer)));
        json_object_set_new(f, "timeout_ms", json_integer(tc.timeout_ms));
        if (probe)
                json_object_set_new(f, "probe", json_true());
        if (oc->list_page > 1)
                json_object_set_new(f, "list_page", json_integer(oc->list_page));
        if (r < 0) {
                log_emit(LOG_ERROR, "transport_start_failed", f);
                exit_settle_unsent(e, oc, r, now, wall);
                return;
        }
        log_emit(LOG_INFO, "call_start", f);
}

/* ---- its second and its wake-up -------------------------------------------------- */

static int owner_run(struct store *store, void *arg)
{
        struct owner_job *j = arg;

        j->asked = j->e->env->mono_now(j->e->env->ctx);
        int r = store_owner_check(store);
        /* the controls after the check: as of `asked` at least */
        j->controls_result =
            r < 0 ? r : store_controls_get(store, exit_account_name(j->e), &j->controls);
        return r;
}

static void owner_done(void *arg, int r, tg_mono_ns took)
{
        struct owner_job *j = arg;
        struct exit *e = j->e;

        (void)took;
        j->posted = false;
        if (r < 0) {
                if (!e->lost)
                        log_emit(LOG_ERROR, "owner_lost",
                                 json_pack("{s:I}", "epoch", (json_int_t)e->own.epoch));
                e->lost = true;
        } else {
                if (j->controls_result == 0) {
                        /* not read for longer than a start allows (or never):
                         * a rate change the others took may have passed us */
                        bool lapsed =
                            !e->controls_known || j->asked - e->controls_seen > OWNERSHIP_FRESH_NS;
                        tg_wall_ms known = e->controls.changed_at;
                        int64_t from = e->grid_from;

                        exit_apply_controls(e, &j->controls, e->env->mono_now(e->env->ctx),
                                            e->env->wall_now(e->env->ctx));
                        if (lapsed && j->controls.changed_at != known && e->grid_from == from &&
                            e->own.split.shares > 1 && e->grid.window > 0) {
                                /* as if it were a rate change: the latest's instant */
                                e->controls.changed_at = j->controls.changed_at;
                                switch_grid(e, e->grid_rate);
                        }
                        e->controls_known = true;
                        e->controls_seen = j->asked;
                }
                e->owner_seen = j->asked;
                e->owner_checked = true;
        }
}

static int second_run(struct store *store, void *arg)
{
        struct second_job *j = arg;
        const struct exit *e = j->e;

        j->sample_result =
            store_sample_put(store, &j->sample, j->keep_after, e->env->mono_now(e->env->ctx));
        j->swept = j->taken = j->invalid = 0;
        j->swept_ok =
            store_sweep_deadlines(store, e->cfg->policy.key_retention_ms, j->wall, &j->swept) == 0;
        /* outbox: refunds an application inserted in its own transaction,
         * validated like an API intake (TG_EUNSUPPORTED on SQLite) */
        j->outbox_ok =
            store_outbox_intake(store, &e->cfg->policy, j->wall, &j->taken, &j->invalid) == 0;
        /* the service's once-a-second work (daemon/service.h: watchdog,
         * readiness, retention), on the store thread and its store: it
         * comes only while the loop posts it */
        if (e->housekeeping)
                e->housekeeping(e->hook_ctx, store, j->share, j->wall, j->lost);
        j->split_result = e->own.split.shares > 1 ? store_split_get(store, &j->split) : -1;
        return 0;
}

static void second_done(void *arg, int r, tg_mono_ns took)
{
        struct second_job *j = arg;
        struct exit *e = j->e;

        (void)r;
        (void)took;
        j->posted = false;
        if (j->sample_result < 0) {
                exit_stats_give_back(e->xstats, &j->sample); /* into the next second's */
                log_emit(LOG_DEBUG, "sample_failed", NULL);
        }
        if (j->swept_ok && j->swept > 0)
                log_emit(LOG_WARN, "deadline_sweep",
                         json_pack("{s:i}", "to_manual", (int)j->swept));
        if (j->outbox_ok && j->taken + j->invalid > 0)
                log_emit(
                    LOG_INFO, "outbox_intake",
                    json_pack("{s:i, s:i}", "taken", (int)j->taken, "invalid", (int)j->invalid));
        if (j->split_result == 0)
                share_want_seen(&e->own.want, j->split.want_seq, e->env->mono_now(e->env->ctx));
}

/* Once a second: the owner check, the exit's sample, the deadline sweep,
 * the outbox and the service's work, posted to the store threads (the loop
 * does not wait for them: a MariaDB second is 10-20 ms of round trips). */
bool exit_second(struct exit *e, tg_mono_ns now, tg_wall_ms wall)
{
        if (now < e->next_sweep)
                return false;
        e->next_sweep = now + SWEEP_EVERY_NS;
        set_grid(e);
        if (!e->owner_job->posted) {
                e->owner_job->e = e;
                e->owner_job->posted = true;
                store_worker_post(e->worker, owner_run, NULL, owner_done, e->owner_job);
        }
        /* (a second whose work is still with the store thread: the next
         * sample carries this one's counts) */
        if (!e->second_job->posted) {
                struct second_job *j = e->second_job;
                j->e = e;
                j->wall = wall;
                j->share = e->own.share;
                j->lost = e->lost;
                /* stats: one exit sample a second for /metrics, /v1/stats, admission */
                exit_stats_take(e->xstats, e->own.epoch, e->own.share, pacer_in_flight(e->pacer),
                                pacer_held(e->pacer, now), wall, &j->sample, &j->keep_after);
                j->posted = true;
                store_worker_post(e->outcomes, second_run, NULL, second_done, j);
        }
        return true;
}

/* The next thing that can happen, as a monotonic time: the next slot (when
 * there is room in flight), else a recheck for new work; a reply wakes the
 * wait earlier. */
tg_mono_ns exit_wake_at(const struct exit *e, tg_mono_ns now)
{
        /* the housekeeping second at the latest; a reply or the doorbell
         * wakes the wait earlier */
        tg_mono_ns until = e->next_sweep;

        if (exit_open_calls(e) > 0 && now + IDLE_RECHECK_NS < until)
                until = now + IDLE_RECHECK_NS; /* a drain or a lost owner waits for replies */
        if (exit_store_owes(e)) {
                /* nothing starts until the store takes what it owes: wake
                 * for the next try, not for a slot the loop may not use (it
                 * would come round again at once, and again, spinning) */
                if (e->next_settle_retry < until)
                        until = e->next_settle_retry;
        } else if (exit_store_behind(e) || (e->claim_posted && e->nready == 0)) {
                /* the store thread rings when it is done: no slot to wake
                 * for before (it would spin) */
        } else if (!e->lost && !exit_stopping(e) && owner_fresh(e, now) && !e->paused &&
                   pacer_in_flight(e->pacer) < e->cap_now) {
                tg_mono_ns at = pacer_start_at(e->pacer, now);
                tg_mono_ns token = exit_token_wait(e, now);
                if (token != 0) {
                        /* no token to call with: its answer or its hold's end */
                        if (token < until)
                                until = token;
                } else if (at != TG_MONO_NEVER) {
                        tg_mono_ns handoff = exit_handoff_time(e, at);
                        tg_mono_ns t =
                            handoff > e->idle_until || e->nready ? handoff : e->idle_until;
                        /* sub-quotas hold every ready claim: the first one
                         * they let go, or other work when it may be claimed */
                        tg_mono_ns next = exit_ready_next(e, at);
                        if (e->nready && next != at) {
                                tg_mono_ns other =
                                    handoff > e->idle_until ? handoff : e->idle_until;
                                t = next == TG_MONO_NEVER ? other : exit_handoff_time(e, next);
                                if (other < t)
                                        t = other;
                        }
                        if (t < until)
                                until = t;
                }
        }
        return until;
}

void exit_woken(struct exit *e)
{
        e->idle_until = INT64_MIN;
        e->idle_step = IDLE_RECHECK_NS;
}

/* ---- the loop's questions ------------------------------------------------------- */

void exit_collect(struct exit *e)
{
        store_worker_collect(e->worker);
        if (e->outcomes != e->worker)
                store_worker_collect(e->outcomes);
}

void exit_release_all(struct exit *e, const char *why, tg_mono_ns now, tg_wall_ms wall)
{
        exit_release_ready(e, why, now, wall);
}

bool exit_lost(const struct exit *e)
{
        return e->lost;
}

bool exit_want_fresh(const struct exit *e, tg_mono_ns now)
{
        return share_want_fresh(&e->own.want, now);
}

void exit_hand_back(struct exit *e)
{
        if (e->lost)
                return;
        log_emit(LOG_INFO, "share_hand_back",
                 json_pack("{s:I, s:i, s:i, s:s}", "epoch", (json_int_t)e->own.epoch, "share",
                           (int)e->own.share, "open_calls", (int)exit_open_calls(e), "message",
                           "a standby wants a share of the account: this process holds two; "
                           "draining this one and releasing its lock"));
        e->lost = true;
        e->handing_back = true;
}

bool exit_handing_back(const struct exit *e)
{
        return e->handing_back;
}

unsigned exit_open_calls(const struct exit *e)
{
        unsigned n = 0;

        for (unsigned i = 0; i < e->ncalls; i++)
                n += e->calls[i].used;
        return n + exit_token_open(e);
}

bool exit_drained(const struct exit *e)
{
        return exit_open_calls(e) == 0 && exit_store_pending(e) == 0;
}

unsigned exit_unsettled(const struct exit *e)
{
        return e->n_unsettled;
}

bool exit_sane(const struct exit *e, unsigned transport_open)
{
        unsigned open = 0, paced = 0, of_level[EXIT_LEVELS] = {0};

        if (!e || !pacer_sane(e->pacer))
                return false;
        for (unsigned l = 0; l < EXIT_LEVELS; l++)
                if (e->sub[l] && !pacer_sane(e->sub[l]))
                        return false;
        if (e->nready > READY_MAX || e->n_unreleased > READY_MAX ||
            e->n_unsettled > UNSETTLED_MAX(e))
                return false;
        for (unsigned i = 0; i < e->ncalls; i++) {
                const struct open_call *oc = &e->calls[i];
                if (!oc->used)
                        continue;
                open++;
                paced += !(PLANT_RETRY_SKIPS_PACER && oc->unpaced);
                of_level[exit_level_of(oc->call.kind)] += !(PLANT_RETRY_SKIPS_PACER && oc->unpaced);
                if (exit_of_cookie(oc->cookie) != e->index || !op_sane(&oc->op))
                        return false;
        }
        for (unsigned i = 0; i < e->nready; i++)
                if (e->ready[i].used || !op_sane(&e->ready[i].op))
                        return false;
        /* every open call is the transport's, and the pacers count them
         * (the token call too: it is paced like the others) */
        open += exit_token_open(e);
        paced += exit_token_open(e);
        if (open > transport_open || pacer_in_flight(e->pacer) != paced)
                return false;
        for (unsigned l = 0; l < EXIT_LEVELS; l++)
                if (e->sub[l] && pacer_in_flight(e->sub[l]) != of_level[l])
                        return false;
        return true;
}

/* ---- its life -------------------------------------------------------------------- */

static void log_open(const struct exit *e)
{
        json_t *f = json_pack("{s:f, s:i, s:I, s:i, s:i}", "starts_per_second",
                              e->share_cfg.starts_per_second, "max_in_flight",
                              (int)e->share_cfg.max_in_flight, "timeout_ms",
                              (json_int_t)e->cfg->provider_timeout_ms, "share", (int)e->own.share,
                              "shares", (int)e->own.split.shares);

        if (e->own.split.shares > 1) {
                /* the share's windows: a run of points at the account's spacing */
                json_object_set_new(f, "window_points", json_integer(e->grid.points));
                json_object_set_new(f, "window_us",
                                    json_integer((json_int_t)(e->grid.window / TG_NS_PER_US)));
                json_object_set_new(f, "spacing_us",
                                    json_integer((json_int_t)(e->grid.spacing / TG_NS_PER_US)));
        }
        log_emit(LOG_INFO, "exit_open", f);
}

int exit_open(struct exit *e)
{
        int r = ownership_acquire(&e->own);

        if (r == 0)
                r = ownership_take_over(&e->own);
        if (r < 0)
                log_emit(LOG_ERROR, "dispatcher_failed",
                         json_pack("{s:s}", "error", tg_strerror(r)));
        if (r != 0)
                return r;
        set_grid(e);
        log_open(e);
        return 0;
}

/* What a rejoin forgets, said first. */
static void rejoin_reset(struct exit *e)
{
        if (e->handing_back)
                log_emit(LOG_INFO, "share_released",
                         json_pack("{s:I, s:i, s:i}", "epoch", (json_int_t)e->own.epoch, "share",
                                   (int)e->own.share, "unsettled", (int)e->n_unsettled));
        else
                log_emit(LOG_WARN, "rejoin",
                         json_pack("{s:I, s:i}", "lost_epoch", (json_int_t)e->own.epoch,
                                   "unsettled", (int)e->n_unsettled));
        e->handing_back = false;
        /* Outcomes the store never took stay in_flight under the lost epoch:
         * the takeover turns them into unknown, reconciled. The pacer is
         * kept: the next slot still counts from our last actual start. */
        e->n_unsettled = 0;
        e->n_unreleased = 0;
        e->lost = false;
}

/* An owner again (or still trying): the grid of its share, and a fresh
 * check of the new lock before the next start. */
static void rejoined(struct exit *e)
{
        set_grid(e);
        e->owner_checked = false;
        e->next_sweep = 0;
}

void exit_begin(struct exit *e, tg_mono_ns now)
{
        ownership_begin(&e->own, now);
        e->pending = true;
}

void exit_rejoin_begin(struct exit *e, tg_mono_ns now)
{
        rejoin_reset(e);
        store_owner_release(e->store);
        exit_begin(e, now);
}

int exit_own_step(struct exit *e, tg_mono_ns now)
{
        int r;

        if (!e->pending)
                return 0;
        r = ownership_step(&e->own, now);
        if (r == 2)
                return 2;
        if (r < 0)
                log_emit(LOG_ERROR, "dispatcher_failed",
                         json_pack("{s:s}", "error", tg_strerror(r)));
        if (r != 0) {
                e->lost = true; /* never an owner: nothing of it may run */
                return r;
        }
        e->pending = false;
        rejoined(e);
        log_open(e);
        return 0;
}

bool exit_pending(const struct exit *e)
{
        return e->pending;
}

bool exit_owns(const struct exit *e)
{
        return !e->pending || e->own.phase != OWNERSHIP_ACQUIRE;
}

tg_mono_ns exit_own_next(const struct exit *e)
{
        return e->own.next;
}

const char *exit_account(const struct exit *e)
{
        return e->cfg->view_of;
}

int exit_rejoin(struct exit *e)
{
        int r;

        rejoin_reset(e);
        r = ownership_rejoin(&e->own);
        rejoined(e);
        if (r != 0) {
                if (r != 1)
                        e->lost = true; /* could not: the loop ends */
                return 1;
        }
        return 0;
}

void exit_share_config(const struct tg_config *cfg, struct pacer_config *ret_share)
{
        unsigned shares = cfg->exit_shares > 0 ? cfg->exit_shares : 1;

        /* config checked shares <= max_in_flight, so each share has at least
         * one call and the shares' caps add up to at most the account's */
        ret_share->starts_per_second = cfg->exit.starts_per_second / shares;
        ret_share->max_in_flight = cfg->exit.max_in_flight / shares;
        ret_share->spacing_margin_ns = cfg->exit.spacing_margin_ns;
        if (ret_share->max_in_flight < 1)
                ret_share->max_in_flight = 1;
}

/* The longest hold after probes refused again without Retry-After:
 * exit.default_hold_max_ms, never past the Retry-After cap. */
static int64_t limited_hold_max(const struct tg_config *cfg)
{
        int64_t cap = config_retry_after_cap_ms(cfg);

        return cfg->exit_default_hold_max_ms < cap ? cfg->exit_default_hold_max_ms : cap;
}

/* Shares: the grid's windows (core/pacer.h, pacer_grid_plan), for the
 * account's spacing (with its margin) and the clock skew bound. */
static int grid_plan(struct exit *e, const struct tg_config *cfg, double rate,
                     struct pacer_grid_plan *ret_plan)
{
        struct pacer_config acct = {.starts_per_second = rate,
                                    .max_in_flight = cfg->exit.max_in_flight,
                                    .spacing_margin_ns = cfg->exit.spacing_margin_ns};
        struct pacer *tmp = NULL;
        int r = pacer_new(&acct, &tmp);

        if (r == 0)
                r = pacer_grid_plan(pacer_interval(tmp), cfg->exit_clock_skew_ms * TG_NS_PER_MS,
                                    e->share_cfg.max_in_flight, ret_plan);
        pacer_free(tmp);
        return r;
}

/* The pacers, the classifier, the store workers and the memory of its
 * jobs and calls. */
static int exit_build(struct exit *e, const struct exit_params *p)
{
        const struct tg_config *cfg = p->config;
        const struct exit_env *env = p->env;
        unsigned shares = cfg->exit_shares > 0 ? cfg->exit_shares : 1;
        /* Every quota below is a share's, the query sub-quota too. An empty
         * pacer: nothing carried over from before, no catch-up. */
        int r = pacer_new(&e->share_cfg, &e->pacer);

        e->rate_now = e->share_cfg.starts_per_second;
        e->adaptive_on = cfg->exit_adaptive;
        adaptive_init(&e->adaptive, e->rate_now, e->rate_now / ADAPTIVE_FLOOR_SHARE);
        if (r == 0)
                e->own.spacing_ns = pacer_interval(e->pacer);
        if (r == 0 && shares > 1)
                r = grid_plan(e, cfg, cfg->exit.starts_per_second, &e->grid);
        e->grid_rate = cfg->exit.starts_per_second;
        if (r == 0)
                r = exit_sub_build(e);
        if (r == 0)
                r = classifier_new_default(&e->classifier);
        if (r == 0)
                r = store_worker_new(p->store, env->store_bell, env->mono_now, env->ctx,
                                     &e->worker);
        e->outcomes = e->worker;
        if (r == 0 && p->outcome_store && env->store_bell)
                r = store_worker_new(p->outcome_store, env->store_bell, env->mono_now, env->ctx,
                                     &e->outcomes);
        if (r == 0 && !(e->claim = calloc(1, sizeof(*e->claim))))
                r = TG_ENOMEM;
        if (r == 0 && !(e->owner_job = calloc(1, sizeof(*e->owner_job))))
                r = TG_ENOMEM;
        if (r == 0 && !(e->walks = calloc(1, sizeof(*e->walks))))
                r = TG_ENOMEM;
        if (r == 0 && !(e->second_job = calloc(1, sizeof(*e->second_job))))
                r = TG_ENOMEM;
        for (unsigned i = 0; r == 0 && i < cfg->rule_count; i++)
                r = classifier_add_rule(e->classifier, &cfg->rules[i]);
        if (r == 0)
                r = exit_stats_new(env->wall_now(env->ctx), &e->xstats);
        if (r == 0) {
                exit_stats_set_keep(e->xstats, (int64_t)cfg->stats_keep_hours * 3600 * 1000);
                exit_stats_rate(e->xstats, e->rate_now, 0);
        }
        e->ncalls = e->share_cfg.max_in_flight;
        e->cap_now = e->share_cfg.max_in_flight;
        if (r == 0) {
                e->calls = calloc(e->ncalls, sizeof(*e->calls));
                e->unsettled = calloc(UNSETTLED_MAX(e), sizeof(*e->unsettled));
                if (!e->calls || !e->unsettled)
                        r = TG_ENOMEM;
        }
        return r;
}

int exit_new(const struct exit_params *p, struct exit **ret_exit)
{
        const struct tg_config *cfg = p->config;
        const struct exit_env *env = p->env;
        unsigned shares = cfg->exit_shares > 0 ? cfg->exit_shares : 1;
        struct exit *e;
        int r;

        if (p->index >= EXIT_MAX || !p->store)
                return TG_EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return TG_ENOMEM;
        e->cfg = cfg;
        e->env = env;
        exit_token_init(e);
        e->store = p->store;
        e->index = p->index;
        e->stop = p->stop;
        e->housekeeping = p->housekeeping;
        e->hook_ctx = p->hook_ctx;
        r = failpoint_armed(&e->failpoint);
        if (r < 0) {
                free(e);
                return r;
        }
        e->claim_est = CLAIM_EST_INIT;
        e->last_empty = INT64_MIN;
        e->idle_step = IDLE_RECHECK_NS;
        e->idle_max = cfg->exit_idle_poll_max_ms * TG_NS_PER_MS;
        if (e->idle_max < IDLE_RECHECK_NS)
                e->idle_max = IDLE_RECHECK_NS;
        lead_estimator_init(&e->lead);
        /* each exit its own random source, the first as the single one was */
        tg_rng_seed(&e->rng, env->seed + p->index);
        e->own = (struct ownership){
            .env = env,
            .store = p->store,
            .split = {.shares = shares,
                      .starts_per_second = cfg->exit.starts_per_second,
                      .max_in_flight = cfg->exit.max_in_flight},
            .provider_timeout_ms = cfg->provider_timeout_ms,
            .policy = &cfg->policy,
            .no_wait = p->no_wait && !p->spare,
            .spare = p->spare,
            .stop = p->stop,
            .standby = p->standby,
        };
        e->holds_cfg =
            (struct holds_config){.default_hold_ms = cfg->exit_default_hold_ms,
                                  .limited_hold_max_ms = limited_hold_max(cfg),
                                  .timeout_run_hold = cfg->exit_timeout_run_hold,
                                  .timeout_hold_ms = cfg->exit_timeout_hold_ms,
                                  .unreachable_run_hold = cfg->provider_unreachable_run_hold,
                                  .unreachable_hold_ms = cfg->provider_unreachable_hold_ms,
                                  .unreachable_hold_max_ms = cfg->provider_unreachable_hold_max_ms,
                                  .pushback_only = cfg->exit_adaptive};
        exit_share_config(cfg, &e->share_cfg);
        r = exit_build(e, p);
        if (r < 0) {
                exit_free(e);
                return r;
        }
        *ret_exit = e;
        return 0;
}

void exit_free(struct exit *e)
{
        if (!e)
                return;
        /* the outcomes posted are committed (and logged) first */
        if (e->outcomes != e->worker)
                store_worker_free(e->outcomes);
        store_worker_free(e->worker);
        free(e->claim);
        free(e->owner_job);
        free(e->second_job);
        free(e->walks);
        classifier_free(e->classifier);
        pacer_free(e->pacer);
        for (unsigned l = 0; l < EXIT_LEVELS; l++)
                pacer_free(e->sub[l]);
        exit_stats_free(e->xstats);
        if (e->store)
                store_owner_release(e->store);
        free(e->calls);
        free(e->unsettled);
        free(e);
}
