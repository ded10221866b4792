/*
 * list_walk — the pages of one list-and-match walk (provider.reconcile
 * `list`, provider.list_cursor_param), pure: where an operation's next
 * query starts when its last one was a page that did not hold ours and
 * said more pages follow.
 *
 * A walk starts at the first page (no cursor). A page without ours that
 * says more follow (REPLY_LIST_PARTIAL, its last item's id the cursor)
 * makes the operation's very next query the next page, up to max_pages
 * pages; past them the walk ends unconcluded (the list is not known
 * complete). So a page that says the list is complete was reached from the
 * first page through every page between, within one walk: "not in the
 * list" is then not_found (core/classify.c).
 *
 * The table is memory only, bounded (LIST_WALK_MAX operations, the least
 * recently used forgotten first), one per exit: a walk forgotten (a
 * restart, a takeover, another share's query of the operation, an
 * eviction) starts again at the first page, which is always correct. A
 * cursor is given only to the query that follows the page that left it:
 * the same number of POSTs, and query number + 1. Anything between (a
 * re-send, another dispatcher's query) breaks the walk.
 *
 * Invariants: at most one entry per operation; an entry's cursor is never
 * empty and never a cut value (provider_reply drops a cursor that filled
 * its field); 2 <= page <= max_pages.
 */
#ifndef TG_LIST_WALK_H
#define TG_LIST_WALK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/classify.h"

#define LIST_WALK_MAX       256
#define LIST_WALK_PAGES_MAX 1000 /* provider.list_max_pages at most */

struct list_walk_entry {
        int64_t op_id; /* 0: free */
        unsigned attempts;
        unsigned query; /* the query number that left the cursor */
        unsigned page;  /* the page the cursor starts (2 or more) */
        uint64_t used;  /* the table's tick at its last use (LRU) */
        char cursor[sizeof(((struct provider_reply *)0)->list_cursor)];
};

struct list_walks {
        struct list_walk_entry e[LIST_WALK_MAX];
        uint64_t tick;
};

/* Where query number `query` of op (with `attempts` POSTs made) starts:
 * the cursor its walk left ("" or NULL: the first page), and *ret_page
 * (may be NULL) the page number it fetches. An entry for op that does not
 * continue this query is forgotten. */
const char *list_walk_cursor(struct list_walks *w, int64_t op_id, unsigned attempts, unsigned query,
                             unsigned *ret_page);

/* What a walk does after a query's answer. */
enum list_walk_step {
        LIST_WALK_DONE,    /* concluded, or not a list page: nothing pending */
        LIST_WALK_NEXT,    /* a page without ours, more follow: the next page is next */
        LIST_WALK_BOUNDED, /* max_pages read, more follow: ends unconcluded */
};

/* Query number `query` of op, which fetched page `page` (list_walk_cursor
 * said which when it started), ended with `list` (its reply's verdict) and,
 * for a PARTIAL page, `cursor` (its last item's id, "" when it had none).
 * A PARTIAL page under max_pages with a cursor: the next page is recorded
 * (NEXT). Anything else forgets op's walk: FOUND / ABSENT / NOT_YET
 * conclude it; PARTIAL at max_pages or without a cursor ends it
 * unconcluded (BOUNDED); no list answer at all (a timeout, a 5xx, a 429,
 * another strategy's answer: NONE) ends it too, and the next walk starts
 * at the first page. */
enum list_walk_step list_walk_after(struct list_walks *w, int64_t op_id, unsigned attempts,
                                    unsigned query, unsigned page, enum reply_list list,
                                    const char *cursor, unsigned max_pages);

/* The walks in progress. */
unsigned list_walk_count(const struct list_walks *w);

#endif
