/*
 * sim_check — tollgate's promises, checked while a simulated run goes on
 * (sim_world.c). At the provider's door, as each request reaches the wire:
 *   spacing    no two starts closer than 1/rate (wire times, every process);
 *   in_flight  at each hand-off, calls open at every live process <= cap;
 *   one_key    a call carries its operation's id as key, a POST its payload;
 *   recorded   the attempt is committed before its bytes leave: the store
 *              has the operation in flight under the call's epoch, with
 *              the attempt (or query) counted;
 *   attempts   POSTs per key <= max_attempts (+ one per operator re-send, + one
 *              per 429/503 tollgate heard, unless retry.count_limited);
 *   reconcile  after a POST whose outcome tollgate could not know, the next
 *              call is a query, until one answers not_found (or an operator
 *              re-sends);
 *   owner      one sender at a time (epochs name owners): no call of an
 *              epoch reaches the provider after a newer epoch's first call,
 *              nor while a call of an older one may still be open there
 *              (until its answer or its timeout: a dead owner's calls
 *              too, which is what the takeover wait is for);
 *   unexpected no call for a key the simulation never submitted;
 *   executed_twice  the provider's ledger never executes a key twice.
 * From the store (a connection of the simulation's own, never faulted),
 * every VIEW_EVERY (1 s) of virtual time:
 *   lost       nothing accepted is gone;
 *   deadline   no operation open (pending, in flight, retry_wait, unknown)
 *              past its deadline longer than the slack the design allows:
 *              one call timeout (a call's timeout is cut to the deadline at
 *              its hand-off, a moment before its start), one 1/rate (a claim
 *              made ahead is given back at its slot when its deadline
 *              passed meanwhile) and 2 s (the sweep runs once a second; a
 *              settle is retried every 200 ms), counted from the later of
 *              the moment it was seen overdue and the end of the last
 *              disruption (a process down or taking over, store faults).
 * At the end, after the drain: every accepted operation final or in manual;
 * succeeded only if the provider executed it (lost), rejected only if it
 * did not (unexpected); no key executed twice.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"
#include "sim/sim_int.h"

#define MS TG_NS_PER_MS

static double ms(tg_mono_ns ns)
{
        return (double)ns / 1e6;
}

void sim_check_handoff(struct sim_world *w, struct sim_proc *p, const struct transport_call *call)
{
        unsigned open = 0;

        for (unsigned i = 0; i < w->nprocs; i++)
                if (w->procs[i]->state != PROC_DEAD)
                        open += sim_env_open(w->procs[i]->env);
        if (open > w->cfg.exit.max_in_flight)
                sim_fail(w, "in_flight",
                         "p%u hands %s over with %u calls open at the processes, cap %u", p->id,
                         call->operation_id, open, w->cfg.exit.max_in_flight);
}

static bool same_payload(const struct refund_request *a, const struct refund_request *b)
{
        return strcmp(a->operation_id, b->operation_id) == 0 &&
               strcmp(a->payment_id, b->payment_id) == 0 && a->amount == b->amount &&
               strcmp(a->currency, b->currency) == 0;
}

void sim_check_arrival(struct sim_world *w, struct sim_proc *p, const struct transport_call *call,
                       tg_mono_ns wire)
{
        struct sim_op *op = sim_op_of(w, call->operation_id);
        const struct sim_key *k = sim_provider_key(w->provider, call->operation_id);
        int64_t epoch = sim_request_epoch(call->request_id);
        bool post = call->request == CLASSIFY_POST;
        unsigned pid = p ? p->id : 0;

        if (!op || !op->submitted) {
                w->res->unexpected++;
                sim_fail(w, "unexpected", "p%u sends a call for %s, a key never submitted", pid,
                         call->operation_id);
                return;
        }
        if (post && (!call->refund || !same_payload(call->refund, &op->req)))
                sim_fail(w, "one_key", "p%u POSTs %s with another operation's payload or key", pid,
                         call->operation_id);
        /* record before send: the attempt is committed, in flight under the
         * call's epoch, before its bytes reach the provider */
        struct op_record rec;
        if (store_get(w->view, call->operation_id, &rec) < 0 || rec.state != OP_IN_FLIGHT ||
            rec.epoch != epoch || (post ? rec.attempts : rec.queries) < call->attempt)
                sim_fail(w, "recorded",
                         "p%u's %s of %s (attempt %u, epoch %lld) reaches the provider while "
                         "the store does not have it in flight under that epoch",
                         pid, post ? "POST" : "query", call->operation_id, call->attempt,
                         (long long)epoch);
        /* the provider's door: starts at least 1/rate apart */
        if (w->last_wire != TG_MONO_NEVER && wire - w->last_wire < w->interval) {
                w->res->spacing_violations++;
                sim_fail(w, "spacing",
                         "%s (epoch %lld) reaches the provider %.3f ms after %s (epoch %lld): "
                         "1/rate is %.3f ms",
                         call->operation_id, (long long)epoch, ms(wire - w->last_wire),
                         w->last_wire_op, (long long)w->last_wire_epoch, ms(w->interval));
        }
        if (w->last_wire == TG_MONO_NEVER || wire >= w->last_wire) {
                w->last_wire = wire;
                snprintf(w->last_wire_op, sizeof(w->last_wire_op), "%s", call->operation_id);
                w->last_wire_epoch = epoch;
        }
        /* one sender at a time: an owner sends nothing once a newer one
         * has, and a newer one nothing while an older one's call may still
         * be open at the provider */
        if (epoch <= 0 || epoch >= SIM_EPOCHS_MAX) {
                sim_fail(w, "owner", "p%u: request id %s names no epoch", pid, call->request_id);
        } else if (epoch < w->newest_sending) {
                sim_fail(w, "owner",
                         "p%u's call of %s under epoch %lld reaches the provider %.3f ms after "
                         "epoch %lld's first call",
                         pid, call->operation_id, (long long)epoch,
                         ms(wire - w->epoch_first_wire[w->newest_sending]),
                         (long long)w->newest_sending);
        } else {
                for (int64_t e = 1; e < epoch; e++)
                        if (w->epoch_last_end[e] > wire) {
                                sim_fail(w, "owner",
                                         "p%u's call of %s under epoch %lld reaches the provider "
                                         "while a call of epoch %lld is open there (for %.3f ms "
                                         "more): two owners send at once",
                                         pid, call->operation_id, (long long)epoch, (long long)e,
                                         ms(w->epoch_last_end[e] - wire));
                                break;
                        }
                if (epoch > w->newest_sending) {
                        w->newest_sending = epoch;
                        w->epoch_first_wire[epoch] = wire;
                }
        }
        if (!post)
                return;
        /* POSTs per key, operator re-sends aside, and the 429/503 answers
         * tollgate heard (retry.count_limited = false: a POST the provider
         * refused unexecuted gives its attempt back) */
        unsigned posts = (k ? k->posts : 0) + 1;
        if (posts > w->cfg.policy.max_attempts + op->resends + op->limited)
                sim_fail(w, "attempts",
                         "%s: POST number %u at the provider (max_attempts %u, %u "
                         "operator re-send(s), %u refused unexecuted)",
                         call->operation_id, posts, w->cfg.policy.max_attempts, op->resends,
                         op->limited);
        if (posts > op->resends && posts - op->resends > w->res->max_posts_per_key)
                w->res->max_posts_per_key = posts - op->resends;
        /* an unknown outcome is reconciled by a query, never by a re-POST */
        if (op->must_query && !op->resend_pending)
                sim_fail(w, "reconcile",
                         "%s is POSTed again (attempt %u) after an outcome tollgate could not "
                         "know, with no query answering not_found in between",
                         call->operation_id, call->attempt);
        op->resend_pending = false;
        op->must_query = true; /* until tollgate hears it was not executed */
}

