/*
 * dispatcher — the loop over a list of exits. See dispatcher.h for the
 * contract, exit.h for one exit.
 *
 * One turn of the loop reads the clock once, takes the store threads'
 * results, hands every report of the transport (a request on the wire, a
 * call ended) to the exit whose cookie it carries, does each exit's
 * once-a-second work, starts at most one call per exit (its pacer allows no
 * more than one per slot), claims ahead, and then waits in the transport for
 * I/O until the next thing that can happen for any exit: its next slot, its
 * next store check, or a reply. The loop itself owns only what all its exits
 * share: the environment (one clock, one transport), the stop, and the
 * provider's credentials, read again when a reload asks.
 *
 * Invariants, checked at every turn (assert(dispatcher_sane()): on in the
 * sanitizer build and in tollgate-sim, compiled out of a release build):
 * each exit is exit_sane(), and the exits' open calls together are exactly
 * the calls open at the transport.
 */
#include "daemon/dispatcher.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/share_want.h"
#include "core/tg_error.h"
#include "daemon/exit.h"
#include "daemon/log.h"
#include "net/transport.h"
#include "platform/secmem.h"

/* Every account of a config may be an exit of one loop, on a lane of its own. */
_Static_assert(EXIT_MAX >= TG_ACCOUNTS_MAX, "a cookie cannot name every account's exit");
_Static_assert(TRANSPORT_LANES_MAX >= EXIT_MAX, "the transport has fewer lanes than exits");

#define STORE_DOWN_NS (10 * TG_NS_PER_MS) /* a transport failure: pause before the next turn */
/* At dispatch.max_accounts, how often the loop looks whether one went */
#define OWN_FULL_RECHECK_NS (250 * TG_NS_PER_MS)

struct dispatcher {
        const struct dispatcher_options *opt;
        const struct exit_env *env;
        struct exit **exits; /* heap: one per account served, then the spares */
        unsigned nexits;
        /* heap: exit i's primary when it is a spare, else i itself */
        unsigned *primary;
        /* heap, per primary: when a spare of its account last began to hand
         * its share back, and how long until another may (one call timeout
         * to drain, and the wish's freshness once the standby stopped) */
        tg_mono_ns *handed_at, *hand_back_quiet;
        /* Several exits: each becomes an owner (and rejoins) step by step
         * inside the turns, so that none waits for another's standby or
         * takeover wait. One exit: as it always did, blocking before the
         * loop (exit_open, exit_rejoin). */
        bool stepwise;
        int failed; /* stepwise: an exit could not become an owner (3, or a TG_E* code) */
};

static bool stopping(const struct dispatcher *d)
{
        return *d->opt->stop != 0 || d->failed != 0;
}

/* Serving now: an owner (not still becoming one). */
static bool serving(const struct dispatcher *d, unsigned i)
{
        return !exit_pending(d->exits[i]);
}

#ifndef NDEBUG
/* Every exit sane, and every call open at the transport one exit's. */
static bool dispatcher_sane(const struct dispatcher *d)
{
        unsigned open = d->env->open_calls(d->env->ctx), sum = 0;

        for (unsigned i = 0; i < d->nexits; i++) {
                if (!exit_sane(d->exits[i], open))
                        return false;
                sum += exit_open_calls(d->exits[i]);
        }
        return sum == open;
}
#endif

/* The exit a report of the transport belongs to (NULL: none of ours). */
static struct exit *exit_for(const struct dispatcher *d, uint64_t cookie)
{
        unsigned i = exit_of_cookie(cookie);

        return i < d->nexits ? d->exits[i] : NULL;
}

/* Every report of the transport to its exit: the sent ones first (a call's
 * wire time before its end). */
static void route_reports(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall)
{
        const struct exit_env *env = d->env;
        struct transport_sent s;
        struct transport_result res;

        while (env->next_sent(env->ctx, &s) == 0) {
                struct exit *e = exit_for(d, s.cookie);
                if (e)
                        exit_sent(e, &s);
        }
        while (env->next_done(env->ctx, &res) == 0) {
                struct exit *e = exit_for(d, res.cookie);
                if (e && d->stepwise)
                        log_set_account(exit_account(e));
                if (e)
                        exit_done(e, &res, now, wall);
        }
        log_set_account(NULL);
}

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

