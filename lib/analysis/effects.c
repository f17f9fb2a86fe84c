/* effects.c — the grids behind `bin/effects`: patching sweeps, head grids (DLA, head
 * patching, head ablation) and the logit-lens table, read from dumps (effects.h). */
#include "analysis/effects.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_read.h"
#include "dump/dump_schema.h"
#include "model/gguf_tok.h"
#include "text/tokenizer.h"

#define NORMALISED "normalised effect (patched - corrupted) / (clean - corrupted)"

static const char *const SOURCE_NAMES[] = {"auto", "dla", "patch", "ablation"};

const char *dfl_effects_source_name(dfl_effects_source s)
{
    return (unsigned)s < 4 ? SOURCE_NAMES[s] : "?";
}

dfl_status dfl_effects_source_parse(const char *text, dfl_effects_source *out, dfl_error *err)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(text, SOURCE_NAMES[i])) {
            *out = (dfl_effects_source)i;
            return DFL_OK;
        }
    return dfl__fail(err, DFL_ERR_USAGE, "--source: '%s' is not auto, dla, patch or ablation", text);
}

dfl_effects_style dfl_effects_style_default(void)
{
    dfl_effects_style s = {NULL, NULL, 0.0, 1, 0.0};
    return s;
}

/* ---------------------------------------------------------------- grids */

static void free_strings(char **s, int64_t n)
{
    for (int64_t i = 0; s && i < n; i++)
        free(s[i]);
    free(s);
}

void dfl_effects_grid_free(dfl_effects_grid *g)
{
    if (!g) return;
    free(g->label);
    free(g->what);
    free(g->unit);
    free(g->row_axis);
    free(g->col_axis);
    free(g->v);
    free_strings(g->row_labels, g->rows);
    free_strings(g->col_labels, g->cols);
    free_strings(g->text, g->text ? g->rows * g->cols : 0);
    free(g->note);
    memset(g, 0, sizeof *g);
}

