/* test_forward.c — properties of the forward pass that hold whatever the weights:
 * softmax rows sum to 1, diff rows to 1 − λ and equal map1 − λ·map2, masked entries
 * are 0, every (layer, head, row) is captured once and in order across row blocks,
 * capturing does not change the logits, thread count does not change them, and bad
 * input or a failing callback stops the pass. The numbers themselves are checked
 * against the numpy reference in tests/test_reference.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/forward.h"
#include "model/model.h"
#include "tiny_model.h"

static char tmpdir[] = "/tmp/dfl_fwd_XXXXXX";

static dfl_model *load(tiny_spec s)
{
    dfl_model *m = NULL;
    dfl_error e;
    assert_int_equal(tiny_model_write(tmpdir, s), 0);
    if (dfl_model_load(tmpdir, &m, &e)) fail_msg("load: %s", e.msg);
    return m;
}

static int32_t *tokens_for(int64_t T, int V)
{
    int32_t *t = malloc((size_t)T * sizeof *t);
    for (int64_t i = 0; i < T; i++)
        t[i] = (int32_t)((i * 37 + 11) % V);
    return t;
}

/* ------------------------------------------------------------ map checks */

typedef struct map_check {
    const dfl_model *m;
    int64_t next_row; /* per (layer, head): rows seen so far, in order */
    int64_t *seen;    /* [L, Hs] rows delivered */
    double worst_sum, worst_diff;
    int masked_nonzero, out_of_order;
} map_check;

static int want(void *u, int64_t l)
{
    (void)u;
    (void)l;
    return 1;
}

static dfl_status on_block(void *u, const dfl_attn_block *b, dfl_error *e)
{
    (void)e;
    map_check *c = u;
    int64_t Hs = dfl_config_analysis_heads(&c->m->config);
    int64_t *seen = &c->seen[b->layer * Hs + b->head];
    if (*seen != b->row0) c->out_of_order++;
    *seen += b->n;
    float lam = c->m->layers[b->layer].lambda;
    for (int64_t i = 0; i < b->n; i++) {
        int64_t r = b->row0 + i;
        double s1 = 0, s2 = 0, sd = 0;
        for (int64_t j = 0; j < b->ncols; j++) {
            float p1 = b->map1[i * b->ld + j];
            if (j > r && p1 != 0.0f) c->masked_nonzero++;
            s1 += p1;
            if (b->map2) {
                float p2 = b->map2[i * b->ld + j], dv = b->diff[i * b->ld + j];
                if (j > r && (p2 != 0.0f || dv != 0.0f)) c->masked_nonzero++;
                s2 += p2;
                sd += dv;
                c->worst_diff = fmax(c->worst_diff, fabs(dv - (p1 - lam * p2)));
            }
        }
        c->worst_sum = fmax(c->worst_sum, fabs(s1 - 1));
        if (b->map2) {
            c->worst_sum = fmax(c->worst_sum, fabs(s2 - 1));
            c->worst_sum = fmax(c->worst_sum, fabs(sd - (1 - lam)));
        }
    }
    return DFL_OK;
}

static void check_maps(tiny_spec s, int64_t T)
{
    dfl_model *m = load(s);
    int64_t Hs = dfl_config_analysis_heads(&m->config);
    map_check c = {m, 0, calloc((size_t)(s.L * Hs), sizeof(int64_t)), 0, 0, 0, 0};
    dfl_capture cap = {.user = &c, .want_maps = want, .attn_rows = on_block};
    int32_t *tok = tokens_for(T, s.V);
    dfl_error e;
    assert_int_equal(dfl_forward(m, tok, T, NULL, &cap, &e), DFL_OK);
    for (int64_t i = 0; i < s.L * Hs; i++)
        assert_int_equal(c.seen[i], T);
    assert_int_equal(c.out_of_order, 0);
    assert_int_equal(c.masked_nonzero, 0);
    assert_true(c.worst_sum < 1e-5);
    assert_true(c.worst_diff < 1e-6);
    free(c.seen);
    free(tok);
    dfl_model_free(m);
}

