/*
 * store_sqlite_life — the SQLite backend's lifecycle primitives
 * (store_backend.h): counters, the prune's pick and delete, whether the
 * database file moved, and the online backup. The rules they keep are the
 * neutral layer's (store_life.c); the triggers of migration 6 refuse any
 * delete but a prune's.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/policy.h"
#include "core/tg_error.h"
#include "store/sqlite_int.h"

static const char *const life_sql[LIFE_COUNT] = {
    [LIFE_COUNTER_ADD] = "UPDATE counters SET n = n + ?2 WHERE name = ?1",
    /* the oldest final operations of one state after the cursor (?3 at, ?4
     * id) and before the cutoff (?2), in index order (ops_state_updated);
     * never one with an audit trail, never the newest operation or the
     * newest call's (their ids would be handed out again) */
    [LIFE_PRUNE_PICK] =
        "SELECT o.id, o.updated_at FROM operations o INDEXED BY ops_state_updated "
        "WHERE o.state = ?1 AND o.updated_at < ?2 AND (o.updated_at, o.id) > (?3, ?4) "
        "AND o.id < (SELECT max(id) FROM operations) "
        "AND NOT EXISTS (SELECT 1 FROM audit a WHERE a.op_id = o.id) "
        "AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.op_id = o.id "
        "  AND c.id = (SELECT max(id) FROM calls)) "
        "ORDER BY o.updated_at, o.id LIMIT ?5",
    [LIFE_PERMIT_PUT] = "INSERT INTO prune_permit (id, before_at) VALUES (1, ?1)",
    [LIFE_PERMIT_DROP] = "DELETE FROM prune_permit WHERE id = 1",
    [LIFE_CALLS_DELETE] = "DELETE FROM calls WHERE op_id = ?1",
    [LIFE_OP_DELETE] = "DELETE FROM operations WHERE id = ?1",
};

static int life_stmt(struct sqlite_store *s, enum life_stmt id, sqlite3_stmt **ret)
{
        if (!s->life[id]) {
                int rc = sqlite3_prepare_v3(s->db, life_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                            &s->life[id], NULL);
                if (rc != SQLITE_OK) {
                        s->life[id] = NULL;
                        return store_sqlite_map_rc(rc);
                }
        }
        *ret = s->life[id];
        return 0;
}

int store_sqlite_counter_add(struct store *store, enum store_counter counter, int64_t delta)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        const char *name = store_counter_text(counter);
        int r = life_stmt(s, LIFE_COUNTER_ADD, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_text(st, 1, name, 32) || store_sqlite_bind_i64(st, 2, delta)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        r = store_sqlite_stmt_run(st);
        if (r == 0 && sqlite3_changes(s->db) != 1)
                r = TG_ESTORE; /* a counter row is missing: the schema is not ours */
        return r;
}

int store_sqlite_prune_pick(struct store *store, enum op_state state, tg_wall_ms before,
                            int64_t after_at, int64_t after_id, unsigned max, int64_t *ret_ids,
                            int64_t *ret_at, unsigned *ret_n)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        unsigned n = 0;
        int r = life_stmt(s, LIFE_PRUNE_PICK, &st), rc;

        if (r < 0)
                return r;
        if (store_sqlite_bind_text(st, 1, op_state_name(state), 16) ||
            store_sqlite_bind_i64(st, 2, before) || store_sqlite_bind_i64(st, 3, after_at) ||
            store_sqlite_bind_i64(st, 4, after_id) || store_sqlite_bind_i64(st, 5, max)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        while (n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                ret_ids[n] = sqlite3_column_int64(st, 0);
                ret_at[n] = sqlite3_column_int64(st, 1);
                n++;
        }
        if (n < max && rc != SQLITE_DONE)
                r = store_sqlite_map_rc(rc);
        store_sqlite_stmt_done(st);
        if (r == 0)
                *ret_n = n;
        return r;
}

static int run_id(struct sqlite_store *s, enum life_stmt id, int64_t v)
{
        sqlite3_stmt *st = NULL;
        int r = life_stmt(s, id, &st);

        if (r < 0)
                return r;
        if (store_sqlite_bind_i64(st, 1, v)) {
                store_sqlite_stmt_done(st);
                return TG_ESTORE;
        }
        return store_sqlite_stmt_run(st);
}

int store_sqlite_prune_delete(struct store *store, const int64_t *ids, unsigned n,
                              tg_wall_ms before, uint64_t *ret_calls)
{
        struct sqlite_store *s = S(store);
        uint64_t calls = 0;
        int r;

        /* the permit the triggers look for: it never outlives this
         * transaction (dropped below, or rolled back with it) */
        r = run_id(s, LIFE_PERMIT_PUT, before);
        for (unsigned i = 0; r == 0 && i < n; i++) {
                r = run_id(s, LIFE_CALLS_DELETE, ids[i]);
                if (r == 0)
                        calls += (uint64_t)sqlite3_changes(s->db);
                if (r == 0)
                        r = run_id(s, LIFE_OP_DELETE, ids[i]);
                if (r == 0 && sqlite3_changes(s->db) != 1)
                        r = TG_ESTORE;
        }
        if (r == 0) {
                sqlite3_stmt *st = NULL;
                r = life_stmt(s, LIFE_PERMIT_DROP, &st);
                if (r == 0)
                        r = store_sqlite_stmt_run(st);
        }
        if (r == 0)
                *ret_calls = calls;
        return r;
}

bool store_sqlite_moved(struct store *store)
{
        int moved = 0;

        /* unlinked, renamed or replaced since it was opened */
        if (sqlite3_file_control(S(store)->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) != SQLITE_OK)
                return false;
        return moved != 0;
}

int store_sqlite_backup(struct store *store, const char *path)
{
        struct sqlite_store *s = S(store);
        sqlite3_stmt *st = NULL;
        struct stat sb;
        int rc, r;

        if (stat(path, &sb) == 0)
                return TG_ECONFLICT; /* never over an existing file */
        /* VACUUM INTO: a consistent snapshot of one read transaction,
         * compacted, while writers go on (WAL). */
        rc = sqlite3_prepare_v2(s->db, "VACUUM INTO ?1", -1, &st, NULL);
        if (rc != SQLITE_OK)
                return store_sqlite_map_rc(rc);
        if (store_sqlite_bind_text(st, 1, path, 4096)) {
                sqlite3_finalize(st);
                return TG_ESTORE;
        }
        rc = sqlite3_step(st);
        r = rc == SQLITE_DONE ? 0 : store_sqlite_map_rc(rc);
        sqlite3_finalize(st);
        return r;
}
