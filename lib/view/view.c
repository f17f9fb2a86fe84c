/* view.c — answering the viewer's requests from the dumps: the catalog, base grids,
 * tiles, thumbnails, cells, rows and the JSON of a sample, with one byte-bounded LRU
 * cache. The HTTP side is view_server.c. */
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_sample.h"
#include "view/view.h"

/* Masked pixels: attnmap's no-data grey, without its hatch, which would scale with
 * the zoom into a checkerboard. */
static const dfl_rgb NODATA = {200, 200, 200};
/* Rows read per block while building a base grid: about this many cells. */
#define BLOCK_CELLS ((int64_t)1 << 22)
/* Maps with more than twice this many causal cells are previewed from about this many
 * while their full grid is built in the background. */
#define PREVIEW_CELLS ((int64_t)1 << 22)
#define MAX_JOBS 64

/* ------------------------------------------------------------------ cache */

/* One cached thing: a PNG (bytes) or a grid / sample record (obj, freed by drop).
 * refs > 0 while a request uses obj; an evicted entry in use is freed by the last
 * release. */
typedef struct entry {
    char key[192];
    unsigned char *png;
    size_t bytes;
    void *obj;
    void (*drop)(void *);
    int refs, evicted;
    uint64_t used; /* LRU stamp */
    struct entry *next;
} entry;

typedef struct cache {
    pthread_mutex_t lock;
    entry *head;
    size_t bytes, entries, budget;
    uint64_t clock, hits, misses;
} cache;

static void entry_free(entry *e)
{
    if (e->drop) e->drop(e->obj);
    free(e->png);
    free(e);
}

/* Evict least-recently-used unreferenced entries until the budget holds. Lock held. */
static void cache_trim(cache *c)
{
    while (c->bytes > c->budget) {
        entry **victim = NULL;
        for (entry **p = &c->head; *p; p = &(*p)->next)
            if ((*p)->refs == 0 && (!victim || (*p)->used < (*victim)->used)) victim = p;
        if (!victim) break;
        entry *e = *victim;
        *victim = e->next;
        c->bytes -= e->bytes;
        c->entries--;
        entry_free(e);
    }
}

static entry *find_locked(cache *c, const char *key)
{
    for (entry *e = c->head; e; e = e->next)
        if (!strcmp(e->key, key)) return e;
    return NULL;
}

/* A copy of a cached PNG (caller frees), or NULL. */
static unsigned char *cache_get_png(cache *c, const char *key, size_t *len)
{
    unsigned char *out = NULL;
    pthread_mutex_lock(&c->lock);
    entry *e = find_locked(c, key);
    if (e && e->png && (out = malloc(e->bytes))) {
        memcpy(out, e->png, e->bytes);
        *len = e->bytes;
        e->used = ++c->clock;
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->lock);
    return out;
}

static void cache_put_png(cache *c, const char *key, const unsigned char *png, size_t len)
{
    entry *e = calloc(1, sizeof *e);
    if (!e || !(e->png = malloc(len))) {
        free(e);
        return; /* not caching is always allowed */
    }
    memcpy(e->png, png, len);
    e->bytes = len;
    snprintf(e->key, sizeof e->key, "%s", key);
    pthread_mutex_lock(&c->lock);
    if (find_locked(c, key)) {
        pthread_mutex_unlock(&c->lock);
        entry_free(e);
        return;
    }
    e->used = ++c->clock;
    e->next = c->head;
    c->head = e;
    c->bytes += len;
    c->entries++;
    cache_trim(c);
    pthread_mutex_unlock(&c->lock);
}

/* Take a reference to a cached object, or NULL. */
static entry *cache_ref(cache *c, const char *key)
{
    pthread_mutex_lock(&c->lock);
    entry *e = find_locked(c, key);
    if (e && e->obj) {
        e->refs++;
        e->used = ++c->clock;
        c->hits++;
    } else {
        e = NULL;
        c->misses++;
    }
    pthread_mutex_unlock(&c->lock);
    return e;
}

/* Insert obj (bytes of memory) and return it referenced; on failure drop obj, NULL. */
static entry *cache_put_obj(cache *c, const char *key, void *obj, size_t bytes, void (*drop)(void *))
{
    entry *e = calloc(1, sizeof *e);
    if (!e) {
        drop(obj);
        return NULL;
    }
    snprintf(e->key, sizeof e->key, "%s", key);
    e->obj = obj;
    e->drop = drop;
    e->bytes = bytes;
    e->refs = 1;
    pthread_mutex_lock(&c->lock);
    e->used = ++c->clock;
    e->next = c->head;
    c->head = e;
    c->bytes += bytes;
    c->entries++;
    cache_trim(c);
    pthread_mutex_unlock(&c->lock);
    return e;
}

/* Make key the next entry to go (when unreferenced): a preview once its full grid is in. */
static void cache_age(cache *c, const char *key)
{
    pthread_mutex_lock(&c->lock);
    entry *e = find_locked(c, key);
    if (e) e->used = 0;
    pthread_mutex_unlock(&c->lock);
}

