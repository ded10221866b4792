/*
 * provider_reply — the provider's JSON response body, read with jansson into
 * the fixed-size fields of struct provider_reply, where the reply map says.
 *
 * Invariants:
 *   - the body fields are reset before anything is read, so a reply never
 *     carries fields of an earlier body; on any decoding doubt the reply says
 *     "not JSON" and no field is trusted;
 *   - at most PROVIDER_REPLY_MAX_BODY bytes are ever given to the parser;
 *     jansson bounds nesting depth itself;
 *   - a body whose Content-Type is not JSON's is not parsed: an HTML page
 *     or a text that happens to look like the contract's JSON is not the
 *     provider's answer;
 *   - duplicate keys are refused (JSON_REJECT_DUPLICATES): with two "status"
 *     members we cannot know which one the provider meant;
 *   - strings are copied with classify_copy_field(): truncated to fit, never
 *     overflowed, cut at an embedded NUL (which jansson refuses anyway
 *     without JSON_ALLOW_NUL);
 *   - jansson types never leave this file.
 */
#include "net/provider_reply.h"

#include <jansson.h>
#include <string.h>
#include <strings.h>

#include "core/tg_error.h"

static void reset_body(struct provider_reply *reply)
{
        reply->body_is_json = false;
        reply->error_code[0] = '\0';
        reply->status[0] = '\0';
        reply->refund_id[0] = '\0';
        reply->failure_code[0] = '\0';
        reply->retryable = TG_FLAG_ABSENT;
        reply->list = REPLY_LIST_NONE;
        reply->key_in_progress = false;
        reply->list_cursor[0] = '\0';
}

/* One step down a path: an object's member by name, or an array's element
 * by index (a step of digits on an object is a member name). */
static json_t *step(json_t *at, const struct field_seg *seg)
{
        if (json_is_array(at) && seg->is_index)
                return json_array_get(at, seg->index);
        if (json_is_object(at))
                return json_object_get(at, seg->name);
        return NULL;
}

/* The first alternative of source that is present, as text: a string (a
 * boolean too when flag: "true"/"false"); a value of another type counts as
 * absent. false when none is present. */
static bool source_text(const struct field_source *source, json_t *root,
                        const struct provider_reply_headers *headers, bool flag, char *dst,
                        size_t size)
{
        for (unsigned a = 0; a < source->n; a++) {
                const struct field_path *fp = &source->alt[a];
                json_t *v = root;

                if (fp->header) {
                        for (unsigned h = 0; headers && h < headers->n; h++) {
                                if (strcasecmp(headers->name[h], fp->header_name) == 0 &&
                                    headers->value[h][0]) {
                                        classify_copy_field(dst, size, headers->value[h],
                                                            strlen(headers->value[h]));
                                        return true;
                                }
                        }
                        continue;
                }
                for (unsigned i = 0; v && i < fp->nseg; i++)
                        v = step(v, &fp->seg[i]);
                if (json_is_string(v)) {
                        classify_copy_field(dst, size, json_string_value(v), json_string_length(v));
                        return true;
                }
                if (flag && json_is_boolean(v)) {
                        snprintf(dst, size, "%s", json_is_true(v) ? "true" : "false");
                        return true;
                }
        }
        return false;
}

static bool space(char c)
{
        return c == ' ' || c == '\t';
}

bool provider_reply_json_type(const char *type)
{
        static const char app[] = "application/";
        const char *sub, *end;
        size_t n;

        if (!type || !type[0])
                return true;
        while (space(*type))
                type++;
        if (strncasecmp(type, app, strlen(app)) != 0)
                return false;
        sub = type + strlen(app);
        end = sub + strcspn(sub, ";");
        while (end > sub && space(end[-1]))
                end--;
        n = (size_t)(end - sub);
        if (n == 4 && strncasecmp(sub, "json", 4) == 0)
                return true;
        /* a structured suffix (RFC 6839) after a subtype of its own */
        return n > 5 && strncasecmp(end - 5, "+json", 5) == 0;
}

