/*
 * bench_floor — what the parts of one start cost in CPU on this machine,
 * each alone: the floor under the dispatcher's CPU per start. Prints
 * figures; never fails on a number.
 *
 * A start at a low rate is, at least: the loop's wake-up for the hand-off,
 * the pre-request hook's hold until the slot (a second wake-up), the claim
 * committed durably before the request leaves (invariant 3: a SQLite
 * transaction with synchronous=FULL, its WAL fsync'd), one hand-off to the
 * store thread and back for it and one for the outcome, the outcome's
 * commit (synchronous=NORMAL), and the call itself (libcurl, a fresh
 * connection to a loopback server, a small POST and its answer). Each part
 * is timed here on its own, paced like calls at a low rate (the machine
 * idles between them, as the exit does at 5/s: a wake-up from idle costs
 * more than one on a busy core), as CPU time of the process (the loopback
 * server's share of a call included: on one machine it runs in the
 * caller's context too) and of the calling thread.
 *
 *   usage: bench_floor [--dir DIR] [--n N] [--pace-ms MS]
 *
 * DIR is where the SQLite file and the fsync'd file go (default /tmp: give
 * the disk the store will use); N repetitions of each part (default 200),
 * MS between them (default 20).
 */
#define BENCH_NAME "bench_floor"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "bench_util.h"

static double cpu_s(clockid_t id)
{
        struct timespec ts;

        clock_gettime(id, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pause_ms(long ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
}

struct part {
        const char *name;
        const char *what;
        void (*setup)(void *ctx);
        void (*run)(void *ctx);
        void (*teardown)(void *ctx);
        double process_us, thread_us; /* per repetition */
};

static int n_rep = 200;
static long pace = 20;

/* Times `run` n_rep times, pace ms apart; the pause itself is not counted
 * (a wake-up's cost is the part "sleep"), but the first instructions after
 * it are the part's. */
static void measure(struct part *p, void *ctx)
{
        double proc = 0, thr = 0;

        if (p->setup)
                p->setup(ctx);
        for (int i = 0; i < n_rep; i++) {
                pause_ms(pace);
                double p0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
                p->run(ctx);
                proc += cpu_s(CLOCK_PROCESS_CPUTIME_ID) - p0;
                thr += cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0;
        }
        if (p->teardown)
                p->teardown(ctx);
        p->process_us = proc / n_rep * 1e6;
        p->thread_us = thr / n_rep * 1e6;
}

/* ---- a timed sleep: the loop waking for a hand-off ---------------------------- */

static void run_sleep(void *ctx)
{
        (void)ctx;
        pause_ms(pace); /* timed here: sleep and wake-up */
}

/* ---- a hand-off to another thread and back (the store thread) ----------------- */

struct handoff {
        pthread_t thread;
        pthread_mutex_t m;
        pthread_cond_t c;
        int work, quit, bell;
};

static void *handoff_main(void *arg)
{
        struct handoff *h = arg;

        pthread_mutex_lock(&h->m);
        for (;;) {
                while (!h->work && !h->quit)
                        pthread_cond_wait(&h->c, &h->m);
                if (h->quit)
                        break;
                h->work = 0;
                uint64_t one = 1;
                if (write(h->bell, &one, sizeof(one)) < 0)
                        break;
        }
        pthread_mutex_unlock(&h->m);
        return NULL;
}

static void handoff_setup(void *ctx)
{
        struct handoff *h = ctx;

        pthread_mutex_init(&h->m, NULL);
        pthread_cond_init(&h->c, NULL);
        h->bell = eventfd(0, 0);
        if (h->bell < 0 || pthread_create(&h->thread, NULL, handoff_main, h) != 0)
                die("eventfd or thread", TG_EIO);
}

static void run_handoff(void *ctx)
{
        struct handoff *h = ctx;
        struct pollfd pfd = {.fd = h->bell, .events = POLLIN};
        uint64_t v;

        pthread_mutex_lock(&h->m);
        h->work = 1;
        pthread_cond_signal(&h->c);
        pthread_mutex_unlock(&h->m);
        if (poll(&pfd, 1, -1) != 1 || read(h->bell, &v, sizeof(v)) != sizeof(v))
                die("the bell", TG_EIO);
}

static void handoff_teardown(void *ctx)
{
        struct handoff *h = ctx;

        pthread_mutex_lock(&h->m);
        h->quit = 1;
        pthread_cond_signal(&h->c);
        pthread_mutex_unlock(&h->m);
        pthread_join(h->thread, NULL);
        close(h->bell);
}

/* ---- a 4 KiB write and fdatasync ------------------------------------------------ */

struct fsync_ctx {
        char path[4096];
        int fd;
        char page[4096];
        unsigned k;
};

static void fsync_setup(void *ctx)
{
        struct fsync_ctx *f = ctx;

        f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (f->fd < 0)
                die(f->path, TG_EIO);
        memset(f->page, 'x', sizeof(f->page));
}

static void run_fsync(void *ctx)
{
        struct fsync_ctx *f = ctx;

        /* a ring of 16 pages, as a WAL reused after a checkpoint */
        if (pwrite(f->fd, f->page, sizeof(f->page), (off_t)(f->k++ % 16) * 4096) < 0 ||
            fdatasync(f->fd) < 0)
                die("pwrite/fdatasync", TG_EIO);
}

static void fsync_teardown(void *ctx)
{
        struct fsync_ctx *f = ctx;

        close(f->fd);
        unlink(f->path);
}

/* ---- a SQLite transaction like a claim: one row updated, one inserted ---------- */

struct sql_ctx {
        char path[4096];
        const char *sync; /* FULL or NORMAL */
        sqlite3 *db;
        sqlite3_stmt *begin, *update, *insert, *commit;
        int64_t k;
};

static void sql_exec(sqlite3 *db, const char *sql)
{
        char *err = NULL;

        if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
                fprintf(stderr, BENCH_NAME ": %s: %s\n", sql, err ? err : "?");
                exit(1);
        }
}

static sqlite3_stmt *sql_prepare(sqlite3 *db, const char *sql)
{
        sqlite3_stmt *st = NULL;

        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
                fprintf(stderr, BENCH_NAME ": %s: %s\n", sql, sqlite3_errmsg(db));
                exit(1);
        }
        return st;
}

