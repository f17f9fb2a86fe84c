/* dump_direct.c — direct streams (dfl_dump_stream_create_direct): chunks assembled in
 * memory, shuffled and deflated (libdeflate) by compressor threads, stored whole with
 * H5Dwrite_chunk. Hand-written because it measurably wins: HDF5's own filter path
 * compresses one chunk at a time on the caller's thread (docs/format.md, maps). */
#include "dump/dump.h"

#include <hdf5.h>
#include <libdeflate.h>
#include <emmintrin.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "dump/dump_writer.h"
#include "dump/f16_pack.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "direct chunk writes store memory bytes as the file's little-endian elements"
#endif

/* How a direct stream runs: the caller's thread fills chunk rows in staging slots; a
 * complete row's chunks go to a queue that compressor threads (pthreads, asleep when
 * idle) shuffle and deflate while the caller carries on (the forward pass, in probe);
 * the caller's thread hands finished chunks to HDF5 (which is not thread-safe) in queue
 * order, so the file is the same whatever the thread count, and frees the slot once
 * all its chunks are stored. When it needs a slot or flushes, it compresses queued
 * chunks itself instead of waiting. */

typedef enum row_state { ROW_FREE = 0, ROW_FILLING, ROW_QUEUED } row_state;

/* One chunk row held in memory. */
typedef struct staged_row {
    row_state state;
    int64_t key;         /* index in the dataset's grid of chunk rows */
    int64_t first[4];    /* first element of the row's first chunk */
    unsigned char *data; /* [per_row, chunk_elems] elements, each chunk contiguous, row-major */
    uint8_t *touched;    /* [per_row] 1: the chunk was written (and zeroed first) */
    int64_t pending;     /* queued chunks not yet stored */
    uint64_t opened;     /* when it was opened, for eviction */
} staged_row;

/* One queued chunk. */
typedef struct chunk_job {
    staged_row *row;
    int64_t index; /* along the last dimension */
    size_t size;   /* compressed bytes (0: failed) */
    int done;      /* compressed, under the lock */
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
    int failed; /* a chunk could not be stored: every later call fails */
    /* the queue: a ring of cap jobs; [written, taken) being compressed or done,
     * [taken, queued) waiting */
    chunk_job *jobs;    /* [cap] */
    unsigned char *out; /* [cap, bound] compressed bytes of job k at (k % cap)·bound */
    size_t cap, bound;
    uint64_t written, taken, queued;
    int nworkers, started, quit, sync; /* sync: lock and conditions initialised */
    pthread_t *threads;                /* [nworkers] */
    pthread_mutex_t lock;
    pthread_cond_t work, done;         /* a job was queued / compressed */
    struct libdeflate_compressor **zc; /* [nworkers + 1], the last one the caller's */
    unsigned char *shuffled;           /* [nworkers + 1, chunk_bytes] */
};

dfl_dump_direct dfl_dump_direct_default(void)
{
    dfl_dump_direct o = {1, 1, 0};
    return o;
}

/* HDF5's byte shuffle: byte b of element e goes to b·n + e. */
static void shuffle_bytes(const unsigned char *in, unsigned char *out, size_t n, size_t elem)
{
    size_t e = 0;
    if (elem == 2) {
        /* SSE2 (every x86-64): low bytes and high bytes of 16 halves at a time */
        const __m128i lo = _mm_set1_epi16(0xff);
        for (; e + 16 <= n; e += 16) {
            __m128i a = _mm_loadu_si128((const __m128i *)(in + 2 * e)),
                    b = _mm_loadu_si128((const __m128i *)(in + 2 * e + 16));
            _mm_storeu_si128((__m128i *)(out + e), _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo)));
            _mm_storeu_si128((__m128i *)(out + n + e), _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
        }
    }
    for (; e < n; e++)
        for (size_t b = 0; b < elem; b++)
            out[b * n + e] = in[e * elem + b];
}

/* Level 1's zlib stream for shuffled planes p[n]: the low half of the byte planes (the
 * low mantissa bits, close to random, which deflate would spend most of its time on
 * for little gain) in stored blocks, then the high half (sign, exponent, top mantissa
 * bits) deflated, then the Adler-32 of all n bytes. Standard RFC 1950/1951: any
 * inflater reads it. Returns the size, 0 when out[cap] is too small. */
