/* dump_read.h — reads difflens HDF5 dumps (docs/format.md "Dump", format_version 1).
 * Only lib/dump includes hdf5.h; a reader of this header does not need it.
 *
 * What a reader sees (docs/format.md has the whole schema):
 *   /                         attrs format = "difflens-dump", format_version, model_type, ...
 *   /model/lambda             f32 [L]                   (Diff models)
 *   /samples/NNNNNN/          attrs id, depth           one group per prompt, file order
 *     tokens i32 [T], segments u8 [T], token_text str [T] (optional)
 *     attn/map1 (map2, diff)  f16 or f32 [Ls, Hs, R, T] with scales attn/layers [Ls],
 *                             attn/heads [Hs], attn/rows [R] naming what was captured
 * Paths given to the functions below are relative to the root ("samples/000003/tokens");
 * a leading '/' is accepted. Half-precision data is read raw (no HDF5 soft conversion,
 * which is slow) and converted with dfl_f16_to_f32.
 *
 * Errors name the dump and the path: "run.h5: samples/000007/attn/map2: no such dataset".
 *
 * A dump is untrusted input and must hold all its data itself. Refused (DFL_ERR_FORMAT,
 * naming the object and the kind): a soft, external or user-defined link — by
 * dfl_dump_open in the root, /model, /samples and every sample group, elsewhere by any
 * function given a path through one — and, by every function that opens a dataset,
 * external storage, a virtual dataset, or a filter other than those HDF5 ships
 * (deflate, shuffle, fletcher32, szip, nbit, scaleoffset). External links are never
 * followed. HDF5's error printing is turned off in each thread that calls in.
 */
#ifndef DFL_DUMP_READ_H
#define DFL_DUMP_READ_H

#include <stddef.h>
#include <stdint.h>

#include "dump/dump.h"
#include "base/status.h"

#define DFL_DUMP_MAX_RANK 8

typedef struct dfl_dump_reader dfl_dump_reader;

/* One /samples/NNNNNN group: index = NNNNNN, id = its `id` attribute ("" if absent),
 * group = "samples/NNNNNN". Owned by the reader. */
typedef struct dfl_dump_sample {
    size_t index;
    const char *id;
    const char *group;
} dfl_dump_sample;

/* Shape and element type of a dataset. type is the stored type (DFL_H5_F16 for IEEE
 * half); is_string marks string datasets (type is then meaningless); chunk[] is the
 * chunk shape, or all 0 for contiguous storage. */
typedef struct dfl_dump_dset_info {
    int ndim;
    int64_t dims[DFL_DUMP_MAX_RANK];
    int64_t chunk[DFL_DUMP_MAX_RANK];
    dfl_h5_type type;
    int is_string;
} dfl_dump_dset_info;

/* ---------------------------------------------------------------- open/close */

/* Open a dump read-only. Checks the root attributes format == "difflens-dump" and
 * format_version <= DFL_DUMP_FORMAT_VERSION, the links of the groups above, and lists
 * the samples. DFL_ERR_IO (cannot open), DFL_ERR_FORMAT ("not a difflens dump ...", a
 * newer format_version, a link refused), DFL_ERR_NOMEM. The caller owns *out:
 * dfl_dump_close. */
dfl_status dfl_dump_open(const char *path, dfl_dump_reader **out, dfl_error *err);

/* Close and free; accepts NULL. */
void dfl_dump_close(dfl_dump_reader *r);

/* The path given to dfl_dump_open (owned by the reader). */
const char *dfl_dump_path(const dfl_dump_reader *r);

/* ---------------------------------------------------------------- attributes */

/* Read attribute `name` of the object at obj ("" or "/" for the root).
 * _str: a string attribute, *out malloc'ed (caller frees); _i64 / _f64: a numeric
 * scalar converted by HDF5. DFL_ERR_FORMAT when missing or of the wrong kind. */
dfl_status dfl_dump_get_attr_str(const dfl_dump_reader *r, const char *obj, const char *name, char **out,
                                 dfl_error *err);
dfl_status dfl_dump_get_attr_i64(const dfl_dump_reader *r, const char *obj, const char *name, int64_t *out,
                                 dfl_error *err);
dfl_status dfl_dump_get_attr_f64(const dfl_dump_reader *r, const char *obj, const char *name, double *out,
                                 dfl_error *err);

/* ------------------------------------------------------------------- samples */

/* Number of sample groups; samples are ordered by index. */
size_t dfl_dump_sample_count(const dfl_dump_reader *r);

/* The i-th sample (0 <= i < count), or NULL. Owned by the reader. */
const dfl_dump_sample *dfl_dump_sample_at(const dfl_dump_reader *r, size_t i);

/* Find a sample by id, or else by index when `key` is a decimal number. DFL_ERR_RANGE
 * naming the ids and index range present when none matches. *out is owned by r. */
