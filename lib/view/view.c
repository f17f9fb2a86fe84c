/* view.c — the viewer: the dumps opened and listed (the catalog), each sample's
 * tokens on demand, and the one entry point that answers a request (view_json.c,
 * view_tile.c). The cache is view_cache.c, base grids view_grid.c; the HTTP side is
 * view_server.c; what they share and which lock guards what, view_internal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view/view_internal.h"
#include "dump/dump_generated.h"
#include "dump/dump_schema.h"

dfl_view_params dfl_view_params_default(void)
{
    dfl_view_params p = {NULL, 0, (size_t)256 << 20, DFL_VIEW_BASE};
    return p;
}

const dfl_view_catalog *dfl_view_catalog_of(const dfl_view *v)
{
    return &v->cat;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The maps of view sample s (group, kind, T set) and their scales into s->at and s->info;
 * tok [T] hashed into the signature. */
static dfl_status open_maps(dfl__view_dump *d, dfl__view_sample *s, const int32_t *tok, size_t nt, dfl_error *err)
{
    dfl_view_sample_info *in = &s->info;
    uint64_t h = fnv(1469598103934665603ull, tok, nt * sizeof *tok);
    h = fnv(h, &s->kind, sizeof s->kind);
    dfl_dump_sample at = {s->di, s->id, s->group}; /* attn/ under s->group */
    dfl_status st = dfl_dump_attn_open(d->r, &at, in->T, &s->at, err);
    if (st) return st;
    in->maps = s->at.maps;
    in->Ls = s->at.Ls;
    in->Hs = s->at.Hs;
    in->R = s->at.R;
    if (in->maps) h = fnv(h, s->at.rows, (size_t)in->R * sizeof *s->at.rows);
    in->layers = s->at.layers;
    in->heads = s->at.heads;
    in->rows = s->at.rows;
    in->sig = h;
    in->image = s->kind == DFL__VIEW_IMAGE;
    return DFL_OK;
}

static dfl_status open_sample(dfl__view_dump *d, dfl__view_sample *s, const dfl_dump_sample *ds, dfl_error *err)
{
    snprintf(s->group, sizeof s->group, "%s", ds->group);
    snprintf(s->sgroup, sizeof s->sgroup, "%s", ds->group);
    s->di = ds->index;
    s->id = ds->id;
    s->kind = DFL__VIEW_TEXT;
    s->causal = 1;
    s->lambda = d->lambda, s->nlambda = d->lambda ? d->L : 0;
    dfl_view_sample_info *in = &s->info;
    char p[96];
    snprintf(p, sizeof p, "%s/" DFL_DS_TOKENS, s->group);
    dfl_dump_dset_info ti;
    dfl_status st = dfl_dump_dataset_info(d->r, p, &ti, err);
    if (st) return st;
    in->T = ti.ndim == 1 ? ti.dims[0] : 0;
    int32_t *tok = NULL;
    size_t nt = 0;
    if ((st = dfl_dump_read_alloc(d->r, p, DFL_H5_I32, (void **)&tok, &nt, err))) return st;
    in->T = dfl_dump_sample_keys(d->r, ds, in->T); /* probe --generate: generated keys too */
    st = open_maps(d, s, tok, nt, err);
    free(tok);
    return st;
}

/* The captions of image sample ds with text-tower maps (text/NNN/, written since the
 * dump format had them): 0 for a dump without. */
static size_t caption_count(const dfl__view_dump *d, const dfl_dump_sample *ds)
{
    char p[96];
    size_t n = 0;
    for (;; n++) {
        snprintf(p, sizeof p, "%s/" DFL_DS_TEXT_GROUP "/" DFL_DS_ATTN_MAP1, ds->group, n);
        if (!dfl_dump_exists(d->r, p)) return n;
    }
}

/* An image sample of a DiffCLIP / CLIP dump: the image tower's maps (vision/attn/,
 * every row sees every token), then each caption's text-tower maps (text/NNN/attn/). */
