/* attnmap_draw.c — the attnmap figure from a plan attnmap.c has read: tiles with their
 * segment bands, token or position labels, the colour bar, titles and the legend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/attnmap_internal.h"

static const dfl_rgb WHITE = {255, 255, 255}, INK = {0x22, 0x22, 0x22}, GREY = {0x66, 0x66, 0x66};
static const dfl_rgb NODATA = {200, 200, 200}, HATCH = {160, 160, 160};

/* Segment colours (Okabe-Ito, colour-blind safe), by code: context, bos, answer,
 * query, distractor, target, and (probe --generate, dump_generated.h) generated. */
#define NSEG 7
static const dfl_rgb SEG_COLOR[NSEG] = {{232, 232, 232}, {0, 0, 0},       {0, 158, 115}, {0, 114, 178},
                                        {230, 159, 0},   {204, 121, 167}, {213, 94, 0}};
static const char *const SEG_NAME[NSEG] = {"context", "bos", "answer", "query", "distractor", "target", "generated"};
/* Which segment wins when a pooled band cell covers several. */
static const int SEG_RANK[NSEG] = {0, 1, 5, 2, 3, 4, 6};
/* The rule where generation starts. */
static const dfl_rgb GEN_RULE = {213, 94, 0};

static int band_segment(const uint8_t *seg, int64_t from, int64_t to)
{
    int best = 0;
    for (int64_t i = from; i < to; i++) {
        int s = seg[i] < NSEG ? seg[i] : 0;
        if (SEG_RANK[s] > SEG_RANK[best]) best = s;
    }
    return best;
}

#define M           16 /* outer margin (6 in a figure sized by --width) */
#define BAND        6  /* segment band thickness */
#define BGAP        2  /* band to map */
#define GAPX        24 /* between tiles */
#define GAPY        14
#define LABEL_CHARS 10 /* token labels are clipped to this many characters */

typedef struct layout {
    int mw, mh;           /* map area of a tile */
    int left_w, bottom_h; /* tick or token labels */
    int tile_title_h;
    int tw, th;           /* whole tile */
    int token_x, token_y; /* print token text along x / y */
    int grid_x, grid_y;   /* top-left of the grid */
    int cb_x, cb_y, cb_h, cb_w;
    int width, height;
    int title_scale;
    int legend_y;
    int m, cb_gap; /* outer margin; grid to colour bar */
} layout;

/* Position (centre) of shown key k on the x axis of a tile's map. */
static int key_px(const plan *pl, const layout *L, double k)
{
    return (int)floor((k + 0.5) * L->mw / (double)pl->nc);
}
static int row_px(const plan *pl, const layout *L, double r)
{
    return (int)floor((r + 0.5) * L->mh / (double)pl->nr);
}

