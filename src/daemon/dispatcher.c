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
 *   pacer_start(t)        -- the next slot counts from this actual start
 *   transport_start()     -- handed to libcurl at once, no queue in between
 * Nothing waits between these steps, and no transaction is open while the
 * loop waits for a slot or a reply.
 */
#include "daemon/dispatcher.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/classify.h"
#include "core/pacer.h"
#include "core/policy.h"
#include "core/retry_after.h"
#include "core/rng.h"
#include "core/tg_error.h"
#include "daemon/exit_stats.h"
#include "daemon/log.h"
#include "net/transport.h"
#include "platform/clock.h"
#include "store/store.h"

#define IDLE_RECHECK_NS          (50 * TG_NS_PER_MS)   /* look for new work this often when idle */
#define SWEEP_EVERY_NS           (1000 * TG_NS_PER_MS) /* deadline sweep and owner check */
#define STANDBY_RETRY_NS         (250 * TG_NS_PER_MS)
#define DISPATCH_BUSY_TIMEOUT_MS 200
#define SETTLE_RETRY_NS          (200 * TG_NS_PER_MS) /* a store that failed a settle is asked again */

struct open_call {
        bool used;
        uint64_t cookie;
        struct op_record op; /* as claimed */
        struct call_record call;
        enum classify_request request;
        bool probe;
        tg_mono_ns handoff;
        tg_wall_ms handoff_wall;
};

