/*
 * The hostile modes' answers (hostile.h): made once from the stub's own
 * answer, then sent from a buffer or, for the streamed ones (reset-body,
 * huge, trickle, http10), by a content reader that generates the bytes at
 * each position, so a body of gigabytes costs a few hundred bytes here.
 */
#include "hostile.h"

#include "core/tg_error.h"
#include "platform/clock.h"
#include "shape.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define STREAM_BLOCK (16 * 1024)

static char *dump(json_t *o)
{
        char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        return text;
}

/* The stub's answer as a JSON object (a new one when it is none). */
static json_t *object_of(const char *body)
{
        json_t *o = body ? json_loads(body, 0, NULL) : NULL;
        if (json_is_object(o))
                return o;
        json_decref(o);
        return json_object();
}

/* contra: the body says what the spec says, whatever the status. */
static char *contra_body(const struct stub_mode_spec *spec, bool stripe, const char *body)
{
        enum stub_contra_body what = spec->hostile < 0 ? STUB_CONTRA_FAILED : spec->contra;
        json_t *o;

        if (what == STUB_CONTRA_ERROR) {
                /* An error that would be a refusal under a 4xx. */
                if (stripe)
                        return stub_stripe_error("invalid_request_error", "parameter_invalid",
                                                 "injected (contra)");
                return dump(json_pack("{s:{s:s, s:s, s:b}}", "error", "code", "invalid_request",
                                      "message", "injected (contra)", "retryable", 0));
        }
        o = object_of(body);
        if (!o)
                return NULL;
        json_object_del(o, "error");
        if (what == STUB_CONTRA_SUCCEEDED) {
                json_object_set_new(o, "status", json_string("succeeded"));
        } else if (what == STUB_CONTRA_PROCESSING) {
                json_object_set_new(o, "status", json_string(stripe ? "pending" : "processing"));
        } else {
                json_object_set_new(o, "status", json_string("failed"));
                json_object_set_new(o, stripe ? "failure_reason" : "failure_code",
                                    json_string("contra"));
        }
        return dump(o);
}

/* invalid: the object with a comma before its closing brace. */
static char *invalid_body(const char *body)
{
        char *text = dump(object_of(body));
        size_t n;
        char *out;

        if (!text)
                return NULL;
        n = strlen(text);
        out = malloc(n + 2);
        if (out) {
                memcpy(out, text, n - 1);
                memcpy(out + n - 1, ",}", 3);
        }
        free(text);
        return out;
}

/* huge: the object with a last member "pad", whose value (pad_len bytes of
 * 'x') is never stored: body is the text around it. */
static int huge_body(const char *body, uint64_t size, struct hostile_answer *a)
{
        static const char open[] = ",\"pad\":\"", close[] = "\"}";
        char *text = dump(object_of(body));
        size_t n, head;

        if (!text)
                return TG_ENOMEM;
        n = strlen(text);
        head = n - 1 + (n > 2 ? strlen(open) : strlen(open) - 1); /* no comma after "{" */
        a->body = malloc(head + sizeof(close));
        if (!a->body) {
                free(text);
                return TG_ENOMEM;
        }
        memcpy(a->body, text, n - 1);
        memcpy(a->body + n - 1, n > 2 ? open : open + 1, head - (n - 1));
        memcpy(a->body + head, close, sizeof(close));
        free(text);
        a->len = head + strlen(close);
        a->pad_at = head;
        a->pad_len = size > a->len ? size - a->len : 0;
        return 0;
}

static char *copy_of(const char *body)
{
        return strdup(body ? body : "");
}

