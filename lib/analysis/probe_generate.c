/* probe_generate.c — probe --generate: KV-cached decoding after the prompt's pass, with
 * the capture of every generated row (maps, lookback ratio, noise shares, outliers). */
#include "analysis/probe_generate.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/jsondoc.h"
#include "base/rng.h"
#include "dump/dump_schema.h"
#include "model/gguf_tok.h"
#include "model/kv_cache.h"
#include "analysis/stats.h"

/* The share segments of generated rows: the prompt's seven, then the generated span. */
#define GEN_SEGMENTS         (DFL_SHARE_SEGMENTS + 1)
#define GEN_MAX_ALTERNATIVES 64
/* dfl_rng stream of the sampling draws (base/rng.h lists the others). */
#define GEN_RNG_STREAM 4

/* Outlier accumulators of one layer (or one thread's share of a layer). */
typedef struct gen_acc {
    dfl_topk top;
    dfl_moments mom;
} gen_acc;

struct dfl__gen_sample {
    int64_t N, n, T, L, Hs, M, K, A, V;
    int64_t pos;                /* position of the row the current pass computes (decoding steps) */
    int stop_eos;               /* the last token is an EOS id */
    int32_t *ids;               /* [N] */
    float *logprob;             /* [N] the chosen token's log-probability (temperature 1) */
    int32_t *alt_ids;           /* [N, A] the A most probable tokens of each step */
    float *alt_lp;              /* [N, A] their log-probabilities */
    float *lookback;            /* [M, L, Hs, N] NaN at step 0 */
    float *shares, *shares_abs; /* [M, L, Hs, N, 8] */
    float *lambda;              /* [L, N, Hs] DIFF V2's σ(λ) of the generated rows (row of step i + 1 at i) */
    float *last;                /* [V] logits of the row that chooses the next token */
    dfl__gen_pair *pairs;       /* [V] sampling scratch */
    double *prob;               /* [V] */
    int64_t *rows;              /* [R + N − 1] the maps' rows: the prompt's stored rows, then the generated */
    /* outliers of the generated rows */
    int nthreads;
    gen_acc *tacc;         /* [threads] attention logits of the current layer */
    gen_acc *lacc, *hacc;  /* [L] per layer: attention logits, hidden states */
    dfl_topk_item *store;  /* [(threads + 2L) · K] heaps of the accumulators above */
    dfl_topk_item *sorted; /* [K] */
    dfl_rng rng;
    dfl_capture pc; /* probe's own callbacks (the prompt's pass, map storage) */
    sample_run *r;
};

typedef struct dfl__gen_sample gen_sample;

/* ----------------------------------------------------------- the context */

