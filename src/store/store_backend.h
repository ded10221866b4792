/*
 * store_backend — what a store backend implements, and the helpers that every
 * backend shares. Private to src/store: nothing outside this folder includes
 * it.
 *
 * A backend allocates its own handle with `struct store` as its FIRST member
 * and hands it back from its open function; store.c forwards every public
 * call through store->ops and owns nothing else but the url text for logs.
 * Every op below has exactly the contract of the store.h function of the
 * same name: the dispatch layer checks NULL pointers and plain argument
 * ranges before calling, so a backend may assume them valid.
 *
 * On-disk (and on-wire) names of states, kinds, classes and manual reasons
 * are fixed here, not borrowed from the core's display names: they are part
 * of the stored format (an outbox writer inserts 'pending'), versioned with
 * the schema, and must not change when a log text does.
 */
#ifndef TG_STORE_BACKEND_H
#define TG_STORE_BACKEND_H

#include "store/store.h"

#define STORE_URL_MAX 512

struct store_ops;

struct store {
        const struct store_ops *ops;
        char url_masked[STORE_URL_MAX]; /* filled by store.c after open */
};

struct store_ops {
        const char *name; /* "sqlite", "mysql" */
        void (*close)(struct store *store);

        int (*accept)(struct store *store, const struct refund_request *req, tg_wall_ms now,
                      const struct policy_config *limits, bool *ret_created,
                      struct op_record *ret_op);
        int (*get)(struct store *store, const char *operation_id, struct op_record *ret_op);

        /* split NULL: store_owner_acquire() (share 0 of a one-share split,
         * rate not recorded) */
        int (*share_acquire)(struct store *store, const struct store_split *split,
                             unsigned *ret_share, int64_t *ret_epoch);
        int (*split_get)(struct store *store, struct store_split *ret_split);
        int (*owner_check)(struct store *store);
        void (*owner_release)(struct store *store);
        int (*owner_epoch)(struct store *store, int64_t *ret_epoch);
        int (*recover)(struct store *store, int64_t epoch, const struct policy_config *config,
                       tg_wall_ms now, unsigned *ret_count);

        int (*claim)(struct store *store, const struct claim_args *args, struct op_record *ret_op,
                     struct call_record *ret_call);
        int (*settle)(struct store *store, const struct settle_args *args);
        int (*sweep_deadlines)(struct store *store, int64_t key_retention_ms, tg_wall_ms now,
                               unsigned *ret_count);
        int (*next_due)(struct store *store, tg_wall_ms *ret_next_run_at, bool *ret_pending);

        int (*list_calls)(struct store *store, int64_t since_id, unsigned limit, store_call_fn fn,
                          void *userdata);
        int (*list_op_calls)(struct store *store, int64_t op_id, store_call_fn fn, void *userdata);
        int (*stats)(struct store *store, struct store_stats *ret_stats);

        int (*list_manual)(struct store *store, int64_t after_id, unsigned limit, store_op_fn fn,
                           void *userdata);
        int (*list_state)(struct store *store, enum op_state state, int64_t after_id,
                          unsigned limit, store_op_fn fn, void *userdata);
        int (*list_audit)(struct store *store, int64_t op_id, store_audit_fn fn, void *userdata);
        int (*operator_resend)(struct store *store, const char *operation_id,
                               const char *operator_name, const char *reason,
                               const struct policy_config *config, tg_wall_ms now,
                               struct op_record *ret_op);
        int (*operator_resolve)(struct store *store, const char *operation_id,
                                const char *operator_name, const char *reason,
                                enum op_state outcome, tg_wall_ms now, struct op_record *ret_op);
        int (*settle_external)(struct store *store, const char *operation_id, enum op_state outcome,
                               const char *refund_id, const char *source, tg_wall_ms now);
        /* optional (NULL: TG_EUNSUPPORTED) */
        int (*outbox_intake)(struct store *store, const struct policy_config *limits,
                             tg_wall_ms now, unsigned *ret_taken, unsigned *ret_invalid);
        /* exit samples; optional (NULL: TG_EUNSUPPORTED) */
        int (*sample_put)(struct store *store, const struct exit_sample *sample,
                          tg_wall_ms keep_after);
        int (*list_samples)(struct store *store, tg_wall_ms since, unsigned limit,
                            store_sample_fn fn, void *userdata);
        int (*last_sample)(struct store *store, struct exit_sample *ret_sample);
        /* optional (NULL: TG_EUNSUPPORTED) */
        int (*set_busy_timeout)(struct store *store, int64_t ms);
};

/* Backend constructors. `where` is the url without its scheme ("PATH" for
 * sqlite://PATH; "user:pass@host:port/db" for mysql://). 0 or a TG_E* code;
 * *ret_store is freed with its ops->close. */
int store_sqlite_open(const char *where, struct store **ret_store);
#ifdef TG_HAVE_MARIADB
int store_mysql_open(const char *where, struct store **ret_store);
#endif

/* ---- shared helpers (store.c) ---------------------------------------- */

/* Stored names. *_text never returns NULL ("?" for an out-of-range value,
 * which the backends never store); *_parse returns 0 or TG_EPARSE. */
const char *store_state_text(enum op_state state);
int store_state_parse(const char *text, enum op_state *ret_state);
const char *store_kind_text(enum tg_call_kind kind);
int store_kind_parse(const char *text, enum tg_call_kind *ret_kind);
const char *store_class_text(enum tg_class cls);
int store_class_parse(const char *text, enum tg_class *ret_cls);
const char *store_reason_text(enum manual_reason reason);
int store_reason_parse(const char *text, enum manual_reason *ret_reason);

/* The policy's view of a stored operation. */
void store_policy_op(const struct op_record *op, struct policy_op *ret_pop);

/* Bounded copy: at most dst_size-1 bytes of src, always terminated. */
void store_copy_text(char *dst, size_t dst_size, const char *src);

/* True when the state is final (succeeded, rejected). */
bool store_state_is_final(enum op_state state);

/* Two splits are the same split (shares, in-flight, and the rate to a part
 * in 1e9). */
bool store_split_same(const struct store_split *a, const struct store_split *b);

#endif
