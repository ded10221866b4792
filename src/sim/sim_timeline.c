/*
 * sim_timeline — what a seed draws for one run of tollgate-sim (sim_world.h):
 * tollgate's configuration and the simulation's own (how often each fault
 * comes), and the timeline the world plays at each step: intake bursts and
 * callers trying a lost answer again, crashes, store episodes, lost owner
 * locks (with a standby taking over), wall-clock steps, operator re-sends,
 * restarts; then the drain. Every draw comes from the world's rng, in step
 * order.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"
#include "sim/sim_int.h"

#define MS  TG_NS_PER_MS
#define SEC TG_NS_PER_S

/* ---- the configuration a seed draws ----------------------------------------------- */

void sim_draw_config(struct sim_world *w)
{
        static const double rates[] = {0.5, 1, 2, 5, 5, 10, 20, 50};
        static const unsigned caps[] = {1, 2, 3, 5, 10};
        static const int64_t timeouts[] = {100, 250, 500, 1000, 3000};
        static const int64_t margins_us[] = {0, 200, 1000};
        static const int64_t deadlines_s[] = {3, 5, 10, 20, 30};
        static const unsigned attempts[] = {1, 2, 3, 3, 3, 5};
        static const unsigned queries[] = {1, 2, 5, 10};
        static const int64_t intervals[] = {50, 200, 1000, 2000};
        static const int64_t bases[] = {100, 500, 2000};
        static const int64_t caps_ra[] = {5000, 60000, 3600000};
        struct tg_config *c = &w->cfg;
        struct sim_config *s = &w->sc;

        config_defaults(c);
        c->exit.starts_per_second = SIM_PICK(w, rates);
        c->exit.max_in_flight = SIM_PICK(w, caps);
        c->exit.spacing_margin_ns = SIM_PICK(w, margins_us) * TG_NS_PER_US;
        c->provider_timeout_ms = SIM_PICK(w, timeouts);
        c->provider_connect_timeout_ms = c->provider_timeout_ms;
        c->policy.deadline_ms = SIM_PICK(w, deadlines_s) * 1000;
        c->policy.max_attempts = SIM_PICK(w, attempts);
        c->policy.max_queries = SIM_PICK(w, queries);
        c->policy.query_interval_ms = SIM_PICK(w, intervals);
        c->policy.backoff.base_ms = SIM_PICK(w, bases);
        c->policy.backoff.min_ms = c->policy.backoff.base_ms / 2;
        c->policy.backoff.cap_ms = c->policy.backoff.base_ms * 8;
        /* the key's retention beyond the deadline, as 23 h is beyond 15 min */
        c->policy.key_retention_ms = c->policy.deadline_ms * tg_rng_range(&w->rng, 1, 4);
        c->retry_after_cap_ms = SIM_PICK(w, caps_ra);
        c->exit_timeout_run_hold = (unsigned)tg_rng_range(&w->rng, 2, 5);
        c->exit_timeout_hold_ms = tg_rng_range(&w->rng, 100, 2000);
        c->exit_default_hold_ms = sim_chance(w, 30) ? 0 : tg_rng_range(&w->rng, 100, 2000);
        c->provider_unreachable_run_hold = (unsigned)tg_rng_range(&w->rng, 1, 4);
        c->provider_unreachable_hold_ms = tg_rng_range(&w->rng, 100, 1000);
        c->provider_unreachable_hold_max_ms = c->provider_unreachable_hold_ms * 8;
        c->exit_idle_poll_max_ms = sim_chance(w, 50) ? 100 : 1000;
        if (sim_chance(w, 25))
                c->exit_query_starts_per_second = c->exit.starts_per_second / 2;

        s->fault_end = tg_rng_range(&w->rng, 10, 60) * SEC;
        s->intake_lo = 50 * MS;
        s->intake_hi = tg_rng_range(&w->rng, 300, 3000) * MS;
        /* bursts that keep the exit from nearly idle to nearly full: a load
         * of 0.1 to 0.9 of its rate on average (faults and holds make that
         * more than it can do at times) */
        double load = (double)tg_rng_range(&w->rng, 1, 9) / 10.0;
        double mean_gap = (double)(s->intake_lo + s->intake_hi) / 2e9;
        double burst = 2.0 * load * c->exit.starts_per_second * mean_gap - 1.0;
        s->burst_max = burst < 1 ? 1 : burst > 20 ? 20 : (unsigned)burst;
        s->crash_every = sim_chance(w, 80) ? tg_rng_range(&w->rng, 1, 10) * SEC : 0;
        s->fault_every = sim_chance(w, 70) ? tg_rng_range(&w->rng, 1, 8) * SEC : 0;
        s->lock_every = sim_chance(w, 40) ? tg_rng_range(&w->rng, 3, 15) * SEC : 0;
        s->jump_every = sim_chance(w, 50) ? tg_rng_range(&w->rng, 2, 10) * SEC : 0;
        s->resend_every = sim_chance(w, 60) ? tg_rng_range(&w->rng, 500, 3000) * MS : 0;
        /* the provider forgets a key a margin after our retention (24 h
         * after 23 h), and the wall clock never steps back by more than
         * half that margin (docs/reliability.md: what is assumed) */
        tg_mono_ns margin = c->policy.key_retention_ms * MS / 20;
        if (margin < 1 * SEC)
                margin = 1 * SEC;
        s->key_ttl = c->policy.key_retention_ms * MS + margin;
        s->jump_back_max = margin / 2;
        s->doorbell = sim_chance(w, 50);
}

