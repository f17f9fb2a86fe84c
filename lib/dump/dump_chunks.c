/* dump_chunks.c — boxes of chunked float datasets decoded chunk by chunk on all cores
 * (see dump_chunks.h). HDF5 hands over the stored bytes of each chunk the box touches
 * (serially: H5Dread_chunk, no decoding); a parallel loop then inflates, unshuffles,
 * converts and scatters them. Inflating is libdeflate's (whole-buffer, twice zlib's
 * speed here, Adler-32 checked). Per-thread buffers and decompressors are made before
 * the loop: nothing allocates inside it. */
#include "dump/dump_chunks.h"

#include <libdeflate.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Chunks read before each parallel decode: at most this many, and at most
 * BATCH_BYTES of stored bytes (unless one chunk alone is larger). */
#define BATCH_CHUNKS 4096
#define BATCH_BYTES  ((size_t)16 << 20)

typedef struct worker {
    struct libdeflate_decompressor *inflater;
    unsigned char *inflated; /* [chunk_bytes] */
} worker;

/* One chunk of a batch: its stored bytes in the batch's arena (size 0: never written). */
typedef struct job {
    int64_t coord[DFL_DUMP_MAX_RANK]; /* first element of the chunk */
    size_t at, size;                  /* bytes [at, at + size) of the arena */
    unsigned mask;                    /* filters skipped when it was written */
    int failed;                       /* 1: does not inflate, 2: wrong size */
} job;

struct dfl__chunks {
    hid_t dset;
    int nd;
    int64_t dims[DFL_DUMP_MAX_RANK], cdims[DFL_DUMP_MAX_RANK];
    size_t elem, chunk_elems, chunk_bytes;
    int shuffle_at, deflate_at; /* filter index in the pipeline, -1: absent */
    float fill;
    const float *lut; /* f16 -> f32, NULL for f32 data */
    int nworkers;
    worker *w;            /* [nworkers] */
    size_t batch;         /* chunks per batch: BATCH_CHUNKS or all the dataset has */
    job *jobs;            /* [batch] */
    unsigned char *arena; /* [arena_cap] the batch's chunks as stored */
    size_t arena_cap;
};

/* ------------------------------------------------------------------ open/close */

void dfl__chunks_close(dfl__chunks *c)
{
    if (!c) return;
    for (int i = 0; c->w && i < c->nworkers; i++) {
        if (c->w[i].inflater) libdeflate_free_decompressor(c->w[i].inflater);
        free(c->w[i].inflated);
    }
    free(c->w);
    free(c->jobs);
    free(c->arena);
    free(c);
}

/* Which filters the dataset applies: 1 when all are known (shuffle before deflate). */
static int read_filters(hid_t dcpl, int *shuffle_at, int *deflate_at)
{
    *shuffle_at = *deflate_at = -1;
    int n = H5Pget_nfilters(dcpl);
    if (n < 0 || n > 2) return 0;
    for (int i = 0; i < n; i++) {
        unsigned flags, cd[8];
        size_t ncd = 8;
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, 0, NULL, NULL);
        if (id == H5Z_FILTER_SHUFFLE && *shuffle_at < 0 && *deflate_at < 0)
            *shuffle_at = i;
        else if (id == H5Z_FILTER_DEFLATE && *deflate_at < 0)
            *deflate_at = i;
        else
            return 0;
    }
    return 1;
}

