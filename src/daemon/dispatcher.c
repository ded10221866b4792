/*
 * dispatcher — the exit's loop. See dispatcher.h for the contract.
 *
 * One turn of the loop reads the clock once, settles every finished call,
 * sweeps deadlines now and then, starts at most one call (the pacer allows no
 * more than one per slot), and then waits in the transport for I/O until the
 * next thing that can happen: the next slot, the next store check, or a reply.
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
 * takes (measured from recent calls), so that the request goes out at the
 * slot rather than a connect later; the provider sees starts at least 1/rate
 * apart because the hook never lets one out before its slot. No transaction
 * is open while the loop waits for a slot or a reply.
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
#include "daemon/store_worker.h"
#include "store/store.h"

/* Planted bugs (docs/reliability.md, "Deterministic simulation"): each is
 * compiled in only by a test build of tollgate-sim with its TG_PLANT_* flag
 * (tests/CMakeLists.txt), to show that the simulator catches it; a shipped
 * build has none (the constants are 0 and the branches fold away). */
#ifdef TG_PLANT_HANDOFF_SPACING
#define PLANT_HANDOFF_SPACING 1 /* the next slot counts from the hand-off, not the wire */
#else
#define PLANT_HANDOFF_SPACING 0
#endif
#ifdef TG_PLANT_RETRY_SKIPS_PACER
#define PLANT_RETRY_SKIPS_PACER 1 /* a retry claimed ahead goes at once, past the pacer */
#else
#define PLANT_RETRY_SKIPS_PACER 0
#endif

#define IDLE_RECHECK_NS (50 * TG_NS_PER_MS)   /* the first look for new work after none */
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
        tg_mono_ns planned;          /* its slot: not on the wire before (not_before) */
        unsigned in_flight_at_start; /* open calls at the hand-off, itself included */
        tg_mono_ns ready_at;         /* the earliest it could have started (lateness) */
        bool sent_known;             /* its sent report came */
        tg_mono_ns sent;             /* on the wire (0: never) */
        bool unpaced;                /* PLANT_RETRY_SKIPS_PACER: the pacer never saw it */
};

/* How far ahead of its slot a call is handed over: the longest of the last
 * LEAD_SAMPLES connects plus LEAD_MARGIN, at most LEAD_MAX and half the
 * interval. The hook holds an early request until its slot, so a lead too
 * long costs a little loop time, never spacing; one too short makes that
 * start a little late. */
#define LEAD_SAMPLES 16
#define LEAD_MARGIN  (100 * TG_NS_PER_US)
#define LEAD_INITIAL (1 * TG_NS_PER_MS)
#define LEAD_MAX     (5 * TG_NS_PER_MS)
/* Shares: a request ready after its window sends nothing (it would come too
 * close to another share's), so the lead follows slower connects further:
 * a longer hold in the hook costs loop time, a window missed costs a start. */
#define LEAD_MAX_SHARES (50 * TG_NS_PER_MS)

/* Shares: two clock reads this close in time give the grid's offset. */
#define GRID_READ_CLOSE (20 * TG_NS_PER_US)

/* Claims are committed ahead of their slots (record before send does not
 * require recording at the slot): READY_MAX at most, one transaction for
 * the lot (group commit), as many as the claims' own commit time covers at
 * the rate. */
#define READY_MAX      32
#define CLAIM_EST_INIT (2 * TG_NS_PER_MS) /* a claim's commit, until measured */
/* With the store on its own thread a claim no longer stops the loop, and
 * the queue also covers the thread's other work and its tail (an outcome
 * or a slow fsync before the claim): this much more is claimed ahead. */
#define CLAIM_AHEAD_SLACK (4 * TG_NS_PER_MS)
#define STORE_AHEAD       4 /* outcomes an open call that may wait for the store thread */
/* When the queue runs under what it must cover, it is filled to this much
 * of the coming starts at least (at 1,000/s, 16 claims): one commit for
 * several claims at high rates, where a refill each time one claim was
 * used committed one or two a transaction. At 50/s and under it is one. */
#define CLAIM_BATCH_SPAN (16 * TG_NS_PER_MS)
/* outcomes the store may fail: those waiting for it, and the open calls' */
#define UNSETTLED_MAX(d) ((STORE_AHEAD + 2) * (d)->ncalls)

/* A batch of claims on its way through the store thread (one at a time). */
struct claim_job {
        struct dispatcher *d;
        struct claim_args args[READY_MAX];
        struct op_record ops[READY_MAX];
        struct call_record calls[READY_MAX];
        unsigned n, got;
        enum store_group turn;
        bool at_slot;   /* made for a slot with nothing ready (else: ahead) */
        tg_mono_ns now; /* when it was posted */
        tg_wall_ms wall;
};

/* The once-a-second store work, through the store threads, one of each at a
 * time: the owner check on the claims' connection (its lock session), the
 * sample, sweeps and the service's work on the outcomes'. */
struct owner_job {
        struct dispatcher *d;
        tg_mono_ns asked; /* when the check began: the lock was ours then at least */
        bool posted;
};

struct second_job {
        struct dispatcher *d;
        struct exit_sample sample;
        tg_wall_ms keep_after, wall;
        unsigned share;
        bool lost;
        int sample_result;
        unsigned swept, taken, invalid;
        bool swept_ok, outbox_ok;
        bool posted;
};

/* An outcome on its way through the store thread, with what the log line
 * and the figures need once it is committed. */
struct settle_job {
        struct dispatcher *d;
        struct settle_args sa;
        struct op_record op;
        struct call_record call;
        int http_status;
        int64_t latency_us;
        enum transport_failure failure;
        enum tg_transport_result transport;
        char error[256];
        bool on_heap;
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
        /* The last owner check that found our lock held: no call is handed
         * over when it is older than OWNERSHIP_FRESH_NS (daemon/ownership.h:
         * a claim made ahead was fenced when it was made, not when it is
         * sent). */
        tg_mono_ns owner_seen;
        bool owner_checked;
        /* Outcomes the store could not take yet (down, restarting, busy past
         * its timeout). While any is here the exit starts nothing; they are
         * retried until the store takes them. Bounded: at most one per open
         * call, and no call starts while one waits. */
        struct settle_args *unsettled;
        unsigned n_unsettled;
        /* Claims the store could not take back (store_release failed):
         * their operations stay in flight until it does, so they are asked
         * again with the outcomes, and nothing is claimed or started
         * meanwhile. Bounded: they come from the ready queue, which no claim
         * refills while one waits here. */
        struct unreleased {
                int64_t op_id, call_id;
                char why[32];
        } unreleased[READY_MAX];
        unsigned n_unreleased;
        uint64_t claim_failures; /* in a row */
        tg_mono_ns next_settle_retry;
        const char *failpoint;
        struct exit_stats *xstats; /* operators' figures (exit_stats.h); hooks marked "stats:" */
        tg_mono_ns connects[LEAD_SAMPLES]; /* recent hand-off to connection-ready times */
        unsigned nconnects, connect_next;
        /* Claims committed ahead of their slots, oldest first; each is in
         * flight in the store and not yet handed to the transport. */
        struct open_call ready[READY_MAX];
        unsigned nready;
        tg_mono_ns claim_est;  /* how long a claim's transaction takes (EWMA) */
        tg_mono_ns idle_step;  /* without a doorbell: the next look for work, backing off */
        tg_mono_ns idle_max;   /* exit.idle_poll_max_ms */
        tg_mono_ns last_empty; /* the last claim that found nothing (stats: lateness) */
        /* Shares: the windows of the grid every share starts on
         * (core/pacer.h); window 0 without shares. */
        struct pacer_grid_plan grid;
        /* The store's work: on a thread of its own in the real environment
         * (claims and outcomes posted, their results taken each turn), inline
         * in the fake ones. Every other use of the store by this thread is
         * between store_worker_lock() and store_worker_unlock(). */
        struct store_worker *worker;
        /* Outcomes: the same worker, or (env->outcome_store: MariaDB) a
         * second one on a connection of their own, so that the server
         * works on claims and outcomes at once. */
        struct store_worker *outcomes;
        struct claim_job *claim; /* its memory, one batch at a time */
        struct owner_job *owner_job;
        struct second_job *second_job;
        bool claim_posted;      /* a batch is with the store thread */
        bool slot_claim_landed; /* a batch made at a slot came: use it before claiming again */
        int claim_result;       /* of the last batch */
};

