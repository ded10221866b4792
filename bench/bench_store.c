/*
 * bench_store — how the SQLite store behaves with a large backlog. Prints
 * figures, never fails on a number.
 *
 *   bench_store [N [DIR]]     N pending operations (default 1,000,000),
 *                             in a fresh database under DIR (default /tmp)
 *
 * Measures:
 *   - the durable accept rate through store_accept (one fsync'd commit per
 *     accept, as intake does it), on a sample;
 *   - claim and claim+settle latency (p50/p99) with the first group at
 *     backlogs of 1k, 100k and N;
 *   - the again group's claim with 100k waiting operations, half of them due;
 *   - stats (counts by state + oldest open) and next_due query times;
 *   - opening it with store.check_on_start (PRAGMA quick_check of the whole
 *     file), what a daemon's start costs at that size;
 *   - file size and RSS.
 * Wall latencies of writes are mostly the fsync of each commit
 * (synchronous=FULL), so they follow the disk; the CPU time per claim+settle
 * pair is printed beside them to show what the queries themselves cost.
 *
 * Filling N rows one durable commit at a time would take most of an hour on
 * an ordinary disk (each commit waits for an fsync), so after the sample the
 * backlog is filled by one bulk INSERT ... SELECT over a second SQLite
 * connection, producing rows of the same shape store_accept writes. That
 * path knows the schema; it is the one place outside src/store that does.
 */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "store/store.h"

#define BENCH_NAME "bench_store"
#include "bench_store_util.h"
#include "bench_util.h"

#define SAMPLE_MAX  1000 /* durable accepts measured through store_accept */
#define SAMPLE_SECS 5.0
#define LOOPS       1000 /* claim+settle pairs per backlog size */
#define AGAIN_ROWS  100000

static double cpu_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long status_kb(const char *key)
{
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        long kb = -1;
        size_t n = strlen(key);

        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f)) {
                if (strncmp(line, key, n) == 0) {
                        kb = strtol(line + n, NULL, 10);
                        break;
                }
        }
        fclose(f);
        return kb;
}

static long long file_size(const char *path)
{
        struct stat st;

        return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* Rows [from, to) as store_accept would have written them, in one txn. */
static void bulk_fill(const char *path, int64_t from, int64_t to, const char *state,
                      int64_t due_every)
{
        sqlite3 *db = NULL;
        char sql[1600];
        char *err = NULL;

        if (sqlite3_open(path, &db) != SQLITE_OK) {
                fprintf(stderr, "bench_store: bulk open failed\n");
                exit(1);
        }
        sqlite3_busy_timeout(db, 5000);
        /* retry_wait rows: every due_every-th is due at T0, the rest far ahead */
        snprintf(sql, sizeof(sql),
                 "BEGIN IMMEDIATE;"
                 "WITH RECURSIVE n(i) AS (SELECT %" PRId64 " UNION ALL SELECT i + 1 FROM n"
                 " WHERE i + 1 < %" PRId64 ")"
                 " INSERT INTO operations (operation_id, payment_id, amount, currency, state,"
                 " attempts, attempt_limit, query_limit, accepted_at, deadline_at,"
                 " key_first_used, next_run_at, updated_at, source)"
                 " SELECT 'bench-' || i, 'pay-' || i, 1000 + i %% 5000, 'TWD', '%s',"
                 " CASE WHEN '%s' = 'pending' THEN 0 ELSE 1 END, 3, 10, %lld + i,"
                 " %lld + i + 900000, CASE WHEN '%s' = 'pending' THEN 0 ELSE %lld + i END,"
                 " CASE WHEN '%s' = 'pending' THEN 0"
                 "      WHEN i %% %" PRId64 " = 0 THEN %lld ELSE %lld END,"
                 " %lld + i, 'api' FROM n;"
                 "COMMIT;",
                 from, to, state, state, (long long)T0, (long long)T0, state, (long long)T0, state,
                 due_every, (long long)T0, (long long)T0 + 86400000LL, (long long)T0);
        if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
                fprintf(stderr, "bench_store: bulk fill: %s\n", err ? err : "?");
                exit(1);
        }
        sqlite3_close(db);
}