/* T = 150 spans several row blocks (block rows = 1024 / heads, clamped to 16..128). */
static void test_maps_llama_gqa(void **st)
{
    (void)st;
    check_maps((tiny_spec){"llama", 2, 32, 8, 2, 48, 50, 1}, 150);
}
static void test_maps_diff_gqa(void **st)
{
    (void)st;
    check_maps((tiny_spec){"diff_transformer", 2, 32, 4, 2, 48, 50, 2}, 150);
}
static void test_maps_diffllama_gqa(void **st)
{
    (void)st;
    check_maps((tiny_spec){"diffllama", 2, 32, 8, 4, 48, 50, 3}, 150);
}

/* --------------------------------------------------- logits invariances */

static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return INFINITY; /* fmax would skip a NaN */
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return d / s;
}

/* What a captured run delivered: every kind of callback counted, the logits kept. */
typedef struct logit_capture {
    float *out; /* [T, V] */
    int64_t V;
    int blocks, hidden;
    int64_t rows;    /* logits rows delivered */
    int64_t *scores; /* [max threads] score blocks seen per thread */
} logit_capture;

static dfl_status count_block(void *u, const dfl_attn_block *b, dfl_error *e)
{
    (void)b, (void)e;
    ((logit_capture *)u)->blocks++;
    return DFL_OK;
}

static void count_scores(void *u, int thread, const dfl_score_block *b)
{
    (void)b;
    ((logit_capture *)u)->scores[thread]++;
}

static dfl_status count_hidden(void *u, int64_t l, const float *x, int64_t T, int64_t D, dfl_error *e)
{
    (void)l, (void)x, (void)T, (void)D, (void)e;
    ((logit_capture *)u)->hidden++;
    return DFL_OK;
}

static dfl_status keep_logits(void *u, int64_t r0, int64_t n, int64_t V, const float *z, dfl_error *e)
{
    (void)e;
    logit_capture *c = u;
    memcpy(c->out + r0 * V, z, (size_t)(n * V) * sizeof *z);
    c->rows += n;
    return DFL_OK;
}

/* Logits of tok[T]: from dfl_forward_logits (no capture), or, with_maps, from the
 * logits_rows callback of a run that captures everything (maps, raw scores, hidden
 * states), so that the two can be compared. */
static float *logits_of(const dfl_model *m, const int32_t *tok, int64_t T, int with_maps)
{
    int64_t V = m->config.vocab_size;
    float *out = malloc((size_t)(T * V) * sizeof *out);
    dfl_error e;
    if (!with_maps) {
        assert_int_equal(dfl_forward_logits(m, tok, T, out, &e), DFL_OK);
        return out;
    }
    for (int64_t i = 0; i < T * V; i++)
        out[i] = NAN; /* a row never delivered fails the comparison */
    logit_capture c = {out, V, 0, 0, 0, calloc((size_t)dfl_forward_max_threads(), sizeof(int64_t))};
    dfl_capture cap = {.user = &c,
                       .want_maps = want,
                       .attn_rows = count_block,
                       .scores_rows = count_scores,
                       .hidden = count_hidden,
                       .logits_rows = keep_logits};
    assert_int_equal(dfl_forward(m, tok, T, NULL, &cap, &e), DFL_OK);
    int64_t score_blocks = 0;
    for (int i = 0; i < dfl_forward_max_threads(); i++)
        score_blocks += c.scores[i];
    assert_true(c.blocks > 0 && score_blocks > 0);
    assert_int_equal(c.hidden, m->config.num_layers);
    assert_int_equal(c.rows, T);
    free(c.scores);
    return out;
}

static void test_threads_and_capture_do_not_change_logits(void **st)
{
    (void)st;
    const char *types[3] = {"llama", "diff_transformer", "diffllama"};
    for (int k = 0; k < 3; k++) {
        dfl_model *m = load((tiny_spec){types[k], 2, 32, 4, 2, 40, 60, 7u + (unsigned)k});
        const int64_t T = 90;
        int32_t *tok = tokens_for(T, 60);
        omp_set_num_threads(1);
        float *a = logits_of(m, tok, T, 0);
        /* capturing: the captured run's own logits equal the uncaptured run's */
        float *a_cap = logits_of(m, tok, T, 1);
        assert_true(rel_diff(a_cap, a, (size_t)(T * 60)) < 1e-6);
        omp_set_num_threads(2);
        float *b = logits_of(m, tok, T, 1);
        assert_true(rel_diff(b, a, (size_t)(T * 60)) < 1e-5);
        /* causality: the first 40 positions do not see what follows */
        float *c = logits_of(m, tok, 40, 0);
        assert_true(rel_diff(c, a, (size_t)(40 * 60)) < 1e-5);
        free(a), free(a_cap), free(b), free(c), free(tok);
        dfl_model_free(m);
    }
}

