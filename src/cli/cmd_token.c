/*
 * cmd_token — `tollgate token add|list|revoke`: the named API credentials of
 * api.credentials_file (daemon/credentials.h). add makes a random secret,
 * writes only its salted hash and prints the secret once; revoke marks the
 * line `revoked` (the line stays: its secret is then refused as revoked,
 * and the name is never handed out again); list prints names, scopes and
 * whether each is revoked, never a hash.
 *
 * The file is rewritten whole through a new file (mode 0600) renamed over
 * the old one, so a crash leaves the old file or the new one, never half of
 * one; every line it had (comments too) is kept as it was. A running daemon
 * takes the change on SIGHUP.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "core/tg_error.h"
#include "daemon/credentials.h"
#include "platform/options.h"
#include "platform/secmem.h"
#include "platform/secret_file.h"

#define FILE_MAX (32 * 1024) /* as the config reads it */

static const char token_about[] =
    "Named API credentials with scopes, in the file api.credentials_file names: add one "
    "(its secret is printed once, only a salted hash is written), list them, revoke one. A "
    "running daemon takes a change on SIGHUP (systemctl reload tollgate).";

static const char token_epilogue[] =
    "Subcommands:\n"
    "  add NAME --scopes S     a new credential; S: a comma-separated set of intake,\n"
    "                          read, operator, admin (or all). The secret goes to\n"
    "                          stdout, alone on its line: hand it over now, it is\n"
    "                          never shown again\n"
    "  list                    name, scopes and state of every credential\n"
    "  revoke NAME             refuse its secret from the next reload on (403\n"
    "                          credential_revoked); the name stays taken\n"
    "\n"
    "Rotating a credential: add a new one (NAME-2), move the client to it,\n"
    "reload, then revoke the old one and reload.\n"
    "\n"
    "Exit status: 0 done, 1 failed (cannot read or write the file), 2 usage error\n"
    "(a bad name or scope, a name taken or unknown).\n";

static struct token_flags {
        const char *config, *file, *scopes;
} flags;

static const struct opt token_options[] = {
    {.name = "file",
     .short_name = 'f',
     .arg = "PATH",
     .string = &flags.file,
     .help = "the credentials file (add creates it when missing)"},
    {.name = "config",
     .short_name = 'c',
     .arg = "FILE",
     .string = &flags.config,
     .help = "or: the config whose api.credentials_file to use"},
    {.name = "scopes",
     .arg = "S",
     .string = &flags.scopes,
     .help = "add: intake, read, operator, admin, comma-separated, or all"},
};

static const struct options_spec token_spec = {.prog = "tollgate token",
                                               .synopsis = "<add|list|revoke> [NAME]",
                                               .description = token_about,
                                               .opts = token_options,
                                               .nopts =
                                                   sizeof(token_options) / sizeof(token_options[0]),
                                               .max_args = 2,
                                               .epilogue = token_epilogue};

/* The file's text into secret memory (*ret_text, secmem_free() it); a
 * missing file is empty when missing_ok. */
static int read_text(const char *path, bool missing_ok, char **ret_text, size_t *ret_len)
{
        char why[512] = "";
        int r;

        if (missing_ok && access(path, F_OK) != 0 && errno == ENOENT) {
                *ret_text = secmem_alloc(1);
                *ret_len = 0;
                return *ret_text ? 0 : TG_ENOMEM;
        }
        r = secret_file_read(path, SECRET_FILE_REGULAR | SECRET_FILE_PRIVATE, FILE_MAX, ret_text,
                             ret_len, why, sizeof(why));
        if (r < 0)
                fprintf(stderr, "tollgate token: %s\n",
                        r == TG_EFULL ? "the file is too large"
                        : why[0]      ? why
                                      : tg_strerror(r));
        return r < 0 ? TG_EIO : 0;
}

static int write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return TG_EIO;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

/* Replaces path with parts[0] then parts[1] (either may be NULL): a new
 * file, synced, renamed over it, the folder synced. */
