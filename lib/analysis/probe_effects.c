/* probe_effects.c — interventions named on probe's command line, their first passes,
 * and the metrics of each beside the unmodified run (probe_effects.h). */
#include "analysis/probe_effects.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_schema.h"
#include "model/family.h"
#include "model/gguf_tok.h"
#include "model/intervene.h"
#include "text/tokenizer.h"

/* ------------------------------------------------------------ specs */

#define SPAN_RANGES 16
#define MAX_SPECS   256

/* A set of positions: segments (bit per DFL_SEG_*), the last token, ranges [a, b]. */
typedef struct span_sel {
    int all;
    unsigned segs;
    int last;
    size_t n;
    int64_t a[SPAN_RANGES], b[SPAN_RANGES];
} span_sel;

typedef enum metric_kind { METRIC_NLL = 0, METRIC_PROB, METRIC_LOGIT, METRIC_DIFF } metric_kind;
static const char *metric_names[] = {"target_nll", "target_prob", "target_logit", "logit_diff"};
static const char *seg_names[] = {"context", "bos", "answer", "query", "distractor", "target"};

typedef struct effect_spec {
    dfl_iv_kind kind;
    int sweep;
    int64_t layer0, layer1; /* -1, -1 = every layer */
    int64_t head;           /* -1 = every head */
    dfl_iv_site site;
    dfl_iv_ablation ablation;
    int lambda_scale;
    double value;
    int map;
    span_sel pos, from, to;
    char source[128], target[128]; /* prompt references ("" = none) */
    size_t src_index, tgt_index;
    metric_kind metric;
    char canon[512];
} effect_spec;

/* A recorded run of a source prompt at one site: v[L, T, width]. */
typedef struct source_run {
    size_t prompt;
    dfl_iv_site site;
    float *v;
    int64_t T;
} source_run;

struct dfl__effects {
    const dfl_model *m;
    const dfl_prompt_set *ps;
    dfl_forward_opts base;
    effect_spec *specs;
    size_t n;
    int has_diff;
    int32_t diff_tok[2];
    float *mean; /* [L, att_ld] mean head outputs, or NULL */
    source_run *src;
    size_t n_src;
    int save_logits;
    int64_t L, H, D, V, att_ld;
    char *json;
    const volatile sig_atomic_t *cancel; /* polled before every pass; NULL = never */
    /* --apply: interventions on every pass (the main one included) */
    effect_spec *applied_specs;
    dfl_intervention *applied;
    size_t n_applied;
    dfl_iv_list applied_list;
};

