/*
 * api_feed — GET /v1/events?after=ID&limit=N: the pull alternative to
 * [notify]'s deliveries, for callers that cannot receive them. The same
 * events with the same ids (store/store_events.h), oldest first; a caller
 * keeps the last id it handled and asks for what came after it
 * (`next_after`). Ids grow with commit order, so an `after` cursor never
 * skips an event that commits later with a lower id.
 *
 * An intake-only credential reads the events of the refunds it submitted
 * and of those without an owner (api_seen_owner), as it reads the refunds.
 *
 * Each event also says where its delivery stands (`delivery`, `attempts`,
 * `last_error`), which is how an operator sees a parked one.
 *
 * Long poll (`wait=SECONDS`, at most FEED_WAIT_MAX_S): with nothing after
 * `after`, the request is held (http_response.hold_ms: its connection is
 * suspended, no thread and no store transaction wait for it) and looked at
 * again every FEED_RECHECK_MS, one short read each time, until an event
 * commits (answered with it) or the wait ends (an empty page). The events
 * may be committed by another process (a `dispatch` beside this `api`), so
 * the store is what is looked at, not an in-process signal.
 *
 * POST /v1/events/{id}/redeliver (scope operator) makes an event due again
 * now, its attempts from zero, as `tollgate events redeliver` does; the
 * change and its row in the account's audit trail, naming the
 * authenticated principal (never a name from a body), commit together
 * before the reply (store_event_redeliver).
 */
#include <string.h>

#include "core/tg_error.h"
#include "daemon/api_int.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "store/store_events.h"

#define FEED_LIMIT_DEF  100
#define FEED_LIMIT_MAX  1000
#define FEED_WAIT_MAX_S 30
#define FEED_RECHECK_MS 200

static const struct {
        const char *word;
        enum store_event_filter filter;
} delivery_words[] = {
    {"any", STORE_EVENTS_ALL},
    {"due", STORE_EVENTS_DUE},
    {"parked", STORE_EVENTS_PARKED},
    {"undelivered", STORE_EVENTS_UNDELIVERED},
};

int api_get_events(struct api *api, const struct http_request *req, struct http_response *res,
                   const char *rid)
{
        enum store_event_filter filter = STORE_EVENTS_ALL;
        struct store_event *buf;
        int64_t after = 0, limit = 0, wait_s = 0;
        char word[16];
        unsigned n = 0;
        json_t *arr;
        int r;

        if (api_int_arg(req, "after", 0, 0, INT64_MAX, &after) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "after",
                                      "must be an event id (an integer >= 0)");
        if (api_int_arg(req, "limit", FEED_LIMIT_DEF, 1, FEED_LIMIT_MAX, &limit) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "limit",
                                      "must be an integer in [1, 1000]");
        if (api_int_arg(req, "wait", 0, 0, FEED_WAIT_MAX_S, &wait_s) < 0)
                return api_reply_code(res, rid, 400, "invalid_parameter", "wait",
                                      "must be a number of seconds in [0, 30]");
        r = http_request_arg(req, "delivery", word, sizeof(word));
        if (r == 0) {
                size_t i = 0;

                while (i < sizeof(delivery_words) / sizeof(delivery_words[0]) &&
                       strcmp(word, delivery_words[i].word) != 0)
                        i++;
                if (i == sizeof(delivery_words) / sizeof(delivery_words[0]))
                        r = TG_EINVAL;
                else
                        filter = delivery_words[i].filter;
        }
        if (r < 0 && r != TG_ENOTFOUND)
                return api_reply_code(res, rid, 400, "invalid_parameter", "delivery",
                                      "must be one of any, due, parked, undelivered");
        buf = calloc((size_t)limit, sizeof(*buf));
        arr = json_array();
        if (!buf || !arr) {
                free(buf);
                json_decref(arr);
                return TG_ENOMEM;
        }
        /* an intake-only credential: the events of its own refunds (and of
         * those without an owner), as it reads the refunds themselves */
        r = api_seen_owner(api)
                ? store_events_list_owned(api->store, api_seen_owner(api), after, filter,
                                          (unsigned)limit, buf, &n)
                : store_events_list(api->store, after, filter, (unsigned)limit, buf, &n);
        for (unsigned i = 0; r == 0 && i < n; i++) {
                json_t *o = notify_event_json_delivery(&buf[i]);

                if (!o) {
                        r = TG_ENOMEM;
                        break;
                }
                json_array_append_new(arr, o);
                after = buf[i].id;
        }
        free(buf);
        if (r < 0) {
                json_decref(arr);
                return r == TG_ENOMEM ? r : api_reply_store_error(res, rid, r);
        }
        if (n == 0 && req->held_ms < wait_s * 1000) {
                int64_t left = wait_s * 1000 - req->held_ms;

                json_decref(arr);
                res->hold_ms = (unsigned)(left < FEED_RECHECK_MS ? left : FEED_RECHECK_MS);
                return 0; /* nothing yet: looked at again in hold_ms */
        }
        return api_reply_json(
            res, 200, json_pack("{s:o, s:I}", "events", arr, "next_after", (json_int_t)after));
}

/* ---- re-delivery ------------------------------------------------------------- */

int api_event_id(const char *text, size_t len, int64_t *ret_id)
{
        int64_t v = 0;

        if (len == 0 || len > 18)
                return TG_EINVAL; /* 18 digits: no overflow */
        for (size_t i = 0; i < len; i++) {
                if (text[i] < '0' || text[i] > '9')
                        return TG_EINVAL;
                v = v * 10 + (text[i] - '0');
        }
        if (v <= 0)
                return TG_EINVAL;
        *ret_id = v;
        return 0;
}

int api_redeliver_as(struct api *api, int64_t id, const char *principal, struct http_response *res,
                     const char *rid)
{
        struct store_event ev;
        json_t *o;
        int r = store_event_redeliver(api->store, id, principal, api_wall_now());

        if (r == 0)
                r = store_event_get(api->store, id, &ev);
        if (r == TG_ENOTFOUND)
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such event");
        if (r < 0)
                return api_reply_store_error(res, rid, r);
        log_emit(LOG_INFO, "event_redeliver",
                 json_pack("{s:I, s:s, s:s, s:s}", "event_id", (json_int_t)id, "operation_id",
                           ev.operation_id, "principal", principal, "request_id", rid));
        o = notify_event_json_delivery(&ev);
        return o ? api_reply_json(res, 200, o) : TG_ENOMEM;
}

int api_post_event_redeliver(struct api *api, struct http_response *res, const char *rid,
                             const char *id_text)
{
        const char *slash = strchr(id_text, '/');
        const char *who = NULL;
        int64_t id = 0;
        int r;

        if (!slash || api_event_id(id_text, (size_t)(slash - id_text), &id) < 0)
                return api_reply_code(res, rid, 404, "not_found", NULL, "no such event");
        /* the principal, never a body's name: the route takes no body */
        r = api_actor(api, NULL, api->who.name[0] ? api->who.name : "api", &who, res, rid);
        if (r != 0)
                return r < 0 ? r : 0;
        return api_redeliver_as(api, id, who, res, rid);
}