static void cache_release(cache *c, entry *e)
{
    if (!e) return;
    pthread_mutex_lock(&c->lock);
    e->refs--;
    cache_trim(c);
    pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------------ model */

typedef struct vsample {
    dfl_view_sample_info info;
    dfl_dump_attn at; /* the maps' geometry and scales [Ls], [Hs], [R] */
    char group[32];
    const char *id;
} vsample;

typedef struct vdump {
    dfl_dump_reader *r;
    char *model_type;
    char name[128];
    int64_t L, H;
    float *lambda; /* [L] or NULL */
    vsample *samples;
    size_t n;
} vdump;

typedef struct job {
    dfl_view_request q;
    dfl_pool_mode mode;
} job;

struct dfl_view {
    vdump d[DFL_VIEW_MAX_DUMPS];
    size_t nd;
    dfl_view_dump_info dinfo[DFL_VIEW_MAX_DUMPS];
    dfl_view_sample_info *sinfo[DFL_VIEW_MAX_DUMPS];
    dfl_view_catalog cat;
    pthread_mutex_t dump_lock;  /* every HDF5 call */
    pthread_mutex_t build_lock; /* one base grid built at a time (no duplicate work) */
    int64_t base_cells;
    cache c;
    /* the background builder's queue */
    pthread_t worker;
    int worker_started, stop;
    pthread_mutex_t job_lock;
    pthread_cond_t job_cv;
    job jobs[MAX_JOBS];
    int njobs;
};

static void *builder(void *arg);

dfl_view_params dfl_view_params_default(void)
{
    dfl_view_params p = {NULL, 0, (size_t)256 << 20, DFL_VIEW_BASE};
    return p;
}

const dfl_view_catalog *dfl_view_catalog_of(const dfl_view *v)
{
    return &v->cat;
}

void dfl_view_cache_stats(dfl_view *v, size_t *bytes, size_t *entries, uint64_t *hits, uint64_t *misses)
{
    pthread_mutex_lock(&v->c.lock);
    if (bytes) *bytes = v->c.bytes;
    if (entries) *entries = v->c.entries;
    if (hits) *hits = v->c.hits;
    if (misses) *misses = v->c.misses;
    pthread_mutex_unlock(&v->c.lock);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static dfl_status open_sample(vdump *d, vsample *s, const dfl_dump_sample *ds, dfl_error *err)
{
    snprintf(s->group, sizeof s->group, "%s", ds->group);
    s->id = ds->id;
    dfl_view_sample_info *in = &s->info;
    char p[96];
    snprintf(p, sizeof p, "%s/tokens", s->group);
    dfl_dump_dset_info ti;
    dfl_status st = dfl_dump_dataset_info(d->r, p, &ti, err);
    if (st) return st;
    in->T = ti.ndim == 1 ? ti.dims[0] : 0;
    int32_t *tok = NULL;
    size_t nt = 0;
    if ((st = dfl_dump_read_alloc(d->r, p, DFL_H5_I32, (void **)&tok, &nt, err))) return st;
    uint64_t h = fnv(1469598103934665603ull, tok, nt * sizeof *tok);
    free(tok);
    if ((st = dfl_dump_attn_open(d->r, ds, in->T, &s->at, err))) return st;
    in->maps = s->at.maps;
    in->Ls = s->at.Ls;
    in->Hs = s->at.Hs;
    in->R = s->at.R;
    if (in->maps) h = fnv(h, s->at.rows, (size_t)in->R * sizeof *s->at.rows);
    in->layers = s->at.layers;
    in->heads = s->at.heads;
    in->rows = s->at.rows;
    in->sig = h;
    return DFL_OK;
}

static dfl_status open_dump(vdump *d, const char *path, dfl_error *err)
{
    dfl_status st = dfl_dump_open(path, &d->r, err);
    if (st) return st;
    const char *base = strrchr(path, '/');
    snprintf(d->name, sizeof d->name, "%s", base ? base + 1 : path);
    if (dfl_dump_get_attr_str(d->r, "/", "model_type", &d->model_type, err)) d->model_type = strdup("?");
    if (dfl_dump_get_attr_i64(d->r, "/", "num_layers", &d->L, err)) d->L = 0;
    if (dfl_dump_get_attr_i64(d->r, "/", "num_heads", &d->H, err)) d->H = 0;
    if (dfl_dump_exists(d->r, "model/lambda")) {
        size_t n = 0;
        if ((st = dfl_dump_read_alloc(d->r, "model/lambda", DFL_H5_F32, (void **)&d->lambda, &n, err))) return st;
        if ((int64_t)n != d->L) {
            free(d->lambda);
            d->lambda = NULL;
        }
    }
    d->n = dfl_dump_sample_count(d->r);
    d->samples = dfl__calloc_array(d->n ? d->n : 1, sizeof *d->samples);
    if (!d->samples) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < d->n; i++)
        if ((st = open_sample(d, &d->samples[i], dfl_dump_sample_at(d->r, i), err))) return st;
    return DFL_OK;
}

void dfl_view_close(dfl_view *v)
{
    if (!v) return;
    if (v->worker_started) {
        pthread_mutex_lock(&v->job_lock);
        v->stop = 1;
        pthread_cond_signal(&v->job_cv);
        pthread_mutex_unlock(&v->job_lock);
        pthread_join(v->worker, NULL);
    }
    for (size_t i = 0; i < v->nd; i++) {
        vdump *d = &v->d[i];
        for (size_t k = 0; d->samples && k < d->n; k++) dfl_dump_attn_free(&d->samples[k].at);
        free(d->samples);
        free(d->lambda);
        free(d->model_type);
        dfl_dump_close(d->r);
        free(v->sinfo[i]);
    }
    for (entry *e = v->c.head, *n; e; e = n) {
        n = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&v->c.lock);
    pthread_mutex_destroy(&v->dump_lock);
    pthread_mutex_destroy(&v->build_lock);
    pthread_mutex_destroy(&v->job_lock);
    pthread_cond_destroy(&v->job_cv);
    free(v);
}

dfl_status dfl_view_open(const dfl_view_params *p, dfl_view **out, dfl_error *err)
{
    *out = NULL;
    if (p->ndumps < 1 || p->ndumps > DFL_VIEW_MAX_DUMPS)
        return dfl__fail(err, DFL_ERR_USAGE, "give 1 to %d dumps (got %zu)", DFL_VIEW_MAX_DUMPS, p->ndumps);
    if (p->base_cells < 64 || p->base_cells > 8192)
        return dfl__fail(err, DFL_ERR_USAGE, "base grid of %lld cells: expected 64 to 8192", (long long)p->base_cells);
    /* a map's preview and its full grid must fit together, or the full grid would be
     * evicted as soon as it is made and made again */
    size_t need = 2 * (size_t)p->base_cells * (size_t)p->base_cells * sizeof(float) + ((size_t)4 << 20);
    if (p->cache_bytes < need)
        return dfl__fail(err, DFL_ERR_USAGE, "a cache of %zu MiB is too small for base grids of %lld cells: need %zu MiB",
                         p->cache_bytes >> 20, (long long)p->base_cells, (need + ((size_t)1 << 20) - 1) >> 20);
    dfl_view *v = calloc(1, sizeof *v);
    if (!v) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&v->c.lock, NULL);
    pthread_mutex_init(&v->dump_lock, NULL);
    pthread_mutex_init(&v->build_lock, NULL);
    pthread_mutex_init(&v->job_lock, NULL);
    pthread_cond_init(&v->job_cv, NULL);
    v->c.budget = p->cache_bytes;
    v->base_cells = p->base_cells;
    dfl_status st = DFL_OK;
    for (size_t i = 0; !st && i < p->ndumps; i++) {
        v->nd = i + 1;
        if ((st = open_dump(&v->d[i], p->dumps[i], err))) break;
        vdump *d = &v->d[i];
        v->sinfo[i] = dfl__calloc_array(d->n ? d->n : 1, sizeof *v->sinfo[i]);
        if (!v->sinfo[i]) {
            st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t k = 0; k < d->n; k++) v->sinfo[i][k] = d->samples[k].info;
        v->dinfo[i].nsamples = d->n;
        v->dinfo[i].samples = v->sinfo[i];
    }
    if (st) {
        dfl_view_close(v);
        return st;
    }
    v->cat.ndumps = v->nd;
    v->cat.dumps = v->dinfo;
    if (pthread_create(&v->worker, NULL, builder, v)) {
        dfl_view_close(v);
        return dfl__fail(err, DFL_ERR_NOMEM, "cannot start the background thread");
    }
    v->worker_started = 1;
    *out = v;
    return DFL_OK;
}

/* ------------------------------------------------------------ sample text */

/* Per sample, loaded on first use: tokens, segments, token text. */
typedef dfl_dump_tokens stext;

static void stext_drop(void *o)
{
    dfl_dump_tokens_free(o);
    free(o);
}

