/*
 * Fault modes and the scripted timeline of phases that selects them. Pure
 * code: the caller passes the elapsed monotonic time and the random source.
 *
 * Timeline text: phases separated by ';' or new lines, each
 *     MODE[:PARAM] [DURATION]
 * DURATION is a number with unit ms, s, m or h (bare number = seconds); a
 * phase without one lasts forever and must be the last. After the last timed
 * phase the stub is in mode "fast". '#' starts a comment up to the end of line.
 */
#ifndef STUB_TIMELINE_H
#define STUB_TIMELINE_H

#include "core/rng.h"
#include "core/tg_time.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STUB_PHASES_MAX 64

enum stub_mode {
        STUB_FAST = 0,
        STUB_SLOW,
        STUB_DROP,
        STUB_REJECT,
        STUB_UNAVAILABLE,
        STUB_LIMITED,
        STUB_E500,
        STUB_PROCESSING,
        STUB_FAIL,
        STUB_REFUSE,
        STUB_CALLS, /* each refund closes at its K-th call: POST 500, queries processing */
        /* A hostile provider (issue 16): each executes (but redirect) and
         * answers in a way a careless client could misread. */
        STUB_RESET_BODY, /* status line, headers, part of the body, then a TCP reset */
        STUB_TRUNCATED,  /* the body cut in half: broken JSON, complete HTTP */
        STUB_INVALID,    /* a body that is not JSON */
        STUB_HUGE,       /* a valid body far larger than any client bound, streamed */
        STUB_TRICKLE,    /* the body one byte at a time */
        STUB_CTYPE,      /* the JSON body under another Content-Type */
        STUB_CONTRA,     /* a status and a body that contradict each other */
        STUB_HTTP10,     /* an HTTP/1.0 answer: no keep-alive, no chunking, no length */
        STUB_REDIRECT,   /* 3xx with Location, nothing executed */
        STUB_MIX,
        STUB_MODE_COUNT
};

/* fail: the failure code a query reports when the mode gives none. */
#define STUB_FAILURE_CODE_DEFAULT "insufficient_funds"
#define STUB_FAILURE_CODE_MAX     63

#define STUB_WORD_MAX 63

/* contra: what the body says, whatever the status. */
enum stub_contra_body {
        STUB_CONTRA_SUCCEEDED,
        STUB_CONTRA_FAILED,
        STUB_CONTRA_PROCESSING,
        STUB_CONTRA_ERROR,
};

/* Defaults of the hostile modes' parameters (--help has them all). */
#define STUB_HUGE_DEFAULT     (64LL * 1024 * 1024)
#define STUB_HUGE_MAX         (1LL << 40)
#define STUB_TRICKLE_DEFAULT  100
#define STUB_REDIRECT_DEFAULT 307
#define STUB_CTYPE_DEFAULT    "text/html"

/* Retry-After forms: a number of seconds, an HTTP-date that many seconds ahead, none. */
enum stub_ra { STUB_RA_DEFAULT = 0, STUB_RA_SECONDS, STUB_RA_DATE, STUB_RA_NONE };

/*
 * One mode with its parameters; -1 (or STUB_RA_DEFAULT) means "use the
 * stub's default". A plain value, copied freely.
 */
struct stub_mode_spec {
        enum stub_mode mode;
        int64_t delay_ms;      /* slow, drop, e500: wait before executing */
        int64_t processing_ms; /* processing: queries say "processing" this long */
        enum stub_ra ra_form;  /* unavailable, limited */
        int64_t ra_seconds;
        bool has_weights; /* mix: weights given inline */
        int weights[STUB_MODE_COUNT];
        /* fail: the provider's failure code, 1..STUB_FAILURE_CODE_MAX chars
         * of [A-Za-z0-9_.-]; "" means the default. */
        char failure_code[STUB_FAILURE_CODE_MAX + 1];
        /* calls: the call (POST or query) of a key that answers its final
         * outcome, 1..STUB_CALLS_MAX; -1: STUB_CALLS_DEFAULT. */
        int64_t close_calls;
        /* The hostile modes' number, -1: the default. reset-body: body
         * bytes before the reset (default half); truncated, invalid, contra,
         * redirect: the status (default: the normal answer's; contra 201;
         * redirect 307); huge: body bytes; trickle: ms between bytes. */
        int64_t hostile;
        /* ctype: the Content-Type sent, "none" for no header, "" the
         * default; contra: the body (enum stub_contra_body); http10: true
         * to cut the body in half (the close still looks like its end). */
        char ctype[STUB_WORD_MAX + 1];
        enum stub_contra_body contra;
        bool cut;
};
#define STUB_CALLS_DEFAULT 2
#define STUB_CALLS_MAX     100

struct stub_phase {
        struct stub_mode_spec spec;
        tg_mono_ns duration_ns; /* TG_MONO_NEVER: forever */
};

/* A parsed timeline; a plain value with a fixed bound of phases. */
struct stub_timeline {
        size_t n;
        struct stub_phase phases[STUB_PHASES_MAX];
};

const char *stub_mode_name(enum stub_mode mode);
/* Whether a mode may be the mode of queries (--query-mode). */
bool stub_mode_for_query(enum stub_mode mode);
/* Whether a mode answers through hostile.c (one of the hostile modes). */
bool stub_mode_hostile(enum stub_mode mode);

/* Returns 0 and the mode for a name, TG_EINVAL for an unknown name. */
int stub_mode_from_name(const char *name, size_t len, enum stub_mode *ret_mode);

/*
 * Parses "MODE[:PARAM]" (see --help). Returns 0, or TG_EINVAL with a static
 * text in *why.
 */
int stub_mode_parse(const char *text, size_t len, const char **why,
                    struct stub_mode_spec *ret_spec);

/*
 * Parses mix weights "fast=70,slow=10,...". Members may be any per-request
 * mode (not refuse or mix); the weights must sum to more than 0.
 */
int stub_mix_parse(const char *text, size_t len, const char **why,
                   int ret_weights[STUB_MODE_COUNT]);
/* Draws one mode with the given weights; reproducible for a seeded rng. */
enum stub_mode stub_mix_draw(const int weights[STUB_MODE_COUNT], struct tg_rng *rng);

/*
 * Parses a timeline text; every duration is multiplied by time_scale (> 0),
 * so one script replays ten minutes in one. Returns 0 or TG_EINVAL with *why.
 */
int stub_timeline_parse(const char *text, double time_scale, const char **why,
                        struct stub_timeline *ret_timeline);

/* A timeline of one mode, forever. */
void stub_timeline_single(const struct stub_mode_spec *spec, struct stub_timeline *ret_timeline);

/*
 * The mode in force elapsed ns after the timeline started, the index of its
 * phase (n for the "fast after the end" tail) and the elapsed time at which
 * the phase ends (TG_MONO_NEVER if it does not).
 */
void stub_timeline_at(const struct stub_timeline *tl, tg_mono_ns elapsed,
                      struct stub_mode_spec *ret_spec, size_t *ret_phase, tg_mono_ns *ret_end);

/* Writes the timeline back as text (for /_stub/state). */
void stub_timeline_format(const struct stub_timeline *tl, char *buf, size_t cap);
/* Writes one mode spec as "MODE[:PARAM]". */
void stub_mode_format(const struct stub_mode_spec *spec, char *buf, size_t cap);

#endif
