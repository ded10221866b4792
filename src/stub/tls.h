/*
 * The stub's HTTPS: libmicrohttpd with GnuTLS, the certificate and key
 * given as PEM, and optionally a CA whose client certificates it DEMANDS:
 * the handshake fails (a certificate_required or bad_certificate alert)
 * for a client that sends none or one that does not verify, before any
 * request is read — as a real mutual-TLS provider behaves. MHD by itself
 * only asks for a client certificate and leaves the check to the
 * application; the certificate callback below upgrades the session to
 * "required and verified" during the handshake.
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

/* "verified" when the connection presented a client certificate (which the
 * handshake verified), "none" when not, NULL on a plain connection. */
const char *stub_tls_client(struct MHD_Connection *conn);

#endif
