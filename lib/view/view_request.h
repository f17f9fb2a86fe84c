/* view_request.h — the viewer's HTTP requests as data: parsing a request line's
 * method and target ("/api/tile?d=0&s=0&l=1&h=0&m=diff&z=2&x=0&y=1") into a
 * dfl_view_request, and checking it against a catalog of what the dumps hold.
 *
 * Both functions are pure (no I/O, no global state) so they can be fuzzed without a
 * server (fuzz/fuzz_view_request.c). Every failure carries the HTTP status to answer
 * with and a one-line message:
 *   400 a malformed, unknown, repeated or out-of-range parameter
 *   404 an unknown path, or a dump, sample, layer, head, map, row or tile not there
 *   405 a method other than GET or HEAD
 *   414 a target longer than DFL_VIEW_MAX_TARGET
 * No URL path ever names a file: paths select from a fixed table.
 *
 * Endpoints and their parameters (docs/view.md has the answers' shapes):
 *   /  /app.js  /app.css                           the page (embedded assets)
 *   /api/dumps                                     every dump, its samples and their sizes
 *   /api/sample    d s                             tokens, text, segments, λ, noise, outliers
 *   /api/limits    d s l h m [minus pool]          robust colour limits of one map
 *   /api/tile      d s l h m z x y vmin vmax [minus scale cmap pool rev]   a PNG tile
 *   /api/thumb     d s l h m [px minus cmap rev]   a small PNG of the whole map
 *   /api/cell      d s l h q k                     map1, map2, diff at (query q, key k), λ
 *   /api/row       d s l h m q [topk width minus]  top-k keys of query q, pooled row strip
 *   /api/colormap  [cmap]                          the 256 colours of a colormap
 *   /api/ticks     vmin vmax [scale div]           colour-bar ticks: values, labels, positions
 *   /api/image     d s                             an image sample's input image as PNG (DiffCLIP, CLIP)
 * d, minus: dump index (minus: subtract that dump's map, same sample); s: sample index;
 * l, h: layer and head numbers as captured (attn/layers, attn/heads); m: map1, map2,
 * diff; q: a query position among attn/rows; k: a key position; z: zoom level (a pixel
 * covers 2^z × 2^z cells), x, y: tile column and row (tiles of DFL_VIEW_TILE pixels);
 * rev: any number, ignored (the page changes it to refetch a tile drawn from a preview);
 * div: 1 for a diverging scale (symmetric around 0), 0 (default) for a sequential one.
 */
#ifndef DFL_VIEW_REQUEST_H
#define DFL_VIEW_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "render/render.h"

#define DFL_VIEW_MAX_TARGET 2048 /* bytes of path + query */
#define DFL_VIEW_TILE       256  /* pixels per tile side */
#define DFL_VIEW_MAX_TOPK   200
#define DFL_VIEW_MAX_WIDTH  4096 /* pooled row strip */
#define DFL_VIEW_MAX_DUMPS  16

typedef enum dfl_view_kind {
    DFL_VIEW_ASSET = 0,
    DFL_VIEW_DUMPS,
    DFL_VIEW_SAMPLE,
    DFL_VIEW_LIMITS,
    DFL_VIEW_TILE_REQ,
    DFL_VIEW_THUMB,
    DFL_VIEW_CELL,
    DFL_VIEW_ROW,
    DFL_VIEW_COLORMAP,
    DFL_VIEW_TICKS,
    DFL_VIEW_IMAGE
} dfl_view_kind;

typedef enum dfl_view_map { DFL_VIEW_MAP1 = 0, DFL_VIEW_MAP2, DFL_VIEW_DIFF, DFL_VIEW_NMAPS } dfl_view_map;

/* "map1", "map2", "diff" (the dataset names under attn/). */
const char *dfl_view_map_name(dfl_view_map m);

/* A parsed request. Absent numbers are -1; has_limits says vmin/vmax were given.
 * li, hi, ri are filled by dfl_view_request_check: the indices of l, h, q in the
 * sample's attn/layers, heads, rows. */
typedef struct dfl_view_request {
    dfl_view_kind kind;
    int head_only; /* HEAD: answer without a body */
    int asset;     /* DFL_VIEW_ASSET: 0 index.html, 1 app.js, 2 app.css */
    int64_t dump, sample, layer, head, minus;
    dfl_view_map map; /* default map1 */
    int has_map;
    int64_t z, x, y; /* tile */
    int64_t q, k;    /* cell, row */
    int64_t topk;    /* default 10 */
    int64_t width;   /* row strip, default 512 */
    int64_t px;      /* thumbnail size, default 96 */
    int has_limits;
    double vmin, vmax;
    int diverging;      /* div */
    dfl_scale scale;    /* default linear */
    dfl_cmap cmap;      /* default viridis */
    dfl_pool_mode pool; /* default mean */
    int64_t li, hi, ri; /* set by check */
} dfl_view_request;

/* Parse method ("GET", "HEAD") and target (path, optionally "?query"; percent-escapes
 * allowed in values) into *out. Returns 0 when it parsed, else the HTTP status (400,
 * 404, 405, 414) with err->msg saying why. Pure. */
int dfl_view_request_parse(const char *method, const char *target, dfl_view_request *out, dfl_error *err);

/* What one sample holds, as the checks need it: maps [Ls, Hs, R, T] with the scales
 * layers [Ls], heads [Hs], rows [R] (ascending query positions); maps bit i set when
 * dfl_view_map i is present; sig: a signature of tokens + rows (two samples may be
 * subtracted only when they agree). */
typedef struct dfl_view_sample_info {
    int64_t T, R, Ls, Hs;
    const int32_t *layers, *heads, *rows;
    unsigned maps;
    uint64_t sig;
    int image; /* the image tower's maps of an image sample (it has an input image) */
} dfl_view_sample_info;

typedef struct dfl_view_dump_info {
    size_t nsamples;
    const dfl_view_sample_info *samples;
} dfl_view_dump_info;

typedef struct dfl_view_catalog {
    size_t ndumps;
    const dfl_view_dump_info *dumps;
} dfl_view_catalog;

/* Zoom levels of a map: level z draws 2^z × 2^z cells per pixel; the last level shows
 * the whole map in one tile. Tiles at level z: *nx columns, *ny rows (may be NULL). */
int64_t dfl_view_zmax(int64_t R, int64_t T);
void dfl_view_tiles(int64_t R, int64_t T, int64_t z, int64_t *nx, int64_t *ny);

/* Check a parsed request against the catalog, filling li, hi, ri. Returns 0 when every
 * named thing exists (and fits: zoom level, tile, key < T, a `minus` dump whose sample
 * has the same tokens and rows), else 404 (or 400 for a missing parameter) with
 * err->msg naming what is missing and what is there. Pure. */
int dfl_view_request_check(const dfl_view_catalog *cat, dfl_view_request *req, dfl_error *err);

#endif
