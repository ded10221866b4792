/*
 * bench_lifecycle — what history costs: a /metrics scrape at growing sizes of
 * final history, and a prune of it. Prints figures, never fails on a number.
 *
 *   bench_lifecycle [URL]     default: sqlite:///tmp/tg-bench-life-<pid>.db
 *                             (a mysql:// url to a database that does not
 *                             exist yet works too: it is created, filled and
 *                             left for you to drop)
 *
 * For sizes 10, 100,000, 1,000,000 and 10,000,000 final operations (one call
 * each; 100 pending and 20 manual cases with their audit rows on top), it
 * times the whole GET /metrics handler (api_handle, as a scrape runs it: the
 * store's counts, the exit's samples, the page), median of 21 scrapes, and
 * beside it the query the handler ran before the counters ("SELECT state,
 * COUNT(*) ... GROUP BY state" plus a count of the call log). Then it prunes
 * the first 1,000,000 final operations (store_prune, batches of 500, as
 * `tollgate prune` does) and reports the rate, and checks that the manual
 * cases and every audit row are still there.
 *
 * Filling millions of rows through store_accept and claims would take hours
 * (a durable commit each), so history is written by bulk INSERT ... SELECT
 * over the backend's own client, rows of the shape the store writes, and the
 * counters set to match: the one place outside src/store that knows the
 * schema, like bench_store.c.
 */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef TG_HAVE_MARIADB
#include <mysql.h>
#endif

#include "core/tg_error.h"
#include "daemon/api.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "net/http_server.h"
#include "store/store.h"

#define BENCH_NAME "bench_lifecycle"
#include "bench_util.h"

#define T0      1600000000000LL /* history: long ago */
#define SCRAPES 21

static const long long sizes[] = {10, 100000, 1000000, 10000000};

/* ---- bulk history, per backend ------------------------------------------------ */

struct raw {
        bool mysql;
        sqlite3 *lite;
#ifdef TG_HAVE_MARIADB
        MYSQL *my;
#endif
};

static void raw_exec(struct raw *r, const char *sql)
{
        if (!r->mysql) {
                char *err = NULL;
                if (sqlite3_exec(r->lite, sql, NULL, NULL, &err) != SQLITE_OK) {
                        fprintf(stderr, "bench_lifecycle: %s\n  %s\n", err ? err : "?", sql);
                        exit(1);
                }
                return;
        }
#ifdef TG_HAVE_MARIADB
        if (mysql_query(r->my, sql) != 0) {
                fprintf(stderr, "bench_lifecycle: %s\n  %.300s\n", mysql_error(r->my), sql);
                exit(1);
        }
        MYSQL_RES *res = mysql_store_result(r->my);
        if (res)
                mysql_free_result(res);
#endif
}

/* One row count from a query, timed (the old scrape's query). */
static double raw_time(struct raw *r, const char *sql)
{
        double t = now_s();

        if (!r->mysql) {
                sqlite3_stmt *st = NULL;
                if (sqlite3_prepare_v2(r->lite, sql, -1, &st, NULL) != SQLITE_OK)
                        die("prepare", TG_ESTORE);
                while (sqlite3_step(st) == SQLITE_ROW)
                        ;
                sqlite3_finalize(st);
        } else {
                raw_exec(r, sql);
        }
        return (now_s() - t) * 1000.0;
}

/* One integer from a one-row query. */
static long long raw_count(struct raw *r, const char *sql)
{
        long long n = -1;

        if (!r->mysql) {
                sqlite3_stmt *st = NULL;
                if (sqlite3_prepare_v2(r->lite, sql, -1, &st, NULL) == SQLITE_OK &&
                    sqlite3_step(st) == SQLITE_ROW)
                        n = sqlite3_column_int64(st, 0);
                sqlite3_finalize(st);
                return n;
        }
#ifdef TG_HAVE_MARIADB
        if (mysql_query(r->my, sql) == 0) {
                MYSQL_RES *res = mysql_store_result(r->my);
                MYSQL_ROW row = res ? mysql_fetch_row(res) : NULL;
                if (row && row[0])
                        n = strtoll(row[0], NULL, 10);
                if (res)
                        mysql_free_result(res);
        }
#endif
        return n;
}

