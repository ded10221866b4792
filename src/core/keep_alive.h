/*
 * keep_alive — reads the timeout of an HTTP Keep-Alive header ("timeout=5,
 * max=100": RFC 2068 19.7.1.1, as Apache and others still send it): how
 * long the server keeps an idle connection open. The transport stops
 * reusing a connection well before that, since a request sent as the
 * server closes the connection meets a reset (net/transport_pool.c).
 *
 * Deliberate handling of hostile values: parameter names are matched
 * without regard to case, spaces and tabs around names, '=' and values are
 * ignored, a quoted value is read without its quotes, parameters other
 * than timeout are skipped; a timeout that is not 1*DIGIT is TG_EPARSE (the
 * header is then treated as absent), and one past KEEP_ALIVE_MAX_S is cut
 * to it. Two timeout parameters: the shorter, the safer reading.
 */
#ifndef TG_KEEP_ALIVE_H
#define TG_KEEP_ALIVE_H

#include <stddef.h>
#include <stdint.h>

/* Longer is no help: libcurl drops connections idle for 118 s anyway. */
#define KEEP_ALIVE_MAX_S 3600

/* value: len bytes (not NUL-terminated, may hold NUL). 0 and *ret_ms set
 * (in [0, KEEP_ALIVE_MAX_S * 1000]), or TG_EPARSE (no valid timeout
 * parameter; *ret_ms untouched), or TG_EINVAL (NULL value with len > 0). */
int keep_alive_timeout_ms(const char *value, size_t len, int64_t *ret_ms);

#endif
