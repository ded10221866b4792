/*
 * ownership — acquiring, taking over and rejoining the exit. See
 * ownership.h.
 */
#include "daemon/ownership.h"

#include <stdio.h>

#include "core/tg_error.h"
#include "daemon/log.h"

#define STANDBY_RETRY_NS (250 * TG_NS_PER_MS)
#define WAIT_STEP_NS     (100 * TG_NS_PER_MS) /* a stop is noticed within this */
/* A spare's first try comes this long after it first looked: dispatchers
 * started together (a deploy, a test) each take their own share first,
 * instead of one taking a share a starting process is about to take and
 * handing it back. */
#define SPARE_SETTLE_NS (10 * TG_NS_PER_S)

static bool stopping(const struct ownership *o)
{
        return *o->stop != 0;
}

bool ownership_wait(const struct ownership *o, tg_mono_ns ns)
{
        const struct exit_env *env = o->env;
        tg_mono_ns end = env->mono_now(env->ctx) + ns;

        for (;;) {
                if (stopping(o))
                        return false;
                tg_mono_ns left = end - env->mono_now(env->ctx);
                if (left <= 0)
                        return true;
                env->sleep(env->ctx, left < WAIT_STEP_NS ? left : WAIT_STEP_NS);
        }
}

static void log_split_conflict(const struct ownership *o)
{
        /* Another split is in force and a dispatcher under it is alive:
         * running beside it would let the two configurations add up to more
         * than the account. */
        struct store_split in = {0};
        char msg[400];

        store_split_get(o->store, &in);
        snprintf(msg, sizeof(msg),
                 "the store's account quota is split into %u share(s) of "
                 "%g starts/s (max_in_flight %u) and a dispatcher holding one "
                 "is running; this config says %u share(s) of %g starts/s "
                 "(max_in_flight %u). Refusing to start: give every dispatcher "
                 "of this account the same [exit] starts_per_second, "
                 "max_in_flight and shares, or stop the running ones first",
                 in.shares, in.starts_per_second, in.max_in_flight, o->split.shares,
                 o->split.starts_per_second, o->split.max_in_flight);
        log_emit(LOG_ERROR, "split_conflict", json_pack("{s:s}", "message", msg));
}

/* One try at a free share. 0 (owned, logged); TG_ELOCKED (every share is
 * held: a standby, said once per wait in *said); a transient store error
 * (logged); TG_ECONFLICT (logged); or another negative code. */
/* A spare: the split's want count read, and whether a standby wants a share
 * now (then the spare leaves it to the standby). A store that cannot answer
 * counts as wanted: try again later. */
static bool spare_yields(struct ownership *o)
{
        struct store_split in;
        tg_mono_ns now = o->env->mono_now(o->env->ctx);
        int r = store_split_get(o->store, &in);

        if (o->spare_from == 0)
                o->spare_from = now + SPARE_SETTLE_NS;
        if (r == 0)
                share_want_seen(&o->want, in.want_seq, now);
        else if (r != TG_ENOTFOUND)
                return true;
        return now < o->spare_from || share_want_fresh(&o->want, now);
}

/* A standby of a split of several shares says it wants one, about once a
 * second (a failure is only a wish unsaid: the next try says it). */
static void standby_wants(struct ownership *o)
{
        tg_mono_ns now = o->env->mono_now(o->env->ctx);

        if (o->spare || o->no_wait || o->split.shares <= 1 || now < o->want_next)
                return;
        o->want_next = now + SHARE_WANT_EVERY_NS;
        (void)store_share_want(o->store);
}

static int acquire_once(struct ownership *o, bool *said)
{
        int r;

        if (o->spare && spare_yields(o))
                return TG_ELOCKED;
        /* A free share of the account, or the whole exit when exit.shares =
         * 1 (then the owner lock, as always). */
        r = store_share_acquire(o->store, &o->split, &o->share, &o->epoch);
        if (r == 0) {
                if (o->standby)
                        *o->standby = 0;
                log_emit(LOG_INFO, "owner",
                         json_pack("{s:I, s:i, s:i, s:b}", "epoch", (json_int_t)o->epoch, "share",
                                   (int)o->share, "shares", (int)o->split.shares, "spare",
                                   o->spare));
                return 0;
        }
        if (o->spare)
                return store_error_transient(r) || r == TG_ELOCKED ? TG_ELOCKED : r;
        if (r == TG_ECONFLICT) {
                log_split_conflict(o);
                return r;
        }
        if (store_error_transient(r)) {
                /* The database cannot answer right now (restarting,
                 * connection refused, a full disk): wait it out as a
                 * standby. */
                log_emit(LOG_WARN, "owner_acquire_failed",
                         json_pack("{s:s}", "error", tg_strerror(r)));
                return r;
        }
        if (r != TG_ELOCKED)
                return r;
        standby_wants(o);
        if (!*said && !o->no_wait) {
                log_emit(LOG_INFO, "standby",
                         json_pack("{s:s}", "message",
                                   o->split.shares > 1
                                       ? "every share of the account is held; waiting "
                                         "as a standby until one is free"
                                       : "another dispatcher owns the exit; waiting as a "
                                         "standby until it is gone"));
                *said = true;
        }
        if (o->standby && !o->no_wait)
                *o->standby = 1;
        return r;
}

