/*
 * ui_int — private to ui.c and ui_data.c: the console's state in the API
 * process and the read routes' entry points.
 */
#ifndef TG_UI_INT_H
#define TG_UI_INT_H

#include "daemon/api_int.h"
#include "daemon/timeline_data.h"
#include "daemon/ui.h"
#include "daemon/ui_session.h"

/* The live view is read from the store at most this often, whatever the
 * number of open dashboards: every poll in between is answered from it. */
#define UI_LIVE_TTL_MS    500
#define UI_LIVE_WINDOW_MS (60 * 1000)

struct ui_live {
        tg_wall_ms read_at; /* 0: never */
        struct timeline_series series;
        char *status;   /* the exit's status as JSON text */
        uint64_t reads; /* store reads made (for tests and the bench) */
};

struct ui {
        struct ui_sessions sessions;
        bool have_api_token;
        /* one live view per account of the config, in its order */
        struct ui_live *lives;
        unsigned live_count;
        /* sign-in failures in the current minute (a brake on guessing) */
        tg_wall_ms fail_window;
        unsigned fails;
};

/* ui_data.c: the read routes; rest is the path after "/ui/api/". The
 * live view, the timeline and the manual desk take ?account=NAME (a
 * configured account; default: the one the API's store handle serves):
 * that account's exit, samples and cases. */
int ui_get_live(struct api *api, const struct http_request *req, struct http_response *res,
                const char *rid);
int ui_get_timeline(struct api *api, const struct http_request *req, struct http_response *res,
                    const char *rid);
int ui_get_ops(struct api *api, const struct http_request *req, struct http_response *res,
               const char *rid);
int ui_get_op(struct api *api, const char *id, struct http_response *res, const char *rid);
int ui_get_manual(struct api *api, const struct http_request *req, struct http_response *res,
                  const char *rid);
/* The failed deliveries (parked, or due after a failed attempt), paged by
 * event id: {items, count, next_after}. */
int ui_get_deliveries(struct api *api, const struct http_request *req, struct http_response *res,
                      const char *rid);
void ui_live_release(struct ui_live *live);

#endif
