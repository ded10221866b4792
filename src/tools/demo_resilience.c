/*
 * tollgate demo resilience — seed 002's four scenarios with real, measured
 * times: (a) no timeout waits the dependency's full delay; (b) a 30 ms
 * timeout stops near 30 ms and releases the connection (the far side still
 * executes); (c) exponential backoff with jitter on 503s until success, each
 * wait drawn by core/backoff and printed; (d) a refund whose answer is lost:
 * retried without an idempotency key it executes twice, with one key once.
 * Each prints the seed's finding format (問題/證據/觸發條件/影響/驗證/結果/修正).
 *
 * This command talks to a provider outside the exit ON PURPOSE, to show what
 * the exit exists to prevent. It only ever targets a tollgate-stub it started
 * itself on 127.0.0.1 (found next to this binary) and stops before returning.
 * Its HTTP is libcurl's easy interface, one fresh connection per request
 * (tool_util): this is a demo, not the exit, and it shares none of the
 * exit's transport.
 *
 * "No idempotency" is simulated: the stub requires an Idempotency-Key on
 * every POST, so scenario (d) sends a fresh key per try, which is exactly
 * what a client without idempotency does in effect; the output says so.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backoff.h"
#include "core/rng.h"
#include "core/tg_error.h"
#include "net/http_client.h"
#include "platform/options.h"
#include "tools/tool_util.h"
#include "tools/tools.h"

#define SLOW_MS     120
#define TIMEOUT_MS  30
#define FAIL_FIRST  2 /* scenario (c): 503 for the first tries */
#define MAX_RETRIES 6

static const char resilience_about[] =
    "Seed 002's four scenarios against a tollgate-stub started here on loopback: (a) no timeout: "
    "the caller waits the dependency's full 120 ms; (b) a 30 ms timeout: the caller stops near "
    "30 ms and releases the connection; (c) exponential backoff with full jitter on 503 until "
    "success, each wait printed; (d) a refund whose answer is lost: retried without an "
    "idempotency key (a fresh key per try) it executes twice; with one key, once (the stub's "
    "ledger).\n\n"
    "Times are measured. This talks to the stub outside the exit on purpose; it never targets "
    "anything but the stub it started.";

struct demo {
        struct tool_proc stub;
        char url[64];
        uint64_t seed;
};

static void finding(const char *problem, const char *evidence, const char *trigger,
                    const char *impact, const char *result, const char *fix)
{
        printf("  Problem (問題):        %s\n", problem);
        printf("  Evidence (證據):       %s\n", evidence);
        printf("  Trigger (觸發條件):    %s\n", trigger);
        printf("  Impact (影響):         %s\n", impact);
        printf("  Verification (驗證):   tollgate demo resilience\n");
        printf("  Result (結果):         %s\n", result);
        printf("  Fix (修正):            %s\n\n", fix);
}

static int set_mode(struct demo *d, const char *mode)
{
        char url[96], body[128];
        struct http_client_result res = {0};
        static const char *const hdrs[] = {"Content-Type: application/json", NULL};
        snprintf(url, sizeof(url), "%s/_stub/mode", d->url);
        snprintf(body, sizeof(body), "{\"mode\":\"%s\"}", mode);
        if (http_client_request(&(struct http_client_request){.method = "POST",
                                                              .url = url,
                                                              .headers = hdrs,
                                                              .body = body,
                                                              .timeout_ms = 2000},
                                &res) < 0 ||
            res.status != 200)
                return TG_EIO;
        return 0;
}

static int refund(struct demo *d, const char *key, const char *operation, long timeout_ms,
                  struct http_client_result *ret)
{
        char url[96], body[256], key_header[160];
        snprintf(url, sizeof(url), "%s/v1/refunds", d->url);
        snprintf(key_header, sizeof(key_header), "Idempotency-Key: %s", key);
        snprintf(body, sizeof(body),
                 "{\"operation_id\":\"%s\",\"payment_id\":\"pay-%s\",\"amount\":1500,"
                 "\"currency\":\"TWD\"}",
                 operation, operation);
        const char *const hdrs[] = {"Content-Type: application/json", key_header, NULL};
        return http_client_request(&(struct http_client_request){.method = "POST",
                                                                 .url = url,
                                                                 .headers = hdrs,
                                                                 .body = body,
                                                                 .timeout_ms = timeout_ms},
                                   ret);
}