static dfl_status stext_get(dfl_view *v, int64_t di, int64_t si, entry **out, dfl_error *err)
{
    char key[64];
    snprintf(key, sizeof key, "text %lld %lld", (long long)di, (long long)si);
    if ((*out = cache_ref(&v->c, key))) return DFL_OK;
    const vdump *d = &v->d[di];
    stext *t = calloc(1, sizeof *t);
    if (!t) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&v->dump_lock);
    dfl_status st = dfl_dump_tokens_read(d->r, dfl_dump_sample_at(d->r, (size_t)si), t, err);
    pthread_mutex_unlock(&v->dump_lock);
    if (st) {
        free(t);
        return st;
    }
    size_t bytes = (size_t)t->T * 5 + sizeof *t;
    for (int64_t i = 0; t->text && i < t->T; i++) bytes += strlen(t->text[i]) + 16;
    if (!(*out = cache_put_obj(&v->c, key, t, bytes, stext_drop))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    return DFL_OK;
}

/* ------------------------------------------------------------- base grids */

/* The whole map pooled: v [gr][gc], pixel = 2^b × 2^b cells; NaN = no data. Robust
 * limits over it: q995 (of |v| when diverging) leaving out bos columns, min, max. */
typedef struct grid {
    int64_t b, gr, gc;
    float *v;
    int diverging;
    int complete; /* 0: a preview (build_preview) */
    double q995, lo, hi;
} grid;

static void grid_drop(void *o)
{
    grid *g = o;
    if (g) free(g->v);
    free(g);
}

static int64_t base_level(const dfl_view *v, int64_t R, int64_t T)
{
    int64_t n = R > T ? R : T, b = 0;
    while ((n + ((int64_t)1 << b) - 1) >> b > v->base_cells) b++;
    return b;
}

/* Read rows [r0, r0+n) x keys [c0, c1) of the request's map (minus the other dump's
 * when asked) into out [n][c1-c0]. Takes the dump lock. */
static dfl_status read_box(dfl_view *v, const dfl_view_request *q, int64_t r0, int64_t n, int64_t c0, int64_t c1,
                           float *out, float *tmp, dfl_error *err)
{
    int64_t start[4] = {q->li, q->hi, r0, c0}, count[4] = {1, 1, n, c1 - c0};
    char p[96];
    dfl_status st;
    pthread_mutex_lock(&v->dump_lock);
    const vsample *s = &v->d[q->dump].samples[q->sample];
    snprintf(p, sizeof p, "%s/attn/%s", s->group, dfl_view_map_name(q->map));
    st = dfl_dump_read_slab_f32(v->d[q->dump].r, p, start, count, out, err);
    if (!st && q->minus >= 0) {
        const vdump *o = &v->d[q->minus];
        const vsample *so = &o->samples[q->sample];
        int64_t li = -1, hi = -1;
        for (int64_t i = 0; i < so->info.Ls; i++)
            if (so->at.layers[i] == q->layer) li = i;
        for (int64_t i = 0; i < so->info.Hs; i++)
            if (so->at.heads[i] == q->head) hi = i;
        int64_t st2[4] = {li, hi, r0, c0};
        snprintf(p, sizeof p, "%s/attn/%s", so->group, dfl_view_map_name(q->map));
        st = dfl_dump_read_slab_f32(o->r, p, st2, count, tmp, err);
        size_t cnt = (size_t)n * (size_t)(c1 - c0);
        for (size_t i = 0; !st && i < cnt; i++) out[i] -= tmp[i];
    }
    pthread_mutex_unlock(&v->dump_lock);
    return st;
}

static void grid_key(char *key, size_t cap, const dfl_view_request *q, dfl_pool_mode pool, int complete)
{
    snprintf(key, cap, "%s %lld %lld %lld %lld %d %lld %d", complete ? "grid" : "preview", (long long)q->dump,
             (long long)q->sample,
             (long long)q->li, (long long)q->hi, (int)q->map, (long long)q->minus, (int)pool);
}

/* An empty grid of the map's base geometry, all no data. */
static dfl_status grid_new(const dfl_view *v, const dfl_view_request *q, grid **out, dfl_error *err)
{
    const vsample *s = &v->d[q->dump].samples[q->sample];
    const int64_t R = s->info.R, T = s->info.T;
    grid *g = calloc(1, sizeof *g);
    if (!g) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    g->b = base_level(v, R, T);
    g->gr = (R + ((int64_t)1 << g->b) - 1) >> g->b;
    g->gc = (T + ((int64_t)1 << g->b) - 1) >> g->b;
    g->diverging = q->map == DFL_VIEW_DIFF || q->minus >= 0;
    size_t n = (size_t)g->gr * (size_t)g->gc;
    if (!(g->v = dfl__alloc_array(n, sizeof *g->v))) {
        free(g);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) g->v[i] = NAN;
    *out = g;
    return DFL_OK;
}

/* The whole map pooled, read in blocks of about block_cells cells (the dump lock is
 * taken per block, so tile requests get in between). */
static dfl_status build_grid(dfl_view *v, const dfl_view_request *q, dfl_pool_mode mode, int64_t block_cells,
                             grid **out, dfl_error *err)
{
    const vsample *s = &v->d[q->dump].samples[q->sample];
    const int64_t R = s->info.R, T = s->info.T;
    grid *g = NULL;
    dfl_status st = grid_new(v, q, &g, err);
    if (st) return st;
    int64_t block = block_cells / T;
    block = block < 32 ? 32 : block / 32 * 32;
    if (block > R) block = R;
    size_t cells = (size_t)block * (size_t)T;
    float *buf = dfl__alloc_array(cells, sizeof *buf);               /* [block][T] */
    float *tmp = q->minus >= 0 ? dfl__alloc_array(cells, sizeof *tmp) : NULL;
    int64_t *valid = dfl__alloc_array((size_t)block, sizeof *valid); /* [block] */
    dfl_pool *pool = NULL;
    if (!buf || !valid || (q->minus >= 0 && !tmp)) st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    /* padded to whole pixels, so pixel edges fall on multiples of 2^b cells */
    if (!st) st = dfl_pool_create(g->gr << g->b, g->gc << g->b, g->gr, g->gc, mode, &pool, err);
    for (int64_t r0 = 0; !st && r0 < R; r0 += block) {
        int64_t n = R - r0 < block ? R - r0 : block;
        int64_t c1 = s->at.rows[r0 + n - 1] + 1; /* keys any row of the block sees */
        if ((st = read_box(v, q, r0, n, 0, c1, buf, tmp, err))) break;
        for (int64_t i = 0; i < n; i++) valid[i] = s->at.rows[r0 + i] + 1;
        dfl_pool_rows_valid(pool, r0, n, buf, c1, valid);
    }
    if (!st) dfl_pool_result(pool, g->v);
    dfl_pool_destroy(pool);
    free(tmp);
    free(buf);
    free(valid);
    if (st) {
        grid_drop(g);
        return st;
    }
    g->complete = 1;
    *out = g;
    return DFL_OK;
}

