/* attnmap.c — the attnmap tool's logic: resolve what to draw in one or two dumps
 * (read through dump/dump_sample), read and pool each map by hyperslabs, choose one
 * colour scale for all tiles, then hand the plan to attnmap_draw.c. */
#include "render/attnmap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/cli.h"
#include "base/clock.h"
#include "render/attnmap_image.h"
#include "render/attnmap_internal.h"
#include "dump/dump_generated.h"
#include "dump/dump_schema.h"

/* ------------------------------------------------------------- parameters */

dfl_attnmap_params dfl_attnmap_params_default(void)
{
    dfl_attnmap_params p;
    memset(&p, 0, sizeof p);
    p.layer = DFL_ATTNMAP_FIRST;
    p.head = DFL_ATTNMAP_FIRST;
    p.map = DFL_ATTN_AUTO;
    p.cmap = DFL_CMAP_VIRIDIS;
    p.scale = DFL_SCALE_LINEAR;
    p.pool = DFL_POOL_MEAN;
    p.rows[0] = p.rows[1] = p.cols[0] = p.cols[1] = -1;
    p.token_labels = 1;
    p.caption = -1;
    return p;
}

static const char *const map_names[] = {"auto", "map1", "map2", "diff", "all"};

const char *dfl_attn_map_name(dfl_attn_map m)
{
    return (unsigned)m < 5 ? map_names[m] : "?";
}

dfl_status dfl_attn_map_parse(const char *text, dfl_attn_map *out, dfl_error *err)
{
    int i = dfl__name_index(text, map_names, 5);
    if (i < 0) return dfl__fail(err, DFL_ERR_USAGE, "--map: '%s' is not map1, map2, diff or all", text);
    *out = (dfl_attn_map)i;
    return DFL_OK;
}

static int parse_pos(const char *s, const char *end, int64_t *out)
{
    if (s == end) {
        *out = -1;
        return 1;
    }
    int64_t v = 0;
    for (const char *c = s; c < end; c++) {
        if (*c < '0' || *c > '9' || v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (*c - '0');
    }
    *out = v;
    return 1;
}

dfl_status dfl_attnmap_parse_range(const char *flag, const char *text, int64_t out[2], dfl_error *err)
{
    const char *colon = strchr(text, ':');
    if (!colon || !parse_pos(text, colon, &out[0]) || !parse_pos(colon + 1, colon + strlen(colon), &out[1]) ||
        (out[0] >= 0 && out[1] >= 0 && out[1] <= out[0]))
        return dfl__fail(err, DFL_ERR_USAGE,
                         "%s: '%s' is not a range A:B of positions with A < B (either may be empty)", flag, text);
    return DFL_OK;
}

/* ---------------------------------------------------- one dump's sample */

static void side_free(side *d)
{
    dfl_dump_close(d->r);
    free(d->model_type);
    dfl_dump_tokens_free(&d->tk);
    dfl_dump_attn_free(&d->at);
    free(d->lambda);
    memset(d, 0, sizeof *d);
}

/* "0-3, 5, 7-9" for a sorted list. */
static void ranges_text(const int32_t *v, int64_t n, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < n && used < cap; i++) {
        int64_t j = i;
        while (j + 1 < n && v[j + 1] == v[j] + 1)
            j++;
        if (j > i)
            used += (size_t)snprintf(buf + used, cap - used, "%s%d-%d", i ? ", " : "", v[i], v[j]);
        else
            used += (size_t)snprintf(buf + used, cap - used, "%s%d", i ? ", " : "", v[i]);
        i = j;
    }
    if (n == 0) snprintf(buf, cap, "none");
}

/* --caption: caption c of image sample d->s (text/NNN/: tokens, token text and the text
 * tower's maps, laid out as a text dump's sample) becomes the sample drawn. */
static dfl_status caption_sample(side *d, const char *path, int64_t c, dfl_error *err)
{
    int image = !strcmp(d->model_type, "diffclip") || !strcmp(d->model_type, "clip");
    if (!image) return dfl__fail(err, DFL_ERR_USAGE, "--caption: %s is not a DiffCLIP or CLIP dump", path);
    snprintf(d->cap_group, sizeof d->cap_group, "%s/" DFL_DS_TEXT_GROUP, d->s->group, (size_t)c);
    char p[128];
    snprintf(p, sizeof p, "%s/" DFL_DS_ATTN_MAP1, d->cap_group);
    if (!dfl_dump_exists(d->r, p)) {
        int64_t n = 0;
        for (;; n++) {
            snprintf(p, sizeof p, "%s/" DFL_DS_TEXT_GROUP "/" DFL_DS_ATTN_MAP1, d->s->group, (size_t)n);
            if (!dfl_dump_exists(d->r, p)) break;
        }
        char have[48] = "none";
        if (n) snprintf(have, sizeof have, "captions 0..%lld", (long long)(n - 1));
        return dfl__fail(err, DFL_ERR_RANGE, "%s: sample '%s' has no caption %lld with text-tower maps (%s)", path,
                         d->s->id, (long long)c, have);
    }
    snprintf(d->cap_id, sizeof d->cap_id, "%s, caption %lld", d->s->id, (long long)c);
    d->cap.index = d->s->index;
    d->cap.id = d->cap_id;
    d->cap.group = d->cap_group;
    d->s = &d->cap;
    return DFL_OK;
}

