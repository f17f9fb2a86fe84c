/* noise.c — attention to the answer vs attention noise from dumps (see noise.h), the
 * compute part: reading the per-sample shares and grouping them. The tables and the
 * two charts are in noise_report.c. */
#include "analysis/noise.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli.h"
#include "dump/dump_read.h"
#include "dump/dump_schema.h"
#include "text/prompts.h"

/* snprintf for messages that may be cut at the buffer's end (long paths): cutting is
 * acceptable there, and vsnprintf keeps -Wformat-truncation quiet about it. */
void dfl__noise_put(char *buf, size_t cap, const char *fmt, ...)
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
static const char *const stat_names[] = {"shares", "entropy", "negative_mass"};

const char *dfl_noise_map_name(dfl_noise_map m)
{
    return (unsigned)m < 4 ? map_names[m] : "?";
}
const char *dfl_noise_norm_name(dfl_noise_norm n)
{
    return (unsigned)n < 2 ? norm_names[n] : "?";
}
const char *dfl_noise_by_name(dfl_noise_by b)
{
    return (unsigned)b < 4 ? by_names[b] : "?";
}
const char *dfl_noise_stat_name(dfl_noise_stat s)
{
    return (unsigned)s < 3 ? stat_names[s] : "?";
}

dfl_status dfl_noise_map_parse(const char *text, dfl_noise_map *out, dfl_error *err)
{
    int i = dfl__name_index(text, map_names, 4);
    if (i < 0) return dfl__fail(err, DFL_ERR_USAGE, "--map: '%s' is not auto, map1, map2 or diff", text);
    *out = (dfl_noise_map)i;
    return DFL_OK;
}

dfl_status dfl_noise_norm_parse(const char *text, dfl_noise_norm *out, dfl_error *err)
{
    int i = dfl__name_index(text, norm_names, 2);
    if (i < 0) return dfl__fail(err, DFL_ERR_USAGE, "--norm: '%s' is not total or abs", text);
    *out = (dfl_noise_norm)i;
    return DFL_OK;
}

dfl_status dfl_noise_by_parse(const char *text, dfl_noise_by *out, dfl_error *err)
{
    int i = dfl__name_index(text, by_names, 4);
    if (i < 0) return dfl__fail(err, DFL_ERR_USAGE, "--by: '%s' is not none, depth, layer or head", text);
    *out = (dfl_noise_by)i;
    return DFL_OK;
}

dfl_status dfl_noise_stat_parse(const char *text, dfl_noise_stat *out, dfl_error *err)
{
    int i = dfl__name_index(text, stat_names, 3);
    if (i < 0) return dfl__fail(err, DFL_ERR_USAGE, "--stat: '%s' is not shares, entropy or negative_mass", text);
    *out = (dfl_noise_stat)i;
    return DFL_OK;
}

dfl_status dfl_noise_parse_depths(const char *flag, const char *text, double **out, size_t *n, dfl_error *err)
{
    return dfl_cli_double_list(flag, text, 0.0, 1.0, 0, out, n, err);
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
    double weight; /* entries summed into share[] */
    double share[DFL_SHARE_SEGMENTS];
    size_t n_scored, n_correct;
    double nll; /* Σ target_nll over scored samples */
} acc;

static void acc_finish(const acc *a, dfl_noise_cell *c)
{
    memset(c, 0, sizeof *c);
    c->n_samples = a->n_samples;
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++)
        c->share[k] = a->weight > 0 ? a->share[k] / a->weight : NAN;
    c->noise = c->share[DFL_SHARE_CONTEXT_BEFORE] + c->share[DFL_SHARE_CONTEXT_AFTER];
    c->ratio =
        c->noise != 0 ? c->share[DFL_SHARE_ANSWER] / c->noise : (c->share[DFL_SHARE_ANSWER] != 0 ? INFINITY : NAN);
    c->n_scored = a->n_scored;
    c->n_correct = a->n_correct;
    c->accuracy = a->n_scored ? (double)a->n_correct / (double)a->n_scored : NAN;
    c->target_nll = a->n_scored ? a->nll / (double)a->n_scored : NAN;
}

/* One sample's mean shares over the selection, for grouping by depth. */
typedef struct sample_rec {
    double depth; /* NaN when absent */
    double share[DFL_SHARE_SEGMENTS];
    int scored, correct;
    double nll;
    double stat[2]; /* --stat: mean over the selection, per map */
} sample_rec;

