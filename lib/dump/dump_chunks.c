/* dump_chunks.c — boxes of chunked float datasets decoded chunk by chunk on all cores
 * (see dump_chunks.h). HDF5 looks up where each chunk the box touches is stored
 * (serially); a parallel loop then reads each chunk's bytes from the file with pread
 * and inflates, unshuffles, converts and scatters it. Inflating is libdeflate's
 * (whole-buffer, twice zlib's speed here, Adler-32 checked). Per-thread buffers and
 * decompressors are made before the loop: nothing allocates inside it. */
#include "dump/dump_chunks.h"

#include <errno.h>
#include <libdeflate.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Chunks looked up before each parallel decode. */
#define BATCH_CHUNKS 4096

typedef struct worker {
    struct libdeflate_decompressor *inflater;
    unsigned char *inflated; /* [chunk_bytes] */
    unsigned char *stored;   /* [stored_cap] a chunk's bytes as stored */
    size_t stored_cap;
} worker;

/* One chunk of a batch: where the file holds it (size 0: never written). */
typedef struct job {
    int64_t coord[DFL_DUMP_MAX_RANK]; /* first element of the chunk */
    haddr_t addr;
    size_t size;
    unsigned mask;                    /* filters skipped when it was written */
    int failed;                       /* 1: does not inflate, 2: wrong size, 3: unreadable */
} job;

struct dfl__chunks {
    hid_t dset;
    int fd;                           /* the file, as HDF5's sec2 driver opened it */
    haddr_t base;                     /* file offset of HDF5 address 0 (the user block) */
    int nd;
    int64_t dims[DFL_DUMP_MAX_RANK], cdims[DFL_DUMP_MAX_RANK];
    size_t elem, chunk_elems, chunk_bytes;
    int shuffle_at, deflate_at;       /* filter index in the pipeline, -1: absent */
    float fill;
    const float *lut;                 /* f16 -> f32, NULL for f32 data */
    int nworkers;
    worker *w;                        /* [nworkers] */
    size_t batch;                     /* chunks per batch: BATCH_CHUNKS or all the dataset has */
    job *jobs;                        /* [batch] */
};

/* ------------------------------------------------------------------ open/close */

void dfl__chunks_close(dfl__chunks *c)
{
    if (!c) return;
    for (int i = 0; c->w && i < c->nworkers; i++) {
        if (c->w[i].inflater) libdeflate_free_decompressor(c->w[i].inflater);
        free(c->w[i].inflated);
        free(c->w[i].stored);
    }
    free(c->w);
    free(c->jobs);
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

/* The file descriptor and user-block offset of dset's file, when it was opened with the
 * default (sec2) driver: chunks are then read with pread. 1 on success. */
static int file_handle(hid_t dset, dfl__chunks *c)
{
    hid_t f = H5Iget_file_id(dset);
    hid_t fapl = f >= 0 ? H5Fget_access_plist(f) : -1, fcpl = f >= 0 ? H5Fget_create_plist(f) : -1;
    int *fd = NULL;
    hsize_t user_block = 0;
    int ok = fapl >= 0 && fcpl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2 &&
             H5Fget_vfd_handle(f, fapl, (void **)&fd) >= 0 && fd && *fd >= 0 && H5Pget_userblock(fcpl, &user_block) >= 0;
    if (ok) {
        c->fd = *fd;
        c->base = (haddr_t)user_block;
    }
    if (fcpl >= 0) H5Pclose(fcpl);
    if (fapl >= 0) H5Pclose(fapl);
    if (f >= 0) H5Fclose(f);
    return ok;
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
    if (!ok || !file_handle(dset, c)) return 0;
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
    for (int b = 0; b < 4; b++) u |= (uint32_t)d[planed ? (size_t)b * c->chunk_elems + e : 4 * e + (size_t)b] << (8 * b);
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
            for (int64_t t = 0; t < run; t++) dst[t] = c->fill;
        else if (c->lut && planed) {
            const unsigned char *l = d + e, *h = d + c->chunk_elems + e;
            for (int64_t t = 0; t < run; t++) dst[t] = c->lut[(uint16_t)(l[t] | (unsigned)h[t] << 8)];
        } else
            for (int64_t t = 0; t < run; t++) dst[t] = element(c, d, e + (size_t)t, planed);
        int i = nd - 2;
        while (i >= 0 && ++idx[i] == hi[i]) {
            idx[i] = lo[i];
            i--;
        }
        if (i < 0) break;
    }
}

