/*
 * ui_assets — the console's files (HTML, scripts, styles, uPlot), compiled
 * into the binary at build time from web/ by cmake/embed_assets.cmake. A
 * build configured with -DTG_CONSOLE=OFF has none (ui_asset_count == 0) and
 * the console answers that it was not built.
 */
#ifndef TG_UI_ASSETS_H
#define TG_UI_ASSETS_H

#include <stddef.h>

struct ui_asset {
        const char *name;          /* "app.js", "uPlot.iife.min.js", ... */
        const unsigned char *data; /* len bytes, then a NUL */
        size_t len;
};

extern const struct ui_asset ui_assets[];
extern const size_t ui_asset_count;

/* The asset of this name, or NULL. */
const struct ui_asset *ui_asset_find(const char *name);
/* Its Content-Type, from the name's extension. */
const char *ui_asset_type(const char *name);

#endif
