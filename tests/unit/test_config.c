/*
 * Unit tests of config: the defaults, every key with a good and a bad value,
 * unknown sections and keys, secrets read from files, the loopback rule, the
 * promise that a failed load leaves the caller's struct untouched, and the
 * schema written out (every key documented; the INI form loads as the
 * defaults).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/tg_error.h"
#include "daemon/config.h"

static char dir[64];
static char real_dir[256]; /* dir as the loader sees it (realpath) */
static char cfg_path[128];
static char tok_path[128];

static int setup(void **state)
{
        (void)state;
        snprintf(dir, sizeof(dir), "/tmp/tg-test-config-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        char real[4096];
        if (!realpath(dir, real) || strlen(real) >= sizeof(real_dir))
                return -1;
        memcpy(real_dir, real, strlen(real) + 1);
        snprintf(cfg_path, sizeof(cfg_path), "%s/t.ini", dir);
        snprintf(tok_path, sizeof(tok_path), "%s/token", dir);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        unlink(cfg_path);
        unlink(tok_path);
        rmdir(dir);
        return 0;
}

/* Written 0600: a secret file that group or others may read is refused. */
static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        assert_int_equal(chmod(path, 0600), 0);
}

/* The defaults as a file in dir loads them: the config's folder and the
 * default store (relative, so in that folder) come from where it is. */
static void defaults_in_dir(struct tg_config *d)
{
        config_defaults(d);
        snprintf(d->config_dir, sizeof(d->config_dir), "%s", real_dir);
        snprintf(d->store_url, sizeof(d->store_url), "sqlite://%s/tollgate.db", real_dir);
}

/* Loads text; returns the code and leaves the message in err. */
static int load_text(const char *text, struct tg_config *c, char *err, size_t size)
{
        write_file(cfg_path, text);
        err[0] = '\0';
        return config_load(cfg_path, c, err, size);
}

/* A one-key file "[section]\nkey = value\n". */
static int load_one(const char *section, const char *key, const char *value, struct tg_config *c,
                    char *err, size_t size)
{
        char text[2048];
        snprintf(text, sizeof(text), "[%s]\n%s = %s\n", section, key, value);
        return load_text(text, c, err, size);
}

static void expect_ok(const char *section, const char *key, const char *value, struct tg_config *c)
{
        char err[512];
        int r = load_one(section, key, value, c, err, sizeof(err));
        if (r != 0)
                fail_msg("%s.%s = %s: %s", section, key, value, err);
}

static void expect_bad(const char *section, const char *key, const char *value)
{
        char err[512], want[128];
        struct tg_config c;
        memset(&c, 0xab, sizeof(c));
        struct tg_config before = c;

        int r = load_one(section, key, value, &c, err, sizeof(err));
        if (r != TG_ECONFIG)
                fail_msg("%s.%s = %s: expected refusal, got %d", section, key, value, r);
        snprintf(want, sizeof(want), "%s.%s: ", section, key);
        if (strncmp(err, want, strlen(want)) != 0)
                fail_msg("%s.%s = %s: message \"%s\" does not name the key", section, key, value,
                         err);
        /* untouched on failure */
        assert_memory_equal(&c, &before, sizeof(c));
}

static void test_defaults(void **state)
{
        (void)state;
        struct tg_config c, d;
        char err[256];
        struct policy_config p;

        config_defaults(&d);
        assert_string_equal(d.api_listen_host, "127.0.0.1");
        assert_int_equal(d.api_listen_port, 8080);
        assert_true(d.exit.starts_per_second == 5.0);
        assert_int_equal(d.exit.max_in_flight, 10);
        assert_int_equal(d.provider_connect_timeout_ms, 1000);
        assert_int_equal(d.provider_timeout_ms, 3000);
        assert_int_equal(d.policy.max_attempts, 3);
        assert_int_equal(d.policy.deadline_ms, 900000);
        policy_config_default(&p);
        assert_memory_equal(&d.policy, &p, sizeof(p));
        assert_string_equal(d.api_token, "");
        assert_string_equal(d.log_level, "info");
        assert_string_equal(d.provider_key_header, "Idempotency-Key");
        assert_string_equal(d.provider_list_cursor_param, "");
        assert_int_equal(d.provider_list_max_pages, 10);
        assert_int_equal(d.rule_count, 0);
        assert_false(d.provider_reuse_connections);

        /* an empty file and a comments-only file give the defaults (the
         * default store in the file's folder) */
        defaults_in_dir(&d);
        assert_int_equal(load_text("", &c, err, sizeof(err)), 0);
        assert_memory_equal(&c, &d, sizeof(c));
        assert_int_equal(load_text("; nothing\n# here\n[api]\n", &c, err, sizeof(err)), 0);
        assert_memory_equal(&c, &d, sizeof(c));
}

static void test_interface_example(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512], text[1024];

        write_file(tok_path, "s3cret-token\n");
        snprintf(text, sizeof(text),
                 "[store]\n"
                 "url = sqlite://var/tollgate.db   ; relative to this file's folder\n"
                 "\n[api]\nlisten = 127.0.0.1:8080\ntoken_file = %s\n"
                 "\n[provider]\nbase_url = http://127.0.0.1:9090\n"
                 "connect_timeout_ms = 1000\ntimeout_ms = 3000 ; whole call\n"
                 "\n[exit]\nstarts_per_second = 5\nmax_in_flight = 10\n"
                 "\n[retry]\nmax_attempts = 3\ndeadline_s = 900\n",
                 tok_path);
        assert_int_equal(load_text(text, &c, err, sizeof(err)), 0);
        snprintf(text, sizeof(text), "sqlite://%s/var/tollgate.db", real_dir);
        assert_string_equal(c.store_url, text);
        assert_string_equal(c.api_token, "s3cret-token");
        assert_string_equal(c.api_token_file, tok_path);
        assert_int_equal(c.policy.deadline_ms, 900000);
}

