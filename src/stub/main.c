/*
 * tollgate-stub: flags, signals and lifecycle of the provider stand-in. It
 * reads every flag (platform/options, the table in parse_flags) before
 * starting anything (a bad flag exits 2 naming the flag), writes --port-file only once listening, and on SIGTERM/SIGINT stops
 * the server and writes the arrival record (--record) before exiting 0.
 */
#include "core/strnum.h"
#include "core/template.h"
#include "core/tg_error.h"
#include "platform/build_info.h"
#include "platform/options.h"
#include "platform/secmem.h"
#include "platform/secret_file.h"
#include "receiver.h"
#include "stub.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define SECRET_MAX (64 * 1024)
#define FILE_MAX   (1024 * 1024)

static const char stub_about[] =
    "The refund provider stand-in (shared/PROVIDER.md) with fault injection. Every option is "
    "read before anything starts; a bad one exits 2 naming it.";

/* ISO C only promises string literals of 4095 bytes: the epilogue is three,
 * joined in main(). */
static const char stub_epilogue_modes[] =
    "Contract: POST /v1/refunds, GET /v1/refunds/{operation_id}; with --shape\n"
    "          stripe GET /v1/refunds/{refund id} and the list GET /v1/refunds\n"
    "          ?payment_intent=..&limit=..&starting_after=.. (no lookup by key);\n"
    "          checkout POST /payments/{id}/refunds (Cko-Idempotency-Key, 202)\n"
    "          and GET /payments/{id}/actions (no lookup by key or action);\n"
    "          adyen POST /v71/payments/{id}/refunds (201 received; no lookup, no\n"
    "          list: every GET 404; the outcome as a signed REFUND notification);\n"
    "          paypal POST /v1/oauth2/token (HTTP Basic, client credentials; tokens\n"
    "          live --token-ttl-s), POST /v2/payments/captures/{id}/refund\n"
    "          (bearer token, PayPal-Request-Id, 201 COMPLETED or PENDING) and GET\n"
    "          /v2/payments/refunds/{refund id} (no lookup by key, no list).\n"
    "Admin:    GET /_stub/state, GET /_stub/ledger,\n"
    "          GET /_stub/arrivals?since=N[&limit=M] (JSON lines, entries numbered\n"
    "          > N), POST /_stub/mode, POST /_stub/reset,\n"
    "          POST /_stub/expire-keys [{\"key\":\"...\"}], POST /_stub/revoke-tokens\n"
    "          (paypal: every access token given is refused from then on).\n"
    "\n"
    "Modes (the mode applied to a POST is the one in force at its arrival):\n"
    "  fast             execute, answer 201 at once\n"
    "  slow[:D]         wait D ms, then execute and answer (executes even if the\n"
    "                   client gave up; a second request with the key meanwhile\n"
    "                   gets 409)\n"
    "  drop[:D]         (wait D ms,) execute, close the connection without an answer\n"
    "  reject           422 invalid_request, nothing executed\n"
    "  unavailable[:R]  503 temporarily_unavailable with Retry-After, nothing\n"
    "                   executed\n"
    "  limited[:R]      429 rate_limited with Retry-After, nothing executed\n"
    "                   R: N seconds, @N HTTP-date N seconds ahead, - no header\n"
    "  e500[:D]         (wait D ms,) execute, answer 500\n"
    "  processing[:P]   execute, answer 201; queries say \"processing\" for P ms\n"
    "  calls[:K]        each refund closes at its K-th call (2): the POST executes\n"
    "                   and answers 500 (K > 1), the next K-2 queries say\n"
    "                   \"processing\", query K-1 says succeeded; so every close\n"
    "                   takes K calls through the client's exit\n"
    "  fail[:CODE]      take the request, refuse the refund for good (nothing\n"
    "                   executed), answer 500; queries answer 200 status failed with\n"
    "                   failure_code CODE (insufficient_funds); a replay of the key\n"
    "                   gets the first stored response, the same 500\n"
    "  refuse           close the listening socket: connects are refused, requests\n"
    "                   on already open connections are dropped; reopens after the\n"
    "                   phase\n"
    "  mix[:M=W,...]    per request a weighted draw (seeded, reproducible) of any\n"
    "                   mode but refuse and mix\n";

