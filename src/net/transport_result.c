/*
 * transport_result — what an ended call says (transport_int.h): whether
 * any byte of it may have left, the cause of one that did not end with a
 * complete response (dns, refused, the TLS failures, timeout, reset, late),
 * the reply read where the reply map says, and an error text cut to the
 * call log's bound; and the names of the causes.
 *
 * Invariants:
 *   - "not sent" only when nothing can have reached the provider's HTTP
 *     server: the pre-request hook never let the request go, or (TLS 1.3)
 *     the provider's TLS layer refused our certificate on the connection
 *     opened for this call before a byte of any response;
 *   - a timeout after send is TG_TR_TIMEOUT_AFTER_SEND, any other failure
 *     after send TG_TR_RESET: both unknown, never "not sent";
 *   - a body over the bound is not read (the status line is).
 */
#include "net/transport_int.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/tg_error.h"
#include "net/provider_reply.h"
#include "platform/clock.h"

static const char *const failure_names[TRANSPORT_FAILURE_COUNT] = {
    [TRANSPORT_OK] = "ok",
    [TRANSPORT_DNS] = "dns",
    [TRANSPORT_REFUSED] = "refused",
    [TRANSPORT_CONNECT_TIMEOUT] = "connect_timeout",
    [TRANSPORT_TLS_TIMEOUT] = "tls_timeout",
    [TRANSPORT_TLS_VERIFY] = "tls_verify",
    [TRANSPORT_TLS_CLIENT_CERT] = "tls_client_certificate",
    [TRANSPORT_TLS_HANDSHAKE] = "tls_handshake",
    [TRANSPORT_TIMEOUT] = "timeout",
    [TRANSPORT_RESET] = "reset",
    [TRANSPORT_OTHER] = "other",
    [TRANSPORT_LATE] = "late",
};

const char *transport_failure_name(enum transport_failure f)
{
        if ((unsigned)f >= TRANSPORT_FAILURE_COUNT)
                return "other";
        return failure_names[f];
}

/* Fatal alerts by which a provider's TLS layer refuses the handshake over
 * OUR certificate (RFC 8446 section 6.2): the HTTP server behind it never
 * saw a byte of the request. */
static bool client_cert_alert(int alert)
{
        switch (alert) {
        case 42:  /* bad_certificate */
        case 43:  /* unsupported_certificate */
        case 44:  /* certificate_revoked */
        case 45:  /* certificate_expired */
        case 46:  /* certificate_unknown */
        case 48:  /* unknown_ca */
        case 49:  /* access_denied */
        case 116: /* certificate_required */
                return true;
        default:
                return false;
        }
}

static enum transport_failure not_sent_failure(const struct call *c, CURLcode code)
{
        int alert = c->watch ? c->watch->alert : -1;

        switch (code) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return TRANSPORT_DNS;
        case CURLE_COULDNT_CONNECT:
                return TRANSPORT_REFUSED;
        case CURLE_OPERATION_TIMEDOUT:
                /* A TLS context exists only once TCP connected: with one, the
                 * handshake is what hung. (Without libcurl's OpenSSL hook a
                 * hung handshake reads as a connect timeout.) */
                return c->watch ? TRANSPORT_TLS_TIMEOUT : TRANSPORT_CONNECT_TIMEOUT;
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
                return TRANSPORT_TLS_VERIFY;
        case CURLE_SSL_CERTPROBLEM:
                return TRANSPORT_TLS_CLIENT_CERT;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_ENGINE_INITFAILED:
        case CURLE_SSL_CIPHER:
                return client_cert_alert(alert) ? TRANSPORT_TLS_CLIENT_CERT
                                                : TRANSPORT_TLS_HANDSHAKE;
        default:
                return TRANSPORT_OTHER;
        }
}

/* What became of a call that did not end with a complete response. */
static void failed_call(const struct call *c, CURLcode code, enum tg_transport_result *ret_tr,
                        enum transport_failure *ret_failure)
{
        int alert = c->watch ? c->watch->alert : -1;