static tg_mono_ns lead(const struct dispatcher *d)
{
        tg_mono_ns l = d->nconnects == 0 ? LEAD_INITIAL : 0;

        for (unsigned i = 0; i < d->nconnects; i++)
                if (d->connects[i] > l)
                        l = d->connects[i];
        tg_mono_ns max = d->own.split.shares > 1 ? LEAD_MAX_SHARES : LEAD_MAX;

        l += LEAD_MARGIN;
        if (l > max)
                l = max;
        if (l > pacer_interval(d->pacer) / 2)
                l = pacer_interval(d->pacer) / 2;
        return l;
}

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
        /* every line of an operation carries its trace (W3C trace id) */
        if (op->traceparent[0])
                json_object_set_new(f, "trace_id", json_stringn(op->traceparent + 3, 32));
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

static void release_ready(struct dispatcher *d, const char *why, tg_mono_ns now, tg_wall_ms wall);
static void release_claim(struct dispatcher *d, const struct open_call *rc, const char *why,
                          tg_mono_ns now, tg_wall_ms wall);

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
        /* a hold counts from the call's end, or from its slot when it ended
         * sooner (never sent: its connect failed before the slot came) */
        tg_mono_ns from = now > oc->planned ? now : oc->planned;
        if (h.why == HOLDS_LIMITED) {
                pacer_hold(d->pacer, from + h.hold_ms * TG_NS_PER_MS);
                /* the provider spoke to the account: every share holds */
                if (d->own.split.shares > 1) {
                        store_worker_lock(d->worker);
                        int r =
                            store_hold_raise(d->store, d->env->wall_now(d->env->ctx) + h.hold_ms);
                        store_worker_unlock(d->worker);
                        if (r < 0)
                                log_emit(LOG_WARN, "account_hold_not_shared", NULL);
                }
                f = op_fields(&oc->op, &oc->call);
                json_object_set_new(f, "http_status", json_integer(hc.http_status));
                json_object_set_new(f, "hold_ms", json_integer(h.hold_ms));
                log_emit(LOG_WARN, "exit_hold", f);
        } else if (h.why == HOLDS_TIMEOUTS) {
                pacer_hold(d->pacer, from + h.hold_ms * TG_NS_PER_MS);
                log_emit(LOG_WARN, "exit_hold_timeouts",
                         json_pack("{s:i, s:I}", "timeouts_in_row", (int)h.timeouts_in_row,
                                   "hold_ms", (json_int_t)h.hold_ms));
        } else if (h.why == HOLDS_UNREACHABLE) {
                /* The provider cannot be reached (refused, DNS, TLS): the
                 * cause is in the line, so a misconfiguration reads at once. */
                pacer_hold(d->pacer, from + h.hold_ms * TG_NS_PER_MS);
                log_emit(LOG_WARN, "exit_hold_unreachable",
                         json_pack("{s:i, s:I, s:s, s:s, s:b}", "calls_in_row",
                                   (int)h.unreachable_in_row, "hold_ms", (json_int_t)h.hold_ms,
                                   "cause", transport_failure_name(res->failure), "error",
                                   res->error, "probe", oc->probe));
        }
        if (h.probe_done)
                pacer_probe_done(d->pacer, h.probe_healthy);
        if (h.why != HOLDS_NONE) {
                /* stats: a provider-wide hold, and when it ends */
                exit_stats_held(d->xstats, d->env->wall_now(d->env->ctx) + h.hold_ms);
                /* claims made ahead can no longer go out in time (a hold no
                 * longer than a slot only delays the next one: it stays) */
                if (h.hold_ms * TG_NS_PER_MS > pacer_interval(d->pacer))
                        release_ready(d, "hold", now, d->env->wall_now(d->env->ctx));
                exit_stats_waited(d->xstats, EXIT_WAIT_HOLD, h.hold_ms);
        }
}

/* ---- settling ------------------------------------------------------------------ */

/* A handed-over call is over (settled, or given back unsent): it leaves
 * the pacers' in-flight counts. */
static void pacers_finish(struct dispatcher *d, const struct open_call *oc)
{
        if (!(PLANT_RETRY_SKIPS_PACER && oc->unpaced))
                pacer_finish(d->pacer);
        if (d->query_pacer && oc->request == CLASSIFY_QUERY)
                pacer_finish(d->query_pacer);
}

/* Where the next slot counts from, for a request let out at `at` that had
 * surely left by `end`: `at`, unless what came between (libcurl building
 * and writing the request, and a preemption there) took longer than the
 * spacing margin covers; then `end` less the margin. The provider's gap to
 * the next request is at least (its hook) - end >= 1/rate either way. */
static tg_mono_ns sent_ref(const struct dispatcher *d, tg_mono_ns at, tg_mono_ns end)
{
        tg_mono_ns covered = end - d->cfg->exit.spacing_margin_ns;

        return end > 0 && covered > at ? covered : at;
}

/* A call's request went on the wire at `at` (or never will), surely by
 * `end`: the next slot counts from that real start, and its connect teaches
 * the lead. */
