/* clip.c — DiffCLIP / CLIP config.json parsing and weight binding (clip.h). */
#include "model/clip.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsondoc.h"
#include "model/safetensors.h"

/* ---------------------------------------------------------------- config */

typedef struct reader {
    const char *label, *where;
    dfl_error *err;
} reader;

/* An integer key in [lo, hi]; required. */
static dfl_status get_int(reader *r, const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: %s.%s is missing", r->label, r->where, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: %s.%s must be an integer", r->label, r->where, key);
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: %s.%s = %g is out of range [%lld, %lld]", r->label, r->where, key,
                         v->valuedouble, (long long)lo, (long long)hi);
    *out = (int64_t)v->valuedouble;
    return DFL_OK;
}

static dfl_status get_num(reader *r, const cJSON *o, const char *key, double lo, double hi, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: %s.%s is missing", r->label, r->where, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: %s.%s must be a number in [%g, %g]", r->label, r->where, key, lo,
                         hi);
    *out = v->valuedouble;
    return DFL_OK;
}

/* Every member of o must be one of keys (NULL-terminated): a key we do not read could
 * change the maths. */
static dfl_status only_keys(reader *r, const cJSON *o, const char *const *keys)
{
    for (const cJSON *c = o->child; c; c = c->next) {
        int known = 0;
        for (const char *const *k = keys; *k && !known; k++)
            known = strcmp(c->string, *k) == 0;
        if (!known) return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: unknown key %s.%s", r->label, r->where, c->string);
    }
    return DFL_OK;
}

static dfl_status parse_tower(reader *r, const cJSON *root, dfl_clip_tower_kind kind, int diff,
                              dfl_clip_tower_config *t)
{
    static const char *const vision_keys[] = {"image_size", "patch_size", "width",          "layers",      "heads",
                                              "mlp_width",  "hidden_act", "layer_norm_eps", "lambda_init", NULL};
    static const char *const text_keys[] = {"context_length", "vocab_size", "width",          "layers",      "heads",
                                            "mlp_width",      "hidden_act", "layer_norm_eps", "lambda_init", NULL};
    r->where = kind == DFL_CLIP_VISION ? "vision_config" : "text_config";
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, r->where);
    if (!cJSON_IsObject(o)) return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: %s must be an object", r->label, r->where);
    dfl_status s = only_keys(r, o, kind == DFL_CLIP_VISION ? vision_keys : text_keys);
    if (!s) s = get_int(r, o, "width", 1, 1 << 16, &t->width);
    if (!s) s = get_int(r, o, "layers", 1, 1024, &t->layers);
    if (!s) s = get_int(r, o, "heads", 1, 1024, &t->heads);
    if (!s) s = get_int(r, o, "mlp_width", 1, 1 << 20, &t->mlp_width);
    if (!s) s = get_num(r, o, "layer_norm_eps", 0.0, 1.0, &t->layer_norm_eps);
    if (s) return s;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "hidden_act");
    if (!cJSON_IsString(act) || (strcmp(act->valuestring, "gelu") && strcmp(act->valuestring, "quick_gelu")))
        return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: %s.hidden_act must be \"gelu\" or \"quick_gelu\"", r->label,
                         r->where);
    t->act = strcmp(act->valuestring, "gelu") ? DFL_CLIP_QUICK_GELU : DFL_CLIP_GELU;
    if (t->width % t->heads)
        return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: %s.width %lld is not a multiple of heads %lld", r->label,
                         r->where, (long long)t->width, (long long)t->heads);
    if (diff) {
        if (t->heads % 2)
            return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: %s.heads must be even for diffclip (pairs of maps), not %lld",
                             r->label, r->where, (long long)t->heads);
        s = get_num(r, o, "lambda_init", -10.0, 10.0, &t->lambda_init);
    } else if (cJSON_GetObjectItemCaseSensitive(o, "lambda_init")) {
        return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: %s.lambda_init is for diffclip only", r->label, r->where);
    }
    if (s) return s;
    if (kind == DFL_CLIP_VISION) {
        s = get_int(r, o, "image_size", 1, 1 << 14, &t->image_size);
        if (!s) s = get_int(r, o, "patch_size", 1, 1 << 14, &t->patch_size);
        if (!s && t->image_size % t->patch_size)
            s = dfl__fail(r->err, DFL_ERR_CONFIG,
                          "%s: vision_config.image_size %lld is not a multiple of patch_size %lld", r->label,
                          (long long)t->image_size, (long long)t->patch_size);
    } else {
        s = get_int(r, o, "context_length", 1, 1 << 16, &t->context_length);
        if (!s) s = get_int(r, o, "vocab_size", 1, (int64_t)1 << 30, &t->vocab_size);
    }
    return s;
}

