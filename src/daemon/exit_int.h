/*
 * exit_int — the exit's value, shared by the files that make it up and by
 * no one else: exit.c (the value's life, its starts, its second, its
 * sanity), exit_queue.c (the claims made ahead, the ready queue) and
 * exit_settle.c (a call's end: the pacers, the account's holds, the outcome
 * through the store thread and its retries). The loop (dispatcher.c) sees
 * only exit.h.
 *
 * Invariants (exit_sane() checks them at every turn of the loop):
 *   - the open calls (used slots) are the exit's calls open at the
 *     transport; the pacer counts each of them in flight but the unpaced
 *     one of a planted bug (core/plants.h); so does each sub-quota's
 *     pacer for the calls of its kind among them (exit_level_of);
 *   - nready <= READY_MAX, each ready claim an operation in flight in the
 *     store and not yet handed to the transport;
 *   - n_unsettled <= UNSETTLED_MAX, n_unreleased <= READY_MAX;
 *   - every operation held (open or ready) is op_sane().
 */
#ifndef TG_EXIT_INT_H
#define TG_EXIT_INT_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/adaptive.h"
#include "core/classify.h"
#include "core/holds.h"
#include "core/lead_estimator.h"
#include "core/list_walk.h"
#include "core/pacer.h"
#include "core/plants.h"
#include "core/rng.h"
#include "daemon/config.h"
#include "daemon/exit.h"
#include "daemon/exit_env.h"
#include "daemon/exit_stats.h"
#include "daemon/ownership.h"
#include "daemon/store_worker.h"
#include "store/store.h"

#define IDLE_RECHECK_NS (50 * TG_NS_PER_MS)   /* the first look for new work after none */
#define SWEEP_EVERY_NS  (1000 * TG_NS_PER_MS) /* deadline sweep and owner check */
#define SETTLE_RETRY_NS (200 * TG_NS_PER_MS)  /* a store that failed a settle is asked again */

/* Shares: two clock reads this close in time give the grid's offset. */
#define GRID_READ_CLOSE (20 * TG_NS_PER_US)

/* Claims are committed ahead of their slots (record before send does not
 * require recording at the slot): READY_MAX at most, one transaction for
 * the lot (group commit), as many as the claims' own commit time covers at
 * the rate. */
#define READY_MAX      32
#define CLAIM_EST_INIT (2 * TG_NS_PER_MS) /* a claim's commit, until measured */
/* With the store on its own thread a claim no longer stops the loop, and
 * the queue also covers the thread's other work and its tail (an outcome
 * or a slow fsync before the claim): this much more is claimed ahead. */
#define CLAIM_AHEAD_SLACK (4 * TG_NS_PER_MS)
#define STORE_AHEAD       4 /* outcomes an open call that may wait for the store thread */
/* When the queue runs under what it must cover, it is filled to this much
 * of the coming starts at least (at 1,000/s, 16 claims): one commit for
 * several claims at high rates, where a refill each time one claim was
 * used committed one or two a transaction. At 50/s and under it is one. */
#define CLAIM_BATCH_SPAN (16 * TG_NS_PER_MS)
/* outcomes the store may fail: those waiting for it, and the open calls' */
#define UNSETTLED_MAX(e) ((STORE_AHEAD + 2) * (e)->ncalls)

/* The kinds of call a sub-quota may hold (docs/design.md, "Sub-quotas"):
 * refund POSTs (first, retry, an operator's re-send) and status queries.
 * Every call belongs to the account and to exactly one of these. */
enum exit_level {
        EXIT_LEVEL_REFUND,
        EXIT_LEVEL_QUERY,
        EXIT_LEVELS,
};

/* A call claimed: on the ready queue (made ahead), then open at the
 * transport until it ends. */
struct open_call {
        bool used;
        uint64_t cookie;
        struct op_record op; /* as claimed */
        struct call_record call;
        enum classify_request request;
        bool probe;
        struct exit_handoff handoff;
        tg_mono_ns planned;          /* its slot: not on the wire before (not_before) */
        unsigned in_flight_at_start; /* open calls at the hand-off, itself included */
        tg_mono_ns ready_at;         /* the earliest it could have started (lateness) */
        bool sent_known;             /* its sent report came */
        tg_mono_ns sent;             /* on the wire (0: never) */
        bool unpaced;                /* PLANT_RETRY_SKIPS_PACER: the pacer never saw it */
        unsigned token_gen;          /* oauth2: the access token it carried (exit_token.c) */
        unsigned list_page;          /* a query: the page of a list it asks for (1: the first) */
};