static void sent_known(struct dispatcher *d, struct open_call *oc, bool sent, bool late,
                       tg_mono_ns ready, tg_mono_ns at, tg_mono_ns end)
{
        if (oc->sent_known)
                return;
        oc->sent_known = true;
        oc->sent = sent ? at : 0;
        if (PLANT_RETRY_SKIPS_PACER && oc->unpaced)
                return;
        /* the query sub-quota counts from the same real start */
        bool query = d->query_pacer && oc->request == CLASSIFY_QUERY;
        if (sent) {
                failpoint_hit(d->failpoint, "crash_after_send", &oc->op);
                pacer_sent(d->pacer,
                           PLANT_HANDOFF_SPACING ? oc->handoff.mono : sent_ref(d, at, end));
                if (query)
                        pacer_sent(d->query_pacer, sent_ref(d, at, end));
        } else {
                pacer_unsent(d->pacer);
                if (query)
                        pacer_unsent(d->query_pacer);
        }
        /* a connect teaches the lead, also one that came too late to send */
        if (ready > 0 && ready >= oc->handoff.mono) {
                d->connects[d->connect_next] = ready - oc->handoff.mono;
                d->connect_next = (d->connect_next + 1) % LEAD_SAMPLES;
                if (d->nconnects < LEAD_SAMPLES)
                        d->nconnects++;
        }
        /* stats: lateness is the wire start (else the hand-off) after the
         * earliest moment it could have been; a call refused as late for
         * its window was no call (its claim goes back) and is not a start */
        if (late)
                return;
        exit_stats_started(d->xstats, oc->call.kind, oc->ready_at,
                           sent                             ? at
                           : oc->planned > oc->handoff.mono ? oc->planned
                                                            : oc->handoff.mono);
}

static void process_sent(struct dispatcher *d)
{
        struct transport_sent s;

        while (d->env->next_sent(d->env->ctx, &s) == 0) {
                struct open_call *oc = find_call(d, s.cookie);
                if (oc)
                        sent_known(d, oc, s.sent, s.late, s.ready_mono, s.sent_mono,
                                   s.sent_end_mono);
        }
}

/* An outcome committed (r == 0) or not: the exit pauses on one the store
 * could not take, the log says where the operation went, the figures count
 * it. On the dispatcher's thread, after the store thread's commit. */
static void settle_logged(struct dispatcher *d, const struct settle_job *j, int r)
{
        const struct policy_decision *decision = &j->sa.decision;
        enum tg_class cls = j->sa.cls;

        /* A store that cannot take it now keeps the outcome here and pauses
         * the exit until it can (retry_unsettled); if this process dies
         * meanwhile, the row is still in_flight and the next owner
         * reconciles it as unknown: never guessed. */
        if (r < 0 && r != TG_EFENCED && d->n_unsettled < UNSETTLED_MAX(d)) {
                if (d->n_unsettled == 0)
                        log_emit(LOG_ERROR, "exit_paused_store",
                                 json_pack("{s:s}", "error", tg_strerror(r)));
                d->unsettled[d->n_unsettled++] = j->sa;
                d->next_settle_retry = d->env->mono_now(d->env->ctx) + SETTLE_RETRY_NS;
        }
        /* an outcome may make this operation due again (a retry, a query):
         * an idle wait taken before it must be taken again, or the next
         * call would come as late as the longest idle wait */
        if (r == 0 && (decision->next == OP_RETRY_WAIT || decision->next == OP_UNKNOWN))
                d->idle_until = INT64_MIN;
        json_t *f = op_fields(&j->op, &j->call);
        json_object_set_new(f, "class", json_string(tg_class_name(cls)));
        json_object_set_new(f, "http_status", json_integer(j->http_status));
        json_object_set_new(f, "latency_ms", json_integer(j->latency_us / 1000));
        json_object_set_new(f, "next_state", json_string(op_state_name(decision->next)));
        if (decision->next == OP_MANUAL)
                json_object_set_new(f, "reason", json_string(manual_reason_name(decision->reason)));
        if (decision->given_back != POLICY_BUDGET_NONE)
                json_object_set_new(f, "counted", json_false()); /* limited: budget kept */
        if (j->error[0])
                json_object_set_new(f, "error", json_string(j->error));
        if (j->failure != TRANSPORT_OK)
                json_object_set_new(f, "cause", json_string(transport_failure_name(j->failure)));
        if (j->transport == TG_TR_NOT_SENT && j->failure != TRANSPORT_OTHER)
                /* Nothing reached the provider, and why, in a line of its own. */
                log_emit(LOG_WARN, "provider_unreachable",
                         json_pack("{s:s, s:s, s:s}", "operation_id", j->op.req.operation_id,
                                   "cause", transport_failure_name(j->failure), "error", j->error));
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
        exit_stats_ended(d->xstats, j->call.kind, cls, j->latency_us,
                         r == 0 ? decision->next : OP_IN_FLIGHT, j->op.attempts);
        if (r == 0 && (decision->next == OP_RETRY_WAIT || decision->next == OP_UNKNOWN))
                exit_stats_waited(d->xstats,
                                  decision->next == OP_RETRY_WAIT ? EXIT_WAIT_BACKOFF
                                                                  : EXIT_WAIT_QUERY,
                                  decision->wait_ms);
}

static int settle_run(struct store *store, void *arg)
{
        return store_settle(store, &((struct settle_job *)arg)->sa);
}

/* Outcomes that waited for the store thread together: one commit. */
static void settle_many(struct store *store, void *const *args, unsigned n, int *results)
{
        const struct settle_args *sa[STORE_WORKER_BATCH];

        for (unsigned i = 0; i < n; i++)
                sa[i] = &((struct settle_job *)args[i])->sa;
        store_settle_batch(store, sa, n, results);
}

static void settle_done(void *arg, int r, tg_mono_ns took)
{
        struct settle_job *j = arg;

        (void)took;
        settle_logged(j->d, j, r);
        if (j->on_heap)
                free(j);
}

static void settle_call(struct dispatcher *d, struct open_call *oc,
                        const struct transport_result *res, tg_mono_ns now, tg_wall_ms wall)
{
        enum tg_class cls = classify(d->classifier, oc->request, &res->reply);
        struct policy_decision decision;
        struct settle_job local, *j = malloc(sizeof(*j));
        int64_t ra = -1, v;

        failpoint_hit(d->failpoint, "crash_before_settle", &oc->op);
        /* a call that ended with no sent report popped (the transport
         * refused it) */
        sent_known(d, oc, res->sent && res->sent_mono > 0, false, res->ready_mono, res->sent_mono,
                   res->sent_end_mono);
        /* every Retry-After value, the longest (core/retry_after.h), cut to
         * the cap that leaves room for the deadline */
        if (res->retry_after[0] &&
            retry_after_parse_all(res->retry_after, strlen(res->retry_after), wall,
                                  config_retry_after_cap_ms(d->cfg), transport_http_date, &v) == 0)
                ra = v;
        /* a 429/503 refused the call for the whole account: nothing was
         * executed, and the policy gives the call back to its budget */
        struct policy_event ev = {.request = oc->request,
                                  .cls = cls,
                                  .retry_after_ms = ra,
                                  .now = wall,
                                  .limited =
                                      holds_limited(res->reply.transport, res->reply.http_status)};
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
                                    .handoff_wall = oc->handoff.wall,
                                    .sent_mono = oc->sent,
                                    .planned_mono = oc->planned,
                                    .in_flight_at_start = oc->in_flight_at_start};
        if (!j)
                j = &local;
        j->d = d;
        j->on_heap = j != &local;
        exit_call_settle_args(&end, &j->sa);
        j->op = oc->op;
        j->call = oc->call;
        j->http_status = res->reply.http_status;
        j->latency_us = res->latency_us;
        j->failure = res->failure;
        j->transport = res->reply.transport;
        snprintf(j->error, sizeof(j->error), "%s", res->error);

        /* Commit the outcome: on the store thread, after what was posted
         * before it (settle_done takes the result); the call has left the
         * transport, so it leaves the pacers now. */
        if (j->on_heap)
                store_worker_post(d->outcomes, settle_run, settle_many, settle_done, j);
        else /* no memory for the job: now, on this thread */
                store_worker_run_now(d->outcomes, settle_run, settle_done, j);
        pacers_finish(d, oc);
        apply_holds(d, oc, res, ra, now);
        oc->used = false;
}

