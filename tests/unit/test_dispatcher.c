/*
 * Tests of the real dispatcher (daemon/dispatcher.c), driven turn by turn
 * through a fake environment: a virtual clock that only moves when the
 * dispatcher waits, and a fake transport that plays a scripted provider
 * (latency, timeouts, resets, 429/503 with Retry-After, query answers), over
 * a real SQLite store in a temporary directory. Each scenario runs minutes
 * of virtual time in milliseconds of real time, and is judged from the
 * fake transport's record of every start (the provider's door) and from the
 * store:
 *   - a fast provider: starts at least 1/rate apart, in flight under the cap,
 *     one POST per operation, every operation succeeded;
 *   - slower than the timeout (executed, answer lost): unknown, reconciled by
 *     a query with the same key, never a second POST;
 *   - a connection reset after the request: the same;
 *   - a 503 with Retry-After: nothing starts before the hold ends, then one
 *     probe, then the configured rate;
 *   - a run of timeouts holds the exit;
 *   - a takeover: the new owner waits one call timeout, turns the old
 *     owner's in_flight operation into unknown and reconciles it by query.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "daemon/config.h"
#include "daemon/dispatcher.h"
#include "daemon/exit_env.h"
#include "daemon/log.h"
#include "store/store.h"

#define WALL0      1700000000000LL
#define MS         TG_NS_PER_MS
#define MAX_OPEN   64
#define MAX_STARTS 4096

/* ---- the fake environment ------------------------------------------------------- */

struct answer {
        tg_mono_ns latency;
        enum tg_transport_result transport; /* TG_TR_COMPLETE, RESET, NOT_SENT */
        int http_status;
        const char *status;     /* body .status */
        const char *error_code; /* body .error.code */
        const char *retry_after;
};

struct fake;
typedef void (*provider_fn)(struct fake *f, const struct transport_call *call, struct answer *ret);

struct fake_call {
        bool open, done;
        tg_mono_ns done_at;
        struct transport_result result;
};

struct start_rec {
        tg_mono_ns at;
        enum classify_request request;
        char operation_id[TG_OP_ID_MAX + 1];
        unsigned attempt;
        unsigned open_after; /* calls open at the transport, this one included */
};

struct fake {
        struct exit_env env;
        tg_mono_ns mono;
        struct fake_call calls[MAX_OPEN];
        struct start_rec starts[MAX_STARTS];
        unsigned n_starts;
        provider_fn provider;
        unsigned answered; /* calls the provider has answered, for scripts */
};

static tg_mono_ns f_mono(void *ctx)
{
        return ((struct fake *)ctx)->mono;
}

static tg_wall_ms f_wall(void *ctx)
{
        return WALL0 + ((struct fake *)ctx)->mono / MS;
}

static void f_sleep(void *ctx, tg_mono_ns ns)
{
        if (ns > 0)
                ((struct fake *)ctx)->mono += ns;
}

static unsigned f_open(void *ctx)
{
        struct fake *f = ctx;
        unsigned n = 0;

        for (unsigned i = 0; i < MAX_OPEN; i++)
                n += f->calls[i].open;
        return n;
}

static int f_start(void *ctx, const struct transport_call *call, struct exit_handoff *ret)
{
        struct fake *f = ctx;
        struct fake_call *c = NULL;
        struct answer a = {.latency = 50 * MS, .transport = TG_TR_COMPLETE, .http_status = 201};
        tg_mono_ns timeout = call->timeout_ms * MS;

        ret->mono = f->mono;
        ret->wall = f_wall(f);
        for (unsigned i = 0; i < MAX_OPEN && !c; i++)
                if (!f->calls[i].open)
                        c = &f->calls[i];
        if (!c)
                return TG_EFULL;
        assert_true(f->n_starts < MAX_STARTS);
        struct start_rec *s = &f->starts[f->n_starts++];
        s->at = f->mono;
        s->request = call->request;
        snprintf(s->operation_id, sizeof(s->operation_id), "%s", call->operation_id);
        s->attempt = call->attempt;
        f->provider(f, call, &a);
        f->answered++;
        memset(c, 0, sizeof(*c));
        c->open = true;
        c->result.cookie = call->cookie;
        c->result.sent = a.transport != TG_TR_NOT_SENT;
        if (a.latency > timeout) { /* the whole-call timeout ends it */
                c->done_at = f->mono + timeout;
                c->result.reply.transport = TG_TR_TIMEOUT_AFTER_SEND;
                c->result.latency_us = timeout / 1000;
                snprintf(c->result.error, sizeof(c->result.error), "timeout");
        } else {
                c->done_at = f->mono + a.latency;
                c->result.reply.transport = a.transport;
                c->result.latency_us = a.latency / 1000;
                if (a.transport == TG_TR_COMPLETE) {
                        c->result.reply.http_status = a.http_status;
                        c->result.reply.body_is_json = true;
                        snprintf(c->result.reply.status, sizeof(c->result.reply.status), "%s",
                                 a.status ? a.status : "");
                        snprintf(c->result.reply.error_code, sizeof(c->result.reply.error_code),
                                 "%s", a.error_code ? a.error_code : "");
                        snprintf(c->result.retry_after, sizeof(c->result.retry_after), "%s",
                                 a.retry_after ? a.retry_after : "");
                }
        }
        s->open_after = f_open(f);
        return 0;
}

