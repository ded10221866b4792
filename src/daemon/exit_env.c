/*
 * exit_env — the real environment of the dispatcher: the system clocks,
 * the libcurl transport, the configured store. See exit_env.h.
 */
#include "daemon/exit_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "daemon/provider_setup.h"
#include "platform/clock.h"
#include "platform/wake.h"
#include "store/store.h"

/* A locked store must not stall the loop that reads replies: wait briefly,
 * then keep the outcome and retry (exit_settle.c, unsettled outcomes). */
#define DISPATCH_BUSY_TIMEOUT_MS 200

/* The transport's poll counts whole milliseconds: a longer wait polls the
 * whole milliseconds but the last (it may wake early, never late), and a
 * wait shorter than this is slept to the moment (clock_sleep_until) after a
 * non-blocking look at the sockets: a hand-off comes when it is due, not up
 * to a millisecond later. */
#define PRECISE_WAIT_NS (2 * TG_NS_PER_MS)

struct real {
        struct exit_env env;
        struct transport *transport; /* a lane for each account */
        /* the accounts, one per exit of the loop: view i's store (and its
         * outcome connection) serves exit i; env.store is stores[0] */
        unsigned n;
        const struct tg_config **views; /* the caller's views (borrowed), our list */
        struct store **stores, **outcome_stores;
        struct wake *doorbell;   /* the API's (serve), or own_bell */
        struct wake *own_bell;   /* ours: rung by the store's listener alone */
        struct wake *store_bell; /* ours: the store thread's */
};

static tg_mono_ns real_mono(void *ctx)
{
        (void)ctx;
        return clock_mono_now();
}

static tg_wall_ms real_wall(void *ctx)
{
        (void)ctx;
        return clock_wall_now();
}

static int64_t real_wall_ns(void *ctx)
{
        (void)ctx;
        return clock_wall_ns();
}

static void real_sleep(void *ctx, tg_mono_ns ns)
{
        (void)ctx;
        clock_sleep_ns(ns);
}

static int real_start(void *ctx, const struct transport_call *call, struct exit_handoff *ret)
{
        struct real *x = ctx;

        ret->mono = clock_mono_now();
        ret->wall = clock_wall_now();
        return transport_start(x->transport, call);
}

static int real_poll(void *ctx, tg_mono_ns until)
{
        struct real *x = ctx;
        tg_mono_ns wait = until - clock_mono_now();
        int fds[2] = {wake_fd(x->doorbell), wake_fd(x->store_bell)};
        int r;

        if (wait <= 0) {
                r = transport_poll(x->transport, 0, fds, 2);
        } else if (wait < PRECISE_WAIT_NS) {
                r = transport_poll(x->transport, 0, fds, 2);
                if (r == 0)
                        clock_sleep_until(until);
        } else {
                /* early by up to two milliseconds: the next turn waits the
                 * rest precisely */
                r = transport_poll(x->transport, (int)(wait / TG_NS_PER_MS) - 1, fds, 2);
        }
        if (r < 0)
                return r;
        if (r & 2)
                (void)wake_drain(x->store_bell); /* the dispatcher collects every turn */
        return (r & 1) && wake_drain(x->doorbell) ? 1 : 0;
}

static int real_next_done(void *ctx, struct transport_result *ret)
{
        return transport_next_done(((struct real *)ctx)->transport, ret);
}

static int real_next_sent(void *ctx, struct transport_sent *ret)
{
        return transport_next_sent(((struct real *)ctx)->transport, ret);
}

static unsigned real_open(void *ctx)
{
        return transport_open(((struct real *)ctx)->transport);
}

/* A problem of account view's setup into err: "account.NAME.provider.KEY:
 * ..." when the view is an account's, as the config's own errors name it. */
static void account_error(const struct tg_config *view, const char *one, char *err, size_t err_size)
{
        if (view->view_of[0] && one[0])
                snprintf(err, err_size, "account.%s.%s", view->view_of, one);
        else
                snprintf(err, err_size, "%s", one);
}

static int real_reload(void *ctx, char *err, size_t err_size)
{
        struct real *x = ctx;
        int r = 0;

        /* every lane's; a file that fails keeps that lane's in force */
        for (unsigned i = 0; i < x->n; i++) {
                char one[512] = "";
                int ri =
                    provider_setup_lane_credentials(x->views[i], x->transport, i, one, sizeof(one));
                if (ri < 0 && r == 0) {
                        r = ri;
                        account_error(x->views[i], one, err, err_size);
                }
        }
        return r;
}

int exit_env_reload_credentials(const struct exit_env *env, char *err, size_t err_size)
{
        if (!env || !env->reload_credentials)
                return 0;
        return env->reload_credentials(env->ctx, err, err_size);
}

/* A store shared by processes on other machines (PostgreSQL) rings the
 * doorbell when any of them commits new work: the store's listener rings
 * the API's doorbell (serve), or one of our own (dispatch, which had none),
 * so the loop waits on one bell whoever rings it. A store that cannot
 * (SQLite, MariaDB) leaves the doorbell as it was. */
static int listen_store(struct real *x)
{
        struct wake *bell = x->doorbell;
        int r;

        if (!bell && wake_new(&x->own_bell) < 0)
                return TG_ENOMEM;
        if (!bell)
                bell = x->own_bell;
        r = store_listen(x->env.store, bell);
        if (r == TG_EUNSUPPORTED) {
                wake_free(x->own_bell);
                x->own_bell = NULL;
                return 0;
        }
        if (r == 0) {
                x->doorbell = bell;
                x->env.has_doorbell = true;
        }
        return r;
}

