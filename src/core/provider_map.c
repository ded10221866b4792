/*
 * provider_map — the provider mapping's rules, pure. See provider_map.h.
 *
 * Invariants:
 *   - every template in a map was parsed for its use, so expansion only
 *     meets fields that use allows;
 *   - a checked map can always make a path: a query path that needs the
 *     provider's refund id has a fallback by our key or a list;
 *   - names and words are bounded and spelled out as ASCII classes.
 */
#include "core/provider_map.h"

#include <stdio.h>
#include <string.h>

#include "core/currency.h"
#include "core/tg_error.h"

static int fail(struct template_error *err, const char *message)
{
        if (err)
                snprintf(err->message, sizeof(err->message), "%s", message);
        return TG_EPARSE;
}

static bool is_space(char c)
{
        return c == ' ' || c == '\t';
}

static bool name_char(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
}

/* ---- request ------------------------------------------------------------------ */

static void must_parse(const char *text, unsigned allowed, struct template *t)
{
        /* The defaults are constants: a failure here is a bug caught by the
         * unit tests, and leaves an empty template rather than garbage. */
        if (template_parse(text, allowed, t, NULL) < 0)
                memset(t, 0, sizeof(*t));
}

void request_map_default(struct request_map *m)
{
        static const char *const fields[][2] = {{"operation_id", "{operation_id}"},
                                                {"payment_id", "{payment_id}"},
                                                {"amount", "{amount}"},
                                                {"currency", "{currency}"}};

        memset(m, 0, sizeof(*m));
        m->format = BODY_FORMAT_JSON;
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                snprintf(m->fields[i].name, sizeof(m->fields[i].name), "%s", fields[i][0]);
                must_parse(fields[i][1], TPL_BODY_FIELDS, &m->fields[i].value);
        }
        m->nfields = sizeof(fields) / sizeof(fields[0]);
        must_parse("/v1/refunds", TPL_REFUND_FIELDS, &m->refunds_path);
        must_parse("/v1/refunds/{operation_id}", TPL_PATH_FIELDS, &m->query_path);
}

static bool field_name_char(char c)
{
        return name_char(c) || c == '.' || c == '[' || c == ']';
}

int body_field_parse(const char *spec, struct body_field *ret, struct template_error *err)
{
        struct body_field f;
        size_t n = 0;
        const char *p = spec;

        if (!spec)
                return fail(err, "no field");
        memset(&f, 0, sizeof(f));
        while (is_space(*p))
                p++;
        while (p[n] && !is_space(p[n]))
                n++;
        if (n == 0)
                return fail(err, "must be \"NAME TEMPLATE\", e.g. \"amount {amount}\"");
        if (n > BODY_FIELD_NAME_MAX)
                return fail(err, "a field name is at most 63 characters");
        for (size_t i = 0; i < n; i++)
                if (!field_name_char(p[i]))
                        return fail(err, "a field name may contain only A-Z a-z 0-9 _ - . [ ]");
        for (size_t i = 0; i + 1 < n; i++)
                if (p[i] == '.' && p[i + 1] == '.')
                        return fail(err, "a field name must not hold \"..\"");
        if (p[0] == '.' || p[n - 1] == '.')
                return fail(err, "a field name must not start or end with '.'");
        memcpy(f.name, p, n);
        p += n;
        while (is_space(*p))
                p++;
        if (!*p)
                return fail(err, "must be \"NAME TEMPLATE\": the template is missing");
        if (template_parse(p, TPL_BODY_FIELDS, &f.value, err) < 0)
                return TG_EPARSE;
        *ret = f;
        return 0;
}

int map_path_parse(enum map_path kind, const char *text, struct template *ret,
                   struct template_error *err)
{
        unsigned allowed = kind == MAP_PATH_QUERY ? TPL_PATH_FIELDS : TPL_REFUND_FIELDS;
        struct template t;

