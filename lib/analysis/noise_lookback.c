/* noise_lookback.c — noise --lookback: the lookback ratio of generated tokens by layer,
 * head and step, right vs wrong answers, tables and figures. */
#include "analysis/noise_lookback.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_read.h"
#include "dump/dump_schema.h"
#include "render/render.h"

/* ------------------------------------------------------------ reading */

/* The file name without folders and ".h5". */
static char *file_label(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 3 && !strcmp(b + n - 3, ".h5")) n -= 3;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, b, n);
        s[n] = '\0';
    }
    return s;
}

/* Sums of one dump while its samples are read. */
typedef struct lb_acc {
    double *lh, *lh_n; /* [L, H] */
    double *st, *st_n; /* [S, L] */
    double *sm, *sm_n; /* [S] */
    double all, all_n;
    double right, wrong;
} lb_acc;

static dfl_status read_dump(const char *path, dfl_noise_map map, dfl_lookback_dump *d, dfl_error *err)
{
    dfl_dump_reader *rd = NULL;
    dfl_status s = dfl_dump_open(path, &rd, err);
    if (s) return s;
    int64_t L = 0, H = 0;
    if ((s = dfl_dump_get_attr_i64(rd, "/", DFL_ATTR_NUM_LAYERS, &L, err)) ||
        (s = dfl_dump_get_attr_i64(rd, "/", DFL_ATTR_NUM_HEADS, &H, err))) {
        dfl_dump_close(rd);
        return s;
    }
    d->layers = L;
    d->heads = H;
    size_t ns = dfl_dump_sample_count(rd);
    /* the longest generation first: the per-step sums are sized by it */
    int64_t S = 0, M = 0;
    for (size_t i = 0; i < ns && !s; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", dfl_dump_sample_at(rd, i)->group, DFL_DS_GENERATED_LOOKBACK);
        if (!dfl_dump_exists(rd, p)) continue;
        dfl_dump_dset_info info;
        if ((s = dfl_dump_dataset_info(rd, p, &info, err))) break;
        if (info.ndim != 4 || (info.dims[0] != 1 && info.dims[0] != 3) || info.dims[1] != L || info.dims[2] != H) {
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s is not [M, %lld, %lld, n]", path, p, (long long)L, (long long)H);
            break;
        }
        M = info.dims[0];
        if (info.dims[3] > S) S = info.dims[3];
    }
    if (!s && M == 0)
        s = dfl__fail(err, DFL_ERR_FORMAT, "%s: no sample has %s (written by probe --generate)", path,
                      DFL_DS_GENERATED_LOOKBACK);
    int mi = map == DFL_NOISE_MAP_MAP1   ? 0
             : map == DFL_NOISE_MAP_MAP2 ? 1
             : map == DFL_NOISE_MAP_DIFF ? 2
             : M == 3                    ? 2
                                         : 0;
    if (!s && mi >= M)
        s = dfl__fail(err, DFL_ERR_USAGE, "%s: --map %s: the dump has softmax maps only (map1)", path,
                      dfl_noise_map_name(map));
    if (s) {
        dfl_dump_close(rd);
        return s;
    }
    static const char *names[3] = {"map1", "map2", "diff"};
    d->map = names[mi];
    if (S > DFL_LOOKBACK_MAX_STEPS) S = DFL_LOOKBACK_MAX_STEPS;
    d->steps = S;
    size_t nlh = (size_t)(L * H), nst = (size_t)(S * L);
    lb_acc a = {0};
    int ok = (a.lh = calloc(nlh, sizeof(double))) && (a.lh_n = calloc(nlh, sizeof(double))) &&
             (a.st = calloc(nst, sizeof(double))) && (a.st_n = calloc(nst, sizeof(double))) &&
             (a.sm = calloc((size_t)S, sizeof(double))) && (a.sm_n = calloc((size_t)S, sizeof(double))) &&
             (d->by_lh = malloc(nlh * sizeof(double))) && (d->by_step = malloc(nst * sizeof(double))) &&
             (d->step_mean = malloc((size_t)S * sizeof(double)));
    if (!ok) s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ns && !s; i++) {
        const dfl_dump_sample *smp = dfl_dump_sample_at(rd, i);
        char p[256];
        snprintf(p, sizeof p, "%s/%s", smp->group, DFL_DS_GENERATED_LOOKBACK);
        if (!dfl_dump_exists(rd, p)) continue;
        float *v = NULL;
        size_t n = 0;
        if ((s = dfl_dump_read_alloc(rd, p, DFL_H5_F32, (void **)&v, &n, err))) break;
        int64_t steps = (int64_t)(n / (size_t)(M * L * H));
        const float *x = v + (size_t)mi * (size_t)(L * H * steps); /* [L, H, steps] */
        double sum = 0, cnt = 0;
        for (int64_t l = 0; l < L; l++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t t = 1; t < steps; t++) {
                    double r = x[(l * H + h) * steps + t];
                    if (!isfinite(r)) continue;
                    a.lh[l * H + h] += r, a.lh_n[l * H + h] += 1;
                    if (t < S) {
                        a.st[t * L + l] += r, a.st_n[t * L + l] += 1;
                        a.sm[t] += r, a.sm_n[t] += 1;
                    }
                    sum += r, cnt += 1;
                }
        free(v);
        d->n_samples++;
        a.all += sum, a.all_n += cnt;
        snprintf(p, sizeof p, "%s/%s", smp->group, DFL_DS_GENERATED_CORRECT);
        if (cnt > 0 && dfl_dump_exists(rd, p)) {
            uint8_t c = 0;
            if ((s = dfl_dump_read(rd, p, DFL_H5_U8, &c, 1, err))) break;
            if (c)
                a.right += sum / cnt, d->n_right++;
            else
                a.wrong += sum / cnt, d->n_wrong++;
        }
    }
    if (!s) {
        for (size_t k = 0; k < nlh; k++)
            d->by_lh[k] = a.lh_n[k] > 0 ? a.lh[k] / a.lh_n[k] : NAN;
        for (size_t k = 0; k < nst; k++)
            d->by_step[k] = a.st_n[k] > 0 ? a.st[k] / a.st_n[k] : NAN;
        for (int64_t t = 0; t < S; t++)
            d->step_mean[t] = a.sm_n[t] > 0 ? a.sm[t] / a.sm_n[t] : NAN;
        d->mean = a.all_n > 0 ? a.all / a.all_n : NAN;
        d->right = d->n_right ? a.right / (double)d->n_right : NAN;
        d->wrong = d->n_wrong ? a.wrong / (double)d->n_wrong : NAN;
    }
    free(a.lh), free(a.lh_n), free(a.st), free(a.st_n), free(a.sm), free(a.sm_n);
    dfl_dump_close(rd);
    return s;
}