static const char stub_epilogue_hostile[] =
    "A hostile provider (also as --query-mode; each executes the refund first,\n"
    "but redirect; the parameter's default in brackets):\n"
    "  reset-body[:N]   the status line, the headers (Content-Length of the whole\n"
    "                   body) and N bytes of the body [half], then a TCP reset\n"
    "  truncated[:S]    status S [the answer's own], the body cut in half and\n"
    "                   Content-Length of the cut: complete HTTP, broken JSON\n"
    "  invalid[:S]      status S [the answer's own] and a JSON-looking body that\n"
    "                   is not JSON (a comma before the closing brace)\n"
    "  huge[:N]         the body padded to N bytes [67108864] with a \"pad\" member,\n"
    "                   streamed (the stub never holds it), Content-Length N\n"
    "  trickle[:MS]     the status line and headers at once, then the body one\n"
    "                   byte every MS ms [100]\n"
    "  ctype[:TYPE]     the JSON answer under Content-Type TYPE [text/html]; none:\n"
    "                   no Content-Type header at all\n"
    "  contra[:S-BODY]  status S with a body that says BODY: succeeded, failed\n"
    "                   (failure_code contra), processing, or error (an\n"
    "                   invalid_request error object) [201-failed]\n"
    "  http10[:cut]     \"HTTP/1.0\", Connection: close, no Content-Length, no\n"
    "                   chunking: the close ends the body (cut: half way through)\n"
    "  redirect[:S]     S, one of 301 302 303 307 308 [307], Location:\n"
    "                   /moved<path> and an HTML body; nothing checked or executed\n";

static const char stub_epilogue_rest[] =
    "Replays, 409 and 422-reused answers go through the same mode (delayed by slow,\n"
    "dropped by drop, turned into 500 by e500). After drop/e500/slow the key's\n"
    "stored response is the success body, replayed with 200; after fail it is the\n"
    "500, replayed as it was (a failed key stays failed until it expires).\n"
    "\n"
    "Timeline: phases separated by ';' or new lines, each MODE[:PARAM] [DURATION];\n"
    "DURATION is N with ms, s, m or h (bare N = seconds). Only the last phase may\n"
    "omit it (lasts forever); after the last timed phase the mode is fast. '#'\n"
    "comments. Phases are timed from stub start on the monotonic clock; POST\n"
    "/_stub/mode with a timeline restarts it from that moment. The seed's ten slow\n"
    "minutes:\n"
    "  tollgate-stub --timeline 'fast 1m; slow:3000 5m; drop 2m; reject 1m; fast'\n"
    "and the same compressed to one minute: add --time-scale 0.1.\n"
    "\n"
    "POST /_stub/mode body (all optional): {\"mode\":\"slow\", \"delay_ms\":3000,\n"
    "  \"processing_ms\":N, \"retry_after\":N, \"retry_after_date\":true,\n"
    "  \"mix\":\"fast=9,drop=1\", \"count\":N (only the next N refund requests, then\n"
    "  the timeline in force again)} or {\"timeline\":\"drop 5s; fast\"}; plus\n"
    "  {\"query_mode\":\"slow\", \"query_delay_ms\":N, \"webhook_delay_ms\":N,\n"
    "  \"webhook_drop_rate\":F}. Answers the new state.\n";

