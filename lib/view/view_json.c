/* view_json.c — the JSON answers: the dumps listed, a sample's tokens and statistics,
 * one cell, one row with its top keys, a colormap, colour-bar ticks and a map's limits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view/view_internal.h"
#include "dump/dump_schema.h"

/* dfl__view_kind as the API names it */
static const char *const KINDS[] = {"text", "image", "caption"};

static cJSON *int_array(const int32_t *a, int64_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (int64_t i = 0; arr && i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(a[i]));
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
    for (size_t i = 0; arr && i < n; i++)
        cJSON_AddItemToArray(arr, num(a[i]));
    return arr;
}

cJSON *dfl__view_dumps_json(const dfl_view *v)
{
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "dumps");
    for (size_t i = 0; i < v->nd; i++) {
        const dfl__view_dump *d = &v->d[i];
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
            const dfl__view_sample *s = &d->samples[k];
            cJSON *so = cJSON_CreateObject();
            cJSON_AddItemToArray(ss, so);
            char sig[24];
            snprintf(sig, sizeof sig, "%016llx", (unsigned long long)s->info.sig);
            cJSON_AddNumberToObject(so, "index", (double)k);
            cJSON_AddStringToObject(so, "id", s->id ? s->id : "");
            cJSON_AddStringToObject(so, "kind", KINDS[s->kind]);
            cJSON_AddBoolToObject(so, "causal", s->causal);
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
static cJSON *dataset_json(const dfl__view_dump *d, const char *path, dfl_error *err)
{
    if (!dfl_dump_exists(d->r, path)) return NULL;
    dfl_dump_dset_info info;
    if (dfl_dump_dataset_info(d->r, path, &info, err) || info.is_string) return NULL;
    float *a = NULL;
    size_t n = 0;
    if (dfl_dump_read_alloc(d->r, path, DFL_H5_F32, (void **)&a, &n, err)) return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    for (int i = 0; i < info.ndim; i++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)info.dims[i]));
    cJSON_AddItemToObject(o, "data", float_array(a, n));
    free(a);
    return o;
}

/* probe --generate: "generated" {start (the prompt's length), tokens, text or null}. */
static void generated_json(const dfl__view_dump *d, const dfl__view_sample *s, cJSON *o)
{
    char p[128], tp[128], xp[128];
    snprintf(p, sizeof p, "%s/" DFL_DS_GENERATED_TOKENS, s->group);
    snprintf(tp, sizeof tp, "%s/" DFL_DS_TOKENS, s->group);
    snprintf(xp, sizeof xp, "%s/" DFL_DS_GENERATED_TEXT, s->group);
    dfl_error e;
    dfl_dump_dset_info info;
    int32_t *gen = NULL;
    size_t n = 0, nt = 0;
    char **text = NULL;
    if (!dfl_dump_exists(d->r, p) || dfl_dump_dataset_info(d->r, tp, &info, &e) ||
        dfl_dump_read_alloc(d->r, p, DFL_H5_I32, (void **)&gen, &n, &e))
        return;
    cJSON *g = cJSON_AddObjectToObject(o, "generated");
    cJSON_AddNumberToObject(g, "start", (double)info.dims[0]);
    cJSON_AddItemToObject(g, "tokens", int_array(gen, (int64_t)n));
    if (dfl_dump_exists(d->r, xp) && !dfl_dump_read_strings(d->r, xp, &text, &nt, &e) && nt == 1)
        cJSON_AddStringToObject(g, "text", text[0]);
    else
        cJSON_AddNullToObject(g, "text");
    if (text) dfl_dump_strings_free(text, nt);
    free(gen);
}

/* A numeric dataset read whole as f32 (*n values; NULL when absent or unreadable). */
static float *read_floats(const dfl__view_dump *d, const char *path, size_t *n)
{
    float *a = NULL;
    dfl_error e;
    *n = 0;
    if (!dfl_dump_exists(d->r, path) || dfl_dump_read_alloc(d->r, path, DFL_H5_F32, (void **)&a, n, &e)) return NULL;
    return a;
}

/* Image and caption samples (dump lock held): "image" {size S, grid G, geometry, box in
 * the input's pixels or null} and "captions" [{sample, text, similarity, zero_shot}]
 * of the image sample; a caption sample also names its image sample and caption. */