void sim_check_answered(struct sim_world *w, const struct transport_call *call, tg_mono_ns wire,
                        tg_mono_ns end)
{
        int64_t epoch = sim_request_epoch(call->request_id);

        (void)wire;
        if (epoch > 0 && epoch < SIM_EPOCHS_MAX && end > w->epoch_last_end[epoch])
                w->epoch_last_end[epoch] = end;
}

void sim_check_executed(struct sim_world *w, const char *key)
{
        const struct sim_key *k = sim_provider_key(w->provider, key);

        if (k && k->executions > 1) {
                w->res->executed_twice++;
                sim_fail(w, "executed_twice",
                         "the provider executed %s %u times (the key was forgotten %u time(s))",
                         key, k->executions, k->forgotten);
        }
}

void sim_check_delivered(struct sim_world *w, const struct transport_result *res,
                         const char *operation_id, enum classify_request request)
{
        struct sim_op *op = sim_op_of(w, operation_id);
        int status = res->reply.http_status;

        if (!op || res->reply.transport != TG_TR_COMPLETE)
                return;
        /* tollgate heard that nothing was executed: a POST may go again */
        if ((request == CLASSIFY_POST && (status == 429 || status == 503)) ||
            (request == CLASSIFY_QUERY && status == 404))
                op->must_query = false;
        if (request == CLASSIFY_POST && (status == 429 || status == 503) &&
            !w->cfg.policy.count_limited)
                op->limited++;
}

