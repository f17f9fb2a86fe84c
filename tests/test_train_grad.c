/* test_train_grad.c — the trainer's gradients against central finite differences
 * (every element of every parameter tensor, all three model types, tied and untied,
 * target and all-token losses), its forward pass against the library's
 * dfl_forward_logits on the same weights, the learning-rate schedule, clipping, and the error paths. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/rng.h"
#include "model/forward.h"
#include "model/model.h"
#include "train/train.h"
#include "train/train_internal.h"

/* ------------------------------------------------------------- fixtures */

static dfl_config tiny_config(dfl_model_type type, int tie)
{
    dfl_config c;
    memset(&c, 0, sizeof c);
    c.type = type;
    c.vocab_size = 24;
    c.hidden_size = 16;
    c.intermediate_size = 12;
    c.num_layers = 2;
    c.num_heads = c.num_kv_heads = 2;
    c.head_dim = type == DFL_MODEL_DIFF_TRANSFORMER ? 4 : 8;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 100.0; /* a short theta: positions 0..T-1 rotate visibly */
    c.rope_interleaved = type == DFL_MODEL_DIFF_TRANSFORMER || type == DFL_MODEL_DIFF_V2;
    c.tie_word_embeddings = tie;
    c.max_position_embeddings = 64;
    return c;
}

/* Random weights at a scale where every part of the model matters: matrices
 * N(0, 0.35²), norm gains and subln 1 + 0.2·N, λ vectors N(0, 0.3²). */
static dfl_train_model *tiny_model(dfl_model_type type, int tie, uint64_t seed)
{
    dfl_config c = tiny_config(type, tie);
    dfl_train_model *m = NULL;
    dfl_error err;
    assert_int_equal(dfl_train_model_create(&c, &m, &err), DFL_OK);
    dfl_train_init(m, seed, 0.35);
    dfl_rng r = dfl_rng_make(seed, 9, 0);
    for (size_t i = 0; i < m->n_tensors; i++) {
        const dfl_train_tensor *t = &m->tensors[i];
        if (t->ndim == 2) continue;
        int lam = strstr(t->name, "lambda_") != NULL;
        for (size_t j = 0; j < t->numel; j++)
            m->params[t->offset + j] =
                lam ? (float)(0.3 * dfl_rng_normal(&r)) : (float)(1.0 + 0.2 * dfl_rng_normal(&r));
    }
    return m;
}

enum { B = 2, T = 7 };

static void tiny_batch(const dfl_train_model *m, int all, int32_t *tok, int32_t *tgt, uint64_t seed)
{
    dfl_rng r = dfl_rng_make(seed, 8, 0);
    int64_t V = m->config.vocab_size;
    for (int i = 0; i < B * T; i++)
        tok[i] = (int32_t)dfl_rng_below(&r, (uint64_t)V);
    for (int i = 0; i < B * T; i++)
        tgt[i] = all || dfl_rng_below(&r, 2) ? (int32_t)dfl_rng_below(&r, (uint64_t)V) : -1;
}

static double loss_of(const dfl_train_model *m, dfl_train_ws *w, const int32_t *tok, const int32_t *tgt)
{
    double loss;
    dfl_error err;
    assert_int_equal(dfl_train_forward(m, w, tok, tgt, B, &loss, NULL, &err), DFL_OK);
    return loss;
}

/* ----------------------------------------------------- gradient check */

/* Central differences of the f32 forward pass, step h = 3e-3 on parameters of
 * magnitude ~0.3-1.2. Two error sources bound the comparison:
 *   truncation  h²/6·|∂³L|: measured, not negligible for the embeddings (entries
 *               ~0.35 feed an RMSNorm of width 16 directly): h = 1e-2 gave up to 15%
 *               on a few embedding entries, h = 3e-3 about 1%;
 *   rounding    the loss (≈ 4, summed in double from f32 logits) carries an f32
 *               error of a few ulps of the activations, ~1e-6 absolute, so the
 *               difference quotient has a noise of ~1e-6/h ≈ 3e-4.
 * Hence per element |fd − g| <= 3e-2·|g| + 1e-3, and per tensor the norm-wise error
 * ||fd − g|| / ||g|| <= 2e-2. Every element of every tensor is checked. *worst_norm
 * gets the largest per-tensor norm-wise error; returns the largest element-wise
 * relative error among entries with |g| >= 1e-2 (rounding noise alone can reach 3%
 * of those, so this is an upper bound on the real error). */
