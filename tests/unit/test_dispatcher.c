/*
 * Tests of the real dispatcher (daemon/dispatcher.c), driven turn by turn
 * through the simulated environment tollgate-sim runs it on too
 * (src/sim/sim_env.h, standalone): a virtual clock that only moves when the
 * dispatcher waits, and a transport that plays a scripted provider
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
 *     span of its own, in the header and in the call log;
 *   - two exits in one loop (two accounts, each with its own store, rate
 *     and cap, on one clock and one transport): each keeps its own spacing
 *     and its own in-flight cap, and neither waits for the other's.
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

#include "core/pacer.h"
#include "core/tg_error.h"
#include "daemon/config.h"
#include "daemon/dispatcher.h"
#include "daemon/exit.h"
#include "daemon/exit_env.h"
#include "daemon/log.h"
#include "daemon/ownership.h"
#include "sim/sim_env.h"
#include "store/store.h"
#include "store/store_faults.h"

#define WALL0      1700000000000LL
#define MS         TG_NS_PER_MS
#define MAX_STARTS 4096

/* ---- the fake environment ------------------------------------------------------- */

/* The shared simulated environment (src/sim/sim_env.h), standalone: a
 * virtual clock that moves only when the dispatcher waits, and a transport
 * that plays the scripted provider below. */
struct fake;
typedef void (*provider_fn)(struct fake *f, const struct transport_call *call,
                            struct sim_answer *ret);

struct fake {
        struct sim_clock clock;
        struct sim_env *sim;
        const struct exit_env *env;
        struct store *store;
        struct sim_start starts[MAX_STARTS];
        provider_fn provider;
        /* optional: a call's result reached the dispatcher */
        void (*delivered)(struct fake *f, const struct transport_call *call);
};

static void f_handoff(void *ctx, struct sim_env *env, const struct transport_call *call,
                      struct sim_answer *ret)
{
        struct fake *f = ctx;

        (void)env;
        assert_true(sim_env_starts(f->sim) < MAX_STARTS);
        f->provider(f, call, ret);
}

static void f_delivered(void *ctx, struct sim_env *env, const struct transport_call *call,
                        const struct transport_result *result)
{
        struct fake *f = ctx;

        (void)env;
        (void)result;
        if (f->delivered)
                f->delivered(f, call);
}

/* calls the provider has answered, for scripts */
static unsigned answered(const struct fake *f)
{
        return sim_env_answered(f->sim);
}

static unsigned n_starts(const struct fake *f)
{
        return sim_env_starts(f->sim);
}

static tg_wall_ms f_wall(const struct fake *f)
{
        return sim_clock_wall(&f->clock);
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
        /* the store's writes fail from fail_from until fail_until (virtual) */
        tg_mono_ns fail_from, fail_until;
        /* slow claims: each takes claim_ns; once armed, the next takes 2 s
         * and the owner lock is lost meanwhile (at lock_lost_at) */
        struct store *peek; /* a second connection, to see what a transaction did */
        uint64_t calls_seen;
        tg_mono_ns claim_ns;
        bool armed;
        tg_mono_ns lock_lost_at;
        bool doorbell; /* serve: the API rings for new work */
};

static void fake_init(struct fx *x, struct fake *f, provider_fn provider)
{
        struct sim_env_provider p = {.handoff = f_handoff, .delivered = f_delivered, .ctx = f};

        memset(f, 0, sizeof(*f));
        f->clock = (struct sim_clock){.mono = 1000 * MS, .wall0 = WALL0};
        f->provider = provider;
        assert_int_equal(store_open(x->url, &f->store), 0);
        assert_int_equal(sim_env_new(&f->clock, &p, f->store, 7, x->doorbell, &f->sim), 0);
        sim_env_record(f->sim, f->starts, MAX_STARTS);
        f->env = sim_env_exit(f->sim);
}

/* A store whose writes fail in the fixture's window (fail_from, fail_until). */
static enum store_fault failing_writes(void *ctx, bool write)
{
        struct fx *x = ctx;
        tg_mono_ns now = x->fake.clock.mono;

        return write && now >= x->fail_from && now < x->fail_until ? STORE_FAULT_IO
                                                                   : STORE_FAULT_NONE;
}

static void fail_writes_in_window(struct fx *x)
{
        struct store_fault_hooks h = {.before = failing_writes, .ctx = x};

        assert_int_equal(store_faults_wrap(x->fake.store, &h), 0);
}

/* After each write: a claim (a new call row) takes claim_ns, or, once
 * armed, 2 s during which the owner lock is lost. */
static void slow_claims(void *ctx, bool write, bool committed, int result)
{
        struct fx *x = ctx;
        struct store_stats st;

        if (!write || !committed || result < 0 || store_stats(x->peek, &st) < 0 ||
            st.calls_total == x->calls_seen)
                return;
        x->calls_seen = st.calls_total;
        if (!x->armed) {
                x->fake.clock.mono += x->claim_ns;
                return;
        }
        x->armed = false;
        x->fake.clock.mono += 1000 * MS;
        x->lock_lost_at = x->fake.clock.mono;
        store_faults_drop_locks(x->fake.store);
        x->fake.clock.mono += 1000 * MS;
}

/* The process is gone: its dispatcher (if any) first, then its env and store. */
static void fake_release(struct fake *f)
{
        sim_env_free(f->sim);
        store_close(f->store);
        f->sim = NULL;
        f->store = NULL;
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
        fake_release(&x->fake);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", x->dir);
        if (system(cmd) != 0)
                return -1;
        free(x);
        return 0;
}

/* n refunds "<prefix>-000", ... into `store`, accepted at `now`. */
static void accept_into(struct store *store, const struct tg_config *cfg, tg_wall_ms now,
                        unsigned n, const char *prefix)
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
                assert_int_equal(store_accept(store, &r, now, &cfg->policy, &created, &op), 0);
                assert_true(created);
        }
}

static void accept_n(struct fx *x, unsigned n, const char *prefix)
{
        accept_into(x->fake.store, &x->cfg, f_wall(&x->fake), n, prefix);
}

static void open_dispatcher(struct fx *x, provider_fn provider)
{
        fake_init(x, &x->fake, provider);
        assert_int_equal(dispatcher_new(&x->cfg, &x->opt, x->fake.env, &x->d), 0);
        assert_int_equal(dispatcher_open(x->d), 0);
}

/* Turns until every operation is final or in manual, or virtual time runs
 * out; returns the virtual time it took. */
static tg_mono_ns run_until_settled(struct fx *x, tg_mono_ns budget)
{
        tg_mono_ns t0 = x->fake.clock.mono;

        while (x->fake.clock.mono - t0 < budget) {
                struct store_stats st;

                assert_int_equal(dispatcher_turn(x->d), 0);
                assert_int_equal(store_stats(x->fake.store, &st), 0);
                if (st.by_state[OP_PENDING] + st.by_state[OP_IN_FLIGHT] +
                        st.by_state[OP_RETRY_WAIT] + st.by_state[OP_UNKNOWN] ==
                    0)
                        break;
        }
        return x->fake.clock.mono - t0;
}

static unsigned count_state(struct fx *x, enum op_state state)
{
        struct store_stats st;

        assert_int_equal(store_stats(x->fake.store, &st), 0);
        return (unsigned)st.by_state[state];
}

/* Every start at least 1/rate after the one before, in whole milliseconds as a
 * provider would judge it; and never more open than the cap. */
