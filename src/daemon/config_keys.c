/*
 * config_keys — the key table, tollgate's whole configuration schema, and
 * the defaults. Every section.key is one row of `config_keys` below: its
 * section and name, its type, its range and its help text; the loader
 * (config_load.c), the doc generator (config_doc.c) and the reload diff
 * (config_diff.c) iterate these rows and find a key by (section, name),
 * so a key is added here and nowhere else (besides its member in struct
 * tg_config and its default).
 *
 * Invariants:
 *   - a default is never written in the table: config_defaults() is the
 *     one place, and config_describe() reads it from there;
 *   - the rows of one section are contiguous, in the order the docs print
 *     them (config_describe() starts a section where the name changes);
 *   - every row has help text (config_describe() refuses otherwise).
 */
#include "daemon/config_int.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/provider_map.h"
#include "core/tg_error.h"
#include "store/store.h" /* STORE_SHARES_MAX */

#define OFF(member)    offsetof(struct tg_config, member)
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
/* A string naming a secret file: the file's contents differ too. */
#define SECRET_KEY(sec, key, member, fn, diff, text)                                               \
        {                                                                                          \
                .section = sec, .name = key, .type = KEY_CUSTOM, .offset = OFF(member),            \
                .size = SIZEOF(member), .custom = fn, .differ = diff, .help = text                 \
        }
/* A provider path template; kind is its enum map_path. */
#define PATH_KEY(sec, key, member, kind, text)                                                     \
        {                                                                                          \
                .section = sec, .name = key, .type = KEY_CUSTOM, .offset = OFF(member),            \
                .size = SIZEOF(member), .custom = config_set_path, .arg = kind, .help = text       \
        }