/* A stop or a lost exit: the claims made ahead go back; once every exit
 * that must has drained, the loop ends (stop) or the lost exit stands by
 * and takes its share again. 0: go on with the turn; 1: the turn is over
 * (*ret_end: so is the loop). */
static int drain(struct dispatcher *d, tg_mono_ns now, tg_wall_ms wall, bool *ret_end)
{
        bool all_drained = true;

        for (unsigned i = 0; i < d->nexits; i++) {
                struct exit *e = d->exits[i];
                if (stopping(d) || exit_lost(e))
                        exit_release_all(e, stopping(d) ? "stop" : "owner lost", now, wall);
                all_drained = all_drained && exit_drained(e);
        }
        if (stopping(d)) {
                *ret_end = all_drained;
                return all_drained;
        }
        for (unsigned i = 0; i < d->nexits; i++) {
                struct exit *e = d->exits[i];
                /* Lost the exit but not asked to stop: stand by and take it
                 * again once it is free. */
                if (exit_lost(e) && exit_drained(e)) {
                        if (d->stepwise) {
                                /* the others go on serving meanwhile */
                                log_set_account(exit_account(e));
                                exit_rejoin_begin(e, now);
                                continue;
                        }
                        *ret_end = exit_rejoin(e) != 0;
                        return 1;
                }
        }
        return 0;
}

static bool is_spare(const struct dispatcher *d, unsigned i)
{
        return d->primary[i] != i;
}

/* May pending exit i take a step? A spare only while its primary serves
 * (or once it holds its lock: its takeover wait goes on); another only
 * under dispatch.max_accounts, which counts the accounts owned (a spare
 * adds no account: its share is the same account's quota). */
static bool may_step(const struct dispatcher *d, unsigned i, unsigned owned)
{
        const struct exit *e = d->exits[i];
        unsigned max = d->opt->max_accounts;

        if (exit_owns(e))
                return true;
        if (is_spare(d, i))
                return serving(d, d->primary[i]);
        return max == 0 || owned < max;
}

/* A spare that serves beside its primary hands its share back while a
 * standby of the account wants one: one spare of an account at a time, the
 * next only once the standby had time to take the first one and stop
 * wanting (with shares = 3, one newcomer takes one share, not two). */
static void hand_back(struct dispatcher *d, tg_mono_ns now)
{
        for (unsigned i = 0; i < d->nexits; i++) {
                struct exit *e = d->exits[i];
                unsigned p = d->primary[i];
                if (is_spare(d, i) && serving(d, i) && !exit_lost(e) && serving(d, p) &&
                    !exit_lost(d->exits[p]) && exit_want_fresh(e, now) &&
                    (d->handed_at[p] == 0 || now - d->handed_at[p] >= d->hand_back_quiet[p])) {
                        log_set_account(exit_account(e));
                        exit_hand_back(e);
                        d->handed_at[p] = now;
                }
        }
        log_set_account(NULL);
}

/* Stepwise: every exit still becoming an owner goes one step on; the
 * standby flag says whether no exit serves while some wait. */
static void own_steps(struct dispatcher *d, tg_mono_ns now)
{
        bool any_serving = false, any_waiting = false;
        unsigned owned = 0;

        if (!d->stepwise)
                return;
        for (unsigned i = 0; i < d->nexits; i++)
                owned += !is_spare(d, i) && exit_owns(d->exits[i]);
        for (unsigned i = 0; i < d->nexits; i++) {
                struct exit *e = d->exits[i];
                /* at dispatch.max_accounts, the rest stand by untried */
                if (exit_pending(e) && may_step(d, i, owned)) {
                        bool had = exit_owns(e);
                        log_set_account(exit_account(e));
                        int r = exit_own_step(e, now);
                        if (r != 0 && r != 2 && r != 1 && !d->failed)
                                d->failed = r; /* the whole loop drains and ends */
                        owned += !is_spare(d, i) && exit_owns(e) && !had;
                }
                any_serving = any_serving || serving(d, i);
                any_waiting = any_waiting || (exit_pending(e) && !is_spare(d, i));
        }
        log_set_account(NULL);
        if (d->opt->standby)
                *d->opt->standby = !any_serving && any_waiting;
}

/* When a pending exit is to be stepped again: its own next step, or, while
 * the process owns as many accounts as it may, a standby's retry. */
static tg_mono_ns own_next(const struct exit *e, tg_mono_ns now)
{
        tg_mono_ns next = exit_own_next(e);

        return next > now ? next : now + OWN_FULL_RECHECK_NS;
}