/* ---------------------------------------------------- released layers */

static long resident_pages(void)
{
    long size = 0, rss = -1;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &size, &rss) != 2) rss = -1;
    if (f) fclose(f);
    return rss;
}

/* Logits through dfl_forward with release_layers set as given. */
static float *logits_released(const dfl_model *m, const int32_t *tok, int64_t T, int release)
{
    int64_t V = m->config.vocab_size;
    float *out = malloc((size_t)(T * V) * sizeof *out);
    logit_capture c = {out, V, 0, 0, 0, NULL};
    dfl_capture cap = {.user = &c, .logits_rows = keep_logits};
    dfl_forward_opts o = dfl_forward_opts_default();
    o.release_layers = release;
    dfl_error e;
    assert_int_equal(dfl_forward(m, tok, T, &o, &cap, &e), DFL_OK);
    assert_int_equal(c.rows, T);
    return out;
}

/* Layers handed back after use (a checkpoint larger than memory streams through it):
 * the same logits bit for bit, run after run, and the weights' pages leave the
 * process (its resident set drops by most of the layers' matrices). */
static void test_released_layers_same_logits(void **st)
{
    (void)st;
    dfl_model *m = load((tiny_spec){"llama", 3, 256, 4, 2, 1024, 64, 5u});
    const int64_t T = 20;
    int32_t *tok = tokens_for(T, 64);
    float *kept = logits_released(m, tok, T, -1);
    long before = resident_pages();
    float *once = logits_released(m, tok, T, 1), *twice = logits_released(m, tok, T, 1);
    long after = resident_pages();
    assert_memory_equal(once, kept, (size_t)(T * 64) * sizeof(float));
    assert_memory_equal(twice, kept, (size_t)(T * 64) * sizeof(float));
    /* 3 layers of q, k, v, o and the three MLP matrices: 3·(2·256² + 2·128·256 + 3·256·1024)·4 bytes */
    long page = sysconf(_SC_PAGESIZE), layer_pages = 3L * (2 * 256 * 256 + 2 * 128 * 256 + 3 * 256 * 1024) * 4 / page;
    assert_true(before > 0 && after > 0);
    assert_true(before - after > layer_pages / 2);
    free(kept), free(once), free(twice), free(tok);
    dfl_model_free(m);
}

/* ------------------------------------------------------------- failures */

static dfl_status failing(void *u, int64_t r0, int64_t n, int64_t V, const float *z, dfl_error *e)
{
    (void)u, (void)r0, (void)n, (void)V, (void)z;
    return dfl__fail(e, DFL_ERR_IO, "callback says no");
}

static void test_bad_tokens_and_failing_callback(void **st)
{
    (void)st;
    dfl_model *m = load((tiny_spec){"llama", 1, 16, 2, 2, 24, 20, 5});
    int32_t tok[4] = {1, 2, 20, 3};
    float out[4 * 20];
    dfl_error e;
    assert_int_equal(dfl_forward_logits(m, tok, 4, out, &e), DFL_ERR_RANGE);
    assert_non_null(strstr(e.msg, "token 20 at position 2"));
    tok[2] = -1;
    assert_int_equal(dfl_forward_logits(m, tok, 4, out, &e), DFL_ERR_RANGE);
    assert_int_equal(dfl_forward_logits(m, tok, 0, out, &e), DFL_ERR_RANGE);
    tok[2] = 3;
    dfl_capture cap = {.logits_rows = failing};
    assert_int_equal(dfl_forward(m, tok, 4, NULL, &cap, &e), DFL_ERR_IO);
    assert_string_equal(e.msg, "callback says no");
    /* a single token works */
    assert_int_equal(dfl_forward_logits(m, tok, 1, out, &e), DFL_OK);
    dfl_model_free(m);
}

/* ------------------------------------------------------------------ FLOPs */

/* What the pass computed, seen through its capture: per (layer, analysis head) the
 * visible keys of each query row, counted as the nonzero entries of map 1 (masked
 * entries are exactly 0; random weights never underflow a softmax entry to 0). */
