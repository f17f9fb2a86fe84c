/* dump.c — HDF5 writing for the dump schema: the file, its root attributes, sample
 * groups, whole datasets, attributes and streamed datasets (direct streams, assembled
 * and compressed here, are dump_direct.c's). */
#include "dump/dump.h"

#include <hdf5.h>
#include <hdf5_hl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"
#include "base/half.h"
#include "dump/dump_schema.h"
#include "dump/dump_writer.h"
#include "model/model.h"

/* ---------------------------------------------------------------- helpers */

static dfl_status h5fail(dfl_dump *d, dfl_error *err, const char *what, const char *name)
{
    /* HDF5's messages do not reach the user; when its sec2 driver failed on a full
     * disk or a device error, errno still says so. */
    const char *why = dfl__os_reason();
    return dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to %s '%s'%s%s", d ? d->path : "dump", what, name,
                     why ? ": " : "", why ? why : "");
}

static hid_t file_type(const dfl_dump *d, dfl_h5_type t)
{
    switch (t) {
    case DFL_H5_F32: return H5T_IEEE_F32LE;
    case DFL_H5_F16: return d->f16;
    case DFL_H5_I32: return H5T_STD_I32LE;
    case DFL_H5_U8: return H5T_STD_U8LE;
    case DFL_H5_F64: return H5T_IEEE_F64LE;
    case DFL_H5_U64: return H5T_STD_U64LE;
    case DFL_H5_U32: return H5T_STD_U32LE;
    }
    return H5T_IEEE_F32LE;
}

/* Memory type of the data callers pass (F16 is converted by us, not by HDF5's slow
 * soft conversion, so it is written as raw half bits). */
static hid_t mem_type(const dfl_dump *d, dfl_h5_type t)
{
    switch (t) {
    case DFL_H5_F32: return H5T_NATIVE_FLOAT;
    case DFL_H5_F16: return d->f16;
    case DFL_H5_I32: return H5T_NATIVE_INT32;
    case DFL_H5_U8: return H5T_NATIVE_UINT8;
    case DFL_H5_F64: return H5T_NATIVE_DOUBLE;
    case DFL_H5_U64: return H5T_NATIVE_UINT64;
    case DFL_H5_U32: return H5T_NATIVE_UINT32;
    }
    return H5T_NATIVE_FLOAT;
}