        if (!text || text[0] != '/')
                return fail(err, "must start with /");
        for (const char *p = text; *p; p++) {
                unsigned char c = (unsigned char)*p;
                if (c <= 0x20 || c >= 0x7f)
                        return fail(err, "must not contain spaces or control bytes");
        }
        if (template_parse(text, allowed, &t, err) < 0)
                return TG_EPARSE;
        if (kind == MAP_PATH_QUERY && !template_uses(&t, TPL_OPERATION_ID) &&
            !template_uses(&t, TPL_REFUND_ID))
                return fail(err, "must contain {operation_id} or {refund_id}");
        if (kind == MAP_PATH_QUERY_FALLBACK && !template_uses(&t, TPL_OPERATION_ID))
                return fail(err, "must contain {operation_id}");
        *ret = t;
        return 0;
}

static int check_fail(struct template_error *err, const char **ret_key, const char *key,
                      const char *message, const char *a, const char *b)
{
        if (ret_key)
                *ret_key = key;
        if (err)
                snprintf(err->message, sizeof(err->message), message, a, b);
        return TG_EINVAL;
}

/* a is b, or a is an object holding b (a "." prefix of b). */
static bool json_name_clash(const char *a, const char *b)
{
        size_t la = strlen(a);

        return strncmp(a, b, la) == 0 && (b[la] == '\0' || b[la] == '.');
}

int request_map_check(const struct request_map *m, const char **ret_key, struct template_error *err)
{
        if (m->nfields == 0)
                return check_fail(err, ret_key, "body_field", "the body has no field%s%s", "", "");
        for (unsigned i = 0; i < m->nfields; i++) {
                for (unsigned j = 0; j < m->nfields; j++) {
                        const char *a = m->fields[i].name, *b = m->fields[j].name;
                        if (i == j)
                                continue;
                        if (strcmp(a, b) == 0)
                                return check_fail(err, ret_key, "body_field",
                                                  "field \"%s\" is set twice%s", a, "");
                        if (m->format == BODY_FORMAT_JSON && json_name_clash(a, b))
                                return check_fail(err, ret_key, "body_field",
                                                  "field \"%s\" is a value and also holds \"%s\"",
                                                  a, b);
                }
        }
        /* with replay, a POST that told no refund id is replayed instead */
        if (template_uses(&m->query_path, TPL_REFUND_ID) && !m->has_fallback && !m->has_list &&
            !m->replay)
                return check_fail(err, ret_key, "query_fallback_path",
                                  "required (or list_path): query_path uses {refund_id}, which is "
                                  "unknown until the provider answers a POST%s%s",
                                  "", "");
        if (!template_uses(&m->query_path, TPL_REFUND_ID) && m->has_fallback)
                return check_fail(err, ret_key, "query_fallback_path",
                                  "set but never used: query_path does not use {refund_id}%s%s", "",
                                  "");
        bool without_id = m->nreconcile == 0;
        for (unsigned i = 0; i < m->nreconcile; i++) {
                enum reconcile_strategy s = m->reconcile[i];
                without_id = without_id || s != RECONCILE_REFUND_ID;
                if (s == RECONCILE_LIST && !m->has_list)
                        return check_fail(err, ret_key, "reconcile", "\"%s\" needs list_path%s",
                                          reconcile_name(s), "");
                if (s == RECONCILE_REFUND_ID && !template_uses(&m->query_path, TPL_REFUND_ID))
                        return check_fail(err, ret_key, "reconcile",
                                          "\"%s\" needs a query_path with {refund_id}%s",
                                          reconcile_name(s), "");
                if (s == RECONCILE_KEY && template_uses(&m->query_path, TPL_REFUND_ID) &&
                    !m->has_fallback)
                        return check_fail(err, ret_key, "reconcile",
                                          "\"%s\" needs a path by {operation_id} (query_path or "
                                          "query_fallback_path)%s",
                                          reconcile_name(s), "");
        }
        if (!without_id && !m->replay)
                return check_fail(err, ret_key, "reconcile",
                                  "needs key or list too: a POST that timed out told us no refund "
                                  "id%s%s",
                                  "", "");
        return 0;
}

