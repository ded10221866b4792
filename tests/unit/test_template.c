/*
 * Tests of core/template and core/encode: parsing (every field by name, the
 * allowed sets, escapes, unknown fields named in the message, bounds) and
 * expansion (raw and path-escaped values, missing values, metadata keys);
 * the percent, hex and base64 encodings against known vectors; the UTF-8
 * text check at its edges.
 */
#include <string.h>

#include "check.h"
#include "core/encode.h"
#include "core/template.h"
#include "core/tg_error.h"

static void expand_ok(const char *text, unsigned allowed, const struct template_values *v,
                      enum template_escape esc, const char *want)
{
        struct template t;
        struct template_error err = {{0}};
        char buf[512];
        struct tg_strbuf sb;
        int r = template_parse(text, allowed, &t, &err);

        CHECK(r == 0, "parse %s: %s", text, err.message);
        tg_strbuf_init(&sb, buf, sizeof(buf));
        r = template_expand(&t, v, esc, &sb);
        CHECK(r == 0, "expand %s: %d", text, r);
        CHECK(strcmp(buf, want) == 0, "%s -> [%s], want [%s]", text, buf, want);
}

static void parse_fails(const char *text, unsigned allowed, const char *in_message)
{
        struct template t;
        struct template_error err = {{0}};
        int r = template_parse(text, allowed, &t, &err);

        CHECK(r == TG_EPARSE, "%s parsed", text);
        CHECK(strstr(err.message, in_message) != NULL, "%s: message [%s] lacks [%s]", text,
              err.message, in_message);
}

static struct refund_metadata md;

static void values(struct template_values *v)
{
        struct refund_problem p;

        memset(&md, 0, sizeof(md));
        refund_metadata_add(&md, "order", 5, "A 1/2", 5, &p);
        refund_metadata_add(&md, "desk", 4, "n\xc3\xa9", 3, &p);
        memset(v, 0, sizeof(*v));
        v->text[TPL_OPERATION_ID] = "op-1";
        v->text[TPL_PAYMENT_ID] = "pay/1 x";
        v->text[TPL_AMOUNT] = "1500";
        v->text[TPL_CURRENCY] = "TWD";
        v->text[TPL_REASON] = "";
        v->text[TPL_METHOD] = "POST";
        v->text[TPL_PATH] = "/v1/refunds";
        v->text[TPL_TIMESTAMP] = "1700000000";
        v->text[TPL_IDEMPOTENCY_KEY] = "op-1";
        v->text[TPL_BODY_SHA256] = "ab";
        v->text[TPL_REQUEST_ID] = "tg-1";
        v->metadata = &md;
}

static void test_parse_and_expand(void **state)
{
        struct template_values v;

        (void)state;
        values(&v);
        expand_ok("", TPL_REFUND_FIELDS, &v, TEMPLATE_RAW, "");
        expand_ok("plain", TPL_REFUND_FIELDS, &v, TEMPLATE_RAW, "plain");
        expand_ok("{operation_id}", TPL_REFUND_FIELDS, &v, TEMPLATE_RAW, "op-1");
        expand_ok("a{{b}}c", TPL_REFUND_FIELDS, &v, TEMPLATE_RAW, "a{b}c");
        expand_ok("x\\ny\\\\z", TPL_SIGNING_FIELDS, &v, TEMPLATE_RAW, "x\ny\\z");
        expand_ok("{method}\\n{path}\\n{timestamp}\\n{idempotency_key}\\n{body_sha256}",
                  TPL_SIGNING_FIELDS, &v, TEMPLATE_RAW, "POST\n/v1/refunds\n1700000000\nop-1\nab");
        expand_ok("{request_id}", TPL_SIGNING_FIELDS, &v, TEMPLATE_RAW, "tg-1");
        expand_ok("/v1/p/{payment_id}/r", TPL_PATH_FIELDS, &v, TEMPLATE_PATH,
                  "/v1/p/pay%2F1%20x/r");
        expand_ok("{amount} {currency}", TPL_REFUND_FIELDS, &v, TEMPLATE_RAW, "1500 TWD");
        expand_ok("[{metadata.order}|{metadata.none}]", TPL_REFUND_FIELDS, &v, TEMPLATE_RAW,
                  "[A 1/2|]");
        expand_ok("{metadata.desk}", TPL_REFUND_FIELDS, &v, TEMPLATE_PATH, "n%C3%A9");
        expand_ok("r={reason}.", TPL_REFUND_FIELDS, &v, TEMPLATE_RAW, "r=.");
}

