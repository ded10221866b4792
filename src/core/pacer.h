/*
 * pacer — the exit's two gates, as pure logic. A call may start only when
 * BOTH hold: the next start slot has come, and fewer than max_in_flight calls
 * are open. The next slot is the ACTUAL start of the previous call plus the
 * interval (ceil(1e9 / rate) ns, so two starts are never closer than 1/rate):
 * idle time earns no credit, missed slots are never made up, and no permit is
 * ever handed out ahead of the start itself — pacer_start() is called at the
 * moment the request is handed to the transport.
 *
 * Provider-wide holds (429/503 with Retry-After, a run of timeouts): no start
 * before the hold ends; then exactly one probe, and nothing more starts until
 * the probe's result is reported; a healthy probe resumes the configured rate,
 * counted from the probe's start. The rate is a ceiling, never exceeded to
 * catch up.
 *
 * A start is the moment the request goes on the wire, which the caller
 * learns a moment after it hands the request over (the connection is made
 * first): pacer_start_pending() plans a start at a time, the transport holds
 * the request until then, and pacer_sent() reports when it really went out
 * (at or after the plan); until it is known, nothing else starts. A call that
 * never got sent (pacer_unsent()) counts from its plan.
 *
 * Time is a parameter (monotonic ns); the pacer never reads a clock.
 */
#ifndef TG_PACER_H
#define TG_PACER_H

#include <stdbool.h>

#include "core/tg_time.h"

struct pacer;

struct pacer_config {
        double starts_per_second; /* > 0 and <= 1e9 */
        unsigned max_in_flight;   /* >= 1 */
        /* Added to every spacing: what the path to the provider may take off
         * a gap (network and the provider's own timing differ from request
         * to request), so that the provider, measuring arrivals, still sees
         * at least 1/rate. 0..1 s. */
        tg_mono_ns spacing_margin_ns;
};

/* Creates a pacer with no start recorded yet (the first start may happen at
 * once). Returns 0, TG_EINVAL for a bad config, TG_ENOMEM. The caller owns
 * *ret_pacer and frees it with pacer_free(). */
int pacer_new(const struct pacer_config *config, struct pacer **ret_pacer);
/* Accepts NULL. */
void pacer_free(struct pacer *pacer);

/* True when the pacer's fields keep its invariants (pacer.c lists them).
 * For assert() only: assert(pacer_sane(p)); every change ends with one. */
bool pacer_sane(const struct pacer *pacer);

/* The spacing between starts, in ns (>= 1). */
tg_mono_ns pacer_interval(const struct pacer *pacer);

/* Earliest time at which the next start may happen by spacing and holds
 * (not counting in-flight room). INT64_MIN if nothing limits it, i.e. no start
 * yet and no hold. TG_MONO_NEVER while a probe is out or a planned start's
 * wire time is not known. */
tg_mono_ns pacer_next_slot(const struct pacer *pacer);

/* Calls open now (started and not finished). */
unsigned pacer_in_flight(const struct pacer *pacer);

/* True when a start at `now` is allowed: now >= pacer_next_slot() and
 * in-flight < max_in_flight. */
bool pacer_may_start(const struct pacer *pacer, tg_mono_ns now);

/* Records an actual start at `now`. Returns 0, or TG_EAGAIN (and records
 * nothing) when pacer_may_start(now) is false. `now` must not go backwards.
 * *ret_probe (may be NULL) is set to true when this start is the probe that
 * ends a hold; report its result with pacer_probe_done(). */
int pacer_start(struct pacer *pacer, tg_mono_ns now, bool *ret_probe);

/* Plans a start whose request goes on the wire at `at`, not earlier (the
 * transport holds it until then): counted in flight now, and no other start
 * is allowed until pacer_sent() or pacer_unsent() says what happened. 0 or
 * TG_EAGAIN, as pacer_start(). */
int pacer_start_pending(struct pacer *pacer, tg_mono_ns at, bool *ret_probe);

/* The planned start went on the wire at `sent` (>= its plan): the next slot
 * counts from it. */
void pacer_sent(struct pacer *pacer, tg_mono_ns sent);

/* The planned start never went on the wire: the next slot counts from the
 * plan. */
void pacer_unsent(struct pacer *pacer);

/* True while a planned start's wire time is not known. */
bool pacer_pending(const struct pacer *pacer);

/* A started call has finished (any outcome). */
void pacer_finish(struct pacer *pacer);

/* A new rate from the next slot on (the margin stays): the next slot is the
 * last real start plus the new interval, so a raised rate never catches up
 * the slots the lower one skipped. 0, or TG_EINVAL (a rate out of (0, 1e9],
 * or a grid set: shares keep the account's rate). */
int pacer_set_rate(struct pacer *pacer, double starts_per_second);

