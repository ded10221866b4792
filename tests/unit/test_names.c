/*
 * Unit tests for src/core/names.c: every value of each vocabulary has a
 * word and reads back to itself, no word repeats within its table, values
 * outside a table answer "invalid" and parse to TG_EINVAL, and the lists
 * (names_word, names_join) hold the table in order (reasons without none).
 * The words themselves are checked against the migrations, openapi.yaml and
 * the console by tests/names/check_names.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/names.h"
#include "core/tg_error.h"

static void test_round_trip(void **state)
{
        (void)state;
        for (unsigned i = 0; i < OP_STATE_COUNT; i++) {
                enum op_state v = OP_CANCELLED;
                assert_int_equal(op_state_parse(op_state_name((enum op_state)i), &v), 0);
                assert_int_equal(v, i);
        }
        for (unsigned i = 0; i < TG_KIND_COUNT; i++) {
                enum tg_call_kind v = TG_KIND_MANUAL;
                assert_int_equal(tg_call_kind_parse(tg_call_kind_name((enum tg_call_kind)i), &v),
                                 0);
                assert_int_equal(v, i);
        }
        for (unsigned i = 0; i < TG_CLASS_COUNT; i++) {
                enum tg_class v = TG_CLASS_NO_ANSWER;
                assert_int_equal(tg_class_parse(tg_class_name((enum tg_class)i), &v), 0);
                assert_int_equal(v, i);
        }
        for (unsigned i = 0; i < MANUAL_REASON_COUNT; i++) {
                enum manual_reason v = MANUAL_INVALID;
                assert_int_equal(manual_reason_parse(manual_reason_name((enum manual_reason)i), &v),
                                 0);
                assert_int_equal(v, i);
        }
}

static void test_outside_the_tables(void **state)
{
        enum op_state st = OP_PENDING;
        enum tg_class cls = TG_CLASS_SUCCEEDED;

        (void)state;
        assert_string_equal(op_state_name((enum op_state)OP_STATE_COUNT), "invalid");
        assert_string_equal(tg_call_kind_name((enum tg_call_kind)TG_KIND_COUNT), "invalid");
        assert_string_equal(tg_class_name((enum tg_class) - 1), "invalid");
        assert_string_equal(manual_reason_name((enum manual_reason)MANUAL_REASON_COUNT), "invalid");
        assert_int_equal(op_state_parse("Pending", &st), TG_EINVAL);
        assert_int_equal(op_state_parse(NULL, &st), TG_EINVAL);
        assert_int_equal(op_state_parse(op_state_name(OP_MANUAL), NULL), TG_EINVAL);
        assert_int_equal(tg_class_parse("", &cls), TG_EINVAL);
        assert_int_equal(st, OP_PENDING); /* untouched on failure */
        assert_int_equal(cls, TG_CLASS_SUCCEEDED);
}

/* names_word() lists the table in order; the reasons start after none. */
static void test_lists(void **state)
{
        static const struct {
                enum tg_vocabulary v;
                const char *key;
                unsigned count;
        } lists[] = {
            {TG_VOCAB_STATES, "states", OP_STATE_COUNT},
            {TG_VOCAB_KINDS, "kinds", TG_KIND_COUNT},
            {TG_VOCAB_CLASSES, "classes", TG_CLASS_COUNT},
            {TG_VOCAB_REASONS, "reasons", MANUAL_REASON_COUNT - 1},
        };

        (void)state;
        for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
                unsigned n = 0;
                assert_string_equal(names_vocabulary_key(lists[l].v), lists[l].key);
                while (names_word(lists[l].v, n))
                        n++;
                assert_int_equal(n, lists[l].count);
                for (unsigned i = 0; i < n; i++)
                        for (unsigned j = i + 1; j < n; j++)
                                assert_string_not_equal(names_word(lists[l].v, i),
                                                        names_word(lists[l].v, j));
        }
        assert_string_equal(names_word(TG_VOCAB_STATES, OP_CANCELLED), op_state_name(OP_CANCELLED));
        assert_string_equal(names_word(TG_VOCAB_REASONS, 0),
                            manual_reason_name(MANUAL_ATTEMPTS_EXHAUSTED));
        assert_null(names_word((enum tg_vocabulary)TG_VOCAB_COUNT, 0));
        assert_string_equal(names_vocabulary_key((enum tg_vocabulary)TG_VOCAB_COUNT), "invalid");
}

static void test_join(void **state)
{
        char buf[200], tiny[8];

        (void)state;
        assert_int_equal(names_join(TG_VOCAB_KINDS, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "first, retry, query or manual");
        assert_int_equal(names_join(TG_VOCAB_STATES, buf, sizeof(buf)), 0);
        assert_non_null(strstr(buf, ", manual or cancelled"));
        assert_int_equal(names_join(TG_VOCAB_REASONS, buf, sizeof(buf)), 0);
        assert_null(strstr(buf, "none"));
        assert_int_equal(names_join(TG_VOCAB_STATES, tiny, sizeof(tiny)), TG_EFULL);
        assert_true(strlen(tiny) < sizeof(tiny));
        assert_int_equal(names_join(TG_VOCAB_STATES, NULL, 4), TG_EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_round_trip),
            cmocka_unit_test(test_outside_the_tables),
            cmocka_unit_test(test_lists),
            cmocka_unit_test(test_join),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