static void acc_add_sample(acc *a, const sample_rec *s)
{
    a->n_samples++;
    a->weight += 1.0;
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++)
        a->share[k] += s->share[k];
    if (s->scored) {
        a->n_scored++;
        a->n_correct += s->correct ? 1u : 0u;
        a->nll += s->nll;
    }
}

int dfl__noise_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ----------------------------------------------------------------- reading */

/* "run" from "dir/run.h5". */
static char *default_label(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 3 && !strcmp(base + n - 3, ".h5"))
        n -= 3;
    else if (n > 5 && !strcmp(base + n - 5, ".hdf5"))
        n -= 5;
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
/* One dump being read: its shape, the chosen map, the masks and the buffers. */
typedef struct reading {
    const dfl_noise_params *p;
    dfl_dump_reader *r;
    const char *path;
    const char *dset;       /* noise/shares or noise/shares_abs */
    const char *stat_dset;  /* --stat: noise/entropy [E, L, H] or noise/negative_mass [L, H]; NULL */
    int64_t E;              /* maps of stat_dset */
    int64_t M, L, H;        /* the shares are [M, L, H, 7] */
    int mi;                 /* index of the chosen map in M */
    size_t n4;              /* M·L·H·7 */
    size_t nl, nh;          /* selected layers and heads */
    float *shares, *raw;    /* [M, L, H, 7] of one sample */
    uint8_t *lmask, *hmask; /* [L], [H]: selected */
    uint8_t *seg;           /* [T] segment codes of one sample */
    acc *lacc, *hacc;       /* [L], [H] */
    float *sv;              /* [E, L, H] stat_dset of one sample */
    double *svl, *svh;      /* [L, 2], [H, 2] sums of sv over samples and the other axis */
} reading;

/* The shares' shape from the first sample (every other sample must agree) and the
 * map to read: d->layers, d->heads, d->map. */
static dfl_status read_shape(reading *g, dfl_noise_dump *d, dfl_error *err)
{
    char path_buf[256];
    dfl_dump_dset_info info;
    snprintf(path_buf, sizeof path_buf, "%s/%s", dfl_dump_sample_at(g->r, 0)->group, g->dset);
    dfl_status s = dfl_dump_dataset_info(g->r, path_buf, &info, err);
    if (s) return s;
    if (info.ndim != 4 || (info.dims[0] != 1 && info.dims[0] != 3) || info.dims[1] < 1 || info.dims[2] < 1 ||
        info.dims[3] != DFL_SHARE_SEGMENTS || info.dims[1] > (1 << 20) || info.dims[2] > (1 << 20))
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: not [M, L, H, 7] with M = 1 or 3 (docs/format.md)", g->path,
                         path_buf);
    g->M = info.dims[0], g->L = info.dims[1], g->H = info.dims[2];
    d->layers = g->L, d->heads = g->H;
    switch (g->p->map) {
    case DFL_NOISE_MAP_AUTO: g->mi = g->M == 3 ? 2 : 0; break;
    case DFL_NOISE_MAP_MAP1: g->mi = 0; break;
    case DFL_NOISE_MAP_MAP2: g->mi = 1; break;
    default: g->mi = 2; break;
    }
    if (g->mi >= g->M)
        return dfl__fail(err, DFL_ERR_USAGE, "%s: --map %s: a %s dump has only map1 (the softmax map)", g->path,
                         dfl_noise_map_name(g->p->map), d->model_type);
    d->map = g->mi == 0 ? "map1" : g->mi == 1 ? "map2" : "diff";
    if (!dfl__mul_ok((size_t)g->M * (size_t)g->L, (size_t)g->H * DFL_SHARE_SEGMENTS, &g->n4))
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: noise datasets too large", g->path);
    return DFL_OK;
}

/* --stat: the dataset to read and its maps (g->stat_dset, g->E, d->stat.n_maps) from
 * the first sample; a softmax dump has no negative mass (n_maps 0, nothing read). */
