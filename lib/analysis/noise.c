/* noise.c — attention to the answer vs attention noise from dumps (see noise.h):
 * reading the per-sample shares, grouping, the report and the two charts. */
#include "analysis/noise.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "dump/dump_read.h"
#include "render/plot.h"
#include "text/prompts.h"

/* snprintf for messages that may be cut at the buffer's end (long paths): cutting is
 * acceptable there, and vsnprintf keeps -Wformat-truncation quiet about it. */
static void put(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ names */

static const char *const map_names[] = {"auto", "map1", "map2", "diff"};
static const char *const norm_names[] = {"total", "abs"};
static const char *const by_names[] = {"none", "depth", "layer", "head"};

const char *dfl_noise_map_name(dfl_noise_map m) { return (unsigned)m < 4 ? map_names[m] : "?"; }
const char *dfl_noise_norm_name(dfl_noise_norm n) { return (unsigned)n < 2 ? norm_names[n] : "?"; }
const char *dfl_noise_by_name(dfl_noise_by b) { return (unsigned)b < 4 ? by_names[b] : "?"; }

dfl_status dfl_noise_map_parse(const char *text, dfl_noise_map *out, dfl_error *err)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(text, map_names[i])) return *out = (dfl_noise_map)i, DFL_OK;
    return dfl__fail(err, DFL_ERR_USAGE, "--map: '%s' is not auto, map1, map2 or diff", text);
}

dfl_status dfl_noise_norm_parse(const char *text, dfl_noise_norm *out, dfl_error *err)
{
    for (int i = 0; i < 2; i++)
        if (!strcmp(text, norm_names[i])) return *out = (dfl_noise_norm)i, DFL_OK;
    return dfl__fail(err, DFL_ERR_USAGE, "--norm: '%s' is not total or abs", text);
}

dfl_status dfl_noise_by_parse(const char *text, dfl_noise_by *out, dfl_error *err)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(text, by_names[i])) return *out = (dfl_noise_by)i, DFL_OK;
    return dfl__fail(err, DFL_ERR_USAGE, "--by: '%s' is not none, depth, layer or head", text);
}

dfl_status dfl_noise_parse_depths(const char *flag, const char *text, double **out, size_t *n, dfl_error *err)
{
    *out = NULL;
    *n = 0;
    size_t cap = 1;
    for (const char *c = text; *c; c++) cap += *c == ',';
    if (!*text || text[0] == ',' || text[strlen(text) - 1] == ',' || strstr(text, ",,"))
        return dfl__fail(err, DFL_ERR_USAGE, "%s: '%s' has an empty item (want a list like 0,0.25,0.5)", flag, text);
    double *v = dfl__alloc_array(cap, sizeof *v);
    char *copy = strdup(text), *save = NULL;
    dfl_status s = (!v || !copy) ? dfl__fail(err, DFL_ERR_NOMEM, "out of memory") : DFL_OK;
    size_t len = 0;
    for (char *tok = !s ? strtok_r(copy, ",", &save) : NULL; tok && !s; tok = strtok_r(NULL, ",", &save))
        s = dfl_cli_double(flag, tok, 0.0, 1.0, &v[len++], err);
    free(copy);
    if (s) {
        free(v);
        return s;
    }
    *out = v;
    *n = len;
    return DFL_OK;
}

dfl_noise_params dfl_noise_params_default(void)
{
    dfl_noise_params p;
    memset(&p, 0, sizeof p);
    p.warn_total = 0.05;
    return p;
}

/* ------------------------------------------------------------ accumulating */

/* Running sums of one group; finished into a dfl_noise_cell. */
typedef struct acc {
    size_t n_samples;
    double weight;                 /* entries summed into share[] */
    double share[DFL_SHARE_SEGMENTS];
    size_t n_scored, n_correct;
    double nll;                    /* Σ target_nll over scored samples */
} acc;

static void acc_finish(const acc *a, dfl_noise_cell *c)
{
    memset(c, 0, sizeof *c);
    c->n_samples = a->n_samples;
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++) c->share[k] = a->weight > 0 ? a->share[k] / a->weight : NAN;
    c->noise = c->share[DFL_SHARE_CONTEXT_BEFORE] + c->share[DFL_SHARE_CONTEXT_AFTER];
    c->ratio = c->noise != 0 ? c->share[DFL_SHARE_ANSWER] / c->noise
                             : (c->share[DFL_SHARE_ANSWER] != 0 ? INFINITY : NAN);
    c->n_scored = a->n_scored;
    c->n_correct = a->n_correct;
    c->accuracy = a->n_scored ? (double)a->n_correct / (double)a->n_scored : NAN;
    c->target_nll = a->n_scored ? a->nll / (double)a->n_scored : NAN;
}

/* One sample's mean shares over the selection, for grouping by depth. */
typedef struct sample_rec {
    double depth;                  /* NaN when absent */
    double share[DFL_SHARE_SEGMENTS];
    int scored, correct;
    double nll;
} sample_rec;