void sim_trace_config(const struct sim_world *w)
{
        const struct tg_config *c = &w->cfg;

        sim_trace(w,
                  "config: rate %g/s cap %u margin %lld us timeout %lld ms deadline %lld ms "
                  "attempts %u queries %u every %lld ms retention %lld ms ttl %lld ms "
                  "retry_after_cap %lld ms doorbell %d query_rate %g",
                  c->exit.starts_per_second, c->exit.max_in_flight,
                  (long long)(c->exit.spacing_margin_ns / 1000), (long long)c->provider_timeout_ms,
                  (long long)c->policy.deadline_ms, c->policy.max_attempts, c->policy.max_queries,
                  (long long)c->policy.query_interval_ms, (long long)c->policy.key_retention_ms,
                  (long long)(w->sc.key_ttl / MS), (long long)c->retry_after_cap_ms, w->sc.doorbell,
                  c->exit_query_starts_per_second);
        sim_trace(w,
                  "faults: until %lld s, crash every %lld s, store every %lld s, lock every "
                  "%lld s, wall steps every %lld s, resends every %lld s",
                  (long long)(w->sc.fault_end / SEC), (long long)(w->sc.crash_every / SEC),
                  (long long)(w->sc.fault_every / SEC), (long long)(w->sc.lock_every / SEC),
                  (long long)(w->sc.jump_every / SEC), (long long)(w->sc.resend_every / SEC));
}

/* ---- the timeline ------------------------------------------------------------------ */

static struct sim_proc *pick_live(struct sim_world *w)
{
        unsigned n = sim_live_procs(w), k;

        if (n == 0)
                return NULL;
        k = (unsigned)tg_rng_range(&w->rng, 0, n - 1);
        for (unsigned i = 0; i < w->nprocs; i++)
                if (w->procs[i]->state != PROC_DEAD && k-- == 0)
                        return w->procs[i];
        return NULL;
}

static void ring_all(struct sim_world *w)
{
        for (unsigned i = 0; i < w->nprocs; i++)
                if (w->procs[i]->state != PROC_DEAD)
                        sim_env_ring(w->procs[i]->env);
}

/* The caller submits op (again): through a live process's API, if any. */
static void submit(struct sim_world *w, struct sim_op *op)
{
        struct sim_proc *p = pick_live(w);
        struct op_record rec;
        bool created = false;
        int r = TG_EIO;

        op->submitted = true;
        sim_provider_expect(w->provider, op->req.operation_id);
        if (p)
                r = store_accept(p->store, &op->req, sim_clock_wall(&w->clock), &w->cfg.policy,
                                 &created, &rec);
        if (r == 0) {
                op->accepted = true;
                op->retry_at = TG_MONO_NEVER;
                ring_all(w);
        } else {
                /* no answer (or an error): the caller tries again */
                op->retry_at = w->clock.mono + sim_draw(w, 100 * MS, 2 * SEC);
        }
        sim_trace(w, "intake %s (%lld) via p%u: %s%s", op->req.operation_id,
                  (long long)op->req.amount, p ? p->id : 0, r == 0 ? "accepted" : tg_strerror(r),
                  r == 0 && !created ? " (again)" : "");
}