static dfl_status side_open(side *d, const char *path, const char *sample, int64_t caption, const char *label,
                            dfl_error *err)
{
    dfl_status s = dfl_dump_open(path, &d->r, err);
    if (s) return s;
    if (!sample) {
        if (dfl_dump_sample_count(d->r) == 0) return dfl__fail(err, DFL_ERR_RANGE, "%s: the dump has no samples", path);
        d->s = dfl_dump_sample_at(d->r, 0);
    } else if ((s = dfl_dump_sample_find(d->r, sample, &d->s, err))) {
        return s;
    }
    if ((s = dfl_dump_get_attr_str(d->r, "", "model_type", &d->model_type, err))) return s;
    d->is_diff = strcmp(d->model_type, "llama") != 0 && strcmp(d->model_type, "clip") != 0;
    d->label = label ? label : d->model_type;
    if (caption >= 0 && (s = caption_sample(d, path, caption, err))) return s;
    if ((s = dfl_dump_tokens_read(d->r, d->s, &d->tk, err))) return s;
    if (d->tk.T < 1) return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s/tokens is empty", path, d->s->group);
    /* probe --generate: the generated rows and keys join the prompt's */
    if ((s = dfl_dump_tokens_join_generated(d->r, d->s, &d->tk, &d->gen_start, err))) return s;
    const char *lam = caption >= 0 ? DFL_DS_MODEL_TEXT_LAMBDA : DFL_DS_MODEL_LAMBDA; /* the text tower's λ */
    if (d->is_diff && dfl_dump_exists(d->r, lam) &&
        (s = dfl_dump_read_alloc(d->r, lam, DFL_H5_F32, (void **)&d->lambda, &d->nlambda, err)))
        return s;
    if ((s = dfl_dump_attn_open(d->r, d->s, d->tk.T, &d->at, err))) return s;
    if (!(d->at.maps & 1u << DFL_DUMP_MAP1))
        return dfl__fail(err, DFL_ERR_TENSOR,
                         "%s: sample '%s' (#%zu) has no attention maps (%s/map1 missing; run probe with --maps)", path,
                         d->s->id, d->s->index, d->at.group);
    return DFL_OK;
}

/* Index of user-facing layer/head number v in scale[n], or an error that says what
 * the dump has. */
static dfl_status find_index(const side *d, const char *what, const int32_t *scale, int64_t n, int64_t v, int64_t *out,
                             dfl_error *err)
{
    for (int64_t i = 0; i < n; i++)
        if (scale[i] == v) {
            *out = i;
            return DFL_OK;
        }
    char have[200];
    ranges_text(scale, n, have, sizeof have);
    return dfl__fail(err, DFL_ERR_RANGE, "%s: %s %lld was not captured in sample '%s' (the dump has %ss %s)",
                     dfl_dump_path(d->r), what, (long long)v, d->s->id, what, have);
}

static const char *map_dataset(dfl_attn_map m)
{
    return m == DFL_ATTN_MAP2 ? "map2" : m == DFL_ATTN_DIFF ? "diff" : "map1";
}

static void plan_free(plan *pl)
{
    for (int i = 0; i < pl->ntiles; i++)
        free(pl->tiles[i].v);
    for (int i = 0; i < 2; i++) {
        free(pl->ridx[i]);
        side_free(&pl->sd[i]);
    }
    free(pl->rpos);
}

static dfl_status add_tile(plan *pl, const tile *t, dfl_error *err)
{
    if (pl->ntiles >= MAX_TILES) return dfl__fail(err, DFL_ERR_USAGE, "more than %d tiles requested", MAX_TILES);
    pl->tiles[pl->ntiles++] = *t;
    return DFL_OK;
}

/* Which map each side shows when the user said `m`. */
static dfl_status resolve_map(const side *d, dfl_attn_map m, dfl_attn_map *out, dfl_error *err)
{
    if (m == DFL_ATTN_AUTO) m = d->is_diff ? DFL_ATTN_DIFF : DFL_ATTN_MAP1;
    if (m != DFL_ATTN_MAP1 && !d->is_diff)
        return dfl__fail(err, DFL_ERR_USAGE, "%s: a %s dump has only map1 (the softmax map); %s needs a Diff dump",
                         dfl_dump_path(d->r), d->model_type,
                         m == DFL_ATTN_ALL    ? "--maps all"
                         : m == DFL_ATTN_MAP2 ? "--map map2"
                                              : "--map diff");
    char p[160];
    snprintf(p, sizeof p, "%s/%s", d->at.group, map_dataset(m));
    if (m != DFL_ATTN_ALL && !dfl_dump_exists(d->r, p))
        return dfl__fail(err, DFL_ERR_TENSOR, "%s: %s: no such dataset", dfl_dump_path(d->r), p);
    *out = m;
    return DFL_OK;
}