static hid_t make_f16(void)
{
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0) return t;
    /* sign bit 15, exponent 10..14, mantissa 0..9, bias 15: what h5py reads as float16 */
    if (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_precision(t, 16) < 0 || H5Tset_size(t, 2) < 0 ||
        H5Tset_ebias(t, 15) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static hid_t where(const dfl_dump *d)
{
    return d->sample >= 0 ? d->sample : d->file;
}

static int set_attr_str(hid_t obj, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
    int ok = t >= 0 && sp >= 0 && H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
             (a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 && H5Awrite(a, t, &value) >= 0;
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    return ok;
}

static int set_attr_num(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *value)
{
    hid_t sp = H5Screate(H5S_SCALAR), a = -1;
    int ok = sp >= 0 && (a = H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
             H5Awrite(a, mtype, value) >= 0;
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    return ok;
}

static int set_attr_i64(hid_t obj, const char *name, int64_t v)
{
    return set_attr_num(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

/* Link-creation properties that create missing parent groups. */
static hid_t lcpl_parents(void)
{
    hid_t p = H5Pcreate(H5P_LINK_CREATE);
    if (p >= 0) H5Pset_create_intermediate_group(p, 1);
    return p;
}

/* ------------------------------------------------------------ create/close */

/* Motif GDA: /model/noise_group i32 [H], the noise group whose map 2 each signal head
 * shares. */
static dfl_status write_noise_groups(dfl_dump *d, const dfl_config *c, dfl_error *err)
{
    int64_t H = dfl_config_analysis_heads(c);
    int32_t *g = dfl__alloc_array((size_t)H, sizeof *g);
    if (!g) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t h = 0; h < H; h++)
        g[h] = (int32_t)dfl_config_noise_group(c, h);
    dfl_status s = dfl_dump_put(d, DFL_DS_MODEL_NOISE_GROUP, DFL_H5_I32, 1, &H, g, err);
    free(g);
    return s;
}

static dfl_status write_model_group(dfl_dump *d, const dfl_model *m, dfl_error *err)
{
    const dfl_config *c = &m->config;
    /* DIFF V2 has no per-layer λ: its σ(λ) is per token (samples' lambda) */
    if (c->type == DFL_MODEL_LLAMA || c->type == DFL_MODEL_DIFF_V2) return DFL_OK;
    float *buf = dfl__alloc_array((size_t)c->num_layers * 2, sizeof(float));
    if (!buf) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    for (int64_t l = 0; l < c->num_layers; l++) {
        buf[l] = m->layers[l].lambda;
        buf[c->num_layers + l] = m->layers[l].lambda_init;
    }
    int64_t dims[1] = {c->num_layers};
    dfl_status s = dfl_dump_put(d, DFL_DS_MODEL_LAMBDA, DFL_H5_F32, 1, dims, buf, err);
    if (!s) s = dfl_dump_put(d, DFL_DS_MODEL_LAMBDA_INIT, DFL_H5_F32, 1, dims, buf + c->num_layers, err);
    free(buf);
    if (!s && dfl_config_noise_group(c, 0) >= 0) s = write_noise_groups(d, c, err);
    return s;
}

static void close_handles(dfl_dump *d)
{
    if (d->sample >= 0) H5Gclose(d->sample);
    if (d->file >= 0) H5Fclose(d->file);
    if (d->f16 >= 0) H5Tclose(d->f16);
    d->sample = d->file = d->f16 = -1;
}

static void dump_free(dfl_dump *d)
{
    free(d->path);
    free(d->tmp);
    free(d);
}

/* The file under its temporary name, before any attribute (dfl_dump_create and
 * dfl_dump_create_root). */
static dfl_status create_file(const char *path, int overwrite, dfl_dump **out, dfl_error *err)
{
    *out = NULL;
    /* HDF5 prints its error stack by default; the library never prints. And no
     * clean-up at exit: after a failed H5Fclose (full disk) HDF5's atexit handler
     * closes the half-closed file again and crashes (HDF5 1.10). We close what we
     * open; a file that failed is removed anyway. */
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    dfl_status s = dfl__check_overwrite(path, overwrite, err);
    if (s) return s;
    dfl_dump *d = calloc(1, sizeof *d);
    if (!d || !(d->path = strdup(path))) {
        free(d);
        return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    }
    d->file = d->sample = d->f16 = -1;
    d->overwrite = overwrite;
    if ((s = dfl__make_tmp(path, &d->tmp, err))) {
        dump_free(d);
        return s;
    }
    /* The temporary is already locked by atomic.c (flock); HDF5's own flock of it
     * would conflict with ours. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE);
    if (fapl >= 0) H5Pset_file_locking(fapl, 0, 1);
    /* The 1.10 file format: groups keep their links in their header and a one-chunk
     * dataset needs no chunk index, which halves the fixed cost of a sample (any
     * h5py or HDF5 >= 1.10 reads it). */
    if (fapl >= 0) H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_LATEST);
    /* Identical attributes of 64 bytes or more (the histograms' 3075 edges, 24 KB, on
     * two datasets of every sample) are stored once and shared: readers see ordinary
     * attributes. */
    if (fcpl >= 0 &&
        (H5Pset_shared_mesg_nindexes(fcpl, 1) < 0 || H5Pset_shared_mesg_index(fcpl, 0, H5O_SHMESG_ATTR_FLAG, 64) < 0)) {
        H5Pclose(fcpl);
        fcpl = -1;
    }
    d->file = H5Fcreate(d->tmp, H5F_ACC_TRUNC, fcpl >= 0 ? fcpl : H5P_DEFAULT, fapl >= 0 ? fapl : H5P_DEFAULT);
    if (fapl >= 0) H5Pclose(fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    d->f16 = make_f16();
    if (d->file < 0 || d->f16 < 0) {
        s = dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 cannot create the file", path);
        dfl_dump_abort(d);
        return s;
    }
    *out = d;
    return DFL_OK;
}

dfl_status dfl_dump_create_root(const char *path, int overwrite, const dfl_dump_root *root, dfl_dump **out,
                                dfl_error *err)
{
    dfl_dump *d;
    dfl_status s = create_file(path, overwrite, &d, err);
    if (s) return s;
    int32_t version = DFL_DUMP_FORMAT_VERSION;
    int ok = set_attr_str(d->file, DFL_ATTR_FORMAT, DFL_DUMP_FORMAT) &&
             set_attr_num(d->file, DFL_ATTR_FORMAT_VERSION, H5T_STD_I32LE, H5T_NATIVE_INT32, &version) &&
             set_attr_str(d->file, DFL_ATTR_MODEL_TYPE, root->model_type) &&
             set_attr_str(d->file, DFL_ATTR_CONFIG, root->config_text) &&
             set_attr_str(d->file, DFL_ATTR_MODEL, root->model_path) &&
             set_attr_i64(d->file, DFL_ATTR_NUM_LAYERS, root->num_layers) &&
             set_attr_i64(d->file, DFL_ATTR_NUM_HEADS, root->num_heads) &&
             set_attr_i64(d->file, DFL_ATTR_HEAD_DIM, root->head_dim) &&
             set_attr_i64(d->file, DFL_ATTR_LOGIT_QUANT_BITS, 0) &&
             set_attr_str(d->file, DFL_ATTR_LOGIT_QUANT_GRANULARITY, "none") &&
             set_attr_str(d->file, DFL_ATTR_ROWS, root->rows);
    if (!ok) {
        s = h5fail(d, err, "write", "root attributes");
        dfl_dump_abort(d);
        return s;
    }
    *out = d;
    return DFL_OK;
}

dfl_status dfl_dump_create(const char *path, int overwrite, const dfl_dump_info *info, dfl_dump **out, dfl_error *err)
{
    dfl_dump *d;
    dfl_status s = create_file(path, overwrite, &d, err);
    if (s) return s;
    *out = NULL;
    const dfl_model *m = info->model;
    const dfl_config *c = &m->config;
    int32_t version = DFL_DUMP_FORMAT_VERSION;
    int ok = set_attr_str(d->file, DFL_ATTR_FORMAT, DFL_DUMP_FORMAT) &&
             set_attr_num(d->file, DFL_ATTR_FORMAT_VERSION, H5T_STD_I32LE, H5T_NATIVE_INT32, &version) &&
             set_attr_str(d->file, DFL_ATTR_MODEL_TYPE, dfl_model_type_name(c->type)) &&
             set_attr_str(d->file, DFL_ATTR_CONFIG, m->config_text) &&
             set_attr_str(d->file, DFL_ATTR_MODEL, info->model_path ? info->model_path : m->path) &&
             set_attr_i64(d->file, DFL_ATTR_NUM_LAYERS, c->num_layers) &&
             set_attr_i64(d->file, DFL_ATTR_NUM_HEADS, dfl_config_analysis_heads(c)) &&
             set_attr_i64(d->file, DFL_ATTR_HEAD_DIM, c->head_dim) &&
             set_attr_i64(d->file, DFL_ATTR_LOGIT_QUANT_BITS, info->logit_quant_bits) &&
             set_attr_str(d->file, DFL_ATTR_LOGIT_QUANT_GRANULARITY,
                          info->logit_quant_granularity ? info->logit_quant_granularity : "none") &&
             set_attr_str(d->file, DFL_ATTR_ROWS, info->rows ? info->rows : "last");
    /* Gemma 2's soft-capping (absent for models without it): the caps, and that the
     * attention-logit statistics (outliers/logits) are of the scores before it; the maps
     * and --quantize-logits see the capped scores. */
    if (ok && c->attn_softcap > 0)
        ok = set_attr_num(d->file, DFL_ATTR_ATTN_LOGIT_SOFTCAPPING, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                          &c->attn_softcap) &&
             set_attr_str(d->file, DFL_ATTR_LOGIT_STATS_SOFTCAP, "before");
    if (ok && c->final_softcap > 0)
        ok = set_attr_num(d->file, DFL_ATTR_FINAL_LOGIT_SOFTCAPPING, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                          &c->final_softcap);
    if (!ok) s = h5fail(d, err, "write", "root attributes");
    if (!s) s = write_model_group(d, m, err);
    if (s) {
        dfl_dump_abort(d);
        return s;
    }
    *out = d;
    return DFL_OK;
}

dfl_status dfl_dump_finish(dfl_dump *d, dfl_error *err)
{
    int ok = !d->failed;
    if (d->sample >= 0) ok &= H5Gclose(d->sample) >= 0;
    d->sample = -1;
    if (d->file >= 0) ok &= H5Fclose(d->file) >= 0;
    d->file = -1;
    close_handles(d);
    dfl_status s = ok ? DFL_OK : h5fail(d, err, "close", "the file");
    if (s == DFL_OK)
        s = dfl__commit_tmp(d->tmp, d->path, d->overwrite, err);
    else
        dfl__discard_tmp(d->tmp);
    dump_free(d);
    return s;
}

void dfl_dump_abort(dfl_dump *d)
{
    if (!d) return;
    close_handles(d);
    dfl__discard_tmp(d->tmp);
    dump_free(d);
}

/* ---------------------------------------------------------------- samples */

dfl_status dfl_dump_sample_begin(dfl_dump *d, size_t index, const char *id, double depth, dfl_error *err)
{
    char name[64];
    snprintf(name, sizeof name, DFL_DS_SAMPLE_FMT, index);
    if (d->sample >= 0) H5Gclose(d->sample);
    hid_t lcpl = lcpl_parents();
    d->sample = H5Gcreate2(d->file, name, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    H5Pclose(lcpl);
    if (d->sample < 0) return h5fail(d, err, "create group", name);
    if (!set_attr_str(d->sample, DFL_ATTR_ID, id ? id : "") ||
        !set_attr_num(d->sample, DFL_ATTR_DEPTH, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &depth))
        return h5fail(d, err, "write attributes of", name);
    return DFL_OK;
}

dfl_status dfl_dump_sample_end(dfl_dump *d, dfl_error *err)
{
    if (d->sample >= 0 && H5Gclose(d->sample) < 0) {
        d->sample = -1;
        return h5fail(d, err, "close", "sample group");
    }
    d->sample = -1;
    return DFL_OK;
}

/* --------------------------------------------------------------- datasets */

static dfl_status create_dset(dfl_dump *d, const char *name, hid_t ftype, int ndim, const int64_t *dims, hid_t dcpl,
                              hid_t dapl, hid_t *out, dfl_error *err)
{
    hsize_t hd[8];
    if (ndim < 0 || ndim > 8) return dfl__fail(err, DFL_ERR_USAGE, "dataset '%s': bad rank %d", name, ndim);
    for (int i = 0; i < ndim; i++)
        hd[i] = (hsize_t)dims[i];
    hid_t sp = ndim ? H5Screate_simple(ndim, hd, NULL) : H5Screate(H5S_SCALAR);
    hid_t lcpl = lcpl_parents();
    *out = sp < 0 ? -1 : H5Dcreate2(where(d), name, ftype, sp, lcpl, dcpl, dapl);
    H5Pclose(lcpl);
    if (sp >= 0) H5Sclose(sp);
    return *out < 0 ? h5fail(d, err, "create dataset", name) : DFL_OK;
}

dfl_status dfl_dump_put(dfl_dump *d, const char *name, dfl_h5_type type, int ndim, const int64_t *dims,
                        const void *data, dfl_error *err)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (dims[i] < 0 || !dfl__mul_ok(n, (size_t)dims[i], &n))
            return dfl__fail(err, DFL_ERR_NOMEM, "dataset '%s': size overflow", name);
    uint16_t *half = NULL;
    if (type == DFL_H5_F16) {
        if (!(half = dfl__alloc_array(n, sizeof *half))) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < n; i++)
            half[i] = dfl_f32_to_f16(((const float *)data)[i]);
        data = half;
    }
    hid_t ds;
    dfl_status s = create_dset(d, name, file_type(d, type), ndim, dims, H5P_DEFAULT, H5P_DEFAULT, &ds, err);
    if (!s && n > 0 && H5Dwrite(ds, mem_type(d, type), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        s = h5fail(d, err, "write dataset", name);
    if (ds >= 0) H5Dclose(ds);
    free(half);
    return s;
}

dfl_status dfl_dump_put_deflated(dfl_dump *d, const char *name, dfl_h5_type type, int ndim, const int64_t *dims,
                                 const void *data, dfl_error *err)
{
    if (ndim < 1 || ndim > 8 || type == DFL_H5_F16)
        return dfl__fail(err, DFL_ERR_USAGE, "dataset '%s': bad rank or type", name);
    hsize_t chunk[8];
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 1 || !dfl__mul_ok(n, (size_t)dims[i], &n))
            return dfl_dump_put(d, name, type, ndim, dims, data, err); /* empty: nothing to compress */
        /* chunks of up to 8 rows of the first axis: a reader of one layer inflates little */
        chunk[i] = (hsize_t)(i == 0 && dims[0] > 8 ? 8 : dims[i]);
    }
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), ds = -1;
    dfl_status s =
        dcpl >= 0 && H5Pset_chunk(dcpl, ndim, chunk) >= 0 && H5Pset_shuffle(dcpl) >= 0 && H5Pset_deflate(dcpl, 4) >= 0
            ? create_dset(d, name, file_type(d, type), ndim, dims, dcpl, H5P_DEFAULT, &ds, err)
            : h5fail(d, err, "set up", name);
    if (!s && H5Dwrite(ds, mem_type(d, type), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        s = h5fail(d, err, "write dataset", name);
    if (ds >= 0) H5Dclose(ds);
    if (dcpl >= 0) H5Pclose(dcpl);
    return s;
}

dfl_status dfl_dump_put_strings(dfl_dump *d, const char *name, const char *const *str, size_t n, dfl_error *err)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        if (t >= 0) H5Tclose(t);
        return h5fail(d, err, "create string type for", name);
    }
    int64_t dims[1] = {(int64_t)n};
    hid_t ds;
    dfl_status s = create_dset(d, name, t, 1, dims, H5P_DEFAULT, H5P_DEFAULT, &ds, err);
    if (!s && n > 0 && H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, str) < 0) s = h5fail(d, err, "write", name);
    if (ds >= 0) H5Dclose(ds);
    H5Tclose(t);
    return s;
}

dfl_status dfl_dump_put_text(dfl_dump *d, const char *name, const char *str, size_t len, dfl_error *err)
{
    if (!memchr(str, 0, len)) return dfl_dump_put_strings(d, name, &str, 1, err);
    /* a NUL inside: H5T_VARIABLE strings are C strings, a fixed size holds all len bytes */
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0 || H5Tset_size(t, len) < 0 || H5Tset_strpad(t, H5T_STR_NULLPAD) < 0 ||
        H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        if (t >= 0) H5Tclose(t);
        return h5fail(d, err, "create string type for", name);
    }
    int64_t dims[1] = {1};
    hid_t ds;
    dfl_status s = create_dset(d, name, t, 1, dims, H5P_DEFAULT, H5P_DEFAULT, &ds, err);
    if (!s && H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, str) < 0) s = h5fail(d, err, "write", name);
    int64_t n = (int64_t)len;
    if (!s && !set_attr_num(ds, DFL_ATTR_LENGTH, H5T_STD_I64LE, H5T_NATIVE_INT64, &n))
        s = h5fail(d, err, "write an attribute of", name);
    if (ds >= 0) H5Dclose(ds);
    H5Tclose(t);
    return s;
}

