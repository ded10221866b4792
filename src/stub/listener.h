/*
 * The stub's listening socket, owned by one accept thread rather than by
 * libmicrohttpd, so that "refuse" can really close it (a connect then gets
 * ECONNREFUSED) and reopen it on the same port later while connections
 * already accepted carry on. Accepted sockets are handed to a callback.
 */
#ifndef STUB_LISTENER_H
#define STUB_LISTENER_H

#include "core/tg_time.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct listener;

/*
 * Whether the socket should be open at now; *ret_next_check is when the
 * answer may change next (TG_MONO_NEVER if only a poke can change it).
 */
typedef bool (*listener_want_fn)(void *cls, tg_mono_ns now, tg_mono_ns *ret_next_check);
/* Takes ownership of fd, an accepted connection. */
typedef void (*listener_accept_fn)(void *cls, int fd, const struct sockaddr *addr,
                                   socklen_t addrlen);

/*
 * Binds host:port (numeric host; port 0 picks a free one, kept for every
 * reopen) and starts the accept thread. Returns 0, -errno, or TG_EINVAL for
 * a bad address.
 */
int listener_start(const char *host, uint16_t port, listener_want_fn want,
                   listener_accept_fn accept_fn, void *cls, struct listener **ret_listener);
/* The port actually bound. */
uint16_t listener_port(const struct listener *l);
/* Makes the thread ask want() again now (after a mode change). */
void listener_poke(struct listener *l);
/* Whether the socket is open right now. */
bool listener_is_open(struct listener *l);
/* Stops the thread and closes the socket for good; the struct stays readable. */
void listener_stop(struct listener *l);
/* Stops (if not yet) and frees. Accepts NULL. */
void listener_free(struct listener *l);

#endif
