/*
 * retry_after — reads an HTTP Retry-After value (RFC 9110 10.2.3): either
 * delta-seconds (1*DIGIT) or an HTTP-date. The date itself is parsed by a
 * function the caller passes in (src/net passes curl_getdate), so this module
 * stays pure and no date parser is written here.
 *
 * Deliberate handling of hostile values:
 *   - surrounding spaces/tabs are ignored; anything else (signs, fractions,
 *     units, embedded NUL, empty) is TG_EPARSE: the caller treats the header
 *     as absent;
 *   - a delta that overflows, or any delay above cap_ms, is clamped to cap_ms
 *     (the provider asked for "a long time"; we wait our maximum, then ask);
 *   - an HTTP-date in the past (or now) is a delay of 0;
 *   - more than one value (two Retry-After headers, or one header with a
 *     comma-separated list of delays): the longest valid one, the safer
 *     reading, since the provider is then never asked again sooner than any
 *     of its values said (the cap bounds it); invalid ones are ignored.
 */
#ifndef TG_RETRY_AFTER_H
#define TG_RETRY_AFTER_H

#include <stddef.h>
#include <stdint.h>

#include "core/tg_time.h"

/* Parses an HTTP-date (NUL-terminated) into Unix seconds. Returns 0 or a
 * negative code. */
typedef int (*retry_after_date_fn)(const char *text, int64_t *ret_epoch_s);

/* Default cap: 1 hour. */
#define RETRY_AFTER_DEFAULT_CAP_MS (3600LL * 1000LL)

/* The longest value worth keeping: an HTTP-date is 29 bytes, and a delta
 * of more digits than this is past any cap anyway. */
#define RETRY_AFTER_VALUE_MAX 63

/* value: len bytes, not necessarily NUL-terminated (may contain NUL).
 * now: wall time the response arrived. date_fn may be NULL (then only
 * delta-seconds are accepted). On success *ret_delay_ms is in [0, cap_ms].
 * Returns 0, TG_EPARSE, or TG_EINVAL (cap_ms < 0, NULL value with len > 0). */
int retry_after_parse(const char *value, size_t len, tg_wall_ms now, int64_t cap_ms,
                      retry_after_date_fn date_fn, int64_t *ret_delay_ms);

/* Every value of an answer's Retry-After headers: `values` holds len bytes,
 * one header's value per line ('\n' between them), and a line of digits,
 * commas and spaces is read as a list of delays ("5, 10": a proxy folded two
 * headers into one). The delay is the longest valid one, in [0, cap_ms].
 * Returns 0, TG_EPARSE (no valid value: the caller treats Retry-After as
 * absent), or TG_EINVAL as retry_after_parse(). */
int retry_after_parse_all(const char *values, size_t len, tg_wall_ms now, int64_t cap_ms,
                          retry_after_date_fn date_fn, int64_t *ret_delay_ms);

#endif
