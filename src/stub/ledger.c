/*
 * Idempotency store and execution ledger, one record per operation in a
 * chained hash table under one mutex. Invariants: a record's key state is
 * NONE, RUNNING or DONE; executions only grow (reset aside); a DONE key
 * always has its first response stored and replays exactly those bytes
 * (with 200 after an execution, with its own status after a failure); a
 * failed key counts no execution; the number of records never passes
 * max_records.
 */
#include "ledger.h"

#include "core/rng.h"
#include "core/tg_error.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS  (1u << 18)
#define IDS_KEPT 8

enum key_state { KEY_NONE, KEY_RUNNING, KEY_DONE };

/* The index from refund ids to their operation (stripe queries). */
struct id_node {
        struct id_node *next;
        char id[STUB_REFUND_ID_MAX];
        struct record *r;
};

struct record {
        struct record *next;
        struct stub_refund req; /* payload of the retained key */
        enum key_state key;
        tg_mono_ns key_created;
        char response[STUB_RESPONSE_MAX];
        int replay_status;              /* what a replay of the DONE key answers */
        char failure[STUB_FAILURE_MAX]; /* the DONE key ended failed: its code */
        uint64_t executions;
        char refund_ids[IDS_KEPT][STUB_REFUND_ID_MAX];
        tg_wall_ms first_executed_wall;
        tg_mono_ns processing_until;
        unsigned processing_queries; /* queries still to answer "processing" */
        uint64_t seq;                /* creation order: a list's order (newest first) */
};

struct ledger {
        pthread_mutex_t lock;
        struct record **buckets;
        size_t count;
        size_t max_records;
        tg_mono_ns retention;
        uint64_t seed;
        struct tg_rng rng;
        uint64_t executions;
        uint64_t max_executions;
        uint64_t failures;
        enum stub_shape shape;
        struct id_node **ids; /* by refund id */
        uint64_t next_seq;
};

static uint32_t hash(const char *s)
{
        uint32_t h = 2166136261u;
        for (; *s; s++) {
                h ^= (unsigned char)*s;
                h *= 16777619u;
        }
        return h & (BUCKETS - 1);
}

/* A new refund id of the shape's form into id (lg->lock held): Adyen's
 * 16-character pspReference, PayPal's 17 of [0-9A-Z], else a prefix and 16
 * hex digits. */