static void acc_add_sample(acc *a, const sample_rec *s)
{
    a->n_samples++;
    a->weight += 1.0;
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++) a->share[k] += s->share[k];
    if (s->scored) {
        a->n_scored++;
        a->n_correct += s->correct ? 1u : 0u;
        a->nll += s->nll;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Depths closer than this are one group: prompts written by difflens carry depths
 * exactly, hand-written ones may differ in the last digits. */
#define DEPTH_EPS 1e-9

/* ----------------------------------------------------------------- reading */

/* "run" from "dir/run.h5". */
static char *default_label(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 3 && !strcmp(base + n - 3, ".h5")) n -= 3;
    else if (n > 5 && !strcmp(base + n - 5, ".hdf5")) n -= 5;
    char *s = malloc(n + 1);
    if (s) memcpy(s, base, n), s[n] = '\0';
    return s;
}

/* Selection as a 0/1 mask over [n]; every selected index must be < n. */
static dfl_status make_mask(const int64_t *sel, size_t nsel, int64_t n, const char *what, const char *path,
                            uint8_t *mask, dfl_error *err)
{
    if (!sel) {
        memset(mask, 1, (size_t)n);
        return DFL_OK;
    }
    memset(mask, 0, (size_t)n);
    for (size_t i = 0; i < nsel; i++) {
        if (sel[i] < 0 || sel[i] >= n)
            return dfl__fail(err, DFL_ERR_RANGE, "%s: --%ss: %s %lld is not in the dump (it has %ss 0-%lld)", path,
                             what, what, (long long)sel[i], what, (long long)(n - 1));
        mask[sel[i]] = 1;
    }
    return DFL_OK;
}