dfl_status dfl_dump_attach_scales(dfl_dump *d, const char *name, int ndim, const char *const *scale_names,
                                  const char *const *labels, dfl_error *err)
{
    hid_t ds = H5Dopen2(where(d), name, H5P_DEFAULT);
    if (ds < 0) return h5fail(d, err, "open", name);
    dfl_status s = DFL_OK;
    for (int i = 0; i < ndim && !s; i++) {
        if (labels && labels[i] && H5DSset_label(ds, (unsigned)i, labels[i]) < 0) s = h5fail(d, err, "label", name);
        if (s || !scale_names || !scale_names[i]) continue;
        hid_t sc = H5Dopen2(where(d), scale_names[i], H5P_DEFAULT);
        const char *base = strrchr(scale_names[i], '/');
        base = base ? base + 1 : scale_names[i];
        if (sc < 0 || (H5DSis_scale(sc) <= 0 && H5DSset_scale(sc, base) < 0) ||
            H5DSattach_scale(ds, sc, (unsigned)i) < 0)
            s = h5fail(d, err, "attach a dimension scale to", name);
        if (sc >= 0) H5Dclose(sc);
    }
    H5Dclose(ds);
    return s;
}

/* ------------------------------------------------------------- attributes */

static dfl_status with_object(dfl_dump *d, const char *obj, const char *name, int kind, const void *v, size_t n,
                              dfl_error *err)
{
    hid_t o = H5Oopen(where(d), obj, H5P_DEFAULT);
    if (o < 0) return h5fail(d, err, "open", obj);
    int ok;
    if (kind == 0) {
        hsize_t dims[1] = {n};
        hid_t sp = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, NULL), a = -1;
        ok = sp >= 0 && (a = H5Acreate2(o, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
             H5Awrite(a, H5T_NATIVE_DOUBLE, v) >= 0;
        if (a >= 0) H5Aclose(a);
        if (sp >= 0) H5Sclose(sp);
    } else if (kind == 1) {
        ok = set_attr_num(o, name, H5T_STD_I64LE, H5T_NATIVE_INT64, v);
    } else {
        ok = set_attr_str(o, name, v);
    }
    H5Oclose(o);
    return ok ? DFL_OK : h5fail(d, err, "write an attribute of", obj);
}

dfl_status dfl_dump_attr_f64(dfl_dump *d, const char *obj, const char *name, const double *v, size_t n, dfl_error *err)
{
    return with_object(d, obj, name, 0, v, n, err);
}

dfl_status dfl_dump_attr_i64(dfl_dump *d, const char *obj, const char *name, int64_t v, dfl_error *err)
{
    return with_object(d, obj, name, 1, &v, 1, err);
}

dfl_status dfl_dump_attr_str(dfl_dump *d, const char *obj, const char *name, const char *v, dfl_error *err)
{
    return with_object(d, obj, name, 2, v, 1, err);
}

/* ---------------------------------------------------------------- streams */

dfl_status dfl__dump_stream_open(dfl_dump *d, const char *name, dfl_h5_type type, int ndim, const int64_t *dims,
                                 const hsize_t *chunk, int deflate, hid_t dapl, dfl_dump_stream *s, dfl_error *err)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int zero = 0;
    int ok = dcpl >= 0 && H5Pset_chunk(dcpl, ndim, chunk) >= 0 && H5Pset_fill_value(dcpl, H5T_NATIVE_INT, &zero) >= 0 &&
             H5Pset_fill_time(dcpl, H5D_FILL_TIME_IFSET) >= 0 &&
             (deflate < 0 || (H5Pset_shuffle(dcpl) >= 0 && H5Pset_deflate(dcpl, (unsigned)deflate) >= 0));
    hid_t ds = -1;
    dfl_status st = ok ? create_dset(d, name, file_type(d, type), ndim, dims, dcpl, dapl, &ds, err)
                       : h5fail(d, err, "set up", name);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (st) return st;
    s->d = d;
    s->dset = ds;
    s->type = type;
    s->ndim = ndim;
    return DFL_OK;
}