static void check_spacing(const struct fake *f, double rate, unsigned cap)
{
        tg_mono_ns interval = (tg_mono_ns)(1e9 / rate + 0.5);

        for (unsigned i = 0; i < n_starts(f); i++) {
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

        for (unsigned i = 0; i < n_starts(f); i++)
                n += f->starts[i].request == CLASSIFY_POST &&
                     strcmp(f->starts[i].operation_id, op) == 0;
        return n;
}

/* ---- providers ------------------------------------------------------------------- */

static void fast(struct fake *f, const struct transport_call *call, struct sim_answer *a)
{
        (void)f;
        a->latency = 80 * MS;
        a->http_status = call->request == CLASSIFY_POST ? 201 : 200;
        a->status = "succeeded";
}

/* The refund executes but its answer comes after the timeout; queries say
 * it succeeded. */
static void slow_then_known(struct fake *f, const struct transport_call *call, struct sim_answer *a)
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
static void drop_then_known(struct fake *f, const struct transport_call *call, struct sim_answer *a)
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
static void unavailable_once(struct fake *f, const struct transport_call *call,
                             struct sim_answer *a)
{
        fast(f, call, a);
        if (answered(f) == 0) {
                a->http_status = 503;
                a->status = NULL;
                a->error_code = "temporarily_unavailable";
                a->retry_after = "2";
        }
}

/* The first call: 503 with Retry-After 2 s; the next two (the probes)
 * connect in 5 ms, longer than the lead the fast calls taught, the first
 * of them (with shares) until just past its window's end; everything else
 * fast. */
static void unavailable_then_slow_probe(struct fake *f, const struct transport_call *call,
                                        struct sim_answer *a)
{
        unavailable_once(f, call, a);
        if (answered(f) == 1 || answered(f) == 2)
                a->connect = 5 * MS;
        if (answered(f) == 1 && call->not_after > 0 &&
            call->not_after + MS - f->clock.mono > a->connect)
                a->connect = call->not_after + MS - f->clock.mono;
}

/* The first call: 503 without Retry-After (a 1 s hold); everything else fast. */
static void unavailable_once_bare(struct fake *f, const struct transport_call *call,
                                  struct sim_answer *a)
{
        unavailable_once(f, call, a);
        a->retry_after = NULL;
}

/* The first call: 429 with an absurd Retry-After; everything else fast. */
static void absurd_retry_after_once(struct fake *f, const struct transport_call *call,
                                    struct sim_answer *a)
{
        fast(f, call, a);
        if (answered(f) == 0) {
                a->http_status = 429;
                a->status = NULL;
                a->error_code = "rate_limited";
                a->retry_after = "99999999999";
        }
}

/* The first call: 503 with two Retry-After headers, 1 s then 5 s. */
static void two_retry_afters_once(struct fake *f, const struct transport_call *call,
                                  struct sim_answer *a)
{
        unavailable_once(f, call, a);
        if (answered(f) == 0)
                a->retry_after = "1\n5";
}

/* 429 without Retry-After to every call started in the first minute, then
 * fast. */
static void limited_for_a_minute(struct fake *f, const struct transport_call *call,
                                 struct sim_answer *a)
{
        fast(f, call, a);
        if (f->clock.mono < 60 * TG_NS_PER_S) {
                a->latency = 20 * MS;
                a->http_status = 429;
                a->status = NULL;
                a->error_code = "rate_limited";
        }
}

/* Every POST times out (nothing known), queries say processing. */
static void always_slow(struct fake *f, const struct transport_call *call, struct sim_answer *a)
{
        (void)f;
        a->latency = call->request == CLASSIFY_POST ? 10000 * MS : 30 * MS;
        a->http_status = 200;
        a->status = "processing";
}

/* Connects that vary from call to call, 0.1 to 3 ms (a fresh connection per
 * call to a provider some way off). */
static void varying_connects(struct fake *f, const struct transport_call *call,
                             struct sim_answer *a)
{
        static const int us[] = {120, 2900, 450, 80, 1700, 3000, 95, 600, 2300, 150, 1000, 60};

        fast(f, call, a);
        a->connect = us[answered(f) % (sizeof(us) / sizeof(us[0]))] * TG_NS_PER_US;
}

/* Connects longer than the interval (TLS far away): 40..70 ms at 20/s. */
static void slow_connects(struct fake *f, const struct transport_call *call, struct sim_answer *a)
{
        fast(f, call, a);
        a->connect = (40 + (tg_mono_ns)(answered(f) * 7 % 31)) * MS;
}

/* Connects mostly fast, and now and then one slower than any before it
 * (2, 4, 6, ... ms): the lead learned from the last ones is too short for
 * it. */
static void jumping_connects(struct fake *f, const struct transport_call *call,
                             struct sim_answer *a)
{
        unsigned n = answered(f);

        fast(f, call, a);
        a->connect = n % 7 == 6 ? (tg_mono_ns)(2 + 2 * (n / 7 % 5)) * MS : 300 * TG_NS_PER_US;
}

/* Every POST times out; queries say processing, through connects that
 * vary (up to 3 ms). */
static void slow_posts_varying_queries(struct fake *f, const struct transport_call *call,
                                       struct sim_answer *a)
{
        always_slow(f, call, a);
        if (call->request == CLASSIFY_QUERY)
                a->connect = (answered(f) % 2 ? 3000 : 100) * TG_NS_PER_US;
}

/* Nothing reaches the provider for the first 20 s (a certificate that does
 * not verify, say: every call fails before its request leaves), then it is
 * fixed and answers fast. */
static void unreachable_then_fixed(struct fake *f, const struct transport_call *call,
                                   struct sim_answer *a)
{
        fast(f, call, a);
        if (f->clock.mono < 20 * TG_NS_PER_S) {
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
        assert_int_equal(n_starts(&x->fake), 30);
        check_spacing(&x->fake, 5.0, 10);
        for (unsigned i = 0; i < n_starts(&x->fake); i++)
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
        for (unsigned i = 1; i < n_starts(f); i++) {
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

/* Every third request leaves 5 ms after the hook let it go (the process
 * preempted while libcurl writes it: longer than the 1 ms margin), the
 * others 20 us after. */
static void slow_sends(struct fake *f, const struct transport_call *call, struct sim_answer *a)
{
        fast(f, call, a);
        a->send_delay = answered(f) % 3 == 2 ? 5 * MS : 20 * TG_NS_PER_US;
}

/* The next slot counts from when the last request had surely left, when
 * that came later than the margin covers: a request written late (its
 * process preempted between the hook and the write) does not shorten the
 * gap the provider sees to the next one. Judged as the provider would: from
 * the moment the last had surely left to the moment the next one was let
 * out, at least 1/rate. */
static void test_spacing_counts_from_the_send(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;

        x->cfg.exit.starts_per_second = 20;
        x->cfg.exit.spacing_margin_ns = 1 * MS;
        open_dispatcher(x, slow_sends);
        accept_n(x, 30, "send");
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 30);
        for (unsigned i = 1; i < n_starts(f); i++) {
                const struct sim_start *a = &f->starts[i - 1], *b = &f->starts[i];
                assert_true(a->sent && b->sent);
                assert_true(a->sent_end >= a->at);
                if (b->at - a->sent_end < 50 * MS)
                        fail_msg("start %u let out %lld us after start %u had surely left", i,
                                 (long long)((b->at - a->sent_end) / 1000), i - 1);
        }
        /* a prompt write costs nothing: those gaps stay 1/rate + margin */
        assert_true(f->starts[1].at - f->starts[0].at < 51 * MS + 100 * TG_NS_PER_US);
}

/* Connects as jumping_connects, and every other call handed over less
 * than 2 ms before its window's end (the last point of a share's window)
 * connects for 4 ms: longer than any lead and late budget. */
static void slow_at_window_end(struct fake *f, const struct transport_call *call,
                               struct sim_answer *a)
{
        static unsigned near_end;

        jumping_connects(f, call, a);
        if (call->not_after > 0 && call->not_after - f->clock.mono < 2 * MS && near_end++ % 2 == 0)
                a->connect = 4 * MS;
}

/* Shares: a share's request goes on the wire inside its window of the
 * account's grid (from its opening to its last point's late budget) or not
 * at all, also when its connect outlasts the lead: the request is refused in
 * the pre-request hook, its claim goes back with no attempt spent, and the
 * refund goes in a later window. The other share's windows lie a spacing
 * and the skew away (test_pacer proves the plan), so this is what keeps two
 * shares' starts 1/rate apart at the provider. */
static void test_shares_send_only_in_their_windows(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        struct op_record op;
        struct pacer_grid_plan g;
        unsigned sent = 0, refused = 0, share = 2;

        /* 50/s, no margin, no skew, 10 in flight: 5 points of 20 ms a
         * window, the last up to 2 ms late */
        x->cfg.exit.starts_per_second = 50;
        x->cfg.exit.spacing_margin_ns = 0;
        x->cfg.exit_clock_skew_ms = 0;
        x->cfg.exit_shares = 2;
        assert_int_equal(pacer_grid_plan(20 * MS, 0, 5, &g), 0);
        assert_int_equal(g.points, 5);
        open_dispatcher(x, slow_at_window_end);
        accept_n(x, 40, "win");
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 40);
        for (unsigned i = 0; i < n_starts(f); i++) {
                const struct sim_start *st = &f->starts[i];
                if (!st->sent) {
                        refused++;
                        continue;
                }
                sent++;
                /* on the wall clock the windows are laid on (share k opens
                 * at k * window, every 2 windows) */
                int64_t wall = sim_clock_wall_ns(&f->clock) - f->clock.mono + st->at;
                int64_t off = wall % (2 * g.window);
                unsigned k = off >= g.window;
                if (share == 2)
                        share = k; /* the share this dispatcher holds */
                off -= (int64_t)k * g.window;
                if (k != share || off > g.open)
                        fail_msg("start %u on the wire %lld us into window %u of share %u", i,
                                 (long long)(off / 1000), k, share);
        }
        /* every refund once on the wire; the slow connects at a window's
         * end were refused */
        assert_int_equal(sent, 40);
        assert_true(refused >= 2);
        for (unsigned i = 0; i < 40; i++) {
                char id[32];
                snprintf(id, sizeof(id), "win-%03u", i);
                assert_int_equal(store_get(x->fake.store, id, &op), 0);
                assert_int_equal(op.attempts, 1);
        }
}

/* Shares, a rate changed at run time (issue 26 §5): the share learns of
 * it with its next owner check, starts nothing on the old grid from then
 * on and nothing before the switch's instant (changed_at + lead + the new
 * spacing + skew), then only inside its windows of the new rate's grid, at
 * the new spacing. */
static void test_shares_follow_a_rate_change(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        struct pacer_grid_plan g;
        struct account_controls c = {.starts_per_second = 10.0};
        unsigned share = 2, after = 0;

        x->cfg.exit.starts_per_second = 50;
        x->cfg.exit.spacing_margin_ns = 0;
        x->cfg.exit_clock_skew_ms = 0;
        x->cfg.exit_shares = 2;
        open_dispatcher(x, fast);
        accept_n(x, 120, "sw");
        while (n_starts(f) < 10)
                assert_int_equal(dispatcher_turn(x->d), 0);
        tg_wall_ms changed = f_wall(f);
        unsigned before = n_starts(f);
        assert_int_equal(store_controls_set(f->store, "default", &c, "account_set", "test",
                                            "slower", changed, NULL),
                         0);
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 120);
        /* 10/s: 100 ms apart, 2 points a window (2 ms late, no skew) */
        assert_int_equal(pacer_grid_plan(100 * MS, 0, 5, &g), 0);
        int64_t resume = changed * MS + exit_switch_lead(&x->cfg) + g.spacing;
        int64_t learnt = (changed + 1000) * MS; /* the next owner check */
        int64_t last = INT64_MIN;
        for (unsigned i = before; i < n_starts(f); i++) {
                const struct sim_start *st = &f->starts[i];
                int64_t wall = sim_clock_wall_ns(&f->clock) - f->clock.mono + st->at;

                if (!st->sent)
                        continue;
                if (wall < resume) {
                        if (wall >= learnt)
                                fail_msg("start %u %lld ms after the change, before the "
                                         "switch",
                                         i, (long long)((wall - changed * MS) / MS));
                        continue;
                }
                after++;
                if (last != INT64_MIN && wall - last < g.spacing)
                        fail_msg("starts %lld us apart after the switch",
                                 (long long)((wall - last) / 1000));
                last = wall;
                int64_t off = wall % (2 * g.window);
                unsigned k = off >= g.window;
                if (share == 2)
                        share = k;
                off -= (int64_t)k * g.window;
                if (k != share || off > g.open)
                        fail_msg("start %u %lld us into window %u of the new grid (share %u)", i,
                                 (long long)(off / 1000), k, share);
        }
        assert_true(after > 20);
}

/* Reads fail in the fixture's window (the owner check counts that as
 * "cannot tell", not a lost lock): the account's controls are not read. */
static enum store_fault failing_reads(void *ctx, bool write)
{
        struct fx *x = ctx;
        tg_mono_ns now = x->fake.clock.mono;

        return !write && now >= x->fail_from && now < x->fail_until ? STORE_FAULT_IO
                                                                    : STORE_FAULT_NONE;
}

static void run_to(struct fx *x, tg_mono_ns until)
{
        while (x->fake.clock.mono < until)
                assert_int_equal(dispatcher_turn(x->d), 0);
}

/* Shares: a share that could not read the controls for a while starts
 * nothing (a rate change may be passing it by), and when it reads them
 * again a newer row is a switch even with its own rate back in it: here
 * the others ran 10/s meanwhile, so it waits for that row's instant. */
static void test_share_that_missed_controls_waits(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        struct store_fault_hooks h = {.before = failing_reads, .ctx = x};
        struct account_controls slow = {.starts_per_second = 10.0}, back = {0};

        x->cfg.exit.starts_per_second = 50;
        x->cfg.exit.spacing_margin_ns = 0;
        x->cfg.exit_clock_skew_ms = 0;
        x->cfg.exit_shares = 2;
        open_dispatcher(x, fast);
        assert_int_equal(store_faults_wrap(f->store, &h), 0);
        accept_n(x, 400, "miss");
        while (n_starts(f) < 10)
                assert_int_equal(dispatcher_turn(x->d), 0);
        tg_mono_ns t0 = f->clock.mono;
        x->fail_from = t0;
        x->fail_until = t0 + 4 * TG_NS_PER_S;
        run_to(x, t0 + 500 * MS);
        assert_int_equal(store_controls_set(f->store, "default", &slow, "account_set", "t", "r",
                                            f_wall(f), NULL),
                         0);
        run_to(x, t0 + 2 * TG_NS_PER_S);
        tg_wall_ms c2 = f_wall(f);
        assert_int_equal(
            store_controls_set(f->store, "default", &back, "account_set", "t", "r", c2, NULL), 0);
        unsigned mark = n_starts(f);
        run_to(x, t0 + 10 * TG_NS_PER_S);
        /* the last read before the window is at most a second old at t0:
         * nothing from 1.5 s after it until c2's instant (50/s: 20 ms) */
        int64_t quiet_from = sim_clock_wall_ns(&f->clock) - f->clock.mono + t0 + 1500 * MS;
        int64_t resume = c2 * MS + exit_switch_lead(&x->cfg) + 20 * MS;
        unsigned after = 0;
        for (unsigned i = 0; i < n_starts(f); i++) {
                const struct sim_start *st = &f->starts[i];
                int64_t wall = sim_clock_wall_ns(&f->clock) - f->clock.mono + st->at;

                if (!st->sent)
                        continue;
                if (wall >= quiet_from && wall < resume)
                        fail_msg("start %u %lld ms before the switch of a share that missed "
                                 "the controls",
                                 i, (long long)((resume - wall) / MS));
                after += wall >= resume;
        }
        assert_true(n_starts(f) > mark);
        assert_true(after > 20);
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
        while (n_starts(f) == 0)
                assert_int_equal(dispatcher_turn(x->d), 0);
        assert_int_equal(dispatcher_turn(x->d), 0);
        assert_int_equal(sim_env_open(f->sim), 1);
        assert_int_equal(count_state(x, OP_IN_FLIGHT), 2); /* one sent, one claimed ahead */
        while (n_starts(f) < 2)
                assert_int_equal(dispatcher_turn(x->d), 0);
        check_spacing(f, 5.0, 10);
        /* stop: the claim made for the third goes back */
        x->stop = 1;
        int r = 0;
        for (int i = 0; i < 10000 && r == 0; i++)
                r = dispatcher_turn(x->d);
        assert_int_equal(r, 1);
        assert_int_equal(n_starts(f), 2);
        assert_int_equal(store_get(x->fake.store, "ahead-002", &op), 0);
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
        assert_int_equal(n_starts(f), 2);
        assert_int_equal(store_get(x->fake.store, "late-002", &op), 0);
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
        tg_mono_ns t0 = f->clock.mono;
        while (f->clock.mono - t0 < 60 * TG_NS_PER_S) {
                assert_int_equal(dispatcher_turn(x->d), 0);
                turns++;
        }
        /* backing off from 50 ms to 1 s: a few dozen turns, not 1,200 */
        assert_true(turns < 100);

        /* one refund: 503 without Retry-After holds the exit 1 s, and its
         * retry (no jitter) is due 2 s after the answer: the probe finds
         * nothing due, and the exit wakes for the retry on time */
        accept_n(x, 1, "idle");
        t0 = f->clock.mono;
        while (n_starts(f) < 2 && f->clock.mono - t0 < 30 * TG_NS_PER_S)
                assert_int_equal(dispatcher_turn(x->d), 0);
        assert_int_equal(n_starts(f), 2);
        tg_mono_ns refused_end = f->starts[0].at + 80 * MS;
        assert_true(f->starts[1].at >= refused_end + 2000 * MS);
        assert_true(f->starts[1].at < refused_end + 2000 * MS + 20 * MS);
}

/* An outcome that makes the operation due again wakes an idle exit for it:
 * with a doorbell the idle wait is long (nothing else to do while the POST
 * was out), yet the reconciliation query goes query_interval after the
 * timeout, not when the idle wait would have ended. */
static void test_due_after_an_outcome_is_on_time(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;

        x->cfg.exit_idle_poll_max_ms = 5000;
        x->cfg.policy.query_interval_ms = 200;
        x->doorbell = true; /* serve: the API rings for new work */
        open_dispatcher(x, slow_then_known);
        /* one refund at a time, each at another phase of the loop's
         * housekeeping second (which also ends an idle wait) */
        for (unsigned i = 0; i < 6; i++) {
                char id[32];
                unsigned n = n_starts(f);

                snprintf(id, sizeof(id), "due-%u", i);
                accept_n(x, 1, id);
                run_until_settled(x, 30 * TG_NS_PER_S);
                assert_int_equal(n_starts(f), n + 2);
                assert_int_equal(f->starts[n + 1].request, CLASSIFY_QUERY);
                tg_mono_ns timed_out = f->starts[n].at + x->cfg.provider_timeout_ms * MS;
                assert_true(f->starts[n + 1].at >= timed_out + 200 * MS);
                if (f->starts[n + 1].at >= timed_out + 200 * MS + 50 * MS)
                        fail_msg("refund %u: its query came %lld ms after it was due", i,
                                 (long long)((f->starts[n + 1].at - timed_out) / MS - 200));
                f->clock.mono += 170 * MS;
        }
        assert_int_equal(count_state(x, OP_SUCCEEDED), 6);
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
        for (unsigned i = 0; i < n_starts(f); i++) {
                if (f->starts[i].request != CLASSIFY_QUERY)
                        continue;
                if (last != INT64_MIN)
                        assert_true(f->starts[i].at - last >= 500 * MS);
                last = f->starts[i].at;
                queries++;
        }
        assert_true(queries >= 10);
}

/* ---- sub-quotas ---- */

/* Refunds "u-*" time out (executed, answer lost: a query reconciles them);
 * every other POST is fast. Queries say succeeded. The calls of each kind
 * open at once are counted at the transport's door (start to delivery). */
static unsigned sq_open[2], sq_max[2];

static void sq_delivered(struct fake *f, const struct transport_call *call)
{
        (void)f;
        sq_open[call->request == CLASSIFY_QUERY]--;
}

static void unknown_u_fast_rest(struct fake *f, const struct transport_call *call,
                                struct sim_answer *a)
{
        unsigned k = call->request == CLASSIFY_QUERY;

        fast(f, call, a);
        if (++sq_open[k] > sq_max[k])
                sq_max[k] = sq_open[k];
        if (call->request == CLASSIFY_POST && strncmp(call->operation_id, "u-", 2) == 0) {
                a->latency = 5000 * MS;
                a->http_status = 0;
                a->status = NULL;
        }
}

/* Starts of one kind (query or POST) at least `gap` apart; their count. */
static unsigned check_kind_spacing(const struct fake *f, enum classify_request kind, tg_mono_ns gap)
{
        tg_mono_ns last = INT64_MIN;
        unsigned n = 0;

        for (unsigned i = 0; i < n_starts(f); i++) {
                if (f->starts[i].request != kind)
                        continue;
                if (last != INT64_MIN && f->starts[i].at - last < gap)
                        fail_msg("%s %u: %lld ns after the one before (< %lld)",
                                 kind == CLASSIFY_QUERY ? "query" : "POST", n,
                                 (long long)(f->starts[i].at - last), (long long)gap);
                last = f->starts[i].at;
                n++;
        }
        return n;
}

static void sq_open_dispatcher(struct fx *x)
{
        memset(sq_open, 0, sizeof(sq_open));
        memset(sq_max, 0, sizeof(sq_max));
        open_dispatcher(x, unknown_u_fast_rest);
        x->fake.delivered = sq_delivered;
}

/* Nested, not partitioned: the sub-quotas add up to more than the account
 * (8 + 6 > 10 a second, 3 + 3 > 4 open), yet every call passes the
 * account's spacing and cap, each kind its own spacing and cap, and each
 * kind reaches its own rate while the other has no work. */
static void test_sub_quotas_never_exceed_the_account(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;

        x->cfg.exit.starts_per_second = 10;
        x->cfg.exit.max_in_flight = 4;
        x->cfg.exit_refund_starts_per_second = 8;
        x->cfg.exit_refund_max_in_flight = 3;
        x->cfg.exit_query_starts_per_second = 6;
        x->cfg.exit_query_max_in_flight = 3;
        x->cfg.policy.query_interval_ms = 200;
        x->cfg.provider_timeout_ms = 1000;
        sq_open_dispatcher(x);
        accept_n(x, 30, "f");
        accept_n(x, 30, "u");
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 60);
        check_spacing(f, 10, 4);
        assert_int_equal(check_kind_spacing(f, CLASSIFY_POST, 125 * MS), 60);
        assert_true(check_kind_spacing(f, CLASSIFY_QUERY, (tg_mono_ns)(1e9 / 6 + 0.5)) >= 30);
        assert_true(sq_max[0] <= 3 && sq_max[1] <= 3);
        assert_true(sq_max[0] == 3); /* the refunds' cap was reached, and held */
        /* the first ten POSTs, nothing else to do: the refund sub-quota's
         * rate, 8/s (spaced by its 125 ms and 1 ms margin, a little over) */
        tg_mono_ns ten = f->starts[9].at - f->starts[0].at;
        if (!(ten >= 9 * 125 * MS && ten < 9 * 130 * MS)) {
                fail_msg("ten POSTs in %lld us", (long long)(ten / 1000));
        }
}

