/*
 * Unit tests of http_server over real loopback sockets (libcurl as the
 * client): port 0, the raw path, query arguments, headers both ways, the
 * body bound (by Content-Length and by a chunked body), request-target
 * checks, a failing handler, a NUL byte inside a header value (a space
 * to the handler), and the request read deadline (connections that drip
 * their head, or their body, are cut, so that slow clients at the
 * connection limit do not shut out everyone else).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "net/http_server.h"
#include "platform/clock.h"

#define MAX_BODY 1000

struct seen {
        int calls;
        char method[16];
        char path[256];
        char query[256];
        char arg[64];
        int arg_rc;
        char header[64];
        size_t body_len;
        int problem_status;
        bool fail;
        int64_t held_ms;
};

static int handler(const struct http_request *req, struct http_response *res, void *userdata)
{
        struct seen *s = userdata;
        const char *h = http_request_header(req, "x-test");

        s->calls++;
        snprintf(s->method, sizeof(s->method), "%s", req->method);
        snprintf(s->path, sizeof(s->path), "%s", req->path);
        snprintf(s->query, sizeof(s->query), "%s", req->query);
        s->arg[0] = '\0';
        s->arg_rc = http_request_arg(req, "a", s->arg, sizeof(s->arg));
        snprintf(s->header, sizeof(s->header), "%s", h ? h : "");
        s->body_len = req->body_len;
        s->problem_status = req->problem_status;
        s->held_ms = req->held_ms;
        if (s->fail)
                return TG_EIO;
        /* a long poll: held until 300 ms have passed, or for ever */
        if ((strcmp(req->path, "/hold") == 0 && req->held_ms < 300) ||
            strcmp(req->path, "/forever") == 0) {
                res->hold_ms = 100;
                return 0;
        }
        if (req->problem_status)
                return http_response_set(res, req->problem_status, "application/json", "{}", 2);
        http_response_add_header(res, "Retry-After", "7");
        return http_response_set(res, 200, "text/plain", "hello", 5);
}

struct reply {
        long status;
        char body[256];
        size_t body_len;
        bool retry_after;
};

static size_t on_body(char *ptr, size_t size, size_t n, void *userdata)
{
        struct reply *r = userdata;
        size_t len = size * n;
        size_t room = sizeof(r->body) - 1 - r->body_len;
        memcpy(r->body + r->body_len, ptr, len < room ? len : room);
        r->body_len += len < room ? len : room;
        return len;
}

static size_t on_header(char *ptr, size_t size, size_t n, void *userdata)
{
        struct reply *r = userdata;
        if (size * n >= 14 && strncasecmp(ptr, "Retry-After: 7", 14) == 0)
                r->retry_after = true;
        return size * n;
}

struct upload {
        size_t left;
};

static size_t on_read(char *buf, size_t size, size_t n, void *userdata)
{
        struct upload *u = userdata;
        size_t len = size * n < u->left ? size * n : u->left;
        memset(buf, 'x', len);
        u->left -= len;
        return len;
}

/* path is sent as is (no dot-segment squashing). body_len < 0: no body;
 * chunked: send body_len bytes without Content-Length. */
static struct reply fetch(uint16_t port, const char *method, const char *path, long body_len,
                          bool chunked)
{
        struct reply r;
        char url[512];
        CURL *c = curl_easy_init();
        struct curl_slist *headers = NULL;
        struct upload up = {.left = body_len > 0 ? (size_t)body_len : 0};
        char *body = NULL;

        memset(&r, 0, sizeof(r));
        assert_non_null(c);
        snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port, path);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
        headers = curl_slist_append(headers, "X-Test: v1");
        headers = curl_slist_append(headers, "Expect:");
        if (chunked) {
                headers = curl_slist_append(headers, "Transfer-Encoding: chunked");
                curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
                curl_easy_setopt(c, CURLOPT_READDATA, &up);
        } else if (body_len >= 0) {
                body = malloc((size_t)body_len + 1);
                assert_non_null(body);
                memset(body, 'x', (size_t)body_len);
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, body_len);
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        if (curl_easy_perform(c) == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
        r.body[r.body_len] = '\0';
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        free(body);
        return r;
}

