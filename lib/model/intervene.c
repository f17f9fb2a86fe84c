/* intervene.c — the interventions of intervene.h, applied at the forward pass's sites. */
#include "model/intervene.h"

#include <math.h>
#include <string.h>

const char *dfl_iv_site_name(dfl_iv_site s)
{
    static const char *names[DFL_SITES] = {"resid_pre", "attn_out", "mlp_out", "head"};
    return s >= 0 && s < DFL_SITES ? names[s] : "?";
}

dfl_iv_list dfl_iv_list_default(void)
{
    dfl_iv_list v;
    memset(&v, 0, sizeof v);
    return v;
}

static int in_layer(const dfl_intervention *it, int64_t l)
{
    return l >= it->layer0 && l <= it->layer1;
}

static int in_head(const dfl_intervention *it, int64_t h)
{
    return it->head < 0 || it->head == h;
}

int64_t dfl__iv_begin(const dfl_iv_list *iv, float *x, int64_t T, int64_t D)
{
    if (!iv || iv->start_layer <= 0 || !iv->start_x) return 0;
    memcpy(x, iv->start_x, (size_t)T * (size_t)D * sizeof *x);
    return iv->start_layer;
}

/* Columns [c0, c0 + w) of rows at positions pos (NULL = all) of v[T, ld] from the
 * source src[src_T, ld] (same positions); v's row i is position off + i. */
static void copy_cols(float *v, int64_t off, int64_t T, int64_t ld, int64_t c0, int64_t w, const uint8_t *pos,
                      const float *src, int64_t src_T)
{
    for (int64_t i = 0; i < T && off + i < src_T; i++)
        if (!pos || pos[off + i]) memcpy(v + i * ld + c0, src + (off + i) * ld + c0, (size_t)w * sizeof *v);
}

void dfl__iv_site(const dfl_iv_list *iv, dfl_iv_site site, int64_t l, int64_t L, float *v, int64_t T, int64_t width)
{
    if (!iv) return;
    (void)L;
    for (size_t i = 0; i < iv->n; i++) {
        const dfl_intervention *it = &iv->items[i];
        if (it->kind != DFL_IV_PATCH || it->site != site || !in_layer(it, l)) continue;
        const float *src = it->src + (size_t)l * (size_t)it->src_T * (size_t)width; /* [src_T, width] */
        copy_cols(v, iv->row0, T, width, 0, width, it->pos, src, it->src_T);
    }
    /* rows [row0, row0 + T) of a pass over row0 + T tokens */
    int64_t all = iv->row0 + T;
    if (iv->record[site])
        memcpy(iv->record[site] + ((size_t)l * (size_t)all + (size_t)iv->row0) * (size_t)width, v,
               (size_t)T * (size_t)width * sizeof *v);
}

void dfl__iv_heads(const dfl_iv_list *iv, int64_t l, int64_t L, float *att, int64_t T, int64_t ld,
                   const dfl__head_plan *plan, int64_t heads)
{
    if (!iv) return;
    (void)L;
    for (size_t i = 0; i < iv->n; i++) {
        const dfl_intervention *it = &iv->items[i];
        int patch = it->kind == DFL_IV_PATCH && it->site == DFL_SITE_HEAD;
        if ((it->kind != DFL_IV_ABLATE && !patch) || !in_layer(it, l)) continue;
        for (int64_t h = 0; h < heads; h++) {
            if (!in_head(it, h)) continue;
            int64_t c0 = plan[h].out_col, w = plan[h].out_width;
            if (patch || it->ablation == DFL_ABLATE_RESAMPLE) {
                copy_cols(att, 0, T, ld, c0, w, it->pos, it->src + (size_t)l * (size_t)it->src_T * (size_t)ld,
                          it->src_T);
                continue;
            }
            const float *mean = it->ablation == DFL_ABLATE_MEAN ? it->src + (size_t)l * (size_t)ld + c0 : NULL;
            for (int64_t t = 0; t < T; t++) {
                if (it->pos && !it->pos[t]) continue;
                float *row = att + t * ld + c0;
                if (mean)
                    memcpy(row, mean, (size_t)w * sizeof *row);
                else
                    memset(row, 0, (size_t)w * sizeof *row);
            }
        }
    }
    if (iv->record[DFL_SITE_HEAD])
        memcpy(iv->record[DFL_SITE_HEAD] + (size_t)l * (size_t)T * (size_t)ld, att,
               (size_t)T * (size_t)ld * sizeof *att);
}

float dfl__iv_lambda(const dfl_iv_list *iv, int64_t l, int64_t h, float lam)
{
    for (size_t i = 0; iv && i < iv->n; i++) {
        const dfl_intervention *it = &iv->items[i];
        if (it->kind != DFL_IV_LAMBDA || !in_layer(it, l) || !in_head(it, h)) continue;
        lam = it->lambda_scale ? (float)((double)lam * it->value) : (float)it->value;
    }
    return lam;
}

int dfl__iv_map(const dfl_iv_list *iv, int64_t l, int64_t h)
{
    int map = 0;
    for (size_t i = 0; iv && i < iv->n; i++) {
        const dfl_intervention *it = &iv->items[i];
        if (it->kind == DFL_IV_MAP && in_layer(it, l) && in_head(it, h)) map = it->map;
    }
    return map;
}

void dfl__iv_knockout(const dfl_iv_list *iv, int64_t l, float *s, int64_t row0, int64_t n, int64_t ld,
                      const int64_t *lo, const int64_t *lim)
{
    for (size_t k = 0; iv && k < iv->n; k++) {
        const dfl_intervention *it = &iv->items[k];
        if (it->kind != DFL_IV_KNOCKOUT || !in_layer(it, l)) continue;
        for (int64_t i = 0; i < n; i++) {
            int64_t q = row0 + i;
            if (!it->rows[q]) continue;
            /* the query's own key stays: every row keeps a key to renormalise over */
            for (int64_t j = lo[i]; j <= lim[i]; j++)
                if (it->keys[j] && j != q) s[i * ld + j] = -INFINITY;
        }
    }
}

int64_t dfl__iv_logits_row0(const dfl_iv_list *iv)
{
    return iv && iv->logits_row0 > 0 ? iv->logits_row0 : 0;
}

int64_t dfl__iv_row0(const dfl_iv_list *iv)
{
    return iv && iv->row0 > 0 ? iv->row0 : 0;
}

void dfl__iv_kv(const dfl_iv_list *iv, int64_t l, float *k, float *v, int64_t T, int64_t k_ld, int64_t v_ld)
{
    if (!iv) return;
    size_t lk = (size_t)l * (size_t)T * (size_t)k_ld, lv = (size_t)l * (size_t)T * (size_t)v_ld;
    if (iv->row0 > 0 && iv->kcache && iv->vcache) {
        memcpy(k, iv->kcache + lk, (size_t)iv->row0 * (size_t)k_ld * sizeof *k);
        memcpy(v, iv->vcache + lv, (size_t)iv->row0 * (size_t)v_ld * sizeof *v);
    }
    if (iv->record_k) memcpy(iv->record_k + lk, k, (size_t)T * (size_t)k_ld * sizeof *k);
    if (iv->record_v) memcpy(iv->record_v + lv, v, (size_t)T * (size_t)v_ld * sizeof *v);
}