static void lambda_text(const side *d, int64_t li, char *buf, size_t cap)
{
    buf[0] = '\0';
    int32_t layer = d->at.layers[li];
    if (d->lambda && layer >= 0 && (size_t)layer < d->nlambda)
        snprintf(buf, cap, "\xce\xbb = %.3f", (double)d->lambda[layer]);
}

/* Build the tile list from the parameters. */
static dfl_status make_tiles(plan *pl, const dfl_attnmap_params *p, char *title, size_t title_cap, dfl_error *err)
{
    int all_l = p->layer == DFL_ATTNMAP_ALL, all_h = p->head == DFL_ATTNMAP_ALL, all_m = p->map == DFL_ATTN_ALL;
    if (all_l + all_h + all_m > 1)
        return dfl__fail(err, DFL_ERR_USAGE, "choose one of --layers all, --heads all and --maps all");
    if (p->delta && pl->nsides < 2) return dfl__fail(err, DFL_ERR_USAGE, "--delta needs --vs OTHER.h5");
    if (p->head == DFL_ATTNMAP_MEAN && all_h) return dfl__fail(err, DFL_ERR_USAGE, "--head is either mean or all");

    const side *a = &pl->sd[0];
    /* items along the grid: the layers, heads or maps listed */
    int64_t nitems = all_l ? a->at.Ls : all_h ? a->at.Hs : all_m ? 3 : 1;
    dfl_attn_map maps[2];
    for (int k = 0; k < pl->nsides; k++) {
        dfl_status s = resolve_map(&pl->sd[k], p->map, &maps[k], err);
        if (s) return s;
    }

    /* layer and head indices per side for a fixed (non-"all") choice */
    int64_t li[2] = {0, 0}, hi[2] = {0, 0};
    for (int k = 0; k < pl->nsides; k++) {
        const side *d = &pl->sd[k];
        int64_t lv = p->layer == DFL_ATTNMAP_FIRST || all_l ? d->at.layers[0] : p->layer;
        int64_t hv = p->head == DFL_ATTNMAP_FIRST || all_h ? d->at.heads[0] : p->head;
        dfl_status s;
        if (k == 1 && (p->layer == DFL_ATTNMAP_FIRST || all_l)) lv = pl->sd[0].at.layers[li[0]];
        if (k == 1 && (p->head == DFL_ATTNMAP_FIRST || all_h)) hv = pl->sd[0].at.heads[hi[0]];
        if ((s = find_index(d, "layer", d->at.layers, d->at.Ls, lv, &li[k], err))) return s;
        if (p->head == DFL_ATTNMAP_MEAN)
            hi[k] = -1;
        else if ((s = find_index(d, "head", d->at.heads, d->at.Hs, hv, &hi[k], err)))
            return s;
    }

    int rows_of_sides = pl->nsides == 2 && !p->delta ? 2 : 1;
    for (int row = 0; row < rows_of_sides; row++)
        for (int64_t it = 0; it < nitems; it++) {
            tile t;
            memset(&t, 0, sizeof t);
            int ks[2] = {row, 1};
            int nk = p->delta ? 2 : 1;
            char item[64] = "", lam[32] = "";
            for (int q = 0; q < nk; q++) {
                int k = ks[q];
                const side *d = &pl->sd[k];
                term *tm = &t.t[q];
                tm->side = k;
                tm->map = all_m ? (dfl_attn_map)(DFL_ATTN_MAP1 + it) : maps[k];
                tm->li = li[k];
                tm->hi = hi[k];
                tm->coef = q == 0 ? 1.0 : -1.0;
                dfl_status s;
                if (all_l &&
                    (s = find_index(d, "layer", d->at.layers, d->at.Ls, pl->sd[0].at.layers[it], &tm->li, err)))
                    return s;
                if (all_h && (s = find_index(d, "head", d->at.heads, d->at.Hs, pl->sd[0].at.heads[it], &tm->hi, err)))
                    return s;
                if (all_m && !d->is_diff)
                    return dfl__fail(err, DFL_ERR_USAGE, "%s: --maps all needs a Diff dump (a %s dump has only map1)",
                                     dfl_dump_path(d->r), d->model_type);
                if (tm->map == DFL_ATTN_DIFF) t.diverging = 1;
            }
            t.nt = nk;
            if (p->delta) t.diverging = 1;
            const side *d0 = &pl->sd[t.t[0].side];
            if (all_l) {
                lambda_text(d0, t.t[0].li, lam, sizeof lam);
                snprintf(item, sizeof item, "layer %d%s%s", d0->at.layers[t.t[0].li], lam[0] ? " \xc2\xb7 " : "", lam);
            } else if (all_h) {
                snprintf(item, sizeof item, "head %d", d0->at.heads[t.t[0].hi]);
            } else if (all_m) {
                snprintf(item, sizeof item, "%s",
                         it == 0   ? "map1"
                         : it == 1 ? "map2"
                                   : "diff = map1 \xe2\x88\x92 \xce\xbb\xc2\xb7map2");
            }
            if (p->delta)
                snprintf(t.title, sizeof t.title, "%s \xe2\x88\x92 %s%s%s", pl->sd[0].label, pl->sd[1].label,
                         item[0] ? " \xc2\xb7 " : "", item);
            else if (pl->nsides == 2)
                snprintf(t.title, sizeof t.title, "%s%s%s", d0->label, item[0] ? " \xc2\xb7 " : "", item);
            else
                snprintf(t.title, sizeof t.title, "%s", item);
            dfl_status s = add_tile(pl, &t, err);
            if (s) return s;
        }
    pl->grid_rows = rows_of_sides;
    pl->grid_cols = (int)nitems;
    if (rows_of_sides == 2 && nitems == 1) { /* one map each: side by side */
        pl->grid_rows = 1;
        pl->grid_cols = 2;
    } else if (rows_of_sides == 1 && nitems > 4) {
        pl->grid_cols = nitems <= 8 ? 4 : (int)ceil(sqrt((double)nitems));
        pl->grid_rows = (int)((nitems + pl->grid_cols - 1) / pl->grid_cols);
    }

    /* the figure's title */
    const side *d = &pl->sd[0];
    char who[96], lay[48], hd[48], mp[64], lam[32] = "";
    if (p->delta)
        snprintf(who, sizeof who, "%s \xe2\x88\x92 %s", pl->sd[0].label, pl->sd[1].label);
    else if (pl->nsides == 2)
        snprintf(who, sizeof who, "%s vs %s", pl->sd[0].label, pl->sd[1].label);
    else
        snprintf(who, sizeof who, "%s", d->label);
    if (all_l)
        snprintf(lay, sizeof lay, "all layers");
    else
        snprintf(lay, sizeof lay, "layer %d", d->at.layers[li[0]]);
    if (all_h)
        snprintf(hd, sizeof hd, "all heads");
    else if (p->head == DFL_ATTNMAP_MEAN)
        snprintf(hd, sizeof hd, "mean of %lld heads", (long long)d->at.Hs);
    else
        snprintf(hd, sizeof hd, "head %d", d->at.heads[hi[0]]);
    if (all_m)
        snprintf(mp, sizeof mp, "map1 | map2 | diff");
    else if (maps[0] == DFL_ATTN_DIFF)
        snprintf(mp, sizeof mp, "diff map");
    else if (maps[0] == DFL_ATTN_MAP1 && !d->is_diff)
        snprintf(mp, sizeof mp, "softmax map");
    else
        snprintf(mp, sizeof mp, "%s", map_dataset(maps[0]));
    if (pl->nsides == 2 && maps[0] != maps[1])
        snprintf(mp + strlen(mp), sizeof mp - strlen(mp), " / %s",
                 maps[1] == DFL_ATTN_DIFF ? "diff map" : "softmax map");
    if (!all_l) {
        for (int k = 0; k < pl->nsides && !lam[0]; k++)
            lambda_text(&pl->sd[k], li[k], lam, sizeof lam);
    }
    snprintf(title, title_cap, "%s \xc2\xb7 sample %s%s(#%zu) \xc2\xb7 %s \xc2\xb7 %s \xc2\xb7 %s%s%s", who, d->s->id,
             d->s->id[0] ? " " : "", d->s->index, lay, hd, mp, lam[0] ? " \xc2\xb7 " : "", lam);
    return DFL_OK;
}