/* dfl_forward with e's applied interventions before those of iv (NULL = none). */
static dfl_status run_pass(const dfl__effects *e, const int32_t *tokens, int64_t T, const dfl_iv_list *iv,
                           const dfl_capture *cap, dfl_error *err)
{
    if (e->cancel && *e->cancel) return dfl__fail(err, DFL_ERR_CANCELLED, "cancelled");
    dfl_forward_opts o = e->base;
    dfl_iv_list merged = iv ? *iv : dfl_iv_list_default();
    dfl_intervention *items = NULL;
    if (e->n_applied) {
        size_t n = e->n_applied + merged.n;
        if (!(items = dfl__alloc_array(n, sizeof *items))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        memcpy(items, e->applied, e->n_applied * sizeof *items);
        if (merged.n) memcpy(items + e->n_applied, merged.items, merged.n * sizeof *items);
        merged.items = items;
        merged.n = n;
    }
    o.iv = &merged;
    dfl_status s = dfl_forward(e->m, tokens, T, &o, cap, err);
    free(items);
    return s;
}

static dfl_status bad(dfl_error *err, const char *spec, const char *what, const char *detail)
{
    return dfl__fail(err, DFL_ERR_USAGE, "intervention '%s': %s%s%s", spec, what, detail ? " " : "",
                     detail ? detail : "");
}

/* "N", "A-B" or "all" into [lo, hi] (-1, -1 for all). */
static int parse_range(const char *v, int64_t *lo, int64_t *hi)
{
    if (!strcmp(v, "all")) {
        *lo = *hi = -1;
        return 1;
    }
    char *end;
    errno = 0;
    long long a = strtoll(v, &end, 10), b = a;
    if (end == v || a < 0 || errno) return 0;
    if (*end == '-') {
        const char *w = end + 1;
        b = strtoll(w, &end, 10);
        if (end == w || b < a || errno) return 0;
    }
    if (*end) return 0;
    *lo = a;
    *hi = b;
    return 1;
}

/* SPAN: "all", or parts joined by '+': a segment name, "last", N or A-B. */
static int parse_span(const char *v, span_sel *s)
{
    memset(s, 0, sizeof *s);
    if (!strcmp(v, "all")) {
        s->all = 1;
        return 1;
    }
    char buf[256];
    if (strlen(v) >= sizeof buf || !*v) return 0;
    strcpy(buf, v);
    for (char *save = NULL, *part = strtok_r(buf, "+", &save); part; part = strtok_r(NULL, "+", &save)) {
        int found = 0;
        for (unsigned k = 0; k < sizeof seg_names / sizeof *seg_names; k++)
            if (!strcmp(part, seg_names[k])) s->segs |= 1u << k, found = 1;
        if (!strcmp(part, "last")) s->last = found = 1;
        if (found) continue;
        if (s->n == SPAN_RANGES || !parse_range(part, &s->a[s->n], &s->b[s->n]) || s->a[s->n] < 0) return 0;
        s->n++;
    }
    return 1;
}

static void print_span(char *out, size_t cap, const span_sel *s)
{
    size_t k = 0;
    out[0] = 0;
    if (s->all) {
        snprintf(out, cap, "all");
        return;
    }
    for (unsigned i = 0; i < sizeof seg_names / sizeof *seg_names; i++)
        if (s->segs & (1u << i)) k += (size_t)snprintf(out + k, cap - k, "%s%s", k ? "+" : "", seg_names[i]);
    if (s->last && k < cap) k += (size_t)snprintf(out + k, cap - k, "%slast", k ? "+" : "");
    for (size_t i = 0; i < s->n && k < cap; i++) {
        if (s->a[i] == s->b[i])
            k += (size_t)snprintf(out + k, cap - k, "%s%lld", k ? "+" : "", (long long)s->a[i]);
        else
            k +=
                (size_t)snprintf(out + k, cap - k, "%s%lld-%lld", k ? "+" : "", (long long)s->a[i], (long long)s->b[i]);
    }
}

/* mask[T] of the span on prompt pr (seg: its segment codes). */
static void span_mask(const span_sel *s, const uint8_t *seg, int64_t T, uint8_t *mask)
{
    for (int64_t t = 0; t < T; t++)
        mask[t] = (uint8_t)(s->all || (s->segs & (1u << seg[t])) || (s->last && t == T - 1));
    for (size_t i = 0; i < s->n; i++)
        for (int64_t t = s->a[i]; t <= s->b[i] && t < T; t++)
            mask[t] = 1;
}

static void canon_spec(effect_spec *e)
{
    static const char *kinds[] = {"ablate", "lambda", "map", "knockout", "patch"};
    static const char *abl[] = {"zero", "mean", "resample"};
    char layer[48], head[32], pos[160], a[160], b[160];
    if (e->layer0 < 0)
        snprintf(layer, sizeof layer, "all");
    else if (e->layer0 == e->layer1)
        snprintf(layer, sizeof layer, "%lld", (long long)e->layer0);
    else
        snprintf(layer, sizeof layer, "%lld-%lld", (long long)e->layer0, (long long)e->layer1);
    if (e->head < 0)
        snprintf(head, sizeof head, "all");
    else
        snprintf(head, sizeof head, "%lld", (long long)e->head);
    print_span(pos, sizeof pos, &e->pos);
    char *c = e->canon;
    size_t cap = sizeof e->canon;
    if (e->sweep) {
        snprintf(c, cap, "sweep:site=%s,layer=%s,pos=%s,source=%s,metric=%s%s%s", dfl_iv_site_name(e->site), layer, pos,
                 e->source, metric_names[e->metric], e->target[0] ? ",target=" : "", e->target);
        return;
    }
    switch (e->kind) {
    case DFL_IV_ABLATE:
        snprintf(c, cap, "ablate:layer=%s,head=%s,mode=%s,pos=%s%s%s", layer, head, abl[e->ablation], pos,
                 e->source[0] ? ",source=" : "", e->source);
        break;
    case DFL_IV_LAMBDA:
        snprintf(c, cap, "lambda:layer=%s,head=%s,%s=%.9g", layer, head, e->lambda_scale ? "scale" : "value", e->value);
        break;
    case DFL_IV_MAP: snprintf(c, cap, "map:layer=%s,head=%s,use=map%d", layer, head, e->map); break;
    case DFL_IV_KNOCKOUT:
        print_span(a, sizeof a, &e->from);
        print_span(b, sizeof b, &e->to);
        snprintf(c, cap, "knockout:layer=%s,from=%s,to=%s", layer, a, b);
        break;
    case DFL_IV_PATCH:
        snprintf(c, cap, "patch:site=%s,layer=%s%s%s,pos=%s,source=%s", dfl_iv_site_name(e->site), layer,
                 e->site == DFL_SITE_HEAD ? ",head=" : "", e->site == DFL_SITE_HEAD ? head : "", pos, e->source);
        break;
    }
    (void)kinds;
}

/* One spec "KIND:key=value,…" into e. */
static dfl_status parse_spec(const char *spec, effect_spec *e, dfl_error *err)
{
    memset(e, 0, sizeof *e);
    e->layer0 = e->layer1 = e->head = -1;
    e->pos.all = 1;
    e->metric = METRIC_PROB;
    const char *colon = strchr(spec, ':');
    char kind[16];
    if (!colon || (size_t)(colon - spec) >= sizeof kind) return bad(err, spec, "has no KIND: prefix", NULL);
    memcpy(kind, spec, (size_t)(colon - spec));
    kind[colon - spec] = 0;
    static const char *kinds[] = {"ablate", "lambda", "map", "knockout", "patch", "sweep"};
    int k = -1;
    for (int i = 0; i < 6; i++)
        if (!strcmp(kind, kinds[i])) k = i;
    if (k < 0) return bad(err, spec, "kind is not ablate, lambda, map, knockout, patch or sweep", NULL);
    e->sweep = k == 5;
    e->kind = k == 5 ? DFL_IV_PATCH : (dfl_iv_kind)k;
    int have_site = 0, have_value = 0, have_from = 0, have_to = 0, have_map = 0, have_mode = 0;
    char buf[1024];
    if (strlen(colon + 1) >= sizeof buf) return bad(err, spec, "is too long", NULL);
    strcpy(buf, colon + 1);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) return bad(err, spec, "expects key=value, got", kv);
        *eq = 0;
        const char *key = kv, *v = eq + 1;
        int ok = 1;
        if (!strcmp(key, "layer") || !strcmp(key, "layers")) {
            ok = parse_range(v, &e->layer0, &e->layer1);
        } else if (!strcmp(key, "head") && e->kind != DFL_IV_KNOCKOUT && !e->sweep) {
            int64_t hi;
            ok = parse_range(v, &e->head, &hi) && hi == e->head;
        } else if (!strcmp(key, "pos") && (e->kind == DFL_IV_ABLATE || e->kind == DFL_IV_PATCH)) {
            ok = parse_span(v, &e->pos);
        } else if (!strcmp(key, "from") && e->kind == DFL_IV_KNOCKOUT) {
            ok = have_from = parse_span(v, &e->from);
        } else if (!strcmp(key, "to") && e->kind == DFL_IV_KNOCKOUT) {
            ok = have_to = parse_span(v, &e->to);
        } else if (!strcmp(key, "mode") && e->kind == DFL_IV_ABLATE) {
            have_mode = 1;
            if (!strcmp(v, "zero"))
                e->ablation = DFL_ABLATE_ZERO;
            else if (!strcmp(v, "mean"))
                e->ablation = DFL_ABLATE_MEAN;
            else if (!strcmp(v, "resample"))
                e->ablation = DFL_ABLATE_RESAMPLE;
            else
                ok = 0;
        } else if ((!strcmp(key, "value") || !strcmp(key, "scale")) && e->kind == DFL_IV_LAMBDA) {
            char *end;
            errno = 0;
            e->value = strtod(v, &end);
            e->lambda_scale = key[0] == 's';
            ok = end != v && !*end && !errno && isfinite(e->value);
            have_value = 1;
        } else if (!strcmp(key, "use") && e->kind == DFL_IV_MAP) {
            e->map = !strcmp(v, "map1") ? 1 : !strcmp(v, "map2") ? 2 : 0;
            ok = have_map = e->map != 0;
        } else if (!strcmp(key, "site") && e->kind == DFL_IV_PATCH) {
            ok = 0;
            for (int s = 0; s < DFL_SITES; s++)
                if (!strcmp(v, dfl_iv_site_name((dfl_iv_site)s))) e->site = (dfl_iv_site)s, ok = have_site = 1;
        } else if (!strcmp(key, "source") && (e->kind == DFL_IV_PATCH || e->kind == DFL_IV_ABLATE)) {
            ok = strlen(v) < sizeof e->source && *v;
            if (ok) strcpy(e->source, v);
        } else if (!strcmp(key, "target") && e->sweep) {
            ok = strlen(v) < sizeof e->target && *v;
            if (ok) strcpy(e->target, v);
        } else if (!strcmp(key, "metric") && e->sweep) {
            ok = 0;
            for (int m = 0; m < 4; m++)
                if (!strcmp(v, metric_names[m])) e->metric = (metric_kind)m, ok = 1;
        } else {
            return bad(err, spec, "has a key this kind does not take:", key);
        }
        if (!ok) {
            char what[96];
            snprintf(what, sizeof what, "has a bad value for %s:", key);
            return bad(err, spec, what, v);
        }
    }
    if (e->kind == DFL_IV_LAMBDA && !have_value) return bad(err, spec, "needs value=X or scale=X", NULL);
    if (e->kind == DFL_IV_MAP && !have_map) return bad(err, spec, "needs use=map1 or use=map2", NULL);
    if (e->kind == DFL_IV_KNOCKOUT && !(have_from && have_to))
        return bad(err, spec, "needs from=SPAN and to=SPAN", NULL);
    if (e->kind == DFL_IV_ABLATE && !have_mode) return bad(err, spec, "needs mode=zero|mean|resample", NULL);
    if (e->kind == DFL_IV_PATCH && !have_site)
        return bad(err, spec, "needs site=resid_pre|attn_out|mlp_out|head", NULL);
    int need_source = e->kind == DFL_IV_PATCH || (e->kind == DFL_IV_ABLATE && e->ablation == DFL_ABLATE_RESAMPLE);
    if (need_source && !e->source[0]) return bad(err, spec, "needs source=PROMPT", NULL);
    if (!need_source && e->source[0]) return bad(err, spec, "takes no source (only patch and resample do)", NULL);
    if (e->sweep && e->pos.all == 0 && e->site == DFL_SITE_HEAD)
        return bad(err, spec, "a head sweep patches every position (no pos=)", NULL);
    canon_spec(e);
    return DFL_OK;
}

