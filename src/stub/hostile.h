/*
 * A hostile provider (issue 16): what each hostile mode (timeline.h,
 * --help) makes of the answer the stub would have given, and the
 * libmicrohttpd response that puts it on the wire.
 *
 *   reset-body  the status line, the headers (Content-Length of the whole
 *               body) and part of the body, then a TCP reset
 *   truncated   the body cut in half (Content-Length of the cut): complete
 *               HTTP, broken JSON
 *   invalid     a JSON-looking body that is not JSON (a trailing comma)
 *   huge        the JSON body padded to N bytes, streamed: never in memory
 *   trickle     the status line and headers at once, then the body one byte
 *               every MS ms
 *   ctype       the JSON body under another Content-Type, or none
 *   contra      a status and a body that say different things
 *   http10      "HTTP/1.0", Connection: close, no Content-Length, no
 *               chunking: the close ends the body (cut: ends it half way)
 *   redirect    3xx with a Location, nothing executed
 *
 * Invariants: an answer is a plain value built once (at the request's
 * finish) and then only read; the streamed modes hold the answer's few
 * hundred bytes whatever the body's size on the wire; a trickle never
 * blocks the server's thread (it suspends the connection between bytes).
 */
#ifndef STUB_HOSTILE_H
#define STUB_HOSTILE_H

#include "core/tg_time.h"
#include "timeline.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HOSTILE_LOCATION_MAX 300

struct hostile_answer {
        int status;
        char *body; /* malloc'd; huge: the JSON around the pad (pad_len bytes at pad_at) */
        size_t len;
        uint64_t pad_at, pad_len;
        const char *content_type; /* static or the spec's copy; NULL: no header */
        char ctype[STUB_WORD_MAX + 1];
        char location[HOSTILE_LOCATION_MAX]; /* "": no Location */
        uint64_t total;                      /* the body's bytes: len + pad_len */
        uint64_t stop_at;                    /* bytes of the body sent before the end */
        bool stream;                         /* through a content reader, not a buffer */
        bool reset;                          /* end with a TCP reset */
        bool http10;                         /* HTTP/1.0, no length: the close ends it */
        int64_t trickle_ns;                  /* > 0: one byte every trickle_ns */
};

/*
 * Builds the answer of hostile mode spec from the stub's own answer (status,
 * body: a JSON object, or NULL when there was none, as for a redirect).
 * path: the request's path (redirect: Location is "/moved" + path);
 * stripe: the shape's words (pending for processing, its error body).
 * Returns 0 or TG_ENOMEM; *ret is untouched on failure. Release with
 * hostile_answer_release().
 */
int hostile_answer_make(const struct stub_mode_spec *spec, bool stripe, int status,
                        const char *body, const char *path, struct hostile_answer *ret);
void hostile_answer_release(struct hostile_answer *a);

/* Copies the answer's body bytes [pos, pos + n) to buf (the pad included). */
void hostile_body_at(const struct hostile_answer *a, uint64_t pos, char *buf, size_t n);

struct MHD_Response;

/*
 * What a streamed answer needs of the server: wait(owner, due) suspends the
 * connection until due (the content reader is called again after it);
 * woke(owner) is called at the first reader call after a wait and says
 * whether the server gave up on the request meanwhile (shutdown).
 */
struct hostile_hooks {
        void (*wait)(void *owner, tg_mono_ns due);
        bool (*woke)(void *owner);
        void (*reset)(void *owner); /* the connection ends with a RST, no FIN */
        void *owner;
};

/*
 * The response for answer a (copied: the response owns what it needs),
 * its status line's version, Content-Type and Location set; NULL when out
 * of memory. The caller queues it with a->status and destroys its
 * reference as usual.
 */
struct MHD_Response *hostile_response(const struct hostile_answer *a,
                                      const struct hostile_hooks *hooks);

#endif