/* One account's store connections, bound to it (claims, ownership,
 * holds, samples): the loop's own, and on MariaDB a second for outcomes
 * (it serves two connections at once; SQLite has one writer at a time: a
 * second would only wait). */
static int open_stores(const struct tg_config *view, struct store **ret_store,
                       struct store **ret_outcomes)
{
        int r = store_open(view->store_url, ret_store);

        if (r == 0 && view->view_of[0])
                r = store_use_account(*ret_store, view->view_of);
        if (r == 0)
                store_set_busy_timeout(*ret_store, DISPATCH_BUSY_TIMEOUT_MS);
        if (r == 0 && strcmp(store_backend(*ret_store), "mysql") == 0)
                r = store_open(view->store_url, ret_outcomes);
        if (r == 0 && *ret_outcomes && view->view_of[0])
                r = store_use_account(*ret_outcomes, view->view_of);
        if (r == 0 && *ret_outcomes)
                store_set_busy_timeout(*ret_outcomes, DISPATCH_BUSY_TIMEOUT_MS);
        return r;
}

/* The transport: a lane per account, each with its share's cap on open
 * calls and its own credentials. */
static int make_transport(struct real *x, const unsigned *max_open, char *err, size_t err_size)
{
        struct provider_maps *maps = calloc(x->n, sizeof(*maps));
        struct transport_config *tc = calloc(x->n, sizeof(*tc));
        int r = maps && tc ? 0 : TG_ENOMEM;

        /* The mappings were checked when the config was loaded. */
        for (unsigned i = 0; r == 0 && i < x->n; i++) {
                char one[512] = "";
                r = provider_setup_maps(x->views[i], &maps[i], one, sizeof(one));
                if (r == 0)
                        provider_setup_transport_config(x->views[i], &maps[i], max_open[i], &tc[i]);
                else
                        account_error(x->views[i], one, err, err_size);
        }
        if (r == 0)
                r = transport_new_lanes(tc, x->n, &x->transport);
        free(tc);
        free(maps);
        for (unsigned i = 0; r == 0 && i < x->n; i++) {
                char one[512] = "";
                r = provider_setup_lane_credentials(x->views[i], x->transport, i, one, sizeof(one));
                if (r < 0)
                        account_error(x->views[i], one, err, err_size);
        }
        return r;
}

int exit_env_real_accounts(const struct tg_config *const *views, const unsigned *max_open,
                           unsigned n, struct wake *doorbell, struct exit_env **ret_env)
{
        struct real *x = calloc(1, sizeof(*x));
        char err[600] = "";
        int r;

        if (!x)
                return TG_ENOMEM;
        if (n == 0 || n > TRANSPORT_LANES_MAX) {
                free(x);
                return TG_EINVAL;
        }
        x->n = n;
        x->views = calloc(n, sizeof(*x->views));
        x->stores = calloc(n, sizeof(*x->stores));
        x->outcome_stores = calloc(n, sizeof(*x->outcome_stores));
        if (!x->views || !x->stores || !x->outcome_stores) {
                exit_env_free(&x->env);
                return TG_ENOMEM;
        }
        /* this thread runs the exit: its sleeps end on time (best effort) */
        (void)clock_precise_timers();
        x->env = (struct exit_env){
            .ctx = x,
            .mono_now = real_mono,
            .wall_now = real_wall,
            .wall_ns = real_wall_ns,
            .sleep = real_sleep,
            .start = real_start,
            .poll = real_poll,
            .next_done = real_next_done,
            .next_sent = real_next_sent,
            .open_calls = real_open,
            .reload_credentials = real_reload,
            .seed = (uint64_t)clock_mono_now() ^ ((uint64_t)getpid() << 32),
            .has_doorbell = doorbell != NULL,
        };
        x->doorbell = doorbell;
        for (unsigned i = 0; i < n; i++)
                x->views[i] = views[i];
        r = wake_new(&x->store_bell) < 0 ? TG_ENOMEM : 0;
        x->env.store_bell = x->store_bell;
        for (unsigned i = 0; r == 0 && i < n; i++)
                r = open_stores(views[i], &x->stores[i], &x->outcome_stores[i]);
        x->env.store = x->stores[0];
        x->env.outcome_store = x->outcome_stores[0];
        /* one listener rings for every account's work */
        if (r == 0)
                r = listen_store(x);
        if (r == 0)
                r = make_transport(x, max_open, err, sizeof(err));
        if (r < 0) {
                log_emit(LOG_ERROR, "provider_setup_failed",
                         json_pack("{s:s}", "error", err[0] ? err : tg_strerror(r)));
                exit_env_free(&x->env);
                return r;
        }
        *ret_env = &x->env;
        return 0;
}

int exit_env_real(const struct tg_config *cfg, unsigned max_open, struct wake *doorbell,
                  struct exit_env **ret_env)
{
        return exit_env_real_accounts(&cfg, &max_open, 1, doorbell, ret_env);
}

struct store *exit_env_account_store(const struct exit_env *env, unsigned i,
                                     struct store **ret_outcome_store)
{
        const struct real *x = (const struct real *)env;

        if (!x || i >= x->n) {
                *ret_outcome_store = NULL;
                return NULL;
        }
        *ret_outcome_store = x->outcome_stores[i];
        return x->stores[i];
}

void exit_env_free(struct exit_env *env)
{
        struct real *x = (struct real *)env;

        if (!x)
                return;
        transport_free(x->transport);
        for (unsigned i = 0; x->stores && i < x->n; i++) {
                store_close(x->outcome_stores[i]);
                store_close(x->stores[i]); /* the first stops its listener, which rings own_bell */
        }
        free(x->stores);
        free(x->outcome_stores);
        free(x->views);
        wake_free(x->own_bell);
        wake_free(x->store_bell);
        free(x);
}
