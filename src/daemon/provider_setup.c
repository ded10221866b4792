/*
 * provider_setup — the provider's mapping, transport config and credentials
 * from the config. See provider_setup.h.
 *
 * Invariants:
 *   - a mapping that passed provider_setup_maps() makes a path, a body and
 *     a signature for any valid refund: it was evaluated here for sample
 *     refunds with and without their optional fields;
 *   - secrets are read into secret memory or stack buffers that are wiped
 *     before returning; messages name files and keys, never contents.
 */
#include "daemon/provider_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/tg_error.h"
#include "net/adyen_batch.h"
#include "net/provider_request.h"
#include "platform/secmem.h"
#include "platform/secret_file.h"

#define PEM_MAX    (64 * 1024) /* a certificate chain or a key, bytes */
#define SECRET_MAX 256

static int fail(char *err, size_t size, const char *key, const char *message)
{
        if (err && size)
                snprintf(err, size, "provider.%s: %s", key, message);
        return TG_ECONFIG;
}

/* ---- the mapping -------------------------------------------------------------------- */

static int parse_path(enum map_path kind, const char *key, const char *text, struct template *t,
                      char *err, size_t size)
{
        struct template_error terr;

        if (map_path_parse(kind, text, t, &terr) < 0)
                return fail(err, size, key, terr.message);
        return 0;
}

static int parse_source(const char *key, const char *text, struct field_source *s, char *err,
                        size_t size)
{
        struct template_error terr;

        if (field_source_parse(text, s, &terr) < 0)
                return fail(err, size, key, terr.message);
        return 0;
}

static int parse_list(const char *key, const char *text, struct status_list *l, char *err,
                      size_t size)
{
        struct template_error terr;

        if (status_list_parse(text, l, &terr) < 0)
                return fail(err, size, key, terr.message);
        return 0;
}

static bool config_query_needs_refund_id(const struct provider_maps *m)
{
        enum reconcile_strategy s;
        struct template_values none;

        memset(&none, 0, sizeof(none));
        return m->request.replay && request_map_strategy(&m->request, &none, &s) < 0;
}

/* One evaluation of everything a call makes, for one sample refund. */
static int try_sample(const struct provider_maps *m, bool sign, const struct refund_request *req,
                      const struct refund_metadata *md, char *err, size_t size)
{
        static const unsigned char key[] = "sample-key";
        struct template_values v;
        char amount[MAP_AMOUNT_BUF], path[2048], sig[512], *body = NULL;
        struct tg_strbuf sb;
        size_t len = 0;
        int r;

        for (int with_id = 0; with_id < 2; with_id++) {
                map_values_for(req, md, with_id ? "re_sample" : NULL, amount, &v);
                tg_strbuf_init(&sb, path, sizeof(path));
                if (request_map_path(&m->request, CLASSIFY_POST, &v, &sb) < 0)
                        return fail(err, size, "refunds_path", "cannot be made for a refund");
                tg_strbuf_init(&sb, path, sizeof(path));
                /* refund_id (and replay) alone: no query without the id */
                if (request_map_path(&m->request, CLASSIFY_QUERY, &v, &sb) < 0 &&
                    (with_id || !config_query_needs_refund_id(m)))
                        return fail(err, size, "query_path", "cannot be made for a refund");
        }
        map_values_for(req, md, NULL, amount, &v);
        r = provider_request_body(&m->request, &v, &body, &len);
        free(body);
        if (r == TG_EFULL)
                return fail(err, size, "body_field",
                            "a refund's body would be larger than 16384 "
                            "bytes");
        if (r < 0)
                return fail(err, size, "body_field",
                            "cannot make a refund's body (a value that is not UTF-8 text?)");
        if (sign) {
                v.text[TPL_METHOD] = "POST";
                v.text[TPL_PATH] = "/sample";
                v.text[TPL_TIMESTAMP] = "1700000000";
                v.text[TPL_BODY_SHA256] = "0";
                v.text[TPL_REQUEST_ID] = "tg-1-1-0000";
                if (provider_sign(&m->signing, &v, key, sizeof(key) - 1, SIGNATURE_HEX, "", sig,
                                  sizeof(sig)) < 0)
                        return fail(err, size, "signing_string", "cannot be made for a call");
        }
        return 0;
}

/* provider.header: never one of the headers the transport sets itself (a
 * second Authorization or Idempotency-Key would be the provider's guess),
 * nor twice; joined with '\n' for the transport. */