static char *dup_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_fmt(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* A grid of rows × cols (NaN values, empty labels); DFL_ERR_NOMEM. */
static dfl_status grid_alloc(dfl_effects_grid *g, int64_t rows, int64_t cols, const char *label, const char *what,
                             const char *unit, const char *row_axis, const char *col_axis, dfl_error *err)
{
    memset(g, 0, sizeof *g);
    g->rows = rows;
    g->cols = cols;
    size_t n = 0;
    int ok = dfl__mul_ok((size_t)rows, (size_t)cols, &n);
    g->v = ok ? dfl__alloc_array(n ? n : 1, sizeof(float)) : NULL;
    g->row_labels = calloc((size_t)rows ? (size_t)rows : 1, sizeof(char *));
    g->col_labels = calloc((size_t)cols ? (size_t)cols : 1, sizeof(char *));
    g->label = strdup(label ? label : "");
    g->what = strdup(what);
    g->unit = strdup(unit);
    g->row_axis = strdup(row_axis);
    g->col_axis = strdup(col_axis);
    if (!g->v || !g->row_labels || !g->col_labels || !g->label || !g->what || !g->unit || !g->row_axis ||
        !g->col_axis) {
        dfl_effects_grid_free(g);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        g->v[i] = NAN;
    return DFL_OK;
}

/* Labels "prefix N" for values idx[n] (or 0..n−1 when idx is NULL). */
static int number_labels(char **out, const int32_t *idx, int64_t n, const char *prefix)
{
    for (int64_t i = 0; i < n; i++)
        if (!(out[i] = dup_fmt("%s%d", prefix, idx ? (int)idx[i] : (int)i))) return 0;
    return 1;
}

/* ------------------------------------------------------------ reading */

typedef struct sample_ctx {
    dfl_dump_reader *r;
    const dfl_dump_sample *s;
    char path[256];
} sample_ctx;

/* "samples/NNNNNN/name" of the sample into c->path. */
static const char *at(sample_ctx *c, const char *name)
{
    snprintf(c->path, sizeof c->path, "%s/%s", c->s->group, name);
    return c->path;
}

/* A whole dataset as type into a malloc'ed buffer of exactly `want` elements (0 = any);
 * DFL_ERR_TENSOR when its size differs. */
static dfl_status read_n(sample_ctx *c, const char *name, dfl_h5_type type, size_t want, void **out, size_t *n,
                         dfl_error *err)
{
    size_t got = 0;
    dfl_status s = dfl_dump_read_alloc(c->r, at(c, name), type, out, &got, err);
    if (s) return s;
    if (want && got != want) {
        free(*out);
        *out = NULL;
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: %s has %zu values, expected %zu", dfl_dump_path(c->r), c->path, got,
                         want);
    }
    if (n) *n = got;
    return DFL_OK;
}

/* The prompt's token labels: token_text, else the ids. *labels[T]; caller frees. */
static dfl_status token_labels(sample_ctx *c, char ***labels, int32_t **tokens, size_t *T, dfl_error *err)
{
    void *tk = NULL;
    dfl_status s = read_n(c, DFL_DS_TOKENS, DFL_H5_I32, 0, &tk, T, err);
    if (s) return s;
    *tokens = tk;
    size_t n = 0;
    if (dfl_dump_exists(c->r, at(c, DFL_DS_TOKEN_TEXT))) {
        if ((s = dfl_dump_read_strings(c->r, c->path, labels, &n, err))) return s;
        if (n == *T) return DFL_OK;
        dfl_dump_strings_free(*labels, n);
    }
    if (!(*labels = calloc(*T ? *T : 1, sizeof(char *)))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (size_t t = 0; t < *T; t++)
        if (!((*labels)[t] = dup_fmt("#%d", (int)(*tokens)[t]))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    return DFL_OK;
}

static dfl_status open_sample(const char *path, const char *key, sample_ctx *c, dfl_error *err)
{
    memset(c, 0, sizeof *c);
    dfl_status s = dfl_dump_open(path, &c->r, err);
    if (!s) s = dfl_dump_sample_find(c->r, key ? key : "0", &c->s, err);
    return s;
}

/* ------------------------------------------------------------ trace */

dfl_status dfl_effects_trace(const char *path, const char *sample, const char *label, dfl_effects_grid *out,
                             dfl_error *err)
{
    memset(out, 0, sizeof *out);
    sample_ctx c;
    char *site = NULL, *metric = NULL, **tok_labels = NULL;
    int32_t *layers = NULL, *pos = NULL, *tokens = NULL;
    float *effect = NULL, clean = NAN, corrupted = NAN;
    size_t Lp = 0, P = 0, T = 0;
    dfl_status s = open_sample(path, sample, &c, err);
    if (!s && !dfl_dump_exists(c.r, at(&c, DFL_DS_PATCH)))
        s = dfl__fail(err, DFL_ERR_TENSOR, "%s: sample %zu has no patch/ group (probe's patching sweep)", path,
                      c.s->index);
    if (!s) s = dfl_dump_get_attr_str(c.r, at(&c, DFL_DS_PATCH), "site", &site, err);
    if (!s && dfl_dump_get_attr_str(c.r, at(&c, DFL_DS_PATCH), "metric", &metric, NULL)) metric = NULL;
    int head = site && !strcmp(site, "head");
    if (!s) s = read_n(&c, DFL_DS_PATCH_LAYERS, DFL_H5_I32, 0, (void **)&layers, &Lp, err);
    if (!s) s = read_n(&c, head ? DFL_DS_PATCH_HEADS : DFL_DS_PATCH_POSITIONS, DFL_H5_I32, 0, (void **)&pos, &P, err);
    if (!s) s = read_n(&c, DFL_DS_PATCH_EFFECT, DFL_H5_F32, Lp * P, (void **)&effect, NULL, err);
    if (!s) s = dfl_dump_read(c.r, at(&c, DFL_DS_PATCH_CLEAN), DFL_H5_F32, &clean, 1, err);
    if (!s) s = dfl_dump_read(c.r, at(&c, DFL_DS_PATCH_CORRUPTED), DFL_H5_F32, &corrupted, 1, err);
    if (!s && !head) s = token_labels(&c, &tok_labels, &tokens, &T, err);
    for (size_t i = 0; !s && !head && i < P; i++)
        if (pos[i] < 0 || (size_t)pos[i] >= T)
            s = dfl__fail(err, DFL_ERR_RANGE, "%s: patch/positions holds %d, outside the prompt's %zu tokens", path,
                          (int)pos[i], T);
    /* ROME's layout: positions down, layers across; heads: layers down, heads across */
    if (!s)
        s = head ? grid_alloc(out, (int64_t)Lp, (int64_t)P, label, NORMALISED, "effect", "layer", "head", err)
                 : grid_alloc(out, (int64_t)P, (int64_t)Lp, label, NORMALISED, "effect", "position", "layer", err);
    if (!s) {
        for (size_t l = 0; l < Lp; l++)
            for (size_t p = 0; p < P; p++)
                out->v[head ? l * P + p : p * Lp + l] = effect[l * P + p];
        int ok = head ? number_labels(out->row_labels, layers, (int64_t)Lp, "L") &&
                            number_labels(out->col_labels, pos, (int64_t)P, "H")
                      : number_labels(out->col_labels, layers, (int64_t)Lp, "");
        for (size_t p = 0; ok && !head && p < P; p++)
            ok = (out->row_labels[p] = dup_fmt("%s %d", tok_labels[pos[p]], (int)pos[p])) != NULL;
        out->note = dup_fmt("site %s, metric %s: clean %.4g, corrupted %.4g", site, metric ? metric : "?",
                            (double)clean, (double)corrupted);
        if (!ok || !out->note) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    if (s) dfl_effects_grid_free(out);
    if (tok_labels) dfl_dump_strings_free(tok_labels, T);
    free(site), free(metric), free(layers), free(pos), free(tokens), free(effect);
    dfl_dump_close(c.r);
    return s;
}

/* ------------------------------------------------------------ heads */

/* One head's ablation → l, h and the rest of the spec (its mode) in *mode; 0 otherwise.
 * probe's canonical spec "ablate:layer=L,head=H,mode=M,pos=P" (docs/probe.md
 * "Interventions"; entries over several layers or heads are not one cell), or the short
 * "ablate:L<l>H<h>[:mode]". */
static int parse_ablation(const char *name, int *l, int *h, const char **mode)
{
    int n = 0;
    if (sscanf(name, "ablate:layer=%d,head=%d%n", l, h, &n) == 2 && *l >= 0 && *h >= 0) {
        if (name[n] && name[n] != ',') return 0;
        *mode = name[n] ? name + n + 1 : "";
        return 1;
    }
    n = 0;
    if (sscanf(name, "ablate:L%dH%d%n", l, h, &n) != 2 || *l < 0 || *h < 0) return 0;
    if (name[n] && name[n] != ':') return 0;
    *mode = name[n] ? name + n + 1 : "";
    return 1;
}

/* One sample's [L, H] contribution from src into acc (summed) and cnt (how many). */
static dfl_status heads_of_sample(sample_ctx *c, dfl_effects_source src, int64_t L, int64_t H, double *acc,
                                  int64_t *cnt, char **mode, dfl_error *err)
{
    dfl_status s = DFL_OK;
    if (src == DFL_EFFECTS_DLA) {
        float *v = NULL;
        size_t n = 0;
        if ((s = read_n(c, DFL_DS_DLA_HEADS, DFL_H5_F32, 0, (void **)&v, &n, err))) return s;
        size_t lh = (size_t)L * (size_t)H, R = lh ? n / lh : 0;
        if (R * lh != n)
            s = dfl__fail(err, DFL_ERR_TENSOR, "%s: dla/heads is not [R, %lld, %lld]", c->path, (long long)L,
                          (long long)H);
        for (size_t k = 0; !s && k < R; k++)
            for (size_t i = 0; i < lh; i++)
                if (!isnan(v[k * lh + i])) acc[i] += v[k * lh + i], cnt[i]++;
        free(v);
        return s;
    }
    if (src == DFL_EFFECTS_PATCH) {
        int32_t *layers = NULL, *heads = NULL;
        float *e = NULL;
        size_t Lp = 0, Hp = 0;
        char *site = NULL;
        s = dfl_dump_get_attr_str(c->r, at(c, DFL_DS_PATCH), "site", &site, err);
        if (!s && strcmp(site, "head"))
            s = dfl__fail(err, DFL_ERR_TENSOR, "%s: the patching sweep's site is %s, not head", c->path, site);
        if (!s) s = read_n(c, DFL_DS_PATCH_LAYERS, DFL_H5_I32, 0, (void **)&layers, &Lp, err);
        if (!s) s = read_n(c, DFL_DS_PATCH_HEADS, DFL_H5_I32, 0, (void **)&heads, &Hp, err);
        if (!s) s = read_n(c, DFL_DS_PATCH_EFFECT, DFL_H5_F32, Lp * Hp, (void **)&e, NULL, err);
        for (size_t l = 0; !s && l < Lp; l++)
            for (size_t h = 0; h < Hp; h++) {
                if (layers[l] < 0 || layers[l] >= L || heads[h] < 0 || heads[h] >= H || isnan(e[l * Hp + h])) continue;
                size_t i = (size_t)layers[l] * (size_t)H + (size_t)heads[h];
                acc[i] += e[l * Hp + h], cnt[i]++;
            }
        free(site), free(layers), free(heads), free(e);
        return s;
    }
    char **names = NULL;
    float *nll = NULL;
    size_t E = 0;
    if ((s = dfl_dump_read_strings(c->r, at(c, DFL_DS_EFFECTS_NAMES), &names, &E, err))) return s;
    s = read_n(c, DFL_DS_EFFECTS_TARGET_NLL, DFL_H5_F32, E, (void **)&nll, NULL, err);
    if (!s && (E == 0 || strcmp(names[0], "none")))
        s = dfl__fail(err, DFL_ERR_TENSOR, "%s: effects/names[0] is not \"none\" (the unmodified run)", c->path);
    for (size_t e = 1; !s && e < E; e++) {
        int l, h;
        const char *m;
        if (!parse_ablation(names[e], &l, &h, &m) || l >= L || h >= H) continue;
        if (!*mode && !(*mode = strdup(m))) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        if (s || strcmp(*mode, m)) continue; /* one ablation mode per grid: the first one's */
        size_t i = (size_t)l * (size_t)H + (size_t)h;
        acc[i] += (double)nll[e] - (double)nll[0], cnt[i]++;
    }
    dfl_dump_strings_free(names, E);
    free(nll);
    return s;
}

/* Whether the sample has src's data: for auto's choice a head sweep (patch/heads); when
 * asked for, any sweep (its site is checked when read). */
static int has_source(sample_ctx *c, dfl_effects_source src, int asked)
{
    const char *name = src == DFL_EFFECTS_DLA     ? DFL_DS_DLA_HEADS
                       : src == DFL_EFFECTS_PATCH ? (asked ? DFL_DS_PATCH : DFL_DS_PATCH_HEADS)
                                                  : DFL_DS_EFFECTS_TARGET_NLL;
    return dfl_dump_exists(c->r, at(c, name));
}

dfl_status dfl_effects_heads(const char *path, dfl_effects_source src, const char *sample, const char *label,
                             dfl_effects_grid *out, dfl_error *err)
{
    memset(out, 0, sizeof *out);
    sample_ctx c;
    memset(&c, 0, sizeof c);
    int64_t L = 0, H = 0;
    double *acc = NULL;
    int64_t *cnt = NULL;
    char *mode = NULL;
    dfl_status s = dfl_dump_open(path, &c.r, err);
    if (!s) s = dfl_dump_get_attr_i64(c.r, "/", DFL_ATTR_NUM_LAYERS, &L, err);
    if (!s) s = dfl_dump_get_attr_i64(c.r, "/", DFL_ATTR_NUM_HEADS, &H, err);
    if (!s && (L < 1 || H < 1 || L > 100000 || H > 100000))
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: num_layers %lld, num_heads %lld", path, (long long)L, (long long)H);
    size_t n = (size_t)L * (size_t)H, used = 0;
    if (!s && (!(acc = calloc(n, sizeof *acc)) || !(cnt = calloc(n, sizeof *cnt))))
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    size_t count = s ? 0 : dfl_dump_sample_count(c.r);
    for (size_t i = 0; !s && i < count; i++) {
        c.s = dfl_dump_sample_at(c.r, i);
        if (sample) {
            const dfl_dump_sample *want = NULL;
            if ((s = dfl_dump_sample_find(c.r, sample, &want, err))) break;
            c.s = want;
            i = count; /* one sample only */
        }
        if (src == DFL_EFFECTS_AUTO)
            src = has_source(&c, DFL_EFFECTS_DLA, 0)        ? DFL_EFFECTS_DLA
                  : has_source(&c, DFL_EFFECTS_PATCH, 0)    ? DFL_EFFECTS_PATCH
                  : has_source(&c, DFL_EFFECTS_ABLATION, 0) ? DFL_EFFECTS_ABLATION
                                                            : DFL_EFFECTS_AUTO;
        if (src == DFL_EFFECTS_AUTO || !has_source(&c, src, 1)) continue;
        s = heads_of_sample(&c, src, L, H, acc, cnt, &mode, err);
        used++;
    }
    if (!s && !used)
        s = dfl__fail(err, DFL_ERR_TENSOR, "%s: no sample has %s", path,
                      src == DFL_EFFECTS_AUTO    ? "dla/heads, patch/heads or effects/target_nll"
                      : src == DFL_EFFECTS_DLA   ? "dla/heads (probe --dla)"
                      : src == DFL_EFFECTS_PATCH ? "patch/heads (a head-patching sweep)"
                                                 : "effects/target_nll (head ablations)");
    static const char *what[] = {"", "direct logit attribution (logit)", "normalised patching effect",
                                 "change in target NLL"};
    static const char *unit[] = {"", "logit", "effect", "\xce\x94NLL"};
    if (!s) s = grid_alloc(out, L, H, label, what[src], unit[src], "layer", "head", err);
    if (!s) {
        for (size_t i = 0; i < n; i++)
            out->v[i] = cnt[i] ? (float)(acc[i] / (double)cnt[i]) : NAN;
        int ok = number_labels(out->row_labels, NULL, L, "L") && number_labels(out->col_labels, NULL, H, "H");
        out->note = dup_fmt("%s, mean over %zu sample%s%s%s", dfl_effects_source_name(src), used, used == 1 ? "" : "s",
                            mode ? ", ablation " : "", mode ? mode : "");
        if (!ok || !out->note) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    if (s) dfl_effects_grid_free(out);
    free(acc), free(cnt), free(mode);
    dfl_dump_close(c.r);
    return s;
}

/* ------------------------------------------------------------ lens */

/* The text of token id: the tokenizer's label, else the prompt's text of it, else "#id". */
static char *token_text(int32_t id, char **tok_labels, const int32_t *tokens, size_t T, char **decoded)
{
    if (decoded) return strdup(decoded[0]);
    for (size_t t = 0; t < T; t++)
        if (tokens[t] == id && tok_labels[t][0] != '#') return strdup(tok_labels[t]);
    return dup_fmt("#%d", (int)id);
}

/* Cells still named "#id" (a top token absent from the sample's own prompt) get the
 * text of that id from the other samples' token_text, where it occurs. cid[n] holds
 * each cell's id. */
static dfl_status names_from_samples(sample_ctx *c, dfl_effects_grid *g, const int32_t *cid, dfl_error *err)
{
    size_t n = (size_t)g->rows * (size_t)g->cols, count = dfl_dump_sample_count(c->r);
    const dfl_dump_sample *own = c->s;
    dfl_status s = DFL_OK;
    for (size_t i = 0; !s && i < count; i++) {
        size_t left = 0;
        for (size_t k = 0; k < n; k++)
            left += g->text[k][0] == '#';
        if (!left) break;
        c->s = dfl_dump_sample_at(c->r, i);
        if (c->s == own || !dfl_dump_exists(c->r, at(c, DFL_DS_TOKEN_TEXT))) continue;
        char **labels = NULL;
        int32_t *tokens = NULL;
        size_t T = 0;
        if ((s = token_labels(c, &labels, &tokens, &T, err))) break;
        for (size_t k = 0; k < n && !s; k++)
            for (size_t t = 0; g->text[k][0] == '#' && t < T; t++)
                if (tokens[t] == cid[k]) {
                    char *dup = strdup(labels[t]);
                    if (!dup)
                        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
                    else
                        free(g->text[k]), g->text[k] = dup;
                }
        dfl_dump_strings_free(labels, T);
        free(tokens);
    }
    c->s = own;
    return s;
}

dfl_status dfl_effects_lens(const char *path, const char *sample, const int64_t *positions, size_t n_pos,
                            const char *tokenizer, const char *label, dfl_effects_grid *out, dfl_error *err)
{
    memset(out, 0, sizeof *out);
    sample_ctx c;
    char **tok_labels = NULL;
    int32_t *tokens = NULL, *ids = NULL, *layers = NULL;
    float *prob = NULL;
    size_t T = 0, n = 0, L1 = 0;
    dfl_tokenizer *tk = NULL;
    dfl_status s = open_sample(path, sample, &c, err);
    if (!s && !dfl_dump_exists(c.r, at(&c, DFL_DS_LENS_TOP_IDS)))
        s = dfl__fail(err, DFL_ERR_TENSOR, "%s: sample %zu has no lens/ (probe --logit-lens K)", path, c.s->index);
    if (!s) s = token_labels(&c, &tok_labels, &tokens, &T, err);
    if (!s) s = read_n(&c, DFL_DS_LENS_LAYERS, DFL_H5_I32, 0, (void **)&layers, &L1, err);
    if (!s) s = read_n(&c, DFL_DS_LENS_TOP_IDS, DFL_H5_I32, 0, (void **)&ids, &n, err);
    if (!s) s = read_n(&c, DFL_DS_LENS_TOP_PROB, DFL_H5_F32, n, (void **)&prob, NULL, err);
    size_t K = !s && L1 && T ? n / (L1 * T) : 0;
    if (!s && (K == 0 || K * L1 * T != n))
        s = dfl__fail(err, DFL_ERR_TENSOR, "%s: lens/top_ids is not [%zu, %zu, K]", path, L1, T);
    for (size_t i = 0; !s && positions && i < n_pos; i++)
        if (positions[i] < 0 || (size_t)positions[i] >= T)
            s = dfl__fail(err, DFL_ERR_RANGE, "--positions: %lld is outside the prompt's %zu tokens",
                          (long long)positions[i], T);
    if (!s && tokenizer) s = dfl_model_tokenizer_open(tokenizer, &tk, err);
    int64_t P = positions ? (int64_t)n_pos : (int64_t)T;
    if (!s) s = grid_alloc(out, (int64_t)L1, P, label, "logit lens: top-1 probability", "p", "layer", "position", err);
    if (!s && !(out->text = calloc((size_t)L1 * (size_t)P, sizeof(char *))))
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (size_t l = 0; !s && l < L1; l++) {
        if (!(out->row_labels[l] = layers[l] < 0 ? strdup("embed") : dup_fmt("%d", (int)layers[l]))) break;
        for (int64_t j = 0; j < P && !s; j++) {
            size_t t = positions ? (size_t)positions[j] : (size_t)j, k = (l * T + t) * K;
            char **dec = NULL;
            uint32_t id = (uint32_t)ids[k];
            if (tk && (s = dfl_tokenizer_labels(tk, &id, 1, &dec, err))) break;
            out->v[l * (size_t)P + (size_t)j] = prob[k];
            out->text[l * (size_t)P + (size_t)j] = token_text(ids[k], tok_labels, tokens, T, dec);
            if (dec) dfl_tokenizer_labels_free(dec, 1);
            if (!out->text[l * (size_t)P + (size_t)j]) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        }
    }
    int32_t *cid = s ? NULL : dfl__alloc_array((size_t)L1 * (size_t)P, sizeof *cid);
    if (!s && !cid) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (size_t l = 0; !s && l < L1; l++)
        for (int64_t j = 0; j < P; j++)
            cid[l * (size_t)P + (size_t)j] = ids[(l * T + (positions ? (size_t)positions[j] : (size_t)j)) * K];
    if (!s && !tk) s = names_from_samples(&c, out, cid, err);
    free(cid);
    for (int64_t j = 0; !s && j < P; j++) {
        size_t t = positions ? (size_t)positions[j] : (size_t)j;
        if (!(out->col_labels[j] = dup_fmt("%s %zu", tok_labels[t], t)))
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    if (!s && !(out->note = dup_fmt("the most probable next token after each position, read from each layer's "
                                    "residual (row embed: before layer 0)")))
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (size_t l = 0; !s && l < L1; l++)
        if (!out->row_labels[l]) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (s) dfl_effects_grid_free(out);
    if (tok_labels) dfl_dump_strings_free(tok_labels, T);
    free(tokens), free(ids), free(layers), free(prob);
    dfl_tokenizer_close(tk);
    dfl_dump_close(c.r);
    return s;
}
