/*
 * A failing disk under the real exit, as SQLite's own I/O-error tests do it:
 * the SQLite store runs on tests/faultvfs, which counts every write, sync and
 * truncate and fails them from the N-th on, and N walks over the whole run
 * (open, intake, claims, settles, samples, recovery). Each N runs in a child
 * process (fork) with the real dispatcher on a fake clock and provider
 * (virtual time, as test_dispatcher.c), then:
 *   - heal: the disk comes back 3 virtual seconds after the first fault and
 *     the exit must resume and finish everything it accepted; or
 *   - crash: the child dies (_exit, no close: the WAL stays as a kill -9
 *     leaves it) while the disk still fails,
 * and the parent judges the file the child left, with the default VFS:
 *   - nothing reported accepted (store_accept returned 0) is missing;
 *   - nothing reported final (store_get said so) is anything else;
 *   - every request the provider saw has its call row (record before send);
 *   - PRAGMA integrity_check passes and the counters agree with the rows
 *     (no half-written state);
 * then a new owner takes over in the parent and everything ends succeeded,
 * each refund executed once at the provider (one key, its operation id) and
 * never POSTed more than its attempt limit.
 * Half the N fail as I/O errors, half as a full disk; a third kind fails one
 * operation only. A fresh file failing during its migrations must open
 * afterwards at the latest schema.
 *
 * TG_DISK_FAULTS_EVERY=1 walks every N (a few minutes); by default every
 * step-th N, the step chosen so that about 24 of them run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/policy.h"
#include "core/tg_error.h"
#include "daemon/config.h"
#include "daemon/dispatcher.h"
#include "daemon/exit_env.h"
#include "daemon/log.h"
#include "faultvfs.h"
#include "store/store.h"

#define WALL0     1700000000000LL
#define MS        TG_NS_PER_MS
#define NOPS      6
#define MAX_OPEN  16
#define MAX_START 512
#define HEAL_NS   (3 * TG_NS_PER_S)
#define RUN_NS    (120 * TG_NS_PER_S)

/* ---- what the child did, shared with the parent (MAP_SHARED) ----------- */

struct start_rec {
        char op[TG_OP_ID_MAX + 1];
        char request_id[TG_REQUEST_ID_MAX + 1];
        bool post;
        bool second_life; /* the parent's takeover, on its own virtual clock */
        tg_mono_ns wire;  /* on the wire, virtual time of its life */
};

struct shared {
        /* the provider's ledger: executions per operation, over both lives */
        unsigned executions[NOPS];
        unsigned posts[NOPS];
        unsigned all_posts; /* every third POST answers after the timeout */
        unsigned n_starts;
        struct start_rec starts[MAX_START];
        bool accepted[NOPS];      /* store_accept said 0 */
        enum op_state done[NOPS]; /* final as store_get said it, else OP_PENDING */
        int64_t ops, faults;      /* faultvfs counts in the child */
        int open_failed;          /* the child's store_open refused (its code) */
};

static struct shared *sh;
static bool in_child;

/* A check that holds in the forked child too: there it says why and ends
 * the child with 1 (cmocka's fail would run the rest of the suite in it). */
#define NEED(cond, ...)                                                                            \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        if (in_child) {                                                            \
                                fprintf(stderr, "check failed: %s (%s:%d): ", #cond, __FILE__,     \
                                        __LINE__);                                                 \
                                fprintf(stderr, __VA_ARGS__);                                      \
                                fprintf(stderr, "\n");                                             \
                                _exit(1);                                                          \
                        }                                                                          \
                        fail_msg(__VA_ARGS__);                                                     \
                }                                                                                  \
        } while (0)

static const char *op_name(unsigned i)
{
        static char names[NOPS][16];

        snprintf(names[i], sizeof(names[i]), "disk-%u", i);
        return names[i];
}

