/*
 * The accept thread: open or close the listening socket as the timeline
 * wants, accept whatever arrives, hand it on. Invariants: only the thread
 * touches the listening fd after start; the port never changes once bound;
 * a wake pipe interrupts the poll for pokes and shutdown.
 */
#include "listener.h"

#include "core/tg_error.h"
#include "platform/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BACKLOG 4096

struct listener {
        struct sockaddr_storage addr;
        socklen_t addrlen;
        uint16_t port;
        int fd; /* -1 while refusing */
        int wake[2];
        atomic_bool stop;
        atomic_bool open;
        bool joined;
        pthread_t thread;
        listener_want_fn want;
        listener_accept_fn accept_fn;
        void *cls;
};

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
        if (ss->ss_family == AF_INET)
                ((struct sockaddr_in *)ss)->sin_port = htons(port);
        else if (ss->ss_family == AF_INET6)
                ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static int open_socket(struct listener *l)
{
        int one = 1;
        int fd = socket(l->addr.ss_family, SOCK_STREAM, 0);
        int flags;
        if (fd < 0)
                return -errno;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        flags = fcntl(fd, F_GETFL, 0);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
            fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
            bind(fd, (struct sockaddr *)&l->addr, l->addrlen) < 0 || listen(fd, BACKLOG) < 0) {
                int err = -errno;
                close(fd);
                return err;
        }
        return fd;
}

static void drain(int fd)
{
        char buf[64];
        while (read(fd, buf, sizeof(buf)) > 0)
                ;
}

static void accept_all(struct listener *l)
{
        for (;;) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);
                int fd = accept(l->fd, (struct sockaddr *)&ss, &len);
                if (fd < 0)
                        return; /* EAGAIN, or a transient error: poll again */
                fcntl(fd, F_SETFD, FD_CLOEXEC);
                l->accept_fn(l->cls, fd, (struct sockaddr *)&ss, len);
        }
}

static void *run(void *arg)
{
        struct listener *l = arg;
        while (!atomic_load(&l->stop)) {
                tg_mono_ns now, next = TG_MONO_NEVER;
                struct pollfd pfd[2];
                int timeout_ms, nfds = 1;
                bool want;

                now = clock_mono_now();
                want = l->want(l->cls, now, &next);
                if (want && l->fd < 0) {
                        int fd = open_socket(l);
                        if (fd >= 0)
                                l->fd = fd;
                        else if (next == TG_MONO_NEVER || next > now + 20 * TG_NS_PER_MS)
                                next = now + 20 * TG_NS_PER_MS; /* port busy: try again soon */
                } else if (!want && l->fd >= 0) {
                        close(l->fd);
                        l->fd = -1;
                }
                atomic_store(&l->open, l->fd >= 0);

                if (next == TG_MONO_NEVER || next - now > TG_NS_PER_S)
                        timeout_ms = 1000;
                else
                        timeout_ms = (int)((next - now + TG_NS_PER_MS - 1) / TG_NS_PER_MS);
                pfd[0] = (struct pollfd){.fd = l->wake[0], .events = POLLIN};
                if (l->fd >= 0) {
                        pfd[1] = (struct pollfd){.fd = l->fd, .events = POLLIN};
                        nfds = 2;
                }
                if (poll(pfd, (nfds_t)nfds, timeout_ms) <= 0)
                        continue;
                if (pfd[0].revents)
                        drain(l->wake[0]);
                if (nfds == 2 && (pfd[1].revents & POLLIN))
                        accept_all(l);
        }
        return NULL;
}

static int make_pipe(int p[2])
{
        if (pipe(p) < 0)
                return -errno;
        for (int i = 0; i < 2; i++) {
                fcntl(p[i], F_SETFL, fcntl(p[i], F_GETFL, 0) | O_NONBLOCK);
                fcntl(p[i], F_SETFD, FD_CLOEXEC);
        }
        return 0;
}

int listener_start(const char *host, uint16_t port, listener_want_fn want,
                   listener_accept_fn accept_fn, void *cls, struct listener **ret_listener)
{
        struct addrinfo hints = {0}, *res = NULL;
        struct listener *l;
        int rc, fd;

        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
        if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
                return TG_EINVAL;
        l = calloc(1, sizeof(*l));
        if (!l) {
                freeaddrinfo(res);
                return TG_ENOMEM;
        }
        memcpy(&l->addr, res->ai_addr, res->ai_addrlen);
        l->addrlen = res->ai_addrlen;
        freeaddrinfo(res);
        l->fd = -1;
        l->wake[0] = l->wake[1] = -1;
        l->want = want;
        l->accept_fn = accept_fn;
        l->cls = cls;
        set_port(&l->addr, port);

        fd = open_socket(l);
        if (fd < 0) {
                rc = fd;
                goto fail;
        }
        l->addrlen = sizeof(l->addr);
        if (getsockname(fd, (struct sockaddr *)&l->addr, &l->addrlen) < 0) {
                rc = -errno;
                close(fd);
                goto fail;
        }
        l->port =
            ntohs(l->addr.ss_family == AF_INET ? ((struct sockaddr_in *)&l->addr)->sin_port
                                               : ((struct sockaddr_in6 *)&l->addr)->sin6_port);
        l->fd = fd;
        atomic_store(&l->open, true);
        rc = make_pipe(l->wake);
        if (rc < 0)
                goto fail;
        if (pthread_create(&l->thread, NULL, run, l) != 0) {
                rc = TG_ENOMEM;
                goto fail;
        }
        *ret_listener = l;
        return 0;
fail:
        if (l->fd >= 0)
                close(l->fd);
        if (l->wake[0] >= 0)
                close(l->wake[0]);
        if (l->wake[1] >= 0)
                close(l->wake[1]);
        free(l);
        return rc;
}

uint16_t listener_port(const struct listener *l)
{
        return l->port;
}

void listener_poke(struct listener *l)
{
        char c = 1;
        if (l && write(l->wake[1], &c, 1) < 0) {
                /* A full pipe already holds a wake-up. */
        }
}

bool listener_is_open(struct listener *l)
{
        return atomic_load(&l->open);
}

void listener_stop(struct listener *l)
{
        if (l->joined)
                return;
        atomic_store(&l->stop, true);
        listener_poke(l);
        pthread_join(l->thread, NULL);
        l->joined = true;
        if (l->fd >= 0)
                close(l->fd);
        l->fd = -1;
        atomic_store(&l->open, false);
}

void listener_free(struct listener *l)
{
        if (!l)
                return;
        listener_stop(l);
        close(l->wake[0]);
        close(l->wake[1]);
        free(l);
}
