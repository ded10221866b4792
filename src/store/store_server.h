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

#include <stdint.h>

#include "core/tg_time.h"

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

#endif
