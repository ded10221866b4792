/*
 * verify_calls — verify's checks of who was sent how often (verify_int.h):
 * every provider arrival matched to exactly one logged start by request id
 * (an unmatched one is a hidden retry or a side door, a repeated one a
 * silent re-send), automatic POSTs per operation in the call log and per
 * key at the provider, one idempotency key per operation, executions per
 * key, the call kinds expected (an arrival at the OAuth 2.0 token path
 * with the exit's token request id is the exit's token call: no operation's,
 * no call log row); and the notes on calls the provider never
 * saw, calls never closed and claims without a recorded start.
 *
 * Invariants: the matching fills run->match and run->arrival_of, which
 * every later check reads; POSTs answered 429/503 with nothing executed
 * count against the budget only with limits->count_limited (the exit's
 * retry.count_limited); operator re-sends never count.
 */
#include "tools/verify_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"

/* One of the exit's OAuth 2.0 token calls (daemon/exit_token.c): received
 * at the token path with the exit's token request id. It is no operation's
 * call and has no call log row; the exit paces it and counts it in flight
 * like any call, so it is judged at the provider's door (receive spacing). */
static bool token_call(const struct verify_arrival *a)
{
        return a->token && strncmp(a->request_id, VERIFY_TOKEN_RID_PREFIX,
                                   sizeof(VERIFY_TOKEN_RID_PREFIX) - 1) == 0;
}

/* The arrivals [i, end) of arr_rid share one token call's request id: the
 * first is the call, any other a re-send below the exit. */
static void match_token_call(struct run *run, const struct verify_arrival **arr_rid, size_t i,
                             size_t end, struct verify_finding **f_dup, struct evidence *ev_dup)
{
        struct verify_summary *s = &run->r->sum;
        const struct verify_arrival *a = arr_rid[i];

        s->token_calls++;
        run->match[a - run->arr] = TOKEN_FIRST;
        for (size_t k = i + 1; k < end; k++) {
                const struct verify_arrival *d = arr_rid[k];
                s->duplicate_arrivals++;
                run->match[d - run->arr] = TOKEN_AGAIN;
                if (verify_finding_open(run->r, f_dup, ev_dup, "arrival_duplicate", true))
                        evidence_item(ev_dup,
                                      "  token call %s sent once, arrived again as #%llu "
                                      "(first #%llu), %.1f ms later\n",
                                      a->request_id, (unsigned long long)d->seq,
                                      (unsigned long long)a->seq, verify_ms(d->mono - a->mono));
        }
}