/* provider.auth = oauth2: the exit's access token, as the exit sees it (the
 * token itself is the transport's): exit_token.c. */
struct exit_token {
        bool on;
        bool open; /* its call is out */
        bool sent_known;
        bool probe;
        bool refetched_for_401; /* the token in hand came after a 401 */
        uint64_t cookie;
        tg_mono_ns planned;      /* that call's slot */
        tg_mono_ns refresh_at;   /* a new one is fetched from then */
        tg_mono_ns usable_until; /* calls start before this only */
        tg_mono_ns hold_until;   /* after a failed fetch: none before */
        int64_t backoff_ms;
        unsigned gen;   /* tokens got (0: none yet) */
        unsigned calls; /* token calls started */
        char request_id[64];
};

/* A batch of claims on its way through the store thread (one at a time). */
struct claim_job {
        struct exit *e;
        struct claim_args args[READY_MAX];
        struct op_record ops[READY_MAX];
        struct call_record calls[READY_MAX];
        unsigned n, got;
        enum store_group turn;
        bool at_slot;   /* made for a slot with nothing ready (else: ahead) */
        tg_mono_ns now; /* when it was posted */
        tg_wall_ms wall;
};

/* The once-a-second store work, through the store threads, one of each at a
 * time: the owner check on the claims' connection (its lock session), the
 * sample, sweeps and the service's work on the outcomes'. */
struct owner_job {
        struct exit *e;
        tg_mono_ns asked; /* when the check began: the lock was ours then at least */
        /* the account's run-time controls (store_controls_get), read right
         * after the check: as of `asked` at least; applied by owner_done
         * on the loop's thread */
        struct account_controls controls;
        int controls_result;
        bool posted;
};

struct second_job {
        struct exit *e;
        /* the split's want count (a standby's wish for a share), read with
         * the second's work when split_result is 0 */
        struct store_split split;
        int split_result;
        struct exit_sample sample;
        tg_wall_ms keep_after, wall;
        unsigned share;
        bool lost;
        int sample_result;
        unsigned swept, taken, invalid;
        bool swept_ok, outbox_ok;
        bool posted;
};

/* A claim the store could not take back (store_release failed). */
struct unreleased {
        int64_t op_id, call_id;
        char why[32];
};

