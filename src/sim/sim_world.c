/*
 * sim_world — one run of tollgate-sim. See sim_world.h.
 *
 * The world is a discrete-event simulation on one virtual clock. A step:
 * move the clock to the next thing that can happen (a request reaching the
 * wire, a call ending, a process's wake-up, an event of the timeline), let
 * the provider see what arrived by then (in time order, every process's
 * calls together), play the timeline's events, run one turn of each
 * process that is due, and look at the store now and then. Each process
 * runs on a fiber of its own (sim_fiber.h): when it sleeps (a standby's
 * retry, the takeover wait) it yields, and the world runs the others until
 * its sleep ends. One thing runs at a time, in an order the seed decides.
 *
 * Faults:
 *   - a process crashes between two turns, or at its n-th store transaction
 *     (before it ran, or after it committed) or hand-off: its env forgets its
 *     calls, its store connection fails from then on and it is asked to stop;
 *     once it is off the call stack its dispatcher is freed and its store
 *     closed (locks released), and a new process starts a little later
 *     (acquire, takeover wait, recovery: the real ownership code);
 *   - the store: episodes during which transactions are busy, fail, lose
 *     their COMMIT's answer or stall (store/store_faults.h), for every
 *     connection or one process's; a lost owner lock (the session that held
 *     it is gone), sometimes with a standby process that takes the exit
 *     meanwhile;
 *   - intake bursts (store_accept; an intake whose answer was lost is tried
 *     again by its caller, with the same operation), operator re-sends of
 *     manual operations (store_operator_resend), steps of the wall clock.
 * Then the drain: no more faults, a calm provider, until every accepted
 * operation is final or in manual (or the deadline and its slack passed).
 */
#include "sim/sim_world.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "daemon/log.h"
#include "daemon/ownership.h"
#include "sim/sim_fiber.h"
#include "sim/sim_int.h"

#define MS    TG_NS_PER_MS
#define SEC   TG_NS_PER_S
#define WALL0 1700000000000LL

#define VIEW_EVERY    (1000 * MS) /* the store's view is checked this often */
#define STILL_MAX     100000      /* steps in a row without time passing: a spin */
#define DRAIN_EXTRA   (20 * SEC)  /* beyond the last deadline and its slack */
#define STORE_LATENCY (200 * TG_NS_PER_US)
#define PROC_STACK    (8u << 20) /* a process's stack: the dispatcher's frames are large */

/* ---- output --------------------------------------------------------------- */

void sim_trace(struct sim_world *w, const char *fmt, ...)
{
        char line[768];
        va_list ap;

        if (!w->opt.verbose || !w->opt.out)
                return;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        fprintf(w->opt.out, "[%4lld.%06lld] %s\n", (long long)(w->clock.mono / SEC),
                (long long)((w->clock.mono % SEC) / 1000), line);
}

static void stop_all(struct sim_world *w)
{
        for (unsigned i = 0; i < w->nprocs; i++)
                w->procs[i]->stop = 1;
}

void sim_fail(struct sim_world *w, const char *invariant, const char *fmt, ...)
{
        va_list ap;

        if (w->failed) /* the first one is the one to replay */
                return;
        w->failed = true;
        w->res->failed = true;
        snprintf(w->res->invariant, sizeof(w->res->invariant), "%s", invariant);
        va_start(ap, fmt);
        vsnprintf(w->res->message, sizeof(w->res->message), fmt, ap);
        va_end(ap);
        w->res->step = w->step;
        w->res->at = w->clock.mono;
        sim_trace(w, "FAIL %s: %s", invariant, w->res->message);
        stop_all(w);
}

struct sim_op *sim_op_of(struct sim_world *w, const char *key)
{
        unsigned n = 0;

        if (strncmp(key, "op-", 3) != 0 || !key[3])
                return NULL;
        for (const char *p = key + 3; *p; p++) {
                if (*p < '0' || *p > '9' || n > SIM_OPS_MAX)
                        return NULL;
                n = n * 10 + (unsigned)(*p - '0');
        }
        return n < w->nops ? &w->ops[n] : NULL;
}

