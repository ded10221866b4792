/*
 * Tests of core/list_walk: a page with more to follow leaves its cursor
 * for the operation's very next query only (one more query, no POST
 * between); a walk ends found, complete, past max_pages, without a cursor
 * or without a list answer, and then starts again at the first page; the
 * table is bounded and forgets the least recently used walk first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/list_walk.h"

static struct list_walks *walks(void)
{
        struct list_walks *w = calloc(1, sizeof(*w));

        assert_non_null(w);
        return w;
}

static void next(struct list_walks *w, int64_t op, unsigned attempts, unsigned query, unsigned page,
                 const char *cursor)
{
        assert_int_equal(
            list_walk_after(w, op, attempts, query, page, REPLY_LIST_PARTIAL, cursor, 10),
            LIST_WALK_NEXT);
}

static void test_only_the_next_query_continues(void **state)
{
        struct list_walks *w = walks();
        unsigned page = 0;

        (void)state;
        next(w, 1, 1, 4, 1, "re_a");
        /* another query came between (another share's): page 1 again */
        assert_null(list_walk_cursor(w, 1, 1, 6, &page));
        assert_int_equal(page, 1);
        assert_int_equal(list_walk_count(w), 0);
        /* a POST came between (a re-send) */
        next(w, 1, 1, 4, 1, "re_a");
        assert_null(list_walk_cursor(w, 1, 2, 5, &page));
        assert_int_equal(page, 1);
        /* the very next query: page 2 */
        next(w, 1, 1, 4, 1, "re_a");
        assert_string_equal(list_walk_cursor(w, 1, 1, 5, &page), "re_a");
        assert_int_equal(page, 2);
        /* a claim given back and made again keeps its query number */
        assert_string_equal(list_walk_cursor(w, 1, 1, 5, &page), "re_a");
        /* another operation has no walk */
        assert_null(list_walk_cursor(w, 2, 1, 5, &page));
        assert_int_equal(page, 1);
        /* NULL page pointer is allowed */
        assert_string_equal(list_walk_cursor(w, 1, 1, 5, NULL), "re_a");
        free(w);
}

static void test_a_walk_ends(void **state)
{
        static const enum reply_list ends[] = {REPLY_LIST_FOUND, REPLY_LIST_ABSENT,
                                               REPLY_LIST_NOT_YET, REPLY_LIST_NONE};
        struct list_walks *w = walks();
        unsigned page;

        (void)state;
        for (unsigned i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
                next(w, 3, 1, 1, 1, "re_a");
                assert_non_null(list_walk_cursor(w, 3, 1, 2, &page));
                assert_int_equal(list_walk_after(w, 3, 1, 2, page, ends[i], "", 10),
                                 LIST_WALK_DONE);
                assert_null(list_walk_cursor(w, 3, 1, 3, &page));
                assert_int_equal(page, 1);
        }
        /* more to follow but no cursor to ask for it by: unconcluded */
        assert_int_equal(list_walk_after(w, 3, 1, 1, 1, REPLY_LIST_PARTIAL, "", 10),
                         LIST_WALK_BOUNDED);
        assert_int_equal(list_walk_after(w, 3, 1, 1, 1, REPLY_LIST_PARTIAL, NULL, 10),
                         LIST_WALK_BOUNDED);
        /* one page at most (no cursor parameter): today's first page only */
        assert_int_equal(list_walk_after(w, 3, 1, 1, 1, REPLY_LIST_PARTIAL, "re_a", 1),
                         LIST_WALK_BOUNDED);
        assert_int_equal(list_walk_count(w), 0);
        /* pages 1..9 of 10 go on, the 10th ends it */
        for (unsigned p = 1; p < 10; p++) {
                const char *c = list_walk_cursor(w, 4, 1, p, &page);
                assert_int_equal(page, p);
                assert_true(p == 1 ? c == NULL : c != NULL);
                next(w, 4, 1, p, page, "re_x");
        }
        assert_non_null(list_walk_cursor(w, 4, 1, 10, &page));
        assert_int_equal(page, 10);
        assert_int_equal(list_walk_after(w, 4, 1, 10, page, REPLY_LIST_PARTIAL, "re_y", 10),
                         LIST_WALK_BOUNDED);
        assert_int_equal(list_walk_count(w), 0);
        free(w);
}

static void test_bounded_table(void **state)
{
        struct list_walks *w = walks();
        char id[32];
        unsigned page;

        (void)state;
        for (int64_t op = 1; op <= LIST_WALK_MAX; op++) {
                snprintf(id, sizeof(id), "re_%lld", (long long)op);
                next(w, op, 1, 1, 1, id);
        }
        assert_int_equal(list_walk_count(w), LIST_WALK_MAX);
        /* op 1 used again: op 2 is now the least recently used */
        assert_string_equal(list_walk_cursor(w, 1, 1, 2, &page), "re_1");
        next(w, LIST_WALK_MAX + 1, 1, 1, 1, "re_new");
        assert_int_equal(list_walk_count(w), LIST_WALK_MAX);
        assert_null(list_walk_cursor(w, 2, 1, 2, &page));
        assert_int_equal(page, 1);
        assert_string_equal(list_walk_cursor(w, 1, 1, 2, &page), "re_1");
        assert_string_equal(list_walk_cursor(w, LIST_WALK_MAX + 1, 1, 2, &page), "re_new");
        /* a walk that goes on takes its own entry, not another */
        next(w, 1, 1, 2, 2, "re_1b");
        assert_string_equal(list_walk_cursor(w, 1, 1, 3, &page), "re_1b");
        assert_int_equal(page, 3);
        assert_string_equal(list_walk_cursor(w, 3, 1, 2, &page), "re_3");
        free(w);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_only_the_next_query_continues),
            cmocka_unit_test(test_a_walk_ends),
            cmocka_unit_test(test_bounded_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
