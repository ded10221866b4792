/*
 * dispatcher — the exit's loop. See dispatcher.h for the contract.
 *
 * One turn of the loop reads the clock once, settles every finished call,
 * sweeps deadlines now and then, starts at most one call (the pacer allows no
 * more than one per slot), and then waits in the transport for I/O until the
 * next thing that can happen: the next slot, the next store check, or a reply.
 *
 * Order of a start (invariants 1-3):
 *   pacer_may_start(now)  -- slot has come AND in-flight < cap
 *   store_claim()         -- short txn: in_flight, attempt counted, call row
 *                            "sent, outcome unknown"; COMMIT (record before send)
 *   env->start()          -- handed to the transport at once, no queue between
 *   pacer_start(handoff)  -- the next slot counts from this actual start
 * Nothing waits between these steps, and no transaction is open while the
 * loop waits for a slot or a reply. The hand-off time is measured by the
 * environment at the transport boundary: the claim's commit takes time, and
 * a slot counted from the turn's clock would start the next call early.
 */
#include "daemon/dispatcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/classify.h"
#include "core/holds.h"
#include "core/policy.h"
#include "core/retry_after.h"
#include "core/rng.h"
#include "core/tg_error.h"
#include "daemon/exit_call.h"
#include "daemon/exit_stats.h"
#include "daemon/failpoint.h"
#include "daemon/log.h"
#include "daemon/ownership.h"
#include "store/store.h"

#define IDLE_RECHECK_NS (50 * TG_NS_PER_MS)   /* look for new work this often when idle */
#define SWEEP_EVERY_NS  (1000 * TG_NS_PER_MS) /* deadline sweep and owner check */
#define SETTLE_RETRY_NS (200 * TG_NS_PER_MS)  /* a store that failed a settle is asked again */
#define STORE_DOWN_NS   (10 * TG_NS_PER_MS)   /* a transport failure: pause before the next turn */

struct open_call {
        bool used;
        uint64_t cookie;
        struct op_record op; /* as claimed */
        struct call_record call;
        enum classify_request request;
        bool probe;
        struct exit_handoff handoff;
};

struct dispatcher {
        const struct tg_config *cfg;
        const struct dispatcher_options *opt;
        const struct exit_env *env;
        struct store *store; /* the env's */
        struct pacer *pacer;
        struct pacer *query_pacer; /* sub-quota for queries inside the account's; NULL: none */
        struct classifier *classifier;
        struct tg_rng rng;
        /* Our share of the account quota (store.h, "shares"): exit.shares
         * dispatchers each pace to starts_per_second / shares with
         * max_in_flight / shares open, so together they never exceed the
         * account. With one share this is the whole account, as before. */
        struct pacer_config share_cfg;
        struct ownership own; /* share and epoch held */
        struct holds_config holds_cfg;
        struct holds_state holds;
        struct open_call *calls;
        unsigned ncalls;
        uint64_t next_cookie;
        enum store_group turn;
        tg_mono_ns idle_until;
        tg_mono_ns next_sweep;
        uint64_t seq;
        bool lost; /* fenced or lock lost: stop starting */
        /* Outcomes the store could not take yet (down, restarting, busy past
         * its timeout). While any is here the exit starts nothing; they are
         * retried until the store takes them. Bounded: at most one per open
         * call, and no call starts while one waits. */
        struct settle_args *unsettled;
        unsigned n_unsettled;
        uint64_t claim_failures; /* in a row */
        tg_mono_ns next_settle_retry;
        const char *failpoint;
        struct exit_stats *xstats; /* operators' figures (exit_stats.h); hooks marked "stats:" */
};

static bool stopping(const struct dispatcher *d)
{
        return *d->opt->stop != 0;
}

static json_t *op_fields(const struct op_record *op, const struct call_record *call)
{
        json_t *f = json_object();
        json_object_set_new(f, "operation_id", json_string(op->req.operation_id));
        if (call) {
                json_object_set_new(f, "request_id", json_string(call->request_id));
                json_object_set_new(f, "kind", json_string(tg_call_kind_name(call->kind)));
                json_object_set_new(f, "attempt", json_integer(call->attempt));
                json_object_set_new(f, "call_id", json_integer(call->id));
        }
        return f;
}