static double grad_check(dfl_model_type type, int tie, int all, double *worst_norm)
{
    *worst_norm = 0.0;
    dfl_train_model *m = tiny_model(type, tie, 7 + (uint64_t)type);
    dfl_train_ws *w = NULL;
    dfl_error err;
    assert_int_equal(dfl_train_ws_create(m, B, T, &w, &err), DFL_OK);
    dfl__train_ws_set_block(w, 3); /* T = 7 crosses causal blocks of 3, 3 and 1 rows */
    int32_t tok[B * T], tgt[B * T];
    tiny_batch(m, all, tok, tgt, 3 + (uint64_t)type);
    loss_of(m, w, tok, tgt);
    dfl_train_backward(m, w);
    float *g = malloc(m->n_params * sizeof *g);
    memcpy(g, m->grads, m->n_params * sizeof *g);
    /* DIFF V2's per-token sigmoid curves more: a smaller step there (at 3e-3 one
     * embedding entry's central difference is still 4% off; at 1e-3 and 3e-4 they agree) */
    const float h = type == DFL_MODEL_DIFF_V2 ? 1e-3f : 3e-3f;
    double worst = 0.0;
    for (size_t ti = 0; ti < m->n_tensors; ti++) {
        const dfl_train_tensor *t = &m->tensors[ti];
        double num = 0.0, den = 0.0;
        for (size_t j = 0; j < t->numel; j++) {
            float *p = &m->params[t->offset + j], keep = *p;
            *p = keep + h;
            double lp = loss_of(m, w, tok, tgt);
            *p = keep - h;
            double lm = loss_of(m, w, tok, tgt);
            *p = keep;
            double fd = (lp - lm) / (2.0 * (double)h), an = g[t->offset + j], d = fabs(fd - an);
            num += d * d;
            den += an * an;
            if (d > 3e-2 * fabs(an) + 1e-3)
                fail_msg("%s %s%s: %s[%zu]: analytic %.6g, finite difference %.6g", dfl_model_type_name(type),
                         tie ? "tied " : "", all ? "all-token loss" : "target loss", t->name, j, an, fd);
            if (fabs(an) >= 1e-2 && d / fabs(an) > worst) worst = d / fabs(an);
        }
        if (den > 0 && sqrt(num / den) > *worst_norm) *worst_norm = sqrt(num / den);
        if (den > 0 && sqrt(num / den) > 2e-2)
            fail_msg("%s: tensor %s: norm-wise relative error %.3g", dfl_model_type_name(type), t->name,
                     sqrt(num / den));
        if (den == 0 && strstr(t->name, "embed") == NULL) /* rows of unused tokens may be 0, nothing else */
            fail_msg("%s: tensor %s has an all-zero gradient: the check would not see it", dfl_model_type_name(type),
                     t->name);
    }
    free(g);
    dfl_train_ws_free(w);
    dfl_train_model_free(m);
    return worst;
}

static void test_grad_llama(void **state)
{
    (void)state;
    double n1, n2, e1 = grad_check(DFL_MODEL_LLAMA, 0, 0, &n1), e2 = grad_check(DFL_MODEL_LLAMA, 1, 1, &n2);
    printf("# llama: largest relative gradient error %.2e / per-tensor norm-wise %.2e (untied, target loss); "
           "%.2e / %.2e (tied, all tokens)\n",
           e1, n1, e2, n2);
}

static void test_grad_diff_transformer(void **state)
{
    (void)state;
    double n1, n2, e1 = grad_check(DFL_MODEL_DIFF_TRANSFORMER, 0, 0, &n1);
    double e2 = grad_check(DFL_MODEL_DIFF_TRANSFORMER, 1, 1, &n2);
    printf("# diff_transformer: largest relative gradient error %.2e / per-tensor norm-wise %.2e (untied, target "
           "loss); %.2e / %.2e (tied, all tokens)\n",
           e1, n1, e2, n2);
}

static void test_grad_diffllama(void **state)
{
    (void)state;
    double n1, n2, e1 = grad_check(DFL_MODEL_DIFFLLAMA, 0, 0, &n1), e2 = grad_check(DFL_MODEL_DIFFLLAMA, 0, 1, &n2);
    printf("# diffllama: largest relative gradient error %.2e / per-tensor norm-wise %.2e (target loss); "
           "%.2e / %.2e (all tokens)\n",
           e1, n1, e2, n2);
}