static int setup(void **state)
{
        struct http_server_config cfg = {
            .host = "127.0.0.1",
            .port = 0,
            .max_connections = 16,
            .connection_timeout_s = 5,
            .max_body_bytes = MAX_BODY,
            .large_body_path = "/v1/refunds:batch",
            .large_body_bytes = 4 * MAX_BODY,
        };
        struct seen *s = calloc(1, sizeof(*s));
        struct http_server *server = NULL;
        void **pair = calloc(2, sizeof(void *));

        if (!s || !pair || http_server_start(&cfg, handler, s, &server) != 0)
                return -1;
        pair[0] = server;
        pair[1] = s;
        *state = pair;
        return 0;
}

static int teardown(void **state)
{
        void **pair = *state;
        http_server_stop(pair[0]);
        free(pair[1]);
        free(pair);
        return 0;
}

static void test_basic(void **state)
{
        void **pair = *state;
        struct http_server *server = pair[0];
        struct seen *s = pair[1];
        uint16_t port = http_server_port(server);
        struct reply r;

        assert_true(port != 0);
        r = fetch(port, "GET", "/v1/refunds/a%2Fb?a=1%202&b=x+y", -1, false);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "hello");
        assert_true(r.retry_after);
        assert_string_equal(s->method, "GET");
        assert_string_equal(s->path, "/v1/refunds/a%2Fb"); /* raw */
        assert_string_equal(s->query, "a=1%202&b=x+y");
        assert_int_equal(s->arg_rc, 0);
        assert_string_equal(s->arg, "1 2");
        assert_string_equal(s->header, "v1");

        r = fetch(port, "POST", "/p", 100, false);
        assert_int_equal(r.status, 200);
        assert_int_equal(s->body_len, 100);
        assert_int_equal(s->problem_status, 0);
        assert_int_equal(s->arg_rc, TG_ENOTFOUND);

        r = fetch(port, "POST", "/p", MAX_BODY, false);
        assert_int_equal(r.status, 200);
        assert_int_equal(s->body_len, MAX_BODY);
}

struct held_fetch {
        uint16_t port;
        struct reply r;
};

static void *fetch_forever(void *arg)
{
        struct held_fetch *f = arg;

        f->r = fetch(f->port, "GET", "/forever", -1, false);
        return NULL;
}

/* A held request is called again with the same path and query, answered
 * when the handler answers; others are served meanwhile; a stop answers
 * one still held with 503 and does not wait for it. */
static void test_hold(void **state)
{
        void **pair = *state;
        struct http_server *server = pair[0];
        struct seen *s = pair[1];
        uint16_t port = http_server_port(server);
        struct held_fetch f = {.port = port};
        tg_mono_ns t0 = clock_mono_now();
        pthread_t th;
        struct reply r;

        r = fetch(port, "GET", "/hold?a=q", -1, false);
        assert_int_equal(r.status, 200);
        assert_true(clock_mono_now() - t0 >= 300 * TG_NS_PER_MS);
        assert_true(s->calls >= 4); /* 0, ~100, ~200, ~300 ms */
        assert_true(s->held_ms >= 300);
        assert_string_equal(s->path, "/hold");
        assert_string_equal(s->arg, "q");

        assert_int_equal(pthread_create(&th, NULL, fetch_forever, &f), 0);
        while (http_server_held(server) == 0)
                clock_sleep_ns(10 * TG_NS_PER_MS);
        r = fetch(port, "GET", "/other", -1, false);
        assert_int_equal(r.status, 200);
        http_server_wake(server); /* called again at once, held again */
        t0 = clock_mono_now();
        http_server_stop(server);
        pair[0] = NULL;
        assert_true(clock_mono_now() - t0 < 2 * TG_NS_PER_S);
        pthread_join(th, NULL);
        assert_true(f.r.status == 503 || f.r.status == 0);
}