static void draw_tile(dfl_canvas *c, const plan *pl, const layout *L, const tile *t, int x, int y)
{
    const side *a = &pl->sd[0];
    if (pl->grid_cols * pl->grid_rows > 1 || t->title[0])
        dfl_canvas_text(c, x + L->left_w + BAND + BGAP, y, t->title, 1, INK, DFL_ALIGN_LEFT);
    int mx = x + L->left_w + BAND + BGAP, my = y + L->tile_title_h + BAND + BGAP;
    /* key band (top) and query band (left): one rectangle per run of a segment, so
     * vector outputs get a few shapes without seams between them */
    int run = 0, run_s = -1;
    for (int64_t px = 0; px <= L->mw; px++) {
        int s = -1;
        if (px < L->mw) {
            int64_t k0 = px * pl->nc / L->mw, k1 = ((px + 1) * pl->nc + L->mw - 1) / L->mw;
            if (k1 <= k0) k1 = k0 + 1;
            s = band_segment(a->tk.segments + pl->c0, k0, k1);
        }
        if (s != run_s) {
            if (run_s >= 0) dfl_canvas_fill(c, mx + run, my - BGAP - BAND, (int)px - run, BAND, SEG_COLOR[run_s]);
            run = (int)px;
            run_s = s;
        }
    }
    run = 0, run_s = -1;
    for (int64_t py = 0; py <= L->mh; py++) {
        int best = -1;
        if (py < L->mh) {
            int64_t r0 = py * pl->nr / L->mh, r1 = ((py + 1) * pl->nr + L->mh - 1) / L->mh;
            if (r1 <= r0) r1 = r0 + 1;
            best = 0;
            for (int64_t r = r0; r < r1 && r < pl->nr; r++) {
                int s = a->tk.segments[pl->rpos[r]] < NSEG ? a->tk.segments[pl->rpos[r]] : 0;
                if (SEG_RANK[s] > SEG_RANK[best]) best = s;
            }
        }
        if (best != run_s) {
            if (run_s >= 0) dfl_canvas_fill(c, mx - BGAP - BAND, my + run, BAND, (int)py - run, SEG_COLOR[run_s]);
            run = (int)py;
            run_s = best;
        }
    }
    dfl_canvas_heatmap_box(c, mx, my, L->mw, L->mh, t->v, (int)pl->ph, (int)pl->pw, &pl->norm, pl->cmap, NODATA, HATCH);
    dfl_canvas_frame(c, mx - 1, my - 1, L->mw + 2, L->mh + 2, GREY);
    /* probe --generate: a rule before the first generated key and the first generated row */
    int64_t g = a->gen_start - pl->c0;
    if (a->gen_start > 0 && g > 0 && g < pl->nc) {
        int px = mx + (int)floor((double)g * L->mw / (double)pl->nc);
        dfl_canvas_line(c, px, my - BGAP - BAND, px, my + L->mh, GEN_RULE);
    }
    for (int64_t r = 1; a->gen_start > 0 && r < pl->nr; r++)
        if (pl->rpos[r] >= a->gen_start && pl->rpos[r - 1] < a->gen_start) {
            int py = my + (int)floor((double)r * L->mh / (double)pl->nr);
            dfl_canvas_line(c, mx - BGAP - BAND, py, mx + L->mw, py, GEN_RULE);
        }

    char buf[64];
    /* x axis: token text or position ticks */
    int by = my + L->mh + 2;
    if (L->token_x) {
        for (int64_t k = 0; k < pl->nc; k++) {
            int px = mx + key_px(pl, L, (double)k);
            dfl_text_clip(buf, sizeof buf, a->tk.text[pl->c0 + k], LABEL_CHARS);
            dfl_canvas_text_up(c, px - DFL_FONT_H / 2, by + 4, buf, 1, INK, DFL_ALIGN_RIGHT);
        }
    } else {
        double ticks[32];
        /* about one tick per 7 line heights, as matplotlib spaces them; at least 4 */
        int max_t = L->mw / (7 * DFL_FONT_H) + 1;
        int nt =
            dfl_ticks_linear((double)pl->c0, (double)(pl->c0 + pl->nc - 1), max_t < 4 ? 4 : max_t, ticks, 32, NULL);
        for (int i = 0; i < nt; i++) {
            if (ticks[i] != floor(ticks[i])) continue;
            int px = mx + key_px(pl, L, ticks[i] - (double)pl->c0);
            dfl_canvas_fill(c, px, by, 1, 4, INK);
            snprintf(buf, sizeof buf, "%.0f", ticks[i]);
            dfl_canvas_text(c, px, by + 5, buf, 1, INK, DFL_ALIGN_CENTER);
        }
    }
    /* y axis: token text, each strip's position, or position ticks */
    int lx = mx - BGAP - BAND - 2;
    if (L->token_y) {
        for (int64_t r = 0; r < pl->nr; r++) {
            int py = my + row_px(pl, L, (double)r);
            dfl_text_clip(buf, sizeof buf, a->tk.text[pl->rpos[r]], LABEL_CHARS);
            dfl_canvas_text(c, lx - 2, py - DFL_FONT_H / 2, buf, 1, INK, DFL_ALIGN_RIGHT);
        }
    } else if (pl->strips) {
        /* label strips at least a line apart */
        int step = 1;
        while ((double)L->mh / (double)pl->nr * step < DFL_FONT_H + 4)
            step++;
        for (int64_t r = 0; r < pl->nr; r += step) {
            int py = my + row_px(pl, L, (double)r);
            dfl_canvas_fill(c, lx - 3, py, 3, 1, INK);
            snprintf(buf, sizeof buf, "%d", pl->rpos[r]);
            dfl_canvas_text(c, lx - 5, py - DFL_FONT_H / 2, buf, 1, INK, DFL_ALIGN_RIGHT);
        }
    } else {
        double ticks[32];
        double p0 = pl->rpos[0];
        int max_t = L->mh / (5 * DFL_FONT_H) + 1;
        int nt = dfl_ticks_linear(p0, (double)pl->rpos[pl->nr - 1], max_t < 4 ? 4 : max_t, ticks, 32, NULL);
        for (int i = 0; i < nt; i++) {
            if (ticks[i] != floor(ticks[i])) continue;
            int py = my + row_px(pl, L, ticks[i] - p0);
            dfl_canvas_fill(c, lx - 3, py, 3, 1, INK);
            snprintf(buf, sizeof buf, "%.0f", ticks[i]);
            dfl_canvas_text(c, lx - 5, py - DFL_FONT_H / 2, buf, 1, INK, DFL_ALIGN_RIGHT);
        }
    }
}