static dfl_status read_stat_shape(reading *g, dfl_noise_dump *d, dfl_error *err)
{
    int neg = g->p->stat == DFL_NOISE_STAT_NEGATIVE_MASS;
    const char *name = neg ? DFL_DS_NOISE_NEGATIVE_MASS : DFL_DS_NOISE_ENTROPY;
    char path_buf[256];
    dfl_dump_dset_info info;
    snprintf(path_buf, sizeof path_buf, "%s/%s", dfl_dump_sample_at(g->r, 0)->group, name);
    if (neg && g->M == 1) return DFL_OK;
    dfl_status s = dfl_dump_dataset_info(g->r, path_buf, &info, err);
    if (s) return s;
    /* entropy [M', L, H] with M' = 1 (softmax) or 2 (Diff: map1, map2); negative mass [L, H] */
    int64_t E = neg ? 1 : info.dims[0], want_E = g->M == 3 ? 2 : 1;
    int off = neg ? 0 : 1;
    if (info.ndim != 2 + off || E != (neg ? 1 : want_E) || info.dims[off] != g->L || info.dims[off + 1] != g->H)
        return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: not [%s%lld, %lld] as the shares say (docs/format.md)", g->path,
                         path_buf,
                         neg           ? ""
                         : want_E == 2 ? "2, "
                                       : "1, ",
                         (long long)g->L, (long long)g->H);
    g->stat_dset = name;
    g->E = E;
    d->stat.n_maps = (int)E;
    return DFL_OK;
}

/* --stat: sample smp's stat_dset averaged over the selected layers and heads into
 * rec->stat, and its sums per layer and per head. */
static dfl_status read_sample_stat(reading *g, const dfl_dump_sample *smp, sample_rec *rec, dfl_error *err)
{
    const int64_t L = g->L, H = g->H;
    char path_buf[256];
    snprintf(path_buf, sizeof path_buf, "%s/%s", smp->group, g->stat_dset);
    dfl_status s = dfl_dump_read(g->r, path_buf, DFL_H5_F32, g->sv, (size_t)(g->E * L * H), err);
    if (s) return s;
    for (int64_t e = 0; e < g->E; e++) {
        for (int64_t l = 0; l < L; l++)
            for (int64_t h = 0; h < H; h++) {
                if (!g->lmask[l] || !g->hmask[h]) continue;
                double v = g->sv[(e * L + l) * H + h]; /* [E, L, H] */
                rec->stat[e] += v;
                g->svl[l * 2 + e] += v;
                g->svh[h * 2 + e] += v;
            }
        rec->stat[e] /= (double)(g->nl * g->nh);
    }
    return DFL_OK;
}

/* --stat: the means of d->stat from the samples' values and the per-layer and per-head
 * sums (after the depth groups are known). */
static dfl_status finish_stat(const reading *g, const sample_rec *recs, size_t ns, dfl_noise_dump *d, dfl_error *err)
{
    dfl_noise_values *v = &d->stat;
    if (!v->n_maps) return DFL_OK;
    v->by_layer = dfl__alloc_array((size_t)g->L * 2, sizeof *v->by_layer);
    v->by_head = dfl__alloc_array((size_t)g->H * 2, sizeof *v->by_head);
    v->by_depth = dfl__calloc_array(d->n_depths ? d->n_depths * 2 : 1, sizeof *v->by_depth);
    size_t *count = dfl__calloc_array(d->n_depths ? d->n_depths : 1, sizeof *count);
    if (!v->by_layer || !v->by_head || !v->by_depth || !count) {
        free(count);
        return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", g->path);
    }
    for (int e = 0; e < 2; e++) {
        double sum = 0;
        for (size_t i = 0; i < ns; i++)
            sum += recs[i].stat[e];
        v->all[e] = e < v->n_maps ? sum / (double)ns : NAN;
        for (int64_t l = 0; l < g->L; l++)
            v->by_layer[l * 2 + e] = e < v->n_maps && g->lmask[l] ? g->svl[l * 2 + e] / (double)(ns * g->nh) : NAN;
        for (int64_t h = 0; h < g->H; h++)
            v->by_head[h * 2 + e] = e < v->n_maps && g->hmask[h] ? g->svh[h * 2 + e] / (double)(ns * g->nl) : NAN;
    }
    /* the depth groups of group_by_depth: each sample in the first group within eps */
    for (size_t i = 0; i < ns && d->n_depths; i++) {
        if (isnan(recs[i].depth)) continue;
        size_t k = 0;
        while (k + 1 < d->n_depths && recs[i].depth - d->depth[k] > DFL_NOISE_DEPTH_EPS)
            k++;
        count[k]++;
        for (int e = 0; e < 2; e++)
            v->by_depth[k * 2 + e] += recs[i].stat[e];
    }
    for (size_t k = 0; k < d->n_depths; k++)
        for (int e = 0; e < 2; e++)
            v->by_depth[k * 2 + e] = e < v->n_maps && count[k] ? v->by_depth[k * 2 + e] / (double)count[k] : NAN;
    free(count);
    return DFL_OK;
}