/* eos_token_id of a config text (an id or a list of ids) into g->eos. */
static void add_eos(dfl__gen_ctx *g, const char *text, size_t len)
{
    const char *why = NULL;
    size_t at = 0;
    cJSON *root = text ? dfl__json_parse(text, len, &why, &at) : NULL;
    const cJSON *e = root ? cJSON_GetObjectItemCaseSensitive(root, "eos_token_id") : NULL;
    const cJSON *one = cJSON_IsArray(e) ? e->child : e;
    for (; one && g->n_eos < sizeof g->eos / sizeof g->eos[0]; one = cJSON_IsArray(e) ? one->next : NULL) {
        if (!cJSON_IsNumber(one) || one->valuedouble < 0 || one->valuedouble >= (double)g->m->config.vocab_size)
            continue;
        int32_t id = (int32_t)one->valuedouble;
        size_t k = 0;
        while (k < g->n_eos && g->eos[k] != id)
            k++;
        if (k == g->n_eos) g->eos[g->n_eos++] = id;
    }
    cJSON_Delete(root);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int64_t dfl__gen_count(const dfl_probe_params *p, const dfl_prompt *pr)
{
    return pr->has_generate ? pr->generate : p->generate.tokens;
}

dfl_status dfl__gen_ctx_open(const dfl_probe_params *p, const dfl_model *m, const dfl_prompt_set *ps,
                             dfl__gen_ctx **out, dfl_error *err)
{
    *out = NULL;
    const dfl_generate_params *gp = &p->generate;
    int any = 0;
    for (size_t i = 0; i < ps->count && !any; i++)
        any = dfl__gen_count(p, &ps->items[i]) > 0;
    if (!any) return DFL_OK;
    if (gp->sample && !(gp->temperature > 0 && isfinite(gp->temperature)))
        return dfl__fail(err, DFL_ERR_USAGE, "--temperature must be > 0");
    if (gp->sample && !(gp->top_p > 0 && gp->top_p <= 1))
        return dfl__fail(err, DFL_ERR_USAGE, "--top-p must be in (0, 1]");
    if (gp->top_k < 0) return dfl__fail(err, DFL_ERR_USAGE, "--top-k must be >= 0");
    if (p->forward.quant_bits && p->forward.quant_granularity != DFL_QUANT_ROW)
        return dfl__fail(err, DFL_ERR_USAGE,
                         "--generate with --quantize-logits needs granularity row (tensor and head take the "
                         "absmax over every row of a pass; a decoding step has one)");
    if (gp->alternatives < 0 || gp->alternatives > GEN_MAX_ALTERNATIVES)
        return dfl__fail(err, DFL_ERR_USAGE, "--alternatives must be in [0, %d]", GEN_MAX_ALTERNATIVES);
    dfl__gen_ctx *g = calloc(1, sizeof *g);
    if (!g) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    g->p = p;
    g->m = m;
    add_eos(g, m->config_text, m->config_text ? strlen(m->config_text) : 0);
    dfl_status s = DFL_OK;
    if (is_dir(p->model_dir)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/generation_config.json", p->model_dir);
        struct stat st;
        char *text = NULL;
        size_t len = 0;
        if (stat(path, &st) == 0) {
            if ((s = dfl__read_file(path, &text, &len, err))) {
                free(g);
                return s;
            }
            add_eos(g, text, len);
            free(text);
        }
    }
    /* the tokenizer decodes the generated text: --tokenizer, or the model's own */
    const char *tpath = p->tokenizer_path ? p->tokenizer_path : p->model_dir;
    char probe_path[4096];
    snprintf(probe_path, sizeof probe_path, "%s/tokenizer.json", p->model_dir);
    struct stat st;
    int have = p->tokenizer_path || !is_dir(p->model_dir) || stat(probe_path, &st) == 0;
    if (have && (s = dfl_model_tokenizer_open(tpath, &g->tok, err))) {
        if (p->tokenizer_path) {
            free(g);
            return s;
        }
        g->tok = NULL; /* a GGUF file without a tokenizer: ids only */
        s = DFL_OK;
    }
    *out = g;
    return DFL_OK;
}

void dfl__gen_ctx_close(dfl__gen_ctx *g)
{
    if (!g) return;
    dfl_tokenizer_close(g->tok);
    free(g);
}

/* -------------------------------------------------------------- choosing */

static int pair_desc(const void *a, const void *b)
{
    const dfl__gen_pair *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int32_t dfl__gen_choose(const dfl_generate_params *gp, const float *logits, int64_t V, double u, dfl__gen_pair *pairs,
                        double *prob)
{
    int32_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (logits[v] > logits[best] || isnan(logits[best])) best = (int32_t)v;
    if (!gp->sample) return best;
    int64_t n = 0;
    for (int64_t v = 0; v < V; v++)
        if (!isnan(logits[v]) && logits[v] > -INFINITY) pairs[n++] = (dfl__gen_pair){logits[v], (int32_t)v};
    if (n == 0) return best;
    int filter = (gp->top_k > 0 && gp->top_k < n) || gp->top_p < 1;
    if (filter) qsort(pairs, (size_t)n, sizeof *pairs, pair_desc);
    if (gp->top_k > 0 && gp->top_k < n) n = gp->top_k;
    double mx = -INFINITY, total = 0;
    for (int64_t i = 0; i < n; i++)
        mx = fmax(mx, (double)pairs[i].logit);
    for (int64_t i = 0; i < n; i++)
        total += prob[i] = exp(((double)pairs[i].logit - mx) / gp->temperature);
    if (gp->top_p < 1) { /* the smallest prefix holding top_p of the mass, at least one */
        double cum = 0;
        int64_t keep = 0;
        while (keep < n && (keep == 0 || cum < gp->top_p * total))
            cum += prob[keep++];
        n = keep;
        total = cum;
    }
    double x = u * total, cum = 0;
    for (int64_t i = 0; i < n; i++) {
        cum += prob[i];
        if (x < cum) return pairs[i].id;
    }
    return pairs[n - 1].id;
}

/* The chosen token's log-probability and the A most probable tokens of step i. */
static void step_record(gen_sample *g, int64_t i, int32_t tok)
{
    const float *z = g->last;
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < g->V; v++)
        mx = fmax(mx, (double)z[v]);
    for (int64_t v = 0; v < g->V; v++)
        sum += exp((double)z[v] - mx);
    double lse = mx + log(sum);
    g->ids[i] = tok;
    g->logprob[i] = (float)((double)z[tok] - lse);
    int32_t *ids = g->alt_ids + i * g->A;
    float *lp = g->alt_lp + i * g->A;
    int64_t have = 0;
    for (int64_t v = 0; v < g->V && g->A > 0; v++) { /* insertion into the A best, first id wins ties */
        if (have == g->A && !(z[v] > z[ids[have - 1]])) continue;
        int64_t k = have < g->A ? have++ : have - 1;
        while (k > 0 && z[v] > z[ids[k - 1]]) {
            ids[k] = ids[k - 1];
            k--;
        }
        ids[k] = (int32_t)v;
    }
    for (int64_t k = 0; k < g->A; k++) {
        if (k >= have) ids[k] = -1;
        lp[k] = k < have ? (float)((double)z[ids[k]] - lse) : NAN;
    }
}

/* --------------------------------------------------------------- capture */

/* Lookback ratio and shares of step i from row q (= T − 1 + i) of head h's maps. */
static void step_stats(gen_sample *g, const dfl_attn_block *b, int64_t q, int64_t step)
{
    const sample_run *r = g->r;
    const float *src[3] = {b->map1, b->map2, b->diff};
    const int64_t T = g->T, l = b->layer, h = b->head, N = g->N;
    for (int64_t mi = 0; mi < g->M; mi++) {
        const float *row = src[mi] + (q - b->row0) * b->ld;
        double raw[GEN_SEGMENTS] = {0}, absm[GEN_SEGMENTS] = {0}, total = 0, abs_total = 0;
        for (int64_t j = 0; j <= q; j++) {
            int seg = j < T ? r->share_seg[j] : DFL_SHARE_SEGMENTS;
            raw[seg] += row[j];
            absm[seg] += fabs((double)row[j]);
        }
        for (int s = 0; s < GEN_SEGMENTS; s++) {
            total += raw[s];
            abs_total += absm[s];
        }
        size_t base = (((size_t)mi * (size_t)g->L + (size_t)l) * (size_t)g->Hs + (size_t)h) * (size_t)N + (size_t)step;
        for (int s = 0; s < GEN_SEGMENTS; s++) {
            g->shares[base * GEN_SEGMENTS + (size_t)s] = (float)(raw[s] / total);
            g->shares_abs[base * GEN_SEGMENTS + (size_t)s] = !isfinite(abs_total) ? NAN
                                                             : abs_total > 0      ? (float)(absm[s] / abs_total)
                                                                                  : 0.0f;
        }
        /* Lookback Lens: mean attention on the context over that plus the mean on the
         * generated tokens, of the magnitudes (a diff row has signed entries) */
        double ctx = 0, gen = 0;
        for (int s = 0; s < DFL_SHARE_SEGMENTS; s++)
            ctx += absm[s];
        gen = absm[DFL_SHARE_SEGMENTS];
        ctx /= (double)T;
        if (step > 0) gen /= (double)(q + 1 - T);
        g->lookback[base] = step == 0 || !(ctx + gen > 0) ? NAN : (float)(ctx / (ctx + gen));
    }
}

static int want_all(void *user, int64_t layer)
{
    (void)user, (void)layer;
    return 1;
}

/* The prompt's pass (user: the sample_run, as for probe's own callbacks): probe's
 * capture, and the last row's statistics and logits. */
static dfl_status prompt_attn(void *user, const dfl_attn_block *b, dfl_error *err)
{
    gen_sample *g = ((sample_run *)user)->gen;
    dfl_status s = g->pc.attn_rows(g->pc.user, b, err);
    if (!s && b->row0 <= g->T - 1 && g->T - 1 < b->row0 + b->n) step_stats(g, b, g->T - 1, 0);
    return s;
}

static dfl_status prompt_logits(void *user, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err)
{
    gen_sample *g = ((sample_run *)user)->gen;
    dfl_status s = g->pc.logits_rows(g->pc.user, row0, n, V, logits, err);
    if (!s && row0 <= g->T - 1 && g->T - 1 < row0 + n)
        memcpy(g->last, logits + (g->T - 1 - row0) * V, (size_t)V * sizeof(float));
    return s;
}

/* Decoding steps: the row's maps (stored through probe's own writer) and statistics. */
static dfl_status step_attn(void *user, const dfl_attn_block *b, dfl_error *err)
{
    gen_sample *g = user;
    dfl_status s = g->r->maps[0] ? g->pc.attn_rows(g->pc.user, b, err) : DFL_OK;
    if (!s) step_stats(g, b, g->pos, g->pos - g->T + 1);
    return s;
}

static void step_scores(void *user, int thread, const dfl_score_block *b)
{
    gen_sample *g = user;
    gen_acc *a = &g->tacc[thread];
    for (int64_t i = 0; i < b->n; i++) {
        int64_t q = b->row0 + i, k0 = b->window && q - b->window + 1 > 0 ? q - b->window + 1 : 0;
        const float *x = b->scores + i * b->ld;
        for (int64_t j = k0; j <= q; j++) {
            float v = fabsf(x[j]);
            dfl_moments_add(&a->mom, (double)x[j]);
            if (dfl_topk_wants(&a->top, v)) {
                int32_t idx[4] = {(int32_t)b->head, (int32_t)b->map, (int32_t)q, (int32_t)j};
                dfl_topk_push(&a->top, v, idx);
            }
        }
    }
}

static dfl_status step_hidden(void *user, int64_t l, const float *x, int64_t n, int64_t D, dfl_error *err)
{
    gen_sample *g = user;
    const dfl_probe_params *p = g->r->p;
    if (p->cancel && *p->cancel) return dfl__fail(err, DFL_ERR_CANCELLED, "cancelled");
    for (int th = 0; th < g->nthreads; th++) { /* the layer's attention logits are in */
        dfl_topk_merge(&g->lacc[l].top, &g->tacc[th].top);
        dfl_moments_merge(&g->lacc[l].mom, &g->tacc[th].mom);
        dfl_topk_init(&g->tacc[th].top, g->store + (size_t)th * (size_t)g->K, (int32_t)g->K);
        memset(&g->tacc[th].mom, 0, sizeof g->tacc[th].mom);
    }
    for (int64_t t = 0; t < n; t++)
        for (int64_t c = 0; c < D; c++) {
            float v = x[t * D + c];
            dfl_moments_add(&g->hacc[l].mom, (double)v);
            if (dfl_topk_wants(&g->hacc[l].top, fabsf(v))) {
                int32_t idx[4] = {(int32_t)(g->pos + t), (int32_t)c, 0, 0};
                dfl_topk_push(&g->hacc[l].top, fabsf(v), idx);
            }
        }
    return DFL_OK;
}

static dfl_status step_lambda(void *user, int64_t l, const float *lam, int64_t n, int64_t H, dfl_error *err)
{
    (void)err, (void)n;
    gen_sample *g = user;
    int64_t i = g->pos - g->T; /* generated row i */
    memcpy(g->lambda + ((size_t)l * (size_t)g->N + (size_t)i) * (size_t)H, lam, (size_t)H * sizeof(float));
    return DFL_OK;
}

static dfl_status step_logits(void *user, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err)
{
    (void)err, (void)row0;
    gen_sample *g = user;
    memcpy(g->last, logits + (n - 1) * V, (size_t)V * sizeof(float));
    return DFL_OK;
}

/* ---------------------------------------------------------------- sample */

void dfl__gen_free(sample_run *r)
{
    gen_sample *g = r->gen;
    if (!g) return;
    void *all[] = {g->ids,        g->logprob, g->alt_ids, g->alt_lp, g->lookback, g->shares,
                   g->shares_abs, g->lambda,  g->last,    g->pairs,  g->prob,     g->rows,
                   g->tacc,       g->lacc,    g->hacc,    g->store,  g->sorted};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
    free(g);
    r->gen = NULL;
}

dfl_status dfl__gen_begin(sample_run *r, dfl_error *err)
{
    r->keys = r->T;
    int64_t N = r->gen_ctx ? dfl__gen_count(r->p, r->pr) : 0;
    if (N <= 0) return DFL_OK;
    gen_sample *g = calloc(1, sizeof *g);
    if (!g) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    r->gen = g;
    const dfl_config *c = &r->m->config;
    g->r = r;
    g->N = N;
    g->T = r->T;
    g->L = r->L;
    g->Hs = r->Hs;
    g->M = r->M;
    g->K = r->K;
    g->A = r->p->generate.alternatives;
    g->V = c->vocab_size;
    g->nthreads = r->nthreads;
    size_t n = (size_t)N, L = (size_t)g->L, H = (size_t)g->Hs, M = (size_t)g->M, V = (size_t)g->V, A = (size_t)g->A;
    size_t K = (size_t)g->K, stats = M * L * H * n, th = (size_t)g->nthreads;
    int ok = (g->ids = dfl__alloc_array(n, sizeof *g->ids)) && (g->logprob = dfl__alloc_array(n, sizeof(float))) &&
             (g->alt_ids = dfl__alloc_array(n * (A ? A : 1), sizeof(int32_t))) &&
             (g->alt_lp = dfl__alloc_array(n * (A ? A : 1), sizeof(float))) &&
             (g->lookback = dfl__alloc_array(stats, sizeof(float))) &&
             (g->shares = dfl__alloc_array(stats * GEN_SEGMENTS, sizeof(float))) &&
             (g->shares_abs = dfl__alloc_array(stats * GEN_SEGMENTS, sizeof(float))) &&
             (g->lambda = dfl__calloc_array(c->type == DFL_MODEL_DIFF_V2 ? L * n * H : 1, sizeof(float))) &&
             (g->last = dfl__alloc_array(V, sizeof(float))) && (g->pairs = dfl__alloc_array(V, sizeof *g->pairs)) &&
             (g->prob = dfl__alloc_array(V, sizeof(double))) &&
             (g->rows = dfl__alloc_array((size_t)r->R + n, sizeof(int64_t))) &&
             (g->tacc = dfl__calloc_array(th, sizeof(gen_acc))) && (g->lacc = dfl__calloc_array(L, sizeof(gen_acc))) &&
             (g->hacc = dfl__calloc_array(L, sizeof(gen_acc))) &&
             (g->store = dfl__alloc_array((th + 2 * L) * K, sizeof(dfl_topk_item))) &&
             (g->sorted = dfl__alloc_array(K, sizeof(dfl_topk_item)));
    if (!ok) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for %lld generated tokens", (long long)N);
    for (size_t i = 0; i < stats; i++)
        g->lookback[i] = NAN;
    for (size_t i = 0; i < stats * GEN_SEGMENTS; i++)
        g->shares[i] = g->shares_abs[i] = NAN;
    for (size_t t = 0; t < th; t++)
        dfl_topk_init(&g->tacc[t].top, g->store + t * K, (int32_t)K);
    for (size_t l = 0; l < L; l++) {
        dfl_topk_init(&g->lacc[l].top, g->store + (th + l) * K, (int32_t)K);
        dfl_topk_init(&g->hacc[l].top, g->store + (th + L + l) * K, (int32_t)K);
    }
    g->rng = dfl_rng_make(r->p->generate.seed, GEN_RNG_STREAM, (uint64_t)r->index);
    /* the maps: the prompt's rows, then the rows of generated tokens 0 .. N − 2 (the
     * last generated token is never fed back), over keys up to the last of them */
    if (r->p->maps.enabled) {
        for (int64_t k = 0; k < r->R; k++)
            g->rows[k] = r->rows[k];
        for (int64_t i = 0; i + 1 < N; i++)
            g->rows[r->R + i] = r->T + i;
        r->rows = g->rows;
        r->R += N - 1;
        r->keys = r->T + N - 1;
    }
    return DFL_OK;
}

static int is_eos(const dfl__gen_ctx *c, int32_t id)
{
    for (size_t k = 0; k < c->n_eos; k++)
        if (c->eos[k] == id) return 1;
    return 0;
}

dfl_status dfl__gen_forward(sample_run *r, const dfl_forward_opts *fo, const dfl_capture *cap, dfl_probe_report *rep,
                            dfl_error *err)
{
    gen_sample *g = r->gen;
    const dfl_probe_params *p = r->p;
    if (!g) return dfl_forward(r->m, r->pr->tokens, r->T, fo, cap, err);
    /* the intervention hooks index whole passes, not the cache's one-row steps */
    if (fo->iv)
        return dfl__fail(err, DFL_ERR_USAGE,
                         "--apply does not combine with generation (--generate, or a prompt's \"generate\")");
    g->pc = *cap;
    dfl_kv_cache *kv = NULL;
    dfl_status s = dfl_kv_cache_create(r->m, g->T + g->N - 1, &kv, err);
    if (s) return s;
    dfl_capture pc = *cap;
    pc.attn_rows = prompt_attn;
    pc.logits_rows = prompt_logits;
    s = dfl_kv_cache_append(kv, r->pr->tokens, g->T, fo, &pc, err);
    double t0 = dfl_clock_seconds();
    dfl_capture sc = {.user = g,
                      .want_maps = want_all,
                      .attn_rows = step_attn,
                      .scores_rows = step_scores,
                      .hidden = step_hidden,
                      .logits_rows = step_logits};
    if (r->m->config.type == DFL_MODEL_DIFF_V2) sc.lambda_rows = step_lambda;
    while (!s) {
        int64_t i = g->n;
        int32_t tok = dfl__gen_choose(&p->generate, g->last, g->V, dfl_rng_uniform(&g->rng), g->pairs, g->prob);
        step_record(g, i, tok);
        g->n++;
        g->stop_eos = is_eos(r->gen_ctx, tok);
        if (g->n == g->N || g->stop_eos) break;
        if (p->cancel && *p->cancel) {
            s = dfl__fail(err, DFL_ERR_CANCELLED, "cancelled");
            break;
        }
        g->pos = g->T + i; /* feed token i back */
        s = dfl_kv_cache_append(kv, &g->ids[i], 1, fo, &sc, err);
    }
    dfl_kv_cache_destroy(kv);
    rep->generate_seconds += dfl_clock_seconds() - t0;
    return s;
}

/* ----------------------------------------------------------------- write */

/* Sorted top-K of accumulators acc[L] into top[L, K] and index[L, K, nidx]. */
static void finish_tops(gen_sample *g, const gen_acc *acc, float *top, int32_t *index, int nidx, double *mom)
{
    for (int64_t l = 0; l < g->L; l++) {
        int32_t kept = dfl_topk_sorted(&acc[l].top, g->sorted);
        for (int64_t i = 0; i < g->K; i++) {
            top[l * g->K + i] = i < kept ? g->sorted[i].value : NAN;
            for (int c = 0; c < nidx; c++)
                index[(l * g->K + i) * nidx + c] = i < kept ? g->sorted[i].idx[c] : -1;
        }
        memcpy(mom + l * 6, acc[l].mom.m, sizeof acc[l].mom.m);
    }
}

static dfl_status write_outliers(gen_sample *g, dfl_dump *d, dfl_error *err)
{
    size_t LK = (size_t)g->L * (size_t)g->K;
    float *top = dfl__alloc_array(LK, sizeof(float));
    int32_t *index = dfl__alloc_array(LK * 4, sizeof(int32_t));
    double *mom = dfl__alloc_array((size_t)g->L * 6, sizeof(double));
    dfl_status s = top && index && mom ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    int64_t dk[2] = {g->L, g->K}, d4[3] = {g->L, g->K, 4}, d2[3] = {g->L, g->K, 2}, dm[2] = {g->L, 6};
    static const char *cols = "count,sum_x,sum_x2,sum_x3,sum_x4,max_abs";
    if (!s) {
        finish_tops(g, g->lacc, top, index, 4, mom);
        if ((s = dfl_dump_put_deflated(d, DFL_DS_GENERATED_LOGITS_TOP, DFL_H5_F32, 2, dk, top, err)) ||
            (s = dfl_dump_put_deflated(d, DFL_DS_GENERATED_LOGITS_TOP_INDEX, DFL_H5_I32, 3, d4, index, err)) ||
            (s = dfl_dump_attr_str(d, DFL_DS_GENERATED_LOGITS_TOP_INDEX, DFL_ATTR_COLUMNS, "head,map,query,key",
                                   err)) ||
            (s = dfl_dump_put(d, DFL_DS_GENERATED_LOGITS_MOMENTS, DFL_H5_F64, 2, dm, mom, err)) ||
            (s = dfl_dump_attr_str(d, DFL_DS_GENERATED_LOGITS_MOMENTS, DFL_ATTR_COLUMNS, cols, err))) {
        }
    }
    if (!s) {
        finish_tops(g, g->hacc, top, index, 2, mom);
        if ((s = dfl_dump_put_deflated(d, DFL_DS_GENERATED_HIDDEN_TOP, DFL_H5_F32, 2, dk, top, err)) ||
            (s = dfl_dump_put_deflated(d, DFL_DS_GENERATED_HIDDEN_TOP_INDEX, DFL_H5_I32, 3, d2, index, err)) ||
            (s = dfl_dump_attr_str(d, DFL_DS_GENERATED_HIDDEN_TOP_INDEX, DFL_ATTR_COLUMNS, "token,channel", err)) ||
            (s = dfl_dump_put(d, DFL_DS_GENERATED_HIDDEN_MOMENTS, DFL_H5_F64, 2, dm, mom, err)) ||
            (s = dfl_dump_attr_str(d, DFL_DS_GENERATED_HIDDEN_MOMENTS, DFL_ATTR_COLUMNS, cols, err))) {
        }
    }
    free(top);
    free(index);
    free(mom);
    return s;
}

/* The per-step statistics [M, L, Hs, N(, 8)] cut to the n steps taken. */
static dfl_status put_steps(gen_sample *g, dfl_dump *d, const char *name, const float *v, int64_t inner, dfl_error *err)
{
    size_t outer = (size_t)g->M * (size_t)g->L * (size_t)g->Hs, n = (size_t)g->n, N = (size_t)g->N;
    float *b = dfl__alloc_array(outer * n * (size_t)inner, sizeof(float));
    if (!b) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (size_t o = 0; o < outer; o++)
        memcpy(b + o * n * (size_t)inner, v + o * N * (size_t)inner, n * (size_t)inner * sizeof(float));
    int64_t dims[5] = {g->M, g->L, g->Hs, g->n, inner};
    dfl_status s = dfl_dump_put(d, name, DFL_H5_F32, inner > 1 ? 5 : 4, dims, b, err);
    free(b);
    return s;
}

/* generated/text and generated/token_text through the tokenizer. */
static dfl_status put_text(gen_sample *g, dfl_tokenizer *t, dfl_dump *d, dfl_error *err)
{
    uint32_t *ids = dfl__alloc_array((size_t)g->n, sizeof *ids);
    if (!ids) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < g->n; i++)
        ids[i] = (uint32_t)g->ids[i];
    char *text = NULL, **labels = NULL;
    size_t len = 0;
    dfl_status s = dfl_tokenizer_decode(t, ids, (size_t)g->n, 0, &text, &len, err);
    if (!s) s = dfl_dump_put_strings(d, DFL_DS_GENERATED_TEXT, (const char *const *)&text, 1, err);
    if (!s) s = dfl_tokenizer_labels(t, ids, (size_t)g->n, &labels, err);
    if (!s) s = dfl_dump_put_strings(d, DFL_DS_GENERATED_TOKEN_TEXT, (const char *const *)labels, (size_t)g->n, err);
    if (labels) dfl_tokenizer_labels_free(labels, (size_t)g->n);
    free(text);
    free(ids);
    return s;
}