static int max_label_width(const plan *pl, const char *font, int y_axis)
{
    const side *a = &pl->sd[0];
    int w = 0;
    char buf[64];
    int64_t n = y_axis ? pl->nr : pl->nc;
    for (int64_t i = 0; i < n; i++) {
        dfl_text_clip(buf, sizeof buf, a->tk.text[y_axis ? pl->rpos[i] : pl->c0 + i], LABEL_CHARS);
        int tw = dfl_font_text_width(font, buf, 1);
        if (tw > w) w = tw;
    }
    return w;
}

/* The layout for the pooled grid; fit_w > 0: the figure is exactly that wide (the maps
 * were sized for it) and titles are clipped to it rather than widening it. */
static void make_layout(const plan *pl, const dfl_attnmap_params *p, const dfl_colorbar *cb, const char *title,
                        const char *subtitle, const dfl_legend_item *items, int nitems, int fit_w, layout *L)
{
    memset(L, 0, sizeof *L);
    const side *a = &pl->sd[0];
    L->mw = (int)pl->pw * pl->cell_w;
    L->mh = (int)pl->ph * pl->cell_h;
    if (pl->fit_mw > 0) {
        /* both sides stretched alike: cells keep their aspect */
        L->mh = (int)lround((double)L->mh * pl->fit_mw / L->mw);
        if (L->mh < 1) L->mh = 1;
        L->mw = pl->fit_mw;
    }
    int has_text = a->tk.text && p->token_labels;
    L->token_x = has_text && pl->pw == pl->nc && (double)L->mw / (double)pl->pw >= DFL_FONT_H;
    L->token_y = has_text && pl->ph == pl->nr && (double)L->mh / (double)pl->ph >= DFL_FONT_H;
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)(pl->sd[0].tk.T));
    int digits_w = dfl_font_text_width(p->font, buf, 1);
    L->left_w = (L->token_y ? max_label_width(pl, p->font, 1) : digits_w) + 8;
    L->bottom_h = L->token_x ? max_label_width(pl, p->font, 0) + 8 : DFL_FONT_H + 8;
    L->tile_title_h = pl->ntiles > 1 || pl->tiles[0].title[0] ? DFL_FONT_H + 4 : 0;
    L->tw = L->left_w + BAND + BGAP + L->mw;
    L->th = L->tile_title_h + BAND + BGAP + L->mh + L->bottom_h;

    int axis_w = DFL_FONT_H + 6; /* the rotated "query position" */
    int grid_w = pl->grid_cols * L->tw + (pl->grid_cols - 1) * GAPX;
    int grid_h = pl->grid_rows * L->th + (pl->grid_rows - 1) * GAPY;
    L->cb_w = dfl_colorbar_width(cb, 18);
    if (fit_w) L->cb_w += DFL_FONT_H + 6; /* the bar's title, turned, on its right */
    L->m = fit_w ? 6 : M;
    L->cb_gap = fit_w ? 12 : 28;
    int width = L->m + axis_w + grid_w + L->cb_gap + L->cb_w + L->m;
    if (fit_w > width) width = fit_w;
    L->title_scale = dfl_font_text_width(p->font, title, 2) + 2 * L->m <= width ? 2 : 1;
    int title_w = dfl_font_text_width(p->font, title, L->title_scale) + 2 * L->m;
    int sub_w = dfl_font_text_width(p->font, subtitle, 1) + 2 * L->m;
    if (title_w > width && !fit_w) width = title_w;
    if (sub_w > width && !fit_w) width = sub_w;
    L->width = width;

    L->grid_x = L->m + axis_w;
    L->grid_y = L->m + DFL_FONT_H * L->title_scale + 6 + DFL_FONT_H + 12;
    /* the colour bar spans the maps of the grid, at least 160 px */
    L->cb_x = L->grid_x + grid_w + L->cb_gap;
    L->cb_y = L->grid_y + L->tile_title_h + BAND + BGAP + DFL_FONT_H + 16;
    int maps_span = grid_h - L->tile_title_h - BAND - BGAP - L->bottom_h;
    L->cb_h = maps_span - DFL_FONT_H - 16;
    /* a bar at least 160 units tall (5 labelled ticks), less in a figure sized to a
     * paper width, where it would otherwise set the height */
    int cb_min = fit_w ? 4 * (DFL_FONT_H + 4) : 160;
    if (L->cb_h < cb_min) L->cb_h = cb_min;
    int cb_bottom = L->cb_y + L->cb_h + 18 + (cb->note ? 5 * (DFL_FONT_H + 2) : 0);
    int bottom = L->grid_y + grid_h + DFL_FONT_H + 8; /* + "key position" */
    if (cb_bottom > bottom) bottom = cb_bottom;
    int lw, lh;
    dfl_legend_size(items, nitems, 1, width - 2 * L->m, &lw, &lh);
    L->legend_y = bottom + 8;
    L->height = L->legend_y + lh + L->m;
}

