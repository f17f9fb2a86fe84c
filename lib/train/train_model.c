/* train_model.c — the trainer's parameter layout (flat arrays, one view per tensor),
 * initialisation, config.json text and saving a model directory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/rng.h"
#include "model/safetensors.h"
#include "train/train.h"
#include "train/train_internal.h"

/* -------------------------------------------------------------- geometry */

dfl__train_geom dfl__train_geom_make(const dfl_config *c)
{
    dfl__train_geom g;
    int64_t H = c->num_heads, hd = c->head_dim;
    g.dq = hd;
    g.scale = (float)(1.0 / sqrt((double)hd));
    switch (c->type) {
    case DFL_MODEL_DIFF_TRANSFORMER: g.nmaps = 2, g.heads = H, g.n_qheads = 2 * H, g.width = 2 * hd; break;
    case DFL_MODEL_DIFFLLAMA: g.nmaps = 2, g.heads = H / 2, g.n_qheads = H, g.width = 2 * hd; break;
    case DFL_MODEL_DIFF_V2: g.nmaps = 2, g.heads = H, g.n_qheads = 2 * H, g.width = hd; break;
    default: g.nmaps = 1, g.heads = H, g.n_qheads = H, g.width = hd; break;
    }
    g.n_kheads = c->type == DFL_MODEL_DIFF_V2 ? H : g.n_qheads;
    g.subnorm = g.nmaps == 2 && c->type != DFL_MODEL_DIFF_V2;
    g.token_lambda = c->type == DFL_MODEL_DIFF_V2;
    g.q_ld = g.n_qheads * hd;
    g.k_ld = g.n_kheads * hd;
    g.v_ld = g.att_ld = g.heads * g.width;
    return g;
}

/* ---------------------------------------------------------------- layout */

dfl_status dfl_train_config_check(const dfl_config *c, dfl_error *err)
{
    if (c->num_kv_heads != c->num_heads)
        return dfl__fail(err, DFL_ERR_CONFIG,
                         "training supports multi-head attention only: num_key_value_heads (%lld) must equal "
                         "num_attention_heads (%lld)",
                         (long long)c->num_kv_heads, (long long)c->num_heads);
    if (c->rope_kind != DFL_ROPE_NONE) return dfl__fail(err, DFL_ERR_CONFIG, "training does not support rope_scaling");
    if (c->type == DFL_MODEL_DIFFLLAMA && c->num_heads % 2)
        return dfl__fail(err, DFL_ERR_CONFIG, "diffllama needs an even number of heads (got %lld)",
                         (long long)c->num_heads);
    if (c->type == DFL_MODEL_MOTIF)
        return dfl__fail(err, DFL_ERR_CONFIG, "training Motif models is not implemented (PolyNorm MLP)");
    if (c->head_dim < 2 || c->head_dim % 2)
        return dfl__fail(err, DFL_ERR_CONFIG, "head_dim must be even and >= 2 (got %lld)", (long long)c->head_dim);
    if (c->vocab_size > (1 << 24) || c->hidden_size > (1 << 16) || c->intermediate_size > (1 << 18) ||
        c->num_layers > 1024 || c->num_heads > 1024 || c->head_dim > 4096)
        return dfl__fail(err, DFL_ERR_CONFIG, "model too large to train here");
    return DFL_OK;
}

/* Walk the tensors in file order; with t == NULL only counts. Returns the number of
 * tensors; *total gets the floats they need. */
