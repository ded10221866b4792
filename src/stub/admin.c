/*
 * The stub's admin endpoints under /_stub/ (--help): GET arrivals, ledger
 * and state; POST mode (the timeline, a one-off mode for the next N
 * refunds, the query mode, the webhook's faults), reset and expire-keys.
 *
 * Invariants: admin requests are never recorded as arrivals and never see
 * a fault mode; POST /_stub/mode changes all it is given or nothing (every
 * member is checked before ctl is taken), and answers the state after it.
 */
#include "server_int.h"

#include "core/strnum.h"
#include "ledger.h"
#include "listener.h"
#include "platform/clock.h"
#include "record.h"
#include "timer.h"
#include "webhook.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMELINE_TEXT 8192

static json_t *spec_json(const struct stub_mode_spec *s)
{
        char text[256];
        stub_mode_format(s, text, sizeof(text));
        return json_string(text);
}

static char *state_json(struct stub_server *srv)
{
        tg_mono_ns now = clock_mono_now(), end;
        struct stub_mode_spec spec;
        struct ledger_stats ls;
        uint64_t total, overflow;
        size_t phase;
        char *tl = malloc(TIMELINE_TEXT);
        json_t *o;
        char *text;

        ledger_stats(srv->ledger, &ls);
        record_counts(srv->log, &total, &overflow);
        pthread_mutex_lock(&srv->ctl);
        server_mode_at(srv, now, &spec, &phase, &end);
        if (tl)
                stub_timeline_format(&srv->timeline, tl, TIMELINE_TEXT);
        o = json_pack("{s:o, s:I, s:I, s:s, s:I, s:I, s:o, s:b}", "mode", spec_json(&spec), "phase",
                      (json_int_t)phase, "phases", (json_int_t)srv->timeline.n, "timeline",
                      tl ? tl : "", "timeline_elapsed_ms",
                      (json_int_t)((now - srv->timeline_start) / TG_NS_PER_MS), "phase_ends_in_ms",
                      (json_int_t)(end == TG_MONO_NEVER ? -1 : (end - now) / TG_NS_PER_MS),
                      "query_mode", spec_json(&srv->query_spec), "listening",
                      listener_is_open(srv->listener));
        struct stub_bucket capacity = srv->capacity;
        pthread_mutex_unlock(&srv->ctl);
        free(tl);
        if (!o)
                return NULL;
        json_object_set_new(o, "port", json_integer(listener_port(srv->listener)));
        json_object_set_new(o, "uptime_ms", json_integer((now - srv->started) / TG_NS_PER_MS));
        json_object_set_new(o, "seed", json_integer((json_int_t)srv->cfg.seed));
        json_object_set_new(o, "open_requests",
                            json_integer((json_int_t)atomic_load(&srv->open_requests)));
        json_object_set_new(o, "open_connections",
                            json_integer((json_int_t)atomic_load(&srv->open_connections)));
        json_object_set_new(o, "timers_pending",
                            json_integer((json_int_t)timer_pending(srv->timer)));
        json_object_set_new(o, "requests", json_integer((json_int_t)total));
        json_object_set_new(o, "record_overflow", json_integer((json_int_t)overflow));
        json_object_set_new(o, "operations", json_integer((json_int_t)ls.operations));
        json_object_set_new(o, "executions", json_integer((json_int_t)ls.executions));
        json_object_set_new(o, "max_executions_per_operation",
                            json_integer((json_int_t)ls.max_executions));
        json_object_set_new(o, "failures", json_integer((json_int_t)ls.failures));
        json_object_set_new(o, "keys_retained", json_integer((json_int_t)ls.keys_retained));
        json_object_set_new(o, "key_retention_s", json_integer(srv->cfg.key_retention_s));
        json_object_set_new(o, "capacity", json_real(capacity.rate));
        json_object_set_new(o, "capacity_burst", json_real(capacity.burst));
        json_object_set_new(o, "shape", json_string(stub_shape_name(srv->cfg.shape)));
        if (srv->tokens) {
                json_object_set_new(o, "token_ttl_s", json_integer(srv->cfg.token_ttl_s));
                json_object_set_new(o, "tokens_alive",
                                    json_integer((json_int_t)stub_tokens_alive(srv->tokens, now)));
        }
        if (srv->webhook) {
                struct webhook_stats ws;
                webhook_stats(srv->webhook, &ws);
                json_object_set_new(
                    o, "webhook",
                    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "queued", (json_int_t)ws.queued,
                              "sent", (json_int_t)ws.sent, "dropped", (json_int_t)ws.dropped,
                              "failed", (json_int_t)ws.failed, "overflow", (json_int_t)ws.overflow,
                              "last_status", (json_int_t)ws.last_status));
        }
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        return text;
}