/* One kind held by its own sub-quota never starves the other: with POSTs
 * at 1/s and many unknowns to reconcile, each query goes when it is due at
 * the account's pace (between POSTs waiting on the ready queue), not behind
 * them; and the POSTs keep their rate while the queries run. */
static void test_held_kind_does_not_starve_the_other(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        unsigned posts = 0, queries = 0;

        x->cfg.exit.starts_per_second = 10;
        x->cfg.exit_refund_starts_per_second = 1;
        /* each query falls due 50 ms before a POST's slot: that POST is
         * claimed by then, waiting on the ready queue for its sub-quota */
        x->cfg.policy.query_interval_ms = 950;
        x->cfg.provider_timeout_ms = 1000;
        sq_open_dispatcher(x);
        accept_n(x, 5, "u");
        accept_n(x, 20, "f");
        run_until_settled(x, 120 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 25);
        check_spacing(f, 10, 10);
        posts = check_kind_spacing(f, CLASSIFY_POST, 1000 * MS);
        assert_int_equal(posts, 25);
        for (unsigned i = 0; i < n_starts(f); i++) {
                if (f->starts[i].request != CLASSIFY_QUERY)
                        continue;
                /* due query_interval after its POST timed out */
                tg_mono_ns due = INT64_MIN;
                for (unsigned k = 0; k < i; k++)
                        if (f->starts[k].request == CLASSIFY_POST &&
                            strcmp(f->starts[k].operation_id, f->starts[i].operation_id) == 0)
                                due = f->starts[k].at + (1000 + 950) * MS;
                assert_true(due != INT64_MIN);
                if (f->starts[i].at > due + 60 * MS)
                        fail_msg("query of %s: %lld ms after it was due", f->starts[i].operation_id,
                                 (long long)((f->starts[i].at - due) / MS));
                queries++;
        }
        assert_int_equal(queries, 5);
        /* the POSTs kept their 1/s while the queries ran: 25 in 24-26 s */
        tg_mono_ns span = f->starts[n_starts(f) - 1].at - f->starts[0].at;
        assert_true(span >= 24 * TG_NS_PER_S && span < 26 * TG_NS_PER_S);
}