struct disp {
        const struct tg_config *cfg;
        const struct dispatcher_options *opt;
        struct store *store;
        struct pacer *pacer;
        struct pacer *query_pacer; /* sub-quota for queries inside the account's; NULL: none */
        struct transport *transport;
        struct classifier *classifier;
        struct tg_rng rng;
        /* Our share of the account quota (store.h, "shares"): exit.shares
         * dispatchers each pace to starts_per_second / shares with
         * max_in_flight / shares open, so together they never exceed the
         * account. With one share this is the whole account, as before. */
        struct store_split split;      /* the account's, as configured */
        struct pacer_config share_cfg; /* this dispatcher's part of it */
        unsigned share;
        int64_t epoch;
        struct open_call *calls;
        unsigned ncalls;
        uint64_t next_cookie;
        enum store_group turn;
        unsigned timeouts_in_row;
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

static bool stopping(const struct disp *d)
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

static void sleep_ns(tg_mono_ns ns)
{
        struct timespec ts = {.tv_sec = ns / TG_NS_PER_S, .tv_nsec = ns % TG_NS_PER_S};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
}

/* Sleeps up to ns in small steps; false if a stop was asked for meanwhile. */
static bool wait_unless_stopped(const struct disp *d, tg_mono_ns ns)
{
        tg_mono_ns end = clock_mono_now() + ns;
        for (;;) {
                if (stopping(d))
                        return false;
                tg_mono_ns left = end - clock_mono_now();
                if (left <= 0)
                        return true;
                sleep_ns(left < 100 * TG_NS_PER_MS ? left : 100 * TG_NS_PER_MS);
        }
}

static struct open_call *find_call(struct disp *d, uint64_t cookie)
{
        for (unsigned i = 0; i < d->ncalls; i++)
                if (d->calls[i].used && d->calls[i].cookie == cookie)
                        return &d->calls[i];
        return NULL;
}

static struct open_call *free_slot(struct disp *d)
{
        for (unsigned i = 0; i < d->ncalls; i++)
                if (!d->calls[i].used)
                        return &d->calls[i];
        return NULL;
}

static void failpoint(const struct disp *d, const char *name, const struct op_record *op)
{
        if (!d->failpoint || strcmp(d->failpoint, name) != 0)
                return;
        json_t *f = op_fields(op, NULL);
        json_object_set_new(f, "failpoint", json_string(name));
        log_emit(LOG_WARN, "failpoint_kill", f);
        /* As abrupt as kill -9: no cleanup, no flush of anything but the log. */
        raise(SIGKILL);
}

static void policy_op_from(const struct op_record *op, struct policy_op *ret)
{
        memset(ret, 0, sizeof(*ret));
        ret->state = op->state;
        ret->attempts = op->attempts;
        ret->attempt_limit = op->attempt_limit;
        ret->queries = op->queries;
        ret->query_limit = op->query_limit;
        ret->accepted_at = op->accepted_at;
        ret->deadline_at = op->deadline_at;
        ret->key_first_used = op->key_first_used;
        ret->last_wait_ms = op->last_wait_ms;
}

/* Provider-wide signals: a 429/503 holds every start (Retry-After, else the
 * default hold); a run of timeouts holds for a while too. */
static void provider_signals(struct disp *d, const struct open_call *oc,
                             const struct transport_result *res, int64_t retry_after_ms,
                             tg_mono_ns now)
{
        const struct tg_config *cfg = d->cfg;
        int st = res->reply.http_status;
        bool limited = res->reply.transport == TG_TR_COMPLETE && (st == 429 || st == 503);
        bool timed_out = res->reply.transport == TG_TR_TIMEOUT_AFTER_SEND;
        bool held = false;
        if (limited) {
                int64_t ms = retry_after_ms >= 0 ? retry_after_ms : cfg->exit_default_hold_ms;
                pacer_hold(d->pacer, now + ms * TG_NS_PER_MS);
                held = true;
                json_t *f = op_fields(&oc->op, &oc->call);
                json_object_set_new(f, "http_status", json_integer(st));
                json_object_set_new(f, "hold_ms", json_integer(ms));
                log_emit(LOG_WARN, "exit_hold", f);
        }
        if (timed_out) {
                d->timeouts_in_row++;
                if (cfg->exit_timeout_run_hold > 0 &&
                    d->timeouts_in_row >= cfg->exit_timeout_run_hold) {
                        pacer_hold(d->pacer, now + cfg->exit_timeout_hold_ms * TG_NS_PER_MS);
                        held = true;
                        json_t *f = json_object();
                        json_object_set_new(f, "timeouts_in_row", json_integer(d->timeouts_in_row));
                        json_object_set_new(f, "hold_ms", json_integer(cfg->exit_timeout_hold_ms));
                        log_emit(LOG_WARN, "exit_hold_timeouts", f);
                        d->timeouts_in_row = 0;
                }
        } else if (res->reply.transport == TG_TR_COMPLETE) {
                d->timeouts_in_row = 0;
        }
        if (oc->probe) {
                bool healthy = !limited && !timed_out && res->reply.transport != TG_TR_NOT_SENT;
                pacer_probe_done(d->pacer, healthy);
        }
        if (held)
                exit_stats_held(d->xstats); /* stats: a provider-wide hold */
}

static void settle_call(struct disp *d, struct open_call *oc, const struct transport_result *res)
{
        const struct tg_config *cfg = d->cfg;
        tg_mono_ns now = clock_mono_now();
        tg_wall_ms wall = clock_wall_now();
        enum tg_class cls = classify(d->classifier, oc->request, &res->reply);

        failpoint(d, "crash_before_settle", &oc->op);

        int64_t ra = -1;
        if (res->retry_after[0]) {
                int64_t v;
                if (retry_after_parse(res->retry_after, strlen(res->retry_after), wall,
                                      cfg->retry_after_cap_ms, transport_http_date, &v) == 0)
                        ra = v;
        }
        struct policy_op pop;
        policy_op_from(&oc->op, &pop);
        struct policy_event ev = {
            .request = oc->request, .cls = cls, .retry_after_ms = ra, .now = wall};
        struct settle_args sa;
        memset(&sa, 0, sizeof(sa));
        int r = policy_after_call(&cfg->policy, &pop, &ev, &d->rng, &sa.decision);
        if (r < 0) {
                /* Cannot happen for classes classify() returns; keep the
                 * operation reconcilable rather than guess. */
                sa.decision.next = OP_UNKNOWN;
                sa.decision.next_run_at = wall + cfg->policy.query_interval_ms;
        }
        sa.call_id = oc->call.id;
        sa.op_id = oc->op.id;
        sa.epoch = d->epoch;
        sa.sent = res->sent;
        sa.cls = cls;
        sa.http_status = res->reply.http_status;
        sa.end_mono = now;
        sa.now = wall;
        sa.latency_us = res->latency_us;
        sa.handoff_mono = oc->handoff;
        sa.handoff_wall = oc->handoff_wall;
        /* What the provider said, for the operator: its codes only, never
         * its body. */
        if (res->error[0])
                snprintf(sa.error, sizeof(sa.error), "%s", res->error);
        else if (res->reply.failure_code[0])
                snprintf(sa.error, sizeof(sa.error), "provider failure_code %s",
                         res->reply.failure_code);
        else if (res->reply.error_code[0])
                snprintf(sa.error, sizeof(sa.error), "provider error.code %s",
                         res->reply.error_code);
        snprintf(sa.refund_id, sizeof(sa.refund_id), "%s", res->reply.refund_id);

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
        json_object_set_new(f, "next_state", json_string(op_state_name(sa.decision.next)));
        if (sa.decision.next == OP_MANUAL)
                json_object_set_new(f, "reason",
                                    json_string(manual_reason_name(sa.decision.reason)));
        if (res->error[0])
                json_object_set_new(f, "error", json_string(res->error));
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
        exit_stats_ended(d->xstats, cls, res->latency_us, r == 0 ? sa.decision.next : OP_IN_FLIGHT,
                         oc->op.attempts);
        pacer_finish(d->pacer);
        if (d->query_pacer && oc->request == CLASSIFY_QUERY)
                pacer_finish(d->query_pacer);
        provider_signals(d, oc, res, ra, now);
        oc->used = false;
}

/* Asks the store again for outcomes it could not take. */
static void retry_unsettled(struct disp *d, tg_mono_ns now)
{
        if (d->n_unsettled == 0 || now < d->next_settle_retry)
                return;
        unsigned kept = 0;
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

static void settle_finished(struct disp *d)
{
        struct transport_result res;
        while (transport_next_done(d->transport, &res) == 0) {
                struct open_call *oc = find_call(d, res.cookie);
                if (oc)
                        settle_call(d, oc, &res);
        }
}

static int request_body(const struct op_record *op, char **ret_body)
{
        json_t *o = json_pack("{s:s, s:s, s:I, s:s}", "operation_id", op->req.operation_id,
                              "payment_id", op->req.payment_id, "amount",
                              (json_int_t)op->req.amount, "currency", op->req.currency);
        if (!o)
                return TG_ENOMEM;
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!s)
                return TG_ENOMEM;
        *ret_body = s;
        return 0;
}

/* A call the transport could not take: nothing left the machine. */
static void settle_unsent(struct disp *d, struct open_call *oc, int why)
{
        struct transport_result res;
        memset(&res, 0, sizeof(res));
        res.cookie = oc->cookie;
        res.reply.transport = TG_TR_NOT_SENT;
        snprintf(res.error, sizeof(res.error), "transport refused the call: %s", tg_strerror(why));
        settle_call(d, oc, &res);
}

static int64_t call_timeout_ms(const struct disp *d, const struct op_record *op, tg_wall_ms wall)
{
        /* The smaller of timeout_ms and what remains of the operation's
         * deadline (never below 1 ms: the sweep handles the past). */
        int64_t t = d->cfg->provider_timeout_ms;
        int64_t left = op->deadline_at - wall;
        if (left < t)
                t = left;
        return t < 1 ? 1 : t;
}

static void try_start(struct disp *d, tg_mono_ns now, tg_wall_ms wall)
{
        if (d->lost || stopping(d) || d->n_unsettled > 0 || now < d->idle_until ||
            !pacer_may_start(d->pacer, now))
                return;
        struct open_call *oc = free_slot(d);
        if (!oc)
                return; /* cannot happen: slots == max_in_flight */
        struct claim_args a;
        memset(&a, 0, sizeof(a));
        a.epoch = d->epoch;
        a.now = wall;
        a.start_mono = now;
        a.in_flight_at_start = pacer_in_flight(d->pacer) + 1;
        a.key_retention_ms = d->cfg->policy.key_retention_ms;
        /* Queries have a sub-quota that narrows the account's, never adds to
         * it: when it is spent, the again group may only yield a re-send. */
        a.no_queries = d->query_pacer && !pacer_may_start(d->query_pacer, now);
        d->seq++;
        snprintf(a.request_id, sizeof(a.request_id), "tg-%lld-%llu-%04x", (long long)d->epoch,
                 (unsigned long long)d->seq, (unsigned)(tg_rng_next(&d->rng) & 0xffff));

        enum store_group order[2] = {d->turn, d->turn == STORE_GROUP_FIRST ? STORE_GROUP_AGAIN
                                                                           : STORE_GROUP_FIRST};
        int r = TG_ENOTFOUND;
        enum store_group used = order[0];
        for (int i = 0; i < 2 && r == TG_ENOTFOUND; i++) {
                used = order[i];
                a.group = used;
                r = store_claim(d->store, &a, &oc->op, &oc->call);
        }
        if (r == TG_ENOTFOUND) {
                d->idle_until = now + IDLE_RECHECK_NS;
                return;
        }
        if (r == TG_EFENCED) {
                d->lost = true;
                log_emit(LOG_ERROR, "claim_fenced",
                         json_pack("{s:I}", "epoch", (json_int_t)d->epoch));
                return;
        }
        if (r < 0) {
                /* Said once, then every few seconds while the store stays
                 * down: the loop asks again every IDLE_RECHECK_NS. */
                if (d->claim_failures++ % 100 == 0)
                        log_emit(LOG_WARN, "claim_failed",
                                 json_pack("{s:s, s:I}", "error", tg_strerror(r), "failures",
                                           (json_int_t)d->claim_failures));
                d->idle_until = now + IDLE_RECHECK_NS;
                return;
        }
        d->claim_failures = 0;
        /* An empty group yields its turn; after a claim the other group goes
         * next. */
        d->turn = used == STORE_GROUP_FIRST ? STORE_GROUP_AGAIN : STORE_GROUP_FIRST;

        /* The attempt is committed: record before send. */
        failpoint(d, "crash_after_claim", &oc->op);

        oc->used = true;
        oc->cookie = ++d->next_cookie;
        oc->request = oc->call.kind == TG_KIND_QUERY ? CLASSIFY_QUERY : CLASSIFY_POST;
        oc->handoff = clock_mono_now();
        oc->handoff_wall = clock_wall_now();
        if (d->query_pacer && oc->request == CLASSIFY_QUERY)
                pacer_start(d->query_pacer, oc->handoff, NULL);
        bool probe = false;
        /* stats: ready = the later of the slot and the last empty claim */
        tg_mono_ns slot = pacer_next_slot(d->pacer), empty = d->idle_until - IDLE_RECHECK_NS;
        exit_stats_started(d->xstats, oc->call.kind, slot > empty ? slot : empty, oc->handoff);
        r = pacer_start(d->pacer, oc->handoff, &probe);
        /* may_start held at `now` and nothing in between can close the slot:
         * the slot only moves at a start, and starts happen only here. */
        if (r < 0) {
                /* A programmer error, not a condition to work around: stop
                 * before anything is sent. The claim is committed, so the
                 * next owner reconciles the operation as unknown. */
                log_emit(LOG_ERROR, "pacer_refused_after_claim", op_fields(&oc->op, &oc->call));
                abort();
        }
        oc->probe = probe;

        char *body = NULL;
        struct transport_call tc = {
            .request = oc->request,
            .operation_id = oc->op.req.operation_id,
            .request_id = oc->call.request_id,
            .attempt = oc->call.attempt,
            .timeout_ms = call_timeout_ms(d, &oc->op, wall),
            .cookie = oc->cookie,
        };
        if (oc->request == CLASSIFY_POST) {
                r = request_body(&oc->op, &body);
                if (r < 0) {
                        settle_unsent(d, oc, r);
                        return;
                }
                tc.body = body;
        }
        json_t *f = op_fields(&oc->op, &oc->call);
        json_object_set_new(f, "in_flight", json_integer(pacer_in_flight(d->pacer)));
        json_object_set_new(f, "timeout_ms", json_integer(tc.timeout_ms));
        if (probe)
                json_object_set_new(f, "probe", json_true());
        r = transport_start(d->transport, &tc);
        free(body);
        if (r < 0) {
                log_emit(LOG_ERROR, "transport_start_failed", f);
                settle_unsent(d, oc, r);
                return;
        }
        log_emit(LOG_INFO, "call_start", f);
}

static void housekeeping(struct disp *d, tg_mono_ns now, tg_wall_ms wall)
{
        if (now < d->next_sweep)
                return;
        d->next_sweep = now + SWEEP_EVERY_NS;
        /* stats: one exit sample a second for /metrics, /v1/stats, admission */
        if (exit_stats_flush(d->xstats, d->store, d->epoch, d->share, pacer_in_flight(d->pacer),
                             pacer_held(d->pacer, now), wall) < 0)
                log_emit(LOG_DEBUG, "sample_failed", NULL);
        unsigned n = 0;
        if (store_sweep_deadlines(d->store, d->cfg->policy.key_retention_ms, wall, &n) == 0 &&
            n > 0)
                log_emit(LOG_WARN, "deadline_sweep", json_pack("{s:i}", "to_manual", (int)n));
        /* outbox: refunds an application inserted in its own transaction,
         * validated like an API intake (TG_EUNSUPPORTED on SQLite) */
        unsigned taken = 0, invalid = 0;
        if (store_outbox_intake(d->store, &d->cfg->policy, wall, &taken, &invalid) == 0 &&
            taken + invalid > 0)
                log_emit(LOG_INFO, "outbox_intake",
                         json_pack("{s:i, s:i}", "taken", (int)taken, "invalid", (int)invalid));
        if (store_owner_check(d->store) < 0 && !d->lost) {
                d->lost = true;
                log_emit(LOG_ERROR, "owner_lost",
                         json_pack("{s:I}", "epoch", (json_int_t)d->epoch));
        }
}

static tg_mono_ns next_wait(const struct disp *d, tg_mono_ns now)
{
        tg_mono_ns wait = IDLE_RECHECK_NS;
        if (!d->lost && !stopping(d) && pacer_in_flight(d->pacer) < d->share_cfg.max_in_flight) {
                tg_mono_ns slot = pacer_next_slot(d->pacer);
                if (slot != TG_MONO_NEVER) {
                        tg_mono_ns t = slot > d->idle_until ? slot : d->idle_until;
                        wait = t > now ? t - now : 0;
                        if (wait > IDLE_RECHECK_NS)
                                wait = IDLE_RECHECK_NS;
                }
        }
        return wait;
}

/* Waits for I/O until the next thing that can happen. The transport's poll
 * counts in whole milliseconds, which at high rates (a 1 ms interval) would
 * make every start up to a millisecond late: a wait under 2 ms is slept
 * precisely after a non-blocking look at the sockets. */
static int wait_for_work(struct disp *d)
{
        tg_mono_ns wait = next_wait(d, clock_mono_now());
        if (wait > 0 && wait < 2 * TG_NS_PER_MS) {
                int r = transport_poll(d->transport, 0);
                sleep_ns(wait);
                return r;
        }
        /* Round up: waking a little late is fine, early is wasted. */
        return transport_poll(d->transport, (int)((wait + TG_NS_PER_MS - 1) / TG_NS_PER_MS));
}

/* Becomes the owner, waiting as a standby unless --no-wait. 0, 1 (stopped
 * while waiting), 3 (--no-wait and another owner), or a negative error. */
static int acquire(struct disp *d)
{
        bool said = false;
        for (;;) {
                /* A free share of the account, or the whole exit when
                 * exit.shares = 1 (then the owner lock, as always). */
                int r = store_share_acquire(d->store, &d->split, &d->share, &d->epoch);
                if (r == 0)
                        break;
                if (r == TG_ECONFLICT) {
                        /* Another split is in force and a dispatcher under it
                         * is alive: running beside it would let the two
                         * configurations add up to more than the account. */
                        struct store_split in = {0};
                        store_split_get(d->store, &in);
                        char msg[400];
                        snprintf(msg, sizeof(msg),
                                 "the store's account quota is split into %u share(s) of "
                                 "%g starts/s (max_in_flight %u) and a dispatcher holding one "
                                 "is running; this config says %u share(s) of %g starts/s "
                                 "(max_in_flight %u). Refusing to start: give every dispatcher "
                                 "of this account the same [exit] starts_per_second, "
                                 "max_in_flight and shares, or stop the running ones first",
                                 in.shares, in.starts_per_second, in.max_in_flight, d->split.shares,
                                 d->split.starts_per_second, d->split.max_in_flight);
                        log_emit(LOG_ERROR, "split_conflict", json_pack("{s:s}", "message", msg));
                        return r;
                }
                if (r == TG_EIO || r == TG_EBUSY) {
                        /* The database cannot answer right now (restarting,
                         * connection refused): wait it out as a standby. */
                        log_emit(LOG_WARN, "owner_acquire_failed",
                                 json_pack("{s:s}", "error", tg_strerror(r)));
                        if (!wait_unless_stopped(d, 4 * STANDBY_RETRY_NS))
                                return 1;
                        continue;
                }
                if (r != TG_ELOCKED)
                        return r;
                if (d->opt->no_wait) {
                        log_emit(LOG_ERROR, "owner_busy",
                                 json_pack("{s:s}", "message",
                                           "another dispatcher owns the exit for this store; "
                                           "--no-wait given, exiting"));
                        return 3;
                }
                if (!said) {
                        log_emit(LOG_INFO, "standby",
                                 json_pack("{s:s}", "message",
                                           d->split.shares > 1
                                               ? "every share of the account is held; waiting "
                                                 "as a standby until one is free"
                                               : "another dispatcher owns the exit; waiting as a "
                                                 "standby until it is gone"));
                        said = true;
                }
                if (d->opt->standby)
                        *d->opt->standby = 1;
                if (!wait_unless_stopped(d, STANDBY_RETRY_NS))
                        return 1;
        }
        if (d->opt->standby)
                *d->opt->standby = 0;
        log_emit(LOG_INFO, "owner",
                 json_pack("{s:I, s:i, s:i}", "epoch", (json_int_t)d->epoch, "share", (int)d->share,
                           "shares", (int)d->split.shares));
        return 0;
}

static int take_over(struct disp *d)
{
        if (d->epoch > 1) {
                /* The previous owner's calls may still be open at the
                 * provider: wait out one full call timeout before sending.
                 * (This clears our own waiting budget only; it does not prove
                 * the provider stopped: unknowns are still reconciled.) */
                log_emit(LOG_INFO, "takeover_wait",
                         json_pack("{s:I}", "wait_ms", (json_int_t)d->cfg->provider_timeout_ms));
                if (!wait_unless_stopped(d, d->cfg->provider_timeout_ms * TG_NS_PER_MS))
                        return 1;
        }
        unsigned n = 0;
        int r = store_recover(d->store, d->epoch, &d->cfg->policy, clock_wall_now(), &n);
        if (r < 0)
                return r;
        if (n > 0)
                log_emit(LOG_WARN, "recovered_in_flight", json_pack("{s:i}", "to_unknown", (int)n));
        return 0;
}

static int disp_init(struct disp *d, const struct tg_config *cfg,
                     const struct dispatcher_options *opt)
{
        memset(d, 0, sizeof(*d));
        d->cfg = cfg;
        d->opt = opt;
        d->failpoint = getenv("TG_FAILPOINT");
        tg_rng_seed(&d->rng, (uint64_t)clock_mono_now() ^ ((uint64_t)getpid() << 32));
        int r = store_open(cfg->store_url, &d->store);
        if (r < 0)
                return r;
        /* A locked store must not stall the loop that reads replies: wait
         * briefly, then keep the outcome and retry (retry_unsettled). */
        store_set_busy_timeout(d->store, DISPATCH_BUSY_TIMEOUT_MS);
        /* Our share: the account's rate and in-flight cap divided by
         * exit.shares (config checked shares <= max_in_flight, so each share
         * has at least one call and the shares' caps add up to at most the
         * account's). Every quota below is a share's, the query sub-quota
         * too. */
        unsigned shares = cfg->exit_shares > 0 ? cfg->exit_shares : 1;
        d->split.shares = shares;
        d->split.starts_per_second = cfg->exit.starts_per_second;
        d->split.max_in_flight = cfg->exit.max_in_flight;
        d->share_cfg.starts_per_second = cfg->exit.starts_per_second / shares;
        d->share_cfg.max_in_flight = cfg->exit.max_in_flight / shares;
        if (d->share_cfg.max_in_flight < 1)
                d->share_cfg.max_in_flight = 1;
        /* An empty pacer: nothing carried over from before, no catch-up. */
        r = pacer_new(&d->share_cfg, &d->pacer);
        if (r < 0)
                return r;
        if (cfg->exit_query_starts_per_second > 0) {
                struct pacer_config q = {.starts_per_second =
                                             cfg->exit_query_starts_per_second / shares,
                                         .max_in_flight = d->share_cfg.max_in_flight};
                r = pacer_new(&q, &d->query_pacer);
                if (r < 0)
                        return r;
        }
        struct transport_config tc = {
            .base_url = cfg->provider_base_url,
            .refunds_path = cfg->provider_refunds_path,
            .query_path = cfg->provider_query_path,
            .key_header = cfg->provider_key_header,
            .request_id_header = cfg->provider_request_id_header,
            .attempt_header = cfg->provider_attempt_header,
            .connect_timeout_ms = cfg->provider_connect_timeout_ms,
            .max_response_bytes = cfg->provider_max_response_bytes,
            .max_open = d->share_cfg.max_in_flight,
            .reuse_connections = cfg->provider_reuse_connections,
        };
        r = transport_new(&tc, &d->transport);
        if (r < 0)
                return r;
        r = classifier_new_default(&d->classifier);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < cfg->rule_count; i++) {
                r = classifier_add_rule(d->classifier, &cfg->rules[i]);
                if (r < 0)
                        return r;
        }
        r = exit_stats_new(clock_wall_now(), &d->xstats);
        if (r < 0)
                return r;
        d->ncalls = d->share_cfg.max_in_flight;
        d->calls = calloc(d->ncalls, sizeof(*d->calls));
        d->unsettled = calloc(d->ncalls, sizeof(*d->unsettled));
        return d->calls && d->unsettled ? 0 : TG_ENOMEM;
}

