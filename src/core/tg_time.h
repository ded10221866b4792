/*
 * tollgate's two time types. Monotonic time (tg_mono_ns) orders events inside
 * one process: slots, spacing, call timeouts. Wall time (tg_wall_ms) is what
 * survives a restart: acceptance, next_run_at, deadlines, key age. The two are
 * never mixed; pure code takes "now" as a parameter and never reads a clock.
 */
#ifndef TG_TIME_H
#define TG_TIME_H

#include <stdint.h>

typedef int64_t tg_mono_ns; /* CLOCK_MONOTONIC, nanoseconds */
typedef int64_t tg_wall_ms; /* Unix epoch, milliseconds */

#define TG_NS_PER_US 1000LL
#define TG_NS_PER_MS 1000000LL
#define TG_NS_PER_S  1000000000LL
#define TG_MS_PER_S  1000LL

/* A time that never comes. */
#define TG_MONO_NEVER INT64_MAX
#define TG_WALL_NEVER INT64_MAX

#endif