static void intake(struct sim_world *w)
{
        unsigned n = (unsigned)tg_rng_range(&w->rng, 1, w->sc.burst_max);

        for (unsigned i = 0; i < n && w->nops < SIM_OPS_MAX; i++) {
                struct sim_op *op = &w->ops[w->nops];
                memset(op, 0, sizeof(*op));
                snprintf(op->req.operation_id, sizeof(op->req.operation_id), "op-%u", w->nops);
                snprintf(op->req.payment_id, sizeof(op->req.payment_id), "pay-%u", w->nops);
                /* now and then one the provider refuses for good */
                op->req.amount = sim_chance(w, 5) ? SIM_INVALID_AMOUNT * tg_rng_range(&w->rng, 1, 9)
                                                  : tg_rng_range(&w->rng, 1, 100000);
                if (op->req.amount % SIM_INVALID_AMOUNT == 0 && op->req.amount > 1000)
                        op->req.amount++;
                memcpy(op->req.currency, "TWD", 4);
                op->overdue_at = TG_MONO_NEVER;
                op->retry_at = TG_MONO_NEVER;
                w->nops++;
                w->res->ops++;
                submit(w, op);
        }
}

static void client_retries(struct sim_world *w)
{
        for (unsigned i = 0; i < w->nops; i++)
                if (!w->ops[i].accepted && w->ops[i].retry_at <= w->clock.mono)
                        submit(w, &w->ops[i]);
}

static void crash(struct sim_world *w)
{
        struct sim_proc *p = pick_live(w);

        if (!p)
                return;
        w->res->crashes++;
        if (sim_chance(w, 35)) {
                sim_proc_kill(p, "crash between turns");
                return;
        }
        /* somewhere inside what it does next */
        p->crash_in = (unsigned)tg_rng_range(&w->rng, 1, 40);
        sim_trace(w, "p%u will crash at its %u-th boundary", p->id, p->crash_in);
}

static void store_episode(struct sim_world *w)
{
        struct sim_proc *p = sim_chance(w, 30) ? pick_live(w) : NULL;

        w->fault_until = w->clock.mono + sim_draw(w, 10 * MS, 2 * SEC);
        w->fault_pct = (unsigned)tg_rng_range(&w->rng, 10, 100);
        w->fault_proc = p ? p->id : 0;
        /* now and then the store is slow rather than failing */
        w->slow_max = sim_chance(w, 25) ? sim_draw(w, 100 * MS, 1500 * MS) : 0;
        /* a transaction stalled at its end finishes up to slow_max later */
        if (w->disrupted_until < w->fault_until + w->slow_max)
                w->disrupted_until = w->fault_until + w->slow_max;
        sim_trace(w, "store %s for %lld ms at %u%% (%s)", w->slow_max ? "stalls" : "faults",
                  (long long)((w->fault_until - w->clock.mono) / MS), w->fault_pct,
                  p ? "one connection" : "every connection");
}

static void lose_lock(struct sim_world *w)
{
        struct sim_proc *p = NULL;

        for (unsigned i = 0; i < w->nprocs && !p; i++)
                if (w->procs[i]->state == PROC_RUNNING)
                        p = w->procs[i];
        if (!p)
                return;
        w->res->lock_losses++;
        sim_trace(w, "p%u loses its owner lock (its session is gone)", p->id);
        store_faults_drop_locks(p->store);
        if (w->disrupted_until < w->clock.mono)
                w->disrupted_until = w->clock.mono;
        /* a standby was waiting: it takes the exit now */
        if (sim_chance(w, 60) && sim_live_procs(w) < 2)
                (void)sim_proc_start(w);
}

static void wall_jump(struct sim_world *w)
{
        tg_mono_ns j;

        if (sim_chance(w, 50))
                j = -sim_draw(w, 1 * MS, w->sc.jump_back_max);
        else if (sim_chance(w, 80))
                j = sim_draw(w, 1 * MS, 2 * SEC);
        else
                j = sim_draw(w, 2 * SEC, 10 * 60 * SEC);
        w->clock.wall_step_ns += j;
        w->res->wall_jumps++;
        sim_trace(w, "the wall clock steps %+lld ms", (long long)(j / MS));
}

