/*
 * receiver — `tollgate-stub receive`: a receiver of tollgate's event
 * deliveries for tests and for people trying [notify] out. It checks each
 * delivery's Tollgate-Signature (platform/event_sig.h) before reading the
 * body, writes one JSON line per delivery (the event's id, operation and
 * state, whether the signature held, whether the id was seen before), and
 * answers 200, or what its fault mode says: slow (answer late), an HTTP
 * status (500, ...), or drop (close the connection with no answer).
 */
#ifndef TG_STUB_RECEIVER_H
#define TG_STUB_RECEIVER_H

/* argv[0] is "receive". The process's exit status. */
int receiver_main(int argc, char **argv);

#endif
