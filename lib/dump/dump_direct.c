/* dump_direct.c — direct streams (dfl_dump_stream_create_direct): chunks assembled in
 * memory already shuffled, deflated (libdeflate; at level 1, deflate_rle.h) by the
 * caller's OpenMP threads, stored whole with H5Dwrite_chunk. Hand-written because it
 * measurably wins: HDF5's own filter path compresses one chunk at a time on the
 * caller's thread (docs/format.md, maps). */
#include "dump/dump.h"

#include <hdf5.h>
#include <libdeflate.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "dump/deflate_rle.h"
#include "dump/dump_writer.h"
#include "dump/f16_pack.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "direct chunk writes store memory bytes as the file's little-endian elements"
#endif

/* How a direct stream runs: write calls, on the caller's thread, fill chunk rows in
 * staging slots (with shuffle + deflate, as HDF5's shuffled byte planes — byte b of
 * element e at b·chunk_elems + e — so the f16 conversion writes them in one pass and
 * no shuffle pass is left); a complete row waits in a queue. Its chunks are deflated
 * either as jobs by threads the caller runs anyway (dfl_dump_stream_jobs and _work: in
 * probe the attention's parallel region, after each block's tasks, so no thread of the
 * stream's competes with the forward's for the cores and no region is added) or by the
 * pump (dfl_dump_stream_pump; also when a write needs a slot, and at the flush), which
 * deflates what is left on an OpenMP team of `threads` and hands the chunks to HDF5
 * (which is not thread-safe) on the caller's thread in queue order, chunk order within
 * a row: the file is the same whatever the thread count. Raw chunks (no filter) are
 * stored as soon as their row is complete. */

typedef enum row_state { ROW_FREE = 0, ROW_FILLING, ROW_QUEUED } row_state;

/* One chunk row held in memory. */
typedef struct staged_row {
    row_state state;
    int64_t key;         /* index in the dataset's grid of chunk rows */
    int64_t first[4];    /* first element of the row's first chunk */
    unsigned char *data; /* [per_row, chunk_bytes] each chunk contiguous (planes with gzip) */
    uint8_t *touched;    /* [per_row] 1: the chunk was written (and zeroed first) */
    uint64_t opened;     /* when it was opened, for eviction */
} staged_row;

/* One chunk of a queued row, compressed into out + k·bound. */
typedef struct chunk_job {
    int64_t slot, index;
    size_t size; /* compressed bytes (0: failed) */
    int done;    /* compressed (by dfl_dump_stream_work or the pump) */
} chunk_job;

struct dfl__direct {
    int gzip; /* -1: raw chunks, stored as soon as their row is complete */
    size_t elem, chunk_elems, chunk_bytes, row_bytes;
    int64_t dims[4], cdims[4], grid[4]; /* grid: chunks per dimension */
    int64_t per_row;                    /* chunks in a chunk row */
    uint8_t *stored;                    /* [chunk rows in the dataset] 1: complete (queued or stored) */
    staged_row *rows;                   /* [nrows] */
    int64_t nrows;
    uint64_t clock;
    int failed;         /* a chunk could not be stored: every later call fails */
    int team, nthreads; /* the pump's team; compressors */
    int64_t *queue;     /* [nrows] queued slots, oldest first */
    int64_t nqueued;
    chunk_job *jobs; /* [nrows · per_row] the queued rows' chunks, queue order */
    int64_t njobs;   /* jobs listed so far, for queue entries [0, jq) */
    int64_t jq;
    unsigned char *out; /* [nrows · per_row, bound] their compressed bytes */
    size_t bound;
    struct libdeflate_compressor **zc; /* [nthreads], one per thread */
};

dfl_dump_direct dfl_dump_direct_default(void)
{
    dfl_dump_direct o = {1, 1, 0};
    return o;
}

/* Level 1's zlib stream for shuffled planes p[n]: the low half of the byte planes (the
 * low mantissa bits, close to random, which deflate would spend most of its time on
 * for little gain) in stored blocks, then the high half (sign, exponent, top mantissa
 * bits) deflated with runs as its only matches (deflate_rle.h), then the Adler-32 of
 * all n bytes. Standard RFC 1950/1951: any inflater reads it. Returns the size, 0 when
 * out[cap] is too small. */
