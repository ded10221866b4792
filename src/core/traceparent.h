/*
 * traceparent — W3C Trace Context (https://www.w3.org/TR/trace-context/),
 * the `traceparent` header, pure: parsing a caller's, starting a new trace,
 * and the child span of each call tollgate makes for an operation. The
 * random ids come from the caller's tg_rng, so tests replay them.
 *
 *   traceparent = version "-" trace-id "-" parent-id "-" trace-flags
 *   version 00: "00-" 32 hex "-" 16 hex "-" 2 hex, lower case, 55 bytes.
 *
 * Rules kept (the spec's): a trace id or parent id of all zeros is invalid,
 * version ff is invalid, upper-case hex is invalid; a version above 00 is
 * read by its first four fields when they are followed by the end or a '-'
 * (a later version may append fields). An invalid header is ignored: the
 * receiver starts a new trace, it does not refuse the request.
 */
#ifndef TG_TRACEPARENT_H
#define TG_TRACEPARENT_H

#include <stddef.h>
#include <stdint.h>

#include "core/operation.h"
#include "core/rng.h"

struct trace_context {
        char trace_id[TG_TRACE_ID_MAX + 1]; /* 32 lower-case hex */
        char span_id[TG_SPAN_ID_MAX + 1];   /* 16 lower-case hex: the parent of what follows */
        unsigned flags;                     /* trace-flags (bit 0: sampled) */
};

/* Parses a traceparent header value of len bytes. 0, or TG_EPARSE (the
 * caller starts a new trace instead). */
int traceparent_parse(const char *text, size_t len, struct trace_context *ret_ctx);

/* Writes the version-00 header of ctx: 55 bytes and a NUL. */
void traceparent_format(const struct trace_context *ctx, char out[TG_TRACEPARENT_MAX + 1]);

/* A new trace (random trace id and span id, never all zeros), sampled. */
void traceparent_new(struct tg_rng *rng, struct trace_context *ret_ctx);

/* A random span id (16 hex, never all zeros). */
void traceparent_span_id(struct tg_rng *rng, char out[TG_SPAN_ID_MAX + 1]);

/* The child of a stored traceparent: same trace and flags, span_id as its
 * parent id. TG_EPARSE when the stored text is not a traceparent. */
int traceparent_child(const char *stored, const char *span_id, char out[TG_TRACEPARENT_MAX + 1]);

#endif
