/*
 * tollgate-stub: flags, signals and lifecycle of the provider stand-in. It
 * parses every flag before starting anything (a bad flag exits 2 naming the
 * flag), writes --port-file only once listening, and on SIGTERM/SIGINT stops
 * the server and writes the arrival record (--record) before exiting 0.
 */
#include "core/tg_error.h"
#include "stub.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define SECRET_MAX (64 * 1024)
#define FILE_MAX   (1024 * 1024)

/* In parts: ISO C only promises string literals of 4095 bytes. */
static const char *const usage[] = {
    "usage: tollgate-stub [flags]\n"
    "\n"
    "The refund provider stand-in (shared/PROVIDER.md) with fault injection.\n"
    "Contract: POST /v1/refunds, GET /v1/refunds/{operation_id}.\n"
    "Admin:    GET /_stub/state, GET /_stub/ledger, GET /_stub/arrivals?since=N[&limit=M]\n"
    "          (JSON lines, entries numbered > N), POST /_stub/mode, POST /_stub/reset,\n"
    "          POST /_stub/expire-keys [{\"key\":\"...\"}].\n"
    "\n"
    "Flags (--flag VALUE or --flag=VALUE):\n"
    "  --listen HOST:PORT      listen address, numeric (default 127.0.0.1:9090; port 0 picks\n"
    "                          a free port; [::1]:PORT for IPv6)\n"
    "  --port-file FILE        write the actual port to FILE once listening\n"
    "  --timeline SPEC|@FILE   scripted phases (format below); default: fast forever\n"
    "  --time-scale F          multiply every phase duration by F (0.1 = ten minutes in one)\n"
    "  --mode MODE[:PARAM]     one mode forever (instead of --timeline)\n"
    "  --delay-ms N            default delay of slow (3000)\n"
    "  --retry-after N|none    Retry-After of unavailable/limited, seconds (1)\n"
    "  --retry-after-date      send Retry-After as an HTTP-date N seconds ahead\n"
    "  --processing-ms N       default time queries answer \"processing\" in mode\n"
    "                          processing (2000)\n"
    "  --key-retention-s N     idempotency key retention, seconds (86400)\n"
    "  --seed N                seed of mix draws, refund ids and webhook drops (1)\n"
    "  --mix M=W,...           weights of mode mix (fast=70,slow=10,drop=5,e500=5,\n"
    "                          unavailable=5,limited=5)\n"
    "  --query-mode MODE       mode of GET queries, independent of POSTs: fast, slow,\n"
    "                          drop, unavailable, limited, e500 (fast)\n"
    "  --query-delay-ms N      default delay of query-mode slow (3000)\n"
    "  --record FILE           write every arrival as JSON lines to FILE on exit\n"
    "  --max-body N            largest POST body in bytes; larger gets 413 (65536)\n"
    "  --max-records N         arrival entries kept; later ones only counted (1000000)\n"
    "  --max-keys N            operations the ledger holds (1000000)\n"
    "  --max-connections N     open connections (4096)\n"
    "  --webhook-url URL       after each execution (or fail) POST a signed event to URL\n"
    "  --webhook-secret-file F HMAC-SHA256 secret (file content, one trailing newline\n"
    "                          stripped); required with --webhook-url\n"
    "  --webhook-delay-ms N    delay before each event is sent (0)\n"
    "  --webhook-drop-rate F   fraction of events never sent, 0..1 (0)\n"
    "  --help                  this text\n"
    "\n",
    "Modes (the mode applied to a POST is the one in force at its arrival):\n"
    "  fast             execute, answer 201 at once\n"
    "  slow[:D]         wait D ms, then execute and answer (executes even if the client\n"
    "                   gave up; a second request with the key meanwhile gets 409)\n"
    "  drop[:D]         (wait D ms,) execute, close the connection without an answer\n"
    "  reject           422 invalid_request, nothing executed\n"
    "  unavailable[:R]  503 temporarily_unavailable with Retry-After, nothing executed\n"
    "  limited[:R]      429 rate_limited with Retry-After, nothing executed\n"
    "                   R: N seconds, @N HTTP-date N seconds ahead, - no header\n"
    "  e500[:D]         (wait D ms,) execute, answer 500\n"
    "  processing[:P]   execute, answer 201; queries say \"processing\" for P ms\n"
    "  fail[:CODE]      take the request, refuse the refund for good (nothing\n"
    "                   executed), answer 500; queries answer 200 status failed with\n"
    "                   failure_code CODE (insufficient_funds); a replay of the key\n"
    "                   gets the first stored response, the same 500\n"
    "  refuse           close the listening socket: connects are refused, requests on\n"
    "                   already open connections are dropped; reopens after the phase\n"
    "  mix[:M=W,...]    per request a weighted draw (seeded, reproducible) of the\n"
    "                   modes above except refuse\n"
    "Replays, 409 and 422-reused answers go through the same mode (delayed by slow,\n"
    "dropped by drop, turned into 500 by e500). After drop/e500/slow the key's\n"
    "stored response is the success body, replayed with 200; after fail it is the\n"
    "500, replayed as it was (a failed key stays failed until it expires).\n"
    "\n",
    "Timeline: phases separated by ';' or new lines, each MODE[:PARAM] [DURATION];\n"
    "DURATION is N with ms, s, m or h (bare N = seconds). Only the last phase may omit\n"
    "it (lasts forever); after the last timed phase the mode is fast. '#' comments.\n"
    "Phases are timed from stub start on the monotonic clock; POST /_stub/mode with a\n"
    "timeline restarts it from that moment. The seed's ten slow minutes:\n"
    "  tollgate-stub --timeline 'fast 1m; slow:3000 5m; drop 2m; reject 1m; fast'\n"
    "and the same compressed to one minute: add --time-scale 0.1.\n"
    "\n"
    "POST /_stub/mode body (all optional): {\"mode\":\"slow\", \"delay_ms\":3000,\n"
    "  \"processing_ms\":N, \"retry_after\":N, \"retry_after_date\":true, "
    "\"mix\":\"fast=9,drop=1\"}\n"
    "  or {\"timeline\":\"drop 5s; fast\"}; plus {\"query_mode\":\"slow\", \"query_delay_ms\":N,\n"
    "  \"webhook_delay_ms\":N, \"webhook_drop_rate\":F}. Answers the new state.\n",
    NULL};

