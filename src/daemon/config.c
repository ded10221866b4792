/*
 * config — loads tollgate's INI file (inih) over the defaults and validates
 * it. The table `keys` below is the whole schema: every section.key, its type
 * and its range; a key that is not in it, or a section with no keys in it,
 * is an error naming it. Numbers are read with core/strnum and must use
 * the whole value and sit inside the range; an error names the key, the
 * problem and the line ("exit.starts_per_second: must be a number in
 * (0, 1e+09], got \"fast\" (line 12)").
 *
 * Invariants:
 *   - the caller's struct is written only when the whole file is valid
 *     (everything is built in a private copy first);
 *   - secrets (api.token_file, provider.webhook_secret_file contents) are
 *     read only from the files named here and never appear in a message; a
 *     secret file (and a mysql url's password_file) that group or others
 *     may read or write is refused, with the chmod that fixes it;
 *   - relative paths (a sqlite:// file, the default store included, the
 *     secret files, a mysql url's password_file) are resolved against the
 *     config file's folder, so the same file means the same store whatever
 *     the current directory of the process;
 *   - a non-loopback api.listen requires api.token_file.
 *
 * Every problem of a file is recorded with its line (config_check() lists
 * them all; config_load() reports the first). An unknown key or section
 * comes with the closest known name when one is near ("did you mean").
 * After a value, " #" or " ;" starts a comment.
 *
 * Limits: inih reads lines into a buffer of ini_max_line (200) bytes; a longer
 * line is refused with its line number rather than cut. A key set twice is an
 * error, except the repeatable classify.rule.
 */
#include "daemon/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/backoff.h"
#include "core/provider_map.h"
#include "core/strnum.h"
#include "core/template.h"
#include "core/tg_error.h"
#include "daemon/provider_setup.h"
#include "daemon/ui_users.h"
#include "platform/secmem.h"
#include "store/store.h" /* STORE_SHARES_MAX */

#define MAX_DURATION_S  (366LL * 24 * 3600)
#define MAX_DURATION_MS (MAX_DURATION_S * 1000)
#define SECRET_FILE_MAX 4096 /* bytes read from a secret file at most */
#define VALUE_QUOTE_MAX 64   /* bytes of a bad value quoted in a message */
#define LOAD_ERRORS_MAX 64   /* problems one load keeps (config_check lists them) */
#define DAY_MS          (24LL * 3600 * 1000)

enum key_type {
        KEY_STRING, /* char[size] */
        KEY_I64,    /* int64_t, value * scale */
        KEY_UINT,   /* unsigned */
        KEY_SIZE,   /* size_t */
        KEY_DOUBLE, /* double */
        KEY_BOOL,   /* bool: true/false, yes/no, on/off, 1/0 */
        KEY_CUSTOM, /* handled by a function */
};

struct load;

struct key_def {
        const char *section;
        const char *name;
        enum key_type type;
        size_t offset;   /* into struct tg_config */
        size_t size;     /* KEY_STRING, and KEY_CUSTOM on a string: the buffer size */
        int64_t lo, hi;  /* integer range, as written in the file */
        int64_t scale;   /* KEY_I64: stored value = written value * scale */
        double dlo, dhi; /* KEY_DOUBLE: range; dlo excluded when dlo_open */
        bool dlo_open;
        int (*custom)(struct load *load, const struct key_def *key, const char *value);
        /* KEY_CUSTOM that is not one string: writes the value as the file
         * would hold it (the default shown by config_describe()). */
        void (*show)(const struct tg_config *config, char *buf, size_t size);
        const char *help; /* what the key means, for config_describe() */
};

struct load_error {
        int line; /* 0: not tied to a line */
        char text[400];
};

/* The state of one load, passed to the inih handler. */
struct load {
        struct tg_config config;
        bool seen[128];     /* by index into keys[]: a key may be set once */
        int seen_line[128]; /* where it was set */
        bool failed;
        bool checking; /* the checks across keys run: config_load's message has no line */
        int err_line;  /* line of the first error */
        char err[512]; /* the first error */
        unsigned nerr; /* every error, for config_check() */
        struct load_error errs[LOAD_ERRORS_MAX];
        FILE *file;
        int line;              /* lines read so far: the handler runs for the last one */
        char dir[TG_PATH_MAX]; /* the config file's folder, absolute */
};

#define OFF(member) offsetof(struct tg_config, member)

static int set_listen(struct load *load, const struct key_def *key, const char *value);
static int set_token_file(struct load *load, const struct key_def *key, const char *value);
static int set_webhook_file(struct load *load, const struct key_def *key, const char *value);
static int set_store_url(struct load *load, const struct key_def *key, const char *value);
static int set_base_url(struct load *load, const struct key_def *key, const char *value);
static int set_path(struct load *load, const struct key_def *key, const char *value);
static int set_header_name(struct load *load, const struct key_def *key, const char *value);
static int set_jitter(struct load *load, const struct key_def *key, const char *value);
static int set_rule(struct load *load, const struct key_def *key, const char *value);
static int set_log_level(struct load *load, const struct key_def *key, const char *value);
static int set_keep_days(struct load *load, const struct key_def *key, const char *value);
static void show_keep_days(const struct tg_config *config, char *buf, size_t size);
static int set_users_file(struct load *load, const struct key_def *key, const char *value);
static int set_readable_file(struct load *load, const struct key_def *key, const char *value);
static int set_client_key(struct load *load, const struct key_def *key, const char *value);
static int set_secret_path(struct load *load, const struct key_def *key, const char *value);
static int set_choice(struct load *load, const struct key_def *key, const char *value);
static int set_signing_string(struct load *load, const struct key_def *key, const char *value);
static int set_prefix(struct load *load, const struct key_def *key, const char *value);
static int set_body_field(struct load *load, const struct key_def *key, const char *value);
static int set_field_source(struct load *load, const struct key_def *key, const char *value);
static int set_status_list(struct load *load, const struct key_def *key, const char *value);
static void show_listen(const struct tg_config *config, char *buf, size_t size);
static void show_jitter(const struct tg_config *config, char *buf, size_t size);

#define SIZEOF(member) sizeof(((struct tg_config *)0)->member)
#define INT_KEY(sec, key, t, member, min, max, mult, text)                                         \
        {                                                                                          \
                .section = sec, .name = key, .type = t, .offset = OFF(member), .lo = min,          \
                .hi = max, .scale = mult, .help = text                                             \
        }
#define DOUBLE_KEY(sec, key, member, min, max, open, text)                                         \
        {                                                                                          \
                .section = sec, .name = key, .type = KEY_DOUBLE, .offset = OFF(member),            \
                .dlo = min, .dhi = max, .dlo_open = open, .help = text                             \
        }
#define STRING_KEY(sec, key, member, fn, text)                                                     \
        {                                                                                          \
                .section = sec, .name = key, .type = KEY_CUSTOM, .offset = OFF(member),            \
                .size = SIZEOF(member), .custom = fn, .help = text                                 \
        }
#define BOOL_KEY(sec, key, member, text)                                                           \
        {                                                                                          \
                .section = sec, .name = key, .type = KEY_BOOL, .offset = OFF(member), .help = text \
        }
#define CUSTOM_KEY(sec, key, fn, shown, text)                                                      \
        {                                                                                          \
                .section = sec, .name = key, .type = KEY_CUSTOM, .custom = fn, .show = shown,      \
                .help = text                                                                       \
        }

/* The whole schema, in the order config_describe() prints it. A default is
 * never written here: config_describe() reads it from config_defaults(). */