/* Read one dump into d. */
static dfl_status read_dump(const dfl_noise_params *p, const char *path, dfl_noise_dump *d, dfl_error *err)
{
    dfl_dump_reader *r = NULL;
    dfl_status s = dfl_dump_open(path, &r, err);
    if (s) return s;
    float *shares = NULL, *raw = NULL;   /* [M, L, H, 7] of one sample */
    uint8_t *lmask = NULL, *hmask = NULL, *seg = NULL;
    sample_rec *recs = NULL;
    acc *lacc = NULL, *hacc = NULL;
    double *keys = NULL;
    const size_t ns = dfl_dump_sample_count(r);
    const char *dset = p->norm == DFL_NOISE_NORM_ABS ? "noise/shares_abs" : "noise/shares";
    int64_t M = 0, L = 0, H = 0;
    size_t n4 = 0;
    char path_buf[256];

    if (dfl_dump_get_attr_str(r, "/", "model_type", &d->model_type, err)) d->model_type = strdup("?");
    if (!d->model_type) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (ns == 0) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: the dump has no samples", path);
        goto done;
    }
    d->n_samples = ns;

    /* shape from the first sample; every other sample must agree */
    {
        dfl_dump_dset_info info;
        snprintf(path_buf, sizeof path_buf, "%s/%s", dfl_dump_sample_at(r, 0)->group, dset);
        if ((s = dfl_dump_dataset_info(r, path_buf, &info, err))) goto done;
        if (info.ndim != 4 || (info.dims[0] != 1 && info.dims[0] != 3) || info.dims[1] < 1 || info.dims[2] < 1 ||
            info.dims[3] != DFL_SHARE_SEGMENTS || info.dims[1] > (1 << 20) || info.dims[2] > (1 << 20)) {
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: not [M, L, H, 7] with M = 1 or 3 (docs/format.md)", path,
                          path_buf);
            goto done;
        }
        M = info.dims[0], L = info.dims[1], H = info.dims[2];
    }
    d->layers = L, d->heads = H;
    int mi;
    switch (p->map) {
    case DFL_NOISE_MAP_AUTO: mi = M == 3 ? 2 : 0; break;
    case DFL_NOISE_MAP_MAP1: mi = 0; break;
    case DFL_NOISE_MAP_MAP2: mi = 1; break;
    default: mi = 2; break;
    }
    if (mi >= M) {
        s = dfl__fail(err, DFL_ERR_USAGE, "%s: --map %s: a %s dump has only map1 (the softmax map)", path,
                      dfl_noise_map_name(p->map), d->model_type);
        goto done;
    }
    d->map = mi == 0 ? "map1" : mi == 1 ? "map2" : "diff";

    if (!dfl__mul_ok((size_t)M * (size_t)L, (size_t)H * DFL_SHARE_SEGMENTS, &n4)) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "%s: noise datasets too large", path);
        goto done;
    }
    shares = dfl__alloc_array(n4, sizeof *shares);
    raw = dfl__alloc_array(n4, sizeof *raw);
    lmask = malloc((size_t)L);
    hmask = malloc((size_t)H);
    recs = dfl__calloc_array(ns, sizeof *recs);
    lacc = dfl__calloc_array((size_t)L, sizeof *lacc);
    hacc = dfl__calloc_array((size_t)H, sizeof *hacc);
    if (!shares || !raw || !lmask || !hmask || !recs || !lacc || !hacc) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if ((s = make_mask(p->layers, p->n_layers, L, "layer", path, lmask, err)) ||
        (s = make_mask(p->heads, p->n_heads, H, "head", path, hmask, err)))
        goto done;
    size_t nl = 0, nh = 0;
    for (int64_t l = 0; l < L; l++) nl += lmask[l];
    for (int64_t h = 0; h < H; h++) nh += hmask[h];

    d->min_abs_total = INFINITY;
    acc all;
    memset(&all, 0, sizeof all);
    for (size_t i = 0; i < ns; i++) {
        const dfl_dump_sample *smp = dfl_dump_sample_at(r, i);
        sample_rec *rec = &recs[i];
        snprintf(path_buf, sizeof path_buf, "%s/%s", smp->group, dset);
        if ((s = dfl_dump_read(r, path_buf, DFL_H5_F32, shares, n4, err))) goto done;
        snprintf(path_buf, sizeof path_buf, "%s/noise/raw", smp->group);
        if ((s = dfl_dump_read(r, path_buf, DFL_H5_F32, raw, n4, err))) goto done;

        /* [M, L, H, 7]: entry (mi, l, h) starts at ((mi·L + l)·H + h)·7 */
        for (int64_t l = 0; l < L; l++)
            for (int64_t h = 0; h < H; h++) {
                if (!lmask[l] || !hmask[h]) continue;
                size_t base = (((size_t)mi * (size_t)L + (size_t)l) * (size_t)H + (size_t)h) * DFL_SHARE_SEGMENTS;
                double total = 0;
                for (int k = 0; k < DFL_SHARE_SEGMENTS; k++) {
                    rec->share[k] += shares[base + k];
                    lacc[l].share[k] += shares[base + k];
                    hacc[h].share[k] += shares[base + k];
                    total += raw[base + k];
                }
                lacc[l].weight += 1.0;
                hacc[h].weight += 1.0;
                d->n_entries++;
                if (fabs(total) < d->min_abs_total) d->min_abs_total = fabs(total);
                if (!isfinite(total)) d->n_nonfinite++;
                else if (!(fabs(total) >= p->warn_total)) {
                    if (d->n_low++ == 0)
                        snprintf(d->low_example, sizeof d->low_example, "sample '%s' layer %lld head %lld (total %.3g)",
                                 smp->id, (long long)l, (long long)h, total);
                }
            }
        for (int k = 0; k < DFL_SHARE_SEGMENTS; k++) rec->share[k] /= (double)(nl * nh);

        /* which segments the sample has, from its per-token codes */
        size_t T = 0;
        snprintf(path_buf, sizeof path_buf, "%s/segments", smp->group);
        free(seg);
        seg = NULL;
        if ((s = dfl_dump_read_alloc(r, path_buf, DFL_H5_U8, (void **)&seg, &T, err))) goto done;
        for (size_t t = 0; t < T; t++) {
            switch (seg[t]) {
            case DFL_SEG_BOS: d->segment_present[DFL_SHARE_BOS] = 1; break;
            case DFL_SEG_ANSWER: d->segment_present[DFL_SHARE_ANSWER] = 1; break;
            case DFL_SEG_QUERY: d->segment_present[DFL_SHARE_QUERY] = 1; break;
            case DFL_SEG_DISTRACTOR: d->segment_present[DFL_SHARE_DISTRACTOR] = 1; break;
            case DFL_SEG_TARGET: d->segment_present[DFL_SHARE_TARGET] = 1; break;
            default: break;
            }
        }

        rec->depth = NAN;
        if (dfl_dump_get_attr_f64(r, smp->group, "depth", &rec->depth, err)) rec->depth = NAN;
        snprintf(path_buf, sizeof path_buf, "%s/target_correct", smp->group);
        if (dfl_dump_exists(r, path_buf)) {
            uint8_t tc = 0;
            float nll = NAN;
            if ((s = dfl_dump_read(r, path_buf, DFL_H5_U8, &tc, 1, err))) goto done;
            snprintf(path_buf, sizeof path_buf, "%s/target_nll", smp->group);
            if (dfl_dump_exists(r, path_buf) && (s = dfl_dump_read(r, path_buf, DFL_H5_F32, &nll, 1, err))) goto done;
            rec->scored = 1;
            rec->correct = tc != 0;
            rec->nll = nll;
        }
        acc_add_sample(&all, rec);
    }
    /* context before/after always exist as segments of the share split */
    d->segment_present[DFL_SHARE_CONTEXT_BEFORE] = d->segment_present[DFL_SHARE_CONTEXT_AFTER] = 1;
    acc_finish(&all, &d->all);

    d->by_layer = dfl__calloc_array((size_t)L, sizeof *d->by_layer);
    d->by_head = dfl__calloc_array((size_t)H, sizeof *d->by_head);
    if (!d->by_layer || !d->by_head) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int64_t l = 0; l < L; l++) {
        lacc[l].n_samples = lmask[l] ? ns : 0;
        acc_finish(&lacc[l], &d->by_layer[l]);
    }
    for (int64_t h = 0; h < H; h++) {
        hacc[h].n_samples = hmask[h] ? ns : 0;
        acc_finish(&hacc[h], &d->by_head[h]);
    }

    /* depth groups: sorted distinct depths, then each sample into its group */
    keys = dfl__alloc_array(ns, sizeof *keys);
    if (!keys) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    size_t nk = 0;
    for (size_t i = 0; i < ns; i++) {
        if (isnan(recs[i].depth)) d->n_no_depth++;
        else keys[nk++] = recs[i].depth;
    }
    qsort(keys, nk, sizeof *keys, cmp_double);
    size_t ng = 0;
    for (size_t i = 0; i < nk; i++)
        if (ng == 0 || keys[i] - keys[ng - 1] > DEPTH_EPS) keys[ng++] = keys[i];
    d->n_depths = ng;
    if (ng) {
        acc *dacc = dfl__calloc_array(ng, sizeof *dacc);
        d->depth = dfl__alloc_array(ng, sizeof *d->depth);
        d->by_depth = dfl__calloc_array(ng, sizeof *d->by_depth);
        if (!dacc || !d->depth || !d->by_depth) {
            free(dacc);
            s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        memcpy(d->depth, keys, ng * sizeof *keys);
        for (size_t i = 0; i < ns; i++) {
            if (isnan(recs[i].depth)) continue;
            size_t g = 0;
            while (g + 1 < ng && recs[i].depth - keys[g] > DEPTH_EPS) g++;
            acc_add_sample(&dacc[g], &recs[i]);
        }
        for (size_t g = 0; g < ng; g++) acc_finish(&dacc[g], &d->by_depth[g]);
        free(dacc);
    }

done:
    free(shares), free(raw), free(lmask), free(hmask), free(seg), free(recs), free(lacc), free(hacc), free(keys);
    dfl_dump_close(r);
    return s;
}

