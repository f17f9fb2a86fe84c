/* dump_join.c — sample groups of part dumps copied into one dump (H5Ocopy), with
 * their dimension scales attached anew. */
#include "dump/dump_join.h"

#include <errno.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/atomic.h"
#include "dump/dump.h"
#include "dump/dump_schema.h"

#define PATH_MAX_LEN 256

/* One scale attachment inside a sample group: dataset, dimension, scale (paths
 * relative to the sample group). */
typedef struct attachment {
    char dset[PATH_MAX_LEN], scale[PATH_MAX_LEN];
    unsigned dim;
} attachment;

typedef struct attach_list {
    attachment *items;
    size_t n, cap;
    size_t prefix;    /* length of the sample group's absolute path + '/' */
    const char *dset; /* the dataset being iterated */
    unsigned dim;
    int failed;
} attach_list;

/* ---------------------------------------------------------- collecting */

static herr_t on_scale(hid_t dset, unsigned dim, hid_t scale, void *data)
{
    (void)dset;
    attach_list *l = data;
    char name[PATH_MAX_LEN + 64];
    ssize_t len = H5Iget_name(scale, name, sizeof name);
    if (len <= 0 || (size_t)len >= sizeof name || (size_t)len <= l->prefix) return l->failed = 1, -1;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        attachment *grown = realloc(l->items, cap * sizeof *grown);
        if (!grown) return l->failed = 1, -1;
        l->items = grown, l->cap = cap;
    }
    attachment *a = &l->items[l->n++];
    snprintf(a->dset, sizeof a->dset, "%s", l->dset);
    snprintf(a->scale, sizeof a->scale, "%s", name + l->prefix);
    a->dim = dim;
    return 0;
}

/* Link visitor: every dataset with a DIMENSION_LIST, each dimension's scales. */
static herr_t on_link(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    (void)info;
    attach_list *l = data;
    if (strlen(name) >= PATH_MAX_LEN) return l->failed = 1, -1;
    if (H5Aexists_by_name(group, name, "DIMENSION_LIST", H5P_DEFAULT) <= 0) return 0;
    hid_t ds = H5Dopen2(group, name, H5P_DEFAULT);
    if (ds < 0) return l->failed = 1, -1;
    hid_t sp = H5Dget_space(ds);
    int nd = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    H5Sclose(sp);
    l->dset = name;
    for (int d = 0; d < nd && !l->failed; d++) {
        int idx = 0;
        if (H5DSget_num_scales(ds, (unsigned)d) > 0 && H5DSiterate_scales(ds, (unsigned)d, &idx, on_scale, l) < 0)
            l->failed = 1;
    }
    H5Dclose(ds);
    return nd < 0 || l->failed ? -1 : 0;
}

/* -------------------------------------------------------------- fixing */

/* Drop the references HDF5 could not carry over, then attach every scale again. */
static int reattach(hid_t group, const attach_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        const attachment *a = &l->items[i];
        if (H5Aexists_by_name(group, a->dset, "DIMENSION_LIST", H5P_DEFAULT) > 0 &&
            H5Adelete_by_name(group, a->dset, "DIMENSION_LIST", H5P_DEFAULT) < 0)
            return 0;
        if (H5Aexists_by_name(group, a->scale, "REFERENCE_LIST", H5P_DEFAULT) > 0 &&
            H5Adelete_by_name(group, a->scale, "REFERENCE_LIST", H5P_DEFAULT) < 0)
            return 0;
    }
    for (size_t i = 0; i < l->n; i++) {
        const attachment *a = &l->items[i];
        hid_t ds = H5Dopen2(group, a->dset, H5P_DEFAULT), sc = H5Dopen2(group, a->scale, H5P_DEFAULT);
        int ok = ds >= 0 && sc >= 0 && H5DSattach_scale(ds, sc, a->dim) >= 0;
        if (ds >= 0) H5Dclose(ds);
        if (sc >= 0) H5Dclose(sc);
        if (!ok) return 0;
    }
    return 1;
}

/* ------------------------------------------------------------- joining */

typedef struct join_ctx {
    hid_t part, into_samples;
    const char *part_path, *into_path;
    dfl_status status;
    dfl_error *err;
} join_ctx;

static herr_t copy_sample(hid_t samples, const char *name, const H5L_info_t *info, void *data)
{
    (void)samples, (void)info;
    join_ctx *c = data;
    if (H5Lexists(c->into_samples, name, H5P_DEFAULT) > 0) {
        c->status = dfl__fail(c->err, DFL_ERR_FORMAT, "%s: sample %s is also in %s", c->part_path, name, c->into_path);
        return -1;
    }
    char src[64];
    snprintf(src, sizeof src, "/" DFL_DS_SAMPLES "/%s", name);
    attach_list l = {NULL, 0, 0, strlen(src) + 1, NULL, 0, 0};
    hid_t g = H5Gopen2(c->part, src, H5P_DEFAULT);
    int ok = g >= 0 && H5Lvisit(g, H5_INDEX_NAME, H5_ITER_INC, on_link, &l) >= 0 && !l.failed;
    if (g >= 0) H5Gclose(g);
    ok = ok && H5Ocopy(c->part, src, c->into_samples, name, H5P_DEFAULT, H5P_DEFAULT) >= 0;
    hid_t dst = ok ? H5Gopen2(c->into_samples, name, H5P_DEFAULT) : -1;
    ok = dst >= 0 && reattach(dst, &l);
    if (dst >= 0) H5Gclose(dst);
    free(l.items);
    if (!ok) {
        c->status = dfl__fail(c->err, DFL_ERR_HDF5, "%s: HDF5 failed to copy sample %s into %s", c->part_path, name,
                              c->into_path);
        return -1;
    }
    return 0;
}