static const struct key_def keys[] = {
    STRING_KEY(
        "store", "url", store_url, set_store_url,
        "Where the backlog lives: `sqlite://PATH` (embedded, WAL) or "
        "`mysql://user@host:port/db?password_file=PATH` (MariaDB/MySQL; see docs/outbox.md). "
        "A relative path is relative to this file's folder. Never quoted in a message: "
        "it may carry a password."),
    BOOL_KEY("store", "check_on_start", store_check_on_start,
             "`serve`, `dispatch` and `api` verify a SQLite store before they use it "
             "(`PRAGMA quick_check`): a corrupted file refuses to start with a message instead "
             "of failing on the rows it damaged. It reads the whole file: about 3.5 s for "
             "1,000,000 operations with their calls (docs/reliability.md); false skips it. "
             "MariaDB checks its own pages."),

    CUSTOM_KEY("api", "listen", set_listen, show_listen,
               "Where the intake/admin API listens: `host:port` or `[ipv6]:port` (port 0: any "
               "free port). An address that is not loopback requires `api.token_file`."),
    STRING_KEY("api", "token_file", api_token_file, set_token_file,
               "A file holding the bearer token: every `/v1` route then needs `Authorization: "
               "Bearer <contents>`, and the CLI sends it. Trailing newlines and spaces are "
               "trimmed; the rest must be printable ASCII without spaces. Up to 4 tokens, one a "
               "line, are all accepted (rotation; the CLI sends the first). Unset: no token."),
    INT_KEY("api", "max_body_bytes", KEY_SIZE, api_max_body_bytes, 64, 16 * 1024 * 1024, 1,
            "Largest request body the API reads; a larger one is refused with 413."),
    INT_KEY("api", "max_connections", KEY_UINT, api_max_connections, 1, 100000, 1,
            "Connections the API holds open at once."),
    INT_KEY("api", "connection_timeout_s", KEY_UINT, api_connection_timeout_s, 1, 3600, 1,
            "An idle API connection is closed after this many seconds."),
    INT_KEY("api", "request_read_timeout_ms", KEY_UINT, api_request_read_timeout_ms, 100, 600000, 1,
            "A request, head and body, must arrive whole within this long of its connection "
            "being ready for it (accepted, or its previous answer sent); otherwise the "
            "connection is closed without an answer. The idle timeout above is reset by every "
            "byte, so without this a client that drips a header line a second holds a "
            "connection for ever, and `api.max_connections` such clients shut everyone out."),
    BOOL_KEY("api", "metrics_need_token", api_metrics_need_token,
             "`GET /metrics` needs the bearer token too (false: open, like `/healthz`)."),

    STRING_KEY("provider", "base_url", provider_base_url, set_base_url,
               "The provider, `http://` or `https://`; the paths below are appended to it. An "
               "`https://` provider's certificate and host name are always verified "
               "(`provider.ca_file`); there is no switch that turns this off."),
    STRING_KEY("provider", "refunds_path", provider_refunds_path, set_path,
               "Path of the POST that asks for a refund (PROVIDER.md's by default: a real "
               "provider's contract may differ). A template: `{operation_id}`, `{payment_id}`, "
               "`{amount}`, `{currency}`, `{reason}` and `{metadata.KEY}` are replaced by the "
               "refund's values, percent-encoded (docs/providers/)."),
    STRING_KEY("provider", "query_path", provider_query_path, set_path,
               "Path of the GET that asks what became of a refund, a template like "
               "`provider.refunds_path` that must use `{operation_id}` (the idempotency key) or "
               "`{refund_id}` (the provider's id, stored when a POST answers; then "
               "`provider.query_fallback_path` is needed for operations without one)."),
    STRING_KEY("provider", "key_header", provider_key_header, set_header_name,
               "Header carrying the idempotency key, which is the `operation_id`: one key per "
               "operation, forever."),
    STRING_KEY("provider", "request_id_header", provider_request_id_header, set_header_name,
               "Header carrying the call's request id, unique per call (`tollgate verify` "
               "matches the provider's arrivals by it)."),
    STRING_KEY("provider", "attempt_header", provider_attempt_header, set_header_name,
               "Header carrying the operation's attempt number (informational)."),
    INT_KEY("provider", "connect_timeout_ms", KEY_I64, provider_connect_timeout_ms, 1, 600000, 1,
            "Connect timeout; must be <= `provider.timeout_ms`. A call that never connected "
            "sent nothing (`not_sent`)."),
    INT_KEY("provider", "timeout_ms", KEY_I64, provider_timeout_ms, 1, 3600000, 1,
            "The whole call: DNS, connect, send, wait, read (cut to what is left of the "
            "operation's deadline). A call that times out after sending is `unknown` and is "
            "reconciled by a query with the same key. A new owner of the exit waits this long "
            "before it sends."),
    INT_KEY("provider", "max_response_bytes", KEY_SIZE, provider_max_response_bytes, 1024,
            64 * 1024 * 1024, 1,
            "Largest response body read; past it the body is dropped and the call is "
            "classified by its status alone."),
    STRING_KEY("provider", "webhook_secret_file", provider_webhook_secret_file, set_webhook_file,
               "A file holding the HMAC-SHA256 secret of the provider's webhook, `POST "
               "/v1/provider-events` (signed `X-Signature: sha256=<hex>`). Unset: the route "
               "does not exist."),
    BOOL_KEY("provider", "reuse_connections", provider_reuse_connections,
             "Keep-alive connections to the provider (false: a fresh connection per call, "
             "closed after it). The guard against a second send of one call holds either way."),
    STRING_KEY("provider", "ca_file", provider_ca_file, set_readable_file,
               "PEM file of the CA certificates that an `https://` provider's certificate must "
               "chain to. Unset: the system's store. A provider whose certificate does not "
               "verify (unknown CA, expired, another host name) is never sent anything: the "
               "call is `not_sent` and logged with its cause."),
    STRING_KEY("provider", "client_cert", provider_client_cert, set_readable_file,
               "PEM file of the client certificate presented to an `https://` provider that "
               "asks for one (mutual TLS); needs `provider.client_key`. Re-read with the other "
               "credentials (docs/providers/)."),
    STRING_KEY("provider", "client_key", provider_client_key, set_client_key,
               "PEM file of the client certificate's private key (not encrypted). Refused when "
               "the file is open to group or others: `chmod 600` it."),
    INT_KEY("provider", "unreachable_run_hold", KEY_UINT, provider_unreachable_run_hold, 0, 100000,
            1,
            "This many calls in a row that reached nothing (connection refused, DNS, connect "
            "or TLS failure: `not_sent`) hold every start for `provider.unreachable_hold_ms`; "
            "each probe after it that reaches nothing either holds again for twice as long, "
            "up to `provider.unreachable_hold_max_ms`. 0: never. See docs/providers/ for what "
            "a TLS misconfiguration costs."),
    INT_KEY("provider", "unreachable_hold_ms", KEY_I64, provider_unreachable_hold_ms, 1,
            MAX_DURATION_MS, 1, "The first hold of a run of calls that reached nothing."),
    INT_KEY("provider", "unreachable_hold_max_ms", KEY_I64, provider_unreachable_hold_max_ms, 1,
            MAX_DURATION_MS, 1,
            "The longest such hold (must be >= `provider.unreachable_hold_ms`)."),
    STRING_KEY("provider", "auth", provider_auth, set_choice,
               "How calls authenticate: `none`, `bearer` (`Authorization: Bearer <secret>`) or "
               "`header` (`<provider.auth_header>: <secret>`), the secret read from "
               "`provider.auth_secret_file`."),
    STRING_KEY("provider", "auth_header", provider_auth_header, set_header_name,
               "The header carrying the API key when `provider.auth` is `header`."),
    STRING_KEY("provider", "auth_secret_file", provider_auth_secret_file, set_secret_path,
               "A file holding the provider's API key (trailing newlines trimmed, the rest "
               "printable ASCII without spaces); required unless `provider.auth` is `none`. "
               "Never logged."),
    STRING_KEY("provider", "signing_key_file", provider_signing_key_file, set_secret_path,
               "A file holding the HMAC-SHA256 key of signed requests (its text is the key). "
               "Set: every call carries `provider.timestamp_header` and "
               "`provider.signature_header`. Unset: requests are not signed."),
    STRING_KEY("provider", "signature_header", provider_signature_header, set_header_name,
               "The header carrying a signed request's signature: `provider.signature_prefix` "
               "then the HMAC in `provider.signature_encoding`."),
    STRING_KEY("provider", "timestamp_header", provider_timestamp_header, set_header_name,
               "The header carrying a signed request's timestamp, in Unix seconds."),
    STRING_KEY("provider", "signing_string", provider_signing_string, set_signing_string,
               "The canonical string a signature is made over, a template of `{method}`, "
               "`{path}` (as sent, with its query), `{timestamp}`, `{idempotency_key}`, "
               "`{body_sha256}` (hex; of the empty body for a GET) and `{request_id}`; `\\n` is "
               "a new line."),
    STRING_KEY("provider", "signature_encoding", provider_signature_encoding, set_choice,
               "`hex` (lower case) or `base64`."),
    STRING_KEY("provider", "signature_prefix", provider_signature_prefix, set_prefix,
               "Text before the signature in its header, e.g. `sha256=` or `v1=`."),
    STRING_KEY("provider", "body_format", provider_body_format, set_choice,
               "The refund POST's body: `json` or `form` "
               "(`application/x-www-form-urlencoded`)."),
    CUSTOM_KEY("provider", "body_field", set_body_field, NULL,
               "One field of the refund POST's body, `NAME TEMPLATE`, repeatable (at most 16, "
               "in order); none: PROVIDER.md's `operation_id payment_id amount currency`. The "
               "template uses `{operation_id}`, `{payment_id}`, `{amount}`, `{currency}`, "
               "`{reason}`, `{metadata.KEY}`, `{metadata}`. `{amount}` alone is a JSON number, "
               "`{metadata}` alone an object (in a form, one `NAME[KEY]=VALUE` per pair); a "
               "field that is only an optional value the refund lacks is left out. In JSON a "
               "dot in NAME nests. E.g. `amount {amount}`, `metadata[op] {operation_id}`."),
    STRING_KEY("provider", "query_fallback_path", provider_query_fallback_path, set_path,
               "The query path used while the provider's refund id is unknown (a POST that "
               "timed out), when `provider.query_path` uses `{refund_id}`; must use "
               "`{operation_id}`. Required then, refused otherwise."),
    STRING_KEY("provider", "status_field", provider_status_field, set_field_source,
               "Where a response says the refund's status: a JSON path (`status`, "
               "`data.0.status`; a number is an array index) or `header:NAME`; up to three, "
               "space-separated, the first present wins. Empty: not read."),
    STRING_KEY("provider", "status_succeeded", provider_status_succeeded, set_status_list,
               "The provider's status words meaning succeeded, comma-separated; the "
               "classification table (`classify.rule`) sees them as `succeeded`."),
    STRING_KEY("provider", "status_failed", provider_status_failed, set_status_list,
               "The words meaning failed for good (seen as `failed`)."),
    STRING_KEY("provider", "status_processing", provider_status_processing, set_status_list,
               "The words meaning still running (seen as `processing`). A word in no list "
               "reaches the classification table as it is."),
    STRING_KEY("provider", "refund_id_field", provider_refund_id_field, set_field_source,
               "Where a response carries the provider's refund id (stored, shown, and usable "
               "as `{refund_id}` in `provider.query_path`)."),
    STRING_KEY("provider", "error_code_field", provider_error_code_field, set_field_source,
               "Where an error response carries its code (`code=` in `classify.rule`)."),
    STRING_KEY("provider", "failure_code_field", provider_failure_code_field, set_field_source,
               "Where a failed refund carries the reason it failed (shown to the operator)."),
    STRING_KEY("provider", "retryable_field", provider_retryable_field, set_field_source,
               "Where the provider marks an error retryable: a JSON boolean, or a header or "
               "string `true`/`false` (`retryable=` in `classify.rule`)."),

    DOUBLE_KEY("exit", "starts_per_second", exit.starts_per_second, 0, 1e9, true,
               "The account's start rate, every kind of call included: two starts are never "
               "closer than 1/rate, counted from each actual start, and idle time earns no "
               "credit. With `exit.shares`, each dispatcher starts at this rate inside its "
               "own windows of one grid and so, over time, at rate / shares."),
    INT_KEY("exit", "max_in_flight", KEY_UINT, exit.max_in_flight, 1, 10000, 1,
            "Calls open at the provider at most (the account's; each share gets "
            "max_in_flight / shares)."),
    INT_KEY("exit", "spacing_margin_us", KEY_I64, exit.spacing_margin_ns, 0, 1000000, 1000,
            "Added to every spacing between starts, in microseconds, for what the path to the "
            "provider may take off a gap (network and scheduling at both ends vary from request "
            "to request), so that a provider measuring arrivals in whole milliseconds still sees "
            "at least 1/rate. It costs rate: the exit starts at most 1 / (1/rate + margin) a "
            "second (the default: 0.5 % at 5/s, 4.8 % at 50/s). `tollgate verify` reports your "
            "path's variation (`receive_spacing`); docs/bench.md has how the default was "
            "measured."),
    DOUBLE_KEY("exit", "query_starts_per_second", exit_query_starts_per_second, 0, 1e9, false,
               "A sub-quota for reconciliation queries inside `exit.starts_per_second` (must be "
               "<= it: it never adds to it). 0: off."),
    INT_KEY("exit", "shares", KEY_UINT, exit_shares, 1, STORE_SHARES_MAX, 1,
            "The account's quota split into this many equal shares, one per running "
            "dispatcher (must be <= `exit.max_in_flight`). Give every dispatcher of one "
            "account the same `[exit]`; see docs/operating.md."),
    INT_KEY("exit", "clock_skew_ms", KEY_I64, exit_clock_skew_ms, 0, 1000, 1,
            "With `exit.shares` > 1: a bound on how far apart the clocks of the dispatchers' "
            "machines may be. The shares start only inside their own windows of one grid on "
            "the wall clock (a run of points at the account's spacing each), the next "
            "share's window this much and a late budget (a tenth of the spacing, at most 2 "
            "ms) after the last point, so that together they never start two calls closer "
            "than the account's spacing. It costs rate once a window, not once a start: a "
            "window holds enough points to keep that gap under 1 % of it, up to a share's "
            "in-flight cap (the exit_open log line says how many). Keep the machines' "
            "clocks synchronised (NTP) within it."),
    INT_KEY("exit", "timeout_run_hold", KEY_UINT, exit_timeout_run_hold, 0, 100000, 1,
            "This many timeouts in a row hold every start for `exit.timeout_hold_ms`; 0: "
            "never."),
    INT_KEY("exit", "timeout_hold_ms", KEY_I64, exit_timeout_hold_ms, 0, MAX_DURATION_MS, 1,
            "How long a run of timeouts holds the exit. After any hold exactly one probe goes "
            "first."),
    INT_KEY("exit", "default_hold_ms", KEY_I64, exit_default_hold_ms, 0, MAX_DURATION_MS, 1,
            "How long a 429 or 503 without Retry-After holds every start."),
    INT_KEY("exit", "default_hold_max_ms", KEY_I64, exit_default_hold_max_ms, 0, MAX_DURATION_MS, 1,
            "A probe refused again with 429/503 and no Retry-After holds twice as long as the "
            "last such hold, from `exit.default_hold_ms` up to this (and never past the "
            "Retry-After cap, `retry.retry_after_cap_s`): a provider that keeps refusing "
            "without saying how long costs one probe per doubling hold, not one per "
            "`exit.default_hold_ms`. At or below `exit.default_hold_ms`: no doubling."),
    INT_KEY("exit", "idle_poll_max_ms", KEY_I64, exit_idle_poll_max_ms, 50, 60000, 1,
            "An idle exit looks for new work at least this often. In `tollgate serve` the API "
            "wakes the exit for every new refund and a due retry wakes it on time, so this only "
            "bounds how late an outbox row is seen; a `tollgate dispatch` alone, which no API "
            "can wake, backs off from 50 ms to this while it finds nothing."),

    INT_KEY("retry", "max_attempts", KEY_UINT, policy.max_attempts, 1, 1000, 1,
            "POSTs per operation, the first included; then manual review "
            "(`attempts_exhausted`)."),
    BOOL_KEY("retry", "count_limited", policy.count_limited,
             "A POST (or query) the provider refused with 429/503 for the whole account "
             "(nothing executed) counts against `retry.max_attempts` (`retry.max_queries`) like "
             "any other. false (default): it is given back, so a rate-limit episode sends no "
             "refund to manual for its budget (the deadline still bounds it, and the exit holds "
             "and probes meanwhile); true: every POST sent counts, a strict bound on the POSTs "
             "one key may make."),
    INT_KEY("retry", "deadline_s", KEY_I64, policy.deadline_ms, 1, MAX_DURATION_S, 1000,
            "From acceptance to a final answer; no automatic call after it, the operation goes "
            "to manual review (`deadline`)."),
    INT_KEY("retry", "max_queries", KEY_UINT, policy.max_queries, 0, 100000, 1,
            "Reconciliation queries per operation; then manual review (`query_budget`). 0: an "
            "unknown goes straight to manual review."),
    INT_KEY("retry", "query_interval_ms", KEY_I64, policy.query_interval_ms, 1, MAX_DURATION_MS, 1,
            "Spacing of one operation's queries."),
    INT_KEY("retry", "key_retention_s", KEY_I64, policy.key_retention_ms, 1, MAX_DURATION_S, 1000,
            "Never re-send a key older than this (from its first POST): past the provider's "
            "retention (PROVIDER.md: 24 h) it may be taken as new and refunded twice. Such an "
            "operation goes to manual review (`key_retention`)."),
    INT_KEY("retry", "backoff_base_ms", KEY_I64, policy.backoff.base_ms, 1, MAX_DURATION_MS, 1,
            "Upper edge of the first retry's window. Retry n waits in [min(min, hi), hi] with "
            "hi = min(cap, base x factor^(n-1))."),
    DOUBLE_KEY("retry", "backoff_factor", policy.backoff.factor, 1, 100, false,
               "Growth of the window per retry."),
    INT_KEY("retry", "backoff_min_ms", KEY_I64, policy.backoff.min_ms, 0, MAX_DURATION_MS, 1,
            "Lower edge of every window; must be <= `retry.backoff_cap_ms`."),
    INT_KEY("retry", "backoff_cap_ms", KEY_I64, policy.backoff.cap_ms, 1, MAX_DURATION_MS, 1,
            "Per-retry cap on the window's upper edge; must be >= `retry.backoff_base_ms`."),
    CUSTOM_KEY("retry", "jitter", set_jitter, show_jitter,
               "How a wait is drawn in its window: `none` (the upper edge: every client at the "
               "same instant), `full` (uniform), `equal` (upper/2 + uniform up to upper/2) or "
               "`decorrelated`. A Retry-After is a floor that jitter never shortens."),
    INT_KEY("retry", "retry_after_cap_s", KEY_I64, retry_after_cap_ms, 0, MAX_DURATION_S, 1000,
            "A longer Retry-After (seconds or an HTTP date) is cut to this, and never to more "
            "than a quarter of `retry.deadline_s`: one absurd header must not hold every queued "
            "refund past its deadline (the exit asks again, one probe, when the cut wait has "
            "passed). Of two Retry-After headers the longer counts. The doubling hold after "
            "probes refused without Retry-After (`exit.default_hold_max_ms`) stops at this "
            "cap too."),

    CUSTOM_KEY("classify", "rule", set_rule, NULL,
               "A rule added over PROVIDER.md's built-in table, which it takes precedence over; "
               "repeatable (at most 64): `<post|query> <status>[-<status>] [code=<error_code>] "
               "[status=<body_status>] [retryable=<true|false|->] => <class>`, e.g. `post 409 "
               "code=idempotency_key_in_use => unknown`. Codes, statuses and the retryable mark "
               "are read where the `[provider]` reply mapping says. Classes: succeeded, "
               "rejected, key_reused, retryable, unknown, not_sent, processing, not_found, "
               "no_answer."),

    BOOL_KEY("admission", "enabled", admission.enabled,
             "Refuse NEW refunds (503 `over_capacity`, with Retry-After) when the backlog ahead "
             "cannot close in time; an accepted refund is never refused. See "
             "docs/operating.md."),
    INT_KEY("admission", "max_wait_s", KEY_I64, admission.max_wait_ms, 1, MAX_DURATION_S, 1000,
            "Refuse when the projected wait, (open backlog + 1) x calls per close / start "
            "rate, is above this."),
    INT_KEY("admission", "max_backlog", KEY_I64, admission.max_backlog, 1, 1000000000000LL, 1,
            "Refuse when this many operations are open."),
    INT_KEY("admission", "window_s", KEY_I64, admission.window_ms, 5, 3600, 1000,
            "The start rate and calls per close are measured over this window."),

    INT_KEY("stats", "series_minutes", KEY_UINT, stats_series_minutes, 1, 60, 1,
            "Minutes of per-second points in `GET /v1/stats` (`?minutes=` asks for another "
            "length)."),
    INT_KEY("stats", "keep_hours", KEY_UINT, stats_keep_hours, 1, 2160, 1,
            "Hours of the exit's per-second samples (and of the API's admission refusals) kept "
            "in the store: how far back the console's timeline and `tollgate report --config` "
            "reach. Each dispatcher adds one small row a second (about 0.25 MB an hour on "
            "SQLite)."),

    BOOL_KEY("ui", "enabled", ui_enabled,
             "Serve the console (live timeline, operations, manual-review desk, exit status) "
             "under `/ui/` on `api.listen`, when the binary was built with it (docs/operating.md, "
             "\"The console\"). Signing in needs `api.token_file` or `ui.users_file`."),
    STRING_KEY("ui", "users_file", ui_users_file, set_users_file,
               "A file of console users, one a line: `NAME ROLE sha256:HEX` with ROLE "
               "`operator` (may resend and resolve) or `viewer` (reads only) and the SHA-256 of "
               "the person's token (`printf %s TOKEN | sha256sum`), never the token. The audit "
               "trail names who acted. The API token signs in too, as the operator `api-token`. "
               "Unset: only the API token."),
    INT_KEY("ui", "session_idle_s", KEY_UINT, ui_session_idle_s, 60, 86400, 1,
            "A console session unused this long ends (sign in again)."),
    INT_KEY("ui", "session_max_s", KEY_UINT, ui_session_max_s, 300, 604800, 1,
            "A console session ends this long after sign-in, used or not."),
    BOOL_KEY("ui", "secure_cookie", ui_secure_cookie,
             "Mark the session cookie `Secure` (sent over HTTPS only): set it when people reach "
             "the console through a TLS proxy."),

    STRING_KEY("log", "level", log_level, set_log_level,
               "`debug`, `info`, `warn` or `error`. The logs are JSON lines on stderr."),

    CUSTOM_KEY("retention", "keep_days", set_keep_days, show_keep_days,
               "Operations that reached a final state (succeeded, rejected) more than this many "
               "days ago are deleted with their calls, in bounded batches, by the dispatcher's "
               "housekeeping and `tollgate prune`; 0: kept forever. An operation with an audit "
               "trail (a manual-review case, a provider event) is never deleted. Must be longer "
               "than any client may re-submit an operation_id (a deleted id is new again), and "
               "longer than `retry.deadline_s` + `retry.key_retention_s`. See docs/design.md."),
    INT_KEY("retention", "prune_batch", KEY_UINT, retention_prune_batch, 10, 10000, 1,
            "Operations deleted per prune transaction (each a short transaction: the exit never "
            "waits long behind one)."),
};