/* Executions the stub's ledger holds for a key (0 if none), or < 0. */
static int executions(struct demo *d, const char *key)
{
        char url[96];
        size_t cap = 1 << 16;
        char *buf = malloc(cap);
        struct http_client_result res = {0};
        int n = TG_EIO;
        if (!buf)
                return TG_ENOMEM;
        snprintf(url, sizeof(url), "%s/_stub/ledger", d->url);
        if (http_client_request(
                &(struct http_client_request){
                    .method = "GET", .url = url, .timeout_ms = 2000, .resp = buf, .resp_size = cap},
                &res) == 0 &&
            res.status == 200) {
                json_t *root = json_loads(buf, 0, NULL);
                json_t *op = json_object_get(json_object_get(root, "operations"), key);
                n = op ? (int)json_integer_value(json_object_get(op, "executions")) : 0;
                json_decref(root);
        }
        free(buf);
        return n;
}

/* Open connections at the stub, not counting the one asking. */
static int open_connections(struct demo *d)
{
        char url[96], buf[2048];
        struct http_client_result res = {0};
        int n = -1;
        snprintf(url, sizeof(url), "%s/_stub/state", d->url);
        if (http_client_request(&(struct http_client_request){.method = "GET",
                                                              .url = url,
                                                              .timeout_ms = 2000,
                                                              .resp = buf,
                                                              .resp_size = sizeof(buf)},
                                &res) == 0) {
                json_t *root = json_loads(buf, 0, NULL);
                n = (int)json_integer_value(json_object_get(root, "open_connections")) - 1;
                json_decref(root);
        }
        return n;
}

static int scenario_no_timeout(struct demo *d, double *ret_ms)
{
        struct http_client_result res = {0};
        char ev[256], result[256];
        printf("(a) No timeout: the dependency decides how long we wait\n");
        if (set_mode(d, "slow:120") < 0)
                return TG_EIO;
        int r = refund(d, "demo-a", "demo-a", 0, &res);
        printf("  without timeout: outcome=%s status=%ld elapsed=%.0fms\n\n",
               r == 0 ? "SUCCESS" : "ERROR", res.status, res.elapsed_ms);
        snprintf(ev, sizeof(ev),
                 "a POST with no timeout set waited %.0f ms for a stub told to"
                 " take %d ms",
                 res.elapsed_ms, SLOW_MS);
        snprintf(result, sizeof(result), "waited %.0f ms, the dependency's full delay",
                 res.elapsed_ms);
        finding("a call to the provider has no timeout", ev,
                "the provider slows down (here 120 ms; in production seconds, or forever)",
                "every slow call holds a connection, a socket and its memory; when calls "
                "arrive faster than they finish, in-flight grows until pools are exhausted",
                result,
                "set a whole-call timeout (tollgate: provider.timeout_ms, 3000 by default, "
                "capped by the operation's remaining deadline)");
        *ret_ms = res.elapsed_ms;
        return r;
}

static int scenario_timeout(struct demo *d, double *ret_ms, int *ret_open, int *ret_exec)
{
        struct http_client_result res = {0};
        char ev[320], result[256];
        printf("(b) A 30 ms timeout: we stop waiting, and release the connection\n");
        refund(d, "demo-b", "demo-b", TIMEOUT_MS, &res);
        double t_end = tool_now();
        /* Our side closed the socket in http_client_request(); the stub notices when
         * it next touches the connection. Watch for up to 500 ms. */
        int open = open_connections(d);
        while (open > 0 && tool_now() - t_end < 0.5) {
                tool_sleep(0.005);
                open = open_connections(d);
        }
        double open_ms = (tool_now() - t_end) * 1000;
        printf("  with timeout: outcome=%s elapsed=%.0fms (timeout %d ms)\n",
               res.timed_out ? "TIMEOUT" : "NOT A TIMEOUT", res.elapsed_ms, TIMEOUT_MS);
        printf("  our connection closed at once; open connections at the stub %.0f ms later "
               "(besides this check): %d\n",
               open_ms, open);
        tool_sleep((SLOW_MS + 80) / 1000.0);
        int execs = executions(d, "demo-b");
        printf("  refunds the stub executed for demo-b after its %d ms: %d\n\n", SLOW_MS, execs);
        snprintf(ev, sizeof(ev),
                 "the caller gave up after %.0f ms and closed its connection (%d left open at "
                 "the stub); the stub still executed the refund %d time(s)",
                 res.elapsed_ms, open, execs);
        snprintf(result, sizeof(result),
                 "%s at %.0f ms for a 30 ms timeout; the far side was not"
                 " stopped",
                 res.timed_out ? "timed out" : "did NOT time out", res.elapsed_ms);
        finding("a timeout that only stops waiting is mistaken for \"nothing happened\"", ev,
                "the provider is slower than the timeout",
                "the refund may have executed although the caller saw an error; retrying "
                "blindly can execute it twice",
                result,
                "time out AND release the connection (done here), record the outcome as "
                "unknown, and reconcile with the same key (tollgate: state unknown, query)");
        *ret_ms = res.elapsed_ms;
        *ret_open = open;
        *ret_exec = execs;
        return res.timed_out ? 0 : TG_EIO;
}

