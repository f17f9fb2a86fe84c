/* view_internal.h — what the view*.c files share (dfl__view_ prefix): the dumps as
 * opened (view.c), the byte-bounded LRU cache (view_cache.c), base grids and the
 * background builder (view_grid.c), tiles (view_tile.c) and the JSON answers
 * (view_json.c).
 *
 * Threads: requests arrive on the server's worker threads and run dfl_view_handle
 * concurrently; one background thread (dfl__view_builder) builds the full grids of
 * large maps. The locks:
 *   build_lock one base grid built at a time by request threads (no duplicate work);
 *              the only lock held while another is taken (dump_lock, c.lock);
 *   dump_lock  every HDF5 call (HDF5 is not thread-safe; chunks still decode on every core);
 *   c.lock     the cache's list and counters (short critical sections);
 *   job_lock   the builder's queue (job_cv wakes it), held alone.
 * Pooling, colouring and PNG encoding run outside dump_lock and c.lock. */
#ifndef DFL_VIEW_INTERNAL_H
#define DFL_VIEW_INTERNAL_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>

#include "dump/dump_sample.h"
#include "view/view.h"

/* Rows read per block while building a base grid: about this many cells. */
#define BLOCK_CELLS ((int64_t)1 << 22)
/* Maps with more than twice this many causal cells are previewed from about this many
 * while their full grid is built in the background. */
#define PREVIEW_CELLS ((int64_t)1 << 22)
#define MAX_JOBS      64

/* ------------------------------------------------------------------ cache */
/* One cached thing: a PNG (bytes) or a grid / sample record (obj, freed by drop).
 * refs > 0 while a request uses obj; an evicted entry in use is freed by the last
 * release. */
typedef struct dfl__view_entry {
    char key[192];
    unsigned char *png;
    size_t bytes;
    void *obj;
    void (*drop)(void *);
    int refs, evicted;
    uint64_t used; /* LRU stamp */
    struct dfl__view_entry *next;
} dfl__view_entry;

typedef struct dfl__view_cache {
    pthread_mutex_t lock;
    dfl__view_entry *head;
    size_t bytes, entries, budget;
    uint64_t clock, hits, misses;
} dfl__view_cache;

/* A copy of the cached PNG under key (caller frees; *len its size), or NULL. */
unsigned char *dfl__view_cache_get_png(dfl__view_cache *c, const char *key, size_t *len);
/* Cache a copy of png [len] under key (nothing happens when out of memory or present). */
void dfl__view_cache_put_png(dfl__view_cache *c, const char *key, const unsigned char *png, size_t len);
/* The cached object under key, referenced (dfl__view_cache_release), or NULL. */
dfl__view_entry *dfl__view_cache_ref(dfl__view_cache *c, const char *key);
/* Insert obj, which holds `bytes` of memory and is freed by drop, and return it
 * referenced; NULL (obj dropped) when out of memory. */
dfl__view_entry *dfl__view_cache_put_obj(dfl__view_cache *c, const char *key, void *obj, size_t bytes,
                                         void (*drop)(void *));
/* Make key the next entry to go (when unreferenced): a preview once its full grid is in. */
void dfl__view_cache_age(dfl__view_cache *c, const char *key);
/* Drop a reference from dfl__view_cache_ref or _put_obj; NULL ok. */
void dfl__view_cache_release(dfl__view_cache *c, dfl__view_entry *e);
/* Free every entry (at close, when no request runs). */
void dfl__view_cache_clear(dfl__view_cache *c);

/* ------------------------------------------------------------------ dumps */

/* What a sample of the viewer is: a text dump's sample; the image tower's maps of an
 * image sample (DiffCLIP, CLIP dumps: not causal, tokens the class token and the
 * patches); or the text tower's maps of one of its captions (text/NNN/). */
typedef enum dfl__view_kind { DFL__VIEW_TEXT = 0, DFL__VIEW_IMAGE, DFL__VIEW_CAPTION } dfl__view_kind;

typedef struct dfl__view_sample {
    dfl_view_sample_info info;
    dfl_dump_attn at; /* the maps' geometry and scales [Ls], [Hs], [R] */
    char group[48];   /* what attn/ is under: samples/NNNNNN, …/vision or …/text/NNN */
    char sgroup[24];  /* the dump's sample group, samples/NNNNNN */
    size_t di;        /* the dump's sample index */
    const char *id;   /* the dump's sample id, or label */
    char label[160];  /* caption samples: "id · caption i" */
    dfl__view_kind kind;
    int causal;          /* 0 for the image tower: every row sees every key */
    const float *lambda; /* [nlambda] λ per layer of the tower (the dump's), or NULL */
    int64_t nlambda;
    int64_t parent, caption; /* caption samples: the image sample's index here, the caption's */
} dfl__view_sample;