static void test_body_bound(void **state)
{
        void **pair = *state;
        struct seen *s = pair[1];
        uint16_t port = http_server_port(pair[0]);
        struct reply r;

        r = fetch(port, "POST", "/p", MAX_BODY + 1, false);
        assert_int_equal(r.status, 413);
        assert_int_equal(s->problem_status, 413);
        assert_int_equal(s->body_len, 0);

        r = fetch(port, "POST", "/p", 200, true);
        assert_int_equal(r.status, 200);
        assert_int_equal(s->body_len, 200);

        r = fetch(port, "POST", "/p", 100000, true);
        assert_int_equal(r.status, 413);
        assert_int_equal(s->problem_status, 413);
        assert_int_equal(s->body_len, 0);

        /* the server still answers afterwards */
        r = fetch(port, "GET", "/", -1, false);
        assert_int_equal(r.status, 200);

        /* the one large path (':' in a segment is an ordinary character) has
         * its own bound, by Content-Length and chunked; the query is no part
         * of the path, and no other path shares the bound */
        r = fetch(port, "POST", "/v1/refunds:batch?x=1", 4 * MAX_BODY, false);
        assert_int_equal(r.status, 200);
        assert_int_equal(s->problem_status, 0);
        assert_int_equal(s->body_len, 4 * MAX_BODY);
        assert_string_equal(s->path, "/v1/refunds:batch");
        r = fetch(port, "POST", "/v1/refunds:batch", 4 * MAX_BODY + 1, false);
        assert_int_equal(r.status, 413);
        r = fetch(port, "POST", "/v1/refunds:batch", 4 * MAX_BODY + 1, true);
        assert_int_equal(r.status, 413);
        assert_int_equal(s->body_len, 0);
        r = fetch(port, "POST", "/v1/refunds:batchx", MAX_BODY + 1, false);
        assert_int_equal(r.status, 413);
        r = fetch(port, "POST", "/v1/refunds", MAX_BODY + 1, false);
        assert_int_equal(r.status, 413);
}

static void test_targets(void **state)
{
        void **pair = *state;
        struct seen *s = pair[1];
        uint16_t port = http_server_port(pair[0]);
        static const char *const bad[] = {"/a/../b", "/a/./b", "/..", "//x", "/a//b", "/a/"};
        struct reply r;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                s->calls = 0;
                r = fetch(port, "GET", bad[i], -1, false);
                if (r.status != 400)
                        fail_msg("%s: status %ld", bad[i], r.status);
                assert_int_equal(s->problem_status, 400);
                assert_int_equal(s->calls, 1);
        }
        r = fetch(port, "GET", "/...", -1, false);
        assert_int_equal(r.status, 200);
}

static void test_failing_handler(void **state)
{
        void **pair = *state;
        struct seen *s = pair[1];
        struct reply r;

        s->fail = true;
        r = fetch(http_server_port(pair[0]), "GET", "/x", -1, false);
        s->fail = false;
        assert_int_equal(r.status, 500);
        assert_non_null(strstr(r.body, "\"internal\""));
}

/* ---- raw sockets ------------------------------------------------------------------ */

static int connect_to(uint16_t port)
{
        struct sockaddr_in a;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        memset(&a, 0, sizeof(a));
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        return fd;
}