/* With shares, a sub-quota splits like the account's: one share of two
 * starts its POSTs at half the refund sub-quota's rate, with half its cap. */
static void test_sub_quota_split_by_shares(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;

        x->cfg.exit.starts_per_second = 10;
        x->cfg.exit_shares = 2;
        x->cfg.exit_refund_starts_per_second = 4;
        x->cfg.exit_refund_max_in_flight = 2;
        sq_open_dispatcher(x);
        accept_n(x, 8, "f");
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 8);
        assert_int_equal(check_kind_spacing(f, CLASSIFY_POST, 500 * MS), 8);
        assert_int_equal(sq_max[0], 1);
        /* and not much slower than its part (3.5 s for 8): a slot of the
         * sub-quota that falls in the other share's window of the grid
         * waits for this share's next (measured: 4.3 s) */
        tg_mono_ns span = f->starts[7].at - f->starts[0].at;
        if (span >= 5000 * MS)
                fail_msg("8 POSTs in %lld ms", (long long)(span / MS));
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
                for (unsigned k = 0; k < n_starts(&x->fake); k++)
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
        assert_true(n_starts(f) >= 7); /* the refused one is sent again */
        /* The 503 came back 80 ms after the first start: no start for 2 s
         * after it, then the probe alone, then the configured rate. */
        tg_mono_ns refused_end = f->starts[0].at + 80 * MS;
        assert_true(f->starts[1].at >= refused_end + 2000 * MS);
        /* the probe had the exit to itself until it answered */
        assert_true(f->starts[2].at >= f->starts[1].at + 80 * MS);
        check_spacing(f, 5.0, 10);
}

