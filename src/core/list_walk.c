/*
 * list_walk — the pages of one list-and-match walk. See list_walk.h.
 */
#include "core/list_walk.h"

#include <stdio.h>
#include <string.h>

static struct list_walk_entry *find(struct list_walks *w, int64_t op_id)
{
        for (unsigned i = 0; i < LIST_WALK_MAX; i++)
                if (w->e[i].op_id == op_id)
                        return &w->e[i];
        return NULL;
}

static void forget(struct list_walks *w, int64_t op_id)
{
        struct list_walk_entry *e = op_id != 0 ? find(w, op_id) : NULL;

        if (e)
                memset(e, 0, sizeof(*e));
}

const char *list_walk_cursor(struct list_walks *w, int64_t op_id, unsigned attempts, unsigned query,
                             unsigned *ret_page)
{
        struct list_walk_entry *e = op_id != 0 ? find(w, op_id) : NULL;

        if (ret_page)
                *ret_page = 1;
        if (!e)
                return NULL;
        if (e->attempts != attempts || e->query + 1 != query) {
                /* something came between: that walk is no longer this one */
                memset(e, 0, sizeof(*e));
                return NULL;
        }
        e->used = ++w->tick;
        if (ret_page)
                *ret_page = e->page;
        return e->cursor;
}

enum list_walk_step list_walk_after(struct list_walks *w, int64_t op_id, unsigned attempts,
                                    unsigned query, unsigned page, enum reply_list list,
                                    const char *cursor, unsigned max_pages)
{
        struct list_walk_entry *e, *lru = NULL;

        if (op_id == 0)
                return LIST_WALK_DONE;
        if (list != REPLY_LIST_PARTIAL) {
                forget(w, op_id);
                return LIST_WALK_DONE;
        }
        if (!cursor || !cursor[0] || strlen(cursor) >= sizeof(e->cursor) || page < 1 ||
            page >= max_pages) {
                forget(w, op_id);
                return LIST_WALK_BOUNDED;
        }
        e = find(w, op_id);
        for (unsigned i = 0; !e && i < LIST_WALK_MAX; i++) {
                struct list_walk_entry *c = &w->e[i];
                if (c->op_id == 0) {
                        e = c;
                        break;
                }
                if (!lru || c->used < lru->used)
                        lru = c;
        }
        if (!e)
                e = lru; /* full: the least recently used walk starts over */
        memset(e, 0, sizeof(*e));
        e->op_id = op_id;
        e->attempts = attempts;
        e->query = query;
        e->page = page + 1;
        e->used = ++w->tick;
        snprintf(e->cursor, sizeof(e->cursor), "%s", cursor);
        return LIST_WALK_NEXT;
}

unsigned list_walk_count(const struct list_walks *w)
{
        unsigned n = 0;

        for (unsigned i = 0; i < LIST_WALK_MAX; i++)
                n += w->e[i].op_id != 0;
        return n;
}