static void image_json(const dfl_view *v, int64_t di, const dfl__view_sample *s, cJSON *o)
{
    const dfl__view_dump *d = &v->d[di];
    char p[96];
    size_t n = 0;
    cJSON_AddNumberToObject(o, "image_sample", (double)s->parent);
    if (s->kind == DFL__VIEW_CAPTION) cJSON_AddNumberToObject(o, "caption", (double)s->caption);
    snprintf(p, sizeof p, "%s/" DFL_DS_IMAGE_GEOMETRY, s->sgroup);
    float *geo = read_floats(d, p, &n);
    if (geo && n == 7) {
        cJSON *io = cJSON_AddObjectToObject(o, "image");
        cJSON_AddNumberToObject(io, "size", geo[4]);
        cJSON_AddNumberToObject(io, "patch", geo[5]);
        cJSON_AddNumberToObject(io, "grid", geo[6]);
        cJSON_AddItemToObject(io, "geometry", float_array(geo, 7));
        size_t nb = 0, nz = 0;
        snprintf(p, sizeof p, "%s/" DFL_DS_IMAGE_BOX, s->sgroup);
        float *box = read_floats(d, p, &nb);
        snprintf(p, sizeof p, "%s/" DFL_DS_IMAGE_SIZE, s->sgroup);
        float *size = read_floats(d, p, &nz);
        if (box && nb == 4 && size && nz == 2 && size[0] > 0 && size[1] > 0) {
            /* original pixels to the input's: x · resized_w / width − left (format.md) */
            float b[4];
            for (int i = 0; i < 4; i++)
                b[i] = i % 2 ? box[i] * geo[1] / size[1] - geo[3] : box[i] * geo[0] / size[0] - geo[2];
            cJSON_AddItemToObject(io, "box", float_array(b, 4));
        } else {
            cJSON_AddNullToObject(io, "box");
        }
        free(box), free(size);
    }
    free(geo);
    snprintf(p, sizeof p, "%s/" DFL_DS_SCORES_SIMILARITY, s->sgroup);
    size_t ns = 0, nzs = 0, nt = 0;
    float *sim = read_floats(d, p, &ns);
    snprintf(p, sizeof p, "%s/" DFL_DS_SCORES_ZERO_SHOT, s->sgroup);
    float *zs = read_floats(d, p, &nzs);
    snprintf(p, sizeof p, "%s/" DFL_DS_CAPTION_TEXT, s->sgroup);
    char **text = NULL;
    dfl_error e;
    if (dfl_dump_exists(d->r, p) && dfl_dump_read_strings(d->r, p, &text, &nt, &e)) text = NULL, nt = 0;
    cJSON *caps = cJSON_AddArrayToObject(o, "captions");
    for (size_t i = 0; sim && i < ns; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddItemToArray(caps, c);
        cJSON_AddNumberToObject(c, "caption", (double)i);
        /* its text-tower maps: the view sample after the image sample's, when stored */
        int64_t k = s->parent + 1 + (int64_t)i;
        if ((size_t)k < d->n && d->samples[k].kind == DFL__VIEW_CAPTION && d->samples[k].parent == s->parent)
            cJSON_AddNumberToObject(c, "sample", (double)k);
        else
            cJSON_AddNullToObject(c, "sample");
        if (text && i < nt)
            cJSON_AddStringToObject(c, "text", text[i]);
        else
            cJSON_AddNullToObject(c, "text");
        cJSON_AddItemToObject(c, "similarity", num(sim[i]));
        cJSON_AddItemToObject(c, "zero_shot", zs && i < nzs ? num(zs[i]) : cJSON_CreateNull());
    }
    if (text) dfl_dump_strings_free(text, nt);
    free(sim), free(zs);
}