static int op_index(const char *op)
{
        for (unsigned i = 0; i < NOPS; i++)
                if (strcmp(op, op_name(i)) == 0)
                        return (int)i;
        return -1;
}

/* ---- a fake clock and provider (virtual time) ---------------------------- */

struct fcall {
        bool open, done, reported;
        tg_mono_ns done_at, sent_at;
        struct transport_result result;
};

struct fake {
        struct exit_env env;
        tg_mono_ns mono;
        tg_mono_ns heal_at; /* the disk comes back (TG_MONO_NEVER: not in this life) */
        tg_mono_ns die_at;  /* the process dies (crash variant) */
        struct fcall calls[MAX_OPEN];
};

static void advance(struct fake *f, tg_mono_ns to)
{
        if (to > f->mono)
                f->mono = to;
        if (f->mono >= f->heal_at) {
                faultvfs_arm(-1, 0, FAULTVFS_IOERR);
                f->heal_at = TG_MONO_NEVER;
        }
        if (f->mono >= f->die_at) {
                sh->ops = faultvfs_ops();
                sh->faults = faultvfs_faults();
                _exit(0); /* as kill -9: nothing closed, nothing flushed */
        }
}

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
        struct fake *f = ctx;

        advance(f, f->mono + (ns > 0 ? ns : 0));
}

static unsigned f_open(void *ctx)
{
        struct fake *f = ctx;
        unsigned n = 0;

        for (unsigned i = 0; i < MAX_OPEN; i++)
                n += f->calls[i].open;
        return n;
}

/* The provider: a POST executes the refund once per key (a replay answers
 * the stored success); every third POST answers after the timeout. A query
 * says succeeded once executed, else 404. */
static int f_start(void *ctx, const struct transport_call *call, struct exit_handoff *ret)
{
        struct fake *f = ctx;
        struct fcall *c = NULL;
        int i = op_index(call->operation_id);
        bool post = call->request == CLASSIFY_POST;
        tg_mono_ns wire = f->mono > call->not_before ? f->mono : call->not_before;

        ret->mono = f->mono;
        ret->wall = f_wall(f);
        for (unsigned k = 0; k < MAX_OPEN && !c; k++)
                if (!f->calls[k].open)
                        c = &f->calls[k];
        if (!c)
                return TG_EFULL;
        NEED(i >= 0, "a call for %s", call->operation_id);
        NEED(sh->n_starts < MAX_START, "more than %d calls", MAX_START);
        struct start_rec *s = &sh->starts[sh->n_starts++];
        snprintf(s->op, sizeof(s->op), "%s", call->operation_id);
        snprintf(s->request_id, sizeof(s->request_id), "%s", call->request_id);
        s->post = post;
        s->second_life = !in_child;
        s->wire = wire;
        memset(c, 0, sizeof(*c));
        c->open = true;
        c->sent_at = wire;
        c->result.cookie = call->cookie;
        c->result.handoff_mono = f->mono;
        c->result.sent = true;
        c->result.ready_mono = f->mono;
        c->result.sent_mono = wire;
        c->result.reply.transport = TG_TR_COMPLETE;
        c->result.reply.body_is_json = true;
        if (post) {
                bool late = ++sh->all_posts % 3 == 0;

                sh->posts[i]++;

                sh->executions[i] += sh->executions[i] == 0;
                if (late) {
                        c->done_at = wire + call->timeout_ms * MS;
                        c->result.reply.transport = TG_TR_TIMEOUT_AFTER_SEND;
                        snprintf(c->result.error, sizeof(c->result.error), "timeout");
                        return 0;
                }
                c->result.reply.http_status = 201;
                snprintf(c->result.reply.status, sizeof(c->result.reply.status), "succeeded");
        } else if (sh->executions[i]) {
                c->result.reply.http_status = 200;
                snprintf(c->result.reply.status, sizeof(c->result.reply.status), "succeeded");
        } else {
                c->result.reply.http_status = 404;
                snprintf(c->result.reply.error_code, sizeof(c->result.reply.error_code),
                         "not_found");
        }
        c->done_at = wire + 40 * MS;
        c->result.latency_us = 40000;
        return 0;
}