static size_t zlib_split(const unsigned char *p, size_t n, size_t elem, unsigned char *out, size_t cap)
{
    size_t low = n / elem * (elem / 2), at = 2;
    if (cap < 2 + low + 5 * (low / 65535 + 1) + 4) return 0;
    out[0] = 0x78;                                  /* deflate, 32 KB window */
    out[1] = 0x01;                                  /* "fastest" level hint; (0x78·256 + 0x01) % 31 == 0 */
    at += dfl__deflate_stored(p, low, out + at, 0); /* BFINAL 0: the high half follows */
    size_t z = dfl__deflate_rle(p + low, n - low, out + at, cap - at - 4);
    if (z == 0) return 0;
    at += z;
    uint32_t a = libdeflate_adler32(1, p, n);
    out[at] = (unsigned char)(a >> 24);
    out[at + 1] = (unsigned char)(a >> 16);
    out[at + 2] = (unsigned char)(a >> 8);
    out[at + 3] = (unsigned char)a;
    return at + 4;
}

void dfl__direct_free(direct_state *x)
{
    if (!x) return;
    for (int64_t i = 0; x->rows && i < x->nrows; i++) {
        free(x->rows[i].data);
        free(x->rows[i].touched);
    }
    for (int i = 0; x->zc && i < x->nthreads; i++)
        if (x->zc[i]) libdeflate_free_compressor(x->zc[i]);
    free(x->rows);
    free(x->zc);
    free(x->out);
    free(x->jobs);
    free(x->queue);
    free(x->stored);
    free(x);
}

/* Staging, compressors and buffers for a dataset of dims chunked by cdims; NULL when out
 * of memory or a size overflows. */
static direct_state *direct_alloc(int nd, const int64_t *dims, const hsize_t *cdims, size_t elem,
                                  const dfl_dump_direct *opt)
{
    direct_state *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->gzip = opt->gzip;
    x->elem = elem;
    x->nrows = opt->open_rows;
    /* compressors for the pump's team and for any thread of the caller's OpenMP team
     * (dfl_dump_stream_work) */
    x->team = opt->threads > 0 ? opt->threads : omp_get_max_threads();
    x->nthreads = x->team > omp_get_max_threads() ? x->team : omp_get_max_threads();
    size_t n_keys = 1, cap = 0;
    int ok = 1;
    x->chunk_elems = 1;
    for (int i = 0; i < nd; i++) {
        x->dims[i] = dims[i];
        x->cdims[i] = (int64_t)cdims[i];
        x->grid[i] = (dims[i] + x->cdims[i] - 1) / x->cdims[i];
        ok &= dfl__mul_ok(x->chunk_elems, (size_t)cdims[i], &x->chunk_elems);
        if (i < nd - 1) ok &= dfl__mul_ok(n_keys, (size_t)(x->grid[i] > 0 ? x->grid[i] : 1), &n_keys);
    }
    x->per_row = x->grid[nd - 1] > 0 ? x->grid[nd - 1] : 1;
    ok = ok && dfl__mul_ok(x->chunk_elems, elem, &x->chunk_bytes) &&
         dfl__mul_ok(x->chunk_bytes, (size_t)x->per_row, &x->row_bytes) &&
         dfl__mul_ok((size_t)x->nrows, (size_t)x->per_row, &cap) && (x->stored = calloc(n_keys, 1)) &&
         (x->rows = dfl__calloc_array((size_t)x->nrows, sizeof *x->rows)) &&
         (x->queue = dfl__alloc_array((size_t)x->nrows, sizeof *x->queue));
    for (int64_t i = 0; ok && i < x->nrows; i++)
        ok = (x->rows[i].data = malloc(x->row_bytes)) && (x->rows[i].touched = malloc((size_t)x->per_row));
    if (ok && x->gzip >= 0) {
        ok = (x->zc = dfl__calloc_array((size_t)x->nthreads, sizeof *x->zc)) &&
             (x->jobs = dfl__alloc_array(cap, sizeof *x->jobs));
        /* level 1 needs no compressor of libdeflate's (zlib_split) */
        for (int i = 0; ok && x->gzip != 1 && i < x->nthreads; i++)
            ok = (x->zc[i] = libdeflate_alloc_compressor(x->gzip)) != NULL;
        if (ok) {
            /* the split stream's worst case: the low half stored, the high half as
             * dfl__deflate_rle's bound, plus the zlib header and Adler-32 */
            size_t low = x->chunk_bytes / x->elem * (x->elem / 2);
            x->bound = x->gzip == 1 ? 2 + low + 5 * (low / 65535 + 1) + dfl__deflate_rle_bound(x->chunk_bytes - low) + 4
                                    : libdeflate_zlib_compress_bound(x->zc[0], x->chunk_bytes);
            ok = (x->out = dfl__alloc_array(cap, x->bound)) != NULL;
        }
    }
    if (!ok) {
        dfl__direct_free(x);
        return NULL;
    }
    return x;
}

