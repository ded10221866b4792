/*
 * Fuzz target: the provider mapping's parsers. A response body, as hostile
 * as it comes, read through four reply maps (PROVIDER.md's, the
 * stripe profile's with alternatives and a header source, one of
 * array paths, and the checkout profile's: a boolean status, read also as
 * its actions list, a bare array, by reference and by a known action id)
 * with the input's head also given as a header value; then
 * classified for both request kinds. Asserts that reading never fails
 * within the bound, that every field stays terminated, that the retryable
 * mark is one of its three values and that every class is one its request
 * kind can produce. The same bytes are then tried as configuration: a
 * field source, a status list, a template for each use and a body field;
 * whatever parses is expanded for a refund, into a bounded buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/classify.h"
#include "core/provider_map.h"
#include "core/template.h"
#include "net/provider_reply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must_source(const char *text, struct field_source *s)
{
        if (field_source_parse(text, s, NULL) != 0)
                abort();
}

static void maps(struct reply_map m[4])
{
        reply_map_default(&m[0]);
        m[1] = m[0];
        must_source("id", &m[1].refund_id);
        must_source("error.code error.type", &m[1].error_code);
        must_source("failure_reason", &m[1].failure_code);
        must_source("header:Stripe-Should-Retry", &m[1].retryable);
        if (status_list_parse("failed,canceled", &m[1].failed, NULL) != 0 ||
            status_list_parse("pending,requires_action", &m[1].processing, NULL) != 0)
                abort();
        m[2] = m[0];
        must_source("data.0.status data.1.status header:X-Status", &m[2].status);
        must_source("data.0.id 0 data", &m[2].refund_id);
        must_source("errors.0.code", &m[2].error_code);
        m[3] = m[0];
        must_source("approved", &m[3].status);
        must_source("action_id id", &m[3].refund_id);
        must_source("error_type", &m[3].error_code);
        must_source("response_code", &m[3].failure_code);
        must_source(".", &m[3].list_items);
        must_source("reference", &m[3].list_match);
        if (status_list_parse("true", &m[3].succeeded, NULL) != 0 ||
            status_list_parse("false", &m[3].failed, NULL) != 0 ||
            status_list_parse("request_in_progress", &m[3].in_progress, NULL) != 0)
                abort();
}

static int class_ok(enum classify_request request, enum tg_class c)
{
        if ((unsigned)c >= TG_CLASS_COUNT)
                return 0;
        if (request == CLASSIFY_POST)
                return c == TG_CLASS_SUCCEEDED || c == TG_CLASS_REJECTED ||
                       c == TG_CLASS_KEY_REUSED || c == TG_CLASS_RETRYABLE ||
                       c == TG_CLASS_UNKNOWN || c == TG_CLASS_NOT_SENT || c == TG_CLASS_PROCESSING;
        return c == TG_CLASS_SUCCEEDED || c == TG_CLASS_REJECTED || c == TG_CLASS_PROCESSING ||
               c == TG_CLASS_NOT_FOUND || c == TG_CLASS_NO_ANSWER;
}

static void as_config(const char *text)
{
        static const unsigned uses[] = {TPL_REFUND_FIELDS, TPL_BODY_FIELDS, TPL_PATH_FIELDS,
                                        TPL_SIGNING_FIELDS};
        struct field_source fs;
        struct status_list sl;
        struct template t;
        struct body_field bf;
        struct template_values v;
        struct refund_request req;
        struct refund_metadata md;
        struct refund_problem problem;
        char amount[MAP_AMOUNT_BUF], out[1024];
        struct tg_strbuf sb;

        field_source_parse(text, &fs, NULL);
        status_list_parse(text, &sl, NULL);
        memset(&req, 0, sizeof(req));
        memset(&md, 0, sizeof(md));
        memcpy(req.operation_id, "op-1", 5);
        memcpy(req.payment_id, "pay_1", 6);
        req.amount = 1500;
        memcpy(req.currency, "TWD", 4);
        refund_metadata_add(&md, "order", 5, "o 1", 3, &problem);
        map_values_for(&req, &md, "re_1", amount, &v);
        v.text[TPL_METHOD] = "POST";
        v.text[TPL_PATH] = "/v1/refunds";
        v.text[TPL_TIMESTAMP] = "1700000000";
        v.text[TPL_BODY_SHA256] = "00";
        v.text[TPL_REQUEST_ID] = "tg-1";
        for (size_t i = 0; i < sizeof(uses) / sizeof(uses[0]); i++) {
                if (template_parse(text, uses[i], &t, NULL) != 0)
                        continue;
                tg_strbuf_init(&sb, out, sizeof(out));
                template_expand(&t, &v, i % 2 ? TEMPLATE_PATH : TEMPLATE_RAW, &sb);
                if (!memchr(out, '\0', sizeof(out)))
                        abort();
        }
        if (body_field_parse(text, &bf, NULL) == 0) {
                struct request_map m;
                request_map_default(&m);
                m.format = BODY_FORMAT_FORM;
                m.fields[0] = bf;
                m.nfields = 1;
                tg_strbuf_init(&sb, out, sizeof(out));
                request_map_form_body(&m, &v, &sb);
                if (!memchr(out, '\0', sizeof(out)))
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct classifier *c;
        static struct reply_map m[4];
        static int made;
        char head[128], text[600];
        size_t hn = size < sizeof(head) - 1 ? size : sizeof(head) - 1;
        struct provider_reply_headers hdrs;

        if (!made) {
                if (classifier_new_default(&c) != 0)
                        abort();
                maps(m);
                made = 1;
        }
        memcpy(head, data, hn);
        head[hn] = '\0';
        hdrs.content_type = NULL; /* the body is read */
        hdrs.n = 2;
        hdrs.name[0] = "stripe-should-retry";
        hdrs.value[0] = head;
        hdrs.name[1] = "X-Status";
        hdrs.value[1] = head;
        for (int i = 0; i < 6; i++) {
                struct provider_reply reply;
                memset(&reply, 0xA5, sizeof(reply));
                /* 4 and 5: the checkout map's list read, by reference, then
                 * also by a known action id */
                int r =
                    i < 4 ? provider_reply_read(&m[i], (const char *)data, size, &hdrs, &reply)
                          : provider_reply_read_list_known(&m[3], "op-1", i == 5 ? "act_1" : NULL,
                                                           (const char *)data, size, &hdrs, &reply);
                if (r != 0 && !(r < 0 && size > PROVIDER_REPLY_MAX_BODY))
                        abort();
                if (!memchr(reply.error_code, '\0', sizeof(reply.error_code)) ||
                    !memchr(reply.status, '\0', sizeof(reply.status)) ||
                    !memchr(reply.refund_id, '\0', sizeof(reply.refund_id)) ||
                    !memchr(reply.failure_code, '\0', sizeof(reply.failure_code)))
                        abort();
                if ((unsigned)reply.retryable > TG_FLAG_TRUE)
                        abort();
                reply.transport = TG_TR_COMPLETE;
                for (int status = 100; status < 600; status += 37) {
                        reply.http_status = status;
                        if (!class_ok(CLASSIFY_POST, classify(c, CLASSIFY_POST, &reply)) ||
                            !class_ok(CLASSIFY_QUERY, classify(c, CLASSIFY_QUERY, &reply)))
                                abort();
                }
        }
        hn = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
        memcpy(text, data, hn);
        text[hn] = '\0';
        as_config(text);
        return 0;
}