void verify_check_matching(struct run *run, const struct verify_call **by_rid,
                           const struct verify_arrival **arr_rid)
{
        struct verify_summary *s = &run->r->sum;
        struct verify_finding *f_un = NULL, *f_dup = NULL, *f_kind = NULL, *f_cdup = NULL;
        struct evidence ev_un, ev_dup, ev_kind, ev_cdup;
        size_t i = 0, j = 0;

        /* Request ids logged twice make the matching ambiguous. */
        for (size_t c = 1; c < run->ncalls; c++) {
                if (by_rid[c]->request_id[0] == '\0' ||
                    strcmp(by_rid[c]->request_id, by_rid[c - 1]->request_id) != 0)
                        continue;
                if (!verify_finding_open(run->r, &f_cdup, &ev_cdup, "request_id_reused", true))
                        break;
                evidence_item(&ev_cdup, "  calls %lld and %lld both carry request id %s\n",
                              (long long)by_rid[c - 1]->id, (long long)by_rid[c]->id,
                              by_rid[c]->request_id);
        }
        if (f_cdup) {
                struct verify_finding *f = f_cdup;
                evidence_done(&ev_cdup);
                SET(problem, "%zu call log records share a request id with another call",
                    ev_cdup.items);
                SET(trigger, "a sender that reuses X-Request-Id, or two logs merged");
                SET(impact, "an arrival cannot be tied to one start; hidden re-sends could hide "
                            "behind the shared id");
                SET(verify, "list the call log sorted by request_id");
                SET(result, "the same request id on more than one call");
                SET(fix, "one fresh request id per call, generated where the call is started");
        }

        while (i < run->narr) {
                const struct verify_arrival *a = arr_rid[i];
                size_t end = i + 1;
                while (end < run->narr && a->request_id[0] &&
                       strcmp(arr_rid[end]->request_id, a->request_id) == 0)
                        end++;
                int c = 1;
                if (a->request_id[0]) {
                        while (j < run->ncalls &&
                               (c = strcmp(by_rid[j]->request_id, a->request_id)) < 0)
                                j++;
                        if (j >= run->ncalls)
                                c = 1;
                }
                if (c != 0 && token_call(a)) {
                        match_token_call(run, arr_rid, i, end, &f_dup, &ev_dup);
                        i = end;
                        continue;
                }
                if (c != 0) {
                        for (size_t k = i; k < end; k++) {
                                const struct verify_arrival *u = arr_rid[k];
                                s->unmatched++;
                                if (verify_finding_open(run->r, &f_un, &ev_un, "arrival_unmatched",
                                                        true))
                                        evidence_item(
                                            &ev_un,
                                            "  provider arrival #%llu %s key=%s request_id=%s "
                                            "wall_ms=%lld: no logged start\n",
                                            (unsigned long long)u->seq, u->post ? "POST" : "GET",
                                            u->key[0] ? u->key : "-",
                                            u->request_id[0] ? u->request_id : "(none)",
                                            (long long)u->wall);
                        }
                        i = end;
                        continue;
                }
                size_t ci = (size_t)(by_rid[j] - run->calls);
                const struct verify_call *call = by_rid[j];
                s->matched++;
                run->arrival_of[ci] = (size_t)(a - run->arr);
                run->match[a - run->arr] = ci;
                if ((unsigned)call->kind < VERIFY_KINDS)
                        s->kind_arrivals[call->kind]++;
                if (a->post != (call->kind != TG_KIND_QUERY)) {
                        if (verify_finding_open(run->r, &f_kind, &ev_kind, "arrival_kind_mismatch",
                                                true))
                                evidence_item(
                                    &ev_kind,
                                    "  call %lld (%s, %s) arrived as a %s (arrival #%llu)\n",
                                    (long long)call->id, verify_kind_name(call->kind),
                                    call->request_id, a->post ? "POST" : "GET",
                                    (unsigned long long)a->seq);
                }
                for (size_t k = i + 1; k < end; k++) {
                        const struct verify_arrival *d = arr_rid[k];
                        s->duplicate_arrivals++;
                        run->match[d - run->arr] = ci;
                        if (verify_finding_open(run->r, &f_dup, &ev_dup, "arrival_duplicate", true))
                                evidence_item(
                                    &ev_dup,
                                    "  call %lld (%s %s attempt %u, request_id %s) logged once, "
                                    "arrived again as #%llu (first #%llu), %.1f ms later\n",
                                    (long long)call->id, verify_kind_name(call->kind),
                                    call->operation_id, call->attempt, call->request_id,
                                    (unsigned long long)d->seq, (unsigned long long)a->seq,
                                    verify_ms(d->mono - a->mono));
                }
                i = end;
        }
        if (f_un) {
                struct verify_finding *f = f_un;
                evidence_done(&ev_un);
                SET(problem, "%zu provider arrival(s) match no start in tollgate's call log",
                    s->unmatched);
                SET(trigger, "a retry below the exit (HTTP library, proxy, SDK) or a sender that "
                             "does not go through the exit");
                SET(impact, "calls the exit never counted: the provider sees more than the "
                            "configured rate, and an operation may be executed by a path "
                            "with no idempotency discipline");
                SET(verify, "tollgate verify --calls CALLS --arrivals ARRIVALS");
                SET(result, "%zu of %zu arrivals unmatched", s->unmatched, run->narr);
                SET(fix, "turn off retries below the exit and route every sender (workers, "
                         "scripts, operators) through tollgate");
        }
        if (f_dup) {
                struct verify_finding *f = f_dup;
                evidence_done(&ev_dup);
                SET(problem,
                    "%zu provider arrival(s) repeat a request id that tollgate started "
                    "once",
                    s->duplicate_arrivals);
                SET(trigger, "a silent re-send below the exit, e.g. an HTTP library retrying a "
                             "request on a reused keep-alive connection that died");
                SET(impact, "a hidden retry: the POST reached the provider twice, outside the "
                            "attempt budget and the pacing");
                SET(verify, "group the provider's arrivals by request id; any id twice");
                SET(result, "%zu extra arrival(s)", s->duplicate_arrivals);
                SET(fix, "fresh connection per call, or a guard that refuses a second send of "
                         "one handle (tollgate's CURLOPT_PREREQFUNCTION)");
        }
        if (f_kind) {
                struct verify_finding *f = f_kind;
                evidence_done(&ev_kind);
                SET(problem, "%zu call(s) arrived with another method than their kind",
                    ev_kind.items);
                SET(trigger, "a request id reused across calls, or logs of different runs");
                SET(impact, "the match is not trustworthy; counts by kind are wrong");
                SET(verify, "compare the call's kind with the arrival's method");
                SET(result, "queries must arrive as GET, POSTs as POST");
                SET(fix, "check that both logs come from the same run");
        }

        /* Calls the provider never saw. */
        struct verify_finding *f_seen = NULL;
        struct evidence ev;
        for (size_t c = 0; c < run->ncalls; c++) {
                const struct verify_call *call = run->by_start[c];
                size_t ci = (size_t)(call - run->calls);
                if (run->arrival_of[ci] != NO_MATCH || call->sent == 0)
                        continue;
                s->unseen_calls++;
                if (!verify_finding_open(run->r, &f_seen, &ev, "call_unseen", false))
                        break;
                evidence_item(&ev,
                              "  call %lld %s %s attempt %u request_id %s class %s status %d\n",
                              (long long)call->id, verify_kind_name(call->kind), call->operation_id,
                              call->attempt, call->request_id, call->cls[0] ? call->cls : "open",
                              call->http_status);
        }
        if (f_seen) {
                struct verify_finding *f = f_seen;
                evidence_done(&ev);
                SET(problem, "%zu call(s) that may have been sent have no provider arrival",
                    s->unseen_calls);
                SET(trigger, "the request died on the way (timeout before the provider read it, "
                             "connection reset), the provider record is partial, or the logs "
                             "come from different runs");
                SET(impact, "none for the exit's rules; a call with an HTTP answer but no "
                            "arrival would mean another provider answered");
                SET(verify, "compare the run's time range in both logs");
                SET(result, "%zu unseen", s->unseen_calls);
                SET(fix, "nothing if the calls timed out or failed to connect; else check the "
                         "provider record's bounds");
        }
}