/* Several dispatchers share one account (shares): each may start only
 * inside its own windows of a grid common to all of them. The windows of
 * this share open `period` apart, at `phase` modulo the period; inside one
 * a start may go from its opening until `open` after it, and two starts are
 * `spacing` apart at least (the account's, counted from the actual start as
 * ever), so a window holds a run of starts at the account's rate. The
 * other shares' windows lie between this share's, far enough apart that
 * together they never start two calls closer than the account's spacing
 * (pacer_grid_plan below says how far). A start that cannot go by its
 * window's end waits for the next window. period <= 0 removes the grid (and
 * the spacing is the pacer's own again). */
void pacer_set_grid(struct pacer *pacer, tg_mono_ns period, tg_mono_ns phase, tg_mono_ns open,
                    tg_mono_ns spacing);

/* Shares: the plan of the grid's windows for dispatchers that share one
 * account. A window holds `points` starts at the account's `spacing`, its
 * last up to a late budget after its point, so it takes starts for `open`
 * = (points - 1) spacing + late after it opens; the next share's window
 * opens `window` = points spacing + late + skew after this one, so that its
 * first start, on a clock up to `skew` apart, comes `spacing` after this
 * window's last at least. The gap (late + skew) is paid once a window, not
 * once a start: a window holds as many points as keep it within a
 * hundredth of the window, at most `cap` (the share's in-flight cap: a run
 * of starts at the account's rate must not wait for room in flight). The
 * late budget is a tenth of the spacing, at most 2 ms (it covers the
 * lateness of a window's first start, a wake-up after the other shares'
 * windows, and what the starts after it add). Share k of N opens
 * its windows at k * window, N * window apart (pacer_set_grid's period). */
struct pacer_grid_plan {
        tg_mono_ns spacing, late, window, open;
        unsigned points;
};

/* 0, or TG_EINVAL (spacing < 1, skew < 0 or over a second, cap 0). */
int pacer_grid_plan(tg_mono_ns spacing, tg_mono_ns skew, unsigned cap,
                    struct pacer_grid_plan *ret_plan);

/* Shares, a change of the account's rate while it runs (docs/design.md, "A
 * rate change with shares"): each share stops starting on the old grid the
 * moment it learns of the change (at most `lead` after the change's instant
 * `changed`, on any share's clock, skew included), takes the new grid
 * (pacer_set_grid with the new plan) and starts nothing before the instant
 * this returns: changed + lead + the new spacing + skew, the same for every
 * share (a wall time: the caller turns it into its monotonic one). So the
 * last start on the old grid and the first on the new one, whichever
 * shares make them, are at least the new spacing apart; a raised rate earns
 * nothing for the time it was lower. INT64_MAX for a negative lead or skew
 * or a spacing < 1 (never). Saturates. */
int64_t pacer_switch_resume(int64_t changed, tg_mono_ns lead, tg_mono_ns spacing, tg_mono_ns skew);

/* No start before `from` (the value of pacer_switch_resume above, as a
 * monotonic time; INT64_MIN lifts it); replaces the one set before. Unlike
 * a hold, no probe follows it. */
void pacer_grid_from(struct pacer *pacer, tg_mono_ns from);

/* The first opening of this share's windows at or after t (t itself
 * without a grid; TG_MONO_NEVER stays so). */
tg_mono_ns pacer_align(const struct pacer *pacer, tg_mono_ns t);

/* When the next start may go out, seen at `now`: its slot if that is ahead,
 * else now (with a grid: now if inside a window of this share, else the
 * next opening). TG_MONO_NEVER while none may. */
tg_mono_ns pacer_start_at(const struct pacer *pacer, tg_mono_ns now);

/* With a grid: the last moment a start meant for `at` (a value of
 * pacer_start_at()) may still go on the wire, the end of the window it lies
 * in; past it the start would come too close to another share's window and
 * must not go at all. 0 without a grid (any time will do: the next slot
 * counts from the real start). */
tg_mono_ns pacer_window_end(const struct pacer *pacer, tg_mono_ns at);

/* Holds every start until `until` (a later hold extends, an earlier one is
 * ignored); the first start after it is a probe. */
void pacer_hold(struct pacer *pacer, tg_mono_ns until);

/* The probe's result. healthy=true resumes the configured rate; false leaves
 * the pacer in probe mode (one probe at a time, still spaced by the interval)
 * until a healthy probe; the caller may also call pacer_hold() again. */
void pacer_probe_done(struct pacer *pacer, bool healthy);

/* True while a hold or its probe phase is in force. */
bool pacer_held(const struct pacer *pacer, tg_mono_ns now);

/* The end of the hold in force (INT64_MIN when not held). */
tg_mono_ns pacer_hold_until(const struct pacer *pacer);

#endif