/* One of a few words, written " w1 w2 ... ". */
#define CHOICE_KEY(sec, key, member, w, text)                                                      \
        {                                                                                          \
                .section = sec, .name = key, .type = KEY_CUSTOM, .offset = OFF(member),            \
                .size = SIZEOF(member), .custom = config_set_choice, .words = w, .help = text      \
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
/* A key set once per value it adds (a list of its own in the config). */
#define REPEAT_KEY(sec, key, fn, empty, diff, text)                                                \
        {                                                                                          \
                .section = sec, .name = key, .type = KEY_CUSTOM, .custom = fn, .repeatable = true, \
                .clear = empty, .differ = diff, .help = text                                       \
        }

/* A row of a section an [account.NAME] section may set as section.name
 * (every key of [provider], [exit], [retry] and [classify]): written
 * where the row's section is, it marks the row. */
#define PER_ACCOUNT(sec) sec, .per_account = true

/* The whole schema, in the order config_describe() prints it. A default is
 * never written here: config_describe() reads it from config_defaults(). */
const struct key_def config_keys[] = {
    STRING_KEY(
        "store", "url", store_url, config_set_store_url,
        "Where the backlog lives: `sqlite://PATH` (embedded, WAL), "
        "`mysql://user@host:port/db?password_file=PATH` (MariaDB only, 10.11 tested; see "
        "docs/outbox.md) or `postgresql://user@host:port/db?password_file=PATH&sslmode=MODE` "
        "(PostgreSQL 15 tested; without a password, libpq's PGPASSFILE or ~/.pgpass). "
        "A relative path is relative to this file's folder. Never quoted in a message: "
        "it may carry a password."),
    BOOL_KEY("store", "check_on_start", store_check_on_start,
             "`serve`, `dispatch` and `api` verify a SQLite store before they use it "
             "(`PRAGMA quick_check`): a corrupted file refuses to start with a message instead "
             "of failing on the rows it damaged. It reads the whole file: about 3.5 s for "
             "1,000,000 operations with their calls (docs/reliability.md); false skips it. "
             "MariaDB checks its own pages."),
    BOOL_KEY("store", "allow_missing_triggers", store_allow_missing_triggers,
             "A MariaDB store whose no-delete triggers cannot be created (a server that "
             "writes a binary log and a user without SUPER: a common managed database) "
             "refuses to start with a message naming the fix (`SET GLOBAL "
             "log_bin_trust_function_creators = 1`, or the privilege). True accepts "
             "running without them: operations, calls and audit rows are then guarded by "
             "the grants only, and every start logs `store_triggers_missing` and `/readyz` "
             "says so in its `warnings`."),

    CUSTOM_KEY("api", "listen", config_set_listen, config_show_listen,
               "Where the intake/admin API listens: `host:port` or `[ipv6]:port` (port 0: any "
               "free port). An address that is not loopback requires `api.token_file`."),
    SECRET_KEY("api", "token_file", api_token_file, config_set_token_file, config_differ_tokens,
               "A file holding the bearer token: every `/v1` route then needs `Authorization: "
               "Bearer <contents>`, and the CLI sends it. Trailing newlines and spaces are "
               "trimmed; the rest must be printable ASCII without spaces. Up to 4 tokens, one a "
               "line, are all accepted (rotation; the CLI sends the first). Unset: no token."),
    INT_KEY("api", "max_body_bytes", KEY_SIZE, api_max_body_bytes, 64, 16 * 1024 * 1024, 1,
            "Largest request body the API reads; a larger one is refused with 413."),
    INT_KEY("api", "max_batch_bytes", KEY_SIZE, api_max_batch_bytes, 64, 64 * 1024 * 1024, 1,
            "Largest body of `POST /v1/refunds:batch` (up to 500 refunds), the one route "
            "with its own bound; a larger one is refused with 413 before it is read."),
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
    SECRET_KEY("api", "credentials_file", api_credentials_file, config_set_credentials_file,
               config_differ_credentials,
               "A file of named API credentials, one a line: `NAME SCOPES "
               "hmac-sha256:SALT:DIGEST [revoked]`, written by `tollgate token add|revoke`. "
               "SCOPES is a comma-separated set of `intake` (submit, cancel, read a refund), "
               "`read` (status, calls, stats, the manual queue), `operator` (manual re-send, "
               "resolve, assign, approve) and `admin`, or `all`. Every `/v1` route then needs a "
               "credential with its scope (403 `missing_scope` otherwise), and the audit names "
               "the credential, never a name from the body. Only salted hashes are stored; the "
               "file must be its owner's alone. Read again on SIGHUP. Unset: `api.token_file` "
               "alone, as before."),

    STRING_KEY(PER_ACCOUNT("provider"), "base_url", provider_base_url, config_set_base_url,
               "The provider, `http://` or `https://`; the paths below are appended to it. An "
               "`https://` provider's certificate and host name are always verified "
               "(`provider.ca_file`); there is no switch that turns this off."),
    PATH_KEY(PER_ACCOUNT("provider"), "refunds_path", provider_refunds_path, MAP_PATH_REFUNDS,
             "Path of the POST that asks for a refund (PROVIDER.md's by default: a real "
             "provider's contract may differ). A template: `{operation_id}`, `{payment_id}`, "
             "`{amount}`, `{currency}`, `{reason}` and `{metadata.KEY}` are replaced by the "
             "refund's values, percent-encoded (docs/providers/)."),
    PATH_KEY(PER_ACCOUNT("provider"), "query_path", provider_query_path, MAP_PATH_QUERY,
             "Path of the GET that asks what became of a refund, a template like "
             "`provider.refunds_path` that must use `{operation_id}` (the idempotency key) or "
             "`{refund_id}` (the provider's id, stored when a POST answers; then "
             "`provider.query_fallback_path` is needed for operations without one)."),
    STRING_KEY(PER_ACCOUNT("provider"), "key_header", provider_key_header, config_set_header_name,
               "Header carrying the idempotency key, which is the `operation_id`: one key per "
               "operation, forever."),
    STRING_KEY(PER_ACCOUNT("provider"), "request_id_header", provider_request_id_header,
               config_set_header_name,
               "Header carrying the call's request id, unique per call (`tollgate verify` "
               "matches the provider's arrivals by it)."),
    STRING_KEY(PER_ACCOUNT("provider"), "attempt_header", provider_attempt_header,
               config_set_header_name,
               "Header carrying the operation's attempt number (informational)."),
    INT_KEY(PER_ACCOUNT("provider"), "connect_timeout_ms", KEY_I64, provider_connect_timeout_ms, 1,
            600000, 1,
            "Connect timeout; must be <= `provider.timeout_ms`. A call that never connected "
            "sent nothing (`not_sent`)."),
    INT_KEY(PER_ACCOUNT("provider"), "timeout_ms", KEY_I64, provider_timeout_ms, 1, 3600000, 1,
            "The whole call: DNS, connect, send, wait, read (cut to what is left of the "
            "operation's deadline). A call that times out after sending is `unknown` and is "
            "reconciled by a query with the same key. A new owner of the exit waits this long "
            "before it sends."),
    INT_KEY(PER_ACCOUNT("provider"), "max_response_bytes", KEY_SIZE, provider_max_response_bytes,
            1024, 64 * 1024 * 1024, 1,
            "Largest response body read; past it the body is dropped and the call is "
            "classified by its status alone."),
    SECRET_KEY(PER_ACCOUNT("provider"), "webhook_secret_file", provider_webhook_secret_file,
               config_set_webhook_file, config_differ_webhook_secret,
               "A file holding the HMAC-SHA256 secret of the provider's webhook, `POST "
               "/v1/provider-events` (signed as `provider.webhook_signature` says); an "
               "account's own, `POST /v1/provider-events/NAME`, which settles only that "
               "account's refunds (the top-level route settles the accounts that take their "
               "webhook from the top level). Unset: the route does not exist. An account's is "
               "read at start."),
    CHOICE_KEY(PER_ACCOUNT("provider"), "webhook_signature", provider_webhook_signature,
               " tollgate stripe checkout adyen ",
               "How the provider signs a webhook delivery. `tollgate`: shared/PROVIDER.md's "
               "`X-Signature: sha256=<hex HMAC-SHA256 of the body>` and its event "
               "`{\"operation_id\",\"status\",\"refund_id\"}`. `stripe`: Stripe's "
               "`Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of \"t.body\">` (any "
               "`v1` may match: a secret being rolled), refused when `t` is further than "
               "`provider.webhook_tolerance_s` from now; the event's refund is read at "
               "`provider.webhook_object_field` with the reply mapping (`status_field`, the "
               "status words, `refund_id_field`) and matched by "
               "`provider.webhook_match_field`. `checkout`: Checkout.com's `Cko-Signature: "
               "<hex HMAC-SHA256 of the body>` (no timestamp: a replayed delivery can only "
               "repeat an outcome already recorded); the event is read as for `stripe`, its "
               "outcome at `provider.webhook_status_field` (the event's `type`). `adyen`: Adyen's "
               "standard notification, a batch whose items each carry "
               "`additionalData.hmacSignature`: the base64 HMAC-SHA256, under the hex key of "
               "`provider.webhook_secret_file`, of the item's pspReference, originalReference, "
               "merchantAccountCode, merchantReference, amount.value, amount.currency, "
               "eventCode and success joined by colons; one bad item refuses the delivery "
               "(401); ours by `merchantReference`; `REFUND` with `success` true/false, or "
               "`REFUND_FAILED`; answered `[accepted]`."),
    INT_KEY(PER_ACCOUNT("provider"), "webhook_tolerance_s", KEY_I64, provider_webhook_tolerance_ms,
            1, 86400, 1000,
            "`webhook_signature = stripe`: how far a delivery's signed timestamp may be from "
            "now, in seconds (Stripe's libraries default to 300). An older one is refused "
            "(401 `bad_signature`): a delivery captured and replayed later is not taken."),
    STRING_KEY(PER_ACCOUNT("provider"), "webhook_object_field", provider_webhook_object_field,
               config_set_field_source,
               "`webhook_signature = stripe`: the JSON path of the refund object inside an "
               "event (`data.object`); empty: the event itself."),
    STRING_KEY(PER_ACCOUNT("provider"), "webhook_match_field", provider_webhook_match_field,
               config_set_field_source,
               "`webhook_signature = stripe`: where the refund object carries the operation id "
               "we sent (`metadata.operation_id`). An event without it is not ours (a refund "
               "made elsewhere): answered 200 and ignored."),
    STRING_KEY(PER_ACCOUNT("provider"), "webhook_status_field", provider_webhook_status_field,
               config_set_field_source,
               "`webhook_signature = stripe|checkout`: where an event says the refund's outcome, "
               "a path from the event's root (Checkout.com's `type`: `payment_refunded`, "
               "`payment_refund_declined`, listed in `provider.status_succeeded` and "
               "`provider.status_failed`); empty: the refund object's `provider.status_field`."),
    BOOL_KEY(PER_ACCOUNT("provider"), "reuse_connections", provider_reuse_connections,
             "Keep-alive connections to the provider (false: a fresh connection per call, "
             "closed after it). The guard against a second send of one call holds either way."),
    INT_KEY(PER_ACCOUNT("provider"), "keepalive_idle_ms", KEY_I64, provider_keepalive_idle_ms, 0,
            3600000, 1,
            "With `reuse_connections`: how long the provider keeps an idle connection open "
            "(its keep-alive timeout). A connection idle for longer than this less a quarter "
            "(at least 50 ms) is closed before the next call instead of reused, so that no "
            "request races the provider's close (it would end `unknown` with nothing "
            "executed). 0: learned from the provider's `Keep-Alive: timeout=N` header; "
            "without one, libcurl's 118 s."),
    STRING_KEY(PER_ACCOUNT("provider"), "ca_file", provider_ca_file, config_set_readable_file,
               "PEM file of the CA certificates that an `https://` provider's certificate must "
               "chain to. Unset: the system's store. A provider whose certificate does not "
               "verify (unknown CA, expired, another host name) is never sent anything: the "
               "call is `not_sent` and logged with its cause."),
    STRING_KEY(PER_ACCOUNT("provider"), "client_cert", provider_client_cert,
               config_set_readable_file,
               "PEM file of the client certificate presented to an `https://` provider that "
               "asks for one (mutual TLS); needs `provider.client_key`. Re-read with the other "
               "credentials (docs/providers/)."),
    STRING_KEY(PER_ACCOUNT("provider"), "client_key", provider_client_key, config_set_client_key,
               "PEM file of the client certificate's private key (not encrypted). Refused when "
               "the file is open to group or others: `chmod 600` it."),
    INT_KEY(PER_ACCOUNT("provider"), "unreachable_run_hold", KEY_UINT,
            provider_unreachable_run_hold, 0, 100000, 1,
            "This many calls in a row that reached nothing (connection refused, DNS, connect "
            "or TLS failure: `not_sent`) hold every start for `provider.unreachable_hold_ms`; "
            "each probe after it that reaches nothing either holds again for twice as long, "
            "up to `provider.unreachable_hold_max_ms`. 0: never. See docs/providers/ for what "
            "a TLS misconfiguration costs."),
    INT_KEY(PER_ACCOUNT("provider"), "unreachable_hold_ms", KEY_I64, provider_unreachable_hold_ms,
            1, MAX_DURATION_MS, 1, "The first hold of a run of calls that reached nothing."),
    INT_KEY(PER_ACCOUNT("provider"), "unreachable_hold_max_ms", KEY_I64,
            provider_unreachable_hold_max_ms, 1, MAX_DURATION_MS, 1,
            "The longest such hold (must be >= `provider.unreachable_hold_ms`)."),
    CHOICE_KEY(PER_ACCOUNT("provider"), "auth", provider_auth, " none bearer header oauth2 ",
               "How calls authenticate: `none`, `bearer` (`Authorization: Bearer <secret>`), "
               "`header` (`<provider.auth_header>: <secret>`), the secret read from "
               "`provider.auth_secret_file`; or `oauth2`: OAuth 2.0 client credentials, an "
               "access token fetched from `provider.token_path` with the client id "
               "(`provider.client_id_file`) and secret (`provider.auth_secret_file`) and sent "
               "as `Authorization: Bearer <token>`, refreshed before it lapses "
               "(`provider.token_refresh_margin_s`) and after a `401`; every token call passes "
               "the exit like the refunds' calls."),
    STRING_KEY(PER_ACCOUNT("provider"), "client_id_file", provider_client_id_file,
               config_set_secret_path,
               "With `provider.auth = oauth2`: a file holding the OAuth 2.0 client id (read "
               "like the other secrets, never logged); required then, refused otherwise."),
    STRING_KEY(PER_ACCOUNT("provider"), "token_path", provider_token_path, config_set_token_path,
               "With `provider.auth = oauth2`: the token endpoint, a path on "
               "`provider.base_url` (so that its calls reach the provider's host through the "
               "same exit), POSTed `grant_type=client_credentials`."),
    INT_KEY(PER_ACCOUNT("provider"), "token_refresh_margin_s", KEY_I64,
            provider_token_refresh_margin_ms, 1, MAX_DURATION_S, 1000,
            "With `provider.auth = oauth2`: a token is fetched anew this long before it lapses "
            "(at most half its life before), while calls go on with the one in hand."),
    STRING_KEY(PER_ACCOUNT("provider"), "auth_header", provider_auth_header, config_set_header_name,
               "The header carrying the API key when `provider.auth` is `header`."),
    STRING_KEY(PER_ACCOUNT("provider"), "auth_secret_file", provider_auth_secret_file,
               config_set_secret_path,
               "A file holding the provider's API key (trailing newlines trimmed, the rest "
               "printable ASCII without spaces); required unless `provider.auth` is `none`. "
               "Never logged."),
    STRING_KEY(PER_ACCOUNT("provider"), "signing_key_file", provider_signing_key_file,
               config_set_secret_path,
               "A file holding the HMAC-SHA256 key of signed requests (its text is the key). "
               "Set: every call carries `provider.timestamp_header` and "
               "`provider.signature_header`. Unset: requests are not signed."),
    STRING_KEY(PER_ACCOUNT("provider"), "signature_header", provider_signature_header,
               config_set_header_name,
               "The header carrying a signed request's signature: `provider.signature_prefix` "
               "then the HMAC in `provider.signature_encoding`."),
    STRING_KEY(PER_ACCOUNT("provider"), "timestamp_header", provider_timestamp_header,
               config_set_header_name,
               "The header carrying a signed request's timestamp, in Unix seconds."),
    STRING_KEY(PER_ACCOUNT("provider"), "signing_string", provider_signing_string,
               config_set_signing_string,
               "The canonical string a signature is made over, a template of `{method}`, "
               "`{path}` (as sent, with its query), `{timestamp}`, `{idempotency_key}`, "
               "`{body_sha256}` (hex; of the empty body for a GET) and `{request_id}`; `\\n` is "
               "a new line."),
    CHOICE_KEY(PER_ACCOUNT("provider"), "signature_encoding", provider_signature_encoding,
               " hex base64 ", "`hex` (lower case) or `base64`."),
    STRING_KEY(PER_ACCOUNT("provider"), "signature_prefix", provider_signature_prefix,
               config_set_prefix,
               "Text before the signature in its header, e.g. `sha256=` or `v1=`."),
    CHOICE_KEY(PER_ACCOUNT("provider"), "body_format", provider_body_format, " json form ",
               "The refund POST's body: `json` or `form` "
               "(`application/x-www-form-urlencoded`)."),
    REPEAT_KEY(PER_ACCOUNT("provider"), "body_field", config_set_body_field,
               config_clear_body_fields, config_differ_body_fields,
               "One field of the refund POST's body, `NAME TEMPLATE`, repeatable (at most 16, "
               "in order); none: PROVIDER.md's `operation_id payment_id amount currency`. The "
               "template uses `{operation_id}`, `{payment_id}`, `{amount}`, `{currency}`, "
               "`{reason}`, `{metadata.KEY}`, `{metadata}`. `{amount}` alone is a JSON number, "
               "`{metadata}` alone an object (in a form, one `NAME[KEY]=VALUE` per pair); a "
               "field that is only an optional value the refund lacks is left out. In JSON a "
               "dot in NAME nests. E.g. `amount {amount}`, `metadata[op] {operation_id}`."),
    PATH_KEY(PER_ACCOUNT("provider"), "query_fallback_path", provider_query_fallback_path,
             MAP_PATH_QUERY_FALLBACK,
             "The query path used while the provider's refund id is unknown (a POST that "
             "timed out), when `provider.query_path` uses `{refund_id}`; must use "
             "`{operation_id}`. Required then, refused otherwise."),
    PATH_KEY(PER_ACCOUNT("provider"), "list_path", provider_list_path, MAP_PATH_LIST,
             "A GET that lists the refunds of the operation's payment (e.g. "
             "`/v1/refunds?payment_intent={payment_id}&limit=50`), for the `list` strategy of "
             "`provider.reconcile`: ours is the item whose `provider.list_match_field` is our "
             "operation id. Not in a complete list: nothing was executed; not in a page with "
             "more to follow: no answer. Empty: no list."),
    REPEAT_KEY(PER_ACCOUNT("provider"), "header", config_set_fixed_header,
               config_clear_fixed_headers, config_differ_fixed_headers,
               "A header sent on every call, `Name: value`, repeatable (at most 8): an API "
               "version pin (`Stripe-Version: 2024-06-20`; without one the answer's shape "
               "follows the account's default that day), an account or merchant header. Not "
               "a header tollgate sets itself (the key, request id, attempt, credentials, "
               "signature, Content-Type)."),
    STRING_KEY(PER_ACCOUNT("provider"), "reconcile", provider_reconcile, config_set_reconcile,
               "How a query learns what became of a refund, in order (the first that applies "
               "makes the call): `refund_id` (`provider.query_path` by the provider's id, once "
               "an answer told it), `key` (by our key: `provider.query_path`, or "
               "`provider.query_fallback_path`), `list` (`provider.list_path`). Empty: that "
               "order, over the paths that are set. `replay` too: once `retry.max_queries` "
               "are spent without an answer, the same POST goes again with its key (where "
               "the provider's replay returns the stored result), while the key is younger "
               "than `retry.key_retention_s`; past it, manual review (`key_expired`). "
               "`notification` (alone, or with `replay`): the provider has no query (Adyen); "
               "an acknowledged refund waits for the provider's notification "
               "(`provider.webhook_secret_file`) up to `provider.notification_deadline_s`, "
               "then manual review (`notification_deadline`); no query is made, none of "
               "`retry.max_queries` is spent; an answer lost past the timeout is replayed "
               "with `replay`, else awaited as well."),
    INT_KEY(PER_ACCOUNT("provider"), "key_lifetime_s", KEY_I64, provider_key_lifetime_ms, 1,
            MAX_DURATION_S, 1000,
            "How long the provider keeps an idempotency key, as its reference documents it "
            "(our stub: 24 h; Stripe 24 h; Checkout.com 24 h; Adyen at least 31 days; PayPal "
            "45 days). `retry.key_retention_s`, the age past which tollgate never sends the "
            "key again (no retry, no replay, no operator re-send), must be shorter: a key sent "
            "after the provider forgot it is a new refund."),
    STRING_KEY(PER_ACCOUNT("provider"), "settlement_dir", provider_settlement_dir,
               config_set_directory,
               "A directory where the provider's settlement files for this account are put "
               "(CSV, the format of `tollgate reconcile`, named `*.csv`): the daemon applies "
               "each new file by itself, as the last automatic source of outcomes, settling "
               "only this account's refunds (`other_account` for another's), and moves it to "
               "`done/` with its report beside it (`NAME.csv.report.jsonl`), or to `failed/` "
               "when it is no settlement file. Write a file under another name and rename it "
               "to `*.csv` when complete. Empty: none."),
    INT_KEY(PER_ACCOUNT("provider"), "settlement_scan_s", KEY_I64, provider_settlement_scan_ms, 1,
            86400, 1000, "How often `provider.settlement_dir` is looked at for new files."),
    INT_KEY(PER_ACCOUNT("provider"), "notification_deadline_s", KEY_I64,
            policy.notification_deadline_ms, 1, MAX_DURATION_S, 1000,
            "`reconcile = notification`: how long a refund the provider acknowledged waits "
            "for its notification, from that acknowledgement; then manual review "
            "(`notification_deadline`), never a guess. Default a day: Adyen retries a "
            "notification its endpoint did not accept for about 8 h (2 min to 4 h apart), "
            "so a day covers an outage of the endpoint and that schedule."),
    STRING_KEY(PER_ACCOUNT("provider"), "status_field", provider_status_field,
               config_set_field_source,
               "Where a response says the refund's status: a JSON path (`status`, "
               "`data.0.status`; a number is an array index) or `header:NAME`; up to three, "
               "space-separated, the first present wins. A JSON boolean reads as the word "
               "`true` or `false` (Checkout.com's `approved`: list them in "
               "`provider.status_succeeded` and `provider.status_failed`). Empty: not read."),
    STRING_KEY(PER_ACCOUNT("provider"), "status_succeeded", provider_status_succeeded,
               config_set_status_list,
               "The provider's status words meaning succeeded, comma-separated; the "
               "classification table (`classify.rule`) sees them as `succeeded`."),
    STRING_KEY(PER_ACCOUNT("provider"), "status_failed", provider_status_failed,
               config_set_status_list, "The words meaning failed for good (seen as `failed`)."),
    STRING_KEY(PER_ACCOUNT("provider"), "status_processing", provider_status_processing,
               config_set_status_list,
               "The words meaning still running (seen as `processing`). A word in no list "
               "reaches the classification table as it is."),
    STRING_KEY(PER_ACCOUNT("provider"), "refund_id_field", provider_refund_id_field,
               config_set_field_source,
               "Where a response carries the provider's refund id (stored, shown, and usable "
               "as `{refund_id}` in `provider.query_path`)."),
    STRING_KEY(PER_ACCOUNT("provider"), "error_code_field", provider_error_code_field,
               config_set_field_source,
               "Where an error response carries its code (`code=` in `classify.rule`)."),
    STRING_KEY(PER_ACCOUNT("provider"), "failure_code_field", provider_failure_code_field,
               config_set_field_source,
               "Where a failed refund carries the reason it failed (shown to the operator)."),
    STRING_KEY(PER_ACCOUNT("provider"), "retryable_field", provider_retryable_field,
               config_set_field_source,
               "Where the provider marks an error retryable: a JSON boolean, or a header or "
               "string `true`/`false` (`retryable=` in `classify.rule`)."),
    STRING_KEY(PER_ACCOUNT("provider"), "list_items_field", provider_list_items_field,
               config_set_field_source,
               "Where a list answer (`provider.list_path`) holds its refunds: the JSON path of "
               "an array (`data`), or `.` when the answer itself is the array (Checkout.com's "
               "`GET /payments/{id}/actions`). Its items are read like a refund answer."),
    STRING_KEY(PER_ACCOUNT("provider"), "list_match_field", provider_list_match_field,
               config_set_field_source,
               "Where an item of a list carries the operation id we sent (`metadata.operation_id`"
               ": put it there with a `provider.body_field`). Once an answer told the refund's "
               "id (`provider.refund_id_field`), an item with that id is ours too, and a "
               "complete list without ours is `processing` (the provider took it, it is not "
               "listed yet), never `not_found`."),
    STRING_KEY(PER_ACCOUNT("provider"), "list_more_field", provider_list_more_field,
               config_set_field_source,
               "Where a list answer says more pages follow (a JSON boolean, `has_more`). Absent "
               "or false: the list is complete."),
    STRING_KEY(PER_ACCOUNT("provider"), "list_cursor_param", provider_list_cursor_param,
               config_set_list_cursor_param,
               "The query parameter that asks a list for the page after an item (Stripe's "
               "`starting_after`), letters, digits and `-._~`; needs `provider.list_path` and "
               "`provider.list_more_field`. A page without ours that says more follow makes the "
               "operation's next query the next page, at once (the pacer and the query "
               "sub-quota still space it; each page is one query of `retry.max_queries`): "
               "`list_path` with `&PARAM=ID` (`?` when it has no query), ID the page's last "
               "item's refund id (`provider.refund_id_field`), percent-encoded. \"Not in the "
               "list\" is `not_found` only at a page that says it is complete, reached from the "
               "first page within one walk. Empty: the first page only (a page with more to "
               "follow is `no_answer`)."),
    INT_KEY(PER_ACCOUNT("provider"), "list_max_pages", KEY_UINT, provider_list_max_pages, 1, 1000,
            1,
            "With `provider.list_cursor_param`: the pages one walk of a list reads at most. "
            "Past them, without ours, the list is not known complete: `no_answer` (the next "
            "query, after `retry.query_interval_ms`, walks again from the first page), never "
            "`not_found`."),
    STRING_KEY(PER_ACCOUNT("provider"), "in_progress_codes", provider_in_progress_codes,
               config_set_status_list,
               "Error codes (`provider.error_code_field`) meaning \"a request with this key is "
               "still being processed\", comma-separated; empty: none. Such an answer, whatever "
               "its status (Checkout.com documents a `429` of this kind), is not a rate limit: "
               "no hold of the exit, nothing given back; the call is `unknown` (a query's: "
               "`no_answer`) and reconciled with the same key."),

    DOUBLE_KEY(PER_ACCOUNT("exit"), "starts_per_second", exit.starts_per_second, 0, 1e9, true,
               "The account's start rate, every kind of call included: two starts are never "
               "closer than 1/rate, counted from each actual start, and idle time earns no "
               "credit. With `exit.shares`, each dispatcher starts at this rate inside its "
               "own windows of one grid and so, over time, at rate / shares."),
    INT_KEY(PER_ACCOUNT("exit"), "max_in_flight", KEY_UINT, exit.max_in_flight, 1, 10000, 1,
            "Calls open at the provider at most (the account's; each share gets "
            "max_in_flight / shares)."),
    INT_KEY(PER_ACCOUNT("exit"), "spacing_margin_us", KEY_I64, exit.spacing_margin_ns, 0, 1000000,
            1000,
            "Added to every spacing between starts, in microseconds, for what the path to the "
            "provider may take off a gap (network and scheduling at both ends vary from request "
            "to request), so that a provider measuring arrivals in whole milliseconds still sees "
            "at least 1/rate. It costs rate: the exit starts at most 1 / (1/rate + margin) a "
            "second (the default: 0.5 % at 5/s, 4.8 % at 50/s). `tollgate verify` reports your "
            "path's variation (`receive_spacing`); docs/bench.md has how the default was "
            "measured."),
    DOUBLE_KEY(PER_ACCOUNT("exit"), "refund_starts_per_second", exit_refund_starts_per_second, 0,
               1e9, false,
               "A sub-quota for refund POSTs (first attempts, retries, operators' re-sends) "
               "inside the account's: two POSTs never start closer than 1/rate, counted from "
               "each actual start, while every call still passes `exit.starts_per_second`. Must "
               "be <= it; the sub-quotas may add up to more than the account (they nest, they "
               "do not partition it), and a slot one kind cannot use goes to another kind's "
               "work. With `exit.shares`, split like the account's. 0: off. See docs/design.md, "
               "\"Sub-quotas\"."),
    INT_KEY(PER_ACCOUNT("exit"), "refund_max_in_flight", KEY_UINT, exit_refund_max_in_flight, 0,
            10000, 1,
            "Refund POSTs open at the provider at most (must be <= `exit.max_in_flight`; with "
            "`exit.shares`, split like it). 0: only the account's cap."),
    DOUBLE_KEY(PER_ACCOUNT("exit"), "query_starts_per_second", exit_query_starts_per_second, 0, 1e9,
               false,
               "A sub-quota for reconciliation queries (lookups and list pages alike, and "
               "pending polls) inside `exit.starts_per_second`, as "
               "`exit.refund_starts_per_second` is for POSTs (must be <= it: it never adds to "
               "it). 0: off."),
    INT_KEY(PER_ACCOUNT("exit"), "query_max_in_flight", KEY_UINT, exit_query_max_in_flight, 0,
            10000, 1,
            "Queries open at the provider at most (must be <= `exit.max_in_flight`; with "
            "`exit.shares`, split like it). 0: only the account's cap."),
    INT_KEY(PER_ACCOUNT("exit"), "shares", KEY_UINT, exit_shares, 1, STORE_SHARES_MAX, 1,
            "The account's quota split into this many equal shares, one per running "
            "dispatcher (must be <= `exit.max_in_flight`). A share whose dispatcher is gone is "
            "taken over by a live one that owns a share of the account, and handed back when "
            "a new dispatcher waits for one. Give every dispatcher of one account the same "
            "`[exit]`; see docs/operating.md."),
    BOOL_KEY(PER_ACCOUNT("exit"), "adaptive", exit_adaptive,
             "The start rate follows the provider's pushback under `exit.starts_per_second`, "
             "which stays the ceiling: a 429 or 503 (or a run of timeouts) from a call sent at "
             "the present rate cuts it to 0.7 times, and it climbs back along CUBIC's curve "
             "(to the refused rate in 6.7 s, then faster, probing for capacity that came back); "
             "never under a twentieth of the ceiling. A 429/503 without Retry-After then holds "
             "nothing (the cut is the answer); a Retry-After is still obeyed. Not with "
             "`exit.shares` > 1. The rate in force is `tollgate_exit_rate` in /metrics. See "
             "docs/design.md, \"Adaptive throttling\"."),
    INT_KEY(PER_ACCOUNT("exit"), "clock_skew_ms", KEY_I64, exit_clock_skew_ms, 0, 1000, 1,
            "With `exit.shares` > 1: a bound on how far apart the clocks of the dispatchers' "
            "machines may be. The shares start only inside their own windows of one grid on "
            "the wall clock (a run of points at the account's spacing each), the next "
            "share's window this much and a late budget (a tenth of the spacing, at most 2 "
            "ms) after the last point, so that together they never start two calls closer "
            "than the account's spacing. It costs rate once a window, not once a start: a "
            "window holds enough points to keep that gap under 1 % of it, up to a share's "
            "in-flight cap (the exit_open log line says how many). Keep the machines' "
            "clocks synchronised (NTP) within it."),
    INT_KEY(PER_ACCOUNT("exit"), "timeout_run_hold", KEY_UINT, exit_timeout_run_hold, 0, 100000, 1,
            "This many timeouts in a row hold every start for `exit.timeout_hold_ms`; 0: "
            "never."),
    INT_KEY(PER_ACCOUNT("exit"), "timeout_hold_ms", KEY_I64, exit_timeout_hold_ms, 0,
            MAX_DURATION_MS, 1,
            "How long a run of timeouts holds the exit. After any hold exactly one probe goes "
            "first."),
    INT_KEY(PER_ACCOUNT("exit"), "default_hold_ms", KEY_I64, exit_default_hold_ms, 0,
            MAX_DURATION_MS, 1, "How long a 429 or 503 without Retry-After holds every start."),
    INT_KEY(PER_ACCOUNT("exit"), "default_hold_max_ms", KEY_I64, exit_default_hold_max_ms, 0,
            MAX_DURATION_MS, 1,
            "A probe refused again with 429/503 and no Retry-After holds twice as long as the "
            "last such hold, from `exit.default_hold_ms` up to this (and never past the "
            "Retry-After cap, `retry.retry_after_cap_s`): a provider that keeps refusing "
            "without saying how long costs one probe per doubling hold, not one per "
            "`exit.default_hold_ms`. At or below `exit.default_hold_ms`: no doubling."),
    INT_KEY(PER_ACCOUNT("exit"), "idle_poll_max_ms", KEY_I64, exit_idle_poll_max_ms, 50, 60000, 1,
            "An idle exit looks for new work at least this often (and at its housekeeping "
            "second anyway). In `tollgate serve` the API wakes the exit for every new refund "
            "and a due retry wakes it on time, so this only bounds how late an outbox row is "
            "seen; on PostgreSQL every `tollgate api` sharing the store wakes every dispatcher "
            "the same way (LISTEN/NOTIFY); a `tollgate dispatch` on SQLite or MariaDB, which no "
            "API can wake, backs off from 50 ms to this while it finds nothing."),

    INT_KEY(PER_ACCOUNT("retry"), "max_attempts", KEY_UINT, policy.max_attempts, 1, 1000, 1,
            "POSTs per operation, the first included; then manual review "
            "(`attempts_exhausted`)."),
    BOOL_KEY(PER_ACCOUNT("retry"), "count_limited", policy.count_limited,
             "A POST (or query) the provider refused with 429/503 for the whole account "
             "(nothing executed) counts against `retry.max_attempts` (`retry.max_queries`) like "
             "any other. false (default): it is given back, so a rate-limit episode sends no "
             "refund to manual for its budget (the deadline still bounds it, and the exit holds "
             "and probes meanwhile); true: every POST sent counts, a strict bound on the POSTs "
             "one key may make."),
    INT_KEY(PER_ACCOUNT("retry"), "deadline_s", KEY_I64, policy.deadline_ms, 1, MAX_DURATION_S,
            1000,
            "From acceptance to a final answer; no automatic call after it, the operation goes "
            "to manual review (`deadline`)."),
    INT_KEY(PER_ACCOUNT("retry"), "max_queries", KEY_UINT, policy.max_queries, 0, 100000, 1,
            "Reconciliation queries per operation; then manual review (`query_budget`). 0: an "
            "unknown goes straight to manual review."),
    INT_KEY(PER_ACCOUNT("retry"), "query_interval_ms", KEY_I64, policy.query_interval_ms, 1,
            MAX_DURATION_MS, 1, "Spacing of one operation's queries."),
    INT_KEY(PER_ACCOUNT("retry"), "pending_poll_interval_ms", KEY_I64,
            policy.pending_poll_interval_ms, 1, MAX_DURATION_MS, 1,
            "A refund the provider reports as accepted but not final (`processing`: Stripe's "
            "`pending`, PayPal's `PENDING`; not with `provider.reconcile = notification`, "
            "which awaits the notification) is polled on a slow schedule of its own: the "
            "first poll this long after that answer, each next one twice as far apart, up "
            "to `retry.pending_poll_max_ms`. A Retry-After is a floor. Each poll is a query "
            "through the exit (quota, query sub-quota)."),
    INT_KEY(PER_ACCOUNT("retry"), "pending_poll_max_ms", KEY_I64, policy.pending_poll_max_ms, 1,
            MAX_DURATION_MS, 1,
            "The longest gap between two polls of a pending refund; must be >= "
            "`retry.pending_poll_interval_ms`."),
    INT_KEY(PER_ACCOUNT("retry"), "pending_max_polls", KEY_UINT, policy.pending_max_polls, 0,
            100000, 1,
            "Polls of one pending refund; then manual review (`pending_polls`). They do not "
            "spend `retry.max_queries`. 0: a pending refund goes straight to manual review."),
    INT_KEY(PER_ACCOUNT("retry"), "pending_deadline_s", KEY_I64, policy.pending_deadline_ms, 1,
            MAX_DURATION_S, 1000,
            "A pending refund's deadline, from the provider's first pending answer; it "
            "replaces `retry.deadline_s` for that refund (a bank's return can take days). "
            "Then manual review (`pending_deadline`). Default a week."),
    INT_KEY(PER_ACCOUNT("retry"), "key_retention_s", KEY_I64, policy.key_retention_ms, 1,
            MAX_DURATION_S, 1000,
            "Never re-send a key older than this (from its first POST): past the provider's "
            "retention (`provider.key_lifetime_s`, which this must be shorter than) it may be "
            "taken as new and refunded twice. Such an operation goes to manual review "
            "(`key_retention`)."),
    INT_KEY(PER_ACCOUNT("retry"), "backoff_base_ms", KEY_I64, policy.backoff.base_ms, 1,
            MAX_DURATION_MS, 1,
            "Upper edge of the first retry's window. Retry n waits in [min(min, hi), hi] with "
            "hi = min(cap, base x factor^(n-1))."),
    DOUBLE_KEY(PER_ACCOUNT("retry"), "backoff_factor", policy.backoff.factor, 1, 100, false,
               "Growth of the window per retry."),
    INT_KEY(PER_ACCOUNT("retry"), "backoff_min_ms", KEY_I64, policy.backoff.min_ms, 0,
            MAX_DURATION_MS, 1, "Lower edge of every window; must be <= `retry.backoff_cap_ms`."),
    INT_KEY(PER_ACCOUNT("retry"), "backoff_cap_ms", KEY_I64, policy.backoff.cap_ms, 1,
            MAX_DURATION_MS, 1,
            "Per-retry cap on the window's upper edge; must be >= `retry.backoff_base_ms`."),
    CUSTOM_KEY(PER_ACCOUNT("retry"), "jitter", config_set_jitter, config_show_jitter,
               "How a wait is drawn in its window: `none` (the upper edge: every client at the "
               "same instant), `full` (uniform), `equal` (upper/2 + uniform up to upper/2) or "
               "`decorrelated`. A Retry-After is a floor that jitter never shortens."),
    INT_KEY(PER_ACCOUNT("retry"), "retry_after_cap_s", KEY_I64, retry_after_cap_ms, 0,
            MAX_DURATION_S, 1000,
            "A longer Retry-After (seconds or an HTTP date) is cut to this, and never to more "
            "than a quarter of `retry.deadline_s`: one absurd header must not hold every queued "
            "refund past its deadline (the exit asks again, one probe, when the cut wait has "
            "passed). Of two Retry-After headers the longer counts. The doubling hold after "
            "probes refused without Retry-After (`exit.default_hold_max_ms`) stops at this "
            "cap too."),

    REPEAT_KEY(PER_ACCOUNT("classify"), "rule", config_set_rule, config_clear_rules,
               config_differ_rules,
               "A rule added over PROVIDER.md's built-in table, which it takes precedence over; "
               "repeatable (at most 64): `<post|query> <status>[-<status>] [code=<error_code>] "
               "[status=<body_status>] [retryable=<true|false|->] => <class>`, e.g. `post 409 "
               "code=idempotency_key_in_use => unknown`. Codes, statuses and the retryable mark "
               "are read where the `[provider]` reply mapping says. Classes: succeeded, "
               "rejected, key_reused, retryable, unknown, not_sent, processing, not_found, "
               "no_answer. A POST's `processing` (`post 202 => processing`: accepted, not "
               "final) is asked about like `unknown`, never re-sent on its own word."),

    STRING_KEY(PER_ACCOUNT("notify"), "url", notify_url, config_set_base_url,
               "Where events are delivered (docs/operating.md, \"Receiving events\"): every "
               "refund that ends (`succeeded`, `rejected`, `cancelled`), goes to `manual` or "
               "leaves it is announced by a signed `POST` of one event to this http(s) URL, at "
               "least once, in order per refund; a 2xx answer acknowledges it. Unset: nothing "
               "is delivered (the events are still recorded and `GET /v1/events` serves them). "
               "Needs `notify.secret_file`."),
    SECRET_KEY(PER_ACCOUNT("notify"), "secret_file", notify_secret_file,
               config_set_notify_secret_file, config_differ_notify_secrets,
               "A file holding the secret every delivery is signed with (HMAC-SHA256 of "
               "`TIMESTAMP.BODY`, in the `Tollgate-Signature` header). Two secrets, one a line, "
               "rotate it: the first signs, and each delivery carries a signature by both, so "
               "a receiver that knows either accepts it."),
    INT_KEY(PER_ACCOUNT("notify"), "timeout_ms", KEY_I64, notify_timeout_ms, 100, 600000, 1,
            "One delivery, connect to answer; then it failed and is retried."),
    INT_KEY(PER_ACCOUNT("notify"), "max_in_flight", KEY_UINT, notify_max_in_flight, 1, 256, 1,
            "Deliveries open at once (of different refunds: one refund's events go one at a "
            "time, in order). The receiver's own limit; the provider's exit is never "
            "touched by it."),
    DOUBLE_KEY(PER_ACCOUNT("notify"), "per_second", notify_per_second, 0, 100000, true,
               "Deliveries started a second at most."),
    INT_KEY(PER_ACCOUNT("notify"), "backoff_base_ms", KEY_I64, notify_backoff_base_ms, 1,
            MAX_DURATION_MS, 1,
            "Upper edge of the first retry's window; each failed delivery doubles it (full "
            "jitter) up to `notify.backoff_cap_ms`."),
    INT_KEY(PER_ACCOUNT("notify"), "backoff_cap_ms", KEY_I64, notify_backoff_cap_ms, 1,
            MAX_DURATION_MS, 1, "Per-retry cap of a delivery's wait."),
    REPEAT_KEY("notify", "allow", config_set_notify_allow, config_clear_notify_allow,
               config_differ_notify_allow,
               "A URL prefix a refund's own `notify_url` may name (`POST /v1/refunds`), "
               "repeatable (at most 16), e.g. `https://orders.example.com/hooks/`: the scheme, "
               "host and port must be the same, and the URL's path must start with the "
               "prefix's (by whole segments when the prefix does not end in `/`). That "
               "refund's events then go there instead of `notify.url`, signed with "
               "`notify.secret_file`. A URL under none is refused (422 `notify_url_not_allowed`); "
               "with no prefix at all, any `notify_url` is (422 `notify_url_not_configured`). "
               "Needs `notify.secret_file`."),
    INT_KEY(PER_ACCOUNT("notify"), "give_up_s", KEY_I64, notify_give_up_ms, 1, MAX_DURATION_S, 1000,
            "From an event's first failed delivery: past this it is parked (`tollgate events "
            "list --parked`, `tollgate_notify_parked` in /metrics) until an operator "
            "re-delivers it (`tollgate events redeliver ID`). Later events of the same refund "
            "are delivered after it is parked."),

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

    INT_KEY("dispatch", "max_accounts", KEY_UINT, dispatch_max_accounts, 0, TG_ACCOUNTS_MAX, 1,
            "The most accounts one dispatcher process owns at once; 0: every account it serves. "
            "With several dispatchers on one server store, each owns the accounts it could "
            "take (each account's own owner lock, in the config's order) up to this many, and "
            "stands by for the rest: when one dies, the others take its accounts over after "
            "the takeover wait. Leave room for that: with D dispatchers and A accounts, "
            "A / (D - 1) lets the survivors of one death carry every account "
            "(docs/operating.md, \"Several provider accounts\"). `--accounts a,b` narrows the "
            "accounts a process serves. It counts accounts: an orphaned share that a process "
            "takes over of an account it owns already adds none."),
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
    STRING_KEY("ui", "users_file", ui_users_file, config_set_users_file,
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

    CHOICE_KEY("log", "level", log_level, " debug info warn error ",
               "`debug`, `info`, `warn` or `error`. The logs are JSON lines on stderr."),

    CUSTOM_KEY("retention", "keep_days", config_set_keep_days, config_show_keep_days,
               "Operations that reached a final state (succeeded, rejected) more than this many "
               "days ago are deleted with their calls, in bounded batches, by the dispatcher's "
               "housekeeping and `tollgate prune`; 0: kept forever. An operation with an audit "
               "trail (a manual-review case, a provider event) is never deleted. Must be longer "
               "than any client may re-submit an operation_id (a deleted id is new again), and "
               "longer than `retry.deadline_s` + `retry.key_retention_s`. See docs/design.md. "
               "The same prune deletes the events ([notify]) delivered more than this many days "
               "ago, never one still due or parked: a delivered event is a copy of a change the "
               "receiver acknowledged and the operation (or its audit trail) still records, so "
               "it is kept as long as the operation is and needs no cutoff of its own. Events "
               "nobody delivers (no [notify] url: the pull feed only) stay due and are kept."),
    INT_KEY("retention", "prune_batch", KEY_UINT, retention_prune_batch, 10, 10000, 1,
            "Operations (then delivered events) deleted per prune transaction (each a short "
            "transaction: the exit never waits long behind one)."),

    INT_KEY("manual", "approval_above", KEY_I64, manual_approval_above, 0, INT64_MAX, 1,
            "Four-eyes for manual review: a re-send or resolve of a case whose amount (in the "
            "refund's minor units, whatever its currency) is at or above this waits for a "
            "second, different operator's approval (`POST /v1/manual/{id}/approve`, `tollgate "
            "manual approve`); both are audited. Below it one operator is enough. 0: off. "
            "Who is who comes from `api.credentials_file` (the API) or `--operator` (the CLI)."),
};

const size_t config_key_count = sizeof(config_keys) / sizeof(config_keys[0]);

/* TG_ACCOUNTS_MAX as the help text writes it (the number written once) */
#define TEXT_OF(x)        #x
#define NUMBER_TEXT(x)    TEXT_OF(x)
#define ACCOUNTS_MAX_TEXT NUMBER_TEXT(TG_ACCOUNTS_MAX)

const char config_account_help[] =
    "Several provider accounts in one file: one `[account.NAME]` section each, NAME being 1 to "
    "32 of `a-z`, `0-9`, `_` and `-`, each section at most once. An account may set any key of "
    "the sections listed below, written with its section (`provider.base_url = ...`, "
    "`exit.starts_per_second = 20`, `retry.deadline_s = 600`); what it does not set comes from "
    "the top-level sections, which are every account's defaults. Its `classify.rule` or "
    "`provider.body_field` lines replace the inherited list. Any other key (`store.url`, "
    "`api.listen`, ...) is an error, and the checks across keys run for each account (a "
    "message names `account.NAME.section.key`). A file without `[account.*]` is one account, "
    "`default`. A dispatcher (`serve`, `dispatch`) serves every account of its file, each "
    "through an exit of its own (its own pacer, in-flight cap, holds, owner lock and "
    "provider connection) on one event loop; up to " ACCOUNTS_MAX_TEXT
    " accounts. On a reload an account's key "
    "is live or refused as its top-level counterpart is.";

_Static_assert(sizeof(config_keys) / sizeof(config_keys[0]) <= LOAD_KEYS_MAX,
               "struct load.seen is too small");

/* struct tg_account_settings and the same members in struct tg_config
 * (daemon/config_account.def) have one layout: the block is copied whole. */
#define BLOCK_AT(member)                                                                           \
        (offsetof(struct tg_config, member) - offsetof(struct tg_config, provider_base_url))
_Static_assert(BLOCK_AT(rule_count) == offsetof(struct tg_account_settings, rule_count),
               "the account block's layout differs");
_Static_assert(BLOCK_AT(exit) == offsetof(struct tg_account_settings, exit),
               "the account block's layout differs");
_Static_assert(BLOCK_AT(policy) == offsetof(struct tg_account_settings, policy),
               "the account block's layout differs");
_Static_assert(BLOCK_AT(admission) >= ACCOUNT_BLOCK_SIZE,
               "the account block overlaps what follows it");
_Static_assert(sizeof(struct tg_account_settings) - ACCOUNT_BLOCK_SIZE < _Alignof(max_align_t),
               "rule_count is not the account block's last member");

const struct key_def *config_key_find(const char *section, const char *name)
{
        for (size_t i = 0; i < config_key_count; i++)
                if (strcmp(config_keys[i].section, section) == 0 &&
                    strcmp(config_keys[i].name, name) == 0)
                        return &config_keys[i];
        return NULL;
}

int config_key_index(const struct key_def *key)
{
        uintptr_t at = (uintptr_t)key, first = (uintptr_t)config_keys;

        /* as integers: a row made up for a message is another object */
        if (!key || at < first || at >= first + sizeof(config_keys))
                return -1;
        return (int)((at - first) / sizeof(config_keys[0]));
}

int config_key_at(size_t i, const char **ret_section, const char **ret_name, const char **ret_help)
{
        if (i >= config_key_count)
                return TG_ERANGE;
        *ret_section = config_keys[i].section;
        *ret_name = config_keys[i].name;
        *ret_help = config_keys[i].help;
        return 0;
}

void config_defaults(struct tg_config *ret_config)
{
        struct tg_config *c = ret_config;

        memset(c, 0, sizeof(*c));
        snprintf(c->store_url, sizeof(c->store_url), "%s", "sqlite://tollgate.db");
        c->store_check_on_start = true;

        snprintf(c->api_listen_host, sizeof(c->api_listen_host), "%s", "127.0.0.1");
        c->api_listen_port = 8080;
        c->api_max_body_bytes = 16384;
        c->api_max_batch_bytes = 2 * 1024 * 1024;
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
        c->provider_key_lifetime_ms = 24LL * 3600 * 1000; /* shared/PROVIDER.md */
        c->provider_settlement_scan_ms = 60 * 1000;
        c->provider_max_response_bytes = 65536;
        /* A fresh connection per call: libcurl re-sends a request on a reused
         * connection that turns out dead (DESIGN.md, transport boundary). */
        c->provider_reuse_connections = false;
        c->provider_unreachable_run_hold = 3;
        c->provider_list_max_pages = 10;
        c->provider_unreachable_hold_ms = 5000;
        c->provider_unreachable_hold_max_ms = 60000;
        snprintf(c->provider_auth, sizeof(c->provider_auth), "%s", "none");
        snprintf(c->provider_auth_header, sizeof(c->provider_auth_header), "%s", "X-Api-Key");
        snprintf(c->provider_token_path, sizeof(c->provider_token_path), "%s", "/v1/oauth2/token");
        c->provider_token_refresh_margin_ms = 300000;
        snprintf(c->provider_signature_header, sizeof(c->provider_signature_header), "%s",
                 "X-Signature");
        snprintf(c->provider_timestamp_header, sizeof(c->provider_timestamp_header), "%s",
                 "X-Timestamp");
        snprintf(c->provider_signing_string, sizeof(c->provider_signing_string), "%s",
                 "{method}\\n{path}\\n{timestamp}\\n{idempotency_key}\\n{body_sha256}");
        snprintf(c->provider_signature_encoding, sizeof(c->provider_signature_encoding), "%s",
                 "hex");
        snprintf(c->provider_body_format, sizeof(c->provider_body_format), "%s", "json");
        snprintf(c->provider_webhook_signature, sizeof(c->provider_webhook_signature), "%s",
                 "tollgate");
        c->provider_webhook_tolerance_ms = 300000;
        snprintf(c->provider_webhook_match_field, sizeof(c->provider_webhook_match_field), "%s",
                 "operation_id");
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
        c->exit_query_max_in_flight = 0;
        c->exit_refund_starts_per_second = 0.0;
        c->exit_refund_max_in_flight = 0;
        c->exit_shares = 1;
        c->exit_clock_skew_ms = 1;
        c->exit_timeout_run_hold = 5;
        c->exit_timeout_hold_ms = 1000;
        c->exit_default_hold_ms = 1000;
        c->exit_default_hold_max_ms = 60000;
        c->exit_idle_poll_max_ms = 1000;

        policy_config_default(&c->policy);
        c->notify_timeout_ms = 5000;
        c->notify_max_in_flight = 4;
        c->notify_per_second = 20;
        c->notify_backoff_base_ms = 1000;
        c->notify_backoff_cap_ms = 3600000;
        c->notify_give_up_ms = 3LL * 24 * 3600 * 1000;
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
        c->manual_approval_above = 0;
        config_accounts_default(c); /* one account, default, with the values above */
}

int64_t config_retry_after_cap_ms(const struct tg_config *config)
{
        int64_t quarter = config->policy.deadline_ms / 4;

        return config->retry_after_cap_ms < quarter ? config->retry_after_cap_ms : quarter;
}