/* Sample i into rec (its mean shares over the selected layers and heads, depth,
 * retrieval result), the per-layer and per-head sums, and d's low-total count and
 * present segments. */
static dfl_status read_sample(reading *g, size_t i, sample_rec *rec, dfl_noise_dump *d, dfl_error *err)
{
    const dfl_dump_sample *smp = dfl_dump_sample_at(g->r, i);
    const int64_t L = g->L, H = g->H;
    char path_buf[256];
    dfl_status s;
    snprintf(path_buf, sizeof path_buf, "%s/%s", smp->group, g->dset);
    if ((s = dfl_dump_read(g->r, path_buf, DFL_H5_F32, g->shares, g->n4, err))) return s;
    snprintf(path_buf, sizeof path_buf, "%s/" DFL_DS_NOISE_RAW, smp->group);
    if ((s = dfl_dump_read(g->r, path_buf, DFL_H5_F32, g->raw, g->n4, err))) return s;

    /* [M, L, H, 7]: entry (mi, l, h) starts at ((mi·L + l)·H + h)·7 */
    for (int64_t l = 0; l < L; l++)
        for (int64_t h = 0; h < H; h++) {
            if (!g->lmask[l] || !g->hmask[h]) continue;
            size_t base = (((size_t)g->mi * (size_t)L + (size_t)l) * (size_t)H + (size_t)h) * DFL_SHARE_SEGMENTS;
            double total = 0;
            for (int k = 0; k < DFL_SHARE_SEGMENTS; k++) {
                rec->share[k] += g->shares[base + k];
                g->lacc[l].share[k] += g->shares[base + k];
                g->hacc[h].share[k] += g->shares[base + k];
                total += g->raw[base + k];
            }
            g->lacc[l].weight += 1.0;
            g->hacc[h].weight += 1.0;
            d->n_entries++;
            if (fabs(total) < d->min_abs_total) d->min_abs_total = fabs(total);
            if (!isfinite(total))
                d->n_nonfinite++;
            else if (!(fabs(total) >= g->p->warn_total)) {
                if (d->n_low++ == 0)
                    snprintf(d->low_example, sizeof d->low_example, "sample '%s' layer %lld head %lld (total %.3g)",
                             smp->id, (long long)l, (long long)h, total);
            }
        }
    for (int k = 0; k < DFL_SHARE_SEGMENTS; k++)
        rec->share[k] /= (double)(g->nl * g->nh);

    /* which segments the sample has, from its per-token codes */
    size_t T = 0;
    snprintf(path_buf, sizeof path_buf, "%s/" DFL_DS_SEGMENTS, smp->group);
    free(g->seg);
    g->seg = NULL;
    if ((s = dfl_dump_read_alloc(g->r, path_buf, DFL_H5_U8, (void **)&g->seg, &T, err))) return s;
    for (size_t t = 0; t < T; t++) {
        switch (g->seg[t]) {
        case DFL_SEG_BOS: d->segment_present[DFL_SHARE_BOS] = 1; break;
        case DFL_SEG_ANSWER: d->segment_present[DFL_SHARE_ANSWER] = 1; break;
        case DFL_SEG_QUERY: d->segment_present[DFL_SHARE_QUERY] = 1; break;
        case DFL_SEG_DISTRACTOR: d->segment_present[DFL_SHARE_DISTRACTOR] = 1; break;
        case DFL_SEG_TARGET: d->segment_present[DFL_SHARE_TARGET] = 1; break;
        default: break;
        }
    }

    rec->depth = NAN;
    if (dfl_dump_get_attr_f64(g->r, smp->group, DFL_ATTR_DEPTH, &rec->depth, err)) rec->depth = NAN;
    snprintf(path_buf, sizeof path_buf, "%s/" DFL_DS_TARGET_CORRECT, smp->group);
    if (dfl_dump_exists(g->r, path_buf)) {
        uint8_t tc = 0;
        float nll = NAN;
        if ((s = dfl_dump_read(g->r, path_buf, DFL_H5_U8, &tc, 1, err))) return s;
        snprintf(path_buf, sizeof path_buf, "%s/" DFL_DS_TARGET_NLL, smp->group);
        if (dfl_dump_exists(g->r, path_buf) && (s = dfl_dump_read(g->r, path_buf, DFL_H5_F32, &nll, 1, err))) return s;
        rec->scored = 1;
        rec->correct = tc != 0;
        rec->nll = nll;
    }
    return g->stat_dset ? read_sample_stat(g, smp, rec, err) : DFL_OK;
}