/* Our lock was seen held recently enough to hand a call over. */
static bool owner_fresh(const struct dispatcher *d, tg_mono_ns now)
{
        return d->owner_checked && now - d->owner_seen <= OWNERSHIP_FRESH_NS;
}

/* The store owes us an outcome or a release: nothing starts until it took
 * them. */
static bool store_owes(const struct dispatcher *d)
{
        return d->n_unsettled > 0 || d->n_unreleased > 0;
}

/* Jobs posted to the store threads whose results were not taken yet. */
static unsigned store_pending(const struct dispatcher *d)
{
        unsigned n = store_worker_pending(d->worker);

        return d->outcomes != d->worker ? n + store_worker_pending(d->outcomes) : n;
}

/* The store threads are behind by more than STORE_AHEAD outcomes an open
 * call: nothing starts until they caught up. Bounded, so the outcomes that
 * wait (lost in a crash: reconciled as unknown) stay few; not one per open
 * call, so that outcomes that come together can wait together and share a
 * commit (store_settle_batch). */
static bool store_behind(const struct dispatcher *d)
{
        return store_pending(d) > STORE_AHEAD * d->ncalls;
}

/* Asks the store again for outcomes and releases it could not take. */
static void retry_unsettled(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        unsigned kept = 0;

        if (!store_owes(d) || now < d->next_settle_retry)
                return;
        store_worker_lock(d->worker);
        for (unsigned i = 0; i < d->n_unreleased; i++) {
                const struct unreleased *u = &d->unreleased[i];
                int r =
                    store_release(d->store, d->own.epoch, u->op_id, u->call_id, now, wall, u->why);
                /* fenced: a newer owner recovers it */
                if (r < 0 && r != TG_EFENCED)
                        d->unreleased[kept++] = *u;
        }
        d->n_unreleased = kept;
        kept = 0;
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
        store_worker_unlock(d->worker);
        d->n_unsettled = kept;
        d->next_settle_retry = now + SETTLE_RETRY_NS;
        if (!store_owes(d))
                log_emit(LOG_INFO, "exit_resumed_store", NULL);
}

/* Shares: the call's connection was ready after its window closed, and
 * nothing was sent (the transport refused it in the pre-request hook): the
 * claim goes back as one made ahead and never sent would, no attempt spent,
 * no hold (the provider is fine; our connect was slow). The operation is
 * claimed again for a later point. */
static void release_late(struct dispatcher *d, struct open_call *oc,
                         const struct transport_result *res, tg_mono_ns now, tg_wall_ms wall)
{
        sent_known(d, oc, false, true, res->ready_mono, 0, 0); /* if its report was not popped */
        release_claim(d, oc, "late for its window", now, wall);
        pacers_finish(d, oc);
        /* a probe that never went: still held, the next point probes */
        if (oc->probe)
                pacer_probe_done(d->pacer, false);
        oc->used = false;
}