/* Virtual time moves to `until`, or to the first reply before it. */
static int f_poll(void *ctx, tg_mono_ns until)
{
        struct fake *f = ctx;
        tg_mono_ns first = TG_MONO_NEVER;

        for (unsigned i = 0; i < MAX_OPEN; i++)
                if (f->calls[i].open && !f->calls[i].done && f->calls[i].done_at < first)
                        first = f->calls[i].done_at;
        if (first <= until)
                until = first;
        if (until > f->mono)
                f->mono = until;
        for (unsigned i = 0; i < MAX_OPEN; i++)
                if (f->calls[i].open && f->calls[i].done_at <= f->mono)
                        f->calls[i].done = true;
        return 0;
}

static int f_next_done(void *ctx, struct transport_result *ret)
{
        struct fake *f = ctx;

        for (unsigned i = 0; i < MAX_OPEN; i++)
                if (f->calls[i].open && f->calls[i].done) {
                        *ret = f->calls[i].result;
                        f->calls[i].open = false;
                        return 0;
                }
        return TG_ENOTFOUND;
}

/* ---- fixtures ------------------------------------------------------------------- */

struct fx {
        char dir[64];
        char url[128];
        struct tg_config cfg;
        struct fake fake;
        volatile sig_atomic_t stop;
        struct dispatcher_options opt;
        struct dispatcher *d;
};

static void fake_init(struct fx *x, struct fake *f, provider_fn provider)
{
        memset(f, 0, sizeof(*f));
        f->env = (struct exit_env){.ctx = f,
                                   .mono_now = f_mono,
                                   .wall_now = f_wall,
                                   .sleep = f_sleep,
                                   .start = f_start,
                                   .poll = f_poll,
                                   .next_done = f_next_done,
                                   .open_calls = f_open,
                                   .seed = 7};
        f->mono = 1000 * MS;
        f->provider = provider;
        assert_int_equal(store_open(x->url, &f->env.store), 0);
}

static int setup(void **state)
{
        struct fx *x = calloc(1, sizeof(*x));

        if (!x)
                return -1;
        snprintf(x->dir, sizeof(x->dir), "/tmp/tg-test-disp-XXXXXX");
        if (!mkdtemp(x->dir))
                return -1;
        snprintf(x->url, sizeof(x->url), "sqlite://%s/t.db", x->dir);
        config_defaults(&x->cfg);
        snprintf(x->cfg.store_url, sizeof(x->cfg.store_url), "%s", x->url);
        x->opt.stop = &x->stop;
        log_set_level(LOG_ERROR);
        *state = x;
        return 0;
}

static int teardown(void **state)
{
        struct fx *x = *state;
        char cmd[128];

        dispatcher_free(x->d);
        store_close(x->fake.env.store);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", x->dir);
        if (system(cmd) != 0)
                return -1;
        free(x);
        return 0;
}

static void accept_n(struct fx *x, unsigned n, const char *prefix)
{
        for (unsigned i = 0; i < n; i++) {
                struct refund_request r;
                struct op_record op;
                bool created = false;

                memset(&r, 0, sizeof(r));
                snprintf(r.operation_id, sizeof(r.operation_id), "%s-%03u", prefix, i);
                snprintf(r.payment_id, sizeof(r.payment_id), "pay-%u", i);
                r.amount = 100 + i;
                memcpy(r.currency, "TWD", 4);
                assert_int_equal(store_accept(x->fake.env.store, &r, f_wall(&x->fake),
                                              &x->cfg.policy, &created, &op),
                                 0);
                assert_true(created);
        }
}