static tg_mono_ns draw(struct sim_world *w, tg_mono_ns lo, tg_mono_ns hi)
{
        return lo >= hi ? lo : tg_rng_range(&w->rng, lo, hi);
}

static bool chance(struct sim_world *w, unsigned pct)
{
        return tg_rng_range(&w->rng, 1, 100) <= pct;
}

/* An exponential wait of the given mean (never 0, NEVER for no mean). */
static tg_mono_ns every(struct sim_world *w, tg_mono_ns mean)
{
        double u = tg_rng_unit(&w->rng);

        if (mean <= 0)
                return TG_MONO_NEVER;
        return w->clock.mono + 1 + (tg_mono_ns)(-log(1.0 - u) * (double)mean);
}

/* ---- the configuration a seed draws ----------------------------------------------- */

#define PICK(w, arr)                                                                               \
        (arr)[tg_rng_range(&(w)->rng, 0, (int64_t)(sizeof(arr) / sizeof((arr)[0])) - 1)]

static void draw_config(struct sim_world *w)
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
        c->exit.starts_per_second = PICK(w, rates);
        c->exit.max_in_flight = PICK(w, caps);
        c->exit.spacing_margin_ns = PICK(w, margins_us) * TG_NS_PER_US;
        c->provider_timeout_ms = PICK(w, timeouts);
        c->provider_connect_timeout_ms = c->provider_timeout_ms;
        c->policy.deadline_ms = PICK(w, deadlines_s) * 1000;
        c->policy.max_attempts = PICK(w, attempts);
        c->policy.max_queries = PICK(w, queries);
        c->policy.query_interval_ms = PICK(w, intervals);
        c->policy.backoff.base_ms = PICK(w, bases);
        c->policy.backoff.min_ms = c->policy.backoff.base_ms / 2;
        c->policy.backoff.cap_ms = c->policy.backoff.base_ms * 8;
        /* the key's retention beyond the deadline, as 23 h is beyond 15 min */
        c->policy.key_retention_ms = c->policy.deadline_ms * tg_rng_range(&w->rng, 1, 4);
        c->retry_after_cap_ms = PICK(w, caps_ra);
        c->exit_timeout_run_hold = (unsigned)tg_rng_range(&w->rng, 2, 5);
        c->exit_timeout_hold_ms = tg_rng_range(&w->rng, 100, 2000);
        c->exit_default_hold_ms = chance(w, 30) ? 0 : tg_rng_range(&w->rng, 100, 2000);
        c->provider_unreachable_run_hold = (unsigned)tg_rng_range(&w->rng, 1, 4);
        c->provider_unreachable_hold_ms = tg_rng_range(&w->rng, 100, 1000);
        c->provider_unreachable_hold_max_ms = c->provider_unreachable_hold_ms * 8;
        c->exit_idle_poll_max_ms = chance(w, 50) ? 100 : 1000;
        if (chance(w, 25))
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
        s->crash_every = chance(w, 80) ? tg_rng_range(&w->rng, 1, 10) * SEC : 0;
        s->fault_every = chance(w, 70) ? tg_rng_range(&w->rng, 1, 8) * SEC : 0;
        s->lock_every = chance(w, 40) ? tg_rng_range(&w->rng, 3, 15) * SEC : 0;
        s->jump_every = chance(w, 50) ? tg_rng_range(&w->rng, 2, 10) * SEC : 0;
        s->resend_every = chance(w, 60) ? tg_rng_range(&w->rng, 500, 3000) * MS : 0;
        /* the provider forgets a key a margin after our retention (24 h
         * after 23 h), and the wall clock never steps back by more than
         * half that margin (docs/reliability.md: what is assumed) */
        tg_mono_ns margin = c->policy.key_retention_ms * MS / 20;
        if (margin < 1 * SEC)
                margin = 1 * SEC;
        s->key_ttl = c->policy.key_retention_ms * MS + margin;
        s->jump_back_max = margin / 2;
        s->doorbell = chance(w, 50);
}

