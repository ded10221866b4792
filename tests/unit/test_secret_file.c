/*
 * Unit tests for src/platform/secret_file.c: a file is read whole and
 * NUL-terminated up to its bound and refused past it; the permission and
 * regular-file checks refuse with their codes and a message naming the fix
 * (never the contents); a missing file is -errno; trimming takes only the
 * trailing CR, LF, spaces and tabs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "core/tg_error.h"
#include "platform/secmem.h"
#include "platform/secret_file.h"

static char dir[64];
static char path[128];

static int setup(void **state)
{
        (void)state;
        snprintf(dir, sizeof(dir), "/tmp/tg-test-secret-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        snprintf(path, sizeof(path), "%s/secret", dir);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        unlink(path);
        rmdir(dir);
        return 0;
}

static void write_secret(const char *text, mode_t mode)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
        assert_int_equal(chmod(path, mode), 0);
}

static void test_read(void **state)
{
        char err[512] = "";
        char *data = NULL;
        size_t len = 0;
        (void)state;

        write_secret("s3cret\n", 0600);
        assert_int_equal(secret_file_read(path, SECRET_FILE_REGULAR | SECRET_FILE_PRIVATE, 7, &data,
                                          &len, err, sizeof(err)),
                         0);
        assert_int_equal(len, 7);
        assert_string_equal(data, "s3cret\n");
        secmem_free(data);
        /* one byte over the bound */
        data = NULL;
        assert_int_equal(secret_file_read(path, 0, 6, &data, &len, err, sizeof(err)), TG_EFULL);
        assert_null(data);
        assert_non_null(strstr(err, "larger than 6 bytes"));
        /* empty is the caller's to judge */
        write_secret("", 0600);
        assert_int_equal(secret_file_read(path, 0, 16, &data, &len, err, sizeof(err)), 0);
        assert_int_equal(len, 0);
        assert_string_equal(data, "");
        secmem_free(data);
}

static void test_refusals(void **state)
{
        static const mode_t open_modes[] = {0644, 0640, 0604, 0660, 0620, 0602};
        char err[512], text[256];
        char *data = NULL;
        size_t len = 0;
        (void)state;

        for (size_t i = 0; i < sizeof(open_modes) / sizeof(open_modes[0]); i++) {
                write_secret("hush\n", open_modes[i]);
                assert_int_equal(secret_file_check(path, SECRET_FILE_PRIVATE, err, sizeof(err)),
                                 TG_ECONFIG);
                snprintf(text, sizeof(text), "(mode %04o): run chmod 600 %s",
                         (unsigned)open_modes[i], path);
                CHECK(strstr(err, text) != NULL, "mode %o: %s", (unsigned)open_modes[i], err);
                assert_null(strstr(err, "hush"));
                assert_int_equal(secret_file_read(path, SECRET_FILE_PRIVATE_KEY, 64, &data, &len,
                                                  err, sizeof(err)),
                                 TG_ECONFIG);
                assert_null(data);
                assert_non_null(strstr(err, "a private key must be readable by its owner only"));
                /* without the flag, the mode is not this reader's business */
                assert_int_equal(secret_file_check(path, 0, err, sizeof(err)), 0);
        }
        write_secret("hush\n", 0400);
        assert_int_equal(secret_file_check(path, SECRET_FILE_PRIVATE, err, sizeof(err)), 0);
        assert_int_equal(chmod(path, 0600), 0);

        assert_int_equal(secret_file_check(dir, SECRET_FILE_REGULAR, err, sizeof(err)), TG_EINVAL);
        snprintf(text, sizeof(text), "cannot read %s: not a regular file", dir);
        assert_string_equal(err, text);

        snprintf(text, sizeof(text), "%s/missing", dir);
        assert_int_equal(secret_file_read(text, 0, 64, &data, &len, err, sizeof(err)), -ENOENT);
        assert_null(data);
        assert_non_null(strstr(err, "cannot read "));
        assert_int_equal(secret_file_read(path, 0, 0, &data, &len, err, sizeof(err)), TG_EINVAL);
}

static void test_trim(void **state)
{
        (void)state;
        assert_int_equal(secret_file_trim("tok\r\n \t\n", 8), 3);
        assert_int_equal(secret_file_trim("a b", 3), 3);
        assert_int_equal(secret_file_trim(" \n", 2), 0);
        assert_int_equal(secret_file_trim("", 0), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_read),
            cmocka_unit_test(test_refusals),
            cmocka_unit_test(test_trim),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