int hostile_answer_make(const struct stub_mode_spec *spec, bool stripe, int status,
                        const char *body, const char *path, struct hostile_answer *ret)
{
        struct hostile_answer a;
        int given = spec->hostile >= 0 ? (int)spec->hostile : status;

        memset(&a, 0, sizeof(a));
        a.status = status;
        a.content_type = "application/json";
        switch (spec->mode) {
        case STUB_RESET_BODY:
                a.body = copy_of(body);
                if (!a.body)
                        return TG_ENOMEM;
                a.len = strlen(a.body);
                a.stream = true;
                a.reset = true;
                /* always mid-body: at least one byte short */
                a.stop_at = spec->hostile >= 0 ? (uint64_t)spec->hostile : a.len / 2;
                if (a.len > 0 && a.stop_at >= a.len)
                        a.stop_at = a.len - 1;
                break;
        case STUB_TRUNCATED:
                a.status = given;
                a.body = copy_of(body);
                if (!a.body)
                        return TG_ENOMEM;
                a.len = strlen(a.body) / 2;
                a.body[a.len] = '\0';
                break;
        case STUB_INVALID:
                a.status = given;
                a.body = invalid_body(body);
                if (!a.body)
                        return TG_ENOMEM;
                a.len = strlen(a.body);
                break;
        case STUB_HUGE:
                if (huge_body(body,
                              spec->hostile >= 0 ? (uint64_t)spec->hostile : STUB_HUGE_DEFAULT,
                              &a) < 0)
                        return TG_ENOMEM;
                a.stream = true;
                break;
        case STUB_TRICKLE:
                a.body = copy_of(body);
                if (!a.body)
                        return TG_ENOMEM;
                a.len = strlen(a.body);
                a.stream = true;
                a.trickle_ns =
                    (spec->hostile >= 0 ? spec->hostile : STUB_TRICKLE_DEFAULT) * TG_NS_PER_MS;
                break;
        case STUB_CTYPE:
                a.body = copy_of(body);
                if (!a.body)
                        return TG_ENOMEM;
                a.len = strlen(a.body);
                snprintf(a.ctype, sizeof(a.ctype), "%s",
                         spec->ctype[0] ? spec->ctype : STUB_CTYPE_DEFAULT);
                a.content_type = strcmp(a.ctype, "none") == 0 ? NULL : a.ctype;
                break;
        case STUB_CONTRA:
                a.status = spec->hostile >= 0 ? (int)spec->hostile : 201;
                a.body = contra_body(spec, stripe, body);
                if (!a.body)
                        return TG_ENOMEM;
                a.len = strlen(a.body);
                break;
        case STUB_HTTP10:
                a.body = copy_of(body);
                if (!a.body)
                        return TG_ENOMEM;
                a.len = strlen(a.body);
                a.stream = true;
                a.http10 = true;
                a.stop_at = spec->cut ? a.len / 2 : a.len;
                break;
        case STUB_REDIRECT:
                a.status = spec->hostile >= 0 ? (int)spec->hostile : STUB_REDIRECT_DEFAULT;
                snprintf(a.location, sizeof(a.location), "/moved%s", path);
                a.content_type = "text/html";
                a.len = strlen(a.location) * 2 + 64;
                a.body = malloc(a.len);
                if (!a.body)
                        return TG_ENOMEM;
                a.len = (size_t)snprintf(a.body, a.len,
                                         "<html><body>Moved: <a href=\"%s\">%s</a></body></html>\n",
                                         a.location, a.location);
                break;
        default:
                return TG_EINVAL;
        }
        a.total = a.len + a.pad_len;
        if (!a.reset && !(a.http10 && spec->cut))
                a.stop_at = a.total;
        *ret = a;
        /* the Content-Type points into the answer itself: fix it up */
        if (a.content_type == a.ctype)
                ret->content_type = ret->ctype;
        return 0;
}

void hostile_answer_release(struct hostile_answer *a)
{
        if (!a)
                return;
        free(a->body);
        a->body = NULL;
}

void hostile_body_at(const struct hostile_answer *a, uint64_t pos, char *buf, size_t n)
{
        for (size_t i = 0; i < n; i++, pos++) {
                if (pos < a->pad_at || a->pad_len == 0)
                        buf[i] = a->body[pos];
                else if (pos < a->pad_at + a->pad_len)
                        buf[i] = 'x';
                else
                        buf[i] = a->body[pos - a->pad_len];
        }
}

/* ------------------------------------------------------------ the stream */

struct stream {
        struct hostile_answer a; /* its own copy of the body */
        struct hostile_hooks hooks;
        bool waiting;
        tg_mono_ns next_due;
};

static void stream_free(void *cls)
{
        struct stream *st = cls;
        hostile_answer_release(&st->a);
        free(st);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct stream *st = cls;
        uint64_t left;

        if (st->waiting) {
                st->waiting = false;
                if (st->hooks.woke(st->hooks.owner))
                        return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (pos >= st->a.stop_at) {
                if (st->a.reset) {
                        st->hooks.reset(st->hooks.owner); /* a reset rather than a close */
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                }
                return MHD_CONTENT_READER_END_OF_STREAM; /* http10: the close ends it */
        }
        left = st->a.stop_at - pos;
        if (st->a.trickle_ns > 0) {
                tg_mono_ns now = clock_mono_now();
                if (now < st->next_due) {
                        /* MHD calls again after the resume: never a busy loop */
                        st->waiting = true;
                        st->hooks.wait(st->hooks.owner, st->next_due);
                        return 0;
                }
                st->next_due = now + st->a.trickle_ns;
                left = 1;
        }
        if (left > max)
                left = max;
        hostile_body_at(&st->a, pos, buf, (size_t)left);
        return (ssize_t)left;
}

struct MHD_Response *hostile_response(const struct hostile_answer *a,
                                      const struct hostile_hooks *hooks)
{
        struct MHD_Response *resp;

        if (!a->stream) {
                resp = MHD_create_response_from_buffer(a->len, a->body, MHD_RESPMEM_MUST_COPY);
        } else {
                struct stream *st = calloc(1, sizeof(*st));
                if (!st)
                        return NULL;
                st->a = *a;
                st->a.body = malloc(a->len + 1);
                if (!st->a.body) {
                        free(st);
                        return NULL;
                }
                memcpy(st->a.body, a->body, a->len + 1);
                if (a->content_type == a->ctype)
                        st->a.content_type = st->a.ctype;
                st->hooks = *hooks;
                resp =
                    MHD_create_response_from_callback(a->http10 ? MHD_SIZE_UNKNOWN : a->total,
                                                      STREAM_BLOCK, stream_read, st, stream_free);
                if (!resp) {
                        stream_free(st);
                        return NULL;
                }
        }
        if (!resp)
                return NULL;
        if (a->http10)
                MHD_set_response_options(
                    resp, MHD_RF_HTTP_1_0_SERVER | MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RO_END);
        if (a->content_type)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->content_type);
        if (a->location[0])
                MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, a->location);
        return resp;
}