/* One line naming the option and the problem; TG_EINVAL (exit status 2). */
static int bad_flag(const char *flag, const char *why)
{
        fprintf(stderr, "tollgate-stub: %s: %s (try --help)\n", flag, why);
        return TG_EINVAL;
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
        if (hlen == 0 || hlen >= cap || strnum_i64(colon + 1, 0, 65535, &port) < 0)
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
        const char *shape;
        const char *tls_cert, *tls_key, *tls_client_ca;
        const char *auth_secret_file, *signing_key_file, *signing_string, *encoding;
        const char *client_id_file;
        /* file contents the config borrows, freed at exit */
        char *cert_pem, *key_pem, *ca_pem, *auth_secret, *signing_key, *client_id;
        struct stub_config cfg;
        /* what parse_flags() reads into cfg after the options */
        const char *listen, *retry_after, *mix, *query_mode, *limit_path;
        int64_t max_body, max_records, max_keys, max_connections;
        uint64_t seed;
        bool ra_date, keep_alive_header;
};

/* The options: file-level, as the option table that names its members is
 * (one parse a process). */
static struct opts stub_opts;

static const struct opt stub_options[] = {
    {.name = "listen",
     .arg = "HOST:PORT",
     .string = &stub_opts.listen,
     .help = "listen address, numeric (default 127.0.0.1:9090; port 0 picks a free port; "
             "[::1]:PORT for IPv6)"},
    {.name = "port-file",
     .arg = "FILE",
     .string = &stub_opts.port_file,
     .help = "write the actual port to FILE once listening"},
    {.name = "timeline",
     .arg = "SPEC|@FILE",
     .string = &stub_opts.timeline,
     .help = "scripted phases (format below); default: fast forever"},
    {.name = "time-scale",
     .arg = "F",
     .dbl = &stub_opts.cfg.time_scale,
     .dmin = 0,
     .dmax = 1e6,
     .dmin_open = true,
     .help = "multiply every phase duration by F (0.1 = ten minutes in one)"},
    {.name = "mode",
     .arg = "MODE[:PARAM]",
     .string = &stub_opts.mode,
     .help = "one mode forever (instead of --timeline)"},
    {.name = "delay-ms",
     .arg = "N",
     .i64 = &stub_opts.cfg.delay_ms,
     .min = 0,
     .max = 86400000,
     .help = "default delay of slow (3000)"},
    {.name = "retry-after",
     .arg = "N|none",
     .string = &stub_opts.retry_after,
     .help = "Retry-After of unavailable/limited, seconds 0..604800 (1)"},
    {.name = "retry-after-date",
     .flag = &stub_opts.ra_date,
     .help = "send Retry-After as an HTTP-date N seconds ahead"},
    {.name = "processing-ms",
     .arg = "N",
     .i64 = &stub_opts.cfg.processing_ms,
     .min = 0,
     .max = 86400000,
     .help = "default time queries answer \"processing\" in mode processing (2000)"},
    {.name = "key-retention-s",
     .arg = "N",
     .i64 = &stub_opts.cfg.key_retention_s,
     .min = 1,
     .max = 86400 * 365,
     .help = "idempotency key retention, seconds (86400; --shape paypal 3888000, PayPal's "
             "45 days)"},
    {.name = "seed",
     .arg = "N",
     .u64 = &stub_opts.seed,
     .umin = 0,
     .umax = INT64_MAX,
     .help = "seed of mix draws, refund ids and webhook drops (1)"},
    {.name = "mix",
     .arg = "M=W,...",
     .string = &stub_opts.mix,
     .help = "weights of mode mix (fast=70,slow=10,drop=5,e500=5,unavailable=5,"
             "limited=5)"},
    {.name = "query-mode",
     .arg = "MODE",
     .string = &stub_opts.query_mode,
     .help = "mode of GET queries, independent of POSTs: fast, slow, drop, "
             "unavailable, limited, e500, or a hostile mode (fast)"},
    {.name = "query-delay-ms",
     .arg = "N",
     .i64 = &stub_opts.cfg.query_delay_ms,
     .min = 0,
     .max = 86400000,
     .help = "default delay of query-mode slow (3000)"},
    {.name = "record",
     .arg = "FILE",
     .string = &stub_opts.record,
     .help = "write every arrival as JSON lines to FILE on exit"},
    {.name = "max-body",
     .arg = "N",
     .i64 = &stub_opts.max_body,
     .min = 1,
     .max = 64 * 1024 * 1024,
     .help = "largest POST body in bytes; larger gets 413 (65536)"},
    {.name = "max-records",
     .arg = "N",
     .i64 = &stub_opts.max_records,
     .min = 0,
     .max = 100000000,
     .help = "arrival entries kept; later ones only counted (1000000)"},
    {.name = "max-keys",
     .arg = "N",
     .i64 = &stub_opts.max_keys,
     .min = 1,
     .max = 100000000,
     .help = "operations the ledger holds (1000000)"},
    {.name = "max-connections",
     .arg = "N",
     .i64 = &stub_opts.max_connections,
     .min = 16,
     .max = 1000000,
     .help = "open connections (4096)"},
    {.name = "idle-close-ms",
     .arg = "N",
     .i64 = &stub_opts.cfg.idle_close_ms,
     .min = 0,
     .max = 86400000,
     .help = "close a kept-alive connection idle for N ms between requests, as a server's "
             "keep-alive timeout does (0: never)"},
    {.name = "advertise-keep-alive",
     .flag = &stub_opts.keep_alive_header,
     .help = "with --idle-close-ms of 1000 or more: answers carry \"Keep-Alive: timeout=S\""},
    {.name = "webhook-url",
     .arg = "URL",
     .string = &stub_opts.cfg.webhook_url,
     .help = "after each execution (or fail) POST a signed event to URL"},
    {.name = "webhook-secret-file",
     .arg = "F",
     .string = &stub_opts.secret_file,
     .help = "HMAC-SHA256 secret (file content, one trailing newline stripped); "
             "required with --webhook-url"},
    {.name = "webhook-delay-ms",
     .arg = "N",
     .i64 = &stub_opts.cfg.webhook_delay_ms,
     .min = 0,
     .max = 86400000,
     .help = "delay before each event is sent (0)"},
    {.name = "webhook-drop-rate",
     .arg = "F",
     .dbl = &stub_opts.cfg.webhook_drop_rate,
     .dmin = 0,
     .dmax = 1,
     .help = "fraction of events never sent, 0..1 (0)"},
    {.name = "limit-rate",
     .arg = "R",
     .dbl = &stub_opts.cfg.limit_rate,
     .dmin = 0,
     .dmax = 1000000,
     .help = "a gateway's limiter in front: a request arriving fewer than 1000/R "
             "whole milliseconds after the last one let through is answered 429 "
             "rate_limited without Retry-After (mode \"limiter\" in the record); "
             "no burst (0: none)"},
    {.name = "limit-path",
     .arg = "EP=R[,EP=R]",
     .string = &stub_opts.limit_path,
     .help = "the same limiter per endpoint, EP one of refund (the refunds POST), query "
             "(a lookup or list GET), token (the token POST): a request must pass its "
             "endpoint's and --limit-rate's; one refused by either moves neither (mode "
             "\"limiter_path\" in the record when its endpoint's refused it)"},
    {.name = "capacity",
     .arg = "R",
     .dbl = &stub_opts.cfg.capacity_rate,
     .dmin = 0,
     .dmax = 1000000,
     .help = "the provider's true capacity: a token bucket of R a second (refunds and "
             "queries alike) whose refusals are 429 rate_limited without Retry-After "
             "(mode \"capacity\" in the record); POST /_stub/mode {\"capacity\": R} "
             "changes it mid-run (0: none)"},
    {.name = "capacity-burst",
     .arg = "B",
     .dbl = &stub_opts.cfg.capacity_burst,
     .dmin = 1,
     .dmax = 1000000,
     .help = "tokens the capacity bucket saves (1)"},
    {.name = "shape",
     .arg = "NAME",
     .string = &stub_opts.shape,
     .help = "the provider's contract: provider-md (shared/PROVIDER.md, JSON), "
             "stripe (form POST, refund objects), checkout (202, the payment's "
             "actions), adyen (201 received, the outcome by notification only) or "
             "paypal (OAuth 2.0 tokens, a lookup by refund id only; docs/providers/) "
             "(provider-md)"},
    {.name = "tls-cert",
     .arg = "FILE",
     .string = &stub_opts.tls_cert,
     .help = "serve HTTPS with this PEM certificate (chain); needs --tls-key"},
    {.name = "tls-key",
     .arg = "FILE",
     .string = &stub_opts.tls_key,
     .help = "the PEM private key of --tls-cert"},
    {.name = "tls-client-ca",
     .arg = "FILE",
     .string = &stub_opts.tls_client_ca,
     .help = "demand a client certificate that verifies against this PEM CA: the "
             "handshake fails without one"},
    {.name = "tls-priorities",
     .arg = "STR",
     .string = &stub_opts.cfg.tls_priorities,
     .help = "GnuTLS priority string, e.g. NORMAL:-VERS-TLS1.3 (NORMAL)"},
    {.name = "auth-secret-file",
     .arg = "F",
     .string = &stub_opts.auth_secret_file,
     .help = "demand this API key (file content, trailing newlines stripped): "
             "Authorization: Bearer <key>, or --auth-header; else 401"},
    {.name = "client-id-file",
     .arg = "F",
     .string = &stub_opts.client_id_file,
     .help = "--shape paypal: the client id the token call's HTTP Basic must name, with "
             "--auth-secret-file the client secret (without both: any client gets a token)"},
    {.name = "token-ttl-s",
     .arg = "N",
     .i64 = &stub_opts.cfg.token_ttl_s,
     .min = 1,
     .max = 86400,
     .help = "--shape paypal: the access tokens' life, expires_in (32400)"},
    {.name = "auth-header",
     .arg = "NAME",
     .string = &stub_opts.cfg.auth.header,
     .help = "the header carrying the bare API key (default: Authorization, Bearer)"},
    {.name = "signing-key-file",
     .arg = "F",
     .string = &stub_opts.signing_key_file,
     .help = "demand requests signed with this HMAC-SHA256 key; else 401"},
    {.name = "signature-header",
     .arg = "NAME",
     .string = &stub_opts.cfg.auth.signature_header,
     .help = "header of the signature (X-Signature)"},
    {.name = "timestamp-header",
     .arg = "NAME",
     .string = &stub_opts.cfg.auth.timestamp_header,
     .help = "header of the signed timestamp, Unix seconds (X-Timestamp)"},
    {.name = "signing-string",
     .arg = "TEMPLATE",
     .string = &stub_opts.signing_string,
     .help = "canonical string, tollgate's provider.signing_string syntax "
             "({method}\\n{path}\\n{timestamp}\\n{idempotency_key}\\n{body_sha256})"},
    {.name = "signature-encoding",
     .arg = "hex|base64",
     .string = &stub_opts.encoding,
     .help = "encoding of the MAC (hex)"},
    {.name = "signature-prefix",
     .arg = "STR",
     .string = &stub_opts.cfg.auth.prefix,
     .help = "text before the MAC in its header (none)"},
    {.name = "max-skew-s",
     .arg = "N",
     .i64 = &stub_opts.cfg.auth.max_skew_s,
     .min = 0,
     .max = 86400,
     .help = "signed timestamps this far from now are accepted (300)"},
    {.name = "record-bodies",
     .flag = &stub_opts.cfg.record_bodies,
     .help = "keep each contract request's body (up to 4 KiB) in the arrival record"},
};