/* A prompt reference: "#N" (0-based index in the file) or a prompt's id. */
static int find_prompt(const dfl_prompt_set *ps, const char *ref, size_t *out)
{
    if (ref[0] == '#') {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(ref + 1, &end, 10);
        if (end == ref + 1 || *end || errno || n >= ps->count) return 0;
        *out = (size_t)n;
        return 1;
    }
    for (size_t i = 0; i < ps->count; i++)
        if (ps->items[i].id && !strcmp(ps->items[i].id, ref)) {
            *out = i;
            return 1;
        }
    return 0;
}

/* ---------------------------------------------------------- metrics */

typedef struct metrics {
    double nll, prob, logit, diff;
    int correct;
} metrics;

/* The metric rows of a target prompt: tok[T] the token row t must predict (-1 = none). */
typedef struct metric_run {
    const int32_t *tok; /* [T] */
    int64_t T, V, diff_row;
    const int32_t *diff_tok; /* [2] or NULL */
    double nll, prob, logit, diff;
    size_t n;
    int correct;
    float *keep; /* [T, V] all logits, or NULL */
} metric_run;

static double value_of(const metrics *m, metric_kind k)
{
    return k == METRIC_NLL ? m->nll : k == METRIC_PROB ? m->prob : k == METRIC_LOGIT ? m->logit : m->diff;
}

static dfl_status metric_rows(void *user, int64_t row0, int64_t n, int64_t V, const float *logits, dfl_error *err)
{
    (void)err;
    metric_run *r = user;
    for (int64_t i = 0; i < n; i++) {
        int64_t t = row0 + i;
        const float *z = logits + i * V;
        if (r->keep) memcpy(r->keep + t * V, z, (size_t)V * sizeof *z);
        if (t == r->diff_row && r->diff_tok) r->diff = (double)z[r->diff_tok[0]] - (double)z[r->diff_tok[1]];
        if (r->tok[t] < 0) continue;
        double mx = -INFINITY, sum = 0.0;
        int64_t arg = 0;
        for (int64_t v = 0; v < V; v++)
            if (z[v] > mx) mx = z[v], arg = v;
        for (int64_t v = 0; v < V; v++)
            sum += exp((double)z[v] - mx);
        double lp = (double)z[r->tok[t]] - mx - log(sum);
        r->nll -= lp;
        r->prob += exp(lp);
        r->logit += z[r->tok[t]];
        r->correct &= arg == r->tok[t];
        r->n++;
    }
    return DFL_OK;
}

/* The target tokens of pr by predicting row: tok[T]; returns the first metric row (T − 1
 * when there is none) and sets *diff_row (the row predicting the first target token,
 * else the last row). */
static int64_t target_rows(const dfl_prompt *pr, int32_t *tok, int64_t *diff_row)
{
    int64_t T = (int64_t)pr->n_tokens, first = T - 1;
    for (int64_t t = 0; t < T; t++)
        tok[t] = -1;
    *diff_row = T - 1;
    int64_t p0 = T;
    for (size_t i = 0; i < pr->n_spans[DFL_SPAN_TARGET]; i++)
        for (int64_t p = pr->spans[DFL_SPAN_TARGET][i].start; p < pr->spans[DFL_SPAN_TARGET][i].end; p++) {
            if (p < 1 || p >= T) continue;
            tok[p - 1] = pr->tokens[p];
            if (p < p0) p0 = p;
        }
    if (p0 < T) *diff_row = first = p0 - 1;
    return first;
}

