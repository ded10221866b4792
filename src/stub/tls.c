/*
 * The stub's TLS (see tls.h). Invariants: the certificate and key are
 * loaded once, before MHD starts, and never change; with a demanded client
 * certificate, no request is read on a connection whose certificate is
 * missing or does not verify.
 */
#include "tls.h"

#include "core/tg_error.h"

#include <string.h>

#define CHAIN_MAX 8

static struct {
        bool loaded;
        bool require_client;
        gnutls_pcert_st pcert[CHAIN_MAX];
        unsigned int npcert;
        gnutls_privkey_t key;
} tls;

static int retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                    const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                    gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
        (void)session;
        (void)req_ca_rdn;
        (void)nreqs;
        (void)pk_algos;
        (void)pk_algos_length;
        *pcert = tls.pcert;
        *pcert_length = tls.npcert;
        *privkey = tls.key;
        return 0;
}

int stub_tls_init(const char *cert_pem, const char *key_pem, bool require_client)
{
        gnutls_datum_t cert = {(unsigned char *)cert_pem, (unsigned int)strlen(cert_pem)};
        gnutls_datum_t key = {(unsigned char *)key_pem, (unsigned int)strlen(key_pem)};

        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES ||
            MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES)
                return TG_EINVAL;
        tls.npcert = CHAIN_MAX;
        if (gnutls_pcert_list_import_x509_raw(tls.pcert, &tls.npcert, &cert, GNUTLS_X509_FMT_PEM,
                                              0) < 0)
                return TG_EINVAL;
        if (gnutls_privkey_init(&tls.key) < 0) {
                stub_tls_release();
                return TG_ENOMEM;
        }
        if (gnutls_privkey_import_x509_raw(tls.key, &key, GNUTLS_X509_FMT_PEM, NULL, 0) < 0) {
                stub_tls_release();
                return TG_EINVAL;
        }
        tls.require_client = require_client;
        tls.loaded = true;
        return 0;
}

void stub_tls_release(void)
{
        for (unsigned int i = 0; i < tls.npcert && i < CHAIN_MAX; i++)
                gnutls_pcert_deinit(&tls.pcert[i]);
        tls.npcert = 0;
        if (tls.key)
                gnutls_privkey_deinit(tls.key);
        tls.key = NULL;
        tls.loaded = false;
}

gnutls_certificate_retrieve_function2 *stub_tls_cert_callback(void)
{
        return retrieve;
}

/* 0 verified; else the alert a TLS layer would send. */
static int verdict(struct MHD_Connection *conn, gnutls_alert_description_t *ret_alert)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        gnutls_session_t session;
        unsigned int n = 0, status = 0;

        *ret_alert = GNUTLS_A_CERTIFICATE_REQUIRED;
        if (!ci || !ci->tls_session)
                return -1;
        session = (gnutls_session_t)ci->tls_session;
        if (!gnutls_certificate_get_peers(session, &n) || n == 0)
                return -1;
        if (gnutls_certificate_verify_peers2(session, &status) < 0 || status != 0) {
                *ret_alert = (status & GNUTLS_CERT_SIGNER_NOT_FOUND) ? GNUTLS_A_UNKNOWN_CA
                                                                     : GNUTLS_A_BAD_CERTIFICATE;
                return -1;
        }
        return 0;
}

const char *stub_tls_client(struct MHD_Connection *conn)
{
        gnutls_alert_description_t alert;

        if (!tls.loaded)
                return NULL;
        return verdict(conn, &alert) == 0 ? "verified" : "none";
}

bool stub_tls_refuse(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci;
        gnutls_alert_description_t alert;

        if (!tls.loaded || !tls.require_client || verdict(conn, &alert) == 0)
                return false;
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        /* On MHD's own thread, which owns the session: a two-byte record. */
        if (ci && ci->tls_session)
                gnutls_alert_send((gnutls_session_t)ci->tls_session, GNUTLS_AL_FATAL, alert);
        return true;
}