static struct open_call *find_call(struct dispatcher *d, uint64_t cookie)
{
        for (unsigned i = 0; i < d->ncalls; i++)
                if (d->calls[i].used && d->calls[i].cookie == cookie)
                        return &d->calls[i];
        return NULL;
}

static struct open_call *free_slot(struct dispatcher *d)
{
        for (unsigned i = 0; i < d->ncalls; i++)
                if (!d->calls[i].used)
                        return &d->calls[i];
        return NULL;
}

/* ---- what a call says about the account ------------------------------------- */

static void apply_holds(struct dispatcher *d, const struct open_call *oc,
                        const struct transport_result *res, int64_t retry_after_ms, tg_mono_ns now)
{
        struct holds_call hc = {.transport = res->reply.transport,
                                .http_status = res->reply.http_status,
                                .retry_after_ms = retry_after_ms,
                                .probe = oc->probe};
        struct holds_decision h;
        json_t *f;

        holds_after_call(&d->holds_cfg, &d->holds, &hc, &h);
        if (h.why == HOLDS_LIMITED) {
                pacer_hold(d->pacer, now + h.hold_ms * TG_NS_PER_MS);
                f = op_fields(&oc->op, &oc->call);
                json_object_set_new(f, "http_status", json_integer(hc.http_status));
                json_object_set_new(f, "hold_ms", json_integer(h.hold_ms));
                log_emit(LOG_WARN, "exit_hold", f);
        } else if (h.why == HOLDS_TIMEOUTS) {
                pacer_hold(d->pacer, now + h.hold_ms * TG_NS_PER_MS);
                log_emit(LOG_WARN, "exit_hold_timeouts",
                         json_pack("{s:i, s:I}", "timeouts_in_row", (int)h.timeouts_in_row,
                                   "hold_ms", (json_int_t)h.hold_ms));
        } else if (h.why == HOLDS_UNREACHABLE) {
                /* The provider cannot be reached (refused, DNS, TLS): the
                 * cause is in the line, so a misconfiguration reads at once. */
                pacer_hold(d->pacer, now + h.hold_ms * TG_NS_PER_MS);
                log_emit(LOG_WARN, "exit_hold_unreachable",
                         json_pack("{s:i, s:I, s:s, s:s, s:b}", "calls_in_row",
                                   (int)h.unreachable_in_row, "hold_ms", (json_int_t)h.hold_ms,
                                   "cause", transport_failure_name(res->failure), "error",
                                   res->error, "probe", oc->probe));
        }
        if (h.probe_done)
                pacer_probe_done(d->pacer, h.probe_healthy);
        if (h.why != HOLDS_NONE)
                exit_stats_held(d->xstats); /* stats: a provider-wide hold */
}

/* ---- settling ------------------------------------------------------------------ */