static int f_poll(void *ctx, tg_mono_ns until)
{
        struct fake *f = ctx;
        tg_mono_ns first = TG_MONO_NEVER;

        for (unsigned i = 0; i < MAX_OPEN; i++) {
                struct fcall *c = &f->calls[i];
                if (c->open && !c->done && c->done_at < first)
                        first = c->done_at;
                if (c->open && !c->reported && c->sent_at < first)
                        first = c->sent_at;
        }
        advance(f, first < until ? first : until);
        for (unsigned i = 0; i < MAX_OPEN; i++)
                if (f->calls[i].open && f->calls[i].done_at <= f->mono)
                        f->calls[i].done = true;
        return 0;
}

static int f_next_sent(void *ctx, struct transport_sent *ret)
{
        struct fake *f = ctx;

        for (unsigned i = 0; i < MAX_OPEN; i++) {
                struct fcall *c = &f->calls[i];
                if (c->open && !c->reported && c->sent_at <= f->mono) {
                        c->reported = true;
                        *ret = (struct transport_sent){.cookie = c->result.cookie,
                                                       .sent = true,
                                                       .ready_mono = c->result.ready_mono,
                                                       .sent_mono = c->sent_at};
                        return 0;
                }
        }
        return TG_ENOTFOUND;
}

static int f_next_done(void *ctx, struct transport_result *ret)
{
        struct fake *f = ctx;

        for (unsigned i = 0; i < MAX_OPEN; i++)
                if (f->calls[i].open && f->calls[i].done && f->calls[i].reported) {
                        *ret = f->calls[i].result;
                        f->calls[i].open = false;
                        return 0;
                }
        return TG_ENOTFOUND;
}

static void fake_init(struct fake *f)
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
                                   .seed = 11};
        f->mono = 1000 * MS;
        f->heal_at = TG_MONO_NEVER;
        f->die_at = TG_MONO_NEVER;
}

/* ---- one life of the exit --------------------------------------------------- */

static char dir[64], url[128];
static struct tg_config cfg;
static volatile sig_atomic_t stop_flag;

static int accept_op(struct store *s, unsigned i, tg_wall_ms now)
{
        struct refund_request r;
        struct op_record op;
        bool created = false;

        memset(&r, 0, sizeof(r));
        snprintf(r.operation_id, sizeof(r.operation_id), "%s", op_name(i));
        snprintf(r.payment_id, sizeof(r.payment_id), "pay-%u", i);
        r.amount = 100 + i;
        memcpy(r.currency, "TWD", 4);
        return store_accept(s, &r, now, &cfg.policy, &created, &op);
}

static bool all_final(struct store *s)
{
        for (unsigned i = 0; i < NOPS; i++) {
                struct op_record op;

                if (store_get(s, op_name(i), &op) < 0 || !policy_state_is_final(op.state))
                        return false;
        }
        return true;
}

/* Notes what this life may tell a caller: a final state it read. */
static void note_done(struct store *s)
{
        for (unsigned i = 0; i < NOPS; i++) {
                struct op_record op;

                if (store_get(s, op_name(i), &op) == 0 && policy_state_is_final(op.state))
                        sh->done[i] = op.state;
        }
}

/* Runs the exit on `f` until every refund is final or virtual time runs out.
 * Refunds the store refused are offered again (a client retrying a 503). */