static int fixed_headers(const struct tg_config *c, struct provider_maps *m, char *err, size_t size)
{
        const char *own[] = {c->provider_key_header,
                             c->provider_request_id_header,
                             c->provider_attempt_header,
                             c->provider_signature_header,
                             c->provider_timestamp_header,
                             c->provider_auth_header,
                             "Authorization",
                             "Content-Type",
                             "Content-Length",
                             "Host",
                             "Expect",
                             "traceparent"};
        size_t at = 0;

        m->fixed_headers[0] = '\0';
        for (unsigned i = 0; i < c->provider_header_count; i++) {
                const char *line = c->provider_headers[i];
                size_t n = strcspn(line, ":");

                for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++)
                        if (strlen(own[k]) == n && strncasecmp(own[k], line, n) == 0)
                                return fail(err, size, "header",
                                            "names a header tollgate sets itself");
                for (unsigned j = 0; j < i; j++)
                        if (strncasecmp(c->provider_headers[j], line, n + 1) == 0)
                                return fail(err, size, "header", "a header is set twice");
                at += (size_t)snprintf(m->fixed_headers + at, sizeof(m->fixed_headers) - at, "%s%s",
                                       i ? "\n" : "", line);
        }
        return 0;
}

int provider_setup_maps(const struct tg_config *c, struct provider_maps *m, char *err, size_t size)
{
        struct template_error terr;
        struct refund_request req;
        struct refund_metadata md;
        struct refund_problem problem;
        const char *key = NULL;
        unsigned lists[2] = {0, 0};
        int r = 0;

        memset(m, 0, sizeof(*m));
        request_map_default(&m->request);
        m->request.format =
            strcmp(c->provider_body_format, "form") == 0 ? BODY_FORMAT_FORM : BODY_FORMAT_JSON;
        if (c->provider_body_field_count > 0) {
                m->request.nfields = 0;
                for (unsigned i = 0; i < c->provider_body_field_count; i++) {
                        if (body_field_parse(c->provider_body_fields[i],
                                             &m->request.fields[m->request.nfields++], &terr) < 0)
                                return fail(err, size, "body_field", terr.message);
                }
        }
        r = parse_path(MAP_PATH_REFUNDS, "refunds_path", c->provider_refunds_path,
                       &m->request.refunds_path, err, size);
        if (r == 0)
                r = parse_path(MAP_PATH_QUERY, "query_path", c->provider_query_path,
                               &m->request.query_path, err, size);
        m->request.has_fallback = c->provider_query_fallback_path[0] != '\0';
        if (r == 0 && m->request.has_fallback)
                r = parse_path(MAP_PATH_QUERY_FALLBACK, "query_fallback_path",
                               c->provider_query_fallback_path, &m->request.query_fallback_path,
                               err, size);
        m->request.has_list = c->provider_list_path[0] != '\0';
        if (r == 0 && m->request.has_list)
                r = parse_path(MAP_PATH_LIST, "list_path", c->provider_list_path,
                               &m->request.list_path, err, size);
        if (r == 0 && c->provider_reconcile[0] &&
            reconcile_parse(c->provider_reconcile, &m->request, &terr) < 0)
                return fail(err, size, "reconcile", terr.message);
        if (r == 0 && m->request.notification && !c->provider_webhook_secret_file[0])
                return fail(err, size, "reconcile",
                            "notification needs webhook_secret_file: the provider's "
                            "notification is the only source of an outcome");
        if (r == 0 && strcmp(c->provider_webhook_signature, "adyen") == 0 &&
            c->provider_webhook_secret_file[0]) {
                unsigned char k[ADYEN_KEY_MAX];
                size_t klen;
                bool hex = adyen_key_decode(c->provider_webhook_secret, k, &klen) == 0;

                explicit_bzero(k, sizeof(k));
                if (!hex)
                        return fail(err, size, "webhook_secret_file",
                                    "Adyen's HMAC key is hex, as the Customer Area shows it");
        }
        if (r < 0)
                return r;
        if (request_map_check(&m->request, &key, &terr) < 0)
                return fail(err, size, key, terr.message);

        r = parse_source("status_field", c->provider_status_field, &m->reply.status, err, size);
        if (r == 0)
                r = parse_source("refund_id_field", c->provider_refund_id_field,
                                 &m->reply.refund_id, err, size);
        if (r == 0)
                r = parse_source("error_code_field", c->provider_error_code_field,
                                 &m->reply.error_code, err, size);
        if (r == 0)
                r = parse_source("failure_code_field", c->provider_failure_code_field,
                                 &m->reply.failure_code, err, size);
        if (r == 0)
                r = parse_source("retryable_field", c->provider_retryable_field,
                                 &m->reply.retryable, err, size);
        if (r == 0)
                r = parse_source("list_items_field", c->provider_list_items_field,
                                 &m->reply.list_items, err, size);
        if (r == 0)
                r = parse_source("list_match_field", c->provider_list_match_field,
                                 &m->reply.list_match, err, size);
        if (r == 0)
                r = parse_source("list_more_field", c->provider_list_more_field,
                                 &m->reply.list_more, err, size);
        if (r == 0)
                r = parse_source("webhook_status_field", c->provider_webhook_status_field,
                                 &m->reply.event_status, err, size);
        if (r == 0 && c->provider_in_progress_codes[0])
                r = parse_list("in_progress_codes", c->provider_in_progress_codes,
                               &m->reply.in_progress, err, size);
        /* a list read page by page: where it says more follow, and how the
         * next page is asked for */
        if (r == 0 && c->provider_list_cursor_param[0] &&
            (!m->request.has_list || m->reply.list_more.n == 0))
                return fail(err, size, "list_cursor_param",
                            "a list's next page needs provider.list_path and "
                            "provider.list_more_field (where a page says more follow)");
        if (r == 0)
                snprintf(m->request.list_cursor_param, sizeof(m->request.list_cursor_param), "%s",
                         c->provider_list_cursor_param);
        /* a list is read by one path each, from the body */
        if (r == 0 && m->request.has_list &&
            (m->reply.list_items.n != 1 || m->reply.list_items.alt[0].header ||
             m->reply.list_match.n != 1 || m->reply.list_match.alt[0].header))
                return fail(err, size, "list_items_field",
                            "list_path needs list_items_field and list_match_field, one JSON "
                            "path each");
        if (r == 0)
                r = parse_list("status_succeeded", c->provider_status_succeeded,
                               &m->reply.succeeded, err, size);
        if (r == 0)
                r = parse_list("status_failed", c->provider_status_failed, &m->reply.failed, err,
                               size);
        if (r == 0)
                r = parse_list("status_processing", c->provider_status_processing,
                               &m->reply.processing, err, size);
        if (r < 0)
                return r;
        if (reply_map_check(&m->reply, lists, &terr) < 0) {
                /* Blame the list the operator changed: the other still has
                 * its default word. */
                static const char *const names[3] = {"status_succeeded", "status_failed",
                                                     "status_processing"};
                const char *texts[3] = {c->provider_status_succeeded, c->provider_status_failed,
                                        c->provider_status_processing};
                static const char *const defaults[3] = {"succeeded", "failed", "processing"};
                unsigned blame =
                    strcmp(texts[lists[1]], defaults[lists[1]]) != 0 ? lists[1] : lists[0];
                return fail(err, size, names[blame], terr.message);
        }
        if (template_parse(c->provider_signing_string, TPL_SIGNING_FIELDS, &m->signing, &terr) < 0)
                return fail(err, size, "signing_string", terr.message);
        r = fixed_headers(c, m, err, size);
        if (r < 0)
                return r;

        /* Evaluate it all once, for refunds of both shapes. */
        memset(&req, 0, sizeof(req));
        memset(&md, 0, sizeof(md));
        snprintf(req.operation_id, sizeof(req.operation_id), "sample-op-1");
        snprintf(req.payment_id, sizeof(req.payment_id), "pay_sample");
        req.amount = 1500;
        snprintf(req.currency, sizeof(req.currency), "TWD");
        r = try_sample(m, c->provider_signing_key_file[0] != '\0', &req, &md, err, size);
        if (r < 0)
                return r;
        snprintf(req.reason, sizeof(req.reason), "requested by customer");
        refund_metadata_add(&md, "order", 5, "o-1", 3, &problem);
        refund_metadata_add(&md, "note", 4, "a b&c", 5, &problem);
        return try_sample(m, c->provider_signing_key_file[0] != '\0', &req, &md, err, size);
}