/* 1 when the dataset is one this path decodes, filling c's layout fields. */
static int eligible(hid_t dset, const dfl_dump_dset_info *info, dfl__chunks *c)
{
    if (info->is_string || (info->type != DFL_H5_F16 && info->type != DFL_H5_F32) || info->ndim < 1) return 0;
    hid_t ft = H5Dget_type(dset), dcpl = H5Dget_create_plist(dset);
    int ok = ft >= 0 && dcpl >= 0 && H5Tget_class(ft) == H5T_FLOAT && H5Tget_order(ft) == H5T_ORDER_LE &&
             H5Tget_size(ft) == (info->type == DFL_H5_F16 ? 2u : 4u) && H5Pget_layout(dcpl) == H5D_CHUNKED;
    hsize_t cd[DFL_DUMP_MAX_RANK];
    unsigned opts = 0;
    H5D_fill_value_t fv = H5D_FILL_VALUE_UNDEFINED;
    H5D_fill_time_t ftime = H5D_FILL_TIME_NEVER;
    ok = ok && H5Pget_chunk(dcpl, info->ndim, cd) == info->ndim && H5Pget_chunk_opts(dcpl, &opts) >= 0 &&
         !(opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS) && read_filters(dcpl, &c->shuffle_at, &c->deflate_at) &&
         H5Pfill_value_defined(dcpl, &fv) >= 0 && fv != H5D_FILL_VALUE_UNDEFINED &&
         H5Pget_fill_time(dcpl, &ftime) >= 0 && ftime != H5D_FILL_TIME_NEVER &&
         H5Pget_fill_value(dcpl, H5T_NATIVE_FLOAT, &c->fill) >= 0;
    if (ft >= 0) H5Tclose(ft);
    if (dcpl >= 0) H5Pclose(dcpl);
    /* Without a filter the chunk index keeps no length: HDF5 reports the chunk's size
     * but H5Dread_chunk reads what the index says, more than that in a corrupt file. */
    if (!ok || (c->shuffle_at < 0 && c->deflate_at < 0)) return 0;
    c->nd = info->ndim;
    c->elem = info->type == DFL_H5_F16 ? 2 : 4;
    c->chunk_elems = 1;
    for (int i = 0; i < c->nd; i++) {
        c->dims[i] = info->dims[i];
        c->cdims[i] = (int64_t)cd[i];
        if (cd[i] < 1 || !dfl__mul_ok(c->chunk_elems, (size_t)cd[i], &c->chunk_elems)) return 0;
    }
    /* a batch never needs more jobs than the dataset has chunks */
    c->batch = 1;
    for (int i = 0; i < c->nd; i++) {
        int64_t per_dim = (c->dims[i] + c->cdims[i] - 1) / c->cdims[i];
        c->batch = per_dim >= BATCH_CHUNKS ? BATCH_CHUNKS : c->batch * (size_t)(per_dim > 0 ? per_dim : 1);
        if (c->batch >= BATCH_CHUNKS) {
            c->batch = BATCH_CHUNKS;
            break;
        }
    }
    return dfl__mul_ok(c->chunk_elems, c->elem, &c->chunk_bytes);
}

dfl_status dfl__chunks_open(hid_t dset, const dfl_dump_dset_info *info, const float *lut, dfl__chunks **out,
                            dfl_error *err)
{
    *out = NULL;
    dfl__chunks *c = calloc(1, sizeof *c);
    if (!c) return dfl__fail(err, DFL_ERR_NOMEM, "out of memory");
    if (!eligible(dset, info, c)) {
        H5Eclear2(H5E_DEFAULT);
        free(c);
        return DFL_OK;
    }
    c->dset = dset;
    c->lut = info->type == DFL_H5_F16 ? lut : NULL;
    c->nworkers = omp_get_max_threads();
    if (!(c->w = dfl__calloc_array((size_t)c->nworkers, sizeof *c->w)) ||
        !(c->jobs = dfl__alloc_array(c->batch, sizeof *c->jobs)))
        goto nomem;
    for (int i = 0; i < c->nworkers; i++) {
        worker *w = &c->w[i];
        if (!(w->inflated = dfl__alloc_array(c->chunk_bytes, 1)) || !(w->inflater = libdeflate_alloc_decompressor()))
            goto nomem;
    }
    *out = c;
    return DFL_OK;
nomem:
    dfl__chunks_close(c);
    return dfl__fail(err, DFL_ERR_NOMEM, "out of memory for chunk decoding buffers");
}

/* ---------------------------------------------------------------- decoding */