static void trace_config(struct sim_world *w)
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

/* ---- processes -------------------------------------------------------------- */

static struct sim_proc *proc_of_env(struct sim_world *w, const struct sim_env *env)
{
        for (unsigned i = 0; i < w->nprocs; i++)
                if (w->procs[i]->env == env)
                        return w->procs[i];
        return NULL;
}

static unsigned live_procs(const struct sim_world *w)
{
        unsigned n = 0;

        for (unsigned i = 0; i < w->nprocs; i++)
                n += w->procs[i]->state != PROC_DEAD;
        return n;
}

/* ---- fibers: one process runs at a time ------------------------------------- */

/* The world runs p until p gives the control back. */
static void resume(struct sim_proc *p)
{
        sim_fiber_resume(p->fiber);
}

/* On p's fiber: back to the world until it resumes p. */
static void yield(struct sim_proc *p)
{
        sim_fiber_yield(p->fiber);
}

/* The process is gone (see the top). Its structures are freed once its
 * fiber is out of its turn (reap). */
static void proc_kill(struct sim_proc *p, const char *why)
{
        struct sim_world *w = p->w;

        if (p->state == PROC_DEAD)
                return;
        /* what went on the wire before this moment is the provider's */
        for (unsigned i = 0; i < w->nprocs; i++)
                while (sim_env_process(w->procs[i]->env, w->clock.mono))
                        ;
        sim_trace(w, "p%u dies (%s)", p->id, why);
        sim_env_kill(p->env);
        p->state = PROC_DEAD;
        p->stop = 1;
        p->crash_in = 0;
        if (w->disrupted_until < w->clock.mono)
                w->disrupted_until = w->clock.mono;
        if (live_procs(w) == 0 && !w->failed && w->restart_at == TG_MONO_NEVER)
                w->restart_at = w->clock.mono + draw(w, 1 * MS, 3 * SEC);
}

static void proc_free(struct sim_proc *p)
{
        if (p->fiber) {
                p->quit = true;
                while (!sim_fiber_done(p->fiber)) /* its loop ends */
                        resume(p);
                sim_fiber_free(p->fiber);
        }
        /* the process's memory goes, its connection closes and the OS
         * releases its locks */
        dispatcher_free(p->d);
        store_close(p->store);
        sim_env_free(p->env);
        free(p);
}

static void reap(struct sim_world *w)
{
        for (unsigned i = 0; i < w->nprocs;) {
                struct sim_proc *p = w->procs[i];
                if (p->state != PROC_DEAD || p->in_turn) {
                        i++;
                        continue;
                }
                proc_free(p);
                w->procs[i] = w->procs[--w->nprocs];
        }
}

/* A crash point: the process dies at this boundary when its count runs out. */
static void boundary(struct sim_proc *p, const char *where)
{
        if (p->crash_in > 0 && --p->crash_in == 0)
                proc_kill(p, where);
}

static enum store_fault hook_before(void *ctx, bool write)
{
        struct sim_proc *p = ctx;
        struct sim_world *w = p->w;