static const char *const reconcile_words[RECONCILE_STRATEGIES] = {"refund_id", "key", "list"};

const char *reconcile_name(enum reconcile_strategy s)
{
        return (unsigned)s < RECONCILE_STRATEGIES ? reconcile_words[s] : "?";
}

int reconcile_parse(const char *text, struct request_map *m, struct template_error *err)
{
        enum reconcile_strategy order[RECONCILE_STRATEGIES];
        unsigned n = 0;
        bool replay = false, notification = false;
        const char *p = text;

        if (!text)
                return fail(err, "no strategy");
        for (;;) {
                size_t len;
                unsigned k;

                while (is_space(*p) || *p == ',')
                        p++;
                if (!*p)
                        break;
                len = strcspn(p, " \t,");
                if (len == 6 && strncmp(p, "replay", 6) == 0) {
                        if (replay)
                                return fail(err, "a strategy is named twice");
                        replay = true;
                        p += len;
                        continue;
                }
                if (len == 12 && strncmp(p, "notification", 12) == 0) {
                        if (notification)
                                return fail(err, "a strategy is named twice");
                        notification = true;
                        p += len;
                        continue;
                }
                for (k = 0; k < RECONCILE_STRATEGIES; k++)
                        if (strlen(reconcile_words[k]) == len &&
                            strncmp(p, reconcile_words[k], len) == 0)
                                break;
                if (k == RECONCILE_STRATEGIES)
                        return fail(err, "a strategy is one of refund_id, key, list, replay, "
                                         "notification");
                for (unsigned i = 0; i < n; i++)
                        if (order[i] == (enum reconcile_strategy)k)
                                return fail(err, "a strategy is named twice");
                order[n++] = (enum reconcile_strategy)k;
                p += len;
        }
        /* the provider's notification as the only source: there is no
         * query to name beside it (a provider with one polls it instead) */
        if (notification && n > 0)
                return fail(err, "notification stands alone (with replay at most): a provider "
                                 "with a query polls it instead");
        if (n == 0 && !notification)
                return fail(err, "name at least one of refund_id, key, list");
        memcpy(m->reconcile, order, n * sizeof(order[0]));
        m->nreconcile = n;
        m->replay = replay;
        m->notification = notification;
        return 0;
}

/* Whether strategy s has its path in m and can make it for v. */
static bool strategy_applies(const struct request_map *m, enum reconcile_strategy s,
                             const struct template_values *v)
{
        bool by_refund_id = template_uses(&m->query_path, TPL_REFUND_ID);

        switch (s) {
        case RECONCILE_REFUND_ID:
                return by_refund_id && v->text[TPL_REFUND_ID];
        case RECONCILE_KEY:
                return !by_refund_id || m->has_fallback;
        case RECONCILE_LIST:
                return m->has_list;
        }
        return false;
}

int request_map_strategy(const struct request_map *m, const struct template_values *v,
                         enum reconcile_strategy *ret)
{
        static const enum reconcile_strategy by_default[RECONCILE_STRATEGIES] = {
            RECONCILE_REFUND_ID, RECONCILE_KEY, RECONCILE_LIST};
        const enum reconcile_strategy *order = m->nreconcile ? m->reconcile : by_default;
        unsigned n = m->nreconcile ? m->nreconcile : RECONCILE_STRATEGIES;

        for (unsigned i = 0; i < n; i++) {
                if (strategy_applies(m, order[i], v)) {
                        *ret = order[i];
                        return 0;
                }
        }
        return TG_ENOTFOUND;
}

void map_values_for(const struct refund_request *req, const struct refund_metadata *metadata,
                    const char *refund_id, char amount_buf[MAP_AMOUNT_BUF],
                    struct template_values *ret)
{
        char *decimal = amount_buf + MAP_AMOUNT_BUF / 2;

