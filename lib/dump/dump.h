/* dump.h — writes the difflens HDF5 dump (docs/format.md "Dump", format_version 1).
 * Only lib/dump includes hdf5.h (dump.c and dump_direct.c write, dump_read.c and
 * dump_chunks.c read, dump_join.c copies); this header does not, so callers need not.
 * Every dataset and attribute name is in dump/dump_schema.h.
 *
 * Layout written here (see docs/format.md for the whole schema):
 *   /                      attrs format, format_version, model_type, config, model,
 *                          num_layers, num_heads, head_dim, logit_quant_bits,
 *                          logit_quant_granularity, rows
 *   /model/lambda          f32 [L]  (Diff models)
 *   /model/lambda_init     f32 [L]  (Diff models)
 *   /samples/NNNNNN/...    one group per prompt, attrs id, depth
 * The file is written under a temporary name beside the destination and renamed by
 * dfl_dump_finish; dfl_dump_abort removes it, so no half-written dump is ever left.
 */
#ifndef DFL_DUMP_H
#define DFL_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Only a pointer is passed in; model/model.h defines it (dump.c includes it), so
 * readers of dumps need not include the model layer. */
typedef struct dfl_model dfl_model;

#define DFL_DUMP_FORMAT         "difflens-dump"
#define DFL_DUMP_FORMAT_VERSION 1

/* Element types in the file; data passed in is float for F32/F16 (F16 is converted
 * with round-to-nearest-even), int32_t, uint8_t, double, uint64_t, uint32_t. */
typedef enum dfl_h5_type {
    DFL_H5_F32 = 0,
    DFL_H5_F16,
    DFL_H5_I32,
    DFL_H5_U8,
    DFL_H5_F64,
    DFL_H5_U64,
    DFL_H5_U32
} dfl_h5_type;

typedef struct dfl_dump dfl_dump;

typedef struct dfl_dump_info {
    const dfl_model *model;              /* config, config text and λ */
    const char *model_path;              /* as given by the user */
    int logit_quant_bits;                /* 0 = off */
    const char *logit_quant_granularity; /* "none", "tensor", "head", "row" */
    const char *rows;                    /* analysis-row rule, e.g. "last" */
} dfl_dump_info;

/* Create a dump at path (through a temporary file) and write the root attributes and
 * /model. DFL_ERR_EXISTS if path exists and !overwrite, DFL_ERR_IO, DFL_ERR_HDF5.
 * The caller owns *out and must end it with dfl_dump_finish or dfl_dump_abort. */
dfl_status dfl_dump_create(const char *path, int overwrite, const dfl_dump_info *info, dfl_dump **out, dfl_error *err);

/* The root attributes of a dump of a model that is no dfl_model (DiffCLIP and CLIP,
 * model/clip.h: docs/format.md "Image samples"). */
typedef struct dfl_dump_root {
    const char *model_type, *config_text, *model_path, *rows;
    int64_t num_layers, num_heads, head_dim;
} dfl_dump_root;

/* dfl_dump_create for such a model: the same file, root attributes from *root (logit
 * quantization off), no /model group (the caller writes what it has). */
dfl_status dfl_dump_create_root(const char *path, int overwrite, const dfl_dump_root *root, dfl_dump **out,
                                dfl_error *err);

/* Close the file and rename it into place; frees d even on failure (then nothing is
 * left behind). */
dfl_status dfl_dump_finish(dfl_dump *d, dfl_error *err);

/* Close and remove the temporary file; frees d. Accepts NULL. */
void dfl_dump_abort(dfl_dump *d);

/* Open group /samples/NNNNNN (index in file order) with attrs id (UTF-8, "" when
 * NULL) and depth (NaN when absent); later puts go into it until sample_end. */
dfl_status dfl_dump_sample_begin(dfl_dump *d, size_t index, const char *id, double depth, dfl_error *err);
dfl_status dfl_dump_sample_end(dfl_dump *d, dfl_error *err);

/* Write a whole dataset `name` (may contain '/'; missing groups are created) in the
 * current sample group, or at the root when no sample is open. dims[ndim]. */
dfl_status dfl_dump_put(dfl_dump *d, const char *name, dfl_h5_type type, int ndim, const int64_t *dims,
                        const void *data, dfl_error *err);

/* The same, stored chunked (rows of the first axis) with shuffle + deflate: exact, and
 * small for sparse data such as histograms. ndim >= 1. */
dfl_status dfl_dump_put_deflated(dfl_dump *d, const char *name, dfl_h5_type type, int ndim, const int64_t *dims,
                                 const void *data, dfl_error *err);

/* A dataset of n variable-length UTF-8 strings. */
dfl_status dfl_dump_put_strings(dfl_dump *d, const char *name, const char *const *s, size_t n, dfl_error *err);

/* One text s[len] (UTF-8) as a string dataset [1]: variable-length, as
 * dfl_dump_put_strings writes it, when s holds no U+0000; else fixed-length of exactly
 * len bytes (null-padded, so every byte is kept; a C-string type would end at the first
 * NUL) with the i64 attribute "length" (DFL_ATTR_LENGTH) = len. */
dfl_status dfl_dump_put_text(dfl_dump *d, const char *name, const char *s, size_t len, dfl_error *err);

/* Mark datasets scale_names[i] as dimension scales (named like the dataset's last
 * path component) and attach each to dimension i of `name`, labelled labels[i];
 * a NULL scale name leaves that dimension without a scale. */
dfl_status dfl_dump_attach_scales(dfl_dump *d, const char *name, int ndim, const char *const *scale_names,
                                  const char *const *labels, dfl_error *err);