static void log_no_wait(void)
{
        log_emit(LOG_ERROR, "owner_busy",
                 json_pack("{s:s}", "message",
                           "another dispatcher owns the exit for this store; "
                           "--no-wait given, exiting"));
}

int ownership_acquire(struct ownership *o)
{
        bool said = false;

        for (;;) {
                int r = acquire_once(o, &said);

                if (r == 0 || r == TG_ECONFLICT)
                        return r;
                if (store_error_transient(r)) {
                        if (!ownership_wait(o, 4 * STANDBY_RETRY_NS))
                                return 1;
                        continue;
                }
                if (r != TG_ELOCKED)
                        return r;
                if (o->no_wait) {
                        log_no_wait();
                        return 3;
                }
                if (!ownership_wait(o, STANDBY_RETRY_NS))
                        return 1;
        }
}

/* The takeover wait: nothing when the exit never had an owner. The
 * previous owner's calls may still be open at the provider: wait out one
 * full call timeout before sending. (This clears our own waiting budget
 * only; it does not prove the provider stopped: unknowns are still
 * reconciled.) A call it handed over may reach the wire as late as its
 * timeout (a slow connect), and our pacer starts empty: one spacing more
 * keeps our first start 1/rate after it. A previous owner that lost its
 * lock alive may still hand calls over (claims made ahead) until its owner
 * check is stale, OWNERSHIP_FRESH_NS after it lost it at most: that too.
 * Logged when there is one. */
static tg_mono_ns takeover_wait(const struct ownership *o)
{
        tg_mono_ns wait;

        if (o->epoch <= 1)
                return 0;
        wait = o->provider_timeout_ms * TG_NS_PER_MS + o->spacing_ns + OWNERSHIP_FRESH_NS;
        log_emit(
            LOG_INFO, "takeover_wait",
            json_pack("{s:I}", "wait_ms", (json_int_t)((wait + TG_NS_PER_MS - 1) / TG_NS_PER_MS)));
        return wait;
}

/* The previous owner's in_flight operations become unknown. */
static int recover(struct ownership *o)
{
        unsigned n = 0;
        int r = store_recover(o->store, o->epoch, o->policy, o->env->wall_now(o->env->ctx), &n);

        if (r < 0)
                return r;
        if (n > 0)
                log_emit(LOG_WARN, "recovered_in_flight", json_pack("{s:i}", "to_unknown", (int)n));
        return 0;
}

int ownership_take_over(struct ownership *o)
{
        tg_mono_ns wait = takeover_wait(o);

        if (wait > 0 && !ownership_wait(o, wait))
                return 1;
        return recover(o);
}

void ownership_begin(struct ownership *o, tg_mono_ns now)
{
        o->phase = OWNERSHIP_ACQUIRE;
        o->next = now;
        o->said = false;
}

int ownership_step(struct ownership *o, tg_mono_ns now)
{
        int r;

        if (*o->stop)
                return 1;
        if (o->phase == OWNERSHIP_OWNED)
                return 0;
        if (now < o->next)
                return 2;
        if (o->phase == OWNERSHIP_ACQUIRE) {
                r = acquire_once(o, &o->said);
                if (r == TG_ELOCKED && o->no_wait) {
                        log_no_wait();
                        return 3;
                }
                if (r == TG_ELOCKED || store_error_transient(r)) {
                        o->next = now + (r == TG_ELOCKED && !o->spare ? 1 : 4) * STANDBY_RETRY_NS;
                        return 2;
                }
                if (r < 0)
                        return r;
                o->said = false;
                o->phase = OWNERSHIP_TAKEOVER;
                o->next = now + takeover_wait(o);
                if (o->next > now)
                        return 2;
        }
        /* the takeover wait is over */
        r = recover(o);
        if (store_error_transient(r)) {
                /* as a rejoin rides it out: the share goes back, and is
                 * taken again once the store answers */
                log_emit(LOG_WARN, "rejoin_failed", json_pack("{s:s}", "error", tg_strerror(r)));
                store_owner_release(o->store);
                o->phase = OWNERSHIP_ACQUIRE;
                o->next = now + 4 * STANDBY_RETRY_NS;
                return 2;
        }
        if (r < 0)
                return r;
        o->phase = OWNERSHIP_OWNED;
        return 0;
}

int ownership_rejoin(struct ownership *o)
{
        for (;;) {
                int r;

                store_owner_release(o->store);
                r = ownership_acquire(o);
                if (r == 0)
                        r = ownership_take_over(o);
                if (!store_error_transient(r))
                        return r;
                log_emit(LOG_WARN, "rejoin_failed", json_pack("{s:s}", "error", tg_strerror(r)));
                if (!ownership_wait(o, 4 * STANDBY_RETRY_NS))
                        return 1;
        }
}