/* Sends bytes as they are and reads the answer's status line. */
static int raw_status(uint16_t port, const char *bytes, size_t len)
{
        char buf[512];
        size_t got = 0;
        int fd = connect_to(port), status = 0;
        ssize_t n;

        assert_int_equal(send(fd, bytes, len, MSG_NOSIGNAL), (ssize_t)len);
        while (got < sizeof(buf) - 1 && (n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
                got += (size_t)n;
        buf[got] = '\0';
        close(fd);
        if (got > 12 && strncmp(buf, "HTTP/1.1 ", 9) == 0)
                status = (int)strtol(buf + 9, NULL, 10);
        return status;
}

/* A NUL byte inside a header value: the handler sees the whole value, the
 * NUL a space, never a shorter string that stops at it (wherever the
 * header is, whatever the line ends, with a body after it); a value that
 * ends in spaces or is empty is left as it is; an obsolete folded line is
 * refused. */
static void test_nul_in_header(void **state)
{
        void **pair = *state;
        struct seen *s = pair[1];
        uint16_t port = http_server_port(pair[0]);
        static const struct {
                const char *bytes;
                size_t len;
                int status;
                const char *seen;
        } cases[] = {
#define RAW(lit) lit, sizeof(lit) - 1
            {RAW("GET /n HTTP/1.1\r\nHost: x\r\nX-Test: v1\0zz\r\nConnection: close\r\n\r\n"), 200,
             "v1 zz"},
            {RAW("GET /n HTTP/1.1\r\nX-Test: v1\0\0z\0\r\nHost: x\r\nConnection: close\r\n\r\n"),
             200, "v1  z"},
            {RAW("POST /n HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n"
                 "X-Test: v1\0zz\r\n\r\n{}"),
             200, "v1 zz"},
            {RAW("POST /n HTTP/1.1\nHost: x\nConnection: close\nContent-Length: 2\n"
                 "X-Test: v1\0zz\n\n{}"),
             200, "v1 zz"},
            {RAW("GET /n HTTP/1.1\r\nHost: x\r\nX-Test:\0zz\r\nConnection: close\r\n\r\n"), 200,
             " zz"},
            {RAW("POST /n HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n"
                 "X-Test: v1  \r\n\r\n{}"),
             200, "v1  "},
            {RAW("GET /n HTTP/1.1\nHost: x\nX-Test: v1\nConnection: close\n\n"), 200, "v1"},
            {RAW("GET /n HTTP/1.1\r\nHost: x\r\nX-Test:\r\nConnection: close\r\n\r\n"), 200, ""},
            {RAW("GET /n HTTP/1.1\r\nHost: x\r\nX-Test: a\r\n b\r\nConnection: close\r\n\r\n"), 400,
             NULL},
#undef RAW
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                snprintf(s->header, sizeof(s->header), "unset");
                int status = raw_status(port, cases[i].bytes, cases[i].len);
                if (status != cases[i].status)
                        fail_msg("case %zu: status %d", i, status);
                if (cases[i].seen && strcmp(s->header, cases[i].seen) != 0)
                        fail_msg("case %zu: the handler saw \"%s\"", i, s->header);
        }
}

/* Slow clients: `n` connections that each send a request line, then one
 * header line (or, with body, one body byte) every 50 ms and never finish,
 * reconnecting when the server cuts them, until `until`. */
struct drip {
        uint16_t port;
        unsigned n;
        bool body;
        tg_mono_ns until;
        unsigned reconnects;
};

static int drip_open(const struct drip *d)
{
        static const char head[] = "GET /slow HTTP/1.1\r\nHost: x\r\n";
        static const char post[] = "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n";
        int fd = connect_to(d->port);

        if (d->body)
                (void)send(fd, post, sizeof(post) - 1, MSG_NOSIGNAL);
        else
                (void)send(fd, head, sizeof(head) - 1, MSG_NOSIGNAL);
        return fd;
}

static void *dripper(void *arg)
{
        struct drip *d = arg;
        int fds[32];

        assert_true(d->n <= 32);
        for (unsigned i = 0; i < d->n; i++)
                fds[i] = drip_open(d);
        while (clock_mono_now() < d->until) {
                for (unsigned i = 0; i < d->n; i++) {
                        const char *more = d->body ? "x" : "X-Slow: 1\r\n";
                        if (send(fds[i], more, strlen(more), MSG_NOSIGNAL) < 0) {
                                close(fds[i]);
                                fds[i] = drip_open(d);
                                d->reconnects++;
                        }
                }
                clock_sleep_ns(50 * TG_NS_PER_MS);
        }
        for (unsigned i = 0; i < d->n; i++)
                close(fds[i]);
        return NULL;
}

/* Every connection the server may hold is taken by a client that drips
 * its request and never finishes (MHD's idle timeout, 5 s here, is reset
 * by every line): a normal request still gets in within about the read
 * deadline, because each slow connection is cut when its request has not
 * arrived whole in time. Then the same with slow bodies. */
static void test_read_deadline(void **state)
{
        (void)state;
        struct http_server_config cfg = {
            .host = "127.0.0.1",
            .port = 0,
            .max_connections = 4,
            .connection_timeout_s = 5,
            .max_body_bytes = MAX_BODY,
            .request_read_timeout_ms = 300,
        };
        struct seen s = {0};
        struct http_server *server = NULL;

        assert_int_equal(http_server_start(&cfg, handler, &s, &server), 0);
        for (int body = 0; body < 2; body++) {
                struct drip d = {.port = http_server_port(server),
                                 .n = 8, /* twice the connections the server holds */
                                 .body = body,
                                 .until = clock_mono_now() + 3 * TG_NS_PER_S};
                pthread_t t;
                uint64_t cuts = http_server_read_timeouts(server);

                assert_int_equal(pthread_create(&t, NULL, dripper, &d), 0);
                clock_sleep_ns(200 * TG_NS_PER_MS); /* they hold every connection */
                tg_mono_ns t0 = clock_mono_now();
                struct reply r = fetch(d.port, "GET", "/normal", -1, false);
                tg_mono_ns took = clock_mono_now() - t0;
                pthread_join(t, NULL);
                if (r.status != 200)
                        fail_msg("%s: a normal request got %ld after %lld ms",
                                 body ? "body" : "head", r.status,
                                 (long long)(took / TG_NS_PER_MS));
                /* it waited for a slot, not for the slow clients to give up */
                assert_true(took < 2500 * TG_NS_PER_MS);
                assert_true(d.reconnects > 0);
                assert_true(http_server_read_timeouts(server) > cuts);
        }
        /* a request that arrives whole in time is never cut, kept alive or not */
        struct reply r = fetch(http_server_port(server), "POST", "/p", 100, false);
        assert_int_equal(r.status, 200);
        http_server_stop(server);
}

static void test_args_and_responses(void **state)
{
        (void)state;
        struct http_request req;
        struct http_response res;
        char buf[8];

        memset(&req, 0, sizeof(req));
        req.query = "a=%zz&b=%00&c=12345678&d&e=%4";
        assert_int_equal(http_request_arg(&req, "a", buf, sizeof(buf)), TG_EPARSE);
        assert_int_equal(http_request_arg(&req, "b", buf, sizeof(buf)), TG_EPARSE);
        assert_int_equal(http_request_arg(&req, "c", buf, sizeof(buf)), TG_EFULL);
        assert_int_equal(http_request_arg(&req, "d", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "");
        assert_int_equal(http_request_arg(&req, "e", buf, sizeof(buf)), TG_EPARSE);
        assert_int_equal(http_request_arg(&req, "f", buf, sizeof(buf)), TG_ENOTFOUND);

        http_response_init(&res);
        assert_int_equal(http_response_add_header(&res, "X-A", "ok"), 0);
        assert_int_equal(http_response_add_header(&res, "X-B", "bad\r\nInjected: 1"), TG_EINVAL);
        assert_int_equal(http_response_add_header(&res, "X C", "v"), TG_EINVAL);
        for (int i = 1; i < HTTP_RESPONSE_MAX_HEADERS; i++)
                assert_int_equal(http_response_add_header(&res, "X-N", "v"), 0);
        assert_int_equal(http_response_add_header(&res, "X-N", "v"), TG_EFULL);
        assert_int_equal(http_response_set(&res, 99, "text/plain", "x", 1), TG_EINVAL);
        assert_int_equal(http_response_set(&res, 200, "text/plain", "x", 1), 0);
        http_response_release(&res);
        http_response_release(NULL);
        http_server_stop(NULL);
}

static void test_bad_config(void **state)
{
        (void)state;
        struct http_server_config cfg = {
            .host = "not a host name at all",
            .port = 0,
            .max_connections = 1,
            .connection_timeout_s = 1,
            .max_body_bytes = 10,
        };
        struct http_server *server = NULL;

        assert_int_equal(http_server_start(&cfg, handler, NULL, &server), TG_EINVAL);
        assert_null(server);
        cfg.host = "127.0.0.1";
        cfg.max_connections = 0;
        assert_int_equal(http_server_start(&cfg, handler, NULL, &server), TG_EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_basic, setup, teardown),
            cmocka_unit_test_setup_teardown(test_body_bound, setup, teardown),
            cmocka_unit_test_setup_teardown(test_hold, setup, teardown),
            cmocka_unit_test_setup_teardown(test_targets, setup, teardown),
            cmocka_unit_test_setup_teardown(test_failing_handler, setup, teardown),
            cmocka_unit_test_setup_teardown(test_nul_in_header, setup, teardown),
            cmocka_unit_test(test_read_deadline),
            cmocka_unit_test(test_args_and_responses),
            cmocka_unit_test(test_bad_config),
        };
        int r;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        curl_global_cleanup();
        return r;
}
