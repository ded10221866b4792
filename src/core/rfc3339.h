/*
 * rfc3339 — an RFC 3339 timestamp ("2025-03-01T12:30:00Z",
 * "2025-03-01T20:30:00.250+08:00") to Unix milliseconds, pure. The intake
 * reads a caller's deadline with it, and `tollgate jitter --calls` the times
 * of another system's failure records. Fractions past milliseconds are
 * dropped (not rounded); a leap second (:60) is refused.
 */
#ifndef TG_RFC3339_H
#define TG_RFC3339_H

#include <stddef.h>

#include "core/tg_time.h"

/* Parses exactly len bytes: date "T" (or "t" or " ") time, optional
 * fraction, then "Z"/"z" or "+HH:MM"/"-HH:MM". 0, or TG_EPARSE. */
int rfc3339_parse(const char *text, size_t len, tg_wall_ms *ret_ms);

#endif
