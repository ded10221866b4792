/*
 * store_url — the pieces of a server store's url (mysql://, postgresql://)
 * that every server backend reads the same way: a %XX-decoded user name or
 * password, a bounded copy of a part, the first line of a password file and
 * a database name that may go into SQL as an identifier. Each backend's own
 * parse_where() says which parts its url has; nothing here knows a driver.
 *
 * Invariants: every output is NUL-terminated and bounded by its size; a
 * decode never grows the text; the password file's contents never leave
 * dst (nothing is logged).
 */
#ifndef TG_STORE_URL_H
#define TG_STORE_URL_H

#include <stdbool.h>
#include <stddef.h>

/* Decodes %XX in place (user names and passwords may need them; a '+' is
 * itself). False for a '%' without two hex digits after it or a %00. */
bool store_url_decode(char *text);

/* from[0..len) into dst[size], NUL-terminated; false (dst untouched) when
 * it does not fit. */
bool store_url_copy(char *dst, size_t size, const char *from, size_t len);

/* The first line of the file at path, without its newline, into dst[size]
 * (the file stays private: nothing of it is logged). 0; TG_EIO when it
 * cannot be opened; TG_EINVAL when it is empty (dst is then ""). */
int store_url_read_password(const char *path, char *dst, size_t size);

/* True when name is 1..max letters, digits and '_' (it goes into SQL as an
 * identifier, unquoted). */
bool store_url_name_ok(const char *name, size_t max);

#endif