static int cmp_op_key(const void *a, const void *b)
{
        const struct op_key *x = a, *y = b;
        int c = strcmp(x->op, y->op);
        return c ? c : strcmp(x->key, y->key);
}

/* A POST the provider refused for the whole account (429/503): nothing was
 * executed and the exit does not count it against the operation's budget
 * (the `limited` event, core/policy.h), so neither does this check. */
static bool limited_call(const struct verify_call *c)
{
        enum tg_class cls;

        return (c->http_status == 429 || c->http_status == 503) &&
               tg_class_parse(c->cls, &cls) == 0 && cls == TG_CLASS_RETRYABLE;
}

static bool limited_arrival(const struct verify_arrival *a)
{
        return (a->answer == 429 || a->answer == 503) && !a->executed;
}

void verify_check_operations(struct run *run, const struct verify_call **by_op,
                             const struct verify_arrival **arr_key, struct op_key *pairs)
{
        struct verify_summary *s = &run->r->sum;
        unsigned max_att = run->lim->max_attempts;
        struct verify_finding *f_att = NULL, *f_key = NULL;
        struct evidence ev_att, ev_key;

        /* Automatic POSTs per operation, in the call log: the summary has
         * them all, the check leaves out those answered 429/503 unless the
         * exit counts them (retry.count_limited). A released claim (given
         * back before the transport had it) is no POST: the exit does not
         * count its attempt, and the next claim carries the same number. */
        for (size_t i = 0; i < run->ncalls;) {
                size_t end = i;
                unsigned posts = 0;
                unsigned counted = 0;
                while (end < run->ncalls &&
                       strcmp(by_op[end]->operation_id, by_op[i]->operation_id) == 0) {
                        if ((by_op[end]->kind == TG_KIND_FIRST ||
                             by_op[end]->kind == TG_KIND_RETRY) &&
                            !by_op[end]->released) {
                                posts++;
                                counted += run->lim->count_limited || !limited_call(by_op[end]);
                        }
                        end++;
                }
                s->operations++;
                if (posts > s->max_auto_posts_per_op)
                        s->max_auto_posts_per_op = posts;
                if (counted > max_att) {
                        s->ops_over_attempts++;
                        if (verify_finding_open(run->r, &f_att, &ev_att, "attempts", true))
                                evidence_item(&ev_att,
                                              "  operation %s: %u automatic POSTs in the call "
                                              "log\n",
                                              by_op[i]->operation_id, counted);
                }
                i = end;
        }

        /* POSTs per key at the provider (operator re-sends and 429/503
         * answers excluded). */
        for (size_t i = 0; i < run->narr;) {
                size_t end = i;
                unsigned posts = 0, counted = 0;
                while (end < run->narr && strcmp(arr_key[end]->key, arr_key[i]->key) == 0) {
                        const struct verify_arrival *a = arr_key[end];
                        size_t ci = run->match[a - run->arr];
                        if (a->post && ci != TOKEN_FIRST && ci != TOKEN_AGAIN &&
                            (ci == NO_MATCH || run->calls[ci].kind != TG_KIND_MANUAL)) {
                                posts++;
                                counted += run->lim->count_limited || !limited_arrival(a);
                        }
                        end++;
                }
                if (posts > s->max_posts_per_key)
                        s->max_posts_per_key = posts;
                if (counted > max_att && arr_key[i]->key[0]) {
                        s->ops_over_attempts++;
                        if (verify_finding_open(run->r, &f_att, &ev_att, "attempts", true))
                                evidence_item(&ev_att,
                                              "  key %s: %u automatic POSTs arrived at the "
                                              "provider\n",
                                              arr_key[i]->key, counted);
                }
                i = end;
        }
        if (f_att) {
                struct verify_finding *f = f_att;
                evidence_done(&ev_att);
                SET(problem, "operations sent more than %u automatic POSTs", max_att);
                SET(trigger, "retries counted in more than one layer, or a re-send after an "
                             "unknown outcome that did not count as an attempt");
                SET(impact, "the attempt budget no longer bounds the load an operation puts on "
                            "the provider");
                SET(verify, "count POSTs per operation in the call log and per key at the "
                            "provider, leaving out those answered 429/503 (refused for the "
                            "whole account, nothing executed: not counted against the budget)");
                SET(result, "max %u in the call log, %u at the provider", s->max_auto_posts_per_op,
                    s->max_posts_per_key);
                SET(fix, "one place decides retries (the dispatcher) and counts every POST");
        }

        /* Keys per operation: matched POSTs only. */
        size_t np = 0;
        for (size_t i = 0; i < run->narr; i++) {
                const struct verify_arrival *a = &run->arr[i];
                size_t ci = run->match[i];
                if (!a->post || !MATCHED_CALL(ci))
                        continue;
                pairs[np].op = run->calls[ci].operation_id;
                pairs[np].key = a->key;
                np++;
        }
        qsort(pairs, np, sizeof(*pairs), cmp_op_key);
        for (size_t i = 0; i < np;) {
                size_t end = i;
                unsigned keys = 0;
                while (end < np && strcmp(pairs[end].op, pairs[i].op) == 0) {
                        if (end == i || strcmp(pairs[end].key, pairs[end - 1].key) != 0)
                                keys++;
                        end++;
                }
                if (keys > s->max_keys_per_op)
                        s->max_keys_per_op = keys;
                if (keys > 1) {
                        s->ops_multi_key++;
                        if (verify_finding_open(run->r, &f_key, &ev_key, "one_key", true)) {
                                evidence_item(&ev_key, "  operation %s sent %u keys:", pairs[i].op,
                                              keys);
                                for (size_t k = i; k < end && k < i + 4; k++)
                                        evidence_text(&ev_key, " %s", pairs[k].key);
                                evidence_text(&ev_key, "\n");
                        }
                }
                i = end;
        }
        if (f_key) {
                struct verify_finding *f = f_key;
                evidence_done(&ev_key);
                SET(problem,
                    "%zu operation(s) reached the provider under more than one "
                    "idempotency key",
                    s->ops_multi_key);
                SET(trigger, "a retry that derives a new key, e.g. after a timeout");
                SET(impact, "a new key is a new refund: the customer may be refunded twice");
                SET(verify, "group the matched POST arrivals by operation; count distinct keys");
                SET(result, "max %u keys for one operation", s->max_keys_per_op);
                SET(fix, "the key is the operation id, forever; unknown outcomes are queried "
                         "with the same key");
        }
}