/* One pass over tokens[T] with iv, measured on the target rows tok[T]. */
static dfl_status run_metrics(const dfl__effects *e, const int32_t *tokens, int64_t T, const int32_t *tok,
                              int64_t diff_row, dfl_iv_list *iv, metrics *out, float *keep, dfl_error *err)
{
    metric_run r = {tok, T, e->V, diff_row, e->has_diff ? e->diff_tok : NULL, 0, 0, 0, NAN, 0, 1, keep};
    dfl_capture cap;
    memset(&cap, 0, sizeof cap);
    cap.user = &r;
    cap.logits_rows = metric_rows;
    dfl_status s = run_pass(e, tokens, T, iv, &cap, err);
    if (s) return s;
    double n = (double)r.n;
    out->nll = r.n ? r.nll / n : NAN;
    out->prob = r.n ? r.prob / n : NAN;
    out->logit = r.n ? r.logit / n : NAN;
    out->correct = r.n ? r.correct : 0;
    out->diff = r.diff;
    return DFL_OK;
}

/* ------------------------------------------------------- first passes */

static int64_t site_width(const dfl__effects *e, dfl_iv_site s)
{
    return s == DFL_SITE_HEAD ? e->att_ld : e->D;
}

/* Record prompt i at site (once). */
static dfl_status record_source(dfl__effects *e, size_t i, dfl_iv_site site, dfl_error *err)
{
    for (size_t k = 0; k < e->n_src; k++)
        if (e->src[k].prompt == i && e->src[k].site == site) return DFL_OK;
    const dfl_prompt *pr = &e->ps->items[i];
    int64_t T = (int64_t)pr->n_tokens;
    size_t n;
    if (!dfl__mul_ok((size_t)e->L * (size_t)T, (size_t)site_width(e, site), &n))
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    source_run *grown = realloc(e->src, (e->n_src + 1) * sizeof *grown);
    if (!grown) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    e->src = grown;
    float *v = dfl__alloc_array(n, sizeof *v);
    if (!v) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    dfl_iv_list iv = dfl_iv_list_default();
    iv.record[site] = v;
    dfl_status s = run_pass(e, pr->tokens, T, &iv, NULL, err);
    if (s) {
        free(v);
        return s;
    }
    e->src[e->n_src++] = (source_run){i, site, v, T};
    return DFL_OK;
}

static const source_run *source_of(const dfl__effects *e, size_t i, dfl_iv_site site)
{
    for (size_t k = 0; k < e->n_src; k++)
        if (e->src[k].prompt == i && e->src[k].site == site) return &e->src[k];
    return NULL;
}

/* Mean head outputs over every position of every prompt: mean[L, att_ld]. */
static dfl_status mean_heads(dfl__effects *e, dfl_error *err)
{
    size_t width = (size_t)e->att_ld, L = (size_t)e->L;
    double *sum = dfl__calloc_array(L * width, sizeof *sum);
    e->mean = dfl__alloc_array(L * width, sizeof *e->mean);
    if (!sum || !e->mean) {
        free(sum);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    double count = 0;
    dfl_status s = DFL_OK;
    for (size_t i = 0; i < e->ps->count && !s; i++) {
        const dfl_prompt *pr = &e->ps->items[i];
        size_t T = pr->n_tokens, n;
        float *v = dfl__mul_ok(L * T, width, &n) ? dfl__alloc_array(n, sizeof *v) : NULL;
        if (!v) {
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            break;
        }
        dfl_iv_list iv = dfl_iv_list_default();
        iv.record[DFL_SITE_HEAD] = v;
        dfl_forward_opts o = e->base;
        o.iv = &iv;
        s = dfl_forward(e->m, pr->tokens, (int64_t)T, &o, NULL, err);
        for (size_t l = 0; !s && l < L; l++)
            for (size_t t = 0; t < T; t++)
                for (size_t j = 0; j < width; j++)
                    sum[l * width + j] += v[(l * T + t) * width + j];
        count += (double)T;
        free(v);
    }
    for (size_t k = 0; k < L * width; k++)
        e->mean[k] = (float)(sum[k] / count);
    free(sum);
    return s;
}

/* ------------------------------------------------------------- open */

static void build_iv(const dfl__effects *e, const effect_spec *sp, const uint8_t *seg, int64_t T, uint8_t *masks,
                     dfl_intervention *it);

static dfl_status token_of(const char *text, dfl_tokenizer **tk, const char *model_dir, const char *tok_path, int64_t V,
                           int32_t *out, dfl_error *err)
{
    char *end;
    errno = 0;
    long long id = strtoll(text, &end, 10);
    if (end != text && !*end && !errno) {
        if (id < 0 || id >= V)
            return dfl__fail(err, DFL_ERR_USAGE, "--logit-diff: token id %lld is outside [0, %lld)", id, (long long)V);
        *out = (int32_t)id;
        return DFL_OK;
    }
    dfl_status s = DFL_OK;
    if (!*tk && (s = dfl_model_tokenizer_open(tok_path ? tok_path : model_dir, tk, err))) {
        dfl__context(err, "--logit-diff '%s' names a token string: it needs a tokenizer", text);
        return s;
    }
    dfl_encoding enc;
    if ((s = dfl_tokenizer_encode(*tk, text, strlen(text), 0, &enc, err))) return s;
    if (enc.n != 1) s = dfl__fail(err, DFL_ERR_USAGE, "--logit-diff: '%s' is %zu tokens, not one", text, enc.n);
    if (!s) *out = (int32_t)enc.ids[0];
    dfl_encoding_free(&enc);
    return s;
}

/* Specs from a JSON array of strings into list[*n]. */
static dfl_status read_file_specs(const char *path, char ***list, size_t *n, dfl_error *err)
{
    char *text = NULL;
    size_t len = 0;
    dfl_status s = dfl__read_file(path, &text, &len, err);
    if (s) return s;
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsArray(j)) {
        cJSON_Delete(j);
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: expected a JSON array of intervention strings", path);
    }
    int k = cJSON_GetArraySize(j);
    *list = calloc((size_t)k + 1, sizeof **list);
    if (!*list) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int i = 0; i < k && !s; i++) {
        cJSON *it = cJSON_GetArrayItem(j, i);
        if (!cJSON_IsString(it))
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: item %d is not a string", path, i);
        else if (!((*list)[i] = strdup(it->valuestring)))
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        else
            *n = (size_t)i + 1;
    }
    cJSON_Delete(j);
    return s;
}