/* Colour bar ticks of a 0..1 scale stand in for the data's, not read yet. */
int dfl__attnmap_fit_map_width(const plan *pl, const dfl_attnmap_params *p, int fit_w)
{
    dfl_colorbar cb = {pl->cmap, {DFL_SCALE_LINEAR, 0, 0.0, 1.0, 0.0}, NULL, NULL, 1, 1, 1, p->font};
    dfl_legend_item none = {"context", WHITE, 0, WHITE};
    layout L;
    make_layout(pl, p, &cb, "", "", &none, 1, 1, &L);
    int over = L.width - pl->grid_cols * L.mw;
    int per = (fit_w - over) / pl->grid_cols;
    return per < 16 ? 16 : per;
}

/* Cut text (in place, buffer cap) with an ellipsis until it is at most w units wide. */
static void fit_text(const char *font, char *text, size_t cap, int scale, int w)
{
    size_t n = dfl_text_length(text);
    char *orig = strdup(text);
    if (!orig) return; /* out of memory: the text runs off the edge */
    while (n > 1 && dfl_font_text_width(font, text, scale) > w) {
        n = n * 9 / 10 < n - 1 ? n * 9 / 10 : n - 1;
        dfl_text_clip(text, cap, orig, n);
    }
    free(orig);
}