/* Exit i when it serves (else NULL), with its account on the lines this
 * thread logs from now on when the loop serves several. */
static struct exit *serve(const struct dispatcher *d, unsigned i)
{
        if (!serving(d, i))
                return NULL;
        if (d->stepwise)
                log_set_account(exit_account(d->exits[i]));
        return d->exits[i];
}

int dispatcher_turn(struct dispatcher *d)
{
        const struct exit_env *env = d->env;
        bool second = false, end = false;
        struct exit *e;
        tg_mono_ns now = env->mono_now(env->ctx);
        tg_wall_ms wall = env->wall_now(env->ctx);

        /* at the top of the turn: inside one, a simulated process may die
         * (its transport forgets its calls) before the turn has ended */
        assert(dispatcher_sane(d));
        own_steps(d, now);
        hand_back(d, now);
        /* the store threads' results: claims onto the ready queues, outcomes
         * committed (logged and counted) */
        for (unsigned i = 0; i < d->nexits; i++)
                if ((e = serve(d, i)))
                        exit_collect(e);
        route_reports(d, now, wall);
        for (unsigned i = 0; i < d->nexits; i++)
                if ((e = serve(d, i)))
                        exit_retry_unsettled(e, now, wall);
        if (drain(d, now, wall, &end)) {
                log_set_account(NULL);
                return end ? 1 : 0;
        }
        for (unsigned i = 0; i < d->nexits; i++)
                if ((e = serve(d, i)))
                        second = exit_second(e, now, wall) || second;
        log_set_account(NULL);
        if (second && d->opt->credentials_due && d->opt->credentials_due(d->opt->hook_ctx))
                reload_credentials(d);
        for (unsigned i = 0; i < d->nexits; i++)
                if ((e = serve(d, i)))
                        exit_try_start(e, now, wall);
        for (unsigned i = 0; i < d->nexits; i++)
                if ((e = serve(d, i)))
                        exit_refill(e, env->mono_now(env->ctx), env->wall_now(env->ctx));
        log_set_account(NULL);
        tg_mono_ns t = env->mono_now(env->ctx), until = TG_MONO_NEVER;
        for (unsigned i = 0; i < d->nexits; i++) {
                tg_mono_ns w =
                    serving(d, i) ? exit_wake_at(d->exits[i], t) : own_next(d->exits[i], t);
                if (w < until)
                        until = w;
        }
        int r = env->poll(env->ctx, until);
        if (r == 1) {
                /* work arrived: look for it now */
                for (unsigned i = 0; i < d->nexits; i++)
                        if (serving(d, i))
                                exit_woken(d->exits[i]);
        } else if (r < 0) {
                env->sleep(env->ctx, STORE_DOWN_NS);
        }
        return 0;
}

bool dispatcher_lost(const struct dispatcher *d)
{
        for (unsigned i = 0; i < d->nexits; i++)
                if (exit_lost(d->exits[i]) && !exit_handing_back(d->exits[i]))
                        return true;
        return false;
}

int dispatcher_open(struct dispatcher *d)
{
        if (d->stepwise) {
                /* each becomes an owner inside the turns, none waiting for another */
                tg_mono_ns now = d->env->mono_now(d->env->ctx);
                for (unsigned i = 0; i < d->nexits; i++)
                        exit_begin(d->exits[i], now);
                own_steps(d, now);
                return d->failed;
        }
        for (unsigned i = 0; i < d->nexits; i++) {
                int r = exit_open(d->exits[i]);
                if (r != 0)
                        return r;
        }
        return 0;
}

void dispatcher_share_config(const struct tg_config *cfg, struct pacer_config *ret_share)
{
        exit_share_config(cfg, ret_share);
}

int dispatcher_new_exits(const struct dispatcher_exit *exits, unsigned n,
                         const struct dispatcher_options *opt, const struct exit_env *env,
                         struct dispatcher **ret_dispatcher)
{
        struct dispatcher *d;