void dfl_noise_result_free(dfl_noise_result *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_dumps; i++) {
        dfl_noise_dump *d = &r->dumps[i];
        free(d->path), free(d->label), free(d->model_type), free(d->depth), free(d->by_depth), free(d->by_layer),
            free(d->by_head);
    }
    free(r->dumps);
    free(r);
}

static void list_text(const int64_t *v, size_t n, char *buf, size_t cap)
{
    if (!v) {
        snprintf(buf, cap, "all");
        return;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t j = i;   /* runs a, a+1, ... as "a-b" */
        while (j + 1 < n && v[j + 1] == v[j] + 1) j++;
        size_t used = strlen(buf);
        if (j > i) snprintf(buf + used, cap - used, "%s%lld-%lld", i ? "," : "", (long long)v[i], (long long)v[j]);
        else snprintf(buf + used, cap - used, "%s%lld", i ? "," : "", (long long)v[i]);
        i = j;
    }
}

dfl_status dfl_noise_analyze(const dfl_noise_params *p, dfl_noise_result **out, dfl_error *err)
{
    *out = NULL;
    if (!p->dumps || p->n_dumps == 0) return dfl__fail(err, DFL_ERR_USAGE, "no dumps given");
    if (p->n_dumps > DFL_NOISE_MAX_DUMPS)
        return dfl__fail(err, DFL_ERR_USAGE, "%zu dumps (at most %d)", p->n_dumps, DFL_NOISE_MAX_DUMPS);
    if ((p->layers && p->n_layers == 0) || (p->heads && p->n_heads == 0))
        return dfl__fail(err, DFL_ERR_USAGE, "an empty --layers or --heads list");
    if (!(p->warn_total >= 0) || !isfinite(p->warn_total))
        return dfl__fail(err, DFL_ERR_USAGE, "warning threshold %g is not a finite number >= 0", p->warn_total);
    for (size_t i = 0; p->labels && i < p->n_dumps; i++) {
        if (!p->labels[i] || !*p->labels[i]) return dfl__fail(err, DFL_ERR_USAGE, "--labels: an empty name");
        for (size_t j = 0; j < i; j++)
            if (!strcmp(p->labels[i], p->labels[j]))
                return dfl__fail(err, DFL_ERR_USAGE, "--labels: '%s' is given twice", p->labels[i]);
    }
    dfl_noise_result *res = calloc(1, sizeof *res);
    if (!res) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    res->dumps = dfl__calloc_array(p->n_dumps, sizeof *res->dumps);
    if (!res->dumps) {
        free(res);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    res->n_dumps = p->n_dumps;
    res->norm = p->norm;
    res->warn_total = p->warn_total;
    res->n_layers_sel = p->layers ? p->n_layers : 0;
    res->n_heads_sel = p->heads ? p->n_heads : 0;
    list_text(p->layers, p->n_layers, res->layers_text, sizeof res->layers_text);
    list_text(p->heads, p->n_heads, res->heads_text, sizeof res->heads_text);

    dfl_status s = DFL_OK;
    for (size_t i = 0; i < p->n_dumps && !s; i++) {
        dfl_noise_dump *d = &res->dumps[i];
        d->path = strdup(p->dumps[i]);
        d->label = p->labels && p->labels[i] ? strdup(p->labels[i]) : default_label(p->dumps[i]);
        if (!d->path || !d->label) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        else s = read_dump(p, p->dumps[i], d, err);
    }
    /* file names that clash ("a/run.h5", "b/run.h5") fall back to the paths as given */
    if (!s && !p->labels) {
        int clash[DFL_NOISE_MAX_DUMPS] = {0};
        for (size_t i = 0; i < p->n_dumps; i++)
            for (size_t j = 0; j < p->n_dumps; j++)
                if (j != i && !strcmp(res->dumps[i].label, res->dumps[j].label)) clash[i] = 1;
        for (size_t i = 0; i < p->n_dumps && !s; i++)
            if (clash[i]) {
                free(res->dumps[i].label);
                res->dumps[i].label = strdup(res->dumps[i].path);
                if (!res->dumps[i].label) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            }
    }
    if (s) {
        dfl_noise_result_free(res);
        return s;
    }
    *out = res;
    return DFL_OK;
}

/* ---------------------------------------------------------------- warnings */

size_t dfl_noise_warnings(const dfl_noise_result *r, dfl_noise_by by, char (*lines)[256], size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_dumps && n < cap; i++) {
        const dfl_noise_dump *d = &r->dumps[i];
        /* NaN is NaN under every normalisation: no mode is recommended for it */
        if (d->n_nonfinite && n < cap)
            put(lines[n++], 256,
                "%s: %zu of %zu (sample, layer, head) entries of %s are NaN or Inf (the forward pass produced "
                "non-finite values: see the samples' nonfinite_layer attribute); every average over them is NaN",
                d->path, d->n_nonfinite, d->n_entries, d->map);
        if (r->norm == DFL_NOISE_NORM_TOTAL && d->n_low && n < cap)
            put(lines[n++], 256,
                     "%s: %zu of %zu (sample, layer, head) entries of %s have a row total below %g in magnitude, "
                     "e.g. %s: their shares (divided by that total) are unstable; --norm abs is not",
                     d->path, d->n_low, d->n_entries, d->map, r->warn_total, d->low_example);
        if (by == DFL_NOISE_BY_DEPTH && d->n_no_depth && n < cap)
            put(lines[n++], 256, "%s: %zu of %zu samples have no depth and are left out of the depth groups",
                     d->path, d->n_no_depth, d->n_samples);
    }
    return n;
}