struct manual_pick {
        char ids[32][TG_OP_ID_MAX + 1];
        unsigned n;
};

static int see_manual(const struct op_record *op, void *userdata)
{
        struct manual_pick *m = userdata;

        if (m->n < 32)
                snprintf(m->ids[m->n++], sizeof(m->ids[0]), "%s", op->req.operation_id);
        return 0;
}

static void resend(struct sim_world *w)
{
        struct manual_pick m = {.n = 0};
        struct sim_proc *p = pick_live(w);
        struct op_record before, after, rec;
        struct sim_op *op;
        int r;

        if (!p || store_list_manual(w->view, 0, MANUAL_NONE, 32, see_manual, &m) < 0 || m.n == 0)
                return;
        const char *id = m.ids[tg_rng_range(&w->rng, 0, m.n - 1)];
        op = sim_op_of(w, id);
        if (!op || store_get(w->view, id, &before) < 0)
                return;
        r = store_operator_resend(p->store, id, "sim", "resend", &w->cfg.policy,
                                  sim_clock_wall(&w->clock), &rec);
        /* whether it took, from the store itself: its answer may be lost */
        if (store_get(w->view, id, &after) == 0 && before.state == OP_MANUAL &&
            after.state == OP_RETRY_WAIT && after.operator_resend) {
                op->resends++;
                op->resend_pending = true;
                op->must_query = false; /* a person decided to send it again */
                w->res->resends++;
                ring_all(w);
        }
        sim_trace(w, "operator re-sends %s via p%u: %s", id, p->id, r == 0 ? "ok" : tg_strerror(r));
}

/* The next moment of the timeline. */
tg_mono_ns sim_timeline_next(const struct sim_world *w)
{
        tg_mono_ns t = w->restart_at;
        const tg_mono_ns ev[] = {w->next_intake, w->next_crash,  w->next_fault, w->next_lock,
                                 w->next_jump,   w->next_resend, w->next_view};

        for (unsigned i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
                if (ev[i] < t)
                        t = ev[i];
        for (unsigned i = 0; i < w->nops; i++)
                if (!w->ops[i].accepted && w->ops[i].retry_at < t)
                        t = w->ops[i].retry_at;
        return t;
}

void sim_timeline(struct sim_world *w)
{
        tg_mono_ns now = w->clock.mono;

        if (w->restart_at <= now) {
                w->restart_at = TG_MONO_NEVER;
                if (sim_live_procs(w) == 0 && sim_proc_start(w) < 0)
                        sim_fail(w, "setup", "cannot start a process");
        }
        client_retries(w);
        if (w->next_intake <= now) {
                intake(w);
                w->next_intake = now + sim_draw(w, w->sc.intake_lo, w->sc.intake_hi);
        }
        if (w->next_crash <= now) {
                crash(w);
                w->next_crash = sim_every(w, w->sc.crash_every);
        }
        if (w->next_fault <= now) {
                store_episode(w);
                w->next_fault = sim_every(w, w->sc.fault_every);
        }
        if (w->next_lock <= now) {
                lose_lock(w);
                w->next_lock = sim_every(w, w->sc.lock_every);
        }
        if (w->next_jump <= now) {
                wall_jump(w);
                w->next_jump = sim_every(w, w->sc.jump_every);
        }
        if (w->next_resend <= now) {
                resend(w);
                w->next_resend = sim_every(w, w->sc.resend_every);
        }
}

/* No more faults: a calm provider, and a process to finish the work. */
void sim_drain(struct sim_world *w)
{
        w->draining = true;
        w->next_intake = w->next_crash = w->next_fault = TG_MONO_NEVER;
        w->next_lock = w->next_jump = w->next_resend = TG_MONO_NEVER;
        w->fault_until = 0;
        for (unsigned i = 0; i < w->nprocs; i++)
                w->procs[i]->crash_in = 0;
        sim_provider_calm(w->provider, w->clock.mono);
        sim_trace(w, "drain: no more faults, a calm provider");
}