static size_t layout(const dfl_config *c, dfl_train_tensor *t, size_t *total)
{
    dfl__train_geom g = dfl__train_geom_make(c);
    int64_t D = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
    size_t n = 0, off = 0;
#define ADD(nm, d0, d1, dec)                                                                                           \
    do {                                                                                                               \
        if (t) {                                                                                                       \
            snprintf(t[n].name, sizeof t[n].name, "%s", nm);                                                           \
            t[n].ndim = (d1) ? 2 : 1;                                                                                  \
            t[n].shape[0] = (d0), t[n].shape[1] = (d1);                                                                \
            t[n].offset = off, t[n].numel = (size_t)(d0) * (size_t)((d1) ? (d1) : 1);                                  \
            t[n].decay = dec;                                                                                          \
        }                                                                                                              \
        off += (size_t)(d0) * (size_t)((d1) ? (d1) : 1);                                                               \
        n++;                                                                                                           \
    } while (0)
    char nm[96];
    ADD("model.embed_tokens.weight", V, D, 1);
    for (int64_t l = 0; l < c->num_layers; l++) {
#define LADD(suffix, d0, d1, dec)                                                                                      \
    do {                                                                                                               \
        snprintf(nm, sizeof nm, "model.layers.%lld.%s", (long long)l, suffix);                                         \
        ADD(nm, d0, d1, dec);                                                                                          \
    } while (0)
        LADD("input_layernorm.weight", D, 0, 0);
        LADD("self_attn.q_proj.weight", g.q_ld, D, 1);
        LADD("self_attn.k_proj.weight", g.k_ld, D, 1);
        LADD("self_attn.v_proj.weight", g.v_ld, D, 1);
        if (c->type == DFL_MODEL_DIFF_TRANSFORMER)
            LADD("self_attn.out_proj.weight", D, g.att_ld, 1);
        else
            LADD("self_attn.o_proj.weight", D, g.att_ld, 1);
        if (c->type == DFL_MODEL_DIFF_V2) LADD("self_attn.lambda_proj.weight", c->num_heads, D, 1);
        if (c->type != DFL_MODEL_LLAMA && c->type != DFL_MODEL_DIFF_V2) {
            LADD("self_attn.lambda_q1", g.dq, 0, 0);
            LADD("self_attn.lambda_k1", g.dq, 0, 0);
            LADD("self_attn.lambda_q2", g.dq, 0, 0);
            LADD("self_attn.lambda_k2", g.dq, 0, 0);
        }
        if (c->type == DFL_MODEL_DIFF_TRANSFORMER) LADD("self_attn.subln.weight", 2 * g.dq, 0, 0);
        LADD("post_attention_layernorm.weight", D, 0, 0);
        LADD("mlp.gate_proj.weight", F, D, 1);
        LADD("mlp.up_proj.weight", F, D, 1);
        LADD("mlp.down_proj.weight", D, F, 1);
#undef LADD
    }
    ADD("model.norm.weight", D, 0, 0);
    if (!c->tie_word_embeddings) ADD("lm_head.weight", V, D, 1);
#undef ADD
    *total = off;
    return n;
}

size_t dfl_train_param_count(const dfl_config *c)
{
    size_t total;
    layout(c, NULL, &total);
    return total;
}

/* Point views at base following the layout (the same walk as layout()). */
static void bind_views(const dfl_train_model *m, float *base, dfl_train_views *v)
{
    const dfl_config *c = &m->config;
    const dfl_train_tensor *t = m->tensors;
    size_t i = 0;
    v->embed = base + t[i++].offset;
    for (int64_t l = 0; l < c->num_layers; l++) {
        dfl_train_layer *y = &v->layers[l];
        memset(y, 0, sizeof *y);
        y->attn_norm = base + t[i++].offset;
        y->wq = base + t[i++].offset;
        y->wk = base + t[i++].offset;
        y->wv = base + t[i++].offset;
        y->wo = base + t[i++].offset;
        if (c->type == DFL_MODEL_DIFF_V2) y->wlam = base + t[i++].offset;
        if (c->type != DFL_MODEL_LLAMA && c->type != DFL_MODEL_DIFF_V2) {
            y->lq1 = base + t[i++].offset;
            y->lk1 = base + t[i++].offset;
            y->lq2 = base + t[i++].offset;
            y->lk2 = base + t[i++].offset;
        }
        if (c->type == DFL_MODEL_DIFF_TRANSFORMER) y->subln = base + t[i++].offset;
        y->mlp_norm = base + t[i++].offset;
        y->w_gate = base + t[i++].offset;
        y->w_up = base + t[i++].offset;
        y->w_down = base + t[i++].offset;
    }
    v->final_norm = base + t[i++].offset;
    v->lm_head = c->tie_word_embeddings ? v->embed : base + t[i++].offset;
}

