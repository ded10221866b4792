/*
 * api_batch — POST /v1/refunds:batch: up to API_BATCH_MAX refunds in one
 * request, for an order system catching up after its own outage. Each item
 * is parsed and validated exactly as a POST /v1/refunds body is (api_parse),
 * and its result is what that single request would have answered: 202 for
 * a new refund, 200 for a repeat, 409 for the same operation_id with
 * another request, 400/422 for an invalid one, in the order sent. The
 * request itself answers 200 with {"results": [...]} (the way Elasticsearch
 * _bulk and Google's batch methods do: the statuses are per item), 400 for
 * a malformed envelope or more than API_BATCH_MAX items, 413 past
 * api.max_batch_bytes, 503 when admission refuses or the store cannot
 * write.
 *
 * Invariants:
 *   - the valid items are stored in ONE transaction (store_accept_batch):
 *     all of them or none, never half an item; the answer is sent only
 *     after its commit (commit before reply), so a client whose answer was
 *     lost sends the same batch again and gets a 200 for each of its items;
 *   - admission control decides for the batch as a whole (each account it
 *     names by its own backlog: any one refused refuses the batch), before anything
 *     is stored: it is admitted whole or refused whole with 503 and a
 *     Retry-After; items already accepted are never counted against it
 *     (a batch of repeats is answered whatever the backlog);
 *   - an invalid item never stops the others; it is never stored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/api_int.h"
#include "daemon/failpoint.h"
#include "platform/wake.h"
#include "store/store.h"

/* The result object of one item: {"index","status",...}. */
static json_t *item_result(size_t index, const struct api_batch_item *it,
                           const struct store_accept_item *acc)
{
        struct api_error conflict;
        json_t *o;
        int status;

        if (!it->ok || acc->result == TG_ECONFLICT) {
                const struct api_error *err = &it->err;
                if (it->ok) {
                        api_conflict_error(&conflict);
                        err = &conflict;
                }
                return json_pack("{s:I, s:i, s:o}", "index", (json_int_t)index, "status",
                                 err->status, "error", api_error_object(err));
        }
        status = acc->created ? 202 : 200;
        o = api_accepted_json(&acc->op);
        if (o && (json_object_set_new(o, "index", json_integer((json_int_t)index)) < 0 ||
                  json_object_set_new(o, "status", json_integer(status)) < 0)) {
                json_decref(o);
                return NULL;
        }
        return o;
}

/* The valid items of account (NULL: every account's) that no operation
 * exists for yet: the new work admission weighs. Read only when the batch
 * as a whole would be refused, so the usual path costs no extra reads. A
 * store failure counts the item new (admission then refuses rather than
 * admits blindly; store_accept would likely fail the same way). */
static uint64_t count_new(struct api *api, const struct api_batch_item *items, size_t n,
                          const char *account)
{
        struct op_record op;
        uint64_t fresh = 0;

        for (size_t i = 0; i < n; i++)
                if (items[i].ok && strcmp(items[i].req.account, account) == 0 &&
                    store_get(api->store, items[i].req.operation_id, &op) != 0)
                        fresh++;
        return fresh;
}

/* The valid items of account. */
static uint64_t count_valid(const struct api_batch_item *items, size_t n, const char *account)
{
        uint64_t valid = 0;

        for (size_t i = 0; i < n; i++)
                if (items[i].ok && strcmp(items[i].req.account, account) == 0)
                        valid++;
        return valid;
}

/* Admission for the batch as a whole: each account it names is judged by
 * its own backlog for its own items, and the batch is refused (nothing
 * stored) when any of them is: 0 and *ret_admit, or res holds the 503 of
 * the first account refused (in the config's order). For each account, all
 * its valid items are taken as new first; only when that would be refused
 * are the ones already stored looked up and left out. */
static int admit_batch(struct api *api, const struct api_batch_item *items, size_t n,
                       struct http_response *res, const char *rid, bool *ret_admit)
{
        struct api_admission a;
        int r = 0;