void verify_check_executions(struct run *run, const struct verify_arrival **arr_key,
                             const struct verify_execution **led)
{
        struct verify_summary *s = &run->r->sum;
        unsigned max = run->lim->max_executions;
        struct verify_finding *f = NULL;
        struct evidence ev;

        for (size_t i = 0; i < run->narr;) {
                size_t end = i;
                unsigned n = 0;
                while (end < run->narr && strcmp(arr_key[end]->key, arr_key[i]->key) == 0) {
                        if (arr_key[end]->executed)
                                n++;
                        end++;
                }
                if (n > s->max_executions)
                        s->max_executions = n;
                if (n > max) {
                        s->keys_over_executions++;
                        if (verify_finding_open(run->r, &f, &ev, "executions", true))
                                evidence_item(&ev, "  key %s: %u arrivals executed a refund\n",
                                              arr_key[i]->key, n);
                }
                i = end;
        }
        for (size_t i = 0; i < run->nledger; i++) {
                const struct verify_execution *e = led[i];
                if (e->executions > s->max_executions)
                        s->max_executions = e->executions;
                if (e->executions <= max)
                        continue;
                s->keys_over_executions++;
                if (!verify_finding_open(run->r, &f, &ev, "executions", true))
                        continue;
                evidence_item(&ev, "  key %s: %u executions in the provider's ledger\n", e->key,
                              e->executions);
        }
        if (f) {
                evidence_done(&ev);
                SET(problem, "keys executed more than %u time(s) at the provider", max);
                SET(trigger, "a re-send the provider did not deduplicate (new key, key past "
                             "retention)");
                SET(impact, "duplicate refunds");
                SET(verify, "the provider's ledger (executions per key) and the arrivals' "
                            "executed flags");
                SET(result, "max %u executions for one key", s->max_executions);
                SET(fix, "same key on every attempt, never re-send past the key's retention");
        }
}

