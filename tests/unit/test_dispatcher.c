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
 *   - an absurd Retry-After holds the exit no longer than the cap, a
 *     quarter of the deadline at most; of two Retry-After values the
 *     longer counts;
 *   - a provider that answers 429 without Retry-After for a minute: each
 *     probe it refuses again holds twice as long, and no refund ends in
 *     manual for the attempts it was refused (429 executes nothing);
 *   - a takeover: the new owner waits one call timeout, turns the old
 *     owner's in_flight operation into unknown and reconciles it by query;
 *   - the caller's deadline: each call's timeout is the smaller of
 *     provider.timeout_ms and what is left of the deadline (read at the
 *     transport, where it decides), and an operation past its caller's
 *     deadline is not sent again;
 *   - trace context: every call of an operation carries its trace with a
 *     span of its own, in the header and in the call log.
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
        tg_mono_ns connect;                 /* hand-off to connection ready (default 300 us) */
        tg_mono_ns latency;                 /* from the request on the wire to the end */
        enum tg_transport_result transport; /* TG_TR_COMPLETE, RESET, NOT_SENT */
        int http_status;
        const char *status;     /* body .status */
        const char *error_code; /* body .error.code */
        const char *retry_after;
};

struct fake;
typedef void (*provider_fn)(struct fake *f, const struct transport_call *call, struct answer *ret);

struct fake_call {
        bool open, done, reported;
        tg_mono_ns done_at;
        tg_mono_ns sent_at; /* on the wire (0: never) */
        struct transport_result result;
};

