/*
 * The relay: the caller's bytes read with the kernel's arrival stamps and
 * passed to libmicrohttpd over a socket pair, its answers passed back. See
 * relay.h.
 *
 * One thread, one epoll set, one mutex. The thread holds the mutex while it
 * moves bytes, and the server's threads take it to read a stamp or reset a
 * connection, so a connection is never closed under either. A connection is
 * found by its server end's descriptor (libmicrohttpd knows only that one);
 * a descriptor the server closed may come back for a new connection before
 * the thread saw the old one end, so the table holds the newest connection
 * of a descriptor and an old one leaves only its own entry.
 */
#include "relay.h"

#include "core/tg_error.h"
#include "platform/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK       16384
#define PENDING_MAX (1024 * 1024) /* more than this waiting: stop reading that side */

struct pending {
        char *data;
        size_t len, cap;
};

struct conn;

/* One side of a connection, as the epoll set knows it (the two are told
 * apart by address: &c->client_end, &c->pair_end). */
struct end {
        struct conn *c;
};

struct conn {
        int client;    /* the caller's TCP socket */
        int pair;      /* our end of the pair */
        int server_fd; /* libmicrohttpd's end: the key */
        struct end client_end, pair_end;
        struct pending to_server, to_client;
        bool client_eof, server_eof, reset;
        bool request_open;  /* bytes came since the last answer bytes went out */
        bool stamped;       /* arrival is set: the kernel's stamp, else the relay's read */
        tg_mono_ns arrival; /* of the request being read */
        tg_mono_ns last_io; /* the last bytes moved either way */
        uint32_t client_ev, pair_ev;
        bool client_in, pair_in; /* in the epoll set */
};

struct relay {
        int ep, wake;
        /* A socket that asks for receive stamps for the relay's life: the
         * kernel stamps packets only while some socket asks, and turns that
         * on and off with a delay, so with only the callers' short
         * connections asking a request could come before it was on again. */
        int stamps;
        pthread_t thread;
        pthread_mutex_t mu;
        bool stop;
        tg_mono_ns idle_close; /* 0: keep-alive connections are never closed for idleness */
        struct end wake_end;
        struct conn **by_fd; /* server_fd -> its newest connection */
        size_t nfd;
};

static int nonblocking(int fd)
{
        int flags = fcntl(fd, F_GETFL, 0);

        return flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ? -errno : 0;
}

static int pending_add(struct pending *p, const char *data, size_t n)
{
        if (p->len + n > p->cap) {
                size_t cap = p->cap ? p->cap : CHUNK;
                while (cap < p->len + n)
                        cap *= 2;
                char *d = realloc(p->data, cap);
                if (!d)
                        return TG_ENOMEM;
                p->data = d;
                p->cap = cap;
        }
        memcpy(p->data + p->len, data, n);
        p->len += n;
        return 0;
}

/* Sends what it can of p on fd (a socket; no SIGPIPE when its peer has
 * gone); false when fd failed for good. */
static bool pending_flush(struct pending *p, int fd)
{
        while (p->len > 0) {
                ssize_t n = send(fd, p->data, p->len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno == EAGAIN || errno == EWOULDBLOCK;
                memmove(p->data, p->data + n, p->len - (size_t)n);
                p->len -= (size_t)n;
        }
        return true;
}

/* The kernel's CLOCK_REALTIME stamp as a monotonic time (the two clocks read
 * now, as close together as one call after the other). */
static tg_mono_ns stamp_to_mono(const struct timespec *ts)
{
        int64_t wall = clock_wall_ns();
        tg_mono_ns mono = clock_mono_now();
        int64_t at = (int64_t)ts->tv_sec * TG_NS_PER_S + ts->tv_nsec;
        tg_mono_ns m = mono - (wall - at);

        return m > mono ? mono : m; /* never after now */
}

/* One side's events; a side with nothing more to read or write leaves the
 * set (a closed or reset socket would report HUP at every wait). */
static void watch(struct relay *r, int fd, struct end *e, uint32_t want, uint32_t *cur, bool *in)
{
        struct epoll_event ev = {.events = want, .data.ptr = e};

        if (want == 0) {
                if (*in)
                        epoll_ctl(r->ep, EPOLL_CTL_DEL, fd, NULL);
                *in = false;
        } else if (!*in) {
                *in = epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &ev) == 0;
        } else if (want != *cur) {
                epoll_ctl(r->ep, EPOLL_CTL_MOD, fd, &ev);
        }
        *cur = want;
}