/* ------------------------------------------------------- rows, cols, size */

static dfl_status choose_rows(plan *pl, const dfl_attnmap_params *p, dfl_error *err)
{
    const side *a = &pl->sd[0];
    int64_t lo = p->has_rows && p->rows[0] >= 0 ? p->rows[0] : 0;
    int64_t hi = p->has_rows && p->rows[1] >= 0 ? p->rows[1] : a->tk.T;
    int64_t c0 = p->has_cols && p->cols[0] >= 0 ? p->cols[0] : 0;
    int64_t c1 = p->has_cols && p->cols[1] >= 0 ? p->cols[1] : a->tk.T;
    if (c1 > a->tk.T) c1 = a->tk.T;
    if (c0 >= c1) {
        /* quote the range as typed, not as clipped to the sample */
        char typed[64] = "", hi_txt[24] = "";
        if (p->cols[1] >= 0) snprintf(hi_txt, sizeof hi_txt, "%lld", (long long)p->cols[1]);
        if (p->cols[0] >= 0)
            snprintf(typed, sizeof typed, "%lld:%s", (long long)p->cols[0], hi_txt);
        else
            snprintf(typed, sizeof typed, ":%s", hi_txt);
        return dfl__fail(err, DFL_ERR_RANGE, "--cols %s selects no keys (the sample has %lld tokens, keys 0:%lld)",
                         typed, (long long)a->tk.T, (long long)a->tk.T);
    }
    pl->c0 = c0;
    pl->nc = c1 - c0;
    pl->rpos = dfl__alloc_array((size_t)a->at.R, sizeof *pl->rpos);
    for (int k = 0; k < pl->nsides; k++)
        pl->ridx[k] = dfl__alloc_array((size_t)a->at.R, sizeof *pl->ridx[k]);
    if (!pl->rpos || !pl->ridx[0] || (pl->nsides == 2 && !pl->ridx[1]))
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    pl->nr = 0;
    for (int64_t i = 0; i < a->at.R; i++) {
        if (a->at.rows[i] < lo || a->at.rows[i] >= hi) continue;
        pl->rpos[pl->nr] = a->at.rows[i];
        pl->ridx[0][pl->nr] = i;
        if (pl->nsides == 2) {
            const side *b = &pl->sd[1];
            int64_t j = -1;
            for (int64_t q = 0; q < b->at.R; q++)
                if (b->at.rows[q] == a->at.rows[i]) j = q;
            if (j < 0)
                return dfl__fail(err, DFL_ERR_RANGE, "%s: query row %d is captured in %s but not here",
                                 dfl_dump_path(b->r), a->at.rows[i], dfl_dump_path(a->r));
            pl->ridx[1][pl->nr] = j;
        }
        pl->nr++;
    }
    if (pl->nr == 0) {
        char have[200];
        ranges_text(a->at.rows, a->at.R, have, sizeof have);
        return dfl__fail(err, DFL_ERR_RANGE, "%s: --rows %lld:%lld selects none of the captured query rows (%s)",
                         dfl_dump_path(a->r), (long long)lo, (long long)hi, have);
    }
    /* a dump that captured only some rows draws them as strips */
    pl->strips = a->at.R < a->tk.T || (pl->nsides == 2 && pl->sd[1].at.R < pl->sd[1].tk.T);
    return DFL_OK;
}