        if (n == 0 || n > EXIT_MAX)
                return TG_EINVAL;
        d = calloc(1, sizeof(*d));
        if (d) {
                d->exits = calloc(n, sizeof(*d->exits));
                d->primary = calloc(n, sizeof(*d->primary));
                d->handed_at = calloc(n, sizeof(*d->handed_at));
                d->hand_back_quiet = calloc(n, sizeof(*d->hand_back_quiet));
        }
        if (!d || !d->exits || !d->primary || !d->handed_at || !d->hand_back_quiet) {
                dispatcher_free(d);
                return TG_ENOMEM;
        }
        for (unsigned i = 0; i < n; i++) {
                const struct dispatcher_exit *x = &exits[i];
                /* a spare's primary: an earlier exit, itself no spare (its
                 * own primary is itself) */
                if (x->spare && (x->primary >= i || d->primary[x->primary] != x->primary)) {
                        dispatcher_free(d);
                        return TG_EINVAL;
                }
                d->primary[i] = x->spare ? x->primary : i;
                d->hand_back_quiet[i] = x->config->provider_timeout_ms * TG_NS_PER_MS +
                                        SHARE_WANT_FRESH_NS + TG_NS_PER_S;
        }
        d->opt = opt;
        d->env = env;
        d->stepwise = n > 1;
        for (unsigned i = 0; i < n; i++) {
                struct exit_params p = {
                    .config = exits[i].config,
                    .env = env,
                    .store = exits[i].store ? exits[i].store : env->store,
                    .outcome_store = exits[i].store ? exits[i].outcome_store : env->outcome_store,
                    .index = i,
                    .no_wait = opt->no_wait,
                    .spare = exits[i].spare,
                    .stop = opt->stop,
                    /* several: the loop says standby (none serves, some wait) */
                    .standby = n > 1 ? NULL : opt->standby,
                    /* the service's second (watchdog, readiness, retention,
                     * the notifier's lease) on one store thread: the first
                     * exit's */
                    .housekeeping = i == 0 ? opt->housekeeping : NULL,
                    .hook_ctx = opt->hook_ctx,
                };
                int r = exit_new(&p, &d->exits[i]);
                if (r < 0) {
                        dispatcher_free(d);
                        return r;
                }
                d->nexits++;
        }
        *ret_dispatcher = d;
        return 0;
}

int dispatcher_new(const struct tg_config *cfg, const struct dispatcher_options *opt,
                   const struct exit_env *env, struct dispatcher **ret_dispatcher)
{
        /* today's one exit: the whole config, the env's store */
        struct dispatcher_exit one = {.config = cfg};

        return dispatcher_new_exits(&one, 1, opt, env, ret_dispatcher);
}

void dispatcher_free(struct dispatcher *d)
{
        if (!d)
                return;
        for (unsigned i = 0; i < d->nexits; i++)
                exit_free(d->exits[i]);
        free(d->exits);
        free(d->primary);
        free(d->handed_at);
        free(d->hand_back_quiet);
        free(d);
}

/* The accounts the loop serves: views[i] for exit i (each account's view of
 * the config, in secret memory: it holds the provider's settings), with its
 * share's cap on open calls. A config without [account.*] sections is one
 * exit on the config itself, as before accounts existed. */
struct accounts {
        unsigned n;        /* views, the spares' included */
        unsigned accounts; /* the first views: one per account; then the spares */
        /* heap, EXIT_MAX each */
        const struct tg_config **views;
        struct tg_config **own; /* the views made here (NULL: the config's own) */
        unsigned *max_open;
        unsigned *primary; /* a spare's account view (the view itself for those) */
};

static void accounts_free(struct accounts *a)
{
        for (unsigned i = 0; a->own && i < a->n; i++)
                secmem_free(a->own[i]);
        free(a->views);
        free(a->own);
        free(a->max_open);
        free(a->primary);
        memset(a, 0, sizeof(*a));
}

/* After the accounts: a spare view for each further share of an account
 * split into shares (exit.shares - 1 of them, on the same view), as many as
 * fit in EXIT_MAX exits (the rest of the shares then stay idle while their
 * owner is gone, as before; said once). */
static void add_spares(struct accounts *a)
{
        unsigned left = 0;

        for (unsigned i = 0; i < a->accounts; i++) {
                unsigned shares = a->views[i]->exit_shares;
                for (unsigned k = 1; k < shares; k++) {
                        if (a->n >= EXIT_MAX) {
                                left++;
                                continue;
                        }
                        a->views[a->n] = a->views[i];
                        a->max_open[a->n] = a->max_open[i];
                        a->primary[a->n] = i;
                        a->n++;
                }
        }
        if (left > 0)
                log_emit(LOG_WARN, "spares_limited",
                         json_pack("{s:i, s:s}", "shares_without_spare", (int)left, "message",
                                   "more shares than one process can serve as exits: an "
                                   "orphaned share of these is not taken over"));
}