_Static_assert(sizeof(keys) / sizeof(keys[0]) <= 128, "struct load.seen is too small");

void config_defaults(struct tg_config *ret_config)
{
        struct tg_config *c = ret_config;

        memset(c, 0, sizeof(*c));
        snprintf(c->store_url, sizeof(c->store_url), "%s", "sqlite://tollgate.db");
        c->store_check_on_start = true;

        snprintf(c->api_listen_host, sizeof(c->api_listen_host), "%s", "127.0.0.1");
        c->api_listen_port = 8080;
        c->api_max_body_bytes = 16384;
        c->api_max_connections = 256;
        c->api_connection_timeout_s = 10;
        c->api_request_read_timeout_ms = 10000;
        c->api_metrics_need_token = false;

        snprintf(c->provider_base_url, sizeof(c->provider_base_url), "%s", "http://127.0.0.1:9090");
        snprintf(c->provider_refunds_path, sizeof(c->provider_refunds_path), "%s", "/v1/refunds");
        snprintf(c->provider_query_path, sizeof(c->provider_query_path), "%s",
                 "/v1/refunds/{operation_id}");
        snprintf(c->provider_key_header, sizeof(c->provider_key_header), "%s", "Idempotency-Key");
        snprintf(c->provider_request_id_header, sizeof(c->provider_request_id_header), "%s",
                 "X-Request-Id");
        snprintf(c->provider_attempt_header, sizeof(c->provider_attempt_header), "%s", "X-Attempt");
        c->provider_connect_timeout_ms = 1000;
        c->provider_timeout_ms = 3000;
        c->provider_max_response_bytes = 65536;
        /* A fresh connection per call: libcurl re-sends a request on a reused
         * connection that turns out dead (DESIGN.md, transport boundary). */
        c->provider_reuse_connections = false;
        c->provider_unreachable_run_hold = 3;
        c->provider_unreachable_hold_ms = 5000;
        c->provider_unreachable_hold_max_ms = 60000;
        snprintf(c->provider_auth, sizeof(c->provider_auth), "%s", "none");
        snprintf(c->provider_auth_header, sizeof(c->provider_auth_header), "%s", "X-Api-Key");
        snprintf(c->provider_signature_header, sizeof(c->provider_signature_header), "%s",
                 "X-Signature");
        snprintf(c->provider_timestamp_header, sizeof(c->provider_timestamp_header), "%s",
                 "X-Timestamp");
        snprintf(c->provider_signing_string, sizeof(c->provider_signing_string), "%s",
                 "{method}\\n{path}\\n{timestamp}\\n{idempotency_key}\\n{body_sha256}");
        snprintf(c->provider_signature_encoding, sizeof(c->provider_signature_encoding), "%s",
                 "hex");
        snprintf(c->provider_body_format, sizeof(c->provider_body_format), "%s", "json");
        snprintf(c->provider_status_field, sizeof(c->provider_status_field), "%s", "status");
        snprintf(c->provider_status_succeeded, sizeof(c->provider_status_succeeded), "%s",
                 "succeeded");
        snprintf(c->provider_status_failed, sizeof(c->provider_status_failed), "%s", "failed");
        snprintf(c->provider_status_processing, sizeof(c->provider_status_processing), "%s",
                 "processing");
        snprintf(c->provider_refund_id_field, sizeof(c->provider_refund_id_field), "%s",
                 "refund_id");
        snprintf(c->provider_error_code_field, sizeof(c->provider_error_code_field), "%s",
                 "error.code");
        snprintf(c->provider_failure_code_field, sizeof(c->provider_failure_code_field), "%s",
                 "failure_code");
        snprintf(c->provider_retryable_field, sizeof(c->provider_retryable_field), "%s",
                 "error.retryable");

        c->exit.starts_per_second = 5.0;
        c->exit.max_in_flight = 10;
        c->exit.spacing_margin_ns = 1000 * TG_NS_PER_US;
        c->exit_query_starts_per_second = 0.0;
        c->exit_shares = 1;
        c->exit_clock_skew_ms = 1;
        c->exit_timeout_run_hold = 5;
        c->exit_timeout_hold_ms = 1000;
        c->exit_default_hold_ms = 1000;
        c->exit_default_hold_max_ms = 60000;
        c->exit_idle_poll_max_ms = 1000;

        policy_config_default(&c->policy);
        c->retry_after_cap_ms = 120LL * 1000;

        c->rule_count = 0;
        admission_config_default(&c->admission);
        c->stats_series_minutes = 15;
        c->stats_keep_hours = 24;
        c->ui_enabled = true;
        c->ui_session_idle_s = 900;
        c->ui_session_max_s = 8 * 3600;
        c->ui_secure_cookie = false;
        snprintf(c->log_level, sizeof(c->log_level), "%s", "info");
        c->retention_keep_ms = 90 * DAY_MS;
        c->retention_prune_batch = 500;
}

int64_t config_retry_after_cap_ms(const struct tg_config *config)
{
        int64_t quarter = config->policy.deadline_ms / 4;

        return config->retry_after_cap_ms < quarter ? config->retry_after_cap_ms : quarter;
}

/* ---- messages ------------------------------------------------------------ */

static int key_index(const char *section, const char *name);
static int secret_open(struct load *load, const struct key_def *key, const char *path,
                       FILE **ret_file);

/* Records an error: the first one is what config_load() reports (inih keeps
 * parsing after a failed line, and the first is the one the operator needs
 * first); every one goes to the list config_check() prints. */
static void add_error(struct load *load, int line, const char *text)
{
        if (!load->failed) {
                load->failed = true;
                load->err_line = load->checking ? 0 : line;
                snprintf(load->err, sizeof(load->err), "%s", text);
        }
        if (load->nerr < LOAD_ERRORS_MAX) {
                load->errs[load->nerr].line = line;
                snprintf(load->errs[load->nerr].text, sizeof(load->errs[0].text), "%s", text);
                load->nerr++;
        }
}

/* Records an error "section.key: problem" at the line being read (in the
 * checks across keys: where the key was set, if it was). Always returns 0
 * (the inih "failed" value). */