/* Element e of a decoded chunk as f32: stored little-endian, bytes planed by shuffle. */
static inline float element(const dfl__chunks *c, const unsigned char *d, size_t e, int planed)
{
    if (c->lut) {
        size_t lo = planed ? e : 2 * e, hi = planed ? c->chunk_elems + e : 2 * e + 1;
        return c->lut[(uint16_t)(d[lo] | (unsigned)d[hi] << 8)];
    }
    uint32_t u = 0;
    for (int b = 0; b < 4; b++)
        u |= (uint32_t)d[planed ? (size_t)b * c->chunk_elems + e : 4 * e + (size_t)b] << (8 * b);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Copy the part of chunk j inside the box into out (d: decoded bytes, NULL: fill). */
static void scatter(const dfl__chunks *c, const job *j, const unsigned char *d, int planed, const int64_t *start,
                    const int64_t *count, float *out)
{
    const int nd = c->nd;
    int64_t lo[DFL_DUMP_MAX_RANK], hi[DFL_DUMP_MAX_RANK], idx[DFL_DUMP_MAX_RANK];
    for (int i = 0; i < nd; i++) {
        int64_t a = j->coord[i] > start[i] ? j->coord[i] : start[i];
        int64_t b = j->coord[i] + c->cdims[i] < start[i] + count[i] ? j->coord[i] + c->cdims[i] : start[i] + count[i];
        lo[i] = idx[i] = a;
        hi[i] = b;
    }
    const int64_t run = hi[nd - 1] - lo[nd - 1];
    for (;;) {
        /* one contiguous run along the last dimension */
        size_t o = 0, e = 0;
        for (int i = 0; i < nd; i++) {
            o = o * (size_t)count[i] + (size_t)(idx[i] - start[i]);
            e = e * (size_t)c->cdims[i] + (size_t)(idx[i] - j->coord[i]);
        }
        float *dst = out + o;
        if (!d)
            for (int64_t t = 0; t < run; t++)
                dst[t] = c->fill;
        else if (c->lut && planed) {
            const unsigned char *l = d + e, *h = d + c->chunk_elems + e;
            for (int64_t t = 0; t < run; t++)
                dst[t] = c->lut[(uint16_t)(l[t] | (unsigned)h[t] << 8)];
        } else
            for (int64_t t = 0; t < run; t++)
                dst[t] = element(c, d, e + (size_t)t, planed);
        int i = nd - 2;
        while (i >= 0 && ++idx[i] == hi[i]) {
            idx[i] = lo[i];
            i--;
        }
        if (i < 0) break;
    }
}

static void decode(dfl__chunks *c, worker *w, job *j, const int64_t *start, const int64_t *count, float *out)
{
    if (j->size == 0) {
        scatter(c, j, NULL, 0, start, count, out);
        return;
    }
    const unsigned char *d = c->arena + j->at;
    if (c->deflate_at >= 0 && !(j->mask & (1u << c->deflate_at))) {
        size_t got = 0;
        enum libdeflate_result rc =
            libdeflate_zlib_decompress(w->inflater, d, j->size, w->inflated, c->chunk_bytes, &got);
        if (rc != LIBDEFLATE_SUCCESS || got != c->chunk_bytes) {
            j->failed = rc == LIBDEFLATE_BAD_DATA ? 1 : 2;
            return;
        }
        d = w->inflated;
    } else if (j->size != c->chunk_bytes) {
        j->failed = 2;
        return;
    }
    int planed = c->shuffle_at >= 0 && !(j->mask & (1u << c->shuffle_at));
    scatter(c, j, d, planed, start, count, out);
}

/* ------------------------------------------------------------------ reading */

/* "2, 0": a chunk's first element, for messages. */
static void chunk_coords(const dfl__chunks *c, const int64_t *coord, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->nd && used + 24 < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)coord[i]);
}

/* Decode the batch's n jobs in parallel; the first failure is reported. */
static dfl_status run_batch(dfl__chunks *c, job *jobs, size_t n, const int64_t *start, const int64_t *count, float *out,
                            const char *where, dfl_error *err)
{
    int nw = c->nworkers;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nw) if (n > 1)
    for (size_t k = 0; k < n; k++)
        decode(c, &c->w[omp_get_thread_num()], &jobs[k], start, count, out);
    for (size_t k = 0; k < n; k++)
        if (jobs[k].failed) {
            char at[128];
            chunk_coords(c, jobs[k].coord, at, sizeof at);
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: the chunk at [%s] is corrupt (%s)", where, at,
                             jobs[k].failed == 1 ? "its deflate stream does not decode"
                                                 : "it decodes to the wrong size");
        }
    return DFL_OK;
}

/* Error-stack walker: did the failed call say that the chunk is not in the file? */
static herr_t says_never_written(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    if (e->desc && (strstr(e->desc, "not allocated") || strstr(e->desc, "address isn't defined"))) *(int *)data = 1;
    return 0;
}

/* The stored size of the chunk at off, 0 when it was never written. This lookup costs
 * HDF5 one index probe; H5Dget_chunk_info_by_coord, which also tells a chunk never
 * written, walks the index up to the chunk in HDF5 1.10 (0.4 ms at the middle of a
 * 16K-token map). HDF5 1.10 fails on a chunk never written, saying so ("chunk storage is
 * not allocated", or "chunk address isn't defined" once H5Dread cached it); a failure
 * that says something else is settled by the slow lookup. */
