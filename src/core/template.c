/*
 * template — parse once, expand per call. See template.h.
 *
 * Invariants:
 *   - a parsed template never holds more than TEMPLATE_PARTS_MAX parts or
 *     TEMPLATE_TEXT_MAX bytes of literal text and keys: longer is refused at
 *     parse, never cut;
 *   - every field in a parsed template is one its use allowed, so expansion
 *     needs no second check against the use;
 *   - expansion only appends through a bounded builder.
 */
#include "core/template.h"

#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"

static const char *const field_names[TPL_FIELD_COUNT] = {
    [TPL_OPERATION_ID] = "operation_id",
    [TPL_PAYMENT_ID] = "payment_id",
    [TPL_AMOUNT] = "amount",
    [TPL_CURRENCY] = "currency",
    [TPL_REASON] = "reason",
    [TPL_METADATA] = "metadata",
    [TPL_METADATA_KEY] = "metadata.KEY",
    [TPL_REFUND_ID] = "refund_id",
    [TPL_METHOD] = "method",
    [TPL_PATH] = "path",
    [TPL_TIMESTAMP] = "timestamp",
    [TPL_IDEMPOTENCY_KEY] = "idempotency_key",
    [TPL_BODY_SHA256] = "body_sha256",
    [TPL_REQUEST_ID] = "request_id",
    [TPL_AMOUNT_DECIMAL] = "amount_decimal",
};

const char *template_field_name(enum tpl_field f)
{
        if ((unsigned)f >= TPL_FIELD_COUNT)
                return "?";
        return field_names[f];
}

static int fail(struct template_error *err, const char *fmt, const char *arg)
{
        if (err)
                snprintf(err->message, sizeof(err->message), fmt, arg ? arg : "");
        return TG_EPARSE;
}

/* The names allowed, for a message: "{a}, {b}, ...". */
static void allowed_list(unsigned allowed, char *buf, size_t size)
{
        struct tg_strbuf sb;

        tg_strbuf_init(&sb, buf, size);
        for (unsigned f = 0; f < TPL_FIELD_COUNT; f++) {
                if (!(allowed & TPL_SET(f)))
                        continue;
                if (sb.len > 0)
                        tg_strbuf_adds(&sb, ", ");
                tg_strbuf_adds(&sb, "{");
                tg_strbuf_adds(&sb, field_names[f]);
                tg_strbuf_adds(&sb, "}");
        }
}

static int unknown_field(struct template_error *err, unsigned allowed, const char *name, size_t len)
{
        char shown[48], list[160];

        if (!err)
                return TG_EPARSE;
        if (len >= sizeof(shown))
                len = sizeof(shown) - 1;
        for (size_t i = 0; i < len; i++)
                shown[i] = (name[i] < 0x20 || name[i] > 0x7e) ? '?' : name[i];
        shown[len] = '\0';
        allowed_list(allowed, list, sizeof(list));
        snprintf(err->message, sizeof(err->message), "unknown field {%s} (known here: %s)", shown,
                 list);
        return TG_EPARSE;
}

static bool key_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '.' || c == '-';
}

/* Adds text[0..len) to t->text, as a new literal part or extending the last
 * one. false when a bound is reached. */
static bool add_literal(struct template *t, const char *s, size_t len)
{
        size_t used = 0;

        for (unsigned i = 0; i < t->nparts; i++)
                used = t->parts[i].off + t->parts[i].len > used ? t->parts[i].off + t->parts[i].len
                                                                : used;
        if (used + len > TEMPLATE_TEXT_MAX)
                return false;
        memcpy(t->text + used, s, len);
        t->text[used + len] = '\0';
        if (t->nparts > 0 && t->parts[t->nparts - 1].field == TPL_FIELD_COUNT &&
            t->parts[t->nparts - 1].off + t->parts[t->nparts - 1].len == used) {
                t->parts[t->nparts - 1].len += (uint16_t)len;
                return true;
        }
        if (t->nparts == TEMPLATE_PARTS_MAX)
                return false;
        t->parts[t->nparts++] =
            (struct template_part){TPL_FIELD_COUNT, (uint16_t)used, (uint16_t)len};
        return true;
}

static bool add_field(struct template *t, enum tpl_field f, const char *key, size_t key_len)
{
        size_t used = 0;

        if (t->nparts == TEMPLATE_PARTS_MAX)
                return false;
        for (unsigned i = 0; i < t->nparts; i++)
                used = t->parts[i].off + t->parts[i].len > used ? t->parts[i].off + t->parts[i].len
                                                                : used;
        if (used + key_len > TEMPLATE_TEXT_MAX)
                return false;
        memcpy(t->text + used, key, key_len);
        t->text[used + key_len] = '\0';
        t->parts[t->nparts++] =
            (struct template_part){(uint8_t)f, (uint16_t)used, (uint16_t)key_len};
        return true;
}