static int key_error(struct load *load, const struct key_def *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int key_error(struct load *load, const struct key_def *key, const char *fmt, ...)
{
        char text[sizeof(load->errs[0].text)];
        int i = key_index(key->section, key->name);
        int line = load->line;
        va_list ap;
        int n;

        if (load->checking)
                line = i >= 0 && load->seen[i] ? load->seen_line[i] : 0;
        n = snprintf(text, sizeof(text), "%s.%s: ", key->section, key->name);
        if (n < 0 || (size_t)n >= sizeof(text))
                return 0;
        va_start(ap, fmt);
        vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
        va_end(ap);
        add_error(load, line, text);
        return 0;
}

/* ---- paths ----------------------------------------------------------------- */

/* path as written, or joined to the config file's folder when relative.
 * 0, or TG_ERANGE when the result does not fit. */
static int resolve_path(const struct load *load, const char *path, char *dst, size_t size)
{
        int n;

        if (path[0] == '/' || load->dir[0] == '\0')
                n = snprintf(dst, size, "%s", path);
        else
                n = snprintf(dst, size, "%s/%s", load->dir, path);
        return n < 0 || (size_t)n >= size ? TG_ERANGE : 0;
}

/* A bounded, printable copy of a value for a message: control bytes become
 * '?', and long values are cut with "...". */
static const char *quote(const char *value, char *buf, size_t size)
{
        size_t n = 0;

        for (; value[n] && n + 4 < size && n < VALUE_QUOTE_MAX; n++) {
                unsigned char c = (unsigned char)value[n];
                buf[n] = (c < 0x20 || c == 0x7f || c == '"') ? '?' : (char)c;
        }
        buf[n] = '\0';
        if (value[n] && n + 4 <= size)
                snprintf(buf + n, size - n, "...");
        return buf;
}

/* ---- typed values -------------------------------------------------------- */

/* A whole-string base-10 integer. No leading space (inih strips it), no
 * trailing junk, no overflow. */
static int parse_i64(const char *value, int64_t *ret)
{
        char *end = NULL;
        long long v;

        if (value[0] == '\0' || value[0] == ' ' || value[0] == '\t')
                return TG_EPARSE;
        errno = 0;
        v = strtoll(value, &end, 10);
        if (errno == ERANGE)
                return TG_ERANGE;
        if (errno != 0 || end == value || *end != '\0')
                return TG_EPARSE;
        *ret = (int64_t)v;
        return 0;
}

static int parse_bool(const char *value, bool *ret)
{
        static const char *const yes[] = {"true", "yes", "on", "1"};
        static const char *const no[] = {"false", "no", "off", "0"};

        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                if (strcasecmp(value, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(value, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return TG_EPARSE;
}

static int set_integer(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        int64_t v = 0;
        void *dst = (char *)&load->config + key->offset;

        if (strnum_i64(value, key->lo, key->hi, &v) < 0)
                return key_error(load, key, "must be an integer in [%lld, %lld], got \"%s\"",
                                 (long long)key->lo, (long long)key->hi,
                                 quote(value, q, sizeof(q)));
        switch (key->type) {
        case KEY_I64: {
                /* The range keeps v * scale far inside int64_t. */
                int64_t stored = v * key->scale;
                memcpy(dst, &stored, sizeof(stored));
                break;
        }
        case KEY_UINT: {
                unsigned stored = (unsigned)v;
                memcpy(dst, &stored, sizeof(stored));
                break;
        }
        case KEY_SIZE: {
                size_t stored = (size_t)v;
                memcpy(dst, &stored, sizeof(stored));
                break;
        }
        default:
                return key_error(load, key, "internal: not an integer key");
        }
        return 1;
}

static int set_double(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        double v = 0;
        bool low_ok;

        if (strnum_double(value, key->dlo, key->dhi, &v) < 0)
                return key_error(load, key, "must be a number in %c%g, %g], got \"%s\"",
                                 key->dlo_open ? '(' : '[', key->dlo, key->dhi,
                                 quote(value, q, sizeof(q)));
        low_ok = !key->dlo_open || v > key->dlo;
        if (!low_ok)
                return key_error(load, key, "must be a number in %c%g, %g], got \"%s\"",
                                 key->dlo_open ? '(' : '[', key->dlo, key->dhi,
                                 quote(value, q, sizeof(q)));
        memcpy((char *)&load->config + key->offset, &v, sizeof(v));
        return 1;
}

/* Copies value into a char[size] field of the config; too long is an
 * error, never a silent cut. */
static int set_string_at(struct load *load, const struct key_def *key, char *dst, size_t size,
                         const char *value)
{
        size_t len = strlen(value);

        if (len >= size)
                return key_error(load, key, "too long (at most %zu bytes)", size - 1);
        memcpy(dst, value, len + 1);
        return 1;
}

/* One %XX-encoded url parameter value, decoded into dst[size]. 0 or
 * TG_EPARSE. */
static int url_value_decode(const char *src, size_t n, char *dst, size_t size)
{
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                char c = src[i];
                if (c == '%') {
                        char hex[3] = {0};
                        char *end = NULL;
                        if (i + 2 >= n || !isxdigit((unsigned char)src[i + 1]) ||
                            !isxdigit((unsigned char)src[i + 2]))
                                return TG_EPARSE;
                        hex[0] = src[i + 1];
                        hex[1] = src[i + 2];
                        c = (char)strtol(hex, &end, 16);
                        if (c == '\0')
                                return TG_EPARSE;
                        i += 2;
                }
                if (o + 1 >= size)
                        return TG_EPARSE;
                dst[o++] = c;
        }
        dst[o] = '\0';
        return 0;
}

/* Appends text to dst[size] at *at, %XX-encoding what a url parameter value
 * cannot hold as it is. 0 or TG_ERANGE. */
static int url_value_append(char *dst, size_t size, size_t *at, const char *text)
{
        for (const char *p = text; *p; p++) {
                unsigned char c = (unsigned char)*p;
                bool plain = isalnum(c) || strchr("/._-~+,:@", c);
                int n = plain ? snprintf(dst + *at, size - *at, "%c", c)
                              : snprintf(dst + *at, size - *at, "%%%02X", c);
                if (n < 0 || (size_t)n >= size - *at)
                        return TG_ERANGE;
                *at += (size_t)n;
        }
        return 0;
}

/* mysql://...?password_file=P&socket=S: the parameters a url may have; the
 * two paths resolved against the config's folder (written back encoded),
 * and the password file checked like every secret file. The url is never
 * quoted: it may carry a password. 1, or 0 (an error was recorded). */
static int set_mysql_url(struct load *load, const struct key_def *key, const char *value)
{
        char url[sizeof(load->config.store_url)];
        const char *at = strrchr(value, '@');
        const char *q = strchr(at ? at : value, '?');
        size_t len;

        if (!q)
                return set_string_at(load, key, load->config.store_url,
                                     sizeof(load->config.store_url), value);
        len = (size_t)(q - value) + 1;
        if (len >= sizeof(url))
                return key_error(load, key, "too long (at most %zu bytes)", sizeof(url) - 1);
        memcpy(url, value, len);
        url[len] = '\0';
        for (const char *p = q + 1; *p;) {
                size_t plen = strcspn(p, "&");
                const char *eq = memchr(p, '=', plen);
                char raw[TG_PATH_MAX], path[TG_PATH_MAX];
                size_t nlen;

                if (!eq)
                        return key_error(load, key, "a mysql url parameter needs name=value");
                nlen = (size_t)(eq - p);
                if (len > 0 && url[len - 1] != '?') {
                        if (len + 1 >= sizeof(url))
                                return key_error(load, key, "too long");
                        url[len++] = '&';
                }
                if (!((nlen == 13 && strncmp(p, "password_file", 13) == 0) ||
                      (nlen == 6 && strncmp(p, "socket", 6) == 0)))
                        return key_error(load, key,
                                         "unknown mysql url parameter \"%.*s\" (known: "
                                         "password_file, socket)",
                                         (int)(nlen < 32 ? nlen : 32), p);
                if (url_value_decode(eq + 1, plen - nlen - 1, raw, sizeof(raw)) < 0 ||
                    raw[0] == '\0')
                        return key_error(load, key, "%.*s: not a path", (int)nlen, p);
                if (resolve_path(load, raw, path, sizeof(path)) < 0)
                        return key_error(load, key, "%.*s: path too long", (int)nlen, p);
                if (nlen == 13) {
                        FILE *f = NULL;
                        if (secret_open(load, key, path, &f) == 0)
                                return 0;
                        fclose(f);
                }
                if (len + nlen + 1 >= sizeof(url))
                        return key_error(load, key, "too long");
                memcpy(url + len, p, nlen + 1); /* name= */
                len += nlen + 1;
                url[len] = '\0';
                if (url_value_append(url, sizeof(url), &len, path) < 0)
                        return key_error(load, key, "too long");
                p += plen;
                if (*p == '&')
                        p++;
        }
        return set_string_at(load, key, load->config.store_url, sizeof(load->config.store_url),
                             url);
}

static int set_store_url(struct load *load, const struct key_def *key, const char *value)
{
        if (strncmp(value, "sqlite://", 9) == 0) {
                char path[TG_PATH_MAX];
                char url[sizeof(load->config.store_url)];
                int n;

                if (value[9] == '\0')
                        return key_error(load, key, "sqlite:// needs a file path");
                if (resolve_path(load, value + 9, path, sizeof(path)) < 0)
                        return key_error(load, key, "too long (at most %zu bytes)",
                                         sizeof(path) - 1);
                n = snprintf(url, sizeof(url), "sqlite://%s", path);
                if (n < 0 || (size_t)n >= sizeof(url))
                        return key_error(load, key, "too long (at most %zu bytes)",
                                         sizeof(url) - 1);
                return set_string_at(load, key, load->config.store_url,
                                     sizeof(load->config.store_url), url);
        }
        if (strncmp(value, "mysql://", 8) == 0) {
                if (value[8] == '\0')
                        return key_error(load, key, "mysql:// needs user:pass@host:port/db");
                return set_mysql_url(load, key, value);
        }
        /* Not quoted: a mysql url without the scheme could still carry a
         * password. */
        return key_error(load, key, "must start with sqlite:// or mysql://");
}

/* host:port, [v6]:port. The port may be 0 (any free port, for tests). */
static int set_listen(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        char host[sizeof(load->config.api_listen_host)];
        const char *colon;
        const char *hstart = value;
        size_t hlen;
        int64_t port = 0;

        if (value[0] == '[') {
                const char *close = strchr(value, ']');
                if (!close || close[1] != ':')
                        goto bad;
                hstart = value + 1;
                hlen = (size_t)(close - hstart);
                colon = close + 1;
        } else {
                colon = strrchr(value, ':');
                if (!colon || memchr(value, ':', (size_t)(colon - value)))
                        goto bad; /* no port, or an unbracketed IPv6 address */
                hlen = (size_t)(colon - value);
        }
        if (hlen == 0 || hlen >= sizeof(host))
                goto bad;
        memcpy(host, hstart, hlen);
        host[hlen] = '\0';
        for (size_t i = 0; i < hlen; i++) {
                unsigned char c = (unsigned char)host[i];
                if (c <= 0x20 || c >= 0x7f || c == '/' || c == '[' || c == ']')
                        goto bad;
        }
        if (parse_i64(colon + 1, &port) < 0 || port < 0 || port > 65535)
                return key_error(load, key, "port must be an integer in [0, 65535], got \"%s\"",
                                 quote(value, q, sizeof(q)));
        memcpy(load->config.api_listen_host, host, hlen + 1);
        load->config.api_listen_port = (int)port;
        return 1;
bad:
        return key_error(load, key, "must be host:port or [ipv6]:port, got \"%s\"",
                         quote(value, q, sizeof(q)));
}

/* Opens a secret file for reading, refusing one that is not a regular file
 * or that group or others may read or write: the message says the chmod
 * that fixes it. *ret_file is the caller's to close. 1, or 0 (an error was
 * recorded). Every secret file goes through here: the token, the webhook
 * secret, a mysql url's password_file (and the provider's credentials). */
static int secret_open(struct load *load, const struct key_def *key, const char *path,
                       FILE **ret_file)
{
        struct stat st;
        FILE *f;

        if (path[0] == '\0')
                return key_error(load, key, "must name a file");
        f = fopen(path, "rbe");
        if (!f)
                return key_error(load, key, "cannot read %s: %s", path, strerror(errno));
        if (fstat(fileno(f), &st) != 0) {
                int e = errno;
                fclose(f);
                return key_error(load, key, "cannot read %s: %s", path, strerror(e));
        }
        if (!S_ISREG(st.st_mode)) {
                fclose(f);
                return key_error(load, key, "cannot read %s: not a regular file", path);
        }
        if (st.st_mode & (S_IRWXG | S_IRWXO)) {
                fclose(f);
                return key_error(load, key,
                                 "%s holds a secret but group or others may read or write it "
                                 "(mode %04o): run chmod 600 %s (the file owned by the user "
                                 "tollgate runs as)",
                                 path, (unsigned)(st.st_mode & 07777), path);
        }
        *ret_file = f;
        return 1;
}

/* The whole of a secret file (through secret_open) into buf[SECRET_FILE_MAX
 * + 1], *ret_len bytes. 1, or 0 (an error was recorded; buf wiped). */
static int secret_read_all(struct load *load, const struct key_def *key, const char *path,
                           char *buf, size_t *ret_len)
{
        FILE *f = NULL;
        size_t n;

        if (secret_open(load, key, path, &f) == 0)
                return 0;
        n = fread(buf, 1, SECRET_FILE_MAX + 1, f);
        if (ferror(f)) {
                int e = errno;
                fclose(f);
                explicit_bzero(buf, SECRET_FILE_MAX + 1);
                return key_error(load, key, "cannot read %s: %s", path, strerror(e));
        }
        fclose(f);
        if (n > SECRET_FILE_MAX) {
                explicit_bzero(buf, SECRET_FILE_MAX + 1);
                return key_error(load, key, "%s: file too large for a secret", path);
        }
        *ret_len = n;
        return 1;
}

/* One secret from text[0..n) into dst[size]: trailing CR/LF/space/tab are
 * trimmed, and what is left must be non-empty printable ASCII without
 * spaces (it travels in an HTTP header). Never quotes the contents. 1, or 0
 * (an error was recorded). */
static int secret_take(struct load *load, const struct key_def *key, const char *path,
                       const char *text, size_t n, char *dst, size_t size)
{
        while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' ' ||
                         text[n - 1] == '\t'))
                n--;
        if (n == 0)
                return key_error(load, key, "%s is empty", path);
        if (n >= size)
                return key_error(load, key, "%s: secret longer than %zu bytes", path, size - 1);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)text[i];
                if (c < 0x21 || c > 0x7e)
                        return key_error(load, key,
                                         "%s: secret must be printable ASCII without spaces", path);
        }
        memcpy(dst, text, n);
        dst[n] = '\0';
        return 1;
}

