/*
 * ui_users — who may sign in to the console (ui.users_file), parsed without
 * I/O so that config_files.c reads the file and tests feed it text. One user a
 * line:
 *
 *     # name     role      sha256 of the token
 *     alice      operator  sha256:2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b
 *     bob        viewer    sha256:...
 *
 * name: 1-64 of [A-Za-z0-9._@-] (it is what the audit trail records); role:
 * operator (may resend and resolve) or viewer (reads only); the token is
 * never written in the file, only its SHA-256 in hex (`printf %s TOKEN |
 * sha256sum`). Blank lines and lines starting with '#' are skipped. A name
 * or a token digest used twice is an error: a token must name one person.
 */
#ifndef TG_UI_USERS_H
#define TG_UI_USERS_H

#include <stdbool.h>
#include <stddef.h>

#define UI_USERS_MAX  64
#define UI_NAME_MAX   64
#define UI_DIGEST_LEN 32
/* The name the API token (api.token_file) signs in as, with the operator
 * role. */
#define UI_API_TOKEN_USER "api-token"

enum ui_role {
        UI_ROLE_VIEWER,
        UI_ROLE_OPERATOR,
};

struct ui_user {
        char name[UI_NAME_MAX + 1];
        enum ui_role role;
        unsigned char token_sha256[UI_DIGEST_LEN];
};

/* "operator" / "viewer". */
const char *ui_role_name(enum ui_role role);

/* Parses a users file's text (len bytes, need not be NUL-terminated) into
 * users[max]. 0 and *ret_count; or TG_EPARSE with a one-line message naming
 * the line in err (users may be partly written), TG_EFULL past max users. */
int ui_users_parse(const char *text, size_t len, struct ui_user *users, unsigned max,
                   unsigned *ret_count, char *err, size_t err_size);

/* The grammar's pieces, shared with the credentials file (credentials.h):
 * fn is called for every line that is neither blank nor a comment (its
 * length without the line end, its number from 1); a line over 512 bytes or
 * with a control character is refused here. 0, or fn's or TG_EPARSE with
 * the line named in err. */
typedef int (*ui_users_line_fn)(const char *line, size_t len, unsigned lineno, void *ctx, char *err,
                                size_t err_size);
int ui_users_each_line(const char *text, size_t len, ui_users_line_fn fn, void *ctx, char *err,
                       size_t err_size);
/* The next field of line[0..len) from *pos (skipping spaces and tabs): its
 * start and length, 0 when none is left. */
size_t ui_users_next_field(const char *line, size_t len, size_t *pos, const char **ret_start);
/* "line N: what" into err; returns TG_EPARSE. */
int ui_users_line_error(char *err, size_t size, unsigned lineno, const char *what);

#endif