/* Depth groups: the sorted distinct depths of recs[ns] (d->depth, d->n_depths) and
 * each sample's result in its group (d->by_depth); samples without depth counted. */
static dfl_status group_by_depth(const sample_rec *recs, size_t ns, const char *path, dfl_noise_dump *d, dfl_error *err)
{
    double *keys = dfl__alloc_array(ns, sizeof *keys); /* [ns] */
    if (!keys) return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
    size_t nk = 0;
    for (size_t i = 0; i < ns; i++) {
        if (isnan(recs[i].depth))
            d->n_no_depth++;
        else
            keys[nk++] = recs[i].depth;
    }
    qsort(keys, nk, sizeof *keys, dfl__noise_cmp_double);
    size_t ng = 0;
    for (size_t i = 0; i < nk; i++)
        if (ng == 0 || keys[i] - keys[ng - 1] > DFL_NOISE_DEPTH_EPS) keys[ng++] = keys[i];
    d->n_depths = ng;
    dfl_status s = DFL_OK;
    if (ng) {
        acc *dacc = dfl__calloc_array(ng, sizeof *dacc);
        d->depth = dfl__alloc_array(ng, sizeof *d->depth);
        d->by_depth = dfl__calloc_array(ng, sizeof *d->by_depth);
        if (!dacc || !d->depth || !d->by_depth) {
            s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
        } else {
            memcpy(d->depth, keys, ng * sizeof *keys);
            for (size_t i = 0; i < ns; i++) {
                if (isnan(recs[i].depth)) continue;
                size_t g = 0;
                while (g + 1 < ng && recs[i].depth - keys[g] > DFL_NOISE_DEPTH_EPS)
                    g++;
                acc_add_sample(&dacc[g], &recs[i]);
            }
            for (size_t g = 0; g < ng; g++)
                acc_finish(&dacc[g], &d->by_depth[g]);
        }
        free(dacc);
    }
    free(keys);
    return s;
}