        memset(ret, 0, sizeof(*ret));
        snprintf(amount_buf, MAP_AMOUNT_BUF / 2, "%lld", (long long)req->amount);
        if (currency_decimal(req->amount, req->currency, decimal, MAP_AMOUNT_BUF / 2) == 0)
                ret->text[TPL_AMOUNT_DECIMAL] = decimal;
        ret->text[TPL_OPERATION_ID] = req->operation_id;
        ret->text[TPL_IDEMPOTENCY_KEY] = req->operation_id;
        ret->text[TPL_PAYMENT_ID] = req->payment_id;
        ret->text[TPL_AMOUNT] = amount_buf;
        ret->text[TPL_CURRENCY] = req->currency;
        ret->text[TPL_REASON] = req->reason;
        ret->text[TPL_REFUND_ID] = refund_id && refund_id[0] ? refund_id : NULL;
        ret->metadata = metadata;
}

int request_map_path(const struct request_map *m, enum classify_request request,
                     const struct template_values *v, struct tg_strbuf *out)
{
        const struct template *t = &m->refunds_path;
        enum reconcile_strategy s;

        if (request == CLASSIFY_QUERY) {
                if (request_map_strategy(m, v, &s) < 0)
                        return TG_ENOTFOUND;
                t = s == RECONCILE_LIST ? &m->list_path
                    : template_uses(&m->query_path, TPL_REFUND_ID) && s == RECONCILE_KEY
                        ? &m->query_fallback_path
                        : &m->query_path;
        }
        return template_expand(t, v, TEMPLATE_PATH, out);
}

int request_map_list_cursor(const struct request_map *m, const char *cursor, struct tg_strbuf *out)
{
        if (!m->list_cursor_param[0] || !cursor || !cursor[0])
                return TG_EINVAL;
        tg_strbuf_adds(out, memchr(out->buf, '?', out->len) ? "&" : "?");
        tg_strbuf_adds(out, m->list_cursor_param);
        tg_strbuf_adds(out, "=");
        encode_percent(ENCODE_PATH_SEGMENT, cursor, strlen(cursor), out);
        return tg_strbuf_status(out);
}

bool list_cursor_param_ok(const char *text)
{
        size_t n = strlen(text);

        if (n == 0 || n >= sizeof(((struct request_map *)0)->list_cursor_param))
                return false;
        for (const char *p = text; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || strchr("-._~", *p)))
                        return false;
        return true;
}

bool body_field_omitted(const struct body_field *f, const struct template_values *v)
{
        enum tpl_field only;

        if (!template_single(&f->value, &only))
                return false;
        switch (only) {
        case TPL_REASON:
                return !v->text[TPL_REASON] || !v->text[TPL_REASON][0];
        case TPL_METADATA_KEY:
                return template_metadata_value(&f->value, v)[0] == '\0';
        case TPL_METADATA:
                return !v->metadata || v->metadata->n == 0;
        default:
                return false;
        }
}

int request_map_form_body(const struct request_map *m, const struct template_values *v,
                          struct tg_strbuf *out)
{
        char value[TEMPLATE_TEXT_MAX * 4 + 1024];
        bool first = true;