/* A quick preview of a large map while its grid is built in the background: the map
 * cut into bands of query rows, each band drawn from its last 32 rows only (one row of
 * dump chunks), so about PREVIEW_CELLS cells are read instead of all of them. Keys a
 * base row cannot see stay no data. */
static dfl_status build_preview(dfl_view *v, const dfl_view_request *q, dfl_pool_mode mode, int64_t lower,
                                grid **out, dfl_error *err)
{
    const vsample *s = &v->d[q->dump].samples[q->sample];
    const int64_t R = s->info.R, T = s->info.T;
    grid *g = NULL;
    dfl_status st = grid_new(v, q, &g, err);
    if (st) return st;
    int64_t stride = 32 * ((lower + PREVIEW_CELLS - 1) / PREVIEW_CELLS); /* rows per band */
    float *buf = dfl__alloc_array((size_t)32 * (size_t)T, sizeof *buf); /* [32][T] */
    float *tmp = q->minus >= 0 ? dfl__alloc_array((size_t)32 * (size_t)T, sizeof *tmp) : NULL;
    float *line = dfl__alloc_array((size_t)g->gc, sizeof *line);      /* [gc] */
    int64_t valid[32];
    if (!buf || !line || (q->minus >= 0 && !tmp)) st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t a = 0; !st && a < R; a += stride) {
        int64_t e = a + stride < R ? a + stride : R;
        int64_t r0 = e - 32 > a ? (e - 32) / 32 * 32 : a, n = e - r0;
        int64_t c1 = s->at.rows[e - 1] + 1;
        if ((st = read_box(v, q, r0, n, 0, c1, buf, tmp, err))) break;
        for (int64_t i = 0; i < n; i++) valid[i] = s->at.rows[r0 + i] + 1;
        dfl_pool *pool = NULL;
        if ((st = dfl_pool_create(n, g->gc << g->b, 1, g->gc, mode, &pool, err))) break;
        dfl_pool_rows_valid(pool, 0, n, buf, c1, valid);
        dfl_pool_result(pool, line);
        dfl_pool_destroy(pool);
        for (int64_t y = a >> g->b; y <= (e - 1) >> g->b && y < g->gr; y++) {
            int64_t last = ((y + 1) << g->b) < R ? ((y + 1) << g->b) - 1 : R - 1;
            int64_t seen = s->at.rows[last] + 1; /* keys this base row sees */
            for (int64_t x = 0; x < g->gc; x++) g->v[y * g->gc + x] = (x << g->b) < seen ? line[x] : NAN;
        }
    }
    free(buf);
    free(tmp);
    free(line);
    if (st) {
        grid_drop(g);
        return st;
    }
    *out = g;
    return DFL_OK;
}

/* Robust limits as attnmap chooses them: the 99.5th percentile (of |v| when
 * diverging), leaving out grid columns that hold a bos key. */