static dfl_status read_dump(const dfl_noise_params *p, const char *path, dfl_noise_dump *d, dfl_error *err)
{
    reading g;
    memset(&g, 0, sizeof g);
    g.p = p;
    g.path = path;
    g.dset = p->norm == DFL_NOISE_NORM_ABS ? DFL_DS_NOISE_SHARES_ABS : DFL_DS_NOISE_SHARES;
    dfl_status s = dfl_dump_open(path, &g.r, err);
    if (s) return s;
    sample_rec *recs = NULL;
    const size_t ns = dfl_dump_sample_count(g.r);

    if (dfl_dump_get_attr_str(g.r, "/", DFL_ATTR_MODEL_TYPE, &d->model_type, err)) d->model_type = strdup("?");
    if (!d->model_type) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (ns == 0) {
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: the dump has no samples", path);
        goto done;
    }
    d->n_samples = ns;
    if ((s = read_shape(&g, d, err))) goto done;
    if (p->stat != DFL_NOISE_STAT_SHARES && (s = read_stat_shape(&g, d, err))) goto done;
    const int64_t L = g.L, H = g.H;
    g.shares = dfl__alloc_array(g.n4, sizeof *g.shares);
    g.raw = dfl__alloc_array(g.n4, sizeof *g.raw);
    g.lmask = malloc((size_t)L);
    g.hmask = malloc((size_t)H);
    recs = dfl__calloc_array(ns, sizeof *recs);
    g.lacc = dfl__calloc_array((size_t)L, sizeof *g.lacc);
    g.hacc = dfl__calloc_array((size_t)H, sizeof *g.hacc);
    if (g.stat_dset) {
        g.sv = dfl__alloc_array((size_t)(g.E * L), (size_t)H * sizeof *g.sv);
        g.svl = dfl__calloc_array((size_t)L * 2, sizeof *g.svl);
        g.svh = dfl__calloc_array((size_t)H * 2, sizeof *g.svh);
    }
    if (!g.shares || !g.raw || !g.lmask || !g.hmask || !recs || !g.lacc || !g.hacc ||
        (g.stat_dset && (!g.sv || !g.svl || !g.svh))) {
        s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if ((s = make_mask(p->layers, p->n_layers, L, "layer", path, g.lmask, err)) ||
        (s = make_mask(p->heads, p->n_heads, H, "head", path, g.hmask, err)))
        goto done;
    for (int64_t l = 0; l < L; l++)
        g.nl += g.lmask[l];
    for (int64_t h = 0; h < H; h++)
        g.nh += g.hmask[h];

    d->min_abs_total = INFINITY;
    acc all;
    memset(&all, 0, sizeof all);
    for (size_t i = 0; i < ns; i++) {
        if ((s = read_sample(&g, i, &recs[i], d, err))) goto done;
        acc_add_sample(&all, &recs[i]);
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
        g.lacc[l].n_samples = g.lmask[l] ? ns : 0;
        acc_finish(&g.lacc[l], &d->by_layer[l]);
    }
    for (int64_t h = 0; h < H; h++) {
        g.hacc[h].n_samples = g.hmask[h] ? ns : 0;
        acc_finish(&g.hacc[h], &d->by_head[h]);
    }
    s = group_by_depth(recs, ns, path, d, err);
    if (!s) s = finish_stat(&g, recs, ns, d, err);

done:
    free(g.shares), free(g.raw), free(g.lmask), free(g.hmask), free(g.seg), free(recs), free(g.lacc), free(g.hacc);
    free(g.sv), free(g.svl), free(g.svh);
    dfl_dump_close(g.r);
    return s;
}

void dfl_noise_result_free(dfl_noise_result *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_dumps; i++) {
        dfl_noise_dump *d = &r->dumps[i];
        free(d->path), free(d->label), free(d->model_type), free(d->depth), free(d->by_depth), free(d->by_layer),
            free(d->by_head);
        free(d->stat.by_layer), free(d->stat.by_head), free(d->stat.by_depth);
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
        size_t j = i; /* runs a, a+1, ... as "a-b" */
        while (j + 1 < n && v[j + 1] == v[j] + 1)
            j++;
        size_t used = strlen(buf);
        if (j > i)
            snprintf(buf + used, cap - used, "%s%lld-%lld", i ? "," : "", (long long)v[i], (long long)v[j]);
        else
            snprintf(buf + used, cap - used, "%s%lld", i ? "," : "", (long long)v[i]);
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
    if ((unsigned)p->stat > DFL_NOISE_STAT_NEGATIVE_MASS)
        return dfl__fail(err, DFL_ERR_USAGE, "unknown --stat %d", (int)p->stat);
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
    res->stat = p->stat;
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
        if (!d->path || !d->label)
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        else
            s = read_dump(p, p->dumps[i], d, err);
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
            dfl__noise_put(
                lines[n++], 256,
                "%s: %zu of %zu (sample, layer, head) entries of %s are NaN or Inf (the forward pass produced "
                "non-finite values: see the samples' nonfinite_layer attribute); every average over them is NaN",
                d->path, d->n_nonfinite, d->n_entries, d->map);
        if (r->stat == DFL_NOISE_STAT_SHARES && r->norm == DFL_NOISE_NORM_TOTAL && d->n_low && n < cap)
            dfl__noise_put(lines[n++], 256,
                           "%s: %zu of %zu (sample, layer, head) entries of %s have a row total below %g in magnitude, "
                           "e.g. %s: their shares (divided by that total) are unstable; --norm abs is not",
                           d->path, d->n_low, d->n_entries, d->map, r->warn_total, d->low_example);
        if (by == DFL_NOISE_BY_DEPTH && d->n_no_depth && n < cap)
            dfl__noise_put(lines[n++], 256, "%s: %zu of %zu samples have no depth and are left out of the depth groups",
                           d->path, d->n_no_depth, d->n_samples);
    }
    return n;
}
