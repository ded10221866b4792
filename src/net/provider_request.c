/*
 * provider_request — bodies, metadata text and signatures. See the header.
 *
 * Invariants:
 *   - a JSON body holds exactly the map's fields, in the map's order, left
 *     out only where body_field_omitted() says so; {amount} alone is a
 *     number, {metadata} alone an object, anything else a string;
 *   - the signature is platform/digest.c's digest_sign(), which keeps the
 *     canonical string and the MAC on the stack only and wipes them;
 *   - jansson types never leave this file.
 */
#include "net/provider_request.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/encode.h"
#include "core/strnum.h"
#include "core/tg_error.h"
#include "platform/digest.h"

int provider_metadata_parse(const char *text, struct refund_metadata *ret)
{
        struct refund_metadata md;
        struct refund_problem problem;
        json_error_t jerr;
        const char *key;
        json_t *root, *value;
        int r = 0;

        memset(&md, 0, sizeof(md));
        if (!text)
                return TG_EPARSE;
        if (text[0] == '\0') {
                *ret = md;
                return 0;
        }
        root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(root)) {
                json_decref(root);
                return TG_EPARSE;
        }
        json_object_foreach(root, key, value)
        {
                if (!json_is_string(value) ||
                    refund_metadata_add(&md, key, strlen(key), json_string_value(value),
                                        json_string_length(value), &problem) < 0) {
                        r = TG_EPARSE;
                        break;
                }
        }
        json_decref(root);
        if (r == 0)
                *ret = md;
        return r;
}

int provider_metadata_text(const struct refund_metadata *md, char *dst, size_t size)
{
        json_t *o;
        char *text;
        size_t len;

        if (size == 0)
                return TG_EFULL;
        dst[0] = '\0';
        if (md->n == 0)
                return 0;
        o = json_object();
        if (!o)
                return TG_ENOMEM;
        for (unsigned i = 0; i < md->n; i++)
                json_object_set_new(o, md->pairs[i].key, json_string(md->pairs[i].value));
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!text)
                return TG_ENOMEM;
        len = strlen(text);
        if (len >= size) {
                free(text);
                return TG_EFULL;
        }
        memcpy(dst, text, len + 1);
        free(text);
        return 0;
}

const char *provider_request_content_type(const struct request_map *map)
{
        return map->format == BODY_FORMAT_FORM ? "application/x-www-form-urlencoded"
                                               : "application/json";
}

/* Sets value at the dotted name inside root, making objects on the way. A
 * checked map never clashes; a clash here is TG_EINVAL. Steals value. */
static int set_at(json_t *root, const char *name, json_t *value)
{
        char step[BODY_FIELD_NAME_MAX + 1];
        json_t *at = root;
        const char *p = name;

        for (;;) {
                const char *dot = strchr(p, '.');
                size_t n = dot ? (size_t)(dot - p) : strlen(p);
                json_t *next;

                memcpy(step, p, n);
                step[n] = '\0';
                if (!dot) {
                        if (json_object_get(at, step)) {
                                json_decref(value);
                                return TG_EINVAL;
                        }
                        return json_object_set_new(at, step, value) == 0 ? 0 : TG_ENOMEM;
                }
                next = json_object_get(at, step);
                if (!next) {
                        next = json_object();
                        if (!next || json_object_set_new(at, step, next) != 0) {
                                json_decref(value);
                                return TG_ENOMEM;
                        }
                } else if (!json_is_object(next)) {
                        json_decref(value);
                        return TG_EINVAL;
                }
                at = next;
                p = dot + 1;
        }
}

static json_t *field_value(const struct body_field *f, const struct template_values *v)
{
        char text[TEMPLATE_TEXT_MAX * 4 + 1024];
        struct tg_strbuf sb;
        enum tpl_field only;

        if (template_single(&f->value, &only) && only == TPL_AMOUNT) {
                int64_t amount;
                if (!v->text[TPL_AMOUNT] ||
                    strnum_i64(v->text[TPL_AMOUNT], INT64_MIN, INT64_MAX, &amount) < 0)
                        return NULL;
                return json_integer((json_int_t)amount);
        }
        if (template_single(&f->value, &only) && only == TPL_METADATA) {
                json_t *o = json_object();
                for (unsigned i = 0; o && v->metadata && i < v->metadata->n; i++)
                        json_object_set_new(o, v->metadata->pairs[i].key,
                                            json_string(v->metadata->pairs[i].value));
                return o;
        }
        tg_strbuf_init(&sb, text, sizeof(text));
        if (template_expand(&f->value, v, TEMPLATE_RAW, &sb) < 0)
                return NULL;
        return json_stringn(sb.buf, sb.len);
}

static int json_body(const struct request_map *map, const struct template_values *v,
                     char **ret_body, size_t *ret_len)
{
        json_t *root = json_object();
        char *text;
        int r = 0;

        if (!root)
                return TG_ENOMEM;
        for (unsigned i = 0; i < map->nfields && r == 0; i++) {
                const struct body_field *f = &map->fields[i];
                json_t *value;

                if (body_field_omitted(f, v))
                        continue;
                value = field_value(f, v);
                r = value ? set_at(root, f->name, value) : TG_EINVAL;
        }
        text = r == 0 ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(root);
        if (r < 0)
                return r;
        if (!text)
                return TG_ENOMEM;
        if (strlen(text) > PROVIDER_BODY_MAX) {
                free(text);
                return TG_EFULL;
        }
        *ret_len = strlen(text);
        *ret_body = text;
        return 0;
}

int provider_request_body(const struct request_map *map, const struct template_values *values,
                          char **ret_body, size_t *ret_len)
{
        struct tg_strbuf sb;
        char *buf;
        int r;

        if (map->format == BODY_FORMAT_JSON)
                return json_body(map, values, ret_body, ret_len);
        buf = malloc(PROVIDER_BODY_MAX + 1);
        if (!buf)
                return TG_ENOMEM;
        tg_strbuf_init(&sb, buf, PROVIDER_BODY_MAX + 1);
        r = request_map_form_body(map, values, &sb);
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret_len = sb.len;
        *ret_body = buf;
        return 0;
}

void provider_body_sha256(const char *body, size_t len, char ret_hex[65])
{
        if (digest_sha256_hex(body, len, ret_hex) < 0)
                ret_hex[0] = '\0'; /* libcrypto refused: no digest, never a wrong one */
}

int provider_sign(const struct template *canonical, const struct template_values *values,
                  const unsigned char *key, size_t key_len, enum signature_encoding encoding,
                  const char *prefix, char *dst, size_t dst_size)
{
        if (!key || key_len == 0 || key_len > (size_t)INT32_MAX || dst_size == 0)
                return TG_EINVAL;
        return digest_sign(canonical, values, key, key_len,
                           encoding == SIGNATURE_BASE64 ? DIGEST_BASE64 : DIGEST_HEX, prefix, dst,
                           dst_size);
}