/* Layers, heads, sources and kinds against the model and the prompts. */
static dfl_status check_spec(dfl__effects *e, effect_spec *sp, dfl_error *err)
{
    const dfl_config *c = &e->m->config;
    char detail[96];
    if (sp->layer0 >= e->L) {
        snprintf(detail, sizeof detail, "(the model has %lld layers)", (long long)e->L);
        return bad(err, sp->canon, "names a layer out of range", detail);
    }
    if (sp->layer1 >= e->L) {
        snprintf(detail, sizeof detail, "(the model has %lld layers)", (long long)e->L);
        return bad(err, sp->canon, "names a layer out of range", detail);
    }
    if (sp->head >= e->H) {
        snprintf(detail, sizeof detail, "(the model has %lld heads)", (long long)e->H);
        return bad(err, sp->canon, "names a head out of range", detail);
    }
    if ((sp->kind == DFL_IV_LAMBDA || sp->kind == DFL_IV_MAP) && dfl_config_maps_per_head(c) != 2)
        return bad(err, sp->canon, "needs a differential model (this one has one softmax map per head)", NULL);
    if (sp->source[0] && !find_prompt(e->ps, sp->source, &sp->src_index))
        return bad(err, sp->canon, "names a source prompt that is not in the prompt file:", sp->source);
    if (sp->target[0] && !find_prompt(e->ps, sp->target, &sp->tgt_index))
        return bad(err, sp->canon, "names a target prompt that is not in the prompt file:", sp->target);
    if (sp->sweep && sp->metric == METRIC_DIFF && !e->has_diff)
        return bad(err, sp->canon, "metric logit_diff needs --logit-diff A,B", NULL);
    return DFL_OK;
}

static dfl_status build_json(dfl__effects *e, dfl_error *err)
{
    cJSON *root = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(root, "interventions"),
          *sweeps = cJSON_AddArrayToObject(root, "sweeps");
    for (size_t i = 0; i < e->n; i++)
        cJSON_AddItemToArray(e->specs[i].sweep ? sweeps : list, cJSON_CreateString(e->specs[i].canon));
    if (e->n_applied) {
        cJSON *ap = cJSON_AddArrayToObject(root, "applied");
        for (size_t i = 0; i < e->n_applied; i++)
            cJSON_AddItemToArray(ap, cJSON_CreateString(e->applied_specs[i].canon));
    }
    if (e->has_diff) {
        int ids[2] = {e->diff_tok[0], e->diff_tok[1]};
        cJSON_AddItemToObject(root, "logit_diff", cJSON_CreateIntArray(ids, 2));
    }
    e->json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return e->json ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
}

dfl_status dfl__effects_open(const dfl_effects_params *ep, const dfl_model *m, const dfl_prompt_set *ps,
                             const char *model_dir, const char *tokenizer_path, const dfl_forward_opts *base,
                             int save_logits, const volatile sig_atomic_t *cancel, dfl__effects **out, dfl_error *err)
{
    *out = NULL;
    if (!ep || (!ep->n_specs && !ep->file && !ep->logit_diff && !ep->n_apply)) return DFL_OK;
    dfl__effects *e = calloc(1, sizeof *e);
    if (!e) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    const dfl_config *c = &m->config;
    e->m = m;
    e->ps = ps;
    e->base = *base;
    e->base.iv = NULL;
    e->save_logits = save_logits;
    e->cancel = cancel;
    e->L = c->num_layers;
    e->H = dfl_config_analysis_heads(c);
    e->D = c->hidden_size;
    e->V = c->vocab_size;
    e->att_ld = dfl__attn_shape_of(c).att_ld;
    char **file_specs = NULL;
    size_t n_file = 0;
    dfl_status s = ep->file ? read_file_specs(ep->file, &file_specs, &n_file, err) : DFL_OK;
    size_t total = ep->n_specs + n_file;
    if (!s && total > MAX_SPECS) s = dfl__fail(err, DFL_ERR_USAGE, "more than %d interventions", MAX_SPECS);
    if (!s && !(e->specs = calloc(total + 1, sizeof *e->specs))) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < total && !s; i++) {
        s = parse_spec(i < ep->n_specs ? ep->specs[i] : file_specs[i - ep->n_specs], &e->specs[i], err);
        e->n += !s;
    }
    for (size_t i = 0; file_specs && i < n_file; i++)
        free(file_specs[i]);
    free(file_specs);
    dfl_tokenizer *tk = NULL;
    if (!s && ep->logit_diff) {
        char a[128], b[128];
        const char *comma = strchr(ep->logit_diff, ',');
        size_t la = comma ? (size_t)(comma - ep->logit_diff) : 0;
        if (!comma || la == 0 || la >= sizeof a || strlen(comma + 1) >= sizeof b || !comma[1])
            s = dfl__fail(err, DFL_ERR_USAGE, "--logit-diff: '%s' is not A,B", ep->logit_diff);
        if (!s) {
            memcpy(a, ep->logit_diff, la);
            a[la] = 0;
            strcpy(b, comma + 1);
            s = token_of(a, &tk, model_dir, tokenizer_path, e->V, &e->diff_tok[0], err);
            if (!s) s = token_of(b, &tk, model_dir, tokenizer_path, e->V, &e->diff_tok[1], err);
            e->has_diff = !s;
        }
    }
    dfl_tokenizer_close(tk);
    size_t sweeps = 0;
    for (size_t i = 0; i < e->n && !s; i++) {
        sweeps += e->specs[i].sweep;
        s = check_spec(e, &e->specs[i], err);
    }
    if (!s && sweeps > 1) s = dfl__fail(err, DFL_ERR_USAGE, "one patch sweep per run (%zu given)", sweeps);
    /* --apply: model-wide interventions only (no spans, no other prompt) */
    if (!s && ep->n_apply &&
        (!(e->applied_specs = calloc(ep->n_apply, sizeof *e->applied_specs)) ||
         !(e->applied = calloc(ep->n_apply, sizeof *e->applied))))
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ep->n_apply && !s; i++) {
        effect_spec *sp = &e->applied_specs[i];
        if ((s = parse_spec(ep->apply[i], sp, err)) || (s = check_spec(e, sp, err))) break;
        int ok = sp->kind == DFL_IV_LAMBDA || sp->kind == DFL_IV_MAP ||
                 (sp->kind == DFL_IV_ABLATE && sp->ablation != DFL_ABLATE_RESAMPLE && sp->pos.all);
        if (!ok || sp->sweep) {
            s = bad(err, sp->canon, "--apply takes lambda, map and ablate (zero or mean, every position)", NULL);
            break;
        }
        e->n_applied++;
    }
    /* first passes: the mean (of the unmodified model), then what the specs read from
     * other runs (with the applied interventions) */
    for (size_t i = 0; i < e->n + e->n_applied && !s; i++) {
        const effect_spec *sp = i < e->n ? &e->specs[i] : &e->applied_specs[i - e->n];
        if (sp->kind == DFL_IV_ABLATE && sp->ablation == DFL_ABLATE_MEAN && !e->mean) s = mean_heads(e, err);
    }
    for (size_t i = 0; i < e->n_applied && !s; i++)
        build_iv(e, &e->applied_specs[i], NULL, 0, NULL, &e->applied[i]);
    e->applied_list = dfl_iv_list_default();
    e->applied_list.items = e->applied;
    e->applied_list.n = e->n_applied;
    for (size_t i = 0; i < e->n && !s; i++) {
        const effect_spec *sp = &e->specs[i];
        if (sp->kind == DFL_IV_ABLATE && sp->ablation == DFL_ABLATE_RESAMPLE)
            s = record_source(e, sp->src_index, DFL_SITE_HEAD, err);
        if (!s && sp->kind == DFL_IV_PATCH) s = record_source(e, sp->src_index, sp->site, err);
    }
    if (!s) s = build_json(e, err);
    if (s) {
        dfl__effects_free(e);
        return s;
    }
    *out = e;
    return DFL_OK;
}