/* Shares: the probe after a hold whose connect comes after its window sends
 * nothing; the exit is still held and probes again at a later point (once
 * a late probe left the exit waiting for an answer that never came). */
static void test_share_probe_late_for_its_window(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        unsigned sent = 0;

        x->cfg.exit_shares = 2;
        open_dispatcher(x, unavailable_then_slow_probe);
        accept_n(x, 6, "lprobe");
        run_until_settled(x, 60 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 6);
        assert_false(f->starts[1].sent); /* the probe, late */
        /* the next probe, handed over earlier by the connect the late one
         * taught, goes on the wire */
        assert_true(f->starts[2].sent);
        assert_true(f->starts[2].handoff <= f->starts[2].at - 5 * MS);
        /* nothing on the wire until the hold is over, then one probe alone */
        for (unsigned i = 1; i < n_starts(f); i++) {
                if (!f->starts[i].sent)
                        continue;
                if (sent++ == 0) {
                        assert_true(f->starts[i].at >= f->starts[0].at + 80 * MS + 2000 * MS);
                        assert_true(i + 1 < n_starts(f));
                        assert_true(f->starts[i + 1].at >= f->starts[i].at + 80 * MS);
                }
        }
        assert_int_equal(sent, 6);
}

/* Shares: after a hold every claim made ahead went back, so the probe is
 * claimed at its point; a claim that takes longer than the window (5 ms
 * here, a slow MariaDB) waits for the next point instead of going out late
 * and being refused at every point, for ever. */
static void test_share_slow_claim_waits_for_the_next_point(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        struct store_fault_hooks h = {.after = slow_claims, .ctx = x};
        unsigned refused = 0;

        x->cfg.exit_shares = 2;
        x->claim_ns = 5 * MS;
        open_dispatcher(x, unavailable_once);
        assert_int_equal(store_open(x->url, &x->peek), 0);
        assert_int_equal(store_faults_wrap(x->fake.store, &h), 0);
        accept_n(x, 6, "sclaim");
        run_until_settled(x, 60 * TG_NS_PER_S);
        store_close(x->peek);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 6);
        for (unsigned i = 0; i < n_starts(f); i++)
                refused += !f->starts[i].sent;
        assert_int_equal(refused, 0);
        assert_true(f->starts[1].at >= f->starts[0].at + 80 * MS + 2000 * MS);
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
        for (unsigned i = 0; i < n_starts(f); i++)
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
        assert_int_equal(store_get(x->fake.store, "lim-000", &op), 0);
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
        for (unsigned i = 1; i < n_starts(f); i++)
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
        for (unsigned i = 0; i < n_starts(f); i++)
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
        assert_int_equal(dispatcher_new(&x->cfg, &x->opt, old.env, &a), 0);
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
                    store_accept(old.store, &r, f_wall(&old), &x->cfg.policy, &created, &op), 0);
        }
        while (n_starts(&old) == 0)
                assert_int_equal(dispatcher_turn(a), 0);
        assert_int_equal(store_get(old.store, "take-1", &op), 0);
        assert_int_equal(op.state, OP_IN_FLIGHT);
        dispatcher_free(a);
        fake_release(&old);

        /* The new owner: one call timeout of waiting, then the operation is
         * unknown and reconciled by a query with the same key. */
        fake_init(x, &x->fake, slow_then_known);
        tg_mono_ns t0 = x->fake.clock.mono;
        assert_int_equal(dispatcher_new(&x->cfg, &x->opt, x->fake.env, &x->d), 0);
        assert_int_equal(dispatcher_open(x->d), 0);
        assert_true(x->fake.clock.mono - t0 >= x->cfg.provider_timeout_ms * MS);
        assert_int_equal(store_get(x->fake.store, "take-1", &op), 0);
        assert_int_equal(op.state, OP_UNKNOWN);
        run_until_settled(x, 30 * TG_NS_PER_S);
        assert_int_equal(store_get(x->fake.store, "take-1", &op), 0);
        assert_int_equal(op.state, OP_SUCCEEDED);
        assert_int_equal(n_starts(&x->fake), 1);
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
            store_accept(x->fake.store, &r, f_wall(&x->fake), &x->cfg.policy, &created, &op), 0);
        assert_true(created);
        return op;
}