static void run_exit(struct fake *f)
{
        struct dispatcher_options opt = {.stop = &stop_flag};
        struct dispatcher *d = NULL;
        tg_mono_ns t0 = f->mono;

        NEED(dispatcher_new(&cfg, &opt, &f->env, &d) == 0, "dispatcher_new");
        /* a takeover may fail on the disk: the daemon would exit and be
         * started again, here the same after a second */
        while (dispatcher_open(d) < 0) {
                dispatcher_free(d);
                f_sleep(f, TG_NS_PER_S);
                NEED(f->mono - t0 < RUN_NS, "the dispatcher never opened");
                NEED(dispatcher_new(&cfg, &opt, &f->env, &d) == 0, "dispatcher_new");
        }
        tg_mono_ns last = f->mono;
        unsigned still = 0;
        while (f->mono - t0 < RUN_NS) {
                /* a loop that stops waiting spins a core in a real process */
                still = f->mono == last ? still + 1 : 0;
                last = f->mono;
                NEED(still < 10000, "the loop turns without waiting at t=%lld ms",
                     (long long)((f->mono - t0) / MS));
                for (unsigned i = 0; i < NOPS; i++)
                        if (!sh->accepted[i] && accept_op(f->env.store, i, f_wall(f)) == 0)
                                sh->accepted[i] = true;
                int r = dispatcher_turn(d);

                NEED(r == 0, "dispatcher_turn returned %d", r);
                note_done(f->env.store);
                if (all_final(f->env.store))
                        break;
        }
        dispatcher_free(d);
}

/* The child: one life on a failing disk from operation `after` on. */
static void child(int64_t after, int64_t count, enum faultvfs_kind kind, bool crash)
{
        struct fake f;
        int r;

        fake_init(&f);
        log_set_level(LOG_ERROR + 1);
        faultvfs_reset();
        faultvfs_arm(after, count, kind);
        r = store_open(url, &f.env.store);
        if (r < 0) {
                /* a daemon that cannot open its store says so and exits */
                sh->open_failed = r;
                sh->ops = faultvfs_ops();
                sh->faults = faultvfs_faults();
                _exit(0);
        }
        /* the disk comes back (or the process dies) 3 s after the run starts;
         * with an early N that is while everything still fails */
        if (crash)
                f.die_at = f.mono + HEAL_NS;
        else
                f.heal_at = f.mono + HEAL_NS;
        for (unsigned i = 0; i < NOPS; i++)
                sh->accepted[i] = accept_op(f.env.store, i, f_wall(&f)) == 0;
        run_exit(&f);
        sh->ops = faultvfs_ops();
        sh->faults = faultvfs_faults();
        if (!crash)
                NEED(all_final(f.env.store), "not everything final after the disk came back");
        _exit(0); /* as a crash: the parent judges what is on disk */
}

/* ---- the parent's judgement --------------------------------------------------- */