static dfl_status parse_preprocess(reader *r, const cJSON *root, dfl_clip_preprocess *p)
{
    static const char *const keys[] = {"resize", "crop", "interpolation", "mean", "std", NULL};
    r->where = "preprocess";
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "preprocess");
    if (!cJSON_IsObject(o)) return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: preprocess must be an object", r->label);
    dfl_status s = only_keys(r, o, keys);
    if (!s) s = get_int(r, o, "resize", 1, 1 << 14, &p->resize);
    if (!s) s = get_int(r, o, "crop", 1, 1 << 14, &p->crop);
    if (s) return s;
    if (p->crop > p->resize)
        return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: preprocess.crop %lld is larger than resize %lld", r->label,
                         (long long)p->crop, (long long)p->resize);
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "interpolation");
    if (!cJSON_IsString(in) || (strcmp(in->valuestring, "bilinear") && strcmp(in->valuestring, "bicubic")))
        return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: preprocess.interpolation must be \"bilinear\" or \"bicubic\"",
                         r->label);
    p->interp = strcmp(in->valuestring, "bicubic") ? DFL_CLIP_BILINEAR : DFL_CLIP_BICUBIC;
    for (int w = 0; w < 2; w++) {
        const char *key = w ? "std" : "mean";
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3)
            return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: preprocess.%s must be 3 numbers", r->label, key);
        for (int c = 0; c < 3; c++) {
            const cJSON *v = cJSON_GetArrayItem(a, c);
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || (w && !(v->valuedouble > 0)))
                return dfl__fail(r->err, DFL_ERR_CONFIG, "%s: preprocess.%s[%d] must be a %snumber", r->label, key, c,
                                 w ? "positive " : "");
            (w ? p->std : p->mean)[c] = v->valuedouble;
        }
    }
    return DFL_OK;
}

dfl_status dfl_clip_config_parse(const char *json, size_t len, const char *label, dfl_clip_config *cfg, dfl_error *err)
{
    static const char *const keys[] = {"model_type", "embed_dim", "vision_config", "text_config", "preprocess", NULL};
    const char *why;
    size_t at;
    cJSON *root = dfl__json_parse(json, len, &why, &at);
    if (!root) return dfl__fail(err, DFL_ERR_FORMAT, "%s: not valid JSON: %s at byte %zu", label, why, at + 1);
    dfl_clip_config c;
    memset(&c, 0, sizeof c);
    reader r = {label, "config", err};
    dfl_status s = DFL_OK;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (!cJSON_IsObject(root)) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: not a JSON object", label);
    } else if (!cJSON_IsString(mt) || (strcmp(mt->valuestring, "diffclip") && strcmp(mt->valuestring, "clip"))) {
        s = dfl__fail(err, DFL_ERR_CONFIG, "%s: model_type must be \"diffclip\" or \"clip\"", label);
    } else {
        snprintf(c.model_type, sizeof c.model_type, "%s", mt->valuestring);
        c.diff = strcmp(mt->valuestring, "diffclip") == 0;
        s = only_keys(&r, root, keys);
        if (!s) s = get_int(&r, root, "embed_dim", 1, 1 << 16, &c.embed_dim);
        if (!s) s = parse_tower(&r, root, DFL_CLIP_VISION, c.diff, &c.tower[DFL_CLIP_VISION]);
        if (!s) s = parse_tower(&r, root, DFL_CLIP_TEXT, c.diff, &c.tower[DFL_CLIP_TEXT]);
        if (!s) s = parse_preprocess(&r, root, &c.pre);
        if (!s && c.pre.crop != c.tower[DFL_CLIP_VISION].image_size)
            s = dfl__fail(err, DFL_ERR_CONFIG, "%s: preprocess.crop %lld differs from vision_config.image_size %lld",
                          label, (long long)c.pre.crop, (long long)c.tower[DFL_CLIP_VISION].image_size);
    }
    cJSON_Delete(root);
    if (!s) *cfg = c;
    return s;
}