static size_t zlib_split(struct libdeflate_compressor *c, const unsigned char *p, size_t n, size_t elem,
                         unsigned char *out, size_t cap)
{
    size_t low = n / elem * (elem / 2), at = 2;
    if (cap < 2 + low + 5 * (low / 65535 + 1) + 4) return 0;
    out[0] = 0x78; /* deflate, 32 KB window */
    out[1] = 0x01; /* "fastest" level hint; (0x78·256 + 0x01) % 31 == 0 */
    for (size_t done = 0; done < low;) {
        size_t len = low - done < 65535 ? low - done : 65535;
        out[at] = 0x00; /* BFINAL 0, BTYPE 00 (stored), padded to the byte */
        out[at + 1] = (unsigned char)(len & 0xff);
        out[at + 2] = (unsigned char)(len >> 8);
        out[at + 3] = (unsigned char)(~len & 0xff);
        out[at + 4] = (unsigned char)((~len >> 8) & 0xff);
        memcpy(out + at + 5, p + done, len);
        at += 5 + len;
        done += len;
    }
    size_t z = libdeflate_deflate_compress(c, p + low, n - low, out + at, cap - at - 4);
    if (z == 0) return 0;
    at += z;
    uint32_t a = libdeflate_adler32(1, p, n);
    out[at] = (unsigned char)(a >> 24);
    out[at + 1] = (unsigned char)(a >> 16);
    out[at + 2] = (unsigned char)(a >> 8);
    out[at + 3] = (unsigned char)a;
    return at + 4;
}

/* Compress job k with compressor w (no lock held: the job and its row are not touched
 * by anyone else until done is set). */
static void compress_job(direct_state *x, uint64_t k, int w)
{
    chunk_job *j = &x->jobs[k % x->cap];
    const unsigned char *chunk = j->row->data + (size_t)j->index * x->chunk_bytes;
    unsigned char *planes = x->shuffled + (size_t)w * x->chunk_bytes, *out = x->out + (k % x->cap) * x->bound;
    shuffle_bytes(chunk, planes, x->chunk_elems, x->elem);
    j->size = x->gzip == 1 ? zlib_split(x->zc[w], planes, x->chunk_bytes, x->elem, out, x->bound)
                           : libdeflate_zlib_compress(x->zc[w], planes, x->chunk_bytes, out, x->bound);
}

typedef struct worker_arg {
    direct_state *x;
    int w;
} worker_arg;

static void *compressor(void *arg)
{
    direct_state *x = ((worker_arg *)arg)->x;
    int w = ((worker_arg *)arg)->w;
    free(arg);
    pthread_mutex_lock(&x->lock);
    while (!x->quit) {
        if (x->taken == x->queued) {
            pthread_cond_wait(&x->work, &x->lock);
            continue;
        }
        uint64_t k = x->taken++;
        pthread_mutex_unlock(&x->lock);
        compress_job(x, k, w);
        pthread_mutex_lock(&x->lock);
        x->jobs[k % x->cap].done = 1;
        pthread_cond_broadcast(&x->done);
    }
    pthread_mutex_unlock(&x->lock);
    return NULL;
}

void dfl__direct_free(direct_state *x)
{
    if (!x) return;
    if (x->started) {
        pthread_mutex_lock(&x->lock);
        x->quit = 1;
        pthread_cond_broadcast(&x->work);
        pthread_mutex_unlock(&x->lock);
        for (int i = 0; i < x->started; i++)
            pthread_join(x->threads[i], NULL);
    }
    if (x->sync) {
        pthread_cond_destroy(&x->done);
        pthread_cond_destroy(&x->work);
        pthread_mutex_destroy(&x->lock);
    }
    for (int64_t i = 0; x->rows && i < x->nrows; i++) {
        free(x->rows[i].data);
        free(x->rows[i].touched);
    }
    for (int i = 0; x->zc && i <= x->nworkers; i++)
        if (x->zc[i]) libdeflate_free_compressor(x->zc[i]);
    free(x->threads);
    free(x->rows);
    free(x->zc);
    free(x->shuffled);
    free(x->out);
    free(x->jobs);
    free(x->stored);
    free(x);
}

/* Staging, compressors, buffers and threads for a dataset of dims chunked by cdims;
 * NULL when out of memory, a size overflows or a thread cannot start. */