dfl_status dfl__view_sample_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err)
{
    dfl__view_entry *te = NULL;
    dfl_status st = dfl__view_tokens_get(v, q->dump, q->sample, &te, err);
    if (st) return st;
    const dfl_dump_tokens *t = te->obj;
    const dfl__view_dump *d = &v->d[q->dump];
    const dfl__view_sample *s = &d->samples[q->sample];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "dump", (double)q->dump);
    cJSON_AddNumberToObject(o, "index", (double)q->sample);
    cJSON_AddStringToObject(o, "id", s->id ? s->id : "");
    cJSON_AddNumberToObject(o, "T", (double)t->T);
    cJSON_AddItemToObject(o, "tokens", int_array(t->tokens, t->T));
    cJSON *seg = cJSON_AddArrayToObject(o, "segments");
    for (int64_t i = 0; i < t->T; i++)
        cJSON_AddItemToArray(seg, cJSON_CreateNumber(t->segments[i]));
    if (t->text)
        cJSON_AddItemToObject(o, "text", cJSON_CreateStringArray((const char *const *)t->text, (int)t->T));
    else
        cJSON_AddNullToObject(o, "text");
    cJSON_AddItemToObject(o, "rows", int_array(s->at.rows, s->info.R));
    cJSON_AddItemToObject(o, "lambda", s->lambda ? float_array(s->lambda, (size_t)s->nlambda) : cJSON_CreateNull());
    static const char *const stats[] = {DFL_DS_NOISE_SHARES,        DFL_DS_NOISE_SHARES_ABS, DFL_DS_NOISE_ENTROPY,
                                        DFL_DS_NOISE_NEGATIVE_MASS, DFL_DS_LOGITS_TOP,       DFL_DS_HIDDEN_TOP};
    cJSON *sj = cJSON_AddObjectToObject(o, "stats");
    pthread_mutex_lock(&v->dump_lock);
    for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++) {
        char p[96];
        snprintf(p, sizeof p, "%s/%s", s->group, stats[i]);
        dfl_error e2;
        cJSON *x = dataset_json(d, p, &e2);
        if (x) cJSON_AddItemToObject(sj, stats[i], x);
    }
    generated_json(d, s, o);
    cJSON_AddStringToObject(o, "kind", KINDS[s->kind]);
    cJSON_AddBoolToObject(o, "causal", s->causal);
    if (s->kind != DFL__VIEW_TEXT) image_json(v, q->dump, s, o);
    char p[96], *names = NULL;
    /* the segment names: on the noise group (text dumps), on vision/noise/shares (images) */
    snprintf(p, sizeof p, s->kind == DFL__VIEW_IMAGE ? "%s/" DFL_DS_VISION_SHARES : "%s/" DFL_DS_NOISE,
             s->kind == DFL__VIEW_IMAGE ? s->sgroup : s->group);
    dfl_error e2;
    if (dfl_dump_exists(d->r, p) && !dfl_dump_get_attr_str(d->r, p, DFL_ATTR_SEGMENTS, &names, &e2)) {
        cJSON_AddStringToObject(sj, "segment_names", names);
        free(names);
    }
    pthread_mutex_unlock(&v->dump_lock);
    dfl__view_cache_release(&v->c, te);
    *out = o;
    return DFL_OK;
}

dfl_status dfl__view_cell_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err)
{
    dfl__view_entry *te = NULL;
    dfl_status st = dfl__view_tokens_get(v, q->dump, q->sample, &te, err);
    if (st) return st;
    const dfl_dump_tokens *t = te->obj;
    const dfl__view_dump *d = &v->d[q->dump];
    const dfl__view_sample *s = &d->samples[q->sample];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "q", (double)q->q);
    cJSON_AddNumberToObject(o, "k", (double)q->k);
    cJSON_AddBoolToObject(o, "masked", s->causal && q->k > q->q);
    int64_t pos[2] = {q->q, q->k};
    const char *names[2] = {"query", "key"};
    for (int i = 0; i < 2; i++) {
        cJSON *tk = cJSON_AddObjectToObject(o, names[i]);
        cJSON_AddNumberToObject(tk, "pos", (double)pos[i]);
        cJSON_AddNumberToObject(tk, "token", t->tokens[pos[i]]);
        cJSON_AddNumberToObject(tk, "segment", t->segments[pos[i]]);
        if (t->text)
            cJSON_AddStringToObject(tk, "text", t->text[pos[i]]);
        else
            cJSON_AddNullToObject(tk, "text");
    }
    int64_t layer = q->layer;
    int64_t start[4] = {q->li, q->hi, q->ri, q->k}, count[4] = {1, 1, 1, 1};
    pthread_mutex_lock(&v->dump_lock);
    /* λ of the layer, or DIFF V2's σ(λ) of this row and head (the sample's lambda [L, T, H]) */
    char lp[96];
    snprintf(lp, sizeof lp, "%s/" DFL_DS_LAMBDA, s->group);
    float row_lam = NAN;
    int64_t lstart[3] = {layer, q->q, q->head}, lcount[3] = {1, 1, 1};
    if (!s->lambda && s->kind == DFL__VIEW_TEXT && dfl_dump_exists(d->r, lp))
        st = dfl_dump_read_slab_f32(d->r, lp, lstart, lcount, &row_lam, err);
    cJSON_AddItemToObject(o, "lambda",
                          s->lambda && layer < s->nlambda ? num(s->lambda[layer])
                          : !isnan(row_lam)               ? num(row_lam)
                                                          : cJSON_CreateNull());
    for (int m = 0; !st && m < DFL_VIEW_NMAPS; m++) {
        if (!(s->info.maps & (1u << m))) continue;
        char p[96];
        float x = NAN;
        snprintf(p, sizeof p, "%s/attn/%s", s->group, dfl_view_map_name((dfl_view_map)m));
        start[1] = dfl_dump_attn_head_index(&s->at, (dfl_dump_map)m, q->hi); /* Motif GDA: map2 by group */
        st = dfl_dump_read_slab_f32(d->r, p, start, count, &x, err);
        cJSON_AddItemToObject(o, dfl_view_map_name((dfl_view_map)m), num(x));
    }
    pthread_mutex_unlock(&v->dump_lock);
    dfl__view_cache_release(&v->c, te);
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