/* The value at a one-path source inside root (NULL: none). */
static json_t *source_value(const struct field_source *source, json_t *root)
{
        json_t *v = root;

        if (source->n == 0 || source->alt[0].header)
                return NULL;
        for (unsigned i = 0; v && i < source->alt[0].nseg; i++)
                v = step(v, &source->alt[0].seg[i]);
        return v;
}

/* An item of a list is ours by its match field, or by the refund id the
 * provider told us. */
static bool item_is_ours(const struct reply_map *map, json_t *item, const char *match,
                         const char *known_id)
{
        char text[128];

        if (!json_is_object(item))
                return false;
        if (source_text(&map->list_match, item, NULL, false, text, sizeof(text)) &&
            strcmp(text, match) == 0)
                return true;
        return known_id && known_id[0] &&
               source_text(&map->refund_id, item, NULL, false, text, sizeof(text)) &&
               strcmp(text, known_id) == 0;
}

/* A list answer: the item whose match field is ours (its fields are read
 * as the refund's: *ret_item), or the verdict that it is not there. A body
 * whose items are no array is no list (an error body): NONE, read as
 * usual. Not there and complete: ABSENT, or NOT_YET when the provider
 * had told us the refund's id (known_id). */
static enum reply_list list_find(const struct reply_map *map, json_t *root, const char *match,
                                 const char *known_id, const struct provider_reply_headers *headers,
                                 json_t **ret_item, char *cursor, size_t cursor_size)
{
        json_t *items = source_value(&map->list_items, root), *item = NULL;
        char more[16];
        size_t i;

        if (!json_is_array(items))
                return REPLY_LIST_NONE;
        json_array_foreach(items, i, item)
        {
                if (item_is_ours(map, item, match, known_id)) {
                        *ret_item = item;
                        return REPLY_LIST_FOUND;
                }
        }
        if (!json_is_object(root) ||
            !source_text(&map->list_more, root, headers, true, more, sizeof(more)) ||
            reply_flag_parse(more) == TG_FLAG_FALSE)
                /* complete; a bare array has no "more" to say */
                return known_id && known_id[0] ? REPLY_LIST_NOT_YET : REPLY_LIST_ABSENT;
        /* more pages: where the next starts (the last item's id); a flag
         * that is not a clear "false" is not "complete" */
        item = json_array_get(items, json_array_size(items) - 1);
        if (!json_is_object(item) ||
            !source_text(&map->refund_id, item, NULL, false, cursor, cursor_size) ||
            strlen(cursor) >= cursor_size - 1)
                cursor[0] = '\0'; /* none, or one that may be cut: no next page */
        return REPLY_LIST_PARTIAL;
}

static int read_reply(const struct reply_map *map, const char *match, const char *known_id,
                      const char *body, size_t len, const struct provider_reply_headers *headers,
                      struct provider_reply *reply)
{
        struct reply_map fallback;
        json_error_t error;
        json_t *root = NULL;
        char raw[sizeof(reply->status)], flag[16];
        int rc = 0;