static int accounts_make(const struct tg_config *config, const struct tg_account_set *mask,
                         struct accounts *ret)
{
        struct pacer_config share;
        bool all = tg_account_set_empty(mask);
        unsigned n = 0;

        memset(ret, 0, sizeof(*ret));
        if (config->account_count == 0 || config->account_count > EXIT_MAX)
                return TG_EINVAL;
        ret->views = calloc(EXIT_MAX, sizeof(*ret->views));
        ret->own = calloc(EXIT_MAX, sizeof(*ret->own));
        ret->max_open = calloc(EXIT_MAX, sizeof(*ret->max_open));
        ret->primary = calloc(EXIT_MAX, sizeof(*ret->primary));
        if (!ret->views || !ret->own || !ret->max_open || !ret->primary) {
                accounts_free(ret);
                return TG_ENOMEM;
        }
        if (config->account_count <= 1 && !config->accounts[0].declared) {
                ret->n = 1;
                ret->views[0] = config;
        }
        for (unsigned i = 0; ret->n == 0 && i < config->account_count; i++) {
                if (!all && !tg_account_set_has(mask, i))
                        continue; /* not this process's (--accounts) */
                ret->own[n] = secmem_alloc(sizeof(*ret->own[n]));
                if (!ret->own[n]) {
                        ret->n = n;
                        accounts_free(ret);
                        return TG_ENOMEM;
                }
                config_account_view(config, &config->accounts[i], ret->own[n]);
                ret->views[n] = ret->own[n];
                n++;
        }
        if (ret->n == 0)
                ret->n = n;
        if (ret->n == 0)
                return TG_EINVAL;
        for (unsigned i = 0; i < ret->n; i++) {
                dispatcher_share_config(ret->views[i], &share);
                ret->max_open[i] = share.max_in_flight;
                ret->primary[i] = i;
        }
        ret->accounts = ret->n;
        add_spares(ret);
        return 0;
}

static int new_for_accounts(const struct accounts *a, const struct dispatcher_options *options,
                            const struct exit_env *env, struct dispatcher **ret)
{
        struct dispatcher_exit *exits = calloc(a->n, sizeof(*exits));
        int r;

        if (!exits)
                return TG_ENOMEM;
        for (unsigned i = 0; i < a->n; i++) {
                exits[i].config = a->views[i];
                exits[i].store = exit_env_account_store(env, i, &exits[i].outcome_store);
                exits[i].spare = a->primary[i] != i;
                exits[i].primary = a->primary[i];
        }
        r = dispatcher_new_exits(exits, a->n, options, env, ret);
        free(exits);
        return r;
}

int dispatcher_run(const struct tg_config *config, const struct dispatcher_options *options)
{
        struct accounts accounts;
        struct exit_env *env = NULL;
        struct dispatcher *d = NULL;
        bool lost = false;
        int r;

        r = accounts_make(config, &options->accounts_mask, &accounts);
        if (r == 0)
                r = exit_env_real_accounts(accounts.views, accounts.max_open, accounts.n,
                                           options->doorbell, &env);
        if (r == 0)
                r = new_for_accounts(&accounts, options, env, &d);
        if (r < 0) {
                log_emit(LOG_ERROR, "dispatcher_init_failed",
                         json_pack("{s:s}", "error", tg_strerror(r)));
                exit_env_free(env);
                accounts_free(&accounts);
                return 1;
        }
        r = dispatcher_open(d);
        if (r == 0) {
                unsigned unsettled = 0;
                while (dispatcher_turn(d) == 0)
                        ;
                lost = dispatcher_lost(d);
                for (unsigned i = 0; i < d->nexits; i++)
                        unsettled += exit_unsettled(d->exits[i]);
                log_emit(LOG_INFO, "exit_closed",
                         json_pack("{s:b, s:i}", "owner_lost", lost, "unsettled", (int)unsettled));
                r = d->failed; /* several: an account that could not become an owner */
        }
        dispatcher_free(d);
        exit_env_free(env);
        accounts_free(&accounts);
        if (r == 1)
                return 0; /* stopped while waiting */
        if (r != 0)
                return r == 3 ? 3 : 1;
        return lost ? 1 : 0;
}
