/*
 * names — the words of the four vocabularies (core/names.h) and their
 * inverses, made from the tables there: no word is written in this file.
 *
 * Invariants: each words[] array has exactly its enum's count of entries,
 * in enum order (both are made from the same table); a lookup outside a
 * table answers "invalid" or TG_EINVAL, never reads past the array.
 */
#include "core/names.h"

#include <stdio.h>
#include <string.h>

#include "core/tg_error.h"

#define WORD_ROW(value, word) [value] = word,

static const char *const state_words[OP_STATE_COUNT] = {TG_STATES(WORD_ROW)};
static const char *const kind_words[TG_KIND_COUNT] = {TG_CALL_KINDS(WORD_ROW)};
static const char *const class_words[TG_CLASS_COUNT] = {TG_OUTCOME_CLASSES(WORD_ROW)};
static const char *const reason_words[MANUAL_REASON_COUNT] = {TG_MANUAL_REASONS(WORD_ROW)};

static const char *word_of(const char *const *words, unsigned count, unsigned value)
{
        return value < count ? words[value] : "invalid";
}

/* The index of name in words[0..count), or -1. */
static int index_of(const char *const *words, unsigned count, const char *name)
{
        for (unsigned i = 0; name && i < count; i++)
                if (strcmp(name, words[i]) == 0)
                        return (int)i;
        return -1;
}

/* <fn>_name() and <fn>_parse() over one table. */
#define NAMES_PAIR(fn, type, words, count)                                                         \
        const char *fn##_name(type value)                                                          \
        {                                                                                          \
                return word_of(words, count, (unsigned)value);                                     \
        }                                                                                          \
        int fn##_parse(const char *name, type *ret_value)                                          \
        {                                                                                          \
                int i = index_of(words, count, name);                                              \
                if (i < 0 || !ret_value)                                                           \
                        return TG_EINVAL;                                                          \
                *ret_value = (type)i;                                                              \
                return 0;                                                                          \
        }

NAMES_PAIR(op_state, enum op_state, state_words, OP_STATE_COUNT)
NAMES_PAIR(tg_call_kind, enum tg_call_kind, kind_words, TG_KIND_COUNT)
NAMES_PAIR(tg_class, enum tg_class, class_words, TG_CLASS_COUNT)
NAMES_PAIR(manual_reason, enum manual_reason, reason_words, MANUAL_REASON_COUNT)

static const struct {
        const char *key;
        const char *const *words;
        unsigned first, count;
} vocabularies[TG_VOCAB_COUNT] = {
    [TG_VOCAB_STATES] = {"states", state_words, 0, OP_STATE_COUNT},
    [TG_VOCAB_KINDS] = {"kinds", kind_words, 0, TG_KIND_COUNT},
    [TG_VOCAB_CLASSES] = {"classes", class_words, 0, TG_CLASS_COUNT},
    [TG_VOCAB_REASONS] = {"reasons", reason_words, MANUAL_NONE + 1, MANUAL_REASON_COUNT},
};

const char *names_vocabulary_key(enum tg_vocabulary vocabulary)
{
        if ((unsigned)vocabulary >= TG_VOCAB_COUNT)
                return "invalid";
        return vocabularies[vocabulary].key;
}

const char *names_word(enum tg_vocabulary vocabulary, unsigned i)
{
        if ((unsigned)vocabulary >= TG_VOCAB_COUNT)
                return NULL;
        if (i >= vocabularies[vocabulary].count - vocabularies[vocabulary].first)
                return NULL;
        return vocabularies[vocabulary].words[vocabularies[vocabulary].first + i];
}

int names_join(enum tg_vocabulary vocabulary, char *dst, size_t size)
{
        size_t n = 0;

        if (!dst || size == 0)
                return TG_EINVAL;
        dst[0] = '\0';
        for (unsigned i = 0; names_word(vocabulary, i); i++) {
                const char *w = names_word(vocabulary, i);
                const char *sep = i == 0 ? "" : names_word(vocabulary, i + 1) ? ", " : " or ";
                int k = snprintf(dst + n, size - n, "%s%s", sep, w);
                if (k < 0 || (size_t)k >= size - n)
                        return TG_EFULL;
                n += (size_t)k;
        }
        return 0;
}
