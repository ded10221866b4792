/*
 * store — the backend-neutral half of the store: picks a backend from the
 * url scheme, checks the arguments every backend would otherwise check
 * alike, and forwards each call through the backend's ops table
 * (store_backend.h). It also owns the stored names of states, kinds, classes
 * and manual reasons, so that every backend writes the same words.
 *
 * Invariants: a struct store always has a non-NULL ops table and a masked
 * url; no password ever reaches store_backend(); arguments a backend
 * receives have passed the checks here (non-NULL, enums in range, strings
 * terminated within their bounds).
 */
#include "store/store_backend.h"

#include <string.h>

#include "core/tg_error.h"

/* ---- stored names ---------------------------------------------------- */

static const char *const state_texts[OP_STATE_COUNT] = {
    [OP_PENDING] = "pending", [OP_IN_FLIGHT] = "in_flight", [OP_RETRY_WAIT] = "retry_wait",
    [OP_UNKNOWN] = "unknown", [OP_SUCCEEDED] = "succeeded", [OP_REJECTED] = "rejected",
    [OP_MANUAL] = "manual",
};

static const char *const kind_texts[] = {
    [TG_KIND_FIRST] = "first",
    [TG_KIND_RETRY] = "retry",
    [TG_KIND_QUERY] = "query",
    [TG_KIND_MANUAL] = "manual",
};
#define KIND_COUNT (sizeof(kind_texts) / sizeof(kind_texts[0]))

static const char *const class_texts[TG_CLASS_COUNT] = {
    [TG_CLASS_SUCCEEDED] = "succeeded",   [TG_CLASS_REJECTED] = "rejected",
    [TG_CLASS_KEY_REUSED] = "key_reused", [TG_CLASS_RETRYABLE] = "retryable",
    [TG_CLASS_UNKNOWN] = "unknown",       [TG_CLASS_NOT_SENT] = "not_sent",
    [TG_CLASS_PROCESSING] = "processing", [TG_CLASS_NOT_FOUND] = "not_found",
    [TG_CLASS_NO_ANSWER] = "no_answer",
};

static const char *const reason_texts[MANUAL_REASON_COUNT] = {
    [MANUAL_NONE] = "none",
    [MANUAL_ATTEMPTS_EXHAUSTED] = "attempts_exhausted",
    [MANUAL_DEADLINE] = "deadline",
    [MANUAL_QUERY_BUDGET] = "query_budget",
    [MANUAL_KEY_REUSED] = "key_reused",
    [MANUAL_KEY_RETENTION] = "key_retention",
    [MANUAL_INVALID] = "invalid",
};

static const char *name_of(const char *const *texts, size_t count, int value)
{
        if (value < 0 || (size_t)value >= count || !texts[value])
                return "?";
        return texts[value];
}

static int parse_name(const char *const *texts, size_t count, const char *text, int *ret_value)
{
        if (!text)
                return TG_EPARSE;
        for (size_t i = 0; i < count; i++) {
                if (texts[i] && strcmp(texts[i], text) == 0) {
                        *ret_value = (int)i;
                        return 0;
                }
        }
        return TG_EPARSE;
}

const char *store_state_text(enum op_state state)
{
        return name_of(state_texts, OP_STATE_COUNT, (int)state);
}

int store_state_parse(const char *text, enum op_state *ret_state)
{
        int v;
        int r = parse_name(state_texts, OP_STATE_COUNT, text, &v);

        if (r < 0)
                return r;
        *ret_state = (enum op_state)v;
        return 0;
}

const char *store_kind_text(enum tg_call_kind kind)
{
        return name_of(kind_texts, KIND_COUNT, (int)kind);
}

int store_kind_parse(const char *text, enum tg_call_kind *ret_kind)
{
        int v;
        int r = parse_name(kind_texts, KIND_COUNT, text, &v);

        if (r < 0)
                return r;
        *ret_kind = (enum tg_call_kind)v;
        return 0;
}

const char *store_class_text(enum tg_class cls)
{
        return name_of(class_texts, TG_CLASS_COUNT, (int)cls);
}

int store_class_parse(const char *text, enum tg_class *ret_cls)
{
        int v;
        int r = parse_name(class_texts, TG_CLASS_COUNT, text, &v);

        if (r < 0)
                return r;
        *ret_cls = (enum tg_class)v;
        return 0;
}

const char *store_reason_text(enum manual_reason reason)
{
        return name_of(reason_texts, MANUAL_REASON_COUNT, (int)reason);
}

int store_reason_parse(const char *text, enum manual_reason *ret_reason)
{
        int v;
        int r = parse_name(reason_texts, MANUAL_REASON_COUNT, text, &v);

        if (r < 0)
                return r;
        *ret_reason = (enum manual_reason)v;
        return 0;
}