dfl_status dfl_train_model_create(const dfl_config *c, dfl_train_model **out, dfl_error *err)
{
    *out = NULL;
    dfl_status s = dfl_train_config_check(c, err);
    if (s) return s;
    dfl_train_model *m = calloc(1, sizeof *m);
    if (!m) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    m->config = *c;
    size_t total;
    m->n_tensors = layout(c, NULL, &total);
    m->n_params = total;
    size_t L = (size_t)c->num_layers;
    m->tensors = dfl__calloc_array(m->n_tensors, sizeof *m->tensors);
    m->params = dfl__calloc_array(total, sizeof(float));
    m->grads = dfl__calloc_array(total, sizeof(float));
    m->m = dfl__calloc_array(total, sizeof(float));
    m->v = dfl__calloc_array(total, sizeof(float));
    m->lambda_init = dfl__calloc_array(L, sizeof(float));
    m->w.layers = dfl__calloc_array(L, sizeof(dfl_train_layer));
    m->g.layers = dfl__calloc_array(L, sizeof(dfl_train_layer));
    m->mv.layers = dfl__calloc_array(L, sizeof(dfl_train_layer));
    m->vv.layers = dfl__calloc_array(L, sizeof(dfl_train_layer));
    if (!m->tensors || !m->params || !m->grads || !m->m || !m->v || !m->lambda_init || !m->w.layers || !m->g.layers ||
        !m->mv.layers || !m->vv.layers) {
        dfl_train_model_free(m);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for %zu parameters", total);
    }
    layout(c, m->tensors, &total);
    bind_views(m, m->params, &m->w);
    bind_views(m, m->grads, &m->g);
    bind_views(m, m->m, &m->mv);
    bind_views(m, m->v, &m->vv);
    for (size_t l = 0; l < L; l++)
        m->lambda_init[l] = (float)dfl_config_lambda_init(c, (int64_t)l);
    *out = m;
    return DFL_OK;
}

void dfl_train_model_free(dfl_train_model *m)
{
    if (!m) return;
    free(m->tensors), free(m->params), free(m->grads), free(m->m), free(m->v), free(m->lambda_init);
    free(m->w.layers), free(m->g.layers), free(m->mv.layers), free(m->vv.layers);
    free(m);
}

/* ----------------------------------------------------------- initialise */

void dfl_train_init(dfl_train_model *m, uint64_t seed, double std)
{
    dfl_rng r = dfl_rng_make(seed, 2, 0); /* stream 2: weights (0, 1 are data) */
    for (size_t i = 0; i < m->n_tensors; i++) {
        const dfl_train_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        int is_lambda = strstr(t->name, ".lambda_") != NULL;
        for (size_t j = 0; j < t->numel; j++) {
            if (t->ndim == 2)
                p[j] = (float)(std * dfl_rng_normal(&r));
            else if (is_lambda)
                p[j] = (float)(0.1 * dfl_rng_normal(&r));
            else
                p[j] = 1.0f; /* norm gains and subln */
        }
    }
    memset(m->m, 0, m->n_params * sizeof(float));
    memset(m->v, 0, m->n_params * sizeof(float));
}

void dfl_train_lambda_zero(dfl_train_model *m)
{
    const int64_t n = m->config.head_dim;
    for (int64_t l = 0; l < m->config.num_layers; l++) {
        const dfl_train_layer *y = &m->w.layers[l];
        if (!y->lq1) continue;
        /* exp(0) − exp(n·c²) + λ_init = 1 − (1 + λ_init) + λ_init = 0 */
        float c = (float)sqrt(log(1.0 + (double)m->lambda_init[l]) / (double)n);
        for (int64_t j = 0; j < n; j++)
            y->lq1[j] = y->lk1[j] = 0.0f, y->lq2[j] = y->lk2[j] = c;
    }
}