/* DIFF V2: the per-token λ's projection (lambda_proj) is checked with every other tensor */
static void test_grad_diff_v2(void **state)
{
    (void)state;
    double n1, n2, e1 = grad_check(DFL_MODEL_DIFF_V2, 0, 0, &n1), e2 = grad_check(DFL_MODEL_DIFF_V2, 1, 1, &n2);
    printf("# diff_transformer_v2: largest relative gradient error %.2e / per-tensor norm-wise %.2e (untied, target "
           "loss); %.2e / %.2e (tied, all tokens)\n",
           e1, n1, e2, n2);
}

/* --------------------------------------------- forward vs the library */

static void forward_vs_library(dfl_model_type type, int tie)
{
    dfl_train_model *m = tiny_model(type, tie, 21);
    char dir[] = "/tmp/dfl_train_fwd_XXXXXX";
    assert_non_null(mkdtemp(dir));
    dfl_error err;
    assert_int_equal(dfl_train_save_model(m, dir, 0, &err), DFL_OK);
    dfl_model *lm = NULL;
    if (dfl_model_load(dir, &lm, &err)) fail_msg("%s", err.msg);
    dfl_train_ws *w = NULL;
    assert_int_equal(dfl_train_ws_create(m, B, T, &w, &err), DFL_OK);
    int32_t tok[B * T], tgt[B * T];
    tiny_batch(m, 1, tok, tgt, 5);
    /* one block (the default 64 > T) and blocks of 2 agree: the same loss and gradients */
    double loss1 = loss_of(m, w, tok, tgt);
    dfl_train_backward(m, w);
    float *g1 = malloc(m->n_params * sizeof *g1);
    memcpy(g1, m->grads, m->n_params * sizeof *g1);
    dfl__train_ws_set_block(w, 2);
    double loss = loss_of(m, w, tok, tgt);
    dfl_train_backward(m, w);
    assert_true(fabs(loss - loss1) <= 1e-6 * fabs(loss1));
    for (size_t i = 0; i < m->n_params; i++)
        assert_true(fabs(m->grads[i] - g1[i]) <= 1e-5 * (1.0 + fabs(g1[i])));
    free(g1);
    const int64_t V = m->config.vocab_size;
    float *ref = malloc((size_t)(T * V) * sizeof *ref);
    double lib_loss = 0.0, maxabs = 0.0, maxdiff = 0.0;
    int n = 0;
    for (int b = 0; b < B; b++) {
        assert_int_equal(dfl_forward_logits(lm, tok + b * T, T, ref, &err), DFL_OK);
        const float *mine = dfl_train_logits(w) + (size_t)b * T * (size_t)V;
        for (int i = 0; i < T * V; i++) {
            maxabs = fmax(maxabs, fabs(ref[i]));
            maxdiff = fmax(maxdiff, fabs((double)ref[i] - mine[i]));
        }
        for (int i = 0; i < T; i++) {
            int32_t y = tgt[b * T + i];
            if (y < 0) continue;
            double mx = -INFINITY, s = 0.0;
            for (int v = 0; v < V; v++)
                mx = fmax(mx, ref[i * V + v]);
            for (int v = 0; v < V; v++)
                s += exp(ref[i * V + v] - mx);
            lib_loss += mx + log(s) - ref[i * V + y];
            n++;
        }
    }
    lib_loss /= n;
    printf("# %s%s: trainer loss %.7f, library %.7f; max |dlogit| %.2e of max |logit| %.3g\n",
           dfl_model_type_name(type), tie ? " tied" : "", loss, lib_loss, maxdiff, maxabs);
    assert_true(maxdiff <= 1e-4 * maxabs);
    assert_true(fabs(loss - lib_loss) <= 1e-5 * fabs(lib_loss));
    /* the trainer's own parameter count is what the loaded file holds */
    assert_int_equal(dfl_train_param_count(&lm->config), m->n_params);
    free(ref);
    dfl_model_free(lm);
    dfl_train_ws_free(w);
    dfl_train_model_free(m);
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir), remove(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir), remove(path);
    rmdir(dir);
}