const struct dfl_iv_list *dfl__effects_applied(const dfl__effects *e)
{
    return e && e->n_applied ? &e->applied_list : NULL;
}

const char *dfl__effects_json(const dfl__effects *e)
{
    return e ? e->json : NULL;
}

void dfl__effects_free(dfl__effects *e)
{
    if (!e) return;
    for (size_t k = 0; k < e->n_src; k++)
        free(e->src[k].v);
    free(e->src);
    free(e->mean);
    free(e->specs);
    free(e->applied_specs);
    free(e->applied);
    cJSON_free(e->json);
    free(e);
}

/* ------------------------------------------------------------ sample */

/* The intervention of spec sp on a target prompt of T tokens (segments seg[T]); masks
 * [3, T] are its position, row and key masks. */
static void build_iv(const dfl__effects *e, const effect_spec *sp, const uint8_t *seg, int64_t T, uint8_t *masks,
                     dfl_intervention *it)
{
    memset(it, 0, sizeof *it);
    it->kind = sp->kind;
    it->layer0 = sp->layer0 < 0 ? 0 : sp->layer0;
    it->layer1 = sp->layer0 < 0 ? e->L - 1 : sp->layer1;
    it->head = sp->head;
    it->site = sp->site;
    it->ablation = sp->ablation;
    it->lambda_scale = sp->lambda_scale;
    it->value = sp->value;
    it->map = sp->map;
    if (!sp->pos.all) {
        span_mask(&sp->pos, seg, T, masks);
        it->pos = masks;
    }
    if (sp->kind == DFL_IV_KNOCKOUT) {
        span_mask(&sp->from, seg, T, masks + T);
        span_mask(&sp->to, seg, T, masks + 2 * T);
        it->rows = masks + T;
        it->keys = masks + 2 * T;
    }
    if (sp->kind == DFL_IV_ABLATE && sp->ablation == DFL_ABLATE_MEAN) it->src = e->mean;
    const source_run *src = NULL;
    if (sp->kind == DFL_IV_ABLATE && sp->ablation == DFL_ABLATE_RESAMPLE)
        src = source_of(e, sp->src_index, DFL_SITE_HEAD);
    if (sp->kind == DFL_IV_PATCH) src = source_of(e, sp->src_index, sp->site);
    if (src) {
        it->src = src->v;
        it->src_T = src->T;
    }
}

static dfl_status put_f32s(dfl_dump *d, const char *name, const double *v, int64_t n, dfl_error *err)
{
    float *b = dfl__alloc_array((size_t)n, sizeof *b);
    if (!b) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++)
        b[i] = (float)v[i];
    dfl_status s = dfl_dump_put(d, name, DFL_H5_F32, 1, &n, b, err);
    free(b);
    return s;
}

static dfl_status write_effects(const dfl__effects *e, dfl_dump *d, const metrics *ms, const char **names, int64_t E,
                                const float *logits, int64_t T, dfl_error *err)
{
    double *v = dfl__alloc_array((size_t)E, sizeof *v);
    uint8_t *u = dfl__alloc_array((size_t)E, 1);
    dfl_status s = v && u ? DFL_OK : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!s) s = dfl_dump_put_strings(d, DFL_DS_EFFECTS_NAMES, names, (size_t)E, err);
    static const char *paths[4] = {DFL_DS_EFFECTS_TARGET_NLL, DFL_DS_EFFECTS_TARGET_PROB, DFL_DS_EFFECTS_TARGET_LOGIT,
                                   DFL_DS_EFFECTS_LOGIT_DIFF};
    for (int k = 0; k < (e->has_diff ? 4 : 3) && !s; k++) {
        for (int64_t i = 0; i < E; i++)
            v[i] = value_of(&ms[i], (metric_kind)k);
        s = put_f32s(d, paths[k], v, E, err);
    }
    for (int64_t i = 0; i < E && !s; i++)
        u[i] = (uint8_t)ms[i].correct;
    if (!s) s = dfl_dump_put(d, DFL_DS_EFFECTS_TARGET_CORRECT, DFL_H5_U8, 1, &E, u, err);
    if (!s && logits) {
        int64_t dims[3] = {E, T, e->V};
        s = dfl_dump_put(d, DFL_DS_EFFECTS_LOGITS, DFL_H5_F32, 3, dims, logits, err);
    }
    free(v);
    free(u);
    return s;
}