/* Reads a secret from path into dst[size]: secret_open's checks (a regular
 * file nobody but its owner may read), then secret_take's. Never quotes the
 * contents. 1, or 0 (an error was recorded). */
static int read_secret(struct load *load, const struct key_def *key, const char *path, char *dst,
                       size_t size)
{
        char buf[SECRET_FILE_MAX + 1];
        size_t n = 0;
        int r;

        if (secret_read_all(load, key, path, buf, &n) == 0)
                return 0;
        r = secret_take(load, key, path, buf, n, dst, size);
        /* Wipe the stack copy: it is a secret. */
        explicit_bzero(buf, sizeof(buf));
        return r;
}

/* api.token_file: one token a line (blank lines skipped), at most
 * TG_API_TOKENS_MAX; every one is accepted, the first is the one the CLI
 * sends. Two lines are how a token is rotated without a refused request:
 * add the new one, reload, move the clients, drop the old one, reload. */
static int set_token_file(struct load *load, const struct key_def *key, const char *value)
{
        struct tg_config *c = &load->config;
        char path[TG_PATH_MAX];
        char buf[SECRET_FILE_MAX + 1];
        size_t n = 0, at = 0;
        int r = 1;

        if (resolve_path(load, value, path, sizeof(path)) < 0)
                return key_error(load, key, "too long (at most %zu bytes)", sizeof(path) - 1);
        if (set_string_at(load, key, c->api_token_file, sizeof(c->api_token_file), path) == 0)
                return 0;
        if (secret_read_all(load, key, path, buf, &n) == 0)
                return 0;
        c->api_token_count = 0;
        while (r && at < n) {
                size_t len = 0, end;

                while (at + len < n && buf[at + len] != '\n')
                        len++;
                end = len;
                while (end > 0 && (buf[at + end - 1] == '\r' || buf[at + end - 1] == ' ' ||
                                   buf[at + end - 1] == '\t'))
                        end--;
                if (end > 0 && c->api_token_count >= TG_API_TOKENS_MAX)
                        r = key_error(load, key, "%s: at most %d tokens, one a line", path,
                                      TG_API_TOKENS_MAX);
                else if (end > 0)
                        r = secret_take(load, key, path, buf + at, end,
                                        c->api_tokens[c->api_token_count++],
                                        sizeof(c->api_tokens[0]));
                at += len + 1;
        }
        explicit_bzero(buf, sizeof(buf));
        if (r && c->api_token_count == 0)
                r = key_error(load, key, "%s is empty", path);
        if (r)
                memcpy(c->api_token, c->api_tokens[0], sizeof(c->api_token));
        return r;
}

#define USERS_FILE_MAX (64 * 1024)

static int set_users_file(struct load *load, const struct key_def *key, const char *value)
{
        struct tg_config *c = &load->config;
        char err[160];
        char *buf;
        size_t n;
        FILE *f;
        int r;

        if (set_string_at(load, key, c->ui_users_file, sizeof(c->ui_users_file), value) == 0)
                return 0;
        if (value[0] == '\0')
                return key_error(load, key, "must name a file");
        f = fopen(value, "rb");
        if (!f)
                return key_error(load, key, "cannot read %s: %s", value, strerror(errno));
        buf = malloc(USERS_FILE_MAX + 1);
        if (!buf) {
                fclose(f);
                return key_error(load, key, "out of memory");
        }
        n = fread(buf, 1, USERS_FILE_MAX + 1, f);
        r = ferror(f) ? TG_EIO : 0;
        fclose(f);
        if (r == 0 && n > USERS_FILE_MAX)
                r = TG_EFULL;
        if (r == 0)
                r = ui_users_parse(buf, n, c->ui_users, UI_USERS_MAX, &c->ui_user_count, err,
                                   sizeof(err));
        explicit_bzero(buf, USERS_FILE_MAX + 1);
        free(buf);
        if (r == TG_EIO)
                return key_error(load, key, "cannot read %s", value);
        if (r == TG_EFULL && n > USERS_FILE_MAX)
                return key_error(load, key, "%s: larger than %d bytes", value, USERS_FILE_MAX);
        if (r < 0)
                return key_error(load, key, "%s: %s", value, err);
        return 1;
}

static int set_webhook_file(struct load *load, const struct key_def *key, const char *value)
{
        struct tg_config *c = &load->config;
        char path[TG_PATH_MAX];

        if (resolve_path(load, value, path, sizeof(path)) < 0)
                return key_error(load, key, "too long (at most %zu bytes)", sizeof(path) - 1);
        if (set_string_at(load, key, c->provider_webhook_secret_file,
                          sizeof(c->provider_webhook_secret_file), path) == 0)
                return 0;
        return read_secret(load, key, path, c->provider_webhook_secret,
                           sizeof(c->provider_webhook_secret));
}

static int set_base_url(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        const char *rest;

        if (strncmp(value, "http://", 7) == 0)
                rest = value + 7;
        else if (strncmp(value, "https://", 8) == 0)
                rest = value + 8;
        else
                return key_error(load, key, "must start with http:// or https://, got \"%s\"",
                                 quote(value, q, sizeof(q)));
        if (rest[0] == '\0' || rest[0] == '/')
                return key_error(load, key, "needs a host, got \"%s\"", quote(value, q, sizeof(q)));
        for (const char *p = value; *p; p++) {
                unsigned char c = (unsigned char)*p;
                if (c <= 0x20 || c >= 0x7f)
                        return key_error(load, key, "must not contain spaces or control bytes");
        }
        return set_string_at(load, key, (char *)&load->config + key->offset, key->size, value);
}

/* The three provider paths are templates (core/provider_map.h): the key's
 * name says which fields each may use. */
static int set_path(struct load *load, const struct key_def *key, const char *value)
{
        enum map_path kind = MAP_PATH_REFUNDS;
        struct template_error terr;
        struct template t;

        if (strcmp(key->name, "query_path") == 0)
                kind = MAP_PATH_QUERY;
        else if (strcmp(key->name, "query_fallback_path") == 0)
                kind = MAP_PATH_QUERY_FALLBACK;
        if (map_path_parse(kind, value, &t, &terr) < 0)
                return key_error(load, key, "%s", terr.message);
        return set_string_at(load, key, (char *)&load->config + key->offset, key->size, value);
}

/* An HTTP header name: an RFC 9110 token. */
static int set_header_name(struct load *load, const struct key_def *key, const char *value)
{
        static const char extra[] = "!#$%&'*+-.^_`|~";
        char q[VALUE_QUOTE_MAX + 8];

        if (value[0] == '\0')
                return key_error(load, key, "must not be empty");
        for (const char *p = value; *p; p++) {
                unsigned char c = (unsigned char)*p;
                bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                          (c >= '0' && c <= '9') || (c != '\0' && strchr(extra, c));
                if (!ok)
                        return key_error(load, key, "not a valid HTTP header name: \"%s\"",
                                         quote(value, q, sizeof(q)));
        }
        return set_string_at(load, key, (char *)&load->config + key->offset, key->size, value);
}

static int set_jitter(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        enum backoff_jitter jitter;

        if (backoff_jitter_parse(value, &jitter) < 0)
                return key_error(load, key, "must be none, full, equal or decorrelated, got \"%s\"",
                                 quote(value, q, sizeof(q)));
        load->config.policy.backoff.jitter = jitter;
        return 1;
}

static int set_rule(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        struct classify_rule rule;

        if (load->config.rule_count >= TG_CONFIG_MAX_RULES)
                return key_error(load, key, "at most %d rules", TG_CONFIG_MAX_RULES);
        if (classify_rule_parse(value, &rule) < 0)
                return key_error(load, key,
                                 "must be \"<post|query> <status>[-<status>] [code=...] "
                                 "[status=...] => <class>\", got \"%s\"",
                                 quote(value, q, sizeof(q)));
        load->config.rules[load->config.rule_count++] = rule;
        return 1;
}

static int set_log_level(struct load *load, const struct key_def *key, const char *value)
{
        static const char *const levels[] = {"debug", "info", "warn", "error"};
        char q[VALUE_QUOTE_MAX + 8];

        for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
                if (strcmp(value, levels[i]) == 0) {
                        snprintf(load->config.log_level, sizeof(load->config.log_level), "%s",
                                 levels[i]);
                        return 1;
                }
        }
        return key_error(load, key, "must be debug, info, warn or error, got \"%s\"",
                         quote(value, q, sizeof(q)));
}

static int set_keep_days(struct load *load, const struct key_def *key, const char *value)
{
        char q[VALUE_QUOTE_MAX + 8];
        int64_t days = 0;

        if (strnum_i64(value, 0, 36500, &days) < 0)
                return key_error(load, key,
                                 "must be an integer in [0, 36500] (0: keep forever), "
                                 "got \"%s\"",
                                 quote(value, q, sizeof(q)));
        load->config.retention_keep_ms = days * DAY_MS;
        return 1;
}

static void show_keep_days(const struct tg_config *config, char *buf, size_t size)
{
        snprintf(buf, size, "%lld", (long long)(config->retention_keep_ms / DAY_MS));
}

/* A file that must be readable now (it is read again at each use); a
 * relative path is the config file's folder's. */
static int set_readable_file(struct load *load, const struct key_def *key, const char *value)
{
        char path[TG_PATH_MAX];
        FILE *f;

        if (value[0] == '\0')
                return key_error(load, key, "must name a file");
        if (resolve_path(load, value, path, sizeof(path)) < 0)
                return key_error(load, key, "path too long");
        f = fopen(path, "rb");
        if (!f)
                return key_error(load, key, "cannot read %s: %s", path, strerror(errno));
        fclose(f);
        return set_string_at(load, key, (char *)&load->config + key->offset, key->size, path);
}

static int set_client_key(struct load *load, const struct key_def *key, const char *value)
{
        char why[TG_PATH_MAX * 2 + 160];
        const char *path = (char *)&load->config + key->offset;

        if (set_readable_file(load, key, value) == 0)
                return 0;
        if (provider_setup_check_key_file(path, why, sizeof(why)) < 0)
                return key_error(load, key, "%s", why);
        return 1;
}

/* A secret file: readable and a valid secret now (it is read again when
 * the credentials are loaded; nothing of it is kept here). */