        boundary(p, "before a store transaction");
        if (p->state == PROC_DEAD)
                return STORE_FAULT_IO; /* its connection is gone with it */
        /* a transaction takes a little time (the claim's estimate learns it) */
        w->clock.mono += draw(w, STORE_LATENCY / 4, STORE_LATENCY);
        if (w->fault_until <= w->clock.mono || (w->fault_proc != 0 && w->fault_proc != p->id) ||
            !chance(w, w->fault_pct))
                return STORE_FAULT_NONE;
        if (w->slow_max > 0) {
                /* a stalled disk or server: the transaction runs, late */
                w->clock.mono += draw(w, w->slow_max / 10, w->slow_max);
                return STORE_FAULT_NONE;
        }
        static const enum store_fault kinds[] = {STORE_FAULT_BUSY, STORE_FAULT_IO,
                                                 STORE_FAULT_LOST_COMMIT};
        enum store_fault f = PICK(w, kinds);
        if (f == STORE_FAULT_BUSY) /* the busy timeout went by */
                w->clock.mono += 200 * MS;
        w->res->store_faults++;
        sim_trace(w, "p%u store %s %s", p->id, write ? "write" : "read",
                  f == STORE_FAULT_BUSY ? "busy"
                  : f == STORE_FAULT_IO ? "fails"
                                        : "loses its COMMIT's answer");
        return f;
}

static void hook_after(void *ctx, bool write, bool committed, int result)
{
        struct sim_proc *p = ctx;
        struct sim_world *w = p->w;

        (void)write;
        (void)result;
        if (p->bumping > 0 && committed) {
                sim_trace(w, "p%u holds epoch %lld", p->id, (long long)p->bumping);
                p->took_epoch = true;
                /* the new owner waits (daemon/ownership.h), then recovers */
                tg_mono_ns until = w->clock.mono + w->cfg.provider_timeout_ms * MS + w->interval +
                                   w->cfg.exit.spacing_margin_ns + OWNERSHIP_FRESH_NS;
                if (w->disrupted_until < until)
                        w->disrupted_until = until;
        }
        p->bumping = 0;
        boundary(p, "after a store transaction");
}

static void hook_bumped(void *ctx, int64_t epoch)
{
        ((struct sim_proc *)ctx)->bumping = epoch;
}

/* ---- the provider, seen through the processes ---------------------------------------- */

static void on_handoff(void *ctx, struct sim_env *env, const struct transport_call *call,
                       struct sim_answer *ret)
{
        struct sim_world *w = ctx;
        struct sim_proc *p = proc_of_env(w, env);

        sim_provider_handoff(w->provider, w->clock.mono, call, ret);
        if (!p)
                return;
        sim_check_handoff(w, p, call);
        boundary(p, "at a hand-off");
}

static void on_arrive(void *ctx, struct sim_env *env, const struct transport_call *call,
                      tg_mono_ns handoff, tg_mono_ns wire, struct sim_answer *ret)
{
        struct sim_world *w = ctx;
        struct sim_proc *p = proc_of_env(w, env);
        tg_mono_ns timeout_end = handoff + call->timeout_ms * MS;

        sim_check_arrival(w, p, call, wire);
        sim_provider_arrive(w->provider, call, wire, ret);
        sim_check_executed(w, call->operation_id);
        /* when the call ends at the provider: its answer, or its timeout
         * (a dead process's connection is gone, but the provider cannot
         * tell until then: that is what the takeover wait is for) */
        sim_check_answered(w, call, wire,
                           ret->transport == TG_TR_TIMEOUT_AFTER_SEND ||
                                   ret->latency > timeout_end - wire
                               ? timeout_end
                               : wire + ret->latency);
        if (call->request == CLASSIFY_POST)
                w->res->posts++;
        else
                w->res->queries++;
        w->res->calls++;
        sim_trace(w, "p%u %s %s attempt %u (%s) arrives: %s %d %s%s%s%s", p ? p->id : 0,
                  call->request == CLASSIFY_POST ? "POST" : "query", call->operation_id,
                  call->attempt, call->request_id,
                  ret->transport == TG_TR_COMPLETE             ? "answer"
                  : ret->transport == TG_TR_RESET              ? "reset"
                  : ret->transport == TG_TR_TIMEOUT_AFTER_SEND ? "silence"
                                                               : "?",
                  ret->http_status, ret->status ? ret->status : "",
                  ret->error_code ? ret->error_code : "", ret->retry_after ? " retry-after " : "",
                  ret->retry_after ? ret->retry_after : "");
}

