/*
 * suggest — "did you mean" by edit distance. See suggest.h. One row of the
 * Levenshtein table on the stack (names are bounded), so nothing is
 * allocated and the time is at most SUGGEST_NAME_MAX squared steps.
 */
#include "core/suggest.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>

size_t suggest_distance(const char *a, const char *b)
{
        size_t la = strlen(a), lb = strlen(b);
        size_t row[SUGGEST_NAME_MAX + 1];

        if (la > SUGGEST_NAME_MAX || lb > SUGGEST_NAME_MAX)
                return SIZE_MAX;
        for (size_t j = 0; j <= lb; j++)
                row[j] = j;
        for (size_t i = 1; i <= la; i++) {
                size_t diag = row[0];
                row[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t up = row[j];
                        size_t best = diag + (tolower((unsigned char)a[i - 1]) !=
                                              tolower((unsigned char)b[j - 1]));
                        if (row[j - 1] + 1 < best)
                                best = row[j - 1] + 1;
                        if (up + 1 < best)
                                best = up + 1;
                        row[j] = best;
                        diag = up;
                }
        }
        return row[lb];
}

bool suggest_near(const char *typed, const char *known)
{
        size_t d = suggest_distance(typed, known);
        size_t limit = strlen(known) / 3;

        return d <= (limit > 2 ? limit : 2);
}

void suggest_init(struct suggest *s, const char *typed)
{
        s->typed = typed;
        s->best = NULL;
        s->best_distance = SIZE_MAX;
}

void suggest_consider(struct suggest *s, const char *known)
{
        size_t d = suggest_distance(s->typed, known);

        if (d < s->best_distance && suggest_near(s->typed, known)) {
                s->best = known;
                s->best_distance = d;
        }
}

const char *suggest_best(const struct suggest *s)
{
        return s->best;
}