        if (!c->sent_mono) {
                *ret_tr = TG_TR_NOT_SENT; /* never got as far as sending */
                *ret_failure = c->late ? TRANSPORT_LATE : not_sent_failure(c, code);
                return;
        }
        /* TLS 1.3: the provider refused our certificate after we wrote the
         * request, on the connection opened for it, before answering a
         * byte. Its TLS layer never finished the handshake: nothing was
         * executed. Any other alert after send stays unknown. */
        if (!c->got_response && c->watch && client_cert_alert(alert)) {
                *ret_tr = TG_TR_NOT_SENT;
                *ret_failure = TRANSPORT_TLS_CLIENT_CERT;
                return;
        }
        if (code == CURLE_OPERATION_TIMEDOUT) {
                *ret_tr = TG_TR_TIMEOUT_AFTER_SEND;
                *ret_failure = TRANSPORT_TIMEOUT;
                return;
        }
        *ret_tr = TG_TR_RESET;
        *ret_failure = TRANSPORT_RESET;
}

/* What the ended call c says, into *ret_result: sent or not, the reply
 * read through the reply map (a complete answer), or the cause and the
 * error text (one without). Reads c only; the caller unlinks and frees it. */
void transport_call_result(const struct transport_lane *t, const struct call *c, CURLcode code,
                           struct transport_result *ret_result)
{
        struct transport_result *res = ret_result;
        struct provider_reply_headers hdrs = {0};
        enum tg_transport_result tr = TG_TR_COMPLETE;
        enum transport_failure failure = TRANSPORT_OK;
        long status = 0;

        memset(res, 0, sizeof(*res));
        /* too_big: a full status line came; the body is unusable. */
        if (code != CURLE_OK && !c->too_big)
                failed_call(c, code, &tr, &failure);
        res->cookie = c->cookie;
        res->sent = c->sent_mono != 0 && tr != TG_TR_NOT_SENT;
        res->handoff_mono = c->started;
        res->ready_mono = c->ready_mono;
        res->sent_mono = res->sent ? c->sent_mono : 0;
        res->sent_end_mono = res->sent ? (c->sent_end ? c->sent_end : clock_mono_now()) : 0;
        res->second_send_refused = c->second_send;
        res->latency_us = (clock_mono_now() - c->started) / TG_NS_PER_US;
        res->failure = failure;
        memcpy(res->retry_after, c->retry_after, sizeof(res->retry_after));
        res->reply.transport = tr;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        if (tr == TG_TR_COMPLETE) {
                res->reply.http_status = (int)status;
                for (unsigned k = 0; k < t->ncapture; k++) {
                        hdrs.name[k] = t->capture[k];
                        hdrs.value[k] = c->captured[k];
                }
                hdrs.n = t->ncapture;
                hdrs.content_type = c->content_type;
                /* a token call's answer is no refund's: oauth_token reads it
                 * (transport.c), never the reply map */
                const char *body = c->too_big || c->token ? NULL : c->resp;
                size_t len = !body ? 0 : c->resp_len;
                int read =
                    c->list_match[0]
                        ? provider_reply_read_list_known(t->reply_map, c->list_match, c->list_known,
                                                         body, len, &hdrs, &res->reply)
                        : provider_reply_read(t->reply_map, body, len, &hdrs, &res->reply);
                if (read == TG_EPARSE && code == CURLE_OK) {
                        char text[sizeof(c->content_type) + 64];
                        int n = snprintf(text, sizeof(text), "body not read: Content-Type %s",
                                         c->content_type);
                        classify_copy_field(res->error, sizeof(res->error), text,
                                            n < 0 ? 0 : (size_t)n);
                }
        }
        if (code != CURLE_OK) {
                const char *words = c->errbuf[0] ? c->errbuf : curl_easy_strerror(code);
                char text[CURL_ERROR_SIZE + 128];
                int n = snprintf(text, sizeof(text), "%s%s%s", words,
                                 c->too_big       ? " (response body over the bound)"
                                 : c->second_send ? " (second send refused)"
                                 : c->late        ? " (connected after its window: not sent)"
                                                  : "",
                                 res->failure == TRANSPORT_TLS_CLIENT_CERT && c->sent_mono
                                     ? " (the provider refused our client certificate)"
                                     : "");
                /* cut to fit: the call log keeps a bounded text */
                classify_copy_field(res->error, sizeof(res->error), text, n < 0 ? 0 : (size_t)n);
        }
}

int transport_http_date(const char *text, int64_t *ret_epoch_s)
{
        time_t t = curl_getdate(text, NULL);
        if (t == (time_t)-1)
                return TG_EPARSE;
        *ret_epoch_s = (int64_t)t;
        return 0;
}