void provider_setup_transport_config(const struct tg_config *c, const struct provider_maps *m,
                                     unsigned max_open, struct transport_config *ret)
{
        memset(ret, 0, sizeof(*ret));
        ret->base_url = c->provider_base_url;
        ret->request_map = &m->request;
        ret->reply_map = &m->reply;
        ret->key_header = c->provider_key_header;
        ret->request_id_header = c->provider_request_id_header;
        ret->attempt_header = c->provider_attempt_header;
        ret->connect_timeout_ms = c->provider_connect_timeout_ms;
        ret->max_response_bytes = c->provider_max_response_bytes;
        ret->max_open = max_open;
        ret->reuse_connections = c->provider_reuse_connections;
        ret->keepalive_idle_ms = c->provider_keepalive_idle_ms;
        ret->ca_file = c->provider_ca_file;
        ret->fixed_headers = m->fixed_headers;
        ret->auth = strcmp(c->provider_auth, "bearer") == 0   ? TRANSPORT_AUTH_BEARER
                    : strcmp(c->provider_auth, "header") == 0 ? TRANSPORT_AUTH_HEADER
                    : strcmp(c->provider_auth, "oauth2") == 0 ? TRANSPORT_AUTH_OAUTH2
                                                              : TRANSPORT_AUTH_NONE;
        ret->token_path = c->provider_token_path;
        ret->auth_header = c->provider_auth_header;
        ret->signing_string = c->provider_signing_key_file[0] ? &m->signing : NULL;
        ret->signature_header = c->provider_signature_header;
        ret->timestamp_header = c->provider_timestamp_header;
        ret->signature_prefix = c->provider_signature_prefix;
        ret->signature_encoding = strcmp(c->provider_signature_encoding, "base64") == 0
                                      ? SIGNATURE_BASE64
                                      : SIGNATURE_HEX;
}

