/*
 * names — the four vocabularies every other part of tollgate speaks, each
 * written once, here: an operation's states, the kinds of call, the classes
 * of a call's outcome, and the reasons a case goes to manual review. Each
 * table below makes its enum (in the order of the table), its count, its
 * stored word (the same word in the store's rows, the API's JSON, the logs
 * and the console) and the inverse of that word.
 *
 * Invariants: a word is the identity of its value on the wire and on disk:
 * changing one changes stored rows and the API (the migrations' CHECK
 * lists and openapi.yaml's enums are compared with these tables by
 * tests/names/check_names.py, which also finds a word written again
 * anywhere else in src/). A value's place in a table is its enum value;
 * the values are in [0, count) and every word is unique within its table.
 */
#ifndef TG_NAMES_H
#define TG_NAMES_H

#include <stddef.h>

/* X(value, "word"). The state machine over these is core/policy.h. */
#define TG_STATES(X)                                                                               \
        X(OP_PENDING, "pending")       /* accepted, no call made yet */                            \
        X(OP_IN_FLIGHT, "in_flight")   /* claimed: a call is (about to be) open */                 \
        X(OP_RETRY_WAIT, "retry_wait") /* nothing executed: another POST later */                  \
        X(OP_UNKNOWN, "unknown")       /* may have executed: a query later */                      \
        X(OP_SUCCEEDED, "succeeded")   /* final */                                                 \
        X(OP_REJECTED, "rejected")     /* final */                                                 \
        X(OP_MANUAL, "manual")         /* an operator must decide */                               \
        X(OP_CANCELLED, "cancelled")   /* by its caller, before any call was made (final) */

/* Kinds of call, as the call log records them. */
#define TG_CALL_KINDS(X)                                                                           \
        X(TG_KIND_FIRST, "first")                                                                  \
        X(TG_KIND_RETRY, "retry")                                                                  \
        X(TG_KIND_QUERY, "query")                                                                  \
        X(TG_KIND_MANUAL, "manual") /* a POST an operator asked for */

/* What one call's outcome means to the policy (core/classify.h). */
#define TG_OUTCOME_CLASSES(X)                                                                      \
        /* answers to a POST */                                                                    \
        X(TG_CLASS_SUCCEEDED, "succeeded")   /* executed (201) or replayed (200) */                \
        X(TG_CLASS_REJECTED, "rejected")     /* definite refusal; query: status "failed" */        \
        X(TG_CLASS_KEY_REUSED, "key_reused") /* same key, other payload: manual review */          \
        X(TG_CLASS_RETRYABLE, "retryable")   /* explicit "not accepted, try later" */              \
        X(TG_CLASS_UNKNOWN, "unknown")       /* may or may not have executed: reconcile */         \
        X(TG_CLASS_NOT_SENT, "not_sent")     /* nothing left the machine; counts as an attempt */  \
        /* answers to a query (SUCCEEDED and REJECTED also apply) */                               \
        X(TG_CLASS_PROCESSING, "processing") /* still running at the provider: ask again later */  \
        X(TG_CLASS_NOT_FOUND, "not_found")   /* provider has no record of the key */               \
        X(TG_CLASS_NO_ANSWER, "no_answer")   /* no answer this time: ask again later */

/* Why an operation is in manual; MANUAL_NONE ("none" in the store, null
 * in the API) for one that is not. */
#define TG_MANUAL_REASONS(X)                                                                       \
        X(MANUAL_NONE, "none")                                                                     \
        X(MANUAL_ATTEMPTS_EXHAUSTED, "attempts_exhausted") /* attempt_limit POSTs, no answer */    \
        X(MANUAL_DEADLINE, "deadline")                     /* no final answer by deadline_at */    \
        X(MANUAL_QUERY_BUDGET, "query_budget")             /* query_limit queries, no answer */    \
        X(MANUAL_KEY_REUSED, "key_reused")                 /* provider: same key, other payload */ \
        X(MANUAL_KEY_RETENTION, "key_retention") /* a re-send would fall past key retention */     \
        X(MANUAL_INVALID, "invalid")             /* an outbox row that failed validation */        \
        X(MANUAL_KEY_EXPIRED, "key_expired") /* unknown, queries spent, replay past key's life */  \
        X(MANUAL_NOTIFICATION_DEADLINE,                                                            \
          "notification_deadline") /* notification-only: no notification by its deadline */        \
        X(MANUAL_PENDING_POLLS, "pending_polls") /* provider-pending: poll budget spent */         \
        X(MANUAL_PENDING_DEADLINE,                                                                 \
          "pending_deadline") /* provider-pending: not final by pending_since + its deadline */

#define TG_NAMES_ENUM_ROW(value, word)  value,
#define TG_NAMES_COUNT_ROW(value, word) +1

enum op_state { TG_STATES(TG_NAMES_ENUM_ROW) };
enum tg_call_kind { TG_CALL_KINDS(TG_NAMES_ENUM_ROW) };
enum tg_class { TG_OUTCOME_CLASSES(TG_NAMES_ENUM_ROW) };
enum manual_reason { TG_MANUAL_REASONS(TG_NAMES_ENUM_ROW) };

#define OP_STATE_COUNT      (0 TG_STATES(TG_NAMES_COUNT_ROW))
#define TG_KIND_COUNT       (0 TG_CALL_KINDS(TG_NAMES_COUNT_ROW))
#define TG_CLASS_COUNT      (0 TG_OUTCOME_CLASSES(TG_NAMES_COUNT_ROW))
#define MANUAL_REASON_COUNT (0 TG_MANUAL_REASONS(TG_NAMES_COUNT_ROW))

/* A value's word; "invalid" for a value outside its table. The strings are
 * static. */
const char *op_state_name(enum op_state state);
const char *tg_call_kind_name(enum tg_call_kind kind);
const char *tg_class_name(enum tg_class cls);
const char *manual_reason_name(enum manual_reason reason);

/* The inverses: the exact word (case and all), for reading a stored or
 * requested word back. 0 or TG_EINVAL; *ret_* untouched on failure. */
int op_state_parse(const char *name, enum op_state *ret_state);
int tg_call_kind_parse(const char *name, enum tg_call_kind *ret_kind);
int tg_class_parse(const char *name, enum tg_class *ret_cls);
int manual_reason_parse(const char *name, enum manual_reason *ret_reason);

/* The vocabularies as lists, for whoever shows or checks them all (the
 * console's session, the API's error messages). */
enum tg_vocabulary {
        TG_VOCAB_STATES,
        TG_VOCAB_KINDS,
        TG_VOCAB_CLASSES,
        TG_VOCAB_REASONS, /* without MANUAL_NONE: the reasons a case is in manual for */
};
#define TG_VOCAB_COUNT 4

/* "states", "kinds", "classes", "reasons"; "invalid" outside the enum. */
const char *names_vocabulary_key(enum tg_vocabulary vocabulary);
/* The vocabulary's i-th word in table order, NULL past its end. */
const char *names_word(enum tg_vocabulary vocabulary, unsigned i);
/* The words joined as "a, b, c or d" into dst (always terminated); 0, or
 * TG_EFULL when dst is too small (dst then holds a truncated list). */
int names_join(enum tg_vocabulary vocabulary, char *dst, size_t size);

#endif
