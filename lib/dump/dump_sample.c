/* dump_sample.c — a sample's tokens and the geometry of its maps, validated once for
 * every figure that draws them (dump_sample.h). */
#include "dump/dump_sample.h"
#include "dump/dump_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const map_names[DFL_DUMP_NMAPS] = {"map1", "map2", "diff"};

const char *dfl_dump_map_name(dfl_dump_map m)
{
    return (unsigned)m < DFL_DUMP_NMAPS ? map_names[m] : "?";
}

/* ----------------------------------------------------------------- scales */

dfl_status dfl_dump_read_scale(const dfl_dump_reader *r, const char *attn, const char *name, int64_t n, int32_t **out,
                               dfl_error *err)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", attn, name);
    int32_t *v = dfl__alloc_array((size_t)(n > 0 ? n : 1), sizeof *v); /* [n] */
    *out = NULL;
    if (!v) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!dfl_dump_exists(r, path)) {
        for (int64_t i = 0; i < n; i++)
            v[i] = (int32_t)i;
        *out = v;
        return DFL_OK;
    }
    dfl_status s = dfl_dump_read(r, path, DFL_H5_I32, v, (size_t)n, err);
    if (s) {
        free(v);
        return dfl__context(err, "scale of the maps");
    }
    /* a scale maps an index to a layer, head or query position: lookups and the
     * drawing of rows as strips need them in order, each once */
    for (int64_t i = 1; i < n; i++)
        if (v[i] <= v[i - 1]) {
            s = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s is not strictly ascending (%d after %d at index %lld)",
                          dfl_dump_path(r), path, v[i], v[i - 1], (long long)i);
            free(v);
            return s;
        }
    *out = v;
    return DFL_OK;
}

/* ----------------------------------------------------------------- tokens */

void dfl_dump_tokens_free(dfl_dump_tokens *t)
{
    if (!t) return;
    free(t->tokens);
    free(t->segments);
    if (t->text) dfl_dump_strings_free(t->text, (size_t)t->T);
    memset(t, 0, sizeof *t);
}

dfl_status dfl_dump_tokens_read(const dfl_dump_reader *r, const dfl_dump_sample *s, dfl_dump_tokens *out,
                                dfl_error *err)
{
    memset(out, 0, sizeof *out);
    char p[160];
    size_t n = 0;
    snprintf(p, sizeof p, "%s/" DFL_DS_TOKENS, s->group);
    dfl_status st = dfl_dump_read_alloc(r, p, DFL_H5_I32, (void **)&out->tokens, &n, err);
    if (st) return st;
    out->T = (int64_t)n;
    out->segments = calloc(n ? n : 1, 1);
    if (!out->segments) st = dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    snprintf(p, sizeof p, "%s/" DFL_DS_SEGMENTS, s->group);
    if (!st && dfl_dump_exists(r, p)) st = dfl_dump_read(r, p, DFL_H5_U8, out->segments, n, err);
    snprintf(p, sizeof p, "%s/" DFL_DS_TOKEN_TEXT, s->group);
    if (!st && dfl_dump_exists(r, p)) {
        size_t nt = 0;
        st = dfl_dump_read_strings(r, p, &out->text, &nt, err);
        if (!st && nt != n) { /* labels that do not fit the tokens are no labels */
            dfl_dump_strings_free(out->text, nt);
            out->text = NULL;
        }
    }
    if (st) dfl_dump_tokens_free(out);
    return st;
}

/* ------------------------------------------------------------------- maps */

void dfl_dump_attn_free(dfl_dump_attn *a)
{
    if (!a) return;
    free(a->layers);
    free(a->heads);
    free(a->rows);
    free(a->map2_head);
    memset(a, 0, sizeof *a);
}

/* map2_head[Hs]: identity, or under attn/noise_groups [Gs] (Motif GDA) the position of
 * each stored head's noise group (/model/noise_group) on map2's head axis (Gs long). */