void store_policy_op(const struct op_record *op, struct policy_op *ret_pop)
{
        struct policy_op p = {
            .state = op->state,
            .attempts = op->attempts,
            .attempt_limit = op->attempt_limit,
            .queries = op->queries,
            .query_limit = op->query_limit,
            .accepted_at = op->accepted_at,
            .deadline_at = op->deadline_at,
            .key_first_used = op->key_first_used,
            .last_wait_ms = op->last_wait_ms,
        };
        *ret_pop = p;
}

void store_copy_text(char *dst, size_t dst_size, const char *src)
{
        size_t n;

        if (dst_size == 0)
                return;
        if (!src)
                src = "";
        n = strnlen(src, dst_size - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
}

bool store_state_is_final(enum op_state state)
{
        return state == OP_SUCCEEDED || state == OP_REJECTED;
}

/* ---- argument checks --------------------------------------------------- */

/* A string of 1..max bytes, terminated within max+1. */
static bool text_ok(const char *s, size_t max)
{
        size_t n;

        if (!s)
                return false;
        n = strnlen(s, max + 1);
        return n >= 1 && n <= max;
}

/* A string of 0..max-1 bytes (a fixed buffer of size max). */
static bool buf_ok(const char *s, size_t size)
{
        return s && strnlen(s, size) < size;
}

static bool state_ok(enum op_state state)
{
        return (int)state >= 0 && (int)state < OP_STATE_COUNT;
}

static bool request_ok(const struct refund_request *req)
{
        return text_ok(req->operation_id, TG_OP_ID_MAX) &&
               text_ok(req->payment_id, TG_PAYMENT_ID_MAX) && req->amount > 0 &&
               text_ok(req->currency, sizeof(req->currency) - 1);
}

/* ---- open / close ------------------------------------------------------ */

/* mysql://user:pass@host/db -> mysql://user:***@host/db; other urls as-is.
 * The user part ends at the LAST '@', as store_mysql.c parses it, so that a
 * password holding '@', '/' or '?' is masked whole. */
static void mask_url(const char *url, char *dst, size_t dst_size)
{
        const char *auth = strstr(url, "://");
        const char *at, *colon;
        size_t head;

        store_copy_text(dst, dst_size, url);
        if (!auth || strncmp(url, "mysql://", 8) != 0)
                return;
        auth += 3;
        at = strrchr(auth, '@');
        if (!at)
                return;
        colon = memchr(auth, ':', (size_t)(at - auth));
        if (!colon)
                return;
        head = (size_t)(colon - url) + 1;
        if (head + 4 >= dst_size)
                return;
        memcpy(dst + head, "***", 3);
        store_copy_text(dst + head + 3, dst_size - head - 3, at);
}

int store_open(const char *url, struct store **ret_store)
{
        static const char sqlite_scheme[] = "sqlite://";
        static const char mysql_scheme[] = "mysql://";
        struct store *store = NULL;
        int r;

        if (!url || !ret_store || strnlen(url, STORE_URL_MAX) >= STORE_URL_MAX)
                return TG_EINVAL;
        if (strncmp(url, sqlite_scheme, sizeof(sqlite_scheme) - 1) == 0) {
                const char *path = url + sizeof(sqlite_scheme) - 1;

                if (path[0] == '\0')
                        return TG_EINVAL;
                r = store_sqlite_open(path, &store);
        } else if (strncmp(url, mysql_scheme, sizeof(mysql_scheme) - 1) == 0) {
#ifdef TG_HAVE_MARIADB
                const char *where = url + sizeof(mysql_scheme) - 1;

                if (where[0] == '\0')
                        return TG_EINVAL;
                r = store_mysql_open(where, &store);
#else
                r = TG_EUNSUPPORTED; /* built without MariaDB Connector/C */
#endif
        } else {
                r = TG_EINVAL;
        }
        if (r < 0)
                return r;
        mask_url(url, store->url_masked, sizeof(store->url_masked));
        *ret_store = store;
        return 0;
}

void store_close(struct store *store)
{
        if (!store)
                return;
        store->ops->close(store);
}

const char *store_backend(const struct store *store)
{
        if (!store)
                return "none";
        return store->ops->name;
}

const char *store_url(const struct store *store)
{
        if (!store)
                return "";
        return store->url_masked;
}

/* ---- forwarding -------------------------------------------------------- */

int store_accept(struct store *store, const struct refund_request *req, tg_wall_ms now,
                 const struct policy_config *limits, bool *ret_created, struct op_record *ret_op)
{
        if (!store || !req || !limits || !ret_created || !ret_op || !request_ok(req))
                return TG_EINVAL;
        return store->ops->accept(store, req, now, limits, ret_created, ret_op);
}

int store_get(struct store *store, const char *operation_id, struct op_record *ret_op)
{
        if (!store || !ret_op || !text_ok(operation_id, TG_OP_ID_MAX))
                return TG_EINVAL;
        return store->ops->get(store, operation_id, ret_op);
}

bool store_split_same(const struct store_split *a, const struct store_split *b)
{
        double d = a->starts_per_second - b->starts_per_second;
        double m = a->starts_per_second > b->starts_per_second ? a->starts_per_second
                                                               : b->starts_per_second;

        if (d < 0)
                d = -d;
        return a->shares == b->shares && a->max_in_flight == b->max_in_flight && d <= m * 1e-9;
}

int store_share_acquire(struct store *store, const struct store_split *split, unsigned *ret_share,
                        int64_t *ret_epoch)
{
        if (!store || !split || !ret_share || !ret_epoch)
                return TG_EINVAL;
        if (split->shares < 1 || split->shares > STORE_SHARES_MAX ||
            !(split->starts_per_second > 0 && split->starts_per_second <= 1e9) ||
            split->max_in_flight < split->shares)
                return TG_EINVAL;
        return store->ops->share_acquire(store, split, ret_share, ret_epoch);
}

int store_split_get(struct store *store, struct store_split *ret_split)
{
        if (!store || !ret_split)
                return TG_EINVAL;
        return store->ops->split_get(store, ret_split);
}

int store_owner_acquire(struct store *store, int64_t *ret_epoch)
{
        unsigned share = 0;

        if (!store || !ret_epoch)
                return TG_EINVAL;
        return store->ops->share_acquire(store, NULL, &share, ret_epoch);
}

int store_owner_check(struct store *store)
{
        if (!store)
                return TG_EINVAL;
        return store->ops->owner_check(store);
}

void store_owner_release(struct store *store)
{
        if (!store)
                return;
        store->ops->owner_release(store);
}

int store_owner_epoch(struct store *store, int64_t *ret_epoch)
{
        if (!store || !ret_epoch)
                return TG_EINVAL;
        return store->ops->owner_epoch(store, ret_epoch);
}

int store_recover(struct store *store, int64_t epoch, const struct policy_config *config,
                  tg_wall_ms now, unsigned *ret_count)
{
        if (!store || !config || !ret_count || epoch <= 0)
                return TG_EINVAL;
        return store->ops->recover(store, epoch, config, now, ret_count);
}

int store_claim(struct store *store, const struct claim_args *args, struct op_record *ret_op,
                struct call_record *ret_call)
{
        if (!store || !args || !ret_op || !ret_call)
                return TG_EINVAL;
        if (args->group != STORE_GROUP_FIRST && args->group != STORE_GROUP_AGAIN)
                return TG_EINVAL;
        if (!buf_ok(args->request_id, sizeof(args->request_id)))
                return TG_EINVAL;
        return store->ops->claim(store, args, ret_op, ret_call);
}

int store_settle(struct store *store, const struct settle_args *args)
{
        enum op_state next;

        if (!store || !args)
                return TG_EINVAL;
        next = args->decision.next;
        if (!state_ok(next) || next == OP_PENDING || next == OP_IN_FLIGHT)
                return TG_EINVAL;
        if ((int)args->cls < 0 || (int)args->cls >= TG_CLASS_COUNT)
                return TG_EINVAL;
        if ((int)args->decision.reason < 0 || (int)args->decision.reason >= MANUAL_REASON_COUNT)
                return TG_EINVAL;
        if (!buf_ok(args->error, sizeof(args->error)) ||
            !buf_ok(args->refund_id, sizeof(args->refund_id)))
                return TG_EINVAL;
        return store->ops->settle(store, args);
}

int store_sweep_deadlines(struct store *store, int64_t key_retention_ms, tg_wall_ms now,
                          unsigned *ret_count)
{
        if (!store || !ret_count)
                return TG_EINVAL;
        return store->ops->sweep_deadlines(store, key_retention_ms, now, ret_count);
}

int store_next_due(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending)
{
        if (!store || !ret_next_run_at || !ret_pending)
                return TG_EINVAL;
        return store->ops->next_due(store, ret_next_run_at, ret_pending);
}

int store_list_calls(struct store *store, int64_t since_id, unsigned limit, store_call_fn fn,
                     void *userdata)
{
        if (!store || !fn)
                return TG_EINVAL;
        if (limit == 0)
                return 0;
        return store->ops->list_calls(store, since_id, limit, fn, userdata);
}

int store_list_op_calls(struct store *store, int64_t op_id, store_call_fn fn, void *userdata)
{
        if (!store || !fn)
                return TG_EINVAL;
        return store->ops->list_op_calls(store, op_id, fn, userdata);
}

int store_stats(struct store *store, struct store_stats *ret_stats)
{
        if (!store || !ret_stats)
                return TG_EINVAL;
        return store->ops->stats(store, ret_stats);
}

int store_list_manual(struct store *store, int64_t after_id, unsigned limit, store_op_fn fn,
                      void *userdata)
{
        if (!store || !fn)
                return TG_EINVAL;
        if (limit == 0)
                return 0;
        return store->ops->list_manual(store, after_id, limit, fn, userdata);
}

int store_list_state(struct store *store, enum op_state state, int64_t after_id, unsigned limit,
                     store_op_fn fn, void *userdata)
{
        if (!store || !fn || (int)state < 0 || state >= OP_STATE_COUNT)
                return TG_EINVAL;
        if (!store->ops->list_state)
                return TG_EUNSUPPORTED;
        if (limit == 0)
                return 0;
        return store->ops->list_state(store, state, after_id, limit, fn, userdata);
}

int store_list_audit(struct store *store, int64_t op_id, store_audit_fn fn, void *userdata)
{
        if (!store || !fn)
                return TG_EINVAL;
        return store->ops->list_audit(store, op_id, fn, userdata);
}

int store_operator_resend(struct store *store, const char *operation_id, const char *operator_name,
                          const char *reason, const struct policy_config *config, tg_wall_ms now,
                          struct op_record *ret_op)
{
        if (!store || !config || !ret_op || !text_ok(operation_id, TG_OP_ID_MAX) ||
            !text_ok(operator_name, TG_TEXT_MAX - 1) || !buf_ok(reason, TG_TEXT_MAX))
                return TG_EINVAL;
        return store->ops->operator_resend(store, operation_id, operator_name, reason, config, now,
                                           ret_op);
}

int store_operator_resolve(struct store *store, const char *operation_id, const char *operator_name,
                           const char *reason, enum op_state outcome, tg_wall_ms now,
                           struct op_record *ret_op)
{
        if (!store || !ret_op || !text_ok(operation_id, TG_OP_ID_MAX) ||
            !text_ok(operator_name, TG_TEXT_MAX - 1) || !buf_ok(reason, TG_TEXT_MAX))
                return TG_EINVAL;
        if (outcome != OP_SUCCEEDED && outcome != OP_REJECTED)
                return TG_EINVAL;
        return store->ops->operator_resolve(store, operation_id, operator_name, reason, outcome,
                                            now, ret_op);
}

int store_settle_external(struct store *store, const char *operation_id, enum op_state outcome,
                          const char *refund_id, const char *source, tg_wall_ms now)
{
        if (!store || !text_ok(operation_id, TG_OP_ID_MAX) || !text_ok(source, TG_TEXT_MAX - 1))
                return TG_EINVAL;
        if (refund_id && !buf_ok(refund_id, sizeof((struct op_record){0}.refund_id)))
                return TG_EINVAL;
        if (outcome != OP_SUCCEEDED && outcome != OP_REJECTED)
                return TG_EINVAL;
        return store->ops->settle_external(store, operation_id, outcome, refund_id, source, now);
}

int store_outbox_intake(struct store *store, const struct policy_config *limits, tg_wall_ms now,
                        unsigned *ret_taken, unsigned *ret_invalid)
{
        if (!store || !limits || !ret_taken || !ret_invalid)
                return TG_EINVAL;
        if (!store->ops->outbox_intake)
                return TG_EUNSUPPORTED;
        return store->ops->outbox_intake(store, limits, now, ret_taken, ret_invalid);
}

int store_sample_put(struct store *store, const struct exit_sample *sample, tg_wall_ms keep_after)
{
        if (!store || !sample || !buf_ok(sample->figures, sizeof(sample->figures)))
                return TG_EINVAL;
        if (!store->ops->sample_put)
                return TG_EUNSUPPORTED;
        return store->ops->sample_put(store, sample, keep_after);
}

int store_list_samples(struct store *store, tg_wall_ms since, unsigned limit, store_sample_fn fn,
                       void *userdata)
{
        if (!store || !fn)
                return TG_EINVAL;
        if (limit == 0)
                return 0;
        if (!store->ops->list_samples)
                return TG_EUNSUPPORTED;
        return store->ops->list_samples(store, since, limit, fn, userdata);
}

int store_last_sample(struct store *store, struct exit_sample *ret_sample)
{
        if (!store || !ret_sample)
                return TG_EINVAL;
        if (!store->ops->last_sample)
                return TG_EUNSUPPORTED;
        return store->ops->last_sample(store, ret_sample);
}

int store_set_busy_timeout(struct store *store, int64_t ms)
{
        if (!store || ms < 0 || ms > 3600 * 1000)
                return TG_EINVAL;
        if (!store->ops->set_busy_timeout)
                return TG_EUNSUPPORTED;
        return store->ops->set_busy_timeout(store, ms);
}