static int write_text(const char *path, const char *a, size_t alen, const char *b, size_t blen)
{
        char tmp[4096 + 32], dir[4096];
        int fd, r;

        if (snprintf(tmp, sizeof(tmp), "%s.new-%ld", path, (long)getpid()) >= (int)sizeof(tmp) ||
            snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
                return TG_EFULL;
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
                fprintf(stderr, "tollgate token: cannot write %s: %s\n", tmp, strerror(errno));
                return TG_EIO;
        }
        r = write_all(fd, a, alen);
        if (r == 0)
                r = write_all(fd, b, blen);
        if (r == 0 && fsync(fd) != 0)
                r = TG_EIO;
        if (close(fd) != 0)
                r = TG_EIO;
        if (r == 0 && rename(tmp, path) != 0)
                r = TG_EIO;
        if (r < 0) {
                fprintf(stderr, "tollgate token: cannot write %s: %s\n", path, strerror(errno));
                unlink(tmp);
                return r;
        }
        fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
                (void)fsync(fd); /* the rename itself durable */
                close(fd);
        }
        return 0;
}

static int parse(const char *path, const char *text, size_t len, struct credential *creds,
                 unsigned *ret_count)
{
        char err[160];

        if (credentials_parse(text, len, creds, CREDENTIALS_MAX, ret_count, err, sizeof(err)) == 0)
                return 0;
        fprintf(stderr, "tollgate token: %s: %s\n", path, err);
        return TG_EIO;
}

static int find(const struct credential *creds, unsigned n, const char *name)
{
        for (unsigned i = 0; i < n; i++)
                if (strcmp(creds[i].name, name) == 0)
                        return (int)i;
        return -1;
}

static int do_add(const char *path, const char *name, const char *text, size_t len,
                  const struct credential *creds, unsigned n)
{
        static const char head[] = "# tollgate API credentials (api.credentials_file): NAME SCOPES "
                                   "hmac-sha256:SALT:DIGEST [revoked]\n";
        char secret[CREDENTIAL_SECRET_LEN + 1];
        char line[sizeof(head) + CREDENTIAL_LINE_MAX];
        struct credential c;
        unsigned scopes = 0;
        size_t at = 0;
        int r;

        if (!flags.scopes ||
            credential_scopes_parse(flags.scopes, strlen(flags.scopes), &scopes) < 0) {
                fprintf(stderr, "tollgate token add: --scopes must be a comma-separated set of "
                                "intake, read, operator, admin, or all\n");
                return TG_EINVAL;
        }
        if (find(creds, n, name) >= 0) {
                fprintf(stderr,
                        "tollgate token add: the name '%s' is taken (revoked names stay "
                        "taken)\n",
                        name);
                return TG_EINVAL;
        }
        if (n >= CREDENTIALS_MAX) {
                fprintf(stderr, "tollgate token add: the file holds %d credentials already\n",
                        CREDENTIALS_MAX);
                return TG_EINVAL;
        }
        r = credential_new(name, scopes, &c, secret);
        if (r < 0) {
                fprintf(stderr, "tollgate token add: %s\n",
                        r == TG_EINVAL ? "a name is 1-64 of A-Z a-z 0-9 . _ @ -"
                                       : "no random bytes from the system");
                return r == TG_EINVAL ? r : TG_EIO;
        }
        if (len == 0)
                at = (size_t)snprintf(line, sizeof(line), "%s", head);
        else if (text[len - 1] != '\n')
                line[at++] = '\n';
        r = credential_format(&c, line + at, sizeof(line) - at);
        if (r == 0)
                r = write_text(path, text, len, line, strlen(line));
        if (r == 0) {
                printf("%s\n", secret);
                fflush(stdout);
                fprintf(stderr,
                        "tollgate token: added '%s' to %s; the secret above is shown once. "
                        "Reload the daemon (SIGHUP) to take it in.\n",
                        name, path);
        }
        explicit_bzero(secret, sizeof(secret));
        return r;
}