static dfl_status read_map2_heads(const dfl_dump_reader *r, dfl_dump_attn *a, int64_t Gs, dfl_error *err)
{
    char p[160];
    snprintf(p, sizeof p, "%s/noise_groups", a->group);
    if (!(a->map2_head = dfl__alloc_array((size_t)a->Hs, sizeof(int32_t))))
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < a->Hs; i++)
        a->map2_head[i] = (int32_t)i;
    if (!dfl_dump_exists(r, p)) {
        if (Gs != a->Hs)
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s/map2: shape differs from the other maps", dfl_dump_path(r),
                             a->group);
        return DFL_OK;
    }
    int32_t *groups = NULL, *of = NULL;
    size_t ng = 0, nh = 0;
    dfl_status st = dfl_dump_read_alloc(r, p, DFL_H5_I32, (void **)&groups, &ng, err);
    if (!st) st = dfl_dump_read_alloc(r, DFL_DS_MODEL_NOISE_GROUP, DFL_H5_I32, (void **)&of, &nh, err);
    if (!st && (int64_t)ng != Gs)
        st = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s holds %zu groups, map2 %lld", dfl_dump_path(r), p, ng,
                       (long long)Gs);
    for (int64_t i = 0; !st && i < a->Hs; i++) {
        int64_t pos = -1;
        for (size_t k = 0; a->heads[i] >= 0 && (size_t)a->heads[i] < nh && k < ng && pos < 0; k++)
            if (groups[k] == of[a->heads[i]]) pos = (int64_t)k;
        if (pos < 0)
            st = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: the noise group of head %d is not stored", dfl_dump_path(r), p,
                           a->heads[i]);
        a->map2_head[i] = (int32_t)pos;
    }
    free(groups);
    free(of);
    return st;
}

dfl_status dfl_dump_attn_open(const dfl_dump_reader *r, const dfl_dump_sample *s, int64_t T, dfl_dump_attn *out,
                              dfl_error *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->group, sizeof out->group, "%s/" DFL_DS_ATTN, s->group);
    out->T = T;
    dfl_dump_dset_info first = {0};
    int64_t Gs = -1; /* map2's head count */
    for (int m = 0; m < DFL_DUMP_NMAPS; m++) {
        char p[160];
        snprintf(p, sizeof p, "%s/%s", out->group, map_names[m]);
        if (!dfl_dump_exists(r, p)) continue;
        dfl_dump_dset_info x;
        dfl_status st = dfl_dump_dataset_info(r, p, &x, err);
        if (st) return st;
        if (x.ndim != 4 || x.dims[3] != T)
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s must be [layers, heads, rows, %lld tokens], has rank %d%s",
                             dfl_dump_path(r), p, (long long)T, x.ndim, x.ndim == 4 ? " and another key count" : "");
        if (m == DFL_DUMP_MAP2) { /* its head axis may be the noise groups' (read_map2_heads) */
            Gs = x.dims[1];
            x.dims[1] = out->maps ? first.dims[1] : x.dims[1];
        }
        if (out->maps && memcmp(x.dims, first.dims, sizeof x.dims))
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: %s: shape differs from the other maps", dfl_dump_path(r), p);
        if (!out->maps) first = x;
        out->maps |= 1u << m;
    }
    if (!out->maps) return DFL_OK;
    out->Ls = first.dims[0];
    out->Hs = first.dims[1];
    out->R = first.dims[2];
    out->f16 = first.type == DFL_H5_F16;
    dfl_status st;
    if ((st = dfl_dump_read_scale(r, out->group, "layers", out->Ls, &out->layers, err)) ||
        (st = dfl_dump_read_scale(r, out->group, "heads", out->Hs, &out->heads, err)) ||
        (st = dfl_dump_read_scale(r, out->group, "rows", out->R, &out->rows, err)) ||
        (st = read_map2_heads(r, out, Gs < 0 ? out->Hs : Gs, err))) {
        dfl_dump_attn_free(out);
        return st;
    }
    for (int64_t i = 0; i < out->R; i++)
        if (out->rows[i] < 0 || out->rows[i] >= T) {
            st = dfl__fail(err, DFL_ERR_FORMAT, "%s: %s/rows lists row %d outside the %lld tokens", dfl_dump_path(r),
                           out->group, out->rows[i], (long long)T);
            dfl_dump_attn_free(out);
            return st;
        }
    return DFL_OK;
}