static int bad_flag(const char *flag, const char *why)
{
        fprintf(stderr, "tollgate-stub: %s: %s (try --help)\n", flag, why);
        return 2;
}

static int parse_i64(const char *s, int64_t min, int64_t max, int64_t *ret)
{
        char *end;
        long long v;
        if (!s || !*s)
                return TG_EINVAL;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return TG_EINVAL;
        *ret = v;
        return 0;
}

/* Reads a whole small file into a NUL-terminated malloc'd buffer. */
static int read_file(const char *path, char **ret_text, size_t *ret_len)
{
        FILE *f = fopen(path, "rb");
        char *buf;
        size_t n;
        if (!f)
                return -errno;
        buf = malloc(FILE_MAX + 1);
        if (!buf) {
                fclose(f);
                return TG_ENOMEM;
        }
        n = fread(buf, 1, FILE_MAX + 1, f);
        fclose(f);
        if (n > FILE_MAX) {
                free(buf);
                return TG_EFULL;
        }
        buf[n] = '\0';
        *ret_text = buf;
        *ret_len = n;
        return 0;
}

static int split_listen(const char *s, char *host, size_t cap, uint16_t *ret_port)
{
        const char *colon;
        size_t hlen;
        int64_t port;
        if (s[0] == '[') {
                const char *close = strchr(s, ']');
                if (!close || close[1] != ':')
                        return TG_EINVAL;
                hlen = (size_t)(close - s - 1);
                s++;
                colon = close + 1;
        } else {
                colon = strrchr(s, ':');
                if (!colon)
                        return TG_EINVAL;
                hlen = (size_t)(colon - s);
        }
        if (hlen == 0 || hlen >= cap || parse_i64(colon + 1, 0, 65535, &port) < 0)
                return TG_EINVAL;
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        *ret_port = (uint16_t)port;
        return 0;
}