struct exit {
        const struct tg_config *cfg;
        const struct exit_env *env; /* the loop's: clocks and transport */
        struct store *store;        /* its own (borrowed) */
        unsigned index;             /* in the loop's list: carried by its cookies */
        bool pending; /* becoming an owner step by step (exit_begin): nothing else runs */
        /* The account's run-time controls in force (tollgate account, the
         * admin API: store_controls_get), read once a second with the
         * owner check: paused, no call starts and nothing is claimed;
         * cap_now is the in-flight cap in force (<= the share's configured
         * one, the transport's bound); the rate is the pacer's (rate_now).
         * controls_seen: the read's start (with shares no start unless it
         * is OWNERSHIP_FRESH_NS old at most: a share learns of a rate
         * change that soon, docs/design.md). */
        struct account_controls controls;
        bool controls_known;
        tg_mono_ns controls_seen;
        bool paused;
        unsigned cap_now;
        volatile sig_atomic_t *stop;
        void (*housekeeping)(void *ctx, struct store *store, unsigned share, tg_wall_ms wall,
                             bool lost);
        void *hook_ctx;
        struct pacer *pacer;
        /* Sub-quotas inside the account's (exit.refund_*, exit.query_*):
         * a pacer per kind of call, NULL where none is set. A call starts
         * only when the account's pacer and its kind's both allow it. */
        struct pacer *sub[EXIT_LEVELS];
        unsigned sub_cap[EXIT_LEVELS]; /* each one's in-flight cap (the share's part) */
        bool claim_barred; /* the last claim barred a kind (its sub-quota is taken up) */
        /* list and match read page by page (provider.list_cursor_param):
         * where each operation's walk goes on (core/list_walk.h), memory
         * only: a walk this exit does not know starts at the first page */
        struct list_walks *walks;
        struct classifier *classifier;
        struct tg_rng rng;
        /* Our share of the account quota (store.h, "shares"): exit.shares
         * dispatchers each pace to starts_per_second / shares with
         * max_in_flight / shares open, so together they never exceed the
         * account. With one share this is the whole account, as before. */
        struct pacer_config share_cfg;
        struct ownership own; /* share and epoch held */
        struct holds_config holds_cfg;
        struct holds_state holds;
        /* exit.adaptive: the rate under the share's ceiling (core/adaptive.h),
         * and the one the pacer has now */
        bool adaptive_on;
        struct adaptive adaptive;
        double rate_now;
        struct exit_token tok;   /* oauth2 (exit_token.c) */
        struct open_call *calls; /* ncalls = the share's max_in_flight slots */
        unsigned ncalls;
        uint64_t next_cookie;
        enum store_group turn;
        tg_mono_ns idle_until;
        tg_mono_ns next_sweep;
        uint64_t seq;
        bool lost; /* fenced or lock lost: stop starting */
        /* lost on purpose: a spare share handed back to a standby (drains,
         * releases its lock and waits as a spare again) */
        bool handing_back;
        /* The last owner check that found our lock held: no call is handed
         * over when it is older than OWNERSHIP_FRESH_NS (daemon/ownership.h:
         * a claim made ahead was fenced when it was made, not when it is
         * sent). */
        tg_mono_ns owner_seen;
        bool owner_checked;
        /* Outcomes the store could not take yet (down, restarting, busy past
         * its timeout). While any is here the exit starts nothing; they are
         * retried until the store takes them. Bounded: at most one per open
         * call, and no call starts while one waits. */
        struct settle_args *unsettled;
        unsigned n_unsettled;
        /* Claims the store could not take back (store_release failed):
         * their operations stay in flight until it does, so they are asked
         * again with the outcomes, and nothing is claimed or started
         * meanwhile. Bounded: they come from the ready queue, which no claim
         * refills while one waits here. */
        struct unreleased unreleased[READY_MAX];
        unsigned n_unreleased;
        uint64_t claim_failures; /* in a row */
        tg_mono_ns next_settle_retry;
        const char *failpoint;
        struct exit_stats *xstats;  /* operators' figures (exit_stats.h); hooks marked "stats:" */
        struct lead_estimator lead; /* the connect lead (core/lead_estimator.h) */
        /* Claims committed ahead of their slots, oldest first; each is in
         * flight in the store and not yet handed to the transport. */
        struct open_call ready[READY_MAX];
        unsigned nready;
        tg_mono_ns claim_est;  /* how long a claim's transaction takes (EWMA) */
        tg_mono_ns idle_step;  /* without a doorbell: the next look for work, backing off */
        tg_mono_ns idle_max;   /* exit.idle_poll_max_ms */
        tg_mono_ns last_empty; /* the last claim that found nothing (stats: lateness) */
        /* Shares: the windows of the grid every share starts on
         * (core/pacer.h); window 0 without shares. grid_rate: the
         * account's rate it is planned for; grid_from: after a change of
         * it, the wall time (ns) before which nothing starts (the same for
         * every share: pacer_switch_resume), 0 when none. */
        struct pacer_grid_plan grid;
        double grid_rate;
        int64_t grid_from;
        /* The store's work: on a thread of its own in the real environment
         * (claims and outcomes posted, their results taken each turn), inline
         * in the fake ones. Every other use of the store by this thread is
         * between store_worker_lock() and store_worker_unlock(). */
        struct store_worker *worker;
        /* Outcomes: the same worker, or (an outcome store: MariaDB) a
         * second one on a connection of their own, so that the server
         * works on claims and outcomes at once. */
        struct store_worker *outcomes;
        struct claim_job *claim; /* its memory, one batch at a time */
        struct owner_job *owner_job;
        struct second_job *second_job;
        bool claim_posted;      /* a batch is with the store thread */
        bool slot_claim_landed; /* a batch made at a slot came: use it before claiming again */
        int claim_result;       /* of the last batch */
};

/* ---- exit.c ---- */

/* The account's name in the store ("default" for the top level's). */
const char *exit_account_name(const struct exit *e);
/* The account's run-time controls as the store has them now (read once a
 * second): a changed rate from the next slot (the configured rate is the
 * ceiling; with shares every share moves to the new rate's grid from the
 * change's common instant, docs/design.md), a lowered cap for the starts
 * to come, a pause (the claims made ahead go back). Logged when they
 * change. */
void exit_apply_controls(struct exit *e, const struct account_controls *next, tg_mono_ns now,
                         tg_wall_ms wall);