static void test_every_key_good(void **state)
{
        (void)state;
        struct tg_config c;

        expect_ok("store", "url", "sqlite:///var/lib/tollgate/t.db", &c);
        assert_string_equal(c.store_url, "sqlite:///var/lib/tollgate/t.db");
        expect_ok("store", "url", "mysql://u:p@db:3306/tollgate", &c);
        assert_string_equal(c.store_url, "mysql://u:p@db:3306/tollgate");
        expect_ok("store", "url", "postgresql://u:p@db:5432/tollgate", &c);
        assert_string_equal(c.store_url, "postgresql://u:p@db:5432/tollgate");
        expect_ok("store", "url", "postgres://u@db/tollgate?sslmode=verify-full", &c);
        assert_string_equal(c.store_url, "postgres://u@db/tollgate?sslmode=verify-full");

        expect_ok("api", "listen", "127.0.0.2:0", &c);
        assert_string_equal(c.api_listen_host, "127.0.0.2");
        assert_int_equal(c.api_listen_port, 0);
        expect_ok("api", "listen", "[::1]:9000", &c);
        assert_string_equal(c.api_listen_host, "::1");
        assert_int_equal(c.api_listen_port, 9000);
        expect_ok("api", "listen", "localhost:65535", &c);
        assert_int_equal(c.api_listen_port, 65535);
        expect_ok("api", "max_body_bytes", "1024", &c);
        assert_int_equal(c.api_max_body_bytes, 1024);
        expect_ok("api", "max_connections", "3", &c);
        assert_int_equal(c.api_max_connections, 3);
        expect_ok("api", "connection_timeout_s", "30", &c);
        assert_int_equal(c.api_connection_timeout_s, 30);
        expect_ok("api", "metrics_need_token", "yes", &c);
        assert_true(c.api_metrics_need_token);
        expect_ok("api", "metrics_need_token", "false", &c);
        assert_false(c.api_metrics_need_token);

        expect_ok("provider", "base_url", "https://psp.example:8443", &c);
        assert_string_equal(c.provider_base_url, "https://psp.example:8443");
        expect_ok("provider", "refunds_path", "/api/refunds", &c);
        assert_string_equal(c.provider_refunds_path, "/api/refunds");
        expect_ok("provider", "query_path", "/api/refunds/{operation_id}/status", &c);
        expect_ok("provider", "list_max_pages", "3", &c);
        assert_int_equal(c.provider_list_max_pages, 3);
        expect_ok("provider", "key_header", "X-Idem-Key", &c);
        assert_string_equal(c.provider_key_header, "X-Idem-Key");
        expect_ok("provider", "request_id_header", "X-Req", &c);
        expect_ok("provider", "attempt_header", "X-Try", &c);
        expect_ok("provider", "connect_timeout_ms", "250", &c);
        assert_int_equal(c.provider_connect_timeout_ms, 250);
        expect_ok("provider", "timeout_ms", "10000", &c);
        assert_int_equal(c.provider_timeout_ms, 10000);
        expect_ok("provider", "max_response_bytes", "4096", &c);
        assert_int_equal(c.provider_max_response_bytes, 4096);
        write_file(tok_path, "whsec\r\n");
        expect_ok("provider", "webhook_secret_file", tok_path, &c);
        assert_string_equal(c.provider_webhook_secret, "whsec");

        expect_ok("provider", "reuse_connections", "on", &c);
        assert_true(c.provider_reuse_connections);

        expect_ok("exit", "starts_per_second", "0.5", &c);
        assert_true(c.exit.starts_per_second == 0.5);
        expect_ok("exit", "max_in_flight", "1", &c);
        assert_int_equal(c.exit.max_in_flight, 1);
        expect_ok("exit", "query_starts_per_second", "2", &c);
        assert_true(c.exit_query_starts_per_second == 2.0);
        expect_ok("exit", "timeout_run_hold", "0", &c);
        assert_int_equal(c.exit_timeout_run_hold, 0);
        expect_ok("exit", "timeout_hold_ms", "2500", &c);
        assert_int_equal(c.exit_timeout_hold_ms, 2500);
        expect_ok("exit", "default_hold_ms", "0", &c);
        assert_int_equal(c.exit_default_hold_ms, 0);

        expect_ok("retry", "max_attempts", "5", &c);
        assert_int_equal(c.policy.max_attempts, 5);
        expect_ok("retry", "deadline_s", "60", &c);
        assert_int_equal(c.policy.deadline_ms, 60000);
        expect_ok("retry", "max_queries", "0", &c);
        assert_int_equal(c.policy.max_queries, 0);
        expect_ok("retry", "query_interval_ms", "500", &c);
        assert_int_equal(c.policy.query_interval_ms, 500);
        expect_ok("retry", "key_retention_s", "3600", &c);
        assert_int_equal(c.policy.key_retention_ms, 3600000);
        expect_ok("retry", "backoff_base_ms", "100", &c);
        assert_int_equal(c.policy.backoff.base_ms, 100);
        expect_ok("retry", "backoff_factor", "1.5", &c);
        assert_true(c.policy.backoff.factor == 1.5);
        expect_ok("retry", "backoff_min_ms", "0", &c);
        assert_int_equal(c.policy.backoff.min_ms, 0);
        expect_ok("retry", "backoff_cap_ms", "120000", &c);
        assert_int_equal(c.policy.backoff.cap_ms, 120000);
        expect_ok("retry", "jitter", "decorrelated", &c);
        assert_int_equal(c.policy.backoff.jitter, BACKOFF_JITTER_DECORRELATED);
        expect_ok("retry", "jitter", "none", &c);
        assert_int_equal(c.policy.backoff.jitter, BACKOFF_JITTER_NONE);
        expect_ok("retry", "retry_after_cap_s", "120", &c);
        assert_int_equal(c.retry_after_cap_ms, 120000);

        expect_ok("classify", "rule", "post 409 code=idempotency_key_in_use => unknown", &c);
        assert_int_equal(c.rule_count, 1);
        assert_int_equal(c.rules[0].cls, TG_CLASS_UNKNOWN);

        expect_ok("log", "level", "debug", &c);
        assert_string_equal(c.log_level, "debug");
}

static void test_every_key_bad(void **state)
{
        (void)state;
        char long_value[100];

        expect_bad("store", "url", "postgres://x");
        expect_bad("store", "url", "sqlite://");
        expect_bad("store", "url", "tollgate.db");

        expect_bad("api", "listen", "127.0.0.1");
        expect_bad("api", "listen", "127.0.0.1:");
        expect_bad("api", "listen", "127.0.0.1:65536");
        expect_bad("api", "listen", "127.0.0.1:-1");
        expect_bad("api", "listen", "127.0.0.1:80x");
        expect_bad("api", "listen", ":8080");
        expect_bad("api", "listen", "::1:8080");
        expect_bad("api", "listen", "[::1]8080");
        expect_bad("api", "token_file", "/nonexistent/tollgate/token");
        expect_bad("api", "max_body_bytes", "0");
        expect_bad("api", "max_body_bytes", "16777217");
        expect_bad("api", "max_body_bytes", "1k");
        expect_bad("api", "max_connections", "0");
        expect_bad("api", "max_connections", "-5");
        expect_bad("api", "connection_timeout_s", "0");
        expect_bad("api", "connection_timeout_s", "3601");
        expect_bad("api", "metrics_need_token", "maybe");

        expect_bad("provider", "base_url", "ftp://x");
        expect_bad("provider", "base_url", "http://");
        expect_bad("provider", "base_url", "127.0.0.1:9090");
        expect_bad("provider", "refunds_path", "v1/refunds");
        expect_bad("provider", "query_path", "/v1/refunds/{id}");
        expect_bad("provider", "key_header", "Idempotency Key");
        expect_bad("provider", "key_header", "X:Y");
        expect_bad("provider", "list_cursor_param", "starting after");
        expect_bad("provider", "list_cursor_param", "a&b=c");
        expect_bad("provider", "list_max_pages", "0");
        expect_bad("provider", "list_max_pages", "1001");
        expect_bad("provider", "request_id_header", "X\x01Y");
        expect_bad("provider", "attempt_header", "A(b)");
        expect_bad("provider", "connect_timeout_ms", "0");
        expect_bad("provider", "timeout_ms", "500");          /* < connect_timeout_ms */
        expect_bad("provider", "connect_timeout_ms", "5000"); /* > timeout_ms */
        expect_bad("provider", "timeout_ms", "999999999999999999999");
        expect_bad("provider", "max_response_bytes", "10");
        expect_bad("provider", "webhook_secret_file", "/nonexistent/secret");
        expect_bad("provider", "reuse_connections", "2");

        expect_bad("exit", "starts_per_second", "0");
        expect_bad("exit", "starts_per_second", "-1");
        expect_bad("exit", "starts_per_second", "fast");
        expect_bad("exit", "starts_per_second", "nan");
        expect_bad("exit", "starts_per_second", "inf");
        expect_bad("exit", "starts_per_second", "5 per second");
        expect_bad("exit", "starts_per_second", "1e10");
        expect_bad("exit", "max_in_flight", "0");
        expect_bad("exit", "max_in_flight", "10.5");
        expect_bad("exit", "query_starts_per_second", "-0.1");
        expect_bad("exit", "query_starts_per_second", "6"); /* > starts_per_second */
        expect_bad("exit", "refund_starts_per_second", "5.5");
        expect_bad("exit", "refund_max_in_flight", "11"); /* > max_in_flight */
        expect_bad("exit", "query_max_in_flight", "11");
        expect_bad("exit", "refund_max_in_flight", "-1");
        expect_bad("exit", "timeout_run_hold", "-1");
        expect_bad("exit", "timeout_hold_ms", "x");
        expect_bad("exit", "default_hold_ms", "-1");

        expect_bad("retry", "max_attempts", "0");
        expect_bad("retry", "max_attempts", "1001");
        expect_bad("retry", "deadline_s", "0");
        expect_bad("retry", "deadline_s", "15m");
        expect_bad("retry", "max_queries", "-1");
        expect_bad("retry", "query_interval_ms", "0");
        expect_bad("retry", "key_retention_s", "0");
        expect_bad("retry", "backoff_base_ms", "0");
        expect_bad("retry", "backoff_base_ms", "100000"); /* > backoff_cap_ms */
        expect_bad("retry", "backoff_factor", "0.5");
        expect_bad("retry", "backoff_factor", "two");
        expect_bad("retry", "backoff_min_ms", "-1");
        expect_bad("retry", "backoff_min_ms", "70000"); /* > backoff_cap_ms */
        expect_bad("retry", "backoff_cap_ms", "1000");  /* < backoff_base_ms */
        expect_bad("retry", "jitter", "random");
        expect_bad("retry", "retry_after_cap_s", "-1");

        expect_bad("classify", "rule", "post => unknown");
        expect_bad("classify", "rule", "get 500 => unknown");

        expect_bad("log", "level", "verbose");

        /* too long for its field */
        memset(long_value, 'a', sizeof(long_value) - 1);
        long_value[sizeof(long_value) - 1] = '\0';
        expect_bad("provider", "key_header", long_value); /* 64 bytes at most */
}