void verify_check_kinds(struct run *run)
{
        struct verify_summary *s = &run->r->sum;
        unsigned missing = 0;

        for (unsigned k = 0; k < VERIFY_KINDS; k++)
                if ((run->lim->expect_kinds & (1u << k)) && s->kind_calls[k] == 0)
                        missing |= 1u << k;
        if (!missing)
                return;
        struct verify_finding *f = verify_finding_new(run->r, "kinds", true);
        if (!f)
                return;
        struct evidence ev;
        evidence_init(&ev, f);
        for (unsigned k = 0; k < VERIFY_KINDS; k++)
                evidence_text(&ev, "  %-6s %zu in the call log, %zu matched at the provider%s\n",
                              verify_kind_name((enum tg_call_kind)k), s->kind_calls[k],
                              s->kind_arrivals[k], (missing & (1u << k)) ? "  <- expected" : "");
        SET(problem, "expected call kinds are missing from the call log");
        SET(trigger, "a kind of call that goes out by another path (a side door)");
        SET(impact, "calls the exit does not count; the quota is shared with an invisible "
                    "sender");
        SET(verify, "run a mix of first attempts, retries, queries and an operator re-send");
        SET(result, "see evidence");
        SET(fix, "route every kind through the one exit");
}

void verify_note_open_calls(struct run *run)
{
        struct verify_summary *s = &run->r->sum;
        for (size_t i = 0; i < run->ncalls; i++)
                s->open_calls += run->calls[i].end_mono == TG_MONO_NEVER;
        if (s->open_calls == 0)
                return;
        struct verify_finding *f = verify_finding_new(run->r, "calls_open", false);
        if (!f)
                return;
        struct evidence ev;
        evidence_init(&ev, f);
        for (size_t i = 0; i < run->ncalls; i++) {
                const struct verify_call *c = run->by_start[i];
                if (c->end_mono == TG_MONO_NEVER)
                        evidence_item(&ev, "  call %lld %s %s attempt %u epoch %lld\n",
                                      (long long)c->id, verify_kind_name(c->kind), c->operation_id,
                                      c->attempt, (long long)c->epoch);
        }
        evidence_done(&ev);
        SET(problem, "%zu call(s) were never closed in the call log", s->open_calls);
        SET(trigger, "the dispatcher died between send and settle, or is still running");
        SET(impact, "their outcome is unknown; the next owner must reconcile them with the "
                    "same key");
        SET(verify, "the operations' states: unknown, then reconciled by a query");
        SET(result, "open calls count as in flight for their whole epoch here");
        SET(fix, "nothing if a later owner reconciled them");
}

