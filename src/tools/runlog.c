/*
 * runlog — JSON lines (and the store) into verify's arrays. Each line is
 * parsed on its own with jansson; a field of the wrong type is an error
 * naming the file, line and field, never a silent default, except where
 * docs/verify.md says a field is optional. Arrays grow by doubling up to
 * max_records and no further.
 */
#include "tools/runlog.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/classify.h"
#include "core/tg_error.h"
#include "store/store.h"

void runlog_init(struct runlog *log, size_t max_records)
{
        memset(log, 0, sizeof(*log));
        log->max_records = max_records ? max_records : VERIFY_MAX_RECORDS;
}

void runlog_release(struct runlog *log)
{
        if (!log)
                return;
        free(log->calls);
        free(log->arrivals);
        free(log->ledger);
        memset(log, 0, sizeof(*log));
}

static int fail(struct runlog *log, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct runlog *log, int code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(log->err, sizeof(log->err), fmt, ap);
        va_end(ap);
        return code;
}

/* Room for one more element of size `size` in *items (count n, capacity *cap). */
static int grow(struct runlog *log, void **items, size_t n, size_t *cap, size_t size,
                const char *what)
{
        if (n < *cap)
                return 0;
        if (n >= log->max_records)
                return fail(log, TG_EFULL, "more than %zu %s (raise --max-records)",
                            log->max_records, what);
        size_t ncap = *cap ? *cap * 2 : 1024;
        if (ncap > log->max_records)
                ncap = log->max_records;
        void *p = realloc(*items, ncap * size);
        if (!p)
                return fail(log, TG_ENOMEM, "out of memory reading %s", what);
        *items = p;
        *cap = ncap;
        return 0;
}

static void copy_str(char *dst, size_t size, const char *src)
{
        snprintf(dst, size, "%s", src ? src : "");
}

/* Reads path line by line; fn gets each non-blank parsed line. */
typedef int (*line_fn)(struct runlog *log, json_t *o, const char *path, size_t line);