int dfl_clip_config_is_clip(const char *json, size_t len)
{
    const char *why;
    size_t at;
    cJSON *root = dfl__json_parse(json, len, &why, &at);
    const cJSON *mt = root ? cJSON_GetObjectItemCaseSensitive(root, "model_type") : NULL;
    int yes = cJSON_IsString(mt) && (!strcmp(mt->valuestring, "diffclip") || !strcmp(mt->valuestring, "clip"));
    cJSON_Delete(root);
    return yes;
}

/* ---------------------------------------------------------------- binding */

typedef struct binder {
    dfl_clip_model *m;
    char *used; /* [count] tensor used */
    dfl_error *err;
} binder;

static dfl_status find(binder *b, const char *name, int ndim, const int64_t *shape, const dfl_tensor **out)
{
    const dfl_tensor *t = dfl_st_set_find(b->m->tensors, name);
    if (!t) return dfl__fail(b->err, DFL_ERR_TENSOR, "%s: missing tensor %s", b->m->path, name);
    if (t->dtype != DFL_DTYPE_F32 && t->dtype != DFL_DTYPE_F16 && t->dtype != DFL_DTYPE_BF16)
        return dfl__fail(b->err, DFL_ERR_TENSOR, "%s: tensor %s has dtype %s (F32, F16 or BF16 expected)", b->m->path,
                         name, dfl_dtype_name(t->dtype));
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == shape[i];
    if (!ok) {
        char want[96] = "", got[96] = "";
        for (int i = 0; i < ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? ", " : "", (long long)shape[i]);
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        return dfl__fail(b->err, DFL_ERR_TENSOR, "%s: tensor %s has shape [%s], expected [%s]", b->m->path, name, got,
                         want);
    }
    size_t n = dfl_st_set_count(b->m->tensors);
    for (size_t i = 0; i < n; i++)
        if (dfl_st_set_at(b->m->tensors, i) == t) b->used[i] = 1;
    *out = t;
    return DFL_OK;
}

/* A vector (any shape whose product is n), as an f32 copy the model owns. */
static dfl_status bind_vec(binder *b, const char *name, int ndim, const int64_t *shape, float **out)
{
    const dfl_tensor *t;
    dfl_status s = find(b, name, ndim, shape, &t);
    if (s) return s;
    size_t n = dfl_tensor_numel(t);
    if (b->m->n_owned == b->m->cap_owned) {
        float **g = dfl__grow_array(b->m->owned, &b->m->cap_owned, sizeof *g, 64);
        if (!g) return dfl__fail(b->err, DFL_ERR_NOMEM, "out of memory binding %s", name);
        b->m->owned = g;
    }
    float *v = dfl__alloc_array(n ? n : 1, sizeof *v);
    if (!v) return dfl__fail(b->err, DFL_ERR_NOMEM, "out of memory binding %s", name);
    b->m->owned[b->m->n_owned++] = v;
    *out = v;
    return dfl_tensor_to_f32(t, v, b->err);
}

static dfl_status vec1(binder *b, const char *name, int64_t n, float **out)
{
    return bind_vec(b, name, 1, &n, out);
}

/* A matrix [rows, cols] viewed in the file; a tensor of more dims (the patch conv
 * [D, 3, P, P]) is given as its full shape and viewed as [shape[0], rest]. */
static dfl_status bind_mat(binder *b, const char *name, int ndim, const int64_t *shape, dfl_wmat *out)
{
    const dfl_tensor *t;
    dfl_status s = find(b, name, ndim, shape, &t);
    if (s) return s;
    int64_t cols = 1;
    for (int i = 1; i < ndim; i++)
        cols *= shape[i];
    *out = (dfl_wmat){.data = t->data, .dtype = (int)t->dtype, .rows = shape[0], .cols = cols, .pair_hd = 0};
    return DFL_OK;
}

static dfl_status mat2(binder *b, const char *name, int64_t r, int64_t c, dfl_wmat *out)
{
    int64_t sh[2] = {r, c};
    return bind_mat(b, name, 2, sh, out);
}