static const struct sim_start *start_of(const struct fake *f, const char *op, unsigned nth)
{
        for (unsigned i = 0; i < n_starts(f); i++)
                if (strcmp(f->starts[i].operation_id, op) == 0 && nth-- == 0)
                        return &f->starts[i];
        return NULL;
}

static unsigned calls_of(const struct fake *f, const char *op)
{
        unsigned n = 0;

        for (unsigned i = 0; i < n_starts(f); i++)
                n += strcmp(f->starts[i].operation_id, op) == 0;
        return n;
}

static void test_caller_deadline_cuts_timeout(void **state)
{
        struct fx *x = *state;
        const struct sim_start *s;
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
        assert_int_equal(store_get(x->fake.store, "dl-tight", &op), 0);
        assert_int_equal(op.state, OP_MANUAL);
        assert_int_equal(op.reason, MANUAL_DEADLINE);
        /* the others were reconciled by a query with their whole timeout */
        assert_int_equal(store_get(x->fake.store, "dl-loose", &op), 0);
        assert_int_equal(op.state, OP_SUCCEEDED);
        assert_int_equal(calls_of(&x->fake, "dl-loose"), 2);
        assert_int_equal(store_get(x->fake.store, "dl-none", &op), 0);
        assert_int_equal(op.state, OP_SUCCEEDED);
        (void)loose;
}

/* A deadline that leaves less than a call's timeout for a later call: the
 * query gets only what is left. */
static void test_deadline_cuts_a_later_call(void **state)
{
        struct fx *x = *state;
        const struct sim_start *q;

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
        assert_int_equal(store_list_calls(x->fake.store, 0, 100, see_call, &seen), 0);
        assert_int_equal(seen.n, 4); /* a POST and a query each */
        for (unsigned i = 0; i < seen.n; i++) {
                const struct call_record *c = &seen.c[i];
                const struct sim_start *s = NULL;
                struct op_record op;

                for (unsigned k = 0; k < n_starts(&x->fake); k++)
                        if (strcmp(x->fake.starts[k].request_id, c->request_id) == 0)
                                s = &x->fake.starts[k];
                assert_non_null(s);
                assert_int_equal(store_get(x->fake.store, c->operation_id, &op), 0);
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
        while (n_starts(&x->fake) == 0)
                assert_int_equal(dispatcher_turn(x->d), 0);
        x->stop = 1;
        /* no new start; the open call ends (at its timeout) and is settled */
        int r = 0;
        for (int i = 0; i < 10000 && r == 0; i++)
                r = dispatcher_turn(x->d);
        assert_int_equal(r, 1);
        assert_int_equal(n_starts(&x->fake), 1);
        assert_int_equal(count_state(x, OP_UNKNOWN), 1);
        assert_int_equal(count_state(x, OP_PENDING), 2);
        assert_false(dispatcher_lost(x->d));
}

/* The store cannot take an outcome for a while: the exit starts nothing,
 * and its loop waits for the next try instead of turning again at once
 * (tollgate-sim found it spinning: a slot it may not use looked due). Once
 * the store is back, the outcome is settled. */
static void test_store_down_does_not_spin(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        struct op_record op;

        open_dispatcher(x, fast);
        fail_writes_in_window(x);
        accept_n(x, 2, "down");
        while (n_starts(f) == 0)
                assert_int_equal(dispatcher_turn(x->d), 0);
        /* the answer comes back 80 ms later; the store fails from now on */
        x->fail_from = f->clock.mono;
        x->fail_until = TG_MONO_NEVER;
        tg_mono_ns t0 = f->clock.mono;
        for (int i = 0; i < 100; i++)
                assert_int_equal(dispatcher_turn(x->d), 0);
        /* a turn per settle retry (200 ms) or housekeeping second, not 100
         * turns in no time */
        assert_true(f->clock.mono - t0 >= 5 * TG_NS_PER_S);
        assert_int_equal(n_starts(f), 1);
        assert_int_equal(store_get(x->fake.store, "down-000", &op), 0);
        assert_int_equal(op.state, OP_IN_FLIGHT);
        x->fail_until = f->clock.mono;
        run_until_settled(x, 20 * TG_NS_PER_S);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 2);
}

/* A claim made ahead is given back at its deadline while the store fails:
 * it is asked again once the store is back, so the operation does not stay
 * in flight for good (tollgate-sim found it there, never in manual); then
 * the sweep sends it to manual. */
static void test_release_retried_when_the_store_fails(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        struct op_record op;

        x->cfg.exit.starts_per_second = 0.5; /* 2 s between starts */
        x->cfg.policy.deadline_ms = 3000;
        open_dispatcher(x, fast);
        fail_writes_in_window(x);
        accept_n(x, 3, "rel");
        while (n_starts(f) == 0)
                assert_int_equal(dispatcher_turn(x->d), 0);
        /* the third is claimed ahead for +4 s, past its deadline; the store
         * fails when it is given back (nothing else is waiting for it) */
        x->fail_from = f->starts[0].at + 3500 * MS;
        x->fail_until = f->starts[0].at + 4100 * MS;
        run_until_settled(x, 30 * TG_NS_PER_S);
        assert_int_equal(n_starts(f), 2);
        assert_int_equal(store_get(x->fake.store, "rel-002", &op), 0);
        assert_int_equal(op.state, OP_MANUAL);
        assert_int_equal(op.reason, MANUAL_DEADLINE);
        assert_int_equal(op.attempts, 0);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 2);
}

/* A new owner waits one call timeout, one 1/rate and OWNERSHIP_FRESH_NS:
 * the previous owner's last request may reach the wire as late as its
 * timeout, and one whose lock was lost alive may hand calls made ahead over
 * until its owner check is stale (tollgate-sim found the new owner's first
 * start 645 ms after the old one's last, at 0.5/s with a 250 ms timeout). */
static void test_takeover_waits_the_spacing(void **state)
{
        struct fx *x = *state;
        struct fake old;
        struct dispatcher *a = NULL;

        x->cfg.exit.starts_per_second = 0.5;
        x->cfg.provider_timeout_ms = 250;
        fake_init(x, &old, fast);
        assert_int_equal(dispatcher_new(&x->cfg, &x->opt, old.env, &a), 0);
        assert_int_equal(dispatcher_open(a), 0);
        {
                struct refund_request r;
                struct op_record op;
                bool created = false;

                for (int i = 0; i < 2; i++) {
                        memset(&r, 0, sizeof(r));
                        snprintf(r.operation_id, sizeof(r.operation_id), "gap-%d", i);
                        snprintf(r.payment_id, sizeof(r.payment_id), "pay-%d", i);
                        r.amount = 100;
                        memcpy(r.currency, "TWD", 4);
                        assert_int_equal(store_accept(old.store, &r, f_wall(&old), &x->cfg.policy,
                                                      &created, &op),
                                         0);
                }
        }
        while (n_starts(&old) == 0 || old.clock.mono < old.starts[0].at)
                assert_int_equal(dispatcher_turn(a), 0);
        tg_mono_ns last = old.starts[0].at;
        dispatcher_free(a);
        fake_release(&old);

        /* the new owner, on the same machine a moment later */
        fake_init(x, &x->fake, fast);
        x->fake.clock.mono = old.clock.mono;
        tg_mono_ns t0 = x->fake.clock.mono;
        assert_int_equal(dispatcher_new(&x->cfg, &x->opt, x->fake.env, &x->d), 0);
        assert_int_equal(dispatcher_open(x->d), 0);
        assert_true(x->fake.clock.mono - t0 >= 250 * MS + 2000 * MS + OWNERSHIP_FRESH_NS);
        run_until_settled(x, 30 * TG_NS_PER_S);
        assert_true(n_starts(&x->fake) >= 1);
        assert_true(x->fake.starts[0].at - last >= 2000 * MS);
}