static void settle_call(struct dispatcher *d, struct open_call *oc,
                        const struct transport_result *res, tg_mono_ns now, tg_wall_ms wall)
{
        enum tg_class cls = classify(d->classifier, oc->request, &res->reply);
        struct policy_decision decision;
        struct settle_args sa;
        int64_t ra = -1, v;
        int r;

        failpoint_hit(d->failpoint, "crash_before_settle", &oc->op);
        if (res->retry_after[0] &&
            retry_after_parse(res->retry_after, strlen(res->retry_after), wall,
                              d->cfg->retry_after_cap_ms, transport_http_date, &v) == 0)
                ra = v;
        struct policy_event ev = {
            .request = oc->request, .cls = cls, .retry_after_ms = ra, .now = wall};
        policy_call_outcome(&d->cfg->policy, &oc->op, &ev, &d->rng, &decision);
        struct exit_call_end end = {.op = &oc->op,
                                    .call = &oc->call,
                                    .epoch = d->own.epoch,
                                    .result = res,
                                    .cls = cls,
                                    .decision = &decision,
                                    .end_mono = now,
                                    .end_wall = wall,
                                    .handoff_mono = oc->handoff.mono,
                                    .handoff_wall = oc->handoff.wall};
        exit_call_settle_args(&end, &sa);

        /* Commit the outcome. A store that cannot take it now keeps the
         * outcome here and pauses the exit until it can (retry_unsettled);
         * if this process dies meanwhile, the row is still in_flight and the
         * next owner reconciles it as unknown: never guessed. */
        r = store_settle(d->store, &sa);
        if (r < 0 && r != TG_EFENCED && d->n_unsettled < d->ncalls) {
                if (d->n_unsettled == 0)
                        log_emit(LOG_ERROR, "exit_paused_store",
                                 json_pack("{s:s}", "error", tg_strerror(r)));
                d->unsettled[d->n_unsettled++] = sa;
                d->next_settle_retry = now + SETTLE_RETRY_NS;
        }
        json_t *f = op_fields(&oc->op, &oc->call);
        json_object_set_new(f, "class", json_string(tg_class_name(cls)));
        json_object_set_new(f, "http_status", json_integer(res->reply.http_status));
        json_object_set_new(f, "latency_ms", json_integer(res->latency_us / 1000));
        json_object_set_new(f, "next_state", json_string(op_state_name(decision.next)));
        if (decision.next == OP_MANUAL)
                json_object_set_new(f, "reason", json_string(manual_reason_name(decision.reason)));
        if (res->error[0])
                json_object_set_new(f, "error", json_string(res->error));
        if (res->failure != TRANSPORT_OK)
                json_object_set_new(f, "cause", json_string(transport_failure_name(res->failure)));
        if (res->reply.transport == TG_TR_NOT_SENT && res->failure != TRANSPORT_OTHER)
                /* Nothing reached the provider, and why, in a line of its own. */
                log_emit(LOG_WARN, "provider_unreachable",
                         json_pack("{s:s, s:s, s:s}", "operation_id", oc->op.req.operation_id,
                                   "cause", transport_failure_name(res->failure), "error",
                                   res->error));
        if (r == TG_EFENCED) {
                d->lost = true;
                log_emit(LOG_ERROR, "settle_fenced", f);
        } else if (r < 0) {
                json_object_set_new(f, "store_error", json_string(tg_strerror(r)));
                log_emit(LOG_ERROR, "settle_failed", f);
        } else {
                log_emit(LOG_INFO, "call_end", f);
        }
        /* stats: class, latency, and where the operation went */
        exit_stats_ended(d->xstats, cls, res->latency_us, r == 0 ? decision.next : OP_IN_FLIGHT,
                         oc->op.attempts);
        pacer_finish(d->pacer);
        if (d->query_pacer && oc->request == CLASSIFY_QUERY)
                pacer_finish(d->query_pacer);
        apply_holds(d, oc, res, ra, now);
        oc->used = false;
}

/* Asks the store again for outcomes it could not take. */
static void retry_unsettled(struct dispatcher *d, tg_mono_ns now)
{
        unsigned kept = 0;

        if (d->n_unsettled == 0 || now < d->next_settle_retry)
                return;
        for (unsigned i = 0; i < d->n_unsettled; i++) {
                int r = store_settle(d->store, &d->unsettled[i]);
                if (r == TG_EFENCED) {
                        d->lost = true;
                        log_emit(
                            LOG_ERROR, "settle_fenced",
                            json_pack("{s:I}", "call_id", (json_int_t)d->unsettled[i].call_id));
                } else if (r < 0) {
                        d->unsettled[kept++] = d->unsettled[i];
                }
        }
        d->n_unsettled = kept;
        d->next_settle_retry = now + SETTLE_RETRY_NS;
        if (kept == 0)
                log_emit(LOG_INFO, "exit_resumed_store", NULL);
}