static dfl_status bind_layer(binder *b, const char *pre, dfl_clip_tower_kind kind, const dfl_clip_tower_config *t,
                             dfl_clip_layer *w)
{
    int64_t D = t->width, F = t->mlp_width, d = t->width / t->heads;
    int diff = b->m->config.diff, vision = kind == DFL_CLIP_VISION;
    char n[256];
    dfl_status s = DFL_OK;
#define NAME(suffix) (snprintf(n, sizeof n, "%s%s", pre, suffix), n)
    s = vec1(b, NAME(vision ? "norm1.weight" : "ln_1.weight"), D, &w->ln1_w);
    if (!s) s = vec1(b, NAME(vision ? "norm1.bias" : "ln_1.bias"), D, &w->ln1_b);
    if (!s) s = vec1(b, NAME(vision ? "norm2.weight" : "ln_2.weight"), D, &w->ln2_w);
    if (!s) s = vec1(b, NAME(vision ? "norm2.bias" : "ln_2.bias"), D, &w->ln2_b);
    if (diff) {
        if (!s) s = mat2(b, NAME("attn.q_proj.weight"), D, D, &w->wq);
        if (!s) s = vec1(b, NAME("attn.q_proj.bias"), D, &w->bq);
        if (!s) s = mat2(b, NAME("attn.k_proj.weight"), D, D, &w->wk);
        if (!s) s = vec1(b, NAME("attn.k_proj.bias"), D, &w->bk);
        if (!s) s = mat2(b, NAME("attn.v_proj.weight"), D, D, &w->wv);
        if (!s) s = vec1(b, NAME("attn.v_proj.bias"), D, &w->bv);
        if (!s) s = mat2(b, NAME("attn.out_proj.weight"), D, D, &w->wo);
        if (!s) s = vec1(b, NAME("attn.out_proj.bias"), D, &w->bo);
        if (!s) s = vec1(b, NAME("attn.lambda_q1"), d, &w->lambda_q1);
        if (!s) s = vec1(b, NAME("attn.lambda_k1"), d, &w->lambda_k1);
        if (!s) s = vec1(b, NAME("attn.lambda_q2"), d, &w->lambda_q2);
        if (!s) s = vec1(b, NAME("attn.lambda_k2"), d, &w->lambda_k2);
        if (!s) s = vec1(b, NAME("attn.diff_norm.weight"), 2 * d, &w->subln);
        if (!s) {
            double a = 0, c = 0;
            for (int64_t i = 0; i < d; i++)
                a += (double)w->lambda_q1[i] * w->lambda_k1[i], c += (double)w->lambda_q2[i] * w->lambda_k2[i];
            w->lambda = (float)(exp(a) - exp(c) + t->lambda_init);
        }
    } else if (vision) {
        if (!s) s = mat2(b, NAME("attn.qkv.weight"), 3 * D, D, &w->wqkv);
        if (!s) s = vec1(b, NAME("attn.qkv.bias"), 3 * D, &w->bqkv);
        if (!s) s = mat2(b, NAME("attn.proj.weight"), D, D, &w->wo);
        if (!s) s = vec1(b, NAME("attn.proj.bias"), D, &w->bo);
    } else {
        if (!s) s = mat2(b, NAME("attn.in_proj_weight"), 3 * D, D, &w->wqkv);
        if (!s) s = vec1(b, NAME("attn.in_proj_bias"), 3 * D, &w->bqkv);
        if (!s) s = mat2(b, NAME("attn.out_proj.weight"), D, D, &w->wo);
        if (!s) s = vec1(b, NAME("attn.out_proj.bias"), D, &w->bo);
    }
    if (!s) s = mat2(b, NAME(vision ? "mlp.fc1.weight" : "mlp.c_fc.weight"), F, D, &w->fc1);
    if (!s) s = vec1(b, NAME(vision ? "mlp.fc1.bias" : "mlp.c_fc.bias"), F, &w->b1);
    if (!s) s = mat2(b, NAME(vision ? "mlp.fc2.weight" : "mlp.c_proj.weight"), D, F, &w->fc2);
    if (!s) s = vec1(b, NAME(vision ? "mlp.fc2.bias" : "mlp.c_proj.bias"), D, &w->b2);
    /* LayerScale: timm's ls1/ls2, present only when the model was built with init_values */
    if (!s && vision && dfl_st_set_find(b->m->tensors, NAME("ls1.gamma"))) {
        s = vec1(b, n, D, &w->ls1);
        if (!s) s = vec1(b, NAME("ls2.gamma"), D, &w->ls2);
    }
#undef NAME
    return s;
}