static void test_refused(void **state)
{
        (void)state;
        parse_fails("{nope}", TPL_REFUND_FIELDS, "unknown field {nope}");
        parse_fails("{nope}", TPL_REFUND_FIELDS, "{operation_id}");
        /* a field that exists but is not allowed in this use */
        parse_fails("{refund_id}", TPL_REFUND_FIELDS, "unknown field {refund_id}");
        parse_fails("{method}", TPL_PATH_FIELDS, "unknown field {method}");
        parse_fails("{operation_id}", TPL_SIGNING_FIELDS, "unknown field {operation_id}");
        parse_fails("{metadata}", TPL_REFUND_FIELDS, "unknown field {metadata}");
        parse_fails("x{metadata}", TPL_BODY_FIELDS, "whole value");
        parse_fails("{metadata.}", TPL_REFUND_FIELDS, "unknown field");
        parse_fails("{metadata.a b}", TPL_REFUND_FIELDS, "metadata key");
        parse_fails("{metadata.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}", TPL_REFUND_FIELDS,
                    "at most 40");
        parse_fails("{operation_id", TPL_REFUND_FIELDS, "without its '}'");
        parse_fails("a}b", TPL_REFUND_FIELDS, "lone '}'");
        parse_fails("a\\tb", TPL_REFUND_FIELDS, "backslash");
        parse_fails("a\\", TPL_REFUND_FIELDS, "backslash");
        parse_fails("{}", TPL_REFUND_FIELDS, "unknown field {}");

        char long_text[300];
        memset(long_text, 'a', sizeof(long_text) - 1);
        long_text[sizeof(long_text) - 1] = '\0';
        parse_fails(long_text, TPL_REFUND_FIELDS, "longer than 256");
        /* 25 fields: more parts than the bound */
        char many[8 * 25 + 1];
        for (int i = 0; i < 25; i++)
                memcpy(many + 8 * i, "{amount}", 8);
        many[8 * 25] = '\0';
        parse_fails(many, TPL_REFUND_FIELDS, "too many parts");
}

static void test_expand_limits(void **state)
{
        struct template t;
        struct template_values v;
        char small[8];
        struct tg_strbuf sb;

        (void)state;
        values(&v);
        assert_int_equal(template_parse("{refund_id}", TPL_PATH_FIELDS, &t, NULL), 0);
        tg_strbuf_init(&sb, small, sizeof(small));
        assert_int_equal(template_expand(&t, &v, TEMPLATE_RAW, &sb), TG_ENOTFOUND);
        v.text[TPL_REFUND_ID] = "re_123456789";
        tg_strbuf_init(&sb, small, sizeof(small));
        assert_int_equal(template_expand(&t, &v, TEMPLATE_RAW, &sb), TG_EFULL);
        CHECK(strlen(small) < sizeof(small), "overflowed builder stays terminated");
        assert_int_equal(template_parse("{metadata}", TPL_BODY_FIELDS, &t, NULL), 0);
        tg_strbuf_init(&sb, small, sizeof(small));
        assert_int_equal(template_expand(&t, &v, TEMPLATE_RAW, &sb), TG_EINVAL);

        enum tpl_field f;
        assert_true(template_single(&t, &f));
        assert_int_equal(f, TPL_METADATA);
        assert_int_equal(template_parse("x{amount}", TPL_BODY_FIELDS, &t, NULL), 0);
        assert_false(template_single(&t, NULL));
        assert_true(template_uses(&t, TPL_AMOUNT));
        assert_false(template_uses(&t, TPL_CURRENCY));
        assert_int_equal(template_parse("{metadata.order}", TPL_BODY_FIELDS, &t, NULL), 0);
        assert_string_equal(template_metadata_value(&t, &v), "A 1/2");
        assert_int_equal(template_parse("{amount}", TPL_BODY_FIELDS, &t, NULL), 0);
        assert_null(template_metadata_value(&t, &v));
        assert_string_equal(template_field_name(TPL_BODY_SHA256), "body_sha256");
        assert_string_equal(template_field_name((enum tpl_field)99), "?");
}

