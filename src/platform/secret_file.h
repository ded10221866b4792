/*
 * secret_file — the one reader of a small file that holds a secret (an API
 * token, a webhook secret, a database password, a provider's API key,
 * signing key or client key): opened once, checked on the open file itself
 * (fstat, so the file checked is the file read), read whole into secret
 * memory (platform/secmem.h) and bounded. It does not log: it returns a code
 * and writes a one-line message naming the path (never the contents) that
 * the caller puts under its own name (a config key, a command-line flag).
 *
 * Codes: 0; -errno when the file cannot be opened, looked at or read
 * ("cannot read PATH: <why>"); TG_EINVAL when SECRET_FILE_REGULAR refuses
 * what is not a regular file ("cannot read PATH: not a regular file");
 * TG_ECONFIG when SECRET_FILE_PRIVATE or SECRET_FILE_PRIVATE_KEY refuses a
 * file group or others may read or write (the message says the chmod that
 * fixes it); TG_EFULL past the caller's bound ("PATH: larger than N
 * bytes"); TG_ENOMEM.
 */
#ifndef TG_SECRET_FILE_H
#define TG_SECRET_FILE_H

#include <stddef.h>

enum secret_file_flags {
        SECRET_FILE_REGULAR = 1 << 0,     /* refuse anything but a regular file */
        SECRET_FILE_PRIVATE = 1 << 1,     /* refuse a file open to group or others */
        SECRET_FILE_PRIVATE_KEY = 1 << 2, /* the same, said of a private key (a PEM key) */
};

/* Opens path and checks it by flags (enum secret_file_flags, or-ed),
 * reading nothing. 0 or a code above, err[err_size] filled on failure. */
int secret_file_check(const char *path, unsigned flags, char *err, size_t err_size);

/* Checks path as secret_file_check() does, then reads it whole: at most
 * max bytes (max >= 1), into secret memory that *ret_data then owns
 * (secmem_free() it), NUL-terminated after *ret_len bytes. On failure the
 * out params are untouched and nothing read is left in memory. */
int secret_file_read(const char *path, unsigned flags, size_t max, char **ret_data, size_t *ret_len,
                     char *err, size_t err_size);

/* The length of text[0..len) without its trailing CR, LF, spaces and tabs
 * (what an editor or `echo` leaves after a secret). */
size_t secret_file_trim(const char *text, size_t len);

#endif
