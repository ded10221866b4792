/*
 * wake — see wake.h. An eventfd in non-blocking mode: a ring adds 1, a drain
 * reads the count back to 0.
 */
#define _GNU_SOURCE /* eventfd */

#include "platform/wake.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct wake {
        int fd;
};

int wake_new(struct wake **ret_wake)
{
        struct wake *w = malloc(sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->fd < 0) {
                int e = errno;
                free(w);
                return -e;
        }
        *ret_wake = w;
        return 0;
}

void wake_free(struct wake *w)
{
        if (!w)
                return;
        close(w->fd);
        free(w);
}

void wake_ring(struct wake *w)
{
        uint64_t one = 1;
        ssize_t n;

        if (!w)
                return;
        /* EAGAIN: the counter is full, which rings as well */
        n = write(w->fd, &one, sizeof(one));
        (void)n;
}

int wake_fd(const struct wake *w)
{
        return w ? w->fd : -1;
}

bool wake_drain(struct wake *w)
{
        uint64_t count = 0;

        if (!w)
                return false;
        return read(w->fd, &count, sizeof(count)) == (ssize_t)sizeof(count) && count > 0;
}