/* The sweep sp on target prompt tgt (index ti): clean (the source's tokens), corrupted
 * (the target's), and one pass per cell that starts at the cell's layer from the
 * corrupted run's residual stream and runs the LM head only from the first metric row. */
static dfl_status run_sweep(const dfl__effects *e, const effect_spec *sp, size_t ti, dfl_dump *d, dfl_error *err)
{
    const dfl_prompt *tgt = &e->ps->items[ti], *src = &e->ps->items[sp->src_index];
    int64_t T = (int64_t)tgt->n_tokens, L = e->L, W = site_width(e, sp->site);
    if ((int64_t)src->n_tokens != T)
        return dfl__fail(err, DFL_ERR_USAGE,
                         "sweep: source prompt %s has %zu tokens, target %s has %lld: a sweep needs matched lengths",
                         sp->source, src->n_tokens, tgt->id ? tgt->id : "?", (long long)T);
    const source_run *clean = source_of(e, sp->src_index, sp->site);
    int64_t l0 = sp->layer0 < 0 ? 0 : sp->layer0, l1 = sp->layer0 < 0 ? L - 1 : sp->layer1, Lp = l1 - l0 + 1;
    int heads = sp->site == DFL_SITE_HEAD;
    int32_t *tok = dfl__alloc_array((size_t)T, sizeof *tok);
    uint8_t *seg = dfl__alloc_array((size_t)T, 1), *pos = dfl__alloc_array((size_t)T, 1),
            *one = dfl__alloc_array((size_t)T, 1);
    int64_t *cells = dfl__alloc_array((size_t)(heads ? e->H : T), sizeof *cells);
    size_t nx, nv, nk, nvv;
    dfl__attn_shape sh = dfl__attn_shape_of(&e->m->config);
    int ok = dfl__mul_ok((size_t)L * (size_t)T, (size_t)e->D, &nx) &&
             dfl__mul_ok((size_t)L * (size_t)T, (size_t)W, &nv) &&
             dfl__mul_ok((size_t)L * (size_t)T, (size_t)sh.k_ld, &nk) &&
             dfl__mul_ok((size_t)L * (size_t)T, (size_t)sh.v_ld, &nvv);
    float *resid = ok ? dfl__alloc_array(nx, sizeof(float)) : NULL,
          *corr = ok ? dfl__alloc_array(nv, sizeof(float)) : NULL;
    /* the corrupted run's keys and values: a cell at position p computes rows [p, T) only */
    int from_row = !(e->base.quant_bits && e->base.quant_granularity != DFL_QUANT_ROW);
    float *kc = ok && from_row ? dfl__alloc_array(nk, sizeof(float)) : NULL,
          *vcache = ok && from_row ? dfl__alloc_array(nvv, sizeof(float)) : NULL;
    if (from_row && (!kc || !vcache)) ok = 0;
    double *patched = NULL;
    dfl_status s = ok && tok && seg && pos && one && cells && resid && corr
                       ? DFL_OK
                       : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    int64_t diff_row = 0, first = 0, P = 0;
    metrics mc, mx, mp;
    if (!s) {
        first = target_rows(tgt, tok, &diff_row);
        if (e->has_diff && diff_row < first) first = diff_row;
        dfl_prompt_segments(tgt, seg);
        span_mask(&sp->pos, seg, T, pos);
        for (int64_t t = 0; t < (heads ? e->H : T); t++)
            if (heads || pos[t]) cells[P++] = t;
        if (!(patched = dfl__alloc_array((size_t)(Lp * (P ? P : 1)), sizeof *patched)))
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    dfl_iv_list iv = dfl_iv_list_default();
    iv.logits_row0 = first;
    if (!s) s = run_metrics(e, src->tokens, T, tok, diff_row, &iv, &mc, NULL, err);
    iv.record[DFL_SITE_RESID_PRE] = resid;
    iv.record[sp->site] = sp->site == DFL_SITE_RESID_PRE ? resid : corr;
    iv.record_k = kc;
    iv.record_v = vcache;
    if (!s) s = run_metrics(e, tgt->tokens, T, tok, diff_row, &iv, &mx, NULL, err);
    double vc = value_of(&mc, sp->metric), vx = value_of(&mx, sp->metric);
    int64_t last = e->has_diff ? diff_row : 0; /* the last row the metric reads */
    for (int64_t t = 0; !s && t < T; t++)
        if (tok[t] >= 0 && t > last) last = t;
    const float *cv = sp->site == DFL_SITE_RESID_PRE ? resid : corr;
    dfl_intervention it;
    memset(&it, 0, sizeof it);
    it.kind = DFL_IV_PATCH;
    it.site = sp->site;
    it.src = clean->v;
    it.src_T = clean->T;
    it.head = -1;
    for (int64_t li = 0; li < Lp && !s; li++) {
        int64_t l = l0 + li;
        for (int64_t ci = 0; ci < P && !s; ci++) {
            int64_t c = cells[ci];
            /* exact shortcuts: a patch that changes no value, or a position after every
             * metric row (causal attention), leaves the corrupted run as it is */
            int same = 1;
            if (heads) {
                dfl__head_plan hp = dfl__head_plan_make(&e->m->config, c);
                for (int64_t t = 0; t < T && same; t++)
                    if (pos[t])
                        same = !memcmp(clean->v + (l * T + t) * W + hp.out_col, cv + (l * T + t) * W + hp.out_col,
                                       (size_t)hp.out_width * sizeof(float));
            } else {
                same = c > last || !memcmp(clean->v + (l * T + c) * W, cv + (l * T + c) * W, (size_t)W * sizeof(float));
            }
            if (same) {
                patched[li * P + ci] = vx;
                continue;
            }
            memset(one, 0, (size_t)T);
            if (heads) {
                memcpy(one, pos, (size_t)T);
                it.head = c;
            } else {
                one[c] = 1;
            }
            it.layer0 = it.layer1 = l;
            it.pos = one;
            dfl_iv_list cell = dfl_iv_list_default();
            cell.items = &it;
            cell.n = 1;
            cell.start_layer = l;
            cell.start_x = resid + (size_t)l * (size_t)T * (size_t)e->D;
            cell.logits_row0 = first;
            if (from_row) {
                int64_t r = 0;
                while (r < T - 1 && !one[r])
                    r++;
                cell.row0 = r < first ? r : first; /* the metric's rows are computed */
                cell.kcache = kc;
                cell.vcache = vcache;
            }
            s = run_metrics(e, tgt->tokens, T, tok, diff_row, &cell, &mp, NULL, err);
            patched[li * P + ci] = value_of(&mp, sp->metric);
        }
    }
    /* the group: axes, the three metrics, the normalised effect */
    int64_t *lay = NULL;
    if (!s && !(lay = dfl__alloc_array((size_t)Lp, sizeof *lay))) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !s && i < Lp; i++)
        lay[i] = l0 + i;
    int32_t *ax = NULL;
    if (!s && !(ax = dfl__alloc_array((size_t)(P ? P : 1), sizeof *ax)))
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !s && i < P; i++)
        ax[i] = (int32_t)cells[i];
    int32_t *lay32 = NULL;
    if (!s && !(lay32 = dfl__alloc_array((size_t)Lp, sizeof *lay32)))
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !s && i < Lp; i++)
        lay32[i] = (int32_t)lay[i];
    float *pf = NULL, *ef = NULL;
    if (!s && (!(pf = dfl__alloc_array((size_t)(Lp * (P ? P : 1)), sizeof *pf)) ||
               !(ef = dfl__alloc_array((size_t)(Lp * (P ? P : 1)), sizeof *ef))))
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    /* the effect from the stored values, so that the dump is consistent with itself; NaN
     * when clean and corrupted differ by less than 1e-4 of their size (the corruption
     * did not change the metric: the quotient would be rounding over rounding) */
    float fc = (float)vc, fx = (float)vx;
    double span = fabs((double)fc - fx), size = fmax(fabs((double)fc), fabs((double)fx));
    int defined = span > 0 && span >= 1e-4 * size;
    for (int64_t i = 0; !s && i < Lp * P; i++) {
        pf[i] = (float)patched[i];
        ef[i] = defined ? (float)(((double)pf[i] - fx) / ((double)fc - fx)) : NAN;
    }
    int64_t dims[2] = {Lp, P};
    const char *sid = src->id && src->id[0] ? src->id : sp->source;
    if (!s) s = dfl_dump_put(d, DFL_DS_PATCH_LAYERS, DFL_H5_I32, 1, &Lp, lay32, err);
    if (!s) s = dfl_dump_put(d, heads ? DFL_DS_PATCH_HEADS : DFL_DS_PATCH_POSITIONS, DFL_H5_I32, 1, &P, ax, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_PATCH_PATCHED, DFL_H5_F32, 2, dims, pf, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_PATCH_CLEAN, DFL_H5_F32, 0, NULL, &fc, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_PATCH_CORRUPTED, DFL_H5_F32, 0, NULL, &fx, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_PATCH_EFFECT, DFL_H5_F32, 2, dims, ef, err);
    if (!s) s = dfl_dump_attr_str(d, DFL_DS_PATCH, DFL_ATTR_PATCH_SITE, dfl_iv_site_name(sp->site), err);
    if (!s) s = dfl_dump_attr_str(d, DFL_DS_PATCH, DFL_ATTR_PATCH_METRIC, metric_names[sp->metric], err);
    if (!s) s = dfl_dump_attr_str(d, DFL_DS_PATCH, DFL_ATTR_PATCH_SOURCE, sid, err);
    free(pf);
    free(ef);
    free(lay32);
    free(ax);
    free(lay);
    free(patched);
    free(tok);
    free(seg);
    free(pos);
    free(one);
    free(cells);
    free(resid);
    free(corr);
    free(kc);
    free(vcache);
    return s;
}