static int64_t scalar(sqlite3 *db, const char *sql)
{
        sqlite3_stmt *st = NULL;
        int64_t v = -1;

        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        if (sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
}

/* What the file says, read raw: whole, and its counters true to its rows. */
static void check_file(void)
{
        char path[160];
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;

        snprintf(path, sizeof(path), "%s/t.db", dir);
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
        sqlite3_finalize(st);
        assert_int_equal(scalar(db, "SELECT n FROM counters WHERE name = 'succeeded'"),
                         scalar(db, "SELECT count(*) FROM operations WHERE state = 'succeeded'"));
        assert_int_equal(scalar(db, "SELECT n FROM counters WHERE name = 'calls'"),
                         scalar(db, "SELECT count(*) FROM calls"));
        /* an operation in flight has its one open call; nothing else has */
        assert_int_equal(scalar(db, "SELECT count(*) FROM operations WHERE state = 'in_flight'"),
                         scalar(db, "SELECT count(*) FROM calls WHERE ended = 0"));
        for (unsigned i = 0; i < sh->n_starts; i++) {
                char sql[200];

                /* record before send: the request the provider saw is on record */
                snprintf(sql, sizeof(sql), "SELECT count(*) FROM calls WHERE request_id = '%s'",
                         sh->starts[i].request_id);
                if (scalar(db, sql) != 1)
                        fail_msg("request %s (%s) reached the provider without its call row",
                                 sh->starts[i].request_id, sh->starts[i].op);
        }
        sqlite3_close(db);
}

/* What the sweeps saw, for the table of docs/reliability.md. */
static struct {
        unsigned runs, most_posts, spacing;
} seen;

static void judge(const char *what, int64_t after)
{
        struct store *s = NULL;
        struct fake f;

        check_file();
        fake_init(&f);
        assert_int_equal(store_open(url, &f.env.store), 0);
        s = f.env.store;
        for (unsigned i = 0; i < NOPS; i++) {
                struct op_record op;
                int r = store_get(s, op_name(i), &op);

                if (sh->accepted[i] && r != 0)
                        fail_msg("%s N=%lld: %s was accepted and is gone", what, (long long)after,
                                 op_name(i));
                if (sh->done[i] != OP_PENDING && (r != 0 || op.state != sh->done[i]))
                        fail_msg("%s N=%lld: %s was reported %d and is %d", what, (long long)after,
                                 op_name(i), (int)sh->done[i], r == 0 ? (int)op.state : -1);
        }
        /* a new owner finishes the work (refunds never accepted are offered
         * again, as a client does after a 503) */
        run_exit(&f);
        for (unsigned i = 0; i < NOPS; i++) {
                struct op_record op;

                assert_int_equal(store_get(s, op_name(i), &op), 0);
                if (op.state != OP_SUCCEEDED)
                        fail_msg("%s N=%lld: %s ended %d", what, (long long)after, op_name(i),
                                 (int)op.state);
                assert_int_equal(sh->executions[i], 1);
                assert_true(sh->posts[i] <= cfg.policy.max_attempts);
                if (sh->posts[i] > seen.most_posts)
                        seen.most_posts = sh->posts[i];
        }
        /* two starts of one life never closer than 1/rate (a new owner's
         * first start comes a call timeout after the last one's) */
        tg_mono_ns interval = (tg_mono_ns)(1e9 / cfg.exit.starts_per_second);
        for (unsigned i = 1; i < sh->n_starts; i++)
                if (sh->starts[i].second_life == sh->starts[i - 1].second_life &&
                    sh->starts[i].wire - sh->starts[i - 1].wire < interval)
                        seen.spacing++;
        assert_int_equal(seen.spacing, 0);
        seen.runs++;
        store_close(s);
}

static void fresh_store(void)
{
        char cmd[128];
        struct store *s = NULL;

        snprintf(cmd, sizeof(cmd), "rm -f %s/t.db*", dir);
        assert_int_equal(system(cmd), 0);
        faultvfs_arm(-1, 0, FAULTVFS_IOERR);
        assert_int_equal(store_open(url, &s), 0); /* created and migrated */
        store_close(s);
}

/* One N: the child's life, then the judgement. */
static void one(const char *what, int64_t after, int64_t count, enum faultvfs_kind kind, bool crash)
{
        pid_t pid;
        int status = 0;

        fresh_store();
        memset(sh, 0, sizeof(*sh));
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                in_child = true;
                child(after, count, kind, crash);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("%s N=%lld: the child died (status %d)", what, (long long)after, status);
        faultvfs_arm(-1, 0, FAULTVFS_IOERR);
        judge(what, after);
}

/* The operations a whole clean life makes. */
static int64_t clean_run_ops(void)
{
        one("clean", -1, 0, FAULTVFS_IOERR, false);
        assert_int_equal(sh->faults, 0);
        memset(&seen, 0, sizeof(seen));
        return sh->ops;
}

static int64_t step_for(int64_t total)
{
        const char *every = getenv("TG_DISK_FAULTS_EVERY");

        if (every && strcmp(every, "1") == 0)
                return 1;
        return total / 24 > 1 ? total / 24 : 1;
}

static int setup(void **state)
{
        (void)state;
        /* fsyncs cost nothing on a tmpfs; the disk is the fault VFS here */
        snprintf(dir, sizeof(dir), "%s/tg-disk-XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(dir))
                return -1;
        snprintf(url, sizeof(url), "sqlite://%s/t.db", dir);
        config_defaults(&cfg);
        snprintf(cfg.store_url, sizeof(cfg.store_url), "%s", url);
        sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (sh == MAP_FAILED)
                return -1;
        log_set_level(LOG_ERROR + 1);
        return faultvfs_install();
}

static int teardown(void **state)
{
        char cmd[128];

        (void)state;
        munmap(sh, sizeof(*sh));
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd) == 0 ? 0 : -1;
}

static void say_seen(const char *what, int64_t total, int64_t step)
{
        printf("disk faults, %s: %u runs (N every %lld of %lld operations), lost 0, executed "
               "twice 0, most POSTs for one key %u, spacing violations %u\n",
               what, seen.runs, (long long)step, (long long)total, seen.most_posts, seen.spacing);
        memset(&seen, 0, sizeof(seen));
}

/* Every N over a whole run: the disk fails from N on and comes back. */
static void test_fail_from_n_then_heal(void **state)
{
        (void)state;
        int64_t total = clean_run_ops();
        int64_t step = step_for(total), failed = 0;

        assert_true(total > 50);
        for (int64_t n = 0; n < total; n += step) {
                one("heal", n, -1, n / step % 2 ? FAULTVFS_FULL : FAULTVFS_IOERR, false);
                failed += sh->faults > 0;
        }
        assert_true(failed > 0);
        say_seen("fail from N, then heal", total, step);
}

/* Every N: the disk fails from N on and the process dies while it does. */
static void test_fail_from_n_then_crash(void **state)
{
        (void)state;
        int64_t total = clean_run_ops();
        int64_t step = step_for(total);

        for (int64_t n = 0; n < total; n += step)
                one("crash", n, -1, n / step % 2 ? FAULTVFS_FULL : FAULTVFS_IOERR, true);
        say_seen("fail from N, then kill", total, step);
}

/* Every N: one operation fails, the next ones work. */
static void test_one_failure_at_n(void **state)
{
        (void)state;
        int64_t total = clean_run_ops();
        int64_t step = step_for(total);

        for (int64_t n = 0; n < total; n += step)
                one("once", n, 1, FAULTVFS_IOERR, false);
        say_seen("one failure at N", total, step);
}

/* A fresh file whose migrations fail part way opens afterwards, whole, at
 * the latest schema; the failing open said why, it did not crash. */
static void test_migrations_fail_part_way(void **state)
{
        char cmd[128];
        struct store *s = NULL;
        int64_t total;

        (void)state;
        memset(sh, 0, sizeof(*sh));
        snprintf(cmd, sizeof(cmd), "rm -f %s/t.db*", dir);
        assert_int_equal(system(cmd), 0);
        faultvfs_reset();
        assert_int_equal(store_open(url, &s), 0);
        store_close(s);
        total = faultvfs_ops();
        for (int64_t n = 0; n < total; n++) {
                assert_int_equal(system(cmd), 0);
                faultvfs_reset();
                faultvfs_arm(n, -1, n % 2 ? FAULTVFS_FULL : FAULTVFS_IOERR);
                s = NULL;
                int r = store_open(url, &s);
                if (r == 0)
                        store_close(s);
                else
                        assert_true(r == TG_EIO || r == -ENOSPC);
                faultvfs_arm(-1, 0, FAULTVFS_IOERR);
                s = NULL;
                assert_int_equal(store_open(url, &s), 0);
                store_close(s);
                check_file();
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_migrations_fail_part_way),
            cmocka_unit_test(test_fail_from_n_then_heal),
            cmocka_unit_test(test_fail_from_n_then_crash),
            cmocka_unit_test(test_one_failure_at_n),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
