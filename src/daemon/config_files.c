/*
 * config_files — the keys whose value names a file: the secret files (the
 * API token, the webhook secret, the provider's API key and signing key, a
 * mysql url's password_file), the console's users, and the TLS files. A
 * secret file is opened, checked and read by platform/secret_file, the one
 * reader of secrets; here its problems are put under the key's name.
 *
 * Invariants:
 *   - a secret's contents never appear in a message, and every buffer that
 *     held one is wiped (secret memory, or explicit_bzero on the stack);
 *   - a secret file that is not a regular file, or that group or others
 *     may read or write, is refused with the chmod that fixes it;
 *   - a secret is non-empty printable ASCII without spaces once its
 *     trailing newlines and spaces are trimmed (it travels in a header);
 *   - relative paths are the config file's folder's.
 */
#include "daemon/config_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tg_error.h"
#include "daemon/ui_users.h"
#include "platform/secmem.h"
#include "platform/secret_file.h"

#define SECRET_FILE_MAX 4096 /* bytes read from a secret file at most */
#define SECRET_CHECKS   (SECRET_FILE_REGULAR | SECRET_FILE_PRIVATE)
#define USERS_FILE_MAX  (64 * 1024)
#define CREDS_FILE_MAX  (32 * 1024) /* 64 lines of up to 512 bytes */

/* ---- secrets --------------------------------------------------------------- */

int config_check_secret_file(struct load *load, const struct key_def *key, const char *path)
{
        char why[TG_PATH_MAX * 2 + 200] = "";
        int r;

        if (path[0] == '\0')
                return config_key_error(load, key, "must name a file");
        r = secret_file_check(path, SECRET_CHECKS, why, sizeof(why));
        if (r < 0)
                return config_key_error(load, key, "%s", why[0] ? why : tg_strerror(r));
        return 1;
}

/* The whole of a secret file, checked, into secret memory *ret_buf (the
 * caller's to secmem_free), *ret_len bytes. 1, or 0 (an error was
 * recorded). */
static int secret_read_all(struct load *load, const struct key_def *key, const char *path,
                           char **ret_buf, size_t *ret_len)
{
        char why[TG_PATH_MAX * 2 + 200] = "";
        int r;

        if (path[0] == '\0')
                return config_key_error(load, key, "must name a file");
        r = secret_file_read(path, SECRET_CHECKS, SECRET_FILE_MAX, ret_buf, ret_len, why,
                             sizeof(why));
        if (r == TG_EFULL)
                return config_key_error(load, key, "%s: file too large for a secret", path);
        if (r < 0)
                return config_key_error(load, key, "%s", why[0] ? why : tg_strerror(r));
        return 1;
}

/* One secret from text[0..n) into dst[size]: trailing CR/LF/space/tab are
 * trimmed, and what is left must be non-empty printable ASCII without
 * spaces (it travels in an HTTP header). Never quotes the contents. 1, or 0
 * (an error was recorded). */
static int secret_take(struct load *load, const struct key_def *key, const char *path,
                       const char *text, size_t n, char *dst, size_t size)
{
        n = secret_file_trim(text, n);
        if (n == 0)
                return config_key_error(load, key, "%s is empty", path);
        if (n >= size)
                return config_key_error(load, key, "%s: secret longer than %zu bytes", path,
                                        size - 1);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)text[i];
                if (c < 0x21 || c > 0x7e)
                        return config_key_error(
                            load, key, "%s: secret must be printable ASCII without spaces", path);
        }
        memcpy(dst, text, n);
        dst[n] = '\0';
        return 1;
}

/* Reads a secret from path into dst[size]: secret_read_all's checks (a
 * regular file nobody but its owner may read), then secret_take's. Never
 * quotes the contents. 1, or 0 (an error was recorded). */
static int read_secret(struct load *load, const struct key_def *key, const char *path, char *dst,
                       size_t size)
{
        char *buf = NULL;
        size_t n = 0;
        int r;

        if (secret_read_all(load, key, path, &buf, &n) == 0)
                return 0;
        r = secret_take(load, key, path, buf, n, dst, size);
        secmem_free(buf); /* wipes */
        return r;
}

/* Secrets one a line from path (blank lines skipped) into dst[max][size],
 * *ret_count of them: at least one, at most max ("at most 4 tokens": `what`
 * names them). 1 or 0 (load's error). */
