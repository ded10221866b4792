/*
 * exit_settle — a call's end, for one exit (exit.h): the pacers let it go,
 * its wire time counts the next slot and teaches the connect lead, what it
 * says about the account (a 429/503, a run of timeouts, an unreachable
 * provider) holds the exit (core/holds.h), and its outcome, classified and
 * decided by the policy, is committed through the store thread
 * (store_settle, several together in one transaction). An outcome or a
 * release the store could not take waits here and is asked again every
 * SETTLE_RETRY_NS; while any waits, the exit starts nothing.
 *
 * Invariants: a call leaves the pacers (pacer_finish) exactly once, when
 * it has left the transport; an outcome is never guessed: one the store
 * never took stays in flight in the store, for the next owner to reconcile
 * as unknown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/retry_after.h"
#include "core/tg_error.h"
#include "daemon/exit_call.h"
#include "daemon/exit_int.h"
#include "daemon/failpoint.h"
#include "daemon/log.h"

/* An outcome on its way through the store thread, with what the log line
 * and the figures need once it is committed. */
struct settle_job {
        struct exit *e;
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

static struct open_call *find_call(struct exit *e, uint64_t cookie)
{
        for (unsigned i = 0; i < e->ncalls; i++)
                if (e->calls[i].used && e->calls[i].cookie == cookie)
                        return &e->calls[i];
        return NULL;
}

static void apply_holds(struct exit *e, const struct open_call *oc,
                        const struct transport_result *res, int64_t retry_after_ms, tg_mono_ns now)
{
        struct holds_call hc = {.transport = res->reply.transport,
                                .http_status = res->reply.http_status,
                                .retry_after_ms = retry_after_ms,
                                .probe = oc->probe,
                                .key_in_progress = res->reply.key_in_progress};
        struct holds_decision h;
        json_t *f;

        holds_after_call(&e->holds_cfg, &e->holds, &hc, &h);
        if (e->adaptive_on &&
            (h.why == HOLDS_LIMITED || h.why == HOLDS_PUSHBACK || h.why == HOLDS_TIMEOUTS)) {
                /* pushback on a call sent at the present rate: cut it (one
                 * sent before the last cut was answered by that cut) */
                double was = adaptive_rate(&e->adaptive, now);
                if (adaptive_pushback(&e->adaptive, oc->sent > 0 ? oc->sent : oc->planned, now)) {
                        f = exit_op_fields(&oc->op, &oc->call);
                        json_object_set_new(f, "http_status", json_integer(hc.http_status));
                        json_object_set_new(f, "rate_was", json_real(was));
                        json_object_set_new(f, "rate", json_real(adaptive_rate(&e->adaptive, now)));
                        log_emit(LOG_WARN, "exit_rate_cut", f);
                        exit_follow_rate(e, now);
                }
        }
        if (h.why == HOLDS_PUSHBACK)
                h.why = HOLDS_NONE; /* no hold: the cut above was the answer */
        /* a hold counts from the call's end, or from its slot when it ended
         * sooner (never sent: its connect failed before the slot came) */
        tg_mono_ns from = now > oc->planned ? now : oc->planned;
        if (h.why == HOLDS_LIMITED) {
                pacer_hold(e->pacer, from + h.hold_ms * TG_NS_PER_MS);
                /* the provider spoke to the account: every share holds */
                if (e->own.split.shares > 1) {
                        store_worker_lock(e->worker);
                        int r =
                            store_hold_raise(e->store, e->env->wall_now(e->env->ctx) + h.hold_ms);
                        store_worker_unlock(e->worker);
                        if (r < 0)
                                log_emit(LOG_WARN, "account_hold_not_shared", NULL);
                }
                f = exit_op_fields(&oc->op, &oc->call);
                json_object_set_new(f, "http_status", json_integer(hc.http_status));
                json_object_set_new(f, "hold_ms", json_integer(h.hold_ms));
                log_emit(LOG_WARN, "exit_hold", f);
        } else if (h.why == HOLDS_TIMEOUTS) {
                pacer_hold(e->pacer, from + h.hold_ms * TG_NS_PER_MS);
                log_emit(LOG_WARN, "exit_hold_timeouts",
                         json_pack("{s:i, s:I}", "timeouts_in_row", (int)h.timeouts_in_row,
                                   "hold_ms", (json_int_t)h.hold_ms));
        } else if (h.why == HOLDS_UNREACHABLE) {
                /* The provider cannot be reached (refused, DNS, TLS): the
                 * cause is in the line, so a misconfiguration reads at once. */
                pacer_hold(e->pacer, from + h.hold_ms * TG_NS_PER_MS);
                log_emit(LOG_WARN, "exit_hold_unreachable",
                         json_pack("{s:i, s:I, s:s, s:s, s:b}", "calls_in_row",
                                   (int)h.unreachable_in_row, "hold_ms", (json_int_t)h.hold_ms,
                                   "cause", transport_failure_name(res->failure), "error",
                                   res->error, "probe", oc->probe));
        }
        if (h.probe_done)
                pacer_probe_done(e->pacer, h.probe_healthy);
        if (h.why != HOLDS_NONE) {
                /* stats: a provider-wide hold, and when it ends */
                exit_stats_held(e->xstats, e->env->wall_now(e->env->ctx) + h.hold_ms);
                /* claims made ahead can no longer go out in time (a hold no
                 * longer than a slot only delays the next one: it stays) */
                if (h.hold_ms * TG_NS_PER_MS > pacer_interval(e->pacer))
                        exit_release_ready(e, "hold", now, e->env->wall_now(e->env->ctx));
                exit_stats_waited(e->xstats, EXIT_WAIT_HOLD, h.hold_ms);
        }
}

/* A handed-over call is over (settled, or given back unsent): it leaves
 * the pacers' in-flight counts. */
static void pacers_finish(struct exit *e, const struct open_call *oc)
{
        if (!(PLANT_RETRY_SKIPS_PACER && oc->unpaced))
                pacer_finish(e->pacer);
        struct pacer *sub = exit_sub(e, oc->call.kind);

        if (sub && !(PLANT_RETRY_SKIPS_PACER && oc->unpaced)) {
                pacer_finish(sub);
                exit_sub_moved(e); /* room in flight for its kind */
        }
}

/* Where the next slot counts from, for a request let out at `at` that had
 * surely left by `end`: `at`, unless what came between (libcurl building
 * and writing the request, and a preemption there) took longer than the
 * spacing margin covers; then `end` less the margin. The provider's gap to
 * the next request is at least (its hook) - end >= 1/rate either way. */
static tg_mono_ns sent_ref(const struct exit *e, tg_mono_ns at, tg_mono_ns end)
{
        tg_mono_ns covered = end - e->cfg->exit.spacing_margin_ns;

        return end > 0 && covered > at ? covered : at;
}

/* A call's request went on the wire at `at` (or never will), surely by
 * `end`: the next slot counts from that real start, and its connect teaches
 * the lead. */
static void sent_known(struct exit *e, struct open_call *oc, bool sent, bool late, tg_mono_ns ready,
                       tg_mono_ns at, tg_mono_ns end)
{
        if (oc->sent_known)
                return;
        oc->sent_known = true;
        oc->sent = sent ? at : 0;
        if (PLANT_RETRY_SKIPS_PACER && oc->unpaced)
                return;
        /* its kind's sub-quota counts from the same real start */
        struct pacer *sub = exit_sub(e, oc->call.kind);
        if (sent) {
                failpoint_hit(e->failpoint, "crash_after_send", &oc->op);
                pacer_sent(e->pacer,
                           PLANT_HANDOFF_SPACING ? oc->handoff.mono : sent_ref(e, at, end));
                if (sub)
                        pacer_sent(sub, sent_ref(e, at, end));
        } else {
                pacer_unsent(e->pacer);
                if (sub)
                        pacer_unsent(sub);
        }
        /* a connect teaches the lead, also one that came too late to send */
        if (ready > 0 && ready >= oc->handoff.mono)
                lead_estimator_add(&e->lead, ready - oc->handoff.mono);
        /* stats: lateness is the wire start (else the hand-off) after the
         * earliest moment it could have been; a call refused as late for
         * its window was no call (its claim goes back) and is not a start */
        if (late)
                return;
        exit_stats_started(e->xstats, oc->call.kind, oc->ready_at,
                           sent                             ? at
                           : oc->planned > oc->handoff.mono ? oc->planned
                                                            : oc->handoff.mono);
}

/* An outcome committed (r == 0) or not: the exit pauses on one the store
 * could not take, the log says where the operation went, the figures count
 * it. On the dispatcher's thread, after the store thread's commit. */
static void settle_logged(struct exit *e, const struct settle_job *j, int r)
{
        const struct policy_decision *decision = &j->sa.decision;
        enum tg_class cls = j->sa.cls;

        /* A store that cannot take it now keeps the outcome here and pauses
         * the exit until it can (retry_unsettled); if this process dies
         * meanwhile, the row is still in_flight and the next owner
         * reconciles it as unknown: never guessed. */
        if (r < 0 && r != TG_EFENCED && e->n_unsettled < UNSETTLED_MAX(e)) {
                if (e->n_unsettled == 0)
                        log_emit(LOG_ERROR, "exit_paused_store",
                                 json_pack("{s:s}", "error", tg_strerror(r)));
                e->unsettled[e->n_unsettled++] = j->sa;
                e->next_settle_retry = e->env->mono_now(e->env->ctx) + SETTLE_RETRY_NS;
        }
        /* an outcome may make this operation due again (a retry, a query):
         * an idle wait taken before it must be taken again, or the next
         * call would come as late as the longest idle wait */
        if (r == 0 && (decision->next == OP_RETRY_WAIT || decision->next == OP_UNKNOWN))
                e->idle_until = INT64_MIN;
        json_t *f = exit_op_fields(&j->op, &j->call);
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
                e->lost = true;
                log_emit(LOG_ERROR, "settle_fenced", f);
        } else if (r < 0) {
                json_object_set_new(f, "store_error", json_string(tg_strerror(r)));
                log_emit(LOG_ERROR, "settle_failed", f);
        } else {
                log_emit(LOG_INFO, "call_end", f);
        }
        /* stats: class, latency, and where the operation went */
        exit_stats_ended(e->xstats, j->call.kind, cls, j->latency_us,
                         r == 0 ? decision->next : OP_IN_FLIGHT, j->op.attempts);
        if (r == 0 && (decision->next == OP_RETRY_WAIT || decision->next == OP_UNKNOWN))
                exit_stats_waited(e->xstats,
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
        settle_logged(j->e, j, r);
        if (j->on_heap)
                free(j);
}

/* A query's answer and the operation's walk of a list (core/list_walk.h):
 * true when it was a page without ours and the next page is to be asked
 * at once. Only a complete 2xx list answer is a page; a list read one page
 * at a time (no provider.list_cursor_param) walks no further than it. */
static bool walk_on(struct exit *e, const struct open_call *oc, const struct transport_result *res,
                    enum tg_class cls)
{
        const struct provider_reply *reply = &res->reply;
        bool page = reply->transport == TG_TR_COMPLETE && reply->http_status / 100 == 2;
        unsigned max_pages =
            e->cfg->provider_list_cursor_param[0] ? e->cfg->provider_list_max_pages : 1;
        enum list_walk_step step;

