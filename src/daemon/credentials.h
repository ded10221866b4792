/*
 * credentials — named API credentials with scopes (api.credentials_file),
 * parsed without I/O so that config_files.c reads the file, `tollgate token`
 * writes it and tests feed it text. One credential a line:
 *
 *     # name      scopes           salted hash of the secret          [revoked]
 *     orders      intake           hmac-sha256:SALT32HEX:DIGEST64HEX
 *     alice       read,operator    hmac-sha256:...:...
 *     old-batch   intake           hmac-sha256:...:...                revoked
 *
 * name: 1-64 of [A-Za-z0-9._@-], what the audit trail records as who acted;
 * scopes: a comma-separated set of intake, read, operator, admin (or all);
 * the secret is never in the file, only HMAC-SHA256(key = a random 16-byte
 * salt, message = the secret). A revoked line stays, so that its secret is
 * refused as revoked (403) rather than unknown, and its name is never given
 * to someone else. Blank lines and lines starting with '#' are skipped; a
 * name used twice is an error.
 *
 * Why a salted HMAC and not PBKDF2 or scrypt: the secrets `tollgate token
 * add` makes are 32 bytes from getrandom(), which no offline search can
 * guess, so a slow hash buys nothing against a stolen file and would cost
 * every API request its work factor (an easy way to burn the API's one
 * thread). The salt keeps two lines with the same secret apart and makes a
 * table of precomputed digests useless.
 */
#ifndef TG_CREDENTIALS_H
#define TG_CREDENTIALS_H

#include <stdbool.h>
#include <stddef.h>

#define CREDENTIALS_MAX     64
#define CREDENTIAL_NAME_MAX 64
#define CREDENTIAL_SALT_LEN 16
#define CREDENTIAL_HASH_LEN 32
/* a secret `tollgate token add` makes: "tg_" and 64 hex digits */
#define CREDENTIAL_SECRET_LEN (3 + 64)
/* one line of the file, as credential_format() writes it */
#define CREDENTIAL_LINE_MAX 256

/* The scopes, bits of a set. */
enum credential_scope {
        SCOPE_INTAKE = 1u << 0,   /* submit, cancel, read a refund by its id */
        SCOPE_READ = 1u << 1,     /* status, calls, stats, the manual queue */
        SCOPE_OPERATOR = 1u << 2, /* manual re-send, resolve, assign, approve */
        SCOPE_ADMIN = 1u << 3,    /* account changes, prune, retention */
};
#define SCOPE_COUNT 4
#define SCOPES_ALL  ((1u << SCOPE_COUNT) - 1)

struct credential {
        char name[CREDENTIAL_NAME_MAX + 1];
        unsigned scopes; /* enum credential_scope bits */
        bool revoked;
        unsigned char salt[CREDENTIAL_SALT_LEN];
        unsigned char hash[CREDENTIAL_HASH_LEN];
};

/* The name of one scope bit ("intake", ...), NULL for anything else. */
const char *credential_scope_name(unsigned scope);
/* "intake,read" (or "all") into a set of bits. 0 or TG_EINVAL (an unknown
 * word, an empty set). */
int credential_scopes_parse(const char *text, size_t len, unsigned *ret_scopes);
/* A set as "intake,read" into buf. 0 or TG_EFULL. */
int credential_scopes_format(unsigned scopes, char *buf, size_t size);

/* Whether name is a credential's name (1-64 of [A-Za-z0-9._@-]). */
bool credential_name_ok(const char *name);

/* Parses a credentials file's text (len bytes, need not be NUL-terminated)
 * into creds[max]. 0 and *ret_count; or TG_EPARSE with a one-line message
 * naming the line in err, TG_EFULL past max. Never echoes a digest. */
int credentials_parse(const char *text, size_t len, struct credential *creds, unsigned max,
                      unsigned *ret_count, char *err, size_t err_size);

/* The credential whose hash the secret (len bytes) matches: its index in
 * creds[count], or TG_ENOTFOUND. Every credential is hashed and compared,
 * whichever matches (no early exit), so the time says nothing about which
 * one or which byte. */
int credentials_match(const struct credential *creds, unsigned count, const char *secret,
                      size_t len, unsigned *ret_index);

/* A new credential for name and scopes: a random salt and a random secret
 * (CREDENTIAL_SECRET_LEN characters, NUL-terminated, into ret_secret, to be
 * shown once and then wiped). 0, TG_EINVAL (a bad name or no scope) or
 * TG_EIO (no randomness). */
int credential_new(const char *name, unsigned scopes, struct credential *ret_cred,
                   char ret_secret[CREDENTIAL_SECRET_LEN + 1]);

/* One line of the file for cred (with its '\n'). 0 or TG_EFULL. */
int credential_format(const struct credential *cred, char *buf, size_t size);

#endif
