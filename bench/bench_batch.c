/*
 * bench_batch — refunds accepted per second, one POST /v1/refunds each vs
 * POST /v1/refunds:batch, on SQLite and (when a server is given) MariaDB.
 * Prints figures, never fails on a number.
 *
 *   bench_batch [N [MYSQL_URL]]   N refunds per mode (default 5000);
 *                                 MYSQL_URL or $TG_TEST_MYSQL_URL: a
 *                                 mysql:// url whose user may create the
 *                                 databases named after it (each mode gets
 *                                 a fresh one, left for you to drop; the
 *                                 SQLite files in $TMPDIR are removed)
 *
 * Each mode drives the API's handler (api_handle, as the HTTP thread runs
 * it: authentication, parse, validation, admission, the durable commit, the
 * answer) on a fresh store with N new refunds, back to back from one
 * caller, and times the whole: singles (a commit each), then batches of 50
 * and of 500 (a commit per batch, api/api_batch.c). What the socket adds
 * (one request instead of N) comes on top in a real client's favour; the
 * figures here are the intake's own cost per refund. Every answer is
 * checked to be what it must be (202 per refund), and the store's count of
 * operations afterwards, so a fast wrong run cannot pass for a result.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "daemon/api.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "net/http_server.h"
#include "store/store.h"

#define BENCH_NAME "bench_batch"
#include "bench_util.h"

#define ITEM_MAX 160

static int item(char *out, size_t size, const char *run, long i)
{
        return snprintf(out, size,
                        "{\"operation_id\":\"%s-%ld\",\"payment_id\":\"pay-%ld\","
                        "\"amount\":%ld,\"currency\":\"EUR\"}",
                        run, i, i, 100 + i % 1000);
}

/* One request through the handler; its status, or dies. */
static int handle(struct api *api, const char *path, const char *body, size_t len)
{
        struct http_request req = {
            .method = "POST", .path = path, .query = "", .body = body, .body_len = len};
        struct http_response res;
        int status;

        http_response_init(&res);
        if (api_handle(api, &req, &res) < 0)
                die("api_handle", TG_EIO);
        status = res.status;
        if (status != 202 && status != 200) {
                fprintf(stderr, BENCH_NAME ": %s answered %d: %.*s\n", path, status,
                        (int)res.body_len, res.body ? res.body : "");
                exit(1);
        }
        /* a batch answers 200 with one result per item: all must be 202 */
        if (strcmp(path, "/v1/refunds:batch") == 0 && res.body &&
            strstr(res.body, "\"errors\":true"))
                die("a batch item was refused", TG_EIO);
        http_response_release(&res);
        return status;
}

static uint64_t stored(const char *url)
{
        struct store *s = NULL;
        struct store_stats st;
        uint64_t n = 0;

        if (store_open(url, &s) < 0 || store_stats(s, &st) < 0)
                die("store_stats", TG_EIO);
        for (int i = 0; i < OP_STATE_COUNT; i++)
                n += st.by_state[i];
        store_close(s);
        return n;
}

/* N refunds in requests of `per` (1: POST /v1/refunds each); refunds/s. */
static double run(const char *url, long n, long per)
{
        struct tg_config *cfg = calloc(1, sizeof(*cfg));
        char *body = malloc((size_t)per * ITEM_MAX + 32);
        char tag[32];
        struct api *api = NULL;
        double t0, dt;
        int r;

        if (!cfg || !body)
                die("malloc", TG_ENOMEM);
        config_defaults(cfg);
        snprintf(cfg->store_url, sizeof(cfg->store_url), "%s", url);
        /* admission runs, and admits: a backlog and an exit rate it fits */
        cfg->admission.max_backlog = 10 * n;
        cfg->exit.starts_per_second = 1e6;
        r = api_new(cfg, &api);
        if (r < 0)
                die("api_new", r);
        snprintf(tag, sizeof(tag), "b%ld", per);
        t0 = now_s();
        for (long i = 0; i < n; i += per) {
                size_t len = 0;
                if (per == 1) {
                        len = (size_t)item(body, ITEM_MAX, tag, i);
                        if (handle(api, "/v1/refunds", body, len) != 202)
                                die("a single refund was not new", TG_EIO);
                        continue;
                }
                len += (size_t)snprintf(body, 32, "{\"refunds\":[");
                for (long k = i; k < i + per && k < n; k++) {
                        if (k > i)
                                body[len++] = ',';
                        len += (size_t)item(body + len, ITEM_MAX, tag, k);
                }
                len += (size_t)snprintf(body + len, 3, "]}");
                handle(api, "/v1/refunds:batch", body, len);
        }
        dt = now_s() - t0;
        api_stop(api);
        if (stored(url) != (uint64_t)n)
                die("the store does not hold every refund", TG_EIO);
        free(body);
        free(cfg);
        return (double)n / dt;
}

static void store_row(const char *name, const char *base, long n, bool mysql)
{
        static const long pers[] = {1, 50, 500};
        double rate[3];

        for (int i = 0; i < 3; i++) {
                char url[512];
                if (mysql)
                        snprintf(url, sizeof(url), "%s_batch_%ld_%d_%d", base, (long)getpid(),
                                 (int)pers[i], i);
                else
                        snprintf(url, sizeof(url), "sqlite://%s/tg-bench-batch-%ld-%d.db", base,
                                 (long)getpid(), i);
                rate[i] = run(url, n, pers[i]);
                for (int k = 0; !mysql && k < 3; k++) {
                        static const char *const tails[] = {"", "-wal", "-shm"};
                        char path[512];
                        snprintf(path, sizeof(path), "%s%s", url + strlen("sqlite://"), tails[k]);
                        unlink(path);
                }
        }
        printf("| %s | %.0f | %.0f (x%.1f) | %.0f (x%.1f) |\n", name, rate[0], rate[1],
               rate[1] / rate[0], rate[2], rate[2] / rate[0]);
        fflush(stdout);
}

int main(int argc, char **argv)
{
        long n = argc > 1 ? strtol(argv[1], NULL, 10) : 5000;
        const char *mysql = argc > 2 ? argv[2] : getenv("TG_TEST_MYSQL_URL");
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

        if (n <= 0 || n > 10000000) {
                fprintf(stderr, "usage: bench_batch [N [mysql://...]]\n");
                return 2;
        }
        log_set_level(LOG_ERROR); /* one line a request otherwise */
        printf("bench_batch: %ld new refunds per mode, through api_handle, one caller\n\n", n);
        printf("| store | single (refunds/s) | batch of 50 | batch of 500 |\n|---|---|---|---|\n");
        store_row("SQLite (WAL, FULL)", dir, n, false);
        if (mysql && strncmp(mysql, "mysql://", 8) == 0)
                store_row("MariaDB (InnoDB)", mysql, n, true);
        else
                printf("(MariaDB: no url given, and TG_TEST_MYSQL_URL is not set)\n");
        return 0;
}
