/*
 * bench_store_mysql — the server stores (MariaDB, PostgreSQL) beside the
 * SQLite one, through the store interface (the exit's own calls). Prints
 * figures, never fails on a number.
 *
 *   bench_store_mysql [URL [N [DIR]]]
 *       URL  a mysql:// or postgresql:// url whose user may create databases
 *            named after it (the bench uses "<db>_bench_<pid>", fresh);
 *            "" or none: both of TG_TEST_MYSQL_URL and TG_TEST_PG_URL that
 *            are set, one after the other;
 *       N    the large backlog (default 1,000,000);
 *       DIR  where the SQLite comparison database goes (default /tmp).
 *
 * Measures, on each backend in turn:
 *   - durable accepts/s through store_accept (one commit each);
 *   - claims/s and settles/s: LOOPS claim+settle pairs of the first group,
 *     each call timed on its own (p50/p99, and calls per second of one
 *     connection = 1 / mean);
 * and on the servers only:
 *   - claim latency (p50/p99) with N pending operations, the backlog filled
 *     by one INSERT ... SELECT over MariaDB's sequence engine or
 *     PostgreSQL's generate_series (rows of the shape store_accept writes;
 *     the one place outside src/store that knows the schema), and stats /
 *     next_due at that size.
 */
#include <inttypes.h>
#include <stdio.h>

#if defined(TG_HAVE_MARIADB) || defined(TG_HAVE_PG)
#ifdef TG_HAVE_MARIADB
#include <mysql.h>
#endif
#ifdef TG_HAVE_PG
#include <libpq-fe.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "store/store.h"

#define BENCH_NAME "bench_store_mysql"
#include "bench_store_util.h"
#include "bench_util.h"

#define DAY_MS      86400000LL
#define SAMPLE      2000 /* accepts */
#define LOOPS       2000 /* claim+settle pairs */
#define LARGE_LOOPS 1000

static double mean(const double *v, int n)
{
        double sum = 0;

        for (int i = 0; i < n; i++)
                sum += v[i];
        return n > 0 ? sum / n : 0;
}

/* claim+settle pairs; claim and settle latencies (ms) into the arrays. */
static int claim_settle(struct store *s, int64_t epoch, int loops, tg_wall_ms now, double *claims,
                        double *settles)
{
        int n = 0;

        for (int i = 0; i < loops; i++) {
                struct claim_args a;
                struct op_record op;
                struct call_record call;
                struct settle_args sa;
                double t0, t1, t2;
                int r;

                memset(&a, 0, sizeof(a));
                a.group = STORE_GROUP_FIRST;
                a.epoch = epoch;
                a.now = now + i;
                a.start_mono = (tg_mono_ns)i * 1000;
                a.in_flight_at_start = 1;
                snprintf(a.request_id, sizeof(a.request_id), "bench-%d", i);
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
                sa.end_mono = call.start_mono + 1000;
                sa.now = a.now;
                sa.decision.next = OP_SUCCEEDED;
                r = store_settle(s, &sa);
                t2 = now_s();
                if (r < 0)
                        die("settle", r);
                claims[n] = (t1 - t0) * 1e3;
                settles[n] = (t2 - t1) * 1e3;
                n++;
        }
        return n;
}

static void print_lat(const char *name, double *v, int n)
{
        double m = mean(v, n);

        qsort(v, (size_t)n, sizeof(*v), cmp_double);
        printf("  %-8s %6d calls  p50 %7.3f ms  p99 %7.3f ms  mean %7.3f ms  = %7.0f /s\n", name, n,
               pct(v, n, 0.50), pct(v, n, 0.99), m, m > 0 ? 1e3 / m : 0);
}