static void settle_finished(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        struct transport_result res;

        while (d->env->next_done(d->env->ctx, &res) == 0) {
                struct open_call *oc = find_call(d, res.cookie);
                if (oc)
                        settle_call(d, oc, &res, now, wall);
        }
}

/* A call the transport could not take: nothing left the machine. */
static void settle_unsent(struct dispatcher *d, struct open_call *oc, int why, tg_mono_ns now,
                          tg_wall_ms wall)
{
        struct transport_result res;

        memset(&res, 0, sizeof(res));
        res.cookie = oc->cookie;
        res.reply.transport = TG_TR_NOT_SENT;
        res.failure = TRANSPORT_OTHER;
        snprintf(res.error, sizeof(res.error), "transport refused the call: %s", tg_strerror(why));
        settle_call(d, oc, &res, now, wall);
}

/* ---- starting --------------------------------------------------------------------- */

/* Claims the next operation, the groups taking turns (an empty group yields
 * its turn). 0 with *oc filled, or the claim's failure (TG_ENOTFOUND: no
 * work). */
static int claim_next(struct dispatcher *d, struct open_call *oc, tg_mono_ns now, tg_wall_ms wall)
{
        enum store_group order[2] = {d->turn, d->turn == STORE_GROUP_FIRST ? STORE_GROUP_AGAIN
                                                                           : STORE_GROUP_FIRST};
        struct claim_args a;
        int r = TG_ENOTFOUND;

        memset(&a, 0, sizeof(a));
        a.epoch = d->own.epoch;
        a.now = wall;
        a.start_mono = now;
        a.in_flight_at_start = pacer_in_flight(d->pacer) + 1;
        a.key_retention_ms = d->cfg->policy.key_retention_ms;
        /* Queries have a sub-quota that narrows the account's, never adds to
         * it: when it is spent, the again group may only yield a re-send. */
        a.no_queries = d->query_pacer && !pacer_may_start(d->query_pacer, now);
        exit_call_request_id(a.request_id, sizeof(a.request_id), d->own.epoch, ++d->seq,
                             (uint32_t)tg_rng_next(&d->rng));
        for (int i = 0; i < 2 && r == TG_ENOTFOUND; i++) {
                a.group = order[i];
                r = store_claim(d->store, &a, &oc->op, &oc->call);
                if (r == 0)
                        /* after a claim the other group goes next */
                        d->turn =
                            order[i] == STORE_GROUP_FIRST ? STORE_GROUP_AGAIN : STORE_GROUP_FIRST;
        }
        return r;
}

/* A claim that found nothing, or failed: say so (once in a while when the
 * store is down) and look again a little later. */
static void claim_missed(struct dispatcher *d, int r, tg_mono_ns now)
{
        d->idle_until = now + IDLE_RECHECK_NS;
        if (r == TG_ENOTFOUND)
                return;
        if (r == TG_EFENCED) {
                d->lost = true;
                log_emit(LOG_ERROR, "claim_fenced",
                         json_pack("{s:I}", "epoch", (json_int_t)d->own.epoch));
                return;
        }
        /* Said once, then every few seconds while the store stays down: the
         * loop asks again every IDLE_RECHECK_NS. */
        if (d->claim_failures++ % 100 == 0)
                log_emit(LOG_WARN, "claim_failed",
                         json_pack("{s:s, s:I}", "error", tg_strerror(r), "failures",
                                   (json_int_t)d->claim_failures));
}