static dfl_status stored_size(const dfl__chunks *c, const hsize_t *off, size_t *size, const char *where, dfl_error *err)
{
    hsize_t n = 0;
    *size = 0;
    if (H5Dget_chunk_storage_size(c->dset, off, &n) >= 0) {
        *size = (size_t)n;
        return DFL_OK;
    }
    int unwritten = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, says_never_written, &unwritten);
    H5Eclear2(H5E_DEFAULT);
    if (unwritten) return DFL_OK;
    unsigned mask = 0;
    haddr_t addr = 0;
    if (H5Dget_chunk_info_by_coord(c->dset, off, &mask, &addr, &n) >= 0 && addr == HADDR_UNDEF) return DFL_OK;
    return dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to look up a chunk", where);
}

dfl_status dfl__chunks_read(dfl__chunks *c, const int64_t *start, const int64_t *count, float *out, const char *where,
                            dfl_error *err)
{
    const int nd = c->nd;
    int64_t first[DFL_DUMP_MAX_RANK], last[DFL_DUMP_MAX_RANK], at[DFL_DUMP_MAX_RANK];
    for (int i = 0; i < nd; i++) {
        if (count[i] == 0) return DFL_OK;
        first[i] = at[i] = start[i] / c->cdims[i] * c->cdims[i];
        last[i] = (start[i] + count[i] - 1) / c->cdims[i] * c->cdims[i];
    }
    size_t n = 0, used = 0;
    dfl_status s = DFL_OK;
    /* chunks never written fail HDF5's lookups: not worth a message on stderr (the
     * setting is per thread, and the viewer reads from several) */
    H5E_auto2_t print = NULL;
    void *print_data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &print, &print_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    for (int done = 0; !done && !s;) {
        hsize_t off[DFL_DUMP_MAX_RANK];
        size_t size = 0;
        for (int i = 0; i < nd; i++)
            off[i] = (hsize_t)at[i];
        if ((s = stored_size(c, off, &size, where, err))) break;
        if (size > c->chunk_bytes + c->chunk_bytes / 8 + 4096) { /* deflate never grows data that much */
            char where_at[128];
            chunk_coords(c, at, where_at, sizeof where_at);
            s = dfl__fail(err, DFL_ERR_FORMAT,
                          "%s: the chunk at [%s] is corrupt (its stored size, %zu bytes for %zu "
                          "bytes of data, cannot be)",
                          where, where_at, size, c->chunk_bytes);
            break;
        }
        if (n > 0 && (n == c->batch || used + size > BATCH_BYTES)) {
            if ((s = run_batch(c, c->jobs, n, start, count, out, where, err))) break;
            n = used = 0;
        }
        if (used + size > c->arena_cap) {
            size_t cap = 2 * (used + size); /* grows with the boxes read: a tile needs little */
            unsigned char *grown = realloc(c->arena, cap);
            if (!grown) {
                s = dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", where);
                break;
            }
            c->arena = grown, c->arena_cap = cap;
        }
        job *j = &c->jobs[n++];
        memset(j, 0, sizeof *j);
        memcpy(j->coord, at, sizeof(int64_t) * (size_t)nd);
        j->at = used, j->size = size;
        uint32_t mask = 0;
        if (size && H5Dread_chunk(c->dset, H5P_DEFAULT, off, &mask, c->arena + used) < 0) {
            /* an unfiltered chunk HDF5 holds in its cache only (H5Dread of a chunk never
             * written) has a size but no bytes in the file */
            int unwritten = 0;
            H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, says_never_written, &unwritten);
            H5Eclear2(H5E_DEFAULT);
            if (!unwritten) {
                s = dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to read a chunk", where);
                break;
            }
            j->size = size = 0;
        }
        j->mask = mask;
        used += size;
        /* next chunk in row-major order */
        int i = nd - 1;
        while (i >= 0 && at[i] == last[i]) {
            at[i] = first[i];
            i--;
        }
        if (i < 0)
            done = 1;
        else
            at[i] += c->cdims[i];
    }
    if (!s && n > 0) s = run_batch(c, c->jobs, n, start, count, out, where, err);
    H5Eset_auto2(H5E_DEFAULT, print, print_data);
    return s;
}