static void sql_setup(void *ctx)
{
        struct sql_ctx *q = ctx;
        char pragma[64];

        unlink(q->path);
        if (sqlite3_open(q->path, &q->db) != SQLITE_OK)
                die(q->path, TG_EIO);
        sql_exec(q->db, "PRAGMA journal_mode=WAL");
        snprintf(pragma, sizeof(pragma), "PRAGMA synchronous=%s", q->sync);
        sql_exec(q->db, pragma);
        sql_exec(q->db, "CREATE TABLE ops (id INTEGER PRIMARY KEY, state TEXT, attempts INT, "
                        "updated INT); CREATE INDEX ops_state ON ops (state, id);"
                        "CREATE TABLE calls (id INTEGER PRIMARY KEY, op INT, started INT, "
                        "sent INT); CREATE INDEX calls_op ON calls (op, id);");
        sql_exec(q->db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE "
                        "i < 1000) INSERT INTO ops SELECT i, 'pending', 0, 0 FROM n");
        q->begin = sql_prepare(q->db, "BEGIN IMMEDIATE");
        q->update = sql_prepare(q->db, "UPDATE ops SET state = ?, attempts = attempts + 1, "
                                       "updated = ? WHERE id = ?");
        q->insert = sql_prepare(q->db, "INSERT INTO calls (op, started, sent) VALUES (?, ?, 1)");
        q->commit = sql_prepare(q->db, "COMMIT");
}