static void open_dispatcher(struct fx *x, provider_fn provider)
{
        fake_init(x, &x->fake, provider);
        assert_int_equal(dispatcher_new(&x->cfg, &x->opt, &x->fake.env, &x->d), 0);
        assert_int_equal(dispatcher_open(x->d), 0);
}

/* Turns until every operation is final or in manual, or virtual time runs
 * out; returns the virtual time it took. */
static tg_mono_ns run_until_settled(struct fx *x, tg_mono_ns budget)
{
        tg_mono_ns t0 = x->fake.mono;

        while (x->fake.mono - t0 < budget) {
                struct store_stats st;

                assert_int_equal(dispatcher_turn(x->d), 0);
                assert_int_equal(store_stats(x->fake.env.store, &st), 0);
                if (st.by_state[OP_PENDING] + st.by_state[OP_IN_FLIGHT] +
                        st.by_state[OP_RETRY_WAIT] + st.by_state[OP_UNKNOWN] ==
                    0)
                        break;
        }
        return x->fake.mono - t0;
}

static unsigned count_state(struct fx *x, enum op_state state)
{
        struct store_stats st;

        assert_int_equal(store_stats(x->fake.env.store, &st), 0);
        return (unsigned)st.by_state[state];
}

/* Every start at least 1/rate after the one before, in whole milliseconds as a
 * provider would judge it; and never more open than the cap. */
static void check_spacing(const struct fake *f, double rate, unsigned cap)
{
        tg_mono_ns interval = (tg_mono_ns)(1e9 / rate + 0.5);

        for (unsigned i = 0; i < f->n_starts; i++) {
                assert_true(f->starts[i].open_after <= cap);
                if (i > 0 && f->starts[i].at - f->starts[i - 1].at < interval)
                        fail_msg("starts %u and %u are %lld ns apart (< %lld)", i - 1, i,
                                 (long long)(f->starts[i].at - f->starts[i - 1].at),
                                 (long long)interval);
        }
}

static unsigned posts_of(const struct fake *f, const char *op)
{
        unsigned n = 0;

        for (unsigned i = 0; i < f->n_starts; i++)
                n += f->starts[i].request == CLASSIFY_POST &&
                     strcmp(f->starts[i].operation_id, op) == 0;
        return n;
}

/* ---- providers ------------------------------------------------------------------- */

static void fast(struct fake *f, const struct transport_call *call, struct answer *a)
{
        (void)f;
        a->latency = 80 * MS;
        a->http_status = call->request == CLASSIFY_POST ? 201 : 200;
        a->status = "succeeded";
}

/* The refund executes but its answer comes after the timeout; queries say
 * it succeeded. */
static void slow_then_known(struct fake *f, const struct transport_call *call, struct answer *a)
{
        (void)f;
        if (call->request == CLASSIFY_POST) {
                a->latency = 5000 * MS;
                return;
        }
        a->latency = 30 * MS;
        a->http_status = 200;
        a->status = "succeeded";
}

/* The refund executes and the connection drops before the answer. */
static void drop_then_known(struct fake *f, const struct transport_call *call, struct answer *a)
{
        (void)f;
        if (call->request == CLASSIFY_POST) {
                a->latency = 100 * MS;
                a->transport = TG_TR_RESET;
                return;
        }
        a->latency = 30 * MS;
        a->http_status = 200;
        a->status = "succeeded";
}

/* The first call: 503 with Retry-After 2 s; everything else fast. */
static void unavailable_once(struct fake *f, const struct transport_call *call, struct answer *a)
{
        fast(f, call, a);
        if (f->answered == 0) {
                a->http_status = 503;
                a->status = NULL;
                a->error_code = "temporarily_unavailable";
                a->retry_after = "2";
        }
}

/* Every POST times out (nothing known), queries say processing. */
static void always_slow(struct fake *f, const struct transport_call *call, struct answer *a)
{
        (void)f;
        a->latency = call->request == CLASSIFY_POST ? 10000 * MS : 30 * MS;
        a->http_status = 200;
        a->status = "processing";
}

/* Nothing reaches the provider for the first 20 s (a certificate that does
 * not verify, say: every call fails before its request leaves), then it is
 * fixed and answers fast. */
static void unreachable_then_fixed(struct fake *f, const struct transport_call *call,
                                   struct answer *a)
{
        fast(f, call, a);
        if (f->mono < 20 * TG_NS_PER_S) {
                a->latency = 2 * MS;
                a->transport = TG_TR_NOT_SENT;
        }
}