static void on_delivered(void *ctx, struct sim_env *env, const struct transport_call *call,
                         const struct transport_result *res)
{
        struct sim_world *w = ctx;

        (void)env;
        if (res->reply.transport == TG_TR_NOT_SENT)
                w->res->refused++;
        sim_check_delivered(w, res, call->operation_id, call->request);
}

static void proc_sleep(void *ctx, struct sim_env *env, tg_mono_ns ns);

/* One turn of a process, on its fiber: its open first, then
 * dispatcher_turn(). */
static void proc_turn(struct sim_proc *p)
{
        struct sim_world *w = p->w;
        int r;

        if (p->state == PROC_OPENING) {
                r = dispatcher_open(p->d);
                if (p->state != PROC_DEAD) {
                        if (r == 0) {
                                p->state = PROC_RUNNING;
                                sim_trace(w, "p%u owns the exit", p->id);
                                if (w->disrupted_until < w->clock.mono)
                                        w->disrupted_until = w->clock.mono;
                        } else {
                                proc_kill(p, "its open failed");
                        }
                }
        } else if (p->state == PROC_RUNNING) {
                r = dispatcher_turn(p->d);
                if (r != 0 && p->state != PROC_DEAD)
                        proc_kill(p, "its loop ended (the exit lost)");
        }
}

/* A process's fiber: a turn each time the world resumes it (a sleep yields
 * inside a turn), until it is told to quit. */
static void proc_main(void *arg)
{
        struct sim_proc *p = arg;

        while (!p->quit) {
                p->in_turn = true;
                proc_turn(p);
                p->in_turn = false;
                yield(p);
        }
}

static int proc_start(struct sim_world *w)
{
        struct sim_proc *p;
        struct sim_env_provider prov = {
            .handoff = on_handoff, .arrive = on_arrive, .delivered = on_delivered, .ctx = w};
        struct store_fault_hooks hooks;
        int r;

        if (w->nprocs >= SIM_PROCS_MAX)
                return TG_EFULL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return TG_ENOMEM;
        p->w = w;
        p->id = ++w->started;
        p->sleep_until = TG_MONO_NEVER;
        hooks = (struct store_fault_hooks){
            .before = hook_before, .after = hook_after, .epoch_bumped = hook_bumped, .ctx = p};
        r = store_open(w->url, &p->store);
        if (r == 0)
                r = store_faults_wrap(p->store, &hooks);
        if (r == 0)
                r = sim_env_new(&w->clock, &prov, p->store, w->opt.seed * 1000003u + p->id,
                                w->sc.doorbell, &p->env);
        if (r == 0) {
                sim_env_set_sched(p->env, proc_sleep, w);
                p->opt.stop = &p->stop;
                /* as the daemon does */
                store_set_busy_timeout(p->store, 200);
                r = dispatcher_new(&w->cfg, &p->opt, sim_env_exit(p->env), &p->d);
        }
        if (r == 0)
                r = sim_fiber_new(proc_main, p, PROC_STACK, &p->fiber);
        if (r < 0) {
                proc_free(p);
                return r;
        }
        p->state = PROC_OPENING;
        p->wake_at_open = w->clock.mono;
        w->procs[w->nprocs++] = p;
        w->res->restarts += w->started > 1;
        sim_trace(w, "p%u starts", p->id);
        return 0;
}

/* When the world resumes p next (NEVER: not until something changes). */
static tg_mono_ns proc_wake(const struct sim_proc *p)
{
        if (p->state == PROC_DEAD)
                return p->in_turn ? p->w->clock.mono : TG_MONO_NEVER; /* to unwind */
        if (p->in_turn)
                return p->sleep_until;
        if (p->state == PROC_OPENING)
                return p->wake_at_open;
        return sim_env_wake(p->env);
}

/* ---- the timeline ------------------------------------------------------------------ */