/* Read n bytes at offset `at` of fd: 1 when all arrived. */
static int read_fully(int fd, unsigned char *buf, size_t n, off_t at)
{
    while (n > 0) {
        ssize_t got = pread(fd, buf, n, at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return 0;
        buf += got;
        n -= (size_t)got;
        at += got;
    }
    return 1;
}

static void decode(dfl__chunks *c, worker *w, job *j, const int64_t *start, const int64_t *count, float *out)
{
    if (j->size == 0) {
        scatter(c, j, NULL, 0, start, count, out);
        return;
    }
    if (!read_fully(c->fd, w->stored, j->size, (off_t)(c->base + j->addr))) {
        j->failed = 3;
        return;
    }
    const unsigned char *d = w->stored;
    if (c->deflate_at >= 0 && !(j->mask & (1u << c->deflate_at))) {
        size_t got = 0;
        enum libdeflate_result rc = libdeflate_zlib_decompress(w->inflater, d, j->size, w->inflated, c->chunk_bytes, &got);
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

/* Decode the batch's n jobs in parallel; the first failure is reported. */
static dfl_status run_batch(dfl__chunks *c, job *jobs, size_t n, const int64_t *start, const int64_t *count,
                            float *out, const char *where, dfl_error *err)
{
    int nw = c->nworkers;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nw) if (n > 1)
    for (size_t k = 0; k < n; k++) decode(c, &c->w[omp_get_thread_num()], &jobs[k], start, count, out);
    for (size_t k = 0; k < n; k++)
        if (jobs[k].failed) {
            char at[128];
            int used = 0;
            for (int i = 0; i < c->nd && used < (int)sizeof at - 24; i++)
                used += snprintf(at + used, sizeof at - (size_t)used, "%s%lld", i ? ", " : "", (long long)jobs[k].coord[i]);
            if (jobs[k].failed == 3)
                return dfl__fail(err, DFL_ERR_IO, "%s: cannot read the chunk at [%s] from the file", where, at);
            return dfl__fail(err, DFL_ERR_FORMAT, "%s: the chunk at [%s] is corrupt (%s)", where, at,
                             jobs[k].failed == 1 ? "its deflate stream does not decode" : "it decodes to the wrong size");
        }
    return DFL_OK;
}

dfl_status dfl__chunks_read(dfl__chunks *c, const int64_t *start, const int64_t *count, float *out,
                            const char *where, dfl_error *err)
{
    const int nd = c->nd;
    int64_t first[DFL_DUMP_MAX_RANK], last[DFL_DUMP_MAX_RANK], at[DFL_DUMP_MAX_RANK];
    for (int i = 0; i < nd; i++) {
        if (count[i] == 0) return DFL_OK;
        first[i] = at[i] = start[i] / c->cdims[i] * c->cdims[i];
        last[i] = (start[i] + count[i] - 1) / c->cdims[i] * c->cdims[i];
    }
    size_t n = 0, largest = 0;
    for (int done = 0; !done;) {
        /* where the chunk at `at` is stored */
        hsize_t off[DFL_DUMP_MAX_RANK], size = 0;
        haddr_t addr = HADDR_UNDEF;
        unsigned mask = 0;
        for (int i = 0; i < nd; i++) off[i] = (hsize_t)at[i];
        if (H5Dget_chunk_info_by_coord(c->dset, off, &mask, &addr, &size) < 0)
            return dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to look up a chunk", where);
        job *j = &c->jobs[n++];
        memset(j, 0, sizeof *j);
        memcpy(j->coord, at, sizeof(int64_t) * (size_t)nd);
        j->addr = addr;
        j->size = size > 0 && addr != HADDR_UNDEF ? (size_t)size : 0;
        j->mask = mask;
        if (j->size > largest) largest = j->size;
        /* next chunk in row-major order */
        int i = nd - 1;
        while (i >= 0 && at[i] == last[i]) {
            at[i] = first[i];
            i--;
        }
        if (i < 0) done = 1;
        else at[i] += c->cdims[i];
        if (done || n == c->batch) {
            /* every worker can hold the batch's largest chunk before the loop starts */
            for (int k = 0; k < c->nworkers; k++) {
                worker *w = &c->w[k];
                if (w->stored_cap >= largest) continue;
                free(w->stored);
                if (!(w->stored = malloc(largest))) {
                    w->stored_cap = 0;
                    return dfl__fail(err, DFL_ERR_NOMEM, "%s: out of memory", where);
                }
                w->stored_cap = largest;
            }
            dfl_status s = run_batch(c, c->jobs, n, start, count, out, where, err);
            if (s) return s;
            n = 0;
        }
    }
    return DFL_OK;
}