/* ---- scenarios ------------------------------------------------------------------- */

static void test_fast_provider(void **state)
{
        struct fx *x = *state;

        open_dispatcher(x, fast);
        accept_n(x, 30, "fast");
        tg_mono_ns took = run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 30);
        assert_int_equal(x->fake.n_starts, 30);
        check_spacing(&x->fake, 5.0, 10);
        for (unsigned i = 0; i < x->fake.n_starts; i++)
                assert_int_equal(posts_of(&x->fake, x->fake.starts[i].operation_id), 1);
        /* 30 starts 200 ms apart: about 6 s, never faster */
        assert_true(took >= 29 * 200 * MS);
        assert_true(took < 8 * TG_NS_PER_S);
}

static void test_timeout_reconciled_with_same_key(void **state)
{
        struct fx *x = *state;

        open_dispatcher(x, slow_then_known);
        accept_n(x, 5, "slow");
        run_until_settled(x, 120 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 5);
        check_spacing(&x->fake, 5.0, 10);
        for (unsigned i = 0; i < 5; i++) {
                char id[32];
                unsigned queries = 0;

                snprintf(id, sizeof(id), "slow-%03u", i);
                assert_int_equal(posts_of(&x->fake, id), 1); /* never a second POST */
                for (unsigned k = 0; k < x->fake.n_starts; k++)
                        queries += x->fake.starts[k].request == CLASSIFY_QUERY &&
                                   strcmp(x->fake.starts[k].operation_id, id) == 0;
                assert_int_equal(queries, 1);
        }
}

static void test_reset_reconciled(void **state)
{
        struct fx *x = *state;

        open_dispatcher(x, drop_then_known);
        accept_n(x, 4, "drop");
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 4);
        for (unsigned i = 0; i < 4; i++) {
                char id[32];

                snprintf(id, sizeof(id), "drop-%03u", i);
                assert_int_equal(posts_of(&x->fake, id), 1);
        }
}

static void test_503_holds_the_exit(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;

        open_dispatcher(x, unavailable_once);
        accept_n(x, 6, "hold");
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 6);
        assert_true(f->n_starts >= 7); /* the refused one is sent again */
        /* The 503 came back 80 ms after the first start: no start for 2 s
         * after it, then the probe alone, then the configured rate. */
        tg_mono_ns refused_end = f->starts[0].at + 80 * MS;
        assert_true(f->starts[1].at >= refused_end + 2000 * MS);
        /* the probe had the exit to itself until it answered */
        assert_true(f->starts[2].at >= f->starts[1].at + 80 * MS);
        check_spacing(f, 5.0, 10);
}

static void test_timeouts_hold_the_exit(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        unsigned held = 0;

        x->cfg.exit_timeout_run_hold = 2;
        x->cfg.exit_timeout_hold_ms = 4000;
        x->cfg.exit.max_in_flight = 2;
        open_dispatcher(x, always_slow);
        accept_n(x, 6, "tmo");
        run_until_settled(x, 12 * TG_NS_PER_S);
        /* with two in flight, POSTs end 3 s after their start; after two
         * timeouts in a row, nothing starts for 4 s */
        for (unsigned i = 1; i < f->n_starts; i++)
                if (f->starts[i].at - f->starts[i - 1].at >= 4000 * MS)
                        held++;
        assert_true(held >= 1);
        check_spacing(f, 5.0, 2);
}

static void test_unreachable_holds_and_doubles(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        unsigned before = 0;

        x->cfg.provider_unreachable_run_hold = 3;
        x->cfg.provider_unreachable_hold_ms = 1000;
        x->cfg.provider_unreachable_hold_max_ms = 4000;
        x->cfg.policy.max_attempts = 50;
        open_dispatcher(x, unreachable_then_fixed);
        accept_n(x, 10, "unr");
        run_until_settled(x, 120 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 10);
        for (unsigned i = 0; i < f->n_starts; i++)
                before += f->starts[i].at < 20 * TG_NS_PER_S;
        /* three at the rate, then one probe per hold: 1 s, 2 s, 4 s, 4 s, ...
         * (each hold counted from the failed call's end, 2 ms after its
         * start), where the full rate would have spent 100 starts */
        assert_true(f->starts[1].at - f->starts[0].at < 300 * MS);
        assert_true(f->starts[2].at - f->starts[1].at < 300 * MS);
        assert_true(f->starts[3].at - f->starts[2].at >= 1000 * MS);
        assert_true(f->starts[4].at - f->starts[3].at >= 2000 * MS);
        assert_true(f->starts[5].at - f->starts[4].at >= 4000 * MS);
        assert_true(f->starts[6].at - f->starts[5].at >= 4000 * MS);
        assert_true(f->starts[6].at - f->starts[5].at < 4500 * MS);
        if (before > 3 + 6)
                fail_msg("%u starts while unreachable", before);
        check_spacing(f, 5.0, 10);
}

