/*
 * csv — the in-place line splitter (see csv.h). Unquoting only shrinks a
 * field, so the write position never passes the read position and the line
 * is its own output.
 */
#include "core/csv.h"

#include "core/tg_error.h"

int csv_split(char *line, enum csv_quotes quotes, char **ret_fields, size_t max, size_t *ret_count)
{
        char *p = line;
        size_t n = 0;

        for (;;) {
                char *out = p;
                char sep;

                if (n >= max)
                        return TG_EPARSE;
                ret_fields[n++] = out;
                if (*p == '"') {
                        for (p++;; p++) {
                                if (*p == '\0')
                                        return TG_EPARSE; /* a quote left open */
                                if (*p == '"') {
                                        if (p[1] != '"') {
                                                p++;
                                                break;
                                        }
                                        p++; /* "" is one quote */
                                }
                                *out++ = *p;
                        }
                        if (*p != ',' && *p != '\0')
                                return TG_EPARSE; /* text after the closing quote */
                } else {
                        while (*p && *p != ',') {
                                if (*p == '"' && quotes == CSV_QUOTES_STRICT)
                                        return TG_EPARSE;
                                *out++ = *p++;
                        }
                }
                sep = *p; /* read before the NUL goes in: out may be p */
                *out = '\0';
                if (sep == '\0') {
                        *ret_count = n;
                        return 0;
                }
                p++;
        }
}