/* LOOPS claim+settle pairs from one group; prints p50/p99. */
static void claim_loop(struct store *s, enum store_group group, int64_t epoch, const char *label)
{
        static double claim_ms[LOOPS], pair_ms[LOOPS];
        double cpu0 = cpu_s();
        int n = 0;

        for (int i = 0; i < LOOPS; i++) {
                struct claim_args a;
                struct settle_args sa;
                struct op_record op;
                struct call_record call;
                double t0, t1, t2;
                int r;

                memset(&a, 0, sizeof(a));
                a.group = group;
                a.epoch = epoch;
                a.now = T0 + 1000;
                a.start_mono = i;
                a.in_flight_at_start = 1;
                snprintf(a.request_id, sizeof(a.request_id), "r%d", i);
                t0 = now_s();
                r = store_claim(s, &a, &op, &call);
                t1 = now_s();
                if (r == TG_ENOTFOUND)
                        break;
                if (r < 0)
                        die("claim", r);
                memset(&sa, 0, sizeof(sa));
                sa.call_id = call.id;
                sa.op_id = op.id;
                sa.epoch = epoch;
                sa.sent = true;
                sa.cls = TG_CLASS_SUCCEEDED;
                sa.http_status = 201;
                sa.now = T0 + 1001;
                sa.decision.next = OP_SUCCEEDED;
                r = store_settle(s, &sa);
                t2 = now_s();
                if (r < 0)
                        die("settle", r);
                claim_ms[n] = (t1 - t0) * 1e3;
                pair_ms[n] = (t2 - t0) * 1e3;
                n++;
        }
        if (n == 0) {
                printf("  %-34s nothing to claim\n", label);
                return;
        }
        qsort(claim_ms, (size_t)n, sizeof(double), cmp_double);
        qsort(pair_ms, (size_t)n, sizeof(double), cmp_double);
        printf("  %-38s claim p50 %6.3f ms p99 %6.3f ms | claim+settle p50 %6.3f ms p99 %6.3f "
               "ms | cpu %.3f ms/pair (%d loops)\n",
               label, pct(claim_ms, n, 0.5), pct(claim_ms, n, 0.99), pct(pair_ms, n, 0.5),
               pct(pair_ms, n, 0.99), (cpu_s() - cpu0) * 1e3 / n, n);
}

static void time_reads(struct store *s)
{
        struct store_stats st;
        tg_wall_ms next;
        bool pending;
        double t0, t1, t2;
        int r;

        t0 = now_s();
        r = store_stats(s, &st);
        t1 = now_s();
        if (r < 0)
                die("stats", r);
        r = store_next_due(s, &next, &pending);
        t2 = now_s();
        if (r < 0)
                die("next_due", r);
        printf("  stats (counts + oldest open)      %8.2f ms  (pending %" PRIu64
               ", oldest open %+" PRId64 " ms from T0)\n",
               (t1 - t0) * 1e3, st.by_state[OP_PENDING],
               (int64_t)(st.oldest_open_accepted_at - T0));
        printf("  next_due (min next_run_at + any)  %8.3f ms\n", (t2 - t1) * 1e3);
}

