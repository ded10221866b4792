/*
 * The arrival log as an array of entries indexed by number - base - 1.
 * Invariants: numbers are dense from 1 and never reused, not even after a
 * reset (so a late answer cannot land on another request's entry); an entry's arrival fields never change after
 * record_add; only the first answer of an entry is kept; at most max entries
 * are stored, later ones only counted.
 */
#include "record.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define FIELD_MAX 512

struct entry {
        struct record_arrival a; /* strings owned by the entry */
        bool answered;
        int status; /* 0: dropped */
        bool executed;
        int delivered;                              /* -1 unknown, 0 no, 1 yes */
        const char *client_cert, *auth, *signature; /* static verdicts, NULL: not checked */
        char *body;                                 /* --record-bodies */
};

struct record_log {
        pthread_mutex_t lock;
        struct entry **entries;
        size_t max;
        uint64_t base; /* numbers <= base were forgotten by a reset */
        uint64_t total;
        uint64_t overflow;
};

static char *copy(const char *s)
{
        return s ? strndup(s, FIELD_MAX) : NULL;
}

static void entry_free(struct entry *e)
{
        if (!e)
                return;
        free((char *)e->a.method);
        free((char *)e->a.path);
        free((char *)e->a.idempotency_key);
        free((char *)e->a.request_id);
        free((char *)e->a.attempt);
        free((char *)e->a.traceparent);
        free((char *)e->a.api_version);
        free((char *)e->a.starting_after);
        free((char *)e->a.mode);
        free(e->body);
        free(e);
}

struct record_log *record_log_new(size_t max_entries)
{
        struct record_log *log = calloc(1, sizeof(*log));
        if (!log)
                return NULL;
        log->entries = calloc(max_entries ? max_entries : 1, sizeof(*log->entries));
        if (!log->entries || pthread_mutex_init(&log->lock, NULL) != 0) {
                free(log->entries);
                free(log);
                return NULL;
        }
        log->max = max_entries;
        return log;
}

static void clear(struct record_log *log)
{
        uint64_t held = log->total - log->base;
        size_t stored = held < log->max ? (size_t)held : log->max;
        for (size_t i = 0; i < stored; i++) {
                entry_free(log->entries[i]);
                log->entries[i] = NULL;
        }
        log->base = log->total;
        log->overflow = 0;
}

void record_log_free(struct record_log *log)
{
        if (!log)
                return;
        if (log->entries)
                clear(log);
        free(log->entries);
        pthread_mutex_destroy(&log->lock);
        free(log);
}

uint64_t record_add(struct record_log *log, const struct record_arrival *a)
{
        struct entry *e = calloc(1, sizeof(*e));
        uint64_t seq;
        if (e) {
                e->a = *a;
                e->a.method = copy(a->method);
                e->a.path = copy(a->path);
                e->a.idempotency_key = copy(a->idempotency_key);
                e->a.request_id = copy(a->request_id);
                e->a.attempt = copy(a->attempt);
                e->a.traceparent = copy(a->traceparent);
                e->a.api_version = copy(a->api_version);
                e->a.starting_after = copy(a->starting_after);
                e->a.mode = copy(a->mode);
                e->delivered = -1;
        }
        pthread_mutex_lock(&log->lock);
        seq = ++log->total;
        if (seq - log->base <= log->max && e) {
                log->entries[seq - log->base - 1] = e;
                e = NULL;
        } else {
                log->overflow++;
        }
        pthread_mutex_unlock(&log->lock);
        entry_free(e);
        return seq;
}

static struct entry *get(struct record_log *log, uint64_t seq)
{
        if (seq <= log->base || seq > log->total || seq - log->base > log->max)
                return NULL;
        return log->entries[seq - log->base - 1];
}

void record_answer(struct record_log *log, uint64_t seq, int status, bool executed)
{
        struct entry *e;
        pthread_mutex_lock(&log->lock);
        e = get(log, seq);
        if (e && !e->answered) {
                e->answered = true;
                e->status = status;
                e->executed = executed;
        }
        pthread_mutex_unlock(&log->lock);
}

void record_checks(struct record_log *log, uint64_t seq, const char *client_cert, const char *auth,
                   const char *signature, const char *body, size_t body_len)
{
        char *copy_body = body ? strndup(body, body_len < 4096 ? body_len : 4096) : NULL;
        struct entry *e;

        pthread_mutex_lock(&log->lock);
        e = get(log, seq);
        if (e) {
                e->client_cert = client_cert;
                e->auth = auth;
                e->signature = signature;
                if (copy_body && !e->body) {
                        e->body = copy_body;
                        copy_body = NULL;
                }
        }
        pthread_mutex_unlock(&log->lock);
        free(copy_body);
}

void record_delivered(struct record_log *log, uint64_t seq, bool delivered)
{
        struct entry *e;
        pthread_mutex_lock(&log->lock);
        e = get(log, seq);
        if (e)
                e->delivered = delivered ? 1 : 0;
        pthread_mutex_unlock(&log->lock);
}