dfl_status dfl_dump_stream_create(dfl_dump *d, const char *name, dfl_h5_type type, int ndim, const int64_t *dims,
                                  const int64_t *chunk, int gzip, int64_t open_chunks, dfl_dump_stream **out,
                                  dfl_error *err)
{
    *out = NULL;
    if (ndim < 1 || ndim > 4) return dfl__fail(err, DFL_ERR_USAGE, "stream '%s': bad rank %d", name, ndim);
    hsize_t hc[4];
    for (int i = 0; i < ndim; i++)
        hc[i] = (hsize_t)(chunk[i] < 1 ? 1 : chunk[i]);
    hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    int ok = dapl >= 0;
    if (ok && open_chunks > 0) {
        /* A chunk evicted half-written is compressed, stored, read back and stored again:
         * the cache holds every chunk the writer keeps open (HDF5's default is 1 MB). */
        size_t bytes = H5Tget_size(file_type(d, type));
        for (int i = 0; i < ndim; i++)
            bytes *= (size_t)hc[i];
        double total = (double)bytes * (double)open_chunks;
        size_t cache = total > 512.0 * 1024 * 1024 ? (size_t)512 * 1024 * 1024 : (size_t)total;
        ok = H5Pset_chunk_cache(dapl, 100003, cache > (size_t)1 << 20 ? cache : (size_t)1 << 20, 0.75) >= 0;
    }
    dfl_dump_stream *s = calloc(1, sizeof *s);
    dfl_status st = ok && s ? dfl__dump_stream_open(d, name, type, ndim, dims, hc, gzip > 0 ? gzip : -1, dapl, s, err)
                            : h5fail(d, err, "set up", name);
    if (dapl >= 0) H5Pclose(dapl);
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    return DFL_OK;
}