/* ---- credentials ---------------------------------------------------------------------- */

/* A whole PEM file into secret memory (*ret_len bytes, NUL-terminated),
 * through the one secret reader: a private key's permissions are checked
 * on the open file itself. */
static int read_pem(const char *key, const char *path, bool private_key, char **ret,
                    size_t *ret_len, char *err, size_t size)
{
        char why[TG_PATH_MAX * 2 + 200] = "";
        char *buf = NULL;
        size_t n = 0;
        int r = secret_file_read(path, private_key ? SECRET_FILE_PRIVATE_KEY : 0, PEM_MAX, &buf, &n,
                                 why, sizeof(why));

        if (r == TG_ENOMEM)
                return r;
        if (r == 0 && n == 0) {
                secmem_free(buf);
                r = TG_ECONFIG;
                snprintf(why, sizeof(why), "%s is empty", path);
        } else if (r == TG_EFULL) {
                snprintf(why, sizeof(why), "%s is larger than %d bytes", path, PEM_MAX);
        }
        if (r < 0)
                return fail(err, size, key, why[0] ? why : tg_strerror(r));
        *ret = buf;
        *ret_len = n;
        return 0;
}

int provider_setup_lane_credentials(const struct tg_config *c, struct transport *t, unsigned lane,
                                    char *err, size_t size)
{
        struct transport_credentials in;
        char *secret = secmem_alloc(SECRET_MAX), *signing = secmem_alloc(SECRET_MAX);
        char *client_id = secmem_alloc(SECRET_MAX);
        char *cert = NULL, *key = NULL;
        size_t cert_len = 0, key_len = 0;
        int r = 0;

        memset(&in, 0, sizeof(in));
        if (!secret || !signing || !client_id) {
                r = TG_ENOMEM;
                goto out;
        }
        if (strcmp(c->provider_auth, "none") != 0) {
                r = config_read_secret("provider", "auth_secret_file", c->provider_auth_secret_file,
                                       secret, SECRET_MAX, err, size);
                in.auth_secret = secret;
        }
        if (r == 0 && c->provider_client_id_file[0]) {
                r = config_read_secret("provider", "client_id_file", c->provider_client_id_file,
                                       client_id, SECRET_MAX, err, size);
                in.client_id = client_id;
        }
        if (r == 0 && c->provider_signing_key_file[0]) {
                r = config_read_secret("provider", "signing_key_file", c->provider_signing_key_file,
                                       signing, SECRET_MAX, err, size);
                in.signing_key = (const unsigned char *)signing;
                in.signing_key_len = strlen(signing);
        }
        if (r == 0 && c->provider_client_cert[0]) {
                r = read_pem("client_cert", c->provider_client_cert, false, &cert, &cert_len, err,
                             size);
                if (r == 0)
                        r = read_pem("client_key", c->provider_client_key, true, &key, &key_len,
                                     err, size);
                in.client_cert_pem = cert;
                in.client_cert_len = cert_len;
                in.client_key_pem = key;
                in.client_key_len = key_len;
        }
        if (r == 0) {
                r = transport_set_lane_credentials(t, lane, &in);
                if (r < 0)
                        fail(err, size, "auth_secret_file", tg_strerror(r));
        }
out:
        secmem_free(secret);
        secmem_free(signing);
        secmem_free(client_id);
        secmem_free(cert);
        secmem_free(key);
        return r;
}

int provider_setup_credentials(const struct tg_config *c, struct transport *t, char *err,
                               size_t size)
{
        return provider_setup_lane_credentials(c, t, 0, err, size);
}