static int read_lines(struct runlog *log, const char *path, line_fn fn)
{
        FILE *f = fopen(path, "r");
        if (!f)
                return fail(log, TG_EIO, "%s: %s", path, strerror(errno));
        char *buf = NULL;
        size_t cap = 0, line = 0;
        ssize_t n;
        int r = 0;
        while ((n = getline(&buf, &cap, f)) >= 0) {
                line++;
                if ((size_t)n > RUNLOG_LINE_MAX) {
                        r = fail(log, TG_EPARSE, "%s:%zu: line longer than %d bytes", path, line,
                                 RUNLOG_LINE_MAX);
                        break;
                }
                size_t i = 0;
                while (i < (size_t)n &&
                       (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'))
                        i++;
                if (i == (size_t)n)
                        continue;
                json_error_t jerr;
                json_t *o = json_loadb(buf + i, (size_t)n - i, 0, &jerr);
                if (!o || !json_is_object(o)) {
                        json_decref(o);
                        r = fail(log, TG_EPARSE, "%s:%zu: not a JSON object (%s)", path, line,
                                 o ? "other JSON" : jerr.text);
                        break;
                }
                r = fn(log, o, path, line);
                json_decref(o);
                if (r < 0)
                        break;
        }
        if (r == 0 && ferror(f))
                r = fail(log, TG_EIO, "%s: read error", path);
        free(buf);
        fclose(f);
        return r;
}

/* Optional integer field: absent or null gives dflt; another type fails. */
static int get_int(struct runlog *log, json_t *o, const char *field, int64_t dflt, int64_t *ret,
                   const char *path, size_t line)
{
        json_t *v = json_object_get(o, field);
        if (!v || json_is_null(v)) {
                *ret = dflt;
                return 0;
        }
        if (!json_is_integer(v))
                return fail(log, TG_EPARSE, "%s:%zu: \"%s\" must be an integer", path, line, field);
        *ret = (int64_t)json_integer_value(v);
        return 0;
}

static const char *get_str(json_t *o, const char *field)
{
        json_t *v = json_object_get(o, field);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static int add_call_json(struct runlog *log, json_t *o, const char *path, size_t line)
{
        json_t *page = json_object_get(o, "calls");
        if (json_is_array(page)) {
                size_t i;
                json_t *c;
                json_array_foreach(page, i, c)
                {
                        if (!json_is_object(c))
                                return fail(log, TG_EPARSE, "%s:%zu: calls[%zu] not an object",
                                            path, line, i);
                        int r = add_call_json(log, c, path, line);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        int r = grow(log, (void **)&log->calls, log->ncalls, &log->cap_calls, sizeof(*log->calls),
                     "call records");
        if (r < 0)
                return r;
        struct verify_call *c = &log->calls[log->ncalls];
        memset(c, 0, sizeof(*c));
        const char *kind = get_str(o, "kind");
        const char *rid = get_str(o, "request_id");
        const char *op = get_str(o, "operation_id");
        if (!kind || tg_call_kind_parse(kind, &c->kind) < 0)
                return fail(log, TG_EPARSE,
                            "%s:%zu: \"kind\" must be first, retry, query or manual", path, line);
        if (!op)
                return fail(log, TG_EPARSE, "%s:%zu: \"operation_id\" missing", path, line);
        int64_t attempt = 0, in_flight = 0, http = 0;
        if (get_int(log, o, "id", (int64_t)log->ncalls + 1, &c->id, path, line) < 0 ||
            get_int(log, o, "attempt", 0, &attempt, path, line) < 0 ||
            get_int(log, o, "epoch", 0, &c->epoch, path, line) < 0 ||
            get_int(log, o, "start_mono_ns", TG_MONO_NEVER, &c->start_mono, path, line) < 0 ||
            get_int(log, o, "end_mono_ns", TG_MONO_NEVER, &c->end_mono, path, line) < 0 ||
            get_int(log, o, "start_wall", 0, &c->start_wall, path, line) < 0 ||
            get_int(log, o, "end_wall", TG_WALL_NEVER, &c->end_wall, path, line) < 0 ||
            get_int(log, o, "in_flight", 0, &in_flight, path, line) < 0 ||
            get_int(log, o, "http_status", 0, &http, path, line) < 0)
                return TG_EPARSE;
        if (c->start_mono == TG_MONO_NEVER)
                return fail(log, TG_EPARSE, "%s:%zu: \"start_mono_ns\" missing", path, line);
        c->attempt = attempt > 0 && attempt < 1000000 ? (unsigned)attempt : 0;
        c->in_flight = in_flight > 0 && in_flight < 1000000000 ? (unsigned)in_flight : 0;
        c->http_status = http > 0 && http < 1000 ? (int)http : 0;
        copy_str(c->operation_id, sizeof(c->operation_id), op);
        copy_str(c->request_id, sizeof(c->request_id), rid);
        copy_str(c->cls, sizeof(c->cls), get_str(o, "class"));
        json_t *sent = json_object_get(o, "sent");
        c->sent = json_is_boolean(sent) ? json_is_true(sent) : -1;
        json_t *handoff = json_object_get(o, "handoff_mono_ns");
        c->start_unrecorded = handoff && json_is_null(handoff);
        c->released = json_is_true(json_object_get(o, "released"));
        log->ncalls++;
        return 0;
}

int runlog_read_calls(struct runlog *log, const char *path)
{
        return read_lines(log, path, add_call_json);
}

int runlog_token_path(struct runlog *log, const char *base_url, const char *token_path)
{
        const char *prefix = "";
        size_t plen = 0;

        if (!token_path || token_path[0] != '/')
                return fail(log, TG_EINVAL,
                            "the token path (--token-path, provider.token_path) must start with "
                            "'/', not '%s'",
                            token_path ? token_path : "");
        if (base_url) {
                /* scheme://host[:port] then the path, if any */
                const char *host = strstr(base_url, "://");
                const char *slash = host ? strchr(host + 3, '/') : NULL;
                if (slash) {
                        prefix = slash;
                        plen = strcspn(prefix, "?#");
                        while (plen > 0 && prefix[plen - 1] == '/')
                                plen--;
                }
        }
        if ((size_t)snprintf(log->token_path, sizeof(log->token_path), "%.*s%s", (int)plen, prefix,
                             token_path) >= sizeof(log->token_path)) {
                log->token_path[0] = '\0';
                return fail(log, TG_EINVAL, "the token path is too long");
        }
        return 0;
}

static int add_arrival_json(struct runlog *log, json_t *o, const char *path, size_t line)
{
        const char *p = get_str(o, "path");
        /* The stub's admin paths are not calls to the provider. */
        if (p && strncmp(p, "/_", 2) == 0)
                return 0;
        int r = grow(log, (void **)&log->arrivals, log->narrivals, &log->cap_arrivals,
                     sizeof(*log->arrivals), "arrival records");
        if (r < 0)
                return r;
        struct verify_arrival *a = &log->arrivals[log->narrivals];
        memset(a, 0, sizeof(*a));
        const char *method = get_str(o, "method");
        if (!method)
                return fail(log, TG_EPARSE, "%s:%zu: \"method\" missing", path, line);
        a->post = strcmp(method, "POST") == 0;
        int64_t seq = 0, phase = -1;
        if (get_int(log, o, "seq", (int64_t)log->narrivals + 1, &seq, path, line) < 0 ||
            get_int(log, o, "wall_ms", 0, &a->wall, path, line) < 0 ||
            get_int(log, o, "mono_ns", TG_MONO_NEVER, &a->mono, path, line) < 0 ||
            get_int(log, o, "phase", -1, &phase, path, line) < 0 ||
            get_int(log, o, "t_ns", -1, &a->t_ns, path, line) < 0)
                return TG_EPARSE;
        if (a->mono == TG_MONO_NEVER) {
                /* No monotonic time: the wall clock stands in (docs/verify.md). */
                if (a->wall == 0)
                        return fail(log, TG_EPARSE, "%s:%zu: neither \"mono_ns\" nor \"wall_ms\"",
                                    path, line);
                a->mono = a->wall * TG_NS_PER_MS;
        }
        a->seq = seq > 0 ? (uint64_t)seq : log->narrivals + 1;
        a->phase = (long)phase;
        const char *key = get_str(o, "idempotency_key");
        if (!key && p && !a->post) {
                /* A query names its key in the path: /v1/refunds/{key}. */
                const char *slash = strrchr(p, '/');
                key = slash ? slash + 1 : NULL;
        }
        copy_str(a->key, sizeof(a->key), key);
        copy_str(a->request_id, sizeof(a->request_id), get_str(o, "request_id"));
        copy_str(a->mode, sizeof(a->mode), get_str(o, "mode"));
        json_t *ans = json_object_get(o, "answer");
        if (json_is_integer(ans))
                a->answer = (int)json_integer_value(ans);
        else if (json_is_string(ans) && strcmp(json_string_value(ans), "dropped") == 0)
                a->answer = VERIFY_ANSWER_DROPPED;
        else
                a->answer = VERIFY_ANSWER_NONE;
        a->executed = json_is_true(json_object_get(o, "executed"));
        a->token = log->token_path[0] && p && strcmp(p, log->token_path) == 0;
        log->narrivals++;
        return 0;
}

int runlog_read_arrivals(struct runlog *log, const char *path)
{
        return read_lines(log, path, add_arrival_json);
}

static int add_execution(struct runlog *log, const char *key, json_t *n, const char *path,
                         size_t line)
{
        if (!key || !json_is_integer(n) || json_integer_value(n) < 0)
                return fail(log, TG_EPARSE,
                            "%s:%zu: a ledger entry needs a key and an integer "
                            "\"executions\"",
                            path, line);
        int r = grow(log, (void **)&log->ledger, log->nledger, &log->cap_ledger,
                     sizeof(*log->ledger), "ledger keys");
        if (r < 0)
                return r;
        struct verify_execution *e = &log->ledger[log->nledger++];
        copy_str(e->key, sizeof(e->key), key);
        json_int_t v = json_integer_value(n);
        e->executions = v > 1000000 ? 1000000u : (unsigned)v;
        return 0;
}

static int add_ledger_json(struct runlog *log, json_t *o, const char *path, size_t line)
{
        json_t *ops = json_object_get(o, "operations");
        if (json_is_object(ops)) {
                const char *key;
                json_t *v;
                json_object_foreach(ops, key, v)
                {
                        int r =
                            add_execution(log, key, json_object_get(v, "executions"), path, line);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        return add_execution(log, get_str(o, "key"), json_object_get(o, "executions"), path, line);
}

int runlog_read_ledger(struct runlog *log, const char *path)
{
        return read_lines(log, path, add_ledger_json);
}

static int add_store_call(const struct call_record *cr, void *userdata)
{
        struct runlog *log = userdata;
        int r = grow(log, (void **)&log->calls, log->ncalls, &log->cap_calls, sizeof(*log->calls),
                     "call records");
        if (r < 0)
                return r;
        struct verify_call *c = &log->calls[log->ncalls++];
        memset(c, 0, sizeof(*c));
        c->id = cr->id;
        copy_str(c->operation_id, sizeof(c->operation_id), cr->operation_id);
        c->kind = cr->kind;
        c->attempt = cr->attempt;
        copy_str(c->request_id, sizeof(c->request_id), cr->request_id);
        c->epoch = cr->epoch;
        c->start_mono = cr->start_mono;
        c->end_mono = cr->ended ? cr->end_mono : TG_MONO_NEVER;
        c->start_wall = cr->start_wall;
        c->end_wall = cr->ended ? cr->end_wall : TG_WALL_NEVER;
        c->in_flight = cr->in_flight_at_start;
        c->sent = cr->ended ? (cr->sent ? 1 : 0) : -1;
        c->start_unrecorded = cr->handoff_mono == 0; /* -1: a row from before */
        c->released = store_call_released(cr);
        copy_str(c->cls, sizeof(c->cls), cr->ended ? tg_class_name(cr->cls) : "");
        c->http_status = cr->http_status;
        return 0;
}

int runlog_read_store(struct runlog *log, const char *store_url, const char *account)
{
        struct store *store = NULL;
        char err[600];
        /* reading a run never creates a store ("no store at ...") */
        const struct store_open_opts opts = {.existing = true, .err = err, .err_size = sizeof(err)};
        int r = store_open_ex(store_url, &opts, &store);
        if (r < 0)
                return fail(log, r, "cannot open the store: %s", err[0] ? err : tg_strerror(r));
        int64_t since = log->ncalls ? log->calls[log->ncalls - 1].id : 0;
        for (;;) {
                size_t before = log->ncalls;
                r = store_list_account_calls(store, account, since, 1000, add_store_call, log);
                if (r < 0) {
                        if (!log->err[0])
                                fail(log, r, "reading the call log: %s", tg_strerror(r));
                        break;
                }
                if (log->ncalls == before)
                        break;
                since = log->calls[log->ncalls - 1].id;
        }
        store_close(store);
        return r < 0 ? r : 0;
}