/* Root counts over samples describe the whole dump: nonfinite_samples, the samples
 * with a nonfinite_layer attribute, is counted again over the joined samples. */
static herr_t count_nonfinite(hid_t samples, const char *name, const H5L_info_t *info, void *data)
{
    (void)info;
    if (H5Aexists_by_name(samples, name, DFL_ATTR_NONFINITE_LAYER, H5P_DEFAULT) > 0) ++*(int64_t *)data;
    return 0;
}

static int recount_root(hid_t f, hid_t samples)
{
    if (H5Aexists(f, DFL_ATTR_NONFINITE_SAMPLES) <= 0) return 1;
    int64_t n = 0;
    if (H5Literate(samples, H5_INDEX_NAME, H5_ITER_INC, NULL, count_nonfinite, &n) < 0) return 0;
    hid_t a = H5Aopen(f, DFL_ATTR_NONFINITE_SAMPLES, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &n) >= 0;
    if (a >= 0) H5Aclose(a);
    return ok;
}

/* Whether file f says it is a dump (root attribute format == "difflens-dump"). */
static int is_dump(hid_t f)
{
    if (H5Aexists(f, DFL_ATTR_FORMAT) <= 0) return 0;
    hid_t a = H5Aopen(f, DFL_ATTR_FORMAT, H5P_DEFAULT), t = H5Tcopy(H5T_C_S1);
    char *v = NULL;
    int ok = a >= 0 && t >= 0 && H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
             H5Aread(a, t, &v) >= 0 && v && !strcmp(v, DFL_DUMP_FORMAT);
    if (v) H5free_memory(v);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return ok;
}

/* The copies take at most the parts' sizes. Checked first because HDF5 1.10's H5Ocopy
 * can crash when a write fails under it (a full disk mid-copy ends in SIGSEGV). */
static dfl_status check_room(const char *into, const char *const *parts, size_t n, dfl_error *err)
{
    double need = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(parts[i], &st) != 0)
            return dfl__fail(err, DFL_ERR_IO, "%s: cannot read the part dump: %s", parts[i], strerror(errno));
        need += (double)st.st_size;
    }
    double room = dfl__free_bytes(into);
    if (room < 0 || need <= room) return DFL_OK; /* unknown: the copy will find out */
    char more[32], free_now[32];
    dfl__human_bytes(need, more, sizeof more);
    dfl__human_bytes(room, free_now, sizeof free_now);
    return dfl__fail(err, DFL_ERR_IO, "%s: joining the parts needs up to %s more, %s free: %s", into, more, free_now,
                     strerror(ENOSPC));
}

dfl_status dfl_dump_join(const char *into, const char *const *parts, size_t n, dfl_error *err)
{
    dfl_status s = check_room(into, parts, n, err);
    if (s) return s;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(into, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to open the dump for joining", into);
    hid_t samples = H5Lexists(f, DFL_DS_SAMPLES, H5P_DEFAULT) > 0
                        ? H5Gopen2(f, DFL_DS_SAMPLES, H5P_DEFAULT)
                        : H5Gcreate2(f, DFL_DS_SAMPLES, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    join_ctx c = {-1, samples, NULL, into, DFL_OK, err};
    if (samples < 0) c.status = dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to open /samples", into);
    for (size_t i = 0; i < n && !c.status; i++) {
        c.part_path = parts[i];
        c.part = H5Fopen(parts[i], H5F_ACC_RDONLY, H5P_DEFAULT);
        if (c.part < 0) {
            c.status = dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to open the part dump", parts[i]);
            break;
        }
        if (!is_dump(c.part)) {
            c.status = dfl__fail(err, DFL_ERR_FORMAT, "%s: not a difflens dump (no format attribute \"%s\")", parts[i],
                                 DFL_DUMP_FORMAT);
            H5Fclose(c.part);
            break;
        }
        /* a part whose rank ran no prompt has no /samples */
        if (H5Lexists(c.part, DFL_DS_SAMPLES, H5P_DEFAULT) > 0) {
            hid_t ps = H5Gopen2(c.part, DFL_DS_SAMPLES, H5P_DEFAULT);
            if (ps < 0 || H5Literate(ps, H5_INDEX_NAME, H5_ITER_INC, NULL, copy_sample, &c) < 0)
                if (!c.status) c.status = dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to list /samples", parts[i]);
            if (ps >= 0) H5Gclose(ps);
        }
        H5Fclose(c.part);
    }
    if (!c.status && !recount_root(f, samples))
        c.status = dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to update nonfinite_samples", into);
    if (samples >= 0) H5Gclose(samples);
    if (H5Fclose(f) < 0 && !c.status)
        c.status = dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to close the dump", into);
    return c.status;
}
