/*
 * Texts for the project-wide error codes of tg_error.h, and for -errno.
 */
#include "core/tg_error.h"

#include <string.h>

const char *tg_strerror(int code)
{
        switch (code) {
#define TG_ERROR_CASE(name, value, text)                                                           \
        case name:                                                                                 \
                return text;
                TG_ERRORS(TG_ERROR_CASE)
#undef TG_ERROR_CASE
        case 0:
                return "success";
        default:
                break;
        }
        if (code < 0 && code > -1000)
                return strerror(-code);
        return "unknown error";
}