static dfl_status grid_limits(grid *g, const uint8_t *segments, int64_t T, dfl_error *err)
{
    size_t n = (size_t)g->gr * (size_t)g->gc, k = 0;
    float *vals = dfl__alloc_array(n ? n : 1, sizeof *vals);
    uint8_t *bos = calloc((size_t)g->gc, 1);
    if (!vals || !bos) {
        free(vals);
        free(bos);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    for (int64_t j = 0; j < T; j++)
        if (segments[j] == 1) bos[j >> g->b] = 1;
    g->lo = INFINITY;
    g->hi = -INFINITY;
    for (int pass = 0; pass < 2 && k == 0; pass++)
        for (size_t i = 0; i < n; i++) {
            float x = g->v[i];
            if (isnan(x)) continue;
            if (x < g->lo) g->lo = x;
            if (x > g->hi) g->hi = x;
            if (pass == 1 || !bos[i % (size_t)g->gc]) vals[k++] = g->diverging ? fabsf(x) : x;
        }
    if (k) g->q995 = dfl_quantile_select(vals, k, 0.995);
    if (!isfinite(g->lo)) g->lo = g->hi = 0;
    if (!(g->q995 > 0)) g->q995 = fmax(fabs(g->lo), fabs(g->hi));
    if (!(g->q995 > 0)) g->q995 = 1;
    free(vals);
    free(bos);
    return DFL_OK;
}

static dfl_status grid_finish(dfl_view *v, const dfl_view_request *q, const char *key, grid *g, entry **out,
                              dfl_error *err)
{
    entry *te = NULL;
    dfl_status st = stext_get(v, q->dump, q->sample, &te, err);
    if (!st) {
        const stext *t = te->obj;
        st = grid_limits(g, t->segments, t->T, err);
    }
    cache_release(&v->c, te);
    if (st) {
        grid_drop(g);
        return st;
    }
    if (!(*out = cache_put_obj(&v->c, key, g, sizeof *g + (size_t)g->gr * (size_t)g->gc * sizeof(float), grid_drop)))
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    return DFL_OK;
}

/* Hand a full build to the background thread (once per key). */
static void enqueue(dfl_view *v, const dfl_view_request *q, dfl_pool_mode mode)
{
    pthread_mutex_lock(&v->job_lock);
    int dup = 0;
    for (int i = 0; i < v->njobs; i++)
        dup |= v->jobs[i].q.dump == q->dump && v->jobs[i].q.sample == q->sample && v->jobs[i].q.li == q->li &&
               v->jobs[i].q.hi == q->hi && v->jobs[i].q.map == q->map && v->jobs[i].q.minus == q->minus &&
               v->jobs[i].mode == mode;
    if (!dup && v->njobs < MAX_JOBS) {
        v->jobs[v->njobs].q = *q;
        v->jobs[v->njobs].mode = mode;
        v->njobs++;
        pthread_cond_signal(&v->job_cv);
    }
    pthread_mutex_unlock(&v->job_lock);
}

/* A background build that failed, kept so the map answers with its error instead of
 * being rebuilt at every poll. */
typedef struct failure {
    dfl_error err;
} failure;

static void failure_drop(void *o)
{
    free(o);
}

/* The background builder: full grids of large maps, oldest request first. */
static void *builder(void *arg)
{
    dfl_view *v = arg;
    pthread_mutex_lock(&v->job_lock);
    for (;;) {
        while (!v->stop && v->njobs == 0) pthread_cond_wait(&v->job_cv, &v->job_lock);
        if (v->stop) break;
        job j = v->jobs[0]; /* stays queued while it runs, so it is not queued twice */
        pthread_mutex_unlock(&v->job_lock);
        char key[192];
        grid_key(key, sizeof key, &j.q, j.mode, 1);
        entry *e = cache_ref(&v->c, key);
        grid *g = NULL;
        dfl_error err;
        dfl_status st = DFL_OK;
        if (!e && !(st = build_grid(v, &j.q, j.mode, BLOCK_CELLS / 4, &g, &err)))
            st = grid_finish(v, &j.q, key, g, &e, &err);
        cache_release(&v->c, e);
        failure *f = st ? malloc(sizeof *f) : NULL;
        if (f) {
            char fkey[200];
            f->err = err;
            snprintf(fkey, sizeof fkey, "failed %s", key);
            cache_release(&v->c, cache_put_obj(&v->c, fkey, f, sizeof *f, failure_drop));
        }
        grid_key(key, sizeof key, &j.q, j.mode, 0);
        cache_age(&v->c, key);
        pthread_mutex_lock(&v->job_lock);
        memmove(v->jobs, v->jobs + 1, (size_t)(v->njobs - 1) * sizeof *v->jobs);
        v->njobs--;
    }
    pthread_mutex_unlock(&v->job_lock);
    return NULL;
}

/* The base grid of a checked request, referenced (cache_release when done). Small
 * maps are pooled here and now; a large one is previewed, and its full grid handed to
 * the background builder (g->complete tells which one came back). */
static dfl_status grid_get(dfl_view *v, const dfl_view_request *q, dfl_pool_mode mode, entry **out, dfl_error *err)
{
    char key[192], pkey[192];
    grid_key(key, sizeof key, q, mode, 1);
    if ((*out = cache_ref(&v->c, key))) return DFL_OK;
    const vsample *s = &v->d[q->dump].samples[q->sample];
    int64_t lower = 0; /* causal cells of the map */
    for (int64_t r = 0; r < s->info.R; r++) lower += s->at.rows[r] + 1;
    int big = lower > 2 * PREVIEW_CELLS;
    grid_key(pkey, sizeof pkey, q, mode, 0);
    if (big) {
        char fkey[200];
        snprintf(fkey, sizeof fkey, "failed %s", key);
        entry *fe = cache_ref(&v->c, fkey);
        if (fe) {
            dfl_status st = dfl__fail(err, ((failure *)fe->obj)->err.status, "%s", ((failure *)fe->obj)->err.msg);
            cache_release(&v->c, fe);
            return st;
        }
    }
    if (big && (*out = cache_ref(&v->c, pkey))) {
        enqueue(v, q, mode); /* again, in case the full grid was evicted since */
        return DFL_OK;
    }
    pthread_mutex_lock(&v->build_lock);
    dfl_status st = DFL_OK;
    if (!(*out = cache_ref(&v->c, big ? pkey : key))) {
        grid *g = NULL;
        st = big ? build_preview(v, q, mode, lower, &g, err) : build_grid(v, q, mode, BLOCK_CELLS, &g, err);
        if (!st) st = grid_finish(v, q, big ? pkey : key, g, out, err);
    }
    pthread_mutex_unlock(&v->build_lock);
    if (!st && big) enqueue(v, q, mode);
    return st;
}

/* ------------------------------------------------------------------ tiles */

/* Pool src [rows][cols] (row stride ld; row k's columns >= valid[k] are no data,
 * valid NULL = all cols) by f x f, NaN = no data, into out [ceil(rows/f)][ceil(cols/f)]:
 * the grid is padded to whole pixels so pixel edges fall on multiples of f. */
static dfl_status pool_by(const float *src, int64_t rows, int64_t cols, int64_t ld, const int64_t *valid, int64_t f,
                          dfl_pool_mode mode, float *out, int64_t *orows, int64_t *ocols, dfl_error *err)
{
    *orows = (rows + f - 1) / f;
    *ocols = (cols + f - 1) / f;
    if (f == 1 && !valid) {
        for (int64_t r = 0; r < rows; r++) memcpy(out + r * cols, src + r * ld, (size_t)cols * sizeof *out);
        return DFL_OK;
    }
    int64_t *own = NULL;
    if (!valid) {
        if (!(own = dfl__alloc_array((size_t)rows, sizeof *own))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (int64_t r = 0; r < rows; r++) own[r] = cols;
        valid = own;
    }
    dfl_pool *p = NULL;
    dfl_status st = dfl_pool_create(*orows * f, *ocols * f, *orows, *ocols, mode, &p, err);
    if (!st) {
        dfl_pool_rows_valid(p, 0, rows, src, ld, valid);
        dfl_pool_result(p, out);
    }
    dfl_pool_destroy(p);
    free(own);
    return st;
}

/* Colour v [h][w] into rgb [h][w][3]; NaN cells are no-data grey. */
static void colour(uint8_t *rgb, int w, int h, const float *v, const dfl_norm *nm, dfl_cmap cm)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float a = v[(size_t)y * (size_t)w + (size_t)x];
            dfl_rgb col = isnan(a) ? NODATA : dfl_cmap_color(cm, dfl_norm_apply(nm, a));
            uint8_t *px = rgb + ((size_t)y * (size_t)w + (size_t)x) * 3;
            px[0] = col.r;
            px[1] = col.g;
            px[2] = col.b;
        }
}

static dfl_status encode(const float *v, int64_t h, int64_t w, const dfl_norm *nm, dfl_cmap cm, unsigned char **png,
                         size_t *len, dfl_error *err)
{
    uint8_t *rgb = dfl__alloc_array((size_t)w * (size_t)h, 3);
    if (!rgb) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    colour(rgb, (int)w, (int)h, v, nm, cm);
    dfl_status st = dfl_png_encode((int)w, (int)h, rgb, png, len, err);
    free(rgb);
    return st;
}

static dfl_norm tile_norm(const dfl_view_request *q, int diverging)
{
    dfl_norm nm;
    memset(&nm, 0, sizeof nm);
    nm.scale = q->scale;
    nm.diverging = diverging;
    if (diverging) {
        nm.vmax = fmax(fabs(q->vmin), fabs(q->vmax));
        nm.vmin = -nm.vmax;
        nm.linthresh = nm.vmax / 1000;
    } else {
        nm.vmin = q->vmin;
        nm.vmax = q->vmax;
    }
    return nm;
}