/* Keys stored row r of sample s sees: r's position + 1 (causal), or all T. */
static inline int64_t dfl__view_seen(const dfl__view_sample *s, int64_t r)
{
    return s->causal ? s->at.rows[r] + 1 : s->info.T;
}

typedef struct dfl__view_dump {
    dfl_dump_reader *r;
    char *model_type;
    char name[128];
    int64_t L, H;
    float *lambda;      /* [L] or NULL */
    float *text_lambda; /* [Lt] diffclip's text tower, or NULL */
    int64_t Lt;
    int image; /* a DiffCLIP or CLIP dump: image samples, each followed by its captions */
    dfl__view_sample *samples;
    size_t n;
} dfl__view_dump;

typedef struct dfl__view_job {
    dfl_view_request q;
    dfl_pool_mode mode;
} dfl__view_job;

struct dfl_view {
    dfl__view_dump d[DFL_VIEW_MAX_DUMPS];
    size_t nd;
    dfl_view_dump_info dinfo[DFL_VIEW_MAX_DUMPS];
    dfl_view_sample_info *sinfo[DFL_VIEW_MAX_DUMPS];
    dfl_view_catalog cat;
    pthread_mutex_t dump_lock;  /* every HDF5 call */
    pthread_mutex_t build_lock; /* one base grid built at a time (no duplicate work) */
    int64_t base_cells;
    dfl__view_cache c;
    /* the background builder's queue */
    pthread_t worker;
    int worker_started, stop;
    pthread_mutex_t job_lock;
    pthread_cond_t job_cv;
    dfl__view_job jobs[MAX_JOBS];
    int njobs;
};

/* The tokens, segments and token text of sample si of dump di (a dfl_dump_tokens in
 * (*out)->obj), loaded on first use; referenced: dfl__view_cache_release. */
dfl_status dfl__view_tokens_get(dfl_view *v, int64_t di, int64_t si, dfl__view_entry **out, dfl_error *err);

/* ------------------------------------------------------------- base grids */
/* The whole map pooled: v [gr][gc], pixel = 2^b × 2^b cells; NaN = no data. Robust
 * limits over it: q995 (of |v| when diverging) leaving out bos columns, min, max. */
typedef struct dfl__view_grid {
    int64_t b, gr, gc;
    float *v;
    int diverging;
    int complete; /* 0: a preview (build_preview) */
    double q995, lo, hi;
} dfl__view_grid;

/* The base level b of an R x T map: the least with both sides over 2^b at most base_cells. */
int64_t dfl__view_base_level(const dfl_view *v, int64_t R, int64_t T);
/* Rows [r0, r0+n) x keys [c0, c1) of the request's map (minus the other dump's when
 * asked; tmp is scratch of the same size) into out [n][c1-c0]. Takes the dump lock. */
dfl_status dfl__view_read_box(dfl_view *v, const dfl_view_request *q, int64_t r0, int64_t n, int64_t c0, int64_t c1,
                              float *out, float *tmp, dfl_error *err);
/* The base grid of a checked request, referenced (dfl__view_cache_release when done).
 * Small maps are pooled at once; a large one is previewed and its full grid handed to
 * the background builder (g->complete tells which one came back). */
dfl_status dfl__view_grid_get(dfl_view *v, const dfl_view_request *q, dfl_pool_mode mode, dfl__view_entry **out,
                              dfl_error *err);
/* The background builder's thread: full grids of large maps, oldest request first,
 * until v->stop. */
void *dfl__view_builder(void *arg);

/* ------------------------------------------------------------------ tiles */

/* The colour norm of a request's limits (symmetric when diverging). */
dfl_norm dfl__view_tile_norm(const dfl_view_request *q, int diverging);
/* A tile / a thumbnail as PNG (*png malloc'ed, caller frees); *complete = 0 when drawn
 * from a preview (not to be cached). */
dfl_status dfl__view_render_tile(dfl_view *v, const dfl_view_request *q, unsigned char **png, size_t *len,
                                 int *complete, dfl_error *err);
dfl_status dfl__view_render_thumb(dfl_view *v, const dfl_view_request *q, unsigned char **png, size_t *len,
                                  int *complete, dfl_error *err);

/* ------------------------------------------------------------------- JSON */

/* The answers of the JSON endpoints (docs/view.md); the caller owns the cJSON. */
cJSON *dfl__view_dumps_json(const dfl_view *v);
cJSON *dfl__view_colormap_json(dfl_cmap cm);
dfl_status dfl__view_ticks_json(const dfl_view_request *q, cJSON **out, dfl_error *err);
dfl_status dfl__view_sample_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err);
dfl_status dfl__view_cell_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err);
dfl_status dfl__view_row_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err);
dfl_status dfl__view_limits_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err);
/* An image sample's input image (image/input) as PNG (*png malloc'ed, caller frees). */
dfl_status dfl__view_render_image(dfl_view *v, const dfl_view_request *q, unsigned char **png, size_t *len,
                                  dfl_error *err);

#endif
