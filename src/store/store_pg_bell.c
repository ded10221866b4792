/*
 * store_pg_bell — the doorbell between processes for the PostgreSQL backend
 * (store_backend.h's bell_ring and bell_listen): an API process on another
 * machine rings the dispatchers the moment it commits new work.
 *
 * Ringing is a NOTIFY inside the transaction that made the work: PostgreSQL
 * delivers it when that transaction commits, never for a rollback, so a
 * dispatcher is never woken for work it cannot yet see. Notifications are
 * per database (the store's), on one channel; a transaction's repeats fold
 * into one.
 *
 * Listening is a dedicated connection that only ever says LISTEN, read by a
 * thread of its own that rings the caller's wake (platform/wake.h) for every
 * notification. Why a thread and not the socket in the dispatcher's own poll:
 * the loop must never block on the store, and a listener must reconnect when
 * the server goes away (a restart, a failover): a blocking connect, up to
 * connect_timeout, belongs off the loop, and a thread keeps the daemon free of
 * any PostgreSQL special case (it waits on one wake, whoever rings it). The
 * listening session holds no transaction and no lock: a LISTEN in
 * autocommit, then idle. After every (re)connect the thread rings once:
 * notifications sent while it was away are lost, and the dispatcher looks
 * for work instead.
 */
#ifdef TG_HAVE_PG /* the whole file: CMake defines it with libpq */

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "platform/wake.h"
#include "store/pg_int.h"

/* The channel (an identifier: a fixed word, nothing to quote). One store per
 * database, so one channel is enough. */
#define BELL_CHANNEL "tollgate_work"

/* A listener that cannot reach the server tries again this often. */
#define RECONNECT_MS 1000

struct pg_bell {
        /* the connection parameters, copied: the thread's own handle (its
         * own last_error), never the store's, which another thread uses */
        struct pg_store conn;
        PGconn *db;        /* the listening session; NULL while away */
        struct wake *ring; /* the caller's: rung for every notification */
        struct wake *stop; /* ours: rung by close */
        pthread_t thread;
};

int store_pg_bell_ring(struct store *store)
{
        return store_pg_exec(P(store), "NOTIFY " BELL_CHANNEL);
}

/* A session that says LISTEN. 0 or a failure (the session is dropped). */
static int bell_connect(struct pg_bell *b)
{
        PGresult *res;
        int r = store_pg_connect_one(&b->conn, true, &b->db);

        if (r < 0)
                return r;
        res = PQexec(b->db, "LISTEN " BELL_CHANNEL);
        r = res && PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : TG_EIO;
        PQclear(res);
        if (r == 0 && PQsetnonblocking(b->db, 1) != 0)
                r = TG_EIO;
        if (r < 0)
                store_pg_conn_drop(&b->db);
        return r;
}

/* Waits for the session's socket (or only for stop, up to ms, when away).
 * true: stop rang. */
static bool bell_wait(struct pg_bell *b, int ms)
{
        struct pollfd fds[2] = {{.fd = wake_fd(b->stop), .events = POLLIN},
                                {.fd = b->db ? PQsocket(b->db) : -1, .events = POLLIN}};
        int n = poll(fds, 2, b->db ? -1 : ms);

        if (n < 0 && errno != EINTR)
                store_pg_conn_drop(&b->db); /* (no wait without a socket) */
        return n > 0 && (fds[0].revents & POLLIN);
}

/* Takes what the session received: true when a notification came. A
 * session that broke is dropped. */
static bool bell_heard(struct pg_bell *b)
{
        PGnotify *n;
        bool heard = false;

        if (!b->db)
                return false;
        if (!PQconsumeInput(b->db) || PQstatus(b->db) != CONNECTION_OK) {
                store_pg_conn_drop(&b->db);
                return false;
        }
        while ((n = PQnotifies(b->db)) != NULL) {
                heard = true;
                PQfreemem(n);
        }
        return heard;
}

static void *bell_run(void *arg)
{
        struct pg_bell *b = arg;

        for (;;) {
                if (!b->db && bell_connect(b) == 0)
                        wake_ring(b->ring); /* what came while away is lost: look */
                if (bell_wait(b, RECONNECT_MS))
                        break;
                if (bell_heard(b))
                        wake_ring(b->ring);
        }
        return NULL;
}

int store_pg_bell_listen(struct store *store, struct wake *bell)
{
        struct pg_store *s = P(store);
        struct pg_bell *b;

        if (s->bell)
                return TG_EINVAL; /* one listener per handle */
        b = calloc(1, sizeof(*b));
        if (!b)
                return TG_ENOMEM;
        b->conn = *s;
        b->conn.db = b->conn.lock_db = NULL;
        b->conn.bell = NULL;
        b->ring = bell;
        if (wake_new(&b->stop) < 0 || pthread_create(&b->thread, NULL, bell_run, b) != 0) {
                wake_free(b->stop);
                memset(b->conn.password, 0, sizeof(b->conn.password));
                free(b);
                return TG_ENOMEM;
        }
        s->bell = b;
        return 0;
}

void store_pg_bell_close(struct pg_store *s)
{
        struct pg_bell *b = s->bell;

        if (!b)
                return;
        wake_ring(b->stop);
        pthread_join(b->thread, NULL);
        store_pg_conn_drop(&b->db);
        wake_free(b->stop);
        memset(b->conn.password, 0, sizeof(b->conn.password));
        free(b);
        s->bell = NULL;
}

#endif /* TG_HAVE_PG */