/* A tile as PNG; *complete = 0 when drawn from a preview (not to be cached). */
static dfl_status render_tile(dfl_view *v, const dfl_view_request *q, unsigned char **png, size_t *len, int *complete,
                              dfl_error *err)
{
    *complete = 1;
    const vsample *s = &v->d[q->dump].samples[q->sample];
    const int64_t R = s->info.R, T = s->info.T, T2 = DFL_VIEW_TILE;
    const int diverging = q->map == DFL_VIEW_DIFF || q->minus >= 0;
    dfl_norm nm = tile_norm(q, diverging);
    dfl_status st = dfl_norm_check(&nm, err);
    if (st) return st;
    dfl_cmap cm = diverging ? DFL_CMAP_RDBU : q->cmap;
    float *out = dfl__alloc_array((size_t)T2 * (size_t)T2, sizeof *out); /* [≤256][≤256] */
    if (!out) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    int64_t b = base_level(v, R, T), oh = 0, ow = 0;
    if (q->z >= b) {
        entry *e = NULL;
        if (!(st = grid_get(v, q, q->pool, &e, err))) {
            const grid *g = e->obj;
            *complete = g->complete;
            int64_t f = (int64_t)1 << (q->z - b), span = T2 * f;
            int64_t gy0 = q->y * span, gx0 = q->x * span;
            int64_t gh = g->gr - gy0 < span ? g->gr - gy0 : span, gw = g->gc - gx0 < span ? g->gc - gx0 : span;
            st = pool_by(g->v + gy0 * g->gc + gx0, gh, gw, g->gc, NULL, f, q->pool, out, &oh, &ow, err);
        }
        cache_release(&v->c, e);
    } else {
        int64_t f = (int64_t)1 << q->z, span = T2 * f;
        int64_t r0 = q->y * span, r1 = r0 + span < R ? r0 + span : R;
        int64_t c0 = q->x * span, c1 = c0 + span < T ? c0 + span : T;
        int64_t kend = s->at.rows[r1 - 1] + 1 < c1 ? s->at.rows[r1 - 1] + 1 : c1; /* keys the tile's rows see */
        oh = (r1 - r0 + f - 1) / f;
        ow = (c1 - c0 + f - 1) / f;
        if (kend <= c0) {
            for (size_t i = 0; i < (size_t)(oh * ow); i++) out[i] = NAN; /* wholly in the future */
        } else {
            /* read and pool in blocks of whole pixel rows, so memory stays at about
             * BLOCK_CELLS cells whatever the zoom level and map size */
            int64_t w = kend - c0, block = BLOCK_CELLS / w / f * f;
            if (block < f) block = f;
            if (block > r1 - r0) block = r1 - r0;
            size_t cells = (size_t)block * (size_t)w;
            float *buf = dfl__alloc_array(cells, sizeof *buf); /* [block][w] */
            float *tmp = q->minus >= 0 ? dfl__alloc_array(cells, sizeof *tmp) : NULL;
            int64_t *valid = dfl__alloc_array((size_t)block, sizeof *valid);
            dfl_pool *pool = NULL;
            if (!buf || !valid || (q->minus >= 0 && !tmp)) st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            /* padded to whole pixels; columns past kend are no data too */
            if (!st) st = dfl_pool_create(oh * f, ow * f, oh, ow, q->pool, &pool, err);
            for (int64_t a0 = r0; !st && a0 < r1; a0 += block) {
                int64_t n = r1 - a0 < block ? r1 - a0 : block;
                if ((st = read_box(v, q, a0, n, c0, kend, buf, tmp, err))) break;
                for (int64_t i = 0; i < n; i++)
                    valid[i] = (s->at.rows[a0 + i] + 1 < kend ? s->at.rows[a0 + i] + 1 : kend) - c0;
                dfl_pool_rows_valid(pool, a0 - r0, n, buf, w, valid);
            }
            if (!st) dfl_pool_result(pool, out);
            dfl_pool_destroy(pool);
            free(buf);
            free(tmp);
            free(valid);
        }
    }
    if (!st) st = encode(out, oh, ow, &nm, cm, png, len, err);
    free(out);
    return st;
}

/* A thumbnail: the base grid pooled to at most px a side, on its own robust limits. */
static dfl_status render_thumb(dfl_view *v, const dfl_view_request *q, unsigned char **png, size_t *len, int *complete,
                               dfl_error *err)
{
    entry *e = NULL;
    dfl_status st = grid_get(v, q, DFL_POOL_MEAN, &e, err);
    if (st) return st;
    const grid *g = e->obj;
    *complete = g->complete;
    int64_t f = 1;
    while ((g->gr + f - 1) / f > q->px || (g->gc + f - 1) / f > q->px) f *= 2;
    float *out = dfl__alloc_array((size_t)q->px * (size_t)q->px, sizeof *out);
    int64_t oh, ow;
    if (!out) st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!st) st = pool_by(g->v, g->gr, g->gc, g->gc, NULL, f, DFL_POOL_MEAN, out, &oh, &ow, err);
    if (!st) {
        dfl_norm nm;
        memset(&nm, 0, sizeof nm);
        nm.diverging = g->diverging;
        nm.vmax = g->q995;
        nm.vmin = g->diverging ? -g->q995 : (g->lo < 0 ? g->lo : 0);
        if (!(nm.vmin < nm.vmax)) nm.vmin = nm.vmax - 1;
        st = encode(out, oh, ow, &nm, g->diverging ? DFL_CMAP_RDBU : q->cmap, png, len, err);
    }
    free(out);
    cache_release(&v->c, e);
    return st;
}

/* ------------------------------------------------------------------- JSON */

static cJSON *int_array(const int32_t *a, int64_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (int64_t i = 0; arr && i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(a[i]));
    return arr;
}

/* A float as JSON: a number, or null for NaN / Inf. */
static cJSON *num(double x)
{
    return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull();
}

static cJSON *float_array(const float *a, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++) cJSON_AddItemToArray(arr, num(a[i]));
    return arr;
}

static cJSON *dumps_json(const dfl_view *v)
{
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "dumps");
    for (size_t i = 0; i < v->nd; i++) {
        const vdump *d = &v->d[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddNumberToObject(o, "index", (double)i);
        cJSON_AddStringToObject(o, "name", d->name);
        cJSON_AddStringToObject(o, "model_type", d->model_type);
        cJSON_AddNumberToObject(o, "num_layers", (double)d->L);
        cJSON_AddNumberToObject(o, "num_heads", (double)d->H);
        cJSON_AddItemToObject(o, "lambda", d->lambda ? float_array(d->lambda, (size_t)d->L) : cJSON_CreateNull());
        cJSON *ss = cJSON_AddArrayToObject(o, "samples");
        for (size_t k = 0; k < d->n; k++) {
            const vsample *s = &d->samples[k];
            cJSON *so = cJSON_CreateObject();
            cJSON_AddItemToArray(ss, so);
            char sig[24];
            snprintf(sig, sizeof sig, "%016llx", (unsigned long long)s->info.sig);
            cJSON_AddNumberToObject(so, "index", (double)k);
            cJSON_AddStringToObject(so, "id", s->id ? s->id : "");
            cJSON_AddNumberToObject(so, "T", (double)s->info.T);
            cJSON_AddNumberToObject(so, "R", (double)s->info.R);
            cJSON_AddStringToObject(so, "sig", sig);
            cJSON_AddItemToObject(so, "layers", int_array(s->at.layers, s->info.Ls));
            cJSON_AddItemToObject(so, "heads", int_array(s->at.heads, s->info.Hs));
            cJSON *maps = cJSON_AddArrayToObject(so, "maps");
            for (int m = 0; m < DFL_VIEW_NMAPS; m++)
                if (s->info.maps & (1u << m))
                    cJSON_AddItemToArray(maps, cJSON_CreateString(dfl_view_map_name((dfl_view_map)m)));
            cJSON_AddNumberToObject(so, "zmax", (double)dfl_view_zmax(s->info.R, s->info.T));
            cJSON_AddNumberToObject(so, "tile", DFL_VIEW_TILE);
        }
    }
    return root;
}