static int set_secret_path(struct load *load, const struct key_def *key, const char *value)
{
        char secret[256], path[TG_PATH_MAX];
        int r;

        if (resolve_path(load, value, path, sizeof(path)) < 0)
                return key_error(load, key, "path too long");
        if (set_string_at(load, key, (char *)&load->config + key->offset, key->size, path) == 0)
                return 0;
        r = read_secret(load, key, path, secret, sizeof(secret));
        explicit_bzero(secret, sizeof(secret));
        return r;
}

/* A key that takes one of a few words. */
static int set_choice(struct load *load, const struct key_def *key, const char *value)
{
        static const struct {
                const char *name;
                const char *words;
                const char *text;
        } choices[] = {
            {"auth", " none bearer header ", "none, bearer or header"},
            {"signature_encoding", " hex base64 ", "hex or base64"},
            {"body_format", " json form ", "json or form"},
        };
        char q[VALUE_QUOTE_MAX + 8], word[16];

        for (size_t i = 0; i < sizeof(choices) / sizeof(choices[0]); i++) {
                if (strcmp(choices[i].name, key->name) != 0)
                        continue;
                snprintf(word, sizeof(word), " %s ", value);
                if (value[0] && strlen(value) < 12 && !strchr(value, ' ') &&
                    strstr(choices[i].words, word))
                        return set_string_at(load, key, (char *)&load->config + key->offset,
                                             key->size, value);
                return key_error(load, key, "must be %s, got \"%s\"", choices[i].text,
                                 quote(value, q, sizeof(q)));
        }
        return key_error(load, key, "internal: no choices");
}

static int set_signing_string(struct load *load, const struct key_def *key, const char *value)
{
        struct template_error terr;
        struct template t;

        if (value[0] == '\0')
                return key_error(load, key, "must not be empty");
        if (template_parse(value, TPL_SIGNING_FIELDS, &t, &terr) < 0)
                return key_error(load, key, "%s", terr.message);
        return set_string_at(load, key, (char *)&load->config + key->offset, key->size, value);
}

static int set_prefix(struct load *load, const struct key_def *key, const char *value)
{
        for (const char *p = value; *p; p++) {
                unsigned char c = (unsigned char)*p;
                if (c < 0x21 || c > 0x7e)
                        return key_error(load, key, "must be printable ASCII without spaces");
        }
        return set_string_at(load, key, (char *)&load->config + key->offset, key->size, value);
}

static int set_body_field(struct load *load, const struct key_def *key, const char *value)
{
        struct template_error terr;
        struct body_field f;
        struct tg_config *c = &load->config;

        if (c->provider_body_field_count >= TG_CONFIG_MAX_BODY)
                return key_error(load, key, "at most %d fields", TG_CONFIG_MAX_BODY);
        if (strlen(value) >= sizeof(c->provider_body_fields[0]))
                return key_error(load, key, "too long");
        if (body_field_parse(value, &f, &terr) < 0)
                return key_error(load, key, "%s", terr.message);
        snprintf(c->provider_body_fields[c->provider_body_field_count++],
                 sizeof(c->provider_body_fields[0]), "%s", value);
        return 1;
}

static int set_field_source(struct load *load, const struct key_def *key, const char *value)
{
        struct template_error terr;
        struct field_source fs;

        if (field_source_parse(value, &fs, &terr) < 0)
                return key_error(load, key, "%s", terr.message);
        return set_string_at(load, key, (char *)&load->config + key->offset, key->size, value);
}

static int set_status_list(struct load *load, const struct key_def *key, const char *value)
{
        struct template_error terr;
        struct status_list l;

        if (status_list_parse(value, &l, &terr) < 0)
                return key_error(load, key, "%s", terr.message);
        return set_string_at(load, key, (char *)&load->config + key->offset, key->size, value);
}

int config_read_secret(const char *section, const char *name, const char *path, char *dst,
                       size_t size, char *err, size_t err_size)
{
        /* The one secret reader (read_secret), with a load of its own for
         * its message. */
        struct key_def key = {.section = section, .name = name, .type = KEY_CUSTOM};
        struct load *load = secmem_alloc(sizeof(*load));
        int r = 0;

        if (!load)
                return TG_ENOMEM;
        if (read_secret(load, &key, path, dst, size) == 0) {
                if (err && err_size)
                        snprintf(err, err_size, "%s", load->err);
                r = TG_ECONFIG;
        }
        secmem_free(load); /* wipes */
        return r;
}

/* ---- the inih handler ---------------------------------------------------- */

static int key_index(const char *section, const char *name)
{
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                if (strcmp(keys[i].section, section) == 0 && strcmp(keys[i].name, name) == 0)
                        return (int)i;
        return -1;
}

/* Levenshtein distance of two short names (longer ones are far apart). */
static size_t distance(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        size_t row[65];

        if (la > 64 || lb > 64)
                return SIZE_MAX;
        for (size_t j = 0; j <= lb; j++)
                row[j] = j;
        for (size_t i = 1; i <= la; i++) {
                size_t diag = row[0];
                row[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t up = row[j];
                        size_t best = diag + (tolower((unsigned char)a[i - 1]) !=
                                              tolower((unsigned char)b[j - 1]));
                        if (row[j - 1] + 1 < best)
                                best = row[j - 1] + 1;
                        if (up + 1 < best)
                                best = up + 1;
                        row[j] = best;
                        diag = up;
                }
        }
        return row[lb];
}

/* Close enough to be a typo of what was meant. */
static bool near(const char *typed, const char *known)
{
        size_t d = distance(typed, known);
        size_t limit = strlen(known) / 3;

        return d <= (limit > 2 ? limit : 2);
}

/* The message for a key the table does not have: the closest key of its
 * section, else the same name in another section, when one is near. */
static int unknown_key(struct load *load, const struct key_def *unknown)
{
        const struct key_def *best = NULL, *elsewhere = NULL;
        size_t best_d = SIZE_MAX;

        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                size_t d = distance(unknown->name, keys[i].name);
                if (strcmp(keys[i].section, unknown->section) != 0) {
                        if (d == 0 && !elsewhere)
                                elsewhere = &keys[i];
                        continue;
                }
                if (d < best_d && near(unknown->name, keys[i].name)) {
                        best = &keys[i];
                        best_d = d;
                }
        }
        if (best)
                return key_error(load, unknown, "unknown key; did you mean %s.%s?", best->section,
                                 best->name);
        if (elsewhere)
                return key_error(load, unknown, "unknown key in [%s]; did you mean %s.%s?",
                                 unknown->section, elsewhere->section, elsewhere->name);
        return key_error(load, unknown, "unknown key");
}

static int unknown_section(struct load *load, const struct key_def *unknown)
{
        const char *best = NULL;
        size_t best_d = SIZE_MAX;

        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                size_t d = distance(unknown->section, keys[i].section);
                if (d < best_d && near(unknown->section, keys[i].section)) {
                        best = keys[i].section;
                        best_d = d;
                }
        }
        if (best)
                return key_error(load, unknown, "unknown section [%s]; did you mean [%s]?",
                                 unknown->section, best);
        return key_error(load, unknown, "unknown section [%s]", unknown->section);
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
        struct load *load = user;
        struct key_def unknown = {.section = section, .name = name, .type = KEY_CUSTOM};
        bool section_known = false;

        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                const struct key_def *key = &keys[i];
                if (strcmp(key->section, section) != 0)
                        continue;
                section_known = true;
                if (strcmp(key->name, name) != 0)
                        continue;
                if (load->seen[i] && key->custom != set_rule && key->custom != set_body_field)
                        return key_error(load, key, "set more than once (first at line %d)",
                                         load->seen_line[i]);
                load->seen[i] = true;
                load->seen_line[i] = load->line;
                switch (key->type) {
                case KEY_STRING:
                        return set_string_at(load, key, (char *)&load->config + key->offset,
                                             key->size, value);
                case KEY_I64:
                case KEY_UINT:
                case KEY_SIZE:
                        return set_integer(load, key, value);
                case KEY_DOUBLE:
                        return set_double(load, key, value);
                case KEY_BOOL: {
                        char q[VALUE_QUOTE_MAX + 8];
                        bool b;
                        if (parse_bool(value, &b) < 0)
                                return key_error(load, key, "must be true or false, got \"%s\"",
                                                 quote(value, q, sizeof(q)));
                        memcpy((char *)&load->config + key->offset, &b, sizeof(b));
                        return 1;
                }
                case KEY_CUSTOM:
                        return key->custom(load, key, value);
                }
        }
        if (section[0] == '\0')
                return key_error(load, &unknown, "key outside any [section]");
        if (!section_known)
                return unknown_section(load, &unknown);
        return unknown_key(load, &unknown);
}

/* ---- checks across keys --------------------------------------------------- */

