/*
 * exit_env — the real environment of the dispatcher: the system clocks,
 * the libcurl transport, the configured store. See exit_env.h.
 */
#include "daemon/exit_env.h"

#include <stdlib.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "daemon/config.h"
#include "platform/clock.h"
#include "platform/wake.h"
#include "store/store.h"

/* A locked store must not stall the loop that reads replies: wait briefly,
 * then keep the outcome and retry (dispatcher.c, unsettled outcomes). */
#define DISPATCH_BUSY_TIMEOUT_MS 200

/* The transport's poll counts whole milliseconds: a longer wait polls the
 * whole milliseconds but the last (it may wake early, never late), and a
 * wait shorter than this is slept to the moment (clock_sleep_until) after a
 * non-blocking look at the sockets: a hand-off comes when it is due, not up
 * to a millisecond later. */
#define PRECISE_WAIT_NS (2 * TG_NS_PER_MS)

struct real {
        struct exit_env env;
        struct transport *transport;
        struct wake *doorbell;
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
        int fd = wake_fd(x->doorbell);
        int r;

        if (wait <= 0) {
                r = transport_poll(x->transport, 0, fd);
        } else if (wait < PRECISE_WAIT_NS) {
                r = transport_poll(x->transport, 0, fd);
                if (r == 0)
                        clock_sleep_until(until);
        } else {
                /* early by up to two milliseconds: the next turn waits the
                 * rest precisely */
                r = transport_poll(x->transport, (int)(wait / TG_NS_PER_MS) - 1, fd);
        }
        if (r == 1 && !wake_drain(x->doorbell))
                r = 0;
        return r;
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

int exit_env_real(const struct tg_config *cfg, unsigned max_open, struct wake *doorbell,
                  struct exit_env **ret_env)
{
        struct real *x = calloc(1, sizeof(*x));
        /* this thread runs the exit: its sleeps end on time (best effort) */
        (void)clock_precise_timers();
        struct transport_config tc = {
            .base_url = cfg->provider_base_url,
            .refunds_path = cfg->provider_refunds_path,
            .query_path = cfg->provider_query_path,
            .key_header = cfg->provider_key_header,
            .request_id_header = cfg->provider_request_id_header,
            .attempt_header = cfg->provider_attempt_header,
            .connect_timeout_ms = cfg->provider_connect_timeout_ms,
            .max_response_bytes = cfg->provider_max_response_bytes,
            .max_open = max_open,
            .reuse_connections = cfg->provider_reuse_connections,
        };
        int r;

        if (!x)
                return TG_ENOMEM;
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
            .seed = (uint64_t)clock_mono_now() ^ ((uint64_t)getpid() << 32),
            .has_doorbell = doorbell != NULL,
        };
        x->doorbell = doorbell;
        r = store_open(cfg->store_url, &x->env.store);
        if (r == 0)
                store_set_busy_timeout(x->env.store, DISPATCH_BUSY_TIMEOUT_MS);
        if (r == 0)
                r = transport_new(&tc, &x->transport);
        if (r < 0) {
                exit_env_free(&x->env);
                return r;
        }
        *ret_env = &x->env;
        return 0;
}

void exit_env_free(struct exit_env *env)
{
        struct real *x = (struct real *)env;

        if (!x)
                return;
        transport_free(x->transport);
        store_close(x->env.store);
        free(x);
}