void verify_note_unrecorded_starts(struct run *run)
{
        struct verify_summary *s = &run->r->sum;
        if (s->unrecorded_starts == 0)
                return;
        struct verify_finding *f = verify_finding_new(run->r, "start_unrecorded", false);
        if (!f)
                return;
        struct evidence ev;
        evidence_init(&ev, f);
        for (size_t i = run->nstarts; i < run->ncalls; i++) {
                const struct verify_call *c = run->by_start[i];
                evidence_item(&ev, "  call %lld %s %s attempt %u epoch %lld%s\n", (long long)c->id,
                              verify_kind_name(c->kind), c->operation_id, c->attempt,
                              (long long)c->epoch, c->sent == 0 ? " (not sent)" : "");
        }
        evidence_done(&ev);
        SET(problem, "%zu call(s) claimed ahead without a recorded start", s->unrecorded_starts);
        SET(trigger, "a claim given back before it was sent, or an owner lost between a claim "
                     "and the end of its call (killed, or still running)");
        SET(impact, "when such a call went out, if it did, is not in the call log; the ones that "
                    "did go out are in the provider's record");
        SET(verify, "the provider's receive spacing (judged above) covers every call that "
                    "arrived");
        SET(result, "left out of the start spacing, burst and in-flight checks");
        SET(fix, "nothing: a lost owner's calls are reconciled as unknown by the next one");
}