static void test_forward_matches_library(void **state)
{
    (void)state;
    forward_vs_library(DFL_MODEL_LLAMA, 0);
    forward_vs_library(DFL_MODEL_LLAMA, 1);
    forward_vs_library(DFL_MODEL_DIFF_TRANSFORMER, 0);
    forward_vs_library(DFL_MODEL_DIFFLLAMA, 0);
    forward_vs_library(DFL_MODEL_DIFF_V2, 0);
}

/* --------------------------------------------------------- optimizer */

/* AdamW itself is checked against torch.optim.AdamW in tests/test_train_adamw.py (a
 * restatement of the update here would share its mistakes). */

static void test_lr_schedule(void **state)
{
    (void)state;
    /* warm-up: (s+1)/warmup of the peak */
    assert_true(fabs(dfl_train_lr(0, 100, 10, 1e-3, 1e-4) - 1e-4) < 1e-15);
    assert_true(fabs(dfl_train_lr(9, 100, 10, 1e-3, 1e-4) - 1e-3) < 1e-15);
    /* cosine: the peak right after warm-up, the mean halfway, the floor at the end */
    assert_true(fabs(dfl_train_lr(10, 100, 10, 1e-3, 1e-4) - 1e-3) < 1e-15);
    assert_true(fabs(dfl_train_lr(55, 100, 10, 1e-3, 1e-4) - 5.5e-4) < 1e-12);
    assert_true(fabs(dfl_train_lr(100, 100, 10, 1e-3, 1e-4) - 1e-4) < 1e-15);
    assert_true(fabs(dfl_train_lr(500, 100, 10, 1e-3, 1e-4) - 1e-4) < 1e-15);
    /* no warm-up; monotone decay */
    assert_true(fabs(dfl_train_lr(0, 100, 0, 1e-3, 0) - 1e-3) < 1e-15);
    for (int s = 11; s < 100; s++)
        assert_true(dfl_train_lr(s, 100, 10, 1e-3, 1e-4) <= dfl_train_lr(s - 1, 100, 10, 1e-3, 1e-4));
    /* warm-up longer than the run: the peak afterwards */
    assert_true(fabs(dfl_train_lr(20, 10, 20, 1e-3, 1e-4) - 1e-3) < 1e-15);
}

static void test_clip(void **state)
{
    (void)state;
    dfl_train_model *m = tiny_model(DFL_MODEL_LLAMA, 0, 2);
    double ss = 0.0;
    for (size_t i = 0; i < m->n_params; i++) {
        m->grads[i] = (float)cos((double)i);
        ss += (double)m->grads[i] * m->grads[i];
    }
    float *keep = malloc(m->n_params * sizeof *keep);
    memcpy(keep, m->grads, m->n_params * sizeof *keep);
    /* below the threshold: untouched */
    assert_true(fabs(dfl_train_clip(m, 1e9) - sqrt(ss)) < 1e-9 * sqrt(ss));
    assert_memory_equal(keep, m->grads, m->n_params * sizeof *keep);
    assert_true(fabs(dfl_train_clip(m, 0) - sqrt(ss)) < 1e-9 * sqrt(ss)); /* 0 = off */
    assert_memory_equal(keep, m->grads, m->n_params * sizeof *keep);
    /* above: scaled to norm = clip, direction kept */
    dfl_train_clip(m, 1.5);
    double after = dfl_train_clip(m, 0);
    assert_true(fabs(after - 1.5) < 1e-5);
    for (size_t i = 0; i < m->n_params; i++)
        assert_true(fabs(m->grads[i] - keep[i] * 1.5 / sqrt(ss)) < 1e-6);
    free(keep);
    dfl_train_model_free(m);
}

/* ------------------------------------------------------------ errors */