/* ------------------------------------------------------------------ report */

static const char *const share_rows[DFL_SHARE_SEGMENTS] = {"bos",        "context_before", "answer", "context_after",
                                                          "query",      "distractor",     "target"};

/* Column name: "answer" for one dump, "LABEL answer" for several. */
static const char *colname(const dfl_noise_result *r, size_t i, const char *what, char *buf, size_t cap)
{
    if (r->n_dumps == 1) snprintf(buf, cap, "%s", what);
    else snprintf(buf, cap, "%s %s", r->dumps[i].label, what);
    return buf;
}

static void set_num_or_missing(dfl_report_table *t, size_t col, double v, dfl_error *err)
{
    if (isnan(v)) dfl_report_set_missing(t, col, NULL, err);
    else dfl_report_set_num(t, col, v, err);
}

/* Meta lines and notes shared by every grouping. */
static void report_meta(dfl_report *rep, const dfl_noise_result *r, dfl_error *err)
{
    char buf[512];
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_dump *d = &r->dumps[i];
        snprintf(buf, sizeof buf, "%s (%s, map %s, %zu samples, %lld layers x %lld heads)", d->path, d->model_type,
                 d->map, d->n_samples, (long long)d->layers, (long long)d->heads);
        dfl_report_add_meta(rep, d->label, buf, err);
    }
    dfl_report_add_meta(rep, "normalisation",
                        r->norm == DFL_NOISE_NORM_ABS
                            ? "abs (noise/shares_abs: sum of |A| over the segment / sum of |A| over the row)"
                            : "total (noise/shares: sum of A over the segment / the row's total; 1, or 1 - lambda "
                              "for diff)",
                        err);
    snprintf(buf, sizeof buf, "layers %s, heads %s, analysis rows, samples (each layer and head weighs the same)",
             r->layers_text, r->heads_text);
    dfl_report_add_meta(rep, "averaged over", buf, err);
    dfl_report_add_meta(rep, "noise",
                        "context_before + context_after (the paper's definition); answer/noise = mean answer / "
                        "mean noise",
                        err);
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_dump *d = &r->dumps[i];
        if (d->n_nonfinite)
            dfl_report_add_note(rep, err,
                                "warning: %s: %zu of %zu entries are NaN or Inf (non-finite values in the forward "
                                "pass); the averages over them are NaN under every --norm",
                                d->label, d->n_nonfinite, d->n_entries);
        if (d->n_low && r->norm == DFL_NOISE_NORM_TOTAL)
            dfl_report_add_note(rep, err,
                                "warning: %s: %zu of %zu entries have a row total below %g in magnitude (e.g. %s); "
                                "their shares are unstable, see --norm abs",
                                d->label, d->n_low, d->n_entries, r->warn_total, d->low_example);
        else if (d->n_low)
            dfl_report_add_note(rep, err,
                                "%s: %zu of %zu entries have a row total below %g in magnitude; shares_abs is "
                                "unaffected",
                                d->label, d->n_low, d->n_entries, r->warn_total);
    }
}