static int write_port_file(const char *path, uint16_t port)
{
        char tmp[4096];
        FILE *f;
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        f = fopen(tmp, "w");
        if (!f)
                return -errno;
        fprintf(f, "%u\n", (unsigned)port);
        if (fclose(f) != 0 || rename(tmp, path) != 0)
                return -errno;
        return 0;
}

static int write_record(struct stub_server *srv, const char *path)
{
        char tmp[4096];
        FILE *f;
        int rc;
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        f = fopen(tmp, "w");
        if (!f)
                return -errno;
        rc = server_write_record(srv, f);
        if (fclose(f) != 0 && rc == 0)
                rc = -errno;
        if (rc == 0 && rename(tmp, path) != 0)
                rc = -errno;
        return rc;
}

static void raise_fd_limit(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
}

struct opts {
        char host[256];
        const char *port_file;
        const char *timeline;
        const char *mode;
        const char *record;
        const char *secret_file;
        struct stub_config cfg;
};

/* Returns 0 to run, 1 after --help, 2 on a bad flag (message printed). */
static int parse_flags(int argc, char **argv, struct opts *o)
{
        struct stub_config *c = &o->cfg;
        const char *why = NULL;
        int64_t v;

        snprintf(o->host, sizeof(o->host), "127.0.0.1");
        c->host = o->host;
        c->port = 9090;
        c->time_scale = 1.0;
        c->delay_ms = 3000;
        c->ra_seconds = 1;
        c->ra_form = STUB_RA_SECONDS;
        c->processing_ms = 2000;
        c->key_retention_s = 86400;
        c->seed = 1;
        c->query_delay_ms = 3000;
        c->max_body = 64 * 1024;
        c->max_records = 1000000;
        c->max_keys = 1000000;
        c->max_connections = 4096;
        stub_mix_parse("fast=70,slow=10,drop=5,e500=5,unavailable=5,limited=5", 54, &why,
                       c->mix_weights);
        stub_mode_parse("fast", 4, &why, &c->query_spec);

        for (int i = 1; i < argc; i++) {
                char name[64];
                const char *arg = argv[i], *val = NULL;
                const char *eq = strchr(arg, '=');
                size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
                if (strncmp(arg, "--", 2) != 0 || nlen >= sizeof(name))
                        return bad_flag(arg, "unknown argument");
                memcpy(name, arg, nlen);
                name[nlen] = '\0';
                if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
                        for (size_t k = 0; usage[k]; k++)
                                fputs(usage[k], stdout);
                        return 1;
                }
                if (strcmp(name, "--retry-after-date") == 0) {
                        if (eq)
                                return bad_flag(name, "takes no value");
                        c->ra_form = STUB_RA_DATE;
                        continue;
                }
                if (eq) {
                        val = eq + 1;
                } else {
                        if (i + 1 >= argc)
                                return bad_flag(name, "needs a value");
                        val = argv[++i];
                }

                if (strcmp(name, "--listen") == 0) {
                        if (split_listen(val, o->host, sizeof(o->host), &c->port) < 0)
                                return bad_flag(name, "must be HOST:PORT (numeric host)");
                } else if (strcmp(name, "--port-file") == 0) {
                        o->port_file = val;
                } else if (strcmp(name, "--timeline") == 0) {
                        o->timeline = val;
                } else if (strcmp(name, "--time-scale") == 0) {
                        char *end;
                        double f = strtod(val, &end);
                        if (!*val || *end || !isfinite(f) || f <= 0)
                                return bad_flag(name, "must be a number > 0");
                        c->time_scale = f;
                } else if (strcmp(name, "--mode") == 0) {
                        o->mode = val;
                } else if (strcmp(name, "--delay-ms") == 0) {
                        if (parse_i64(val, 0, 86400000, &c->delay_ms) < 0)
                                return bad_flag(name, "must be milliseconds 0..86400000");
                } else if (strcmp(name, "--retry-after") == 0) {
                        if (strcmp(val, "none") == 0)
                                c->ra_form = STUB_RA_NONE;
                        else if (parse_i64(val, 0, 86400 * 7, &c->ra_seconds) < 0)
                                return bad_flag(name, "must be seconds 0..604800 or none");
                } else if (strcmp(name, "--processing-ms") == 0) {
                        if (parse_i64(val, 0, 86400000, &c->processing_ms) < 0)
                                return bad_flag(name, "must be milliseconds 0..86400000");
                } else if (strcmp(name, "--key-retention-s") == 0) {
                        if (parse_i64(val, 1, 86400 * 365, &c->key_retention_s) < 0)
                                return bad_flag(name, "must be seconds 1..31536000");
                } else if (strcmp(name, "--seed") == 0) {
                        if (parse_i64(val, 0, INT64_MAX, &v) < 0)
                                return bad_flag(name, "must be an integer >= 0");
                        c->seed = (uint64_t)v;
                } else if (strcmp(name, "--mix") == 0) {
                        if (stub_mix_parse(val, strlen(val), &why, c->mix_weights) < 0)
                                return bad_flag(name, why);
                } else if (strcmp(name, "--query-mode") == 0) {
                        if (stub_mode_parse(val, strlen(val), &why, &c->query_spec) < 0)
                                return bad_flag(name, why);
                        if (c->query_spec.mode == STUB_REFUSE || c->query_spec.mode == STUB_MIX ||
                            c->query_spec.mode == STUB_REJECT ||
                            c->query_spec.mode == STUB_PROCESSING ||
                            c->query_spec.mode == STUB_FAIL)
                                return bad_flag(name, "must be fast, slow, drop, unavailable, "
                                                      "limited or e500");
                } else if (strcmp(name, "--query-delay-ms") == 0) {
                        if (parse_i64(val, 0, 86400000, &c->query_delay_ms) < 0)
                                return bad_flag(name, "must be milliseconds 0..86400000");
                } else if (strcmp(name, "--record") == 0) {
                        o->record = val;
                } else if (strcmp(name, "--max-body") == 0) {
                        if (parse_i64(val, 1, 64 * 1024 * 1024, &v) < 0)
                                return bad_flag(name, "must be bytes 1..67108864");
                        c->max_body = (size_t)v;
                } else if (strcmp(name, "--max-records") == 0) {
                        if (parse_i64(val, 0, 100000000, &v) < 0)
                                return bad_flag(name, "must be 0..100000000");
                        c->max_records = (size_t)v;
                } else if (strcmp(name, "--max-keys") == 0) {
                        if (parse_i64(val, 1, 100000000, &v) < 0)
                                return bad_flag(name, "must be 1..100000000");
                        c->max_keys = (size_t)v;
                } else if (strcmp(name, "--max-connections") == 0) {
                        if (parse_i64(val, 16, 1000000, &v) < 0)
                                return bad_flag(name, "must be 16..1000000");
                        c->max_connections = (unsigned)v;
                } else if (strcmp(name, "--webhook-url") == 0) {
                        if (strncmp(val, "http://", 7) != 0 && strncmp(val, "https://", 8) != 0)
                                return bad_flag(name, "must be an http:// or https:// URL");
                        c->webhook_url = val;
                } else if (strcmp(name, "--webhook-secret-file") == 0) {
                        o->secret_file = val;
                } else if (strcmp(name, "--webhook-delay-ms") == 0) {
                        if (parse_i64(val, 0, 86400000, &c->webhook_delay_ms) < 0)
                                return bad_flag(name, "must be milliseconds 0..86400000");
                } else if (strcmp(name, "--webhook-drop-rate") == 0) {
                        char *end;
                        double f = strtod(val, &end);
                        if (!*val || *end || !(f >= 0.0 && f <= 1.0))
                                return bad_flag(name, "must be a number in [0, 1]");
                        c->webhook_drop_rate = f;
                } else {
                        return bad_flag(name, "unknown flag");
                }
        }
        return 0;
}