static char epilogue[sizeof(stub_epilogue_modes) + sizeof(stub_epilogue_hostile) +
                     sizeof(stub_epilogue_rest)];
static const struct options_spec stub_spec = {.prog = "tollgate-stub",
                                              .description = stub_about,
                                              .opts = stub_options,
                                              .nopts =
                                                  sizeof(stub_options) / sizeof(stub_options[0]),
                                              .epilogue = epilogue};

/* --limit-path: "refund=4,query=2" into the rates per endpoint. 0 or -1. */
static int parse_limit_path(const char *text, double rates[STUB_LIMIT_PATHS])
{
        static const char *const names[STUB_LIMIT_PATHS] = {"refund", "query", "token"};
        const char *p = text;

        while (*p) {
                const char *eq = strchr(p, '=');
                const char *end = strchr(p, ',');
                char num[32], *stop = NULL;
                int k = -1;

                if (!end)
                        end = p + strlen(p);
                if (!eq || eq > end || (size_t)(end - eq - 1) >= sizeof(num))
                        return -1;
                for (int i = 0; i < STUB_LIMIT_PATHS; i++)
                        if ((size_t)(eq - p) == strlen(names[i]) &&
                            strncmp(p, names[i], (size_t)(eq - p)) == 0)
                                k = i;
                memcpy(num, eq + 1, (size_t)(end - eq - 1));
                num[end - eq - 1] = '\0';
                double r = strtod(num, &stop);
                if (k < 0 || !num[0] || *stop || !(r > 0 && r <= 1e6))
                        return -1;
                rates[k] = r;
                p = *end ? end + 1 : end;
        }
        return 0;
}