typedef struct key_count {
    double keys; /* Σ over layers, heads, rows of the visible keys */
    int64_t rows;
} key_count;

static dfl_status count_keys(void *u, const dfl_attn_block *b, dfl_error *e)
{
    (void)e;
    key_count *k = u;
    for (int64_t i = 0; i < b->n; i++) {
        for (int64_t j = 0; j < b->ncols; j++)
            k->keys += b->map1[i * b->ld + j] != 0.0f;
        k->rows++;
    }
    return DFL_OK;
}

static dfl_status no_logits(void *u, int64_t r0, int64_t n, int64_t V, const float *z, dfl_error *e)
{
    (void)u, (void)r0, (void)n, (void)V, (void)z, (void)e;
    return DFL_OK;
}

/* Multiply-adds of a pass over T tokens, counted independently of dfl_forward_flops:
 * every matrix product from the shape of the tensor the model bound (rows · cols per
 * token: q, k, v, o, gate, up, down, lm_head), and attention by walking every (layer,
 * analysis head, query, key) that the mask lets through — the window rule written out
 * here from Mistral's and Qwen2's definitions (query i sees key j when j <= i and
 * i − j < W, on every layer for Mistral, on layers >= max_window_layers for Qwen2) — with
 * the widths of docs/format.md: per visible key, each of the M softmax maps takes a
 * q·k product of the score width and the combined map one product with the head's
 * value (llama: 1 map of hd, value hd; diff_transformer: 2 maps of d, value 2d;
 * diffllama: 2 maps of hd, value 2hd). *captured gets the same attention count from
 * the keys the pass itself left visible. */
static double brute_force_macs(const dfl_model *m, int64_t T, int64_t window, int64_t from, double *captured)
{
    const dfl_config *c = &m->config;
    int diff = c->type == DFL_MODEL_DIFF_TRANSFORMER, dl = c->type == DFL_MODEL_DIFFLLAMA;
    int64_t Ha = dl ? c->num_heads / 2 : c->num_heads, maps = diff || dl ? 2 : 1;
    double macs = 0, att = 0;
    for (int64_t l = 0; l < c->num_layers; l++) {
        const dfl_layer_weights *w = &m->layers[l];
        const dfl_wmat *mats[7] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (int i = 0; i < 7; i++)
            macs += (double)T * (double)mats[i]->rows * (double)mats[i]->cols;
        int64_t score_w = w->wq.rows / (Ha * maps), value_w = w->wo.cols / Ha;
        for (int64_t h = 0; h < Ha; h++)
            for (int64_t i = 0; i < T; i++)
                for (int64_t j = 0; j < T; j++)
                    if (j <= i && (window == 0 || l < from || i - j < window))
                        att += (double)(maps * score_w + value_w);
    }
    macs += (double)T * (double)m->lm_head.rows * (double)m->lm_head.cols;

    key_count k = {0, 0};
    dfl_capture cap = {.user = &k, .want_maps = want, .attn_rows = count_keys, .logits_rows = no_logits};
    int32_t *tok = tokens_for(T, (int)c->vocab_size);
    dfl_error e;
    assert_int_equal(dfl_forward(m, tok, T, NULL, &cap, &e), DFL_OK);
    free(tok);
    assert_int_equal(k.rows, c->num_layers * Ha * T);
    const dfl_layer_weights *w = &m->layers[0];
    *captured = macs + k.keys * (double)(maps * (w->wq.rows / (Ha * maps)) + w->wo.cols / Ha);
    return macs + att;
}

/* Add zero q/k/v biases to the tiny model in tmpdir (what a qwen2 checkpoint carries). */
static void add_qkv_biases(int L)
{
    char path[600], name[12][64];
    assert_true(L * 3 <= 12);
    snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
    dfl_st_file *f = NULL;
    dfl_error e;
    assert_int_equal(dfl_st_open(path, &f, &e), DFL_OK);
    size_t n = dfl_st_count(f), k = 0;
    dfl_tensor *ts = calloc(n + (size_t)L * 3, sizeof *ts);
    float *zeros = calloc(4096, sizeof *zeros);
    for (size_t i = 0; i < n; i++) {
        ts[i] = *dfl_st_at(f, i);
        const char *proj = strstr(ts[i].name, "_proj.weight");
        if (!proj || !strstr(ts[i].name, "self_attn.") || proj[-1] == 'o') continue;
        snprintf(name[k], sizeof name[k], "%.*s_proj.bias", (int)(proj - ts[i].name), ts[i].name);
        dfl_tensor *b = &ts[n + k];
        b->name = name[k];
        b->dtype = DFL_DTYPE_F32;
        b->ndim = 1;
        b->shape[0] = ts[i].shape[0];
        b->data = zeros;
        b->nbytes = (size_t)ts[i].shape[0] * sizeof(float);
        k++;
    }
    assert_int_equal(k, (size_t)L * 3);
    assert_int_equal(dfl_st_write(path, ts, n + k, 1, &e), DFL_OK);
    dfl_st_close(f);
    free(ts);
    free(zeros);
}

