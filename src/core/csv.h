/*
 * csv — one line of CSV (RFC 4180 quoting: a field in double quotes may
 * hold commas and "" for a quote; no line break inside a field) split into
 * its fields, in place, pure. The settlement files of `tollgate reconcile`
 * and the records of `tollgate jitter` are read with it.
 *
 * The line is cut where it stands: every field is a NUL-terminated text
 * inside it, unquoted, so nothing is allocated and no field can be longer
 * than the line.
 */
#ifndef TG_CSV_H
#define TG_CSV_H

#include <stddef.h>

enum csv_quotes {
        CSV_QUOTES_STRICT, /* a '"' inside an unquoted field is an error (RFC 4180) */
        CSV_QUOTES_BARE,   /* ... is kept as it is */
};

/*
 * Splits line (NUL-terminated, its line break already taken off) in place
 * into at most max fields: ret_fields[0..*ret_count) point into line. An
 * empty line is one empty field. 0, or TG_EPARSE: a quote left open, text
 * after a closing quote, more than max fields, or (CSV_QUOTES_STRICT) a
 * quote inside an unquoted field. On an error line and ret_fields hold
 * something unspecified and *ret_count is untouched.
 */
int csv_split(char *line, enum csv_quotes quotes, char **ret_fields, size_t max, size_t *ret_count);

#endif
