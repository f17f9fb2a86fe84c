/* train_optim.c — AdamW, the learning-rate schedule and global-norm clipping. */
#include <math.h>
#include <string.h>

#include "train/train.h"

/* Fixed chunks for the gradient norm: the sum's order does not depend on threads. */
#define NORM_CHUNKS 64

double dfl_train_lr(int64_t s, int64_t steps, int64_t warmup, double lr_max, double lr_min)
{
    if (warmup > 0 && s < warmup) return lr_max * (double)(s + 1) / (double)warmup;
    int64_t span = steps - warmup;
    if (span <= 0) return lr_max;
    double t = (double)(s - warmup) / (double)span;
    if (t > 1.0) t = 1.0;
    return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + cos(3.14159265358979323846 * t));
}

double dfl_train_clip(dfl_train_model *m, double clip)
{
    double part[NORM_CHUNKS];
    const size_t n = m->n_params;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < NORM_CHUNKS; c++) {
        double s = 0.0;
        for (size_t i = n * (size_t)c / NORM_CHUNKS; i < n * (size_t)(c + 1) / NORM_CHUNKS; i++)
            s += (double)m->grads[i] * m->grads[i];
        part[c] = s;
    }
    double ss = 0.0;
    for (int c = 0; c < NORM_CHUNKS; c++)
        ss += part[c];
    double norm = sqrt(ss);
    if (clip > 0 && norm > clip) {
        float k = (float)(clip / norm);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            m->grads[i] *= k;
    }
    return norm;
}

void dfl_train_adamw(dfl_train_model *m, const dfl_adamw *o, int64_t step)
{
    const double bc1 = 1.0 - pow(o->beta1, (double)step), bc2 = 1.0 - pow(o->beta2, (double)step);
    const float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
    const float step_size = (float)(o->lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    for (size_t t = 0; t < m->n_tensors; t++) {
        const dfl_train_tensor *tn = &m->tensors[t];
        float *p = m->params + tn->offset, *g = m->grads + tn->offset;
        float *mm = m->m + tn->offset, *vv = m->v + tn->offset;
        const float decay = tn->decay ? (float)(1.0 - o->lr * o->weight_decay) : 1.0f;
        const int64_t n = (int64_t)tn->numel;
#pragma omp parallel for schedule(static) if (n > 16384)
        for (int64_t i = 0; i < n; i++) {
            p[i] *= decay;
            mm[i] = b1 * mm[i] + (1.0f - b1) * g[i];
            vv[i] = b2 * vv[i] + (1.0f - b2) * g[i] * g[i];
            /* PyTorch: p −= (lr/bc1)·m / (sqrt(v)/sqrt(bc2) + eps) */
            p[i] -= step_size * mm[i] / (sqrtf(vv[i]) * inv_sqrt_bc2 + eps);
        }
    }
}
