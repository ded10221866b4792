/*
 * transport_pool — keep-alive hygiene, with provider.reuse_connections: the
 * sockets libcurl opens for the transport, which of them sit idle in its
 * connection cache, and since when; and, before a call starts, the end of
 * every idle connection older than its safe life.
 *
 * Why: a provider closes a connection that has been idle for its keep-alive
 * timeout. A request libcurl sends on a cached connection just as that
 * close is on its way meets a reset; libcurl would send it again on a fresh
 * connection, the pre-request hook refuses that second send (transport.c),
 * and the attempt ends unknown although the provider never read it.
 * libcurl's own limit (CURLOPT_MAXAGE_CONN) counts whole seconds, too coarse
 * for a provider that closes after 200 ms. So the transport keeps its own
 * account: a connection idle for longer than its safe life is shut down
 * here (shutdown(2): libcurl's liveness check then finds it dead, drops it
 * and connects afresh), so no request is ever sent on it.
 *
 * The safe life is the provider's idle timeout (provider.keepalive_idle_ms,
 * else the shortest `Keep-Alive: timeout=N` the provider announced, else
 * none: libcurl's 118 s) less a margin of a quarter of it, at least
 * POOL_MARGIN_MIN_MS: the margin covers the time between the sweep and the
 * request going out (the pre-request hold for the slot, the send) and the
 * provider's own timer slack.
 *
 * Invariants:
 *   - only sockets opened through pool_open_socket (libcurl's connections
 *     for this transport) are ever shut down, and an entry leaves the table
 *     in pool_close_socket before its descriptor is closed, so a number
 *     reused by anything else is never touched;
 *   - a connection a call is using is never shut down: the pre-request hook
 *     marks it busy (its local port names it) before its request goes out,
 *     and the sweep runs only before a new call is handed to libcurl;
 *   - the table is bounded (POOL_SLOTS per open call): past it, a new
 *     connection is refused (the call ends not sent), never left unwatched.
 */
#include "net/transport_int.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/tg_error.h"

/* The most sockets a transport holds at once: max_open in use, as many idle
 * in the cache (CURLMOPT_MAXCONNECTS), and the attempts of a connect in
 * progress (happy eyeballs: two families). */
#define POOL_SLOTS         4
#define POOL_MARGIN_MIN_MS 50

int transport_pool_init(struct transport *t, int64_t idle_life_ms)
{
        t->pool_cap = POOL_SLOTS * t->max_open + 4;
        t->pool = calloc(t->pool_cap, sizeof(*t->pool));
        if (!t->pool)
                return TG_ENOMEM;
        t->pool_life_ms = idle_life_ms > 0 ? idle_life_ms : 0;
        t->pool_learned_ms = -1;
        return 0;
}

void transport_pool_release(struct transport *t)
{
        free(t->pool);
        t->pool = NULL;
        t->pool_len = 0;
}

static struct pool_sock *find_fd(struct transport *t, curl_socket_t fd)
{
        for (unsigned i = 0; i < t->pool_len; i++)
                if (t->pool[i].fd == fd)
                        return &t->pool[i];
        return NULL;
}

static int local_port(curl_socket_t fd)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return 0;
        if (ss.ss_family == AF_INET)
                return ntohs(((struct sockaddr_in *)&ss)->sin_port);
        if (ss.ss_family == AF_INET6)
                return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        return 0;
}

/* CURLOPT_OPENSOCKETFUNCTION */
static curl_socket_t pool_open_socket(void *clientp, curlsocktype purpose,
                                      struct curl_sockaddr *address)
{
        struct transport *t = clientp;
        if (purpose != CURLSOCKTYPE_IPCXN || t->pool_len >= t->pool_cap)
                return CURL_SOCKET_BAD;
        curl_socket_t fd =
            socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
        if (fd == CURL_SOCKET_BAD)
                return fd;
        t->pool[t->pool_len++] = (struct pool_sock){.fd = fd};
        return fd;
}

/* CURLOPT_CLOSESOCKETFUNCTION: the entry goes first, then the descriptor. */
static int pool_close_socket(void *clientp, curl_socket_t fd)
{
        struct transport *t = clientp;
        struct pool_sock *s = find_fd(t, fd);
        if (s)
                *s = t->pool[--t->pool_len];
        return close(fd);
}

void transport_pool_setup(struct transport *t, CURL *easy)
{
        if (!t->reuse)
                return;
        curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, pool_open_socket);
        curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, t);
        curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, pool_close_socket);
        curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, t);
}

void transport_pool_busy(struct transport *t, int port)
{
        for (unsigned i = 0; i < t->pool_len; i++) {
                struct pool_sock *s = &t->pool[i];
                if (!s->port)
                        s->port = local_port(s->fd);
                if (s->port == port)
                        s->idle = false;
        }
}

void transport_pool_idle(struct transport *t, CURL *easy, int64_t keep_alive_ms, tg_mono_ns now)
{
        if (!t->reuse)
                return;
        if (keep_alive_ms >= 0 && (t->pool_learned_ms < 0 || keep_alive_ms < t->pool_learned_ms))
                t->pool_learned_ms = keep_alive_ms;
        curl_socket_t fd = CURL_SOCKET_BAD;
        /* the connection the call ended on, when libcurl kept it */
        if (curl_easy_getinfo(easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK ||
            fd == CURL_SOCKET_BAD)
                return;
        struct pool_sock *s = find_fd(t, fd);
        if (s && !s->shut) {
                s->idle = true;
                s->idle_since = now;
        }
}

int64_t transport_pool_safe_life_ms(const struct transport *t)
{
        int64_t life = t->pool_life_ms > 0 ? t->pool_life_ms : t->pool_learned_ms;
        if (life < 0)
                return -1;
        int64_t margin = life / 4 > POOL_MARGIN_MIN_MS ? life / 4 : POOL_MARGIN_MIN_MS;
        return life > margin ? life - margin : 0;
}

void transport_pool_sweep(struct transport *t, tg_mono_ns now)
{
        if (!t->reuse)
                return;
        int64_t safe = transport_pool_safe_life_ms(t);
        if (safe < 0)
                return;
        for (unsigned i = 0; i < t->pool_len; i++) {
                struct pool_sock *s = &t->pool[i];
                if (s->idle && !s->shut && now - s->idle_since >= safe * TG_NS_PER_MS) {
                        shutdown(s->fd, SHUT_RDWR);
                        s->shut = true;
                        s->idle = false;
                        t->pool_evicted++;
                }
        }
}