static dfl_status report_shares(dfl_report *rep, const dfl_noise_result *r, dfl_error *err)
{
    dfl_report_table *t;
    dfl_status s = dfl_report_add_table(rep, "shares", "Attention shares (Figure 1)", &t, err);
    if (s) return s;
    dfl_report_add_column(t, "segment", DFL_NUM_GENERAL, 4, err);
    for (size_t i = 0; i < r->n_dumps; i++) dfl_report_add_column(t, r->dumps[i].label, DFL_NUM_FIXED, 4, err);
    int present[DFL_SHARE_SEGMENTS] = {0};
    for (size_t i = 0; i < r->n_dumps; i++)
        for (int k = 0; k < DFL_SHARE_SEGMENTS; k++) present[k] |= r->dumps[i].segment_present[k];
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++) {
        if (!present[k]) continue;
        dfl_report_add_row(t, err);
        dfl_report_set_text(t, 0, share_rows[k], err);
        for (size_t i = 0; i < r->n_dumps; i++) dfl_report_set_num(t, 1 + i, r->dumps[i].all.share[k], err);
    }
    static const char *const extra[] = {"noise", "answer/noise", "accuracy", "target_nll", "samples"};
    for (int e = 0; e < 5; e++) {
        dfl_report_add_row(t, err);
        dfl_report_set_text(t, 0, extra[e], err);
        for (size_t i = 0; i < r->n_dumps; i++) {
            const dfl_noise_cell *c = &r->dumps[i].all;
            switch (e) {
            case 0: dfl_report_set_num(t, 1 + i, c->noise, err); break;
            case 1: dfl_report_set_num_fmt(t, 1 + i, c->ratio, DFL_NUM_GENERAL, 4, err); break;
            case 2:
                if (c->n_scored) dfl_report_set_num_fmt(t, 1 + i, c->accuracy, DFL_NUM_FIXED, 3, err);
                else dfl_report_set_missing(t, 1 + i, "n/a", err);
                break;
            case 3:
                if (c->n_scored && !isnan(c->target_nll))
                    dfl_report_set_num_fmt(t, 1 + i, c->target_nll, DFL_NUM_GENERAL, 4, err);
                else dfl_report_set_missing(t, 1 + i, "n/a", err);
                break;
            default: dfl_report_set_int(t, 1 + i, (int64_t)c->n_samples, err); break;
            }
        }
    }
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_cell *c = &r->dumps[i].all;
        if (c->n_scored && c->n_scored < c->n_samples)
            dfl_report_add_note(rep, err, "%s: accuracy over the %zu of %zu samples that have a target", r->dumps[i].label,
                                c->n_scored, c->n_samples);
    }
    return dfl_report_status(rep, err);
}

/* A row per group key (depth value, layer or head). */
static dfl_status report_groups(dfl_report *rep, const dfl_noise_result *r, dfl_noise_by by, dfl_error *err)
{
    static const char *const names[] = {"", "by_depth", "by_layer", "by_head"};
    static const char *const titles[] = {"", "Answer and noise by answer depth (Table 3)", "Answer and noise by layer",
                                         "Answer and noise by head"};
    static const char *const keyname[] = {"", "depth", "layer", "head"};
    dfl_report_table *t;
    dfl_status s = dfl_report_add_table(rep, names[by], titles[by], &t, err);
    if (s) return s;
    int with_acc = by == DFL_NOISE_BY_DEPTH;
    int per = with_acc ? 5 : 4;   /* n, answer, noise, answer/noise [, accuracy] */
    char cb[160];
    dfl_report_add_column(t, keyname[by], DFL_NUM_GENERAL, 4, err);
    for (size_t i = 0; i < r->n_dumps; i++) {
        dfl_report_add_column(t, colname(r, i, "n", cb, sizeof cb), DFL_NUM_GENERAL, 4, err);
        dfl_report_add_column(t, colname(r, i, "answer", cb, sizeof cb), DFL_NUM_FIXED, 4, err);
        dfl_report_add_column(t, colname(r, i, "noise", cb, sizeof cb), DFL_NUM_FIXED, 4, err);
        dfl_report_add_column(t, colname(r, i, "answer/noise", cb, sizeof cb), DFL_NUM_GENERAL, 4, err);
        if (with_acc) dfl_report_add_column(t, colname(r, i, "accuracy", cb, sizeof cb), DFL_NUM_FIXED, 3, err);
    }

    /* keys: the union of every dump's depths (ascending), or 0 .. max L / H − 1 */
    size_t nkeys = 0;
    double *keys = NULL;
    if (by == DFL_NOISE_BY_DEPTH) {
        size_t cap = 0;
        for (size_t i = 0; i < r->n_dumps; i++) cap += r->dumps[i].n_depths;
        if (cap == 0) return dfl__fail(err, DFL_ERR_FORMAT,
                                       "--by depth: no sample in %s has a depth attribute (prompts need \"depth\", as "
                                       "`noise prompts` writes them)",
                                       r->n_dumps == 1 ? r->dumps[0].path : "the dumps");
        keys = dfl__alloc_array(cap, sizeof *keys);
        if (!keys) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < r->n_dumps; i++)
            for (size_t g = 0; g < r->dumps[i].n_depths; g++) keys[nkeys++] = r->dumps[i].depth[g];
        qsort(keys, nkeys, sizeof *keys, cmp_double);
        size_t k = 0;
        for (size_t i = 0; i < nkeys; i++)
            if (k == 0 || keys[i] - keys[k - 1] > DEPTH_EPS) keys[k++] = keys[i];
        nkeys = k;
    } else {
        int64_t mx = 0;
        for (size_t i = 0; i < r->n_dumps; i++) {
            int64_t n = by == DFL_NOISE_BY_LAYER ? r->dumps[i].layers : r->dumps[i].heads;
            if (n > mx) mx = n;
        }
        keys = dfl__alloc_array((size_t)mx, sizeof *keys);
        if (!keys) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (int64_t k = 0; k < mx; k++) keys[nkeys++] = (double)k;
    }

    for (size_t k = 0; k < nkeys; k++) {
        /* a layer or head that no dump averaged (not selected) gets no row */
        const dfl_noise_cell *cells[DFL_NOISE_MAX_DUMPS];
        int any = 0;
        for (size_t i = 0; i < r->n_dumps; i++) {
            const dfl_noise_dump *d = &r->dumps[i];
            cells[i] = NULL;
            if (by == DFL_NOISE_BY_DEPTH) {
                for (size_t g = 0; g < d->n_depths; g++)
                    if (fabs(d->depth[g] - keys[k]) <= DEPTH_EPS) cells[i] = &d->by_depth[g];
            } else {
                int64_t n = by == DFL_NOISE_BY_LAYER ? d->layers : d->heads;
                const dfl_noise_cell *c = by == DFL_NOISE_BY_LAYER ? d->by_layer : d->by_head;
                if ((int64_t)keys[k] < n && c[(int64_t)keys[k]].n_samples) cells[i] = &c[(int64_t)keys[k]];
            }
            any |= cells[i] != NULL;
        }
        if (!any) continue;
        dfl_report_add_row(t, err);
        if (by == DFL_NOISE_BY_DEPTH) dfl_report_set_num(t, 0, keys[k], err);
        else dfl_report_set_int(t, 0, (int64_t)keys[k], err);
        for (size_t i = 0; i < r->n_dumps; i++) {
            size_t c0 = 1 + i * (size_t)per;
            const dfl_noise_cell *c = cells[i];
            if (!c) {
                for (int j = 0; j < per; j++) dfl_report_set_missing(t, c0 + (size_t)j, "-", err);
                continue;
            }
            dfl_report_set_int(t, c0, (int64_t)c->n_samples, err);
            set_num_or_missing(t, c0 + 1, c->share[DFL_SHARE_ANSWER], err);
            set_num_or_missing(t, c0 + 2, c->noise, err);
            set_num_or_missing(t, c0 + 3, c->ratio, err);
            if (with_acc) {
                if (c->n_scored) dfl_report_set_num(t, c0 + 4, c->accuracy, err);
                else dfl_report_set_missing(t, c0 + 4, "n/a", err);
            }
        }
    }
    free(keys);
    if (by == DFL_NOISE_BY_LAYER || by == DFL_NOISE_BY_HEAD)
        dfl_report_add_note(rep, err, "n = samples; each row averages the selected %s and every sample",
                            by == DFL_NOISE_BY_LAYER ? "heads" : "layers");
    return dfl_report_status(rep, err);
}