dfl_status dfl_dump_sample_find(const dfl_dump_reader *r, const char *key, const dfl_dump_sample **out, dfl_error *err);

/* ------------------------------------------------------------------ datasets */

/* 1 when a dataset (or group) exists at path, else 0; 1 also when a link refused lies on
 * the way (the read that follows says so). */
int dfl_dump_exists(const dfl_dump_reader *r, const char *path);

/* Shape and type of the dataset at path. DFL_ERR_TENSOR when missing ("no such
 * dataset"), DFL_ERR_FORMAT when of an unsupported type or refused (above), DFL_ERR_HDF5. */
dfl_status dfl_dump_dataset_info(const dfl_dump_reader *r, const char *path, dfl_dump_dset_info *info, dfl_error *err);

/* Read a whole numeric dataset converted to `type` (F32, F64, I32, U8, U64, U32; not
 * F16) into caller-owned out[n]; n must equal the element count (DFL_ERR_TENSOR
 * otherwise, naming the shape). */
dfl_status dfl_dump_read(const dfl_dump_reader *r, const char *path, dfl_h5_type type, void *out, size_t n,
                         dfl_error *err);

/* The same into a malloc'ed buffer the caller owns (free()); *n gets the element count
 * (may be NULL). */
dfl_status dfl_dump_read_alloc(const dfl_dump_reader *r, const char *path, dfl_h5_type type, void **out, size_t *n,
                               dfl_error *err);

/* A 1-D string dataset: *out is a malloc'ed array of *n malloc'ed UTF-8 strings
 * (NULL entries become ""); free with dfl_dump_strings_free. */
dfl_status dfl_dump_read_strings(const dfl_dump_reader *r, const char *path, char ***out, size_t *n, dfl_error *err);
void dfl_dump_strings_free(char **s, size_t n);

/* ----------------------------------------------------- group-relative reads */

/* An open group for many reads relative to it: a reader of many small datasets per
 * sample (outliers) opens each sample's group once instead of walking every path from
 * the root on each call. The same refusals hold as for every read: each link on the
 * way is checked to be a hard link, and each dataset's storage to be inside the file. */
typedef struct dfl_dump_group dfl_dump_group;

/* Open group `path` (e.g. a sample's group, "samples/000003/outliers/hidden").
 * DFL_ERR_TENSOR when missing, DFL_ERR_FORMAT when a link on the way is refused,
 * DFL_ERR_HDF5, DFL_ERR_NOMEM. Close with dfl_dump_group_close (NULL ok); the reader
 * must outlive the group. */
dfl_status dfl_dump_group_open(const dfl_dump_reader *r, const char *path, dfl_dump_group **out, dfl_error *err);
void dfl_dump_group_close(dfl_dump_group *g);

/* Read dataset `name` of g (a relative path) into out when it is stored exactly as
 * asked: element type `type` (no conversion; not F16), rank nd, and dims[i] for every
 * i with dims[i] >= 0 (a negative entry takes any length and is set to the stored one;
 * out == NULL reads only the shape). 1 when read; 0 when it is missing, stored
 * otherwise, or refused (a link that is not hard, storage outside the file) — the
 * caller then reads it through dfl_dump_read, which gives the same numbers or names the
 * fault. Never fills an error record. */
int dfl_dump_group_read_exact(dfl_dump_group *g, const char *name, dfl_h5_type type, int nd, int64_t *dims, void *out);

/* ------------------------------------------------------------------ hyperslabs */

/* An open float dataset for repeated hyperslab reads (keeps HDF5's chunk cache warm). */
typedef struct dfl_dump_slab dfl_dump_slab;

/* Open the float (f16, f32 or f64) dataset at path. DFL_ERR_TENSOR when missing or not
 * floating point. The caller owns *out: dfl_dump_slab_close (NULL ok). */
dfl_status dfl_dump_slab_open(const dfl_dump_reader *r, const char *path, dfl_dump_slab **out, dfl_error *err);
const dfl_dump_dset_info *dfl_dump_slab_info(const dfl_dump_slab *s);

/* Read the box start[ndim] + count[ndim] as f32 into caller-owned out (row-major over
 * count, product(count) elements). Reads only the chunks the box touches.
 * DFL_ERR_RANGE when the box leaves the dataset, DFL_ERR_HDF5, DFL_ERR_NOMEM. */
dfl_status dfl_dump_slab_read_f32(dfl_dump_slab *s, const int64_t *start, const int64_t *count, float *out,
                                  dfl_error *err);
void dfl_dump_slab_close(dfl_dump_slab *s);

/* One-shot: open, read one box, close. */
dfl_status dfl_dump_read_slab_f32(const dfl_dump_reader *r, const char *path, const int64_t *start,
                                  const int64_t *count, float *out, dfl_error *err);

#endif
