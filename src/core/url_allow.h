/*
 * url_allow — whether a URL a caller hands in (a refund's `notify_url`) is
 * one the operator allowed (`[notify] allow`, a list of URL prefixes). Pure:
 * no I/O, no DNS; the URL is judged as written.
 *
 * A URL is taken only in one plain shape: `http://` or `https://`, a host
 * (a name, an IPv4 address or a bracketed IPv6 one) with an optional port,
 * then an optional path and query; printable ASCII, no user info (`@`), no
 * fragment, at most URL_ALLOW_MAX bytes. A URL is under a prefix when the
 * scheme, the host (ignoring case) and the port (80 and 443 when not
 * written) are the same, and the URL's path and query start with the
 * prefix's; a prefix path that does not end in '/' must end where a path
 * segment or the query does ("/hooks" allows "/hooks" and "/hooks/x", never
 * "/hooksevil").
 */
#ifndef TG_URL_ALLOW_H
#define TG_URL_ALLOW_H

#include <stddef.h>

#define URL_ALLOW_MAX 512 /* bytes of a URL, its NUL not counted */

/* 0 when url has the shape above, else TG_EINVAL. */
int url_allow_check(const char *url);

/* 0 when url is under one of the n prefixes (each of the shape above);
 * TG_EINVAL when url has not the shape; TG_ENOTFOUND when it is under none. */
int url_allow_match(const char *url, const char *const *prefixes, size_t n);

#endif
