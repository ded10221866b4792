/*
 * wake — a doorbell between threads: one thread rings it (the API, having
 * committed a new refund), another waits on its descriptor among others (the
 * dispatcher, in its transport poll) and drains it. An eventfd (a pipe where
 * there is none); ringing never blocks and rings ring once.
 */
#ifndef TG_WAKE_H
#define TG_WAKE_H

#include <stdbool.h>

struct wake;

/* 0, or a negative code. Free with wake_free() (accepts NULL). */
int wake_new(struct wake **ret_wake);
void wake_free(struct wake *wake);

/* Rings: the next wait on wake_fd() returns. Safe from any thread, never
 * blocks. Accepts NULL. */
void wake_ring(struct wake *wake);

/* The descriptor to wait on for reading; -1 for NULL. */
int wake_fd(const struct wake *wake);

/* Takes every ring so far; true when there was one. */
bool wake_drain(struct wake *wake);

#endif