static dfl_status open_image_sample(dfl__view_dump *d, dfl__view_sample *s, size_t self, const dfl_dump_sample *ds,
                                    size_t ncap, dfl_error *err)
{
    char p[96];
    snprintf(s->group, sizeof s->group, "%s/vision", ds->group);
    snprintf(s->sgroup, sizeof s->sgroup, "%s", ds->group);
    s->di = ds->index;
    s->id = ds->id;
    s->kind = DFL__VIEW_IMAGE;
    s->causal = 0;
    s->lambda = d->lambda, s->nlambda = d->lambda ? d->L : 0;
    s->parent = (int64_t)self, s->caption = -1;
    snprintf(p, sizeof p, "%s/" DFL_DS_VISION_SEGMENTS, ds->group);
    uint8_t *seg = NULL;
    size_t n = 0;
    dfl_status st = dfl_dump_read_alloc(d->r, p, DFL_H5_U8, (void **)&seg, &n, err);
    if (st) return st;
    s->info.T = (int64_t)n;
    int32_t *tok = dfl__alloc_array(n ? n : 1, sizeof *tok);
    if (!tok) st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < n; i++)
        tok[i] = seg[i];
    free(seg);
    if (!st) st = open_maps(d, s, tok, n, err);
    free(tok);
    for (size_t c = 0; !st && c < ncap; c++) {
        dfl__view_sample *t = s + 1 + c;
        snprintf(t->group, sizeof t->group, "%s/" DFL_DS_TEXT_GROUP, ds->group, c);
        snprintf(t->sgroup, sizeof t->sgroup, "%s", ds->group);
        snprintf(t->label, sizeof t->label, "%s · caption %zu", ds->id ? ds->id : "", c);
        t->di = ds->index;
        t->id = t->label;
        t->kind = DFL__VIEW_CAPTION;
        t->causal = 1;
        t->lambda = d->text_lambda, t->nlambda = d->text_lambda ? d->Lt : 0;
        t->parent = (int64_t)self, t->caption = (int64_t)c;
        snprintf(p, sizeof p, "%s/" DFL_DS_TOKENS, t->group);
        int32_t *ct = NULL;
        size_t nc = 0;
        if ((st = dfl_dump_read_alloc(d->r, p, DFL_H5_I32, (void **)&ct, &nc, err))) break;
        t->info.T = (int64_t)nc;
        st = open_maps(d, t, ct, nc, err);
        free(ct);
    }
    return st;
}

/* λ per layer at path into *out [n] (NULL, n 0 when absent or not of n layers). */
static dfl_status read_lambda(dfl__view_dump *d, const char *path, int64_t n, float **out, dfl_error *err)
{
    *out = NULL;
    if (!dfl_dump_exists(d->r, path)) return DFL_OK;
    size_t got = 0;
    dfl_status st = dfl_dump_read_alloc(d->r, path, DFL_H5_F32, (void **)out, &got, err);
    if (st) return st;
    if ((int64_t)got != n) {
        free(*out);
        *out = NULL;
    }
    return DFL_OK;
}