int main(int argc, char **argv)
{
        int64_t total = 1000000;
        const char *dir = "/tmp";
        char tmpl[512], db[600], url[640], wal[640], lock[640], shm[640];
        struct policy_config c;
        struct store *s = NULL;
        int64_t accepted = 0, claimed = 0, epoch = 0;
        double t0, t1;
        int r, sample;

        if (argc > 1) {
                char *end;

                total = strtoll(argv[1], &end, 10);
                if (*end != '\0' || total < 1000) {
                        fprintf(stderr, "usage: bench_store [N >= 1000 [DIR]]\n");
                        return 2;
                }
        }
        if (argc > 2)
                dir = argv[2];
        snprintf(tmpl, sizeof(tmpl), "%s/tg-bench-XXXXXX", dir);
        if (!mkdtemp(tmpl)) {
                perror("mkdtemp");
                return 1;
        }
        snprintf(db, sizeof(db), "%s/bench.db", tmpl);
        snprintf(url, sizeof(url), "sqlite://%s", db);
        snprintf(wal, sizeof(wal), "%s-wal", db);
        snprintf(shm, sizeof(shm), "%s-shm", db);
        snprintf(lock, sizeof(lock), "%s.owner", db);
        policy_config_default(&c);

        printf("bench_store: SQLite %s, %" PRId64 " pending operations, db %s\n",
               sqlite3_libversion(), total, db);
        r = store_open(url, &s);
        if (r < 0)
                die("open", r);
        r = store_owner_acquire(s, &epoch);
        if (r < 0)
                die("acquire", r);

        /* durable accepts through the interface */
        sample = 0;
        t0 = now_s();
        while (sample < SAMPLE_MAX && now_s() - t0 < SAMPLE_SECS) {
                accept_one(s, accepted++, &c);
                sample++;
        }
        t1 = now_s();
        printf("  accept (store_accept, durable)    %8.0f /s  (%d accepts, %.3f ms each)\n",
               sample / (t1 - t0), sample, (t1 - t0) * 1e3 / sample);

        /* backlog sizes: 1k, 100k, N (those below N) */
        int64_t sizes[3];
        int nsizes = 0;

        sizes[nsizes++] = 1000;
        if (total > 100000)
                sizes[nsizes++] = 100000;
        if (total > 1000)
                sizes[nsizes++] = total;
        for (int k = 0; k < nsizes; k++) {
                /* backlog = accepted - claimed; top it up to size + the loops */
                int64_t target = claimed + sizes[k] + LOOPS;
                char label[64];

                if (target > accepted) {
                        t0 = now_s();
                        bulk_fill(db, accepted, target, "pending", 1);
                        t1 = now_s();
                        printf("  bulk fill %9" PRId64 " rows          %8.2f s  (%.0f rows/s)\n",
                               target - accepted, t1 - t0, (target - accepted) / (t1 - t0));
                        accepted = target;
                }
                snprintf(label, sizeof(label), "first group, backlog %" PRId64 "->%" PRId64,
                         accepted - claimed, accepted - claimed - LOOPS);
                claim_loop(s, STORE_GROUP_FIRST, epoch, label);
                claimed += LOOPS;
                time_reads(s);
        }

        /* the again group: AGAIN_ROWS waiting, every 2nd due */
        t0 = now_s();
        bulk_fill(db, accepted, accepted + AGAIN_ROWS, "retry_wait", 2);
        t1 = now_s();
        printf("  bulk fill %9d retry_wait rows   %8.2f s\n", AGAIN_ROWS, t1 - t0);
        accepted += AGAIN_ROWS;
        claim_loop(s, STORE_GROUP_AGAIN, epoch, "again group, 100k waiting, half due");
        time_reads(s);
        {
                /* none due: answered from the earliest next_run_at alone */
                struct claim_args a;
                struct op_record op;
                struct call_record call;

                memset(&a, 0, sizeof(a));
                a.group = STORE_GROUP_AGAIN;
                a.epoch = epoch;
                a.now = T0 - 1;
                t0 = now_s();
                r = store_claim(s, &a, &op, &call);
                t1 = now_s();
                printf("  again claim, ~99k waiting, none due %6.3f ms (%s)\n", (t1 - t0) * 1e3,
                       r == TG_ENOTFOUND ? "not found, as expected" : tg_strerror(r));
        }

        store_close(s);
        {
                /* what store.check_on_start costs a daemon's start at this
                 * size (the page cache warm: just written) */
                char err[600] = "";
                const struct store_open_opts o = {
                    .err = err, .err_size = sizeof(err), .check = true};

                s = NULL;
                t0 = now_s();
                r = store_open_ex(url, &o, &s);
                t1 = now_s();
                printf("  open with check_on_start          %8.2f s   (%s)\n", t1 - t0,
                       r == 0 ? "PRAGMA quick_check: ok" : err);
                store_close(s);
        }
        printf("  file size                         %8.1f MB  (db %lld + wal %lld bytes)\n",
               (double)(file_size(db) + file_size(wal)) / 1e6, file_size(db), file_size(wal));
        printf("  RSS now %ld kB, peak %ld kB\n", status_kb("VmRSS:"), status_kb("VmHWM:"));

        unlink(wal);
        unlink(shm);
        unlink(lock);
        unlink(db);
        rmdir(tmpl);
        return 0;
}
