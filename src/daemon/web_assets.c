/*
 * web_assets — finding a file compiled in from web/ by name, and its
 * Content-Type (see the header). The files themselves are in the generated
 * web_assets_data.c. Pure lookups over constant data: no I/O.
 */
#include "daemon/web_assets.h"

#include <string.h>

const struct web_asset *web_asset_find(const char *name)
{
        for (size_t i = 0; i < web_asset_count; i++)
                if (strcmp(web_assets[i].name, name) == 0)
                        return &web_assets[i];
        return NULL;
}

const char *web_asset_type(const char *name)
{
        static const struct {
                const char *ext, *type;
        } types[] = {
            {".html", "text/html; charset=utf-8"},
            {".js", "text/javascript; charset=utf-8"},
            {".css", "text/css; charset=utf-8"},
            {".svg", "image/svg+xml"},
        };
        const char *dot = strrchr(name, '.');

        for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
                if (strcmp(dot, types[i].ext) == 0)
                        return types[i].type;
        return "application/octet-stream";
}