static dfl_status open_dump(dfl__view_dump *d, const char *path, dfl_error *err)
{
    dfl_status st = dfl_dump_open(path, &d->r, err);
    if (st) return st;
    const char *base = strrchr(path, '/');
    snprintf(d->name, sizeof d->name, "%s", base ? base + 1 : path);
    if (dfl_dump_get_attr_str(d->r, "/", DFL_ATTR_MODEL_TYPE, &d->model_type, err)) d->model_type = strdup("?");
    if (!d->model_type) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (dfl_dump_get_attr_i64(d->r, "/", DFL_ATTR_NUM_LAYERS, &d->L, err)) d->L = 0;
    if (dfl_dump_get_attr_i64(d->r, "/", DFL_ATTR_NUM_HEADS, &d->H, err)) d->H = 0;
    if ((st = read_lambda(d, DFL_DS_MODEL_LAMBDA, d->L, &d->lambda, err))) return st;
    d->image = !strcmp(d->model_type, "diffclip") || !strcmp(d->model_type, "clip");
    size_t ns = dfl_dump_sample_count(d->r);
    size_t *ncap = dfl__calloc_array(ns ? ns : 1, sizeof *ncap);
    if (!ncap) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    d->n = ns;
    if (d->image) {
        if (dfl_dump_exists(d->r, DFL_DS_MODEL_TEXT_LAMBDA)) {
            dfl_dump_dset_info li;
            if ((st = dfl_dump_dataset_info(d->r, DFL_DS_MODEL_TEXT_LAMBDA, &li, err))) goto out;
            d->Lt = li.ndim == 1 ? li.dims[0] : 0;
            if ((st = read_lambda(d, DFL_DS_MODEL_TEXT_LAMBDA, d->Lt, &d->text_lambda, err))) goto out;
        }
        for (size_t i = 0; i < ns; i++)
            d->n += ncap[i] = caption_count(d, dfl_dump_sample_at(d->r, i));
    }
    d->samples = dfl__calloc_array(d->n ? d->n : 1, sizeof *d->samples);
    if (!d->samples) {
        st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0, k = 0; !st && i < ns; i++) {
        const dfl_dump_sample *ds = dfl_dump_sample_at(d->r, i);
        st = d->image ? open_image_sample(d, &d->samples[k], k, ds, ncap[i], err)
                      : open_sample(d, &d->samples[k], ds, err);
        k += 1 + ncap[i];
    }
out:
    free(ncap);
    return st;
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
        dfl__view_dump *d = &v->d[i];
        for (size_t k = 0; d->samples && k < d->n; k++)
            dfl_dump_attn_free(&d->samples[k].at);
        free(d->samples);
        free(d->lambda);
        free(d->text_lambda);
        free(d->model_type);
        dfl_dump_close(d->r);
        free(v->sinfo[i]);
    }
    dfl__view_cache_clear(&v->c);
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
        return dfl__fail(err, DFL_ERR_USAGE,
                         "a cache of %zu MiB is too small for base grids of %lld cells: need %zu MiB",
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
        dfl__view_dump *d = &v->d[i];
        v->sinfo[i] = dfl__calloc_array(d->n ? d->n : 1, sizeof *v->sinfo[i]);
        if (!v->sinfo[i]) {
            st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t k = 0; k < d->n; k++)
            v->sinfo[i][k] = d->samples[k].info;
        v->dinfo[i].nsamples = d->n;
        v->dinfo[i].samples = v->sinfo[i];
    }
    if (st) {
        dfl_view_close(v);
        return st;
    }
    v->cat.ndumps = v->nd;
    v->cat.dumps = v->dinfo;
    if (pthread_create(&v->worker, NULL, dfl__view_builder, v)) {
        dfl_view_close(v);
        return dfl__fail(err, DFL_ERR_NOMEM, "cannot start the background thread");
    }
    v->worker_started = 1;
    *out = v;
    return DFL_OK;
}

/* ------------------------------------------------------------ sample tokens */

/* Per sample, loaded on first use: tokens, segments, token text. */
static void tokens_drop(void *o)
{
    dfl_dump_tokens_free(o);
    free(o);
}

/* An image sample's tokens as the text side shows them: token t is image token t (0
 * the class token, 1 + p patch p), segments 1 for the class token, 2 the object's
 * patches, 0 the background's (vision/segments: the bos, answer and context colours),
 * text "cls" and "(row,col)" of each patch. */