static direct_state *direct_alloc(int nd, const int64_t *dims, const hsize_t *cdims, size_t elem,
                                  const dfl_dump_direct *opt)
{
    direct_state *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->gzip = opt->gzip;
    x->elem = elem;
    x->nrows = opt->open_rows;
    x->nworkers = opt->threads > 0 ? opt->threads : omp_get_max_threads();
    size_t n_keys = 1;
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
         dfl__mul_ok((size_t)x->nrows, (size_t)x->per_row, &x->cap) && (x->stored = calloc(n_keys, 1)) &&
         (x->rows = dfl__calloc_array((size_t)x->nrows, sizeof *x->rows));
    for (int64_t i = 0; ok && i < x->nrows; i++)
        ok = (x->rows[i].data = malloc(x->row_bytes)) && (x->rows[i].touched = malloc((size_t)x->per_row));
    if (ok && x->gzip >= 0) {
        ok = (x->zc = dfl__calloc_array((size_t)x->nworkers + 1, sizeof *x->zc)) &&
             (x->shuffled = dfl__alloc_array((size_t)x->nworkers + 1, x->chunk_bytes)) &&
             (x->jobs = dfl__calloc_array(x->cap, sizeof *x->jobs)) &&
             (x->threads = dfl__calloc_array((size_t)x->nworkers, sizeof *x->threads));
        /* level 1 deflates only the high planes, with libdeflate's level 2: its level 1
         * matcher loses 10% of size on these maps for no speed */
        int level = x->gzip == 1 ? 2 : x->gzip;
        for (int i = 0; ok && i <= x->nworkers; i++)
            ok = (x->zc[i] = libdeflate_alloc_compressor(level)) != NULL;
        if (ok) {
            /* the split stream's worst case: every byte stored, plus headers */
            size_t split = 2 + x->chunk_bytes + 5 * (x->chunk_bytes / 65535 + 2) + 4 +
                           libdeflate_deflate_compress_bound(x->zc[0], x->chunk_bytes);
            x->bound = libdeflate_zlib_compress_bound(x->zc[0], x->chunk_bytes);
            if (x->gzip == 1 && split > x->bound) x->bound = split;
            ok = (x->out = dfl__alloc_array(x->cap, x->bound)) != NULL;
        }
        if (ok) {
            pthread_mutex_init(&x->lock, NULL);
            pthread_cond_init(&x->work, NULL);
            pthread_cond_init(&x->done, NULL);
            x->sync = 1;
        }
        for (int i = 0; ok && i < x->nworkers; i++) {
            worker_arg *a = malloc(sizeof *a);
            ok = a != NULL;
            if (ok) *a = (worker_arg){x, i};
            if (ok && pthread_create(&x->threads[i], NULL, compressor, a) != 0) {
                free(a);
                ok = 0;
            }
            if (ok) x->started++;
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
        return dfl__fail(err, DFL_ERR_NOMEM, "stream '%s': out of memory (or threads) for chunk buffers", name);
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

/* Queue the touched chunks of a complete row (raw chunks are stored at once). */
static dfl_status submit_row(dfl_dump_stream *s, staged_row *r, dfl_error *err)
{
    direct_state *x = s->direct;
    r->state = ROW_QUEUED;
    x->stored[r->key] = 1; /* closed from now on, though its chunks may still be queued */
    if (x->gzip < 0) {
        for (int64_t c = 0; c < x->per_row; c++)
            if (r->touched[c]) {
                dfl_status st = store_chunk(s, r, c, r->data + (size_t)c * x->chunk_bytes, x->chunk_bytes, err);
                if (st) return st;
            }
        r->state = ROW_FREE;
        return DFL_OK;
    }
    pthread_mutex_lock(&x->lock);
    r->pending = 0;
    for (int64_t c = 0; c < x->per_row; c++)
        if (r->touched[c]) {
            /* at most nrows rows are queued, each with at most per_row chunks: no overrun */
            x->jobs[x->queued % x->cap] = (chunk_job){r, c, 0, 0};
            x->queued++;
            r->pending++;
        }
    if (r->pending == 0) r->state = ROW_FREE;
    pthread_cond_broadcast(&x->work);
    pthread_mutex_unlock(&x->lock);
    return DFL_OK;
}

/* Store compressed chunks in queue order: those already done, or (wait) every one queued
 * before `until`, compressing waiting chunks on this thread meanwhile. */
static dfl_status drain(dfl_dump_stream *s, uint64_t until, dfl_error *err)
{
    direct_state *x = s->direct;
    if (x->gzip < 0) return DFL_OK;
    dfl_status st = DFL_OK;
    pthread_mutex_lock(&x->lock);
    while (x->written < x->queued && !st) {
        chunk_job *j = &x->jobs[x->written % x->cap];
        if (!j->done) {
            if (x->written >= until) break;
            if (x->taken < x->queued) {
                uint64_t k = x->taken++;
                pthread_mutex_unlock(&x->lock);
                compress_job(x, k, x->nworkers);
                pthread_mutex_lock(&x->lock);
                x->jobs[k % x->cap].done = 1;
            } else {
                pthread_cond_wait(&x->done, &x->lock);
            }
            continue;
        }
        uint64_t k = x->written;
        pthread_mutex_unlock(&x->lock);
        st = store_chunk(s, j->row, j->index, x->out + (k % x->cap) * x->bound, j->size, err);
        pthread_mutex_lock(&x->lock);
        x->written++;
        if (--j->row->pending == 0) j->row->state = ROW_FREE; /* the slot can be reused */
    }
    pthread_mutex_unlock(&x->lock);
    return st;
}

static dfl_status broken(dfl_dump_stream *s, dfl_error *err)
{
    return dfl__fail(err, DFL_ERR_HDF5, "%s: an earlier chunk write failed", s->d->path);
}

/* The staged row for chunk-row key (first element `first`): held, or opened in a free
 * slot (storing queued rows, then queueing the oldest incomplete one, when none is). */
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
        staged_row *r = NULL;
        int queued = 0;
        pthread_mutex_t *lk = x->gzip >= 0 ? &x->lock : NULL;
        if (lk) pthread_mutex_lock(lk);
        for (int64_t i = 0; i < x->nrows; i++) {
            if (!r && x->rows[i].state == ROW_FREE) r = &x->rows[i];
            queued += x->rows[i].state == ROW_QUEUED;
        }
        if (lk) pthread_mutex_unlock(lk);
        if (r) {
            r->state = ROW_FILLING;
            r->key = key;
            memcpy(r->first, first, sizeof r->first);
            memset(r->touched, 0, (size_t)x->per_row);
            r->opened = x->clock++;
            *out = r;
            return DFL_OK;
        }
        dfl_status st;
        if (!queued) {
            /* every slot holds an incomplete row: the oldest goes as it is */
            staged_row *old = &x->rows[0];
            for (int64_t i = 1; i < x->nrows; i++)
                if (x->rows[i].opened < old->opened) old = &x->rows[i];
            if ((st = submit_row(s, old, err))) return st;
        }
        /* wait for the oldest queued row: everything queued so far */
        if ((st = drain(s, x->queued, err))) return st;
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
    /* store what the compressors finished since the last call (frees slots early) */
    dfl_status st = drain(s, 0, err);
    if (st) return st;
    int64_t idx[4] = {0, 0, 0, 0};
    for (int i = 0; i < last; i++)
        idx[i] = start[i];
    const float *src = data;
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
            size_t at = (size_t)inner * (size_t)cl + (size_t)(j - c * cl), n = (size_t)(stop - j);
            const float *from = src + (j - start[last]);
            if (x->elem == 4) {
                memcpy(chunk + at * 4, from, n * 4);
            } else {
                uint16_t *to = (uint16_t *)(void *)chunk + at;
                if (!dfl__f16_pack(from, to, n))
                    for (size_t t = 0; t < n; t++)
                        to[t] = dfl_f32_to_f16(from[t]);
            }
            j = stop;
        }
        if (is_last && (st = submit_row(s, r, err))) return st;
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

dfl_status dfl_dump_stream_flush(dfl_dump_stream *s, dfl_error *err)
{
    direct_state *x = s->direct;
    if (!x) return DFL_OK;
    if (x->failed) return broken(s, err);
    dfl_status st = DFL_OK;
    for (int64_t i = 0; i < x->nrows && !st; i++)
        if (x->rows[i].state == ROW_FILLING) st = submit_row(s, &x->rows[i], err);
    return st ? st : drain(s, x->queued, err);
}
