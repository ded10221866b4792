/*
 * bench_store_util.h — what the two store benches (bench_store, SQLite, and
 * bench_store_mysql, MariaDB) share: their time base T0 and accept_one(),
 * which accepts the i-th refund of a bench through the store's own intake.
 * static inline, like bench_util.h, which it includes (die()).
 */
#ifndef TG_BENCH_STORE_UTIL_H
#define TG_BENCH_STORE_UTIL_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bench_util.h"
#include "store/store.h"

/* The benches' "now": a fixed wall time in ms, so rows and due times repeat. */
#define T0 1700000000000LL

/* Accepts refund number i (operation "bench-<i>", accepted at T0 + i ms);
 * a store error ends the bench. */
static inline void accept_one(struct store *s, int64_t i, const struct policy_config *c)
{
        struct refund_request q;
        struct op_record op;
        bool created;
        int r;

        memset(&q, 0, sizeof(q));
        snprintf(q.operation_id, sizeof(q.operation_id), "bench-%" PRId64, i);
        snprintf(q.payment_id, sizeof(q.payment_id), "pay-%" PRId64, i);
        q.amount = 1000 + i % 5000;
        memcpy(q.currency, "TWD", 4);
        r = store_accept(s, &q, T0 + i, c, &created, &op);
        if (r < 0)
                die("accept", r);
}

#endif