static void raw_open(struct raw *r, const char *url)
{
        memset(r, 0, sizeof(*r));
        if (strncmp(url, "sqlite://", 9) == 0) {
                if (sqlite3_open(url + 9, &r->lite) != SQLITE_OK)
                        die("sqlite3_open", TG_EIO);
                raw_exec(r, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
                return;
        }
#ifdef TG_HAVE_MARIADB
        /* mysql://user:pass@host:port/db (no parameters here) */
        char user[128] = "", pass[128] = "", host[128] = "", db[128] = "";
        unsigned port = 3306;
        const char *p = url + 8, *at = strrchr(p, '@'), *colon = strchr(p, ':');
        const char *slash = at ? strchr(at, '/') : NULL, *pc = at ? strchr(at, ':') : NULL;
        if (!at || !slash)
                die("mysql url", TG_EINVAL);
        snprintf(user, sizeof(user), "%.*s", (int)((colon && colon < at ? colon : at) - p), p);
        if (colon && colon < at)
                snprintf(pass, sizeof(pass), "%.*s", (int)(at - colon - 1), colon + 1);
        snprintf(host, sizeof(host), "%.*s", (int)((pc && pc < slash ? pc : slash) - at - 1),
                 at + 1);
        if (pc && pc < slash)
                port = (unsigned)strtoul(pc + 1, NULL, 10);
        snprintf(db, sizeof(db), "%s", slash + 1);
        r->mysql = true;
        r->my = mysql_init(NULL);
        if (!mysql_real_connect(r->my, host, user, pass, db, port, NULL, 0)) {
                fprintf(stderr, "bench_lifecycle: %s\n", mysql_error(r->my));
                exit(1);
        }
#else
        die("mysql", TG_EUNSUPPORTED);
#endif
}

/* Final operations [from, to), one call each, finished at T0 + i ms. */
static void fill(struct raw *r, long long from, long long to)
{
        char sql[4096];

        if (from >= to)
                return;
        if (!r->mysql) {
                snprintf(
                    sql, sizeof(sql),
                    "BEGIN IMMEDIATE;"
                    "WITH RECURSIVE n(i) AS (SELECT %lld UNION ALL SELECT i + 1 FROM n"
                    " WHERE i + 1 < %lld)"
                    " INSERT INTO operations (operation_id, payment_id, amount, currency, state,"
                    " attempts, attempt_limit, query_limit, accepted_at, deadline_at,"
                    " key_first_used, updated_at, source, last_class)"
                    " SELECT 'h-' || i, 'pay-' || i, 1000, 'TWD',"
                    " CASE WHEN i %% 10 = 0 THEN 'rejected' ELSE 'succeeded' END, 1, 3, 10,"
                    " %lld + i, %lld + i + 900000, %lld + i, %lld + i, 'api', 'succeeded'"
                    " FROM n;"
                    "INSERT INTO calls (op_id, operation_id, kind, attempt, request_id, epoch,"
                    " start_mono, start_wall, in_flight_at_start, ended, end_wall, sent, cls,"
                    " http_status, latency_us)"
                    " SELECT id, operation_id, 'first', 1, 'r-' || id, 1, 0, accepted_at, 1, 1,"
                    " accepted_at + 50, 1, 'succeeded', 201, 50000 FROM operations"
                    " WHERE operation_id >= 'h-' AND id >= (SELECT coalesce(max(op_id), 0)"
                    " + 1 FROM calls) AND operation_id LIKE 'h-%%';"
                    "COMMIT;",
                    from, to, T0, T0, T0, T0);
                raw_exec(r, sql);
                return;
        }
        /* MariaDB: the sequence engine gives the numbers */
        for (long long a = from; a < to; a += 1000000) {
                long long b = a + 1000000 < to ? a + 1000000 : to;
                snprintf(
                    sql, sizeof(sql),
                    "INSERT INTO operations (operation_id, payment_id, amount, currency, state,"
                    " attempts, attempt_limit, query_limit, accepted_at, deadline_at,"
                    " key_first_used, updated_at, source, last_class)"
                    " SELECT CONCAT('h-', seq), CONCAT('pay-', seq), 1000, 'TWD',"
                    " IF(seq %% 10 = 0, 'rejected', 'succeeded'), 1, 3, 10, %lld + seq,"
                    " %lld + seq + 900000, %lld + seq, %lld + seq, 'api', 'succeeded'"
                    " FROM seq_%lld_to_%lld",
                    T0, T0, T0, T0, a, b - 1);
                raw_exec(r, sql);
        }
        snprintf(
            sql, sizeof(sql),
            "INSERT INTO calls (op_id, operation_id, kind, attempt, request_id, epoch,"
            " start_mono, start_wall, in_flight_at_start, ended, end_wall, sent, cls,"
            " http_status, latency_us)"
            " SELECT o.id, o.operation_id, 'first', 1, CONCAT('r-', o.id), 1, 0, o.accepted_at,"
            " 1, 1, o.accepted_at + 50, 1, 'succeeded', 201, 50000 FROM operations o"
            " WHERE o.id > (SELECT COALESCE(MAX(op_id), 0) FROM calls)"
            " AND o.operation_id LIKE 'h-%%'");
        raw_exec(r, sql);
}

/* The counters as the store keeps them, set from the rows (once per size:
 * the bulk fill wrote no counter). */
static void sync_counters(struct raw *r)
{
        raw_exec(r, "UPDATE counters SET n = (SELECT COUNT(*) FROM operations WHERE state = "
                    "'succeeded') WHERE name = 'succeeded'");
        raw_exec(r, "UPDATE counters SET n = (SELECT COUNT(*) FROM operations WHERE state = "
                    "'rejected') WHERE name = 'rejected'");
        raw_exec(r, "UPDATE counters SET n = (SELECT COUNT(*) FROM calls) WHERE name = 'calls'");
}

/* ---- the scrape ------------------------------------------------------------------------ */

static double scrape_ms(struct api *api)
{
        double ms[SCRAPES];

        for (int i = 0; i < SCRAPES; i++) {
                struct http_request req = {.method = "GET", .path = "/metrics", .query = ""};
                struct http_response res;
                double t = now_s();

                http_response_init(&res);
                if (api_handle(api, &req, &res) < 0 || res.status != 200)
                        die("GET /metrics", TG_ESTORE);
                ms[i] = (now_s() - t) * 1000.0;
                http_response_release(&res);
        }
        qsort(ms, SCRAPES, sizeof(ms[0]), cmp_double);
        return ms[SCRAPES / 2];
}

int main(int argc, char **argv)
{
        char url[600];
        struct tg_config *cfg = calloc(1, sizeof(*cfg));
        struct policy_config limits;
        struct store *s = NULL;
        struct api *api = NULL;
        struct raw raw;
        long long have = 0, max_size = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
        int r;

        if (argc > 1)
                snprintf(url, sizeof(url), "%s", argv[1]);
        else
                snprintf(url, sizeof(url), "sqlite:///tmp/tg-bench-life-%ld.db", (long)getpid());
        if (argc > 2)
                max_size = strtoll(argv[2], NULL, 10);
        log_set_level(LOG_ERROR); /* one line a scrape otherwise */
        config_defaults(cfg);
        snprintf(cfg->store_url, sizeof(cfg->store_url), "%s", url);
        policy_config_default(&limits);
        r = store_open(url, &s);
        if (r < 0)
                die("store_open", r);
        /* the open backlog and the manual cases (with audit rows), through the store */
        for (int i = 0; i < 100; i++) {
                struct refund_request q = {.amount = 100};
                struct op_record op;
                bool created;
                snprintf(q.operation_id, sizeof(q.operation_id), "open-%d", i);
                snprintf(q.payment_id, sizeof(q.payment_id), "p-%d", i);
                snprintf(q.currency, sizeof(q.currency), "TWD");
                r = store_accept(s, &q, T0 + 1000000000LL, &limits, &created, &op);
                if (r < 0)
                        die("accept", r);
        }
        raw_open(&raw, url);
        raw_exec(&raw, "UPDATE operations SET state = 'manual', reason = 'deadline', "
                       "updated_at = 0 WHERE operation_id IN ('open-0','open-1','open-2','open-3',"
                       "'open-4','open-5','open-6','open-7','open-8','open-9','open-10','open-11',"
                       "'open-12','open-13','open-14','open-15','open-16','open-17','open-18',"
                       "'open-19')");
        raw_exec(&raw, "INSERT INTO audit (op_id, at, action, operator_name, reason, detail) "
                       "SELECT id, 1, 'event', 'tollgate', 'deadline', 'bench' FROM operations "
                       "WHERE state = 'manual'");
        r = api_new(cfg, &api);
        if (r < 0)
                die("api_new", r);
        printf("bench_lifecycle on %s\n", store_url(s));
        printf("%12s  %14s  %22s\n", "final ops", "GET /metrics", "before (GROUP BY+COUNT)");
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && sizes[k] <= max_size; k++) {
                double t = now_s(), old;
                fill(&raw, have, sizes[k]);
                sync_counters(&raw);
                have = sizes[k];
                double fill_s = now_s() - t;
                old = raw_time(&raw, "SELECT state, COUNT(*) FROM operations GROUP BY state") +
                      raw_time(&raw, "SELECT COUNT(*) FROM calls");
                printf("%12lld  %11.2f ms  %19.1f ms   (filled in %.0f s)\n", have, scrape_ms(api),
                       old, fill_s);
                fflush(stdout);
        }

        /* prune the oldest 1,000,000 (or all there are) */
        {
                struct store_prune_cursor cur;
                struct store_prune_result res = {0};
                struct store_stats st;
                long long n = have < 1000000 ? have : 1000000;
                double t = now_s();

                memset(&cur, 0, sizeof(cur));
                r = store_prune(s, T0 + n, 500, 0, &cur, &res);
                if (r < 0)
                        die("store_prune", r);
                t = now_s() - t;
                printf("prune: %llu operations and %llu calls in %.1f s (%.0f operations/s, "
                       "batches of 500)\n",
                       (unsigned long long)res.operations, (unsigned long long)res.calls, t,
                       (double)res.operations / t);
                r = store_stats(s, &st);
                if (r < 0)
                        die("store_stats", r);
                printf("after: manual %llu (expected 20), pending %llu (80), pruned_total %llu, "
                       "audit rows %lld (20)\n",
                       (unsigned long long)st.by_state[OP_MANUAL],
                       (unsigned long long)st.by_state[OP_PENDING],
                       (unsigned long long)st.pruned_operations,
                       raw_count(&raw, "SELECT COUNT(*) FROM audit"));
                printf("after: GET /metrics %.2f ms\n", scrape_ms(api));
        }
        api_stop(api);
        store_close(s);
        if (!raw.mysql) {
                sqlite3_close(raw.lite);
                printf("(left %s for a look; delete it)\n", url + 9);
        }
        free(cfg);
        return 0;
}