/* ------------------------------------------------------------------ figure */

static void scale_note(const plan *pl, const dfl_attnmap_params *p, char *buf, size_t cap)
{
    char lo[32], hi[32];
    size_t used = 0;
    if (pl->robust)
        used += (size_t)snprintf(buf + used, cap - used, "limits: p99.5%s\n(bos keys left out)\n",
                                 pl->norm.diverging ? " of |v|" : "");
    else
        used += (size_t)snprintf(buf + used, cap - used, "limits: --vmin/--vmax\n");
    dfl_tick_label(pl->data_min, lo, sizeof lo);
    dfl_tick_label(pl->data_max, hi, sizeof hi);
    used += (size_t)snprintf(buf + used, cap - used, "data %s to %s\n", lo, hi);
    if (used < cap)
        snprintf(buf + used, cap - used, "%s scale, %s pool", dfl_scale_name(p->scale), dfl_pool_name(p->pool));
}

/* What the pixels are: dumps, tokens, rows and keys shown, pooling. */
static void subtitle_text(const plan *pl, const dfl_attnmap_params *p, int fit_w, char *buf, size_t cap)
{
    const side *a = &pl->sd[0];
    snprintf(buf, cap,
             "%s%s%s \xc2\xb7 %lld tokens \xc2\xb7 %s %d:%d \xc2\xb7 keys %lld:%lld \xc2\xb7 %lld rows x %lld keys %s "
             "%lld x %lld px",
             p->dump_path, p->vs_path ? " vs " : "", p->vs_path ? p->vs_path : "", (long long)a->tk.T,
             pl->strips ? "captured rows" : "rows", pl->rpos[0], pl->rpos[pl->nr - 1] + 1, (long long)pl->c0,
             (long long)(pl->c0 + pl->nc), (long long)pl->nr, (long long)pl->nc,
             pl->ph < pl->nr || pl->pw < pl->nc ? (p->pool == DFL_POOL_MAX ? "max-pooled to" : "mean-pooled to")
                                                : "shown at",
             (long long)pl->pw * (fit_w ? 1 : pl->cell_w), (long long)pl->ph * (fit_w ? 1 : pl->cell_h));
    /* a figure sized by --width stretches cells: say how many, not how many pixels */
    if (fit_w && strlen(buf) > 3 && strlen(buf) + 3 < cap) buf[strlen(buf) - 3] = '\0', strcat(buf, " cells");
}

/* The legend: the segments present in the sample, then masked. items has room for 8. */
static int legend_items(const plan *pl, dfl_legend_item *items)
{
    const side *a = &pl->sd[0];
    int nitems = 0;
    int present[NSEG] = {0};
    for (int64_t i = 0; i < a->tk.T; i++)
        present[a->tk.segments[i] < NSEG ? a->tk.segments[i] : 0] = 1;
    for (int sg = 1; sg <= NSEG; sg++) {
        int code = sg % NSEG; /* bos, answer, query, distractor, target, generated, then context */
        if (!present[code]) continue;
        dfl_legend_item it = {SEG_NAME[code], SEG_COLOR[code], 0, SEG_COLOR[code]};
        items[nitems++] = it;
    }
    dfl_legend_item masked = {"masked (future keys)", NODATA, 1, HATCH};
    items[nitems++] = masked;
    return nitems;
}

/* The axis titles of the whole grid: the longest y title that fits beside it. */
static void draw_axis_titles(dfl_canvas *c, const plan *pl, const dfl_attnmap_params *p, const layout *L)
{
    int grid_w = pl->grid_cols * L->tw + (pl->grid_cols - 1) * GAPX;
    int grid_h = pl->grid_rows * L->th + (pl->grid_rows - 1) * GAPY;
    const char *ytitles[3] = {pl->strips ? "query position (captured rows)" : "query position", "query position",
                              "query"};
    int yt = 0;
    while (yt < 2 && dfl_font_text_width(p->font, ytitles[yt], 1) > grid_h)
        yt++;
    dfl_canvas_text_up(c, L->m, L->grid_y + grid_h / 2, ytitles[yt], 1, INK, DFL_ALIGN_CENTER);
    dfl_canvas_text(c, L->grid_x + grid_w / 2, L->grid_y + grid_h + 2, "key position", 1, INK, DFL_ALIGN_CENTER);
}