void dfl_train_lambda_freeze(dfl_train_model *m)
{
    const size_t n = (size_t)m->config.head_dim;
    for (int64_t l = 0; l < m->config.num_layers; l++) {
        const dfl_train_layer *g = &m->g.layers[l];
        if (!g->lq1) continue;
        memset(g->lq1, 0, n * sizeof(float)), memset(g->lk1, 0, n * sizeof(float));
        memset(g->lq2, 0, n * sizeof(float)), memset(g->lk2, 0, n * sizeof(float));
    }
}

/* ---------------------------------------------------------------- saving */

char *dfl_train_config_json(const dfl_config *c)
{
    size_t cap = 2048;
    char *s = malloc(cap);
    if (!s) return NULL;
    int n = snprintf(s, cap,
                     "{\n"
                     "  \"model_type\": \"%s\",\n"
                     "  \"vocab_size\": %lld,\n"
                     "  \"hidden_size\": %lld,\n"
                     "  \"intermediate_size\": %lld,\n"
                     "  \"num_hidden_layers\": %lld,\n"
                     "  \"num_attention_heads\": %lld,\n"
                     "  \"num_key_value_heads\": %lld,\n"
                     "  \"head_dim\": %lld,\n"
                     "  \"hidden_act\": \"silu\",\n"
                     "  \"rms_norm_eps\": %.17g,\n"
                     "  \"rope_theta\": %.17g,\n"
                     "  \"rope_interleaved\": %s,\n"
                     "  \"rope_scaling\": null,\n"
                     "  \"tie_word_embeddings\": %s,\n"
                     "  \"max_position_embeddings\": %lld,\n"
                     "  \"bos_token_id\": 0,\n"
                     "  \"eos_token_id\": %d,\n"
                     "  \"attention_bias\": false,\n"
                     "  \"mlp_bias\": false,\n"
                     "  \"torch_dtype\": \"float32\"",
                     dfl_model_type_name(c->type), (long long)c->vocab_size, (long long)c->hidden_size,
                     (long long)c->intermediate_size, (long long)c->num_layers, (long long)c->num_heads,
                     (long long)c->num_kv_heads, (long long)c->head_dim, c->rms_norm_eps, c->rope_theta,
                     c->rope_interleaved ? "true" : "false", c->tie_word_embeddings ? "true" : "false",
                     (long long)c->max_position_embeddings, DFL_TOK_EOS);
    if (n > 0 && (size_t)n < cap && c->type != DFL_MODEL_LLAMA && c->type != DFL_MODEL_DIFF_V2) {
        if (c->has_lambda_init)
            n += snprintf(s + n, cap - (size_t)n, ",\n  \"diff_lambda_init\": %.17g", c->lambda_init);
        else
            n += snprintf(s + n, cap - (size_t)n, ",\n  \"diff_lambda_init\": null");
    }
    if (n > 0 && (size_t)n < cap) n += snprintf(s + n, cap - (size_t)n, "\n}\n");
    if (n < 0 || (size_t)n >= cap) {
        free(s);
        return NULL;
    }
    return s;
}

dfl_status dfl_train_save_model(const dfl_train_model *m, const char *dir, int overwrite, dfl_error *err)
{
    char path[4096];
    dfl_tensor *ts = dfl__calloc_array(m->n_tensors, sizeof *ts);
    char *cfg = dfl_train_config_json(&m->config);
    dfl_status s = DFL_OK;
    if (!ts || !cfg) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < m->n_tensors; i++) {
        const dfl_train_tensor *t = &m->tensors[i];
        ts[i].name = t->name;
        ts[i].dtype = DFL_DTYPE_F32;
        ts[i].ndim = t->ndim;
        ts[i].shape[0] = t->shape[0];
        ts[i].shape[1] = t->shape[1];
        ts[i].data = m->params + t->offset;
        ts[i].nbytes = t->numel * sizeof(float);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if ((s = dfl_st_write(path, ts, m->n_tensors, overwrite, err))) goto done;
    snprintf(path, sizeof path, "%s/config.json", dir);
    s = dfl__atomic_write(path, cfg, strlen(cfg), overwrite, err);
done:
    free(ts);
    free(cfg);
    return s;
}