/* A numeric dataset of the sample as a nested JSON array of its shape, or NULL. */
static cJSON *dataset_json(const vdump *d, const char *path, dfl_error *err)
{
    if (!dfl_dump_exists(d->r, path)) return NULL;
    dfl_dump_dset_info info;
    if (dfl_dump_dataset_info(d->r, path, &info, err) || info.is_string) return NULL;
    float *a = NULL;
    size_t n = 0;
    if (dfl_dump_read_alloc(d->r, path, DFL_H5_F32, (void **)&a, &n, err)) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    for (int i = 0; i < info.ndim; i++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)info.dims[i]));
    cJSON_AddItemToObject(o, "data", float_array(a, n));
    free(a);
    return o;
}

static dfl_status sample_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err)
{
    entry *te = NULL;
    dfl_status st = stext_get(v, q->dump, q->sample, &te, err);
    if (st) return st;
    const stext *t = te->obj;
    const vdump *d = &v->d[q->dump];
    const vsample *s = &d->samples[q->sample];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "dump", (double)q->dump);
    cJSON_AddNumberToObject(o, "index", (double)q->sample);
    cJSON_AddStringToObject(o, "id", s->id ? s->id : "");
    cJSON_AddNumberToObject(o, "T", (double)t->T);
    cJSON_AddItemToObject(o, "tokens", int_array(t->tokens, t->T));
    cJSON *seg = cJSON_AddArrayToObject(o, "segments");
    for (int64_t i = 0; i < t->T; i++) cJSON_AddItemToArray(seg, cJSON_CreateNumber(t->segments[i]));
    if (t->text) cJSON_AddItemToObject(o, "text", cJSON_CreateStringArray((const char *const *)t->text, (int)t->T));
    else cJSON_AddNullToObject(o, "text");
    cJSON_AddItemToObject(o, "rows", int_array(s->at.rows, s->info.R));
    cJSON_AddItemToObject(o, "lambda", d->lambda ? float_array(d->lambda, (size_t)d->L) : cJSON_CreateNull());
    static const char *const stats[] = {"noise/shares", "noise/shares_abs", "noise/entropy", "noise/negative_mass",
                                        "outliers/logits/top", "outliers/hidden/top"};
    cJSON *sj = cJSON_AddObjectToObject(o, "stats");
    pthread_mutex_lock(&v->dump_lock);
    for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++) {
        char p[96];
        snprintf(p, sizeof p, "%s/%s", s->group, stats[i]);
        dfl_error e2;
        cJSON *x = dataset_json(d, p, &e2);
        if (x) cJSON_AddItemToObject(sj, stats[i], x);
    }
    char p[96], *names = NULL;
    snprintf(p, sizeof p, "%s/noise", s->group);
    dfl_error e2;
    if (dfl_dump_exists(d->r, p) && !dfl_dump_get_attr_str(d->r, p, "segments", &names, &e2)) {
        cJSON_AddStringToObject(sj, "segment_names", names);
        free(names);
    }
    pthread_mutex_unlock(&v->dump_lock);
    cache_release(&v->c, te);
    *out = o;
    return DFL_OK;
}

static dfl_status cell_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err)
{
    entry *te = NULL;
    dfl_status st = stext_get(v, q->dump, q->sample, &te, err);
    if (st) return st;
    const stext *t = te->obj;
    const vdump *d = &v->d[q->dump];
    const vsample *s = &d->samples[q->sample];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "q", (double)q->q);
    cJSON_AddNumberToObject(o, "k", (double)q->k);
    cJSON_AddBoolToObject(o, "masked", q->k > q->q);
    int64_t pos[2] = {q->q, q->k};
    const char *names[2] = {"query", "key"};
    for (int i = 0; i < 2; i++) {
        cJSON *tk = cJSON_AddObjectToObject(o, names[i]);
        cJSON_AddNumberToObject(tk, "pos", (double)pos[i]);
        cJSON_AddNumberToObject(tk, "token", t->tokens[pos[i]]);
        cJSON_AddNumberToObject(tk, "segment", t->segments[pos[i]]);
        if (t->text) cJSON_AddStringToObject(tk, "text", t->text[pos[i]]);
        else cJSON_AddNullToObject(tk, "text");
    }
    int64_t layer = q->layer;
    cJSON_AddItemToObject(o, "lambda", d->lambda && layer < d->L ? num(d->lambda[layer]) : cJSON_CreateNull());
    int64_t start[4] = {q->li, q->hi, q->ri, q->k}, count[4] = {1, 1, 1, 1};
    pthread_mutex_lock(&v->dump_lock);
    for (int m = 0; !st && m < DFL_VIEW_NMAPS; m++) {
        if (!(s->info.maps & (1u << m))) continue;
        char p[96];
        float x = NAN;
        snprintf(p, sizeof p, "%s/attn/%s", s->group, dfl_view_map_name((dfl_view_map)m));
        st = dfl_dump_read_slab_f32(d->r, p, start, count, &x, err);
        cJSON_AddItemToObject(o, dfl_view_map_name((dfl_view_map)m), num(x));
    }
    pthread_mutex_unlock(&v->dump_lock);
    cache_release(&v->c, te);
    if (st) {
        cJSON_Delete(o);
        return st;
    }
    *out = o;
    return DFL_OK;
}

typedef struct keyval {
    float v;
    int32_t k;
} keyval;

/* Descending by value, then ascending key (a total order: ties are stable). */
static int cmp_keyval(const void *a, const void *b)
{
    const keyval *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? 1 : -1;
    return (x->k > y->k) - (x->k < y->k);
}

static dfl_status row_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err)
{
    const int64_t n = q->q + 1; /* causal keys 0 .. q */
    float *row = dfl__alloc_array((size_t)n, sizeof *row), *tmp = dfl__alloc_array((size_t)n, sizeof *tmp);
    keyval *kv = dfl__alloc_array((size_t)n, sizeof *kv);
    int64_t w = q->width < n ? q->width : n;
    float *strip = dfl__alloc_array((size_t)w, sizeof *strip);
    entry *te = NULL;
    dfl_status st = !row || !tmp || !kv || !strip ? dfl__fail(err, DFL_ERR_NOMEM, "out of memory") : DFL_OK;
    if (!st) st = read_box(v, q, q->ri, 1, 0, n, row, tmp, err);
    if (!st) st = stext_get(v, q->dump, q->sample, &te, err);
    if (!st) {
        const stext *t = te->obj;
        double sum = 0;
        for (int64_t k = 0; k < n; k++) {
            kv[k].v = row[k];
            kv[k].k = (int32_t)k;
            sum += row[k];
        }
        qsort(kv, (size_t)n, sizeof *kv, cmp_keyval);
        dfl_pool *p = NULL;
        if (!(st = dfl_pool_create(1, n, 1, w, DFL_POOL_MAX, &p, err))) {
            dfl_pool_rows(p, 0, 1, row);
            dfl_pool_result(p, strip);
        }
        dfl_pool_destroy(p);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "q", (double)q->q);
        cJSON_AddNumberToObject(o, "keys", (double)n);
        cJSON_AddNumberToObject(o, "sum", sum);
        cJSON *top = cJSON_AddArrayToObject(o, "top");
        for (int64_t i = 0; i < q->topk && i < n; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddItemToArray(top, e);
            cJSON_AddNumberToObject(e, "k", kv[i].k);
            cJSON_AddItemToObject(e, "v", num(kv[i].v));
            cJSON_AddNumberToObject(e, "segment", t->segments[kv[i].k]);
            if (t->text) cJSON_AddStringToObject(e, "text", t->text[kv[i].k]);
            else cJSON_AddNumberToObject(e, "token", t->tokens[kv[i].k]);
        }
        cJSON_AddItemToObject(o, "strip", float_array(strip, (size_t)w));
        *out = o;
    }
    cache_release(&v->c, te);
    free(row);
    free(tmp);
    free(kv);
    free(strip);
    return st;
}

