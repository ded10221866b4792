/*
 * lead_estimator — how far ahead of its slot a call is handed to the
 * transport: the time its connection takes, learned from recent calls. The
 * transport's pre-request hook holds an early request until its slot, so a
 * lead too long costs a little loop time, never spacing; one too short makes
 * that start a little late.
 *
 * The lead is the longest of the last LEAD_SAMPLES connects (LEAD_INITIAL
 * before any) plus LEAD_MARGIN, at most LEAD_MAX (LEAD_MAX_SHARES when the
 * account is split into shares) and half the spacing between starts. Pure:
 * the caller measures the connects and passes the spacing.
 *
 * The struct lives in its owner (the exit); its members are touched only
 * through the functions below.
 */
#ifndef TG_LEAD_ESTIMATOR_H
#define TG_LEAD_ESTIMATOR_H

#include <stdbool.h>

#include "core/tg_time.h"

#define LEAD_SAMPLES 16
#define LEAD_MARGIN  (100 * TG_NS_PER_US)
#define LEAD_INITIAL (1 * TG_NS_PER_MS)
#define LEAD_MAX     (5 * TG_NS_PER_MS)
/* Shares: a request ready after its window sends nothing (it would come too
 * close to another share's), so the lead follows slower connects further:
 * a longer hold in the hook costs loop time, a window missed costs a start. */
#define LEAD_MAX_SHARES (50 * TG_NS_PER_MS)

struct lead_estimator {
        tg_mono_ns connects[LEAD_SAMPLES]; /* recent hand-off to connection-ready times */
        unsigned n, next;
};

/* No connect seen yet. */
void lead_estimator_init(struct lead_estimator *e);

/* A call's connection was ready `connect` (>= 0) after its hand-off; the
 * oldest of LEAD_SAMPLES is forgotten. */
void lead_estimator_add(struct lead_estimator *e, tg_mono_ns connect);

/* The lead for the next hand-off, for starts `interval` apart (>= 1), with
 * or without shares. */
tg_mono_ns lead_estimator_lead(const struct lead_estimator *e, tg_mono_ns interval, bool shares);

#endif