/* accepts/s, then claims/s and settles/s over what was accepted. */
static void small_run(const char *label, const char *url)
{
        struct policy_config c;
        struct store *s = NULL;
        double *claims = calloc(LOOPS, sizeof(double));
        double *settles = calloc(LOOPS, sizeof(double));
        int64_t epoch = 0;
        double t0, dt;
        int r, n;

        if (!claims || !settles)
                die("calloc", TG_ENOMEM);
        policy_config_default(&c);
        c.deadline_ms = 30 * DAY_MS;
        r = store_open(url, &s);
        if (r < 0)
                die("open", r);
        printf("%s (%s)\n", label, store_url(s));
        t0 = now_s();
        for (int i = 0; i < SAMPLE; i++)
                accept_one(s, i, &c);
        dt = now_s() - t0;
        printf("  accept   %6d calls  %.0f /s (one commit each)\n", SAMPLE, SAMPLE / dt);
        r = store_owner_acquire(s, &epoch);
        if (r < 0)
                die("acquire", r);
        n = claim_settle(s, epoch, LOOPS, T0 + SAMPLE, claims, settles);
        print_lat("claim", claims, n);
        print_lat("settle", settles, n);
        store_close(s);
        free(claims);
        free(settles);
}

/* The INSERT of N pending rows as store_accept writes them, numbered by
 * `seq` of `from` (a row source both servers name differently; CONCAT is
 * both dialects'). */
static void bulk_sql(char *sql, size_t size, const char *from)
{
        snprintf(sql, size,
                 "INSERT INTO operations (operation_id, payment_id, amount, currency, state, "
                 "attempt_limit, query_limit, accepted_at, deadline_at, updated_at, source) "
                 "SELECT CONCAT('bulk-', seq), CONCAT('pay-', seq), 1000 + seq %% 5000, 'TWD', "
                 "'pending', 3, 20, %lld + seq, %lld + seq + %lld, %lld + seq, 'api' FROM %s",
                 (long long)(T0 + DAY_MS), (long long)(T0 + DAY_MS), (long long)(30 * DAY_MS),
                 (long long)(T0 + DAY_MS), from);
}

#ifdef TG_HAVE_MARIADB
/* Fills N pending rows with one INSERT ... SELECT over seq_1_to_N. */
static void bulk_fill_mysql(const char *url, int64_t total)
{
        char user[128] = "", pass[256] = "", host[256] = "", db[80] = "";
        unsigned port = 3306;
        char sql[1600], from[80];
        MYSQL *m = mysql_init(NULL);
        const char *p = url + strlen("mysql://");

        /* user:pass@host:port/db, as the bench's own url (no escapes) */
        if (sscanf(p, "%127[^:]:%255[^@]@%255[^:]:%u/%79s", user, pass, host, &port, db) != 5) {
                fprintf(stderr, "bench_store_mysql: bulk fill needs user:pass@host:port/db\n");
                exit(1);
        }
        if (!m || !mysql_real_connect(m, host, user, pass, db, port, NULL, 0)) {
                fprintf(stderr, "bench_store_mysql: connect: %s\n", m ? mysql_error(m) : "?");
                exit(1);
        }
        snprintf(from, sizeof(from), "seq_1_to_%lld", (long long)total);
        bulk_sql(sql, sizeof(sql), from);
        if (mysql_query(m, sql) != 0) {
                fprintf(stderr, "bench_store_mysql: bulk fill: %s\n", mysql_error(m));
                exit(1);
        }
        mysql_close(m);
}
#endif

#ifdef TG_HAVE_PG
/* Fills N pending rows with one INSERT ... SELECT over generate_series
 * (libpq reads the url itself). */
static void bulk_fill_pg(const char *url, int64_t total)
{
        char sql[1600], from[80];
        PGconn *c = PQconnectdb(url);
        PGresult *res;

        if (!c || PQstatus(c) != CONNECTION_OK) {
                fprintf(stderr, "bench_store_mysql: connect: %s\n", c ? PQerrorMessage(c) : "?");
                exit(1);
        }
        snprintf(from, sizeof(from), "generate_series(1, %lld) AS seq", (long long)total);
        bulk_sql(sql, sizeof(sql), from);
        res = PQexec(c, sql);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) {
                fprintf(stderr, "bench_store_mysql: bulk fill: %s\n", PQerrorMessage(c));
                exit(1);
        }
        PQclear(res);
        /* the planner's figures for the backlog, as autovacuum would make them */
        res = PQexec(c, "ANALYZE operations");
        PQclear(res);
        PQfinish(c);
}
#endif