/* Attributes on object `obj` (a dataset or group path in the current sample, or at
 * the root when no sample is open; "." is that group itself). f64 with n == 1 is a
 * scalar, otherwise a 1-D array. */
dfl_status dfl_dump_attr_f64(dfl_dump *d, const char *obj, const char *name, const double *v, size_t n, dfl_error *err);
dfl_status dfl_dump_attr_i64(dfl_dump *d, const char *obj, const char *name, int64_t v, dfl_error *err);
dfl_status dfl_dump_attr_str(dfl_dump *d, const char *obj, const char *name, const char *v, dfl_error *err);

/* ---- streamed datasets: created filled with 0, written in hyperslabs ---- */

typedef struct dfl_dump_stream dfl_dump_stream;

/* Create `name` with dims[ndim] (ndim <= 4), chunked by chunk[ndim]; gzip > 0 adds
 * shuffle + deflate at that level. open_chunks: how many chunks the writer may leave
 * partly written at once (sizes the chunk cache; 0 keeps HDF5's default). Chunks never
 * written stay unallocated and read as 0. Closed with dfl_dump_stream_close (NULL ok). */
dfl_status dfl_dump_stream_create(dfl_dump *d, const char *name, dfl_h5_type type, int ndim, const int64_t *dims,
                                  const int64_t *chunk, int gzip, int64_t open_chunks, dfl_dump_stream **out,
                                  dfl_error *err);

/* Streams whose chunks are assembled here: each chunk is filled in memory (already
 * shuffled), deflated (libdeflate) by an OpenMP team of the caller's when it pumps the
 * stream, and handed to HDF5 whole (H5Dwrite_chunk) by the caller's thread, in a fixed
 * order (the file does not depend on the thread count). The dataset declares the same shuffle + deflate
 * pipeline HDF5 itself would use, so every HDF5 reader (h5py, h5dump, H5Dread) reads it
 * without plugins. Level 1 stores the low half of the byte planes in deflate's stored
 * blocks and deflates the high half: still one standard zlib stream, twice as fast.
 *
 * A chunk row is the set of chunks that share their place in every dimension but the
 * last. Writes must reach each chunk row in row-major order: once the row holding its
 * last elements (the last index in every dimension but the last, clipped to the extent)
 * is written, the chunk row is complete and its touched chunks are queued, to be stored
 * by later calls or the flush; chunks never touched stay unallocated (they read as 0).
 * Writing into a chunk row after it was completed is DFL_ERR_USAGE. */
typedef struct dfl_dump_direct {
    int gzip;          /* -1: no filters (raw chunks); 0-9: shuffle + deflate at this level */
    int64_t open_rows; /* chunk rows held in memory at once, filling or queued (>= 1; when
                        * all are filling, the oldest is queued as it is) */
    int threads;       /* threads of the pump's OpenMP team; 0 = omp_get_max_threads() */
} dfl_dump_direct;

/* dfl_dump_direct {gzip 1, open_rows 1, threads 0}. */
dfl_dump_direct dfl_dump_direct_default(void);

/* Create a direct stream `name` (F32 or F16, ndim <= 4, chunked by chunk[ndim]). Memory:
 * open_rows chunk rows of staging plus, with gzip >= 0, one compressed chunk buffer for
 * each chunk of them. Closed with dfl_dump_stream_close after dfl_dump_stream_flush.
 * DFL_ERR_USAGE (bad type, rank or options), DFL_ERR_NOMEM, DFL_ERR_HDF5. */
dfl_status dfl_dump_stream_create_direct(dfl_dump *d, const char *name, dfl_h5_type type, int ndim, const int64_t *dims,
                                         const int64_t *chunk, const dfl_dump_direct *opt, dfl_dump_stream **out,
                                         dfl_error *err);

/* Deflate and store the complete chunk rows queued so far, on a team of opt.threads (a
 * no-op for other streams, or when called inside a parallel region: then serially).
 * Writes pump by themselves when they need a slot; a caller pumps sooner to free the
 * slots and do the work where it suits it (probe: after each block of map rows). Errors
 * as dfl_dump_stream_flush. */
dfl_status dfl_dump_stream_pump(dfl_dump_stream *s, dfl_error *err);

/* The deflate work queued so far as jobs [0, n), for threads the caller runs anyway
 * (probe: the attention's own parallel region, so no extra region and no barrier):
 * dfl_dump_stream_work(s, k, thread) deflates job k with thread's compressor (thread
 * below max(opt.threads, omp_get_max_threads()), else it does nothing), concurrently
 * for distinct k, without allocating or I/O; the next pump stores them, deflating the
 * jobs no thread took. Both only between writes and pumps; 0 for other streams and raw
 * chunks. */
int64_t dfl_dump_stream_jobs(dfl_dump_stream *s);
void dfl_dump_stream_work(dfl_dump_stream *s, int64_t k, int thread);

/* Store every chunk row still held or queued (a no-op for other streams). A direct
 * stream closed without it loses those. DFL_ERR_HDF5 when HDF5 cannot write a chunk (a
 * full disk, a file-size limit; the dump can then only be aborted). */
dfl_status dfl_dump_stream_flush(dfl_dump_stream *s, dfl_error *err);

/* Write the box start[ndim] + count[ndim] from float data laid out as rows of the last
 * dimension with stride ld >= count[ndim-1]. Only F32 and F16 streams. On a direct
 * stream this may store complete chunk rows (errors as dfl_dump_stream_flush). */
dfl_status dfl_dump_stream_write_f32(dfl_dump_stream *s, const int64_t *start, const int64_t *count, const float *data,
                                     int64_t ld, dfl_error *err);
void dfl_dump_stream_close(dfl_dump_stream *s);

#endif
