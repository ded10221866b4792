/*
 * secret_file — reading a secret's file with its permission check. See
 * secret_file.h.
 *
 * Invariants: every check is made on the descriptor that is then read (no
 * window between a stat() and an open() for the file to be swapped); a
 * buffer that held any of the file is wiped before it is given back
 * (secmem_free); messages name the path and never quote the contents.
 */
#include "platform/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/tg_error.h"
#include "platform/secmem.h"

/* "cannot read PATH: WHY" into err; returns code. */
static int cannot_read(char *err, size_t err_size, int code, const char *path, const char *why)
{
        if (err && err_size)
                snprintf(err, err_size, "cannot read %s: %s", path, why);
        return code;
}

/* The message for a file open to group or others: the fix, with the mode
 * that needs it. */
static int private_error(const char *path, mode_t mode, unsigned flags, char *err, size_t err_size)
{
        unsigned m = (unsigned)(mode & 07777);

        if (!err || !err_size)
                return TG_ECONFIG;
        if (flags & SECRET_FILE_PRIVATE_KEY)
                snprintf(err, err_size,
                         "%s is open to group or others (mode %04o): a private key must be "
                         "readable by its owner only; run chmod 600 %s",
                         path, m, path);
        else
                snprintf(err, err_size,
                         "%s holds a secret but group or others may read or write it "
                         "(mode %04o): run chmod 600 %s (the file owned by the user "
                         "tollgate runs as)",
                         path, m, path);
        return TG_ECONFIG;
}

/* Opens path and checks the open file by flags. The descriptor, or a code
 * (err filled). */
static int open_checked(const char *path, unsigned flags, char *err, size_t err_size)
{
        struct stat st;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        int e;

        if (fd < 0) {
                e = errno;
                return cannot_read(err, err_size, -e, path, strerror(e));
        }
        if (!(flags & (SECRET_FILE_REGULAR | SECRET_FILE_PRIVATE | SECRET_FILE_PRIVATE_KEY)))
                return fd;
        if (fstat(fd, &st) != 0) {
                e = errno;
                close(fd);
                return cannot_read(err, err_size, -e, path, strerror(e));
        }
        if ((flags & SECRET_FILE_REGULAR) && !S_ISREG(st.st_mode)) {
                close(fd);
                return cannot_read(err, err_size, TG_EINVAL, path, "not a regular file");
        }
        if ((flags & (SECRET_FILE_PRIVATE | SECRET_FILE_PRIVATE_KEY)) &&
            (st.st_mode & (S_IRWXG | S_IRWXO))) {
                close(fd);
                return private_error(path, st.st_mode, flags, err, err_size);
        }
        return fd;
}

int secret_file_check(const char *path, unsigned flags, char *err, size_t err_size)
{
        int fd;

        if (!path)
                return TG_EINVAL;
        fd = open_checked(path, flags, err, err_size);
        if (fd < 0)
                return fd;
        close(fd);
        return 0;
}

int secret_file_read(const char *path, unsigned flags, size_t max, char **ret_data, size_t *ret_len,
                     char *err, size_t err_size)
{
        char *buf;
        size_t n = 0;
        int fd;

        if (!path || max == 0 || max >= (size_t)-1 / 2 || !ret_data || !ret_len)
                return TG_EINVAL;
        fd = open_checked(path, flags, err, err_size);
        if (fd < 0)
                return fd;
        buf = secmem_alloc(max + 1);
        if (!buf) {
                close(fd);
                return TG_ENOMEM;
        }
        /* One byte past the bound tells a file of max bytes from a longer one. */
        while (n <= max) {
                ssize_t got = read(fd, buf + n, max + 1 - n);
                if (got == 0)
                        break;
                if (got < 0) {
                        int e = errno;
                        if (e == EINTR)
                                continue;
                        close(fd);
                        secmem_free(buf);
                        return cannot_read(err, err_size, -e, path, strerror(e));
                }
                n += (size_t)got;
        }
        close(fd);
        if (n > max) {
                secmem_free(buf);
                if (err && err_size)
                        snprintf(err, err_size, "%s: larger than %zu bytes", path, max);
                return TG_EFULL;
        }
        buf[n] = '\0';
        *ret_data = buf;
        *ret_len = n;
        return 0;
}

size_t secret_file_trim(const char *text, size_t len)
{
        while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ' ||
                           text[len - 1] == '\t'))
                len--;
        return len;
}