static json_t *str_or_null(const char *s)
{
        return s ? json_string(s) : json_null();
}

/* One entry as a JSON line appended to *buf (grown with realloc). */
static int append_entry(const struct entry *e, uint64_t seq, char **buf, size_t *len, size_t *cap)
{
        json_t *o = json_object();
        char *line;
        size_t n;
        if (!o)
                return -ENOMEM;
        json_object_set_new(o, "seq", json_integer((json_int_t)seq));
        json_object_set_new(o, "mono_ns", json_integer((json_int_t)e->a.mono));
        json_object_set_new(o, "t_ns", json_integer((json_int_t)e->a.elapsed));
        json_object_set_new(o, "wall_ms", json_integer((json_int_t)e->a.wall));
        json_object_set_new(o, "method", str_or_null(e->a.method));
        json_object_set_new(o, "path", str_or_null(e->a.path));
        json_object_set_new(o, "idempotency_key", str_or_null(e->a.idempotency_key));
        json_object_set_new(o, "request_id", str_or_null(e->a.request_id));
        json_object_set_new(o, "attempt", str_or_null(e->a.attempt));
        json_object_set_new(o, "traceparent", str_or_null(e->a.traceparent));
        json_object_set_new(o, "api_version", str_or_null(e->a.api_version));
        if (e->a.starting_after)
                json_object_set_new(o, "starting_after", json_string(e->a.starting_after));
        json_object_set_new(o, "conn_id", json_integer((json_int_t)e->a.conn_id));
        json_object_set_new(o, "open", json_integer((json_int_t)e->a.open_requests));
        json_object_set_new(o, "mode", str_or_null(e->a.mode));
        json_object_set_new(o, "phase", json_integer(e->a.phase));
        if (!e->answered)
                json_object_set_new(o, "answer", json_null());
        else if (e->status == 0)
                json_object_set_new(o, "answer", json_string("dropped"));
        else
                json_object_set_new(o, "answer", json_integer(e->status));
        json_object_set_new(o, "executed", json_boolean(e->executed));
        json_object_set_new(o, "delivered",
                            e->delivered < 0 ? json_null() : json_boolean(e->delivered));
        if (e->client_cert)
                json_object_set_new(o, "client_cert", json_string(e->client_cert));
        if (e->auth)
                json_object_set_new(o, "auth", json_string(e->auth));
        if (e->signature)
                json_object_set_new(o, "signature", json_string(e->signature));
        if (e->body)
                json_object_set_new(o, "body", json_string(e->body));
        line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!line)
                return -ENOMEM;
        n = strlen(line);
        if (*len + n + 2 > *cap) {
                size_t ncap = (*cap ? *cap * 2 : 4096);
                char *nb;
                while (ncap < *len + n + 2)
                        ncap *= 2;
                nb = realloc(*buf, ncap);
                if (!nb) {
                        free(line);
                        return -ENOMEM;
                }
                *buf = nb;
                *cap = ncap;
        }
        memcpy(*buf + *len, line, n);
        *len += n;
        (*buf)[(*len)++] = '\n';
        (*buf)[*len] = '\0';
        free(line);
        return 0;
}

char *record_dump(struct record_log *log, uint64_t since, size_t limit)
{
        char *buf = NULL;
        size_t len = 0, cap = 0, n = 0;
        pthread_mutex_lock(&log->lock);
        if (since < log->base)
                since = log->base;
        for (uint64_t seq = since + 1; seq <= log->total && n < limit; seq++) {
                struct entry *e = get(log, seq);
                if (!e)
                        continue;
                if (append_entry(e, seq, &buf, &len, &cap) < 0) {
                        free(buf);
                        buf = NULL;
                        break;
                }
                n++;
        }
        pthread_mutex_unlock(&log->lock);
        if (!buf && n == 0)
                buf = strdup("");
        return buf;
}

int record_write(struct record_log *log, FILE *f)
{
        int rc = 0;
        pthread_mutex_lock(&log->lock);
        for (uint64_t seq = log->base + 1; seq <= log->total && rc == 0; seq++) {
                struct entry *e = get(log, seq);
                char *buf = NULL;
                size_t len = 0, cap = 0;
                if (!e)
                        continue;
                rc = append_entry(e, seq, &buf, &len, &cap);
                if (rc == 0 && fwrite(buf, 1, len, f) != len)
                        rc = -EIO;
                free(buf);
        }
        pthread_mutex_unlock(&log->lock);
        return rc;
}

void record_reset(struct record_log *log)
{
        pthread_mutex_lock(&log->lock);
        clear(log);
        pthread_mutex_unlock(&log->lock);
}

void record_counts(struct record_log *log, uint64_t *ret_total, uint64_t *ret_overflow)
{
        pthread_mutex_lock(&log->lock);
        *ret_total = log->total;
        *ret_overflow = log->overflow;
        pthread_mutex_unlock(&log->lock);
}