static void step(sqlite3 *db, sqlite3_stmt *st)
{
        if (sqlite3_step(st) != SQLITE_DONE) {
                fprintf(stderr, BENCH_NAME ": %s\n", sqlite3_errmsg(db));
                exit(1);
        }
        sqlite3_reset(st);
}

static void run_sql(void *ctx)
{
        struct sql_ctx *q = ctx;
        int64_t id = 1 + q->k++ % 1000;

        step(q->db, q->begin);
        sqlite3_bind_text(q->update, 1, q->k % 2 ? "in_flight" : "pending", -1, SQLITE_STATIC);
        sqlite3_bind_int64(q->update, 2, q->k);
        sqlite3_bind_int64(q->update, 3, id);
        step(q->db, q->update);
        sqlite3_bind_int64(q->insert, 1, id);
        sqlite3_bind_int64(q->insert, 2, q->k);
        step(q->db, q->insert);
        step(q->db, q->commit);
}

static void sql_teardown(void *ctx)
{
        struct sql_ctx *q = ctx;
        char wal[4200];

        sqlite3_finalize(q->begin);
        sqlite3_finalize(q->update);
        sqlite3_finalize(q->insert);
        sqlite3_finalize(q->commit);
        sqlite3_close(q->db);
        unlink(q->path);
        snprintf(wal, sizeof(wal), "%s-wal", q->path);
        unlink(wal);
        snprintf(wal, sizeof(wal), "%s-shm", q->path);
        unlink(wal);
}

/* ---- a call: libcurl, a loopback server, a small POST and its answer ------------ */

struct http_ctx {
        int listen_fd;
        uint16_t port;
        pthread_t thread;
        CURL *easy;
        bool reuse;
        char url[64];
};

/* One request a connection read (up to its blank line and a small body),
 * answered 201 with a short JSON body; closed after, unless kept. */
static void *server_main(void *arg)
{
        struct http_ctx *h = arg;
        static const char answer[] = "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                                     "Content-Length: 45\r\n\r\n"
                                     "{\"refund_id\":\"rf_0000000001\",\"status\":\"done\"}";

        for (;;) {
                int fd = accept(h->listen_fd, NULL, NULL);
                if (fd < 0)
                        return NULL;
                char buf[4096];
                ssize_t n;
                /* each recv is one request here: curl writes a request whole */
                while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
                        if (send(fd, answer, sizeof(answer) - 1, MSG_NOSIGNAL) < 0)
                                break;
                close(fd);
        }
}

static void http_setup(void *ctx)
{
        struct http_ctx *h = ctx;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);

        h->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (h->listen_fd < 0 || bind(h->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            listen(h->listen_fd, 64) < 0 ||
            getsockname(h->listen_fd, (struct sockaddr *)&sa, &len) < 0)
                die("listen", TG_EIO);
        h->port = ntohs(sa.sin_port);
        snprintf(h->url, sizeof(h->url), "http://127.0.0.1:%u/v1/refunds", h->port);
        if (pthread_create(&h->thread, NULL, server_main, h) != 0)
                die("thread", TG_EIO);
        h->easy = curl_easy_init();
        if (!h->easy)
                die("curl", TG_ENOMEM);
}

static void run_http(void *ctx)
{
        struct http_ctx *h = ctx;
        static const char body[] = "{\"payment_id\":\"pay_1\",\"amount\":1500,\"currency\":\"TWD\","
                                   "\"reason\":\"requested_by_customer\"}";
        CURL *e = h->easy;

        curl_easy_setopt(e, CURLOPT_URL, h->url);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)(sizeof(body) - 1));
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_PROXY, "");
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, h->reuse ? 0L : 1L);
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, h->reuse ? 0L : 1L);
        if (curl_easy_perform(e) != CURLE_OK)
                die("the call", TG_ETRANSPORT);
}