/* Parses into stub_opts. 0 to run, OPTIONS_HELP after --help, TG_EINVAL on
 * a bad option (a message naming it was printed). */
static int parse_flags(int argc, char **argv)
{
        struct opts *o = &stub_opts;
        struct stub_config *c = &o->cfg;
        const char *why = NULL;
        int r;

        snprintf(epilogue, sizeof(epilogue), "%s%s%s", stub_epilogue_modes, stub_epilogue_hostile,
                 stub_epilogue_rest);
        snprintf(o->host, sizeof(o->host), "127.0.0.1");
        c->host = o->host;
        c->port = 9090;
        c->time_scale = 1.0;
        c->delay_ms = 3000;
        c->ra_seconds = 1;
        c->ra_form = STUB_RA_SECONDS;
        c->processing_ms = 2000;
        c->key_retention_s = 0; /* unset: the shape's (finish_provider) */
        c->token_ttl_s = 32400;
        c->query_delay_ms = 3000;
        c->auth.signature_header = "X-Signature";
        c->auth.timestamp_header = "X-Timestamp";
        c->auth.max_skew_s = 300;
        o->max_body = 64 * 1024;
        o->max_records = 1000000;
        o->max_keys = 1000000;
        o->max_connections = 4096;
        c->capacity_burst = 1;
        o->seed = 1;
        stub_mix_parse("fast=70,slow=10,drop=5,e500=5,unavailable=5,limited=5", 54, &why,
                       c->mix_weights);
        stub_mode_parse("fast", 4, &why, &c->query_spec);

        r = options_parse(&stub_spec, argc, argv, NULL, NULL);
        if (r)
                return r;
        c->seed = o->seed;
        c->max_body = (size_t)o->max_body;
        c->max_records = (size_t)o->max_records;
        c->max_keys = (size_t)o->max_keys;
        c->max_connections = (unsigned)o->max_connections;
        c->advertise_keep_alive = o->keep_alive_header;
        if (o->listen && split_listen(o->listen, o->host, sizeof(o->host), &c->port) < 0)
                return bad_flag("--listen", "must be HOST:PORT (numeric host)");
        /* Retry-After: none wins over --retry-after-date, whatever the order. */
        if (o->ra_date)
                c->ra_form = STUB_RA_DATE;
        if (o->retry_after && strcmp(o->retry_after, "none") == 0)
                c->ra_form = STUB_RA_NONE;
        else if (o->retry_after && strnum_i64(o->retry_after, 0, 86400 * 7, &c->ra_seconds) < 0)
                return bad_flag("--retry-after", "must be seconds 0..604800 or none");
        if (o->limit_path && parse_limit_path(o->limit_path, c->limit_path_rate) < 0)
                return bad_flag("--limit-path",
                                "must be EP=R[,EP=R...], EP refund, query or token, R in (0, 1e6]");
        if (o->mix && stub_mix_parse(o->mix, strlen(o->mix), &why, c->mix_weights) < 0)
                return bad_flag("--mix", why);
        if (o->query_mode) {
                if (stub_mode_parse(o->query_mode, strlen(o->query_mode), &why, &c->query_spec) < 0)
                        return bad_flag("--query-mode", why);
                if (!stub_mode_for_query(c->query_spec.mode))
                        return bad_flag("--query-mode", "must be fast, slow, drop, unavailable, "
                                                        "limited, e500 or a hostile mode");
        }
        if (c->webhook_url && strncmp(c->webhook_url, "http://", 7) != 0 &&
            strncmp(c->webhook_url, "https://", 8) != 0)
                return bad_flag("--webhook-url", "must be an http:// or https:// URL");
        return 0;
}