/* ---- the store's view ----------------------------------------------------------- */

struct view_walk {
        struct sim_world *w;
        tg_wall_ms wall;
        tg_mono_ns slack;
        unsigned open;
        int64_t last_id;
};

static int see_open(const struct op_record *rec, void *userdata)
{
        struct view_walk *v = userdata;
        struct sim_world *w = v->w;
        struct sim_op *op = sim_op_of(w, rec->req.operation_id);

        v->last_id = rec->id;
        v->open++;
        if (!op)
                return 0;
        op->seen_gen = w->view_gen;
        if (rec->deadline_at <= 0 || v->wall <= rec->deadline_at) {
                op->overdue_at = TG_MONO_NEVER; /* (the wall clock may have stepped back) */
                return 0;
        }
        /* it went past its deadline since the last look: as long ago as its
         * wall clock says, but no longer than that look (the wall clock may
         * have stepped forward) */
        tg_mono_ns late = (v->wall - rec->deadline_at) * MS;
        if (op->overdue_at == TG_MONO_NEVER)
                op->overdue_at =
                    w->clock.mono - late > w->last_view ? w->clock.mono - late : w->last_view;
        /* late on tollgate's own clock, and for that long since it could
         * act (the wall clock may have stepped back since) */
        tg_mono_ns from = op->overdue_at > w->disrupted_until ? op->overdue_at : w->disrupted_until;
        if (w->clock.mono - from > v->slack && late > v->slack)
                sim_fail(w, "deadline",
                         "%s is still %s %.0f ms past its deadline (overdue for %.0f ms, "
                         "%.0f ms after the last disruption; the slack is %.0f ms)",
                         rec->req.operation_id, op_state_name(rec->state), ms(late),
                         ms(w->clock.mono - op->overdue_at), ms(w->clock.mono - w->disrupted_until),
                         ms(v->slack));
        return 0;
}

static bool disrupted(const struct sim_world *w)
{
        bool running = false;

        if (w->fault_until > w->clock.mono)
                return true;
        /* a process taking over (its takeover wait, its recovery) holds the
         * operations the old owner left in flight; a standby that has not
         * taken anything yet holds nothing */
        for (unsigned i = 0; i < w->nprocs; i++) {
                if (w->procs[i]->state == PROC_OPENING && w->procs[i]->took_epoch)
                        return true;
                running |= w->procs[i]->state == PROC_RUNNING;
        }
        return !running;
}