/* The field named name[0..len), allowed or not. */
static int field_of(const char *name, size_t len, unsigned allowed, enum tpl_field *ret_field,
                    size_t *ret_key_off, struct template_error *err)
{
        static const char md[] = "metadata.";
        size_t mdl = sizeof(md) - 1;

        if (len > mdl && memcmp(name, md, mdl) == 0) {
                size_t klen = len - mdl;
                if (!(allowed & TPL_SET(TPL_METADATA_KEY)))
                        return unknown_field(err, allowed, name, len);
                if (klen > REFUND_METADATA_KEY_MAX)
                        return fail(err, "a metadata key in braces is at most 40 characters%s", "");
                for (size_t i = mdl; i < len; i++)
                        if (!key_char(name[i]))
                                return fail(
                                    err, "a metadata key may contain only A-Z a-z 0-9 _ . -%s", "");
                *ret_field = TPL_METADATA_KEY;
                *ret_key_off = mdl;
                return 0;
        }
        for (unsigned f = 0; f < TPL_FIELD_COUNT; f++) {
                if (f == TPL_METADATA_KEY)
                        continue;
                if (strlen(field_names[f]) == len && memcmp(field_names[f], name, len) == 0) {
                        if (!(allowed & TPL_SET(f)))
                                break;
                        *ret_field = (enum tpl_field)f;
                        *ret_key_off = len;
                        return 0;
                }
        }
        return unknown_field(err, allowed, name, len);
}

int template_parse(const char *text, unsigned allowed, struct template *ret,
                   struct template_error *err)
{
        struct template t;
        size_t n;

        if (!text || !ret)
                return fail(err, "no template%s", "");
        n = strnlen(text, TEMPLATE_TEXT_MAX + 1);
        if (n > TEMPLATE_TEXT_MAX)
                return fail(err, "longer than 256 bytes%s", "");
        memset(&t, 0, sizeof(t));
        for (size_t i = 0; i < n;) {
                char c = text[i];
                if (c == '{' && i + 1 < n && text[i + 1] == '{') {
                        if (!add_literal(&t, "{", 1))
                                goto too_big;
                        i += 2;
                } else if (c == '}' && i + 1 < n && text[i + 1] == '}') {
                        if (!add_literal(&t, "}", 1))
                                goto too_big;
                        i += 2;
                } else if (c == '}') {
                        return fail(err, "a lone '}' (write }} for a brace)%s", "");
                } else if (c == '\\') {
                        if (i + 1 < n && text[i + 1] == 'n') {
                                if (!add_literal(&t, "\n", 1))
                                        goto too_big;
                        } else if (i + 1 < n && text[i + 1] == '\\') {
                                if (!add_literal(&t, "\\", 1))
                                        goto too_big;
                        } else {
                                return fail(err, "a backslash is \\n or \\\\ only%s", "");
                        }
                        i += 2;
                } else if (c == '{') {
                        const char *close = memchr(text + i + 1, '}', n - i - 1);
                        enum tpl_field f;
                        size_t name_len, key_off;
                        int r;

                        if (!close)
                                return fail(err, "a '{' without its '}' (write {{ for a brace)%s",
                                            "");
                        name_len = (size_t)(close - (text + i + 1));
                        r = field_of(text + i + 1, name_len, allowed, &f, &key_off, err);
                        if (r < 0)
                                return r;
                        if (!add_field(&t, f, text + i + 1 + key_off, name_len - key_off))
                                goto too_big;
                        i += name_len + 2;
                } else {
                        size_t j = i;
                        while (j < n && text[j] != '{' && text[j] != '}' && text[j] != '\\')
                                j++;
                        if (!add_literal(&t, text + i, j - i))
                                goto too_big;
                        i = j;
                }
        }
        for (unsigned i = 0; i < t.nparts; i++) {
                if (t.parts[i].field == TPL_METADATA && t.nparts != 1)
                        return fail(err,
                                    "{metadata} is an object: it can only be a body field's "
                                    "whole value (use {metadata.KEY} inside text)%s",
                                    "");
        }
        *ret = t;
        return 0;
too_big:
        return fail(err, "too many parts (at most 24)%s", "");
}

const char *template_metadata_value(const struct template *t, const struct template_values *v)
{
        char key[REFUND_METADATA_KEY_MAX + 1];
        const struct template_part *p;

        if (t->nparts != 1 || t->parts[0].field != TPL_METADATA_KEY)
                return NULL;
        p = &t->parts[0];
        memcpy(key, t->text + p->off, p->len);
        key[p->len] = '\0';
        return v->metadata ? refund_metadata_get(v->metadata, key) : "";
}

int template_expand(const struct template *t, const struct template_values *v,
                    enum template_escape escape, struct tg_strbuf *out)
{
        for (unsigned i = 0; i < t->nparts; i++) {
                const struct template_part *p = &t->parts[i];
                const char *value;

                if (p->field == TPL_FIELD_COUNT) {
                        tg_strbuf_add(out, t->text + p->off, p->len);
                        continue;
                }
                if (p->field == TPL_METADATA)
                        return TG_EINVAL;
                if (p->field == TPL_METADATA_KEY) {
                        char key[REFUND_METADATA_KEY_MAX + 1];
                        memcpy(key, t->text + p->off, p->len);
                        key[p->len] = '\0';
                        value = v->metadata ? refund_metadata_get(v->metadata, key) : "";
                } else {
                        value = v->text[p->field];
                        if (!value)
                                return TG_ENOTFOUND;
                }
                if (escape == TEMPLATE_PATH)
                        encode_percent(ENCODE_PATH_SEGMENT, value, strlen(value), out);
                else
                        tg_strbuf_adds(out, value);
        }
        return tg_strbuf_status(out);
}

bool template_single(const struct template *t, enum tpl_field *ret_field)
{
        if (t->nparts != 1 || t->parts[0].field == TPL_FIELD_COUNT)
                return false;
        if (ret_field)
                *ret_field = (enum tpl_field)t->parts[0].field;
        return true;
}

bool template_uses(const struct template *t, enum tpl_field f)
{
        for (unsigned i = 0; i < t->nparts; i++)
                if (t->parts[i].field == (uint8_t)f)
                        return true;
        return false;
}