static void test_takeover_waits_and_reconciles(void **state)
{
        struct fx *x = *state;
        struct fake old;
        struct dispatcher *a = NULL;
        struct op_record op;

        /* The first owner claims and sends one call, then vanishes without a
         * word: its process is gone, its lock with it. */
        fake_init(x, &old, slow_then_known);
        assert_int_equal(dispatcher_new(&x->cfg, &x->opt, &old.env, &a), 0);
        assert_int_equal(dispatcher_open(a), 0);
        {
                struct refund_request r;
                bool created = false;

                memset(&r, 0, sizeof(r));
                snprintf(r.operation_id, sizeof(r.operation_id), "take-1");
                snprintf(r.payment_id, sizeof(r.payment_id), "pay");
                r.amount = 100;
                memcpy(r.currency, "TWD", 4);
                assert_int_equal(
                    store_accept(old.env.store, &r, f_wall(&old), &x->cfg.policy, &created, &op),
                    0);
        }
        while (old.n_starts == 0)
                assert_int_equal(dispatcher_turn(a), 0);
        assert_int_equal(store_get(old.env.store, "take-1", &op), 0);
        assert_int_equal(op.state, OP_IN_FLIGHT);
        dispatcher_free(a);
        store_close(old.env.store);

        /* The new owner: one call timeout of waiting, then the operation is
         * unknown and reconciled by a query with the same key. */
        fake_init(x, &x->fake, slow_then_known);
        tg_mono_ns t0 = x->fake.mono;
        assert_int_equal(dispatcher_new(&x->cfg, &x->opt, &x->fake.env, &x->d), 0);
        assert_int_equal(dispatcher_open(x->d), 0);
        assert_true(x->fake.mono - t0 >= x->cfg.provider_timeout_ms * MS);
        assert_int_equal(store_get(x->fake.env.store, "take-1", &op), 0);
        assert_int_equal(op.state, OP_UNKNOWN);
        run_until_settled(x, 30 * TG_NS_PER_S);
        assert_int_equal(store_get(x->fake.env.store, "take-1", &op), 0);
        assert_int_equal(op.state, OP_SUCCEEDED);
        assert_int_equal(x->fake.n_starts, 1);
        assert_int_equal(x->fake.starts[0].request, CLASSIFY_QUERY);
        assert_string_equal(x->fake.starts[0].operation_id, "take-1");
}

static void test_stop_drains(void **state)
{
        struct fx *x = *state;

        open_dispatcher(x, slow_then_known);
        accept_n(x, 3, "stop");
        while (x->fake.n_starts == 0)
                assert_int_equal(dispatcher_turn(x->d), 0);
        x->stop = 1;
        /* no new start; the open call ends (at its timeout) and is settled */
        int r = 0;
        for (int i = 0; i < 10000 && r == 0; i++)
                r = dispatcher_turn(x->d);
        assert_int_equal(r, 1);
        assert_int_equal(x->fake.n_starts, 1);
        assert_int_equal(count_state(x, OP_UNKNOWN), 1);
        assert_int_equal(count_state(x, OP_PENDING), 2);
        assert_false(dispatcher_lost(x->d));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_fast_provider, setup, teardown),
            cmocka_unit_test_setup_teardown(test_timeout_reconciled_with_same_key, setup, teardown),
            cmocka_unit_test_setup_teardown(test_reset_reconciled, setup, teardown),
            cmocka_unit_test_setup_teardown(test_503_holds_the_exit, setup, teardown),
            cmocka_unit_test_setup_teardown(test_unreachable_holds_and_doubles, setup, teardown),
            cmocka_unit_test_setup_teardown(test_timeouts_hold_the_exit, setup, teardown),
            cmocka_unit_test_setup_teardown(test_takeover_waits_and_reconciles, setup, teardown),
            cmocka_unit_test_setup_teardown(test_stop_drains, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
