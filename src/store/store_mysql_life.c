/*
 * store_mysql_life — the MariaDB backend's lifecycle primitives
 * (store_backend.h): counters and the prune's pick and delete. The rules
 * they keep are the neutral layer's (store_life.c); the triggers of
 * migration 5 refuse any delete but a prune's (where the server let us
 * create triggers: see docs/outbox.md on grants).
 */
#ifdef TG_HAVE_MARIADB /* the whole file: CMake defines it with libmariadb */

#include <mysql.h>
#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"
#include "store/mysql_int.h"
#include "store/store_server.h"

int store_mysql_counter_add(struct store *store, enum store_counter counter, int64_t delta)
{
        struct mysql_store *s = M(store);

        if ((unsigned)counter >= STORE_COUNTER_COUNT)
                return TG_EINVAL;
        if (s->in_tx) {
                s->counter_delta[counter] += delta; /* store_mysql_counters_flush */
                return 0;
        }
        return store_mysql_counters_write(s, counter, delta);
}

int store_mysql_counters_write(struct mysql_store *s, enum store_counter counter, int64_t delta)
{
        int r = store_mysql_exec(s, "UPDATE counters SET n = n + %I WHERE name = %S", delta,
                                 store_counter_text(counter));

        if (r == 0 && s->affected != 1)
                r = TG_ESTORE; /* a counter row is missing: the schema is not ours */
        return r;
}

int store_mysql_counters_flush(struct mysql_store *s)
{
        int r = 0;

        for (unsigned c = 0; c < STORE_COUNTER_COUNT && r == 0; c++)
                if (s->counter_delta[c] != 0)
                        r = store_mysql_counters_write(s, (enum store_counter)c,
                                                       s->counter_delta[c]);
        return r;
}

int store_mysql_prune_pick(struct store *store, enum op_state state, tg_wall_ms before,
                           int64_t after_at, int64_t after_id, unsigned max, int64_t *ret_ids,
                           int64_t *ret_at, unsigned *ret_n)
{
        struct mysql_store *s = M(store);
        MYSQL_RES *res;
        MYSQL_ROW row;
        unsigned n = 0;
        /* the oldest final operations of one state after the cursor, in the
         * order of ops_state_updated; never one with an audit trail, never
         * the newest operation or the newest call's (as on SQLite) */
        int r = store_mysql_query(
            s, &res,
            "SELECT id, updated_at FROM operations FORCE INDEX (ops_state_updated) "
            "WHERE state = %S AND updated_at < %I "
            "AND (updated_at > %I OR (updated_at = %I AND id > %I)) "
            "AND id < (SELECT MAX(id) FROM operations) "
            "AND NOT EXISTS (SELECT 1 FROM audit a WHERE a.op_id = operations.id) "
            "AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.op_id = operations.id "
            "  AND c.id = (SELECT MAX(id) FROM calls)) "
            "ORDER BY updated_at, id LIMIT %I FOR UPDATE",
            op_state_name(state), before, after_at, after_at, after_id, (int64_t)max);

        if (r < 0)
                return r;
        while (r == 0 && n < max && (row = mysql_fetch_row(res)) != NULL) {
                if (!store_mysql_parse_i64(row[0], &ret_ids[n]) ||
                    !store_mysql_parse_i64(row[1], &ret_at[n]))
                        r = TG_ESTORE;
                else
                        n++;
        }
        mysql_free_result(res);
        if (r == 0)
                *ret_n = n;
        return r;
}

/* The prune's statements (store_server.h), whole: only integers in them. */
static int prune_exec(void *conn, const char *sql, uint64_t *ret_affected)
{
        struct mysql_store *s = conn;
        int r = store_mysql_exec(s, "%s", sql);

        if (r == 0)
                *ret_affected = s->affected;
        return r;
}

int store_mysql_prune_delete(struct store *store, const int64_t *ids, unsigned n, tg_wall_ms before,
                             uint64_t *ret_calls)
{
        return store_server_prune_delete(M(store), prune_exec, ids, n, before, ret_calls);
}

#endif /* TG_HAVE_MARIADB */