        if (oc->request != CLASSIFY_QUERY)
                return false;
        step = list_walk_after(e->walks, oc->op.id, oc->op.attempts, oc->op.queries, oc->list_page,
                               page ? reply->list : REPLY_LIST_NONE, reply->list_cursor, max_pages);
        if (step == LIST_WALK_BOUNDED && max_pages > 1) {
                /* the list is not known complete: no_answer, never not_found */
                json_t *f = exit_op_fields(&oc->op, &oc->call);
                json_object_set_new(f, "list_page", json_integer(oc->list_page));
                json_object_set_new(f, "list_max_pages", json_integer(max_pages));
                log_emit(LOG_WARN, "list_walk_bounded", f);
        }
        return step == LIST_WALK_NEXT && cls == TG_CLASS_NO_ANSWER;
}

static void settle_call(struct exit *e, struct open_call *oc, const struct transport_result *res,
                        tg_mono_ns now, tg_wall_ms wall)
{
        enum tg_class cls = classify(e->classifier, oc->request, &res->reply);

        /* oauth2: a 401 gives the token the call carried up */
        exit_token_answered(e, oc->token_gen, res, now);
        struct policy_decision decision;
        struct settle_job local, *j = malloc(sizeof(*j));
        int64_t ra = -1, v;

        failpoint_hit(e->failpoint, "crash_before_settle", &oc->op);
        /* a call that ended with no sent report popped (the transport
         * refused it) */
        sent_known(e, oc, res->sent && res->sent_mono > 0, false, res->ready_mono, res->sent_mono,
                   res->sent_end_mono);
        /* every Retry-After value, the longest (core/retry_after.h), cut to
         * the cap that leaves room for the deadline */
        if (res->retry_after[0] &&
            retry_after_parse_all(res->retry_after, strlen(res->retry_after), wall,
                                  config_retry_after_cap_ms(e->cfg), transport_http_date, &v) == 0)
                ra = v;
        /* a 429/503 refused the call for the whole account: nothing was
         * executed, and the policy gives the call back to its budget */
        struct policy_event ev = {
            .request = oc->request,
            .cls = cls,
            .retry_after_ms = ra,
            .refund_id_known = oc->op.refund_id[0] != '\0' || res->reply.refund_id[0] != '\0',
            .now = wall,
            .limited = !res->reply.key_in_progress &&
                       holds_limited(res->reply.transport, res->reply.http_status)};
        policy_call_outcome(&e->cfg->policy, &oc->op, &ev, &e->rng, &decision);
        if (walk_on(e, oc, res, cls))
                policy_next_page(&ev, &decision);
        struct exit_call_end end = {.op = &oc->op,
                                    .call = &oc->call,
                                    .epoch = e->own.epoch,
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
        j->e = e;
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
                store_worker_post(e->outcomes, settle_run, settle_many, settle_done, j);
        else /* no memory for the job: now, on this thread */
                store_worker_run_now(e->outcomes, settle_run, settle_done, j);
        pacers_finish(e, oc);
        apply_holds(e, oc, res, ra, now);
        oc->used = false;
}

/* The store owes us an outcome or a release: nothing starts until it took
 * them. */
bool exit_store_owes(const struct exit *e)
{
        return e->n_unsettled > 0 || e->n_unreleased > 0;
}

/* Jobs posted to the store threads whose results were not taken yet. */
unsigned exit_store_pending(const struct exit *e)
{
        unsigned n = store_worker_pending(e->worker);

        return e->outcomes != e->worker ? n + store_worker_pending(e->outcomes) : n;
}

/* The store threads are behind by more than STORE_AHEAD outcomes an open
 * call: nothing starts until they caught up. Bounded, so the outcomes that
 * wait (lost in a crash: reconciled as unknown) stay few; not one per open
 * call, so that outcomes that come together can wait together and share a
 * commit (store_settle_batch). */
bool exit_store_behind(const struct exit *e)
{
        return exit_store_pending(e) > STORE_AHEAD * e->ncalls;
}

/* Asks the store again for outcomes and releases it could not take. */
void exit_retry_unsettled(struct exit *e, tg_mono_ns now, tg_wall_ms wall)
{
        unsigned kept = 0;

        if (!exit_store_owes(e) || now < e->next_settle_retry)
                return;
        store_worker_lock(e->worker);
        for (unsigned i = 0; i < e->n_unreleased; i++) {
                const struct unreleased *u = &e->unreleased[i];
                int r =
                    store_release(e->store, e->own.epoch, u->op_id, u->call_id, now, wall, u->why);
                /* fenced: a newer owner recovers it */
                if (r < 0 && r != TG_EFENCED)
                        e->unreleased[kept++] = *u;
        }
        e->n_unreleased = kept;
        kept = 0;
        for (unsigned i = 0; i < e->n_unsettled; i++) {
                int r = store_settle(e->store, &e->unsettled[i]);
                if (r == TG_EFENCED) {
                        e->lost = true;
                        log_emit(
                            LOG_ERROR, "settle_fenced",
                            json_pack("{s:I}", "call_id", (json_int_t)e->unsettled[i].call_id));
                } else if (r < 0) {
                        e->unsettled[kept++] = e->unsettled[i];
                }
        }
        store_worker_unlock(e->worker);
        e->n_unsettled = kept;
        e->next_settle_retry = now + SETTLE_RETRY_NS;
        if (!exit_store_owes(e))
                log_emit(LOG_INFO, "exit_resumed_store", NULL);
}

/* Shares: the call's connection was ready after its window closed, and
 * nothing was sent (the transport refused it in the pre-request hook): the
 * claim goes back as one made ahead and never sent would, no attempt spent,
 * no hold (the provider is fine; our connect was slow). The operation is
 * claimed again for a later point. */
static void release_late(struct exit *e, struct open_call *oc, const struct transport_result *res,
                         tg_mono_ns now, tg_wall_ms wall)
{
        sent_known(e, oc, false, true, res->ready_mono, 0, 0); /* if its report was not popped */
        exit_release_claim(e, oc, "late for its window", now, wall);
        pacers_finish(e, oc);
        /* a probe that never went: still held, the next point probes */
        if (oc->probe)
                pacer_probe_done(e->pacer, false);
        oc->used = false;
}

void exit_sent(struct exit *e, const struct transport_sent *s)
{
        struct open_call *oc = find_call(e, s->cookie);

        if (!oc && exit_token_sent(e, s))
                return;
        if (oc)
                sent_known(e, oc, s->sent, s->late, s->ready_mono, s->sent_mono, s->sent_end_mono);
}

void exit_done(struct exit *e, const struct transport_result *res, tg_mono_ns now, tg_wall_ms wall)
{
        struct open_call *oc = find_call(e, res->cookie);

        if (!oc && exit_token_done(e, res, now))
                return;
        if (oc && res->failure == TRANSPORT_LATE)
                release_late(e, oc, res, now, wall);
        else if (oc)
                settle_call(e, oc, res, now, wall);
}

/* A call the transport could not take: nothing left the machine. */
void exit_settle_unsent(struct exit *e, struct open_call *oc, int why, tg_mono_ns now,
                        tg_wall_ms wall)
{
        struct transport_result res;

        memset(&res, 0, sizeof(res));
        res.cookie = oc->cookie;
        res.reply.transport = TG_TR_NOT_SENT;
        res.failure = TRANSPORT_OTHER;
        snprintf(res.error, sizeof(res.error), "transport refused the call: %s", tg_strerror(why));
        settle_call(e, oc, &res, now, wall);
}