void dfl_lookback_result_free(dfl_lookback_result *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_dumps; i++) {
        free(r->dumps[i].label);
        free(r->dumps[i].by_lh);
        free(r->dumps[i].by_step);
        free(r->dumps[i].step_mean);
    }
    free(r->dumps);
    free(r);
}

dfl_status dfl_lookback_analyze(const char *const *dumps, const char *const *labels, size_t n_dumps, dfl_noise_map map,
                                dfl_lookback_result **out, dfl_error *err)
{
    *out = NULL;
    if (n_dumps == 0) return dfl__fail(err, DFL_ERR_USAGE, "no dumps given");
    dfl_lookback_result *r = calloc(1, sizeof *r);
    if (!r || !(r->dumps = calloc(n_dumps, sizeof *r->dumps))) {
        free(r);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    r->n_dumps = n_dumps;
    dfl_status s = DFL_OK;
    for (size_t i = 0; i < n_dumps && !s; i++) {
        dfl_lookback_dump *d = &r->dumps[i];
        d->label = labels && labels[i] ? strdup(labels[i]) : file_label(dumps[i]);
        s = d->label ? read_dump(dumps[i], map, d, err) : dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    if (s) {
        dfl_lookback_result_free(r);
        return s;
    }
    *out = r;
    return DFL_OK;
}

/* ------------------------------------------------------------ tables */

static dfl_status add_dump_columns(const dfl_lookback_result *r, dfl_report_table *t, dfl_error *err)
{
    dfl_status s = DFL_OK;
    for (size_t i = 0; i < r->n_dumps && !s; i++)
        s = dfl_report_add_column(t, r->dumps[i].label, DFL_NUM_FIXED, 3, err);
    return s;
}

static dfl_status set_num(dfl_report_table *t, size_t col, double v, dfl_error *err)
{
    return isfinite(v) ? dfl_report_set_num(t, col, v, err) : dfl_report_set_missing(t, col, "n/a", err);
}

dfl_status dfl_lookback_report(const dfl_lookback_result *r, dfl_report **out, dfl_error *err)
{
    dfl_report *rep = NULL;
    dfl_status s = dfl_report_create("Lookback ratio of generated tokens", &rep, err);
    if (s) return s;
    char maps[160] = "";
    for (size_t i = 0; i < r->n_dumps; i++)
        snprintf(maps + strlen(maps), sizeof maps - strlen(maps), "%s%s: %s", i ? ", " : "", r->dumps[i].label,
                 r->dumps[i].map);
    dfl_report_table *t = NULL;
    if (!s) s = dfl_report_add_meta(rep, "map", maps, err);
    if (!s)
        s = dfl_report_add_meta(rep, "ratio",
                                "mean |A| on the prompt / (that + mean |A| on the generated tokens), the row that "
                                "chose each token; steps 1..n-1 (Lookback Lens)",
                                err);
    /* one row per dump */
    if (!s) s = dfl_report_add_table(rep, "lookback", "Lookback ratio by model", &t, err);
    static const char *cols[] = {"model", "samples", "lookback", "right", "n_right", "wrong", "n_wrong", "accuracy"};
    static const dfl_report_num kinds[] = {DFL_NUM_GENERAL, DFL_NUM_GENERAL, DFL_NUM_FIXED,   DFL_NUM_FIXED,
                                           DFL_NUM_GENERAL, DFL_NUM_FIXED,   DFL_NUM_GENERAL, DFL_NUM_FIXED};
    for (size_t c = 0; c < 8 && !s; c++)
        s = dfl_report_add_column(t, cols[c], kinds[c], 3, err);
    for (size_t i = 0; i < r->n_dumps && !s; i++) {
        const dfl_lookback_dump *d = &r->dumps[i];
        size_t scored = d->n_right + d->n_wrong;
        if ((s = dfl_report_add_row(t, err)) || (s = dfl_report_set_text(t, 0, d->label, err)) ||
            (s = dfl_report_set_int(t, 1, (int64_t)d->n_samples, err)) || (s = set_num(t, 2, d->mean, err)) ||
            (s = set_num(t, 3, d->right, err)) || (s = dfl_report_set_int(t, 4, (int64_t)d->n_right, err)) ||
            (s = set_num(t, 5, d->wrong, err)) || (s = dfl_report_set_int(t, 6, (int64_t)d->n_wrong, err)) ||
            (s = set_num(t, 7, scored ? (double)d->n_right / (double)scored : NAN, err)))
            break;
    }
    int64_t L = 0, S = 0;
    for (size_t i = 0; i < r->n_dumps; i++) {
        if (r->dumps[i].layers > L) L = r->dumps[i].layers;
        if (r->dumps[i].steps > S) S = r->dumps[i].steps;
    }
    /* by layer: the mean over heads of by_lh */
    if (!s) s = dfl_report_add_table(rep, "lookback_by_layer", "Lookback ratio by layer (mean over heads)", &t, err);
    if (!s) s = dfl_report_add_column(t, "layer", DFL_NUM_GENERAL, 0, err);
    if (!s) s = add_dump_columns(r, t, err);
    for (int64_t l = 0; l < L && !s; l++) {
        if ((s = dfl_report_add_row(t, err)) || (s = dfl_report_set_int(t, 0, l, err))) break;
        for (size_t i = 0; i < r->n_dumps && !s; i++) {
            const dfl_lookback_dump *d = &r->dumps[i];
            double sum = 0, n = 0;
            for (int64_t h = 0; l < d->layers && h < d->heads; h++)
                if (isfinite(d->by_lh[l * d->heads + h])) sum += d->by_lh[l * d->heads + h], n++;
            s = set_num(t, 1 + i, n > 0 ? sum / n : NAN, err);
        }
    }
    /* by layer and head */
    if (!s) s = dfl_report_add_table(rep, "lookback_by_head", "Lookback ratio by layer and head", &t, err);
    if (!s) s = dfl_report_add_column(t, "layer", DFL_NUM_GENERAL, 0, err);
    if (!s) s = dfl_report_add_column(t, "head", DFL_NUM_GENERAL, 0, err);
    if (!s) s = add_dump_columns(r, t, err);
    int64_t H = 0;
    for (size_t i = 0; i < r->n_dumps; i++)
        if (r->dumps[i].heads > H) H = r->dumps[i].heads;
    for (int64_t l = 0; l < L && !s; l++)
        for (int64_t h = 0; h < H && !s; h++) {
            if ((s = dfl_report_add_row(t, err)) || (s = dfl_report_set_int(t, 0, l, err)) ||
                (s = dfl_report_set_int(t, 1, h, err)))
                break;
            for (size_t i = 0; i < r->n_dumps && !s; i++) {
                const dfl_lookback_dump *d = &r->dumps[i];
                s = set_num(t, 2 + i, l < d->layers && h < d->heads ? d->by_lh[l * d->heads + h] : NAN, err);
            }
        }
    /* by step */
    if (!s)
        s = dfl_report_add_table(rep, "lookback_by_step", "Lookback ratio by step (mean over layers and heads)", &t,
                                 err);
    if (!s) s = dfl_report_add_column(t, "step", DFL_NUM_GENERAL, 0, err);
    if (!s) s = add_dump_columns(r, t, err);
    for (int64_t k = 1; k < S && !s; k++) {
        if ((s = dfl_report_add_row(t, err)) || (s = dfl_report_set_int(t, 0, k, err))) break;
        for (size_t i = 0; i < r->n_dumps && !s; i++)
            s = set_num(t, 1 + i, k < r->dumps[i].steps ? r->dumps[i].step_mean[k] : NAN, err);
    }
    if (!s) s = dfl_report_status(rep, err);
    if (s) {
        dfl_report_destroy(rep);
        return s;
    }
    *out = rep;
    return DFL_OK;
}

/* ------------------------------------------------------------ figures */

dfl_status dfl_lookback_plot_steps(const dfl_lookback_result *r, const char *path, int overwrite,
                                   const dfl_plot_paper *pp, dfl_error *err)
{
    int n = 0;
    for (size_t i = 0; i < r->n_dumps; i++)
        n += (int)r->dumps[i].layers;
    if (n > DFL_PLOT_MAX_SERIES)
        return dfl__fail(err, DFL_ERR_USAGE, "--plot-lookback: %d lines (layers x dumps), at most %d", n,
                         DFL_PLOT_MAX_SERIES);
    dfl_plot_series ser[DFL_PLOT_MAX_SERIES];
    char names[DFL_PLOT_MAX_SERIES][96];
    double *buf = NULL;
    size_t total = 0;
    for (size_t i = 0; i < r->n_dumps; i++)
        total += (size_t)(r->dumps[i].layers * r->dumps[i].steps) * 2;
    if (!(buf = malloc((total ? total : 1) * sizeof(double)))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    int k = 0;
    size_t off = 0;
    static const dfl_plot_dash dashes[] = {DFL_DASH_SOLID, DFL_DASH_DASHED, DFL_DASH_DOTTED};
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_lookback_dump *d = &r->dumps[i];
        for (int64_t l = 0; l < d->layers; l++, k++) {
            double *x = buf + off, *y = x + d->steps;
            int m = 0;
            for (int64_t t = 1; t < d->steps; t++)
                if (isfinite(d->by_step[t * d->layers + l])) x[m] = (double)t, y[m++] = d->by_step[t * d->layers + l];
            off += (size_t)d->steps * 2;
            snprintf(names[k], sizeof names[k], "%s, layer %lld", d->label, (long long)l);
            memset(&ser[k], 0, sizeof ser[k]);
            ser[k].label = names[k];
            ser[k].x = x;
            ser[k].y = y;
            ser[k].n = m;
            ser[k].has_color = 1;
            ser[k].color = dfl_plot_color((int)l);
            ser[k].dash = dashes[i % 3];
        }
    }
    dfl_line_chart ch = dfl_line_chart_default();
    ch.title = "Lookback ratio of generated tokens by step";
    ch.subtitle = "attention on the prompt / (prompt + generated), mean over heads and samples";
    ch.x.label = "generation step (the row that chose token i)";
    ch.x.integer_ticks = 1;
    ch.y.label = "lookback ratio";
    ch.y.has_min = 1, ch.y.min = 0.0;
    ch.y.has_max = 1, ch.y.max = 1.0;
    ch.series = ser;
    ch.n_series = k;
    ch.width = 1400;
    ch.height = 800;
    ch.font_scale = 2;
    ch.legend = DFL_LEGEND_RIGHT;
    ch.font = pp ? pp->font : NULL;
    dfl_canvas *c = NULL;
    dfl_status s = dfl_plot_line_canvas(&ch, &c, err);
    if (!s) s = dfl_plot_write(c, path, overwrite, pp, "difflens noise", err);
    dfl_canvas_destroy(c);
    free(buf);
    return s;
}

dfl_status dfl_lookback_plot_heads(const dfl_lookback_result *r, const char *path, int overwrite,
                                   const dfl_plot_paper *pp, dfl_error *err)
{
    const int panel = 520, top = 110, left = 90, gap = 70, bottom = 90, bar_w = 24;
    dfl_colorbar cb = {DFL_CMAP_VIRIDIS,    {DFL_SCALE_LINEAR, 0, 0.0, 1.0, 0.0}, "lookback", NULL, 0, 0, 2,
                       pp ? pp->font : NULL};
    int cbw = dfl_colorbar_width(&cb, bar_w);
    int W = left + (int)r->n_dumps * (panel + gap) + cbw + 20, H = top + panel + bottom;
    dfl_rgb white = {255, 255, 255}, black = {0, 0, 0}, grey = {90, 90, 90}, nodata = {220, 220, 220};
    dfl_canvas *c = NULL;
    dfl_status s = dfl_canvas_create(W, H, white, &c, err);
    if (s) return s;
    dfl_canvas_set_font(c, pp ? pp->font : NULL);
    dfl_canvas_text(c, W / 2, 10, "Lookback ratio by layer and head", 3, black, DFL_ALIGN_CENTER);
    dfl_canvas_text(c, W / 2, 10 + 3 * DFL_FONT_H + 4,
                    "mean over generated steps and samples; 1 = attends to the prompt only", 2, grey, DFL_ALIGN_CENTER);
    for (size_t i = 0; i < r->n_dumps; i++) {
        const dfl_lookback_dump *d = &r->dumps[i];
        int x0 = left + (int)i * (panel + gap), y0 = top;
        float *v = malloc((size_t)(d->layers * d->heads) * sizeof(float));
        if (!v) {
            s = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t k = 0; k < d->layers * d->heads; k++)
            v[k] = (float)d->by_lh[k];
        dfl_canvas_heatmap_box(c, x0, y0, panel, panel, v, (int)d->layers, (int)d->heads, &cb.norm, cb.cmap, nodata,
                               grey);
        free(v);
        dfl_canvas_frame(c, x0, y0, panel, panel, black);
        char label[160];
        snprintf(label, sizeof label, "%s (%s)", d->label, d->map);
        dfl_canvas_text(c, x0 + panel / 2, y0 - 2 * DFL_FONT_H - 8, label, 2, black, DFL_ALIGN_CENTER);
        char tick[32];
        int step_h = d->heads > 16 ? (int)(d->heads + 15) / 16 : 1,
            step_l = d->layers > 16 ? (int)(d->layers + 15) / 16 : 1;
        for (int64_t h = 0; h < d->heads; h += step_h) {
            snprintf(tick, sizeof tick, "%lld", (long long)h);
            dfl_canvas_text(c, x0 + (int)((2 * h + 1) * panel / (2 * d->heads)), y0 + panel + 6, tick, 2, black,
                            DFL_ALIGN_CENTER);
        }
        for (int64_t l = 0; l < d->layers; l += step_l) {
            snprintf(tick, sizeof tick, "%lld", (long long)l);
            dfl_canvas_text(c, x0 - 8, y0 + (int)((2 * l + 1) * panel / (2 * d->layers)) - DFL_FONT_H, tick, 2, black,
                            DFL_ALIGN_RIGHT);
        }
        dfl_canvas_text(c, x0 + panel / 2, y0 + panel + 2 * DFL_FONT_H + 14, "head", 2, black, DFL_ALIGN_CENTER);
        if (i == 0) dfl_canvas_text_up(c, 10, y0 + panel / 2, "layer", 2, black, DFL_ALIGN_CENTER);
    }
    if (!s) dfl_canvas_colorbar(c, left + (int)r->n_dumps * (panel + gap), top, bar_w, panel, &cb);
    if (!s) s = dfl_plot_write(c, path, overwrite, pp, "difflens noise", err);
    dfl_canvas_destroy(c);
    return s;
}
