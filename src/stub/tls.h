/*
 * The stub's HTTPS: libmicrohttpd with GnuTLS, the certificate and key
 * given as PEM, and optionally a CA whose client certificates it DEMANDS.
 *
 * A real mutual-TLS provider refuses a client without a valid certificate
 * in its TLS layer, with a fatal alert (certificate_required, unknown_ca,
 * bad_certificate) and no HTTP at all; under TLS 1.3 the client has already
 * written its request when that alert arrives. libmicrohttpd cannot do
 * this itself: it only asks for a certificate, and when a handshake fails
 * it closes the connection without an alert. So the stub asks (MHD's
 * MHD_OPTION_HTTPS_MEM_TRUST), and before it reads anything of the first
 * request on a connection it verifies the certificate and, when there is
 * none or it does not verify, sends that alert and closes: what a client
 * sees is what such a provider sends, and nothing is recorded or executed.
 *
 * One TLS setup per process (GnuTLS's callback carries no user pointer).
 */
#ifndef STUB_TLS_H
#define STUB_TLS_H

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <stdbool.h>

/* Loads the server certificate chain and key. require_client: demand a
 * client certificate that verifies against the CA given to MHD
 * (MHD_OPTION_HTTPS_MEM_TRUST). 0, TG_EINVAL (unreadable PEM, TLS not in
 * this libmicrohttpd), TG_ENOMEM. */
int stub_tls_init(const char *cert_pem, const char *key_pem, bool require_client);
void stub_tls_release(void);

/* The MHD_OPTION_HTTPS_CERT_CALLBACK function (a GnuTLS retrieve function). */
gnutls_certificate_retrieve_function2 *stub_tls_cert_callback(void);

/* "verified" when the connection presented a client certificate that
 * verifies against the CA, "none" when not, NULL on a plain connection. */
const char *stub_tls_client(struct MHD_Connection *conn);

/* With a demanded client certificate: true when conn has none that
 * verifies, after the fatal alert a TLS layer would send was sent (the
 * caller then closes the connection unanswered). */
bool stub_tls_refuse(struct MHD_Connection *conn);

#endif