        if (!reply || (!body && len > 0))
                return TG_EINVAL;
        if (!map) {
                reply_map_default(&fallback); /* PROVIDER.md's */
                map = &fallback;
        }
        reset_body(reply);
        if (len > PROVIDER_REPLY_MAX_BODY)
                return TG_ERANGE;
        if (headers && !provider_reply_json_type(headers->content_type)) {
                /* not a JSON answer by its own word: only headers are read */
                len = 0;
                rc = TG_EPARSE;
        }
        if (len > 0) {
                root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &error);
                /* a bare array only where a list answer is one ("." items) */
                bool bare = match && map->list_items.n == 1 && !map->list_items.alt[0].header &&
                            map->list_items.alt[0].nseg == 0 && json_is_array(root);
                if (root && !json_is_object(root) && !bare) {
                        json_decref(root);
                        root = NULL;
                }
        }
        reply->body_is_json = root != NULL;
        /* a list answer: the refund's fields are its item's */
        json_t *item = root;
        if (root && match)
                reply->list = list_find(map, root, match, known_id, headers, &item,
                                        reply->list_cursor, sizeof(reply->list_cursor));
        if (reply->list == REPLY_LIST_ABSENT || reply->list == REPLY_LIST_PARTIAL ||
            reply->list == REPLY_LIST_NOT_YET)
                item = NULL;
        /* the fields of an answer that is an array are its items' only */
        json_t *top = json_is_object(root) ? root : NULL;
        if (item == root && !top)
                item = NULL;
        /* Header sources are read whatever the body; body paths need one.
         * A status may be a boolean (Checkout.com's "approved"): the words
         * "true" and "false". */
        if (source_text(&map->status, item, headers, true, raw, sizeof(raw)))
                reply_map_status(map, raw, reply->status, sizeof(reply->status));
        source_text(&map->refund_id, item, headers, false, reply->refund_id,
                    sizeof(reply->refund_id));
        source_text(&map->error_code, top, headers, false, reply->error_code,
                    sizeof(reply->error_code));
        source_text(&map->failure_code, item, headers, false, reply->failure_code,
                    sizeof(reply->failure_code));
        for (unsigned i = 0; reply->error_code[0] && i < map->in_progress.n; i++)
                if (strcmp(reply->error_code, map->in_progress.value[i]) == 0)
                        reply->key_in_progress = true;
        if (source_text(&map->retryable, top, headers, true, flag, sizeof(flag)))
                reply->retryable = reply_flag_parse(flag);
        json_decref(root);
        return rc;
}

int provider_reply_read(const struct reply_map *map, const char *body, size_t len,
                        const struct provider_reply_headers *headers, struct provider_reply *reply)
{
        return read_reply(map, NULL, NULL, body, len, headers, reply);
}

int provider_reply_read_list(const struct reply_map *map, const char *match, const char *body,
                             size_t len, const struct provider_reply_headers *headers,
                             struct provider_reply *reply)
{
        return provider_reply_read_list_known(map, match, NULL, body, len, headers, reply);
}

int provider_reply_read_list_known(const struct reply_map *map, const char *match,
                                   const char *known_id, const char *body, size_t len,
                                   const struct provider_reply_headers *headers,
                                   struct provider_reply *reply)
{
        if (!match || !match[0])
                return TG_EINVAL;
        return read_reply(map, match, known_id, body, len, headers, reply);
}

int provider_reply_read_event(const struct reply_map *map, const struct field_source *object,
                              const struct field_source *match, const char *body, size_t len,
                              struct provider_reply *reply, char *ret_match, size_t match_size)
{
        json_error_t error;
        json_t *root, *obj;
        char raw[sizeof(reply->status)];

        if (!map || !object || !match || !reply || !ret_match || match_size == 0 ||
            (!body && len > 0))
                return TG_EINVAL;
        reset_body(reply);
        ret_match[0] = '\0';
        if (len > PROVIDER_REPLY_MAX_BODY)
                return TG_ERANGE;
        root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &error);
        if (!json_is_object(root)) {
                json_decref(root);
                return TG_EPARSE;
        }
        reply->body_is_json = true;
        obj = object->n ? source_value(object, root) : root;
        if (json_is_object(obj)) {
                source_text(match, obj, NULL, false, ret_match, match_size);
                /* the outcome: the event's own word (Checkout.com's type),
                 * else the object's status */
                if (map->event_status.n
                        ? source_text(&map->event_status, root, NULL, false, raw, sizeof(raw))
                        : source_text(&map->status, obj, NULL, true, raw, sizeof(raw)))
                        reply_map_status(map, raw, reply->status, sizeof(reply->status));
                source_text(&map->refund_id, obj, NULL, false, reply->refund_id,
                            sizeof(reply->refund_id));
                source_text(&map->failure_code, obj, NULL, false, reply->failure_code,
                            sizeof(reply->failure_code));
        }
        json_decref(root);
        return 0;
}

int provider_reply_parse_body(const char *body, size_t len, struct provider_reply *reply)
{
        return provider_reply_read(NULL, body, len, NULL, reply);
}
