/* view_grid.c — base grids: a whole map pooled once (in blocks, the dump lock taken
 * per block), a quick preview of a large map while the background builder makes its
 * full grid, and the robust colour limits of each grid. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view/view_internal.h"
#include "dump/dump_schema.h"

static void grid_drop(void *o)
{
    dfl__view_grid *g = o;
    if (g) free(g->v);
    free(g);
}

int64_t dfl__view_base_level(const dfl_view *v, int64_t R, int64_t T)
{
    int64_t n = R > T ? R : T, b = 0;
    while ((n + ((int64_t)1 << b) - 1) >> b > v->base_cells)
        b++;
    return b;
}

/* Read rows [r0, r0+n) x keys [c0, c1) of the request's map (minus the other dump's
 * when asked) into out [n][c1-c0]. Takes the dump lock. */
dfl_status dfl__view_read_box(dfl_view *v, const dfl_view_request *q, int64_t r0, int64_t n, int64_t c0, int64_t c1,
                              float *out, float *tmp, dfl_error *err)
{
    int64_t start[4] = {q->li, q->hi, r0, c0}, count[4] = {1, 1, n, c1 - c0};
    char p[96];
    dfl_status st;
    pthread_mutex_lock(&v->dump_lock);
    const dfl__view_sample *s = &v->d[q->dump].samples[q->sample];
    start[1] = dfl_dump_attn_head_index(&s->at, (dfl_dump_map)q->map, q->hi); /* Motif GDA: map2 by group */
    snprintf(p, sizeof p, "%s/" DFL_DS_ATTN "/%s", s->group, dfl_view_map_name(q->map));
    st = dfl_dump_read_slab_f32(v->d[q->dump].r, p, start, count, out, err);
    if (!st && q->minus >= 0) {
        const dfl__view_dump *o = &v->d[q->minus];
        const dfl__view_sample *so = &o->samples[q->sample];
        int64_t li = -1, hi = -1;
        for (int64_t i = 0; i < so->info.Ls; i++)
            if (so->at.layers[i] == q->layer) li = i;
        for (int64_t i = 0; i < so->info.Hs; i++)
            if (so->at.heads[i] == q->head) hi = i;
        int64_t st2[4] = {li, dfl_dump_attn_head_index(&so->at, (dfl_dump_map)q->map, hi), r0, c0};
        snprintf(p, sizeof p, "%s/" DFL_DS_ATTN "/%s", so->group, dfl_view_map_name(q->map));
        st = dfl_dump_read_slab_f32(o->r, p, st2, count, tmp, err);
        size_t cnt = (size_t)n * (size_t)(c1 - c0);
        for (size_t i = 0; !st && i < cnt; i++)
            out[i] -= tmp[i];
    }
    pthread_mutex_unlock(&v->dump_lock);
    return st;
}

static void grid_key(char *key, size_t cap, const dfl_view_request *q, dfl_pool_mode pool, int complete)
{
    snprintf(key, cap, "%s %lld %lld %lld %lld %d %lld %d", complete ? "grid" : "preview", (long long)q->dump,
             (long long)q->sample, (long long)q->li, (long long)q->hi, (int)q->map, (long long)q->minus, (int)pool);
}