dfl_status dfl_dump_stream_create_direct(dfl_dump *d, const char *name, dfl_h5_type type, int ndim, const int64_t *dims,
                                         const int64_t *chunk, const dfl_dump_direct *opt, dfl_dump_stream **out,
                                         dfl_error *err)
{
    *out = NULL;
    if (type != DFL_H5_F32 && type != DFL_H5_F16)
        return dfl__fail(err, DFL_ERR_USAGE, "stream '%s': direct streams hold f32 or f16", name);
    if (ndim < 1 || ndim > 4) return dfl__fail(err, DFL_ERR_USAGE, "stream '%s': bad rank %d", name, ndim);
    if (opt->gzip < -1 || opt->gzip > 9 || opt->open_rows < 1 || opt->threads < 0 || opt->threads > 1024)
        return dfl__fail(err, DFL_ERR_USAGE, "stream '%s': gzip level %d (-1 to 9), %lld open rows, %d threads", name,
                         opt->gzip, (long long)opt->open_rows, opt->threads);
    hsize_t hc[4];
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0) return dfl__fail(err, DFL_ERR_USAGE, "stream '%s': negative extent", name);
        hc[i] = (hsize_t)(chunk[i] < 1 ? 1 : chunk[i]);
    }
    dfl_dump_stream *s = calloc(1, sizeof *s);
    if (!s || !(s->direct = direct_alloc(ndim, dims, hc, type == DFL_H5_F16 ? 2 : 4, opt))) {
        free(s);
        return dfl__fail(err, DFL_ERR_NOMEM, "stream '%s': out of memory for chunk buffers", name);
    }
    /* the pipeline HDF5 would apply itself, declared so readers undo it; the writer
     * applies it (filter mask 0 on every chunk) */
    dfl_status st = dfl__dump_stream_open(d, name, type, ndim, dims, hc, opt->gzip, H5P_DEFAULT, s, err);
    if (st) {
        dfl__direct_free(s->direct);
        free(s);
        return st;
    }
    *out = s;
    return DFL_OK;
}

/* Hand chunk `index` of row r to HDF5 (bytes[size]); on failure the stream and the
 * dump are marked failed. */
static dfl_status store_chunk(dfl_dump_stream *s, const staged_row *r, int64_t index, const void *bytes, size_t size,
                              dfl_error *err)
{
    direct_state *x = s->direct;
    hsize_t off[4];
    for (int i = 0; i < s->ndim; i++)
        off[i] = (hsize_t)r->first[i];
    off[s->ndim - 1] = (hsize_t)(index * x->cdims[s->ndim - 1]);
    if (size > 0 && H5Dwrite_chunk(s->dset, H5P_DEFAULT, 0, off, size, bytes) >= 0) return DFL_OK;
    char at[96];
    int used = 0;
    for (int i = 0; i < s->ndim; i++)
        used += snprintf(at + used, sizeof at - (size_t)used, "%s%llu", i ? ", " : "", (unsigned long long)off[i]);
    x->failed = 1;
    s->d->failed = 1; /* the file can only be discarded now */
    const char *why = dfl__os_reason();
    return dfl__fail(err, DFL_ERR_HDF5, "%s: HDF5 failed to write the chunk at [%s]: %s", s->d->path, at,
                     why ? why : "disk full or file too large?");
}

static dfl_status broken(dfl_dump_stream *s, dfl_error *err)
{
    return dfl__fail(err, DFL_ERR_HDF5, "%s: an earlier chunk write failed", s->d->path);
}

/* Free slot i (its row stored). */
static void release(direct_state *x, int64_t i)
{
    x->rows[i].state = ROW_FREE;
}

/* Row i is complete: raw chunks go to HDF5 now, the others wait for the pump. */
static dfl_status submit_row(dfl_dump_stream *s, int64_t i, dfl_error *err)
{
    direct_state *x = s->direct;
    staged_row *r = &x->rows[i];
    x->stored[r->key] = 1; /* closed from now on, though its chunks may still be queued */
    if (x->gzip >= 0) {
        r->state = ROW_QUEUED;
        x->queue[x->nqueued++] = i;
        return DFL_OK;
    }
    for (int64_t c = 0; c < x->per_row; c++)
        if (r->touched[c]) {
            dfl_status st = store_chunk(s, r, c, r->data + (size_t)c * x->chunk_bytes, x->chunk_bytes, err);
            if (st) return st;
        }
    release(x, i);
    return DFL_OK;
}