dfl_status dfl_noise_report(const dfl_noise_result *r, dfl_noise_by by, dfl_report **out, dfl_error *err)
{
    *out = NULL;
    dfl_report *rep = NULL;
    dfl_status s = dfl_report_create("noise: attention to the answer vs attention noise", &rep, err);
    if (s) return s;
    report_meta(rep, r, err);
    s = by == DFL_NOISE_BY_NONE ? report_shares(rep, r, err) : report_groups(rep, r, by, err);
    if (!s) s = dfl_report_status(rep, err);
    if (s) {
        dfl_report_destroy(rep);
        return s;
    }
    *out = rep;
    return DFL_OK;
}

/* ------------------------------------------------------------------- plots */

static const char *const bar_labels[DFL_SHARE_SEGMENTS] = {"bos", "context before", "answer", "context after",
                                                          "query", "distractor", "target"};

/* "map diff, norm total; mean over layers all, heads all, analysis rows, samples" */
static void plot_subtitle(const dfl_noise_result *r, char *buf, size_t cap)
{
    char maps[400] = "";
    int same = 1;
    for (size_t i = 1; i < r->n_dumps; i++) same &= !strcmp(r->dumps[i].map, r->dumps[0].map);
    if (same) put(maps, sizeof maps, "map %s", r->dumps[0].map);
    else
        for (size_t i = 0; i < r->n_dumps; i++) {
            size_t u = strlen(maps);
            put(maps + u, sizeof maps - u, "%s%s %s", i ? ", " : "maps ", r->dumps[i].label, r->dumps[i].map);
        }
    put(buf, cap, "%s; normalisation %s; mean over layers %s, heads %s, analysis rows, samples", maps,
        dfl_noise_norm_name(r->norm), r->layers_text, r->heads_text);
}

dfl_status dfl_noise_plot_shares(const dfl_noise_result *r, const char *path, int overwrite, dfl_error *err)
{
    int present[DFL_SHARE_SEGMENTS] = {0}, seg[DFL_SHARE_SEGMENTS], ng = 0;
    for (size_t i = 0; i < r->n_dumps; i++)
        for (int k = 0; k < DFL_SHARE_SEGMENTS; k++) present[k] |= r->dumps[i].segment_present[k];
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++)
        if (present[k]) seg[ng++] = k;
    const char *groups[DFL_SHARE_SEGMENTS], *series[DFL_NOISE_MAX_DUMPS];
    double values[DFL_SHARE_SEGMENTS * DFL_NOISE_MAX_DUMPS];   /* [group][dump] */
    for (int g = 0; g < ng; g++) {
        groups[g] = bar_labels[seg[g]];
        for (size_t i = 0; i < r->n_dumps; i++) values[(size_t)g * r->n_dumps + i] = r->dumps[i].all.share[seg[g]];
    }
    for (size_t i = 0; i < r->n_dumps; i++) series[i] = r->dumps[i].label;

    char sub[600], note[2048] = "noise = context before + context after";
    plot_subtitle(r, sub, sizeof sub);
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_cell *c = &r->dumps[i].all;
        char acc_text[48] = "";
        if (c->n_scored) snprintf(acc_text, sizeof acc_text, ", accuracy %.1f%%", 100.0 * c->accuracy);
        size_t u = strlen(note);
        put(note + u, sizeof note - u, "\n%s: noise %.3f, answer/noise %.3g%s", r->dumps[i].label, c->noise,
            c->ratio, acc_text);
    }
    dfl_bar_chart ch = dfl_bar_chart_default();
    ch.title = "Attention to each part of the prompt";
    ch.subtitle = sub;
    ch.groups = groups;
    ch.n_groups = ng;
    ch.series = series;
    ch.n_series = (int)r->n_dumps;
    ch.values = values;
    ch.x_label = "key segment";
    ch.y.label = r->norm == DFL_NOISE_NORM_ABS ? "share of |attention|" : "share of attention";
    ch.value_labels = 1;
    ch.value_precision = 2;
    /* room for "context before" under its bars, so no group label has to turn */
    ch.width = ng > 5 ? 1500 : 1200;
    ch.note = note;
    return dfl_plot_bar_png(&ch, path, overwrite, err);
}