/* Pooled grid and cell sizes for a tile whose longer side gets `size` pixels. */
static void choose_size(plan *pl, int size)
{
    int64_t nr = pl->nr, nc = pl->nc, S = size;
    if (pl->strips) {
        pl->pw = nc > S ? S : nc;
        pl->cell_w = nc > S ? 1 : (int)(S / nc);
        if (nr * 2 <= S) {
            pl->ph = nr;
            int64_t h = S / 2 / nr;
            pl->cell_h = (int)(h > 48 ? 48 : h < 1 ? 1 : h);
        } else {
            pl->ph = nr > S ? S : nr;
            pl->cell_h = 1;
        }
        return;
    }
    int64_t k = nr > nc ? nr : nc;
    if (k <= S) {
        pl->ph = nr;
        pl->pw = nc;
        pl->cell_w = pl->cell_h = (int)(S / k);
    } else {
        pl->ph = (nr * S + k / 2) / k;
        pl->pw = (nc * S + k / 2) / k;
        if (pl->ph < 1) pl->ph = 1;
        if (pl->pw < 1) pl->pw = 1;
        pl->cell_w = pl->cell_h = 1;
    }
}

/* ------------------------------------------------------------------ reading */

/* Rows per read: a multiple of the maps' tile rows (32 from probe). 64 rows of 4096 keys
 * (1 MB) stay in a core's cache between decoding and pooling and still give the chunk
 * decoder up to 16 chunks to share among the cores. */
#define BLOCK_ROWS 64

typedef struct reader_set {
    dfl_dump_slab *slab[2][4]; /* [side][map] opened on demand */
    float *acc, *buf;          /* [BLOCK_ROWS][nc] a block of rows, rows as wide as read */
    int64_t valid[BLOCK_ROWS]; /* keys (from c0) each row of the block sees */
} reader_set;

static void reader_set_free(reader_set *rs)
{
    for (int k = 0; k < 2; k++)
        for (int m = 0; m < 4; m++)
            dfl_dump_slab_close(rs->slab[k][m]);
    free(rs->acc);
    free(rs->buf);
}

static dfl_status slab_for(plan *pl, reader_set *rs, int k, dfl_attn_map m, dfl_dump_slab **out, dfl_error *err)
{
    if (!rs->slab[k][m]) {
        char path[160];
        snprintf(path, sizeof path, "%s/%s", pl->sd[k].at.group, map_dataset(m));
        dfl_status s = dfl_dump_slab_open(pl->sd[k].r, path, &rs->slab[k][m], err);
        if (s) return s;
        const dfl_dump_dset_info *in = dfl_dump_slab_info(rs->slab[k][m]);
        const side *d = &pl->sd[k];
        /* map2 of a Motif GDA dump holds one map per noise group (dump_sample.h, checked there) */
        int64_t heads = m == DFL_ATTN_MAP2 ? in->dims[1] : d->at.Hs;
        if (in->ndim != 4 || in->dims[0] != d->at.Ls || in->dims[1] != heads || in->dims[2] != d->at.R ||
            in->dims[3] != d->tk.T)
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: shape differs from map1's [%lld, %lld, %lld, %lld]",
                             dfl_dump_path(d->r), path, (long long)d->at.Ls, (long long)d->at.Hs, (long long)d->at.R,
                             (long long)d->tk.T);
    }
    *out = rs->slab[k][m];
    return DFL_OK;
}