/* Job k's chunk deflated by compressor w (a team thread's own). */
static void compress_job(direct_state *x, int64_t k, int w)
{
    chunk_job *j = &x->jobs[k];
    if (j->done) return;
    const unsigned char *planes = x->rows[j->slot].data + (size_t)j->index * x->chunk_bytes;
    unsigned char *out = x->out + (size_t)k * x->bound;
    j->size = x->gzip == 1 ? zlib_split(planes, x->chunk_bytes, x->elem, out, x->bound)
                           : libdeflate_zlib_compress(x->zc[w], planes, x->chunk_bytes, out, x->bound);
    j->done = 1;
}

/* List the chunks of the rows queued since the last listing as jobs; returns the count. */
static int64_t list_jobs(direct_state *x)
{
    for (; x->jq < x->nqueued; x->jq++)
        for (int64_t c = 0; c < x->per_row; c++)
            if (x->rows[x->queue[x->jq]].touched[c]) x->jobs[x->njobs++] = (chunk_job){x->queue[x->jq], c, 0, 0};
    return x->njobs;
}

/* Deflate every queued chunk on the team, store them in queue order, free their slots. */
static dfl_status pump(dfl_dump_stream *s, dfl_error *err)
{
    direct_state *x = s->direct;
    int64_t n = list_jobs(x), left = 0;
    for (int64_t k = 0; k < n; k++)
        left += !x->jobs[k].done;
    const int team = (int64_t)x->team < left ? x->team : (int)left;
#pragma omp parallel for schedule(dynamic, 1) num_threads(team > 1 ? team : 1) if (team > 1 && !omp_in_parallel())
    for (int64_t k = 0; k < n; k++)
        compress_job(x, k, omp_get_thread_num());
    dfl_status st = DFL_OK;
    for (int64_t k = 0; k < n && !st; k++)
        st = store_chunk(s, &x->rows[x->jobs[k].slot], x->jobs[k].index, x->out + (size_t)k * x->bound, x->jobs[k].size,
                         err);
    for (int64_t q = 0; q < x->nqueued; q++)
        release(x, x->queue[q]);
    x->nqueued = x->jq = x->njobs = 0;
    return st;
}

/* The staged row for chunk-row key (first element `first`): held, or opened in a free
 * slot (pumping the queue, or queueing the oldest incomplete row, when none is). */
static dfl_status open_row(dfl_dump_stream *s, int64_t key, const int64_t *first, staged_row **out, dfl_error *err)
{
    direct_state *x = s->direct;
    for (int64_t i = 0; i < x->nrows; i++)
        if (x->rows[i].state == ROW_FILLING && x->rows[i].key == key) {
            *out = &x->rows[i];
            return DFL_OK;
        }
    if (x->stored[key])
        return dfl__fail(err, DFL_ERR_USAGE,
                         "%s: a write reaches chunks already stored (direct streams are written in "
                         "row order)",
                         s->d->path);
    for (;;) {
        for (int64_t i = 0; i < x->nrows; i++) {
            staged_row *r = &x->rows[i];
            if (r->state != ROW_FREE) continue;
            r->state = ROW_FILLING;
            r->key = key;
            memcpy(r->first, first, sizeof r->first);
            memset(r->touched, 0, (size_t)x->per_row);
            r->opened = x->clock++;
            *out = r;
            return DFL_OK;
        }
        dfl_status st;
        if (!x->nqueued) {
            /* every slot holds an incomplete row: the oldest goes as it is */
            int64_t old = 0;
            for (int64_t i = 1; i < x->nrows; i++)
                if (x->rows[i].opened < x->rows[old].opened) old = i;
            if ((st = submit_row(s, old, err))) return st;
        }
        if (x->nqueued && (st = pump(s, err))) return st;
    }
}

