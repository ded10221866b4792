/*
 * Fuzz target: a provider response body, as hostile as it comes, through
 * provider_reply_parse_body() and then classify() for both request kinds,
 * every transport result and a set of HTTP statuses. Asserts that parsing
 * never fails on any input within the bound, that the fields stay
 * terminated, and that every class is one its request kind can produce (so
 * policy never sees an impossible input). The same bytes are also tried as
 * one classifier rule in the config syntax: whatever parses must be
 * accepted by the classifier and keep the same guarantees.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/classify.h"
#include "net/provider_reply.h"

static const int statuses[] = {0,   100, 200, 201, 202, 204, 301, 400, 401, 404,
                               409, 410, 422, 429, 500, 502, 503, 504, 599, 999};

static const enum tg_transport_result transports[] = {TG_TR_NOT_SENT, TG_TR_TIMEOUT_AFTER_SEND,
                                                      TG_TR_RESET, TG_TR_COMPLETE};

static int post_class(enum tg_class c)
{
        return c == TG_CLASS_SUCCEEDED || c == TG_CLASS_REJECTED || c == TG_CLASS_KEY_REUSED ||
               c == TG_CLASS_RETRYABLE || c == TG_CLASS_UNKNOWN || c == TG_CLASS_NOT_SENT;
}

static int query_class(enum tg_class c)
{
        return c == TG_CLASS_SUCCEEDED || c == TG_CLASS_REJECTED || c == TG_CLASS_PROCESSING ||
               c == TG_CLASS_NOT_FOUND || c == TG_CLASS_NO_ANSWER;
}

static void classify_all(const struct classifier *c, int defaults, struct provider_reply *reply)
{
        for (size_t t = 0; t < sizeof(transports) / sizeof(transports[0]); t++) {
                for (size_t s = 0; s < sizeof(statuses) / sizeof(statuses[0]); s++) {
                        reply->transport = transports[t];
                        reply->http_status = statuses[s];
                        enum tg_class p = classify(c, CLASSIFY_POST, reply);
                        enum tg_class q = classify(c, CLASSIFY_QUERY, reply);
                        if ((unsigned)p >= TG_CLASS_COUNT || !post_class(p))
                                abort();
                        if ((unsigned)q >= TG_CLASS_COUNT || !query_class(q))
                                abort();
                        /* With the defaults, an unreadable body never says
                         * "executed" or "no record" (configuration may say
                         * otherwise, e.g. "query 404 => not_found"). */
                        if (defaults && !reply->body_is_json &&
                            (p == TG_CLASS_SUCCEEDED || q == TG_CLASS_SUCCEEDED ||
                             q == TG_CLASS_NOT_FOUND))
                                abort();
                }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct classifier *c;
        if (!c && classifier_new_default(&c) != 0)
                abort();

        struct provider_reply reply;
        memset(&reply, 0xA5, sizeof(reply)); /* garbage that must be reset */
        int r = provider_reply_parse_body((const char *)data, size, &reply);
        if (r != 0 && !(r < 0 && size > PROVIDER_REPLY_MAX_BODY))
                abort();
        if (!memchr(reply.error_code, '\0', sizeof(reply.error_code)) ||
            !memchr(reply.status, '\0', sizeof(reply.status)) ||
            !memchr(reply.refund_id, '\0', sizeof(reply.refund_id)))
                abort();
        if (!reply.body_is_json && (reply.error_code[0] || reply.status[0] || reply.refund_id[0]))
                abort();
        classify_all(c, 1, &reply);

        /* The same bytes as one rule of configuration. */
        char text[600];
        size_t n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
        memcpy(text, data, n);
        text[n] = '\0';
        struct classify_rule rule;
        if (classify_rule_parse(text, &rule) == 0) {
                struct classifier *extra;
                if (classifier_new_default(&extra) != 0)
                        abort();
                if (classifier_add_rule(extra, &rule) != 0)
                        abort();
                classify_all(extra, 0, &reply);
                classifier_free(extra);
        }
        return 0;
}