static void settle_finished(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        struct transport_result res;

        process_sent(d);
        while (d->env->next_done(d->env->ctx, &res) == 0) {
                struct open_call *oc = find_call(d, res.cookie);
                if (oc && res.failure == TRANSPORT_LATE)
                        release_late(d, oc, &res, now, wall);
                else if (oc)
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

/* How many claims to keep ready: enough to cover a claim's own commit at
 * the rate (one at 5/s, a few at 1,000/s); with a store thread, also its
 * other work (CLAIM_AHEAD_SLACK). */
static unsigned ready_want(const struct dispatcher *d)
{
        tg_mono_ns interval = pacer_interval(d->pacer);
        tg_mono_ns cover = 2 * d->claim_est;

        if (store_worker_threaded(d->worker))
                cover += CLAIM_AHEAD_SLACK;
        tg_mono_ns want = (cover + interval - 1) / interval;

        return want < 1 ? 1 : want > READY_MAX ? READY_MAX : (unsigned)want;
}

/* How many claims a refill brings the queue to: what it must cover, or
 * CLAIM_BATCH_SPAN of starts at the rate if that is more. */
static unsigned ready_fill(const struct dispatcher *d)
{
        tg_mono_ns interval = pacer_interval(d->pacer);
        tg_mono_ns span = (CLAIM_BATCH_SPAN + interval - 1) / interval;
        unsigned want = ready_want(d);

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

static void claim_missed(struct dispatcher *d, int r, tg_mono_ns now, tg_wall_ms wall);

/* A batch of claims committed (or not): onto the ready queue, oldest
 * first. Claims that came while the exit stopped, was lost or was put on
 * hold go back at once: they can no longer be sent in time. */
static void claim_done(void *arg, int r, tg_mono_ns took)
{
        struct claim_job *c = arg;
        struct dispatcher *d = c->d;
        /* inline, the moment of the turn that claimed, as a plain call */
        bool threaded = store_worker_threaded(d->worker);
        tg_mono_ns now = threaded ? d->env->mono_now(d->env->ctx) : c->now;
        tg_wall_ms wall = threaded ? d->env->wall_now(d->env->ctx) : c->wall;

        d->claim_posted = false;
        d->claim_est = (3 * d->claim_est + took) / 4;
        d->claim_result = r;
        if (r < 0) {
                claim_missed(d, r, now, wall);
                return;
        }
        d->turn = c->turn;
        for (unsigned i = 0; i < c->got && d->nready < READY_MAX; i++) {
                struct open_call *rc = &d->ready[d->nready++];

                memset(rc, 0, sizeof(*rc));
                rc->op = c->ops[i];
                rc->call = c->calls[i];
        }
        d->slot_claim_landed = c->at_slot;
        if (stopping(d) || d->lost)
                release_ready(d, stopping(d) ? "stop" : "owner lost", now, wall);
        else if (pacer_held(d->pacer, now) &&
                 pacer_hold_until(d->pacer) - now > pacer_interval(d->pacer))
                release_ready(d, "hold", now, wall);
}

/* Claims up to `n` operations in one transaction, the groups taking turns
 * (an empty group yields its turn), onto the ready queue: posted to the
 * store thread (claim_done takes the result; without a thread, before this
 * returns). A failure, TG_ENOTFOUND (no work) too, goes to claim_missed. */
static void claim_ahead(struct dispatcher *d, unsigned n, bool at_slot, tg_mono_ns now,
                        tg_wall_ms wall)
{
        struct claim_job *c = d->claim;

        if (n > READY_MAX - d->nready)
                n = READY_MAX - d->nready;
        if (n == 0 || d->claim_posted)
                return;
        memset(c->args, 0, sizeof(c->args[0]) * n);
        for (unsigned i = 0; i < n; i++) {
                struct claim_args *a = &c->args[i];
                a->group = d->turn;
                a->epoch = d->own.epoch;
                a->now = wall;
                a->start_mono = now;
                a->in_flight_at_start = pacer_in_flight(d->pacer) + 1 + d->nready + i;
                a->key_retention_ms = d->cfg->policy.key_retention_ms;
                /* Queries have a sub-quota that narrows the account's, never
                 * adds to it: when it is spent the again group may only yield
                 * a re-send, and one batch holds one query at most. */
                a->no_queries = d->query_pacer && (i > 0 || !pacer_may_start(d->query_pacer, now));
                exit_call_request_id(a->request_id, sizeof(a->request_id), d->own.epoch, ++d->seq,
                                     (uint32_t)tg_rng_next(&d->rng));
                exit_call_trace_ids(&d->rng, a->span_id, a->traceparent_new);
        }
        c->d = d;
        c->n = n;
        c->turn = d->turn;
        c->at_slot = at_slot;
        c->now = now;
        c->wall = wall;
        d->claim_posted = true;
        store_worker_post(d->worker, claim_run, NULL, claim_done, c);
}

/* Gives a ready claim back to the store: the operation is as the claim
 * found it (store_release). A claim the store no longer counts as ours (a
 * newer owner) stays for that owner's recovery. */
static void release_claim(struct dispatcher *d, const struct open_call *rc, const char *why,
                          tg_mono_ns now, tg_wall_ms wall)
{
        store_worker_lock(d->worker);
        int r = store_release(d->store, d->own.epoch, rc->op.id, rc->call.id, now, wall, why);
        store_worker_unlock(d->worker);
        json_t *f = op_fields(&rc->op, &rc->call);

        json_object_set_new(f, "why", json_string(why));
        if (r < 0)
                json_object_set_new(f, "store_error", json_string(tg_strerror(r)));
        /* A release the store could not take leaves the operation in
         * flight, where no sweep looks: ask again until it does (fenced: a
         * newer owner recovers it). */
        if (r < 0 && r != TG_EFENCED && d->n_unreleased < READY_MAX) {
                struct unreleased *u = &d->unreleased[d->n_unreleased++];
                u->op_id = rc->op.id;
                u->call_id = rc->call.id;
                snprintf(u->why, sizeof(u->why), "%s", why);
                if (d->n_unsettled == 0 && d->n_unreleased == 1)
                        d->next_settle_retry = now + SETTLE_RETRY_NS;
        }
        log_emit(r < 0 ? LOG_WARN : LOG_INFO, "claim_released", f);
}

/* Every ready claim goes back (a hold started, the exit stops or was lost). */
static void release_ready(struct dispatcher *d, const char *why, tg_mono_ns now, tg_wall_ms wall)
{
        for (unsigned i = 0; i < d->nready; i++)
                release_claim(d, &d->ready[i], why, now, wall);
        d->nready = 0;
}

/* The oldest ready claim that may still be sent at `at` (wall time `wall`),
 * into *oc; the ones that may not are released. 0, or TG_ENOTFOUND. */
static int ready_pop(struct dispatcher *d, struct open_call *oc, tg_mono_ns at, tg_mono_ns now,
                     tg_wall_ms wall)
{
        while (d->nready > 0) {
                struct open_call rc = d->ready[0];
                const char *why = NULL;

                memmove(&d->ready[0], &d->ready[1], sizeof(d->ready[0]) * (d->nready - 1));
                d->nready--;
                if (rc.op.deadline_at <= wall)
                        why = "deadline";
                else if (rc.call.kind != TG_KIND_QUERY && rc.op.attempts > 1 &&
                         d->cfg->policy.key_retention_ms > 0 &&
                         rc.op.key_first_used + d->cfg->policy.key_retention_ms <= wall)
                        why = "key_retention";
                else if (rc.call.kind == TG_KIND_QUERY && d->query_pacer &&
                         !pacer_may_start(d->query_pacer, at))
                        why = "query sub-quota";
                if (why) {
                        release_claim(d, &rc, why, now, wall);
                        continue;
                }
                *oc = rc;
                return 0;
        }
        return TG_ENOTFOUND;
}

/* A claim that found nothing, or failed: say so (once in a while when the
 * store is down) and look again a little later. */
/* Nothing to claim: when to look again. A doorbell (serve: the API rings it
 * for every new refund) lets an idle exit sleep until a retry the store
 * says is due, or the longest idle wait; without one the look-again
 * interval backs off from IDLE_RECHECK_NS to the longest. */
static void idle(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        tg_mono_ns wait = d->env->has_doorbell ? d->idle_max : d->idle_step;
        tg_wall_ms next = TG_WALL_NEVER;
        bool pending = false;

        if (!d->env->has_doorbell)
                d->idle_step = d->idle_step >= d->idle_max / 2 ? d->idle_max : 2 * d->idle_step;
        store_worker_lock(d->worker);
        int r = store_next_due(d->store, &next, &pending);
        store_worker_unlock(d->worker);
        if (r == 0 && next != TG_WALL_NEVER) {
                tg_mono_ns due = (next - wall) * TG_NS_PER_MS;
                if (due < wait)
                        wait = due < TG_NS_PER_MS ? TG_NS_PER_MS : due;
        }
        /* the housekeeping second wakes the loop anyway: look then */
        if (d->next_sweep > now && now + wait > d->next_sweep)
                wait = d->next_sweep - now;
        d->idle_until = now + wait;
}

static void claim_missed(struct dispatcher *d, int r, tg_mono_ns now, tg_wall_ms wall)
{
        if (r == TG_ENOTFOUND) {
                d->last_empty = now;
                idle(d, now, wall);
                return;
        }
        d->idle_until = now + IDLE_RECHECK_NS;
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

/* Shares: this share's windows of the grid on the wall clock that every
 * share of the account keeps (share k owns the windows k, k + N, k + 2N, ...
 * of a grid grid.window apart), as monotonic times. Set after every
 * acquisition and each second (the wall clock may be slewed). */
static void set_grid(struct dispatcher *d)
{
        unsigned n = d->own.split.shares;
        int64_t offset;

        if (n <= 1 || d->grid.window <= 0)
                return;
        /* the two clocks read close together: a read cut by preemption
         * would move this share's points by as much (up to three tries,
         * the closest pair kept) */
        int64_t best = INT64_MAX;
        offset = 0;
        for (int i = 0; i < 3 && best > GRID_READ_CLOSE; i++) {
                tg_mono_ns m0 = d->env->mono_now(d->env->ctx);
                int64_t w = d->env->wall_ns(d->env->ctx);
                tg_mono_ns m1 = d->env->mono_now(d->env->ctx);
                if (m1 - m0 < best) {
                        best = m1 - m0;
                        offset = w - (m0 + (m1 - m0) / 2);
                }
        }
        tg_mono_ns period = (tg_mono_ns)n * d->grid.window;
        tg_mono_ns phase_wall = (tg_mono_ns)d->own.share * d->grid.window;
        pacer_set_grid(d->pacer, period, (phase_wall - offset % period) % period, d->grid.open,
                       d->grid.spacing);
}

/* Shares: a hold another share saw (429/503) holds this one too, learned
 * from the store before each start. True when the account is held now. */
static bool account_held(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        tg_wall_ms until = 0;

        if (d->own.split.shares <= 1)
                return false;
        store_worker_lock(d->worker);
        int r = store_hold_get(d->store, &until);
        store_worker_unlock(d->worker);
        if (r < 0 || until <= wall)
                return false;
        pacer_hold(d->pacer, now + (until - wall) * TG_NS_PER_MS);
        release_ready(d, "hold", now, wall);
        return true;
}

/* When a call for `slot` is handed over: `lead` ahead of it (a slot of
 * INT64_MIN, nothing yet, is now). */
static tg_mono_ns handoff_time(const struct dispatcher *d, tg_mono_ns slot)
{
        /* after a hold the probe is handed over `lead` ahead of its slot
         * too, but never before the hold's end: not even its connect (a TLS
         * handshake the provider sees) comes before the hold has passed */
        tg_mono_ns l = lead(d);
        tg_mono_ns h = slot < INT64_MIN + l ? INT64_MIN : slot - l;

        /* (with shares the probe's point may come a little after the
         * hold's end: the connect fits in between) */
        if (pacer_held(d->pacer, slot) && h < pacer_hold_until(d->pacer))
                h = pacer_hold_until(d->pacer);
        return h;
}

static void try_start(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        struct open_call *oc;
        bool probe = false;
        int r;

        /* idle_until: the store had nothing to claim a moment ago; a claim
         * made ahead is work all the same */
        if (d->lost || stopping(d) || store_owes(d) || store_behind(d) ||
            (now < d->idle_until && !d->nready))
                return;
        /* the next housekeeping checks the lock (or finds it lost) */
        if (!owner_fresh(d, d->env->mono_now(d->env->ctx)))
                return;
        tg_mono_ns slot = pacer_next_slot(d->pacer);
        /* the request goes on the wire at its slot, or now if that is past
         * (with shares: on this share's point of the grid, or a little
         * after it, else at its next point) */
        tg_mono_ns at = pacer_start_at(d->pacer, now);
        bool unpaced = PLANT_RETRY_SKIPS_PACER && d->nready > 0 &&
                       d->ready[0].call.kind == TG_KIND_RETRY && !pacer_pending(d->pacer);
        if (unpaced)
                at = now;
        else if (at == TG_MONO_NEVER || now < handoff_time(d, at) || account_held(d, now, wall))
                return;
        if (!unpaced && !pacer_may_start(d->pacer, at))
                return; /* in flight at the cap */
        oc = free_slot(d);
        if (!oc)
                return; /* cannot happen: slots == max_in_flight */
        r = ready_pop(d, oc, at, now, wall);
        if (r == TG_ENOTFOUND && d->claim_posted)
                return; /* a batch is on its way: its result wakes the loop */
        if (r == TG_ENOTFOUND && d->slot_claim_landed) {
                /* the batch made for this slot came and none of it may go */
                d->slot_claim_landed = false;
                claim_missed(d, r, now, wall);
                return;
        }
        if (r == TG_ENOTFOUND) {
                /* nothing claimed ahead (idle until now): claim at the slot
                 * (with a store thread: the next turn after it came sends) */
                claim_ahead(d, 1, true, now, wall);
                if (d->claim_posted || d->claim_result < 0)
                        return; /* on its way, or failed (claim_missed said so) */
                d->slot_claim_landed = false;
                r = ready_pop(d, oc, at, now, wall);
                if (r < 0) {
                        claim_missed(d, r, now, wall);
                        return;
                }
        }
        if (r < 0)
                return;
        d->slot_claim_landed = false;
        d->claim_failures = 0;
        d->idle_step = IDLE_RECHECK_NS;
        tg_mono_ns after = d->env->mono_now(d->env->ctx);
        tg_mono_ns window_end = unpaced ? 0 : pacer_window_end(d->pacer, at);
        if (!owner_fresh(d, after) || (window_end > 0 && after > window_end)) {
                /* the claim took long enough for the owner check to go
                 * stale, or (shares) for this point's window to close: it
                 * waits at the head of the queue for the next */
                memmove(&d->ready[1], &d->ready[0], sizeof(d->ready[0]) * d->nready);
                d->ready[0] = *oc;
                d->nready++;
                return;
        }

        /* The attempt is committed: record before send. */
        failpoint_hit(d->failpoint, "crash_after_claim", &oc->op);

        oc->used = true;
        oc->unpaced = unpaced;
        oc->cookie = ++d->next_cookie;
        oc->request = oc->call.kind == TG_KIND_QUERY ? CLASSIFY_QUERY : CLASSIFY_POST;
        oc->sent_known = false;
        oc->sent = 0;
        /* stats: ready = the later of the slot and the last empty claim */
        tg_mono_ns empty = d->last_empty;
        oc->ready_at = slot > empty ? slot : empty;
        char traceparent[TG_TRACEPARENT_MAX + 1];
        exit_call_traceparent(&oc->op, &oc->call, traceparent);
        struct transport_call tc = {
            .request = oc->request,
            .operation_id = oc->op.req.operation_id,
            .refund = &oc->op.req,
            .refund_id = oc->op.refund_id,
            .request_id = oc->call.request_id,
            .attempt = oc->call.attempt,
            .timeout_ms = exit_call_timeout_ms(d->cfg->provider_timeout_ms, &oc->op, wall),
            .cookie = oc->cookie,
            .not_before = at,
            .not_after = window_end,
            .traceparent = traceparent,
        };
        oc->planned = at;
        r = d->env->start(d->env->ctx, &tc, &oc->handoff);
        if (d->query_pacer && oc->request == CLASSIFY_QUERY)
                pacer_start_pending(d->query_pacer, at, NULL);
        /* may_start held at `at` and nothing in between can close the slot:
         * the slot only moves at a start, and starts happen only here. */
        if (!unpaced && pacer_start_pending(d->pacer, at, &probe) < 0) {
                /* A programmer error, not a condition to work around: stop.
                 * The claim is committed, so the next owner reconciles the
                 * operation as unknown. */
                log_emit(LOG_ERROR, "pacer_refused_after_claim", op_fields(&oc->op, &oc->call));
                abort();
        }
        oc->probe = probe;
        oc->in_flight_at_start = pacer_in_flight(d->pacer);
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

/* Claims ahead of the next slots while there is time before the next
 * hand-off: the slot moment then costs a wake-up and a send. The queue is
 * refilled when it runs under what it must cover, to ready_fill(). */
static void refill(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        /* the next start's moment (now, when its slot has passed; never
         * INT64_MIN, the pacer's "nothing started yet") */
        tg_mono_ns at = pacer_start_at(d->pacer, now);
        unsigned want = ready_want(d);

        if (d->lost || stopping(d) || store_owes(d) || now < d->idle_until || d->nready >= want ||
            d->claim_posted || pacer_held(d->pacer, now) || at == TG_MONO_NEVER)
                return;
        /* Inline, a claim stops the loop: a call on its way to the wire (its
         * connect in progress) comes first, and the claim is made only when
         * it fits before the next hand-off. A store thread claims whenever
         * the queue runs low. */
        if (!store_worker_threaded(d->worker) &&
            (pacer_pending(d->pacer) || handoff_time(d, at) - now < 2 * d->claim_est))
                return;
        claim_ahead(d, ready_fill(d) - d->nready, false, now, wall);
}

/* ---- housekeeping and waiting ------------------------------------------------------ */

/* The provider's credential files read again (a key or certificate
 * rotated in place); a file that fails keeps the credentials in force. */
static void reload_credentials(struct dispatcher *d)
{
        char err[512] = "";
        int r = exit_env_reload_credentials(d->env, err, sizeof(err));

        if (r < 0)
                log_emit(LOG_ERROR, "provider_credentials_reload_failed",
                         json_pack("{s:s, s:s}", "error", err[0] ? err : tg_strerror(r), "result",
                                   "the credentials in force stay"));
        else
                log_emit(LOG_INFO, "provider_credentials_reloaded", NULL);
}

static int owner_run(struct store *store, void *arg)
{
        struct owner_job *j = arg;

        j->asked = j->d->env->mono_now(j->d->env->ctx);
        return store_owner_check(store);
}

static void owner_done(void *arg, int r, tg_mono_ns took)
{
        struct owner_job *j = arg;
        struct dispatcher *d = j->d;

        (void)took;
        j->posted = false;
        if (r < 0) {
                if (!d->lost)
                        log_emit(LOG_ERROR, "owner_lost",
                                 json_pack("{s:I}", "epoch", (json_int_t)d->own.epoch));
                d->lost = true;
        } else {
                d->owner_seen = j->asked;
                d->owner_checked = true;
        }
}

static int second_run(struct store *store, void *arg)
{
        struct second_job *j = arg;
        const struct dispatcher *d = j->d;

        j->sample_result =
            store_sample_put(store, &j->sample, j->keep_after, d->env->mono_now(d->env->ctx));
        j->swept = j->taken = j->invalid = 0;
        j->swept_ok =
            store_sweep_deadlines(store, d->cfg->policy.key_retention_ms, j->wall, &j->swept) == 0;
        /* outbox: refunds an application inserted in its own transaction,
         * validated like an API intake (TG_EUNSUPPORTED on SQLite) */
        j->outbox_ok =
            store_outbox_intake(store, &d->cfg->policy, j->wall, &j->taken, &j->invalid) == 0;
        /* the service's once-a-second work (daemon/service.h: watchdog,
         * readiness, retention), on the store thread and its store: it
         * comes only while the loop posts it */
        if (d->opt->housekeeping)
                d->opt->housekeeping(d->opt->hook_ctx, store, j->share, j->wall, j->lost);
        return 0;
}

static void second_done(void *arg, int r, tg_mono_ns took)
{
        struct second_job *j = arg;
        struct dispatcher *d = j->d;

        (void)r;
        (void)took;
        j->posted = false;
        if (j->sample_result < 0) {
                exit_stats_give_back(d->xstats, &j->sample); /* into the next second's */
                log_emit(LOG_DEBUG, "sample_failed", NULL);
        }
        if (j->swept_ok && j->swept > 0)
                log_emit(LOG_WARN, "deadline_sweep",
                         json_pack("{s:i}", "to_manual", (int)j->swept));
        if (j->outbox_ok && j->taken + j->invalid > 0)
                log_emit(
                    LOG_INFO, "outbox_intake",
                    json_pack("{s:i, s:i}", "taken", (int)j->taken, "invalid", (int)j->invalid));
}

/* Once a second: the owner check, the exit's sample, the deadline sweep,
 * the outbox and the service's work, posted to the store threads (the loop
 * does not wait for them: a MariaDB second is 10-20 ms of round trips); the
 * credentials read again when a reload asked. */
static void housekeeping(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        if (now < d->next_sweep)
                return;
        d->next_sweep = now + SWEEP_EVERY_NS;
        set_grid(d);
        if (!d->owner_job->posted) {
                d->owner_job->d = d;
                d->owner_job->posted = true;
                store_worker_post(d->worker, owner_run, NULL, owner_done, d->owner_job);
        }
        /* (a second whose work is still with the store thread: the next
         * sample carries this one's counts) */
        if (!d->second_job->posted) {
                struct second_job *j = d->second_job;
                j->d = d;
                j->wall = wall;
                j->share = d->own.share;
                j->lost = d->lost;
                /* stats: one exit sample a second for /metrics, /v1/stats, admission */
                exit_stats_take(d->xstats, d->own.epoch, d->own.share, pacer_in_flight(d->pacer),
                                pacer_held(d->pacer, now), wall, &j->sample, &j->keep_after);
                j->posted = true;
                store_worker_post(d->outcomes, second_run, NULL, second_done, j);
        }
        if (d->opt->credentials_due && d->opt->credentials_due(d->opt->hook_ctx))
                reload_credentials(d);
}

/* The next thing that can happen, as a monotonic time: the next slot (when
 * there is room in flight), else a recheck for new work; a reply wakes the
 * wait earlier. */
static tg_mono_ns wake_at(const struct dispatcher *d, tg_mono_ns now)
{
        /* the housekeeping second at the latest; a reply or the doorbell
         * wakes the wait earlier */
        tg_mono_ns until = d->next_sweep;

        if (d->env->open_calls(d->env->ctx) > 0 && now + IDLE_RECHECK_NS < until)
                until = now + IDLE_RECHECK_NS; /* a drain or a lost owner waits for replies */
        if (store_owes(d)) {
                /* nothing starts until the store takes what it owes: wake
                 * for the next try, not for a slot the loop may not use (it
                 * would come round again at once, and again, spinning) */
                if (d->next_settle_retry < until)
                        until = d->next_settle_retry;
        } else if (store_behind(d) || (d->claim_posted && d->nready == 0)) {
                /* the store thread rings when it is done: no slot to wake
                 * for before (it would spin) */
        } else if (!d->lost && !stopping(d) && owner_fresh(d, now) &&
                   pacer_in_flight(d->pacer) < d->share_cfg.max_in_flight) {
                tg_mono_ns at = pacer_start_at(d->pacer, now);
                if (at != TG_MONO_NEVER) {
                        tg_mono_ns handoff = handoff_time(d, at);
                        tg_mono_ns t =
                            handoff > d->idle_until || d->nready ? handoff : d->idle_until;
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
        int r;
        tg_mono_ns now = env->mono_now(env->ctx);
        tg_wall_ms wall = env->wall_now(env->ctx);

        /* the store thread's results: claims onto the ready queue, outcomes
         * committed (logged and counted) */
        store_worker_collect(d->worker);
        if (d->outcomes != d->worker)
                store_worker_collect(d->outcomes);
        settle_finished(d, now, wall);
        retry_unsettled(d, now, wall);
        if (stopping(d) || d->lost)
                release_ready(d, stopping(d) ? "stop" : "owner lost", now, wall);
        if ((stopping(d) || d->lost) && env->open_calls(env->ctx) == 0 && store_pending(d) == 0) {
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
                d->n_unreleased = 0;
                d->lost = false;
                r = ownership_rejoin(&d->own);
                set_grid(d);
                /* a fresh check of the new lock before the next start */
                d->owner_checked = false;
                d->next_sweep = 0;
                if (r != 0) {
                        if (r != 1)
                                d->lost = true; /* could not: the loop ends with 1 */
                        return 1;
                }
                return 0;
        }
        housekeeping(d, now, wall);
        try_start(d, now, wall);
        refill(d, env->mono_now(env->ctx), env->wall_now(env->ctx));
        r = env->poll(env->ctx, wake_at(d, env->mono_now(env->ctx)));
        if (r == 1) {
                /* work arrived: look for it now */
                d->idle_until = INT64_MIN;
                d->idle_step = IDLE_RECHECK_NS;
        } else if (r < 0) {
                env->sleep(env->ctx, STORE_DOWN_NS);
        }
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
        set_grid(d);
        json_t *f = json_pack("{s:f, s:i, s:I, s:i, s:i}", "starts_per_second",
                              d->share_cfg.starts_per_second, "max_in_flight",
                              (int)d->share_cfg.max_in_flight, "timeout_ms",
                              (json_int_t)d->cfg->provider_timeout_ms, "share", (int)d->own.share,
                              "shares", (int)d->own.split.shares);
        if (d->own.split.shares > 1) {
                /* the share's windows: a run of points at the account's spacing */
                json_object_set_new(f, "window_points", json_integer(d->grid.points));
                json_object_set_new(f, "window_us",
                                    json_integer((json_int_t)(d->grid.window / TG_NS_PER_US)));
                json_object_set_new(f, "spacing_us",
                                    json_integer((json_int_t)(d->grid.spacing / TG_NS_PER_US)));
        }
        log_emit(LOG_INFO, "exit_open", f);
        return 0;
}

void dispatcher_share_config(const struct tg_config *cfg, struct pacer_config *ret_share)
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
static int grid_plan(struct dispatcher *d, const struct tg_config *cfg)
{
        struct pacer_config acct = {.starts_per_second = cfg->exit.starts_per_second,
                                    .max_in_flight = cfg->exit.max_in_flight,
                                    .spacing_margin_ns = cfg->exit.spacing_margin_ns};
        struct pacer *tmp = NULL;
        int r = pacer_new(&acct, &tmp);

        if (r == 0)
                r = pacer_grid_plan(pacer_interval(tmp), cfg->exit_clock_skew_ms * TG_NS_PER_MS,
                                    d->share_cfg.max_in_flight, &d->grid);
        pacer_free(tmp);
        return r;
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
        r = failpoint_armed(&d->failpoint);
        if (r < 0) {
                free(d);
                return r;
        }
        d->claim_est = CLAIM_EST_INIT;
        d->last_empty = INT64_MIN;
        d->idle_step = IDLE_RECHECK_NS;
        d->idle_max = cfg->exit_idle_poll_max_ms * TG_NS_PER_MS;
        if (d->idle_max < IDLE_RECHECK_NS)
                d->idle_max = IDLE_RECHECK_NS;
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
                                  .limited_hold_max_ms = limited_hold_max(cfg),
                                  .timeout_run_hold = cfg->exit_timeout_run_hold,
                                  .timeout_hold_ms = cfg->exit_timeout_hold_ms,
                                  .unreachable_run_hold = cfg->provider_unreachable_run_hold,
                                  .unreachable_hold_ms = cfg->provider_unreachable_hold_ms,
                                  .unreachable_hold_max_ms = cfg->provider_unreachable_hold_max_ms};
        /* Every quota below is a share's, the query sub-quota too. An empty
         * pacer: nothing carried over from before, no catch-up. */
        dispatcher_share_config(cfg, &d->share_cfg);
        r = pacer_new(&d->share_cfg, &d->pacer);
        if (r == 0)
                d->own.spacing_ns = pacer_interval(d->pacer);
        if (r == 0 && shares > 1)
                r = grid_plan(d, cfg);
        if (r == 0 && cfg->exit_query_starts_per_second > 0) {
                struct pacer_config q = {.starts_per_second =
                                             cfg->exit_query_starts_per_second / shares,
                                         .max_in_flight = d->share_cfg.max_in_flight};
                r = pacer_new(&q, &d->query_pacer);
        }
        if (r == 0)
                r = classifier_new_default(&d->classifier);
        if (r == 0)
                r = store_worker_new(env->store, env->store_bell, env->mono_now, env->ctx,
                                     &d->worker);
        d->outcomes = d->worker;
        if (r == 0 && env->outcome_store && env->store_bell)
                r = store_worker_new(env->outcome_store, env->store_bell, env->mono_now, env->ctx,
                                     &d->outcomes);
        if (r == 0 && !(d->claim = calloc(1, sizeof(*d->claim))))
                r = TG_ENOMEM;
        if (r == 0 && !(d->owner_job = calloc(1, sizeof(*d->owner_job))))
                r = TG_ENOMEM;
        if (r == 0 && !(d->second_job = calloc(1, sizeof(*d->second_job))))
                r = TG_ENOMEM;
        for (unsigned i = 0; r == 0 && i < cfg->rule_count; i++)
                r = classifier_add_rule(d->classifier, &cfg->rules[i]);
        if (r == 0)
                r = exit_stats_new(env->wall_now(env->ctx), &d->xstats);
        if (r == 0)
                exit_stats_set_keep(d->xstats, (int64_t)cfg->stats_keep_hours * 3600 * 1000);
        d->ncalls = d->share_cfg.max_in_flight;
        if (r == 0) {
                d->calls = calloc(d->ncalls, sizeof(*d->calls));
                d->unsettled = calloc(UNSETTLED_MAX(d), sizeof(*d->unsettled));
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
        /* the outcomes posted are committed (and logged) first */
        if (d->outcomes != d->worker)
                store_worker_free(d->outcomes);
        store_worker_free(d->worker);
        free(d->claim);
        free(d->owner_job);
        free(d->second_job);
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
        r = exit_env_real(config, share.max_in_flight, options->doorbell, &env);
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