dfl_status dfl__gen_write(sample_run *r, dfl_dump *d, dfl_probe_report *rep, dfl_error *err)
{
    gen_sample *g = r->gen;
    if (!g) return DFL_OK;
    const dfl_generate_params *gp = &r->p->generate;
    int64_t n = g->n, na[2] = {n, g->A};
    char how[160];
    if (gp->sample)
        snprintf(how, sizeof how, "sample temperature=%g top_k=%lld top_p=%g seed=%llu", gp->temperature,
                 (long long)gp->top_k, gp->top_p, (unsigned long long)gp->seed);
    else
        snprintf(how, sizeof how, "greedy");
    dfl_status s;
    if ((s = dfl_dump_put(d, DFL_DS_GENERATED_TOKENS, DFL_H5_I32, 1, &n, g->ids, err)) ||
        (s = dfl_dump_attr_str(d, DFL_DS_GENERATED_TOKENS, DFL_ATTR_STOP, g->stop_eos ? "eos" : "length", err)) ||
        (s = dfl_dump_attr_str(d, DFL_DS_GENERATED_TOKENS, DFL_ATTR_DECODING, how, err)) ||
        (s = dfl_dump_put(d, DFL_DS_GENERATED_LOGPROB, DFL_H5_F32, 1, &n, g->logprob, err)))
        return s;
    if (g->A > 0 && ((s = dfl_dump_put(d, DFL_DS_GENERATED_TOP_IDS, DFL_H5_I32, 2, na, g->alt_ids, err)) ||
                     (s = dfl_dump_put(d, DFL_DS_GENERATED_TOP_LOGPROBS, DFL_H5_F32, 2, na, g->alt_lp, err))))
        return s;
    if (r->gen_ctx->tok && (s = put_text(g, r->gen_ctx->tok, d, err))) return s;
    if ((s = put_steps(g, d, DFL_DS_GENERATED_LOOKBACK, g->lookback, 1, err)) ||
        (s = dfl_dump_attr_str(d, DFL_DS_GENERATED_LOOKBACK, DFL_ATTR_MAPS, g->M == 3 ? "map1,map2,diff" : "map1",
                               err)) ||
        (s = put_steps(g, d, DFL_DS_GENERATED_SHARES, g->shares, GEN_SEGMENTS, err)) ||
        (s = put_steps(g, d, DFL_DS_GENERATED_SHARES_ABS, g->shares_abs, GEN_SEGMENTS, err)))
        return s;
    char segs[200] = "";
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++)
        snprintf(segs + strlen(segs), sizeof segs - strlen(segs), "%s,", dfl_share_name(k));
    strcat(segs, "generated");
    if ((s = dfl_dump_attr_str(d, DFL_DS_GENERATED_SHARES, DFL_ATTR_SEGMENTS, segs, err))) return s;
    if (r->m->config.type == DFL_MODEL_DIFF_V2 && n > 1) {
        int64_t dims[3] = {g->L, n - 1, g->Hs};
        float *b = dfl__alloc_array((size_t)(g->L * (n - 1) * g->Hs), sizeof(float));
        if (!b) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (int64_t l = 0; l < g->L; l++)
            memcpy(b + l * (n - 1) * g->Hs, g->lambda + l * g->N * g->Hs, (size_t)((n - 1) * g->Hs) * sizeof(float));
        s = dfl_dump_put(d, DFL_DS_GENERATED_LAMBDA, DFL_H5_F32, 3, dims, b, err);
        free(b);
        if (s) return s;
    }
    if ((s = write_outliers(g, d, err))) return s;
    const dfl_prompt *pr = r->pr;
    if (pr->expect) {
        int64_t ne = (int64_t)pr->n_expect;
        uint8_t ok = n >= ne;
        for (int64_t i = 0; ok && i < ne; i++)
            ok = g->ids[i] == pr->expect[i];
        rep->expects++;
        rep->expects_correct += ok;
        if ((s = dfl_dump_put(d, DFL_DS_GENERATED_EXPECT, DFL_H5_I32, 1, &ne, pr->expect, err)) ||
            (s = dfl_dump_put(d, DFL_DS_GENERATED_CORRECT, DFL_H5_U8, 0, NULL, &ok, err)))
            return s;
    }
    rep->generated_samples++;
    rep->generated_tokens += n;
    return DFL_OK;
}
