/*
 * store_server — the loops the server backends share (store_server.h): the
 * prune's chunked delete. Its statements hold integers only (ids, a time),
 * printed here, so they need no escaping and are the same SQL on MariaDB
 * and PostgreSQL; each runs through the backend's exec callback. And the
 * transaction's retry loop: which errors are which is the backend's (its
 * callbacks say TG_EBUSY or TG_EIO), what is retried and how often is here.
 */
#include "store/store_server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/policy.h"
#include "core/tg_error.h"

/* Ids per DELETE: the statement fits the SQL builders' buffers (SQL_MAX). */
#define DELETE_CHUNK 500
#define LIST_MAX     (DELETE_CHUNK * 21 + 1)
#define BUSY_TRIES   8 /* rolled back by the server: whole-transaction retries */
#define LOST_TRIES   1 /* lost connection: reconnect and retry once */

/* exec of "<head>(<list>)" */
static int exec_in(void *conn, store_server_exec_fn exec, const char *head, const char *list,
                   uint64_t *ret_affected)
{
        char sql[LIST_MAX + 64];
        int w = snprintf(sql, sizeof(sql), "%s(%s)", head, list);

        if (w < 0 || (size_t)w >= sizeof(sql))
                return TG_EINVAL;
        return exec(conn, sql, ret_affected);
}

int store_server_prune_delete(void *conn, store_server_exec_fn exec, const int64_t *ids, unsigned n,
                              tg_wall_ms before, uint64_t *ret_calls)
{
        uint64_t calls = 0, affected = 0;
        char sql[96];
        int r;

        /* the permit the triggers look for: no other session ever sees it
         * (deleted below, or rolled back with the transaction) */
        snprintf(sql, sizeof(sql), "INSERT INTO prune_permit (id, before_at) VALUES (1, %lld)",
                 (long long)before);
        r = exec(conn, sql, &affected);
        for (unsigned from = 0; r == 0 && from < n; from += DELETE_CHUNK) {
                unsigned to = n - from > DELETE_CHUNK ? from + DELETE_CHUNK : n;
                char list[LIST_MAX];
                size_t at = 0;

                for (unsigned i = from; i < to; i++) {
                        int w = snprintf(list + at, sizeof(list) - at, "%s%lld",
                                         i > from ? "," : "", (long long)ids[i]);
                        if (w < 0 || (size_t)w >= sizeof(list) - at)
                                return TG_EINVAL;
                        at += (size_t)w;
                }
                r = exec_in(conn, exec, "DELETE FROM calls WHERE op_id IN ", list, &affected);
                if (r == 0) {
                        calls += affected;
                        r = exec_in(conn, exec, "DELETE FROM operations WHERE id IN ", list,
                                    &affected);
                }
                if (r == 0 && affected != to - from)
                        r = TG_ESTORE;
        }
        if (r == 0)
                r = exec(conn, "DELETE FROM prune_permit WHERE id = 1", &affected);
        if (r == 0)
                *ret_calls = calls;
        return r;
}

static void pause_ms(long ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
}

int store_server_tx(struct store *store, void *conn, const struct store_server_tx *tx,
                    unsigned flags, store_tx_fn fn, void *ctx, bool *commit_unknown)
{
        unsigned busy = 0, lost = 0;
        int r;

        *commit_unknown = false;
        for (;;) {
                bool committing = false;

                r = tx->connect(conn);
                if (r == 0)
                        r = tx->exec(conn, tx->begin_sql);
                tx->enter(conn);
                if (r == 0)
                        r = fn(store, ctx);
                r = tx->leave(conn, r);
                if (r == 0) {
                        committing = true;
                        r = tx->exec(conn, "COMMIT");
                }
                if (r == 0)
                        break;
                if (tx->connected(conn) && !committing)
                        (void)tx->exec(conn, "ROLLBACK");
                if (r == TG_EBUSY && busy < BUSY_TRIES) {
                        /* the server rolled it back (or we did): the
                         * transaction never happened */
                        busy++;
                        pause_ms(5L << (busy < 6 ? busy : 6));
                        continue;
                }
                if (r == TG_EIO && !tx->connected(conn) && lost < LOST_TRIES) {
                        if (committing) {
                                if (!(flags & STORE_TX_RECHECKS))
                                        break; /* outcome unknown: say so */
                                *commit_unknown = true;
                        }
                        lost++;
                        continue;
                }
                break;
        }
        *commit_unknown = false;
        return r;
}

void store_server_lists_make(struct store_server_lists *l)
{
        store_state_list_sql(policy_group_states(POLICY_GROUP_FIRST), l->first, sizeof(l->first));
        store_state_list_sql(policy_group_states(POLICY_GROUP_AGAIN), l->again, sizeof(l->again));
        store_state_list_sql(policy_kind_states(TG_KIND_QUERY), l->query, sizeof(l->query));
        store_state_list_sql(policy_sources(OP_EV_DEADLINE), l->waiting, sizeof(l->waiting));
        store_state_list_sql(policy_sources(OP_EV_KEY_RETENTION), l->resend, sizeof(l->resend));
        store_state_list_sql(policy_sources(OP_EV_TAKEOVER), l->flight, sizeof(l->flight));
        store_state_list_sql(policy_sources(OP_EV_OUTBOX), l->outbox, sizeof(l->outbox));
        snprintf(l->key_old, sizeof(l->key_old),
                 "(%s AND attempts > 0 AND key_first_used > 0 AND key_first_used <= %%I - %%I)",
                 l->resend);
        snprintf(l->due, sizeof(l->due),
                 "%s AND attempt_limit > 0 AND next_run_at <= %%I AND deadline_at > %%I "
                 "AND NOT %s AND (%%I & (CASE WHEN %s THEN 1 ELSE 2 END)) <> 0",
                 l->again, l->key_old, l->query);
}

int store_server_vsqlf(char *sql, size_t size, store_server_quote_fn quote, void *conn,
                       const char *fmt, va_list ap)
{
        size_t n = 0;

        for (const char *p = fmt; *p; p++) {
                char num[32];
                const char *add = NULL;
                size_t len;

                if (*p != '%') {
                        if (n + 1 >= size)
                                return TG_ESTORE;
                        sql[n++] = *p;
                        continue;
                }
                p++;
                switch (*p) {
                case 'I':
                        snprintf(num, sizeof(num), "%" PRId64, va_arg(ap, int64_t));
                        add = num;
                        break;
                case 'U':
                        snprintf(num, sizeof(num), "%u", va_arg(ap, unsigned));
                        add = num;
                        break;
                case 's':
                        add = va_arg(ap, const char *);
                        break;
                case '%':
                        add = "%";
                        break;
                case 'S':
                case 'L': {
                        const char *str = va_arg(ap, const char *);
                        size_t k = 0;

                        len = strnlen(str, *p == 'L' ? STORE_FIGURES_MAX : TG_TEXT_MAX * 2);
                        /* worst case: every byte escaped, two quotes, NUL */
                        if (n + 2 * len + 3 >= size || quote(conn, sql + n, str, len, &k) < 0)
                                return TG_ESTORE;
                        n += k;
                        continue;
                }
                default:
                        return TG_ESTORE; /* a bug in a backend's format */
                }
                len = strlen(add);
                if (n + len >= size)
                        return TG_ESTORE;
                memcpy(sql + n, add, len);
                n += len;
        }
        sql[n] = '\0';
        return 0;
}
