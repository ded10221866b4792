/*
 * strnum — the one strict reader of numbers written by people: command-line
 * options, config values, the stub's admin queries, files the tools read.
 * The whole string is the number: no leading or trailing blanks, no sign
 * other than a leading '-', no hex, no "inf" or "nan", nothing empty.
 *
 * Each returns 0 and sets *ret_value, or returns TG_EPARSE (not a number of
 * that kind) or TG_ERANGE (a number, but past what the type holds or outside
 * [min, max]); *ret_value is untouched on failure. s may be NULL (TG_EPARSE).
 */
#ifndef TG_STRNUM_H
#define TG_STRNUM_H

#include <stdint.h>

/* A decimal integer: -?[0-9]+, in [min, max]. */
int strnum_i64(const char *s, int64_t min, int64_t max, int64_t *ret_value);

/* A decimal integer without sign: [0-9]+, in [min, max]. A negative
 * integer is TG_ERANGE, not TG_EPARSE: it is a number, below any minimum. */
int strnum_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret_value);

/* A finite decimal number: -?digits[.digits][e[+-]digits] (either side of
 * the point may be empty, not both), in [min, max]. Overflow and underflow
 * (as strtod reports them: "1e999", "1e-999") are TG_ERANGE. */
int strnum_double(const char *s, double min, double max, double *ret_value);

#endif
