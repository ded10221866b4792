/*
 * exit_env — everything the dispatcher touches outside itself, in one small
 * struct: the clocks, the waits, the transport and the store. The daemon
 * runs the dispatcher on the real ones (exit_env_real: platform/clock.h,
 * net/transport.h, the configured store); tests/unit/test_dispatcher.c runs
 * the same dispatcher on a fake clock and transport in virtual time, over a
 * real store. Nothing in the dispatcher reads a clock, sleeps or does I/O but
 * through this struct.
 */
#ifndef TG_EXIT_ENV_H
#define TG_EXIT_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "core/tg_time.h"
#include "net/transport.h"

struct tg_config;
struct store;

/* The moment a request was handed to the transport. */
struct exit_handoff {
        tg_mono_ns mono;
        tg_wall_ms wall;
};

struct exit_env {
        void *ctx; /* passed to every function below */
        tg_mono_ns (*mono_now)(void *ctx);
        tg_wall_ms (*wall_now)(void *ctx);
        int64_t (*wall_ns)(void *ctx); /* wall clock in ns: shares' common time base */
        /* a wait that is not I/O: a standby's retry, the takeover wait */
        void (*sleep)(void *ctx, tg_mono_ns ns);
        /* the transport (net/transport.h's contract): start a call now
         * (*ret_handoff: when it was handed over, filled even when the start
         * failed), wait for I/O until the monotonic time `until` at most, pop
         * a finished call (TG_ENOTFOUND: none), count the open ones */
        int (*start)(void *ctx, const struct transport_call *call,
                     struct exit_handoff *ret_handoff);
        int (*poll)(void *ctx, tg_mono_ns until); /* 1: the doorbell rang (work arrived) */
        int (*next_done)(void *ctx, struct transport_result *ret_result);
        /* pop a call's report that its request went on the wire (or never
         * will); every started call gives one, before its result */
        int (*next_sent)(void *ctx, struct transport_sent *ret_sent);
        unsigned (*open_calls)(void *ctx);
        /* re-reads the provider's credentials from their files and gives
         * them to the transport (calls open keep theirs); err says why not.
         * NULL: nothing to re-read (a fake environment). */
        int (*reload_credentials)(void *ctx, char *err, size_t err_size);
        /* the store, opened by whoever made the env and closed by it */
        struct store *store;
        uint64_t seed; /* of the dispatcher's random source (backoff jitter, request ids) */
        /* poll() returns 1 when another thread rang (serve: the API accepted
         * a refund); without a doorbell an idle exit looks for work with a
         * poll interval that backs off */
        bool has_doorbell;
        /* Rung by the dispatcher's store thread (daemon/store_worker.h) when
         * a job is done; poll() wakes for it (and returns 0). NULL: no store
         * thread, the store's work runs inline (the fake environments, in
         * virtual time). */
        struct wake *store_bell;
        /* A second connection to the store for outcomes, committed by a
         * thread of their own beside the claims' (MariaDB: the server works
         * on both at once); NULL: outcomes go through `store`. */
        struct store *outcome_store;
};

struct wake;

/* The real environment for `config`: the system clocks, a libcurl transport
 * for at most max_open calls, the configured store (busy timeout set short,
 * so a locked store never stalls the loop), and `doorbell` (borrowed; NULL:
 * none) rung by another thread when work arrives. A store that rings across
 * processes (store_listen: PostgreSQL) rings it too, or a doorbell of the
 * env's own when `doorbell` is NULL. 0 or a TG_E* code; free it
 * with exit_env_free() (accepts NULL and a half-built one). */
int exit_env_real(const struct tg_config *config, unsigned max_open, struct wake *doorbell,
                  struct exit_env **ret_env);
void exit_env_free(struct exit_env *env);

/* The real environment for several accounts in one loop: views[i] (an
 * account's view of the config, config_account_view; borrowed, outliving
 * the env) is served by exit i. The transport has a lane per account (its
 * provider, mapping, credentials, and max_open[i] calls open at most: the
 * cap holds at the transport for each account), each account its own store
 * connections bound to it (exit_env_account_store); env->store is account
 * 0's. One doorbell and one store listener for all. n = 1 is
 * exit_env_real(). */
int exit_env_real_accounts(const struct tg_config *const *views, const unsigned *max_open,
                           unsigned n, struct wake *doorbell, struct exit_env **ret_env);
/* Account i's store and (*ret_outcome_store, NULL: none) its outcome
 * connection; NULL for no such account. */
struct store *exit_env_account_store(const struct exit_env *env, unsigned i,
                                     struct store **ret_outcome_store);

/* Key rotation without a restart: re-reads the provider's API key, signing
 * key and client certificate and key (the files the config named at start)
 * and hands them to the transport; calls already open finish with the old
 * ones. 0, or a TG_E* code with err ("provider.KEY: problem", never a
 * secret) and the old credentials kept. Meant for the service's SIGHUP. */
int exit_env_reload_credentials(const struct exit_env *env, char *err, size_t err_size);

#endif