dfl_status dfl_noise_plot_depth(const dfl_noise_result *r, const char *path, int overwrite, dfl_error *err)
{
    size_t any = 0;
    for (size_t i = 0; i < r->n_dumps; i++) any += r->dumps[i].n_depths;
    if (!any)
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "--plot-depth: no sample in %s has a depth attribute (prompts need \"depth\", as `noise "
                         "prompts` writes them)",
                         r->n_dumps == 1 ? r->dumps[0].path : "the dumps");
    /* [2][dump][depth]: answer, noise */
    double *ys = dfl__alloc_array(2 * any, sizeof *ys);
    if (!ys) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    dfl_plot_series ser[2][DFL_NOISE_MAX_DUMPS];
    memset(ser, 0, sizeof ser);
    size_t off = 0;
    int nonneg = 1;
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_noise_dump *d = &r->dumps[i];
        for (size_t g = 0; g < d->n_depths; g++) {
            ys[off + g] = d->by_depth[g].share[DFL_SHARE_ANSWER];
            ys[any + off + g] = d->by_depth[g].noise;
            nonneg &= ys[off + g] >= 0 && ys[any + off + g] >= 0;
        }
        for (int k = 0; k < 2; k++) {
            ser[k][i].label = d->label;
            ser[k][i].x = d->depth;
            ser[k][i].y = ys + (size_t)k * any + off;
            ser[k][i].n = (int)d->n_depths;
        }
        off += d->n_depths;
    }
    char sub[600];
    plot_subtitle(r, sub, sizeof sub);
    const int W = 1600, H = 800, top = 80;
    dfl_canvas *c = NULL;
    dfl_rgb white = {255, 255, 255}, black = {0, 0, 0}, grey = {80, 80, 80};
    dfl_status s = dfl_canvas_create(W, H, white, &c, err);
    if (!s) {
        dfl_canvas_text(c, W / 2, 12, "Attention to the answer and attention noise by answer depth", 3, black,
                        DFL_ALIGN_CENTER);
        dfl_canvas_text(c, W / 2, 12 + 3 * DFL_FONT_H + 6, sub, dfl_text_width(sub, 2) < W - 20 ? 2 : 1, grey,
                        DFL_ALIGN_CENTER);
    }
    /* every dump at the same depths (one prompt file): label the ticks with exactly
     * those depths on a categorical axis; otherwise a numeric axis over [0, 1] */
    int same = 1;
    const dfl_noise_dump *d0 = &r->dumps[0];
    for (size_t i = 1; i < r->n_dumps && same; i++) {
        same = r->dumps[i].n_depths == d0->n_depths;
        for (size_t g = 0; g < d0->n_depths && same; g++) same = fabs(r->dumps[i].depth[g] - d0->depth[g]) <= DEPTH_EPS;
    }
    same = same && d0->n_depths > 1 && d0->n_depths <= 64;
    char tick_text[64][24];
    const char *ticks[64];
    for (size_t g = 0; same && g < d0->n_depths; g++) {
        snprintf(tick_text[g], sizeof tick_text[g], "%g", d0->depth[g]);
        ticks[g] = tick_text[g];
    }
    for (size_t i = 0; same && i < r->n_dumps; i++) ser[0][i].x = ser[1][i].x = NULL;
    static const char *const titles[2] = {"attention to the answer", "attention noise (context before + after)"};
    for (int k = 0; k < 2 && !s; k++) {
        dfl_line_chart ch = dfl_line_chart_default();
        ch.title = titles[k];
        ch.x.label = "answer depth (0 = start of the context, 1 = end)";
        if (same) {
            ch.x.tick_labels = ticks;
            ch.x.n_tick_labels = (int)d0->n_depths;
        } else {
            ch.x.has_min = 1, ch.x.min = 0.0;
            ch.x.has_max = 1, ch.x.max = 1.0;
        }
        ch.y.label = r->norm == DFL_NOISE_NORM_ABS ? "share of |attention|" : "share of attention";
        if (nonneg) ch.y.has_min = 1, ch.y.min = 0.0;
        ch.series = ser[k];
        ch.n_series = (int)r->n_dumps;
        ch.font_scale = 2;
        s = dfl_plot_line_draw(c, k * (W / 2), top, W / 2, H - top, &ch, err);
    }
    if (!s) {
        const char *keys[1] = {"Software"}, *vals[1] = {"difflens noise"};
        s = dfl_png_write(c, path, overwrite, keys, vals, 1, err);
    }
    dfl_canvas_destroy(c);
    free(ys);
    return s;
}
