/*
 * The arrival of a request as the kernel saw it. libmicrohttpd reads the
 * sockets itself, and the moment its handler runs is the moment this
 * process was scheduled: on a busy or virtual machine milliseconds after the
 * bytes came, by an amount that differs from request to request. A limiter
 * judging gaps between arrivals in whole milliseconds, and `tollgate
 * verify`'s receive spacing, would then measure the stand-in's own
 * scheduling. So each accepted connection goes through a relay: one thread
 * reads the caller's socket with the kernel's receive timestamps
 * (SO_TIMESTAMPNS) and passes the bytes on to libmicrohttpd over a socket
 * pair; the arrival of a request is the kernel's receive stamp of its
 * first bytes (the first bytes after the last answer went out: HTTP/1.1
 * callers do not pipeline). On loopback TCP stamps a segment when it
 * processes it, in the sender's system call or, on a busy machine, a little
 * later: a stamp a thread's scheduling does not move. Answers go back the same way; a close or a reset of either side
 * is passed on.
 */
#ifndef STUB_RELAY_H
#define STUB_RELAY_H

#include "core/tg_time.h"

#include <stdint.h>

struct relay;

/* Starts the relay's thread. idle_close_ms > 0: a kept-alive connection
 * that has moved no bytes for that long between requests is closed, as a
 * server's keep-alive timeout does. 0, -errno or TG_ENOMEM. */
int relay_new(int64_t idle_close_ms, struct relay **ret_relay);
/* Stops it and closes every connection it still holds. Accepts NULL. */
void relay_free(struct relay *relay);

/* Takes over `client`, an accepted TCP connection, and gives back in
 * *ret_server_fd the socket libmicrohttpd is to serve instead (its end of
 * the pair; whoever takes it closes it). 0 or -errno (client is closed). */
int relay_add(struct relay *relay, int client, int *ret_server_fd);

/* The kernel's arrival stamp (monotonic) of the request now being read on
 * the connection whose server end is server_fd. 0, or TG_ENOTFOUND (not a
 * relayed connection, or no stamp came with the bytes). */
int relay_arrival(struct relay *relay, int server_fd, tg_mono_ns *ret_arrival);

/* Resets the caller's connection (RST, no FIN) once the answer bytes the
 * server wrote before have gone out. TG_ENOTFOUND when server_fd is not
 * relayed. */
int relay_reset(struct relay *relay, int server_fd);

#endif