static struct sim_proc *pick_live(struct sim_world *w)
{
        unsigned n = live_procs(w), k;

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
                op->retry_at = w->clock.mono + draw(w, 100 * MS, 2 * SEC);
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
                op->req.amount = chance(w, 5) ? SIM_INVALID_AMOUNT * tg_rng_range(&w->rng, 1, 9)
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
        if (chance(w, 35)) {
                proc_kill(p, "crash between turns");
                return;
        }
        /* somewhere inside what it does next */
        p->crash_in = (unsigned)tg_rng_range(&w->rng, 1, 40);
        sim_trace(w, "p%u will crash at its %u-th boundary", p->id, p->crash_in);
}

static void store_episode(struct sim_world *w)
{
        struct sim_proc *p = chance(w, 30) ? pick_live(w) : NULL;

        w->fault_until = w->clock.mono + draw(w, 10 * MS, 2 * SEC);
        w->fault_pct = (unsigned)tg_rng_range(&w->rng, 10, 100);
        w->fault_proc = p ? p->id : 0;
        /* now and then the store is slow rather than failing */
        w->slow_max = chance(w, 25) ? draw(w, 100 * MS, 1500 * MS) : 0;
        if (w->disrupted_until < w->fault_until)
                w->disrupted_until = w->fault_until;
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
        if (chance(w, 60) && live_procs(w) < 2)
                (void)proc_start(w);
}