static int read_secret_lines(struct load *load, const struct key_def *key, const char *path,
                             const char *what, char *dst, size_t size, unsigned max,
                             unsigned *ret_count)
{
        char *buf = NULL;
        size_t n = 0, at = 0;
        unsigned count = 0;
        int r = 1;

        if (secret_read_all(load, key, path, &buf, &n) == 0)
                return 0;
        while (r && at < n) {
                size_t len = 0, end;

                while (at + len < n && buf[at + len] != '\n')
                        len++;
                end = secret_file_trim(buf + at, len);
                if (end > 0 && count >= max)
                        r = config_key_error(load, key, "%s: at most %u %s, one a line", path, max,
                                             what);
                else if (end > 0)
                        r = secret_take(load, key, path, buf + at, end, dst + size * count++, size);
                at += len + 1;
        }
        secmem_free(buf); /* wipes */
        if (r && count == 0)
                r = config_key_error(load, key, "%s is empty", path);
        if (r)
                *ret_count = count;
        return r;
}

/* api.token_file: one token a line (blank lines skipped), at most
 * TG_API_TOKENS_MAX; every one is accepted, the first is the one the CLI
 * sends. Two lines are how a token is rotated without a refused request:
 * add the new one, reload, move the clients, drop the old one, reload. */
int config_set_token_file(struct load *load, const struct key_def *key, const char *value)
{
        struct tg_config *c = &load->config;
        char path[TG_PATH_MAX];
        int r;

        if (config_resolve_path(load, value, path, sizeof(path)) < 0)
                return config_key_error(load, key, "too long (at most %zu bytes)",
                                        sizeof(path) - 1);
        if (config_set_string_at(load, key, c->api_token_file, sizeof(c->api_token_file), path) ==
            0)
                return 0;
        c->api_token_count = 0;
        r = read_secret_lines(load, key, path, "tokens", c->api_tokens[0], sizeof(c->api_tokens[0]),
                              TG_API_TOKENS_MAX, &c->api_token_count);
        if (r)
                memcpy(c->api_token, c->api_tokens[0], sizeof(c->api_token));
        return r;
}

/* notify.secret_file: one secret, or two while one is rotated (the first
 * signs; deliveries carry a signature by each). */
int config_set_notify_secret_file(struct load *load, const struct key_def *key, const char *value)
{
        struct tg_config *c = &load->config;
        char path[TG_PATH_MAX];

        if (config_resolve_path(load, value, path, sizeof(path)) < 0)
                return config_key_error(load, key, "too long (at most %zu bytes)",
                                        sizeof(path) - 1);
        if (config_set_string_at(load, key, c->notify_secret_file, sizeof(c->notify_secret_file),
                                 path) == 0)
                return 0;
        c->notify_secret_count = 0;
        return read_secret_lines(load, key, path, "secrets", c->notify_secrets[0],
                                 sizeof(c->notify_secrets[0]), 2, &c->notify_secret_count);
}

int config_set_webhook_file(struct load *load, const struct key_def *key, const char *value)
{
        struct tg_config *c = &load->config;
        char path[TG_PATH_MAX];

        if (config_resolve_path(load, value, path, sizeof(path)) < 0)
                return config_key_error(load, key, "too long (at most %zu bytes)",
                                        sizeof(path) - 1);
        if (config_set_string_at(load, key, c->provider_webhook_secret_file,
                                 sizeof(c->provider_webhook_secret_file), path) == 0)
                return 0;
        return read_secret(load, key, path, c->provider_webhook_secret,
                           sizeof(c->provider_webhook_secret));
}

/* A secret file: readable and a valid secret now (it is read again when
 * the credentials are loaded; nothing of it is kept here). */
int config_set_secret_path(struct load *load, const struct key_def *key, const char *value)
{
        char secret[256], path[TG_PATH_MAX];
        int r;

        if (config_resolve_path(load, value, path, sizeof(path)) < 0)
                return config_key_error(load, key, "path too long");
        if (config_set_string_at(load, key, (char *)&load->config + key->offset, key->size, path) ==
            0)
                return 0;
        r = read_secret(load, key, path, secret, sizeof(secret));
        explicit_bzero(secret, sizeof(secret));
        return r;
}

int config_read_secret(const char *section, const char *name, const char *path, char *dst,
                       size_t size, char *err, size_t err_size)
{
        /* The one secret reader (read_secret), with a load of its own for
         * its message. */
        struct key_def key = {.section = section, .name = name, .type = KEY_CUSTOM};
        struct load *load = secmem_alloc(sizeof(*load));
        int r = 0;

        if (!load)
                return TG_ENOMEM;
        load->account = -1; /* the top level's rules, whichever account names it */
        if (read_secret(load, &key, path, dst, size) == 0) {
                if (err && err_size)
                        snprintf(err, err_size, "%s", load->err);
                r = TG_ECONFIG;
        }
        secmem_free(load); /* wipes */
        return r;
}

/* ---- other files ------------------------------------------------------------ */

