/* view.h — the dump viewer: answers the requests of view_request.h from the dumps
 * named at open (read-only), and serves them over HTTP with libmicrohttpd.
 *
 * Tiles are rendered on demand. Each map (dump, sample, layer, head, map, minus, pool)
 * gets a base grid the first time it is shown: the whole map pooled in one pass to at
 * most base_cells a side (DFL_VIEW_BASE by default) (2^b × 2^b cells each); zoom levels z >= b are pooled
 * from it, levels z < b read only the dump chunks the tile covers. Masked (future)
 * cells are no data: pooled over the causal cells only, drawn grey. Base
 * grids and PNG tiles share one LRU cache with a byte budget, so the server's memory
 * stays bounded whatever the map size. HDF5 is not thread-safe: dump reads take one
 * lock (their chunks still decode on every core); rendering and encoding run in
 * parallel across requests. */
#ifndef DFL_VIEW_H
#define DFL_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "view/view_request.h"

#define DFL_VIEW_BASE 2048 /* cells per side of a base grid, at most */

typedef struct dfl_view dfl_view;

typedef struct dfl_view_params {
    const char *const *dumps; /* [ndumps] paths, 1 .. DFL_VIEW_MAX_DUMPS */
    size_t ndumps;
    size_t cache_bytes; /* budget of the tile and grid cache; default 256 MiB */
    int64_t base_cells; /* cells per side of a base grid, at most; 64 .. 8192, default
                           DFL_VIEW_BASE (smaller: less memory, more dump reads) */
} dfl_view_params;

dfl_view_params dfl_view_params_default(void);

/* Open every dump and list what it holds. Statuses of dfl_dump_open, DFL_ERR_USAGE
 * (no dumps, too many), DFL_ERR_FORMAT (a map whose scales do not fit it),
 * DFL_ERR_NOMEM. The caller owns *out: dfl_view_close (NULL ok). */
dfl_status dfl_view_open(const dfl_view_params *p, dfl_view **out, dfl_error *err);
void dfl_view_close(dfl_view *v);

/* What the dumps hold (owned by v). */
const dfl_view_catalog *dfl_view_catalog_of(const dfl_view *v);

/* An answer: HTTP status, content type, body [len] (malloc'ed and owned by the
 * response unless is_static). */
typedef struct dfl_view_response {
    int code;
    const char *type;
    unsigned char *body;
    size_t len;
    int is_static;
} dfl_view_response;

/* Answer one request (method, raw target with query). Never fails: errors become a
 * 4xx/5xx response whose JSON body is {"error": "..."}. Thread-safe. */
void dfl_view_handle(dfl_view *v, const char *method, const char *target, dfl_view_response *resp);
void dfl_view_response_free(dfl_view_response *r);

/* Cache use, for tests and the log: bytes held, entries, hits, misses. */
void dfl_view_cache_stats(dfl_view *v, size_t *bytes, size_t *entries, uint64_t *hits, uint64_t *misses);

/* ---------------------------------------------------------------- server */

typedef struct dfl_view_server dfl_view_server;

typedef struct dfl_view_server_params {
    const char *bind; /* address to listen on; default "127.0.0.1" */
    int port;         /* 0 = any free port */
    int allow_remote; /* required to bind an address that is not loopback */
    int threads;      /* worker threads; default 4 */
} dfl_view_server_params;

dfl_view_server_params dfl_view_server_params_default(void);

/* Start serving v (borrowed; it must outlive the server). *port_out gets the port
 * bound. DFL_ERR_USAGE (bad address, non-loopback without allow_remote), DFL_ERR_IO
 * (cannot bind). The caller owns *out: dfl_view_server_stop (NULL ok). */
dfl_status dfl_view_server_start(dfl_view *v, const dfl_view_server_params *p, dfl_view_server **out, int *port_out,
                                 dfl_error *err);
void dfl_view_server_stop(dfl_view_server *s);

/* The embedded page: asset i (0 index.html, 1 app.js, 2 app.css), its bytes and type. */
const unsigned char *dfl__view_asset(int i, size_t *len, const char **type);

#endif
