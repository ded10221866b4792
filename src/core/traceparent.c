/*
 * traceparent — W3C trace context, parsed, started and continued. See the
 * header for the rules. Everything written here is lower-case hex of the
 * exact lengths, so a stored traceparent is always 55 bytes.
 */
#include "core/traceparent.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/encode.h"
#include "core/tg_error.h"

static bool lower_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

static bool all_zero(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (s[i] != '0')
                        return false;
        return true;
}

int traceparent_parse(const char *text, size_t len, struct trace_context *ret_ctx)
{
        struct trace_context c;
        unsigned char flags = 0;

        /* 00-<32>-<16>-<2>: the dashes at 2, 35 and 52 */
        if (!text || len < TG_TRACEPARENT_MAX || text[2] != '-' || text[35] != '-' ||
            text[52] != '-')
                return TG_EPARSE;
        if (!lower_hex(text, 2) || !lower_hex(text + 3, TG_TRACE_ID_MAX) ||
            !lower_hex(text + 36, TG_SPAN_ID_MAX) || !lower_hex(text + 53, 2))
                return TG_EPARSE;
        if (memcmp(text, "ff", 2) == 0)
                return TG_EPARSE;
        /* version 00 is exactly 55 bytes; a later one may go on after a '-' */
        if (memcmp(text, "00", 2) == 0 ? len != TG_TRACEPARENT_MAX
                                       : len > TG_TRACEPARENT_MAX && text[55] != '-')
                return TG_EPARSE;
        if (all_zero(text + 3, TG_TRACE_ID_MAX) || all_zero(text + 36, TG_SPAN_ID_MAX))
                return TG_EPARSE;
        memcpy(c.trace_id, text + 3, TG_TRACE_ID_MAX);
        c.trace_id[TG_TRACE_ID_MAX] = '\0';
        memcpy(c.span_id, text + 36, TG_SPAN_ID_MAX);
        c.span_id[TG_SPAN_ID_MAX] = '\0';
        (void)encode_hex_decode(text + 53, &flags, 1); /* lower-case hex, checked above */
        c.flags = flags;
        *ret_ctx = c;
        return 0;
}

void traceparent_format(const struct trace_context *ctx, char out[TG_TRACEPARENT_MAX + 1])
{
        snprintf(out, TG_TRACEPARENT_MAX + 1, "00-%.32s-%.16s-%02x", ctx->trace_id, ctx->span_id,
                 ctx->flags & 0xffu);
}

/* 16 hex digits of a non-zero 64-bit draw. */
static void hex64(struct tg_rng *rng, char out[17])
{
        uint64_t v;

        do {
                v = tg_rng_next(rng);
        } while (v == 0);
        snprintf(out, 17, "%016llx", (unsigned long long)v);
}

void traceparent_span_id(struct tg_rng *rng, char out[TG_SPAN_ID_MAX + 1])
{
        hex64(rng, out);
}

void traceparent_new(struct tg_rng *rng, struct trace_context *ret_ctx)
{
        struct trace_context c;

        /* two non-zero halves: the trace id is never all zeros */
        hex64(rng, c.trace_id);
        hex64(rng, c.trace_id + 16);
        hex64(rng, c.span_id);
        c.flags = 1;
        *ret_ctx = c;
}

int traceparent_child(const char *stored, const char *span_id, char out[TG_TRACEPARENT_MAX + 1])
{
        struct trace_context c;
        int r;

        if (!stored || !span_id || strlen(span_id) != TG_SPAN_ID_MAX ||
            !lower_hex(span_id, TG_SPAN_ID_MAX) || all_zero(span_id, TG_SPAN_ID_MAX))
                return TG_EPARSE;
        r = traceparent_parse(stored, strnlen(stored, TG_TRACEPARENT_MAX + 1), &c);
        if (r < 0)
                return r;
        memcpy(c.span_id, span_id, TG_SPAN_ID_MAX + 1);
        traceparent_format(&c, out);
        return 0;
}