/* An empty grid of the map's base geometry, all no data. */
static dfl_status grid_new(const dfl_view *v, const dfl_view_request *q, dfl__view_grid **out, dfl_error *err)
{
    const dfl__view_sample *s = &v->d[q->dump].samples[q->sample];
    const int64_t R = s->info.R, T = s->info.T;
    dfl__view_grid *g = calloc(1, sizeof *g);
    if (!g) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    g->b = dfl__view_base_level(v, R, T);
    g->gr = (R + ((int64_t)1 << g->b) - 1) >> g->b;
    g->gc = (T + ((int64_t)1 << g->b) - 1) >> g->b;
    g->diverging = q->map == DFL_VIEW_DIFF || q->minus >= 0;
    size_t n = (size_t)g->gr * (size_t)g->gc;
    if (!(g->v = dfl__alloc_array(n, sizeof *g->v))) {
        free(g);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        g->v[i] = NAN;
    *out = g;
    return DFL_OK;
}

/* The whole map pooled, read in blocks of about block_cells cells (the dump lock is
 * taken per block, so tile requests get in between). */
static dfl_status build_grid(dfl_view *v, const dfl_view_request *q, dfl_pool_mode mode, int64_t block_cells,
                             dfl__view_grid **out, dfl_error *err)
{
    const dfl__view_sample *s = &v->d[q->dump].samples[q->sample];
    const int64_t R = s->info.R, T = s->info.T;
    dfl__view_grid *g = NULL;
    dfl_status st = grid_new(v, q, &g, err);
    if (st) return st;
    int64_t block = block_cells / T;
    block = block < 32 ? 32 : block / 32 * 32;
    if (block > R) block = R;
    size_t cells = (size_t)block * (size_t)T;
    float *buf = dfl__alloc_array(cells, sizeof *buf); /* [block][T] */
    float *tmp = q->minus >= 0 ? dfl__alloc_array(cells, sizeof *tmp) : NULL;
    int64_t *valid = dfl__alloc_array((size_t)block, sizeof *valid); /* [block] */
    dfl_pool *pool = NULL;
    if (!buf || !valid || (q->minus >= 0 && !tmp)) st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    /* padded to whole pixels, so pixel edges fall on multiples of 2^b cells */
    if (!st) st = dfl_pool_create(g->gr << g->b, g->gc << g->b, g->gr, g->gc, mode, &pool, err);
    for (int64_t r0 = 0; !st && r0 < R; r0 += block) {
        int64_t n = R - r0 < block ? R - r0 : block;
        int64_t c1 = dfl__view_seen(s, r0 + n - 1); /* keys any row of the block sees */
        if ((st = dfl__view_read_box(v, q, r0, n, 0, c1, buf, tmp, err))) break;
        for (int64_t i = 0; i < n; i++)
            valid[i] = dfl__view_seen(s, r0 + i);
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
                                dfl__view_grid **out, dfl_error *err)
{
    const dfl__view_sample *s = &v->d[q->dump].samples[q->sample];
    const int64_t R = s->info.R, T = s->info.T;
    dfl__view_grid *g = NULL;
    dfl_status st = grid_new(v, q, &g, err);
    if (st) return st;
    int64_t stride = 32 * ((lower + PREVIEW_CELLS - 1) / PREVIEW_CELLS); /* rows per band */
    float *buf = dfl__alloc_array((size_t)32 * (size_t)T, sizeof *buf);  /* [32][T] */
    float *tmp = q->minus >= 0 ? dfl__alloc_array((size_t)32 * (size_t)T, sizeof *tmp) : NULL;
    float *line = dfl__alloc_array((size_t)g->gc, sizeof *line); /* [gc] */
    int64_t valid[32];
    if (!buf || !line || (q->minus >= 0 && !tmp)) st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t a = 0; !st && a < R; a += stride) {
        int64_t e = a + stride < R ? a + stride : R;
        int64_t r0 = e - 32 > a ? (e - 32) / 32 * 32 : a, n = e - r0;
        int64_t c1 = dfl__view_seen(s, e - 1);
        if ((st = dfl__view_read_box(v, q, r0, n, 0, c1, buf, tmp, err))) break;
        for (int64_t i = 0; i < n; i++)
            valid[i] = dfl__view_seen(s, r0 + i);
        dfl_pool *pool = NULL;
        if ((st = dfl_pool_create(n, g->gc << g->b, 1, g->gc, mode, &pool, err))) break;
        dfl_pool_rows_valid(pool, 0, n, buf, c1, valid);
        dfl_pool_result(pool, line);
        dfl_pool_destroy(pool);
        for (int64_t y = a >> g->b; y <= (e - 1) >> g->b && y < g->gr; y++) {
            int64_t last = ((y + 1) << g->b) < R ? ((y + 1) << g->b) - 1 : R - 1;
            int64_t seen = dfl__view_seen(s, last); /* keys this base row sees */
            for (int64_t x = 0; x < g->gc; x++)
                g->v[y * g->gc + x] = (x << g->b) < seen ? line[x] : NAN;
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
static dfl_status grid_limits(dfl__view_grid *g, const uint8_t *segments, int64_t T, dfl_error *err)
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

static dfl_status grid_finish(dfl_view *v, const dfl_view_request *q, const char *key, dfl__view_grid *g,
                              dfl__view_entry **out, dfl_error *err)
{
    dfl__view_entry *te = NULL;
    dfl_status st = dfl__view_tokens_get(v, q->dump, q->sample, &te, err);
    if (!st) {
        const dfl_dump_tokens *t = te->obj;
        st = grid_limits(g, t->segments, t->T, err);
    }
    dfl__view_cache_release(&v->c, te);
    if (st) {
        grid_drop(g);
        return st;
    }
    size_t bytes = sizeof *g + (size_t)g->gr * (size_t)g->gc * sizeof(float);
    if (!(*out = dfl__view_cache_put_obj(&v->c, key, g, bytes, grid_drop)))
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
void *dfl__view_builder(void *arg)
{
    dfl_view *v = arg;
    pthread_mutex_lock(&v->job_lock);
    for (;;) {
        while (!v->stop && v->njobs == 0)
            pthread_cond_wait(&v->job_cv, &v->job_lock);
        if (v->stop) break;
        dfl__view_job j = v->jobs[0]; /* stays queued while it runs, so it is not queued twice */
        pthread_mutex_unlock(&v->job_lock);
        char key[192];
        grid_key(key, sizeof key, &j.q, j.mode, 1);
        dfl__view_entry *e = dfl__view_cache_ref(&v->c, key);
        dfl__view_grid *g = NULL;
        dfl_error err;
        dfl_status st = DFL_OK;
        if (!e && !(st = build_grid(v, &j.q, j.mode, BLOCK_CELLS / 4, &g, &err)))
            st = grid_finish(v, &j.q, key, g, &e, &err);
        dfl__view_cache_release(&v->c, e);
        failure *f = st ? malloc(sizeof *f) : NULL;
        if (f) {
            char fkey[200];
            f->err = err;
            snprintf(fkey, sizeof fkey, "failed %s", key);
            dfl__view_cache_release(&v->c, dfl__view_cache_put_obj(&v->c, fkey, f, sizeof *f, failure_drop));
        }
        grid_key(key, sizeof key, &j.q, j.mode, 0);
        dfl__view_cache_age(&v->c, key);
        pthread_mutex_lock(&v->job_lock);
        memmove(v->jobs, v->jobs + 1, (size_t)(v->njobs - 1) * sizeof *v->jobs);
        v->njobs--;
    }
    pthread_mutex_unlock(&v->job_lock);
    return NULL;
}

/* The base grid of a checked request, referenced (dfl__view_cache_release when done). Small
 * maps are pooled here and now; a large one is previewed, and its full grid handed to
 * the background builder (g->complete tells which one came back). */
dfl_status dfl__view_grid_get(dfl_view *v, const dfl_view_request *q, dfl_pool_mode mode, dfl__view_entry **out,
                              dfl_error *err)
{
    char key[192], pkey[192];
    grid_key(key, sizeof key, q, mode, 1);
    if ((*out = dfl__view_cache_ref(&v->c, key))) return DFL_OK;
    const dfl__view_sample *s = &v->d[q->dump].samples[q->sample];
    int64_t lower = 0; /* the cells rows see (causal: the lower triangle) */
    for (int64_t r = 0; r < s->info.R; r++)
        lower += dfl__view_seen(s, r);
    int big = lower > 2 * PREVIEW_CELLS;
    grid_key(pkey, sizeof pkey, q, mode, 0);
    if (big) {
        char fkey[200];
        snprintf(fkey, sizeof fkey, "failed %s", key);
        dfl__view_entry *fe = dfl__view_cache_ref(&v->c, fkey);
        if (fe) {
            dfl_status st = dfl__fail(err, ((failure *)fe->obj)->err.status, "%s", ((failure *)fe->obj)->err.msg);
            dfl__view_cache_release(&v->c, fe);
            return st;
        }
    }
    if (big && (*out = dfl__view_cache_ref(&v->c, pkey))) {
        enqueue(v, q, mode); /* again, in case the full grid was evicted since */
        return DFL_OK;
    }
    pthread_mutex_lock(&v->build_lock);
    dfl_status st = DFL_OK;
    if (!(*out = dfl__view_cache_ref(&v->c, big ? pkey : key))) {
        dfl__view_grid *g = NULL;
        st = big ? build_preview(v, q, mode, lower, &g, err) : build_grid(v, q, mode, BLOCK_CELLS, &g, err);
        if (!st) st = grid_finish(v, q, big ? pkey : key, g, out, err);
    }
    pthread_mutex_unlock(&v->build_lock);
    if (!st && big) enqueue(v, q, mode);
    return st;
}