dfl_status dfl__view_row_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err)
{
    const dfl__view_sample *s = &v->d[q->dump].samples[q->sample];
    const int64_t n = dfl__view_seen(s, q->ri); /* causal: keys 0 .. q; the image tower: all */
    float *row = dfl__alloc_array((size_t)n, sizeof *row), *tmp = dfl__alloc_array((size_t)n, sizeof *tmp);
    keyval *kv = dfl__alloc_array((size_t)n, sizeof *kv);
    int64_t w = q->width < n ? q->width : n;
    float *strip = dfl__alloc_array((size_t)w, sizeof *strip);
    dfl__view_entry *te = NULL;
    dfl_status st = !row || !tmp || !kv || !strip ? dfl__fail(err, DFL_ERR_NOMEM, "out of memory") : DFL_OK;
    if (!st) st = dfl__view_read_box(v, q, q->ri, 1, 0, n, row, tmp, err);
    if (!st) st = dfl__view_tokens_get(v, q->dump, q->sample, &te, err);
    if (!st) {
        const dfl_dump_tokens *t = te->obj;
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
            if (t->text)
                cJSON_AddStringToObject(e, "text", t->text[kv[i].k]);
            else
                cJSON_AddNumberToObject(e, "token", t->tokens[kv[i].k]);
        }
        cJSON_AddItemToObject(o, "strip", float_array(strip, (size_t)w));
        *out = o;
    }
    dfl__view_cache_release(&v->c, te);
    free(row);
    free(tmp);
    free(kv);
    free(strip);
    return st;
}

cJSON *dfl__view_colormap_json(dfl_cmap cm)
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

/* Colour-bar ticks as attnmap draws them (dfl_ticks_for_norm, dfl_tick_label), with
 * each tick's position t in [0, 1] along the bar (dfl_norm_apply). */
dfl_status dfl__view_ticks_json(const dfl_view_request *q, cJSON **out, dfl_error *err)
{
    dfl_norm nm = dfl__view_tile_norm(q, q->diverging);
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

/* Limits over the grid pooled as the tiles will be (mean or max), as attnmap takes
 * them over the pooled image it draws. */
dfl_status dfl__view_limits_json(dfl_view *v, const dfl_view_request *q, cJSON **out, dfl_error *err)
{
    dfl__view_entry *e = NULL;
    dfl_status st = dfl__view_grid_get(v, q, q->pool, &e, err);
    if (st) return st;
    const dfl__view_grid *g = e->obj;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "diverging", g->diverging);
    cJSON_AddNumberToObject(o, "vmin", g->diverging ? -g->q995 : (g->lo < 0 ? g->lo : 0));
    cJSON_AddNumberToObject(o, "vmax", g->q995);
    cJSON_AddNumberToObject(o, "data_min", g->lo);
    cJSON_AddNumberToObject(o, "data_max", g->hi);
    cJSON_AddNumberToObject(o, "base_level", (double)g->b);
    cJSON_AddBoolToObject(o, "complete", g->complete);
    dfl__view_cache_release(&v->c, e);
    *out = o;
    return DFL_OK;
}