unsigned sim_check_view(struct sim_world *w)
{
        static const enum op_state open_states[] = {OP_PENDING, OP_IN_FLIGHT, OP_RETRY_WAIT,
                                                    OP_UNKNOWN};
        struct view_walk v = {.w = w,
                              .wall = sim_clock_wall(&w->clock),
                              .slack =
                                  w->cfg.provider_timeout_ms * MS + w->interval + 2 * TG_NS_PER_S};
        struct store_stats st;
        unsigned accepted = 0;
        uint64_t total = 0;

        if (w->failed)
                return 0;
        if (disrupted(w) && w->disrupted_until < w->clock.mono)
                w->disrupted_until = w->clock.mono;
        w->view_gen++;
        for (unsigned s = 0; s < sizeof(open_states) / sizeof(open_states[0]); s++) {
                v.last_id = 0;
                for (;;) {
                        unsigned before = v.open;
                        if (store_list_state(w->view, open_states[s], v.last_id, 256, see_open,
                                             &v) < 0) {
                                sim_fail(w, "setup", "the simulation cannot read its store");
                                return 0;
                        }
                        if (v.open - before < 256)
                                break;
                }
        }
        for (unsigned i = 0; i < w->nops; i++) {
                if (w->ops[i].seen_gen != w->view_gen)
                        w->ops[i].overdue_at = TG_MONO_NEVER;
                accepted += w->ops[i].accepted;
        }
        w->last_view = w->clock.mono;
        w->open_seen = v.open;
        if (store_stats(w->view, &st) == 0) {
                for (unsigned s = 0; s < OP_STATE_COUNT; s++)
                        total += st.by_state[s];
                if (total < accepted) {
                        w->res->lost += accepted - (unsigned)total;
                        sim_fail(w, "lost", "%u refunds accepted, %" PRIu64 " in the store",
                                 accepted, total);
                }
        }
        return v.open;
}

void sim_check_final(struct sim_world *w)
{
        unsigned nkeys = 0;
        const struct sim_key *keys = sim_provider_keys(w->provider, &nkeys);

        for (unsigned i = 0; i < w->nops && !w->failed; i++) {
                const struct sim_op *op = &w->ops[i];
                const struct sim_key *k = sim_provider_key(w->provider, op->req.operation_id);
                bool executed = k && k->executions > 0;
                struct op_record rec;
                int r = store_get(w->view, op->req.operation_id, &rec);

                w->res->accepted += op->accepted;
                if (r == TG_ENOTFOUND) {
                        if (op->accepted) {
                                w->res->lost++;
                                sim_fail(w, "lost", "%s was accepted and is not in the store",
                                         op->req.operation_id);
                        }
                        continue;
                }
                if (r < 0) {
                        sim_fail(w, "setup", "the simulation cannot read its store");
                        return;
                }
                switch (rec.state) {
                case OP_SUCCEEDED:
                        w->res->succeeded++;
                        if (!executed) {
                                w->res->lost++;
                                sim_fail(w, "lost",
                                         "%s is succeeded, and the provider never "
                                         "executed it",
                                         op->req.operation_id);
                        }
                        break;
                case OP_REJECTED:
                case OP_CANCELLED:
                        w->res->rejected++;
                        if (executed) {
                                w->res->unexpected++;
                                sim_fail(w, "unexpected", "%s is %s, and the provider executed it",
                                         op->req.operation_id, op_state_name(rec.state));
                        }
                        break;
                case OP_MANUAL:
                        w->res->manual++;
                        break;
                default:
                        sim_fail(w, "deadline", "%s is still %s at the end of the run",
                                 op->req.operation_id, op_state_name(rec.state));
                        break;
                }
        }
        for (unsigned i = 0; i < nkeys && !w->failed; i++) {
                if (keys[i].executions > 1) {
                        w->res->executed_twice++;
                        sim_fail(w, "executed_twice", "the provider executed %s %u times",
                                 keys[i].key, keys[i].executions);
                }
                if (keys[i].executions > 0 && !keys[i].expected) {
                        w->res->unexpected++;
                        sim_fail(w, "unexpected", "the provider executed %s, never submitted",
                                 keys[i].key);
                }
        }
}
