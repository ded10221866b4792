/*
 * currency — ISO 4217 minor-unit exponents, pure: the one table of
 * currencies tollgate knows the decimal places of, and the decimal string
 * of an amount in minor units (1037 USD is "10.37", 1037 JPY is "1037",
 * 1037 KWD is "1.037"), for a provider that wants amounts as decimal
 * strings (provider.body_field's {amount_decimal}: core/template.h).
 *
 * A currency missing from the table has no decimal form: the caller refuses
 * it (at intake, before a refund is accepted) rather than guess two places.
 * Codes without a minor unit in ISO 4217 (XAU, XDR, XXX, ...) are not in the
 * table. The table is ISO 4217's, not any provider's: a provider that takes
 * fewer places for a currency than ISO says (PayPal's HUF and TWD take no
 * decimals) is the profile's to note.
 */
#ifndef TG_CURRENCY_H
#define TG_CURRENCY_H

#include <stddef.h>
#include <stdint.h>

/* The decimal places of code (3 uppercase letters, NUL-terminated). 0 with
 * *ret_exponent set (0..4), or TG_ENOTFOUND (not in the table; *ret untouched). */
int currency_exponent(const char *code, unsigned *ret_exponent);

/* Longest decimal string: a sign, 19 digits, a point, NUL. */
#define CURRENCY_DECIMAL_MAX 24

/* Writes minor as a decimal string in code's exponent into buf[size]:
 * 1037 USD "10.37", 5 USD "0.05", 1037 JPY "1037", -5 KWD "-0.005". 0,
 * TG_ENOTFOUND (code not in the table), TG_EFULL (buf too small; buf is
 * then ""). */
int currency_decimal(int64_t minor, const char *code, char *buf, size_t size);

/* The table is sorted and each entry well formed: 0 or TG_EINVAL (for the
 * unit test). */
int currency_table_check(void);

#endif