/* Rows [r0, r0 + n) of the shown rows, keys [c0, c0 + w), for one side's map/layer/head
 * into out [n][w]. Consecutive R indices are read as one box. */
static dfl_status read_rows(plan *pl, dfl_dump_slab *sl, int k, int64_t li, int64_t hi, int64_t r0, int64_t n,
                            int64_t w, float *out, dfl_error *err)
{
    const int64_t *ridx = pl->ridx[k];
    for (int64_t i = 0; i < n;) {
        int64_t j = i + 1;
        while (j < n && ridx[r0 + j] == ridx[r0 + j - 1] + 1)
            j++;
        int64_t start[4] = {li, hi, ridx[r0 + i], pl->c0}, count[4] = {1, 1, j - i, w};
        dfl_status s = dfl_dump_slab_read_f32(sl, start, count, out + i * w, err);
        if (s) return s;
        i = j;
    }
    return DFL_OK;
}

/* Read, combine and pool one tile, block by block. Keys past a row's query position
 * are the masked future: the pool never sees them, and no block reads keys beyond
 * what its last row sees (probe does not even store those tiles). */
static dfl_status read_tile(plan *pl, reader_set *rs, tile *t, dfl_pool_mode mode, dfl_error *err)
{
    size_t bn;
    if (!dfl__mul_ok((size_t)BLOCK_ROWS, (size_t)pl->nc, &bn)) return dfl__fail(err, DFL_ERR_NOMEM, "map too wide");
    /* direct: one map of one head, read straight into acc; else a weighted sum via buf */
    int direct = t->nt == 1 && t->t[0].hi >= 0 && t->t[0].coef == 1.0;
    size_t pn = (size_t)pl->ph * (size_t)pl->pw;
    if ((!rs->acc && !(rs->acc = dfl__alloc_array(bn, sizeof *rs->acc))) ||
        (!direct && !rs->buf && !(rs->buf = dfl__alloc_array(bn, sizeof *rs->buf))) ||
        !(t->v = dfl__alloc_array(pn, sizeof *t->v)))
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    dfl_pool *pool = NULL;
    dfl_status s = dfl_pool_create(pl->nr, pl->nc, pl->ph, pl->pw, mode, &pool, err);
    float *acc = rs->acc;
    for (int64_t r0 = 0; !s && r0 < pl->nr; r0 += BLOCK_ROWS) {
        int64_t n = pl->nr - r0 < BLOCK_ROWS ? pl->nr - r0 : BLOCK_ROWS, w = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = (int64_t)pl->rpos[r0 + i] + 1 - pl->c0;
            rs->valid[i] = v < 0 ? 0 : v > pl->nc ? pl->nc : v;
            if (rs->valid[i] > w) w = rs->valid[i];
        }
        if (w == 0) continue; /* the whole block lies in the future of the crop */
        size_t cnt = (size_t)n * (size_t)w;
        if (!direct) memset(acc, 0, cnt * sizeof *acc);
        for (int q = 0; !s && q < t->nt; q++) {
            const term *tm = &t->t[q];
            const side *d = &pl->sd[tm->side];
            dfl_dump_slab *sl = NULL;
            if ((s = slab_for(pl, rs, tm->side, tm->map, &sl, err))) break;
            dfl_dump_map dm = (dfl_dump_map)(tm->map - DFL_ATTN_MAP1);
            if (direct) {
                s = read_rows(pl, sl, tm->side, tm->li, dfl_dump_attn_head_index(&d->at, dm, tm->hi), r0, n, w, acc,
                              err);
                break;
            }
            int64_t h0 = tm->hi >= 0 ? tm->hi : 0, h1 = tm->hi >= 0 ? tm->hi + 1 : d->at.Hs;
            float c = (float)(tm->coef / (double)(h1 - h0));
            for (int64_t h = h0; !s && h < h1; h++) {
                if ((s = read_rows(pl, sl, tm->side, tm->li, dfl_dump_attn_head_index(&d->at, dm, h), r0, n, w, rs->buf,
                                   err)))
                    break;
                for (size_t i = 0; i < cnt; i++)
                    acc[i] += c * rs->buf[i];
            }
        }
        if (!s) dfl_pool_rows_valid(pool, r0, n, acc, w, rs->valid);
    }
    if (!s) dfl_pool_result(pool, t->v);
    dfl_pool_destroy(pool);
    return s;
}

/* ---------------------------------------------------------------- limits */

/* Robust limits over all tiles: the 99.5th percentile of the values (of |v| when
 * diverging), leaving out pooled columns that hold a bos key, whose sink would
 * otherwise wash the rest of the map out. */