dfl_status dfl__attnmap_draw(const plan *pl, const dfl_attnmap_params *p, char *title, size_t title_cap, int fit_w,
                             dfl_attnmap_report *rep, dfl_error *err)
{
    char subtitle[384], note[256];
    subtitle_text(pl, p, fit_w, subtitle, sizeof subtitle);
    scale_note(pl, p, note, sizeof note);
    int all_div = 1;
    for (int i = 0; i < pl->ntiles; i++)
        all_div &= pl->tiles[i].diverging;
    dfl_colorbar cb = {pl->cmap,
                       pl->norm,
                       p->delta  ? "A \xe2\x88\x92 B"
                       : all_div ? "map1 \xe2\x88\x92 \xce\xbb\xc2\xb7map2"
                                 : "attention",
                       note,
                       pl->extend_low,
                       pl->extend_high,
                       1,
                       p->font};
    /* a figure sized to a paper width keeps the bar narrow: its title runs along it,
     * and the note on the limits is left out */
    const char *cb_title = cb.title;
    if (fit_w) cb.title = cb.note = NULL;
    dfl_legend_item items[8];
    int nitems = legend_items(pl, items);

    layout L;
    make_layout(pl, p, &cb, title, subtitle, items, nitems, fit_w, &L);
    dfl_canvas *c = NULL;
    dfl_status s = dfl_canvas_create(L.width, L.height, WHITE, &c, err);
    if (s) return s;
    dfl_canvas_set_font(c, p->font);
    fit_text(p->font, title, title_cap, L.title_scale, L.width - 2 * L.m);
    fit_text(p->font, subtitle, sizeof subtitle, 1, L.width - 2 * L.m);
    dfl_canvas_text(c, L.m, L.m, title, L.title_scale, INK, DFL_ALIGN_LEFT);
    dfl_canvas_text(c, L.m, L.m + DFL_FONT_H * L.title_scale + 6, subtitle, 1, GREY, DFL_ALIGN_LEFT);
    for (int i = 0; i < pl->ntiles; i++) {
        int gx = i % pl->grid_cols, gy = i / pl->grid_cols;
        draw_tile(c, pl, &L, &pl->tiles[i], L.grid_x + gx * (L.tw + GAPX), L.grid_y + gy * (L.th + GAPY));
    }
    draw_axis_titles(c, pl, p, &L);
    dfl_canvas_colorbar(c, L.cb_x, L.cb_y, 18, L.cb_h, &cb);
    if (fit_w) /* the bar's title along its right side, as matplotlib labels a colour bar */
        dfl_canvas_text_up(c, L.cb_x + L.cb_w - DFL_FONT_H, L.cb_y + L.cb_h / 2, cb_title, 1, INK, DFL_ALIGN_CENTER);
    dfl_canvas_legend(c, L.m, L.legend_y, items, nitems, 1, L.width - 2 * L.m, INK);

    dfl_output o = dfl_output_default();
    o.width_in = p->width_in > 0 ? p->width_in : L.width / 72.0;
    o.dpi = p->dpi > 0 ? p->dpi : p->width_in > 0 && p->px_scale <= 0 ? 300 : 0;
    o.scale = p->px_scale;
    o.title = title;
    o.software = "difflens attnmap";
    s = dfl_canvas_write(c, p->out_path, p->overwrite, &o, err);
    dfl_canvas_destroy(c);
    if (!s && rep) {
        rep->width_in = o.width_in;
        rep->width = L.width;
        rep->height = L.height;
    }
    return s;
}