static void disp_release(struct disp *d)
{
        transport_free(d->transport);
        classifier_free(d->classifier);
        pacer_free(d->pacer);
        pacer_free(d->query_pacer);
        exit_stats_free(d->xstats);
        if (d->store) {
                store_owner_release(d->store);
                store_close(d->store);
        }
        free(d->calls);
        free(d->unsettled);
}

/* The owner lock is gone (its session dropped: a database restart, a killed
 * connection) and every open call has settled: wait as a standby would and
 * take the exit again under a new epoch, with the takeover wait and
 * recovery. The pacer is kept: the next slot still counts from our last
 * actual start. 0, or what acquire()/take_over() returned. */
static int rejoin(struct disp *d)
{
        log_emit(LOG_WARN, "rejoin",
                 json_pack("{s:I, s:i}", "lost_epoch", (json_int_t)d->epoch, "unsettled",
                           (int)d->n_unsettled));
        /* Outcomes the store never took stay in_flight under the lost epoch:
         * the takeover below turns them into unknown, to be reconciled. */
        d->n_unsettled = 0;
        for (;;) {
                store_owner_release(d->store);
                d->lost = false;
                int r = acquire(d);
                if (r == 0)
                        r = take_over(d);
                if (r != TG_EIO && r != TG_EBUSY) {
                        if (r != 0 && r != 1)
                                d->lost = true; /* could not: exit 1 */
                        return r;
                }
                log_emit(LOG_WARN, "rejoin_failed", json_pack("{s:s}", "error", tg_strerror(r)));
                if (!wait_unless_stopped(d, 4 * STANDBY_RETRY_NS))
                        return 1;
        }
}