static int scenario_backoff(struct demo *d, int *ret_tries)
{
        struct backoff_config b = {.base_ms = 10,
                                   .factor = 2,
                                   .min_ms = 0,
                                   .cap_ms = 1000,
                                   .give_up_ms = 2000,
                                   .jitter = BACKOFF_JITTER_FULL};
        struct tg_rng rng;
        struct http_client_result res = {0};
        char ev[512], result[256];
        size_t len = 0;
        int64_t prev = 0, elapsed = 0;
        int tries = 0, ok = 0;
        double t0 = tool_now();

        printf("(c) Exponential backoff with full jitter on 503 until success\n");
        printf("  stub: 503 (no Retry-After) for the first %d tries, then fast; windows "
               "0-10, 0-20, 0-40 ms ..., give up after 2 s\n",
               FAIL_FIRST);
        tg_rng_seed(&rng, d->seed);
        if (set_mode(d, "unavailable:-") < 0)
                return TG_EIO;
        ev[0] = '\0';
        for (unsigned retry = 0; retry <= MAX_RETRIES; retry++) {
                if (retry > 0) {
                        int64_t wait;
                        int r = backoff_draw(&b, retry, prev, -1, elapsed, &rng, &wait);
                        if (r == TG_ERANGE) {
                                printf("  give-up time reached\n");
                                break;
                        }
                        printf("  wait=%" PRId64 "ms\n", wait);
                        len += (size_t)snprintf(ev + len, sizeof(ev) - len, "%swait %" PRId64 " ms",
                                                len ? ", " : "", wait);
                        tool_sleep((double)wait / 1000.0);
                        prev = wait;
                }
                if (tries == FAIL_FIRST && set_mode(d, "fast") < 0)
                        return TG_EIO;
                tries++;
                refund(d, "demo-c", "demo-c", 1000, &res);
                elapsed = (int64_t)((tool_now() - t0) * 1000);
                printf("  attempt=%d result=%s\n", tries,
                       res.status == 201 || res.status == 200 ? "SUCCESS" : "503");
                if (res.status == 201 || res.status == 200) {
                        ok = 1;
                        break;
                }
        }
        int execs = executions(d, "demo-c");
        printf("  executions at the stub: %d; total %.0f ms\n\n", execs, (tool_now() - t0) * 1000);
        snprintf(result, sizeof(result), "%s on attempt %d after %.0f ms; executed %d time(s)",
                 ok ? "succeeded" : "gave up", tries, (tool_now() - t0) * 1000, execs);
        finding("clients that fail together and retry at once hit an overloaded provider "
                "again together",
                ev[0] ? ev : "no waits",
                "a transient 503 (nothing executed) for several clients at the same moment",
                "fixed or immediate retries arrive as one burst and keep the provider down; "
                "every layer retrying multiplies the load (3 x 3 x 3 = 27)",
                result,
                "retry only explicit \"not accepted\" answers, with capped exponential windows, "
                "jitter, a total give-up time and Retry-After as a floor, in one layer "
                "(tollgate: the exit's retry_wait, core/backoff)");
        *ret_tries = tries;
        return ok ? 0 : TG_EIO;
}