/* api.credentials_file (daemon/credentials.h): hashes, not secrets, but a
 * file that names who may do what, so it must be its owner's alone, as a
 * secret file. Read again on SIGHUP: issuing, rotating and revoking take
 * effect without a restart. */
int config_set_credentials_file(struct load *load, const struct key_def *key, const char *value)
{
        struct tg_config *c = &load->config;
        char why[TG_PATH_MAX * 2 + 200] = "";
        char path[TG_PATH_MAX];
        char err[160];
        char *buf = NULL;
        size_t n = 0;
        int r;

        if (config_resolve_path(load, value, path, sizeof(path)) < 0)
                return config_key_error(load, key, "too long (at most %zu bytes)",
                                        sizeof(path) - 1);
        if (config_set_string_at(load, key, c->api_credentials_file,
                                 sizeof(c->api_credentials_file), path) == 0)
                return 0;
        if (path[0] == '\0')
                return config_key_error(load, key, "must name a file");
        r = secret_file_read(path, SECRET_CHECKS, CREDS_FILE_MAX, &buf, &n, why, sizeof(why));
        if (r == TG_EFULL)
                return config_key_error(load, key, "%s: larger than %d bytes", path,
                                        CREDS_FILE_MAX);
        if (r < 0)
                return config_key_error(load, key, "%s", why[0] ? why : tg_strerror(r));
        r = credentials_parse(buf, n, c->api_credentials, CREDENTIALS_MAX, &c->api_credential_count,
                              err, sizeof(err));
        secmem_free(buf); /* wipes */
        if (r < 0)
                return config_key_error(load, key, "%s: %s", path, err);
        return 1;
}

/* The console's users (daemon/ui_users.h): hashes of tokens, not secrets
 * themselves, but wiped all the same. */
int config_set_users_file(struct load *load, const struct key_def *key, const char *value)
{
        struct tg_config *c = &load->config;
        char err[160];
        char *buf;
        size_t n;
        FILE *f;
        int r;

        if (config_set_string_at(load, key, c->ui_users_file, sizeof(c->ui_users_file), value) == 0)
                return 0;
        if (value[0] == '\0')
                return config_key_error(load, key, "must name a file");
        f = fopen(value, "rb");
        if (!f)
                return config_key_error(load, key, "cannot read %s: %s", value, strerror(errno));
        buf = malloc(USERS_FILE_MAX + 1);
        if (!buf) {
                fclose(f);
                return config_key_error(load, key, "out of memory");
        }
        n = fread(buf, 1, USERS_FILE_MAX + 1, f);
        r = ferror(f) ? TG_EIO : 0;
        fclose(f);
        if (r == 0 && n > USERS_FILE_MAX)
                r = TG_EFULL;
        if (r == 0)
                r = ui_users_parse(buf, n, c->ui_users, UI_USERS_MAX, &c->ui_user_count, err,
                                   sizeof(err));
        explicit_bzero(buf, USERS_FILE_MAX + 1);
        free(buf);
        if (r == TG_EIO)
                return config_key_error(load, key, "cannot read %s", value);
        if (r == TG_EFULL && n > USERS_FILE_MAX)
                return config_key_error(load, key, "%s: larger than %d bytes", value,
                                        USERS_FILE_MAX);
        if (r < 0)
                return config_key_error(load, key, "%s: %s", value, err);
        return 1;
}

/* A file that must be readable now (it is read again at each use); a
 * relative path is the config file's folder's. */
int config_set_readable_file(struct load *load, const struct key_def *key, const char *value)
{
        char path[TG_PATH_MAX];
        FILE *f;

        if (value[0] == '\0')
                return config_key_error(load, key, "must name a file");
        if (config_resolve_path(load, value, path, sizeof(path)) < 0)
                return config_key_error(load, key, "path too long");
        f = fopen(path, "rb");
        if (!f)
                return config_key_error(load, key, "cannot read %s: %s", path, strerror(errno));
        fclose(f);
        return config_set_string_at(load, key, (char *)&load->config + key->offset, key->size,
                                    path);
}

/* The client certificate's private key: readable now, and open to nobody
 * but its owner. */
int config_set_client_key(struct load *load, const struct key_def *key, const char *value)
{
        char why[TG_PATH_MAX * 2 + 200] = "";
        const char *path = (char *)&load->config + key->offset;
        int r;

        if (config_set_readable_file(load, key, value) == 0)
                return 0;
        r = secret_file_check(path, SECRET_FILE_PRIVATE_KEY, why, sizeof(why));
        if (r < 0)
                return config_key_error(load, key, "%s", why[0] ? why : tg_strerror(r));
        return 1;
}