static void test_errors(void **state)
{
    (void)state;
    dfl_error err;
    dfl_train_model *m = NULL;
    dfl_config c = tiny_config(DFL_MODEL_LLAMA, 0);
    c.num_kv_heads = 1; /* GQA */
    assert_int_equal(dfl_train_model_create(&c, &m, &err), DFL_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "multi-head"));
    assert_null(m);
    c = tiny_config(DFL_MODEL_LLAMA, 0);
    c.rope_kind = DFL_ROPE_LINEAR;
    assert_int_equal(dfl_train_model_create(&c, &m, &err), DFL_ERR_CONFIG);
    c = tiny_config(DFL_MODEL_DIFFLLAMA, 0);
    c.num_heads = c.num_kv_heads = 3;
    assert_int_equal(dfl_train_model_create(&c, &m, &err), DFL_ERR_CONFIG);

    m = tiny_model(DFL_MODEL_LLAMA, 0, 3);
    dfl_train_ws *w = NULL;
    assert_int_equal(dfl_train_ws_create(m, 0, T, &w, &err), DFL_ERR_USAGE);
    assert_int_equal(dfl_train_ws_create(m, B, T, &w, &err), DFL_OK);
    int32_t tok[B * T], tgt[B * T];
    tiny_batch(m, 1, tok, tgt, 1);
    double loss;
    assert_int_equal(dfl_train_forward(m, w, tok, tgt, B + 1, &loss, NULL, &err), DFL_ERR_USAGE);
    tok[3] = 24;
    assert_int_equal(dfl_train_forward(m, w, tok, tgt, B, &loss, NULL, &err), DFL_ERR_RANGE);
    tok[3] = 0;
    tgt[5] = -2;
    assert_int_equal(dfl_train_forward(m, w, tok, tgt, B, &loss, NULL, &err), DFL_ERR_RANGE);
    /* no target rows: loss 0, zero gradients */
    for (int i = 0; i < B * T; i++)
        tgt[i] = -1;
    int64_t count = -1;
    assert_int_equal(dfl_train_forward(m, w, tok, tgt, B, &loss, &count, &err), DFL_OK);
    assert_int_equal(count, 0);
    assert_true(loss == 0.0);
    dfl_train_backward(m, w);
    for (size_t i = 0; i < m->n_params; i++)
        assert_true(m->grads[i] == 0.0f);
    dfl_train_ws_free(w);
    dfl_train_model_free(m);
    dfl_train_model_free(NULL);
    dfl_train_ws_free(NULL);

    /* params → config */
    dfl_train_params p = dfl_train_params_default();
    dfl_config cc;
    p.hidden = 100; /* not a multiple of 2·4 for diff_transformer */
    p.type = DFL_MODEL_DIFF_TRANSFORMER;
    assert_int_equal(dfl_train_params_config(&p, &cc, &err), DFL_ERR_USAGE);
    p = dfl_train_params_default();
    p.vocab = 100;
    assert_int_equal(dfl_train_params_config(&p, &cc, &err), DFL_ERR_USAGE);
    p = dfl_train_params_default();
    p.type = DFL_MODEL_DIFFLLAMA;
    p.heads = 1, p.hidden = 64;
    assert_int_equal(dfl_train_params_config(&p, &cc, &err), DFL_ERR_USAGE);
    /* the matching rule: half the heads, the same head_dim, counts 6·hd·L apart */
    p = dfl_train_params_default();
    dfl_train_params pl, pd;
    assert_int_equal(dfl_train_pair_params(&p, &pl, &pd, &err), DFL_OK);
    dfl_config cl, cd;
    assert_int_equal(dfl_train_params_config(&pl, &cl, &err), DFL_OK);
    assert_int_equal(dfl_train_params_config(&pd, &cd, &err), DFL_OK);
    assert_int_equal(cl.head_dim, cd.head_dim);
    assert_int_equal(cd.num_heads * 2, cl.num_heads);
    assert_int_equal(dfl_train_param_count(&cd) - dfl_train_param_count(&cl), 6 * cl.head_dim * cl.num_layers);
    p.heads = 3;
    assert_int_equal(dfl_train_pair_params(&p, &pl, &pd, &err), DFL_ERR_USAGE);
    /* run-level checks before any file is touched */
    p = dfl_train_params_default();
    assert_int_equal(dfl_train_run(&p, NULL, NULL, &err), DFL_ERR_USAGE); /* no --out */
    p.out = "/nonexistent-dir-for-dfl-test/x";
    p.batch = 0;
    assert_int_equal(dfl_train_run(&p, NULL, NULL, &err), DFL_ERR_USAGE);
    p.batch = 1;
    p.task.seq_len = 16; /* too short for 4 needles */
    assert_int_equal(dfl_train_run(&p, NULL, NULL, &err), DFL_ERR_USAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_llama),
        cmocka_unit_test(test_grad_diff_transformer),
        cmocka_unit_test(test_grad_diffllama),
        cmocka_unit_test(test_grad_diff_v2),
        cmocka_unit_test(test_forward_matches_library),
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