static dfl_status bind_all(binder *b)
{
    dfl_clip_model *m = b->m;
    const dfl_clip_config *c = &m->config;
    const dfl_clip_tower_config *v = &c->tower[DFL_CLIP_VISION], *t = &c->tower[DFL_CLIP_TEXT];
    dfl_clip_tower *vt = &m->tower[DFL_CLIP_VISION], *tt = &m->tower[DFL_CLIP_TEXT];
    int64_t Dv = v->width, Dt = t->width, P = v->patch_size, G = v->image_size / P, E = c->embed_dim;
    int64_t conv[4] = {Dv, 3, P, P}, cls[3] = {1, 1, Dv}, pos[3] = {1, 1 + G * G, Dv};
    dfl_status s = bind_mat(b, "visual.patch_embed.proj.weight", 4, conv, &vt->patch);
    if (!s) s = vec1(b, "visual.patch_embed.proj.bias", Dv, &vt->patch_b);
    if (!s) s = bind_vec(b, "visual.cls_token", 3, cls, &vt->cls);
    if (!s) s = bind_vec(b, "visual.pos_embed", 3, pos, &vt->pos);
    if (!s) s = vec1(b, "visual.norm.weight", Dv, &vt->norm_w);
    if (!s) s = vec1(b, "visual.norm.bias", Dv, &vt->norm_b);
    if (!s) s = mat2(b, "image_projection", Dv, E, &vt->proj);
    if (!s) s = mat2(b, "token_embedding.weight", t->vocab_size, Dt, &tt->tok);
    int64_t tpos[2] = {t->context_length, Dt};
    if (!s) s = bind_vec(b, "positional_embedding", 2, tpos, &tt->pos);
    if (!s) s = vec1(b, "ln_final.weight", Dt, &tt->norm_w);
    if (!s) s = vec1(b, "ln_final.bias", Dt, &tt->norm_b);
    if (!s) s = mat2(b, "text_projection", Dt, E, &tt->proj);
    float *scale = NULL;
    if (!s) s = bind_vec(b, "logit_scale", 0, NULL, &scale);
    if (!s) m->logit_scale = scale[0];
    for (int k = 0; k < 2 && !s; k++) {
        const dfl_clip_tower_config *tc = &c->tower[k];
        m->tower[k].layers = dfl__calloc_array((size_t)tc->layers, sizeof *m->tower[k].layers);
        if (!m->tower[k].layers) return dfl__fail(b->err, DFL_ERR_NOMEM, "out of memory");
        for (int64_t l = 0; l < tc->layers && !s; l++) {
            char pre[64];
            snprintf(pre, sizeof pre, k == DFL_CLIP_VISION ? "visual.blocks.%lld." : "transformer.resblocks.%lld.",
                     (long long)l);
            s = bind_layer(b, pre, (dfl_clip_tower_kind)k, tc, &m->tower[k].layers[l]);
        }
    }
    size_t n = dfl_st_set_count(m->tensors);
    for (size_t i = 0; i < n && !s; i++)
        if (!b->used[i])
            s = dfl__fail(b->err, DFL_ERR_TENSOR, "%s: tensor %s is not part of a %s model as config.json describes it",
                          m->path, dfl_st_set_at(m->tensors, i)->name, c->model_type);
    return s;
}

dfl_status dfl_clip_load(const char *dir, dfl_clip_model **out, dfl_error *err)
{
    *out = NULL;
    dfl_clip_model *m = calloc(1, sizeof *m);
    char *cfg_path = NULL;
    size_t len = 0;
    dfl_status s = DFL_OK;
    if (!m || !(m->path = strdup(dir)) || !(cfg_path = malloc(strlen(dir) + 16))) {
        free(cfg_path), dfl_clip_free(m);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    sprintf(cfg_path, "%s/config.json", dir);
    s = dfl__read_file(cfg_path, &m->config_text, &len, err);
    if (!s) s = dfl_clip_config_parse(m->config_text, len, cfg_path, &m->config, err);
    if (!s) s = dfl_st_set_open(dir, &m->tensors, err);
    if (!s) {
        binder b = {m, calloc(dfl_st_set_count(m->tensors) + 1, 1), err};
        s = b.used ? bind_all(&b) : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        free(b.used);
    }
    free(cfg_path);
    if (s) {
        dfl_clip_free(m);
        return s;
    }
    *out = m;
    return DFL_OK;
}

void dfl_clip_free(dfl_clip_model *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    for (int k = 0; k < 2; k++)
        free(m->tower[k].layers);
    dfl_st_set_close(m->tensors);
    free(m->config_text);
    free(m->path);
    free(m);
}