static void http_teardown(void *ctx)
{
        struct http_ctx *h = ctx;

        curl_easy_cleanup(h->easy);
        shutdown(h->listen_fd, SHUT_RDWR);
        close(h->listen_fd);
        pthread_join(h->thread, NULL);
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {{"dir", required_argument, NULL, 'd'},
                                             {"n", required_argument, NULL, 'n'},
                                             {"pace-ms", required_argument, NULL, 'p'},
                                             {0, 0, 0, 0}};
        const char *dir = "/tmp";
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                if (c == 'd')
                        dir = optarg;
                else if (c == 'n')
                        n_rep = atoi(optarg);
                else if (c == 'p')
                        pace = atol(optarg);
                else {
                        fprintf(stderr, "usage: bench_floor [--dir DIR] [--n N] [--pace-ms MS]\n");
                        return 2;
                }
        }
        if (n_rep < 1 || pace < 0) {
                fprintf(stderr, BENCH_NAME ": --n must be >= 1 and --pace-ms >= 0\n");
                return 2;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);

        struct handoff ho;
        struct fsync_ctx fs;
        struct sql_ctx full = {.sync = "FULL"}, normal = {.sync = "NORMAL"};
        struct http_ctx fresh = {.reuse = false}, reused = {.reuse = true};
        memset(&ho, 0, sizeof(ho));
        memset(&fs, 0, sizeof(fs));
        snprintf(fs.path, sizeof(fs.path), "%s/bench_floor.%d.sync", dir, (int)getpid());
        snprintf(full.path, sizeof(full.path), "%s/bench_floor.%d.full.db", dir, (int)getpid());
        snprintf(normal.path, sizeof(normal.path), "%s/bench_floor.%d.normal.db", dir,
                 (int)getpid());

        struct part parts[] = {
            {"sleep", "a timed sleep and its wake-up (x2: hand-off, hook)", NULL, run_sleep, NULL,
             0, 0},
            {"handoff", "to another thread and back (x2: claim, outcome)", handoff_setup,
             run_handoff, handoff_teardown, 0, 0},
            {"fdatasync", "a 4 KiB pwrite and fdatasync", fsync_setup, run_fsync, fsync_teardown, 0,
             0},
            {"commit FULL", "SQLite WAL: 1 update + 1 insert (the claim)", sql_setup, run_sql,
             sql_teardown, 0, 0},
            {"commit NORMAL", "the same, synchronous=NORMAL (the outcome)", sql_setup, run_sql,
             sql_teardown, 0, 0},
            {"call, fresh", "libcurl POST, a fresh loopback connection", http_setup, run_http,
             http_teardown, 0, 0},
            {"call, reused", "libcurl POST, a kept connection", http_setup, run_http, http_teardown,
             0, 0},
        };
        void *ctxs[] = {NULL, &ho, &fs, &full, &normal, &fresh, &reused};
        size_t np = sizeof(parts) / sizeof(parts[0]);

        printf("%d repetitions each, %ld ms apart; files in %s\n", n_rep, pace, dir);
        printf("%-14s %12s %12s  %s\n", "part", "process us", "thread us", "what");
        for (size_t i = 0; i < np; i++) {
                measure(&parts[i], ctxs[i]);
                printf("%-14s %12.1f %12.1f  %s\n", parts[i].name, parts[i].process_us,
                       parts[i].thread_us, parts[i].what);
        }
        /* the least a start at a low rate does: 2 wake-ups, 2 hand-offs, the
         * claim's durable commit, the outcome's commit, one call */
        double floor_fresh = 2 * parts[0].process_us + 2 * parts[1].process_us +
                             parts[3].process_us + parts[4].process_us + parts[5].process_us;
        double floor_reused = floor_fresh - parts[5].process_us + parts[6].process_us;
        printf("floor of one start (2 sleep + 2 handoff + commit FULL + commit NORMAL + call):\n"
               "  fresh connection %.1f us, kept connection %.1f us of CPU\n",
               floor_fresh, floor_reused);
        curl_global_cleanup();
        return 0;
}