/* Turns --timeline/--mode and the webhook secret file into config. */
static int finish_config(struct opts *o, char **ret_secret)
{
        struct stub_config *c = &o->cfg;
        const char *why = NULL;
        *ret_secret = NULL;
        if (o->timeline && o->mode)
                return bad_flag("--mode", "give --mode or --timeline, not both");
        if (o->timeline) {
                char *text = NULL;
                size_t len;
                int rc;
                if (o->timeline[0] == '@') {
                        rc = read_file(o->timeline + 1, &text, &len);
                        if (rc < 0) {
                                fprintf(stderr, "tollgate-stub: --timeline: %s: %s\n",
                                        o->timeline + 1, tg_strerror(rc));
                                return 2;
                        }
                }
                rc = stub_timeline_parse(text ? text : o->timeline, c->time_scale, &why,
                                         &c->timeline);
                free(text);
                if (rc < 0)
                        return bad_flag("--timeline", why);
        } else {
                struct stub_mode_spec s;
                const char *m = o->mode ? o->mode : "fast";
                if (stub_mode_parse(m, strlen(m), &why, &s) < 0)
                        return bad_flag("--mode", why);
                stub_timeline_single(&s, &c->timeline);
        }
        if (c->webhook_url && !o->secret_file)
                return bad_flag("--webhook-url", "needs --webhook-secret-file");
        if (o->secret_file) {
                char *text;
                size_t len;
                int rc;
                if (!c->webhook_url)
                        return bad_flag("--webhook-secret-file", "needs --webhook-url");
                rc = read_file(o->secret_file, &text, &len);
                if (rc < 0 || len > SECRET_MAX) {
                        fprintf(stderr, "tollgate-stub: --webhook-secret-file: %s: %s\n",
                                o->secret_file, rc < 0 ? tg_strerror(rc) : "too large");
                        free(rc < 0 ? NULL : text);
                        return 2;
                }
                if (len > 0 && text[len - 1] == '\n')
                        text[--len] = '\0';
                if (len > 0 && text[len - 1] == '\r')
                        text[--len] = '\0';
                if (len == 0) {
                        free(text);
                        return bad_flag("--webhook-secret-file", "secret is empty");
                }
                c->webhook_secret = text;
                c->webhook_secret_len = len;
                *ret_secret = text;
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct opts *o = calloc(1, sizeof(*o));
        struct stub_server *srv = NULL;
        char *secret = NULL;
        sigset_t set;
        int sig = 0, rc, status = 0;

        if (!o) {
                fputs("tollgate-stub: out of memory\n", stderr);
                return 1;
        }
        rc = parse_flags(argc, argv, o);
        if (rc == 0)
                rc = finish_config(o, &secret);
        if (rc != 0) {
                free(o);
                return rc == 1 ? 0 : rc;
        }

        /* Signals are taken by sigwait() below only: block them before any thread starts. */
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);
        raise_fd_limit();
        json_object_seed(0);
        curl_global_init(CURL_GLOBAL_DEFAULT);

        rc = server_start(&o->cfg, &srv);
        if (rc < 0) {
                fprintf(stderr, "tollgate-stub: cannot listen on %s:%u: %s\n", o->host,
                        (unsigned)o->cfg.port, tg_strerror(rc));
                status = 1;
                goto out;
        }
        if (o->port_file) {
                rc = write_port_file(o->port_file, server_port(srv));
                if (rc < 0) {
                        fprintf(stderr, "tollgate-stub: --port-file %s: %s\n", o->port_file,
                                tg_strerror(rc));
                        status = 1;
                        goto out;
                }
        }
        fprintf(stderr, "tollgate-stub: listening on %s:%u\n", o->host, (unsigned)server_port(srv));

        while (sigwait(&set, &sig) != 0)
                ;
        server_stop(srv);
        if (o->record) {
                rc = write_record(srv, o->record);
                if (rc < 0) {
                        fprintf(stderr, "tollgate-stub: --record %s: %s\n", o->record,
                                tg_strerror(rc));
                        status = 1;
                }
        }
out:
        server_free(srv);
        curl_global_cleanup();
        free(secret);
        free(o);
        return status;
}
