/*
 * The stub's TLS (see tls.h). Invariants: the certificate and key are
 * loaded once, before MHD starts, and never change; a session that asks
 * for a client certificate requires it and verifies it in the handshake.
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
        (void)req_ca_rdn;
        (void)nreqs;
        (void)pk_algos;
        (void)pk_algos_length;
        if (tls.require_client) {
                /* The server's certificate is chosen while the ClientHello is
                 * processed, before the CertificateRequest is written: the
                 * moment to make the request a requirement and to have the
                 * client's certificate verified in the handshake itself. */
                gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
                gnutls_session_set_verify_cert(session, NULL, 0);
        }
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

const char *stub_tls_client(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci;
        unsigned int n = 0;

        if (!tls.loaded)
                return NULL;
        ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        if (!ci || !ci->tls_session)
                return "none";
        return gnutls_certificate_get_peers((gnutls_session_t)ci->tls_session, &n) && n > 0
                   ? "verified"
                   : "none";
}
