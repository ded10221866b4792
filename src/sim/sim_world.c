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
 * Faults (drawn and played by sim_timeline.c; the store's hooks are here):
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

void sim_trace(const struct sim_world *w, const char *fmt, ...)
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

tg_mono_ns sim_draw(struct sim_world *w, tg_mono_ns lo, tg_mono_ns hi)
{
        return lo >= hi ? lo : tg_rng_range(&w->rng, lo, hi);
}

bool sim_chance(struct sim_world *w, unsigned pct)
{
        return tg_rng_range(&w->rng, 1, 100) <= pct;
}

/* An exponential wait of the given mean (never 0, NEVER for no mean). */
tg_mono_ns sim_every(struct sim_world *w, tg_mono_ns mean)
{
        double u = tg_rng_unit(&w->rng);

        if (mean <= 0)
                return TG_MONO_NEVER;
        return w->clock.mono + 1 + (tg_mono_ns)(-log(1.0 - u) * (double)mean);
}

/* ---- processes -------------------------------------------------------------- */

static struct sim_proc *proc_of_env(struct sim_world *w, const struct sim_env *env)
{
        for (unsigned i = 0; i < w->nprocs; i++)
                if (w->procs[i]->env == env)
                        return w->procs[i];
        return NULL;
}

unsigned sim_live_procs(const struct sim_world *w)
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
void sim_proc_kill(struct sim_proc *p, const char *why)
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
        if (sim_live_procs(w) == 0 && !w->failed && w->restart_at == TG_MONO_NEVER)
                w->restart_at = w->clock.mono + sim_draw(w, 1 * MS, 3 * SEC);
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
                sim_proc_kill(p, where);
}

static enum store_fault hook_before(void *ctx, bool write)
{
        struct sim_proc *p = ctx;
        struct sim_world *w = p->w;

        boundary(p, "before a store transaction");
        if (p->state == PROC_DEAD)
                return STORE_FAULT_IO; /* its connection is gone with it */
        /* a transaction takes a little time (the claim's estimate learns it) */
        w->clock.mono += sim_draw(w, STORE_LATENCY / 4, STORE_LATENCY);
        if (w->fault_until <= w->clock.mono || (w->fault_proc != 0 && w->fault_proc != p->id) ||
            !sim_chance(w, w->fault_pct))
                return STORE_FAULT_NONE;
        if (w->slow_max > 0) {
                /* a stalled disk or server: the transaction runs, late */
                w->clock.mono += sim_draw(w, w->slow_max / 10, w->slow_max);
                return STORE_FAULT_NONE;
        }
        static const enum store_fault kinds[] = {STORE_FAULT_BUSY, STORE_FAULT_IO,
                                                 STORE_FAULT_LOST_COMMIT};
        enum store_fault f = SIM_PICK(w, kinds);
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
                                sim_proc_kill(p, "its open failed");
                        }
                }
        } else if (p->state == PROC_RUNNING) {
                r = dispatcher_turn(p->d);
                if (r != 0 && p->state != PROC_DEAD)
                        sim_proc_kill(p, "its loop ended (the exit lost)");
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

int sim_proc_start(struct sim_world *w)
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

/* ---- the scheduler ------------------------------------------------------------------ */

static tg_mono_ns next_time(const struct sim_world *w)
{
        tg_mono_ns t = sim_timeline_next(w);

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
        sim_timeline(w);
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
        sim_draw_config(w);
        w->interval = (tg_mono_ns)ceil(1e9 / w->cfg.exit.starts_per_second);
        w->last_wire = TG_MONO_NEVER;
        w->restart_at = TG_MONO_NEVER;
        sim_trace_config(w);
        r = world_open(w);
        if (r == 0)
                r = sim_proc_start(w);
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
        w->next_crash = sim_every(w, w->sc.crash_every);
        w->next_fault = sim_every(w, w->sc.fault_every);
        w->next_lock = sim_every(w, w->sc.lock_every);
        w->next_jump = sim_every(w, w->sc.jump_every);
        w->next_resend = sim_every(w, w->sc.resend_every);
        w->next_view = t0 + VIEW_EVERY;

        /* the faulty part, then the drain */
        while (!w->failed && w->step < opt->steps && w->clock.mono < t0 + w->sc.fault_end)
                run_until(w, w->clock.mono + 100 * MS);
        sim_drain(w);
        tg_mono_ns drain_end = w->clock.mono + w->cfg.policy.deadline_ms * MS +
                               4 * w->cfg.provider_timeout_ms * MS + DRAIN_EXTRA;
        while (!w->failed && w->clock.mono < drain_end) {
                if (sim_live_procs(w) == 0 && w->restart_at == TG_MONO_NEVER)
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