        *ret_admit = true;
        for (unsigned k = 0; k < api->cfg.account_count; k++) {
                const char *account = api->cfg.accounts[k].name;
                uint64_t valid = count_valid(items, n, account);

                if (valid == 0)
                        continue;
                r = api_admission_decide(api, account, valid, &a);
                if (r < 0)
                        return r;
                if (a.d.admit)
                        continue;
                r = api_admission_decide(api, account, count_new(api, items, n, account), &a);
                if (r < 0)
                        return r;
                if (a.d.admit)
                        continue;
                *ret_admit = false;
                return api_admission_refuse(api, &a, res, rid);
        }
        return r;
}

int api_post_refunds_batch(struct api *api, const struct http_request *req,
                           struct http_response *res, const char *rid)
{
        struct api_batch_item *items = NULL;
        struct store_accept_item *acc = NULL;
        struct api_error err;
        json_t *results = NULL;
        size_t n = 0, valid = 0, created = 0;
        bool admit = true, errors = false;
        int r;

        if (req->body_len > api->cfg.api_max_batch_bytes)
                return api_reply_code(res, rid, 413, "body_too_large", NULL,
                                      "the request body is too large (api.max_batch_bytes)");
        tg_wall_ms now = api_wall_now();
        items = calloc(API_BATCH_MAX, sizeof(*items));
        acc = calloc(API_BATCH_MAX, sizeof(*acc));
        if (!items || !acc) {
                r = TG_ENOMEM;
                goto out;
        }
        if (api_parse_batch(req->body, req->body_len, now, items, &n, &err) < 0) {
                r = api_reply_error(res, rid, &err);
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                /* an item naming no configured account is its own 422 */
                if (items[i].ok &&
                    (api_refund_account(&api->cfg, &items[i].req, &items[i].err) < 0 ||
                     api_refund_currency(&api->cfg, &items[i].req, &items[i].err) < 0 ||
                     api_refund_notify_url(&api->cfg, &items[i].req, &items[i].err) < 0))
                        items[i].ok = false;
                if (!items[i].ok)
                        continue;
                api_intake_trace(api, req, items[i].req.traceparent);
                snprintf(items[i].req.submitted_by, sizeof(items[i].req.submitted_by), "%s",
                         api_submitter(api));
                acc[valid++].req = &items[i].req;
        }

        r = admit_batch(api, items, n, res, rid, &admit);
        if (r < 0 || !admit)
                goto out;

        /* Commit before reply: store_accept_batch() returns after its commit. */
        r = store_accept_batch(api->store, acc, valid, now, &api->cfg.policy);
        if (r < 0) {
                r = r == TG_ENOMEM ? r : api_reply_store_error(res, rid, r);
                goto out;
        }
        for (size_t i = 0; i < valid; i++) {
                /* a repeat of another credential's refund: its key, never
                 * its state (api_may_see) */
                if (acc[i].result == 0 && !acc[i].created && !api_may_see(api, &acc[i].op))
                        acc[i].result = TG_ECONFLICT;
                if (acc[i].result == 0 && acc[i].created) {
                        /* committed, not answered: the caller sends it again */
                        failpoint_hit(api->failpoint, "crash_after_accept", &acc[i].op);
                        api_admission_accepted(api, acc[i].op.req.account, 1);
                        created++;
                }
        }
        if (created > 0)
                wake_ring(api->doorbell); /* the local exit has work now */

        results = json_array();
        if (!results) {
                r = TG_ENOMEM;
                goto out;
        }
        for (size_t i = 0, k = 0; i < n; i++) {
                static const struct store_accept_item none = {0};
                const struct store_accept_item *a = items[i].ok ? &acc[k++] : &none;
                json_t *o = item_result(i, &items[i], a);

                errors = errors || !items[i].ok || a->result != 0;
                if (!o || json_array_append_new(results, o) < 0) {
                        r = TG_ENOMEM;
                        goto out;
                }
        }
        r = api_reply_json(res, 200,
                           json_pack("{s:O, s:b, s:I}", "results", results, "errors", errors,
                                     "accepted", (json_int_t)created));
out:
        json_decref(results);
        free(acc);
        free(items);
        return r;
}