static bool is_loopback(const char *host)
{
        struct in_addr v4;
        struct in6_addr v6;

        if (strcasecmp(host, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, host, &v4) == 1)
                return (ntohl(v4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, host, &v6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&v6);
        return false;
}

/* Was section.name set in the file? */
static bool was_set(const struct load *load, const char *section, const char *name)
{
        int i = key_index(section, name);

        return i >= 0 && load->seen[i];
}

/* A pair that must keep low <= high is broken: blame the key the operator
 * wrote (the high one when only it was set, else the low one). */
static int order_error(struct load *load, const char *section, const char *low, const char *high,
                       const char *value_text)
{
        struct key_def key = {.section = section, .type = KEY_CUSTOM};

        if (was_set(load, section, high) && !was_set(load, section, low)) {
                key.name = high;
                return key_error(load, &key, "must be >= %s.%s (%s)", section, low, value_text);
        }
        key.name = low;
        return key_error(load, &key, "must be <= %s.%s (%s)", section, high, value_text);
}

/* The provider's TLS, credentials and mapping, across keys. */
static void check_provider(struct load *load)
{
        static const struct key_def secret = {.section = "provider", .name = "auth_secret_file"};
        static const struct key_def cert = {.section = "provider", .name = "client_cert"};
        static const struct key_def key = {.section = "provider", .name = "client_key"};
        static const struct key_def ca = {.section = "provider", .name = "ca_file"};
        struct tg_config *c = &load->config;
        struct provider_maps *maps;
        char v[64], err[400];
        bool auth = strcmp(c->provider_auth, "none") != 0;
        int r;

        if (auth && !c->provider_auth_secret_file[0])
                key_error(load, &secret, "required when provider.auth is %s", c->provider_auth);
        if (!auth && c->provider_auth_secret_file[0])
                key_error(load, &secret, "set, but provider.auth is none");
        if (c->provider_client_cert[0] && !c->provider_client_key[0])
                key_error(load, &key, "required with provider.client_cert");
        if (c->provider_client_key[0] && !c->provider_client_cert[0])
                key_error(load, &cert, "required with provider.client_key");
        if (strncmp(c->provider_base_url, "http://", 7) == 0) {
                if (c->provider_ca_file[0])
                        key_error(load, &ca, "set, but provider.base_url is http://");
                if (c->provider_client_cert[0])
                        key_error(load, &cert, "set, but provider.base_url is http://");
        }
        if (c->provider_unreachable_hold_ms > c->provider_unreachable_hold_max_ms) {
                bool blame_high = was_set(load, "provider", "unreachable_hold_max_ms") &&
                                  !was_set(load, "provider", "unreachable_hold_ms");
                snprintf(v, sizeof(v), "%lld",
                         (long long)(blame_high ? c->provider_unreachable_hold_ms
                                                : c->provider_unreachable_hold_max_ms));
                order_error(load, "provider", "unreachable_hold_ms", "unreachable_hold_max_ms", v);
        }
        /* The mapping as a whole, evaluated once: a message names its key. */
        maps = malloc(sizeof(*maps));
        if (!maps) {
                add_error(load, 0, "config: out of memory");
                return;
        }
        r = provider_setup_maps(c, maps, err, sizeof(err));
        free(maps);
        if (r < 0)
                add_error(load, 0, err);
}

/* Every check runs, so that config_check() lists every problem; each
 * records its own error. Runs only on a file whose keys all read well:
 * a refused key keeps its default, which would make a check here lie. */
static void check_all(struct load *load)
{
        static const struct key_def token = {.section = "api", .name = "token_file"};
        static const struct key_def retry = {.section = "retry", .name = "max_attempts"};
        static const struct key_def keep = {.section = "retention", .name = "keep_days"};
        struct tg_config *c = &load->config;
        char v[64];

        if (c->api_token[0] == '\0' && !is_loopback(c->api_listen_host))
                key_error(load, &token, "required when api.listen is not loopback");
        if (c->provider_connect_timeout_ms > c->provider_timeout_ms) {
                bool blame_high = was_set(load, "provider", "timeout_ms") &&
                                  !was_set(load, "provider", "connect_timeout_ms");
                snprintf(v, sizeof(v), "%lld",
                         (long long)(blame_high ? c->provider_connect_timeout_ms
                                                : c->provider_timeout_ms));
                order_error(load, "provider", "connect_timeout_ms", "timeout_ms", v);
        }
        if (c->policy.backoff.base_ms > c->policy.backoff.cap_ms) {
                bool blame_high = was_set(load, "retry", "backoff_cap_ms") &&
                                  !was_set(load, "retry", "backoff_base_ms");
                snprintf(
                    v, sizeof(v), "%lld",
                    (long long)(blame_high ? c->policy.backoff.base_ms : c->policy.backoff.cap_ms));
                order_error(load, "retry", "backoff_base_ms", "backoff_cap_ms", v);
        }
        if (c->policy.backoff.min_ms > c->policy.backoff.cap_ms) {
                bool blame_high = was_set(load, "retry", "backoff_cap_ms") &&
                                  !was_set(load, "retry", "backoff_min_ms");
                snprintf(
                    v, sizeof(v), "%lld",
                    (long long)(blame_high ? c->policy.backoff.min_ms : c->policy.backoff.cap_ms));
                order_error(load, "retry", "backoff_min_ms", "backoff_cap_ms", v);
        }
        /* A sub-quota narrows the account total, never adds to it. */
        if (c->exit_query_starts_per_second > c->exit.starts_per_second) {
                bool blame_high = was_set(load, "exit", "starts_per_second") &&
                                  !was_set(load, "exit", "query_starts_per_second");
                snprintf(v, sizeof(v), "%g",
                         blame_high ? c->exit_query_starts_per_second : c->exit.starts_per_second);
                order_error(load, "exit", "query_starts_per_second", "starts_per_second", v);
        }
        /* Each share of the account gets max_in_flight / shares calls open
         * (at least one, and together no more than the account's). */
        if (c->exit_shares > c->exit.max_in_flight) {
                static const struct key_def shares = {.section = "exit", .name = "shares"};

                key_error(load, &shares,
                          "must be <= exit.max_in_flight (%u): each share needs at least "
                          "one call in flight of the account's",
                          c->exit.max_in_flight);
        }
        if (policy_config_check(&c->policy) < 0)
                key_error(load, &retry, "the [retry] settings are inconsistent");
        /* A pruned operation's id is new again: while the provider may still
         * hear of the operation (its deadline, then its key's retention), it
         * must stay. */
        if (c->retention_keep_ms > 0 &&
            c->retention_keep_ms <= c->policy.deadline_ms + c->policy.key_retention_ms)
                key_error(load, &keep,
                          "must be 0 (keep forever) or longer than retry.deadline_s + "
                          "retry.key_retention_s (%lld s)",
                          (long long)((c->policy.deadline_ms + c->policy.key_retention_ms) / 1000));
        if (c->ui_session_idle_s > c->ui_session_max_s) {
                snprintf(v, sizeof(v), "%u",
                         was_set(load, "ui", "session_max_s") &&
                                 !was_set(load, "ui", "session_idle_s")
                             ? c->ui_session_idle_s
                             : c->ui_session_max_s);
                order_error(load, "ui", "session_idle_s", "session_max_s", v);
        }
        check_provider(load);
}

/* inih reads lines through this: fgets that counts lines (so that an error
 * can name its line), refuses a line longer than inih's buffer instead of
 * letting inih read its tail as a line of its own, and cuts an inline
 * comment: after a value, whitespace then '#' or ';' starts one (inih
 * itself knows only " ;"). A line that starts with either is inih's. */
static char *read_line(char *str, int num, void *stream)
{
        struct load *load = stream;
        char *got = fgets(str, num, load->file);
        size_t len;

        if (!got)
                return NULL;
        load->line++;
        len = strlen(got);
        if (len > 0 && got[len - 1] != '\n' && !feof(load->file)) {
                char text[64];
                int c;
                while ((c = fgetc(load->file)) != EOF && c != '\n')
                        ;
                snprintf(text, sizeof(text), "config: line longer than %d bytes", num - 2);
                add_error(load, load->line, text);
                /* inih sees an empty line: the error above is what counts. */
                str[0] = '\n';
                str[1] = '\0';
                return got;
        }
        size_t lead = strspn(str, " \t");
        if (str[lead] == '#' || str[lead] == ';')
                return got;
        for (size_t i = lead + 1; str[i]; i++) {
                if ((str[i] == '#' || str[i] == ';') && (str[i - 1] == ' ' || str[i - 1] == '\t')) {
                        str[i] = '\n';
                        str[i + 1] = '\0';
                        break;
                }
        }
        /* A line that is neither a [section] nor key = value: said here, so
         * that every such line is listed (inih answers only its first), and
         * inih is handed an empty line. */
        size_t end = strcspn(str + lead, "\r\n");
        while (end > 0 && (str[lead + end - 1] == ' ' || str[lead + end - 1] == '\t'))
                end--;
        bool section = str[lead] == '[' && memchr(str + lead, ']', end) != NULL;
        bool pair =
            str[lead] != '[' && (memchr(str + lead, '=', end) || memchr(str + lead, ':', end));
        if (end > 0 && !section && !pair) {
                add_error(load, load->line, "config: not a [section] or key = value line");
                str[0] = '\n';
                str[1] = '\0';
        }
        return got;
}

/* The folder of path, absolute (the path itself was opened). */
static void config_folder(const char *path, char *dst, size_t size)
{
        char abs[PATH_MAX];
        char *slash;

        dst[0] = '\0';
        if (!realpath(path, abs))
                return; /* then relative paths stay as written */
        slash = strrchr(abs, '/');
        if (slash == abs)
                slash[1] = '\0'; /* a file in / */
        else if (slash)
                *slash = '\0';
        if (strlen(abs) < size) /* else relative paths stay as written */
                memcpy(dst, abs, strlen(abs) + 1);
}

/* Reads path into load: every key, then (when they all read well) the
 * checks across keys. 0, or -errno (the file cannot be opened: recorded). */
static int load_run(const char *path, struct load *load)
{
        int line;

        load->file = fopen(path, "re");
        if (!load->file) {
                char text[sizeof(load->errs[0].text)];
                int e = errno;

                snprintf(text, sizeof(text), "config: cannot open %s: %s", path, strerror(e));
                add_error(load, 0, text);
                return -e;
        }
        config_folder(path, load->dir, sizeof(load->dir));
        config_defaults(&load->config);
        snprintf(load->config.config_dir, sizeof(load->config.config_dir), "%s", load->dir);
        line = ini_parse_stream(read_line, load, on_key, load);
        if (ferror(load->file)) {
                char text[sizeof(load->errs[0].text)];
                snprintf(text, sizeof(text), "config: cannot read %s", path);
                add_error(load, 0, text);
        }
        fclose(load->file);
        load->file = NULL;
        if (line > 0) {
                /* inih answers the first line it or our handler refused: when
                 * no error of ours is on it, it is inih's own refusal (no
                 * '=', an unclosed '[') */
                bool ours = false;
                for (unsigned i = 0; i < load->nerr && !ours; i++)
                        ours = load->errs[i].line == line;
                if (!ours)
                        add_error(load, line, "config: not a [section] or key = value line");
        } else if (line < 0 && !load->failed) {
                char text[sizeof(load->errs[0].text)];
                snprintf(text, sizeof(text), "config: cannot parse %s", path);
                add_error(load, 0, text);
        }
        /* The default store is a relative path too. */
        if (!was_set(load, "store", "url")) {
                static const struct key_def url = {.section = "store", .name = "url"};
                char dflt[TG_PATH_MAX];

                snprintf(dflt, sizeof(dflt), "%s", load->config.store_url);
                set_store_url(load, &url, dflt);
        }
        if (!load->failed) {
                load->checking = true;
                check_all(load);
                load->checking = false;
        }
        return 0;
}

/* The errors in line order (stable: equal lines keep their order; those
 * without a line last). */
static void sort_errors(struct load *load)
{
        for (unsigned i = 1; i < load->nerr; i++) {
                struct load_error e = load->errs[i];
                unsigned key = e.line > 0 ? (unsigned)e.line : UINT_MAX;
                unsigned j = i;
                while (j > 0) {
                        const struct load_error *p = &load->errs[j - 1];
                        unsigned pk = p->line > 0 ? (unsigned)p->line : UINT_MAX;
                        if (pk <= key)
                                break;
                        load->errs[j] = load->errs[j - 1];
                        j--;
                }
                load->errs[j] = e;
        }
}

int config_load(const char *path, struct tg_config *ret_config, char *err, size_t err_size)
{
        struct load *load;
        int r;

        if (!path || !ret_config)
                return TG_EINVAL;
        /* Secret memory, not the stack: the struct carries 64 rules and
         * several paths, and the secrets read while it is filled. */
        load = secmem_alloc(sizeof(*load));
        if (!load)
                return TG_ENOMEM;
        r = load_run(path, load);
        if (r == 0 && load->failed) {
                r = TG_ECONFIG;
                /* The first problem in the file (a check across keys has
                 * no line of its own here, as it never had). */
                if (!load->checking && load->nerr > 0 && load->err_line > 0) {
                        sort_errors(load);
                        load->err_line = load->errs[0].line;
                        snprintf(load->err, sizeof(load->err), "%s", load->errs[0].text);
                }
        }
        if (r < 0) {
                if (err && err_size) {
                        if (load->err_line > 0)
                                snprintf(err, err_size, "%s (line %d)", load->err, load->err_line);
                        else
                                snprintf(err, err_size, "%s", load->err);
                }
                goto out;
        }
        *ret_config = load->config;
out:
        /* The copy holds secrets: wiped as it is given back. */
        secmem_free(load);
        return r;
}

int config_check(const char *path, config_problem_fn fn, void *ctx, unsigned *ret_problems)
{
        struct load *load;
        int r;

        if (!path || !fn || !ret_problems)
                return TG_EINVAL;
        load = secmem_alloc(sizeof(*load)); /* the secrets read while checking */
        if (!load)
                return TG_ENOMEM;
        r = load_run(path, load);
        sort_errors(load);
        for (unsigned i = 0; i < load->nerr; i++)
                fn(ctx, load->errs[i].line, load->errs[i].text);
        *ret_problems = load->nerr;
        secmem_free(load); /* wipes */
        return r;
}

/* ---- the schema written out (config_describe) ----------------------------- */

#define DOC_WIDTH 78 /* INI comment lines: well inside inih's line buffer */

static const char ini_intro[] =
    "# tollgate's configuration: every key, set to its default.\n"
    "# Printed by `tollgate config defaults`; docs/config.md is the same as tables.\n"
    "# A key left out keeps its default, so a file needs only the keys it changes.\n"
    "# A line starting with # or ; is a comment; after a value, \" #\" or \" ;\" starts one.\n"
    "# Relative paths are relative to this file's folder.\n";

static const char md_intro[] =
    "# Configuration reference\n"
    "\n"
    "<!-- Generated by `tollgate config defaults --format markdown` from the key table\n"
    "     in src/daemon/config.c; do not edit by hand. -->\n"
    "\n"
    "`tollgate serve`, `dispatch` and `api` (and the operator commands) read one INI file,\n"
    "`--config FILE`. Every key has a default, so a file needs only the keys it changes;\n"
    "`tollgate config defaults` prints every key at its default as a commented INI file.\n"
    "\n"
    "- A bad file stops the program before anything starts, with a message naming the\n"
    "  `section.key`, the problem and the line, e.g. `exit.starts_per_second: must be a\n"
    "  number in (0, 1e+09], got \"fast\" (line 12)`. An unknown section or key, a key set\n"
    "  twice (except `classify.rule` and `provider.body_field`) and a line longer than 198\n"
    "  bytes are errors too.\n"
    "- Numbers are base 10, use the whole value and must sit inside the key's range.\n"
    "  Booleans are `true`/`false`, `yes`/`no`, `on`/`off` or `1`/`0`.\n"
    "- A line starting with `#` or `;` is a comment; after a value, ` #` or ` ;` (a space or\n"
    "  a tab, then `#` or `;`) starts one.\n"
    "- Secrets (the API token, the webhook secret, a database password, the provider's API\n"
    "  key and signing key, the client key) never need to be in this file: `token_file`,\n"
    "  `webhook_secret_file`, a mysql url's `?password_file=`, `provider.auth_secret_file`,\n"
    "  `provider.signing_key_file` and `provider.client_key` name files, read at load and\n"
    "  never shown in a log line or a message. A secret file that group or others may read or\n"
    "  write is refused (the message says `chmod 600 FILE`).\n"
    "- Relative paths (a `sqlite://` file, the default store too, every `*_file`,\n"
    "  `client_cert`, `client_key`, a mysql url's `password_file` and `socket`) are relative\n"
    "  to the config file's folder, whatever the current directory of the process.\n"
    "- The `[provider]` keys that describe a provider's contract (paths, body, reply\n"
    "  fields, credentials) are explained with two worked profiles in docs/providers/.\n"
    "- `tollgate config check --config FILE` lists every problem of a file with its line\n"
    "  (an unknown key or section with the closest known name) and exits 1, or exits 0.\n"
    "- On SIGHUP the daemon reads its file again: what can change live changes, the rest is\n"
    "  refused with a log line naming the key and keeps running as it was\n"
    "  ([operating.md](operating.md#reloading-the-config-sighup)).\n";

static void show_listen(const struct tg_config *config, char *buf, size_t size)
{
        /* An IPv6 host is written back in brackets, as set_listen reads it. */
        bool v6 = strchr(config->api_listen_host, ':') != NULL;

        snprintf(buf, size, "%s%s%s:%d", v6 ? "[" : "", config->api_listen_host, v6 ? "]" : "",
                 config->api_listen_port);
}

static void show_jitter(const struct tg_config *config, char *buf, size_t size)
{
        snprintf(buf, size, "%s", backoff_jitter_name(config->policy.backoff.jitter));
}

/* The shortest %g that reads back as the same double. */
static void show_double(double v, char *buf, size_t size)
{
        for (int digits = 1; digits <= 17; digits++) {
                snprintf(buf, size, "%.*g", digits, v);
                if (strtod(buf, NULL) == v)
                        return;
        }
}

/* The value of key in config, written as the file holds it; "" when the key
 * has none (an unset secret file, no rule added). 0, or TG_EINVAL when the
 * value cannot be written in the key's unit (a default of 1500 ms on a key
 * written in seconds). */
static int show_value(const struct key_def *key, const struct tg_config *config, char *buf,
                      size_t size)
{
        const char *at = (const char *)config + key->offset;

        buf[0] = '\0';
        switch (key->type) {
        case KEY_I64: {
                int64_t v;
                memcpy(&v, at, sizeof(v));
                if (v % key->scale != 0)
                        return TG_EINVAL;
                snprintf(buf, size, "%lld", (long long)(v / key->scale));
                return 0;
        }
        case KEY_UINT: {
                unsigned v;
                memcpy(&v, at, sizeof(v));
                snprintf(buf, size, "%u", v);
                return 0;
        }
        case KEY_SIZE: {
                size_t v;
                memcpy(&v, at, sizeof(v));
                snprintf(buf, size, "%zu", v);
                return 0;
        }
        case KEY_DOUBLE: {
                double v;
                memcpy(&v, at, sizeof(v));
                show_double(v, buf, size);
                return 0;
        }
        case KEY_BOOL: {
                bool v;
                memcpy(&v, at, sizeof(v));
                snprintf(buf, size, "%s", v ? "true" : "false");
                return 0;
        }
        case KEY_STRING:
                snprintf(buf, size, "%s", at);
                return 0;
        case KEY_CUSTOM:
                if (key->show)
                        key->show(config, buf, size);
                else if (key->size > 0)
                        snprintf(buf, size, "%s", at); /* a string field */
                return 0;
        }
        return TG_EINVAL;
}

/* The range a number must sit in, in the words of the load errors; "" for
 * keys that are not numbers. */
static void show_range(const struct key_def *key, char *buf, size_t size)
{
        switch (key->type) {
        case KEY_I64:
        case KEY_UINT:
        case KEY_SIZE:
                snprintf(buf, size, "an integer in [%lld, %lld]", (long long)key->lo,
                         (long long)key->hi);
                break;
        case KEY_DOUBLE:
                snprintf(buf, size, "a number in %c%g, %g]", key->dlo_open ? '(' : '[', key->dlo,
                         key->dhi);
                break;
        default:
                buf[0] = '\0';
                break;
        }
}

/* text as "# " comment lines of at most DOC_WIDTH columns, cut at spaces. */
static void put_comment(FILE *out, const char *text)
{
        const size_t width = DOC_WIDTH - 2;
        const char *p = text;

        while (*p) {
                size_t len = strlen(p);
                size_t cut = len;

                if (len > width) {
                        cut = width;
                        while (cut > 0 && p[cut] != ' ')
                                cut--;
                        if (cut == 0) /* one word longer than a line: keep it whole */
                                cut = strcspn(p, " ");
                }
                fprintf(out, "# %.*s\n", (int)cut, p);
                p += cut;
                while (*p == ' ')
                        p++;
        }
}

/* text in a Markdown table cell: a '|' would end the cell. */
static void put_cell(FILE *out, const char *text)
{
        for (const char *p = text; *p; p++) {
                if (*p == '|')
                        fputc('\\', out);
                fputc(*p, out);
        }
}

static void describe_ini(FILE *out, const struct key_def *key, const char *value, const char *range)
{
        char text[128];

        fputc('\n', out);
        put_comment(out, key->help);
        if (range[0]) {
                snprintf(text, sizeof(text), "Range: %s.", range);
                put_comment(out, text);
        }
        /* A key without a default stays commented out: an empty value would
         * not load (a secret file must name a file). */
        if (value[0])
                fprintf(out, "%s = %s\n", key->name, value);
        else
                fprintf(out, "# %s =\n", key->name);
}

/* text for scdoc: its inline markup (*bold*, _under_) and a leading
 * backslash would be read as markup; backticks become plain quotes. */
static void put_scdoc(FILE *out, const char *text)
{
        for (const char *p = text; *p; p++) {
                if (*p == '`')
                        continue;
                if (*p == '*' || *p == '_' || *p == '\\')
                        fputc('\\', out);
                fputc(*p, out);
        }
}

static const char scdoc_intro[] =
    "tollgate.ini(5)\n"
    "\n"
    "; Generated by `tollgate config defaults --format scdoc` from the key table in\n"
    "; src/daemon/config.c; do not edit by hand.\n"
    "\n"
    "# NAME\n"
    "\n"
    "tollgate.ini - the configuration file of tollgate(1)\n"
    "\n"
    "# DESCRIPTION\n"
    "\n"
    "*tollgate serve*, *dispatch* and *api*, and the operator commands, read one INI file\n"
    "given with *--config* FILE (the package installs /etc/tollgate/tollgate.ini). Every key\n"
    "has a default, so a file needs only the keys it changes; *tollgate config defaults*\n"
    "prints every key at its default, and *tollgate config check --config* FILE lists every\n"
    "problem of a file with its line (exit status 0 or 1).\n"
    "\n"
    "A line starting with # or ; is a comment; after a value, a space or a tab then # or ;\n"
    "starts one. Numbers are base 10 and must sit inside the key's range; booleans are\n"
    "true/false, yes/no, on/off or 1/0. An unknown section or key, a key set twice (except\n"
    "classify.rule) and a line longer than 198 bytes are errors.\n"
    "\n"
    "Relative paths are relative to the folder of the file. Secrets never need to be in the\n"
    "file: api.token_file, provider.webhook_secret_file and a mysql url's ?password\\_file=\n"
    "name files, and a secret file that group or others may read or write is refused.\n"
    "\n"
    "The daemon reads the file again on SIGHUP: log.level, api.token_file, the admission\n"
    "thresholds, provider.webhook_secret_file and the retention change live; any other\n"
    "changed key is refused with a log line naming it and keeps its running value.\n";

static const char scdoc_outro[] = "\n# SEE ALSO\n\ntollgate(1), tollgate-stub(1)\n";

static void describe_scdoc(FILE *out, const struct key_def *key, const char *value,
                           const char *range)
{
        fputs("\n*", out);
        put_scdoc(out, key->name);
        fputs("* = ", out);
        if (value[0])
                put_scdoc(out, value);
        else
                fputs("(none)", out);
        fputs("\n\t", out);
        put_scdoc(out, key->help);
        if (range[0]) {
                fputs(" Range: ", out);
                put_scdoc(out, range);
                fputc('.', out);
        }
        fputc('\n', out);
}

static void describe_markdown(FILE *out, const struct key_def *key, const char *value,
                              const char *range)
{
        fprintf(out, "| `%s` | ", key->name);
        if (value[0]) {
                fputc('`', out);
                put_cell(out, value);
                fputc('`', out);
        } else {
                fputs("(none)", out);
        }
        fputs(" | ", out);
        put_cell(out, key->help);
        if (range[0])
                fprintf(out, " Range: %s.", range);
        fputs(" |\n", out);
}

int config_describe(FILE *out, enum config_doc_format fmt)
{
        struct tg_config *defaults;
        const char *section = NULL;
        int r = 0;

        if (!out ||
            (fmt != CONFIG_DOC_INI && fmt != CONFIG_DOC_MARKDOWN && fmt != CONFIG_DOC_SCDOC))
                return TG_EINVAL;
        /* Heap, not stack: the struct carries 64 rules and several paths. */
        defaults = malloc(sizeof(*defaults));
        if (!defaults)
                return TG_ENOMEM;
        config_defaults(defaults);
        fputs(fmt == CONFIG_DOC_INI     ? ini_intro
              : fmt == CONFIG_DOC_SCDOC ? scdoc_intro
                                        : md_intro,
              out);
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                const struct key_def *key = &keys[i];
                char value[TG_PATH_MAX + 8], range[96];

                if (!key->help || !key->help[0]) {
                        r = TG_EINVAL; /* every key is documented */
                        goto out;
                }
                r = show_value(key, defaults, value, sizeof(value));
                if (r < 0)
                        goto out;
                show_range(key, range, sizeof(range));
                if (!section || strcmp(section, key->section) != 0) {
                        section = key->section;
                        if (fmt == CONFIG_DOC_INI)
                                fprintf(out, "\n[%s]\n", section);
                        else if (fmt == CONFIG_DOC_SCDOC)
                                fprintf(out, "\n# [%s]\n", section);
                        else
                                fprintf(out,
                                        "\n## `[%s]`\n\n| key | default | meaning |\n"
                                        "|---|---|---|\n",
                                        section);
                }
                if (fmt == CONFIG_DOC_INI)
                        describe_ini(out, key, value, range);
                else if (fmt == CONFIG_DOC_SCDOC)
                        describe_scdoc(out, key, value, range);
                else
                        describe_markdown(out, key, value, range);
        }
        if (fmt == CONFIG_DOC_SCDOC)
                fputs(scdoc_outro, out);
out:
        free(defaults);
        if (r == 0 && (fflush(out) != 0 || ferror(out)))
                r = TG_EIO;
        return r;
}