dfl_status dfl__effects_sample(dfl__effects *e, dfl_dump *d, size_t index, dfl_error *err)
{
    const dfl_prompt *pr = &e->ps->items[index];
    int64_t T = (int64_t)pr->n_tokens, E = 1;
    for (size_t i = 0; i < e->n; i++)
        E += !e->specs[i].sweep;
    size_t nl = 0;
    int keep = e->save_logits && dfl__mul_ok((size_t)E * (size_t)T, (size_t)e->V, &nl);
    int32_t *tok = dfl__alloc_array((size_t)T, sizeof *tok);
    uint8_t *seg = dfl__alloc_array((size_t)T, 1), *masks = dfl__alloc_array((size_t)T * 3, 1);
    metrics *ms = dfl__alloc_array((size_t)E, sizeof *ms);
    const char **names = dfl__alloc_array((size_t)E, sizeof *names);
    float *logits = keep ? dfl__alloc_array(nl, sizeof *logits) : NULL;
    dfl_status s = tok && seg && masks && ms && names && (!e->save_logits || logits)
                       ? DFL_OK
                       : dfl__fail(err, DFL_ERR_NOMEM, "out of memory for the effects of %lld tokens", (long long)T);
    if (!s) {
        int64_t diff_row, first = target_rows(pr, tok, &diff_row);
        if (e->has_diff && diff_row < first) first = diff_row;
        dfl_prompt_segments(pr, seg);
        dfl_iv_list iv = dfl_iv_list_default();
        iv.logits_row0 = logits ? 0 : first;
        names[0] = "none";
        s = run_metrics(e, pr->tokens, T, tok, diff_row, &iv, &ms[0], logits, err);
        int64_t k = 1;
        for (size_t i = 0; i < e->n && !s; i++) {
            if (e->specs[i].sweep) continue;
            dfl_intervention it;
            build_iv(e, &e->specs[i], seg, T, masks, &it);
            iv.items = &it;
            iv.n = 1;
            names[k] = e->specs[i].canon;
            s = run_metrics(e, pr->tokens, T, tok, diff_row, &iv, &ms[k],
                            logits ? logits + (size_t)k * (size_t)T * (size_t)e->V : NULL, err);
            k++;
        }
    }
    if (!s) s = write_effects(e, d, ms, names, E, logits, T, err);
    for (size_t i = 0; i < e->n && !s; i++) {
        const effect_spec *sp = &e->specs[i];
        if (!sp->sweep) continue;
        int mine = sp->target[0] ? sp->tgt_index == index : sp->src_index != index;
        if (mine) s = run_sweep(e, sp, index, d, err);
    }
    free(tok);
    free(seg);
    free(masks);
    free(ms);
    free(names);
    free(logits);
    return s;
}