        for (unsigned i = 0; i < m->nfields; i++) {
                const struct body_field *f = &m->fields[i];
                enum tpl_field only;
                struct tg_strbuf vb;
                int r;

                if (body_field_omitted(f, v))
                        continue;
                if (template_single(&f->value, &only) && only == TPL_METADATA) {
                        for (unsigned k = 0; k < v->metadata->n; k++) {
                                const struct refund_metadata_pair *p = &v->metadata->pairs[k];
                                if (!first)
                                        tg_strbuf_add(out, "&", 1);
                                first = false;
                                encode_percent(ENCODE_FORM, f->name, strlen(f->name), out);
                                encode_percent(ENCODE_FORM, "[", 1, out);
                                encode_percent(ENCODE_FORM, p->key, strlen(p->key), out);
                                encode_percent(ENCODE_FORM, "]", 1, out);
                                tg_strbuf_add(out, "=", 1);
                                encode_percent(ENCODE_FORM, p->value, strlen(p->value), out);
                        }
                        continue;
                }
                tg_strbuf_init(&vb, value, sizeof(value));
                r = template_expand(&f->value, v, TEMPLATE_RAW, &vb);
                if (r < 0)
                        return r;
                if (!first)
                        tg_strbuf_add(out, "&", 1);
                first = false;
                encode_percent(ENCODE_FORM, f->name, strlen(f->name), out);
                tg_strbuf_add(out, "=", 1);
                encode_percent(ENCODE_FORM, vb.buf, vb.len, out);
        }
        return tg_strbuf_status(out);
}

/* ---- reply -------------------------------------------------------------------- */

static void must_source(const char *text, struct field_source *s)
{
        if (field_source_parse(text, s, NULL) < 0)
                memset(s, 0, sizeof(*s));
}

static void must_list(const char *text, struct status_list *l)
{
        if (status_list_parse(text, l, NULL) < 0)
                memset(l, 0, sizeof(*l));
}

void reply_map_default(struct reply_map *m)
{
        memset(m, 0, sizeof(*m));
        must_source("status", &m->status);
        must_source("refund_id", &m->refund_id);
        must_source("error.code", &m->error_code);
        must_source("failure_code", &m->failure_code);
        must_source("error.retryable", &m->retryable);
        must_list("succeeded", &m->succeeded);
        must_list("failed", &m->failed);
        must_list("processing", &m->processing);
}

static bool header_char(char c)
{
        return name_char(c) || (c != '\0' && strchr("!#$%&'*+.^`|~", c));
}

static int path_parse(const char *p, size_t n, struct field_path *ret, struct template_error *err)
{
        static const char hdr[] = "header:";
        size_t hl = sizeof(hdr) - 1;
        struct field_path fp;

        memset(&fp, 0, sizeof(fp));
        if (n > hl && strncmp(p, hdr, hl) == 0) {
                if (n - hl >= sizeof(fp.header_name))
                        return fail(err, "a header name is at most 63 characters");
                for (size_t i = hl; i < n; i++)
                        if (!header_char(p[i]))
                                return fail(err, "not a valid HTTP header name after header:");
                fp.header = true;
                memcpy(fp.header_name, p + hl, n - hl);
                *ret = fp;
                return 0;
        }
        if (n == 1 && p[0] == '.') {
                /* the value itself: a list answer that is a bare array */
                *ret = fp;
                return 0;
        }
        for (size_t i = 0; i <= n;) {
                size_t j = i;
                bool digits = true;
                struct field_seg *s;

                while (j < n && p[j] != '.') {
                        if (!name_char(p[j]))
                                return fail(err, "a path step may contain only A-Z a-z 0-9 _ - "
                                                 "(steps are separated by '.')");
                        digits = digits && p[j] >= '0' && p[j] <= '9';
                        j++;
                }
                if (j == i)
                        return fail(err, "an empty path step");
                if (fp.nseg == FIELD_PATH_SEGS_MAX)
                        return fail(err, "a path has at most 8 steps");
                if (j - i > FIELD_PATH_NAME_MAX)
                        return fail(err, "a path step is at most 47 characters");
                s = &fp.seg[fp.nseg++];
                memcpy(s->name, p + i, j - i);
                if (digits) {
                        if (j - i > 4)
                                return fail(err, "an array index is at most 9999");
                        s->is_index = true;
                        for (size_t k = i; k < j; k++)
                                s->index = s->index * 10 + (unsigned)(p[k] - '0');
                }
                i = j + 1;
        }
        *ret = fp;
        return 0;
}