static void bulk_fill(const char *url, int64_t total)
{
#ifdef TG_HAVE_MARIADB
        if (strncmp(url, "mysql://", 8) == 0) {
                bulk_fill_mysql(url, total);
                return;
        }
#endif
#ifdef TG_HAVE_PG
        bulk_fill_pg(url, total);
#else
        (void)total;
        fprintf(stderr, "bench_store_mysql: no bulk fill for %s\n", url);
        exit(1);
#endif
}

static void large_run(const char *url, int64_t total)
{
        struct store *s = NULL;
        struct store_stats st;
        double *claims = calloc(LARGE_LOOPS, sizeof(double));
        double *settles = calloc(LARGE_LOOPS, sizeof(double));
        int64_t epoch = 0;
        tg_wall_ms next;
        bool pending;
        double t0, dt;
        int r, n;

        if (!claims || !settles)
                die("calloc", TG_ENOMEM);
        r = store_open(url, &s); /* creates the schema */
        if (r < 0)
                die("open", r);
        t0 = now_s();
        bulk_fill(url, total);
        dt = now_s() - t0;
        printf("%s, %" PRId64 " pending (bulk fill %.1f s)\n", store_backend(s), total, dt);
        r = store_owner_acquire(s, &epoch);
        if (r < 0)
                die("acquire", r);
        n = claim_settle(s, epoch, LARGE_LOOPS, T0 + 2 * DAY_MS, claims, settles);
        print_lat("claim", claims, n);
        print_lat("settle", settles, n);
        t0 = now_s();
        r = store_stats(s, &st);
        dt = now_s() - t0;
        if (r < 0)
                die("stats", r);
        printf("  stats    %.1f ms (counts by state + oldest open)\n", dt * 1e3);
        t0 = now_s();
        r = store_next_due(s, &next, &pending);
        dt = now_s() - t0;
        if (r < 0)
                die("next_due", r);
        printf("  next_due %.3f ms\n", dt * 1e3);
        store_close(s);
        free(claims);
        free(settles);
}

static bool server_url(const char *url)
{
        return url && (strncmp(url, "mysql://", 8) == 0 || strncmp(url, "postgresql://", 13) == 0 ||
                       strncmp(url, "postgres://", 11) == 0);
}

int main(int argc, char **argv)
{
        const char *given = argc > 1 && argv[1][0] ? argv[1] : NULL;
        const char *bases[2] = {given, NULL};
        const char *dir = argc > 3 ? argv[3] : "/tmp";
        int64_t total = 1000000;
        char url[600], sqlite_url[600];

        if (!given) {
                bases[0] = getenv("TG_TEST_MYSQL_URL");
                bases[1] = getenv("TG_TEST_PG_URL");
        }
        if ((given && !server_url(given)) ||
            (!given && !server_url(bases[0]) && !server_url(bases[1]))) {
                fprintf(stderr, "usage: bench_store_mysql [mysql://user:pass@host:port/db | "
                                "postgresql://user:pass@host:port/db [N [DIR]]]\n");
                return 2;
        }
        if (argc > 2) {
                char *end;

                total = strtoll(argv[2], &end, 10);
                if (*end != '\0' || total < 1) {
                        fprintf(stderr, "bench_store_mysql: N must be a positive number\n");
                        return 2;
                }
        }
        snprintf(sqlite_url, sizeof(sqlite_url), "sqlite://%s/tg-bench-mysql-%ld.db", dir,
                 (long)getpid());
        small_run("sqlite", sqlite_url);
        for (int i = 0; i < 2; i++) {
                const char *base = bases[i];

                if (!server_url(base))
                        continue;
                snprintf(url, sizeof(url), "%s_bench_%ld_s", base, (long)getpid());
                small_run(strncmp(base, "mysql://", 8) == 0 ? "mysql" : "postgresql", url);
                snprintf(url, sizeof(url), "%s_bench_%ld_l", base, (long)getpid());
                large_run(url, total);
        }
        printf("(databases *_bench_%ld_s and _l, and %s, are left for inspection)\n",
               (long)getpid(), sqlite_url + strlen("sqlite://"));
        return 0;
}

#else /* built without MariaDB Connector/C and libpq */

int main(void)
{
        fprintf(stderr, "bench_store_mysql: built without MariaDB Connector/C and libpq\n");
        return 2;
}

#endif