int dispatcher_run(const struct tg_config *config, const struct dispatcher_options *options)
{
        struct disp d;
        int r = disp_init(&d, config, options);
        if (r < 0) {
                log_emit(LOG_ERROR, "dispatcher_init_failed",
                         json_pack("{s:s}", "error", tg_strerror(r)));
                disp_release(&d);
                return 1;
        }
        r = acquire(&d);
        if (r == 0)
                r = take_over(&d);
        if (r != 0) {
                disp_release(&d);
                if (r == 1)
                        return 0; /* stopped while waiting */
                if (r < 0)
                        log_emit(LOG_ERROR, "dispatcher_failed",
                                 json_pack("{s:s}", "error", tg_strerror(r)));
                return r == 3 ? 3 : 1;
        }
        log_emit(LOG_INFO, "exit_open",
                 json_pack("{s:f, s:i, s:I, s:i, s:i}", "starts_per_second",
                           d.share_cfg.starts_per_second, "max_in_flight",
                           (int)d.share_cfg.max_in_flight, "timeout_ms",
                           (json_int_t)config->provider_timeout_ms, "share", (int)d.share, "shares",
                           (int)d.split.shares));
        for (;;) {
                tg_mono_ns now = clock_mono_now();
                tg_wall_ms wall = clock_wall_now();
                settle_finished(&d);
                retry_unsettled(&d, now);
                if ((stopping(&d) || d.lost) && transport_open(d.transport) == 0) {
                        /* Lost the exit but not asked to stop: stand by and
                         * take it again once it is free. */
                        if (stopping(&d) || rejoin(&d) != 0)
                                break;
                        continue;
                }
                housekeeping(&d, now, wall);
                try_start(&d, now, wall);
                if (wait_for_work(&d) < 0)
                        sleep_ns(10 * TG_NS_PER_MS);
        }
        bool lost = d.lost;
        log_emit(LOG_INFO, "exit_closed",
                 json_pack("{s:b, s:i}", "owner_lost", lost, "unsettled", (int)d.n_unsettled));
        disp_release(&d);
        return lost ? 1 : 0;
}