static void try_start(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        struct open_call *oc;
        bool probe = false;
        int r;

        if (d->lost || stopping(d) || d->n_unsettled > 0 || now < d->idle_until ||
            !pacer_may_start(d->pacer, now))
                return;
        oc = free_slot(d);
        if (!oc)
                return; /* cannot happen: slots == max_in_flight */
        r = claim_next(d, oc, now, wall);
        if (r < 0) {
                claim_missed(d, r, now);
                return;
        }
        d->claim_failures = 0;

        /* The attempt is committed: record before send. */
        failpoint_hit(d->failpoint, "crash_after_claim", &oc->op);

        oc->used = true;
        oc->cookie = ++d->next_cookie;
        oc->request = oc->call.kind == TG_KIND_QUERY ? CLASSIFY_QUERY : CLASSIFY_POST;
        /* The transport makes the path and body from the operation's fields
         * (the provider mapping). */
        struct transport_call tc = {
            .request = oc->request,
            .operation_id = oc->op.req.operation_id,
            .refund = &oc->op.req,
            .refund_id = oc->op.refund_id,
            .request_id = oc->call.request_id,
            .attempt = oc->call.attempt,
            .timeout_ms = exit_call_timeout_ms(d->cfg->provider_timeout_ms, &oc->op, wall),
            .cookie = oc->cookie,
        };
        /* stats: ready = the later of the slot and the last empty claim */
        tg_mono_ns slot = pacer_next_slot(d->pacer), empty = d->idle_until - IDLE_RECHECK_NS;
        r = d->env->start(d->env->ctx, &tc, &oc->handoff);
        exit_stats_started(d->xstats, oc->call.kind, slot > empty ? slot : empty, oc->handoff.mono);
        if (d->query_pacer && oc->request == CLASSIFY_QUERY)
                pacer_start(d->query_pacer, oc->handoff.mono, NULL);
        /* may_start held at `now` and nothing in between can close the slot:
         * the slot only moves at a start, and starts happen only here. */
        if (pacer_start(d->pacer, oc->handoff.mono, &probe) < 0) {
                /* A programmer error, not a condition to work around: stop.
                 * The claim is committed, so the next owner reconciles the
                 * operation as unknown. */
                log_emit(LOG_ERROR, "pacer_refused_after_claim", op_fields(&oc->op, &oc->call));
                abort();
        }
        oc->probe = probe;
        json_t *f = op_fields(&oc->op, &oc->call);
        json_object_set_new(f, "in_flight", json_integer(pacer_in_flight(d->pacer)));
        json_object_set_new(f, "timeout_ms", json_integer(tc.timeout_ms));
        if (probe)
                json_object_set_new(f, "probe", json_true());
        if (r < 0) {
                log_emit(LOG_ERROR, "transport_start_failed", f);
                settle_unsent(d, oc, r, now, wall);
                return;
        }
        log_emit(LOG_INFO, "call_start", f);
}

/* ---- housekeeping and waiting ------------------------------------------------------ */

static void housekeeping(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        unsigned n = 0, taken = 0, invalid = 0;

        if (now < d->next_sweep)
                return;
        d->next_sweep = now + SWEEP_EVERY_NS;
        /* stats: one exit sample a second for /metrics, /v1/stats, admission */
        if (exit_stats_flush(d->xstats, d->store, d->own.epoch, d->own.share,
                             pacer_in_flight(d->pacer), pacer_held(d->pacer, now), wall) < 0)
                log_emit(LOG_DEBUG, "sample_failed", NULL);
        if (store_sweep_deadlines(d->store, d->cfg->policy.key_retention_ms, wall, &n) == 0 &&
            n > 0)
                log_emit(LOG_WARN, "deadline_sweep", json_pack("{s:i}", "to_manual", (int)n));
        /* outbox: refunds an application inserted in its own transaction,
         * validated like an API intake (TG_EUNSUPPORTED on SQLite) */
        if (store_outbox_intake(d->store, &d->cfg->policy, wall, &taken, &invalid) == 0 &&
            taken + invalid > 0)
                log_emit(LOG_INFO, "outbox_intake",
                         json_pack("{s:i, s:i}", "taken", (int)taken, "invalid", (int)invalid));
        if (store_owner_check(d->store) < 0 && !d->lost) {
                d->lost = true;
                log_emit(LOG_ERROR, "owner_lost",
                         json_pack("{s:I}", "epoch", (json_int_t)d->own.epoch));
        }
}

/* The next thing that can happen, as a monotonic time: the next slot (when
 * there is room in flight), else a recheck for new work; a reply wakes the
 * wait earlier. */