static void set_events(struct relay *r, struct conn *c)
{
        uint32_t cev = 0, pev = 0;

        if (!c->client_eof && c->to_server.len < PENDING_MAX)
                cev |= EPOLLIN;
        if (c->to_client.len > 0)
                cev |= EPOLLOUT;
        if (!c->server_eof && c->to_client.len < PENDING_MAX)
                pev |= EPOLLIN;
        if (c->to_server.len > 0)
                pev |= EPOLLOUT;
        watch(r, c->client, &c->client_end, cev, &c->client_ev, &c->client_in);
        watch(r, c->pair, &c->pair_end, pev, &c->pair_ev, &c->pair_in);
}

static void conn_close(struct relay *r, struct conn *c)
{
        if (c->client_in)
                epoll_ctl(r->ep, EPOLL_CTL_DEL, c->client, NULL);
        if (c->pair_in)
                epoll_ctl(r->ep, EPOLL_CTL_DEL, c->pair, NULL);
        close(c->client);
        close(c->pair);
        if ((size_t)c->server_fd < r->nfd && r->by_fd[c->server_fd] == c)
                r->by_fd[c->server_fd] = NULL;
        free(c->to_server.data);
        free(c->to_client.data);
        free(c);
}

/* The caller's bytes: stamped, on to the server. */
static void from_client(struct conn *c)
{
        char buf[CHUNK];
        union {
                char space[CMSG_SPACE(sizeof(struct timespec))];
                struct cmsghdr align;
        } ctl;

        while (!c->client_eof && c->to_server.len < PENDING_MAX) {
                struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
                struct msghdr msg = {.msg_iov = &iov,
                                     .msg_iovlen = 1,
                                     .msg_control = ctl.space,
                                     .msg_controllen = sizeof(ctl.space)};
                ssize_t n = recvmsg(c->client, &msg, MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        break;
                if (n <= 0) { /* closed, or reset: the server sees an end */
                        c->client_eof = true;
                        break;
                }
                c->last_io = clock_mono_now();
                if (!c->request_open) {
                        /* the first bytes of a request: their kernel stamp
                         * (else this read's moment, still before the
                         * server's thread could see them) */
                        c->request_open = true;
                        c->stamped = true;
                        c->arrival = clock_mono_now();
                        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm;
                             cm = CMSG_NXTHDR(&msg, cm)) {
                                if (cm->cmsg_level == SOL_SOCKET &&
                                    cm->cmsg_type == SCM_TIMESTAMPNS) {
                                        struct timespec ts;
                                        memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
                                        if (ts.tv_sec > 0)
                                                c->arrival = stamp_to_mono(&ts);
                                }
                        }
                }
                if (pending_add(&c->to_server, buf, (size_t)n) < 0)
                        c->client_eof = true;
        }
        if (!pending_flush(&c->to_server, c->pair))
                c->server_eof = true;
        if (c->client_eof && c->to_server.len == 0)
                shutdown(c->pair, SHUT_WR);
}