static void new_id(struct ledger *lg, char id[STUB_REFUND_ID_MAX])
{
        static const char alnum[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";

        if (lg->shape == STUB_SHAPE_ADYEN) {
                snprintf(id, STUB_REFUND_ID_MAX, "%016llX",
                         (unsigned long long)(tg_rng_next(&lg->rng) & 0x7fffffffffffffffULL));
        } else if (lg->shape == STUB_SHAPE_PAYPAL) {
                for (int i = 0; i < 17; i++)
                        id[i] = alnum[tg_rng_next(&lg->rng) % 36];
                id[17] = '\0';
        } else {
                snprintf(id, STUB_REFUND_ID_MAX, "%s_%016llx",
                         lg->shape == STUB_SHAPE_CHECKOUT ? "act" : "re",
                         (unsigned long long)tg_rng_next(&lg->rng));
        }
}

static struct record *find(struct ledger *lg, const char *op)
{
        for (struct record *r = lg->buckets[hash(op)]; r; r = r->next) {
                if (strcmp(r->req.operation_id, op) == 0)
                        return r;
        }
        return NULL;
}

static struct record *create(struct ledger *lg, const struct stub_refund *req)
{
        struct record *r;
        uint32_t h;
        if (lg->count >= lg->max_records)
                return NULL;
        r = calloc(1, sizeof(*r));
        if (!r)
                return NULL;
        r->req = *req;
        r->seq = ++lg->next_seq;
        h = hash(req->operation_id);
        r->next = lg->buckets[h];
        lg->buckets[h] = r;
        lg->count++;
        return r;
}

static bool same_payload(const struct stub_refund *a, const struct stub_refund *b)
{
        return strcmp(a->operation_id, b->operation_id) == 0 &&
               strcmp(a->payment_id, b->payment_id) == 0 && a->amount == b->amount &&
               strcmp(a->currency, b->currency) == 0;
}

/* A DONE key older than the retention is forgotten on sight. */
static void age_key(struct ledger *lg, struct record *r, tg_mono_ns now)
{
        if (r->key == KEY_DONE && now - r->key_created >= lg->retention)
                r->key = KEY_NONE;
}

struct ledger *ledger_new(size_t max_records, tg_mono_ns retention, uint64_t seed,
                          enum stub_shape shape)
{
        struct ledger *lg = calloc(1, sizeof(*lg));
        if (!lg)
                return NULL;
        lg->buckets = calloc(BUCKETS, sizeof(*lg->buckets));
        lg->ids = calloc(BUCKETS, sizeof(*lg->ids));
        if (!lg->buckets || !lg->ids || pthread_mutex_init(&lg->lock, NULL) != 0) {
                free(lg->buckets);
                free(lg->ids);
                free(lg);
                return NULL;
        }
        lg->shape = shape;
        lg->max_records = max_records;
        lg->retention = retention;
        lg->seed = seed;
        tg_rng_seed(&lg->rng, seed ^ 0x7265667564ULL);
        return lg;
}

static void clear(struct ledger *lg)
{
        for (size_t i = 0; lg->ids && i < BUCKETS; i++) {
                struct id_node *n = lg->ids[i];
                while (n) {
                        struct id_node *next = n->next;
                        free(n);
                        n = next;
                }
                lg->ids[i] = NULL;
        }
        for (size_t i = 0; i < BUCKETS; i++) {
                struct record *r = lg->buckets[i];
                while (r) {
                        struct record *next = r->next;
                        free(r);
                        r = next;
                }
                lg->buckets[i] = NULL;
        }
        lg->count = 0;
        lg->executions = 0;
        lg->max_executions = 0;
        lg->failures = 0;
        tg_rng_seed(&lg->rng, lg->seed ^ 0x7265667564ULL);
}

void ledger_free(struct ledger *lg)
{
        if (!lg)
                return;
        if (lg->buckets)
                clear(lg);
        free(lg->buckets);
        free(lg->ids);
        pthread_mutex_destroy(&lg->lock);
        free(lg);
}

void ledger_reset(struct ledger *lg)
{
        pthread_mutex_lock(&lg->lock);
        clear(lg);
        pthread_mutex_unlock(&lg->lock);
}

int ledger_begin(struct ledger *lg, const struct stub_refund *req, tg_mono_ns now,
                 enum ledger_begin *ret_kind, int *ret_status, char ret_body[STUB_RESPONSE_MAX])
{
        struct record *r;
        int rc = 0;
        pthread_mutex_lock(&lg->lock);
        r = find(lg, req->operation_id);
        if (r)
                age_key(lg, r, now);
        /* Checkout.com compares no payload: a key is the request; PayPal
         * answers a key's previous request whatever the payload */
        bool same = r && (lg->shape == STUB_SHAPE_CHECKOUT || lg->shape == STUB_SHAPE_ADYEN ||
                          lg->shape == STUB_SHAPE_PAYPAL || same_payload(&r->req, req));
        if (r && r->key == KEY_RUNNING) {
                *ret_kind = same ? LEDGER_IN_USE : LEDGER_REUSED;
        } else if (r && r->key == KEY_DONE) {
                if (same) {
                        *ret_kind = LEDGER_REPLAY;
                        *ret_status = r->replay_status;
                        memcpy(ret_body, r->response, STUB_RESPONSE_MAX);
                } else {
                        *ret_kind = LEDGER_REUSED;
                }
        } else {
                if (!r)
                        r = create(lg, req);
                if (!r) {
                        rc = TG_EFULL;
                } else {
                        r->req = *req;
                        r->key = KEY_RUNNING;
                        r->key_created = now;
                        r->failure[0] = '\0';
                        *ret_kind = LEDGER_NEW;
                }
        }
        pthread_mutex_unlock(&lg->lock);
        return rc;
}

/* Files refund id `id` of record r under node (lg->lock held). */
static void index_id(struct ledger *lg, struct id_node *node, const char *id, struct record *r)
{
        snprintf(node->id, sizeof(node->id), "%s", id);
        node->r = r;
        node->next = lg->ids[hash(id)];
        lg->ids[hash(id)] = node;
}

int ledger_execute(struct ledger *lg, const struct stub_refund *req, tg_mono_ns now,
                   tg_wall_ms wall, tg_mono_ns processing, char ret_refund_id[STUB_REFUND_ID_MAX],
                   char ret_body[STUB_RESPONSE_MAX])
{
        struct record *r;
        struct id_node *node;
        char id[STUB_REFUND_ID_MAX];
        json_t *body;
        char *text;
        int rc = 0;

        pthread_mutex_lock(&lg->lock);
        r = find(lg, req->operation_id);
        if (!r) {
                /* Reset while this request was waiting: it still executes. */
                r = create(lg, req);
                if (!r) {
                        rc = TG_EFULL;
                        goto out;
                }
                r->key_created = now;
        }
        new_id(lg, id);
        if (lg->shape == STUB_SHAPE_PAYPAL) {
                /* PENDING while it settles (an eCheck), else COMPLETED */
                text = stub_paypal_refund(id, req, processing > 0 ? "PENDING" : "COMPLETED",
                                          processing > 0 ? "ECHECK" : NULL);
        } else if (lg->shape == STUB_SHAPE_ADYEN) {
                /* received, not final: the outcome is the notification */
                text = stub_adyen_received(id, req);
        } else if (lg->shape == STUB_SHAPE_CHECKOUT) {
                /* accepted, not final: the outcome is in the actions list */
                text = stub_checkout_accepted(id, req);
        } else if (lg->shape == STUB_SHAPE_STRIPE) {
                /* A refund still settling at the provider says so: pending. */
                text = stub_stripe_refund(id, req, processing > 0 ? "pending" : "succeeded", NULL);
        } else {
                body = json_pack("{s:s, s:s, s:s}", "refund_id", id, "operation_id",
                                 req->operation_id, "status", "succeeded");
                text = body ? json_dumps(body, JSON_COMPACT) : NULL;
                json_decref(body);
        }
        node = calloc(1, sizeof(*node));
        if (!text || !node || strlen(text) >= STUB_RESPONSE_MAX) {
                free(text);
                free(node);
                rc = TG_ENOMEM;
                goto out;
        }
        index_id(lg, node, id, r);
        if (r->executions < IDS_KEPT)
                memcpy(r->refund_ids[r->executions], id, sizeof(id));
        else
                memcpy(r->refund_ids[IDS_KEPT - 1], id, sizeof(id));
        if (r->executions == 0)
                r->first_executed_wall = wall;
        r->executions++;
        lg->executions++;
        if (r->executions > lg->max_executions)
                lg->max_executions = r->executions;
        r->processing_until = now + processing;
        /* The first stored response is what every replay of this key returns. */
        if (r->key != KEY_DONE) {
                snprintf(r->response, sizeof(r->response), "%s", text);
                r->replay_status = lg->shape == STUB_SHAPE_CHECKOUT ? 202
                                   : lg->shape == STUB_SHAPE_ADYEN  ? 201
                                                                    : 200;
                r->failure[0] = '\0';
                r->req = *req;
                r->key = KEY_DONE;
        }
        memcpy(ret_refund_id, id, sizeof(id));
        memcpy(ret_body, r->response, STUB_RESPONSE_MAX);
        free(text);
out:
        pthread_mutex_unlock(&lg->lock);
        return rc;
}

void ledger_processing_queries(struct ledger *lg, const char *operation_id, unsigned n)
{
        struct record *r;

        pthread_mutex_lock(&lg->lock);
        r = find(lg, operation_id);
        if (r)
                r->processing_queries = n;
        pthread_mutex_unlock(&lg->lock);
}

int ledger_fail(struct ledger *lg, const struct stub_refund *req, tg_mono_ns now,
                const char *failure_code, int status, const char *body)
{
        struct record *r;
        int rc = 0;
        char *made = NULL;

        if (strlen(failure_code) >= STUB_FAILURE_MAX || (body && strlen(body) >= STUB_RESPONSE_MAX))
                return TG_EINVAL;
        if (!body && lg->shape != STUB_SHAPE_CHECKOUT && lg->shape != STUB_SHAPE_ADYEN &&
            lg->shape != STUB_SHAPE_PAYPAL)
                return TG_EINVAL;
        pthread_mutex_lock(&lg->lock);
        r = find(lg, req->operation_id);
        if (!r) {
                /* Reset while this request was waiting: it still ends. */
                r = create(lg, req);
                if (!r) {
                        rc = TG_EFULL;
                        goto out;
                }
                r->key_created = now;
        }
        /* Only a running key ends here; a key that is DONE keeps its first
         * response and outcome. */
        if (r->key != KEY_DONE && !body) {
                /* checkout: the refund was accepted (202, an action id),
                 * then declined: the action says so in the list */
                struct id_node *node = calloc(1, sizeof(*node));
                char id[STUB_REFUND_ID_MAX];

                new_id(lg, id);
                if (lg->shape == STUB_SHAPE_ADYEN)
                        made = stub_adyen_received(id, req);
                else if (lg->shape == STUB_SHAPE_PAYPAL) /* made, and FAILED */
                        made = stub_paypal_refund(id, req, "FAILED", failure_code);
                else
                        made = stub_checkout_accepted(id, req);
                if (!node || !made || strlen(made) >= STUB_RESPONSE_MAX) {
                        free(node);
                        rc = TG_ENOMEM;
                        goto out;
                }
                index_id(lg, node, id, r);
                if (r->executions == 0)
                        memcpy(r->refund_ids[0], id, sizeof(id));
                body = made;
        }
        if (r->key != KEY_DONE) {
                snprintf(r->response, sizeof(r->response), "%s", body);
                snprintf(r->failure, sizeof(r->failure), "%s", failure_code);
                r->replay_status = status;
                r->req = *req;
                r->key = KEY_DONE;
                lg->failures++;
        }
out:
        pthread_mutex_unlock(&lg->lock);
        free(made);
        return rc;
}

int ledger_response(struct ledger *lg, const char *operation_id, int *ret_status,
                    char ret_body[STUB_RESPONSE_MAX])
{
        struct record *r;
        int rc = TG_ENOTFOUND;

        pthread_mutex_lock(&lg->lock);
        r = find(lg, operation_id);
        if (r && r->key == KEY_DONE) {
                *ret_status = r->replay_status;
                memcpy(ret_body, r->response, STUB_RESPONSE_MAX);
                rc = 0;
        }
        pthread_mutex_unlock(&lg->lock);
        return rc;
}

/* What a query of record r (NULL: none) sees at now, with lg->lock held;
 * counted: a query that uses up one of its "processing" answers. */
static void record_status(struct ledger *lg, struct record *r, tg_mono_ns now, bool counted,
                          enum ledger_status *ret_status, char ret_refund_id[STUB_REFUND_ID_MAX],
                          char ret_failure_code[STUB_FAILURE_MAX])
{
        if (r)
                age_key(lg, r, now);
        ret_refund_id[0] = '\0';
        if (r && r->executions > 0)
                memcpy(ret_refund_id, r->refund_ids[0], STUB_REFUND_ID_MAX);
        if (r && r->key == KEY_DONE && r->failure[0]) {
                /* The retained key ended failed: that is its outcome, even if
                 * an older, expired use of the same key executed. */
                *ret_status = LEDGER_FAILED;
                memcpy(ret_failure_code, r->failure, STUB_FAILURE_MAX);
        } else if (!r || (r->executions == 0 && r->key != KEY_RUNNING)) {
                *ret_status = LEDGER_NOT_FOUND;
        } else if (r->executions == 0 || now < r->processing_until) {
                *ret_status = LEDGER_PROCESSING;
        } else if (r->processing_queries > 0) {
                if (counted)
                        r->processing_queries--;
                *ret_status = LEDGER_PROCESSING;
        } else {
                *ret_status = LEDGER_SUCCEEDED;
                /* The refund of the first execution is the one the key names. */
                memcpy(ret_refund_id, r->refund_ids[0], STUB_REFUND_ID_MAX);
        }
}

void ledger_query(struct ledger *lg, const char *operation_id, tg_mono_ns now,
                  enum ledger_status *ret_status, char ret_refund_id[STUB_REFUND_ID_MAX],
                  char ret_failure_code[STUB_FAILURE_MAX], struct stub_refund *ret_req)
{
        struct record *r;
        pthread_mutex_lock(&lg->lock);
        r = find(lg, operation_id);
        if (r && ret_req)
                *ret_req = r->req;
        record_status(lg, r, now, true, ret_status, ret_refund_id, ret_failure_code);
        pthread_mutex_unlock(&lg->lock);
}

/* Whether a list of payment (or any when payment is "") shows r: executed,
 * or ended failed (a refund still being created is not in the list yet). */
static bool listed(const struct record *r, const char *payment)
{
        if (payment[0] && strcmp(r->req.payment_id, payment) != 0)
                return false;
        return r->executions > 0 || (r->key == KEY_DONE && r->failure[0]);
}

/* The n newest listed records older than seq `before`, newest first, into
 * out[n] (one pass, insertion into the bounded array). Returns how many. */
static unsigned list_newest(struct ledger *lg, const char *payment, uint64_t before,
                            struct record **out, unsigned n)
{
        unsigned have = 0;

        for (size_t b = 0; b < BUCKETS; b++) {
                for (struct record *r = lg->buckets[b]; r; r = r->next) {
                        unsigned at = have;
                        if (r->seq >= before || !listed(r, payment))
                                continue;
                        while (at > 0 && out[at - 1]->seq < r->seq)
                                at--;
                        if (at == n)
                                continue;
                        if (have < n)
                                have++;
                        memmove(&out[at + 1], &out[at], (have - 1 - at) * sizeof(out[0]));
                        out[at] = r;
                }
        }
        return have;
}

char *ledger_list_json(struct ledger *lg, const char *payment, const char *starting_after,
                       unsigned limit, const char *key, tg_mono_ns now)
{
        json_t *data = json_array(), *o = NULL;
        struct record *page[STUB_LIST_MAX + 1];
        uint64_t before = UINT64_MAX;
        unsigned got;
        bool more;
        char *text = NULL;

        if (!data)
                return NULL;
        if (limit < 1 || limit > STUB_LIST_MAX)
                limit = STUB_LIST_MAX;
        pthread_mutex_lock(&lg->lock);
        if (starting_after[0]) {
                before = 0; /* an unknown cursor lists nothing */
                for (struct id_node *n = lg->ids[hash(starting_after)]; n; n = n->next)
                        if (strcmp(n->id, starting_after) == 0)
                                before = n->r->seq;
        }
        got = list_newest(lg, payment, before, page, limit + 1);
        more = got > limit;
        for (unsigned i = 0; i < got && i < limit; i++) {
                struct record *r = page[i];
                enum ledger_status st;
                char id[STUB_REFUND_ID_MAX], failure[STUB_FAILURE_MAX];
                char *item;

                record_status(lg, r, now, key && strcmp(key, r->req.operation_id) == 0, &st, id,
                              failure);
                item = stub_stripe_refund(id, &r->req,
                                          st == LEDGER_PROCESSING ? "pending"
                                          : st == LEDGER_FAILED   ? "failed"
                                                                  : "succeeded",
                                          st == LEDGER_FAILED ? failure : NULL);
                json_array_append_new(data, item ? json_loads(item, 0, NULL) : json_null());
                free(item);
        }
        pthread_mutex_unlock(&lg->lock);
        o = json_pack("{s:s, s:o, s:b, s:s}", "object", "list", "data", data, "has_more", more,
                      "url", "/v1/refunds");
        if (o)
                text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        return text;
}

static void append_action(json_t *list, const char *id, const struct stub_refund *req,
                          bool approved, const char *failure)
{
        char *item = stub_checkout_action(id, req, approved, failure);

        json_array_append_new(list, item ? json_loads(item, 0, NULL) : json_null());
        free(item);
}

char *ledger_actions_json(struct ledger *lg, const char *payment, const char *key, tg_mono_ns now)
{
        json_t *list = json_array(), *capture;
        struct record *page[STUB_LIST_MAX];
        unsigned got;
        char *text = NULL;

        if (!list)
                return NULL;
        pthread_mutex_lock(&lg->lock);
        got = list_newest(lg, payment, UINT64_MAX, page, STUB_LIST_MAX);
        for (unsigned i = 0; i < got; i++) {
                struct record *r = page[i];
                enum ledger_status st;
                char id[STUB_REFUND_ID_MAX], failure[STUB_FAILURE_MAX];

                record_status(lg, r, now, key && strcmp(key, r->req.operation_id) == 0, &st, id,
                              failure);
                /* one action per refund executed, newest first; the newest
                 * is listed once processed (accepted, not processed yet:
                 * no action); a refund declined executed nothing */
                unsigned n = r->executions < IDS_KEPT ? (unsigned)r->executions : IDS_KEPT;
                if (st == LEDGER_FAILED && n == 0)
                        append_action(list, r->refund_ids[0], &r->req, false, failure);
                for (unsigned e = n; e > 0; e--)
                        if (e < n || st == LEDGER_SUCCEEDED)
                                append_action(list, r->refund_ids[e - 1], &r->req, true, NULL);
        }
        pthread_mutex_unlock(&lg->lock);
        /* the payment's own actions come first in its life: last in the list */
        capture = json_pack("{s:s, s:s, s:b, s:s, s:s}", "id", "act_capture", "type", "Capture",
                            "approved", 1, "response_code", "10000", "reference", "ORD-5023");
        if (capture)
                json_array_append_new(list, capture);
        json_array_append_new(list,
                              json_pack("{s:s, s:s, s:b, s:s, s:s}", "id", "act_authorization",
                                        "type", "Authorization", "approved", 1, "response_code",
                                        "10000", "reference", "ORD-5023"));
        text = json_dumps(list, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(list);
        return text;
}

int ledger_operation_of(struct ledger *lg, const char *refund_id,
                        char ret_operation_id[STUB_KEY_MAX + 1])
{
        int rc = TG_ENOTFOUND;

        pthread_mutex_lock(&lg->lock);
        for (struct id_node *n = lg->ids[hash(refund_id)]; n; n = n->next) {
                if (strcmp(n->id, refund_id) == 0) {
                        memcpy(ret_operation_id, n->r->req.operation_id, STUB_KEY_MAX + 1);
                        rc = 0;
                        break;
                }
        }
        pthread_mutex_unlock(&lg->lock);
        return rc;
}

size_t ledger_expire(struct ledger *lg, const char *key)
{
        size_t n = 0;
        pthread_mutex_lock(&lg->lock);
        if (key) {
                struct record *r = find(lg, key);
                if (r && r->key == KEY_DONE) {
                        r->key = KEY_NONE;
                        n = 1;
                }
        } else {
                for (size_t i = 0; i < BUCKETS; i++) {
                        for (struct record *r = lg->buckets[i]; r; r = r->next) {
                                if (r->key == KEY_DONE) {
                                        r->key = KEY_NONE;
                                        n++;
                                }
                        }
                }
        }
        pthread_mutex_unlock(&lg->lock);
        return n;
}

void ledger_stats(struct ledger *lg, struct ledger_stats *ret_stats)
{
        struct ledger_stats s = {0};
        pthread_mutex_lock(&lg->lock);
        s.operations = lg->count;
        s.executions = lg->executions;
        s.max_executions = lg->max_executions;
        s.failures = lg->failures;
        for (size_t i = 0; i < BUCKETS; i++) {
                for (struct record *r = lg->buckets[i]; r; r = r->next) {
                        if (r->key != KEY_NONE)
                                s.keys_retained++;
                }
        }
        pthread_mutex_unlock(&lg->lock);
        *ret_stats = s;
}

static const char *key_state_name(const struct ledger *lg, const struct record *r, tg_mono_ns now)
{
        if (r->key == KEY_RUNNING)
                return "running";
        if (r->key == KEY_DONE && now - r->key_created < lg->retention)
                return "retained";
        return "expired";
}

char *ledger_dump_json(struct ledger *lg, tg_mono_ns now)
{
        json_t *root = json_object();
        json_t *ops = json_object();
        char *text = NULL;
        if (!root || !ops)
                goto out;
        pthread_mutex_lock(&lg->lock);
        for (size_t i = 0; i < BUCKETS; i++) {
                for (struct record *r = lg->buckets[i]; r; r = r->next) {
                        json_t *ids = json_array();
                        size_t kept = r->executions < IDS_KEPT ? r->executions : IDS_KEPT;
                        for (size_t k = 0; ids && k < kept; k++)
                                json_array_append_new(ids, json_string(r->refund_ids[k]));
                        json_t *op =
                            json_pack("{s:I, s:o, s:s, s:I}", "executions",
                                      (json_int_t)r->executions, "refund_ids",
                                      ids ? ids : json_null(), "key", key_state_name(lg, r, now),
                                      "first_executed_wall_ms", (json_int_t)r->first_executed_wall);
                        if (op && r->key == KEY_DONE && r->failure[0])
                                json_object_set_new(op, "failure_code", json_string(r->failure));
                        json_object_set_new(ops, r->req.operation_id, op);
                }
        }
        json_object_set_new(root, "total_executions", json_integer((json_int_t)lg->executions));
        json_object_set_new(root, "max_executions_per_operation",
                            json_integer((json_int_t)lg->max_executions));
        json_object_set_new(root, "operations_count", json_integer((json_int_t)lg->count));
        json_object_set_new(root, "total_failures", json_integer((json_int_t)lg->failures));
        pthread_mutex_unlock(&lg->lock);
        json_object_set(root, "operations", ops);
        text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
out:
        json_decref(ops);
        json_decref(root);
        return text;
}