dfl_status dfl_dump_stream_write_f32(dfl_dump_stream *s, const int64_t *start, const int64_t *count, const float *data,
                                     int64_t ld, dfl_error *err)
{
    if (s->type != DFL_H5_F32 && s->type != DFL_H5_F16)
        return dfl__fail(err, DFL_ERR_USAGE, "stream_write_f32 on a non-float dataset");
    if (s->direct) return dfl__direct_write(s, start, count, data, ld, err);
    size_t rows = 1, width = (size_t)count[s->ndim - 1], n;
    for (int i = 0; i < s->ndim - 1; i++)
        rows *= (size_t)count[i];
    if (!dfl__mul_ok(rows, width, &n)) return dfl__fail(err, DFL_ERR_NOMEM, "hyperslab too large");
    if (n == 0) return DFL_OK;
    const void *buf = data;
    size_t elem = s->type == DFL_H5_F16 ? 2 : 4;
    if (s->type == DFL_H5_F16 || (size_t)ld != width) {
        if (n > s->cap) {
            void *nb = dfl__alloc_array(n, 4);
            if (!nb) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
            free(s->packed);
            s->packed = nb;
            s->half = nb;
            s->cap = n;
        }
        for (size_t r = 0; r < rows; r++) {
            const float *src = data + r * (size_t)ld;
            if (elem == 2)
                for (size_t j = 0; j < width; j++)
                    s->half[r * width + j] = dfl_f32_to_f16(src[j]);
            else
                memcpy(s->packed + r * width, src, width * sizeof(float));
        }
        buf = s->packed;
    }
    hsize_t hs[4], hcount[4];
    for (int i = 0; i < s->ndim; i++) {
        hs[i] = (hsize_t)start[i];
        hcount[i] = (hsize_t)count[i];
    }
    hid_t fsp = H5Dget_space(s->dset), msp = H5Screate_simple(s->ndim, hcount, NULL);
    int ok = fsp >= 0 && msp >= 0 && H5Sselect_hyperslab(fsp, H5S_SELECT_SET, hs, NULL, hcount, NULL) >= 0 &&
             H5Dwrite(s->dset, mem_type(s->d, s->type), msp, fsp, H5P_DEFAULT, buf) >= 0;
    if (msp >= 0) H5Sclose(msp);
    if (fsp >= 0) H5Sclose(fsp);
    return ok ? DFL_OK : h5fail(s->d, err, "write a hyperslab of", "map");
}

dfl_status dfl_dump_stream_pump(dfl_dump_stream *s, dfl_error *err)
{
    return s->direct ? dfl__direct_pump(s, err) : DFL_OK;
}

int64_t dfl_dump_stream_jobs(dfl_dump_stream *s)
{
    return s->direct ? dfl__direct_jobs(s) : 0;
}

void dfl_dump_stream_work(dfl_dump_stream *s, int64_t k, int thread)
{
    if (s->direct) dfl__direct_work(s, k, thread);
}

void dfl_dump_stream_close(dfl_dump_stream *s)
{
    if (!s) return;
    dfl__direct_free(s->direct);
    if (s->dset >= 0) H5Dclose(s->dset);
    free(s->packed);
    free(s);
}