/* Reads an optional integer member; returns false (with a message) if of the wrong type. */
static bool opt_int(json_t *o, const char *name, int64_t *io)
{
        json_t *v = json_object_get(o, name);
        if (!v)
                return true;
        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return false;
        *io = json_integer_value(v);
        return true;
}

/* POST /_stub/mode: see --help. All or nothing. */
static void admin_mode(struct req *r)
{
        struct stub_server *srv = r->srv;
        json_error_t jerr;
        json_t *o = json_loadb(r->body ? r->body : "", r->len, 0, &jerr);
        json_t *v;
        struct stub_timeline *tl = NULL;
        struct stub_mode_spec query, once = {0};
        int64_t count = -1;
        bool have_query = false;
        int64_t wh_delay = -1;
        double wh_drop = -1.0, cap_rate = -1.0, cap_burst = -1.0;
        const char *why = "bad request";
        char msg[256];

        if (!json_is_object(o)) {
                why = "body must be a JSON object";
                goto bad;
        }
        tl = calloc(1, sizeof(*tl));
        if (!tl) {
                why = "out of memory";
                goto bad;
        }
        v = json_object_get(o, "timeline");
        if (v) {
                if (!json_is_string(v) ||
                    stub_timeline_parse(json_string_value(v), srv->cfg.time_scale, &why, tl) < 0)
                        goto bad;
        }
        v = json_object_get(o, "mode");
        if (v) {
                struct stub_mode_spec s;
                int64_t ra = -1;
                json_t *rav;
                if (tl->n > 0) {
                        why = "give mode or timeline, not both";
                        goto bad;
                }
                if (!json_is_string(v) ||
                    stub_mode_parse(json_string_value(v), strlen(json_string_value(v)), &why, &s) <
                        0)
                        goto bad;
                if (!opt_int(o, "delay_ms", &s.delay_ms) ||
                    !opt_int(o, "processing_ms", &s.processing_ms) ||
                    !opt_int(o, "retry_after", &ra)) {
                        why = "delay_ms, processing_ms, retry_after must be integers >= 0";
                        goto bad;
                }
                if (ra >= 0) {
                        s.ra_form = STUB_RA_SECONDS;
                        s.ra_seconds = ra;
                }
                rav = json_object_get(o, "retry_after_date");
                if (rav && json_is_true(rav) && s.ra_form == STUB_RA_SECONDS)
                        s.ra_form = STUB_RA_DATE;
                v = json_object_get(o, "mix");
                if (v) {
                        if (!json_is_string(v) ||
                            stub_mix_parse(json_string_value(v), strlen(json_string_value(v)), &why,
                                           s.weights) < 0)
                                goto bad;
                        s.has_weights = true;
                }
                if (!opt_int(o, "count", &count) || count == 0) {
                        why = "count must be an integer >= 1";
                        goto bad;
                }
                if (count > 0)
                        once = s; /* the timeline in force stays */
                else
                        stub_timeline_single(&s, tl);
        } else if (json_object_get(o, "count")) {
                why = "count needs a mode";
                goto bad;
        }
        v = json_object_get(o, "query_mode");
        if (v) {
                if (!json_is_string(v) ||
                    stub_mode_parse(json_string_value(v), strlen(json_string_value(v)), &why,
                                    &query) < 0)
                        goto bad;
                if (!stub_mode_for_query(query.mode)) {
                        why = "query_mode must be fast, slow, drop, unavailable, limited, e500 "
                              "or a hostile mode";
                        goto bad;
                }
                if (!opt_int(o, "query_delay_ms", &query.delay_ms)) {
                        why = "query_delay_ms must be an integer >= 0";
                        goto bad;
                }
                have_query = true;
        }
        if (!opt_int(o, "webhook_delay_ms", &wh_delay)) {
                why = "webhook_delay_ms must be an integer >= 0";
                goto bad;
        }
        v = json_object_get(o, "webhook_drop_rate");
        if (v) {
                if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1) {
                        why = "webhook_drop_rate must be a number in [0, 1]";
                        goto bad;
                }
                wh_drop = json_number_value(v);
        }

        v = json_object_get(o, "capacity");
        if (v) {
                if (!json_is_number(v) || json_number_value(v) < 0 ||
                    json_number_value(v) > 1000000) {
                        why = "capacity must be a number in [0, 1000000] (0: none)";
                        goto bad;
                }
                cap_rate = json_number_value(v);
        }
        v = json_object_get(o, "capacity_burst");
        if (v) {
                if (!json_is_number(v) || json_number_value(v) < 1 ||
                    json_number_value(v) > 1000000) {
                        why = "capacity_burst must be a number in [1, 1000000]";
                        goto bad;
                }
                cap_burst = json_number_value(v);
        }

        pthread_mutex_lock(&srv->ctl);
        if (cap_rate >= 0 || cap_burst >= 0)
                bucket_set(&srv->capacity, cap_rate >= 0 ? cap_rate : srv->capacity.rate,
                           cap_burst >= 0 ? cap_burst : srv->capacity.burst, clock_mono_now());
        if (tl->n > 0) {
                srv->timeline = *tl;
                srv->timeline_start = clock_mono_now();
        }
        if (count > 0) {
                srv->once = once;
                srv->once_left = count;
        }
        if (have_query)
                srv->query_spec = query;
        pthread_mutex_unlock(&srv->ctl);
        if (srv->webhook && (wh_delay >= 0 || wh_drop >= 0))
                webhook_set_faults(srv->webhook, wh_delay, wh_drop);
        listener_poke(srv->listener);
        free(tl);
        json_decref(o);
        free(r->answer);
        r->status = 200;
        r->answer = state_json(srv);
        return;