struct start_rec {
        tg_mono_ns at;      /* on the wire, as the provider sees it */
        tg_mono_ns handoff; /* handed to the transport */
        enum classify_request request;
        char operation_id[TG_OP_ID_MAX + 1];
        unsigned attempt;
        unsigned open_after; /* calls open at the transport, this one included */
        int64_t timeout_ms;  /* the whole-call timeout the transport was given */
        tg_wall_ms wall;     /* when, on the wall clock */
        char traceparent[TG_TRACEPARENT_MAX + 1];
        char request_id[TG_REQUEST_ID_MAX + 1];
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

static int64_t f_wall_ns(void *ctx)
{
        return WALL0 * MS + ((struct fake *)ctx)->mono;
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
        struct answer a = {.connect = 300 * TG_NS_PER_US,
                           .latency = 50 * MS,
                           .transport = TG_TR_COMPLETE,
                           .http_status = 201};
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
        s->handoff = f->mono;
        s->request = call->request;
        snprintf(s->operation_id, sizeof(s->operation_id), "%s", call->operation_id);
        s->attempt = call->attempt;
        s->timeout_ms = call->timeout_ms;
        s->wall = f_wall(f);
        snprintf(s->traceparent, sizeof(s->traceparent), "%s",
                 call->traceparent ? call->traceparent : "");
        snprintf(s->request_id, sizeof(s->request_id), "%s", call->request_id);
        f->provider(f, call, &a);
        f->answered++;
        memset(c, 0, sizeof(*c));
        c->open = true;
        c->result.cookie = call->cookie;
        c->result.handoff_mono = f->mono;
        c->result.sent = a.transport != TG_TR_NOT_SENT;
        /* like the real transport: connect now, hold the request until its
         * not_before in the pre-request hook */
        tg_mono_ns ready = f->mono + a.connect;
        tg_mono_ns wire = ready > call->not_before ? ready : call->not_before;
        if (c->result.sent) {
                c->result.ready_mono = ready;
                c->result.sent_mono = wire;
                c->sent_at = wire;
        }
        /* a call never sent starts at its slot, as the call log says */
        s->at = c->result.sent ? wire : call->not_before > f->mono ? call->not_before : f->mono;
        if (!c->result.sent) { /* refused: it ends after its connect */
                c->done_at = ready;
                c->result.reply.transport = TG_TR_NOT_SENT;
        } else if (a.latency > timeout - (wire - f->mono)) { /* the whole-call timeout */
                c->done_at = f->mono + timeout;
                c->result.reply.transport = TG_TR_TIMEOUT_AFTER_SEND;
                c->result.latency_us = timeout / 1000;
                snprintf(c->result.error, sizeof(c->result.error), "timeout");
        } else {
                c->done_at = wire + a.latency;
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

/* Virtual time moves to `until`, or to the first event before it: a request
 * going on the wire, or a reply. */
static int f_poll(void *ctx, tg_mono_ns until)
{
        struct fake *f = ctx;
        tg_mono_ns first = TG_MONO_NEVER;

        for (unsigned i = 0; i < MAX_OPEN; i++) {
                struct fake_call *c = &f->calls[i];
                if (c->open && !c->done && c->done_at < first)
                        first = c->done_at;
                if (c->open && !c->reported && c->sent_at > 0 && c->sent_at < first)
                        first = c->sent_at;
        }
        if (first <= until)
                until = first;
        if (until > f->mono)
                f->mono = until;
        for (unsigned i = 0; i < MAX_OPEN; i++)
                if (f->calls[i].open && f->calls[i].done_at <= f->mono)
                        f->calls[i].done = true;
        return 0;
}

static int f_next_sent(void *ctx, struct transport_sent *ret)
{
        struct fake *f = ctx;

        for (unsigned i = 0; i < MAX_OPEN; i++) {
                struct fake_call *c = &f->calls[i];
                if (!c->open || c->reported)
                        continue;
                if (c->sent_at > 0 && c->sent_at <= f->mono) {
                        c->reported = true;
                        *ret = (struct transport_sent){.cookie = c->result.cookie,
                                                       .sent = true,
                                                       .ready_mono = c->result.ready_mono,
                                                       .sent_mono = c->sent_at};
                        return 0;
                }
                if (c->sent_at == 0 && c->done) {
                        c->reported = true;
                        *ret = (struct transport_sent){.cookie = c->result.cookie};
                        return 0;
                }
        }
        return TG_ENOTFOUND;
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
                                   .wall_ns = f_wall_ns,
                                   .sleep = f_sleep,
                                   .start = f_start,
                                   .poll = f_poll,
                                   .next_done = f_next_done,
                                   .next_sent = f_next_sent,
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
        log_set_level(getenv("TG_DEBUG") ? LOG_DEBUG : LOG_ERROR);
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

/* The first call: 503 without Retry-After (a 1 s hold); everything else fast. */
static void unavailable_once_bare(struct fake *f, const struct transport_call *call,
                                  struct answer *a)
{
        unavailable_once(f, call, a);
        a->retry_after = NULL;
}

/* The first call: 429 with an absurd Retry-After; everything else fast. */
static void absurd_retry_after_once(struct fake *f, const struct transport_call *call,
                                    struct answer *a)
{
        fast(f, call, a);
        if (f->answered == 0) {
                a->http_status = 429;
                a->status = NULL;
                a->error_code = "rate_limited";
                a->retry_after = "99999999999";
        }
}

/* The first call: 503 with two Retry-After headers, 1 s then 5 s. */
static void two_retry_afters_once(struct fake *f, const struct transport_call *call,
                                  struct answer *a)
{
        unavailable_once(f, call, a);
        if (f->answered == 0)
                a->retry_after = "1\n5";
}

/* 429 without Retry-After to every call started in the first minute, then
 * fast. */
static void limited_for_a_minute(struct fake *f, const struct transport_call *call,
                                 struct answer *a)
{
        fast(f, call, a);
        if (f->mono < 60 * TG_NS_PER_S) {
                a->latency = 20 * MS;
                a->http_status = 429;
                a->status = NULL;
                a->error_code = "rate_limited";
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

/* Connects that vary from call to call, 0.1 to 3 ms (a fresh connection per
 * call to a provider some way off). */
static void varying_connects(struct fake *f, const struct transport_call *call, struct answer *a)
{
        static const int us[] = {120, 2900, 450, 80, 1700, 3000, 95, 600, 2300, 150, 1000, 60};

        fast(f, call, a);
        a->connect = us[f->answered % (sizeof(us) / sizeof(us[0]))] * TG_NS_PER_US;
}

/* Connects longer than the interval (TLS far away): 40..70 ms at 20/s. */
static void slow_connects(struct fake *f, const struct transport_call *call, struct answer *a)
{
        fast(f, call, a);
        a->connect = (40 + (tg_mono_ns)(f->answered * 7 % 31)) * MS;
}

/* Every POST times out; queries say processing, through connects that
 * vary (up to 3 ms). */
static void slow_posts_varying_queries(struct fake *f, const struct transport_call *call,
                                       struct answer *a)
{
        always_slow(f, call, a);
        if (call->request == CLASSIFY_QUERY)
                a->connect = (f->answered % 2 ? 3000 : 100) * TG_NS_PER_US;
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

/* The start is when the request goes on the wire: with connects that vary,
 * the provider still sees starts at least 1/rate apart, and each comes close
 * to its slot (the call is handed over ahead of it by the connect it will
 * take). */
static void test_wire_spacing_with_varying_connects(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        tg_mono_ns interval = 200 * MS + x->cfg.exit.spacing_margin_ns, worst = 0;

        open_dispatcher(x, varying_connects);
        accept_n(x, 40, "wire");
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 40);
        check_spacing(f, 5.0, 10);
        for (unsigned i = 1; i < f->n_starts; i++) {
                tg_mono_ns late = f->starts[i].at - f->starts[i - 1].at - interval;
                if (late > worst)
                        worst = late;
                if (late > 3100 * TG_NS_PER_US)
                        print_message("gap %u late %lld us (handoff %lld at %lld prev at %lld)\n",
                                      i, (long long)(late / 1000), (long long)f->starts[i].handoff,
                                      (long long)f->starts[i].at, (long long)f->starts[i - 1].at);
                /* handed over before its slot: the hook held it */
                assert_true(f->starts[i].handoff < f->starts[i].at);
        }
        /* after the first few calls taught the lead, a start is late by less
         * than the spread of the connects (3 ms), never early */
        assert_true(worst < 3100 * TG_NS_PER_US);
}

/* Connects longer than the interval: the next start waits for the last
 * one's wire time, so spacing at the provider still holds. */
static void test_wire_spacing_with_slow_connects(void **state)
{
        struct fx *x = *state;

        x->cfg.exit.starts_per_second = 20;
        open_dispatcher(x, slow_connects);
        accept_n(x, 20, "slowc");
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 20);
        check_spacing(&x->fake, 20.0, 10);
}

/* The next claim is committed ahead of its slot: right after a start, the
 * store already has the next operation in flight while the transport has
 * one call; at its slot it goes out without a claim in between. A claim
 * given back (the exit stops) leaves its operation as it was: pending, no
 * attempt counted, and its call row closed as never sent. */
static void test_claims_ahead_and_releases(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        struct op_record op;

        open_dispatcher(x, fast);
        accept_n(x, 3, "ahead");
        while (f->n_starts == 0)
                assert_int_equal(dispatcher_turn(x->d), 0);
        assert_int_equal(dispatcher_turn(x->d), 0);
        assert_int_equal(f_open(f), 1);
        assert_int_equal(count_state(x, OP_IN_FLIGHT), 2); /* one sent, one claimed ahead */
        while (f->n_starts < 2)
                assert_int_equal(dispatcher_turn(x->d), 0);
        check_spacing(f, 5.0, 10);
        /* stop: the claim made for the third goes back */
        x->stop = 1;
        int r = 0;
        for (int i = 0; i < 10000 && r == 0; i++)
                r = dispatcher_turn(x->d);
        assert_int_equal(r, 1);
        assert_int_equal(f->n_starts, 2);
        assert_int_equal(store_get(x->fake.env.store, "ahead-002", &op), 0);
        assert_int_equal(op.state, OP_PENDING);
        assert_int_equal(op.attempts, 0);
        assert_int_equal(op.key_first_used, 0);
}

/* A claim made ahead whose operation's deadline passes before its slot is
 * given back, not sent; the sweep then sends it to manual. */
static void test_claim_released_at_deadline(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        struct op_record op;

        x->cfg.exit.starts_per_second = 0.5; /* 2 s between starts */
        x->cfg.policy.deadline_ms = 3000;
        open_dispatcher(x, fast);
        accept_n(x, 3, "late");
        run_until_settled(x, 20 * TG_NS_PER_S);
        /* the first goes at once, the second at +2 s; the third, claimed
         * ahead for +4 s, is past its deadline by then */
        assert_int_equal(f->n_starts, 2);
        assert_int_equal(store_get(x->fake.env.store, "late-002", &op), 0);
        assert_int_equal(op.state, OP_MANUAL);
        assert_int_equal(op.reason, MANUAL_DEADLINE);
        assert_int_equal(op.attempts, 0);
        assert_int_equal(posts_of(f, "late-002"), 0);
}

/* An idle exit costs nothing: with no work it wakes about once a second
 * (housekeeping), not every 50 ms; a retry the store says is due at +7 s is
 * started on time, not at the next idle look. */
static void test_idle_costs_nothing(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        unsigned turns = 0;

        x->cfg.policy.backoff.jitter = BACKOFF_JITTER_NONE;
        open_dispatcher(x, unavailable_once_bare);
        tg_mono_ns t0 = f->mono;
        while (f->mono - t0 < 60 * TG_NS_PER_S) {
                assert_int_equal(dispatcher_turn(x->d), 0);
                turns++;
        }
        /* backing off from 50 ms to 1 s: a few dozen turns, not 1,200 */
        assert_true(turns < 100);

        /* one refund: 503 without Retry-After holds the exit 1 s, and its
         * retry (no jitter) is due 2 s after the answer: the probe finds
         * nothing due, and the exit wakes for the retry on time */
        accept_n(x, 1, "idle");
        t0 = f->mono;
        while (f->n_starts < 2 && f->mono - t0 < 30 * TG_NS_PER_S)
                assert_int_equal(dispatcher_turn(x->d), 0);
        assert_int_equal(f->n_starts, 2);
        tg_mono_ns refused_end = f->starts[0].at + 80 * MS;
        assert_true(f->starts[1].at >= refused_end + 2000 * MS);
        assert_true(f->starts[1].at < refused_end + 2000 * MS + 20 * MS);
}

/* The query sub-quota counts from each query's real start, as the account's
 * rate does: with connects that vary, two queries never go on the wire
 * closer than 1 / query_starts_per_second. */
static void test_query_sub_quota_from_the_wire(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        tg_mono_ns last = INT64_MIN;
        unsigned queries = 0;

        x->cfg.exit.starts_per_second = 10;
        x->cfg.exit_query_starts_per_second = 2;
        x->cfg.policy.query_interval_ms = 200;
        x->cfg.provider_timeout_ms = 1000;
        open_dispatcher(x, slow_posts_varying_queries);
        accept_n(x, 6, "subq");
        run_until_settled(x, 20 * TG_NS_PER_S);
        for (unsigned i = 0; i < f->n_starts; i++) {
                if (f->starts[i].request != CLASSIFY_QUERY)
                        continue;
                if (last != INT64_MIN)
                        assert_true(f->starts[i].at - last >= 500 * MS);
                last = f->starts[i].at;
                queries++;
        }
        assert_true(queries >= 10);
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

/* "Retry-After: 99999999999": the exit holds for the cap, never for longer
 * than a quarter of the deadline (here 200 s: 50 s, under the 120 s
 * retry.retry_after_cap_s), then probes; every refund closes in time.
 * With the old one-hour cap every queued refund went to manual. */
static void test_absurd_retry_after_capped(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;

        x->cfg.policy.deadline_ms = 200 * 1000;
        open_dispatcher(x, absurd_retry_after_once);
        accept_n(x, 6, "absurd");
        run_until_settled(x, 400 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 6);
        assert_int_equal(count_state(x, OP_MANUAL), 0);
        tg_mono_ns refused_end = f->starts[0].at + 80 * MS;
        assert_true(f->starts[1].at >= refused_end + 50 * TG_NS_PER_S);
        assert_true(f->starts[1].at < refused_end + 51 * TG_NS_PER_S);
        check_spacing(f, 5.0, 10);
}

/* Two Retry-After headers, "1" and "5": the longer counts (the safer
 * reading: the provider is not asked again before either says). */
static void test_two_retry_afters_longer_counts(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;

        open_dispatcher(x, two_retry_afters_once);
        accept_n(x, 3, "two");
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 3);
        tg_mono_ns refused_end = f->starts[0].at + 80 * MS;
        assert_true(f->starts[1].at >= refused_end + 5000 * MS);
        assert_true(f->starts[1].at < refused_end + 5100 * MS);
}

/* A minute of 429 without Retry-After. Each probe is a real call (the
 * provider's limiter judges real calls), but one it refuses again holds
 * twice as long as the last (1, 2, 4, 8, 16, 32 s), not a probe a second;
 * and a 429 executes nothing, so it is not counted against the refund's
 * three attempts: every refund succeeds once the provider lets calls
 * through, none in manual, each having made more POSTs than three. */
static void test_sustained_429_backs_off(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        unsigned limited = 0;
        struct op_record op;

        open_dispatcher(x, limited_for_a_minute);
        accept_n(x, 10, "lim");
        run_until_settled(x, 400 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 10);
        assert_int_equal(count_state(x, OP_MANUAL), 0);
        for (unsigned i = 0; i < f->n_starts; i++)
                limited += f->starts[i].at < 60 * TG_NS_PER_S;
        /* the first call and probes after 1+2+4+8+16+32 s: 7, where a
         * probe a second would have made 60 */
        if (limited > 8)
                fail_msg("%u calls while limited", limited);
        for (unsigned i = 2; i < limited; i++) {
                tg_mono_ns gap = f->starts[i].at - f->starts[i - 1].at;
                tg_mono_ns before = f->starts[i - 1].at - f->starts[i - 2].at;
                assert_true(gap >= 2 * before - 100 * MS);
        }
        /* the refused refund went on with more POSTs than three, its
         * limit raised by each 429 */
        assert_int_equal(store_get(x->fake.env.store, "lim-000", &op), 0);
        assert_true(op.attempts > 3);
        assert_int_equal(op.attempt_limit, 3 + op.attempts - 1);
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

/* Accepts one refund whose caller gave a deadline `budget_ms` from now (0:
 * none) and a traceparent (NULL: none). */
static struct op_record accept_one(struct fx *x, const char *id, int64_t budget_ms,
                                   const char *traceparent)
{
        struct refund_request r;
        struct op_record op;
        bool created = false;

        memset(&r, 0, sizeof(r));
        snprintf(r.operation_id, sizeof(r.operation_id), "%s", id);
        snprintf(r.payment_id, sizeof(r.payment_id), "pay-%s", id);
        r.amount = 100;
        memcpy(r.currency, "TWD", 4);
        r.deadline_at = budget_ms > 0 ? f_wall(&x->fake) + budget_ms : 0;
        if (traceparent)
                snprintf(r.traceparent, sizeof(r.traceparent), "%s", traceparent);
        assert_int_equal(
            store_accept(x->fake.env.store, &r, f_wall(&x->fake), &x->cfg.policy, &created, &op),
            0);
        assert_true(created);
        return op;
}

static const struct start_rec *start_of(const struct fake *f, const char *op, unsigned nth)
{
        for (unsigned i = 0; i < f->n_starts; i++)
                if (strcmp(f->starts[i].operation_id, op) == 0 && nth-- == 0)
                        return &f->starts[i];
        return NULL;
}

static unsigned calls_of(const struct fake *f, const char *op)
{
        unsigned n = 0;

        for (unsigned i = 0; i < f->n_starts; i++)
                n += strcmp(f->starts[i].operation_id, op) == 0;
        return n;
}

static void test_caller_deadline_cuts_timeout(void **state)
{
        struct fx *x = *state;
        const struct start_rec *s;
        struct op_record op;

        /* The provider executes every POST but answers after 5 s; queries
         * say succeeded. */
        open_dispatcher(x, slow_then_known);
        struct op_record tight = accept_one(x, "dl-tight", 1200, NULL);
        struct op_record loose = accept_one(x, "dl-loose", 60000, NULL);
        struct op_record none = accept_one(x, "dl-none", 0, NULL);
        assert_int_equal(tight.caller_deadline_at, tight.deadline_at);
        assert_int_equal(none.caller_deadline_at, 0);
        /* a caller's deadline past ours is cut to ours */
        struct op_record far = accept_one(x, "dl-far", 24LL * 3600 * 1000, NULL);
        assert_int_equal(far.deadline_at, far.accepted_at + x->cfg.policy.deadline_ms);
        run_until_settled(x, 60 * TG_NS_PER_S);

        /* each first call: min(timeout_ms, what is left of the deadline) at
         * the moment it was handed to the transport */
        s = start_of(&x->fake, "dl-tight", 0);
        assert_non_null(s);
        assert_int_equal(s->timeout_ms, tight.deadline_at - s->wall);
        assert_true(s->timeout_ms < x->cfg.provider_timeout_ms);
        s = start_of(&x->fake, "dl-loose", 0);
        assert_int_equal(s->timeout_ms, x->cfg.provider_timeout_ms);
        s = start_of(&x->fake, "dl-none", 0);
        assert_int_equal(s->timeout_ms, x->cfg.provider_timeout_ms);

        /* the tight one timed out at its deadline: past it nothing is sent
         * again (no query, no re-send); a person decides */
        assert_int_equal(calls_of(&x->fake, "dl-tight"), 1);
        assert_int_equal(store_get(x->fake.env.store, "dl-tight", &op), 0);
        assert_int_equal(op.state, OP_MANUAL);
        assert_int_equal(op.reason, MANUAL_DEADLINE);
        /* the others were reconciled by a query with their whole timeout */
        assert_int_equal(store_get(x->fake.env.store, "dl-loose", &op), 0);
        assert_int_equal(op.state, OP_SUCCEEDED);
        assert_int_equal(calls_of(&x->fake, "dl-loose"), 2);
        assert_int_equal(store_get(x->fake.env.store, "dl-none", &op), 0);
        assert_int_equal(op.state, OP_SUCCEEDED);
        (void)loose;
}

/* A deadline that leaves less than a call's timeout for a later call: the
 * query gets only what is left. */
static void test_deadline_cuts_a_later_call(void **state)
{
        struct fx *x = *state;
        const struct start_rec *q;

        x->cfg.policy.query_interval_ms = 500;
        open_dispatcher(x, slow_then_known);
        struct op_record op = accept_one(x, "dl-later", 4000, NULL);
        run_until_settled(x, 60 * TG_NS_PER_S);
        /* POST: 3 s timeout (4 s left); the query 500 ms after: < 1 s left */
        assert_int_equal(start_of(&x->fake, "dl-later", 0)->timeout_ms, x->cfg.provider_timeout_ms);
        q = start_of(&x->fake, "dl-later", 1);
        assert_non_null(q);
        assert_int_equal(q->request, CLASSIFY_QUERY);
        assert_int_equal(q->timeout_ms, op.deadline_at - q->wall);
        assert_true(q->timeout_ms < 1000);
}

struct call_seen {
        unsigned n;
        struct call_record c[16];
};

static int see_call(const struct call_record *c, void *userdata)
{
        struct call_seen *s = userdata;

        if (s->n < 16)
                s->c[s->n++] = *c;
        return 0;
}

static void test_trace_context(void **state)
{
        static const char caller[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        struct fx *x = *state;
        struct call_seen seen = {0};

        open_dispatcher(x, slow_then_known);
        accept_one(x, "tr-caller", 0, caller);
        accept_one(x, "tr-none", 0, NULL);
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(store_list_calls(x->fake.env.store, 0, 100, see_call, &seen), 0);
        assert_int_equal(seen.n, 4); /* a POST and a query each */
        for (unsigned i = 0; i < seen.n; i++) {
                const struct call_record *c = &seen.c[i];
                const struct start_rec *s = NULL;
                struct op_record op;

                for (unsigned k = 0; k < x->fake.n_starts; k++)
                        if (strcmp(x->fake.starts[k].request_id, c->request_id) == 0)
                                s = &x->fake.starts[k];
                assert_non_null(s);
                assert_int_equal(store_get(x->fake.env.store, c->operation_id, &op), 0);
                /* the header: the operation's trace, this call's span */
                assert_int_equal(strlen(s->traceparent), TG_TRACEPARENT_MAX);
                assert_memory_equal(s->traceparent, op.traceparent, 36);
                assert_string_equal(s->traceparent + 36 + 17, op.traceparent + 36 + 17);
                assert_memory_equal(s->traceparent + 36, c->span_id, 16);
                /* the call log: the same trace id and span id */
                assert_memory_equal(c->trace_id, op.traceparent + 3, 32);
                assert_int_equal(strlen(c->span_id), 16);
                if (strcmp(c->operation_id, "tr-caller") == 0)
                        assert_memory_equal(c->trace_id, caller + 3, 32); /* the caller's */
        }
        /* each call its own span; without a traceparent tollgate started one,
         * kept for both calls */
        assert_string_not_equal(seen.c[0].span_id, seen.c[2].span_id);
        for (unsigned i = 0; i < seen.n; i++)
                for (unsigned k = i + 1; k < seen.n; k++) {
                        assert_string_not_equal(seen.c[i].span_id, seen.c[k].span_id);
                        if (strcmp(seen.c[i].operation_id, seen.c[k].operation_id) == 0)
                                assert_string_equal(seen.c[i].trace_id, seen.c[k].trace_id);
                        else
                                assert_string_not_equal(seen.c[i].trace_id, seen.c[k].trace_id);
                }
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
            cmocka_unit_test_setup_teardown(test_query_sub_quota_from_the_wire, setup, teardown),
            cmocka_unit_test_setup_teardown(test_wire_spacing_with_varying_connects, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_wire_spacing_with_slow_connects, setup, teardown),
            cmocka_unit_test_setup_teardown(test_claims_ahead_and_releases, setup, teardown),
            cmocka_unit_test_setup_teardown(test_idle_costs_nothing, setup, teardown),
            cmocka_unit_test_setup_teardown(test_claim_released_at_deadline, setup, teardown),
            cmocka_unit_test_setup_teardown(test_timeout_reconciled_with_same_key, setup, teardown),
            cmocka_unit_test_setup_teardown(test_reset_reconciled, setup, teardown),
            cmocka_unit_test_setup_teardown(test_503_holds_the_exit, setup, teardown),
            cmocka_unit_test_setup_teardown(test_absurd_retry_after_capped, setup, teardown),
            cmocka_unit_test_setup_teardown(test_two_retry_afters_longer_counts, setup, teardown),
            cmocka_unit_test_setup_teardown(test_sustained_429_backs_off, setup, teardown),
            cmocka_unit_test_setup_teardown(test_unreachable_holds_and_doubles, setup, teardown),
            cmocka_unit_test_setup_teardown(test_timeouts_hold_the_exit, setup, teardown),
            cmocka_unit_test_setup_teardown(test_takeover_waits_and_reconciles, setup, teardown),
            cmocka_unit_test_setup_teardown(test_stop_drains, setup, teardown),
            cmocka_unit_test_setup_teardown(test_caller_deadline_cuts_timeout, setup, teardown),
            cmocka_unit_test_setup_teardown(test_deadline_cuts_a_later_call, setup, teardown),
            cmocka_unit_test_setup_teardown(test_trace_context, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