static int scenario_lost_answer(struct demo *d, int *ret_without, int *ret_with)
{
        struct http_client_result res = {0};
        char ev[320], result[256];

        printf("(d) A refund whose answer is lost, retried with and without idempotency\n");
        printf("  (the stub requires a key on every POST, so \"no idempotency\" is simulated by"
               " a fresh key per try, which is what it amounts to)\n");
        /* Without: one business operation, a new key each try. */
        if (set_mode(d, "drop") < 0)
                return TG_EIO;
        refund(d, "demo-d-try1", "demo-d-try1", 2000, &res);
        printf("  without key: try 1 -> %s\n", res.status ? "answered" : "no answer (dropped)");
        if (set_mode(d, "fast") < 0)
                return TG_EIO;
        refund(d, "demo-d-try2", "demo-d-try2", 2000, &res);
        printf("  without key: try 2 (fresh key) -> %ld\n", res.status);
        int e1 = executions(d, "demo-d-try1"), e2 = executions(d, "demo-d-try2");
        int without = (e1 > 0 ? e1 : 0) + (e2 > 0 ? e2 : 0);
        printf("  refunds executed without idempotency: %d\n", without);

        /* With: the same key on the retry. */
        if (set_mode(d, "drop") < 0)
                return TG_EIO;
        refund(d, "demo-d-key", "demo-d-key", 2000, &res);
        printf("  with key: try 1 -> %s\n", res.status ? "answered" : "no answer (dropped)");
        if (set_mode(d, "fast") < 0)
                return TG_EIO;
        refund(d, "demo-d-key", "demo-d-key", 2000, &res);
        printf("  with key: try 2 (same key) -> %ld (the stored first result, replayed)\n",
               res.status);
        int with = executions(d, "demo-d-key");
        printf("  refunds executed with idempotency:    %d\n\n", with);
        snprintf(ev, sizeof(ev),
                 "the stub's ledger: %d executions for one refund retried with a new key, %d "
                 "with the same key",
                 without, with);
        snprintf(result, sizeof(result),
                 "one operation executed %d times without a key, %d with"
                 " one",
                 without, with);
        finding("a refund is retried after a lost answer without an idempotency key", ev,
                "the provider executes the refund, then the answer is lost (connection dropped)",
                "the customer is refunded twice", result,
                "one idempotency key per business operation, reused on every retry and "
                "re-send (tollgate: the operation id is the key; unknown outcomes are "
                "reconciled, never re-keyed)");
        *ret_without = without;
        *ret_with = with;
        return 0;
}

int cmd_demo_resilience(int argc, char **argv)
{
        struct demo d;
        char stub_bin[1024], port_file[128];
        uint64_t seed = 1;
        const struct opt opts[] = {
            {.name = "seed",
             .arg = "N",
             .u64 = &seed,
             .umin = 0,
             .umax = UINT64_MAX,
             .help = "seed of the backoff jitter in (c) (1)"},
        };
        const struct options_spec spec = {.prog = "tollgate demo resilience",
                                          .description = resilience_about,
                                          .opts = opts,
                                          .nopts = sizeof(opts) / sizeof(opts[0])};
        int rc = options_parse(&spec, argc, argv, NULL, NULL);

        if (rc)
                return options_exit_status(rc);
        rc = 1;
        memset(&d, 0, sizeof(d));
        d.seed = seed;
        if (tool_sibling("tollgate-stub", stub_bin, sizeof(stub_bin)) < 0) {
                fprintf(stderr, "tollgate demo resilience: tollgate-stub not found next to this"
                                " binary\n");
                return 1;
        }
        if (tool_proc_init(&d.stub, "tg-resil-stub") < 0)
                return 1;
        snprintf(port_file, sizeof(port_file), "%s/port", d.stub.dir);
        char *const argv_stub[] = {stub_bin,  "--listen", "127.0.0.1:0", "--port-file",
                                   port_file, "--mode",   "fast",        NULL};
        if (tool_proc_start(&d.stub, argv_stub, port_file, 10) < 0) {
                fprintf(stderr, "tollgate demo resilience: the stub did not start\n");
                goto out;
        }
        snprintf(d.url, sizeof(d.url), "http://127.0.0.1:%d", d.stub.port);
        printf("tollgate demo resilience: seed 002's four scenarios against tollgate-stub on"
               " %s\n(started here, stopped at the end; outside the exit on purpose)\n\n",
               d.url);

        double a_ms = 0, b_ms = 0;
        int b_open = -1, b_exec = -1, c_tries = 0, without = -1, with = -1;
        int fail = 0;
        fail |= scenario_no_timeout(&d, &a_ms) < 0;
        fail |= scenario_timeout(&d, &b_ms, &b_open, &b_exec) < 0;
        fail |= scenario_backoff(&d, &c_tries) < 0;
        fail |= scenario_lost_answer(&d, &without, &with) < 0;
        printf("summary: no_timeout_ms=%.0f timeout_ms=%.0f timeout_open_connections=%d "
               "timeout_executed=%d backoff_attempts=%d executions_without_key=%d "
               "executions_with_key=%d\n",
               a_ms, b_ms, b_open, b_exec, c_tries, without, with);
        rc = fail ? 1 : 0;
out:
        tool_proc_release(&d.stub);
        return rc;
}
