/*
 * plants — the planted bugs, every switch in one place (docs/reliability.md,
 * "Deterministic simulation"). Each is compiled in only by a test build of
 * tollgate-sim with its TG_PLANT_* flag (tests/CMakeLists.txt, sim.plants),
 * to show that the simulator catches the bug within its seeds; a shipped
 * build has none: every constant is 0 and its branches fold away.
 *
 *   TG_PLANT_REPOST_UNKNOWN   (core/policy.c, policy_next_kind): an
 *       operation whose outcome is unknown is re-POSTed instead of queried.
 *       Caught as "reconcile" or "attempts".
 *   TG_PLANT_HANDOFF_SPACING  (daemon/exit_settle.c, sent_known): the next
 *       slot counts from the hand-off to the transport, not from the wire.
 *       Caught as "spacing".
 *   TG_PLANT_RETRY_SKIPS_PACER (daemon/exit.c, try_start; exit_settle.c):
 *       a retry claimed ahead goes at once, past the pacer, which never
 *       counts it. Caught as "spacing" or "in_flight".
 *
 * The sanity checkers (exit_sane(), pacer_sane()) know the last one: an
 * unpaced call is in the exit's count and not in the pacer's.
 */
#ifndef TG_PLANTS_H
#define TG_PLANTS_H

#ifdef TG_PLANT_REPOST_UNKNOWN
#define PLANT_REPOST_UNKNOWN 1
#else
#define PLANT_REPOST_UNKNOWN 0
#endif

#ifdef TG_PLANT_HANDOFF_SPACING
#define PLANT_HANDOFF_SPACING 1
#else
#define PLANT_HANDOFF_SPACING 0
#endif

#ifdef TG_PLANT_RETRY_SKIPS_PACER
#define PLANT_RETRY_SKIPS_PACER 1
#else
#define PLANT_RETRY_SKIPS_PACER 0
#endif

#endif