/* A tiny model of spec s, run as family `type` with the config keys `extra` (NULL: as
 * written). */
static dfl_model *load_as(tiny_spec s, const char *type, const char *extra)
{
    assert_int_equal(tiny_model_write(tmpdir, s), 0);
    if (extra) {
        char path[600], text[1024], out[1400];
        snprintf(path, sizeof path, "%s/config.json", tmpdir);
        FILE *f = fopen(path, "r");
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = '\0';
        const char *rest = strstr(text, "\"vocab_size\"");
        assert_non_null(rest);
        snprintf(out, sizeof out, "{\"model_type\": \"%s\", %s, %s", type, extra, rest);
        f = fopen(path, "w");
        fputs(out, f);
        fclose(f);
        if (!strcmp(type, "qwen2")) add_qkv_biases(s.L);
    }
    dfl_model *m = NULL;
    dfl_error e;
    if (dfl_model_load(tmpdir, &m, &e)) fail_msg("load: %s", e.msg);
    return m;
}

static void test_flops_counted(void **st)
{
    (void)st;
    struct {
        tiny_spec s;
        const char *type, *extra;
        int64_t window, from; /* layers >= from see a window of W keys (W = 0: none) */
    } cases[] = {
        {{"llama", 2, 32, 8, 2, 48, 50, 1}, "llama", NULL, 0, 0},                       /* GQA: 4 q heads per kv head */
        {{"diff_transformer", 2, 32, 4, 2, 48, 50, 2}, "diff_transformer", NULL, 0, 0}, /* GQA, d = D/H/2 */
        {{"diffllama", 2, 32, 8, 4, 48, 50, 3}, "diffllama", NULL, 0, 0}, /* GQA, H/2 differential heads */
        {{"llama", 2, 32, 4, 1, 40, 30, 4}, "mistral", "\"sliding_window\": 7", 7, 0},
        {{"llama", 1, 16, 2, 2, 24, 20, 5}, "mistral", "\"sliding_window\": 64", 64, 0}, /* W > T: full */
        /* Qwen2: full attention below max_window_layers, the window from there on */
        {{"llama", 3, 16, 4, 2, 24, 20, 6},
         "qwen2",
         "\"use_sliding_window\": true, \"sliding_window\": 5, \"max_window_layers\": 1",
         5,
         1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int64_t T = 1; T <= 37; T += 12) {
            dfl_model *m = load_as(cases[i].s, cases[i].type, cases[i].extra);
            double captured, want = 2 * brute_force_macs(m, T, cases[i].window, cases[i].from, &captured);
            double got = dfl_forward_flops(&m->config, T);
            if (fabs(got - want) > 1e-9 * want || fabs(2 * captured - want) > 1e-9 * want)
                fail_msg("%s window %lld T %lld: dfl_forward_flops %.17g, brute force %.17g, captured keys %.17g",
                         cases[i].type, (long long)cases[i].window, (long long)T, got, want, 2 * captured);
            dfl_model_free(m);
        }
    }
}

static int setup(void **st)
{
    (void)st;
    return mkdtemp(tmpdir) ? 0 : -1;
}
static int teardown(void **st)
{
    (void)st;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps_llama_gqa),
        cmocka_unit_test(test_maps_diff_gqa),
        cmocka_unit_test(test_maps_diffllama_gqa),
        cmocka_unit_test(test_threads_and_capture_do_not_change_logits),
        cmocka_unit_test(test_bad_tokens_and_failing_callback),
        cmocka_unit_test(test_released_layers_same_logits),
        cmocka_unit_test(test_flops_counted),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