static cJSON *colormap_json(dfl_cmap cm)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", dfl_cmap_name(cm));
    cJSON *arr = cJSON_AddArrayToObject(o, "colors");
    for (int i = 0; i < 256; i++) {
        dfl_rgb c = dfl_cmap_entry(cm, i);
        char hex[8];
        snprintf(hex, sizeof hex, "#%02x%02x%02x", c.r, c.g, c.b);
        cJSON_AddItemToArray(arr, cJSON_CreateString(hex));
    }
    return o;
}

/* Limits over the grid pooled as the tiles will be (mean or max), as attnmap takes
 * them over the pooled image it draws. */
/* Colour-bar ticks as attnmap draws them (dfl_ticks_for_norm, dfl_tick_label), with
 * each tick's position t in [0, 1] along the bar (dfl_norm_apply). */
static dfl_status ticks_json(const dfl_view_request *q, cJSON **out, dfl_error *err)
{
    dfl_norm nm = tile_norm(q, q->diverging);
    dfl_status st = dfl_norm_check(&nm, err);
    if (st) return st;
    double t[32];
    int n = dfl_ticks_for_norm(&nm, 7, t, 32);
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "ticks");
    for (int i = 0; i < n; i++) {
        char label[32];
        dfl_tick_label(t[i], label, sizeof label);
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "v", t[i]);
        cJSON_AddStringToObject(e, "label", label);
        cJSON_AddNumberToObject(e, "t", dfl_norm_apply(&nm, t[i]));
        cJSON_AddItemToArray(arr, e);
    }
    *out = o;
    return DFL_OK;
}

static dfl_status limits_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err)
{
    entry *e = NULL;
    dfl_status st = grid_get(v, q, q->pool, &e, err);
    if (st) return st;
    const grid *g = e->obj;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "diverging", g->diverging);
    cJSON_AddNumberToObject(o, "vmin", g->diverging ? -g->q995 : (g->lo < 0 ? g->lo : 0));
    cJSON_AddNumberToObject(o, "vmax", g->q995);
    cJSON_AddNumberToObject(o, "data_min", g->lo);
    cJSON_AddNumberToObject(o, "data_max", g->hi);
    cJSON_AddNumberToObject(o, "base_level", (double)g->b);
    cJSON_AddBoolToObject(o, "complete", g->complete);
    cache_release(&v->c, e);
    *out = o;
    return DFL_OK;
}

/* ----------------------------------------------------------------- answers */

static void respond_json(dfl_view_response *r, int code, cJSON *o)
{
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        r->code = 500;
        r->body = (unsigned char *)oom;
        r->len = sizeof oom - 1;
        r->is_static = 1;
    } else {
        r->code = code;
        r->body = (unsigned char *)text;
        r->len = strlen(text);
    }
    r->type = "application/json";
}

static void respond_error(dfl_view_response *r, int code, const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "error", msg);
    respond_json(r, code, o);
}

static int status_code(dfl_status s)
{
    return s == DFL_ERR_NOMEM ? 503 : s == DFL_ERR_RANGE || s == DFL_ERR_TENSOR ? 404 : s == DFL_ERR_USAGE ? 400 : 500;
}

void dfl_view_handle(dfl_view *v, const char *method, const char *target, dfl_view_response *resp)
{
    memset(resp, 0, sizeof *resp);
    dfl_view_request q;
    dfl_error err = {0};
    int code = dfl_view_request_parse(method, target, &q, &err);
    if (!code) code = dfl_view_request_check(&v->cat, &q, &err);
    if (code) {
        respond_error(resp, code, err.msg);
        return;
    }
    dfl_status st = DFL_OK;
    cJSON *o = NULL;
    switch (q.kind) {
    case DFL_VIEW_ASSET:
        resp->code = 200;
        resp->body = (unsigned char *)(uintptr_t)dfl__view_asset(q.asset, &resp->len, &resp->type);
        resp->is_static = 1;
        return;
    case DFL_VIEW_DUMPS: respond_json(resp, 200, dumps_json(v)); return;
    case DFL_VIEW_COLORMAP: respond_json(resp, 200, colormap_json(q.cmap)); return;
    case DFL_VIEW_TICKS: st = ticks_json(&q, &o, &err); break;
    case DFL_VIEW_SAMPLE: st = sample_json(v, &q, &o, &err); break;
    case DFL_VIEW_LIMITS: st = limits_json(v, &q, &o, &err); break;
    case DFL_VIEW_CELL: st = cell_json(v, &q, &o, &err); break;
    case DFL_VIEW_ROW: st = row_json(v, &q, &o, &err); break;
    case DFL_VIEW_TILE_REQ:
    case DFL_VIEW_THUMB: {
        /* the canonical request is the cache key: equal requests, equal tiles */
        char key[192];
        snprintf(key, sizeof key, "%s %lld %lld %lld %lld %d %lld %lld %lld %lld %.9g %.9g %d %d %d %lld",
                 q.kind == DFL_VIEW_THUMB ? "thumb" : "tile", (long long)q.dump, (long long)q.sample, (long long)q.li,
                 (long long)q.hi, (int)q.map, (long long)q.minus, (long long)q.z, (long long)q.x, (long long)q.y,
                 q.vmin, q.vmax, (int)q.scale, (int)q.cmap, (int)q.pool, (long long)q.px);
        unsigned char *png = cache_get_png(&v->c, key, &resp->len);
        if (!png) {
            int complete = 0;
            st = q.kind == DFL_VIEW_THUMB ? render_thumb(v, &q, &png, &resp->len, &complete, &err)
                                          : render_tile(v, &q, &png, &resp->len, &complete, &err);
            if (!st && complete) cache_put_png(&v->c, key, png, resp->len);
        }
        if (!st) {
            resp->code = 200;
            resp->type = "image/png";
            resp->body = png;
            return;
        }
        break;
    }
    }
    if (st) respond_error(resp, status_code(st), err.msg);
    else respond_json(resp, 200, o);
}

void dfl_view_response_free(dfl_view_response *r)
{
    if (r && !r->is_static) free(r->body);
    if (r) r->body = NULL;
}