static tg_mono_ns wake_at(const struct dispatcher *d, tg_mono_ns now)
{
        tg_mono_ns until = now + IDLE_RECHECK_NS;

        if (!d->lost && !stopping(d) && pacer_in_flight(d->pacer) < d->share_cfg.max_in_flight) {
                tg_mono_ns slot = pacer_next_slot(d->pacer);
                if (slot != TG_MONO_NEVER) {
                        tg_mono_ns t = slot > d->idle_until ? slot : d->idle_until;
                        if (t < until)
                                until = t;
                }
        }
        return until;
}

/* ---- the loop ------------------------------------------------------------------------ */

int dispatcher_turn(struct dispatcher *d)
{
        const struct exit_env *env = d->env;
        tg_mono_ns now = env->mono_now(env->ctx);
        tg_wall_ms wall = env->wall_now(env->ctx);

        settle_finished(d, now, wall);
        retry_unsettled(d, now);
        if ((stopping(d) || d->lost) && env->open_calls(env->ctx) == 0) {
                /* Lost the exit but not asked to stop: stand by and take it
                 * again once it is free. */
                if (stopping(d))
                        return 1;
                log_emit(LOG_WARN, "rejoin",
                         json_pack("{s:I, s:i}", "lost_epoch", (json_int_t)d->own.epoch,
                                   "unsettled", (int)d->n_unsettled));
                /* Outcomes the store never took stay in_flight under the lost
                 * epoch: the takeover turns them into unknown, reconciled. The
                 * pacer is kept: the next slot still counts from our last
                 * actual start. */
                d->n_unsettled = 0;
                d->lost = false;
                int r = ownership_rejoin(&d->own);
                if (r != 0) {
                        if (r != 1)
                                d->lost = true; /* could not: the loop ends with 1 */
                        return 1;
                }
                return 0;
        }
        housekeeping(d, now, wall);
        try_start(d, now, wall);
        if (env->poll(env->ctx, wake_at(d, env->mono_now(env->ctx))) < 0)
                env->sleep(env->ctx, STORE_DOWN_NS);
        return 0;
}

bool dispatcher_lost(const struct dispatcher *d)
{
        return d->lost;
}

int dispatcher_open(struct dispatcher *d)
{
        int r = ownership_acquire(&d->own);

        if (r == 0)
                r = ownership_take_over(&d->own);
        if (r < 0)
                log_emit(LOG_ERROR, "dispatcher_failed",
                         json_pack("{s:s}", "error", tg_strerror(r)));
        if (r != 0)
                return r;
        log_emit(LOG_INFO, "exit_open",
                 json_pack("{s:f, s:i, s:I, s:i, s:i}", "starts_per_second",
                           d->share_cfg.starts_per_second, "max_in_flight",
                           (int)d->share_cfg.max_in_flight, "timeout_ms",
                           (json_int_t)d->cfg->provider_timeout_ms, "share", (int)d->own.share,
                           "shares", (int)d->own.split.shares));
        return 0;
}

void dispatcher_share_config(const struct tg_config *cfg, struct pacer_config *ret_share)
{
        unsigned shares = cfg->exit_shares > 0 ? cfg->exit_shares : 1;

        /* config checked shares <= max_in_flight, so each share has at least
         * one call and the shares' caps add up to at most the account's */
        ret_share->starts_per_second = cfg->exit.starts_per_second / shares;
        ret_share->max_in_flight = cfg->exit.max_in_flight / shares;
        if (ret_share->max_in_flight < 1)
                ret_share->max_in_flight = 1;
}