bool exit_stopping(const struct exit *e);
/* exit.adaptive: the pacer takes the rate the controller allows at now
 * (from its next slot); the figures say it. A fixed exit: nothing. */
void exit_follow_rate(struct exit *e, tg_mono_ns now);
/* A log line's fields for an operation (and its call, may be NULL). */
json_t *exit_op_fields(const struct op_record *op, const struct call_record *call);
/* When a call for `slot` is handed over: the lead ahead of it. */
tg_mono_ns exit_handoff_time(const struct exit *e, tg_mono_ns slot);
/* The account's quota is held now (another share's hold, a pause). */
bool exit_account_held(struct exit *e, tg_mono_ns now, tg_wall_ms wall);

/* ---- exit_token.c ---- */

void exit_token_init(struct exit *e);
/* With oauth2: starts the token call when one is due (it takes the slot),
 * and says whether an operation's call must wait (no usable token, or the
 * token call took this slot). false without oauth2. */
bool exit_token_blocks(struct exit *e, tg_mono_ns now, tg_wall_ms wall);
/* When an exit without a usable token can next start anything: 0 (no
 * constraint: the slot says), TG_MONO_NEVER (its call's answer wakes the
 * loop) or the end of a hold. */
tg_mono_ns exit_token_wait(const struct exit *e, tg_mono_ns now);
unsigned exit_token_open(const struct exit *e); /* 1 while its call is out */
unsigned exit_token_gen(const struct exit *e);  /* the token in hand (0: none) */
/* The transport's reports of the token call: true when the report was its. */
bool exit_token_sent(struct exit *e, const struct transport_sent *s);
bool exit_token_done(struct exit *e, const struct transport_result *res, tg_mono_ns now);
/* An operation's call that carried token gen was answered: a 401 gives
 * that token up (once at once, then after a back-off). */
void exit_token_answered(struct exit *e, unsigned gen, const struct transport_result *res,
                         tg_mono_ns now);

/* ---- exit_queue.c ---- */

/* The sub-quota a call of this kind belongs to. */
enum exit_level exit_level_of(enum tg_call_kind kind);
/* Its pacer (NULL: no sub-quota for that kind). */
struct pacer *exit_sub(const struct exit *e, enum tg_call_kind kind);
/* The sub-quotas' pacers, a share's part of each (exit.c builds them). */
int exit_sub_build(struct exit *e);
/* The earliest moment, at `at` or later, that a ready claim's sub-quota
 * lets it start: `at` when one may, TG_MONO_NEVER when every one waits for
 * room in flight (a reply wakes the loop), INT64_MAX with nothing ready. */
tg_mono_ns exit_ready_next(const struct exit *e, tg_mono_ns at);
/* A start or a reply moved a sub-quota: a kind barred from the last claim
 * may be claimed again, at once. */
void exit_sub_moved(struct exit *e);

/* Claims up to n onto the ready queue (through the store thread). */
void exit_claim_ahead(struct exit *e, unsigned n, bool at_slot, tg_mono_ns now, tg_wall_ms wall);
/* The oldest ready claim that may still be sent at `at` and that its
 * sub-quota lets start then, into *oc; 0, TG_EAGAIN (claims are ready but
 * their sub-quotas hold them: they stay) or TG_ENOTFOUND. */
int exit_ready_pop(struct exit *e, struct open_call *oc, tg_mono_ns at, tg_mono_ns now,
                   tg_wall_ms wall);
/* A claim that found nothing (TG_ENOTFOUND) or failed. */
void exit_claim_missed(struct exit *e, int r, tg_mono_ns now, tg_wall_ms wall);
/* One claim, or every ready one, given back to the store. */
void exit_release_claim(struct exit *e, const struct open_call *rc, const char *why, tg_mono_ns now,
                        tg_wall_ms wall);
void exit_release_ready(struct exit *e, const char *why, tg_mono_ns now, tg_wall_ms wall);

/* ---- exit_settle.c ---- */

/* The store owes an outcome or a release; its threads are behind; the jobs
 * posted whose results were not taken yet. */
bool exit_store_owes(const struct exit *e);
bool exit_store_behind(const struct exit *e);
unsigned exit_store_pending(const struct exit *e);
/* A call the transport could not take (why: its error): settled unsent. */
void exit_settle_unsent(struct exit *e, struct open_call *oc, int why, tg_mono_ns now,
                        tg_wall_ms wall);

#endif