/* The server's answer: back to the caller. */
static void from_server(struct conn *c)
{
        char buf[CHUNK];

        while (!c->server_eof && c->to_client.len < PENDING_MAX) {
                ssize_t n = read(c->pair, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        break;
                if (n <= 0) {
                        c->server_eof = true;
                        break;
                }
                /* answer bytes: what the caller sends next is a new request */
                c->request_open = false;
                c->last_io = clock_mono_now();
                if (!c->reset && pending_add(&c->to_client, buf, (size_t)n) < 0)
                        c->server_eof = true;
        }
        if (!c->reset && !pending_flush(&c->to_client, c->client)) {
                c->to_client.len = 0;
                c->client_eof = true;
                c->server_eof = true;
        }
}

/* Moves what can be moved; true when the connection is over. */
static bool pump(struct conn *c)
{
        from_client(c);
        from_server(c);
        return c->server_eof && c->to_client.len == 0;
}

/* A kept-alive connection between requests: no request being read, nothing
 * on its way either way, both sides open. */
static bool conn_idle(const struct conn *c)
{
        return !c->request_open && c->to_server.len == 0 && c->to_client.len == 0 &&
               !c->client_eof && !c->server_eof;
}

/* As a server with a keep-alive timeout does: closes every connection idle
 * for idle_close (a FIN to the caller; a request already on its way then
 * meets a reset, which is the race a caller reusing connections must
 * avoid). Returns the wait until the next one is due, in ms, or -1 (none);
 * with the mutex held. */
static int close_idle(struct relay *r)
{
        if (r->idle_close <= 0)
                return -1;
        tg_mono_ns now = clock_mono_now(), next = 0;
        for (size_t i = 0; i < r->nfd; i++) {
                struct conn *c = r->by_fd[i];
                if (!c || !conn_idle(c))
                        continue;
                tg_mono_ns due = c->last_io + r->idle_close;
                if (due <= now) {
                        c->client_end.c = c->pair_end.c = NULL;
                        conn_close(r, c);
                } else if (!next || due < next) {
                        next = due;
                }
        }
        return next ? (int)((next - now + TG_NS_PER_MS - 1) / TG_NS_PER_MS) : -1;
}

static void *run(void *arg)
{
        struct relay *r = arg;
        struct epoll_event evs[64];
        int timeout_ms = -1;

        for (;;) {
                int n = epoll_wait(r->ep, evs, 64, timeout_ms);
                if (n < 0 && errno != EINTR)
                        break;
                pthread_mutex_lock(&r->mu);
                if (r->stop) {
                        pthread_mutex_unlock(&r->mu);
                        break;
                }
                for (int i = 0; i < n; i++) {
                        struct end *e = evs[i].data.ptr;
                        if (e == &r->wake_end) {
                                uint64_t v;
                                if (read(r->wake, &v, sizeof(v)) < 0)
                                        continue;
                                continue;
                        }
                        /* an end closed earlier in this batch left its slot */
                        if (!e->c)
                                continue;
                        struct conn *c = e->c;
                        if (pump(c)) {
                                c->client_end.c = c->pair_end.c = NULL;
                                /* later events of this batch for it: skip */
                                for (int k = i + 1; k < n; k++) {
                                        struct end *o = evs[k].data.ptr;
                                        if (o == &c->client_end || o == &c->pair_end)
                                                evs[k].data.ptr = &r->wake_end;
                                }
                                conn_close(r, c);
                        } else {
                                set_events(r, c);
                        }
                }
                timeout_ms = close_idle(r);
                pthread_mutex_unlock(&r->mu);
        }
        return NULL;
}

int relay_new(int64_t idle_close_ms, struct relay **ret_relay)
{
        struct relay *r = calloc(1, sizeof(*r));
        int rc;

        if (!r)
                return TG_ENOMEM;
        r->idle_close = idle_close_ms > 0 ? idle_close_ms * TG_NS_PER_MS : 0;
        r->ep = r->wake = r->stamps = -1;
        pthread_mutex_init(&r->mu, NULL);
        r->ep = epoll_create1(EPOLL_CLOEXEC);
        r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        r->stamps = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (r->ep < 0 || r->wake < 0 || r->stamps < 0 ||
            setsockopt(r->stamps, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) < 0) {
                rc = -errno;
                goto fail;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &r->wake_end};
        if (epoll_ctl(r->ep, EPOLL_CTL_ADD, r->wake, &ev) < 0) {
                rc = -errno;
                goto fail;
        }
        rc = pthread_create(&r->thread, NULL, run, r);
        if (rc != 0) {
                rc = -rc;
                goto fail;
        }
        *ret_relay = r;
        return 0;
fail:
        if (r->ep >= 0)
                close(r->ep);
        if (r->wake >= 0)
                close(r->wake);
        if (r->stamps >= 0)
                close(r->stamps);
        pthread_mutex_destroy(&r->mu);
        free(r);
        return rc;
}

void relay_free(struct relay *r)
{
        uint64_t one = 1;

        if (!r)
                return;
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_mutex_unlock(&r->mu);
        if (write(r->wake, &one, sizeof(one)) < 0)
                return; /* cannot happen: an eventfd takes a write */
        pthread_join(r->thread, NULL);
        for (size_t i = 0; i < r->nfd; i++)
                if (r->by_fd[i])
                        conn_close(r, r->by_fd[i]);
        free(r->by_fd);
        close(r->ep);
        close(r->wake);
        close(r->stamps);
        pthread_mutex_destroy(&r->mu);
        free(r);
}

/* Room in the table for descriptor fd; with the mutex held. 0 or TG_ENOMEM. */
static int table_fit(struct relay *r, int fd)
{
        if ((size_t)fd < r->nfd)
                return 0;
        size_t n = (size_t)fd + 64;
        struct conn **t = realloc(r->by_fd, n * sizeof(*t));
        if (!t)
                return TG_ENOMEM;
        memset(t + r->nfd, 0, (n - r->nfd) * sizeof(*t));
        r->by_fd = t;
        r->nfd = n;
        return 0;
}

int relay_add(struct relay *r, int client, int *ret_server_fd)
{
        int sv[2] = {-1, -1}, one = 1, rc = 0;
        struct conn *c = calloc(1, sizeof(*c));

        if (!c)
                rc = TG_ENOMEM;
        else if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                rc = -errno;
        /* stamps from the kernel on every read of the caller's bytes */
        else if (setsockopt(client, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) < 0)
                rc = -errno;
        if (rc == 0)
                rc = nonblocking(client);
        if (rc == 0)
                rc = nonblocking(sv[1]);
        if (rc == 0)
                rc = nonblocking(sv[0]);
        if (rc < 0)
                goto fail;
        c->client = client;
        c->pair = sv[1];
        c->server_fd = sv[0];
        c->client_end = (struct end){.c = c};
        c->pair_end = (struct end){.c = c};
        c->client_ev = EPOLLIN;
        c->pair_ev = EPOLLIN;
        c->last_io = clock_mono_now();
        c->client_in = c->pair_in = true;
        struct epoll_event ce = {.events = EPOLLIN, .data.ptr = &c->client_end};
        struct epoll_event pe = {.events = EPOLLIN, .data.ptr = &c->pair_end};
        pthread_mutex_lock(&r->mu);
        rc = table_fit(r, sv[0]);
        if (rc == 0 && epoll_ctl(r->ep, EPOLL_CTL_ADD, client, &ce) < 0)
                rc = -errno;
        if (rc == 0 && epoll_ctl(r->ep, EPOLL_CTL_ADD, sv[1], &pe) < 0) {
                rc = -errno;
                epoll_ctl(r->ep, EPOLL_CTL_DEL, client, NULL);
        }
        if (rc == 0)
                r->by_fd[sv[0]] = c;
        pthread_mutex_unlock(&r->mu);
        if (rc < 0)
                goto fail;
        *ret_server_fd = sv[0];
        return 0;
fail:
        if (sv[0] >= 0) {
                close(sv[0]);
                close(sv[1]);
        }
        close(client);
        free(c);
        return rc;
}

int relay_arrival(struct relay *r, int server_fd, tg_mono_ns *ret_arrival)
{
        int rc = TG_ENOTFOUND;

        if (!r || server_fd < 0)
                return TG_ENOTFOUND;
        pthread_mutex_lock(&r->mu);
        struct conn *c = (size_t)server_fd < r->nfd ? r->by_fd[server_fd] : NULL;
        if (c && c->stamped) {
                *ret_arrival = c->arrival;
                rc = 0;
        }
        pthread_mutex_unlock(&r->mu);
        return rc;
}

int relay_reset(struct relay *r, int server_fd)
{
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        struct sockaddr unspec;

        if (!r || server_fd < 0)
                return TG_ENOTFOUND;
        pthread_mutex_lock(&r->mu);
        struct conn *c = (size_t)server_fd < r->nfd ? r->by_fd[server_fd] : NULL;
        if (!c) {
                pthread_mutex_unlock(&r->mu);
                return TG_ENOTFOUND;
        }
        /* the answer's bytes written before the reset go out first, as they
         * would have over the server's own socket */
        from_server(c);
        c->reset = true;
        c->to_client.len = 0;
        setsockopt(c->client, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        /* Linux: disconnecting a TCP socket sends the RST now */
        memset(&unspec, 0, sizeof(unspec));
        unspec.sa_family = AF_UNSPEC;
        connect(c->client, &unspec, sizeof(unspec));
        c->client_eof = true;
        set_events(r, c);
        pthread_mutex_unlock(&r->mu);
        return 0;
}