/* A claim that takes 2 s (a stalled store) while the owner lock is lost
 * under a live dispatcher: the call is not handed over on an owner check
 * that old; the next check finds the lock gone, the claim goes back, and
 * the dispatcher takes the exit again under a new epoch before it sends.
 * Without the check's freshness the call went out under the lost epoch.
 * `after` starts go first (0: the stall hits the very first claim, when
 * nothing has started yet: the sanitizer build found an overflow there). */
static void stale_owner_check(struct fx *x, unsigned after)
{
        struct fake *f = &x->fake;
        struct store_fault_hooks h = {.after = slow_claims, .ctx = x};

        /* claims slower than half the interval are made at the slot, in
         * try_start, after the turn's owner check */
        x->claim_ns = 150 * MS;
        open_dispatcher(x, fast);
        assert_int_equal(store_open(x->url, &x->peek), 0);
        assert_int_equal(store_faults_wrap(x->fake.store, &h), 0);
        accept_n(x, 12, "stale");
        while (n_starts(f) < after)
                assert_int_equal(dispatcher_turn(x->d), 0);
        x->armed = true;
        run_until_settled(x, 60 * TG_NS_PER_S);
        store_close(x->peek);
        assert_int_equal(x->armed, false);
        assert_true(x->lock_lost_at > 0);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 12);
        for (unsigned i = 0; i < n_starts(f) && i < MAX_STARTS; i++)
                if (f->starts[i].at >= x->lock_lost_at)
                        assert_true(sim_request_epoch(f->starts[i].request_id) > 1);
}

static void test_no_start_on_a_stale_owner_check(void **state)
{
        stale_owner_check(*state, 3);
}

static void test_no_start_on_a_stale_first_owner_check(void **state)
{
        stale_owner_check(*state, 0);
}

/* ---- two exits in one loop ------------------------------------------------------- */

/* Calls open per exit, told apart by their operations' prefix ("a-", "b-"),
 * from the hand-off until the dispatcher took the result: what each exit's
 * cap bounds. */
static unsigned two_open[2], two_max_open[2];

static unsigned exit_of(const char *operation_id)
{
        return operation_id[0] == 'b';
}

static void two_accounts(struct fake *f, const struct transport_call *call, struct sim_answer *a)
{
        unsigned e = exit_of(call->operation_id);

        fast(f, call, a);
        a->latency = 200 * MS; /* long enough for each cap to bind */
        if (++two_open[e] > two_max_open[e])
                two_max_open[e] = two_open[e];
}

static void two_delivered(struct fake *f, const struct transport_call *call)
{
        (void)f;
        two_open[exit_of(call->operation_id)]--;
}

static unsigned open_ops(struct store *store)
{
        struct store_stats st;

        assert_int_equal(store_stats(store, &st), 0);
        return (unsigned)(st.by_state[OP_PENDING] + st.by_state[OP_IN_FLIGHT] +
                          st.by_state[OP_RETRY_WAIT] + st.by_state[OP_UNKNOWN]);
}

/* Exit `e`'s starts: each at least its own 1/rate after its previous one;
 * the smallest gap, into *ret_min_gap. */
static unsigned check_exit_spacing(const struct fake *f, unsigned e, double rate,
                                   tg_mono_ns *ret_min_gap)
{
        tg_mono_ns interval = (tg_mono_ns)(1e9 / rate + 0.5), last = 0, min_gap = INT64_MAX;
        unsigned n = 0;

        for (unsigned i = 0; i < n_starts(f); i++) {
                const struct sim_start *s = &f->starts[i];
                if (exit_of(s->operation_id) != e)
                        continue;
                if (n > 0 && s->at - last < min_gap)
                        min_gap = s->at - last;
                if (n > 0 && s->at - last < interval)
                        fail_msg("exit %u: starts %lld ns apart (< %lld)", e,
                                 (long long)(s->at - last), (long long)interval);
                last = s->at;
                n++;
        }
        *ret_min_gap = min_gap;
        return n;
}

static void test_two_exits_in_one_loop(void **state)
{
        struct fx *x = *state;
        struct fake *f = &x->fake;
        struct tg_config cfg_b = x->cfg;
        struct store *store_b = NULL;
        char url_b[160];
        tg_mono_ns gap_a, gap_b, cross = INT64_MAX;

        /* exit a: 20/s, 2 in flight, on the fixture's store; exit b: 50/s,
         * 5 in flight, on a store of its own */
        x->cfg.exit.starts_per_second = 20;
        x->cfg.exit.max_in_flight = 2;
        cfg_b.exit.starts_per_second = 50;
        cfg_b.exit.max_in_flight = 5;
        memset(two_open, 0, sizeof(two_open));
        memset(two_max_open, 0, sizeof(two_max_open));
        fake_init(x, f, two_accounts);
        f->delivered = two_delivered;
        snprintf(url_b, sizeof(url_b), "sqlite://%s/b.db", x->dir);
        assert_int_equal(store_open(url_b, &store_b), 0);
        struct dispatcher_exit exits[2] = {{.config = &x->cfg},
                                           {.config = &cfg_b, .store = store_b}};
        assert_int_equal(dispatcher_new_exits(exits, 2, &x->opt, f->env, &x->d), 0);
        assert_int_equal(dispatcher_open(x->d), 0);
        accept_into(f->store, &x->cfg, f_wall(f), 12, "a");
        accept_into(store_b, &cfg_b, f_wall(f), 30, "b");

        tg_mono_ns t0 = f->clock.mono;
        while (f->clock.mono - t0 < 60 * TG_NS_PER_S && (open_ops(f->store) || open_ops(store_b)))
                assert_int_equal(dispatcher_turn(x->d), 0);
        tg_mono_ns took = f->clock.mono - t0;

        /* every refund of each account done, one POST each, in its own store */
        assert_int_equal(open_ops(f->store), 0);
        assert_int_equal(open_ops(store_b), 0);
        assert_int_equal(count_state(x, OP_SUCCEEDED), 12);
        assert_int_equal(n_starts(f), 12 + 30);
        for (unsigned i = 0; i < n_starts(f); i++)
                assert_int_equal(posts_of(f, f->starts[i].operation_id), 1);
        /* each its own spacing... */
        assert_int_equal(check_exit_spacing(f, 0, 20, &gap_a), 12);
        assert_int_equal(check_exit_spacing(f, 1, 50, &gap_b), 30);
        /* ... b's, not a's: b went faster than a may */
        assert_true(gap_b < 50 * MS);
        /* ... and its own cap, reached and never passed */
        assert_int_equal(two_max_open[0], 2);
        assert_int_equal(two_max_open[1], 5);
        for (unsigned i = 0; i < n_starts(f); i++)
                assert_true(f->starts[i].open_after <= 2 + 5);
        /* neither waits for the other: starts of the two come closer
         * together than either's spacing, and the whole took about as long
         * as the slower of the two alone (12 at 2 per 200 ms, 30 at 5 per
         * 200 ms: 1.2 s each), not their sum */
        for (unsigned i = 1; i < n_starts(f); i++)
                if (exit_of(f->starts[i].operation_id) != exit_of(f->starts[i - 1].operation_id) &&
                    f->starts[i].at - f->starts[i - 1].at < cross)
                        cross = f->starts[i].at - f->starts[i - 1].at;
        print_message("two exits: %.3f s; smallest gaps a %.1f ms, b %.1f ms, across %.1f ms\n",
                      (double)took / 1e9, (double)gap_a / 1e6, (double)gap_b / 1e6,
                      (double)cross / 1e6);
        assert_true(cross < 20 * MS);
        assert_true(took < 2 * TG_NS_PER_S);

        dispatcher_free(x->d);
        x->d = NULL;
        store_close(store_b);
}

