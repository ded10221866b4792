/*
 * clock — the only reads of the system clocks outside src/stub. Pure code
 * never calls these; the dispatcher loop reads the clock once per turn and
 * passes "now" down.
 */
#ifndef TG_CLOCK_H
#define TG_CLOCK_H

#include "core/tg_time.h"

tg_mono_ns clock_mono_now(void); /* CLOCK_MONOTONIC */
tg_wall_ms clock_wall_now(void); /* CLOCK_REALTIME */

#endif
