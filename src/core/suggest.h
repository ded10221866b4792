/*
 * suggest — "did you mean": the known name closest to a mistyped one, pure.
 * The distance is Levenshtein's (insert, delete, substitute one byte), ASCII
 * case ignored. A known name is near enough to offer when the typed one is
 * at most max(2, strlen(known) / 3) edits from it; names longer than
 * SUGGEST_NAME_MAX bytes are never near anything (the work stays bounded).
 */
#ifndef TG_SUGGEST_H
#define TG_SUGGEST_H

#include <stdbool.h>
#include <stddef.h>

#define SUGGEST_NAME_MAX 64

/* Edits between a and b, or SIZE_MAX when either is longer than
 * SUGGEST_NAME_MAX. */
size_t suggest_distance(const char *a, const char *b);

/* Close enough to be a typo of known. */
bool suggest_near(const char *typed, const char *known);

/* The search for the closest near name over a list of candidates: caller
 * storage, members touched only through the functions below. */
struct suggest {
        const char *typed;
        const char *best; /* NULL: none near yet */
        size_t best_distance;
};

void suggest_init(struct suggest *s, const char *typed);
/* Takes known as the best when it is near and strictly closer than the
 * best so far (of equal ones, the first considered stays). known must
 * outlive s. */
void suggest_consider(struct suggest *s, const char *known);
/* The closest near name considered, or NULL. */
const char *suggest_best(const struct suggest *s);

#endif