int field_source_parse(const char *text, struct field_source *ret, struct template_error *err)
{
        struct field_source s;
        const char *p = text;

        if (!text)
                return fail(err, "no field");
        memset(&s, 0, sizeof(s));
        for (;;) {
                size_t n = 0;
                while (is_space(*p))
                        p++;
                if (!*p)
                        break;
                while (p[n] && !is_space(p[n]))
                        n++;
                if (s.n == FIELD_SOURCE_ALTS)
                        return fail(err, "at most 3 alternatives");
                if (path_parse(p, n, &s.alt[s.n], err) < 0)
                        return TG_EPARSE;
                s.n++;
                p += n;
        }
        *ret = s;
        return 0;
}

static bool word_char(char c)
{
        return name_char(c) || c == '.' || c == ':';
}

int status_list_parse(const char *text, struct status_list *ret, struct template_error *err)
{
        struct status_list l;
        const char *p = text;

        if (!text)
                return fail(err, "no list");
        memset(&l, 0, sizeof(l));
        for (;;) {
                size_t n = 0;
                while (is_space(*p))
                        p++;
                while (p[n] && p[n] != ',' && !is_space(p[n]))
                        n++;
                if (n == 0)
                        return fail(err, "must be words separated by commas, none empty");
                if (n > 30)
                        return fail(err, "a status word is at most 30 characters");
                for (size_t i = 0; i < n; i++)
                        if (!word_char(p[i]))
                                return fail(err, "a status word may contain only A-Z a-z 0-9 "
                                                 "and . _ : -");
                if (l.n == STATUS_VALUES_MAX)
                        return fail(err, "at most 8 words");
                memcpy(l.value[l.n++], p, n);
                p += n;
                while (is_space(*p))
                        p++;
                if (!*p)
                        break;
                if (*p != ',')
                        return fail(err, "must be words separated by commas");
                p++;
        }
        *ret = l;
        return 0;
}

static bool in_list(const struct status_list *l, const char *word)
{
        for (unsigned i = 0; i < l->n; i++)
                if (strcmp(l->value[i], word) == 0)
                        return true;
        return false;
}

int reply_map_check(const struct reply_map *m, unsigned ret_lists[2], struct template_error *err)
{
        const struct status_list *lists[3] = {&m->succeeded, &m->failed, &m->processing};

        for (int a = 0; a < 3; a++)
                for (int b = a + 1; b < 3; b++)
                        for (unsigned i = 0; i < lists[a]->n; i++)
                                if (in_list(lists[b], lists[a]->value[i])) {
                                        if (ret_lists) {
                                                ret_lists[0] = (unsigned)a;
                                                ret_lists[1] = (unsigned)b;
                                        }
                                        if (err)
                                                snprintf(err->message, sizeof(err->message),
                                                         "status word \"%s\" is in two lists",
                                                         lists[a]->value[i]);
                                        return TG_EINVAL;
                                }
        return 0;
}

void reply_map_status(const struct reply_map *m, const char *raw, char *dst, size_t dst_size)
{
        const char *word = raw;

        if (dst_size == 0)
                return;
        if (raw[0] && in_list(&m->succeeded, raw))
                word = "succeeded";
        else if (raw[0] && in_list(&m->failed, raw))
                word = "failed";
        else if (raw[0] && in_list(&m->processing, raw))
                word = "processing";
        classify_copy_field(dst, dst_size, word, strlen(word));
}

/* ASCII only, whatever the locale. */
static bool same_word(const char *a, const char *lower)
{
        for (; *a && *lower; a++, lower++) {
                char c = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
                if (c != *lower)
                        return false;
        }
        return *a == '\0' && *lower == '\0';
}

enum tg_flag reply_flag_parse(const char *text)
{
        if (same_word(text, "true") || same_word(text, "yes") || strcmp(text, "1") == 0)
                return TG_FLAG_TRUE;
        if (same_word(text, "false") || same_word(text, "no") || strcmp(text, "0") == 0)
                return TG_FLAG_FALSE;
        return TG_FLAG_ABSENT;
}