static dfl_status choose_limits(plan *pl, const dfl_attnmap_params *p, dfl_error *err)
{
    int diverging = 0;
    for (int i = 0; i < pl->ntiles; i++)
        diverging |= pl->tiles[i].diverging;
    size_t per = (size_t)pl->ph * (size_t)pl->pw, total;
    if (!dfl__mul_ok(per, (size_t)pl->ntiles, &total)) return dfl__fail(err, DFL_ERR_NOMEM, "too many pixels");
    /* columns of the pooled grid touched by a bos key */
    uint8_t *bos_col = calloc((size_t)pl->pw, 1);
    float *vals = dfl__alloc_array(total ? total : 1, sizeof *vals);
    if (!bos_col || !vals) {
        free(bos_col);
        free(vals);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    const side *a = &pl->sd[0];
    for (int64_t j = 0; j < pl->nc; j++) {
        if (a->tk.segments[pl->c0 + j] != 1) continue;
        int64_t x = j * pl->pw / pl->nc;
        bos_col[x] = 1;
        if (x + 1 < pl->pw && (j + 1) * pl->pw > (x + 1) * pl->nc) bos_col[x + 1] = 1;
    }
    size_t n = 0, nall = 0;
    double lo = INFINITY, hi = -INFINITY, minpos = INFINITY;
    for (int t = 0; t < pl->ntiles; t++)
        for (size_t i = 0; i < per; i++) {
            float v = pl->tiles[t].v[i];
            if (isnan(v)) continue;
            nall++;
            if (v < lo) lo = v;
            if (v > hi) hi = v;
            if (v > 0 && v < minpos) minpos = v;
            if (!bos_col[i % (size_t)pl->pw]) vals[n++] = diverging ? fabsf(v) : v;
        }
    if (n == 0) /* only bos columns (or nothing) shown: use them all */
        for (int t = 0; t < pl->ntiles; t++)
            for (size_t i = 0; i < per; i++) {
                float v = pl->tiles[t].v[i];
                if (!isnan(v)) vals[n++] = diverging ? fabsf(v) : v;
            }
    double q = n ? dfl_quantile_select(vals, n, 0.995) : 1.0;
    free(vals);
    free(bos_col);
    if (nall == 0) lo = hi = 0;
    pl->data_min = lo;
    pl->data_max = hi;

    dfl_norm *nm = &pl->norm;
    memset(nm, 0, sizeof *nm);
    nm->scale = p->scale;
    nm->diverging = diverging;
    pl->cmap = diverging ? DFL_CMAP_RDBU : p->cmap;
    pl->robust = !p->has_vmin && !p->has_vmax;
    if (diverging) {
        double m = q > 0 ? q : fmax(fabs(lo), fabs(hi));
        if (p->has_vmax || p->has_vmin) m = fmax(p->has_vmax ? fabs(p->vmax) : 0, p->has_vmin ? fabs(p->vmin) : 0);
        nm->vmax = m > 0 ? m : 1.0;
        nm->vmin = -nm->vmax;
    } else {
        double vmax = q > 0 ? q : (hi > 0 ? hi : 1.0);
        double vmin = lo < 0 ? lo : 0.0;
        if (p->scale == DFL_SCALE_LOG) {
            vmin = fmax(vmax * 1e-4, isfinite(minpos) ? minpos : vmax * 1e-4);
            if (vmin >= vmax) vmin = vmax * 1e-4;
        }
        if (p->has_vmax) vmax = p->vmax;
        if (p->has_vmin) vmin = p->vmin;
        nm->vmin = vmin;
        nm->vmax = vmax;
    }
    dfl_status s = dfl_norm_check(nm, err);
    /* limits the user gave are the user's to fix; limits taken from maps that hold
     * ±Inf are the data's, and the flags are the way out */
    if (s && (p->has_vmin || p->has_vmax)) return dfl__context(err, "--vmin/--vmax");
    if (s)
        return dfl__fail(err, DFL_ERR_FORMAT,
                         "the colour limits taken from the maps are not finite (values from %g to %g): the maps hold "
                         "infinite values; give --vmin and --vmax to draw them",
                         lo, hi);
    pl->extend_high = nall && hi > nm->vmax;
    pl->extend_low = nall && lo < nm->vmin;
    return DFL_OK;
}

/* ------------------------------------------------------------------- run */

/* The checks that need no reading: an output that is an input, a bad extension or an
 * existing output fails before any dump is opened. */
static dfl_status check_params(const dfl_attnmap_params *p, dfl_error *err)
{
    if (!p->dump_path || !p->out_path) return dfl__fail(err, DFL_ERR_USAGE, "a dump and an output path are required");
    if (p->size < 0 || p->size > 8192) return dfl__fail(err, DFL_ERR_USAGE, "--size %d is outside 16 to 8192", p->size);
    if (p->labels[0] && !p->vs_path) return dfl__fail(err, DFL_ERR_USAGE, "--labels needs --vs");
    dfl_format fmt;
    const char *inputs[2] = {p->dump_path, p->vs_path};
    dfl_status s = dfl__check_not_input(p->out_path, inputs, 2, err);
    if (!s) s = dfl_format_of_path(p->out_path, &fmt, err);
    if (s) return s;
    if (!(p->width_in >= 0 && p->width_in <= 100) || !(p->dpi >= 0 && p->dpi <= 10000) ||
        !(p->px_scale >= 0 && p->px_scale <= 64))
        return dfl__fail(err, DFL_ERR_USAGE, "--width, --dpi or --pixel-scale out of range");
    return dfl__check_overwrite(p->out_path, p->overwrite, err);
}

/* The chosen sample of the dump and of --vs, which must hold the same prompt. */
static dfl_status open_sides(plan *pl, const dfl_attnmap_params *p, dfl_error *err)
{
    pl->nsides = p->vs_path ? 2 : 1;
    dfl_status s = side_open(&pl->sd[0], p->dump_path, p->sample, p->caption, p->labels[0], err);
    if (s || !p->vs_path) return s;
    if ((s = side_open(&pl->sd[1], p->vs_path, p->sample, p->caption, p->labels[1], err))) return s;
    const side *a = &pl->sd[0], *b = &pl->sd[1];
    if (a->tk.T != b->tk.T)
        return dfl__fail(err, DFL_ERR_TENSOR,
                         "--vs: the samples' tokens differ: %s sample '%s' has %lld tokens, %s sample '%s' has %lld",
                         p->dump_path, a->s->id, (long long)a->tk.T, p->vs_path, b->s->id, (long long)b->tk.T);
    /* generated tokens may differ between the models: the prompts must not */
    int64_t same = a->gen_start > 0 && a->gen_start == b->gen_start ? a->gen_start : a->tk.T;
    for (int64_t i = 0; i < same; i++)
        if (a->tk.tokens[i] != b->tk.tokens[i])
            return dfl__fail(
                err, DFL_ERR_TENSOR,
                "--vs: the samples' tokens differ at position %lld (%d in %s, %d in %s): not the same prompt",
                (long long)i, a->tk.tokens[i], p->dump_path, b->tk.tokens[i], p->vs_path);
    return DFL_OK;
}

/* The pooled size of the tiles. Returns the figure's width in units under --width
 * (72 per inch, text at 8 pt), 0 without it. */
static int size_tiles(plan *pl, const dfl_attnmap_params *p)
{
    int size = p->size > 0 ? p->size : pl->ntiles > 1 ? 512 : 1024;
    int fit_w = 0;
    if (p->width_in > 0) {
        /* the maps get what the labels, bands and colour bar leave of the width; two
         * rounds, as token labels come and go with the cell size */
        fit_w = (int)lround(p->width_in * 72.0);
        choose_size(pl, 512);
        for (int round = 0; round < 2; round++) {
            pl->fit_mw = dfl__attnmap_fit_map_width(pl, p, fit_w);
            /* pooled to what 300 dpi can show (size is the longer side), never more
             * than the map has: the cells are then stretched to the units */
            int64_t want = (int64_t)pl->fit_mw * 300 / 72;
            if (!pl->strips && pl->nr > pl->nc) want = want * pl->nr / pl->nc;
            size = (int)(want > 8192 ? 8192 : want);
            choose_size(pl, size < 16 ? 16 : size);
        }
    }
    if (size < 16) size = 16;
    choose_size(pl, size);
    return fit_w;
}

dfl_status dfl_attnmap_run(const dfl_attnmap_params *p, dfl_attnmap_report *rep, dfl_error *err)
{
    double t0 = dfl_clock_seconds();
    dfl_status s = check_params(p, err);
    if (s) return s;
    /* DiffCLIP / CLIP dumps: the map over the image (attnmap_image.c) */
    if (p->caption < 0 && dfl__attnmap_is_image(p->dump_path)) return dfl__attnmap_image_run(p, rep, err);
    plan *pl = calloc(1, sizeof *pl);
    if (!pl) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    reader_set rs;
    memset(&rs, 0, sizeof rs);
    char title[384];
    double read_seconds = 0;
    if ((s = open_sides(pl, p, err)) || (s = make_tiles(pl, p, title, sizeof title, err)) ||
        (s = choose_rows(pl, p, err)))
        goto done;
    int fit_w = size_tiles(pl, p);
    double tr = dfl_clock_seconds();
    for (int i = 0; !s && i < pl->ntiles; i++)
        s = read_tile(pl, &rs, &pl->tiles[i], p->pool, err);
    read_seconds = dfl_clock_seconds() - tr;
    if (s || (s = choose_limits(pl, p, err))) goto done;
    if ((s = dfl__attnmap_draw(pl, p, title, sizeof title, fit_w, rep, err))) goto done;
    if (rep) {
        rep->tiles = pl->ntiles;
        rep->vmin = pl->norm.vmin;
        rep->vmax = pl->norm.vmax;
        rep->robust = pl->robust;
        rep->read_seconds = read_seconds;
        rep->total_seconds = dfl_clock_seconds() - t0;
    }
done:
    reader_set_free(&rs);
    plan_free(pl);
    free(pl);
    return s;
}