int dispatcher_new(const struct tg_config *cfg, const struct dispatcher_options *opt,
                   const struct exit_env *env, struct dispatcher **ret_dispatcher)
{
        struct dispatcher *d = calloc(1, sizeof(*d));
        unsigned shares = cfg->exit_shares > 0 ? cfg->exit_shares : 1;
        int r;

        if (!d)
                return TG_ENOMEM;
        d->cfg = cfg;
        d->opt = opt;
        d->env = env;
        d->store = env->store;
        d->failpoint = failpoint_armed();
        tg_rng_seed(&d->rng, env->seed);
        d->own = (struct ownership){
            .env = env,
            .split = {.shares = shares,
                      .starts_per_second = cfg->exit.starts_per_second,
                      .max_in_flight = cfg->exit.max_in_flight},
            .provider_timeout_ms = cfg->provider_timeout_ms,
            .policy = &cfg->policy,
            .no_wait = opt->no_wait,
            .stop = opt->stop,
            .standby = opt->standby,
        };
        d->holds_cfg =
            (struct holds_config){.default_hold_ms = cfg->exit_default_hold_ms,
                                  .timeout_run_hold = cfg->exit_timeout_run_hold,
                                  .timeout_hold_ms = cfg->exit_timeout_hold_ms,
                                  .unreachable_run_hold = cfg->provider_unreachable_run_hold,
                                  .unreachable_hold_ms = cfg->provider_unreachable_hold_ms,
                                  .unreachable_hold_max_ms = cfg->provider_unreachable_hold_max_ms};
        /* Every quota below is a share's, the query sub-quota too. An empty
         * pacer: nothing carried over from before, no catch-up. */
        dispatcher_share_config(cfg, &d->share_cfg);
        r = pacer_new(&d->share_cfg, &d->pacer);
        if (r == 0 && cfg->exit_query_starts_per_second > 0) {
                struct pacer_config q = {.starts_per_second =
                                             cfg->exit_query_starts_per_second / shares,
                                         .max_in_flight = d->share_cfg.max_in_flight};
                r = pacer_new(&q, &d->query_pacer);
        }
        if (r == 0)
                r = classifier_new_default(&d->classifier);
        for (unsigned i = 0; r == 0 && i < cfg->rule_count; i++)
                r = classifier_add_rule(d->classifier, &cfg->rules[i]);
        if (r == 0)
                r = exit_stats_new(env->wall_now(env->ctx), &d->xstats);
        d->ncalls = d->share_cfg.max_in_flight;
        if (r == 0) {
                d->calls = calloc(d->ncalls, sizeof(*d->calls));
                d->unsettled = calloc(d->ncalls, sizeof(*d->unsettled));
                if (!d->calls || !d->unsettled)
                        r = TG_ENOMEM;
        }
        if (r < 0) {
                dispatcher_free(d);
                return r;
        }
        *ret_dispatcher = d;
        return 0;
}

void dispatcher_free(struct dispatcher *d)
{
        if (!d)
                return;
        classifier_free(d->classifier);
        pacer_free(d->pacer);
        pacer_free(d->query_pacer);
        exit_stats_free(d->xstats);
        if (d->store)
                store_owner_release(d->store);
        free(d->calls);
        free(d->unsettled);
        free(d);
}

int dispatcher_run(const struct tg_config *config, const struct dispatcher_options *options)
{
        struct pacer_config share;
        struct exit_env *env = NULL;
        struct dispatcher *d = NULL;
        bool lost = false;
        int r;

        dispatcher_share_config(config, &share);
        r = exit_env_real(config, share.max_in_flight, &env);
        if (r == 0)
                r = dispatcher_new(config, options, env, &d);
        if (r < 0) {
                log_emit(LOG_ERROR, "dispatcher_init_failed",
                         json_pack("{s:s}", "error", tg_strerror(r)));
                exit_env_free(env);
                return 1;
        }
        r = dispatcher_open(d);
        if (r == 0) {
                while (dispatcher_turn(d) == 0)
                        ;
                lost = dispatcher_lost(d);
                log_emit(
                    LOG_INFO, "exit_closed",
                    json_pack("{s:b, s:i}", "owner_lost", lost, "unsettled", (int)d->n_unsettled));
        }
        dispatcher_free(d);
        exit_env_free(env);
        if (r == 1)
                return 0; /* stopped while waiting */
        if (r != 0)
                return r == 3 ? 3 : 1;
        return lost ? 1 : 0;
}
