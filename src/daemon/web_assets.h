/*
 * web_assets — the console's files (HTML, scripts, styles, uPlot), compiled
 * into the binary at build time from web/ by cmake/embed_assets.cmake. The
 * console (ui.c) serves them and `tollgate report --from` writes them into
 * its page, so they live below both. A build configured with
 * -DTG_CONSOLE=OFF has none (web_asset_count == 0): the console answers
 * that it was not built, and the report's --from page is refused.
 */
#ifndef TG_WEB_ASSETS_H
#define TG_WEB_ASSETS_H

#include <stddef.h>

struct web_asset {
        const char *name;          /* "app.js", "uPlot.iife.min.js", ... */
        const unsigned char *data; /* len bytes, then a NUL */
        size_t len;
};

extern const struct web_asset web_assets[];
extern const size_t web_asset_count;

/* The asset of this name, or NULL. */
const struct web_asset *web_asset_find(const char *name);
/* Its Content-Type, from the name's extension. */
const char *web_asset_type(const char *name);

#endif