/* Starts on the wire in [from, to). */
static unsigned starts_between(const struct fake *f, tg_mono_ns from, tg_mono_ns to)
{
        unsigned n = 0;

        for (unsigned i = 0; i < n_starts(f); i++)
                n += f->starts[i].at >= from && f->starts[i].at < to;
        return n;
}

/* Orphaned shares: one process, shares = 2, its first exit and a spare on
 * connections of their own. Nobody holds share 1: the spare takes it (its
 * first try 10 s after it first looked, then its takeover wait) and the
 * account runs at its full rate, the two shares' starts merged never closer
 * than 1/rate. A standby (another handle) then wants a share, saying so
 * every second: the spare drains and releases, the standby gets the share,
 * and the spare does not take it again while it is held: the process is
 * back at half the rate. With shares = 3 (two spares) one newcomer gets one
 * share, not two: the other spare keeps serving, 2/3 of the rate. */
static void spare_run(struct fx *x, unsigned shares)
{
        struct fake *f = &x->fake;
        struct store *spare_store[2] = {NULL, NULL}, *standby = NULL;
        struct store_split split = {.shares = shares, .starts_per_second = 10, .max_in_flight = 6};
        unsigned share = 9;
        int64_t epoch = 0;
        int r = TG_ELOCKED;

        x->cfg.exit.starts_per_second = 10;
        x->cfg.exit.max_in_flight = 6;
        x->cfg.exit.spacing_margin_ns = 0;
        x->cfg.exit_clock_skew_ms = 0;
        x->cfg.exit_shares = shares;
        x->cfg.provider_timeout_ms = 1000;
        fake_init(x, f, fast);
        assert_int_equal(store_open(x->url, &spare_store[0]), 0);
        assert_int_equal(store_open(x->url, &spare_store[1]), 0);
        assert_int_equal(store_open(x->url, &standby), 0);
        struct dispatcher_exit exits[3] = {
            {.config = &x->cfg},
            {.config = &x->cfg, .store = spare_store[0], .spare = true, .primary = 0},
            {.config = &x->cfg, .store = spare_store[1], .spare = true, .primary = 0}};
        assert_int_equal(dispatcher_new_exits(exits, shares, &x->opt, f->env, &x->d), 0);
        assert_int_equal(dispatcher_open(x->d), 0);
        accept_n(x, 250, "sp");

        /* the spare's wait: its first try 10 s after it first looked, the
         * takeover wait (1 s + 200 ms + 1.5 s); then both shares send */
        tg_mono_ns t0 = f->clock.mono;
        while (f->clock.mono - t0 < 20 * TG_NS_PER_S)
                assert_int_equal(dispatcher_turn(x->d), 0);
        /* one share alone until the first try */
        assert_true(starts_between(f, t0 + 5 * TG_NS_PER_S, t0 + 9 * TG_NS_PER_S) <=
                    40 / shares + 2);
        unsigned late = starts_between(f, t0 + 16 * TG_NS_PER_S, t0 + 20 * TG_NS_PER_S);
        print_message("spare: %u starts in the 4 s once both shares send\n", late);
        assert_true(late >= 38); /* 40 at the account's 10/s; one share alone: 40 / shares */
        check_spacing(f, 10.0, 6);

        /* a standby wants a share: once a second it tries and says so */
        tg_mono_ns asked = f->clock.mono, next = asked;
        while (r == TG_ELOCKED && f->clock.mono - asked < 10 * TG_NS_PER_S) {
                assert_int_equal(dispatcher_turn(x->d), 0);
                if (f->clock.mono < next)
                        continue;
                next = f->clock.mono + TG_NS_PER_S;
                r = store_share_acquire(standby, &split, &share, &epoch);
                if (r == TG_ELOCKED)
                        assert_int_equal(store_share_want(standby), 0);
        }
        assert_int_equal(r, 0);
        assert_true(share >= 1 && share < shares);
        tg_mono_ns got = f->clock.mono;
        print_message("spare: the standby got share 1 after %.3f s\n", (double)(got - asked) / 1e9);
        /* the standby sends nothing here: the process keeps only its own
         * share (5/s) and the spare never takes share 1 back while held */
        while (f->clock.mono - got < 8 * TG_NS_PER_S)
                assert_int_equal(dispatcher_turn(x->d), 0);
        unsigned alone = starts_between(f, got + 4 * TG_NS_PER_S, got + 8 * TG_NS_PER_S);
        print_message("spare: %u starts in 4 s after the hand-back\n", alone);
        unsigned want = 40 * (shares - 1) / shares; /* 20 (shares 2), 26 (shares 3) */
        assert_true(alone + 2 >= want && alone <= want + 2);
        assert_int_equal(store_owner_check(standby), 0);
        check_spacing(f, 10.0, 6);
        for (unsigned i = 0; i < n_starts(f); i++)
                assert_int_equal(posts_of(f, f->starts[i].operation_id), 1);

        dispatcher_free(x->d);
        x->d = NULL;
        store_close(spare_store[0]);
        store_close(spare_store[1]);
        store_close(standby);
}

static void test_spare_takes_the_orphan_and_hands_it_back(void **state)
{
        spare_run(*state, 2);
}

static void test_two_spares_hand_back_one_for_one_newcomer(void **state)
{
        spare_run(*state, 3);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_fast_provider, setup, teardown),
            cmocka_unit_test_setup_teardown(test_query_sub_quota_from_the_wire, setup, teardown),
            cmocka_unit_test_setup_teardown(test_sub_quotas_never_exceed_the_account, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_held_kind_does_not_starve_the_other, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_sub_quota_split_by_shares, setup, teardown),
            cmocka_unit_test_setup_teardown(test_wire_spacing_with_varying_connects, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_wire_spacing_with_slow_connects, setup, teardown),
            cmocka_unit_test_setup_teardown(test_spacing_counts_from_the_send, setup, teardown),
            cmocka_unit_test_setup_teardown(test_shares_follow_a_rate_change, setup, teardown),
            cmocka_unit_test_setup_teardown(test_share_that_missed_controls_waits, setup, teardown),
            cmocka_unit_test_setup_teardown(test_shares_send_only_in_their_windows, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_claims_ahead_and_releases, setup, teardown),
            cmocka_unit_test_setup_teardown(test_idle_costs_nothing, setup, teardown),
            cmocka_unit_test_setup_teardown(test_due_after_an_outcome_is_on_time, setup, teardown),
            cmocka_unit_test_setup_teardown(test_claim_released_at_deadline, setup, teardown),
            cmocka_unit_test_setup_teardown(test_timeout_reconciled_with_same_key, setup, teardown),
            cmocka_unit_test_setup_teardown(test_reset_reconciled, setup, teardown),
            cmocka_unit_test_setup_teardown(test_503_holds_the_exit, setup, teardown),
            cmocka_unit_test_setup_teardown(test_share_probe_late_for_its_window, setup, teardown),
            cmocka_unit_test_setup_teardown(test_share_slow_claim_waits_for_the_next_point, setup,
                                            teardown),
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
            cmocka_unit_test_setup_teardown(test_store_down_does_not_spin, setup, teardown),
            cmocka_unit_test_setup_teardown(test_release_retried_when_the_store_fails, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_takeover_waits_the_spacing, setup, teardown),
            cmocka_unit_test_setup_teardown(test_no_start_on_a_stale_owner_check, setup, teardown),
            cmocka_unit_test_setup_teardown(test_no_start_on_a_stale_first_owner_check, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_two_exits_in_one_loop, setup, teardown),
            cmocka_unit_test_setup_teardown(test_spare_takes_the_orphan_and_hands_it_back, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_two_spares_hand_back_one_for_one_newcomer, setup,
                                            teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
