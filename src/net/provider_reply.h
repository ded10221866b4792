/*
 * provider_reply — reads the provider's response into the body half of
 * struct provider_reply (core/classify.h): whether the body is a JSON
 * object, and the status, refund id, error code, failure code and
 * retryable mark where the reply map (core/provider_map.h) says they live
 * (PROVIDER.md's .status, .refund_id, .error.code, .failure_code and
 * .error.retryable by default), the status word mapped onto the words
 * classify reads. The transport fills transport and http_status itself;
 * classify() then decides.
 *
 * The body is hostile input. It is bounded (PROVIDER_REPLY_MAX_BODY), parsed
 * strictly (duplicate keys, trailing bytes, NUL bytes and invalid UTF-8 make
 * it "not JSON"), and a field of the wrong type is left "" as if absent. A
 * body that is not a readable JSON object is exactly what classify() treats
 * as malformed: unknown for a POST, no_answer for a query.
 */
#ifndef TG_PROVIDER_REPLY_H
#define TG_PROVIDER_REPLY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/classify.h"
#include "core/provider_map.h"

/* Bodies longer than this are not parsed (the contract's bodies are a few
 * hundred bytes). */
#define PROVIDER_REPLY_MAX_BODY (64 * 1024)

/* Fills reply->body_is_json, error_code, status and refund_id from the len
 * bytes at body (not NUL-terminated, may contain NUL; NULL only with len 0).
 * Leaves transport and http_status alone. The body is only read during the
 * call; nothing is kept.
 *
 * Returns 0 when the body was read, whether or not it turned out to be a JSON
 * object; TG_ERANGE when len > PROVIDER_REPLY_MAX_BODY, in which case the body
 * fields are still set (to "not JSON") and the reply is usable; TG_EINVAL for
 * a NULL reply, or a NULL body with len > 0 (reply untouched). */
int provider_reply_parse_body(const char *body, size_t len, struct provider_reply *reply);

/* Response headers a reply map reads ("header:NAME" sources), as the
 * transport captured them: names borrowed from the map, values
 * NUL-terminated; and the answer's Content-Type (NULL or "": none). */
#define PROVIDER_REPLY_HEADERS 6
struct provider_reply_headers {
        unsigned n;
        const char *name[PROVIDER_REPLY_HEADERS];
        const char *value[PROVIDER_REPLY_HEADERS];
        const char *content_type;
};

/* Whether a Content-Type lets the body be read as JSON: application/json or
 * application/<anything>+json, any case, any parameters; or none at all
 * (NULL or "": PROVIDER.md's bodies are all JSON). */
bool provider_reply_json_type(const char *content_type);

/* Like provider_reply_parse_body(), through map (NULL: the default map)
 * and with the captured headers (may be NULL). Same returns, and one more:
 * TG_EPARSE when the headers' Content-Type is not JSON's
 * (provider_reply_json_type()). A body that declares itself HTML or text
 * is not a clear answer, however JSON it looks: it is not read (the body
 * fields say "not JSON"; header sources are still read) and the reply is
 * usable. */
int provider_reply_read(const struct reply_map *map, const char *body, size_t len,
                        const struct provider_reply_headers *headers, struct provider_reply *reply);

/* provider_reply_read() of a list answer (provider.list_path) for the
 * operation id match: the refunds at the map's list_items, ours the item
 * whose list_match field equals match; reply->list says whether it was
 * found, and the status, refund id and failure code are its item's. Not
 * found: ABSENT when list_more is absent or false, else PARTIAL with
 * list_cursor the last item's refund id ("" when it has none, or one too
 * long for the field: a cut id would start the wrong page; the walk ends
 * there, core/list_walk.h). Items that are not an array (an
 * error body): NONE, read as provider_reply_read() does. Same returns, and
 * TG_EINVAL for an empty match. */
int provider_reply_read_list(const struct reply_map *map, const char *match, const char *body,
                             size_t len, const struct provider_reply_headers *headers,
                             struct provider_reply *reply);

/* provider_reply_read_list() for an operation whose refund id the provider
 * already told us (known_id, NULL or "" when none): an item is ours also
 * when its refund id (the map's refund_id field) is known_id, and a
 * complete list without ours is NOT_YET, never ABSENT: the provider took
 * the refund (a 202 at Checkout.com named its action), so a list that does
 * not show it yet proves nothing was executed no more than a page does.
 * The answer may be a bare array when list_items is "." (the root). */
int provider_reply_read_list_known(const struct reply_map *map, const char *match,
                                   const char *known_id, const char *body, size_t len,
                                   const struct provider_reply_headers *headers,
                                   struct provider_reply *reply);

/* A provider's webhook event (provider.webhook_signature = stripe or
 * checkout): the object at `object` (n == 0: the event itself) is read as a
 * refund answer is (status through the map's words — or, when the map has
 * an event_status, the word at that path from the event's root — refund id,
 * failure code; header sources read nothing), and the text at `match` goes to ret_match (empty:
 * the event names no operation of ours, or its object is missing). 0;
 * TG_EPARSE (not a JSON object, duplicate keys), TG_ERANGE (over
 * PROVIDER_REPLY_MAX_BODY), TG_EINVAL. */
int provider_reply_read_event(const struct reply_map *map, const struct field_source *object,
                              const struct field_source *match, const char *body, size_t len,
                              struct provider_reply *reply, char *ret_match, size_t match_size);

#endif