static void test_cross_key_messages(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512];

        assert_int_equal(load_one("provider", "timeout_ms", "500", &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_string_equal(err, "provider.timeout_ms: must be >= provider.connect_timeout_ms "
                                 "(1000)");
        assert_int_equal(load_one("provider", "connect_timeout_ms", "5000", &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_string_equal(err, "provider.connect_timeout_ms: must be <= provider.timeout_ms "
                                 "(3000)");
        /* a list's next page needs the list and its "more" flag */
        static const char paged[] = "[provider]\nlist_path = /v1/refunds?payment_intent="
                                    "{payment_id}\nreconcile = list\nlist_items_field = data\n"
                                    "list_match_field = metadata.operation_id\n"
                                    "list_more_field = has_more\n"
                                    "list_cursor_param = starting_after\n";
        assert_int_equal(load_text(paged, &c, err, sizeof(err)), 0);
        assert_string_equal(c.provider_list_cursor_param, "starting_after");
        assert_int_equal(
            load_text("[provider]\nlist_cursor_param = starting_after\n", &c, err, sizeof(err)),
            TG_ECONFIG);
        assert_non_null(strstr(err, "provider.list_cursor_param"));
        assert_int_equal(load_text("[provider]\nconnect_timeout_ms = 600\ntimeout_ms = 500\n", &c,
                                   err, sizeof(err)),
                         TG_ECONFIG);
        assert_string_equal(err, "provider.connect_timeout_ms: must be <= provider.timeout_ms "
                                 "(500)");
        /* a key is never kept by us longer than the provider keeps it */
        assert_int_equal(load_one("retry", "key_retention_s", "86400", &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_string_equal(err, "retry.key_retention_s: must be shorter than "
                                 "provider.key_lifetime_s (86400 s), the provider's life of a "
                                 "key: a key sent again after it is a new refund");
        assert_int_equal(load_text("[provider]\nkey_lifetime_s = 2678400\n[retry]\n"
                                   "key_retention_s = 2592000\n",
                                   &c, err, sizeof(err)),
                         0);
        assert_int_equal(c.provider_key_lifetime_ms, 2678400000LL);
        assert_int_equal(load_one("provider", "key_lifetime_s", "3600", &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_non_null(strstr(err, "retry.key_retention_s: must be shorter"));
        assert_int_equal(load_one("exit", "starts_per_second", "1", &c, err, sizeof(err)),
                         0); /* query sub-quota 0 = none */
        assert_int_equal(load_text("[exit]\nstarts_per_second = 2\nquery_starts_per_second = 2\n",
                                   &c, err, sizeof(err)),
                         0);
        /* sub-quotas nest: each at most the account's, together more */
        assert_int_equal(load_text("[exit]\nstarts_per_second = 10\nmax_in_flight = 4\n"
                                   "refund_starts_per_second = 8\nrefund_max_in_flight = 3\n"
                                   "query_starts_per_second = 6\nquery_max_in_flight = 3\n",
                                   &c, err, sizeof(err)),
                         0);
        assert_true(c.exit_refund_starts_per_second == 8.0 && c.exit_refund_max_in_flight == 3);
        assert_true(c.exit_query_starts_per_second == 6.0 && c.exit_query_max_in_flight == 3);
        /* one above the account's: the error names both keys */
        assert_int_equal(
            load_text("[exit]\nstarts_per_second = 10\nrefund_starts_per_second = 12\n", &c, err,
                      sizeof(err)),
            TG_ECONFIG);
        assert_non_null(strstr(err, "exit.refund_starts_per_second: must be <= "
                                    "exit.starts_per_second (10)"));
        assert_int_equal(
            load_text("[exit]\nmax_in_flight = 4\nquery_max_in_flight = 5\n", &c, err, sizeof(err)),
            TG_ECONFIG);
        assert_non_null(strstr(err, "exit.query_max_in_flight: must be <= exit.max_in_flight (4)"));
        /* with shares, a sub-quota's cap gives each share one at least */
        assert_int_equal(
            load_text("[exit]\nshares = 2\nrefund_max_in_flight = 1\n", &c, err, sizeof(err)),
            TG_ECONFIG);
        assert_non_null(strstr(err, "exit.refund_max_in_flight: must be >= exit.shares (2)"));
}

/* The provider's TLS files, credentials and mapping: good values load,
 * bad ones are refused naming the key (the mapping is evaluated at load:
 * an unknown template field or an unusable combination stops it), and a
 * private key open to others is refused with the fix in the message. */
static void test_provider_keys(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512], text[1024], key_path[160], secret_path[160];

        snprintf(key_path, sizeof(key_path), "%s/client.key", dir);
        snprintf(secret_path, sizeof(secret_path), "%s/secret", dir);
        write_file(secret_path, "sk_test_123\n");

        expect_ok("provider", "unreachable_run_hold", "0", &c);
        assert_int_equal(c.provider_unreachable_run_hold, 0);
        expect_ok("provider", "unreachable_hold_ms", "2000", &c);
        assert_int_equal(c.provider_unreachable_hold_ms, 2000);
        expect_bad("provider", "unreachable_hold_ms", "90000"); /* > max 60000 */
        expect_bad("provider", "unreachable_run_hold", "-1");
        expect_ok("provider", "body_format", "form", &c);
        expect_bad("provider", "body_format", "xml");
        expect_bad("provider", "auth", "basic");
        expect_bad("provider", "signature_encoding", "hex64");
        expect_ok("provider", "body_field", "amount {amount}", &c);
        assert_int_equal(c.provider_body_field_count, 1);
        expect_bad("provider", "body_field", "amount {amonut}");
        expect_bad("provider", "body_field", "x {refund_id}");
        expect_bad("provider", "body_field", "lonely");
        expect_ok("provider", "refunds_path", "/v1/payments/{payment_id}/refunds", &c);
        expect_bad("provider", "refunds_path", "/v1/{refund_id}");
        assert_int_equal(
            load_one("provider", "query_path", "/v1/refunds/{refund_id}", &c, err, sizeof(err)),
            TG_ECONFIG);
        assert_non_null(strstr(err, "provider.query_fallback_path: required"));
        expect_bad("provider", "query_fallback_path", "/v1/k/{operation_id}"); /* unused */
        expect_ok("provider", "status_field", "data.0.status header:X-Status", &c);
        expect_bad("provider", "status_field", "a..b");
        expect_ok("provider", "status_processing", "pending, requires_action", &c);
        expect_bad("provider", "status_processing", "failed"); /* in two lists */
        expect_bad("provider", "status_succeeded", "ok,,done");
        expect_bad("provider", "signing_string", "{method}{nonce}");
        expect_bad("provider", "signing_string", "");
        expect_bad("provider", "signature_prefix", "v1 =");
        expect_bad("provider", "auth_secret_file", secret_path); /* auth is none */
        assert_int_equal(load_one("provider", "auth", "bearer", &c, err, sizeof(err)), TG_ECONFIG);
        assert_string_equal(err,
                            "provider.auth_secret_file: required when provider.auth is bearer");
        expect_bad("provider", "signing_key_file", "/nonexistent/key");
        expect_bad("provider", "ca_file", "/nonexistent/ca.pem");
        assert_int_equal(load_one("provider", "client_cert", cfg_path, &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_string_equal(err, "provider.client_key: required with provider.client_cert");

        snprintf(text, sizeof(text),
                 "[provider]\nauth = header\nauth_header = X-Api-Key\nauth_secret_file = %s\n"
                 "signing_key_file = %s\nquery_path = /v1/refunds/{refund_id}\n"
                 "query_fallback_path = /v1/refunds/by-key/{operation_id}\nbody_format = form\n"
                 "body_field = payment_intent {payment_id}\nbody_field = amount {amount}\n"
                 "body_field = metadata {metadata}\n",
                 secret_path, secret_path);
        assert_int_equal(load_text(text, &c, err, sizeof(err)), 0);
        assert_int_equal(c.provider_body_field_count, 3);
        /* a JSON body whose names clash cannot be made */
        assert_int_equal(load_text("[provider]\nbody_field = a {amount}\nbody_field = a.b "
                                   "{currency}\n",
                                   &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_non_null(strstr(err, "provider.body_field: "));
        assert_int_equal(load_text("[provider]\nbody_field = a {amount}\nbody_field = a "
                                   "{currency}\n",
                                   &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_non_null(strstr(err, "set twice"));
        /* TLS files with an http:// provider are a mistake */
        snprintf(text, sizeof(text), "[provider]\nca_file = %s\n", secret_path);
        assert_int_equal(load_text(text, &c, err, sizeof(err)), TG_ECONFIG);
        assert_string_equal(err, "provider.ca_file: set, but provider.base_url is http://");
        /* the client key's mode */
        write_file(key_path, "-----BEGIN PRIVATE KEY-----\n");
        chmod(key_path, 0644);
        snprintf(text, sizeof(text),
                 "[provider]\nbase_url = https://psp.example\nclient_cert = %s\n"
                 "client_key = %s\n",
                 secret_path, key_path);
        assert_int_equal(load_text(text, &c, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "provider.client_key: "));
        assert_non_null(strstr(err, "mode 0644"));
        assert_non_null(strstr(err, "chmod 600"));
        chmod(key_path, 0600);
        assert_int_equal(load_text(text, &c, err, sizeof(err)), 0);
        /* a secret never appears in a message */
        write_file(secret_path, "sk test with spaces\n");
        snprintf(text, sizeof(text), "[provider]\nauth = bearer\nauth_secret_file = %s\n",
                 secret_path);
        assert_int_equal(load_text(text, &c, err, sizeof(err)), TG_ECONFIG);
        assert_null(strstr(err, "with spaces"));
        unlink(key_path);
        unlink(secret_path);
}

static void test_unknown_and_syntax(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512];

        assert_int_equal(
            load_text("[api]\nlisten = 127.0.0.1:1\nlisen = x\n", &c, err, sizeof(err)),
            TG_ECONFIG);
        assert_string_equal(err, "api.lisen: unknown key; did you mean api.listen? (line 3)");
        assert_int_equal(load_text("[api]\nwhatever = x\n", &c, err, sizeof(err)), TG_ECONFIG);
        assert_string_equal(err, "api.whatever: unknown key (line 2)");
        /* the right name in the wrong section */
        assert_int_equal(load_text("[api]\ntimeout_ms = 5\n", &c, err, sizeof(err)), TG_ECONFIG);
        assert_string_equal(err, "api.timeout_ms: unknown key in [api]; did you mean "
                                 "provider.timeout_ms? (line 2)");

        assert_int_equal(load_text("[apii]\nlisten = x\n", &c, err, sizeof(err)), TG_ECONFIG);
        assert_string_equal(err,
                            "apii.listen: unknown section [apii]; did you mean [api]? (line 2)");
        assert_int_equal(load_text("[nothing_like_it]\nlisten = x\n", &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_string_equal(err, "nothing_like_it.listen: unknown section [nothing_like_it] "
                                 "(line 2)");

        assert_int_equal(load_text("listen = x\n", &c, err, sizeof(err)), TG_ECONFIG);
        assert_string_equal(err, ".listen: key outside any [section] (line 1)");

        assert_int_equal(load_text("[api]\njust words\n", &c, err, sizeof(err)), TG_ECONFIG);
        assert_string_equal(err, "config: not a [section] or key = value line (line 2)");

        assert_int_equal(load_text("[api\n", &c, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "line 1"));

        /* the first error wins, syntax or key */
        assert_int_equal(load_text("[exit]\nmax_in_flight = 0\nbroken\n", &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_string_equal(err, "exit.max_in_flight: must be an integer in [1, 10000], got "
                                 "\"0\" (line 2)");
        assert_int_equal(load_text("[exit]\nbroken\nmax_in_flight = 0\n", &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_string_equal(err, "config: not a [section] or key = value line (line 2)");

        /* a key set twice */
        assert_int_equal(
            load_text("[exit]\nmax_in_flight = 1\nmax_in_flight = 2\n", &c, err, sizeof(err)),
            TG_ECONFIG);
        assert_string_equal(err,
                            "exit.max_in_flight: set more than once (first at line 2) (line 3)");

        /* a repeatable key */
        assert_int_equal(load_text("[classify]\nrule = post 500 => unknown\n"
                                   "rule = query 404 => not_found\n",
                                   &c, err, sizeof(err)),
                         0);
        assert_int_equal(c.rule_count, 2);
}

static void test_long_line(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512];
        char text[4096];
        char path[600];

        memset(path, 'a', sizeof(path) - 1);
        path[sizeof(path) - 1] = '\0';
        snprintf(text, sizeof(text), "[store]\nurl = sqlite:///%s\n", path);
        assert_int_equal(load_text(text, &c, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "line 2"));
        assert_non_null(strstr(err, "longer than"));
}

static void test_missing_file(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512];

        assert_int_equal(config_load("/nonexistent/tollgate.ini", &c, err, sizeof(err)), -ENOENT);
        assert_non_null(strstr(err, "/nonexistent/tollgate.ini"));
        assert_int_equal(config_load(NULL, &c, err, sizeof(err)), TG_EINVAL);
}

static void test_token_file(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512];

        write_file(tok_path, "abc\n\n");
        expect_ok("api", "token_file", tok_path, &c);
        assert_string_equal(c.api_token, "abc");

        write_file(tok_path, "");
        assert_int_equal(load_one("api", "token_file", tok_path, &c, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "api.token_file: "));
        assert_non_null(strstr(err, "empty"));

        write_file(tok_path, "\n");
        expect_bad("api", "token_file", tok_path);
        write_file(tok_path, "two words\n");
        expect_bad("api", "token_file", tok_path);

        /* a secret never shows up in a message */
        write_file(tok_path, "SECRETVALUE with space\n");
        assert_int_equal(load_one("api", "token_file", tok_path, &c, err, sizeof(err)), TG_ECONFIG);
        assert_null(strstr(err, "SECRETVALUE"));

        /* unreadable: a directory */
        assert_int_equal(load_one("api", "token_file", dir, &c, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "api.token_file: "));

        if (geteuid() != 0) {
                write_file(tok_path, "abc\n");
                chmod(tok_path, 0);
                expect_bad("api", "token_file", tok_path);
                chmod(tok_path, 0600);
        }
}

/* [ui] and [stats] keep_hours: the users file is read at load, and a bad
 * line is named with the key and the line. */
static void test_ui_keys(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512];

        write_file(tok_path, "# people\nolga operator sha256:"
                             "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b\n");
        expect_ok("ui", "users_file", tok_path, &c);
        assert_int_equal(c.ui_user_count, 1);
        assert_string_equal(c.ui_users[0].name, "olga");
        assert_int_equal(c.ui_users[0].role, UI_ROLE_OPERATOR);
        assert_int_equal(c.ui_users[0].token_sha256[0], 0x2b);

        write_file(tok_path, "\nolga root sha256:"
                             "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b\n");
        assert_int_equal(load_one("ui", "users_file", tok_path, &c, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "ui.users_file: "));
        assert_non_null(strstr(err, "line 2: "));
        assert_int_equal(load_one("ui", "users_file", "/nonexistent/users", &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_non_null(strstr(err, "ui.users_file: "));

        expect_ok("ui", "enabled", "false", &c);
        assert_false(c.ui_enabled);
        expect_ok("ui", "secure_cookie", "yes", &c);
        assert_true(c.ui_secure_cookie);
        expect_ok("ui", "session_idle_s", "600", &c);
        assert_int_equal(c.ui_session_idle_s, 600);
        expect_bad("ui", "session_idle_s", "59");
        expect_bad("ui", "session_max_s", "604801");
        expect_ok("stats", "keep_hours", "168", &c);
        assert_int_equal(c.stats_keep_hours, 168);
        expect_bad("stats", "keep_hours", "0");
        /* idle can never outlast the session itself */
        assert_int_equal(load_text("[ui]\nsession_max_s = 300\n", &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_non_null(strstr(err, "ui.session_max_s: must be >= ui.session_idle_s"));
}

static void test_loopback_rule(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512], text[512];

        static const char *const loopback[] = {"127.0.0.1:1", "127.9.8.7:1", "[::1]:1",
                                               "localhost:1", "LOCALHOST:1"};
        for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
                expect_ok("api", "listen", loopback[i], &c);

        static const char *const open[] = {"0.0.0.0:8080", "[::]:8080", "10.0.0.1:80",
                                           "example.com:80", "128.0.0.1:80"};
        for (size_t i = 0; i < sizeof(open) / sizeof(open[0]); i++) {
                assert_int_equal(load_one("api", "listen", open[i], &c, err, sizeof(err)),
                                 TG_ECONFIG);
                assert_string_equal(err,
                                    "api.token_file: required when api.listen is not loopback");
        }
        write_file(tok_path, "tok\n");
        snprintf(text, sizeof(text), "[api]\nlisten = 0.0.0.0:8080\ntoken_file = %s\n", tok_path);
        assert_int_equal(load_text(text, &c, err, sizeof(err)), 0);
        assert_string_equal(c.api_listen_host, "0.0.0.0");
}

/* The schema as text: config_describe() into a malloc()ed string. */
static char *describe(enum config_doc_format fmt)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        assert_non_null(f);
        assert_int_equal(config_describe(f, fmt), 0);
        fclose(f);
        assert_non_null(text);
        return text;
}

static void test_schema_documented(void **state)
{
        (void)state;
        const char *section, *name, *help;
        const char *left[32]; /* sections already left behind */
        size_t nleft = 0, n = 0;
        char *ini, *md;
        char want[160];

        /* first by name: a key without help also makes config_describe() fail */
        for (size_t i = 0; config_key_at(i, &section, &name, &help) == 0; i++) {
                if (!help || strlen(help) < 10)
                        fail_msg("%s.%s has no help text", section, name);
                if (help[strlen(help) - 1] != '.')
                        fail_msg("%s.%s: help text should end with a full stop", section, name);
        }
        ini = describe(CONFIG_DOC_INI);
        md = describe(CONFIG_DOC_MARKDOWN);
        for (size_t i = 0; config_key_at(i, &section, &name, &help) == 0; i++) {
                const char *s2, *n2, *h2;
                n++;
                /* each section is one run of keys: one [section] and one table */
                for (size_t j = 0; j < nleft; j++)
                        if (strcmp(left[j], section) == 0)
                                fail_msg("[%s] comes back after another section", section);
                if (config_key_at(i + 1, &s2, &n2, &h2) == 0 && strcmp(s2, section) != 0) {
                        assert_true(nleft < sizeof(left) / sizeof(left[0]));
                        left[nleft++] = section;
                }
                for (size_t j = 0; j < i; j++) {
                        assert_int_equal(config_key_at(j, &s2, &n2, &h2), 0);
                        if (strcmp(s2, section) == 0 && strcmp(n2, name) == 0)
                                fail_msg("%s.%s is in the table twice", section, name);
                }
                /* every key is in both outputs, set or commented out */
                snprintf(want, sizeof(want), "\n%s = ", name);
                if (!strstr(ini, want)) {
                        snprintf(want, sizeof(want), "\n# %s =\n", name);
                        if (!strstr(ini, want))
                                fail_msg("%s.%s is missing from the INI output", section, name);
                }
                snprintf(want, sizeof(want), "\n| `%s` | ", name);
                if (!strstr(md, want))
                        fail_msg("%s.%s is missing from the Markdown output", section, name);
                snprintf(want, sizeof(want), "\n## `[%s]`\n", section);
                assert_non_null(strstr(md, want));
        }
        assert_true(n > 40);
        assert_int_equal(config_key_at(n, &section, &name, &help), TG_ERANGE);

        /* INI lines stay well inside inih's line buffer */
        for (const char *p = ini; *p;) {
                size_t len = strcspn(p, "\n");
                if (len > 100)
                        fail_msg("INI line longer than 100 bytes: %.*s", (int)len, p);
                p += len + (p[len] == '\n');
        }
        free(ini);
        free(md);
}

static void test_describe_ini_loads_as_defaults(void **state)
{
        (void)state;
        struct tg_config c, d;
        char err[512];
        FILE *f = fopen(cfg_path, "w");

        assert_non_null(f);
        assert_int_equal(config_describe(f, CONFIG_DOC_INI), 0);
        fclose(f);
        memset(&c, 0, sizeof(c));
        if (config_load(cfg_path, &c, err, sizeof(err)) != 0)
                fail_msg("the generated INI does not load: %s", err);
        defaults_in_dir(&d);
        assert_memory_equal(&c, &d, sizeof(c));

        /* the rule example of the help text is a rule */
        expect_ok("classify", "rule", "post 409 code=idempotency_key_in_use => unknown", &c);
        assert_int_equal(c.rule_count, 1);
}

static void test_describe_markdown(void **state)
{
        (void)state;
        char *md = describe(CONFIG_DOC_MARKDOWN);

        /* defaults read from config_defaults(), in the key's written unit */
        assert_non_null(strstr(md, "| `starts_per_second` | `5` | "));
        assert_non_null(strstr(md, "| `deadline_s` | `900` | "));
        assert_non_null(strstr(md, "| `key_retention_s` | `82800` | "));
        assert_non_null(strstr(md, "| `listen` | `127.0.0.1:8080` | "));
        assert_non_null(strstr(md, "| `jitter` | `full` | "));
        assert_non_null(strstr(md, "| `token_file` | (none) | "));
        /* a '|' inside a cell is escaped, or the table breaks */
        assert_non_null(strstr(md, "<post\\|query>"));
        assert_null(strstr(md, "<post|query>"));
        free(md);

        assert_int_equal(config_describe(NULL, CONFIG_DOC_INI), TG_EINVAL);
        assert_int_equal(config_describe(stdout, (enum config_doc_format)99), TG_EINVAL);
        /* a failed write is an error, not a short document */
        FILE *full = fopen("/dev/full", "w");
        if (full) {
                assert_int_equal(config_describe(full, CONFIG_DOC_MARKDOWN), TG_EIO);
                fclose(full);
        }
}

/* A secret file group or others may read or write is refused, naming the
 * fix; so is a mysql url's password_file; 0600 and 0400 are fine. */
static void test_secret_permissions(void **state)
{
        (void)state;
        struct tg_config c;
        char err[1024], text[512];
        static const mode_t open_modes[] = {0644, 0640, 0604, 0660, 0620, 0602};

        for (size_t i = 0; i < sizeof(open_modes) / sizeof(open_modes[0]); i++) {
                write_file(tok_path, "tok\n");
                assert_int_equal(chmod(tok_path, open_modes[i]), 0);
                assert_int_equal(load_one("api", "token_file", tok_path, &c, err, sizeof(err)),
                                 TG_ECONFIG);
                assert_non_null(strstr(err, "api.token_file: "));
                assert_non_null(strstr(err, "group or others"));
                snprintf(text, sizeof(text), "chmod 600 %s", tok_path);
                assert_non_null(strstr(err, text));
                assert_null(strstr(err, "tok\n"));
                assert_int_equal(
                    load_one("provider", "webhook_secret_file", tok_path, &c, err, sizeof(err)),
                    TG_ECONFIG);
                assert_non_null(strstr(err, "chmod 600"));
        }
        write_file(tok_path, "tok\n");
        assert_int_equal(chmod(tok_path, 0400), 0);
        expect_ok("api", "token_file", tok_path, &c);
        assert_int_equal(chmod(tok_path, 0600), 0);
        expect_ok("api", "token_file", tok_path, &c);

        /* mysql://...?password_file=: the same check, and the path made absolute */
        snprintf(text, sizeof(text), "mysql://u@db:3306/tg?password_file=token");
        expect_ok("store", "url", text, &c);
        snprintf(text, sizeof(text), "mysql://u@db:3306/tg?password_file=%s/token", real_dir);
        assert_string_equal(c.store_url, text);
        assert_int_equal(chmod(tok_path, 0644), 0);
        assert_int_equal(load_one("store", "url", "mysql://u@db:3306/tg?password_file=token", &c,
                                  err, sizeof(err)),
                         TG_ECONFIG);
        assert_non_null(strstr(err, "store.url: "));
        assert_non_null(strstr(err, "chmod 600"));
        assert_int_equal(chmod(tok_path, 0600), 0);
        expect_bad("store", "url", "mysql://u@db:3306/tg?password_file=/nonexistent/pw");
        expect_bad("store", "url", "mysql://u@db:3306/tg?pasword_file=token");
        /* the url is never quoted (it may hold a password) */
        assert_int_equal(
            load_one("store", "url", "mysql://u:hunter2@db/tg?nope=1", &c, err, sizeof(err)),
            TG_ECONFIG);
        assert_null(strstr(err, "hunter2"));
        /* a socket path is resolved too, a name with odd bytes written encoded */
        expect_ok("store", "url", "mysql://u:p%40w@localhost/tg?socket=run/my%20sql.sock", &c);
        snprintf(text, sizeof(text), "mysql://u:p%%40w@localhost/tg?socket=%s/run/my%%20sql.sock",
                 real_dir);
        assert_string_equal(c.store_url, text);
        /* postgresql://: password_file and host (a socket directory) resolved,
         * sslmode kept as written, mysql's socket= unknown */
        expect_ok("store", "url", "postgresql://u@db/tg?sslmode=require&password_file=token", &c);
        snprintf(text, sizeof(text), "postgresql://u@db/tg?sslmode=require&password_file=%s/token",
                 real_dir);
        assert_string_equal(c.store_url, text);
        expect_ok("store", "url", "postgresql://u@/tg?host=run", &c);
        snprintf(text, sizeof(text), "postgresql://u@/tg?host=%s/run", real_dir);
        assert_string_equal(c.store_url, text);
        expect_bad("store", "url", "postgresql://u@db/tg?socket=run");
        expect_bad("store", "url", "postgresql://u@db/");
}

/* api.token_file holds up to four tokens, one a line: every one is kept,
 * the first is the one the CLI sends. */
static void test_token_lines(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512];

        write_file(tok_path, "new-token\n\nold-token\r\n");
        expect_ok("api", "token_file", tok_path, &c);
        assert_int_equal(c.api_token_count, 2);
        assert_string_equal(c.api_token, "new-token");
        assert_string_equal(c.api_tokens[0], "new-token");
        assert_string_equal(c.api_tokens[1], "old-token");
        write_file(tok_path, "a\nb\nc\nd\ne\n");
        assert_int_equal(load_one("api", "token_file", tok_path, &c, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, "at most 4 tokens"));
        write_file(tok_path, "good\nnot good\n");
        expect_bad("api", "token_file", tok_path);
        /* relative to the config's folder */
        write_file(tok_path, "rel\n");
        expect_ok("api", "token_file", "token", &c);
        assert_string_equal(c.api_token, "rel");
}

static void test_inline_comments(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512];

        assert_int_equal(load_text("[exit] # the gate\nmax_in_flight = 4 # four\n"
                                   "starts_per_second = 10\t; ten\nshares = 2;not a comment\n",
                                   &c, err, sizeof(err)),
                         TG_ECONFIG);
        assert_string_equal(err, "exit.shares: must be an integer in [1, 64], got \"2;not a "
                                 "comment\" (line 4)");
        assert_int_equal(load_text("[exit] # the gate\nmax_in_flight = 4 # four\n"
                                   "starts_per_second = 10\t; ten\n  # indented comment\n",
                                   &c, err, sizeof(err)),
                         0);
        assert_int_equal(c.exit.max_in_flight, 4);
        assert_true(c.exit.starts_per_second == 10.0);
        /* a '#' inside a value, without a space before it, stays */
        assert_int_equal(
            load_text("[provider]\nquery_path = /r/{operation_id}#x\n", &c, err, sizeof(err)), 0);
        assert_string_equal(c.provider_query_path, "/r/{operation_id}#x");
}

struct problems {
        unsigned n;
        int lines[16];
        char text[16][256];
};

static void collect(void *ctx, int line, const char *message)
{
        struct problems *p = ctx;
        if (p->n < 16) {
                p->lines[p->n] = line;
                snprintf(p->text[p->n], sizeof(p->text[0]), "%s", message);
        }
        p->n++;
}

/* config_check lists every problem, in line order, each with its line. */
static void test_check_lists_every_problem(void **state)
{
        (void)state;
        struct problems p;
        unsigned n = 0;

        memset(&p, 0, sizeof(p));
        write_file(cfg_path, "[exit]\nmax_inflight = 4\nstarts_per_second = fast\n"
                             "[provder]\nx = 1\n[retry]\nmax_attempts = 2\nmax_attempts = 3\n"
                             "just words\n");
        assert_int_equal(config_check(cfg_path, collect, &p, &n), 0);
        assert_int_equal(n, 5);
        assert_int_equal(p.n, 5);
        assert_int_equal(p.lines[0], 2);
        assert_string_equal(p.text[0], "exit.max_inflight: unknown key; did you mean "
                                       "exit.max_in_flight?");
        assert_int_equal(p.lines[1], 3);
        assert_non_null(strstr(p.text[1], "exit.starts_per_second: "));
        assert_int_equal(p.lines[2], 5);
        assert_string_equal(p.text[2], "provder.x: unknown section [provder]; did you mean "
                                       "[provider]?");
        assert_int_equal(p.lines[3], 8);
        assert_int_equal(p.lines[4], 9);
        assert_string_equal(p.text[4], "config: not a [section] or key = value line");

        /* the checks across keys carry the line of the key they blame */
        memset(&p, 0, sizeof(p));
        write_file(cfg_path, "[provider]\n\nconnect_timeout_ms = 5000\nkey_lifetime_s = 259200\n"
                             "[retention]\nkeep_days = 1\n[retry]\nkey_retention_s = 172800\n");
        assert_int_equal(config_check(cfg_path, collect, &p, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(p.lines[0], 3);
        assert_string_equal(p.text[0],
                            "provider.connect_timeout_ms: must be <= provider.timeout_ms (3000)");
        assert_int_equal(p.lines[1], 6);
        assert_non_null(strstr(p.text[1], "retention.keep_days: must be 0 (keep forever) or "
                                          "longer than"));

        memset(&p, 0, sizeof(p));
        write_file(cfg_path, "[retention]\nkeep_days = 0\n");
        assert_int_equal(config_check(cfg_path, collect, &p, &n), 0);
        assert_int_equal(n, 0);

        memset(&p, 0, sizeof(p));
        assert_true(config_check("/nonexistent/t.ini", collect, &p, &n) < 0);
        assert_int_equal(n, 1);
        assert_non_null(strstr(p.text[0], "/nonexistent/t.ini"));
}

struct names {
        unsigned n;
        char keys[8][64];
};

static void note_key(void *ctx, const char *section, const char *name)
{
        struct names *k = ctx;
        if (k->n < 8)
                snprintf(k->keys[k->n], sizeof(k->keys[0]), "%s.%s", section, name);
        k->n++;
}

/* What a reload compares: keys by value, secret files by contents too. */
static void test_diff(void **state)
{
        (void)state;
        struct tg_config a, b;
        struct names k;
        char err[512], text[512];

        write_file(tok_path, "one\n");
        snprintf(text, sizeof(text), "[api]\ntoken_file = %s\n[log]\nlevel = info\n", tok_path);
        assert_int_equal(load_text(text, &a, err, sizeof(err)), 0);
        assert_int_equal(load_text(text, &b, err, sizeof(err)), 0);
        assert_int_equal(config_diff(&a, &b, NULL, NULL), 0);
        write_file(tok_path, "two\none\n");
        snprintf(text, sizeof(text),
                 "[api]\ntoken_file = %s\n[log]\nlevel = debug\n[exit]\nmax_in_flight = 3\n"
                 "[classify]\nrule = post 500 => unknown\n",
                 tok_path);
        assert_int_equal(load_text(text, &b, err, sizeof(err)), 0);
        memset(&k, 0, sizeof(k));
        assert_int_equal(config_diff(&a, &b, note_key, &k), 4);
        assert_string_equal(k.keys[0], "api.token_file");
        assert_string_equal(k.keys[1], "exit.max_in_flight");
        assert_string_equal(k.keys[2], "classify.rule");
        assert_string_equal(k.keys[3], "log.level");

        /* a repeated key's lines show no value: they differ by their lines */
        assert_int_equal(
            load_text("[provider]\nbody_field = amount {amount}\n", &a, err, sizeof(err)), 0);
        assert_int_equal(
            load_text("[provider]\nbody_field = amount {amount}\n", &b, err, sizeof(err)), 0);
        assert_int_equal(config_diff(&a, &b, NULL, NULL), 0);
        assert_int_equal(
            load_text("[provider]\nbody_field = amount {amount}\nbody_field = note {reason}\n", &b,
                      err, sizeof(err)),
            0);
        memset(&k, 0, sizeof(k));
        assert_int_equal(config_diff(&a, &b, note_key, &k), 1);
        assert_string_equal(k.keys[0], "provider.body_field");
}

static void test_retention_keys(void **state)
{
        (void)state;
        struct tg_config c;
        char err[512];

        config_defaults(&c);
        assert_int_equal(c.retention_keep_ms, 90LL * 24 * 3600 * 1000);
        expect_ok("retention", "keep_days", "0", &c);
        assert_int_equal(c.retention_keep_ms, 0);
        expect_ok("retention", "keep_days", "3650", &c);
        assert_int_equal(c.retention_keep_ms, 3650LL * 24 * 3600 * 1000);
        expect_bad("retention", "keep_days", "-1");
        expect_bad("retention", "keep_days", "36501");
        expect_bad("retention", "keep_days", "1.5");
        expect_ok("retention", "prune_batch", "1000", &c);
        assert_int_equal(c.retention_prune_batch, 1000);
        expect_bad("retention", "prune_batch", "1");
        /* not shorter than an operation's life with the provider */
        assert_int_equal(
            load_text("[provider]\nkey_lifetime_s = 259200\n[retry]\nkey_retention_s = 172800\n"
                      "[retention]\nkeep_days = 2\n",
                      &c, err, sizeof(err)),
            TG_ECONFIG);
        assert_non_null(strstr(err, "retention.keep_days: must be 0"));
}

static void test_describe_scdoc(void **state)
{
        (void)state;
        char *doc = describe(CONFIG_DOC_SCDOC);

        assert_int_equal(strncmp(doc, "tollgate.ini(5)\n", 16), 0);
        assert_non_null(strstr(doc, "\n# [exit]\n"));
        assert_non_null(strstr(doc, "\n*starts\\_per\\_second* = 5\n\t"));
        assert_non_null(strstr(doc, "\n*keep\\_days* = 90\n\t"));
        assert_non_null(strstr(doc, "\n# SEE ALSO\n"));
        /* no stray markup: backticks are gone */
        assert_null(strstr(doc, "`sqlite://"));
        free(doc);
}

/* ---- [account.NAME] ------------------------------------------------------ */

/* Heap: a config carries TG_ACCOUNTS_MAX accounts. */
static struct tg_config *config_new(void)
{
        struct tg_config *c = calloc(1, sizeof(*c));
        assert_non_null(c);
        return c;
}

/* An account inherits what it does not set; what it sets is its own (the
 * top level stays as written); config_account_view() shows its values in
 * a whole config. */
static void test_accounts_override_and_inherit(void **state)
{
        (void)state;
        struct tg_config *c = config_new(), *view = config_new();
        const struct tg_account *eu, *us;
        char err[512];

        assert_int_equal(load_text("[exit]\nstarts_per_second = 8\nmax_in_flight = 12\n"
                                   "[retry]\ndeadline_s = 900\n"
                                   "[classify]\nrule = post 500 => unknown\n"
                                   "[account.eu]\nprovider.base_url = http://127.0.0.1:9191\n"
                                   "exit.starts_per_second = 20\nretry.deadline_s = 600\n"
                                   "classify.rule = query 404 => not_found\n"
                                   "[account.us]\n",
                                   c, err, sizeof(err)),
                         0);
        assert_int_equal(c->account_count, 2);
        eu = config_account_find(c, "eu");
        us = config_account_find(c, "us");
        assert_non_null(eu);
        assert_non_null(us);
        assert_null(config_account_find(c, "default"));
        assert_true(eu->declared);
        assert_int_equal(eu->line, 8);
        /* eu's own, and inherited */
        assert_string_equal(eu->settings->provider_base_url, "http://127.0.0.1:9191");
        assert_true(eu->settings->exit.starts_per_second == 20.0);
        assert_int_equal(eu->settings->exit.max_in_flight, 12);
        assert_int_equal(eu->settings->policy.deadline_ms, 600 * 1000);
        /* its rule replaced the inherited list */
        assert_int_equal(eu->settings->rule_count, 1);
        /* us sets nothing: the top level's */
        assert_string_equal(us->settings->provider_base_url, c->provider_base_url);
        assert_true(us->settings->exit.starts_per_second == 8.0);
        assert_int_equal(us->settings->policy.deadline_ms, 900 * 1000);
        assert_int_equal(us->settings->rule_count, 1);
        /* the top level stays the defaults */
        assert_string_equal(c->provider_base_url, "http://127.0.0.1:9090");
        assert_true(c->exit.starts_per_second == 8.0);
        /* the view: eu's values, the rest of the config as it is */
        assert_int_equal(config_account_view(c, eu, view), 0);
        assert_string_equal(view->provider_base_url, "http://127.0.0.1:9191");
        assert_true(view->exit.starts_per_second == 20.0);
        assert_int_equal(view->exit.max_in_flight, 12);
        assert_int_equal(view->policy.deadline_ms, 600 * 1000);
        assert_string_equal(view->store_url, c->store_url);
        assert_true(view->admission.max_backlog == c->admission.max_backlog);
        assert_int_equal(view->retention_keep_ms, c->retention_keep_ms);
        assert_int_equal(config_account_view(c, NULL, view), TG_EINVAL);
        /* a secret an account names is read relative to the file */
        write_file(tok_path, "whsec-eu\n");
        config_release(c);
        assert_int_equal(
            load_text("[account.eu]\nprovider.webhook_secret_file = token\n", c, err, sizeof(err)),
            0);
        eu = config_account_find(c, "eu");
        assert_non_null(eu);
        assert_string_equal(eu->settings->provider_webhook_secret, "whsec-eu");
        assert_string_equal(c->provider_webhook_secret, "");
        free(view);
        config_release(c);
        free(c);
}

/* A file without [account.*] is one account, default, with the top-level
 * values: it loads exactly as before. */
static void test_accounts_none_is_default(void **state)
{
        (void)state;
        struct tg_config *c = config_new(), *d = config_new();
        const struct tg_account *a;
        char err[512];

        assert_int_equal(load_text("[exit]\nstarts_per_second = 7\n", c, err, sizeof(err)), 0);
        assert_int_equal(c->account_count, 1);
        a = config_account_find(c, "default");
        assert_non_null(a);
        assert_false(a->declared);
        /* its values are the top level's: nothing of its own */
        assert_null(a->settings);
        assert_int_equal(config_account_view(c, a, d), 0);
        assert_true(d->exit.starts_per_second == 7.0);
        assert_memory_equal(&d->provider_base_url, &c->provider_base_url,
                            sizeof(c->provider_base_url));
        /* serving it changes nothing */
        *d = *c;
        config_accounts_serve(d);
        assert_memory_equal(d, c, sizeof(*c));
        /* the defaults file: the same bytes as config_defaults() in that folder */
        assert_int_equal(load_text("", c, err, sizeof(err)), 0);
        defaults_in_dir(d);
        assert_int_equal(config_diff(c, d, NULL, NULL), 0);
        free(d);
        config_release(c);
        free(c);
}

static void expect_load_error(const char *text, const char *want)
{
        struct tg_config *c = config_new();
        char err[512];

        assert_int_equal(load_text(text, c, err, sizeof(err)), TG_ECONFIG);
        if (strcmp(err, want) != 0)
                fail_msg("got \"%s\", want \"%s\"", err, want);
        config_release(c);
        free(c);
}

/* Bad names, a duplicate, a key an account may not set, an unknown key
 * with a did-you-mean: each an error naming it, with its line. */
static void test_accounts_errors(void **state)
{
        (void)state;
        expect_load_error("[account.EU]\n",
                          "account.EU: bad account name \"EU\": a NAME is 1 to 32 of a-z, 0-9, _ "
                          "and - (line 1)");
        expect_load_error("[account.]\n",
                          "account.: bad account name \"\": a NAME is 1 to 32 of a-z, 0-9, _ and - "
                          "(line 1)");
        expect_load_error("[account.abcdefghijklmnopqrstuvwxyz0123456]\n",
                          "account.abcdefghijklmnopqrstuvwxyz0123456: bad account name "
                          "\"abcdefghijklmnopqrstuvwxyz0123456\": a NAME is 1 to 32 of a-z, 0-9, _ "
                          "and - (line 1)");
        expect_load_error("[account.eu]\nexit.shares = 2\n[account.eu]\n",
                          "account.eu: [account.eu] appears twice (first at line 1) (line 3)");
        expect_load_error("[account.eu]\nstore.url = sqlite://x.db\n",
                          "account.eu.store.url: an account may not set this key (only the keys "
                          "of [provider], [exit], [retry] and [classify]) (line 2)");
        expect_load_error("[account.eu]\n\napi.listen = 127.0.0.1:1\n",
                          "account.eu.api.listen: an account may not set this key (only the keys "
                          "of [provider], [exit], [retry] and [classify]) (line 3)");
        expect_load_error("[account.eu]\nexit.max_inflight = 3\n",
                          "account.eu.exit.max_inflight: unknown key; did you mean "
                          "exit.max_in_flight? (line 2)");
        expect_load_error("[account.eu]\nexti.max_in_flight = 3\n",
                          "account.eu.exti.max_in_flight: unknown section exti; did you mean "
                          "exit.max_in_flight? (line 2)");
        expect_load_error("[account.eu]\nmax_in_flight = 3\n",
                          "account.eu.max_in_flight: an account's key is written with its "
                          "section, e.g. exit.starts_per_second (line 2)");
        expect_load_error("[account.eu]\nexit.shares = 2\nexit.shares = 3\n",
                          "account.eu.exit.shares: set more than once (first at line 2) (line 3)");
        /* a bad value: the setter's own message, under the account's name */
        expect_load_error("[exit]\nstarts_per_second = 5\n[account.eu]\nexit.starts_per_second = "
                          "fast\n",
                          "account.eu.exit.starts_per_second: must be a number in (0, 1e+09], "
                          "got \"fast\" (line 4)");
}

/* The checks across keys run on each account's view, and name it. */
static void test_accounts_cross_checks(void **state)
{
        (void)state;
        struct problems p;
        unsigned n = 0;

        /* the account's own key, with its line */
        memset(&p, 0, sizeof(p));
        write_file(cfg_path, "[exit]\nmax_in_flight = 4\n[account.us]\n[account.eu]\n"
                             "exit.shares = 8\n");
        assert_int_equal(config_check(cfg_path, collect, &p, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(p.lines[0], 5);
        assert_string_equal(p.text[0], "account.eu.exit.shares: must be <= exit.max_in_flight (4): "
                                       "each share needs at least one call in flight of the "
                                       "account's");
        /* an inherited value the account's key breaks: blames the key it set */
        memset(&p, 0, sizeof(p));
        write_file(cfg_path, "[exit]\nshares = 2\n[account.eu]\nexit.max_in_flight = 1\n");
        assert_int_equal(config_check(cfg_path, collect, &p, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(p.text[0], "account.eu.exit.shares: must be <= exit.max_in_flight (1): "
                                       "each share needs at least one call in flight of the "
                                       "account's");
        /* config_load's message names the account too */
        expect_load_error("[account.eu]\nprovider.connect_timeout_ms = 5000\n",
                          "account.eu.provider.connect_timeout_ms: must be <= provider.timeout_ms "
                          "(3000)");
        expect_load_error("[account.eu]\nprovider.auth = bearer\n",
                          "account.eu.provider.auth_secret_file: required when provider.auth is "
                          "bearer");
        /* an adaptive rate cannot move the shares' fixed windows */
        expect_load_error("[exit]\nadaptive = on\nshares = 2\n",
                          "exit.adaptive: not with exit.shares > 1 (2): the shares' windows are "
                          "cut from a fixed account rate");
        expect_load_error("[exit]\nshares = 2\n[account.eu]\nexit.adaptive = on\n",
                          "account.eu.exit.adaptive: not with exit.shares > 1 (2): the shares' "
                          "windows are cut from a fixed account rate");
}

/* Served: several accounts, or one not named default, are left as they
 * are (each is served through its view); exactly [account.default] is
 * served with its own values at the top level. */
static void test_accounts_serve(void **state)
{
        (void)state;
        struct tg_config *c = config_new(), *d = config_new(), *v = config_new();
        char err[512];

        assert_int_equal(load_text("[exit]\nstarts_per_second = 3\n[account.eu]\n[account.us]\n"
                                   "exit.starts_per_second = 8\n",
                                   c, err, sizeof(err)),
                         0);
        *d = *c;
        config_accounts_serve(d);
        assert_memory_equal(d, c, sizeof(*c));
        assert_int_equal(config_account_view(c, config_account_find(c, "us"), v), 0);
        assert_true(v->exit.starts_per_second == 8.0);
        assert_string_equal(v->view_of, "us");
        assert_int_equal(config_account_view(c, config_account_find(c, "eu"), v), 0);
        assert_true(v->exit.starts_per_second == 3.0);
        config_release(c);
        assert_int_equal(load_text("[account.eu]\n", c, err, sizeof(err)), 0);
        *d = *c;
        config_accounts_serve(d);
        assert_memory_equal(d, c, sizeof(*c));
        assert_true(d->accounts[0].declared);
        config_release(c);
        assert_int_equal(load_text("[exit]\nstarts_per_second = 3\n[account.default]\n"
                                   "exit.starts_per_second = 9\n",
                                   c, err, sizeof(err)),
                         0);
        assert_true(c->exit.starts_per_second == 3.0);
        config_accounts_serve(c);
        assert_true(c->exit.starts_per_second == 9.0);
        assert_false(c->accounts[0].declared);
        config_release(c);
        free(c);
        free(d);
        free(v);
}

/* A reload names an account's key under its section; config_section_base
 * gives the top-level section it is judged by. */
static void test_accounts_diff(void **state)
{
        (void)state;
        struct tg_config *a = config_new(), *b = config_new();
        struct names k;
        char err[512];

        assert_int_equal(
            load_text("[account.eu]\nexit.max_in_flight = 4\n[account.us]\n", a, err, sizeof(err)),
            0);
        assert_int_equal(
            load_text("[account.eu]\nexit.max_in_flight = 5\n[account.fr]\n", b, err, sizeof(err)),
            0);
        memset(&k, 0, sizeof(k));
        assert_int_equal(config_diff(a, b, note_key, &k), 3);
        assert_string_equal(k.keys[0], "account.eu.exit.max_in_flight");
        assert_string_equal(k.keys[1], "account.us");
        assert_string_equal(k.keys[2], "account.fr");
        assert_string_equal(config_section_base("account.eu.exit"), "exit");
        assert_string_equal(config_section_base("exit"), "exit");
        config_release(b);
        config_release(a);
        free(b);
        free(a);
}

/* A file of n accounts, each with its own base URL and rate. */
static void write_accounts(unsigned n)
{
        FILE *f = fopen(cfg_path, "w");

        assert_non_null(f);
        fputs("[exit]\nstarts_per_second = 5\n", f);
        for (unsigned i = 0; i < n; i++)
                fprintf(f,
                        "[account.a%u]\nprovider.base_url = http://127.0.0.1:%u\n"
                        "exit.max_in_flight = %u\n",
                        i, 10000 + i, 1 + i % 7);
        fclose(f);
}

/* Many accounts: TG_ACCOUNTS_MAX load, each with its own values (the list
 * grows on the heap), and one more is an error naming the section that
 * goes past the limit, with its line, in config check and config_load. */
static void test_accounts_many(void **state)
{
        (void)state;
        struct tg_config *c = config_new(), *v = config_new();
        const struct tg_account *last;
        struct problems p;
        char err[512], name[40], want[300];
        unsigned n = 0;

        write_accounts(TG_ACCOUNTS_MAX);
        assert_int_equal(config_load(cfg_path, c, err, sizeof(err)), 0);
        assert_int_equal(c->account_count, TG_ACCOUNTS_MAX);
        snprintf(name, sizeof(name), "a%u", TG_ACCOUNTS_MAX - 1);
        last = config_account_find(c, name);
        assert_non_null(last);
        assert_int_equal(config_account_view(c, last, v), 0);
        assert_int_equal(v->exit.max_in_flight, 1 + (TG_ACCOUNTS_MAX - 1) % 7);
        assert_true(v->exit.starts_per_second == 5.0);
        assert_string_equal(v->view_of, name);
        snprintf(want, sizeof(want), "http://127.0.0.1:%u", 10000 + TG_ACCOUNTS_MAX - 1);
        assert_string_equal(v->provider_base_url, want);
        /* --accounts past the first 64: bit i for account i, any i */
        {
                struct tg_account_set set;
                assert_int_equal(config_accounts_mask(c, "a0,a150,a1023", &set, err, sizeof(err)),
                                 0);
                assert_true(tg_account_set_has(&set, 0));
                assert_true(tg_account_set_has(&set, 150));
                assert_true(tg_account_set_has(&set, TG_ACCOUNTS_MAX - 1));
                assert_false(tg_account_set_has(&set, 1));
                assert_false(tg_account_set_has(&set, 149));
                assert_false(tg_account_set_empty(&set));
                assert_int_equal(config_accounts_mask(c, "a0,zz", &set, err, sizeof(err)),
                                 TG_EINVAL);
                assert_non_null(strstr(err, "\"zz\" is not an account"));
        }
        config_release(c);
        assert_int_equal(c->account_count, 1); /* the implicit default again */
        assert_null(c->accounts[0].settings);

        write_accounts(TG_ACCOUNTS_MAX + 1);
        snprintf(want, sizeof(want),
                 "account.a%u: more than %d accounts in one file (one process serves at most "
                 "%d; spread more over several files and dispatchers)",
                 TG_ACCOUNTS_MAX, TG_ACCOUNTS_MAX, TG_ACCOUNTS_MAX);
        memset(&p, 0, sizeof(p));
        assert_int_equal(config_check(cfg_path, collect, &p, &n), 0);
        assert_true(n >= 1);
        assert_string_equal(p.text[0], want);
        assert_int_equal(p.lines[0], 3 + 3 * TG_ACCOUNTS_MAX);
        assert_int_equal(config_load(cfg_path, c, err, sizeof(err)), TG_ECONFIG);
        assert_non_null(strstr(err, want));
        config_release(c);
        free(v);
        free(c);
}

/* The docs describe the section, and the INI file still loads as the
 * defaults (the section is commented out). */
static void test_accounts_documented(void **state)
{
        (void)state;
        const enum config_doc_format fmts[] = {CONFIG_DOC_INI, CONFIG_DOC_MARKDOWN,
                                               CONFIG_DOC_SCDOC};

        for (size_t i = 0; i < 3; i++) {
                char *doc = NULL;
                size_t len = 0;
                FILE *f = open_memstream(&doc, &len);
                assert_non_null(f);
                assert_int_equal(config_describe(f, fmts[i]), 0);
                fclose(f);
                assert_non_null(strstr(doc, "[account.NAME]"));
                assert_non_null(strstr(doc, "Sections an account may set: "));
                assert_non_null(strstr(doc, "[classify]"));
                free(doc);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defaults),
            cmocka_unit_test(test_interface_example),
            cmocka_unit_test(test_every_key_good),
            cmocka_unit_test(test_every_key_bad),
            cmocka_unit_test(test_cross_key_messages),
            cmocka_unit_test(test_provider_keys),
            cmocka_unit_test(test_unknown_and_syntax),
            cmocka_unit_test(test_long_line),
            cmocka_unit_test(test_missing_file),
            cmocka_unit_test(test_token_file),
            cmocka_unit_test(test_ui_keys),
            cmocka_unit_test(test_loopback_rule),
            cmocka_unit_test(test_schema_documented),
            cmocka_unit_test(test_describe_ini_loads_as_defaults),
            cmocka_unit_test(test_describe_markdown),
            cmocka_unit_test(test_secret_permissions),
            cmocka_unit_test(test_token_lines),
            cmocka_unit_test(test_inline_comments),
            cmocka_unit_test(test_check_lists_every_problem),
            cmocka_unit_test(test_diff),
            cmocka_unit_test(test_retention_keys),
            cmocka_unit_test(test_describe_scdoc),
            cmocka_unit_test(test_accounts_override_and_inherit),
            cmocka_unit_test(test_accounts_none_is_default),
            cmocka_unit_test(test_accounts_errors),
            cmocka_unit_test(test_accounts_cross_checks),
            cmocka_unit_test(test_accounts_serve),
            cmocka_unit_test(test_accounts_diff),
            cmocka_unit_test(test_accounts_many),
            cmocka_unit_test(test_accounts_documented),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