static void enc(void (*fn)(const unsigned char *, size_t, struct tg_strbuf *), const char *in,
                const char *want)
{
        char buf[128];
        struct tg_strbuf sb;

        tg_strbuf_init(&sb, buf, sizeof(buf));
        fn((const unsigned char *)in, strlen(in), &sb);
        CHECK(strcmp(buf, want) == 0, "[%s] -> [%s], want [%s]", in, buf, want);
}

static void test_encodings(void **state)
{
        char buf[64];
        struct tg_strbuf sb;

        (void)state;
        /* RFC 4648 section 10 */
        enc(encode_base64, "", "");
        enc(encode_base64, "f", "Zg==");
        enc(encode_base64, "fo", "Zm8=");
        enc(encode_base64, "foo", "Zm9v");
        enc(encode_base64, "foob", "Zm9vYg==");
        enc(encode_base64, "fooba", "Zm9vYmE=");
        enc(encode_base64, "foobar", "Zm9vYmFy");
        enc(encode_hex, "\x01\xab\xff", "01abff");
        tg_strbuf_init(&sb, buf, sizeof(buf));
        encode_percent(ENCODE_FORM, "a b&c=d~e*", 10, &sb);
        assert_string_equal(buf, "a+b%26c%3Dd~e%2A");
        tg_strbuf_init(&sb, buf, sizeof(buf));
        encode_percent(ENCODE_PATH_SEGMENT, "a b/\xc3\xa9", 6, &sb);
        assert_string_equal(buf, "a%20b%2F%C3%A9");
        /* the builder: an append that does not fit marks it, nothing past */
        tg_strbuf_init(&sb, buf, 4);
        tg_strbuf_adds(&sb, "abc");
        assert_int_equal(tg_strbuf_status(&sb), 0);
        tg_strbuf_adds(&sb, "d");
        assert_int_equal(tg_strbuf_status(&sb), TG_EFULL);
        assert_string_equal(buf, "abc");
}

static void test_utf8(void **state)
{
        static const struct {
                const char *s;
                bool ok;
        } rows[] = {
            {"plain text", true},
            {"caf\xc3\xa9", true},
            {"\xe4\xb8\xad\xe6\x96\x87", true},
            {"\xf0\x9f\x98\x80", true},
            {"tab\there", false},
            {"del\x7f", false},
            {"\xc2\x85", false},         /* C1 control */
            {"\xc0\xaf", false},         /* overlong */
            {"\xe0\x80\xaf", false},     /* overlong */
            {"\xed\xa0\x80", false},     /* surrogate */
            {"\xf4\x90\x80\x80", false}, /* past U+10FFFF */
            {"\xc3", false},             /* cut */
            {"\xa9", false},             /* lone continuation */
        };

        (void)state;
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
                CHECK(encode_utf8_text_ok(rows[i].s, strlen(rows[i].s)) == rows[i].ok, "row %zu",
                      i);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_and_expand),
            cmocka_unit_test(test_refused),
            cmocka_unit_test(test_expand_limits),
            cmocka_unit_test(test_encodings),
            cmocka_unit_test(test_utf8),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