static dfl_status image_tokens(const dfl__view_dump *d, const dfl__view_sample *s, dfl_dump_tokens *t, dfl_error *err)
{
    char p[96];
    snprintf(p, sizeof p, "%s/" DFL_DS_VISION_SEGMENTS, s->sgroup);
    size_t n = 0;
    uint8_t *seg = NULL;
    dfl_status st = dfl_dump_read_alloc(d->r, p, DFL_H5_U8, (void **)&seg, &n, err);
    if (st) return st;
    int64_t T = (int64_t)n, G = 1;
    while ((G + 1) * (G + 1) <= T - 1)
        G++;
    t->T = T;
    t->segments = seg;
    t->tokens = dfl__alloc_array(n, sizeof *t->tokens);
    t->text = dfl__calloc_array(n, sizeof *t->text);
    if (!t->tokens || !t->text) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < T; i++) {
        char lab[48];
        t->tokens[i] = (int32_t)i;
        if (i)
            snprintf(lab, sizeof lab, "(%lld,%lld)", (long long)((i - 1) / G), (long long)((i - 1) % G));
        else
            snprintf(lab, sizeof lab, "cls");
        if (!(t->text[i] = strdup(lab))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    return DFL_OK;
}

dfl_status dfl__view_tokens_get(dfl_view *v, int64_t di, int64_t si, dfl__view_entry **out, dfl_error *err)
{
    char key[64];
    snprintf(key, sizeof key, "text %lld %lld", (long long)di, (long long)si);
    if ((*out = dfl__view_cache_ref(&v->c, key))) return DFL_OK;
    const dfl__view_dump *d = &v->d[di];
    const dfl__view_sample *s = &d->samples[si];
    dfl_dump_tokens *t = calloc(1, sizeof *t);
    if (!t) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&v->dump_lock);
    dfl_status st;
    if (s->kind == DFL__VIEW_IMAGE) {
        st = image_tokens(d, s, t, err);
    } else if (s->kind == DFL__VIEW_CAPTION) {
        dfl_dump_sample cs = {s->di, s->id, s->group};
        st = dfl_dump_tokens_read(d->r, &cs, t, err);
    } else {
        st = dfl_dump_tokens_read(d->r, dfl_dump_sample_at(d->r, s->di), t, err);
        int64_t prompt_T; /* probe --generate: the maps' generated keys get their tokens */
        if (!st) st = dfl_dump_tokens_join_generated(d->r, dfl_dump_sample_at(d->r, s->di), t, &prompt_T, err);
    }
    if (st) dfl_dump_tokens_free(t);
    pthread_mutex_unlock(&v->dump_lock);
    if (st) {
        free(t);
        return st;
    }
    size_t bytes = (size_t)t->T * 5 + sizeof *t;
    for (int64_t i = 0; t->text && i < t->T; i++)
        bytes += strlen(t->text[i]) + 16;
    if (!(*out = dfl__view_cache_put_obj(&v->c, key, t, bytes, tokens_drop)))
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
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
    case DFL_VIEW_DUMPS: respond_json(resp, 200, dfl__view_dumps_json(v)); return;
    case DFL_VIEW_COLORMAP: respond_json(resp, 200, dfl__view_colormap_json(q.cmap)); return;
    case DFL_VIEW_TICKS: st = dfl__view_ticks_json(&q, &o, &err); break;
    case DFL_VIEW_SAMPLE: st = dfl__view_sample_json(v, &q, &o, &err); break;
    case DFL_VIEW_LIMITS: st = dfl__view_limits_json(v, &q, &o, &err); break;
    case DFL_VIEW_CELL: st = dfl__view_cell_json(v, &q, &o, &err); break;
    case DFL_VIEW_ROW: st = dfl__view_row_json(v, &q, &o, &err); break;
    case DFL_VIEW_IMAGE: {
        char key[64];
        snprintf(key, sizeof key, "image %lld %lld", (long long)q.dump, (long long)q.sample);
        unsigned char *png = dfl__view_cache_get_png(&v->c, key, &resp->len);
        if (!png && !(st = dfl__view_render_image(v, &q, &png, &resp->len, &err)))
            dfl__view_cache_put_png(&v->c, key, png, resp->len);
        if (!st) {
            resp->code = 200;
            resp->type = "image/png";
            resp->body = png;
            return;
        }
        break;
    }
    case DFL_VIEW_TILE_REQ:
    case DFL_VIEW_THUMB: {
        /* the canonical request is the cache key: equal requests, equal tiles */
        char key[192];
        snprintf(key, sizeof key, "%s %lld %lld %lld %lld %d %lld %lld %lld %lld %.9g %.9g %d %d %d %lld",
                 q.kind == DFL_VIEW_THUMB ? "thumb" : "tile", (long long)q.dump, (long long)q.sample, (long long)q.li,
                 (long long)q.hi, (int)q.map, (long long)q.minus, (long long)q.z, (long long)q.x, (long long)q.y,
                 q.vmin, q.vmax, (int)q.scale, (int)q.cmap, (int)q.pool, (long long)q.px);
        unsigned char *png = dfl__view_cache_get_png(&v->c, key, &resp->len);
        if (!png) {
            int complete = 0;
            st = q.kind == DFL_VIEW_THUMB ? dfl__view_render_thumb(v, &q, &png, &resp->len, &complete, &err)
                                          : dfl__view_render_tile(v, &q, &png, &resp->len, &complete, &err);
            if (!st && complete) dfl__view_cache_put_png(&v->c, key, png, resp->len);
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
    if (st)
        respond_error(resp, status_code(st), err.msg);
    else
        respond_json(resp, 200, o);
}

void dfl_view_response_free(dfl_view_response *r)
{
    if (r && !r->is_static) free(r->body);
    if (r) r->body = NULL;
}
