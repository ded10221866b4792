/*
 * store_server — what the two server backends (store_mysql*.c,
 * store_pg*.c) do the same way and differ in only by the driver call: a
 * loop written once here that calls back into the backend for each
 * statement. SQL that differs in dialect stays in the backends; what is
 * written here is plain SQL both servers read alike. Nothing here knows a
 * driver, a code or a connection.
 *
 * Invariants: every callback runs on the backend's one connection, inside
 * the transaction its caller holds; a failing callback stops the loop and
 * its code is returned as it is.
 */
#ifndef TG_STORE_SERVER_H
#define TG_STORE_SERVER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tg_time.h"
#include "store/store_backend.h"

/* Runs one statement, whole (only integers in it, printed), on conn (the
 * backend's store) as the backend's exec does; *ret_affected gets the rows it
 * changed. 0 or the backend's code. */
typedef int (*store_server_exec_fn)(void *conn, const char *sql, uint64_t *ret_affected);

/* The prune's delete (store_backend.h prune_delete) over exec: the permit, then ids[0..n) in chunks that
 * fit one statement (calls first, then their operations, every operation
 * found), then the permit removed. *ret_calls gets the calls deleted, on
 * success only. 0; TG_ESTORE when an operation was not there; or exec's
 * code. */
int store_server_prune_delete(void *conn, store_server_exec_fn exec, const int64_t *ids, unsigned n,
                              tg_wall_ms before, uint64_t *ret_calls);

/* A backend's side of a transaction (store_server_tx), each called with
 * conn (the backend's store). The backend classifies its driver's errors:
 * exec and the rest return TG_EBUSY for what the server rolled back
 * (deadlock, lock wait timeout, serialization failure) and TG_EIO for a
 * lost connection, after which connected() is false. */
struct store_server_tx {
        const char *begin_sql;                    /* the statement that starts a transaction */
        int (*connect)(void *conn);               /* connect when not connected */
        int (*exec)(void *conn, const char *sql); /* a statement whose rows do not matter */
        void (*enter)(void *conn);                /* the per-transaction state reset, in_tx */
        int (*leave)(void *conn, int r);          /* out of fn: r, or the flush of deferred rows */
        bool (*connected)(void *conn);
};

#define STORE_SERVER_STATES_MAX 128 /* "state IN (...)" of every state fits */

/* The state lists the server backends' picks and batches are made from
 * (the transition table's, core/policy.h, as SQL predicates), and two
 * predicates over them written as formats for the SQL builders (%I an
 * integer): key_old is policy_key_too_old() (%I now, %I key retention),
 * due the again group's policy_is_due() (%I now twice, key_old's two, then
 * %I 1 when queries are allowed). */
struct store_server_lists {
        char first[STORE_SERVER_STATES_MAX], again[STORE_SERVER_STATES_MAX];
        char query[STORE_SERVER_STATES_MAX], waiting[STORE_SERVER_STATES_MAX];
        char resend[STORE_SERVER_STATES_MAX], flight[STORE_SERVER_STATES_MAX];
        char outbox[STORE_SERVER_STATES_MAX];
        char key_old[3 * STORE_SERVER_STATES_MAX], due[8 * STORE_SERVER_STATES_MAX];
};

void store_server_lists_make(struct store_server_lists *l);

/* Runs fn(store, ctx) inside one transaction: begin_sql, fn, COMMIT; a
 * failing fn is rolled back. Retries TG_EBUSY (the whole transaction, up
 * to 8 times, with a growing pause) and a lost connection (once, after
 * reconnecting) when the transaction surely did not commit, or when fn
 * re-checks (STORE_TX_RECHECKS: *commit_unknown is then true while fn runs
 * again). Returns fn's code or a TG_E* code; *commit_unknown is false. */
int store_server_tx(struct store *store, void *conn, const struct store_server_tx *tx,
                    unsigned flags, store_tx_fn fn, void *ctx, bool *commit_unknown);

/* Appends str[0..len) as a quoted, escaped literal at dst, which has room
 * for 2 * len + 3 bytes: 0 and the bytes written in *ret_n, or TG_ESTORE
 * (no connection to escape for). */
typedef int (*store_server_quote_fn)(void *conn, char *dst, const char *str, size_t len,
                                     size_t *ret_n);

/* The one SQL builder of the server backends: formats into sql[size].
 * %I int64_t, %U unsigned, %S a string (at most 2 * TG_TEXT_MAX bytes are
 * used), %L a long string (at most STORE_FIGURES_MAX), both through quote,
 * %s trusted SQL text (the backends' constants only), %% a percent sign.
 * TG_ESTORE when it does not fit, a string cannot be quoted, or the format
 * has another conversion (a bug in a backend's format). */
int store_server_vsqlf(char *sql, size_t size, store_server_quote_fn quote, void *conn,
                       const char *fmt, va_list ap);

#endif