static void wall_jump(struct sim_world *w)
{
        tg_mono_ns j;

        if (chance(w, 50))
                j = -draw(w, 1 * MS, w->sc.jump_back_max);
        else if (chance(w, 80))
                j = draw(w, 1 * MS, 2 * SEC);
        else
                j = draw(w, 2 * SEC, 10 * 60 * SEC);
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
static tg_mono_ns timeline_next(const struct sim_world *w)
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

static void timeline(struct sim_world *w)
{
        tg_mono_ns now = w->clock.mono;

        if (w->restart_at <= now) {
                w->restart_at = TG_MONO_NEVER;
                if (live_procs(w) == 0 && proc_start(w) < 0)
                        sim_fail(w, "setup", "cannot start a process");
        }
        client_retries(w);
        if (w->next_intake <= now) {
                intake(w);
                w->next_intake = now + draw(w, w->sc.intake_lo, w->sc.intake_hi);
        }
        if (w->next_crash <= now) {
                crash(w);
                w->next_crash = every(w, w->sc.crash_every);
        }
        if (w->next_fault <= now) {
                store_episode(w);
                w->next_fault = every(w, w->sc.fault_every);
        }
        if (w->next_lock <= now) {
                lose_lock(w);
                w->next_lock = every(w, w->sc.lock_every);
        }
        if (w->next_jump <= now) {
                wall_jump(w);
                w->next_jump = every(w, w->sc.jump_every);
        }
        if (w->next_resend <= now) {
                resend(w);
                w->next_resend = every(w, w->sc.resend_every);
        }
}

/* No more faults: a calm provider, and a process to finish the work. */
static void drain(struct sim_world *w)
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

/* ---- the scheduler ------------------------------------------------------------------ */

static tg_mono_ns next_time(const struct sim_world *w)
{
        tg_mono_ns t = timeline_next(w);

        for (unsigned i = 0; i < w->nprocs; i++) {
                const struct sim_proc *p = w->procs[i];
                tg_mono_ns e = sim_env_next_event(p->env);
                if (e < t)
                        t = e;
                e = proc_wake(p);
                if (e < t)
                        t = e;
        }
        return t;
}

/* Every env's events up to now, in time order across envs. */
static void process_events(struct sim_world *w)
{
        for (;;) {
                struct sim_env *first = NULL;
                tg_mono_ns t = TG_MONO_NEVER;
                for (unsigned i = 0; i < w->nprocs; i++) {
                        tg_mono_ns e = sim_env_next_event(w->procs[i]->env);
                        if (e < t) {
                                t = e;
                                first = w->procs[i]->env;
                        }
                }
                if (!first || t > w->clock.mono || !sim_env_process(first, w->clock.mono))
                        return;
        }
}

static void step(struct sim_world *w)
{
        w->step++;
        w->res->steps++;
        process_events(w);
        timeline(w);
        for (unsigned i = 0; i < w->nprocs && !w->failed; i++) {
                struct sim_proc *p = w->procs[i];
                if (proc_wake(p) <= w->clock.mono)
                        resume(p);
        }
        reap(w);
}

/* Runs the world up to `limit`. */
static void run_until(struct sim_world *w, tg_mono_ns limit)
{
        while (!w->failed) {
                tg_mono_ns t = next_time(w);
                if (t > limit) {
                        if (limit > w->clock.mono)
                                w->clock.mono = limit;
                        return;
                }
                if (t > w->clock.mono) {
                        w->clock.mono = t;
                        w->still_steps = 0;
                } else if (++w->still_steps > STILL_MAX) {
                        unsigned who = 0;
                        for (unsigned i = 0; i < w->nprocs; i++)
                                if (proc_wake(w->procs[i]) <= w->clock.mono)
                                        who = w->procs[i]->id;
                        sim_fail(w, "spin",
                                 "%d steps in a row without time passing: p%u is due again and "
                                 "again (its loop spins)",
                                 STILL_MAX, who);
                        return;
                }
                step(w);
                if (w->next_view <= w->clock.mono) {
                        w->next_view = w->clock.mono + VIEW_EVERY;
                        (void)sim_check_view(w);
                }
        }
}

/* On a process's fiber: it waits; the world runs meanwhile. */
static void proc_sleep(void *ctx, struct sim_env *env, tg_mono_ns ns)
{
        struct sim_world *w = ctx;
        struct sim_proc *p = proc_of_env(w, env);

        if (!p || p->state == PROC_DEAD)
                return;
        if (w->failed) {
                w->clock.mono += ns; /* the run is over: let it unwind */
                return;
        }
        p->sleep_until = w->clock.mono + ns;
        yield(p);
        p->sleep_until = TG_MONO_NEVER;
}

/* ---- a run ------------------------------------------------------------------------- */

static int copy_file(const char *from, const char *to)
{
        char buf[65536];
        FILE *in = fopen(from, "rb");
        FILE *out = in ? fopen(to, "wb") : NULL;
        size_t n;
        int r = 0;

        if (!in || !out)
                r = TG_EIO;
        while (r == 0 && (n = fread(buf, 1, sizeof(buf), in)) > 0)
                if (fwrite(buf, 1, n, out) != n)
                        r = TG_EIO;
        if (in && ferror(in))
                r = TG_EIO;
        if (in)
                fclose(in);
        if (out && fclose(out) != 0)
                r = TG_EIO;
        return r;
}

static void remove_store(const char *db)
{
        static const char *const suffixes[] = {"", "-wal", "-shm", ".owner", ".split", "-journal"};
        char path[600];

        for (unsigned i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
                snprintf(path, sizeof(path), "%s%s", db, suffixes[i]);
                (void)unlink(path);
        }
}

int sim_seed_db(const char *path)
{
        char url[600];
        struct store *s = NULL;
        int r;

        remove_store(path);
        snprintf(url, sizeof(url), "sqlite://%s", path);
        r = store_open(url, &s);
        store_close(s);
        return r;
}

static int world_open(struct sim_world *w)
{
        struct sim_provider_config pc;
        struct tg_rng prng;
        int r;

        snprintf(w->db_path, sizeof(w->db_path), "%s/sim-%" PRIu64 ".db", w->opt.dir, w->opt.seed);
        snprintf(w->url, sizeof(w->url), "sqlite://%s", w->db_path);
        remove_store(w->db_path);
        if (w->opt.seed_db && copy_file(w->opt.seed_db, w->db_path) < 0)
                return TG_EIO;
        r = store_open(w->url, &w->view);
        if (r < 0)
                return r;
        memset(&pc, 0, sizeof(pc));
        pc.timeout = w->cfg.provider_timeout_ms * MS;
        pc.key_ttl = w->sc.key_ttl;
        pc.wall0 = WALL0;
        tg_rng_seed(&prng, w->opt.seed ^ 0x9e3779b97f4a7c15ull);
        sim_provider_draw_phases(&pc, &prng, w->sc.fault_end);
        for (unsigned i = 0; i < pc.nphases; i++)
                sim_trace(w, "provider phase %u from %lld ms: %s", i,
                          (long long)(pc.phases[i].from / MS), pc.phases[i].name);
        return sim_provider_new(&pc, w->opt.seed ^ 0x2545f4914f6cdd1dull, &w->provider);
}

static void world_close(struct sim_world *w)
{
        stop_all(w);
        for (unsigned i = 0; i < w->nprocs; i++) {
                struct sim_proc *p = w->procs[i];
                if (p->state != PROC_DEAD) {
                        sim_env_kill(p->env);
                        p->state = PROC_DEAD;
                }
                while (p->in_turn) /* let it unwind */
                        resume(p);
        }
        reap(w);
        store_close(w->view);
        sim_provider_free(w->provider);
        remove_store(w->db_path);
}

int sim_run(const struct sim_options *opt, struct sim_result *ret)
{
        struct sim_world *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return TG_ENOMEM;
        memset(ret, 0, sizeof(*ret));
        w->opt = *opt;
        w->res = ret;
        tg_rng_seed(&w->rng, opt->seed);
        w->clock = (struct sim_clock){.mono = 1 * SEC, .wall0 = WALL0};
        draw_config(w);
        w->interval = (tg_mono_ns)ceil(1e9 / w->cfg.exit.starts_per_second);
        w->last_wire = TG_MONO_NEVER;
        w->restart_at = TG_MONO_NEVER;
        trace_config(w);
        r = world_open(w);
        if (r == 0)
                r = proc_start(w);
        if (r < 0) {
                if (opt->out)
                        fprintf(opt->out, "tollgate-sim: seed %" PRIu64 ": cannot set up: %s\n",
                                opt->seed, tg_strerror(r));
                world_close(w);
                free(w);
                return r;
        }
        tg_mono_ns t0 = w->clock.mono;
        w->next_intake = t0;
        w->next_crash = every(w, w->sc.crash_every);
        w->next_fault = every(w, w->sc.fault_every);
        w->next_lock = every(w, w->sc.lock_every);
        w->next_jump = every(w, w->sc.jump_every);
        w->next_resend = every(w, w->sc.resend_every);
        w->next_view = t0 + VIEW_EVERY;

        /* the faulty part, then the drain */
        while (!w->failed && w->step < opt->steps && w->clock.mono < t0 + w->sc.fault_end)
                run_until(w, w->clock.mono + 100 * MS);
        drain(w);
        tg_mono_ns drain_end = w->clock.mono + w->cfg.policy.deadline_ms * MS +
                               4 * w->cfg.provider_timeout_ms * MS + DRAIN_EXTRA;
        while (!w->failed && w->clock.mono < drain_end) {
                if (live_procs(w) == 0 && w->restart_at == TG_MONO_NEVER)
                        w->restart_at = w->clock.mono;
                run_until(w, w->clock.mono + VIEW_EVERY);
                bool pending = false;
                for (unsigned i = 0; i < w->nops; i++)
                        pending |= !w->ops[i].accepted;
                /* the last look at the store (within VIEW_EVERY) found
                 * nothing open and nothing new can come: a look now says
                 * whether it still is (a caller's retry may have come) */
                if (!w->failed && !pending && w->open_seen == 0 && sim_check_view(w) == 0)
                        break;
        }
        if (!w->failed)
                sim_check_final(w);
        ret->virtual_ns = w->clock.mono - t0;
        world_close(w);
        free(w);
        return 0;
}