/* n values from src into chunk element `at` of a chunk (planes with gzip). */
static void fill(const direct_state *x, unsigned char *chunk, size_t at, const float *from, size_t n)
{
    const size_t planes = x->chunk_elems;
    if (x->elem == 2 && x->gzip >= 0) {
        dfl__f16_planes(from, chunk + at, chunk + planes + at, n);
    } else if (x->elem == 2) {
        uint16_t *to = (uint16_t *)(void *)chunk + at;
        if (!dfl__f16_pack(from, to, n))
            for (size_t e = 0; e < n; e++)
                to[e] = dfl_f32_to_f16(from[e]);
    } else if (x->gzip >= 0) {
        for (size_t e = 0; e < n; e++) {
            uint32_t v;
            memcpy(&v, &from[e], 4);
            chunk[at + e] = (unsigned char)v;
            chunk[planes + at + e] = (unsigned char)(v >> 8);
            chunk[2 * planes + at + e] = (unsigned char)(v >> 16);
            chunk[3 * planes + at + e] = (unsigned char)(v >> 24);
        }
    } else {
        memcpy(chunk + at * 4, from, n * 4);
    }
}

/* Direct write of the box start + count (see dfl_dump_stream_write_f32). */
dfl_status dfl__direct_write(dfl_dump_stream *s, const int64_t *start, const int64_t *count, const float *data,
                             int64_t ld, dfl_error *err)
{
    direct_state *x = s->direct;
    const int nd = s->ndim, last = nd - 1;
    const int64_t cl = x->cdims[last];
    if (x->failed) return broken(s, err);
    for (int i = 0; i < nd; i++)
        if (start[i] < 0 || count[i] < 0 || start[i] + count[i] > x->dims[i])
            return dfl__fail(err, DFL_ERR_USAGE, "%s: write outside the dataset's extent", s->d->path);
    for (int i = 0; i < nd; i++)
        if (count[i] == 0) return DFL_OK;
    int64_t idx[4] = {0, 0, 0, 0};
    for (int i = 0; i < last; i++)
        idx[i] = start[i];
    const float *src = data;
    dfl_status st;
    for (;;) {
        /* one row of the box: idx[0..last) */
        int64_t key = 0, inner = 0, first[4] = {0, 0, 0, 0};
        int is_last = 1;
        for (int i = 0; i < last; i++) {
            int64_t c0 = idx[i] / x->cdims[i] * x->cdims[i],
                    end = c0 + x->cdims[i] < x->dims[i] ? c0 + x->cdims[i] : x->dims[i];
            key = key * x->grid[i] + idx[i] / x->cdims[i];
            inner = inner * x->cdims[i] + (idx[i] - c0);
            first[i] = c0;
            is_last &= idx[i] == end - 1;
        }
        staged_row *r = NULL;
        if ((st = open_row(s, key, first, &r, err))) return st;
        for (int64_t j = start[last], end = start[last] + count[last]; j < end;) {
            int64_t c = j / cl, stop = (c + 1) * cl < end ? (c + 1) * cl : end;
            unsigned char *chunk = r->data + (size_t)c * x->chunk_bytes;
            if (!r->touched[c]) {
                memset(chunk, 0, x->chunk_bytes); /* the fill value where nothing is written */
                r->touched[c] = 1;
            }
            fill(x, chunk, (size_t)inner * (size_t)cl + (size_t)(j - c * cl), src + (j - start[last]),
                 (size_t)(stop - j));
            j = stop;
        }
        if (is_last && (st = submit_row(s, r - x->rows, err))) return st;
        src += ld;
        int i = last - 1;
        while (i >= 0 && ++idx[i] == start[i] + count[i]) {
            idx[i] = start[i];
            i--;
        }
        if (i < 0) break;
    }
    return DFL_OK;
}

int64_t dfl__direct_jobs(dfl_dump_stream *s)
{
    direct_state *x = s->direct;
    return x->gzip < 0 || x->failed ? 0 : list_jobs(x);
}

void dfl__direct_work(dfl_dump_stream *s, int64_t k, int thread)
{
    direct_state *x = s->direct;
    if (thread >= 0 && thread < x->nthreads && k >= 0 && k < x->njobs) compress_job(x, k, thread);
}

dfl_status dfl__direct_pump(dfl_dump_stream *s, dfl_error *err)
{
    direct_state *x = s->direct;
    if (x->failed) return broken(s, err);
    return x->nqueued ? pump(s, err) : DFL_OK;
}

dfl_status dfl_dump_stream_flush(dfl_dump_stream *s, dfl_error *err)
{
    direct_state *x = s->direct;
    if (!x) return DFL_OK;
    if (x->failed) return broken(s, err);
    dfl_status st = DFL_OK;
    for (int64_t i = 0; i < x->nrows && !st; i++)
        if (x->rows[i].state == ROW_FILLING) st = submit_row(s, i, err);
    return st ? st : dfl__direct_pump(s, err);
}