int config_key_at(size_t i, const char **ret_section, const char **ret_name, const char **ret_help)
{
        if (i >= sizeof(keys) / sizeof(keys[0]))
                return TG_ERANGE;
        *ret_section = keys[i].section;
        *ret_name = keys[i].name;
        *ret_help = keys[i].help;
        return 0;
}

/* ---- what changed between two configs (a reload) ------------------------------ */

unsigned config_diff(const struct tg_config *a, const struct tg_config *b, config_key_fn fn,
                     void *ctx)
{
        char va[TG_PATH_MAX + 8], vb[TG_PATH_MAX + 8];
        unsigned n = 0;

        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                const struct key_def *key = &keys[i];
                bool differ;

                if (key->custom == set_rule) {
                        differ = a->rule_count != b->rule_count ||
                                 memcmp(a->rules, b->rules, a->rule_count * sizeof(a->rules[0]));
                } else {
                        show_value(key, a, va, sizeof(va));
                        show_value(key, b, vb, sizeof(vb));
                        differ = strcmp(va, vb) != 0;
                }
                /* the same file name with other contents: a rotated secret */
                if (key->custom == set_token_file)
                        differ = differ || a->api_token_count != b->api_token_count ||
                                 memcmp(a->api_tokens, b->api_tokens, sizeof(a->api_tokens)) != 0;
                if (key->custom == set_webhook_file)
                        differ = differ || strcmp(a->provider_webhook_secret,
                                                  b->provider_webhook_secret) != 0;
                if (differ) {
                        n++;
                        if (fn)
                                fn(ctx, key->section, key->name);
                }
        }
        return n;
}