/* A secret file (platform/secret_file, into secret memory): trailing CR,
 * LF, spaces and tabs stripped; not empty. */
static int read_secret_file(const char *flag, const char *path, char **ret, size_t *ret_len)
{
        size_t len;
        int rc = secret_file_read(path, 0, SECRET_MAX, ret, &len, NULL, 0);
        if (rc < 0) {
                fprintf(stderr, "tollgate-stub: %s: %s: %s\n", flag, path,
                        rc == TG_EFULL ? "too large" : tg_strerror(rc));
                return TG_EINVAL;
        }
        len = secret_file_trim(*ret, len);
        (*ret)[len] = '\0';
        if (len == 0) {
                secmem_free(*ret);
                *ret = NULL;
                return bad_flag(flag, "the file is empty");
        }
        *ret_len = len;
        return 0;
}

static int read_pem_flag(const char *flag, const char *path, char **ret)
{
        size_t len;
        int rc = read_file(path, ret, &len);
        if (rc < 0) {
                fprintf(stderr, "tollgate-stub: %s: %s: %s\n", flag, path, tg_strerror(rc));
                return TG_EINVAL;
        }
        return 0;
}

/* --shape, the TLS files and what callers must present. */
static int finish_provider(struct opts *o)
{
        struct stub_config *c = &o->cfg;
        struct template_error terr;
        size_t len;
        const char *signing =
            o->signing_string
                ? o->signing_string
                : "{method}\\n{path}\\n{timestamp}\\n{idempotency_key}\\n{body_sha256}";

        if (o->shape && stub_shape_parse(o->shape, &c->shape) < 0)
                return bad_flag("--shape",
                                "must be provider-md, stripe, checkout, adyen or paypal");
        if (o->client_id_file && (c->shape != STUB_SHAPE_PAYPAL || !o->auth_secret_file))
                return bad_flag("--client-id-file", "needs --shape paypal and --auth-secret-file");
        c->auth.key_header = stub_shape_key_header(c->shape);
        if (c->key_retention_s == 0)
                c->key_retention_s = c->shape == STUB_SHAPE_PAYPAL ? 45 * 86400 : 86400;
        if (!o->tls_cert != !o->tls_key)
                return bad_flag("--tls-cert", "give --tls-cert and --tls-key together");
        if ((o->tls_client_ca || c->tls_priorities) && !o->tls_cert)
                return bad_flag(o->tls_client_ca ? "--tls-client-ca" : "--tls-priorities",
                                "needs --tls-cert");
        if (o->tls_cert && (read_pem_flag("--tls-cert", o->tls_cert, &o->cert_pem) < 0 ||
                            read_pem_flag("--tls-key", o->tls_key, &o->key_pem) < 0))
                return TG_EINVAL;
        if (o->tls_client_ca && read_pem_flag("--tls-client-ca", o->tls_client_ca, &o->ca_pem) < 0)
                return TG_EINVAL;
        c->tls_cert_pem = o->cert_pem;
        c->tls_key_pem = o->key_pem;
        c->tls_client_ca_pem = o->ca_pem;
        if (c->auth.header && !o->auth_secret_file)
                return bad_flag("--auth-header", "needs --auth-secret-file");
        if (o->auth_secret_file) {
                if (read_secret_file("--auth-secret-file", o->auth_secret_file, &o->auth_secret,
                                     &len) < 0)
                        return TG_EINVAL;
                c->auth.secret = o->auth_secret;
        }
        if (o->client_id_file) {
                if (read_secret_file("--client-id-file", o->client_id_file, &o->client_id, &len) <
                    0)
                        return TG_EINVAL;
                c->client_id = o->client_id;
        }
        if (o->signing_key_file) {
                if (read_secret_file("--signing-key-file", o->signing_key_file, &o->signing_key,
                                     &len) < 0)
                        return TG_EINVAL;
                c->auth.signing_key = (const unsigned char *)o->signing_key;
                c->auth.signing_key_len = len;
        }
        if (template_parse(signing, TPL_SIGNING_FIELDS, &c->auth.signing, &terr) < 0)
                return bad_flag("--signing-string", terr.message);
        if (o->encoding && strcmp(o->encoding, "hex") != 0 && strcmp(o->encoding, "base64") != 0)
                return bad_flag("--signature-encoding", "must be hex or base64");
        c->auth.base64 = o->encoding && strcmp(o->encoding, "base64") == 0;
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
                                return TG_EINVAL;
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
                rc = secret_file_read(o->secret_file, 0, SECRET_MAX, &text, &len, NULL, 0);
                if (rc < 0) {
                        fprintf(stderr, "tollgate-stub: --webhook-secret-file: %s: %s\n",
                                o->secret_file, rc == TG_EFULL ? "too large" : tg_strerror(rc));
                        return TG_EINVAL;
                }
                if (len > 0 && text[len - 1] == '\n')
                        text[--len] = '\0';
                if (len > 0 && text[len - 1] == '\r')
                        text[--len] = '\0';
                if (len == 0) {
                        secmem_free(text);
                        return bad_flag("--webhook-secret-file", "secret is empty");
                }
                c->webhook_secret = text;
                c->webhook_secret_len = len;
                *ret_secret = text;
        }
        return 0;
}

static void free_files(struct opts *o)
{
        free(o->cert_pem);
        free(o->key_pem);
        free(o->ca_pem);
        secmem_free(o->auth_secret); /* wipes */
        secmem_free(o->signing_key);
        secmem_free(o->client_id);
}

int main(int argc, char **argv)
{
        struct opts *o = &stub_opts;
        struct stub_server *srv = NULL;
        char *secret = NULL;
        sigset_t set;
        int sig = 0, rc, status = 0;

        if (argc == 2 && strcmp(argv[1], "--version") == 0) {
                printf("tollgate-stub %s (git %s)\n", build_info_version(), build_info_revision());
                return 0;
        }
        if (argc >= 2 && strcmp(argv[1], "receive") == 0)
                return receiver_main(argc - 1, argv + 1); /* tollgate's events' receiver */
        rc = parse_flags(argc, argv);
        if (rc == 0)
                rc = finish_config(o, &secret);
        if (rc == 0)
                rc = finish_provider(o);
        if (rc != 0) {
                secmem_free(secret);
                free_files(o);
                return options_exit_status(rc);
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
        secmem_free(secret);
        free_files(o);
        return status;
}
