/*
 * store_url — the url pieces the server backends share (store_url.h):
 * percent-decoding through core/encode.h, bounded copies, the password
 * file's first line and the database name's check.
 */
#include "store/store_url.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/encode.h"
#include "core/tg_error.h"

bool store_url_decode(char *text)
{
        size_t len = strlen(text);

        return encode_percent_decode(ENCODE_PATH_SEGMENT, text, len, text, len + 1, NULL) == 0;
}

bool store_url_copy(char *dst, size_t size, const char *from, size_t len)
{
        if (len >= size)
                return false;
        memcpy(dst, from, len);
        dst[len] = '\0';
        return true;
}

int store_url_read_password(const char *path, char *dst, size_t size)
{
        FILE *f = fopen(path, "re");
        size_t n;

        if (!f)
                return TG_EIO;
        if (!fgets(dst, (int)size, f)) {
                fclose(f);
                dst[0] = '\0';
                return TG_EINVAL;
        }
        fclose(f);
        n = strcspn(dst, "\r\n");
        dst[n] = '\0';
        return 0;
}

bool store_url_name_ok(const char *name, size_t max)
{
        size_t n = strlen(name);

        if (n == 0 || n > max)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)name[i]) && name[i] != '_')
                        return false;
        return true;
}