/* The line of text whose first field is name gets " revoked" at its end. */
static int do_revoke(const char *path, const char *name, const char *text, size_t len,
                     const struct credential *creds, unsigned n)
{
        static const char mark[] = " revoked";
        int i = find(creds, n, name);
        size_t at = 0, nlen = strlen(name);

        if (i < 0 || creds[i].revoked) {
                fprintf(stderr, "tollgate token revoke: %s '%s' in %s\n",
                        i < 0 ? "no credential" : "already revoked:", name, path);
                return TG_EINVAL;
        }
        while (at < len) {
                const char *line = text + at;
                const char *nl = memchr(line, '\n', len - at);
                size_t end = nl ? (size_t)(nl - line) : len - at, first = 0;

                while (first < end && (line[first] == ' ' || line[first] == '\t'))
                        first++;
                if (end - first > nlen && memcmp(line + first, name, nlen) == 0 &&
                    (line[first + nlen] == ' ' || line[first + nlen] == '\t')) {
                        size_t cut = at + end;
                        char *out = secmem_alloc(len + sizeof(mark));
                        int r;

                        if (cut > at && text[cut - 1] == '\r')
                                cut--;
                        if (!out)
                                return TG_ENOMEM;
                        memcpy(out, text, cut);
                        memcpy(out + cut, mark, sizeof(mark) - 1);
                        memcpy(out + cut + sizeof(mark) - 1, text + cut, len - cut);
                        r = write_text(path, out, len + sizeof(mark) - 1, NULL, 0);
                        secmem_free(out);
                        if (r == 0)
                                fprintf(stderr,
                                        "tollgate token: revoked '%s' in %s. Reload the daemon "
                                        "(SIGHUP) to refuse it.\n",
                                        name, path);
                        return r;
                }
                at += end + 1;
        }
        return TG_EIO; /* parsed but not found: cannot be */
}

static int do_list(const struct credential *creds, unsigned n)
{
        char scopes[64];

        printf("%-24s %-28s %s\n", "NAME", "SCOPES", "STATE");
        for (unsigned i = 0; i < n; i++) {
                (void)credential_scopes_format(creds[i].scopes, scopes, sizeof(scopes));
                printf("%-24s %-28s %s\n", creds[i].name, scopes,
                       creds[i].revoked ? "revoked" : "active");
        }
        return fflush(stdout) == 0 ? 0 : TG_EIO;
}

/* The file: --file, or the config's api.credentials_file. */
static int file_path(char *buf, size_t size)
{
        struct tg_config *cfg;
        int r;

        if ((flags.file != NULL) == (flags.config != NULL)) {
                fprintf(stderr, "tollgate token: give --file PATH or --config FILE (one)\n");
                return TG_EINVAL;
        }
        if (flags.file) {
                snprintf(buf, size, "%s", flags.file);
                return 0;
        }
        cfg = malloc(sizeof(*cfg));
        if (!cfg)
                return TG_ENOMEM;
        r = cli_load_config("token", flags.config, cfg);
        if (r == 0 && cfg->api_credentials_file[0] == '\0') {
                fprintf(stderr, "tollgate token: %s sets no api.credentials_file\n", flags.config);
                r = TG_ECONFIG;
        }
        if (r == 0)
                snprintf(buf, size, "%s", cfg->api_credentials_file);
        config_release(cfg);
        explicit_bzero(cfg, sizeof(*cfg));
        free(cfg);
        return r;
}

int cmd_token(int argc, char **argv)
{
        const char *args[2] = {NULL, NULL};
        struct credential *creds = NULL;
        char path[4096];
        char *text = NULL;
        size_t nargs = 0, len = 0;
        unsigned n = 0;
        bool add, list, revoke;
        int r;

        flags = (struct token_flags){0};
        r = options_parse(&token_spec, argc, argv, args, &nargs);
        if (r)
                return options_exit_status(r);
        add = nargs > 0 && strcmp(args[0], "add") == 0;
        list = nargs > 0 && strcmp(args[0], "list") == 0;
        revoke = nargs > 0 && strcmp(args[0], "revoke") == 0;
        if (!add && !list && !revoke) {
                fprintf(stderr, "tollgate token: a subcommand is required: add, list, revoke "
                                "(try --help)\n");
                return 2;
        }
        if (list ? nargs != 1 : nargs != 2) {
                fprintf(stderr, "tollgate token %s: %s\n", args[0],
                        list ? "takes no NAME" : "a NAME is required");
                return 2;
        }
        if (!add && flags.scopes) {
                fprintf(stderr, "tollgate token %s: --scopes is for add\n", args[0]);
                return 2;
        }
        r = file_path(path, sizeof(path));
        if (r == 0)
                r = read_text(path, add, &text, &len);
        creds = r == 0 ? calloc(CREDENTIALS_MAX, sizeof(*creds)) : NULL;
        if (r == 0 && !creds)
                r = TG_ENOMEM;
        if (r == 0)
                r = parse(path, text, len, creds, &n);
        if (r == 0 && add)
                r = do_add(path, args[1], text, len, creds, n);
        else if (r == 0 && revoke)
                r = do_revoke(path, args[1], text, len, creds, n);
        else if (r == 0)
                r = do_list(creds, n);
        free(creds);
        secmem_free(text);
        return options_exit_status(r);
}