bad:
        snprintf(msg, sizeof(msg), "%s", why);
        free(tl);
        json_decref(o);
        answer_error(r, 400, "invalid_request", msg, false);
}

static void admin_expire(struct req *r)
{
        json_t *o = NULL, *key = NULL;
        size_t n;
        char buf[96];
        if (r->len > 0) {
                o = json_loadb(r->body, r->len, 0, NULL);
                key = o ? json_object_get(o, "key") : NULL;
                if (!json_is_object(o) || (key && !json_is_string(key))) {
                        json_decref(o);
                        answer_error(r, 400, "invalid_request", "body must be {\"key\": \"...\"}",
                                     false);
                        return;
                }
        }
        n = ledger_expire(r->srv->ledger, key ? json_string_value(key) : NULL);
        json_decref(o);
        snprintf(buf, sizeof(buf), "{\"expired\":%zu}", n);
        answer_text(r, 200, buf);
}

static void admin_arrivals(struct req *r)
{
        const char *since = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "since");
        const char *limit = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "limit");
        uint64_t s = 0, l = 1000000;
        if (since && strnum_u64(since, 0, UINT64_MAX, &s) < 0) {
                answer_error(r, 400, "invalid_request", "since must be an integer", false);
                return;
        }
        if (limit && strnum_u64(limit, 0, SIZE_MAX, &l) < 0) {
                answer_error(r, 400, "invalid_request", "limit must be an integer", false);
                return;
        }
        free(r->answer);
        r->status = 200;
        r->answer = record_dump(r->srv->log, s, (size_t)l);
}

enum MHD_Result admin_handle(struct req *r)
{
        struct stub_server *srv = r->srv;
        const char *p = r->path + strlen(ADMIN_PREFIX);
        bool get = strcmp(r->method, "GET") == 0, post = strcmp(r->method, "POST") == 0;

        if (r->too_big) {
                answer_error(r, 413, "invalid_request", "admin body too large", false);
        } else if (strcmp(p, "arrivals") == 0 && get) {
                admin_arrivals(r);
        } else if (strcmp(p, "ledger") == 0 && get) {
                free(r->answer);
                r->status = 200;
                r->answer = ledger_dump_json(srv->ledger, clock_mono_now());
        } else if (strcmp(p, "state") == 0 && get) {
                free(r->answer);
                r->status = 200;
                r->answer = state_json(srv);
        } else if (strcmp(p, "mode") == 0 && post) {
                admin_mode(r);
        } else if (strcmp(p, "reset") == 0 && post) {
                ledger_reset(srv->ledger);
                record_reset(srv->log);
                pthread_mutex_lock(&srv->ctl);
                tg_rng_seed(&srv->mix_rng, srv->cfg.seed);
                pthread_mutex_unlock(&srv->ctl);
                answer_text(r, 200, "{\"reset\":true}");
        } else if (strcmp(p, "expire-keys") == 0 && post) {
                admin_expire(r);
        } else if (strcmp(p, "revoke-tokens") == 0 && post && srv->tokens) {
                char buf[64];
                snprintf(buf, sizeof(buf), "{\"revoked\":%zu}", stub_tokens_revoke(srv->tokens));
                answer_text(r, 200, buf);
        } else if (strcmp(p, "arrivals") == 0 || strcmp(p, "ledger") == 0 ||
                   strcmp(p, "state") == 0) {
                r->allow = "GET";
                answer_error(r, 405, "method_not_allowed", "use GET", false);
        } else if (strcmp(p, "mode") == 0 || strcmp(p, "reset") == 0 ||
                   strcmp(p, "expire-keys") == 0 ||
                   (strcmp(p, "revoke-tokens") == 0 && srv->tokens)) {
                r->allow = "POST";
                answer_error(r, 405, "method_not_allowed", "use POST", false);
        } else {
                answer_error(r, 404, "not_found", "no such admin endpoint", false);
        }
        if (!r->answer)
                answer_error(r, 500, "internal_error", "stub: out of memory", false);
        return answer_send(r);
}
